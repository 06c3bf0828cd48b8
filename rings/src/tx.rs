//! TX descriptor ring bookkeeping: one descriptor per frame, one tail write per
//! burst, write-back requested once per batch, reclaim per batch, ring-full
//! back-pressure.
//!
//! Report status (RS) is set on the last descriptor of every burst and on
//! every [`TX_RS_THRESH`]-th descriptor within one; the device writes DD back
//! only there (82576 datasheet §7.2.3.1: DD is reported for descriptors with
//! RS set; the ring is processed in order, so a done RS descriptor means every
//! earlier one is done too). Reclaim checks one descriptor per batch and frees
//! the whole batch, into the queue's [`PoolCache`]. DPDK's `tx_rs_thresh`;
//! and as with DPDK's `tx_free_thresh`, `tx_burst` reclaims only when the
//! ring runs short of free descriptors.
//!
//! `tx_burst` takes as many frames as fit and leaves the rest with the caller:
//! it never drops a valid frame (the bug ixy.rs once had). Sources: 82576
//! datasheet §7.2 (transmit functionality), DPDK `rte_eth_tx_burst` semantics.

use crate::descring::{DescRing, Doorbell};
use crate::mempool::{take_front, Packet, PoolCache, Shared};
use pollnic_hw::desc::{tx_data, tx_done, tx_rs, TX_MAX_DATA_LEN};
use std::ptr::NonNull;

/// Most descriptors between two that request a write-back (RS).
pub const TX_RS_THRESH: u16 = 32;

/// `tx_burst` reclaims sent descriptors only when fewer than this many are
/// free (or fewer than the burst needs), so reclaim runs on whole batches
/// (DPDK's `tx_free_thresh`). [`TxRing::reclaim`] can be called any time.
pub const TX_FREE_THRESH: usize = 32;

/// Per-ring software counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxStats {
    /// Frames handed to the device.
    pub packets: u64,
    /// Bytes in those frames (no FCS).
    pub bytes: u64,
    /// `tx_burst` calls that queued at least one frame.
    pub bursts: u64,
    /// `tx_burst` calls that had to leave frames behind because the ring was full.
    pub ring_full: u64,
    /// Frames refused as unsendable (zero length or over 65535 bytes) and freed.
    pub tx_errors: u64,
}

/// The buffer behind one in-flight TX descriptor: a [`Packet`] taken apart
/// (it owns the buffer and one pool reference until reclaimed). Plain data,
/// so filling and emptying a slot costs two stores and no drop check.
#[derive(Clone, Copy)]
struct TxSlot {
    pool: Option<NonNull<Shared>>,
    idx: u32,
}

// SAFETY: a filled slot owns its buffer and one pool reference exactly as
// the `Packet` it was taken from did, and `Packet` is `Send` and `Sync`.
unsafe impl Send for TxSlot {}
// SAFETY: as above.
unsafe impl Sync for TxSlot {}

const EMPTY: TxSlot = TxSlot { pool: None, idx: 0 };

/// One TX queue's ring. The driver must stop the queue before dropping it.
pub struct TxRing<D: Doorbell> {
    desc: DescRing,
    slots: Box<[TxSlot]>,
    tail: u16,
    clean: u16,
    in_flight: u16,
    /// Descriptors with RS set that are not reclaimed yet, oldest first
    /// (a ring of `count` entries: `rs_len` of them from `rs_head`).
    rs: Box<[u16]>,
    rs_head: u16,
    rs_len: u16,
    doorbell: D,
    stats: TxStats,
}

impl<D: Doorbell> TxRing<D> {
    /// A ring over `desc` whose tail starts at 0 (the driver sets TDH = TDT = 0).
    pub fn new(desc: DescRing, doorbell: D) -> Self {
        let count = desc.count();
        let slots = vec![EMPTY; count as usize].into_boxed_slice();
        TxRing {
            desc,
            slots,
            tail: 0,
            clean: 0,
            in_flight: 0,
            rs: vec![0; count as usize].into_boxed_slice(),
            rs_head: 0,
            rs_len: 0,
            doorbell,
            stats: TxStats::default(),
        }
    }

