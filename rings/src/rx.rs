//! RX descriptor ring bookkeeping: refill, DD check, validation of the
//! write-back, and a tail write once per [`rx_free_thresh`] re-armed
//! descriptors.
//!
//! Invariant: every descriptor software has looked at is re-armed (read
//! format: a buffer address, DD clear) before the burst ends; the device owns
//! `[RDH, RDT)`, and RDT only ever moves to `next - 1`, the newest re-armed
//! descriptor, which is held back (82576 datasheet §7.1.4: head == tail means
//! no free descriptors). So the device is never given a descriptor that
//! still holds a write-back. The tail is written only once at least
//! [`rx_free_thresh`] re-armed descriptors wait behind it, as DPDK's igb PMD
//! does with `rx_free_thresh` (32): each RDT write is an MMIO write, i.e. a
//! VM exit under emulation, and the device meanwhile still owns all but
//! those few descriptors. A completed descriptor is re-armed with a fresh
//! buffer *before* its frame is handed up; when the mempool is empty the
//! burst stops and counts `rx_nombuf` instead of dropping (DPDK igb PMD
//! behaviour).
//! Fresh buffers come from the ring's own [`PoolCache`], and the pool
//! reference every armed buffer holds passes to its packet, so a burst does
//! no atomic operation (see `crate::mempool` for the invariant).

use crate::descring::{DescRing, Doorbell};
use crate::mempool::{BufIovas, Mempool, Packet, PoolCache};
use crate::simd::{self, DataPath};
use pollnic_hw::desc::{rx_read, RXD_ERR_RXE, RXD_STAT_DD, RXD_STAT_EOP};
use std::sync::atomic::{compiler_fence, Ordering};

/// Per-ring software counters (DPDK `rte_eth_stats` terms). Non-exhaustive:
/// more may come; read the fields, or start from `RxStats::default()`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RxStats {
    // (Counters updated by every burst sit apart, so that the compiler does
    // not pack their updates into vector adds, which cost more here.)
    /// Frames handed to the application.
    pub packets: u64,
    /// `rx_burst` calls that found nothing.
    pub empty_polls: u64,
    /// Bytes in those frames (no FCS).
    pub bytes: u64,
    /// Times a burst stopped because the mempool had no buffer to refill with.
    pub rx_nombuf: u64,
    /// `rx_burst` calls that returned at least one frame.
    pub bursts: u64,
    /// Descriptors dropped as invalid: error bit set, not EOP (frame larger
    /// than one buffer), zero length, or a length larger than the buffer.
    pub rx_errors: u64,
}

