//! `unbind`: restoring the recorded driver, kernel choice, repair, fallback.

use std::fs;

use super::super::fake::{Dev, FakeSys};
use super::super::*;
use super::{binder, igb_port, state_file};

#[test]
fn unbind_returns_to_the_recorded_driver() {
    let f = FakeSys::new();
    let addr = igb_port(&f);
    binder(&f).bind(addr).unwrap();
    f.log.borrow_mut().clear();

    let r = binder(&f).unbind(addr).unwrap();
    assert_eq!(
        f.writes(),
        [
            "bus/pci/devices/0000:00:08.0/driver/unbind=0000:00:08.0",
            "bus/pci/devices/0000:00:08.0/driver_override=\n",
            "bus/pci/drivers/igb/bind=0000:00:08.0",
        ]
    );
    assert_eq!(f.driver_of(addr).as_deref(), Some("igb"));
    assert_eq!(f.override_of(addr), "(null)");
    assert_eq!(state_file(&f, addr), None);
    assert!(!f.options.dev_vfio.join("5").exists());
    assert_eq!(r.driver.as_deref(), Some("igb"));
    assert_eq!(
        r.to_string(),
        "0000:00:08.0: released from vfio-pci, now on igb"
    );
}

#[test]
fn unbind_without_record_lets_the_kernel_pick() {
    let f = FakeSys::new();
    f.add_driver(VFIO_PCI);
    let addr = f.add(Dev {
        driver: Some(VFIO_PCI),
        group: Some(12),
        ..Dev::nic("0000:01:00.0", 0x10FB)
    });
    fs::write(
        f.sysfs.device_dir(addr).join("driver_override"),
        "vfio-pci\n",
    )
    .unwrap();
    let r = binder(&f).unbind(addr).unwrap();
    assert_eq!(
        f.writes().last().unwrap(),
        "bus/pci/drivers_probe=0000:01:00.0"
    );
    assert_eq!(r.driver.as_deref(), Some("ixgbe"));
    assert!(r
        .to_string()
        .ends_with("now on ixgbe (no record of a previous driver: the kernel picked)"));
}

#[test]
fn unbind_loads_the_recorded_driver_if_needed() {
    let f = FakeSys::new();
    fs::remove_dir_all(f.sysfs.driver_dir("igb")).unwrap();
    let addr = igb_port(&f);
    f.set_driver(addr, None); // as after `rmmod igb`
    binder(&f).bind(addr).unwrap();
    assert_eq!(state_file(&f, addr), None, "was unbound: nothing to record");
    StateDir::new(&f.options.state_dir)
        .record(addr, "igb")
        .unwrap();
    let r = binder(&f).unbind(addr).unwrap();
    assert_eq!(*f.modprobed.borrow(), ["vfio-pci", "igb"]);
    assert_eq!(r.driver.as_deref(), Some("igb"));
}

#[test]
fn unbind_of_a_kernel_bound_device_is_a_no_op() {
    let f = FakeSys::new();
    let addr = igb_port(&f);
    let r = binder(&f).unbind(addr).unwrap();
    assert!(!r.changed);
    assert!(f.writes().is_empty());
    assert_eq!(
        r.to_string(),
        "0000:00:08.0: not bound to vfio-pci or uio_pci_generic (driver: igb); nothing to do"
    );
}

#[test]
fn unbind_repairs_a_half_done_bind() {
    let f = FakeSys::new();
    let addr = igb_port(&f);
    f.set_driver(addr, None);
    fs::write(
        f.sysfs.device_dir(addr).join("driver_override"),
        "vfio-pci\n",
    )
    .unwrap();
    StateDir::new(&f.options.state_dir)
        .record(addr, "igb")
        .unwrap();
    let r = binder(&f).unbind(addr).unwrap();
    assert!(r.changed);
    assert_eq!(f.driver_of(addr).as_deref(), Some("igb"));
    assert_eq!(f.override_of(addr), "(null)");
    assert_eq!(r.to_string(), "0000:00:08.0: restored, now on igb");
}

#[test]
fn unbind_falls_back_to_kernel_choice_if_rebind_fails() {
    let f = FakeSys::new();
    let addr = igb_port(&f);
    binder(&f).bind(addr).unwrap();
    *f.fail.borrow_mut() = Some(("drivers/igb/bind".into(), libc::ENODEV));
    let e = binder(&f).unbind(addr).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("asked the kernel to pick a driver instead: 0000:00:08.0 is now on igb"),
        "{msg}"
    );
    assert_eq!(f.driver_of(addr).as_deref(), Some("igb"));
    assert_eq!(state_file(&f, addr), None);
}

#[test]
fn bind_then_unbind_round_trips_an_ixgbe_port() {
    let f = FakeSys::new();
    let addr = f.add(Dev {
        driver: Some("ixgbe"),
        group: Some(12),
        ifname: Some("enp1s0f0"),
        ..Dev::nic("0000:01:00.0", 0x10FB)
    });
    f.set_net("enp1s0f0", "flags", "0x1002\n"); // down: no warning
    let r = binder(&f).bind(addr).unwrap();
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    let d = PciDevice::read(&f.sysfs, addr).unwrap();
    assert_eq!(
        (d.driver.as_deref(), d.driver_override.as_deref()),
        (Some(VFIO_PCI), Some(VFIO_PCI))
    );
    binder(&f).unbind(addr).unwrap();
    let d = PciDevice::read(&f.sysfs, addr).unwrap();
    assert_eq!(
        (d.driver.as_deref(), d.driver_override),
        (Some("ixgbe"), None)
    );
}
