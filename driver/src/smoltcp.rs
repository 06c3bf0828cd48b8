//! smoltcp's [`::smoltcp::phy::Device`] over one pollnic
//! [`Queue`] (cargo feature `smoltcp`, smoltcp 0.12): run the smoltcp TCP/IP
//! stack on a port that pollnic drives.
//!
//! - **RX, zero copy.** `QueueDevice::receive` (`phy::Device::receive`) takes a burst from the RX
//!   ring into the wrapper; each [`RxToken`] owns one received [`Packet`]
//!   and hands smoltcp the DMA buffer the NIC wrote, in place. Consumed
//!   packets go back to the queue's buffer cache in bulk
//!   ([`Queue::free_bulk`]) on the next poll of the ring.
//! - **TX, zero copy.** A [`TxToken`] lets smoltcp write its frame straight
//!   into a mempool buffer of the queue, which goes out on the same queue's
//!   TX ring: frames are batched and the tail (TDT) is written once per
//!   batch ([`QueueDevice::flush`], or [`QueueDevice::poll`] which calls it).
//! - **RX and TX halves together.** `receive` returns an RX and a TX token
//!   from one `&mut self`: the RX token borrows only the wrapper's received
//!   burst, the TX token the queue's TX ring and buffer cache, so both live
//!   at once without a lock or a `RefCell`.
//! - **Capabilities.** Ethernet; `max_transmission_unit` is the port's MTU
//!   plus the 14-byte Ethernet header (smoltcp counts the header, not the
//!   FCS); `max_burst_size` is the number of frames the RX ring holds for
//!   the NIC between two polls (ring size − `rx_free_thresh` − 1, see
//!   [`pollnic_rings::rx_free_thresh`]); checksums: with checksum offload
//!   on (the default, [`QueueDevice::set_checksum_offload`]) smoltcp
//!   computes on transmit none of the checksums the port inserts (its
//!   [`ChecksumCapabilities`] say `None` for them), per protocol as
//!   [`Queue::tx_capabilities`] says: the IPv4, TCP and UDP ones on igb
//!   and ixgbe; on virtio-net with `VIRTIO_NET_F_CSUM` the TCP and UDP
//!   ones only, smoltcp summing the IPv4 header itself. The frames go out
//!   with [`Queue::tx_burst_offload`], each asking what it needs (ICMP's
//!   checksum smoltcp still computes: no NIC inserts it). smoltcp verifies no checksum
//!   on receive (its capabilities say `None` or `Tx`): the wrapper has
//!   checked every frame it hands over, with the NIC's verdict where the
//!   port reports one (below), so each checksum is summed once at most.
//! - **Bad input is counted.** Before a frame reaches smoltcp, its IPv4
//!   header and its TCP, UDP or ICMP header are checked with smoltcp's own
//!   `wire` parsers and checksums. A frame that fails is dropped here
//!   (smoltcp would drop it silently) and counted in
//!   [`SmolStats::rx_malformed`] or [`SmolStats::rx_bad_checksum`]; its
//!   buffer goes straight back to the cache. An IPv4 fragment is dropped
//!   and counted in [`SmolStats::rx_fragments`]: its L4 checksum can only be
//!   checked after reassembly, which smoltcp as pollnic builds it
//!   (without `proto-ipv4-fragmentation`) does not do either. When the port reports RX
//!   checksum status ([`crate::DeviceConfig::rx_checksum`]), a layer the
//!   NIC found bad is counted without summing it again, and one it found
//!   good is not summed here.
//!
//! ```no_run
//! use pollnic::smoltcp::QueueDevice;
//! use smoltcp::iface::{Config, Interface, SocketSet};
//! use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr};
//!
//! let mut dev = pollnic::Device::open("0000:00:0a.0", &pollnic::DeviceConfig::default())?;
//! let mac = EthernetAddress(dev.mac());
//! let mut phy = QueueDevice::new(&mut dev, 0);
//! let now = smoltcp::time::Instant::now();
//! let mut iface = Interface::new(Config::new(HardwareAddress::Ethernet(mac)), &mut phy, now);
//! iface.update_ip_addrs(|a| a.push(IpCidr::new(IpAddress::v4(10, 0, 0, 2), 24)).unwrap());
//! let mut sockets = SocketSet::new(vec![]);
//! loop {
//!     phy.poll(&mut iface, &mut sockets, smoltcp::time::Instant::now());
//! #   break;
//! }
//! # Ok::<(), pollnic::Error>(())
//! ```

