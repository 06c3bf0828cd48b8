//! A descriptor ring in DMA memory, accessed only with volatile loads and
//! stores, and the doorbell (tail register) that hands descriptors to the device.
//!
//! Ordering: software reads a write-back's `hi` word (with DD) first, and only
//! after an acquire fence the `lo` word, as the device may still be writing a
//! descriptor whose DD it has not set (DPDK igb PMD does the same). Software
//! writes descriptors with volatile stores and the doorbell's MMIO store comes
//! after them in program order, behind a release fence.

use crate::dma::{DmaError, DmaMapper, DmaRegion, PageSize};
use pollnic_hw::desc::{RawDesc, DESC_SIZE};
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

/// The tail register of one ring (RDT or TDT): writing it gives the device
/// every descriptor before the new tail.
pub trait Doorbell {
    /// Write `tail` (a descriptor index `< ring size`) to the tail register.
    fn ring(&mut self, tail: u16);
}

/// `count` descriptors of 16 bytes in their own DMA region.
#[derive(Debug)]
pub struct DescRing {
    region: DmaRegion,
    count: u16,
}

impl DescRing {
    /// Allocate a zeroed ring of `count` descriptors.
    ///
    /// # Errors
    /// Those of [`DmaRegion::new`].
    pub fn new(count: u16, page: PageSize, mapper: Arc<dyn DmaMapper>) -> Result<Self, DmaError> {
        let region = DmaRegion::new(count as usize * DESC_SIZE, page, mapper)?;
        Ok(DescRing { region, count })
    }

    /// Number of descriptors.
    #[inline]
    pub fn count(&self) -> u16 {
        self.count
    }
    /// IOVA of descriptor 0 (what RDBAL/RDBAH or TDBAL/TDBAH get).
    pub fn iova(&self) -> u64 {
        self.region.iova()
    }
    /// Ring length in bytes (what RDLEN/TDLEN get).
    pub fn len_bytes(&self) -> u32 {
        self.count as u32 * DESC_SIZE as u32
    }
    /// Pointer to descriptor 0 in this process, for the software device model.
    pub fn as_ptr(&self) -> *mut RawDesc {
        self.region.va().cast()
    }

    #[inline]
    fn slot(&self, i: u16) -> *mut RawDesc {
        assert!(i < self.count, "descriptor index out of range");
        // In bounds: i < count and the region holds count descriptors.
        self.as_ptr().wrapping_add(i as usize)
    }

    /// Volatile load of descriptor `i`'s `hi` word (where DD lives).
    #[inline]
    pub fn read_hi(&self, i: u16) -> u64 {
        let p = self.slot(i);
        // SAFETY: `p` is in bounds and 16-byte aligned (region is page
        // aligned); the device may write this memory concurrently, so only a
        // volatile load, never a reference, touches it.
        unsafe { std::ptr::addr_of!((*p).hi).read_volatile() }
    }

    /// Volatile load of descriptor `i`'s `lo` word, ordered after an earlier
    /// [`DescRing::read_hi`] that saw DD.
    #[inline]
    pub fn read_lo_after_dd(&self, i: u16) -> u64 {
        fence(Ordering::Acquire);
        let p = self.slot(i);
        // SAFETY: as in `read_hi`.
        unsafe { std::ptr::addr_of!((*p).lo).read_volatile() }
    }

    /// Volatile store of a whole descriptor, `lo` first.
    #[inline]
    pub fn write(&mut self, i: u16, d: RawDesc) {
        let p = self.slot(i);
        // SAFETY: as in `read_hi`; software owns descriptor `i` at this point
        // (the device is done with it or has not been given it).
        unsafe {
            std::ptr::addr_of_mut!((*p).lo).write_volatile(d.lo);
            std::ptr::addr_of_mut!((*p).hi).write_volatile(d.hi);
        }
    }

    /// Order every descriptor store before the doorbell's MMIO store.
    #[inline]
    pub fn publish(&self) {
        fence(Ordering::Release);
    }
}
