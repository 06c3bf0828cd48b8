//! The hostile-device harness: the RX and TX rings, their mempool, the
//! queue's `PoolCache` and the application's `Packet`s, driven against a
//! device model that writes whatever the input says into the descriptor
//! rings.
//!
//! One input is a sequence of steps decoded from bytes (see [`run`]). Device
//! steps write RX write-backs and TX write-backs: DD on descriptors software
//! never gave the device, lengths of 0, above the buffer size and above 16
//! bits (into the VLAN field), missing EOP and long chains without EOP, error
//! bits, one descriptor completed twice, TX DD on descriptors never
//! submitted, garbage RSS hashes and raw 128-bit garbage. Application steps
//! call `rx_burst`, `tx_burst` (with the ring's cache or another one, with
//! packets of another mempool, with refused zero-length packets), `reclaim`,
//! allocate, free in bulk, drop packets here and on another thread (which
//! runs concurrently with the next step), and tear the rings down and build
//! them again.
//!
//! After every step (once the other thread is done):
//! - nothing panicked (a panic is the fuzzer's crash);
//! - every buffer index of both mempools is accounted for exactly once:
//!   shared free list + caches + armed in the RX ring + in flight in the TX
//!   ring + held by the application = capacity; and the pools' reference
//!   counts equal handles + packets + TX descriptors in flight;
//! - every `Packet` exposes exactly bytes of its own buffer: its data starts
//!   at its buffer and its length is at most the buffer size;
//! - while the device has only behaved (no hostile write yet), every frame
//!   comes out in order with the length, hash and bytes the device wrote, and
//!   every TX descriptor the device reads is the next frame handed to
//!   `tx_burst`.
//!
//! This file is shared: `fuzz/fuzz_targets/rings.rs` (cargo-fuzz, libFuzzer
//! with AddressSanitizer) and `rings/tests/hostile_device.rs` (stable, replays
//! the committed seed corpus and pseudo-random inputs) both include it.

#![allow(dead_code)]

use pollnic_hw::desc::{
    RawDesc, RxCompletion, TxRequest, RXD_ERR_IPE, RXD_ERR_L4E, RXD_ERR_RXE, RXD_STAT_DD,
    RXD_STAT_EOP, RXD_STAT_VP, TXD_STAT_DD,
};
use pollnic_rings::{
    DataPath, DescRing, Doorbell, IdentityMapper, Mempool, Packet, PageSize, PoolCache, RingError,
    RxRing, TxRing,
};
use std::cell::Cell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex, OnceLock};

/// Print each step when `HOSTILE_TRACE` is set (replaying a crash by hand).
fn trace() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("HOSTILE_TRACE").is_some())
}

thread_local! {
    /// The burst loops the rings of this thread's current input run.
    static PATH: Cell<DataPath> = const { Cell::new(DataPath::Scalar) };
}

/// Steps per input at most (keeps one execution short).
const MAX_STEPS: usize = 256;

/// Reads the input; past its end every read is 0.
struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn u64(&mut self) -> u64 {
        (self.u32() as u64) | ((self.u32() as u64) << 32)
    }
    fn done(&self) -> bool {
        self.pos >= self.data.len()
    }
}

/// A tail register (RDT/TDT): remembers the last value written and checks it
/// is a descriptor index.
struct Tail {
    value: Rc<Cell<u16>>,
    count: u16,
}

impl Doorbell for Tail {
    fn ring(&mut self, tail: u16) {
        assert!(
            tail < self.count,
            "tail register written beyond the ring: {tail} >= {}",
            self.count
        );
        self.value.set(tail);
    }
}

/// Work for the other thread; `ack` is told when it is done.
enum Job {
    /// Drop these packets.
    Drop(Vec<Packet>),
    /// Allocate from the shared list and drop again, `n` times.
    Churn(Mempool, u32),
}

/// A job and where to acknowledge it.
type JobMsg = (Job, Sender<()>);

/// Receive from `rx`, spinning a while before sleeping: a sleeping thread
/// costs two context switches per hand-over, which would dominate a run.
fn recv_spinning<T>(rx: &Receiver<T>) -> Option<T> {
    for _ in 0..200 {
        match rx.try_recv() {
            Ok(v) => return Some(v),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) => std::thread::yield_now(),
        }
    }
    rx.recv().ok()
}

/// The other thread: one for the whole process, fed through a channel.
fn other_thread() -> &'static Mutex<Sender<JobMsg>> {
    static TX: OnceLock<Mutex<Sender<JobMsg>>> = OnceLock::new();
    TX.get_or_init(|| {
        let (tx, rx) = channel::<JobMsg>();
        std::thread::Builder::new()
            .name("packet-dropper".into())
            .spawn(move || {
                while let Some((job, ack)) = recv_spinning(&rx) {
                    match job {
                        Job::Drop(pkts) => drop(pkts),
                        Job::Churn(pool, n) => {
                            let mut held = Vec::new();
                            for k in 0..n {
                                if let Some(p) = pool.alloc() {
                                    held.push(p);
                                }
                                if k % 3 == 2 {
                                    held.clear();
                                }
                            }
                            drop(held);
                            drop(pool);
                        }
                    }
                    let _ = ack.send(());
                }
            })
            .expect("spawning the packet-dropper thread");
        Mutex::new(tx)
    })
}

