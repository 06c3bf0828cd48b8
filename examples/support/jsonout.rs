//! Shared pieces of the examples' `--json` output: one JSON object per line
//! (`"type": "start" | "second" | "summary"`), built with `serde_json`, so a
//! monitoring pipeline can read the stream line by line.
//!
//! Units are in the key names: `_pps` packets/s, `_mbps_l2` Mbit/s of frame
//! bytes without FCS, `_mbps_l1` Mbit/s on the wire (+24 bytes per frame:
//! FCS, preamble, inter-frame gap), `_ns` nanoseconds; shares are fractions
//! of 1.

use crate::metrics::{Latency, Throughput};
use serde_json::{json, Value};

/// `{"pps", "mbps_l2", "mbps_l1", "packets", "bytes", "seconds"}` of `t`;
/// the rates are `null` when [`Throughput::measurable`] is false (fewer
/// than two frames).
pub fn throughput(t: &Throughput) -> Value {
    let rate = |v: f64| t.measurable().then_some(v);
    json!({
        "pps": rate(t.pps()),
        "mbps_l2": rate(t.payload_mbps()),
        "mbps_l1": rate(t.l1_mbps()),
        "packets": t.packets,
        "bytes": t.bytes,
        "seconds": t.elapsed.as_secs_f64(),
    })
}

/// `{"samples", "p50_ns", "p99_ns", "p999_ns", "max_ns"}`; the percentiles
/// are `null` without samples.
pub fn latency(l: &Latency) -> Value {
    if l.count() == 0 {
        return json!({"samples": 0, "p50_ns": null, "p99_ns": null, "p999_ns": null, "max_ns": null});
    }
    json!({
        "samples": l.count(),
        "p50_ns": l.quantile_ns(0.5),
        "p99_ns": l.quantile_ns(0.99),
        "p999_ns": l.quantile_ns(0.999),
        "max_ns": l.max_ns(),
    })
}

/// Each count's share of their sum (all 0 when the sum is 0).
pub fn shares(counts: &[u64]) -> Vec<f64> {
    let total: u64 = counts.iter().sum();
    counts
        .iter()
        .map(|&c| {
            if total > 0 {
                c as f64 / total as f64
            } else {
                0.0
            }
        })
        .collect()
}

/// Prints `v` as one line on stdout.
pub fn emit(v: &Value) {
    println!("{v}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn shapes() {
        let t = Throughput {
            packets: 1000,
            bytes: 60_000,
            elapsed: Duration::from_secs(1),
        };
        let v = throughput(&t);
        assert_eq!(v["pps"], 1000.0);
        assert_eq!(v["mbps_l2"], 0.48);
        assert_eq!(shares(&[1, 3]), vec![0.25, 0.75]);
        assert_eq!(shares(&[0, 0]), vec![0.0, 0.0]);
        let mut l = Latency::default();
        assert!(latency(&l)["p50_ns"].is_null());
        for ns in [1000, 2000, 3000] {
            l.record(ns);
        }
        let v = latency(&l);
        assert_eq!(v["samples"], 3);
        assert!((1995..=2005).contains(&v["p50_ns"].as_u64().unwrap()));
        assert!(v["max_ns"].as_u64().unwrap() >= 2995);
    }
}
