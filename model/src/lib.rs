//! pollnic-model: software models of the NICs pollnic drives, for host tests
//! and benches without a NIC, a VM or hugepages (not published; it depends
//! on the library, never the reverse). A software 82576
//! ([`igb::Soft82576`]), 82599 ([`ixgbe::Soft82599`]) and virtio-net device
//! ([`virtio::SoftVirtioNet`], strict about the virtio 1.2 MUSTs, with a
//! hostile mode) that [`pollnic::Device`]
//! drives through [`pollnic::Device::open_on`], the same code as a real NIC
//! (each implements [`pollnic::lowlevel::io::DeviceIo`], the register-level
//! seam under a `Device`);
//! and below them the device's side of the descriptor rings ([`ring`]: the
//! ring walk both models use, and `SoftNic`, a model of the rings alone for
//! `pollnic_rings`' tests) with a forwarding rig on it ([`fwd`], the
//! benches' and callgrind's).
//!
//! `unsafe` lives in [`ring`] (the device's DMA through raw pointers),
//! `iommu` (the models' IOMMU) and [`fwd`] (registering the rig's memory
//! with the models); the crate root denies it elsewhere.
//!
//! What they share: the seam `Device` runs over ([`SoftBar`] as its BAR,
//! `SoftIo` as its [`DeviceIo`]), the IOMMU (`crate::iommu`),
//! the queue enable latch (`QueueState`), the [`Event`] log, and frame
//! handling both MACs do alike (`wire`: FCS, the RSS hash input by MRQC field
//! bits, which sit at the same positions on the 82576 and the 82599). Each
//! family's model implements the crate-private `RegisterModel` for its
//! register file.

#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod fwd;
pub mod igb;
#[allow(unsafe_code)]
mod iommu;
pub mod ixgbe;
pub(crate) mod msix;
pub mod offload;
#[allow(unsafe_code)]
pub mod ring;
pub mod virtio;
pub(crate) mod wire;

use crate::ring::DeviceRing;
use iommu::{Mappings, ModelDma, ModelDmaHost};
use pollnic::lowlevel::io::{DeviceBar, DeviceIo, Regs, TailDoorbell};
use pollnic_rings::{DmaMapper, PageSize};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// What the model saw, in order (for tests of the bring-up and shutdown order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A global reset started (CTRL.RST).
    Reset,
    /// The receiver was turned on or off (82599 RXCTRL.RXEN, igb RCTL.EN).
    RxEnable(bool),
    /// The transmit DMA was turned on or off (82599 DMATXCTL.TE, igb TCTL.EN).
    TxDmaEnable(bool),
    /// RXDCTL(q).ENABLE changed.
    RxQueue(u16, bool),
    /// TXDCTL(q).ENABLE changed.
    TxQueue(u16, bool),
    /// PCI bus mastering turned off.
    BusMasterOff,
    /// A DMA mapping was removed (the memory is freed right after).
    Unmap {
        /// Its IOVA.
        iova: u64,
        /// Its length in bytes.
        len: usize,
    },
}

/// How a model behaves (the same knobs for every family).
#[derive(Clone, Debug)]
pub struct ModelConfig {
    /// The MAC the "EEPROM" loads into RAL(0)/RAH(0).
    pub mac: [u8; 6],
    /// How long CTRL.RST stays set after it is written; `None`: forever (a
    /// wedged device).
    pub reset_time: Option<Duration>,
    /// From the end of reset to the EEPROM auto-read done (82599 EEC.ARD,
    /// igb EECD.AUTO_RD).
    pub eeprom_time: Duration,
    /// From the EEPROM auto-read to DMA init done (82599 RDRXCTL.DMAIDONE).
    pub dma_init_time: Duration,
    /// From the autonegotiation restart (82599 AUTOC.AN_RESTART, igb PHY
    /// BMCR.RESTART_AN) to link up; `None`: the link never comes up.
    pub link_time: Option<Duration>,
    /// Reads of RXDCTL/TXDCTL before a changed ENABLE bit reads back.
    pub latch_reads: u32,
    /// Panic at the first violation (default) rather than only record it.
    pub strict: bool,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            mac: [0x00, 0x1b, 0x21, 0x0a, 0x0b, 0x0c],
            reset_time: Some(Duration::from_millis(1)),
            eeprom_time: Duration::from_millis(2),
            dma_init_time: Duration::from_millis(1),
            link_time: Some(Duration::from_millis(20)),
            latch_reads: 3,
            strict: true,
        }
    }
}

