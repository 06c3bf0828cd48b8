//! The device's side of one virtqueue, split (virtio 1.2 §2.7) or packed
//! (§2.8, once `VIRTIO_F_RING_PACKED` is negotiated), over the model's
//! IOMMU: every ring field and buffer is reached by IOVA through
//! [`Mappings`], so a bad address is a fault the model reports, never a
//! memory access. What the driver writes (the avail ring, the descriptor
//! table) is read as a device reads it and checked against the spec's
//! rules; what the device writes (the used ring, `avail_event`) is written
//! as QEMU's `virtqueue_push` and `virtio_queue_set_notification` do.
//!
//! A packed ring is read strictly too: a chain's first descriptor must not
//! be available before the rest of it (§2.8, "Driver Requirements:
//! Scatter-Gather Support"), no indirect descriptor, readable before
//! writable, at most the queue size long, and a buffer id the device still
//! holds is not made available again (the device could not tell the two
//! apart when it returns one). Used descriptors carry the buffer id of the
//! chain's last descriptor, AVAIL = USED = the device's wrap counter, and
//! the device's used cursor moves by the chain's length (§2.8.6).

use crate::iommu::Mappings;
use std::collections::HashMap;

/// `VIRTQ_DESC_F_NEXT`.
const F_NEXT: u16 = 1;
/// `VIRTQ_DESC_F_WRITE`.
const F_WRITE: u16 = 2;
/// `VIRTQ_DESC_F_INDIRECT`.
const F_INDIRECT: u16 = 4;
/// `VIRTQ_AVAIL_F_NO_INTERRUPT`.
const AVAIL_F_NO_INTERRUPT: u16 = 1;
/// `VIRTQ_DESC_F_AVAIL` and `VIRTQ_DESC_F_USED` (§2.8.1).
const F_AVAIL: u16 = 1 << 7;
const F_USED: u16 = 1 << 15;
/// `RING_EVENT_FLAGS_DISABLE` and `RING_EVENT_FLAGS_DESC` (§2.8.10).
const EVENT_DISABLE: u16 = 1;
const EVENT_DESC: u16 = 2;

/// `VIRTIO_MSI_NO_VECTOR`.
pub(crate) const NO_VECTOR: u16 = 0xffff;

/// One virtqueue as the device keeps it: what the driver wrote into the
/// common configuration for it, and the device's own indices.
#[derive(Clone, Debug)]
pub(crate) struct Vq {
    /// The largest size the device offers (`queue_size` after reset).
    pub max: u16,
    /// `queue_size` as the driver set it.
    pub size: u16,
    /// `queue_msix_vector`.
    pub vector: u16,
    /// `queue_enable` was written 1.
    pub enabled: bool,
    /// `queue_desc`, `queue_driver` (avail), `queue_device` (used).
    pub desc: u64,
    pub avail: u64,
    pub used: u64,
    /// The next avail entry the device takes.
    pub last_avail: u16,
    /// The device's used index (published to `used.idx`; on a packed
    /// ring, a count of used descriptors written).
    pub used_idx: u16,
    /// A packed ring (`VIRTIO_F_RING_PACKED`, set when the queue is
    /// enabled).
    pub packed: bool,
    /// Packed: the device's avail cursor and its wrap counter.
    pub p_avail: (u16, bool),
    /// Packed: the device's used cursor and its wrap counter.
    pub p_used: (u16, bool),
    /// Packed: the avail cursor before the last chain taken (`untake`).
    p_prev: (u16, bool),
    /// Packed: the buffer ids the device holds, with their chains'
    /// lengths in descriptors.
    outstanding: HashMap<u16, u16>,
    /// `VIRTIO_F_IN_ORDER` was negotiated when the queue was enabled.
    pub in_order: bool,
    /// Split, in order: the descriptor the next chain must start at (the
    /// driver uses descriptors in ring order, §2.7.5).
    next_desc: u16,
}

/// A descriptor chain the device took: its head and its buffers.
#[derive(Debug, Default)]
pub(crate) struct Chain {
    /// Split: the head descriptor's index; packed: the buffer id.
    pub head: u16,
    /// Descriptors in the chain.
    pub ndesc: u16,
    /// Packed: ring position of the chain's last descriptor.
    pub last_pos: u16,
    /// Device-readable buffers (IOVA, length), in order.
    pub readable: Vec<(u64, u32)>,
    /// Device-writable buffers, in order.
    pub writable: Vec<(u64, u32)>,
}

