//! The packed virtqueue's memory and cursors (virtio 1.2 §2.8 "Packed
//! Virtqueues"): one ring of 16-byte descriptors that both sides write, and
//! two 4-byte event suppression structures, the driver's and the device's.
//!
//! The driver makes a descriptor available by writing it at its *avail
//! cursor* with the AVAIL flag (bit 7) equal to its avail wrap counter and
//! the USED flag (bit 15) its inverse (§2.8.1, §2.8.21); the device hands a
//! buffer back by writing one descriptor per chain at its own used cursor,
//! with AVAIL and USED both equal to its used wrap counter, the chain's
//! buffer id and the bytes it wrote. Both wrap counters start at 1 and flip
//! whenever a cursor passes the ring's end (§2.8.1); the ring size need not
//! be a power of two (§2.8.10: at most 32768).
//!
//! pollnic's chains are two descriptors (a `virtio_net_hdr` slot then the
//! frame's buffer; for the control queue the command then the ack byte),
//! or, on a receive queue whose mempool keeps headroom, one descriptor
//! whose buffer starts with the header in that headroom (as DPDK's
//! `virtqueue_enqueue_recv_refill_packed` posts an mbuf). A ring holds
//! `size / descriptors per chain` chains; the buffer id is the chain
//! number, and the driver's used cursor moves by a chain's descriptors per
//! used descriptor (§2.8.6: the device writes one used descriptor per chain
//! and skips the rest of it).
//!
//! Ordering (Linux `virtqueue_add_packed` and `virtqueue_get_buf_ctx_packed`,
//! DPDK `virtqueue_enqueue_xmit_packed` and `desc_is_used`): every other
//! field of a chain is written before its first descriptor's flags, which
//! are stored with Release; a used descriptor's flags are loaded with
//! Acquire before its id and length are read. The driver holds back the
//! flags of a burst's first descriptor until [`Packed::publish`], so that
//! no chain posted in a burst can come back used within the same burst
//! (the burst's checks would then take it for a repeated id). Every later
//! descriptor of the burst is written whole, flags included, at once: the
//! device MUST start processing driver descriptors in the order in which
//! they appear in the ring (§2.8, device requirements of "Packed
//! Virtqueues"), so it reaches none of them before the held one, whose
//! Release store comes after them all; the spec's "Placing Available
//! Buffers Into The Descriptor Ring" batches a request's descriptors the
//! same way.

use super::{Mem, HDR_SLOT};
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use vm_memory::{Le16, Le32, Le64};

/// `VIRTQ_DESC_F_AVAIL` (§2.8.1).
pub(crate) const DESC_F_AVAIL: u16 = 1 << 7;
/// `VIRTQ_DESC_F_USED` (§2.8.1).
pub(crate) const DESC_F_USED: u16 = 1 << 15;
/// `RING_EVENT_FLAGS_ENABLE` (§2.8.10): notifications wanted.
pub(crate) const EVENT_ENABLE: u16 = 0;
/// `RING_EVENT_FLAGS_DISABLE`: none wanted.
pub(crate) const EVENT_DISABLE: u16 = 1;
/// `RING_EVENT_FLAGS_DESC`: one wanted at the descriptor `off_wrap` names
/// (only with `VIRTIO_F_EVENT_IDX`).
pub(crate) const EVENT_DESC: u16 = 2;

/// `struct pvirtq_desc` (§2.8.13), little-endian: the buffer's address and
/// length, its buffer id and its flags.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct PackedDesc {
    pub(crate) addr: Le64,
    pub(crate) len: Le32,
    pub(crate) id: Le16,
    pub(crate) flags: Le16,
}

