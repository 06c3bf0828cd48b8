//! One RX/TX queue pair with its mempool: the unit that one pinned core owns.
//! A `&mut Queue` is `Send`, so [`crate::runner`] hands each queue of a
//! device to its own thread; the hot path takes no lock and allocates nothing.

mod rings;

use crate::counters::DeviceCounters;
use crate::error::{Error, Result};
use crate::irq::{IrqStats, Itr, Moderation, QueueIrq, RxMode, SpinBudget};
use crate::removal::Removal;
use pollnic_hw::offload::{TxOffload, TxRefusal};
use pollnic_rings::{Mempool, Packet, PoolCache, RxStats, TxStats};
pub(crate) use rings::Rings;
pub use rings::VirtqPairStats;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// RX queue `id`, TX queue `id`, and the mempool both use.
pub struct Queue {
    pub(crate) id: u16,
    pub(crate) rings: Rings,
    pub(crate) counters: DeviceCounters,
    pub(crate) removal: Arc<Removal>,
    /// The queue's MSI-X vector, once the device enabled MSI-X.
    pub(crate) irq: Option<QueueIrq>,
    pub(crate) mode: RxMode,
    /// Empty polls in the current idle period (adaptive mode).
    pub(crate) empty_run: u32,
    pub(crate) irq_stats: IrqStats,
    /// How the vector is throttled, and dynamic moderation's state with the
    /// RX counters (packets, bytes) at its last update.
    pub(crate) moderation: Moderation,
    pub(crate) itr: Itr,
    pub(crate) itr_seen: (u64, u64),
    /// Adaptive mode: the spin budget, and when the current idle period
    /// started with its budget in ns (`None` while frames arrive).
    pub(crate) spin: SpinBudget,
    pub(crate) idle: Option<(Instant, u64)>,
    pub(crate) epoch: Option<Instant>,
    /// Largest EITR throttle the family takes, in µs.
    pub(crate) max_usecs: u32,
    /// The family's name, for messages (`igb`, `ixgbe`).
    pub(crate) family: &'static str,
}

impl Queue {
    /// A started queue `id` over `rings`, in busy-poll mode with no vector
    /// yet: what `Device::open` makes for each queue of every family.
    /// `max_usecs` is the family's largest throttle (0: none).
    pub(crate) fn new(
        id: u16,
        rings: Rings,
        counters: DeviceCounters,
        removal: Arc<Removal>,
        max_usecs: u32,
        family: &'static str,
    ) -> Self {
        Queue {
            id,
            rings,
            counters,
            removal,
            irq: None,
            mode: RxMode::BusyPoll,
            empty_run: 0,
            irq_stats: IrqStats::default(),
            moderation: Moderation::default(),
            itr: Itr::default(),
            itr_seen: (0, 0),
            spin: SpinBudget::default(),
            idle: None,
            epoch: None,
            max_usecs,
            family,
        }
    }

    /// Queue index (the RX queue RSS steers to, and the TX queue used).
    pub fn id(&self) -> u16 {
        self.id
    }

    /// Whether the kernel has asked for this queue's device back
    /// ([`crate::Device::is_removed`]): a queue thread checks it where it
    /// checks its stop flag, leaves its loop, and the device is dropped once
    /// every queue thread has left. One relaxed load; the bursts do not
    /// look at it.
    #[inline]
    pub fn is_removed(&self) -> bool {
        self.removal.requested()
    }

    /// `Ok` while the queue can move frames; [`Error::QueueStopped`] once
    /// one of its virtqueues stopped on a device error (virtio-net: a used
    /// entry or index that broke the protocol, `docs/nics/virtio-net.md`).
    /// A stopped queue's bursts return 0 until the port is closed and
    /// opened again, so a loop that retries until a burst takes something
    /// checks this when one takes nothing. Always `Ok` on the Intel
    /// families, whose rings do not stop (a link that is down holds frames
    /// instead: bound such a loop by time, as the [`Queue::tx_burst`]
    /// example does). Reads the queue's own statistics: no register access.
    ///
    /// # Errors
    /// [`Error::QueueStopped`], with the queue, which side and the device
    /// errors counted.
    pub fn check(&self) -> Result<()> {
        self.rings.check(self.id)
    }

