//! The no-IOMMU routes: `uio_pci_generic` and VFIO's no-IOMMU mode, their
//! refusals, and `unbind` of ports bound that way.

use super::super::fake::{Dev, FakeSys};
use super::super::*;
use super::{binder, state_file};

/// An 82576 on igb with interface eth0 (up), no IOMMU group.
fn igb_port_no_iommu(f: &FakeSys) -> PciAddress {
    f.add(Dev {
        driver: Some("igb"),
        ifname: Some("eth0"),
        ..Dev::nic("0000:00:08.0", 0x10C9)
    })
}

fn mode_of(f: &FakeSys, addr: PciAddress) -> Option<BindMode> {
    BindMode::of(&f.sysfs, &PciDevice::read(&f.sysfs, addr).unwrap())
}

#[test]
fn binds_to_uio_pci_generic_without_an_iommu_group_and_back() {
    let f = FakeSys::new();
    let addr = igb_port_no_iommu(&f);
    let r = binder(&f).bind_all_as(&[addr], BindMode::Uio).unwrap();
    let r = &r[0];
    assert_eq!(*f.modprobed.borrow(), ["uio_pci_generic"]);
    assert_eq!(
        f.writes(),
        [
            "bus/pci/devices/0000:00:08.0/driver/unbind=0000:00:08.0",
            "bus/pci/devices/0000:00:08.0/driver_override=uio_pci_generic",
            "bus/pci/drivers_probe=0000:00:08.0",
        ]
    );
    assert_eq!(f.driver_of(addr).as_deref(), Some(UIO_PCI_GENERIC));
    assert_eq!(state_file(&f, addr).as_deref(), Some("igb\n"));
    assert_eq!((r.mode, r.iommu_group), (BindMode::Uio, None));
    assert_eq!(r.node, f.options.dev_uio.join("uio0"));
    assert!(r.node.exists());
    assert_eq!(
        r.to_string(),
        format!(
            "0000:00:08.0: bound to uio_pci_generic (was igb), {}, no IOMMU: physical addresses \
             (open with --no-iommu)",
            r.node.display()
        )
    );
    assert_eq!(mode_of(&f, addr), Some(BindMode::Uio));
    assert_eq!(mode_of(&f, addr).unwrap().to_string(), "uio (no-iommu)");

    // Again: nothing to do.
    f.log.borrow_mut().clear();
    let again = binder(&f).bind_as(addr, BindMode::Uio).unwrap();
    assert!(again.already_bound && f.writes().is_empty());
    assert_eq!(again.previous_driver.as_deref(), Some("igb"));
    assert!(again
        .to_string()
        .contains("already bound to uio_pci_generic"));

    // unbind gives it back to igb, as from vfio-pci.
    let u = binder(&f).unbind_all(&[addr]).unwrap();
    assert!(u[0].changed);
    assert_eq!(u[0].driver.as_deref(), Some("igb"));
    assert_eq!(
        u[0].to_string(),
        "0000:00:08.0: released from uio_pci_generic, now on igb"
    );
    assert_eq!(f.override_of(addr), "(null)");
    assert_eq!(state_file(&f, addr), None);
    assert!(!f.options.dev_uio.join("uio0").exists());
    assert_eq!(mode_of(&f, addr), None);
}

#[test]
fn uio_is_refused_behind_a_translating_iommu_and_allowed_under_passthrough() {
    let f = FakeSys::new();
    let addr = f.add(Dev {
        driver: Some("igb"),
        group: Some(5),
        ..Dev::nic("0000:00:08.0", 0x10C9)
    });
    f.set_group_type(5, "DMA-FQ");
    let e = binder(&f).bind_all_as(&[addr], BindMode::Uio).unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(&e, Error::Refused { errors } if matches!(errors[0], Error::IommuPresent { .. })),
        "{msg}"
    );
    assert!(
        msg.contains(
            "0000:00:08.0: refusing to bind it to uio_pci_generic: it is in IOMMU group 5 \
             (type DMA-FQ)"
        ) && msg.contains("`sudo pollnic bind 0000:00:08.0`"),
        "{msg}"
    );
    assert!(f.writes().is_empty() && f.modprobed.borrow().is_empty());

    // iommu=pt: the group is `identity`, DMA is not translated.
    f.set_group_type(5, "identity");
    let r = binder(&f).bind_as(addr, BindMode::Uio).unwrap();
    assert_eq!((r.mode, r.iommu_group), (BindMode::Uio, None));
}

