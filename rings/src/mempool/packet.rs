//! [`Packet`]: one frame in a DMA buffer, owned exclusively.

use super::{release_one, Shared};
use std::fmt;
use std::ptr::NonNull;

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
/// application and back. 24 bytes.
///
/// Dropping it returns the buffer to its mempool's shared free list, on any
/// thread, even after the `Device` is closed: the packet holds a reference
/// that keeps the pool's memory (and its DMA mapping) alive. A `Packet` handed
/// to `tx_burst` is returned once the NIC has sent it; returning packets
/// through a queue's [`super::PoolCache`] (`free_bulk`) is cheaper than
/// dropping them one by one.
///
/// # Example
///
/// A packet taken from a pool of host memory (no device: identity-mapped
/// 4 KiB pages), filled, and returned by dropping it:
///
/// ```
/// use pollnic_rings::{IdentityMapper, Mempool, PageSize};
/// use std::sync::Arc;
///
/// let pool = Mempool::new(64, 2048, PageSize::Small4K, Arc::new(IdentityMapper))?;
/// let mut p = pool.alloc().expect("a free buffer");
/// p.set_len(60)?; // bytes of frame, at most the buffer size
/// p.data_mut()[..6].copy_from_slice(&[0xff; 6]); // broadcast destination MAC
/// assert_eq!((p.len(), p.capacity()), (60, 2048));
/// assert!(p.set_len(4096).is_err()); // PacketTooLong: larger than the buffer
/// assert_eq!(pool.free_count(), 63);
/// drop(p); // back to the pool
/// assert_eq!(pool.free_count(), 64);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// `repr(C)`: the vector TX path (`crate::simd`) reads the first 16 bytes
/// (pool, buffer index, length) of four packets with four loads; the layout
/// is checked at compile time below.
#[repr(C)]
pub struct Packet {
    pool: NonNull<Shared>,
    idx: u32,
    len: u32,
    rss_hash: u32,
    /// The RX status word (`pollnic_hw::offload::rx_status_word`): checksum
    /// status and stripped VLAN tag, 0 when the ring reports none.
    ol: u32,
}

/// Byte offsets the vector TX path relies on (`crate::simd::tx_quad`).
pub(crate) const PACKET_POOL_OFFSET: usize = 0;
pub(crate) const PACKET_IDX_OFFSET: usize = 8;
pub(crate) const PACKET_LEN_OFFSET: usize = 12;
const _: () = {
    assert!(std::mem::offset_of!(Packet, pool) == PACKET_POOL_OFFSET);
    assert!(std::mem::offset_of!(Packet, idx) == PACKET_IDX_OFFSET);
    assert!(std::mem::offset_of!(Packet, len) == PACKET_LEN_OFFSET);
    assert!(std::mem::size_of::<Packet>() == 24);
};

// SAFETY: a Packet owns its buffer exclusively (no ring has it armed, no other
// Packet names it) and one reference to the pool, whose shared parts are
// thread-safe (atomic count, lock-free free list); so it may move to and be
// read from other threads.
unsafe impl Send for Packet {}
// SAFETY: `&Packet` only reads the buffer and immutable pool data.
unsafe impl Sync for Packet {}

impl fmt::Debug for Packet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Packet")
            .field("idx", &self.idx)
            .field("len", &self.len)
            .finish()
    }
}

impl Packet {
    /// Wrap buffer `idx` of the pool at `pool`.
    ///
    /// # Safety
    /// The caller owns buffer `idx` of that pool (taken off a free list or out
    /// of a completed RX descriptor whose slot now holds another buffer) and
    /// one pool reference, and gives both to the packet; `len <= buf_size`.
    #[inline]
    pub(crate) unsafe fn from_parts(
        pool: NonNull<Shared>,
        idx: u32,
        len: u32,
        rss_hash: u32,
        ol: u32,
    ) -> Packet {
        Packet {
            pool,
            idx,
            len,
            rss_hash,
            ol,
        }
    }

    /// Rebuild a packet (length 0) from [`Packet::into_parts`].
    ///
    /// # Safety
    /// The caller owns buffer `idx` of the pool at `pool` and one reference to
    /// that pool (as `into_parts` handed them out), and gives both to the packet.
    #[inline]
    pub(crate) unsafe fn from_raw_parts(pool: NonNull<Shared>, idx: u32) -> Packet {
        // SAFETY: the caller's guarantee is `from_parts`'s.
        unsafe { Packet::from_parts(pool, idx, 0, 0, 0) }
    }

