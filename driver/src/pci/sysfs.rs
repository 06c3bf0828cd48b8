//! Where things live in sysfs, and small readers for its attribute files.
//!
//! Layout per the kernel's `Documentation/ABI/testing/sysfs-bus-pci` and
//! `Documentation/ABI/testing/sysfs-class-net`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::address::PciAddress;
use super::error::{Error, Result};

/// Hint for read failures of sysfs files that should always be there.
pub(crate) const READ_HINT: &str = "is sysfs mounted at /sys? (`mount -t sysfs sysfs /sys`)";

/// A sysfs mount. The root is injectable so tests can run against a fake
/// tree; [`Sysfs::default`] is the real `/sys`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sysfs {
    /// Mount point, normally `/sys`.
    pub root: PathBuf,
}

impl Default for Sysfs {
    fn default() -> Self {
        Self::new("/sys")
    }
}

impl Sysfs {
    /// A sysfs tree rooted at `root` (e.g. `/sys`, or a temp dir in tests).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// `/sys/bus/pci/devices`: one entry per PCI function, named by address.
    pub fn devices_dir(&self) -> PathBuf {
        self.root.join("bus/pci/devices")
    }

    /// `/sys/bus/pci/devices/<addr>`.
    pub fn device_dir(&self, addr: PciAddress) -> PathBuf {
        self.devices_dir().join(addr.to_string())
    }

    /// `/sys/bus/pci/drivers/<name>`: present while the driver is registered.
    pub fn driver_dir(&self, name: &str) -> PathBuf {
        self.root.join("bus/pci/drivers").join(name)
    }

    /// `/sys/bus/pci/drivers_probe`: writing an address makes the kernel
    /// probe drivers for that device (honouring `driver_override`).
    pub fn drivers_probe(&self) -> PathBuf {
        self.root.join("bus/pci/drivers_probe")
    }

    /// `/sys/class/net/<ifname>`.
    pub fn net_dir(&self, ifname: &str) -> PathBuf {
        self.root.join("class/net").join(ifname)
    }

    /// `/sys/kernel/iommu_groups/<group>`: its `devices/`, its `type`, and
    /// for a group VFIO made up in no-IOMMU mode, `name` = `vfio-noiommu`.
    pub fn iommu_group_dir(&self, group: u32) -> PathBuf {
        self.root
            .join("kernel/iommu_groups")
            .join(group.to_string())
    }

    /// `/sys/kernel/iommu_groups/<group>/devices`: the group's members.
    pub fn iommu_group_devices(&self, group: u32) -> PathBuf {
        self.iommu_group_dir(group).join("devices")
    }

    /// `/sys/module/vfio/parameters/enable_unsafe_noiommu_mode`: present
    /// while the `vfio` module is loaded (or built in) on a kernel built with
    /// `CONFIG_VFIO_NOIOMMU`; reads `Y` when VFIO's no-IOMMU mode is on
    /// (`Documentation/driver-api/vfio.rst`, "VFIO NO-IOMMU").
    pub fn vfio_noiommu_param(&self) -> PathBuf {
        self.root
            .join("module/vfio/parameters/enable_unsafe_noiommu_mode")
    }
}

/// Reads a text attribute, trimming the trailing newline.
pub(crate) fn read_trimmed(path: &Path) -> io::Result<String> {
    Ok(fs::read_to_string(path)?.trim().to_owned())
}

/// Reads a `0x`-prefixed hex attribute such as `vendor`, `device`, `class`.
pub(crate) fn read_hex(path: &Path) -> Result<u32> {
    let text = read_trimmed(path).map_err(|e| Error::io("reading", path, READ_HINT, e))?;
    let digits = text.strip_prefix("0x").unwrap_or(&text);
    u32::from_str_radix(digits, 16).map_err(|_| {
        Error::io(
            "parsing",
            path,
            "expected a 0x-prefixed hex number; is this really sysfs?",
            io::Error::new(io::ErrorKind::InvalidData, format!("{text:?} is not hex")),
        )
    })
}

/// The final component of the symlink at `path`, or `None` if there is no
/// such link (e.g. `driver` of an unbound device).
pub(crate) fn link_basename(path: &Path) -> Result<Option<String>> {
    match fs::read_link(path) {
        Ok(target) => Ok(target.file_name().map(|n| n.to_string_lossy().into_owned())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("reading link", path, READ_HINT, e)),
    }
}

/// Names of the entries of directory `path`, sorted; empty if it does not exist.
pub(crate) fn dir_names(path: &Path) -> Result<Vec<String>> {
    let entries = match fs::read_dir(path) {
        Ok(it) => it,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("reading", path, READ_HINT, e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("reading", path, READ_HINT, e))?;
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    Ok(names)
}
