//! Intel igb family (82576, I350): register map, bit fields, PHY access and counters.
//!
//! Sources: 82576 datasheet chapter 8 (programming interface) for offsets and
//! bits, cross-checked against Linux `drivers/net/ethernet/intel/igb/e1000_regs.h`
//! and `e1000_defines.h` and QEMU `hw/net/igb_regs.h`.

pub mod bits;
pub mod irq;
pub mod phy;
pub mod regs;
pub mod stats;

/// PCI vendor ID of Intel.
pub const VENDOR_INTEL: u16 = 0x8086;
/// PCI device ID of the 82576 copper part, the one QEMU's `-device igb` emulates.
pub const DEV_ID_82576: u16 = 0x10c9;
/// PCI device IDs of the I350's physical functions (Linux `e1000_hw.h`
/// `E1000_DEV_ID_I350_*`): copper, fiber, backplane (SerDes), SGMII.
pub const DEV_IDS_I350: [u16; 4] = [0x1521, 0x1522, 0x1523, 0x1524];
/// Whether PCI device `device` is an I350 (which has RXPBS's 82580
/// encoding, Energy Efficient Ethernet and DMA coalescing; the 82576 has
/// neither).
pub const fn is_i350(device: u16) -> bool {
    matches!(device, 0x1521..=0x1524)
}
/// Number of RX and TX queues of the 82576 (82576 datasheet §7.1.1). The I350 has 8.
pub const MAX_QUEUES_82576: u16 = 16;
/// Smallest ring size pollnic accepts, in descriptors.
pub const MIN_RING_SIZE: u16 = 32;
/// Largest ring size, in descriptors (RDLEN/TDLEN hold at most 4096 × 16 bytes
/// usable on 82576; Linux `IGB_MAX_RXD`/`IGB_MAX_TXD`).
pub const MAX_RING_SIZE: u16 = 4096;
/// Ring sizes must be a multiple of this many descriptors: RDLEN/TDLEN must be
/// 128-byte aligned (82576 datasheet, RDLEN/TDLEN register descriptions).
pub const RING_SIZE_ALIGN: u16 = 8;

/// Whether `n` descriptors is a ring size the 82576 accepts
/// (multiple of [`RING_SIZE_ALIGN`] within [`MIN_RING_SIZE`]..=[`MAX_RING_SIZE`]).
pub const fn valid_ring_size(n: u32) -> bool {
    n >= MIN_RING_SIZE as u32 && n <= MAX_RING_SIZE as u32 && n % RING_SIZE_ALIGN as u32 == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn ring_sizes() {
        assert!(valid_ring_size(32));
        assert!(valid_ring_size(512));
        assert!(valid_ring_size(4096));
        assert!(!valid_ring_size(24));
        assert!(!valid_ring_size(100));
        assert!(!valid_ring_size(4104));
        assert!(!valid_ring_size(0));
    }
}
