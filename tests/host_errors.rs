//! Errors a user can hit without any NIC: they must be clear and never panic.

use pollnic::{Device, DeviceConfig, Error};

#[test]
fn nonexistent_pci_address_is_a_clear_error() {
    let e = Device::open("0000:7f:1f.7", &DeviceConfig::default())
        .err()
        .expect("must fail");
    let msg = e.to_string();
    assert!(
        msg.contains("no such PCI device") && msg.contains("pollnic status"),
        "{msg}"
    );
}

#[test]
fn malformed_pci_address_is_a_clear_error() {
    for bad in ["", "eth0", "00:08", "0000:00:08.9", "zz:00.0"] {
        let e = Device::open(bad, &DeviceConfig::default())
            .err()
            .expect("must fail");
        assert!(matches!(e, Error::Pci(_)), "{bad}: {e}");
    }
}

#[test]
fn invalid_ring_size_is_refused_before_touching_anything() {
    let c = DeviceConfig {
        tx_ring_size: 4100,
        ..Default::default()
    };
    let e = Device::open("0000:7f:1f.7", &c).err().expect("must fail");
    assert!(
        matches!(
            e,
            Error::InvalidRingSize {
                which: "tx",
                size: 4100
            }
        ),
        "{e}"
    );
}
