//! `pollnic::smoltcp::QueueDevice` (features `smoltcp` and `model`) on two
//! software 82576s wired back to back: two smoltcp stacks, each on a pollnic
//! queue, ping, echo UDP and move a TCP stream between them through the
//! rings, descriptors and mempools of the real driver code.

use pollnic::smoltcp::{QueueDevice, SmolStats};
use pollnic::{Device, DeviceConfig, Mempool};
use pollnic_model::igb::{ModelConfig, RxOutcome, Soft82576};
use smoltcp::iface::{Config, Interface, SocketSet};
use smoltcp::phy::{Device as _, RxToken as _, TxToken as _};
use smoltcp::socket::{icmp, tcp, udp};
use smoltcp::time::Instant;
use smoltcp::wire::{
    EthernetAddress, HardwareAddress, Icmpv4Packet, Icmpv4Repr, IpAddress, IpCidr, IpEndpoint,
};
use std::time::Duration;

const IP_A: IpAddress = IpAddress::v4(10, 0, 0, 1);
const IP_B: IpAddress = IpAddress::v4(10, 0, 0, 2);

fn cfg() -> DeviceConfig {
    DeviceConfig::default()
        .with_rx_ring_size(128)
        .with_tx_ring_size(128)
        .with_mempool_size(1024)
        .with_link_timeout(Duration::from_secs(2))
}

fn model(last: u8) -> Soft82576 {
    Soft82576::new(ModelConfig {
        mac: [0x52, 0x54, 0x00, 0x12, 0x34, last],
        ..Default::default()
    })
}

/// One end: a model NIC, a pollnic device on it, and the pool to check at the end.
fn open(last: u8) -> (Soft82576, Device, Mempool) {
    let m = model(last);
    let dev = m.open(&cfg()).expect("bring-up on the model");
    let pool = dev.mempool().clone();
    (m, dev, pool)
}

fn iface(dev: &mut QueueDevice<'_>, mac: [u8; 6], ip: IpAddress) -> Interface {
    let conf = Config::new(HardwareAddress::Ethernet(EthernetAddress(mac)));
    let mut iface = Interface::new(conf, dev, Instant::ZERO);
    iface.update_ip_addrs(|a| a.push(IpCidr::new(ip, 24)).unwrap());
    iface
}

/// Carry what each model sent to the other; returns how many frames moved.
fn wire(a: &Soft82576, b: &Soft82576) -> usize {
    let mut n = 0;
    for (from, to) in [(a, b), (b, a)] {
        for f in from.take_tx_frames() {
            assert!(
                matches!(to.receive(&f), RxOutcome::Delivered { .. }),
                "a {}-byte frame was not delivered",
                f.len()
            );
            n += 1;
        }
    }
    n
}

/// Both stacks, each on its own pollnic queue, over one simulated clock.
struct Pair<'a> {
    ma: &'a Soft82576,
    mb: &'a Soft82576,
    pa: QueueDevice<'a>,
    pb: QueueDevice<'a>,
    ia: Interface,
    ib: Interface,
    sa: SocketSet<'static>,
    sb: SocketSet<'static>,
    now: Instant,
}

impl Pair<'_> {
    fn step(&mut self) -> usize {
        self.now += smoltcp::time::Duration::from_millis(1);
        self.pa.poll(&mut self.ia, &mut self.sa, self.now);
        self.pb.poll(&mut self.ib, &mut self.sb, self.now);
        wire(self.ma, self.mb)
    }
}

fn pair<'a>(
    ma: &'a Soft82576,
    da: &'a mut Device,
    mb: &'a Soft82576,
    db: &'a mut Device,
) -> Pair<'a> {
    let (mac_a, mac_b) = (da.mac(), db.mac());
    let mut pa = QueueDevice::new(da, 0);
    let mut pb = QueueDevice::new(db, 0);
    let ia = iface(&mut pa, mac_a, IP_A);
    let ib = iface(&mut pb, mac_b, IP_B);
    Pair {
        ma,
        mb,
        pa,
        pb,
        ia,
        ib,
        sa: SocketSet::new(vec![]),
        sb: SocketSet::new(vec![]),
        now: Instant::ZERO,
    }
}

/// Every buffer of both pools is back once the devices are closed.
fn assert_pools_full(pools: &[&Mempool]) {
    for p in pools {
        assert_eq!(p.free_count(), p.capacity() as usize, "buffers missing");
    }
}

