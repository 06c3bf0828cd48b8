//! A virtio-net function's features read from sysfs (`virtio<N>/features`,
//! as `features_show` in the kernel's `drivers/virtio/virtio.c` writes
//! them), and the bind refusal they lead to, on each route as
//! `Device::open` would refuse it.

use std::fs;
use std::os::unix::fs::symlink;

use super::super::fake::{Dev, FakeSys};
use super::super::*;
use super::binder;

/// `features_show`'s text: `len` characters, '1' at each of `bits`, then
/// a newline.
fn features_text(bits: &[u32], len: usize) -> String {
    let mut s: Vec<u8> = vec![b'0'; len];
    for &b in bits {
        s[b as usize] = b'1';
    }
    String::from_utf8(s).unwrap() + "\n"
}

/// What Linux's virtio_net negotiates with QEMU's `virtio-net-pci,
/// disable-legacy=on` (no `iommu_platform`): offloads, MRG_RXBUF, MAC,
/// STATUS, CTRL_VQ, CTRL_RX, MQ, EVENT_IDX, VERSION_1; no ACCESS_PLATFORM,
/// MTU, RSS or HASH_REPORT.
const CLOUD_BITS: &[u32] = &[
    0, 1, 2, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 21, 22, 23, 28, 29, 32,
];

/// A modern virtio-net function on virtio-pci, its `virtio0` child bound
/// to virtio_net (interface eth0) with `features`; IOMMU group `group`.
fn virtio_port(f: &FakeSys, group: Option<u32>, features: &str) -> PciAddress {
    let addr = f.add(Dev {
        vendor: 0x1af4,
        driver: Some("virtio-pci"),
        group,
        ..Dev::nic("0000:00:03.0", 0x1041)
    });
    let child = f.sysfs.device_dir(addr).join("virtio0");
    fs::create_dir_all(child.join("net/eth0")).unwrap();
    symlink(
        "../../../../bus/virtio/drivers/virtio_net",
        child.join("driver"),
    )
    .unwrap();
    fs::write(child.join("features"), features).unwrap();
    addr
}

#[test]
fn parses_the_kernels_bit_string() {
    let f: VirtioFeatures = features_text(CLOUD_BITS, 64).parse().unwrap();
    assert!(f.version_1() && !f.access_platform());
    assert!(f.has(VirtioFeature::NetMq) && f.has(VirtioFeature::EventIdx));
    assert!(!f.has(VirtioFeature::NetRss) && !f.has(VirtioFeature::NetMtu));
    assert_eq!(f.0 & (1 << 32 | 1 << 33), 1 << 32);
    // Character i is bit i: bit 0 first, not last.
    let b0: VirtioFeatures = ("1".to_owned() + &"0".repeat(63)).parse().unwrap();
    assert_eq!(b0, VirtioFeatures(1));
    // Newer kernels write 128 (VIRTIO_FEATURES_MAX); bits 64 and up are dropped.
    let wide: VirtioFeatures = features_text(&[32, 33, 60, 64, 127], 128).parse().unwrap();
    assert_eq!(wide.0, 1 << 32 | 1 << 33 | 1 << 60);
    assert!(wide.access_platform() && wide.has(VirtioFeature::NetRss));
    // The bits are the ones the virtio-net family negotiates with.
    assert_eq!(VirtioFeature::AccessPlatform.bit(), 33);
    assert_eq!(VirtioFeature::Version1.bit(), 32);
    assert_eq!(VirtioFeature::NetRss.bit(), 60);
    assert_eq!(VirtioFeature::NetHashReport.bit(), 57);
    assert_eq!(
        VirtioFeature::AccessPlatform.to_string(),
        "VIRTIO_F_ACCESS_PLATFORM (bit 33)"
    );
}

