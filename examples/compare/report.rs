//! The comparison's outputs: a terminal table, and the same rows as JSON and
//! CSV, plus an SVG chart of throughput and latency per path.

use plotters::prelude::*;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;

/// One measured (or missing) row.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    /// Receive path.
    pub path: String,
    /// Wire frame size in bytes (incl. FCS).
    pub frame_size: usize,
    /// Generator's offered rate, packets/s.
    pub offered_pps: f64,
    /// Generator's count.
    pub sent: u64,
    /// Receiver's count.
    pub received: u64,
    /// sent − received (QEMU does not count drops).
    pub lost: i64,
    /// Of `lost`, frames the generator's port took but never transmitted
    /// (its `tx_packets` counter below `sent`); the rest were not received.
    #[serde(default)]
    pub not_transmitted: Option<u64>,
    /// Received packets/s over the receive window.
    pub rx_pps: f64,
    /// Received L2 Mbit/s (no FCS).
    pub payload_mbps: f64,
    /// Received L1 Mbit/s (plus FCS, preamble, gap).
    pub l1_mbps: f64,
    /// Receiver CPU per received packet, ns (for the kernel path incl. softirq).
    pub cpu_ns_per_pkt: Option<f64>,
    /// Latency percentiles, µs (None when the path cannot time frames).
    pub p50_us: Option<f64>,
    /// P99, µs.
    pub p99_us: Option<f64>,
    /// P99.9, µs.
    pub p999_us: Option<f64>,
    /// Max, µs.
    pub max_us: Option<f64>,
    /// Longest gap between two RX polls, ms (paths that poll: pollnic).
    #[serde(default)]
    pub max_poll_gap_ms: Option<f64>,
    /// How the path receives: `busy-poll`, `irq/NAPI`, or for AF_XDP the
    /// XDP attach and the socket's mode (`xdp-drv copy`, `xdp-drv zero-copy`).
    #[serde(default)]
    pub mode: String,
    /// Forwarding rows: frames the forwarder received on port 1.
    #[serde(default)]
    pub fwd_received: Option<u64>,
    /// Forwarding rows: frames the forwarder sent back out of port 1.
    #[serde(default)]
    pub fwd_sent: Option<u64>,
    /// Forwarding rows: returned frames whose MACs the mode should not have
    /// produced (io: untouched; macswap: swapped); should be 0.
    #[serde(default)]
    pub wrong_macs: Option<u64>,
    /// Counted (testbed counter): all guest instructions per received packet
    /// on the receiving vCPUs, user + kernel, idle loop left out.
    #[serde(default)]
    pub instructions_per_packet: Option<f64>,
    /// Counted: [`Self::instructions_per_packet`] less the empty polls (busy
    /// polling) or the background (others): see `work_method`.
    #[serde(default)]
    pub work_instructions_per_packet: Option<f64>,
    /// Counted: the lower bound of the work, where the path gives a range
    /// (testpmd: see `work_method`); the work figure is then the upper bound.
    #[serde(default)]
    pub work_instructions_per_packet_low: Option<f64>,
    /// Counted: user-mode instructions per received packet.
    #[serde(default)]
    pub user_instructions_per_packet: Option<f64>,
    /// Counted: kernel instructions per received packet.
    #[serde(default)]
    pub kernel_instructions_per_packet: Option<f64>,
    /// Counted: bytes loaded by the receiving vCPUs per received packet.
    #[serde(default)]
    pub bytes_loaded_per_packet: Option<f64>,
    /// Counted: bytes stored by the receiving vCPUs per received packet.
    #[serde(default)]
    pub bytes_stored_per_packet: Option<f64>,
    /// Counted: bytes loaded per received packet less the empty polls' or the
    /// background's (as `work_instructions_per_packet`).
    #[serde(default)]
    pub work_bytes_loaded_per_packet: Option<f64>,
    /// Counted: bytes stored per received packet, likewise.
    #[serde(default)]
    pub work_bytes_stored_per_packet: Option<f64>,
    /// Counted: MMIO reads (device register loads: on silicon a PCIe round
    /// trip each, ~0.5-1 µs) on the receiving vCPUs per received packet.
    #[serde(default)]
    pub mmio_reads_per_packet: Option<f64>,
    /// Counted: MMIO writes (tail, doorbell, interrupt-mask and kick writes:
    /// posted, but each one a PCIe transaction) per received packet.
    #[serde(default)]
    pub mmio_writes_per_packet: Option<f64>,
    /// Counted, marked loops: MMIO reads per burst with packets.
    #[serde(default)]
    pub mmio_reads_per_burst: Option<f64>,
    /// Counted, marked loops: MMIO writes per burst with packets.
    #[serde(default)]
    pub mmio_writes_per_burst: Option<f64>,
    /// Counted, interrupt-driven rows: MMIO reads per wake-up (see
    /// `wakeups_per_packet`).
    #[serde(default)]
    pub mmio_reads_per_wakeup: Option<f64>,
    /// Counted: the generator's vCPU, MMIO writes per sent packet (pollnic TX).
    #[serde(default)]
    pub gen_mmio_writes_per_sent: Option<f64>,
    /// The receiving port's hard interrupts per received packet: its MSI-X
    /// vectors' counts in /proc/interrupts, every CPU, over the send window.
    #[serde(default)]
    pub interrupts_per_packet: Option<f64>,
    /// Counted: the MMIO sites with the most accesses per received packet on
    /// the receiving vCPUs (register and function), from the profile.
    #[serde(default)]
    pub top_mmio: Vec<crate::cost::TopMmio>,
    /// On hardware: the CPU's counters (`--pmu`) per received packet, every
    /// CPU but the generator's, system-wide, over the send window: cycles,
    /// instructions, LLC-loads, LLC-load-misses (`--pmu software`: the
    /// kernel's software events). Empty where there are none (`pmu_note`).
    #[serde(default)]
    pub pmu_per_packet: Vec<crate::pmu::PmuFigure>,
    /// Which events `pmu_per_packet` holds, or why there are none ("no PMU: ...").
    #[serde(default)]
    pub pmu_note: String,
    /// Counted, cache model (`--count-cache`; a model under QEMU/TCG, not the
    /// hardware): line accesses that missed L1D per packet on the counted
    /// vCPUs. Absent (not 0) without the model: `cache_note` says why.
    #[serde(default)]
    pub l1d_misses_per_packet: Option<f64>,
    /// Counted, cache model: line accesses that missed L2 per packet.
    #[serde(default)]
    pub l2_misses_per_packet: Option<f64>,
    /// Counted, cache model: LLC misses per packet, the device's writes
    /// allocating in the LLC (DDIO).
    #[serde(default)]
    pub llc_misses_per_packet: Option<f64>,
    /// Counted, cache model: LLC misses per packet without DDIO (the device's
    /// writes go to memory).
    #[serde(default)]
    pub llc_misses_no_ddio_per_packet: Option<f64>,
    /// Counted, cache model: lines found written by the device per packet (a
    /// lower bound: the byte shadow sees changed bytes a CPU had loaded).
    #[serde(default)]
    pub ext_lines_per_packet: Option<f64>,
    /// What the cache figures are, or why a row has none.
    #[serde(default)]
    pub cache_note: String,
    /// Counted, marked loops: bursts with packets per received packet.
    #[serde(default)]
    pub bursts_per_packet: Option<f64>,
    /// Counted, marked loops: instructions of a packet alone in its burst
    /// (does not depend on how the row batched: the figure two runs agree on).
    #[serde(default)]
    pub burst1_instructions_per_packet: Option<f64>,
    /// Counted, marked loops: of those, the user-mode instructions.
    #[serde(default)]
    pub burst1_user_instructions_per_packet: Option<f64>,
    /// Counted, marked loops: bytes loaded by a packet alone in its burst.
    #[serde(default)]
    pub burst1_bytes_loaded_per_packet: Option<f64>,
    /// Counted, marked loops: bytes stored by a packet alone in its burst.
    #[serde(default)]
    pub burst1_bytes_stored_per_packet: Option<f64>,
    /// Counted, marked loops: fit `work = per_burst x bursts + per_packet x
    /// packets` over the row's bursts of one and of several: the per-packet part.
    #[serde(default)]
    pub fit_instructions_per_packet: Option<f64>,
    /// The same fit: the per-burst part.
    #[serde(default)]
    pub fit_instructions_per_burst: Option<f64>,
    /// Counted: empty polls per received packet (busy-polling paths that count them).
    #[serde(default)]
    pub empty_polls_per_packet: Option<f64>,
    /// How the work figure was made (empty polls or background subtracted, with the numbers).
    #[serde(default)]
    pub work_method: String,
    /// Counted: the generator's vCPU, instructions per sent packet (pollnic TX
    /// with its pacing loop).
    #[serde(default)]
    pub gen_instructions_per_sent: Option<f64>,
    /// Counted, marked: the generator's sending turns per sent packet
    /// (pollnic TX: frames filled and the TX burst, without the pacing loop).
    #[serde(default)]
    pub gen_work_instructions_per_sent: Option<f64>,
    /// Counted: instructions per received packet on each vCPU (`vcpuN X`, the
    /// generator's left out).
    #[serde(default)]
    pub vcpu_instructions_per_packet: String,
    /// Counted: the functions with the most instructions per received packet
    /// on the receiving vCPUs (`--top-functions`), from the plugin's profile.
    #[serde(default)]
    pub top_functions: Vec<crate::cost::TopFunction>,
    /// Which instructions `top_functions` come from, and how much of the
    /// counted figure the profile holds.
    #[serde(default)]
    pub top_functions_basis: String,
    /// The profile's instructions over the counted figure they stand for.
    #[serde(default)]
    pub top_functions_coverage: Option<f64>,
    /// `rx`: the counted figures are per received packet on the receiving
    /// vCPUs; `tx` (the `tx-*` rows): per **sent** packet on the sending
    /// vCPU(s), the receiver's vCPU left out. Empty in files written before
    /// it existed (= `rx`).
    #[serde(default)]
    pub direction: String,
    /// Wake-ups per received frame: pollnic's interrupt modes, sleeps on the
    /// queue's vector; the kernel's interrupt rows, NET_RX softirqs (every
    /// CPU). Warm-up frames included on both sides.
    #[serde(default)]
    pub wakeups_per_packet: Option<f64>,
    /// pollnic adaptive mode: the spin budget in use at the end of the row, µs.
    #[serde(default)]
    pub spin_budget_us: Option<f64>,
    /// pollnic interrupt modes: the vector's EITR at the end of the row, µs.
    #[serde(default)]
    pub itr_usecs: Option<u32>,
    /// pollnic interrupt modes: interrupts taken per sleep (QEMU's igb
    /// signals a throttled vector once more when its EITR timer expires).
    #[serde(default)]
    pub interrupts_per_wakeup: Option<f64>,
    /// pollnic interrupt modes: whether this CPU and kernel offer WAITPKG
    /// (UMONITOR/UMWAIT); no receive mode uses it.
    #[serde(default)]
    pub waitpkg: Option<bool>,
    /// Projected, not measured: ns per packet on one Xeon Platinum 8380
    /// core at 2.3 GHz from this row's counts under QEMU/TCG
    /// (`project.rs`, docs/design/projection.md). None, never 0, when a
    /// count is missing: `projection_note` names it.
    #[serde(default)]
    pub projected_ns_per_packet: Option<f64>,
    /// Projected ns per packet, every constant at the end of its range that
    /// gives the shorter time.
    #[serde(default)]
    pub projected_ns_per_packet_low: Option<f64>,
    /// Projected ns per packet, every constant at the end that gives the
    /// longer time (misses summed as if serial: an upper bound).
    #[serde(default)]
    pub projected_ns_per_packet_high: Option<f64>,
    /// Projected million packets/s on that one core: 1000 / `projected_ns_per_packet`.
    #[serde(default)]
    pub projected_mpps_per_core: Option<f64>,
    /// Projected Mpps, the low figure: 1000 / `projected_ns_per_packet_high`.
    #[serde(default)]
    pub projected_mpps_per_core_low: Option<f64>,
    /// Projected Mpps, the high figure: 1000 / `projected_ns_per_packet_low`.
    #[serde(default)]
    pub projected_mpps_per_core_high: Option<f64>,
    /// What the projection is made from, or which counts the row lacks.
    #[serde(default)]
    pub projection_note: String,
    /// Why a row is missing, or what to know about it.
    pub note: String,
    /// False when the row has no valid measurement (see `note`).
    pub valid: bool,
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.prec$}"))
}

