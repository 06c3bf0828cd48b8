//! virtio-net over PCI, modern (virtio 1.x) only: the PCI capability walk,
//! the reset and status handshake, feature negotiation, the queue pairs'
//! virtqueues and the control queue, the multi-queue and RSS commands
//! ([`ctrl`]), link status and the device's MAC. The queues themselves are
//! `pollnic_rings::virtq`'s virtqueues, packed when the device offers
//! `VIRTIO_F_RING_PACKED` (virtio 1.2 §2.8) and `DeviceConfig::virtq_layout`
//! does not ask for split, split otherwise (§2.7).
//!
//! Sources: the virtio 1.x specification (OASIS, "Virtual I/O Device
//! (VIRTIO) Version 1.2"): §4.1.4 the PCI capabilities, §4.1.4.3 the
//! common configuration, §3.1.1 the driver's initialisation order, §2.1 the
//! status bits, §6 the reserved feature bits, §5.1 the network device
//! (§5.1.6.5 the control queue, §5.1.6.5.7 RSS). The
//! order follows Linux `virtio_pci_modern.c`/`virtio.c` and DPDK's
//! `virtio_pci.c`/`virtio_ethdev.c`.

pub(crate) mod ctrl;
pub mod problem;
use problem::VirtioError;
pub(crate) mod ids;

use crate::config::{DataPathChoice, DeviceConfig, FlowControl, PowerSaving};
use crate::error::{Error, Result};
use crate::family::{Family, LinkState, LinkStatus, NicModel};
use crate::lowlevel::io::{DeviceBar, DeviceIo};
use crate::pci::address::PciAddress;
use crate::stats::StatsLayout;
use crate::wait::wait_for;
use pollnic_hw::rss::{Reta, KEY_LEN};
use pollnic_rings::{CtrlError, Doorbell, NetHdr, VirtqAddrs, VirtqCtrl, VirtqLayout};
use std::sync::Arc;
use std::time::Duration;

pub use pollnic_hw::virtio::VIRTIO_VENDOR_ID;
/// A modern (virtio 1.x only) network device: 0x1040 + device type 1.
pub const DEVICE_ID_NET_MODERN: u16 = 0x1041;
/// A transitional network device (legacy interface too).
pub const DEVICE_ID_NET_TRANSITIONAL: u16 = 0x1000;

/// PCI capability ID of a vendor-specific capability (all virtio ones).
const PCI_CAP_ID_VNDR: u8 = 0x09;
/// Offset of the capabilities pointer in the type 0 header.
const PCI_CAPABILITY_LIST: u32 = 0x34;
/// Status register bit "capability list present".
const PCI_STATUS_CAP_LIST: u16 = 1 << 4;

/// `virtio_pci_cap.cfg_type` values (§4.1.4).
const CAP_COMMON: u8 = 1;
const CAP_NOTIFY: u8 = 2;
const CAP_ISR: u8 = 3;
const CAP_DEVICE: u8 = 4;

/// Common configuration offsets (§4.1.4.3, `struct virtio_pci_common_cfg`).
mod common {
    pub const DEVICE_FEATURE_SELECT: u32 = 0x00;
    pub const DEVICE_FEATURE: u32 = 0x04;
    pub const DRIVER_FEATURE_SELECT: u32 = 0x08;
    pub const DRIVER_FEATURE: u32 = 0x0c;
    pub const MSIX_CONFIG: u32 = 0x10;
    pub const NUM_QUEUES: u32 = 0x12;
    pub const DEVICE_STATUS: u32 = 0x14;
    pub const QUEUE_SELECT: u32 = 0x16;
    pub const QUEUE_SIZE: u32 = 0x18;
    pub const QUEUE_MSIX_VECTOR: u32 = 0x1a;
    pub const QUEUE_ENABLE: u32 = 0x1c;
    pub const QUEUE_NOTIFY_OFF: u32 = 0x1e;
    pub const QUEUE_DESC: u32 = 0x20;
    pub const QUEUE_DRIVER: u32 = 0x28;
    pub const QUEUE_DEVICE: u32 = 0x30;
    /// Bytes the structure must have.
    pub const LEN: u32 = 0x38;
}

/// Device status bits (§2.1).
pub(crate) mod status {
    pub const ACKNOWLEDGE: u8 = 1;
    pub const DRIVER: u8 = 2;
    pub const DRIVER_OK: u8 = 4;
    pub const FEATURES_OK: u8 = 8;
    pub const DEVICE_NEEDS_RESET: u8 = 0x40;
    pub const FAILED: u8 = 0x80;
}

pub(crate) use pollnic_hw::virtio::feature;

/// What pollnic negotiates when the device offers it.
/// CTRL_VQ, MQ, RSS and HASH_REPORT are dropped again by
/// [`Port::negotiate`] when what they depend on is not offered (§5.1.3.1:
/// MQ and RSS need CTRL_VQ; pollnic takes HASH_REPORT only with RSS, whose
/// configuration command also turns the reports on). `VIRTIO_NET_F_CSUM`
/// costs nothing until a frame asks for it; `VIRTIO_NET_F_GUEST_CSUM` is
/// not here: it lets the device hand over frames whose checksum is still to
/// be completed (§5.1.6.4), so [`Port::negotiate`] takes it only for a port
/// opened with `DeviceConfig::rx_checksum`. `HOST_TSO4`/`HOST_TSO6` (the
/// device segments what `TxOffload::with_tso` sends) are taken with CSUM,
/// which they require (§5.1.3.1); the receive side's (`GUEST_TSO*`) and
/// `MRG_RXBUF` are never negotiated: a received frame is one buffer, at
/// most the MTU (docs/nics/virtio-net.md says why).
const WANTED: u64 = feature::NET_CSUM
    | feature::NET_HOST_TSO4
    | feature::NET_HOST_TSO6
    | feature::VERSION_1
    | feature::ACCESS_PLATFORM
    | feature::NET_MAC
    | feature::NET_STATUS
    | feature::NET_MTU
    | feature::NET_CTRL_VQ
    | feature::NET_CTRL_RX
    | feature::NET_MQ
    | feature::NET_RSS
    | feature::NET_HASH_REPORT
    | feature::EVENT_IDX
    | feature::RING_PACKED
    | feature::IN_ORDER;

/// `VIRTIO_MSI_NO_VECTOR`: no MSI-X vector for this source.
pub(crate) const NO_VECTOR: u16 = 0xffff;
/// The network device configuration's fields (§5.1.4).
const NET_CFG_MAC: u32 = 0;
const NET_CFG_STATUS: u32 = 6;
const NET_CFG_MTU: u32 = 10;
const NET_CFG_MAX_VQ_PAIRS: u32 = 8;
const NET_CFG_RSS_MAX_KEY_SIZE: u32 = 17;
const NET_CFG_RSS_MAX_TABLE_LEN: u32 = 18;
const NET_CFG_SUPPORTED_HASH_TYPES: u32 = 20;

/// How long a control command may take (QEMU answers at once).
const CTRL_WAIT: Duration = Duration::from_secs(2);
/// The most descriptors pollnic gives the control queue (it uses two).
const CTRL_QUEUE_SIZE: u16 = 64;
/// `VIRTIO_NET_S_LINK_UP`.
const NET_S_LINK_UP: u16 = 1;

/// How long a reset may take to read back 0 (QEMU resets at once).
const RESET_WAIT: Duration = Duration::from_secs(1);

/// The virtio-net family (modern virtio 1.x network devices over PCI).
#[derive(Debug, Clone, Copy)]
pub struct VirtioNet;

impl crate::family::sealed::Sealed for VirtioNet {}

/// Its counters: none in the device (virtio has no statistics registers),
/// all the driver's own, summed over the queues from the rings' counters.
pub(crate) static LAYOUT: StatsLayout = StatsLayout {
    counters: &[],
    sums: &[],
    aliases: &[],
    extra: &[
        "rx_packets",
        "tx_packets",
        "rx_bytes",
        "tx_bytes",
        "rx_errors",
        "rx_nombuf",
        "rx_kicks",
        "tx_kicks",
        // Protocol breaks by the device, and virtqueues stopped by them
        // (`Error::QueueStopped`).
        "device_errors",
        "virtqueues_stopped",
    ],
};

