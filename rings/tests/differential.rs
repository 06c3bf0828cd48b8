//! The vector burst loops against the scalar ones: two twin queues (RX ring,
//! TX ring, mempool, cache), one on each path, are fed the same device
//! write-backs and the same application calls, and must agree after every
//! step on the frames handed up (buffer, length, RSS hash, order), the
//! counters, the ring state (next index, tail, armed buffers, every
//! descriptor's contents, TX in flight), the tail register writes and the
//! cache's and mempool's free buffers.
//!
//! Write-back sequences: normal frames, torn ones (DD showing before the
//! length: length 0), hostile ones (error bits, no EOP, chains, lengths of
//! 0, above the buffer or in the VLAN field, DD on descriptors the device was
//! never given), and none at all; at every burst size from 1 to 64, on rings
//! of 8, 16, 64 and 512 descriptors, many times around the ring's end, with
//! a mempool small enough to run dry (`rx_nombuf`).

use pollnic_hw::desc::{
    RawDesc, RxCompletion, RXD_ERR_IPE, RXD_ERR_L4E, RXD_ERR_RXE, RXD_STAT_DD, RXD_STAT_EOP,
    TXD_STAT_DD,
};
use pollnic_rings::{
    DataPath, DescRing, Doorbell, IdentityMapper, Mempool, Packet, PageSize, PoolCache, RxRing,
    RxStats, TxRing, TxStats,
};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// A tail register that records every write.
#[derive(Clone)]
struct Log(Rc<RefCell<Vec<u16>>>);

impl Doorbell for Log {
    fn ring(&mut self, tail: u16) {
        self.0.borrow_mut().push(tail);
    }
}

/// xorshift64*: the same pseudo-random steps for both twins.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn dev_write(ring: &DescRing, i: u16, d: RawDesc) {
    let p = ring.as_ptr().wrapping_add((i & ring.mask()) as usize);
    // SAFETY: `i & mask < count`, in the ring's region; the rings touch this
    // memory only with volatile accesses through raw pointers, so this
    // models the device's DMA write.
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

/// One queue on one path.
struct Twin {
    pool: Mempool,
    rx: RxRing<Log>,
    tx: TxRing<Log>,
    rdt: Log,
    tdt: Log,
    /// Frames the application holds.
    held: Vec<Packet>,
    /// What each burst handed up, as (buffer, length, hash, RX status word).
    seen: Vec<(u32, usize, u32, u32)>,
    /// Foreign-pool packets to mix into TX (another pool, same address space).
    other: Mempool,
    other_cache: PoolCache,
}

impl Twin {
    fn new(ring: u16, pool_size: u32, path: DataPath, offload: Option<u32>) -> Twin {
        let m = Arc::new(IdentityMapper);
        let pool = Mempool::new(pool_size, 2048, PageSize::Small4K, m.clone()).unwrap();
        let other = Mempool::new(64, 2048, PageSize::Small4K, m.clone()).unwrap();
        let rdt = Log(Rc::default());
        let tdt = Log(Rc::default());
        let rd = DescRing::new(ring, PageSize::Small4K, m.clone()).unwrap();
        let td = DescRing::new(ring, PageSize::Small4K, m).unwrap();
        let mut rx = RxRing::new(rd, &pool, rdt.clone()).unwrap();
        rx.set_data_path(path);
        if let Some(l4e_bit) = offload {
            rx.set_offload_status(true, l4e_bit);
        }
        rx.start();
        let mut tx = TxRing::new(td, &pool, tdt.clone());
        tx.set_data_path(path);
        assert_eq!(rx.data_path(), path);
        assert_eq!(tx.data_path(), path);
        let other_cache = PoolCache::new(other.clone(), 16);
        Twin {
            pool,
            rx,
            tx,
            rdt,
            tdt,
            held: Vec::new(),
            seen: Vec::new(),
            other,
            other_cache,
        }
    }
}