/// The terminal table.
pub fn table(rows: &[Row]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<20} {:>5} {:>8} {:>8} {:>8} {:>8} {:>6} {:>6} {:>6} {:>7} {:>9} {:>9} {:>9} {:>7} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>7}  mode",
        "path",
        "size",
        "insn/pkt",
        "work/pkt",
        "B ld/pkt",
        "B st/pkt",
        "mmio r",
        "mmio w",
        "irq",
        "proj ns",
        "offered",
        "sent",
        "received",
        "lost",
        "rx pps",
        "Mb/s L2",
        "Mb/s L1",
        "cpu/pkt",
        "P50 µs",
        "P99 µs",
        "P99.9 µs",
        "max µs",
        "gap ms"
    );
    for r in rows {
        if !r.valid {
            let _ = writeln!(
                s,
                "{:<20} {:>5}  no result: {}",
                r.path, r.frame_size, r.note
            );
            continue;
        }
        let _ = writeln!(
            s,
            "{:<20} {:>5} {:>8} {:>8} {:>8} {:>8} {:>6} {:>6} {:>6} {:>7} {:>9.0} {:>9} {:>9} {:>7} {:>9.0} {:>8.1} {:>8.1} {:>8} {:>8} {:>8} {:>9} {:>9} {:>7}  {}",
            r.path,
            r.frame_size,
            opt(r.instructions_per_packet, 0),
            opt(r.work_instructions_per_packet, 0),
            opt(r.bytes_loaded_per_packet, 0),
            opt(r.bytes_stored_per_packet, 0),
            opt(r.mmio_reads_per_packet, 2),
            opt(r.mmio_writes_per_packet, 2),
            opt(r.interrupts_per_packet, 2),
            opt(r.projected_ns_per_packet, 0),
            r.offered_pps,
            r.sent,
            r.received,
            r.lost,
            r.rx_pps,
            r.payload_mbps,
            r.l1_mbps,
            r.cpu_ns_per_pkt.map_or("-".into(), |c| format!("{:.1}µs", c / 1000.0)),
            opt(r.p50_us, 0),
            opt(r.p99_us, 0),
            opt(r.p999_us, 0),
            opt(r.max_us, 0),
            opt(r.max_poll_gap_ms, 1),
            if r.mode.is_empty() { "-" } else { &r.mode }
        );
    }
    for r in rows.iter().filter(|r| r.valid && !r.note.is_empty()) {
        let _ = writeln!(s, "  {} {}: {}", r.path, r.frame_size, r.note);
    }
    s.push_str(&pmu_text(rows));
    s.push_str(&cache_text(rows));
    s.push_str(&projection_text(rows));
    s
}

