//! The driver's errors. Each message says what went wrong and what to run to
//! fix it; none leaves the device half-configured (the device is reset and
//! every mapping released before the error is returned).

//!
//! Each type an [`Error`] variant carries has one public path:
//! [`crate::irq::MsixError`], [`crate::dma::DmaError`], [`crate::ConfigError`],
//! [`crate::VirtioError`], [`crate::pci::Error`], and here the rings'
//! [`PacketTooLong`] and [`RingError`].

use crate::pci::address::PciAddress;
use pollnic_hw::igb::{MAX_RING_SIZE, MIN_RING_SIZE};
pub use pollnic_rings::{PacketTooLong, RingError};

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The underlying error of a failed VFIO or kernel call, kept as the
/// [`std::error::Error::source`] of an [`Error`].
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What can go wrong opening or running a device. Non-exhaustive: match
/// with a `_` arm. Each variant carries the values it names and its message
/// says what to change (in the library's terms: `DeviceConfig` fields,
/// `RxMode`) or what to run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The [`crate::DeviceConfig`] (or a table given later) cannot be right
    /// for any device: [`ConfigError`], checked before a device is touched.
    #[error(transparent)]
    Config(#[from] ConfigError),

    /// PCI sysfs: bad address, no such device, unsupported device, no IOMMU group...
    #[error(transparent)]
    Pci(#[from] crate::pci::error::Error),

    /// The device is bound to a kernel driver (or none) instead of vfio-pci.
    #[error(
        "{addr} is {}, not vfio-pci: run `pollnic bind {addr}` first \
         (`pollnic unbind {addr}` gives it back afterwards)",
        match driver { Some(d) => format!("bound to the kernel driver {d}"), None => "bound to no driver".to_string() }
    )]
    NotBoundToVfio {
        /// The device.
        addr: PciAddress,
        /// Its current driver.
        driver: Option<String>,
    },

    /// The port has no IOMMU between it and memory (bound to
    /// `uio_pci_generic`, or to vfio-pci in a VFIO no-IOMMU group), and
    /// physical-address DMA was not asked for.
    #[error(
        "{addr} is on {driver}, with no IOMMU: pollnic would have to give the NIC physical \
         addresses, which lets it (or a bug) DMA anywhere in RAM. Ask for that explicitly with \
         `--no-iommu` (library: DeviceConfig::with_unsafe_no_iommu), or turn an IOMMU on and \
         `pollnic bind {addr}` to vfio-pci (docs/no-iommu.md)"
    )]
    NoIommuNotAsked {
        /// The device.
        addr: PciAddress,
        /// The driver it is bound to (`uio_pci_generic`, or `vfio-pci (no-IOMMU)`).
        driver: String,
    },

    /// Physical-address DMA was asked for a port that sits behind an
    /// IOMMU: pollnic refuses it there, because the IOMMU mode gives the
    /// same packets and keeps the machine's memory out of the device's reach.
    #[error(
        "{addr} sits behind an IOMMU ({why}): open it without `--no-iommu` \
         (DmaAddressing::Iommu, the default){}",
        if *bound_vfio { String::new() } else { format!(", after `pollnic bind {addr}` to vfio-pci") }
    )]
    NoIommuNotNeeded {
        /// The device.
        addr: PciAddress,
        /// What shows the IOMMU (its group and the group's type).
        why: String,
        /// Whether it is already on vfio-pci.
        bound_vfio: bool,
    },

    /// A port on `uio_pci_generic` could not be opened: a file of its
    /// sysfs directory or its `/dev/uio<N>`.
    #[error("{addr}: cannot open {what} (run as root; is the port bound with `pollnic bind --driver uio_pci_generic {addr}`?)")]
    Uio {
        /// The device.
        addr: PciAddress,
        /// The file.
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },

    /// Something a port on `uio_pci_generic` needs is reserved to
    /// `CAP_SYS_ADMIN`.
    #[error(
        "{addr}: {what} needs CAP_SYS_ADMIN: run as root (no-IOMMU mode cannot run without it)"
    )]
    NeedsCapSysAdmin {
        /// The device.
        addr: PciAddress,
        /// What needs the capability.
        what: &'static str,
    },

    /// Other devices in the IOMMU group are bound to host drivers.
    #[error(
        "{addr}: IOMMU group {group} is not viable for VFIO{}: every device in the group must be \
         bound to vfio-pci or to no driver (see /sys/kernel/iommu_groups/{group}/devices; \
         `pollnic bind <addr>` for each)",
        if others.is_empty() { String::new() } else { format!("; still bound elsewhere: {}", others.join(", ")) }
    )]
    GroupNotViable {
        /// The device.
        addr: PciAddress,
        /// Its IOMMU group.
        group: u32,
        /// "address (driver)" of each blocking device.
        others: Vec<String>,
    },

    /// `/dev/vfio/vfio` could not be opened.
    #[error("cannot open the VFIO container ({cause}): load the modules with `modprobe vfio-pci` and run as root")]
    VfioUnavailable {
        /// The underlying error (vfio-ioctls' `VfioError`).
        cause: Cause,
    },

    /// The device's VFIO group node could not be opened for want of permission.
    #[error(
        "{addr}: opening {node}: permission denied: run as root, or hand the group to this \
         user with `sudo pollnic bind --user $(id -un) {addr}` (`pollnic doctor` checks the rest)"
    )]
    GroupPermission {
        /// The device.
        addr: PciAddress,
        /// The node, `/dev/vfio/<group>`.
        node: String,
        /// The `open(2)` error (EACCES).
        #[source]
        source: std::io::Error,
    },

    /// Ports opened together must share one VFIO container, and ports opened
    /// apart never do: a buffer of one container's IO address space means
    /// nothing to a device in another.
    #[error(
        "{addr} and {other} are in different VFIO containers: open them together with \
         `Device::open_many` so that packets can cross between them"
    )]
    DifferentContainers {
        /// One port.
        addr: PciAddress,
        /// The other.
        other: PciAddress,
    },

    /// Another process holds the device's VFIO group.
    #[error("{addr}: the device's VFIO group is in use by another process (is another pollnic or DPDK running? `fuser /dev/vfio/*`)")]
    DeviceBusy {
        /// The device.
        addr: PciAddress,
    },

    /// MSI-X could not be set up for an interrupt or adaptive RX mode.
    #[error("{addr}: cannot set up MSI-X interrupts: {cause}; use RxMode::BusyPoll, or check that the kernel remaps interrupts for VFIO (`dmesg | grep -i remap`; in a VM: intel-iommu,intremap=on)")]
    Interrupts {
        /// The device.
        addr: PciAddress,
        /// Why.
        cause: crate::msix::MsixError,
    },

    /// A VFIO ioctl failed.
    #[error("{addr}: VFIO failed while {what}: {cause}")]
    Vfio {
        /// The device.
        addr: PciAddress,
        /// The step.
        what: &'static str,
        /// The underlying error.
        cause: Cause,
    },

    /// DMA memory: no hugepages, memlock too low.
    #[error(transparent)]
    Dma(#[from] pollnic_rings::DmaError),

    /// Ring construction (mempool too small for the ring).
    #[error(transparent)]
    Ring(#[from] pollnic_rings::rx::RingError),

    /// More queues asked for than this part has.
    #[error("DeviceConfig::queues {queues} requested but {device} has {max}")]
    TooManyQueues {
        /// Queues asked for.
        queues: u16,
        /// The part's RX/TX queue pairs.
        max: u16,
        /// The part's name.
        device: String,
    },

    /// An MTU above what this family's back end supports.
    #[error("DeviceConfig::mtu {mtu} is above the {max} bytes the {family} back end supports ({device})")]
    MtuAboveFamily {
        /// The MTU asked for, bytes.
        mtu: u32,
        /// The family's largest, bytes.
        max: u32,
        /// The family (`igb`, `ixgbe`).
        family: &'static str,
        /// The part's name.
        device: String,
    },

    /// An interrupt throttle ([`crate::DeviceConfig::moderation`],
    /// [`crate::Device::set_rx_usecs`], [`crate::Queue::set_rx_usecs`])
    /// above what the family's EITR holds.
    #[error("rx_usecs {usecs} is above the {max} µs the {family} interrupt throttle (EITR) holds")]
    RxUsecsTooLarge {
        /// Asked for, µs.
        usecs: u32,
        /// The family's largest, µs (igb 8191, 82599 1022).
        max: u32,
        /// The family (`igb`, `ixgbe`).
        family: &'static str,
    },

    /// A ring size below what this family accepts.
    #[error(
        "DeviceConfig::{which}_ring_size {size} is below the {min} descriptors {device} \
         ({family}) accepts: use a power of two from {min} to {MAX_RING_SIZE}"
    )]
    RingBelowFamilyMin {
        /// "rx" or "tx".
        which: &'static str,
        /// Descriptors asked for.
        size: u32,
        /// The family's smallest.
        min: u32,
        /// The family (`igb`, `ixgbe`).
        family: &'static str,
        /// The part's name.
        device: String,
    },

    /// [`crate::Device::open_many`] was given no port.
    #[error("Device::open_many: no port given")]
    NoPorts,

    /// [`crate::Device::open_many`] was given one port twice.
    #[error("Device::open_many: {addr} given twice")]
    PortGivenTwice {
        /// The port.
        addr: PciAddress,
    },

    /// A thread the device needs could not be started.
    #[error("cannot start the {what} thread: {cause}")]
    Thread {
        /// Which (`counter refresh`, `queue 3`).
        what: String,
        /// The `std::thread::Builder::spawn` error.
        cause: std::io::Error,
    },

    /// A queue's RX mode needs MSI-X, which its device has not enabled.
    #[error(
        "queue {queue}: RxMode::{mode:?} needs MSI-X, which the device has not enabled: \
         use Device::set_rx_mode or DeviceConfig::with_rx_mode"
    )]
    RxModeNeedsMsix {
        /// The queue.
        queue: u16,
        /// The mode asked for.
        mode: crate::RxMode,
    },

    /// A queue's interrupt throttle was set with MSI-X off.
    #[error(
        "queue {queue}: rx_usecs needs MSI-X, which the device has not enabled \
         (an interrupt or adaptive RxMode enables it)"
    )]
    RxUsecsNeedsMsix {
        /// The queue.
        queue: u16,
    },

    /// [`crate::run_pinned`] was given no core.
    #[error("run_pinned: no cores given")]
    NoCores,

    /// [`crate::run_pinned`] was given a core this process may not run on.
    #[error(
        "core {core} is not available to this process (allowed: {allowed:?}; see `taskset -p $$`, \
         cpusets, isolcpus)"
    )]
    CoreUnavailable {
        /// The first core not allowed.
        core: usize,
        /// The cores this process may run on.
        allowed: Vec<usize>,
    },

    /// A queue's thread under [`crate::run_pinned`] panicked.
    #[error("the thread of queue {queue} panicked")]
    QueuePanicked {
        /// The queue.
        queue: u16,
    },

    /// The device did not come out of reset or enable a queue in time.
    #[error("{addr}: {what} did not complete within {waited_ms} ms; the device may be wedged: try `pollnic unbind {addr}` and `pollnic bind {addr}` (which resets it)")]
    Timeout {
        /// The device.
        addr: PciAddress,
        /// The step.
        what: &'static str,
        /// How long we waited.
        waited_ms: u64,
    },

    /// The part is one the family recognises but whose board-level setup
    /// (an external PHY, a shared I2C bus) the back end does not implement;
    /// it is refused rather than brought up as another board would be.
    #[error(
        "{addr}: {name} needs {missing}, which pollnic does not implement yet; refusing to \
         drive it (`pollnic unbind {addr}` gives it back to its kernel driver)"
    )]
    NotImplemented {
        /// The device.
        addr: PciAddress,
        /// Its name.
        name: String,
        /// What is missing, from [`crate::pci::FamilyInfo::missing`].
        missing: &'static str,
    },

    /// A virtio-net device pollnic refuses to drive: its capabilities,
    /// queues or RSS limits, one typed [`crate::VirtioError`] per check
    /// (`docs/nics/virtio-net.md` says what to change in QEMU's options).
    #[error("{addr}: the virtio-net device cannot be driven: {problem}")]
    Virtio {
        /// The device.
        addr: PciAddress,
        /// What is wrong, with the values found.
        problem: crate::VirtioError,
    },

    /// A virtio device does not offer a feature pollnic requires
    /// (`VIRTIO_F_VERSION_1`, `VIRTIO_F_ACCESS_PLATFORM`); the device is
    /// marked FAILED.
    #[error("{addr}: the virtio device does not offer {feature}: {why}")]
    VirtioFeatureMissing {
        /// The device.
        addr: PciAddress,
        /// The feature's name in the virtio specification.
        feature: &'static str,
        /// Why pollnic needs it and how to get it.
        why: &'static str,
    },

    /// A virtio device cleared FEATURES_OK after the driver wrote its
    /// features (virtio 1.x §3.1.1 step 6): it does not accept them.
    #[error(
        "{addr}: the virtio device refused the features pollnic asked for ({features:#x}: \
         FEATURES_OK did not stay set); check the device's QEMU options, or give the port back \
         with `pollnic unbind {addr}`"
    )]
    VirtioFeaturesRefused {
        /// The device.
        addr: PciAddress,
        /// The feature bits written.
        features: u64,
    },

    /// [`crate::DeviceConfig::mtu`] is above what a virtio-net device takes:
    /// the MTU it reports (`VIRTIO_NET_F_MTU`, virtio 1.2 §5.1.4.1: a driver
    /// must not send longer packets), or 1500 bytes when it reports none.
    #[error(
        "{addr}: DeviceConfig::mtu {mtu} is above what this virtio-net device takes ({}): use \
         an MTU of at most {} (loopback, pktgen, capture: --mtu), or give the device a larger \
         MTU (QEMU: host_mtu=9000 on the virtio-net-pci device)",
        match device_mtu {
            Some(m) => format!("it reports an MTU of {m} bytes"),
            None => "it does not report an MTU (no VIRTIO_NET_F_MTU), so pollnic stays at 1500 \
                     bytes".to_string(),
        },
        device_mtu.map_or(1500, u32::from)
    )]
    VirtioMtu {
        /// The device.
        addr: PciAddress,
        /// The MTU asked for, bytes.
        mtu: u32,
        /// The device's `VIRTIO_NET_F_MTU` value, bytes; `None` when it
        /// reports none.
        device_mtu: Option<u16>,
    },

    /// A [`crate::DeviceConfig`] field asks for something this device or
    /// its family cannot do (for example VLAN stripping or PAUSE frames on
    /// virtio-net): the port is refused rather than opened without it.
    #[error("{addr}: {family} cannot honour DeviceConfig::{field}: {why}")]
    ConfigUnsupported {
        /// The device.
        addr: PciAddress,
        /// The family (`virtio-net`, ...).
        family: &'static str,
        /// The field, as named in `DeviceConfig`.
        field: &'static str,
        /// Why, and what to set instead.
        why: &'static str,
    },

    /// A queue stopped because its device broke the virtqueue protocol (a
    /// used entry with an id no chain of the queue's has in flight, or a
    /// used index that moved past every chain in flight): its bursts return
    /// 0 until the port is closed and opened again ([`crate::Queue::check`],
    /// [`crate::Device::check_device`]). The frames and buffers are safe:
    /// every buffer goes back to its pool when the port closes.
    #[error(
        "queue {queue}: the device broke the virtqueue protocol ({device_errors} bad used-ring \
         entries or indices), so its {} virtqueue{} stopped; nothing more is sent or received on \
         it until the port is closed and opened again",
        match (rx, tx) { (true, true) => "receive and transmit", (true, false) => "receive", _ => "transmit" },
        if *rx && *tx { "s" } else { "" }
    )]
    QueueStopped {
        /// The queue (pair) index.
        queue: u16,
        /// Its receive virtqueue stopped.
        rx: bool,
        /// Its transmit virtqueue stopped.
        tx: bool,
        /// Protocol breaks counted on the pair (the first stops a queue).
        device_errors: u64,
    },

    /// A virtio device set DEVICE_NEEDS_RESET (virtio 1.x §2.1.1): it hit
    /// an error it cannot recover from without a reset.
    #[error(
        "{addr}: the virtio device reports DEVICE_NEEDS_RESET (status {status:#04x}); close and \
         open the port again to reset it"
    )]
    VirtioNeedsReset {
        /// The device.
        addr: PciAddress,
        /// `device_status` as read.
        status: u8,
    },

    /// A virtio-net control command (virtio 1.x §5.1.6.5: the RSS
    /// configuration, the queue pair count) failed: the device answered
    /// `VIRTIO_NET_ERR`, did not answer in time, or broke the control
    /// queue's protocol.
    #[error(
        "{addr}: virtio-net control command failed: {cause}; check the device's QEMU options \
         (`mq=on`, `rss=on` and a multi-queue netdev), or open it with DeviceConfig::queues 1"
    )]
    VirtioCtrl {
        /// The device.
        addr: PciAddress,
        /// What went wrong.
        cause: pollnic_rings::CtrlError,
    },

    /// Link did not come up.
    #[error("{addr}: link did not come up within {waited_ms} ms: check the cable and the link partner (`pollnic status` shows link state); raise the wait with DeviceConfig::link_timeout")]
    LinkDown {
        /// The device.
        addr: PciAddress,
        /// How long we waited.
        waited_ms: u64,
    },

    /// The kernel asked for the device back: an administrator unbound it
    /// from vfio-pci (`echo <addr> > /sys/bus/pci/drivers/vfio-pci/unbind`,
    /// `pollnic unbind`) or removed it (`echo 1 >
    /// /sys/bus/pci/devices/<addr>/remove`), and VFIO relayed the request
    /// (`VFIO_PCI_REQ_IRQ_INDEX`). [`crate::Device::check_removed`] returns
    /// it; the device must then be dropped, which stops its DMA, returns its
    /// buffers and closes it, so that the unbind or remove can finish.
    #[error(
        "{addr}: the kernel asked for the device back (it is being unbound from vfio-pci or \
         removed), so pollnic stopped using it and closed it. To use it again: \
         `pollnic bind {addr}`; after a remove, first `echo 1 > /sys/bus/pci/rescan` \
         (`pollnic status` shows where it is)"
    )]
    DeviceRemoved {
        /// The device.
        addr: PciAddress,
    },
}