/// Everything observable of a twin, for comparison.
#[derive(Debug, PartialEq, Eq)]
struct State {
    rx_stats: RxStats,
    tx_stats: TxStats,
    next: u16,
    tail: u16,
    armed: Vec<u32>,
    rx_descs: Vec<RawDesc>,
    tx_descs: Vec<RawDesc>,
    in_flight: Vec<(u32, bool)>,
    rdt: Vec<u16>,
    tdt: Vec<u16>,
    cache: Vec<u32>,
    pool_free: Vec<u32>,
    other_free: usize,
    held: Vec<(u32, usize, u32, u32)>,
    seen: Vec<(u32, usize, u32, u32)>,
}

/// A descriptor with any buffer address made relative to its pool (the
/// twins' pools sit at different addresses): tagged `1 << 60` for the ring's
/// own pool, `2 << 60` for the other one.
fn norm(t: &Twin, d: RawDesc) -> RawDesc {
    let rel = |p: &Mempool, tag: u64| {
        let (base, len) = (p.region().iova(), p.region().len() as u64);
        (d.lo.wrapping_sub(base) < len).then(|| (d.lo - base) | tag << 60)
    };
    let lo = rel(&t.pool, 1).or_else(|| rel(&t.other, 2)).unwrap_or(d.lo);
    RawDesc { lo, hi: d.hi }
}

fn state(t: &mut Twin) -> State {
    let n = t.rx.desc().count();
    State {
        rx_stats: t.rx.stats(),
        tx_stats: t.tx.stats(),
        next: t.rx.next_index(),
        tail: t.rx.tail_index(),
        armed: t.rx.armed_indices().to_vec(),
        rx_descs: (0..n).map(|i| norm(t, dev_read(t.rx.desc(), i))).collect(),
        tx_descs: (0..n).map(|i| norm(t, dev_read(t.tx.desc(), i))).collect(),
        in_flight: t.tx.in_flight_buffers().collect(),
        rdt: t.rdt.0.borrow().clone(),
        tdt: t.tdt.0.borrow().clone(),
        cache: t.rx.cache_mut().cached_indices().to_vec(),
        pool_free: {
            let mut v = t.pool.free_indices();
            v.sort_unstable();
            v
        },
        other_free: t.other.free_count(),
        held: t
            .held
            .iter()
            .map(|p| (p.buf_index(), p.len(), p.rss_hash(), p.rx_status_word()))
            .collect(),
        seen: std::mem::take(&mut t.seen),
    }
}

/// The device's view of the RX ring: its head, and where software's tail is.
struct Dev {
    head: u16,
    tx_head: u16,
}

/// What kind of write-backs a scenario produces.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Normal,
    Torn,
    Hostile,
    Empty,
}

/// One RX write-back for descriptor `i` (the same for both twins).
fn write_back(kind: Kind, rng: &mut Rng, buf: u16) -> RawDesc {
    // Good frames carry random offload status (VP, UDPCS, L4CS, IPCS and
    // the checksum error bits 29 and 30, none of which makes a frame bad)
    // and a random VLAN field, so that a ring keeping the status shows
    // any difference between the paths' status words.
    let good = RxCompletion {
        len: 60 + rng.below(buf as u64 - 59) as u16,
        status_error: RXD_STAT_DD | RXD_STAT_EOP | (rng.next() as u32 & (0x78 | 0x6000_0000)),
        rss_hash: rng.next() as u32,
        pkt_info: rng.next() as u16,
        vlan: rng.next() as u16,
    };
    let wb = match kind {
        Kind::Normal | Kind::Empty => good,
        // DD shows, the length not yet (QEMU's igb as seen by a TCG vCPU).
        Kind::Torn => {
            if rng.below(3) == 0 {
                RxCompletion { len: 0, ..good }
            } else {
                good
            }
        }
        Kind::Hostile => match rng.below(10) {
            0 => RxCompletion {
                status_error: good.status_error | RXD_ERR_RXE,
                ..good
            },
            1 => RxCompletion {
                status_error: good.status_error | RXD_ERR_IPE | RXD_ERR_L4E,
                ..good
            },
            2 => RxCompletion {
                status_error: RXD_STAT_DD,
                ..good
            },
            3 => RxCompletion { len: 0, ..good },
            4 => RxCompletion {
                len: buf + 1 + rng.below(60000) as u16,
                ..good
            },
            5 => RxCompletion {
                len: buf,
                vlan: 0xffff,
                ..good
            },
            6 => RxCompletion { len: 1, ..good },
            7 => RxCompletion {
                status_error: rng.next() as u32 | RXD_STAT_DD,
                ..good
            },
            _ => good,
        },
    };
    wb.encode()
}

