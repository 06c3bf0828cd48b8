//! Measure, in one run, the same offered traffic from the same generator
//! (pollnic on port 0) received on port 1 by: pollnic with 1 and 2 RSS queues,
//! the kernel igb driver with an AF_PACKET TPACKET_V3 ring and with recvmmsg
//! on UDP, and DPDK testpmd in rxonly mode (when installed). Frame sizes 64
//! and 1518 by default.
//!
//! ```text
//! cargo xtask compare                       # in the QEMU testbed
//! compare --tx 0000:03:00.0 --rx 0000:03:00.1 --seconds 5 --rate 100000   # real NICs
//! ```
//!
//! Prints a table and writes compare.json, compare.csv, compare.svg and
//! projection.svg (a projection from the counts, not a measurement) to
//! `--out`. Under emulation the numbers include the emulator's cost: compare
//! rows of one run only.

mod bounce;
mod cost;
mod curve;
mod gen;
mod knobs;
mod paths;
mod pmu;
mod project;
mod report;
mod rfs;
mod sock;
mod sweep;
mod tally;
mod testpmd;
mod tx;
mod xdpdrop;
mod xsk;

use clap::Parser;
use paths::{Load, Measured};
use pollnic::pci::{self, PciAddress, Sysfs};
use pollnic::{Device, RxMode};
use pollnic_tools::args::Usage;
use pollnic_tools::frame::Flow;
use pollnic_tools::metrics::{Throughput, TxAccount};
use report::Row;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(about = "Compare receive paths on one NIC port under the same offered traffic")]
struct Args {
    /// Sending port (pollnic generator), bound to vfio-pci.
    #[arg(long, required_unless_present = "replot")]
    tx: Option<PciAddress>,
    /// Receiving port: rebound between vfio-pci and igb as the rows need.
    #[arg(long, required_unless_present = "replot")]
    rx: Option<PciAddress>,
    /// Only re-draw the chart and table from `--out`'s compare.json (no traffic).
    #[arg(long)]
    replot: bool,
    /// Seconds of traffic per row. [range: 0.1..=3600]
    #[arg(value_parser = pollnic_tools::args::row_seconds, long, default_value_t = 3.0)]
    seconds: f64,
    /// Offered packets/s. [range: 1..=1000000000]
    #[arg(value_parser = clap::value_parser!(u64).range(1..=1000000000), long, default_value_t = 20_000)]
    rate: u64,
    /// Drain measurement instead of a rate: each row puts this many frames
    /// into the receive ring (or socket) while its receiver waits, then lets
    /// it empty them in full bursts, and counts per packet over both, so the
    /// count does not depend on timing (with the counter:
    /// `cargo xtask compare -- --drain 256`). --rate and --seconds are then
    /// unused; dpdk-testpmd and the transmit rows cannot wait and give no
    /// row. [range: 1..=448]
    #[arg(value_parser = clap::value_parser!(u64).range(1..=448), long, conflicts_with_all = ["sweep", "forward", "load_curve"])]
    drain: Option<u64>,
    /// Wire frame sizes (incl. the FCS, frame check sequence: the 4-byte CRC
    /// ending every frame), comma-separated. [range: 64..=1518]
    #[arg(long, default_value = "64,1518", value_delimiter = ',')]
    sizes: Vec<usize>,
    /// Distinct flows (so RSS, receive-side scaling, which spreads flows over
    /// the RX queues by a hash, has something to spread). [range: 1..=65536]
    #[arg(value_parser = clap::value_parser!(u32).range(1..=65536), long, default_value_t = 64)]
    flows: u32,
    /// Paths to run, comma-separated. Default: pollnic-1q, pollnic-2q,
    /// kernel-afpacket, kernel-afpacket-tuned (1 queue, IRQ and thread on the
    /// first of --cores, rx-usecs 0, netdev_budget 600),
    /// kernel-afpacket-tuned-100us (the same with rx-usecs 100),
    /// kernel-afpacket-tuned-2q (2 queues, an IRQ and a PACKET_FANOUT_CPU
    /// socket per core), kernel-recvmmsg, kernel-afxdp (zero-copy if the
    /// kernel has it), kernel-afxdp-busypoll (preferred busy polling on
    /// pollnic-1q's core), dpdk-testpmd; with
    /// --forward: pollnic-fwd-io, pollnic-fwd-macswap, dpdk-testpmd-io,
    /// dpdk-testpmd-macswap. Also: pollnic-1q-rxonly (pollnic-1q counting
    /// frames only, no clock reads or timestamp parsing, as testpmd rxonly),
    /// pollnic-1q-adaptive and pollnic-1q-irq (pollnic-1q sleeping on its
    /// queue's own interrupt, an MSI-X vector, after a run of empty polls, or at every empty poll),
    /// and the same two with a fixed EITR of N µs (0..=1022; EITR is the
    /// NIC's interrupt throttle, the least time between two interrupts of
    /// one vector, as `ethtool -C rx-usecs`) whatever
    /// --max-latency-us says: pollnic-1q-irq-eitrN, pollnic-1q-adaptive-eitrN
    /// (e.g. pollnic-1q-irq-eitr0, pollnic-1q-adaptive-eitr250).
    /// Scaling rows: pollnic-3q, kernel-afpacket-rps-2q/-3q,
    /// kernel-recvmmsg-rfs-2q/-3q (one queue, RPS + RFS: the kernel's
    /// receive packet steering hands each flow's packets to a core by hash,
    /// receive flow steering to the core its reader runs on; a connected UDP
    /// socket per flow read on its core). Transmit rows, counted per sent
    /// packet on the sending core (the first of --cores), pollnic receiving
    /// on port 0: tx-pollnic, tx-pollnic-inorder (virtio-net only),
    /// tx-kernel-pktgen, tx-kernel-afpacket (sendmmsg), tx-kernel-afxdp.
    #[arg(long, value_delimiter = ',')]
    paths: Option<Vec<String>>,
    /// Forwarding instead of receiving: the path under test sends every frame
    /// back out of port 1 (pollnic's fwd example, or testpmd, in io or macswap
    /// mode) and the generator's port receives it: round-trip loss and latency.
    /// Writes forward.{json,csv,svg} (forward-sweep.* with --sweep).
    #[arg(long)]
    forward: bool,
    /// Cores for receive threads (pollnic queues; testpmd uses the first).
    /// Default: 0,1; in the counting guest (`cargo xtask compare`), every
    /// vCPU but the generator's (--gen-core), which counting keeps apart.
    #[arg(long)]
    cores: Option<String>,
    /// Core the generator thread is pinned to (apart from the receivers where
    /// the machine has room: pollnic-1q receives on the first of --cores). [range: 0..=1023]
    #[arg(value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=1023), long, default_value_t = 1)]
    gen_core: usize,
    /// pollnic-1q-irq and pollnic-1q-adaptive: without it a fixed EITR
    /// (interrupt throttle) of 250 µs; with it dynamic interrupt moderation
    /// (igb's classes) capped at this many µs, or with 0 a fixed EITR of 0
    /// (an interrupt per frame). [range: 0..=1022]
    #[arg(value_parser = clap::value_parser!(u32).range(0..=1022), long)]
    max_latency_us: Option<u32>,
    /// pollnic-1q-adaptive: the longest spin on an empty ring, µs. [range: 0..=1000000]
    #[arg(value_parser = clap::value_parser!(u64).range(0..=1_000_000), long, default_value_t = 50)]
    max_spin_us: u64,
    /// Folder for compare.json / compare.csv / compare.svg.
    #[arg(long, default_value = "results/compare")]
    out: PathBuf,
    /// Chart title suffix (where and when it was measured).
    #[arg(long, default_value = "")]
    label: String,
    /// Capacity sweep instead of one rate: per path and size, the highest
    /// offered rate whose loss stays within --loss-tolerance (RFC 2544 §26.1
    /// binary search); writes sweep.{json,csv,svg}.
    #[arg(long)]
    sweep: bool,
    /// Loss allowed at a passing rate in a sweep, percent of frames sent. [range: 0..=100]
    #[arg(value_parser = pollnic_tools::args::percent, long, default_value_t = 0.1)]
    loss_tolerance: f64,
    /// Sweep: lowest offered rate, packets/s. [range: 1..=1000000000]
    #[arg(value_parser = clap::value_parser!(u64).range(1..=1000000000), long, default_value_t = 10_000)]
    sweep_min: u64,
    /// Sweep: highest offered rate (tried first), packets/s. [range: 1..=1000000000]
    #[arg(value_parser = clap::value_parser!(u64).range(1..=1000000000), long, default_value_t = 250_000)]
    sweep_max: u64,
    /// Sweep: trials per path and size. [range: 1..=64]
    #[arg(value_parser = clap::value_parser!(u32).range(1..=64), long, default_value_t = 6)]
    sweep_steps: u32,
    /// Load curve instead of one rate: every path at each of --curve-rates,
    /// then at its knee (the --sweep search, with the --sweep-* bounds), with
    /// receive CPU per packet and P50/P99/P99.9 latency at each point;
    /// writes load-curve.{json,csv,svg}.
    #[arg(long, conflicts_with_all = ["sweep", "forward"])]
    load_curve: bool,
    /// Load curve: offered rates, packets/s, comma-separated. [range: 1..=1000000000]
    #[arg(long, value_delimiter = ',', default_value = "10000,20000,50000",
          value_parser = clap::value_parser!(u64).range(1..=1000000000))]
    curve_rates: Vec<u64>,
    /// Load curve: skip the knee search (only the --curve-rates points).
    #[arg(long)]
    no_curve_knee: bool,
    /// In a counting guest: list each row's N guest functions with the most
    /// instructions per received packet, from the counter's per-block
    /// profile (docs/design/counting.md); 0 turns the profile off. [range: 0..=2000]
    #[arg(value_parser = clap::value_parser!(u64).range(0..=2000), long, default_value_t = 10)]
    top_functions: u64,
    /// The CPU's performance counters per row, on every CPU but the
    /// generator's (perf_event_open, as `perf stat -a`): `hardware` (cycles,
    /// instructions, LLC-loads, LLC-load-misses: loads that reach the
    /// last-level cache and those it misses; a CPU or VM without a PMU, the
    /// performance monitoring unit that holds these counters, makes each row
    /// say "no PMU"), `software` (the kernel's cpu-clock,
    /// context switches, page faults, migrations: the same code where no PMU
    /// exists) or `off`.
    #[arg(long, value_enum, default_value = "hardware")]
    pmu: pmu::PmuEvents,
    /// pollnic's rows only, with physical addresses on ports bound to
    /// uio_pci_generic or VFIO's no-IOMMU mode (docs/no-iommu.md): UNSAFE
    /// for the machine, and for measuring what the IOMMU costs. Refuses
    /// the kernel, DPDK and forwarding rows.
    #[arg(long)]
    no_iommu: bool,
    /// In a counting guest booted with the plugin's cache model
    /// (`cargo xtask compare --count-cache`): per row, the model's L1D, L2
    /// and LLC misses (with and without DDIO, Data Direct I/O: the NIC's
    /// writes going straight into the last-level cache) and the lines the device wrote,
    /// per packet (docs/design/counting.md). Without the model the rows say
    /// why they have none.
    #[arg(long)]
    count_cache: bool,
}

