//! virtio 1.x over PCI (OASIS virtio v1.2, cs01): the vendor ID and the
//! feature bits pollnic negotiates with a network device. Pure constants,
//! shared by the driver's bring-up and by `pollnic bind`/`doctor`, which
//! read a device's offered bits from sysfs before anything is bound.

/// PCI vendor ID of virtio devices (Red Hat, Inc.; virtio 1.2 §4.1.2).
pub const VIRTIO_VENDOR_ID: u16 = 0x1af4;

/// Feature bits (virtio 1.2 §6 "Reserved Feature Bits" for the transport
/// ones, §5.1.3 for the network device's), as masks of the 64-bit feature
/// word.
pub mod feature {
    /// `VIRTIO_NET_F_CSUM`: the device takes packets with a partial
    /// checksum (§5.1.6.2: `VIRTIO_NET_HDR_F_NEEDS_CSUM`, `csum_start`,
    /// `csum_offset`). pollnic negotiates it whenever it is offered.
    pub const NET_CSUM: u64 = 1 << 0;
    /// `VIRTIO_NET_F_GUEST_CSUM`: the driver takes received packets with a
    /// partial or already validated checksum (§5.1.6.4:
    /// `VIRTIO_NET_HDR_F_NEEDS_CSUM`, `VIRTIO_NET_HDR_F_DATA_VALID`).
    /// pollnic negotiates it only for a port opened with
    /// `DeviceConfig::rx_checksum`.
    pub const NET_GUEST_CSUM: u64 = 1 << 1;
    /// `VIRTIO_NET_F_HOST_TSO4`: the device segments TCP/IPv4 packets the
    /// driver sends with `gso_type` `VIRTIO_NET_HDR_GSO_TCPV4` (§5.1.6.2;
    /// needs `VIRTIO_NET_F_CSUM`, §5.1.3.1). pollnic negotiates it with
    /// CSUM, for `TxOffload::with_tso`.
    pub const NET_HOST_TSO4: u64 = 1 << 11;
    /// `VIRTIO_NET_F_HOST_TSO6`: the same for TCP/IPv6
    /// (`VIRTIO_NET_HDR_GSO_TCPV6`).
    pub const NET_HOST_TSO6: u64 = 1 << 12;
    /// `VIRTIO_NET_F_MTU`: the device reports its MTU.
    pub const NET_MTU: u64 = 1 << 3;
    /// `VIRTIO_NET_F_MAC`: the device has a MAC address.
    pub const NET_MAC: u64 = 1 << 5;
    /// `VIRTIO_NET_F_STATUS`: the link status field is valid.
    pub const NET_STATUS: u64 = 1 << 16;
    /// `VIRTIO_NET_F_CTRL_VQ`: a control virtqueue.
    pub const NET_CTRL_VQ: u64 = 1 << 17;
    /// `VIRTIO_NET_F_CTRL_RX`: the receive filter's promiscuous and
    /// all-multicast modes are set by control commands (needs CTRL_VQ).
    pub const NET_CTRL_RX: u64 = 1 << 18;
    /// `VIRTIO_NET_F_MQ`: several queue pairs (needs CTRL_VQ).
    pub const NET_MQ: u64 = 1 << 22;
    /// `VIRTIO_NET_F_HASH_REPORT`: the RSS hash in each received header.
    pub const NET_HASH_REPORT: u64 = 1 << 57;
    /// `VIRTIO_NET_F_RSS`: RSS steering, configured with
    /// `VIRTIO_NET_CTRL_MQ_RSS_CONFIG` (needs CTRL_VQ).
    pub const NET_RSS: u64 = 1 << 60;
    /// `VIRTIO_F_EVENT_IDX` (Linux `VIRTIO_RING_F_EVENT_IDX`): notifications
    /// are suppressed by the `used_event` and `avail_event` indices (§2.7.7,
    /// §2.7.10) instead of the flags.
    pub const EVENT_IDX: u64 = 1 << 29;
    /// `VIRTIO_F_VERSION_1`: the modern interface.
    pub const VERSION_1: u64 = 1 << 32;
    /// `VIRTIO_F_ACCESS_PLATFORM`: the device's DMA goes through the
    /// platform's IOMMU (the guest's vIOMMU, hence VFIO's mappings).
    pub const ACCESS_PLATFORM: u64 = 1 << 33;
    /// `VIRTIO_F_RING_PACKED`: packed virtqueues (virtio 1.2 §2.8) instead
    /// of split ones.
    pub const RING_PACKED: u64 = 1 << 34;
    /// `VIRTIO_F_IN_ORDER`: the device uses buffers in the order they were
    /// made available (virtio 1.2 §6), and may complete a batch with one
    /// used entry.
    pub const IN_ORDER: u64 = 1 << 35;
}

/// The fields of `struct virtio_net_hdr` pollnic reads and writes (virtio
/// 1.2 §5.1.6): byte offsets in the header and the flag values.
pub mod net_hdr {
    /// Offset of `flags` (u8).
    pub const FLAGS: usize = 0;
    /// Offset of `gso_type` (u8).
    pub const GSO_TYPE: usize = 1;
    /// Offset of `hdr_len` (le16): the bytes of headers before the TCP
    /// payload of a segmented packet (a hint to the device without
    /// `VIRTIO_NET_F_GUEST_HDRLEN`, §5.1.6.2).
    pub const HDR_LEN: usize = 2;
    /// Offset of `gso_size` (le16): the MSS of a segmented packet.
    pub const GSO_SIZE: usize = 4;
    /// Offset of `csum_start` (le16).
    pub const CSUM_START: usize = 6;
    /// Offset of `csum_offset` (le16).
    pub const CSUM_OFFSET: usize = 8;
    /// `VIRTIO_NET_HDR_F_NEEDS_CSUM` (bit 0 of `flags`): the checksum from
    /// `csum_start` to the end of the packet is still to be computed and
    /// stored at `csum_start + csum_offset`, whose field holds the
    /// pseudo-header's sum (§5.1.6.2, §5.1.6.4).
    pub const F_NEEDS_CSUM: u8 = 1;
    /// `VIRTIO_NET_HDR_F_DATA_VALID` (bit 1 of `flags`, receive only): the
    /// device validated the packet's checksum (§5.1.6.4).
    pub const F_DATA_VALID: u8 = 2;
    /// `VIRTIO_NET_HDR_GSO_NONE`: no segmentation (`gso_type`).
    pub const GSO_NONE: u8 = 0;
    /// `VIRTIO_NET_HDR_GSO_TCPV4`: segment this TCP/IPv4 packet
    /// (`gso_type`, with `VIRTIO_NET_F_HOST_TSO4`).
    pub const GSO_TCPV4: u8 = 1;
    /// `VIRTIO_NET_HDR_GSO_TCPV6`: segment this TCP/IPv6 packet
    /// (`gso_type`, with `VIRTIO_NET_F_HOST_TSO6`).
    pub const GSO_TCPV6: u8 = 4;
}
