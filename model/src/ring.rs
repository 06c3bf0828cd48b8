//! A software device model that plays the NIC's side of the descriptor rings
//! the way the 82576 does (and QEMU's igb): it owns RX descriptors in
//! `[head, tail)`, writes frames into their buffers and writes back
//! DD/EOP/length/RSS hash; on a TX tail write it walks `[head, tail)`, gathers
//! each frame and writes back DD where RS asked for it.
//!
//! Used by the ring unit tests and the criterion benches; no hardware needed.
//! Its device side of a ring ([`DeviceRing`], [`deliver`], [`transmit`]) is
//! public so that register-level models (the driver's software 82599) reuse
//! it over their own IOMMU ([`DmaSpace`]).
//! It translates IOVAs only inside regions registered with [`SoftNic::add_region`]
//! and panics on any other address, as an IOMMU would fault.

use pollnic_hw::desc::{tx_writeback, RawDesc, RxCompletion, TxRequest, RXD_STAT_DD, RXD_STAT_EOP};
use pollnic_rings::descring::{DescRing, Doorbell};
use pollnic_rings::dma::{offset_in, DmaRegion};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// What the model does with transmitted frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxSink {
    /// Keep each frame's bytes for [`SoftNic::take_tx_frames`].
    Collect,
    /// Count frames and bytes only (benches).
    Discard,
}

/// Counters the model keeps, named like the hardware registers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModelStats {
    /// Frames written to RX descriptors (GPRC).
    pub gprc: u64,
    /// Frames that found no RX descriptor (RNBC).
    pub rnbc: u64,
    /// Frames sent (GPTC).
    pub gptc: u64,
    /// Bytes sent, no FCS.
    pub tx_bytes: u64,
    /// TX descriptors written back with DD.
    pub tx_writebacks: u64,
}

/// The device's side of one descriptor ring: where it is, how many
/// descriptors, and the head (the next descriptor the device uses). The tail
/// is the driver's register and is passed in by the caller.
pub struct DeviceRing {
    base: *mut RawDesc,
    count: u16,
    head: u16,
    /// The TX context slots (advanced context descriptors read so far).
    contexts: crate::offload::Contexts,
}

/// What a TX frame's first data descriptor asked, with the contexts the
/// device held when it reached the frame's last descriptor.
#[derive(Clone, Copy, Debug)]
pub struct TxMeta {
    /// The first data descriptor's `cmd_type_len` (DCMD: VLE, TSE).
    pub cmd_type_len: u32,
    /// Its `olinfo_status` (PAYLEN, POPTS, IDX, CC).
    pub olinfo_status: u32,
    /// The context slots.
    pub contexts: crate::offload::Contexts,
}

// SAFETY: a DeviceRing is a pointer into DMA memory that its creator promised
// stays valid (`DeviceRing::new`); all access is volatile, and the models
// keep each ring behind their own lock or RefCell, so moving it to another
// thread is no different from the device touching the memory from elsewhere.
unsafe impl Send for DeviceRing {}

impl DeviceRing {
    /// The ring of `count` descriptors at `base`, head 0.
    ///
    /// # Safety
    /// `base..base + count` descriptors must stay valid for reads and writes
    /// for as long as this `DeviceRing` is used (the driver may access them
    /// concurrently; only volatile accesses are made).
    pub unsafe fn new(base: *mut RawDesc, count: u16) -> Self {
        assert!(count > 0, "empty ring");
        DeviceRing {
            base,
            count,
            head: 0,
            contexts: [None; 8],
        }
    }
    /// Next descriptor the device will use (the head register, RDH/TDH).
    pub fn head(&self) -> u16 {
        self.head
    }
    /// Number of descriptors.
    pub fn count(&self) -> u16 {
        self.count
    }
    /// Descriptor `i` as the device reads it (for a model that looks ahead
    /// before it processes a ring, e.g. the software 82599).
    ///
    /// # Panics
    /// If `i` is not below [`DeviceRing::count`].
    pub fn descriptor(&self, i: u16) -> RawDesc {
        self.read(i)
    }
    /// Overwrite descriptor `i` as the device may (a write-back).
    ///
    /// # Panics
    /// If `i` is not below [`DeviceRing::count`].
    pub fn set_descriptor(&self, i: u16, d: RawDesc) {
        self.write(i, d)
    }
    /// Descriptors the device owns, `[head, tail)`.
    pub fn owned(&self, tail: u16) -> usize {
        (tail as usize + self.count as usize - self.head as usize) % self.count as usize
    }
    fn read(&self, i: u16) -> RawDesc {
        assert!(i < self.count);
        // SAFETY: `base` covers `count` live descriptors (the `new` contract)
        // and i < count; volatile because the driver side writes it too.
        unsafe { self.base.add(i as usize).read_volatile() }
    }
    fn write(&self, i: u16, d: RawDesc) {
        assert!(i < self.count);
        // SAFETY: as in `read`. Write `lo` before `hi` so DD (in `hi`) lands last.
        unsafe {
            let p = self.base.add(i as usize);
            std::ptr::addr_of_mut!((*p).lo).write_volatile(d.lo);
            std::ptr::addr_of_mut!((*p).hi).write_volatile(d.hi);
        }
    }
    fn advance(&mut self) {
        self.head = if self.head + 1 == self.count {
            0
        } else {
            self.head + 1
        };
    }
}

