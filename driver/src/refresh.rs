//! The counters' read cadence: a thread per open `Device` that reads every
//! hardware counter at least every [`STATS_REFRESH`], so no clear-on-read
//! register fills up between two reads, whatever the application does.
//!
//! # Read cadence and the horizon
//! A counter that nobody reads for too long loses counts: its 32 bits fill
//! up. QEMU's igb makes a full 32-bit counter stick at 0xFFFF_FFFF
//! (`e1000x_inc_reg_if_not_full` in `hw/net/e1000x_common.h`; the 64-bit
//! octet pairs stick at 2⁶⁴ − 1). The horizon, the longest a counter may go
//! unread at line rate, with the smallest frame (64 bytes + 20 bytes of
//! preamble and inter-frame gap = 672 bits on the wire):
//!
//! | | frames/s at line rate | 32-bit frame counter (GPRC, GPTC, TPR, ...) | bytes/s at most | octet counter |
//! |---|---|---|---|---|
//! | 82576, 1 GbE | 10⁹ / 672 = 1,488,095 | 2³² / 1,488,095 = **2,886 s** (48 min) | 1.25 × 10⁸ | 64-bit pair: 2⁶⁴ / 1.25 × 10⁸ s ≈ 4,700 years |
//! | 82599, 10 GbE | 10¹⁰ / 672 = 14,880,952 | 2³² / 14,880,952 = **288.6 s** (4.8 min) | 1.25 × 10⁹ | 2³² / 1.25 × 10⁹ = **3.4 s** for the low 32 bits alone (Linux ixgbe keeps only GORCL/GOTCL on the 82599 and reads the high half just to clear it) |
//!
//! So every open `Device` reads all its counters at least every
//! [`STATS_REFRESH`] (1 s) on a thread of its own ([`StatsRefresher`]): 3.4×
//! inside the shortest horizon above and 288× inside the 82599's frame
//! counters' (1 s of 10 GbE is at most 1.25 × 10⁹ bytes, below 2³², so not
//! even a 32-bit octet register fills up between two reads).
//! `Device::stats()` reads once more and returns the totals.
//!
//! Past the horizon (a counter left unread, e.g. by a `Stats` driven by hand):
//! a 32-bit counter that reads exactly 0xFFFF_FFFF is taken as saturated. Its
//! total is then only a lower bound, and `Stats::saturated` names it, so a
//! loss is reported, never silent. (A part that wrapped instead of sticking
//! would lose whole multiples of 2³² undetectably; the cadence is what
//! prevents that.)

use crate::stats::Stats;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often an open `Device`'s counters are read at least (see the module
/// docs for the horizon this keeps inside).
pub const STATS_REFRESH: Duration = Duration::from_secs(1);

/// The totals of one device, shared between its refresher thread and
/// `Device::stats()`.
pub type SharedStats = Arc<Mutex<Stats>>;

