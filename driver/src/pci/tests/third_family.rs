//! The third family of `crate::test_family` through the PCI layer:
//! identified from its own table, listed with its name, its own link
//! register and decode used.

use crate::family;
use crate::test_family::{with_third, TEST_DEVICE_ID, TEST_LINK_REG};

use super::super::fake::{Dev, FakeSys};
use super::super::*;

#[test]
fn a_third_family_is_identified_from_its_own_table() {
    let all = with_third();
    let m = lookup_in(&all, INTEL_VENDOR_ID, TEST_DEVICE_ID).expect("found");
    assert_eq!(
        (m.family.name(), m.name, m.max_queues()),
        ("e1000e", "Test-only Third Family Connection", 2)
    );
    assert_eq!(m.family.kernel_driver(), "e1000e");
    // The default `drives` reads the same table.
    let f = all
        .iter()
        .find(|f| f.drives(INTEL_VENDOR_ID, TEST_DEVICE_ID))
        .expect("drives");
    assert_eq!(f.name(), "e1000e");
    // The real families are still found through the longer list.
    assert_eq!(
        lookup_in(&all, INTEL_VENDOR_ID, 0x10C9).map(|m| m.family.name()),
        Some("igb")
    );
    // Without it (the real registry), the ID is unknown.
    assert!(lookup(INTEL_VENDOR_ID, TEST_DEVICE_ID).is_none());
    assert!(family::lookup(INTEL_VENDOR_ID, TEST_DEVICE_ID).is_none());
}

#[test]
fn listing_names_a_third_family_and_uses_its_link_decode() {
    let f = FakeSys::new();
    let igb = f.add(Dev::nic("0000:02:00.0", 0x1521));
    f.set_reg(igb, 0x8, 0x0000_0083);
    let third = f.add(Dev {
        driver: Some(VFIO_PCI),
        group: Some(7),
        ..Dev::nic("0000:03:00.0", TEST_DEVICE_ID)
    });
    // Its link register says up at 2500; igb's STATUS offset holds a value
    // igb would decode as down, so only the third family's decode gives this.
    f.set_reg(third, TEST_LINK_REG as usize, 0b101);
    f.set_reg(third, 0x8, 0);

    let all = with_third();
    let rows = list_nics_in(&f.sysfs, &all).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].name(), "I350 Gigabit Network Connection");
    assert_eq!(link_state(&f.sysfs, &rows[0]).to_string(), "up 1000 Mb/s");
    assert_eq!(rows[1].family().map(|x| x.name()), Some("e1000e"));
    assert_eq!(rows[1].name(), "Test-only Third Family Connection");
    assert_eq!(link_state(&f.sysfs, &rows[1]).to_string(), "up 2500 Mb/s");
    f.set_reg(third, TEST_LINK_REG as usize, 0);
    assert_eq!(link_state(&f.sysfs, &rows[1]), LinkState::Down);

    // The real registry does not know it: listed as unsupported, no link read.
    let rows = list_nics(&f.sysfs).unwrap();
    assert_eq!(rows[1].name(), "8086:7e57 (not supported by pollnic)");
    assert_eq!(
        link_state(&f.sysfs, &rows[1]).to_string(),
        "unknown (not supported by pollnic)"
    );
}
