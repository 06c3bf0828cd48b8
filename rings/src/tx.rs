//! TX descriptor ring bookkeeping: one descriptor per frame, one tail write per
//! burst, write-back requested once per batch, reclaim per batch, ring-full
//! back-pressure.
//!
//! Report status (RS) is set on the last descriptor of every burst and on
//! every [`TX_RS_THRESH`]-th descriptor within one; the device writes DD back
//! only there (82576 datasheet §7.2, transmit descriptor write-back: DD is
//! reported for descriptors with RS set, and descriptors complete in order, so
//! a done RS descriptor means every earlier one is done too). Reclaim checks
//! one descriptor per batch and frees every done batch at once, into the
//! queue's [`PoolCache`]. DPDK's `tx_rs_thresh`; and as with DPDK's
//! `tx_free_thresh`, `tx_burst` reclaims only when the ring runs short of
//! free descriptors.
//!
//! The ring belongs to one mempool (its queue's): an in-flight buffer of that
//! pool costs one `u32` (its index), and reclaiming a run of them is a copy
//! of indices into the cache. Packets of other pools are accepted when the
//! device can reach them (same IO address space) and are tracked with their
//! pool on a slower path.
//!
//! `tx_burst` takes as many frames as fit and leaves the rest with the caller:
//! it never drops a valid frame (the bug ixy.rs once had). Sources: 82576
//! datasheet §7.2 (transmit functionality), DPDK `rte_eth_tx_burst` semantics.

use crate::descring::{DescRing, Doorbell};
use crate::dma::DmaRegion;
use crate::mempool::{take_front, Mempool, Packet, PoolCache, Shared};
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
    /// Frames refused as unsendable and freed: zero length, over 65535 bytes,
    /// or in a mempool this device cannot reach (another port's, when each
    /// port has its own VFIO container: copy such frames into this queue's
    /// mempool first).
    pub tx_errors: u64,
}

/// The pool of an in-flight buffer that is not the ring's own.
#[derive(Clone, Copy)]
struct Foreign(Option<NonNull<Shared>>);

// SAFETY: a filled entry stands for the buffer and pool reference of the
// `Packet` it was taken from, and `Packet` is `Send` and `Sync`.
unsafe impl Send for Foreign {}
// SAFETY: as above.
unsafe impl Sync for Foreign {}

// SAFETY: the ring's raw pointer (`fast`) is only compared, never
// dereferenced; every other field is `Send`/`Sync` on its own (`Foreign` as
// argued above).
unsafe impl<D: Doorbell + Send> Send for TxRing<D> {}
// SAFETY: as above; `&TxRing` only reads counters.
unsafe impl<D: Doorbell + Sync> Sync for TxRing<D> {}