impl Chain {
    /// Bytes the device may write.
    pub fn writable_len(&self) -> u64 {
        self.writable.iter().map(|&(_, l)| u64::from(l)).sum()
    }
}

/// What taking the next available chain gave.
#[derive(Debug)]
pub(crate) enum Take {
    /// No chain available.
    Empty,
    /// A chain.
    Chain(Chain),
    /// The driver's ring is broken: a spec violation, named.
    Broken(String),
}

/// `vring_need_event` (§2.7.10): whether moving from `old` to `new` crosses
/// `event`.
pub(crate) fn need_event(event: u16, new: u16, old: u16) -> bool {
    new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
}

impl Vq {
    /// A queue just after reset: size at its maximum, no vector, disabled.
    pub fn new(max: u16) -> Vq {
        Vq {
            max,
            size: max,
            vector: NO_VECTOR,
            enabled: false,
            desc: 0,
            avail: 0,
            used: 0,
            last_avail: 0,
            used_idx: 0,
            packed: false,
            p_avail: (0, true),
            p_used: (0, true),
            p_prev: (0, true),
            outstanding: HashMap::new(),
            in_order: false,
            next_desc: 0,
        }
    }

    /// Enable the queue with the layout negotiated: every cursor at 0,
    /// wrap counters 1 (§2.8.1).
    pub fn enable(&mut self, packed: bool, in_order: bool) {
        self.enabled = true;
        self.packed = packed;
        self.in_order = in_order;
        self.next_desc = 0;
        self.last_avail = 0;
        self.used_idx = 0;
        self.p_avail = (0, true);
        self.p_used = (0, true);
        self.p_prev = (0, true);
        self.outstanding.clear();
    }

    /// `(pos, wrap)` moved on by `n` descriptors of a packed ring.
    fn step(&self, (pos, wrap): (u16, bool), n: u16) -> (u16, bool) {
        let next = u32::from(pos) + u32::from(n);
        let size = u32::from(self.size);
        if next >= size {
            (((next - size) % size) as u16, !wrap)
        } else {
            (next as u16, wrap)
        }
    }

    /// §2.7 (alignment table): the descriptor table 16-byte aligned, the
    /// avail ring 2, the used ring 4; and each part mapped whole. The
    /// violation, if any.
    pub fn layout_problem(&self, m: &Mappings) -> Option<String> {
        let n = u64::from(self.size);
        let parts = if self.packed {
            [
                ("descriptor ring (queue_desc)", self.desc, 16, 16 * n),
                ("driver event suppression (queue_driver)", self.avail, 4, 4),
                ("device event suppression (queue_device)", self.used, 4, 4),
            ]
        } else {
            [
                ("descriptor table (queue_desc)", self.desc, 16, 16 * n),
                ("avail ring (queue_driver)", self.avail, 2, 6 + 2 * n),
                ("used ring (queue_device)", self.used, 4, 6 + 8 * n),
            ]
        };
        let section = if self.packed { "§2.8.10.1" } else { "§2.7" };
        for (name, addr, align, len) in parts {
            if addr % align != 0 {
                return Some(format!(
                    "the {name} at {addr:#x} is not {align}-byte aligned (virtio 1.2 {section})"
                ));
            }
            let mut probe = vec![0u8; len as usize];
            if !m.dma_read(addr, &mut probe) {
                return Some(format!(
                    "the {name} at {addr:#x} ({len} bytes) is not mapped for the device"
                ));
            }
        }
        None
    }

    /// The driver's `avail.idx`.
    pub fn avail_idx(&self, m: &Mappings) -> Option<u16> {
        m.load_u16(self.avail + 2)
    }

