//! Physical addresses for DMA, for a device that sits behind no IOMMU (a
//! port opened through `uio_pci_generic`, or VFIO's no-IOMMU mode): the
//! device is given the physical address of each page, read from
//! `/proc/self/pagemap` (Linux `Documentation/admin-guide/mm/pagemap.rst`:
//! one 64-bit entry per 4 KiB virtual page; bit 63 present, bit 62
//! swapped, bits 0–54 the page frame number, reported as 0 to a process
//! without `CAP_SYS_ADMIN`). DPDK calls this "IOVA as PA"
//! (`rte_mem_virt2phy`).
//!
//! Every page is locked (`mlock`) before its address is read, every 4 KiB
//! frame of it is checked to be present and to follow the one before (a
//! 2 MiB hugepage is one physically contiguous run), and an address beyond
//! the device's reach is refused. Nothing is ever handed out as address 0.

use pollnic_rings::{DmaError, DmaMapper};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bytes of one pagemap page (the base page size on x86-64).
const SMALL_PAGE: usize = 4096;
/// pagemap: the page is present in RAM.
const PM_PRESENT: u64 = 1 << 63;
/// pagemap: the page is swapped out.
const PM_SWAPPED: u64 = 1 << 62;
/// pagemap: the page frame number, bits 0–54.
const PM_PFN: u64 = (1 << 55) - 1;
/// The address space every physical-address mapper shares: physical memory
/// is one space for every device without an IOMMU. No mapper's own address
/// (the trait's default) is 1, and the identity mapper's is 0.
const PHYSICAL_SPACE: usize = 1;

/// Hands out physical addresses; nothing is mapped, so nothing is unmapped.
/// Its memory lives in files of a hugetlbfs mount
/// ([`DmaMapper::persistent_dir`]), so that a process killed with its
/// device running leaves the pages allocated until the kernel has closed
/// the device (which stops its DMA); the files of such processes are
/// removed when the next mapper is made.
#[derive(Debug)]
pub struct PhysicalDma {
    /// The highest physical address the device can reach.
    limit: u64,
    /// The hugetlbfs directory of the memory (`None` only in unit tests).
    dir: Option<PathBuf>,
}

impl PhysicalDma {
    /// A mapper for a device that reaches physical addresses up to `limit`
    /// (`u64::MAX` for a 64-bit DMA engine: the 82576, the 82599 and a
    /// virtio device without `VIRTIO_F_ACCESS_PLATFORM` all take 64-bit
    /// addresses), its memory in the first 2 MiB hugetlbfs mount of
    /// `/proc/mounts`. Removes what killed processes left there first.
    ///
    /// # Errors
    /// [`DmaError::HugetlbfsFile`] naming `/dev/hugepages` when no
    /// hugetlbfs of 2 MiB pages is mounted.
    pub fn new(limit: u64) -> Result<Arc<PhysicalDma>, DmaError> {
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
        let Some(dir) = hugetlbfs_mount(&mounts) else {
            return Err(DmaError::HugetlbfsFile {
                path: PathBuf::from("/dev/hugepages"),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no hugetlbfs of 2 MiB pages in /proc/mounts",
                ),
            });
        };
        pollnic_rings::remove_stale_files(&dir);
        Ok(Arc::new(PhysicalDma {
            limit,
            dir: Some(dir),
        }))
    }
}

/// The mount point of the first hugetlbfs of 2 MiB pages in `mounts`
/// (`/proc/mounts`: device, mount point, type, options); a mount without a
/// `pagesize=` option has the default size, 2 MiB on x86-64.
fn hugetlbfs_mount(mounts: &str) -> Option<PathBuf> {
    mounts.lines().find_map(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        let (dir, fs, opts) = (w.get(1)?, w.get(2)?, w.get(3)?);
        let size = opts.split(',').find_map(|o| o.strip_prefix("pagesize="));
        (*fs == "hugetlbfs" && size.is_none_or(|s| s == "2M")).then(|| PathBuf::from(dir))
    })
}

/// The physical frame of a pagemap entry, or why it cannot be used.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    /// Present, with this page frame number.
    At(u64),
    /// Present, but the frame number reads 0: hidden (no `CAP_SYS_ADMIN`).
    Hidden,
    /// Not present, or swapped out.
    Absent,
}

/// What a pagemap entry says of its page.
pub(crate) fn frame(entry: u64) -> Frame {
    if entry & PM_PRESENT == 0 || entry & PM_SWAPPED != 0 {
        Frame::Absent
    } else if entry & PM_PFN == 0 {
        Frame::Hidden
    } else {
        Frame::At(entry & PM_PFN)
    }
}

