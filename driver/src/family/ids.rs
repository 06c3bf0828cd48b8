//! What the families tell the PCI layer about themselves: the device IDs
//! they drive ([`NicModel`], listed by [`super::Family::models`]) and how a
//! port's link reads ([`LinkState`]). Defined here, below `pci`, so that
//! `pci` looks families up and families never reach back into `pci`.

use std::fmt;

use super::FamilyInfo;

/// PCI vendor ID of Intel Corporation.
pub const INTEL_VENDOR_ID: u16 = 0x8086;

/// One supported PCI device ID.
#[derive(Clone, Copy)]
pub struct NicModel {
    /// PCI device ID (vendor is always [`INTEL_VENDOR_ID`]).
    pub device_id: u16,
    /// Back end that drives it (the family whose [`FamilyInfo::models`] lists it).
    pub family: FamilyInfo,
    /// Marketing name as in `pci.ids` / `lspci`.
    pub name: &'static str,
    /// Suffix of the kernel's `*_DEV_ID_*` constant, e.g. `82599_SFP`.
    pub variant: &'static str,
    /// RX/TX queue pairs the part has, e.g. 82576 16, I350 8, 82599 128.
    pub queues: u16,
}

impl NicModel {
    /// RX/TX queue pairs the part has ([`NicModel::queues`]).
    pub fn max_queues(&self) -> u16 {
        self.queues
    }
}

impl fmt::Debug for NicModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NicModel")
            .field("device_id", &format_args!("{:#06x}", self.device_id))
            .field("family", &self.family.name())
            .field("name", &self.name)
            .field("variant", &self.variant)
            .field("queues", &self.queues)
            .finish()
    }
}

/// Equal when every field is; families compare by [`FamilyInfo::name`] (names
/// are unique in the families pollnic drives; comparing `dyn` pointers is unreliable).
impl PartialEq for NicModel {
    fn eq(&self, other: &Self) -> bool {
        self.device_id == other.device_id
            && self.family.name() == other.family.name()
            && self.name == other.name
            && self.variant == other.variant
            && self.queues == other.queues
    }
}

impl Eq for NicModel {}

/// A NIC port's link, as far as can be told from sysfs without touching the
/// device (`pollnic status`, `doctor`). An open port's own reading is
/// [`crate::LinkStatus`] ([`crate::Device::link`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// Link up, at this speed in Mb/s when known.
    Up {
        /// Negotiated speed in Mb/s.
        speed_mbps: Option<u32>,
    },
    /// No link (no carrier).
    Down,
    /// Could not tell; the string says why.
    Unknown(String),
}

impl fmt::Display for LinkState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkState::Up {
                speed_mbps: Some(s),
            } => write!(f, "up {s} Mb/s"),
            LinkState::Up { speed_mbps: None } => f.write_str("up"),
            LinkState::Down => f.write_str("down"),
            LinkState::Unknown(why) => write!(f, "unknown ({why})"),
        }
    }
}
