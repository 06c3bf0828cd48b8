//! pollnic: a userspace poll-mode driver for Intel igb and ixgbe NICs over VFIO.
pub mod pci;
