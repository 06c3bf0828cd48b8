//! The generator every row shares: pollnic on the sending port, test frames
//! over many flows at a fixed offered rate, each carrying CLOCK_MONOTONIC.

use crate::tally::Tally;
use pollnic::clock::monotonic_ns;
use pollnic::{Device, Packet};
use pollnic_tools::frame::{self, Flow};
use pollnic_tools::marker;
use pollnic_tools::metrics::PollGaps;
use std::sync::atomic::{
    AtomicBool, AtomicU64, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// The core the generator thread is pinned to (`--gen-core`), set once by
/// `main`; `usize::MAX` leaves it unpinned.
pub static GEN_CORE: AtomicUsize = AtomicUsize::new(usize::MAX);

/// `--drain N`: frames each row puts into the receive ring while its
/// receiver waits (0: off, every row offers its rate for its seconds).
pub static DRAIN_FRAMES: AtomicU64 = AtomicU64::new(0);

/// Set while a drain row's frames arrive: every receive loop waits in
/// [`hold`] instead of reading.
static PAUSED: AtomicBool = AtomicBool::new(false);

/// Where [`hold`] blocks while [`PAUSED`] is set, until [`release`] wakes it.
static HELD: Mutex<()> = Mutex::new(());
static RELEASED: Condvar = Condvar::new();

/// Frames the kernel rows' receive loops have read ([`received`]): a
/// drain's counted window ends once they hold all of its frames.
static RECEIVED: AtomicU64 = AtomicU64::new(0);

/// Called by a kernel row's receive loop after each batch, outside any
/// marked region: it read `n` frames. pollnic's rows do not call it (their
/// work is their marked bursts, whatever the window's length).
#[inline]
pub fn received(n: u64) {
    if n > 0 {
        RECEIVED.fetch_add(n, Relaxed);
    }
}

/// How long a drain's window stays open after the receivers read its last
/// frame: the reading thread's return to its wait.
pub const DRAIN_AFTER_LAST: Duration = Duration::from_millis(5);

/// How long a drain row waits after its last frame was sent before the
/// receiver may read: the device and the kernel have placed every frame.
pub const DRAIN_SETTLE: Duration = Duration::from_millis(300);

/// Called at the top of every receive loop: returns at once, or (a drain
/// row's fill) when the receiver may read again. A held receiver sleeps on
/// a condition variable, not in a timed loop: a wake-up every millisecond
/// would be counted as the row's work (a timer interrupt, a switch in and
/// out per wake-up, about 300 over the settle), and it moved the kernel
/// rows' drain counts by up to a third between runs.
#[inline]
pub fn hold() {
    if PAUSED.load(Acquire) {
        let mut g = HELD.lock().unwrap_or_else(|e| e.into_inner());
        while PAUSED.load(Acquire) {
            g = RELEASED.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Ends a drain row's hold: every receiver in [`hold`] goes on reading.
fn release() {
    let _g = HELD.lock().unwrap_or_else(|e| e.into_inner());
    PAUSED.store(false, Release);
    RELEASED.notify_all();
}

/// A row's trial: [`generate`] at the row's rate, or with `--drain N` the
/// drain: the receivers held ([`hold`]), N frames sent as fast as the
/// port takes them, [`DRAIN_SETTLE`] for them to land in the receive ring
/// (or the socket), then the receivers let go to empty them in full bursts;
/// the counted window spans all of it, so a row's count per packet is its
/// work per frame at full bursts, whatever the timing (issue 43 item 7).
/// The drain runs [`DRAIN_REPEATS`] times and keeps the window with the
/// fewest instructions on the receiving vCPUs, whose frames are then the
/// ones counts are divided by ([`Offered::window_frames`]).
pub fn trial(
    dev: &mut Device,
    flows: &[Flow],
    size: usize,
    rate: u64,
    secs: f64,
    stop: &AtomicBool,
) -> Offered {
    let n = DRAIN_FRAMES.load(Relaxed);
    if n == 0 {
        return generate(dev, flows, size, rate, secs, stop);
    }
    on_gen_core(|| {
        let core = GEN_CORE.load(Relaxed);
        let gen = (core != usize::MAX).then_some(core);
        let mut total: Option<Offered> = None;
        let mut best: Option<(f64, Offered)> = None;
        for _ in 0..DRAIN_REPEATS {
            PAUSED.store(true, Release);
            let read0 = RECEIVED.load(Acquire);
            let mut meter = crate::cost::Meter::new();
            if let Some(m) = meter.as_mut() {
                m.begin();
            }
            let mut pmu = crate::pmu::begin(core);
            let mut one = send(
                dev,
                flows,
                size,
                DRAIN_RATE,
                60.0,
                stop,
                Limit::Frames(n),
                |_| {},
            );
            std::thread::sleep(DRAIN_SETTLE);
            release();
            // A kernel row's window ends once its receivers read every
            // frame (a window less its background is the row's work, so
            // every idle millisecond adds the background's error); others
            // keep the tail.
            let t0 = Instant::now();
            while RECEIVED.load(Acquire).wrapping_sub(read0) < one.sent
                && t0.elapsed() < crate::cost::TAIL
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            if t0.elapsed() < crate::cost::TAIL {
                std::thread::sleep(DRAIN_AFTER_LAST);
            }
            one.pmu = pmu
                .as_mut()
                .map(|p| p.as_mut().map_err(|e| e.clone()).and_then(|p| p.finish()));
            if let Some(m) = meter {
                one.window = m.end(gen);
            }
            one.window_frames = Some(one.sent);
            let t = total.get_or_insert_with(Offered::default);
            t.sent += one.sent;
            t.elapsed += one.elapsed;
            t.skipped += one.skipped;
            t.tx_packets += one.tx_packets;
            // The least work wins: the kernel's periodic tasks (igb's
            // watchdog reads about 80 statistics registers every 2 s) land
            // in some windows and not in others. The work figure is the
            // row's own (marked bursts, or the window less its background).
            let work = one
                .window
                .as_ref()
                .and_then(|w| w.per_packet(one.sent, one.sent))
                .and_then(|p| p.work_instructions);
            t.fill_work.push(work);
            let w = work.unwrap_or(f64::INFINITY);
            if best.as_ref().is_none_or(|(b, _)| w < *b) {
                best = Some((w, one));
            }
            if stop.load(Relaxed) {
                break;
            }
        }
        let mut t = total.unwrap_or_default();
        if let Some((_, b)) = best {
            t.window = b.window;
            t.pmu = b.pmu;
            t.window_frames = b.window_frames;
        }
        t
    })
}

/// How many times a drain row fills and empties its ring; the window with
/// the least work is kept ([`trial`]).
pub const DRAIN_REPEATS: usize = 3;

/// How many frames [`send`] sends: for its seconds at its rate, the
/// warm-up's (their timestamps zeroed: receivers leave them out), or a
/// drain's (as fast as the TX ring takes them, no schedule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Limit {
    Time,
    WarmUp(u64),
    Frames(u64),
}

/// The schedule of a drain's frames: far above what the testbed's ports
/// take, so they go as fast as the TX ring empties.
const DRAIN_RATE: u64 = 10_000_000;

/// What was offered.
#[derive(Default)]
pub struct Offered {
    /// Frames handed to the NIC.
    pub sent: u64,
    /// How long sending took.
    pub elapsed: Duration,
    /// Send slots skipped because the generator had fallen more than
    /// [`MAX_LAG`] frames behind its schedule (its thread did not run).
    pub skipped: u64,
    /// The sending port's `tx_packets` counter (GPTC) over the same span:
    /// less than `sent` when the NIC dropped frames it had taken.
    pub tx_packets: u64,
    /// In a counting guest: the guest's work around the send window
    /// ([`crate::cost`]).
    pub window: Option<crate::cost::Window>,
    /// The CPU's counters over the send window, every CPU but the
    /// generator's ([`crate::pmu`]): the events' counts, or why there are
    /// none; `None` where this row does not read them.
    pub pmu: Option<Result<Vec<(&'static str, u64)>, String>>,
    /// The frames `window` and `pmu` hold, where they span only part of
    /// the row (one of a drain's [`DRAIN_REPEATS`]); `None`: all of them.
    pub window_frames: Option<u64>,
    /// A drain's work instructions per packet in each fill, in order
    /// (`None`: no figure for that fill); empty at a rate.
    pub fill_work: Vec<Option<f64>>,
}

/// How far (frames) the generator may fall behind its schedule before it
/// skips the missed send slots instead of sending them: a backlog sent at
/// once would arrive as one line-rate burst, which a receiver's ring can
/// overflow however fast it polls; the offered rate must stay the rate asked
/// for (RFC 2544 §26.1 offers a constant rate).
pub const MAX_LAG: u64 = 64;

/// Frames of the warm-up sent before every measured trial.
pub const WARM_UP_FRAMES: u64 = 200;
/// Rate of the warm-up, packets/s: slow enough that a 512-descriptor ring
/// absorbs 250 ms of a receiver that has not polled yet.
pub const WARM_UP_RATE: u64 = 2_000;
/// Wait after the warm-up before the trial starts.
pub const WARM_UP_SETTLE: Duration = Duration::from_millis(200);

/// The warm-up before a measured trial (RFC 2544 §23 sends "learning
/// frames" before each trial): [`WARM_UP_FRAMES`] frames at
/// [`WARM_UP_RATE`], then [`WARM_UP_SETTLE`] of quiet. They are not test
/// frames (the payload magic is cleared, so [`frame::parse`] rejects them):
/// paths that parse frames ignore them; testpmd, which only counts, has the
/// returned number sent subtracted, and pollnic-1q-rxonly starts counting
/// after the warm-up.
///
/// Why: a receiver's first frames run code and touch memory for the first
/// time. In the testbed (QEMU/TCG) a pollnic receive thread took 6–135 ms
/// from the generator's start to its first loop and 5–7 ms for its first
/// burst; at 100 kpps the ring filled meanwhile and QEMU dropped the
/// backlog on the first RDT write (README, "Where the loss came from, and a run without it").
pub fn warm_up(dev: &mut Device, flows: &[Flow], size: usize, stop: &AtomicBool) -> u64 {
    let secs = WARM_UP_FRAMES as f64 / WARM_UP_RATE as f64;
    let sent = on_gen_core(|| {
        send(
            dev,
            flows,
            size,
            WARM_UP_RATE,
            secs * 2.0,
            stop,
            Limit::WarmUp(WARM_UP_FRAMES),
            |_| {},
        )
        .sent
    });
    std::thread::sleep(WARM_UP_SETTLE);
    sent
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
    on_gen_core(|| {
        // In a counting guest: the send window, which stays open for the
        // receiver to empty its rings.
        let mut meter = crate::cost::Meter::new();
        if let Some(m) = meter.as_mut() {
            m.begin();
        }
        let mut pmu = crate::pmu::begin(GEN_CORE.load(Relaxed));
        let mut offered = send(dev, flows, size, rate, secs, stop, Limit::Time, |_| {});
        if meter.is_some() || pmu.is_some() {
            std::thread::sleep(crate::cost::TAIL);
        }
        offered.pmu = pmu
            .as_mut()
            .map(|p| p.as_mut().map_err(|e| e.clone()).and_then(|p| p.finish()));
        if let Some(m) = meter {
            let core = GEN_CORE.load(Relaxed);
            offered.window = m.end((core != usize::MAX).then_some(core));
        }
        offered
    })
}

/// Run `f` in a thread pinned to [`GEN_CORE`] and return its result.
fn on_gen_core<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    std::thread::scope(|s| {
        s.spawn(|| {
            let core = GEN_CORE.load(Relaxed);
            if core != usize::MAX && !pollnic_tools::cores::pin_current_thread(core) {
                eprintln!("compare: could not pin the generator to core {core}");
            }
            f()
        })
        .join()
        .expect("generator thread panicked")
    })
}

/// What came back to the generator's port in a forwarding row.
#[derive(Default)]
pub struct Returned {
    /// Test frames of this row, with round-trip latency.
    pub tally: Tally,
    /// Returned test frames whose MACs were not what the forwarding mode
    /// makes of them (io: untouched; macswap: swapped).
    pub wrong_macs: u64,
}

/// [`generate`], and receive on the same port in the same pinned thread what
/// the path under test sends back, between bursts and for `drain` after the
/// send window. Counts only frames stamped from this call on (a previous
/// row's stragglers are not this row's); `expect` is the (destination,
/// source) MAC pair a returned frame must carry.
#[allow(clippy::too_many_arguments)]
pub fn round_trip(
    dev: &mut Device,
    flows: &[Flow],
    size: usize,
    rate: u64,
    secs: f64,
    stop: &AtomicBool,
    drain: Duration,
    expect: ([u8; 6], [u8; 6]),
) -> (Offered, Returned) {
    on_gen_core(|| {
        let t0 = monotonic_ns();
        let mut back = Returned::default();
        let mut gaps = PollGaps::default();
        let mut buf: Vec<Packet> = Vec::with_capacity(32);
        let mut poll = |dev: &mut Device| {
            let n = dev.queue(0).rx_burst(&mut buf, 32);
            let Some(now) = gaps.poll(n) else {
                return;
            };
            if n == 0 {
                return;
            }
            for p in &buf {
                if let Some(info) = frame::parse(p.data()) {
                    if info.tx_ns >= t0 {
                        back.tally.frame(p.len(), info.tx_ns, now);
                        if (info.flow.dst_mac, info.flow.src_mac) != expect {
                            back.wrong_macs += 1;
                        }
                    }
                }
            }
            dev.queue(0).free_bulk(&mut buf);
        };
        // In a counting guest, and with --pmu: the window runs from the
        // first frame to the end of the drain, as a receive row's does.
        let mut meter = crate::cost::Meter::new();
        if let Some(m) = meter.as_mut() {
            m.begin();
        }
        let mut pmu = crate::pmu::begin(GEN_CORE.load(Relaxed));
        let mut offered = send(dev, flows, size, rate, secs, stop, Limit::Time, &mut poll);
        let end = Instant::now() + drain;
        while Instant::now() < end {
            poll(dev);
        }
        offered.pmu = pmu
            .as_mut()
            .map(|p| p.as_mut().map_err(|e| e.clone()).and_then(|p| p.finish()));
        if let Some(m) = meter {
            let core = GEN_CORE.load(Relaxed);
            offered.window = m.end((core != usize::MAX).then_some(core));
        }
        back.tally.gaps = Some(gaps);
        (offered, back)
    })
}

/// The send loop; `poll(dev)` runs after every TX burst and while waiting.
/// `warm: Some(n)`: send exactly `n` frames (unless `secs` runs out first)
/// with their payload magic cleared (warm-up frames); `None`: test frames
/// until `secs` is up.
#[allow(clippy::too_many_arguments)]
pub(crate) fn send(
    dev: &mut Device,
    flows: &[Flow],
    size: usize,
    rate: u64,
    secs: f64,
    stop: &AtomicBool,
    until: Limit,
    mut poll: impl FnMut(&mut Device),
) -> Offered {
    let warm = matches!(until, Limit::WarmUp(_));
    let len = size - 4;
    let gap = Duration::from_nanos(1_000_000_000 / rate.max(1));
    let tx_before = dev.stats().get("tx_packets").unwrap_or(0);
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(secs);
    let mut seq = 0u64;
    let mut pending: Vec<Packet> = Vec::with_capacity(32);
    // The schedule: frame `origin_seq + k` is due at `origin + k × gap`.
    let (mut origin, mut origin_seq, mut skipped) = (t0, 0u64, 0u64);
    let limit = match until {
        Limit::Time => u64::MAX,
        Limit::WarmUp(n) | Limit::Frames(n) => n,
    };
    // Until the time is up, or (warm-up) all `limit` frames are out.
    // One clock read per turn (each is an exit into the emulator in the testbed).
    loop {
        let now = Instant::now();
        if now >= end || stop.load(Relaxed) || (seq >= limit && pending.is_empty()) {
            break;
        }
        // Top up to what the schedule allows now, at most a burst of 32.
        let mut due = origin_seq
            + (now.saturating_duration_since(origin).as_nanos() / gap.as_nanos().max(1)) as u64
            + 1;
        if let Limit::Frames(_) = until {
            // A drain's frames: as fast as the TX ring takes them.
            due = seq + 32;
        } else if due > seq + MAX_LAG {
            // Fallen behind: restart the schedule now rather than catch up.
            skipped += due - seq - 1;
            (origin, origin_seq) = (now, seq);
            due = seq + 1;
        }
        // Marked for the counter: a turn that sends (filling the frames and
        // the TX burst); a turn with nothing due is dropped.
        marker::begin();
        frame::fill_burst(
            dev.mempool(),
            &mut pending,
            32,
            flows,
            &mut seq,
            due.min(limit),
            |_| len,
        );
        if warm {
            for p in pending.iter_mut() {
                p.data_mut()[frame::HEADERS_LEN..frame::HEADERS_LEN + 2].fill(0);
            }
        }
        if pending.is_empty() {
            marker::discard();
            poll(dev);
            std::hint::spin_loop();
            continue;
        }
        dev.queue(0).tx_burst(&mut pending);
        marker::commit();
        poll(dev);
    }
    let sent = seq - pending.len() as u64;
    let elapsed = t0.elapsed();
    drop(pending);
    dev.queue(0).flush_tx(Duration::from_secs(2));
    let tx_packets = dev.stats().get("tx_packets").unwrap_or(0) - tx_before;
    Offered {
        sent,
        elapsed,
        skipped,
        tx_packets,
        window: None,
        pmu: None,
        window_frames: None,
        fill_work: Vec::new(),
    }
}