/// Where each part of a packed virtqueue of `size` descriptors lies, in
/// bytes from its region's start (§2.8.10.1 alignment: ring 16, both event
/// suppression structures 4): the ring, the driver's event suppression
/// (`queue_driver`), the device's (`queue_device`), then pollnic's header
/// slots (16), one per chain of two (one-descriptor chains have their
/// header in their buffer: one slot is kept, never used, so that every
/// offset still lies inside the layout). Every offset clamps its index
/// inside its part, so each lies inside the layout for any index
/// (unit-tested).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PackedLayout {
    pub(crate) size: u16,
    /// Descriptors per chain: 1 or 2.
    pub(crate) per_chain: u16,
    /// Chains: `size / per_chain` (at least 2).
    pub(crate) chains: u16,
    /// Header slots: `chains`, or 1 with one-descriptor chains.
    slots: u16,
    pub(crate) driver: usize,
    pub(crate) device: usize,
    pub(crate) hdr: usize,
    pub(crate) total: usize,
}

impl PackedLayout {
    /// The layout of a ring of `size` (4..=32768) descriptors in chains of
    /// `per_chain` (1 or 2; anything else is taken as 2).
    pub(crate) const fn new(size: u16, per_chain: u16) -> PackedLayout {
        let per_chain = if per_chain == 1 { 1 } else { 2 };
        let n = size as usize;
        let driver = size_of::<PackedDesc>() * n;
        let device = driver + 4;
        let hdr = (device + 4).next_multiple_of(16);
        let chains = size / per_chain;
        let slots = if per_chain == 1 { 1 } else { chains };
        PackedLayout {
            size,
            per_chain,
            chains,
            slots,
            driver,
            device,
            hdr,
            total: hdr + HDR_SLOT * slots as usize,
        }
    }
    /// Descriptor `i` (clamped to the ring).
    #[inline(always)]
    pub(crate) const fn desc(&self, i: u16) -> usize {
        let i = if i < self.size { i } else { self.size - 1 };
        size_of::<PackedDesc>() * i as usize
    }
    /// Header slot `k` (clamped to the slots).
    #[inline(always)]
    pub(crate) const fn hdr(&self, k: usize) -> usize {
        let last = self.slots as usize - 1;
        self.hdr + HDR_SLOT * if k < last { k } else { last }
    }
}

/// What the driver's used cursor shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Used {
    /// The descriptor there is still the driver's (not used yet).
    None,
    /// A used descriptor: its buffer id and the bytes the device wrote.
    Elem { id: u32, len: u32 },
    /// Flags no honest device writes there: AVAIL and USED differ from
    /// what was posted and from each other, or equal the wrong wrap
    /// counter (§2.8.1, §2.8.21).
    Bad,
}

/// The driver's state of one packed ring: the layout, both cursors with
/// their wrap counters, and the burst's first descriptor, whose flags are
/// still to be stored. `Copy`: a receive burst runs on a copy and stores
/// it back.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Packed {
    pub(crate) layout: PackedLayout,
    next_avail: u16,
    avail_wrap: bool,
    next_used: u16,
    used_wrap: bool,
    /// (position, flags) of the burst's first descriptor, until published.
    head: Option<(u16, u16)>,
}

impl Packed {
    /// A fresh ring of chains of `per_chain` descriptors: both cursors at
    /// 0, both wrap counters 1 (§2.8.1).
    #[inline]
    pub(crate) const fn new(size: u16, per_chain: u16) -> Packed {
        Packed {
            layout: PackedLayout::new(size, per_chain),
            next_avail: 0,
            avail_wrap: true,
            next_used: 0,
            used_wrap: true,
            head: None,
        }
    }

    /// Write descriptor `d` whole, flags included, as two 8-byte stores
    /// (address; then length, id and flags, each little-endian in its
    /// place, §2.8.13).
    ///
    /// # Safety
    /// `d` is a descriptor inside the ring (from `PackedLayout::desc`),
    /// 16-byte aligned, reached only with volatile accesses.
    #[inline(always)]
    unsafe fn write_whole(d: *mut PackedDesc, addr: u64, len: u32, id: u16, flags: u16) {
        let rest = u64::from(len) | u64::from(id) << 32 | u64::from(flags) << 48;
        // SAFETY: the caller's promises; 16 bytes at a 16-byte aligned
        // descriptor.
        unsafe {
            d.cast::<u64>().write_volatile(addr.to_le());
            d.cast::<u64>().add(1).write_volatile(rest.to_le());
        }
    }

