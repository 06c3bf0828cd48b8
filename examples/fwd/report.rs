//! fwd's live line per second and its summary, in loopback's terms: packets/s,
//! Mbit/s L2 and L1 (`pollnic_tools::metrics`), per-queue shares, ring counters and
//! the NIC's own counters, per direction and per port.

use crate::lane::{LaneResult, Mode};
use pollnic::pci::PciAddress;
use pollnic::stats::DeviceCounters;
use pollnic_tools::metrics::{Throughput, TxAccount};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// One forwarding direction: frames received on port `rx` leave by port `tx`.
#[derive(Clone, Copy, Debug)]
pub struct Dir {
    /// Index of the receiving port.
    pub rx: usize,
    /// Index of the sending port.
    pub tx: usize,
}

/// The hardware counters the summary prints for each port; the last is
/// pollnic's count of reads that found ICR.RXO (an RX ring overrun, the
/// only trace QEMU's igb leaves of such drops).
const HW: [&str; 7] = [
    "rx_packets",
    "tx_packets",
    "rx_missed_errors",
    "rx_no_buffer_count",
    "rx_crc_errors",
    "rx_total_packets",
    "icr_rxo_events",
];

/// Print a line per direction each second until `stop` is set or `seconds`
/// (0 = no limit) have passed.
pub fn live(
    ports: &[PciAddress],
    dirs: &[Dir],
    counters: &[DeviceCounters],
    seconds: u64,
    stop: &AtomicBool,
    json: bool,
) {
    let start = Instant::now();
    let end = (seconds > 0)
        .then(|| start.checked_add(Duration::from_secs(seconds)))
        .flatten();
    // Per direction: (rx packets, rx bytes) per queue and tx packets, at the last tick.
    let snap = |d: &Dir| {
        let rx: Vec<(u64, u64)> = counters[d.rx]
            .iter()
            .map(|c| {
                let s = c.snapshot();
                (s.rx_packets, s.rx_bytes)
            })
            .collect();
        let tx: u64 = counters[d.tx].iter().map(|c| c.snapshot().tx_packets).sum();
        (rx, tx)
    };
    let mut last: Vec<_> = dirs.iter().map(snap).collect();
    for tick in 1.. {
        let due = start + Duration::from_secs(tick);
        loop {
            let now = Instant::now();
            if stop.load(Relaxed) || end.is_some_and(|e| now >= e) {
                return;
            }
            if now >= due {
                break;
            }
            std::thread::sleep(Duration::from_millis(20).min(due - now));
        }
        for (k, d) in dirs.iter().enumerate() {
            let (rx, tx) = snap(d);
            let per_q: Vec<(u64, u64)> = rx
                .iter()
                .zip(&last[k].0)
                .map(|(n, l)| (n.0 - l.0, n.1 - l.1))
                .collect();
            let total = Throughput {
                packets: per_q.iter().map(|x| x.0).sum(),
                bytes: per_q.iter().map(|x| x.1).sum(),
                elapsed: Duration::from_secs(1),
            };
            let shares: Vec<String> = per_q
                .iter()
                .enumerate()
                .map(|(i, x)| format!("q{i} {} ({:.0} %)", x.0, percent(x.0, total.packets)))
                .collect();
            if json {
                crate::json::second(tick, ports[d.rx], ports[d.tx], &per_q, tx - last[k].1);
                last[k] = (rx, tx);
                continue;
            }
            println!(
                "[{tick:>3} s] {} -> {} rx {total} | tx {:>8} pps | {}",
                short(ports[d.rx]),
                short(ports[d.tx]),
                tx - last[k].1,
                shares.join(" ")
            );
            last[k] = (rx, tx);
        }
    }
}