    /// Receive up to `max` frames, appending them to `out`; returns how many.
    /// Never blocks; never allocates if `out` has room for `max` more.
    /// Each [`Packet`] borrows the DMA buffer the NIC wrote (zero copy) and
    /// returns it to the queue's pool when dropped; the ring is refilled
    /// before a frame is handed up, and a frame the device wrote wrongly
    /// (error bit, bad length, a chain) is dropped and counted in
    /// [`Queue::rx_stats`]'s `rx_errors`.
    ///
    /// # Example
    ///
    /// Count frames and bytes on queue 0, returning each burst's buffers at
    /// once:
    ///
    /// ```no_run
    /// use pollnic::{Device, DeviceConfig};
    ///
    /// let mut dev = Device::open("0000:03:00.0", &DeviceConfig::default())?;
    /// let q = dev.queue(0);
    /// let (mut burst, mut frames, mut bytes) = (Vec::with_capacity(32), 0u64, 0u64);
    /// while frames < 1_000_000 {
    ///     let n = q.rx_burst(&mut burst, 32);
    ///     frames += n as u64;
    ///     bytes += burst.iter().map(|p| p.len() as u64).sum::<u64>();
    ///     q.free_bulk(&mut burst); // cheaper than dropping them one by one
    ///     q.wait_rx(n); // busy-poll: returns at once
    /// }
    /// # Ok::<(), pollnic::Error>(())
    /// ```
    #[inline]
    pub fn rx_burst(&mut self, out: &mut Vec<Packet>, max: usize) -> usize {
        self.rings
            .rx_burst(out, max, &self.counters[self.id as usize])
    }

    /// Queue frames from the front of `pkts` until the TX ring is full; returns
    /// how many were taken (the rest stay in `pkts`, in order).
    ///
    /// A frame of 1 to 16 bytes is first padded with zeros to 17 bytes, as
    /// Linux igb and ixgbe do (`skb_put_padto(skb, 17)`: "the minimum packet
    /// size for olinfo paylen is 17"; a shorter one may hang an 82599 TX
    /// queue); the MAC pads it to 60 bytes on the wire. (DPDK's
    /// `ixgbe_prep_pkts` rejects frames under 14 bytes instead; a refused
    /// frame would stay at the front of `pkts` for ever, so pollnic pads.)
    /// An empty frame is refused and counted in `tx_errors`.
    ///
    /// # Example
    ///
    /// Send 1000 broadcast frames of 60 bytes from queue 0, retrying what
    /// did not fit, then wait until the NIC has sent them. The loop ends
    /// also when the port cannot send: a queue the device stopped is an
    /// error ([`Queue::check`]), and a ring that takes nothing for a second
    /// (a link that is down) ends it early:
    ///
    /// ```no_run
    /// use pollnic::{Device, DeviceConfig};
    /// use std::time::{Duration, Instant};
    ///
    /// let mut dev = Device::open("0000:03:00.0", &DeviceConfig::default())?;
    /// let mac = dev.mac();
    /// let q = dev.queue(0);
    /// let mut pending = Vec::with_capacity(32);
    /// let mut made = 0;
    /// let mut progress = Instant::now();
    /// while made < 1000 || !pending.is_empty() {
    ///     while pending.len() < 32 && made < 1000 {
    ///         let Some(mut p) = q.mempool().alloc() else { break };
    ///         p.set_len(60).expect("60 bytes fit a buffer");
    ///         let d = p.data_mut();
    ///         d[..6].copy_from_slice(&[0xff; 6]); // destination: broadcast
    ///         d[6..12].copy_from_slice(&mac); // source: this port
    ///         d[12..14].copy_from_slice(&[0x88, 0xb5]); // local experimental EtherType
    ///         pending.push(p);
    ///         made += 1;
    ///     }
    ///     // Takes what fits; the rest stays, in order.
    ///     if q.tx_burst(&mut pending) > 0 {
    ///         progress = Instant::now();
    ///     } else {
    ///         q.check()?; // the device broke the queue: Error::QueueStopped
    ///         if progress.elapsed() > Duration::from_secs(1) {
    ///             eprintln!("{} frames not sent: is the link down?", pending.len());
    ///             break;
    ///         }
    ///     }
    /// }
    /// q.flush_tx(Duration::from_secs(1));
    /// # Ok::<(), pollnic::Error>(())
    /// ```
    #[inline]
    pub fn tx_burst(&mut self, pkts: &mut Vec<Packet>) -> usize {
        for p in pkts.iter_mut() {
            if p.len() < TX_MIN_FRAME && !p.is_empty() {
                pad_short_frame(p);
            }
        }
        self.rings.tx_burst(pkts, &self.counters[self.id as usize])
    }

