//! `pollnic bind`: hand a NIC to vfio-pci, the standard way
//! (`Documentation/driver-api/vfio.rst`; `driver_override` in
//! `Documentation/ABI/testing/sysfs-bus-pci`):
//!
//! 1. `echo <addr> > /sys/bus/pci/devices/<addr>/driver/unbind`
//! 2. `echo vfio-pci > /sys/bus/pci/devices/<addr>/driver_override`
//! 3. `echo <addr> > /sys/bus/pci/drivers_probe`
//!
//! then check that the `driver` link says vfio-pci and `/dev/vfio/<group>`
//! exists. The previous driver is recorded first so `unbind` can restore it;
//! if a step fails, the changes are rolled back.

use std::fmt;
use std::path::{Path, PathBuf};

use super::address::PciAddress;
use super::binder::{Binder, Target};
use super::device::{PciDevice, VFIO_PCI};
use super::error::{Error, Result};
use super::sysfs;

/// Drivers that may share an IOMMU group with a VFIO device without making
/// the group unusable (`pci-stub`, and PCIe port services on bridges).
const GROUP_FRIENDLY_DRIVERS: &[&str] = &[VFIO_PCI, "pci-stub", "pcieport"];

/// `IFF_UP` in `/sys/class/net/<if>/flags` (`include/uapi/linux/if.h`).
const IFF_UP: u32 = 0x1;

/// The outcome of a successful bind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindReport {
    /// The device.
    pub addr: PciAddress,
    /// `true` if it was already on vfio-pci and nothing was changed.
    pub already_bound: bool,
    /// Its kernel driver before (as recorded for `unbind`), if any.
    pub previous_driver: Option<String>,
    /// Its IOMMU group.
    pub iommu_group: u32,
    /// The VFIO group node to open, `/dev/vfio/<group>`.
    pub vfio_node: PathBuf,
    /// Things the user should know (interfaces that went away, IOMMU group
    /// members that keep VFIO from opening the group).
    pub warnings: Vec<String>,
}

impl fmt::Display for BindReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.already_bound {
            write!(f, "{}: already bound to vfio-pci", self.addr)?;
        } else {
            let was = self.previous_driver.as_deref().unwrap_or("no driver");
            write!(f, "{}: bound to vfio-pci (was {was})", self.addr)?;
        }
        write!(
            f,
            ", IOMMU group {} at {}",
            self.iommu_group,
            self.vfio_node.display()
        )
    }
}