/// The IO address space a model's DMA goes through: an IOMMU.
///
/// # Safety
/// `translate` may return `Some(p)` only when `p..p + len` is memory of this
/// process valid for reads and writes for as long as the `&self` borrow
/// that produced it lasts.
pub unsafe trait DmaSpace {
    /// The process address of `iova..iova + len`, or `None` (an IOMMU fault).
    fn translate(&self, iova: u64, len: usize) -> Option<*mut u8>;
}

/// What [`deliver`] did with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Written into this many descriptors.
    Done(usize),
    /// Too few free descriptors: nothing written.
    NoDescriptor,
    /// A buffer address did not translate (IOMMU fault): nothing more written.
    Fault(u64),
    /// The descriptor at this index, which the tail gave the device, still
    /// holds a write-back (DD set in its `hi` word, where read format has
    /// the header buffer address with bit 0 clear): the driver moved the
    /// tail past the descriptors it had re-armed. A real NIC would DMA to
    /// whatever the write-back left in the address field (an IOMMU fault
    /// at best); the model writes nothing more.
    NotArmed(u16),
}

/// Write `frame` into the ring from its head, as the 82576 and 82599 do
/// with advanced one-buffer descriptors: as many `buf_size`-byte chunks as
/// it needs, EOP on the last, each written back with DD, its length,
/// `rss_hash` and `pkt_info`; the last one also with `extra`: status bits
/// (the offloads' VP, IPCS, L4CS, UDPCS and checksum errors) and the
/// stripped VLAN tag.
#[allow(clippy::too_many_arguments)]
pub fn deliver(
    ring: &mut DeviceRing,
    tail: u16,
    dma: &dyn DmaSpace,
    buf_size: usize,
    frame: &[u8],
    rss_hash: u32,
    pkt_info: u16,
    extra: (u32, u16),
) -> Delivery {
    let needed = frame.len().div_ceil(buf_size).max(1);
    if ring.owned(tail) < needed {
        return Delivery::NoDescriptor;
    }
    let chunks: Vec<&[u8]> = if frame.is_empty() {
        vec![frame]
    } else {
        frame.chunks(buf_size).collect()
    };
    let last = chunks.len() - 1;
    for (k, chunk) in chunks.into_iter().enumerate() {
        let d = ring.read(ring.head);
        if d.hi as u32 & RXD_STAT_DD != 0 {
            return Delivery::NotArmed(ring.head);
        }
        let Some(dst) = dma.translate(d.lo, chunk.len()) else {
            return Delivery::Fault(d.lo);
        };
        // SAFETY: `dst..dst+len` is valid memory (the `DmaSpace` contract,
        // `dma` still borrowed), and the descriptor at head is owned by the
        // device side, so the driver does not touch its buffer until DD is set.
        unsafe { std::ptr::copy_nonoverlapping(chunk.as_ptr(), dst, chunk.len()) };
        let status = RXD_STAT_DD | if k == last { RXD_STAT_EOP | extra.0 } else { 0 };
        let wb = RxCompletion {
            len: chunk.len() as u16,
            status_error: status,
            rss_hash,
            pkt_info,
            vlan: if k == last { extra.1 } else { 0 },
        };
        ring.write(ring.head, wb.encode());
        ring.advance();
    }
    Delivery::Done(needed)
}

/// What [`transmit`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxWork {
    /// Frames completed (EOP seen).
    pub frames: u64,
    /// Data bytes read.
    pub bytes: u64,
    /// Descriptors written back with DD (RS was set).
    pub writebacks: u64,
    /// The IOVA of a buffer that did not translate; the walk stopped there.
    pub fault: Option<u64>,
}