fn main() {
    let result = run(pollnic_tools::args::parse("compare"));
    // The devices are closed by now; a panicked thread wins over any error.
    pollnic_tools::signal::exit_if_panicked("compare");
    if let Err(e) = result {
        pollnic_tools::args::exit_with("compare", &*e);
    }
}

/// One row from a measurement, with its projection (`project.rs`).
fn row(path: &str, size: usize, rate: u64, m: Result<Measured, String>) -> Row {
    let mut r = measured_row(path, size, rate, m);
    project::apply(&mut r);
    r
}

fn measured_row(path: &str, size: usize, rate: u64, m: Result<Measured, String>) -> Row {
    let missing = |note: String| Row {
        path: path.into(),
        frame_size: size,
        offered_pps: rate as f64,
        sent: 0,
        received: 0,
        lost: 0,
        not_transmitted: None,
        rx_pps: 0.0,
        payload_mbps: 0.0,
        l1_mbps: 0.0,
        cpu_ns_per_pkt: None,
        p50_us: None,
        p99_us: None,
        p999_us: None,
        max_us: None,
        max_poll_gap_ms: None,
        mode: String::new(),
        fwd_received: None,
        fwd_sent: None,
        wrong_macs: None,
        mmio_reads_per_packet: None,
        mmio_writes_per_packet: None,
        mmio_reads_per_burst: None,
        mmio_writes_per_burst: None,
        mmio_reads_per_wakeup: None,
        gen_mmio_writes_per_sent: None,
        interrupts_per_packet: None,
        top_mmio: Vec::new(),
        pmu_per_packet: Vec::new(),
        pmu_note: String::new(),
        l1d_misses_per_packet: None,
        l2_misses_per_packet: None,
        llc_misses_per_packet: None,
        llc_misses_no_ddio_per_packet: None,
        ext_lines_per_packet: None,
        cache_note: String::new(),
        instructions_per_packet: None,
        work_instructions_per_packet: None,
        work_instructions_per_packet_low: None,
        user_instructions_per_packet: None,
        kernel_instructions_per_packet: None,
        bytes_loaded_per_packet: None,
        bytes_stored_per_packet: None,
        work_bytes_loaded_per_packet: None,
        work_bytes_stored_per_packet: None,
        empty_polls_per_packet: None,
        bursts_per_packet: None,
        burst1_instructions_per_packet: None,
        burst1_user_instructions_per_packet: None,
        burst1_bytes_loaded_per_packet: None,
        burst1_bytes_stored_per_packet: None,
        fit_instructions_per_packet: None,
        fit_instructions_per_burst: None,
        work_method: String::new(),
        gen_instructions_per_sent: None,
        gen_work_instructions_per_sent: None,
        vcpu_instructions_per_packet: String::new(),
        top_functions: Vec::new(),
        top_functions_basis: String::new(),
        top_functions_coverage: None,
        direction: direction(path),
        wakeups_per_packet: None,
        spin_budget_us: None,
        itr_usecs: None,
        interrupts_per_wakeup: None,
        waitpkg: None,
        projected_ns_per_packet: None,
        projected_ns_per_packet_low: None,
        projected_ns_per_packet_high: None,
        projected_mpps_per_core: None,
        projected_mpps_per_core_low: None,
        projected_mpps_per_core_high: None,
        projection_note: String::new(),
        note,
        valid: false,
    };
    let m = match m {
        Ok(m) => m,
        Err(e) => return missing(e),
    };
    let mut m = m;
    if m.offered.skipped > 0 {
        m.note = format!(
            "generator fell behind: {} send slots skipped, not sent as a burst; {}",
            m.offered.skipped, m.note
        );
    }
    let account = TxAccount {
        handed: m.offered.sent,
        tx_packets: m.offered.tx_packets,
        received: Some(m.tally.received),
    };
    if let Some(line) = account.shortfall_line() {
        m.note = format!("{line}; {}", m.note);
    }
    // Transmit rows: counted per sent packet, on the sending vCPU(s).
    let tx = path.starts_with("tx-");
    let t = &m.tally;
    if t.received == 0 {
        // Honesty check: never print rates for a receiver that saw nothing.
        return missing(format!(
            "receiver saw no traffic (generator sent {}); {}",
            m.offered.sent, m.note
        ));
    }
    // Rate over the receive window, or the send window when only a count exists.
    let span = t
        .first_last
        .map(|(a, b)| Duration::from_nanos(b - a))
        .filter(|d| !d.is_zero())
        .unwrap_or(m.offered.elapsed);
    let tp = Throughput {
        packets: t.received,
        bytes: t.bytes,
        elapsed: span,
    };
    let has_lat = t.lat.count() > 0;
    let us = |q: f64| has_lat.then(|| t.lat.quantile_ns(q) as f64 / 1000.0);
    // The packets the window's counts are divided by: a drain keeps one of
    // its fills (`Offered::window_frames`), every frame of it received.
    let counted = |all: u64| m.offered.window_frames.map_or(all, |f| f.min(all));
    let cost = m.offered.window.as_ref().and_then(|w| {
        w.per_packet(
            counted(if tx { m.offered.sent } else { t.received }),
            counted(m.offered.sent),
        )
    });
    let c = |f: fn(&cost::PerPacket) -> f64| cost.as_ref().map(f);
    let cache_figure =
        |f: fn(&cost::CachePerPacket) -> f64| cost.as_ref().and_then(|p| p.cache.as_ref()).map(f);
    let (pmu_per_packet, pmu_note) = pmu::per_packet(
        &m.offered.pmu,
        counted(if tx { m.offered.sent } else { t.received }),
    );
    let wakeups_per_packet = m
        .wakeups
        .filter(|w| w.1 > 0)
        .map(|(w, n)| w as f64 / n as f64);
    let mut r = Row {
        mmio_reads_per_packet: c(|p| p.mmio_reads),
        mmio_writes_per_packet: c(|p| p.mmio_writes),
        mmio_reads_per_burst: cost.as_ref().and_then(|p| p.mmio_reads_per_burst),
        mmio_writes_per_burst: cost.as_ref().and_then(|p| p.mmio_writes_per_burst),
        mmio_reads_per_wakeup: c(|p| p.mmio_reads)
            .zip(wakeups_per_packet.filter(|w| *w > 0.0))
            .map(|(r, w)| r / w),
        gen_mmio_writes_per_sent: cost.as_ref().and_then(|p| p.gen_mmio_writes_per_sent),
        interrupts_per_packet: cost.as_ref().and_then(|p| p.interrupts),
        top_mmio: cost.as_ref().map_or(Vec::new(), |p| p.top_mmio.clone()),
        pmu_per_packet,
        pmu_note,
        l1d_misses_per_packet: cache_figure(|c| c.l1d_misses),
        l2_misses_per_packet: cache_figure(|c| c.l2_misses),
        llc_misses_per_packet: cache_figure(|c| c.llc_misses),
        llc_misses_no_ddio_per_packet: cache_figure(|c| c.llc_misses_no_ddio),
        ext_lines_per_packet: cache_figure(|c| c.external_lines),
        cache_note: cost.as_ref().map_or_else(
            || {
                if cost::COUNT_CACHE.load(std::sync::atomic::Ordering::Relaxed) {
                    "no counted figures for this row, so no cache figures".to_string()
                } else {
                    "cache model not asked for (compare --count-cache)".to_string()
                }
            },
            |p| p.cache_note.clone(),
        ),
        wakeups_per_packet,
        spin_budget_us: m.irq_state.map(|s| s.spin_budget_ns as f64 / 1000.0),
        itr_usecs: m.irq_state.map(|s| s.itr_usecs),
        interrupts_per_wakeup: m
            .irq_state
            .filter(|s| s.sleeps > 0)
            .map(|s| s.interrupts as f64 / s.sleeps as f64),
        waitpkg: m.irq_state.map(|s| s.waitpkg),
        projected_ns_per_packet: None,
        projected_ns_per_packet_low: None,
        projected_ns_per_packet_high: None,
        projected_mpps_per_core: None,
        projected_mpps_per_core_low: None,
        projected_mpps_per_core_high: None,
        projection_note: String::new(),
        instructions_per_packet: c(|p| p.instructions),
        work_instructions_per_packet: cost.as_ref().and_then(|p| p.work_instructions),
        work_instructions_per_packet_low: cost.as_ref().and_then(|p| p.work_instructions_low),
        user_instructions_per_packet: c(|p| p.user_instructions),
        kernel_instructions_per_packet: c(|p| p.kernel_instructions),
        bytes_loaded_per_packet: c(|p| p.bytes_loaded),
        bytes_stored_per_packet: c(|p| p.bytes_stored),
        work_bytes_loaded_per_packet: cost.as_ref().and_then(|p| p.work_bytes_loaded),
        work_bytes_stored_per_packet: cost.as_ref().and_then(|p| p.work_bytes_stored),
        empty_polls_per_packet: cost.as_ref().and_then(|p| p.empty_polls),
        bursts_per_packet: cost.as_ref().and_then(|p| p.bursts_per_packet),
        burst1_instructions_per_packet: cost.as_ref().and_then(|p| p.burst1_instructions),
        burst1_user_instructions_per_packet: cost.as_ref().and_then(|p| p.burst1_user_instructions),
        burst1_bytes_loaded_per_packet: cost.as_ref().and_then(|p| p.burst1_bytes_loaded),
        burst1_bytes_stored_per_packet: cost.as_ref().and_then(|p| p.burst1_bytes_stored),
        fit_instructions_per_packet: cost.as_ref().and_then(|p| p.fit_per_packet),
        fit_instructions_per_burst: cost.as_ref().and_then(|p| p.fit_per_burst),
        work_method: cost
            .as_ref()
            .map_or(String::new(), |p| p.work_method.clone()),
        gen_instructions_per_sent: cost.as_ref().and_then(|p| p.gen_instructions_per_sent),
        gen_work_instructions_per_sent: cost
            .as_ref()
            .and_then(|p| p.gen_work_instructions_per_sent),
        top_functions: cost
            .as_ref()
            .map_or(Vec::new(), |p| p.top_functions.clone()),
        top_functions_coverage: cost.as_ref().and_then(|p| p.top_functions_coverage),
        top_functions_basis: cost
            .as_ref()
            .map_or(String::new(), |p| p.top_functions_basis.clone()),
        direction: direction(path),
        vcpu_instructions_per_packet: cost.as_ref().map_or(String::new(), |p| {
            p.per_vcpu
                .iter()
                .enumerate()
                .filter(|(_, x)| **x > 0.0)
                .map(|(i, x)| format!("vcpu{i} {x:.1}"))
                .collect::<Vec<_>>()
                .join(", ")
        }),
        path: path.into(),
        frame_size: size,
        offered_pps: m.offered.sent as f64 / m.offered.elapsed.as_secs_f64().max(1e-9),
        sent: m.offered.sent,
        received: t.received,
        lost: m.offered.sent as i64 - t.received as i64,
        not_transmitted: Some(account.not_transmitted()),
        rx_pps: tp.pps(),
        payload_mbps: tp.payload_mbps(),
        l1_mbps: tp.l1_mbps(),
        cpu_ns_per_pkt: (t.cpu_ns > 0).then(|| t.cpu_ns as f64 / t.received as f64),
        p50_us: us(0.5),
        p99_us: us(0.99),
        p999_us: us(0.999),
        max_us: has_lat.then(|| t.lat.max_ns() as f64 / 1000.0),
        max_poll_gap_ms: t.gaps.map(|g| g.max_ns as f64 / 1e6),
        mode: m.mode.clone(),
        fwd_received: m.fwd.map(|f| f.received),
        fwd_sent: m.fwd.map(|f| f.sent),
        wrong_macs: m.fwd.map(|f| f.wrong_macs),
        note: match t.gaps {
            // Loss explained: frames arriving during the longest stall
            // against the ring's free descriptors (DeviceConfig default 512).
            Some(g) => {
                let rate = m.offered.sent as f64 / m.offered.elapsed.as_secs_f64().max(1e-9);
                let per_queue = rate / path_queues(path) as f64;
                let gaps = g.describe(per_queue, 511);
                if m.note.is_empty() {
                    gaps
                } else if m.note.ends_with(':') {
                    format!("{} {gaps}", m.note)
                } else {
                    format!("{}; {gaps}", m.note)
                }
            }
            None => m.note,
        },
        valid: true,
    };
    if tx {
        tx::adjust(&mut r);
    }
    r
}

