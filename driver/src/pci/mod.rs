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
pub mod guard;
mod ids;
mod kernel;
mod link;
mod owner;
mod state;
mod status;
mod sysfs;
mod unbind;

#[cfg(test)]
mod fake;
#[cfg(test)]
pub(crate) mod tests;

pub use crate::family::{Caveat, FamilyInfo};
pub use address::{ParseAddressError, PciAddress};
pub use bind::BindReport;
pub use binder::{BindOptions, Binder};
pub use device::{list_intel_nics, list_intel_nics_in, PciDevice, CLASS_ETHERNET, VFIO_PCI};
pub use error::{Error, Result};
pub use ids::{identify, lookup, lookup_in, supported_nics, NicModel, INTEL_VENDOR_ID};
pub use kernel::{Kernel, LinuxKernel};
pub use link::{link_state, LinkState};
pub use owner::{Owner, OwnerError};
pub use state::StateDir;
pub use status::{format_status, status, status_in, NicStatus, NO_NICS_MESSAGE};
pub use sysfs::Sysfs;
pub use unbind::UnbindReport;

/// Binds `addr` to vfio-pci on the running system (state in `/run/pollnic`,
/// nodes in `/dev/vfio`, 2 s timeout); see [`Binder::bind`]. Needs root.
///
/// # Errors
/// As [`Binder::bind`].
pub fn bind_vfio(sysfs: &Sysfs, addr: PciAddress) -> Result<BindReport> {
    Binder::new(sysfs, &LinuxKernel, BindOptions::default()).bind(addr)
}

/// Binds every one of `addrs` to vfio-pci on the running system, or none of
/// them (state in `/run/pollnic`, nodes in `/dev/vfio`, 2 s timeout); see
/// [`Binder::bind_all`]. Needs root.
///
/// # Errors
/// As [`Binder::bind_all`]: [`Error::Refused`] when a check fails before
/// anything is changed, [`Error::StepFailed`] when a step fails part-way
/// (the ports bound before it are put back; `recovery` says so).
pub fn bind_vfio_all(sysfs: &Sysfs, addrs: &[PciAddress]) -> Result<Vec<BindReport>> {
    Binder::new(sysfs, &LinuxKernel, BindOptions::default()).bind_all(addrs)
}

/// Why `pollnic bind` would refuse each of `addrs` (bound together in one
/// command) on the running system: see [`guard`]. A port that cannot be read
/// is left to [`bind_vfio`] to report.
pub fn bind_refusals(sysfs: &Sysfs, addrs: &[PciAddress]) -> Vec<guard::Refusal> {
    addrs
        .iter()
        .filter_map(|&a| PciDevice::read(sysfs, a).ok())
        .flat_map(|dev| guard::check(&guard::gather(sysfs, &dev), addrs))
        .collect()
}

/// Returns `addr` from vfio-pci to its previous kernel driver on the running
/// system; see [`Binder::unbind`]. Needs root.
///
/// # Errors
/// As [`Binder::unbind`].
pub fn unbind_vfio(sysfs: &Sysfs, addr: PciAddress) -> Result<UnbindReport> {
    Binder::new(sysfs, &LinuxKernel, BindOptions::default()).unbind(addr)
}

/// Returns every one of `addrs` from vfio-pci to its previous kernel driver
/// on the running system, or none of them; see [`Binder::unbind_all`]. Needs
/// root.
///
/// # Errors
/// As [`Binder::unbind_all`]: [`Error::Refused`] when a check fails before
/// anything is changed, [`Error::StepFailed`] when a step fails part-way
/// (the ports that left vfio-pci are bound back; `recovery` says so).
pub fn unbind_vfio_all(sysfs: &Sysfs, addrs: &[PciAddress]) -> Result<Vec<UnbindReport>> {
    Binder::new(sysfs, &LinuxKernel, BindOptions::default()).unbind_all(addrs)
}
