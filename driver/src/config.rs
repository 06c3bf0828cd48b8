//! Device configuration with the field's defaults.

use crate::error::ConfigError;
use crate::irq::{Moderation, RxMode};
pub use pollnic_hw::flow::FlowControl;
use pollnic_hw::igb::{valid_ring_size, MAX_QUEUES_82576};
pub use pollnic_hw::power::PowerSaving;
use pollnic_hw::rss::{Reta, KEY_LEN, MICROSOFT_KEY};
use std::time::Duration;

/// How to bring a device up. `Default` gives DPDK-like defaults; change
/// them with the `with_*` builder methods (or by assigning fields of a
/// `DeviceConfig::default()`), e.g.
/// `DeviceConfig::default().with_queues(4).with_mtu(9000)`. Non-exhaustive:
/// fields may be added, so build from the default, never from a literal.
/// Checked by [`DeviceConfig::validate`] (and by `Device::open`) before the
/// device is touched.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DeviceConfig {
    /// RX descriptors per queue: a power of two in 32..=4096, at least 64 on
    /// the 82599 (default 512).
    pub rx_ring_size: u32,
    /// TX descriptors per queue: a power of two in 32..=4096, at least 64 on
    /// the 82599 (default 512).
    pub tx_ring_size: u32,
    /// Buffers in each queue's mempool (default 4096); at least
    /// [`DeviceConfig::min_mempool_size`].
    pub mempool_size: u32,
    /// Bytes per buffer, at least (default 2048; SRRCTL.BSIZEPKT takes 1 KiB
    /// units). Raised to [`pollnic_hw::mtu::rx_buf_size`] of `mtu` when
    /// smaller, so that every frame the NIC accepts fits one buffer: the
    /// size in use is [`DeviceConfig::rx_buf_size`].
    pub buf_size: usize,
    /// Largest L3 payload in bytes, as Linux's MTU (default 1500; 1500..=9000).
    /// The NIC drops longer frames and counts them in `rx_length_errors`
    /// (silicon and the software models; QEMU's igb drops them uncounted):
    /// an untagged frame may be `mtu + 18` bytes with its FCS (9018 at MTU
    /// 9000), 4 more per VLAN tag. Above 1500 the 82576 gets RCTL.LPE and
    /// RLPML = `mtu + 18` (datasheet §8.10.1, RLPML); the 82599 always gets
    /// HLREG0.JUMBOEN and MAXFRS.MFS = `mtu + 18`, as Linux ixgbe sets them
    /// (`ixgbe_set_rx_buffer_len`).
    pub mtu: u32,
    /// Accept every unicast and multicast frame (RCTL.UPE | RCTL.MPE; default
    /// off: frames to another unicast MAC are dropped by the NIC's filter and
    /// counted nowhere).
    pub promisc: bool,
    /// Accept every multicast frame (RCTL.MPE), as DPDK's allmulticast mode
    /// (default off: the multicast table is left empty, so multicast frames
    /// are dropped by the filter, as in DPDK without allmulticast).
    pub allmulti: bool,
    /// How long to wait for link up after autonegotiation restarts (default 10 s).
    pub link_timeout: Duration,
    /// RX/TX queue pairs, one per core (default 1; 82576 and 82599: up to 16
    /// (RSS spreads over 16), I350: 8).
    pub queues: u16,
    /// The 40-byte RSS key (default [`MICROSOFT_KEY`], as DPDK's igb PMD;
    /// [`pollnic_hw::rss::SYMMETRIC_KEY`] keeps both directions of a flow on one queue).
    pub rss_key: [u8; KEY_LEN],
    /// The redirection table (default: round robin over the queues).
    pub reta: Option<Reta>,
    /// Which packet types RSS hashes (default: IPv4/IPv6, TCP and UDP).
    pub hash_types: HashTypes,
    /// How every queue waits for frames (default [`RxMode::BusyPoll`]). An
    /// interrupt or adaptive mode enables MSI-X at open, one vector per RX
    /// queue; [`crate::run_pinned`] and [`crate::Device::set_rx_mode`]
    /// change it later.
    pub rx_mode: RxMode,
    /// How each queue's vector is throttled (EITR), as `ethtool -C <if>
    /// rx-usecs`: a fixed minimum interval between two interrupts in µs
    /// (default `Fixed { usecs: 0 }`: none; at most 8191 on igb, 1022 on
    /// the 82599), or igb's dynamic classes under a latency bound
    /// ([`Moderation::Dynamic`]). Used once MSI-X is on; changeable at run
    /// time ([`crate::Queue::set_moderation`], [`crate::Device::set_moderation`]).
    pub moderation: Moderation,
    /// Which burst loops the queues run (default [`DataPathChoice::Auto`]:
    /// the vector one where the CPU has its instructions, detected when the
    /// queues are set up).
    pub data_path: DataPathChoice,
    /// Which PAUSE directions the port uses (`ethtool -A`); `None` (the
    /// default) is the family's own default: [`FlowControl::Full`] on igb
    /// and ixgbe, as Linux igb and ixgbe, and no PAUSE on virtio-net, which
    /// has none (a VM's port sends no PAUSE frames to its host), so virtio
    /// refuses any `Some` but `Some(FlowControl::None)`
    /// ([`crate::Error::ConfigUnsupported`]). Forced, not
    /// negotiated; the water marks follow Linux (`igb_reset`,
    /// `ixgbe_pbthresh_setup`). With several queues each queue drops its
    /// own frames when its ring is full (SRRCTL.DROP_EN), so XOFF goes out
    /// only when the shared packet buffer itself fills; Linux ixgbe instead
    /// clears DROP_EN while it sends PAUSE, letting one full ring hold up
    /// the others.
    pub flow_control: Option<FlowControl>,
    /// The I350's power saving (default [`PowerSaving::OFF`]: Energy
    /// Efficient Ethernet and DMA coalescing both off, since both add
    /// wake-up latency to the first frame after a quiet spell). Linux igb
    /// turns both on for the I350. The 82576 (QEMU's igb too), the 82599
    /// and virtio-net have neither: there anything but [`PowerSaving::OFF`]
    /// is refused at open ([`crate::Error::ConfigUnsupported`]).
    pub power_saving: PowerSaving,
    /// Report each received frame's IPv4 and TCP/UDP checksum status
    /// ([`crate::Packet::rx_checksum`]; default off). On igb this sets
    /// RXCSUM.IPOFLD and TUOFLD (82576 datasheet §8.10.11); the 82599
    /// checks them always. Frames with a bad checksum are still delivered.
    /// virtio-net reports no checksum status and refuses it
    /// ([`crate::Error::ConfigUnsupported`]; `Capabilities::rx_checksum`
    /// says which ports offer it).
    /// Off, the queues run the burst loops without the status work
    /// (its cost: docs/design/offloads.md).
    pub rx_checksum: bool,
    /// Strip the 802.1Q tag of received frames and report it
    /// ([`crate::Packet::vlan`]; default off): CTRL.VME on igb (every
    /// queue), RXDCTL.VME of each queue on the 82599, as Linux's
    /// `rxvlan` offload. The frame's bytes then hold no tag.
    pub vlan_strip: bool,
    /// The virtqueue layout of a virtio-net port (virtio 1.2 §2.6; other
    /// families ignore it): `None` (the default) takes packed virtqueues
    /// (§2.8) when the device offers `VIRTIO_F_RING_PACKED` and split ones
    /// (§2.7) otherwise; `Some(VirtqLayout::Split)` always split;
    /// `Some(VirtqLayout::Packed)` packed, and a device that does not offer
    /// them is refused at open ([`crate::Error::ConfigUnsupported`], field
    /// `virtq_layout`). `Capabilities::virtq_layout` says which a port runs.
    pub virtq_layout: Option<crate::VirtqLayout>,
    /// In-order completion on a virtio-net port (`VIRTIO_F_IN_ORDER`,
    /// virtio 1.2 §6; other families ignore it): `None` (the default)
    /// takes it when the device offers it; `Some(false)` never;
    /// `Some(true)` always, and a device that does not offer it is refused
    /// at open ([`crate::Error::ConfigUnsupported`], field
    /// `virtq_in_order`). With it the queues post buffers in ring order and
    /// a transmit queue frees a whole batch from one used entry
    /// (`pollnic_rings::virtq`, "In order"). `Capabilities::virtq_in_order`
    /// says whether a port runs it.
    pub virtq_in_order: Option<bool>,
    /// Which addresses the device is given for DMA (default
    /// [`DmaAddressing::Iommu`]). [`DmaAddressing::UnsafeNoIommuPhysical`]
    /// is the opt-in for a machine without an IOMMU: docs/no-iommu.md.
    pub dma: DmaAddressing,
}

