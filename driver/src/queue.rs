//! One RX/TX queue pair with its mempool: the unit that one pinned core owns.
//! A `&mut Queue` is `Send`, so [`crate::runner`] hands each queue of a
//! device to its own thread; the hot path takes no lock and allocates nothing.

use crate::counters::DeviceCounters;
use crate::io::TailDoorbell;
use crate::removal::Removal;
use pollnic_rings::{Mempool, Packet, RxRing, RxStats, TxRing, TxStats};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// RX queue `id`, TX queue `id`, and the mempool both use.
pub struct Queue {
    pub(crate) id: u16,
    pub(crate) rx: RxRing<TailDoorbell>,
    pub(crate) tx: TxRing<TailDoorbell>,
    pub(crate) counters: DeviceCounters,
    pub(crate) removal: Arc<Removal>,
}

impl Queue {
    /// Queue index (the RX queue RSS steers to, and the TX queue used).
    pub fn id(&self) -> u16 {
        self.id
    }

    /// Whether the kernel has asked for this queue's device back
    /// ([`crate::Device::is_removed`]): a queue thread checks it where it
    /// checks its stop flag, leaves its loop, and the device is dropped once
    /// every queue thread has left. One relaxed load; the bursts do not
    /// look at it.
    #[inline]
    pub fn is_removed(&self) -> bool {
        self.removal.requested()
    }

    /// Receive up to `max` frames, appending them to `out`; returns how many.
    /// Never blocks; never allocates if `out` has room for `max` more.
    #[inline]
    pub fn rx_burst(&mut self, out: &mut Vec<Packet>, max: usize) -> usize {
        let n = self.rx.rx_burst(out, max);
        self.counters[self.id as usize].publish_rx(&self.rx.stats());
        n
    }

    /// Queue frames from the front of `pkts` until the TX ring is full; returns
    /// how many were taken (the rest stay in `pkts`, in order).
    ///
    /// A frame of 1 to 16 bytes is first padded with zeros to 17 bytes, as
    /// Linux igb and ixgbe do (`skb_put_padto(skb, 17)`: "the minimum packet
    /// size for olinfo paylen is 17"; a shorter one may hang an 82599 TX
    /// queue); the MAC pads it to 60 bytes on the wire. (DPDK's
    /// `ixgbe_prep_pkts` rejects frames under 14 bytes instead; a refused
    /// frame would stay at the front of `pkts` for ever, so pollnic pads.)
    /// An empty frame is refused and counted in `tx_errors`.
    #[inline]
    pub fn tx_burst(&mut self, pkts: &mut Vec<Packet>) -> usize {
        for p in pkts.iter_mut() {
            if p.len() < TX_MIN_FRAME && !p.is_empty() {
                pad_short_frame(p);
            }
        }
        let n = self.tx.tx_burst(pkts, self.rx.cache_mut());
        self.counters[self.id as usize].publish_tx(&self.tx.stats());
        n
    }

    /// Reclaim sent TX buffers until none is in flight or `timeout` passes;
    /// returns whether the TX ring drained.
    pub fn flush_tx(&mut self, timeout: Duration) -> bool {
        let start = Instant::now();
        loop {
            self.tx.reclaim(self.rx.cache_mut());
            if self.tx.in_flight() == 0 {
                return true;
            }
            if start.elapsed() > timeout {
                return false;
            }
            std::thread::yield_now();
        }
    }

    /// This queue's mempool (RX refill and frames to send). Its
    /// [`Mempool::alloc`] works from any thread; on the queue's own thread
    /// [`Queue::alloc_burst`] is cheaper.
    pub fn mempool(&self) -> &Mempool {
        self.rx.pool()
    }

    /// Append up to `n` empty packets (length 0) from this queue's buffer
    /// cache to `out`; returns how many (fewer when the mempool runs dry).
    /// No atomic operation unless the cache refills (DPDK
    /// `rte_pktmbuf_alloc_bulk`).
    pub fn alloc_burst(&mut self, out: &mut Vec<Packet>, n: usize) -> usize {
        self.rx.cache_mut().alloc_burst(out, n)
    }

    /// Return every packet in `pkts` (leaves it empty): this queue's buffers
    /// go to its cache with no atomic operation (unless it spills), cheaper
    /// than dropping them one by one (DPDK `rte_pktmbuf_free_bulk`).
    pub fn free_bulk(&mut self, pkts: &mut Vec<Packet>) {
        self.rx.cache_mut().free_bulk(pkts)
    }
    /// RX ring counters.
    pub fn rx_stats(&self) -> RxStats {
        self.rx.stats()
    }
    /// TX ring counters.
    pub fn tx_stats(&self) -> TxStats {
        self.tx.stats()
    }
}

/// The shortest frame handed to the NIC, in bytes (Linux igb/ixgbe
/// `skb_put_padto(skb, 17)`).
pub(crate) const TX_MIN_FRAME: usize = 17;

/// Pad `p` with zeros to [`TX_MIN_FRAME`] bytes (every buffer holds at
/// least that many).
#[cold]
fn pad_short_frame(p: &mut Packet) {
    let n = p.len();
    if p.set_len(TX_MIN_FRAME).is_ok() {
        p.data_mut()[n..].fill(0);
    }
}