use crate::device::Device;
use crate::queue::Queue;
use ::smoltcp::iface::{Interface, PollResult, SocketSet};
use ::smoltcp::phy::{self, ChecksumCapabilities, DeviceCapabilities, Medium};
use ::smoltcp::time::Instant;
use ::smoltcp::wire::{
    EthernetFrame, EthernetProtocol, Icmpv4Packet, IpAddress, IpProtocol, Ipv4Packet, TcpPacket,
    UdpPacket,
};
use pollnic_hw::offload::{ChecksumStatus, RxChecksum, TxOffload};
use pollnic_rings::{rx_free_thresh, Packet};

/// Frames taken from the RX ring per poll, and TX frames batched per tail
/// write (DPDK's default burst).
pub const BURST: usize = 32;

/// Counters of a [`QueueDevice`] (frames; all start at 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SmolStats {
    /// Frames handed to smoltcp.
    pub rx_frames: u64,
    /// Frames dropped before smoltcp because a header is truncated or
    /// inconsistent (Ethernet shorter than 14 bytes; IPv4 version not 4, IHL
    /// below 5 or total length beyond the frame; TCP data offset; UDP
    /// length; ICMP shorter than its header), as smoltcp's `new_checked`
    /// parsers and `Ipv4Repr::parse` find them.
    pub rx_malformed: u64,
    /// Frames dropped before smoltcp because the IPv4 header checksum or the
    /// TCP, UDP (non-zero) or ICMP checksum is wrong.
    pub rx_bad_checksum: u64,
    /// IPv4 fragments dropped before smoltcp (see the [module
    /// documentation](self)).
    pub rx_fragments: u64,
    /// Frames placed on the TX ring.
    pub tx_frames: u64,
    /// Frames smoltcp wrote that were dropped because the mempool had no
    /// buffer for them (written into a scratch buffer, never sent).
    pub tx_nobuf: u64,
    /// Times `QueueDevice::transmit` (`phy::Device::transmit`) refused a token because `BURST`
    /// frames were still waiting for room on the TX ring (smoltcp retries
    /// on its next poll; nothing is lost).
    pub tx_ring_full: u64,
}

/// smoltcp's `phy::Device` over one queue of a pollnic [`Device`]: see the
/// [module documentation](self).
///
/// Dropping it sends what is batched, waits up to 100 ms for the TX ring
/// to drain and returns every buffer it holds to the queue's cache.
pub struct QueueDevice<'q> {
    queue: &'q mut Queue,
    /// Received frames not yet handed out, newest first (popped from the end).
    rx: Vec<Packet>,
    /// Frames smoltcp has consumed, returned to the cache in bulk.
    rx_done: Vec<Packet>,
    /// Frames smoltcp wrote, waiting for the next tail write.
    tx: Vec<Packet>,
    /// A buffer ready for the next TX token.
    spare: Option<Packet>,
    /// Where a frame goes when the mempool has no buffer for it.
    scratch: Vec<u8>,
    stats: SmolStats,
    ip_mtu: usize,
    max_burst: usize,
    /// TX checksums left to the NIC ([`QueueDevice::set_checksum_offload`]).
    offload: CsumOffload,
    /// A run of TX frames with one offload request, on its way to the ring.
    run: Vec<Packet>,
}

impl<'q> QueueDevice<'q> {
    /// smoltcp's device over queue `queue` of `dev`, with `dev`'s MTU.
    ///
    /// # Panics
    /// If `queue` is not below [`Device::queue_count`].
    pub fn new(dev: &'q mut Device, queue: u16) -> Self {
        let mtu = dev.mtu() as usize;
        Self::on_queue(dev.queue(queue), mtu)
    }