/// Which addresses a device is given for DMA ([`DeviceConfig::dma`]), as
/// DPDK's `--iova-mode` (`va` through an IOMMU, `pa` without one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum DmaAddressing {
    /// IO virtual addresses through the IOMMU (VFIO type1): the device
    /// reaches only the memory pollnic mapped for it. The default, and the
    /// only mode for a port behind an IOMMU.
    #[default]
    Iommu,
    /// Physical addresses, for a port with no IOMMU between it and memory
    /// (bound to `uio_pci_generic`, or to vfio-pci in VFIO's no-IOMMU
    /// mode). **Unsafe for the machine**: nothing stops the device, a bug
    /// or a hostile device from DMAing anywhere in RAM, and a no-IOMMU bind
    /// taints the kernel. Needs `CAP_SYS_ADMIN` (physical addresses come
    /// from `/proc/self/pagemap`) and 2 MiB hugepages (each physically
    /// contiguous; no buffer or ring crosses one). Refused for a port that
    /// sits behind an IOMMU ([`crate::Error::NoIommuNotNeeded`]).
    UnsafeNoIommuPhysical,
}

impl std::fmt::Display for DmaAddressing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DmaAddressing::Iommu => "iommu",
            DmaAddressing::UnsafeNoIommuPhysical => "no-iommu (physical addresses)",
        })
    }
}