    /// [`Queue::tx_burst`] with transmit offloads: every frame of `pkts` is
    /// sent with what `offload` asks (IPv4 header checksum, TCP/UDP
    /// checksum over IPv4 or IPv6, 802.1Q tag insert), done by the NIC
    /// through an advanced context descriptor (82576 datasheet §7.2.2.3,
    /// 82599 §7.2.3.2.3; Linux `igb_tx_csum`). The header lengths come from
    /// each frame's own bytes; a run of frames with the same headers shares
    /// one context descriptor. Returns how many frames were taken (the rest
    /// stay in `pkts`, in order), refused ones included.
    ///
    /// A frame the NIC cannot do the request for (too short for its
    /// headers, not IP, not TCP/UDP for an L4 checksum, an IPv4 fragment,
    /// stacked tags) is refused: freed, never sent without the offload,
    /// counted in `tx_errors` and `tx_offload_errors`
    /// ([`Queue::tx_stats`]); [`Queue::last_tx_refusal`] says why.
    /// [`crate::Capabilities::check_tx`] gives the same answer before
    /// sending ([`TxOffload::check`] checks the frame against the request
    /// only, not the port). Short frames are padded as in [`Queue::tx_burst`].
    /// A virtio-net port does the TCP/UDP checksum alone, and only when its
    /// device offers `VIRTIO_NET_F_CSUM` (virtio 1.2 §5.1.6.2: the frame's
    /// checksum field gets the pseudo-header's sum, its `virtio_net_hdr`
    /// `VIRTIO_NET_HDR_F_NEEDS_CSUM` with `csum_start` and `csum_offset`);
    /// there an IPv4 header checksum, a VLAN tag or TSO is refused
    /// ([`TxRefusal::NotOffered`]), and everything on a device without
    /// CSUM ([`TxRefusal::NoTxOffloads`]), each frame counted the same way.
    /// [`Queue::tx_capabilities`] says which.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use pollnic::offload::TxOffload;
    /// use pollnic::{Device, DeviceConfig};
    ///
    /// let mut dev = Device::open("0000:03:00.0", &DeviceConfig::default())?;
    /// let q = dev.queue(0);
    /// let mut frames = Vec::with_capacity(32);
    /// // ... fill `frames` with IPv4/UDP frames whose checksums are left 0 ...
    /// let ol = TxOffload::NONE.with_ipv4_checksum().with_l4_checksum().with_vlan(100);
    /// q.tx_burst_offload(&mut frames, &ol);
    /// if let Some(why) = q.last_tx_refusal() {
    ///     eprintln!("{why}");
    /// }
    /// # Ok::<(), pollnic::Error>(())
    /// ```
    #[inline]
    pub fn tx_burst_offload(&mut self, pkts: &mut Vec<Packet>, offload: &TxOffload) -> usize {
        for p in pkts.iter_mut() {
            if p.len() < TX_MIN_FRAME && !p.is_empty() {
                pad_short_frame(p);
            }
        }
        self.rings
            .tx_burst_offload(pkts, offload, &self.counters[self.id as usize])
    }

