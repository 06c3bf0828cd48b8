//! Register-level access, for device models, test rigs and diagnostics
//! (the `pollnic doctor --selfcheck` self-check); applications never need
//! it. An application opens ports with [`crate::Device::open`] and works
//! with queues, counters and errors from the crate root; nothing here is on
//! that path.
//!
//! - [`io`]: what a [`crate::Device`] needs from whatever sits under it (a
//!   register space, a DMA mapper, MSI-X delivery), as traits. VFIO
//!   implements them for a real NIC; the software devices in the
//!   repository's `pollnic-model` crate implement [`io::DeviceIo`], and
//!   [`crate::Device::open_on`] brings a device up over one.
//! - [`selfcheck`]: the registers that say how a board is wired and what
//!   state it was left in, read before and after bring-up (what
//!   `pollnic doctor --selfcheck` prints).

pub mod io;
pub mod selfcheck;