impl Family for VirtioNet {
    fn kind(&self) -> crate::family::NicFamily {
        crate::family::NicFamily::VirtioNet
    }
    /// The kernel's PCI driver for every virtio device (`virtio_net` binds
    /// on the virtio bus above it).
    fn kernel_driver(&self) -> &'static str {
        "virtio-pci"
    }
    fn models(&self) -> &'static [NicModel] {
        ids::MODELS
    }
    fn vendor(&self) -> u16 {
        VIRTIO_VENDOR_ID
    }
    fn drives(&self, vendor: u16, device: u16) -> bool {
        vendor == VIRTIO_VENDOR_ID && self.models().iter().any(|m| m.device_id == device)
    }
    fn missing(&self, device: u16) -> Option<&'static str> {
        (device == DEVICE_ID_NET_TRANSITIONAL).then_some(
            "the modern virtio 1.x interface (this transitional device, 1af4:1000, offers the \
             legacy one too): give QEMU `disable-legacy=on` and `iommu_platform=on`",
        )
    }
    /// As many queue pairs as a redirection table can name (128 entries);
    /// the device's own limit, `max_virtqueue_pairs`, is checked at open.
    fn max_queues(&self, _device: u16) -> u16 {
        pollnic_hw::rss::RETA_LEN as u16
    }
    fn link_register(&self) -> Option<u32> {
        None
    }
    fn decode_link_register(&self, _value: u32) -> LinkState {
        LinkState::Unknown("virtio-net has no link register".into())
    }
    /// Up to 9000, as the Intel families; a device takes at most the MTU
    /// it reports (`VIRTIO_NET_F_MTU`), 1500 when it reports none, checked
    /// at open ([`crate::Error::VirtioMtu`]). Without `VIRTIO_NET_F_MRG_RXBUF`
    /// (not negotiated) every frame must fit one receive buffer, which the
    /// mempool sizes from the MTU (MTU + 22 bytes, rounded up to 1 KiB).
    fn max_mtu(&self) -> u32 {
        pollnic_hw::mtu::MAX_MTU
    }
    /// Two descriptors per buffer (header, then frame), and at least 8
    /// buffers.
    fn min_ring_size(&self) -> u32 {
        16
    }
    fn stats_layout(&self) -> &'static StatsLayout {
        &LAYOUT
    }
    fn desc(&self) -> Option<&dyn crate::family::DescFamily> {
        None
    }
}

/// A region of one BAR a capability points at.
#[derive(Clone)]
struct Window {
    bar: Arc<dyn DeviceBar>,
    off: u32,
    len: u32,
}

/// Every access through a [`Window`] is to a field inside the structure,
/// aligned to its width: [`Port::find`] checks that each structure lies in
/// its BAR (offset + length, without wrapping) and is aligned as §4.1.4.3
/// to §4.1.4.7 require, and each access is checked against the structure's
/// length here. A field the device made the structure too short to hold
/// reads as all ones (what a read PCIe cannot complete returns) and takes
/// no write; the callers that need such a field check the length first and
/// refuse the device ([`Port::cfg16`], [`Port::set_reta`]).
impl Window {
    /// The BAR offset of the `width`-byte field at `o`.
    #[inline]
    fn at(&self, o: u32, width: u32) -> Option<u32> {
        let end = o.checked_add(width)?;
        let a = self.off.checked_add(o)?;
        (end <= self.len && a % width == 0).then_some(a)
    }
    fn r8(&self, o: u32) -> u8 {
        self.at(o, 1).map_or(!0, |a| self.bar.regs().read8(a))
    }
    fn w8(&self, o: u32, v: u8) {
        if let Some(a) = self.at(o, 1) {
            self.bar.regs().write8(a, v)
        }
    }
    fn r16(&self, o: u32) -> u16 {
        self.at(o, 2).map_or(!0, |a| self.bar.regs().read16(a))
    }
    fn w16(&self, o: u32, v: u16) {
        if let Some(a) = self.at(o, 2) {
            self.bar.regs().write16(a, v)
        }
    }
    fn r32(&self, o: u32) -> u32 {
        self.at(o, 4).map_or(!0, |a| self.bar.regs().read32(a))
    }
    fn w32(&self, o: u32, v: u32) {
        if let Some(a) = self.at(o, 4) {
            self.bar.regs().write32(a, v)
        }
    }
    /// A 64-bit field as two 32-bit writes, low first (§4.1.3.1 allows it).
    fn w64(&self, o: u32, v: u64) {
        self.w32(o, v as u32);
        self.w32(o + 4, (v >> 32) as u32);
    }
}

/// One open virtio-net device: where its structures are, what was
/// negotiated.
pub(crate) struct Port {
    addr: PciAddress,
    common: Window,
    device: Window,
    notify: Window,
    notify_mult: u32,
    /// The features both sides agreed on.
    features: u64,
    /// The features the device offered.
    offered: u64,
    /// The control queue, once made (`VIRTIO_NET_F_CTRL_VQ`).
    ctrl: Option<VirtqCtrl<Notify>>,
    /// What RSS hashes and with which key, once configured.
    rss: Option<RssSetup>,
}

/// The RSS configuration sent last: `set_reta` sends it again with a new
/// table.
#[derive(Clone, Copy)]
struct RssSetup {
    hash_types: u32,
    key: [u8; KEY_LEN],
    queues: u16,
}

/// The doorbell of one virtqueue: a 16-bit write of the queue's index to
/// its notification address (§4.1.4.4).
pub(crate) struct Notify {
    bar: Arc<dyn DeviceBar>,
    off: u32,
    queue: u16,
}

impl Doorbell for Notify {
    #[inline]
    fn ring(&mut self, _avail_idx: u16) {
        self.bar.regs().write16(self.off, self.queue);
    }
}

/// One capability as read from configuration space.
struct Cap {
    cfg_type: u8,
    bar: u8,
    offset: u32,
    length: u32,
    /// `notify_off_multiplier` (notify capability only).
    extra: u32,
}

/// Every virtio vendor capability of the device behind `io`, by walking the
/// PCI capability list (at most 48 steps: a looping list is not followed).
fn read_caps(io: &dyn DeviceIo) -> Option<Vec<Cap>> {
    let rd = |off: u32, n: usize| -> Option<Vec<u8>> {
        let mut b = vec![0u8; n];
        io.config_read(off, &mut b).then_some(b)
    };
    let st = rd(0x06, 2)?;
    if u16::from_le_bytes([st[0], st[1]]) & PCI_STATUS_CAP_LIST == 0 {
        return Some(Vec::new());
    }
    let mut caps = Vec::new();
    let mut pos = rd(PCI_CAPABILITY_LIST, 1)?[0] as u32 & !3;
    for _ in 0..48 {
        if pos < 0x40 {
            break;
        }
        // The header first (ID, next, length): a capability near the end of
        // configuration space is read only as far as it says it reaches.
        // One that runs past the end of configuration space ends the walk.
        let Some(h) = rd(pos, 3) else { break };
        if h[0] == PCI_CAP_ID_VNDR && h[2] >= 16 {
            let Some(h) = rd(pos, h[2].min(20) as usize) else {
                break;
            };
            let le = |i: usize| {
                h.get(i..i + 4)
                    .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            };
            caps.push(Cap {
                cfg_type: h[3],
                bar: h[4],
                offset: le(8),
                length: le(12),
                extra: if h[2] >= 20 { le(16) } else { 0 },
            });
        }
        pos = h[1] as u32 & !3;
    }
    Some(caps)
}

