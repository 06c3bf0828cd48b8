//! `pollnic bind`: hand a NIC to vfio-pci (or, with no IOMMU, to vfio-pci
//! in VFIO's no-IOMMU mode or to `uio_pci_generic`), the standard way
//! (`Documentation/driver-api/vfio.rst`; `driver_override` in
//! `Documentation/ABI/testing/sysfs-bus-pci`; `drivers/uio/uio_pci_generic.c`):
//!
//! 1. `echo <addr> > /sys/bus/pci/devices/<addr>/driver/unbind`
//! 2. `echo vfio-pci > /sys/bus/pci/devices/<addr>/driver_override`
//!    (or `uio_pci_generic`)
//! 3. `echo <addr> > /sys/bus/pci/drivers_probe`
//!
//! then check that the `driver` link says that driver and that the node to
//! open exists: `/dev/vfio/<group>`, `/dev/vfio/noiommu-<group>`, or
//! `/dev/uio<N>` (after `<device>/uio/uio<N>`). VFIO's no-IOMMU mode is
//! turned on first (`echo 1 >
//! /sys/module/vfio/parameters/enable_unsafe_noiommu_mode`) when it is
//! asked for. The previous driver is recorded first so `unbind` can
//! restore it; if a step fails, the changes are rolled back.

use std::fmt;
use std::io;
use std::path::PathBuf;

use super::address::PciAddress;
use super::binder::{Binder, Target};
use super::device::{PciDevice, VFIO_PCI};
use super::error::{Error, Result};
use super::mode::BindMode;
use super::route;
use super::sysfs::{self, READ_HINT};

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
    /// `true` if it was already bound this way and nothing was changed.
    pub already_bound: bool,
    /// Its kernel driver before (as recorded for `unbind`), if any.
    pub previous_driver: Option<String>,
    /// How it is bound now: the driver ([`BindMode::driver`]) and whether
    /// the NIC gets physical addresses ([`BindMode::is_physical`]).
    pub mode: BindMode,
    /// Its IOMMU group (VFIO's made-up one in no-IOMMU mode); `None` on
    /// `uio_pci_generic`.
    pub iommu_group: Option<u32>,
    /// The node a program opens: `/dev/vfio/<group>`,
    /// `/dev/vfio/noiommu-<group>` or `/dev/uio<N>`.
    pub node: PathBuf,
    /// Things the user should know (interfaces that went away, IOMMU group
    /// members that keep VFIO from opening the group).
    pub warnings: Vec<String>,
}

impl fmt::Display for BindReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let driver = self.mode.driver();
        if self.already_bound {
            write!(f, "{}: already bound to {driver}", self.addr)?;
        } else {
            let was = self.previous_driver.as_deref().unwrap_or("no driver");
            write!(f, "{}: bound to {driver} (was {was})", self.addr)?;
        }
        let node = self.node.display();
        match (self.mode, self.iommu_group) {
            (BindMode::Vfio, Some(g)) => write!(f, ", IOMMU group {g} at {node}"),
            (BindMode::VfioNoIommu, Some(g)) => write!(
                f,
                ", VFIO no-IOMMU group {g} at {node}, no IOMMU: physical addresses \
                 (open with --no-iommu)"
            ),
            _ => write!(
                f,
                ", {node}, no IOMMU: physical addresses (open with --no-iommu)"
            ),
        }
    }
}

