//! The software 82576's register file and its rules.

use super::state::{State, QUEUES};
use crate::iommu::Mappings;
use crate::{Event, RegisterModel};
use pollnic_hw::igb::stats::{Width, COUNTERS};
use pollnic_hw::igb::{bits::*, irq, phy, regs::*};
use std::collections::HashMap;
use std::sync::OnceLock;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Plain,
    Ctrl,
    Status,
    Eecd,
    Eerd,
    Mdic,
    /// ICR and EICR: cleared by a read, write 1 to clear.
    Cause,
    /// IMS (set) and IMC (clear).
    Mask,
    /// EIMS: unmask vectors (`super::irq`).
    Eims,
    /// EIMC: mask vectors.
    Eimc,
    /// EIAC: auto-clear, only in MSI-X mode.
    Eiac,
    /// IVAR0..7 and IVAR_MISC: cause to vector.
    Ivar,
    Rctl,
    Tctl,
    /// EEER (I350 only): its writes are tracked.
    Eeer,
    Mrqc,
    RxRingCfg(u16),
    Rdh(u16),
    Rdt(u16),
    Rxdctl(u16),
    TxRingCfg(u16),
    Tdh(u16),
    Tdt(u16),
    Txdctl(u16),
    Counter,
    CounterLo,
    CounterHi,
}

fn kinds() -> &'static HashMap<u32, Kind> {
    static K: OnceLock<HashMap<u32, Kind>> = OnceLock::new();
    K.get_or_init(|| {
        use Kind::*;
        let mut m = HashMap::new();
        for (o, k) in [
            (CTRL, Ctrl),
            (STATUS, Status),
            (EECD, Eecd),
            (EERD, Eerd),
            (CTRL_EXT, Plain),
            (FCAL, Plain),
            (FCAH, Plain),
            (FCT, Plain),
            (FCTTV, Plain),
            (FCRTL, Plain),
            (FCRTH, Plain),
            (RXPBS, Plain),
            (MDIC, Mdic),
            (ICR, Cause),
            (EICR, Cause),
            (IMS, Mask),
            (IMC, Mask),
            (EIMS, Eims),
            (EIMC, Eimc),
            (EIAC, Eiac),
            (irq::GPIE, Plain),
            (irq::EIAM, Plain),
            (irq::IVAR_MISC, Ivar),
            (RCTL, Rctl),
            (RLPML, Plain),
            (TCTL, Tctl),
            (TIPG, Plain),
            (RXCSUM, Plain),
            (MRQC, Mrqc),
        ] {
            m.insert(o, k);
        }
        m.insert(EEER, Eeer);
        for o in I350_ONLY {
            m.entry(o).or_insert(Plain);
        }
        for n in 0..128 {
            m.insert(MTA + 4 * n, Plain);
        }
        for n in 0..irq::IVAR_COUNT as u32 {
            m.insert(irq::IVAR0 + 4 * n, Ivar);
        }
        for v in 0..super::irq::VECTORS as u16 {
            m.insert(irq::eitr(v), Plain);
        }
        for n in 0..16 {
            m.insert(RAL0 + 8 * n, Plain);
            m.insert(RAH0 + 8 * n, Plain);
        }
        for n in 0..32 {
            m.insert(RETA + 4 * n, Plain);
        }
        for n in 0..10 {
            m.insert(RSSRK + 4 * n, Plain);
        }
        for q in 0..QUEUES as u16 {
            for o in [rdbal(q), rdbah(q), rdlen(q), srrctl(q)] {
                m.insert(o, RxRingCfg(q));
            }
            m.insert(rdh(q), Rdh(q));
            m.insert(rdt(q), Rdt(q));
            m.insert(rxdctl(q), Rxdctl(q));
            for o in [tdbal(q), tdbah(q), tdlen(q)] {
                m.insert(o, TxRingCfg(q));
            }
            m.insert(tdh(q), Tdh(q));
            m.insert(tdt(q), Tdt(q));
            m.insert(txdctl(q), Txdctl(q));
        }
        for c in COUNTERS {
            match c.width {
                Width::Bits32(o) => m.insert(o, Counter),
                Width::Bits64 { lo, hi } => {
                    m.insert(lo, CounterLo);
                    m.insert(hi, CounterHi)
                }
            };
        }
        m
    })
}

