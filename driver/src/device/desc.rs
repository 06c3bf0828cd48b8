//! The descriptor-ring back end's bring-up and interrupts (igb, ixgbe): the
//! family's register work in the order `crate::family` gives, queues on
//! descriptor rings, MSI-X through IVAR and EITR.

use super::open::check_hugepages;
use super::Device;
use crate::config::DeviceConfig;
use crate::error::{Error, Result};
use crate::family::{DescFamily, RingRegs};
use crate::irq::{IrqControl, QueueIrq};
use crate::msix::MsixError;
use crate::queue::{Queue, Rings};
use crate::sys::dmamap::{DmaPurpose, Recording};
use crate::wait::{wait_for, TimedOut};
use pollnic_rings::{DescRing, Mempool, PageSize, RxRing, TxRing};
use std::sync::Arc;

impl Device {
    pub(super) fn bring_up_desc(
        &mut self,
        fam: &'static dyn DescFamily,
        cfg: &DeviceConfig,
    ) -> Result<()> {
        let addr = self.addr;
        let timeout = |t: TimedOut| Error::Timeout {
            addr,
            what: t.what,
            waited_ms: t.waited_ms,
        };
        let bar = Arc::clone(&self.bar);
        let r = bar.regs();
        self.mac = fam.init(r).map_err(timeout)?;
        fam.set_max_frame(r, cfg.mtu);

        let page = self.io.page_size();
        if page == PageSize::Huge2M {
            check_hugepages(cfg)?;
        }
        let dma = self.io.dma();
        // RSS always on: with one queue it still writes the hash back.
        fam.setup_rss(r, &self.rss_key, &self.reta, &cfg.hash_types);
        let drop_en = cfg.queues > 1; // one full queue must not stall the others
        let mapper = |purpose| -> Arc<dyn pollnic_rings::DmaMapper> {
            Recording::new(dma.clone(), purpose, Arc::clone(&self.mappings))
        };
        for q in 0..cfg.queues {
            let pool = Mempool::new(
                cfg.mempool_size,
                cfg.rx_buf_size(),
                page,
                mapper(DmaPurpose::Mempool(q)),
            )?;
            let rx_desc =
                DescRing::new(cfg.rx_ring_size as u16, page, mapper(DmaPurpose::RxRing(q)))?;
            let tx_desc =
                DescRing::new(cfg.tx_ring_size as u16, page, mapper(DmaPurpose::TxRing(q)))?;
            let ring = |d: &DescRing| RingRegs {
                iova: d.iova(),
                len_bytes: d.len_bytes(),
            };
            fam.configure_rx(r, q, ring(&rx_desc), pool.buf_size(), drop_en);
            fam.configure_tx(r, q, ring(&tx_desc));
            let mut rx = RxRing::new(rx_desc, &pool, Arc::clone(&bar).doorbell(fam.rdt(q)))?;
            rx.set_error_mask(fam.rx_error_mask())?;
            rx.set_offload_status(cfg.rx_checksum || cfg.vlan_strip, fam.rx_l4e_bit());
            let mut tx = TxRing::new(tx_desc, &pool, Arc::clone(&bar).doorbell(fam.tdt(q)));
            tx.set_check_context(fam.tx_check_context());
            // Chosen once per queue here (`validate` refused a forced vector
            // path this CPU cannot run).
            let path = cfg.data_path.resolve();
            rx.set_data_path(path);
            tx.set_data_path(path);
            self.queues.push(Queue::new(
                q,
                Rings::Desc { rx, tx },
                Arc::clone(&self.counters),
                Arc::clone(&self.removal),
                fam.max_rx_usecs(),
                fam.name(),
            ));
        }
        fam.start_tx(r);
        for q in &mut self.queues {
            fam.enable_rx_queue(r, q.id).map_err(timeout)?;
            q.rings.start();
            fam.enable_tx_queue(r, q.id).map_err(timeout)?;
        }
        fam.configure_rx_offloads(r, cfg.queues, cfg.rx_checksum, cfg.vlan_strip);
        fam.configure_flow_control(
            r,
            self.device_id,
            cfg.flow_control.unwrap_or(crate::config::FlowControl::Full),
            cfg.mtu,
        );
        fam.configure_power_saving(r, self.device_id, cfg.power_saving, cfg.mtu);
        fam.start_rx(r, cfg.rx_filter()).map_err(timeout)?;

        wait_for("link up", cfg.link_timeout, || fam.link_status(r).up).map_err(|t| {
            Error::LinkDown {
                addr,
                waited_ms: t.waited_ms,
            }
        })?;
        // Once more after the link came up, as Linux forces the mode after
        // autonegotiation (`igb_config_fc_after_link_up`): QEMU's igb sets
        // CTRL.RFCE and TFCE when its autonegotiation completes.
        fam.configure_flow_control(
            r,
            self.device_id,
            cfg.flow_control.unwrap_or(crate::config::FlowControl::Full),
            cfg.mtu,
        );
        Ok(())
    }

    /// `Device::enable_msix` on igb and ixgbe: one vector per RX queue,
    /// routed by IVAR, throttled by EITR, all masked.
    pub(super) fn enable_msix_desc(&mut self, desc: &'static dyn DescFamily) -> Result<()> {
        let addr = self.addr;
        let fail = |source: MsixError| Error::Interrupts {
            addr,
            cause: source,
        };
        let n = self.queues.len() as u16;
        let Some(intr) = self.io.interrupts() else {
            return Err(fail(MsixError::Unsupported));
        };
        let events = intr.enable_msix(n).map_err(fail)?;
        let Some(regs) = desc.configure_msix(
            self.bar.regs(),
            self.device_id,
            n,
            self.moderation.initial_usecs(),
        ) else {
            intr.disable_msix();
            return Err(fail(MsixError::NoFamilySupport {
                family: desc.name(),
            }));
        };
        for ((q, event), regs) in self.queues.iter_mut().zip(events).zip(regs) {
            q.irq = Some(QueueIrq {
                event,
                ctl: IrqControl::Vector {
                    regs,
                    bar: Arc::clone(&self.bar),
                },
            });
            // In range: checked at open and by `set_moderation`.
            q.set_moderation(self.moderation)?;
        }
        Ok(())
    }
}
