//! Hardware counters read into 64-bit running totals under their `ethtool -S`
//! names, for any family: each family gives a [`StatsLayout`] (its counter
//! table from `pollnic_hw`, sums of register arrays, alternative names, and
//! software-only counters) and the same clear-on-read accumulation runs over it.
//!
//! How often the registers must be read so that none fills up (the horizon
//! at line rate on the 82576 and the 82599), and the thread that guarantees
//! it, are in [`crate::refresh`]. A 32-bit register that reads 0xFFFF_FFFF
//! went unread past its horizon (QEMU's igb sticks there,
//! `e1000x_inc_reg_if_not_full` in `hw/net/e1000x_common.h`): its total is
//! then a lower bound, and [`Stats::saturated`] names it.

use crate::sys::mmio::Regs;
use pollnic_hw::igb::stats::{Counter, Width};
use pollnic_hw::ixgbe::stats::Sum;

/// The counter pollnic keeps itself on igb: reads of the counters that
/// found ICR.RXO set (an RX ring overrun, the only trace QEMU's igb leaves
/// of such drops).
pub(crate) const ICR_RXO_EVENTS: &str = "icr_rxo_events";

/// What a family's counters are.
#[derive(Debug)]
pub struct StatsLayout {
    /// The registers, in `ethtool -S` order.
    pub counters: &'static [Counter],
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
pub fn read_counter(r: &dyn Regs, c: &Counter) -> u64 {
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
    pub fn new(layout: &'static StatsLayout) -> Self {
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
    pub fn read_registers(&mut self, r: &dyn Regs) {
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
    /// [`crate::refresh`]). Their totals are lower bounds: counts were lost.
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
    pub fn bump_extra(&mut self, name: &str, n: u64) {
        let i = self
            .layout
            .extra
            .iter()
            .position(|e| *e == name)
            .unwrap_or_else(|| panic!("no software counter {name} in this layout"));
        self.extra[i] += n;
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

    /// igb: reads that found ICR.RXO set (see `pollnic::igb::stats`); 0 on
    /// families without that counter.
    pub fn rx_overrun_reads(&self) -> u64 {
        self.get(ICR_RXO_EVENTS).unwrap_or(0)
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
