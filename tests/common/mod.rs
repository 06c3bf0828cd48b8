//! Helpers for the tests that run inside the QEMU guest (`cargo xtask test`).
//! The testbed exports the igb ports as POLLNIC_PORT0..3 (0 and 1 wired back
//! to back through one QEMU hub, 2 and 3 through another) and the MACs given
//! to QEMU as POLLNIC_PORT0_MAC..POLLNIC_PORT3_MAC; a missing variable fails
//! the test (these tests never skip).

#![allow(dead_code)]

use pollnic::{Device, DeviceConfig, Packet};
use pollnic_tools::frame::{self, Flow};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// An environment variable the testbed must set.
pub fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: this test runs inside the QEMU guest; use `cargo xtask test`")
    })
}

/// PCI address of testbed port `i` (0..=3).
pub fn port(i: usize) -> String {
    env(&format!("POLLNIC_PORT{i}"))
}

/// The MAC QEMU gave testbed port `i` (`POLLNIC_PORTi_MAC`, `52:54:00:..`).
pub fn port_mac(i: usize) -> [u8; 6] {
    mac_from_env(&format!("POLLNIC_PORT{i}_MAC"))
}

/// Testbed virtio-net port `i` (`POLLNIC_VIRTIO_PORTi`: modern, behind the
/// virtual IOMMU, on the multi-queue taps).
pub fn vport(i: usize) -> String {
    env(&format!("POLLNIC_VIRTIO_PORT{i}"))
}

/// The MAC of virtio-net port `i` (`POLLNIC_VIRTIO_PORTi_MAC`).
pub fn vport_mac(i: usize) -> [u8; 6] {
    mac_from_env(&format!("POLLNIC_VIRTIO_PORT{i}_MAC"))
}

fn mac_from_env(name: &str) -> [u8; 6] {
    let text = env(name);
    let bytes: Vec<u8> = text
        .split(':')
        .map(|b| u8::from_str_radix(b, 16).expect("a hex byte"))
        .collect();
    bytes.try_into().expect("six bytes")
}

/// target/<profile>/ of this test executable (target/<profile>/deps/<test>-<hash>).
pub fn profile_dir() -> PathBuf {
    let me = std::env::current_exe().unwrap();
    me.parent()
        .and_then(|deps| deps.parent())
        .unwrap()
        .to_path_buf()
}

/// An example of the pollnic-tools or pollnic package, built next to this
/// test executable (`cargo xtask test` builds them first):
/// target/<profile>/examples/<name>.
pub fn example_exe(name: &str) -> PathBuf {
    let exe = profile_dir().join("examples").join(name);
    assert!(
        exe.is_file(),
        "{} not built: run `cargo build -p pollnic-tools -p pollnic --examples` first (`cargo xtask test` does)",
        exe.display()
    );
    exe
}

/// The `pollnic` command (package pollnic-cli), built next to this test
/// executable (`cargo xtask test` builds it first): target/<profile>/pollnic.
pub fn pollnic_exe() -> String {
    let exe = profile_dir().join("pollnic");
    assert!(
        exe.is_file(),
        "{} not built: run `cargo build -p pollnic-cli` first (`cargo xtask test` does)",
        exe.display()
    );
    exe.to_string_lossy().into_owned()
}

/// The `cargo xtask` program (package xtask), built next to this test
/// executable by `cargo xtask` itself: target/<profile>/xtask.
pub fn xtask_exe() -> PathBuf {
    let exe = profile_dir().join("xtask");
    assert!(
        exe.is_file(),
        "{} not built: run `cargo build -p xtask` first (`cargo xtask test` does)",
        exe.display()
    );
    exe
}

/// Small rings so tests wrap them many times.
pub fn small_config() -> DeviceConfig {
    DeviceConfig::default()
        .with_rx_ring_size(64)
        .with_tx_ring_size(64)
        .with_mempool_size(512)
}

