//! A virtio device's feature bits as the kernel shows them in sysfs (one
//! `'0'`/`'1'` character per bit, `features_show` in
//! `drivers/virtio/virtio.c`), by name, and what `Device::open` requires
//! of them on each way in. Values only: reading the file is
//! [`super::virtio`].

use std::fmt;
use std::str::FromStr;

use super::address::PciAddress;
use super::mode::BindMode;
use pollnic_hw::virtio::feature;

/// Most characters a `features` file may hold: the kernel writes whole
/// 64-bit words (64 characters, 128 with extended features); more than 8
/// words is not a file the kernel wrote.
const MAX_CHARS: usize = 512;

/// One virtio feature bit pollnic requires or takes when offered, by its
/// name in the virtio specification (virtio 1.2 §6 for the reserved bits,
/// §5.1.3 for the network device's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum VirtioFeature {
    /// `VIRTIO_F_VERSION_1`, bit 32 (§6): the modern virtio 1.x interface.
    /// pollnic drives no other; required on every route.
    Version1,
    /// `VIRTIO_F_ACCESS_PLATFORM`, bit 33 (§6): the device's DMA goes
    /// through the platform's IOMMU. Required behind an IOMMU
    /// ([`BindMode::Vfio`]): without it the device ignores the IOMMU and
    /// VFIO's mappings.
    AccessPlatform,
    /// `VIRTIO_F_EVENT_IDX` (Linux `VIRTIO_RING_F_EVENT_IDX`), bit 29
    /// (§6): notifications suppressed by ring indices instead of flags.
    EventIdx,
    /// `VIRTIO_F_RING_PACKED`, bit 34 (§6, §2.8): packed virtqueues. Taken
    /// when offered unless `DeviceConfig::virtq_layout` asks for split.
    RingPacked,
    /// `VIRTIO_F_IN_ORDER`, bit 35 (§6): buffers used in the order they
    /// were made available. Taken when offered unless
    /// `DeviceConfig::virtq_in_order` says no.
    InOrder,
    /// `VIRTIO_NET_F_MTU`, bit 3 (§5.1.3): the device reports its MTU.
    NetMtu,
    /// `VIRTIO_NET_F_MAC`, bit 5: the device has a MAC address.
    NetMac,
    /// `VIRTIO_NET_F_STATUS`, bit 16: the link status field is valid.
    NetStatus,
    /// `VIRTIO_NET_F_CTRL_VQ`, bit 17: a control virtqueue.
    NetCtrlVq,
    /// `VIRTIO_NET_F_CTRL_RX`, bit 18: promiscuous and all-multicast
    /// modes set by control commands (needs CTRL_VQ).
    NetCtrlRx,
    /// `VIRTIO_NET_F_MQ`, bit 22: several queue pairs (needs CTRL_VQ).
    NetMq,
    /// `VIRTIO_NET_F_HASH_REPORT`, bit 57: the RSS hash in each received
    /// header (pollnic takes it only with RSS).
    NetHashReport,
    /// `VIRTIO_NET_F_RSS`, bit 60: RSS steering (needs CTRL_VQ).
    NetRss,
}

impl VirtioFeature {
    /// The features pollnic takes when offered but does not require, in
    /// bit order: what each adds is [`VirtioFeature::gives`].
    pub const OPTIONAL: [VirtioFeature; 11] = [
        VirtioFeature::NetMtu,
        VirtioFeature::NetMac,
        VirtioFeature::NetStatus,
        VirtioFeature::NetCtrlVq,
        VirtioFeature::NetCtrlRx,
        VirtioFeature::NetMq,
        VirtioFeature::EventIdx,
        VirtioFeature::RingPacked,
        VirtioFeature::InOrder,
        VirtioFeature::NetHashReport,
        VirtioFeature::NetRss,
    ];

    /// Its mask, `1 << bit` (the masks the virtio-net family negotiates with).
    fn mask(self) -> u64 {
        match self {
            VirtioFeature::Version1 => feature::VERSION_1,
            VirtioFeature::AccessPlatform => feature::ACCESS_PLATFORM,
            VirtioFeature::EventIdx => feature::EVENT_IDX,
            VirtioFeature::RingPacked => feature::RING_PACKED,
            VirtioFeature::InOrder => feature::IN_ORDER,
            VirtioFeature::NetMtu => feature::NET_MTU,
            VirtioFeature::NetMac => feature::NET_MAC,
            VirtioFeature::NetStatus => feature::NET_STATUS,
            VirtioFeature::NetCtrlVq => feature::NET_CTRL_VQ,
            VirtioFeature::NetCtrlRx => feature::NET_CTRL_RX,
            VirtioFeature::NetMq => feature::NET_MQ,
            VirtioFeature::NetHashReport => feature::NET_HASH_REPORT,
            VirtioFeature::NetRss => feature::NET_RSS,
        }
    }

