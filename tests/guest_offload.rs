//! Checksum and VLAN offloads on QEMU's igb, against the guest kernel: port
//! 0 on the kernel igb driver (10.0.0.1/24, and a VLAN device `.100` as
//! 10.0.100.1/24), port 1 on pollnic (the two ports sit on one QEMU hub).
//!
//! - RX: the kernel sends UDP and TCP over IPv4 and UDP over IPv6, each
//!   with good and with deliberately bad checksums, from an AF_PACKET raw
//!   socket; pollnic (RX checksum status and VLAN strip on) checks every
//!   frame's reported status. A frame sent through the kernel's VLAN
//!   device arrives with its tag stripped and reported.
//! - TX: pollnic sends UDP datagrams whose IPv4 and UDP checksums are
//!   left 0 with checksum offload, untagged and with a VLAN tag inserted by
//!   the NIC, to kernel UDP sockets: the kernel, which drops a datagram
//!   with a wrong checksum, must deliver every one (and a control datagram
//!   sent with a wrong checksum and no offload must not arrive).
//! - pktgen `--tx-checksum --vlan 100 --hw-vlan`: tcpdump on the kernel's
//!   port sees every frame tagged 100 with good IPv4 and UDP checksums.
//! - TSO: pollnic on port 0 sends one TCP/IPv4 frame with a 65,495-byte
//!   payload (the largest QEMU segments) at MSS 1448 and pollnic on port 1
//!   receives its 46 segments; each is checked in software (lengths, both
//!   checksums, IP IDs, sequence numbers, flags) and the payload put back
//!   together. Then TCP/IPv6, the 64 KiB payload QEMU drops, MSS 0 refused.
//!
//! Run inside the testbed: `cargo xtask test`.

use etherparse::PacketBuilder;
use pollnic::offload::{ChecksumStatus, TxOffload};
use pollnic::pci::{self, PciAddress, PciDevice, Sysfs};
use pollnic::{Device, DeviceConfig, Packet};
use pollnic_tests::{example_exe, port, small_config};
use std::net::UdpSocket;
use std::process::Command;
use std::time::{Duration, Instant};

/// Puts both ports back on vfio-pci however the test ends.
struct Restore(Vec<PciAddress>);

impl Drop for Restore {
    fn drop(&mut self) {
        for &a in &self.0 {
            let _ = pci::bind_vfio(&Sysfs::default(), a);
        }
    }
}

fn sh(cmd: &str, args: &[&str]) {
    let st = Command::new(cmd)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("{cmd} {}: {e}", args.join(" ")));
    assert!(st.success(), "`{cmd} {}` failed", args.join(" "));
}

