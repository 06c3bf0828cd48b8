//! TX descriptor ring bookkeeping: one descriptor per frame, one tail write per
//! burst, reclaim of completed descriptors (DD written back because every
//! descriptor asks for it with RS), ring-full back-pressure.
//!
//! `tx_burst` takes as many frames as fit and leaves the rest with the caller:
//! it never drops a valid frame (the bug ixy.rs once had). Sources: 82576
//! datasheet §7.2 (transmit functionality), DPDK `rte_eth_tx_burst` semantics.

use crate::descring::{DescRing, Doorbell};
use crate::mempool::Packet;
use pollnic_hw::desc::{tx_data, tx_done, TX_MAX_DATA_LEN};

/// Per-ring software counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxStats {
    /// Frames handed to the device.
    pub packets: u64,
    /// Bytes in those frames (no FCS).
    pub bytes: u64,
    /// `tx_burst` calls that queued at least one frame.
    pub bursts: u64,
    /// `tx_burst` calls that had to leave frames behind because the ring was full.
    pub ring_full: u64,
    /// Frames refused as unsendable (zero length or over 65535 bytes) and freed.
    pub tx_errors: u64,
}

/// One TX queue's ring. The driver must stop the queue before dropping it.
pub struct TxRing<D: Doorbell> {
    desc: DescRing,
    slots: Box<[Option<Packet>]>,
    tail: u16,
    clean: u16,
    in_flight: u16,
    doorbell: D,
    stats: TxStats,
}

impl<D: Doorbell> TxRing<D> {
    /// A ring over `desc` whose tail starts at 0 (the driver sets TDH = TDT = 0).
    pub fn new(desc: DescRing, doorbell: D) -> Self {
        let slots = (0..desc.count()).map(|_| None).collect();
        TxRing {
            desc,
            slots,
            tail: 0,
            clean: 0,
            in_flight: 0,
            doorbell,
            stats: TxStats::default(),
        }
    }

    /// Queue frames from the front of `pkts` until the ring is full; the queued
    /// ones are removed from `pkts`, the rest stay in order. Returns how many
    /// were taken (including any refused as unsendable, see [`TxStats::tx_errors`]).
    pub fn tx_burst(&mut self, pkts: &mut Vec<Packet>) -> usize {
        self.reclaim();
        let count = self.desc.count();
        let room = (count - 1 - self.in_flight) as usize;
        let n = room.min(pkts.len());
        if n < pkts.len() {
            self.stats.ring_full += 1;
        }
        let mut queued = 0;
        for p in pkts.drain(..n) {
            if p.is_empty() || p.len() > TX_MAX_DATA_LEN {
                self.stats.tx_errors += 1;
                continue;
            }
            let t = self.tail;
            self.desc.write(t, tx_data(p.iova(), p.len() as u16));
            self.stats.bytes += p.len() as u64;
            self.slots[t as usize] = Some(p);
            self.tail = if t + 1 == count { 0 } else { t + 1 };
            self.in_flight += 1;
            queued += 1;
        }
        if queued > 0 {
            self.stats.packets += queued;
            self.stats.bursts += 1;
            self.desc.publish();
            self.doorbell.ring(self.tail);
        }
        n
    }

    /// Free the buffers of every completed descriptor, oldest first; returns how many.
    pub fn reclaim(&mut self) -> usize {
        let count = self.desc.count();
        let mut n = 0;
        while self.in_flight > 0 && tx_done(self.desc.read_hi(self.clean)) {
            drop(self.slots[self.clean as usize].take());
            self.clean = if self.clean + 1 == count {
                0
            } else {
                self.clean + 1
            };
            self.in_flight -= 1;
            n += 1;
        }
        n
    }

    /// Frames queued and not yet reclaimed.
    pub fn in_flight(&self) -> usize {
        self.in_flight as usize
    }
    /// Counters since creation.
    pub fn stats(&self) -> TxStats {
        self.stats
    }
    /// The descriptor ring (its IOVA and length go to TDBAL/TDBAH/TDLEN).
    pub fn desc(&self) -> &DescRing {
        &self.desc
    }
}