/// The fixed EITR of the `pollnic-1q-irq` and `pollnic-1q-adaptive` rows
/// without `--max-latency-us`, in µs: decided on two counted runs at 10 and
/// 20 kpps (docs/results/2026-12-06-vm-2core/irq-mmio.md), where it did
/// 24-33 % fewer instructions and half the MMIO writes per packet of igb's
/// dynamic moderation (the default before), with P99 in the same range.
const IRQ_ROW_EITR_US: u32 = 250;

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let moderation = match args.max_latency_us {
        None => pollnic::Moderation::Fixed {
            usecs: IRQ_ROW_EITR_US,
        },
        Some(0) => pollnic::Moderation::Fixed { usecs: 0 },
        Some(us) => pollnic::Moderation::dynamic(us),
    };
    let _ = paths::IRQ_TUNING.set((moderation, Duration::from_micros(args.max_spin_us)));
    let title = format!(
        "pollnic compare: same generator, receive paths side by side {}",
        args.label
    );
    if args.replot {
        return Ok(report::replot(&args.out, title.trim())?);
    }
    let (tx, rx) = (
        args.tx.expect("required by clap"),
        args.rx.expect("required by clap"),
    );
    let cores = match &args.cores {
        Some(c) => pollnic_tools::args::cores("--cores", c)?,
        None => default_cores(args.gen_core, cost::Meter::new().is_some()),
    };
    pollnic_tools::cores::check_cores(&[args.gen_core])
        .map_err(|e| Usage(format!("--gen-core {}: {e}", args.gen_core)))?;
    if args.sweep_min > args.sweep_max {
        return Err(Usage(format!(
            "--sweep-min {} is above --sweep-max {}: the search runs from max down to min",
            args.sweep_min, args.sweep_max
        ))
        .into());
    }
    gen::GEN_CORE.store(args.gen_core, std::sync::atomic::Ordering::Relaxed);
    gen::DRAIN_FRAMES.store(
        args.drain.unwrap_or(0),
        std::sync::atomic::Ordering::Relaxed,
    );
    let _ = pmu::PMU_EVENTS.set(args.pmu);
    cost::COUNT_CACHE.store(args.count_cache, std::sync::atomic::Ordering::Relaxed);
    let _ = cost::RX_PORT.set(rx.to_string());
    let _ = cost::PORTS.set(vec![tx.to_string(), rx.to_string()]);
    cost::TOP_FUNCTIONS.store(
        args.top_functions as usize,
        std::sync::atomic::Ordering::Relaxed,
    );
    if let Some(meter) = cost::Meter::new() {
        // Before any thread starts: they inherit the affinity.
        println!("{}", cost::keep_off_generator(args.gen_core)?);
        println!("{}", cost::measure_background(&meter, args.gen_core)?);
    }
    let known: &[&str] = if args.forward { &FWD_PATHS } else { &RX_PATHS };
    // A virtio-net receiver: its rows are named after the family, and by
    // default only the paths a one-queue virtio-net port can run.
    let virtio = paths::is_virtio(rx);
    let paths: Vec<String> = args.paths.clone().unwrap_or_else(|| {
        if virtio && !args.forward {
            return VIRTIO_PATHS.iter().map(|p| p.to_string()).collect();
        }
        // Not by default: pollnic-1q-rxonly, -adaptive and -irq.
        let n = if args.forward {
            known.len()
        } else {
            known.len() - 3
        };
        known[..n].iter().map(|p| p.to_string()).collect()
    });
    // By default, only the rows this machine can run: with one receive core
    // (a 2-vCPU counting guest: vCPU 1 is the generator's) the 2-queue rows
    // are left out, saying so, rather than reported as failed.
    let paths = if args.paths.is_none() {
        let (kept, left_out) = runnable_by_default(paths, &cores, args.gen_core);
        if let Some(line) = left_out {
            println!("{line}");
        }
        kept
    } else {
        paths
    };
    if let Some(bad) = paths
        .iter()
        .find(|p| !known.contains(&p.as_str()) && (args.forward || !extra_path(p)))
    {
        return Err(Usage(format!(
            "unknown path `{bad}`{} (known: {}{})",
            if args.forward { " with --forward" } else { "" },
            known.join(", "),
            if args.forward {
                String::new()
            } else {
                format!(
                    ", {}, {}, {}, {}, pollnic-1q-irq-eitrN, pollnic-1q-adaptive-eitrN (N = a fixed EITR in µs, 0..=1022)",
                    SCALING_PATHS.join(", "),
                    INORDER_PATHS.join(", "),
                    rfs::RFS_PATHS.join(", "),
                    tx::TX_PATHS.join(", ")
                )
            }
        ))
        .into());
    }
    if args.no_iommu {
        if let Some(bad) = paths
            .iter()
            .find(|p| args.forward || !p.starts_with("pollnic-"))
        {
            return Err(Usage(format!(
                "--no-iommu runs pollnic's receive rows only, not `{bad}`{}: the kernel and DPDK \
                 rows need the port on their own drivers",
                if args.forward { " with --forward" } else { "" }
            ))
            .into());
        }
        eprintln!(
            "compare: WARNING --no-iommu: DMA with physical addresses and no IOMMU; the NIC can \
             read and write all of this machine's RAM"
        );
        let _ = paths::NO_IOMMU.set(true);
    }
    if let Some(bad) = args.sizes.iter().find(|s| !(64..=1518).contains(*s)) {
        return Err(Usage(format!(
            "--sizes {bad}: outside 64..=1518: compare runs every path at the standard MTU 1500 \
             (jumbo frames: loopback --mtu 9000 --frame-size 9018)"
        ))
        .into());
    }
    let stop = pollnic_tools::signal::stop_flag()?;
    // Forwarding rows receive on the generator's port what port 1 sends back;
    // in io mode that is still addressed to port 1: promiscuous.
    let gen_cfg = paths::base_config().with_promisc(args.forward);
    let mut gen = Device::open(tx, &gen_cfg)?;
    let sysfs = Sysfs::default();
    // The receiver's MAC, read by pollnic (binding the port to vfio-pci if needed).
    paths::ensure_vfio(rx)?;
    let dst_mac = Device::open(rx, &paths::base_config())?.mac();
    let flows: Vec<Flow> = (0..args.flows)
        .map(|i| Flow::nth(gen.mac(), dst_mac, i))
        .collect();
    let load_text = match args.drain {
        Some(n) => format!("a drain of {n} frames per row (--drain: no rate, no seconds)"),
        None => format!("{} pps offered, {} s per row", args.rate, args.seconds),
    };
    println!(
        "compare: {} -> {}, {} flows, {load_text}, sizes {:?}",
        tx,
        rx,
        flows.len(),
        args.sizes
    );
    println!(
        "cores: generator on core {}; pollnic receives on {:?} (1q: the first), testpmd on {}; RX ring {} descriptors on every path",
        args.gen_core,
        cores,
        testpmd_core(&cores),
        paths::RX_RING
    );
    let macs = (gen.mac(), dst_mac);
    if args.forward {
        println!(
            "forwarding: generator on port 0 ({tx}) -> port 1 ({rx}), forwarded back out of port 1 by the path under test on core {} -> port 0: round trip",
            testpmd_core(&cores)
        );
    }
    let stem = if args.forward { "forward" } else { "compare" };
    if args.load_curve {
        return run_curve(
            &args, &paths, &mut gen, &flows, rx, &cores, macs, &stop, &sysfs,
        );
    }
    if args.sweep {
        return run_sweep(
            &args, &paths, &mut gen, &flows, rx, &cores, macs, &stop, &sysfs,
        );
    }
    let mut rows = Vec::new();
    for &size in &args.sizes {
        for path in &paths {
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                break;
            }
            let load = Load {
                gen: &mut gen,
                flows: &flows,
                size,
                rate: args.rate,
                secs: args.seconds,
                stop: &stop,
            };
            let m = measure(path, load, rx, &cores, macs);
            let peer_rx_path = m.as_ref().ok().and_then(|m| m.virtio_rx_path.clone());
            let mut r = row(path, size, args.rate, m);
            if virtio {
                r.path = virtio_row_name(path, peer_rx_path.as_deref());
            }
            println!(
                "  {:<20} {:>4} B: sent {:>8}  received {:>8}{}",
                r.path,
                size,
                r.sent,
                r.received,
                if r.valid {
                    String::new()
                } else {
                    format!("  ({})", r.note)
                }
            );
            rows.push(r);
        }
    }
    // Leave the receiving port as we found it for pollnic: on vfio-pci.
    let _ = pci::bind_vfio(&sysfs, rx);
    println!(
        "--- results (under QEMU/TCG, QEMU's CPU emulation in software, these include emulation \
         cost; compare rows of one run only) ---"
    );
    print!("{}", report::table(&rows));
    print!("{}", report::top_functions_text(&rows));
    report::write_all(&args.out, stem, &rows, title.trim())?;
    println!(
        "wrote {}/{stem}.{{json,csv,svg}} and {}",
        args.out.display(),
        report::projection_file(stem)
    );
    check_rows(&rows)
}

