//! A virtio-net function's feature bits, read from sysfs while the kernel's
//! virtio-pci driver holds it, and the bind refusal they lead to.
//!
//! The kernel shows a virtio device's features in
//! `/sys/bus/pci/devices/<addr>/virtio<N>/features` (the same file as
//! `/sys/bus/virtio/devices/virtio<N>/features`): `features_show` in
//! `drivers/virtio/virtio.c` writes one character per feature bit, `'1'`
//! or `'0'`, character `i` for bit `i`, then a newline: 64 characters
//! (`sizeof(dev->features) * 8`), or 128 on kernels with extended features
//! (`VIRTIO_FEATURES_MAX`). They are the features negotiated in
//! `virtio_dev_probe`: the device's offer and the virtio driver's table,
//! plus the transport bits the device offers and the ring keeps
//! (`vring_transport_features`: `VIRTIO_F_EVENT_IDX`, `VIRTIO_F_VERSION_1`,
//! `VIRTIO_F_ACCESS_PLATFORM` among them). So the transport bits say what
//! the device offers; a network bit at `0` means the device does not offer
//! it or the kernel's `virtio_net` does not take it. Before a virtio driver
//! has probed the device the file reads all `0`, and with the function on
//! vfio-pci or `uio_pci_generic` there is no `virtio<N>` at all: then the
//! features are unknown here, and only `Device::open` can read them.

use std::io;
use std::path::PathBuf;

use super::address::PciAddress;
use super::binder::Binder;
use super::device::PciDevice;
use super::error::{Error, Result};
use super::features::VirtioFeatures;
use super::mode::BindMode;
use super::sysfs::{self, Sysfs, READ_HINT};
use pollnic_hw::virtio::VIRTIO_VENDOR_ID;

/// The kernel driver of a virtio PCI function (`drivers/virtio/virtio_pci_common.c`).
const VIRTIO_PCI: &str = "virtio-pci";

/// The feature bits of the virtio device at PCI address `addr`, read from
/// `<sysfs>/bus/pci/devices/<addr>/virtio<N>/features` while the
/// function is on the kernel's `virtio-pci` and a virtio driver (e.g.
/// `virtio_net`) is bound to `virtio<N>`. `None` when they cannot be known
/// from sysfs: the function is on another driver (vfio-pci,
/// `uio_pci_generic`) or none, it has no `virtio<N>` child, or no virtio
/// driver has probed it yet (the file then reads all `0`).
///
/// # Errors
/// [`Error::NoSuchDevice`] when there is no such PCI function;
/// [`Error::VirtioFeaturesUnreadable`] when the file is not as the kernel
/// writes it; [`Error::Io`] or [`Error::PermissionDenied`] when it cannot be
/// read.
pub fn virtio_features(sysfs: &Sysfs, addr: PciAddress) -> Result<Option<VirtioFeatures>> {
    let dir = sysfs.device_dir(addr);
    if !dir.exists() {
        return Err(Error::NoSuchDevice { addr });
    }
    if sysfs::link_basename(&dir.join("driver"))?.as_deref() != Some(VIRTIO_PCI) {
        return Ok(None);
    }
    let Some(child) = virtio_child(sysfs, addr)? else {
        return Ok(None);
    };
    if sysfs::link_basename(&child.join("driver"))?.is_none() {
        return Ok(None);
    }
    let path = child.join("features");
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("reading", path, READ_HINT, e)),
    };
    // Bytes that are not UTF-8 become U+FFFD, refused as a character.
    String::from_utf8_lossy(&bytes)
        .parse()
        .map(Some)
        .map_err(|problem| Error::VirtioFeaturesUnreadable { path, problem })
}

/// `<device>/virtio<N>` of `addr` (the virtio device virtio-pci made for
/// it), `None` when it has none.
fn virtio_child(sysfs: &Sysfs, addr: PciAddress) -> Result<Option<PathBuf>> {
    let dir = sysfs.device_dir(addr);
    Ok(sysfs::dir_names(&dir)?
        .into_iter()
        .find(|n| {
            n.strip_prefix("virtio")
                .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(|n| dir.join(n)))
}

impl Binder<'_> {
    /// What the features of a virtio-net `dev` keep from opening it once
    /// bound as `mode`, found without changing anything: the features
    /// `Device::open` requires on that route ([`VirtioFeatures::missing_for`]).
    /// Features that cannot be read here (see [`virtio_features`]) refuse
    /// nothing: `Device::open` checks them.
    ///
    /// # Errors
    /// [`Error::VirtioFeaturesMissing`].
    pub(crate) fn admit_virtio(&self, dev: &PciDevice, mode: BindMode) -> Result<()> {
        if dev.vendor != VIRTIO_VENDOR_ID || !dev.is_supported() {
            return Ok(());
        }
        let Ok(Some(features)) = virtio_features(self.sysfs, dev.addr) else {
            return Ok(());
        };
        let missing = features.missing_for(mode);
        if missing.is_empty() {
            return Ok(());
        }
        Err(Error::VirtioFeaturesMissing {
            addr: dev.addr,
            missing,
            asked: mode,
            path: virtio_child(self.sysfs, dev.addr)
                .ok()
                .flatten()
                .unwrap_or_else(|| self.sysfs.device_dir(dev.addr).join("virtio<N>"))
                .join("features"),
        })
    }
}