/// A pool of `count` buffers of `buf_size` bytes, full, its free list in
/// index order. Pools are kept per thread between inputs (mapping and
/// unmapping them was nine tenths of an execution's time); every input
/// starts from the same state, so a crash replays.
fn take_pool(count: u32, buf_size: usize) -> Mempool {
    let cached = POOLS.with(|p| {
        let mut p = p.borrow_mut();
        let at = p
            .iter()
            .position(|q| q.capacity() == count && q.buf_size() == buf_size.div_ceil(128) * 128)?;
        Some(p.swap_remove(at))
    });
    let pool = cached.unwrap_or_else(|| {
        Mempool::new(count, buf_size, PageSize::Small4K, Arc::new(IdentityMapper))
            .expect("a mempool in 4 KiB pages")
    });
    // Index order on the free list, whatever order the last input left.
    let mut all: Vec<Packet> = std::iter::from_fn(|| pool.alloc()).collect();
    assert_eq!(all.len(), count as usize, "a cached pool is full");
    all.sort_by_key(|p| p.buf_index());
    drop(all);
    pool
}

/// Keep a pool that is full again for the next input.
fn give_back(pool: Mempool) {
    assert_eq!(pool.references(), 1, "only this handle is left");
    assert_eq!(
        pool.free_indices().len(),
        pool.capacity() as usize,
        "the pool is full"
    );
    POOLS.with(|p| p.borrow_mut().push(pool));
}

thread_local! {
    static POOLS: std::cell::RefCell<Vec<Mempool>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// What the device does with its own view of a descriptor ring.
struct DevRing {
    head: u16,
    tail: Rc<Cell<u16>>,
    count: u16,
}

impl DevRing {
    fn free(&self) -> u16 {
        (self.tail.get().wrapping_sub(self.head)) & (self.count - 1)
    }
    fn advance(&mut self) {
        self.head = (self.head + 1) & (self.count - 1);
    }
}

/// Volatile descriptor access as the device does it (DMA), `lo` then `hi`.
fn dev_write(ring: &DescRing, i: u16, d: RawDesc) {
    let p = ring.as_ptr().wrapping_add((i & ring.mask()) as usize);
    // SAFETY: `i & mask < count` and the ring holds `count` descriptors; the
    // ring's memory is never behind a Rust reference (the rings use volatile
    // accesses through raw pointers), so this models a device's DMA write.
    unsafe {
        std::ptr::addr_of_mut!((*p).lo).write_volatile(d.lo);
        std::ptr::addr_of_mut!((*p).hi).write_volatile(d.hi);
    }
}

fn dev_read(ring: &DescRing, i: u16) -> RawDesc {
    let p = ring.as_ptr().wrapping_add((i & ring.mask()) as usize);
    // SAFETY: as in `dev_write`.
    unsafe { p.read_volatile() }
}

/// A frame the well-behaved device wrote: what `rx_burst` must hand up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Frame {
    len: u32,
    hash: u32,
    tag: u8,
}

struct World {
    a: Mempool,
    b: Mempool,
    buf_size: usize,
    rx: Option<RxRing<Tail>>,
    rx_dev: DevRing,
    tx: Option<TxRing<Tail>>,
    tx_dev: DevRing,
    rx_count: u16,
    tx_count: u16,
    /// The application's own cache of pool A (not the RX ring's).
    app_cache: PoolCache,
    /// Packets the application holds.
    held: Vec<Packet>,
    /// Acknowledgements from the other thread; `pending` jobs outstanding.
    acks: (Sender<()>, Receiver<()>),
    pending: usize,
    /// The device has written something a real one would not (from then on
    /// only safety and accounting are checked, not the frames' contents).
    hostile_rx: bool,
    hostile_tx: bool,
    expected_rx: VecDeque<Frame>,
    /// `(iova, len)` of each frame `tx_burst` queued, in order, not yet read
    /// by the device.
    expected_tx: VecDeque<(u64, u16)>,
    tag: u8,
    /// Frames handed up by `rx_burst` since the ring was built.
    rx_handed: u64,
}

/// Lengths the device likes to write: 0, 1, around the buffer size, the
/// 16-bit maximum, and anything.
fn pick_len(inp: &mut Input<'_>, buf: usize) -> u16 {
    match inp.u8() % 8 {
        0 => 0,
        1 => 1,
        2 => (buf - 1) as u16,
        3 => buf as u16,
        4 => (buf + 1) as u16,
        5 => u16::MAX,
        6 => 60,
        _ => inp.u16(),
    }
}

