//! The split virtqueue (virtio 1.x, §2.7 "Split Virtqueues"): a descriptor
//! table, the driver's *avail* ring and the device's *used* ring in one DMA
//! region, with the same burst API and mempool as the descriptor rings:
//! [`VirtqRx::rx_burst`] hands out [`Packet`]s that borrow the buffer the
//! device wrote (zero copy), [`VirtqTx::tx_burst`] hands packets to the device
//! and [`VirtqTx::reclaim`] returns them to their pools.
//!
//! # Split and packed
//!
//! Each queue has one of two layouts ([`VirtqLayout`], virtio 1.2 §2.6):
//! the split virtqueue described below (§2.7), or the packed one (§2.8,
//! `VIRTIO_F_RING_PACKED`; `virtq/packed.rs`): one ring of 16-byte
//! descriptors both sides write, AVAIL (bit 7) and USED (bit 15) flags
//! against a wrap counter on each side (both start at 1), and two event
//! suppression structures instead of the avail and used rings' flags and
//! event indices. The chains, header slots, buffers, checks and counters
//! are the same on both; on a packed ring a chain is two consecutive
//! descriptors whose buffer id is the chain number, and its size need not
//! be a power of two. A packed receive queue whose mempool keeps headroom
//! ([`Mempool::with_headroom`]) posts one descriptor per buffer instead,
//! the header written by the device into the headroom in front of the
//! frame ([`VirtqRx::with_layout`]); its `size` descriptors then hold
//! `size` buffers. What the device writes into a packed ring is checked
//! as below: a used descriptor whose AVAIL and USED flags are not both the
//! driver's used wrap counter (and not the driver's own available
//! descriptor), an id that is no chain or not in flight (never posted, or
//! already used), each stop the queue; a bad length drops the frame. The
//! chains a burst re-posts become available only at the burst's end (the
//! flags of its first descriptor stored last, with Release; the device
//! MUST start processing descriptors in ring order, §2.8 device
//! requirements, so it reaches none of the later ones before it), as the split ring publishes its avail index once. Notifications: poll mode sets the
//! driver's event suppression to DISABLE; a burst kicks unless the
//! device's says DISABLE, or, with `VIRTIO_F_EVENT_IDX`, says DESC and
//! names a descriptor outside those just made available (§2.8.10,
//! Linux `virtqueue_kick_prepare_packed`).
//!
//! # In order (`VIRTIO_F_IN_ORDER`)
//!
//! Once negotiated ([`VirtqTx::set_in_order`], [`VirtqRx::set_in_order`],
//! [`ctrl::VirtqCtrl::set_in_order`]) every queue posts its chains in ring order
//! (split: heads 0, 2, 4, … wrapping at the table's end; packed: buffer
//! ids 0, 1, 2, … wrapping at the chain count), and holds the device to
//! using them in that order. Transmit reclaim then frees the oldest chains
//! without reading their used entries: on a split ring as many as the used
//! index moved, on a packed ring up to the buffer id of the one used
//! descriptor at the cursor, which may stand for a whole batch. Receive
//! reads every used entry (each frame's length is in its own) and stops
//! the queue at one that names any chain but the oldest.
//!
//! # The 12-byte `virtio_net_hdr`
//!
//! Every virtio-net frame travels behind a `struct virtio_net_hdr` (12 bytes
//! with `VIRTIO_F_VERSION_1`, virtio 1.x §5.1.6). Each buffer is a chain of
//! two descriptors, fixed at creation: descriptor `2i` points to header slot
//! `i` (in this ring's region), descriptor `2i + 1` to a mempool buffer. So
//! the header never lands in the packet's buffer, and the frame starts at
//! byte 0 of it, as on the Intel rings. The chain's head `2i` is its *id*
//! (the id the device hands back in the used ring); a ring of `size`
//! descriptors holds `size / 2` buffers.
//!
//! # Checksum offloads (virtio 1.2 §5.1.6.2, §5.1.6.4)
//!
//! Each TX chain has its own header slot, zeroed (`flags` 0, `gso_type`
//! `VIRTIO_NET_HDR_GSO_NONE`) for a plain [`VirtqTx::tx_burst`]. With
//! `VIRTIO_NET_F_CSUM` ([`VirtqTx::set_csum`]),
//! [`VirtqTx::tx_burst_offload`] asks the device for the TCP or UDP
//! checksum of a frame: the checksum field gets the pseudo-header's sum and
//! the chain's header `VIRTIO_NET_HDR_F_NEEDS_CSUM` with `csum_start` (the
//! L4 header) and `csum_offset` (16 for TCP, 6 for UDP); a later plain
//! frame on that chain zeroes the header again (a per-chain dirty flag, so
//! a port that never offloads writes no header). With
//! `VIRTIO_NET_F_GUEST_CSUM` ([`VirtqRx::set_guest_csum`]) the receive
//! burst reads each frame's header flags: `VIRTIO_NET_HDR_F_DATA_VALID`
//! makes the packet's L4 checksum Good; `VIRTIO_NET_HDR_F_NEEDS_CSUM`
//! makes the burst complete the checksum from `csum_start` to the frame's
//! end and report it Good (as DPDK `virtio_rx_offload`), or, when the
//! field would lie outside the frame, drop the frame (`rx_errors`) and
//! re-post its buffer. Without it no header is read.
//!
//! # Nothing the device writes is trusted
//!
//! The used ring is the device's: every entry is checked before it is
//! followed. An id that is not the head of a chain, out of range, or not in
//! flight (a repeated id, or one never handed to the device), and a used
//! index that moves by more than the chains in flight, each *stop the
//! queue*: counted in [`VirtqStats::device_errors`], [`VirtqStats::stopped`]
//! set, no entry after it looked at; the bursts then return 0 and the
//! buffers stay with the ring until it is dropped (after the driver has
//! reset the device), when every one goes back to its pool. A length shorter
//! than the header or longer than header plus buffer drops that frame
//! (`rx_errors`) and re-posts its buffer.
//!
//! # Notifications
//!
//! A burst that posted buffers notifies the device (the *kick*, a doorbell
//! write) only when the device asks for it; kicks and suppressed kicks are
//! counted ([`VirtqStats`]). Two ways, chosen by what was negotiated:
//!
//! - **Flags** (without `VIRTIO_F_EVENT_IDX`): poll mode wants no
//!   interrupts, so the avail ring's flags say `VRING_AVAIL_F_NO_INTERRUPT`
//!   (§2.7.7) from the start; a kick goes out only when the used ring's flags
//!   lack `VRING_USED_F_NO_NOTIFY` (§2.7.10). QEMU's virtio-net sets it while
//!   it is processing a queue (TX) or has buffers (RX).
//! - **Event indices** (`VIRTIO_F_EVENT_IDX`, after [`VirtqRx::use_event_idx`]
//!   / [`VirtqTx::use_event_idx`]): the flags stay 0 (§2.7.7.1: the driver
//!   MUST set them to 0) and both sides name an index instead. The device
//!   writes `avail_event` (the last u16 of the used ring): kick once the
//!   avail index passes it. A burst that moved the avail index from `old`
//!   to `new` kicks when `(new - avail_event - 1) mod 2^16 < (new - old) mod
//!   2^16` (Linux `vring_need_event`, used by `virtqueue_kick_prepare_split`;
//!   DPDK `vhost_need_event`). The driver writes `used_event` (the last u16
//!   of the avail ring): poll mode keeps it half the index space (0x8000)
//!   ahead of the used index, which no device can reach with at most 16,384
//!   chains in flight, so no interrupt is asked for; arming an interrupt
//!   writes the next used index the driver will read (Linux
//!   `virtqueue_enable_cb_prepare_split`).
//!
//! `avail_event` is device-written and so untrusted. Any value is safe: it
//! only decides whether a doorbell is written, never an address or a count.
//! A value far behind the avail index is not a lie but how a device says it
//! wants no kick: QEMU writes `avail_event` only while its notifications are
//! on (`vring_set_avail_event` returns early otherwise, `hw/virtio/virtio.c`),
//! so while it is busy the value stays where it was, thousands of entries
//! behind; `vring_need_event` then says no, until the 16-bit index wraps past
//! it (one extra kick in 65,536 entries at worst). So nothing can tell a
//! stale value from a hostile one, and the driver follows whatever it reads:
//! a hostile value costs an extra kick, or suppresses one the device then
//! waits for; that device stops taking buffers, as one that ignores kicks
//! would, which no driver can prevent. The bursts still never block and
//! never read past what the used index allows: TX fills up (`ring_full`)
//! and RX returns nothing, every buffer still accounted for.
//!
//! Ordering (Linux `virtqueue_add`/`virtqueue_kick_prepare`): descriptor and
//! avail-ring entries are stored before the avail index (release fence); the
//! used index is read before its entries (acquire fence); between the avail
//! index store and the read of the used flags a full fence (`virtio_mb`).

use crate::descring::Doorbell;
use crate::dma::{DmaError, DmaMapper, DmaRegion, PageSize};
use crate::mempool::{Mempool, Packet, PoolCache, Shared};
use crate::rx::{rx_cache_size, RingError, RxStats};
use crate::tx::TxStats;
use pollnic_hw::offload::{
    complete_partial_checksum, tx_plan, tx_prepare, virtio_tso_prepare, TxOffload, TxRefusal,
    RXD_STAT_L4CS,
};
use pollnic_hw::virtio::net_hdr;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU16, Ordering};
use std::sync::Arc;
use vm_memory::{Le16, Le32, Le64};

/// Bytes of `struct virtio_net_hdr` with `VIRTIO_F_VERSION_1` (virtio 1.x
/// §5.1.6: flags, gso_type, hdr_len, gso_size, csum_start, csum_offset,
/// num_buffers).
pub const VIRTIO_NET_HDR_LEN: u32 = 12;

/// Which `virtio_net_hdr` the device puts in front of every frame, RX and TX
/// (virtio 1.x §5.1.6): the 12-byte `virtio_net_hdr_v1`, or, once
/// `VIRTIO_NET_F_HASH_REPORT` is negotiated, the 20-byte
/// `virtio_net_hdr_v1_hash` (`hash_value` le32 at byte 12, `hash_report`
/// le16 at byte 16, 2 bytes of padding). Linux `virtnet_probe` sets its
/// `hdr_len` the same way, for both directions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum NetHdr {
    /// `struct virtio_net_hdr_v1`, 12 bytes ([`VIRTIO_NET_HDR_LEN`]).
    #[default]
    V1,
    /// `struct virtio_net_hdr_v1_hash`, 20 bytes: the RSS hash of each
    /// received frame is then [`Packet::rss_hash`].
    V1Hash,
}

impl NetHdr {
    /// Bytes of this header.
    pub const fn bytes(self) -> u32 {
        match self {
            NetHdr::V1 => VIRTIO_NET_HDR_LEN,
            NetHdr::V1Hash => 20,
        }
    }
}

/// Offsets of `hash_value` and `hash_report` in `virtio_net_hdr_v1_hash`.
const HDR_HASH_VALUE: usize = 12;
const HDR_HASH_REPORT: usize = 16;

/// `VIRTQ_DESC_F_NEXT`: the chain continues in `next`.
const DESC_F_NEXT: u16 = 1;
/// `VIRTQ_DESC_F_WRITE`: the device writes this buffer.
const DESC_F_WRITE: u16 = 2;
/// `VIRTQ_AVAIL_F_NO_INTERRUPT`.
const AVAIL_F_NO_INTERRUPT: u16 = 1;
/// `VIRTQ_USED_F_NO_NOTIFY`.
const USED_F_NO_NOTIFY: u16 = 1;
/// How far ahead of the used index poll mode puts `used_event`: half the
/// 16-bit index space, more than any queue's chains in flight (at most
/// 32768 / 2), so the device's used index never reaches it.
const USED_EVENT_AWAY: u16 = 0x8000;
/// Bytes per header slot (12 or 20 used, 32 for alignment).
const HDR_SLOT: usize = 32;
/// Most descriptors in a split virtqueue (virtio 1.x §2.7: queue size ≤ 32768).
pub const VIRTQ_MAX_SIZE: u16 = 32768;

/// Driver-side counters of one virtqueue: what a virtio device does not
/// count itself. Non-exhaustive: more may come.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct VirtqStats {
    /// Doorbell writes (notifications to the device).
    pub kicks: u64,
    /// Bursts that posted buffers but sent no kick because the device had
    /// set `VRING_USED_F_NO_NOTIFY`.
    pub kicks_suppressed: u64,
    /// Used-ring entries or indices that broke the protocol (an id out of
    /// range, not a chain head, or not in flight; a used index that jumped
    /// past the chains in flight). The first one stops the queue.
    pub device_errors: u64,
    /// The queue stopped on a device error: the bursts return 0 until the
    /// device is reset and the ring made anew.
    pub stopped: bool,
    /// Notifications follow `VIRTIO_F_EVENT_IDX` (`avail_event` and
    /// `used_event`, virtio 1.2 §2.7.7 and §2.7.10) rather than the flags.
    pub event_idx: bool,
}

