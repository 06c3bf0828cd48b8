//! The model's state: register values, the time each reset, EEPROM load,
//! DMA init and autonegotiation started, the queues, the IOMMU, counters,
//! the wire, and what the driver did wrong.

use crate::iommu::Mappings;
use crate::ModelConfig;
use crate::{Event, QueueState, RegisterModel};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// The software 82599's clock runs this many times faster than the wall
/// clock: every time the model keeps (reset, EEPROM, DMA init, link
/// training) is model time, so a 1.5 s link training takes 15 ms of a test.
/// The driver's own waits are wall-clock time and so 100 times more
/// generous against the model than against silicon.
pub const CLOCK_RATE: u32 = 100;

/// How long the link takes to come up after the laser is on and
/// autonegotiation restarted, in model time: 1.5 s, inside the 1–2 s an
/// X520 takes (Linux allows 9 s, `IXGBE_LINK_UP_TIME`). A longer
/// `ModelConfig::link_time` lengthens it.
pub const LINK_TRAINING: Duration = Duration::from_millis(1500);

/// How long after an AN restart ANLP1's AN state leaves 0, in model time.
pub const AN_STATE_TIME: Duration = Duration::from_millis(1);

/// Queues the model implements (the 82599's 128).
pub(crate) const QUEUES: usize = 128;

/// How a board links, by device ID (Linux `ixgbe_get_media_type_82599`):
/// SFP+ cages link once a module is seated, the laser is on (ESDP.SDP3 low)
/// and autonegotiation restarted; backplane (KX4/KX/KR), XAUI, CX4 and
/// LS-fiber boards have no laser control and link once a pipeline reset
/// (`ixgbe_reset_pipeline_82599`) restarted the link with AUTOC2's link
/// enabled. A bare AUTOC.AN_RESTART does not start them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Board {
    /// An SFP+ cage with laser control.
    Sfp,
    /// No laser control: the link starts through the pipeline reset.
    NoLaser,
}

impl Board {
    /// The board of device `device`.
    pub fn of(device: u16) -> Board {
        use pollnic_hw::ixgbe::*;
        match device {
            DEV_ID_82599_KX4
            | DEV_ID_82599_KX4_MEZZ
            | DEV_ID_82599_COMBO_BACKPLANE
            | DEV_ID_82599_KR
            | DEV_ID_82599_BACKPLANE_FCOE
            | DEV_ID_82599_XAUI_LOM
            | DEV_ID_82599_CX4
            | DEV_ID_82599_LS => Board::NoLaser,
            _ => Board::Sfp,
        }
    }
}

pub(crate) struct State {
    pub cfg: ModelConfig,
    /// Plain register storage (offset → value).
    pub regs: HashMap<u32, u32>,
    /// Statistics counters by register offset (64-bit pairs under the low one).
    pub counters: HashMap<u32, u64>,
    /// Model time zero.
    pub epoch: Instant,
    /// When the last reset started (model time).
    pub reset_at: Option<Duration>,
    /// When the last autonegotiation restart was written (model time).
    pub an_at: Option<Duration>,
    /// When the TX laser last came on (ESDP.SDP3 driven low), model time.
    pub laser_on_at: Option<Duration>,
    /// An SFP+ module sits in the cage (ESDP.SDP2 reads high).
    pub module_present: bool,
    /// The link mode the EEPROM loads into AUTOC.LMS at reset.
    pub eeprom_lms: u32,
    /// The PCI device ID the model plays (its board: [`Board`]).
    pub device: u16,
    /// Board without laser control: the first half of a pipeline reset
    /// (AUTOC written with LMS bit 2 toggled and AN_RESTART) was seen.
    pub pipeline_toggled: bool,
    /// Board without laser control: when the pipeline reset completed with
    /// AUTOC2's link enabled; the link trains from then.
    pub pipeline_done_at: Option<Duration>,
    /// AUTOC2's upper half (bits 31:16) when the driver first started the
    /// link (its first AUTOC write with AN_RESTART since power-on): what
    /// Linux `ixgbe_reset_hw_82599` keeps across later resets
    /// (`orig_autoc2`), checked when the driver lets go of the port.
    pub first_autoc2_upper: Option<u32>,
    /// PCIe master requests that never complete: STATUS.GIO stays set after
    /// CTRL.GIO_DIS until a reset.
    pub master_stuck: bool,
    /// A reset was issued while master requests were still pending: a second
    /// one is needed (82599 specification update, master disable).
    pub needs_second_reset: bool,
    /// Registers that still hold the undefined values reset left (MTA,
    /// RAR 1..127, VFTA) and have not been written since.
    pub undefined: HashSet<u32>,
    /// Resets so far (seeds the undefined values).
    pub resets: u32,
    /// TX queues wedged by a frame the 82599 cannot send.
    pub tx_wedged: HashSet<u16>,
    /// TX descriptors written back (DD) since power-on.
    pub tx_writebacks: u64,
    pub rx: Vec<QueueState>,
    pub tx: Vec<QueueState>,
    pub iommu: Mappings,
    pub bus_master: bool,
    /// Frames sent on the wire, not yet taken.
    pub wire: Vec<Vec<u8>>,
    pub partial: Vec<u8>,
    pub violations: Vec<String>,
    pub events: Vec<Event>,
    pub msix: crate::msix::Msix,
}

