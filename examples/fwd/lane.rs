//! One forwarding direction on one queue index: RX burst on one port's queue,
//! optional MAC swap, TX burst on the other (or the same) port's queue.
//!
//! Nothing is dropped in software while running: a lane receives only as many
//! frames as its pending TX burst has room for, and what `tx_burst` could not
//! take stays pending and goes first next loop. Back-pressure therefore lands
//! in the RX ring, where the NIC drops what does not fit (an 82576 with one
//! queue counts it in `rx_no_buffer_count`/`rx_missed_errors`; QEMU's igb
//! counts nothing). The only software drop, counted as `tx_dropped`: frames
//! still pending when the run ends and the flush time is over.
//!
//! Zero copy on one port and between two: the two ports are opened together
//! (`Device::open_many`), in one VFIO container, so a buffer of port A's
//! mempool has an IOVA port B can DMA from, and B's TX ring sends it as it
//! is and returns it to A's pool once sent (`TxStats::foreign` counts them).
//! fwd never copies a frame; its summary says so, and counts the frames that
//! crossed.

use pollnic::{Packet, Queue};
use std::time::{Duration, Instant};

/// testpmd's forwarding modes that fwd implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Forward frames untouched.
    Io,
    /// Swap destination and source MAC before sending.
    Macswap,
}

/// What one lane (direction × queue) did.
#[derive(Clone, Copy, Debug, Default)]
pub struct LaneResult {
    /// Frames received.
    pub received: u64,
    /// Frames copied into another buffer before sending: fwd copies none.
    pub copies: u64,
    /// Frames still pending at the end, after the flush time.
    pub dropped_at_stop: u64,
    /// First and last non-empty RX burst.
    pub first_last: Option<(Instant, Instant)>,
    /// Gaps between RX polls (a stalled lane overruns its RX ring).
    pub gaps: pollnic_tools::metrics::PollGaps,
    /// The RX queue's ring counters at the end.
    pub rx: pollnic::stats::RxStats,
    /// The TX queue's ring counters at the end (only this lane uses that TX queue).
    pub tx: pollnic::stats::TxStats,
}

impl LaneResult {
    /// Frames the application dropped (`tx_dropped`).
    pub fn tx_dropped(&self) -> u64 {
        self.dropped_at_stop
    }
}

/// The per-lane state, owned by the queue's thread.
pub struct Lane {
    mode: Mode,
    batch: usize,
    rx_buf: Vec<Packet>,
    pending: Vec<Packet>,
    res: LaneResult,
}

impl Lane {
    /// A lane forwarding in `mode` with bursts of `batch`.
    pub fn new(mode: Mode, batch: usize) -> Lane {
        Lane {
            mode,
            batch,
            rx_buf: Vec::with_capacity(batch),
            pending: Vec::with_capacity(batch),
            res: LaneResult::default(),
        }
    }

    /// Receive what fits into the pending burst; returns how many frames arrived.
    #[inline]
    pub fn poll(&mut self, rx: &mut Queue) -> usize {
        let room = self.batch - self.pending.len();
        if room == 0 {
            return 0;
        }
        let n = rx.rx_burst(&mut self.rx_buf, room);
        self.res.gaps.poll(n);
        if n == 0 {
            return 0;
        }
        let now = Instant::now();
        self.res.first_last = Some((self.res.first_last.map_or(now, |f| f.0), now));
        self.res.received += n as u64;
        if self.mode == Mode::Macswap {
            for p in &mut self.rx_buf {
                macswap(p.data_mut());
            }
        }
        // The received buffers themselves go out, on this port or the other.
        self.pending.append(&mut self.rx_buf);
        n
    }

    /// Send the pending burst (what does not fit stays pending); returns how many went.
    #[inline]
    pub fn send(&mut self, tx: &mut Queue) -> usize {
        if self.pending.is_empty() {
            return 0;
        }
        tx.tx_burst(&mut self.pending)
    }

    /// Send what is still pending for up to `flush`, then wait as long for the
    /// TX ring to drain; count what is left as dropped and return the counters
    /// (`rx`: the RX queue's ring counters).
    pub fn finish(
        mut self,
        rx: pollnic::stats::RxStats,
        tx: &mut Queue,
        flush: Duration,
    ) -> LaneResult {
        let deadline = Instant::now() + flush;
        while !self.pending.is_empty() && Instant::now() < deadline {
            self.send(tx);
        }
        tx.flush_tx(flush);
        self.res.dropped_at_stop = self.pending.len() as u64;
        self.pending.clear();
        self.res.rx = rx;
        self.res.tx = tx.tx_stats();
        self.res
    }
}

/// Swap the destination and source MAC of an Ethernet frame (testpmd's macswap).
#[inline]
pub fn macswap(frame: &mut [u8]) {
    if frame.len() >= 12 {
        let (dst, src) = frame[..12].split_at_mut(6);
        dst.swap_with_slice(src);
    }
}

/// Forward on one queue index while `running()`: one port (`b` is
/// `None`, RX and TX on `a`) or both directions between `a` and `b`.
/// Returns the lanes' results: `[a→a]` or `[a→b, b→a]`.
pub fn run_queue(
    a: &mut Queue,
    b: Option<&mut Queue>,
    mode: Mode,
    batch: usize,
    running: impl Fn() -> bool,
) -> Vec<LaneResult> {
    let flush = Duration::from_secs(1);
    match b {
        None => {
            let mut l = Lane::new(mode, batch);
            while running() {
                if l.poll(a) + l.send(a) == 0 {
                    std::hint::spin_loop();
                }
            }
            vec![l.finish(a.rx_stats(), a, flush)]
        }
        Some(b) => {
            let mut ab = Lane::new(mode, batch);
            let mut ba = Lane::new(mode, batch);
            while running() {
                let moved = ab.poll(a) + ab.send(b) + ba.poll(b) + ba.send(a);
                if moved == 0 {
                    std::hint::spin_loop();
                }
            }
            vec![
                ab.finish(a.rx_stats(), b, flush),
                ba.finish(b.rx_stats(), a, flush),
            ]
        }
    }
}
