//! Per-queue MSI-X on QEMU's igb (guest with 2 vCPUs): an idle adaptive
//! queue sleeps on its interrupt and uses under 5 % of a core; no frame is
//! lost when traffic resumes after idling, at a rate busy-poll takes in the
//! same test; each queue's frames wake only that queue's thread (IVAR routes
//! queue q's cause to vector q); and the interrupt count falls as the
//! throttle (EITR, rx-usecs) rises at a fixed offered rate, changed at run
//! time. Run inside the guest by `cargo xtask test`.

use pollnic::stats::IrqStats;
use pollnic::{run_pinned, Device, DeviceConfig, Packet, RxMode};
use pollnic_hw::rss::queue_for;
use pollnic_tests::*;
use pollnic_tools::cputime::thread_cpu_ns;
use pollnic_tools::frame::{self, Flow};
use std::sync::atomic::{AtomicU32, Ordering::*};
use std::time::{Duration, Instant};

fn rx_config(queues: u16) -> DeviceConfig {
    DeviceConfig::default()
        .with_queues(queues)
        .with_rx_ring_size(1024)
        .with_mempool_size(4096)
}

/// Send `n` frames of `flows` (round robin, seq from `seq0`) at `pps`, in
/// bursts of up to 8 paced by the clock.
fn send(tx: &mut Device, flows: &[Flow], seq0: u64, n: u64, pps: u64) {
    let start = Instant::now();
    let mut sent = 0u64;
    while sent < n {
        let due = ((start.elapsed().as_nanos() as u64 * pps) / 1_000_000_000).min(n);
        if due <= sent {
            std::hint::spin_loop();
            continue;
        }
        let k = (due - sent).min(8);
        let mut burst: Vec<Packet> = (0..k)
            .map(|i| {
                let seq = seq0 + sent + i;
                let mut p = tx.mempool().alloc().expect("TX buffer");
                p.set_len(60).unwrap();
                let f = &flows[(seq % flows.len() as u64) as usize];
                assert!(frame::write(p.data_mut(), f, seq, 0));
                p
            })
            .collect();
        while !burst.is_empty() {
            tx.queue(0).tx_burst(&mut burst);
        }
        sent += k;
    }
}

/// Flows that RSS puts on queue `q` of `rx`.
fn flows_to(tx: &Device, rx: &Device, q: u16, n: usize) -> Vec<Flow> {
    let h = rx.rss_hasher();
    (0..4096)
        .map(|i| Flow::nth(tx.mac(), rx.mac(), i))
        .filter(|f| queue_for(&h, rx.reta(), &f.rss_key()).1 == q)
        .take(n)
        .collect()
}

/// What a queue thread saw in one phase.
#[derive(Clone, Copy, Debug, Default)]
struct Phase {
    frames: u64,
    irq: IrqStats,
    cpu_ns: u64,
    wall: Duration,
}

/// A queue loop in phases: `phase` is raised by the caller's thread; at each
/// change the thread closes the phase it was in (frames, interrupt counts,
/// thread CPU time, wall time) and, if `usecs` has an entry for the new
/// phase, sets its throttle (EITR) there, at run time. Ends when `phase`
/// reaches `phases`.
fn phased(
    q: &mut pollnic::Queue,
    phase: &AtomicU32,
    phases: u32,
    usecs: &[u32],
    polled: &AtomicU32,
) -> Vec<Phase> {
    let mut out = Vec::new();
    let mut buf: Vec<Packet> = Vec::with_capacity(32);
    let mut cur = Phase::default();
    let (mut cpu0, mut t0, mut irq0) = (thread_cpu_ns(), Instant::now(), q.irq_stats());
    let mut at = 0;
    if let Some(&u) = usecs.first() {
        q.set_rx_usecs(u).unwrap();
    }
    polled.fetch_add(1, Release);
    loop {
        let n = q.rx_burst(&mut buf, 32);
        q.wait_rx(n);
        cur.frames += n as u64;
        q.free_bulk(&mut buf);
        let p = phase.load(Acquire);
        if p != at {
            let s = q.irq_stats();
            let mut d = IrqStats::default();
            d.sleeps = s.sleeps - irq0.sleeps;
            d.interrupts = s.interrupts - irq0.interrupts;
            d.timeouts = s.timeouts - irq0.timeouts;
            d.raced = s.raced - irq0.raced;
            cur.irq = d;
            cur.cpu_ns = thread_cpu_ns() - cpu0;
            cur.wall = t0.elapsed();
            out.push(std::mem::take(&mut cur));
            (cpu0, t0, irq0) = (thread_cpu_ns(), Instant::now(), s);
            at = p;
            if p >= phases {
                return out;
            }
            if let Some(&u) = usecs.get(p as usize) {
                q.set_rx_usecs(u).unwrap();
            }
        }
    }
}

/// Raise `phase` to `p`, then give the sleeping queues time to notice (a
/// sleep ends within the mode's 100 ms timeout).
fn next_phase(phase: &AtomicU32, p: u32) {
    phase.store(p, Release);
    std::thread::sleep(Duration::from_millis(250));
}

