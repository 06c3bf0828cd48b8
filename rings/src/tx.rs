//! TX descriptor ring bookkeeping: one descriptor per frame (with offloads,
//! a context descriptor before it when the context changes; with TSO,
//! several data descriptors over the frame's one buffer), one tail write per
//! burst, write-back requested once per batch, reclaim per batch, ring-full
//! back-pressure.
//!
//! Report status (RS) is set on every descriptor whose ring index is
//! `TX_RS_THRESH - 1` modulo [`TX_RS_THRESH`] (fixed batch ends, as DPDK's
//! `tx_rs_thresh`), and on the last descriptor of every burst; the device
//! writes DD back only there (82576 datasheet §7.2, transmit descriptor
//! write-back: DD is reported for descriptors with RS set, and descriptors
//! complete in order, so a done RS descriptor means every earlier one is done
//! too). Reclaim needs no list of RS descriptors: it checks the newest
//! descriptor (done means everything is), else the fixed batch ends oldest
//! first, one DD read per batch, and frees every done batch at once into the
//! queue's [`PoolCache`]. As with DPDK's `tx_free_thresh`, `tx_burst`
//! reclaims only when the ring runs short of free descriptors.
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
use crate::mempool::{BufIovas, Mempool, Packet, PoolCache, Shared};
use crate::simd::{self, DataPath};
use pollnic_hw::desc::{
    tx_data, tx_data_offload, tx_data_part, tx_done, RawDesc, TXD_DCMD_RS, TXD_PAYLEN_SHIFT,
    TX_MAX_DATA_LEN,
};
use pollnic_hw::offload::{
    tx_plan, TxContext, TxOffload, TxRefusal, TSO_DATA_PER_DESC, TXD_OLINFO_CC,
};
use std::ptr::NonNull;

/// Most descriptors between two that request a write-back (RS): every
/// descriptor whose index is `TX_RS_THRESH - 1` modulo this has RS set. A
/// power of two that divides every ring size (32..4096).
pub const TX_RS_THRESH: u16 = 32;

/// `tx_burst` reclaims sent descriptors only when fewer than this many are
/// free (or fewer than the burst needs), so reclaim runs on whole batches
/// (DPDK's `tx_free_thresh`). [`TxRing::reclaim`] can be called any time.
pub const TX_FREE_THRESH: usize = 32;

/// Per-ring software counters. Non-exhaustive: more may come; read the
/// fields, or start from `TxStats::default()`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TxStats {
    // (Counters updated by every burst sit apart, so that the compiler does
    // not pack their updates into vector adds, which cost more here.)
    /// Frames handed to the device.
    pub packets: u64,
    /// `tx_burst` calls that had to leave frames behind because the ring was full.
    pub ring_full: u64,
    /// Bytes in those frames (no FCS).
    pub bytes: u64,
    /// Frames refused as unsendable and freed: zero length, over 65535 bytes,
    /// or in a mempool this device cannot reach (another port's, when the
    /// ports were not opened together in one VFIO container).
    pub tx_errors: u64,
    /// `tx_burst` calls that queued at least one frame.
    pub bursts: u64,
    /// Of `packets`, frames whose buffer belongs to another pool that this
    /// device reaches (another port's, opened in the same VFIO container):
    /// sent as they are, zero copy, and returned to their own pool once sent.
    pub foreign: u64,
    /// Of `tx_errors`, frames refused because the NIC cannot do the offload
    /// they asked for ([`TxRing::tx_burst_offload`]; the reason of the last
    /// one: [`TxRing::last_refusal`]).
    pub tx_offload_errors: u64,
    /// Advanced context descriptors written (a context is written only when
    /// a frame needs another one than the last).
    pub tx_contexts: u64,
}

/// What an in-flight descriptor holds besides a buffer of the ring's own pool.
#[derive(Clone, Copy)]
enum Slot {
    /// A buffer of the ring's own pool (or nothing in flight).
    Own,
    /// A buffer of this other pool.
    Foreign(NonNull<Shared>),
    /// No buffer: an advanced context descriptor, or a data descriptor of
    /// a TSO frame other than its last (the frame's buffer is freed with
    /// its last descriptor, the one with EOP).
    NoBuffer,
}