#[test]
fn capabilities_are_the_ports_mtu_the_rx_ring_and_the_offloaded_checksums() {
    let (_m, mut dev, _pool) = open(1);
    let mut phy = QueueDevice::new(&mut dev, 0);
    let caps = phy.capabilities();
    assert_eq!(caps.max_transmission_unit, 1500 + 14);
    // 128 descriptors, 32 held back behind the tail, one never armed.
    assert_eq!(caps.max_burst_size, Some(128 - 32 - 1));
    assert_eq!(caps.medium, smoltcp::phy::Medium::Ethernet);
    use smoltcp::phy::Checksum;
    // By default the NIC inserts IPv4, TCP and UDP checksums on transmit
    // and the wrapper has verified every received frame, so smoltcp sums
    // none of them; ICMP's it computes on transmit (the NIC has none).
    let ck = &caps.checksum;
    for c in [&ck.ipv4, &ck.udp, &ck.tcp] {
        assert!(
            matches!(c, Checksum::None),
            "{c:?}: the NIC computes it on transmit, the wrapper verified it"
        );
    }
    assert!(matches!(ck.icmpv4, Checksum::Tx));
    assert!(phy.checksum_offload());
    phy.set_checksum_offload(false);
    assert!(!phy.checksum_offload());
    let ck = phy.capabilities().checksum;
    for c in [&ck.ipv4, &ck.udp, &ck.tcp, &ck.icmpv4] {
        assert!(matches!(c, Checksum::Tx), "{c:?}: offload turned off");
    }
}

#[test]
fn rx_tokens_lend_the_dma_buffer_and_tx_tokens_write_into_the_pool() {
    let (m, mut dev, pool) = open(1);
    let (lo, hi) = {
        let r = pool.region();
        (r.va() as usize, r.va() as usize + r.len())
    };
    let mac = dev.mac();
    {
        let mut phy = QueueDevice::new(&mut dev, 0);
        let mut frame = vec![0u8; 60];
        frame[..6].copy_from_slice(&mac);
        frame[12..14].copy_from_slice(&[0x08, 0x06]); // ARP: passes the checks untouched
        frame[20] = 0xab;
        assert!(matches!(m.receive(&frame), RxOutcome::Delivered { .. }));
        let (rx, tx) = phy.receive(Instant::ZERO).expect("one frame waits");
        let at = rx.consume(|b| {
            assert_eq!(b, &frame[..]);
            b.as_ptr() as usize
        });
        assert!(
            (lo..hi).contains(&at),
            "RX bytes at {at:#x}, pool {lo:#x}..{hi:#x}"
        );
        let at = tx.consume(64, |b| {
            b.fill(0x5a);
            b.as_ptr() as usize
        });
        assert!(
            (lo..hi).contains(&at),
            "TX bytes at {at:#x}, pool {lo:#x}..{hi:#x}"
        );
        assert!(phy.receive(Instant::ZERO).is_none());
        assert_eq!(phy.flush(), 0);
        assert_eq!(m.take_tx_frames(), vec![vec![0x5a; 64]]);
        let s = phy.stats();
        assert_eq!((s.rx_frames, s.tx_frames), (1, 1), "{s:?}");
    }
    drop(dev);
    assert_pools_full(&[&pool]);
}