/// The flow-control rule, checked when the receiver comes on: a port that
/// sends PAUSE (CTRL.TFCE, which the model's EEPROM sets at reset, as the
/// NVM of common boards does) needs FCRTH above FCRTL and within the packet
/// buffer, and PAUSE frames need their address and type in FCAL/FCAH/FCT
/// (Linux `igb_setup_link`, `igb_set_fc_watermarks`); with FCRTH left at 0
/// the port would send XOFF at once and keep its partner paused.
fn check_flow_control(s: &mut State) {
    let ctrl = s.reg(CTRL);
    if ctrl & (CTRL_RFCE | CTRL_TFCE) == 0 {
        return;
    }
    let pba = s.packet_buffer_bytes();
    let (high, low) = (s.reg(FCRTH), s.reg(FCRTL) & !FCRTL_XONE);
    if ctrl & CTRL_TFCE != 0 && (high == 0 || low >= high || high > pba) {
        s.violation(format!(
            "receiver enabled with CTRL.TFCE set but FCRTH {high:#x} / FCRTL {low:#x} for a \
             {pba}-byte packet buffer: the port would send XOFF at once (program the water \
             marks, Linux igb_set_fc_watermarks, or clear TFCE)"
        ));
    }
    if (s.reg(FCAL), s.reg(FCAH), s.reg(FCT))
        != (
            FLOW_CONTROL_ADDRESS_LOW,
            FLOW_CONTROL_ADDRESS_HIGH,
            FLOW_CONTROL_TYPE,
        )
    {
        s.violation(
            "receiver enabled with flow control on but FCAL/FCAH/FCT not holding the PAUSE \
             address 01:80:C2:00:00:01 and type 0x8808 (Linux igb_setup_link)"
                .to_owned(),
        );
    }
}

/// Registers only the I350 has: Energy Efficient Ethernet (EEER, IPCNFG)
/// and DMA coalescing (DMACR, DMCTLX, FCRTC, DMCTXTH, PCIEMISC, DMCRTRH).
/// The 82576 model refuses them as unknown offsets.
const I350_ONLY: [u32; 8] = [
    EEER, IPCNFG, DMACR, DMCTLX, FCRTC, DMCTXTH, PCIEMISC, DMCRTRH,
];

/// The EEE rule (I350), checked when the receiver comes on: EEER must have
/// been written since the reset. The NVM turns low power idle on, which
/// adds wake-up latency to the first frame after a quiet spell; a driver
/// must decide (Linux `igb_set_eee_i350` writes it on every reset, either way).
fn check_eee(s: &mut State) {
    if s.i350() && !s.eeer_written {
        let eeer = s.reg(EEER);
        s.violation(format!(
            "receiver enabled with EEER ({eeer:#x}) as the NVM loaded it: Energy Efficient \
             Ethernet was never set on or off since the reset (Linux igb_set_eee_i350)"
        ));
    }
}

fn kind(s: &mut State, off: u32, what: &str) -> Option<Kind> {
    if !s.i350() && I350_ONLY.contains(&off) {
        s.violation(format!(
            "{what} of {off:#x}, a register of the I350 (EEE or DMA coalescing) the 82576 \
             does not have"
        ));
        return None;
    }
    let k = (off % 4 == 0).then(|| kinds().get(&off).copied()).flatten();
    if k.is_none() {
        s.violation(format!(
            "{what} of {off:#x}, a register the model does not implement (a wrong offset?)"
        ));
    }
    k
}

/// Linux `igb_reset_hw_82575`/`igb_reset_hw_82580` quiesce the port before
/// CTRL.RST: PCIe master requests disabled (CTRL.GIO_MASTER_DISABLE, so no
/// DMA is in flight when the MAC resets), then RCTL and TCTL with their
/// enables off. A reset with either missing is a violation naming the step.
fn check_stopped_before_reset(s: &mut State) {
    let mut missing = Vec::new();
    if s.reg(CTRL) & CTRL_GIO_MASTER_DISABLE == 0 {
        missing.push("PCIe master disable (CTRL.GIO_MASTER_DISABLE) not set");
    }
    if s.reg(RCTL) & RCTL_EN != 0 {
        missing.push("receiver still on (RCTL.EN)");
    }
    if s.reg(TCTL) & TCTL_EN != 0 {
        missing.push("transmitter still on (TCTL.EN)");
    }
    if !missing.is_empty() {
        s.violation(format!(
            "CTRL.RST without the stop before it (Linux igb_reset_hw_82575): {}",
            missing.join(", ")
        ));
    }
}