/// `tx` for a transmit row (figures per sent packet), `rx` for the others.
fn direction(path: &str) -> String {
    if path.starts_with("tx-") { "tx" } else { "rx" }.into()
}

/// A pollnic row without a result, or a row whose knobs did not come back,
/// fails the run (after the table is printed and written).
fn check_rows(rows: &[Row]) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(r) = rows.iter().find(|r| r.note.contains("KNOBS NOT RESTORED")) {
        return Err(format!("{}: {}", r.path, r.note).into());
    }
    if rows
        .iter()
        .filter(|r| r.path.starts_with("pollnic"))
        .any(|r| !r.valid)
    {
        return Err("a pollnic row has no result".into());
    }
    Ok(())
}

/// `--load-curve`: each path at each of `--curve-rates`, then (unless
/// `--no-curve-knee`) the sweep's search for its knee, whose passing trial
/// is the curve's last point.
#[allow(clippy::too_many_arguments)]
fn run_curve(
    args: &Args,
    paths: &[String],
    gen: &mut Device,
    flows: &[Flow],
    rx: PciAddress,
    cores: &[usize],
    macs: ([u8; 6], [u8; 6]),
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
    sysfs: &Sysfs,
) -> Result<(), Box<dyn std::error::Error>> {
    let cfg = pollnic_tools::sweep::SweepCfg {
        min_pps: args.sweep_min,
        max_pps: args.sweep_max,
        steps: args.sweep_steps,
        tolerance_pct: args.loss_tolerance,
    };
    println!(
        "load curve: rates {:?} pps{}, {} s per point",
        args.curve_rates,
        if args.no_curve_knee {
            String::new()
        } else {
            format!(
                ", then the knee ({}..{} pps, {} trials, loss tolerance {} %)",
                cfg.min_pps, cfg.max_pps, cfg.steps, cfg.tolerance_pct
            )
        },
        args.seconds
    );
    let (mut points, mut knees) = (Vec::new(), Vec::new());
    let mut all_rows = Vec::new();
    for &size in &args.sizes {
        for path in paths {
            let mut run_at = |rate: u64| {
                let load = Load {
                    gen: &mut *gen,
                    flows,
                    size,
                    rate,
                    secs: args.seconds,
                    stop,
                };
                let r = row(path, size, rate, measure(path, load, rx, cores, macs));
                println!(
                    "  {:<28} {:>4} B: asked {:>7} pps, sent {:>8}, received {:>8}, CPU {} ns/pkt, P99 {} us{}",
                    path,
                    size,
                    rate,
                    r.sent,
                    r.received,
                    r.cpu_ns_per_pkt.map_or("-".into(), |c| format!("{c:.0}")),
                    r.p99_us.map_or("-".into(), |c| format!("{c:.1}")),
                    if r.valid { String::new() } else { format!("  ({})", r.note) }
                );
                r
            };
            for &rate in &args.curve_rates {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let r = run_at(rate);
                all_rows.push(r.clone());
                points.push(curve::Point {
                    point: "rate".into(),
                    asked_pps: rate,
                    row: r,
                });
            }
            if args.no_curve_knee || stop.load(std::sync::atomic::Ordering::Relaxed) {
                continue;
            }
            let mut asked = Vec::new();
            let (trials, knee) = sweep::search(cfg, path, size, |rate| {
                asked.push(rate);
                run_at(rate)
            });
            // The knee's point: the passing trial at the highest rate.
            if let Some((r, a)) = trials
                .iter()
                .zip(&asked)
                .filter(|(r, _)| r.valid && sweep::trial_of(r).loss_pct() <= cfg.tolerance_pct)
                .max_by(|x, y| x.0.offered_pps.total_cmp(&y.0.offered_pps))
            {
                points.push(curve::Point {
                    point: "knee".into(),
                    asked_pps: *a,
                    row: r.clone(),
                });
            }
            all_rows.extend(trials);
            knees.push(knee);
        }
    }
    let _ = pci::bind_vfio(sysfs, rx);
    println!("--- load curve (under QEMU/TCG these include emulation cost; compare rows of one run only) ---");
    print!("{}", curve::table(&points));
    if points
        .iter()
        .any(|p| p.row.work_instructions_per_packet.is_some())
    {
        println!("--- counted guest work per packet (docs/design/counting.md) ---");
        print!("{}", curve::cost_table(&points));
        let rows: Vec<Row> = points.iter().map(|p| p.row.clone()).collect();
        print!("{}", report::top_functions_text(&rows));
    }
    if !knees.is_empty() {
        print!("{}", sweep::table(&knees));
    }
    let title = format!(
        "pollnic load curve: receive CPU per packet and P99 against offered rate {}",
        args.label
    );
    curve::write_all(&args.out, &points, &knees, title.trim())?;
    println!("wrote {}/load-curve.{{json,csv,svg}}", args.out.display());
    check_rows(&all_rows)
}