/// The RX/TX burst loops a device's queues run ([`DeviceConfig::data_path`]).
/// Both give the same frames and counters; the vector loops take four
/// descriptors per step (x86-64 SSE2, after DPDK's vector PMDs), the scalar
/// ones are the reference and the fallback.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum DataPathChoice {
    /// The vector loops when the CPU runs them (detected at queue setup),
    /// else the scalar ones.
    #[default]
    Auto,
    /// Always the scalar loops (one descriptor at a time).
    Scalar,
    /// Always the vector loops: [`DeviceConfig::validate`] refuses it
    /// (`ConfigError::VectorUnsupported`) on a CPU without them.
    Vector,
}

impl DataPathChoice {
    /// The loops this choice gives on this CPU.
    pub fn resolve(self) -> pollnic_rings::DataPath {
        match self {
            DataPathChoice::Auto => pollnic_rings::DataPath::detect(),
            DataPathChoice::Scalar => pollnic_rings::DataPath::Scalar,
            DataPathChoice::Vector => pollnic_rings::DataPath::Vector,
        }
    }
}

impl std::str::FromStr for DataPathChoice {
    type Err = crate::error::ParseNameError;
    /// `auto`, `scalar` or `vector`.
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s {
            "auto" => Ok(DataPathChoice::Auto),
            "scalar" => Ok(DataPathChoice::Scalar),
            "vector" => Ok(DataPathChoice::Vector),
            _ => Err(crate::error::ParseNameError::new(
                "data path",
                s,
                "auto, scalar or vector",
            )),
        }
    }
}

