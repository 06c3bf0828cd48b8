//! The hostile-device harness for the split virtqueue (`pollnic_rings::virtq`):
//! an RX and a TX virtqueue, their mempool, the queue's `PoolCache` and the
//! application's `Packet`s, driven against a device model that reads the
//! avail rings and writes whatever the input says into the used rings.
//!
//! One input is a sequence of steps, one byte of opcode and its operands
//! (see [`run`]). The device completes chains well (in any order, with a
//! frame of any valid length), or writes used entries with any id and any
//! length (repeated ids, ids never posted, odd ids, ids out of range,
//! lengths under the header or over the buffer), or moves the used index by
//! any amount, or sets `VRING_USED_F_NO_NOTIFY`, or rewrites entries of
//! the avail rings it has read, or the address and length of the data
//! descriptor of a chain it does not hold (both must change nothing, since
//! the driver never reads them back). The application receives,
//! sends what it received (zero copy) and fresh or empty packets, reclaims,
//! drops.
//!
//! Every input runs three times: with notifications by flags, with
//! `VIRTIO_F_EVENT_IDX` (`use_event_idx`), and with event indices and
//! `VIRTIO_F_IN_ORDER` (`set_in_order`). With event indices the
//! notification step writes `avail_event` instead of the flags: honestly
//! (the avail index the device has read, as QEMU's
//! `virtio_queue_set_notification` does before it sleeps) or any 16-bit
//! value, and arms and disarms the RX queue's interrupt. In order, every
//! head the driver posts must be the next in ring order; a good receive
//! completion of a chain other than the oldest is misbehaviour the driver
//! must stop at; and the device may complete a run of transmit chains by
//! its last used entry alone (garbage in the skipped ones, the used index
//! moved past the run), after which every chain it completed must come
//! back at the next reclaim.
//!
//! After every step:
//! - nothing panicked;
//! - every buffer of the pool is accounted for exactly once: shared free
//!   list + cache + RX chains + TX in flight + held by the application =
//!   capacity, no index twice;
//! - every packet's length is at most the buffer size;
//! - the RX queue stops exactly when the burst reads a protocol break: a
//!   used index more than the chains in flight ahead, or, among the entries
//!   the burst reaches, an id that is no chain head or a chain already
//!   taken earlier in the same burst (the model keeps its own copy of the
//!   used ring and works this out before each burst, from what the driver
//!   can know); no false stop, and no break followed;
//! - while the device has only behaved, every frame comes out with the
//!   length and bytes the device wrote, and every TX chain the device reads
//!   is a zeroed 12-byte header then the next frame handed to `tx_burst`;
//! - with event indices, every burst that published buffers kicks exactly
//!   when the device's `avail_event` asks for it (it lies in the indices
//!   just published; a stale value, never written or left behind, asks for
//!   nothing); in particular a device that went to sleep honestly is always
//!   woken by the next burst; the avail flags stay 0 and
//!   `used_event` is the next used index when armed, 0x8000 beyond it when
//!   not.
//!
//! Shared by `fuzz/fuzz_targets/virtq.rs` (cargo-fuzz) and
//! `rings/tests/virtq_hostile.rs` (stable, seeds and pseudo-random inputs).

#![allow(dead_code)]

use pollnic_rings::virtq::device::DeviceView;
use pollnic_rings::{
    Doorbell, IdentityMapper, Mempool, Packet, PageSize, VirtqRx, VirtqTx, VIRTIO_NET_HDR_LEN,
};
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

/// `vring_need_event` (virtio 1.2 §2.7.10), written out with wide integers:
/// the index moved from `old` to `new` past `event` (`event` in `old..new`,
/// mod 2^16).
fn crossed(event: u16, new: u16, old: u16) -> bool {
    let span = (new as u32 + 0x1_0000 - old as u32) % 0x1_0000;
    let dist = (event as u32 + 0x1_0000 - old as u32) % 0x1_0000;
    dist < span
}

/// The kick expected from a burst that moved the avail index `old` to
/// `new`, with event indices on.
fn kick_expected(event: u16, new: u16, old: u16) -> bool {
    new != old && crossed(event, new, old)
}

