//! The PCI device IDs the igb family drives: the `E1000_DEV_ID_*` constants
//! of the Linux igb driver (`drivers/net/ethernet/intel/igb/e1000_hw.h`) for
//! the 82576 and I350 MACs (physical functions only: no VF IDs). Names are
//! those of the PCI ID database (`pci.ids`), i.e. what `lspci` prints.

use super::Igb;
use crate::family::NicModel;

/// An 82576: 16 RX/TX queue pairs (82576 datasheet §7.1.1).
const fn m82576(device_id: u16, variant: &'static str, name: &'static str) -> NicModel {
    NicModel {
        device_id,
        family: crate::family::FamilyInfo(&Igb),
        name,
        variant,
        queues: 16,
    }
}

/// An I350: 8 RX/TX queue pairs (I350 datasheet §7.1.1).
const fn i350(device_id: u16, variant: &'static str, name: &'static str) -> NicModel {
    NicModel {
        device_id,
        family: crate::family::FamilyInfo(&Igb),
        name,
        variant,
        queues: 8,
    }
}

/// Every device ID the igb back end drives.
pub static MODELS: &[NicModel] = &[
    // 82576 (e1000_hw.h E1000_DEV_ID_82576*).
    m82576(0x10C9, "82576", "82576 Gigabit Network Connection"),
    m82576(0x10E6, "82576_FIBER", "82576 Gigabit Network Connection"),
    m82576(0x10E7, "82576_SERDES", "82576 Gigabit Network Connection"),
    m82576(
        0x10E8,
        "82576_QUAD_COPPER",
        "82576 Gigabit Network Connection",
    ),
    m82576(
        0x1526,
        "82576_QUAD_COPPER_ET2",
        "82576 Gigabit Network Connection",
    ),
    m82576(0x150A, "82576_NS", "82576NS Gigabit Network Connection"),
    m82576(
        0x1518,
        "82576_NS_SERDES",
        "82576NS SerDes Gigabit Network Connection",
    ),
    m82576(
        0x150D,
        "82576_SERDES_QUAD",
        "82576 Gigabit Backplane Connection",
    ),
    // I350 (e1000_hw.h E1000_DEV_ID_I350_*).
    i350(0x1521, "I350_COPPER", "I350 Gigabit Network Connection"),
    i350(
        0x1522,
        "I350_FIBER",
        "I350 Gigabit Fiber Network Connection",
    ),
    i350(0x1523, "I350_SERDES", "I350 Gigabit Backplane Connection"),
    i350(0x1524, "I350_SGMII", "I350 Gigabit Connection"),
];
