//! A mempool of fixed-size DMA buffers, the zero-copy [`Packet`] that owns one
//! of them, and the per-queue [`PoolCache`] that keeps the hot path off the
//! shared free list.
//!
//! One [`DmaRegion`] is carved into `count` slots of `buf_size` bytes (2048 is
//! the field's default data room: it holds any standard frame up to 1518 bytes
//! plus CRC); a pool made with [`Mempool::with_headroom`] keeps the first
//! bytes of each slot in front of the buffer's data, and its data room
//! ([`Mempool::buf_size`]) is the rest. Buffers are named by index; identity always comes from pollnic's
//! bookkeeping, never from an index the device wrote.
//!
//! No buffer crosses a page boundary of the region's [`PageSize`]: each page
//! holds `page / buf_size` buffers and the rest of the page stays unused
//! (5,120 bytes of each 2 MiB page at 9 KiB buffers, 0.24 %), as DPDK's
//! `rte_mempool_populate_iova` does. Memory is contiguous for the device only
//! within a page, and a frame in a buffer that straddled two was lost on
//! transmit (QEMU's igb drops it, `net_tx_pkt_add_raw_fragment_pci`). Buffer
//! `i`'s offset in the region comes from a table made once, so the hot path
//! pays one load for it, as it paid one multiply before.
//!
//! Two levels, as in DPDK (`rte_mempool` over an `rte_ring`, with a per-lcore
//! cache):
//! - the **shared free list**, a lock-free bounded MPMC ring of indices
//!   (crossbeam's `ArrayQueue`): [`Mempool::alloc`] and dropping a [`Packet`]
//!   on any thread use it, one index at a time;
//! - a **[`PoolCache`]** per queue, a plain stack owned by one thread: RX
//!   refill takes from it and TX reclaim returns to it, with no atomic
//!   operation per buffer. It touches the shared list only in bulk, when it
//!   runs dry or overflows.
//!
//! # Lifetime and soundness
//! The pool's memory lives until the last [`Mempool`] handle *and* the last
//! [`Packet`] are gone, whichever thread drops them, even after the `Device`
//! that created it is closed (its DMA mapping is removed only then). The
//! pool's own count, as an `Arc`'s, holds one reference per handle
//! ([`Mempool`], and the one each ring and cache keeps) and **one per buffer
//! outside the shared free list**: armed in an RX descriptor, in flight on a
//! TX ring, in a [`PoolCache`], or owned by a [`Packet`]. A buffer's
//! reference moves with it, so RX (an armed buffer becomes a packet, a
//! cached one is armed in its place) and TX reclaim (a packet's buffer goes
//! back to the cache) never touch the count; only the shared list's edges do
//! (a cache refill or spill, one atomic operation for half a cache;
//! [`Mempool::alloc`]; dropping a [`Packet`]).

mod cache;
mod packet;

pub use cache::PoolCache;
pub use packet::{Packet, PacketTooLong};
pub(crate) use packet::{PACKET_IDX_OFFSET, PACKET_LEN_OFFSET, PACKET_POOL_OFFSET};

use crate::dma::{DmaError, DmaMapper, DmaRegion, PageSize};
use crossbeam_queue::ArrayQueue;
use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicUsize, Ordering};
use std::sync::Arc;

/// What handles and packets point at: the region, the free list and the count
/// of references (handles + packets + caches) that keeps them alive.
pub(crate) struct Shared {
    pub(crate) refs: AtomicUsize,
    region: DmaRegion,
    /// Data room of each buffer: its slot less the headroom.
    buf_size: u32,
    /// Bytes kept in front of each buffer's data (see
    /// [`Mempool::with_headroom`]).
    headroom: u32,
    count: u32,
    /// Byte offset of buffer `i`'s data in the region (`count` entries):
    /// page `i / per_page`, slot `i % per_page` of it, plus the headroom.
    offsets: Box<[u64]>,
    /// IOVA of buffer `i` (`count` entries): the region's IOVA plus
    /// `offsets[i]`, so that a burst loop looks a buffer's IOVA up with one
    /// load.
    iovas: Box<[u64]>,
    free: ArrayQueue<u32>,
}

