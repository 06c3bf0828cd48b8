//! The driver's errors. Each message says what went wrong and what to run to
//! fix it; none leaves the device half-configured (the device is reset and
//! every mapping released before the error is returned).

use crate::pci::PciAddress;
use pollnic_hw::igb::{MAX_RING_SIZE, MIN_RING_SIZE};

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The underlying error of a failed VFIO or kernel call, kept as the
/// [`std::error::Error::source`] of an [`Error`].
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What can go wrong opening or running a device. Non-exhaustive: match
/// with a `_` arm. Each variant's message says what to run to fix it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// PCI sysfs: bad address, no such device, unsupported device, no IOMMU group...
    #[error(transparent)]
    Pci(#[from] crate::pci::Error),

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
    #[error("cannot open the VFIO container ({source}): load the modules with `modprobe vfio-pci` and run as root")]
    VfioUnavailable {
        /// The underlying error (vfio-ioctls' `VfioError`).
        #[source]
        source: Cause,
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
    #[error("{addr}: cannot set up MSI-X interrupts: {reason}; use busy-poll (--rx-mode poll), or check that the kernel remaps interrupts for VFIO (`dmesg | grep -i remap`; in a VM: intel-iommu,intremap=on)")]
    Interrupts {
        /// The device.
        addr: PciAddress,
        /// Why.
        reason: String,
    },

    /// A VFIO ioctl failed.
    #[error("{addr}: VFIO failed while {what}: {source}")]
    Vfio {
        /// The device.
        addr: PciAddress,
        /// The step.
        what: &'static str,
        /// The underlying error.
        #[source]
        source: Cause,
    },

    /// DMA memory: no hugepages, memlock too low.
    #[error(transparent)]
    Dma(#[from] pollnic_rings::DmaError),

    /// Ring construction (mempool too small for the ring).
    #[error(transparent)]
    Ring(#[from] pollnic_rings::rx::RingError),

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

    /// Other invalid configuration.
    #[error("invalid configuration: {0}")]
    Config(String),

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
        /// What is missing, from [`crate::family::Family::missing`].
        missing: &'static str,
    },

    /// Link did not come up.
    #[error("{addr}: link did not come up within {waited_ms} ms: check the cable and the link partner (`pollnic status` shows link state); raise the wait with --link-timeout-ms")]
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

impl From<crate::pci::ParseAddressError> for Error {
    fn from(e: crate::pci::ParseAddressError) -> Self {
        Error::Pci(e.into())
    }
}

/// A [`PciAddress`] converts into itself without failing.
impl From<std::convert::Infallible> for Error {
    fn from(e: std::convert::Infallible) -> Self {
        match e {}
    }
}
