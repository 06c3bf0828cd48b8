//! Per-queue MSI-X on the software 82576 (`pollnic_model::igb`) and 82599
//! (`pollnic_model::ixgbe`): the driver's IVAR routing, EIMS/EIMC masking
//! and EITR throttle, checked by models that signal one eventfd per vector
//! as the IVAR entries say. A wrong mapping wakes the wrong queue's thread
//! and fails here; a wrong EITR encoding reads back as another interval.

use pollnic::lowlevel::io::Regs;
use pollnic::{run_pinned, Device, DeviceConfig, Moderation, RxMode};
use pollnic_model::igb::Soft82576;
use pollnic_model::ixgbe::Soft82599;
use pollnic_model::RxOutcome;
use pollnic_tools::frame::{self, Flow};
use std::time::{Duration, Instant};

/// What the tests need of a model.
trait Model: Sync {
    const EIMS: u32;
    const EIMC: u32;
    const EICR: u32;
    const EIAC: u32;
    const GPIE: u32;
    const MSIX_MODE: u32;
    /// The largest rx-usecs the family's EITR holds.
    const MAX_USECS: u32;
    fn open_dev(&self, cfg: &DeviceConfig) -> Device;
    fn rx(&self, frame: &[u8]) -> RxOutcome;
    fn fired(&self) -> Vec<u64>;
    fn interval(&self, v: u16) -> Duration;
    fn write(&self, off: u32, val: u32);
    fn read_stored(&self, off: u32) -> u32;
    fn time(&self);
    fn broken_rules(&self) -> Vec<String>;
}

impl Model for Soft82576 {
    const EIMS: u32 = pollnic_hw::igb::regs::EIMS;
    const EIMC: u32 = pollnic_hw::igb::regs::EIMC;
    const EICR: u32 = pollnic_hw::igb::regs::EICR;
    const EIAC: u32 = pollnic_hw::igb::regs::EIAC;
    const GPIE: u32 = pollnic_hw::igb::irq::GPIE;
    const MSIX_MODE: u32 = pollnic_hw::igb::irq::GPIE_MSIX_MODE;
    const MAX_USECS: u32 = pollnic_hw::igb::irq::EITR_MAX_USECS;
    fn open_dev(&self, cfg: &DeviceConfig) -> Device {
        self.open(cfg).unwrap()
    }
    fn rx(&self, frame: &[u8]) -> RxOutcome {
        self.receive(frame)
    }
    fn fired(&self) -> Vec<u64> {
        self.msix_fired()
    }
    fn interval(&self, v: u16) -> Duration {
        self.eitr_interval(v)
    }
    fn write(&self, off: u32, val: u32) {
        self.regs().write32(off, val)
    }
    fn read_stored(&self, off: u32) -> u32 {
        self.peek(off)
    }
    fn time(&self) {
        self.tick()
    }
    fn broken_rules(&self) -> Vec<String> {
        self.violations()
    }
}

impl Model for Soft82599 {
    const EIMS: u32 = pollnic_hw::ixgbe::regs::EIMS;
    const EIMC: u32 = pollnic_hw::ixgbe::regs::EIMC;
    const EICR: u32 = pollnic_hw::ixgbe::regs::EICR;
    const EIAC: u32 = pollnic_hw::ixgbe::regs::EIAC;
    const GPIE: u32 = pollnic_hw::ixgbe::regs::GPIE;
    const MSIX_MODE: u32 = pollnic_hw::ixgbe::irq::GPIE_MSIX_MODE;
    const MAX_USECS: u32 = pollnic_hw::ixgbe::irq::EITR_MAX_USECS;
    fn open_dev(&self, cfg: &DeviceConfig) -> Device {
        self.open(cfg).unwrap()
    }
    fn rx(&self, frame: &[u8]) -> RxOutcome {
        self.receive(frame)
    }
    fn fired(&self) -> Vec<u64> {
        self.msix_fired()
    }
    fn interval(&self, v: u16) -> Duration {
        self.eitr_interval(v)
    }
    fn write(&self, off: u32, val: u32) {
        self.regs().write32(off, val)
    }
    fn read_stored(&self, off: u32) -> u32 {
        self.peek(off)
    }
    fn time(&self) {
        self.tick()
    }
    fn broken_rules(&self) -> Vec<String> {
        self.violations()
    }
}