    /// Take the next available chain, checking what the driver wrote:
    /// `avail.idx` at most `size` ahead, a head and every `next` inside the
    /// table, no loop (at most `size` descriptors), no indirect descriptor
    /// (VIRTIO_F_INDIRECT_DESC is not offered), and device-readable
    /// buffers before device-writable ones (§2.7.4.2).
    pub fn take(&mut self, m: &Mappings) -> Take {
        if self.packed {
            return self.take_packed(m);
        }
        let Some(idx) = self.avail_idx(m) else {
            return Take::Broken(format!("avail.idx at {:#x} is not mapped", self.avail + 2));
        };
        let ahead = idx.wrapping_sub(self.last_avail);
        if ahead == 0 {
            return Take::Empty;
        }
        if ahead > self.size {
            return Take::Broken(format!(
                "avail.idx {idx} is {ahead} entries past the device's {} in a queue of {} \
                 (§2.7.13.3: at most the queue size)",
                self.last_avail, self.size
            ));
        }
        let slot = u64::from(self.last_avail % self.size);
        let Some(head) = m.load_u16(self.avail + 4 + 2 * slot) else {
            return Take::Broken("an avail ring entry is not mapped".into());
        };
        if self.in_order && head != self.next_desc {
            return Take::Broken(format!(
                "chain head {head} is out of ring order: with VIRTIO_F_IN_ORDER the driver uses \
                 descriptors in ring order, and the next chain starts at descriptor {} (virtio \
                 1.2 §2.7.5)",
                self.next_desc
            ));
        }
        let mut chain = Chain {
            head,
            ..Chain::default()
        };
        let mut id = head;
        for _ in 0..self.size {
            if id >= self.size {
                return Take::Broken(format!(
                    "descriptor {id} named in chain {head} is outside the table of {} (§2.7.5)",
                    self.size
                ));
            }
            let mut d = [0u8; 16];
            if !m.dma_read(self.desc + 16 * u64::from(id), &mut d) {
                return Take::Broken(format!("descriptor {id} is not mapped"));
            }
            let addr = u64::from_le_bytes(d[0..8].try_into().expect("8 bytes"));
            let len = u32::from_le_bytes(d[8..12].try_into().expect("4 bytes"));
            let flags = u16::from_le_bytes([d[12], d[13]]);
            let next = u16::from_le_bytes([d[14], d[15]]);
            if flags & F_INDIRECT != 0 {
                return Take::Broken(format!(
                    "descriptor {id} is indirect, and VIRTIO_F_INDIRECT_DESC was not negotiated \
                     (§2.7.5.3.1)"
                ));
            }
            chain.ndesc += 1;
            if flags & F_WRITE != 0 {
                chain.writable.push((addr, len));
            } else if !chain.writable.is_empty() {
                return Take::Broken(format!(
                    "descriptor {id} of chain {head} is device-readable after a device-writable \
                     one (§2.7.4.2)"
                ));
            } else {
                chain.readable.push((addr, len));
            }
            if flags & F_NEXT == 0 {
                self.last_avail = self.last_avail.wrapping_add(1);
                if self.in_order {
                    self.next_desc = ((u32::from(self.next_desc) + u32::from(chain.ndesc))
                        % u32::from(self.size)) as u16;
                }
                return Take::Chain(chain);
            }
            if self.in_order && u32::from(next) != (u32::from(id) + 1) % u32::from(self.size) {
                return Take::Broken(format!(
                    "descriptor {id} chains to {next}: with VIRTIO_F_IN_ORDER the driver MUST \
                     set next to the following descriptor, 0 after the table's last (virtio \
                     1.2 §2.7.5)"
                ));
            }
            id = next;
        }
        Take::Broken(format!(
            "chain {head} is longer than the queue's {} descriptors (a loop, §2.7.5.2)",
            self.size
        ))
    }

    /// Packed descriptor `pos`: (addr, len, id, flags); `None` when not
    /// mapped.
    fn packed_desc(&self, m: &Mappings, pos: u16) -> Option<(u64, u32, u16, u16)> {
        let mut d = [0u8; 16];
        if !m.dma_read(self.desc + 16 * u64::from(pos), &mut d) {
            return None;
        }
        Some((
            u64::from_le_bytes(d[0..8].try_into().expect("8 bytes")),
            u32::from_le_bytes(d[8..12].try_into().expect("4 bytes")),
            u16::from_le_bytes([d[12], d[13]]),
            u16::from_le_bytes([d[14], d[15]]),
        ))
    }

    /// Whether `flags` mark a descriptor available with wrap counter `w`
    /// (§2.8.1: AVAIL = w, USED = !w).
    fn is_avail(flags: u16, w: bool) -> bool {
        (flags & F_AVAIL != 0) == w && (flags & F_USED != 0) != w
    }

