//! The virtio-net back end's bring-up and interrupts (virtio 1.x §3.1.1,
//! §5.1.5): negotiation, virtqueues with their MSI-X vectors, the control
//! queue's RSS and receive-mode commands, link wait.

use super::backend::Backend;
use super::open::check_hugepages;
use super::{local_mac, Device};
use crate::config::{DeviceConfig, DmaAddressing, VIRTIO_RX_HEADROOM};
use crate::error::{Error, Result};
use crate::family::virtio::{self, VirtioNet};
use crate::family::Family;
use crate::irq::{IrqControl, QueueIrq};
use crate::msix::MsixError;
use crate::queue::{Queue, Rings};
use crate::sys::dmamap::{DmaPurpose, Recording};
use crate::wait::wait_for;
use pollnic_rings::{Mempool, PageSize, VirtqLayout, VirtqRx, VirtqTx};
use std::sync::Arc;

impl Device {
    /// The bring-up of a virtio-net device (virtio 1.x §3.1.1):
    /// capabilities, reset, ACKNOWLEDGE, DRIVER, features, FEATURES_OK,
    /// `cfg.queues` queue pairs (receiveq`q` is virtqueue 2q, transmitq`q`
    /// 2q + 1, §5.1.2) and the control queue when negotiated, DRIVER_OK,
    /// then the RSS configuration (or `VQ_PAIRS_SET`) on the control queue,
    /// link wait. A ring size above the device's `queue_size` is taken down
    /// to it (as DPDK's virtio PMD does with `nb_desc`); each buffer takes
    /// two descriptors (`pollnic_rings::virtq`).
    pub(super) fn bring_up_virtio(&mut self, cfg: &DeviceConfig) -> Result<()> {
        let addr = self.addr;
        // The port was found at open (`open_checked`) and is kept in the
        // back end, so that every error path from here resets it on drop.
        let Backend::Virtio(v) = &mut self.backend else {
            unreachable!("bring_up_virtio is called for a virtio back end only");
        };
        let port = &mut v.port;
        port.negotiate(
            cfg.dma == DmaAddressing::UnsafeNoIommuPhysical,
            cfg.rx_checksum,
            cfg.virtq_layout,
            cfg.virtq_in_order,
        )?;
        self.mac = port.mac().unwrap_or_else(|| local_mac(addr));
        port.check_mtu(cfg.mtu)?;
        port.check_rx_filter(cfg)?;
        // §5.1.4.2: with VIRTIO_NET_F_MTU negotiated, the driver MUST post
        // buffers that take a frame of the device's MTU (without
        // VIRTIO_NET_F_MRG_RXBUF, one buffer per frame): the buffers are
        // sized for the larger of the two MTUs, as Linux `virtio_net` comes
        // up at the device's MTU. (At the testbed's host_mtu=9000 a default
        // configuration's buffers are 9216 bytes, not 2048.)
        if let Some(m) = port
            .mtu()
            .filter(|&m| u32::from(m) > pollnic_hw::mtu::MAX_MTU)
        {
            return Err(Error::Virtio {
                addr,
                problem: virtio::problem::VirtioError::MtuTooLarge {
                    device_mtu: m,
                    max: pollnic_hw::mtu::MAX_MTU,
                },
            });
        }
        let mtu = port.mtu().map_or(cfg.mtu, |m| cfg.mtu.max(u32::from(m)));
        let mut rx_buf = cfg
            .rx_buf_size()
            .max(pollnic_hw::mtu::rx_buf_size(mtu) as usize);
        // Packed: the header goes in each buffer's headroom, one descriptor
        // per buffer (`VirtqRx::with_layout`); the buffer grows when the
        // headroom would leave less than the largest frame of either MTU.
        if port.virtq_layout() == VirtqLayout::Packed {
            rx_buf = rx_buf.max(pollnic_hw::mtu::max_rx_bytes(mtu) as usize + VIRTIO_RX_HEADROOM);
        }
        let sized = cfg.clone().with_buf_size(rx_buf);
        let cfg = &sized;
        let pairs = port.max_queue_pairs()?;
        if cfg.queues > pairs {
            return Err(Error::TooManyQueues {
                queues: cfg.queues,
                max: pairs,
                device: format!("{} at {addr} (max_virtqueue_pairs)", self.name),
            });
        }
        let missing = |problem: virtio::problem::VirtioError| Error::Virtio { addr, problem };
        let with_ctrl = port.has(virtio::feature::NET_CTRL_VQ);
        let needed = 2 * cfg.queues as u32 + u32::from(with_ctrl);
        if u32::from(port.num_queues()) < needed {
            return Err(missing(virtio::problem::VirtioError::TooFewVirtqueues {
                have: port.num_queues(),
                need: needed,
                pairs: cfg.queues,
                with_ctrl,
            }));
        }
        let layout = port.virtq_layout();
        let size = |want: u32, max: u16, which: &'static str| -> Result<u16> {
            let got = want.min(u32::from(max));
            if got < VirtioNet.min_ring_size() {
                return Err(missing(virtio::problem::VirtioError::QueueTooSmall {
                    which,
                    max,
                    min: VirtioNet.min_ring_size(),
                }));
            }
            // A split virtqueue's size is a power of two (virtio 1.x §2.7);
            // a packed one's any number up to 32768 (§2.8.10.1), so a
            // device's odd `queue_size` is taken as it is.
            Ok(match layout {
                VirtqLayout::Split => 1 << (31 - got.leading_zeros()),
                VirtqLayout::Packed => got as u16,
            })
        };

