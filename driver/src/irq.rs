//! Receive modes: busy-poll, interrupt and adaptive, over one MSI-X vector
//! per RX queue.
//!
//! The burst loop stays the same in every mode: call
//! [`crate::Queue::rx_burst`], then [`crate::Queue::wait_rx`] with what it
//! returned. In busy-poll mode `wait_rx` returns at once; in interrupt mode
//! an empty poll arms the queue's vector and sleeps on its eventfd; in
//! adaptive mode only a run of empty polls does (NAPI's idea, and DPDK
//! l3fwd-power's `rte_eth_dev_rx_intr_enable` after a run of idle polls).
//!
//! Arming follows the order that loses no frame: clear the vector's cause
//! (EICR), unmask it (EIMS), then look at the ring once more; a frame that
//! arrived in between is taken without sleeping, and one that arrives later
//! raises the vector. On waking the queue masks its vector itself (EIMC):
//! QEMU's igb has no EIAM auto-mask. Its EITR timer signals a vector once
//! more after it was masked; a signal that finds the ring empty sends the
//! queue back to sleep, still armed ([`IrqStats::stale`]).

pub use crate::cpuwait::Waitpkg;
use crate::lowlevel::io::{DeviceBar, IrqEvent};
pub use crate::msix::MsixError;
use std::sync::Arc;
use std::time::Duration;

/// How long an interrupt-mode wait blocks at most by default: the loop then
/// polls once and can look at a stop flag.
pub const DEFAULT_WAIT: Duration = Duration::from_millis(100);
/// The longest an adaptive queue spins on an empty ring before it sleeps,
/// by default: 50 µs, the value Linux recommends for `net.core.busy_poll`
/// and `busy_read` (`Documentation/admin-guide/sysctl/net.rst`).
pub const DEFAULT_MAX_SPIN: Duration = Duration::from_micros(50);
/// The latency bound of [`Moderation::dynamic`] by default, in µs: igb's
/// longest class (`bulk_latency`, 4,000 interrupts/s) fits under it.
pub const DEFAULT_MAX_LATENCY_US: u32 = 250;

/// How a queue's thread waits for frames ([`crate::Queue::wait_rx`]).
/// Non-exhaustive: match with a `_` arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RxMode {
    /// Poll without ever sleeping: one core per queue, the lowest latency
    /// (the default, and DPDK's poll mode).
    #[default]
    BusyPoll,
    /// Every empty poll arms the queue's MSI-X vector and blocks on its
    /// eventfd for at most `timeout` (counted from the last signal that
    /// found the ring empty, if one did: [`IrqStats::stale`]).
    Interrupt {
        /// Longest sleep per empty poll.
        timeout: Duration,
    },
    /// Poll while frames arrive; on an empty ring spin for a time budget
    /// derived from the measured inter-arrival gap, then arm the vector and
    /// block (at most `timeout`); back to polling on the first interrupt.
    ///
    /// The budget is twice the mean gap between frames (an exponentially
    /// weighted average over the queue's poll-and-sleep cycles), and 0 (sleep
    /// at the first empty poll, as [`RxMode::Interrupt`]) when that is more
    /// than `max_spin`; each spin in a row that ends in a sleep halves it
    /// (the spin did not pay), a spin that ends with a frame restores it.
    /// [`IrqStats::spin_budget_ns`] reports the budget in use.
    Adaptive {
        /// The longest spin on an empty ring; spinning stops (budget 0) when
        /// twice the mean inter-arrival gap is longer.
        max_spin: Duration,
        /// Longest sleep.
        timeout: Duration,
    },
}

impl RxMode {
    /// Interrupt mode with [`DEFAULT_WAIT`].
    pub const fn interrupt() -> RxMode {
        RxMode::Interrupt {
            timeout: DEFAULT_WAIT,
        }
    }
    /// Adaptive mode with [`DEFAULT_MAX_SPIN`] and [`DEFAULT_WAIT`].
    pub const fn adaptive() -> RxMode {
        RxMode::Adaptive {
            max_spin: DEFAULT_MAX_SPIN,
            timeout: DEFAULT_WAIT,
        }
    }
    /// Whether the mode needs the queue's MSI-X vector.
    pub fn uses_interrupts(&self) -> bool {
        !matches!(self, RxMode::BusyPoll)
    }
    /// The name the command lines use: `poll`, `irq`, `adaptive`.
    pub fn name(&self) -> &'static str {
        match self {
            RxMode::BusyPoll => "poll",
            RxMode::Interrupt { .. } => "irq",
            RxMode::Adaptive { .. } => "adaptive",
        }
    }
}