fn make_rx(count: u16, pool: &Mempool) -> Result<(RxRing<Tail>, DevRing), RingError> {
    let desc =
        DescRing::new(count, PageSize::Small4K, Arc::new(IdentityMapper)).expect("descriptor ring");
    let tail = Rc::new(Cell::new(0));
    let mut rx = RxRing::new(
        desc,
        pool,
        Tail {
            value: Rc::clone(&tail),
            count,
        },
    )?;
    rx.set_data_path(PATH.with(Cell::get));
    rx.start();
    assert_eq!(
        tail.get(),
        count - 1,
        "start gives every descriptor but one"
    );
    Ok((
        rx,
        DevRing {
            head: 0,
            tail,
            count,
        },
    ))
}

fn make_tx(count: u16, pool: &Mempool) -> (TxRing<Tail>, DevRing) {
    let desc =
        DescRing::new(count, PageSize::Small4K, Arc::new(IdentityMapper)).expect("descriptor ring");
    let tail = Rc::new(Cell::new(0));
    let mut tx = TxRing::new(
        desc,
        pool,
        Tail {
            value: Rc::clone(&tail),
            count,
        },
    );
    tx.set_data_path(PATH.with(Cell::get));
    (
        tx,
        DevRing {
            head: 0,
            tail,
            count,
        },
    )
}

/// Which pool (0 = A, 1 = B) a packet's buffer belongs to, checking that it
/// exposes only bytes of that buffer.
fn locate(p: &Packet, a: &Mempool, b: &Mempool) -> (usize, u32) {
    for (k, pool) in [a, b].into_iter().enumerate() {
        let region = pool.region();
        let (iova, size) = (region.iova(), pool.buf_size() as u64);
        if p.iova() >= iova && p.iova() < iova + region.len() as u64 {
            let idx = p.buf_index();
            assert!(idx < pool.capacity(), "packet buffer index out of range");
            // Buffers fill each page from its start, `page / size` of them.
            let per_page = PageSize::Small4K.bytes() as u64 / size;
            let offset = idx as u64 / per_page * PageSize::Small4K.bytes() as u64
                + idx as u64 % per_page * size;
            assert_eq!(p.iova(), iova + offset, "packet IOVA not its buffer's");
            assert_eq!(
                p.capacity(),
                size as usize,
                "packet capacity not the pool's"
            );
            assert!(p.len() <= p.capacity(), "packet longer than its buffer");
            let start = region.va().wrapping_add(idx as usize * size as usize);
            let data = p.data();
            assert_eq!(
                data.as_ptr(),
                start.cast_const(),
                "packet data not at its buffer"
            );
            assert!(
                data.as_ptr_range().end <= start.wrapping_add(size as usize).cast_const(),
                "packet data past its buffer"
            );
            // Touch its first and last byte (a fault would catch an unmapped
            // one); the bounds above are what keeps it in its buffer.
            if let (Some(first), Some(last)) = (data.first(), data.last()) {
                std::hint::black_box((*first, *last));
            }
            return (k, idx);
        }
    }
    panic!("packet {p:?} is in neither mempool");
}

impl World {
    fn new(inp: &mut Input<'_>) -> Option<World> {
        let cfg = inp.u8();
        let rx_count = 8u16 << (cfg & 3);
        let tx_count = 8u16 << ((cfg >> 2) & 3);
        let buf_size = [128usize, 256, 1000, 2048][((cfg >> 4) & 3) as usize];
        let extra = [0u32, 1, 3, 8, 16, 24, 40, 64][inp.u8() as usize % 8]; // at most 128 buffers
        let a = take_pool(rx_count as u32 + extra, buf_size);
        let b = take_pool(8, 2048);
        // Now and then a pool too small for the ring: a clear error, nothing lost.
        if cfg & 0xc0 == 0xc0 {
            let small = take_pool(rx_count as u32 - 1, buf_size);
            match make_rx(rx_count, &small) {
                Err(RingError::PoolTooSmall { needed, free }) => {
                    assert_eq!((needed, free), (rx_count as usize, rx_count as usize - 1));
                }
                Err(e) => panic!("unexpected error {e}"),
                Ok(_) => panic!("a ring of {rx_count} built from {} buffers", rx_count - 1),
            }
            give_back(small);
        }
        let (rx, rx_dev) = make_rx(rx_count, &a).expect("pool A holds the ring");
        let (tx, tx_dev) = make_tx(tx_count, &a);
        let app_cache = PoolCache::new(a.clone(), 2 + inp.u8() as usize % 40);
        Some(World {
            buf_size: a.buf_size(),
            a,
            b,
            rx: Some(rx),
            rx_dev,
            tx: Some(tx),
            tx_dev,
            rx_count,
            tx_count,
            app_cache,
            held: Vec::new(),
            acks: channel(),
            pending: 0,
            hostile_rx: false,
            hostile_tx: false,
            expected_rx: VecDeque::new(),
            expected_tx: VecDeque::new(),
            tag: 0,
            rx_handed: 0,
        })
    }