/// Send `n` test frames from `tx` to `rx` in lockstep bursts of up to 32,
/// with lengths from `len_of(seq)`, and check each arrives byte-identical and
/// in order. Returns the total bytes sent (frame bytes, no FCS).
pub fn transfer_and_verify(
    tx: &mut Device,
    rx: &mut Device,
    n: u64,
    len_of: impl Fn(u64) -> usize,
) -> u64 {
    let flow = Flow::between(tx.mac(), rx.mac());
    let (tx, rx) = (tx.queue(0), rx.queue(0));
    let mut seq = 0u64;
    let mut next_rx = 0u64;
    let mut bytes = 0u64;
    let mut pending: Vec<Packet> = Vec::with_capacity(32);
    let mut got: Vec<Packet> = Vec::with_capacity(64);
    while next_rx < n {
        while pending.len() < 32 && seq < n {
            let mut p = tx.mempool().alloc().expect("tx mempool has buffers");
            let len = len_of(seq);
            p.set_len(len).unwrap();
            assert!(frame::write(p.data_mut(), &flow, seq, seq));
            bytes += len as u64;
            pending.push(p);
            seq += 1;
        }
        let burst_end = seq;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !pending.is_empty() {
            tx.tx_burst(&mut pending);
            assert!(Instant::now() < deadline, "TX ring stuck");
        }
        while next_rx < burst_end {
            assert!(
                Instant::now() < deadline,
                "frames {next_rx}..{burst_end} never arrived"
            );
            rx.rx_burst(&mut got, 64);
            for p in got.drain(..) {
                let len = len_of(next_rx);
                let want = frame::expected(len, &flow, next_rx, next_rx);
                assert_eq!(p.len(), len, "frame {next_rx}: length");
                assert!(p.data() == &want[..], "frame {next_rx}: bytes differ");
                next_rx += 1;
            }
        }
    }
    assert!(tx.flush_tx(Duration::from_secs(5)), "TX ring did not drain");
    // Nothing extra arrives afterwards (no duplicates).
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(rx.rx_burst(&mut got, 64), 0, "unexpected extra frames");
    bytes
}

pub mod compare_page;
pub mod tso;

/// TCP and UDP test frames over IPv4 and IPv6 and an independent check of
/// their L4 checksums (RFC 768, RFC 793, RFC 8200 §8.1), for the checksum
/// offload tests on the software model and in the guest.
pub mod l4 {
    /// An Ethernet frame from `src` to `dst` carrying TCP (6) or UDP (17) over IPv4 or
    /// IPv6 with `payload`, its L4 checksum field 0x0000 and the IPv4 header
    /// checksum filled.
    pub fn l4_frame(dst: [u8; 6], src: [u8; 6], v6: bool, proto: u8, payload: &[u8]) -> Vec<u8> {
        let l4len = if proto == 6 { 20 } else { 8 } + payload.len();
        let mut f = Vec::new();
        f.extend_from_slice(&dst);
        f.extend_from_slice(&src);
        if v6 {
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
            f.extend_from_slice(&(l4len as u16).to_be_bytes());
            f.extend_from_slice(&[proto, 64]);
            f.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            f.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        } else {
            f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
            f.extend_from_slice(&((20 + l4len) as u16).to_be_bytes());
            f.extend_from_slice(&[0, 1, 0x40, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
            let c = !fold(sum(&f[14..34]));
            f[24..26].copy_from_slice(&c.to_be_bytes());
        }
        f.extend_from_slice(&[0x30, 0x39, 0x00, 0x35]);
        if proto == 6 {
            f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 5 << 4, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
        } else {
            f.extend_from_slice(&(l4len as u16).to_be_bytes());
            f.extend_from_slice(&[0, 0]);
        }
        f.extend_from_slice(payload);
        f
    }

    /// Ones' complement sum of big-endian 16-bit words, not folded.
    pub fn sum(b: &[u8]) -> u64 {
        b.chunks(2)
            .map(|c| (c[0] as u64) << 8 | *c.get(1).unwrap_or(&0) as u64)
            .sum()
    }

    /// `s` folded to 16 bits.
    pub fn fold(mut s: u64) -> u16 {
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    }

    /// Offset of the L4 header and of its checksum field in an [`l4_frame`].
    pub fn l4_at(f: &[u8]) -> (usize, usize) {
        let (start, proto) = if f[12] == 0x86 {
            (54, f[20])
        } else {
            (34, f[23])
        };
        (start, start + if proto == 6 { 16 } else { 6 })
    }

    /// Whether the frame's TCP or UDP checksum verifies over the pseudo-header
    /// (RFC 793, RFC 768, RFC 8200 §8.1), a UDP one not being 0 ("none").
    pub fn l4_checksum_ok(f: &[u8]) -> bool {
        let (start, at) = l4_at(f);
        let (addrs, proto) = if f[12] == 0x86 {
            (&f[22..54], f[20])
        } else {
            (&f[26..34], f[23])
        };
        let pseudo = sum(addrs) + proto as u64 + (f.len() - start) as u64;
        fold(sum(&f[start..]) + pseudo) == 0xffff && f[at..at + 2] != [0, 0]
    }
}

/// README.md and every page of docs/, as doc-test inputs: their Rust blocks
/// are compiled by `cargo test` (see build.rs).
#[cfg(doctest)]
pub mod doc_pages {
    include!(concat!(env!("OUT_DIR"), "/doc_pages.rs"));
}
