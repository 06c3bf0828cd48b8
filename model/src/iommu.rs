//! The software models' IOMMU: the DMA mapper `Device` maps its memory
//! through (it hands out IOVAs above 4 GiB, unrelated to virtual addresses,
//! as VFIO does), and the translation the models' DMA goes through. A DMA
//! outside every mapping, or across a 2 MiB IOMMU page, is an IOMMU fault,
//! reported as a violation, never a memory access.
//!
//! The only `unsafe` of the models is here: the translation contract
//! ([`DmaSpace`]), turning a mapped ring address into a [`DeviceRing`], and
//! the [`DmaMapper`] contract. What a model does when memory is mapped or
//! unmapped (its log, detaching rings) is its own safe code, behind
//! [`ModelDmaHost`].

use crate::ring::{DeviceRing, DmaSpace};
use pollnic_hw::desc::{RawDesc, DESC_SIZE};
use pollnic_rings::dma::offset_in;
use pollnic_rings::{DmaError, DmaMapper};

/// First IOVA handed out, as `VfioDma` does.
const IOVA_BASE: u64 = 1 << 32;

/// One `DmaMapper::map` call.
#[derive(Debug)]
pub(crate) struct Mapping {
    pub iova: u64,
    va: *mut u8,
    pub len: usize,
}

// SAFETY: `va` is only dereferenced through `Mappings::translate` while the
// mapping is registered, i.e. while the `DmaMapper::map` contract keeps the
// memory mapped; the pointer itself is plain data that any thread may hold.
unsafe impl Send for Mapping {}

/// Every live mapping, ordered by IOVA.
#[derive(Debug, Default)]
pub(crate) struct Mappings {
    pub list: Vec<Mapping>,
    next_iova: u64,
}

impl Mappings {
    /// Record a mapping of `len` bytes at `va`; returns its IOVA (2 MiB
    /// aligned, as `VfioDma` hands them out).
    pub fn add(&mut self, va: *mut u8, len: usize) -> u64 {
        if self.next_iova == 0 {
            self.next_iova = IOVA_BASE;
        }
        let iova = self.next_iova;
        self.next_iova += (len as u64).div_ceil(2 << 20) * (2 << 20);
        self.list.push(Mapping { iova, va, len });
        iova
    }

    /// Forget the mapping at `iova`.
    pub fn remove(&mut self, iova: u64) {
        self.list.retain(|m| m.iova != iova);
    }

    /// The device side of a ring of `count` descriptors at `iova`, when the
    /// whole ring is mapped.
    pub fn ring(&self, iova: u64, count: u16) -> Option<DeviceRing> {
        let p = self.translate(iova, count as usize * DESC_SIZE)?;
        if p as usize % std::mem::align_of::<RawDesc>() != 0 {
            return None;
        }
        // SAFETY: the range is inside a live mapping (`translate`), which the
        // `DmaMapper::map` contract keeps valid until `unmap`; before a
        // mapping is removed, `ModelDma::unmap` detaches every ring inside it
        // (under the same lock), so the ring is never used past that point.
        Some(unsafe { DeviceRing::new(p.cast(), count) })
    }
}

/// A device's DMA at byte granularity, through the IOMMU (the software
/// virtio-net device's rings and buffers). Each access is translated
/// whole: an address outside every mapping, or a range across a 2 MiB IOMMU
/// page, is a fault (`None` or `false`), never a memory access. The driver
/// may write the same memory at the same time, as a CPU races a device's
/// DMA, so bytes are copied with volatile accesses and the ring indices
/// with atomics.
impl Mappings {
    /// Read `buf.len()` bytes at `iova`; false (nothing read) on a fault.
    pub fn dma_read(&self, iova: u64, buf: &mut [u8]) -> bool {
        let Some(p) = self.translate(iova, buf.len()) else {
            return false;
        };
        for (i, b) in buf.iter_mut().enumerate() {
            // SAFETY: `p..p + buf.len()` lies inside a live mapping
            // (`translate`), which the `DmaMapper::map` contract keeps valid
            // until `unmap`, which takes the model's lock that the caller
            // holds; a volatile byte read of memory another thread may
            // write is what a device's DMA read is.
            *b = unsafe { p.add(i).read_volatile() };
        }
        true
    }

    /// Write `data` at `iova`; false (nothing written) on a fault.
    pub fn dma_write(&self, iova: u64, data: &[u8]) -> bool {
        let Some(p) = self.translate(iova, data.len()) else {
            return false;
        };
        for (i, &b) in data.iter().enumerate() {
            // SAFETY: as in `dma_read`: inside a live mapping, under the
            // model's lock; memory the driver handed to the device.
            unsafe { p.add(i).write_volatile(b) };
        }
        true
    }

