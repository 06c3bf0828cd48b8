//! Status reading and the bind/unbind state machine against [`FakeSys`].

mod batch;
mod bind;
mod noiommu;
mod status;
#[cfg(feature = "test-family")]
mod third_family;
mod unbind;
mod virtio;

use std::fs;

use super::fake::{Dev, FakeSys};
use super::*;

pub(super) fn binder(f: &FakeSys) -> Binder<'_> {
    Binder::new(&f.sysfs, f, f.options.clone())
}

pub(super) fn state_file(f: &FakeSys, addr: PciAddress) -> Option<String> {
    fs::read_to_string(StateDir::new(&f.options.state_dir).path(addr)).ok()
}

/// An 82576 on igb with interface eth0 (up), IOMMU group 5.
pub(super) fn igb_port(f: &FakeSys) -> PciAddress {
    f.add(Dev {
        driver: Some("igb"),
        group: Some(5),
        ifname: Some("eth0"),
        ..Dev::nic("0000:00:08.0", 0x10C9)
    })
}
