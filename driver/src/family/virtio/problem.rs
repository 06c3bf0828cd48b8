//! What can be wrong with a virtio-net device that pollnic refuses to
//! drive, one variant per check, each with the values it found
//! ([`crate::Error::Virtio`] carries it with the device's address).
//!
//! The messages say what the device did, in the spec's terms; what to
//! change in a hypervisor's options is the business of the docs
//! (`docs/nics/virtio-net.md`), not of a library error.

/// Why a virtio-net device cannot be driven (virtio 1.2 clause in each
/// variant). Non-exhaustive: match with a `_` arm.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VirtioError {
    /// The PCI configuration space (its status register or capability
    /// list) could not be read.
    #[error("its PCI configuration space cannot be read")]
    ConfigSpaceUnreadable,
    /// No vendor capability of this type, with a usable BAR and at least
    /// the structure's length (§4.1.4: a virtio 1.x device has all four).
    #[error("it has no {structure} capability (a legacy-only device?)")]
    MissingStructure {
        /// "common configuration", "notification", "ISR status" or
        /// "network device configuration".
        structure: &'static str,
    },
    /// The capability names a BAR that is not mapped.
    #[error("its {structure} structure is in BAR {bar}, which is not mapped")]
    BarNotMapped {
        /// The structure, as in [`VirtioError::MissingStructure`].
        structure: &'static str,
        /// The BAR index.
        bar: u8,
    },
    /// The structure does not fit in its BAR: offset + length past the
    /// BAR's size, or past 2^32 (§4.1.4, checked without wrapping).
    #[error(
        "its {structure} structure ({length} bytes at offset {offset:#x} of BAR {bar}) does not \
         fit in the BAR ({bar_size} bytes)"
    )]
    StructureOutsideBar {
        /// The structure.
        structure: &'static str,
        /// The BAR index.
        bar: u8,
        /// `offset` of the capability, bytes.
        offset: u32,
        /// `length` of the capability, bytes.
        length: u32,
        /// The BAR's size, bytes.
        bar_size: u64,
    },
    /// The structure's offset is not aligned as §4.1.4.3 (common, 4),
    /// §4.1.4.4 (notify, 2) or §4.1.4.6 (device configuration, 4) require.
    #[error("its {structure} structure's offset {offset:#x} is not {align}-byte aligned")]
    StructureMisaligned {
        /// The structure.
        structure: &'static str,
        /// `offset` of the capability, bytes.
        offset: u32,
        /// The alignment required, bytes.
        align: u32,
    },
    /// A queue's notification address (`cap.offset + queue_notify_off ×
    /// notify_off_multiplier`, §4.1.4.4) is outside the notify structure
    /// or not 2-byte aligned.
    #[error(
        "virtqueue {queue}'s notification address lies outside the notify structure \
         ({structure_len} bytes) or is misaligned"
    )]
    NotifyOutside {
        /// The virtqueue.
        queue: u16,
        /// The notify structure's length, bytes.
        structure_len: u32,
    },
    /// `max_virtqueue_pairs` (§5.1.4) reads outside 1..=0x8000, or the
    /// device configuration is too short to hold it.
    #[error("max_virtqueue_pairs reads {value:?}, outside 1..=32768")]
    BadMaxQueuePairs {
        /// The value read; `None` when the structure is too short.
        value: Option<u16>,
    },
    /// `num_queues` (§4.1.4.3) is fewer than the queue pairs asked for
    /// (and the control queue) need.
    #[error(
        "it has {have} virtqueues, {need} are needed for {pairs} queue pairs{}",
        if *with_ctrl { " and the control queue" } else { "" }
    )]
    TooFewVirtqueues {
        /// `num_queues`.
        have: u16,
        /// Virtqueues needed.
        need: u32,
        /// Queue pairs asked for.
        pairs: u16,
        /// Whether the control queue is among them.
        with_ctrl: bool,
    },
    /// A virtqueue's largest size (`queue_size` as reset) is below what
    /// pollnic needs.
    #[error("its {which} virtqueue holds {max} descriptors, pollnic needs at least {min}")]
    QueueTooSmall {
        /// "receive", "transmit" or "control".
        which: &'static str,
        /// The device's `queue_size`.
        max: u16,
        /// pollnic's minimum.
        min: u32,
    },
    /// The device's MTU (`VIRTIO_NET_F_MTU`) is above the largest pollnic
    /// takes: §5.1.4.2 requires receive buffers that hold a frame of that
    /// size, and without `VIRTIO_NET_F_MRG_RXBUF` one buffer holds one
    /// frame, at most [`pollnic_hw::mtu::rx_buf_size`] of the largest MTU.
    #[error(
        "its MTU (VIRTIO_NET_F_MTU) is {device_mtu} bytes; every receive buffer must take a frame \
         of that size (virtio 1.2 §5.1.4.2), and pollnic's take at most an MTU of {max}"
    )]
    MtuTooLarge {
        /// The device's `mtu` field, bytes.
        device_mtu: u16,
        /// pollnic's largest MTU, bytes.
        max: u32,
    },
    /// `rss_max_key_size` (§5.1.4) is below the 40-byte key pollnic sends.
    #[error("its RSS key holds {max_key} bytes (rss_max_key_size), pollnic's is {needed}")]
    RssKeyTooShort {
        /// `rss_max_key_size`.
        max_key: u8,
        /// The key pollnic sends, bytes.
        needed: usize,
    },
    /// The device's indirection table (`rss_max_indirection_table_length`)
    /// is shorter than the 128-entry redirection table, which does not
    /// repeat with the device's period, so it cannot be folded onto it.
    #[error(
        "its RSS indirection table holds {table_len} entries \
         (rss_max_indirection_table_length) and the redirection table does not repeat with that \
         period: use a table that does (DeviceConfig::reta)"
    )]
    RetaDoesNotFold {
        /// `rss_max_indirection_table_length`.
        table_len: usize,
    },
}