#[test]
fn ping_and_udp_echo_between_two_stacks() {
    let ((ma, mut da, pool_a), (mb, mut db, pool_b)) = (open(1), open(2));
    {
        let mut p = pair(&ma, &mut da, &mb, &mut db);
        let echo = p.sa.add(udp::Socket::new(
            udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 64], vec![0; 65536]),
            udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 64], vec![0; 65536]),
        ));
        p.sa.get_mut::<udp::Socket>(echo).bind(7).unwrap();
        let client = p.sb.add(udp::Socket::new(
            udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 64], vec![0; 65536]),
            udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 64], vec![0; 65536]),
        ));
        p.sb.get_mut::<udp::Socket>(client).bind(4000).unwrap();
        let ping = p.sb.add(icmp::Socket::new(
            icmp::PacketBuffer::new(vec![icmp::PacketMetadata::EMPTY; 8], vec![0; 4096]),
            icmp::PacketBuffer::new(vec![icmp::PacketMetadata::EMPTY; 8], vec![0; 4096]),
        ));
        p.sb.get_mut::<icmp::Socket>(ping)
            .bind(icmp::Endpoint::Ident(0x22))
            .unwrap();

        // Ping: smoltcp's interface on A answers echo requests itself.
        let mut replies = 0;
        for seq in 0..20u16 {
            let data = [seq as u8; 56];
            let req = Icmpv4Repr::EchoRequest {
                ident: 0x22,
                seq_no: seq,
                data: &data,
            };
            let caps = p.pb.capabilities();
            let s = p.sb.get_mut::<icmp::Socket>(ping);
            let buf = s.send(req.buffer_len(), IP_A).unwrap();
            req.emit(&mut Icmpv4Packet::new_unchecked(buf), &caps.checksum);
            for _ in 0..50 {
                p.step();
                let s = p.sb.get_mut::<icmp::Socket>(ping);
                if let Ok((bytes, from)) = s.recv() {
                    assert_eq!(from, IP_A);
                    let r = Icmpv4Packet::new_checked(bytes).unwrap();
                    assert_eq!((r.echo_seq_no(), r.data()), (seq, &data[..]));
                    replies += 1;
                    break;
                }
            }
        }
        assert_eq!(replies, 20);

        // UDP: 500 datagrams, echoed by a socket on A, come back byte-identical.
        let to = IpEndpoint::new(IP_A, 7);
        let (mut sent, mut got) = (0u32, 0u32);
        let mut buf = [0u8; 2048];
        for _ in 0..20_000 {
            if sent < 500 && sent - got < 32 {
                let len = 1 + (sent as usize * 37) % 1400;
                let d: Vec<u8> = (0..len).map(|i| (i as u32 ^ sent) as u8).collect();
                p.sb.get_mut::<udp::Socket>(client)
                    .send_slice(&d, to)
                    .unwrap();
                sent += 1;
            }
            p.step();
            let s = p.sa.get_mut::<udp::Socket>(echo);
            while let Ok((n, meta)) = s.recv_slice(&mut buf) {
                s.send_slice(&buf[..n], meta.endpoint).unwrap();
            }
            let c = p.sb.get_mut::<udp::Socket>(client);
            while let Ok((n, _)) = c.recv_slice(&mut buf) {
                let len = 1 + (got as usize * 37) % 1400;
                assert_eq!(n, len, "datagram {got}");
                assert!(
                    buf[..n]
                        .iter()
                        .enumerate()
                        .all(|(i, &b)| b == (i as u32 ^ got) as u8),
                    "datagram {got} differs"
                );
                got += 1;
            }
            if got == 500 {
                break;
            }
        }
        assert_eq!(got, 500);
        let (sa, sb) = (p.pa.stats(), p.pb.stats());
        assert_eq!(
            sa.rx_malformed + sa.rx_bad_checksum + sa.tx_nobuf,
            0,
            "{sa:?}"
        );
        assert_eq!(
            sb.rx_malformed + sb.rx_bad_checksum + sb.tx_nobuf,
            0,
            "{sb:?}"
        );
    }
    drop((da, db));
    assert_pools_full(&[&pool_a, &pool_b]);
}

/// A server on A sends `len` bytes of a pattern; B reads them all.
fn tcp_transfer(p: &mut Pair<'_>, len: usize) {
    let server = p.sa.add(tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0; 65536]),
        tcp::SocketBuffer::new(vec![0; 65536]),
    ));
    p.sa.get_mut::<tcp::Socket>(server).listen(80).unwrap();
    let client = p.sb.add(tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0; 65536]),
        tcp::SocketBuffer::new(vec![0; 65536]),
    ));
    p.sb.get_mut::<tcp::Socket>(client)
        .connect(p.ib.context(), (IP_A, 80), 49152)
        .unwrap();
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let (mut off, mut got) = (0, Vec::with_capacity(len));
    for _ in 0..200_000 {
        p.step();
        let s = p.sa.get_mut::<tcp::Socket>(server);
        if s.may_send() && off < len {
            off += s.send_slice(&data[off..]).unwrap();
            if off == len {
                s.close();
            }
        }
        let c = p.sb.get_mut::<tcp::Socket>(client);
        while c.can_recv() {
            c.recv(|b| {
                got.extend_from_slice(b);
                (b.len(), ())
            })
            .unwrap();
        }
        if got.len() == len && !c.may_recv() {
            break;
        }
    }
    assert!(
        got.len() == len && got == data,
        "got {} of {len} bytes, or they differ",
        got.len()
    );
}