        let page = self.io.page_size();
        if page == PageSize::Huge2M {
            check_hugepages(cfg)?;
        }
        let dma = self.io.dma();
        let mappings = Arc::clone(&self.mappings);
        let mapper = |purpose| -> Arc<dyn pollnic_rings::DmaMapper> {
            Recording::new(dma.clone(), purpose, Arc::clone(&mappings))
        };
        port.no_config_vector();
        // Each RX virtqueue gets its MSI-X vector (pair q: vector q) now, at
        // set-up: §4.1.4.3.2 allows no queue field to change after
        // `queue_enable`. Until `set_rx_mode` enables MSI-X, the device
        // sends nothing on them (poll mode keeps notifications off).
        let with_vectors = self.io.interrupts().is_some();
        let mut refused_vector: Option<(u16, u16)> = None;
        let hdr = port.net_hdr();
        let event_idx = port.event_idx();
        // §5.1.6.2 and §5.1.6.4: checksum requests in the TX headers with
        // CSUM, checksum flags read from the RX headers with GUEST_CSUM.
        let csum = port.has(virtio::feature::NET_CSUM);
        // §5.1.6.2: segmentation requests with HOST_TSO4/HOST_TSO6.
        let tso = (
            port.has(virtio::feature::NET_HOST_TSO4),
            port.has(virtio::feature::NET_HOST_TSO6),
        );
        let guest_csum = port.has(virtio::feature::NET_GUEST_CSUM);
        let in_order = port.in_order();
        let mut started = Vec::with_capacity(cfg.queues as usize);
        for q in 0..cfg.queues {
            let (rxq, txq) = (2 * q, 2 * q + 1);
            let rx_size = size(cfg.rx_ring_size, port.max_queue_size(rxq), "receive")?;
            let tx_size = size(cfg.tx_ring_size, port.max_queue_size(txq), "transmit")?;
            // Packed: the header in each buffer's headroom (sized above).
            let headroom = match layout {
                VirtqLayout::Split => 0,
                VirtqLayout::Packed => VIRTIO_RX_HEADROOM,
            };
            let pool = Mempool::with_headroom(
                cfg.mempool_size,
                cfg.rx_buf_size(),
                headroom,
                page,
                mapper(DmaPurpose::Mempool(q)),
            )?;
            let mut rx = VirtqRx::with_layout(
                layout,
                rx_size,
                page,
                mapper(DmaPurpose::RxRing(q)),
                &pool,
                port.notify_for(rxq)?,
            )?;
            let mut tx = VirtqTx::with_layout(
                layout,
                tx_size,
                page,
                mapper(DmaPurpose::TxRing(q)),
                port.notify_for(txq)?,
            )?;
            rx.set_net_hdr(hdr);
            tx.set_net_hdr(hdr);
            rx.set_guest_csum(guest_csum);
            tx.set_csum(csum);
            tx.set_tso(tso.0, tso.1, cfg.mtu as usize);
            rx.set_in_order(in_order);
            tx.set_in_order(in_order);
            if event_idx {
                rx.use_event_idx();
                tx.use_event_idx();
            }
            let vector = if with_vectors { q } else { virtio::NO_VECTOR };
            if !port.setup_queue(rxq, rx.addrs(), vector) && refused_vector.is_none() {
                refused_vector = Some((rxq, vector));
            }
            port.setup_queue(txq, tx.addrs(), virtio::NO_VECTOR);
            started.push((rx, tx));
        }
        v.vector_refused = refused_vector.filter(|_| with_vectors);
        if with_ctrl {
            port.setup_ctrl(page, mapper(DmaPurpose::CtrlQueue))?;
        }
        port.driver_ok()?;
        for (q, (mut rx, tx)) in started.into_iter().enumerate() {
            rx.start();
            self.queues.push(Queue::new(
                q as u16,
                Rings::Virtq { rx, tx },
                Arc::clone(&self.counters),
                Arc::clone(&self.removal),
                0,
                VirtioNet.name(),
            ));
        }
        port.configure_queues(cfg.queues, &cfg.hash_types, &self.rss_key, &self.reta)?;
        port.set_rx_filter(cfg.promisc, cfg.allmulti)?;
        wait_for("link up", cfg.link_timeout, || port.link().up).map_err(|t| Error::LinkDown {
            addr,
            waited_ms: t.waited_ms,
        })?;
        port.check()
    }

    /// `Device::enable_msix` on virtio-net: vector `q` for queue pair
    /// `q`'s RX queue (virtqueue 2q; `queue_msix_vector`, read back:
    /// `VIRTIO_MSI_NO_VECTOR` means the device could not take it), none for
    /// TX, the control queue and configuration changes;
    /// the RX virtqueue's `VRING_AVAIL_F_NO_INTERRUPT` arms and masks it.
    pub(super) fn enable_msix_virtio(&mut self, refused: Option<(u16, u16)>) -> Result<()> {
        let addr = self.addr;
        let fail = |source: MsixError| Error::Interrupts {
            addr,
            cause: source,
        };
        let Some(intr) = self.io.interrupts() else {
            return Err(fail(MsixError::Unsupported));
        };
        // The vectors were written at set-up (`bring_up_virtio`).
        if let Some((queue, vector)) = refused {
            return Err(fail(MsixError::QueueVectorRefused { queue, vector }));
        }
        let n = self.queues.len() as u16;
        let events = intr.enable_msix(n).map_err(fail)?;
        for (q, event) in self.queues.iter_mut().zip(events) {
            q.irq = Some(QueueIrq {
                event,
                ctl: IrqControl::Virtq,
            });
            q.set_moderation(self.moderation)?;
        }
        Ok(())
    }
}
