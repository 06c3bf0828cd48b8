//! What a receiver counts: frames, bytes, latency from the frame's send
//! timestamp, the span between first and last frame, and CPU time.

use pollnic_tools::metrics::Latency;

/// One receiver's view of a row.
#[derive(Default)]
pub struct Tally {
    /// Test frames received.
    pub received: u64,
    /// Their L2 bytes (no FCS).
    pub bytes: u64,
    /// Send-to-receive latency, ns.
    pub lat: Latency,
    /// CLOCK_MONOTONIC of the first and last frame, ns.
    pub first_last: Option<(u64, u64)>,
    /// CPU time spent receiving (threads, plus softirq for the kernel path), ns.
    pub cpu_ns: u64,
    /// Gaps between RX polls, for the paths that poll (pollnic).
    pub gaps: Option<pollnic_tools::metrics::PollGaps>,
}

impl Tally {
    /// Count one frame of `len` L2 bytes sent at `tx_ns`, received at `now_ns`.
    #[inline]
    pub fn frame(&mut self, len: usize, tx_ns: u64, now_ns: u64) {
        self.received += 1;
        self.bytes += len as u64;
        self.lat.record(now_ns.saturating_sub(tx_ns));
        self.first_last = Some((self.first_last.map_or(now_ns, |f| f.0), now_ns));
    }

    /// Fold another receiver thread's tally into this one.
    pub fn merge(&mut self, o: Tally) {
        self.received += o.received;
        self.bytes += o.bytes;
        self.lat.merge(&o.lat);
        self.cpu_ns += o.cpu_ns;
        self.gaps = match (self.gaps, o.gaps) {
            (Some(mut a), Some(b)) => {
                a.merge(&b);
                Some(a)
            }
            (a, b) => a.or(b),
        };
        self.first_last = match (self.first_last, o.first_last) {
            (Some(a), Some(b)) => Some((a.0.min(b.0), a.1.max(b.1))),
            (a, b) => a.or(b),
        };
    }
}