impl std::str::FromStr for RxMode {
    type Err = crate::error::ParseNameError;
    /// `poll` (or `busy-poll`), `irq` (or `interrupt`), `adaptive`, with the
    /// default timeout and idle-poll run.
    fn from_str(s: &str) -> Result<RxMode, Self::Err> {
        match s {
            "poll" | "busy-poll" => Ok(RxMode::BusyPoll),
            "irq" | "interrupt" => Ok(RxMode::interrupt()),
            "adaptive" => Ok(RxMode::adaptive()),
            _ => Err(crate::error::ParseNameError::new(
                "RX mode",
                s,
                "poll, irq or adaptive",
            )),
        }
    }
}

/// How a queue's vector is throttled (EITR): the counterpart of
/// `ethtool -C <if> rx-usecs`. Non-exhaustive: match with a `_` arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Moderation {
    /// At least `usecs` µs between two interrupts (0: none), as
    /// `rx-usecs N` with N > 3.
    Fixed {
        /// The interval, in µs (igb up to 8191, the 82599 up to 1022).
        usecs: u32,
    },
    /// Chosen at every sleep from the frames and bytes received since the
    /// last one, as igb's default dynamic mode (`rx-usecs 3`, "dynamic
    /// conservative"; Linux `igb_update_itr` and `igb_set_itr`): three
    /// classes, `lowest_latency` (70,000 interrupts/s, 14 µs),
    /// `low_latency` (20,000/s, 49 µs) and `bulk_latency` (4,000/s, 245 µs);
    /// small frames stay in `low_latency`, and the conservative mode never
    /// takes `lowest_latency`. The interval is then capped at
    /// `max_latency_us`, the longest a frame may wait for its interrupt.
    Dynamic {
        /// The cap on the interval, in µs.
        max_latency_us: u32,
    },
}

impl Default for Moderation {
    /// `Fixed { usecs: 0 }`: no throttle.
    fn default() -> Moderation {
        Moderation::Fixed { usecs: 0 }
    }
}

impl Moderation {
    /// Dynamic moderation capped at `max_latency_us` µs.
    pub const fn dynamic(max_latency_us: u32) -> Moderation {
        Moderation::Dynamic { max_latency_us }
    }
    /// The interval the vector starts with, in µs: `usecs`, or for dynamic
    /// moderation igb's `low_latency` class (49 µs) under the cap.
    pub fn initial_usecs(&self) -> u32 {
        match *self {
            Moderation::Fixed { usecs } => usecs,
            Moderation::Dynamic { max_latency_us } => ItrClass::Low.usecs().min(max_latency_us),
        }
    }
    /// The largest interval this setting may program, in µs.
    pub(crate) fn max_usecs(&self) -> u32 {
        match *self {
            Moderation::Fixed { usecs } => usecs,
            Moderation::Dynamic { max_latency_us } => ItrClass::Bulk.usecs().min(max_latency_us),
        }
    }
}

/// igb's interrupt-rate classes (Linux `enum latency_range`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ItrClass {
    /// 70,000 interrupts/s.
    Lowest,
    /// 20,000 interrupts/s.
    Low,
    /// 4,000 interrupts/s.
    Bulk,
}

impl ItrClass {
    /// The class's EITR interval in µs: igb's ITR values 56, 196 and 980 are
    /// in 0.25 µs units.
    pub(crate) fn usecs(self) -> u32 {
        match self {
            ItrClass::Lowest => 14,
            ItrClass::Low => 49,
            ItrClass::Bulk => 245,
        }
    }

    /// The next class after an interval in which `packets` frames of
    /// `bytes` bytes in all arrived (the thresholds of `igb_update_itr`).
    pub(crate) fn next(self, packets: u64, bytes: u64) -> ItrClass {
        if packets == 0 {
            return self;
        }
        let per = bytes / packets;
        match self {
            ItrClass::Lowest if per > 8000 => ItrClass::Bulk,
            ItrClass::Lowest if packets < 5 && bytes > 512 => ItrClass::Low,
            ItrClass::Lowest => ItrClass::Lowest,
            ItrClass::Low if bytes > 10_000 => {
                if per > 8000 || packets < 10 || per > 1200 {
                    ItrClass::Bulk
                } else if packets > 35 {
                    ItrClass::Lowest
                } else {
                    ItrClass::Low
                }
            }
            ItrClass::Low if per > 2000 => ItrClass::Bulk,
            ItrClass::Low if packets <= 2 && bytes < 512 => ItrClass::Lowest,
            ItrClass::Low => ItrClass::Low,
            ItrClass::Bulk if bytes > 25_000 && packets > 35 => ItrClass::Low,
            ItrClass::Bulk if bytes < 1500 => ItrClass::Low,
            ItrClass::Bulk => ItrClass::Bulk,
        }
    }
}