/// Beyond this many references the count is treated as corrupt (as `Arc` does).
const MAX_REFS: usize = isize::MAX as usize;

impl Shared {
    /// Add `n` references; the caller already holds one, so the pool is alive.
    /// `n` must not exceed 2³³ (callers clamp it to a few times the pool's
    /// buffer count). The count before the add is checked against
    /// `MAX_REFS` (`isize::MAX`), so the count never exceeds `MAX_REFS` +
    /// 2³³ and cannot wrap: one comparison, as `Arc` does.
    #[inline]
    pub(crate) fn acquire(&self, n: usize) {
        debug_assert!(n as u64 <= 1 << 33);
        if self.refs.fetch_add(n, Ordering::Relaxed) > MAX_REFS {
            std::process::abort();
        }
    }

    /// Give back `n` references while the caller still holds at least one
    /// more (a cache or ring handle), so the count cannot reach zero here.
    #[inline]
    pub(crate) fn release_not_last(&self, n: usize) {
        let before = self.refs.fetch_sub(n, Ordering::Release);
        debug_assert!(before > n, "mempool reference count underflow");
    }

    /// IOVA of buffer `idx`.
    ///
    /// # Panics
    /// If `idx` is not a buffer of this pool.
    #[inline]
    pub(crate) fn buf_iova(&self, idx: u32) -> u64 {
        self.iovas[idx as usize]
    }

    /// Address of buffer `idx` in this process.
    ///
    /// # Panics
    /// If `idx` is not a buffer of this pool.
    #[inline]
    pub(crate) fn buf_ptr(&self, idx: u32) -> *mut u8 {
        // `offset + buf_size <= region.len()` by construction in `new`.
        self.region
            .va()
            .wrapping_add(self.offsets[idx as usize] as usize)
    }

    /// Return one index to the shared free list.
    #[inline]
    pub(crate) fn free_one(&self, idx: u32) {
        debug_assert!(idx < self.count);
        // Capacity equals the buffer count and every index is free at most
        // once, so the ring can never be full here.
        let pushed = self.free.push(idx);
        debug_assert!(pushed.is_ok(), "buffer {idx} returned twice");
    }

    /// Whether a device whose descriptors live in `region` can DMA to and
    /// from this pool's buffers (same IO address space).
    pub(crate) fn reachable_from(&self, region: &DmaRegion) -> bool {
        self.region.same_address_space(region)
    }

    /// IOVA of buffer `idx` of the pool at `pool` if a device whose
    /// descriptors live in `region` can reach it.
    ///
    /// # Safety
    /// The caller holds a reference to `pool` (e.g. owns a packet's parts).
    #[inline]
    pub(crate) unsafe fn iova_for(
        pool: NonNull<Shared>,
        idx: u32,
        region: &DmaRegion,
    ) -> Option<u64> {
        // SAFETY: the caller's reference keeps the pool alive.
        let shared = unsafe { pool.as_ref() };
        shared.reachable_from(region).then(|| shared.buf_iova(idx))
    }

    /// The hot path's view of buffer IOVAs: the region's IOVA and the
    /// offset table, with no bounds check per lookup.
    #[inline]
    pub(crate) fn iovas(&self) -> BufIovas {
        BufIovas {
            table: self.iovas.as_ptr(),
        }
    }

    #[inline]
    pub(crate) fn buf_size(&self) -> u32 {
        self.buf_size
    }
}

/// Buffer IOVAs of one pool for the burst loops: a pointer to its IOVA table. A copy
/// is valid while a reference to the pool is held (a ring's handle).
#[derive(Clone, Copy)]
pub(crate) struct BufIovas {
    table: *const u64,
}