    /// smoltcp's device over `queue`, for a port set up for an IP MTU of
    /// `ip_mtu` bytes ([`Device::mtu`]).
    pub fn on_queue(queue: &'q mut Queue, ip_mtu: usize) -> Self {
        let ring = queue.rx_ring_buffers();
        let offload = CsumOffload::of(queue);
        let max_burst = (ring - rx_free_thresh(ring as u16) as usize - 1).max(1);
        QueueDevice {
            queue,
            rx: Vec::with_capacity(BURST),
            rx_done: Vec::with_capacity(BURST),
            tx: Vec::with_capacity(BURST),
            spare: None,
            scratch: Vec::new(),
            stats: SmolStats::default(),
            ip_mtu,
            max_burst,
            offload,
            run: Vec::with_capacity(BURST),
        }
    }

    /// Leave the checksums of transmitted frames the port inserts to it
    /// (`on`, the default; advertised to smoltcp by
    /// `phy::Device::capabilities`, per protocol as
    /// [`Queue::tx_capabilities`] says: IPv4, TCP and UDP on igb and
    /// ixgbe, TCP and UDP on virtio-net with `VIRTIO_NET_F_CSUM`) or
    /// compute them all in software as smoltcp does by default. Call it
    /// before the `Interface` is made: smoltcp reads the capabilities as it
    /// builds each frame. On a port whose device offers no checksum offload
    /// (virtio-net without CSUM) it stays off.
    pub fn set_checksum_offload(&mut self, on: bool) {
        self.offload = if on {
            CsumOffload::of(self.queue)
        } else {
            CsumOffload::default()
        };
    }

    /// Whether any checksum of transmitted frames is left to the NIC:
    /// [`QueueDevice::set_checksum_offload`] asked for it (the default)
    /// and the port inserts some (igb and ixgbe: IPv4, TCP and UDP;
    /// virtio-net with `VIRTIO_NET_F_CSUM`: TCP and UDP).
    pub fn checksum_offload(&self) -> bool {
        self.offload.ipv4 || self.offload.l4
    }

    /// The counters so far.
    pub fn stats(&self) -> SmolStats {
        self.stats
    }

    /// The queue underneath (its counters, its mempool).
    pub fn queue(&self) -> &Queue {
        self.queue
    }

    /// Put every frame smoltcp has written on the TX ring (one TDT write);
    /// frames that do not fit stay batched for the next call. Returns how
    /// many are still waiting.
    pub fn flush(&mut self) -> usize {
        if !self.tx.is_empty() {
            let n = if self.offload.any() {
                send_offloaded(self.queue, &mut self.tx, &mut self.run, self.offload)
            } else {
                self.queue.tx_burst(&mut self.tx)
            };
            self.stats.tx_frames += n as u64;
        }
        self.tx.len()
    }

    /// One round of the stack: [`Interface::poll`] on this device, then
    /// [`QueueDevice::flush`]. Call it in a loop (it never blocks).
    pub fn poll(
        &mut self,
        iface: &mut Interface,
        sockets: &mut SocketSet<'_>,
        now: Instant,
    ) -> PollResult {
        let r = iface.poll(now, self, sockets);
        self.flush();
        r
    }

    /// Make sure a TX buffer is ready; false when the mempool is empty even
    /// after reclaiming sent buffers.
    fn ensure_spare(&mut self) -> bool {
        if self.spare.is_none() {
            self.spare = self.queue.cache_mut().alloc();
            if self.spare.is_none() {
                self.queue.reclaim();
                self.spare = self.queue.cache_mut().alloc();
            }
        }
        self.spare.is_some()
    }

    /// Refill the received burst from the ring once it is empty; returns
    /// whether a frame is waiting. Frames that fail the header checks are
    /// dropped and counted here.
    fn next_rx(&mut self) -> Option<Packet> {
        loop {
            if let Some(p) = self.rx.pop() {
                match check_frame(p.data(), p.rx_checksum()) {
                    Verdict::Pass => return Some(p),
                    Verdict::Malformed => self.stats.rx_malformed += 1,
                    Verdict::BadChecksum => self.stats.rx_bad_checksum += 1,
                    Verdict::Fragment => self.stats.rx_fragments += 1,
                }
                self.rx_done.push(p);
                continue;
            }
            // The burst is used up: give its buffers back, send what waits,
            // and poll the ring.
            self.queue.free_bulk(&mut self.rx_done);
            self.flush();
            if self.queue.rx_burst(&mut self.rx, BURST) == 0 {
                return None;
            }
            self.rx.reverse();
        }
    }
}

