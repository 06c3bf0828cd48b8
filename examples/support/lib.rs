//! What only pollnic's example tools use, kept out of the `pollnic` library
//! so that programs linking the driver do not get these dependencies: test
//! frames ([`frame`]) and the generator's sizes and VLAN tags ([`gen`]), the
//! RFC 2544 rate search ([`sweep`]), packets/s, Mbit/s and latency
//! ([`metrics`]), JSON lines ([`jsonout`]), pcap/pcapng files ([`pcapout`]),
//! Ctrl-C handling ([`signal`]), procfs CPU time ([`cputime`]), the testbed's
//! guest-work counter ([`counts`]), its region markers ([`marker`]) and its
//! per-function profile ([`profile`]) and what the
//! smoltcp examples share with their tests ([`smol`]).

pub mod args;
pub mod cores;
pub mod counts;
pub mod cputime;
pub mod frame;
pub mod gen;
pub mod jsonout;
pub mod marker;
pub mod metrics;
pub mod pcapout;
pub mod profile;
pub mod refused;
pub mod signal;
pub mod smol;
pub mod sweep;

/// Whether to ask the port at `addr` for RX checksum status
/// (`DeviceConfig::rx_checksum`) when opening it. A port's
/// `Device::capabilities` are known only once it is open, so this tells it
/// from the port's PCI IDs in sysfs: false on a virtio-net port, which
/// reports no checksum status (`Capabilities::rx_checksum` is false there)
/// and refuses the field at open. A port whose sysfs entry cannot be read
/// is asked: its open then says what is wrong with it.
pub fn offers_rx_checksum(addr: pollnic::pci::PciAddress) -> bool {
    use pollnic::pci::{PciDevice, Sysfs};
    PciDevice::read(&Sysfs::default(), addr)
        .ok()
        .and_then(|d| d.family())
        .is_none_or(|f| f.kind() != pollnic::NicFamily::VirtioNet)
}

/// The check behind the examples' `--ring-size` option (one size for RX and
/// TX): the message names the option, as `pollnic::ConfigError::InvalidRingSize`
/// names a ring.
///
/// # Errors
/// The message, when `n` is not a [`pollnic::config::usable_ring_size`].
pub fn check_ring_size_arg(n: u32) -> Result<(), String> {
    if pollnic::config::usable_ring_size(n) {
        Ok(())
    } else {
        Err(format!(
            "--ring-size {n}: must be a power of two between 32 and 4096 descriptors (e.g. 512)"
        ))
    }
}