// SAFETY: the pointer is into the pool's immutable IOVA table, read only;
// the pool itself is `Send + Sync` (see `Mempool`), so the view may move to
// and be read from any thread that holds a reference to the pool.
unsafe impl Send for BufIovas {}
// SAFETY: as above.
unsafe impl Sync for BufIovas {}

impl BufIovas {
    /// IOVA of buffer `idx`.
    ///
    /// # Safety
    /// `idx` is a buffer index of the pool this came from (`idx <
    /// capacity`: indices come only from the pool's own bookkeeping, never
    /// from the device), and that pool is still alive.
    #[inline(always)]
    pub(crate) unsafe fn get(self, idx: u32) -> u64 {
        // SAFETY: the table has `capacity` entries and lives as long as the
        // pool (the caller's promises).
        unsafe { *self.table.add(idx as usize) }
    }
}

/// Give back one reference to the pool at `ptr`, freeing it (region unmapped
/// from the IOMMU and unmapped from the process) when it was the last.
///
/// # Safety
/// The caller owns one reference to `ptr` and does not use `ptr` afterwards.
pub(crate) unsafe fn release_one(ptr: NonNull<Shared>) {
    // SAFETY: the caller's reference keeps the pool alive until this decrement.
    let before = unsafe { ptr.as_ref() }.refs.fetch_sub(1, Ordering::Release);
    if before == 1 {
        // Every other reference was given up with Release: see their writes
        // (the last free-list pushes) before freeing, as `Arc` does.
        fence(Ordering::Acquire);
        // SAFETY: the count reached zero, so no handle, cache, ring or packet
        // refers to the pool any more; it was made by `Box::leak` in `new`.
        drop(unsafe { Box::from_raw(ptr.as_ptr()) });
    }
}

/// A handle to a pool of `count` DMA buffers of `buf_size` bytes each. Cheap
/// to clone (one more reference); `Send + Sync`.
pub struct Mempool {
    ptr: NonNull<Shared>,
}

// SAFETY: `Shared` is only reached through `&Shared` (its fields are a
// thread-safe free list, an atomic count, and immutable data), and the count
// is atomic, so handles may move between and be shared across threads.
unsafe impl Send for Mempool {}
// SAFETY: as above.
unsafe impl Sync for Mempool {}

impl fmt::Debug for Mempool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mempool")
            .field("count", &self.capacity())
            .field("buf_size", &self.buf_size())
            .field("free", &self.free_count())
            .finish()
    }
}

impl Mempool {
    /// Default buffer size in bytes (DPDK's `RTE_MBUF_DEFAULT_DATAROOM`).
    pub const DEFAULT_BUF_SIZE: usize = 2048;

    /// Allocate a pool of `count` buffers of `buf_size` bytes in one DMA
    /// region of [`Mempool::region_bytes`] bytes, no buffer crossing a page.
    ///
    /// `buf_size` is rounded up to a multiple of 128 bytes (RX buffer addresses
    /// must be at least 2-byte aligned; 128 keeps buffers cache-line aligned).
    ///
    /// # Errors
    /// [`DmaError::BufferLargerThanPage`] when a buffer cannot fit in one
    /// page (more than 4 KiB on [`PageSize::Small4K`]); those of
    /// [`DmaRegion::new`], e.g. [`DmaError::NoHugepages`].
    pub fn new(
        count: u32,
        buf_size: usize,
        page: PageSize,
        mapper: Arc<dyn DmaMapper>,
    ) -> Result<Mempool, DmaError> {
        Self::with_headroom(count, buf_size, 0, page, mapper)
    }

    /// Most bytes of headroom a pool keeps ([`Mempool::with_headroom`]),
    /// DPDK's `RTE_PKTMBUF_HEADROOM`.
    pub const MAX_HEADROOM: usize = 128;

