//! Load curve (`--load-curve`): each path measured at several offered rates
//! in one run, and at its knee, so that the cost of each road can be read
//! against load: receive CPU per packet (the receiving threads, softirq and
//! ksoftirqd/threaded-NAPI kthreads on the receiving cores, the same sum for
//! every path) and latency percentiles. Busy polling costs a core at any
//! rate, interrupts cost per packet: the curves cross where each road wins.
//! Writes `load-curve.json`, `load-curve.csv` and `load-curve.svg` (two
//! panels: CPU per packet against rate, P99 against rate; one line per path).

use crate::report::Row;
use crate::sweep::Knee;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;

/// One measured point of a path's curve.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Point {
    /// `rate` (a `--curve-rates` entry) or `knee` (the search's highest passing rate).
    pub point: String,
    /// The rate asked for, packets/s.
    pub asked_pps: u64,
    /// The row measured there.
    #[serde(flatten)]
    pub row: Row,
}

#[derive(Serialize)]
struct CurveFile<'a> {
    points: &'a [Point],
    knees: &'a [Knee],
}

/// The points as a table: per path and size, one line per rate.
pub fn table(points: &[Point]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<28} {:>5} {:>6} {:>9} {:>9} {:>8} {:>9} {:>9} {:>8} {:>8} {:>12} {:>9} {:>9} {:>9}  mode",
        "path",
        "size",
        "point",
        "asked",
        "offered",
        "loss %",
        "insn/pkt",
        "work/pkt",
        "B ld/pkt",
        "B st/pkt",
        "CPU ns/pkt",
        "P50 us",
        "P99 us",
        "P99.9 us"
    );
    let opt = |v: Option<f64>, prec: usize| v.map_or("-".to_string(), |v| format!("{v:.prec$}"));
    for p in points {
        let r = &p.row;
        let loss = if r.sent > 0 {
            format!("{:.3}", r.lost.max(0) as f64 * 100.0 / r.sent as f64)
        } else {
            "-".into()
        };
        let _ = writeln!(
            s,
            "{:<28} {:>5} {:>6} {:>9} {:>9.0} {:>8} {:>9} {:>9} {:>8} {:>8} {:>12} {:>9} {:>9} {:>9}  {}",
            r.path,
            r.frame_size,
            p.point,
            p.asked_pps,
            r.offered_pps,
            loss,
            opt(r.instructions_per_packet, 0),
            opt(r.work_instructions_per_packet, 0),
            opt(r.bytes_loaded_per_packet, 0),
            opt(r.bytes_stored_per_packet, 0),
            opt(r.cpu_ns_per_pkt, 0),
            opt(r.p50_us, 1),
            opt(r.p99_us, 1),
            opt(r.p999_us, 1),
            if r.valid {
                r.mode.as_str()
            } else {
                r.note.as_str()
            }
        );
    }
    s
}

/// Write `load-curve.{json,csv,svg}` into `dir`.
///
/// # Errors
/// File or encoding errors, as text.
pub fn write_all(dir: &Path, points: &[Point], knees: &[Knee], title: &str) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let json =
        serde_json::to_string_pretty(&CurveFile { points, knees }).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("load-curve.json"), json).map_err(|e| e.to_string())?;
    crate::report::write_csv(&dir.join("load-curve.csv"), points)?;
    plot(&dir.join("load-curve.svg"), points, title, TIME_PANELS)?;
    if points
        .iter()
        .any(|p| p.row.work_instructions_per_packet.is_some())
    {
        std::fs::write(dir.join("load-curve-cost.md"), cost_table(points))
            .map_err(|e| e.to_string())?;
        plot(
            &dir.join("load-curve-cost.svg"),
            points,
            &format!("{title}: counted guest work per packet"),
            COUNT_PANELS,
        )?;
    }
    Ok(())
}

type Metric = fn(&Row) -> Option<f64>;

/// The time panels: procfs CPU per packet and P99.
const TIME_PANELS: [(&str, Metric); 2] = [
    (
        "receive CPU per packet, us (threads + softirq + kthreads)",
        |r| r.cpu_ns_per_pkt.map(|n| n / 1000.0),
    ),
    ("P99 latency, us", |r| r.p99_us),
];

/// The counted panels (docs/design/counting.md): work instructions and work
/// bytes (loaded + stored) per received packet.
const COUNT_PANELS: [(&str, Metric); 2] = [
    ("work instructions per packet (counted)", |r| {
        r.work_instructions_per_packet
    }),
    ("work bytes loaded + stored per packet (counted)", |r| {
        Some(r.work_bytes_loaded_per_packet? + r.work_bytes_stored_per_packet?)
    }),
];