/// The three guest-physical (IO virtual) addresses a virtio device needs
/// for one queue (`queue_desc`, `queue_driver`, `queue_device` of the
/// common configuration, virtio 1.x §4.1.4.3), its size in descriptors and
/// its layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct VirtqAddrs {
    /// IOVA of the descriptor table (split) or ring (packed), 16 bytes per
    /// descriptor (`queue_desc`).
    pub desc: u64,
    /// IOVA of the avail ring (split) or of the driver's event suppression
    /// structure (packed, §2.8.10) (`queue_driver`).
    pub avail: u64,
    /// IOVA of the used ring (split) or of the device's event suppression
    /// structure (packed) (`queue_device`).
    pub used: u64,
    /// Descriptors (`queue_size`).
    pub size: u16,
    /// Split or packed: a packed queue needs `VIRTIO_F_RING_PACKED`
    /// negotiated.
    pub layout: VirtqLayout,
}

/// `struct virtq_desc` (virtio 1.2 §2.7.5): a buffer's address and length,
/// its flags and the next descriptor of its chain, all little-endian.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Desc {
    addr: Le64,
    len: Le32,
    flags: Le16,
    next: Le16,
}

/// `struct virtq_used_elem` (§2.7.8): the head of a chain the device is
/// done with, and the bytes it wrote into it, little-endian.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct UsedElem {
    id: Le32,
    len: Le32,
}

/// Where each part of a split virtqueue of `size` descriptors lies, in
/// bytes from the start of its region (§2.7, its alignment table):
/// the descriptor table (16-byte aligned), the avail ring (2), the used ring
/// (4), then pollnic's header slots (16); and the total length (a control
/// queue's command buffer follows it). The one place the ring offsets are
/// computed: the driver's rings, the device view of the tests and the
/// control queue all take them from here. Every per-entry offset masks its
/// index, so each lies inside the layout for any index (checked for every
/// index by a unit test).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SplitLayout {
    size: u16,
    /// `size - 1` and `size / 2 - 1`, kept: the hot path masks with them.
    mask: u16,
    hdr_mask: usize,
    avail: usize,
    used: usize,
    hdr: usize,
    total: usize,
}

impl SplitLayout {
    /// The layout of a queue of `size` descriptors (a power of two).
    const fn new(size: u16) -> SplitLayout {
        let n = size as usize;
        let avail = size_of::<Desc>() * n;
        let used = (avail + 6 + 2 * n).next_multiple_of(4);
        let hdr = (used + 6 + size_of::<UsedElem>() * n).next_multiple_of(16);
        SplitLayout {
            size,
            mask: size - 1,
            hdr_mask: n / 2 - 1,
            avail,
            used,
            hdr,
            total: hdr + HDR_SLOT * (n / 2),
        }
    }
    #[inline(always)]
    const fn mask(&self, i: u16) -> usize {
        (i & self.mask) as usize
    }
    /// Descriptor `i` (masked).
    #[inline(always)]
    const fn desc(&self, i: u16) -> usize {
        size_of::<Desc>() * self.mask(i)
    }
    /// `avail.flags`, the avail ring's start.
    #[inline(always)]
    const fn avail_flags(&self) -> usize {
        self.avail
    }
    /// `avail.idx`.
    #[inline(always)]
    const fn avail_idx(&self) -> usize {
        self.avail + 2
    }
    /// `avail.ring[slot]` (masked).
    #[inline(always)]
    const fn avail_ring(&self, slot: u16) -> usize {
        self.avail + 4 + 2 * self.mask(slot)
    }
    /// `used_event`, the driver's u16 after `avail.ring` (§2.7.6).
    #[inline(always)]
    const fn used_event(&self) -> usize {
        self.avail + 4 + 2 * self.size as usize
    }
    /// `used.flags`, the used ring's start.
    #[inline(always)]
    const fn used_flags(&self) -> usize {
        self.used
    }
    /// `used.idx`.
    #[inline(always)]
    const fn used_idx(&self) -> usize {
        self.used + 2
    }
    /// `used.ring[slot]` (masked).
    #[inline(always)]
    const fn used_ring(&self, slot: u16) -> usize {
        self.used + 4 + size_of::<UsedElem>() * self.mask(slot)
    }
    /// `avail_event`, the device's u16 after `used.ring` (§2.7.8).
    #[inline(always)]
    const fn avail_event(&self) -> usize {
        self.used + 4 + size_of::<UsedElem>() * self.size as usize
    }
    /// Header slot `k` (masked to the `size / 2` slots).
    #[inline(always)]
    const fn hdr(&self, k: usize) -> usize {
        self.hdr + HDR_SLOT * (k & self.hdr_mask)
    }
}

/// Which layout a virtqueue has (virtio 1.2 §2.6): the split virtqueue
/// (§2.7: descriptor table, avail ring, used ring) or the packed one
/// (§2.8, `VIRTIO_F_RING_PACKED`: one ring both sides write, and two event
/// suppression structures). The queues' bursts, counters and checks are the
/// same on both; the layout decides only how chains are posted and used
/// ones found. A device offers packed rings with feature bit 34; the driver
/// takes them when offered (see `pollnic::DeviceConfig::virtq_layout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VirtqLayout {
    /// Split virtqueues (§2.7); the size is a power of two in 4..=32768.
    Split,
    /// Packed virtqueues (§2.8, `VIRTIO_F_RING_PACKED`); the size is any
    /// number in 4..=32768.
    Packed,
}

impl VirtqLayout {
    /// `"split"` or `"packed"`.
    pub const fn name(self) -> &'static str {
        match self {
            VirtqLayout::Split => "split",
            VirtqLayout::Packed => "packed",
        }
    }

    /// Whether a queue of `size` descriptors can have this layout: a power
    /// of two in 4..=32768 (split, §2.7), any number in 4..=32768 (packed,
    /// §2.8).
    pub const fn fits(self, size: u16) -> bool {
        let in_range = size >= 4 && size <= VIRTQ_MAX_SIZE;
        match self {
            VirtqLayout::Split => in_range && size.is_power_of_two(),
            VirtqLayout::Packed => in_range,
        }
    }
}

/// A ring's raw memory: every access through [`Mem::at`], at an offset a
/// layout computed inside the region.
#[derive(Clone, Copy, Debug)]
struct Mem {
    base: NonNull<u8>,
    len: usize,
}

impl Mem {
    /// The address `off` bytes into the region, `off + n <= len` checked by
    /// the callers' masked or clamped indices and the layout (asserted in
    /// debug builds).
    #[inline(always)]
    fn at<T>(self, off: usize) -> *mut T {
        debug_assert!(off + std::mem::size_of::<T>() <= self.len);
        self.base.as_ptr().wrapping_add(off).cast()
    }
}

/// The layout-specific part of a ring.
///
/// An enum inside the ring rather than a trait or a type parameter of the
/// queues: `VirtqRx`, `VirtqTx` and `VirtqCtrl` stay one type each, so the
/// driver above them keeps one path for both layouts, and what differs (how
/// a chain is posted, how a used one is found, when to kick) is one match
/// per ring operation, the same branch every time for a given queue.
/// Everything else (chains, header slots, buffers, checks, counters) is
/// shared, so the split ring's behaviour and counts stay as they were.
#[derive(Debug)]
enum Kind {
    Split(SplitLayout),
    /// Boxed: the split ring's size (and the driver's queue enum) stays
    /// as it was.
    Packed(Box<packed::Packed>),
}

/// One virtqueue's memory: raw views into its region, every access
/// volatile and masked (split) or clamped (packed) in bounds.
#[derive(Debug)]
struct Vring {
    region: DmaRegion,
    mem: Mem,
    size: u16,
    kind: Kind,
    /// Bytes of the header descriptor of each chain (packed rings write it
    /// with every post).
    hdr_len: u32,
    /// `VIRTIO_F_EVENT_IDX` governs notifications.
    event_idx: bool,
}

// SAFETY: `mem.base` points into `region`, owned by the Vring and alive as
// long as it; the memory is only reached with volatile accesses through
// `&self` or `&mut self`, so moving the Vring to another thread is as safe
// as moving the region.
unsafe impl Send for Vring {}
// SAFETY: as above.
unsafe impl Sync for Vring {}

/// What [`Vring::next_used`] found.
use packed::Used;

impl Vring {
    /// A ring of `size` descriptors; a packed one in chains of `per_chain`
    /// (1: each chain one buffer with its header in the buffer's headroom;
    /// 2: a header slot then the buffer), a split one always in chains of 2.
    fn new(
        size: u16,
        layout: VirtqLayout,
        per_chain: u16,
        page: PageSize,
        mapper: Arc<dyn DmaMapper>,
    ) -> Result<Vring, DmaError> {
        Vring::with_tail(size, layout, per_chain, 0, page, mapper)
    }

    /// A ring with `tail` more bytes after its header slots (at
    /// [`Vring::tail`]).
    fn with_tail(
        size: u16,
        layout: VirtqLayout,
        per_chain: u16,
        tail: usize,
        page: PageSize,
        mapper: Arc<dyn DmaMapper>,
    ) -> Result<Vring, DmaError> {
        assert!(
            layout.fits(size),
            "virtqueue size {size} does not fit a {} virtqueue (split: a power of two in \
             4..=32768; packed: 4..=32768)",
            layout.name()
        );
        let (kind, total) = match layout {
            VirtqLayout::Split => {
                let l = SplitLayout::new(size);
                (Kind::Split(l), l.total)
            }
            VirtqLayout::Packed => {
                let p = packed::Packed::new(size, per_chain);
                let total = p.layout.total;
                (Kind::Packed(Box::new(p)), total)
            }
        };
        let region = DmaRegion::new(total + tail, page, mapper)?;
        // One base address per ring part and the headers after them: the
        // whole layout must be contiguous for the device.
        region.check_contiguous(total + tail)?;
        let base = NonNull::new(region.va()).expect("a mapped region is not null");
        let mem = Mem {
            base,
            len: region.len(),
        };
        // Anonymous mappings start zeroed: flags, indices and headers are 0
        // (a packed ring's descriptors then show AVAIL = USED = 0, neither
        // available nor used with wrap counters 1).
        Ok(Vring {
            region,
            mem,
            size,
            kind,
            hdr_len: VIRTIO_NET_HDR_LEN,
            event_idx: false,
        })
    }

    /// The layout.
    fn layout(&self) -> VirtqLayout {
        match self.kind {
            Kind::Split(_) => VirtqLayout::Split,
            Kind::Packed(_) => VirtqLayout::Packed,
        }
    }

    fn addrs(&self) -> VirtqAddrs {
        let iova = self.region.iova();
        let (avail, used) = match &self.kind {
            Kind::Split(l) => (l.avail_flags(), l.used_flags()),
            Kind::Packed(p) => (p.layout.driver, p.layout.device),
        };
        VirtqAddrs {
            desc: iova,
            avail: iova + avail as u64,
            used: iova + used as u64,
            size: self.size,
            layout: self.layout(),
        }
    }

    /// The address `off` bytes into the region (see [`Mem::at`]).
    #[inline(always)]
    fn at<T>(&self, off: usize) -> *mut T {
        self.mem.at(off)
    }

    /// The split layout, or `None` on a packed ring (whose callers never
    /// reach the split-only accessors below: each is then a no-op).
    #[inline(always)]
    fn split(&self) -> Option<&SplitLayout> {
        match &self.kind {
            Kind::Split(l) => Some(l),
            Kind::Packed(_) => None,
        }
    }

    /// Write descriptor `i` (masked) whole (split).
    #[inline(always)]
    fn write_desc(&self, i: u16, addr: u64, len: u32, flags: u16, next: u16) {
        let Some(l) = self.split() else { return };
        let d = self.at::<Desc>(l.desc(i));
        // SAFETY: the layout masks `i` below `size`, so the descriptor lies
        // inside the table; aligned (16-byte entries from a page-aligned
        // region); only volatile accesses reach this memory.
        unsafe {
            d.write_volatile(Desc {
                addr: Le64::from(addr),
                len: Le32::from(len),
                flags: Le16::from(flags),
                next: Le16::from(next),
            })
        }
    }

    /// Set only descriptor `i`'s address and length (a re-armed chain;
    /// split), with the split layout at hand (the hot path matches the
    /// layout once per operation, not once per access).
    #[inline(always)]
    fn split_desc_buf(&self, l: &SplitLayout, i: u16, addr: u64, len: u32) {
        let d = self.at::<Desc>(l.desc(i));
        // SAFETY: as in `write_desc`; the two fields of that descriptor.
        unsafe {
            std::ptr::addr_of_mut!((*d).addr).write_volatile(Le64::from(addr));
            std::ptr::addr_of_mut!((*d).len).write_volatile(Le32::from(len));
        }
    }

    /// Ask for no used-buffer notifications (`on` false) or for them: the
    /// avail ring's `VRING_AVAIL_F_NO_INTERRUPT` (split, §2.7.7) or the
    /// driver's event suppression flags DISABLE / ENABLE (packed, §2.8.10).
    #[inline(always)]
    fn set_interrupt_flag(&self, on: bool) {
        match &self.kind {
            Kind::Split(l) => {
                let flags = if on { 0 } else { AVAIL_F_NO_INTERRUPT };
                // SAFETY: the avail ring's first u16 (layout), 2-byte aligned.
                unsafe {
                    self.at::<u16>(l.avail_flags())
                        .write_volatile(flags.to_le())
                }
            }
            Kind::Packed(p) => p.set_driver_flags(
                self.mem,
                if on {
                    packed::EVENT_ENABLE
                } else {
                    packed::EVENT_DISABLE
                },
            ),
        }
    }