    /// [`Mempool::new`] with `headroom` bytes (rounded up to a multiple of
    /// 64, at most [`Mempool::MAX_HEADROOM`]) kept in front of each
    /// buffer's data, inside its `buf_size`-byte slot: the memory and
    /// [`Mempool::region_bytes`] are those of [`Mempool::new`], a
    /// [`Packet`] starts after the headroom (its IOVA and data too), and
    /// [`Mempool::buf_size`] (the data room, each packet's capacity) is
    /// the rounded `buf_size` less the headroom. A device may write into
    /// the headroom what goes in front of a frame: pollnic's packed
    /// virtio-net receive queues put the `virtio_net_hdr` there, one
    /// descriptor per buffer, as DPDK's virtio PMD puts it in the mbuf's
    /// headroom (`virtio_recv_pkts_packed`).
    ///
    /// # Errors
    /// As [`Mempool::new`].
    ///
    /// # Panics
    /// If `headroom` exceeds [`Mempool::MAX_HEADROOM`] or leaves less than
    /// 128 bytes of data room.
    pub fn with_headroom(
        count: u32,
        buf_size: usize,
        headroom: usize,
        page: PageSize,
        mapper: Arc<dyn DmaMapper>,
    ) -> Result<Mempool, DmaError> {
        let buf_size = Self::rounded_buf_size(buf_size);
        let headroom = headroom.next_multiple_of(64);
        assert!(
            headroom <= Self::MAX_HEADROOM && headroom + 128 <= buf_size,
            "mempool headroom {headroom} must be at most {} and leave 128 of {buf_size} bytes",
            Self::MAX_HEADROOM
        );
        let len = Self::region_bytes(count, buf_size, page)?;
        let per_page = (page.bytes() / buf_size) as u64;
        let offsets: Box<[u64]> = (0..count as u64)
            .map(|i| {
                i / per_page * page.bytes() as u64
                    + i % per_page * buf_size as u64
                    + headroom as u64
            })
            .collect();
        let region = DmaRegion::new(len, page, mapper)?;
        // Each buffer lies inside one page (`region_bytes`), so its page's
        // device address plus its offset reaches all of it, with an IOMMU
        // or physical addresses alike.
        let iovas: Box<[u64]> = offsets
            .iter()
            .map(|&o| {
                region
                    .iova_at(o as usize)
                    .expect("every offset lies inside the region")
            })
            .collect();
        let free = ArrayQueue::new(count.max(1) as usize);
        for i in 0..count {
            let _ = free.push(i);
        }
        let shared = Box::new(Shared {
            refs: AtomicUsize::new(1),
            region,
            buf_size: (buf_size - headroom) as u32,
            headroom: headroom as u32,
            count,
            offsets,
            iovas,
            free,
        });
        Ok(Mempool {
            ptr: NonNull::from(Box::leak(shared)),
        })
    }

    /// `buf_size` as a pool stores it: at least 128, rounded up to a
    /// multiple of 128 bytes.
    pub fn rounded_buf_size(buf_size: usize) -> usize {
        buf_size.max(128).div_ceil(128) * 128
    }

    /// Bytes of DMA memory a pool of `count` buffers of `buf_size` bytes
    /// takes on `page`: whole pages of `page.bytes() / buf_size` buffers each
    /// (`buf_size` rounded as [`Mempool::rounded_buf_size`] does). At 9 KiB
    /// buffers a 2 MiB page holds 227 of them.
    ///
    /// # Errors
    /// [`DmaError::BufferLargerThanPage`] when one buffer exceeds a page.
    pub fn region_bytes(count: u32, buf_size: usize, page: PageSize) -> Result<usize, DmaError> {
        let buf_size = Self::rounded_buf_size(buf_size);
        let per_page = page.bytes() / buf_size;
        if per_page == 0 {
            return Err(DmaError::BufferLargerThanPage {
                buf_size,
                page_bytes: page.bytes(),
            });
        }
        Ok((count as usize).div_ceil(per_page).max(1) * page.bytes())
    }