/// Hand `addr` to the kernel igb driver; returns its interface name.
fn to_kernel(addr: PciAddress) -> String {
    let sysfs = Sysfs::default();
    pci::unbind_vfio(&sysfs, addr).expect("hand the port to the kernel igb driver");
    for _ in 0..200 {
        if let Ok(d) = PciDevice::read(&sysfs, addr) {
            if let Some(i) = d.interfaces.first() {
                return i.clone();
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{addr}: the kernel igb driver created no interface");
}

fn wait_carrier(ifname: &str) {
    let t0 = Instant::now();
    while std::fs::read_to_string(format!("/sys/class/net/{ifname}/carrier"))
        .map(|s| s.trim() != "1")
        .unwrap_or(true)
    {
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "{ifname}: no carrier"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn mac_of(ifname: &str) -> [u8; 6] {
    let s = std::fs::read_to_string(format!("/sys/class/net/{ifname}/address")).unwrap();
    let v: Vec<u8> = s
        .trim()
        .split(':')
        .map(|x| u8::from_str_radix(x, 16).unwrap())
        .collect();
    v.try_into().unwrap()
}

/// Send `frames` out of `ifname` through an AF_PACKET raw socket (the
/// kernel adds nothing: no checksum, no tag unless `ifname` is a VLAN
/// device).
fn send_raw(ifname: &str, frames: &[Vec<u8>]) {
    let name = std::ffi::CString::new(ifname).unwrap();
    // SAFETY: plain libc calls with valid arguments; the socket is closed below.
    unsafe {
        let idx = libc::if_nametoindex(name.as_ptr());
        assert!(idx != 0, "{ifname}: no such interface");
        let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0);
        assert!(
            fd >= 0,
            "AF_PACKET socket: {}",
            std::io::Error::last_os_error()
        );
        let mut sll: libc::sockaddr_ll = std::mem::zeroed();
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = idx as i32;
        sll.sll_halen = 6;
        for f in frames {
            let n = libc::sendto(
                fd,
                f.as_ptr().cast(),
                f.len(),
                0,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            );
            assert_eq!(
                n,
                f.len() as isize,
                "sendto: {}",
                std::io::Error::last_os_error()
            );
        }
        libc::close(fd);
    }
}

const K_IP: [u8; 4] = [10, 0, 0, 1];
const P_IP: [u8; 4] = [10, 0, 0, 2];
const K_VLAN_IP: [u8; 4] = [10, 0, 100, 1];
const P_VLAN_IP: [u8; 4] = [10, 0, 100, 2];
const VID: u16 = 100;

#[derive(Clone, Copy)]
enum L4 {
    Udp4,
    Tcp4,
    Udp6,
}

/// A frame from `src` to `dst` whose payload starts with the marker
/// "OFFL" and `seq`, UDP/TCP source port 4000 + seq.
fn frame(src: [u8; 6], dst: [u8; 6], l4: L4, seq: u8, ip: ([u8; 4], [u8; 4])) -> Vec<u8> {
    let mut payload = b"OFFL".to_vec();
    payload.push(seq);
    payload.extend(std::iter::repeat_n(seq, 40));
    let b = PacketBuilder::ethernet2(src, dst);
    let mut out = Vec::new();
    match l4 {
        L4::Udp4 => b
            .ipv4(ip.0, ip.1, 64)
            .udp(4000 + seq as u16, 9)
            .write(&mut out, &payload),
        L4::Tcp4 => b
            .ipv4(ip.0, ip.1, 64)
            .tcp(4000 + seq as u16, 9, 1, 1000)
            .write(&mut out, &payload),
        L4::Udp6 => b
            .ipv6([0xfd; 16], [0xfe; 16], 64)
            .udp(4000 + seq as u16, 9)
            .write(&mut out, &payload),
    }
    .unwrap();
    out
}

/// The marker's sequence number, if the frame (tag stripped) carries one.
fn marker(p: &Packet) -> Option<u8> {
    let d = p.data();
    d.windows(4).position(|w| w == b"OFFL").map(|i| d[i + 4])
}

#[test]
#[ignore = "runs inside the QEMU guest: cargo xtask test"]
fn checksum_status_vlan_strip_and_tx_offloads_against_the_kernel() {
    use ChecksumStatus::*;
    let (p0, p1): (PciAddress, PciAddress) = (port(0).parse().unwrap(), port(1).parse().unwrap());
    let _restore = Restore(vec![p0, p1]);
    let k0 = to_kernel(p0);
    let kv = format!("{k0}.{VID}");
    sh("ip", &["addr", "flush", "dev", &k0]);
    sh("ip", &["addr", "add", "10.0.0.1/24", "dev", &k0]);
    sh("ip", &["link", "set", "dev", &k0, "up"]);
    // A VLAN device left by an earlier run (none, usually: quietly).
    let _ = Command::new("ip")
        .args(["link", "del", &kv])
        .stderr(std::process::Stdio::null())
        .status();
    sh(
        "ip",
        &[
            "link", "add", "link", &k0, "name", &kv, "type", "vlan", "id", "100",
        ],
    );
    sh("ip", &["addr", "add", "10.0.100.1/24", "dev", &kv]);
    sh("ip", &["link", "set", "dev", &kv, "up"]);
    wait_carrier(&k0);
    let kmac = mac_of(&k0);

    let cfg: DeviceConfig = small_config()
        .with_rx_ring_size(512)
        .with_mempool_size(2048)
        .with_rx_checksum(true)
        .with_vlan_strip(true);
    let mut dev = Device::open(p1, &cfg).expect("open port 1 with pollnic");
    let pmac = dev.mac();

    // ---- RX: good and bad checksums, frame by frame ----------------------
    // (seq, kind, byte to corrupt (offset from the frame's start), want ip, want l4)
    let cases: Vec<(u8, L4, Option<usize>, ChecksumStatus, ChecksumStatus)> = vec![
        (1, L4::Udp4, None, Good, Good),
        (2, L4::Tcp4, None, Good, Good),
        (3, L4::Udp6, None, NotChecked, Good),
        (4, L4::Udp4, Some(14 + 10), Bad, Good),
        (5, L4::Udp4, Some(14 + 20 + 6), Good, Bad),
        (6, L4::Tcp4, Some(14 + 20 + 16), Good, Bad),
        (7, L4::Udp6, Some(14 + 40 + 6), NotChecked, Bad),
    ];
    let frames: Vec<Vec<u8>> = cases
        .iter()
        .map(|&(seq, l4, bad, _, _)| {
            let mut f = frame(kmac, pmac, l4, seq, (K_IP, P_IP));
            if let Some(at) = bad {
                f[at] ^= 0x5a;
            }
            f
        })
        .collect();
    send_raw(&k0, &frames);
    // Through the VLAN device: the kernel (or QEMU's igb, when the kernel
    // asks it to insert the tag) puts tag 100 on the wire.
    send_raw(
        &kv,
        &[frame(
            mac_of(&kv),
            pmac,
            L4::Udp4,
            8,
            (K_VLAN_IP, P_VLAN_IP),
        )],
    );
    let mut seen = std::collections::BTreeMap::new();
    let mut burst = Vec::with_capacity(32);
    let t0 = Instant::now();
    while seen.len() < cases.len() + 1 && t0.elapsed() < Duration::from_secs(20) {
        dev.queue(0).rx_burst(&mut burst, 32);
        for p in burst.drain(..) {
            if let Some(seq) = marker(&p) {
                let c = p.rx_checksum();
                seen.insert(seq, (c.ip, c.l4, p.vlan(), p.data()[12..14].to_vec()));
            }
        }
    }
    for &(seq, _, bad, ip, l4) in &cases {
        let got = seen
            .get(&seq)
            .unwrap_or_else(|| panic!("frame {seq} never arrived: {seen:?}"));
        assert_eq!(
            (got.0, got.1),
            (ip, l4),
            "frame {seq} (corrupted at {bad:?})"
        );
        assert_eq!(got.2, None, "frame {seq}: no tag");
    }
    let tagged = seen
        .get(&8)
        .unwrap_or_else(|| panic!("the VLAN frame never arrived: {seen:?}"));
    assert_eq!(
        tagged.2.map(|t| t & 0xfff),
        Some(VID),
        "tag stripped and reported"
    );
    assert_eq!(tagged.3, vec![0x08, 0x00], "the frame's bytes hold no tag");
    assert_eq!(
        (tagged.0, tagged.1),
        (Good, Good),
        "checked past the stripped tag"
    );
    println!("rx: {seen:?}");

    // ---- TX: checksums (and a tag) inserted by the NIC -------------------
    let plain = UdpSocket::bind(("10.0.0.1", 9)).unwrap();
    let vlan = UdpSocket::bind(("10.0.100.1", 9)).unwrap();
    for s in [&plain, &vlan] {
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
    }
    let zeroed = |ip: ([u8; 4], [u8; 4]), seq: u8, dst: [u8; 6]| {
        let mut f = frame(pmac, dst, L4::Udp4, seq, ip);
        f[24..26].fill(0); // IPv4 header checksum
        f[40..42].fill(0); // UDP checksum
        f
    };
    let q = dev.queue(0);
    let mk = |q: &mut pollnic::Queue, bytes: &[u8]| {
        let mut p = q.mempool().alloc().unwrap();
        p.set_len(bytes.len()).unwrap();
        p.data_mut().copy_from_slice(bytes);
        p
    };
    let csum = TxOffload::NONE.with_ipv4_checksum().with_l4_checksum();
    let n = 20u8;
    for seq in 0..n {
        let mut b = vec![mk(q, &zeroed((P_IP, K_IP), 100 + seq, kmac))];
        assert_eq!(q.tx_burst_offload(&mut b, &csum), 1);
        let mut b = vec![mk(
            q,
            &zeroed((P_VLAN_IP, K_VLAN_IP), 150 + seq, mac_of(&kv)),
        )];
        assert_eq!(q.tx_burst_offload(&mut b, &csum.with_vlan(VID)), 1);
    }
    // The control: a wrong UDP checksum, no offload: the kernel drops it.
    let mut bad = frame(pmac, kmac, L4::Udp4, 99, (P_IP, K_IP));
    bad[40] ^= 0x5a;
    let mut b = vec![mk(q, &bad)];
    assert_eq!(q.tx_burst(&mut b), 1);
    assert!(q.flush_tx(Duration::from_secs(2)));
    let s = q.tx_stats();
    assert_eq!((s.tx_errors, s.tx_offload_errors), (0, 0), "{s:?}");
    let mut buf = [0u8; 2048];
    let mut got = (Vec::new(), Vec::new());
    for (sock, into) in [(&plain, &mut got.0), (&vlan, &mut got.1)] {
        while let Ok(len) = sock.recv(&mut buf) {
            into.push(buf[4]);
            assert!(len == 45, "payload of {len} bytes");
        }
    }
    println!("tx: plain {:?} vlan {:?}", got.0, got.1);
    assert_eq!(
        got.0,
        (100..100 + n).collect::<Vec<u8>>(),
        "every offloaded datagram, and not the control"
    );
    assert_eq!(
        got.1,
        (150..150 + n).collect::<Vec<u8>>(),
        "every tagged datagram"
    );
    drop(dev);

    // ---- pktgen: checksums and tag by the NIC, seen by tcpdump -------------
    let frames = 20;
    let dump = Command::new("tcpdump")
        .args([
            "-i",
            &k0,
            "-nn",
            "-vv",
            "-e",
            "-l",
            "-c",
            &frames.to_string(),
        ])
        .args(["vlan", "100", "and", "udp"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start tcpdump");
    std::thread::sleep(Duration::from_secs(2));
    let kmac_s = std::fs::read_to_string(format!("/sys/class/net/{k0}/address")).unwrap();
    let gen = Command::new(example_exe("pktgen"))
        .args([
            "--port",
            &p1.to_string(),
            "--count",
            &frames.to_string(),
            "--rate",
            "200",
        ])
        .args([
            "--vlan",
            "100",
            "--hw-vlan",
            "--tx-checksum",
            "--dst",
            kmac_s.trim(),
        ])
        .output()
        .expect("run pktgen");
    let gen_out = String::from_utf8_lossy(&gen.stdout);
    println!("{gen_out}");
    assert!(
        gen.status.success(),
        "pktgen: {gen_out} {}",
        String::from_utf8_lossy(&gen.stderr)
    );
    assert!(
        gen_out.contains("tagged VLAN 100 (inserted by the NIC)")
            && gen_out.contains("IPv4 and UDP checksums inserted by the NIC"),
        "pktgen says what the NIC does: {gen_out}"
    );
    let t0 = Instant::now();
    let mut dump = dump;
    while dump.try_wait().unwrap().is_none() && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = dump.kill();
    let out = dump.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    assert_eq!(text.matches("vlan 100").count(), frames, "{text}");
    assert_eq!(text.matches("[udp sum ok]").count(), frames, "{text}");
    assert_eq!(text.matches("bad").count(), 0, "{text}");
    let _ = Command::new("ip").args(["link", "del", &kv]).status();
}

// ---- TSO: pollnic to pollnic across the hub ---------------------------------

use pollnic_tests::tso::{check_segments, receive_tcp, tso_frame, Segment};

#[test]
#[ignore = "runs inside the QEMU guest: cargo xtask test"]
fn tso_cuts_a_large_tcp_payload_into_mss_segments_on_qemus_igb() {
    let cfg = small_config()
        .with_rx_ring_size(512)
        .with_mempool_size(2048)
        .with_rx_checksum(true);
    let (p0, p1) = (port(0), port(1));
    let mut ports =
        Device::open_many([p0.as_str(), p1.as_str()], &cfg).expect("open ports 0 and 1");
    let (a, b) = ports.split_at_mut(1);
    let (tx, rx) = (&mut a[0], &mut b[0]);
    let (src, dst) = (tx.mac(), rx.mac());
    let big = tx
        .create_mempool(8, 72 * 1024)
        .expect("a pool of 72 KiB buffers");
    let payload: Vec<u8> = (0..65536usize).map(|i| (i * 7 + i / 251) as u8).collect();
    let send = |tx: &mut Device, f: &[u8], ol: &TxOffload| {
        let mut p = big.alloc().expect("a big buffer");
        p.set_len(f.len()).unwrap();
        p.data_mut().copy_from_slice(f);
        let mut burst = vec![p];
        assert_eq!(tx.queue(0).tx_burst_offload(&mut burst, ol), 1);
    };
    let ol = TxOffload::NONE.with_tso(1448);

    // IPv4: the largest payload QEMU segments, 65,535 − 20 − 20 bytes, at
    // MSS 1448: 45 full segments and one of 335 bytes.
    let pl = &payload[..65495];
    let f = tso_frame(src, dst, false, 0xfff0, 0xfffff000, pl);
    send(tx, &f, &ol);
    let got = receive_tcp(rx, 46, Duration::from_secs(5));
    let segs = check_segments(&got, pl, 1448, 0xfffff000, 0xfff0, "TCP/IPv4 65,495 bytes");
    // QEMU's segmentation clears PSH and FIN on every segment, the last
    // too (net_tx_pkt_tcp_fragment_init); silicon keeps them on the last.
    let last = segs.last().unwrap();
    assert!(
        !last.psh && !last.fin,
        "QEMU 10.0 clears PSH on the last segment too"
    );
    assert!(
        got.iter().all(|g| g.len() <= 1514),
        "every segment fits MTU 1500"
    );

    // IPv6: 20,000 bytes at MSS 1440.
    let pl6 = &payload[..20000];
    let f6 = tso_frame(src, dst, true, 0, 7, pl6);
    send(tx, &f6, &TxOffload::NONE.with_tso(1440));
    let got = receive_tcp(rx, 14, Duration::from_secs(5));
    check_segments(&got, pl6, 1440, 7, 0, "TCP/IPv6 20,000 bytes");

    // A 64 KiB payload: the 82576 takes it (PAYLEN is 18 bits) and pollnic
    // sends it, but QEMU drops a TSO frame whose IP datagram would exceed
    // 65,535 bytes (net_tx_pkt_send_custom): nothing arrives.
    let f64k = tso_frame(src, dst, false, 1, 1, &payload);
    send(tx, &f64k, &ol);
    assert!(
        tx.queue(0).flush_tx(Duration::from_secs(2)),
        "QEMU took the 64 KiB frame"
    );
    let got = receive_tcp(rx, 1, Duration::from_millis(1500));
    assert!(
        got.is_empty(),
        "QEMU sent {} segments of a 65,536-byte payload",
        got.len()
    );
    let s = tx.queue(0).tx_stats();
    assert_eq!(
        (s.packets, s.tx_offload_errors),
        (3, 0),
        "three TSO frames queued, none refused"
    );

    // MSS 0: refused and counted, the buffer back.
    let before = tx.queue(0).tx_stats();
    send(tx, &f, &TxOffload::NONE.with_tso(0));
    let s = tx.queue(0).tx_stats();
    assert_eq!(s.tx_offload_errors - before.tx_offload_errors, 1);
    assert_eq!(
        tx.queue(0).last_tx_refusal(),
        Some(pollnic::offload::TxRefusal::MssOutOfRange {
            mss: 0,
            max: pollnic::offload::TSO_MAX_MSS
        })
    );
    assert!(
        tx.queue(0).flush_tx(Duration::from_secs(2)),
        "the TX ring drained"
    );
    assert_eq!(big.free_count(), 8, "every big buffer back in its pool");
}

/// `pktgen --tso 1448` on port 0: its first line says the NIC segments,
/// and pollnic on port 1 receives 46 segments of each of its frames, each
/// with good checksums, IPv4 IDs and sequence numbers.
#[test]
#[ignore = "runs inside the QEMU guest: cargo xtask test"]
fn pktgen_tso_frames_arrive_as_mss_segments() {
    let cfg = small_config()
        .with_rx_ring_size(512)
        .with_mempool_size(2048);
    let mut rx = Device::open(port(1).as_str(), &cfg).expect("open port 1 with pollnic");
    let dst = rx.mac();
    let dst_s = dst.map(|b| format!("{b:02x}")).join(":");
    let frames = 3usize;
    let gen = Command::new(example_exe("pktgen"))
        .args([
            "--port",
            &port(0),
            "--count",
            &frames.to_string(),
            "--rate",
            "20",
        ])
        .args(["--tso", "1448", "--dst", &dst_s])
        .output()
        .expect("run pktgen");
    let out = String::from_utf8_lossy(&gen.stdout);
    println!("{out}");
    assert!(
        gen.status.success(),
        "pktgen: {out} {}",
        String::from_utf8_lossy(&gen.stderr)
    );
    assert!(
        out.contains("segmentation done in hardware") && out.contains("46 segments"),
        "pktgen's first line says the NIC cuts the frames: {out}"
    );
    assert!(
        out.contains(&format!("segments   {} expected", 46 * frames)),
        "{out}"
    );
    // pktgen's flow: 198.18.0.0 to 198.19.0.1, TCP 10000 -> 9001.
    let t0 = Instant::now();
    let mut got = Vec::new();
    let mut burst = Vec::new();
    while got.len() < 46 * frames && t0.elapsed() < Duration::from_secs(5) {
        rx.queue(0).rx_burst(&mut burst, 64);
        got.extend(burst.drain(..).map(|p| p.data().to_vec()));
    }
    assert_eq!(
        got.len(),
        46 * frames,
        "every segment of every frame arrived"
    );
    for (n, frame) in got.chunks(46).enumerate() {
        let segs: Vec<Segment> = frame
            .iter()
            .enumerate()
            .map(|(k, f)| parse_pktgen_segment(f, &format!("pktgen frame {n} segment {k}")))
            .collect();
        for (k, s) in segs.iter().enumerate() {
            assert_eq!(s.id, Some((n + k) as u16), "frame {n} segment {k}: IPv4 ID");
            assert_eq!(
                s.seq,
                (n as u32)
                    .wrapping_mul(65495)
                    .wrapping_add((k * 1448) as u32),
                "frame {n} segment {k}: sequence number"
            );
            assert_eq!(s.payload.len(), if k < 45 { 1448 } else { 335 });
        }
        assert_eq!(
            &segs[0].payload[..8],
            &(n as u64).to_be_bytes(),
            "frame {n}: its number"
        );
    }
}

/// [`pollnic_tests::tso::parse_segment`] for pktgen's TSO frames (its own ports and ACK).
fn parse_pktgen_segment(f: &[u8], what: &str) -> Segment {
    let h = etherparse::PacketHeaders::from_ethernet_slice(f)
        .unwrap_or_else(|e| panic!("{what}: not a TCP/IP frame: {e}"));
    let Some(etherparse::TransportHeader::Tcp(tcp)) = h.transport else {
        panic!("{what}: not TCP");
    };
    let Some(etherparse::NetHeaders::Ipv4(ip, _)) = h.net else {
        panic!("{what}: not IPv4");
    };
    let payload = h.payload.slice().to_vec();
    assert_eq!(
        ip.header_checksum,
        ip.calc_header_checksum(),
        "{what}: IPv4 checksum"
    );
    assert_eq!(
        tcp.checksum,
        tcp.calc_checksum_ipv4(&ip, &payload).unwrap(),
        "{what}: TCP checksum"
    );
    assert_eq!(
        (tcp.source_port, tcp.destination_port),
        (10000, 9001),
        "{what}"
    );
    Segment {
        id: Some(ip.identification),
        seq: tcp.sequence_number,
        psh: tcp.psh,
        fin: tcp.fin,
        payload,
    }
}
