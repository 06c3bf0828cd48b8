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
    /// Whether a rate means anything: at least two frames, over a span
    /// longer than zero (a summary's span runs from the first frame to the
    /// last, so one frame has none).
    pub fn measurable(&self) -> bool {
        self.packets >= 2 && !self.elapsed.is_zero()
    }
    /// A summary's rate: `N pps, ... over S s from first to last frame`, or
    /// `no rate: fewer than two frames` when not [`Throughput::measurable`].
    pub fn summary(&self) -> String {
        if self.measurable() {
            format!(
                "{self}, over {:.3} s from the first frame to the last",
                self.elapsed.as_secs_f64()
            )
        } else {
            "no rate: fewer than two frames, or all at one instant".to_string()
        }
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

/// Gaps between consecutive polls of one RX queue, in ns: a receive loop
/// that stops polling (descheduled, preempted, stalled in the emulator) for
/// longer than its free descriptors last at the arrival rate loses frames on
/// a real 82576 (counted in `rx_missed_errors`/`rx_no_buffer_count`) and,
/// silently, on QEMU's igb. Call [`PollGaps::poll`] after every
/// `rx_burst` (or [`PollGaps::tick`] with a time of your own per poll).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PollGaps {
    last_ns: u64,
    /// Empty polls since the last clock read.
    empty: u32,
    /// Longest gap seen, in ns.
    pub max_ns: u64,
    /// Gaps of at least 1 ms.
    pub over_1ms: u64,
    /// Gaps of at least 10 ms.
    pub over_10ms: u64,
}

/// Empty polls between two clock reads of [`PollGaps::poll`].
pub const EMPTY_POLLS_PER_CLOCK_READ: u32 = 64;

impl PollGaps {
    /// Record a poll that returned `got` frames. Reads CLOCK_MONOTONIC after
    /// every poll that returned frames and after every
    /// [`EMPTY_POLLS_PER_CLOCK_READ`]th empty one, and returns the time read
    /// (ns), which a caller uses as the frames' receive time; `None` when it
    /// did not read. Gaps are measured between clock reads, so a gap may
    /// include up to 63 empty polls (well under a µs each on hardware).
    ///
    /// Why not every poll: where the kernel has no stable TSC (QEMU/TCG
    /// guests: "Marking TSC unstable due to TSCs unsynchronized") the clock
    /// is the HPET, and every read is a system call plus an MMIO read that
    /// exits into the emulator under its global lock, which the generator's
    /// and the NIC's emulation need too (README, "pollnic-1q's loss at 50 and
    /// 100 kpps").
    #[inline]
    pub fn poll(&mut self, got: usize) -> Option<u64> {
        if got == 0 {
            self.empty += 1;
            if self.empty < EMPTY_POLLS_PER_CLOCK_READ {
                return None;
            }
        }
        self.empty = 0;
        let now = pollnic::clock::monotonic_ns();
        self.tick(now);
        Some(now)
    }

    /// Record a poll at `now_ns` (CLOCK_MONOTONIC, [`pollnic::clock::monotonic_ns`]).
    #[inline]
    pub fn tick(&mut self, now_ns: u64) {
        if self.last_ns != 0 {
            let gap = now_ns.saturating_sub(self.last_ns);
            self.max_ns = self.max_ns.max(gap);
            if gap >= 1_000_000 {
                self.over_1ms += 1;
                if gap >= 10_000_000 {
                    self.over_10ms += 1;
                }
            }
        }
        self.last_ns = now_ns;
    }

    /// Combine the gaps of several queues (the largest, and the counts summed).
    pub fn merge(&mut self, other: &PollGaps) {
        self.max_ns = self.max_ns.max(other.max_ns);
        self.over_1ms += other.over_1ms;
        self.over_10ms += other.over_10ms;
    }

    /// Frames that arrive at `rate_pps` during the longest gap.
    pub fn frames_in_max_gap(&self, rate_pps: f64) -> u64 {
        (rate_pps * self.max_ns as f64 / 1e9).round() as u64
    }

