//! Soak: loopback traffic for a while with everything that can go wrong over
//! time exercised together, then a check that nothing leaked and every count
//! agrees. Runs inside the QEMU guest: `cargo xtask test` runs a 60 s form,
//! `cargo xtask soak --minutes N` the long one (it sets POLLNIC_SOAK_SECONDS).
//!
//! During the run:
//! - port 0 sends test frames of mixed sizes (`frame::mixed_len`, 60..1514
//!   bytes) over 64 UDP flows at a paced rate, polling its counters every second;
//! - port 1 receives on 2 RSS queues, polled by one thread that also
//!   replaces the redirection table every few seconds (`Device::set_reta`)
//!   and reads its counters twice a second;
//! - every other received burst goes over a crossbeam channel to a thread
//!   that drops the packets there (their buffers return to port 1's pools
//!   from that thread); the others are freed on the receiving thread.
//!
//! At the end (each step a test failure when it does not hold):
//! - every frame that arrived is intact (length, header; the byte pattern of
//!   one in 16) and arrived once, on
//!   the queue the redirection table in force (or the one just replaced)
//!   names for its RSS hash;
//! - `tx_packets` (GPTC) equals what was sent, `rx_packets` (GPRC) what
//!   arrived; `tx_bytes`/`rx_bytes` (GOTC/GORC, octets with FCS) agree too,
//!   short by at most 0.01 % (see [`octets_agree`]: QEMU's igb loses the
//!   octets counted between the low and the high register read);
//! - sent − received is the loss, and a loss must be explained by the NIC:
//!   `rx_missed_errors` (MPC), `rx_no_buffer_count` (RNBC) or, on QEMU's igb
//!   that counts neither, `icr_rxo_events` (reads that found ICR.RXO set);
//! - after both devices are dropped every mempool is full again (all buffers
//!   on its free list, no reference but the test's handle);
//! - HugePages_Free is back to its value before the run, after the pools go;
//! - both ports open again and move 2,000 byte-checked frames.

use crossbeam_channel::{bounded, Receiver};
use pollnic::{Device, DeviceConfig, Mempool, Packet};
use pollnic_hw::rss::Reta;
use pollnic_tests::*;
use pollnic_tools::frame::{self, Flow};
use std::time::{Duration, Instant};

/// Offered rate in frames/s. The guest tests are debug builds running under
/// TCG: writing a test frame's byte pattern costs the sender tens of µs per
/// frame there (a first try at 10,000 frames/s sent 1,900/s and lost 42 % at
/// the receiver, which checked every byte of every frame). 2,000/s still wraps
/// each ring hundreds of times a minute.
const RATE: u64 = 2_000;
/// Every frame's length, sequence number and header are checked; the byte
/// pattern of one frame in this many (full checks of every frame are
/// `guest_igb`'s job, at lower counts).
const PATTERN_EVERY: u64 = 16;
/// How often the redirection table changes.
const RETA_EVERY: Duration = Duration::from_secs(3);
/// Flows (source address and port vary), spread by RSS.
const FLOWS: u32 = 64;

fn soak_seconds() -> u64 {
    match std::env::var("POLLNIC_SOAK_SECONDS") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("POLLNIC_SOAK_SECONDS={v:?} is not a number of seconds")),
        Err(_) => 60,
    }
}