/// Dynamic moderation's state: the class, moved at every sleep; the
/// conservative mode (igb's default) keeps `lowest_latency` out.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Itr {
    class: ItrClass,
}

impl Default for Itr {
    fn default() -> Itr {
        Itr {
            class: ItrClass::Low,
        }
    }
}

impl Itr {
    /// Move the class by the frames and bytes since the last update; returns
    /// the interval to program, in µs, capped at `max_latency_us`.
    pub(crate) fn update(&mut self, packets: u64, bytes: u64, max_latency_us: u32) -> u32 {
        self.class = match self.class.next(packets, bytes) {
            ItrClass::Lowest => ItrClass::Low,
            c => c,
        };
        self.class.usecs().min(max_latency_us)
    }
}

/// Adaptive mode's spin budget (see [`RxMode::Adaptive`]): pure arithmetic
/// on nanosecond times and packet counts, so it is tested without a clock.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SpinBudget {
    /// The longest spin, ns.
    max_ns: u64,
    /// Mean gap between frames, ns (exponentially weighted, 1/4 new); 0
    /// until measured.
    gap_ns: u64,
    /// Spins in a row that ended in a sleep (the budget is halved per miss).
    misses: u32,
    /// Start of the current poll-and-sleep cycle: time and packets so far.
    cycle: Option<(u64, u64)>,
}

impl SpinBudget {
    pub(crate) fn new(max_spin: Duration) -> SpinBudget {
        SpinBudget {
            max_ns: max_spin.as_nanos().min(u64::MAX as u128) as u64,
            ..SpinBudget::default()
        }
    }
    /// An idle period starts at `now_ns` with `packets` received so far:
    /// the cycle since the last one gives a gap sample (its time over its
    /// frames; with no frame, its whole time). Returns the budget, ns.
    pub(crate) fn idle_starts(&mut self, now_ns: u64, packets: u64) -> u64 {
        if let Some((t0, p0)) = self.cycle {
            let dt = now_ns.saturating_sub(t0);
            let dp = packets.saturating_sub(p0);
            let sample = dt.checked_div(dp).unwrap_or(dt);
            self.gap_ns = if self.gap_ns == 0 {
                sample
            } else {
                (3 * (self.gap_ns / 4)).saturating_add(sample / 4)
            };
        }
        self.cycle = Some((now_ns, packets));
        self.budget_ns()
    }
    /// The budget now, ns: twice the mean gap, 0 when that is above the
    /// longest spin or unmeasured, halved per miss in a row.
    pub(crate) fn budget_ns(&self) -> u64 {
        let want = self.gap_ns.saturating_mul(2);
        if self.gap_ns == 0 || want > self.max_ns {
            return 0;
        }
        want >> self.misses.min(63)
    }
    /// The spin ended with a frame: it paid.
    pub(crate) fn paid(&mut self) {
        self.misses = 0;
    }
    /// The spin ran out and the queue slept: back off.
    pub(crate) fn missed(&mut self) {
        self.misses = (self.misses + 1).min(16);
    }
}

/// What a queue's waits did, since the device was opened.
/// Non-exhaustive: build one with `IrqStats::default()`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct IrqStats {
    /// Times the queue armed its vector and blocked.
    pub sleeps: u64,
    /// Interrupts taken from the vector's eventfd while blocked (an
    /// eventfd read may take several).
    pub interrupts: u64,
    /// Eventfd reads that found the ring empty: signals left from before
    /// the arm (a vector that fired as the queue found a frame at its arm;
    /// QEMU's igb EITR timer, which signals once more after a mask). The
    /// queue slept on without re-arming.
    pub stale: u64,
    /// Sleeps that ended by the timeout, no interrupt.
    pub timeouts: u64,
    /// Arms that found a frame already in the ring (no sleep).
    pub raced: u64,
    /// Adaptive mode: idle periods whose spin ended with a frame (a
    /// wake-up saved).
    pub spins_paid: u64,
    /// Adaptive mode: spin budget in use, ns (0: the queue sleeps at its
    /// first empty poll).
    pub spin_budget_ns: u64,
    /// The vector's throttle (EITR) now, in µs.
    pub itr_usecs: u32,
}