    /// Its bit number, 0 to 63.
    pub fn bit(self) -> u32 {
        self.mask().trailing_zeros()
    }

    /// Its name in the virtio specification, e.g. `VIRTIO_F_ACCESS_PLATFORM`.
    pub fn name(self) -> &'static str {
        match self {
            VirtioFeature::Version1 => "VIRTIO_F_VERSION_1",
            VirtioFeature::AccessPlatform => "VIRTIO_F_ACCESS_PLATFORM",
            VirtioFeature::EventIdx => "VIRTIO_F_EVENT_IDX",
            VirtioFeature::RingPacked => "VIRTIO_F_RING_PACKED",
            VirtioFeature::InOrder => "VIRTIO_F_IN_ORDER",
            VirtioFeature::NetMtu => "VIRTIO_NET_F_MTU",
            VirtioFeature::NetMac => "VIRTIO_NET_F_MAC",
            VirtioFeature::NetStatus => "VIRTIO_NET_F_STATUS",
            VirtioFeature::NetCtrlVq => "VIRTIO_NET_F_CTRL_VQ",
            VirtioFeature::NetCtrlRx => "VIRTIO_NET_F_CTRL_RX",
            VirtioFeature::NetMq => "VIRTIO_NET_F_MQ",
            VirtioFeature::NetHashReport => "VIRTIO_NET_F_HASH_REPORT",
            VirtioFeature::NetRss => "VIRTIO_NET_F_RSS",
        }
    }

    /// What pollnic does with it, in words (what is lost without it).
    pub fn gives(self) -> &'static str {
        match self {
            VirtioFeature::Version1 => {
                "the modern virtio 1.x interface, the only one pollnic drives"
            }
            VirtioFeature::AccessPlatform => {
                "the device's DMA goes through the IOMMU, so it reaches only the buffers VFIO maps \
                 for it"
            }
            VirtioFeature::EventIdx => {
                "notifications suppressed by ring indices; without it, by flags, with more kicks"
            }
            VirtioFeature::RingPacked => {
                "packed virtqueues (one ring both sides write); without it split virtqueues"
            }
            VirtioFeature::InOrder => {
                "in-order completion (a sent batch freed from one used entry); without it each \
                 used entry is read"
            }
            VirtioFeature::NetMtu => "the device's MTU; without it pollnic stays at 1500",
            VirtioFeature::NetMac => {
                "the device's MAC address; without it pollnic makes up a locally administered \
                 one, and a port opened with promisc off, the default, is refused"
            }
            VirtioFeature::NetStatus => "the link status; without it the link reads as up",
            VirtioFeature::NetCtrlVq => "the control queue; without it no MQ, RSS or CTRL_RX",
            VirtioFeature::NetCtrlRx => {
                "the receive filter; without it the device cannot be told to drop frames for \
                 other addresses, so a port opened with promisc off, the default, is refused"
            }
            VirtioFeature::NetMq => "several queue pairs; without it one queue pair",
            VirtioFeature::NetHashReport => "the RSS hash of each received packet",
            VirtioFeature::NetRss => {
                "RSS steering with pollnic's key and table; without it one queue pair, or the \
                 device's own spreading"
            }
        }
    }
}

impl fmt::Display for VirtioFeature {
    /// Its specification name and bit: `VIRTIO_F_ACCESS_PLATFORM (bit 33)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (bit {})", self.name(), self.bit())
    }
}

/// A virtio device's feature bits 0 to 63 as the kernel negotiated them
/// (see the module's docs for what a bit at `0` means). Bits 64 and up,
/// which newer kernels also write, are checked and dropped: pollnic uses
/// none of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct VirtioFeatures(pub u64);

impl VirtioFeatures {
    /// Whether bit `f` is set.
    pub fn has(self, f: VirtioFeature) -> bool {
        self.0 & f.mask() != 0
    }