impl Port {
    /// Find the common, notify, ISR and device configuration structures
    /// (§4.1.4: the first capability of each type whose BAR is usable).
    ///
    /// # Errors
    /// [`Error::Virtio`] when configuration space cannot be read
    /// or a structure is missing, too short, or in a BAR that is not mapped.
    pub(crate) fn find(io: &dyn DeviceIo, addr: PciAddress) -> Result<Port> {
        let bad = |problem: VirtioError| Error::Virtio { addr, problem };
        let caps = read_caps(io).ok_or_else(|| bad(VirtioError::ConfigSpaceUnreadable))?;
        let window = |ty: u8, min: u32, name: &'static str| -> Result<(Window, u32)> {
            let c = caps
                .iter()
                .find(|c| c.cfg_type == ty && c.bar < 6 && c.length >= min)
                .ok_or_else(|| bad(VirtioError::MissingStructure { structure: name }))?;
            let bar = io.bar(c.bar).ok_or_else(|| {
                bad(VirtioError::BarNotMapped {
                    structure: name,
                    bar: c.bar,
                })
            })?;
            // Inside the BAR, without wrapping (§4.1.4: offset and length
            // are the device's word, and the device is not trusted).
            let end = c.offset.checked_add(c.length);
            if end.is_none_or(|e| u64::from(e) > bar.size()) {
                return Err(bad(VirtioError::StructureOutsideBar {
                    structure: name,
                    bar: c.bar,
                    offset: c.offset,
                    length: c.length,
                    bar_size: bar.size(),
                }));
            }
            // §4.1.4.3 (common), §4.1.4.4 (notify, 2 bytes), §4.1.4.6
            // (device-specific): aligned offsets.
            let align = match ty {
                CAP_COMMON | CAP_DEVICE => 4,
                CAP_NOTIFY => 2,
                _ => 1,
            };
            if c.offset % align != 0 {
                return Err(bad(VirtioError::StructureMisaligned {
                    structure: name,
                    offset: c.offset,
                    align,
                }));
            }
            Ok((
                Window {
                    bar,
                    off: c.offset,
                    len: c.length,
                },
                c.extra,
            ))
        };
        let (common, _) = window(CAP_COMMON, common::LEN, "common configuration")?;
        let (notify, notify_mult) = window(CAP_NOTIFY, 2, "notification")?;
        let _isr = window(CAP_ISR, 1, "ISR status")?;
        let (device, _) = window(CAP_DEVICE, 12, "network device configuration")?;
        Ok(Port {
            addr,
            common,
            device,
            notify,
            notify_mult,
            features: 0,
            offered: 0,
            ctrl: None,
            rss: None,
        })
    }

    fn status(&self) -> u8 {
        self.common.r8(common::DEVICE_STATUS)
    }
    fn add_status(&self, bits: u8) {
        self.common.w8(common::DEVICE_STATUS, self.status() | bits);
    }

    /// Reset (write 0 to `device_status`, wait until it reads 0, §4.1.4.3.2).
    ///
    /// # Errors
    /// [`Error::Timeout`] when the status never reads 0.
    pub(crate) fn reset(&self) -> Result<()> {
        self.common.w8(common::DEVICE_STATUS, 0);
        wait_for("virtio reset (device_status back to 0)", RESET_WAIT, || {
            self.status() == 0
        })
        .map_err(|t| Error::Timeout {
            addr: self.addr,
            what: t.what,
            waited_ms: t.waited_ms,
        })
    }

    /// The device's 64 feature bits.
    fn device_features(&self) -> u64 {
        self.common.w32(common::DEVICE_FEATURE_SELECT, 0);
        let lo = self.common.r32(common::DEVICE_FEATURE) as u64;
        self.common.w32(common::DEVICE_FEATURE_SELECT, 1);
        let hi = self.common.r32(common::DEVICE_FEATURE) as u64;
        lo | hi << 32
    }

    /// Reset, ACKNOWLEDGE, DRIVER, features (§3.1.1 steps 1 to 6):
    /// VERSION_1 required, and ACCESS_PLATFORM unless `physical` (the port
    /// opened with physical addresses, no IOMMU: then the device's DMA
    /// takes physical addresses, which is what a device without
    /// ACCESS_PLATFORM does, §6.1); MAC, STATUS, MTU, EVENT_IDX and
    /// ACCESS_PLATFORM taken when offered; CSUM when offered, GUEST_CSUM
    /// when offered and `guest_csum` (`DeviceConfig::rx_checksum`);
    /// FEATURES_OK written and read back.
    ///
    /// `layout` is `DeviceConfig::virtq_layout`: `VIRTIO_F_RING_PACKED` is
    /// taken when offered unless it asks for split. `in_order` is
    /// `DeviceConfig::virtq_in_order`: `VIRTIO_F_IN_ORDER` is taken when
    /// offered unless it says `false`.
    ///
    /// # Errors
    /// [`Error::VirtioFeatureMissing`] naming a required feature the device
    /// lacks (the device is then marked FAILED); [`Error::ConfigUnsupported`]
    /// (`rx_checksum`) when `guest_csum` is asked of a device that does not
    /// offer `VIRTIO_NET_F_GUEST_CSUM`, (`virtq_layout`) when packed
    /// virtqueues are asked of one that does not offer
    /// `VIRTIO_F_RING_PACKED`, (`virtq_in_order`) when in-order completion
    /// is asked of one that does not offer `VIRTIO_F_IN_ORDER`;
    /// [`Error::VirtioFeaturesRefused`]
    /// when FEATURES_OK does not stay set; [`Error::Timeout`] from the reset.
    pub(crate) fn negotiate(
        &mut self,
        physical: bool,
        guest_csum: bool,
        layout: Option<VirtqLayout>,
        in_order: Option<bool>,
    ) -> Result<u64> {
        self.reset()?;
        self.add_status(status::ACKNOWLEDGE);
        self.add_status(status::DRIVER);
        let offered = self.device_features();
        self.offered = offered;
        if guest_csum && offered & feature::NET_GUEST_CSUM == 0 {
            // Nothing was accepted yet; the reset on the error path (the
            // back end's drop) clears ACKNOWLEDGE and DRIVER.
            return Err(Error::ConfigUnsupported {
                addr: self.addr,
                family: "virtio-net",
                field: "rx_checksum",
                why: "this virtio-net device does not offer VIRTIO_NET_F_GUEST_CSUM, so it \
                      reports no receive checksum status (every frame would say NotChecked); \
                      leave it off and check the sums in software, or ask only where \
                      Device::capabilities().rx_checksum is true (QEMU: guest_csum=on, the \
                      default)",
            });
        }
        if layout == Some(VirtqLayout::Packed) && offered & feature::RING_PACKED == 0 {
            return Err(Error::ConfigUnsupported {
                addr: self.addr,
                family: "virtio-net",
                field: "virtq_layout",
                why: "this virtio-net device does not offer VIRTIO_F_RING_PACKED (bit 34), so \
                      its virtqueues can only be split; leave DeviceConfig::virtq_layout unset \
                      (packed when offered) or ask for VirtqLayout::Split (QEMU: `packed=on` on \
                      the virtio-net-pci device offers it)",
            });
        }
        if in_order == Some(true) && offered & feature::IN_ORDER == 0 {
            return Err(Error::ConfigUnsupported {
                addr: self.addr,
                family: "virtio-net",
                field: "virtq_in_order",
                why: "this virtio-net device does not offer VIRTIO_F_IN_ORDER (bit 35), so it may \
                      complete buffers in any order; leave DeviceConfig::virtq_in_order unset \
                      (in order when offered) or set it false (QEMU 9.1 and later: `in_order=on` \
                      on the virtio-net-pci device offers it)",
            });
        }
        let platform = if physical {
            0
        } else {
            feature::ACCESS_PLATFORM
        };
        for (bit, name, why) in [
            (
                feature::VERSION_1,
                "VIRTIO_F_VERSION_1",
                "pollnic drives the modern virtio 1.x interface only (QEMU: `disable-legacy=on`)",
            ),
            (
                platform,
                "VIRTIO_F_ACCESS_PLATFORM",
                "without it the device bypasses the IOMMU, so VFIO's DMA mappings mean nothing \
                 to it (QEMU: `iommu_platform=on` on the virtio-net-pci device). On a VM with no \
                 IOMMU, pollnic can instead give it physical addresses (`--no-iommu`, \
                 docs/no-iommu.md), at the price of letting the device reach all of RAM",
            ),
        ] {
            if offered & bit != bit {
                self.add_status(status::FAILED);
                return Err(Error::VirtioFeatureMissing {
                    addr: self.addr,
                    feature: name,
                    why,
                });
            }
        }
        let mut features = offered & WANTED;
        if guest_csum {
            features |= feature::NET_GUEST_CSUM;
        }
        if features & feature::NET_CSUM == 0 {
            features &= !(feature::NET_HOST_TSO4 | feature::NET_HOST_TSO6);
        }
        if features & feature::NET_CTRL_VQ == 0 {
            features &= !(feature::NET_MQ | feature::NET_RSS | feature::NET_CTRL_RX);
        }
        if features & feature::NET_RSS == 0 {
            features &= !feature::NET_HASH_REPORT;
        }
        if layout == Some(VirtqLayout::Split) {
            features &= !feature::RING_PACKED;
        }
        if in_order == Some(false) {
            features &= !feature::IN_ORDER;
        }
        self.common.w32(common::DRIVER_FEATURE_SELECT, 0);
        self.common.w32(common::DRIVER_FEATURE, features as u32);
        self.common.w32(common::DRIVER_FEATURE_SELECT, 1);
        self.common
            .w32(common::DRIVER_FEATURE, (features >> 32) as u32);
        self.add_status(status::FEATURES_OK);
        if self.status() & status::FEATURES_OK == 0 {
            self.add_status(status::FAILED);
            return Err(Error::VirtioFeaturesRefused {
                addr: self.addr,
                features,
            });
        }
        self.features = features;
        Ok(features)
    }

    /// The MAC (`VIRTIO_NET_F_MAC`), or `None` when the device has none.
    pub(crate) fn mac(&self) -> Option<[u8; 6]> {
        if self.features & feature::NET_MAC == 0 {
            return None;
        }
        let mut m = [0u8; 6];
        for (i, b) in m.iter_mut().enumerate() {
            *b = self.device.r8(NET_CFG_MAC + i as u32);
        }
        Some(m)
    }

    /// The device's MTU (`VIRTIO_NET_F_MTU`), if it gives one.
    pub(crate) fn mtu(&self) -> Option<u16> {
        (self.features & feature::NET_MTU != 0).then(|| self.device.r16(NET_CFG_MTU))
    }

    /// Whether the device offered feature `bit` (a `feature::` constant).
    pub(crate) fn offers(&self, bit: u64) -> bool {
        self.offered & bit == bit
    }

    /// Whether feature `bit` (a `feature::` constant) was negotiated.
    pub(crate) fn has(&self, bit: u64) -> bool {
        self.features & bit != 0
    }

    /// A 16-bit field of the device configuration, `None` when the
    /// structure is too short to hold it.
    fn cfg16(&self, off: u32) -> Option<u16> {
        (off + 2 <= self.device.len).then(|| self.device.r16(off))
    }

    /// Queue pairs the device offers: `max_virtqueue_pairs` (§5.1.4) when
    /// MQ or RSS was negotiated, else 1. A value outside 1..=0x8000 (the
    /// spec's range) is refused.
    ///
    /// # Errors
    /// [`Error::Virtio`] for such a value.
    pub(crate) fn max_queue_pairs(&self) -> Result<u16> {
        if !self.has(feature::NET_MQ) && !self.has(feature::NET_RSS) {
            return Ok(1);
        }
        match self.cfg16(NET_CFG_MAX_VQ_PAIRS) {
            Some(n @ 1..=0x8000) => Ok(n),
            value => Err(Error::Virtio {
                addr: self.addr,
                problem: VirtioError::BadMaxQueuePairs { value },
            }),
        }
    }

    /// The control queue's index (§5.1.2): `2 × max_virtqueue_pairs` with
    /// MQ or RSS, else 2 (after receiveq1 and transmitq1).
    pub(crate) fn ctrl_queue_index(&self) -> Result<u16> {
        Ok(2 * self.max_queue_pairs()?)
    }

    /// The header in front of every frame: `virtio_net_hdr_v1_hash` with
    /// HASH_REPORT.
    pub(crate) fn net_hdr(&self) -> NetHdr {
        if self.has(feature::NET_HASH_REPORT) {
            NetHdr::V1Hash
        } else {
            NetHdr::V1
        }
    }

    /// Make the control queue from the device's queue `idx` (its size
    /// taken down to 64), with its mapper, before DRIVER_OK.
    ///
    /// # Errors
    /// [`Error::Virtio`] when the device's queue holds fewer than
    /// 4 descriptors or its notify address is bad; the ring's errors.
    pub(crate) fn setup_ctrl(
        &mut self,
        page: pollnic_rings::PageSize,
        mapper: Arc<dyn pollnic_rings::DmaMapper>,
    ) -> Result<()> {
        let idx = self.ctrl_queue_index()?;
        let max = self.max_queue_size(idx);
        if max < 4 {
            return Err(Error::Virtio {
                addr: self.addr,
                problem: VirtioError::QueueTooSmall {
                    which: "control",
                    max,
                    min: 4,
                },
            });
        }
        let layout = self.virtq_layout();
        let size = match layout {
            VirtqLayout::Split => 1u16 << (15 - max.min(CTRL_QUEUE_SIZE).leading_zeros()),
            VirtqLayout::Packed => max.min(CTRL_QUEUE_SIZE),
        };
        let mut ctrl = VirtqCtrl::with_layout(layout, size, page, mapper, self.notify_for(idx)?)?;
        if self.event_idx() {
            ctrl.use_event_idx();
        }
        ctrl.set_in_order(self.in_order());
        self.setup_queue(idx, ctrl.addrs(), NO_VECTOR);
        self.ctrl = Some(ctrl);
        Ok(())
    }

    /// Send a control command and wait for its ack (after DRIVER_OK).
    ///
    /// # Errors
    /// [`Error::VirtioCtrl`]: refused (`VIRTIO_NET_ERR`), no answer in
    /// time, or the queue stopped on a device error.
    fn command(&mut self, class: u8, cmd: u8, data: &[u8]) -> Result<()> {
        let addr = self.addr;
        let ctrl = self.ctrl.as_mut().ok_or(Error::VirtioCtrl {
            addr,
            cause: CtrlError::Stopped,
        })?;
        ctrl.command(class, cmd, data, CTRL_WAIT)
            .map_err(|source| Error::VirtioCtrl {
                addr,
                cause: source,
            })
    }

    /// Whether the receive filter can be set as [`DeviceConfig::promisc`]
    /// and `allmulti` ask, checked before the device is set up:
    /// `VIRTIO_NET_F_CTRL_RX` sets both modes (§5.1.6.5.1) and the device's
    /// MAC is known (`VIRTIO_NET_F_MAC`: with promiscuous mode off the
    /// device passes frames for its own address, so pollnic must be using
    /// that one). Without them the device cannot be told to filter: a
    /// configuration that asks it to is refused; promiscuous mode is taken
    /// as the device's own way (QEMU's virtio-net starts promiscuous).
    ///
    /// # Errors
    /// [`Error::ConfigUnsupported`] for `promisc: false` on such a device.
    pub(crate) fn check_rx_filter(&self, cfg: &DeviceConfig) -> Result<()> {
        if cfg.promisc || (self.has(feature::NET_CTRL_RX) && self.has(feature::NET_MAC)) {
            return Ok(());
        }
        Err(Error::ConfigUnsupported {
            addr: self.addr,
            family: "virtio-net",
            field: "promisc",
            why: if self.has(feature::NET_CTRL_RX) {
                "the device reports no MAC address (no VIRTIO_NET_F_MAC), so with its filter on \
                 it would drop the frames for the address pollnic uses; open it with promisc on"
            } else {
                "the device offers no receive filter control (VIRTIO_NET_F_CTRL_RX, with a \
                 control queue), so it cannot be told to drop frames for other addresses; open \
                 it with promisc on"
            },
        })
    }

    /// Set the receive filter: promiscuous mode and all-multicast mode
    /// (`VIRTIO_NET_CTRL_RX_PROMISC`, `_ALLMULTI`, §5.1.6.5.1; one byte, 1
    /// on, 0 off), as Linux `virtnet_set_rx_mode` sends them. Without
    /// `VIRTIO_NET_F_CTRL_RX` nothing is sent ([`Port::check_rx_filter`]
    /// refused what that cannot honour).
    ///
    /// # Errors
    /// [`Error::VirtioCtrl`].
    pub(crate) fn set_rx_filter(&mut self, promisc: bool, allmulti: bool) -> Result<()> {
        if !self.has(feature::NET_CTRL_RX) {
            return Ok(());
        }
        self.command(ctrl::CLASS_RX, ctrl::RX_PROMISC, &[u8::from(promisc)])?;
        self.command(ctrl::CLASS_RX, ctrl::RX_ALLMULTI, &[u8::from(allmulti)])
    }

    /// Use `queues` queue pairs: with RSS, the RSS configuration (hash
    /// types, `key`, `reta`; `max_tx_vq` = `queues`), which also turns
    /// the hash reports on; with MQ only, `VQ_PAIRS_SET` (the device then
    /// spreads frames its own way); with neither, nothing (one pair).
    ///
    /// # Errors
    /// [`Error::VirtioCtrl`]; [`Error::Virtio`] when the device
    /// cannot hold a 40-byte key or enough of the table (see
    /// [`Port::set_reta`]).
    pub(crate) fn configure_queues(
        &mut self,
        queues: u16,
        hash_types: &crate::family::HashTypes,
        key: &[u8; KEY_LEN],
        reta: &Reta,
    ) -> Result<()> {
        if self.has(feature::NET_RSS) {
            let supported = if NET_CFG_SUPPORTED_HASH_TYPES + 4 <= self.device.len {
                self.device.r32(NET_CFG_SUPPORTED_HASH_TYPES)
            } else {
                0
            };
            self.rss = Some(RssSetup {
                hash_types: ctrl::hash_type_bits(hash_types) & supported,
                key: *key,
                queues,
            });
            return self.set_reta(reta);
        }
        if self.has(feature::NET_MQ) && queues > 1 {
            return self.command(
                ctrl::CLASS_MQ,
                ctrl::MQ_VQ_PAIRS_SET,
                &ctrl::vq_pairs_set(queues),
            );
        }
        Ok(())
    }

    /// Send the RSS configuration again with table `reta` (RSS only; a
    /// no-op otherwise). The device's table may be shorter than the 128
    /// entries (`rss_max_indirection_table_length`): then `reta` must
    /// repeat with that period, so that the device's `table[hash & (len −
    /// 1)]` is `reta[hash & 127]`.
    ///
    /// # Errors
    /// [`Error::Virtio`] for a device that takes a key shorter
    /// than 40 bytes or a table `reta` does not fold onto;
    /// [`Error::VirtioCtrl`].
    pub(crate) fn set_reta(&mut self, reta: &Reta) -> Result<()> {
        let Some(rss) = self.rss else {
            return Ok(());
        };
        let addr = self.addr;
        let bad = |problem: VirtioError| Error::Virtio { addr, problem };
        let max_key = if NET_CFG_RSS_MAX_KEY_SIZE < self.device.len {
            self.device.r8(NET_CFG_RSS_MAX_KEY_SIZE)
        } else {
            0
        };
        if (max_key as usize) < KEY_LEN {
            return Err(bad(VirtioError::RssKeyTooShort {
                max_key,
                needed: KEY_LEN,
            }));
        }
        let max_len = self.cfg16(NET_CFG_RSS_MAX_TABLE_LEN).unwrap_or(0) as usize;
        let len = self.rss_table_len().unwrap_or(0);
        if len == 0 || (0..reta.0.len()).any(|i| reta.0[i] != reta.0[i % len]) {
            return Err(bad(VirtioError::RetaDoesNotFold { table_len: max_len }));
        }
        let table: Vec<u16> = reta.0[..len].iter().map(|&q| u16::from(q)).collect();
        let data = ctrl::rss_config(rss.hash_types, &table, 0, rss.queues, &rss.key);
        self.command(ctrl::CLASS_MQ, ctrl::MQ_RSS_CONFIG, &data)
    }

    /// The redirection table pollnic sends with RSS negotiated:
    /// `rss_max_indirection_table_length` down to a power of two, at most
    /// 128 entries (`None` without RSS, or a length of 0).
    pub(crate) fn rss_table_len(&self) -> Option<usize> {
        if !self.has(feature::NET_RSS) {
            return None;
        }
        let max_len = self.cfg16(NET_CFG_RSS_MAX_TABLE_LEN).unwrap_or(0) as usize;
        (max_len > 0).then(|| {
            (1usize << (usize::BITS - 1 - max_len.leading_zeros())).min(pollnic_hw::rss::RETA_LEN)
        })
    }

    /// The virtqueues' layout: packed when `VIRTIO_F_RING_PACKED` was
    /// negotiated (virtio 1.2 §2.8), else split (§2.7).
    pub(crate) fn virtq_layout(&self) -> VirtqLayout {
        if self.features & feature::RING_PACKED != 0 {
            VirtqLayout::Packed
        } else {
            VirtqLayout::Split
        }
    }

    /// Whether `VIRTIO_F_IN_ORDER` was negotiated: the virtqueues then post
    /// in ring order and hold the device to it (`VirtqTx::set_in_order`).
    pub(crate) fn in_order(&self) -> bool {
        self.features & feature::IN_ORDER != 0
    }

    /// Whether `VIRTIO_F_EVENT_IDX` was negotiated: the virtqueues must
    /// then notify by event index (`VirtqRx::use_event_idx`).
    pub(crate) fn event_idx(&self) -> bool {
        self.features & feature::EVENT_IDX != 0
    }

    /// [`Error::VirtioMtu`] when `mtu` (`DeviceConfig::mtu`) is above what
    /// this device takes: its `VIRTIO_NET_F_MTU` value (§5.1.4.1: the driver
    /// MUST NOT transmit longer packets), or 1500 when it reports none.
    pub(crate) fn check_mtu(&self, mtu: u32) -> Result<()> {
        check_mtu(self.addr, self.mtu(), mtu)
    }

    /// Queues the device has (`num_queues`: RX and TX of each pair, plus a
    /// control queue if any).
    pub(crate) fn num_queues(&self) -> u16 {
        self.common.r16(common::NUM_QUEUES)
    }

    /// Queue `q`'s largest size (`queue_size` as the device resets it; 0:
    /// the queue does not exist).
    pub(crate) fn max_queue_size(&self, q: u16) -> u16 {
        self.common.w16(common::QUEUE_SELECT, q);
        self.common.r16(common::QUEUE_SIZE)
    }

    /// Give the device queue `q` (§4.1.5.1.3): size, the three addresses,
    /// its MSI-X vector (`NO_VECTOR` for none), and only then enable it:
    /// every field is written before `queue_enable` (§4.1.4.3.2). Returns
    /// whether the device took the vector (it reads back
    /// `VIRTIO_MSI_NO_VECTOR` when it could not map it, §4.1.5.1.2); the
    /// queue is enabled either way (a queue without a vector is polled).
    pub(crate) fn setup_queue(&self, q: u16, a: VirtqAddrs, vector: u16) -> bool {
        let c = &self.common;
        c.w16(common::QUEUE_SELECT, q);
        c.w16(common::QUEUE_SIZE, a.size);
        c.w16(common::QUEUE_MSIX_VECTOR, vector);
        let took = c.r16(common::QUEUE_MSIX_VECTOR) == vector;
        c.w64(common::QUEUE_DESC, a.desc);
        c.w64(common::QUEUE_DRIVER, a.avail);
        c.w64(common::QUEUE_DEVICE, a.used);
        c.w16(common::QUEUE_ENABLE, 1);
        took
    }

    /// Queue `q`'s doorbell: its notification address (§4.1.4.4,
    /// `cap.offset + queue_notify_off × notify_off_multiplier`).
    ///
    /// # Errors
    /// [`Error::Virtio`] when that address falls outside the
    /// notify structure.
    pub(crate) fn notify_for(&self, q: u16) -> Result<Notify> {
        let c = &self.common;
        c.w16(common::QUEUE_SELECT, q);
        let off = (c.r16(common::QUEUE_NOTIFY_OFF) as u32).checked_mul(self.notify_mult);
        let Some(off) = off.filter(|o| {
            o.checked_add(2).is_some_and(|e| e <= self.notify.len) && (self.notify.off + o) % 2 == 0
        }) else {
            return Err(Error::Virtio {
                addr: self.addr,
                problem: VirtioError::NotifyOutside {
                    queue: q,
                    structure_len: self.notify.len,
                },
            });
        };
        Ok(Notify {
            bar: Arc::clone(&self.notify.bar),
            // Inside the notify structure (checked above), which lies inside
            // the BAR (`find`): no wrap.
            off: self.notify.off + off,
            queue: q,
        })
    }

    /// No configuration-change interrupt (poll mode).
    pub(crate) fn no_config_vector(&self) {
        self.common.w16(common::MSIX_CONFIG, NO_VECTOR);
    }

    /// DRIVER_OK (§3.1.1 step 8): the device may use the queues.
    ///
    /// # Errors
    /// [`Error::VirtioNeedsReset`] when the device reports
    /// DEVICE_NEEDS_RESET instead (it found something wrong in the setup).
    pub(crate) fn driver_ok(&self) -> Result<()> {
        self.add_status(status::DRIVER_OK);
        self.check()
    }

    /// [`Error::VirtioNeedsReset`] when the device has set
    /// DEVICE_NEEDS_RESET (§2.1.1: it hit an error it cannot recover from
    /// without a reset).
    pub(crate) fn check(&self) -> Result<()> {
        let s = self.status();
        if s & status::DEVICE_NEEDS_RESET != 0 {
            return Err(Error::VirtioNeedsReset {
                addr: self.addr,
                status: s,
            });
        }
        Ok(())
    }

    /// The link: `VIRTIO_NET_S_LINK_UP` of the config's `status` when
    /// `VIRTIO_NET_F_STATUS` was negotiated, else always up (§5.1.4.2); down
    /// when the device needs a reset. Speed is not reported (0).
    pub(crate) fn link(&self) -> LinkStatus {
        let up = self.check().is_ok()
            && (self.features & feature::NET_STATUS == 0
                || self.device.r16(NET_CFG_STATUS) & NET_S_LINK_UP != 0);
        LinkStatus {
            up,
            speed_mbps: 0,
            full_duplex: true,
        }
    }
}