/// Builder methods: each sets one field (see its documentation for units
/// and range) and returns the configuration.
impl DeviceConfig {
    /// Set [`DeviceConfig::dma`] to [`DmaAddressing::UnsafeNoIommuPhysical`]:
    /// physical addresses for a port without an IOMMU (read that variant's
    /// warning first).
    #[must_use]
    pub fn with_unsafe_no_iommu(mut self) -> Self {
        self.dma = DmaAddressing::UnsafeNoIommuPhysical;
        self
    }
    /// Set [`DeviceConfig::rx_mode`]: how every queue waits for frames.
    #[must_use]
    pub fn with_rx_mode(mut self, rx_mode: RxMode) -> Self {
        self.rx_mode = rx_mode;
        self
    }
    /// Set [`DeviceConfig::moderation`] to a fixed interrupt throttle of
    /// `rx_usecs` µs.
    #[must_use]
    pub fn with_rx_usecs(mut self, rx_usecs: u32) -> Self {
        self.moderation = Moderation::Fixed { usecs: rx_usecs };
        self
    }
    /// Set [`DeviceConfig::moderation`].
    #[must_use]
    pub fn with_moderation(mut self, moderation: Moderation) -> Self {
        self.moderation = moderation;
        self
    }
    /// Set [`DeviceConfig::rx_ring_size`]: RX descriptors per queue.
    #[must_use]
    pub fn with_rx_ring_size(mut self, rx_ring_size: u32) -> Self {
        self.rx_ring_size = rx_ring_size;
        self
    }
    /// Set [`DeviceConfig::tx_ring_size`]: TX descriptors per queue.
    #[must_use]
    pub fn with_tx_ring_size(mut self, tx_ring_size: u32) -> Self {
        self.tx_ring_size = tx_ring_size;
        self
    }
    /// Set [`DeviceConfig::mempool_size`]: buffers in each queue's mempool.
    #[must_use]
    pub fn with_mempool_size(mut self, mempool_size: u32) -> Self {
        self.mempool_size = mempool_size;
        self
    }
    /// Set [`DeviceConfig::buf_size`]: bytes per buffer, at least.
    #[must_use]
    pub fn with_buf_size(mut self, buf_size: usize) -> Self {
        self.buf_size = buf_size;
        self
    }
    /// Set [`DeviceConfig::mtu`]: the MTU in bytes.
    #[must_use]
    pub fn with_mtu(mut self, mtu: u32) -> Self {
        self.mtu = mtu;
        self
    }
    /// Set [`DeviceConfig::promisc`]: promiscuous mode.
    #[must_use]
    pub fn with_promisc(mut self, promisc: bool) -> Self {
        self.promisc = promisc;
        self
    }
    /// Set [`DeviceConfig::allmulti`]: all-multicast mode.
    #[must_use]
    pub fn with_allmulti(mut self, allmulti: bool) -> Self {
        self.allmulti = allmulti;
        self
    }
    /// Set [`DeviceConfig::link_timeout`]: the link-up wait.
    #[must_use]
    pub fn with_link_timeout(mut self, link_timeout: Duration) -> Self {
        self.link_timeout = link_timeout;
        self
    }
    /// Set [`DeviceConfig::queues`]: the RX/TX queue pair count.
    #[must_use]
    pub fn with_queues(mut self, queues: u16) -> Self {
        self.queues = queues;
        self
    }
    /// Set [`DeviceConfig::rss_key`]: the 40-byte RSS key.
    #[must_use]
    pub fn with_rss_key(mut self, rss_key: [u8; KEY_LEN]) -> Self {
        self.rss_key = rss_key;
        self
    }
    /// Set [`DeviceConfig::reta`]: the redirection table (`None`: round robin).
    #[must_use]
    pub fn with_reta(mut self, reta: Option<Reta>) -> Self {
        self.reta = reta;
        self
    }
    /// Set [`DeviceConfig::hash_types`]: the packet types RSS hashes.
    #[must_use]
    pub fn with_hash_types(mut self, hash_types: HashTypes) -> Self {
        self.hash_types = hash_types;
        self
    }
    /// Set [`DeviceConfig::flow_control`]: which PAUSE directions the port uses.
    #[must_use]
    pub fn with_flow_control(mut self, flow_control: FlowControl) -> Self {
        self.flow_control = Some(flow_control);
        self
    }
    /// Set [`DeviceConfig::power_saving`]: the I350's EEE and DMA coalescing.
    #[must_use]
    pub fn with_power_saving(mut self, power_saving: PowerSaving) -> Self {
        self.power_saving = power_saving;
        self
    }
    /// Set [`DeviceConfig::data_path`]: the burst loops the queues run.
    #[must_use]
    pub fn with_data_path(mut self, data_path: DataPathChoice) -> Self {
        self.data_path = data_path;
        self
    }
    /// Set [`DeviceConfig::rx_checksum`]: report RX checksum status.
    #[must_use]
    pub fn with_rx_checksum(mut self, on: bool) -> Self {
        self.rx_checksum = on;
        self
    }
    /// Set [`DeviceConfig::virtq_layout`] to `Some(layout)`: a virtio-net
    /// port's virtqueues split or packed (packed refused at open on a
    /// device without `VIRTIO_F_RING_PACKED`).
    #[must_use]
    pub fn with_virtq_layout(mut self, layout: crate::VirtqLayout) -> Self {
        self.virtq_layout = Some(layout);
        self
    }
    /// Set [`DeviceConfig::virtq_in_order`] to `Some(on)`: a virtio-net
    /// port with in-order completion always (`true`, refused at open on a
    /// device without `VIRTIO_F_IN_ORDER`) or never (`false`).
    #[must_use]
    pub fn with_virtq_in_order(mut self, on: bool) -> Self {
        self.virtq_in_order = Some(on);
        self
    }
    /// Set [`DeviceConfig::vlan_strip`]: strip and report VLAN tags.
    #[must_use]
    pub fn with_vlan_strip(mut self, on: bool) -> Self {
        self.vlan_strip = on;
        self
    }
}