impl Binder<'_> {
    /// Binds `addr` to vfio-pci. Idempotent: a device already on vfio-pci is
    /// left as is and reported with `already_bound`.
    ///
    /// # Errors
    /// [`Error::NoSuchDevice`], [`Error::Unsupported`] (not a pollnic NIC),
    /// [`Error::NoIommuGroup`], [`Error::Modprobe`] (vfio-pci cannot be
    /// loaded), [`Error::PermissionDenied`] (not root), or
    /// [`Error::StepFailed`] when a step of the sequence failed — its
    /// `recovery` says what was rolled back.
    pub fn bind(&self, addr: PciAddress) -> Result<BindReport> {
        let dev = PciDevice::read(self.sysfs, addr)?;
        if !dev.is_supported() {
            return Err(Error::Unsupported {
                addr,
                vendor: dev.vendor,
                device: dev.device,
            });
        }
        let group = dev.iommu_group.ok_or(Error::NoIommuGroup { addr })?;
        let node = self.options.dev_vfio.join(group.to_string());
        let state = self.state();
        let mut report = BindReport {
            addr,
            already_bound: dev.is_vfio_bound(),
            previous_driver: dev.driver.clone(),
            iommu_group: group,
            vfio_node: node.clone(),
            warnings: Vec::new(),
        };
        if report.already_bound {
            self.wait_for_node(addr, &node)?;
            report.previous_driver = state.recall(addr)?;
            report.warnings = self.group_warnings(addr, group);
            return Ok(report);
        }

        self.ensure_driver(VFIO_PCI)?;
        // Remember before changing anything, so `unbind` can always restore.
        match &dev.driver {
            Some(prev) => state.record(addr, prev)?,
            None => state.forget(addr)?,
        }
        let interface_warnings = self.interface_warnings(&dev);

        if let Err(cause) = self.attach_vfio(&dev, &node) {
            let target = match dev.driver.as_deref() {
                Some(prev) => Target::Driver(prev),
                None => Target::Unbound,
            };
            let mut done = Vec::new();
            let recovery = match self.release(addr, target, &mut done) {
                Ok(now) => {
                    let _ = state.forget(addr);
                    let what = if done.is_empty() {
                        "nothing had been changed".into()
                    } else {
                        done.join(", ")
                    };
                    let on = now.as_deref().unwrap_or("no driver");
                    let as_before = if now == dev.driver { " as before" } else { "" };
                    format!("rolled back ({what}): {addr} is on {on}{as_before}")
                }
                Err(e) => {
                    let what = if done.is_empty() {
                        "nothing".into()
                    } else {
                        done.join(", ")
                    };
                    format!(
                        "rollback incomplete (did: {what}; then: {e}); run `pollnic unbind {addr}` \
                         to retry restoring the previous driver"
                    )
                }
            };
            return Err(Error::StepFailed {
                cause: Box::new(cause),
                recovery,
            });
        }

        report.warnings = interface_warnings;
        report.warnings.extend(self.group_warnings(addr, group));
        Ok(report)
    }

    /// Steps 1-3 and the checks.
    fn attach_vfio(&self, dev: &PciDevice, node: &Path) -> Result<()> {
        let addr = dev.address;
        let dir = self.sysfs.device_dir(addr);
        let name = addr.to_string();
        if dev.driver.is_some() {
            self.write(&dir.join("driver/unbind"), &name)?;
        }
        self.write(&dir.join("driver_override"), VFIO_PCI)?;
        self.write(&self.sysfs.drivers_probe(), &name)?;
        self.wait_for_driver(addr, VFIO_PCI)?;
        self.wait_for_node(addr, node)
    }

    /// Waits for the VFIO group node (created by vfio via devtmpfs/udev).
    fn wait_for_node(&self, addr: PciAddress, node: &Path) -> Result<()> {
        if self.wait_until(|| node.exists()) {
            return Ok(());
        }
        Err(Error::NoVfioNode {
            addr,
            path: node.to_owned(),
            waited_ms: u64::try_from(self.options.timeout.as_millis()).unwrap_or(u64::MAX),
        })
    }

    /// Interfaces of `dev` that are up and will vanish with the kernel driver.
    fn interface_warnings(&self, dev: &PciDevice) -> Vec<String> {
        dev.interfaces
            .iter()
            .filter(|ifname| {
                sysfs::read_hex(&self.sysfs.net_dir(ifname).join("flags"))
                    .is_ok_and(|f| f & IFF_UP != 0)
            })
            .map(|ifname| {
                format!("interface {ifname} was up; it is gone now, with its addresses and routes")
            })
            .collect()
    }

    /// Other members of the IOMMU group whose drivers keep VFIO from using it.
    fn group_warnings(&self, addr: PciAddress, group: u32) -> Vec<String> {
        let Ok(members) = sysfs::dir_names(&self.sysfs.iommu_group_devices(group)) else {
            return Vec::new();
        };
        members
            .iter()
            .filter_map(|m| m.parse::<PciAddress>().ok())
            .filter(|&peer| peer != addr)
            .filter_map(|peer| {
                let driver = self.current_driver(peer).ok().flatten()?;
                (!GROUP_FRIENDLY_DRIVERS.contains(&driver.as_str())).then(|| {
                    format!(
                        "IOMMU group {group} also holds {peer} (driver {driver}); VFIO cannot open \
                         the group until it is unbound or on vfio-pci too (`pollnic bind {peer}` if \
                         it is a NIC port; else move the NIC to another slot)"
                    )
                })
            })
            .collect()
    }
}
