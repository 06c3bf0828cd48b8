//! igb counters: the 82576 table of `pollnic_hw::igb::stats`, plus ICR.RXO,
//! which on QEMU's igb is the only trace of a frame dropped at a full ring.

use crate::stats::{Stats, StatsLayout};
use crate::sys::mmio::Regs;
use pollnic_hw::igb::bits::ICR_RXO;
use pollnic_hw::igb::regs::ICR;
use pollnic_hw::igb::stats::{COUNTERS, SUMS};

/// Name under which [`Stats`] reports the overrun reads (not an `ethtool -S`
/// counter: the 82576 has no register counting ICR.RXO).
pub(crate) use crate::stats::ICR_RXO_EVENTS;

/// The igb layout: the 82576 registers, Linux igb's `rx_length_errors`
/// (RUC + ROC), then [`ICR_RXO_EVENTS`].
pub static LAYOUT: StatsLayout = StatsLayout {
    counters: COUNTERS,
    sums: SUMS,
    aliases: &[],
    extra: &[ICR_RXO_EVENTS],
};

/// Read every counter once into `s` (82576 datasheet §8.19: clear on read,
/// 64-bit pairs low then high), and count one overrun event when ICR.RXO
/// is set: a frame found no free RX descriptor since the last read. On
/// QEMU's igb this is the only trace of such a drop (it counts nothing in
/// MPC or RNBC). Cleared by writing the bit back (ICR is write-1-to-clear,
/// whether or not the read already cleared it).
pub fn update(r: &dyn Regs, s: &mut Stats) {
    s.read_registers(r);
    if r.read32(ICR) & ICR_RXO != 0 {
        s.bump_extra(ICR_RXO_EVENTS, 1);
        r.write32(ICR, ICR_RXO);
    }
}

/// Read every statistics register once to clear it.
pub fn clear(r: &dyn Regs) {
    Stats::new(&LAYOUT).read_registers(r);
}

#[cfg(test)]
mod tests {
    use super::*;
    use pollnic_hw::igb::stats::Width;
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
        let mut s = Stats::new(&LAYOUT);
        f.write32(0x4074, 10); // GPRC
        f.write32(0x4088, 0xffff_fff0); // GORCL
        f.write32(0x408c, 1); // GORCH
        update(&f, &mut s);
        assert_eq!(s.get("rx_packets"), Some(10));
        assert_eq!(s.get("rx_bytes"), Some(0x1_ffff_fff0));
        // Cleared by the read: a second read adds nothing...
        update(&f, &mut s);
        assert_eq!(s.get("rx_packets"), Some(10));
        // ...and new traffic adds on top.
        f.write32(0x4074, 5);
        f.write32(0x4088, 0x20);
        update(&f, &mut s);
        assert_eq!(s.get("rx_packets"), Some(15));
        assert_eq!(s.get("rx_bytes"), Some(0x2_0000_0010));
        assert_eq!(s.get("no_such_counter"), None);
        assert_eq!(s.iter().count(), COUNTERS.len() + SUMS.len() + 1);
        // rx_length_errors is RUC + ROC, as Linux igb sums it.
        f.write32(0x40a4, 2);
        f.write32(0x40ac, 3);
        update(&f, &mut s);
        assert_eq!(s.get("rx_short_length_errors"), Some(2));
        assert_eq!(s.get("rx_long_length_errors"), Some(3));
        assert_eq!(s.get("rx_length_errors"), Some(5));
        let text = s.ethtool_text();
        assert!(text.starts_with("NIC statistics:\n     "), "{text}");
        assert!(text.contains("\n     rx_packets: 15\n"), "{text}");
        // A receiver overrun is seen once and cleared.
        assert_eq!(s.get(ICR_RXO_EVENTS), Some(0));
        f.0.borrow_mut().insert(ICR, ICR_RXO); // the device sets the cause
        update(&f, &mut s);
        assert_eq!(s.rx_overrun_reads(), Some(1));
        update(&f, &mut s);
        assert_eq!(s.get(ICR_RXO_EVENTS), Some(1));
    }
}
