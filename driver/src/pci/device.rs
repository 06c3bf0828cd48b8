//! What sysfs says about one PCI function, and the scan for the NICs of the
//! three families (Intel igb, Intel ixgbe, virtio-net).
//!
//! Attributes per `Documentation/ABI/testing/sysfs-bus-pci`: `vendor`,
//! `device`, `class`, `numa_node`, `driver_override`, the `driver` and
//! `iommu_group` links (`Documentation/ABI/testing/sysfs-kernel-iommu_groups`)
//! and the `net/` directory of a bound network driver.

use std::io;

use super::address::PciAddress;
use super::error::{Error, Result};
use super::ids::{self, NicModel, INTEL_VENDOR_ID};
use super::sysfs::{self, Sysfs, READ_HINT};
use crate::family::{FamilyInfo, FAMILIES};

pub use super::mode::{UIO_PCI_GENERIC, VFIO_PCI};

/// The drivers `pollnic bind` hands ports to.
pub(crate) fn is_pollnic_driver(driver: &str) -> bool {
    driver == VFIO_PCI || driver == UIO_PCI_GENERIC
}

/// PCI class code (base class 0x02 network, subclass 0x00 Ethernet), the
/// upper 16 bits of the 24-bit `class` attribute.
pub const CLASS_ETHERNET: u32 = 0x0200;

/// A PCI function as sysfs shows it at the time of [`PciDevice::read`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciDevice {
    /// Its address (the name of its sysfs directory).
    pub addr: PciAddress,
    /// PCI vendor ID (`vendor`).
    pub vendor: u16,
    /// PCI device ID (`device`).
    pub device: u16,
    /// 24-bit class code (`class`), e.g. `0x020000` for Ethernet.
    pub class: u32,
    /// The supported model, or `None` if pollnic does not drive this device.
    pub model: Option<&'static NicModel>,
    /// Bound driver (basename of the `driver` link), `None` when unbound.
    pub driver: Option<String>,
    /// `driver_override`, `None` when unset (`(null)`) or not supported.
    pub driver_override: Option<String>,
    /// IOMMU group number (basename of the `iommu_group` link), `None` when
    /// the IOMMU is off.
    pub iommu_group: Option<u32>,
    /// Kernel network interfaces (`net/*`), only while a kernel NIC driver is bound.
    pub interfaces: Vec<String>,
    /// NUMA node (`numa_node`), `None` for `-1` (no affinity) or absent.
    pub numa_node: Option<u32>,
}

impl PciDevice {
    /// Reads the device at `addr`.
    ///
    /// # Errors
    /// [`Error::NoSuchDevice`] if `/sys/bus/pci/devices/<addr>` is missing;
    /// [`Error::Io`] if one of its attributes cannot be read.
    pub fn read(sysfs: &Sysfs, addr: PciAddress) -> Result<Self> {
        Self::read_in(sysfs, addr, FAMILIES)
    }

