//! The rings of one queue pair, whichever kind they are: every method
//! [`super::Queue`] needs from them, each one `match` over the kinds. A new
//! kind of ring is one new variant and one new arm per method here; `Queue`
//! and the code above it do not change. (Packed virtqueues, virtio 1.2
//! §2.8, are not a new kind here: `VirtqRx` and `VirtqTx` carry either
//! layout, see `pollnic_rings::VirtqLayout`.)
//!
//! An enum, not a trait object: the match is one well-predicted compare per
//! burst call, and each arm's burst is inlined (`docs/design/families.md`,
//! "Two kinds of ring").

use crate::caps::TxCapabilities;
use crate::counters::QueueCounters;
use crate::error::{Error, Result};
use crate::family::virtio::Notify;
use crate::lowlevel::io::TailDoorbell;
use pollnic_hw::offload::{TxOffload, TxRefusal};
use pollnic_rings::{
    Mempool, Packet, PoolCache, RxRing, RxStats, TxRing, TxStats, VirtqRx, VirtqStats, VirtqTx,
};

/// The driver's counters of a virtio-net queue pair's two virtqueues
/// ([`super::Queue::virtq_stats`]): kicks, suppressed kicks, device errors
/// and whether each stopped. Non-exhaustive: read the fields, or
/// destructure with `..`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct VirtqPairStats {
    /// The receive virtqueue's.
    pub rx: VirtqStats,
    /// The transmit virtqueue's.
    pub tx: VirtqStats,
}

/// The rings of one queue pair: Intel descriptor rings (igb, ixgbe) or
/// virtio virtqueues, split or packed (virtio-net). One per queue, made
/// once and never moved on the hot path: the variants stay inline (a box
/// would add a pointer load to every burst), whatever their sizes.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Rings {
    /// Descriptor rings written through tail registers.
    Desc {
        rx: RxRing<TailDoorbell>,
        tx: TxRing<TailDoorbell>,
    },
    /// Virtqueues (split or packed) with their notification doorbells.
    Virtq {
        rx: VirtqRx<Notify>,
        tx: VirtqTx<Notify>,
    },
}

/// Publish a virtqueue pair's driver counters (kicks, device errors,
/// stops) to its queue's counters (after every burst, as the packet
/// counters are).
#[inline]
fn publish_kicks(c: &QueueCounters, rx: &VirtqRx<Notify>, tx: &VirtqTx<Notify>) {
    c.publish_virtq(&rx.virtq_stats(), &tx.virtq_stats());
}

impl Rings {
    /// Start the receive side (post its buffers, write the tail or kick):
    /// once, after the device took the ring's addresses.
    pub(crate) fn start(&mut self) {
        match self {
            Rings::Desc { rx, .. } => rx.start(),
            Rings::Virtq { rx, .. } => rx.start(),
        }
    }

    /// [`super::Queue::rx_burst`]: receive up to `max` frames into `out`,
    /// then publish the ring's counters to `c`.
    #[inline]
    pub(crate) fn rx_burst(
        &mut self,
        out: &mut Vec<Packet>,
        max: usize,
        c: &QueueCounters,
    ) -> usize {
        let (n, stats) = match self {
            Rings::Desc { rx, .. } => (rx.rx_burst(out, max), rx.stats()),
            Rings::Virtq { rx, tx } => {
                let n = rx.rx_burst(out, max);
                publish_kicks(c, rx, tx);
                (n, rx.stats())
            }
        };
        c.publish_rx(&stats);
        n
    }

    /// [`super::Queue::tx_burst`] after the padding: take frames from the
    /// front of `pkts`, then publish the ring's counters to `c`.
    #[inline]
    pub(crate) fn tx_burst(&mut self, pkts: &mut Vec<Packet>, c: &QueueCounters) -> usize {
        let (n, stats) = match self {
            Rings::Desc { rx, tx } => (tx.tx_burst(pkts, rx.cache_mut()), tx.stats()),
            Rings::Virtq { rx, tx } => {
                let n = tx.tx_burst(pkts, rx.cache_mut());
                publish_kicks(c, rx, tx);
                (n, tx.stats())
            }
        };
        c.publish_tx(&stats);
        n
    }

    /// [`super::Queue::tx_burst_offload`] after the padding. A virtqueue
    /// does TCP/UDP checksums with `VIRTIO_NET_F_CSUM` and refuses the rest
    /// (`VirtqTx::tx_burst_offload`).
    #[inline]
    pub(crate) fn tx_burst_offload(
        &mut self,
        pkts: &mut Vec<Packet>,
        offload: &TxOffload,
        c: &QueueCounters,
    ) -> usize {
        let (n, stats) = match self {
            Rings::Desc { rx, tx } => (
                tx.tx_burst_offload(pkts, offload, rx.cache_mut()),
                tx.stats(),
            ),
            Rings::Virtq { rx, tx } => {
                let n = tx.tx_burst_offload(pkts, offload, rx.cache_mut());
                publish_kicks(c, rx, tx);
                (n, tx.stats())
            }
        };
        c.publish_tx(&stats);
        n
    }

