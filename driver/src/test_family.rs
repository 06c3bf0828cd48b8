//! A made-up third family for tests (cargo feature `test-family`). Issue 9's claim, checked: a third family is a new folder plus one line in
//! `FAMILIES`. [`E1000eForTest`] stands for that folder: a family defined
//! here and nowhere else (no edit to `pci`, `doctor` or the other families),
//! with a device ID made up for this test. Passed in a family list in place of
//! `FAMILIES`, it is identified, listed by `pollnic status` with its name, and
//! its own link register and decode are used.

use crate::family::{
    Caveat, Family, FamilyInfo, HashTypes, LinkState, LinkStatus, NicModel, RingRegs, FAMILIES,
};
use crate::stats::StatsLayout;
use crate::sys::mmio::Regs;
use crate::wait::TimedOut;
use pollnic_hw::rss::{Reta, KEY_LEN};

/// Made up for this test: no Intel part has it, and neither igb nor ixgbe
/// lists it.
pub const TEST_DEVICE_ID: u16 = 0x7E57;
/// The test family's link register: an offset neither igb (`STATUS`, 0x8) nor
/// ixgbe (`LINKS`, 0x42A4) reads.
pub(crate) const TEST_LINK_REG: u32 = 0x0010;

/// A stand-in third family, "e1000e" by name. Only the PCI-ID, `status`,
/// `doctor` side is real; it is never opened as a `Device`, so its register
/// methods panic if called.
pub struct E1000eForTest;

static MODELS: &[NicModel] = &[NicModel {
    device_id: TEST_DEVICE_ID,
    family: crate::family::FamilyInfo(&E1000eForTest),
    name: "Test-only Third Family Connection",
    variant: "TEST",
    queues: 2,
}];

/// The families the tests pass instead of `FAMILIES`: the real two plus this one.
pub fn with_third() -> Vec<FamilyInfo> {
    let mut all = FAMILIES.to_vec();
    all.push(FamilyInfo(&E1000eForTest));
    all
}

const NOT_OPENED: &str = "the test family is never opened as a Device";

impl crate::family::sealed::Sealed for E1000eForTest {}

impl Family for E1000eForTest {
    fn kind(&self) -> crate::family::NicFamily {
        crate::family::NicFamily::Test
    }
    fn models(&self) -> &'static [NicModel] {
        MODELS
    }
    fn max_queues(&self, _device: u16) -> u16 {
        MODELS[0].queues
    }
    fn link_register(&self) -> Option<u32> {
        Some(TEST_LINK_REG)
    }
    /// Bit 0: link up; bits 2:1 = 2 → 2500 Mb/s (made up, and a speed neither
    /// igb nor ixgbe decodes, so the test sees whose decode ran).
    fn decode_link_register(&self, value: u32) -> LinkState {
        match (value & 1, (value >> 1) & 0b11) {
            (0, _) => LinkState::Down,
            (_, 2) => LinkState::Up {
                speed_mbps: Some(2500),
            },
            _ => LinkState::Up { speed_mbps: None },
        }
    }
    fn caveat(&self) -> Option<Caveat> {
        Some(Caveat {
            what: "a test-only family",
            instead: "use a real port",
        })
    }
    fn min_ring_size(&self) -> u32 {
        unreachable!("{NOT_OPENED}")
    }
    fn stats_layout(&self) -> &'static StatsLayout {
        unreachable!("{NOT_OPENED}")
    }
    fn desc(&self) -> Option<&dyn crate::family::DescFamily> {
        Some(self)
    }
}

impl crate::family::DescFamily for E1000eForTest {
    fn rx_error_mask(&self) -> u32 {
        unreachable!("{NOT_OPENED}")
    }
    fn init(&self, _: &dyn Regs) -> Result<[u8; 6], TimedOut> {
        unreachable!("{NOT_OPENED}")
    }
    fn setup_rss(&self, _: &dyn Regs, _: &[u8; KEY_LEN], _: &Reta, _: &HashTypes) {
        unreachable!("{NOT_OPENED}")
    }
    fn write_reta(&self, _: &dyn Regs, _: &Reta) {
        unreachable!("{NOT_OPENED}")
    }
    fn configure_rx(&self, _: &dyn Regs, _: u16, _: RingRegs, _: usize, _: bool) {
        unreachable!("{NOT_OPENED}")
    }
    fn configure_tx(&self, _: &dyn Regs, _: u16, _: RingRegs) {
        unreachable!("{NOT_OPENED}")
    }
    fn start_tx(&self, _: &dyn Regs) {
        unreachable!("{NOT_OPENED}")
    }
    fn enable_rx_queue(&self, _: &dyn Regs, _: u16) -> Result<(), TimedOut> {
        unreachable!("{NOT_OPENED}")
    }
    fn enable_tx_queue(&self, _: &dyn Regs, _: u16) -> Result<(), TimedOut> {
        unreachable!("{NOT_OPENED}")
    }
    fn start_rx(&self, _: &dyn Regs, _: crate::family::RxFilter) -> Result<(), TimedOut> {
        unreachable!("{NOT_OPENED}")
    }
    fn rdt(&self, _: u16) -> u32 {
        unreachable!("{NOT_OPENED}")
    }
    fn tdt(&self, _: u16) -> u32 {
        unreachable!("{NOT_OPENED}")
    }
    fn link_status(&self, _: &dyn Regs) -> LinkStatus {
        unreachable!("{NOT_OPENED}")
    }
    fn shutdown(&self, _: &dyn Regs, _: u16) {
        unreachable!("{NOT_OPENED}")
    }
}