/// The device receives up to `k` frames into both twins' rings: write-backs
/// at its head, never past the tail software gave it (except a hostile
/// device, which also writes DD where it likes).
fn deliver(twins: &mut [Twin; 2], dev: &mut Dev, kind: Kind, k: u16, rng: &mut Rng) {
    if matches!(kind, Kind::Empty) {
        return;
    }
    let count = twins[0].rx.desc().count();
    let mask = count - 1;
    let tail = twins[0].rx.tail_index();
    for _ in 0..k {
        if matches!(kind, Kind::Hostile) && rng.below(16) == 0 {
            // DD on any descriptor, owned or not.
            let i = rng.below(count as u64) as u16;
            let d = write_back(kind, rng, 2048);
            for t in twins.iter() {
                dev_write(t.rx.desc(), i, d);
            }
            continue;
        }
        if dev.head == tail {
            break; // head == tail: the device owns nothing more
        }
        let d = write_back(kind, rng, 2048);
        for t in twins.iter() {
            dev_write(t.rx.desc(), dev.head, d);
        }
        dev.head = (dev.head + 1) & mask;
    }
}

/// The device sends what was queued on both TX rings and writes DD back
/// where RS asks for it.
fn complete_tx(twins: &mut [Twin; 2], dev: &mut Dev, upto: u16) {
    let count = twins[0].tx.desc().count();
    let mask = count - 1;
    let tdt = *twins[0].tdt.0.borrow().last().unwrap_or(&0);
    let mut n = 0;
    while dev.tx_head != tdt && n < upto {
        for t in twins.iter() {
            let d = dev_read(t.tx.desc(), dev.tx_head);
            if d.hi as u32 & pollnic_hw::desc::TXD_DCMD_RS != 0 {
                let done = RawDesc {
                    lo: d.lo,
                    hi: d.hi | (TXD_STAT_DD as u64) << 32,
                };
                dev_write(t.tx.desc(), dev.tx_head, done);
            }
        }
        dev.tx_head = (dev.tx_head + 1) & mask;
        n += 1;
    }
}

/// One scenario: `rounds` rounds of deliver / receive / forward / free on a
/// ring of `ring` descriptors with bursts of `burst`.
fn scenario(ring: u16, pool_size: u32, burst: usize, kind: Kind, seed: u64, rounds: usize) {
    // Offload status off, or on with igb's or the 82599's error layout.
    let offload = [None, Some(29), Some(30)][(seed % 3) as usize];
    let mut twins = [
        Twin::new(ring, pool_size, DataPath::Scalar, offload),
        Twin::new(ring, pool_size, DataPath::Vector, offload),
    ];
    let mut rng = Rng(seed | 1);
    let mut dev = Dev {
        head: 0,
        tx_head: 0,
    };
    let ctx = |step: usize| format!("ring {ring} burst {burst} {kind:?} seed {seed} step {step}");
    for step in 0..rounds {
        let k = rng.below(ring as u64 + 1) as u16;
        deliver(&mut twins, &mut dev, kind, k, &mut rng);
        // Application: receive, then forward, hold or free (same choice for both).
        let bursts = 1 + rng.below(3);
        let what = rng.below(8);
        let tx_take = rng.below(burst as u64 + 8) as usize;
        let foreign = rng.below(6) == 0;
        let zero_len = rng.below(10) == 0;
        let complete = rng.below(ring as u64);
        for t in twins.iter_mut() {
            for _ in 0..bursts {
                let mut got = Vec::with_capacity(burst);
                let n = t.rx.rx_burst(&mut got, burst);
                assert_eq!(n, got.len());
                t.seen.extend(
                    got.iter()
                        .map(|p| (p.buf_index(), p.len(), p.rss_hash(), p.rx_status_word())),
                );
                t.held.append(&mut got);
            }
            match what {
                // Forward what is held, as a burst of `tx_take` at most.
                0..=4 => {
                    let mut out: Vec<Packet> = t.held.drain(..tx_take.min(t.held.len())).collect();
                    if foreign {
                        // A packet of another pool in the middle.
                        if let Some(mut p) = t.other_cache.alloc() {
                            p.set_len(100).unwrap();
                            let at = out.len() / 2;
                            out.insert(at, p);
                        }
                    }
                    if zero_len && !out.is_empty() {
                        let at = out.len() - 1;
                        out[at].set_len(0).unwrap(); // refused: tx_errors
                    }
                    t.tx.tx_burst(&mut out, t.rx.cache_mut());
                    // What did not fit goes back to the front of `held`.
                    out.append(&mut t.held);
                    t.held = out;
                }
                // Free in bulk.
                5 | 6 => t.rx.cache_mut().free_bulk(&mut t.held),
                // Hold (the pool may run dry: rx_nombuf).
                _ => {}
            }
        }
        complete_tx(&mut twins, &mut dev, complete as u16);
        if rng.below(4) == 0 {
            for t in twins.iter_mut() {
                t.tx.reclaim(t.rx.cache_mut());
            }
        }
        let [a, b] = &mut twins;
        assert_eq!(state(a), state(b), "{}", ctx(step));
    }
    // Both saw traffic (the comparison compared something).
    assert!(
        twins[0].rx.stats().packets + twins[0].rx.stats().rx_errors > 0
            || matches!(kind, Kind::Empty)
    );
}