/// [`Port::check_mtu`] on the device's reported MTU (`None`: no
/// `VIRTIO_NET_F_MTU`).
fn check_mtu(addr: PciAddress, device_mtu: Option<u16>, mtu: u32) -> Result<()> {
    let max = device_mtu.map_or(pollnic_hw::mtu::DEFAULT_MTU, u32::from);
    if mtu > max {
        return Err(Error::VirtioMtu {
            addr,
            mtu,
            device_mtu,
        });
    }
    Ok(())
}

/// Refuse the [`DeviceConfig`] fields virtio-net cannot honour, before the
/// device is touched: each names the field, why, and what to set instead.
/// (`promisc` and `allmulti` are honoured through the control queue and
/// checked against what the device offers: [`Port::check_rx_filter`];
/// `rx_checksum` against `VIRTIO_NET_F_GUEST_CSUM` by [`Port::negotiate`].)
///
/// # Errors
/// [`Error::ConfigUnsupported`].
pub(crate) fn check_config(addr: PciAddress, cfg: &DeviceConfig) -> Result<()> {
    let refused = |field: &'static str, why: &'static str| {
        Err(Error::ConfigUnsupported {
            addr,
            family: "virtio-net",
            field,
            why,
        })
    };
    if cfg.vlan_strip {
        return refused(
            "vlan_strip",
            "virtio-net strips no VLAN tags (VIRTIO_NET_F_CTRL_VLAN filters by tag, it does not \
             strip); leave it off and read the tag from the frame",
        );
    }
    if cfg.flow_control.is_some_and(|f| f != FlowControl::None) {
        return refused(
            "flow_control",
            "a virtio-net port sends and honours no PAUSE frames (there is no link between a VM \
             and its host to pause); leave it unset, or FlowControl::None",
        );
    }
    if cfg.data_path == DataPathChoice::Vector {
        return refused(
            "data_path",
            "virtio-net's bursts have no vector loop (a virtqueue runs the scalar one); \
             use DataPathChoice::Auto or Scalar",
        );
    }
    if cfg.power_saving != PowerSaving::OFF {
        return refused(
            "power_saving",
            "a virtio-net port has no Energy Efficient Ethernet or DMA coalescing; leave it \
             PowerSaving::OFF",
        );
    }
    Ok(())
}