    /// The transmit offloads the TX ring does: all of them on the Intel
    /// rings (their advanced context descriptors), the TCP/UDP checksum
    /// on a virtqueue with `VIRTIO_NET_F_CSUM` and TCP segmentation with
    /// `HOST_TSO4` or `HOST_TSO6` too, none on one without.
    pub(crate) fn tx_capabilities(&self) -> TxCapabilities {
        match self {
            Rings::Desc { .. } => TxCapabilities {
                ipv4_checksum: true,
                l4_checksum: true,
                vlan_insert: true,
                tso: true,
            },
            Rings::Virtq { tx, .. } => TxCapabilities {
                l4_checksum: tx.csum(),
                tso: tx.tso() != (false, false),
                ..TxCapabilities::default()
            },
        }
    }

    /// Why the last frame refused by an offload burst was refused.
    pub(crate) fn last_tx_refusal(&self) -> Option<TxRefusal> {
        match self {
            Rings::Desc { tx, .. } => tx.last_refusal(),
            Rings::Virtq { tx, .. } => tx.last_refusal(),
        }
    }

    /// Reclaim sent TX buffers into the queue's cache; returns how many.
    pub(crate) fn reclaim(&mut self) -> usize {
        match self {
            Rings::Desc { rx, tx } => tx.reclaim(rx.cache_mut()),
            Rings::Virtq { rx, tx } => tx.reclaim(rx.cache_mut()),
        }
    }

    /// Frames handed to the TX ring and not yet reclaimed.
    pub(crate) fn tx_in_flight(&self) -> usize {
        match self {
            Rings::Desc { tx, .. } => tx.in_flight(),
            Rings::Virtq { tx, .. } => tx.in_flight(),
        }
    }

    /// The queue's buffer cache (the RX ring's).
    #[inline]
    pub(crate) fn cache_mut(&mut self) -> &mut PoolCache {
        match self {
            Rings::Desc { rx, .. } => rx.cache_mut(),
            Rings::Virtq { rx, .. } => rx.cache_mut(),
        }
    }

    /// Buffers the RX ring holds for the device (descriptors on the Intel
    /// rings; chains on a virtqueue: half the descriptors, or all of them
    /// on a packed receive queue of one descriptor per buffer).
    #[cfg_attr(not(feature = "smoltcp"), allow(dead_code))]
    pub(crate) fn rx_buffers(&self) -> usize {
        match self {
            Rings::Desc { rx, .. } => rx.desc().count() as usize,
            Rings::Virtq { rx, .. } => rx.chains(),
        }
    }

    /// Whether a frame waits on the RX ring.
    pub(crate) fn rx_ready(&self) -> bool {
        match self {
            Rings::Desc { rx, .. } => rx.ready(),
            Rings::Virtq { rx, .. } => rx.ready(),
        }
    }

    /// Ask the device for interrupts on the RX ring (`on`) or not. The
    /// Intel rings have no such switch (their vector's mask registers are
    /// the queue's `QueueIrq`'s); a virtqueue clears or sets
    /// `VRING_AVAIL_F_NO_INTERRUPT` (with `VIRTIO_F_EVENT_IDX`, moves
    /// `used_event`).
    pub(crate) fn set_rx_interrupts(&mut self, on: bool) {
        match self {
            Rings::Desc { .. } => {}
            Rings::Virtq { rx, .. } => rx.set_interrupts(on),
        }
    }

    /// The virtqueues' driver-side counters, or `None` on descriptor rings.
    pub(crate) fn virtq_stats(&self) -> Option<VirtqPairStats> {
        match self {
            Rings::Desc { .. } => None,
            Rings::Virtq { rx, tx } => Some(VirtqPairStats {
                rx: rx.virtq_stats(),
                tx: tx.virtq_stats(),
            }),
        }
    }

    /// [`Error::QueueStopped`] for queue `id` when a side stopped on a
    /// device error (only a virtqueue stops: the Intel rings count a bad
    /// descriptor and go on).
    pub(crate) fn check(&self, id: u16) -> Result<()> {
        let Some(VirtqPairStats { rx: r, tx: t }) = self.virtq_stats() else {
            return Ok(());
        };
        if r.stopped || t.stopped {
            return Err(Error::QueueStopped {
                queue: id,
                rx: r.stopped,
                tx: t.stopped,
                device_errors: r.device_errors + t.device_errors,
            });
        }
        Ok(())
    }

    /// The pool the RX ring refills from (the queue's mempool).
    pub(crate) fn mempool(&self) -> &Mempool {
        match self {
            Rings::Desc { rx, .. } => rx.pool(),
            Rings::Virtq { rx, .. } => rx.pool(),
        }
    }

    /// RX ring counters.
    pub(crate) fn rx_stats(&self) -> RxStats {
        match self {
            Rings::Desc { rx, .. } => rx.stats(),
            Rings::Virtq { rx, .. } => rx.stats(),
        }
    }

    /// TX ring counters.
    pub(crate) fn tx_stats(&self) -> TxStats {
        match self {
            Rings::Desc { tx, .. } => tx.stats(),
            Rings::Virtq { tx, .. } => tx.stats(),
        }
    }

    /// The burst loops in use (a virtqueue has the scalar loop only).
    pub(crate) fn data_path(&self) -> crate::DataPath {
        match self {
            Rings::Desc { rx, .. } => rx.data_path(),
            Rings::Virtq { .. } => crate::DataPath::Scalar,
        }
    }
}
