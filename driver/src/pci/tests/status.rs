//! Device attributes, NIC listing and link state (the `pollnic status`
//! table over them is the CLI's, tested there).

use std::fs;

use super::super::fake::{Dev, FakeSys};
use super::super::*;
use super::igb_port;

#[test]
fn reads_device_attributes() {
    let f = FakeSys::new();
    let addr = igb_port(&f);
    fs::write(f.sysfs.device_dir(addr).join("numa_node"), "1\n").unwrap();
    let d = PciDevice::read(&f.sysfs, addr).unwrap();
    assert_eq!((d.vendor, d.device, d.class), (0x8086, 0x10C9, 0x020000));
    assert_eq!(d.family().map(|f| f.name()), Some("igb"));
    assert_eq!(d.name(), "82576 Gigabit Network Connection");
    assert_eq!(d.driver.as_deref(), Some("igb"));
    assert_eq!(d.driver_override, None);
    assert_eq!(d.iommu_group, Some(5));
    assert_eq!(d.interfaces, vec!["eth0".to_owned()]);
    assert_eq!(d.numa_node, Some(1));

    let bare = f.add(Dev::nic("0000:00:09.0", 0x1521));
    let d = PciDevice::read(&f.sysfs, bare).unwrap();
    assert_eq!((d.driver, d.iommu_group, d.numa_node), (None, None, None));
    assert!(d.interfaces.is_empty());

    let missing: PciAddress = "0000:00:1f.0".parse().unwrap();
    assert!(matches!(
        PciDevice::read(&f.sysfs, missing),
        Err(Error::NoSuchDevice { .. })
    ));
}

#[test]
fn lists_intel_ethernet_functions_only() {
    let f = FakeSys::new();
    f.add(Dev {
        class: 0x060000,
        ..Dev::nic("0000:00:00.0", 0x1237)
    }); // host bridge
    f.add(Dev {
        vendor: 0x10ec,
        ..Dev::nic("0000:00:03.0", 0x8139)
    }); // Realtek NIC
    f.add(Dev {
        driver: Some("igb"),
        ..Dev::nic("0000:00:05.0", 0x1533)
    }); // I210: unsupported
    f.add(Dev::nic("0000:00:04.1", 0x10FB));
    f.add(Dev::nic("0000:00:04.0", 0x10FB));
    fs::write(f.sysfs.devices_dir().join("not-an-address"), "").unwrap();

    let nics = list_nics(&f.sysfs).unwrap();
    let addrs: Vec<String> = nics.iter().map(|d| d.addr.to_string()).collect();
    assert_eq!(addrs, ["0000:00:04.0", "0000:00:04.1", "0000:00:05.0"]);
    assert!(!nics[2].is_supported());
    assert_eq!(nics[2].name(), "8086:1533 (not supported by pollnic)");
}

#[test]
fn empty_or_missing_tree() {
    let f = FakeSys::new();
    assert!(list_nics(&f.sysfs).unwrap().is_empty());
    let none = Sysfs::new(f.options.state_dir.join("nowhere"));
    let msg = list_nics(&none).unwrap_err().to_string();
    assert!(msg.contains("is sysfs mounted"), "{msg}");
}

#[test]
fn link_from_kernel_interface() {
    let f = FakeSys::new();
    let addr = igb_port(&f);
    let dev = PciDevice::read(&f.sysfs, addr).unwrap();
    assert_eq!(link_state(&f.sysfs, &dev), LinkState::Down);
    f.set_net("eth0", "carrier", "1\n");
    f.set_net("eth0", "speed", "1000\n");
    assert_eq!(
        link_state(&f.sysfs, &dev),
        LinkState::Up {
            speed_mbps: Some(1000)
        }
    );
}

#[test]
fn link_from_registers_when_on_vfio_or_unbound() {
    let f = FakeSys::new();
    let ix = f.add(Dev {
        driver: Some(VFIO_PCI),
        group: Some(12),
        ..Dev::nic("0000:01:00.0", 0x10FB)
    });
    f.set_reg(ix, 0x42A4, 0x7000_0000);
    let igb = f.add(Dev::nic("0000:02:00.0", 0x1521));
    f.set_reg(igb, 0x8, 0x0000_0083);
    let off = f.add(Dev {
        command: 0x0400,
        ..Dev::nic("0000:03:00.0", 0x1521)
    });
    let asleep = f.add(Dev::nic("0000:04:00.0", 0x1521));
    f.set_reg(asleep, 0x8, u32::MAX);

    let link = |a| link_state(&f.sysfs, &PciDevice::read(&f.sysfs, a).unwrap()).to_string();
    assert_eq!(link(ix), "up 10000 Mb/s");
    assert_eq!(link(igb), "up 1000 Mb/s");
    assert_eq!(link(off), "unknown (memory decode off)");
    assert!(link(asleep).contains("all-ones"), "{}", link(asleep));
    f.set_reg(igb, 0x8, 0x0000_0080);
    assert_eq!(link(igb), "down");
}

#[test]
fn link_not_read_from_a_sleeping_device() {
    let f = FakeSys::new();
    let addr = f.add(Dev {
        driver: Some(VFIO_PCI),
        group: Some(12),
        ..Dev::nic("0000:01:00.0", 0x10FB)
    });
    f.set_reg(addr, 0x42A4, 0x7000_0000);
    // Root's view of config space: PM capability at 0x40 with PMCSR = D3hot.
    let mut cfg = fs::read(f.sysfs.device_dir(addr).join("config")).unwrap();
    cfg.resize(256, 0);
    cfg[0x06] = 0x10; // status: capability list
    cfg[0x34] = 0x40;
    cfg[0x40] = 0x01; // PM
    cfg[0x44] = 0x03; // D3hot
    fs::write(f.sysfs.device_dir(addr).join("config"), &cfg).unwrap();
    let dev = PciDevice::read(&f.sysfs, addr).unwrap();
    assert_eq!(
        link_state(&f.sysfs, &dev).to_string(),
        "unknown (device asleep in D3hot; vfio-pci powers idle devices down)"
    );
}

#[test]
fn a_virtio_net_interface_under_its_virtio_child_is_the_ports() {
    let f = FakeSys::new();
    let addr = f.add(Dev {
        vendor: 0x1af4,
        ..Dev::nic("0000:00:10.0", 0x1041)
    });
    fs::create_dir_all(f.sysfs.device_dir(addr).join("virtio3/net/enp0s16")).unwrap();
    let d = PciDevice::read(&f.sysfs, addr).unwrap();
    assert_eq!(d.family().map(|f| f.name()), Some("virtio-net"));
    assert_eq!(d.interfaces, vec!["enp0s16".to_owned()]);
    assert!(list_nics(&f.sysfs).unwrap().iter().any(|n| n.addr == addr));
}
