//! Test frames: Ethernet II + IPv4 + UDP, carrying a sequence number and a
//! send timestamp, padded with a pattern derived from the sequence number so
//! a receiver can check every byte. Headers are built and parsed with
//! `etherparse`; the UDP checksum is 0 ("none", allowed over IPv4, RFC 768).
//!
//! Payload layout (after the 42 header bytes), little endian:
//! `magic: u16 = 0x4e50`, `seq: u64`, `tx_ns: u64`, then byte `i` of the
//! rest is `seq as u8 + i as u8`.

use etherparse::{
    EtherType, Ethernet2Header, IpNumber, Ipv4Header, NetSlice, SlicedPacket, TransportSlice,
    UdpHeader,
};

/// Ethernet + IPv4 + UDP header bytes.
pub const HEADERS_LEN: usize = 14 + 20 + 8;
/// Smallest test frame in bytes, without FCS (64 on the wire).
pub const MIN_FRAME_LEN: usize = 60;
/// Largest standard frame in bytes, without FCS (1518 on the wire).
pub const MAX_FRAME_LEN: usize = 1514;
/// Largest test frame [`write`] makes, in bytes without FCS: the largest
/// untagged frame at MTU 9000 (9018 on the wire).
pub const MAX_JUMBO_FRAME_LEN: usize =
    pollnic_hw::mtu::max_frame(pollnic_hw::mtu::MAX_MTU) as usize - 4;
const MAGIC: u16 = 0x4e50;
const META_LEN: usize = 2 + 8 + 8;

/// Addresses and ports of one flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Flow {
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// Source IPv4 address.
    pub src_ip: [u8; 4],
    /// Destination IPv4 address.
    pub dst_ip: [u8; 4],
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
}

impl Flow {
    /// A flow between two MACs with documentation addresses (198.18.0.0/15,
    /// RFC 2544 benchmarking range) and ports 9000 → 9001.
    pub fn between(src_mac: [u8; 6], dst_mac: [u8; 6]) -> Flow {
        Flow {
            src_mac,
            dst_mac,
            src_ip: [198, 18, 0, 1],
            dst_ip: [198, 19, 0, 1],
            src_port: 9000,
            dst_port: 9001,
        }
    }
}

impl Flow {
    /// The fields RSS hashes for this flow (UDP over IPv4).
    pub fn rss_key(&self) -> pollnic_hw::rss::FlowKey {
        pollnic_hw::rss::FlowKey::V4 {
            src: self.src_ip.into(),
            dst: self.dst_ip.into(),
            sport: self.src_port,
            dport: self.dst_port,
            l4: pollnic_hw::rss::L4::Udp,
        }
    }

    /// The same flow in the other direction (addresses and ports swapped; MACs kept,
    /// so the frame still reaches the same receiving port).
    pub fn reversed(&self) -> Flow {
        Flow {
            src_ip: self.dst_ip,
            dst_ip: self.src_ip,
            src_port: self.dst_port,
            dst_port: self.src_port,
            ..*self
        }
    }

    /// Flow number `i` of a many-flow test: source address 198.18.x.y and
    /// source port 10000 + i vary, the rest is fixed.
    pub fn nth(src_mac: [u8; 6], dst_mac: [u8; 6], i: u32) -> Flow {
        let base = Flow::between(src_mac, dst_mac);
        Flow {
            src_ip: [198, 18, (i >> 8) as u8, i as u8],
            src_port: 10_000u16.wrapping_add(i as u16),
            ..base
        }
    }
}

/// What a receiver learns from a test frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameInfo {
    /// Sequence number.
    pub seq: u64,
    /// Sender's timestamp in ns (sender's clock).
    pub tx_ns: u64,
    /// The flow it belongs to.
    pub flow: Flow,
}