    /// avail.ring[`slot` masked] = `id` (split).
    #[inline(always)]
    fn put_avail(&self, slot: u16, id: u16) {
        if let Some(l) = self.split() {
            self.split_put_avail(l, slot, id);
        }
    }

    /// [`Vring::put_avail`] with the split layout at hand.
    #[inline(always)]
    fn split_put_avail(&self, l: &SplitLayout, slot: u16, id: u16) {
        let off = l.avail_ring(slot);
        // SAFETY: a masked slot is inside avail.ring (layout), 2-byte aligned.
        unsafe { self.at::<u16>(off).write_volatile(id.to_le()) }
    }

    /// Post chain `k` (its header slot, then `buf` of `len` bytes; `write`:
    /// both device-writable) as avail entry `slot`: split, the data
    /// descriptor's address and length and the avail ring's entry (the
    /// header descriptor is fixed); packed, both descriptors at the avail
    /// cursor, the first one's flags held for [`Vring::publish`]; packed
    /// in one-descriptor chains, one descriptor of `hdr_len + len` bytes
    /// from `buf - hdr_len` (the header in the buffer's headroom, which
    /// the caller guarantees).
    #[inline(always)]
    fn post_chain(&mut self, slot: u16, k: u16, buf: u64, len: u32, write: bool) {
        match self.kind {
            Kind::Split(ref l) => {
                self.split_desc_buf(l, 2 * k + 1, buf, len);
                self.split_put_avail(l, slot, 2 * k);
            }
            Kind::Packed(ref mut p) => {
                let w = if write { DESC_F_WRITE } else { 0 };
                if p.layout.per_chain == 1 {
                    // Only receive queues have one-descriptor chains.
                    p.post_rx_in_buf(self.mem, k, buf, len, self.hdr_len);
                } else {
                    let hdr = self.region.iova() + p.layout.hdr(k as usize) as u64;
                    p.post(
                        self.mem,
                        k,
                        (hdr, self.hdr_len, DESC_F_NEXT | w),
                        (buf, len, w),
                    );
                }
            }
        }
    }

    /// Post the control queue's chain: `first` device-readable, then the
    /// one-byte `second` device-writable, as avail entry `slot`; split, at
    /// descriptors `head` (even) and `head + 1`; packed, buffer id 0 at the
    /// avail cursor.
    fn post_ctrl(&mut self, slot: u16, head: u16, first: (u64, u32), second: u64) {
        match &mut self.kind {
            Kind::Split(_) => {
                self.write_desc(head, first.0, first.1, DESC_F_NEXT, head + 1);
                self.write_desc(head + 1, second, 1, DESC_F_WRITE, 0);
                self.put_avail(slot, head);
            }
            Kind::Packed(p) => p.post(
                self.mem,
                0,
                (first.0, first.1, DESC_F_NEXT),
                (second, 1, DESC_F_WRITE),
            ),
        }
    }

    /// Make what was posted visible to the device: split, avail.idx =
    /// `idx` with Release (after every entry before it); packed, the
    /// burst's first descriptor's held flags, with Release.
    #[inline(always)]
    fn publish(&mut self, idx: u16) {
        match &mut self.kind {
            Kind::Split(l) => {
                // SAFETY: avail.idx, the avail ring's second u16 (layout),
                // 2-byte aligned as `AtomicU16` needs; the device reads it
                // as a whole u16.
                let a = unsafe { AtomicU16::from_ptr(self.mem.at::<u16>(l.avail_idx())) };
                a.store(idx.to_le(), Ordering::Release);
            }
            Kind::Packed(p) => p.publish(self.mem),
        }
    }

    /// Write `used_event` (the u16 after avail.ring, §2.7.6; split only: a
    /// packed ring asks by its flags alone).
    #[inline(always)]
    fn set_used_event(&self, v: u16) {
        let Some(l) = self.split() else { return };
        let off = l.used_event();
        // SAFETY: the avail ring's last u16 (layout: 6 + 2 * size bytes),
        // 2-byte aligned.
        unsafe { self.at::<u16>(off).write_volatile(v.to_le()) }
    }

    /// Read `avail_event` (the u16 after used.ring, §2.7.8), device-written
    /// (split).
    #[inline(always)]
    fn avail_event(&self) -> u16 {
        let Some(l) = self.split() else { return 0 };
        let off = l.avail_event();
        // SAFETY: the used ring's last u16 (layout: 6 + 8 * size bytes),
        // 2-byte aligned.
        u16::from_le(unsafe { self.at::<u16>(off).read_volatile() })
    }

    /// Switch to event-index notifications: split, flags 0 and `used_event`
    /// away from `last_used` (poll mode); packed, the driver's flags stay
    /// DISABLE (poll mode asks for nothing), and the device's DESC requests
    /// are followed from now on.
    fn use_event_idx(&mut self, last_used: u16) {
        self.event_idx = true;
        if self.split().is_some() {
            self.set_interrupt_flag(true);
            self.set_used_event(last_used.wrapping_add(USED_EVENT_AWAY));
        }
    }

    #[inline(always)]
    fn used_flags(&self) -> u16 {
        let Some(l) = self.split() else { return 0 };
        // SAFETY: the used ring's first u16 (layout).
        u16::from_le(unsafe { self.at::<u16>(l.used_flags()).read_volatile() })
    }

    /// used.idx, loaded with Acquire: the entries before it are read after
    /// (split).
    #[inline(always)]
    fn used_idx(&self) -> u16 {
        match self.split() {
            Some(l) => self.split_used_idx(l),
            None => 0,
        }
    }

    /// [`Vring::used_idx`] with the split layout at hand.
    #[inline(always)]
    fn split_used_idx(&self, l: &SplitLayout) -> u16 {
        // SAFETY: used.idx, the used ring's second u16 (layout), 2-byte
        // aligned as `AtomicU16` needs; the device writes it as a whole u16.
        let a = unsafe { AtomicU16::from_ptr(self.at::<u16>(l.used_idx())) };
        u16::from_le(a.load(Ordering::Acquire))
    }

    /// used.ring[`slot` masked]: (id, len) (split, the layout at hand).
    #[inline(always)]
    fn split_used_elem(&self, l: &SplitLayout, slot: u16) -> (u32, u32) {
        let e = self.at::<UsedElem>(l.used_ring(slot));
        // SAFETY: a masked slot is inside used.ring (layout), 4-byte aligned.
        let e = unsafe { e.read_volatile() };
        (e.id.to_native(), e.len.to_native())
    }

    /// How many used chains a burst may read, of `in_flight`: split, the
    /// used index's distance from `last_used` (more than `in_flight` is a
    /// protocol break, which the caller checks); packed, `in_flight` (the
    /// burst stops at the first descriptor not yet used).
    #[inline(always)]
    fn pending(&self, last_used: u16, in_flight: u16) -> u16 {
        match &self.kind {
            Kind::Split(l) => self.split_used_idx(l).wrapping_sub(last_used),
            Kind::Packed(_) => in_flight,
        }
    }

    /// The next used chain: split, used.ring[`slot`]; packed, the
    /// descriptor at the used cursor (not consumed: see
    /// [`Vring::consume_used`]).
    #[inline(always)]
    fn next_used(&self, slot: u16) -> Used {
        match &self.kind {
            Kind::Split(l) => {
                let (id, len) = self.split_used_elem(l, slot);
                Used::Elem { id, len }
            }
            Kind::Packed(p) => p.peek(self.mem),
        }
    }

    /// Past the used chain [`Vring::next_used`] returned (packed: the used
    /// cursor moves by the chain's descriptors; split: the caller's
    /// `last_used` does it).
    #[inline(always)]
    fn consume_used(&mut self) {
        if let Kind::Packed(p) = &mut self.kind {
            p.consume();
        }
    }

    /// Past `n` chains at once (packed: a batch the device completed with
    /// one used descriptor, in order; `n` at most the chains in flight, so
    /// the cursor wraps at most once). A no-op on a split ring.
    #[inline(always)]
    fn consume_chains(&mut self, n: u16) {
        if let Kind::Packed(p) = &mut self.kind {
            p.consume_n(n);
        }
    }

    /// Whether a used chain (or a protocol break) waits, with `in_flight`
    /// chains the device's.
    fn used_waiting(&self, last_used: u16, in_flight: u16) -> bool {
        match &self.kind {
            Kind::Split(_) => self.used_idx() != last_used,
            Kind::Packed(p) => in_flight > 0 && p.peek(self.mem) != Used::None,
        }
    }

    /// IOVA of header slot `k` (< size / 2).
    fn hdr_iova(&self, k: u16) -> u64 {
        self.region.iova() + self.hdr_off(k as usize) as u64
    }

    /// Byte offset of header slot `k` (masked or clamped to the slots).
    #[inline(always)]
    fn hdr_off(&self, k: usize) -> usize {
        match &self.kind {
            Kind::Split(l) => l.hdr(k),
            Kind::Packed(p) => p.layout.hdr(k),
        }
    }

    /// Byte offset of what follows the header slots (see `with_tail`).
    fn tail(&self) -> usize {
        match &self.kind {
            Kind::Split(l) => l.total,
            Kind::Packed(p) => p.layout.total,
        }
    }

    /// Header slot `k`'s address (masked or clamped to the slots).
    #[inline(always)]
    fn hdr_slot(&self, k: usize) -> *const u8 {
        self.at::<u8>(self.hdr_off(k))
    }

    /// Write `h` into header slot `k` (< size / 2): `flags`, `gso_type`,
    /// `hdr_len`, `gso_size`, `csum_start` and `csum_offset`; the rest of
    /// the 12 bytes (`num_buffers`) stays 0.
    #[inline(always)]
    fn set_hdr(&self, k: usize, h: &HdrFields) {
        let off = self.hdr_off(k);
        // SAFETY: `hdr_off` masks or clamps `k` inside the header slots, so
        // the fields (bytes 0, 1, 2..4, 4..6, 6..8, 8..10) lie inside
        // header slot `k` (HDR_SLOT >= 12 bytes), 2-byte aligned (32-byte
        // slots from a 16-byte aligned start).
        unsafe {
            self.at::<u8>(off + net_hdr::FLAGS).write_volatile(h.flags);
            self.at::<u8>(off + net_hdr::GSO_TYPE)
                .write_volatile(h.gso_type);
            self.at::<u16>(off + net_hdr::HDR_LEN)
                .write_volatile(h.hdr_len.to_le());
            self.at::<u16>(off + net_hdr::GSO_SIZE)
                .write_volatile(h.gso_size.to_le());
            self.at::<u16>(off + net_hdr::CSUM_START)
                .write_volatile(h.csum.0.to_le());
            self.at::<u16>(off + net_hdr::CSUM_OFFSET)
                .write_volatile(h.csum.1.to_le());
        }
    }

    /// Kick the device after `new - old` chains were made available (the
    /// avail index moved from `old` to `new`), unless it asked not to be
    /// (after a full fence: what was published must be visible before the
    /// device's flags or event index are read). Split: `avail_event` or
    /// `VRING_USED_F_NO_NOTIFY`; packed: the device's event suppression.
    #[inline]
    fn kick<D: Doorbell>(&self, doorbell: &mut D, old: u16, new: u16, stats: &mut VirtqStats) {
        fence(Ordering::SeqCst);
        let wanted = match &self.kind {
            Kind::Split(_) if self.event_idx => need_event(self.avail_event(), new, old),
            Kind::Split(_) => self.used_flags() & USED_F_NO_NOTIFY == 0,
            Kind::Packed(p) => {
                p.kick_wanted(self.mem, self.event_idx, u32::from(new.wrapping_sub(old)))
            }
        };
        if wanted {
            doorbell.ring(new);
            stats.kicks += 1;
        } else {
            stats.kicks_suppressed += 1;
        }
    }

    /// Check a used id: split, the head of a chain (even), in range, in
    /// flight; packed, a chain number in range and in flight. Returns the
    /// chain number.
    #[inline(always)]
    fn chain_of(&self, id: u32, posted: &[bool]) -> Option<usize> {
        match self.kind {
            Kind::Split(_) => {
                if id >= self.size as u32 || id & 1 != 0 {
                    return None;
                }
                let k = (id / 2) as usize;
                posted.get(k).copied()?.then_some(k)
            }
            Kind::Packed(_) => {
                let k = id as usize;
                posted.get(k).copied()?.then_some(k)
            }
        }
    }
}

/// What one transmit chain's `virtio_net_hdr` asks (virtio 1.2 §5.1.6):
/// all 0 for a plain frame.
#[derive(Clone, Copy, Default)]
struct HdrFields {
    flags: u8,
    gso_type: u8,
    hdr_len: u16,
    gso_size: u16,
    /// `csum_start`, `csum_offset`.
    csum: (u16, u16),
}

/// [`VirtqTx`]'s burst modes: nothing asked, the TCP/UDP checksum, TCP
/// segmentation.
const PLAIN: u8 = 0;
const CSUM: u8 = 1;
const TSO: u8 = 2;

