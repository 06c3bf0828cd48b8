//! RSS on QEMU's igb with 2 queues (guest with 2 vCPUs): flows land on the
//! queue the software Toeplitz hash and redirection table predict, with the
//! same hash in the descriptor; nothing is lost or duplicated; a new
//! redirection table moves flows at runtime; a symmetric key keeps both
//! directions of a flow on one queue. Run inside the guest by `cargo xtask test`.

use pollnic::{Device, DeviceConfig, Packet};
use pollnic_hw::rss::{queue_for, Reta, SYMMETRIC_KEY};
use pollnic_tests::*;
use pollnic_tools::frame::{self, Flow};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A frame as received: queue, parsed info, hash from the descriptor.
struct Seen {
    queue: u16,
    flow: Flow,
    seq: u64,
    hash: u32,
}

fn rx_config(key: [u8; 40]) -> DeviceConfig {
    small_config().with_queues(2).with_rss_key(key)
}

/// Send one 60-byte frame per entry of `flows` (seq = index) and collect them
/// from every RX queue of `rx`.
fn send_and_collect(tx: &mut Device, rx: &mut Device, flows: &[Flow]) -> Vec<Seen> {
    let mut seen = Vec::new();
    let mut got: Vec<Packet> = Vec::with_capacity(64);
    for chunk_start in (0..flows.len()).step_by(32) {
        let chunk = &flows[chunk_start..flows.len().min(chunk_start + 32)];
        let mut pending: Vec<Packet> = chunk
            .iter()
            .enumerate()
            .map(|(k, f)| {
                let mut p = tx.mempool().alloc().expect("buffer");
                p.set_len(60).unwrap();
                assert!(frame::write(p.data_mut(), f, (chunk_start + k) as u64, 0));
                p
            })
            .collect();
        while !pending.is_empty() {
            tx.queue(0).tx_burst(&mut pending);
        }
        let want = chunk_start + chunk.len();
        let deadline = Instant::now() + Duration::from_secs(10);
        while seen.len() < want {
            assert!(
                Instant::now() < deadline,
                "only {} of {want} frames arrived",
                seen.len()
            );
            for q in 0..rx.queue_count() {
                rx.queue(q).rx_burst(&mut got, 64);
                for p in got.drain(..) {
                    let info = frame::parse(p.data()).expect("a test frame");
                    seen.push(Seen {
                        queue: q,
                        flow: info.flow,
                        seq: info.seq,
                        hash: p.rss_hash(),
                    });
                }
            }
        }
    }
    std::thread::sleep(Duration::from_millis(50));
    for q in 0..rx.queue_count() {
        assert_eq!(
            rx.queue(q).rx_burst(&mut got, 64),
            0,
            "extra frames on queue {q}"
        );
    }
    seen
}

/// Check every frame against the software prediction; returns frames per queue.
fn check_predictions(rx: &Device, flows: &[Flow], seen: &[Seen]) -> [usize; 2] {
    let hasher = rx.rss_hasher();
    let mut per_queue = [0usize; 2];
    let mut count: HashMap<u64, usize> = HashMap::new();
    for s in seen {
        *count.entry(s.seq).or_default() += 1;
        assert_eq!(
            s.flow, flows[s.seq as usize],
            "frame {} carries the wrong flow",
            s.seq
        );
        let (hash, queue) = queue_for(&hasher, rx.reta(), &s.flow.rss_key());
        assert_eq!(
            s.hash, hash,
            "frame {}: descriptor hash vs software Toeplitz",
            s.seq
        );
        assert_eq!(
            s.queue, queue,
            "frame {} (hash {hash:#010x}) on queue {} but RETA says {queue}",
            s.seq, s.queue
        );
        per_queue[s.queue as usize] += 1;
    }
    assert_eq!(count.len(), flows.len(), "lost frames");
    assert!(count.values().all(|&c| c == 1), "duplicated frames");
    per_queue
}

fn flows(tx: &Device, rx: &Device, n: u32) -> Vec<Flow> {
    (0..n).map(|i| Flow::nth(tx.mac(), rx.mac(), i)).collect()
}

#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn flows_land_on_the_predicted_queue_with_the_software_hash() {
    let mut tx = Device::open(port(0), &small_config()).unwrap();
    let mut rx = Device::open(port(1), &rx_config(pollnic_hw::rss::MICROSOFT_KEY)).unwrap();
    assert_eq!(rx.queue_count(), 2);
    // 96 distinct flows, each sent twice.
    let base = flows(&tx, &rx, 96);
    let all: Vec<Flow> = base.iter().chain(base.iter()).copied().collect();
    let seen = send_and_collect(&mut tx, &mut rx, &all);
    let per_queue = check_predictions(&rx, &all, &seen);
    assert!(
        per_queue[0] > 0 && per_queue[1] > 0,
        "both queues must get traffic: {per_queue:?}"
    );
    let c = rx.counters();
    assert_eq!(
        c[0].snapshot().rx_packets + c[1].snapshot().rx_packets,
        all.len() as u64
    );
}

#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn a_new_redirection_table_moves_flows_at_runtime() {
    let mut tx = Device::open(port(0), &small_config()).unwrap();
    let mut rx = Device::open(port(1), &rx_config(pollnic_hw::rss::MICROSOFT_KEY)).unwrap();
    let fl = flows(&tx, &rx, 64);
    let before = send_and_collect(&mut tx, &mut rx, &fl);
    check_predictions(&rx, &fl, &before);
    // Swap the two queues in every entry: each flow must move.
    let swapped = Reta(std::array::from_fn(|i| 1 - rx.reta().0[i]));
    rx.set_reta(swapped).unwrap();
    let after = send_and_collect(&mut tx, &mut rx, &fl);
    check_predictions(&rx, &fl, &after);
    let q_before: HashMap<u64, u16> = before.iter().map(|s| (s.seq, s.queue)).collect();
    for s in &after {
        assert_ne!(q_before[&s.seq], s.queue, "flow {} did not move", s.seq);
    }
    // Everything to queue 1.
    rx.set_reta(Reta([1; 128])).unwrap();
    let all_one = send_and_collect(&mut tx, &mut rx, &fl);
    assert!(all_one.iter().all(|s| s.queue == 1));
    assert!(
        rx.set_reta(Reta([2; 128])).is_err(),
        "queue 2 does not exist"
    );
}

#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn symmetric_key_puts_both_directions_on_one_queue() {
    let mut tx = Device::open(port(0), &small_config()).unwrap();
    let mut rx = Device::open(port(1), &rx_config(SYMMETRIC_KEY)).unwrap();
    let fwd = flows(&tx, &rx, 64);
    let both: Vec<Flow> = fwd.iter().flat_map(|f| [*f, f.reversed()]).collect();
    let seen = send_and_collect(&mut tx, &mut rx, &both);
    check_predictions(&rx, &both, &seen);
    let by_seq: HashMap<u64, &Seen> = seen.iter().map(|s| (s.seq, s)).collect();
    let mut per_queue = [0; 2];
    for i in 0..fwd.len() as u64 {
        let (a, b) = (by_seq[&(2 * i)], by_seq[&(2 * i + 1)]);
        assert_eq!(a.hash, b.hash, "flow {i}: both directions hash alike");
        assert_eq!(a.queue, b.queue, "flow {i}: both directions on one queue");
        per_queue[a.queue as usize] += 1;
    }
    assert!(
        per_queue[0] > 0 && per_queue[1] > 0,
        "symmetric key still spreads flows: {per_queue:?}"
    );
}