/// Walk `[head, tail)` as the device's transmit DMA does: gather each data
/// descriptor's bytes into `partial` (when `collect`), hand each finished
/// frame (EOP) to `sent`, and write back DD where RS asked for it.
pub fn transmit(
    ring: &mut DeviceRing,
    tail: u16,
    dma: &dyn DmaSpace,
    collect: bool,
    partial: &mut Vec<u8>,
    first: &mut Option<(u32, u32)>,
    sent: &mut dyn FnMut(Vec<u8>, TxMeta),
) -> TxWork {
    let mut w = TxWork::default();
    while ring.head != tail {
        let d = ring.read(ring.head);
        let req = TxRequest::decode(d);
        if req.is_adv_ctx {
            let (ctx, idx) = pollnic_hw::offload::TxContext::decode(d);
            ring.contexts[idx as usize & 7] = Some(ctx);
        }
        if req.is_adv_data && first.is_none() {
            *first = Some((req.cmd_type_len, req.olinfo_status));
        }
        if req.is_adv_data && req.len > 0 {
            let Some(src) = dma.translate(req.buf_iova, req.len as usize) else {
                w.fault = Some(req.buf_iova);
                return w;
            };
            if collect {
                // SAFETY: `src..src+len` is valid memory (the `DmaSpace`
                // contract); the driver handed this buffer to the device and
                // will not touch it until DD.
                let bytes = unsafe { std::slice::from_raw_parts(src, req.len as usize) };
                partial.extend_from_slice(bytes);
            }
            w.bytes += req.len as u64;
        }
        if req.eop && !req.is_adv_ctx {
            w.frames += 1;
            let (cmd_type_len, olinfo_status) = first.take().unwrap_or_default();
            sent(
                std::mem::take(partial),
                TxMeta {
                    cmd_type_len,
                    olinfo_status,
                    contexts: ring.contexts,
                },
            );
        }
        if req.rs {
            ring.write(ring.head, tx_writeback(d));
            w.writebacks += 1;
        }
        ring.advance();
    }
    w
}

/// A ring of the [`SoftNic`]: the device side and the tail register.
struct Ring {
    dev: DeviceRing,
    /// The tail register, written by the driver's [`SoftDoorbell`].
    tail: Rc<Cell<u16>>,
}

impl Ring {
    /// The tail register as the device reads it. A tail beyond the ring is
    /// a driver bug, caught here (on the device side: the register write
    /// itself is one store, as an MMIO write is).
    fn tail(&self) -> u16 {
        let t = self.tail.get();
        assert!(t < self.dev.count(), "tail register beyond the ring");
        t
    }
}

/// The SoftNic's regions, as an IOMMU that faults loudly.
struct Regions<'a>(&'a [(u64, *mut u8, usize)]);

impl Regions<'_> {
    /// The process address of `iova..iova + len`, when a region holds all
    /// of it ([`offset_in`], the containment test both models share).
    fn lookup(&self, iova: u64, len: usize) -> Option<*mut u8> {
        self.0.iter().find_map(|&(base, va, size)| {
            offset_in(base, size as u64, iova, len as u64).map(|off| va.wrapping_add(off as usize))
        })
    }
}

// SAFETY: a region is registered from a live `DmaRegion` that the caller of
// `SoftNic::add_region` promised to keep alive while the model runs, so a
// translated range inside it (`lookup`) is valid memory.
unsafe impl DmaSpace for Regions<'_> {
    fn translate(&self, iova: u64, len: usize) -> Option<*mut u8> {
        match self.lookup(iova, len) {
            Some(p) => Some(p),
            None => {
                panic!("device model: DMA to unmapped IOVA {iova:#x}+{len} (an IOMMU fault)")
            }
        }
    }
}

struct State {
    deferred_tx: bool,
    rx: Option<Ring>,
    rx_buf_size: usize,
    tx: Option<Ring>,
    regions: Vec<(u64, *mut u8, usize)>,
    sink: TxSink,
    tx_frames: Vec<Vec<u8>>,
    partial: Vec<u8>,
    stats: ModelStats,
}

impl State {
    fn process_tx(&mut self) {
        let Some(mut ring) = self.tx.take() else {
            return;
        };
        let collect = self.sink == TxSink::Collect;
        let frames = &mut self.tx_frames;
        let tail = ring.tail();
        let w = transmit(
            &mut ring.dev,
            tail,
            &Regions(&self.regions),
            collect,
            &mut self.partial,
            &mut None,
            &mut |f, _| {
                if collect {
                    frames.push(f)
                }
            },
        );
        self.stats.gptc += w.frames;
        self.stats.tx_bytes += w.bytes;
        self.stats.tx_writebacks += w.writebacks;
        self.tx = Some(ring);
    }
}