    fn rx(&mut self) -> &mut RxRing<Tail> {
        self.rx.as_mut().expect("rx ring")
    }
    fn tx(&mut self) -> &mut TxRing<Tail> {
        self.tx.as_mut().expect("tx ring")
    }

    fn send(&mut self, job: Job) {
        other_thread()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send((job, self.acks.0.clone()))
            .expect("the packet-dropper thread is gone");
        self.pending += 1;
    }

    fn wait(&mut self) {
        while self.pending > 0 {
            recv_spinning(&self.acks.1).expect("the packet-dropper thread is gone");
            self.pending -= 1;
        }
    }

    /// Device address translation: a pointer to `len` bytes at `iova` in a
    /// pool's region, or `None` (an IOMMU fault: the device writes nothing).
    fn translate(&self, iova: u64, len: usize) -> Option<*mut u8> {
        for pool in [&self.a, &self.b] {
            let r = pool.region();
            if iova >= r.iova() && iova.checked_add(len as u64)? <= r.iova() + r.len() as u64 {
                return Some(r.va().wrapping_add((iova - r.iova()) as usize));
            }
        }
        None
    }

    // ---- the device, behaving -----------------------------------------

    /// Receive one frame of `len` bytes into the descriptor at the device's
    /// head, as the NIC does; dropped (as QEMU's igb does) when no
    /// descriptor is free.
    fn dev_rx_frame(&mut self, len: u16, hash: u32) {
        if self.rx_dev.free() == 0 {
            return;
        }
        let i = self.rx_dev.head;
        let desc = self.rx.as_ref().expect("rx ring").desc();
        let d = dev_read(desc, i);
        self.tag = self.tag.wrapping_add(1);
        // Read format has DD (bit 0 of the header address) clear: a set DD
        // means the tail gave the device a descriptor software had not
        // re-armed since the last write-back.
        assert!(
            self.hostile_rx || d.hi as u32 & RXD_STAT_DD == 0,
            "RX descriptor {i} below the tail still holds a write-back (tail past the re-armed ones)"
        );
        if let Some(dst) = self.translate(d.lo, len as usize) {
            // SAFETY: `dst..dst + len` lies inside a live pool region
            // (`translate`); it models the device's DMA write into the
            // buffer armed in a descriptor it owns.
            unsafe { std::ptr::write_bytes(dst, self.tag, len as usize) };
        } else {
            // A well-behaved device only sees addresses software armed.
            assert!(
                self.hostile_rx,
                "armed RX descriptor {i} points outside the pool: {:#x}",
                d.lo
            );
        }
        let wb = RxCompletion {
            len,
            status_error: RXD_STAT_DD | RXD_STAT_EOP,
            rss_hash: hash,
            pkt_info: 0x11,
            vlan: 0,
        };
        dev_write(desc, i, wb.encode());
        self.rx_dev.advance();
        if !self.hostile_rx {
            self.expected_rx.push_back(Frame {
                len: len as u32,
                hash,
                tag: self.tag,
            });
        }
    }

    /// A legal multi-descriptor frame: `n` descriptors without EOP then one
    /// with EOP (the rings drop it whole: it does not fit one buffer).
    fn dev_rx_chain(&mut self, n: u16) {
        if self.rx_dev.free() < n + 1 {
            return;
        }
        let desc = self.rx.as_ref().expect("rx ring").desc();
        for k in 0..=n {
            let eop = if k == n { RXD_STAT_EOP } else { 0 };
            let wb = RxCompletion {
                len: self.buf_size as u16,
                status_error: RXD_STAT_DD | eop,
                rss_hash: 0,
                pkt_info: 0,
                vlan: 0,
            };
            dev_write(desc, self.rx_dev.head, wb.encode());
            self.rx_dev.advance();
        }
    }

    /// Process up to `n` TX descriptors from the device's head to the tail:
    /// read the frame, write DD back where RS asks for it.
    fn dev_tx(&mut self, n: u16) {
        for _ in 0..n {
            if self.tx_dev.head == self.tx_dev.tail.get() {
                break;
            }
            let i = self.tx_dev.head;
            let desc = self.tx.as_ref().expect("tx ring").desc();
            let d = dev_read(desc, i);
            let req = TxRequest::decode(d);
            if !self.hostile_tx {
                let want = self.expected_tx.pop_front();
                assert_eq!(
                    Some((req.buf_iova, req.len)),
                    want,
                    "TX descriptor {i} is not the next frame queued"
                );
                assert!(
                    req.is_adv_data && req.eop,
                    "TX descriptor {i} malformed: {req:?}"
                );
            }
            if req.is_adv_data && req.len > 0 {
                if let Some(src) = self.translate(req.buf_iova, req.len as usize) {
                    // SAFETY: inside a live pool region (`translate`): the
                    // device's DMA read of the frame.
                    let bytes = unsafe { std::slice::from_raw_parts(src, req.len as usize) };
                    std::hint::black_box(bytes.iter().fold(0u8, |s, &x| s ^ x));
                } else {
                    assert!(
                        self.hostile_tx,
                        "TX descriptor {i} points outside the pools"
                    );
                }
            }
            if req.rs {
                dev_write(
                    desc,
                    i,
                    RawDesc {
                        lo: d.lo,
                        hi: d.hi | ((TXD_STAT_DD as u64) << 32),
                    },
                );
            }
            self.tx_dev.advance();
        }
    }

