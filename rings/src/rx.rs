//! RX descriptor ring bookkeeping: refill, DD check, validation of the
//! write-back, one tail write per burst.
//!
//! Invariant: every descriptor always holds an armed buffer; the device owns
//! `[RDH, RDT)` and the slot at RDT is held back, so `RDT = next - 1` after
//! each burst (82576 datasheet §7.1.4: head == tail means no free
//! descriptors). A completed descriptor is re-armed with a fresh buffer
//! *before* its frame is handed up; when the mempool is empty the burst stops
//! and counts `rx_nombuf` instead of dropping (DPDK igb PMD behaviour).
//! Fresh buffers come from the ring's own [`PoolCache`], so the per-packet
//! path has no atomic operation; the packets of one burst take their pool
//! references with one.

use crate::descring::{DescRing, Doorbell};
use crate::mempool::{Mempool, Packet, PoolCache};
use pollnic_hw::desc::{rx_read, RXD_ERR_RXE, RXD_STAT_DD, RXD_STAT_EOP};

/// Per-ring software counters (DPDK `rte_eth_stats` terms).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxStats {
    /// Frames handed to the application.
    pub packets: u64,
    /// Bytes in those frames (no FCS).
    pub bytes: u64,
    /// `rx_burst` calls that returned at least one frame.
    pub bursts: u64,
    /// `rx_burst` calls that found nothing.
    pub empty_polls: u64,
    /// Times a burst stopped because the mempool had no buffer to refill with.
    pub rx_nombuf: u64,
    /// Descriptors dropped as invalid: error bit set, not EOP (frame larger
    /// than one buffer), zero length, or a length larger than the buffer.
    pub rx_errors: u64,
}

/// Errors creating a ring.
#[derive(Debug, thiserror::Error)]
pub enum RingError {
    /// The device could not reach the pool's buffers (another IO address
    /// space, e.g. another port's VFIO container).
    #[error("the mempool is mapped in another IO address space than the descriptor ring: use a mempool of this device")]
    Unreachable,
    /// The mempool cannot arm every descriptor.
    #[error("mempool has {free} free buffers but the ring needs {needed}: make the pool larger than the ring")]
    PoolTooSmall {
        /// Buffers needed.
        needed: usize,
        /// Buffers free.
        free: usize,
    },
}

/// Buffers an RX ring's cache holds at most for a ring of `ring`
/// descriptors: twice the ring (so a whole TX reclaim run fits), at least 64,
/// at most 1024. Bounded so that a queue whose cache is filled by TX reclaim
/// but never emptied by RX spills back to the shared list long before the
/// mempool runs dry (`DeviceConfig::validate` sizes the mempool for it).
pub const fn rx_cache_size(ring: usize) -> usize {
    let c = 2 * ring;
    if c < 64 {
        64
    } else if c > 1024 {
        1024
    } else {
        c
    }
}

/// One RX queue's ring. The device side (register setup, RXDCTL) is the
/// driver's; it must stop the queue before dropping the ring.
pub struct RxRing<D: Doorbell> {
    desc: DescRing,
    /// The pool the slots' buffers belong to (the cache must serve it).
    pool: Mempool,
    /// The pool's buffer 0 IOVA and buffer size (copies, for the burst loop).
    iova_base: u64,
    buf_size: u32,
    slots: Box<[u32]>,
    next: u16,
    cache: PoolCache,
    doorbell: D,
    discarding: bool,
    stats: RxStats,
}

impl<D: Doorbell> RxRing<D> {
    /// Arm every descriptor of `desc` with a buffer from `pool`, and give the
    /// ring a [`PoolCache`] of `2 × ring size` buffers (at least 64) for
    /// refill. The tail is not written yet: call [`RxRing::start`] once the
    /// queue is enabled.
    ///
    /// # Errors
    /// [`RingError::PoolTooSmall`] when the pool has fewer free buffers than descriptors.
    pub fn new(mut desc: DescRing, pool: &Mempool, doorbell: D) -> Result<Self, RingError> {
        if !pool.region().same_address_space(desc.region()) {
            return Err(RingError::Unreachable);
        }
        let n = desc.count() as usize;
        let mut bufs = Vec::with_capacity(n);
        if pool.alloc_bulk(&mut bufs, n) < n {
            let got = bufs.len();
            pool.free_bulk(&mut bufs);
            return Err(RingError::PoolTooSmall {
                needed: n,
                free: got,
            });
        }
        for (i, &b) in bufs.iter().enumerate() {
            desc.write(i as u16, rx_read(pool.buf_iova(b)));
        }
        Ok(RxRing {
            desc,
            iova_base: pool.shared().iova_base(),
            buf_size: pool.buf_size() as u32,
            slots: bufs.into_boxed_slice(),
            next: 0,
            pool: pool.clone(),
            cache: PoolCache::new(pool.clone(), rx_cache_size(n)),
            doorbell,
            discarding: false,
            stats: RxStats::default(),
        })
    }

    /// Give the device every descriptor but one: tail = ring size − 1.
    pub fn start(&mut self) {
        self.desc.publish();
        self.doorbell.ring(self.desc.count() - 1);
    }

