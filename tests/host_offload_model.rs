//! Checksum and VLAN offloads on both software NICs (82576 and 82599): RX
//! checksum status and VLAN strip read into each `Packet`, TX checksum
//! insertion and VLAN insert through context descriptors (checked
//! strictly by the models), and every refusal counted with no buffer lost.
//! Reference frames are built by etherparse, which computes every checksum
//! itself: a frame sent with its checksums zeroed and offloaded must reach
//! the wire equal to etherparse's.

use etherparse::PacketBuilder;
use pollnic::offload::{ChecksumStatus, TxOffload, TxRefusal};
use pollnic::{Device, DeviceConfig, Packet};
use pollnic_model::igb::Soft82576;
use pollnic_model::ixgbe::Soft82599;
use std::time::Duration;

/// The two models behind one face.
trait Nic {
    fn open_dev(&self, cfg: &DeviceConfig) -> Device;
    /// Deliver a frame from the wire; whether it reached a ring.
    fn rx(&self, f: &[u8]) -> bool;
    fn wire(&self) -> Vec<Vec<u8>>;
    fn violations(&self) -> Vec<String>;
}

impl Nic for Soft82576 {
    fn open_dev(&self, cfg: &DeviceConfig) -> Device {
        self.open(cfg).expect("open on the software 82576")
    }
    fn rx(&self, f: &[u8]) -> bool {
        matches!(
            self.receive(f),
            pollnic_model::igb::RxOutcome::Delivered { .. }
        )
    }
    fn wire(&self) -> Vec<Vec<u8>> {
        self.take_tx_frames()
    }
    fn violations(&self) -> Vec<String> {
        Soft82576::violations(self)
    }
}

impl Nic for Soft82599 {
    fn open_dev(&self, cfg: &DeviceConfig) -> Device {
        self.open(cfg).expect("open on the software 82599")
    }
    fn rx(&self, f: &[u8]) -> bool {
        matches!(
            self.receive(f),
            pollnic_model::ixgbe::RxOutcome::Delivered { .. }
        )
    }
    fn wire(&self) -> Vec<Vec<u8>> {
        self.take_tx_frames()
    }
    fn violations(&self) -> Vec<String> {
        Soft82599::violations(self)
    }
}

fn models() -> Vec<(&'static str, Box<dyn Nic>)> {
    vec![
        ("82576", Box::new(Soft82576::new(Default::default()))),
        ("82599", Box::new(Soft82599::new(Default::default()))),
    ]
}

fn cfg() -> DeviceConfig {
    DeviceConfig::default()
        .with_rx_ring_size(64)
        .with_tx_ring_size(64)
        .with_mempool_size(512)
        .with_link_timeout(Duration::from_secs(2))
}

const SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];

fn udp4(dst: [u8; 6], vlan: Option<u16>, payload: &[u8]) -> Vec<u8> {
    let b = PacketBuilder::ethernet2(SRC, dst);
    let mut out = Vec::new();
    match vlan {
        Some(v) => b
            .single_vlan(etherparse::VlanId::try_new(v & 0xfff).unwrap())
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .udp(4000, 5000)
            .write(&mut out, payload)
            .unwrap(),
        None => b
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .udp(4000, 5000)
            .write(&mut out, payload)
            .unwrap(),
    }
    out
}

fn tcp4(dst: [u8; 6], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    PacketBuilder::ethernet2(SRC, dst)
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .tcp(40000, 80, 12345, 65535)
        .write(&mut out, payload)
        .unwrap();
    out
}

fn udp6(dst: [u8; 6], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let (a, b) = ([0xfdu8; 16], [0xfeu8; 16]);
    PacketBuilder::ethernet2(SRC, dst)
        .ipv6(a, b, 64)
        .udp(4000, 5000)
        .write(&mut out, payload)
        .unwrap();
    out
}

/// Byte offsets in an untagged IPv4 frame: IP checksum, UDP and TCP checksums.
const IP_CSUM: usize = 14 + 10;
const UDP4_CSUM: usize = 14 + 20 + 6;
const TCP4_CSUM: usize = 14 + 20 + 16;
const UDP6_CSUM: usize = 14 + 40 + 6;

