//! pollnic: a userspace poll-mode driver for Intel igb (82576, I350) and
//! ixgbe (82599/X520) NICs over VFIO, with zero-copy receive from hugepage
//! mempools. The family-specific part is behind [`family::Family`]; the
//! 82599 back end is tested against a software 82599 ([`ixgbe::model`]) and
//! has not yet run on hardware.
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
//! [`dmamap`] (forwarding a DMA map call),
//! [`clock`] (`clock_gettime`), the read-only PCI link probe in `pci`, and
//! the software device models' IOMMU (`softnic::iommu`).

pub mod clock;
pub mod config;
pub mod counters;
pub mod device;
pub mod dmamap;
pub mod doctor;
pub mod error;
pub mod family;
pub mod frame;
pub mod gen;
pub mod igb;
pub mod io;
pub mod ixgbe;
pub mod jsonout;
pub mod metrics;
pub mod mmio;
pub mod pcapout;
pub mod pci;
pub mod queue;
pub mod refresh;
pub mod rsstool;
pub mod runner;
pub mod signal;
pub mod softnic;
pub mod stats;
pub mod sweep;
pub mod vfio;
pub mod vfio_owner;
pub mod wait;

pub use config::DeviceConfig;
pub use device::{Device, DeviceIdent};
pub use dmamap::{DmaMapping, DmaPurpose};
pub use error::{Error, Result};
pub use family::{HashTypes, LinkStatus};
pub use pollnic_rings::{Mempool, Packet, RxStats, TxStats};
pub use queue::Queue;
pub use stats::Stats;
