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
