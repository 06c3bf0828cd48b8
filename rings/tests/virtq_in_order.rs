//! `VIRTIO_F_IN_ORDER` on both ring layouts, against a device played
//! through `virtq::device` (split) and `virtq::packed_device` (packed):
//!
//! - the driver's side of the rule: chains go out in ring order (split:
//!   heads 0, 2, 4, … wrapping at the table's end, each head's `next` its
//!   neighbour; packed: buffer ids 0, 1, 2, … wrapping at the chain count,
//!   whatever the ring's size), on the transmit, receive and control
//!   queues;
//! - a device that completes a transmit batch with one used entry (split:
//!   only the batch's last entry written, the used index moved by the
//!   batch; packed: one used descriptor with the batch's last buffer id,
//!   the cursor moved past the whole batch) gets every buffer back, over
//!   many laps;
//! - a device that breaks the order (a receive completion for a chain
//!   other than the oldest; a transmit batch ending at a buffer id not in
//!   flight) stops the queue, and every buffer still goes back to its
//!   pool.

use pollnic_rings::virtq::device::DeviceView;
use pollnic_rings::virtq::packed_device::PackedDevice;
use pollnic_rings::{
    Doorbell, IdentityMapper, Mempool, Packet, PageSize, PoolCache, VirtqCtrl, VirtqLayout,
    VirtqRx, VirtqTx,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// `VIRTQ_DESC_F_NEXT`.
const F_NEXT: u16 = 1;

#[derive(Clone, Default)]
struct Bell(Arc<AtomicU64>);
impl Doorbell for Bell {
    fn ring(&mut self, _: u16) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn pool(n: u32) -> Mempool {
    Mempool::new(n, 2048, PageSize::Small4K, Arc::new(IdentityMapper)).unwrap()
}

fn tx(layout: VirtqLayout, size: u16) -> VirtqTx<Bell> {
    let mut tx = VirtqTx::with_layout(
        layout,
        size,
        PageSize::Small4K,
        Arc::new(IdentityMapper),
        Bell::default(),
    )
    .unwrap();
    tx.set_in_order(true);
    tx
}

fn rx(layout: VirtqLayout, size: u16, pool: &Mempool) -> VirtqRx<Bell> {
    let mut rx = VirtqRx::with_layout(
        layout,
        size,
        PageSize::Small4K,
        Arc::new(IdentityMapper),
        pool,
        Bell::default(),
    )
    .unwrap();
    rx.set_in_order(true);
    rx.start();
    rx
}

/// `n` packets of 60 bytes, each tagged with its number from `first`.
fn frames(pool: &Mempool, first: u32, n: u32) -> Vec<Packet> {
    (first..first + n)
        .map(|i| {
            let mut p = pool.alloc().unwrap();
            p.set_len(60).unwrap();
            p.data_mut().fill(i as u8);
            p
        })
        .collect()
}

/// Split, transmit: heads in ring order; the device completes each burst
/// as one batch, writing only its last used entry (the others hold a
/// poison the driver must not read); every buffer comes back.
#[test]
fn split_tx_batches_completed_by_their_last_entry_give_every_buffer_back() {
    let pool = pool(64);
    let mut tx = tx(VirtqLayout::Split, 16);
    let mut cache = PoolCache::new(pool.clone(), 8);
    // SAFETY: identity-mapped; the queue outlives the view.
    let dev = unsafe { DeviceView::new(tx.addrs()) };
    let (mut avail, mut used, mut sent) = (0u16, 0u16, 0u32);
    for lap in 0..200u32 {
        let n = 1 + lap % 8;
        let mut pkts = frames(&pool, sent, n);
        assert_eq!(tx.tx_burst(&mut pkts, &mut cache), n as usize, "lap {lap}");
        // The device reads the chains in ring order.
        while avail != dev.avail_idx() {
            let head = dev.avail_entry(avail);
            assert_eq!(head, 2 * (avail % 8), "lap {lap}: heads in ring order");
            let (_, hl, flags, next) = dev.desc(head);
            assert_eq!((hl, flags & F_NEXT, next), (12, F_NEXT, head + 1));
            let (addr, len, _, _) = dev.desc(head + 1);
            // SAFETY: identity-mapped, the length the driver posted.
            let data = unsafe { std::slice::from_raw_parts(addr as usize as *const u8, 60) };
            assert_eq!((len, data[0]), (60, sent as u8), "lap {lap}");
            sent += 1;
            avail = avail.wrapping_add(1);
        }
        // One used entry for the batch: the last; the skipped ones poison.
        for s in used..avail.wrapping_sub(1) {
            dev.put_used(s, 0xdead, 0xbeef);
        }
        dev.put_used(
            avail.wrapping_sub(1),
            u32::from(2 * (avail.wrapping_sub(1) % 8)),
            0,
        );
        dev.set_used_idx(avail);
        used = avail;
        assert_eq!(tx.reclaim(&mut cache), n as usize, "lap {lap}");
        assert_eq!(tx.in_flight(), 0);
    }
    assert_eq!(tx.virtq_stats().device_errors, 0);
    drop(tx);
    drop(cache);
    assert_eq!(pool.free_count(), 64);
}

/// Packed, transmit, on a ring of 9 descriptors (4 chains: positions and
/// ids drift apart every lap): buffer ids in ring order; the device writes
/// one used descriptor per batch with the batch's last id and skips past
/// the batch.
#[test]
fn packed_tx_batches_completed_by_one_descriptor_give_every_buffer_back() {
    let pool = pool(64);
    let mut tx = tx(VirtqLayout::Packed, 9);
    let mut cache = PoolCache::new(pool.clone(), 8);
    // SAFETY: as above.
    let mut dev = unsafe { PackedDevice::new(tx.addrs()) };
    let mut sent = 0u32;
    for lap in 0..200u32 {
        let n = 1 + lap % 4;
        let mut pkts = frames(&pool, sent, n);
        assert_eq!(tx.tx_burst(&mut pkts, &mut cache), n as usize, "lap {lap}");
        let mut last = None;
        while let Some(c) = dev.take() {
            assert_eq!(c.id as u32, sent % 4, "lap {lap}: ids in ring order");
            sent += 1;
            last = Some(c.id);
        }
        // One used descriptor at the used cursor, naming the last buffer;
        // then the cursor skips the whole batch (2 descriptors a chain).
        dev.push_used(last.expect("a batch"), 0, 2 * n as u16);
        assert_eq!(tx.reclaim(&mut cache), n as usize, "lap {lap}");
        assert_eq!(tx.in_flight(), 0);
    }
    assert_eq!(tx.virtq_stats().device_errors, 0);
    drop(tx);
    drop(cache);
    assert_eq!(pool.free_count(), 64);
}

/// Packed, transmit: a batch ending at a buffer id that is not in flight
/// (beyond the newest chain, or past the chain count) stops the queue, and
/// nothing is freed twice.
#[test]
fn a_packed_batch_ending_past_the_chains_in_flight_stops_the_queue() {
    for bad in [2u16, 3, 4, 0x7fff] {
        let pool = pool(32);
        let mut tx = tx(VirtqLayout::Packed, 8);
        let mut cache = PoolCache::new(pool.clone(), 8);
        // SAFETY: as above.
        let mut dev = unsafe { PackedDevice::new(tx.addrs()) };
        let mut pkts = frames(&pool, 0, 2);
        assert_eq!(tx.tx_burst(&mut pkts, &mut cache), 2);
        while dev.take().is_some() {}
        dev.push_used(bad, 0, 4);
        assert_eq!(tx.reclaim(&mut cache), 0, "id {bad}");
        assert!(tx.virtq_stats().stopped, "id {bad}");
        assert_eq!(tx.in_flight(), 2);
        drop(tx);
        drop(cache);
        assert_eq!(pool.free_count(), 32, "id {bad}");
    }
}

/// Receive, both layouts: completions in order come out as frames; one for
/// a chain other than the oldest stops the queue (a device that promised
/// IN_ORDER and reordered, or skipped an entry whose length the driver
/// cannot know).
#[test]
fn a_receive_completion_out_of_order_stops_the_queue() {
    // Split: 8 descriptors, 4 chains, heads 0, 2, 4, 6.
    let pool = pool(32);
    let mut q = rx(VirtqLayout::Split, 8, &pool);
    // SAFETY: as above.
    let dev = unsafe { DeviceView::new(q.addrs()) };
    for (slot, head) in [(0u16, 0u16), (1, 2)] {
        assert_eq!(dev.avail_entry(slot), head, "posted in ring order");
        dev.put_used(slot, u32::from(head), 12 + 60);
    }
    dev.set_used_idx(2);
    let mut got = Vec::new();
    assert_eq!(q.rx_burst(&mut got, 8), 2);
    // The oldest is now chain 2 (head 4): head 6 first is out of order.
    dev.put_used(2, 6, 12 + 60);
    dev.set_used_idx(3);
    assert_eq!(q.rx_burst(&mut got, 8), 0);
    assert!(q.virtq_stats().stopped);
    assert_eq!(q.virtq_stats().device_errors, 1);
    drop(got);
    drop(q);
    assert_eq!(pool.free_count(), 32);

    // Packed, 7 descriptors, 3 chains: ids 0, 1, 2.
    let pool = self::pool(32);
    let mut q = rx(VirtqLayout::Packed, 7, &pool);
    // SAFETY: as above.
    let mut dev = unsafe { PackedDevice::new(q.addrs()) };
    let ids: Vec<u16> = std::iter::from_fn(|| dev.take().map(|c| c.id)).collect();
    assert_eq!(ids, [0, 1, 2], "posted in ring order");
    dev.push_used(0, 12 + 60, 2);
    let mut got = Vec::new();
    assert_eq!(q.rx_burst(&mut got, 8), 1);
    dev.push_used(2, 12 + 60, 2);
    assert_eq!(q.rx_burst(&mut got, 8), 0);
    assert!(q.virtq_stats().stopped);
    drop(got);
    drop(q);
    assert_eq!(pool.free_count(), 32);
}

/// The control queue on a split ring in order: command `n` takes
/// descriptors `2n` and `2n + 1` (mod the table), and its used entry must
/// name that head.
#[test]
fn split_control_commands_walk_the_table_in_ring_order() {
    let mut c = VirtqCtrl::new(
        8,
        PageSize::Small4K,
        Arc::new(IdentityMapper),
        Bell::default(),
    )
    .unwrap();
    c.set_in_order(true);
    // SAFETY: as above.
    let dev = unsafe { DeviceView::new(c.addrs()) };
    struct Send(DeviceView);
    // SAFETY: the view is used by one thread at a time, while `c` lives.
    unsafe impl std::marker::Send for Send {}
    for n in 1..=6u16 {
        let d = Send(dev);
        let t = std::thread::spawn(move || {
            let d = d;
            while d.0.avail_idx() != n {
                std::hint::spin_loop();
            }
            let head = d.0.avail_entry(n - 1);
            let (_, _, flags, next) = d.0.desc(head);
            let (ack, _, _, _) = d.0.desc(head + 1);
            // SAFETY: identity-mapped ack byte.
            unsafe { (ack as usize as *mut u8).write_volatile(0) };
            d.0.put_used(n - 1, u32::from(head), 1);
            d.0.set_used_idx(n);
            (head, flags & F_NEXT, next)
        });
        c.command(4, 1, &[0, 0], Duration::from_secs(5)).unwrap();
        let head = 2 * ((n - 1) % 4);
        assert_eq!(t.join().unwrap(), (head, F_NEXT, head + 1), "command {n}");
    }
    assert_eq!(c.virtq_stats().device_errors, 0);
}
