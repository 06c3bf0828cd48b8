//! Linux PCI sysfs: finding the NICs pollnic drives (Intel igb 82576/I350,
//! Intel ixgbe 82599/X520, virtio-net), their state, and
//! moving them between their kernel driver and vfio-pci (or, on a machine
//! with no IOMMU, VFIO's no-IOMMU mode or `uio_pci_generic`: [`BindMode`]).
//!
//! Everything goes through a [`Sysfs`] (default root `/sys`), so tests run
//! against a fake tree. Reading never writes to a device; the only device
//! access is a read-only BAR 0 peek at the link register ([`link_state`]).
//!
//! Kernel references: `Documentation/ABI/testing/sysfs-bus-pci`,
//! `Documentation/driver-api/vfio.rst` (and its "VFIO NO-IOMMU" section),
//! `Documentation/PCI/sysfs-pci.rst`, `Documentation/ABI/testing/sysfs-class-net`,
//! `drivers/uio/uio_pci_generic.c`.

pub(crate) mod address;
mod batch;
mod bind;
mod binder;
mod config;
mod device;
pub(crate) mod error;
mod features;
mod ids;
mod kernel;
mod link;
mod mode;
mod route;
mod state;
mod sysfs;
mod unbind;
mod virtio;

#[cfg(test)]
mod fake;
#[cfg(test)]
pub(crate) mod tests;

pub use crate::family::{Caveat, FamilyInfo};
pub use address::{ParseAddressError, PciAddress};
pub use bind::BindReport;
use binder::{BindOptions, Binder};
pub use device::{list_nics, list_nics_in, PciDevice, CLASS_ETHERNET, UIO_PCI_GENERIC, VFIO_PCI};
pub use error::{Error, Result};
pub use features::{ParseVirtioFeaturesError, VirtioFeature, VirtioFeatures};
pub use ids::{identify, lookup, lookup_in, supported_nics, NicModel, INTEL_VENDOR_ID};
use kernel::LinuxKernel;
pub use link::{link_state, LinkState};
pub use mode::{BindMode, VFIO_NOIOMMU_GROUP_NAME};
#[cfg(test)]
use state::StateDir;
pub use sysfs::Sysfs;
pub use unbind::UnbindReport;
pub use virtio::virtio_features;

/// Binds `addr` to vfio-pci on the running system, as `dpdk-devbind.py -b
/// vfio-pci` does: it records the current driver in
/// `/run/pollnic/<addr>.driver`, unbinds it, sets `driver_override` to
/// `vfio-pci`, asks the kernel to probe (`drivers_probe`), and waits up to
/// 2 s for the `driver` link and for `/dev/vfio/<group>`; a failed step is
/// rolled back. Idempotent:
/// a port already on vfio-pci is left as it is (`already_bound`). Needs root.
///
/// # Errors
/// [`Error::NoSuchDevice`], [`Error::Unsupported`] (not a NIC pollnic
/// drives), [`Error::NoIommuGroup`] (IOMMU off), [`Error::Modprobe`]
/// (vfio-pci cannot be loaded), [`Error::PermissionDenied`] (not root), or
/// [`Error::StepFailed`] when a step failed part-way: its `recovery` says
/// what was rolled back.
pub fn bind_vfio(sysfs: &Sysfs, addr: PciAddress) -> Result<BindReport> {
    Binder::new(sysfs, &LinuxKernel, BindOptions::default()).bind(addr)
}

/// Binds every one of `addrs` to vfio-pci on the running system, as
/// [`bind_vfio`] does one, or none of them: every port is checked before any
/// is changed, and the ports bound before a failing one are put back. Needs
/// root.
///
/// # Errors
/// - [`Error::Refused`] when a check fails, before any port is changed: its
///   `errors` hold an [`Error::DuplicateAddress`] for a repeated address, and
///   the [`Error::NoSuchDevice`], [`Error::Unsupported`],
///   [`Error::NoIommuGroup`], [`Error::VirtioFeaturesMissing`] or
///   [`Error::Modprobe`] of each failing port.
/// - [`Error::StepFailed`] when a port fails after earlier ones were bound:
///   `cause` is that port's error, and `recovery` names the ports returned to
///   their previous driver, and what to run for any that could not be.
/// - That port's own error, as [`bind_vfio`] returns it, when no earlier
///   port had been changed.
pub fn bind_vfio_all(sysfs: &Sysfs, addrs: &[PciAddress]) -> Result<Vec<BindReport>> {
    Binder::new(sysfs, &LinuxKernel, BindOptions::default()).bind_all(addrs)
}