impl State {
    pub fn new(cfg: ModelConfig) -> State {
        let mut s = State {
            cfg,
            regs: HashMap::new(),
            counters: HashMap::new(),
            epoch: Instant::now(),
            reset_at: None,
            an_at: None,
            laser_on_at: None,
            module_present: true,
            eeprom_lms: pollnic_hw::ixgbe::bits::AUTOC_LMS_10G_SERIAL,
            device: pollnic_hw::ixgbe::DEV_ID_82599_SFP,
            pipeline_toggled: false,
            pipeline_done_at: None,
            first_autoc2_upper: None,
            master_stuck: false,
            needs_second_reset: false,
            undefined: HashSet::new(),
            resets: 0,
            tx_wedged: HashSet::new(),
            tx_writebacks: 0,
            rx: (0..QUEUES).map(|_| QueueState::default()).collect(),
            tx: (0..QUEUES).map(|_| QueueState::default()).collect(),
            iommu: Mappings::default(),
            bus_master: true,
            wire: Vec::new(),
            partial: Vec::new(),
            violations: Vec::new(),
            events: Vec::new(),
            msix: Default::default(),
        };
        s.load_defaults();
        s
    }

    /// The CTRL_EXT.DRV_LOAD rule ([`crate::drv_load_violation`]).
    pub fn check_driver_owns(&mut self, what: &str) {
        let ctrl_ext = self.reg(pollnic_hw::ixgbe::regs::CTRL_EXT);
        if let Some(v) =
            crate::drv_load_violation(ctrl_ext, &self.violations, what, "ixgbe_get_hw_control")
        {
            self.violation(v);
        }
    }

    /// Record that the driver did something the real part would not take.
    /// Strict models panic right here, so the test fails at the culprit.
    pub fn violation(&mut self, msg: String) {
        let msg = format!("software 82599: {msg}");
        self.violations.push(msg.clone());
        if self.cfg.strict {
            panic!("{msg}");
        }
    }