    /// [`Vq::take`] on a packed ring (§2.8.6, §2.8.21).
    fn take_packed(&mut self, m: &Mappings) -> Take {
        let start = self.p_avail;
        let mut at = start;
        let mut chain = Chain::default();
        for i in 0..self.size {
            let Some((addr, len, id, flags)) = self.packed_desc(m, at.0) else {
                return Take::Broken(format!("descriptor {} is not mapped", at.0));
            };
            if !Self::is_avail(flags, at.1) {
                if i == 0 {
                    return Take::Empty;
                }
                return Take::Broken(format!(
                    "descriptor {} continues a chain whose first descriptor (at {}) is available,                      but is not available itself (flags {flags:#x}, wrap counter {}): the driver                      MUST NOT make the first descriptor in the list available before all                      subsequent descriptors comprising the list are made available (virtio 1.2                      §2.8, Scatter-Gather Support)",
                    at.0,
                    start.0,
                    u8::from(at.1)
                ));
            }
            if flags & F_INDIRECT != 0 {
                return Take::Broken(format!(
                    "descriptor {} is indirect, and VIRTIO_F_INDIRECT_DESC was not negotiated                      (§2.8, Indirect Descriptors)",
                    at.0
                ));
            }
            if flags & F_WRITE != 0 {
                chain.writable.push((addr, len));
            } else if !chain.writable.is_empty() {
                return Take::Broken(format!(
                    "descriptor {} is device-readable after a device-writable one: the driver                      MUST place any device-writable descriptor elements after any                      device-readable ones (§2.8, Scatter-Gather Support)",
                    at.0
                ));
            } else {
                chain.readable.push((addr, len));
            }
            chain.ndesc += 1;
            chain.last_pos = at.0;
            at = self.step(at, 1);
            if flags & F_NEXT == 0 {
                // The buffer id is the last descriptor's (§2.8.6).
                if self.outstanding.contains_key(&id) {
                    return Take::Broken(format!(
                        "buffer id {id} made available while the device still holds a buffer                          with that id: its used descriptor could not say which one it returns                          (§2.8)"
                    ));
                }
                chain.head = id;
                self.outstanding.insert(id, chain.ndesc);
                self.p_prev = start;
                self.p_avail = at;
                return Take::Chain(chain);
            }
        }
        Take::Broken(format!(
            "a chain from descriptor {} is longer than the queue's {} descriptors: a driver MUST              NOT create a descriptor list longer than the Queue Size (§2.8, Scatter-Gather              Support)",
            start.0, self.size
        ))
    }

    /// Give back the chain taken last (the frame did not fit): the device
    /// will take it again.
    pub fn untake(&mut self, chain: &Chain) {
        if self.packed {
            self.p_avail = self.p_prev;
            self.outstanding.remove(&chain.head);
            return;
        }
        self.last_avail = self.last_avail.wrapping_sub(1);
        if self.in_order {
            self.next_desc = ((u32::from(self.next_desc) + u32::from(self.size)
                - u32::from(chain.ndesc) % u32::from(self.size))
                % u32::from(self.size)) as u16;
        }
    }

    /// Complete `chains` (taken in order, at least one) as one batch, as a
    /// device with `VIRTIO_F_IN_ORDER` may: one used entry, for the last
    /// chain with `len` (split: written at the batch's last slot, the used
    /// index moved by the whole batch, §2.7.8; packed: one used descriptor
    /// at the used cursor naming the last buffer id, the cursor moved past
    /// every descriptor of the batch, §2.8). False when the ring is not
    /// mapped.
    pub fn put_used_batch(&mut self, m: &Mappings, chains: &[Chain], len: u32) -> bool {
        let Some(last) = chains.last() else {
            return true;
        };
        if self.packed {
            let (pos, w) = self.p_used;
            let at = self.desc + 16 * u64::from(pos);
            let ok = m.dma_write(at + 8, &len.to_le_bytes())
                && m.dma_write(at + 12, &last.head.to_le_bytes());
            let mut ndesc = 0u32;
            for c in chains {
                self.outstanding.remove(&c.head);
                ndesc += u32::from(c.ndesc.max(1));
            }
            let flags = if w { F_AVAIL | F_USED } else { 0 };
            // A batch holds at most the ring's descriptors: one wrap at most.
            self.p_used = self.step(self.p_used, ndesc.min(u32::from(self.size)) as u16);
            self.used_idx = self.used_idx.wrapping_add(1);
            return ok && m.store_u16(at + 14, flags);
        }
        let n = chains.len() as u16;
        let slot = u64::from(self.used_idx.wrapping_add(n - 1) % self.size);
        let mut e = [0u8; 8];
        e[..4].copy_from_slice(&u32::from(last.head).to_le_bytes());
        e[4..].copy_from_slice(&len.to_le_bytes());
        if !m.dma_write(self.used + 4 + 8 * slot, &e) {
            return false;
        }
        self.used_idx = self.used_idx.wrapping_add(n);
        m.store_u16(self.used + 2, self.used_idx)
    }