impl std::fmt::Debug for Port {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Port")
            .field("addr", &self.addr)
            .field("features", &format_args!("{:#x}", self.features))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    //! The bring-up's refusals against a made-up virtio device: a register
    //! file behind a fake BAR that offers chosen features and may refuse
    //! FEATURES_OK, and a configuration space with chosen capabilities.

    use super::*;
    use crate::lowlevel::io::{DeviceBar, DeviceIo, TailDoorbell};
    use crate::sys::mmio::Regs;
    use pollnic_rings::{DmaMapper, IdentityMapper, PageSize};
    use std::sync::Mutex;

    /// Common configuration at 0, device configuration at 0x100, notify at
    /// 0x200, ISR at 0x300, all in BAR 4.
    struct FakeDev {
        regs: Mutex<Vec<u8>>,
        offered: u64,
        refuse_features_ok: bool,
        select: Mutex<u32>,
        /// Every 32-bit register write, in order: (offset, value).
        writes: Mutex<Vec<(u32, u32)>>,
    }

    impl Regs for FakeDev {
        fn read32(&self, off: u32) -> u32 {
            if off == common::DEVICE_FEATURE {
                return (self.offered >> (32 * *self.select.lock().unwrap())) as u32;
            }
            let r = self.regs.lock().unwrap();
            let o = off as usize;
            u32::from_le_bytes([r[o], r[o + 1], r[o + 2], r[o + 3]])
        }
        fn write32(&self, off: u32, val: u32) {
            self.writes.lock().unwrap().push((off, val));
            if off == common::DEVICE_FEATURE_SELECT {
                *self.select.lock().unwrap() = val;
            }
            let mut r = self.regs.lock().unwrap();
            r[off as usize..off as usize + 4].copy_from_slice(&val.to_le_bytes());
        }
        fn read8(&self, off: u32) -> u8 {
            self.regs.lock().unwrap()[off as usize]
        }
        fn write8(&self, off: u32, val: u8) {
            let val = if off == common::DEVICE_STATUS && self.refuse_features_ok {
                val & !status::FEATURES_OK
            } else {
                val
            };
            self.regs.lock().unwrap()[off as usize] = val;
        }
    }

