//! A descriptor ring in DMA memory, accessed only with volatile loads and
//! stores, and the doorbell (tail register) that hands descriptors to the device.
//!
//! Ordering: software reads a write-back's `hi` word (with DD) first, and only
//! then the `lo` word, as the device may still be writing a descriptor whose
//! DD it has not set (DPDK's igb PMD does the same with `rte_smp_rmb`). The
//! compiler never reorders two volatile loads; on x86-64 the CPU does not
//! reorder loads either (TSO), so no fence instruction is needed there, and
//! none is emitted (a fence would also make the compiler reload every value
//! of the burst loop from memory); other architectures get an acquire fence.
//! Software writes descriptors with volatile stores and the doorbell's MMIO
//! store comes after them in program order, behind a release fence.

use crate::dma::{DmaError, DmaMapper, DmaRegion, PageSize};
use pollnic_hw::desc::{RawDesc, DESC_SIZE};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

/// The tail register of one ring (RDT or TDT): writing it gives the device
/// every descriptor before the new tail.
pub trait Doorbell {
    /// Write `tail` (a descriptor index `< ring size`) to the tail register.
    fn ring(&mut self, tail: u16);
}

/// `count` descriptors of 16 bytes in their own DMA region. `count` is a
/// power of two, so an index wraps with a mask and every access is in bounds
/// by construction (no bounds check on the hot path).
#[derive(Debug)]
pub struct DescRing {
    region: DmaRegion,
    base: NonNull<RawDesc>,
    count: u16,
    mask: u16,
}

// SAFETY: `base` points into `region`, which this ring owns and which lives
// as long as it; the memory is only touched with volatile accesses through
// `&self`/`&mut self` methods, so moving or sharing the ring across threads
// is as safe as moving or sharing the region.
unsafe impl Send for DescRing {}
// SAFETY: as above.
unsafe impl Sync for DescRing {}

impl DescRing {
    /// Allocate a zeroed ring of `count` descriptors.
    ///
    /// # Errors
    /// Those of [`DmaRegion::new`]; [`DmaError::NotContiguous`] when the
    /// mapper cannot give the ring one contiguous device range.
    ///
    /// # Panics
    /// If `count` is not a power of two of at least 8 (the driver checks ring
    /// sizes before it gets here, see `DeviceConfig::validate`).
    pub fn new(count: u16, page: PageSize, mapper: Arc<dyn DmaMapper>) -> Result<Self, DmaError> {
        assert!(
            count >= 8 && count.is_power_of_two(),
            "descriptor ring size {count} is not a power of two >= 8"
        );
        let region = DmaRegion::new(count as usize * DESC_SIZE, page, mapper)?;
        region.check_contiguous(count as usize * DESC_SIZE)?;
        let base = NonNull::new(region.va().cast()).expect("mmap never returns null");
        Ok(DescRing {
            region,
            base,
            count,
            mask: count - 1,
        })
    }

    /// Number of descriptors.
    #[inline]
    pub fn count(&self) -> u16 {
        self.count
    }
    /// `count - 1`: `(i + 1) & mask()` is the index after `i`.
    #[inline]
    pub fn mask(&self) -> u16 {
        self.mask
    }
    /// IOVA of descriptor 0 (what RDBAL/RDBAH or TDBAL/TDBAH get).
    pub fn iova(&self) -> u64 {
        self.region.iova()
    }
    /// The DMA region the descriptors live in.
    pub fn region(&self) -> &DmaRegion {
        &self.region
    }
    /// Ring length in bytes (what RDLEN/TDLEN get).
    pub fn len_bytes(&self) -> u32 {
        self.count as u32 * DESC_SIZE as u32
    }
    /// Pointer to descriptor 0 in this process, for the software device model.
    pub fn as_ptr(&self) -> *mut RawDesc {
        self.base.as_ptr()
    }