impl Drop for QueueDevice<'_> {
    fn drop(&mut self) {
        self.flush();
        if !self.tx.is_empty() {
            // The ring stayed full: make room once more, then give up on the rest.
            self.queue.flush_tx(std::time::Duration::from_millis(100));
            self.flush();
        }
        self.queue.flush_tx(std::time::Duration::from_millis(100));
        self.rx_done.append(&mut self.rx);
        self.rx_done.append(&mut self.tx);
        self.rx_done.extend(self.spare.take());
        self.queue.free_bulk(&mut self.rx_done);
    }
}

/// What the header checks found.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Pass,
    Malformed,
    BadChecksum,
    /// An IPv4 fragment (more fragments, or an offset).
    Fragment,
}

/// Which checksums of transmitted frames the port inserts for smoltcp.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct CsumOffload {
    /// The IPv4 header checksum.
    ipv4: bool,
    /// The TCP and UDP checksums (over IPv4 and IPv6).
    l4: bool,
}

impl CsumOffload {
    /// What `queue`'s port inserts ([`Queue::tx_capabilities`]).
    fn of(queue: &Queue) -> CsumOffload {
        let t = queue.tx_capabilities();
        CsumOffload {
            ipv4: t.ipv4_checksum,
            l4: t.l4_checksum,
        }
    }
    fn any(self) -> bool {
        self.ipv4 || self.l4
    }
}

/// Send the frames of `tx` from its front, each run of frames that ask the
/// same offloads ([`offload_for`]) in one [`Queue::tx_burst_offload`],
/// until the ring is full; what is not taken stays in `tx`, in order.
/// Returns how many were taken. `run` is an empty scratch `Vec`.
fn send_offloaded(
    queue: &mut Queue,
    tx: &mut Vec<Packet>,
    run: &mut Vec<Packet>,
    on: CsumOffload,
) -> usize {
    let mut taken = 0;
    while !tx.is_empty() {
        let ol = offload_for(tx[0].data(), on);
        let same = tx
            .iter()
            .take_while(|p| offload_for(p.data(), on) == ol)
            .count();
        run.extend(tx.drain(..same));
        let n = queue.tx_burst_offload(run, &ol);
        taken += n;
        if !run.is_empty() {
            // The ring is full: the rest goes back in front, in order.
            tx.splice(0..0, run.drain(..));
            break;
        }
    }
    taken
}

/// The offloads a frame smoltcp wrote with [`QueueDevice`]'s capabilities
/// needs, of those `on` leaves to the port: the IPv4 header checksum for
/// every IPv4 frame, the L4 checksum for TCP and UDP over IPv4 (not a
/// fragment) or IPv6; nothing otherwise.
fn offload_for(f: &[u8], on: CsumOffload) -> TxOffload {
    if f.len() < 14 {
        return TxOffload::NONE;
    }
    match [f[12], f[13]] {
        [0x08, 0x00] if f.len() >= 34 => {
            let frag = u16::from_be_bytes([f[20], f[21]]) & 0x3fff != 0;
            let mut ol = TxOffload::NONE;
            if on.ipv4 {
                ol = ol.with_ipv4_checksum();
            }
            if on.l4 && !frag && matches!(f[23], 6 | 17) {
                ol = ol.with_l4_checksum();
            }
            ol
        }
        [0x86, 0xdd] if on.l4 && f.len() >= 54 && matches!(f[20], 6 | 17) => {
            TxOffload::NONE.with_l4_checksum()
        }
        _ => TxOffload::NONE,
    }
}