    impl DeviceBar for FakeDev {
        fn regs(&self) -> &dyn Regs {
            self
        }
        fn size(&self) -> u64 {
            self.regs.lock().unwrap().len() as u64
        }
        fn doorbell(self: Arc<Self>, reg: u32) -> TailDoorbell {
            TailDoorbell::new(self, reg)
        }
    }

    struct FakeIo {
        bar: Arc<FakeDev>,
        config: Vec<u8>,
    }

    impl DeviceIo for FakeIo {
        fn bar0(&self) -> Arc<dyn DeviceBar> {
            self.bar.clone()
        }
        fn bar(&self, index: u8) -> Option<Arc<dyn DeviceBar>> {
            (index == 4).then(|| self.bar.clone() as Arc<dyn DeviceBar>)
        }
        fn dma(&self) -> Arc<dyn DmaMapper> {
            Arc::new(IdentityMapper)
        }
        fn page_size(&self) -> PageSize {
            PageSize::Small4K
        }
        fn disable_bus_master(&self) {}
        fn config_read(&self, off: u32, buf: &mut [u8]) -> bool {
            let o = off as usize;
            match self.config.get(o..o + buf.len()) {
                Some(src) => {
                    buf.copy_from_slice(src);
                    true
                }
                None => false,
            }
        }
    }

    /// The four virtio capabilities of [`FakeDev`]: (type, offset, length).
    const CAPS: [(u8, u32, u32); 4] = [
        (CAP_COMMON, 0x000, 0x38),
        (CAP_DEVICE, 0x100, 0x20),
        (CAP_NOTIFY, 0x200, 0x10),
        (CAP_ISR, 0x300, 4),
    ];

    /// A configuration space with the four virtio capabilities (or none).
    fn config(with_caps: bool) -> Vec<u8> {
        if !with_caps {
            return vec![0u8; 256];
        }
        config_at(&CAPS, 0x40)
    }

    /// A configuration space with `caps`, the first at `first` and each
    /// next 20 bytes on, all in BAR 4.
    fn config_at(caps: &[(u8, u32, u32)], first: usize) -> Vec<u8> {
        let mut c = vec![0u8; 256];
        c[0x06] = PCI_STATUS_CAP_LIST as u8;
        c[0x34] = first as u8;
        for (i, (ty, off, len)) in caps.iter().enumerate() {
            let p = first + 0x14 * i;
            c[p] = PCI_CAP_ID_VNDR;
            c[p + 1] = if i + 1 < caps.len() {
                (p + 0x14) as u8
            } else {
                0
            };
            c[p + 2] = if *ty == CAP_NOTIFY { 20 } else { 16 };
            c[p + 3] = *ty;
            c[p + 4] = 4;
            c[p + 8..p + 12].copy_from_slice(&off.to_le_bytes());
            c[p + 12..p + 16].copy_from_slice(&len.to_le_bytes());
            if let Some(extra) = c.get_mut(p + 16..p + 20) {
                extra.copy_from_slice(&4u32.to_le_bytes());
            }
        }
        c
    }

    /// `Port::find` on [`FakeDev`] (a 0x400-byte BAR 4) with `caps`.
    fn find_with(caps: &[(u8, u32, u32)], first: usize) -> Result<Port> {
        let mut io = io(0, false, true);
        io.config = config_at(caps, first);
        Port::find(&io, addr())
    }

    /// §4.1.4.3.2: every queue field, the MSI-X vector too, is written
    /// before `queue_enable`; the vector is read back. (Before, the vectors
    /// were written when interrupt mode was switched on, after enable and
    /// DRIVER_OK.)
    #[test]
    fn a_queue_is_enabled_only_after_its_fields_and_vector_are_written() {
        let io = io(0, false, true);
        let port = Port::find(&io, addr()).unwrap();
        let tx = pollnic_rings::VirtqTx::new(
            16,
            PageSize::Small4K,
            Arc::new(IdentityMapper),
            port.notify_for(1).unwrap(),
        )
        .unwrap();
        let a = tx.addrs();
        io.bar.writes.lock().unwrap().clear();
        assert!(port.setup_queue(2, a, 1), "the vector reads back");
        let w = io.bar.writes.lock().unwrap().clone();
        let enable = w
            .iter()
            .position(|&(o, v)| o == common::QUEUE_ENABLE && v & 0xffff == 1)
            .expect("queue_enable written");
        assert_eq!(enable, w.len() - 1, "enable is the last write: {w:x?}");
        let field = |o: u32| w.iter().rposition(|&(off, _)| off == o);
        let vector = w
            .iter()
            .rposition(|&(o, v)| o == common::QUEUE_SIZE && v >> 16 == 1)
            .expect("queue_msix_vector 1 written");
        assert!(vector < enable);
        for o in [
            common::QUEUE_DESC,
            common::QUEUE_DESC + 4,
            common::QUEUE_DRIVER,
            common::QUEUE_DEVICE + 4,
        ] {
            assert!(field(o).is_some_and(|i| i < enable), "{o:#x} before enable");
        }
        assert!(
            port.setup_queue(2, a, NO_VECTOR),
            "NO_VECTOR reads back as itself"
        );
    }

