//! The hostile-device harness for the packed virtqueue (virtio 1.2 §2.8,
//! `pollnic_rings::virtq`, `VirtqLayout::Packed`): an RX and a TX packed
//! virtqueue of sizes that are not powers of two, their mempool, the RX
//! queue's `PoolCache` and the application's `Packet`s, driven against a
//! device played through `virtq::packed_device` that takes the chains the
//! driver made available and writes whatever the input says back.
//!
//! One input is a sequence of steps, one byte of opcode and its operands
//! (see [`run`]). The device takes chains, completes held ones well in any
//! order (a frame of any valid length), or writes a used descriptor with
//! any id, length and flags at its used cursor (ids never posted or already
//! completed, lengths under the header or over the buffer, AVAIL/USED bits
//! of the wrong lap or not equal), or sets its event suppression to
//! anything. The application receives, sends what it received (zero copy),
//! reclaims, drops, and arms or disarms interrupts.
//!
//! The first byte's top bit picks the receive queue's chains: two
//! descriptors (a header slot, then the buffer), or, over a pool with
//! headroom, one descriptor per buffer whose header the device writes in
//! front of the frame.
//!
//! Its next bit turns on the **header mode**: the receive queue reads the
//! 20-byte `virtio_net_hdr_v1_hash` (or the 12-byte one) with
//! `VIRTIO_NET_F_GUEST_CSUM` (`set_net_hdr(V1Hash)`,
//! `set_guest_csum(true)`), and each well-formed
//! completion writes a header from the input: any `flags`, `csum_start`,
//! `csum_offset`, `hash_value` and `hash_report`. While the device behaves
//! otherwise, every frame whose `NEEDS_CSUM` field lies outside it is
//! dropped and counted in `rx_errors`, and every other one comes out with
//! its bytes (the checksum field aside), its hash (0 when the report says
//! none), its L4 checksum status (Good for `DATA_VALID` or `NEEDS_CSUM`,
//! else not checked) and, for `NEEDS_CSUM`, the checksum completed from
//! `csum_start` to the end into `csum_start + csum_offset` (the harness's
//! own RFC 1071 sum gives the exact bytes, odd offsets included). Bit 5
//! of the first byte picks the 12-byte header (no hash) in this mode.
//!
//! Bit 4 turns on the **in-order mode** (`VIRTIO_F_IN_ORDER`:
//! `set_in_order(true)` on both queues). An honest device then completes
//! receive chains oldest first, and may complete a run of transmit chains
//! with one used descriptor naming the last of them, its used cursor
//! skipping the whole run (virtio 1.2 §2.8, in-order use of descriptors);
//! a receive completion for any other chain is misbehaviour (the driver
//! must stop the queue, never take it). The buffer ids of the transmit
//! chains the device takes must run in ring order.
//!
//! After every step:
//! - nothing panicked;
//! - every buffer of the pool is accounted for exactly once (shared free
//!   list + RX cache + RX chains + TX in flight + held by the application
//!   = capacity, no index twice), and after teardown all are free;
//! - every packet's length is at most the buffer size;
//! - while the device has only behaved, no queue stops, every received
//!   frame has the length and bytes the device wrote, and every TX chain
//!   is a zeroed 12-byte header then the frame handed to `tx_burst`;
//! - a queue stops only after the device misbehaved.
//!
//! Shared by `fuzz/fuzz_targets/virtq_packed.rs` (cargo-fuzz) and
//! `rings/tests/virtq_packed_hostile.rs` (stable, seeds and pseudo-random
//! inputs).

#![allow(dead_code)]

use pollnic_rings::virtq::packed_device::{Chain, PackedDevice};
use pollnic_rings::{
    Doorbell, IdentityMapper, Mempool, Packet, PageSize, PoolCache, VirtqLayout, VirtqRx, VirtqTx,
};
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

/// Buffers in the pool, bytes per buffer, and the two rings' sizes (odd
/// and even, neither a power of two).
const POOL: u32 = 64;
const BUF: usize = 2048;
const RX_RING: u16 = 13;
const TX_RING: u16 = 10;
const HDR: u32 = 12;
/// Headroom of the pool in the one-descriptor mode.
const HEADROOM: usize = 64;
/// `VIRTIO_NET_HDR_F_NEEDS_CSUM` and `VIRTIO_NET_HDR_F_DATA_VALID`.
const NEEDS_CSUM: u8 = 1;
const DATA_VALID: u8 = 2;

