//! Supported Intel NICs by PCI vendor/device ID.
//!
//! IDs are the `E1000_DEV_ID_*` constants of the Linux igb driver
//! (`drivers/net/ethernet/intel/igb/e1000_hw.h`) and the `IXGBE_DEV_ID_*`
//! constants of the ixgbe driver (`drivers/net/ethernet/intel/ixgbe/ixgbe_type.h`),
//! restricted to the 82576, I350 and 82599 MACs (physical functions only: no
//! VF IDs). Names are those of the PCI ID database (`pci.ids`), i.e. what
//! `lspci` prints.

use std::fmt;

/// PCI vendor ID of Intel Corporation.
pub const INTEL_VENDOR_ID: u16 = 0x8086;

/// Which pollnic hardware back end drives a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NicFamily {
    /// 1 GbE: 82576 and I350 (the Linux `igb` driver's devices).
    Igb,
    /// 10 GbE: 82599 / X520 (the Linux `ixgbe` driver's devices).
    Ixgbe,
}

impl NicFamily {
    /// Name of the Linux kernel driver for this family (`igb` or `ixgbe`).
    pub fn kernel_driver(self) -> &'static str {
        match self {
            NicFamily::Igb => "igb",
            NicFamily::Ixgbe => "ixgbe",
        }
    }
}

impl fmt::Display for NicFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kernel_driver())
    }
}

/// One supported PCI device ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NicModel {
    /// PCI device ID (vendor is always [`INTEL_VENDOR_ID`]).
    pub device_id: u16,
    /// Back end that drives it.
    pub family: NicFamily,
    /// Marketing name as in `pci.ids` / `lspci`.
    pub name: &'static str,
    /// Suffix of the kernel's `*_DEV_ID_*` constant, e.g. `82599_SFP`.
    pub variant: &'static str,
}

impl NicModel {
    /// RX/TX queue pairs the part has: 82576 16 (datasheet §7.1.1), I350 8
    /// (I350 datasheet §7.1.1), 82599 128.
    pub fn max_queues(&self) -> u16 {
        match self.family {
            NicFamily::Igb if self.variant.starts_with("I350") => 8,
            NicFamily::Igb => 16,
            NicFamily::Ixgbe => 128,
        }
    }
}

const fn igb(device_id: u16, variant: &'static str, name: &'static str) -> NicModel {
    NicModel {
        device_id,
        family: NicFamily::Igb,
        name,
        variant,
    }
}

const fn ixgbe(device_id: u16, variant: &'static str, name: &'static str) -> NicModel {
    NicModel {
        device_id,
        family: NicFamily::Ixgbe,
        name,
        variant,
    }
}

/// Every device ID pollnic drives.
pub const SUPPORTED_NICS: &[NicModel] = &[
    // igb: 82576 (e1000_hw.h E1000_DEV_ID_82576*).
    igb(0x10C9, "82576", "82576 Gigabit Network Connection"),
    igb(0x10E6, "82576_FIBER", "82576 Gigabit Network Connection"),
    igb(0x10E7, "82576_SERDES", "82576 Gigabit Network Connection"),
    igb(
        0x10E8,
        "82576_QUAD_COPPER",
        "82576 Gigabit Network Connection",
    ),
    igb(
        0x1526,
        "82576_QUAD_COPPER_ET2",
        "82576 Gigabit Network Connection",
    ),
    igb(0x150A, "82576_NS", "82576NS Gigabit Network Connection"),
    igb(
        0x1518,
        "82576_NS_SERDES",
        "82576NS SerDes Gigabit Network Connection",
    ),
    igb(
        0x150D,
        "82576_SERDES_QUAD",
        "82576 Gigabit Backplane Connection",
    ),
    // igb: I350 (e1000_hw.h E1000_DEV_ID_I350_*).
    igb(0x1521, "I350_COPPER", "I350 Gigabit Network Connection"),
    igb(
        0x1522,
        "I350_FIBER",
        "I350 Gigabit Fiber Network Connection",
    ),
    igb(0x1523, "I350_SERDES", "I350 Gigabit Backplane Connection"),
    igb(0x1524, "I350_SGMII", "I350 Gigabit Connection"),
    // ixgbe: 82599 / X520 (ixgbe_type.h IXGBE_DEV_ID_82599*).
    ixgbe(
        0x10FB,
        "82599_SFP",
        "82599ES 10-Gigabit SFI/SFP+ Network Connection",
    ),
    ixgbe(
        0x10F7,
        "82599_KX4",
        "10 Gigabit BR KX4 Dual Port Network Connection",
    ),
    ixgbe(
        0x10F8,
        "82599_COMBO_BACKPLANE",
        "82599 10 Gigabit Dual Port Backplane Connection",
    ),
    ixgbe(
        0x10F9,
        "82599_CX4",
        "82599 10 Gigabit Dual Port Network Connection",
    ),
    ixgbe(
        0x10FC,
        "82599_XAUI_LOM",
        "82599 10 Gigabit Dual Port Network Connection",
    ),
    ixgbe(0x1507, "82599_SFP_EM", "Ethernet Express Module X520-P2"),
    ixgbe(
        0x1514,
        "82599_KX4_MEZZ",
        "Ethernet X520 10GbE Dual Port KX4 Mezz",
    ),
    ixgbe(0x1517, "82599_KR", "82599ES 10 Gigabit Network Connection"),
    ixgbe(
        0x151C,
        "82599_T3_LOM",
        "82599 10 Gigabit TN Network Connection",
    ),
    ixgbe(
        0x1529,
        "82599_SFP_FCOE",
        "82599 10 Gigabit Dual Port Network Connection with FCoE",
    ),
    ixgbe(
        0x152A,
        "82599_BACKPLANE_FCOE",
        "82599 10 Gigabit Dual Port Backplane Connection with FCoE",
    ),
    ixgbe(0x154A, "82599_SFP_SF_QP", "Ethernet Server Adapter X520-4"),
    ixgbe(0x154D, "82599_SFP_SF2", "Ethernet 10G 2P X520 Adapter"),
    ixgbe(0x1557, "82599EN_SFP", "82599 10 Gigabit Network Connection"),
    ixgbe(
        0x1558,
        "82599_QSFP_SF_QP",
        "Ethernet Converged Network Adapter X520-Q1",
    ),
];