/// `HugePages_Free` from /proc/meminfo (2 MiB pages).
fn hugepages_free() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").expect("reading /proc/meminfo");
    text.lines()
        .find_map(|l| l.strip_prefix("HugePages_Free:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("HugePages_Free in /proc/meminfo")
}

/// The redirection tables the soak cycles through (2 queues).
fn table(n: u64) -> Reta {
    let mut t = [0u8; 128];
    for (i, q) in t.iter_mut().enumerate() {
        *q = match n % 5 {
            0 => (i % 2) as u8,       // the default: alternate
            1 => 1,                   // everything on queue 1
            2 => (i < 64) as u8,      // halves, swapped
            3 => 0,                   // everything on queue 0
            _ => ((i / 3) % 2) as u8, // uneven stripes
        };
    }
    Reta(t)
}

/// What the sending thread reports.
struct Sent {
    frames: u64,
    /// Frame bytes without FCS.
    bytes: u64,
    /// `tx_packets`/`tx_bytes` after the last frame was sent.
    tx_packets: u64,
    tx_bytes: u64,
    stats_reads: u64,
    ring_full: u64,
    pool: Mempool,
}

fn send(mut tx: Device, dst: [u8; 6], seconds: u64) -> (Sent, Device) {
    let flows: Vec<Flow> = (0..FLOWS).map(|i| Flow::nth(tx.mac(), dst, i)).collect();
    let start = Instant::now();
    let end = start + Duration::from_secs(seconds);
    let mut base = start;
    let mut base_seq = 0u64;
    let (mut seq, mut bytes, mut stats_reads, mut ring_full) = (0u64, 0u64, 0u64, 0u64);
    let mut next_stats = start + Duration::from_secs(1);
    let mut pending: Vec<Packet> = Vec::with_capacity(32);
    while Instant::now() < end {
        let now = Instant::now();
        if now >= next_stats {
            let s = tx.stats();
            assert!(
                s.get("tx_packets").unwrap() <= seq,
                "GPTC ahead of what was sent"
            );
            stats_reads += 1;
            next_stats = now + Duration::from_secs(1);
        }
        // Pace: the frames due since `base`; after a stall, skip the missed
        // slots rather than send them at once.
        let due = base_seq + (now - base).as_micros() as u64 * RATE / 1_000_000;
        if due > seq + 256 {
            base = now;
            base_seq = seq;
        }
        let n = due.saturating_sub(seq).min(32) as usize;
        while pending.len() < n {
            let mut p = tx.mempool().alloc().expect("port 0's mempool ran dry");
            let len = frame::mixed_len(seq);
            p.set_len(len).unwrap();
            assert!(frame::write(
                p.data_mut(),
                &flows[(seq % FLOWS as u64) as usize],
                seq,
                0
            ));
            bytes += len as u64;
            seq += 1;
            pending.push(p);
        }
        if !pending.is_empty() {
            tx.queue(0).tx_burst(&mut pending);
            if !pending.is_empty() {
                ring_full += 1;
            }
        } else {
            std::thread::yield_now();
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !pending.is_empty() {
        tx.queue(0).tx_burst(&mut pending);
        assert!(Instant::now() < deadline, "TX ring stuck at the end");
    }
    assert!(
        tx.queue(0).flush_tx(Duration::from_secs(10)),
        "TX ring did not drain"
    );
    let s = tx.stats();
    let sent = Sent {
        frames: seq,
        bytes,
        tx_packets: s.get("tx_packets").unwrap(),
        tx_bytes: s.get("tx_bytes").unwrap(),
        stats_reads,
        ring_full,
        pool: tx.mempool().clone(),
    };
    (sent, tx)
}

/// The thread that drops what it is sent; returns how many packets it dropped.
fn dropper(rx: Receiver<Vec<Packet>>) -> u64 {
    let mut n = 0;
    for burst in rx {
        n += burst.len() as u64;
        drop(burst);
    }
    n
}

/// A 64-bit octet counter (FCS included) against the octets that really
/// went by. QEMU's igb clears both halves of GORC/GOTC when the high register
/// is read (`igb_mac_read_clr8` in hw/net/igb_core.c) and a low/high pair is
/// two MMIO reads, so the octets of a frame counted between the two reads
/// are lost to the total: the counter may fall short, never exceed. The first
/// 10-minute soak fell 10,562 bytes short of 908,315,684 (0.0012 %, about 13
/// frames in ~1,800 reads) with the frame counters exact. Allowed: 0.01 % or
/// eight full-size frames, whichever is more.
fn octets_agree(what: &str, counted: u64, actual: u64) {
    assert!(
        counted <= actual,
        "{what}: counter {counted} above the {actual} octets sent"
    );
    let short = actual - counted;
    let allowed = (actual / 10_000).max(8 * 1518);
    assert!(
        short <= allowed,
        "{what}: counter {counted} is {short} octets short of {actual} (allowed {allowed})"
    );
    if short > 0 {
        println!(
            "soak: {what} {short} octets short of {actual} ({:.5} %): frames counted between the \
             low and high register reads, which QEMU's igb clears together",
            short as f64 * 100.0 / actual as f64
        );
    }
}

#[test]
#[ignore = "needs the QEMU igb testbed: run with `cargo xtask test` or `cargo xtask soak`"]
fn soak_traffic_reta_and_cross_thread_drops_leave_nothing_behind() {
    let seconds = soak_seconds();
    let huge_before = hugepages_free();
    println!("soak: {seconds} s at {RATE} frames/s offered, mixed sizes, {FLOWS} flows, 2 RX queues, RETA every {RETA_EVERY:?}; HugePages_Free {huge_before}");
    let rx_cfg = DeviceConfig::default()
        .with_queues(2)
        .with_rx_ring_size(1024);
    let tx = Device::open(port(0), &DeviceConfig::default()).expect("open port 0");
    let mut rx = Device::open(port(1), &rx_cfg).expect("open port 1");
    let dst = rx.mac();
    let mut pools: Vec<Mempool> = (0..2).map(|q| rx.queue(q).mempool().clone()).collect();

    let (to_dropper, from_rx) = bounded::<Vec<Packet>>(64);
    let dropper = std::thread::spawn(move || dropper(from_rx));
    let sender = std::thread::spawn(move || send(tx, dst, seconds));

    let started = Instant::now();
    let mut tables = (table(0), table(0));
    rx.set_reta(tables.1.clone()).unwrap();
    let mut reta_changes = 0u64;
    let mut next_reta = started + RETA_EVERY;
    let mut next_stats = started + Duration::from_millis(500);
    let mut rx_stats_reads = 0u64;
    let mut seen = vec![false; (seconds as usize + 30) * RATE as usize];
    let (mut received, mut rx_bytes, mut per_queue, mut sent_away) = (0u64, 0u64, [0u64; 2], 0u64);
    let mut burst: Vec<Packet> = Vec::with_capacity(64);
    let mut bursts = 0u64;
    let mut quiet_since: Option<Instant> = None;
    let mut sent: Option<(Sent, Device)> = None;
    let mut sender = Some(sender);
    loop {
        let mut got_any = false;
        for q in 0..2u16 {
            if rx.queue(q).rx_burst(&mut burst, 64) == 0 {
                continue;
            }
            got_any = true;
            bursts += 1;
            for p in &burst {
                let info = frame::parse(p.data()).expect("a test frame");
                let seq = info.seq;
                assert_eq!(p.len(), frame::mixed_len(seq), "frame {seq}: length");
                assert!(
                    seq % PATTERN_EVERY != 0 || frame::pattern_ok(p.data(), seq),
                    "frame {seq}: bytes"
                );
                let slot = seen
                    .get_mut(seq as usize)
                    .expect("sequence number in range");
                assert!(!*slot, "frame {seq} arrived twice");
                *slot = true;
                let i = (p.rss_hash() & 127) as usize;
                assert!(
                    tables.1 .0[i] as u16 == q || tables.0 .0[i] as u16 == q,
                    "frame {seq} (RSS hash {:#x}, RETA[{i}]) on queue {q}: the table in force says {}, the one before {}",
                    p.rss_hash(),
                    tables.1 .0[i],
                    tables.0 .0[i]
                );
                received += 1;
                rx_bytes += p.len() as u64;
                per_queue[q as usize] += 1;
            }
            if bursts % 2 == 0 {
                sent_away += burst.len() as u64;
                let away = std::mem::replace(&mut burst, Vec::with_capacity(64));
                to_dropper.send(away).expect("the dropping thread is gone");
            } else {
                rx.queue(q).free_bulk(&mut burst);
            }
        }
        let now = Instant::now();
        if now >= next_stats {
            let s = rx.stats();
            assert!(
                s.get("rx_packets").unwrap() >= received,
                "GPRC behind what arrived"
            );
            rx_stats_reads += 1;
            next_stats = now + Duration::from_millis(500);
        }
        if sent.is_none() {
            if now >= next_reta {
                reta_changes += 1;
                tables = (tables.1, table(reta_changes));
                rx.set_reta(tables.1.clone()).unwrap();
                next_reta = now + RETA_EVERY;
            }
            if sender.as_ref().unwrap().is_finished() {
                sent = Some(sender.take().unwrap().join().expect("the sender panicked"));
            }
            assert!(
                now < started + Duration::from_secs(seconds + 60),
                "the sender did not finish"
            );
        } else if got_any {
            quiet_since = None;
        } else {
            // After the sender is done: stop once nothing arrived for 1 s.
            let since = *quiet_since.get_or_insert(now);
            if now - since > Duration::from_secs(1) {
                break;
            }
        }
    }
    drop(to_dropper);
    let dropped_away = dropper.join().expect("the dropping thread panicked");
    assert_eq!(dropped_away, sent_away);
    let (sent, tx) = sent.unwrap();
    let s = rx.stats();
    let get = |n: &str| s.get(n).unwrap_or_else(|| panic!("no counter {n}"));
    let lost = sent.frames - received;
    let (mpc, rnbc, rxo) = (
        get("rx_missed_errors"),
        get("rx_no_buffer_count"),
        s.rx_overrun_reads().expect("igb counts ICR.RXO reads"),
    );
    println!(
        "soak: sent {} frames ({} bytes) in {:.0} s; received {received} (queue 0 {}, queue 1 {}), \
         {sent_away} of them dropped on another thread; lost {lost} ({:.4} %)",
        sent.frames,
        sent.bytes,
        started.elapsed().as_secs_f64(),
        per_queue[0],
        per_queue[1],
        lost as f64 * 100.0 / sent.frames.max(1) as f64
    );
    println!(
        "soak: port 0 tx_packets {} tx_bytes {}; port 1 rx_packets {} rx_bytes {}, \
         rx_missed_errors {mpc}, rx_no_buffer_count {rnbc}, icr_rxo_events {rxo}; \
         {reta_changes} RETA changes; counters read {} times (port 0) and {rx_stats_reads} (port 1); \
         TX ring full {} times",
        sent.tx_packets,
        sent.tx_bytes,
        get("rx_packets"),
        get("rx_bytes"),
        sent.stats_reads,
        sent.ring_full
    );
    assert!(
        sent.frames >= seconds * RATE / 4,
        "only {} frames sent in {seconds} s",
        sent.frames
    );
    assert!(
        per_queue[0] > 0 && per_queue[1] > 0,
        "both RSS queues carried traffic"
    );
    assert!(reta_changes >= seconds / RETA_EVERY.as_secs() - 1);
    assert_eq!(
        sent.tx_packets, sent.frames,
        "tx_packets (GPTC) = frames sent"
    );
    assert_eq!(
        get("rx_packets"),
        received,
        "rx_packets (GPRC) = frames received"
    );
    octets_agree(
        "tx_bytes (GOTC)",
        sent.tx_bytes,
        sent.bytes + 4 * sent.frames,
    );
    octets_agree("rx_bytes (GORC)", get("rx_bytes"), rx_bytes + 4 * received);
    if lost > 0 {
        assert!(
            mpc + rnbc + rxo > 0,
            "{lost} frames lost with no trace in rx_missed_errors, rx_no_buffer_count or ICR.RXO"
        );
        println!(
            "soak: the {lost} lost frames were dropped at a full RX ring: QEMU's igb counts no \
             MPC/RNBC, and ICR.RXO was seen in {rxo} counter reads"
        );
    }
    assert!(
        lost <= sent.frames / 100,
        "lost more than 1 % ({lost} of {})",
        sent.frames
    );

    // Nothing leaked: every buffer back on its pool's free list once the
    // devices (rings, caches) are gone, and the pools' hugepages freed.
    pools.push(sent.pool);
    drop(tx);
    drop(rx);
    for (i, pool) in pools.iter().enumerate() {
        assert_eq!(
            pool.free_count(),
            pool.capacity() as usize,
            "mempool {i}: {} of {} buffers back",
            pool.free_count(),
            pool.capacity()
        );
        assert_eq!(
            pool.references(),
            1,
            "mempool {i}: only the test's handle is left"
        );
    }
    println!("soak: all {} mempools full again", pools.len());
    pools.clear();
    let huge_after = hugepages_free();
    assert_eq!(
        huge_after, huge_before,
        "HugePages_Free back to its value before the run"
    );

    // The ports open again and move traffic.
    let mut tx = Device::open(port(0), &small_config()).expect("re-open port 0");
    let mut rx = Device::open(port(1), &small_config()).expect("re-open port 1");
    transfer_and_verify(&mut tx, &mut rx, 2000, frame::mixed_len);
    drop((tx, rx));
    assert_eq!(
        hugepages_free(),
        huge_before,
        "HugePages_Free after the re-open"
    );
    println!(
        "soak: re-opened both ports and moved 2000 frames; HugePages_Free {huge_after} = before"
    );
}