impl Default for DeviceConfig {
    fn default() -> Self {
        DeviceConfig {
            rx_ring_size: 512,
            tx_ring_size: 512,
            mempool_size: 4096,
            buf_size: 2048,
            mtu: pollnic_hw::mtu::DEFAULT_MTU,
            promisc: false,
            allmulti: false,
            link_timeout: Duration::from_secs(10),
            queues: 1,
            rss_key: MICROSOFT_KEY,
            reta: None,
            hash_types: HashTypes::default(),
            rx_mode: RxMode::BusyPoll,
            moderation: Moderation::default(),
            data_path: DataPathChoice::Auto,
            flow_control: None,
            power_saving: PowerSaving::OFF,
            rx_checksum: false,
            vlan_strip: false,
            virtq_layout: None,
            virtq_in_order: None,
            dma: DmaAddressing::Iommu,
        }
    }
}

impl DeviceConfig {
    /// Check every field.
    ///
    /// # Errors
    /// The first field that is wrong: [`ConfigError::VectorUnsupported`],
    /// [`ConfigError::InvalidRingSize`], [`ConfigError::MempoolTooSmall`],
    /// [`ConfigError::InvalidBufSize`], [`ConfigError::InvalidMtu`],
    /// [`ConfigError::InvalidQueueCount`], [`ConfigError::RetaQueueOutOfRange`].
    pub fn validate(&self) -> std::result::Result<(), ConfigError> {
        if self.data_path == DataPathChoice::Vector && !pollnic_rings::DataPath::vector_supported()
        {
            return Err(ConfigError::VectorUnsupported);
        }
        if !usable_ring_size(self.rx_ring_size) {
            return Err(ConfigError::InvalidRingSize {
                which: "rx",
                size: self.rx_ring_size,
            });
        }
        if !usable_ring_size(self.tx_ring_size) {
            return Err(ConfigError::InvalidRingSize {
                which: "tx",
                size: self.tx_ring_size,
            });
        }
        let needed = self.min_mempool_size();
        if self.mempool_size < needed {
            return Err(ConfigError::MempoolTooSmall {
                size: self.mempool_size,
                needed,
                rx_ring: self.rx_ring_size,
                tx_ring: self.tx_ring_size,
                cache: pollnic_rings::rx_cache_size(self.rx_ring_size as usize),
            });
        }
        if !(1024..=16 * 1024).contains(&self.buf_size) || self.buf_size % 1024 != 0 {
            return Err(ConfigError::InvalidBufSize {
                size: self.buf_size,
            });
        }
        if !pollnic_hw::mtu::valid_mtu(self.mtu) {
            return Err(ConfigError::InvalidMtu { mtu: self.mtu });
        }
        if self.queues == 0 || self.queues > MAX_QUEUES_82576 {
            return Err(ConfigError::InvalidQueueCount {
                queues: self.queues,
                max: MAX_QUEUES_82576,
            });
        }
        if let Some(&bad) = self
            .reta
            .as_ref()
            .and_then(|r| r.0.iter().find(|&&q| q as u16 >= self.queues))
        {
            return Err(ConfigError::RetaQueueOutOfRange {
                queue: bad,
                queues: self.queues,
            });
        }
        Ok(())
    }