/// `--sweep`: search each path's and size's highest rate within the loss
/// tolerance; print every trial, then the knees and pollnic's ratios to the
/// other paths at the knee.
#[allow(clippy::too_many_arguments)]
fn run_sweep(
    args: &Args,
    paths: &[String],
    gen: &mut Device,
    flows: &[Flow],
    rx: PciAddress,
    cores: &[usize],
    macs: ([u8; 6], [u8; 6]),
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
    sysfs: &Sysfs,
) -> Result<(), Box<dyn std::error::Error>> {
    if !(0.0..100.0).contains(&args.loss_tolerance) {
        return Err(format!(
            "--loss-tolerance {} is outside 0..100 (percent)",
            args.loss_tolerance
        )
        .into());
    }
    if args.sweep_min == 0 || args.sweep_min > args.sweep_max || args.sweep_steps == 0 {
        return Err("need 0 < --sweep-min <= --sweep-max and --sweep-steps >= 1".into());
    }
    let cfg = pollnic_tools::sweep::SweepCfg {
        min_pps: args.sweep_min,
        max_pps: args.sweep_max,
        steps: args.sweep_steps,
        tolerance_pct: args.loss_tolerance,
    };
    println!(
        "sweep: {}..{} pps, {} trials per path and size, {} s each, loss tolerance {} % (RFC 2544 §26.1 binary search)",
        cfg.min_pps, cfg.max_pps, cfg.steps, args.seconds, cfg.tolerance_pct
    );
    let (mut trials, mut knees) = (Vec::new(), Vec::new());
    for &size in &args.sizes {
        for path in paths {
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                break;
            }
            let (rows, knee) = sweep::search(cfg, path, size, |rate| {
                let load = Load {
                    gen: &mut *gen,
                    flows,
                    size,
                    rate,
                    secs: args.seconds,
                    stop,
                };
                let r = row(path, size, rate, measure(path, load, rx, cores, macs));
                println!(
                    "  {:<20} {:>4} B: asked {:>7} pps, offered {:>7.0}, sent {:>8}, received {:>8}, lost {:.3} %{}",
                    path,
                    size,
                    rate,
                    r.offered_pps,
                    r.sent,
                    r.received,
                    sweep::trial_of(&r).loss_pct(),
                    if r.valid { String::new() } else { format!("  ({})", r.note) }
                );
                r
            });
            trials.extend(rows);
            knees.push(knee);
        }
    }
    let _ = pci::bind_vfio(sysfs, rx);
    println!("--- sweep results (under QEMU/TCG these include emulation cost; compare rows of one run only) ---");
    print!("{}", sweep::table(&knees));
    for &size in &args.sizes {
        let pairs: Vec<(&str, &str)> = if args.forward {
            bounce::MODES
                .iter()
                .map(|m| match *m {
                    "io" => ("pollnic-fwd-io", "dpdk-testpmd-io"),
                    _ => ("pollnic-fwd-macswap", "dpdk-testpmd-macswap"),
                })
                .collect()
        } else {
            [
                "dpdk-testpmd",
                "kernel-afxdp",
                "kernel-afxdp-busypoll",
                "kernel-afpacket",
                "kernel-afpacket-tuned",
                "kernel-afpacket-tuned-100us",
                "kernel-recvmmsg",
            ]
            .iter()
            .map(|o| ("pollnic-1q", *o))
            .chain(std::iter::once(("pollnic-2q", "kernel-afpacket-tuned-2q")))
            .collect()
        };
        let ratios: Vec<String> = pairs
            .iter()
            .map(|(a, o)| format!("{a} / {o} {}", sweep::ratio(&knees, a, o, size)))
            .collect();
        println!("  {size} B at the knee: {}", ratios.join(", "));
    }
    let title = format!(
        "pollnic sweep: received vs offered, knee = highest rate within {} % loss {}",
        cfg.tolerance_pct, args.label
    );
    let stem = if args.forward {
        "forward-sweep"
    } else {
        "sweep"
    };
    sweep::write_all(&args.out, stem, &trials, &knees, title.trim())?;
    println!("wrote {}/{stem}.{{json,csv,svg}}", args.out.display());
    if knees
        .iter()
        .any(|k| k.path.starts_with("pollnic") && k.zero_loss_pps.is_none())
    {
        return Err("a pollnic path passed at no rate".into());
    }
    Ok(())
}