fn flip(mut f: Vec<u8>, at: usize) -> Vec<u8> {
    f[at] ^= 0x5a;
    f
}

fn receive_one(dev: &mut Device, m: &dyn Nic, f: &[u8]) -> Packet {
    assert!(m.rx(f));
    let mut got = Vec::new();
    assert_eq!(dev.queue(0).rx_burst(&mut got, 8), 1);
    got.pop().unwrap()
}

#[test]
fn rx_checksum_status_and_vlan_strip_are_read_into_each_packet_on_both_models() {
    use ChecksumStatus::*;
    for (name, m) in models() {
        let mut dev = m.open_dev(&cfg().with_rx_checksum(true).with_vlan_strip(true));
        let mac = dev.mac();
        let pl = [7u8; 40];
        let cases: Vec<(&str, Vec<u8>, ChecksumStatus, ChecksumStatus)> = vec![
            ("udp4 good", udp4(mac, None, &pl), Good, Good),
            ("tcp4 good", tcp4(mac, &pl), Good, Good),
            ("udp6 good", udp6(mac, &pl), NotChecked, Good),
            (
                "udp4 bad ip",
                flip(udp4(mac, None, &pl), IP_CSUM),
                Bad,
                Good,
            ),
            (
                "udp4 bad l4",
                flip(udp4(mac, None, &pl), UDP4_CSUM),
                Good,
                Bad,
            ),
            ("tcp4 bad l4", flip(tcp4(mac, &pl), TCP4_CSUM), Good, Bad),
            (
                "udp6 bad l4",
                flip(udp6(mac, &pl), UDP6_CSUM),
                NotChecked,
                Bad,
            ),
        ];
        for (what, f, ip, l4) in &cases {
            let p = receive_one(&mut dev, &*m, f);
            let c = p.rx_checksum();
            assert_eq!((c.ip, c.l4), (*ip, *l4), "{name} {what}");
            assert_eq!(p.vlan(), None, "{name} {what}");
            assert_eq!(p.data(), &f[..], "{name} {what}: delivered whole");
        }
        // A tagged frame: the tag goes into the write-back, out of the bytes.
        let tagged = udp4(mac, Some(0x064), &pl);
        let p = receive_one(&mut dev, &*m, &tagged);
        assert_eq!(p.vlan(), Some(0x064), "{name}");
        assert_eq!(p.data(), &udp4(mac, None, &pl)[..], "{name}: tag stripped");
        assert_eq!(p.rx_checksum().l4, Good, "{name}: checked past the tag");
        assert!(m.violations().is_empty(), "{name}: {:?}", m.violations());
    }
}

#[test]
fn with_the_offloads_off_nothing_is_reported_and_the_tag_stays() {
    for (name, m) in models() {
        let mut dev = m.open_dev(&cfg());
        let mac = dev.mac();
        let bad = flip(udp4(mac, None, &[1; 30]), UDP4_CSUM);
        let p = receive_one(&mut dev, &*m, &bad);
        let c = p.rx_checksum();
        assert_eq!(
            (c.ip, c.l4),
            (ChecksumStatus::NotChecked, ChecksumStatus::NotChecked),
            "{name}"
        );
        let tagged = udp4(mac, Some(5), &[1; 30]);
        let p = receive_one(&mut dev, &*m, &tagged);
        assert_eq!((p.vlan(), p.data()), (None, &tagged[..]), "{name}");
    }
}

/// `f` with its IPv4 header checksum and L4 checksum zeroed.
fn zeroed(mut f: Vec<u8>, l4_csum: usize, ip: bool) -> Vec<u8> {
    if ip {
        f[IP_CSUM..IP_CSUM + 2].fill(0);
    }
    f[l4_csum..l4_csum + 2].fill(0);
    f
}