/// Check an Ethernet frame's IPv4 and L4 headers with smoltcp's parsers;
/// other EtherTypes (ARP, IPv6) pass untouched. `hw` is what the NIC
/// found: a layer it found bad is bad, one it found good is not summed
/// again.
fn check_frame(frame: &[u8], hw: RxChecksum) -> Verdict {
    let Ok(eth) = EthernetFrame::new_checked(frame) else {
        return Verdict::Malformed;
    };
    if eth.ethertype() != EthernetProtocol::Ipv4 {
        return Verdict::Pass;
    }
    let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else {
        return Verdict::Malformed;
    };
    // `new_checked` checks the lengths against each other, not that the
    // version is 4 or that IHL covers the fixed 20-byte header (smoltcp's
    // `Ipv4Repr::parse` later refuses both).
    if ip.version() != 4 || ip.header_len() < 20 {
        return Verdict::Malformed;
    }
    // The NIC's verdict replaces the sum, never the structural checks: a
    // truncated or inconsistent frame is malformed even when the NIC, which
    // summed what it had, calls its checksum bad.
    let ip_ok = match hw.ip {
        ChecksumStatus::Good => true,
        ChecksumStatus::Bad => false,
        _ => ip.verify_checksum(),
    };
    if !ip_ok {
        return Verdict::BadChecksum;
    }
    if ip.more_frags() || ip.frag_offset() != 0 {
        // A fragment's payload is not a whole L4 packet: its checksum could
        // be checked only after reassembly, and smoltcp is told to verify
        // nothing on receive.
        return Verdict::Fragment;
    }
    let (src, dst) = (
        IpAddress::Ipv4(ip.src_addr()),
        IpAddress::Ipv4(ip.dst_addr()),
    );
    let payload = ip.payload();
    let l4_ok = |sum: &dyn Fn() -> bool| match hw.l4 {
        ChecksumStatus::Good => true,
        ChecksumStatus::Bad => false,
        _ => sum(),
    };
    let ok = match ip.next_header() {
        IpProtocol::Tcp => match TcpPacket::new_checked(payload) {
            Ok(t) => l4_ok(&|| t.verify_checksum(&src, &dst)),
            Err(_) => return Verdict::Malformed,
        },
        IpProtocol::Udp => match UdpPacket::new_checked(payload) {
            Ok(u) => l4_ok(&|| u.verify_checksum(&src, &dst)),
            Err(_) => return Verdict::Malformed,
        },
        IpProtocol::Icmp => match Icmpv4Packet::new_checked(payload) {
            Ok(i) => i.verify_checksum(),
            Err(_) => return Verdict::Malformed,
        },
        _ => true,
    };
    if ok {
        Verdict::Pass
    } else {
        Verdict::BadChecksum
    }
}

/// One received frame, lent to smoltcp in place (the DMA buffer the NIC
/// wrote); its buffer goes back to the queue's cache afterwards.
pub struct RxToken<'a> {
    packet: Packet,
    done: &'a mut Vec<Packet>,
}

impl phy::RxToken for RxToken<'_> {
    fn consume<R, F>(self, f: F) -> R
    where
        F: FnOnce(&[u8]) -> R,
    {
        let r = f(self.packet.data());
        self.done.push(self.packet);
        r
    }
}

/// Room for one frame in a mempool buffer of the queue; the frame joins
/// the TX batch when smoltcp has written it.
pub struct TxToken<'a> {
    queue: &'a mut Queue,
    spare: &'a mut Option<Packet>,
    tx: &'a mut Vec<Packet>,
    scratch: &'a mut Vec<u8>,
    stats: &'a mut SmolStats,
    offload: &'a CsumOffload,
    run: &'a mut Vec<Packet>,
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F>(self, len: usize, f: F) -> R
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        let mut p = match self.spare.take() {
            Some(p) if len <= p.capacity() => p,
            other => {
                // No buffer (or a frame longer than a buffer, which smoltcp
                // never writes within the MTU it was given): let smoltcp
                // write, and drop the frame.
                *self.spare = other;
                self.stats.tx_nobuf += 1;
                self.scratch.resize(len, 0);
                return f(&mut self.scratch[..len]);
            }
        };
        p.set_len(len)
            .expect("len was checked against the capacity");
        let r = f(p.data_mut());
        self.tx.push(p);
        if self.tx.len() >= BURST {
            let n = if self.offload.any() {
                send_offloaded(self.queue, self.tx, self.run, *self.offload)
            } else {
                self.queue.tx_burst(self.tx)
            };
            self.stats.tx_frames += n as u64;
        }
        r
    }
}