/// What became of a frame given to a model's `receive` (e.g. [`crate::ixgbe::Soft82599::receive`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxOutcome {
    /// Written to RX queue `queue`, with this RSS hash in the descriptor.
    Delivered {
        /// The queue RSS chose.
        queue: u16,
        /// The hash written back (0 without RSS or RXCSUM.PCSD).
        hash: u32,
    },
    /// The destination MAC did not pass the filter.
    Filtered,
    /// Longer than the receiver's maximum frame (igb: 1518, or RLPML with
    /// RCTL.LPE; 82599: MAXFRS.MFS with HLREG0.JUMBOEN), plus 4 bytes for a
    /// VLAN tag: dropped, counted in ROC (and RLEC on the 82599).
    Oversized,
    /// Link down or in reset: nothing received.
    LinkDown,
    /// The receiver (82599 RXCTRL.RXEN, igb RCTL.EN) or bus mastering off.
    ReceiverOff,
    /// The chosen queue is not enabled (counted in MPC).
    QueueOff(u16),
    /// The chosen queue had no free descriptor (82599: QPRDC or MPC; igb: RNBC).
    NoDescriptor(u16),
    /// A buffer address was not mapped (also a violation).
    Fault(u64),
    /// Queue `queue`'s descriptor `index`, below RDT, still held a
    /// write-back instead of a buffer address: the driver moved the tail past
    /// what it had re-armed (also a violation).
    NotArmed {
        /// The queue.
        queue: u16,
        /// The descriptor.
        index: u16,
    },
}

/// One queue's enable state as software sees it through RXDCTL/TXDCTL.
#[derive(Default)]
pub(crate) struct QueueState {
    /// The queue runs (the device owns its ring).
    pub enabled: bool,
    /// Reads of RXDCTL/TXDCTL left before ENABLE reads back `enabled`.
    pub latch_reads: u32,
    /// The device side of the ring while enabled.
    pub ring: Option<DeviceRing>,
}

impl QueueState {
    /// The ENABLE bit as a register read shows it now (and count the read).
    pub fn read_enable(&mut self) -> bool {
        if self.latch_reads > 0 {
            self.latch_reads -= 1;
            !self.enabled
        } else {
            self.enabled
        }
    }
    /// Enabled and the enable seen by software (the latch delay used up).
    pub fn latched_on(&self) -> bool {
        self.enabled && self.latch_reads == 0
    }
}

/// A register-level device model: what its BAR, IOMMU and bus-master bit do.
pub(crate) trait RegisterModel: Send + 'static {
    /// A 32-bit register read with its side effects.
    fn read(&mut self, off: u32) -> u32;
    /// A 32-bit register write with its side effects.
    fn write(&mut self, off: u32, val: u32);
    /// The IOMMU's mappings.
    fn mappings(&mut self) -> &mut Mappings;
    /// A mapping is about to go: check the device can no longer DMA into it,
    /// and detach any ring inside it (memory safety).
    fn unmapping(&mut self, iova: u64, len: usize);
    /// Something to log.
    fn log(&mut self, e: Event);
    /// PCI bus mastering turned off.
    fn bus_master_off(&mut self);
    /// MSI-X enabled with these eventfds (vector `v` signals the `v`th), or
    /// disabled (`None`). Default: the model has no MSI-X.
    ///
    /// # Errors
    /// [`pollnic::irq::MsixError`] when the model cannot (no MSI-X, too many vectors).
    fn msix(
        &mut self,
        _events: Option<Vec<Arc<pollnic::lowlevel::io::IrqEvent>>>,
    ) -> Result<(), pollnic::irq::MsixError> {
        Err(pollnic::irq::MsixError::Unsupported)
    }
}

/// A model's state, shared by its handles.
pub(crate) type SharedModel = Arc<Mutex<dyn RegisterModel>>;

/// Lock a model. A violation panics with the lock held (strict mode); later
/// users still get the state, so the first panic is the one reported.
/// The rule of CTRL_EXT.DRV_LOAD (bit 28 on the 82576 and the 82599 alike):
/// the port moves traffic only while a driver has taken it from the
/// manageability firmware (Linux `<family>_get_hw_control` after the reset,
/// `<family>_release_hw_control` at the end). `what` is the traffic, `linux`
/// the family's function. Returns the violation to record, once per model
/// (`None` when the bit is set or it was reported already).
pub(crate) fn drv_load_violation(
    ctrl_ext: u32,
    reported: &[String],
    what: &str,
    linux: &str,
) -> Option<String> {
    (ctrl_ext & pollnic_hw::igb::bits::CTRL_EXT_DRV_LOAD == 0
        && !reported.iter().any(|v| v.contains("DRV_LOAD")))
    .then(|| {
        format!(
            "{what} while CTRL_EXT.DRV_LOAD is clear: the driver never told the \
             manageability firmware that it owns the port (Linux {linux})"
        )
    })
}