/// The physical address of the `page`-byte page whose pagemap entries (one
/// per 4 KiB, in order) are `entries`, checked: every frame present, each
/// following the one before, the whole page below `limit`.
pub(crate) fn page_address(
    va: usize,
    page: usize,
    entries: &[u64],
    limit: u64,
) -> Result<u64, DmaError> {
    let not_one_run = || DmaError::NotPhysicallyContiguous {
        va,
        page,
        first: entries.first().copied().unwrap_or(0),
        last: entries.last().copied().unwrap_or(0),
    };
    let mut base = None;
    for (k, &e) in entries.iter().enumerate() {
        match (frame(e), base) {
            (Frame::Hidden, _) => return Err(DmaError::PhysicalAddressHidden),
            (Frame::Absent, _) => return Err(not_one_run()),
            (Frame::At(pfn), None) => base = Some(pfn),
            (Frame::At(pfn), Some(b)) if Some(pfn) == b.checked_add(k as u64) => {}
            (Frame::At(_), Some(_)) => return Err(not_one_run()),
        }
    }
    let pfn = base.ok_or_else(not_one_run)?;
    let addr = pfn
        .checked_mul(SMALL_PAGE as u64)
        .ok_or(DmaError::BeyondDeviceReach {
            addr: u64::MAX,
            limit,
        })?;
    match addr.checked_add(page as u64 - 1) {
        Some(end) if end <= limit => Ok(addr),
        end => Err(DmaError::BeyondDeviceReach {
            addr: end.unwrap_or(u64::MAX),
            limit,
        }),
    }
}

/// Lock `va..va + len` in RAM.
fn lock(va: *mut u8, len: usize) -> Result<(), DmaError> {
    // SAFETY: mlock only changes how the kernel treats the pages of
    // `va..va + len`, which the caller has mapped; it reads and writes no
    // memory of this process.
    let r = unsafe { libc::mlock(va.cast(), len) };
    if r == 0 {
        Ok(())
    } else {
        Err(DmaError::Lock {
            len,
            source: std::io::Error::last_os_error(),
        })
    }
}

// SAFETY: with no IOMMU between the device and memory (a device on
// uio_pci_generic, or in a VFIO no-IOMMU group, on x86-64, where bus
// addresses are physical addresses), the device reaches a physical page at
// its physical address. `map_pages` returns, for each page, the physical
// address of a page it has just locked (`mlock`, so it is neither swapped
// nor moved for reclaim) and whose every 4 KiB frame it read present from
// pagemap, one run, so the device reaches exactly that page, in order; an
// address hidden (0), absent or beyond the device's reach is an error,
// never returned. Two live regions never share a physical page, because
// two live mappings of this process never do. Nothing is mapped, so
// `unmap` has nothing to remove: the device can reach the memory until it
// is stopped, and that is what `Device`'s shutdown order guarantees (reset,
// then bus mastering off, then the regions dropped; see Drop for Device).
// Every physical mapper shares one address space, physical memory.
unsafe impl DmaMapper for PhysicalDma {
    unsafe fn map(&self, va: *mut u8, len: usize) -> Result<u64, DmaError> {
        // One piece: the whole range must be one physical run.
        // SAFETY: the caller upholds `map`'s contract, which is `map_pages`'.
        let pages = unsafe { self.map_pages(va, len, len)? };
        Ok(pages[0])
    }

    unsafe fn map_pages(&self, va: *mut u8, len: usize, page: usize) -> Result<Vec<u64>, DmaError> {
        if page == 0 || len == 0 || page % SMALL_PAGE != 0 || len % page != 0 {
            return Err(DmaError::NotPhysicallyContiguous {
                va: va as usize,
                page,
                first: 0,
                last: 0,
            });
        }
        lock(va, len)?;
        let pagemap = File::open("/proc/self/pagemap").map_err(DmaError::Pagemap)?;
        let per_page = page / SMALL_PAGE;
        let mut raw = vec![0u8; per_page * 8];
        let mut entries = vec![0u64; per_page];
        let mut out = Vec::with_capacity(len / page);
        for k in 0..len / page {
            let at = va as usize + k * page;
            pagemap
                .read_exact_at(&mut raw, (at / SMALL_PAGE * 8) as u64)
                .map_err(DmaError::Pagemap)?;
            for (e, b) in entries.iter_mut().zip(raw.chunks_exact(8)) {
                *e = u64::from_ne_bytes(b.try_into().expect("chunks of 8"));
            }
            out.push(page_address(at, page, &entries, self.limit)?);
        }
        Ok(out)
    }

    /// Nothing to remove: no IOMMU mapping was made (see the SAFETY note).
    fn unmap(&self, _iova: u64, _len: usize) {}

    fn unmap_pages(&self, _pages: &[u64], _page: usize) {}

    fn address_space(&self) -> usize {
        PHYSICAL_SPACE
    }