impl phy::Device for QueueDevice<'_> {
    type RxToken<'a>
        = RxToken<'a>
    where
        Self: 'a;
    type TxToken<'a>
        = TxToken<'a>
    where
        Self: 'a;

    fn receive(&mut self, _timestamp: Instant) -> Option<(RxToken<'_>, TxToken<'_>)> {
        let packet = self.next_rx()?;
        // A reply buffer if one can be had; without one the TX token drops
        // (and counts) what smoltcp writes rather than holding up receive.
        self.ensure_spare();
        self.stats.rx_frames += 1;
        Some((
            RxToken {
                packet,
                done: &mut self.rx_done,
            },
            TxToken {
                queue: self.queue,
                spare: &mut self.spare,
                tx: &mut self.tx,
                scratch: &mut self.scratch,
                stats: &mut self.stats,
                offload: &self.offload,
                run: &mut self.run,
            },
        ))
    }

    fn transmit(&mut self, _timestamp: Instant) -> Option<TxToken<'_>> {
        if self.tx.len() >= BURST && self.flush() >= BURST {
            self.stats.tx_ring_full += 1;
            return None;
        }
        if !self.ensure_spare() {
            return None;
        }
        Some(TxToken {
            queue: self.queue,
            spare: &mut self.spare,
            tx: &mut self.tx,
            scratch: &mut self.scratch,
            stats: &mut self.stats,
            offload: &self.offload,
            run: &mut self.run,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = self.ip_mtu + 14;
        caps.max_burst_size = Some(self.max_burst);
        caps.checksum = ChecksumCapabilities::default();
        // `check_frame` verified every frame smoltcp gets (with the NIC's
        // verdict where there is one): smoltcp computes on transmit only,
        // and not even that for what the NIC inserts (`send_offloaded`).
        // ICMP's the NIC cannot insert.
        let tx = |offloaded: bool| {
            if offloaded {
                phy::Checksum::None
            } else {
                phy::Checksum::Tx
            }
        };
        caps.checksum.ipv4 = tx(self.offload.ipv4);
        caps.checksum.tcp = tx(self.offload.l4);
        caps.checksum.udp = tx(self.offload.l4);
        caps.checksum.icmpv4 = phy::Checksum::Tx;
        caps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet + IPv4 + UDP frame with correct checksums.
    fn udp_frame(payload: &[u8]) -> Vec<u8> {
        use ::smoltcp::phy::ChecksumCapabilities as C;
        use ::smoltcp::wire::{Ipv4Address, Ipv4Repr, UdpRepr};
        let (src, dst) = (Ipv4Address::new(10, 0, 0, 1), Ipv4Address::new(10, 0, 0, 2));
        let udp = UdpRepr {
            src_port: 1000,
            dst_port: 7,
        };
        let ip = Ipv4Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: IpProtocol::Udp,
            payload_len: udp.header_len() + payload.len(),
            hop_limit: 64,
        };
        let mut f = vec![0u8; 14 + ip.buffer_len() + udp.header_len() + payload.len()];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let mut p = Ipv4Packet::new_unchecked(&mut f[14..]);
        ip.emit(&mut p, &C::default());
        let mut u = UdpPacket::new_unchecked(p.payload_mut());
        udp.emit(
            &mut u,
            &src.into(),
            &dst.into(),
            payload.len(),
            |b| b.copy_from_slice(payload),
            &C::default(),
        );
        f
    }

    fn check_frame_sw(f: &[u8]) -> Verdict {
        check_frame(f, RxChecksum::from_status_word(0))
    }

    #[test]
    fn the_nics_verdict_is_taken_and_offloads_are_asked_per_frame() {
        use pollnic_hw::offload::{rx_status_word, IGB_L4E_BIT, RXD_STAT_IPCS, RXD_STAT_L4CS};
        let good = udp_frame(b"hello");
        let checked = RXD_STAT_IPCS | RXD_STAT_L4CS;
        let hw = |st: u32| RxChecksum::from_status_word(rx_status_word(st, 0, IGB_L4E_BIT));
        // The NIC says bad: counted as bad without summing (the frame is fine).
        assert_eq!(
            check_frame(&good, hw(checked | 1 << 29)),
            Verdict::BadChecksum
        );
        assert_eq!(
            check_frame(&good, hw(checked | 1 << 30)),
            Verdict::BadChecksum
        );
        // ... but a malformed frame stays malformed whatever the NIC summed
        // (IPv4 total length beyond the frame; UDP length beyond the packet).
        let bad_both = hw(checked | 1 << 29 | 1 << 30);
        assert_eq!(
            check_frame(&good[..14 + 20 + 4], bad_both),
            Verdict::Malformed
        );
        let mut bad_udp_len = good.clone();
        bad_udp_len[14 + 20 + 4..14 + 20 + 6].copy_from_slice(&100u16.to_be_bytes());
        assert_eq!(
            check_frame(&bad_udp_len, hw(checked | 1 << 29)),
            Verdict::Malformed
        );
        // The NIC says good: not summed again (a wrong sum passes).
        let mut wrong = good.clone();
        let last = wrong.len() - 1;
        wrong[last] ^= 0x55;
        assert_eq!(check_frame(&wrong, hw(checked)), Verdict::Pass);
        assert_eq!(check_frame_sw(&wrong), Verdict::BadChecksum);
        // Per-frame requests.
        let intel = CsumOffload {
            ipv4: true,
            l4: true,
        };
        let full = TxOffload::NONE.with_ipv4_checksum().with_l4_checksum();
        assert_eq!(offload_for(&good, intel), full);
        let mut icmp = good.clone();
        icmp[23] = 1;
        assert_eq!(
            offload_for(&icmp, intel),
            TxOffload::NONE.with_ipv4_checksum()
        );
        let mut arp = good.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(offload_for(&arp, intel), TxOffload::NONE);
        // virtio-net with VIRTIO_NET_F_CSUM: the L4 checksum only.
        let virtio = CsumOffload {
            ipv4: false,
            l4: true,
        };
        assert_eq!(
            offload_for(&good, virtio),
            TxOffload::NONE.with_l4_checksum()
        );
        assert_eq!(offload_for(&icmp, virtio), TxOffload::NONE);
        assert_eq!(offload_for(&good, CsumOffload::default()), TxOffload::NONE);
    }

    #[test]
    fn a_good_frame_passes_and_bad_ones_are_sorted() {
        let good = udp_frame(b"hello");
        assert_eq!(check_frame_sw(&good), Verdict::Pass);
        assert_eq!(check_frame_sw(&good[..10]), Verdict::Malformed);
        // IPv4 total length beyond the frame.
        assert_eq!(check_frame_sw(&good[..14 + 20 + 4]), Verdict::Malformed);
        let mut bad_ihl = good.clone();
        bad_ihl[14] = 0x43; // IHL 3 words < 20 bytes
        assert_eq!(check_frame_sw(&bad_ihl), Verdict::Malformed);
        let mut bad_ver = good.clone();
        bad_ver[14] = 0x65;
        assert_ne!(check_frame_sw(&bad_ver), Verdict::Pass);
        let mut bad_ip_sum = good.clone();
        bad_ip_sum[14 + 10] ^= 0xff;
        assert_eq!(check_frame_sw(&bad_ip_sum), Verdict::BadChecksum);
        let mut bad_udp = good.clone();
        let last = bad_udp.len() - 1;
        bad_udp[last] ^= 0x55; // payload byte: the UDP checksum no longer matches
        assert_eq!(check_frame_sw(&bad_udp), Verdict::BadChecksum);
        let mut bad_udp_len = good.clone();
        bad_udp_len[14 + 20 + 4..14 + 20 + 6].copy_from_slice(&100u16.to_be_bytes());
        assert_eq!(check_frame_sw(&bad_udp_len), Verdict::Malformed);
        let mut arp = good.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(check_frame_sw(&arp), Verdict::Pass);
        // A fragment (MF set, then an offset), its IPv4 checksum made right
        // again: dropped as a fragment, not passed on unverified.
        for flags_off in [0x2000u16, 0x0004] {
            let mut frag = good.clone();
            frag[14 + 6..14 + 8].copy_from_slice(&flags_off.to_be_bytes());
            frag[14 + 10..14 + 12].fill(0);
            let mut ip = Ipv4Packet::new_unchecked(&mut frag[14..]);
            ip.fill_checksum();
            assert_eq!(check_frame_sw(&frag), Verdict::Fragment, "{flags_off:#x}");
        }
    }
}
