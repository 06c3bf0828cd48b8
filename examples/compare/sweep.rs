//! Capacity sweep: for each path and frame size, the highest offered rate
//! whose loss stays within a stated tolerance, found by a binary search over
//! the offered rate (the throughput test of RFC 2544 §26.1, with a loss
//! tolerance instead of strict zero loss, because emulation jitter makes
//! strict zero loss meaningless). Writes `sweep.json`, `sweep.csv` and
//! `sweep.svg` (received against offered per path, each knee marked).

use crate::report::Row;
use plotters::prelude::*;
use pollnic_tools::sweep::{SweepCfg, Trial};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;

/// The result for one path and frame size.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Knee {
    /// Receive path.
    pub path: String,
    /// Wire frame size in bytes (incl. FCS).
    pub frame_size: usize,
    /// Highest offered rate (as achieved by the generator) whose loss was
    /// within the tolerance, packets/s; `None` when no trial passed.
    pub zero_loss_pps: Option<f64>,
    /// The tolerance used, percent.
    pub tolerance_pct: f64,
    /// Trials run.
    pub trials: u32,
    /// The generator could not offer the rate asked for: the path may take more.
    pub generator_limited: bool,
    /// How the path received (the trials' `mode`, e.g. `xdp-drv copy`).
    #[serde(default)]
    pub mode: String,
    /// The lowest rate tried (as achieved, packets/s) and its loss in
    /// percent: what a path that passed no trial did at its best.
    #[serde(default)]
    pub lowest_tried: Option<(f64, f64)>,
}

/// What the search needs to know of a row.
pub fn trial_of(r: &Row) -> Trial {
    Trial {
        offered_pps: r.offered_pps,
        sent: r.sent,
        lost: r.lost.max(0) as u64,
        valid: r.valid,
    }
}

/// Search the rate for one path and size: `row_at(target_pps)` runs one
/// measurement. Returns every trial's row and the knee.
pub fn search(
    cfg: SweepCfg,
    path: &str,
    frame_size: usize,
    mut row_at: impl FnMut(u64) -> Row,
) -> (Vec<Row>, Knee) {
    let (rows, r) = pollnic_tools::sweep::search(cfg, |t| {
        let row = row_at(t);
        let trial = trial_of(&row);
        (row, trial)
    });
    let knee = Knee {
        path: path.to_string(),
        frame_size,
        zero_loss_pps: r.zero_loss_pps,
        tolerance_pct: cfg.tolerance_pct,
        trials: r.trials,
        generator_limited: r.generator_limited,
        mode: rows
            .iter()
            .rev()
            .find(|r| r.valid)
            .map(|r| r.mode.clone())
            .unwrap_or_default(),
        lowest_tried: rows
            .iter()
            .filter(|r| r.valid && r.sent > 0)
            .min_by(|a, b| a.offered_pps.total_cmp(&b.offered_pps))
            .map(|r| (r.offered_pps, 100.0 * r.lost.max(0) as f64 / r.sent as f64)),
    };
    (rows, knee)
}

/// The knees as a table whose columns fit their contents (no line wider than
/// the longest cell needs), then its footnotes: a rate marked `>=` is the
/// generator's limit, a lower bound that cannot be ranked against another;
/// a path that passed no trial shows the lowest rate tried and its loss.
pub fn table(knees: &[Knee]) -> String {
    let tol = knees.first().map_or(0.0, |k| k.tolerance_pct);
    let rate = format!("highest pps, loss <= {tol} %");
    let mut rows = vec![[
        "path".to_owned(),
        "size".to_owned(),
        rate,
        "trials".to_owned(),
        "mode".to_owned(),
    ]];
    let (mut bounded, mut failed) = (false, false);
    for k in knees {
        let cell = match (k.zero_loss_pps, k.lowest_tried) {
            (Some(p), _) if k.generator_limited => {
                bounded = true;
                format!(">= {p:.0}")
            }
            (Some(p), _) => format!("{p:.0}"),
            (None, Some((pps, loss))) => {
                failed = true;
                format!("none (at {pps:.0}: {loss:.1} % lost)")
            }
            (None, None) => "none (no valid trial)".to_owned(),
        };
        rows.push([
            k.path.clone(),
            k.frame_size.to_string(),
            cell,
            k.trials.to_string(),
            if k.mode.is_empty() {
                "-".into()
            } else {
                k.mode.clone()
            },
        ]);
    }
    let width = |c: usize| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0);
    let w: Vec<usize> = (0..5).map(width).collect();
    let mut s = String::new();
    for r in &rows {
        let line = format!(
            "{:<w0$}  {:>w1$}  {:>w2$}  {:>w3$}  {}",
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            w0 = w[0],
            w1 = w[1],
            w2 = w[2],
            w3 = w[3]
        );
        let _ = writeln!(s, "{}", line.trim_end());
    }
    if bounded {
        let _ = writeln!(
            s,
            ">= : the generator could not offer more; the path may take more, so such \
             rows are lower bounds and are not ranked against each other"
        );
    }
    if failed {
        let _ = writeln!(
            s,
            "none: no trial of the search passed; the lowest rate tried and its loss follow"
        );
    }
    s
}

