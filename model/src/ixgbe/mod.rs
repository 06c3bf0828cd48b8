//! A software 82599: a register-level model of the device's side, for host
//! tests of the ixgbe back end with no NIC. `Device` runs over it through
//! the same [`DeviceIo`] / [`pollnic::lowlevel::io::DeviceBar`] seam as over
//! VFIO: the same bring-up, rings, tail writes and shutdown.
//!
//! What it models:
//! - time: a clock [`CLOCK_RATE`] times faster than the wall clock, so the
//!   part's real delays cost a test little;
//! - every register bring-up polls, behaving like the part: CTRL.RST
//!   self-clears after [`ModelConfig::reset_time`], then EEC.ARD and
//!   RDRXCTL.DMAIDONE come; STATUS.GIO clears on CTRL.GIO_DIS (or never, with
//!   [`Soft82599::set_master_stuck`], and then a reset must be followed by a
//!   second one before any DMA); RXDCTL/TXDCTL.ENABLE read back their new
//!   value only after [`ModelConfig::latch_reads`] reads (so a driver that
//!   does not poll the latch is caught);
//! - the SFP+ cage on ESDP: SDP3 is the laser disable (an output, high at
//!   reset: laser off), SDP2 the module-present input
//!   ([`Soft82599::set_module_present`]); the link comes up [`LINK_TRAINING`]
//!   (1.5 s model time) after the later of laser-on and AUTOC.AN_RESTART,
//!   never with the laser off or the cage empty, at 1 Gb/s when AUTOC.LMS is
//!   a 1 Gb/s mode ([`Soft82599::set_eeprom_link_mode`] sets what the
//!   EEPROM loads), else 10 Gb/s; ANLP1's AN state leaves 0 after a restart;
//! - what reset leaves undefined: MTA, RAR 1..127 (with AV) and VFTA hold
//!   garbage, and RXEN with any of them unwritten is a violation; the
//!   relaxed-ordering bits of DCA_RXCTRL (13, 15) and DCA_TXCTRL (11) are
//!   set at reset, and a queue enabled with them on is a violation;
//! - RX: L2 filter (RAL/RAH, BAM, UPE/MPE), RSS (Toeplitz with RSSRK over
//!   the types MRQC enables, RETA lookup), CRC strip, DMA into the advanced
//!   descriptors of the chosen queue with DD/EOP, length, hash and RSS type;
//!   drops counted in QPRDC (DROP_EN) or MPC;
//! - TX: on a TDT write, the ring is walked and sent (as QEMU's igb does),
//!   DD written back where RS asks (on every descriptor with
//!   TXDCTL.WTHRESH > 0), frames padded to 60 bytes (TXPADEN); a frame under
//!   17 bytes wedges its queue (a violation);
//! - clear-on-read counters (GPRC, GORC, GPTC, GOTC, BPRC, MPRC, MPC, QPRDC);
//! - an IOMMU: DMA only inside mappings the driver made, IOVAs unrelated
//!   to virtual addresses.
//!
//! It is strict: a write the part would reject or a step out of order (a
//! register written during reset or before DMA init, a running RX queue's
//! ring registers written, a running queue's head moved, TXDCTL.ENABLE
//! before DMATXCTL.TE, a tail written before the enable latched or beyond
//! the ring, MTQC changed with the arbiter on, an MRQC mode other than RSS,
//! reserved RETA bits, a read-only register written, an unknown offset, DMA
//! memory freed while a queue can still DMA, and the rules above) is a
//! violation: with [`ModelConfig::strict`] (the default) it panics at the
//! culprit, otherwise it is recorded for [`Soft82599::violations`]. What the
//! datasheet allows and working drivers do is not: RXEN before the queues
//! are enabled (ixy), RDH written to where it is after the enable (ixy,
//! DPDK), a disabled queue's ring set up with RXEN on (§4.6.7.1).
//!
//! What it does not model: the PHY and SFP+ module internals (its I2C
//! EEPROM, module types, the CORECTL init sequence), link partners, real
//! DMA timing and PCIe ordering, descriptor prefetch and write-back delays,
//! interrupts, flow control, DCB, virtualization, flow director, checksum
//! offloads, VLAN, multicast table lookups, manageability firmware, GPRC
//! also counting missed frames (the hardware quirk Linux corrects), and
//! packet-buffer overflow timing (a frame with no descriptor is dropped at
//! once).

mod datapath;
mod irq;
mod regs;
mod state;

pub use crate::{Event, ModelConfig, RxOutcome, SoftBar};
pub use state::{CLOCK_RATE, LINK_TRAINING};

use crate::{lock, SharedModel, SoftIo};
use pollnic::lowlevel::io::DeviceIo;
use pollnic::DeviceConfig;
use pollnic::Result;
use pollnic::{Device, DeviceIdent};
use state::State;
use std::sync::{Arc, Mutex};

/// A software 82599 port. Cheap to clone; every clone is the same device.
#[derive(Clone)]
pub struct Soft82599 {
    shared: Arc<Mutex<State>>,
}

impl Default for Soft82599 {
    fn default() -> Self {
        Self::new(ModelConfig::default())
    }
}

/// The PCI address the model reports in messages (bus 0x5e, not a real slot here).
pub const MODEL_ADDR: &str = "0000:5e:00.0";

impl Soft82599 {
    /// A powered-on device (EEPROM loaded, link down).
    pub fn new(cfg: ModelConfig) -> Self {
        Soft82599 {
            shared: Arc::new(Mutex::new(State::new(cfg))),
        }
    }