    #[inline]
    pub(crate) fn shared(&self) -> &Shared {
        // SAFETY: this handle holds a reference, so the pool is alive.
        unsafe { self.ptr.as_ref() }
    }

    #[inline]
    pub(crate) fn as_ptr(&self) -> NonNull<Shared> {
        self.ptr
    }

    /// Take one buffer from the shared free list as an empty [`Packet`]
    /// (length 0), or `None` when the list is empty. Callable from any thread;
    /// a queue's own thread allocates faster from its [`PoolCache`].
    pub fn alloc(&self) -> Option<Packet> {
        let idx = self.shared().free.pop()?;
        self.shared().acquire(1);
        // SAFETY: `idx` came off the shared free list (owned, free) and one
        // reference was acquired above for the packet.
        Some(unsafe { Packet::from_parts(self.ptr, idx, 0, 0, 0) })
    }

    /// Buffers on the shared free list now. Buffers parked in a queue's
    /// [`PoolCache`] are free too but not counted here; they return to the
    /// list when the cache (its ring) is dropped.
    pub fn free_count(&self) -> usize {
        self.shared().free.len()
    }
    /// Number of buffers in the pool.
    pub fn capacity(&self) -> u32 {
        self.shared().count
    }
    /// Data room of each buffer in bytes: a [`Packet`]'s capacity (the
    /// rounded `buf_size` less the headroom).
    pub fn buf_size(&self) -> usize {
        self.shared().buf_size as usize
    }
    /// Bytes kept in front of each buffer's data (0 unless made with
    /// [`Mempool::with_headroom`]).
    pub fn headroom(&self) -> usize {
        self.shared().headroom as usize
    }
    /// The DMA region the buffers live in.
    pub fn region(&self) -> &DmaRegion {
        &self.shared().region
    }
    /// Whether two handles name the same pool.
    pub fn same_pool(&self, other: &Mempool) -> bool {
        self.ptr == other.ptr
    }

    /// Accounting for tests and the fuzz harness (not for the data path): the
    /// buffer indices on the shared free list, oldest first. It takes every
    /// index off the list and puts it back in the same order, so call it only
    /// while no other thread allocates from or frees into this pool.
    pub fn free_indices(&self) -> Vec<u32> {
        let free = &self.shared().free;
        let mut out = Vec::with_capacity(free.len());
        while let Some(i) = free.pop() {
            out.push(i);
        }
        for &i in &out {
            self.shared().free_one(i);
        }
        out
    }

    /// Accounting for tests and the fuzz harness: the pool's reference count,
    /// i.e. live [`Mempool`] handles (each ring and [`PoolCache`] holds one),
    /// plus live [`Packet`]s, plus TX descriptors in flight, once every burst
    /// call has returned.
    pub fn references(&self) -> usize {
        self.shared().refs.load(Ordering::Acquire)
    }

    /// Move up to `n` free buffer indices from the shared list into `dst`;
    /// returns how many.
    pub(crate) fn alloc_bulk(&self, dst: &mut Vec<u32>, n: usize) -> usize {
        let free = &self.shared().free;
        let mut got = 0;
        while got < n {
            let Some(i) = free.pop() else { break };
            dst.push(i);
            got += 1;
        }
        got
    }

    /// Return every index in `src` to the shared list (leaves `src` empty).
    pub(crate) fn free_bulk(&self, src: &mut Vec<u32>) {
        for i in src.drain(..) {
            self.shared().free_one(i);
        }
    }

    /// IOVA of buffer `idx` (`idx < capacity()`).
    pub(crate) fn buf_iova(&self, idx: u32) -> u64 {
        self.shared().buf_iova(idx)
    }
}

impl Clone for Mempool {
    fn clone(&self) -> Self {
        self.shared().acquire(1);
        Mempool { ptr: self.ptr }
    }
}