/// Each projected row's figure with its low-high range, then what the
/// projection is; when no row has one, one line saying why.
fn projection_text(rows: &[Row]) -> String {
    let mut s = String::new();
    for r in rows.iter().filter(|r| r.valid) {
        let (Some(ns), Some(low), Some(high), Some(mpps), Some(mpps_low), Some(mpps_high)) = (
            r.projected_ns_per_packet,
            r.projected_ns_per_packet_low,
            r.projected_ns_per_packet_high,
            r.projected_mpps_per_core,
            r.projected_mpps_per_core_low,
            r.projected_mpps_per_core_high,
        ) else {
            continue;
        };
        let _ = writeln!(
            s,
            "  {} {}: projected {ns:.0} ns per packet ({low:.0}-{high:.0}), \
             {mpps:.2} Mpps per core ({mpps_low:.2}-{mpps_high:.2})",
            r.path, r.frame_size
        );
    }
    let first = rows
        .iter()
        .find(|r| r.valid && !r.projection_note.is_empty());
    if let Some(r) = first {
        let what = if s.is_empty() {
            "Projection"
        } else {
            "Projection (proj ns)"
        };
        let _ = writeln!(s, "{what}: {}", r.projection_note);
    }
    s
}

/// The cache model's figures per packet of each row that has them, and
/// what they are; nothing when no row has them.
fn cache_text(rows: &[Row]) -> String {
    let mut s = String::new();
    for r in rows.iter().filter(|r| r.valid) {
        let (Some(l1d), Some(l2), Some(llc), Some(no_ddio), Some(ext)) = (
            r.l1d_misses_per_packet,
            r.l2_misses_per_packet,
            r.llc_misses_per_packet,
            r.llc_misses_no_ddio_per_packet,
            r.ext_lines_per_packet,
        ) else {
            continue;
        };
        let _ = writeln!(
            s,
            "  {} {}: cache model misses per packet: L1D {l1d:.2}, L2 {l2:.2}, LLC {llc:.2} \
             (without DDIO {no_ddio:.2}); device-written lines {ext:.2}",
            r.path, r.frame_size
        );
    }
    if let Some(r) = rows
        .iter()
        .find(|r| r.valid && r.l1d_misses_per_packet.is_some())
    {
        let _ = writeln!(s, "Cache model: {}", r.cache_note);
    }
    s
}

