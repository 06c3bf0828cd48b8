//! igb MSI-X interrupt registers: GPIE, IVAR, EITR and the extended
//! interrupt cause/mask registers' per-vector bits.
//!
//! Sources: 82576 datasheet §7.3 (interrupts), §8.8 (interrupt registers:
//! GPIE §8.8.x, IVAR0 §8.8.15, IVAR_MISC §8.8.16, EITR §8.8.12); Linux
//! `drivers/net/ethernet/intel/igb/igb_main.c` `igb_configure_msix`,
//! `igb_assign_vector`, `igb_write_ivar`, `igb_write_itr`; QEMU
//! `hw/net/igb_core.c` (`igb_rx_wb_eic`, `igb_raise_interrupts`,
//! `igb_intrmgr_rearm_timer`).

/// General Purpose Interrupt Enable (`E1000_GPIE`).
pub const GPIE: u32 = 0x1514;
/// Extended Interrupt Cause Set (`E1000_EICS`).
pub const EICS: u32 = 0x1520;
/// Extended Interrupt Auto Mask Enable (`E1000_EIAM`).
pub const EIAM: u32 = 0x1530;
/// Interrupt Vector Allocation, register 0 of 8 (`E1000_IVAR0`); register
/// `n` at `IVAR0 + 4·n`.
pub const IVAR0: u32 = 0x1700;
/// Number of IVAR registers.
pub const IVAR_COUNT: u16 = 8;
/// Interrupt Vector Allocation for the other causes (`E1000_IVAR_MISC`).
pub const IVAR_MISC: u32 = 0x1740;
/// Extended Interrupt Throttle of vector `n` (`E1000_EITR(n)`), `n` below the part's MSI-X
/// vector count (25 on the 82576, [`MSIX_VECTORS_QEMU`] in QEMU's igb).
pub const fn eitr(n: u16) -> u32 {
    0x1680 + 4 * n as u32
}

/// MSI-X vectors of QEMU's igb (`IGB_MSIX_VEC_NUM`); the 82576 has 25.
pub const MSIX_VECTORS_QEMU: u16 = 10;

/// GPIE: non-selective interrupt clear on read (`E1000_GPIE_NSICR`).
pub const GPIE_NSICR: u32 = 1 << 0;
/// GPIE: MSI-X mode, causes routed through IVAR to EICR bits (`E1000_GPIE_MSIX_MODE`).
pub const GPIE_MSIX_MODE: u32 = 1 << 4;
/// GPIE: extended interrupt auto-mask enable (`E1000_GPIE_EIAME`).
pub const GPIE_EIAME: u32 = 1 << 30;
/// GPIE: PBA support, MSI-X pending bits (`E1000_GPIE_PBA`).
pub const GPIE_PBA: u32 = 1 << 31;

/// IVAR entry: the vector number in it is valid (`E1000_IVAR_VALID`).
pub const IVAR_VALID: u8 = 0x80;

/// EITR: interval field, bits 14:2, in microseconds (`E1000_EITR` interval;
/// Linux `igb_write_itr` masks with 0x7FFC).
pub const EITR_INTERVAL_MASK: u32 = 0x7FFC;
/// EITR: counter ignore, write the interval without resetting the counter
/// (`E1000_EITR_CNT_IGNR`, 82576 and later).
pub const EITR_CNT_IGNR: u32 = 1 << 31;
/// Largest throttle interval EITR holds, in microseconds (13 bits).
pub const EITR_MAX_USECS: u32 = EITR_INTERVAL_MASK >> 2;

/// The EITR value for a minimum interval of `usecs` µs between interrupts
/// of one vector (0: no throttling), as Linux's `ethtool -C rx-usecs`
/// (`rx_itr_setting = usecs << 2`). `usecs` above [`EITR_MAX_USECS`] is
/// clamped. Without [`EITR_CNT_IGNR`] (Linux sets it): a write restarts the
/// vector's interval counter, which only delays the next interrupt once;
/// and QEMU's igb before the 2024 EITR fix reads the whole register as a
/// count of 256 ns, where bit 31 would ask for a 9-minute interval, while
/// `usecs << 2` alone is read as `usecs` × 1.024 µs there.
pub const fn eitr_value(usecs: u32) -> u32 {
    let u = if usecs > EITR_MAX_USECS {
        EITR_MAX_USECS
    } else {
        usecs
    };
    (u << 2) & EITR_INTERVAL_MASK
}

/// The interval in µs an EITR value asks for.
pub const fn eitr_usecs(value: u32) -> u32 {
    (value & EITR_INTERVAL_MASK) >> 2
}

/// Where the IVAR entry of a queue cause lives: `(register offset, bit shift)`.
/// The 82576 layout (`igb_assign_vector`, `case e1000_82576`): IVAR
/// `q & 7`, RX at bit 0 for queues 0..8 and bit 16 for 8..16, TX 8 above RX.
pub const fn ivar_entry_82576(q: u16, tx: bool) -> (u32, u32) {
    let shift = ((q & 0x8) as u32) << 1 | if tx { 8 } else { 0 };
    (IVAR0 + 4 * (q & 0x7) as u32, shift)
}

/// The I350 (and 82580) layout (`igb_assign_vector`, `case e1000_i350`):
/// IVAR `q >> 1`, RX at bit 0 for even queues and 16 for odd, TX 8 above RX.
pub const fn ivar_entry_i350(q: u16, tx: bool) -> (u32, u32) {
    let shift = ((q & 0x1) as u32) << 4 | if tx { 8 } else { 0 };
    (IVAR0 + 4 * (q >> 1) as u32, shift)
}

/// The EICR/EIMS/EIMC/EIAC bit of MSI-X vector `v` in MSI-X mode.
pub const fn vector_bit(v: u16) -> u32 {
    1 << v
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn values_match_linux_e1000_defines() {
        assert_eq!(GPIE, 0x01514);
        assert_eq!(EIAM, 0x01530);
        assert_eq!(IVAR0, 0x01700);
        assert_eq!(IVAR_MISC, 0x01740);
        assert_eq!(eitr(0), 0x01680);
        assert_eq!(eitr(9), 0x016a4);
        assert_eq!(GPIE_MSIX_MODE, 0x10);
        assert_eq!(GPIE_EIAME, 0x4000_0000);
        assert_eq!(GPIE_PBA, 0x8000_0000);
        assert_eq!(EITR_CNT_IGNR, 0x8000_0000);
    }
    #[test]
    fn eitr_is_usecs_shifted_by_two() {
        assert_eq!(eitr_value(0), 0);
        assert_eq!(eitr_value(100), 400);
        assert_eq!(eitr_usecs(eitr_value(100)), 100);
        assert_eq!(eitr_usecs(eitr_value(1_000_000)), EITR_MAX_USECS);
        assert_eq!(EITR_MAX_USECS, 8191);
    }
    #[test]
    fn ivar_layouts() {
        // 82576: queue 3 RX in IVAR3 bits 7:0, queue 11 RX in IVAR3 bits 23:16.
        assert_eq!(ivar_entry_82576(3, false), (IVAR0 + 12, 0));
        assert_eq!(ivar_entry_82576(3, true), (IVAR0 + 12, 8));
        assert_eq!(ivar_entry_82576(11, false), (IVAR0 + 12, 16));
        assert_eq!(ivar_entry_82576(15, true), (IVAR0 + 28, 24));
        // I350: queue 3 RX in IVAR1 bits 23:16.
        assert_eq!(ivar_entry_i350(3, false), (IVAR0 + 4, 16));
        assert_eq!(ivar_entry_i350(2, true), (IVAR0 + 4, 8));
    }
}