    /// AVAIL and USED as the driver writes them with wrap counter `w`.
    #[inline(always)]
    const fn avail_bits(w: bool) -> u16 {
        if w {
            DESC_F_AVAIL
        } else {
            DESC_F_USED
        }
    }

    /// `(pos, wrap)` moved on by `n` (≤ size) descriptors.
    #[inline(always)]
    fn step(&self, pos: u16, wrap: bool, n: u16) -> (u16, bool) {
        let size = u32::from(self.layout.size);
        let next = u32::from(pos) + u32::from(n);
        if next >= size {
            ((next - size) as u16, !wrap)
        } else {
            (next as u16, wrap)
        }
    }

    /// Write chain `id` at the avail cursor: `first` (address, length,
    /// NEXT/WRITE flags) then `second` (address, length, WRITE flag), and
    /// move the cursor by two. The second descriptor is written whole, the
    /// first too unless it is the burst's first (module docs), whose flags
    /// [`Packed::publish`] stores.
    #[inline(always)]
    pub(crate) fn post(
        &mut self,
        mem: Mem,
        id: u16,
        first: (u64, u32, u16),
        second: (u64, u32, u16),
    ) {
        let (p0, w0) = (self.next_avail, self.avail_wrap);
        let (p1, w1) = self.step(p0, w0, 1);
        let d1 = mem.at::<PackedDesc>(self.layout.desc(p1));
        let d0 = mem.at::<PackedDesc>(self.layout.desc(p0));
        // SAFETY: `desc` clamps the position inside the ring, which lies
        // inside the region (layout); 16-byte aligned (page-aligned region);
        // only volatile accesses reach this memory.
        unsafe { Self::write_whole(d1, second.0, second.1, id, second.2 | Self::avail_bits(w1)) };
        self.write_first(
            d0,
            p0,
            id,
            (first.0, first.1, first.2 | Self::avail_bits(w0)),
        );
        (self.next_avail, self.avail_wrap) = self.step(p0, w0, 2);
    }

    /// Write the one-descriptor chain `id` at the avail cursor (address,
    /// length, flags): whole, or, for the burst's first descriptor, all but
    /// its flags, which [`Packed::publish`] stores; and move the cursor by
    /// one.
    #[inline(always)]
    pub(crate) fn post_one(&mut self, mem: Mem, id: u16, desc: (u64, u32, u16)) {
        let (p0, w0) = (self.next_avail, self.avail_wrap);
        let d0 = mem.at::<PackedDesc>(self.layout.desc(p0));
        self.write_first(d0, p0, id, (desc.0, desc.1, desc.2 | Self::avail_bits(w0)));
        if p0 + 1 >= self.layout.size {
            (self.next_avail, self.avail_wrap) = (0, !w0);
        } else {
            self.next_avail = p0 + 1;
        }
    }

    /// Post receive chain `id` of one descriptor: the `hdr_len` bytes of
    /// headroom in front of the buffer at `buf`, then its `len` bytes,
    /// device-writable.
    #[inline(always)]
    pub(crate) fn post_rx_in_buf(&mut self, mem: Mem, id: u16, buf: u64, len: u32, hdr_len: u32) {
        self.post_one(
            mem,
            id,
            (
                buf.wrapping_sub(u64::from(hdr_len)),
                len + hdr_len,
                super::DESC_F_WRITE,
            ),
        );
    }

