//! A mempool of fixed-size DMA buffers and the zero-copy [`Packet`] that owns
//! one of them.
//!
//! One [`DmaRegion`] is carved into `count` buffers of `buf_size` bytes (2048 is
//! the field's default data room: it holds any standard frame up to 1518 bytes
//! plus CRC). The free list is a lock-free bounded MPMC ring of buffer indices
//! (crossbeam's `ArrayQueue`, the role `rte_ring` plays under a DPDK mempool):
//! no lock on the hot path, and a `Packet` may be dropped on any thread. Buffer
//! identity always comes from pollnic's bookkeeping, never from an index the
//! device wrote.

use crate::dma::{DmaError, DmaMapper, DmaRegion, PageSize};
use crossbeam_queue::ArrayQueue;
use std::fmt;
use std::sync::Arc;

/// A pool of `count` DMA buffers of `buf_size` bytes each.
pub struct Mempool {
    region: DmaRegion,
    buf_size: u32,
    count: u32,
    free: ArrayQueue<u32>,
}

impl fmt::Debug for Mempool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mempool")
            .field("count", &self.count)
            .field("buf_size", &self.buf_size)
            .field("free", &self.free_count())
            .finish()
    }
}

impl Mempool {
    /// Default buffer size in bytes (DPDK's `RTE_MBUF_DEFAULT_DATAROOM`).
    pub const DEFAULT_BUF_SIZE: usize = 2048;

    /// Allocate a pool of `count` buffers of `buf_size` bytes in one DMA region.
    ///
    /// `buf_size` is rounded up to a multiple of 128 bytes (RX buffer addresses
    /// must be at least 2-byte aligned; 128 keeps buffers cache-line aligned).
    ///
    /// # Errors
    /// Those of [`DmaRegion::new`], e.g. [`DmaError::NoHugepages`].
    pub fn new(
        count: u32,
        buf_size: usize,
        page: PageSize,
        mapper: Arc<dyn DmaMapper>,
    ) -> Result<Arc<Self>, DmaError> {
        let buf_size = buf_size.max(128).div_ceil(128) * 128;
        let region = DmaRegion::new(count as usize * buf_size, page, mapper)?;
        let free = ArrayQueue::new(count.max(1) as usize);
        for i in 0..count {
            let _ = free.push(i);
        }
        Ok(Arc::new(Mempool {
            region,
            buf_size: buf_size as u32,
            count,
            free,
        }))
    }

    /// Take one buffer as an empty [`Packet`] (length 0), or `None` when the
    /// pool is exhausted.
    pub fn alloc(self: &Arc<Self>) -> Option<Packet> {
        let idx = self.free.pop()?;
        Some(Packet {
            pool: Arc::clone(self),
            idx,
            len: 0,
            rss_hash: 0,
        })
    }

    /// Number of buffers currently free.
    pub fn free_count(&self) -> usize {
        self.free.len()
    }
    /// Number of buffers in the pool.
    pub fn capacity(&self) -> u32 {
        self.count
    }
    /// Size of each buffer in bytes.
    pub fn buf_size(&self) -> usize {
        self.buf_size as usize
    }

    /// The DMA region the buffers live in.
    pub fn region(&self) -> &DmaRegion {
        &self.region
    }

    /// Move up to `n` free buffer indices into `dst`; returns how many.
    pub(crate) fn alloc_bulk(&self, dst: &mut Vec<u32>, n: usize) -> usize {
        let mut got = 0;
        while got < n {
            let Some(i) = self.free.pop() else { break };
            dst.push(i);
            got += 1;
        }
        got
    }

    /// Return every index in `src` to the pool (leaves `src` empty).
    pub(crate) fn free_bulk(&self, src: &mut Vec<u32>) {
        for i in src.drain(..) {
            self.free_one(i);
        }
    }

    pub(crate) fn free_one(&self, idx: u32) {
        debug_assert!(idx < self.count);
        // Capacity equals the buffer count and every index is free at most
        // once, so the ring can never be full here.
        let pushed = self.free.push(idx);
        debug_assert!(pushed.is_ok(), "buffer {idx} returned twice");
    }