/// The RSS hash of the `virtio_net_hdr_v1_hash` at `hdr`: `hash_value`, or
/// 0 when `hash_report` is `VIRTIO_NET_HASH_REPORT_NONE` (no hash
/// computed). Device-written: each field read once.
///
/// # Safety
/// `hdr` is the start of 20 readable bytes, 4-byte aligned at byte 12 and
/// 2-byte aligned at byte 16.
#[inline(always)]
unsafe fn read_hdr_hash(hdr: *const u8) -> u32 {
    // SAFETY: the caller's promises.
    let (value, report) = unsafe {
        (
            u32::from_le(hdr.add(HDR_HASH_VALUE).cast::<u32>().read_volatile()),
            u16::from_le(hdr.add(HDR_HASH_REPORT).cast::<u16>().read_volatile()),
        )
    };
    if report == 0 {
        0
    } else {
        value
    }
}

/// `flags`, `csum_start` and `csum_offset` of the `virtio_net_hdr` at
/// `hdr`, read once each (device-written, untrusted).
///
/// # Safety
/// `hdr` is the start of 12 readable bytes, 2-byte aligned at byte 6.
#[inline(always)]
unsafe fn read_hdr_csum(hdr: *const u8) -> (u8, u16, u16) {
    // SAFETY: the caller's promises (bytes 0, 6..8 and 8..10).
    unsafe {
        (
            hdr.add(net_hdr::FLAGS).read_volatile(),
            u16::from_le(hdr.add(net_hdr::CSUM_START).cast::<u16>().read_volatile()),
            u16::from_le(hdr.add(net_hdr::CSUM_OFFSET).cast::<u16>().read_volatile()),
        )
    }
}

/// Whether a side that asked to be notified at `event` wants it, now that
/// the index moved from `old` to `new` (all mod 2^16): `event` lies in
/// `old..new` (virtio 1.2 §2.7.10, Linux `vring_need_event`).
#[inline(always)]
fn need_event(event: u16, new: u16, old: u16) -> bool {
    new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
}

/// One receive virtqueue with its mempool and cache. The driver resets the
/// device before dropping it.
pub struct VirtqRx<D: Doorbell> {
    ring: Vring,
    pool: Mempool,
    cache: PoolCache,
    /// Buffer index of each chain.
    slots: Box<[u32]>,
    /// Whether chain `k` is the device's (posted and not yet used).
    posted: Box<[bool]>,
    /// The chains a burst re-armed, in the order it put them in the avail
    /// ring: driver-private, so that marking them posted never reads back
    /// the avail ring, which the device can write.
    rearmed: Box<[u16]>,
    /// The avail index next published, and the used index next read.
    avail_idx: u16,
    last_used: u16,
    buf_size: u32,
    /// The header in front of each frame.
    hdr: NetHdr,
    /// Each chain is one descriptor and the header lies in its buffer's
    /// headroom (packed rings over a pool with headroom), not in a slot.
    hdr_in_buf: bool,
    /// `VIRTIO_NET_F_GUEST_CSUM`: each header's checksum flags are read
    /// ([`VirtqRx::set_guest_csum`]).
    guest_csum: bool,
    /// An interrupt is asked for ([`VirtqRx::set_interrupts`]).
    irq_armed: bool,
    /// `VIRTIO_F_IN_ORDER` ([`VirtqRx::set_in_order`]): each used entry
    /// must name `expect`, the oldest chain the device holds.
    in_order: bool,
    expect: u16,
    doorbell: D,
    stats: RxStats,
    vq: VirtqStats,
}

impl<D: Doorbell> VirtqRx<D> {
    /// A receive queue of `size` descriptors (`size / 2` buffers, each
    /// behind its header), every chain armed with a buffer from `pool`; its
    /// region is mapped with `mapper` in pages of `page`. Nothing is
    /// published yet: give [`VirtqRx::addrs`] to the device, then call
    /// [`VirtqRx::start`].
    ///
    /// # Errors
    /// [`RingError::Unreachable`] when the device cannot reach `pool`;
    /// [`RingError::PoolTooSmall`]; [`RingError::Dma`] when the region
    /// cannot be allocated or mapped.
    ///
    /// # Panics
    /// If `size` is not a power of two in 4..=32768.
    pub fn new(
        size: u16,
        page: PageSize,
        mapper: Arc<dyn DmaMapper>,
        pool: &Mempool,
        doorbell: D,
    ) -> Result<Self, RingError> {
        Self::with_layout(VirtqLayout::Split, size, page, mapper, pool, doorbell)
    }

    /// [`VirtqRx::new`] with the given layout: a packed queue
    /// ([`VirtqLayout::Packed`], virtio 1.2 §2.8, once
    /// `VIRTIO_F_RING_PACKED` is negotiated) may have any `size` in
    /// 4..=32768. It holds `size / 2` buffers, each behind a header slot,
    /// or, when `pool` keeps at least 20 bytes of headroom
    /// ([`Mempool::with_headroom`]), `size` buffers of one descriptor each:
    /// the device writes the `virtio_net_hdr` into the headroom and the
    /// frame from the packet's first byte on (DPDK's virtio PMD posts its
    /// packed receive buffers so, `virtqueue_enqueue_recv_refill_packed`),
    /// one descriptor write and one used descriptor per frame instead of
    /// two descriptors.
    ///
    /// # Errors
    /// As [`VirtqRx::new`].
    ///
    /// # Panics
    /// If `size` does not fit `layout` ([`VirtqLayout::fits`]).
    pub fn with_layout(
        layout: VirtqLayout,
        size: u16,
        page: PageSize,
        mapper: Arc<dyn DmaMapper>,
        pool: &Mempool,
        doorbell: D,
    ) -> Result<Self, RingError> {
        let hdr_in_buf =
            layout == VirtqLayout::Packed && pool.headroom() >= NetHdr::V1Hash.bytes() as usize;
        let per_chain = if hdr_in_buf { 1 } else { 2 };
        let mut ring = Vring::new(size, layout, per_chain, page, mapper).map_err(RingError::Dma)?;
        if !pool.region().same_address_space(&ring.region) {
            return Err(RingError::Unreachable);
        }
        let chains = (size / per_chain) as usize;
        let mut bufs = Vec::with_capacity(chains);
        if pool.alloc_bulk(&mut bufs, chains) < chains {
            let free = bufs.len();
            pool.free_bulk(&mut bufs);
            return Err(RingError::PoolTooSmall {
                needed: chains,
                free,
            });
        }
        // Each armed buffer holds a pool reference, handed to its packet.
        pool.shared().acquire(chains);
        let buf_size = pool.buf_size() as u32;
        // Split: the whole table and avail ring now, published by `start`;
        // packed: `start` writes the chains.
        for (k, &b) in bufs
            .iter()
            .enumerate()
            .filter(|_| layout == VirtqLayout::Split)
        {
            let id = 2 * k as u16;
            ring.write_desc(
                id,
                ring.hdr_iova(k as u16),
                VIRTIO_NET_HDR_LEN,
                DESC_F_NEXT | DESC_F_WRITE,
                id + 1,
            );
            ring.write_desc(id + 1, pool.buf_iova(b), buf_size, DESC_F_WRITE, 0);
            ring.put_avail(k as u16, id);
        }
        ring.set_interrupt_flag(false);
        ring.hdr_len = VIRTIO_NET_HDR_LEN;
        Ok(VirtqRx {
            ring,
            cache: PoolCache::new(pool.clone(), rx_cache_size(chains)),
            pool: pool.clone(),
            slots: bufs.into_boxed_slice(),
            posted: vec![false; chains].into_boxed_slice(),
            rearmed: vec![0; chains].into_boxed_slice(),
            avail_idx: 0,
            last_used: 0,
            buf_size,
            hdr: NetHdr::V1,
            hdr_in_buf,
            guest_csum: false,
            irq_armed: false,
            in_order: false,
            expect: 0,
            doorbell,
            stats: RxStats::default(),
            vq: VirtqStats::default(),
        })
    }

    /// Use header `hdr` (what was negotiated; [`NetHdr::V1`] until this is
    /// called): each chain's header descriptor gets its length, and with
    /// [`NetHdr::V1Hash`] every received [`Packet::rss_hash`] is the
    /// header's `hash_value`. Call it before [`VirtqRx::start`].
    ///
    /// # Panics
    /// If the queue was started.
    pub fn set_net_hdr(&mut self, hdr: NetHdr) {
        assert!(
            self.avail_idx == 0,
            "VirtqRx::set_net_hdr after start: the device has the chains"
        );
        for k in 0..self.slots.len() as u16 {
            self.ring.write_desc(
                2 * k,
                self.ring.hdr_iova(k),
                hdr.bytes(),
                DESC_F_NEXT | DESC_F_WRITE,
                2 * k + 1,
            );
        }
        self.ring.hdr_len = hdr.bytes();
        self.hdr = hdr;
    }

    /// Read each received frame's checksum flags (`on`: what
    /// `VIRTIO_NET_F_GUEST_CSUM`, once negotiated, lets the device write;
    /// off until this is called). With it each [`Packet::rx_checksum`]
    /// says what the header did (virtio 1.2 §5.1.6.4, DPDK
    /// `virtio_rx_offload`): `VIRTIO_NET_HDR_F_DATA_VALID`, L4 Good;
    /// `VIRTIO_NET_HDR_F_NEEDS_CSUM`, the checksum completed here from
    /// `csum_start` to the frame's end into `csum_start + csum_offset` and
    /// L4 Good, or, when that field does not lie inside the frame, the
    /// frame dropped and counted in `rx_errors`; no flag, NotChecked. The
    /// IPv4 header checksum is never reported (NotChecked). Call it before
    /// [`VirtqRx::start`].
    ///
    /// # Panics
    /// If the queue was started.
    pub fn set_guest_csum(&mut self, on: bool) {
        assert!(
            self.avail_idx == 0,
            "VirtqRx::set_guest_csum after start: the device has the chains"
        );
        self.guest_csum = on;
    }

    /// Hold the device to `VIRTIO_F_IN_ORDER` (`on`: negotiated; off until
    /// this is called; virtio 1.2 §2.7.5 and §2.7.8 for split rings, the
    /// packed ring's "In-order use of descriptors" in §2.8): buffers come
    /// back in the order they were made available, so each
    /// used entry must name the oldest chain the device holds; any other
    /// id stops the queue ([`VirtqStats::device_errors`]). The chains are
    /// posted in ring order either way (the driver's side of the rule,
    /// descriptors from 0 on and wrapping at the table's end). Every
    /// receive completion is read: a device may complete a batch with one
    /// used entry only where the driver knows each buffer's length, and a
    /// received frame's length is in its own entry. Call it before
    /// [`VirtqRx::start`].
    ///
    /// # Panics
    /// If the queue was started.
    pub fn set_in_order(&mut self, on: bool) {
        assert!(
            self.avail_idx == 0,
            "VirtqRx::set_in_order after start: the device has the chains"
        );
        self.in_order = on;
    }

    /// Where the device finds this queue.
    pub fn addrs(&self) -> VirtqAddrs {
        self.ring.addrs()
    }

    /// Split or packed.
    pub fn layout(&self) -> VirtqLayout {
        self.ring.layout()
    }

    /// Give the device every chain (once the queue is enabled and the
    /// device is DRIVER_OK) and notify it.
    pub fn start(&mut self) {
        let chains = self.slots.len() as u16;
        if self.ring.layout() == VirtqLayout::Packed {
            for k in 0..chains {
                let iova = self.pool.shared().buf_iova(self.slots[k as usize]);
                self.ring.post_chain(k, k, iova, self.buf_size, true);
            }
        }
        self.posted.fill(true);
        self.avail_idx = chains;
        self.ring.publish(chains);
        self.doorbell.ring(chains);
        self.vq.kicks += 1;
    }

    /// Receive up to `max` frames, appending them to `out`; returns how
    /// many. Each [`Packet`] is the buffer the device wrote, without the
    /// `virtio_net_hdr`; its chain is re-armed with a fresh buffer from the
    /// ring's cache before the frame is handed up. When the cache is empty
    /// the burst stops (`rx_nombuf`). See the module docs for what a device
    /// error does.
    #[inline]
    pub fn rx_burst(&mut self, out: &mut Vec<Packet>, max: usize) -> usize {
        // One loop per place of the header and per ordering rule, each
        // without the others' code.
        match (self.hdr_in_buf, self.in_order) {
            (true, false) => self.burst::<true, false>(out, max),
            (false, false) => self.burst::<false, false>(out, max),
            (true, true) => self.burst::<true, true>(out, max),
            (false, true) => self.burst::<false, true>(out, max),
        }
    }

