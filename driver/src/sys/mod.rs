//! Everything in the library that needs `unsafe`, and nothing else: the
//! crate root denies `unsafe_code` and allows it only here, so the compiler
//! checks the fence. Every block carries a `// SAFETY:` comment (clippy's
//! `undocumented_unsafe_blocks` is denied).
//!
//! - [`mmio`]: BAR0 mapped from the VFIO device fd, volatile 32-bit access;
//! - [`vfio`]: the container, group and device fds, DMA mapping
//!   (`VFIO_IOMMU_MAP_DMA`), PCI command register;
//! - [`vfio_noiommu`]: a VFIO no-IOMMU group (`VFIO_NOIOMMU_IOMMU`), its
//!   few ioctls made directly, DMA with physical addresses;
//! - [`irq`]: the eventfd of one MSI-X vector, and `poll(2)` on it;
//! - [`dmamap`]: the recording mapper that forwards a DMA map call;
//! - [`physmem`]: physical addresses from `/proc/self/pagemap` for a
//!   port without an IOMMU, and `mlock`;
//! - [`uio`]: a port on `uio_pci_generic`: BARs mapped from sysfs
//!   `resource<N>`, configuration space through sysfs `config`;
//! - [`clock`], `clock_gettime(CLOCK_MONOTONIC)`;
//! - [`pcilink`]: the read-only BAR0 peek `pollnic status` uses for the link
//!   of a port no driver holds;
#![allow(unsafe_code)]

pub mod clock;
pub(crate) mod dmamap;
pub(crate) mod irq;
pub(crate) mod mmio;
pub(crate) mod pcilink;
pub(crate) mod physmem;
pub(crate) mod uio;
pub(crate) mod vfio;
pub(crate) mod vfio_noiommu;
