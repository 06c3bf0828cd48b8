//! Linux PCI sysfs: finding the Intel NICs pollnic drives, their state, and
//! moving them between their kernel driver and vfio-pci.
//!
//! Everything goes through a [`Sysfs`] (default root `/sys`), so tests run
//! against a fake tree. Reading never writes to a device; the only device
//! access is a read-only BAR 0 peek at the link register ([`link_state`]).
//!
//! Kernel references: `Documentation/ABI/testing/sysfs-bus-pci`,
//! `Documentation/driver-api/vfio.rst`, `Documentation/PCI/sysfs-pci.rst`,
//! `Documentation/ABI/testing/sysfs-class-net`.

mod address;
mod batch;
mod bind;
mod binder;
mod config;
mod device;
mod error;
mod ids;
mod kernel;
mod link;
mod state;
mod sysfs;
mod unbind;

#[cfg(test)]
mod fake;
#[cfg(test)]
pub(crate) mod tests;

pub use crate::family::{Caveat, FamilyInfo};
pub use address::{ParseAddressError, PciAddress};
pub use bind::BindReport;
use binder::{BindOptions, Binder};
pub use device::{list_intel_nics, list_intel_nics_in, PciDevice, CLASS_ETHERNET, VFIO_PCI};
pub use error::{Error, Result};
pub use ids::{identify, lookup, lookup_in, supported_nics, NicModel, INTEL_VENDOR_ID};
use kernel::LinuxKernel;
pub use link::{link_state, LinkState};
#[cfg(test)]
use state::StateDir;
pub use sysfs::Sysfs;
pub use unbind::UnbindReport;

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
///   [`Error::NoIommuGroup`] or [`Error::Modprobe`] of each failing port.
/// - [`Error::StepFailed`] when a port fails after earlier ones were bound:
///   `cause` is that port's error, and `recovery` names the ports returned to
///   their previous driver, and what to run for any that could not be.
/// - That port's own error, as [`bind_vfio`] returns it, when no earlier
///   port had been changed.
pub fn bind_vfio_all(sysfs: &Sysfs, addrs: &[PciAddress]) -> Result<Vec<BindReport>> {
    Binder::new(sysfs, &LinuxKernel, BindOptions::default()).bind_all(addrs)
}

/// Returns `addr` from vfio-pci to the kernel driver recorded when it was
/// bound (`/run/pollnic/<addr>.driver`, loading its module if needed), or, if
/// that fails or there is no record, to the one the kernel picks by device
/// ID (`drivers_probe`). A port not on vfio-pci is reported unchanged. Needs
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

/// Returns every one of `addrs` from vfio-pci to its recorded kernel driver
/// on the running system, or none of them: unlike [`unbind_vfio`], a port
/// whose recorded driver does not take it back is not handed to the
/// kernel's choice; the command fails and the ports that had left vfio-pci
/// are bound back to it. Needs root.
///
/// # Errors
/// - [`Error::Refused`] when a check fails, before any port is changed: its
///   `errors` hold an [`Error::DuplicateAddress`] for a repeated address, and
///   the [`Error::NoSuchDevice`], [`Error::Unsupported`] or
///   [`Error::Modprobe`] of each failing port.
/// - [`Error::StepFailed`] when a port fails part-way: `cause` is its error,
///   and `recovery` names the ports bound back to vfio-pci, and what to run
///   for any that could not be.
/// - That port's own error, when no port had left vfio-pci.
pub fn unbind_vfio_all(sysfs: &Sysfs, addrs: &[PciAddress]) -> Result<Vec<UnbindReport>> {
    Binder::new(sysfs, &LinuxKernel, BindOptions::default()).unbind_all(addrs)
}