/// Errors creating or configuring a ring.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RingError {
    /// An RX error mask ([`RxRing::set_error_mask`]) that holds DD or EOP:
    /// every good frame shows those, so the scalar loop would drop every
    /// frame as bad while the vector loop (which tests DD and EOP apart)
    /// would take them.
    #[error(
        "RX error mask {mask:#010x} holds the status bits DD (bit 0) or EOP (bit 1), which \
         every good frame shows: an error mask names error bits only"
    )]
    ErrorMaskHasStatus {
        /// The mask refused.
        mask: u32,
    },
    /// The device could not reach the pool's buffers (another IO address
    /// space, e.g. another port's VFIO container).
    #[error("the mempool is mapped in another IO address space than the descriptor ring: use a mempool of this device")]
    Unreachable,
    /// The ring's own DMA region could not be allocated or mapped.
    #[error(transparent)]
    Dma(#[from] crate::dma::DmaError),
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

/// Re-armed descriptors that wait behind the tail before RDT is written, for
/// a ring of `ring` descriptors: 32 (DPDK's igb `rx_free_thresh` default), at
/// most a quarter of the ring, at least 1, so the device always owns at least
/// three quarters of the ring minus one.
pub const fn rx_free_thresh(ring: u16) -> u16 {
    let q = ring / 4;
    if q > 32 {
        32
    } else if q == 0 {
        1
    } else {
        q
    }
}

/// Polls an RX ring waits for a descriptor that shows DD with a length of 0
/// before it drops the descriptor as bad (see [`RxRing::rx_burst`]).
pub const RX_UNFINISHED_POLLS: u8 = 4;

/// One RX queue's ring. The device side (register setup, RXDCTL) is the
/// driver's; it must stop the queue before dropping the ring.
pub struct RxRing<D: Doorbell> {
    desc: DescRing,
    /// The pool the slots' buffers belong to (the cache must serve it).
    pool: Mempool,
    /// The pool's buffer IOVAs and buffer size (copies, for the burst loop).
    iovas: BufIovas,
    buf_size: u32,
    slots: Box<[u32]>,
    next: u16,
    /// The value last written to the tail register (RDT).
    tail: u16,
    /// Re-armed descriptors waiting behind the tail: those after `tail` up
    /// to `next - 1`.
    armed: u16,
    /// [`rx_free_thresh`] of the ring's size.
    free_thresh: u16,
    cache: PoolCache,
    doorbell: D,
    /// Polls in a row that stopped at descriptor `unfinished_at`, which
    /// showed DD with length 0.
    unfinished: u8,
    unfinished_at: u16,
    /// What [`good_len`] keeps of a write-back's `hi` word: in the low 32
    /// bits EOP plus the error bits that make a frame bad (per family; a
    /// good frame shows exactly EOP among these, and `keep as u32` is that
    /// mask), above them the length field.
    keep: u64,
    /// Which loop the next burst runs: [`MODE_VECTOR`] or [`MODE_SCALAR`],
    /// plus [`MODE_DISCARDING`] while the rest of a dropped chain is
    /// outstanding (one byte, so that a burst decides with one compare).
    mode: u8,
    /// With [`MODE_OFFLOAD`]: the bit of `status_error` that holds the L4
    /// checksum error (the IPv4 one is the next), per family
    /// (`pollnic_hw::offload::IGB_L4E_BIT`, `IXGBE_L4E_BIT`).
    l4e_bit: u32,
    stats: RxStats,
}

/// `RxRing::mode`: the scalar burst loop.
const MODE_SCALAR: u8 = 0;
/// `RxRing::mode`: the vector burst loop ([`DataPath::Vector`]).
const MODE_VECTOR: u8 = 1;
/// `RxRing::mode`: the previous burst stopped inside a chain whose head it
/// dropped (a frame longer than one buffer).
const MODE_DISCARDING: u8 = 2;
/// `RxRing::mode`: each packet keeps its write-back's checksum status and
/// VLAN tag ([`RxRing::set_offload_status`]).
const MODE_OFFLOAD: u8 = 4;

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
        // Each armed buffer holds a pool reference (as every buffer outside
        // the shared free list does), handed to its packet on receive.
        pool.shared().acquire(n);
        for (i, &b) in bufs.iter().enumerate() {
            desc.write(i as u16, rx_read(pool.buf_iova(b)));
        }
        Ok(RxRing {
            desc,
            iovas: pool.shared().iovas(),
            buf_size: pool.buf_size() as u32,
            slots: bufs.into_boxed_slice(),
            next: 0,
            tail: 0,
            armed: 0,
            free_thresh: rx_free_thresh(n as u16),
            pool: pool.clone(),
            cache: PoolCache::new(pool.clone(), rx_cache_size(n)),
            doorbell,
            unfinished: 0,
            unfinished_at: 0,
            keep: keep_bits(RXD_STAT_EOP | RXD_ERR_RXE),
            l4e_bit: pollnic_hw::offload::IGB_L4E_BIT,
            mode: if DataPath::detect() == DataPath::Vector {
                MODE_VECTOR
            } else {
                MODE_SCALAR
            },
            stats: RxStats::default(),
        })
    }

    /// Which bits of the write-back's `status_error` mark a bad frame; the
    /// default is igb's RXE (bit 31, 82576 datasheet §7.1.5). The 82599 puts
    /// its IPv4 checksum error there and its frame errors in bits 24..=29
    /// (`pollnic_hw::ixgbe::bits::RXDADV_ERR_FRAME_ERR_MASK`), so each family
    /// sets its own mask before traffic starts.
    ///
    /// # Errors
    /// [`RingError::ErrorMaskHasStatus`] when `mask` holds DD or EOP
    /// (`pollnic_hw::desc::RXD_STAT_DD`, `RXD_STAT_EOP`); the mask in use
    /// is then unchanged.
    pub fn set_error_mask(&mut self, mask: u32) -> Result<(), RingError> {
        if mask & (RXD_STAT_DD | RXD_STAT_EOP) != 0 {
            return Err(RingError::ErrorMaskHasStatus { mask });
        }
        self.keep = keep_bits(RXD_STAT_EOP | mask);
        Ok(())
    }

    /// Choose the burst loop: a new ring runs [`DataPath::detect`]'s. Both
    /// give the same frames, counters and ring state.
    ///
    /// # Panics
    /// On [`DataPath::Vector`] when this CPU does not run it
    /// ([`DataPath::vector_supported`]; the driver checks before).
    pub fn set_data_path(&mut self, path: DataPath) {
        assert!(
            path == DataPath::Scalar || DataPath::vector_supported(),
            "the vector data path needs x86-64 SSE2"
        );
        let vector = if path == DataPath::Vector {
            MODE_VECTOR
        } else {
            MODE_SCALAR
        };
        self.mode = self.mode & (MODE_DISCARDING | MODE_OFFLOAD) | vector;
    }

    /// Keep (`on`) or not each frame's checksum status and stripped VLAN tag
    /// from its write-back, for [`Packet::rx_checksum`] and [`Packet::vlan`]
    /// (off in a new ring: every packet then reads "not checked", no tag).
    /// `l4e_bit` is the family's bit of the L4 checksum error in
    /// `status_error`, the IPv4 one being the next:
    /// `pollnic_hw::offload::IGB_L4E_BIT` (29) or `IXGBE_L4E_BIT` (30).
    /// The NIC reports the status only once the driver has enabled the
    /// offloads (RXCSUM, VLAN strip); this only decides whether the ring
    /// keeps it. With it on, a burst runs its own copy of the loops (off,
    /// the loops are those without the offload work).
    ///
    /// # Panics
    /// When `l4e_bit` is not 29 or 30 (the two families' layouts).
    pub fn set_offload_status(&mut self, on: bool, l4e_bit: u32) {
        assert!(
            l4e_bit == pollnic_hw::offload::IGB_L4E_BIT
                || l4e_bit == pollnic_hw::offload::IXGBE_L4E_BIT,
            "the L4 checksum error is bit 29 (igb) or 30 (82599)"
        );
        self.l4e_bit = l4e_bit;
        if on {
            self.mode |= MODE_OFFLOAD;
        } else {
            self.mode &= !MODE_OFFLOAD;
        }
    }

    /// Whether the ring keeps each frame's offload status
    /// ([`RxRing::set_offload_status`]).
    pub fn offload_status(&self) -> bool {
        self.mode & MODE_OFFLOAD != 0
    }

    /// The burst loop this ring runs.
    pub fn data_path(&self) -> DataPath {
        if self.mode & MODE_VECTOR != 0 {
            DataPath::Vector
        } else {
            DataPath::Scalar
        }
    }

    /// Give the device every descriptor but one: tail = ring size − 1.
    pub fn start(&mut self) {
        self.desc.publish();
        self.tail = self.desc.count() - 1;
        self.doorbell.ring(self.tail);
    }

    /// Software has looked at (and re-armed) every descriptor before `next`:
    /// move RDT to `next - 1` if at least `free_thresh` re-armed descriptors
    /// wait behind it. Never past `next - 1`: the descriptors from `next` on
    /// may hold write-backs software has not re-armed.
    #[inline]
    fn give_back(&mut self, next: u16) {
        let mask = self.desc.mask();
        self.armed = (next.wrapping_sub(1) & mask).wrapping_sub(self.tail) & mask;
        self.give_back_armed(next);
    }

    /// [`RxRing::give_back`] once `armed` counts the re-armed descriptors
    /// before `next`.
    #[inline(always)]
    fn give_back_armed(&mut self, next: u16) {
        if self.armed >= self.free_thresh {
            let newest = next.wrapping_sub(1) & self.desc.mask();
            self.desc.publish();
            self.doorbell.ring(newest);
            self.tail = newest;
            self.armed = 0;
        }
    }

    /// Receive up to `max` frames, appending them to `out`; returns how many.
    /// Never allocates if `out` has room for `max` more. Looks at no more
    /// than one ring's worth of descriptors per call, whatever the device
    /// writes. A descriptor that shows DD with a length of 0 ends the burst
    /// without being consumed, in at most [`RX_UNFINISHED_POLLS`] calls in a
    /// row that stop at it; the next such call drops it and counts it in
    /// `rx_errors`. Under QEMU/TCG a
    /// guest vCPU can see the DD store of QEMU's igb (written on its own,
    /// after the rest of the descriptor) before the length: the next poll
    /// found the frame whole (README, "pollnic-1q's loss at 50 and 100 kpps").
    #[inline]
    pub fn rx_burst(&mut self, out: &mut Vec<Packet>, max: usize) -> usize {
        let mode = self.mode;
        let got = if mode == MODE_VECTOR {
            self.burst::<true, false>(out, max)
        } else if mode == MODE_SCALAR {
            self.burst::<false, false>(out, max)
        } else {
            self.burst_other(out, max)
        };
        // The packets' bytes were written by the device before it set DD,
        // and the caller reads them with ordinary (not volatile) loads: the
        // compiler must not move those above the burst's descriptor loads
        // (volatile loads order only against other volatile accesses), so
        // one compiler fence per burst, here, after every descriptor read
        // and before any packet reaches the caller. It emits no
        // instruction. On x86-64 the CPU does not reorder loads (TSO), so
        // this is all that is needed. Weaker architectures also need the
        // CPU's load-load order: there the descriptor reads emit an acquire
        // fence after each `hi` that showed DD (`crate::descring`), which
        // orders the packet reads too; DPDK's drivers use `rte_io_rmb` for
        // this read side (`dmb oshld` on arm64, an outer-shareable barrier
        // that covers device writes) and `rte_io_wmb` before a tail write,
        // where `fence(Acquire)`/`fence(Release)` give the inner-shareable
        // `dmb ishld`/`dmb ish`: enough on a cache-coherent DMA system, to
        // be revisited for one that is not.
        compiler_fence(Ordering::Acquire);
        got
    }

    /// [`RxRing::rx_burst`] in the modes other than plain vector or scalar:
    /// with offload status, or finishing a dropped chain. Cold, as the
    /// chain's end was before it: so the plain loops' dispatch stays as
    /// it was (one compare each), whatever these modes cost.
    #[cold]
    #[inline(never)]
    fn burst_other(&mut self, out: &mut Vec<Packet>, max: usize) -> usize {
        let mode = self.mode;
        if mode & MODE_DISCARDING != 0 {
            self.finish_chain(out, max)
        } else if mode & MODE_VECTOR != 0 {
            self.burst::<true, true>(out, max)
        } else {
            self.burst::<false, true>(out, max)
        }
    }

    /// [`RxRing::rx_burst`]. With `OL`, each packet keeps its write-back's
    /// status word (`pollnic_hw::offload::rx_status_word`). The hot loop takes good frames (with `VEC`,
    /// four in a row in one step, `crate::simd::rx_quad`, exactly as four
    /// turns of the one-descriptor loop would take them); the first
    /// descriptor that shows DD and is not a good frame, or a cache with no
    /// buffer, hands the rest of the burst to [`RxRing::burst_slow`].
    #[inline(always)]
    fn burst<const VEC: bool, const OL: bool>(
        &mut self,
        out: &mut Vec<Packet>,
        max: usize,
    ) -> usize {
        // The cache is handed out by `cache_mut`: make sure it still serves
        // this ring's pool, whose buffer indices the slots hold.
        assert!(
            self.cache.pool().same_pool(&self.pool),
            "RxRing: its PoolCache was replaced by one of another mempool"
        );
        let view = self.desc.view();
        let mask = view.mask();
        let mut i = self.next;
        // SAFETY: `next` is always masked: 0 at first, then only ever set
        // to an index a burst or `drop_chain` masked.
        let mut hi = unsafe { view.read_hi_slot(view.slot_at(i as usize)) };
        if max == 0 || hi as u32 & RXD_STAT_DD == 0 {
            self.stats.empty_polls += 1;
            return 0;
        }
        let max = max.min(mask as usize + 1);
        let pool_ptr = self.cache.pool().as_ptr();
        let (buf_size, iovas) = (self.buf_size, self.iovas);

        out.reserve(max);
        // Packets go into the Vec's spare capacity (room for `max`), and
        // become its elements with one `set_len` at the end.
        let dst = out.spare_capacity_mut().as_mut_ptr();
        // Fresh buffers come off the top of the cache, one per good frame.
        let cache = &mut self.cache;
        // `slots` is exactly `mask + 1` long (one per descriptor, made so
        // in `new`), so a masked index is in bounds.
        debug_assert_eq!(self.slots.len(), mask as usize + 1);
        let slots = self.slots.as_mut_ptr();
        let keep = self.keep;
        let l4e_bit = self.l4e_bit;
        let (mut got, mut bytes) = (0usize, 0u64);
        // Each turn takes one good frame whose `hi` shows DD. A macro, so
        // that each branch below has its own copy and the common short
        // burst starts it at a constant `got`.
        let mut slow = false;
        macro_rules! one_by_one {
            () => {
                loop {
                    // The device is untrusted: check what it wrote before using it.
                    // A frame is good only as one whole EOP descriptor without an
                    // error bit of the family's mask, not the tail of a chain, with
                    // 0 < len <= buffer size. Anything else is the slow path's.
                    // One test for both (`good_len`): the length, or a value
                    // above any buffer size when the status is not exactly EOP.
                    let Some(len) = good_len(hi, keep, buf_size) else {
                        slow = true;
                        break;
                    };
                    let Some(fresh) = cache.get() else {
                        slow = true;
                        break;
                    };
                    // SAFETY: `i` is masked (`next` always is, and every
                    // step masks it): its descriptor slot is in the ring and
                    // `i < slots.len()` (above); `slots` points into
                    // `self.slots`, which nothing else touches during the
                    // burst. `lo` is read after the `hi` that showed DD.
                    // `fresh` came from the cache of the ring's pool, which
                    // `self.pool` keeps alive.
                    let (lo, done) = unsafe {
                        let p = view.slot_at(i as usize);
                        let lo = view.read_lo_after_dd_slot(p);
                        let done = std::mem::replace(&mut *slots.add(i as usize), fresh);
                        view.write_slot(p, rx_read(iovas.get(fresh)));
                        (lo, done)
                    };
                    bytes += len as u64;
                    let ol = if OL { ol_word(hi, l4e_bit) } else { 0 };
                    // SAFETY: `got < max`, and `out` has room for `max` more
                    // packets from `dst` on (reserved above); slot `got` is
                    // written once. `done` was this slot's armed buffer of the
                    // ring's pool, now replaced by `fresh` (so the ring no longer
                    // owns it), with the pool reference every armed buffer
                    // holds (`fresh` brought its own from the cache); `len <=
                    // buf_size` was checked above.
                    unsafe {
                        (*dst.add(got)).write(Packet::from_parts(
                            pool_ptr,
                            done,
                            len,
                            (lo >> 32) as u32,
                            ol,
                        ));
                    }
                    got += 1;
                    i = (i + 1) & mask;
                    if got == max {
                        break;
                    }
                    hi = view.read_hi(i);
                    if hi as u32 & RXD_STAT_DD == 0 {
                        break;
                    }
                }
            };
        }
        // The vector steps first: four good frames from `i` on, none across
        // the ring's end, room for four more packets, four buffers in the
        // cache, taken in one step as four turns of the loop above would take
        // them. Whatever stops them (a descriptor not done or not a good
        // frame, the ring's end, the cache, `max`) is left to that loop.
        if VEC && max >= 4 {
            while got + 4 <= max && i <= mask - 3 {
                let d = view.slot_ptr(i);
                // SAFETY: `i` is masked (`next` and every step keep it so)
                // and `i + 3 <= mask`: four descriptors in bounds.
                let quad = unsafe { simd::rx_quad::<OL>(d, keep as u32, buf_size, l4e_bit) };
                if let Some((lens, ols)) = quad {
                    if let Some(fresh) = cache.take4() {
                        for k in 0..4u16 {
                            let j = i + k;
                            // `lo` after the `hi` that showed DD (above).
                            let rss = view.read_rss_after_dd(j);
                            // SAFETY: `j <= mask < slots.len()`; `slots` is
                            // `self.slots`, untouched elsewhere.
                            let slot = unsafe { &mut *slots.add(j as usize) };
                            let f = fresh[k as usize];
                            let done = std::mem::replace(slot, f);
                            // SAFETY: `f` came from the cache of the ring's
                            // pool, which `self.pool` keeps alive.
                            view.write(j, rx_read(unsafe { iovas.get(f) }));
                            let len = lens[k as usize];
                            bytes += len as u64;
                            // SAFETY: as for one frame below: `got + k <
                            // max` slots reserved; `done` was armed here and
                            // is replaced by `f` (with its own reference);
                            // `1 <= len <= buf_size` (checked by `rx_quad`).
                            unsafe {
                                (*dst.add(got + k as usize)).write(Packet::from_parts(
                                    pool_ptr,
                                    done,
                                    len,
                                    rss,
                                    ols[k as usize],
                                ));
                            }
                        }
                        got += 4;
                        i = (i + 4) & mask;
                        continue;
                    }
                }
                break;
            }
            let stop = got == max || {
                hi = view.read_hi(i);
                hi as u32 & RXD_STAT_DD == 0
            };
            if !stop {
                one_by_one!();
            }
        } else {
            one_by_one!();
        }
        // SAFETY: the loops wrote a packet into each of the first `got`
        // spare slots, in order, and nothing else touched `out`.
        unsafe { out.set_len(out.len() + got) };
        if slow {
            return self.burst_slow(out, max, i, got, bytes);
        }
        // Here `got >= 1`: the first descriptor showed DD, and a descriptor
        // that is not a good frame goes to the slow path.
        debug_assert!(got > 0);
        self.unfinished = 0;
        self.next = i;
        // Every descriptor before `i` is re-armed: the `got` taken here too.
        self.armed += got as u16;
        self.give_back_armed(i);
        let s = &mut self.stats;
        s.packets += got as u64;
        s.bytes += bytes;
        s.bursts += 1;
        got
    }

    /// The rest of a burst from descriptor `i`, which shows DD and is not a
    /// good frame (or the cache had no buffer for it), after `got` frames of
    /// `bytes` bytes were taken (and appended to `out`; `out` has room for
    /// `max - got` more): every descriptor is looked at on its own. A good
    /// frame is handed up; a bad descriptor is re-armed in place with its
    /// own buffer and counted in `rx_errors`, the rest of its chain too when
    /// it is the head of a frame larger than one buffer; a descriptor with
    /// DD and no length yet ends the burst (see [`RxRing::rx_burst`]); an
    /// empty cache ends it and counts `rx_nombuf`. At most `max` good and
    /// `max` bad descriptors are looked at. Then the burst's bookkeeping:
    /// the tail, the counters.
    #[cold]
    #[inline(never)]
    fn burst_slow(
        &mut self,
        out: &mut Vec<Packet>,
        max: usize,
        mut i: u16,
        mut got: usize,
        mut bytes: u64,
    ) -> usize {
        let view = self.desc.view();
        let mask = view.mask();
        let pool_ptr = self.cache.pool().as_ptr();
        let (buf_size, iovas) = (self.buf_size, self.iovas);
        let got_before = got;
        let dst = out.spare_capacity_mut().as_mut_ptr();
        debug_assert!(out.capacity() - out.len() >= max - got);
        let cache = &mut self.cache;
        debug_assert_eq!(self.slots.len(), mask as usize + 1);
        let slots = self.slots.as_mut_ptr();
        let keep = self.keep;
        let (ol_on, l4e_bit) = (self.mode & MODE_OFFLOAD != 0, self.l4e_bit);
        let mut bad = 0usize;
        let mut wait_for_len = false;
        let mut hi = view.read_hi(i);
        // Each turn looks at one descriptor whose `hi` shows DD (the first
        // one's was seen by the caller; read again here).
        if hi as u32 & RXD_STAT_DD != 0 {
            loop {
                let status = hi as u32;
                // SAFETY: `i & mask < slots.len()` (above); `slots` points into
                // `self.slots`, which nothing else touches during the burst.
                let slot = unsafe { &mut *slots.add((i & mask) as usize) };
                // As in the hot loop: a good frame is one whole EOP
                // descriptor without an error bit, 0 < len <= buffer size.
                if let Some(len) = good_len(hi, keep, buf_size) {
                    let Some(fresh) = cache.get() else {
                        // The frame stays in its descriptor for want of a buffer.
                        self.stats.rx_nombuf += 1;
                        break;
                    };
                    let lo = view.read_lo_after_dd(i);
                    let done = std::mem::replace(slot, fresh);
                    // SAFETY: `fresh` came from the cache of the ring's pool,
                    // which `self.pool` keeps alive.
                    view.write(i, rx_read(unsafe { iovas.get(fresh) }));
                    bytes += len as u64;
                    // SAFETY: `got < max`, and `out` has room for `max -
                    // got_before` packets from `dst` on (the caller's
                    // reservation); slot `got - got_before` is written
                    // once. `done` was this slot's armed buffer, replaced by
                    // `fresh`, with its pool reference; `len <= buf_size`.
                    unsafe {
                        (*dst.add(got - got_before)).write(Packet::from_parts(
                            pool_ptr,
                            done,
                            len,
                            (lo >> 32) as u32,
                            if ol_on { ol_word(hi, l4e_bit) } else { 0 },
                        ));
                    }
                    got += 1;
                    i = (i + 1) & mask;
                    if got == max {
                        break;
                    }
                } else if (hi >> 32) as u16 == 0
                    && (i != self.unfinished_at || self.unfinished < RX_UNFINISHED_POLLS)
                {
                    // DD is visible but the length is not: the write-back may
                    // still be landing (QEMU's igb writes the descriptor, then
                    // DD on its own, and the guest has seen the second store
                    // first). Stop here and look again at the next poll; after
                    // RX_UNFINISHED_POLLS polls at this same descriptor it is
                    // dropped like any bad one.
                    wait_for_len = true;
                    break;
                } else {
                    // Nothing to hand up: re-arm the descriptor with its own buffer.
                    // SAFETY: slots hold buffers of the ring's pool, alive
                    // through `self.pool`.
                    view.write(i, rx_read(unsafe { iovas.get(*slot) }));
                    bad += 1;
                    i = (i + 1) & mask;
                    if status & RXD_STAT_EOP == 0 {
                        // The head of a frame longer than one buffer: the rest of
                        // its chain, up to its EOP, is dropped too.
                        // SAFETY: `slots` is `self.slots`' pointer, `mask + 1`
                        // long, untouched elsewhere during the burst.
                        let (next, n, done) =
                            unsafe { drop_chain(view, slots, iovas, i, max - bad) };
                        i = next;
                        bad += n;
                        if !done {
                            self.mode |= MODE_DISCARDING;
                            break;
                        }
                    }
                    if bad >= max {
                        break;
                    }
                }
                hi = view.read_hi(i);
                if hi as u32 & RXD_STAT_DD == 0 {
                    break;
                }
            }
        }
        // SAFETY: the loop wrote a packet into each of the first `got -
        // got_before` spare slots, in order, and nothing else touched `out`.
        unsafe { out.set_len(out.len() + got - got_before) };
        if wait_for_len {
            // Count the polls this descriptor has held the ring (from 1 when
            // the ring stops at another one).
            self.unfinished = if i == self.unfinished_at {
                self.unfinished + 1
            } else {
                1
            };
            self.unfinished_at = i;
        } else {
            self.unfinished = 0;
        }
        self.next = i;
        // Every descriptor before `i` is re-armed.
        self.give_back(i);
        let s = &mut self.stats;
        s.packets += got as u64;
        s.bytes += bytes;
        s.rx_errors += bad as u64;
        if got == 0 {
            count_empty(s);
        } else {
            s.bursts += 1;
        }
        got
    }

    /// The previous burst stopped inside a chain whose head it dropped (a
    /// frame longer than one buffer): drop the rest of it, through its EOP
    /// descriptor (re-armed with their own buffers, counted in `rx_errors`),
    /// then receive as usual if the chain is complete.
    #[cold]
    #[inline(never)]
    fn finish_chain(&mut self, out: &mut Vec<Packet>, max: usize) -> usize {
        let view = self.desc.view();
        let max = max.min(view.mask() as usize + 1);
        // SAFETY: `self.slots` is `mask + 1` long (made so in `new`) and
        // nothing else touches it during the call.
        let (next, n, done) =
            unsafe { drop_chain(view, self.slots.as_mut_ptr(), self.iovas, self.next, max) };
        self.stats.rx_errors += n as u64;
        if n > 0 {
            self.next = next;
            self.give_back(next);
        }
        if done {
            self.mode &= !MODE_DISCARDING;
            self.rx_burst(out, max)
        } else {
            self.stats.empty_polls += 1;
            0
        }
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
    #[doc(hidden)]
    pub fn armed_indices(&self) -> &[u32] {
        &self.slots
    }
    /// Whether the next descriptor to check shows DD: a poll now would find
    /// something (a frame, or a descriptor it drops). Reads one descriptor
    /// word; changes nothing.
    pub fn ready(&self) -> bool {
        self.desc.view().read_hi(self.next) as u32 & RXD_STAT_DD != 0
    }
    /// Index of the next descriptor to check.
    pub fn next_index(&self) -> u16 {
        self.next
    }
    /// The value last written to the tail register (RDT): the device owns
    /// the descriptors from its head up to, not including, this one.
    pub fn tail_index(&self) -> u16 {
        self.tail
    }
}