fn config(queues: u16) -> DeviceConfig {
    DeviceConfig::default()
        .with_rx_ring_size(64)
        .with_tx_ring_size(64)
        .with_mempool_size(1024)
        .with_queues(queues)
        .with_link_timeout(Duration::from_secs(2))
}

/// A 60-byte test frame of `flow`.
fn bytes(flow: &Flow, seq: u64) -> Vec<u8> {
    let mut b = vec![0u8; 60];
    assert!(frame::write(&mut b, flow, seq, 0));
    b
}

/// For each queue of `dev`, a flow RSS puts there.
fn flow_per_queue(dev: &Device) -> Vec<Flow> {
    let h = dev.rss_hasher();
    (0..dev.queue_count())
        .map(|q| {
            (0..4096)
                .map(|i| Flow::nth([2, 0, 0, 0, 0, 1], dev.mac(), i))
                .find(|f| pollnic_hw::rss::queue_for(&h, dev.reta(), &f.rss_key()).1 == q)
                .expect("a flow for every queue")
        })
        .collect()
}

/// Four queues in interrupt mode, each on its own thread; two rounds of
/// one frame per queue, each sent while its queue sleeps: every queue must
/// get its frames, woken by its own vector (never by its timeout), and the
/// model must have fired exactly that vector.
fn each_queues_frame_wakes_only_that_queues_thread<M: Model>(m: &M) {
    let mut dev = m.open_dev(&config(4));
    let flows = flow_per_queue(&dev);
    let core = core_affinity::get_core_ids().unwrap()[0].id;
    let mode = RxMode::Interrupt {
        timeout: Duration::from_secs(3),
    };
    let got = run_pinned(
        &mut dev,
        &[core],
        mode,
        |q| {
            let mut buf = Vec::new();
            let mut n = 0;
            let deadline = Instant::now() + Duration::from_secs(10);
            while n < 2 && Instant::now() < deadline {
                let k = q.rx_burst(&mut buf, 32);
                n += k;
                buf.clear();
                q.wait_rx(k);
            }
            (n, q.irq_stats())
        },
        || {
            for round in 0..2 {
                for (q, f) in flows.iter().enumerate() {
                    std::thread::sleep(Duration::from_millis(100));
                    let out = m.rx(&bytes(f, round));
                    assert!(
                        matches!(out, RxOutcome::Delivered { queue, .. } if queue as usize == q),
                        "{out:?}"
                    );
                }
            }
        },
    )
    .unwrap();
    let fired = m.fired();
    for (q, (n, irq)) in got.iter().enumerate() {
        assert_eq!(*n, 2, "queue {q} got its two frames ({irq:?})");
        assert_eq!(
            fired[q], 2,
            "vector {q} fired for queue {q}'s frames: {fired:?}"
        );
        assert!(
            irq.interrupts >= 2 && irq.timeouts == 0,
            "queue {q}'s thread was woken by its own interrupt, not its timeout: {irq:?}, vectors fired {fired:?}"
        );
    }
    assert!(m.broken_rules().is_empty(), "{:?}", m.broken_rules());
}

