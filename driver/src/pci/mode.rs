//! The ways into a port that `pollnic bind` offers, and which one a port
//! is on now: vfio-pci behind an IOMMU, or one of the two no-IOMMU routes
//! (VFIO's no-IOMMU mode, `uio_pci_generic`), where the NIC is given
//! physical addresses and can reach all of RAM.
//!
//! Kernel references: `Documentation/driver-api/vfio.rst` ("VFIO
//! NO-IOMMU"), `drivers/vfio/group.c` (`vfio_noiommu_group_alloc`: the
//! group is named `vfio-noiommu`, its node is `/dev/vfio/noiommu-<N>`),
//! `drivers/uio/uio_pci_generic.c`, `Documentation/driver-api/uio-howto.rst`
//! (`/sys/class/uio/uio<N>`, `/dev/uio<N>`).

use std::fmt;
use std::path::{Path, PathBuf};

use super::device::{PciDevice, UIO_PCI_GENERIC, VFIO_PCI};
use super::sysfs::{self, Sysfs};

/// The `name` VFIO gives the IOMMU groups it makes up for devices with no
/// IOMMU in its no-IOMMU mode (`/sys/kernel/iommu_groups/<N>/name`).
pub const VFIO_NOIOMMU_GROUP_NAME: &str = "vfio-noiommu";

/// How a port is handed to pollnic: the kernel driver it is bound to, and
/// how its DMA is addressed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BindMode {
    /// vfio-pci behind an IOMMU (type1): the NIC sees only the buffers
    /// pollnic maps for it. The default, and the safe way.
    #[default]
    Vfio,
    /// vfio-pci in a VFIO no-IOMMU group (`enable_unsafe_noiommu_mode` of
    /// the `vfio` module, a kernel built with `CONFIG_VFIO_NOIOMMU`): no
    /// IOMMU, physical addresses, the kernel is tainted. Node
    /// `/dev/vfio/noiommu-<N>`.
    VfioNoIommu,
    /// `uio_pci_generic`: no IOMMU group needed, BARs through sysfs
    /// `resource<N>`, physical addresses. Node `/dev/uio<N>`.
    Uio,
}

impl BindMode {
    /// The kernel driver of this way in: `vfio-pci` or `uio_pci_generic`.
    pub fn driver(self) -> &'static str {
        match self {
            BindMode::Vfio | BindMode::VfioNoIommu => VFIO_PCI,
            BindMode::Uio => UIO_PCI_GENERIC,
        }
    }

    /// How a port is bound this way, in words: `to vfio-pci behind an
    /// IOMMU`, `to vfio-pci in VFIO no-IOMMU mode`, `to uio_pci_generic`.
    pub(crate) fn how(self) -> &'static str {
        match self {
            BindMode::Vfio => "to vfio-pci behind an IOMMU",
            BindMode::VfioNoIommu => "to vfio-pci in VFIO no-IOMMU mode",
            BindMode::Uio => "to uio_pci_generic",
        }
    }

    /// `true` for the no-IOMMU routes: the NIC is given physical addresses
    /// and can reach all of RAM; the port is opened only with `--no-iommu`
    /// (`DmaAddressing::UnsafeNoIommuPhysical`).
    pub fn is_physical(self) -> bool {
        !matches!(self, BindMode::Vfio)
    }

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

impl fmt::Display for BindMode {
    /// `vfio (iommu)`, `vfio (no-iommu)` or `uio (no-iommu)`, as
    /// `pollnic status` shows them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BindMode::Vfio => "vfio (iommu)",
            BindMode::VfioNoIommu => "vfio (no-iommu)",
            BindMode::Uio => "uio (no-iommu)",
        })
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