pub(crate) fn read(s: &mut State, off: u32) -> u32 {
    super::irq::tick(s);
    let Some(k) = kind(s, off, "read") else {
        return 0;
    };
    if s.in_reset() && !matches!(k, Kind::Ctrl | Kind::Status) {
        s.violation(format!("read of {off:#x} while the device is in reset"));
        return 0;
    }
    match k {
        Kind::Ctrl => s.reg(CTRL) | if s.in_reset() { CTRL_RST } else { 0 },
        Kind::Status => {
            let master = if s.reg(CTRL) & CTRL_GIO_MASTER_DISABLE == 0 {
                STATUS_GIO_MASTER_ENABLE
            } else {
                0
            };
            master
                | if s.link_up() {
                    STATUS_LU | STATUS_FD | 2 << STATUS_SPEED_SHIFT
                } else {
                    0
                }
        }
        Kind::Eecd => {
            if s.eeprom_done() {
                EECD_AUTO_RD
            } else {
                0
            }
        }
        Kind::Cause => s.regs.remove(&off).unwrap_or(0),
        Kind::Eimc => 0,
        Kind::Rxdctl(q) => {
            let on = s.rx[q as usize].read_enable();
            s.reg(off) & !XDCTL_ENABLE | if on { XDCTL_ENABLE } else { 0 }
        }
        Kind::Txdctl(q) => {
            let on = s.tx[q as usize].read_enable();
            s.reg(off) & !XDCTL_ENABLE | if on { XDCTL_ENABLE } else { 0 }
        }
        Kind::Rdh(q) => s.rx[q as usize]
            .ring
            .as_ref()
            .map_or(s.reg(off), |r| r.head() as u32),
        Kind::Tdh(q) => s.tx[q as usize]
            .ring
            .as_ref()
            .map_or(s.reg(off), |r| r.head() as u32),
        Kind::Counter => s.counters.remove(&off).unwrap_or(0) as u32,
        Kind::CounterLo => s.counters.get(&off).copied().unwrap_or(0) as u32,
        Kind::CounterHi => (s.counters.remove(&(off - 4)).unwrap_or(0) >> 32) as u32,
        _ => s.reg(off),
    }
}