/// Receive paths (`--paths` without `--forward`); all but the last three
/// run by default (the kernel rows: default, tuned and busy-polling): pollnic-1q-rxonly isolates the cost of pollnic-1q's
/// timestamps; pollnic-1q-adaptive and pollnic-1q-irq are pollnic-1q with
/// the queue sleeping on its MSI-X interrupt (adaptive: after a run of empty
/// polls; irq: at every empty poll).
/// The default paths when the receiving port is virtio-net: one queue pair,
/// pollnic's rows on the split ring and on packed virtqueues
/// ([`PACKED_PATHS`]) (`pollnic-2q` by `--paths`, with a vCPU per receive core and one for the
/// generator: `cargo xtask compare --smp 3 --family virtio -- --gen-core 2
/// --cores 0,1 --paths pollnic-1q,pollnic-2q`), testpmd with DPDK's virtio
/// PMD (named after the ring it takes: [`virtio_row_name`]), no tuned
/// AF_PACKET rows (they set `ethtool -C rx-usecs`, which virtio_net offers
/// only with `VIRTIO_NET_F_NOTF_COAL`).
const VIRTIO_PATHS: [&str; 9] = [
    "pollnic-1q",
    "pollnic-1q-rxonly",
    "pollnic-packed-1q",
    "pollnic-packed-1q-rxonly",
    "kernel-afpacket",
    "kernel-recvmmsg",
    "kernel-afxdp",
    "kernel-afxdp-busypoll",
    "dpdk-testpmd",
];

/// A row's name on a virtio-net receiver: `pollnic-1q` is
/// `pollnic-virtio-1q`, `kernel-afxdp` is `kernel-virtio-afxdp` (the kernel's
/// `virtio_net` instead of igb); `dpdk-testpmd` is `dpdk-testpmd-virtio`, or
/// `dpdk-testpmd-virtio-packed` when its virtio PMD said (`peer_rx_path`,
/// its receive path) that it runs a packed virtqueue; other names are kept.
fn virtio_row_name(path: &str, peer_rx_path: Option<&str>) -> String {
    for family in ["pollnic-", "kernel-"] {
        if let Some(rest) = path.strip_prefix(family) {
            return format!("{family}virtio-{rest}");
        }
    }
    if path == "dpdk-testpmd" {
        let packed = peer_rx_path.is_some_and(testpmd::is_packed_path);
        return format!("dpdk-testpmd-virtio{}", if packed { "-packed" } else { "" });
    }
    path.to_owned()
}

const RX_PATHS: [&str; 13] = [
    "pollnic-1q",
    "pollnic-2q",
    "kernel-afpacket",
    "kernel-afpacket-tuned",
    "kernel-afpacket-tuned-100us",
    "kernel-afpacket-tuned-2q",
    "kernel-recvmmsg",
    "kernel-afxdp",
    "kernel-afxdp-busypoll",
    "dpdk-testpmd",
    "pollnic-1q-rxonly",
    "pollnic-1q-adaptive",
    "pollnic-1q-irq",
];

/// Receive paths for the scaling run (`--paths`, never by default): they
/// need a guest with a vCPU for each receive core and one for the generator
/// (`cargo xtask compare --smp 4 -- --gen-core 3 --cores 0,1,2`).
const SCALING_PATHS: [&str; 3] = [
    "pollnic-3q",
    "kernel-afpacket-rps-2q",
    "kernel-afpacket-rps-3q",
];

/// Which interrupt mode a `pollnic-1q-irq*` / `pollnic-1q-adaptive*` row runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IrqRow {
    Interrupt,
    Adaptive,
}

/// pollnic-1q in an interrupt mode: `pollnic-1q-irq` and
/// `pollnic-1q-adaptive` (moderation from `--max-latency-us`), or with
/// `-eitr<N>` appended, a fixed EITR of N µs (0..=1022, what both families
/// hold), e.g. `pollnic-1q-irq-eitr0`, `pollnic-1q-adaptive-eitr250`.
/// Returns the mode and the fixed interval, if any.
fn irq_path(p: &str) -> Option<(IrqRow, Option<u32>)> {
    let (mode, rest) = if let Some(r) = p.strip_prefix("pollnic-1q-irq") {
        (IrqRow::Interrupt, r)
    } else {
        (IrqRow::Adaptive, p.strip_prefix("pollnic-1q-adaptive")?)
    };
    if rest.is_empty() {
        return Some((mode, None));
    }
    let n = rest.strip_prefix("-eitr")?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) || (n.len() > 1 && n.starts_with('0'))
    {
        return None;
    }
    let usecs: u32 = n.parse().ok().filter(|&u| u <= 1022)?;
    Some((mode, Some(usecs)))
}

