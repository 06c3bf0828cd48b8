//! Hostile and unusual traffic, sent from port 0 with pollnic TX and received
//! on port 1 with pollnic RX (issue 11, part 6). Run inside the QEMU guest by
//! `cargo xtask test`.
//!
//! - IPv4 fragments with UDP hashing on, over 2 RSS queues: every fragment of
//!   a datagram, the first (which carries the UDP header) included, is hashed
//!   on the IPv4 addresses only, so all land on one queue; an unfragmented
//!   datagram of the same flow is hashed on addresses and ports. That is QEMU
//!   10.0's rule (`hw/net/igb_core.c` `igb_rss_get_hash_type` falls back to
//!   the IPv4 hash when `net/eth.c` `eth_get_protocols` reports no L4 header,
//!   which it does for every fragment); the README's "IPv4 fragments and RSS"
//!   says what silicon does and why Linux and DPDK leave UDP hashing off.
//! - Broadcast, multicast, own and foreign unicast, as a table over the three
//!   receive filters (default, `allmulti`, `promisc`): what is delivered, and
//!   each delivered frame counted once in `rx_packets` and in
//!   `rx_broadcast`/`rx_multicast` (BPRC/MPRC), each sent one once in
//!   `tx_packets`/`tx_broadcast`/`tx_multicast`; filtered frames counted
//!   nowhere.
//! - Ring overrun: a burst four times the RX ring, sent while nobody polls,
//!   loses frames, and every round that loses frames shows in
//!   `icr_rxo_events` (ICR.RXO, the only trace QEMU's igb leaves).

use etherparse::{IpFragOffset, IpNumber, Ipv4Header, PacketBuilder};
use pollnic::{Device, DeviceConfig, Packet};
use pollnic_tests::*;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// A received frame: the queue it came on, its bytes, the descriptor's RSS hash.
struct Got {
    queue: u16,
    data: Vec<u8>,
    hash: u32,
}