    /// Register values after reset (and at power-on): what the EEPROM loads
    /// (RAL/RAH(0), AUTOC's link mode, ESDP with the laser pin an output
    /// driven high, i.e. laser off), the 82599's non-zero defaults pollnic
    /// reads back (the relaxed-ordering bits of DCA_RXCTRL/DCA_TXCTRL among
    /// them), garbage in what reset leaves undefined (MTA, RAR 1..127, VFTA),
    /// and 0 elsewhere.
    pub fn load_defaults(&mut self) {
        use pollnic_hw::ixgbe::{bits::*, regs::*};
        self.regs.clear();
        self.counters.clear();
        self.undefined.clear();
        self.tx_wedged.clear();
        let m = self.cfg.mac;
        self.regs
            .insert(ral(0), u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
        self.regs
            .insert(rah(0), u32::from_le_bytes([m[4], m[5], 0, 0]) | RAH_AV);
        self.regs.insert(AUTOC, self.eeprom_lms);
        self.pipeline_toggled = false;
        self.pipeline_done_at = None;
        if Board::of(self.device) == Board::Sfp {
            self.regs.insert(AUTOC2, AUTOC2_10G_SFI);
        } else {
            // This model's EEPROM leaves the link disabled in AUTOC2 on the
            // boards without laser control: the case Linux's
            // `ixgbe_reset_pipeline_82599` handles ("enable link if
            // disabled in NVM").
            self.regs.insert(AUTOC2, AUTOC2_LINK_DISABLE_MASK);
        }
        self.regs.insert(ESDP, ESDP_SDP3_DIR | ESDP_SDP3);
        self.laser_on_at = None;
        self.regs
            .insert(HLREG0, HLREG0_TXCRCEN | HLREG0_RXCRCSTRP | HLREG0_TXPADEN);
        self.regs.insert(RDRXCTL, RDRXCTL_CRCSTRIP);
        for q in 0..QUEUES as u16 {
            // SRRCTL default: 2 KiB buffers, legacy descriptors.
            self.regs.insert(srrctl(q), 2);
            self.regs
                .insert(dca_rxctrl(q), DCA_RXCTRL_DESC_RRO_EN | DCA_RXCTRL_CLEAR);
            self.regs.insert(dca_txctrl(q), DCA_TXCTRL_DESC_WRO_EN);
        }
        for n in 0..8 {
            self.regs
                .insert(rxpbsize(n), if n == 0 { RXPBSIZE_MAX } else { 0 });
            self.regs
                .insert(txpbsize(n), if n == 0 { TXPBSIZE_MAX } else { 0 });
        }
        // Undefined after reset: a different pseudo-random pattern each
        // time (xorshift), never 0, RAH with AV set so a stale entry would
        // pass frames.
        let mut x = 0x9E37_79B9u32 ^ self.resets.wrapping_mul(0x85EB_CA6B);
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x | 1
        };
        for n in 0..128u16 {
            for (off, v) in [(mta(n), next()), (vfta(n), next())] {
                self.regs.insert(off, v);
                self.undefined.insert(off);
            }
            if n > 0 {
                self.regs.insert(ral(n), next());
                self.regs.insert(rah(n), (next() & 0xFFFF) | RAH_AV);
                self.undefined.insert(ral(n));
                self.undefined.insert(rah(n));
            }
        }
        for q in &mut self.rx {
            *q = QueueState::default();
        }
        self.msix.reset();
        for q in &mut self.tx {
            *q = QueueState::default();
        }
        self.an_at = None;
        self.partial.clear();
    }

    /// Model time now.
    pub fn now(&self) -> Duration {
        self.epoch.elapsed() * CLOCK_RATE
    }

    /// A global reset starts: registers to defaults, queues stopped, link down.
    pub fn reset(&mut self) {
        use pollnic_hw::ixgbe::{bits::*, regs::*};
        // Master requests still pending (STATUS.GIO set) when the reset
        // comes: this reset blocks new ones, a second must clear what the
        // completions left (82599 specification update; Linux
        // `ixgbe_disable_pcie_master`, `IXGBE_FLAGS_DOUBLE_RESET_REQUIRED`).
        // A reset with DMA still running: the 82599 drops what it was doing
        // mid-descriptor. Linux stops the adapter first (`ixgbe_stop_adapter`:
        // RXEN off, every queue disabled, then the master disable).
        let running: Vec<String> = (self.reg(RXCTRL) & RXCTRL_RXEN != 0)
            .then(|| "RXCTRL.RXEN".to_owned())
            .into_iter()
            .chain(
                self.rx
                    .iter()
                    .enumerate()
                    .filter(|(_, q)| q.enabled)
                    .map(|(i, _)| format!("RXDCTL({i}).ENABLE")),
            )
            .chain(
                self.tx
                    .iter()
                    .enumerate()
                    .filter(|(_, q)| q.enabled)
                    .map(|(i, _)| format!("TXDCTL({i}).ENABLE")),
            )
            .collect();
        if !running.is_empty() {
            self.violation(format!(
                "global reset with {} still set: stop the adapter first (Linux \
                 ixgbe_stop_adapter: RXEN off, every queue disabled, the master disable)",
                running.join(", ")
            ));
        }
        self.needs_second_reset =
            self.master_pending(self.reg(CTRL) & CTRL_GIO_DIS != 0) && self.master_stuck;
        self.master_stuck = false;
        self.resets += 1;
        self.load_defaults();
        self.reset_at = Some(self.now());
        self.log(Event::Reset);
    }

    /// STATUS.GIO: master requests outstanding. With GIO_DIS set they drain
    /// at once, unless the model was told they never complete.
    pub fn master_pending(&self, gio_dis: bool) -> bool {
        self.bus_master && (!gio_dis || self.master_stuck)
    }

    fn since_reset(&self) -> Option<std::time::Duration> {
        self.reset_at.map(|t| self.now().saturating_sub(t))
    }