fn packet(dev: &mut Device, bytes: &[u8]) -> Packet {
    let mut p = dev.mempool().alloc().unwrap();
    p.set_len(bytes.len()).unwrap();
    p.data_mut().copy_from_slice(bytes);
    p
}

#[test]
fn tx_checksums_and_vlan_are_inserted_by_the_nic_and_contexts_are_reused() {
    let dst = [0x02, 0, 0, 0, 0, 9];
    for (name, m) in models() {
        let mut dev = m.open_dev(&cfg());
        let full = TxOffload::NONE.with_ipv4_checksum().with_l4_checksum();
        // Three like UDP frames (one context), then TCP (another), then
        // UDP/IPv6 with the L4 checksum only (another).
        let good: Vec<(Vec<u8>, Vec<u8>, TxOffload)> = vec![
            (
                udp4(dst, None, &[1; 20]),
                zeroed(udp4(dst, None, &[1; 20]), UDP4_CSUM, true),
                full,
            ),
            (
                udp4(dst, None, &[2; 21]),
                zeroed(udp4(dst, None, &[2; 21]), UDP4_CSUM, true),
                full,
            ),
            (
                udp4(dst, None, &[3; 900]),
                zeroed(udp4(dst, None, &[3; 900]), UDP4_CSUM, true),
                full,
            ),
            (
                tcp4(dst, &[4; 33]),
                zeroed(tcp4(dst, &[4; 33]), TCP4_CSUM, true),
                full,
            ),
            (
                udp6(dst, &[5; 50]),
                zeroed(udp6(dst, &[5; 50]), UDP6_CSUM, false),
                TxOffload::NONE.with_l4_checksum(),
            ),
        ];
        let mut want = Vec::new();
        for (right, sent, ol) in &good {
            let mut burst = vec![packet(&mut dev, sent)];
            assert_eq!(dev.queue(0).tx_burst_offload(&mut burst, ol), 1, "{name}");
            want.push(right.clone());
        }
        // VLAN insert with the checksums, in one burst of two.
        let v = TxOffload::NONE
            .with_ipv4_checksum()
            .with_l4_checksum()
            .with_vlan(0x2064);
        let sent = zeroed(udp4(dst, None, &[6; 64]), UDP4_CSUM, true);
        let mut burst = vec![packet(&mut dev, &sent), packet(&mut dev, &sent)];
        assert_eq!(dev.queue(0).tx_burst_offload(&mut burst, &v), 2, "{name}");
        let mut tagged = udp4(dst, Some(0x064), &[6; 64]);
        tagged[14] = 0x20; // priority 1: TCI 0x2064
        want.push(tagged.clone());
        want.push(tagged);
        assert_eq!(m.wire(), want, "{name}: the wire holds etherparse's frames");
        let s = dev.queue(0).tx_stats();
        assert_eq!(s.tx_contexts, 4, "{name}: one per change of headers");
        assert_eq!((s.tx_errors, s.tx_offload_errors), (0, 0), "{name}");
        assert!(dev.queue(0).flush_tx(Duration::from_secs(1)), "{name}");
        assert!(m.violations().is_empty(), "{name}: {:?}", m.violations());
    }
}