/// Send `frames` (whole Ethernet frames, no FCS) from `tx`, waiting for the TX ring.
fn send(tx: &mut Device, frames: &[Vec<u8>]) {
    let mut pending: Vec<Packet> = frames
        .iter()
        .map(|f| {
            let mut p = tx.mempool().alloc().expect("tx buffer");
            p.set_len(f.len()).unwrap();
            p.data_mut().copy_from_slice(f);
            p
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !pending.is_empty() {
        tx.queue(0).tx_burst(&mut pending);
        assert!(Instant::now() < deadline, "TX ring stuck");
    }
    assert!(
        tx.queue(0).flush_tx(Duration::from_secs(5)),
        "TX did not drain"
    );
}

/// Poll every queue of `rx` until `want` frames arrived, then 200 ms more to
/// catch extra ones; or until nothing came for `idle`; at most 10 s.
fn collect(rx: &mut Device, want: usize, idle: Duration) -> Vec<Got> {
    let mut out = Vec::new();
    let mut got: Vec<Packet> = Vec::with_capacity(64);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut quiet_until: Option<Instant> = None;
    let mut last = Instant::now();
    loop {
        for q in 0..rx.queue_count() {
            rx.queue(q).rx_burst(&mut got, 64);
            if !got.is_empty() {
                last = Instant::now();
            }
            for p in got.drain(..) {
                out.push(Got {
                    queue: q,
                    data: p.data().to_vec(),
                    hash: p.rss_hash(),
                });
            }
        }
        let now = Instant::now();
        if out.len() >= want && quiet_until.is_none() {
            quiet_until = Some(now + Duration::from_millis(200));
        }
        if quiet_until.is_some_and(|t| now >= t) || now >= deadline || now - last >= idle {
            return out;
        }
    }
}

/// A 60-byte UDP/IPv4 frame from `src` to `dst` (MACs) carrying `tag`.
fn udp_frame(src: [u8; 6], dst: [u8; 6], tag: u8) -> Vec<u8> {
    let mut v = Vec::new();
    PacketBuilder::ethernet2(src, dst)
        .ipv4([10, 0, 0, 1], [10, 0, 1, 1], 64)
        .udp(7000, 7001)
        .write(&mut v, &[tag; 18])
        .unwrap();
    v
}

const FRAG_DATAGRAMS: u8 = 12;
/// UDP payload per datagram: 8 + 3000 bytes of UDP, three fragments of at
/// most 1480 bytes (a 1514-byte frame each, the largest without jumbo frames).
const FRAG_PAYLOAD: usize = 3000;
const FRAG_MAX: usize = 1480;

/// The IPv4 addresses and UDP ports of datagram `i`.
fn frag_flow(i: u8) -> ([u8; 4], [u8; 4], u16, u16) {
    (
        [10, 1, i / 4, 1 + i * 7],
        [10, 2, 0, 1],
        20000 + u16::from(i) * 13,
        4789,
    )
}

/// The frames of datagram `i`: its UDP header and payload split into IPv4
/// fragments (identification `0x4000 + i`), in order.
fn fragments(i: u8, src: [u8; 6], dst: [u8; 6]) -> Vec<Vec<u8>> {
    let (sip, dip, sport, dport) = frag_flow(i);
    let payload: Vec<u8> = (0..FRAG_PAYLOAD).map(|k| (k as u8) ^ i).collect();
    let mut whole = Vec::new();
    PacketBuilder::ipv4(sip, dip, 64)
        .udp(sport, dport)
        .write(&mut whole, &payload)
        .unwrap();
    let udp = &whole[20..]; // the IPv4 payload: UDP header + data
    udp.chunks(FRAG_MAX)
        .enumerate()
        .map(|(k, chunk)| {
            let off = k * FRAG_MAX;
            let mut ip = Ipv4Header::new(chunk.len() as u16, 64, IpNumber::UDP, sip, dip).unwrap();
            ip.identification = 0x4000 + u16::from(i);
            ip.dont_fragment = false;
            ip.more_fragments = off + chunk.len() < udp.len();
            ip.fragment_offset = IpFragOffset::try_new((off / 8) as u16).unwrap();
            ip.header_checksum = ip.calc_header_checksum();
            let mut f = Vec::with_capacity(14 + 20 + chunk.len());
            f.extend_from_slice(&dst);
            f.extend_from_slice(&src);
            f.extend_from_slice(&0x0800u16.to_be_bytes());
            ip.write(&mut f).unwrap();
            f.extend_from_slice(chunk);
            f
        })
        .collect()
}

#[test]
#[ignore = "needs the QEMU igb testbed: run with `cargo xtask test`"]
fn ipv4_fragments_of_a_datagram_land_on_one_queue() {
    let mut tx = Device::open(port(0), &small_config()).expect("open port 0");
    let rx_cfg = small_config().with_queues(2);
    assert!(
        rx_cfg.hash_types.udp_ipv4 && rx_cfg.hash_types.ipv4,
        "UDP/IPv4 hashing on"
    );
    let mut rx = Device::open(port(1), &rx_cfg).expect("open port 1, 2 queues");
    let (hasher, reta) = (rx.rss_hasher(), rx.reta().clone());
    let hash2 = |sip: [u8; 4], dip: [u8; 4]| hasher.hash(&[sip, dip].concat());
    let hash4 = |sip: [u8; 4], dip: [u8; 4], sp: u16, dp: u16| {
        hasher.hash(&[&sip[..], &dip, &sp.to_be_bytes(), &dp.to_be_bytes()].concat())
    };
    // The flows must tell the rules apart: both queues used, and some
    // datagram whose 4-tuple queue differs from its 2-tuple queue.
    let q2: Vec<u16> = (0..FRAG_DATAGRAMS)
        .map(|i| {
            let (s, d, _, _) = frag_flow(i);
            reta.queue_for_hash(hash2(s, d))
        })
        .collect();
    let q4: Vec<u16> = (0..FRAG_DATAGRAMS)
        .map(|i| {
            let (s, d, sp, dp) = frag_flow(i);
            reta.queue_for_hash(hash4(s, d, sp, dp))
        })
        .collect();
    assert!(
        q2.contains(&0) && q2.contains(&1),
        "flows on both queues: {q2:?}"
    );
    assert!(
        q2 != q4,
        "the flows must distinguish the two rules: {q2:?} {q4:?}"
    );

    let (smac, dmac) = (tx.mac(), rx.mac());
    // Four datagrams at a time: 12 fragments, well inside a 64-descriptor ring.
    let mut seen: Vec<Got> = Vec::new();
    for chunk in (0..FRAG_DATAGRAMS).collect::<Vec<_>>().chunks(4) {
        let frames: Vec<Vec<u8>> = chunk
            .iter()
            .flat_map(|&i| fragments(i, smac, dmac))
            .collect();
        let n = frames.len();
        send(&mut tx, &frames);
        let got = collect(&mut rx, n, Duration::from_secs(5));
        assert_eq!(got.len(), n, "every fragment arrives once");
        seen.extend(got);
    }
    // Group by IPv4 identification; reassemble; check the queue and hash.
    let mut by_id: BTreeMap<u16, Vec<&Got>> = BTreeMap::new();
    for g in &seen {
        let (ip, _) = Ipv4Header::from_slice(&g.data[14..]).expect("an IPv4 fragment");
        by_id.entry(ip.identification).or_default().push(g);
    }
    assert_eq!(by_id.len(), FRAG_DATAGRAMS as usize);
    for i in 0..FRAG_DATAGRAMS {
        let (sip, dip, sport, dport) = frag_flow(i);
        let frags = &by_id[&(0x4000 + u16::from(i))];
        let queues: Vec<u16> = frags.iter().map(|g| g.queue).collect();
        let want_hash = hash2(sip, dip);
        println!(
            "datagram {i} ({}.{}.{}.{}:{sport}): {} fragments on queues {queues:?}; IPv4 hash \
             {want_hash:#010x} -> queue {}, UDP 4-tuple would give queue {}",
            sip[0],
            sip[1],
            sip[2],
            sip[3],
            frags.len(),
            q2[i as usize],
            q4[i as usize]
        );
        assert!(
            queues.iter().all(|&q| q == q2[i as usize]),
            "datagram {i}: all fragments on the IPv4-hash queue {}: {queues:?}",
            q2[i as usize]
        );
        for g in frags {
            assert_eq!(
                g.hash, want_hash,
                "datagram {i}: each fragment hashed on the addresses only"
            );
        }
        // Reassembled, the fragments are the datagram that was sent.
        let mut parts: Vec<(usize, &[u8])> = frags
            .iter()
            .map(|g| {
                let (ip, rest) = Ipv4Header::from_slice(&g.data[14..]).unwrap();
                let len = usize::from(ip.total_len) - ip.header_len();
                (usize::from(ip.fragment_offset.value()) * 8, &rest[..len])
            })
            .collect();
        parts.sort_by_key(|p| p.0);
        let udp: Vec<u8> = parts.iter().flat_map(|p| p.1.iter().copied()).collect();
        let sent = fragments(i, smac, dmac);
        let want: Vec<u8> = sent.iter().flat_map(|f| f[34..].iter().copied()).collect();
        assert!(udp == want, "datagram {i}: reassembled bytes differ");
        assert_eq!(u16::from_be_bytes([udp[0], udp[1]]), sport);
        assert_eq!(u16::from_be_bytes([udp[2], udp[3]]), dport);
    }
    // The same flows unfragmented: hashed on addresses and ports.
    let whole: Vec<Vec<u8>> = (0..FRAG_DATAGRAMS)
        .map(|i| {
            let (sip, dip, sport, dport) = frag_flow(i);
            let mut v = Vec::new();
            PacketBuilder::ethernet2(smac, dmac)
                .ipv4(sip, dip, 64)
                .udp(sport, dport)
                .write(&mut v, &[i; 64])
                .unwrap();
            v
        })
        .collect();
    send(&mut tx, &whole);
    let got = collect(&mut rx, whole.len(), Duration::from_secs(5));
    assert_eq!(got.len(), whole.len());
    for g in &got {
        let i = g.data[42];
        let (sip, dip, sport, dport) = frag_flow(i);
        assert_eq!(
            g.hash,
            hash4(sip, dip, sport, dport),
            "datagram {i} unfragmented: UDP 4-tuple hash"
        );
        assert_eq!(
            g.queue, q4[i as usize],
            "datagram {i} unfragmented: 4-tuple queue"
        );
    }
}

/// One receive filter setting and what it must let through.
struct Phase {
    name: &'static str,
    promisc: bool,
    allmulti: bool,
    multicast_in: bool,
    foreign_in: bool,
}

#[test]
#[ignore = "needs the QEMU igb testbed: run with `cargo xtask test`"]
fn broadcast_multicast_and_foreign_unicast_by_filter_counted_once() {
    const BCAST: usize = 10;
    const MCAST: usize = 7;
    const OWN: usize = 5;
    const FOREIGN: usize = 9;
    let broadcast = [0xff; 6];
    let multicast = [0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb]; // 224.0.0.251 (mDNS)
    let foreign = [0x52, 0x54, 0x00, 0x99, 0x99, 0x99];

    let mut tx = Device::open(port(0), &small_config()).expect("open port 0");
    let phases = [
        Phase {
            name: "default (promisc off, allmulti off)",
            promisc: false,
            allmulti: false,
            multicast_in: false,
            foreign_in: false,
        },
        Phase {
            name: "allmulti",
            promisc: false,
            allmulti: true,
            multicast_in: true,
            foreign_in: false,
        },
        Phase {
            name: "promisc",
            promisc: true,
            allmulti: false,
            multicast_in: true,
            foreign_in: true,
        },
    ];
    for (k, ph) in phases.iter().enumerate() {
        let cfg = small_config()
            .with_promisc(ph.promisc)
            .with_allmulti(ph.allmulti);
        let mut rx = Device::open(port(1), &cfg).expect("open port 1");
        let own = rx.mac();
        let src = tx.mac();
        let mut frames = Vec::new();
        let mut tag = 0u8;
        for (dst, n) in [
            (broadcast, BCAST),
            (multicast, MCAST),
            (own, OWN),
            (foreign, FOREIGN),
        ] {
            for _ in 0..n {
                frames.push(udp_frame(src, dst, tag));
                tag += 1;
            }
        }
        let want = BCAST
            + OWN
            + if ph.multicast_in { MCAST } else { 0 }
            + if ph.foreign_in { FOREIGN } else { 0 };
        send(&mut tx, &frames);
        let got = collect(&mut rx, want, Duration::from_secs(3));
        let count = |d: [u8; 6]| got.iter().filter(|g| g.data[..6] == d).count();
        let (b, m, o, f) = (
            count(broadcast),
            count(multicast),
            count(own),
            count(foreign),
        );
        // Each frame at most once, and exactly the ones sent.
        let mut tags: Vec<u8> = got.iter().map(|g| g.data[42]).collect();
        tags.sort_unstable();
        tags.dedup();
        assert_eq!(
            tags.len(),
            got.len(),
            "{}: a frame delivered twice",
            ph.name
        );
        let rs = rx.stats(); // reads the registers now
        println!(
            "{}: delivered broadcast {b}/{BCAST}, multicast {m}/{MCAST}, own {o}/{OWN}, foreign {f}/{FOREIGN}; \
             rx_packets {:?} rx_broadcast {:?} rx_multicast {:?} rx_total_packets {:?} rx_missed_errors {:?}",
            ph.name,
            rs.get("rx_packets"),
            rs.get("rx_broadcast"),
            rs.get("rx_multicast"),
            rs.get("rx_total_packets"),
            rs.get("rx_missed_errors")
        );
        assert_eq!(
            (b, o),
            (BCAST, OWN),
            "{}: broadcast and own unicast always pass",
            ph.name
        );
        assert_eq!(
            m,
            if ph.multicast_in { MCAST } else { 0 },
            "{}: multicast",
            ph.name
        );
        assert_eq!(
            f,
            if ph.foreign_in { FOREIGN } else { 0 },
            "{}: foreign unicast",
            ph.name
        );
        assert_eq!(got.len(), want, "{}: nothing else", ph.name);
        // Counted once each, under the ethtool -S names; what the filter
        // dropped is counted nowhere (not in GPRC, TPR or MPC).
        assert_eq!(rs.get("rx_packets"), Some(want as u64), "{}", ph.name);
        assert_eq!(rs.get("rx_total_packets"), Some(want as u64), "{}", ph.name);
        assert_eq!(rs.get("rx_broadcast"), Some(BCAST as u64), "{}", ph.name);
        assert_eq!(rs.get("rx_multicast"), Some(m as u64), "{}", ph.name);
        assert_eq!(rs.get("rx_missed_errors"), Some(0), "{}", ph.name);
        let ts = tx.stats();
        let rounds = k as u64 + 1;
        let sent = (BCAST + MCAST + OWN + FOREIGN) as u64;
        assert_eq!(ts.get("tx_packets"), Some(sent * rounds), "{}", ph.name);
        assert_eq!(
            ts.get("tx_broadcast"),
            Some(BCAST as u64 * rounds),
            "{}",
            ph.name
        );
        assert_eq!(
            ts.get("tx_multicast"),
            Some(MCAST as u64 * rounds),
            "{}",
            ph.name
        );
    }
}

#[test]
#[ignore = "needs the QEMU igb testbed: run with `cargo xtask test`"]
fn a_burst_larger_than_the_ring_loses_frames_visibly() {
    const RING: u32 = 32;
    const BURST: usize = 4 * RING as usize;
    let cfg = DeviceConfig::default()
        .with_rx_ring_size(RING)
        .with_tx_ring_size(256)
        .with_mempool_size(1024);
    let mut tx = Device::open(port(0), &cfg).expect("open port 0");
    let mut rx = Device::open(port(1), &cfg).expect("open port 1");
    let (src, dst) = (tx.mac(), rx.mac());
    let mut total_lost = 0;
    for round in 0..3 {
        let before = rx
            .stats()
            .rx_overrun_reads()
            .expect("igb counts ICR.RXO reads");
        let frames: Vec<Vec<u8>> = (0..BURST).map(|t| udp_frame(src, dst, t as u8)).collect();
        // Nobody polls port 1 while the burst is sent.
        send(&mut tx, &frames);
        std::thread::sleep(Duration::from_millis(100));
        let got = collect(&mut rx, BURST, Duration::from_millis(1500)).len();
        let lost = BURST - got;
        let after = rx
            .stats()
            .rx_overrun_reads()
            .expect("igb counts ICR.RXO reads");
        println!(
            "round {round}: {BURST}-frame burst into a {RING}-descriptor ring: {got} arrived, \
             {lost} lost; icr_rxo_events {before} -> {after}"
        );
        assert!(
            got >= RING as usize - 1,
            "at least the ring's free descriptors fill"
        );
        if lost > 0 {
            assert!(
                after > before,
                "round {round}: {lost} frames lost and icr_rxo_events did not move"
            );
        }
        total_lost += lost;
    }
    assert!(
        total_lost > 0,
        "a burst 4x the ring, unpolled, must overflow it"
    );
}
