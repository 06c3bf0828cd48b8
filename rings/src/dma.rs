//! DMA memory: page-locked regions from 2 MiB hugepages, each mapped once into
//! the IOMMU as a whole (type1 allows ~65k mappings, so never map single
//! buffers), with their IO virtual address (IOVA).
//!
//! Sources: Linux `Documentation/admin-guide/mm/hugetlbpage.rst` (MAP_HUGETLB,
//! `nr_hugepages`), `Documentation/driver-api/vfio.rst` (VFIO_IOMMU_MAP_DMA).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use vm_memory::mmap::MmapRegionBuilder;
use vm_memory::{FileOffset, MmapRegion};

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
    #[error("mmap of {len} bytes of DMA memory failed: {cause}")]
    Mmap {
        /// Requested length in bytes.
        len: usize,
        /// The OS error.
        cause: std::io::Error,
    },
    /// The IOMMU mapping (`VFIO_IOMMU_MAP_DMA`) was refused.
    #[error(
        "mapping {len} bytes for DMA failed ({cause}): the locked-memory limit is probably too \
         low; run as root or raise it (`ulimit -l unlimited`, or `memlock` in \
         /etc/security/limits.conf)"
    )]
    Map {
        /// Bytes asked for.
        len: usize,
        /// The mapper's error.
        cause: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// Physical addresses (no IOMMU) were asked for, but the kernel hides
    /// them: `/proc/self/pagemap` gives page frame numbers only to a
    /// process with `CAP_SYS_ADMIN` (Linux
    /// `Documentation/admin-guide/mm/pagemap.rst`), and reads them as 0
    /// otherwise. Never handed to a device as address 0.
    #[error(
        "physical addresses are hidden from this process: /proc/self/pagemap gives page frame \
         numbers only with CAP_SYS_ADMIN, which no-IOMMU mode needs (run as root, or \
         `sudo setcap cap_sys_admin,cap_ipc_lock+ep <program>`)"
    )]
    PhysicalAddressHidden,
    /// `/proc/self/pagemap` could not be opened or read.
    #[error("reading /proc/self/pagemap for physical addresses failed")]
    Pagemap(#[source] std::io::Error),
    /// Memory for physical-address DMA could not be locked (`mlock`).
    #[error(
        "locking {len} bytes of DMA memory failed: raise the locked-memory limit \
         (`ulimit -l unlimited`) or run as root"
    )]
    Lock {
        /// Bytes asked for.
        len: usize,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A page of DMA memory is not one resident, physically contiguous
    /// page of the size asked for (not present in pagemap, swapped, or its
    /// first and last 4 KiB frames are not one run).
    #[error(
        "the DMA page at {va:#x} is not a resident, physically contiguous {page}-byte page \
         (pagemap entries {first:#x} and {last:#x}); physical-address DMA needs 2 MiB hugepages"
    )]
    NotPhysicallyContiguous {
        /// The page's virtual address.
        va: usize,
        /// The page size asked for, in bytes.
        page: usize,
        /// The pagemap entry of its first 4 KiB.
        first: u64,
        /// The pagemap entry of its last 4 KiB.
        last: u64,
    },
    /// A page's physical address lies beyond what the device can address.
    #[error(
        "physical address {addr:#x} is beyond what the device can DMA to (highest {limit:#x})"
    )]
    BeyondDeviceReach {
        /// The page's last byte's physical address (or where it would wrap).
        addr: u64,
        /// The highest address the device reaches.
        limit: u64,
    },
    /// A file for DMA memory could not be made in the hugetlbfs directory
    /// ([`DmaMapper::persistent_dir`]).
    #[error(
        "cannot make {path} for DMA memory (is hugetlbfs mounted there, with free 2 MiB \
         hugepages? `mount -t hugetlbfs nodev /dev/hugepages`)"
    )]
    HugetlbfsFile {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A descriptor ring or virtqueue would need more bytes contiguous in
    /// the device's address space than its region has: with physical
    /// addresses ([`DmaMapper::map_pages`]) contiguity ends at each page.
    #[error(
        "{needed} bytes must be contiguous for the device, but the region is contiguous for \
         only {contiguous} (physical addresses end their contiguity at each 2 MiB page): use a \
         smaller ring"
    )]
    NotContiguous {
        /// Bytes that must be contiguous.
        needed: usize,
        /// Bytes that are, from the region's start.
        contiguous: usize,
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
/// - [`DmaMapper::unmap`]`(iova, len)` (and [`DmaMapper::unmap_pages`]) of
///   a live mapping removes it before it returns: from then on no device
///   behind this mapper reaches that memory. A mapper with no translation
///   to remove (physical addresses, no IOMMU) cannot do that: it must
///   return a [`DmaMapper::persistent_dir`], and its owner must stop every
///   device behind it (reset, bus mastering off) before any of its
///   regions is dropped, as `pollnic::Device`'s shutdown order does;
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

    /// Map `len` bytes at `va`, a whole number of pages of `page` bytes, for
    /// device reads and writes; returns the device address of each page, in
    /// order. The default maps the range in one piece ([`DmaMapper::map`]),
    /// so page `k` is at `iova + k * page`; a mapper that hands out
    /// physical addresses (no IOMMU) gives each page its own.
    ///
    /// # Errors
    /// As [`DmaMapper::map`].
    ///
    /// # Safety
    /// As [`DmaMapper::map`]; `len` is a multiple of `page`, `page > 0`.
    unsafe fn map_pages(&self, va: *mut u8, len: usize, page: usize) -> Result<Vec<u64>, DmaError> {
        // SAFETY: the caller upholds `map`'s contract for `va..va+len`.
        let iova = unsafe { self.map(va, len)? };
        Ok((0..len / page).map(|k| iova + (k * page) as u64).collect())
    }

    /// Remove a mapping made by [`DmaMapper::map_pages`]: `pages` as it
    /// returned them, each `page` bytes. The default removes the one
    /// mapping the default `map_pages` made.
    fn unmap_pages(&self, pages: &[u64], page: usize) {
        if let Some(&first) = pages.first() {
            self.unmap(first, pages.len() * page);
        }
    }

    /// Where this mapper's memory must live so that it outlives a process
    /// killed while its device could still DMA: a hugetlbfs directory, in
    /// which each region is a file (`pollnic-dma-<pid>-<start time>-<n>`)
    /// kept until the region is dropped. The default, `None`: anonymous
    /// memory, right for a mapper behind an IOMMU, whose mappings pin the
    /// pages until the device is closed. A physical-address mapper returns
    /// one: without an IOMMU nothing pins them, and a process's memory is
    /// freed before its files (the device's) are closed at exit; a file
    /// keeps the pages until [`remove_stale_files`] finds its process gone.
    fn persistent_dir(&self) -> Option<&Path> {
        None
    }

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
    /// The hugetlbfs file holding the memory, removed on drop
    /// ([`DmaMapper::persistent_dir`]); `None` for anonymous memory.
    file: Option<PathBuf>,
    /// The device address of each page, in order (one mapping for an
    /// IOMMU: `pages[k] = pages[0] + k * page`; physical addresses: each
    /// page its own).
    pages: Box<[u64]>,
    /// Bytes of one page.
    page: usize,
    /// Bytes from the start that are contiguous in the device's address
    /// space.
    contiguous: usize,
    mapper: Arc<dyn DmaMapper>,
}