    /// CTRL.RST still reads back set.
    pub fn in_reset(&self) -> bool {
        match (self.since_reset(), self.cfg.reset_time) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(e), Some(t)) => e < t,
        }
    }

    /// EEC.ARD: the EEPROM was read after the last reset.
    pub fn eeprom_done(&self) -> bool {
        let Some(reset) = self.cfg.reset_time else {
            return self.reset_at.is_none();
        };
        self.since_reset()
            .is_none_or(|e| e >= reset + self.cfg.eeprom_time)
    }

    /// RDRXCTL.DMAIDONE.
    pub fn dma_init_done(&self) -> bool {
        let Some(reset) = self.cfg.reset_time else {
            return self.reset_at.is_none();
        };
        self.since_reset()
            .is_none_or(|e| e >= reset + self.cfg.eeprom_time + self.cfg.dma_init_time)
    }

    /// LINKS.UP: a module in the cage, the laser on, and autonegotiation
    /// restarted, the later of the two at least [`LINK_TRAINING`] (or
    /// `link_time`, if longer) ago; `link_time: None` keeps it down.
    pub fn link_up(&self) -> bool {
        let Some(train) = self.cfg.link_time.map(|d| d.max(LINK_TRAINING)) else {
            return false;
        };
        if Board::of(self.device) == Board::NoLaser {
            return self
                .pipeline_done_at
                .is_some_and(|t| self.now() >= t + train);
        }
        match (self.module_present, self.laser_on_at, self.an_at) {
            (true, Some(l), Some(a)) => self.now() >= l.max(a) + train,
            _ => false,
        }
    }

    /// The link speed AUTOC.LMS selects, in Mb/s: 1 Gb/s modes (1G with or
    /// without AN, SGMII) link at 1 Gb/s, the rest at 10 Gb/s.
    pub fn link_speed_1g(&self) -> bool {
        use pollnic_hw::ixgbe::{bits::*, regs::AUTOC};
        matches!(
            self.reg(AUTOC) & AUTOC_LMS_MASK,
            AUTOC_LMS_1G_LINK_NO_AN | AUTOC_LMS_1G_AN | AUTOC_LMS_SGMII_1G_100M
        )
    }

    pub fn reg(&self, off: u32) -> u32 {
        self.regs.get(&off).copied().unwrap_or(0)
    }

    /// Whether the device may still DMA: bus mastering on and a queue running.
    pub fn dma_active(&self) -> Option<String> {
        if !self.bus_master {
            return None;
        }
        if let Some(q) = self.rx.iter().position(|q| q.enabled) {
            return Some(format!("RX queue {q} is enabled"));
        }
        if let Some(q) = self.tx.iter().position(|q| q.enabled) {
            return Some(format!("TX queue {q} is enabled"));
        }
        None
    }

    /// A mapping is about to be removed: the device must no longer DMA.
    /// Rings inside it are detached whatever happens (memory safety).
    pub fn unmapping(&mut self, iova: u64, len: usize) {
        if let Some(why) = self.dma_active() {
            self.violation(format!(
                "DMA memory at IOVA {iova:#x} ({len} bytes) freed while the device can still \
                 DMA ({why}, bus mastering on): stop the queues and reset before freeing memory"
            ));
        }
        let end = iova + len as u64;
        let regs = &self.regs;
        let inside = |base: u64| base >= iova && base < end;
        for (q, st) in self.rx.iter_mut().enumerate() {
            let b = rx_base(regs, q as u16);
            if st.ring.is_some() && inside(b) {
                st.ring = None;
                st.enabled = false;
            }
        }
        for (q, st) in self.tx.iter_mut().enumerate() {
            let b = tx_base(regs, q as u16);
            if st.ring.is_some() && inside(b) {
                st.ring = None;
                st.enabled = false;
            }
        }
    }
}

/// RDBAH:RDBAL of queue `q`.
pub(crate) fn rx_base(regs: &HashMap<u32, u32>, q: u16) -> u64 {
    use pollnic_hw::ixgbe::regs::{rdbah, rdbal};
    let g = |o| regs.get(&o).copied().unwrap_or(0) as u64;
    g(rdbal(q)) | g(rdbah(q)) << 32
}

/// TDBAH:TDBAL of queue `q`.
pub(crate) fn tx_base(regs: &HashMap<u32, u32>, q: u16) -> u64 {
    use pollnic_hw::ixgbe::regs::{tdbah, tdbal};
    let g = |o| regs.get(&o).copied().unwrap_or(0) as u64;
    g(tdbal(q)) | g(tdbah(q)) << 32
}