/// The CPU's counters per packet of each row (`--pmu`), or, when no row has
/// them, one line saying why.
fn pmu_text(rows: &[Row]) -> String {
    let mut s = String::new();
    for r in rows
        .iter()
        .filter(|r| r.valid && !r.pmu_per_packet.is_empty())
    {
        let figures: Vec<String> = r
            .pmu_per_packet
            .iter()
            .map(|f| format!("{} {:.1}", f.event, f.per_packet))
            .collect();
        let _ = writeln!(
            s,
            "  {} {}: CPU counters per packet: {}",
            r.path,
            r.frame_size,
            figures.join(", ")
        );
    }
    if s.is_empty() {
        if let Some(r) = rows.iter().find(|r| r.valid && !r.pmu_note.is_empty()) {
            let _ = writeln!(s, "CPU counters (--pmu): {}", r.pmu_note);
        }
    }
    s
}

/// Each counted row's top functions (`--top-functions`), instructions per
/// received packet, with the basis they come from; empty when no row has them.
pub fn top_functions_text(rows: &[Row]) -> String {
    let mut s = String::new();
    for r in rows
        .iter()
        .filter(|r| r.valid && !r.top_functions.is_empty())
    {
        let _ = writeln!(
            s,
            "{} {} B at {:.0} pps: instructions per packet by function ({})",
            r.path, r.frame_size, r.offered_pps, r.top_functions_basis
        );
        for f in &r.top_functions {
            let _ = writeln!(s, "  {:>10.1}  {}", f.instructions_per_packet, f.function);
        }
        if !r.top_mmio.is_empty() {
            let _ = writeln!(s, "  MMIO accesses per packet by site (receiving vCPUs):");
            for m in &r.top_mmio {
                let _ = writeln!(s, "  {:>10.3}  {}", m.accesses_per_packet, m.site);
            }
        }
    }
    s
}