/// Fill `buf` (whose length is the frame length, `MIN_FRAME_LEN..=MAX_JUMBO_FRAME_LEN`
/// bytes) with a test frame. Returns false (and writes nothing) for a length
/// outside that range.
pub fn write(buf: &mut [u8], flow: &Flow, seq: u64, tx_ns: u64) -> bool {
    let len = buf.len();
    if !(MIN_FRAME_LEN..=MAX_JUMBO_FRAME_LEN).contains(&len) {
        return false;
    }
    let udp_payload = len - HEADERS_LEN;
    let eth = Ethernet2Header {
        source: flow.src_mac,
        destination: flow.dst_mac,
        ether_type: EtherType::IPV4,
    };
    let udp = UdpHeader::without_ipv4_checksum(flow.src_port, flow.dst_port, udp_payload)
        .expect("payload fits: len <= 9014");
    let mut ip = Ipv4Header::new(
        (8 + udp_payload) as u16,
        64,
        IpNumber::UDP,
        flow.src_ip,
        flow.dst_ip,
    )
    .expect("payload fits: len <= 9014");
    ip.header_checksum = ip.calc_header_checksum();
    buf[..14].copy_from_slice(&eth.to_bytes());
    buf[14..34].copy_from_slice(&ip.to_bytes());
    buf[34..42].copy_from_slice(&udp.to_bytes());
    let p = &mut buf[HEADERS_LEN..];
    p[..2].copy_from_slice(&MAGIC.to_le_bytes());
    p[2..10].copy_from_slice(&seq.to_le_bytes());
    p[10..18].copy_from_slice(&tx_ns.to_le_bytes());
    fill_pattern(&mut p[META_LEN..], seq);
    true
}

fn fill_pattern(rest: &mut [u8], seq: u64) {
    let base = seq as u8;
    for (i, b) in rest.iter_mut().enumerate() {
        *b = base.wrapping_add(i as u8);
    }
}

/// The generators' inner step: allocate test frames from `pool` into `pending`
/// until it holds `burst` frames, the pool runs dry, or `*seq` reaches `limit`.
/// Frame `seq` goes to flow `seq % flows.len()`, is `len_of(seq)` bytes long
/// (`MIN_FRAME_LEN..=MAX_JUMBO_FRAME_LEN`, else it stops) and carries CLOCK_MONOTONIC
/// as its send time, read once per call (at the first frame): the frames of one burst are handed
/// to the NIC together, and in a guest without a stable TSC every clock read
/// exits into the emulator. Advances `*seq`; returns how many frames were added.
pub fn fill_burst(
    pool: &pollnic::Mempool,
    pending: &mut Vec<pollnic::Packet>,
    burst: usize,
    flows: &[Flow],
    seq: &mut u64,
    limit: u64,
    len_of: impl Fn(u64) -> usize,
) -> usize {
    let mut added = 0;
    let mut now_ns = None;
    while pending.len() < burst && *seq < limit && !flows.is_empty() {
        let Some(mut p) = pool.alloc() else { break };
        let flow = &flows[(*seq % flows.len() as u64) as usize];
        if p.set_len(len_of(*seq)).is_err()
            || !write(
                p.data_mut(),
                flow,
                *seq,
                *now_ns.get_or_insert_with(pollnic::clock::monotonic_ns),
            )
        {
            break;
        }
        pending.push(p);
        *seq += 1;
        added += 1;
    }
    added
}

/// The frame `write` produces for these arguments, as a new vector.
pub fn expected(len: usize, flow: &Flow, seq: u64, tx_ns: u64) -> Vec<u8> {
    let mut v = vec![0; len];
    write(&mut v, flow, seq, tx_ns);
    v
}

/// Parse a test frame: `None` if it is not Ethernet/IPv4/UDP carrying the
/// test payload magic. Does not check the pattern (see [`pattern_ok`]).
pub fn parse(data: &[u8]) -> Option<FrameInfo> {
    let pkt = SlicedPacket::from_ethernet(data).ok()?;
    let Some(etherparse::LinkSlice::Ethernet2(eth)) = pkt.link else {
        return None;
    };
    let Some(NetSlice::Ipv4(ip)) = pkt.net else {
        return None;
    };
    let Some(TransportSlice::Udp(udp)) = pkt.transport else {
        return None;
    };
    let p = udp.payload();
    if p.len() < META_LEN || u16::from_le_bytes([p[0], p[1]]) != MAGIC {
        return None;
    }
    let h = ip.header();
    Some(FrameInfo {
        seq: u64::from_le_bytes(p[2..10].try_into().ok()?),
        tx_ns: u64::from_le_bytes(p[10..18].try_into().ok()?),
        flow: Flow {
            src_mac: eth.source(),
            dst_mac: eth.destination(),
            src_ip: h.source(),
            dst_ip: h.destination(),
            src_port: udp.source_port(),
            dst_port: udp.destination_port(),
        },
    })
}