    // ---- the device, hostile --------------------------------------------

    /// Write back any RX descriptor with the fields the input chooses.
    fn dev_rx_hostile(&mut self, inp: &mut Input<'_>) {
        self.hostile_rx = true;
        let i = inp.u16();
        let flags = inp.u8();
        let mut status = 0;
        if flags & 0x0f != 0 {
            status |= RXD_STAT_DD; // mostly done
        }
        if flags & 0x10 != 0 {
            status |= RXD_STAT_EOP;
        }
        if flags & 0x20 != 0 {
            status |= RXD_ERR_RXE;
        }
        if flags & 0x40 != 0 {
            status |= RXD_ERR_IPE | RXD_ERR_L4E | RXD_STAT_VP;
        }
        if flags & 0x80 != 0 {
            status |= inp.u32();
        }
        let len = pick_len(inp, self.buf_size);
        let wb = RxCompletion {
            len,
            status_error: status,
            rss_hash: inp.u32(),
            pkt_info: inp.u16(),
            // "Above 16 bits": the length's next bits land in the VLAN field.
            vlan: inp.u16(),
        };
        let desc = self.rx.as_ref().expect("rx ring").desc();
        dev_write(desc, i, wb.encode());
    }

    /// Complete again a descriptor the device already completed (software may
    /// have re-armed it by now, or not yet looked at it).
    fn dev_rx_twice(&mut self, back: u16) {
        self.hostile_rx = true;
        let i = self.rx_dev.head.wrapping_sub(1 + back % self.rx_count) & (self.rx_count - 1);
        let wb = RxCompletion {
            len: 60,
            status_error: RXD_STAT_DD | RXD_STAT_EOP,
            rss_hash: 0xdead_beef,
            pkt_info: 0,
            vlan: 0,
        };
        dev_write(self.rx.as_ref().expect("rx ring").desc(), i, wb.encode());
    }

    /// `n` descriptors from the head without EOP, past the tail if need be.
    fn dev_rx_long_chain(&mut self, n: u16, lens: u16) {
        self.hostile_rx = true;
        let desc = self.rx.as_ref().expect("rx ring").desc();
        for _ in 0..n {
            let wb = RxCompletion {
                len: lens,
                status_error: RXD_STAT_DD,
                rss_hash: 0,
                pkt_info: 0,
                vlan: 0,
            };
            dev_write(desc, self.rx_dev.head, wb.encode());
            self.rx_dev.advance();
        }
    }

    /// TX write-back into any descriptor: DD on one never submitted (or not
    /// yet sent), DD cleared, or raw garbage.
    fn dev_tx_hostile(&mut self, inp: &mut Input<'_>) {
        self.hostile_tx = true;
        let i = inp.u16();
        let how = inp.u8();
        let desc = self.tx.as_ref().expect("tx ring").desc();
        let d = dev_read(desc, i);
        let hi = match how % 4 {
            0 | 1 => d.hi | ((TXD_STAT_DD as u64) << 32),
            2 => d.hi & !((TXD_STAT_DD as u64) << 32),
            _ => inp.u64(),
        };
        dev_write(desc, i, RawDesc { lo: d.lo, hi });
    }

    /// 128 bits of garbage anywhere in either ring.
    fn dev_raw(&mut self, inp: &mut Input<'_>) {
        let on_rx = inp.u8() & 1 == 0;
        let i = inp.u16();
        let d = RawDesc {
            lo: inp.u64(),
            hi: inp.u64(),
        };
        if on_rx {
            self.hostile_rx = true;
            dev_write(self.rx.as_ref().expect("rx ring").desc(), i, d);
        } else {
            self.hostile_tx = true;
            dev_write(self.tx.as_ref().expect("tx ring").desc(), i, d);
        }
    }

    // ---- the application ------------------------------------------------

    fn rx_burst_checked(&mut self, max: usize) -> usize {
        let before = self.held.len();
        let stats = self.rx().stats();
        let got = {
            let rx = self.rx.as_mut().expect("rx ring");
            rx.rx_burst(&mut self.held, max)
        };
        assert_eq!(
            self.held.len(),
            before + got,
            "rx_burst's count is what it appended"
        );
        assert!(got <= max, "rx_burst returned {got} > max {max}");
        let after = self.rx().stats();
        assert_eq!(after.packets - stats.packets, got as u64);
        for p in &self.held[before..] {
            assert!(
                (1..=self.buf_size).contains(&p.len()),
                "rx_burst handed up a packet of {} bytes (buffer {})",
                p.len(),
                self.buf_size
            );
        }
        self.rx_handed += got as u64;
        if !self.hostile_rx {
            for p in &self.held[before..] {
                let want = self
                    .expected_rx
                    .pop_front()
                    .expect("rx_burst handed up a frame the device never wrote");
                assert_eq!(p.len() as u32, want.len, "frame length");
                assert_eq!(p.rss_hash(), want.hash, "RSS hash");
                assert!(p.data() == &[want.tag; 2048][..p.len()], "frame bytes");
            }
        }
        got
    }