/// The software NIC. Cheap to clone (shared state); not `Send`.
#[derive(Clone)]
pub struct SoftNic {
    state: Rc<RefCell<State>>,
}

impl Default for SoftNic {
    fn default() -> Self {
        Self::new(TxSink::Collect)
    }
}

/// The model's tail register for one ring: one store, as an MMIO write is
/// (a TX doorbell on a non-deferred model also processes the ring, as QEMU's
/// igb does inside the TDT write).
pub struct SoftDoorbell {
    tail: Rc<Cell<u16>>,
    /// Set for the TX doorbell of a model that sends inside the tail write.
    process_tx: Option<Rc<RefCell<State>>>,
}

impl Doorbell for SoftDoorbell {
    #[inline]
    fn ring(&mut self, tail: u16) {
        self.tail.set(tail);
        if let Some(s) = &self.process_tx {
            s.borrow_mut().process_tx();
        }
    }
}

impl SoftNic {
    /// A model with no rings attached.
    pub fn new(sink: TxSink) -> Self {
        SoftNic {
            state: Rc::new(RefCell::new(State {
                deferred_tx: false,
                rx: None,
                rx_buf_size: 2048,
                tx: None,
                regions: Vec::new(),
                sink,
                tx_frames: Vec::new(),
                partial: Vec::new(),
                stats: ModelStats::default(),
            })),
        }
    }

    /// A model that processes TX descriptors only when [`SoftNic::process_tx`]
    /// is called, not inside the tail write: benches use it to time the
    /// driver's side alone.
    pub fn deferred(sink: TxSink) -> Self {
        let nic = Self::new(sink);
        nic.state.borrow_mut().deferred_tx = true;
        nic
    }

    /// Process every TX descriptor up to the tail (send, write back DD).
    pub fn process_tx(&self) {
        self.state.borrow_mut().process_tx();
    }

    /// Let the model DMA into `region` (a mempool's buffers): the model
    /// keeps its address, not a borrow.
    ///
    /// # Safety
    /// `region` must stay alive (not dropped) for as long as this model (or
    /// any clone of it, or a [`SoftDoorbell`] it handed out) may still
    /// receive or transmit: the model reads and writes the region's memory
    /// through the address it keeps.
    pub unsafe fn add_region(&self, region: &DmaRegion) {
        self.state
            .borrow_mut()
            .regions
            .push((region.iova(), region.va(), region.len()));
    }

    /// Attach an RX ring with `buf_size`-byte buffers (SRRCTL.BSIZEPKT);
    /// head = tail = 0. The model keeps the ring's address, not a borrow.
    ///
    /// # Safety
    /// The descriptor memory of `desc` must stay alive for as long as this
    /// model (or a clone, or the returned doorbell) may still be used: the
    /// `DescRing` may be moved (into an `RxRing`, whose memory does not
    /// move with it) but not dropped before.
    pub unsafe fn attach_rx(&self, desc: &DescRing, buf_size: usize) -> SoftDoorbell {
        let tail = Rc::new(Cell::new(0));
        let mut s = self.state.borrow_mut();
        s.rx = Some(Ring {
            // SAFETY: `count` descriptors at `as_ptr()` are the ring's DMA
            // memory, which the caller keeps alive while the model is used
            // (this function's contract).
            dev: unsafe { DeviceRing::new(desc.as_ptr(), desc.count()) },
            tail: Rc::clone(&tail),
        });
        s.rx_buf_size = buf_size;
        SoftDoorbell {
            tail,
            process_tx: None,
        }
    }

    /// Attach a TX ring; head = tail = 0. The model keeps the ring's
    /// address, not a borrow.
    ///
    /// # Safety
    /// As [`SoftNic::attach_rx`]: the descriptor memory of `desc` must
    /// outlive every use of this model and of the returned doorbell.
    pub unsafe fn attach_tx(&self, desc: &DescRing) -> SoftDoorbell {
        let tail = Rc::new(Cell::new(0));
        let mut s = self.state.borrow_mut();
        s.tx = Some(Ring {
            // SAFETY: as in `attach_rx` (this function's contract).
            dev: unsafe { DeviceRing::new(desc.as_ptr(), desc.count()) },
            tail: Rc::clone(&tail),
        });
        SoftDoorbell {
            tail,
            // Like QEMU's igb: TX is processed synchronously in the TDT
            // write, unless deferred (benches time the driver alone).
            process_tx: (!s.deferred_tx).then(|| Rc::clone(&self.state)),
        }
    }