/// `a / b` of two knees' rates, as text: only where both were measured; "-"
/// when either is missing, and "not measured" when either is the
/// generator's limit (a bound divided by a bound says nothing).
pub fn ratio(knees: &[Knee], a: &str, b: &str, size: usize) -> String {
    let get = |p: &str| knees.iter().find(|k| k.path == p && k.frame_size == size);
    match (get(a), get(b)) {
        (Some(x), Some(y)) if x.generator_limited || y.generator_limited => {
            "not measured (a knee is the generator's limit)".into()
        }
        (Some(x), Some(y)) => match (x.zero_loss_pps, y.zero_loss_pps) {
            (Some(x), Some(y)) if y > 0.0 => format!("{:.2}", x / y),
            _ => "-".into(),
        },
        _ => "-".into(),
    }
}

#[derive(Serialize)]
struct SweepFile<'a> {
    knees: &'a [Knee],
    trials: &'a [Row],
}

/// Write `<stem>.json` (knees and trials), `<stem>.csv` (trials) and
/// `<stem>.svg` into `dir` (stem `sweep`, or `forward-sweep`).
///
/// # Errors
/// File or encoding errors, as text.
pub fn write_all(
    dir: &Path,
    stem: &str,
    trials: &[Row],
    knees: &[Knee],
    title: &str,
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let json =
        serde_json::to_string_pretty(&SweepFile { knees, trials }).map_err(|e| e.to_string())?;
    std::fs::write(dir.join(format!("{stem}.json")), json).map_err(|e| e.to_string())?;
    crate::report::write_csv(&dir.join(format!("{stem}.csv")), trials)?;
    plot(&dir.join(format!("{stem}.svg")), trials, knees, title)
}

/// Received against offered kpps, one line per path and size, the knee
/// circled, the lossless diagonal dashed.
fn plot(file: &Path, trials: &[Row], knees: &[Knee], title: &str) -> Result<(), String> {
    let valid: Vec<&Row> = trials.iter().filter(|r| r.valid).collect();
    let max = valid
        .iter()
        .map(|r| r.offered_pps.max(r.rx_pps) / 1000.0)
        .fold(1.0, f64::max)
        * 1.1;
    let root = SVGBackend::new(file, (1000, 650)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let err = |e: DrawingAreaErrorKind<_>| e.to_string();
    let mut c = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 16))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..max, 0f64..max)
        .map_err(err)?;
    c.configure_mesh()
        .x_desc("offered kpps (achieved by the generator)")
        .y_desc("received kpps")
        .draw()
        .map_err(err)?;
    c.draw_series(DashedLineSeries::new(
        vec![(0.0, 0.0), (max, max)],
        6,
        4,
        BLACK.mix(0.4).into(),
    ))
    .map_err(err)?;
    for (i, k) in knees.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let mut pts: Vec<(f64, f64)> = valid
            .iter()
            .filter(|r| r.path == k.path && r.frame_size == k.frame_size)
            .map(|r| {
                (
                    r.offered_pps / 1000.0,
                    r.rx_pps.min(r.offered_pps * 1.05) / 1000.0,
                )
            })
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        c.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(format!(
                "{} {} B: {}",
                k.path,
                k.frame_size,
                k.zero_loss_pps.map_or("no rate passed".into(), |p| format!(
                    "knee {:.0} kpps",
                    p / 1000.0
                ))
            ))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
        c.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(err)?;
        if let Some(z) = k.zero_loss_pps {
            let y = pts
                .iter()
                .find(|p| (p.0 - z / 1000.0).abs() < 1e-6)
                .map_or(z / 1000.0, |p| p.1);
            c.draw_series(std::iter::once(Circle::new(
                (z / 1000.0, y),
                9,
                color.stroke_width(2),
            )))
            .map_err(err)?;
        }
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(err)?;
    root.present().map_err(|e| e.to_string())
}