    /// `rx_burst` until it finds nothing: with a well-behaved device every
    /// frame written must have come out, unless the pool ran dry.
    fn rx_drain(&mut self) {
        let max = self.rx_count as usize;
        for _ in 0..4 * self.rx_count {
            let before = self.rx().stats();
            let got = self.rx_burst_checked(max);
            let after = self.rx().stats();
            if got == 0 && after.rx_errors == before.rx_errors {
                if !self.hostile_rx && !self.expected_rx.is_empty() {
                    assert!(
                        after.rx_nombuf > before.rx_nombuf,
                        "{} frames waiting but rx_burst returned none, with buffers to spare",
                        self.expected_rx.len()
                    );
                }
                return;
            }
        }
        panic!("rx_burst kept finding frames in a ring nobody refills");
    }

    fn tx_burst(&mut self, inp: &mut Input<'_>) {
        let k = (inp.u8() as usize % 40).min(self.held.len());
        let variant = inp.u8();
        let mut batch: Vec<Packet> = self.held.drain(..k).collect();
        for p in batch.iter_mut() {
            match variant % 8 {
                0 => {
                    let _ = p.set_len(0); // refused: counted in tx_errors
                }
                1 => {
                    let cap = p.capacity();
                    p.set_len(cap).expect("capacity fits");
                }
                _ => {}
            }
        }
        if variant & 0x10 != 0 {
            // A packet of another mempool (same IO address space): accepted.
            if let Some(mut p) = self.b.alloc() {
                p.set_len(64).expect("64 fits");
                batch.push(p);
            }
        }
        if variant & 0x20 != 0 {
            if let Some(mut p) = self.app_cache.alloc() {
                let n = (inp.u16() as usize) % (p.capacity() + 1);
                p.set_len(n).expect("within capacity");
                batch.push(p);
            }
        }
        let offered = batch.len();
        let errs = self.tx().stats().tx_errors;
        let recs: Vec<(u64, u16)> = batch.iter().map(|p| (p.iova(), p.len() as u16)).collect();
        let taken = if variant & 0x40 != 0 {
            let tx = self.tx.as_mut().expect("tx ring");
            tx.tx_burst(&mut batch, &mut self.app_cache)
        } else {
            let (rx, tx) = (
                self.rx.as_mut().expect("rx ring"),
                self.tx.as_mut().expect("tx ring"),
            );
            tx.tx_burst(&mut batch, rx.cache_mut())
        };
        assert_eq!(
            taken + batch.len(),
            offered,
            "tx_burst lost or invented frames"
        );
        assert!(self.tx().in_flight() < self.tx_count as usize);
        let refused = recs[..taken].iter().filter(|r| r.1 == 0).count() as u64;
        assert_eq!(self.tx().stats().tx_errors - errs, refused, "tx_errors");
        self.expected_tx
            .extend(recs[..taken].iter().filter(|r| r.1 != 0).copied());
        // What the ring could not take stays with the application, in order.
        for (p, r) in batch.iter().zip(&recs[taken..]) {
            assert_eq!(p.iova(), r.0, "frames left behind keep their order");
        }
        self.held.extend(batch);
    }

    fn reclaim(&mut self, own_cache: bool) {
        let before = self.tx().in_flight();
        let freed = if own_cache {
            let (rx, tx) = (
                self.rx.as_mut().expect("rx ring"),
                self.tx.as_mut().expect("tx ring"),
            );
            tx.reclaim(rx.cache_mut())
        } else {
            let tx = self.tx.as_mut().expect("tx ring");
            tx.reclaim(&mut self.app_cache)
        };
        assert_eq!(self.tx().in_flight() + freed, before, "reclaim count");
    }

    fn take_held(&mut self, k: usize, from_back: bool) -> Vec<Packet> {
        let k = k.min(self.held.len());
        if from_back {
            self.held.split_off(self.held.len() - k)
        } else {
            self.held.drain(..k).collect()
        }
    }

    fn packet_write(&mut self, inp: &mut Input<'_>) {
        if self.held.is_empty() {
            return;
        }
        let at = inp.u8() as usize % self.held.len();
        let want = inp.u16() as usize % (self.buf_size * 2 + 2);
        let byte = inp.u8();
        let p = &mut self.held[at];
        let old = p.len();
        match p.set_len(want) {
            Ok(()) => assert_eq!(p.len(), want),
            Err(e) => {
                assert!(want > p.capacity());
                assert_eq!((e.len, e.capacity), (want, p.capacity()));
                assert_eq!(p.len(), old, "a refused set_len changes nothing");
            }
        }
        p.data_mut().fill(byte);
    }

