//! A forwarding rig on the software device model, shared by the criterion
//! benches and the callgrind example: one RX ring and one TX ring on two
//! model NICs, one mempool, frames delivered by the model and forwarded by
//! `rx_burst` + `tx_burst`, zero copy.

use crate::ring::{SoftDoorbell, SoftNic, TxSink};
use pollnic_rings::dma::{IdentityMapper, PageSize};
use pollnic_rings::{rx_free_thresh, DataPath, DescRing, Mempool, Packet, RxRing, TxRing};
use std::sync::Arc;

/// Two model ports and the rings the driver side owns. The fields are
/// private: the models keep the addresses of the rings' and the pool's DMA
/// memory, so the rig alone decides when those are dropped (after the
/// models, field order below).
pub struct FwdRig {
    /// The model NIC frames arrive on.
    rx_nic: SoftNic,
    /// The model NIC frames leave by (TX processed only on `process_tx`).
    tx_nic: SoftNic,
    /// RX ring (driver side).
    rx: RxRing<SoftDoorbell>,
    /// TX ring (driver side).
    tx: TxRing<SoftDoorbell>,
    /// The mempool both use.
    pool: Mempool,
    /// Burst buffer, preallocated.
    burst: Vec<Packet>,
    frame: Vec<u8>,
}

impl FwdRig {
    /// Rings of `ring` descriptors, a pool of `4 × ring` 2 KiB buffers on 4 KiB
    /// pages, frames of `frame_len` bytes.
    pub fn new(ring: u16, frame_len: usize) -> Self {
        let mapper = Arc::new(IdentityMapper);
        let pool =
            Mempool::new(4 * ring as u32, 2048, PageSize::Small4K, mapper.clone()).expect("pool");
        let rx_nic = SoftNic::new(TxSink::Discard);
        let tx_nic = SoftNic::deferred(TxSink::Discard);
        // SAFETY: the pool and both rings' memory go into the returned rig,
        // whose private fields drop the models first (declaration order) and
        // hand out no way to drop or replace the rings or the pool before.
        unsafe {
            rx_nic.add_region(pool.region());
            tx_nic.add_region(pool.region());
        }
        let rx_desc = DescRing::new(ring, PageSize::Small4K, mapper.clone()).expect("ring");
        let tx_desc = DescRing::new(ring, PageSize::Small4K, mapper).expect("ring");
        // SAFETY: as above.
        let (rdb, tdb) = unsafe {
            (
                rx_nic.attach_rx(&rx_desc, pool.buf_size()),
                tx_nic.attach_tx(&tx_desc),
            )
        };
        let mut rx = RxRing::new(rx_desc, &pool, rdb).expect("rx ring");
        rx.start();
        let tx = TxRing::new(tx_desc, &pool, tdb);
        FwdRig {
            rx_nic,
            tx_nic,
            rx,
            tx,
            pool,
            burst: Vec::with_capacity(512),
            frame: vec![0x5a; frame_len],
        }
    }

    /// The RX ring, the TX ring and the burst buffer, borrowed together
    /// (a harness that times one side alone, e.g. an RX-only loop).
    pub fn parts(
        &mut self,
    ) -> (
        &mut RxRing<SoftDoorbell>,
        &mut TxRing<SoftDoorbell>,
        &mut Vec<Packet>,
    ) {
        (&mut self.rx, &mut self.tx, &mut self.burst)
    }

    /// The mempool both rings use.
    pub fn pool(&self) -> &Mempool {
        &self.pool
    }

    /// The model NIC frames arrive on.
    pub fn rx_nic(&self) -> &SoftNic {
        &self.rx_nic
    }

    /// The model NIC frames leave by.
    pub fn tx_nic(&self) -> &SoftNic {
        &self.tx_nic
    }

    /// Run both rings' `path` burst loops (a new rig runs
    /// [`DataPath::detect`]'s).
    pub fn set_data_path(&mut self, path: DataPath) {
        self.rx.set_data_path(path);
        self.tx.set_data_path(path);
    }

    /// How many full bursts of `batch` frames the device can always take
    /// after the driver drained the ring: `ring − rx_free_thresh` frames,
    /// since up to `rx_free_thresh − 1` re-armed descriptors may wait behind
    /// the tail, plus the one held back (`pollnic_rings::rx`). Harnesses deliver that
    /// many bursts per round so that no `forward_burst` finds the ring empty.
    pub fn bursts_per_round(&self, batch: usize) -> usize {
        let ring = self.rx.desc().count();
        (ring - rx_free_thresh(ring)) as usize / batch.max(1)
    }

    /// The model delivers `n` frames (device work, not the driver's).
    pub fn deliver(&mut self, n: usize) {
        for _ in 0..n {
            if !self.rx_nic.receive(&self.frame, 0) {
                break;
            }
        }
    }

    /// The driver's work: one RX burst of up to `batch` and one TX burst of
    /// what arrived. Returns frames forwarded. Never inlined, so callgrind can
    /// count its instructions alone (`--toggle-collect=*forward_burst*`).
    #[inline(never)]
    pub fn forward_burst(&mut self, batch: usize) -> usize {
        self.rx.rx_burst(&mut self.burst, batch);
        let n = self.tx.tx_burst(&mut self.burst, self.rx.cache_mut());
        // The TX ring is sized so that everything fits; anything left is freed.
        if !self.burst.is_empty() {
            self.rx.cache_mut().free_bulk(&mut self.burst);
        }
        n
    }

    /// The model sends what was queued and writes DD back (device work).
    pub fn complete_tx(&mut self) {
        self.tx_nic.process_tx();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every buffer outside the shared free list holds one pool reference:
    /// after forwarding (RX refill from the cache, TX reclaim into it,
    /// refills and spills) and tearing down, the count is back to the one
    /// handle left, and every buffer is free.
    #[test]
    fn references_follow_the_buffers_and_all_come_back() {
        let mut rig = FwdRig::new(64, 60);
        let pool = rig.pool.clone();
        let refs = |p: &Mempool| p.references();
        let mut done = 0;
        for round in 0..200 {
            rig.deliver(63);
            for _ in 0..63 {
                done += rig.forward_burst(1 + round % 7);
            }
            rig.complete_tx();
            // Handles: the test's, the rig's, the RX ring's, the TX ring's,
            // the cache's; then one per buffer outside the free list.
            let outside = pool.capacity() as usize - pool.free_count();
            assert_eq!(refs(&pool), 5 + outside, "round {round}");
        }
        assert!(done > 5000);
        drop(rig);
        assert_eq!(refs(&pool), 1);
        assert_eq!(pool.free_count(), pool.capacity() as usize);
    }
}