    /// Bytes per RX/TX buffer in use: `buf_size`, raised to
    /// [`pollnic_hw::mtu::rx_buf_size`]`(mtu)` if smaller (2048 at MTU 1500,
    /// 9216 at MTU 9000), so a frame is always one buffer, one descriptor.
    pub fn rx_buf_size(&self) -> usize {
        self.buf_size
            .max(pollnic_hw::mtu::rx_buf_size(self.mtu) as usize)
    }

    /// The redirection table in effect: the configured one or round robin.
    pub fn effective_reta(&self) -> Reta {
        self.reta
            .clone()
            .unwrap_or_else(|| Reta::round_robin(self.queues))
    }
}

impl DeviceConfig {
    /// The receive filter `promisc` and `allmulti` ask for.
    pub fn rx_filter(&self) -> RxFilter {
        RxFilter {
            promisc: self.promisc,
            allmulti: self.allmulti,
        }
    }

    /// Fewest buffers a queue's mempool may have: every RX descriptor armed,
    /// every TX descriptor in flight, the queue's buffer cache full, and one
    /// burst held by the application; with fewer, a queue could wait for a
    /// buffer that only sits in a cache.
    pub fn min_mempool_size(&self) -> u32 {
        self.rx_ring_size
            + self.tx_ring_size
            + pollnic_rings::rx_cache_size(self.rx_ring_size as usize) as u32
            + 32
    }

    /// 2 MiB hugepages one queue pins: `(mempool, rings)`, i.e. the mempool's
    /// buffers (`mempool_size` buffers of [`DeviceConfig::rx_buf_size`]
    /// bytes rounded up to 128, `2 MiB / buffer` of them per page, none
    /// crossing a page: [`Mempool::region_bytes`](pollnic_rings::Mempool::region_bytes))
    /// and one page each for the RX and TX descriptor rings (16-byte
    /// descriptors). The defaults need (4, 2): 12 MiB per queue; MTU 9000
    /// with the default 4096 buffers needs (19, 2): 42 MiB per queue.
    pub fn hugepages_per_queue(&self) -> (usize, usize) {
        use pollnic_rings::dma::HUGEPAGE_SIZE;
        use pollnic_rings::{Mempool, PageSize};
        let pages = |bytes: usize| bytes.div_ceil(HUGEPAGE_SIZE);
        // A buffer is at most 9216 bytes (MTU 9000), so it always fits a page.
        let pool = Mempool::region_bytes(self.mempool_size, self.rx_buf_size(), PageSize::Huge2M)
            .unwrap_or(usize::MAX - HUGEPAGE_SIZE);
        (
            pages(pool),
            pages(self.rx_ring_size as usize * 16) + pages(self.tx_ring_size as usize * 16),
        )
    }
}