pub(crate) fn write(s: &mut State, off: u32, val: u32) {
    super::irq::tick(s);
    let Some(k) = kind(s, off, "write") else {
        return;
    };
    if s.in_reset() {
        s.violation(format!(
            "write of {val:#x} to {off:#x} while the device is in reset (poll CTRL.RST first)"
        ));
        return;
    }
    match k {
        Kind::Status | Kind::Eecd | Kind::Counter | Kind::CounterLo | Kind::CounterHi => {
            s.violation(format!("write of {val:#x} to read-only register {off:#x}"));
        }
        Kind::Ctrl => {
            if val & CTRL_RST != 0 {
                check_stopped_before_reset(s);
                s.reset();
            } else {
                s.regs.insert(CTRL, val);
            }
        }
        Kind::Eerd => {
            if val & EERD_START != 0 {
                let w = (val >> EERD_ADDR_SHIFT) as usize;
                let m = s.cfg.mac;
                let data = if w < 3 {
                    u16::from_le_bytes([m[2 * w], m[2 * w + 1]])
                } else {
                    0xFFFF
                };
                s.regs
                    .insert(EERD, EERD_DONE | (data as u32) << EERD_DATA_SHIFT);
            }
        }
        Kind::Mdic => mdic(s, val),
        Kind::Cause => {
            let v = s.reg(off) & !val;
            s.regs.insert(off, v);
        }
        Kind::Mask => {
            s.regs.insert(off, val);
        }
        Kind::Eims => super::irq::write_eims(s, val),
        Kind::Eimc => super::irq::write_eimc(s, val),
        Kind::Eiac => super::irq::write_eiac(s, val),
        Kind::Ivar => super::irq::write_ivar(s, off, val),
        Kind::Rctl => {
            let (was, on) = (s.reg(RCTL) & RCTL_EN != 0, val & RCTL_EN != 0);
            if was != on {
                s.log(Event::RxEnable(on));
            }
            if on && !was {
                check_flow_control(s);
                check_eee(s);
            }
            s.regs.insert(RCTL, val);
        }
        Kind::Tctl => {
            let (was, on) = (s.reg(TCTL) & TCTL_EN != 0, val & TCTL_EN != 0);
            if was != on {
                s.log(Event::TxDmaEnable(on));
            }
            s.regs.insert(TCTL, val);
        }
        Kind::Mrqc => {
            let mode = val & MRQC_MODE_MASK;
            if mode != 0 && mode != MRQC_MODE_RSS {
                s.violation(format!(
                    "MRQC mode {mode:#x}: the model implements 0 (none) and 010b (RSS); the \
                     82599's RSS value 1 is not igb's"
                ));
            }
            s.regs.insert(MRQC, val);
        }
        Kind::RxRingCfg(q) | Kind::Rdh(q) => {
            if s.rx[q as usize].enabled {
                s.violation(format!(
                    "RX queue {q} register {off:#x} written while the queue is enabled"
                ));
            }
            s.regs.insert(off, val);
        }
        Kind::TxRingCfg(q) | Kind::Tdh(q) => {
            if s.tx[q as usize].enabled {
                s.violation(format!(
                    "TX queue {q} register {off:#x} written while the queue is enabled"
                ));
            }
            s.regs.insert(off, val);
        }
        Kind::Rdt(q) => {
            tail_check(s, off, val, q, true);
            s.regs.insert(off, val);
        }
        Kind::Tdt(q) => {
            tail_check(s, off, val, q, false);
            s.regs.insert(off, val);
            super::datapath::transmit(s, q);
        }
        Kind::Rxdctl(q) => queue_enable(s, off, q, val, true),
        Kind::Txdctl(q) => queue_enable(s, off, q, val, false),
        Kind::Eeer => {
            s.eeer_written = true;
            s.regs.insert(off, val);
        }
        Kind::Plain => {
            s.regs.insert(off, val);
        }
    }
}

/// MDIC: PHY register access at PHY address 1; completes at once.
fn mdic(s: &mut State, val: u32) {
    let reg = (val >> MDIC_REG_SHIFT) & 0x1f;
    let addr = (val >> MDIC_PHY_SHIFT) & 0x1f;
    if addr != phy::PHY_ADDR {
        s.regs.insert(MDIC, val | MDIC_READY | MDIC_ERROR);
        return;
    }
    let data = if val & MDIC_OP_WRITE != 0 {
        if reg == phy::PHY_CTRL {
            let d = val as u16;
            if d & phy::BMCR_RESTART_AN != 0 && d & phy::BMCR_PDOWN == 0 {
                s.an_at = Some(std::time::Instant::now());
            }
            s.bmcr = d & !phy::BMCR_RESTART_AN;
        }
        val & MDIC_DATA_MASK
    } else {
        match reg {
            r if r == phy::PHY_CTRL => s.bmcr as u32,
            r if r == phy::PHY_STATUS && s.link_up() => {
                (phy::BMSR_LSTATUS | phy::BMSR_ANEGCOMPLETE) as u32
            }
            _ => 0,
        }
    };
    s.regs
        .insert(MDIC, (val & !MDIC_DATA_MASK) | data | MDIC_READY);
}

fn tail_check(s: &mut State, off: u32, val: u32, q: u16, rx: bool) {
    let st = if rx {
        &s.rx[q as usize]
    } else {
        &s.tx[q as usize]
    };
    let count = st.ring.as_ref().map(|r| r.count() as u32);
    if !st.latched_on() && val != 0 {
        s.violation(format!(
            "tail {off:#x} of queue {q} set to {val} before the queue's enable latched"
        ));
    }
    if let Some(c) = count.filter(|&c| val >= c) {
        s.violation(format!(
            "tail {off:#x} = {val} beyond the {c}-descriptor ring"
        ));
    }
}