#[test]
fn both_paths_agree_on_normal_write_backs_at_every_burst() {
    for burst in 1..=64 {
        for ring in [8u16, 64] {
            scenario(
                ring,
                ring as u32 * 3,
                burst,
                Kind::Normal,
                burst as u64 * 7 + ring as u64,
                120,
            );
        }
    }
}

#[test]
fn both_paths_agree_on_torn_write_backs_at_every_burst() {
    for burst in 1..=64 {
        for ring in [16u16, 64] {
            scenario(
                ring,
                ring as u32 * 3,
                burst,
                Kind::Torn,
                burst as u64 * 13 + 5,
                120,
            );
        }
    }
}

#[test]
fn both_paths_agree_on_hostile_write_backs_at_every_burst() {
    for burst in 1..=64 {
        for ring in [8u16, 64] {
            scenario(
                ring,
                ring as u32 * 3,
                burst,
                Kind::Hostile,
                burst as u64 * 31 + 9,
                120,
            );
        }
    }
}

#[test]
fn both_paths_agree_on_empty_rings_at_every_burst() {
    for burst in 1..=64 {
        scenario(64, 192, burst, Kind::Empty, burst as u64, 20);
    }
}

#[test]
fn both_paths_agree_when_the_pool_runs_dry() {
    // Barely more buffers than the ring: holding frames starves the refill.
    for burst in [1, 3, 4, 5, 8, 31, 32, 33, 64] {
        for kind in [Kind::Normal, Kind::Torn, Kind::Hostile] {
            scenario(64, 80, burst, kind, burst as u64 * 101, 200);
        }
    }
}

#[test]
fn both_paths_agree_on_a_large_ring_many_times_round() {
    for burst in [1, 4, 7, 32, 64] {
        for kind in [Kind::Normal, Kind::Torn, Kind::Hostile] {
            scenario(512, 2048, burst, kind, burst as u64 * 3 + 1, 300);
        }
    }
}

#[test]
fn the_vector_path_takes_four_at_a_time() {
    // Not only equal: the vector steps run. 32 good frames, burst 32, on
    // both paths; the vector ring's packets come out in ring order with the
    // lengths written, the same as the scalar's.
    let mut twins = [
        Twin::new(64, 192, DataPath::Scalar, None),
        Twin::new(64, 192, DataPath::Vector, None),
    ];
    let mut rng = Rng(42);
    let mut dev = Dev {
        head: 0,
        tx_head: 0,
    };
    deliver(&mut twins, &mut dev, Kind::Normal, 32, &mut rng);
    for t in twins.iter_mut() {
        let mut got = Vec::new();
        assert_eq!(t.rx.rx_burst(&mut got, 32), 32);
        let before = t.tx.stats();
        assert_eq!(t.tx.tx_burst(&mut got, t.rx.cache_mut()), 32);
        assert_eq!(t.tx.stats().packets - before.packets, 32);
    }
    let [a, b] = &mut twins;
    assert_eq!(state(a), state(b));
}
