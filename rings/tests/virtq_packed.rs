//! Packed virtqueues (virtio 1.2 §2.8) against a device played through
//! `virtq::packed_device`: frames in and out exact over many laps of rings
//! whose size is not a power of two (both wrap counters flip), used
//! descriptors out of order, notifications as the device's event
//! suppression asks, every buffer back to its pool on drop; and each
//! protocol break a hostile device can make (a used descriptor with the
//! wrong wrap or used bit, an id never posted or already completed, a
//! length beyond the buffer or under the header) stops the queue or is
//! counted, never followed. The receive tests run twice: over a plain
//! pool (two-descriptor chains, the header in a slot of the ring) and over
//! a pool with headroom (one descriptor per buffer, the header in front of
//! the frame).

use pollnic_rings::virtq::packed_device::PackedDevice;
use pollnic_rings::{
    CtrlError, Doorbell, IdentityMapper, Mempool, NetHdr, Packet, PageSize, VirtqCtrl, VirtqLayout,
    VirtqRx, VirtqTx,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// `VIRTQ_DESC_F_AVAIL` and `VIRTQ_DESC_F_USED` (§2.8.1).
const AVAIL: u16 = 1 << 7;
const USED: u16 = 1 << 15;
/// Event suppression flags (§2.8.10).
const ENABLE: u16 = 0;
const DISABLE: u16 = 1;
const DESC: u16 = 2;

#[derive(Clone, Default)]
struct Bell(Arc<AtomicU64>);
impl Doorbell for Bell {
    fn ring(&mut self, _: u16) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}
impl Bell {
    fn count(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

fn pool(n: u32) -> Mempool {
    Mempool::new(n, 2048, PageSize::Small4K, Arc::new(IdentityMapper)).unwrap()
}

/// A pool whose buffers keep 64 bytes of headroom: packed receive queues
/// over it post one descriptor per buffer.
fn hpool(n: u32) -> Mempool {
    Mempool::with_headroom(n, 2048, 64, PageSize::Small4K, Arc::new(IdentityMapper)).unwrap()
}

/// Both kinds of receive pool, with `n` buffers each.
fn pools(n: u32) -> [Mempool; 2] {
    [pool(n), hpool(n)]
}

/// A packed receive queue over `pool`, not started (headers and checksum
/// flags still to be set).
fn unstarted_rx(size: u16, pool: &Mempool, bell: Bell) -> VirtqRx<Bell> {
    VirtqRx::with_layout(
        VirtqLayout::Packed,
        size,
        PageSize::Small4K,
        Arc::new(IdentityMapper),
        pool,
        bell,
    )
    .unwrap()
}

fn rx(size: u16, pool: &Mempool) -> (VirtqRx<Bell>, PackedDevice, Bell) {
    let bell = Bell::default();
    let mut rx = unstarted_rx(size, pool, bell.clone());
    rx.start();
    // SAFETY: identity-mapped; every test keeps the queue alive while it
    // uses the view.
    let dev = unsafe { PackedDevice::new(rx.addrs()) };
    (rx, dev, bell)
}

fn tx(size: u16) -> (VirtqTx<Bell>, PackedDevice, Bell) {
    let bell = Bell::default();
    let tx = VirtqTx::with_layout(
        VirtqLayout::Packed,
        size,
        PageSize::Small4K,
        Arc::new(IdentityMapper),
        bell.clone(),
    )
    .unwrap();
    // SAFETY: as in `rx`.
    let dev = unsafe { PackedDevice::new(tx.addrs()) };
    (tx, dev, bell)
}

/// Write `frame` into a chain the device took (header zeroed, then the
/// frame) and return the used length. A chain is a header descriptor then
/// the buffer, or one descriptor holding both (its buffer 2048 bytes less
/// 64 of headroom, after the header).
fn fill(chain: &pollnic_rings::virtq::packed_device::Chain, hdr: u32, frame: &[u8]) -> u32 {
    let (h, hl, hw, b, bl, bw) = match chain.bufs[..] {
        [(h, hl, hw), (b, bl, bw)] => (h, hl, hw, b, bl, bw),
        [(a, l, w)] => {
            assert_eq!(l, hdr + 2048 - 64, "one descriptor: header and data room");
            (a, hdr, w, a + u64::from(hdr), l - hdr, w)
        }
        _ => panic!("a receive chain is one or two descriptors: {chain:?}"),
    };
    assert!(hw && bw, "RX descriptors are device-writable");
    assert_eq!(hl, hdr);
    assert!(frame.len() <= bl as usize);
    // SAFETY: identity-mapped buffers of the lengths the driver posted.
    unsafe {
        std::ptr::write_bytes(h as usize as *mut u8, 0, hl as usize);
        std::ptr::copy_nonoverlapping(frame.as_ptr(), b as usize as *mut u8, frame.len());
    }
    hdr + frame.len() as u32
}

/// Fill `p` with `bytes`.
fn put(p: &mut Packet, bytes: &[u8]) {
    p.set_len(bytes.len()).unwrap();
    p.data_mut().copy_from_slice(bytes);
}

fn frame(n: usize, tag: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(7) ^ tag).collect()
}

#[test]
fn rx_frames_come_out_exact_over_many_laps_of_an_odd_ring_and_out_of_order() {
    for pool in pools(64) {
        rx_laps(pool);
    }
}

fn rx_laps(pool: Mempool) {
    // 13 descriptors: 6 chains of two, one slot always free, or 13 of one;
    // positions of chain heads shift every lap, both wrap counters flip
    // many times.
    let (mut rx, mut dev, bell) = rx(13, &pool);
    let one = pool.headroom() > 0;
    assert_eq!(
        (rx.layout(), rx.chains()),
        (VirtqLayout::Packed, if one { 13 } else { 6 })
    );
    assert_eq!(
        dev.driver_event().1,
        DISABLE,
        "poll mode asks for no interrupts"
    );
    assert_eq!(bell.count(), 1, "start kicks once");
    let mut got = Vec::new();
    let mut tag = 0u8;
    for lap in 0..200 {
        // Take up to 3 chains and use them in reverse order.
        let mut chains: Vec<_> = (0..3).filter_map(|_| dev.take()).collect();
        assert!(!chains.is_empty(), "lap {lap}: the driver re-posted");
        chains.reverse();
        let mut sent = Vec::new();
        for c in &chains {
            let len = [64usize, 1518, 60, pool.buf_size()][(tag % 4) as usize];
            let f = frame(len, tag);
            tag = tag.wrapping_add(1);
            let used = fill(c, 12, &f);
            dev.push_used(c.id, used, c.bufs.len() as u16);
            sent.push(f);
        }
        let n = rx.rx_burst(&mut got, 32);
        assert_eq!(n, sent.len(), "lap {lap}");
        for (p, f) in got.drain(..).zip(&sent) {
            assert_eq!(p.data(), &f[..], "lap {lap}");
        }
        assert_eq!(rx.rx_burst(&mut got, 32), 0, "nothing more used");
    }
    let s = rx.stats();
    assert_eq!((s.rx_errors, rx.virtq_stats().device_errors), (0, 0));
    assert!(!rx.virtq_stats().stopped);
    drop(rx);
    assert_eq!(pool.free_count(), 64, "every buffer back on drop");
}

/// One descriptor per buffer: the descriptor starts the header's length
/// before the packet, the device's header there is read (hash, checksum
/// flags) and not handed up, and the frame starts at the packet's first
/// byte.
#[test]
fn a_one_descriptor_chain_has_its_header_in_the_buffers_headroom() {
    let pool = hpool(32);
    let mut rx = unstarted_rx(8, &pool, Bell::default());
    rx.set_net_hdr(NetHdr::V1Hash);
    rx.set_guest_csum(true);
    rx.start();
    assert_eq!(rx.chains(), 8);
    // SAFETY: as in `rx`.
    let mut dev = unsafe { PackedDevice::new(rx.addrs()) };
    let c = dev.take().unwrap();
    assert_eq!(c.bufs.len(), 1);
    let (addr, len, _) = c.bufs[0];
    assert_eq!(len, 20 + 2048 - 64);
    let f = frame(60, 9);
    // SAFETY: identity-mapped, the length the driver posted.
    unsafe {
        let h = addr as usize as *mut u8;
        std::ptr::write_bytes(h, 0, 20);
        h.write(2); // VIRTIO_NET_HDR_F_DATA_VALID
        h.add(12)
            .cast::<u32>()
            .write_unaligned(0xfeed_f00du32.to_le());
        h.add(16).cast::<u16>().write_unaligned(2u16.to_le());
        std::ptr::copy_nonoverlapping(f.as_ptr(), h.add(20), f.len());
    }
    dev.push_used(c.id, 20 + 60, 1);
    let mut got = Vec::new();
    assert_eq!(rx.rx_burst(&mut got, 8), 1);
    assert_eq!(got[0].iova(), addr + 20, "the frame follows the header");
    assert_eq!(got[0].data(), &f[..]);
    assert_eq!(got[0].rss_hash(), 0xfeed_f00d);
    assert_eq!(
        got[0].rx_checksum().l4,
        pollnic_hw::offload::ChecksumStatus::Good,
        "DATA_VALID read from the headroom"
    );
    // The chain came back with a fresh buffer, again one descriptor.
    let again = (0..8).filter_map(|_| dev.take()).last().unwrap();
    assert_eq!((again.id, again.bufs.len()), (c.id, 1));
    assert_ne!(again.bufs[0].0, addr, "a fresh buffer");
}

#[test]
fn tx_chains_carry_a_zeroed_header_then_the_frame_and_come_back() {
    let pool = pool(64);
    let (mut tx, mut dev, _) = tx(9);
    let mut cache = pollnic_rings::PoolCache::new(pool.clone(), 8);
    for lap in 0..100u32 {
        let mut pkts: Vec<Packet> = (0..3)
            .map(|i| {
                let mut p = pool.alloc().unwrap();
                let f = frame(60 + i, lap as u8);
                put(&mut p, &f);
                p
            })
            .collect();
        let expect: Vec<Vec<u8>> = pkts.iter().map(|p| p.data().to_vec()).collect();
        let n = tx.tx_burst(&mut pkts, &mut cache);
        assert!(n >= 1, "lap {lap}");
        for e in &expect[..n] {
            let c = dev.take().expect("a chain per frame");
            let (h, hl, hw) = c.bufs[0];
            let (b, bl, bw) = c.bufs[1];
            assert!(!hw && !bw);
            assert_eq!(hl, 12);
            // SAFETY: identity-mapped, lengths as posted.
            let (hdr, data) = unsafe {
                (
                    std::slice::from_raw_parts(h as usize as *const u8, 12),
                    std::slice::from_raw_parts(b as usize as *const u8, bl as usize),
                )
            };
            assert_eq!(hdr, &[0u8; 12]);
            assert_eq!(data, &e[..]);
            dev.push_used(c.id, 0, 2);
        }
        for p in pkts.drain(..) {
            drop(p);
        }
        assert_eq!(tx.reclaim(&mut cache), n, "lap {lap}");
        assert_eq!(tx.in_flight(), 0);
    }
    assert_eq!(tx.virtq_stats().device_errors, 0);
    // In flight at drop: back to the pool too.
    let mut pkts = vec![pool.alloc().unwrap()];
    put(&mut pkts[0], &[1; 60]);
    assert_eq!(tx.tx_burst(&mut pkts, &mut cache), 1);
    drop(tx);
    drop(cache);
    assert_eq!(pool.free_count(), 64);
}

#[test]
fn kicks_follow_the_devices_event_suppression() {
    let pool = pool(64);
    let (mut tx, dev, bell) = tx(16);
    let mut cache = pollnic_rings::PoolCache::new(pool.clone(), 8);
    let mut send = |tx: &mut VirtqTx<Bell>| {
        let mut p = vec![pool.alloc().unwrap()];
        put(&mut p[0], &[0; 60]);
        assert_eq!(tx.tx_burst(&mut p, &mut cache), 1);
    };
    // ENABLE (the zeroed start): every burst kicks.
    send(&mut tx);
    assert_eq!(bell.count(), 1);
    dev.set_device_event(0, DISABLE);
    send(&mut tx);
    assert_eq!((bell.count(), tx.virtq_stats().kicks_suppressed), (1, 1));
    // DESC without EVENT_IDX is not the device's to ask: kick.
    dev.set_device_event(0x8000 | 100, DESC);
    send(&mut tx);
    assert_eq!(bell.count(), 2);
    // With event indices: kick exactly when the named descriptor is among
    // those just made available. Chains so far took descriptors 0..6.
    tx.use_event_idx();
    dev.set_device_event(0x8000 | 8, DESC);
    send(&mut tx); // descriptors 6, 7
    assert_eq!(bell.count(), 2, "8 not yet reached");
    send(&mut tx); // 8, 9
    assert_eq!(bell.count(), 3, "8 reached");
    send(&mut tx); // 10, 11
    assert_eq!(bell.count(), 3);
    // An event in the next lap (wrap 0) is far ahead: no kick.
    dev.set_device_event(12, DESC);
    send(&mut tx); // 12, 13
    assert_eq!(bell.count(), 3);
    dev.set_device_event(ENABLE, ENABLE);
    send(&mut tx);
    assert_eq!(bell.count(), 4);
}

#[test]
fn a_used_descriptor_with_the_wrong_wrap_or_used_bit_stops_the_queue() {
    for (name, flags, pool) in [
        (
            "AVAIL and USED both 0 (wrap counter 0, one lap off)",
            0u16,
            pool(32),
        ),
        ("USED set without AVAIL", USED, pool(32)),
        (
            "AVAIL and USED both 0, one-descriptor chains",
            0u16,
            hpool(32),
        ),
        (
            "USED set without AVAIL, one-descriptor chains",
            USED,
            hpool(32),
        ),
    ] {
        let (mut rx, mut dev, _) = rx(8, &pool);
        let c = dev.take().unwrap();
        let len = fill(&c, 12, &[1; 60]);
        dev.write_used_raw(0, c.id, len, flags);
        let mut got = Vec::new();
        assert_eq!(rx.rx_burst(&mut got, 8), 0, "{name}");
        assert!(rx.virtq_stats().stopped, "{name}");
        assert_eq!(rx.virtq_stats().device_errors, 1, "{name}");
        // Stopped: nothing more is read, even a good descriptor.
        dev.write_used_raw(0, c.id, len, AVAIL | USED);
        assert_eq!(rx.rx_burst(&mut got, 8), 0);
        assert!(!rx.ready());
        drop(rx);
        assert_eq!(pool.free_count(), 32, "{name}: buffers back on drop");
    }
    // Only AVAIL set as the driver's wrap counter: still the driver's,
    // not used, not an error.
    let pool = pool(32);
    let (mut rx, _dev, _) = rx(8, &pool);
    assert_eq!(rx.rx_burst(&mut Vec::new(), 8), 0);
    assert!(!rx.virtq_stats().stopped);
}

#[test]
fn an_id_never_posted_or_already_completed_stops_the_queue() {
    // Never posted: ids past the chains (4 of two descriptors, or 8 of
    // one, in a ring of 8).
    for pool in pools(32) {
        let first_bad = if pool.headroom() > 0 { 8 } else { 4 };
        for bad in [first_bad, first_bad + 1, 0x7fff, u16::MAX] {
            let (mut rx, mut dev, _) = rx(8, &pool);
            let c = dev.take().unwrap();
            let len = fill(&c, 12, &[1; 60]);
            dev.push_used(bad, len, c.bufs.len() as u16);
            assert_eq!(rx.rx_burst(&mut Vec::new(), 8), 0, "id {bad}");
            assert_eq!(rx.virtq_stats().device_errors, 1, "id {bad}");
            assert!(rx.virtq_stats().stopped);
        }
    }
    // Already completed: the same id twice in one burst (the driver holds
    // the re-posted chain back until the burst ends), and once more after.
    for pool in pools(32) {
        let (mut rx, mut dev, _) = rx(8, &pool);
        let c = dev.take().unwrap();
        let len = fill(&c, 12, &[1; 60]);
        dev.push_used(c.id, len, c.bufs.len() as u16);
        dev.push_used(c.id, len, c.bufs.len() as u16);
        let mut got = Vec::new();
        assert_eq!(rx.rx_burst(&mut got, 8), 1, "the first use is good");
        assert!(rx.virtq_stats().stopped, "the repeat stops the queue");
        drop(got);
        drop(rx);
        assert_eq!(pool.free_count(), 32);
    }
    // TX: an id completed twice across reclaims.
    let pool = self::pool(32);
    let (mut tx, mut tdev, _) = tx(8);
    let mut cache = pollnic_rings::PoolCache::new(pool.clone(), 8);
    let mut p = vec![pool.alloc().unwrap(), pool.alloc().unwrap()];
    for q in &mut p {
        put(q, &[0; 60]);
    }
    assert_eq!(tx.tx_burst(&mut p, &mut cache), 2);
    let c = tdev.take().unwrap();
    tdev.push_used(c.id, 0, 2);
    assert_eq!(tx.reclaim(&mut cache), 1);
    tdev.push_used(c.id, 0, 2);
    assert_eq!(tx.reclaim(&mut cache), 0);
    assert!(tx.virtq_stats().stopped);
    assert_eq!(tx.in_flight(), 1);
    drop(tx);
    drop(cache);
    assert_eq!(pool.free_count(), 32);
}

#[test]
fn a_length_beyond_the_buffer_or_under_the_header_is_counted_and_the_buffer_reposted() {
    for pool in pools(32) {
        let (mut rx, mut dev, _) = rx(8, &pool);
        let mut got = Vec::new();
        for (len, bad) in [
            (12 + pool.buf_size() as u32 + 1, true),
            (11, true),
            (12, true),
            (u32::MAX, true),
            (12 + pool.buf_size() as u32, false),
            (72, false),
        ] {
            let c = dev.take().expect("the chain came back");
            fill(&c, 12, &[3; 60]);
            dev.push_used(c.id, len, c.bufs.len() as u16);
            let n = rx.rx_burst(&mut got, 8);
            assert_eq!(n, usize::from(!bad), "len {len}");
        }
        assert_eq!(rx.stats().rx_errors, 4);
        assert!(!rx.virtq_stats().stopped);
        assert_eq!(got[1].len(), 60);
        drop(got);
        drop(rx);
        assert_eq!(pool.free_count(), 32, "every buffer back");
    }
}

#[test]
fn the_header_length_follows_set_net_hdr() {
    let pool = pool(32);
    let mut rx = unstarted_rx(8, &pool, Bell::default());
    rx.set_net_hdr(NetHdr::V1Hash);
    rx.start();
    // SAFETY: as in `rx`.
    let mut dev = unsafe { PackedDevice::new(rx.addrs()) };
    let c = dev.take().unwrap();
    assert_eq!(c.bufs[0].1, 20);
}

#[test]
fn control_commands_round_trip_on_a_packed_ring() {
    let mut c = VirtqCtrl::with_layout(
        VirtqLayout::Packed,
        5,
        PageSize::Small4K,
        Arc::new(IdentityMapper),
        Bell::default(),
    )
    .unwrap();
    assert_eq!(c.layout(), VirtqLayout::Packed);
    // SAFETY: as in `rx`.
    let dev = unsafe { PackedDevice::new(c.addrs()) };
    let dev = Arc::new(std::sync::Mutex::new(dev));
    // Six commands on a 5-descriptor ring: the cursors wrap.
    for i in 0..6u8 {
        let d = dev.clone();
        let t = std::thread::spawn(move || {
            let mut d = d.lock().unwrap();
            let chain = loop {
                if let Some(c) = d.take() {
                    break c;
                }
                std::hint::spin_loop();
            };
            let (a, l, w) = chain.bufs[0];
            assert!(!w);
            // SAFETY: identity-mapped command bytes.
            let cmd =
                unsafe { std::slice::from_raw_parts(a as usize as *const u8, l as usize) }.to_vec();
            let (ack, al, aw) = chain.bufs[1];
            assert_eq!((al, aw), (1, true));
            // SAFETY: identity-mapped ack byte.
            unsafe { (ack as usize as *mut u8).write_volatile(0) };
            d.push_used(chain.id, 1, 2);
            cmd
        });
        c.command(4, 1, &[i, 0], Duration::from_secs(5)).unwrap();
        assert_eq!(t.join().unwrap(), vec![4, 1, i, 0]);
    }
    // A used descriptor naming another id stops the queue.
    let d = dev.clone();
    let t = std::thread::spawn(move || {
        let mut d = d.lock().unwrap();
        while d.take().is_none() {
            std::hint::spin_loop();
        }
        d.push_used(1, 1, 2);
    });
    assert_eq!(
        c.command(4, 1, &[0, 0], Duration::from_secs(5)),
        Err(CtrlError::Stopped)
    );
    t.join().unwrap();
    assert_eq!(c.virtq_stats().device_errors, 1);
}

#[test]
fn interrupts_are_asked_by_the_drivers_event_flags() {
    let pool = pool(32);
    let (mut rx, dev, _) = rx(8, &pool);
    rx.use_event_idx();
    assert_eq!(dev.driver_event().1, DISABLE);
    rx.set_interrupts(true);
    assert_eq!(dev.driver_event().1, ENABLE);
    rx.set_interrupts(false);
    assert_eq!(dev.driver_event().1, DISABLE);
}