impl fmt::Debug for DmaRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DmaRegion")
            .field("va", &self.mem.as_ptr())
            .field("iova", &format_args!("{:#x}", self.iova()))
            .field("pages", &self.pages.len())
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
        let mut builder = MmapRegionBuilder::new(len)
            .with_mmap_prot(libc::PROT_READ | libc::PROT_WRITE)
            .with_hugetlbfs(page == PageSize::Huge2M);
        let mut file = None;
        if let Some(dir) = mapper.persistent_dir() {
            let (path, f) = persistent_file(dir, len)?;
            file = Some(path);
            builder = builder
                .with_file_offset(FileOffset::new(f, 0))
                .with_mmap_flags(libc::MAP_SHARED | libc::MAP_POPULATE);
        } else {
            builder = builder.with_mmap_flags(flags);
        }
        let built = builder.build();
        if built.is_err() {
            if let Some(path) = &file {
                let _ = std::fs::remove_file(path);
            }
        }
        let mem = built.map_err(|e| match e {
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
                    DmaError::Mmap { len, cause: source }
                }
            }
            other => DmaError::Mmap {
                len,
                cause: std::io::Error::other(other.to_string()),
            },
        })?;
        let bytes = page.bytes();
        // SAFETY: `mem` is a private anonymous mapping owned by the returned
        // DmaRegion; its Drop calls `unmap_pages` before `mem` (declared
        // first, but dropped after Drop::drop runs) releases the pages, so
        // the range stays mapped for as long as the mapping exists. `len` is
        // a whole number of `bytes`-sized pages (rounded above).
        let mapped = unsafe { mapper.map_pages(mem.as_ptr(), len, bytes) };
        let pages = match mapped {
            Ok(p) => p,
            Err(e) => {
                if let Some(path) = &file {
                    let _ = std::fs::remove_file(path);
                }
                return Err(e);
            }
        };
        if pages.len() != len / bytes {
            // A mapper that broke its contract: refuse rather than index past it.
            mapper.unmap_pages(&pages, bytes);
            return Err(DmaError::Map {
                len,
                cause: format!(
                    "the mapper returned {} page addresses for {} pages",
                    pages.len(),
                    len / bytes
                )
                .into(),
            });
        }
        let run = pages
            .windows(2)
            .take_while(|w| w[0].checked_add(bytes as u64) == Some(w[1]))
            .count();
        Ok(DmaRegion {
            mem,
            file,
            contiguous: (run + 1) * bytes,
            pages: pages.into_boxed_slice(),
            page: bytes,
            mapper,
        })
    }

    /// Start of the region in this process.
    pub fn va(&self) -> *mut u8 {
        self.mem.as_ptr()
    }
    /// Start of the region in the device's IO address space.
    pub fn iova(&self) -> u64 {
        self.pages[0]
    }
    /// The device address of the byte `off` bytes into the region (its
    /// page's address plus the offset in the page); `None` past the end.
    pub fn iova_at(&self, off: usize) -> Option<u64> {
        let page = self.pages.get(off / self.page)?;
        Some(page + (off % self.page) as u64)
    }
    /// Bytes from the region's start that are contiguous in the device's
    /// address space: all of it through an IOMMU, at least one page with
    /// physical addresses.
    pub fn contiguous_len(&self) -> usize {
        self.contiguous
    }
    /// [`DmaError::NotContiguous`] unless the first `needed` bytes are
    /// contiguous for the device (what a descriptor ring or virtqueue,
    /// given to the device as one base address, needs).
    ///
    /// # Errors
    /// [`DmaError::NotContiguous`].
    pub fn check_contiguous(&self, needed: usize) -> Result<(), DmaError> {
        if needed <= self.contiguous {
            Ok(())
        } else {
            Err(DmaError::NotContiguous {
                needed,
                contiguous: self.contiguous,
            })
        }
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
        self.mapper.unmap_pages(&self.pages, self.page);
        // The device was stopped before the region is dropped (the
        // driver's shutdown order): the pages may go back now. They do
        // once `mem` unmaps them, right after.
        if let Some(path) = &self.file {
            let _ = std::fs::remove_file(path);
        }
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

/// Prefix of the hugetlbfs files of [`DmaMapper::persistent_dir`].
const PERSISTENT_PREFIX: &str = "pollnic-dma-";

/// This process's start time in clock ticks since boot (`/proc/self/stat`
/// field 22): with the pid, it names a process for good (pids are reused).
fn start_time(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: count from after its ')'.
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// A new file of `len` bytes in `dir`, named after this process.
fn persistent_file(dir: &Path, len: usize) -> Result<(PathBuf, std::fs::File), DmaError> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let pid = std::process::id();
    let start = start_time("self").unwrap_or(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let path = dir.join(format!("{PERSISTENT_PREFIX}{pid}-{start}-{n}"));
    let fail = |source| DmaError::HugetlbfsFile {
        path: path.clone(),
        source,
    };
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(fail)?;
    if let Err(e) = f.set_len(len as u64) {
        let _ = std::fs::remove_file(&path);
        return Err(fail(e));
    }
    Ok((path, f))
}

/// Remove the files [`DmaMapper::persistent_dir`] left in `dir` by
/// processes that no longer exist (killed before their regions were
/// dropped), giving their hugepages back; returns how many. A process is
/// gone once `/proc/<pid>` is, or names a process started at another time
/// (its pid reused). By then the kernel has closed every file it had,
/// its devices' too, which stops their DMA (`uio_pci_generic` clears bus
/// mastering on release, vfio-pci disables the device), so the memory
/// can no longer be written by them.
pub fn remove_stale_files(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(PERSISTENT_PREFIX) else {
            continue;
        };
        let mut it = rest.split('-');
        let (Some(pid), Some(start)) = (it.next(), it.next()) else {
            continue;
        };
        let alive = start_time(pid).is_some_and(|t| t.to_string() == start);
        if !alive && std::fs::remove_file(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
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

    /// A mapper that gives each page its own address, far apart and in
    /// reverse order, as physical addresses can be.
    #[derive(Debug, Default)]
    struct Scattered(std::sync::Mutex<Vec<u64>>);

    // SAFETY: test-only; no device ever sees these addresses.
    unsafe impl DmaMapper for Scattered {
        unsafe fn map(&self, _va: *mut u8, _len: usize) -> Result<u64, DmaError> {
            unreachable!("map_pages is overridden")
        }
        unsafe fn map_pages(
            &self,
            _va: *mut u8,
            len: usize,
            page: usize,
        ) -> Result<Vec<u64>, DmaError> {
            Ok((0..len / page)
                .map(|k| 0x100_0000 - (k as u64) * 0x10_0000)
                .collect())
        }
        fn unmap(&self, _iova: u64, _len: usize) {
            unreachable!("unmap_pages is overridden")
        }
        fn unmap_pages(&self, pages: &[u64], _page: usize) {
            self.0.lock().unwrap().extend_from_slice(pages);
        }
    }

    #[test]
    fn each_page_keeps_its_own_device_address() {
        let m = Arc::new(Scattered::default());
        let r = DmaRegion::new(3 * 4096, PageSize::Small4K, m.clone()).unwrap();
        assert_eq!(r.iova(), 0x100_0000);
        assert_eq!(r.iova_at(4095), Some(0x100_0000 + 4095));
        assert_eq!(r.iova_at(4096 + 8), Some(0xf0_0000 + 8));
        assert_eq!(r.iova_at(2 * 4096), Some(0xe0_0000));
        assert_eq!(r.iova_at(3 * 4096), None);
        assert_eq!(r.contiguous_len(), 4096);
        assert!(r.check_contiguous(4096).is_ok());
        assert!(matches!(
            r.check_contiguous(4097),
            Err(DmaError::NotContiguous {
                needed: 4097,
                contiguous: 4096
            })
        ));
        drop(r);
        assert_eq!(*m.0.lock().unwrap(), vec![0x100_0000, 0xf0_0000, 0xe0_0000]);
        // Through an IOMMU (one mapping) the whole region is contiguous.
        let r = DmaRegion::new(3 * 4096, PageSize::Small4K, Arc::new(IdentityMapper)).unwrap();
        assert_eq!(r.contiguous_len(), 3 * 4096);
        assert_eq!(r.iova_at(5000), Some(r.va() as u64 + 5000));
    }

    /// A mapper whose memory lives in files of a directory.
    #[derive(Debug)]
    struct InFiles(PathBuf);

    // SAFETY: test-only; no device ever sees these addresses.
    unsafe impl DmaMapper for InFiles {
        unsafe fn map(&self, va: *mut u8, _len: usize) -> Result<u64, DmaError> {
            Ok(va as u64)
        }
        fn unmap(&self, _iova: u64, _len: usize) {}
        fn persistent_dir(&self) -> Option<&Path> {
            Some(&self.0)
        }
    }

    #[test]
    fn persistent_memory_is_a_file_until_the_region_drops_or_its_process_is_gone() {
        let dir = std::env::temp_dir().join(format!("pollnic-dma-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = || std::fs::read_dir(&dir).unwrap().count();
        let r = DmaRegion::new(8192, PageSize::Small4K, Arc::new(InFiles(dir.clone()))).unwrap();
        // SAFETY: the region is 8192 bytes and mapped read-write.
        unsafe { r.va().add(8191).write_volatile(7) };
        assert_eq!(files(), 1);
        // A live process's files stay; a dead one's go.
        assert_eq!(remove_stale_files(&dir), 0);
        std::fs::write(dir.join(format!("{PERSISTENT_PREFIX}999999999-1-0")), b"").unwrap();
        let me = std::process::id();
        std::fs::write(dir.join(format!("{PERSISTENT_PREFIX}{me}-1-0")), b"").unwrap();
        std::fs::write(dir.join("unrelated"), b"").unwrap();
        // The second: this pid, but another start time (a pid reused).
        assert_eq!(remove_stale_files(&dir), 2);
        assert_eq!(files(), 2);
        drop(r);
        assert_eq!(files(), 1, "the region's file is removed with it");
        std::fs::remove_dir_all(&dir).unwrap();
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
