//! RX descriptor ring bookkeeping: refill, DD check, validation of the
//! write-back, one tail write per burst.
//!
//! Invariant: every descriptor always holds an armed buffer; the device owns
//! `[RDH, RDT)` and the slot at RDT is held back, so `RDT = next - 1` after
//! each burst (82576 datasheet §7.1.4: head == tail means no free
//! descriptors). A completed descriptor is re-armed with a fresh buffer
//! *before* its frame is handed up; when the mempool is empty the burst stops
//! and counts `rx_nombuf` instead of dropping (DPDK igb PMD behaviour).

use crate::descring::{DescRing, Doorbell};
use crate::mempool::{Mempool, Packet};
use pollnic_hw::desc::{rx_done, rx_read, RawDesc, RxCompletion};
use std::sync::Arc;

/// Buffers fetched from the mempool at once when the RX refill cache runs dry.
const REFILL_BATCH: usize = 64;

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
    /// The mempool cannot arm every descriptor.
    #[error("mempool has {free} free buffers but the ring needs {needed}: make the pool larger than the ring")]
    PoolTooSmall {
        /// Buffers needed.
        needed: usize,
        /// Buffers free.
        free: usize,
    },
}

/// One RX queue's ring. The device side (register setup, RXDCTL) is the
/// driver's; it must stop the queue before dropping the ring.
pub struct RxRing<D: Doorbell> {
    desc: DescRing,
    slots: Box<[u32]>,
    next: u16,
    pool: Arc<Mempool>,
    doorbell: D,
    cache: Vec<u32>,
    discarding: bool,
    stats: RxStats,
}

impl<D: Doorbell> RxRing<D> {
    /// Arm every descriptor of `desc` with a buffer from `pool`. The tail is
    /// not written yet: call [`RxRing::start`] once the queue is enabled.
    ///
    /// # Errors
    /// [`RingError::PoolTooSmall`] when the pool has fewer free buffers than descriptors.
    pub fn new(mut desc: DescRing, pool: Arc<Mempool>, doorbell: D) -> Result<Self, RingError> {
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
            slots: bufs.into_boxed_slice(),
            next: 0,
            pool,
            doorbell,
            cache: Vec::with_capacity(REFILL_BATCH),
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
    /// Never allocates if `out` has room for `max` more.
    pub fn rx_burst(&mut self, out: &mut Vec<Packet>, max: usize) -> usize {
        let count = self.desc.count();
        let mut got = 0;
        let mut used = 0u32;
        while got < max {
            let i = self.next;
            let hi = self.desc.read_hi(i);
            if !rx_done(hi) {
                break;
            }
            let c = RxCompletion::decode(RawDesc {
                lo: self.desc.read_lo_after_dd(i),
                hi,
            });
            let Some(fresh) = self.take_buffer() else {
                self.stats.rx_nombuf += 1;
                break;
            };
            let done = std::mem::replace(&mut self.slots[i as usize], fresh);
            self.desc.write(i, rx_read(self.pool.buf_iova(fresh)));
            self.next = if i + 1 == count { 0 } else { i + 1 };
            used += 1;

            // The device is untrusted: check what it wrote before using it.
            let was_discarding = self.discarding;
            self.discarding = !c.eop();
            let bad = was_discarding
                || !c.eop()
                || c.rx_error()
                || c.len == 0
                || c.len as usize > self.pool.buf_size();
            if bad {
                self.stats.rx_errors += 1;
                self.pool.free_one(done);
                continue;
            }
            self.stats.packets += 1;
            self.stats.bytes += c.len as u64;
            out.push(self.pool.packet(done, c.len, c.rss_hash));
            got += 1;
        }
        if used > 0 {
            self.desc.publish();
            self.doorbell.ring(if self.next == 0 {
                count - 1
            } else {
                self.next - 1
            });
        }
        if got > 0 {
            self.stats.bursts += 1;
        } else {
            self.stats.empty_polls += 1;
        }
        got
    }

    fn take_buffer(&mut self) -> Option<u32> {
        if self.cache.is_empty() {
            self.pool.alloc_bulk(&mut self.cache, REFILL_BATCH);
        }
        self.cache.pop()
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
    pub fn pool(&self) -> &Arc<Mempool> {
        &self.pool
    }
    /// Index of the next descriptor to check.
    pub fn next_index(&self) -> u16 {
        self.next
    }
}

impl<D: Doorbell> Drop for RxRing<D> {
    fn drop(&mut self) {
        let mut all: Vec<u32> = self.slots.to_vec();
        all.append(&mut self.cache);
        self.pool.free_bulk(&mut all);
    }
}
