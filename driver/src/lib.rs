//! pollnic: a userspace poll-mode driver for Intel igb (82576, I350) and
//! ixgbe (82599/X520) NICs and virtio-net (modern virtio 1.x, in a VM with a
//! virtual IOMMU) over VFIO, with zero-copy receive and transmit from
//! hugepage mempools and one RSS queue per pinned core.
//!
//! The library is the driver only: device bring-up ([`Device`],
//! [`DeviceConfig`]), queues and bursts ([`Queue`]), errors ([`Error`], and
//! the rest of [`error`]), hardware and software counters ([`Stats`],
//! [`stats`]), RSS ([`rss`]), DMA memory ([`dma`]), receive modes ([`irq`]),
//! the igb, ixgbe and virtio-net families behind one interface kept inside the library
//! (what the PCI look-ups show of one: [`pci::FamilyInfo`]), PCI sysfs
//! ([`pci`]: addresses, IDs, link state, bind/unbind), and VFIO, MMIO, DMA
//! mapping and the clock. The tools (the `pollnic` command, the examples)
//! live in their own packages. The 82599 back end is tested against a
//! software 82599 (the repository's `pollnic-model` package) and has not yet
//! run on hardware.
//!
//! Errors come in two layers, because the two jobs fail apart.
//! [`pci::Error`] is what inspecting PCI sysfs and binding return: the
//! [`pci`] functions ([`pci::list_nics`], [`pci::bind_all`],
//! [`pci::unbind_vfio`]...), and so `pollnic bind`, which work on a port
//! nobody has opened. [`Error`] is what opening and running a port return;
//! a sysfs failure met while opening arrives wrapped as [`Error::Pci`], so a
//! program that only opens ports matches one type.
//!
//! Register-level access (the traits a device model implements, and the
//! register self-check behind `pollnic doctor --selfcheck`) is kept apart
//! in [`lowlevel`], for device models, test rigs and diagnostics;
//! applications never need it.
//!
//! Open two ports together, receive a burst on one, send it out of the
//! other with no copy, and read a counter (the ports must be bound to
//! vfio-pci, `pollnic bind`, with 2 MiB hugepages reserved):
//!
//! ```no_run
//! use pollnic::{Counter, Device, DeviceConfig};
//!
//! let cfg = DeviceConfig::default().with_rx_ring_size(1024);
//! // One VFIO container for both: buffers cross between the ports.
//! let mut ports = Device::open_many(["0000:03:00.0", "0000:03:00.1"], &cfg)?;
//! let (a, b) = ports.split_at_mut(1);
//! let (rx, tx) = (a[0].queue(0), b[0].queue(0));
//! let mut burst = Vec::with_capacity(32);
//! rx.rx_burst(&mut burst, 32); // Packets borrow the DMA buffers the NIC wrote
//! tx.tx_burst(&mut burst); // the same buffers go out of port b
//! // While queues run on pinned threads (`run_pinned`), read counters with `stats_reader()`.
//! let stats = ports[1].stats();
//! println!("tx_packets {:?}", stats.counter(Counter::TxPackets)); // None where not counted
//! # Ok::<(), pollnic::Error>(())
//! ```
//!
//! More: `docs/library.md` in the repository (queues on pinned cores with
//! [`run_pinned`], RSS, counters, buffers).
//!
//! `unsafe` is confined to the private `sys` module tree (MMIO, VFIO, DMA
//! mapping, the clock, the read-only PCI link probe); the crate root denies
//! it everywhere else.

#![deny(unsafe_code)]
#![warn(missing_docs, unnameable_types)]

/// The crate README's example, compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctest;

mod caps;
pub mod config;
mod counters;
mod cpuwait;
mod device;
pub mod error;
mod family;
pub mod irq;
pub mod lowlevel;
mod msix;
pub mod pci;
mod queue;
mod refresh;
mod removal;
mod runner;
#[cfg(feature = "smoltcp")]
pub mod smoltcp;
pub mod stats;
mod sys;
#[cfg(feature = "test-family")]
pub mod test_family;
mod wait;

pub use caps::{Capabilities, RssCapabilities, TxCapabilities};
pub use config::{DataPathChoice, DeviceConfig, DmaAddressing};
pub use device::{Device, DeviceIdent};
pub use error::{ConfigError, Error, Result};
pub use family::virtio::problem::VirtioError;
pub use family::{LinkStatus, NicFamily};
pub use irq::{Moderation, RxMode};
pub use pollnic_rings::{DataPath, Mempool, Packet, VirtqLayout};

/// Checksum and VLAN offloads: the RX status a [`Packet`] carries
/// ([`Packet::rx_checksum`], [`Packet::vlan`]; turned on by
/// [`DeviceConfig::rx_checksum`] and [`DeviceConfig::vlan_strip`]) and the
/// per-frame TX request ([`Queue::tx_burst_offload`]). See
/// `docs/library.md` ("Offloads").
pub mod offload {
    pub use pollnic_hw::offload::{
        checksum_in_software, ChecksumStatus, RxChecksum, TxOffload, TxRefusal, TSO_MAX_MSS,
        TSO_MAX_PAYLEN,
    };
}
pub use queue::{Queue, VirtqPairStats};
pub use runner::run_pinned;
pub use stats::{Counter, Stats};
pub use sys::clock;

/// RSS: which packet types are hashed ([`rss::HashTypes`]), the 40-byte
/// key, the redirection table ([`rss::Reta`]) and a software Toeplitz
/// hasher ([`rss::Toeplitz`], [`Device::rss_hasher`]) to predict a flow's
/// queue. The math is `pollnic_hw::rss`'s.
pub mod rss {
    pub use crate::config::HashTypes;
    pub use pollnic_hw::rss::{
        queue_for, FlowKey, Reta, Toeplitz, KEY_LEN, L4, MICROSOFT_KEY, RETA_LEN, SYMMETRIC_KEY,
    };
}

/// DMA memory: hugepage regions ([`dma::DmaRegion`]) mapped through a
/// [`dma::DmaMapper`] (the VFIO container), their page size, and the list of
/// what a device can reach ([`Device::dma_mappings`]).
pub mod dma {
    pub use crate::sys::dmamap::{DmaMapping, DmaPurpose};
    pub use pollnic_rings::{DmaError, DmaMapper, DmaRegion, PageSize};
}