/// The paths pollnic-1q is set against, in the cost table's ratio columns.
const RATIO_TO: [&str; 4] = [
    "kernel-afxdp",
    "kernel-afxdp-busypoll",
    "kernel-afpacket",
    "dpdk-testpmd",
];

/// The counted figures per size and rate as Markdown: a row per path with
/// all and work instructions, work bytes, the instruction-count projection
/// `1000 / work` (Mpps per core at one instruction per ns: a projection
/// from a count, not a measurement of silicon), and pollnic-1q's work
/// against the kernel's and testpmd's at the same asked rate.
pub fn cost_table(points: &[Point]) -> String {
    let mut s = String::new();
    let mut keys: Vec<(usize, u64)> = points
        .iter()
        .map(|p| (p.row.frame_size, p.asked_pps))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    for (size, asked) in keys {
        let here: Vec<&Row> = points
            .iter()
            .filter(|p| p.row.frame_size == size && p.asked_pps == asked && p.row.valid)
            .map(|p| &p.row)
            .collect();
        let _ = writeln!(s, "\n{size} B, asked {asked} pps:\n");
        let _ = writeln!(
            s,
            "| path | mode | offered pps | all insn/pkt | work insn/pkt | work bytes ld/st per pkt | Mpps/core @ 1 insn/ns | wake-ups/pkt | P50 / P99 µs |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|");
        for r in &here {
            let _ = writeln!(
                s,
                "| {} | {} | {:.0} | {} | {}{} | {} / {} | {} | {} | {} / {} |",
                r.path,
                r.mode,
                r.offered_pps,
                f(r.instructions_per_packet),
                f(r.work_instructions_per_packet),
                r.work_instructions_per_packet_low
                    .map_or(String::new(), |l| format!(" (≥ {l:.0})")),
                f(r.work_bytes_loaded_per_packet),
                f(r.work_bytes_stored_per_packet),
                r.work_instructions_per_packet
                    .filter(|w| *w > 0.0)
                    .map_or("-".into(), |w| format!("{:.2}", 1000.0 / w)),
                r.wakeups_per_packet
                    .map_or("-".into(), |w| format!("{w:.3}")),
                f(r.p50_us),
                f(r.p99_us),
            );
        }
        let work = |path: &str| {
            here.iter()
                .find(|r| r.path == path)
                .and_then(|r| r.work_instructions_per_packet)
        };
        let ratios: Vec<String> = RATIO_TO
            .iter()
            .filter_map(|o| Some(format!("{:.2} × {o}", work("pollnic-1q")? / work(o)?)))
            .collect();
        if !ratios.is_empty() {
            let _ = writeln!(
                s,
                "\npollnic-1q's work instructions per packet = {}",
                ratios.join(", ")
            );
        }
    }
    s
}

/// Two panels side by side (`panels`: label and metric) against the offered
/// rate (kpps), one line per path and size.
fn plot(
    file: &Path,
    points: &[Point],
    title: &str,
    panels_def: [(&str, Metric); 2],
) -> Result<(), String> {
    let root = SVGBackend::new(file, (1400, 650)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let root = root
        .titled(title, ("sans-serif", 16))
        .map_err(|e| e.to_string())?;
    let panels = root.split_evenly((1, 2));
    let mut series: Vec<(String, usize)> = Vec::new();
    for p in points.iter().filter(|p| p.row.valid) {
        let key = (p.row.path.clone(), p.row.frame_size);
        if !series.contains(&key) {
            series.push(key);
        }
    }
    let max_x = points
        .iter()
        .filter(|p| p.row.valid)
        .map(|p| p.row.offered_pps / 1000.0)
        .fold(1.0, f64::max)
        * 1.1;
    for (area, (label, metric)) in panels.iter().zip(panels_def) {
        let max_y = points
            .iter()
            .filter(|p| p.row.valid)
            .filter_map(|p| metric(&p.row))
            .fold(1.0, f64::max)
            * 1.15;
        let err = |e: DrawingAreaErrorKind<_>| e.to_string();
        let mut c = ChartBuilder::on(area)
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..max_x, (0.01f64..max_y).log_scale())
            .map_err(err)?;
        c.configure_mesh()
            .x_desc("offered kpps (achieved by the generator)")
            .y_desc(label)
            .draw()
            .map_err(err)?;
        for (i, (path, size)) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let mut pts: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| p.row.valid && &p.row.path == path && p.row.frame_size == *size)
                .filter_map(|p| Some((p.row.offered_pps / 1000.0, metric(&p.row)?.max(0.011))))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            c.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(err)?
                .label(format!("{path} {size} B"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
            c.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(err)?;
        }
        c.configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(err)?;
    }
    root.present().map_err(|e| e.to_string())
}