/// Write `<stem>.json`, `<stem>.csv` and `<stem>.svg` into `dir` (stem
/// `compare`, or `forward` for forwarding rows).
///
/// # Errors
/// File or encoding errors, as text.
pub fn write_all(dir: &Path, stem: &str, rows: &[Row], title: &str) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let json = serde_json::to_string_pretty(rows).map_err(|e| e.to_string())?;
    std::fs::write(dir.join(format!("{stem}.json")), json).map_err(|e| e.to_string())?;
    write_csv(&dir.join(format!("{stem}.csv")), rows)?;
    plot(&dir.join(format!("{stem}.svg")), rows, title)?;
    plot_projection(&dir.join(projection_file(stem)), rows)
}

/// The projection chart's file name beside `<stem>.svg`: `projection.svg`
/// for `compare`, `<stem>-projection.svg` for the others.
pub fn projection_file(stem: &str) -> String {
    if stem == "compare" {
        "projection.svg".into()
    } else {
        format!("{stem}-projection.svg")
    }
}

/// Write `items` as CSV, one column per field of their JSON objects (csv
/// itself serializes neither a flattened struct nor a list field: a list
/// goes into its cell as JSON text).
///
/// # Errors
/// File or encoding errors, as text.
pub fn write_csv<T: Serialize>(path: &Path, items: &[T]) -> Result<(), String> {
    let mut w = csv::Writer::from_path(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let objects: Vec<serde_json::Map<String, serde_json::Value>> = items
        .iter()
        .map(|p| match serde_json::to_value(p) {
            Ok(serde_json::Value::Object(m)) => Ok(m),
            Ok(_) => Err("a row is not a JSON object".to_string()),
            Err(e) => Err(e.to_string()),
        })
        .collect::<Result<_, _>>()?;
    // The header is every field any row has, in first-seen order, and a
    // row without a field gets an empty cell: rows of one file need not
    // carry the same optional fields.
    let mut header: Vec<&String> = Vec::new();
    for key in objects.iter().flat_map(|o| o.keys()) {
        if !header.contains(&key) {
            header.push(key);
        }
    }
    if !objects.is_empty() {
        w.write_record(&header).map_err(|e| e.to_string())?;
    }
    for o in &objects {
        w.write_record(header.iter().map(|k| match o.get(k.as_str()) {
            None | Some(serde_json::Value::Null) => String::new(),
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        }))
        .map_err(|e| e.to_string())?;
    }
    w.flush().map_err(|e| e.to_string())
}

/// Re-draw `compare.svg` and `projection.svg` in `dir` from its
/// `compare.json`, the projection made again from the file's counts.
///
/// # Errors
/// File or decoding errors, as text.
pub fn replot(dir: &Path, title: &str) -> Result<(), String> {
    let file = dir.join("compare.json");
    let json = std::fs::read_to_string(&file).map_err(|e| {
        format!(
            "{}: {e}: pass --out <folder holding a compare.json from an earlier run>",
            file.display()
        )
    })?;
    let mut rows: Vec<Row> = serde_json::from_str(&json).map_err(|e| e.to_string())?;
    // The projection is arithmetic on the counts: made again with the
    // constants of this build (a file older than the projection has none).
    rows.iter_mut().for_each(crate::project::apply);
    print!("{}", table(&rows));
    plot(&dir.join("compare.svg"), &rows, title)?;
    plot_projection(&dir.join(projection_file("compare")), &rows)
}

/// A short label for a path on a chart's axis.
fn short(p: &str) -> String {
    match p {
        "pollnic-1q" => "pn-1q",
        "pollnic-1q-rxonly" => "pn-1q-ro",
        "pollnic-1q-adaptive" => "pn-1q-adpt",
        "pollnic-1q-irq" => "pn-1q-irq",
        "pollnic-2q" => "pn-2q",
        "kernel-afpacket" => "afpkt",
        "kernel-recvmmsg" => "mmsg",
        "kernel-afxdp" => "afxdp",
        "pollnic-fwd-io" => "pn-io",
        "pollnic-fwd-macswap" => "pn-mswap",
        "dpdk-testpmd-io" => "dpdk-io",
        "dpdk-testpmd-macswap" => "dpdk-mswap",
        "dpdk-testpmd" => "dpdk",
        other => {
            return other
                .replace("pollnic-1q-adaptive-eitr", "pn-1q-adpt-e")
                .replace("pollnic-1q-irq-eitr", "pn-1q-irq-e")
        }
    }
    .to_string()
}

/// A formatter for an axis whose whole numbers index `labels`: the label
/// at a whole number, nothing between.
fn label_at(labels: &[String]) -> impl Fn(&f64) -> String + '_ {
    move |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 0.01 && i >= 0.0 {
            labels.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    }
}