/// pollnic's rows on packed virtqueues (virtio 1.2 §2.8), virtio-net
/// receivers only: `pollnic-1q` and `pollnic-1q-rxonly` with
/// `DeviceConfig::with_virtq_layout(Packed)`, named
/// `pollnic-virtio-packed-1q[-rxonly]` in the results; the plain names run
/// the split ring on a virtio-net port.
const PACKED_PATHS: [&str; 2] = ["pollnic-packed-1q", "pollnic-packed-1q-rxonly"];

/// pollnic's rows with in-order completion (`VIRTIO_F_IN_ORDER`, which the
/// receiving port must offer: the testbed's packed port does), by
/// `--paths` only: `pollnic-1q` and `pollnic-1q-rxonly` on the split ring
/// and on packed virtqueues with `DeviceConfig::with_virtq_in_order(true)`,
/// named `pollnic-virtio-[packed-]inorder-1q[-rxonly]` in the results.
/// Every other pollnic row on a virtio-net receiver runs with in-order
/// completion off (`with_virtq_in_order(false)`), as before the feature.
const INORDER_PATHS: [&str; 4] = [
    "pollnic-inorder-1q",
    "pollnic-inorder-1q-rxonly",
    "pollnic-packed-inorder-1q",
    "pollnic-packed-inorder-1q-rxonly",
];

/// The kernel's floor, by `--paths` only: the driver with an XDP program
/// that drops every frame (`XDP_DROP`), no socket (`xdpdrop.rs`).
const XDP_DROP_PATH: &str = "kernel-xdp-drop";

/// Paths named only in `--paths` beside [`RX_PATHS`]: `kernel-xdp-drop`, the scaling rows,
/// the RFS rows, the interrupt rows with a fixed EITR ([`irq_path`]) and
/// the transmit rows (`tx-*`, counted per sent packet).
fn extra_path(p: &str) -> bool {
    p == XDP_DROP_PATH
        || PACKED_PATHS.contains(&p)
        || INORDER_PATHS.contains(&p)
        || SCALING_PATHS.contains(&p)
        || rfs::RFS_PATHS.contains(&p)
        || tx::TX_PATHS.contains(&p)
        || irq_path(p).is_some()
}

/// Forwarding paths (`--forward`).
const FWD_PATHS: [&str; 4] = [
    "pollnic-fwd-io",
    "pollnic-fwd-macswap",
    "dpdk-testpmd-io",
    "dpdk-testpmd-macswap",
];

/// One row's measurement on `path` (a name from `--paths`); `macs` are the
/// generator's and port 1's MACs.
fn measure(
    path: &str,
    load: Load<'_>,
    rx: PciAddress,
    cores: &[usize],
    macs: ([u8; 6], [u8; 6]),
) -> Result<Measured, String> {
    let drain = gen::DRAIN_FRAMES.load(std::sync::atomic::Ordering::Relaxed);
    if drain > 0
        && (path.starts_with("dpdk-testpmd")
            || tx::TX_PATHS.contains(&path)
            || path.contains("-fwd-"))
    {
        return Err(format!(
            "not with --drain: {path} cannot be held while the ring fills (testpmd polls from its start; a transmit or forwarding row has no receive ring to fill)"
        ));
    }
    let m = measure_path(path, load, rx, cores, macs).map(|mut m| {
        if drain > 0 {
            m.note = format!(
                "drain: {drain} frames sent while the receiver waited, then emptied in full bursts, {} times; counts over the fill and emptying with the least work (work instructions per packet by fill: {}); {}",
                gen::DRAIN_REPEATS,
                m.offered
                    .fill_work
                    .iter()
                    .map(|w| w.map_or("none".to_string(), |w| format!("{w:.1}")))
                    .collect::<Vec<_>>()
                    .join(", "),
                m.note
            );
        }
        m
    });
    // A receive core that is the generator's: its counts cannot be split.
    let gen = gen::GEN_CORE.load(std::sync::atomic::Ordering::Relaxed);
    let receive = &cores[..(path_queues(path) as usize).min(cores.len())];
    m.map(|mut m| {
        if m.offered.window.is_some() && receive.contains(&gen) {
            m.offered.window = None;
            m.note = format!(
                "no counts: a receive core ({receive:?}) is the generator's (--gen-core {gen}): give the guest another vCPU (--smp) and the generator its own; {}",
                m.note
            );
        }
        m
    })
}

fn measure_path(
    path: &str,
    load: Load<'_>,
    rx: PciAddress,
    cores: &[usize],
    macs: ([u8; 6], [u8; 6]),
) -> Result<Measured, String> {
    let core = testpmd_core(cores);
    let in_order = INORDER_PATHS.contains(&path);
    let packed = PACKED_PATHS.contains(&path) || (in_order && path.starts_with("pollnic-packed-"));
    if (packed || in_order) && !paths::is_virtio(rx) {
        return Err(format!(
            "{path} needs a virtio-net receiver (packed virtqueues and in-order completion are virtio's; {rx} has descriptor rings): pass --family virtio to cargo xtask compare, or --rx a virtio-net port"
        ));
    }
    paths::PACKED.store(packed, std::sync::atomic::Ordering::Relaxed);
    paths::IN_ORDER.store(in_order, std::sync::atomic::Ordering::Relaxed);
    // The in-order rows are pollnic-1q and pollnic-1q-rxonly with the flags.
    let path = match path {
        "pollnic-inorder-1q" | "pollnic-packed-inorder-1q" => "pollnic-1q",
        "pollnic-inorder-1q-rxonly" | "pollnic-packed-inorder-1q-rxonly" => "pollnic-1q-rxonly",
        other => other,
    };
    match path {
        "pollnic-packed-1q" => paths::pollnic_rx(load, rx, 1, cores, true, RxMode::BusyPoll),
        "pollnic-packed-1q-rxonly" => {
            paths::pollnic_rx(load, rx, 1, cores, false, RxMode::BusyPoll)
        }
        "pollnic-1q" => paths::pollnic_rx(load, rx, 1, cores, true, RxMode::BusyPoll),
        "pollnic-1q-rxonly" => paths::pollnic_rx(load, rx, 1, cores, false, RxMode::BusyPoll),
        "pollnic-2q" => paths::pollnic_rx(load, rx, 2, cores, true, RxMode::BusyPoll),
        "pollnic-3q" => paths::pollnic_rx(load, rx, 3, cores, true, RxMode::BusyPoll),
        "kernel-afpacket-rps-2q" => paths::afpacket_rps_rx(load, rx, cores, 2),
        "kernel-afpacket-rps-3q" => paths::afpacket_rps_rx(load, rx, cores, 3),
        "kernel-recvmmsg-rfs-2q" => rfs::recvmmsg_rfs_rx(load, rx, cores, 2),
        "kernel-recvmmsg-rfs-3q" => rfs::recvmmsg_rfs_rx(load, rx, cores, 3),
        tx if tx.starts_with("tx-") => tx::measure(tx, load, rx, cores),
        irq if irq_path(irq).is_some() => {
            let (mode, fixed) = irq_path(irq).expect("matched");
            let (moderation, max_spin) = paths::IRQ_TUNING
                .get()
                .copied()
                .unwrap_or((Default::default(), pollnic::irq::DEFAULT_MAX_SPIN));
            let moderation = fixed.map_or(moderation, |usecs| pollnic::Moderation::Fixed { usecs });
            let mode = match mode {
                IrqRow::Adaptive => RxMode::Adaptive {
                    max_spin,
                    timeout: pollnic::irq::DEFAULT_WAIT,
                },
                IrqRow::Interrupt => RxMode::interrupt(),
            };
            paths::pollnic_irq_rx(load, rx, cores, mode, moderation)
        }
        "kernel-afpacket" => paths::afpacket_rx(load, rx),
        "kernel-recvmmsg" => paths::recvmmsg_rx(load, rx),
        "kernel-afxdp" => paths::afxdp_rx(load, rx, cores, false),
        "kernel-afxdp-busypoll" => paths::afxdp_rx(load, rx, cores, true),
        XDP_DROP_PATH => paths::xdp_drop_rx(load, rx),
        "kernel-afpacket-tuned" => {
            paths::afpacket_tuned_rx(load, rx, cores, 1, paths::TUNED_RX_USECS[0])
        }
        "kernel-afpacket-tuned-100us" => {
            paths::afpacket_tuned_rx(load, rx, cores, 1, paths::TUNED_RX_USECS[1])
        }
        "kernel-afpacket-tuned-2q" => {
            paths::afpacket_tuned_rx(load, rx, cores, 2, paths::TUNED_RX_USECS[0])
        }
        "dpdk-testpmd" => paths::dpdk_rx(load, rx, core),
        fwd => {
            let (who, mode) = fwd
                .rsplit_once('-')
                .filter(|(_, m)| bounce::MODES.contains(m))
                .ok_or_else(|| format!("unknown path `{fwd}`"))?;
            let expect = bounce::expected_macs(mode, macs.0, macs.1);
            match who {
                "pollnic-fwd" => bounce::pollnic_fwd(load, rx, mode, core, expect),
                "dpdk-testpmd" => bounce::testpmd_fwd(load, rx, mode, core, expect),
                _ => Err(format!("unknown path `{fwd}`")),
            }
        }
    }
}

