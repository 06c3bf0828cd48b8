//! DMA memory: page-locked regions from 2 MiB hugepages, each mapped once into
//! the IOMMU as a whole (type1 allows ~65k mappings, so never map single
//! buffers), with their IO virtual address (IOVA).
//!
//! Sources: Linux `Documentation/admin-guide/mm/hugetlbpage.rst` (MAP_HUGETLB,
//! `nr_hugepages`), `Documentation/driver-api/vfio.rst` (VFIO_IOMMU_MAP_DMA).

use std::fmt;
use std::sync::Arc;
use vm_memory::mmap::MmapRegionBuilder;
use vm_memory::MmapRegion;

/// Size of one hugepage, in bytes.
pub const HUGEPAGE_SIZE: usize = 2 << 20;
/// Where the 2 MiB hugepage pool is reserved.
pub const NR_HUGEPAGES: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";
const FREE_HUGEPAGES: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages";

/// The page size backing a region, and the unit a [`crate::Mempool`] lays its
/// buffers out in: no buffer crosses a page boundary, because memory is
/// contiguous for the device only within one page (through an IOMMU each
/// page is translated on its own, and QEMU's igb drops a TX frame whose
/// buffer it cannot map in one piece, `net_tx_pkt_add_raw_fragment_pci` in
/// `hw/net/net_tx_pkt.c`; DPDK's `rte_mempool_populate_iova` keeps objects
/// off page boundaries for the same reason).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageSize {
    /// 2 MiB hugepages (`MAP_HUGETLB`): physically contiguous per page, never
    /// swapped, few IOTLB entries. What the driver uses.
    Huge2M,
    /// Ordinary 4 KiB pages, laid out as 4 KiB pages. Only for host-side tests
    /// and benches that never give the memory to a device; never chosen
    /// silently.
    Small4K,
    /// Ordinary 4 KiB pages laid out as if they were 2 MiB pages: for the
    /// software device models, whose IOMMU translates 2 MiB pages one at a
    /// time (and faults on a DMA that crosses one), so that the models see
    /// the hugepage layout the driver gives a real device. Never given to a
    /// real device.
    Emulated2M,
}

impl PageSize {
    /// The page's size in bytes: the unit buffers are kept inside.
    pub fn bytes(self) -> usize {
        match self {
            PageSize::Huge2M | PageSize::Emulated2M => HUGEPAGE_SIZE,
            PageSize::Small4K => 4096,
        }
    }
}

/// Errors from allocating or mapping DMA memory. Non-exhaustive: match with
/// a `_` arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DmaError {
    /// `mmap(MAP_HUGETLB)` failed: not enough free 2 MiB hugepages.
    #[error(
        "not enough free 2 MiB hugepages: need {needed}, {free} free. Reserve more with \
         `echo 512 | sudo tee {NR_HUGEPAGES}` (or boot with hugepages=512)"
    )]
    NoHugepages {
        /// Pages this allocation needed.
        needed: usize,
        /// Free pages the kernel reported (0 when unknown).
        free: usize,
    },
    /// Any other mmap failure.
    #[error("mmap of {len} bytes of DMA memory failed: {source}")]
    Mmap {
        /// Requested length in bytes.
        len: usize,
        /// The OS error.
        source: std::io::Error,
    },
    /// The IOMMU mapping (`VFIO_IOMMU_MAP_DMA`) was refused.
    #[error(
        "mapping {len} bytes for DMA failed ({source}): the locked-memory limit is probably too \
         low; run as root or raise it (`ulimit -l unlimited`, or `memlock` in \
         /etc/security/limits.conf)"
    )]
    Map {
        /// Bytes asked for.
        len: usize,
        /// The mapper's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A mempool buffer would not fit inside one page of the region, so the
    /// device could not reach it in one piece.
    #[error(
        "a {buf_size}-byte mempool buffer does not fit in one {page_bytes}-byte page: \
         use 2 MiB hugepages (PageSize::Huge2M) or a smaller MTU"
    )]
    BufferLargerThanPage {
        /// The buffer size in bytes (after rounding up to 128).
        buf_size: usize,
        /// The page size in bytes.
        page_bytes: usize,
    },
}

