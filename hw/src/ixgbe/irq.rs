//! 82599 MSI-X interrupt registers: IVAR, EITR, and the GPIE bits of MSI-X
//! mode.
//!
//! Sources: 82599 datasheet §7.3 (interrupts), §8.2.3.5 (IVAR, EITR, GPIE);
//! Linux `drivers/net/ethernet/intel/ixgbe/ixgbe_main.c`
//! `ixgbe_configure_msix`, `ixgbe_set_ivar`, `ixgbe_write_eitr`;
//! `ixgbe_type.h` (`IXGBE_IVAR`, `IXGBE_EITR`, `IXGBE_GPIE_*`).

/// Interrupt Vector Allocation register `n` of 64 (`IXGBE_IVAR(n)`): two
/// queues each.
pub const fn ivar(n: u16) -> u32 {
    0x00900 + 4 * n as u32
}
/// Extended Interrupt Throttle of vector `n` (`IXGBE_EITR(n)`): 0..24 at
/// 0x00820, 24..128 at 0x12300.
pub const fn eitr(n: u16) -> u32 {
    if n <= 23 {
        0x00820 + 4 * n as u32
    } else {
        0x12300 + 4 * (n as u32 - 24)
    }
}
/// Extended Interrupt Auto Mask Enable (`IXGBE_EIAM`).
pub const EIAM: u32 = 0x00890;

/// GPIE: MSI-X mode (`IXGBE_GPIE_MSIX_MODE`).
pub const GPIE_MSIX_MODE: u32 = 1 << 4;
/// GPIE: other clear disable, EICR.OTHER not cleared on read (`IXGBE_GPIE_OCD`).
pub const GPIE_OCD: u32 = 1 << 5;
/// GPIE: extended interrupt auto-mask enable (`IXGBE_GPIE_EIAME`).
pub const GPIE_EIAME: u32 = 1 << 30;
/// GPIE: PBA support (`IXGBE_GPIE_PBA_SUPPORT`).
pub const GPIE_PBA_SUPPORT: u32 = 1 << 31;

/// IVAR entry: allocation valid (`IXGBE_IVAR_ALLOC_VAL`).
pub const IVAR_ALLOC_VAL: u8 = 0x80;

/// EITR: interval field, bits 11:3, in units of 2 µs (`IXGBE_MAX_EITR`
/// 0xFF8; Linux writes `usecs << 2`).
pub const EITR_INTERVAL_MASK: u32 = 0x0FF8;
/// EITR: counter write disable (`IXGBE_EITR_CNT_WDIS`, 82599).
pub const EITR_CNT_WDIS: u32 = 1 << 31;
/// Largest throttle interval EITR holds, in microseconds.
pub const EITR_MAX_USECS: u32 = EITR_INTERVAL_MASK >> 2;

/// The EITR value for a minimum interval of `usecs` µs between interrupts
/// (0: none), as Linux's `ethtool -C rx-usecs` on ixgbe (`usecs << 2`,
/// masked to the 2 µs grid of bits 11:3). Above [`EITR_MAX_USECS`] it clamps.
pub const fn eitr_value(usecs: u32) -> u32 {
    let u = if usecs > EITR_MAX_USECS {
        EITR_MAX_USECS
    } else {
        usecs
    };
    (u << 2) & EITR_INTERVAL_MASK | EITR_CNT_WDIS
}

/// The interval in µs an EITR value asks for (a multiple of 2).
pub const fn eitr_usecs(value: u32) -> u32 {
    (value & EITR_INTERVAL_MASK) >> 2
}

/// Where the IVAR entry of a queue cause lives on the 82599
/// (`ixgbe_set_ivar`, `case ixgbe_mac_82599EB`): IVAR `q >> 1`, bit
/// `16·(q & 1) + 8·tx`.
pub const fn ivar_entry(q: u16, tx: bool) -> (u32, u32) {
    let shift = 16 * (q & 1) as u32 + if tx { 8 } else { 0 };
    (ivar(q >> 1), shift)
}

/// The EICR/EIMS/EIMC bit of MSI-X vector `v` below 16 (the RTX queue bits).
pub const fn vector_bit(v: u16) -> u32 {
    1 << v
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn values_match_ixgbe_type_h() {
        assert_eq!(ivar(0), 0x00900);
        assert_eq!(ivar(63), 0x009FC);
        assert_eq!(eitr(0), 0x00820);
        assert_eq!(eitr(23), 0x0087C);
        assert_eq!(eitr(24), 0x12300);
        assert_eq!(EIAM, 0x00890);
        assert_eq!(GPIE_MSIX_MODE, 0x10);
        assert_eq!(GPIE_OCD, 0x20);
        assert_eq!(GPIE_EIAME, 0x4000_0000);
        assert_eq!(GPIE_PBA_SUPPORT, 0x8000_0000);
    }
    #[test]
    fn eitr_and_ivar() {
        assert_eq!(eitr_value(100), 400 | EITR_CNT_WDIS);
        assert_eq!(eitr_usecs(eitr_value(101)), 100);
        assert_eq!(eitr_usecs(eitr_value(5000)), EITR_MAX_USECS);
        assert_eq!(ivar_entry(0, false), (0x900, 0));
        assert_eq!(ivar_entry(1, false), (0x900, 16));
        assert_eq!(ivar_entry(5, true), (0x908, 24));
    }
}