    /// Whether this queue's port does any transmit offload: true on igb
    /// and ixgbe (their advanced context descriptors, every offload), and
    /// on a virtio-net port whose device offers `VIRTIO_NET_F_CSUM` (the
    /// TCP/UDP checksum only); false on one without, whose
    /// [`Queue::tx_burst_offload`] refuses every request
    /// ([`TxRefusal::NoTxOffloads`], counted in `tx_offload_errors`).
    /// [`Queue::tx_capabilities`] says which; ask before sending, or fill
    /// the checksums in software.
    pub fn offers_tx_offloads(&self) -> bool {
        self.rings.tx_capabilities().any()
    }

    /// Which transmit offloads [`Queue::tx_burst_offload`] does on this
    /// queue (the same as `Device::capabilities().tx`): every one on igb
    /// and ixgbe; on virtio-net `l4_checksum` alone, with
    /// `VIRTIO_NET_F_CSUM` (virtio 1.2 §5.1.6.2), else none.
    /// [`crate::TxCapabilities::check`] gives the refusal a request would
    /// meet.
    pub fn tx_capabilities(&self) -> crate::TxCapabilities {
        self.rings.tx_capabilities()
    }

    /// Why the last frame refused by [`Queue::tx_burst_offload`] was
    /// refused, if one was.
    pub fn last_tx_refusal(&self) -> Option<TxRefusal> {
        self.rings.last_tx_refusal()
    }

    /// Reclaim sent TX buffers into the queue's cache; returns how many.
    pub(crate) fn reclaim(&mut self) -> usize {
        self.rings.reclaim()
    }

    /// Frames handed to the TX ring and not yet reclaimed.
    pub(crate) fn tx_in_flight(&self) -> usize {
        self.rings.tx_in_flight()
    }

    /// The queue's buffer cache (the RX ring's).
    #[inline]
    pub(crate) fn cache_mut(&mut self) -> &mut PoolCache {
        self.rings.cache_mut()
    }

    /// Buffers the RX ring holds for the device (descriptors on the Intel
    /// rings; chains, half the descriptors, on a virtqueue).
    #[cfg_attr(not(feature = "smoltcp"), allow(dead_code))]
    pub(crate) fn rx_ring_buffers(&self) -> usize {
        self.rings.rx_buffers()
    }

    /// Whether a frame waits on the RX ring.
    fn rx_ready(&self) -> bool {
        self.rings.rx_ready()
    }

    /// The virtqueues' driver-side counters (kicks, suppressed kicks,
    /// device errors, stopped), named by side, or `None` on a family whose
    /// queues are descriptor rings (igb, ixgbe).
    pub fn virtq_stats(&self) -> Option<VirtqPairStats> {
        self.rings.virtq_stats()
    }

    /// Reclaim sent TX buffers until none is in flight or `timeout` passes;
    /// returns whether the TX ring drained.
    pub fn flush_tx(&mut self, timeout: Duration) -> bool {
        let start = Instant::now();
        loop {
            self.reclaim();
            if self.tx_in_flight() == 0 {
                return true;
            }
            if start.elapsed() > timeout {
                return false;
            }
            std::thread::yield_now();
        }
    }

    /// This queue's mempool (RX refill and frames to send). Its
    /// [`Mempool::alloc`] works from any thread; on the queue's own thread
    /// [`Queue::alloc_burst`] is cheaper.
    pub fn mempool(&self) -> &Mempool {
        self.rings.mempool()
    }

