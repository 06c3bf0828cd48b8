//! A software 82576: a register-level model of the igb device's side, for
//! host tests of the igb back end (which otherwise runs only in the QEMU
//! guest). `Device` runs over it through the same [`DeviceIo`] seam as over
//! VFIO and as over the software 82599 (`crate::ixgbe`), whose IOMMU,
//! enable latch and frame handling it shares (this crate's root).
//!
//! What it models: CTRL.RST self-clearing, EECD.AUTO_RD after the EEPROM
//! load (real parts set it; QEMU's igb never does, and the driver copes with
//! both), EERD, the PHY behind MDIC (BMCR restart of autonegotiation, then
//! STATUS.LU at 1000 Mb/s full duplex once CTRL.SLU is set), the
//! RXDCTL/TXDCTL enable latches, RX (RAL0/RAH0, RCTL.BAM/UPE/MPE, RSS with
//! MRQC mode 010b: Toeplitz over RSSRK, queue = RETA entry bits 3:0, the hash
//! written back with RXCSUM.PCSD; CRC stripped with RCTL.SECRC) and TX on a
//! TDT write (TCTL.EN, padding with TCTL.PSP), the clear-on-read GPRC, GORC,
//! GPTC, GOTC, BPRC, MPRC, MPC and RNBC, and an IOMMU.
//!
//! Strict like the 82599 model, with the rules that hold for the 82576: no
//! access during reset, no CTRL.RST without the stop Linux does first (PCIe
//! master disabled, RCTL.EN and TCTL.EN off), no unknown or read-only register written, no ring
//! register of an enabled queue rewritten, no queue enabled on an
//! unconfigured ring, no tail before the enable latched or beyond the ring,
//! MRQC mode 0 or 010b only, no DMA memory freed while a queue can DMA.
//!
//! MSI-X (`irq`): GPIE.MSIX_MODE, IVAR routing of RX queue causes to
//! vectors, EICR/EIMS/EIMC per vector, EIAC auto-clear, EITR throttling;
//! each vector signals the eventfd the driver enabled for it.
//!
//! Not modelled: the rest of the PHY (only BMCR and BMSR), speeds other than
//! 1000 Mb/s, SerDes/SGMII, legacy and MSI interrupts, TX and other causes, EIAM auto-mask, VMDq, flow control, checksum
//! offloads, VLAN, per-queue drop counters (a full ring counts RNBC), and
//! QEMU's own behaviour (holding frames back at a full ring).

mod datapath;
mod irq;
mod regs;
mod state;

pub use crate::{Event, ModelConfig, RxOutcome, SoftBar};

use crate::{lock, SharedModel, SoftIo};
use pollnic::lowlevel::io::DeviceIo;
use pollnic::DeviceConfig;
use pollnic::Result;
use pollnic::{Device, DeviceIdent};
use state::State;
use std::sync::{Arc, Mutex};

/// The PCI address the model reports in messages.
pub const MODEL_ADDR: &str = "0000:5e:00.1";

/// A software 82576 port. Cheap to clone; every clone is the same device.
#[derive(Clone)]
pub struct Soft82576 {
    shared: Arc<Mutex<State>>,
    release: super::ReleaseLine,
}

impl Default for Soft82576 {
    fn default() -> Self {
        Self::new(ModelConfig::default())
    }
}

impl Soft82576 {
    /// A powered-on device (EEPROM loaded, link down).
    pub fn new(cfg: ModelConfig) -> Self {
        Soft82576 {
            shared: Arc::new(Mutex::new(State::new(cfg))),
            release: Arc::default(),
        }
    }

    /// A powered-on device playing PCI device `device`: an I350 ID
    /// (`pollnic_hw::igb::DEV_IDS_I350`) adds the I350's registers for
    /// Energy Efficient Ethernet (EEER, IPCNFG; the model's NVM turns EEE
    /// on and the model refuses a receiver enabled before EEER was written)
    /// and DMA coalescing (DMACR and its companions, stored as written) and
    /// encodes RXPBS as the I350 does (field 0: 36 KB). Everything else is
    /// the 82576's, 16 queues included; any other ID plays the 82576.
    pub fn with_device(cfg: ModelConfig, device: u16) -> Self {
        let m = Self::new(cfg);
        {
            let mut s = lock(&m.shared);
            s.device = device;
            s.load_defaults();
        }
        m
    }

    /// The identity `Device` sees: an 82576 (8086:10c9), or the I350 chosen
    /// with [`Soft82576::with_device`], at [`MODEL_ADDR`].
    pub fn ident(&self) -> DeviceIdent {
        let device = lock(&self.shared).device;
        DeviceIdent::new(
            MODEL_ADDR.parse().expect("valid address"),
            pollnic_hw::igb::VENDOR_INTEL,
            device,
            if pollnic_hw::igb::is_i350(device) {
                "I350 Gigabit Network Connection (software model)"
            } else {
                "82576 Gigabit Network Connection (software model)"
            },
        )
    }

    /// What `Device` runs over: the model's BAR0 and IOMMU.
    pub fn io(&self) -> Box<dyn DeviceIo> {
        Box::new(SoftIo::with_release(
            self.dyn_shared(),
            Arc::clone(&self.release),
        ))
    }

    /// The kernel asks for the device back, as VFIO relays an unbind or a
    /// remove (`VFIO_PCI_REQ_IRQ_INDEX`): every device opened on this model
    /// is told, from a thread of its own as on a real NIC; returns once
    /// they were.
    pub fn request_release(&self) {
        let line = Arc::clone(&self.release);
        std::thread::spawn(move || {
            for cb in lock(&line).iter() {
                cb();
            }
        })
        .join()
        .expect("release callbacks");
    }

    fn dyn_shared(&self) -> SharedModel {
        self.shared.clone()
    }

    /// Open a [`Device`] on this model.
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

    /// Violations recorded so far.
    pub fn violations(&self) -> Vec<String> {
        lock(&self.shared).violations.clone()
    }

    /// What the model saw, in order.
    pub fn events(&self) -> Vec<Event> {
        lock(&self.shared).events.clone()
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

    /// How often each MSI-X vector fired (signalled its eventfd) since MSI-X
    /// was enabled; empty while it is off.
    pub fn msix_fired(&self) -> Vec<u64> {
        lock(&self.shared).msix.fired.clone()
    }

    /// The throttle interval EITR asks of vector `v`, as the model reads it
    /// (bits 14:2, µs).
    pub fn eitr_interval(&self, v: u16) -> std::time::Duration {
        irq::interval(&lock(&self.shared), v)
    }

    /// Signal vector `v`'s eventfd with no cause, whatever EIMS and EICR
    /// say: what QEMU 10.0's igb does when a vector's EITR timer expires
    /// (`igb_intrmgr_on_msix_throttling_timer` notifies unconditionally), a
    /// signal the driver must survive. Counted in [`Self::msix_fired`].
    pub fn signal_late(&self, v: u16) {
        let mut s = lock(&self.shared);
        if let Some(e) = s.msix.events.get(v as usize) {
            e.signal();
            s.msix.fired[v as usize] += 1;
        }
    }

    /// Let time act: fire throttled interrupts whose interval has passed
    /// (the model otherwise does at its next register access or frame).
    pub fn tick(&self) {
        irq::tick(&mut lock(&self.shared))
    }

    /// Registers as the driver sees them.
    pub fn regs(&self) -> SoftBar {
        SoftBar {
            shared: self.dyn_shared(),
        }
    }
}