/// Looks up a supported device; `None` for non-Intel or unsupported IDs.
pub fn lookup(vendor: u16, device: u16) -> Option<&'static NicModel> {
    if vendor != INTEL_VENDOR_ID {
        return None;
    }
    SUPPORTED_NICS.iter().find(|m| m.device_id == device)
}

/// The family and `lspci` name of a supported NIC, or `None` when pollnic
/// does not drive `vendor:device`.
pub fn identify(vendor: u16, device: u16) -> Option<(NicFamily, &'static str)> {
    lookup(vendor, device).map(|m| (m.family, m.name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn identifies_the_named_parts() {
        assert_eq!(
            identify(0x8086, 0x10C9),
            Some((NicFamily::Igb, "82576 Gigabit Network Connection"))
        );
        assert_eq!(
            identify(0x8086, 0x1521),
            Some((NicFamily::Igb, "I350 Gigabit Network Connection"))
        );
        assert_eq!(
            identify(0x8086, 0x10FB),
            Some((
                NicFamily::Ixgbe,
                "82599ES 10-Gigabit SFI/SFP+ Network Connection"
            ))
        );
        for id in [
            0x10E6, 0x10E7, 0x10E8, 0x1526, 0x150A, 0x1518, 0x150D, 0x1522, 0x1523, 0x1524,
        ] {
            assert_eq!(
                identify(0x8086, id).map(|x| x.0),
                Some(NicFamily::Igb),
                "{id:#x}"
            );
        }
        for id in [
            0x10F8, 0x10F9, 0x1507, 0x1514, 0x1517, 0x151C, 0x154D, 0x1557,
        ] {
            assert_eq!(
                identify(0x8086, id).map(|x| x.0),
                Some(NicFamily::Ixgbe),
                "{id:#x}"
            );
        }
    }

    #[test]
    fn rejects_others() {
        // I210, 82599 VF, I350 VF, X540, e1000 (QEMU's default NIC).
        for id in [0x1533, 0x10ED, 0x1520, 0x1528, 0x100E] {
            assert_eq!(identify(0x8086, id), None, "{id:#x}");
        }
        // Right device ID, wrong vendor.
        assert_eq!(identify(0x10EC, 0x10FB), None);
    }

    #[test]
    fn table_has_no_duplicate_ids() {
        let ids: HashSet<u16> = SUPPORTED_NICS.iter().map(|m| m.device_id).collect();
        assert_eq!(ids.len(), SUPPORTED_NICS.len());
    }

    #[test]
    fn family_names_the_kernel_driver() {
        assert_eq!(NicFamily::Igb.to_string(), "igb");
        assert_eq!(NicFamily::Ixgbe.kernel_driver(), "ixgbe");
    }
}

#[cfg(test)]
mod queue_limits {
    use super::*;
    #[test]
    fn max_queues_per_part() {
        assert_eq!(lookup(INTEL_VENDOR_ID, 0x10c9).unwrap().max_queues(), 16);
        assert_eq!(lookup(INTEL_VENDOR_ID, 0x1521).unwrap().max_queues(), 8);
        assert_eq!(lookup(INTEL_VENDOR_ID, 0x10fb).unwrap().max_queues(), 128);
    }
}
