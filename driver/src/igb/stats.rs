//! Hardware counters read into 64-bit running totals under their `ethtool -S`
//! names (the registers are clear-on-read, so every read adds to the totals).

use crate::mmio::Regs;
use pollnic_hw::igb::bits::ICR_RXO;
use pollnic_hw::igb::regs::ICR;
use pollnic_hw::igb::stats::{Width, COUNTERS};

/// Running totals of every counter in [`COUNTERS`], since the device was
/// opened, and how many reads found the receiver-overrun cause set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stats {
    totals: Vec<u64>,
    rxo_events: u64,
}

/// Name under which [`Stats`] reports the overrun reads (not an `ethtool -S`
/// counter: the 82576 has no register counting ICR.RXO).
pub const ICR_RXO_EVENTS: &str = "icr_rxo_events";

impl Default for Stats {
    fn default() -> Self {
        Stats {
            totals: vec![0; COUNTERS.len()],
            rxo_events: 0,
        }
    }
}

impl Stats {
    /// Read every counter once and add it to the totals. 64-bit pairs are read
    /// low then high (reading high clears both; 82576 datasheet §8.19).
    pub fn update(&mut self, r: &impl Regs) {
        for (t, c) in self.totals.iter_mut().zip(COUNTERS) {
            let v = match c.width {
                Width::Bits32(o) => r.read32(o) as u64,
                Width::Bits64 { lo, hi } => {
                    let l = r.read32(lo) as u64;
                    l | (r.read32(hi) as u64) << 32
                }
            };
            *t = t.wrapping_add(v);
        }
        // ICR.RXO: a frame found no free RX descriptor since the last read.
        // On QEMU's igb this is the only trace of such a drop (it counts
        // nothing in MPC or RNBC). Cleared by writing the bit back (ICR is
        // write-1-to-clear, whether or not the read already cleared it).
        if r.read32(ICR) & ICR_RXO != 0 {
            self.rxo_events += 1;
            r.write32(ICR, ICR_RXO);
        }
    }

    /// Reads by [`Stats::update`] that found ICR.RXO set: a lower bound on
    /// the intervals in which the NIC overran its RX ring (0 = never seen).
    pub fn rx_overrun_reads(&self) -> u64 {
        self.rxo_events
    }

    /// Total of the counter named `name` (an `ethtool -S` name such as
    /// `rx_packets`); `None` for an unknown name.
    pub fn get(&self, name: &str) -> Option<u64> {
        if name == ICR_RXO_EVENTS {
            return Some(self.rxo_events);
        }
        pollnic_hw::igb::stats::index_of(name).map(|i| self.totals[i])
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

    /// `(name, total)` pairs in `ethtool -S` order, then [`ICR_RXO_EVENTS`].
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        COUNTERS
            .iter()
            .map(|c| c.name)
            .zip(self.totals.iter().copied())
            .chain(std::iter::once((ICR_RXO_EVENTS, self.rxo_events)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::HashMap;

    /// A register file with 82576 clear-on-read semantics: a 32-bit counter
    /// clears on read; a 64-bit pair clears both halves when the high half is read.
    struct CounterFile(RefCell<HashMap<u32, u32>>);
    impl Regs for CounterFile {
        fn read32(&self, off: u32) -> u32 {
            let mut m = self.0.borrow_mut();
            let v = m.get(&off).copied().unwrap_or(0);
            let pair_hi = COUNTERS
                .iter()
                .any(|c| matches!(c.width, Width::Bits64 { hi, .. } if hi == off));
            let pair_lo = COUNTERS
                .iter()
                .any(|c| matches!(c.width, Width::Bits64 { lo, .. } if lo == off));
            if pair_hi {
                m.insert(off, 0);
                m.insert(off - 4, 0);
            } else if !pair_lo {
                m.insert(off, 0);
            }
            v
        }
        fn write32(&self, off: u32, val: u32) {
            let mut m = self.0.borrow_mut();
            if off == ICR {
                // Write 1 to clear.
                let v = m.get(&off).copied().unwrap_or(0);
                m.insert(off, v & !val);
            } else {
                m.insert(off, val);
            }
        }
    }

    #[test]
    fn clear_on_read_and_64_bit_pairs_accumulate() {
        let f = CounterFile(RefCell::new(HashMap::new()));
        let mut s = Stats::default();
        f.write32(0x4074, 10); // GPRC
        f.write32(0x4088, 0xffff_fff0); // GORCL
        f.write32(0x408c, 1); // GORCH
        s.update(&f);
        assert_eq!(s.get("rx_packets"), Some(10));
        assert_eq!(s.get("rx_bytes"), Some(0x1_ffff_fff0));
        // Cleared by the read: a second read adds nothing...
        s.update(&f);
        assert_eq!(s.get("rx_packets"), Some(10));
        // ...and new traffic adds on top.
        f.write32(0x4074, 5);
        f.write32(0x4088, 0x20);
        s.update(&f);
        assert_eq!(s.get("rx_packets"), Some(15));
        assert_eq!(s.get("rx_bytes"), Some(0x2_0000_0010));
        assert_eq!(s.get("no_such_counter"), None);
        assert_eq!(s.iter().count(), COUNTERS.len() + 1);
        let text = s.ethtool_text();
        assert!(text.starts_with("NIC statistics:\n     "), "{text}");
        assert!(text.contains("\n     rx_packets: 15\n"), "{text}");
        // A receiver overrun is seen once and cleared.
        assert_eq!(s.get(ICR_RXO_EVENTS), Some(0));
        f.0.borrow_mut().insert(ICR, ICR_RXO); // the device sets the cause
        s.update(&f);
        assert_eq!(s.rx_overrun_reads(), 1);
        s.update(&f);
        assert_eq!(s.get(ICR_RXO_EVENTS), Some(1));
    }
}