    /// Queue frames from the front of `pkts` until the ring is full; the queued
    /// ones are removed from `pkts`, the rest stay in order. Returns how many
    /// were taken (including any refused as unsendable, see [`TxStats::tx_errors`]).
    /// Sent buffers of `cache`'s pool are reclaimed into `cache` first.
    pub fn tx_burst(&mut self, pkts: &mut Vec<Packet>, cache: &mut PoolCache) -> usize {
        let count = self.desc.count();
        let free = (count - 1 - self.in_flight) as usize;
        if self.rs_len > 0 && (free < TX_FREE_THRESH || free < pkts.len()) {
            self.reclaim(cache);
        }
        let room = (count - 1 - self.in_flight) as usize;
        let n = room.min(pkts.len());
        if n < pkts.len() {
            self.stats.ring_full += 1;
        }
        let view = self.desc.view();
        let mask = view.mask();
        // Exactly `mask + 1` long, so a masked index needs no bounds check.
        let slots = &mut self.slots[..=mask as usize];
        let rs = &mut self.rs[..=mask as usize];
        let (rs_head, mut rs_len) = (self.rs_head, self.rs_len);
        let (mut queued, mut bytes, mut since_rs, mut errors) = (0u16, 0u64, 0u16, 0u64);
        let mut t = self.tail;
        take_front(pkts, n, |p| {
            let len = p.len();
            if len.wrapping_sub(1) >= TX_MAX_DATA_LEN {
                // Zero length, or more than one descriptor can carry.
                errors += 1;
                cache.recycle(p);
                return;
            }
            let mut d = tx_data(p.iova(), len as u16);
            since_rs += 1;
            if since_rs == TX_RS_THRESH {
                since_rs = 0;
                d = tx_rs(d);
                rs[((rs_head + rs_len) & mask) as usize] = t;
                rs_len += 1;
            }
            view.write(t, d);
            bytes += len as u64;
            let (pool, idx) = p.into_parts();
            slots[(t & mask) as usize] = TxSlot {
                pool: Some(pool),
                idx,
            };
            t = (t + 1) & mask;
            queued += 1;
        });
        if queued > 0 && since_rs != 0 {
            // The burst's last descriptor reports too, so that everything
            // sent becomes reclaimable.
            let last = t.wrapping_sub(1) & mask;
            view.write(last, tx_rs(view.read_sw(last)));
            rs[((rs_head + rs_len) & mask) as usize] = last;
            rs_len += 1;
        }
        self.rs_len = rs_len;
        self.stats.tx_errors += errors;
        if errors > 0 {
            cache.settle();
        }
        if queued > 0 {
            self.tail = t;
            self.in_flight += queued;
            self.stats.packets += queued as u64;
            self.stats.bytes += bytes;
            self.stats.bursts += 1;
            self.desc.publish();
            self.doorbell.ring(t);
        }
        n
    }

    /// Return the buffers of every completed batch, oldest first, into
    /// `cache` (or their own pool); returns how many descriptors were freed.
    ///
    /// The device completes descriptors in order, so the batches done form a
    /// prefix of those pending: the newest is checked first (when the device
    /// is idle or ahead, everything is freed after one DD read), otherwise a
    /// binary search finds the last done batch. Whatever the device writes,
    /// only descriptors this ring queued are freed, each once.
    pub fn reclaim(&mut self, cache: &mut PoolCache) -> usize {
        let pending = self.rs_len;
        if pending == 0 {
            return 0;
        }
        let mask = self.desc.mask();
        let mark = |k: u16| self.rs[((self.rs_head + k) & mask) as usize];
        let done = |k: u16| tx_done(self.desc.read_hi(mark(k)));
        // Number of pending batches that are done (a prefix).
        let batches = if done(pending - 1) {
            pending
        } else {
            let (mut lo, mut hi) = (0u16, pending - 1); // done(hi) is false
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if done(mid) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            lo
        };
        if batches == 0 {
            return 0;
        }
        let end = mark(batches - 1);
        let run = (end.wrapping_sub(self.clean) & mask) + 1;
        self.rs_head = (self.rs_head + batches) & mask;
        self.rs_len -= batches;

        let own = cache.pool().as_ptr();
        let slots = &self.slots[..=mask as usize];
        let room = cache.room(run as usize);
        let mut filled = 0;
        let mut c = self.clean;
        for _ in 0..run {
            // Slots `clean..tail` are the filled ones: this one is read once
            // here and never again (`clean` moves past it, and the Drop impl
            // looks at the live range only), so it need not be emptied.
            let slot = slots[(c & mask) as usize];
            if let Some(pool) = slot.pool {
                if pool == own && filled < room.len() {
                    room[filled] = slot.idx;
                    filled += 1;
                } else {
                    // SAFETY: the slot owned buffer `idx` of `pool` and one
                    // reference (from `Packet::into_parts` in `tx_burst`);
                    // never read again, so handed over exactly once.
                    drop(unsafe { Packet::from_raw_parts(pool, slot.idx) });
                }
            }
            c = (c + 1) & mask;
        }
        cache.commit(filled);
        cache.settle();
        self.clean = c;
        self.in_flight -= run;
        run as usize
    }

    /// Frames queued and not yet reclaimed.
    pub fn in_flight(&self) -> usize {
        self.in_flight as usize
    }
    /// Counters since creation.
    pub fn stats(&self) -> TxStats {
        self.stats
    }
    /// The descriptor ring (its IOVA and length go to TDBAL/TDBAH/TDLEN).
    pub fn desc(&self) -> &DescRing {
        &self.desc
    }
}

impl<D: Doorbell> Drop for TxRing<D> {
    /// Give back the buffers still in flight (the driver has stopped the
    /// queue, so the device no longer reads them).
    fn drop(&mut self) {
        let mask = self.desc.mask();
        for k in 0..self.in_flight {
            let slot = &mut self.slots[(self.clean.wrapping_add(k) & mask) as usize];
            if let Some(pool) = slot.pool.take() {
                // SAFETY: the slot owned buffer `idx` of `pool` and one
                // reference to it, taken from a Packet in `tx_burst`; emptied
                // here, so both are given back exactly once.
                drop(unsafe { Packet::from_raw_parts(pool, slot.idx) });
            }
        }
    }
}