    /// The packet's parts (pool, buffer index, length), for the TX burst,
    /// which takes ownership of them (the packet is then never dropped).
    #[inline]
    pub(crate) fn parts(&self) -> (NonNull<Shared>, u32, u32) {
        (self.pool, self.idx, self.len)
    }

    /// Take the packet apart without returning its buffer: the caller now owns
    /// buffer `idx` and the packet's pool reference.
    #[inline]
    pub(crate) fn into_parts(self) -> (NonNull<Shared>, u32) {
        let parts = (self.pool, self.idx);
        std::mem::forget(self);
        parts
    }

    #[inline]
    pub(crate) fn shared(&self) -> &Shared {
        // SAFETY: the packet holds a reference, so the pool is alive.
        unsafe { self.pool.as_ref() }
    }

    /// The pool this buffer belongs to, as a pointer for identity checks.
    #[inline]
    pub(crate) fn pool_ptr(&self) -> NonNull<Shared> {
        self.pool
    }

    /// The frame bytes (destination MAC first, no FCS), `len()` bytes.
    pub fn data(&self) -> &[u8] {
        // SAFETY: this Packet owns buffer `idx` exclusively, so no ring has it
        // armed and the device has no reason to write it; `len <= buf_size`
        // is kept by every constructor and `set_len`; `buf_ptr` checks `idx`;
        // the region outlives us through the packet's pool reference.
        unsafe { std::slice::from_raw_parts(self.shared().buf_ptr(self.idx), self.len as usize) }
    }

    /// The frame bytes, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `data`, and `&mut self` makes this the only reference.
        unsafe {
            std::slice::from_raw_parts_mut(self.shared().buf_ptr(self.idx), self.len as usize)
        }
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
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }
    /// True for a zero-length packet.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Buffer size in bytes.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.shared().buf_size() as usize
    }
    /// Index of this packet's buffer in its mempool (its place in the
    /// pool's region comes from the pool's table), for accounting.
    #[inline]
    pub fn buf_index(&self) -> u32 {
        self.idx
    }
    /// IOVA of the first byte (what a TX descriptor points at).
    #[inline]
    pub fn iova(&self) -> u64 {
        self.shared().buf_iova(self.idx)
    }
    /// The Toeplitz RSS hash the NIC wrote back for this frame (0 when RSS is
    /// off), 82576 datasheet §7.1.2.10.
    #[inline]
    pub fn rss_hash(&self) -> u32 {
        self.rss_hash
    }
    /// The checksum status the NIC wrote back for this frame, per layer:
    /// good, bad or not checked ([`pollnic_hw::offload::RxChecksum`]).
    /// Every layer reads "not checked" unless the queue reports offload
    /// status (`DeviceConfig::rx_offload_status`) and the NIC checked it;
    /// on a packet not received (allocated for TX), likewise. A frame with
    /// a bad checksum is delivered, not dropped: the caller decides, as with
    /// DPDK's `RTE_MBUF_F_RX_L4_CKSUM_BAD`.
    #[inline]
    pub fn rx_checksum(&self) -> pollnic_hw::offload::RxChecksum {
        pollnic_hw::offload::RxChecksum::from_status_word(self.ol)
    }
    /// The 802.1Q tag (TCI) the NIC stripped from this frame (VLAN strip
    /// on, `DeviceConfig::vlan_strip`), `None` when it stripped none: the
    /// frame's bytes then no longer hold the tag.
    #[inline]
    pub fn vlan(&self) -> Option<u16> {
        pollnic_hw::offload::rx_vlan(self.ol)
    }
    /// The RX status word itself (`pollnic_hw::offload::rx_status_word`),
    /// for accounting and tests.
    #[inline]
    pub fn rx_status_word(&self) -> u32 {
        self.ol
    }
}

impl Drop for Packet {
    fn drop(&mut self) {
        self.shared().free_one(self.idx);
        // SAFETY: the packet owns one reference and is never used again.
        unsafe { release_one(self.pool) }
    }
}