    /// Receive up to `max` frames, appending them to `out`; returns how many.
    /// Never allocates if `out` has room for `max` more. Looks at no more
    /// than one ring's worth of descriptors per call, whatever the device
    /// writes.
    #[inline]
    pub fn rx_burst(&mut self, out: &mut Vec<Packet>, max: usize) -> usize {
        let count = self.desc.count();
        // The cache is handed out by `cache_mut`: make sure it still serves
        // this ring's pool, whose buffer indices the slots hold.
        assert!(
            self.cache.pool().same_pool(&self.pool),
            "RxRing: its PoolCache was replaced by one of another mempool"
        );
        let mut i = self.next;
        if max == 0 || self.desc.read_hi(i) as u32 & RXD_STAT_DD == 0 {
            self.stats.empty_polls += 1;
            return 0;
        }
        let max = max.min(count as usize);
        let pool_ptr = self.cache.pool().as_ptr();
        let (buf_size, iova_base) = (self.buf_size, self.iova_base);
        // References for every packet this burst may hand out, taken before
        // any exists (so a panic can never leave a packet without one); the
        // unused ones are given back at the end.
        self.cache.pool().shared().acquire(max);

        // Fresh buffers come off the top of the cache, last first; at most
        // one per descriptor, so the burst looks at no more descriptors than
        // there are fresh buffers.
        let stock = self.cache.stock(max);
        let limit = stock.len();
        out.reserve(limit);
        // One packet slot and one fresh buffer (off the top of the cache)
        // per good frame, `limit` of each.
        let mut next_out = out.spare_capacity_mut()[..limit]
            .iter_mut()
            .zip(stock.iter());
        let view = self.desc.view();
        let mask = view.mask();
        // Exactly `mask + 1` long, so a masked index needs no bounds check.
        let slots = &mut self.slots[..=mask as usize];
        let mut discarding = self.discarding;
        let (mut bad, mut bytes) = (0usize, 0u64);
        // Each turn hands up one good frame; bad descriptors on the way are
        // re-armed in place. At most `limit` good and `limit` bad descriptors
        // are looked at.
        'burst: while next_out.len() > 0 {
            let (hi, slot) = loop {
                let hi = view.read_hi(i);
                let status = hi as u32;
                if status & RXD_STAT_DD == 0 {
                    break 'burst;
                }
                // The device is untrusted: check what it wrote before using
                // it. A frame is good only as one whole EOP descriptor
                // without RXE, not the tail of a chain, with 0 < len <=
                // buffer size.
                let slot = &mut slots[(i & mask) as usize];
                if !discarding
                    && status & (RXD_STAT_EOP | RXD_ERR_RXE) == RXD_STAT_EOP
                    && ((hi >> 32) as u16 as u32).wrapping_sub(1) < buf_size
                {
                    break (hi, slot);
                }
                // Nothing to hand up: re-arm the descriptor with its own buffer.
                discarding = status & RXD_STAT_EOP == 0;
                view.write(i, rx_read(iova_base + *slot as u64 * buf_size as u64));
                i = (i + 1) & mask;
                bad += 1;
                if bad >= limit {
                    break 'burst;
                }
            };
            // Cannot fail: `next_out` is not empty (loop condition).
            let Some((dst, &fresh)) = next_out.next() else {
                break;
            };
            let len = (hi >> 32) as u16 as u32;
            let lo = view.read_lo_after_dd(i);
            let done = std::mem::replace(slot, fresh);
            view.write(i, rx_read(iova_base + fresh as u64 * buf_size as u64));
            bytes += len as u64;
            // SAFETY: `done` was this slot's armed buffer of the ring's pool,
            // now replaced by `fresh` (so the ring no longer owns it); this
            // burst acquired one reference per packet up front; `len <=
            // buf_size` was checked above.
            dst.write(unsafe { Packet::from_parts(pool_ptr, done, len, (lo >> 32) as u32) });
            i = (i + 1) & mask;
        }
        // `next_out` yielded the first `got` packet slots, each written once.
        let got = limit - next_out.len();
        // SAFETY: the loop wrote a packet into every slot `next_out` yielded,
        // which are `spare[..got]` in order, and nothing else touched `out`.
        unsafe { out.set_len(out.len() + got) };
        self.cache.take(got, limit);
        let seen = got + bad;
        let errors = bad as u64;
        // A frame left in its descriptor for want of a buffer.
        let nombuf = limit < max && got == limit && view.read_hi(i) as u32 & RXD_STAT_DD != 0;
        if got < max {
            self.cache.pool().shared().release_not_last(max - got);
        }
        self.discarding = discarding;
        self.next = i;
        if seen > 0 {
            self.desc.publish();
            self.doorbell.ring(i.wrapping_sub(1) & mask);
        }
        let s = &mut self.stats;
        s.packets += got as u64;
        s.bytes += bytes;
        s.rx_errors += errors;
        s.rx_nombuf += nombuf as u64;
        if got > 0 {
            s.bursts += 1;
        } else {
            s.empty_polls += 1;
        }
        got
    }

    /// The ring's buffer cache: TX reclaim and [`PoolCache::free_bulk`] on
    /// the same queue return this pool's buffers to it.
    #[inline]
    pub fn cache_mut(&mut self) -> &mut PoolCache {
        &mut self.cache
    }

    /// Counters since creation.
    pub fn stats(&self) -> RxStats {
        self.stats
    }
    /// The descriptor ring (its IOVA and length go to RDBAL/RDBAH/RDLEN).
    pub fn desc(&self) -> &DescRing {
        &self.desc
    }
    /// The mempool buffers come from.
    pub fn pool(&self) -> &Mempool {
        &self.pool
    }
    /// Accounting for tests and the fuzz harness: the buffer index armed in
    /// each descriptor, by descriptor index.
    pub fn armed_indices(&self) -> &[u32] {
        &self.slots
    }
    /// Index of the next descriptor to check.
    pub fn next_index(&self) -> u16 {
        self.next
    }
}

impl<D: Doorbell> Drop for RxRing<D> {
    fn drop(&mut self) {
        let mut all: Vec<u32> = self.slots.to_vec();
        self.pool.free_bulk(&mut all);
        // The cache returns its own buffers when it is dropped.
    }
}