/// `(seq, tx_ns)` from a test frame's UDP payload alone (what a UDP socket
/// receives); `None` if the payload does not start with the test magic.
pub fn parse_udp_payload(p: &[u8]) -> Option<(u64, u64)> {
    if p.len() < META_LEN || u16::from_le_bytes([p[0], p[1]]) != MAGIC {
        return None;
    }
    Some((
        u64::from_le_bytes(p[2..10].try_into().ok()?),
        u64::from_le_bytes(p[10..18].try_into().ok()?),
    ))
}

/// Whether every padding byte of a test frame matches its sequence number.
pub fn pattern_ok(data: &[u8], seq: u64) -> bool {
    if data.len() < HEADERS_LEN + META_LEN {
        return false;
    }
    let base = seq as u8;
    data[HEADERS_LEN + META_LEN..]
        .iter()
        .enumerate()
        .all(|(i, &b)| b == base.wrapping_add(i as u8))
}

/// A deterministic frame length in `MIN_FRAME_LEN..=MAX_FRAME_LEN` for
/// sequence number `seq` (covers both ends and everything between).
pub fn mixed_len(seq: u64) -> usize {
    match seq % 16 {
        0 => MIN_FRAME_LEN,
        1 => MAX_FRAME_LEN,
        _ => {
            MIN_FRAME_LEN
                + (seq.wrapping_mul(2_654_435_761) % (MAX_FRAME_LEN - MIN_FRAME_LEN + 1) as u64)
                    as usize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_every_size() {
        let flow = Flow::between([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        for len in [
            MIN_FRAME_LEN,
            61,
            64,
            128,
            1000,
            MAX_FRAME_LEN,
            3996,
            MAX_JUMBO_FRAME_LEN,
        ] {
            let f = expected(len, &flow, 77, 123_456);
            let info = parse(&f).expect("parses");
            assert_eq!(parse_udp_payload(&f[HEADERS_LEN..]), Some((77, 123_456)));
            assert_eq!((info.seq, info.tx_ns, info.flow), (77, 123_456, flow));
            assert!(pattern_ok(&f, 77));
            let mut bad = f.clone();
            *bad.last_mut().unwrap() ^= 1;
            assert!(!pattern_ok(&bad, 77) || len == HEADERS_LEN + META_LEN);
        }
    }

    #[test]
    fn rejects_bad_lengths_and_foreign_frames() {
        let flow = Flow::between([0; 6], [0xff; 6]);
        assert!(!write(&mut [0u8; 59], &flow, 0, 0));
        assert!(
            write(&mut vec![0u8; 1515], &flow, 0, 0),
            "jumbo test frames"
        );
        assert!(!write(&mut vec![0u8; 9015], &flow, 0, 0));
        assert!(parse(&[0u8; 60]).is_none());
    }

    #[test]
    fn fill_burst_stops_at_burst_limit_and_empty_pool() {
        use pollnic_rings::{IdentityMapper, PageSize};
        let pool = pollnic::Mempool::new(
            8,
            2048,
            PageSize::Small4K,
            std::sync::Arc::new(IdentityMapper),
        )
        .unwrap();
        let flows = [Flow::between([2; 6], [4; 6]), Flow::nth([2; 6], [4; 6], 1)];
        let (mut pending, mut seq) = (Vec::new(), 0);
        assert_eq!(
            fill_burst(&pool, &mut pending, 4, &flows, &mut seq, u64::MAX, |_| 60),
            4
        );
        assert_eq!(
            fill_burst(&pool, &mut pending, 32, &flows, &mut seq, 6, |_| 60),
            2,
            "limit"
        );
        assert_eq!(
            fill_burst(
                &pool,
                &mut pending,
                32,
                &flows,
                &mut seq,
                u64::MAX,
                mixed_len
            ),
            2,
            "pool dry"
        );
        assert_eq!(seq, 8);
        for (i, p) in pending.iter().enumerate() {
            let info = parse(p.data()).unwrap();
            assert_eq!((info.seq, info.flow), (i as u64, flows[i % 2]));
            assert!(pattern_ok(p.data(), i as u64));
        }
    }

    #[test]
    fn mixed_lengths_cover_the_range() {
        let lens: Vec<usize> = (0..10_000).map(mixed_len).collect();
        assert!(lens
            .iter()
            .all(|l| (MIN_FRAME_LEN..=MAX_FRAME_LEN).contains(l)));
        assert!(lens.contains(&MIN_FRAME_LEN) && lens.contains(&MAX_FRAME_LEN));
        let distinct: std::collections::HashSet<_> = lens.iter().collect();
        assert!(distinct.len() > 1000);
    }
}
