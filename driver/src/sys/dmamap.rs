//! The DMA mappings a [`crate::Device`] made, as a list: each IOMMU mapping
//! (`VFIO_IOMMU_MAP_DMA` on a real NIC) with its IOVA, length in bytes and
//! what it is for. [`Recording`] wraps the device's mapper, one per region,
//! and keeps the list up to date as regions are mapped and unmapped, so
//! `Device::dma_mappings` answers "what can this NIC reach?" from the calls
//! actually made, not from what the driver meant to map.

use pollnic_rings::{DmaError, DmaMapper};
use std::fmt;
use std::sync::{Arc, Mutex};

/// What a DMA region holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DmaPurpose {
    /// Queue `q`'s mempool: its packet buffers.
    Mempool(u16),
    /// A mempool made by `Device::create_mempool` (TX buffers of any size,
    /// e.g. for TSO).
    CreatedMempool,
    /// Queue `q`'s RX descriptor ring.
    RxRing(u16),
    /// Queue `q`'s TX descriptor ring.
    TxRing(u16),
    /// A virtio-net device's control virtqueue and its command buffer.
    CtrlQueue,
}

impl fmt::Display for DmaPurpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DmaPurpose::CreatedMempool => write!(f, "mempool made by create_mempool"),
            DmaPurpose::Mempool(q) => write!(f, "queue {q} mempool"),
            DmaPurpose::RxRing(q) => write!(f, "queue {q} RX descriptor ring"),
            DmaPurpose::TxRing(q) => write!(f, "queue {q} TX descriptor ring"),
            DmaPurpose::CtrlQueue => write!(f, "virtio-net control queue"),
        }
    }
}

/// One live IOMMU mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaMapping {
    /// Start in the device's IO address space.
    pub iova: u64,
    /// Length in bytes (whole pages: 2 MiB hugepages on a real NIC).
    pub len: usize,
    /// What the region holds.
    pub purpose: DmaPurpose,
}

impl fmt::Display for DmaMapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "iova {:#x}..{:#x} ({} bytes): {}",
            self.iova,
            self.iova + self.len as u64,
            self.len,
            self.purpose
        )
    }
}

/// The live mappings of one device, shared by its [`Recording`] mappers.
pub type MappingLog = Arc<Mutex<Vec<DmaMapping>>>;

/// A [`DmaMapper`] that forwards to the device's mapper and records each
/// mapping under `purpose` in `log` until it is unmapped. It reports the
/// inner mapper's address space, so regions mapped through different
/// `Recording`s of one device can still be used together.
#[derive(Debug)]
pub struct Recording {
    inner: Arc<dyn DmaMapper>,
    purpose: DmaPurpose,
    log: MappingLog,
}

impl Recording {
    /// A mapper recording into `log` as `purpose`.
    pub fn new(inner: Arc<dyn DmaMapper>, purpose: DmaPurpose, log: MappingLog) -> Arc<Self> {
        Arc::new(Recording {
            inner,
            purpose,
            log,
        })
    }
}

// SAFETY: every call goes to the inner mapper, which upholds the
// `DmaMapper` contract: the IOVA `map` returns is the inner mapper's, `unmap`
// removes the inner mapping before returning, and `address_space` is the
// inner mapper's. The log is bookkeeping only.
unsafe impl DmaMapper for Recording {
    unsafe fn map(&self, va: *mut u8, len: usize) -> Result<u64, DmaError> {
        // SAFETY: the caller upholds `DmaMapper::map`'s contract for
        // `va..va+len`, which is exactly the inner mapper's contract.
        let iova = unsafe { self.inner.map(va, len)? };
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(DmaMapping {
                iova,
                len,
                purpose: self.purpose,
            });
        Ok(iova)
    }

    fn unmap(&self, iova: u64, len: usize) {
        self.inner.unmap(iova, len);
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|m| !(m.iova == iova && m.len == len));
    }

    /// Forwarded, so a mapper of physical addresses gives each page its
    /// own; recorded as one entry per contiguous run of pages.
    unsafe fn map_pages(&self, va: *mut u8, len: usize, page: usize) -> Result<Vec<u64>, DmaError> {
        // SAFETY: the caller upholds `map_pages`' contract, the inner
        // mapper's too.
        let pages = unsafe { self.inner.map_pages(va, len, page)? };
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        for (iova, len) in runs(&pages, page) {
            log.push(DmaMapping {
                iova,
                len,
                purpose: self.purpose,
            });
        }
        Ok(pages)
    }

    fn unmap_pages(&self, pages: &[u64], page: usize) {
        self.inner.unmap_pages(pages, page);
        let runs = runs(pages, page);
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|m| !runs.contains(&(m.iova, m.len)));
    }

    fn address_space(&self) -> usize {
        self.inner.address_space()
    }

    fn persistent_dir(&self) -> Option<&std::path::Path> {
        self.inner.persistent_dir()
    }
}

/// `pages` (each `page` bytes) as runs of contiguous device addresses:
/// (start, bytes).
fn runs(pages: &[u64], page: usize) -> Vec<(u64, usize)> {
    let mut out: Vec<(u64, usize)> = Vec::new();
    for &p in pages {
        match out.last_mut() {
            Some((start, len)) if start.checked_add(*len as u64) == Some(p) => *len += page,
            _ => out.push((p, page)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pollnic_rings::{DmaRegion, IdentityMapper, PageSize};

    #[test]
    fn records_while_mapped_and_keeps_the_address_space() {
        let inner: Arc<dyn DmaMapper> = Arc::new(IdentityMapper);
        let log = MappingLog::default();
        let a = Recording::new(inner.clone(), DmaPurpose::Mempool(0), log.clone());
        let b = Recording::new(inner.clone(), DmaPurpose::RxRing(1), log.clone());
        let ra = DmaRegion::new(8192, PageSize::Small4K, a).unwrap();
        let rb = DmaRegion::new(4096, PageSize::Small4K, b).unwrap();
        assert!(ra.same_address_space(&rb));
        let got = log.lock().unwrap().clone();
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].iova, got[0].len), (ra.iova(), 8192));
        assert_eq!(got[0].purpose, DmaPurpose::Mempool(0));
        assert_eq!(got[1].purpose, DmaPurpose::RxRing(1));
        assert!(got[1]
            .to_string()
            .contains("(4096 bytes): queue 1 RX descriptor ring"));
        drop(ra);
        assert_eq!(log.lock().unwrap().len(), 1);
        drop(rb);
        assert!(log.lock().unwrap().is_empty());
    }
}
