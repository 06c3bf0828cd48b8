//! Issue 9's claim, checked: a third family is a new folder plus one line in
//! `FAMILIES`. [`E1000eForTest`] stands for that folder: a family defined
//! here and nowhere else (no edit to `pci`, `doctor` or the other families),
//! with a device ID made up for this test. Passed in a family list in place of
//! `FAMILIES`, it is identified, listed by `pollnic status` with its name, and
//! its own link register and decode are used.

use crate::family::{self, Caveat, Family, HashTypes, LinkStatus, RingRegs, FAMILIES};
use crate::mmio::Regs;
use crate::stats::StatsLayout;
use crate::wait::TimedOut;
use pollnic_hw::rss::{Reta, KEY_LEN};

use super::super::fake::{Dev, FakeSys};
use super::super::*;

/// Made up for this test: no Intel part has it, and neither igb nor ixgbe
/// lists it.
pub(crate) const TEST_DEVICE_ID: u16 = 0x7E57;
/// The test family's link register: an offset neither igb (`STATUS`, 0x8) nor
/// ixgbe (`LINKS`, 0x42A4) reads.
const TEST_LINK_REG: u32 = 0x0010;

/// A stand-in third family, "e1000e" by name. Only the PCI-ID, `status`,
/// `doctor` side is real; it is never opened as a `Device`, so its register
/// methods panic if called.
pub(crate) struct E1000eForTest;

static MODELS: &[NicModel] = &[NicModel {
    device_id: TEST_DEVICE_ID,
    family: &E1000eForTest,
    name: "Test-only Third Family Connection",
    variant: "TEST",
    queues: 2,
}];

/// The families the tests pass instead of `FAMILIES`: the real two plus this one.
pub(crate) fn with_third() -> Vec<&'static dyn Family> {
    let mut all = FAMILIES.to_vec();
    all.push(&E1000eForTest);
    all
}

const NOT_OPENED: &str = "the test family is never opened as a Device";

impl Family for E1000eForTest {
    fn name(&self) -> &'static str {
        "e1000e"
    }
    fn models(&self) -> &'static [NicModel] {
        MODELS
    }
    fn max_queues(&self, _device: u16) -> u16 {
        MODELS[0].queues
    }
    fn link_register(&self) -> u32 {
        TEST_LINK_REG
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
    fn rx_error_mask(&self) -> u32 {
        unreachable!("{NOT_OPENED}")
    }
    fn stats_layout(&self) -> &'static StatsLayout {
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

#[test]
fn a_third_family_is_identified_from_its_own_table() {
    let all = with_third();
    let m = lookup_in(&all, INTEL_VENDOR_ID, TEST_DEVICE_ID).expect("found");
    assert_eq!(
        (m.family.name(), m.name, m.max_queues()),
        ("e1000e", "Test-only Third Family Connection", 2)
    );
    assert_eq!(m.family.kernel_driver(), "e1000e");
    // The default `drives` reads the same table.
    let f = family::lookup_in(&all, INTEL_VENDOR_ID, TEST_DEVICE_ID).expect("drives");
    assert_eq!(f.name(), "e1000e");
    // The real families are still found through the longer list.
    assert_eq!(
        lookup_in(&all, INTEL_VENDOR_ID, 0x10C9).map(|m| m.family.name()),
        Some("igb")
    );
    // Without it (the real registry), the ID is unknown.
    assert!(lookup(INTEL_VENDOR_ID, TEST_DEVICE_ID).is_none());
    assert!(family::lookup(INTEL_VENDOR_ID, TEST_DEVICE_ID).is_none());
}

#[test]
fn status_lists_a_third_family_and_uses_its_link_decode() {
    let f = FakeSys::new();
    let igb = f.add(Dev::nic("0000:02:00.0", 0x1521));
    f.set_reg(igb, 0x8, 0x0000_0083);
    let third = f.add(Dev {
        driver: Some(VFIO_PCI),
        group: Some(7),
        ..Dev::nic("0000:03:00.0", TEST_DEVICE_ID)
    });
    // Its link register says up at 2500; igb's STATUS offset holds a value
    // igb would decode as down, so only the third family's decode gives this.
    f.set_reg(third, TEST_LINK_REG as usize, 0b101);
    f.set_reg(third, 0x8, 0);

    let rows = status_in(&f.sysfs, &with_third()).unwrap();
    assert_eq!(rows[1].device.family().map(|x| x.name()), Some("e1000e"));
    let text = format_status(&rows);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[1].contains("I350 Gigabit Network Connection"),
        "{text}"
    );
    assert!(lines[1].contains("up 1000 Mb/s"), "{text}");
    let cols: Vec<&str> = lines[2]
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        cols,
        [
            "0000:03:00.0",
            "Test-only Third Family Connection",
            "vfio-pci",
            "7",
            "up 2500 Mb/s",
            "-"
        ],
        "{text}"
    );
    f.set_reg(third, TEST_LINK_REG as usize, 0);
    let rows = status_in(&f.sysfs, &with_third()).unwrap();
    assert_eq!(rows[1].link, LinkState::Down);

    // The real registry does not know it: listed as unsupported, no link read.
    let text = format_status(&status(&f.sysfs).unwrap());
    let last = text.lines().nth(2).unwrap();
    assert!(
        last.contains("8086:7e57 (not supported by pollnic)")
            && last.contains("unknown (not supported by pollnic)"),
        "{text}"
    );
}