#[test]
fn requests_the_nic_cannot_do_are_refused_counted_and_lose_no_buffer() {
    let dst = [0x02, 0, 0, 0, 0, 9];
    for (name, m) in models() {
        let mut dev = m.open_dev(&cfg());
        let pool = dev.mempool().clone();
        let full = TxOffload::NONE.with_ipv4_checksum().with_l4_checksum();
        let short = udp4(dst, None, &[0; 30])[..14 + 20 + 4].to_vec();
        let mut icmp = udp4(dst, None, &[0; 30]);
        icmp[14 + 9] = 1;
        let cases: Vec<(Vec<u8>, TxOffload, TxRefusal)> = vec![
            (
                short,
                full,
                TxRefusal::TooShort {
                    len: 38,
                    needed: 72,
                },
            ),
            (icmp, full, TxRefusal::UnsupportedL4 { protocol: 1 }),
            (udp6(dst, &[0; 8]), full, TxRefusal::NotIpv4),
        ];
        for (k, (f, ol, why)) in cases.iter().enumerate() {
            assert_eq!(ol.check(f), Err(*why), "{name}");
            // A good frame behind it must still go.
            let ok = zeroed(udp4(dst, None, &[9; 10]), UDP4_CSUM, true);
            let mut burst = vec![packet(&mut dev, f), packet(&mut dev, &ok)];
            assert_eq!(dev.queue(0).tx_burst_offload(&mut burst, ol), 2, "{name}");
            assert!(burst.is_empty());
            assert_eq!(dev.queue(0).last_tx_refusal(), Some(*why), "{name}");
            let s = dev.queue(0).tx_stats();
            assert_eq!(
                (s.tx_offload_errors, s.tx_errors),
                (k as u64 + 1, k as u64 + 1),
                "{name}"
            );
        }
        // The refused frames never reached the wire; the good one behind
        // each did.
        assert_eq!(m.wire().len(), 3, "{name}");
        assert!(dev.queue(0).flush_tx(Duration::from_secs(1)));
        assert!(m.violations().is_empty(), "{name}: {:?}", m.violations());
        drop(dev);
        assert_eq!(
            pool.free_count(),
            pool.capacity() as usize,
            "{name}: every buffer back"
        );
    }
}

#[test]
fn the_models_refuse_a_context_that_does_not_describe_its_frame() {
    use pollnic_hw::offload::{tx_plan, TxContext, TXD_OLINFO_CC};
    use pollnic_model::offload::{tx, Part};
    let f = zeroed(udp4([2; 6], None, &[1; 20]), UDP4_CSUM, true);
    let plan = tx_plan(&f, &TxOffload::NONE.with_ipv4_checksum().with_l4_checksum()).unwrap();
    let olinfo = (f.len() as u32) << 14 | plan.popts;
    let mut ctxs = [None; 8];
    // No context at IDX 0.
    assert!(tx(f.clone(), 0, olinfo, &ctxs, Part::Igb).is_err());
    // MACLEN 18 on an untagged frame.
    ctxs[0] = Some(TxContext::new(0, 18, 20, true, false, 8).unwrap());
    let e = tx(f.clone(), 0, olinfo, &ctxs, Part::Igb).unwrap_err();
    assert!(e.contains("MACLEN"), "{e}");
    // TCP L4T on a UDP frame.
    ctxs[0] = Some(TxContext::new(0, 14, 20, true, true, 8).unwrap());
    assert!(tx(f.clone(), 0, olinfo, &ctxs, Part::Igb)
        .unwrap_err()
        .contains("L4T"));
    // The right context: fine on igb; the 82599 also wants CC.
    ctxs[0] = plan.ctx;
    assert!(tx(f.clone(), 0, olinfo, &ctxs, Part::Igb).is_ok());
    assert!(tx(f.clone(), 0, olinfo, &ctxs, Part::Ixgbe)
        .unwrap_err()
        .contains("CC"));
    assert!(tx(f.clone(), 0, olinfo | TXD_OLINFO_CC, &ctxs, Part::Ixgbe).is_ok());
    // PAYLEN must be the frame's length.
    assert!(tx(f, 0, olinfo + (1 << 14), &ctxs, Part::Igb)
        .unwrap_err()
        .contains("PAYLEN"));
}

// ---- TCP segmentation (TSO) ----

use etherparse::{EtherType, Ethernet2Header, IpNumber, Ipv4Header, Ipv6Header, TcpHeader};

const V6_SRC: [u8; 16] = [0xfd; 16];
const V6_DST: [u8; 16] = [0xfe; 16];

/// The TCP header of segment `k` of `n` (or of the whole frame with
/// `k = 0, n = 1`): ACK, and PSH and FIN on the last only.
fn tso_tcp(seq: u32, last: bool) -> TcpHeader {
    let mut t = TcpHeader::new(40000, 80, seq, 512);
    t.ack = true;
    t.acknowledgment_number = 7;
    t.psh = last;
    t.fin = last;
    t
}