/// A thread that calls `tick` (read the device's counters into its
/// [`SharedStats`]) every `interval` until stopped: the read cadence that
/// keeps the clear-on-read counters inside their horizon. Stop it
/// ([`StatsRefresher::stop`], also done on drop) before the device is reset:
/// a register read during reset can return all ones.
#[derive(Debug)]
pub struct StatsRefresher {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl StatsRefresher {
    /// Start calling `tick` every `interval` ([`STATS_REFRESH`] for a device).
    ///
    /// # Errors
    /// The OS error when the thread cannot be spawned.
    pub fn start(
        interval: Duration,
        mut tick: impl FnMut() + Send + 'static,
    ) -> std::io::Result<Self> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("pollnic-stats".into())
            .spawn(move || {
                let (lock, cv) = &*flag;
                let mut stopped = lock.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    let (s, _) = cv
                        .wait_timeout(stopped, interval)
                        .unwrap_or_else(|e| e.into_inner());
                    stopped = s;
                    if *stopped {
                        return;
                    }
                    tick();
                }
            })?;
        Ok(StatsRefresher {
            stop,
            thread: Some(thread),
        })
    }

    /// Stop the thread and wait for it (idempotent). No `tick` runs after
    /// this returns.
    pub fn stop(&mut self) {
        let (lock, cv) = &*self.stop;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for StatsRefresher {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::igb::stats::{update, LAYOUT};
    use crate::sys::mmio::Regs;
    use pollnic_hw::igb::stats::{Width, COUNTERS};
    use std::collections::HashMap;

    /// A register model of the counters as QEMU's igb keeps them: a 32-bit
    /// counter clears on read and sticks at 0xFFFF_FFFF when full; a 64-bit
    /// pair is one 64-bit value, its low half read without side effect and
    /// its high half read clearing both. Every read is logged in order.
    #[derive(Default)]
    struct Model {
        regs: Mutex<(HashMap<u32, u64>, Vec<u32>)>,
    }
    fn pair_of(off: u32) -> Option<(u32, u32)> {
        COUNTERS.iter().find_map(|c| match c.width {
            Width::Bits64 { lo, hi } if off == lo || off == hi => Some((lo, hi)),
            _ => None,
        })
    }
    impl Model {
        /// Count `n` events into the counter at `off` (its low register for a pair).
        fn count(&self, off: u32, n: u64) {
            let mut g = self.regs.lock().unwrap();
            let v = g.0.entry(off).or_insert(0);
            *v = match pair_of(off) {
                Some(_) => v.saturating_add(n),
                None => (*v + n).min(u32::MAX as u64),
            };
        }
        fn reads(&self) -> Vec<u32> {
            self.regs.lock().unwrap().1.clone()
        }
    }
    impl Regs for Model {
        fn read32(&self, off: u32) -> u32 {
            let mut g = self.regs.lock().unwrap();
            g.1.push(off);
            match pair_of(off) {
                Some((lo, _)) if off == lo => *g.0.get(&lo).unwrap_or(&0) as u32,
                Some((lo, _)) => (g.0.remove(&lo).unwrap_or(0) >> 32) as u32,
                None => g.0.remove(&off).unwrap_or(0) as u32,
            }
        }
        fn write32(&self, _off: u32, _val: u32) {}
    }

    const GPRC: u32 = 0x4074;
    const GORCL: u32 = 0x4088;
    const GORCH: u32 = 0x408c;
    /// Frames per second at line rate with 64-byte frames (672 bits each on
    /// the wire): 82576 (1 GbE) and 82599 (10 GbE).
    const PPS_1G: u64 = 1_000_000_000 / 672;
    const PPS_10G: u64 = 10_000_000_000 / 672;

    fn fresh() -> Stats {
        Stats::new(&LAYOUT)
    }

    #[test]
    fn the_documented_horizons_are_the_arithmetic() {
        assert_eq!((PPS_1G, PPS_10G), (1_488_095, 14_880_952));
        let horizon = |per_s: u64| (1u64 << 32) as f64 / per_s as f64;
        assert_eq!(horizon(PPS_1G) as u64, 2_886);
        assert_eq!((horizon(PPS_10G) * 10.0) as u64, 2_886); // 288.6 s
        assert_eq!((horizon(1_250_000_000) * 10.0) as u64, 34); // 3.4 s
                                                                // One refresh interval of 10 GbE fits even a 32-bit octet register.
        assert!(1_250_000_000 * STATS_REFRESH.as_secs() < 1 << 32);
    }

    #[test]
    fn a_32_bit_counter_crossing_2_pow_32_is_counted_exactly() {
        // 82599 line rate, read once a second for 300 s: the total passes
        // 2^32 (at 288.6 s), the register never comes near it.
        let m = Model::default();
        let mut s = fresh();
        for _ in 0..300 {
            m.count(GPRC, PPS_10G);
            update(&m, &mut s);
        }
        let want = 300 * PPS_10G;
        assert!(want > 1 << 32);
        assert_eq!(s.get("rx_packets"), Some(want));
        assert_eq!(s.saturated().count(), 0);
    }

    #[test]
    fn a_64_bit_pair_is_read_low_then_high() {
        let m = Model::default();
        let mut s = fresh();
        m.count(GORCL, 0x2_ffff_fff0);
        update(&m, &mut s);
        m.count(GORCL, 0x20);
        update(&m, &mut s);
        assert_eq!(s.get("rx_bytes"), Some(0x3_0000_0010));
        // Low then high, back to back, in every update.
        let reads = m.reads();
        let lows: Vec<usize> = (0..reads.len()).filter(|&i| reads[i] == GORCL).collect();
        assert_eq!(lows.len(), 2);
        for i in lows {
            assert_eq!(
                reads.get(i + 1),
                Some(&GORCH),
                "GORCL must be followed by GORCH"
            );
        }
        // The other order loses the low half on this model (reading the
        // high half clears the pair), which is why the order matters.
        m.count(GORCL, 0x1_0000_0005);
        let hi = m.read32(GORCH) as u64;
        let lo = m.read32(GORCL) as u64;
        assert_eq!(
            lo | hi << 32,
            0x1_0000_0000,
            "high first drops the low half"
        );
    }

    #[test]
    fn a_counter_unread_past_the_horizon_saturates_and_is_reported() {
        // 82576 line rate: 2,880 s unread is inside the 2,886 s horizon...
        let m = Model::default();
        let mut s = fresh();
        m.count(GPRC, 2_880 * PPS_1G);
        update(&m, &mut s);
        assert_eq!(s.get("rx_packets"), Some(2_880 * PPS_1G));
        assert_eq!(s.saturated().count(), 0);
        // ...3,000 s is past it: the register sticks at 0xFFFF_FFFF, the
        // total undercounts, and the loss is reported, not silent.
        let mut s = fresh();
        m.count(GPRC, 3_000 * PPS_1G);
        update(&m, &mut s);
        assert_eq!(s.get("rx_packets"), Some(u32::MAX as u64));
        assert!(s.get("rx_packets").unwrap() < 3_000 * PPS_1G);
        assert_eq!(s.saturated().collect::<Vec<_>>(), ["rx_packets"]);
        // Reading on the cadence again counts exactly from then on; the mark stays.
        m.count(GPRC, PPS_1G);
        update(&m, &mut s);
        assert_eq!(s.get("rx_packets"), Some(u32::MAX as u64 + PPS_1G));
        assert_eq!(s.saturated().count(), 1);
    }

    #[test]
    fn the_refresher_reads_on_its_cadence_and_stops() {
        let m = Arc::new(Model::default());
        let stats: SharedStats = Arc::new(Mutex::new(fresh()));
        let (mm, ss) = (Arc::clone(&m), Arc::clone(&stats));
        let mut r = StatsRefresher::start(Duration::from_millis(20), move || {
            update(&*mm, &mut ss.lock().unwrap());
        })
        .unwrap();
        for _ in 0..10 {
            m.count(GPRC, 1000);
            std::thread::sleep(Duration::from_millis(30));
        }
        r.stop();
        let reads = m.reads().iter().filter(|&&o| o == GPRC).count();
        assert!(
            reads >= 3,
            "only {reads} reads in 300 ms at a 20 ms cadence"
        );
        // Stopped: no read after `stop` returns.
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(m.reads().iter().filter(|&&o| o == GPRC).count(), reads);
        // Whatever the last refresh missed is read by the next update.
        let mut s = stats.lock().unwrap().clone();
        update(&*m, &mut s);
        assert_eq!(s.get("rx_packets"), Some(10_000));
    }
}
