//! The device's side of one split virtqueue (virtio 1.2 §2.7), over the
//! model's IOMMU: every ring field and buffer is reached by IOVA through
//! [`Mappings`], so a bad address is a fault the model reports, never a
//! memory access. What the driver writes (the avail ring, the descriptor
//! table) is read as a device reads it and checked against the spec's
//! rules; what the device writes (the used ring, `avail_event`) is written
//! as QEMU's `virtqueue_push` and `virtio_queue_set_notification` do.

use crate::iommu::Mappings;

/// `VIRTQ_DESC_F_NEXT`.
const F_NEXT: u16 = 1;
/// `VIRTQ_DESC_F_WRITE`.
const F_WRITE: u16 = 2;
/// `VIRTQ_DESC_F_INDIRECT`.
const F_INDIRECT: u16 = 4;
/// `VIRTQ_AVAIL_F_NO_INTERRUPT`.
const AVAIL_F_NO_INTERRUPT: u16 = 1;

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
    /// The device's used index (published to `used.idx`).
    pub used_idx: u16,
}

/// A descriptor chain the device took: its head and its buffers.
#[derive(Debug, Default)]
pub(crate) struct Chain {
    pub head: u16,
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
        }
    }

    /// §2.7 (alignment table): the descriptor table 16-byte aligned, the
    /// avail ring 2, the used ring 4; and each part mapped whole. The
    /// violation, if any.
    pub fn layout_problem(&self, m: &Mappings) -> Option<String> {
        let n = u64::from(self.size);
        for (name, addr, align, len) in [
            ("descriptor table (queue_desc)", self.desc, 16, 16 * n),
            ("avail ring (queue_driver)", self.avail, 2, 6 + 2 * n),
            ("used ring (queue_device)", self.used, 4, 6 + 8 * n),
        ] {
            if addr % align != 0 {
                return Some(format!(
                    "the {name} at {addr:#x} is not {align}-byte aligned (virtio 1.2 §2.7)"
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
                return Take::Chain(chain);
            }
            id = next;
        }
        Take::Broken(format!(
            "chain {head} is longer than the queue's {} descriptors (a loop, §2.7.5.2)",
            self.size
        ))
    }

    /// Give back the chain taken last (the frame did not fit): the device
    /// will take it again.
    pub fn untake(&mut self) {
        self.last_avail = self.last_avail.wrapping_sub(1);
    }

    /// Put used element (`id`, `len`) and publish `used.idx` after it.
    /// False when the used ring is not mapped.
    pub fn put_used(&mut self, m: &Mappings, id: u32, len: u32) -> bool {
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
        [
            (self.desc, 16 * n),
            (self.avail, 6 + 2 * n),
            (self.used, 6 + 8 * n),
        ]
    }
}