pub(crate) fn lock<T: ?Sized>(s: &Mutex<T>) -> MutexGuard<'_, T> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// A software model's BAR0.
pub struct SoftBar {
    pub(crate) shared: SharedModel,
}

impl Regs for SoftBar {
    fn read32(&self, off: u32) -> u32 {
        lock(&self.shared).read(off)
    }
    fn write32(&self, off: u32, val: u32) {
        lock(&self.shared).write(off, val)
    }
}

impl DeviceBar for SoftBar {
    fn regs(&self) -> &dyn Regs {
        self
    }
    /// 512 KiB, the 82599's BAR0 (the 82576's is 128 KiB); the models
    /// answer any offset, and nothing of theirs is placed by capability.
    fn size(&self) -> u64 {
        512 << 10
    }
    fn doorbell(self: Arc<Self>, reg: u32) -> TailDoorbell {
        TailDoorbell::new(self, reg)
    }
}

/// The model's side of its IOMMU: mappings go into its state, under its lock.
pub(crate) struct ModelHost(pub SharedModel);

impl ModelDmaHost for ModelHost {
    fn map_region(&self, va: *mut u8, len: usize) -> u64 {
        lock(&self.0).mappings().add(va, len)
    }
    fn unmap_region(&self, iova: u64, len: usize) {
        let mut s = lock(&self.0);
        s.unmapping(iova, len);
        s.mappings().remove(iova);
        s.log(Event::Unmap { iova, len });
    }
}

/// A model's device-release request line: the callbacks `Device`
/// registered through `DeviceIo::watch_release`, which a test fires as the
/// kernel would on an unbind or remove.
pub(crate) type ReleaseLine = Arc<Mutex<Vec<Box<dyn Fn() + Send + Sync>>>>;

/// What `Device` runs over for a model: its BAR0 and IOMMU, 4 KiB pages.
pub(crate) struct SoftIo {
    bar: Arc<SoftBar>,
    dma: Arc<ModelDma<ModelHost>>,
    shared: SharedModel,
    release: Option<ReleaseLine>,
}

impl SoftIo {
    pub fn new(shared: SharedModel) -> Self {
        SoftIo {
            bar: Arc::new(SoftBar {
                shared: Arc::clone(&shared),
            }),
            dma: Arc::new(ModelDma(ModelHost(Arc::clone(&shared)))),
            shared,
            release: None,
        }
    }

    /// With a device-release request line a test can fire.
    pub fn with_release(shared: SharedModel, line: ReleaseLine) -> Self {
        SoftIo {
            release: Some(line),
            ..SoftIo::new(shared)
        }
    }
}

impl DeviceIo for SoftIo {
    fn bar0(&self) -> Arc<dyn DeviceBar> {
        self.bar.clone()
    }
    fn dma(&self) -> Arc<dyn DmaMapper> {
        self.dma.clone()
    }
    /// A model needs no physically contiguous memory, but it gets the
    /// hugepage layout (no buffer across a 2 MiB page), and its IOMMU faults
    /// on a DMA that crosses one, as a real one may.
    fn page_size(&self) -> PageSize {
        PageSize::Emulated2M
    }
    fn disable_bus_master(&self) {
        let mut s = lock(&self.shared);
        s.bus_master_off();
        s.log(Event::BusMasterOff);
    }
    /// Only a model built with a release line (the software 82576) has one.
    fn watch_release(&self, on_request: Box<dyn Fn() + Send + Sync>) -> bool {
        match &self.release {
            Some(line) => {
                lock(line).push(on_request);
                true
            }
            None => false,
        }
    }
    fn interrupts(&self) -> Option<&dyn pollnic::lowlevel::io::Interrupts> {
        Some(self)
    }
}

/// MSI-X of a model: eventfds the model signals itself.
impl pollnic::lowlevel::io::Interrupts for SoftIo {
    fn enable_msix(
        &self,
        vectors: u16,
    ) -> Result<Vec<Arc<pollnic::lowlevel::io::IrqEvent>>, pollnic::irq::MsixError> {
        enable_msix(&self.shared, vectors)
    }
    fn disable_msix(&self) {
        let _ = lock(&self.shared).msix(None);
    }
}

/// MSI-X on a model: `vectors` eventfds that the model signals itself,
/// handed to it with [`RegisterModel::msix`].
pub(crate) fn enable_msix(
    shared: &SharedModel,
    vectors: u16,
) -> Result<Vec<Arc<pollnic::lowlevel::io::IrqEvent>>, pollnic::irq::MsixError> {
    let events = (0..vectors)
        .map(|_| pollnic::lowlevel::io::IrqEvent::new().map(Arc::new))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(pollnic::irq::MsixError::EventFd)?;
    lock(shared).msix(Some(events.clone()))?;
    Ok(events)
}