/// One TX queue's ring. The driver must stop the queue before dropping it.
pub struct TxRing<D: Doorbell> {
    desc: DescRing,
    /// The ring's own mempool: in-flight buffers are of this pool unless
    /// `foreign` says otherwise.
    pool: Mempool,
    /// Buffer index behind each descriptor in `clean..tail`.
    idx: Box<[u32]>,
    /// `Some(pool)` for each descriptor in `clean..tail` whose buffer is of
    /// another pool, `None` everywhere else.
    foreign: Box<[Foreign]>,
    /// How many `foreign` entries are `Some`.
    foreign_in_flight: u16,
    /// The own pool's shared part when the device can reach it (else null),
    /// and its buffer 0 IOVA and buffer size: the per-packet fast path.
    fast: *const Shared,
    own_base: u64,
    own_size: u64,
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
    /// A ring over `desc` for buffers of `pool` (other pools' are accepted
    /// too, more slowly), whose tail starts at 0 (the driver sets TDH = TDT = 0).
    pub fn new(desc: DescRing, pool: &Mempool, doorbell: D) -> Self {
        let count = desc.count() as usize;
        let fast = if pool.region().same_address_space(desc.region()) {
            pool.as_ptr().as_ptr().cast_const()
        } else {
            std::ptr::null()
        };
        let (own_base, own_size) = (pool.shared().iova_base(), pool.buf_size() as u64);
        TxRing {
            desc,
            fast,
            own_base,
            own_size,
            pool: pool.clone(),
            idx: vec![0; count].into_boxed_slice(),
            foreign: vec![Foreign(None); count].into_boxed_slice(),
            foreign_in_flight: 0,
            tail: 0,
            clean: 0,
            in_flight: 0,
            rs: vec![0; count].into_boxed_slice(),
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
    #[inline]
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
        // A packet of another pool must be mapped for this device too: with
        // one VFIO container per device, another port's buffer IOVA would
        // name some other memory of this one. Checked once per burst for the
        // ring's own pool, per packet only for others.
        let desc_region = self.desc.region();
        let (fast, own_base, own_size) = (self.fast, self.own_base, self.own_size);
        let view = self.desc.view();
        let mask = view.mask();
        // Exactly `mask + 1` long, so a masked index needs no bounds check.
        let idxs = &mut self.idx[..=mask as usize];
        let foreign = &mut self.foreign[..=mask as usize];
        let rs = &mut self.rs[..=mask as usize];
        let (rs_head, mut rs_len) = (self.rs_head, self.rs_len);
        let mut foreign_in_flight = self.foreign_in_flight;
        let (mut queued, mut bytes, mut since_rs, mut errors) = (0u16, 0u64, 0u16, 0u64);
        let mut t = self.tail;
        take_front(pkts, n, |pool, idx, len| {
            // This closure owns buffer `idx` of `pool` and one reference.
            let sendable = (len as usize).wrapping_sub(1) < TX_MAX_DATA_LEN;
            let iova = if pool.as_ptr().cast_const() == fast && sendable {
                own_base + idx as u64 * own_size
            } else {
                // SAFETY: the reference handed to this closure keeps `pool` alive.
                match unsafe { other_iova(pool, idx, sendable, desc_region) } {
                    Some(iova) => {
                        if pool.as_ptr().cast_const() != fast {
                            foreign[(t & mask) as usize] = Foreign(Some(pool));
                            foreign_in_flight += 1;
                        }
                        iova
                    }
                    None => {
                        errors += 1;
                        refuse(cache, pool, idx);
                        return;
                    }
                }
            };
            let mut d = tx_data(iova, len as u16);
            since_rs += 1;
            if since_rs == TX_RS_THRESH {
                since_rs = 0;
                d = tx_rs(d);
                rs[((rs_head + rs_len) & mask) as usize] = t;
                rs_len += 1;
            }
            view.write(t, d);
            bytes += len as u64;
            idxs[(t & mask) as usize] = idx;
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
        self.foreign_in_flight = foreign_in_flight;
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
        if self.foreign_in_flight == 0 && cache.pool().same_pool(&self.pool) {
            self.free_own_run(run, cache);
        } else {
            self.free_mixed_run(run, cache);
        }
        cache.settle();
        self.clean = (self.clean + run) & mask;
        self.in_flight -= run;
        run as usize
    }

    /// Free `run` descriptors from `clean`, all of the ring's own pool, into
    /// `cache` (of that pool): copies of indices, no per-buffer decision.
    fn free_own_run(&mut self, run: u16, cache: &mut PoolCache) {
        let (start, run) = (self.clean as usize, run as usize);
        let count = self.idx.len();
        let first = run.min(count - start);
        let room = cache.room(run);
        let fit = run.min(room.len());
        let a = first.min(fit);
        room[..a].copy_from_slice(&self.idx[start..start + a]);
        room[a..fit].copy_from_slice(&self.idx[..fit - a]);
        cache.commit(fit);
        // What the cache could not take goes back to the shared list.
        for k in fit..run {
            let idx = self.idx[(start + k) % count];
            // SAFETY: descriptor `start + k` is in the live range being
            // freed: its buffer `idx` of the own pool and one reference are
            // handed over once (`clean` moves past it after this).
            drop(unsafe { Packet::from_raw_parts(self.pool.as_ptr(), idx) });
        }
    }

    /// Free `run` descriptors from `clean` when some buffer may be of another
    /// pool, or `cache` is not of the ring's own pool.
    fn free_mixed_run(&mut self, run: u16, cache: &mut PoolCache) {
        let mask = self.desc.mask();
        let own = self.pool.as_ptr();
        for k in 0..run {
            let t = ((self.clean + k) & mask) as usize;
            let pool = match self.foreign[t].0.take() {
                Some(p) => {
                    self.foreign_in_flight -= 1;
                    p
                }
                None => own,
            };
            // SAFETY: descriptor `t` is in the live range being freed: its
            // buffer and one reference of `pool` (recorded in `tx_burst`) are
            // handed over once (`clean` moves past it, `foreign[t]` is emptied).
            cache.recycle(unsafe { Packet::from_raw_parts(pool, self.idx[t]) });
        }
    }

    /// Frames queued and not yet reclaimed.
    pub fn in_flight(&self) -> usize {
        self.in_flight as usize
    }
    /// Accounting for tests and the fuzz harness: the buffer of each
    /// descriptor in flight, oldest first, as `(index, of the ring's own pool)`.
    pub fn in_flight_buffers(&self) -> impl Iterator<Item = (u32, bool)> + '_ {
        let mask = self.desc.mask();
        (0..self.in_flight).map(move |k| {
            let t = ((self.clean + k) & mask) as usize;
            (self.idx[t], self.foreign[t].0.is_none())
        })
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

/// The IOVA of a buffer that is not from the ring's own pool (or of an
/// unsendable frame): `None` when the frame is empty or too long, or the
/// device cannot reach the buffer (another port's mempool, when each port has
/// its own VFIO container).
///
/// # Safety
/// The caller holds a reference to `pool`.
#[cold]
#[inline(never)]
unsafe fn other_iova(
    pool: NonNull<Shared>,
    idx: u32,
    sendable: bool,
    desc_region: &DmaRegion,
) -> Option<u64> {
    if !sendable {
        return None;
    }
    // SAFETY: the caller's reference keeps the pool alive.
    unsafe { Shared::iova_for(pool, idx, desc_region) }
}

/// Free a refused packet's buffer, given as the parts `take_front` handed
/// over (so the hot loop never moves a whole `Packet` through memory).
#[cold]
#[inline(never)]
fn refuse(cache: &mut PoolCache, pool: NonNull<Shared>, idx: u32) {
    // SAFETY: the caller owns buffer `idx` of `pool` and one reference (a
    // packet's parts from `take_front`): rebuilding hands both back once.
    cache.recycle(unsafe { Packet::from_raw_parts(pool, idx) });
}

impl<D: Doorbell> Drop for TxRing<D> {
    /// Give back the buffers still in flight (the driver has stopped the
    /// queue, so the device no longer reads them).
    fn drop(&mut self) {
        let mask = self.desc.mask();
        let own = self.pool.as_ptr();
        for k in 0..self.in_flight {
            let t = ((self.clean + k) & mask) as usize;
            let pool = self.foreign[t].0.take().unwrap_or(own);
            // SAFETY: descriptor `t` is in the live range: its buffer and one
            // reference of `pool` are handed over once (the ring is going).
            drop(unsafe { Packet::from_raw_parts(pool, self.idx[t]) });
        }
        self.in_flight = 0;
    }
}