/// What [`good_len`] keeps of a write-back's `hi` word: the status bits in
/// `check_bits` and the length field.
const fn keep_bits(check_bits: u32) -> u64 {
    check_bits as u64 | 0xffff << 32
}

/// The length in bytes of the frame whose write-back `hi` word (status in
/// bits 0..32, length in 32..48, VLAN tag above) is `hi`, if it is a good
/// one: `status & check_bits == RXD_STAT_EOP` and `1 <= len <= buf_size`;
/// else `None`. `keep` is [`keep_bits`]`(check_bits)`. Both tests in one compare: keep
/// the checked status bits and the length, clear EOP (so the status part
/// is 0 exactly when it was EOP alone), and rotate the status part above the
/// length. The result is the length when the status was right, and at least
/// 2³² (more than any buffer) when it was not; minus 1, it is below
/// `buf_size` exactly for a good frame (a length of 0 wraps to the top).
#[inline(always)]
fn good_len(hi: u64, keep: u64, buf_size: u32) -> Option<u32> {
    let kept = hi & keep;
    let z = (kept ^ RXD_STAT_EOP as u64).rotate_left(32);
    if z.wrapping_sub(1) < buf_size as u64 {
        Some(z as u32)
    } else {
        None
    }
}

/// The RX status word (`pollnic_hw::offload::rx_status_word`) of a
/// write-back whose `hi` word (status in bits 0..32, VLAN tag in 48..64) is
/// `hi`.
#[inline(always)]
fn ol_word(hi: u64, l4e_bit: u32) -> u32 {
    pollnic_hw::offload::rx_status_word(hi as u32, (hi >> 48) as u16, l4e_bit)
}