/// Checks, without changing any port, everything [`bind_all`] checks before
/// it binds `addrs` the way `mode` says: each port exists, is a NIC pollnic
/// supports, has an IOMMU group for [`BindMode::Vfio`] (none, or an
/// untranslated one, for the no-IOMMU routes), is not bound to pollnic
/// another way, offers (a virtio-net port still on virtio-pci, whose
/// features sysfs shows: [`virtio_features`]) the virtio features
/// `Device::open` requires on that route (`VIRTIO_F_VERSION_1`, and
/// `VIRTIO_F_ACCESS_PLATFORM` behind an IOMMU), and its previous-driver
/// record is readable; no address is
/// repeated; the driver of `mode` is registered (its module is loaded with
/// `modprobe` if it is not: the one side effect) and, for
/// [`BindMode::VfioNoIommu`], the `vfio` module offers its no-IOMMU mode.
/// Lets a caller run its own checks that cost the user something (the
/// CLI's guard against binding a port in use) only for a bind that would
/// otherwise succeed.
///
/// # Errors
/// [`Error::Refused`] holding every failed check, as [`bind_all`] returns
/// it ([`Error::VirtioFeaturesMissing`] among them).
pub fn check_bind_all(sysfs: &Sysfs, addrs: &[PciAddress], mode: BindMode) -> Result<()> {
    Binder::new(sysfs, &LinuxKernel, BindOptions::default())
        .check_all(addrs, mode)
        .map(drop)
}

/// Binds every one of `addrs` the way `mode` says, or none of them, as
/// [`bind_vfio_all`] does for [`BindMode::Vfio`]. The no-IOMMU routes give
/// the NIC physical addresses, so that it can reach all of RAM; a port bound
/// so is opened only with `DmaAddressing::UnsafeNoIommuPhysical`.
/// [`BindMode::Uio`] loads `uio_pci_generic` and waits for
/// `/dev/uio<N>`; [`BindMode::VfioNoIommu`] turns on the `vfio` module's
/// `enable_unsafe_noiommu_mode` (kernel `Documentation/driver-api/vfio.rst`,
/// "VFIO NO-IOMMU"; it taints the kernel) and waits for
/// `/dev/vfio/noiommu-<group>`. Needs root.
///
/// # Errors
/// As [`bind_vfio_all`], and in [`Error::Refused`]: [`Error::IommuPresent`]
/// (a no-IOMMU route asked for a port behind an IOMMU),
/// [`Error::BoundOtherWay`] (bound to the other pollnic driver: unbind it
/// first), [`Error::NoIommuModeUnavailable`] (no `CONFIG_VFIO_NOIOMMU`),
/// [`Error::VirtioFeaturesMissing`] (a virtio-net port lacking
/// `VIRTIO_F_VERSION_1`, or `VIRTIO_F_ACCESS_PLATFORM` for [`BindMode::Vfio`]).
pub fn bind_all(sysfs: &Sysfs, addrs: &[PciAddress], mode: BindMode) -> Result<Vec<BindReport>> {
    Binder::new(sysfs, &LinuxKernel, BindOptions::default()).bind_all_as(addrs, mode)
}

/// Returns `addr` from vfio-pci (or `uio_pci_generic`) to the kernel driver
/// recorded when it was bound (`/run/pollnic/<addr>.driver`, loading its
/// module if needed), or, if that fails or there is no record, to the one
/// the kernel picks by device ID (`drivers_probe`). A port on neither is
/// reported unchanged. Needs
/// root. The kernel's unbind waits until the program holding the port lets
/// go of it (a pollnic program does on VFIO's release request).
///
/// # Errors
/// [`Error::NoSuchDevice`], [`Error::PermissionDenied`] (not root),
/// [`Error::Modprobe`] (the recorded driver cannot be loaded), or
/// [`Error::StepFailed`] when returning to the recorded driver failed: the
/// kernel was then asked to pick a driver, and `recovery` says which.
pub fn unbind_vfio(sysfs: &Sysfs, addr: PciAddress) -> Result<UnbindReport> {
    Binder::new(sysfs, &LinuxKernel, BindOptions::default()).unbind(addr)
}

/// Returns every one of `addrs` from vfio-pci or `uio_pci_generic` to its
/// recorded kernel driver on the running system, or none of them: unlike
/// [`unbind_vfio`], a port whose recorded driver does not take it back is
/// not handed to the kernel's choice; the command fails and the ports that
/// had left vfio-pci or `uio_pci_generic` are bound back to it. Needs root.
///
/// # Errors
/// - [`Error::Refused`] when a check fails, before any port is changed: its
///   `errors` hold an [`Error::DuplicateAddress`] for a repeated address, and
///   the [`Error::NoSuchDevice`], [`Error::Unsupported`] or
///   [`Error::Modprobe`] of each failing port.
/// - [`Error::StepFailed`] when a port fails part-way: `cause` is its error,
///   and `recovery` names the ports bound back to their pollnic driver, and what to run
///   for any that could not be.
/// - That port's own error, when no port had left vfio-pci.
pub fn unbind_vfio_all(sysfs: &Sysfs, addrs: &[PciAddress]) -> Result<Vec<UnbindReport>> {
    Binder::new(sysfs, &LinuxKernel, BindOptions::default()).unbind_all(addrs)
}
