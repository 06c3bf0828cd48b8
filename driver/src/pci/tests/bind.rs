//! `bind`: the write sequence, idempotence, refusals and rollback.

use super::super::fake::{Dev, FakeSys};
use super::super::*;
use super::{binder, igb_port, state_file};

#[test]
fn binds_from_kernel_driver_the_standard_way() {
    let f = FakeSys::new();
    let addr = igb_port(&f);
    let r = binder(&f).bind(addr).unwrap();

    assert_eq!(*f.modprobed.borrow(), ["vfio-pci"]);
    assert_eq!(
        f.writes(),
        [
            "bus/pci/devices/0000:00:08.0/driver/unbind=0000:00:08.0",
            "bus/pci/devices/0000:00:08.0/driver_override=vfio-pci",
            "bus/pci/drivers_probe=0000:00:08.0",
        ]
    );
    assert_eq!(f.driver_of(addr).as_deref(), Some(VFIO_PCI));
    assert_eq!(state_file(&f, addr).as_deref(), Some("igb\n"));
    assert!(f.options.dev_vfio.join("5").exists());
    assert!(!r.already_bound);
    assert_eq!(r.previous_driver.as_deref(), Some("igb"));
    assert_eq!(r.node, f.options.dev_vfio.join("5"));
    assert_eq!((r.mode, r.iommu_group), (BindMode::Vfio, Some(5)));
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(r.warnings[0].contains("eth0 was up"));
    let shown = r.to_string();
    assert!(
        shown.starts_with("0000:00:08.0: bound to vfio-pci (was igb), IOMMU group 5 at "),
        "{shown}"
    );
}

#[test]
fn bind_is_idempotent() {
    let f = FakeSys::new();
    let addr = igb_port(&f);
    binder(&f).bind(addr).unwrap();
    f.log.borrow_mut().clear();
    let r = binder(&f).bind(addr).unwrap();
    assert!(r.already_bound);
    assert_eq!(r.previous_driver.as_deref(), Some("igb"));
    assert!(f.writes().is_empty());
    assert!(r.to_string().contains("already bound to vfio-pci"));
    assert_eq!(state_file(&f, addr).as_deref(), Some("igb\n"));
}

#[test]
fn binds_an_unbound_device_without_a_record() {
    let f = FakeSys::new();
    f.add_driver(VFIO_PCI);
    let addr = f.add(Dev {
        group: Some(7),
        ..Dev::nic("0000:01:00.0", 0x10FB)
    });
    let r = binder(&f).bind(addr).unwrap();
    assert_eq!(f.writes().len(), 2, "no unbind step: {:?}", f.writes());
    assert!(f.modprobed.borrow().is_empty());
    assert_eq!(r.previous_driver, None);
    assert_eq!(state_file(&f, addr), None);
    assert!(r.to_string().contains("(was no driver)"));
}

#[test]
fn bind_refusals_touch_nothing() {
    let f = FakeSys::new();
    let no_group = f.add(Dev {
        driver: Some("igb"),
        ..Dev::nic("0000:00:08.0", 0x10C9)
    });
    let e = binder(&f).bind(no_group).unwrap_err();
    assert!(matches!(e, Error::NoIommuGroup { .. }), "{e}");
    assert!(e.to_string().contains("intel_iommu=on iommu=pt"));

    let i210 = f.add(Dev {
        driver: Some("igb"),
        group: Some(3),
        ..Dev::nic("0000:00:09.0", 0x1533)
    });
    assert!(matches!(
        binder(&f).bind(i210),
        Err(Error::Unsupported { .. })
    ));

    let e = binder(&f)
        .bind("0000:00:1f.0".parse().unwrap())
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "0000:00:1f.0: no such PCI device (run `pollnic status` to list the supported NICs)"
    );

    assert!(f.writes().is_empty());
    assert!(f.modprobed.borrow().is_empty());
}

#[test]
fn bind_stops_if_vfio_pci_cannot_be_loaded() {
    let f = FakeSys::new();
    let addr = igb_port(&f);
    f.modprobe_fails.set(true);
    let e = binder(&f).bind(addr).unwrap_err();
    assert!(matches!(e, Error::Modprobe { .. }), "{e}");
    assert!(e.to_string().contains("modprobe vfio-pci"), "{e}");
    assert!(f.writes().is_empty());
    assert_eq!(f.driver_of(addr).as_deref(), Some("igb"));
    assert_eq!(state_file(&f, addr), None);
}

/// Runs a bind that fails, and checks it was rolled back to igb.
fn assert_rolled_back(f: &FakeSys, addr: PciAddress) -> String {
    let e = binder(f).bind(addr).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::StepFailed { .. }), "{msg}");
    assert!(msg.contains("rolled back"), "{msg}");
    assert!(msg.contains("is on igb as before"), "{msg}");
    assert_eq!(f.driver_of(addr).as_deref(), Some("igb"));
    assert_eq!(f.override_of(addr), "(null)");
    assert_eq!(state_file(f, addr), None);
    msg
}

#[test]
fn bind_rolls_back_when_drivers_probe_fails() {
    let f = FakeSys::new();
    let addr = igb_port(&f);
    *f.fail.borrow_mut() = Some(("drivers_probe".into(), libc::EIO));
    let msg = assert_rolled_back(&f, addr);
    assert!(
        msg.contains("cleared driver_override, rebound to igb"),
        "{msg}"
    );
}

#[test]
fn bind_rolls_back_when_vfio_pci_refuses_the_device() {
    let f = FakeSys::new();
    let addr = igb_port(&f);
    f.vfio_probe_fails.set(true);
    let msg = assert_rolled_back(&f, addr);
    assert!(
        msg.contains("expected driver vfio-pci after binding, but it is none"),
        "{msg}"
    );
}

#[test]
fn bind_rolls_back_when_group_node_never_appears() {
    let f = FakeSys::new();
    let addr = igb_port(&f);
    f.make_vfio_nodes.set(false);
    let msg = assert_rolled_back(&f, addr);
    assert!(msg.contains("did not appear within 50 ms"), "{msg}");
    assert!(
        msg.contains("unbound from vfio-pci, cleared driver_override, rebound to igb"),
        "{msg}"
    );
}

#[test]
fn bind_without_root_says_so_and_changes_nothing() {
    let f = FakeSys::new();
    let addr = igb_port(&f);
    *f.fail.borrow_mut() = Some(("driver/unbind".into(), libc::EACCES));
    let e = binder(&f).bind(addr).unwrap_err();
    assert!(e.is_permission_denied());
    let msg = e.to_string();
    assert!(
        msg.contains("run as root") && msg.contains("nothing had been changed"),
        "{msg}"
    );
    assert_eq!(f.driver_of(addr).as_deref(), Some("igb"));
}

#[test]
fn bind_warns_about_busy_iommu_group_peers() {
    let f = FakeSys::new();
    let addr = igb_port(&f);
    f.add(Dev {
        driver: Some("igb"),
        group: Some(5),
        ..Dev::nic("0000:00:08.1", 0x10C9)
    });
    f.add(Dev {
        driver: Some("pcieport"),
        group: Some(5),
        class: 0x060400,
        ..Dev::nic("0000:00:07.0", 0x1234)
    });
    let r = binder(&f).bind(addr).unwrap();
    let peers: Vec<&String> = r
        .warnings
        .iter()
        .filter(|w| w.contains("IOMMU group 5"))
        .collect();
    assert_eq!(peers.len(), 1, "{:?}", r.warnings);
    assert!(
        peers[0].contains("0000:00:08.1 (driver igb)")
            && peers[0].contains("pollnic bind 0000:00:08.1")
    );
}