    /// A copyable accessor for a burst loop: base and mask in registers.
    /// Its stores go to DMA memory through a raw pointer (never through a
    /// Rust reference), so a shared borrow suffices; the rings only write
    /// descriptors software owns.
    #[inline]
    pub(crate) fn view(&self) -> DescView<'_> {
        DescView {
            base: self.base,
            mask: self.mask,
            _ring: PhantomData,
        }
    }

    /// Volatile load of descriptor `i`'s `hi` word (where DD lives).
    #[inline]
    pub fn read_hi(&self, i: u16) -> u64 {
        DescView::of(self).read_hi(i)
    }

    /// Volatile load of descriptor `i`'s `lo` word, ordered after an earlier
    /// [`DescRing::read_hi`] that saw DD.
    #[inline]
    pub fn read_lo_after_dd(&self, i: u16) -> u64 {
        DescView::of(self).read_lo_after_dd(i)
    }

    /// Volatile load of a whole descriptor that software owns (written by
    /// software and not yet handed to the device by a tail write).
    #[inline]
    pub fn read_sw(&self, i: u16) -> RawDesc {
        DescView::of(self).read_sw(i)
    }

    /// Volatile store of a whole descriptor, `lo` first.
    #[inline]
    pub fn write(&mut self, i: u16, d: RawDesc) {
        self.view().write(i, d)
    }

    /// Order every descriptor store before the doorbell's MMIO store.
    #[inline]
    pub fn publish(&self) {
        fence(Ordering::Release);
    }
}

/// Access to the descriptors of one [`DescRing`] for the length of a burst,
/// by index modulo the ring size (every index is in bounds). Copyable so the
/// compiler keeps base and mask in registers.
#[derive(Clone, Copy)]
pub struct DescView<'a> {
    base: NonNull<RawDesc>,
    mask: u16,
    _ring: PhantomData<&'a DescRing>,
}