#[test]
fn a_tcp_stream_arrives_whole_and_every_buffer_comes_home() {
    let ((ma, mut da, pool_a), (mb, mut db, pool_b)) = (open(1), open(2));
    let (sa, sb);
    {
        let mut p = pair(&ma, &mut da, &mb, &mut db);
        tcp_transfer(&mut p, 2 << 20);
        // Let the FIN/ACKs finish.
        for _ in 0..100 {
            p.step();
        }
        sa = p.pa.stats();
        sb = p.pb.stats();
    }
    assert!(sa.tx_frames > (2 << 20) / 1460, "{sa:?}");
    assert_eq!(sa.tx_nobuf + sb.tx_nobuf, 0, "{sa:?} {sb:?}");
    drop((da, db));
    assert_pools_full(&[&pool_a, &pool_b]);
    assert!(ma.violations().is_empty() && mb.violations().is_empty());
}

/// Truncated and malformed IPv4/TCP/UDP frames for `dst`: (frame, whether
/// it is malformed rather than of a bad checksum).
fn bad_frames(dst: [u8; 6], src: [u8; 6]) -> Vec<(Vec<u8>, bool)> {
    use smoltcp::phy::ChecksumCapabilities;
    use smoltcp::wire::{IpProtocol, Ipv4Packet, Ipv4Repr, TcpPacket, TcpRepr, TcpSeqNumber};
    let tcp = TcpRepr {
        src_port: 5000,
        dst_port: 80,
        control: smoltcp::wire::TcpControl::Syn,
        seq_number: TcpSeqNumber(1),
        ack_number: None,
        window_len: 1024,
        window_scale: None,
        max_seg_size: None,
        sack_permitted: false,
        sack_ranges: [None; 3],
        timestamp: None,
        payload: &[],
    };
    let ip = Ipv4Repr {
        src_addr: smoltcp::wire::Ipv4Address::new(10, 0, 0, 2),
        dst_addr: smoltcp::wire::Ipv4Address::new(10, 0, 0, 1),
        next_header: IpProtocol::Tcp,
        payload_len: tcp.header_len(),
        hop_limit: 64,
    };
    let mut good = vec![0u8; 14 + 20 + tcp.header_len()];
    good[..6].copy_from_slice(&dst);
    good[6..12].copy_from_slice(&src);
    good[12..14].copy_from_slice(&[0x08, 0x00]);
    let ck = ChecksumCapabilities::default();
    ip.emit(&mut Ipv4Packet::new_unchecked(&mut good[14..]), &ck);
    tcp.emit(
        &mut TcpPacket::new_unchecked(&mut good[34..]),
        &ip.src_addr.into(),
        &ip.dst_addr.into(),
        &ck,
    );
    let mut out = Vec::new();
    // Truncated: the IPv4 total length says more than the frame holds
    // (padded to 60 bytes, as on the wire).
    let mut t = good.clone();
    t[16..18].copy_from_slice(&200u16.to_be_bytes());
    out.push((t, true));
    // IHL below 5 words.
    let mut t = good.clone();
    t[14] = 0x44;
    out.push((t, true));
    // TCP data offset beyond the segment.
    let mut t = good.clone();
    t[34 + 12] = 0xf0;
    out.push((t, true));
    // Bad IPv4 header checksum.
    let mut t = good.clone();
    t[24] ^= 0xff;
    out.push((t, false));
    // Bad TCP checksum.
    let mut t = good.clone();
    t[34 + 16] ^= 0xff;
    out.push((t, false));
    // Ethernet header only, IPv4 EtherType (padded with zeros to 60: version 0).
    let mut t = good[..14].to_vec();
    t.resize(60, 0);
    out.push((t, true));
    for (f, _) in &mut out {
        if f.len() < 60 {
            f.resize(60, 0);
        }
    }
    out
}

