//! Per-queue counters a reporter thread can read while the queue's own thread
//! busy-polls: one cache-line-padded block per queue, written only by that
//! queue's thread with relaxed stores once per burst (no lock, no atomic
//! read-modify-write, no false sharing between queues).

use crossbeam_utils::CachePadded;
use pollnic_rings::{RxStats, TxStats, VirtqStats};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Live counters of one queue.
#[derive(Debug, Default)]
pub struct QueueCounters {
    rx_packets: AtomicU64,
    rx_bytes: AtomicU64,
    rx_bursts: AtomicU64,
    rx_empty_polls: AtomicU64,
    rx_nombuf: AtomicU64,
    rx_errors: AtomicU64,
    tx_packets: AtomicU64,
    tx_bytes: AtomicU64,
    rx_kicks: AtomicU64,
    tx_kicks: AtomicU64,
    device_errors: AtomicU64,
    virtqueues_stopped: AtomicU64,
}

/// A consistent-enough copy of one queue's counters (each field is exact; the
/// fields may come from bursts a few ns apart).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueSnapshot {
    /// Frames received.
    pub rx_packets: u64,
    /// Bytes received (frames without FCS).
    pub rx_bytes: u64,
    /// RX bursts that returned frames.
    pub rx_bursts: u64,
    /// RX polls that found nothing.
    pub rx_empty_polls: u64,
    /// Times RX refill found the mempool empty.
    pub rx_nombuf: u64,
    /// Invalid RX descriptors dropped.
    pub rx_errors: u64,
    /// Frames queued for transmission.
    pub tx_packets: u64,
    /// Bytes queued for transmission.
    pub tx_bytes: u64,
    /// Notifications (doorbell writes) the RX virtqueue sent the device
    /// (virtio-net only; 0 on the Intel families, whose tail writes are not
    /// counted).
    pub rx_kicks: u64,
    /// Notifications the TX virtqueue sent the device (virtio-net only).
    pub tx_kicks: u64,
    /// Used-ring entries or indices that broke the virtqueue protocol, RX
    /// and TX together (virtio-net only; `VirtqStats::device_errors`).
    pub device_errors: u64,
    /// How many of the pair's two virtqueues stopped on a device error
    /// (virtio-net only): a stopped virtqueue's bursts return 0 until the
    /// port is closed and opened again ([`crate::Queue::check`]).
    pub virtqueues_stopped: u64,
}

impl QueueCounters {
    /// Publish the RX ring's totals (called by the queue's thread after a burst).
    #[inline]
    pub(crate) fn publish_rx(&self, s: &RxStats) {
        self.rx_packets.store(s.packets, Relaxed);
        self.rx_bytes.store(s.bytes, Relaxed);
        self.rx_bursts.store(s.bursts, Relaxed);
        self.rx_empty_polls.store(s.empty_polls, Relaxed);
        self.rx_nombuf.store(s.rx_nombuf, Relaxed);
        self.rx_errors.store(s.rx_errors, Relaxed);
    }

    /// Publish the TX ring's totals.
    #[inline]
    pub(crate) fn publish_tx(&self, s: &TxStats) {
        self.tx_packets.store(s.packets, Relaxed);
        self.tx_bytes.store(s.bytes, Relaxed);
    }

    /// Publish a virtqueue pair's driver counters: kicks, device errors,
    /// stopped virtqueues (virtio-net only; called by the queue's thread
    /// after a burst).
    #[inline]
    pub(crate) fn publish_virtq(&self, rx: &VirtqStats, tx: &VirtqStats) {
        self.rx_kicks.store(rx.kicks, Relaxed);
        self.tx_kicks.store(tx.kicks, Relaxed);
        self.device_errors
            .store(rx.device_errors + tx.device_errors, Relaxed);
        self.virtqueues_stopped
            .store(u64::from(rx.stopped) + u64::from(tx.stopped), Relaxed);
    }

    /// Read the counters (any thread).
    pub fn snapshot(&self) -> QueueSnapshot {
        QueueSnapshot {
            rx_packets: self.rx_packets.load(Relaxed),
            rx_bytes: self.rx_bytes.load(Relaxed),
            rx_bursts: self.rx_bursts.load(Relaxed),
            rx_empty_polls: self.rx_empty_polls.load(Relaxed),
            rx_nombuf: self.rx_nombuf.load(Relaxed),
            rx_errors: self.rx_errors.load(Relaxed),
            tx_packets: self.tx_packets.load(Relaxed),
            tx_bytes: self.tx_bytes.load(Relaxed),
            rx_kicks: self.rx_kicks.load(Relaxed),
            tx_kicks: self.tx_kicks.load(Relaxed),
            device_errors: self.device_errors.load(Relaxed),
            virtqueues_stopped: self.virtqueues_stopped.load(Relaxed),
        }
    }
}

/// The counters of every queue of a device, shareable with a reporter thread.
pub type DeviceCounters = std::sync::Arc<[CachePadded<QueueCounters>]>;
