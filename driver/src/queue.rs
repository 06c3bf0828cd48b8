//! One RX/TX queue pair with its mempool: the unit that one pinned core owns.
//! A `&mut Queue` is `Send`, so [`crate::runner`] hands each queue of a
//! device to its own thread; the hot path takes no lock and allocates nothing.

use crate::counters::DeviceCounters;
use crate::io::TailDoorbell;
use pollnic_rings::{Mempool, Packet, RxRing, RxStats, TxRing, TxStats};
use std::time::{Duration, Instant};

/// RX queue `id`, TX queue `id`, and the mempool both use.
pub struct Queue {
    pub(crate) id: u16,
    pub(crate) rx: RxRing<TailDoorbell>,
    pub(crate) tx: TxRing<TailDoorbell>,
    pub(crate) counters: DeviceCounters,
}

impl Queue {
    /// Queue index (the RX queue RSS steers to, and the TX queue used).
    pub fn id(&self) -> u16 {
        self.id
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
    #[inline]
    pub fn tx_burst(&mut self, pkts: &mut Vec<Packet>) -> usize {
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
    /// The burst loops this queue runs, chosen at setup from
    /// [`crate::DeviceConfig::data_path`].
    pub fn data_path(&self) -> crate::DataPath {
        self.rx.data_path()
    }
}