/// Something that maps process memory into a device's IO address space and
/// chooses its IOVA: the VFIO container in the driver, [`IdentityMapper`] in
/// host tests.
///
/// # Safety
/// The rings hand the IOVAs a mapper returns to the device as they are, and
/// TX sends a buffer of another pool (a port opened together with this one)
/// when [`DmaMapper::address_space`] says the two spaces are one. A device
/// given an IOVA that means other memory than the driver meant reads or
/// writes that memory. So an implementor promises:
/// - a successful [`DmaMapper::map`]`(va, len)` returns an IOVA at which the
///   device reaches exactly `va..va + len`, in order, and no other mapping of
///   the same address space overlaps `iova..iova + len` while it is live
///   (`iova + len` does not pass `u64::MAX`);
/// - [`DmaMapper::unmap`]`(iova, len)` of a live mapping removes it before it
///   returns: from then on no device behind this mapper reaches that memory;
/// - [`DmaMapper::address_space`] returns equal values for two live mappers
///   only when an IOVA of one means the same memory to every device behind
///   the other (one VFIO container, one IOMMU domain), and it does not change.
///   The default, the mapper's own address, is right for a mapper that owns
///   its translations and is not zero-sized (two zero-sized values may share
///   an address: such a mapper overrides it).
pub unsafe trait DmaMapper: Send + Sync + fmt::Debug {
    /// Map `len` bytes at `va` for device reads and writes; returns the IOVA.
    ///
    /// # Errors
    /// The mapper's own ([`DmaError::Map`] from VFIO: memlock too low, no
    /// IOVA space left).
    ///
    /// # Safety
    /// `va..va+len` must stay mapped in this process until [`DmaMapper::unmap`]
    /// is called for the returned IOVA, and from now on the device may read and
    /// write it at any time.
    unsafe fn map(&self, va: *mut u8, len: usize) -> Result<u64, DmaError>;
    /// Remove the mapping made at `iova` (called before the memory is freed).
    fn unmap(&self, iova: u64, len: usize);

    /// Which IO address space the IOVAs this mapper hands out belong to: two
    /// regions whose mappers return the same value can be used by the same
    /// device. By default each mapper is its own space (one VFIO container).
    fn address_space(&self) -> usize {
        (self as *const Self).cast::<()>() as usize
    }
}

/// A mapper for memory no real device will see: IOVA = virtual address. The
/// software device models (`pollnic_model`) use it.
#[derive(Debug, Default)]
pub struct IdentityMapper;

// SAFETY: the IOVA is the virtual address, so `iova..iova + len` is exactly
// `va..va + len` to the only "devices" that use it (the software models,
// which translate IOVA = VA within the regions registered with them), and
// two live mappings never overlap because two live allocations do not. There
// is nothing to remove on unmap. Every identity mapper shares one space, 0,
// which no mapper's address (the default) can be.
unsafe impl DmaMapper for IdentityMapper {
    unsafe fn map(&self, va: *mut u8, _len: usize) -> Result<u64, DmaError> {
        Ok(va as u64)
    }
    fn unmap(&self, _iova: u64, _len: usize) {}
    /// Every identity mapping shares the process's address space.
    fn address_space(&self) -> usize {
        0
    }
}

/// A page-locked, zero-filled region of DMA memory mapped into a device's IO
/// address space. Dropping it removes the IOMMU mapping first, then unmaps the
/// memory; callers must have stopped the device's DMA before (the driver's
/// shutdown order guarantees it).
pub struct DmaRegion {
    mem: MmapRegion,
    iova: u64,
    mapper: Arc<dyn DmaMapper>,
}

impl fmt::Debug for DmaRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DmaRegion")
            .field("va", &self.mem.as_ptr())
            .field("iova", &format_args!("{:#x}", self.iova))
            .field("len", &self.mem.size())
            .finish()
    }
}

impl DmaRegion {
    /// Allocate at least `len` bytes (rounded up to whole pages of `page`) and
    /// map them with `mapper`.
    ///
    /// # Errors
    /// [`DmaError::NoHugepages`] when the hugepage pool cannot supply the pages
    /// (the message says how to reserve them); [`DmaError::Mmap`] for other
    /// mmap failures; whatever the mapper returns (e.g. memlock too low).
    pub fn new(len: usize, page: PageSize, mapper: Arc<dyn DmaMapper>) -> Result<Self, DmaError> {
        let len = len.max(1).div_ceil(page.bytes()) * page.bytes();
        let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE;
        if page == PageSize::Huge2M {
            flags |= libc::MAP_HUGETLB;
        }
        let mem = MmapRegionBuilder::new(len)
            .with_mmap_prot(libc::PROT_READ | libc::PROT_WRITE)
            .with_mmap_flags(flags)
            .with_hugetlbfs(page == PageSize::Huge2M)
            .build()
            .map_err(|e| match e {
                vm_memory::mmap::MmapRegionError::Mmap(source) => {
                    if page == PageSize::Huge2M
                        && matches!(
                            source.raw_os_error(),
                            Some(libc::ENOMEM) | Some(libc::EINVAL)
                        )
                    {
                        DmaError::NoHugepages {
                            needed: len / HUGEPAGE_SIZE,
                            free: free_hugepages(),
                        }
                    } else {
                        DmaError::Mmap { len, source }
                    }
                }
                other => DmaError::Mmap {
                    len,
                    source: std::io::Error::other(other.to_string()),
                },
            })?;
        // SAFETY: `mem` is a private anonymous mapping owned by the returned
        // DmaRegion; its Drop calls `unmap` before `mem` (declared first, but
        // dropped after Drop::drop runs) releases the pages, so the range stays
        // mapped for as long as the IOMMU mapping exists.
        let iova = unsafe { mapper.map(mem.as_ptr(), len)? };
        Ok(DmaRegion { mem, iova, mapper })
    }