fn queue_enable(s: &mut State, off: u32, q: u16, val: u32, rx: bool) {
    let st = if rx {
        &s.rx[q as usize]
    } else {
        &s.tx[q as usize]
    };
    let (was, on) = (st.enabled, val & XDCTL_ENABLE != 0);
    s.regs.insert(off, val & !XDCTL_ENABLE);
    if on == was {
        return;
    }
    let latch = s.cfg.latch_reads;
    let (name, event) = if rx {
        ("RXDCTL", Event::RxQueue(q, on))
    } else {
        ("TXDCTL", Event::TxQueue(q, on))
    };
    if on {
        let (base, len) = if rx {
            (s.rx_base(q), s.reg(rdlen(q)))
        } else {
            (s.tx_base(q), s.reg(tdlen(q)))
        };
        let srrctl = s.reg(srrctl(q));
        let problem = if rx && srrctl & (0x7 << 25) != SRRCTL_DESCTYPE_ADV_ONEBUF {
            Some(format!(
                "SRRCTL({q}) does not select advanced one-buffer descriptors"
            ))
        } else if rx && srrctl & SRRCTL_BSIZEPKT_MASK == 0 {
            Some(format!("SRRCTL({q}).BSIZEPKT is 0"))
        } else if len == 0 || len % 128 != 0 || base % 128 != 0 {
            Some(format!(
                "base {base:#x} / length {len} not 128-byte aligned"
            ))
        } else {
            None
        };
        let ring = s.iommu.ring(base, (len / 16) as u16);
        match (problem, ring) {
            (None, Some(ring)) => {
                let st = if rx {
                    &mut s.rx[q as usize]
                } else {
                    &mut s.tx[q as usize]
                };
                st.ring = Some(ring);
                st.enabled = true;
                st.latch_reads = latch;
                s.log(event);
            }
            (p, _) => s.violation(format!(
                "{name}({q}).ENABLE set but the ring is not configured: {}",
                p.unwrap_or_else(|| format!("base {base:#x} is not mapped in the IOMMU"))
            )),
        }
    } else {
        let st = if rx {
            &mut s.rx[q as usize]
        } else {
            &mut s.tx[q as usize]
        };
        st.enabled = false;
        st.ring = None;
        st.latch_reads = latch;
        s.log(event);
    }
}

/// The model's register file and IOMMU as `Device` reaches them.
impl RegisterModel for State {
    fn read(&mut self, off: u32) -> u32 {
        read(self, off)
    }
    fn write(&mut self, off: u32, val: u32) {
        write(self, off, val)
    }
    fn mappings(&mut self) -> &mut Mappings {
        &mut self.iommu
    }
    fn unmapping(&mut self, iova: u64, len: usize) {
        if self.bus_master {
            let busy = self
                .rx
                .iter()
                .position(|q| q.enabled)
                .map(|q| format!("RX queue {q} is enabled"))
                .or_else(|| {
                    self.tx
                        .iter()
                        .position(|q| q.enabled)
                        .map(|q| format!("TX queue {q} is enabled"))
                });
            if let Some(why) = busy {
                self.violation(format!(
                    "DMA memory at IOVA {iova:#x} ({len} bytes) freed while the device can \
                     still DMA ({why}, bus mastering on): stop the queues and reset first"
                ));
            }
        }
        let inside = |b: u64| b >= iova && b < iova + len as u64;
        for q in 0..QUEUES as u16 {
            if inside(self.rx_base(q)) {
                let st = &mut self.rx[q as usize];
                st.ring = None;
                st.enabled = false;
            }
            if inside(self.tx_base(q)) {
                let st = &mut self.tx[q as usize];
                st.ring = None;
                st.enabled = false;
            }
        }
    }
    fn log(&mut self, e: Event) {
        self.events.push(e);
    }
    fn bus_master_off(&mut self) {
        self.bus_master = false;
    }
    fn msix(
        &mut self,
        events: Option<Vec<std::sync::Arc<pollnic::lowlevel::io::IrqEvent>>>,
    ) -> Result<(), pollnic::irq::MsixError> {
        match events {
            Some(e) if e.len() > super::irq::VECTORS => {
                Err(pollnic::irq::MsixError::TooFewVectors {
                    available: super::irq::VECTORS as u32,
                    needed: e.len() as u16,
                })
            }
            Some(e) => {
                self.msix.enable(e);
                Ok(())
            }
            None => {
                self.msix.disable();
                Ok(())
            }
        }
    }
}