impl Drop for Mempool {
    fn drop(&mut self) {
        // SAFETY: this handle owns one reference and is never used again.
        unsafe { release_one(self.ptr) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dma::IdentityMapper;

    fn pool(n: u32) -> Mempool {
        Mempool::new(n, 2048, PageSize::Small4K, Arc::new(IdentityMapper)).unwrap()
    }

    #[test]
    fn alloc_until_empty_then_drop_returns_everything() {
        let p = pool(8);
        let mut held: Vec<Packet> = (0..8).map(|_| p.alloc().unwrap()).collect();
        assert!(p.alloc().is_none());
        assert_eq!(p.free_count(), 0);
        let ivas: std::collections::HashSet<u64> = held.iter().map(|b| b.iova()).collect();
        assert_eq!(ivas.len(), 8, "every buffer distinct");
        held.truncate(3);
        assert_eq!(p.free_count(), 5);
        drop(held);
        assert_eq!(p.free_count(), 8);
    }

    #[test]
    fn data_round_trips_and_length_is_bounded() {
        let p = pool(2);
        let mut a = p.alloc().unwrap();
        a.set_len(60).unwrap();
        a.data_mut().copy_from_slice(&[0xab; 60]);
        assert_eq!(a.data(), &[0xab; 60][..]);
        assert_eq!(
            a.set_len(2049),
            Err(PacketTooLong {
                len: 2049,
                capacity: 2048
            })
        );
        assert_eq!(a.len(), 60);
    }

    #[test]
    fn bulk_ops() {
        let p = pool(16);
        let mut v = Vec::new();
        assert_eq!(p.alloc_bulk(&mut v, 10), 10);
        assert_eq!(p.alloc_bulk(&mut v, 10), 6);
        assert_eq!(p.free_count(), 0);
        p.free_bulk(&mut v);
        assert!(v.is_empty());
        assert_eq!(p.free_count(), 16);
    }

    #[test]
    fn references_count_handles_and_packets() {
        let p = pool(4);
        let refs = |p: &Mempool| p.shared().refs.load(Ordering::Relaxed);
        assert_eq!(refs(&p), 1);
        let q = p.clone();
        let a = p.alloc().unwrap();
        assert_eq!(refs(&p), 3);
        drop(q);
        drop(a);
        assert_eq!(refs(&p), 1);
    }

    /// Every MTU the driver accepts (1500 to 9000, its RX buffer being
    /// MTU plus 22 rounded up to 1 KiB, as `DeviceConfig::rx_buf_size` does), and
    /// the edge buffer sizes around the page fractions, on 2 MiB and 4 KiB
    /// pages: no buffer crosses a page boundary, buffers do not overlap, and
    /// the region is as small as that allows. A size that cannot fit in a
    /// page is refused.
    #[test]
    fn no_buffer_crosses_a_page_at_any_mtu_or_page_size() {
        let mut sizes: Vec<usize> = (1500..=9000)
            .step_by(1)
            .map(|mtu: usize| (mtu + 22).div_ceil(1024) * 1024)
            .collect();
        sizes.extend([
            128, 1536, 2048, 2176, 4096, 4224, 8192, 9216, 9344, 10240, 16384,
        ]);
        sizes.sort_unstable();
        sizes.dedup();
        for page in [PageSize::Emulated2M, PageSize::Small4K] {
            let pb = page.bytes() as u64;
            for &size in &sizes {
                // Enough buffers to fill several pages.
                let count = (3 * pb as usize / size).max(4) as u32 + 1;
                let p = match Mempool::new(count, size, page, Arc::new(IdentityMapper)) {
                    Ok(p) => p,
                    Err(DmaError::BufferLargerThanPage {
                        buf_size,
                        page_bytes,
                    }) => {
                        assert!(buf_size > page_bytes, "{size} refused on {page:?}");
                        continue;
                    }
                    Err(e) => panic!("{size} on {page:?}: {e}"),
                };
                let bs = p.buf_size() as u64;
                let r = p.region();
                let mut spans: Vec<(u64, u64)> = (0..count)
                    .map(|i| (p.buf_iova(i) - r.iova(), p.buf_iova(i) - r.iova() + bs))
                    .collect();
                for &(a, b) in &spans {
                    assert_eq!(
                        a / pb,
                        (b - 1) / pb,
                        "{bs}-byte buffer at {a} crosses a {pb}-byte page"
                    );
                    assert!(b <= r.len() as u64, "buffer past the region's end");
                }
                spans.sort_unstable();
                assert!(
                    spans.windows(2).all(|w| w[0].1 <= w[1].0),
                    "buffers overlap"
                );
                let per_page = pb / bs;
                assert_eq!(r.len() as u64, (count as u64).div_ceil(per_page) * pb);
                assert_eq!(Mempool::region_bytes(count, size, page).unwrap(), r.len());
                // The packet's address agrees with its IOVA's offset.
                let pkt = p.alloc().unwrap();
                let off = pkt.iova() - r.iova();
                assert_eq!(p.shared().buf_ptr(0) as u64 - r.va() as u64, off);
            }
        }
    }

    /// Headroom comes out of each buffer's slot: the region, the page
    /// layout and the slots are those of a pool without it; each packet
    /// starts `headroom` bytes into its slot, and the data room shrinks by
    /// as much. Odd requests round up to 64.
    #[test]
    fn headroom_shifts_each_buffer_inside_its_slot() {
        for page in [PageSize::Emulated2M, PageSize::Small4K] {
            let plain = Mempool::new(9, 2048, page, Arc::new(IdentityMapper)).unwrap();
            let p = Mempool::with_headroom(9, 2048, 20, page, Arc::new(IdentityMapper)).unwrap();
            assert_eq!(p.headroom(), 64);
            assert_eq!(p.buf_size(), 2048 - 64);
            assert_eq!(plain.headroom(), 0);
            assert_eq!(p.region().len(), plain.region().len());
            for i in 0..9 {
                let off = |m: &Mempool| m.buf_iova(i) - m.region().iova();
                assert_eq!(off(&p), off(&plain) + 64, "buffer {i}");
            }
            let mut a = p.alloc().unwrap();
            assert_eq!(a.capacity(), 2048 - 64);
            assert!(a.set_len(2048 - 64).is_ok() && a.set_len(2048 - 63).is_err());
            assert_eq!(
                a.iova() - p.region().iova(),
                p.shared().offsets[a.buf_index() as usize]
            );
        }
    }

    #[test]
    #[should_panic(expected = "mempool headroom")]
    fn a_headroom_that_leaves_no_data_room_is_refused() {
        let _ = Mempool::with_headroom(1, 128, 64, PageSize::Small4K, Arc::new(IdentityMapper));
    }

    #[test]
    fn a_nine_kib_buffer_is_refused_on_small_pages_with_a_clear_error() {
        let err = Mempool::new(4, 9216, PageSize::Small4K, Arc::new(IdentityMapper)).unwrap_err();
        assert!(matches!(
            err,
            DmaError::BufferLargerThanPage {
                buf_size: 9216,
                page_bytes: 4096
            }
        ));
        assert!(err.to_string().contains("hugepages"), "{err}");
        // 2 MiB pages hold 227 of them, 5,120 bytes left at each page's end.
        assert_eq!(
            Mempool::region_bytes(227, 9216, PageSize::Huge2M).unwrap(),
            2 << 20
        );
        assert_eq!(
            Mempool::region_bytes(228, 9216, PageSize::Huge2M).unwrap(),
            4 << 20
        );
    }

    #[test]
    fn packets_outlive_every_handle_and_cross_threads() {
        let p = pool(4);
        let mut a = p.alloc().unwrap();
        a.set_len(4).unwrap();
        a.data_mut().copy_from_slice(b"live");
        drop(p); // the packet alone keeps the region mapped
        let t = std::thread::spawn(move || {
            assert_eq!(a.data(), b"live");
            drop(a); // last reference: frees the pool on this thread
        });
        t.join().unwrap();
    }
}
