//! The numbers network engineers compare paths by: packets/s, payload and L1
//! line-rate Mbit/s, and latency percentiles from an HDR histogram.

use hdrhistogram::Histogram;
use std::fmt;
use std::time::Duration;

/// Bytes each frame occupies on the wire beyond its L2 bytes without FCS:
/// FCS 4 + preamble and SFD 8 + minimum inter-frame gap 12 (IEEE 802.3 §4.4.2).
pub const L1_OVERHEAD_BYTES: u64 = 24;

/// Frames and bytes over a time span.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Throughput {
    /// Frames.
    pub packets: u64,
    /// L2 bytes without FCS.
    pub bytes: u64,
    /// Span.
    pub elapsed: Duration,
}

impl Throughput {
    fn secs(&self) -> f64 {
        self.elapsed.as_secs_f64().max(1e-9)
    }
    /// Packets per second.
    pub fn pps(&self) -> f64 {
        self.packets as f64 / self.secs()
    }
    /// Payload rate: L2 frame bytes (destination MAC through the end of the
    /// frame, no FCS) per second, in Mbit/s; printed as "Mbit/s L2".
    pub fn payload_mbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.secs() / 1e6
    }
    /// Line rate including FCS, preamble and inter-frame gap, in Mbit/s.
    pub fn l1_mbps(&self) -> f64 {
        (self.bytes + self.packets * L1_OVERHEAD_BYTES) as f64 * 8.0 / self.secs() / 1e6
    }
}

impl fmt::Display for Throughput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:.0} pps, {:.1} Mbit/s L2, {:.1} Mbit/s L1",
            self.pps(),
            self.payload_mbps(),
            self.l1_mbps()
        )
    }
}

/// Latency in ns, recorded into an HDR histogram (3 significant digits, 1 ns to 60 s).
pub struct Latency {
    hist: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Self {
        Latency {
            hist: Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds"),
        }
    }
}

impl Latency {
    /// Record one sample in ns (clamped into the histogram's range).
    pub fn record(&mut self, ns: u64) {
        self.hist.saturating_record(ns.max(1));
    }
    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }
    /// Value at `q` (0..=1) in ns.
    pub fn quantile_ns(&self, q: f64) -> u64 {
        self.hist.value_at_quantile(q)
    }
    /// Largest sample in ns.
    pub fn max_ns(&self) -> u64 {
        self.hist.max()
    }
    /// Add another histogram's samples.
    pub fn merge(&mut self, other: &Latency) {
        self.hist.add(&other.hist).expect("same bounds");
    }
}

impl fmt::Display for Latency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.count() == 0 {
            return write!(f, "no samples");
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        write!(
            f,
            "P50 {:.1} µs, P99 {:.1} µs, P99.9 {:.1} µs, max {:.1} µs ({} samples)",
            us(self.quantile_ns(0.5)),
            us(self.quantile_ns(0.99)),
            us(self.quantile_ns(0.999)),
            us(self.max_ns()),
            self.count()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn line_rate_of_64_byte_frames_at_1g() {
        // 1.488 Mpps of 64-byte frames (60 without FCS) fill 1 GbE at L1.
        let t = Throughput {
            packets: 1_488_095,
            bytes: 1_488_095 * 60,
            elapsed: Duration::from_secs(1),
        };
        assert!((t.l1_mbps() - 1000.0).abs() < 0.1, "{}", t.l1_mbps());
        assert!((t.payload_mbps() - 714.3).abs() < 0.1);
    }
    #[test]
    fn percentiles_are_ordered() {
        let mut l = Latency::default();
        for i in 1..=10_000u64 {
            l.record(i * 100);
        }
        let (p50, p99, p999, max) = (
            l.quantile_ns(0.5),
            l.quantile_ns(0.99),
            l.quantile_ns(0.999),
            l.max_ns(),
        );
        assert!(p50 <= p99 && p99 <= p999 && p999 <= max);
        assert!((p50 as f64 - 500_000.0).abs() / 500_000.0 < 0.01);
    }
}