/// Count a burst that found descriptors but handed up nothing (only bad
/// ones, or no buffer for the first frame).
#[cold]
#[inline(never)]
fn count_empty(s: &mut RxStats) {
    s.empty_polls += 1;
}

/// Re-arm, each with its own buffer, the written-back descriptors from `i`
/// on that continue a dropped chain, through the chain's EOP descriptor, at
/// most `budget` of them. Returns the next index, how many were re-armed,
/// and whether the EOP descriptor was reached.
///
/// # Safety
/// `slots` points at `mask + 1` buffer indices (one per descriptor of the
/// ring `view` shows) that nothing else accesses during the call, buffers of
/// the pool `iovas` came from, which is alive.
#[cold]
#[inline(never)]
unsafe fn drop_chain(
    view: crate::descring::DescView<'_>,
    slots: *mut u32,
    iovas: BufIovas,
    mut i: u16,
    budget: usize,
) -> (u16, usize, bool) {
    let mask = view.mask();
    let mut n = 0;
    while n < budget {
        let hi = view.read_hi(i);
        if hi as u32 & RXD_STAT_DD == 0 {
            return (i, n, false);
        }
        // SAFETY: `i & mask` is in bounds of `slots` (the caller's promise).
        let own = unsafe { *slots.add((i & mask) as usize) };
        // SAFETY: slots hold buffers of the pool `iovas` came from, which
        // the caller's ring keeps alive.
        view.write(i, rx_read(unsafe { iovas.get(own) }));
        n += 1;
        i = (i + 1) & mask;
        if hi as u32 & RXD_STAT_EOP != 0 {
            return (i, n, true);
        }
    }
    (i, n, false)
}

