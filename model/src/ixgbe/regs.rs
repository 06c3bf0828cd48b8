//! The model's register file: which offsets exist, what reading and writing
//! each one does, and the rules a driver must keep (each broken rule is a
//! violation naming the register and the rule).

use super::state::{State, QUEUES};
use crate::iommu::Mappings;
use crate::{Event, RegisterModel};
use pollnic_hw::ixgbe::stats::{Width, COUNTERS};
use pollnic_hw::ixgbe::{bits::*, regs::*};
use std::collections::HashMap;
use std::sync::OnceLock;

/// What a register offset is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Stored as written, no side effect.
    Plain,
    Ctrl,
    Status,
    Eec,
    Eerd,
    Eicr,
    Eims,
    Eimc,
    Autoc,
    /// CTRL_EXT: DRV_LOAD's release is checked against AUTOC2.
    CtrlExt,
    Links,
    /// ANLP1: read-only, the AN state after a restart.
    Anlp1,
    /// ESDP: the software-definable pins (laser, module present).
    Esdp,
    Rxctrl,
    Rdrxctl,
    Mrqc,
    Reta,
    Secrxstat,
    Sectxstat,
    Dmatxctl,
    Mtqc,
    /// A per-queue RX ring register (base, length, SRRCTL) of queue q.
    RxRingCfg(u16),
    Rdh(u16),
    Rdt(u16),
    Rxdctl(u16),
    TxRingCfg(u16),
    Tdh(u16),
    Tdt(u16),
    Txdctl(u16),
    /// IVAR(0..64): queue causes to MSI-X vectors (`super::irq`).
    Ivar,
    /// A 32-bit clear-on-read counter.
    Counter,
    /// The low half of a 64-bit counter pair.
    CounterLo,
    /// The high half (reading it clears the pair).
    CounterHi,
}

