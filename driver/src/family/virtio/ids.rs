//! The PCI device IDs the virtio-net family knows: the modern network
//! device (1af4:1041, virtio 1.x §4.1.2.1: 0x1040 + device type 1), which
//! it drives, and the transitional one (1af4:1000), which it names and
//! refuses ([`crate::family::Family::missing`]). Names as `lspci` prints them.

use super::{VirtioNet, DEVICE_ID_NET_MODERN, DEVICE_ID_NET_TRANSITIONAL};
use crate::family::NicModel;

/// The modern and the transitional virtio-net device.
pub(crate) static MODELS: &[NicModel] = &[
    NicModel {
        device_id: DEVICE_ID_NET_MODERN,
        family: crate::family::FamilyInfo(&VirtioNet),
        name: "Virtio 1.0 network device",
        variant: "NET_MODERN",
        // At most what a 128-entry redirection table can name; the
        // device's own `max_virtqueue_pairs` is read at open.
        queues: pollnic_hw::rss::RETA_LEN as u16,
    },
    NicModel {
        device_id: DEVICE_ID_NET_TRANSITIONAL,
        family: crate::family::FamilyInfo(&VirtioNet),
        name: "Virtio network device (transitional)",
        variant: "NET_TRANSITIONAL",
        queues: 1,
    },
];
