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

/// README.md and every page of docs/, as doc-test inputs: their Rust blocks
/// are compiled by `cargo test` (see build.rs).
#[cfg(doctest)]
pub mod doc_pages {
    include!(concat!(env!("OUT_DIR"), "/doc_pages.rs"));
}
