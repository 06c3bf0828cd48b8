//! Supported NICs by PCI vendor/device ID: Intel igb (82576, I350), Intel
//! ixgbe (82599, X520) and virtio-net (the modern 1af4:1041; the
//! transitional 1af4:1000 is named and refused).
//!
//! The tables belong to the families: each family lists its
//! device IDs ([`FamilyInfo::models`]) (`driver/src/family/igb/ids.rs`,
//! `family/ixgbe/ids.rs`, `family/virtio/ids.rs`), and the look-ups here walk
//! [`crate::family::FAMILIES`], so a new family's IDs need no edit here.

use crate::family::{FamilyInfo, FAMILIES};
pub use crate::family::{NicModel, INTEL_VENDOR_ID};

/// Every device ID pollnic drives, family by family.
pub fn supported_nics() -> impl Iterator<Item = &'static NicModel> {
    FAMILIES.iter().flat_map(|f| f.models().iter())
}

/// Looks up a supported device among `families` (each family's
/// [`FamilyInfo::vendor`]: Intel for igb/ixgbe, 0x1af4 for virtio-net);
/// `None` for unsupported IDs. [`lookup`] is this over the families pollnic drives; tests pass their own.
pub fn lookup_in(families: &[FamilyInfo], vendor: u16, device: u16) -> Option<&'static NicModel> {
    families
        .iter()
        .filter(|f| f.vendor() == vendor)
        .flat_map(|f| f.models().iter())
        .find(|m| m.device_id == device)
}

/// Looks up a supported device; `None` for non-Intel or unsupported IDs.
pub fn lookup(vendor: u16, device: u16) -> Option<&'static NicModel> {
    lookup_in(FAMILIES, vendor, device)
}

/// The family and `lspci` name of a supported NIC, or `None` when pollnic
/// does not drive `vendor:device`.
pub fn identify(vendor: u16, device: u16) -> Option<(FamilyInfo, &'static str)> {
    lookup(vendor, device).map(|m| (m.family, m.name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn family_of(id: u16) -> Option<&'static str> {
        identify(0x8086, id).map(|(f, _)| f.name())
    }

    #[test]
    fn identifies_the_named_parts() {
        let named = |id| identify(0x8086, id).map(|(f, n)| (f.name(), n));
        assert_eq!(
            named(0x10C9),
            Some(("igb", "82576 Gigabit Network Connection"))
        );
        assert_eq!(
            named(0x1521),
            Some(("igb", "I350 Gigabit Network Connection"))
        );
        assert_eq!(
            named(0x10FB),
            Some(("ixgbe", "82599ES 10-Gigabit SFI/SFP+ Network Connection"))
        );
        for id in [
            0x10E6, 0x10E7, 0x10E8, 0x1526, 0x150A, 0x1518, 0x150D, 0x1522, 0x1523, 0x1524,
        ] {
            assert_eq!(family_of(id), Some("igb"), "{id:#x}");
        }
        for id in [
            0x10F8, 0x10F9, 0x1507, 0x1514, 0x1517, 0x151C, 0x154D, 0x1557,
        ] {
            assert_eq!(family_of(id), Some("ixgbe"), "{id:#x}");
        }
    }

    #[test]
    fn rejects_others() {
        // I210, 82599 VF, I350 VF, X540, e1000 (QEMU's default NIC).
        for id in [0x1533, 0x10ED, 0x1520, 0x1528, 0x100E] {
            assert!(identify(0x8086, id).is_none(), "{id:#x}");
        }
        // Right device ID, wrong vendor.
        assert!(identify(0x10EC, 0x10FB).is_none());
    }

    #[test]
    fn table_has_no_duplicate_ids() {
        let all: Vec<_> = supported_nics().collect();
        let ids: HashSet<(u16, u16)> = all
            .iter()
            .map(|m| (m.family.vendor(), m.device_id))
            .collect();
        assert_eq!(ids.len(), all.len());
        assert_eq!(all.len(), 12 + 15 + 2);
    }

    #[test]
    fn every_model_points_back_at_the_family_that_lists_it() {
        for f in FAMILIES {
            for m in f.models() {
                assert_eq!(m.family.name(), f.name(), "{m:?}");
                assert!(f.drives(f.vendor(), m.device_id), "{m:?}");
            }
        }
    }

    #[test]
    fn family_names_the_kernel_driver() {
        assert_eq!(
            lookup(0x8086, 0x10C9).unwrap().family.kernel_driver(),
            "igb"
        );
        assert_eq!(
            lookup(0x8086, 0x10FB).unwrap().family.kernel_driver(),
            "ixgbe"
        );
        assert_eq!(
            lookup(0x1af4, 0x1041).unwrap().family.kernel_driver(),
            "virtio-pci"
        );
    }

    #[test]
    fn virtio_net_is_identified_and_the_transitional_device_refused() {
        let (f, name) = identify(0x1af4, 0x1041).expect("modern virtio-net");
        assert_eq!(
            (f.name(), name),
            ("virtio-net", "Virtio 1.0 network device")
        );
        assert!(f.missing(0x1041).is_none());
        let (f, _) = identify(0x1af4, 0x1000).expect("transitional virtio-net is named");
        let why = f.missing(0x1000).expect("and refused");
        assert!(why.contains("disable-legacy=on"), "{why}");
        // The Intel device ID space does not leak into virtio's, nor back.
        assert!(identify(0x8086, 0x1041).is_none());
        assert!(identify(0x1af4, 0x10C9).is_none());
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