    /// Start of the region in this process.
    pub fn va(&self) -> *mut u8 {
        self.mem.as_ptr()
    }
    /// Start of the region in the device's IO address space.
    pub fn iova(&self) -> u64 {
        self.iova
    }
    /// Whether a device that can reach `other` can reach this region too
    /// (same IO address space: same VFIO container, or both identity-mapped).
    pub fn same_address_space(&self, other: &DmaRegion) -> bool {
        self.mapper.address_space() == other.mapper.address_space()
    }
    /// Length in bytes (a whole number of pages).
    pub fn len(&self) -> usize {
        self.mem.size()
    }
    /// Always false: regions have at least one page.
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl Drop for DmaRegion {
    fn drop(&mut self) {
        self.mapper.unmap(self.iova, self.mem.size());
    }
}

/// Where `iova..iova + len` lies inside a mapping of `size` bytes at IOVA
/// `base`: its byte offset from `base`, or `None` when any byte of it falls
/// outside (an IOMMU fault). The one containment test of the software
/// models' IOMMUs (`pollnic_model::ring`'s `SoftNic` and the 82576/82599
/// models' `iommu`). Computed on offsets, never on end addresses, so a range
/// that would wrap past `u64::MAX` (an IOVA a hostile device or a driver bug
/// puts near the top of the address space) is refused in release builds too,
/// never wrapped around into a mapping, and a mapping may end at 2^64. A
/// zero-length range is inside when `iova` is in `base..=base + size`.
#[inline]
pub const fn offset_in(base: u64, size: u64, iova: u64, len: u64) -> Option<u64> {
    let Some(off) = iova.checked_sub(base) else {
        return None;
    };
    if off <= size && len <= size - off {
        Some(off)
    } else {
        None
    }
}

/// Free 2 MiB hugepages as the kernel reports them (0 when unreadable).
pub fn free_hugepages() -> usize {
    std::fs::read_to_string(FREE_HUGEPAGES)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containment_is_checked_near_the_top_of_the_address_space() {
        let base = u64::MAX - 0xfff; // a 4 KiB mapping ending at 2^64
        assert_eq!(offset_in(base, 0x1000, base, 0x1000), Some(0));
        assert_eq!(offset_in(base, 0x1000, base + 0x10, 16), Some(0x10));
        // `iova + len` wraps to a small number, which an unchecked `<=`
        // compare would take for "inside".
        assert_eq!(offset_in(base, 0x1000, u64::MAX, 2), None);
        assert_eq!(
            offset_in(base, 0x1000, base + 0x800, usize::MAX as u64),
            None
        );
        // A mapping at the bottom: a wrapped range must not land in it.
        assert_eq!(offset_in(0, 0x1000, u64::MAX - 7, 16), None);
        assert_eq!(offset_in(0x1000, 0x1000, 0xfff, 1), None);
        assert_eq!(offset_in(0x1000, 0x1000, 0x1fff, 1), Some(0xfff));
        assert_eq!(offset_in(0x1000, 0x1000, 0x1fff, 2), None);
    }

    #[test]
    fn small_pages_round_up_and_zero_fill() {
        let r = DmaRegion::new(5000, PageSize::Small4K, Arc::new(IdentityMapper)).unwrap();
        assert_eq!(r.len(), 8192);
        assert_eq!(r.iova(), r.va() as u64);
    }

    #[test]
    fn hugepage_shortage_is_a_clear_error() {
        // Ask for far more hugepages than any test machine reserves.
        let err = DmaRegion::new(1 << 40, PageSize::Huge2M, Arc::new(IdentityMapper)).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, DmaError::NoHugepages { .. } | DmaError::Mmap { .. }),
            "{msg}"
        );
        if let DmaError::NoHugepages { needed, .. } = err {
            assert_eq!(needed, (1 << 40) / HUGEPAGE_SIZE);
            assert!(msg.contains("nr_hugepages"), "{msg}");
        }
    }
}