    /// Stop the rings (as the driver does after the queue is disabled), check
    /// that everything came back, and build them again.
    fn rebuild(&mut self) {
        self.wait();
        drop(self.tx.take());
        drop(self.rx.take());
        self.check();
        let (rx, rx_dev) = match make_rx(self.rx_count, &self.a) {
            Ok(r) => r,
            Err(RingError::PoolTooSmall { needed, free }) => {
                assert_eq!(needed, self.rx_count as usize);
                assert!(free < needed);
                // Give buffers back until the ring fits.
                self.held.clear();
                self.app_cache = PoolCache::new(self.a.clone(), self.app_cache.capacity());
                make_rx(self.rx_count, &self.a).expect("every buffer is free")
            }
            Err(e) => panic!("unexpected error {e}"),
        };
        let (tx, tx_dev) = make_tx(self.tx_count, &self.a);
        self.rx = Some(rx);
        self.rx_dev = rx_dev;
        self.tx = Some(tx);
        self.tx_dev = tx_dev;
        self.expected_rx.clear();
        self.expected_tx.clear();
        self.hostile_rx = false;
        self.hostile_tx = false;
        self.rx_handed = 0;
    }

    /// The invariants, checked between steps (the other thread idle).
    fn check(&mut self) {
        // One bit per buffer (pool A has at most 128 buffers, B 8).
        let mut seen = [0u128; 2];
        let mut mark = |pool: usize, idx: u32, what: &str| {
            let cap = if pool == 0 {
                self.a.capacity()
            } else {
                self.b.capacity()
            };
            assert!(
                idx < cap,
                "{what}: buffer {idx} of pool {pool} out of range"
            );
            let bit = 1u128 << idx;
            assert!(
                seen[pool] & bit == 0,
                "{what}: buffer {idx} of pool {pool} counted twice"
            );
            seen[pool] |= bit;
        };
        for i in self.a.free_indices() {
            mark(0, i, "pool A free list");
        }
        for i in self.b.free_indices() {
            mark(1, i, "pool B free list");
        }
        // Every buffer outside a shared free list holds one reference of
        // its pool (rings::mempool's invariant), plus one per handle.
        let mut refs = [2usize, 1]; // handles: World.a + app_cache; World.b
        for &i in self.app_cache.cached_indices() {
            mark(0, i, "application cache");
            refs[0] += 1;
        }
        if let Some(rx) = self.rx.as_mut() {
            for &i in rx.cache_mut().cached_indices() {
                mark(0, i, "RX ring cache");
                refs[0] += 1;
            }
            for &i in rx.armed_indices() {
                mark(0, i, "armed in the RX ring");
                refs[0] += 1;
            }
            refs[0] += 2; // the ring's handle and its cache's
        }
        if let Some(tx) = self.tx.as_ref() {
            for (i, own) in tx.in_flight_buffers() {
                let pool = if own { 0 } else { 1 };
                mark(pool, i, "in flight in the TX ring");
                refs[pool] += 1;
            }
            refs[0] += 1; // the ring's handle
        }
        for p in &self.held {
            let (pool, i) = locate(p, &self.a, &self.b);
            mark(pool, i, "held by the application");
            refs[pool] += 1;
        }
        for (k, cap) in [self.a.capacity(), self.b.capacity()]
            .into_iter()
            .enumerate()
        {
            let all = u128::MAX >> (128 - cap);
            if seen[k] != all {
                let lost = (!seen[k] & all).trailing_zeros();
                panic!("buffer {lost} of pool {k} is nowhere (lost)");
            }
        }
        assert_eq!(self.a.references(), refs[0], "pool A reference count");
        assert_eq!(self.b.references(), refs[1], "pool B reference count");
    }

