//! The PCI device IDs the ixgbe family lists: the `IXGBE_DEV_ID_*` constants
//! of the Linux ixgbe driver (`drivers/net/ethernet/intel/ixgbe/ixgbe_type.h`)
//! for the 82599 MAC (physical functions only: no VF IDs). Names are those of
//! the PCI ID database (`pci.ids`), i.e. what `lspci` prints.

use super::IXGBE;
use crate::family::NicModel;

/// An 82599: 128 RX/TX queue pairs.
const fn m82599(device_id: u16, variant: &'static str, name: &'static str) -> NicModel {
    NicModel {
        device_id,
        family: crate::family::FamilyInfo(&IXGBE),
        name,
        variant,
        queues: 128,
    }
}

/// Every device ID `pollnic status`/`bind` list as ixgbe.
pub static MODELS: &[NicModel] = &[
    // 82599 / X520 (ixgbe_type.h IXGBE_DEV_ID_82599*).
    m82599(
        0x10FB,
        "82599_SFP",
        "82599ES 10-Gigabit SFI/SFP+ Network Connection",
    ),
    m82599(
        0x10F7,
        "82599_KX4",
        "10 Gigabit BR KX4 Dual Port Network Connection",
    ),
    m82599(
        0x10F8,
        "82599_COMBO_BACKPLANE",
        "82599 10 Gigabit Dual Port Backplane Connection",
    ),
    m82599(
        0x10F9,
        "82599_CX4",
        "82599 10 Gigabit Dual Port Network Connection",
    ),
    m82599(
        0x10FC,
        "82599_XAUI_LOM",
        "82599 10 Gigabit Dual Port Network Connection",
    ),
    m82599(0x1507, "82599_SFP_EM", "Ethernet Express Module X520-P2"),
    m82599(
        0x1514,
        "82599_KX4_MEZZ",
        "Ethernet X520 10GbE Dual Port KX4 Mezz",
    ),
    m82599(0x1517, "82599_KR", "82599ES 10 Gigabit Network Connection"),
    m82599(
        0x151C,
        "82599_T3_LOM",
        "82599 10 Gigabit TN Network Connection",
    ),
    m82599(
        0x1529,
        "82599_SFP_FCOE",
        "82599 10 Gigabit Dual Port Network Connection with FCoE",
    ),
    m82599(
        0x152A,
        "82599_BACKPLANE_FCOE",
        "82599 10 Gigabit Dual Port Backplane Connection with FCoE",
    ),
    m82599(0x154A, "82599_SFP_SF_QP", "Ethernet Server Adapter X520-4"),
    m82599(0x154D, "82599_SFP_SF2", "Ethernet 10G 2P X520 Adapter"),
    m82599(0x1557, "82599EN_SFP", "82599 10 Gigabit Network Connection"),
    m82599(
        0x1558,
        "82599_QSFP_SF_QP",
        "Ethernet Converged Network Adapter X520-Q1",
    ),
];