impl IrqStats {
    /// Wake-ups (sleeps) per received packet: what a results page divides
    /// the cost of a wake-up by. `None` for no packets.
    pub fn wakeups_per_packet(&self, packets: u64) -> Option<f64> {
        (packets > 0).then(|| self.sleeps as f64 / packets as f64)
    }
}

/// One RX queue's MSI-X vector: its eventfd and registers.
pub(crate) struct QueueIrq {
    pub event: Arc<IrqEvent>,
    pub ctl: IrqControl,
}

/// How a queue's interrupt is armed and masked.
pub(crate) enum IrqControl {
    /// Through the vector's registers (igb, ixgbe: EICR, EIMS, EIMC, EITR).
    Vector {
        regs: VectorRegs,
        bar: Arc<dyn DeviceBar>,
    },
    /// Through the RX virtqueue's `VRING_AVAIL_F_NO_INTERRUPT` flag
    /// (virtio-net; no throttle): the queue does it, as it owns the ring.
    Virtq,
}

impl QueueIrq {
    /// Clear the cause, unmask (EICR then EIMS); nothing for a virtqueue.
    pub fn arm(&self) {
        if let IrqControl::Vector { regs, bar } = &self.ctl {
            let r = bar.regs();
            r.write32(regs.eicr, regs.bit);
            r.write32(regs.eims, regs.bit);
        }
    }
    /// Mask (EIMC); nothing for a virtqueue.
    pub fn mask(&self) {
        if let IrqControl::Vector { regs, bar } = &self.ctl {
            bar.regs().write32(regs.eimc, regs.bit);
        }
    }
    /// Program the vector's throttle (EITR) to `usecs` µs; nothing for a
    /// virtqueue (virtio has no throttle: its `max_rx_usecs` is 0).
    pub fn set_usecs(&self, usecs: u32) {
        if let IrqControl::Vector { regs, bar } = &self.ctl {
            bar.regs().write32(regs.eitr, (regs.eitr_value)(usecs));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn modes_parse_by_their_command_line_names() {
        for m in [RxMode::BusyPoll, RxMode::interrupt(), RxMode::adaptive()] {
            assert_eq!(m.name().parse::<RxMode>().unwrap(), m);
        }
        let e = "napi".parse::<RxMode>().unwrap_err();
        assert_eq!((e.what(), e.given()), ("RX mode", "napi"));
        assert!(e.to_string().contains("poll, irq or adaptive"), "{e}");
        assert!(!RxMode::BusyPoll.uses_interrupts());
        assert!(RxMode::adaptive().uses_interrupts());
    }

    /// igb's thresholds (`igb_update_itr`), one interval at a time.
    #[test]
    fn itr_classes_move_as_igb_update_itr() {
        use ItrClass::*;
        // No frame: no change.
        assert_eq!(Bulk.next(0, 0), Bulk);
        // Small frames, few: lowest latency (igb's non-conservative mode).
        assert_eq!(Low.next(2, 128), Lowest);
        assert_eq!(Low.next(3, 192), Low);
        // 10 full-size frames (15 kB, > 1200 B each): bulk.
        assert_eq!(Low.next(10, 15_180), Bulk);
        // Many mid-size frames (40 x 300 B = 12 kB): lowest.
        assert_eq!(Low.next(40, 12_000), Lowest);
        // Jumbo average: bulk from low and from lowest.
        assert_eq!(Low.next(1, 9000), Bulk);
        assert_eq!(Lowest.next(1, 9000), Bulk);
        // A few frames over 512 bytes in all: lowest -> low.
        assert_eq!(Lowest.next(4, 600), Low);
        assert_eq!(Lowest.next(4, 400), Lowest);
        // Bulk comes back down on a thin interval, or on many frames.
        assert_eq!(Bulk.next(1, 64), Low);
        assert_eq!(Bulk.next(5, 6000), Bulk);
        assert_eq!(Bulk.next(40, 40_000), Low);
        assert_eq!(Bulk.next(10, 30_000), Bulk);
        assert_eq!(
            [Lowest, Low, Bulk].map(ItrClass::usecs),
            [14, 49, 245],
            "igb's ITR values 56, 196, 980 in 0.25 µs"
        );
    }

    #[test]
    fn dynamic_moderation_is_conservative_and_capped() {
        let mut itr = Itr::default();
        // 64-byte frames one or two at a time: igb's conservative mode keeps
        // low_latency (49 µs), never lowest_latency.
        for _ in 0..10 {
            assert_eq!(itr.update(1, 64, 250), 49);
            assert_eq!(itr.update(2, 128, 250), 49);
        }
        // Full-size frames in numbers: bulk (245 µs), under a 100 µs cap.
        assert_eq!(itr.update(10, 15_180, 250), 245);
        assert_eq!(itr.update(10, 15_180, 100), 100);
        // Back to a trickle: low again.
        assert_eq!(itr.update(1, 64, 250), 49);
        assert_eq!(itr.update(1, 64, 20), 20);
        let m = Moderation::dynamic(250);
        assert_eq!((m.initial_usecs(), m.max_usecs()), (49, 245));
        let m = Moderation::dynamic(30);
        assert_eq!((m.initial_usecs(), m.max_usecs()), (30, 30));
        let m = Moderation::Fixed { usecs: 100 };
        assert_eq!((m.initial_usecs(), m.max_usecs()), (100, 100));
        assert_eq!(Moderation::default(), Moderation::Fixed { usecs: 0 });
    }

    /// Feed `n` cycles of `gap_ns` with one frame each; returns the last
    /// budget.
    fn cycles(
        s: &mut SpinBudget,
        t: &mut u64,
        p: &mut u64,
        n: usize,
        gap_ns: u64,
        frames: u64,
    ) -> u64 {
        let mut b = 0;
        for _ in 0..n {
            *t += gap_ns;
            *p += frames;
            b = s.idle_starts(*t, *p);
        }
        b
    }

    #[test]
    fn spin_budget_follows_the_gap_and_backs_off() {
        let us = 1000;
        let mut s = SpinBudget::new(Duration::from_micros(50));
        let (mut t, mut p) = (0, 0);
        // Unmeasured: sleep at once.
        assert_eq!(s.idle_starts(t, p), 0);
        // 50 kpps: a frame every 20 µs, spin twice that.
        assert_eq!(cycles(&mut s, &mut t, &mut p, 20, 20 * us, 1), 40 * us);
        // A spin that ran out halves the budget, each time in a row ...
        s.missed();
        assert_eq!(s.budget_ns(), 20 * us);
        s.missed();
        assert_eq!(s.budget_ns(), 10 * us);
        // ... and one that paid restores it.
        s.paid();
        assert_eq!(s.budget_ns(), 40 * us);
        // A slept cycle that held 10 frames in 200 µs is still a 20 µs gap.
        assert_eq!(cycles(&mut s, &mut t, &mut p, 5, 200 * us, 10), 40 * us);
        // 20 kpps: 2 x 50 µs is over the 50 µs bound: no spin.
        assert_eq!(cycles(&mut s, &mut t, &mut p, 30, 50 * us, 1), 0);
        // Back to 50 kpps: the average comes down and spinning resumes.
        assert_eq!(cycles(&mut s, &mut t, &mut p, 30, 20 * us, 1), 40 * us);
        // Idle: a cycle with no frame (a timed-out sleep) counts whole.
        assert_eq!(cycles(&mut s, &mut t, &mut p, 1, 100_000 * us, 0), 0);
        // No spin at all when the bound is 0.
        let mut z = SpinBudget::new(Duration::ZERO);
        let (mut t, mut p) = (0, 0);
        assert_eq!(cycles(&mut z, &mut t, &mut p, 10, 1, 1), 0);
    }
}

/// The registers of one RX queue's MSI-X vector, as `DescFamily::configure_msix`
/// set them up: what the queue's thread writes to arm, mask and throttle it.
#[derive(Clone, Copy, Debug)]
pub struct VectorRegs {
    /// EICR's offset (write 1 to clear the vector's cause).
    pub eicr: u32,
    /// EIMS's offset (write the bit to unmask).
    pub eims: u32,
    /// EIMC's offset (write the bit to mask).
    pub eimc: u32,
    /// The vector's bit in EICR/EIMS/EIMC.
    pub bit: u32,
    /// The vector's EITR offset.
    pub eitr: u32,
    /// EITR's value for a throttle in µs (clamped to the family's maximum).
    pub eitr_value: fn(u32) -> u32,
}
