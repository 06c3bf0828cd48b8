//! Why MSI-X could not be enabled: [`MsixError`], public as
//! `pollnic::irq::MsixError` (its one path). A file of its own, importing
//! nothing of the crate, so that the errors, the receive modes and the
//! register-level traits can all name it without importing each other.

/// Why MSI-X could not be enabled, carried by [`crate::Error::Interrupts`]
/// (and returned by [`crate::lowlevel::io::Interrupts::enable_msix`] under
/// it). Non-exhaustive: match with a `_` arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MsixError {
    /// The device offers fewer vectors than the queues need.
    #[error("the device offers {available} MSI-X vectors, {needed} are needed (one per RX queue)")]
    TooFewVectors {
        /// Vectors the device offers (`VFIO_DEVICE_GET_IRQ_INFO`).
        available: u32,
        /// Vectors asked for.
        needed: u16,
    },
    /// An eventfd for a vector could not be created.
    #[error("cannot create an eventfd: {0}")]
    EventFd(#[source] std::io::Error),
    /// `VFIO_DEVICE_SET_IRQS` refused to route the vectors.
    #[error("VFIO_DEVICE_SET_IRQS (MSI-X, {vectors} vectors) failed: {cause}")]
    SetIrqs {
        /// Vectors asked for.
        vectors: u16,
        /// vfio-ioctls' error.
        cause: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// The device underneath has no MSI-X delivery
    /// ([`crate::lowlevel::io::DeviceIo::interrupts`] is `None`, or a
    /// software model without it).
    #[error("the device underneath offers no MSI-X delivery")]
    Unsupported,
    /// The port is on `uio_pci_generic`, which delivers only the legacy
    /// INTx interrupt, and pollnic does not take INTx.
    #[error(
        "a port on uio_pci_generic has no MSI-X (the uio driver delivers the legacy INTx \
         interrupt only, which pollnic does not use): open it with RxMode::BusyPoll"
    )]
    IntxOnly,
    /// A virtio device did not take the MSI-X vector for a receive
    /// virtqueue when the queue was set up at open (it read back
    /// `VIRTIO_MSI_NO_VECTOR`, virtio 1.2 §4.1.5.1.2: its MSI-X table is too
    /// small). Vectors can be set only before a queue is enabled
    /// (§4.1.4.3.2), so interrupt mode is not available on this port.
    #[error(
        "the virtio device did not take MSI-X vector {vector} for virtqueue {queue} when the \
         queue was set up (it answered VIRTIO_MSI_NO_VECTOR: its MSI-X table is too small for \
         one vector per queue pair)"
    )]
    QueueVectorRefused {
        /// The virtqueue (2 × queue pair for RX).
        queue: u16,
        /// The vector written.
        vector: u16,
    },
    /// The family's back end does not program MSI-X yet.
    #[error("the {family} back end has no MSI-X support in pollnic yet")]
    NoFamilySupport {
        /// The family (`igb`, `ixgbe`).
        family: &'static str,
    },
}