    /// A device that breaks the RX virtqueue's protocol (a used entry with
    /// an odd id) stops the queue, and the stop is seen: the burst gives
    /// nothing, `Queue::check` is `Error::QueueStopped`, and the queue's
    /// counters carry the break (which `Device::stats` sums as
    /// `device_errors` and `virtqueues_stopped`).
    // The one exception to the crate's `deny(unsafe_code)` outside `sys`
    // (docs/design/unsafe.md): this test plays the device, writing the used
    // ring through `DeviceView`, whose constructor is unsafe.
    #[allow(unsafe_code)]
    #[test]
    fn a_stopped_virtqueue_is_an_error_and_counted() {
        use crate::counters::QueueCounters;
        use crate::queue::{Queue, Rings};
        use crossbeam_utils::CachePadded;
        use pollnic_rings::virtq::device::DeviceView;
        use pollnic_rings::{Mempool, VirtqRx, VirtqTx, VIRTIO_NET_HDR_LEN};

        let io = io(0, false, true);
        let port = Port::find(&io, addr()).unwrap();
        let pool = Mempool::new(64, 2048, PageSize::Small4K, Arc::new(IdentityMapper)).unwrap();
        let mut rx = VirtqRx::new(
            16,
            PageSize::Small4K,
            Arc::new(IdentityMapper),
            &pool,
            port.notify_for(0).unwrap(),
        )
        .unwrap();
        let tx = VirtqTx::new(
            16,
            PageSize::Small4K,
            Arc::new(IdentityMapper),
            port.notify_for(1).unwrap(),
        )
        .unwrap();
        rx.start();
        // SAFETY: identity-mapped queue, alive until the end of the test
        // (moved into the Queue below, which is dropped last).
        let dev = unsafe { DeviceView::new(rx.addrs()) };
        let counters: crate::counters::DeviceCounters =
            Arc::from(vec![CachePadded::new(QueueCounters::default())]);
        let mut q = Queue::new(
            0,
            Rings::Virtq { rx, tx },
            Arc::clone(&counters),
            Arc::new(crate::removal::Removal::new(addr())),
            0,
            "virtio-net",
        );
        assert!(q.check().is_ok());
        // Chain 1 is id 2; id 3 is no chain head.
        dev.put_used(0, 3, VIRTIO_NET_HDR_LEN + 60);
        dev.set_used_idx(1);
        let mut out = Vec::new();
        assert_eq!(q.rx_burst(&mut out, 32), 0);
        let err = q.check().expect_err("stopped");
        assert!(
            matches!(
                err,
                Error::QueueStopped {
                    queue: 0,
                    rx: true,
                    tx: false,
                    device_errors: 1
                }
            ),
            "{err}"
        );
        assert!(
            err.to_string().contains("receive virtqueue stopped"),
            "{err}"
        );
        let snap = counters[0].snapshot();
        assert_eq!((snap.device_errors, snap.virtqueues_stopped), (1, 1));
        // It stays stopped: a good entry after it is not followed.
        dev.put_used(1, 2, VIRTIO_NET_HDR_LEN + 60);
        dev.set_used_idx(2);
        assert_eq!(q.rx_burst(&mut out, 32), 0);
        assert!(q.check().is_err());
    }

    /// What virtio-net cannot do is refused by field, before the device is
    /// touched; what it can (FlowControl::None, the defaults) is not.
    #[test]
    fn configuration_virtio_cannot_honour_is_refused_by_field() {
        let base = DeviceConfig::default();
        for (cfg, want) in [
            (base.clone().with_vlan_strip(true), "vlan_strip"),
            (
                base.clone().with_flow_control(FlowControl::Full),
                "flow_control",
            ),
            (
                base.clone().with_flow_control(FlowControl::Rx),
                "flow_control",
            ),
            (
                base.clone().with_data_path(DataPathChoice::Vector),
                "data_path",
            ),
            (
                base.clone().with_power_saving(PowerSaving::LINUX),
                "power_saving",
            ),
        ] {
            match check_config(addr(), &cfg) {
                Err(e @ Error::ConfigUnsupported { field, .. }) => {
                    assert_eq!(field, want);
                    assert!(
                        e.to_string().contains(&format!("DeviceConfig::{want}")),
                        "{e}"
                    );
                }
                other => panic!("{want}: {other:?}"),
            }
        }
        assert!(check_config(addr(), &base).is_ok());
        let none = base.clone().with_flow_control(FlowControl::None);
        assert!(check_config(addr(), &none).is_ok());
    }

    /// Promiscuous mode off needs the receive filter's control
    /// (`VIRTIO_NET_F_CTRL_RX`, with the control queue) and the device's
    /// MAC; on is taken from any device.
    #[test]
    fn promiscuous_mode_off_needs_ctrl_rx_and_the_devices_mac() {
        let must = feature::VERSION_1 | feature::ACCESS_PLATFORM;
        let full = must | feature::NET_CTRL_VQ | feature::NET_CTRL_RX | feature::NET_MAC;
        let off = DeviceConfig::default();
        let on = DeviceConfig::default().with_promisc(true);
        for (offered, refused) in [
            (full, None),
            (
                full & !feature::NET_CTRL_RX,
                Some("no receive filter control"),
            ),
            // CTRL_RX without the control queue is not negotiated.
            (
                full & !feature::NET_CTRL_VQ,
                Some("no receive filter control"),
            ),
            (full & !feature::NET_MAC, Some("no MAC address")),
        ] {
            let io = io(offered, false, true);
            let mut port = Port::find(&io, addr()).unwrap();
            port.negotiate(false, false, None, None).unwrap();
            assert!(port.check_rx_filter(&on).is_ok());
            match (port.check_rx_filter(&off), refused) {
                (Ok(()), None) => {}
                (
                    Err(
                        e @ Error::ConfigUnsupported {
                            field: "promisc", ..
                        },
                    ),
                    Some(why),
                ) => {
                    assert!(e.to_string().contains(why), "{e}");
                }
                (got, want) => panic!("{offered:#x}: {got:?}, wanted {want:?}"),
            }
        }
    }

    #[test]
    fn structures_outside_their_bar_or_misaligned_are_refused_not_followed() {
        assert!(find_with(&CAPS, 0x40).is_ok());
        let with = |i: usize, off: u32, len: u32| {
            let mut caps = CAPS;
            caps[i].1 = off;
            caps[i].2 = len;
            find_with(&caps, 0x40).expect_err("refused").to_string()
        };
        // Past the end of the 0x400-byte BAR.
        let e = with(1, 0x3f0, 0x20);
        assert!(e.contains("does not fit in the BAR (1024 bytes)"), "{e}");
        // offset + length wraps a u32.
        let e = with(0, 0xffff_fff0, 0x38);
        assert!(e.contains("does not fit"), "{e}");
        let e = with(2, 0x400, 2);
        assert!(e.contains("notification structure"), "{e}");
        // Misaligned common and device structures (§4.1.4.3, §4.1.4.6).
        let e = with(0, 0x2, 0x38);
        assert!(e.contains("not 4-byte aligned"), "{e}");
        let e = with(2, 0x201, 0x10);
        assert!(e.contains("not 2-byte aligned"), "{e}");
    }

    #[test]
    fn a_capability_at_the_end_of_configuration_space_ends_the_walk() {
        // Three capabilities from 0x40, then the ISR one at 0xf8, whose 16
        // bytes would run 8 past the 256 of configuration space.
        let mut io = io(0, false, true);
        io.config = config_at(&CAPS[..3], 0x40);
        io.config[0x40 + 0x28 + 1] = 0xf8;
        io.config[0xf8..0xfd].copy_from_slice(&[PCI_CAP_ID_VNDR, 0, 16, CAP_ISR, 4]);
        let e = Port::find(&io, addr()).expect_err("refused").to_string();
        assert!(e.contains("no ISR status capability"), "{e}");
    }

    #[test]
    fn a_field_past_a_short_structure_reads_as_all_ones_and_takes_no_write() {
        let io = io(0, false, true);
        let port = Port::find(&io, addr()).unwrap();
        let w = Window {
            len: 6,
            ..port.device.clone()
        };
        assert_eq!(w.r32(4), !0, "4 bytes at 4 of a 6-byte structure");
        assert_eq!(w.r16(5), !0, "misaligned");
        assert_eq!(w.r16(u32::MAX), !0, "o + width wraps");
        w.w32(4, 0x1234_5678);
        assert_eq!(io.bar.read32(0x104), 0, "no write past the structure");
        w.w16(4, 0x5678);
        assert_eq!(io.bar.read32(0x104), 0x5678, "a write inside it lands");
    }

    fn io(offered: u64, refuse: bool, with_caps: bool) -> FakeIo {
        FakeIo {
            bar: Arc::new(FakeDev {
                regs: Mutex::new(vec![0; 0x400]),
                offered,
                refuse_features_ok: refuse,
                select: Mutex::new(0),
                writes: Mutex::new(Vec::new()),
            }),
            config: config(with_caps),
        }
    }

    fn addr() -> PciAddress {
        "0000:00:10.0".parse().unwrap()
    }