#[test]
fn no_iommu_mode_missing_from_the_kernel_is_a_typed_refusal() {
    let f = FakeSys::new();
    let addr = igb_port_no_iommu(&f);
    // vfio built without CONFIG_VFIO_NOIOMMU: no parameter after loading it.
    let e = binder(&f)
        .check_all(&[addr], BindMode::VfioNoIommu)
        .unwrap_err();
    let msg = e.to_string();
    let Error::Refused { errors } = &e else {
        panic!("{msg}")
    };
    assert!(
        matches!(errors[..], [Error::NoIommuModeUnavailable { .. }]),
        "{msg}"
    );
    assert!(
        msg.contains("built without CONFIG_VFIO_NOIOMMU")
            && msg.contains("enable_unsafe_noiommu_mode")
            && msg.contains("pollnic bind --driver uio_pci_generic"),
        "{msg}"
    );
    // Loading vfio-pci is the only thing it did.
    assert_eq!(*f.modprobed.borrow(), ["vfio-pci"]);
    assert!(f.writes().is_empty());
    assert_eq!(f.driver_of(addr).as_deref(), Some("igb"));
    assert!(binder(&f)
        .bind_all_as(&[addr], BindMode::VfioNoIommu)
        .is_err());
    assert_eq!(f.driver_of(addr).as_deref(), Some("igb"));
}

#[test]
fn no_iommu_mode_is_turned_on_and_the_noiommu_node_reported() {
    let f = FakeSys::new();
    f.vfio_noiommu_capable.set(true);
    let addr = igb_port_no_iommu(&f);
    binder(&f)
        .check_all(&[addr], BindMode::VfioNoIommu)
        .unwrap();
    // Checking changes nothing: the mode stays off until the bind.
    assert_eq!(f.noiommu_param().as_deref(), Some("N"));
    assert!(f.writes().is_empty());

    let r = binder(&f)
        .bind_all_as(&[addr], BindMode::VfioNoIommu)
        .unwrap();
    let r = &r[0];
    assert_eq!(
        f.writes(),
        [
            "module/vfio/parameters/enable_unsafe_noiommu_mode=1",
            "bus/pci/devices/0000:00:08.0/driver/unbind=0000:00:08.0",
            "bus/pci/devices/0000:00:08.0/driver_override=vfio-pci",
            "bus/pci/drivers_probe=0000:00:08.0",
        ]
    );
    assert_eq!((r.mode, r.iommu_group), (BindMode::VfioNoIommu, Some(0)));
    assert_eq!(r.node, f.options.dev_vfio.join("noiommu-0"));
    assert!(r
        .to_string()
        .starts_with("0000:00:08.0: bound to vfio-pci (was igb), VFIO no-IOMMU group 0 at "));
    assert!(r
        .to_string()
        .ends_with("no IOMMU: physical addresses (open with --no-iommu)"));
    assert_eq!(mode_of(&f, addr), Some(BindMode::VfioNoIommu));

    // Plain `bind` of it: its group is VFIO's made-up one, no IOMMU.
    let e = binder(&f).bind(addr).unwrap_err();
    assert!(matches!(e, Error::NoIommuGroup { .. }), "{e}");

    let u = binder(&f).unbind(addr).unwrap();
    assert_eq!(u.driver.as_deref(), Some("igb"));
    assert_eq!(f.noiommu_group(addr), None);
    assert!(!f.options.dev_vfio.join("noiommu-0").exists());
    // The mode is the vfio module's: it stays on.
    assert_eq!(f.noiommu_param().as_deref(), Some("1"));
}

