//! `bind_all` / `unbind_all`: several ports, all or nothing.

use std::fs;

use super::super::fake::{Dev, FakeSys};
use super::super::*;
use super::{binder, igb_port, state_file};

/// A second 82576 on igb, alone in IOMMU group 6.
fn second_port(f: &FakeSys) -> PciAddress {
    f.add(Dev {
        driver: Some("igb"),
        group: Some(6),
        ..Dev::nic("0000:00:1e.0", 0x10C9)
    })
}

fn addr(s: &str) -> PciAddress {
    s.parse().unwrap()
}

/// Both ports on igb, as before the command, with nothing recorded.
fn assert_both_on_igb(f: &FakeSys, ports: &[PciAddress]) {
    for &p in ports {
        assert_eq!(f.driver_of(p).as_deref(), Some("igb"), "{p}");
        assert_eq!(f.override_of(p), "(null)", "{p}");
        assert_eq!(state_file(f, p), None, "{p}");
        assert!(!f.vfio_node(p).unwrap().exists(), "{p}");
    }
}

/// Both ports on vfio-pci, with igb recorded, as after `bind`.
fn assert_both_on_vfio(f: &FakeSys, ports: &[PciAddress]) {
    for &p in ports {
        assert_eq!(f.driver_of(p).as_deref(), Some(VFIO_PCI), "{p}");
        assert_eq!(f.override_of(p), VFIO_PCI, "{p}");
        assert_eq!(state_file(f, p).as_deref(), Some("igb\n"), "{p}");
        assert!(f.vfio_node(p).unwrap().exists(), "{p}");
    }
}

#[test]
fn bind_all_then_unbind_all_moves_every_port() {
    let f = FakeSys::new();
    let ports = [igb_port(&f), second_port(&f)];
    let reports = binder(&f).bind_all(&ports).unwrap();
    assert_eq!(reports.len(), 2);
    assert!(reports.iter().all(|r| !r.already_bound));
    assert_both_on_vfio(&f, &ports);

    let reports = binder(&f).unbind_all(&ports).unwrap();
    assert!(reports.iter().all(|r| r.changed));
    assert_both_on_igb(&f, &ports);
}

#[test]
fn bind_all_with_a_bad_second_address_changes_nothing() {
    let f = FakeSys::new();
    let first = igb_port(&f);
    let e = binder(&f)
        .bind_all(&[first, addr("0000:00:1f.0")])
        .unwrap_err();
    let msg = e.to_string();
    let Error::Refused { errors } = &e else {
        panic!("{msg}")
    };
    assert_eq!(errors.len(), 1, "{msg}");
    assert!(matches!(errors[0], Error::NoSuchDevice { .. }), "{msg}");
    assert_eq!(
        msg,
        "0000:00:1f.0: no such PCI device (run `pollnic status` to list the supported NICs); \
         nothing was changed"
    );
    assert_eq!(f.driver_of(first).as_deref(), Some("igb"));
    assert_eq!(state_file(&f, first), None);
    assert!(f.writes().is_empty(), "{:?}", f.writes());
    assert!(
        f.modprobed.borrow().is_empty(),
        "vfio-pci loaded for nothing"
    );
}

#[test]
fn bind_all_reports_every_bad_address_at_once() {
    let f = FakeSys::new();
    let first = igb_port(&f);
    let no_group = f.add(Dev {
        driver: Some("igb"),
        ..Dev::nic("0000:00:09.0", 0x10C9)
    });
    let i210 = f.add(Dev {
        driver: Some("igb"),
        group: Some(3),
        ..Dev::nic("0000:00:0a.0", 0x1533)
    });
    let e = binder(&f).bind_all(&[first, no_group, i210]).unwrap_err();
    let Error::Refused { errors } = &e else {
        panic!("{e}")
    };
    assert!(
        matches!(
            errors.as_slice(),
            [Error::NoIommuGroup { .. }, Error::Unsupported { .. }]
        ),
        "{e}"
    );
    assert!(e.to_string().contains("intel_iommu=on iommu=pt"), "{e}");
    assert_eq!(f.driver_of(first).as_deref(), Some("igb"));
    assert!(f.writes().is_empty());
}