/// The core testpmd forwards on: the first receive core, which the default
/// `--gen-core 1` leaves to the receivers (as pollnic-1q's queue).
/// `--cores` when not given: 0 and 1, or, when counting (the counter keeps
/// this process off the generator's vCPU), the first two vCPUs that are not
/// `gen_core`.
fn default_cores(gen_core: usize, counting: bool) -> Vec<usize> {
    if !counting {
        return vec![0, 1];
    }
    let online = std::thread::available_parallelism().map_or(1, |n| n.get());
    let v: Vec<usize> = (0..online).filter(|&c| c != gen_core).take(2).collect();
    if v.is_empty() {
        vec![0]
    } else {
        v
    }
}

/// Splits the default `paths` into those `cores` can run and, when some
/// cannot, one line naming them, why, and what to pass: a row receives on
/// [`path_queues`] cores, so a 2-queue row needs two receive cores.
fn runnable_by_default(
    paths: Vec<String>,
    cores: &[usize],
    gen_core: usize,
) -> (Vec<String>, Option<String>) {
    let (kept, left_out): (Vec<String>, Vec<String>) = paths
        .into_iter()
        .partition(|p| path_queues(p) as usize <= cores.len());
    let Some(most) = left_out.iter().map(|p| path_queues(p)).max() else {
        return (kept, None);
    };
    let line = format!(
        "compare: left out {} (not run): {} receive on {most} cores and this run has {} \
         (--cores {}; core {gen_core} is the generator's). To run them, give each its own \
         core: in the testbed `cargo xtask compare --smp {} -- --gen-core {} --cores {}`",
        left_out.join(", "),
        if left_out.len() == 1 { "it" } else { "they" },
        cores.len(),
        cores
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(","),
        most + 1,
        most,
        (0..most)
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(","),
    );
    (kept, Some(line))
}

fn testpmd_core(cores: &[usize]) -> usize {
    *cores.first().unwrap_or(&0)
}

/// RX queues (or, for RPS, cores) a path receives on (the offered rate
/// spreads over them).
fn path_queues(path: &str) -> u32 {
    if path.ends_with("-3q") {
        3
    } else if path.ends_with("-2q") {
        2
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 46 item 11: on a 2-vCPU counting guest (one receive core) the
    /// defaults leave the 2-queue rows out with one line, and keep the rest.
    #[test]
    fn the_defaults_leave_out_rows_that_need_more_cores() {
        let defaults: Vec<String> = RX_PATHS[..RX_PATHS.len() - 3]
            .iter()
            .map(|p| p.to_string())
            .collect();
        let (kept, line) = runnable_by_default(defaults.clone(), &[0], 1);
        assert!(kept.contains(&"pollnic-1q".to_string()));
        assert!(!kept.iter().any(|p| path_queues(p) > 1), "{kept:?}");
        assert_eq!(kept.len(), defaults.len() - 2, "{kept:?}");
        let line = line.expect("a line saying what was left out");
        assert!(
            line.contains("pollnic-2q, kernel-afpacket-tuned-2q")
                && line.contains("--smp 3 -- --gen-core 2 --cores 0,1"),
            "{line}"
        );
        let (kept, line) = runnable_by_default(defaults.clone(), &[0, 1], 2);
        assert_eq!((kept, line), (defaults, None));
    }

    #[test]
    fn virtio_rows_carry_the_family_in_their_name() {
        assert_eq!(virtio_row_name("pollnic-1q", None), "pollnic-virtio-1q");
        assert_eq!(
            virtio_row_name("pollnic-1q-rxonly", None),
            "pollnic-virtio-1q-rxonly"
        );
        assert_eq!(
            virtio_row_name("kernel-afxdp-busypoll", None),
            "kernel-virtio-afxdp-busypoll"
        );
        assert_eq!(
            virtio_row_name("dpdk-testpmd", Some("mergeable buffer Rx path")),
            "dpdk-testpmd-virtio"
        );
        assert_eq!(
            virtio_row_name("dpdk-testpmd", Some("packed ring mergeable buffer Rx path")),
            "dpdk-testpmd-virtio-packed"
        );
        assert_eq!(
            virtio_row_name("pollnic-packed-1q-rxonly", None),
            "pollnic-virtio-packed-1q-rxonly"
        );
        assert_eq!(
            virtio_row_name("pollnic-packed-inorder-1q-rxonly", None),
            "pollnic-virtio-packed-inorder-1q-rxonly"
        );
        for p in INORDER_PATHS {
            assert!(extra_path(p), "{p}");
        }
        for p in VIRTIO_PATHS {
            assert!(RX_PATHS.contains(&p) || PACKED_PATHS.contains(&p), "{p}");
        }
    }

    #[test]
    fn interrupt_rows_name_their_mode_and_fixed_eitr() {
        assert_eq!(irq_path("pollnic-1q-irq"), Some((IrqRow::Interrupt, None)));
        assert_eq!(
            irq_path("pollnic-1q-adaptive"),
            Some((IrqRow::Adaptive, None))
        );
        assert_eq!(
            irq_path("pollnic-1q-irq-eitr0"),
            Some((IrqRow::Interrupt, Some(0)))
        );
        assert_eq!(
            irq_path("pollnic-1q-adaptive-eitr250"),
            Some((IrqRow::Adaptive, Some(250)))
        );
        assert_eq!(
            irq_path("pollnic-1q-irq-eitr1022"),
            Some((IrqRow::Interrupt, Some(1022)))
        );
        for bad in [
            "pollnic-1q-irq-eitr",
            "pollnic-1q-irq-eitr1023",
            "pollnic-1q-irq-eitr050",
            "pollnic-1q-irq-eitr-5",
            "pollnic-1q-irqx",
            "pollnic-1q",
        ] {
            assert_eq!(irq_path(bad), None, "{bad}");
        }
        assert!(extra_path("pollnic-1q-irq-eitr100"));
    }
}