/// What an application hands pollnic for TSO: Ethernet, IPv4 (ID `id`,
/// DF; its total length and checksum left as junk, which TSO ignores) or
/// IPv6 (payload length junk), TCP with ACK, PSH and FIN (checksum junk),
/// then `payload`.
fn tso_frame(dst: [u8; 6], v6: bool, id: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    let et = if v6 { EtherType::IPV6 } else { EtherType::IPV4 };
    Ethernet2Header {
        source: SRC,
        destination: dst,
        ether_type: et,
    }
    .write(&mut f)
    .unwrap();
    if v6 {
        let mut ip = Ipv6Header {
            next_header: IpNumber::TCP,
            hop_limit: 64,
            source: V6_SRC,
            destination: V6_DST,
            ..Default::default()
        };
        ip.payload_length = 0xbeef;
        ip.write(&mut f).unwrap();
    } else {
        let mut ip = Ipv4Header::new(0, 64, IpNumber::TCP, [10, 0, 0, 1], [10, 0, 0, 2]).unwrap();
        ip.identification = id;
        ip.dont_fragment = true;
        ip.total_len = 0xbeef;
        ip.header_checksum = 0x1234;
        ip.write_raw(&mut f).unwrap();
    }
    let mut t = tso_tcp(seq, true);
    t.checksum = 0x5555;
    t.write(&mut f).unwrap();
    f.extend_from_slice(payload);
    f
}

/// The segments silicon sends for [`tso_frame`] at `mss`, built and
/// checksummed by etherparse: IPv4 IDs `id`, `id + 1`, ...; sequence
/// numbers advanced by the payload before; PSH and FIN on the last only;
/// every length and checksum the segment's own; `vlan` inserted.
fn tso_reference(
    dst: [u8; 6],
    v6: bool,
    id: u16,
    seq: u32,
    payload: &[u8],
    mss: usize,
    vlan: Option<u16>,
) -> Vec<Vec<u8>> {
    let n = payload.len().div_ceil(mss);
    payload
        .chunks(mss)
        .enumerate()
        .map(|(k, chunk)| {
            let mut t = tso_tcp(seq.wrapping_add((k * mss) as u32), k + 1 == n);
            let mut f = Vec::new();
            let et = if v6 { EtherType::IPV6 } else { EtherType::IPV4 };
            Ethernet2Header {
                source: SRC,
                destination: dst,
                ether_type: et,
            }
            .write(&mut f)
            .unwrap();
            let l4 = (t.header_len() + chunk.len()) as u16;
            if v6 {
                let ip = Ipv6Header {
                    payload_length: l4,
                    next_header: IpNumber::TCP,
                    hop_limit: 64,
                    source: V6_SRC,
                    destination: V6_DST,
                    ..Default::default()
                };
                t.checksum = t.calc_checksum_ipv6(&ip, chunk).unwrap();
                ip.write(&mut f).unwrap();
            } else {
                let mut ip =
                    Ipv4Header::new(l4, 64, IpNumber::TCP, [10, 0, 0, 1], [10, 0, 0, 2]).unwrap();
                ip.identification = id.wrapping_add(k as u16);
                ip.dont_fragment = true;
                ip.header_checksum = ip.calc_header_checksum();
                t.checksum = t.calc_checksum_ipv4(&ip, chunk).unwrap();
                ip.write(&mut f).unwrap();
            }
            t.write(&mut f).unwrap();
            f.extend_from_slice(chunk);
            if let Some(tci) = vlan {
                let tag = tci.to_be_bytes();
                f.splice(12..12, [0x81, 0x00, tag[0], tag[1]]);
            }
            f
        })
        .collect()
}

fn big_packet(pool: &pollnic::Mempool, bytes: &[u8]) -> Packet {
    let mut p = pool.alloc().expect("a free big buffer");
    p.set_len(bytes.len()).unwrap();
    p.data_mut().copy_from_slice(bytes);
    p
}

/// A payload whose bytes say where they are (a misplaced cut shows).
fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