    /// [`VirtqRx::rx_burst`] with the header in each buffer's headroom
    /// (`IN_BUF`) or in the ring's header slots; `IN_ORDER`, each used
    /// entry must name the oldest chain in flight.
    #[inline(always)]
    fn burst<const IN_BUF: bool, const IN_ORDER: bool>(
        &mut self,
        out: &mut Vec<Packet>,
        max: usize,
    ) -> usize {
        if self.vq.stopped {
            return 0;
        }
        let in_flight = self.avail_idx.wrapping_sub(self.last_used);
        let pending = self.ring.pending(self.last_used, in_flight);
        if pending == 0 || max == 0 {
            self.stats.empty_polls += 1;
            return 0;
        }
        if pending > in_flight {
            self.device_error();
            return 0;
        }
        let n = (pending as usize).min(max);
        out.reserve(n);
        let pool_ptr = self.cache.pool().as_ptr();
        assert!(
            self.cache.pool().same_pool(&self.pool),
            "VirtqRx: its PoolCache was replaced by one of another mempool"
        );
        let first_avail = self.avail_idx;
        // IN_BUF (a packed ring of one-descriptor chains): the burst runs on
        // a copy of the ring's cursors, stored back after the loop, so that
        // no ring operation matches the layout or follows the box.
        let mem = self.ring.mem;
        let mut pk = match &self.ring.kind {
            Kind::Packed(p) if IN_BUF => **p,
            _ => packed::Packed::new(4, 1),
        };
        let (mut got, mut bytes, mut taken) = (0usize, 0u64, 0u16);
        // IN_ORDER: the chain the next used entry must name.
        let chains = self.slots.len() as u16;
        let mut expect = self.expect;
        // A chain's id: its head descriptor on a split ring (chain `k` at
        // descriptors 2k and 2k + 1), its number on a packed one.
        let id_shift = u32::from(self.ring.split().is_some());
        while (taken as usize) < n {
            let used = if IN_BUF {
                pk.peek(mem)
            } else {
                self.ring.next_used(self.last_used.wrapping_add(taken))
            };
            let (id, len) = match used {
                Used::Elem { id, len } => (id, len),
                Used::None => break,
                Used::Bad => {
                    self.device_error();
                    break;
                }
            };
            let k = if IN_ORDER {
                // In order: the oldest chain in flight and nothing else (it
                // is the device's: `taken < n <= in_flight`); another id
                // means the device reordered or skipped an entry.
                if id != u32::from(expect) << id_shift {
                    self.device_error();
                    break;
                }
                expect as usize
            } else {
                let chain = if IN_BUF {
                    // Packed: the buffer id is the chain, in range and in flight.
                    let k = id as usize;
                    self.posted.get(k).copied().unwrap_or(false).then_some(k)
                } else {
                    self.ring.chain_of(id, &self.posted)
                };
                let Some(k) = chain else {
                    self.device_error();
                    break;
                };
                k
            };
            let hdr_len = self.hdr.bytes();
            let frame = len.wrapping_sub(hdr_len);
            let mut bad = len < hdr_len || frame == 0 || frame > self.buf_size;
            // The checksum flags (GUEST_CSUM only): a partial checksum whose
            // field is not inside the frame is a bad frame.
            let (mut ol, mut partial) = (0u32, None);
            // IN_BUF: the header's address, found once for both reads
            // (null when neither reads it).
            let in_buf = if IN_BUF && (self.guest_csum || self.hdr == NetHdr::V1Hash) {
                self.hdr_at::<true>(k)
            } else {
                std::ptr::null()
            };
            if self.guest_csum && !bad {
                let at = if IN_BUF {
                    in_buf
                } else {
                    self.hdr_at::<false>(k)
                };
                // SAFETY: `hdr_at` (chain `k`'s header, at least 12 bytes).
                let (flags, start, offset) = unsafe { read_hdr_csum(at) };
                if flags & net_hdr::F_NEEDS_CSUM != 0 {
                    if u32::from(start) + u32::from(offset) + 2 <= frame {
                        partial = Some((start as usize, offset as usize));
                        ol = RXD_STAT_L4CS;
                    } else {
                        bad = true;
                    }
                } else if flags & net_hdr::F_DATA_VALID != 0 {
                    ol = RXD_STAT_L4CS;
                }
            }
            if bad {
                // The chain keeps its buffer and goes back to the device,
                // its data descriptor written again from the driver's own
                // record (a device may have rewritten it: nothing is read
                // back from memory the device can write).
                self.stats.rx_errors += 1;
                let iova = self.pool.shared().buf_iova(self.slots[k]);
                if IN_BUF {
                    pk.post_rx_in_buf(mem, k as u16, iova, self.buf_size, hdr_len);
                } else {
                    self.ring
                        .post_chain(self.avail_idx, k as u16, iova, self.buf_size, true);
                }
            } else {
                let Some(fresh) = self.cache.get() else {
                    self.stats.rx_nombuf += 1;
                    break;
                };
                // In the buffer: read before the buffer leaves the chain.
                let early = match self.hdr {
                    // SAFETY: `hdr_at` (chain `k`'s header, 20 bytes with
                    // V1Hash).
                    NetHdr::V1Hash if IN_BUF => unsafe { read_hdr_hash(in_buf) },
                    _ => 0,
                };
                let done = std::mem::replace(&mut self.slots[k], fresh);
                let iova = self.pool.shared().buf_iova(fresh);
                if IN_BUF {
                    pk.post_rx_in_buf(mem, k as u16, iova, self.buf_size, hdr_len);
                } else {
                    self.ring
                        .post_chain(self.avail_idx, k as u16, iova, self.buf_size, true);
                }
                let hash = match self.hdr {
                    // SAFETY: as above; a header slot stays the chain's.
                    NetHdr::V1Hash if !IN_BUF => unsafe { read_hdr_hash(self.hdr_at::<false>(k)) },
                    _ => early,
                };
                // SAFETY: `done` was chain `k`'s armed buffer of the ring's
                // pool, now replaced by `fresh` (the ring no longer owns it),
                // with the pool reference every armed buffer holds (`fresh`
                // brought its own from the cache); `frame <= buf_size` was
                // checked above.
                let mut p = unsafe { Packet::from_parts(pool_ptr, done, frame, hash, ol) };
                if let Some((start, offset)) = partial {
                    // In range (checked above), so it completes.
                    complete_partial_checksum(p.data_mut(), start, offset);
                }
                out.push(p);
                bytes += frame as u64;
                got += 1;
            }
            if IN_BUF {
                pk.consume_one();
            } else {
                self.ring.consume_used();
            }
            if !IN_ORDER {
                // In order needs no record: the ring order says which
                // chains the device holds.
                self.posted[k] = false;
                // `taken < n <= in_flight <= chains`: inside `rearmed`.
                self.rearmed[taken as usize] = k as u16;
            }
            self.avail_idx = self.avail_idx.wrapping_add(1);
            taken += 1;
            if IN_ORDER {
                expect = if expect + 1 == chains { 0 } else { expect + 1 };
            }
        }
        self.last_used = self.last_used.wrapping_add(taken);
        if IN_ORDER {
            self.expect = expect;
        }
        if let (true, Kind::Packed(p)) = (IN_BUF, &mut self.ring.kind) {
            **p = pk;
        }
        if taken > 0 {
            // The chains re-posted in this burst are the device's again.
            self.repost::<IN_ORDER>(first_avail, taken);
        }
        if got > 0 {
            self.stats.packets += got as u64;
            self.stats.bytes += bytes;
            self.stats.bursts += 1;
        } else {
            self.stats.empty_polls += 1;
        }
        got
    }

    /// Where chain `k`'s `virtio_net_hdr` lies: its header slot, or
    /// (`IN_BUF`, only when `hdr_in_buf`) the `hdr.bytes()` in front of its
    /// buffer's data. Either
    /// way at least the header's bytes are readable there, 4-byte aligned
    /// (slots are 32 bytes from a 16-byte aligned start; a buffer's data is
    /// 64-byte aligned and the header 12 or 20 bytes long, so its u16
    /// fields are 2-byte and its u32 4-byte aligned).
    #[inline(always)]
    fn hdr_at<const IN_BUF: bool>(&self, k: usize) -> *const u8 {
        if IN_BUF {
            // `k` is a chain in flight (checked by the burst), the pool's
            // headroom is at least
            // 20 bytes (`with_layout`): inside the buffer's slot.
            self.pool
                .shared()
                .buf_ptr(self.slots[k])
                .wrapping_sub(self.hdr.bytes() as usize)
        } else {
            self.ring.hdr_slot(k)
        }
    }

    /// Mark the `n` chains this burst put in the avail ring from `first` on
    /// (`rearmed[..n]`) as posted, publish them and kick if the device wants
    /// it. Marking waits until the burst has read every used entry it
    /// takes, so that an id the device reports twice in one burst is a
    /// break, not a chain it already holds again. In order (`IN_ORDER`)
    /// there is nothing to mark: the ring order is the record.
    fn repost<const IN_ORDER: bool>(&mut self, first: u16, n: u16) {
        if !IN_ORDER {
            for &k in &self.rearmed[..n as usize] {
                self.posted[k as usize] = true;
            }
        }
        self.ring.publish(self.avail_idx);
        if self.ring.event_idx && !self.irq_armed {
            self.ring
                .set_used_event(self.last_used.wrapping_add(USED_EVENT_AWAY));
        }
        self.ring
            .kick(&mut self.doorbell, first, self.avail_idx, &mut self.vq);
    }

    #[cold]
    fn device_error(&mut self) {
        self.vq.device_errors += 1;
        self.vq.stopped = true;
    }

    /// Ask the device for a used-buffer notification (an interrupt) or not
    /// (virtio 1.2 §2.7.7): without event indices, clears or sets
    /// `VRING_AVAIL_F_NO_INTERRUPT`; with them, writes `used_event` = the next
    /// used index the driver reads (notify on the next frame), or 0x8000
    /// beyond it (never). Then a full fence, so that a [`VirtqRx::ready`]
    /// after arming sees any frame the device used before it saw the
    /// request. Either is a hint: a device may still notify (a spurious
    /// wake-up).
    pub fn set_interrupts(&mut self, on: bool) {
        self.irq_armed = on;
        if self.ring.event_idx && self.ring.layout() == VirtqLayout::Split {
            let away = if on { 0 } else { USED_EVENT_AWAY };
            self.ring.set_used_event(self.last_used.wrapping_add(away));
        } else {
            self.ring.set_interrupt_flag(on);
        }
        fence(Ordering::SeqCst);
    }

    /// Use `VIRTIO_F_EVENT_IDX` for notifications (module docs), once the
    /// device and driver negotiated it; before [`VirtqRx::start`].
    pub fn use_event_idx(&mut self) {
        self.ring.use_event_idx(self.last_used);
        self.vq.event_idx = true;
    }

    /// Chains the device holds (posted and not yet read back as used).
    pub fn in_flight(&self) -> usize {
        self.avail_idx.wrapping_sub(self.last_used) as usize
    }

    /// Whether a frame is waiting (the used index moved), for interrupt
    /// modes' last look before sleeping.
    pub fn ready(&self) -> bool {
        !self.vq.stopped
            && self
                .ring
                .used_waiting(self.last_used, self.avail_idx.wrapping_sub(self.last_used))
    }
    /// The ring's buffer cache (refill; TX reclaim returns sent buffers to it).
    pub fn cache_mut(&mut self) -> &mut PoolCache {
        &mut self.cache
    }
    /// The ring's buffer cache, to read (accounting in tests).
    pub fn cache(&self) -> &PoolCache {
        &self.cache
    }
    /// The mempool this queue's buffers come from.
    pub fn pool(&self) -> &Mempool {
        &self.pool
    }
    /// Packet counters.
    pub fn stats(&self) -> RxStats {
        self.stats
    }
    /// Virtqueue counters (kicks, device errors).
    pub fn virtq_stats(&self) -> VirtqStats {
        self.vq
    }
    /// Buffers the queue holds (`size / 2`, or `size` on a packed queue
    /// whose header lies in the buffers' headroom).
    pub fn chains(&self) -> usize {
        self.slots.len()
    }
    /// Accounting for tests and the fuzz harness: the buffer of every chain.
    #[doc(hidden)]
    pub fn armed_indices(&self) -> &[u32] {
        &self.slots
    }
}

impl<D: Doorbell> Drop for VirtqRx<D> {
    /// Give every chain's buffer back (the driver has reset the device).
    fn drop(&mut self) {
        let ptr = self.pool.as_ptr();
        for &b in self.slots.iter() {
            // SAFETY: each slot holds one buffer of the ring's pool with one
            // reference, handed over once (the ring is going).
            drop(unsafe { Packet::from_raw_parts(ptr, b) });
        }
    }
}

/// The pool an in-flight TX buffer belongs to (a null pointer: none).
#[derive(Clone, Copy)]
struct InFlight {
    pool: *mut Shared,
    idx: u32,
}

/// One transmit virtqueue. The driver resets the device before dropping it.
pub struct VirtqTx<D: Doorbell> {
    ring: Vring,
    /// The buffer behind each chain while it is the device's.
    slots: Box<[InFlight]>,
    posted: Box<[bool]>,
    /// Chain numbers free to fill.
    free: Vec<u16>,
    /// `VIRTIO_NET_F_CSUM` was negotiated ([`VirtqTx::set_csum`]).
    csum: bool,
    /// `VIRTIO_NET_F_HOST_TSO4` and `HOST_TSO6` were negotiated
    /// ([`VirtqTx::set_tso`]).
    tso: (bool, bool),
    /// The largest IP datagram a segment may be (the port's MTU).
    tso_mtu: usize,
    /// Whether chain `k`'s header slot holds a checksum or segmentation
    /// request (to be zeroed before a plain frame goes on that chain).
    dirty: Box<[bool]>,
    /// Why the last frame refused by [`VirtqTx::tx_burst_offload`] was.
    last_refusal: Option<TxRefusal>,
    /// `VIRTIO_F_IN_ORDER` ([`VirtqTx::set_in_order`]): chains are posted
    /// in ring order from `next_chain` and come back oldest first from
    /// `oldest` (`free` is then unused).
    in_order: bool,
    next_chain: u16,
    oldest: u16,
    avail_idx: u16,
    last_used: u16,
    doorbell: D,
    stats: TxStats,
    vq: VirtqStats,
}