    /// A powered-on device of 82599 board `device` (a PCI device ID):
    /// SFP+ IDs link as [`Soft82599::new`]'s 8086:10fb does; backplane
    /// (KX4/KX/KR), XAUI, CX4 and LS IDs have no laser control, their
    /// EEPROM puts the board's link mode in AUTOC.LMS (KX4/KX/KR; 10G
    /// parallel on XAUI; 10G serial on LS) and disables the link in AUTOC2,
    /// and they link only after a pipeline reset (`state::Board`).
    pub fn with_device(cfg: ModelConfig, device: u16) -> Self {
        use pollnic_hw::ixgbe::{bits::*, *};
        let m = Self::new(cfg);
        {
            let mut s = lock(&m.shared);
            s.device = device;
            s.eeprom_lms = match device {
                DEV_ID_82599_XAUI_LOM => AUTOC_LMS_10G_LINK_NO_AN,
                DEV_ID_82599_LS => AUTOC_LMS_10G_SERIAL,
                _ if state::Board::of(device) == state::Board::NoLaser => AUTOC_LMS_KX4_KX_KR,
                _ => AUTOC_LMS_10G_SERIAL,
            };
            s.load_defaults();
        }
        m
    }

    /// The identity `Device` sees: the model's device ID (an 82599ES SFP+,
    /// 8086:10fb, unless [`Soft82599::with_device`] chose another) at
    /// [`MODEL_ADDR`].
    pub fn ident(&self) -> DeviceIdent {
        let device = lock(&self.shared).device;
        DeviceIdent::new(
            MODEL_ADDR.parse().expect("valid address"),
            pollnic_hw::ixgbe::VENDOR_INTEL,
            device,
            if device == pollnic_hw::ixgbe::DEV_ID_82599_SFP {
                "82599ES 10-Gigabit SFI/SFP+ Network Connection (software model)"
            } else {
                "82599 10-Gigabit Network Connection (software model)"
            },
        )
    }

    /// What `Device` runs over: the model's BAR0 and IOMMU.
    pub fn io(&self) -> Box<dyn DeviceIo> {
        Box::new(SoftIo::new(self.dyn_shared()))
    }

    fn dyn_shared(&self) -> SharedModel {
        self.shared.clone()
    }

    /// Open a [`Device`] on this model (`Device::open_on` with [`Self::io`]
    /// and [`Self::ident`]).
    ///
    /// # Errors
    /// Those of [`Device::open_on`].
    pub fn open(&self, cfg: &DeviceConfig) -> Result<Device> {
        Device::open_on(self.io(), self.ident(), cfg)
    }

    /// A frame arrives from the wire (without FCS).
    pub fn receive(&self, frame: &[u8]) -> RxOutcome {
        datapath::receive(&mut lock(&self.shared), frame)
    }

    /// Frames sent on the wire since the last call (without FCS).
    pub fn take_tx_frames(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut lock(&self.shared).wire)
    }

    /// Violations recorded so far (empty for a driver that kept every rule).
    pub fn violations(&self) -> Vec<String> {
        lock(&self.shared).violations.clone()
    }

    /// What the model saw, in order.
    pub fn events(&self) -> Vec<Event> {
        lock(&self.shared).events.clone()
    }

    /// How often each MSI-X vector fired (signalled its eventfd) since MSI-X
    /// was enabled; empty while it is off.
    pub fn msix_fired(&self) -> Vec<u64> {
        lock(&self.shared).msix.fired.clone()
    }

    /// The throttle interval EITR asks of vector `v`, as the model reads it
    /// (bits 11:3, 2 µs units).
    pub fn eitr_interval(&self, v: u16) -> std::time::Duration {
        irq::interval(&lock(&self.shared), v)
    }

    /// Let time act: fire throttled interrupts whose interval has passed.
    pub fn tick(&self) {
        irq::tick(&mut lock(&self.shared))
    }

    /// Current value of the register at `off` as stored (no read side effect).
    pub fn peek(&self, off: u32) -> u32 {
        lock(&self.shared).reg(off)
    }

    /// Live DMA mappings (IOVA, length).
    pub fn mappings(&self) -> Vec<(u64, usize)> {
        lock(&self.shared)
            .iommu
            .list
            .iter()
            .map(|m| (m.iova, m.len))
            .collect()
    }

    /// Model time since the model was made ([`CLOCK_RATE`] times the wall
    /// clock).
    pub fn model_time(&self) -> std::time::Duration {
        lock(&self.shared).now()
    }

    /// Put an SFP+ module in the cage or take it out (ESDP.SDP2; default:
    /// present). Without one the link stays down.
    pub fn set_module_present(&self, present: bool) {
        lock(&self.shared).module_present = present;
    }

    /// The link mode (an `AUTOC_LMS_*` value of `pollnic_hw::ixgbe::bits`)
    /// the EEPROM loads into AUTOC at every reset from now on (default 10G
    /// serial); a board left in a 1 Gb/s mode links at 1 Gb/s.
    pub fn set_eeprom_link_mode(&self, lms: u32) {
        let mut s = lock(&self.shared);
        s.eeprom_lms = lms & pollnic_hw::ixgbe::bits::AUTOC_LMS_MASK;
        let lms = s.eeprom_lms;
        s.regs.insert(pollnic_hw::ixgbe::regs::AUTOC, lms);
    }

    /// Make PCIe master requests hang: STATUS.GIO stays set after
    /// CTRL.GIO_DIS until the next reset, which then needs a second one
    /// before the device may DMA (the 82599 specification update's master
    /// disable flow).
    pub fn set_master_stuck(&self) {
        lock(&self.shared).master_stuck = true;
    }

    /// TX descriptors the model has written back (DD set) since it was made.
    pub fn tx_writebacks(&self) -> u64 {
        lock(&self.shared).tx_writebacks
    }

    /// Registers as the driver sees them (for tests that drive the model by hand).
    pub fn regs(&self) -> SoftBar {
        SoftBar {
            shared: self.dyn_shared(),
        }
    }
}