    /// A little-endian 16-bit ring index at `iova`, loaded with Acquire
    /// (the driver publishes `avail.idx` with Release); `None` on a fault or
    /// a misaligned address.
    pub fn load_u16(&self, iova: u64) -> Option<u16> {
        let p = self.translate(iova, 2)?;
        if p as usize % 2 != 0 {
            return None;
        }
        // SAFETY: two bytes inside a live mapping (as in `dma_read`),
        // aligned for `AtomicU16` (checked above); the driver accesses it
        // atomically too.
        let a = unsafe { std::sync::atomic::AtomicU16::from_ptr(p.cast()) };
        Some(u16::from_le(a.load(std::sync::atomic::Ordering::Acquire)))
    }

    /// Store a little-endian 16-bit ring index at `iova` with Release
    /// (after the entries it publishes); false on a fault or misalignment.
    pub fn store_u16(&self, iova: u64, v: u16) -> bool {
        let Some(p) = self.translate(iova, 2).filter(|p| *p as usize % 2 == 0) else {
            return false;
        };
        // SAFETY: as in `load_u16`.
        let a = unsafe { std::sync::atomic::AtomicU16::from_ptr(p.cast()) };
        a.store(v.to_le(), std::sync::atomic::Ordering::Release);
        true
    }
}

/// The models' IOMMU page: each is translated on its own, so one DMA must not
/// cross from one into the next (QEMU's igb drops a TX frame whose buffer it
/// cannot map in one piece; the models call it a fault).
const IOMMU_PAGE: u64 = 2 << 20;

// SAFETY: `translate` returns a pointer only inside a registered mapping,
// whose memory the `DmaMapper::map` contract keeps valid until `unmap`, which
// needs the model's lock, held by whoever borrows `self`.
unsafe impl DmaSpace for Mappings {
    fn translate(&self, iova: u64, len: usize) -> Option<*mut u8> {
        // The last byte, checked: a range that would wrap past `u64::MAX`
        // faults (in release builds too).
        if len > 0 {
            let last = iova.checked_add(len as u64 - 1)?;
            if iova / IOMMU_PAGE != last / IOMMU_PAGE {
                return None;
            }
        }
        self.list.iter().find_map(|m| {
            offset_in(m.iova, m.len as u64, iova, len as u64)
                .map(|off| m.va.wrapping_add(off as usize))
        })
    }
}

/// What a model does when `Device` maps or unmaps memory: record the
/// mapping in its [`Mappings`] and hand back the IOVA; before a mapping goes,
/// check the device can no longer DMA into it and detach any ring inside it.
pub(crate) trait ModelDmaHost: Send + Sync + 'static {
    /// `va..va+len` is now mapped (the [`DmaMapper::map`] contract keeps it
    /// so until [`ModelDmaHost::unmap_region`]): add it, return its IOVA.
    fn map_region(&self, va: *mut u8, len: usize) -> u64;
    /// The mapping at `iova` is about to be removed and its memory freed.
    fn unmap_region(&self, iova: u64, len: usize);
}

/// The mapper `Device` allocates its rings and mempools through.
pub(crate) struct ModelDma<H: ModelDmaHost>(pub H);

impl<H: ModelDmaHost> std::fmt::Debug for ModelDma<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ModelDma")
    }
}

// SAFETY: the model's IOMMU is `Mappings`: `map_region` records `va..va +
// len` at a fresh IOVA above every live one (`Mappings::add`, 2 MiB steps),
// which the models translate to exactly that memory (`DmaSpace for
// Mappings`); `unmap_region` forgets the mapping (and detaches any ring in
// it) under the model's lock before it returns. One `ModelDma` (non-zero
// sized, behind one `Arc`) per model, so the default `address_space` is
// its own.
unsafe impl<H: ModelDmaHost> DmaMapper for ModelDma<H> {
    unsafe fn map(&self, va: *mut u8, len: usize) -> Result<u64, DmaError> {
        Ok(self.0.map_region(va, len))
    }

    fn unmap(&self, iova: u64, len: usize) {
        self.0.unmap_region(iova, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A range that wraps past `u64::MAX` is an IOMMU fault, not a hit in
    /// the mapping at the bottom (an unchecked `iova + len` wraps to a small
    /// number in release builds and passed the containment test).
    #[test]
    fn a_range_wrapping_past_the_top_faults() {
        let mut mem = vec![0u8; 4096];
        let mut maps = Mappings::default();
        let iova = maps.add(mem.as_mut_ptr(), mem.len());
        assert!(maps.translate(iova, 4096).is_some());
        assert!(maps.translate(iova + 4095, 1).is_some());
        assert!(maps.translate(iova, 4097).is_none());
        // A length that ends past 2^64 and wraps to just inside the
        // mapping, its last byte in the first byte's IOMMU page.
        let len = usize::MAX - 49;
        assert_eq!((iova + 100).wrapping_add(len as u64), iova + 50);
        assert!(maps.translate(iova + 100, len).is_none());
        assert!(maps.translate(u64::MAX, 2).is_none());
    }
}
