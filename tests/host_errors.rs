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
    let c = DeviceConfig::default().with_tx_ring_size(4100);
    let e = Device::open("0000:7f:1f.7", &c).err().expect("must fail");
    assert!(
        matches!(
            e,
            Error::Config(pollnic::ConfigError::InvalidRingSize {
                which: "tx",
                size: 4100
            })
        ),
        "{e}"
    );
}

/// The `fwd` example refuses bad arguments with a clear message before it
/// touches any NIC.
#[test]
fn fwd_refuses_bad_arguments_clearly() {
    let exe = pollnic_tests::example_exe("fwd");
    for (args, want) in [
        ("--ports 0000:00:08.0,00:08.0", "names 0000:00:08.0 twice"),
        (
            "--ports 0000:00:08.0,00:0a.0,00:0c.0",
            "one PCI address or two",
        ),
        ("--ports eth0", "invalid PCI address \"eth0\""),
        ("--ports 0000:7f:1f.7", "no such PCI device"),
        ("--ports 00:08.0 --cores 0,x", "bad core `x`"),
        (
            "--ports 00:08.0 --cores 100000",
            "core 100000 is not available",
        ),
        (
            "--ports 00:08.0 --batch 0",
            "for '--batch <BATCH>': 0 is not in 1..=512",
        ),
        ("--ports 00:08.0 --batch 513", "513 is not in 1..=512"),
        (
            "--ports 00:08.0 --ring-size 100",
            "power of two between 32 and 4096",
        ),
        ("--ports 00:08.0 --queues 17", "17 is not in 1..=16"),
        (
            "--ports 00:08.0 --mode swap",
            "possible values: io, macswap",
        ),
    ] {
        let out = std::process::Command::new(&exe)
            .args(args.split(' '))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args}: succeeded");
        assert!(err.contains(want), "{args}: {err}");
        assert!(!err.contains("panicked"), "{args}: {err}");
    }
}
