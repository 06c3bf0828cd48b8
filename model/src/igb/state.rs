//! The software 82576's state.

use crate::iommu::Mappings;
use crate::{Event, ModelConfig, QueueState, RegisterModel};
use pollnic_hw::igb::{bits::*, phy, regs::*};
use std::collections::HashMap;
use std::time::Instant;

/// Queues the model implements (the 82576's 16).
pub(crate) const QUEUES: usize = 16;

pub(crate) struct State {
    pub cfg: ModelConfig,
    pub regs: HashMap<u32, u32>,
    pub counters: HashMap<u32, u64>,
    pub reset_at: Option<Instant>,
    /// When the PHY's autonegotiation was last restarted.
    pub an_at: Option<Instant>,
    /// PHY control register (BMCR).
    pub bmcr: u16,
    pub rx: Vec<QueueState>,
    pub tx: Vec<QueueState>,
    pub iommu: Mappings,
    pub bus_master: bool,
    pub wire: Vec<Vec<u8>>,
    pub partial: Vec<u8>,
    pub violations: Vec<String>,
    pub events: Vec<Event>,
    pub msix: crate::msix::Msix,
    /// The PCI device ID the model plays: the 82576 (8086:10c9) or an I350
    /// (`Soft82576::with_device`), which adds EEE and DMA coalescing and
    /// encodes RXPBS as a table index.
    pub device: u16,
    /// I350: EEER written since the last reset.
    pub eeer_written: bool,
}

impl State {
    pub fn new(cfg: ModelConfig) -> State {
        let mut s = State {
            cfg,
            regs: HashMap::new(),
            counters: HashMap::new(),
            reset_at: None,
            an_at: None,
            bmcr: 0,
            rx: (0..QUEUES).map(|_| QueueState::default()).collect(),
            tx: (0..QUEUES).map(|_| QueueState::default()).collect(),
            iommu: Mappings::default(),
            bus_master: true,
            wire: Vec::new(),
            partial: Vec::new(),
            violations: Vec::new(),
            events: Vec::new(),
            msix: Default::default(),
            device: pollnic_hw::igb::DEV_ID_82576,
            eeer_written: false,
        };
        s.load_defaults();
        s
    }

    /// The CTRL_EXT.DRV_LOAD rule ([`crate::drv_load_violation`]).
    pub fn check_driver_owns(&mut self, what: &str) {
        let ctrl_ext = self.reg(CTRL_EXT);
        if let Some(v) =
            crate::drv_load_violation(ctrl_ext, &self.violations, what, "igb_get_hw_control")
        {
            self.violation(v);
        }
    }

    /// Record a broken rule; strict models panic here, at the culprit.
    pub fn violation(&mut self, msg: String) {
        let msg = format!("software 82576: {msg}");
        self.violations.push(msg.clone());
        if self.cfg.strict {
            panic!("{msg}");
        }
    }

    /// Registers after reset: the EEPROM's MAC in RAL0/RAH0, the rest 0
    /// (SRRCTL: 2 KiB buffers, legacy descriptors; PHY powered, no autoneg).
    pub fn load_defaults(&mut self) {
        self.regs.clear();
        self.counters.clear();
        let m = self.cfg.mac;
        self.regs
            .insert(RAL0, u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
        self.regs
            .insert(RAH0, u32::from_le_bytes([m[4], m[5], 0, 0]) | RAH_AV);
        for q in 0..QUEUES as u16 {
            self.regs.insert(srrctl(q), 2);
        }
        // The EEPROM's flow control (both directions, as on common boards)
        // and the 82576's 64 KB packet buffer.
        self.regs.insert(CTRL, CTRL_RFCE | CTRL_TFCE);
        if self.i350() {
            // RXPBS field 0: 36 KB in the I350's table (the model's choice;
            // the part's reset value was not checked here). The NVM turns
            // EEE on, advertised at 100 Mb/s and 1 Gb/s with low power idle
            // both ways, as Linux igb's default leaves it; DMA coalescing
            // is off after reset (DMACR 0).
            self.regs.insert(RXPBS, 0);
            self.regs.insert(EEER, EEER_LPI_MASK);
            self.regs
                .insert(IPCNFG, IPCNFG_EEE_100M_AN | IPCNFG_EEE_1G_AN);
        } else {
            self.regs.insert(RXPBS, RXPBS_DEFAULT_KB);
        }
        self.eeer_written = false;
        for q in self.rx.iter_mut().chain(self.tx.iter_mut()) {
            *q = QueueState::default();
        }
        self.an_at = None;
        self.bmcr = phy::BMCR_AUTOEN;
        // PCI-level MSI-X (the eventfds) survives a device reset; the
        // throttle history does not.
        self.msix.reset();
        self.partial.clear();
    }

    /// Whether the model plays an I350.
    pub fn i350(&self) -> bool {
        pollnic_hw::igb::is_i350(self.device)
    }

    /// The RX packet buffer in bytes, decoded as the part encodes RXPBS.
    pub fn packet_buffer_bytes(&self) -> u32 {
        let rxpbs = self.reg(RXPBS);
        let kb = if self.i350() {
            rxpbs_kb_i350(rxpbs).unwrap_or(0)
        } else {
            rxpbs & RXPBS_SIZE_MASK_82576
        };
        kb << 10
    }

    pub fn reset(&mut self) {
        self.load_defaults();
        self.reset_at = Some(Instant::now());
        self.log(Event::Reset);
    }

    pub fn in_reset(&self) -> bool {
        match (self.reset_at, self.cfg.reset_time) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(t), Some(d)) => t.elapsed() < d,
        }
    }

    /// EECD.AUTO_RD.
    pub fn eeprom_done(&self) -> bool {
        match (self.reset_at, self.cfg.reset_time) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(t), Some(d)) => t.elapsed() >= d + self.cfg.eeprom_time,
        }
    }

    /// STATUS.LU: CTRL.SLU set and autonegotiation restarted long enough ago.
    pub fn link_up(&self) -> bool {
        self.reg(CTRL) & CTRL_SLU != 0
            && match (self.an_at, self.cfg.link_time) {
                (Some(t), Some(d)) => t.elapsed() >= d,
                _ => false,
            }
    }

    pub fn reg(&self, off: u32) -> u32 {
        self.regs.get(&off).copied().unwrap_or(0)
    }

    fn base(&self, lo: u32, hi: u32) -> u64 {
        self.reg(lo) as u64 | (self.reg(hi) as u64) << 32
    }
    pub fn rx_base(&self, q: u16) -> u64 {
        self.base(rdbal(q), rdbah(q))
    }
    pub fn tx_base(&self, q: u16) -> u64 {
        self.base(tdbal(q), tdbah(q))
    }
}