#[test]
fn bind_all_stops_before_any_port_if_vfio_pci_cannot_be_loaded() {
    let f = FakeSys::new();
    let ports = [igb_port(&f), second_port(&f)];
    f.modprobe_fails.set(true);
    let e = binder(&f).bind_all(&ports).unwrap_err();
    assert!(
        matches!(&e, Error::Refused { errors } if matches!(errors[..], [Error::Modprobe { .. }])),
        "{e}"
    );
    assert!(e.to_string().contains("run `modprobe vfio-pci`"), "{e}");
    assert!(f.writes().is_empty());
    assert_both_on_igb(&f, &ports);
}

#[test]
fn bind_all_rolls_the_first_port_back_when_the_second_fails_part_way() {
    let f = FakeSys::new();
    let ports = [igb_port(&f), second_port(&f)];
    *f.fail_entry.borrow_mut() = Some(("drivers_probe=0000:00:1e.0".into(), libc::EIO));
    let e = binder(&f).bind_all(&ports).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::StepFailed { .. }), "{msg}");
    assert!(msg.contains("bus/pci/drivers_probe failed"), "{msg}");
    // The failing port, rolled back by `bind` itself.
    assert!(
        msg.contains("rolled back (cleared driver_override, rebound to igb): 0000:00:1e.0 is on igb as before"),
        "{msg}"
    );
    // The port bound before it, put back by `bind_all`.
    assert!(
        msg.contains(
            "the ports bound before it were put back: 0000:00:08.0 (unbound from vfio-pci, \
             cleared driver_override, rebound to igb) is on igb as before"
        ),
        "{msg}"
    );
    assert!(!msg.contains("incomplete"), "{msg}");
    assert_both_on_igb(&f, &ports);
}

#[test]
fn bind_all_says_what_to_run_when_the_rollback_fails_too() {
    let f = FakeSys::new();
    let ports = [igb_port(&f), second_port(&f)];
    *f.fail_entry.borrow_mut() = Some(("drivers_probe=0000:00:1e.0".into(), libc::EIO));
    // igb refuses the ports back, so neither rollback can finish.
    *f.fail.borrow_mut() = Some(("drivers/igb/bind".into(), libc::ENODEV));
    let e = binder(&f).bind_all(&ports).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("rollback incomplete: 0000:00:08.0 could not be put back"),
        "{msg}"
    );
    assert!(msg.contains("run `pollnic unbind 0000:00:08.0`"), "{msg}");
    assert!(msg.contains("run `pollnic unbind 0000:00:1e.0`"), "{msg}");
    // The record stays, so that `pollnic unbind` can still restore igb.
    assert_eq!(state_file(&f, ports[0]).as_deref(), Some("igb\n"));
}

#[test]
fn bind_all_leaves_ports_that_were_already_bound_alone_when_rolling_back() {
    let f = FakeSys::new();
    let ports = [igb_port(&f), second_port(&f)];
    binder(&f).bind(ports[0]).unwrap();
    *f.fail_entry.borrow_mut() = Some(("drivers_probe=0000:00:1e.0".into(), libc::EIO));
    let e = binder(&f).bind_all(&ports).unwrap_err();
    let msg = e.to_string();
    assert!(!msg.contains("put back"), "{msg}");
    assert_eq!(f.driver_of(ports[0]).as_deref(), Some(VFIO_PCI));
    assert_eq!(state_file(&f, ports[0]).as_deref(), Some("igb\n"));
    assert_eq!(f.driver_of(ports[1]).as_deref(), Some("igb"));
}

#[test]
fn unbind_all_with_a_bad_second_address_changes_nothing() {
    let f = FakeSys::new();
    let first = igb_port(&f);
    binder(&f).bind(first).unwrap();
    f.log.borrow_mut().clear();
    let i210 = f.add(Dev {
        driver: Some(VFIO_PCI),
        group: Some(3),
        ..Dev::nic("0000:00:0a.0", 0x1533)
    });
    let e = binder(&f)
        .unbind_all(&[first, addr("0000:00:1f.0"), i210])
        .unwrap_err();
    let msg = e.to_string();
    let Error::Refused { errors } = &e else {
        panic!("{msg}")
    };
    assert!(
        matches!(
            errors.as_slice(),
            [Error::NoSuchDevice { .. }, Error::Unsupported { .. }]
        ),
        "{msg}"
    );
    assert!(msg.ends_with("; nothing was changed"), "{msg}");
    assert!(f.writes().is_empty(), "{:?}", f.writes());
    assert_eq!(f.driver_of(first).as_deref(), Some(VFIO_PCI));
    assert_eq!(state_file(&f, first).as_deref(), Some("igb\n"));
}

