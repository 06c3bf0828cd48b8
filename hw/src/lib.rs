//! What the silicon is: Intel igb (82576 / I350) and ixgbe (82599 / X520)
//! registers, bit fields, advanced descriptor layouts and hardware counters.
//!
//! Pure data and arithmetic: no `unsafe`, no memory or device access. Every
//! constant names the datasheet section it comes from; "82576 datasheet" is the
//! Intel 82576EB Gigabit Ethernet Controller Datasheet, revision 2.7.
//!
//! The advanced RX/TX descriptor formats are shared by igb and ixgbe (82599
//! datasheet §7.1.6, §7.2.3), which is why [`desc`] is not under [`igb`].
//! [`ixgbe`] cites Linux `ixgbe_type.h` macros for its register values (see
//! its module documentation for why).
#![forbid(unsafe_code)]
#![warn(missing_docs, unnameable_types)]

pub mod desc;
pub mod flow;
pub mod igb;
pub mod ixgbe;
pub mod mtu;
pub mod offload;
pub mod power;
pub mod rss;
pub mod stats;
pub mod virtio;

pub use desc::{RawDesc, RxCompletion};