/// What a received frame must be (the header mode's oracle).
struct Expect {
    bytes: Vec<u8>,
    /// `NEEDS_CSUM`: (csum_start, csum_offset), inside the frame.
    csum: Option<(usize, usize)>,
    /// The L4 checksum reported Good.
    good: bool,
    hash: u32,
}

/// The ones' complement sum of `b` as big-endian 16-bit words (an odd last
/// byte padded with 0), plus `acc`, folded.
fn ones_fold(b: &[u8], acc: u64) -> u16 {
    let mut s: u64 = acc
        + b.chunks(2)
            .map(|c| u64::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
            .sum::<u64>();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// Counts nothing: kicks are checked by the unit tests.
struct Nop;
impl Doorbell for Nop {
    fn ring(&mut self, _: u16) {}
}

/// `VIRTQ_DESC_F_AVAIL` and `VIRTQ_DESC_F_USED`.
const AVAIL: u16 = 1 << 7;
const USED: u16 = 1 << 15;

/// Reads the input a byte at a time, 0 past its end.
struct Input<'a>(&'a [u8], usize);
impl Input<'_> {
    fn u8(&mut self) -> u8 {
        let b = self.0.get(self.1).copied().unwrap_or(0);
        self.1 += 1;
        b
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn more(&self) -> bool {
        self.1 < self.0.len()
    }
}

/// The bytes of frame `seq` of `len` bytes.
fn frame(seq: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32 ^ seq.wrapping_mul(31)) as u8)
        .collect()
}

/// Write `bytes` at identity-mapped address `a`.
fn poke(a: u64, bytes: &[u8]) {
    // SAFETY: `a` is a buffer or header slot the driver posted with at
    // least `bytes.len()` device-writable bytes (checked by the caller),
    // identity-mapped and alive while the queue is.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), a as usize as *mut u8, bytes.len()) }
}

/// Read `len` bytes at identity-mapped address `a`.
fn peek(a: u64, len: usize) -> Vec<u8> {
    // SAFETY: as in `poke`, device-readable bytes the driver posted.
    unsafe { std::slice::from_raw_parts(a as usize as *const u8, len) }.to_vec()
}