    /// [`PciDevice::read`], with the device's model looked up among
    /// `families` instead of the families pollnic drives.
    ///
    /// # Errors
    /// As [`PciDevice::read`].
    pub fn read_in(sysfs: &Sysfs, addr: PciAddress, families: &[FamilyInfo]) -> Result<Self> {
        let dir = sysfs.device_dir(addr);
        if !dir.exists() {
            return Err(Error::NoSuchDevice { addr });
        }
        let vendor = sysfs::read_hex(&dir.join("vendor"))? as u16;
        let device = sysfs::read_hex(&dir.join("device"))? as u16;
        let class = sysfs::read_hex(&dir.join("class"))?;
        let driver = sysfs::link_basename(&dir.join("driver"))?;
        let iommu_group =
            sysfs::link_basename(&dir.join("iommu_group"))?.and_then(|g| g.parse().ok());
        let driver_override = match sysfs::read_trimmed(&dir.join("driver_override")) {
            Ok(s) if s.is_empty() || s == "(null)" => None,
            Ok(s) => Some(s),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(Error::io(
                    "reading",
                    dir.join("driver_override"),
                    READ_HINT,
                    e,
                ))
            }
        };
        let numa_node = sysfs::read_trimmed(&dir.join("numa_node"))
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .and_then(|n| u32::try_from(n).ok());
        // A virtio-net device's interface hangs off its virtio child
        // device (`<pci dir>/virtio<N>/net/<if>`), not the PCI function.
        let mut interfaces = sysfs::dir_names(&dir.join("net"))?;
        for child in sysfs::dir_names(&dir)? {
            if child.starts_with("virtio") {
                interfaces.extend(sysfs::dir_names(&dir.join(child).join("net"))?);
            }
        }
        Ok(Self {
            addr,
            vendor,
            device,
            class,
            model: ids::lookup_in(families, vendor, device),
            driver,
            driver_override,
            iommu_group,
            interfaces,
            numa_node,
        })
    }

    /// The pollnic back end for it, `None` if unsupported.
    pub fn family(&self) -> Option<FamilyInfo> {
        self.model.map(|m| m.family)
    }

    /// `true` if pollnic drives this device ID.
    pub fn is_supported(&self) -> bool {
        self.model.is_some()
    }

    /// `true` if it is an Intel Ethernet controller (class 0x0200xx).
    pub fn is_intel_ethernet(&self) -> bool {
        self.vendor == INTEL_VENDOR_ID && self.is_ethernet()
    }

    /// `true` if it is an Ethernet controller (class 0x0200xx) of any vendor
    /// (Intel's NICs, virtio-net devices).
    pub fn is_ethernet(&self) -> bool {
        self.class >> 8 == CLASS_ETHERNET
    }

    /// `true` if bound to vfio-pci.
    pub fn is_vfio_bound(&self) -> bool {
        self.driver.as_deref() == Some(VFIO_PCI)
    }

    /// `true` if bound to a driver `pollnic bind` hands ports to: vfio-pci
    /// or `uio_pci_generic`.
    pub fn is_pollnic_bound(&self) -> bool {
        self.driver.as_deref().is_some_and(is_pollnic_driver)
    }

    /// Human-readable name: the `lspci` name for supported devices, else
    /// `vvvv:dddd (not supported by pollnic)`.
    pub fn name(&self) -> String {
        match self.model {
            Some(m) => match m.family.missing(m.device_id) {
                None => m.name.to_owned(),
                Some(missing) => {
                    format!("{} (not supported by pollnic yet: needs {missing})", m.name)
                }
            },
            None => format!(
                "{:04x}:{:04x} (not supported by pollnic)",
                self.vendor, self.device
            ),
        }
    }
}

/// All Ethernet functions (class 0x0200xx) of a vendor pollnic has a family
/// for (Intel 0x8086, virtio 0x1af4), supported or not (see
/// [`PciDevice::is_supported`]), sorted by address.
///
/// # Errors
/// [`Error::Io`] / [`Error::PermissionDenied`] if `/sys/bus/pci/devices`
/// or a device's attributes cannot be read. Devices that disappear during
/// the scan (hot-unplug) are skipped.
pub fn list_nics(sysfs: &Sysfs) -> Result<Vec<PciDevice>> {
    list_nics_in(sysfs, FAMILIES)
}

/// [`list_nics`], with models looked up among `families` instead of
/// the families pollnic drives.
///
/// # Errors
/// As [`list_nics`].
pub fn list_nics_in(sysfs: &Sysfs, families: &[FamilyInfo]) -> Result<Vec<PciDevice>> {
    let dir = sysfs.devices_dir();
    if !dir.exists() {
        return Err(Error::io(
            "reading",
            &dir,
            READ_HINT,
            io::Error::from_raw_os_error(libc::ENOENT),
        ));
    }
    let mut found = Vec::new();
    for name in sysfs::dir_names(&dir)? {
        let Ok(addr) = name.parse::<PciAddress>() else {
            continue;
        };
        let dev_dir = sysfs.device_dir(addr);
        // Cheap pre-filter before reading everything.
        let vendor = match sysfs::read_hex(&dev_dir.join("vendor")) {
            Ok(v) => v,
            Err(e) if vanished(&e) => continue,
            Err(e) => return Err(e),
        };
        if !families.iter().any(|f| u32::from(f.vendor()) == vendor) {
            continue;
        }
        match PciDevice::read_in(sysfs, addr, families) {
            Ok(d) if d.is_ethernet() => found.push(d),
            Ok(_) => {}
            Err(e) if vanished(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(found)
}

/// Is `e` a sign that the device went away while we looked at it?
fn vanished(e: &Error) -> bool {
    match e {
        Error::NoSuchDevice { .. } => true,
        Error::Io { cause: source, .. } => source.kind() == io::ErrorKind::NotFound,
        _ => false,
    }
}