#[test]
fn tso_cuts_a_64k_payload_into_mss_segments_as_silicon_does_on_both_models() {
    let dst = [0x02, 0, 0, 0, 0, 9];
    for (name, m) in models() {
        let mut dev = m.open_dev(&cfg());
        let big = dev
            .create_mempool(8, 72 * 1024)
            .expect("a pool of 72 KiB buffers");
        let pl = payload(65536);
        for (v6, vlan) in [(false, None), (true, None), (false, Some(0x2064))] {
            let what = format!("{name} IPv{} vlan {vlan:?}", if v6 { 6 } else { 4 });
            let f = tso_frame(dst, v6, 0xfffe, 0xffff_f000, &pl);
            let mut ol = TxOffload::NONE.with_tso(1448);
            if let Some(tci) = vlan {
                ol = ol.with_vlan(tci);
            }
            assert_eq!(ol.check(&f), Ok(()), "{what}");
            // Two like frames in one burst: one context for both.
            let before = dev.queue(0).tx_stats();
            let mut burst = vec![big_packet(&big, &f), big_packet(&big, &f)];
            assert_eq!(dev.queue(0).tx_burst_offload(&mut burst, &ol), 2, "{what}");
            let s = dev.queue(0).tx_stats();
            assert_eq!(s.tx_contexts - before.tx_contexts, 1, "{what}");
            assert_eq!(s.packets - before.packets, 2, "{what}: two frames");
            let wire = m.wire();
            // 65,536 / 1,448: 45 full segments and one of 376 bytes; the
            // IPv4 ID wraps from 0xffff to 0 and the sequence number
            // through 2^32.
            assert_eq!(wire.len(), 92, "{what}");
            let want = tso_reference(dst, v6, 0xfffe, 0xffff_f000, &pl, 1448, vlan);
            assert_eq!(want.len(), 46);
            for (k, seg) in wire.iter().enumerate() {
                assert!(
                    seg == &want[k % 46],
                    "{what}: segment {} of frame {} differs",
                    k % 46,
                    k / 46
                );
            }
            assert!(m.violations().is_empty(), "{what}: {:?}", m.violations());
        }
        assert!(dev.queue(0).flush_tx(Duration::from_secs(1)), "{name}");
        assert_eq!(big.free_count(), 8, "{name}: every big buffer back");
        drop(dev);
    }
}

/// A pool from `Device::create_mempool` dropped before the device, once
/// its frames were sent and reclaimed: the device keeps its own handle
/// until it is reset, so nothing is unmapped while a descriptor of the
/// ring still names it (the models flag an unmap the device could still
/// read).
#[test]
fn a_created_pool_dropped_before_the_device_stays_mapped_until_the_reset() {
    let dst = [0x02, 0, 0, 0, 0, 9];
    for (name, m) in models() {
        let mut dev = m.open_dev(&cfg());
        let big = dev.create_mempool(4, 72 * 1024).unwrap();
        let f = tso_frame(dst, false, 1, 1, &payload(20_000));
        let mut burst = vec![big_packet(&big, &f), big_packet(&big, &f)];
        let ol = TxOffload::NONE.with_tso(1448);
        assert_eq!(dev.queue(0).tx_burst_offload(&mut burst, &ol), 2, "{name}");
        // Sent and reclaimed: every buffer is back in the pool, and the
        // user's handle is the last one outside the device.
        assert!(dev.queue(0).flush_tx(Duration::from_secs(1)), "{name}");
        drop(big);
        drop(dev);
        assert!(m.violations().is_empty(), "{name}: {:?}", m.violations());
    }
}