/// Every register the model implements, by offset.
pub(crate) fn kinds() -> &'static HashMap<u32, Kind> {
    static K: OnceLock<HashMap<u32, Kind>> = OnceLock::new();
    K.get_or_init(|| {
        use Kind::*;
        let mut m = HashMap::new();
        for (o, k) in [
            (CTRL, Ctrl),
            (STATUS, Status),
            (CTRL_EXT, CtrlExt),
            (EEC, Eec),
            (EERD, Eerd),
            (EICR, Eicr),
            (EIAC, Plain),
            (EIMS, Eims),
            (EIMC, Eimc),
            (eimc_ex(0), Eimc),
            (eimc_ex(1), Eimc),
            (GPIE, Plain),
            (HLREG0, Plain),
            (MAXFRS, Plain),
            (AUTOC, Autoc),
            (LINKS, Links),
            (AUTOC2, Plain),
            (ANLP1, Anlp1),
            (ESDP, Esdp),
            (FWSM, Plain),
            (GCR_EXT, Plain),
            (MCSTCTRL, Plain),
            (RXCTRL, Rxctrl),
            (RDRXCTL, Rdrxctl),
            (FCTRL, Plain),
            (VLNCTRL, Plain),
            (RXCSUM, Plain),
            (MRQC, Mrqc),
            (SECRXCTRL, Plain),
            (SECRXSTAT, Secrxstat),
            (DMATXCTL, Dmatxctl),
            (RTTDCS, Plain),
            (MTQC, Mtqc),
            (DTXMXSZRQ, Plain),
            (PFDTXGSWC, Plain),
            (SECTXCTRL, Plain),
            (SECTXSTAT, Sectxstat),
        ] {
            m.insert(o, k);
        }
        for o in [MFLCN, FCCFG, FCRTV] {
            m.insert(o, Plain);
        }
        for n in 0..4 {
            m.insert(fcttv(n), Plain);
        }
        for n in 0..8 {
            m.insert(fcrtl(n), Plain);
            m.insert(fcrth(n), Plain);
            m.insert(rxpbsize(n), Plain);
            m.insert(txpbsize(n), Plain);
            m.insert(txpbthresh(n), Plain);
        }
        for n in 0..128 {
            m.insert(mta(n), Plain);
            m.insert(ral(n), Plain);
            m.insert(rah(n), Plain);
            m.insert(vfta(n), Plain);
        }
        for n in 0..32 {
            m.insert(reta(n), Reta);
            m.insert(rqsmr(n), Plain);
            m.insert(tqsm(n), Plain);
        }
        for n in 0..10 {
            m.insert(rssrk(n), Plain);
        }
        for n in 0..64 {
            m.insert(pollnic_hw::ixgbe::irq::ivar(n), Ivar);
        }
        for v in 0..24 {
            m.insert(pollnic_hw::ixgbe::irq::eitr(v), Plain);
        }
        m.insert(pollnic_hw::ixgbe::irq::EIAM, Plain);
        for n in 0..64 {
            m.insert(psrtype(n), Plain);
        }
        for q in 0..QUEUES as u16 {
            for o in [rdbal(q), rdbah(q), rdlen(q), srrctl(q)] {
                m.insert(o, RxRingCfg(q));
            }
            m.insert(rdh(q), Rdh(q));
            m.insert(rdt(q), Rdt(q));
            m.insert(rxdctl(q), Rxdctl(q));
            m.insert(dca_rxctrl(q), Plain);
            for o in [tdbal(q), tdbah(q), tdlen(q)] {
                m.insert(o, TxRingCfg(q));
            }
            m.insert(tdh(q), Tdh(q));
            m.insert(tdt(q), Tdt(q));
            m.insert(txdctl(q), Txdctl(q));
            m.insert(dca_txctrl(q), Plain);
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

fn kind(s: &mut State, off: u32, what: &str) -> Option<Kind> {
    if off % 4 != 0 {
        s.violation(format!("unaligned {what} at {off:#x}"));
        return None;
    }
    let k = kinds().get(&off).copied();
    if k.is_none() {
        s.violation(format!(
            "{what} of {off:#x}, a register the model does not implement (a wrong offset?)"
        ));
    }
    k
}

/// A register read.
pub(crate) fn read(s: &mut State, off: u32) -> u32 {
    super::irq::tick(s);
    let Some(k) = kind(s, off, "read") else {
        return 0;
    };
    if s.in_reset() && !matches!(k, Kind::Ctrl | Kind::Status) {
        s.violation(format!(
            "read of {off:#x} while the device is in reset (poll CTRL.RST first)"
        ));
        return 0;
    }
    match k {
        Kind::Ctrl => s.reg(CTRL) | if s.in_reset() { CTRL_RST_MASK } else { 0 },
        Kind::Status => {
            if s.master_pending(s.reg(CTRL) & CTRL_GIO_DIS != 0) {
                STATUS_GIO
            } else {
                0
            }
        }
        Kind::Esdp => {
            // SDP2 is an input: the cage's module-present line.
            s.reg(ESDP) & !ESDP_SDP2 | if s.module_present { ESDP_SDP2 } else { 0 }
        }
        Kind::Anlp1 => match s.an_at {
            Some(t) if s.now() >= t + super::state::AN_STATE_TIME => 1 << 16,
            _ => 0,
        },
        Kind::Eec => EEC_PRES | if s.eeprom_done() { EEC_ARD } else { 0 },
        Kind::Rdrxctl => {
            s.reg(RDRXCTL)
                | if s.dma_init_done() {
                    RDRXCTL_DMAIDONE
                } else {
                    0
                }
        }
        Kind::Links => {
            if s.link_up() {
                let speed = if s.link_speed_1g() {
                    LINKS_SPEED_1G
                } else {
                    LINKS_SPEED_10G
                };
                LINKS_UP | speed | LINKS_KX_AN_COMP
            } else {
                0
            }
        }
        Kind::Eicr => {
            let v = s.reg(EICR);
            s.regs.insert(EICR, 0);
            v
        }
        Kind::Secrxstat => {
            if s.reg(SECRXCTRL) & SECRXCTRL_RX_DIS != 0 {
                SECRXSTAT_SECRX_RDY
            } else {
                0
            }
        }
        Kind::Sectxstat => SECTXSTAT_SECTX_RDY,
        Kind::Rxdctl(q) => {
            let on = s.rx[q as usize].read_enable();
            s.reg(off) & !XDCTL_ENABLE | if on { XDCTL_ENABLE } else { 0 }
        }
        Kind::Txdctl(q) => {
            let on = s.tx[q as usize].read_enable();
            s.reg(off) & !XDCTL_ENABLE | if on { XDCTL_ENABLE } else { 0 }
        }
        Kind::Rdh(q) => match &s.rx[q as usize].ring {
            Some(r) => r.head() as u32,
            None => s.reg(off),
        },
        Kind::Tdh(q) => match &s.tx[q as usize].ring {
            Some(r) => r.head() as u32,
            None => s.reg(off),
        },
        Kind::Counter => s.counters.remove(&off).unwrap_or(0) as u32,
        Kind::CounterLo => s.counters.get(&off).copied().unwrap_or(0) as u32,
        Kind::CounterHi => (s.counters.remove(&(off - 4)).unwrap_or(0) >> 32) as u32,
        _ => s.reg(off),
    }
}

/// Registers software may write before the EEPROM and DMA init are done.
fn allowed_early(k: Kind) -> bool {
    matches!(k, Kind::Ctrl | Kind::Eimc | Kind::Eims | Kind::Eicr)
}

/// A register write.
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
    let init_done = s.eeprom_done() && s.dma_init_done();
    if !init_done && !allowed_early(k) {
        s.violation(format!(
            "write of {val:#x} to {off:#x} before the EEPROM auto-read and DMA init completed \
             (wait for EEC.ARD and RDRXCTL.DMAIDONE, 82599 datasheet §4.6.3)"
        ));
        return;
    }
    s.undefined.remove(&off);
    match k {
        Kind::Status
        | Kind::Eec
        | Kind::Links
        | Kind::Anlp1
        | Kind::Secrxstat
        | Kind::Sectxstat
        | Kind::Counter
        | Kind::CounterLo
        | Kind::CounterHi => {
            s.violation(format!("write of {val:#x} to read-only register {off:#x}"));
        }
        Kind::Ctrl => {
            if val & CTRL_LNK_RST != 0 && s.link_up() {
                s.violation(
                    "CTRL.LNK_RST with the link up: it may reset the PHY under manageability \
                     firmware; Linux ixgbe_reset_hw_82599 uses CTRL.RST alone then"
                        .to_owned(),
                );
            }
            if val & CTRL_RST_MASK != 0 {
                s.reset();
            } else {
                s.regs.insert(CTRL, val);
            }
        }
        Kind::Eerd => {
            // Reads complete at once; the model's EEPROM holds the MAC in words 0..3.
            if val & EERD_START != 0 {
                let word = (val >> EERD_ADDR_SHIFT) as usize;
                let m = s.cfg.mac;
                let data = if word < 3 {
                    u16::from_le_bytes([m[2 * word], m[2 * word + 1]])
                } else {
                    0xFFFF
                };
                s.regs.insert(
                    EERD,
                    (val & !EERD_START) | EERD_DONE | (data as u32) << EERD_DATA_SHIFT,
                );
            }
        }
        Kind::Eicr => {
            let v = s.reg(EICR) & !val;
            s.regs.insert(EICR, v);
        }
        Kind::Eims => super::irq::write_eims(s, val),
        Kind::Eimc => {
            if off == EIMC {
                super::irq::write_eimc(s, val);
            }
        }
        Kind::Ivar => super::irq::write_ivar(s, off, val),
        Kind::CtrlExt => ctrl_ext(s, val),
        Kind::Autoc => {
            if val & AUTOC_AN_RESTART != 0 {
                s.an_at = Some(s.now());
                if s.first_autoc2_upper.is_none() {
                    s.first_autoc2_upper = Some(s.reg(AUTOC2) & AUTOC2_UPPER_MASK);
                }
                if super::state::Board::of(s.device) == super::state::Board::NoLaser {
                    let toggled = (val ^ s.reg(AUTOC)) & AUTOC_LMS_MASK == 0x4 << AUTOC_LMS_SHIFT;
                    if toggled && !s.pipeline_toggled {
                        s.pipeline_toggled = true;
                    } else if s.pipeline_toggled {
                        s.pipeline_toggled = false;
                        if s.reg(AUTOC2) & AUTOC2_LINK_DISABLE_MASK == 0 {
                            s.pipeline_done_at = Some(s.now());
                        }
                    }
                }
            }
            s.regs.insert(AUTOC, val & !AUTOC_AN_RESTART);
        }
        Kind::Rdrxctl => {
            s.regs.insert(RDRXCTL, val & !RDRXCTL_DMAIDONE);
        }
        Kind::Esdp => esdp(s, val),
        Kind::Mrqc => {
            let mrqe = val & MRQC_MRQE_MASK;
            if mrqe > MRQC_MRQE_RSS {
                s.violation(format!(
                    "MRQC.MRQE = {mrqe:#x}: the model implements 0 (no RSS) and 1 (RSS only); \
                     other values select DCB/virtualization modes (igb's RSS value 2 is not \
                     the 82599's)"
                ));
            }
            s.regs.insert(MRQC, val);
        }
        Kind::Reta => {
            if val & !(RETA_ENTRY_MASK * 0x0101_0101) != 0 {
                s.violation(format!(
                    "RETA register {off:#x} = {val:#x}: 82599 entries have 4 bits (bits 7:4 of \
                     each byte are reserved)"
                ));
            }
            s.regs.insert(off, val);
        }
        Kind::Mtqc => {
            if s.reg(RTTDCS) & RTTDCS_ARBDIS == 0 {
                s.violation(
                    "MTQC written with the TX arbiter running (set RTTDCS.ARBDIS first)".into(),
                );
            }
            s.regs.insert(MTQC, val);
        }
        Kind::Rxctrl => rxctrl(s, val),
        Kind::Dmatxctl => dmatxctl(s, val),
        Kind::RxRingCfg(q) => {
            // A disabled queue may be set up with the receiver on
            // (datasheet §4.6.7.1); only a running queue's ring is off limits.
            if s.rx[q as usize].enabled {
                s.violation(format!(
                    "RX queue {q} register {off:#x} written while the queue is enabled \
                     (disable it first, 82599 §4.6.7.1)"
                ));
            }
            s.regs.insert(off, val);
        }
        Kind::TxRingCfg(q) => {
            if s.tx[q as usize].enabled {
                s.violation(format!(
                    "TX queue {q} register {off:#x} written while the queue is enabled"
                ));
            }
            s.regs.insert(off, val);
        }
        Kind::Rdh(q) | Kind::Tdh(q) => {
            // Writing a running queue's head to where it already is has no
            // effect: ixy, ixy.rs and DPDK write RDH = 0 right after the
            // enable, before the first tail. Moving it is a violation.
            let ring = match k {
                Kind::Rdh(_) => &s.rx[q as usize].ring,
                _ => &s.tx[q as usize].ring,
            };
            if let Some(head) = ring.as_ref().map(|r| r.head() as u32) {
                if head != val {
                    s.violation(format!(
                        "head register {off:#x} of running queue {q} moved from {head} to {val}"
                    ));
                }
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
        Kind::Rxdctl(q) => rxdctl_write(s, off, q, val),
        Kind::Txdctl(q) => txdctl_write(s, off, q, val),
        Kind::Plain => {
            s.regs.insert(off, val);
        }
    }
}

/// CTRL_EXT. The AUTOC2 rule, checked when the driver gives the port back
/// (a write that leaves DRV_LOAD clear, also where the reset cleared it
/// already, as Linux `ixgbe_release_hw_control` writes it): every reset reloads AUTOC2 from the EEPROM, whose
/// upper half may differ from what the port ran with (this model's EEPROM
/// disables the link on boards without laser control), so AUTOC2's upper
/// half must again read as it did when the driver first started the link.
/// Linux `ixgbe_reset_hw_82599` restores it after every reset but the
/// first (`orig_autoc2`); a port left with its NVM's link-disable bits set
/// drops the link manageability firmware may still be using.
fn ctrl_ext(s: &mut State, val: u32) {
    let released = val & CTRL_EXT_DRV_LOAD == 0;
    let upper = s.reg(AUTOC2) & AUTOC2_UPPER_MASK;
    if let Some(first) = s.first_autoc2_upper.filter(|&f| released && f != upper) {
        s.violation(format!(
            "port given back (CTRL_EXT written with DRV_LOAD clear) with AUTOC2's upper half {upper:#010x} where it read \
             {first:#010x} when the link was first started: the reset reloaded the EEPROM's \
             value; restore AUTOC2 bits 31:16 after every reset but the first (Linux \
             ixgbe_reset_hw_82599, orig_autoc2)"
        ));
    }
    s.regs.insert(CTRL_EXT, val);
}

fn tail_check(s: &mut State, off: u32, val: u32, q: u16, rx: bool) {
    let st = if rx {
        &s.rx[q as usize]
    } else {
        &s.tx[q as usize]
    };
    let count = st.ring.as_ref().map(|r| r.count() as u32);
    // Software may give descriptors to a queue only once it has seen the
    // enable latch (its reads used up the latch delay).
    let enabled = st.latched_on();
    if !enabled && val != 0 {
        s.violation(format!(
            "tail {off:#x} of queue {q} set to {val} before the queue's enable latched \
             (write the tail after RXDCTL/TXDCTL.ENABLE reads back 1, 82599 §4.6.7/§4.6.8)"
        ));
    }
    if let Some(c) = count.filter(|&c| val >= c) {
        s.violation(format!(
            "tail {off:#x} = {val} beyond the {c}-descriptor ring"
        ));
    }
}

fn rxctrl(s: &mut State, val: u32) {
    let was = s.reg(RXCTRL) & RXCTRL_RXEN != 0;
    let on = val & RXCTRL_RXEN != 0;
    if on && !was {
        if s.reg(psrtype(0)) == 0 {
            s.violation(
                "RXCTRL.RXEN set with PSRTYPE(0) never written since reset (Linux \
                 ixgbe_setup_psrtype: \"PSRTYPE must be initialized in non 82598 adapters\")"
                    .to_owned(),
            );
        }
        // RXEN may come before the queues are enabled (ixy does that; a
        // frame for a disabled queue is dropped and counted in MPC).
        if let Some(off) = s.undefined.iter().min().copied() {
            let n = s.undefined.len();
            s.violation(format!(
                "RXCTRL.RXEN set while {n} receive filter registers (MTA, RAR 1..127, VFTA) \
                 still hold the undefined values reset left, e.g. {off:#x}: clear them first \
                 (Linux ixgbe_init_rx_addrs_generic, ixgbe_clear_vfta_generic)"
            ));
        }
        let hl = s.reg(HLREG0) & HLREG0_RXCRCSTRP != 0;
        let rd = s.reg(RDRXCTL) & RDRXCTL_CRCSTRIP != 0;
        if hl != rd {
            s.violation(format!(
                "RXCTRL.RXEN set with HLREG0.RXCRCSTRP = {hl} but RDRXCTL.CRCSTRIP = {rd}: the \
                 82599 needs both the same"
            ));
        }
        // Flow control (Linux ixgbe_fc_enable_generic): a port that sends
        // PAUSE needs, in each sized packet buffer, FCRTH with FCEN above
        // FCRTL and within the buffer.
        if s.reg(FCCFG) & FCCFG_TFCE_802_3X != 0 {
            let sized: Vec<u16> = (0..8).filter(|&pb| s.reg(rxpbsize(pb)) != 0).collect();
            for pb in sized {
                let size = s.reg(rxpbsize(pb));
                let high = s.reg(fcrth(pb));
                let low = s.reg(fcrtl(pb)) & !FCRTL_XONE;
                let rth = high & !FCRTH_FCEN;
                if high & FCRTH_FCEN == 0 || rth == 0 || low >= rth || rth > size {
                    s.violation(format!(
                        "RXCTRL.RXEN set with FCCFG.TFCE_802_3X on but FCRTH({pb}) {high:#x} / \
                         FCRTL({pb}) {low:#x} for a {size:#x}-byte packet buffer (Linux \
                         ixgbe_fc_enable_generic)"
                    ));
                }
            }
        }
        let total: u32 = (0..8).map(|n| s.reg(rxpbsize(n))).sum();
        if total > RXPBSIZE_MAX {
            s.violation(format!(
                "RX packet buffers add up to {total:#x} bytes, more than the 512 KiB there are"
            ));
        }
    }
    if on != was {
        s.log(Event::RxEnable(on));
    }
    s.regs.insert(RXCTRL, val);
}

/// An ESDP write: SDP2 is an input (ignored); SDP3, when an output, is the
/// laser disable: driven low the laser comes on (and the link can train),
/// driven high it goes dark and the link drops.
fn esdp(s: &mut State, val: u32) {
    let laser_on = |v: u32| v & ESDP_SDP3_DIR != 0 && v & ESDP_SDP3 == 0;
    let (was, on) = (laser_on(s.reg(ESDP)), laser_on(val));
    if on && !was {
        s.laser_on_at = Some(s.now());
    } else if !on {
        s.laser_on_at = None;
    }
    s.regs.insert(ESDP, val & !ESDP_SDP2);
}

/// The double-reset rule: after a reset issued with master requests still
/// pending, the device must be reset again before it may DMA.
fn check_double_reset(s: &mut State, what: &str) {
    if s.needs_second_reset {
        s.violation(format!(
            "{what} after a single reset issued while PCIe master requests were still pending \
             (STATUS.GIO set): the 82599 specification update asks for two resets in a row \
             (Linux ixgbe_disable_pcie_master, IXGBE_FLAGS_DOUBLE_RESET_REQUIRED)"
        ));
    }
}

fn dmatxctl(s: &mut State, val: u32) {
    let was = s.reg(DMATXCTL) & DMATXCTL_TE != 0;
    let on = val & DMATXCTL_TE != 0;
    if on && !was {
        check_double_reset(s, "DMATXCTL.TE set");
        let total: u32 = (0..8).map(|n| s.reg(txpbsize(n))).sum();
        if total > TXPBSIZE_MAX {
            s.violation(format!(
                "TX packet buffers add up to {total:#x} bytes, more than the 160 KiB there are"
            ));
        }
    }
    if on != was {
        s.log(Event::TxDmaEnable(on));
    }
    s.regs.insert(DMATXCTL, val);
}

/// Check a ring's registers when its queue is enabled; the device side of
/// the ring, or why not.
fn ring_for(s: &State, base: u64, len: u32) -> Result<crate::ring::DeviceRing, String> {
    if len == 0 || len % 128 != 0 || len / 16 > 32768 {
        return Err(format!(
            "length {len} is not a non-zero multiple of 128 bytes"
        ));
    }
    if base % 128 != 0 {
        return Err(format!("base {base:#x} is not 128-byte aligned"));
    }
    s.iommu
        .ring(base, (len / 16) as u16)
        .ok_or_else(|| format!("base {base:#x}..+{len} is not mapped in the IOMMU"))
}

fn rxdctl_write(s: &mut State, off: u32, q: u16, val: u32) {
    let st = &s.rx[q as usize];
    let (was, on) = (st.enabled, val & XDCTL_ENABLE != 0);
    s.regs.insert(off, val & !XDCTL_ENABLE);
    if on == was {
        return;
    }
    if on {
        check_double_reset(s, &format!("RXDCTL({q}).ENABLE set"));
        let dca = s.reg(dca_rxctrl(q));
        if dca & (DCA_RXCTRL_DATA_WRO_EN | DCA_RXCTRL_HEAD_WRO_EN) != 0 {
            s.violation(format!(
                "RXDCTL({q}).ENABLE set with relaxed ordering on in DCA_RXCTRL({q}) = {dca:#x}: \
                 a write-back may overtake its data (clear bits 13 and 15, Linux and DPDK \
                 ixgbe_start_hw_gen2)"
            ));
        }
        let srrctl = s.reg(srrctl(q));
        let problem = if srrctl & SRRCTL_DESCTYPE_MASK != SRRCTL_DESCTYPE_ADV_ONEBUF {
            Err(format!(
                "SRRCTL({q}).DESCTYPE is not advanced one-buffer ({srrctl:#x})"
            ))
        } else if srrctl & SRRCTL_BSIZEPKT_MASK == 0 {
            Err(format!("SRRCTL({q}).BSIZEPKT is 0"))
        } else {
            ring_for(s, super::state::rx_base(&s.regs, q), s.reg(rdlen(q)))
        };
        match problem {
            Ok(ring) => {
                if s.reg(rdh(q)) != 0 {
                    s.violation(format!("RXDCTL({q}).ENABLE set with RDH({q}) != 0"));
                }
                let st = &mut s.rx[q as usize];
                st.ring = Some(ring);
                st.enabled = true;
                st.latch_reads = s.cfg.latch_reads;
                s.log(Event::RxQueue(q, true));
            }
            Err(e) => s.violation(format!(
                "RXDCTL({q}).ENABLE set but the ring is not configured: {e}"
            )),
        }
    } else {
        let latch = s.cfg.latch_reads;
        let st = &mut s.rx[q as usize];
        st.enabled = false;
        st.ring = None;
        st.latch_reads = latch;
        s.log(Event::RxQueue(q, false));
    }
}

fn txdctl_write(s: &mut State, off: u32, q: u16, val: u32) {
    let st = &s.tx[q as usize];
    let (was, on) = (st.enabled, val & XDCTL_ENABLE != 0);
    s.regs.insert(off, val & !XDCTL_ENABLE);
    if on == was {
        return;
    }
    if on {
        check_double_reset(s, &format!("TXDCTL({q}).ENABLE set"));
        let dca = s.reg(dca_txctrl(q));
        if dca & DCA_TXCTRL_DESC_WRO_EN != 0 {
            s.violation(format!(
                "TXDCTL({q}).ENABLE set with DCA_TXCTRL({q}).DESC_WRO_EN on ({dca:#x}): a \
                 relaxed-ordered write-back \"hoses bookkeeping\" (DPDK ixgbe_dev_tx_init)"
            ));
        }
        if s.reg(DMATXCTL) & DMATXCTL_TE == 0 {
            s.violation(format!(
                "TXDCTL({q}).ENABLE set before DMATXCTL.TE (the transmit DMA must be enabled \
                 first, Linux ixgbe_configure_tx)"
            ));
            return;
        }
        match ring_for(s, super::state::tx_base(&s.regs, q), s.reg(tdlen(q))) {
            Ok(ring) => {
                let st = &mut s.tx[q as usize];
                st.ring = Some(ring);
                st.enabled = true;
                st.latch_reads = s.cfg.latch_reads;
                s.log(Event::TxQueue(q, true));
            }
            Err(e) => s.violation(format!(
                "TXDCTL({q}).ENABLE set but the ring is not configured: {e}"
            )),
        }
    } else {
        let latch = s.cfg.latch_reads;
        let st = &mut s.tx[q as usize];
        st.enabled = false;
        st.ring = None;
        st.latch_reads = latch;
        s.log(Event::TxQueue(q, false));
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
        State::unmapping(self, iova, len)
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