/// The summary: per direction, then per port's hardware counters.
/// `per_queue[i][k]` is direction `k`'s result on queue `i`; `hw[p]` is port
/// `p`'s `(name, total)` list.
pub fn summary(
    ports: &[(PciAddress, String)],
    dirs: &[Dir],
    mode: Mode,
    per_queue: &[Vec<LaneResult>],
    hw: &[Vec<(&'static str, u64)>],
    ring_size: u32,
) {
    println!(
        "--- summary (under QEMU/TCG, QEMU's CPU emulation in software, these numbers include \
         emulation cost) ---"
    );
    for (k, d) in dirs.iter().enumerate() {
        let lanes: Vec<&LaneResult> = per_queue.iter().map(|q| &q[k]).collect();
        let received: u64 = lanes.iter().map(|l| l.received).sum();
        let forwarded: u64 = lanes.iter().map(|l| l.tx.packets).sum();
        let first = lanes.iter().filter_map(|l| l.first_last.map(|f| f.0)).min();
        let last = lanes.iter().filter_map(|l| l.first_last.map(|f| f.1)).max();
        let span = first.zip(last).map(|(a, b)| b - a).unwrap_or_default();
        println!(
            "{} -> {} ({}, {})",
            ports[d.rx].0,
            ports[d.tx].0,
            match mode {
                Mode::Io => "io",
                Mode::Macswap => "macswap",
            },
            if d.rx == d.tx {
                "zero copy"
            } else {
                "zero copy across the ports: one VFIO container"
            }
        );
        println!(
            "  received   {received} frames, forwarded {forwarded}, tx_dropped {} (pending at stop), tx_errors {}",
            lanes.iter().map(|l| l.tx_dropped()).sum::<u64>(),
            lanes.iter().map(|l| l.tx.tx_errors).sum::<u64>(),
        );
        println!(
            "  copies     {} (frames sent from the other port's mempool as they are: {})",
            lanes.iter().map(|l| l.copies).sum::<u64>(),
            lanes.iter().map(|l| l.tx.foreign).sum::<u64>(),
        );
        let rate = Throughput {
            packets: forwarded,
            bytes: lanes.iter().map(|l| l.tx.bytes).sum(),
            elapsed: span,
        };
        println!(
            "  rate       {} (forwarded, timed by arrival)",
            rate.summary()
        );
        let mut gaps = pollnic_tools::metrics::PollGaps::default();
        for l in &lanes {
            gaps.merge(&l.gaps);
        }
        println!(
            "  stalls     {}",
            gaps.describe(rate.pps() / lanes.len().max(1) as f64, ring_size - 1)
        );
        for (i, l) in lanes.iter().enumerate() {
            println!(
                "  queue {i}  {:>10} frames ({:5.1} %), {:.0} pps; bursts {}, empty polls {}, rx_nombuf {}, rx_errors {}, tx ring full {}, max poll gap {:.1} ms",
                l.received,
                percent(l.received, received),
                l.received as f64 / span.as_secs_f64().max(1e-9),
                l.rx.bursts,
                l.rx.empty_polls,
                l.rx.rx_nombuf,
                l.rx.rx_errors,
                l.tx.ring_full,
                l.gaps.max_ns as f64 / 1e6
            );
        }
        if received == 0 {
            println!(
                "  (no frame arrived on {}: check the link with `pollnic status` and what sends to it)",
                ports[d.rx].0
            );
        }
    }
    for (p, (addr, mac)) in ports.iter().enumerate() {
        // Counters the port's family does not keep are named as such, never
        // shown as a made-up 0.
        let get = |name: &str| hw[p].iter().find(|c| c.0 == name).map(|c| c.1);
        let (kept, absent): (Vec<&str>, Vec<&str>) =
            HW.iter().partition(|name| get(name).is_some());
        let counters: Vec<String> = kept
            .iter()
            .map(|name| format!("{name} {}", get(name).unwrap_or_default()))
            .collect();
        println!("port {addr} ({mac}) hw: {}", counters.join(", "));
        if !absent.is_empty() {
            println!("  not counted by this port's family: {}", absent.join(", "));
        }
        for r in pollnic_tools::refused::refused(get) {
            println!("  refused    {} {}: {}", r.count, r.counter, r.meaning);
        }
        // What fwd handed to this port's tx_burst, in every direction that
        // leaves by it, against what the port says it transmitted.
        let handed: u64 = dirs
            .iter()
            .enumerate()
            .filter(|(_, d)| d.tx == p)
            .map(|(k, _)| per_queue.iter().map(|q| q[k].tx.packets).sum::<u64>())
            .sum();
        let account = TxAccount {
            handed,
            tx_packets: hw[p]
                .iter()
                .find(|c| c.0 == "tx_packets")
                .map_or(0, |c| c.1),
            received: None,
        };
        if let Some(line) = account.shortfall_line() {
            println!("  {line}");
        }
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// `bb:dd.f`, enough to tell a host's ports apart on a live line.
fn short(a: PciAddress) -> String {
    format!("{:02x}:{:02x}.{:x}", a.bus, a.device, a.function)
}
