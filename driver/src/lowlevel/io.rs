//! What a [`crate::Device`] needs from whatever sits under it: a register
//! space ([`DeviceBar`]), a DMA mapper that hands out IOVAs
//! ([`pollnic_rings::DmaMapper`]), the page size of DMA memory, and a way to
//! stop bus mastering. VFIO (`sys::vfio`) provides them for a real NIC; the
//! software models (the `pollnic-model` package) provide them in host tests. The
//! driver runs the same code over both: bring-up, rings, tails, shutdown.
//!
//! The hot path stays free of dynamic dispatch: a tail write goes through a
//! [`TailDoorbell`], which for a mapped BAR is one volatile store behind a
//! well-predicted branch, not a virtual call.

use crate::msix::MsixError;
pub use crate::sys::irq::IrqEvent;
use crate::sys::mmio::Bar;
pub use crate::sys::mmio::Regs;
use pollnic_rings::{DmaMapper, Doorbell, PageSize};
use std::sync::Arc;

/// A device's register space (BAR0): 32-bit register reads and writes by
/// byte offset, from any thread.
pub trait DeviceBar: Send + Sync {
    /// The registers, for the family code (bring-up, RSS, stats).
    fn regs(&self) -> &dyn Regs;
    /// The tail register at byte offset `reg` as a doorbell for a ring.
    fn doorbell(self: Arc<Self>, reg: u32) -> TailDoorbell;
    /// The region's size in bytes (the BAR's size, as the kernel reports
    /// it). A structure a device places in the BAR (a virtio capability) is
    /// checked against it before any access is made.
    fn size(&self) -> u64;
}

impl DeviceBar for Bar {
    fn regs(&self) -> &dyn Regs {
        self
    }
    fn size(&self) -> u64 {
        Bar::size(self) as u64 // the inherent method: the mapping length
    }
    fn doorbell(self: Arc<Self>, reg: u32) -> TailDoorbell {
        TailDoorbell(Tail::Mmio { bar: self, reg })
    }
}

/// The tail register (RDT/TDT) of one ring: one volatile store for a BAR
/// VFIO mapped, a [`Regs::write32`] for any other register space
/// ([`TailDoorbell::new`]).
pub struct TailDoorbell(Tail);

enum Tail {
    /// In a memory-mapped BAR (the library's own): one volatile store.
    Mmio { bar: Arc<Bar>, reg: u32 },
    /// In any other register space (the software device models).
    Other { bar: Arc<dyn DeviceBar>, reg: u32 },
}

impl TailDoorbell {
    /// The tail register at byte offset `reg` of `bar`, written with
    /// [`Regs::write32`] (what a [`DeviceBar`] other than VFIO's, e.g. a
    /// software model's, returns from [`DeviceBar::doorbell`]).
    pub fn new(bar: Arc<dyn DeviceBar>, reg: u32) -> TailDoorbell {
        TailDoorbell(Tail::Other { bar, reg })
    }
}

impl Doorbell for TailDoorbell {
    #[inline]
    fn ring(&mut self, tail: u16) {
        match &self.0 {
            Tail::Mmio { bar, reg } => bar.write32(*reg, tail as u32),
            Tail::Other { bar, reg } => bar.regs().write32(*reg, tail as u32),
        }
    }
}

/// Everything under a device: registers, DMA mapping, bus mastering.
pub trait DeviceIo: Send + Sync {
    /// BAR0.
    fn bar0(&self) -> Arc<dyn DeviceBar>;
    /// The mapper that puts DMA memory into the device's IO address space.
    fn dma(&self) -> Arc<dyn DmaMapper>;
    /// Page size for DMA memory: 2 MiB hugepages for a real device;
    /// 4 KiB pages for a software model, which needs no physical contiguity.
    fn page_size(&self) -> PageSize;
    /// Stop PCI bus mastering: after this the device can no longer DMA.
    fn disable_bus_master(&self);
    /// Call `on_request`, from a thread of its own, each time the kernel asks
    /// for the device back (VFIO's device-release request: an unbind from
    /// vfio-pci or a remove; `docs/design/device-release.md`). Returns
    /// whether requests will be delivered; the default, for a device that
    /// has no such channel, delivers none.
    fn watch_release(&self, on_request: Box<dyn Fn() + Send + Sync>) -> bool {
        let _ = on_request;
        false
    }

    /// Memory BAR `index` (0..=5) as a register space, if mapped. The
    /// default offers BAR 0 only ([`DeviceIo::bar0`]).
    fn bar(&self, index: u8) -> Option<Arc<dyn DeviceBar>> {
        (index == 0).then(|| self.bar0())
    }

    /// Read `buf.len()` bytes of the device's PCI configuration space at
    /// byte offset `off` (the capability list a virtio device's registers
    /// are found through); false when it cannot be read. The default, for a
    /// device without one (the software models): false.
    fn config_read(&self, off: u32, buf: &mut [u8]) -> bool {
        let _ = (off, buf);
        false
    }

    /// The device's MSI-X vectors, if it can deliver them (VFIO, the
    /// software models); `None` (the default): busy-poll only.
    fn interrupts(&self) -> Option<&dyn Interrupts> {
        None
    }
}

/// MSI-X delivery to eventfds: what [`crate::RxMode::Interrupt`] and
/// [`crate::RxMode::Adaptive`] need under a device.
pub trait Interrupts: Send + Sync {
    /// Whether [`Interrupts::enable_msix`] can succeed at all (false for a
    /// port on `uio_pci_generic`, which delivers INTx only). Default: true.
    fn msix_capable(&self) -> bool {
        true
    }
    /// Enable MSI-X with `vectors` vectors; vector `v` signals the `v`th
    /// event returned.
    ///
    /// # Errors
    /// [`MsixError`]: too few vectors, no eventfd, the kernel refused.
    fn enable_msix(&self, vectors: u16) -> Result<Vec<Arc<IrqEvent>>, MsixError>;
    /// Disable MSI-X: no vector signals afterwards.
    fn disable_msix(&self);
}