    /// One step; returns false when the step lets the other thread run on
    /// into the next one (the check then waits until after that).
    fn step(&mut self, inp: &mut Input<'_>) -> bool {
        let op = inp.u8();
        if trace() {
            eprintln!(
                "step {} at byte {}: rx head {} tail {} next {}, tx head {} tail {} in flight {}, held {}",
                op % 24,
                inp.pos - 1,
                self.rx_dev.head,
                self.rx_dev.tail.get(),
                self.rx.as_ref().map_or(0, |r| r.next_index()),
                self.tx_dev.head,
                self.tx_dev.tail.get(),
                self.tx.as_ref().map_or(0, |t| t.in_flight()),
                self.held.len()
            );
        }
        match op % 24 {
            0..=3 => {
                let len = 1 + inp.u16() % self.buf_size as u16;
                let hash = inp.u32();
                self.dev_rx_frame(len, hash);
            }
            4 => {
                let n = 1 + inp.u8() as u16 % 8;
                let k = 1 + inp.u8() % 4;
                for _ in 0..k {
                    self.dev_rx_frame(60, n as u32);
                }
                self.dev_rx_chain(n);
            }
            5 | 6 => {
                let max = inp.u8() as usize % (2 * self.rx_count as usize + 2);
                self.rx_burst_checked(max);
            }
            7 | 8 => self.tx_burst(inp),
            9 => {
                let n = inp.u8() as u16;
                self.dev_tx(n);
            }
            10 => self.reclaim(inp.u8() & 1 == 0),
            11 => self.dev_rx_hostile(inp),
            12 => {
                let back = inp.u8() as u16;
                self.dev_rx_twice(back);
            }
            13 => {
                let n = inp.u8() as u16 % (3 * self.rx_count);
                let len = pick_len(inp, self.buf_size);
                self.dev_rx_long_chain(n, len);
            }
            14 => self.dev_tx_hostile(inp),
            15 => self.dev_raw(inp),
            16 => {
                let k = inp.u8() as usize;
                let from_back = k & 1 == 0;
                drop(self.take_held(k % 40, from_back));
            }
            17 => {
                // Drop on the other thread while the next step runs here.
                let k = inp.u8() as usize % 40;
                let pkts = self.take_held(k, true);
                self.send(Job::Drop(pkts));
                return false;
            }
            18 => {
                let n = inp.u8() as u32 % 64;
                let pool = if n & 1 == 0 {
                    self.a.clone()
                } else {
                    self.b.clone()
                };
                self.send(Job::Churn(pool, n));
                return false;
            }
            19 => {
                let k = inp.u8() as usize % 40;
                let mut pkts = self.take_held(k, false);
                if k & 1 == 0 {
                    self.app_cache.free_bulk(&mut pkts);
                } else {
                    self.rx().cache_mut().free_bulk(&mut pkts);
                }
                assert!(pkts.is_empty(), "free_bulk leaves the vector empty");
            }
            20 => {
                let n = inp.u8() as usize;
                let before = self.held.len();
                let got = match n % 3 {
                    0 => self.app_cache.alloc_burst(&mut self.held, n / 3),
                    1 => {
                        let rx = self.rx.as_mut().expect("rx ring");
                        rx.cache_mut().alloc_burst(&mut self.held, n / 3)
                    }
                    _ => {
                        let p = if n & 4 == 0 {
                            self.a.alloc()
                        } else {
                            self.b.alloc()
                        };
                        let got = p.is_some() as usize;
                        self.held.extend(p);
                        got
                    }
                };
                assert_eq!(self.held.len(), before + got);
                for p in &self.held[before..] {
                    assert_eq!(p.len(), 0, "a fresh packet is empty");
                }
            }
            21 => self.packet_write(inp),
            22 => {
                if inp.u8() % 8 == 0 {
                    self.rebuild();
                }
            }
            _ => {
                // Everything the device has, then everything software can.
                self.dev_tx(u16::MAX);
                self.reclaim(true);
                self.rx_drain();
            }
        }
        true
    }
}

/// Run one input on the scalar burst loops. Panics on any violated invariant.
pub fn run(data: &[u8]) {
    run_on(data, DataPath::Scalar)
}

/// Run one input with the rings on `path`'s burst loops (the fuzz targets
/// `rings`: scalar, `rings_vector`: vector). Panics on any violated invariant.
pub fn run_on(data: &[u8], path: DataPath) {
    PATH.with(|p| p.set(path));
    let mut inp = Input { data, pos: 0 };
    let Some(mut w) = World::new(&mut inp) else {
        return;
    };
    w.check();
    let mut steps = 0;
    while !inp.done() && steps < MAX_STEPS {
        steps += 1;
        if w.step(&mut inp) {
            w.wait();
            w.check();
        }
    }
    w.wait();
    w.check();
    // Teardown: every buffer back on its pool's free list, one reference left.
    let World {
        a,
        b,
        rx,
        tx,
        app_cache,
        held,
        ..
    } = w;
    drop(tx);
    drop(rx);
    drop(app_cache);
    drop(held);
    assert_eq!(
        a.free_indices().len(),
        a.capacity() as usize,
        "pool A not full at the end"
    );
    assert_eq!(
        b.free_indices().len(),
        b.capacity() as usize,
        "pool B not full at the end"
    );
    assert_eq!(
        (a.references(), b.references()),
        (1, 1),
        "references left at the end"
    );
    give_back(a);
    give_back(b);
}

/// For the harness's own test: receive one frame, forget the packet (its
/// buffer is then nowhere) and check; must panic with "lost".
pub fn lose_one_buffer() {
    let seed = [0u8, 5];
    let mut inp = Input {
        data: &seed,
        pos: 0,
    };
    let mut w = World::new(&mut inp).expect("world");
    w.dev_rx_frame(60, 1);
    w.rx_burst_checked(4);
    std::mem::forget(w.held.pop().expect("one frame received"));
    w.check();
}
