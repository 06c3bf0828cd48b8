//! fwd's `--json` output: a `second` object per direction each second and
//! one `summary` object, one per line (see `pollnic_tools::jsonout` for units).
//! fwd does not timestamp frames, so it has no latency; `loopback --json`
//! has it.

use crate::lane::{LaneResult, Mode};
use crate::report::Dir;
use pollnic::pci::PciAddress;
use pollnic_tools::jsonout::{emit, shares, throughput};
use pollnic_tools::metrics::{PollGaps, Throughput};
use serde_json::json;

/// One direction's second: `rx` per queue `(packets, bytes)`, `tx` packets.
pub fn second(tick: u64, rx_port: PciAddress, tx_port: PciAddress, per_q: &[(u64, u64)], tx: u64) {
    let total = Throughput {
        packets: per_q.iter().map(|x| x.0).sum(),
        bytes: per_q.iter().map(|x| x.1).sum(),
        elapsed: std::time::Duration::from_secs(1),
    };
    let pps: Vec<u64> = per_q.iter().map(|x| x.0).collect();
    emit(&json!({
        "type": "second", "second": tick,
        "rx_port": rx_port.to_string(), "tx_port": tx_port.to_string(),
        "rx": throughput(&total), "tx_pps": tx,
        "queue_pps": pps, "queue_shares": shares(&pps),
    }));
}

/// The summary: per direction received/forwarded/drops/rate/queues, then
/// every hardware counter of each port under its `ethtool -S` name.
pub fn summary(
    ports: &[(PciAddress, String)],
    dirs: &[Dir],
    mode: Mode,
    per_queue: &[Vec<LaneResult>],
    hw: &[Vec<(&'static str, u64)>],
    interrupted: bool,
) {
    let directions: Vec<_> = dirs
        .iter()
        .enumerate()
        .map(|(k, d)| {
            let lanes: Vec<&LaneResult> = per_queue.iter().map(|q| &q[k]).collect();
            let received: Vec<u64> = lanes.iter().map(|l| l.received).collect();
            let forwarded: u64 = lanes.iter().map(|l| l.tx.packets).sum();
            let first = lanes.iter().filter_map(|l| l.first_last.map(|f| f.0)).min();
            let last = lanes.iter().filter_map(|l| l.first_last.map(|f| f.1)).max();
            let span = first.zip(last).map(|(a, b)| b - a).unwrap_or_default();
            let mut gaps = PollGaps::default();
            for l in &lanes {
                gaps.merge(&l.gaps);
            }
            let sh = shares(&received);
            let queues: Vec<_> = lanes
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    json!({
                        "queue": i, "received": l.received, "share": sh[i],
                        "forwarded": l.tx.packets, "rx_bursts": l.rx.bursts,
                        "rx_empty_polls": l.rx.empty_polls, "rx_nombuf": l.rx.rx_nombuf,
                        "rx_errors": l.rx.rx_errors, "tx_ring_full": l.tx.ring_full,
                        "tx_dropped": l.tx_dropped(), "max_poll_gap_ns": l.gaps.max_ns,
                    })
                })
                .collect();
            json!({
                "rx_port": ports[d.rx].0.to_string(), "tx_port": ports[d.tx].0.to_string(),
                "received": received.iter().sum::<u64>(), "forwarded": forwarded,
                "tx_dropped": lanes.iter().map(|l| l.tx_dropped()).sum::<u64>(),
                "tx_errors": lanes.iter().map(|l| l.tx.tx_errors).sum::<u64>(),
                "copies": lanes.iter().map(|l| l.copies).sum::<u64>(),
                "from_other_port": lanes.iter().map(|l| l.tx.foreign).sum::<u64>(),
                "forwarded_rate": throughput(&Throughput {
                    packets: forwarded,
                    bytes: lanes.iter().map(|l| l.tx.bytes).sum(),
                    elapsed: span,
                }),
                "max_poll_gap_ns": gaps.max_ns,
                "queues": queues,
            })
        })
        .collect();
    let port_counters: Vec<_> = ports
        .iter()
        .enumerate()
        .map(|(p, (addr, mac))| {
            let counters: serde_json::Map<String, serde_json::Value> = hw[p]
                .iter()
                .map(|(n, v)| ((*n).to_owned(), json!(v)))
                .collect();
            // The nonzero drop and error counters, as capture and loopback
            // give them (a counter the family lacks is absent, never 0).
            let refused: serde_json::Map<String, serde_json::Value> =
                pollnic_tools::refused::refused(|n| hw[p].iter().find(|c| c.0 == n).map(|c| c.1))
                    .into_iter()
                    .map(|r| (r.counter.to_owned(), json!(r.count)))
                    .collect();
            json!({"port": addr.to_string(), "mac": mac, "counters": counters, "refused": refused})
        })
        .collect();
    emit(&json!({
        "type": "summary",
        "mode": match mode { Mode::Io => "io", Mode::Macswap => "macswap" },
        "interrupted": interrupted,
        "directions": directions,
        "ports": port_counters,
    }));
}
