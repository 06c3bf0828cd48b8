//! Which way into a port it is on now, read from sysfs: the driver, the
//! IOMMU group's name and type, the `uio<N>` entry, and the device node a
//! program opens ([`BindMode::of`], [`BindMode::node`]). The ways
//! themselves are [`super::mode`].

use std::path::{Path, PathBuf};

use super::device::PciDevice;
use super::mode::{BindMode, UIO_PCI_GENERIC, VFIO_NOIOMMU_GROUP_NAME, VFIO_PCI};
use super::sysfs::{self, Sysfs};

impl BindMode {
    /// The way `dev` is bound now, `None` when it is on neither vfio-pci nor
    /// `uio_pci_generic` (a kernel-driven or unbound port).
    pub fn of(sysfs: &Sysfs, dev: &PciDevice) -> Option<BindMode> {
        match dev.driver.as_deref()? {
            VFIO_PCI if dev.iommu_group.is_some_and(|g| is_noiommu_group(sysfs, g)) => {
                Some(BindMode::VfioNoIommu)
            }
            VFIO_PCI => Some(BindMode::Vfio),
            UIO_PCI_GENERIC => Some(BindMode::Uio),
            _ => None,
        }
    }

    /// The device node a program opens for `dev` bound this way, as things
    /// are now: `/dev/vfio/<group>`, `/dev/vfio/noiommu-<group>`, or
    /// `/dev/uio<N>` (from `<device>/uio/uio<N>`); `None` while the kernel
    /// has not made it known (no group, no `uio` entry).
    pub fn node(self, sysfs: &Sysfs, dev: &PciDevice) -> Option<PathBuf> {
        self.node_in(sysfs, dev, Path::new("/dev/vfio"), Path::new("/dev"))
    }

    /// [`BindMode::node`] with the directories of the VFIO and uio nodes given.
    pub(crate) fn node_in(
        self,
        sysfs: &Sysfs,
        dev: &PciDevice,
        dev_vfio: &Path,
        dev_uio: &Path,
    ) -> Option<PathBuf> {
        match self {
            BindMode::Vfio => Some(dev_vfio.join(dev.iommu_group?.to_string())),
            BindMode::VfioNoIommu => Some(dev_vfio.join(format!("noiommu-{}", dev.iommu_group?))),
            BindMode::Uio => Some(dev_uio.join(uio_name(sysfs, dev)?)),
        }
    }
}

/// `true` if IOMMU group `group` is one VFIO made up in its no-IOMMU mode
/// (its `name` reads `vfio-noiommu`), not one of a real IOMMU.
pub(crate) fn is_noiommu_group(sysfs: &Sysfs, group: u32) -> bool {
    sysfs::read_trimmed(&sysfs.iommu_group_dir(group).join("name"))
        .is_ok_and(|n| n == VFIO_NOIOMMU_GROUP_NAME)
}

/// The `type` of IOMMU group `group` (`DMA`, `DMA-FQ`, `identity`, ...),
/// `None` when the kernel does not say.
pub(crate) fn group_type(sysfs: &Sysfs, group: u32) -> Option<String> {
    sysfs::read_trimmed(&sysfs.iommu_group_dir(group).join("type"))
        .ok()
        .filter(|t| !t.is_empty())
}

/// `uio<N>` of a port on `uio_pci_generic` (the entry of `<device>/uio/`).
pub(crate) fn uio_name(sysfs: &Sysfs, dev: &PciDevice) -> Option<String> {
    sysfs::dir_names(&sysfs.device_dir(dev.addr).join("uio"))
        .ok()?
        .into_iter()
        .find(|n| {
            n.strip_prefix("uio")
                .is_some_and(|k| k.parse::<u32>().is_ok())
        })
}
