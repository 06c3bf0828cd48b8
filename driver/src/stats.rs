//! Hardware counters read into 64-bit running totals under their `ethtool -S`
//! names, for any family: each family gives a layout (its counter
//! table from `pollnic_hw`, sums of register arrays, alternative names, and
//! software-only counters) and the same clear-on-read accumulation runs over it.
//!
//! How often the registers must be read so that none fills up (the horizon
//! at line rate on the 82576 and the 82599), and the thread that guarantees
//! it, are in the crate's `refresh` module
//! (`docs/design/counters.md`). A 32-bit register that reads 0xFFFF_FFFF
//! went unread past its horizon (QEMU's igb sticks there,
//! `e1000x_inc_reg_if_not_full` in `hw/net/e1000x_common.h`): its total is
//! then a lower bound, and [`Stats::saturated`] names it.

pub use crate::counters::{DeviceCounters, QueueCounters, QueueSnapshot};
pub use crate::device::StatsReader;
pub use crate::irq::IrqStats;
use crate::sys::mmio::Regs;
use pollnic_hw::ixgbe::stats::Sum;
use pollnic_hw::stats::{Counter as Register, Width};
pub use pollnic_rings::{RxStats, TxStats};

/// The counter pollnic keeps itself on igb: reads of the counters that
/// found ICR.RXO set (an RX ring overrun, the only trace QEMU's igb leaves
/// of such drops).
pub(crate) const ICR_RXO_EVENTS: &str = "icr_rxo_events";

/// The hardware counters both Intel families have (virtio-net has the
/// packet and byte counts only: [`Stats::counter`] is `None` for the rest),
/// by their `ethtool -S` names
/// (Linux igb's; the 82599's Linux names are accepted by [`Stats::get`] too).
/// [`Stats::counter`] reads one without a string look-up. Non-exhaustive:
/// more may be added.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Counter {
    /// Good packets received (GPRC).
    RxPackets,
    /// Good packets transmitted (GPTC).
    TxPackets,
    /// Good octets received, FCS included (GORCL/GORCH; virtio-net counts
    /// frames without FCS, which virtio never carries).
    RxBytes,
    /// Good octets transmitted, FCS included (GOTCL/GOTCH; virtio-net:
    /// without FCS).
    TxBytes,
    /// Frames dropped for want of room in the packet buffer (MPC; the
    /// 82599's sum of MPC(0..8)).
    RxMissedErrors,
    /// Frames that found no free RX descriptor (RNBC; 82599: the sum of
    /// QPRDC, Linux `rx_no_dma_resources`).
    RxNoBufferCount,
    /// Broadcast frames received (BPRC).
    RxBroadcast,
    /// Broadcast frames transmitted (BPTC).
    TxBroadcast,
    /// Multicast frames received (MPRC).
    RxMulticast,
    /// Multicast frames transmitted (MPTC).
    TxMulticast,
    /// Frames received with a bad FCS (CRCERRS).
    RxCrcErrors,
    /// Length errors: too short plus too long (RUC + ROC; 82599 RLEC).
    RxLengthErrors,
    /// Frames longer than the maximum frame size (ROC).
    RxLongLengthErrors,
    /// Frames shorter than 64 bytes (RUC).
    RxShortLengthErrors,
    /// All packets received, good or bad (TPR).
    RxTotalPackets,
    /// All packets transmitted (TPT).
    TxTotalPackets,
    /// XON PAUSE frames received (igb XONRXC; 82599 LXONRXCNT).
    RxFlowControlXon,
    /// XOFF PAUSE frames received (igb XOFFRXC; 82599 LXOFFRXCNT).
    RxFlowControlXoff,
    /// XON PAUSE frames sent (igb XONTXC; 82599 LXONTXC).
    TxFlowControlXon,
    /// XOFF PAUSE frames sent (igb XOFFTXC; 82599 LXOFFTXC).
    TxFlowControlXoff,
}

impl Counter {
    /// Every counter, in `ethtool -S` order.
    pub const ALL: [Counter; 20] = [
        Counter::RxPackets,
        Counter::TxPackets,
        Counter::RxBytes,
        Counter::TxBytes,
        Counter::RxMissedErrors,
        Counter::RxNoBufferCount,
        Counter::RxBroadcast,
        Counter::TxBroadcast,
        Counter::RxMulticast,
        Counter::TxMulticast,
        Counter::RxCrcErrors,
        Counter::RxLengthErrors,
        Counter::RxLongLengthErrors,
        Counter::RxShortLengthErrors,
        Counter::RxTotalPackets,
        Counter::TxTotalPackets,
        Counter::RxFlowControlXon,
        Counter::RxFlowControlXoff,
        Counter::TxFlowControlXon,
        Counter::TxFlowControlXoff,
    ];

