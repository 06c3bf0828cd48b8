//! [`PoolCache`]: one queue's private stack of free buffer indices, in front
//! of its mempool's shared free list (DPDK's per-lcore mempool cache).

use super::{Mempool, Packet};

/// A stack of free buffers of one [`Mempool`], owned by one thread (one
/// queue): taking and returning a buffer costs no atomic operation. It refills
/// from the shared free list in bulk when it runs dry, and spills half of
/// itself back when it overflows. Dropping it returns every buffer it holds.
///
/// The RX ring takes from it to re-arm descriptors; TX reclaim and
/// [`PoolCache::free_bulk`] return this pool's packets to it (other pools'
/// packets go back to their own shared lists).
///
/// Every buffer in the cache holds one pool reference (as every buffer
/// outside the shared free list does, see the module docs): a packet that
/// comes back leaves its reference with its buffer, and a packet handed out
/// takes its buffer's. So a queue that forwards (RX, then TX reclaim) never
/// touches the pool's atomic reference count; a refill or a spill moves the
/// references of half the cache with one atomic operation.
pub struct PoolCache {
    pool: Mempool,
    /// `bufs[..len]` are free buffer indices; `bufs.len()` is the capacity.
    bufs: Box<[u32]>,
    len: usize,
}

impl std::fmt::Debug for PoolCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolCache")
            .field("len", &self.len)
            .field("cap", &self.bufs.len())
            .finish()
    }
}

impl PoolCache {
    /// A cache of at most `cap` buffers (at least 2) in front of `pool`. It
    /// starts empty; a refill or a spill moves `cap / 2` buffers.
    pub fn new(pool: Mempool, cap: usize) -> Self {
        PoolCache {
            pool,
            bufs: vec![0; cap.max(2)].into_boxed_slice(),
            len: 0,
        }
    }

    /// The pool this cache serves.
    pub fn pool(&self) -> &Mempool {
        &self.pool
    }
    /// Buffers in the cache now.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when the cache holds no buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Most buffers the cache holds.
    pub fn capacity(&self) -> usize {
        self.bufs.len()
    }

    /// Accounting for tests and the fuzz harness: the free buffer indices
    /// the cache holds now.
    pub fn cached_indices(&self) -> &[u32] {
        &self.bufs[..self.len]
    }

    /// Take a free buffer index, refilling from the shared list when empty.
    #[inline]
    pub(crate) fn get(&mut self) -> Option<u32> {
        if self.len == 0 {
            self.refill_to(1);
            if self.len == 0 {
                return None;
            }
        }
        self.len -= 1;
        // SAFETY: `len <= bufs.len()` always holds (`put` spills before it
        // would pass it, `commit` and `refill_to` clamp to it), so the
        // decremented `len` is in bounds.
        Some(unsafe { *self.bufs.get_unchecked(self.len) })
    }

    /// Take four free buffer indices at once, in the order four calls of
    /// [`PoolCache::get`] would give them, when the cache holds at least four
    /// (no refill: `None` otherwise).
    #[inline]
    pub(crate) fn take4(&mut self) -> Option<[u32; 4]> {
        if self.len < 4 {
            return None;
        }
        self.len -= 4;
        let l = self.len;
        // SAFETY: `len <= bufs.len()` always holds (see `get`), so the four
        // slots `l .. l + 4` below the old `len` are in bounds.
        unsafe {
            let b = self.bufs.as_ptr().add(l);
            Some([*b.add(3), *b.add(2), *b.add(1), *b])
        }
    }

    /// Fill from the shared list up to half the capacity, or to `n` if more.
    #[cold]
    fn refill_to(&mut self, n: usize) {
        let target = (self.bufs.len() / 2).max(n).min(self.bufs.len());
        let shared = self.pool.shared();
        let before = self.len;
        while self.len < target {
            let Some(i) = shared.free.pop() else { break };
            self.bufs[self.len] = i;
            self.len += 1;
        }
        // Each buffer now outside the shared list holds a reference.
        if self.len > before {
            shared.acquire(self.len - before);
        }
    }

    /// Return a free buffer index of this pool.
    #[inline]
    pub(crate) fn put(&mut self, idx: u32) {
        if self.len >= self.bufs.len() {
            self.spill();
        }
        self.bufs[self.len] = idx;
        self.len += 1;
    }

    /// Move what is above half the capacity back to the shared list.
    #[cold]
    fn spill(&mut self) {
        let keep = self.bufs.len() / 2;
        if self.len > keep {
            let shared = self.pool.shared();
            for &i in &self.bufs[keep..self.len] {
                shared.free_one(i);
            }
            // Their references; the cache's own handle still holds one.
            shared.release_not_last(self.len - keep);
            self.len = keep;
        }
    }

    /// Make room for `k` more buffers (spilling half to the shared list if
    /// needed) and return the cache's free slots, at least `k` of them when
    /// `k <= capacity / 2`. Fill a prefix, then call [`PoolCache::commit`].
    #[inline]
    pub(crate) fn room(&mut self, k: usize) -> &mut [u32] {
        if self.bufs.len() - self.len < k {
            self.spill();
        }
        &mut self.bufs[self.len..]
    }

    /// Add the `filled` buffers written at the start of [`PoolCache::room`]'s
    /// slice, which came from `filled` packets (their references stay with
    /// the buffers).
    #[inline]
    pub(crate) fn commit(&mut self, filled: usize) {
        self.len = (self.len + filled).min(self.bufs.len());
    }