/// TSO frames of many sizes and MSS, with checksum-only frames between
/// them, through a 64-descriptor ring many times over: each reaches the
/// wire as its reference segments, and no buffer is lost.
#[test]
fn tso_frames_of_every_size_wrap_the_ring_and_lose_no_buffer() {
    let dst = [0x02, 0, 0, 0, 0, 9];
    for (name, m) in models() {
        let mut dev = m.open_dev(&cfg());
        let big = dev.create_mempool(64, 40 * 1024).unwrap();
        let pool = dev.mempool().clone();
        let mut seed = 0x9e37_79b9u64;
        for round in 0..60u32 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = 1 + (seed >> 33) as usize % 40_000;
            let mss = [536usize, 1448, 1460, 8960][round as usize % 4];
            let pl = payload(len);
            let f = tso_frame(dst, round % 3 == 2, round as u16, round * 1000, &pl);
            let ck = zeroed(udp4(dst, None, &[round as u8; 40]), UDP4_CSUM, true);
            let mut burst = vec![big_packet(&big, &f), big_packet(&big, &f)];
            let ol = TxOffload::NONE.with_tso(mss as u16);
            assert_eq!(
                dev.queue(0).tx_burst_offload(&mut burst, &ol),
                2,
                "{name} round {round}"
            );
            let mut one = vec![packet(&mut dev, &ck)];
            let full = TxOffload::NONE.with_ipv4_checksum().with_l4_checksum();
            assert_eq!(dev.queue(0).tx_burst_offload(&mut one, &full), 1);
            let mut want = tso_reference(
                dst,
                round % 3 == 2,
                round as u16,
                round * 1000,
                &pl,
                mss,
                None,
            );
            want.extend(want.clone());
            want.push(udp4(dst, None, &[round as u8; 40]));
            assert!(
                m.wire() == want,
                "{name} round {round}: {len} bytes at MSS {mss}"
            );
        }
        assert!(m.violations().is_empty(), "{name}: {:?}", m.violations());
        assert!(dev.queue(0).flush_tx(Duration::from_secs(1)), "{name}");
        assert_eq!(big.free_count(), 64, "{name}: every big buffer back");
        drop(dev);
        assert_eq!(pool.free_count(), pool.capacity() as usize, "{name}");
    }
}

#[test]
fn tso_requests_the_nic_cannot_do_are_refused_counted_and_lose_no_buffer() {
    use pollnic::offload::{TSO_MAX_MSS, TSO_MAX_PAYLEN};
    let dst = [0x02, 0, 0, 0, 0, 9];
    for (name, m) in models() {
        let mut dev = m.open_dev(&cfg());
        let big = dev.create_mempool(8, 260 * 1024).unwrap();
        let f = tso_frame(dst, false, 1, 1, &payload(3000));
        let mut udp = tso_frame(dst, false, 1, 1, &payload(3000));
        udp[14 + 9] = 17;
        let too_long = tso_frame(dst, false, 1, 1, &payload(TSO_MAX_PAYLEN + 1));
        let cases: Vec<(Vec<u8>, u16, TxRefusal)> = vec![
            (
                f.clone(),
                0,
                TxRefusal::MssOutOfRange {
                    mss: 0,
                    max: TSO_MAX_MSS,
                },
            ),
            (
                f.clone(),
                TSO_MAX_MSS + 1,
                TxRefusal::MssOutOfRange {
                    mss: TSO_MAX_MSS + 1,
                    max: TSO_MAX_MSS,
                },
            ),
            (
                f[..14 + 20 + 10].to_vec(),
                1448,
                TxRefusal::TooShort {
                    len: 44,
                    needed: 54,
                },
            ),
            (
                f[..54].to_vec(),
                1448,
                TxRefusal::TsoPayload {
                    len: 0,
                    max: TSO_MAX_PAYLEN,
                },
            ),
            (
                too_long,
                1448,
                TxRefusal::TsoPayload {
                    len: TSO_MAX_PAYLEN + 1,
                    max: TSO_MAX_PAYLEN,
                },
            ),
            (udp, 1448, TxRefusal::TsoNotTcp { protocol: 17 }),
        ];
        for (k, (bad, mss, why)) in cases.iter().enumerate() {
            let ol = TxOffload::NONE.with_tso(*mss);
            assert_eq!(ol.check(bad), Err(*why), "{name} case {k}");
            assert!(!why.to_string().is_empty());
            // A good TSO frame behind the refused one still goes.
            let good = TxOffload::NONE.with_tso(1448);
            let mut burst = vec![big_packet(&big, bad)];
            assert_eq!(
                dev.queue(0).tx_burst_offload(&mut burst, &ol),
                1,
                "{name} case {k}"
            );
            let mut burst = vec![big_packet(&big, &f)];
            assert_eq!(
                dev.queue(0).tx_burst_offload(&mut burst, &good),
                1,
                "{name} case {k}"
            );
            assert_eq!(
                dev.queue(0).last_tx_refusal(),
                Some(*why),
                "{name} case {k}"
            );
            let s = dev.queue(0).tx_stats();
            assert_eq!(
                (s.tx_offload_errors, s.tx_errors),
                (k as u64 + 1, k as u64 + 1),
                "{name}"
            );
            assert_eq!(
                m.wire().len(),
                3,
                "{name} case {k}: only the good frame's 3 segments"
            );
        }
        assert!(m.violations().is_empty(), "{name}: {:?}", m.violations());
        assert!(dev.queue(0).flush_tx(Duration::from_secs(1)));
        assert_eq!(big.free_count(), 8, "{name}: every big buffer back");
        // The device goes first: the model counts unmapping a region it
        // could still reach as a violation.
        drop(dev);
    }
}