    /// IOVA of buffer `idx` (`idx < capacity()`).
    pub(crate) fn buf_iova(&self, idx: u32) -> u64 {
        debug_assert!(idx < self.count);
        self.region.iova() + idx as u64 * self.buf_size as u64
    }

    fn buf_ptr(&self, idx: u32) -> *mut u8 {
        assert!(idx < self.count, "buffer index out of range");
        // `idx * buf_size + buf_size <= region.len()` by construction in `new`.
        self.region
            .va()
            .wrapping_add(idx as usize * self.buf_size as usize)
    }

    /// Wrap buffer `idx`, which the caller owns, as a received packet.
    pub(crate) fn packet(self: &Arc<Self>, idx: u32, len: u16, rss_hash: u32) -> Packet {
        debug_assert!(len as u32 <= self.buf_size);
        Packet {
            pool: Arc::clone(self),
            idx,
            len: len as u32,
            rss_hash,
        }
    }
}

/// `set_len` was asked for more bytes than the buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("packet length {len} exceeds the buffer size of {capacity} bytes")]
pub struct PacketTooLong {
    /// Requested length in bytes.
    pub len: usize,
    /// Buffer size in bytes.
    pub capacity: usize,
}

/// One frame in a DMA buffer, owned exclusively: zero copy from the NIC to the
/// application and back. Dropping it returns the buffer to its mempool; a
/// `Packet` handed to `tx_burst` is returned once the NIC has sent it.
pub struct Packet {
    pool: Arc<Mempool>,
    idx: u32,
    len: u32,
    rss_hash: u32,
}

impl fmt::Debug for Packet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Packet")
            .field("idx", &self.idx)
            .field("len", &self.len)
            .finish()
    }
}

impl Packet {
    /// The frame bytes (destination MAC first, no FCS), `len()` bytes.
    pub fn data(&self) -> &[u8] {
        // SAFETY: this Packet owns buffer `idx` exclusively: it was taken off
        // the free list (or out of a completed RX descriptor whose slot now
        // holds a different buffer), so no ring has it armed and the device
        // has no reason to write it; `len <= buf_size` is kept by every
        // constructor and `set_len`; the region outlives us through `pool`.
        unsafe { std::slice::from_raw_parts(self.pool.buf_ptr(self.idx), self.len as usize) }
    }

    /// The frame bytes, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `data`, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.pool.buf_ptr(self.idx), self.len as usize) }
    }

    /// Set the frame length in bytes (new bytes keep whatever the buffer held).
    ///
    /// # Errors
    /// [`PacketTooLong`] when `len` exceeds [`Packet::capacity`].
    pub fn set_len(&mut self, len: usize) -> Result<(), PacketTooLong> {
        if len > self.capacity() {
            return Err(PacketTooLong {
                len,
                capacity: self.capacity(),
            });
        }
        self.len = len as u32;
        Ok(())
    }

    /// Frame length in bytes.
    pub fn len(&self) -> usize {
        self.len as usize
    }
    /// True for a zero-length packet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Buffer size in bytes.
    pub fn capacity(&self) -> usize {
        self.pool.buf_size()
    }
    /// IOVA of the first byte (what a TX descriptor points at).
    pub fn iova(&self) -> u64 {
        self.pool.buf_iova(self.idx)
    }
    /// The Toeplitz RSS hash the NIC wrote back for this frame (0 when RSS is
    /// off), 82576 datasheet §7.1.2.10.
    pub fn rss_hash(&self) -> u32 {
        self.rss_hash
    }
    /// The pool this buffer returns to.
    pub fn pool(&self) -> &Arc<Mempool> {
        &self.pool
    }
}

impl Drop for Packet {
    fn drop(&mut self) {
        self.pool.free_one(self.idx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dma::IdentityMapper;

    fn pool(n: u32) -> Arc<Mempool> {
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
}