/// Run one input (module docs). Opcodes (low 3 bits of a step's byte):
/// 0 take an RX chain; 1 complete a held RX chain (index, length) well;
/// 2 write a used RX descriptor (id, length, flag bits) as given;
/// 3 receive (burst size); 4 send back or drop what was received;
/// 5 take and complete TX chains (how many, well or with a given id);
/// 6 reclaim TX; 7 the device's event suppression, and interrupts.
pub fn run(data: &[u8]) {
    let one = data.first().is_some_and(|b| b & 0x80 != 0);
    let header_mode = data.first().is_some_and(|b| b & 0x40 != 0);
    // Header mode: bit 5 picks the 12-byte header (no hash) over the
    // 20-byte one with the hash.
    let hash_hdr = header_mode && data.first().is_some_and(|b| b & 0x20 == 0);
    let in_order = data.first().is_some_and(|b| b & 0x10 != 0);
    // The receive header's length.
    let rx_hdr: u32 = if hash_hdr { 20 } else { HDR };
    let headroom = if one { HEADROOM } else { 0 };
    let pool = Mempool::with_headroom(
        POOL,
        BUF,
        headroom,
        PageSize::Small4K,
        Arc::new(IdentityMapper),
    )
    .unwrap();
    // The data room, and descriptors per RX chain.
    let room = BUF - headroom;
    let per_chain: u16 = if one { 1 } else { 2 };
    let mapper: Arc<dyn pollnic_rings::DmaMapper> = Arc::new(IdentityMapper);
    let mut rx = VirtqRx::with_layout(
        VirtqLayout::Packed,
        RX_RING,
        PageSize::Small4K,
        mapper.clone(),
        &pool,
        Nop,
    )
    .unwrap();
    let mut tx =
        VirtqTx::with_layout(VirtqLayout::Packed, TX_RING, PageSize::Small4K, mapper, Nop).unwrap();
    if header_mode {
        if hash_hdr {
            rx.set_net_hdr(pollnic_rings::NetHdr::V1Hash);
        }
        rx.set_guest_csum(true);
    }
    rx.set_in_order(in_order);
    tx.set_in_order(in_order);
    rx.start();
    // The next transmit buffer id in ring order (in-order mode).
    let tx_chains = TX_RING / 2;
    let mut next_tx_id = 0u16;
    // SAFETY: identity-mapped queues, alive until the teardown below; the
    // views are not used after it.
    let mut rdev = unsafe { PackedDevice::new(rx.addrs()) };
    // SAFETY: as above.
    let mut tdev = unsafe { PackedDevice::new(tx.addrs()) };
    let mut tx_cache = PoolCache::new(pool.clone(), 8);
    let mut input = Input(data, 0);
    // The RX chains the device holds, and the frames it completed (in the
    // order their used descriptors were written) while it behaved.
    let mut held: Vec<(Chain, (u64, u64))> = Vec::new();
    // `None`: a frame the driver must drop (and count in `rx_errors`).
    let mut expected: VecDeque<Option<Expect>> = VecDeque::new();
    // The frames handed to tx_burst, in order, not yet read by the device.
    let mut sent: VecDeque<Vec<u8>> = VecDeque::new();
    let mut app: Vec<Packet> = Vec::new();
    let mut honest = true;
    let mut seq = 0u32;
    // TX chains the device completed while honest.
    let mut tx_done = 0u64;
    while input.more() {
        match input.u8() & 7 {
            0 => {
                if let Some(c) = rdev.take() {
                    // Once the device wrote descriptors of its own choosing
                    // where it liked, its view of the ring is its own
                    // business: only an honest device's chains are checked.
                    // (address of the header, of the data) when the chain
                    // has the shape the driver posts.
                    let shape = match c.bufs[..] {
                        [(h, hl, _), (b, l, _)] if !one && hl == rx_hdr && l as usize == room => {
                            Some((h, b))
                        }
                        [(a, l, _)] if one && l as usize == rx_hdr as usize + room => {
                            Some((a, a + u64::from(rx_hdr)))
                        }
                        _ => None,
                    };
                    if honest {
                        assert!(shape.is_some(), "RX chains are as posted: {c:?}");
                        assert!(c.bufs.iter().all(|b| b.2), "RX chains are device-writable");
                    }
                    if let Some(at) = shape {
                        held.push((c, at));
                    }
                }
            }
            1 => {
                let i = input.u8() as usize;
                let len = 1 + (input.u16() as usize % room);
                // The header mode's fields (read whether or not a chain is
                // held, so that an input means the same either way).
                // With bit 7 of the flags clear, start and offset are kept
                // small, so that most checksum fields lie inside the frame;
                // with it set, any value (the flag means nothing to the
                // driver, which reads only NEEDS_CSUM and DATA_VALID).
                let (hflags, start, offset) = if header_mode {
                    let (f, s, o) = (input.u8(), input.u16(), input.u16());
                    if f & 0x80 != 0 {
                        (f, s, o)
                    } else {
                        (f, s % 96, o % 32)
                    }
                } else {
                    (0, 0, 0)
                };
                let (hash, report) = if header_mode {
                    (
                        u32::from(input.u16()) << 16 | u32::from(input.u16()),
                        input.u8() as u16 % 4,
                    )
                } else {
                    (0, 0)
                };
                if !held.is_empty() {
                    // In order an honest device completes the oldest chain;
                    // any other is misbehaviour, which the driver must stop
                    // at (its frame is then never expected).
                    let at = if in_order && i & 0x80 == 0 {
                        0
                    } else {
                        i % held.len()
                    };
                    if in_order && at != 0 {
                        honest = false;
                    }
                    let (c, (h, b)) = held.remove(at);
                    let f = frame(seq, len);
                    seq += 1;
                    // Only an honest device's chains are sure to be the
                    // driver's (a hostile one may have written descriptors
                    // with any address): write memory only then.
                    let mut hdr = vec![0u8; rx_hdr as usize];
                    hdr[0] = hflags;
                    hdr[6..8].copy_from_slice(&start.to_le_bytes());
                    hdr[8..10].copy_from_slice(&offset.to_le_bytes());
                    hdr[10..12].copy_from_slice(&1u16.to_le_bytes());
                    if hash_hdr {
                        hdr[12..16].copy_from_slice(&hash.to_le_bytes());
                        hdr[16..18].copy_from_slice(&report.to_le_bytes());
                    }
                    if honest {
                        poke(h, &hdr);
                        poke(b, &f);
                    }
                    rdev.push_used(c.id, rx_hdr + len as u32, per_chain);
                    let (s, o) = (usize::from(start), usize::from(offset));
                    let needs = header_mode && hflags & NEEDS_CSUM != 0;
                    expected.push_back((!needs || s + o + 2 <= len).then(|| Expect {
                        bytes: f,
                        csum: needs.then_some((s, o)),
                        good: header_mode && hflags & (NEEDS_CSUM | DATA_VALID) != 0,
                        hash: if report == 0 || !hash_hdr { 0 } else { hash },
                    }));
                }
            }
            2 => {
                let id = input.u16();
                let len = u32::from(input.u16());
                let bits = input.u8();
                let flags =
                    if bits & 1 != 0 { AVAIL } else { 0 } | if bits & 2 != 0 { USED } else { 0 };
                let (pos, _) = rdev.used;
                rdev.write_used_raw(pos, id, len, flags);
                rdev.used = {
                    let next = u32::from(pos) + u32::from(per_chain);
                    let size = u32::from(rdev.size());
                    if next >= size {
                        ((next - size) as u16, !rdev.used.1)
                    } else {
                        (next as u16, rdev.used.1)
                    }
                };
                honest = false;
            }
            3 => {
                let max = input.u8() as usize % 40;
                let before = app.len();
                let errors = rx.stats().rx_errors;
                rx.rx_burst(&mut app, max);
                let dropped = rx.stats().rx_errors - errors;
                for p in &app[before..] {
                    assert!(p.len() <= room, "a packet longer than its buffer");
                }
                if honest {
                    // The burst took, in order, its packets and the frames
                    // it dropped: exactly those, and the dropped ones only
                    // where a checksum field lay outside the frame.
                    let mut got = app[before..].iter();
                    for _ in 0..(app.len() - before) as u64 + dropped {
                        if let Some(want) = expected.pop_front().expect("a frame the device wrote")
                        {
                            check_frame(got.next().expect("a packet"), &want);
                        }
                    }
                    assert!(got.next().is_none(), "more packets than expected frames");
                }
            }
            4 => {
                if input.u8() & 1 == 0 {
                    let n = app.len();
                    let before: Vec<Vec<u8>> = app.iter().map(|p| p.data().to_vec()).collect();
                    let taken = tx.tx_burst(&mut app, &mut tx_cache);
                    assert!(taken <= n);
                    // `tx_burst` takes from the front; an empty packet is
                    // refused, not sent.
                    for f in before.into_iter().take(taken) {
                        if !f.is_empty() {
                            sent.push_back(f);
                        }
                    }
                } else {
                    app.clear();
                }
            }
            5 => {
                let n = input.u8() % 8;
                let bogus = input.u8();
                let id = input.u16();
                // In order, bit 1: one used descriptor for the whole run.
                let batch = in_order && bogus & 2 != 0;
                let mut run = (0u16, None);
                for _ in 0..n {
                    let Some(c) = tdev.take() else { break };
                    if honest && in_order {
                        assert_eq!(c.id, next_tx_id, "TX buffer ids in ring order");
                        next_tx_id = (next_tx_id + 1) % tx_chains;
                    }
                    if batch && bogus & 1 == 0 {
                        if honest {
                            let data = peek(c.bufs[1].0, c.bufs[1].1 as usize);
                            assert_eq!(
                                Some(data),
                                sent.pop_front(),
                                "the frame handed to tx_burst"
                            );
                        }
                        run = (run.0 + 1, Some(c.id));
                        continue;
                    }
                    if honest {
                        assert_eq!(c.bufs.len(), 2);
                        assert!(c.bufs.iter().all(|b| !b.2), "TX chains are device-readable");
                        assert_eq!(c.bufs[0].1, HDR);
                        assert_eq!(peek(c.bufs[0].0, HDR as usize), vec![0u8; HDR as usize]);
                        let data = peek(c.bufs[1].0, c.bufs[1].1 as usize);
                        assert_eq!(Some(data), sent.pop_front(), "the frame handed to tx_burst");
                    }
                    if bogus & 1 != 0 {
                        tdev.push_used(id, 0, 2);
                        honest = false;
                    } else {
                        tdev.push_used(c.id, 0, 2);
                        tx_done += 1;
                    }
                }
                if let (k, Some(last)) = run {
                    tdev.push_used(last, 0, 2 * k);
                    tx_done += u64::from(k);
                }
            }
            6 => {
                tx.reclaim(&mut tx_cache);
                if honest {
                    // Every chain the device completed (one by one or in a
                    // run) is the driver's again; the rest are in flight.
                    assert_eq!(
                        tx.in_flight() as u64,
                        tx.stats().packets - tx_done,
                        "chains the device completed are reclaimed"
                    );
                }
            }
            _ => {
                let off_wrap = input.u16();
                let flags = input.u16();
                rdev.set_device_event(off_wrap, flags);
                tdev.set_device_event(off_wrap, flags);
                rx.set_interrupts(flags & 4 != 0);
            }
        }
        if honest {
            assert!(
                !rx.virtq_stats().stopped,
                "an RX stop with an honest device"
            );
            assert!(!tx.virtq_stats().stopped, "a TX stop with an honest device");
            assert_eq!(
                rx.virtq_stats().device_errors + tx.virtq_stats().device_errors,
                0
            );
        }
        check(&pool, &rx, &tx, &tx_cache, &app);
    }
    drop(app);
    // (The device views hold only addresses; they are not used below.)
    drop(rx);
    drop(tx);
    drop(tx_cache);
    assert_eq!(
        pool.free_count(),
        POOL as usize,
        "buffers lost after teardown"
    );
}