#[test]
fn the_models_refuse_a_tso_context_that_does_not_describe_its_frame() {
    use pollnic_hw::offload::{tx_plan, tx_prepare, TxContext, TXD_OLINFO_CC};
    use pollnic_model::offload::{tx, Part};
    let mut f = tso_frame([2; 6], false, 1, 1, &payload(5000));
    let plan = tx_plan(&f, &TxOffload::NONE.with_tso(1000)).unwrap();
    tx_prepare(&mut f, &plan.prep);
    let paylen = plan.tso_paylen.unwrap();
    let olinfo = paylen << 14 | plan.popts;
    let mut ctxs = [plan.ctx; 8];
    assert_eq!(
        tx(f.clone(), plan.dcmd, olinfo, &ctxs, Part::Igb)
            .unwrap()
            .len(),
        5
    );
    assert!(tx(f.clone(), plan.dcmd, olinfo, &ctxs, Part::Ixgbe)
        .unwrap_err()
        .contains("CC"));
    assert_eq!(
        tx(
            f.clone(),
            plan.dcmd,
            olinfo | TXD_OLINFO_CC,
            &ctxs,
            Part::Ixgbe
        )
        .unwrap()
        .len(),
        5
    );
    // PAYLEN the whole frame (as without TSO) is wrong.
    let e = tx(
        f.clone(),
        plan.dcmd,
        (f.len() as u32) << 14 | plan.popts,
        &ctxs,
        Part::Igb,
    )
    .unwrap_err();
    assert!(e.contains("PAYLEN"), "{e}");
    // L4LEN 0, as a context written for a checksum of UDP would hold.
    let c = plan.ctx.unwrap();
    ctxs[0] = Some(
        TxContext::new(0, 14, 20, true, true, 0)
            .unwrap()
            .with_mss(1000)
            .unwrap(),
    );
    assert!(tx(f.clone(), plan.dcmd, olinfo, &ctxs, Part::Igb).is_err());
    // MSS 0 in the context.
    ctxs[0] = Some(TxContext::new(0, 14, 20, true, true, 20).unwrap());
    assert!(tx(f.clone(), plan.dcmd, olinfo, &ctxs, Part::Igb)
        .unwrap_err()
        .contains("MSS 0"));
    // No TXSM.
    ctxs[0] = Some(c);
    assert!(tx(f.clone(), plan.dcmd, paylen << 14, &ctxs, Part::Igb)
        .unwrap_err()
        .contains("TXSM"));
    // A header field wider than its context field cannot be asked for.
    assert!(matches!(
        TxContext::new(0, 14, 20, true, true, 256),
        Err(TxRefusal::HeaderTooLong {
            field: "L4LEN",
            len: 256,
            max: 255
        })
    ));
}