    /// Write a chain's first descriptor `d0` (at `pos`, from
    /// `PackedLayout::desc`) with buffer id `id` and (address, length,
    /// flags): whole, or, for the burst's first, all but its flags, which
    /// are held for [`Packed::publish`].
    #[inline(always)]
    fn write_first(&mut self, d0: *mut PackedDesc, pos: u16, id: u16, d: (u64, u32, u16)) {
        // SAFETY: `d0` is descriptor `pos` inside the ring (the caller took
        // it from `desc`, which clamps), 16-byte aligned; only volatile
        // accesses reach this memory.
        unsafe {
            if self.head.is_none() {
                std::ptr::addr_of_mut!((*d0).addr).write_volatile(Le64::from(d.0));
                std::ptr::addr_of_mut!((*d0).len).write_volatile(Le32::from(d.1));
                std::ptr::addr_of_mut!((*d0).id).write_volatile(Le16::from(id));
                self.head = Some((pos, d.2));
            } else {
                Self::write_whole(d0, d.0, d.1, id, d.2);
            }
        }
    }

    /// Store a first descriptor's flags with Release: after every other
    /// field of its chain.
    #[inline(always)]
    fn store_flags(mem: Mem, desc_off: usize, flags: u16) {
        let f = mem.at::<u16>(desc_off + 14);
        // SAFETY: the flags of a descriptor inside the ring (`desc_off` from
        // `PackedLayout::desc`), 2-byte aligned as `AtomicU16` needs; the
        // device reads it as a whole u16.
        let a = unsafe { AtomicU16::from_ptr(f) };
        a.store(flags.to_le(), Ordering::Release);
    }

    /// Make every chain posted since the last publish available: store
    /// the burst's first descriptor's flags (Release, after every other
    /// descriptor of the burst).
    #[inline(always)]
    pub(crate) fn publish(&mut self, mem: Mem) {
        if let Some((pos, flags)) = self.head.take() {
            Self::store_flags(mem, self.layout.desc(pos), flags);
        }
    }

    /// What the descriptor at the used cursor holds (flags loaded with
    /// Acquire, then id and length). Only meaningful while chains are in
    /// flight (the slot then holds a descriptor of this lap).
    #[inline(always)]
    pub(crate) fn peek(&self, mem: Mem) -> Used {
        let off = self.layout.desc(self.next_used);
        // SAFETY: as in `store_flags`: a descriptor's flags inside the ring.
        let a = unsafe { AtomicU16::from_ptr(mem.at::<u16>(off + 14)) };
        let bits = u16::from_le(a.load(Ordering::Acquire)) & (DESC_F_AVAIL | DESC_F_USED);
        let w = self.used_wrap;
        // Used with wrap counter w: AVAIL = USED = w.
        let used_bits = if w { DESC_F_AVAIL | DESC_F_USED } else { 0 };
        if bits == used_bits {
            let d = mem.at::<PackedDesc>(off);
            // SAFETY: inside the ring (clamped), aligned; read after the
            // flags (Acquire above).
            let (id, len) = unsafe {
                (
                    std::ptr::addr_of!((*d).id).read_volatile().to_native(),
                    std::ptr::addr_of!((*d).len).read_volatile().to_native(),
                )
            };
            Used::Elem {
                id: u32::from(id),
                len,
            }
        } else if bits == Self::avail_bits(w) {
            // Still the driver's available descriptor.
            Used::None
        } else {
            Used::Bad
        }
    }

    /// Move the used cursor past a chain of one descriptor.
    #[inline(always)]
    pub(crate) fn consume_one(&mut self) {
        if self.next_used + 1 >= self.layout.size {
            (self.next_used, self.used_wrap) = (0, !self.used_wrap);
        } else {
            self.next_used += 1;
        }
    }

    /// Move the used cursor past `n` chains (`n * per_chain` descriptors,
    /// at most the ring's size: it wraps at most once).
    #[inline(always)]
    pub(crate) fn consume_n(&mut self, n: u16) {
        let d = u32::from(n) * u32::from(self.layout.per_chain);
        let d = d.min(u32::from(self.layout.size)) as u16;
        (self.next_used, self.used_wrap) = self.step(self.next_used, self.used_wrap, d);
    }