fn wait_polled(polled: &AtomicU32, n: u32) {
    while polled.load(Acquire) < n {
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn an_idle_adaptive_queue_sleeps_and_loses_nothing_when_traffic_resumes() {
    let mut tx = Device::open(port(0), &small_config()).unwrap();
    let mut rx = Device::open(port(1), &rx_config(1)).unwrap();
    let flows: Vec<Flow> = (0..16).map(|i| Flow::nth(tx.mac(), rx.mac(), i)).collect();
    let (n, pps) = (2000u64, 20_000u64);
    for (mode, idle) in [(RxMode::BusyPoll, false), (RxMode::adaptive(), true)] {
        let (phase, polled) = (AtomicU32::new(0), AtomicU32::new(0));
        let got = run_pinned(
            &mut rx,
            &[0],
            mode,
            |q| phased(q, &phase, 2, &[], &polled),
            || {
                wait_polled(&polled, 1);
                if idle {
                    // Phase 0: 2 s with nothing on the wire.
                    std::thread::sleep(Duration::from_secs(2));
                }
                next_phase(&phase, 1);
                send(&mut tx, &flows, 0, n, pps);
                std::thread::sleep(Duration::from_millis(500));
                next_phase(&phase, 2);
            },
        )
        .unwrap();
        let q = &got[0];
        if idle {
            let share = q[0].cpu_ns as f64 / q[0].wall.as_nanos() as f64;
            println!(
                "adaptive, idle: {:.1} % of a core over {:?}, {:?}",
                share * 100.0,
                q[0].wall,
                q[0].irq
            );
            assert!(q[0].wall >= Duration::from_secs(2), "idle phase too short");
            assert!(
                share < 0.05,
                "an idle adaptive queue used {:.1} % of a core over {:?} ({:?})",
                share * 100.0,
                q[0].wall,
                q[0].irq
            );
            assert!(q[0].irq.sleeps > 0, "it never slept: {:?}", q[0].irq);
        }
        println!(
            "{}: {} of {n} frames at {pps} pps, {:?}",
            mode.name(),
            q[1].frames,
            q[1].irq
        );
        assert_eq!(
            q[1].frames,
            n,
            "{}: frames lost when traffic resumed at {pps} pps ({:?})",
            mode.name(),
            q[1].irq
        );
        if idle {
            assert!(
                q[1].irq.interrupts > 0,
                "traffic resumed without an interrupt"
            );
        }
    }
}

#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn each_queues_frames_wake_only_that_queues_thread() {
    let mut tx = Device::open(port(0), &small_config()).unwrap();
    let mut rx = Device::open(port(1), &rx_config(2)).unwrap();
    let to = [flows_to(&tx, &rx, 0, 8), flows_to(&tx, &rx, 1, 8)];
    let (phase, polled) = (AtomicU32::new(0), AtomicU32::new(0));
    let each = 20u64;
    let got = run_pinned(
        &mut rx,
        &[0, 1],
        RxMode::interrupt(),
        |q| phased(q, &phase, 3, &[], &polled),
        || {
            wait_polled(&polled, 2);
            next_phase(&phase, 1);
            // Phase 1: frames for queue 0 only, one every 10 ms (each finds
            // its queue asleep); phase 2: the same for queue 1.
            for (k, fl) in to.iter().enumerate() {
                for i in 0..each {
                    send(&mut tx, &fl[i as usize % fl.len()..][..1], i, 1, 1_000_000);
                    std::thread::sleep(Duration::from_millis(10));
                }
                std::thread::sleep(Duration::from_millis(100));
                next_phase(&phase, k as u32 + 2);
            }
        },
    )
    .unwrap();
    for (k, want) in [0usize, 1].iter().enumerate() {
        let (mine, other) = (&got[*want][k + 1], &got[1 - *want][k + 1]);
        println!("frames for queue {want}: that queue {mine:?}, the other {other:?}");
        assert_eq!(mine.frames, each, "queue {want} got its frames");
        assert_eq!(other.frames, 0, "the other queue got none");
        assert!(
            mine.irq.interrupts >= each / 2,
            "queue {want}'s thread was woken by its interrupt: {:?}",
            mine.irq
        );
        assert_eq!(
            other.irq.interrupts,
            0,
            "queue {}'s thread was woken by queue {want}'s frames: the cause went to the wrong vector ({:?})",
            1 - want,
            other.irq
        );
    }
}

#[test]
#[ignore = "needs the QEMU igb testbed: run `cargo xtask test`"]
fn interrupts_fall_as_the_throttle_rises_at_a_fixed_rate() {
    let mut tx = Device::open(port(0), &small_config()).unwrap();
    let mut rx = Device::open(port(1), &rx_config(1)).unwrap();
    let flows: Vec<Flow> = (0..16).map(|i| Flow::nth(tx.mac(), rx.mac(), i)).collect();
    let usecs = [0u32, 250, 1000];
    let (n, pps) = (2000u64, 10_000u64);
    let (phase, polled) = (AtomicU32::new(0), AtomicU32::new(0));
    let got = run_pinned(
        &mut rx,
        &[0],
        RxMode::interrupt(),
        |q| phased(q, &phase, usecs.len() as u32, &usecs, &polled),
        || {
            wait_polled(&polled, 1);
            for (k, _) in usecs.iter().enumerate() {
                send(&mut tx, &flows, k as u64 * n, n, pps);
                std::thread::sleep(Duration::from_millis(300));
                next_phase(&phase, k as u32 + 1);
            }
        },
    )
    .unwrap();
    let q = &got[0];
    for (u, p) in usecs.iter().zip(q) {
        println!("rx-usecs {u}: {} frames, {:?}", p.frames, p.irq);
        assert_eq!(p.frames, n, "rx-usecs {u}: frames lost");
    }
    for w in q.windows(2) {
        assert!(
            w[1].irq.interrupts < w[0].irq.interrupts,
            "interrupts did not fall as rx-usecs rose: {:?}",
            q.iter().map(|p| p.irq.interrupts).collect::<Vec<_>>()
        );
    }
}
