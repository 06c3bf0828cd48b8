//! The generator every row shares: pollnic on the sending port, test frames
//! over many flows at a fixed offered rate, each carrying CLOCK_MONOTONIC.

use pollnic::frame::{self, Flow};
use pollnic::{Device, Packet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// The core the generator thread is pinned to (`--gen-core`), set once by
/// `main`; `usize::MAX` leaves it unpinned.
pub static GEN_CORE: AtomicUsize = AtomicUsize::new(usize::MAX);

/// What was offered.
pub struct Offered {
    /// Frames handed to the NIC.
    pub sent: u64,
    /// How long sending took.
    pub elapsed: Duration,
}

/// Send `size`-byte frames (wire size incl. FCS) over `flows` at `rate`
/// packets/s for `secs` seconds (or until `stop`), from a thread pinned to
/// [`GEN_CORE`] (only that thread: receivers and testpmd keep their cores).
pub fn generate(
    dev: &mut Device,
    flows: &[Flow],
    size: usize,
    rate: u64,
    secs: f64,
    stop: &AtomicBool,
) -> Offered {
    std::thread::scope(|s| {
        s.spawn(|| {
            let core = GEN_CORE.load(Relaxed);
            if core != usize::MAX && !pollnic::runner::pin_current_thread(core) {
                eprintln!("compare: could not pin the generator to core {core}");
            }
            send(dev, flows, size, rate, secs, stop)
        })
        .join()
        .expect("generator thread panicked")
    })
}

fn send(
    dev: &mut Device,
    flows: &[Flow],
    size: usize,
    rate: u64,
    secs: f64,
    stop: &AtomicBool,
) -> Offered {
    let len = size - 4;
    let gap = Duration::from_nanos(1_000_000_000 / rate.max(1));
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(secs);
    let mut seq = 0u64;
    let mut pending: Vec<Packet> = Vec::with_capacity(32);
    while Instant::now() < end && !stop.load(Relaxed) {
        // Top up to what the schedule allows now, at most a burst of 32.
        let due = (t0.elapsed().as_nanos() / gap.as_nanos().max(1)) as u64 + 1;
        frame::fill_burst(
            dev.mempool(),
            &mut pending,
            32,
            flows,
            &mut seq,
            due,
            |_| len,
        );
        if pending.is_empty() {
            std::hint::spin_loop();
            continue;
        }
        dev.tx_burst(&mut pending);
    }
    let sent = seq - pending.len() as u64;
    let elapsed = t0.elapsed();
    drop(pending);
    dev.flush_tx(Duration::from_secs(2));
    Offered { sent, elapsed }
}