#[test]
fn a_short_or_garbled_file_is_a_typed_error_never_a_panic() {
    use ParseVirtioFeaturesError as E;
    let parse = |s: &str| s.parse::<VirtioFeatures>();
    assert_eq!(parse(""), Err(E::Length { chars: 0 }));
    assert_eq!(parse("\n"), Err(E::Length { chars: 0 }));
    assert_eq!(parse(&"1".repeat(63)), Err(E::Length { chars: 63 }));
    assert_eq!(parse(&"0".repeat(65)), Err(E::Length { chars: 65 }));
    assert_eq!(parse(&"0".repeat(1024)), Err(E::Length { chars: 1024 }));
    let mut bad = "0".repeat(64);
    bad.replace_range(33..34, "x");
    assert_eq!(parse(&bad), Err(E::Character { at: 33, found: 'x' }));
    // A second newline, spaces, multi-byte characters: refused, counted in characters.
    assert!(parse(&("0".repeat(64) + "\n\n")).is_err());
    assert!(parse(&(" ".to_owned() + &"0".repeat(63))).is_err());
    assert_eq!(
        parse(&("é".to_owned() + &"0".repeat(63))),
        Err(E::Character { at: 0, found: 'é' })
    );
    // Through sysfs: the file's path is named, and bytes that are not UTF-8 too.
    let f = FakeSys::new();
    let addr = virtio_port(&f, None, "0101\n");
    let err = virtio_features(&f.sysfs, addr).unwrap_err();
    assert!(
        matches!(
            &err,
            Error::VirtioFeaturesUnreadable {
                problem: E::Length { chars: 4 },
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("virtio0/features"), "{err}");
    let path = f.sysfs.device_dir(addr).join("virtio0/features");
    let mut raw = vec![b'0'; 64];
    raw[5] = 0xff;
    fs::write(&path, raw).unwrap();
    assert!(matches!(
        virtio_features(&f.sysfs, addr),
        Err(Error::VirtioFeaturesUnreadable {
            problem: E::Character {
                at: 5,
                found: '\u{fffd}'
            },
            ..
        })
    ));
}

#[test]
fn features_are_read_only_while_virtio_pci_and_a_virtio_driver_hold_the_port() {
    let f = FakeSys::new();
    let addr = virtio_port(&f, None, &features_text(CLOUD_BITS, 64));
    let read = || virtio_features(&f.sysfs, addr).unwrap();
    let got = read().expect("readable on virtio-pci");
    assert!(got.version_1() && !got.access_platform());

    // No virtio driver has probed virtio0 yet: the kernel shows zeros, unknown.
    let child = f.sysfs.device_dir(addr).join("virtio0");
    fs::remove_file(child.join("driver")).unwrap();
    assert_eq!(read(), None);
    symlink(
        "../../../../bus/virtio/drivers/virtio_net",
        child.join("driver"),
    )
    .unwrap();
    assert!(read().is_some());

    // No virtio<N> child (virtio1x, virtiofoo are not one): unknown.
    fs::rename(&child, f.sysfs.device_dir(addr).join("virtiofoo")).unwrap();
    assert_eq!(read(), None);
    fs::rename(f.sysfs.device_dir(addr).join("virtiofoo"), &child).unwrap();

    // On vfio-pci (or uio_pci_generic, or none) sysfs cannot tell: unknown,
    // even with a stale virtio0 left in the tree.
    f.set_driver(addr, Some(VFIO_PCI));
    assert_eq!(read(), None);
    f.set_driver(addr, Some(UIO_PCI_GENERIC));
    assert_eq!(read(), None);
    f.set_driver(addr, None);
    assert_eq!(read(), None);

    // An Intel port has no virtio child: unknown. A missing port: an error.
    let igb = f.add(Dev {
        driver: Some("igb"),
        ..Dev::nic("0000:00:08.0", 0x10C9)
    });
    assert_eq!(virtio_features(&f.sysfs, igb).unwrap(), None);
    let none: PciAddress = "0000:00:09.0".parse().unwrap();
    assert!(matches!(
        virtio_features(&f.sysfs, none),
        Err(Error::NoSuchDevice { .. })
    ));
}

#[test]
fn missing_for_is_what_device_open_requires_on_each_route() {
    let cloud: VirtioFeatures = features_text(CLOUD_BITS, 64).parse().unwrap();
    assert_eq!(
        cloud.missing_for(BindMode::Vfio),
        [VirtioFeature::AccessPlatform]
    );
    // Physical addresses: what a device without ACCESS_PLATFORM takes.
    assert!(cloud.missing_for(BindMode::VfioNoIommu).is_empty());
    assert!(cloud.missing_for(BindMode::Uio).is_empty());
    let legacy = VirtioFeatures(cloud.0 & !(1 << 32));
    assert_eq!(
        legacy.missing_for(BindMode::Vfio),
        [VirtioFeature::Version1, VirtioFeature::AccessPlatform]
    );
    assert_eq!(legacy.missing_for(BindMode::Uio), [VirtioFeature::Version1]);
    assert_eq!(
        legacy.missing_for(BindMode::VfioNoIommu),
        [VirtioFeature::Version1]
    );
    let viommu = VirtioFeatures(cloud.0 | 1 << 33);
    assert!(viommu.missing_for(BindMode::Vfio).is_empty());
    assert_eq!(
        cloud.absent_optional(),
        [
            VirtioFeature::NetMtu,
            VirtioFeature::RingPacked,
            VirtioFeature::InOrder,
            VirtioFeature::NetHashReport,
            VirtioFeature::NetRss
        ]
    );
}

#[test]
fn bind_behind_an_iommu_refuses_a_device_without_access_platform() {
    let f = FakeSys::new();
    let addr = virtio_port(&f, Some(4), &features_text(CLOUD_BITS, 64));
    let err = binder(&f).bind_all_as(&[addr], BindMode::Vfio).unwrap_err();
    let Error::Refused { errors } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(errors.len(), 1, "{errors:?}");
    let Error::VirtioFeaturesMissing { missing, asked, .. } = &errors[0] else {
        panic!("{errors:?}")
    };
    assert_eq!(
        (missing.as_slice(), *asked),
        ([VirtioFeature::AccessPlatform].as_slice(), BindMode::Vfio)
    );
    let msg = err.to_string();
    for want in [
        "0000:00:03.0: refusing to bind it to vfio-pci behind an IOMMU",
        "does not offer VIRTIO_F_ACCESS_PLATFORM (bit 33: the device's DMA goes through the IOMMU",
        "virtio0/features",
        "`Device::open` would refuse the port",
        "-device virtio-net-pci,disable-legacy=on,iommu_platform=on",
        "-device intel-iommu,intremap=on,caching-mode=on",
        "sudo pollnic bind --no-iommu 0000:00:03.0",
        "sudo pollnic bind --driver uio_pci_generic 0000:00:03.0",
        "reach all of RAM",
        "nothing was changed",
    ] {
        assert!(msg.contains(want), "{want:?} missing: {msg}");
    }
    // Nothing was written, no module loaded.
    assert!(f.writes().is_empty() && f.modprobed.borrow().is_empty());
    // The single-port bind refuses it too.
    assert!(matches!(
        binder(&f).bind_as(addr, BindMode::Vfio),
        Err(Error::VirtioFeaturesMissing { .. })
    ));
    assert!(f.writes().is_empty());

    // With ACCESS_PLATFORM offered, the bind goes ahead.
    let mut with = CLOUD_BITS.to_vec();
    with.push(33);
    fs::write(
        f.sysfs.device_dir(addr).join("virtio0/features"),
        features_text(&with, 128),
    )
    .unwrap();
    f.add_driver("virtio-pci");
    let r = binder(&f).bind_all_as(&[addr], BindMode::Vfio).unwrap();
    assert_eq!(r[0].previous_driver.as_deref(), Some("virtio-pci"));
}

#[test]
fn without_an_iommu_both_refusals_are_given_and_the_no_iommu_routes_need_no_access_platform() {
    let f = FakeSys::new();
    let addr = virtio_port(&f, None, &features_text(CLOUD_BITS, 64));
    // vfio-pci behind an IOMMU: no group, and the device would lack ACCESS_PLATFORM.
    let Err(Error::Refused { errors }) = binder(&f).check_all(&[addr], BindMode::Vfio) else {
        panic!("not refused")
    };
    assert!(
        matches!(
            errors.as_slice(),
            [
                Error::NoIommuGroup { .. },
                Error::VirtioFeaturesMissing { .. }
            ]
        ),
        "{errors:?}"
    );
    assert!(f.modprobed.borrow().is_empty());
    // The no-IOMMU routes: `Device::open` takes it without ACCESS_PLATFORM.
    binder(&f).check_all(&[addr], BindMode::Uio).unwrap();
    f.vfio_noiommu_capable.set(true);
    binder(&f)
        .check_all(&[addr], BindMode::VfioNoIommu)
        .unwrap();

    // Without VERSION_1 every route refuses it.
    let mut legacy = CLOUD_BITS.to_vec();
    legacy.retain(|&b| b != 32);
    fs::write(
        f.sysfs.device_dir(addr).join("virtio0/features"),
        features_text(&legacy, 64),
    )
    .unwrap();
    for mode in [BindMode::Uio, BindMode::VfioNoIommu] {
        let Err(Error::Refused { errors }) = binder(&f).check_all(&[addr], mode) else {
            panic!("{mode:?} not refused")
        };
        let [Error::VirtioFeaturesMissing { missing, .. }] = errors.as_slice() else {
            panic!("{errors:?}")
        };
        assert_eq!(missing.as_slice(), [VirtioFeature::Version1]);
        let msg = errors[0].to_string();
        assert!(
            msg.contains("VIRTIO_F_VERSION_1 (bit 32: the modern virtio 1.x interface")
                && msg.contains("disable-legacy=on"),
            "{msg}"
        );
        assert!(!msg.contains("iommu_platform"), "{msg}");
    }

    // A file that is not the kernel's refuses nothing: open decides.
    fs::write(f.sysfs.device_dir(addr).join("virtio0/features"), "garbage").unwrap();
    binder(&f).check_all(&[addr], BindMode::Uio).unwrap();
}