/// Headroom of a packed virtio-net port's receive buffers (bytes): the
/// 12- or 20-byte `virtio_net_hdr` lies in it and the frame starts 64
/// bytes into its buffer's slot, cache-line aligned.
pub(crate) const VIRTIO_RX_HEADROOM: usize = 64;

/// A ring size the hardware takes ([`valid_ring_size`]) and pollnic's rings
/// can index with a mask (a power of two): 32, 64, ..., 4096.
pub fn usable_ring_size(n: u32) -> bool {
    valid_ring_size(n) && n.is_power_of_two()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn defaults_are_valid_and_bad_sizes_are_refused() {
        DeviceConfig::default().validate().unwrap();
        for bad in [0, 24, 100, 520, 4104, 8192] {
            let c = DeviceConfig {
                rx_ring_size: bad,
                ..Default::default()
            };
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains("power of two between 32 and 4096"), "{e}");
        }
        let c = DeviceConfig {
            tx_ring_size: 33,
            ..Default::default()
        };
        assert!(matches!(
            c.validate(),
            Err(ConfigError::InvalidRingSize {
                which: "tx",
                size: 33
            })
        ));
        let c = DeviceConfig {
            mempool_size: 512,
            ..Default::default()
        };
        assert!(c.validate().is_err());
        // 512 + 512 + cache 1024 + 32: one less is refused, with the sum shown.
        let c = DeviceConfig {
            mempool_size: 2079,
            ..Default::default()
        };
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("at least 2080 buffers"), "{e}");
        assert!(DeviceConfig {
            mempool_size: 2080,
            ..Default::default()
        }
        .validate()
        .is_ok());
        for q in [0, 17] {
            assert!(DeviceConfig {
                queues: q,
                ..Default::default()
            }
            .validate()
            .is_err());
        }
        for bad in [0, 68, 1499, 9001, 16000] {
            let e = DeviceConfig {
                mtu: bad,
                ..Default::default()
            }
            .validate()
            .unwrap_err();
            assert!(
                matches!(e, ConfigError::InvalidMtu { mtu } if mtu == bad),
                "{e}"
            );
            let e = e.to_string();
            assert!(
                e.contains(&format!("MTU {bad} (DeviceConfig::mtu) is out of range"))
                    && e.contains("1500 to 9000"),
                "{e}"
            );
        }
        let jumbo = DeviceConfig {
            mtu: 9000,
            ..Default::default()
        };
        jumbo.validate().unwrap();
        assert_eq!(jumbo.rx_buf_size(), 9216);
        assert_eq!(DeviceConfig::default().rx_buf_size(), 2048);
        // 4096 buffers of 9216 bytes, 227 to a 2 MiB page (none crossing
        // one): 19 hugepages, where packing them end to end took 18.
        assert_eq!(jumbo.hugepages_per_queue(), (19, 2));
        // A packed virtio-net port at MTU 1980 sizes its buffers for the
        // largest frame (2002 bytes) behind 64 bytes of headroom
        // (`with_buf_size(2066)`): 2176-byte slots, 963 to a page, so 5
        // hugepages, not 4.
        let edge = DeviceConfig {
            mtu: 1980,
            ..Default::default()
        };
        assert_eq!(edge.hugepages_per_queue(), (4, 2));
        assert_eq!(edge.with_buf_size(2002 + 64).hugepages_per_queue(), (5, 2));
        let c = DeviceConfig {
            queues: 2,
            reta: Some(Reta::round_robin(4)),
            ..Default::default()
        };
        let e = c.validate().unwrap_err();
        assert!(
            matches!(
                e,
                ConfigError::RetaQueueOutOfRange {
                    queue: 2,
                    queues: 2
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("names queue 2"), "{e}");
    }
}