    /// One line for a summary: the longest gap, and how it compares with the
    /// ring at `rate_pps` frames/s arriving into `free_descriptors`, e.g.
    /// `max poll gap 24.1 ms (gaps >= 1 ms: 3, >= 10 ms: 1): ~1205 frames
    /// arrived for 511 free descriptors (more than the ring holds, if the
    /// sender kept sending)`. An estimate at the average rate: in an emulator
    /// the sender often stalls with the receiver, and then fewer arrive.
    pub fn describe(&self, rate_pps: f64, free_descriptors: u32) -> String {
        let arrived = self.frames_in_max_gap(rate_pps);
        format!(
            "max poll gap {:.1} ms (gaps >= 1 ms: {}, >= 10 ms: {}): ~{arrived} frames arrived for {free_descriptors} free descriptors{}",
            self.max_ns as f64 / 1e6,
            self.over_1ms,
            self.over_10ms,
            if arrived > free_descriptors as u64 {
                " (more than the ring holds, if the sender kept sending)"
            } else {
                ""
            }
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
    fn poll_gaps_read_the_clock_on_frames_and_every_64th_empty_poll() {
        let mut g = PollGaps::default();
        assert!(g.poll(3).is_some(), "a poll with frames reads the clock");
        for i in 1..EMPTY_POLLS_PER_CLOCK_READ {
            assert_eq!(g.poll(0), None, "empty poll {i} reads no clock");
        }
        let t = g.poll(0).expect("the 64th empty poll reads the clock");
        assert!(t >= g.last_ns && g.last_ns == t);
        assert_eq!(g.poll(0), None, "the count starts again");
        assert!(g.poll(1).is_some());
        assert_eq!(g.poll(0), None, "frames reset the count too");
    }
    #[test]
    fn poll_gaps_count_and_explain_overruns() {
        let mut g = PollGaps::default();
        for t in [1_000u64, 2_000, 2_500_000, 30_000_000, 30_001_000] {
            g.tick(t);
        }
        assert_eq!(g.max_ns, 27_500_000);
        assert_eq!((g.over_1ms, g.over_10ms), (2, 1));
        // 27.5 ms at 50 kpps is ~1375 frames: more than a 512 ring holds.
        assert_eq!(g.frames_in_max_gap(50_000.0), 1375);
        let line = g.describe(50_000.0, 511);
        assert!(line.contains("max poll gap 27.5 ms"), "{line}");
        assert!(
            line.contains("more than the ring holds, if the sender kept sending"),
            "{line}"
        );
        let mut h = PollGaps::default();
        h.tick(5);
        h.tick(2_000_005);
        g.merge(&h);
        assert_eq!((g.max_ns, g.over_1ms), (27_500_000, 3));
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

/// What became of the frames a tool handed to `tx_burst`: the sending port
/// may transmit fewer than it took (its `tx_packets`, GPTC, falls short: a
/// frame the NIC dropped before the wire, which no error counter of QEMU's
/// igb records), and the receiver may get fewer than were transmitted. The
/// tools split their `lost` into these two.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxAccount {
    /// Frames `tx_burst` took (the tool's "sent").
    pub handed: u64,
    /// The sending port's `tx_packets` counter (GPTC) over the same run.
    pub tx_packets: u64,
    /// Frames the tool received, when it receives them (`None` for pktgen).
    pub received: Option<u64>,
}

impl TxAccount {
    /// Frames taken by `tx_burst` that the sending port never transmitted.
    pub fn not_transmitted(&self) -> u64 {
        self.handed.saturating_sub(self.tx_packets)
    }
    /// Frames the sending port transmitted (no more than it took) that did
    /// not arrive: 0 when the tool receives nothing.
    pub fn not_received(&self) -> u64 {
        self.received
            .map_or(0, |r| self.handed.min(self.tx_packets).saturating_sub(r))
    }
    /// The line a summary prints when the port sent less than it was given,
    /// with the numbers; `None` when it sent them all.
    pub fn shortfall_line(&self) -> Option<String> {
        let n = self.not_transmitted();
        (n > 0).then(|| {
            format!(
                "NOT TRANSMITTED {n} of {} frames handed to tx_burst: the sending port's tx_packets \
                 counter is {} (the NIC took them and dropped them before the wire)",
                self.handed, self.tx_packets
            )
        })
    }
}

#[cfg(test)]
mod tx_account_tests {
    use super::TxAccount;

    #[test]
    fn lost_splits_into_not_transmitted_and_not_received() {
        let a = TxAccount {
            handed: 2000,
            tx_packets: 1992,
            received: Some(1990),
        };
        assert_eq!(a.not_transmitted(), 8);
        assert_eq!(a.not_received(), 2);
        let line = a.shortfall_line().unwrap();
        assert!(
            line.contains("8 of 2000") && line.contains("1992"),
            "{line}"
        );
        let all = TxAccount {
            handed: 10,
            tx_packets: 10,
            received: Some(10),
        };
        assert_eq!(all.shortfall_line(), None);
        assert_eq!((all.not_transmitted(), all.not_received()), (0, 0));
        // Counters that include other traffic never make a negative loss.
        let more = TxAccount {
            handed: 10,
            tx_packets: 210,
            received: None,
        };
        assert_eq!((more.not_transmitted(), more.not_received()), (0, 0));
    }
}

#[cfg(test)]
mod throughput_tests {
    use super::Throughput;
    use std::time::Duration;

    #[test]
    fn one_frame_has_no_rate() {
        let one = Throughput {
            packets: 1,
            bytes: 60,
            elapsed: Duration::ZERO,
        };
        assert!(!one.measurable());
        assert!(one.summary().starts_with("no rate"), "{}", one.summary());
        let two = Throughput {
            packets: 2,
            bytes: 120,
            elapsed: Duration::from_millis(1),
        };
        assert!(
            two.summary().starts_with("2000 pps")
                && two.summary().contains("first frame to the last")
        );
    }
}