// SAFETY: a `Foreign` entry stands for the buffer and pool reference of the
// `Packet` it was taken from, and `Packet` is `Send` and `Sync`.
unsafe impl Send for Slot {}
// SAFETY: as above.
unsafe impl Sync for Slot {}

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
    /// [`Slot::Foreign`] for each descriptor in `clean..tail` whose buffer
    /// is of another pool, [`Slot::NoBuffer`] for each context descriptor
    /// and each data descriptor of a TSO frame but its last, [`Slot::Own`]
    /// everywhere else.
    slots: Box<[Slot]>,
    /// How many `slots` entries are not `Own`.
    marked_in_flight: u16,
    /// The context the device holds in slot 0 once it has read every
    /// queued descriptor (the last one written), if any.
    ctx_last: Option<TxContext>,
    /// Set CC in the `olinfo_status` of a data descriptor that uses a
    /// context (the 82599 needs it; igb has no such bit).
    check_context: bool,
    /// Why the last frame refused for its offload was refused.
    last_refusal: Option<TxRefusal>,
    /// The own pool's shared part when the device can reach it (else null),
    /// and its buffer IOVAs: the per-packet fast path.
    fast: *const Shared,
    own: BufIovas,
    tail: u16,
    clean: u16,
    /// Descriptors software may fill: ring size − 1 − frames in flight
    /// (one is always left empty, head == tail meaning an empty ring).
    free: u16,
    doorbell: D,
    /// Runs the vector burst loop ([`DataPath::Vector`]).
    vector: bool,
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
        let own = pool.shared().iovas();
        TxRing {
            desc,
            fast,
            own,
            pool: pool.clone(),
            idx: vec![0; count].into_boxed_slice(),
            slots: vec![Slot::Own; count].into_boxed_slice(),
            marked_in_flight: 0,
            ctx_last: None,
            check_context: false,
            last_refusal: None,
            tail: 0,
            clean: 0,
            free: count as u16 - 1,
            doorbell,
            vector: DataPath::detect() == DataPath::Vector,
            stats: TxStats::default(),
        }
    }

    /// Choose the burst loop: a new ring runs [`DataPath::detect`]'s. Both
    /// queue the same descriptors and count the same.
    ///
    /// # Panics
    /// On [`DataPath::Vector`] when this CPU does not run it
    /// ([`DataPath::vector_supported`]; the driver checks before).
    pub fn set_data_path(&mut self, path: DataPath) {
        assert!(
            path == DataPath::Scalar || DataPath::vector_supported(),
            "the vector data path needs x86-64 SSE2"
        );
        self.vector = path == DataPath::Vector;
    }

    /// The burst loop this ring runs.
    pub fn data_path(&self) -> DataPath {
        if self.vector {
            DataPath::Vector
        } else {
            DataPath::Scalar
        }
    }

    /// Queue frames from the front of `pkts` until the ring is full; the queued
    /// ones are removed from `pkts`, the rest stay in order. Returns how many
    /// were taken (including any refused as unsendable, see [`TxStats::tx_errors`]).
    /// Sent buffers of `cache`'s pool are reclaimed into `cache` first.
    #[inline]
    pub fn tx_burst(&mut self, pkts: &mut Vec<Packet>, cache: &mut PoolCache) -> usize {
        if self.vector {
            self.burst::<true>(pkts, cache)
        } else {
            self.burst::<false>(pkts, cache)
        }
    }

    /// [`TxRing::tx_burst`]. The hot loop queues packets of the ring's own
    /// pool that the device can send (with `VEC`, four in one step,
    /// `crate::simd::tx_quad`, exactly as four turns of the one-packet loop
    /// would queue them); the first packet that is not (another pool's, or
    /// unsendable) hands the rest of the burst to [`TxRing::burst_rest`].
    #[inline(always)]
    fn burst<const VEC: bool>(&mut self, pkts: &mut Vec<Packet>, cache: &mut PoolCache) -> usize {
        let len = pkts.len();
        if (self.free as usize) < len.max(TX_FREE_THRESH) {
            self.reclaim(cache);
        }
        let room = self.free as usize;
        let n = if len > room {
            self.stats.ring_full += 1;
            room
        } else {
            len
        };
        if n == 0 {
            // Nothing to send, or no room: `pkts` keeps everything.
            return 0;
        }
        let (fast, own) = (self.fast, self.own);
        let view = self.desc.view();
        let mask = view.mask();
        // `idx` is exactly `mask + 1` long (one per descriptor, made so in
        // `new`), so a masked index is in bounds.
        debug_assert_eq!(self.idx.len(), mask as usize + 1);
        let idxs = self.idx.as_mut_ptr();
        let mut t = self.tail;
        // The descriptor last written (the burst's last, once it is queued).
        let mut last = std::ptr::null_mut();
        let mut bytes = 0u64;
        let base = pkts.as_mut_ptr();
        // From here the Vec owns none of its packets: each of the first `n`
        // is handed to the ring (or refused) exactly once, and the other
        // `len - n` go back to it at the end. A panic leaks packets, never
        // drops one twice.
        // SAFETY: 0 <= len.
        unsafe { pkts.set_len(0) };
        let mut k = 0;
        // Queues packets one at a time from `k` until one is not ordinary.
        // A macro, so that each branch below has its own copy and the
        // common short burst starts at a constant `k`.
        macro_rules! one_by_one {
            () => {
                while k < n {
                    // SAFETY: `k < n <= len`: an initialised packet the ring now owns.
                    let (pool, idx, plen) = unsafe { (*base.add(k)).parts() };
                    if pool.as_ptr().cast_const() != fast
                        || (plen as usize).wrapping_sub(1) >= TX_MAX_DATA_LEN
                    {
                        break;
                    }
                    // SAFETY: `pool` is the ring's own pool (alive: the packet's
                    // reference, now the ring's) and `idx` one of its buffers.
                    let iova = unsafe { own.get(idx) };
                    // RS goes on the batch ends after the loop.
                    // SAFETY: `t` is masked (the tail always is, and every
                    // step masks it), so the slot is in the ring, and
                    // `idx[t]` in bounds (`idx.len() == mask + 1`, above);
                    // `idxs` points into `self.idx`, which nothing else
                    // touches during the burst.
                    unsafe {
                        last = view.slot_at(t as usize);
                        view.write_slot(last, tx_data(iova, plen as u16));
                        idxs.add(t as usize).write(idx);
                    }
                    bytes += plen as u64;
                    t = (t + 1) & mask;
                    k += 1;
                }
            };
        }
        if VEC && n >= 4 {
            while k + 4 <= n && t <= mask - 3 {
                // SAFETY: `k + 4 <= n <= len`: four initialised packets the
                // ring now owns; `t` is masked and `t + 3 <= mask`, so
                // descriptors `t..t + 4` and `idx[t..t + 4]` are in bounds,
                // and software owns them (the ring has room for `n - k`
                // more); `own` is the pool at `fast` (checked per packet by
                // `tx_quad`), alive through `self.pool`.
                let sent = unsafe {
                    let quad = &*base.add(k).cast::<[Packet; 4]>();
                    simd::tx_quad(quad, fast, own, view.slot_ptr(t), idxs.add(t as usize))
                };
                let Some(b) = sent else { break };
                last = view.slot_ptr(t + 3);
                bytes += b;
                t = (t + 4) & mask;
                k += 4;
            }
            one_by_one!();
        } else {
            one_by_one!();
        }
        if k < n {
            // SAFETY: packets `k..len` are initialised; `k..n` are the
            // ring's to queue or refuse, descriptors from `t` on are
            // software's (room for `n - k` more).
            return unsafe { self.burst_rest(pkts, base, len, n, k, t, bytes, cache) };
        }
        // SAFETY: every packet of `0..n` was queued, `n..len` are the
        // caller's; descriptors `tail..t` hold them.
        unsafe { self.finish(pkts, base, len, n, n, (t, last), bytes) }
    }

    /// The end of a burst: give packets `n..len` back to `pkts`, then, if
    /// `queued > 0`, set RS on the burst's last descriptor (so that
    /// everything sent becomes reclaimable) and on each fixed batch end the
    /// burst filled, count, and write the tail. None of those descriptors is
    /// the device's yet: the tail write hands them over. Batch ends are the
    /// indices `TX_RS_THRESH - 1` modulo `TX_RS_THRESH`: the burst filled
    /// one before its last exactly when `tail mod TX_RS_THRESH + queued >
    /// TX_RS_THRESH` (ring sizes are multiples of it; on a ring smaller than
    /// `TX_RS_THRESH`, never).
    ///
    /// # Safety
    /// `base` is `pkts`' buffer, whose length is 0 and whose packets `n..len`
    /// are initialised and not handed over; descriptors from the tail up to
    /// `t` hold the `queued` frames queued by this burst, and `last` is the
    /// slot of descriptor `t - 1` when `queued > 0`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn finish(
        &mut self,
        pkts: &mut Vec<Packet>,
        base: *mut Packet,
        len: usize,
        n: usize,
        queued: usize,
        (t, last): (u16, *mut RawDesc),
        bytes: u64,
    ) -> usize {
        if n < len {
            // SAFETY: packets `n..len` are initialised and still the
            // caller's: moved to the front and given back to the Vec.
            unsafe { std::ptr::copy(base.add(n), base, len - n) };
        }
        // SAFETY: the first `len - n` elements are the packets not taken.
        unsafe { pkts.set_len(len - n) };
        if queued > 0 {
            // SAFETY: `last` is the slot of descriptor `t - 1`, the burst's
            // last, in this ring and software's (the caller's promise);
            // volatile, as every descriptor access.
            unsafe {
                let hi = std::ptr::addr_of_mut!((*last).hi);
                hi.write_volatile(hi.read_volatile() | TXD_DCMD_RS as u64);
            }
            let tail = self.tail;
            if (tail & (TX_RS_THRESH - 1)) as usize + queued > TX_RS_THRESH as usize {
                self.set_batch_ends(tail, queued as u16);
            }
            self.tail = t;
            self.free -= queued as u16;
            self.stats.packets += queued as u64;
            self.stats.bytes += bytes;
            self.stats.bursts += 1;
            self.desc.publish();
            self.doorbell.ring(t);
        }
        n
    }

    /// [`TxRing::burst`] from packet `k` on, the first that is not an
    /// ordinary one of the ring's own pool (see [`TxRing::queue_slow`]),
    /// then [`TxRing::finish`].
    ///
    /// # Safety
    /// As for `finish`, with packets `k..n` not yet handed over and
    /// descriptors from `t` on software's (room for `n - k` more).
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn burst_rest(
        &mut self,
        pkts: &mut Vec<Packet>,
        base: *mut Packet,
        len: usize,
        n: usize,
        k: usize,
        t: u16,
        bytes: u64,
        cache: &mut PoolCache,
    ) -> usize {
        // SAFETY: the caller's promises.
        unsafe {
            let (t, b, errors) = self.queue_slow(base.add(k), n - k, t, cache);
            let last = self.desc.view().slot_ptr(t.wrapping_sub(1));
            self.finish(pkts, base, len, n, n - errors, (t, last), bytes + b)
        }
    }

    /// Set RS on every fixed batch end among the `queued` descriptors from
    /// `first` on but the last (ring order; the last has it already).
    #[inline(never)]
    fn set_batch_ends(&mut self, first: u16, queued: u16) {
        let view = self.desc.view();
        let mask = view.mask();
        // The first batch end at or after `first`, as a distance from it
        // (called only on rings of at least `TX_RS_THRESH`, where
        // `first | (TX_RS_THRESH - 1)` is still an index of the ring).
        debug_assert!(mask >= TX_RS_THRESH - 1);
        let mut ahead = (first | (TX_RS_THRESH - 1)) - first;
        while ahead < queued - 1 {
            let end = first.wrapping_add(ahead) & mask;
            view.write_hi(end, view.read_hi(end) | TXD_DCMD_RS as u64);
            ahead += TX_RS_THRESH;
        }
    }

    /// The rest of a burst from its first packet that is not an ordinary
    /// one of the ring's own pool: `n` packets at `p`, queued from
    /// descriptor `t` on, each checked on its own. Another pool's packet is
    /// sent zero copy when the device can reach it (same IO address space;
    /// a packet of another port's container would name some other memory of
    /// this one) and tracked with its pool; an unsendable one (empty, too
    /// long, unreachable) is freed and counted in `tx_errors`. Returns the
    /// next descriptor, the bytes queued and how many were refused.
    ///
    /// # Safety
    /// The `n` packets at `p` are initialised and the ring's to queue or
    /// refuse, each once; descriptors `t..t + n` (ring order) are
    /// software's.
    #[cold]
    #[inline(never)]
    unsafe fn queue_slow(
        &mut self,
        p: *const Packet,
        n: usize,
        mut t: u16,
        cache: &mut PoolCache,
    ) -> (u16, u64, usize) {
        let view = self.desc.view();
        let mask = view.mask();
        let desc_region = self.desc.region();
        let (mut bytes, mut errors) = (0u64, 0usize);
        for k in 0..n {
            // SAFETY: the caller's promise: `k < n` packets at `p`.
            let (pool, idx, len) = unsafe { (*p.add(k)).parts() };
            let sendable = (len as usize).wrapping_sub(1) < TX_MAX_DATA_LEN;
            let iova = if pool.as_ptr().cast_const() == self.fast && sendable {
                // SAFETY: the ring's own pool (alive: the packet's reference)
                // and one of its buffers.
                unsafe { self.own.get(idx) }
            } else {
                // SAFETY: the packet's reference, now the ring's, keeps
                // `pool` alive.
                match unsafe { other_iova(pool, idx, sendable, desc_region) } {
                    Some(iova) => {
                        if pool.as_ptr().cast_const() != self.fast {
                            self.slots[(t & mask) as usize] = Slot::Foreign(pool);
                            self.marked_in_flight += 1;
                            self.stats.foreign += 1;
                        }
                        iova
                    }
                    None => {
                        errors += 1;
                        refuse(cache, pool, idx);
                        continue;
                    }
                }
            };
            view.write(t, tx_data(iova, len as u16));
            bytes += len as u64;
            self.idx[(t & mask) as usize] = idx;
            t = (t + 1) & mask;
        }
        self.stats.tx_errors += errors as u64;
        (t, bytes, errors)
    }

    /// Queue frames from the front of `pkts`, each sent with the offloads
    /// `offload` asks (checksum insertion, VLAN insert), until the ring is
    /// full; the queued ones are removed from `pkts`, the rest stay in
    /// order. Returns how many were taken, including those refused.
    ///
    /// Each frame's header lengths are read from its bytes
    /// ([`pollnic_hw::offload::tx_plan`]); when they differ from the
    /// context the device holds, an advanced context descriptor (slot 0)
    /// goes before the frame's data descriptor, so a run of like frames
    /// costs one context. A frame the NIC cannot do the request for is
    /// refused: freed (into `cache` or its pool), counted in `tx_errors`
    /// and `tx_offload_errors`, its reason kept ([`TxRing::last_refusal`]);
    /// it is never sent without the offload. Unsendable frames (empty, over
    /// 65535 bytes, unreachable) are refused as in [`TxRing::tx_burst`].
    /// With [`TxOffload::NONE`] this is [`TxRing::tx_burst`].
    ///
    /// With TSO ([`TxOffload::with_tso`]) a frame may be far longer than
    /// one data descriptor carries (a 64 KiB TCP payload, from a mempool of
    /// big buffers): it stays one [`Packet`], and the ring points one data
    /// descriptor at each [`TSO_DATA_PER_DESC`] bytes of its buffer, PAYLEN
    /// on the first and EOP on the last; the buffer is freed when the last
    /// completes. A frame that needs more descriptors than the ring holds
    /// is refused ([`TxRefusal::RingTooSmall`]); one that does not fit now
    /// waits in `pkts` (one more reclaim is tried first).
    ///
    /// Report status never sits on a descriptor without a buffer (a
    /// context, or a TSO frame's descriptor before its last): a fixed batch
    /// end that holds one has RS on the frame's last descriptor instead,
    /// and reclaim looks there.
    pub fn tx_burst_offload(
        &mut self,
        pkts: &mut Vec<Packet>,
        offload: &TxOffload,
        cache: &mut PoolCache,
    ) -> usize {
        if offload.is_none() {
            return self.tx_burst(pkts, cache);
        }
        let len = pkts.len();
        // Two descriptors per frame but for TSO; a burst that runs short of
        // room reclaims once more before it gives up (below).
        let mut reclaimed = false;
        if (self.free as usize) < (2 * len).max(TX_FREE_THRESH) {
            self.reclaim(cache);
            reclaimed = true;
        }
        let mask = self.desc.mask();
        let ring_room = mask as usize; // ring size − 1
        let start = self.tail;
        let mut t = start;
        let mut free = self.free as usize;
        let (mut taken, mut queued, mut bytes, mut errors) = (0usize, 0u64, 0u64, 0u64);
        let mut last_data = start;
        let mut ctx_last = self.ctx_last;
        let cc = if self.check_context { TXD_OLINFO_CC } else { 0 };
        let base = pkts.as_mut_ptr();
        // From here the Vec owns none of its packets: each of the first
        // `taken` is handed to the ring or refused exactly once, the rest go
        // back to it at the end (as in `tx_burst`; a panic leaks, never
        // frees twice).
        // SAFETY: 0 <= len.
        unsafe { pkts.set_len(0) };
        while taken < len {
            // SAFETY: `taken < len`: an initialised packet not yet handed over.
            let p = unsafe { &*base.add(taken) };
            let (pool, idx, plen) = p.parts();
            let mut plan = tx_plan(p.data(), offload);
            // Data descriptors: one, or for TSO one per
            // `TSO_DATA_PER_DESC` bytes of the one buffer.
            let ndata = match &plan {
                Ok(pl) if pl.tso_paylen.is_some() => (plen as usize).div_ceil(TSO_DATA_PER_DESC),
                _ => 1,
            };
            let need = match &plan {
                Ok(pl) if pl.ctx.is_some() && pl.ctx != ctx_last => ndata + 1,
                Ok(_) => ndata,
                Err(_) => 0,
            };
            if need > ring_room {
                plan = Err(TxRefusal::RingTooSmall {
                    needed: need,
                    ring: ring_room,
                });
            } else if free < need && !reclaimed {
                // Room for the frames queued so far is unchanged: reclaim
                // frees only descriptors before the tail, which this burst
                // has not moved yet.
                reclaimed = true;
                let before = self.free;
                self.reclaim(cache);
                free += (self.free - before) as usize;
            }
            if plan.is_ok() && free < need {
                self.stats.ring_full += 1;
                break;
            }
            taken += 1;
            let plan = match plan {
                Ok(pl) => {
                    // SAFETY: `taken - 1 < len`: the packet, which the
                    // ring now owns and nothing else references.
                    pollnic_hw::offload::tx_prepare(
                        unsafe { (*base.add(taken - 1)).data_mut() },
                        &pl.prep,
                    );
                    pl
                }
                Err(why) => {
                    self.stats.tx_offload_errors += 1;
                    self.last_refusal = Some(why);
                    errors += 1;
                    refuse(cache, pool, idx);
                    continue;
                }
            };
            // A TSO frame's length is bounded by its plan (PAYLEN and the
            // parsed headers), not by one descriptor's DTALEN.
            let sendable =
                plan.tso_paylen.is_some() || (plen as usize).wrapping_sub(1) < TX_MAX_DATA_LEN;
            let (view, desc_region) = (self.desc.view(), self.desc.region());
            let iova = if pool.as_ptr().cast_const() == self.fast && sendable {
                // SAFETY: the ring's own pool (alive: the packet's
                // reference) and one of its buffers.
                Some(unsafe { self.own.get(idx) })
            } else {
                // SAFETY: the packet's reference, now the ring's, keeps
                // `pool` alive.
                unsafe { other_iova(pool, idx, sendable, desc_region) }
            };
            let Some(iova) = iova else {
                errors += 1;
                refuse(cache, pool, idx);
                continue;
            };
            if let Some(ctx) = plan.ctx.filter(|c| Some(*c) != ctx_last) {
                view.write(t, ctx.encode(0));
                self.slots[(t & mask) as usize] = Slot::NoBuffer;
                self.marked_in_flight += 1;
                self.stats.tx_contexts += 1;
                ctx_last = Some(ctx);
                t = (t + 1) & mask;
                free -= 1;
            }
            let olinfo = plan.popts | if plan.ctx.is_some() { cc } else { 0 };
            match plan.tso_paylen {
                None => view.write(t, tx_data_offload(iova, plen as u16, plan.dcmd, olinfo)),
                Some(paylen) => {
                    // One buffer, `ndata` descriptors: PAYLEN and the
                    // POPTS/IDX/CC on the first, EOP on the last; those
                    // before the last hold no buffer of their own.
                    let first = olinfo | paylen << TXD_PAYLEN_SHIFT;
                    let mut off = 0usize;
                    for k in 0..ndata {
                        let n = TSO_DATA_PER_DESC.min(plen as usize - off);
                        let eop = k + 1 == ndata;
                        let ol = if k == 0 { first } else { 0 };
                        view.write(
                            t,
                            tx_data_part(iova + off as u64, n as u16, eop, plan.dcmd, ol),
                        );
                        off += n;
                        if !eop {
                            self.slots[(t & mask) as usize] = Slot::NoBuffer;
                            self.marked_in_flight += 1;
                            t = (t + 1) & mask;
                            free -= 1;
                        }
                    }
                }
            }
            self.idx[(t & mask) as usize] = idx;
            if pool.as_ptr().cast_const() != self.fast {
                self.slots[(t & mask) as usize] = Slot::Foreign(pool);
                self.marked_in_flight += 1;
                self.stats.foreign += 1;
            }
            last_data = t;
            t = (t + 1) & mask;
            free -= 1;
            queued += 1;
            bytes += plen as u64;
        }
        // SAFETY: packets `taken..len` are initialised and still the
        // caller's: moved to the front and given back to the Vec.
        unsafe {
            std::ptr::copy(base.add(taken), base, len - taken);
            pkts.set_len(len - taken);
        }
        self.ctx_last = ctx_last;
        self.stats.tx_errors += errors;
        if queued > 0 {
            self.set_rs_at(last_data);
            let used = (t.wrapping_sub(start) & mask) as usize;
            if (start & (TX_RS_THRESH - 1)) as usize + used > TX_RS_THRESH as usize {
                self.set_batch_ends_ctx(start, used as u16);
            }
            self.tail = t;
            self.free = free as u16;
            self.stats.packets += queued;
            self.stats.bytes += bytes;
            self.stats.bursts += 1;
            self.desc.publish();
            self.doorbell.ring(t);
        }
        taken
    }

    /// Set RS on descriptor `i`, a data descriptor.
    fn set_rs_at(&mut self, i: u16) {
        let view = self.desc.view();
        view.write_hi(i, view.read_hi(i) | TXD_DCMD_RS as u64);
    }

    /// [`TxRing::set_batch_ends`] for a burst that may hold descriptors
    /// without a buffer (context descriptors, a TSO frame's descriptors
    /// before its last): a batch end that holds one gets no RS; the same
    /// frame's last descriptor, the next one with a buffer, gets it instead
    /// (report status only on a frame's last descriptor, as Linux `igb_tx_map`
    /// sets it). A frame spans at most 1 + `TSO_MAX_PAYLEN` /
    /// `TSO_DATA_PER_DESC` + 2 = 19 descriptors, fewer than a batch, so
    /// the moved RS never passes the next batch end.
    #[inline(never)]
    fn set_batch_ends_ctx(&mut self, first: u16, used: u16) {
        let mask = self.desc.mask();
        debug_assert!(mask >= TX_RS_THRESH - 1);
        let mut ahead = (first | (TX_RS_THRESH - 1)) - first;
        while ahead < used - 1 {
            let mut at = first.wrapping_add(ahead) & mask;
            // The burst's last descriptor holds a buffer, so this stops
            // inside the burst.
            while matches!(self.slots[at as usize], Slot::NoBuffer) {
                at = (at + 1) & mask;
            }
            self.set_rs_at(at);
            ahead += TX_RS_THRESH;
        }
    }

    /// Return the buffers of every completed batch, oldest first, into
    /// `cache` (or their own pool); returns how many descriptors were freed.
    ///
    /// The device completes descriptors in order, so the batches done form a
    /// prefix of those in flight. The newest descriptor is checked first (it
    /// has RS: when it is done, everything in flight is freed after one DD
    /// read); otherwise the fixed batch ends are checked oldest first, one DD
    /// read each, up to the first not done. Whatever the device writes, only
    /// descriptors this ring queued are freed, each once.
    pub fn reclaim(&mut self, cache: &mut PoolCache) -> usize {
        let in_flight = self.in_flight() as u16;
        if in_flight == 0 {
            return 0;
        }
        let mask = self.desc.mask();
        let (clean, last) = (self.clean, self.tail.wrapping_sub(1) & mask);
        let run = if tx_done(self.desc.read_hi(last)) {
            in_flight
        } else {
            // Descriptors `clean..clean + run` are done; the next batch ends
            // at the next index that is `TX_RS_THRESH - 1` modulo it. The
            // batch that ends at `last` or beyond is not done (`last` is not).
            let mut run = 0u16;
            loop {
                let pos = (clean + run) & mask;
                let mut end = run + (TX_RS_THRESH - 1 - (pos & (TX_RS_THRESH - 1))) + 1;
                // A batch end that holds no buffer (a context descriptor,
                // or a TSO frame's descriptor before its last) has its RS on
                // the frame's next descriptor with a buffer, its last
                // (`set_batch_ends_ctx`).
                if self.marked_in_flight != 0 {
                    while end < in_flight
                        && matches!(
                            self.slots[((clean + end - 1) & mask) as usize],
                            Slot::NoBuffer
                        )
                    {
                        end += 1;
                    }
                }
                if end >= in_flight || !tx_done(self.desc.read_hi((clean + end - 1) & mask)) {
                    break run;
                }
                run = end;
            }
        };
        if run == 0 {
            return 0;
        }
        if self.marked_in_flight == 0 && cache.pool().same_pool(&self.pool) {
            self.free_own_run(run, cache);
        } else {
            self.free_mixed_run(run, cache);
        }
        self.clean = (clean + run) & mask;
        self.free += run;
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
    /// pool, some descriptor is a context, or `cache` is not of the ring's
    /// own pool.
    fn free_mixed_run(&mut self, run: u16, cache: &mut PoolCache) {
        let mask = self.desc.mask();
        let own = self.pool.as_ptr();
        for k in 0..run {
            let t = ((self.clean + k) & mask) as usize;
            let pool = match std::mem::replace(&mut self.slots[t], Slot::Own) {
                Slot::Own => own,
                Slot::Foreign(p) => {
                    self.marked_in_flight -= 1;
                    p
                }
                Slot::NoBuffer => {
                    self.marked_in_flight -= 1;
                    continue;
                }
            };
            // SAFETY: descriptor `t` is in the live range being freed: its
            // buffer and one reference of `pool` (recorded in `tx_burst`) are
            // handed over once (`clean` moves past it, `foreign[t]` is emptied).
            cache.recycle(unsafe { Packet::from_raw_parts(pool, self.idx[t]) });
        }
    }

    /// Descriptors queued and not yet reclaimed: one per frame on the plain
    /// path; context descriptors and a TSO frame's extra data descriptors
    /// count too.
    pub fn in_flight(&self) -> usize {
        (self.desc.count() - 1 - self.free) as usize
    }
    /// Accounting for tests and the fuzz harness: the buffer of each
    /// descriptor in flight (context descriptors, which hold none, left
    /// out), oldest first, as `(index, of the ring's own pool)`.
    #[doc(hidden)]
    pub fn in_flight_buffers(&self) -> impl Iterator<Item = (u32, bool)> + '_ {
        let mask = self.desc.mask();
        (0..self.in_flight() as u16).filter_map(move |k| {
            let t = ((self.clean + k) & mask) as usize;
            match self.slots[t] {
                Slot::Own => Some((self.idx[t], true)),
                Slot::Foreign(_) => Some((self.idx[t], false)),
                Slot::NoBuffer => None,
            }
        })
    }
    /// Set CC (check context) in the data descriptors that use a context:
    /// the 82599 reads the context only then (`IXGBE_ADVTXD_CC`, 82599
    /// datasheet §7.2.3.2.4); igb has no such bit (off in a new ring).
    pub fn set_check_context(&mut self, on: bool) {
        self.check_context = on;
    }
    /// Why the last frame refused for its offload request was refused
    /// (counted in [`TxStats::tx_offload_errors`]), if any was.
    pub fn last_refusal(&self) -> Option<TxRefusal> {
        self.last_refusal
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

/// Free a refused packet's buffer, given as its parts
/// over (so the hot loop never moves a whole `Packet` through memory).
#[cold]
#[inline(never)]
fn refuse(cache: &mut PoolCache, pool: NonNull<Shared>, idx: u32) {
    // SAFETY: the caller owns buffer `idx` of `pool` and one reference (a
    // packet's parts): rebuilding hands both back once.
    cache.recycle(unsafe { Packet::from_raw_parts(pool, idx) });
}

impl<D: Doorbell> Drop for TxRing<D> {
    /// Give back the buffers still in flight (the driver has stopped the
    /// queue, so the device no longer reads them).
    fn drop(&mut self) {
        let mask = self.desc.mask();
        let own = self.pool.as_ptr();
        for k in 0..self.in_flight() as u16 {
            let t = ((self.clean + k) & mask) as usize;
            let pool = match std::mem::replace(&mut self.slots[t], Slot::Own) {
                Slot::Own => own,
                Slot::Foreign(p) => p,
                Slot::NoBuffer => continue,
            };
            // SAFETY: descriptor `t` is in the live range: its buffer and one
            // reference of `pool` are handed over once (the ring is going).
            drop(unsafe { Packet::from_raw_parts(pool, self.idx[t]) });
        }
        self.free = self.desc.count() - 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dma::{IdentityMapper, PageSize};
    use pollnic_hw::desc::{TxRequest, TXD_STAT_DD};
    use pollnic_hw::offload::TXD_DCMD_TSE;
    use std::sync::Arc;

    /// A tail register that reaches no device: the tests play the
    /// device's write-backs themselves.
    struct Mute;
    impl Doorbell for Mute {
        fn ring(&mut self, _tail: u16) {}
    }

    /// A TX ring of `ring` descriptors whose device never sends, and `n`
    /// packets.
    fn rig(ring: u16, n: usize) -> (TxRing<Mute>, PoolCache, Vec<Packet>) {
        let p = Mempool::new(256, 2048, PageSize::Small4K, Arc::new(IdentityMapper)).unwrap();
        let desc = DescRing::new(ring, PageSize::Small4K, Arc::new(IdentityMapper)).unwrap();
        let tx = TxRing::new(desc, &p, Mute);
        let mut cache = PoolCache::new(p.clone(), 64);
        let mut pkts = Vec::new();
        cache.alloc_burst(&mut pkts, n);
        for pkt in &mut pkts {
            pkt.set_len(60).unwrap();
        }
        (tx, cache, pkts)
    }

    fn rs(tx: &TxRing<Mute>, i: u16) -> bool {
        tx.desc.read_sw(i).hi as u32 & TXD_DCMD_RS != 0
    }

    fn write_back(tx: &TxRing<Mute>, i: u16) {
        let hi = tx.desc.read_sw(i).hi;
        tx.desc.view().write_hi(i, hi | (TXD_STAT_DD as u64) << 32);
    }

    #[test]
    fn rs_sits_on_the_fixed_batch_ends_and_on_each_bursts_last() {
        let (mut tx, mut cache, mut pkts) = rig(128, 100);
        let mut first = pkts.drain(..40).collect::<Vec<_>>();
        assert_eq!(tx.tx_burst(&mut first, &mut cache), 40);
        assert_eq!(tx.tx_burst(&mut pkts, &mut cache), 60);
        let with_rs: Vec<u16> = (0..100).filter(|&i| rs(&tx, i)).collect();
        assert_eq!(with_rs, vec![31, 39, 63, 95, 99]);
    }

    /// On every ring size, for bursts of every length at every offset in a
    /// batch: RS is on exactly the fixed batch ends (index 31 mod 32, on
    /// rings of at least 32) and on each burst's last descriptor.
    #[test]
    fn rs_rule_holds_for_every_burst_length_and_offset() {
        for ring in [8u16, 16, 32, 64, 512] {
            let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ ring as u64;
            let (mut tx, mut cache, mut pkts) = rig(ring, 0);
            let mut sent = 0usize;
            while sent < 4 * ring as usize {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let want = 1 + (seed % 70) as usize;
                // Make room: pretend the device sent everything so far.
                if tx.in_flight() > 0 {
                    let last = tx.tail.wrapping_sub(1) & tx.desc.mask();
                    write_back(&tx, last);
                    tx.reclaim(&mut cache);
                }
                cache.alloc_burst(&mut pkts, want);
                for p in &mut pkts {
                    p.set_len(60).unwrap();
                }
                let first = tx.tail;
                let n = tx.tx_burst(&mut pkts, &mut cache);
                cache.free_bulk(&mut pkts);
                assert!(n > 0);
                for k in 0..n as u16 {
                    let i = first.wrapping_add(k) & tx.desc.mask();
                    let end = ring >= TX_RS_THRESH && i % TX_RS_THRESH == TX_RS_THRESH - 1;
                    let expect = end || k == n as u16 - 1;
                    assert_eq!(
                        rs(&tx, i),
                        expect,
                        "ring {ring}, burst of {n} from {first}: {i}"
                    );
                }
                sent += n;
            }
        }
    }

    #[test]
    fn reclaim_frees_done_batches_only_in_order() {
        let (mut tx, mut cache, mut pkts) = rig(128, 100);
        assert_eq!(tx.tx_burst(&mut pkts, &mut cache), 100);
        // Nothing written back: nothing freed.
        assert_eq!(tx.reclaim(&mut cache), 0);
        // A later batch end done before an earlier one (a device that lies
        // about order) frees nothing beyond the first batch not done.
        write_back(&tx, 63);
        assert_eq!(tx.reclaim(&mut cache), 0);
        write_back(&tx, 31);
        assert_eq!(tx.reclaim(&mut cache), 64);
        assert_eq!(tx.in_flight(), 36);
        // Batch end 95 done, the last (99) not: up to 95.
        write_back(&tx, 95);
        assert_eq!(tx.reclaim(&mut cache), 32);
        // The burst's last done: everything.
        write_back(&tx, 99);
        assert_eq!(tx.reclaim(&mut cache), 4);
        assert_eq!(tx.in_flight(), 0);
        assert_eq!(tx.reclaim(&mut cache), 0);
    }

    /// A TCP/IPv4 frame of `payload` bytes of TCP payload in a buffer of
    /// `pool`.
    fn tso_packet(pool: &Mempool, payload: usize) -> Packet {
        let mut p = pool.alloc().expect("a free buffer");
        p.set_len(14 + 20 + 20 + payload).unwrap();
        let f = p.data_mut();
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[14 + 9] = 6;
        f[14 + 20 + 12] = 5 << 4;
        p
    }

    fn eop(tx: &TxRing<Mute>, i: u16) -> bool {
        tx.desc.read_sw(i).hi as u32 & pollnic_hw::desc::TXD_DCMD_EOP != 0
    }

    /// A TSO frame spans a context and several data descriptors over one
    /// buffer: RS goes on frames' last descriptors only (a batch end that
    /// falls on an earlier one moves to the frame's last), reclaim finds
    /// it there, and each buffer is freed once, with its last descriptor.
    #[test]
    fn tso_frames_span_descriptors_and_rs_moves_to_their_last() {
        let big = Mempool::new(
            32,
            24 * 1024,
            PageSize::Emulated2M,
            Arc::new(IdentityMapper),
        )
        .unwrap();
        let (mut tx, mut cache, _) = rig(64, 0);
        let ol = TxOffload::NONE.with_tso(1000);
        // 20,000 bytes of payload: 20,054 bytes, two data descriptors.
        let mut burst: Vec<Packet> = (0..20).map(|_| tso_packet(&big, 20_000)).collect();
        assert_eq!(tx.tx_burst_offload(&mut burst, &ol, &mut cache), 20);
        // Descriptor 0 is the context, frame k is 1 + 2k and 2 + 2k.
        assert_eq!(tx.in_flight(), 41);
        assert_eq!(tx.stats().tx_contexts, 1);
        for k in 0..20u16 {
            assert!(!eop(&tx, 1 + 2 * k) && eop(&tx, 2 + 2 * k), "frame {k}");
            let first = TxRequest::decode(tx.desc.read_sw(1 + 2 * k));
            assert_eq!(first.len, TSO_DATA_PER_DESC as u16);
            assert_eq!(
                first.olinfo_status >> 14,
                20_000,
                "PAYLEN on the first: the TCP payload"
            );
            assert_eq!(first.cmd_type_len & TXD_DCMD_TSE, TXD_DCMD_TSE);
            let second = TxRequest::decode(tx.desc.read_sw(2 + 2 * k));
            assert_eq!(
                (second.olinfo_status, second.len),
                (0, 20_054 - TSO_DATA_PER_DESC as u16)
            );
            assert_eq!(
                second.cmd_type_len & TXD_DCMD_TSE,
                TXD_DCMD_TSE,
                "DCMD on every one"
            );
            assert_eq!(
                tx.desc.read_sw(2 + 2 * k).lo,
                tx.desc.read_sw(1 + 2 * k).lo + TSO_DATA_PER_DESC as u64,
                "the second points further into the same buffer"
            );
        }
        // Batch end 31 is frame 15's first descriptor: RS moves to 32.
        let with_rs: Vec<u16> = (0..41).filter(|&i| rs(&tx, i)).collect();
        assert_eq!(with_rs, vec![32, 40]);
        assert_eq!(big.free_count(), 12);
        // The device is done up to 32: 16 frames (and the context) freed.
        write_back(&tx, 32);
        assert_eq!(tx.reclaim(&mut cache), 33);
        // Another pool's buffers go straight back to it.
        assert_eq!(big.free_count(), 12 + 16);
        assert_eq!(tx.in_flight_buffers().count(), 4);
        write_back(&tx, 40);
        assert_eq!(tx.reclaim(&mut cache), 8);
        assert_eq!(big.free_count(), 32, "every buffer back once");
    }

    /// Random bursts of TSO frames of 1 to 4 data descriptors, with and
    /// without a new context, on a small ring, the device completing a
    /// random prefix of the report points each time: RS only ever on an
    /// EOP descriptor, reclaim frees only what is done, and every buffer
    /// comes back exactly once.
    #[test]
    fn tso_bursts_keep_rs_on_frame_ends_and_lose_no_buffer() {
        let big = Mempool::new(
            64,
            56 * 1024,
            PageSize::Emulated2M,
            Arc::new(IdentityMapper),
        )
        .unwrap();
        let (mut tx, mut cache, _) = rig(64, 0);
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut sent = 0;
        for _ in 0..400 {
            let n = 1 + rnd(6) as usize;
            let mss = [1000u16, 1448][rnd(2) as usize];
            let mut burst = Vec::new();
            for _ in 0..n.min(big.free_count()) {
                let len = 1 + rnd(3 * TSO_DATA_PER_DESC as u64) as usize;
                burst.push(tso_packet(&big, len));
            }
            let before = tx.tail;
            let took = tx.tx_burst_offload(&mut burst, &TxOffload::NONE.with_tso(mss), &mut cache);
            sent += took;
            drop(burst);
            let mask = tx.desc.mask();
            let mut i = before;
            while i != tx.tail {
                assert!(
                    !rs(&tx, i) || eop(&tx, i),
                    "RS on a descriptor that is not a frame's last: {i}"
                );
                i = (i + 1) & mask;
            }
            // The device completes up to a random report point.
            let points: Vec<u16> = (0..tx.in_flight() as u16)
                .map(|k| (tx.clean + k) & mask)
                .filter(|&i| rs(&tx, i))
                .collect();
            if !points.is_empty() {
                let upto = rnd(points.len() as u64 + 1) as usize;
                for &i in &points[..upto] {
                    write_back(&tx, i);
                }
                tx.reclaim(&mut cache);
            }
            let in_ring = tx.in_flight_buffers().count();
            assert_eq!(
                big.free_count() + in_ring,
                64,
                "a buffer lost or freed twice"
            );
        }
        assert!(sent > 400);
        let last = tx.tail.wrapping_sub(1) & tx.desc.mask();
        write_back(&tx, last);
        tx.reclaim(&mut cache);
        assert_eq!((tx.in_flight(), big.free_count()), (0, 64));
    }

    /// A frame that needs more descriptors than the ring can ever hold is
    /// refused, not left waiting forever; a smaller one still goes.
    #[test]
    fn a_tso_frame_larger_than_the_ring_is_refused() {
        let big = Mempool::new(
            2,
            240 * 1024,
            PageSize::Emulated2M,
            Arc::new(IdentityMapper),
        )
        .unwrap();
        let (mut tx, mut cache, _) = rig(16, 0);
        // 230,000 bytes: a context and 15 data descriptors, 16 > 15.
        let mut burst = vec![tso_packet(&big, 230_000), tso_packet(&big, 200_000)];
        let ol = TxOffload::NONE.with_tso(1448);
        assert_eq!(tx.tx_burst_offload(&mut burst, &ol, &mut cache), 2);
        assert_eq!(
            tx.last_refusal(),
            Some(TxRefusal::RingTooSmall {
                needed: 16,
                ring: 15
            })
        );
        let s = tx.stats();
        assert_eq!(
            (s.tx_offload_errors, s.tx_errors, s.packets, s.ring_full),
            (1, 1, 1, 0)
        );
        // 200,054 bytes: 13 data descriptors and the context.
        assert_eq!(tx.in_flight(), 14);
        assert_eq!(big.free_count(), 1);
    }
}
