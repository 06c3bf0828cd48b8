//! pollnic: a userspace poll-mode driver for Intel igb (82576, I350) and
//! ixgbe (82599/X520) NICs over VFIO, with zero-copy receive and transmit
//! from hugepage mempools and one RSS queue per pinned core.
//!
//! The library is the driver only: device bring-up ([`Device`],
//! [`DeviceConfig`]), queues and bursts ([`Queue`]), errors ([`Error`]),
//! hardware and software counters ([`Stats`], [`DeviceCounters`]), the igb
//! and ixgbe families behind one sealed [`Family`] interface, PCI sysfs
//! ([`pci`]: addresses, IDs, bind/unbind and its guard), and VFIO, MMIO, DMA
//! mapping and the clock. The tools (the `pollnic` command, the examples)
//! live in their own packages. The 82599 back end is tested against a
//! software 82599 (feature `model`) and has not yet run on hardware.
//!
//! ```no_run
//! let mut dev = pollnic::Device::open("0000:00:08.0", &pollnic::DeviceConfig::default())?;
//! let mut burst = Vec::with_capacity(32);
//! dev.rx_burst(&mut burst, 32);
//! dev.tx_burst(&mut burst); // forward them back out, zero copy
//! # Ok::<(), pollnic::Error>(())
//! ```
//!
//! `unsafe` is confined to the private `sys` module tree (MMIO, VFIO, DMA
//! mapping, the clock, the read-only PCI link probe, the software models'
//! IOMMU); the crate root denies it everywhere else.

#![deny(unsafe_code)]

mod config;
mod counters;
mod device;
mod error;
mod family;
pub mod io;
#[cfg(feature = "model")]
pub mod model;
pub mod pci;
mod queue;
mod refresh;
mod runner;
mod stats;
mod sys;
mod wait;

pub use config::{usable_ring_size, DeviceConfig};
pub use counters::{DeviceCounters, QueueCounters, QueueSnapshot};
pub use device::{Device, DeviceIdent};
pub use error::{Error, Result};
pub use family::{Family, HashTypes, LinkStatus};
pub use pollnic_rings::{Mempool, Packet, RxStats, TxStats};
pub use queue::Queue;
pub use runner::{check_cores, parse_cores, pin_current_thread, run_pinned};
pub use stats::Stats;
pub use sys::clock;
pub use sys::dmamap::{DmaMapping, DmaPurpose};
