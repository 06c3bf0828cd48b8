//! What drives an open port: one value, either an Intel family's register
//! work over descriptor rings or a virtio-net port's structures over
//! virtqueues. Every place the two differ after bring-up (link, RSS table,
//! flow control, counters, capabilities, shutdown) is one `match` here, so a
//! third kind of back end is one new variant and one arm per method in this
//! file; the bring-ups themselves are `super::desc` and `super::virtio`.

use super::stats::StatsSource;
use crate::config::{FlowControl, PowerSaving};
use crate::counters::DeviceCounters;
use crate::error::Result;
use crate::family::virtio::{self, VirtioNet};
use crate::family::{DescFamily, Family, LinkStatus};
use crate::lowlevel::io::DeviceBar;
use pollnic_hw::rss::Reta;
use std::sync::Arc;

/// The back end of one open port.
pub(super) enum Backend {
    /// igb or ixgbe: stateless register work through BAR 0
    /// ([`DescFamily`]), queues on descriptor rings.
    Desc(&'static dyn DescFamily),
    /// virtio-net: the port's capabilities and negotiated features, queues
    /// on virtqueues, split or packed (boxed: the port's structures are some hundred
    /// bytes, an Intel family's handle two words).
    Virtio(Box<VirtioBackend>),
}

/// A virtio-net port as the device keeps it.
pub(super) struct VirtioBackend {
    pub(super) port: virtio::Port,
    /// The first RX virtqueue whose MSI-X vector the device did not take at
    /// set-up, and that vector: interrupt mode is refused with it.
    pub(super) vector_refused: Option<(u16, u16)>,
}

impl Backend {
    /// The family: its name, limits and counter layout.
    pub(super) fn family(&self) -> &'static dyn Family {
        match self {
            Backend::Desc(f) => f.as_family(),
            Backend::Virtio(_) => &VirtioNet,
        }
    }

    /// The link now (igb STATUS, 82599 LINKS, virtio-net's `status` field).
    pub(super) fn link(&self, bar: &dyn DeviceBar) -> LinkStatus {
        match self {
            Backend::Desc(f) => f.link_status(bar.regs()),
            Backend::Virtio(v) => v.port.link(),
        }
    }

    /// Write a new redirection table (RETA; on virtio-net the RSS
    /// configuration again on the control queue).
    pub(super) fn set_reta(&mut self, bar: &dyn DeviceBar, reta: &Reta) -> Result<()> {
        match self {
            Backend::Desc(f) => {
                f.write_reta(bar.regs(), reta);
                Ok(())
            }
            Backend::Virtio(v) => v.port.set_reta(reta),
        }
    }

    /// Flow control as the port runs it (none on virtio-net).
    pub(super) fn flow_control(&self, bar: &dyn DeviceBar) -> FlowControl {
        match self {
            Backend::Desc(f) => f.flow_control(bar.regs()),
            Backend::Virtio(_) => FlowControl::None,
        }
    }

    /// Power saving as the port runs it (none on virtio-net).
    pub(super) fn power_saving(&self, bar: &dyn DeviceBar, device_id: u16) -> PowerSaving {
        match self {
            Backend::Desc(f) => f.power_saving(bar.regs(), device_id),
            Backend::Virtio(_) => PowerSaving::OFF,
        }
    }

    /// The device's own complaint, if any: virtio-net's DEVICE_NEEDS_RESET
    /// (the Intel families have none to read).
    pub(super) fn check(&self) -> Result<()> {
        match self {
            Backend::Desc(_) => Ok(()),
            Backend::Virtio(v) => v.port.check(),
        }
    }

    /// Where the counters come from: the family's clear-on-read registers,
    /// or the driver's own per-queue counters on virtio-net (which has no
    /// counter registers).
    pub(super) fn stats_source(
        &self,
        bar: &Arc<dyn DeviceBar>,
        counters: &DeviceCounters,
    ) -> StatsSource {
        match self {
            Backend::Desc(f) => StatsSource::Registers {
                family: *f,
                bar: Arc::clone(bar),
            },
            Backend::Virtio(_) => StatsSource::Driver(Arc::clone(counters)),
        }
    }

    /// What the port offers beyond the family's limits, given `intel`
    /// filled in for a descriptor-ring family: on virtio-net, what the
    /// device offered and pollnic negotiated.
    pub(super) fn capabilities(&self, intel: crate::Capabilities) -> crate::Capabilities {
        match self {
            Backend::Desc(_) => intel,
            Backend::Virtio(v) => crate::Capabilities {
                max_queues: v.port.max_queue_pairs().unwrap_or(1),
                max_mtu: v.port.mtu().map_or(pollnic_hw::mtu::DEFAULT_MTU, u32::from),
                // §5.1.6.2: VIRTIO_NET_F_CSUM gives TCP/UDP checksums,
                // HOST_TSO4/6 (negotiated only with it) segmentation; no
                // IPv4 header checksum or tag insertion.
                tx: crate::TxCapabilities {
                    l4_checksum: v.port.has(virtio::feature::NET_CSUM),
                    tso: v.port.has(virtio::feature::NET_HOST_TSO4)
                        || v.port.has(virtio::feature::NET_HOST_TSO6),
                    ..crate::TxCapabilities::default()
                },
                // GUEST_CSUM offered: `DeviceConfig::rx_checksum` opens
                // (and negotiates it).
                rx_checksum: v.port.offers(virtio::feature::NET_GUEST_CSUM),
                vlan_strip: false,
                rss: v
                    .port
                    .rss_table_len()
                    .map(|table_len| crate::RssCapabilities {
                        table_len,
                        key_len: pollnic_hw::rss::KEY_LEN,
                    }),
                interrupts: intel.interrupts && v.vector_refused.is_none(),
                virtq_layout: Some(v.port.virtq_layout()),
                virtq_in_order: Some(v.port.in_order()),
                ..intel
            },
        }
    }

    /// Stop every DMA and reset, on any exit path, before any ring or
    /// buffer is freed: the family's shutdown of the first `hw_queues`
    /// queues, or a virtio reset (virtio 1.x §2.4: it stops the device's use
    /// of every virtqueue; a device that does not finish it still loses bus
    /// mastering next).
    pub(super) fn shutdown(&self, bar: &dyn DeviceBar, hw_queues: u16) {
        match self {
            Backend::Desc(f) => f.shutdown(bar.regs(), hw_queues),
            Backend::Virtio(v) => {
                let _ = v.port.reset();
            }
        }
    }
}