/// One horizontal bar per projected row at its middle figure, ns per
/// packet, with a whisker from its low to its high figure. Titled as what
/// it is: a projection from counts under QEMU/TCG, not a measurement.
fn plot_projection(file: &Path, rows: &[Row]) -> Result<(), String> {
    let projected: Vec<(&Row, f64, f64, f64)> = rows
        .iter()
        .filter(|r| r.valid)
        .filter_map(|r| {
            Some((
                r,
                r.projected_ns_per_packet?,
                r.projected_ns_per_packet_low?,
                r.projected_ns_per_packet_high?,
            ))
        })
        .collect();
    // The first row on top: row i at y = len - 1 - i.
    let labels: Vec<String> = projected
        .iter()
        .rev()
        .map(|(r, ..)| format!("{}/{}B", short(&r.path), r.frame_size))
        .collect();
    let y = |i: usize| (projected.len() - 1 - i) as f64;
    let n = projected.len().max(1);
    let max_ns = projected.iter().map(|p| p.3).fold(1.0, f64::max) * 1.1;
    let root = SVGBackend::new(file, (1100, 120 + 40 * n as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let title = format!(
        "PROJECTION, not a measurement: ns per packet on {}",
        crate::project::CPU
    );
    let root = root
        .titled(&title, ("sans-serif", 18))
        .map_err(|e| e.to_string())?;
    let err = |e: DrawingAreaErrorKind<_>| e.to_string();
    let why_none = rows
        .iter()
        .find(|r| r.valid && !r.projection_note.is_empty())
        .filter(|_| projected.is_empty());
    let caption = match why_none {
        Some(r) => r.projection_note.clone(),
        None => "from counts under QEMU/TCG; bar: middle figure, whisker: low to high \
                 (docs/design/projection.md)"
            .to_string(),
    };
    let mut c = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 13))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(130)
        .build_cartesian_2d(0f64..max_ns, -0.5f64..n as f64 - 0.5)
        .map_err(err)?;
    c.configure_mesh()
        .disable_y_mesh()
        .y_labels(n)
        .y_label_formatter(&label_at(&labels))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .x_desc("projected ns per packet (not measured)")
        .draw()
        .map_err(err)?;
    c.draw_series(projected.iter().enumerate().map(|(i, p)| {
        let y = y(i);
        Rectangle::new([(0.0, y - 0.3), (p.1, y + 0.3)], GREEN.mix(0.5).filled())
    }))
    .map_err(err)?;
    for (i, p) in projected.iter().enumerate() {
        let y = y(i);
        let lines = [
            vec![(p.2, y), (p.3, y)],
            vec![(p.2, y - 0.15), (p.2, y + 0.15)],
            vec![(p.3, y - 0.15), (p.3, y + 0.15)],
        ];
        c.draw_series(lines.into_iter().map(|l| PathElement::new(l, BLACK)))
            .map_err(err)?;
    }
    root.present().map_err(|e| e.to_string())
}