#[test]
fn unbind_all_stops_before_any_port_if_a_recorded_driver_cannot_be_loaded() {
    let f = FakeSys::new();
    let ports = [igb_port(&f), second_port(&f)];
    binder(&f).bind_all(&ports).unwrap();
    f.log.borrow_mut().clear();
    fs::remove_dir_all(f.sysfs.driver_dir("igb")).unwrap(); // as after `rmmod igb`
    f.modprobe_fails.set(true);
    let e = binder(&f).unbind_all(&ports).unwrap_err();
    assert!(
        matches!(&e, Error::Refused { errors } if matches!(errors[..], [Error::Modprobe { .. }])),
        "{e}"
    );
    assert!(e.to_string().contains("run `modprobe igb` by hand"), "{e}");
    assert!(f.writes().is_empty(), "{:?}", f.writes());
    assert_both_on_vfio(&f, &ports);
}

#[test]
fn unbind_all_binds_the_ports_back_when_the_second_fails_part_way() {
    let f = FakeSys::new();
    let ports = [igb_port(&f), second_port(&f)];
    binder(&f).bind_all(&ports).unwrap();
    *f.fail_entry.borrow_mut() = Some(("drivers/igb/bind=0000:00:1e.0".into(), libc::ENODEV));
    let e = binder(&f).unbind_all(&ports).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::StepFailed { .. }), "{msg}");
    assert!(
        msg.contains("bus/pci/drivers/igb/bind failed: No such device"),
        "{msg}"
    );
    assert!(
        msg.contains("put back as before: 0000:00:08.0 on vfio-pci, 0000:00:1e.0 on vfio-pci"),
        "{msg}"
    );
    assert!(!msg.contains("incomplete"), "{msg}");
    // Not handed to the kernel's choice either: all or nothing.
    assert!(!msg.contains("pick a driver"), "{msg}");
    assert_both_on_vfio(&f, &ports);
}

#[test]
fn unbind_all_says_what_to_run_when_binding_back_fails() {
    let f = FakeSys::new();
    let ports = [igb_port(&f), second_port(&f)];
    binder(&f).bind_all(&ports).unwrap();
    *f.fail_entry.borrow_mut() = Some(("drivers/igb/bind=0000:00:1e.0".into(), libc::ENODEV));
    f.vfio_probe_fails.set(true);
    let e = binder(&f).unbind_all(&ports).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("rollback incomplete: 0000:00:08.0 could not be bound back to vfio-pci"),
        "{msg}"
    );
    assert!(
        msg.contains("; 0000:00:1e.0 could not be bound back to vfio-pci"),
        "{msg}"
    );
    assert!(msg.contains("`pollnic unbind 0000:00:1e.0`"), "{msg}");
    assert!(msg.contains("`pollnic bind 0000:00:08.0`"), "{msg}");
}

#[test]
fn a_repeated_address_is_refused_up_front() {
    let f = FakeSys::new();
    let first = igb_port(&f);
    let again = addr("00:08.0");
    let expected = "0000:00:08.0 is named more than once; name each port once; nothing was changed";

    let e = binder(&f).bind_all(&[first, again]).unwrap_err();
    assert!(
        matches!(&e, Error::Refused { errors } if matches!(errors[..], [Error::DuplicateAddress { .. }])),
        "{e}"
    );
    assert_eq!(e.to_string(), expected);
    assert!(f.writes().is_empty());
    assert!(f.modprobed.borrow().is_empty());
    assert_eq!(f.driver_of(first).as_deref(), Some("igb"));

    binder(&f).bind(first).unwrap();
    f.log.borrow_mut().clear();
    let e = binder(&f).unbind_all(&[first, first, first]).unwrap_err();
    assert_eq!(e.to_string(), expected);
    assert!(f.writes().is_empty());
    assert_eq!(f.driver_of(first).as_deref(), Some(VFIO_PCI));
}