    /// Append up to `n` empty packets (length 0) from this queue's buffer
    /// cache to `out`; returns how many (fewer when the mempool runs dry).
    /// No atomic operation unless the cache refills (DPDK
    /// `rte_pktmbuf_alloc_bulk`).
    pub fn alloc_burst(&mut self, out: &mut Vec<Packet>, n: usize) -> usize {
        self.cache_mut().alloc_burst(out, n)
    }

    /// Return every packet in `pkts` (leaves it empty): this queue's buffers
    /// go to its cache with no atomic operation (unless it spills), cheaper
    /// than dropping them one by one (DPDK `rte_pktmbuf_free_bulk`).
    pub fn free_bulk(&mut self, pkts: &mut Vec<Packet>) {
        self.cache_mut().free_bulk(pkts)
    }
    /// Wait for frames as the queue's [`RxMode`] says; call it after every
    /// [`Queue::rx_burst`] with what that returned. Returns whether it
    /// slept.
    ///
    /// - busy-poll: returns at once (no register access, no clock read);
    /// - interrupt: when `received` is 0, arms the queue's MSI-X vector
    ///   (EICR cause cleared, EIMS), looks at the ring once more, and blocks
    ///   on the vector's eventfd until it fires with a frame in the ring or
    ///   the mode's timeout passes; then masks the vector (EIMC). A signal
    ///   that finds the ring empty (left over from before the arm) is
    ///   counted in [`IrqStats::stale`] and the queue sleeps on, still armed;
    ///   the timeout then counts from that signal. The vector stays masked
    ///   while the loop polls and is armed again only at the next empty
    ///   poll: one arm per wake-up however many bursts the ring holds
    ///   (NAPI's rule: Linux
    ///   `napi_complete_done` re-enables the interrupt only when a poll did
    ///   less than its budget);
    /// - adaptive: as interrupt, but first spins for a time budget (see
    ///   [`RxMode::Adaptive`]): the clock is read at the first empty poll of
    ///   an idle period and then every 4th.
    ///
    /// Before each sleep, [`Moderation::Dynamic`] moves the vector's EITR
    /// class by the frames and bytes received since the last sleep (Linux
    /// `igb_update_itr`), writing EITR only when it changes.
    ///
    /// Blocking happens on the calling thread: the queue's pinned thread, so
    /// the wake-up lands on the queue's core (the counterpart of IRQ
    /// affinity).
    #[inline]
    pub fn wait_rx(&mut self, received: usize) -> bool {
        match self.mode {
            RxMode::BusyPoll => false,
            RxMode::Interrupt { timeout } => received == 0 && self.sleep(timeout),
            RxMode::Adaptive { timeout, .. } => self.adapt(received, timeout),
        }
    }

    /// Adaptive mode's step: see [`RxMode::Adaptive`].
    fn adapt(&mut self, received: usize, timeout: Duration) -> bool {
        if received > 0 {
            if self.idle.take().is_some() {
                // Frames came while spinning: the spin saved a wake-up.
                self.spin.paid();
                self.irq_stats.spins_paid += 1;
            }
            return false;
        }
        let now = match self.idle {
            None => {
                let now = Instant::now();
                let t = nanos_since(self.epoch(), now);
                let packets = self.rx_stats().packets;
                let budget = self.spin.idle_starts(t, packets);
                self.irq_stats.spin_budget_ns = budget;
                self.empty_run = 0;
                self.idle = Some((now, budget));
                now
            }
            Some(_) => {
                self.empty_run = self.empty_run.wrapping_add(1);
                if self.empty_run % 4 != 0 {
                    return false;
                }
                Instant::now()
            }
        };
        let (start, budget) = self.idle.expect("set above");
        if (now - start).as_nanos() < budget as u128 {
            return false;
        }
        if budget > 0 {
            self.spin.missed();
        }
        self.idle = None;
        self.sleep(timeout)
    }