    #[test]
    fn an_mtu_above_the_devices_is_refused_with_the_fix() {
        let a = addr();
        assert!(check_mtu(a, Some(9000), 9000).is_ok());
        assert!(check_mtu(a, Some(9000), 1500).is_ok());
        assert!(check_mtu(a, None, 1500).is_ok());
        let msg = check_mtu(a, Some(4000), 9000).unwrap_err().to_string();
        assert!(
            msg.contains("MTU of 4000 bytes") && msg.contains("host_mtu"),
            "{msg}"
        );
        let err = check_mtu(a, None, 1501).unwrap_err();
        assert!(
            matches!(
                err,
                Error::VirtioMtu {
                    mtu: 1501,
                    device_mtu: None,
                    ..
                }
            ),
            "{err}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("VIRTIO_NET_F_MTU") && msg.contains("host_mtu=9000"),
            "{msg}"
        );
    }

    #[test]
    fn event_idx_is_taken_when_offered() {
        let offered = feature::VERSION_1 | feature::ACCESS_PLATFORM | feature::EVENT_IDX;
        let io = io(offered, false, true);
        let mut port = Port::find(&io, addr()).unwrap();
        assert_eq!(port.negotiate(false, false, None, None).unwrap(), offered);
        assert!(port.event_idx());
        let io = io_without_event_idx();
        let mut port = Port::find(&io, addr()).unwrap();
        port.negotiate(false, false, None, None).unwrap();
        assert!(!port.event_idx());
    }

    fn io_without_event_idx() -> FakeIo {
        io(feature::VERSION_1 | feature::ACCESS_PLATFORM, false, true)
    }

    #[test]
    fn a_device_without_virtio_capabilities_is_refused_by_name() {
        let err = Port::find(&io(0, false, false), addr()).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(
                err,
                Error::Virtio {
                    problem: VirtioError::MissingStructure {
                        structure: "common configuration"
                    },
                    ..
                }
            ),
            "{msg}"
        );
        assert!(msg.contains("no common configuration capability"), "{msg}");
        // No hypervisor's options in a library error (the docs have them).
        assert!(!msg.contains("QEMU"), "{msg}");
    }

    #[test]
    fn missing_required_features_are_named_and_the_device_marked_failed() {
        let all = feature::VERSION_1 | feature::ACCESS_PLATFORM | feature::NET_MAC;
        for (offered, name, hint) in [
            (
                all & !feature::ACCESS_PLATFORM,
                "VIRTIO_F_ACCESS_PLATFORM",
                "iommu_platform=on",
            ),
            (
                all & !feature::VERSION_1,
                "VIRTIO_F_VERSION_1",
                "disable-legacy=on",
            ),
        ] {
            let io = io(offered, false, true);
            let mut port = Port::find(&io, addr()).expect("capabilities found");
            let err = port.negotiate(false, false, None, None).unwrap_err();
            let msg = err.to_string();
            assert!(
                matches!(err, Error::VirtioFeatureMissing { feature, .. } if feature == name),
                "{msg}"
            );
            assert!(msg.contains(hint), "{msg}");
            let st = port.status();
            assert_eq!(st & status::FAILED, status::FAILED, "{st:#x}");
            assert_eq!(st & status::FEATURES_OK, 0);
        }
    }

    #[test]
    fn a_device_that_clears_features_ok_gets_a_clear_error() {
        let offered = feature::VERSION_1 | feature::ACCESS_PLATFORM | feature::NET_MAC | 1 << 15;
        let io = io(offered, true, true);
        let mut port = Port::find(&io, addr()).unwrap();
        let err = port.negotiate(false, false, None, None).unwrap_err();
        let msg = err.to_string();
        // What was written: the wanted features the device offered, not
        // MRG_RXBUF (bit 15), which pollnic does not ask for.
        let want = feature::VERSION_1 | feature::ACCESS_PLATFORM | feature::NET_MAC;
        assert!(
            matches!(err, Error::VirtioFeaturesRefused { features, .. } if features == want),
            "{msg}"
        );
        assert!(msg.contains("FEATURES_OK did not stay set"), "{msg}");
        assert_eq!(port.status() & status::FAILED, status::FAILED);
    }

    #[test]
    fn in_order_is_taken_when_offered_dropped_on_request_and_refused_when_absent() {
        let base = feature::VERSION_1 | feature::ACCESS_PLATFORM;
        for (offered, asked, got) in [
            (feature::IN_ORDER, None, Some(true)),
            (feature::IN_ORDER, Some(true), Some(true)),
            (feature::IN_ORDER, Some(false), Some(false)),
            (0, None, Some(false)),
            (0, Some(false), Some(false)),
            (0, Some(true), None),
        ] {
            let io = io(base | offered, false, true);
            let mut port = Port::find(&io, addr()).unwrap();
            match (port.negotiate(false, false, None, asked), got) {
                (Ok(f), Some(on)) => {
                    assert_eq!(f & feature::IN_ORDER != 0, on, "{offered:#x} {asked:?}");
                    assert_eq!(port.in_order(), on);
                }
                (Err(Error::ConfigUnsupported { field, why, .. }), None) => {
                    assert_eq!(field, "virtq_in_order");
                    assert!(why.contains("in_order=on"), "{why}");
                }
                (r, want) => panic!("{offered:#x} {asked:?}: {r:?}, expected {want:?}"),
            }
        }
    }

    #[test]
    fn mq_rss_and_hash_report_are_taken_only_with_what_they_depend_on() {
        let base = feature::VERSION_1 | feature::ACCESS_PLATFORM;
        let all = feature::NET_CTRL_VQ | feature::NET_MQ | feature::NET_RSS;
        for (offered, want) in [
            // No control queue: neither MQ nor RSS (nor the hash reports).
            (
                feature::NET_MQ | feature::NET_RSS | feature::NET_HASH_REPORT,
                0,
            ),
            // HASH_REPORT without RSS is not taken.
            (
                feature::NET_CTRL_VQ | feature::NET_MQ | feature::NET_HASH_REPORT,
                feature::NET_CTRL_VQ | feature::NET_MQ,
            ),
            (
                all | feature::NET_HASH_REPORT,
                all | feature::NET_HASH_REPORT,
            ),
        ] {
            let io = io(base | offered, false, true);
            let mut port = Port::find(&io, addr()).unwrap();
            assert_eq!(
                port.negotiate(false, false, None, None).unwrap(),
                base | want,
                "{offered:#x}"
            );
        }
        // max_virtqueue_pairs counts only with MQ or RSS; 0 is refused.
        let dev = io(base | all, false, true);
        let mut port = Port::find(&dev, addr()).unwrap();
        port.negotiate(false, false, None, None).unwrap();
        dev.bar.write16(0x100 + NET_CFG_MAX_VQ_PAIRS, 4);
        assert_eq!(port.max_queue_pairs().unwrap(), 4);
        assert_eq!(port.ctrl_queue_index().unwrap(), 8);
        assert_eq!(port.net_hdr(), NetHdr::V1);
        dev.bar.write16(0x100 + NET_CFG_MAX_VQ_PAIRS, 0);
        let err = port.max_queue_pairs().unwrap_err();
        assert!(err.to_string().contains("max_virtqueue_pairs"), "{err}");
        let dev = io(base | feature::NET_CTRL_VQ, false, true);
        let mut port = Port::find(&dev, addr()).unwrap();
        port.negotiate(false, false, None, None).unwrap();
        dev.bar.write16(0x100 + NET_CFG_MAX_VQ_PAIRS, 4);
        assert_eq!(port.max_queue_pairs().unwrap(), 1);
        assert_eq!(port.ctrl_queue_index().unwrap(), 2);
    }

    #[test]
    fn a_device_that_keeps_features_ok_negotiates_what_pollnic_wants() {
        let offered = feature::VERSION_1 | feature::ACCESS_PLATFORM | feature::NET_STATUS | 1 << 15;
        let io = io(offered, false, true);
        let mut port = Port::find(&io, addr()).unwrap();
        let got = port.negotiate(false, false, None, None).unwrap();
        assert_eq!(
            got,
            feature::VERSION_1 | feature::ACCESS_PLATFORM | feature::NET_STATUS
        );
        let st = port.status();
        assert_eq!(
            st,
            status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK,
            "{st:#x}"
        );
        // The driver's feature words were written low then high: the high
        // one (VERSION_1, ACCESS_PLATFORM) is the last in the register.
        let r = |o: u32| io.bar.read32(o);
        assert_eq!(r(common::DRIVER_FEATURE), (got >> 32) as u32);
        assert_eq!(r(common::DRIVER_FEATURE_SELECT), 1);
        // No MAC feature: none read (the device opens with a made-up one).
        assert_eq!(port.mac(), None);
        // A notify offset past the structure is refused, not followed.
        io.bar.write16(common::QUEUE_NOTIFY_OFF, 100);
        let err = port
            .notify_for(0)
            .err()
            .expect("outside the notify structure");
        assert!(
            err.to_string().contains("outside the notify structure"),
            "{err}"
        );
    }
}