    /// Return a packet's buffer: to this cache when it is from this pool (its
    /// reference stays with the buffer), otherwise to its own pool's shared
    /// list.
    #[inline]
    pub(crate) fn recycle(&mut self, p: Packet) {
        if p.pool_ptr() == self.pool.as_ptr() {
            let (_, idx) = p.into_parts();
            self.put(idx);
        } else {
            drop(p);
        }
    }

    /// Take one buffer as an empty [`Packet`] (length 0), or `None` when the
    /// cache and the shared list are both empty.
    pub fn alloc(&mut self) -> Option<Packet> {
        let idx = self.get()?;
        // SAFETY: `idx` came off this cache (owned, free) with its reference.
        Some(unsafe { Packet::from_parts(self.pool.as_ptr(), idx, 0, 0, 0) })
    }

    /// Append up to `n` empty packets (length 0) to `out`, with no atomic
    /// operation unless the cache refills; returns how many (fewer when the
    /// pool runs dry).
    pub fn alloc_burst(&mut self, out: &mut Vec<Packet>, n: usize) -> usize {
        let n = n.min(self.pool.capacity() as usize);
        let ptr = self.pool.as_ptr();
        let mut got = 0;
        while got < n {
            let Some(idx) = self.get() else { break };
            // SAFETY: `idx` came off this cache (owned, free) with its
            // reference.
            out.push(unsafe { Packet::from_parts(ptr, idx, 0, 0, 0) });
            got += 1;
        }
        got
    }

    /// Return every packet in `pkts` (leaves it empty): this pool's to the
    /// cache with no atomic operation unless it spills, others' to their
    /// pools. DPDK's `rte_pktmbuf_free_bulk`.
    pub fn free_bulk(&mut self, pkts: &mut Vec<Packet>) {
        for p in pkts.drain(..) {
            self.recycle(p);
        }
    }
}

impl Drop for PoolCache {
    fn drop(&mut self) {
        let shared = self.pool.shared();
        for &i in &self.bufs[..self.len] {
            shared.free_one(i);
        }
        // The buffers' references; the cache's own handle still holds one.
        if self.len > 0 {
            shared.release_not_last(self.len);
        }
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dma::{IdentityMapper, PageSize};
    use std::sync::Arc;

    fn pool(n: u32) -> Mempool {
        Mempool::new(n, 2048, PageSize::Small4K, Arc::new(IdentityMapper)).unwrap()
    }

    #[test]
    fn refills_and_spills_in_halves_and_returns_everything() {
        let p = pool(64);
        let mut c = PoolCache::new(p.clone(), 16);
        let mut held = Vec::new();
        assert_eq!(c.alloc_burst(&mut held, 20), 20);
        // Two refills of 8 and one of 8 more: 24 taken off the shared list.
        assert_eq!(p.free_count(), 64 - 24);
        assert_eq!(c.len(), 4);
        c.free_bulk(&mut held);
        assert!(held.is_empty());
        assert!(c.len() <= 16);
        assert_eq!(p.free_count() + c.len(), 64);
        drop(c);
        assert_eq!(p.free_count(), 64);
    }

    #[test]
    fn room_for_more_than_the_capacity_gives_what_there_is() {
        // A TX ring larger than the RX cache can reclaim a run longer than
        // the cache holds (found by the guest overrun test).
        let p = pool(64);
        let mut c = PoolCache::new(p.clone(), 8);
        assert_eq!(c.room(20).len(), 8, "empty cache: all its slots");
        let mut held = Vec::new();
        c.alloc_burst(&mut held, 6);
        c.free_bulk(&mut held);
        assert_eq!(c.room(20).len(), 8 - c.len());
        drop(c);
        assert_eq!(p.free_count(), 64);
    }

    #[test]
    fn alloc_burst_of_any_size_keeps_the_reference_count_exact() {
        let p = pool(8);
        let mut c = PoolCache::new(p.clone(), 8);
        let mut out = Vec::new();
        assert_eq!(c.alloc_burst(&mut out, usize::MAX), 8);
        // 1 (p) + 1 (cache) + 8 packets.
        assert_eq!(
            p.shared().refs.load(std::sync::atomic::Ordering::Relaxed),
            10
        );
        // Back into the cache: the references stay with the buffers.
        c.free_bulk(&mut out);
        assert_eq!(
            p.shared().refs.load(std::sync::atomic::Ordering::Relaxed),
            10
        );
        assert_eq!(c.alloc_burst(&mut out, 3), 3);
        drop(out);
        drop(c);
        assert_eq!(
            p.shared().refs.load(std::sync::atomic::Ordering::Relaxed),
            1
        );
        assert_eq!(p.free_count(), 8);
    }

    #[test]
    fn foreign_packets_go_back_to_their_own_pool() {
        let a = pool(8);
        let b = pool(8);
        let mut cb = PoolCache::new(b.clone(), 8);
        let mut pkts = vec![a.alloc().unwrap(), a.alloc().unwrap()];
        cb.free_bulk(&mut pkts);
        assert_eq!(a.free_count(), 8);
        assert_eq!(cb.len(), 0);
    }

    #[test]
    fn alloc_burst_stops_when_dry_and_keeps_the_count_right() {
        let p = pool(4);
        let mut c = PoolCache::new(p.clone(), 4);
        let mut out = Vec::new();
        assert_eq!(c.alloc_burst(&mut out, 10), 4);
        assert!(c.alloc().is_none());
        drop(out);
        drop(c);
        assert_eq!(p.free_count(), 4);
        assert_eq!(
            p.shared().refs.load(std::sync::atomic::Ordering::Relaxed),
            1
        );
    }
}
