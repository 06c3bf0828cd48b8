//! The third family of `crate::test_family` through the PCI layer:
//! identified from its own table, listed by `status` with its name, its own
//! link register and decode used.

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
fn status_lists_a_third_family_and_uses_its_link_decode() {
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

    let rows = status_in(&f.sysfs, &with_third()).unwrap();
    assert_eq!(rows[1].device.family().map(|x| x.name()), Some("e1000e"));
    let text = format_status(&rows);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[1].contains("I350 Gigabit Network Connection"),
        "{text}"
    );
    assert!(lines[1].contains("up 1000 Mb/s"), "{text}");
    let cols: Vec<&str> = lines[2]
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        cols,
        [
            "0000:03:00.0",
            "Test-only Third Family Connection",
            "vfio-pci",
            "7",
            "up 2500 Mb/s",
            "-"
        ],
        "{text}"
    );
    f.set_reg(third, TEST_LINK_REG as usize, 0);
    let rows = status_in(&f.sysfs, &with_third()).unwrap();
    assert_eq!(rows[1].link, LinkState::Down);

    // The real registry does not know it: listed as unsupported, no link read.
    let text = format_status(&status(&f.sysfs).unwrap());
    let last = text.lines().nth(2).unwrap();
    assert!(
        last.contains("8086:7e57 (not supported by pollnic)")
            && last.contains("unknown (not supported by pollnic)"),
        "{text}"
    );
}