    /// Its `ethtool -S` name, e.g. `rx_packets`: what [`Stats::get`] takes
    /// and what the tools print and write in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Counter::RxPackets => "rx_packets",
            Counter::TxPackets => "tx_packets",
            Counter::RxBytes => "rx_bytes",
            Counter::TxBytes => "tx_bytes",
            Counter::RxMissedErrors => "rx_missed_errors",
            Counter::RxNoBufferCount => "rx_no_buffer_count",
            Counter::RxBroadcast => "rx_broadcast",
            Counter::TxBroadcast => "tx_broadcast",
            Counter::RxMulticast => "rx_multicast",
            Counter::TxMulticast => "tx_multicast",
            Counter::RxCrcErrors => "rx_crc_errors",
            Counter::RxLengthErrors => "rx_length_errors",
            Counter::RxLongLengthErrors => "rx_long_length_errors",
            Counter::RxShortLengthErrors => "rx_short_length_errors",
            Counter::RxTotalPackets => "rx_total_packets",
            Counter::TxTotalPackets => "tx_total_packets",
            Counter::RxFlowControlXon => "rx_flow_control_xon",
            Counter::RxFlowControlXoff => "rx_flow_control_xoff",
            Counter::TxFlowControlXon => "tx_flow_control_xon",
            Counter::TxFlowControlXoff => "tx_flow_control_xoff",
        }
    }
}

impl Counter {
    /// The name the 82599's Linux driver gives it where that is not an alias
    /// of [`Counter::name`] (ixgbe has no RNBC; its `rx_no_dma_resources`,
    /// the sum of QPRDC, counts the same drops).
    fn other_name(self) -> Option<&'static str> {
        match self {
            Counter::RxNoBufferCount => Some("rx_no_dma_resources"),
            _ => None,
        }
    }
}

impl std::fmt::Display for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a family's counters are.
#[derive(Debug)]
pub(crate) struct StatsLayout {
    /// The registers, in `ethtool -S` order.
    pub counters: &'static [Register],
    /// Counters that are sums of several registers of `counters` (82599's
    /// `rx_missed_errors` = MPC(0..8)), reported after them.
    pub sums: &'static [Sum],
    /// `(other_name, name_in_counters)`: names the family's Linux driver
    /// prints for the same register, accepted by [`Stats::get`].
    pub aliases: &'static [(&'static str, &'static str)],
    /// Counters the driver keeps itself (not registers), reported last and
    /// incremented with [`Stats::bump_extra`] (igb's `icr_rxo_events`).
    pub extra: &'static [&'static str],
}

/// Running totals since the device was opened.
#[derive(Clone, Debug)]
pub struct Stats {
    layout: &'static StatsLayout,
    totals: Vec<u64>,
    extra: Vec<u64>,
    /// Per register counter: a read found it saturated (0xFFFF_FFFF).
    saturated: Vec<bool>,
}

impl PartialEq for Stats {
    fn eq(&self, o: &Self) -> bool {
        std::ptr::eq(self.layout, o.layout)
            && self.totals == o.totals
            && self.extra == o.extra
            && self.saturated == o.saturated
    }
}
impl Eq for Stats {}

/// Read counter `c` once: 64-bit pairs low then high (reading the high half
/// clears the pair on both families: 82576 datasheet §8.19, Linux
/// `ixgbe_update_stats`).
pub(crate) fn read_counter(r: &dyn Regs, c: &Register) -> u64 {
    match c.width {
        Width::Bits32(o) => r.read32(o) as u64,
        Width::Bits64 { lo, hi } => {
            let l = r.read32(lo) as u64;
            l | (r.read32(hi) as u64) << 32
        }
    }
}

impl Stats {
    /// All zero.
    pub(crate) fn new(layout: &'static StatsLayout) -> Self {
        Stats {
            layout,
            totals: vec![0; layout.counters.len()],
            extra: vec![0; layout.extra.len()],
            saturated: vec![false; layout.counters.len()],
        }
    }

    /// Read every register once and add it to the totals (they clear on
    /// read). A 32-bit counter that reads 0xFFFF_FFFF is marked saturated
    /// ([`Stats::saturated`]): it went unread past its horizon.
    pub(crate) fn read_registers(&mut self, r: &dyn Regs) {
        for ((t, c), sat) in self
            .totals
            .iter_mut()
            .zip(self.layout.counters)
            .zip(self.saturated.iter_mut())
        {
            let v = read_counter(r, c);
            *sat |= matches!(c.width, Width::Bits32(_)) && v == u32::MAX as u64;
            *t = t.wrapping_add(v);
        }
    }

    /// The `ethtool -S` names of the 32-bit counters some read found
    /// saturated (0xFFFF_FFFF: left unread past the horizon, see
    /// `docs/design/counters.md`). Their totals are lower bounds: counts were lost.
    pub fn saturated(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.layout
            .counters
            .iter()
            .zip(&self.saturated)
            .filter(|(_, &s)| s)
            .map(|(c, _)| c.name)
    }

