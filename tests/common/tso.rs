//! TCP segmentation checks shared by the igb and virtio-net tests: the
//! frame an application hands pollnic for TSO, and the checks of the
//! segments that arrive (lengths, checksums, sequence numbers, IPv4 IDs,
//! PSH and FIN, the payload put back together).

use pollnic::Device;
use std::time::{Duration, Instant};

/// The sender's and the receiver's IPv4 addresses in [`tso_frame`].
pub const P_IP: [u8; 4] = [10, 0, 0, 2];
/// The receiver's.
pub const K_IP: [u8; 4] = [10, 0, 0, 1];

use etherparse::{EtherType, Ethernet2Header, IpNumber, Ipv4Header, Ipv6Header, TcpHeader};

/// A TCP frame for TSO from `src` to `dst`: IPv4 with ID `id` and DF (its
/// total length and checksum junk: TSO ignores them) or IPv6, then TCP
/// (seq `seq`, ACK and PSH, checksum junk) and `payload`.
pub fn tso_frame(
    src: [u8; 6],
    dst: [u8; 6],
    v6: bool,
    id: u16,
    seq: u32,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = Vec::new();
    let ether_type = if v6 { EtherType::IPV6 } else { EtherType::IPV4 };
    Ethernet2Header {
        source: src,
        destination: dst,
        ether_type,
    }
    .write(&mut f)
    .unwrap();
    if v6 {
        Ipv6Header {
            payload_length: 0xbeef,
            next_header: IpNumber::TCP,
            hop_limit: 64,
            source: [0xfd; 16],
            destination: [0xfe; 16],
            ..Default::default()
        }
        .write(&mut f)
        .unwrap();
    } else {
        let mut ip = Ipv4Header::new(0, 64, IpNumber::TCP, P_IP, K_IP).unwrap();
        ip.identification = id;
        ip.dont_fragment = true;
        ip.total_len = 0xbeef;
        ip.header_checksum = 0x1234;
        ip.write_raw(&mut f).unwrap();
    }
    let mut t = TcpHeader::new(40000, 5001, seq, 1024);
    t.ack = true;
    t.acknowledgment_number = 99;
    t.psh = true;
    t.checksum = 0x5555;
    t.write(&mut f).unwrap();
    f.extend_from_slice(payload);
    f
}

/// What one received segment says, checked on the way: its IP header
/// checksum (IPv4) and TCP checksum recomputed in software, its IP length
/// the bytes it carries.
pub struct Segment {
    pub id: Option<u16>,
    pub seq: u32,
    pub psh: bool,
    pub fin: bool,
    pub payload: Vec<u8>,
}

pub fn parse_segment(f: &[u8], what: &str) -> Segment {
    let h = etherparse::PacketHeaders::from_ethernet_slice(f)
        .unwrap_or_else(|e| panic!("{what}: not a TCP/IP frame: {e}"));
    let Some(etherparse::TransportHeader::Tcp(tcp)) = h.transport else {
        panic!("{what}: not TCP");
    };
    let payload = h.payload.slice().to_vec();
    let id = match h.net {
        Some(etherparse::NetHeaders::Ipv4(ip, _)) => {
            assert_eq!(
                ip.header_checksum,
                ip.calc_header_checksum(),
                "{what}: IPv4 checksum"
            );
            assert_eq!(
                ip.total_len as usize,
                ip.header_len() + tcp.header_len() + payload.len(),
                "{what}: IPv4 total length"
            );
            assert!(ip.dont_fragment && !ip.more_fragments, "{what}: flags kept");
            assert_eq!(
                tcp.checksum,
                tcp.calc_checksum_ipv4(&ip, &payload).unwrap(),
                "{what}: TCP checksum"
            );
            Some(ip.identification)
        }
        Some(etherparse::NetHeaders::Ipv6(ip, _)) => {
            assert_eq!(
                ip.payload_length as usize,
                tcp.header_len() + payload.len(),
                "{what}: IPv6 payload length"
            );
            assert_eq!(
                tcp.checksum,
                tcp.calc_checksum_ipv6(&ip, &payload).unwrap(),
                "{what}: TCP checksum"
            );
            None
        }
        _ => panic!("{what}: not IP"),
    };
    assert!(
        tcp.ack && tcp.acknowledgment_number == 99 && tcp.destination_port == 5001,
        "{what}: header copied"
    );
    Segment {
        id,
        seq: tcp.sequence_number,
        psh: tcp.psh,
        fin: tcp.fin,
        payload,
    }
}

/// Receive on `rx` until `n` TCP frames to port 5001 arrived or `wait`
/// passed; returns them (other frames are dropped).
pub fn receive_tcp(rx: &mut Device, n: usize, wait: Duration) -> Vec<Vec<u8>> {
    let t0 = Instant::now();
    let mut out = Vec::new();
    let mut burst = Vec::with_capacity(64);
    while out.len() < n && t0.elapsed() < wait {
        rx.queue(0).rx_burst(&mut burst, 64);
        for p in burst.drain(..) {
            let d = p.data();
            let tcp_at = match u16::from_be_bytes([d[12], d[13]]) {
                0x0800 => 14 + 20,
                0x86dd => 14 + 40,
                _ => continue,
            };
            if d.len() >= tcp_at + 4 && d[tcp_at + 2..tcp_at + 4] == 5001u16.to_be_bytes() {
                assert!(
                    p.rx_checksum().none_bad(),
                    "QEMU found a segment's checksum bad"
                );
                out.push(d.to_vec());
            }
        }
        if out.len() < n {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    out
}

/// Check the segments of one TSO frame of `payload` at `mss`: their count,
/// sizes, consecutive sequence numbers from `seq`, IPv4 IDs from `id`,
/// no PSH or FIN before the last, and the payload put back together.
pub fn check_segments(
    frames: &[Vec<u8>],
    payload: &[u8],
    mss: usize,
    seq: u32,
    id: u16,
    what: &str,
) -> Vec<Segment> {
    let n = payload.len().div_ceil(mss);
    assert_eq!(
        frames.len(),
        n,
        "{what}: ceil({} / {mss}) segments",
        payload.len()
    );
    let segs: Vec<Segment> = frames
        .iter()
        .enumerate()
        .map(|(k, f)| parse_segment(f, &format!("{what} segment {k}")))
        .collect();
    let mut joined = Vec::with_capacity(payload.len());
    for (k, s) in segs.iter().enumerate() {
        let w = format!("{what} segment {k}");
        let want_len = if k + 1 < n {
            mss
        } else {
            payload.len() - mss * (n - 1)
        };
        assert_eq!(s.payload.len(), want_len, "{w}: payload at most the MSS");
        assert_eq!(
            s.seq,
            seq.wrapping_add((k * mss) as u32),
            "{w}: sequence number"
        );
        if let Some(got) = s.id {
            assert_eq!(
                got,
                id.wrapping_add(k as u16),
                "{w}: IPv4 ID, the frame's plus one per segment"
            );
        }
        if k + 1 < n {
            assert!(!s.psh && !s.fin, "{w}: PSH/FIN before the last segment");
        }
        joined.extend_from_slice(&s.payload);
    }
    assert!(
        joined == payload,
        "{what}: the payload put back together differs"
    );
    segs
}