/// A received frame against what the honest device wrote.
fn check_frame(p: &Packet, want: &Expect) {
    let got = p.data();
    assert_eq!(got.len(), want.bytes.len(), "received length");
    assert_eq!(p.rss_hash(), want.hash, "the header's hash");
    let l4 = p.rx_checksum().l4;
    let good = pollnic_hw::offload::ChecksumStatus::Good;
    assert_eq!(l4 == good, want.good, "L4 checksum status {l4:?}");
    match want.csum {
        None => assert_eq!(got, &want.bytes[..], "received bytes"),
        Some((s, o)) => {
            // The checksum as virtio 1.2 §5.1.6.4 and DPDK
            // `virtio_rx_offload` complete it, computed here with the
            // harness's own sum: the ones' complement of the sum from
            // `csum_start` to the end (the field holding what the device
            // put there), big-endian at `csum_start + csum_offset`; 0 in a
            // UDP field (offset 6) sent as 0xffff (RFC 768).
            let at = s + o;
            let mut sum = !ones_fold(&want.bytes[s..], 0);
            if sum == 0 && o == 6 {
                sum = 0xffff;
            }
            let mut exp = want.bytes.clone();
            exp[at..at + 2].copy_from_slice(&sum.to_be_bytes());
            assert_eq!(got, &exp[..], "received bytes with the checksum completed");
        }
    }
}

/// Every buffer accounted for once.
fn check<D: Doorbell>(
    pool: &Mempool,
    rx: &VirtqRx<D>,
    tx: &VirtqTx<D>,
    tx_cache: &PoolCache,
    held: &[Packet],
) {
    let mut all: Vec<u32> = pool.free_indices();
    all.extend_from_slice(rx.cache().cached_indices());
    all.extend_from_slice(tx_cache.cached_indices());
    all.extend_from_slice(rx.armed_indices());
    all.extend(tx.in_flight_buffers().map(|(i, _)| i));
    all.extend(held.iter().map(|p| p.buf_index()));
    let distinct: HashSet<u32> = all.iter().copied().collect();
    assert_eq!(distinct.len(), all.len(), "a buffer is in two places");
    assert_eq!(
        all.len(),
        POOL as usize,
        "buffers lost: {} of {POOL}",
        all.len()
    );
}
