//! The model's state: register values, the time each reset, EEPROM load,
//! DMA init and autonegotiation started, the queues, the IOMMU, counters,
//! the wire, and what the driver did wrong.

use crate::model::iommu::Mappings;
use crate::model::ModelConfig;
use crate::model::{Event, QueueState, RegisterModel};
use std::collections::HashMap;
use std::time::Instant;

/// Queues the model implements (the 82599's 128).
pub(crate) const QUEUES: usize = 128;

pub(crate) struct State {
    pub cfg: ModelConfig,
    /// Plain register storage (offset → value).
    pub regs: HashMap<u32, u32>,
    /// Statistics counters by register offset (64-bit pairs under the low one).
    pub counters: HashMap<u32, u64>,
    /// When the last reset started.
    pub reset_at: Option<Instant>,
    /// When the last autonegotiation restart was written.
    pub an_at: Option<Instant>,
    pub rx: Vec<QueueState>,
    pub tx: Vec<QueueState>,
    pub iommu: Mappings,
    pub bus_master: bool,
    /// Frames sent on the wire, not yet taken.
    pub wire: Vec<Vec<u8>>,
    pub partial: Vec<u8>,
    pub violations: Vec<String>,
    pub events: Vec<Event>,
    pub msix: crate::model::msix::Msix,
}

impl State {
    pub fn new(cfg: ModelConfig) -> State {
        let mut s = State {
            cfg,
            regs: HashMap::new(),
            counters: HashMap::new(),
            reset_at: None,
            an_at: None,
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

    /// Record that the driver did something the real part would not take.
    /// Strict models panic right here, so the test fails at the culprit.
    pub fn violation(&mut self, msg: String) {
        let msg = format!("software 82599: {msg}");
        self.violations.push(msg.clone());
        if self.cfg.strict {
            panic!("{msg}");
        }
    }

    /// Register values after reset (and at power-on): everything 0 except
    /// what the EEPROM loads (RAL/RAH(0), AUTOC's link mode) and the
    /// 82599's non-zero defaults pollnic reads back.
    fn load_defaults(&mut self) {
        use pollnic_hw::ixgbe::{bits::*, regs::*};
        self.regs.clear();
        self.counters.clear();
        let m = self.cfg.mac;
        self.regs
            .insert(ral(0), u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
        self.regs
            .insert(rah(0), u32::from_le_bytes([m[4], m[5], 0, 0]) | RAH_AV);
        self.regs.insert(AUTOC, AUTOC_LMS_10G_SERIAL);
        self.regs.insert(AUTOC2, AUTOC2_10G_SFI);
        self.regs
            .insert(HLREG0, HLREG0_TXCRCEN | HLREG0_RXCRCSTRP | HLREG0_TXPADEN);
        self.regs.insert(RDRXCTL, RDRXCTL_CRCSTRIP);
        for q in 0..QUEUES as u16 {
            // SRRCTL default: 2 KiB buffers, legacy descriptors.
            self.regs.insert(srrctl(q), 2);
        }
        for n in 0..8 {
            self.regs
                .insert(rxpbsize(n), if n == 0 { RXPBSIZE_MAX } else { 0 });
            self.regs
                .insert(txpbsize(n), if n == 0 { TXPBSIZE_MAX } else { 0 });
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

    /// A global reset starts: registers to defaults, queues stopped, link down.
    pub fn reset(&mut self) {
        self.load_defaults();
        self.reset_at = Some(Instant::now());
        self.log(Event::Reset);
    }

    fn since_reset(&self) -> Option<std::time::Duration> {
        self.reset_at.map(|t| t.elapsed())
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

    /// LINKS.UP: autonegotiation was restarted long enough ago.
    pub fn link_up(&self) -> bool {
        match (self.an_at, self.cfg.link_time) {
            (Some(t), Some(d)) => t.elapsed() >= d,
            _ => false,
        }
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