    /// The instant adaptive mode measures its cycles from: the first idle
    /// period's start.
    fn epoch(&mut self) -> Instant {
        *self.epoch.get_or_insert_with(Instant::now)
    }

    /// Move dynamic moderation's class by what arrived since the last sleep;
    /// write EITR when it changes.
    fn moderate(&mut self) {
        let Moderation::Dynamic { max_latency_us } = self.moderation else {
            return;
        };
        let s = self.rx_stats();
        let (p, b) = (s.packets - self.itr_seen.0, s.bytes - self.itr_seen.1);
        self.itr_seen = (s.packets, s.bytes);
        let usecs = self.itr.update(p, b, max_latency_us).min(self.max_usecs);
        if usecs != self.irq_stats.itr_usecs {
            if let Some(irq) = &self.irq {
                irq.set_usecs(usecs);
            }
            self.irq_stats.itr_usecs = usecs;
        }
    }

    /// Arm, re-check the ring, block, mask: see [`Queue::wait_rx`].
    ///
    /// System calls per wake-up: `poll(2)` and one `read(2)` of the
    /// eventfd. Signals left on the eventfd from before the arm (a vector
    /// that fired just as the queue raced past its arm; QEMU's EITR timer,
    /// which signals once more after the vector was masked) are not read
    /// beforehand: a signal that finds the ring empty sends the queue back
    /// to sleep still armed (no EIMC, EICR or EIMS), counted in
    /// [`IrqStats::stale`]. The timeout then counts from that signal.
    fn sleep(&mut self, timeout: Duration) -> bool {
        if self.irq.is_none() {
            return false;
        }
        self.moderate();
        let Some(irq) = &self.irq else {
            return false;
        };
        irq.arm();
        self.rings.set_rx_interrupts(true);
        if self.rx_ready() {
            self.mask_irq();
            self.irq_stats.raced += 1;
            return false;
        }
        let mut left = timeout;
        let mut since: Option<Instant> = None;
        loop {
            let n = irq.event.wait(left);
            self.irq_stats.interrupts += n;
            if n == 0 {
                self.irq_stats.timeouts += 1;
                break;
            }
            if self.rx_ready() {
                break;
            }
            // Nothing in the ring: a signal from before the arm. Still armed
            // (the cause is clear and the vector unmasked), so sleep on.
            self.irq_stats.stale += 1;
            let now = Instant::now();
            left = timeout.saturating_sub(now - *since.get_or_insert(now));
            if left.is_zero() {
                break;
            }
        }
        self.mask_irq();
        self.irq_stats.sleeps += 1;
        true
    }

    /// Mask the queue's interrupt (the vector's EIMC, or the virtqueue's
    /// `VRING_AVAIL_F_NO_INTERRUPT`, or with `VIRTIO_F_EVENT_IDX` its
    /// `used_event` moved away).
    fn mask_irq(&mut self) {
        if let Some(irq) = &self.irq {
            irq.mask();
        }
        self.rings.set_rx_interrupts(false);
    }

    /// This queue's receive mode.
    pub fn rx_mode(&self) -> RxMode {
        self.mode
    }

    /// Change this queue's receive mode, e.g. from its own thread.
    ///
    /// # Errors
    /// [`Error::RxModeNeedsMsix`] for a mode that needs interrupts on a queue whose
    /// device has not enabled MSI-X: set it with [`crate::Device::set_rx_mode`]
    /// (or [`crate::DeviceConfig::with_rx_mode`]) first.
    pub fn set_rx_mode(&mut self, mode: RxMode) -> Result<()> {
        if mode.uses_interrupts() && self.irq.is_none() {
            return Err(Error::RxModeNeedsMsix {
                queue: self.id,
                mode,
            });
        }
        self.mode = mode;
        self.empty_run = 0;
        self.idle = None;
        self.spin = match mode {
            RxMode::Adaptive { max_spin, .. } => SpinBudget::new(max_spin),
            _ => SpinBudget::default(),
        };
        self.irq_stats.spin_budget_ns = 0;
        Ok(())
    }

