//! A software device model that plays the NIC's side of the descriptor rings
//! the way the 82576 does (and QEMU's igb): it owns RX descriptors in
//! `[head, tail)`, writes frames into their buffers and writes back
//! DD/EOP/length/RSS hash; on a TX tail write it walks `[head, tail)`, gathers
//! each frame and writes back DD where RS asked for it.
//!
//! Used by the ring unit tests and the criterion benches; no hardware needed.
//! It translates IOVAs only inside regions registered with [`SoftNic::add_region`]
//! and panics on any other address, as an IOMMU would fault.

use crate::descring::{DescRing, Doorbell};
use crate::dma::DmaRegion;
use pollnic_hw::desc::{tx_writeback, RawDesc, RxCompletion, TxRequest, RXD_STAT_DD, RXD_STAT_EOP};
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

struct Ring {
    base: *mut RawDesc,
    count: u16,
    head: u16,
    /// The tail register, written by the driver's [`SoftDoorbell`].
    tail: Rc<Cell<u16>>,
}

impl Ring {
    /// The tail register as the device reads it. A tail beyond the ring is
    /// a driver bug, caught here (on the device side, as the register write
    /// itself is one store).
    fn tail(&self) -> u16 {
        let t = self.tail.get();
        assert!(t < self.count, "tail register beyond the ring");
        t
    }
    fn read(&self, i: u16) -> RawDesc {
        assert!(i < self.count);
        // SAFETY: `base` points at a live DescRing of `count` descriptors (the
        // ring that was attached; tests keep it alive while the model runs)
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
    fn translate(&self, iova: u64, len: usize) -> *mut u8 {
        for &(base, va, size) in &self.regions {
            if iova >= base && iova + len as u64 <= base + size as u64 {
                return va.wrapping_add((iova - base) as usize);
            }
        }
        panic!("device model: DMA to unmapped IOVA {iova:#x}+{len} (an IOMMU fault)");
    }

    fn process_tx(&mut self) {
        let Some(mut ring) = self.tx.take() else {
            return;
        };
        while ring.head != ring.tail() {
            let d = ring.read(ring.head);
            let req = TxRequest::decode(d);
            if req.is_adv_data && req.len > 0 {
                let src = self.translate(req.buf_iova, req.len as usize);
                if self.sink == TxSink::Collect {
                    // SAFETY: `src..src+len` lies inside a registered, live DMA
                    // region (checked by `translate`); the driver handed this
                    // buffer to the device and will not touch it until DD.
                    let bytes = unsafe { std::slice::from_raw_parts(src, req.len as usize) };
                    self.partial.extend_from_slice(bytes);
                }
                self.stats.tx_bytes += req.len as u64;
            }
            if req.eop {
                self.stats.gptc += 1;
                if self.sink == TxSink::Collect {
                    self.tx_frames.push(std::mem::take(&mut self.partial));
                }
            }
            if req.rs {
                ring.write(ring.head, tx_writeback(d));
                self.stats.tx_writebacks += 1;
            }
            ring.advance();
        }
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

    /// Let the model DMA into `region` (a mempool's buffers).
    pub fn add_region(&self, region: &DmaRegion) {
        self.state
            .borrow_mut()
            .regions
            .push((region.iova(), region.va(), region.len()));
    }

    /// Attach an RX ring with `buf_size`-byte buffers (SRRCTL.BSIZEPKT);
    /// head = tail = 0. The ring must outlive its use through the model.
    pub fn attach_rx(&self, desc: &DescRing, buf_size: usize) -> SoftDoorbell {
        let tail = Rc::new(Cell::new(0));
        let mut s = self.state.borrow_mut();
        s.rx = Some(Ring {
            base: desc.as_ptr(),
            count: desc.count(),
            head: 0,
            tail: Rc::clone(&tail),
        });
        s.rx_buf_size = buf_size;
        SoftDoorbell {
            tail,
            process_tx: None,
        }
    }

    /// Attach a TX ring; head = tail = 0.
    pub fn attach_tx(&self, desc: &DescRing) -> SoftDoorbell {
        let tail = Rc::new(Cell::new(0));
        let mut s = self.state.borrow_mut();
        s.tx = Some(Ring {
            base: desc.as_ptr(),
            count: desc.count(),
            head: 0,
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
        let buf = s.rx_buf_size;
        let needed = frame.len().div_ceil(buf).max(1);
        let free = {
            let r = s.rx.as_ref().expect("rx ring attached");
            (r.tail() as usize + r.count as usize - r.head as usize) % r.count as usize
        };
        if free < needed {
            s.stats.rnbc += 1;
            return false;
        }
        let chunks: Vec<&[u8]> = if frame.is_empty() {
            vec![frame]
        } else {
            frame.chunks(buf).collect()
        };
        let last = chunks.len() - 1;
        for (k, chunk) in chunks.into_iter().enumerate() {
            let head = s.rx.as_ref().unwrap().head;
            let d = s.rx.as_ref().unwrap().read(head);
            let dst = s.translate(d.lo, chunk.len());
            // SAFETY: `dst..dst+len` is inside a registered live region
            // (`translate`), and the descriptor at head is owned by the device
            // side, so the driver does not touch its buffer until DD is set.
            unsafe { std::ptr::copy_nonoverlapping(chunk.as_ptr(), dst, chunk.len()) };
            let status = RXD_STAT_DD | if k == last { RXD_STAT_EOP } else { 0 };
            let wb = RxCompletion {
                len: chunk.len() as u16,
                status_error: status,
                rss_hash,
                pkt_info: 0,
                vlan: 0,
            };
            let r = s.rx.as_mut().unwrap();
            r.write(head, wb.encode());
            r.advance();
        }
        s.stats.gprc += 1;
        true
    }

    /// Write back an arbitrary (possibly hostile) completion into the next RX
    /// descriptor without touching its buffer: for testing that the driver
    /// does not trust lengths and status the device writes. Returns false when
    /// no descriptor is free.
    pub fn inject_rx_writeback(&self, wb: RxCompletion) -> bool {
        let mut s = self.state.borrow_mut();
        let r = s.rx.as_mut().expect("rx ring attached");
        if r.head == r.tail() {
            return false;
        }
        r.write(r.head, wb.encode());
        r.advance();
        true
    }

    /// Frames transmitted since the last call (only with [`TxSink::Collect`]).
    pub fn take_tx_frames(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.state.borrow_mut().tx_frames)
    }

    /// Counters.
    pub fn stats(&self) -> ModelStats {
        self.state.borrow().stats
    }

    /// RX descriptors currently owned by the device side.
    pub fn rx_free_descriptors(&self) -> usize {
        let s = self.state.borrow();
        let r = s.rx.as_ref().expect("rx ring attached");
        (r.tail() as usize + r.count as usize - r.head as usize) % r.count as usize
    }
}