// SAFETY: the raw pool pointers in `slots` stand for the buffer and pool
// reference of the `Packet` each was taken from, and `Packet` is `Send` and
// `Sync`; everything else is.
unsafe impl<D: Doorbell + Send> Send for VirtqTx<D> {}
// SAFETY: as above; `&VirtqTx` only reads counters.
unsafe impl<D: Doorbell + Sync> Sync for VirtqTx<D> {}

/// Free chains under which [`VirtqTx::tx_burst`] reclaims first.
const TX_RECLAIM_BELOW: usize = 32;

impl<D: Doorbell> VirtqTx<D> {
    /// A transmit queue of `size` descriptors (`size / 2` frames in
    /// flight), each chain its own zeroed `virtio_net_hdr` then the frame.
    ///
    /// # Errors
    /// [`RingError::Dma`] when the region cannot be allocated or mapped.
    ///
    /// # Panics
    /// If `size` is not a power of two in 4..=32768.
    pub fn new(
        size: u16,
        page: PageSize,
        mapper: Arc<dyn DmaMapper>,
        doorbell: D,
    ) -> Result<Self, RingError> {
        Self::with_layout(VirtqLayout::Split, size, page, mapper, doorbell)
    }

    /// [`VirtqTx::new`] with the given layout: a packed queue
    /// ([`VirtqLayout::Packed`], virtio 1.2 §2.8, once
    /// `VIRTIO_F_RING_PACKED` is negotiated) may have any `size` in
    /// 4..=32768 and holds `size / 2` frames in flight.
    ///
    /// # Errors
    /// As [`VirtqTx::new`].
    ///
    /// # Panics
    /// If `size` does not fit `layout` ([`VirtqLayout::fits`]).
    pub fn with_layout(
        layout: VirtqLayout,
        size: u16,
        page: PageSize,
        mapper: Arc<dyn DmaMapper>,
        doorbell: D,
    ) -> Result<Self, RingError> {
        let ring = Vring::new(size, layout, 2, page, mapper).map_err(RingError::Dma)?;
        let chains = size / 2;
        // Split: each chain's fixed header descriptor now (no-ops on a
        // packed ring, whose chains are written whole at every post).
        for k in 0..chains {
            let hdr = ring.hdr_iova(k);
            ring.write_desc(2 * k, hdr, VIRTIO_NET_HDR_LEN, DESC_F_NEXT, 2 * k + 1);
            ring.write_desc(2 * k + 1, 0, 0, 0, 0);
        }
        ring.set_interrupt_flag(false);
        Ok(VirtqTx {
            ring,
            slots: vec![
                InFlight {
                    pool: std::ptr::null_mut(),
                    idx: 0
                };
                chains as usize
            ]
            .into_boxed_slice(),
            posted: vec![false; chains as usize].into_boxed_slice(),
            free: (0..chains).rev().collect(),
            csum: false,
            tso: (false, false),
            tso_mtu: 0,
            dirty: vec![false; chains as usize].into_boxed_slice(),
            last_refusal: None,
            in_order: false,
            next_chain: 0,
            oldest: 0,
            avail_idx: 0,
            last_used: 0,
            doorbell,
            stats: TxStats::default(),
            vq: VirtqStats::default(),
        })
    }

    /// Use header `hdr` (what was negotiated; [`NetHdr::V1`] until this is
    /// called): every chain's header descriptor gets its length (the device
    /// takes that many bytes off the front of each TX chain as the header;
    /// each chain's header slot is zeroed either way). Call it before the
    /// first [`VirtqTx::tx_burst`].
    ///
    /// # Panics
    /// If frames were queued already.
    pub fn set_net_hdr(&mut self, hdr: NetHdr) {
        assert!(
            self.avail_idx == 0,
            "VirtqTx::set_net_hdr after tx_burst: the device has chains"
        );
        for k in 0..self.slots.len() as u16 {
            let iova = self.ring.hdr_iova(k);
            self.ring
                .write_desc(2 * k, iova, hdr.bytes(), DESC_F_NEXT, 2 * k + 1);
        }
        self.ring.hdr_len = hdr.bytes();
    }

    /// Let [`VirtqTx::tx_burst_offload`] ask the device for TCP and UDP
    /// checksums (`on`: `VIRTIO_NET_F_CSUM` was negotiated, virtio 1.2
    /// §5.1.6.2; off until this is called, and then every offload request
    /// is refused with [`TxRefusal::NoTxOffloads`]).
    pub fn set_csum(&mut self, on: bool) {
        self.csum = on;
    }

    /// Whether TCP and UDP checksums can be asked of the device
    /// ([`VirtqTx::set_csum`]).
    pub fn csum(&self) -> bool {
        self.csum
    }

    /// Let [`VirtqTx::tx_burst_offload`] ask the device to segment TCP
    /// over IPv4 (`v4`: `VIRTIO_NET_F_HOST_TSO4` was negotiated) and over
    /// IPv6 (`v6`: `HOST_TSO6`), virtio 1.2 §5.1.6.2, into segments of
    /// at most `mtu` bytes of IP datagram (the port's MTU: a larger MSS is
    /// refused). Both need [`VirtqTx::set_csum`] too (§5.1.3.1: they
    /// require `VIRTIO_NET_F_CSUM`). Off until this is called.
    pub fn set_tso(&mut self, v4: bool, v6: bool, mtu: usize) {
        self.tso = (v4, v6);
        self.tso_mtu = mtu;
    }

    /// Use `VIRTIO_F_IN_ORDER` (`on`: negotiated; off until this is
    /// called; virtio 1.2 §2.7.5 and §2.7.8 for split rings, the packed
    /// ring's "In-order use of descriptors" in §2.8): chains are posted in
    /// ring order (descriptors from 0 on, wrapping at the table's end, as
    /// the split ring's rule asks of the driver), and the device, which
    /// uses them in that order, may complete a whole batch with one used
    /// entry. [`VirtqTx::reclaim`] then frees the oldest chains: on a
    /// split ring as many as the used index moved (no used entry is read),
    /// on a packed ring up to the one whose buffer id the used descriptor
    /// at the used cursor names, the cursor moved past the whole batch (a
    /// buffer id that is no chain in flight stops the queue). Call it
    /// before the first [`VirtqTx::tx_burst`].
    ///
    /// # Panics
    /// If frames were queued already.
    pub fn set_in_order(&mut self, on: bool) {
        assert!(
            self.avail_idx == 0,
            "VirtqTx::set_in_order after tx_burst: the device has chains"
        );
        self.in_order = on;
    }

    /// Whether TCP segmentation can be asked of the device over IPv4 and
    /// over IPv6 ([`VirtqTx::set_tso`]), while checksums can be.
    pub fn tso(&self) -> (bool, bool) {
        if self.csum {
            self.tso
        } else {
            (false, false)
        }
    }

    /// Where the device finds this queue.
    pub fn addrs(&self) -> VirtqAddrs {
        self.ring.addrs()
    }

    /// Split or packed.
    pub fn layout(&self) -> VirtqLayout {
        self.ring.layout()
    }

    /// Queue frames from the front of `pkts` while chains are free; the
    /// queued ones leave `pkts`, the rest stay in order. Returns how many
    /// were taken, including any refused as unsendable (empty, or in a
    /// mempool the device cannot reach), which are freed and counted in
    /// `tx_errors`. Reclaims into `cache` first when few chains are free.
    /// One avail-index store per burst, and a kick only if the device asks.
    #[inline]
    pub fn tx_burst(&mut self, pkts: &mut Vec<Packet>, cache: &mut PoolCache) -> usize {
        self.burst_of::<PLAIN>(pkts, cache, 0)
    }

    /// [`VirtqTx::burst`] for the ordering rule negotiated, each its own
    /// loop.
    #[inline(always)]
    fn burst_of<const MODE: u8>(
        &mut self,
        pkts: &mut Vec<Packet>,
        cache: &mut PoolCache,
        mss: u16,
    ) -> usize {
        if self.in_order {
            self.burst::<MODE, true>(pkts, cache, mss)
        } else {
            self.burst::<MODE, false>(pkts, cache, mss)
        }
    }

    /// [`VirtqTx::tx_burst`] with transmit offloads (virtio 1.2 §5.1.6.2):
    /// with `VIRTIO_NET_F_CSUM` ([`VirtqTx::set_csum`]) the TCP or UDP
    /// checksum, asked with [`TxOffload::with_l4_checksum`] alone, and with
    /// `HOST_TSO4`/`HOST_TSO6` ([`VirtqTx::set_tso`]) TCP segmentation,
    /// asked with [`TxOffload::with_tso`] (the L4 checksum flag may come
    /// with it).
    ///
    /// A checksum frame is checked and planned by
    /// `pollnic_hw::offload::tx_plan`; its checksum field gets the
    /// pseudo-header's sum and its chain's header
    /// `VIRTIO_NET_HDR_F_NEEDS_CSUM`, `csum_start` = the L4 header's offset
    /// and `csum_offset` = the field's offset from it (16 TCP, 6 UDP). A
    /// segmentation frame is prepared by
    /// `pollnic_hw::offload::virtio_tso_prepare` (its IP length and IPv4
    /// checksum written, the TCP checksum seeded with the length) and its
    /// header gets NEEDS_CSUM, `gso_type` TCPV4 or TCPV6, `hdr_len` and
    /// `gso_size` = the MSS.
    ///
    /// A frame that cannot be done is refused: freed into `cache`, counted
    /// in `tx_errors` and `tx_offload_errors`, and [`VirtqTx::last_refusal`]
    /// says why ([`TxRefusal::NoTxOffloads`] without CSUM,
    /// [`TxRefusal::NotOffered`] for an IPv4 header checksum, a VLAN tag,
    /// or segmentation the device did not offer for the frame's IP
    /// version, the plan's refusal for the frame otherwise). Returns how
    /// many were taken, refused ones included; [`TxOffload::NONE`] is
    /// [`VirtqTx::tx_burst`].
    #[inline]
    pub fn tx_burst_offload(
        &mut self,
        pkts: &mut Vec<Packet>,
        offload: &TxOffload,
        cache: &mut PoolCache,
    ) -> usize {
        if offload.is_none() {
            return self.burst_of::<PLAIN>(pkts, cache, 0);
        }
        let not_offered = |what| Some(TxRefusal::NotOffered { what });
        let refusal = if !self.csum {
            Some(TxRefusal::NoTxOffloads)
        } else if offload.ipv4_checksum {
            not_offered("IPv4 header checksum insertion")
        } else if offload.vlan.is_some() {
            not_offered("VLAN tag insertion")
        } else if offload.tso.is_some() && self.tso == (false, false) {
            not_offered("TCP segmentation")
        } else {
            None
        };
        match (refusal, offload.tso) {
            (Some(why), _) => self.refuse_all(pkts, cache, why),
            (None, Some(mss)) => self.burst_of::<TSO>(pkts, cache, mss),
            (None, None) => self.burst_of::<CSUM>(pkts, cache, 0),
        }
    }