    /// Move the used cursor past one chain (its descriptors).
    #[inline(always)]
    pub(crate) fn consume(&mut self) {
        (self.next_used, self.used_wrap) =
            self.step(self.next_used, self.used_wrap, self.layout.per_chain);
    }

    /// Whether the device wants a notification now that the driver made
    /// `chains` chains (their descriptors) available, ending at the avail
    /// cursor (§2.8.10,
    /// §2.8.22; Linux `virtqueue_kick_prepare_packed`): DISABLE no, DESC
    /// (with event indices) when the descriptor `off_wrap` names is among
    /// the `n`, anything else yes. Call after a full fence.
    #[inline(always)]
    pub(crate) fn kick_wanted(&self, mem: Mem, event_idx: bool, chains: u32) -> bool {
        let n = chains * u32::from(self.layout.per_chain);
        let off = self.layout.device;
        // SAFETY: the device's event suppression structure, 4 bytes inside
        // the region (layout), 4-byte aligned; read as one u32 so that
        // `off_wrap` and `flags` are one snapshot.
        let a = unsafe { AtomicU32::from_ptr(mem.at::<u32>(off)) };
        let v = u32::from_le(a.load(Ordering::Relaxed));
        let (off_wrap, flags) = (v as u16, (v >> 16) as u16);
        match flags & 3 {
            EVENT_DISABLE => false,
            EVENT_DESC if event_idx => {
                let size = u32::from(self.layout.size);
                let ext = |pos: u32, wrap: bool| if wrap { pos } else { pos + size };
                let span = 2 * size;
                let new = ext(u32::from(self.next_avail), self.avail_wrap);
                let old = (new + span - n.min(span)) % span;
                let event = ext(u32::from(off_wrap & 0x7fff) % size, off_wrap & 0x8000 != 0);
                (event + span - old) % span < n
            }
            _ => true,
        }
    }

    /// Write the driver's event suppression flags (`ENABLE` or `DISABLE`).
    pub(crate) fn set_driver_flags(&self, mem: Mem, flags: u16) {
        let off = self.layout.driver + 2;
        // SAFETY: the driver's event suppression `flags`, 2 bytes inside the
        // region (layout), 2-byte aligned.
        unsafe { mem.at::<u16>(off).write_volatile(flags.to_le()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    #[test]
    fn the_descriptor_has_the_specs_shape() {
        assert_eq!(size_of::<PackedDesc>(), 16);
        assert_eq!(
            [
                offset_of!(PackedDesc, addr),
                offset_of!(PackedDesc, len),
                offset_of!(PackedDesc, id),
                offset_of!(PackedDesc, flags)
            ],
            [0, 8, 12, 14]
        );
    }

    /// For sizes of every kind (odd, powers of two, the largest): parts
    /// aligned (§2.8.10.1), not overlapping, every index clamped inside.
    #[test]
    fn every_offset_of_every_size_lies_inside_its_part() {
        for (size, per_chain) in [2u16, 3, 4, 5, 7, 100, 255, 256, 1000, 4096, 32767, 32768]
            .into_iter()
            .flat_map(|s| [(s, 1), (s, 2)])
        {
            let l = PackedLayout::new(size, per_chain);
            assert_eq!(l.chains, size / per_chain);
            assert_eq!(l.driver % 4, 0);
            assert_eq!(l.device % 4, 0);
            assert_eq!(l.hdr % 16, 0);
            assert!(l.driver >= 16 * size as usize);
            assert!(l.device >= l.driver + 4 && l.hdr >= l.device + 4);
            for i in [0, 1, size - 1, size, u16::MAX] {
                assert!(l.desc(i) + 16 <= l.driver, "desc {i} of {size}");
                assert!(l.hdr(i as usize) + HDR_SLOT <= l.total, "hdr {i} of {size}");
            }
        }
    }
}