impl Binder<'_> {
    /// Binds `addr` to vfio-pci behind an IOMMU: [`Binder::bind_as`] with
    /// [`BindMode::Vfio`].
    ///
    /// # Errors
    /// As [`Binder::bind_as`].
    pub fn bind(&self, addr: PciAddress) -> Result<BindReport> {
        self.bind_as(addr, BindMode::Vfio)
    }

    /// What keeps `dev` from being bound as `mode`, found without changing
    /// anything: not a pollnic NIC, its IOMMU (none for vfio-pci, a
    /// translating one for a no-IOMMU route), or bound to pollnic another way.
    ///
    /// # Errors
    /// [`Error::Unsupported`], [`Error::NoIommuGroup`],
    /// [`Error::IommuPresent`], [`Error::BoundOtherWay`].
    pub(crate) fn admit(&self, dev: &PciDevice, mode: BindMode) -> Result<()> {
        let addr = dev.addr;
        if !dev.is_supported() {
            return Err(Error::Unsupported {
                addr,
                vendor: dev.vendor,
                device: dev.device,
            });
        }
        // A group VFIO made up in no-IOMMU mode is no IOMMU.
        let real_group = dev
            .iommu_group
            .filter(|&g| !route::is_noiommu_group(self.sysfs, g));
        let present = |group| Error::IommuPresent {
            addr,
            group,
            group_type: route::group_type(self.sysfs, group),
            asked: mode,
        };
        match (mode, real_group) {
            (BindMode::Vfio, None) => return Err(Error::NoIommuGroup { addr }),
            (BindMode::VfioNoIommu, Some(group)) => return Err(present(group)),
            // Under iommu=pt the group's type is `identity`: no translation,
            // physical addresses work (DPDK allows uio there too).
            (BindMode::Uio, Some(group))
                if route::group_type(self.sysfs, group).is_some_and(|t| t.starts_with("DMA")) =>
            {
                return Err(present(group))
            }
            _ => {}
        }
        match BindMode::of(self.sysfs, dev) {
            Some(now) if now != mode => Err(Error::BoundOtherWay {
                addr,
                now,
                asked: mode,
            }),
            _ => Ok(()),
        }
    }

    /// Whether VFIO's no-IOMMU mode can be turned on: its module parameter
    /// exists (with vfio loaded).
    ///
    /// # Errors
    /// [`Error::NoIommuModeUnavailable`] when it does not.
    pub(crate) fn check_noiommu(&self) -> Result<()> {
        let param = self.sysfs.vfio_noiommu_param();
        if param.exists() {
            Ok(())
        } else {
            Err(Error::NoIommuModeUnavailable { param })
        }
    }

    /// Turns VFIO's no-IOMMU mode on, if it is not already.
    ///
    /// # Errors
    /// [`Error::NoIommuModeUnavailable`], or the failed read or write.
    fn enable_noiommu(&self) -> Result<()> {
        let param = self.sysfs.vfio_noiommu_param();
        match sysfs::read_trimmed(&param) {
            Ok(v) if v == "Y" || v == "1" => Ok(()),
            Ok(_) => self.write(&param, "1"),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                Err(Error::NoIommuModeUnavailable { param })
            }
            Err(e) => Err(Error::io("reading", &param, READ_HINT, e)),
        }
    }

    /// Binds `addr` the way `mode` says. Idempotent: a device already bound
    /// that way is left as is and reported with `already_bound`.
    ///
    /// # Errors
    /// [`Error::NoSuchDevice`], [`Error::Unsupported`] (not a pollnic NIC),
    /// [`Error::NoIommuGroup`] (vfio-pci with no IOMMU),
    /// [`Error::IommuPresent`] (a no-IOMMU route behind an IOMMU),
    /// [`Error::BoundOtherWay`], [`Error::VirtioFeaturesMissing`] (a
    /// virtio-net port lacking a feature `Device::open` requires on that
    /// route), [`Error::NoIommuModeUnavailable`],
    /// [`Error::Modprobe`] (the driver cannot be loaded),
    /// [`Error::PermissionDenied`] (not root), or [`Error::StepFailed`]
    /// when a step of the sequence failed — its `recovery` says what was
    /// rolled back.
    pub fn bind_as(&self, addr: PciAddress, mode: BindMode) -> Result<BindReport> {
        let dev = PciDevice::read(self.sysfs, addr)?;
        self.admit(&dev, mode)?;
        self.admit_virtio(&dev, mode)?;
        let state = self.state();
        let mut report = BindReport {
            addr,
            already_bound: BindMode::of(self.sysfs, &dev) == Some(mode),
            previous_driver: dev.driver.clone(),
            mode,
            iommu_group: None,
            node: PathBuf::new(),
            warnings: Vec::new(),
        };
        if report.already_bound {
            (report.node, report.iommu_group) = self.wait_for_node(addr, mode)?;
            report.previous_driver = state.recall(addr)?;
            if let (BindMode::Vfio, Some(g)) = (mode, report.iommu_group) {
                report.warnings = self.group_warnings(addr, g);
            }
            return Ok(report);
        }

        self.ensure_driver(mode.driver())?;
        if mode == BindMode::VfioNoIommu {
            self.enable_noiommu()?;
        }
        // Remember before changing anything, so `unbind` can always restore.
        match &dev.driver {
            Some(prev) => state.record(addr, prev)?,
            None => state.forget(addr)?,
        }
        let interface_warnings = self.interface_warnings(&dev);

        let attached = self.attach(&dev, mode);
        let (node, group) = match attached {
            Ok(found) => found,
            Err(cause) => {
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
                            "rollback incomplete (did: {what}; then: {e}); run `pollnic unbind \
                             {addr}` to retry restoring the previous driver"
                        )
                    }
                };
                return Err(Error::StepFailed {
                    cause: Box::new(cause),
                    recovery,
                });
            }
        };
        report.node = node;
        report.iommu_group = group;
        report.warnings = interface_warnings;
        if let (BindMode::Vfio, Some(g)) = (mode, group) {
            report.warnings.extend(self.group_warnings(addr, g));
        }
        Ok(report)
    }

    /// Steps 1-3 and the checks; returns the node and the IOMMU group.
    fn attach(&self, dev: &PciDevice, mode: BindMode) -> Result<(PathBuf, Option<u32>)> {
        let addr = dev.addr;
        let dir = self.sysfs.device_dir(addr);
        let name = addr.to_string();
        if dev.driver.is_some() {
            self.write(&dir.join("driver/unbind"), &name)?;
        }
        self.write(&dir.join("driver_override"), mode.driver())?;
        self.write(&self.sysfs.drivers_probe(), &name)?;
        self.wait_for_driver(addr, mode.driver())?;
        self.wait_for_node(addr, mode)
    }

    /// Waits for the node of `addr` bound as `mode` (created by vfio or uio
    /// via devtmpfs/udev); returns it and the port's IOMMU group.
    fn wait_for_node(&self, addr: PciAddress, mode: BindMode) -> Result<(PathBuf, Option<u32>)> {
        let o = &self.options;
        let mut found = None;
        let mut expected = None;
        let appeared = self.wait_until(|| {
            let Ok(dev) = PciDevice::read(self.sysfs, addr) else {
                return false;
            };
            match mode.node_in(self.sysfs, &dev, &o.dev_vfio, &o.dev_uio) {
                Some(node) if node.exists() => {
                    found = Some((node, dev.iommu_group.filter(|_| mode != BindMode::Uio)));
                    true
                }
                other => {
                    expected = other;
                    false
                }
            }
        });
        if let (true, Some(found)) = (appeared, found) {
            return Ok(found);
        }
        let waited_ms = u64::try_from(o.timeout.as_millis()).unwrap_or(u64::MAX);
        Err(match mode {
            BindMode::Uio => Error::NoUioNode {
                addr,
                path: expected.unwrap_or_else(|| self.sysfs.device_dir(addr).join("uio/uio<N>")),
                waited_ms,
            },
            BindMode::Vfio | BindMode::VfioNoIommu => Error::NoVfioNode {
                addr,
                path: expected.unwrap_or_else(|| o.dev_vfio.join("noiommu-<N>")),
                waited_ms,
            },
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