    /// The burst loop; `MODE` is [`PLAIN`], [`CSUM`] (the TCP/UDP checksum
    /// of every frame) or [`TSO`] (every frame segmented at `mss`);
    /// `IN_ORDER`, chains taken in ring order rather than from `free`.
    #[inline(always)]
    fn burst<const MODE: u8, const IN_ORDER: bool>(
        &mut self,
        pkts: &mut Vec<Packet>,
        cache: &mut PoolCache,
        mss: u16,
    ) -> usize {
        if self.vq.stopped || pkts.is_empty() {
            return 0;
        }
        if self.free_chains::<IN_ORDER>() < pkts.len().min(TX_RECLAIM_BELOW) {
            self.reclaim(cache);
        }
        let n = pkts.len().min(self.free_chains::<IN_ORDER>());
        if n == 0 {
            self.stats.ring_full += 1;
            return 0;
        }
        if n < pkts.len() {
            self.stats.ring_full += 1;
        }
        let (mut sent, mut bytes, mut foreign) = (0u64, 0u64, 0u64);
        let old = self.avail_idx;
        let l4 = TxOffload::NONE.with_l4_checksum();
        for mut p in pkts.drain(..n) {
            // The header's request (all 0 for a plain frame).
            let mut req = HdrFields::default();
            let planned = match MODE {
                CSUM => tx_plan(p.data(), &l4).map(|plan| {
                    tx_prepare(p.data_mut(), &plan.prep);
                    if let (Some((at, _)), Some((start, _))) =
                        (plan.prep.l4_seed, plan.prep.l4_range)
                    {
                        // The L4 header starts within the first 18 + 60
                        // bytes (a tag, IPv4 options): it fits.
                        req.flags = net_hdr::F_NEEDS_CSUM;
                        req.csum = (start as u16, (at - start) as u16);
                    }
                }),
                TSO => virtio_tso_prepare(p.data_mut(), mss, self.tso_mtu).and_then(|g| {
                    let offered = if g.ipv6 { self.tso.1 } else { self.tso.0 };
                    if !offered {
                        return Err(TxRefusal::NotOffered {
                            what: if g.ipv6 {
                                "TCP segmentation over IPv6 (VIRTIO_NET_F_HOST_TSO6)"
                            } else {
                                "TCP segmentation over IPv4 (VIRTIO_NET_F_HOST_TSO4)"
                            },
                        });
                    }
                    req = HdrFields {
                        flags: net_hdr::F_NEEDS_CSUM,
                        gso_type: if g.ipv6 {
                            net_hdr::GSO_TCPV6
                        } else {
                            net_hdr::GSO_TCPV4
                        },
                        hdr_len: g.hdr_len,
                        gso_size: g.gso_size,
                        csum: (g.csum_start, g.csum_offset),
                    };
                    Ok(())
                }),
                _ => Ok(()),
            };
            if let Err(why) = planned {
                self.stats.tx_errors += 1;
                self.stats.tx_offload_errors += 1;
                self.last_refusal = Some(why);
                cache.recycle(p);
                continue;
            }
            let (pool, idx, len) = p.parts();
            // SAFETY: `p` holds a reference to its pool.
            let iova = unsafe { Shared::iova_for(pool, idx, &self.ring.region) };
            let Some(iova) = iova.filter(|_| len > 0) else {
                self.stats.tx_errors += 1;
                cache.recycle(p);
                continue;
            };
            let k = if IN_ORDER {
                let k = self.next_chain;
                self.next_chain = if k + 1 == self.slots.len() as u16 {
                    0
                } else {
                    k + 1
                };
                k
            } else {
                self.free.pop().expect("n <= free chains")
            };
            if MODE != PLAIN {
                self.ring.set_hdr(k as usize, &req);
                self.dirty[k as usize] = req.flags != 0;
            } else if self.csum && self.dirty[k as usize] {
                self.ring.set_hdr(k as usize, &HdrFields::default());
                self.dirty[k as usize] = false;
            }
            if pool != cache.pool().as_ptr() {
                foreign += 1;
            }
            let (pool, idx) = p.into_parts();
            self.slots[k as usize] = InFlight {
                pool: pool.as_ptr(),
                idx,
            };
            self.ring.post_chain(self.avail_idx, k, iova, len, false);
            self.posted[k as usize] = true;
            self.avail_idx = self.avail_idx.wrapping_add(1);
            sent += 1;
            bytes += len as u64;
        }
        if sent > 0 {
            self.ring.publish(self.avail_idx);
            self.ring
                .kick(&mut self.doorbell, old, self.avail_idx, &mut self.vq);
            self.stats.packets += sent;
            self.stats.bytes += bytes;
            self.stats.foreign += foreign;
            self.stats.bursts += 1;
        }
        n
    }

    /// Chains free to fill.
    #[inline(always)]
    fn free_chains<const IN_ORDER: bool>(&self) -> usize {
        if IN_ORDER {
            self.slots.len() - self.in_flight()
        } else {
            self.free.len()
        }
    }

    /// Refuse every frame of `pkts` for a transmit offload this device
    /// cannot do ([`TxRefusal::NoTxOffloads`]): each is freed into `cache`
    /// and counted in `tx_errors` and `tx_offload_errors`, as the
    /// descriptor rings count theirs. Returns how many were taken (all).
    pub fn refuse_offloads(&mut self, pkts: &mut Vec<Packet>, cache: &mut PoolCache) -> usize {
        self.refuse_all(pkts, cache, TxRefusal::NoTxOffloads)
    }

    /// Refuse every frame of `pkts` for `why` (see `refuse_offloads`).
    fn refuse_all(
        &mut self,
        pkts: &mut Vec<Packet>,
        cache: &mut PoolCache,
        why: TxRefusal,
    ) -> usize {
        let n = pkts.len();
        for p in pkts.drain(..) {
            cache.recycle(p);
        }
        if n > 0 {
            self.last_refusal = Some(why);
        }
        self.stats.tx_errors += n as u64;
        self.stats.tx_offload_errors += n as u64;
        n
    }

    /// Why the last frame refused by [`VirtqTx::tx_burst_offload`] (or
    /// [`VirtqTx::refuse_offloads`]) was refused, if one was.
    pub fn last_refusal(&self) -> Option<TxRefusal> {
        self.last_refusal
    }

    /// Return the buffers of every chain the device has used into `cache`
    /// (or their own pool); returns how many. Each used entry is checked
    /// (module docs); the first bad one stops the queue.
    pub fn reclaim(&mut self, cache: &mut PoolCache) -> usize {
        if self.vq.stopped {
            return 0;
        }
        let in_flight = self.avail_idx.wrapping_sub(self.last_used);
        let pending = self.ring.pending(self.last_used, in_flight);
        if pending == 0 {
            return 0;
        }
        if pending > in_flight {
            self.vq.device_errors += 1;
            self.vq.stopped = true;
            return 0;
        }
        // One loop per layout, so that the split loop reads its used ring
        // with no per-entry layout test (the packed one is the same loop
        // over `next_used`).
        let done = match (&self.ring.kind, self.in_order) {
            (Kind::Split(l), false) => {
                let l = *l;
                self.reclaim_split(&l, pending, cache)
            }
            (Kind::Packed(_), false) => self.reclaim_packed(pending, cache),
            (Kind::Split(_), true) => {
                // In order: the used index says how many of the oldest
                // chains are done (checked against those in flight above);
                // the device may have written only the batch's last entry.
                for _ in 0..pending {
                    self.release_oldest(cache);
                }
                pending
            }
            (Kind::Packed(_), true) => self.reclaim_packed_in_order(pending, cache),
        };
        self.last_used = self.last_used.wrapping_add(done);
        if self.ring.event_idx && done > 0 {
            // No vector is routed to a TX queue; keep used_event away anyway.
            self.ring
                .set_used_event(self.last_used.wrapping_add(USED_EVENT_AWAY));
        }
        done as usize
    }

    /// `reclaim` on a split ring: the `pending` used entries from
    /// `last_used` on, each checked; returns how many were taken.
    #[inline(always)]
    fn reclaim_split(&mut self, l: &SplitLayout, pending: u16, cache: &mut PoolCache) -> u16 {
        let mut done = 0u16;
        while done < pending {
            let (id, _) = self
                .ring
                .split_used_elem(l, self.last_used.wrapping_add(done));
            if id >= u32::from(self.ring.size) || id & 1 != 0 {
                self.device_error();
                break;
            }
            let k = (id / 2) as usize;
            if !self.posted.get(k).copied().unwrap_or(false) {
                self.device_error();
                break;
            }
            self.release(k, cache);
            done += 1;
        }
        done
    }

    /// The buffer id of the used descriptor at a packed ring's used
    /// cursor (not consumed), or `None` when there is none yet or the
    /// descriptor breaks the protocol (which stops the queue).
    #[inline(always)]
    fn used_id(&mut self) -> Option<u32> {
        match self.ring.next_used(0) {
            Used::Elem { id, .. } => Some(id),
            Used::None => None,
            Used::Bad => {
                self.device_error();
                None
            }
        }
    }

    /// `reclaim` on a packed ring: up to `pending` used descriptors at the
    /// used cursor, each checked; returns how many were taken.
    #[inline(always)]
    fn reclaim_packed(&mut self, pending: u16, cache: &mut PoolCache) -> u16 {
        let mut done = 0u16;
        while done < pending {
            let Some(id) = self.used_id() else { break };
            let Some(k) = self.ring.chain_of(id, &self.posted) else {
                self.device_error();
                break;
            };
            self.ring.consume_used();
            self.release(k, cache);
            done += 1;
        }
        done
    }

    /// `reclaim` on a packed ring in order: the used descriptor at the
    /// used cursor names the last buffer of a batch (the device may write
    /// one for several, virtio 1.2 §2.8); the batch runs from the oldest
    /// chain in flight to that one, and the cursor moves past all of its
    /// descriptors. A buffer id that is no chain in flight stops the
    /// queue. Returns how many chains were taken, at most `in_flight`.
    #[inline(always)]
    fn reclaim_packed_in_order(&mut self, in_flight: u16, cache: &mut PoolCache) -> u16 {
        let chains = self.slots.len() as u16;
        let mut done = 0u16;
        while done < in_flight {
            let Some(id) = self.used_id() else { break };
            // A run of one (what a device that writes every used
            // descriptor, as QEMU does, always gives): no arithmetic.
            if id == u32::from(self.oldest) {
                self.ring.consume_used();
                self.release_oldest(cache);
                done += 1;
                continue;
            }
            // The batch's length: from the oldest chain to `id`, in ring
            // order (chain numbers wrap at `chains`).
            let batch = match u16::try_from(id) {
                Ok(id) if id < chains => {
                    (if id >= self.oldest {
                        id - self.oldest
                    } else {
                        id + chains - self.oldest
                    }) + 1
                }
                _ => u16::MAX,
            };
            if batch > in_flight - done {
                self.device_error();
                break;
            }
            self.ring.consume_chains(batch);
            for _ in 0..batch {
                self.release_oldest(cache);
            }
            done += batch;
        }
        done
    }

    /// The oldest chain in flight (in order) is the driver's again.
    #[inline(always)]
    fn release_oldest(&mut self, cache: &mut PoolCache) {
        let k = self.oldest as usize;
        self.oldest = if k + 1 == self.slots.len() {
            0
        } else {
            self.oldest + 1
        };
        self.release_chain::<true>(k, cache);
    }

    /// Chain `k` (posted, checked) is the driver's again: its buffer back
    /// into `cache` (or its own pool), the chain free.
    #[inline(always)]
    fn release(&mut self, k: usize, cache: &mut PoolCache) {
        self.release_chain::<false>(k, cache);
    }

    /// [`VirtqTx::release`]; `IN_ORDER`, the chain is not put on `free`
    /// (the ring order decides the next one).
    #[inline(always)]
    fn release_chain<const IN_ORDER: bool>(&mut self, k: usize, cache: &mut PoolCache) {
        self.posted[k] = false;
        let f = self.slots[k];
        self.slots[k].pool = std::ptr::null_mut();
        // SAFETY: chain `k` was posted (checked by the caller) and held
        // buffer `f.idx` of the pool at `f.pool` with one reference, taken
        // from a packet in `tx_burst`; `posted[k]` is now false, so it is
        // handed back once.
        let p = unsafe { Packet::from_raw_parts(NonNull::new_unchecked(f.pool), f.idx) };
        cache.recycle(p);
        if !IN_ORDER {
            self.free.push(k as u16);
        }
    }

    #[cold]
    fn device_error(&mut self) {
        self.vq.device_errors += 1;
        self.vq.stopped = true;
    }

    /// Use `VIRTIO_F_EVENT_IDX` for notifications (module docs), once the
    /// device and driver negotiated it; before the first burst.
    pub fn use_event_idx(&mut self) {
        self.ring.use_event_idx(self.last_used);
        self.vq.event_idx = true;
    }

    /// Frames handed to the device and not yet reclaimed.
    pub fn in_flight(&self) -> usize {
        self.avail_idx.wrapping_sub(self.last_used) as usize
    }
    /// Packet counters.
    pub fn stats(&self) -> TxStats {
        self.stats
    }
    /// Virtqueue counters (kicks, device errors).
    pub fn virtq_stats(&self) -> VirtqStats {
        self.vq
    }
    /// Accounting for tests and the fuzz harness: the buffers in flight, as
    /// `(index, pool)`.
    #[doc(hidden)]
    pub fn in_flight_buffers(&self) -> impl Iterator<Item = (u32, *const ())> + '_ {
        self.posted
            .iter()
            .zip(self.slots.iter())
            .filter(|(p, _)| **p)
            .map(|(_, f)| (f.idx, f.pool as *const ()))
    }
}

impl<D: Doorbell> Drop for VirtqTx<D> {
    /// Give back every buffer still in flight (the device is reset).
    fn drop(&mut self) {
        for (k, f) in self.slots.iter().enumerate() {
            if self.posted[k] {
                // SAFETY: a posted chain holds one buffer and one reference
                // of its pool (see `reclaim`), handed back once here.
                drop(unsafe { Packet::from_raw_parts(NonNull::new_unchecked(f.pool), f.idx) });
            }
        }
        self.posted.fill(false);
    }
}

pub mod ctrl;
mod packed;

/// The device's side of a split virtqueue, for tests and the fuzz harness:
/// reads what the driver posted and writes used entries, through the same
/// region the driver uses (identity-mapped IOVAs only). A test helper, not
/// part of the library's interface: hidden from its documentation.
#[doc(hidden)]
pub mod device {
    use super::*;

    /// A view of a queue's memory from the device's side.
    #[derive(Clone, Copy, Debug)]
    pub struct DeviceView {
        base: *mut u8,
        layout: SplitLayout,
    }

    // SAFETY: the view holds only the address of the queue's DMA memory,
    // which `new`'s contract keeps alive; it reads and writes it only with
    // volatile accesses, as a device does from its own thread.
    unsafe impl Send for DeviceView {}