    /// Set the minimum interval between two interrupts of this queue's
    /// vector, in µs (EITR; 0: none), at run time: the counterpart of
    /// `ethtool -C <if> rx-usecs N`. Takes effect from the vector's next
    /// interrupt.
    ///
    /// # Errors
    /// [`Error::RxUsecsNeedsMsix`] when MSI-X is not enabled on the device,
    /// [`Error::RxUsecsTooLarge`] when `usecs` is above the family's EITR
    /// range (igb 8191 µs, 82599 1022 µs).
    pub fn set_rx_usecs(&mut self, usecs: u32) -> Result<()> {
        self.set_moderation(Moderation::Fixed { usecs })
    }

    /// Set how this queue's vector is throttled: a fixed EITR interval
    /// ([`Queue::set_rx_usecs`]) or igb's dynamic classes under a latency
    /// bound ([`Moderation::Dynamic`], Linux `igb_update_itr`/`igb_set_itr`),
    /// at run time, e.g. from the queue's own thread. Dynamic moderation
    /// starts at 49 µs (igb's `low_latency`) under its cap.
    ///
    /// # Errors
    /// [`Error::RxUsecsNeedsMsix`] when MSI-X is not enabled on the device,
    /// [`Error::RxUsecsTooLarge`] when the interval (or the dynamic cap, up
    /// to 245 µs, igb's longest class) is above the family's EITR range.
    pub fn set_moderation(&mut self, moderation: Moderation) -> Result<()> {
        let Some(irq) = &self.irq else {
            return Err(Error::RxUsecsNeedsMsix { queue: self.id });
        };
        if moderation.max_usecs() > self.max_usecs {
            return Err(Error::RxUsecsTooLarge {
                usecs: moderation.max_usecs(),
                max: self.max_usecs,
                family: self.family,
            });
        }
        let usecs = moderation.initial_usecs();
        irq.set_usecs(usecs);
        self.moderation = moderation;
        self.itr = Itr::default();
        let s = self.rx_stats();
        self.itr_seen = (s.packets, s.bytes);
        self.irq_stats.itr_usecs = usecs;
        Ok(())
    }

    /// How this queue's vector is throttled now.
    pub fn moderation(&self) -> Moderation {
        self.moderation
    }

    /// What this queue's waits did (zeros in busy-poll mode).
    pub fn irq_stats(&self) -> IrqStats {
        self.irq_stats
    }

    /// RX ring counters.
    pub fn rx_stats(&self) -> RxStats {
        self.rings.rx_stats()
    }
    /// TX ring counters.
    pub fn tx_stats(&self) -> TxStats {
        self.rings.tx_stats()
    }
    /// The burst loops this queue runs, chosen at setup from
    /// [`crate::DeviceConfig::data_path`]; a virtqueue has the scalar loop only.
    pub fn data_path(&self) -> crate::DataPath {
        self.rings.data_path()
    }
}

/// The shortest frame handed to the NIC, in bytes (Linux igb/ixgbe
/// `skb_put_padto(skb, 17)`).
pub(crate) const TX_MIN_FRAME: usize = 17;

/// Pad `p` with zeros to [`TX_MIN_FRAME`] bytes (every buffer holds at
/// least that many).
#[cold]
fn pad_short_frame(p: &mut Packet) {
    let n = p.len();
    if p.set_len(TX_MIN_FRAME).is_ok() {
        p.data_mut()[n..].fill(0);
    }
}

/// Nanoseconds from `epoch` to `now` (0 if `now` is earlier).
fn nanos_since(epoch: Instant, now: Instant) -> u64 {
    now.saturating_duration_since(epoch)
        .as_nanos()
        .min(u64::MAX as u128) as u64
}