/// MSI-X set up at open (GPIE, no EIAC auto-clear, every vector masked),
/// EITR holding rx-usecs at open and after a run-time change, and
/// throttling: a second frame within the interval, after the queue cleared
/// the first one's cause (as it does when it arms), is held until it has
/// passed; frames while the cause is still set raise no more messages; a
/// masked vector's cause waits and fires on unmask.
fn eitr_holds_rx_usecs_and_throttles_the_vector<M: Model>(m: &M) {
    let cfg = config(1)
        .with_rx_mode(RxMode::interrupt())
        .with_rx_usecs(250);
    let mut dev = m.open_dev(&cfg);
    assert_ne!(m.read_stored(M::GPIE) & M::MSIX_MODE, 0, "MSI-X mode");
    assert_eq!(
        m.read_stored(M::EIAC),
        0,
        "no auto-clear: a set cause holds back further messages until the queue clears it"
    );
    assert_eq!(m.read_stored(M::EIMS), 0, "masked until the queue arms it");
    assert_eq!(m.interval(0), Duration::from_micros(250));
    dev.set_rx_usecs(M::MAX_USECS).unwrap();
    assert_eq!(m.interval(0), Duration::from_micros(M::MAX_USECS as u64));
    assert!(dev.set_rx_usecs(M::MAX_USECS + 1).is_err(), "beyond EITR");
    dev.queue(0).set_rx_usecs(1000).unwrap();
    let iv = m.interval(0);
    assert_eq!(iv, Duration::from_micros(1000));

    // Two frames back to back: the first fires at once, the second is held
    // until the interval has passed. On a loaded host the two may be more
    // than the interval apart: then try again. Non-IP frames (no RSS hash
    // to compute, queue 0) keep the model's work per frame small.
    let mac = dev.mac();
    let raw = |_seq: u64| {
        let mut b = vec![0u8; 60];
        b[..6].copy_from_slice(&mac);
        b[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        b[12..14].copy_from_slice(&[0x88, 0xb5]);
        b
    };
    m.write(M::EIMS, 1);
    let mut seq = 0;
    let mut checked = false;
    for _ in 0..20 {
        std::thread::sleep(iv + Duration::from_millis(2));
        m.time();
        let f0 = m.fired()[0];
        let t = Instant::now();
        m.rx(&raw(seq));
        let f1 = m.fired()[0];
        m.write(M::EICR, 1); // the queue re-arming: cause cleared
        m.rx(&raw(seq + 1));
        let f2 = m.fired()[0];
        seq += 2;
        if t.elapsed() >= iv {
            continue;
        }
        assert_eq!(f1, f0 + 1, "fires at once");
        assert_eq!(f2, f1, "held by the throttle");
        std::thread::sleep(iv + Duration::from_millis(2));
        m.time();
        assert_eq!(m.fired()[0], f2 + 1, "fired once the interval passed");
        checked = true;
        break;
    }
    assert!(checked, "two frames never came within {iv:?} of each other");
    dev.set_rx_usecs(0).unwrap();
    // Unthrottled and armed: the first frame fires, the next ones (before
    // the woken queue masks the vector) find the cause set and do not.
    m.write(M::EICR, 1);
    let f = m.fired()[0];
    for k in 0..3 {
        m.rx(&raw(seq + k));
    }
    seq += 3;
    assert_eq!(
        m.fired()[0],
        f + 1,
        "three frames on an armed vector: one message, the cause stays set"
    );
    m.write(M::EIMC, 1);
    m.write(M::EICR, 1);
    let f = m.fired()[0];
    m.rx(&raw(seq));
    assert_eq!(m.fired()[0], f, "masked");
    m.write(M::EIMS, 1);
    assert_eq!(m.fired()[0], f + 1, "fired on unmask");
    assert!(m.broken_rules().is_empty(), "{:?}", m.broken_rules());
}

/// Dynamic moderation (igb's classes, Linux `igb_update_itr`): the vector
/// starts at `low_latency` (49 µs); a sleep after ten full-size frames moves
/// it to `bulk_latency` (245 µs) or the latency cap, one after a lone small
/// frame brings it back; EITR is written as the class says.
fn dynamic_moderation_follows_the_traffic<M: Model>(m: &M, cap: u32, step: u32) {
    let mode = RxMode::Interrupt {
        timeout: Duration::from_millis(1),
    };
    let cfg = config(1)
        .with_rx_mode(mode)
        .with_moderation(Moderation::dynamic(cap));
    let mut dev = m.open_dev(&cfg);
    // The EITR's step: 1 µs on igb, 2 µs on the 82599 (rounded down).
    let us = |u: u32| Duration::from_micros((u / step * step) as u64);
    assert_eq!(m.interval(0), us(49.min(cap)), "low_latency at open");
    assert_eq!(dev.queue(0).irq_stats().itr_usecs, 49.min(cap));
    let mac = dev.mac();
    let raw = |len: usize| {
        let mut b = vec![0u8; len];
        b[..6].copy_from_slice(&mac);
        b[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        b[12..14].copy_from_slice(&[0x88, 0xb5]);
        b
    };
    let q = dev.queue(0);
    let mut buf = Vec::new();
    let mut drain = |q: &mut pollnic::Queue| {
        let mut got = 0;
        loop {
            let k = q.rx_burst(&mut buf, 32);
            got += k;
            buf.clear();
            if k == 0 {
                // The empty poll: moderation moves, then a (short) sleep.
                q.wait_rx(0);
                return got;
            }
        }
    };
    for _ in 0..10 {
        assert!(matches!(m.rx(&raw(1514)), RxOutcome::Delivered { .. }));
    }
    assert_eq!(drain(q), 10);
    assert_eq!(
        m.interval(0),
        us(245.min(cap)),
        "bulk_latency after 10 x 1514 B"
    );
    assert_eq!(q.irq_stats().itr_usecs, 245.min(cap));
    assert!(matches!(m.rx(&raw(60)), RxOutcome::Delivered { .. }));
    assert_eq!(drain(q), 1);
    assert_eq!(
        m.interval(0),
        us(49.min(cap)),
        "low_latency after one small frame"
    );
    // Fixed again: as rx-usecs.
    q.set_moderation(Moderation::Fixed { usecs: 30 }).unwrap();
    assert_eq!(m.interval(0), us(30));
    assert!(m.broken_rules().is_empty(), "{:?}", m.broken_rules());
}

#[test]
fn igb_dynamic_moderation_follows_the_traffic() {
    dynamic_moderation_follows_the_traffic(&Soft82576::default(), 250, 1);
    dynamic_moderation_follows_the_traffic(&Soft82576::default(), 100, 1);
}

#[test]
fn ixgbe_dynamic_moderation_follows_the_traffic() {
    dynamic_moderation_follows_the_traffic(&Soft82599::default(), 250, 2);
    dynamic_moderation_follows_the_traffic(&Soft82599::default(), 40, 2);
}

/// An idle adaptive queue sleeps at its first empty poll (no gap measured:
/// spin budget 0), where it once polled 300 times; a fixed interval beyond
/// the family's EITR is refused, a dynamic cap beyond igb's longest class
/// (245 µs) is not.
#[test]
fn adaptive_idle_queue_sleeps_at_its_first_empty_poll() {
    let m = Soft82576::default();
    let mode = RxMode::Adaptive {
        max_spin: Duration::from_micros(50),
        timeout: Duration::from_millis(1),
    };
    let mut dev = m.open(&config(1).with_rx_mode(mode)).unwrap();
    let q = dev.queue(0);
    assert!(q.wait_rx(0), "slept at the first empty poll");
    let s = q.irq_stats();
    assert_eq!(
        (s.sleeps, s.spin_budget_ns, s.spins_paid),
        (1, 0, 0),
        "{s:?}"
    );
    assert_eq!(s.wakeups_per_packet(0), None);
    assert_eq!(s.wakeups_per_packet(4), Some(0.25));
    let m = Soft82599::default();
    let mut dev = m.open(&config(1).with_rx_mode(mode)).unwrap();
    assert!(dev.set_moderation(Moderation::dynamic(2000)).is_ok());
    assert_eq!(dev.queue(0).moderation(), Moderation::dynamic(2000));
    let e = dev
        .set_moderation(Moderation::Fixed { usecs: 2000 })
        .unwrap_err();
    assert!(e.to_string().contains("rx_usecs 2000 is above"), "{e}");
}

#[test]
fn igb_each_queues_frame_wakes_only_that_queues_thread() {
    each_queues_frame_wakes_only_that_queues_thread(&Soft82576::default());
}

#[test]
fn ixgbe_each_queues_frame_wakes_only_that_queues_thread() {
    each_queues_frame_wakes_only_that_queues_thread(&Soft82599::default());
}

#[test]
fn igb_eitr_holds_rx_usecs_and_throttles_the_vector() {
    eitr_holds_rx_usecs_and_throttles_the_vector(&Soft82576::default());
}

#[test]
fn ixgbe_eitr_holds_rx_usecs_and_throttles_the_vector() {
    eitr_holds_rx_usecs_and_throttles_the_vector(&Soft82599::default());
}

#[test]
fn busy_poll_leaves_msix_off_and_interrupt_modes_need_it() {
    let m = Soft82576::default();
    let mut dev = m.open(&config(2)).unwrap();
    assert_eq!(m.peek(<Soft82576 as Model>::GPIE), 0, "busy-poll: no MSI-X");
    assert!(m.msix_fired().is_empty());
    let e = dev.queue(0).set_rx_mode(RxMode::adaptive()).unwrap_err();
    assert!(e.to_string().contains("needs MSI-X"), "{e}");
    assert!(dev.queue(0).set_rx_usecs(10).is_err());
    dev.set_rx_mode(RxMode::adaptive()).unwrap();
    assert_eq!(dev.queue(1).rx_mode(), RxMode::adaptive());
    assert_eq!(m.msix_fired(), vec![0, 0]);
    // Busy-poll again: vectors stay masked, wait_rx never sleeps.
    dev.set_rx_mode(RxMode::BusyPoll).unwrap();
    assert!(!dev.queue(0).wait_rx(0));
    assert_eq!(dev.queue(0).irq_stats().sleeps, 0);
}

#[test]
fn a_strict_igb_model_refuses_eiac_before_msix_mode() {
    let m = Soft82576::new(pollnic_model::igb::ModelConfig {
        strict: false,
        ..Default::default()
    });
    let _dev = m.open(&config(1)).unwrap();
    m.regs().write32(pollnic_hw::igb::regs::EIAC, 1);
    let v = m.violations();
    assert!(
        v.iter().any(|s| s.contains("before GPIE.MSIX_MODE")),
        "{v:?}"
    );
}

/// A signal with nothing in the ring (QEMU's igb EITR timer signals a vector
/// once more after it was masked) leaves the queue asleep and armed: one
/// sleep, one stale signal, woken by the frame's own interrupt; nothing
/// re-armed in between.
#[test]
fn igb_a_late_signal_keeps_the_queue_asleep_and_armed() {
    let m = Soft82576::new(Default::default());
    let mut dev = m.open_dev(&config(1));
    let flow = flow_per_queue(&dev)[0];
    let core = core_affinity::get_core_ids().unwrap()[0].id;
    let mode = RxMode::Interrupt {
        timeout: Duration::from_secs(3),
    };
    let got = run_pinned(
        &mut dev,
        &[core],
        mode,
        |q| {
            let mut buf = Vec::new();
            let s0 = q.irq_stats();
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut n = 0;
            while n < 1 && Instant::now() < deadline {
                let k = q.rx_burst(&mut buf, 32);
                n += k;
                buf.clear();
                if k == 0 {
                    q.wait_rx(0);
                }
            }
            let s = q.irq_stats();
            (
                n,
                s.sleeps - s0.sleeps,
                s.stale - s0.stale,
                s.timeouts - s0.timeouts,
            )
        },
        || {
            std::thread::sleep(Duration::from_millis(200));
            m.signal_late(0);
            std::thread::sleep(Duration::from_millis(200));
            assert!(matches!(
                m.rx(&bytes(&flow, 0)),
                RxOutcome::Delivered { .. }
            ));
        },
    )
    .unwrap();
    assert_eq!(
        got[0],
        (1, 1, 1, 0),
        "(frames, sleeps, stale signals, timeouts): the late signal must not end the sleep"
    );
    assert_eq!(m.fired()[0], 2, "the late signal and the frame's interrupt");
    assert!(m.broken_rules().is_empty(), "{:?}", m.broken_rules());
}
