//! pollnic: a userspace poll-mode driver for Intel igb (82576, I350) NICs over
//! VFIO, with zero-copy receive from hugepage mempools.
//!
//! ```no_run
//! let mut dev = pollnic::Device::open("0000:00:08.0", &pollnic::DeviceConfig::default())?;
//! let mut burst = Vec::with_capacity(32);
//! dev.rx_burst(&mut burst, 32);
//! dev.tx_burst(&mut burst); // forward them back out, zero copy
//! # Ok::<(), pollnic::Error>(())
//! ```
//!
//! `unsafe` is confined to [`mmio`] (BAR access), [`vfio`] (DMA mapping),
//! [`clock`] (`clock_gettime`) and the read-only PCI link probe in `pci`.

pub mod clock;
pub mod config;
pub mod counters;
pub mod device;
pub mod doctor;
pub mod error;
pub mod frame;
pub mod gen;
pub mod igb;
pub mod jsonout;
pub mod metrics;
pub mod mmio;
pub mod pcapout;
pub mod pci;
pub mod queue;
pub mod rsstool;
pub mod runner;
pub mod signal;
pub mod sweep;
pub mod vfio;
pub mod vfio_owner;

pub use config::DeviceConfig;
pub use device::Device;
pub use error::{Error, Result};
pub use igb::init::LinkStatus;
pub use igb::stats::Stats;
pub use pollnic_rings::{Mempool, Packet, RxStats, TxStats};
pub use queue::Queue;