#[test]
fn without_an_iommu_group_plain_bind_names_the_no_iommu_routes() {
    let f = FakeSys::new();
    let addr = igb_port_no_iommu(&f);
    let e = binder(&f).bind_all(&[addr]).unwrap_err();
    let msg = e.to_string();
    for want in [
        "no IOMMU group",
        "intel_iommu=on iommu=pt",
        "intel-iommu,intremap=on,caching-mode=on",
        "physical addresses",
        "reach all of RAM",
        "taints the kernel",
        "sudo pollnic bind --driver uio_pci_generic 0000:00:08.0",
        "sudo pollnic bind --no-iommu 0000:00:08.0",
        "--no-iommu",
        "`pollnic doctor`",
    ] {
        assert!(msg.contains(want), "{want:?} missing: {msg}");
    }
    assert!(f.writes().is_empty() && f.modprobed.borrow().is_empty());
}

#[test]
fn no_iommu_refused_for_a_port_behind_an_iommu_and_switching_drivers_refused() {
    let f = FakeSys::new();
    f.vfio_noiommu_capable.set(true);
    let addr = super::igb_port(&f);
    let e = binder(&f).bind_as(addr, BindMode::VfioNoIommu).unwrap_err();
    assert!(matches!(e, Error::IommuPresent { group: 5, .. }), "{e}");
    assert!(e
        .to_string()
        .contains("refusing to bind it to vfio-pci in VFIO no-IOMMU mode"));

    binder(&f).bind(addr).unwrap();
    f.log.borrow_mut().clear();
    let e = binder(&f).bind_all_as(&[addr], BindMode::Uio).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains(
            "0000:00:08.0: already bound to vfio-pci behind an IOMMU; give it back first \
             (`sudo pollnic unbind 0000:00:08.0`), then bind it again to uio_pci_generic"
        ),
        "{msg}"
    );
    assert!(f.writes().is_empty());
    assert_eq!(f.driver_of(addr).as_deref(), Some(VFIO_PCI));
}

#[test]
fn uio_bind_rolls_back_when_the_uio_node_never_appears() {
    let f = FakeSys::new();
    let addr = igb_port_no_iommu(&f);
    f.make_uio_nodes.set(false);
    let e = binder(&f).bind_as(addr, BindMode::Uio).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::StepFailed { .. }), "{msg}");
    assert!(
        msg.contains("uio/uio<N> did not appear within 50 ms"),
        "{msg}"
    );
    assert!(
        msg.contains(
            "unbound from uio_pci_generic, cleared driver_override, rebound to igb): \
             0000:00:08.0 is on igb as before"
        ),
        "{msg}"
    );
    assert_eq!(f.driver_of(addr).as_deref(), Some("igb"));
    assert_eq!(state_file(&f, addr), None);
}

#[test]
fn a_failed_unbind_puts_uio_ports_back_on_uio() {
    let f = FakeSys::new();
    let a = igb_port_no_iommu(&f);
    let b = f.add(Dev {
        driver: Some("igb"),
        ..Dev::nic("0000:00:1e.0", 0x10C9)
    });
    binder(&f).bind_all_as(&[a, b], BindMode::Uio).unwrap();
    *f.fail_entry.borrow_mut() = Some(("drivers/igb/bind=0000:00:1e.0".into(), libc::ENODEV));
    let e = binder(&f).unbind_all(&[a, b]).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains(
            "put back as before: 0000:00:08.0 on uio_pci_generic, 0000:00:1e.0 on uio_pci_generic"
        ),
        "{msg}"
    );
    for p in [a, b] {
        assert_eq!(f.driver_of(p).as_deref(), Some(UIO_PCI_GENERIC), "{p}");
        assert_eq!(state_file(&f, p).as_deref(), Some("igb\n"), "{p}");
    }
}