/// Counts doorbell writes.
#[derive(Default)]
pub struct Bell(pub Arc<std::sync::atomic::AtomicU64>);
impl Doorbell for Bell {
    fn ring(&mut self, _tail: u16) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

const RING: u16 = 16; // descriptors: 8 chains
const POOL: u32 = 64;
const BUF: usize = 2048;

struct Dev {
    view: DeviceView,
    /// Next avail slot the device reads.
    avail_seen: u16,
    /// Chains read from avail and not yet used (id), in order read.
    outstanding: Vec<u16>,
    used_idx: u16,
    /// With event indices: the device went to sleep honestly with
    /// `avail_event` at this avail index and was not kicked since.
    asleep: Option<u16>,
    /// The model's copy of the used ring's entries (id, len), by slot.
    used_ring: [(u32, u32); RING as usize],
    /// `VIRTIO_F_IN_ORDER`: the driver posts heads in ring order.
    in_order: bool,
}

impl Dev {
    fn new(view: DeviceView) -> Dev {
        Dev {
            view,
            avail_seen: 0,
            outstanding: Vec::new(),
            used_idx: 0,
            asleep: None,
            used_ring: [(0, 0); RING as usize],
            in_order: false,
        }
    }
    /// Read the avail entries published since last time.
    fn fetch(&mut self) {
        let idx = self.view.avail_idx();
        while self.avail_seen != idx {
            let head = self.view.avail_entry(self.avail_seen);
            if self.in_order {
                // The driver's side of IN_ORDER: heads in ring order.
                assert_eq!(
                    head,
                    2 * (self.avail_seen % (RING / 2)),
                    "heads in ring order"
                );
            }
            self.outstanding.push(head);
            self.avail_seen = self.avail_seen.wrapping_add(1);
        }
    }
    fn push_used(&mut self, id: u32, len: u32) {
        self.view.put_used(self.used_idx, id, len);
        self.used_ring[(self.used_idx % RING) as usize] = (id, len);
        self.used_idx = self.used_idx.wrapping_add(1);
        self.view.set_used_idx(self.used_idx);
    }
}

/// What an RX burst of at most `max` entries must do, worked out from
/// the used ring as the driver finds it: `Some(j)` when it stops the queue
/// at the `j`-th entry it reads (0 for a used index that jumped past the
/// chains in flight, which is checked before any entry), unless it ran out
/// of buffers at a good frame before; `None` when nothing it reads breaks
/// the protocol. Between bursts every RX chain is posted, so an even id
/// below the ring size is a chain the driver holds for the device the
/// first time it comes, and a break the second time in one burst.
/// In order (`dev.in_order`) the `j`-th entry must name the chain posted
/// at avail index `last_used + j` (head `2 * ((last_used + j) % 8)`), and
/// any other id is the break.
fn rx_break_at(dev: &Dev, last_used: u16, in_flight: u16, max: usize) -> Option<usize> {
    let pending = dev.used_idx.wrapping_sub(last_used);
    if pending == 0 || max == 0 {
        return None;
    }
    if pending > in_flight {
        return Some(0);
    }
    let mut taken = HashSet::new();
    (0..(pending as usize).min(max)).find(|&j| {
        let at = last_used.wrapping_add(j as u16);
        let (id, _) = dev.used_ring[(at % RING) as usize];
        if dev.in_order {
            return id != 2 * u32::from(at % (RING / 2));
        }
        id >= RING as u32 || id & 1 != 0 || !taken.insert(id)
    })
}

/// [`rx_break_at`] for the burst `rx` is about to make, from the driver's
/// state (the used index it last read is the avail index less the chains
/// in flight); and whether the queue had stopped before it.
fn rx_expect<D: Doorbell>(dev: &Dev, rx: &VirtqRx<D>, max: usize) -> (Option<usize>, bool) {
    let in_flight = rx.in_flight() as u16;
    let last_used = dev.view.avail_idx().wrapping_sub(in_flight);
    (
        rx_break_at(dev, last_used, in_flight, max),
        rx.virtq_stats().stopped,
    )
}

/// Check an RX burst's stop against [`rx_break_at`]'s expectation:
/// stopped exactly when a break was reached, and a stopped queue gives
/// nothing after.
fn check_rx_stop<D: Doorbell>(
    rx: &mut VirtqRx<D>,
    expect: Option<usize>,
    was_stopped: bool,
    nombuf: bool,
    held: &mut Vec<Packet>,
) {
    let stats = rx.virtq_stats();
    if was_stopped {
        assert!(stats.stopped, "a stopped queue stays stopped");
        return;
    }
    match expect {
        None => assert!(
            !stats.stopped,
            "stopped with no protocol break in the entries read"
        ),
        // An empty cache ended the burst at a good frame before the break.
        Some(_) if nombuf => assert!(!stats.stopped, "stopped at a good frame"),
        Some(j) => {
            assert!(stats.stopped, "a protocol break was followed (entry {j})");
            assert!(stats.device_errors > 0);
            assert_eq!(rx.rx_burst(held, 32), 0, "a stopped queue gives nothing");
        }
    }
}

/// The pseudo-random frame bytes for frame number `n`.
fn pattern(n: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (n as usize * 31 + i * 7) as u8).collect()
}