    /// Deliver one frame as the 82576 would: into as many descriptors as its
    /// length needs (EOP on the last), with `rss_hash` written back. Returns
    /// false (and counts RNBC) when the ring has too few free descriptors.
    pub fn receive(&self, frame: &[u8], rss_hash: u32) -> bool {
        let mut s = self.state.borrow_mut();
        let s = &mut *s;
        let buf = s.rx_buf_size;
        let r = s.rx.as_mut().expect("rx ring attached");
        let tail = r.tail();
        match deliver(
            &mut r.dev,
            tail,
            &Regions(&s.regions),
            buf,
            frame,
            rss_hash,
            0,
            (0, 0),
        ) {
            Delivery::Done(_) => {
                s.stats.gprc += 1;
                true
            }
            Delivery::NoDescriptor => {
                s.stats.rnbc += 1;
                false
            }
            Delivery::Fault(iova) => unreachable!("Regions panics on fault {iova:#x}"),
            Delivery::NotArmed(i) => panic!(
                "device model: RX descriptor {i} was given to the device (tail {tail}) but still \
                 holds a write-back (DD set): the driver moved RDT past the descriptors it re-armed"
            ),
        }
    }

    /// Write back an arbitrary (possibly hostile) completion into the next RX
    /// descriptor without touching its buffer: for testing that the driver
    /// does not trust lengths and status the device writes. Returns false when
    /// no descriptor is free.
    pub fn inject_rx_writeback(&self, wb: RxCompletion) -> bool {
        let mut s = self.state.borrow_mut();
        let r = s.rx.as_mut().expect("rx ring attached");
        if r.dev.owned(r.tail()) == 0 {
            return false;
        }
        r.dev.write(r.dev.head, wb.encode());
        r.dev.advance();
        true
    }

    /// Overwrite RX descriptor `index` with `wb`, wherever the device's head
    /// is: a store of the device that software sees late or torn (QEMU's igb
    /// writes a write-back, then its DD on its own; a guest vCPU has seen the
    /// second store first). For tests only.
    pub fn rewrite_rx_writeback(&self, index: u16, wb: RxCompletion) {
        let mut s = self.state.borrow_mut();
        let r = s.rx.as_mut().expect("rx ring attached");
        r.dev.write(index, wb.encode());
    }

    /// Frames transmitted since the last call (only with [`TxSink::Collect`]).
    pub fn take_tx_frames(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.state.borrow_mut().tx_frames)
    }

    /// Counters.
    pub fn stats(&self) -> ModelStats {
        self.state.borrow().stats
    }

    /// The first RX descriptor the device owns (in `[head, tail)`) that is
    /// not in read format: DD still set from a write-back, or a buffer
    /// address outside every registered region. `None` when the tail gave the
    /// device only re-armed descriptors.
    pub fn rx_owned_unarmed(&self) -> Option<u16> {
        let s = self.state.borrow();
        let r = s.rx.as_ref().expect("rx ring attached");
        let (count, tail) = (r.dev.count(), r.tail());
        let mut i = r.dev.head;
        while i != tail {
            let d = r.dev.read(i);
            let mapped = s
                .regions
                .iter()
                .any(|&(base, _, size)| offset_in(base, size as u64, d.lo, 1).is_some());
            if d.hi as u32 & RXD_STAT_DD != 0 || !mapped {
                return Some(i);
            }
            i = if i + 1 == count { 0 } else { i + 1 };
        }
        None
    }

    /// RX descriptors currently owned by the device side.
    pub fn rx_free_descriptors(&self) -> usize {
        let s = self.state.borrow();
        let r = s.rx.as_ref().expect("rx ring attached");
        r.dev.owned(r.tail())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A range that wraps past `u64::MAX` must fault, not land in a region
    /// at the bottom of the IO address space (`iova + len` wrapped to a
    /// small number passed an unchecked compare in release builds).
    #[test]
    fn a_range_wrapping_past_the_top_faults() {
        let mut mem = [0u8; 64];
        let regions = [(0x1000u64, mem.as_mut_ptr(), mem.len())];
        let r = Regions(&regions);
        assert!(r.lookup(0x1000, 64).is_some());
        assert!(r.lookup(0x1000, 65).is_none());
        assert!(r.lookup(u64::MAX - 7, 0x1010).is_none());
        assert!(r.lookup(u64::MAX, usize::MAX).is_none());
        let top = [(u64::MAX - 63, mem.as_mut_ptr(), mem.len())];
        let r = Regions(&top);
        assert!(r.lookup(u64::MAX - 63, 64).is_some());
        assert!(r.lookup(u64::MAX - 3, 8).is_none());
    }
}