/// Which packet types RSS hashes (the rest go to queue 0 with hash 0).
/// Non-exhaustive (more types may come): start from [`HashTypes::default`]
/// (all on) or [`HashTypes::NONE`] and set fields with the `with_*` methods,
/// e.g. `HashTypes::NONE.with_ipv4(true).with_tcp_ipv4(true)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HashTypes {
    /// IPv4 addresses.
    pub ipv4: bool,
    /// TCP/IPv4 addresses and ports.
    pub tcp_ipv4: bool,
    /// UDP/IPv4 addresses and ports.
    pub udp_ipv4: bool,
    /// IPv6 addresses.
    pub ipv6: bool,
    /// TCP/IPv6 addresses and ports.
    pub tcp_ipv6: bool,
    /// UDP/IPv6 addresses and ports.
    pub udp_ipv6: bool,
}

impl HashTypes {
    /// Every type off: RSS hashes nothing, every frame goes to queue 0.
    pub const NONE: HashTypes = HashTypes {
        ipv4: false,
        tcp_ipv4: false,
        udp_ipv4: false,
        ipv6: false,
        tcp_ipv6: false,
        udp_ipv6: false,
    };
    /// Set [`HashTypes::ipv4`].
    #[must_use]
    pub const fn with_ipv4(mut self, on: bool) -> Self {
        self.ipv4 = on;
        self
    }
    /// Set [`HashTypes::tcp_ipv4`].
    #[must_use]
    pub const fn with_tcp_ipv4(mut self, on: bool) -> Self {
        self.tcp_ipv4 = on;
        self
    }
    /// Set [`HashTypes::udp_ipv4`].
    #[must_use]
    pub const fn with_udp_ipv4(mut self, on: bool) -> Self {
        self.udp_ipv4 = on;
        self
    }
    /// Set [`HashTypes::ipv6`].
    #[must_use]
    pub const fn with_ipv6(mut self, on: bool) -> Self {
        self.ipv6 = on;
        self
    }
    /// Set [`HashTypes::tcp_ipv6`].
    #[must_use]
    pub const fn with_tcp_ipv6(mut self, on: bool) -> Self {
        self.tcp_ipv6 = on;
        self
    }
    /// Set [`HashTypes::udp_ipv6`].
    #[must_use]
    pub const fn with_udp_ipv6(mut self, on: bool) -> Self {
        self.udp_ipv6 = on;
        self
    }
}

impl Default for HashTypes {
    /// All six on.
    fn default() -> Self {
        HashTypes {
            ipv4: true,
            tcp_ipv4: true,
            udp_ipv4: true,
            ipv6: true,
            tcp_ipv6: true,
            udp_ipv6: true,
        }
    }
}

/// Which frames the receive filter lets in besides those to the port's own
/// MAC and broadcast (82576 datasheet §7.1.1.1 "Unicast/Multicast
/// Filtering"; RCTL.UPE/MPE on igb, FCTRL.UPE/MPE on the 82599).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxFilter {
    /// Every unicast and every multicast frame (UPE | MPE).
    pub promisc: bool,
    /// Every multicast frame (MPE), as DPDK's `rte_eth_allmulticast_enable`.
    /// Off, multicast passes only through the multicast table (MTA), which
    /// pollnic leaves empty: no multicast frame is delivered.
    pub allmulti: bool,
}

impl RxFilter {
    /// Unicast promiscuous (UPE).
    pub fn unicast_promisc(&self) -> bool {
        self.promisc
    }
    /// Multicast promiscuous (MPE): with `promisc` or `allmulti`.
    pub fn multicast_promisc(&self) -> bool {
        self.promisc || self.allmulti
    }
}