impl From<crate::pci::address::ParseAddressError> for Error {
    fn from(e: crate::pci::address::ParseAddressError) -> Self {
        Error::Pci(e.into())
    }
}

/// A [`PciAddress`] converts into itself without failing.
impl From<std::convert::Infallible> for Error {
    fn from(e: std::convert::Infallible) -> Self {
        match e {}
    }
}

/// A name that does not parse as one of a fixed set ([`crate::RxMode`],
/// [`crate::DataPathChoice`] from `str`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} `{given}` (expected {expected})")]
pub struct ParseNameError {
    what: &'static str,
    given: String,
    expected: &'static str,
}

impl ParseNameError {
    pub(crate) fn new(what: &'static str, given: &str, expected: &'static str) -> Self {
        ParseNameError {
            what,
            given: given.to_string(),
            expected,
        }
    }
    /// What was parsed (`RX mode`, `data path`).
    pub fn what(&self) -> &'static str {
        self.what
    }
    /// The text given.
    pub fn given(&self) -> &str {
        &self.given
    }
    /// The names accepted, as a phrase (`poll, irq or adaptive`).
    pub fn expected(&self) -> &'static str {
        self.expected
    }
}

/// A [`crate::DeviceConfig`] that no device can take, found by
/// [`crate::DeviceConfig::validate`] before any device is touched (so no
/// PCI address: it is wrong wherever it goes), or a redirection table given
/// to [`crate::Device::set_reta`] that names a queue the device does not
/// have. Carried by [`Error::Config`]. Non-exhaustive: match with a `_` arm.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A ring size pollnic cannot use: the 82576 takes multiples of
    /// 8 descriptors up to 4096 (82576 datasheet, RDLEN/TDLEN registers), and
    /// pollnic's rings index with a mask, so the size must be a power of two.
    #[error(
        "invalid {which} ring size {size}: must be a power of two between \
         {MIN_RING_SIZE} and {MAX_RING_SIZE} descriptors (e.g. 512)"
    )]
    InvalidRingSize {
        /// "rx" or "tx".
        which: &'static str,
        /// What was asked.
        size: u32,
    },

    /// [`crate::DeviceConfig::data_path`] is [`crate::DataPathChoice::Vector`]
    /// on a CPU without the vector loops' instructions.
    #[error(
        "DeviceConfig::data_path: the vector data path needs an x86-64 CPU (SSE2), which this \
         is not: use DataPathChoice::Auto or DataPathChoice::Scalar"
    )]
    VectorUnsupported,

    /// [`crate::DeviceConfig::mempool_size`] cannot fill both rings, the
    /// queue's buffer cache and one burst.
    #[error(
        "DeviceConfig::mempool_size {size} is too small: each queue needs at least {needed} \
         buffers (rx ring {rx_ring} + tx ring {tx_ring} + the queue's buffer cache {cache} + \
         one burst of 32)"
    )]
    MempoolTooSmall {
        /// Buffers asked for.
        size: u32,
        /// Buffers needed.
        needed: u32,
        /// RX ring size, descriptors.
        rx_ring: u32,
        /// TX ring size, descriptors.
        tx_ring: u32,
        /// The RX ring's buffer cache, buffers ([`pollnic_rings::rx_cache_size`]).
        cache: usize,
    },

    /// [`crate::DeviceConfig::buf_size`] is not a multiple of 1024 in
    /// 1024..=16384 bytes (SRRCTL.BSIZEPACKET is in 1 KiB units).
    #[error(
        "DeviceConfig::buf_size {size} must be a multiple of 1024 between 1024 and 16384 bytes"
    )]
    InvalidBufSize {
        /// Bytes asked for.
        size: usize,
    },

    /// [`crate::DeviceConfig::mtu`] is outside what pollnic takes.
    #[error(
        "MTU {mtu} (DeviceConfig::mtu) is out of range: pollnic takes an MTU of {} to {} bytes \
         (frames of {} to {} bytes with the FCS, 4 more per VLAN tag)",
        pollnic_hw::mtu::MIN_MTU,
        pollnic_hw::mtu::MAX_MTU,
        pollnic_hw::mtu::max_frame(pollnic_hw::mtu::MIN_MTU),
        pollnic_hw::mtu::max_frame(pollnic_hw::mtu::MAX_MTU)
    )]
    InvalidMtu {
        /// The MTU asked for, bytes.
        mtu: u32,
    },

    /// [`crate::DeviceConfig::queues`] is 0 or above the most any family has.
    #[error("DeviceConfig::queues {queues}: RSS spreads over 1 to {max} queues (I350: 8)")]
    InvalidQueueCount {
        /// Queues asked for.
        queues: u16,
        /// The most pollnic drives on any part.
        max: u16,
    },

    /// A redirection table ([`crate::DeviceConfig::reta`],
    /// [`crate::Device::set_reta`]) names a queue that does not exist.
    #[error("the redirection table names queue {queue} but the device has {queues} queues")]
    RetaQueueOutOfRange {
        /// The first queue named that does not exist.
        queue: u8,
        /// Queues configured.
        queues: u16,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message that prints its cause does not also return it as its
    /// `source()`: a `{:#}`-style chain (anyhow, the CLI's) would print the
    /// cause twice. Every cause-carrying variant keeps it in its message
    /// (users print errors with `{}`) and none of them is a source.
    #[test]
    fn no_error_prints_its_cause_and_returns_it_as_the_source() {
        let io = || std::io::Error::other("the cause");
        let addr: PciAddress = "0000:00:08.0".parse().unwrap();
        let all: Vec<Box<dyn std::error::Error>> = vec![
            Box::new(Error::Thread {
                what: "queue 0".into(),
                cause: io(),
            }),
            Box::new(Error::Vfio {
                addr,
                what: "mapping",
                cause: Box::new(io()),
            }),
            Box::new(Error::VfioUnavailable {
                cause: Box::new(io()),
            }),
            Box::new(pollnic_rings::DmaError::Mmap {
                len: 4096,
                cause: io(),
            }),
            Box::new(crate::msix::MsixError::SetIrqs {
                vectors: 2,
                cause: Box::new(io()),
            }),
        ];
        for e in all {
            let msg = e.to_string();
            assert!(msg.contains("the cause"), "{msg}");
            assert!(e.source().is_none(), "{msg}: also returned as its source");
        }
    }
}
