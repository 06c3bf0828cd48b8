//! Capacity sweep: for each path and frame size, the highest offered rate
//! whose loss stays within a stated tolerance, found by a binary search over
//! the offered rate (the throughput test of RFC 2544 §26.1, with a loss
//! tolerance instead of strict zero loss, because emulation jitter makes
//! strict zero loss meaningless). Writes `sweep.json`, `sweep.csv` and
//! `sweep.svg` (received against offered per path, each knee marked).

use crate::report::Row;
use plotters::prelude::*;
use pollnic_examples::sweep::{SweepCfg, Trial};
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
    let (rows, r) = pollnic_examples::sweep::search(cfg, |t| {
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
    };
    (rows, knee)
}

/// The knees as a table, with each path's ratio to the first path's knee.
pub fn table(knees: &[Knee]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<20} {:>5} {:>16} {:>7} {:>10}  {:<14} note",
        "path", "size", "zero-loss pps", "trials", "tolerance", "mode"
    );
    for k in knees {
        let _ = writeln!(
            s,
            "{:<20} {:>5} {:>16} {:>7} {:>9}%  {:<14} {}",
            k.path,
            k.frame_size,
            k.zero_loss_pps
                .map_or("none passed".into(), |p| format!("{p:.0}")),
            k.trials,
            k.tolerance_pct,
            if k.mode.is_empty() { "-" } else { &k.mode },
            if k.generator_limited {
                "generator limit reached: the path may take more"
            } else {
                ""
            }
        );
    }
    s
}

/// `a / b` of two knees' rates, as text ("-" when either is missing).
pub fn ratio(knees: &[Knee], a: &str, b: &str, size: usize) -> String {
    let get = |p: &str| {
        knees
            .iter()
            .find(|k| k.path == p && k.frame_size == size)
            .and_then(|k| k.zero_loss_pps)
    };
    let limited = knees
        .iter()
        .any(|k| (k.path == a || k.path == b) && k.frame_size == size && k.generator_limited);
    match (get(a), get(b)) {
        (Some(x), Some(y)) if y > 0.0 => format!(
            "{:.2}{}",
            x / y,
            if limited {
                " (a knee is the generator's limit, not the path's)"
            } else {
                ""
            }
        ),
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
    let mut w =
        csv::Writer::from_path(dir.join(format!("{stem}.csv"))).map_err(|e| e.to_string())?;
    for r in trials {
        w.serialize(r).map_err(|e| e.to_string())?;
    }
    w.flush().map_err(|e| e.to_string())?;
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