    /// Add `n` to the software counter `name` of [`StatsLayout::extra`].
    ///
    /// # Panics
    /// If the layout has no such counter (a bug in the family code).
    pub(crate) fn bump_extra(&mut self, name: &str, n: u64) {
        let i = self
            .layout
            .extra
            .iter()
            .position(|e| *e == name)
            .unwrap_or_else(|| panic!("no software counter {name} in this layout"));
        self.extra[i] += n;
    }

    /// Set the software counter `name` of [`StatsLayout::extra`] to `v`
    /// (a total the driver keeps elsewhere, e.g. virtio-net's ring counters).
    ///
    /// # Panics
    /// If the layout has no such counter (a bug in the family code).
    pub(crate) fn set_extra(&mut self, name: &str, v: u64) {
        let i = self
            .layout
            .extra
            .iter()
            .position(|e| *e == name)
            .unwrap_or_else(|| panic!("no software counter {name} in this layout"));
        self.extra[i] = v;
    }

    fn index_of(&self, name: &str) -> Option<usize> {
        let name = self
            .layout
            .aliases
            .iter()
            .find(|(a, _)| *a == name)
            .map_or(name, |(_, ours)| ours);
        self.layout.counters.iter().position(|c| c.name == name)
    }

    /// Total of the counter named `name` (an `ethtool -S` name such as
    /// `rx_packets`, an alias, a sum or a software counter); `None` for a
    /// name this family does not have.
    pub fn get(&self, name: &str) -> Option<u64> {
        if let Some(i) = self.index_of(name) {
            return Some(self.totals[i]);
        }
        if let Some(s) = self.layout.sums.iter().find(|s| s.name == name) {
            return s.parts.iter().try_fold(0u64, |acc, p| {
                Some(acc.wrapping_add(self.totals[self.index_of(p)?]))
            });
        }
        let i = self.layout.extra.iter().position(|e| *e == name)?;
        Some(self.extra[i])
    }

    /// Total of counter `c` since the device was opened (packets or bytes,
    /// as the counter counts); `None` where the port's family does not
    /// count it, never a made-up 0. Every [`Counter`] exists on the two
    /// Intel families (checked by a test); virtio-net, which has no counter
    /// registers, has the driver's own `rx_packets`, `tx_packets`,
    /// `rx_bytes` and `tx_bytes` (frames without FCS) and none of the rest.
    pub fn counter(&self, c: Counter) -> Option<u64> {
        self.get(c.name())
            .or_else(|| c.other_name().and_then(|n| self.get(n)))
    }

    /// igb and ixgbe: reads of the interrupt cause register that found
    /// ICR.RXO (receive overrun: a frame found no free descriptor) set, the
    /// only trace QEMU's igb leaves of a frame dropped on a full ring
    /// (`icr_rxo_events`). `None` on virtio-net, which has no such bit:
    /// never a made-up 0.
    pub fn rx_overrun_reads(&self) -> Option<u64> {
        self.get(ICR_RXO_EVENTS)
    }

    /// Every counter in the layout `ethtool -S <if>` prints: a
    /// `NIC statistics:` header, then one `     name: value` line each.
    pub fn ethtool_text(&self) -> String {
        let mut s = String::from("NIC statistics:\n");
        for (name, v) in self.iter() {
            s += &format!("     {name}: {v}\n");
        }
        s
    }

    /// `(name, total)` pairs: registers in `ethtool -S` order, then sums,
    /// then software counters.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        let regs = self
            .layout
            .counters
            .iter()
            .map(|c| c.name)
            .zip(self.totals.iter().copied());
        let sums = self
            .layout
            .sums
            .iter()
            .map(|s| (s.name, self.get(s.name).unwrap_or(0)));
        let extra = self
            .layout
            .extra
            .iter()
            .copied()
            .zip(self.extra.iter().copied());
        regs.chain(sums).chain(extra)
    }
}

#[cfg(test)]
mod counter_tests {
    use super::{Counter, Stats};

    /// virtio-net's driver counters: the four it keeps, and every other
    /// typed counter absent (`None`), not 0.
    #[test]
    fn virtio_has_four_typed_counters_and_the_rest_are_absent() {
        use Counter::*;
        let s = Stats::new(&crate::family::virtio::LAYOUT);
        for c in Counter::ALL {
            let kept = matches!(c, RxPackets | TxPackets | RxBytes | TxBytes);
            assert_eq!(s.counter(c), kept.then_some(0), "{c}");
        }
    }

    #[test]
    fn every_typed_counter_exists_on_both_families() {
        for layout in [
            &crate::family::igb::stats::LAYOUT,
            &crate::family::ixgbe::stats::LAYOUT,
        ] {
            let s = Stats::new(layout);
            for c in Counter::ALL {
                let found = s
                    .get(c.name())
                    .or_else(|| c.other_name().and_then(|n| s.get(n)));
                assert_eq!(
                    found,
                    Some(0),
                    "{c} on a layout of {} registers",
                    layout.counters.len()
                );
            }
        }
    }
}