    impl DeviceView {
        /// The device side of the queue at `addrs`, whose IOVAs are the
        /// process's own addresses (an [`crate::IdentityMapper`] region).
        ///
        /// # Safety
        /// The queue behind `addrs` is alive and identity-mapped for as
        /// long as the view is used.
        pub unsafe fn new(addrs: VirtqAddrs) -> DeviceView {
            DeviceView {
                base: addrs.desc as usize as *mut u8,
                layout: SplitLayout::new(addrs.size),
            }
        }
        fn rd16(&self, off: usize) -> u16 {
            // SAFETY: `new`'s contract; offsets from the layout.
            u16::from_le(unsafe { self.base.add(off).cast::<u16>().read_volatile() })
        }
        /// avail.idx.
        pub fn avail_idx(&self) -> u16 {
            self.rd16(self.layout.avail_idx())
        }
        /// avail.flags.
        pub fn avail_flags(&self) -> u16 {
            self.rd16(self.layout.avail_flags())
        }
        /// avail.ring[`slot` masked].
        pub fn avail_entry(&self, slot: u16) -> u16 {
            self.rd16(self.layout.avail_ring(slot))
        }
        /// Descriptor `i` (masked): (addr, len, flags, next).
        pub fn desc(&self, i: u16) -> (u64, u32, u16, u16) {
            // SAFETY: `new`'s contract; inside the descriptor table.
            let d = unsafe {
                self.base
                    .add(self.layout.desc(i))
                    .cast::<Desc>()
                    .read_volatile()
            };
            (
                d.addr.to_native(),
                d.len.to_native(),
                d.flags.to_native(),
                d.next.to_native(),
            )
        }
        /// Write avail.ring[`slot` masked] = `id`: what a hostile device
        /// may do to the driver's ring (the driver never reads it back).
        pub fn set_avail_entry(&self, slot: u16, id: u16) {
            let off = self.layout.avail_ring(slot);
            // SAFETY: `new`'s contract; inside avail.ring.
            unsafe { self.base.add(off).cast::<u16>().write_volatile(id.to_le()) }
        }
        /// Write descriptor `i`'s (masked) address and length: what a
        /// hostile device may do to the driver's table (the driver never
        /// reads it back).
        pub fn set_desc_buf(&self, i: u16, addr: u64, len: u32) {
            let d = self.base.wrapping_add(self.layout.desc(i)).cast::<Desc>();
            // SAFETY: `new`'s contract; inside the descriptor table, 16-byte
            // aligned.
            unsafe {
                std::ptr::addr_of_mut!((*d).addr).write_volatile(Le64::from(addr));
                std::ptr::addr_of_mut!((*d).len).write_volatile(Le32::from(len));
            }
        }
        /// Write used.ring[`slot` masked] = (id, len).
        pub fn put_used(&self, slot: u16, id: u32, len: u32) {
            let e = UsedElem {
                id: Le32::from(id),
                len: Le32::from(len),
            };
            let off = self.layout.used_ring(slot);
            // SAFETY: `new`'s contract; inside used.ring.
            unsafe { self.base.add(off).cast::<UsedElem>().write_volatile(e) }
        }
        /// Write used.idx.
        pub fn set_used_idx(&self, idx: u16) {
            // SAFETY: `new`'s contract; used.idx.
            unsafe {
                self.base
                    .add(self.layout.used_idx())
                    .cast::<u16>()
                    .write_volatile(idx.to_le())
            }
        }
        /// `avail_event`, the device's u16 after used.ring.
        pub fn avail_event(&self) -> u16 {
            self.rd16(self.layout.avail_event())
        }
        /// `used_event`, the driver's u16 after avail.ring.
        pub fn used_event(&self) -> u16 {
            self.rd16(self.layout.used_event())
        }
        /// Write `avail_event`, the device's u16 after used.ring.
        pub fn set_avail_event(&self, v: u16) {
            let off = self.layout.avail_event();
            // SAFETY: `new`'s contract; the used ring's last u16.
            unsafe { self.base.add(off).cast::<u16>().write_volatile(v.to_le()) }
        }
        /// Write used.flags (`1`: `VRING_USED_F_NO_NOTIFY`).
        pub fn set_used_flags(&self, flags: u16) {
            // SAFETY: `new`'s contract; used.flags.
            unsafe {
                self.base
                    .add(self.layout.used_flags())
                    .cast::<u16>()
                    .write_volatile(flags.to_le())
            }
        }
    }
}

/// The device's side of a packed virtqueue (virtio 1.2 §2.8), for tests
/// and the fuzz harness: reads the chains the driver made available at the
/// device's avail cursor and writes used descriptors at its used cursor,
/// through the driver's own region (identity-mapped IOVAs only), with both
/// device wrap counters. Hostile tests write any descriptor with
/// `PackedDevice::write_used_raw`. Hidden from the library's
/// documentation.
#[doc(hidden)]
pub mod packed_device {
    use super::packed::{PackedDesc, PackedLayout, DESC_F_AVAIL, DESC_F_USED};
    use super::{VirtqAddrs, DESC_F_NEXT, DESC_F_WRITE};
    use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
    use vm_memory::{Le16, Le32, Le64};

    /// One chain the device took: buffer id, its descriptors (address,
    /// length, device-writable), and how many descriptors it spans.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Chain {
        /// The buffer id (of the chain's last descriptor, §2.8.6).
        pub id: u16,
        /// (address, length, writable) of each descriptor, in order.
        pub bufs: Vec<(u64, u32, bool)>,
    }

    /// A packed ring from the device's side.
    #[derive(Debug)]
    pub struct PackedDevice {
        base: *mut u8,
        layout: PackedLayout,
        /// The device's avail cursor and its wrap counter.
        pub avail: (u16, bool),
        /// The device's used cursor and its wrap counter.
        pub used: (u16, bool),
    }

    // SAFETY: the view holds only the address of the queue's DMA memory,
    // which `new`'s contract keeps alive; it reads and writes it only with
    // volatile or atomic accesses, as a device does from its own thread.
    unsafe impl Send for PackedDevice {}

    impl PackedDevice {
        /// The device side of the packed queue at `addrs`, both cursors at
        /// 0 with wrap counters 1.
        ///
        /// # Safety
        /// The queue behind `addrs` is alive and identity-mapped for as
        /// long as the view is used.
        pub unsafe fn new(addrs: VirtqAddrs) -> PackedDevice {
            PackedDevice {
                base: addrs.desc as usize as *mut u8,
                layout: PackedLayout::new(addrs.size, 2),
                avail: (0, true),
                used: (0, true),
            }
        }

        /// Descriptors in the ring.
        pub fn size(&self) -> u16 {
            self.layout.size
        }

        fn step(&self, (pos, wrap): (u16, bool), n: u16) -> (u16, bool) {
            let next = u32::from(pos) + u32::from(n);
            let size = u32::from(self.layout.size);
            if next >= size {
                ((next - size) as u16, !wrap)
            } else {
                (next as u16, wrap)
            }
        }

        /// Descriptor `i` (clamped): (addr, len, id, flags), the flags read
        /// first (Acquire).
        pub fn desc(&self, i: u16) -> (u64, u32, u16, u16) {
            let off = self.layout.desc(i);
            // SAFETY: `new`'s contract; inside the ring, aligned.
            unsafe {
                let flags = AtomicU16::from_ptr(self.base.add(off + 14).cast::<u16>())
                    .load(Ordering::Acquire);
                let d = self.base.add(off).cast::<PackedDesc>().read_volatile();
                (
                    d.addr.to_native(),
                    d.len.to_native(),
                    d.id.to_native(),
                    u16::from_le(flags),
                )
            }
        }

        /// Whether descriptor `i` is available with wrap counter `w`
        /// (§2.8.1: AVAIL = w, USED = !w).
        fn is_avail(flags: u16, w: bool) -> bool {
            (flags & DESC_F_AVAIL != 0) == w && (flags & DESC_F_USED != 0) != w
        }

        /// Take the next available chain (following NEXT, at most the ring's
        /// size), moving the avail cursor past it; `None` when the
        /// descriptor there is not available, or a chain runs past the ring
        /// or has a descriptor not available.
        pub fn take(&mut self) -> Option<Chain> {
            let mut at = self.avail;
            let mut bufs = Vec::new();
            for _ in 0..self.layout.size {
                let (addr, len, id, flags) = self.desc(at.0);
                if !Self::is_avail(flags, at.1) {
                    return None;
                }
                bufs.push((addr, len, flags & DESC_F_WRITE != 0));
                at = self.step(at, 1);
                if flags & DESC_F_NEXT == 0 {
                    self.avail = at;
                    return Some(Chain { id, bufs });
                }
            }
            None
        }

        /// Write a used descriptor for buffer `id` with `len` bytes at the
        /// used cursor (AVAIL = USED = the used wrap counter, flags last with
        /// Release) and move the cursor by `ndesc`, the chain's length.
        pub fn push_used(&mut self, id: u16, len: u32, ndesc: u16) {
            let w = self.used.1;
            let flags = if w { DESC_F_AVAIL | DESC_F_USED } else { 0 };
            self.write_used_raw(self.used.0, id, len, flags);
            self.used = self.step(self.used, ndesc);
        }

        /// Write descriptor `pos` (clamped) as a used one with any `id`,
        /// `len` and `flags`: what a hostile device may write. The flags go
        /// last, with Release.
        pub fn write_used_raw(&self, pos: u16, id: u16, len: u32, flags: u16) {
            let off = self.layout.desc(pos);
            // SAFETY: `new`'s contract; inside the ring, aligned.
            unsafe {
                let d = self.base.add(off).cast::<PackedDesc>();
                std::ptr::addr_of_mut!((*d).id).write_volatile(Le16::from(id));
                std::ptr::addr_of_mut!((*d).len).write_volatile(Le32::from(len));
                std::ptr::addr_of_mut!((*d).addr).write_volatile(Le64::from(0));
                AtomicU16::from_ptr(self.base.add(off + 14).cast::<u16>())
                    .store(flags.to_le(), Ordering::Release);
            }
        }

        /// The driver's event suppression structure: (off_wrap, flags).
        pub fn driver_event(&self) -> (u16, u16) {
            self.event(self.layout.driver)
        }

        /// Write the device's event suppression structure (off_wrap, flags)
        /// as one u32.
        pub fn set_device_event(&self, off_wrap: u16, flags: u16) {
            let v = u32::from(off_wrap) | u32::from(flags) << 16;
            // SAFETY: `new`'s contract; 4 bytes inside the region, 4-aligned.
            unsafe {
                AtomicU32::from_ptr(self.base.add(self.layout.device).cast::<u32>())
                    .store(v.to_le(), Ordering::SeqCst)
            }
        }

        fn event(&self, off: usize) -> (u16, u16) {
            // SAFETY: `new`'s contract; 4 bytes inside the region, 4-aligned.
            let v = u32::from_le(unsafe {
                AtomicU32::from_ptr(self.base.add(off).cast::<u32>()).load(Ordering::SeqCst)
            });
            (v as u16, (v >> 16) as u16)
        }
    }
}

#[cfg(test)]
mod layout_tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    /// The entries have the spec's sizes and offsets (§2.7.5, §2.7.8).
    #[test]
    fn entries_have_the_specs_shape() {
        assert_eq!(size_of::<Desc>(), 16);
        assert_eq!(
            [
                offset_of!(Desc, addr),
                offset_of!(Desc, len),
                offset_of!(Desc, flags),
                offset_of!(Desc, next)
            ],
            [0, 8, 12, 14]
        );
        assert_eq!(size_of::<UsedElem>(), 8);
        assert_eq!(
            [offset_of!(UsedElem, id), offset_of!(UsedElem, len)],
            [0, 4]
        );
        assert!(align_of::<Desc>() <= 16 && align_of::<UsedElem>() <= 4);
    }

    /// For every queue size: the parts are aligned as §2.7 requires, do not
    /// overlap, and every offset of every index (masked) lies inside the
    /// layout with its whole field.
    #[test]
    fn every_offset_of_every_size_lies_inside_its_part() {
        for shift in 2..=15 {
            let size = 1u16 << shift;
            let l = SplitLayout::new(size);
            let n = size as usize;
            assert_eq!(l.desc(0), 0);
            assert_eq!(l.avail_flags() % 2, 0);
            assert_eq!(l.used_flags() % 4, 0);
            assert_eq!(l.hdr(0) % 16, 0);
            assert!(l.avail_flags() >= 16 * n, "avail after the table");
            assert!(l.used_flags() >= l.used_event() + 2, "used after avail");
            assert!(l.hdr(0) >= l.avail_event() + 2, "headers after used");
            assert_eq!(l.total, l.hdr(0) + HDR_SLOT * (n / 2));
            for i in [0, 1, size - 1, size, size + 1, u16::MAX] {
                assert!(l.desc(i) + 16 <= l.avail_flags(), "desc {i} of {size}");
                assert!(l.avail_ring(i) + 2 <= l.used_event(), "avail {i} of {size}");
                assert!(l.used_ring(i) + 8 <= l.avail_event(), "used {i} of {size}");
                assert!(l.hdr(i as usize) + HDR_SLOT <= l.total, "hdr {i} of {size}");
            }
            assert_eq!(l.avail_idx(), l.avail_flags() + 2);
            assert_eq!(l.used_idx(), l.used_flags() + 2);
        }
    }
}