struct Input<'a>(&'a [u8]);
impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes([self.byte()?, self.byte()?]))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes([
            self.byte()?,
            self.byte()?,
            self.byte()?,
            self.byte()?,
        ]))
    }
}

/// Run one input, with notifications by flags and then by event index,
/// and then in order (`VIRTIO_F_IN_ORDER`, with event indices): the
/// device's good completions of a receive chain other than the oldest are
/// then misbehaviour the driver must stop at, and a run of transmit chains
/// may be completed by one used entry, the last, with the used index moved
/// by the whole run (the skipped entries hold garbage the driver must not
/// read).
pub fn run(data: &[u8]) {
    run_with(data, false, false);
    run_with(data, false, true);
    run_in(data, false, true, true);
}

/// [`run`] in one notification mode (`event_idx`); with `lose` the
/// application forgets one packet (the accounting must catch it).
pub fn run_with(data: &[u8], lose: bool, event_idx: bool) {
    run_in(data, lose, event_idx, false);
}

/// [`run_with`], in order or not.
pub fn run_in(data: &[u8], lose: bool, event_idx: bool, in_order: bool) {
    let pool = Mempool::new(POOL, BUF, PageSize::Small4K, Arc::new(IdentityMapper)).unwrap();
    let mapper: Arc<dyn pollnic_rings::DmaMapper> = Arc::new(IdentityMapper);
    let rx_kicks = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let tx_kicks = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let kicks_of =
        |k: &Arc<std::sync::atomic::AtomicU64>| k.load(std::sync::atomic::Ordering::Relaxed);
    let mut rx = VirtqRx::new(
        RING,
        PageSize::Small4K,
        mapper.clone(),
        &pool,
        Bell(rx_kicks.clone()),
    )
    .unwrap();
    let mut tx = VirtqTx::new(RING, PageSize::Small4K, mapper, Bell(tx_kicks.clone())).unwrap();
    // SAFETY: identity-mapped queues, alive until the end of this function.
    let mut rdev = Dev::new(unsafe { DeviceView::new(rx.addrs()) });
    // SAFETY: as above.
    let mut tdev = Dev::new(unsafe { DeviceView::new(tx.addrs()) });
    rx.set_in_order(in_order);
    tx.set_in_order(in_order);
    rdev.in_order = in_order;
    tdev.in_order = in_order;
    assert_eq!(rdev.view.avail_flags(), 1, "RX: VRING_AVAIL_F_NO_INTERRUPT");
    if event_idx {
        rx.use_event_idx();
        tx.use_event_idx();
        for v in [&rdev.view, &tdev.view] {
            assert_eq!(v.avail_flags(), 0, "flags 0 with VIRTIO_F_EVENT_IDX");
            assert_eq!(
                v.used_event(),
                0x8000,
                "used_event away from the used index"
            );
        }
        assert!(rx.virtq_stats().event_idx && tx.virtq_stats().event_idx);
    }
    rx.start();
    assert_eq!(kicks_of(&rx_kicks), 1, "start kicks");
    let mut held: Vec<Packet> = Vec::new();
    let mut hostile = false;
    // Frames the device wrote, in used order, while it behaved: (n, len).
    let mut expect_rx: VecDeque<(u64, usize)> = VecDeque::new();
    // Frames handed to tx_burst and not yet read by the device: their bytes.
    let mut expect_tx: VecDeque<Vec<u8>> = VecDeque::new();
    let mut frame_no = 0u64;
    // TX chains the device completed while it behaved.
    let mut tx_done = 0u64;
    let mut input = Input(data);
    let mut forgotten = false;
    let (mut rx_seen, mut tx_seen) = (kicks_of(&rx_kicks), kicks_of(&tx_kicks));
    while let Some(op) = input.byte() {
        match op % 14 {
            0 => {
                // Device: complete one outstanding RX chain well.
                rdev.fetch();
                let Some(pick) = input.byte() else { break };
                if rdev.outstanding.is_empty() {
                    continue;
                }
                let at = pick as usize % rdev.outstanding.len();
                if in_order && at != 0 {
                    // Out of order: the driver must stop at it (rx_break_at).
                    hostile = true;
                }
                let id = rdev.outstanding.remove(at);
                let len = 1 + input.u16().unwrap_or(60) as usize % BUF;
                let (addr, dlen, flags, next) = rdev.view.desc(id);
                assert_eq!((dlen, flags, next), (VIRTIO_NET_HDR_LEN, 3, id + 1));
                let (baddr, blen, bflags, _) = rdev.view.desc(id + 1);
                assert_eq!((blen as usize, bflags), (BUF, 2));
                // SAFETY: identity-mapped header slot and buffer of this queue.
                unsafe {
                    std::ptr::write_bytes(addr as usize as *mut u8, 0xee, 12);
                    let bytes = pattern(frame_no, len);
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), baddr as usize as *mut u8, len);
                }
                rdev.push_used(id as u32, len as u32 + VIRTIO_NET_HDR_LEN);
                expect_rx.push_back((frame_no, len));
                frame_no += 1;
            }
            1 => {
                // Device: a used entry with any id and any length.
                rdev.fetch();
                let (Some(id), Some(len)) = (input.u32(), input.u32()) else {
                    break;
                };
                let id = if id & 0x100 != 0 { id % 24 } else { id };
                if id < RING as u32 && rdev.outstanding.contains(&(id as u16)) {
                    rdev.outstanding.retain(|&o| o as u32 != id);
                }
                // Whether the driver must stop on it is worked out at the
                // next burst from the used ring (rx_break_at): a chain head
                // the device does not hold is a completion the driver cannot
                // tell from a real one once it has re-posted that chain.
                rdev.push_used(id, len);
                hostile = true;
            }
            2 => {
                // Device: move the used index by any amount.
                let Some(k) = input.u16() else { break };
                rdev.used_idx = rdev.used_idx.wrapping_add(k);
                rdev.view.set_used_idx(rdev.used_idx);
                // Two moves the driver does not see between them add up (a
                // step back by one is two jumps of 29,555 and 35,980); what
                // the driver must do is worked out at its next burst from
                // where the index stands (rx_break_at).
                if k != 0 {
                    hostile = true;
                }
            }
            3 => {
                // Application: receive.
                let max = input.byte().unwrap_or(32) as usize % 40;
                let before = rx.stats();
                let start = held.len();
                let (old, k0) = (rdev.view.avail_idx(), kicks_of(&rx_kicks));
                let (expect, was_stopped) = rx_expect(&rdev, &rx, max);
                let got = rx.rx_burst(&mut held, max);
                if event_idx {
                    let new = rdev.view.avail_idx();
                    let want = kick_expected(rdev.view.avail_event(), new, old);
                    assert_eq!(
                        kicks_of(&rx_kicks) - k0,
                        want as u64,
                        "RX kick for avail {old}->{new}, avail_event {}",
                        rdev.view.avail_event()
                    );
                    // A device that went to sleep honestly at `old` is woken.
                    if rdev.asleep == Some(old) && new != old {
                        assert_eq!(kicks_of(&rx_kicks) - k0, 1, "a sleeping device is woken");
                    }
                }
                assert_eq!(held.len() - start, got);
                for p in &held[start..] {
                    assert!(p.len() <= p.capacity() && !p.is_empty());
                    if !hostile {
                        let (n, len) = expect_rx.pop_front().expect("a frame the device wrote");
                        assert_eq!(p.len(), len, "frame {n}");
                        assert_eq!(p.data(), &pattern(n, len)[..], "frame {n}");
                    }
                }
                let nombuf = rx.stats().rx_nombuf > before.rx_nombuf;
                check_rx_stop(&mut rx, expect, was_stopped, nombuf, &mut held);
            }
            4 => {
                // Application: drop some held packets (cache or pool).
                let k = input.byte().unwrap_or(1) as usize;
                let n = k.min(held.len());
                let mut drop_these: Vec<Packet> = held.drain(..n).collect();
                if k % 2 == 0 {
                    rx.cache_mut().free_bulk(&mut drop_these);
                } else if lose && !forgotten && !drop_these.is_empty() {
                    std::mem::forget(drop_these.pop());
                    forgotten = true;
                }
            }
            5 => {
                // Application: send held packets (zero copy), maybe a fresh empty one.
                let k = input.byte().unwrap_or(4) as usize;
                let mut burst: Vec<Packet> = held.drain(..(k % 9).min(held.len())).collect();
                if k & 0x80 != 0 {
                    if let Some(p) = rx.cache_mut().alloc() {
                        burst.push(p); // length 0: refused, counted, freed
                    }
                }
                let copies: Vec<Vec<u8>> = burst.iter().map(|p| p.data().to_vec()).collect();
                let before = tx.stats().tx_errors;
                let (old, k0) = (tdev.view.avail_idx(), kicks_of(&tx_kicks));
                let n = tx.tx_burst(&mut burst, rx.cache_mut());
                let new = tdev.view.avail_idx();
                if event_idx {
                    let want = kick_expected(tdev.view.avail_event(), new, old);
                    assert_eq!(
                        kicks_of(&tx_kicks) - k0,
                        want as u64,
                        "TX kick for avail {old}->{new}, avail_event {}",
                        tdev.view.avail_event()
                    );
                    // A device that went to sleep honestly at `old` is woken.
                    if tdev.asleep == Some(old) && new != old {
                        assert_eq!(kicks_of(&tx_kicks) - k0, 1, "a sleeping device is woken");
                    }
                }

                let refused = (tx.stats().tx_errors - before) as usize;
                let mut taken = 0;
                for c in copies.into_iter().take(n) {
                    if !c.is_empty() {
                        expect_tx.push_back(c);
                    }
                    taken += 1;
                }
                assert!(taken == n && refused <= n);
                held.append(&mut burst);
            }
            6 => {
                // Device: read and complete TX chains well, checking each.
                tdev.fetch();
                let Some(k) = input.byte() else { break };
                // In order, bit 7: the run completed by its last entry only.
                let batch = in_order && k & 0x80 != 0;
                let mut run = Vec::new();
                for _ in 0..(k % 9) {
                    if tdev.outstanding.is_empty() {
                        break;
                    }
                    let id = tdev.outstanding.remove(0);
                    let (haddr, hlen, hflags, hnext) = tdev.view.desc(id);
                    assert_eq!((hlen, hflags, hnext), (VIRTIO_NET_HDR_LEN, 1, id + 1));
                    // SAFETY: identity-mapped header of this queue.
                    let hdr =
                        unsafe { std::slice::from_raw_parts(haddr as usize as *const u8, 12) };
                    assert_eq!(hdr, &[0u8; 12], "TX header is zero");
                    let (addr, len, flags, _) = tdev.view.desc(id + 1);
                    assert_eq!(flags, 0);
                    // SAFETY: identity-mapped buffer posted by the driver.
                    let data = unsafe {
                        std::slice::from_raw_parts(addr as usize as *const u8, len as usize)
                    };
                    if !hostile {
                        let want = expect_tx.pop_front().expect("a frame handed to tx_burst");
                        assert_eq!(data, &want[..]);
                    }
                    if batch {
                        run.push(id);
                    } else {
                        tdev.push_used(id as u32, 0);
                    }
                    tx_done += 1;
                }
                if let Some((&last, skipped)) = run.split_last() {
                    // Garbage where the skipped entries would be, then the
                    // last, then the used index past the whole run.
                    for _ in skipped {
                        tdev.view.put_used(tdev.used_idx, 0xdead_beef, 0xffff_ffff);
                        tdev.used_ring[(tdev.used_idx % RING) as usize] = (0xdead_beef, 0);
                        tdev.used_idx = tdev.used_idx.wrapping_add(1);
                    }
                    tdev.push_used(u32::from(last), 0);
                }
            }
            7 => {
                // Device: a hostile TX used entry, or a used-index jump.
                let (Some(id), Some(k)) = (input.u32(), input.byte()) else {
                    break;
                };
                if k & 1 == 0 {
                    tdev.push_used(if id & 0x100 != 0 { id % 24 } else { id }, 0);
                } else {
                    tdev.used_idx = tdev.used_idx.wrapping_add(k as u16);
                    tdev.view.set_used_idx(tdev.used_idx);
                }
                hostile = true;
            }
            8 => {
                tx.reclaim(rx.cache_mut());
                if !hostile {
                    // Every chain the device completed, one by one or in a
                    // run, is the driver's again; the rest are in flight.
                    assert_eq!(
                        tx.in_flight() as u64,
                        tx.stats().packets - tx_done,
                        "chains the device completed are reclaimed"
                    );
                }
            }
            9 if !event_idx => {
                let f = input.byte().unwrap_or(0) as u16 & 1;
                rdev.view.set_used_flags(f);
                tdev.view.set_used_flags(f);
            }
            9 => {
                // Event indices: the device writes avail_event, honestly
                // (it read everything published and sleeps until a kick) or
                // any value; the application arms and disarms RX interrupts.
                let Some(b) = input.byte() else { break };
                if b & 1 == 0 {
                    for dev in [&mut rdev, &mut tdev] {
                        dev.fetch();
                        dev.view.set_avail_event(dev.avail_seen);
                        dev.asleep = Some(dev.avail_seen);
                    }
                } else {
                    let Some(v) = input.u16() else { break };
                    let dev = if b & 2 == 0 { &mut rdev } else { &mut tdev };
                    dev.view.set_avail_event(v);
                    dev.asleep = None;
                }
                if b & 4 != 0 {
                    let last_used = rdev.view.avail_idx().wrapping_sub(rx.in_flight() as u16);
                    rx.set_interrupts(true);
                    assert_eq!(
                        rdev.view.used_event(),
                        last_used,
                        "armed: the next used index"
                    );
                    assert_eq!(rdev.view.avail_flags(), 0);
                    rx.set_interrupts(false);
                    assert_eq!(rdev.view.used_event(), last_used.wrapping_add(0x8000));
                    assert_eq!(rdev.view.avail_flags(), 0);
                }
            }
            10 => {
                // Device: an RX used entry for a real chain with a bad length.
                rdev.fetch();
                let Some(b) = input.byte() else { break };
                if rdev.outstanding.is_empty() {
                    continue;
                }
                let id = rdev.outstanding.remove(0);
                let len = match b % 3 {
                    0 => b as u32 % VIRTIO_NET_HDR_LEN,
                    1 => VIRTIO_NET_HDR_LEN,
                    _ => VIRTIO_NET_HDR_LEN + BUF as u32 + 1 + b as u32,
                };
                rdev.push_used(id as u32, len);
                // Dropped and counted; the order of good frames is kept.
                let before = rx.stats();
                let mut sink = Vec::new();
                let (expect, was_stopped) = rx_expect(&rdev, &rx, 64);
                let got = rx.rx_burst(&mut sink, 64);
                let nombuf = rx.stats().rx_nombuf > before.rx_nombuf;
                if !hostile {
                    // Unless an empty cache stopped the burst at a good frame
                    // before it (rx_nombuf), the bad entry was read.
                    let after = rx.stats();
                    assert!(
                        after.rx_errors > before.rx_errors || after.rx_nombuf > before.rx_nombuf,
                        "a bad length is counted"
                    );
                    for p in &sink {
                        let (n, len) = expect_rx.pop_front().unwrap();
                        assert_eq!((p.len(), p.data()), (len, &pattern(n, len)[..]));
                    }
                }
                assert_eq!(got, sink.len());
                held.append(&mut sink);
                check_rx_stop(&mut rx, expect, was_stopped, nombuf, &mut held);
            }
            12 => {
                // Device: rewrite an avail-ring entry of either queue with
                // any value, after reading everything published (the driver
                // writes each slot before it publishes it). The driver never
                // reads the avail ring back, so nothing it does may change:
                // the device is not counted hostile, and every check of a
                // behaving device still holds. (Rewrites during a burst:
                // `a_device_rewriting_the_avail_ring_during_bursts_changes_
                // nothing` in rings/tests/virtq_hostile.rs, from a thread.)
                let (Some(which), Some(slot), Some(v)) = (input.byte(), input.u16(), input.u16())
                else {
                    break;
                };
                let dev = if which & 1 == 0 { &mut rdev } else { &mut tdev };
                dev.fetch();
                dev.view.set_avail_entry(slot, v);
            }
            13 => {
                // Device: overwrite the address and length of the data
                // descriptor of a chain it does not hold (completed and
                // not yet taken by the driver, or never posted) with any
                // value, after reading everything published. The driver
                // never reads a descriptor back: it keeps each chain's
                // buffer in its own memory and writes both fields again
                // before it posts the chain, so nothing may change and the
                // device is not counted hostile (`Hostile::RewriteRings` of
                // the software virtio-net device does the same end to end).
                let (Some(which), Some(pick), Some(addr), Some(len)) =
                    (input.byte(), input.byte(), input.u32(), input.u32())
                else {
                    break;
                };
                let dev = if which & 1 == 0 { &mut rdev } else { &mut tdev };
                dev.fetch();
                let free: Vec<u16> = (0..RING / 2)
                    .map(|k| 2 * k)
                    .filter(|id| !dev.outstanding.contains(id))
                    .collect();
                if let Some(&id) = free.get(pick as usize % free.len().max(1)) {
                    dev.view
                        .set_desc_buf(id + 1, u64::from(addr) << 12 | u64::from(len), len);
                }
            }
            _ => {
                // Application: drop everything held.
                held.clear();
            }
        }
        // A kick wakes the device.
        if kicks_of(&rx_kicks) != rx_seen {
            rdev.asleep = None;
            rx_seen = kicks_of(&rx_kicks);
        }
        if kicks_of(&tx_kicks) != tx_seen {
            tdev.asleep = None;
            tx_seen = kicks_of(&tx_kicks);
        }
        check(&pool, &rx, &tx, &held);
    }
    drop(held);
    drop(tx);
    drop(rx);
    assert_eq!(
        pool.free_count(),
        POOL as usize,
        "buffers lost: {} of {POOL} back after teardown",
        pool.free_count()
    );
}

/// Every buffer accounted for once.
fn check<D: Doorbell>(pool: &Mempool, rx: &VirtqRx<D>, tx: &VirtqTx<D>, held: &[Packet]) {
    let mut all: Vec<u32> = pool.free_indices();
    all.extend_from_slice(cache_of(rx));
    all.extend_from_slice(rx.armed_indices());
    all.extend(tx.in_flight_buffers().map(|(i, _)| i));
    all.extend(held.iter().map(|p| p.buf_index()));
    let distinct: HashSet<u32> = all.iter().copied().collect();
    assert_eq!(distinct.len(), all.len(), "a buffer is in two places");
    assert_eq!(
        all.len(),
        POOL as usize,
        "buffers lost: {} of {POOL} accounted for",
        all.len()
    );
}

fn cache_of<D: Doorbell>(rx: &VirtqRx<D>) -> &[u32] {
    rx.cache().cached_indices()
}

/// Forget one packet: the accounting must fail with "lost".
pub fn lose_one_buffer() {
    // receive one frame, then forget it
    run_with(&[0, 0, 60, 0, 3, 39, 4, 1], true, false);
}