    /// Put used element (`id`, `len`) for `chain` and publish it: split,
    /// `used.idx` after the entry; packed, a used descriptor at the used
    /// cursor (id and length, then the flags: AVAIL = USED = the used wrap
    /// counter, or the inverse when `wrong_wrap`, a hostile device), the
    /// cursor moved by the chain's length. False when the ring is not
    /// mapped.
    pub fn put_used(
        &mut self,
        m: &Mappings,
        id: u32,
        len: u32,
        chain: &Chain,
        wrong_wrap: bool,
    ) -> bool {
        if self.packed {
            self.outstanding.remove(&chain.head);
            let (pos, w) = self.p_used;
            let w = w != wrong_wrap;
            let at = self.desc + 16 * u64::from(pos);
            let ok = m.dma_write(at + 8, &len.to_le_bytes())
                && m.dma_write(at + 12, &(id as u16).to_le_bytes());
            let flags = if w { F_AVAIL | F_USED } else { 0 };
            self.p_used = self.step(self.p_used, chain.ndesc.max(1));
            self.used_idx = self.used_idx.wrapping_add(1);
            return ok && m.store_u16(at + 14, flags);
        }
        let slot = u64::from(self.used_idx % self.size);
        let mut e = [0u8; 8];
        e[..4].copy_from_slice(&id.to_le_bytes());
        e[4..].copy_from_slice(&len.to_le_bytes());
        if !m.dma_write(self.used + 4 + 8 * slot, &e) {
            return false;
        }
        self.used_idx = self.used_idx.wrapping_add(1);
        m.store_u16(self.used + 2, self.used_idx)
    }

    /// With EVENT_IDX: `avail_event` (after the used ring) = the next entry
    /// the device will take, so the driver notifies once it adds one.
    pub fn publish_avail_event(&self, m: &Mappings) {
        if self.packed {
            // The device's event suppression: DESC at the next descriptor it
            // will read (§2.8.10): the driver notifies once it makes that one
            // available.
            let (pos, w) = self.p_avail;
            let off_wrap = pos | u16::from(w) << 15;
            let mut v = [0u8; 4];
            v[..2].copy_from_slice(&off_wrap.to_le_bytes());
            v[2..].copy_from_slice(&EVENT_DESC.to_le_bytes());
            m.dma_write(self.used, &v);
            return;
        }
        let at = self.used + 4 + 8 * u64::from(self.size);
        m.store_u16(at, self.last_avail);
    }

    /// Whether the driver wants an interrupt for used entries `old..used_idx`:
    /// with EVENT_IDX, `used_event` (after the avail ring) crossed
    /// (§2.7.10); without, unless `VIRTQ_AVAIL_F_NO_INTERRUPT` (§2.7.7).
    pub fn wants_interrupt(&self, m: &Mappings, event_idx: bool, old: u16) -> bool {
        if old == self.used_idx {
            return false;
        }
        if self.packed {
            // The driver's event suppression flags (§2.8.10): DISABLE none;
            // ENABLE, and DESC (which the driver does not use), one.
            return m
                .load_u16(self.avail + 2)
                .is_some_and(|f| f & 3 != EVENT_DISABLE);
        }
        if event_idx {
            let at = self.avail + 4 + 2 * u64::from(self.size);
            m.load_u16(at)
                .is_some_and(|ev| need_event(ev, self.used_idx, old))
        } else {
            m.load_u16(self.avail)
                .is_some_and(|f| f & AVAIL_F_NO_INTERRUPT == 0)
        }
    }

    /// Whether the next used entry would bring an interrupt (the driver
    /// armed the queue).
    pub fn armed(&self, m: &Mappings, event_idx: bool) -> bool {
        let mut next = self.clone();
        next.used_idx = self.used_idx.wrapping_add(1);
        next.wants_interrupt(m, event_idx, self.used_idx)
    }

    /// The IOVA ranges of the three parts (for the unmapping check).
    pub fn parts(&self) -> [(u64, u64); 3] {
        let n = u64::from(self.size);
        if self.packed {
            return [(self.desc, 16 * n), (self.avail, 4), (self.used, 4)];
        }
        [
            (self.desc, 16 * n),
            (self.avail, 6 + 2 * n),
            (self.used, 6 + 8 * n),
        ]
    }
}
