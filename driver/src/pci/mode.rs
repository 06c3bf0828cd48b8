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

/// Name of the VFIO PCI driver, as in `/sys/bus/pci/drivers/vfio-pci`.
pub const VFIO_PCI: &str = "vfio-pci";

/// Name of the kernel's generic userspace I/O driver for PCI, as in
/// `/sys/bus/pci/drivers/uio_pci_generic` (`drivers/uio/uio_pci_generic.c`).
pub const UIO_PCI_GENERIC: &str = "uio_pci_generic";

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