    fn persistent_dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = PM_PRESENT;

    #[test]
    fn the_hugetlbfs_mount_of_2m_pages_is_found() {
        let m = "proc /proc proc rw 0 0\n\
                 hugetlbfs /mnt/huge1g hugetlbfs rw,relatime,pagesize=1024M 0 0\n\
                 hugetlbfs /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0\n";
        assert_eq!(hugetlbfs_mount(m), Some(PathBuf::from("/dev/hugepages")));
        let m = "none /h hugetlbfs rw 0 0\n";
        assert_eq!(hugetlbfs_mount(m), Some(PathBuf::from("/h")));
        assert_eq!(hugetlbfs_mount("proc /proc proc rw 0 0\n"), None);
    }

    #[test]
    fn entries_say_present_hidden_or_absent() {
        assert_eq!(frame(P | 0x1234), Frame::At(0x1234));
        assert_eq!(frame(P), Frame::Hidden);
        assert_eq!(frame(0x1234), Frame::Absent);
        assert_eq!(frame(P | PM_SWAPPED | 0x1234), Frame::Absent);
        // Bits 55..=61 (soft-dirty, exclusive, file-mapped) are not the frame.
        assert_eq!(frame(P | 1 << 55 | 1 << 61 | 7), Frame::At(7));
    }

    #[test]
    fn a_page_is_one_run_below_the_limit() {
        let run: Vec<u64> = (0..512).map(|k| P | (0x4_0000 + k)).collect();
        assert_eq!(
            page_address(0x7f00_0000_0000, 2 << 20, &run, u64::MAX).unwrap(),
            0x4_0000 * 4096
        );
        // A hidden frame number (no CAP_SYS_ADMIN) is an error naming it, not address 0.
        let hidden = vec![P; 512];
        let e = page_address(0, 2 << 20, &hidden, u64::MAX).unwrap_err();
        assert!(matches!(e, DmaError::PhysicalAddressHidden));
        assert!(e.to_string().contains("CAP_SYS_ADMIN"), "{e}");
        // A gap in the run (4 KiB pages scattered, not a hugepage).
        let mut gap = run.clone();
        gap[300] += 1;
        assert!(matches!(
            page_address(0, 2 << 20, &gap, u64::MAX),
            Err(DmaError::NotPhysicallyContiguous { .. })
        ));
        let mut absent = run.clone();
        absent[511] &= !P;
        assert!(matches!(
            page_address(0, 2 << 20, &absent, u64::MAX),
            Err(DmaError::NotPhysicallyContiguous { .. })
        ));
        // The page's last byte must be reachable, not just its first.
        let top = 0x4_0000 * 4096 + (2 << 20) - 1;
        assert!(page_address(0, 2 << 20, &run, top).is_ok());
        assert!(matches!(
            page_address(0, 2 << 20, &run, top - 1),
            Err(DmaError::BeyondDeviceReach { addr, .. }) if addr == top
        ));
        // A frame number whose address would overflow 64 bits is refused, not wrapped.
        let huge: Vec<u64> = vec![P | PM_PFN];
        assert!(matches!(
            page_address(0, 4096, &huge, u64::MAX),
            Err(DmaError::BeyondDeviceReach { addr: u64::MAX, .. })
        ));
    }

    /// The real pagemap: as root each page of a region gets its own
    /// nonzero, page-aligned physical address; without CAP_SYS_ADMIN the
    /// typed error, never a zero address.
    #[test]
    fn pagemap_gives_real_addresses_or_the_capability_error() {
        use pollnic_rings::{DmaRegion, PageSize};
        let m = Arc::new(PhysicalDma {
            limit: u64::MAX,
            dir: None,
        });
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        match DmaRegion::new(4 * 4096, PageSize::Small4K, m) {
            Ok(r) => {
                assert!(root, "physical addresses without root");
                let pages: Vec<u64> = (0..4).map(|k| r.iova_at(k * 4096).unwrap()).collect();
                for p in &pages {
                    assert!(*p != 0 && p % 4096 == 0, "{pages:x?}");
                }
                let mut distinct = pages.clone();
                distinct.dedup();
                assert_eq!(distinct.len(), 4, "{pages:x?}");
                assert!(r.contiguous_len() >= 4096);
            }
            Err(DmaError::PhysicalAddressHidden) => assert!(!root),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn no_page_size_no_address() {
        let m = PhysicalDma {
            limit: u64::MAX,
            dir: None,
        };
        let mut b = [0u8; 4096];
        // SAFETY: `b` outlives the call; no device sees the result.
        let e = unsafe { m.map_pages(b.as_mut_ptr(), 4096, 0) }.unwrap_err();
        assert!(matches!(e, DmaError::NotPhysicallyContiguous { .. }));
    }
}