#[test]
fn malformed_frames_are_dropped_counted_and_leak_nothing() {
    let ((ma, mut da, pool_a), (mb, mut db, pool_b)) = (open(1), open(2));
    let (mac_a, mac_b) = (da.mac(), db.mac());
    let stats: SmolStats;
    {
        let mut p = pair(&ma, &mut da, &mb, &mut db);
        let bad = bad_frames(mac_a, mac_b);
        let rounds = 50;
        for _ in 0..rounds {
            for (f, _) in &bad {
                assert!(matches!(ma.receive(f), RxOutcome::Delivered { .. }));
            }
            p.step();
        }
        let s = p.pa.stats();
        let malformed = bad.iter().filter(|(_, m)| *m).count() as u64 * rounds;
        let bad_sum = bad.iter().filter(|(_, m)| !*m).count() as u64 * rounds;
        assert_eq!(
            (s.rx_malformed, s.rx_bad_checksum),
            (malformed, bad_sum),
            "{s:?}"
        );
        assert_eq!(s.rx_frames, 0, "a bad frame reached smoltcp: {s:?}");
        // The stack still works afterwards.
        tcp_transfer(&mut p, 100_000);
        stats = p.pa.stats();
    }
    assert!(stats.rx_frames > 0);
    drop((da, db));
    assert_pools_full(&[&pool_a, &pool_b]);
}