impl DescView<'_> {
    /// Ring size − 1.
    #[inline]
    pub fn mask(self) -> u16 {
        self.mask
    }

    #[inline]
    fn of(ring: &DescRing) -> DescView<'_> {
        DescView {
            base: ring.base,
            mask: ring.mask,
            _ring: PhantomData,
        }
    }

    /// Descriptor `i mod count`.
    #[inline]
    fn slot(self, i: u16) -> *mut RawDesc {
        // In bounds: `i & mask < count` and the region holds count descriptors.
        self.base.as_ptr().wrapping_add((i & self.mask) as usize)
    }

    /// Pointer to descriptor `i mod count`, for the vector steps
    /// (`crate::simd`), which load or store four in a row from it.
    #[inline]
    pub(crate) fn slot_ptr(self, i: u16) -> *mut RawDesc {
        self.slot(i)
    }

    /// Pointer to descriptor `i`, for a burst loop whose index is always
    /// masked (so masking again would be wasted work).
    ///
    /// # Safety
    /// `i <= mask`.
    #[inline(always)]
    pub(crate) unsafe fn slot_at(self, i: usize) -> *mut RawDesc {
        debug_assert!(i <= self.mask as usize);
        // SAFETY: `i <= mask < count` (the caller's promise): in the ring.
        unsafe { self.base.as_ptr().add(i) }
    }

    /// [`DescView::read_lo_after_dd`] at the slot [`DescView::slot_at`]
    /// gave.
    ///
    /// # Safety
    /// `p` is a slot of this ring (from `slot_at` or `slot_ptr`).
    #[inline(always)]
    pub(crate) unsafe fn read_lo_after_dd_slot(self, p: *mut RawDesc) -> u64 {
        #[cfg(not(target_arch = "x86_64"))]
        fence(Ordering::Acquire);
        // SAFETY: `p` is in the ring (the caller's promise); volatile, as
        // every descriptor access.
        unsafe { std::ptr::addr_of!((*p).lo).read_volatile() }
    }

    /// [`DescView::read_hi`] at the slot [`DescView::slot_at`] gave.
    ///
    /// # Safety
    /// `p` is a slot of this ring (from `slot_at` or `slot_ptr`).
    #[inline(always)]
    pub(crate) unsafe fn read_hi_slot(self, p: *mut RawDesc) -> u64 {
        // SAFETY: `p` is in the ring (the caller's promise); volatile, as
        // every descriptor access.
        unsafe { std::ptr::addr_of!((*p).hi).read_volatile() }
    }

    /// [`DescView::write`] at the slot [`DescView::slot_at`] gave.
    ///
    /// # Safety
    /// `p` is a slot of this ring (from `slot_at` or `slot_ptr`).
    #[inline(always)]
    pub(crate) unsafe fn write_slot(self, p: *mut RawDesc, d: RawDesc) {
        // SAFETY: `p` is in the ring (the caller's promise); volatile, as
        // every descriptor access.
        unsafe {
            std::ptr::addr_of_mut!((*p).lo).write_volatile(d.lo);
            std::ptr::addr_of_mut!((*p).hi).write_volatile(d.hi);
        }
    }

    /// Volatile load of descriptor `i`'s `hi` word (where DD lives).
    #[inline]
    pub fn read_hi(self, i: u16) -> u64 {
        let p = self.slot(i);
        // SAFETY: `p` is in bounds (masked index) and 16-byte aligned (the
        // region is page aligned) in a region the borrowed ring keeps alive;
        // the device may write this memory concurrently, so only a volatile
        // load, never a reference, touches it.
        unsafe { std::ptr::addr_of!((*p).hi).read_volatile() }
    }

    /// Volatile load of descriptor `i`'s `lo` word, ordered after an earlier
    /// [`DescView::read_hi`] that saw DD.
    #[inline]
    pub fn read_lo_after_dd(self, i: u16) -> u64 {
        #[cfg(not(target_arch = "x86_64"))]
        fence(Ordering::Acquire);
        let p = self.slot(i);
        // SAFETY: as in `read_hi`.
        unsafe { std::ptr::addr_of!((*p).lo).read_volatile() }
    }

    /// Volatile load of the RSS hash of descriptor `i`'s write-back (bits
    /// 63:32 of `lo`, 82576 datasheet §7.1.5), ordered after an earlier
    /// load of its `hi` that saw DD.
    #[inline]
    pub(crate) fn read_rss_after_dd(self, i: u16) -> u32 {
        #[cfg(not(target_arch = "x86_64"))]
        fence(Ordering::Acquire);
        let p = self.slot(i);
        // SAFETY: as in `read_hi`; bytes 4..8 of the descriptor are the
        // upper half of `lo` (little endian), 4-byte aligned.
        unsafe {
            std::ptr::addr_of!((*p).lo)
                .cast::<u32>()
                .add(1)
                .read_volatile()
        }
    }

    /// Volatile load of a whole descriptor that software owns.
    #[inline]
    pub fn read_sw(self, i: u16) -> RawDesc {
        let p = self.slot(i);
        // SAFETY: as in `read_hi`.
        unsafe { p.read_volatile() }
    }

    /// Volatile store of descriptor `i`'s `hi` word alone (software owns it).
    #[inline]
    pub fn write_hi(self, i: u16, hi: u64) {
        let p = self.slot(i);
        // SAFETY: as in `write`.
        unsafe { std::ptr::addr_of_mut!((*p).hi).write_volatile(hi) }
    }

    /// Volatile store of a whole descriptor, `lo` first.
    #[inline]
    pub fn write(self, i: u16, d: RawDesc) {
        let p = self.slot(i);
        // SAFETY: as in `read_hi`; software owns descriptor `i` at this point
        // (the device is done with it or has not been given it); the memory is
        // never behind a Rust reference, so the store aliases nothing.
        unsafe {
            std::ptr::addr_of_mut!((*p).lo).write_volatile(d.lo);
            std::ptr::addr_of_mut!((*p).hi).write_volatile(d.hi);
        }
    }
}