    /// `VIRTIO_F_VERSION_1` (bit 32): the modern interface.
    pub fn version_1(self) -> bool {
        self.has(VirtioFeature::Version1)
    }

    /// `VIRTIO_F_ACCESS_PLATFORM` (bit 33): DMA through the IOMMU.
    pub fn access_platform(self) -> bool {
        self.has(VirtioFeature::AccessPlatform)
    }

    /// The features `Device::open` requires of a port bound as `mode` that
    /// these lack, in the order it checks them: `VIRTIO_F_VERSION_1`
    /// always, `VIRTIO_F_ACCESS_PLATFORM` behind an IOMMU
    /// ([`BindMode::Vfio`]; the no-IOMMU routes give the device physical
    /// addresses, which is what a device without it takes, virtio 1.2 §6.1).
    pub fn missing_for(self, mode: BindMode) -> Vec<VirtioFeature> {
        let mut out = Vec::new();
        if !self.version_1() {
            out.push(VirtioFeature::Version1);
        }
        if mode == BindMode::Vfio && !self.access_platform() {
            out.push(VirtioFeature::AccessPlatform);
        }
        out
    }

    /// The features of [`VirtioFeature::OPTIONAL`] these lack.
    pub fn absent_optional(self) -> Vec<VirtioFeature> {
        VirtioFeature::OPTIONAL
            .into_iter()
            .filter(|&f| !self.has(f))
            .collect()
    }
}

/// Why a `features` text is not one the kernel writes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseVirtioFeaturesError {
    /// Not a whole number of 64-bit words (64 or 128 characters), or more
    /// than 512 characters.
    #[error("{chars} characters, where the kernel writes 64 or 128 (one per feature bit)")]
    Length {
        /// Characters before the final newline.
        chars: usize,
    },
    /// A character other than `0` or `1`.
    #[error("character {at} is {found:?}, where the kernel writes '0' or '1'")]
    Character {
        /// Its index, counted from 0 (= the bit it stands for).
        at: usize,
        /// What is there.
        found: char,
    },
}

impl FromStr for VirtioFeatures {
    type Err = ParseVirtioFeaturesError;

    /// Parses `features_show`'s text: `'0'`/`'1'` per bit, bit 0 first,
    /// one final newline allowed.
    fn from_str(text: &str) -> std::result::Result<Self, Self::Err> {
        let bits = text.strip_suffix('\n').unwrap_or(text);
        let chars = bits.chars().count();
        if chars == 0 || chars % 64 != 0 || chars > MAX_CHARS {
            return Err(ParseVirtioFeaturesError::Length { chars });
        }
        let mut value = 0u64;
        for (at, c) in bits.chars().enumerate() {
            match c {
                '0' => {}
                '1' if at < 64 => value |= 1 << at,
                '1' => {}
                found => return Err(ParseVirtioFeaturesError::Character { at, found }),
            }
        }
        Ok(VirtioFeatures(value))
    }
}

/// What `pollnic bind` says to do about a missing virtio feature.
pub(crate) fn fix_text(addr: PciAddress, missing: &[VirtioFeature]) -> String {
    let mut fixes = Vec::new();
    if missing.contains(&VirtioFeature::Version1) {
        fixes.push(
            "give the VM a modern virtio-net device (QEMU: `-device \
             virtio-net-pci,disable-legacy=on,...`; libvirt: a `virtio-non-transitional` model)"
                .to_owned(),
        );
    }
    if missing.contains(&VirtioFeature::AccessPlatform) {
        fixes.push(format!(
            "have the hypervisor put the device behind a virtual IOMMU (QEMU: `-device \
             virtio-net-pci,disable-legacy=on,iommu_platform=on,...` together with `-device \
             intel-iommu,intremap=on,caching-mode=on` or `-device virtio-iommu-pci`; libvirt: \
             `<driver iommu='on'/>` on the interface and an `<iommu>` device), or, on a VM \
             without an IOMMU, take the no-IOMMU route, which does not need it: `sudo pollnic \
             bind --no-iommu {addr}` (VFIO no-IOMMU mode: needs a kernel with \
             CONFIG_VFIO_NOIOMMU, taints it) or `sudo pollnic bind --driver uio_pci_generic \
             {addr}`, both giving the device physical addresses, so that it can reach all of \
             RAM (a fault in it or in the program can overwrite any memory); then run the \
             tools with --no-iommu"
        ));
    }
    fixes.join("; and ")
}