/// smoltcp on two software virtio-net devices (`pollnic_model::virtio`)
/// wired back to back: with `VIRTIO_NET_F_CSUM` smoltcp sums the IPv4
/// header itself and leaves TCP and UDP to the device (through the
/// `virtio_net_hdr`, virtio 1.2 §5.1.6.2), and ping and UDP echo still
/// work; every UDP datagram on the wire carries a checksum the model
/// computed (never 0), and the receiving side, with `rx_checksum` and
/// `VIRTIO_NET_F_GUEST_CSUM`, takes the device's DATA_VALID.
#[test]
fn ping_and_udp_echo_over_virtio_with_l4_checksum_offload() {
    use pollnic_model::virtio::{SoftVirtioNet, VirtioModelConfig, VirtioRx};
    use smoltcp::phy::Checksum;
    let vmodel = |last: u8| {
        SoftVirtioNet::new(VirtioModelConfig {
            mac: [0x52, 0x54, 0x00, 0x12, 0x34, last],
            ..Default::default()
        })
    };
    let vcfg = DeviceConfig::default()
        .with_rx_ring_size(128)
        .with_tx_ring_size(128)
        .with_mempool_size(1024)
        .with_rx_checksum(true)
        .with_link_timeout(Duration::from_secs(2));
    let (ma, mb) = (vmodel(1), vmodel(2));
    let mut da = ma.open(&vcfg).expect("bring-up on the virtio model");
    let mut db = mb.open(&vcfg).expect("bring-up on the virtio model");
    let (mac_a, mac_b) = (da.mac(), db.mac());
    let (pool_a, pool_b) = (da.mempool().clone(), db.mempool().clone());
    let mut udp_on_wire = 0;
    {
        let mut pa = QueueDevice::new(&mut da, 0);
        let mut pb = QueueDevice::new(&mut db, 0);
        assert!(pa.checksum_offload());
        let c = pa.capabilities().checksum;
        assert!(matches!(c.ipv4, Checksum::Tx), "smoltcp sums IPv4 itself");
        assert!(matches!(c.tcp, Checksum::None) && matches!(c.udp, Checksum::None));
        let mut ia = iface(&mut pa, mac_a, IP_A);
        let mut ib = iface(&mut pb, mac_b, IP_B);
        let (mut sa, mut sb) = (SocketSet::new(vec![]), SocketSet::new(vec![]));
        let echo = sa.add(udp::Socket::new(
            udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 64], vec![0; 65536]),
            udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 64], vec![0; 65536]),
        ));
        sa.get_mut::<udp::Socket>(echo).bind(7).unwrap();
        let client = sb.add(udp::Socket::new(
            udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 64], vec![0; 65536]),
            udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 64], vec![0; 65536]),
        ));
        sb.get_mut::<udp::Socket>(client).bind(4000).unwrap();
        let ping = sb.add(icmp::Socket::new(
            icmp::PacketBuffer::new(vec![icmp::PacketMetadata::EMPTY; 8], vec![0; 4096]),
            icmp::PacketBuffer::new(vec![icmp::PacketMetadata::EMPTY; 8], vec![0; 4096]),
        ));
        sb.get_mut::<icmp::Socket>(ping)
            .bind(icmp::Endpoint::Ident(0x22))
            .unwrap();
        let mut now = Instant::ZERO;
        let mut step = |pa: &mut QueueDevice<'_>,
                        pb: &mut QueueDevice<'_>,
                        ia: &mut Interface,
                        ib: &mut Interface,
                        sa: &mut SocketSet<'static>,
                        sb: &mut SocketSet<'static>| {
            now += smoltcp::time::Duration::from_millis(1);
            pa.poll(ia, sa, now);
            pb.poll(ib, sb, now);
            for (from, to) in [(&ma, &mb), (&mb, &ma)] {
                for f in from.take_tx_frames() {
                    if f.len() >= 42 && f[12..14] == [0x08, 0x00] && f[23] == 17 {
                        // UDP over IPv4: the device's checksum verifies.
                        let l4 = &f[34..];
                        let mut s: u64 = f[26..34]
                            .chunks(2)
                            .chain(l4.chunks(2))
                            .map(|c| (c[0] as u64) << 8 | *c.get(1).unwrap_or(&0) as u64)
                            .sum::<u64>()
                            + 17
                            + l4.len() as u64;
                        while s > 0xffff {
                            s = (s & 0xffff) + (s >> 16);
                        }
                        assert_eq!(s, 0xffff, "UDP checksum on the wire");
                        assert_ne!(l4[6..8], [0, 0], "a UDP checksum was computed");
                        udp_on_wire += 1;
                    }
                    assert!(matches!(to.receive(&f), VirtioRx::Delivered { .. }));
                }
            }
        };
        let mut replies = 0;
        for seq in 0..10u16 {
            let data = [seq as u8; 56];
            let req = Icmpv4Repr::EchoRequest {
                ident: 0x22,
                seq_no: seq,
                data: &data,
            };
            let caps = pb.capabilities();
            let buf = sb
                .get_mut::<icmp::Socket>(ping)
                .send(req.buffer_len(), IP_A)
                .unwrap();
            req.emit(&mut Icmpv4Packet::new_unchecked(buf), &caps.checksum);
            for _ in 0..50 {
                step(&mut pa, &mut pb, &mut ia, &mut ib, &mut sa, &mut sb);
                if let Ok((bytes, _)) = sb.get_mut::<icmp::Socket>(ping).recv() {
                    let r = Icmpv4Packet::new_checked(bytes).unwrap();
                    assert_eq!(r.echo_seq_no(), seq);
                    replies += 1;
                    break;
                }
            }
        }
        assert_eq!(replies, 10);
        let to = IpEndpoint::new(IP_A, 7);
        let (mut sent, mut got) = (0u32, 0u32);
        let mut buf = [0u8; 2048];
        for _ in 0..20_000 {
            if sent < 200 && sent - got < 32 {
                let len = 1 + (sent as usize * 37) % 1400;
                let d: Vec<u8> = (0..len).map(|i| (i as u32 ^ sent) as u8).collect();
                sb.get_mut::<udp::Socket>(client)
                    .send_slice(&d, to)
                    .unwrap();
                sent += 1;
            }
            step(&mut pa, &mut pb, &mut ia, &mut ib, &mut sa, &mut sb);
            let s = sa.get_mut::<udp::Socket>(echo);
            while let Ok((n, meta)) = s.recv_slice(&mut buf) {
                s.send_slice(&buf[..n], meta.endpoint).unwrap();
            }
            let c = sb.get_mut::<udp::Socket>(client);
            while let Ok((n, _)) = c.recv_slice(&mut buf) {
                let len = 1 + (got as usize * 37) % 1400;
                assert_eq!(n, len, "datagram {got}");
                got += 1;
            }
            if got == 200 {
                break;
            }
        }
        assert_eq!(got, 200);
        for s in [pa.stats(), pb.stats()] {
            assert_eq!(s.rx_malformed + s.rx_bad_checksum + s.tx_nobuf, 0, "{s:?}");
        }
        let ta = pa.queue().tx_stats();
        assert_eq!(ta.tx_offload_errors, 0);
    }
    assert!(udp_on_wire >= 400, "{udp_on_wire} UDP frames seen");
    drop((da, db));
    assert_pools_full(&[&pool_a, &pool_b]);
    assert!(ma.violations().is_empty(), "{:#?}", ma.violations());
    assert!(mb.violations().is_empty(), "{:#?}", mb.violations());
}