impl<D: Doorbell> Drop for RxRing<D> {
    fn drop(&mut self) {
        let mut all: Vec<u32> = self.slots.to_vec();
        let n = all.len();
        self.pool.free_bulk(&mut all);
        // The armed buffers' references; the ring's own handle holds one more.
        self.pool.shared().release_not_last(n);
        // The cache returns its own buffers when it is dropped.
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pollnic_hw::desc::{RXD_ERR_IPE, RXD_ERR_L4E};

    /// `good_len` is the two tests it stands for in one: over edge and
    /// pseudo-random `hi` words, error masks and buffer sizes.
    #[test]
    fn good_len_is_the_two_tests_in_one() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let statuses = [
            0u32,
            RXD_STAT_DD,
            RXD_STAT_DD | RXD_STAT_EOP,
            RXD_STAT_EOP,
            RXD_STAT_DD | RXD_STAT_EOP | RXD_ERR_RXE,
            RXD_STAT_DD | RXD_STAT_EOP | RXD_ERR_IPE,
            RXD_STAT_DD | RXD_STAT_EOP | 0x3f00_0000,
            u32::MAX,
        ];
        let lens = [0u64, 1, 2, 59, 60, 2047, 2048, 2049, 9018, 65535];
        for mask in [
            RXD_ERR_RXE,
            RXD_ERR_RXE | RXD_ERR_IPE | RXD_ERR_L4E,
            0x3f00_0000,
        ] {
            let check = RXD_STAT_EOP | mask;
            for buf in [128u32, 2048, 9216, 65535, 65536] {
                let one = |hi: u64| {
                    let (status, len) = (hi as u32, (hi >> 32) as u16 as u32);
                    let two = status & check == RXD_STAT_EOP && len.wrapping_sub(1) < buf;
                    let got = good_len(hi, keep_bits(check), buf);
                    assert_eq!(
                        got,
                        two.then_some(len),
                        "hi {hi:#x} check {check:#x} buf {buf}"
                    );
                };
                for &st in &statuses {
                    for &len in &lens {
                        for vlan in [0u64, 0x0064, 0xffff] {
                            one(st as u64 | len << 32 | vlan << 48);
                        }
                    }
                }
                for _ in 0..20_000 {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    one(seed);
                    // Mostly-good words, so both answers are common.
                    one(seed & !(check as u64) | RXD_STAT_EOP as u64);
                }
            }
        }
    }
}
