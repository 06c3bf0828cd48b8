//! What a port can do, as data ([`crate::Device::capabilities`]): asked
//! before a program relies on it, so that it can choose (NIC checksums or
//! software sums, how many RSS queues, interrupt mode or busy polling)
//! instead of finding out from a refusal.

use crate::offload::{TxOffload, TxRefusal};
use crate::{Counter, NicFamily};

/// What one open port can do. Non-exhaustive: more may be added.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// The port's family.
    pub family: NicFamily,
    /// Queue pairs the device offers (igb: 8 on the I350, 16 on the 82576;
    /// 82599: the 16 RSS spreads over; virtio-net: `max_virtqueue_pairs`
    /// when MQ or RSS was negotiated, else 1). `DeviceConfig::queues` up to
    /// this opens.
    pub max_queues: u16,
    /// Queue pairs this [`crate::Device`] opened.
    pub queues: u16,
    /// The largest `DeviceConfig::mtu`, in bytes of IP datagram (virtio-net:
    /// the device's `VIRTIO_NET_F_MTU` value, or 1500 without it).
    pub max_mtu: u32,
    /// Transmit offloads the NIC does per frame
    /// ([`crate::Queue::tx_burst_offload`]).
    pub tx: TxCapabilities,
    /// Receive checksum status per frame (`DeviceConfig::rx_checksum`,
    /// `Packet::rx_checksum`); refused at open where false (a virtio-net
    /// device that does not offer `VIRTIO_NET_F_GUEST_CSUM`, where every
    /// frame would report `NotChecked`). On virtio-net only the L4
    /// checksum is reported (virtio 1.2 §5.1.6.4), never the IPv4 header's.
    pub rx_checksum: bool,
    /// VLAN tag stripping on receive (`DeviceConfig::vlan_strip`); refused
    /// at open where false.
    pub vlan_strip: bool,
    /// RSS as pollnic drives it, `None` where the device does not hash (a
    /// virtio-net device without `VIRTIO_NET_F_RSS`, which with MQ spreads
    /// frames its own way).
    pub rss: Option<RssCapabilities>,
    /// Whether `RxMode::Interrupt` and `RxMode::Adaptive` can run: MSI-X
    /// delivered by the way the port is bound (not `uio_pci_generic`) and,
    /// on virtio-net, a vector per receive queue taken by the device.
    pub interrupts: bool,
    /// The counters this port keeps ([`crate::Stats::counter`] is `Some`
    /// for exactly these), in `ethtool -S` order.
    pub counters: Vec<Counter>,
    /// The virtqueue layout a virtio-net port runs (virtio 1.2 §2.6):
    /// [`crate::VirtqLayout::Packed`] when `VIRTIO_F_RING_PACKED` (bit 34)
    /// was negotiated, else [`crate::VirtqLayout::Split`]; `None` on the
    /// descriptor-ring families. See `DeviceConfig::virtq_layout`.
    pub virtq_layout: Option<crate::VirtqLayout>,
    /// Whether a virtio-net port runs its virtqueues in order
    /// (`VIRTIO_F_IN_ORDER` negotiated, virtio 1.2 §6); `None` on the
    /// descriptor-ring families. See `DeviceConfig::virtq_in_order`.
    pub virtq_in_order: Option<bool>,
}

/// Transmit offloads (82576 §7.2.2.3 and §7.2.4, 82599 §7.2.3.2). On
/// virtio-net (virtio 1.2 §5.1.6.2) `l4_checksum` when the device offers
/// `VIRTIO_NET_F_CSUM`, and `tso` when it offers `VIRTIO_NET_F_HOST_TSO4`
/// or `HOST_TSO6` with it (a frame of an IP version whose feature is
/// missing is refused); the IPv4 header checksum and tag insertion stay
/// false there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TxCapabilities {
    /// IPv4 header checksum insertion ([`TxOffload::with_ipv4_checksum`]).
    pub ipv4_checksum: bool,
    /// TCP and UDP checksum insertion ([`TxOffload::with_l4_checksum`]).
    pub l4_checksum: bool,
    /// 802.1Q tag insertion ([`TxOffload::with_vlan`]).
    pub vlan_insert: bool,
    /// TCP segmentation ([`TxOffload::with_tso`]).
    pub tso: bool,
}

impl TxCapabilities {
    /// Whether the port offers any transmit offload.
    pub const fn any(&self) -> bool {
        self.ipv4_checksum || self.l4_checksum || self.vlan_insert || self.tso
    }

    /// Whether every offload `req` asks is offered, whatever the frame:
    /// [`TxRefusal::NoTxOffloads`] on a port that offers none (and `req`
    /// asks something), [`TxRefusal::NotOffered`] naming the first one
    /// missing on a port that offers some (IPv4 header checksum, VLAN tag
    /// insertion, TCP segmentation, in that order; on virtio-net with
    /// `VIRTIO_NET_F_CSUM`, the IPv4 header checksum and the tag, and
    /// segmentation without `HOST_TSO4`/`HOST_TSO6`).
    ///
    /// # Errors
    /// The refusal [`crate::Queue::tx_burst_offload`] would count every
    /// frame of `req` under.
    pub fn check(&self, req: &TxOffload) -> Result<(), TxRefusal> {
        let wanted = [
            (
                req.ipv4_checksum,
                self.ipv4_checksum,
                "IPv4 header checksum insertion",
            ),
            (
                req.l4_checksum,
                self.l4_checksum,
                "TCP/UDP checksum insertion",
            ),
            (req.vlan.is_some(), self.vlan_insert, "VLAN tag insertion"),
            (req.tso.is_some(), self.tso, "TCP segmentation"),
        ];
        match wanted.iter().find(|&&(asked, has, _)| asked && !has) {
            None => Ok(()),
            Some(_) if !self.any() => Err(TxRefusal::NoTxOffloads),
            Some(&(_, _, what)) => Err(TxRefusal::NotOffered { what }),
        }
    }
}

/// RSS as the device does it for pollnic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RssCapabilities {
    /// Entries of the device's redirection table (igb and the 82599: 128;
    /// virtio-net: `rss_max_indirection_table_length` down to a power of
    /// two, at most 128). A `Reta` must repeat with this period.
    pub table_len: usize,
    /// Bytes of the Toeplitz key (40).
    pub key_len: usize,
}

impl Capabilities {
    /// Whether `req` can go out on this port for `frame` (the Ethernet
    /// frame without FCS): [`TxRefusal::NoTxOffloads`] on a port that does
    /// no transmit offloads, [`TxRefusal::NotOffered`] naming the first
    /// asked offload a port with some lacks, and otherwise
    /// [`TxOffload::check`]'s answer (what
    /// [`crate::Queue::tx_burst_offload`] would do with it).
    ///
    /// # Errors
    /// The [`TxRefusal`] the TX burst would count the frame under.
    pub fn check_tx(&self, req: &TxOffload, frame: &[u8]) -> Result<(), TxRefusal> {
        self.tx.check(req)?;
        req.check(frame)
    }
}