/// Two bar charts: received kpps and P50/P99 latency, per path and frame size.
fn plot(file: &Path, rows: &[Row], title: &str) -> Result<(), String> {
    let valid: Vec<&Row> = rows.iter().filter(|r| r.valid).collect();
    let labels: Vec<String> = valid
        .iter()
        .map(|r| format!("{}/{}B", short(&r.path), r.frame_size))
        .collect();
    let label_at = label_at(&labels);
    let n = valid.len().max(1);
    let root = SVGBackend::new(file, (1100, 700)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let root = root
        .titled(title, ("sans-serif", 18))
        .map_err(|e| e.to_string())?;
    let (top, bottom) = root.split_vertically(340);
    let err = |e: DrawingAreaErrorKind<_>| e.to_string();

    let max_kpps = valid.iter().map(|r| r.rx_pps / 1000.0).fold(1.0, f64::max) * 1.15;
    let mut c = ChartBuilder::on(&top)
        .caption("received kpps (offered rate dashed)", ("sans-serif", 14))
        .margin(10)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0f64..max_kpps)
        .map_err(err)?;
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&label_at)
        .x_desc("pn = pollnic (1 or 2 RSS queues), afpkt = kernel AF_PACKET TPACKET_V3, mmsg = kernel recvmmsg (UDP), afxdp = kernel AF_XDP, dpdk = testpmd rxonly; -io/-mswap: forwarded back, round trip")
        .y_desc("kpps")
        .draw()
        .map_err(err)?;
    c.draw_series(valid.iter().enumerate().map(|(i, r)| {
        Rectangle::new(
            [(i as f64 - 0.35, 0.0), (i as f64 + 0.35, r.rx_pps / 1000.0)],
            BLUE.mix(0.6).filled(),
        )
    }))
    .map_err(err)?;
    c.draw_series(valid.iter().enumerate().map(|(i, r)| {
        PathElement::new(
            vec![
                (i as f64 - 0.4, r.offered_pps / 1000.0),
                (i as f64 + 0.4, r.offered_pps / 1000.0),
            ],
            BLACK,
        )
    }))
    .map_err(err)?;

    let max_lat = valid.iter().filter_map(|r| r.p99_us).fold(1.0, f64::max) * 1.15;
    let mut c = ChartBuilder::on(&bottom)
        .caption(
            "latency µs: P50 (dark) and P99 (light); none for testpmd",
            ("sans-serif", 14),
        )
        .margin(10)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, (1f64..max_lat).log_scale())
        .map_err(err)?;
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&label_at)
        .y_desc("µs (log)")
        .draw()
        .map_err(err)?;
    c.draw_series(valid.iter().enumerate().filter_map(|(i, r)| {
        r.p99_us.map(|p| {
            Rectangle::new(
                [(i as f64, 1.0), (i as f64 + 0.35, p.max(1.0))],
                RED.mix(0.35).filled(),
            )
        })
    }))
    .map_err(err)?;
    c.draw_series(valid.iter().enumerate().filter_map(|(i, r)| {
        r.p50_us.map(|p| {
            Rectangle::new(
                [(i as f64 - 0.35, 1.0), (i as f64, p.max(1.0))],
                RED.mix(0.8).filled(),
            )
        })
    }))
    .map_err(err)?;
    root.present().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows with and without the cache model's figures go into one CSV
    /// (a `compare --count-cache` run has both: uncounted rows have none).
    #[test]
    fn a_csv_holds_rows_with_different_optional_fields() {
        #[derive(Serialize)]
        struct R {
            path: &'static str,
            #[serde(skip_serializing_if = "Option::is_none")]
            l1d: Option<f64>,
        }
        let dir = std::env::temp_dir().join(format!("compare-csv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("rows.csv");
        let rows = [
            R {
                path: "kernel-afxdp",
                l1d: None,
            },
            R {
                path: "pollnic-1q",
                l1d: Some(3.5),
            },
        ];
        write_csv(&file, &rows).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(text, "path,l1d\nkernel-afxdp,\npollnic-1q,3.5\n");
    }
}
