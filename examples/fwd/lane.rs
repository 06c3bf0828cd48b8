//! One forwarding direction on one queue index: RX burst on one port's queue,
//! optional MAC swap, TX burst on the other (or the same) port's queue.
//!
//! Nothing is dropped in software while running: a lane receives only as many
//! frames as its pending TX burst has room for, and what `tx_burst` could not
//! take stays pending and goes first next loop. Back-pressure therefore lands
//! in the RX ring, where the NIC drops what does not fit (an 82576 with one
//! queue counts it in `rx_no_buffer_count`/`rx_missed_errors`; QEMU's igb
//! counts nothing). The only software drops, counted as `tx_dropped`:
//! frames still pending when the run ends and the flush time is over, and (two
//! ports) frames for which the TX port's mempool had no buffer.
//!
//! Two ports copy each frame: every `Device` has its own VFIO container, so a
//! buffer of port A's mempool has no IOVA that port B can DMA from (B would
//! read whatever B maps at that address). One port forwards zero copy.

use pollnic::{Mempool, Packet, Queue};
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
    /// Frames dropped because the TX port's mempool had no buffer (two ports).
    pub dropped_nobuf: u64,
    /// Frames still pending at the end, after the flush time.
    pub dropped_at_stop: u64,
    /// First and last non-empty RX burst.
    pub first_last: Option<(Instant, Instant)>,
    /// Gaps between RX polls (a stalled lane overruns its RX ring).
    pub gaps: pollnic_examples::metrics::PollGaps,
    /// The RX queue's ring counters at the end.
    pub rx: pollnic::RxStats,
    /// The TX queue's ring counters at the end (only this lane uses that TX queue).
    pub tx: pollnic::TxStats,
}

impl LaneResult {
    /// Frames the application dropped (`tx_dropped`).
    pub fn tx_dropped(&self) -> u64 {
        self.dropped_nobuf + self.dropped_at_stop
    }
}

/// The per-lane state, owned by the queue's thread.
pub struct Lane {
    mode: Mode,
    batch: usize,
    /// Two ports: the TX queue's mempool, which frames are copied into.
    copy_to: Option<Mempool>,
    rx_buf: Vec<Packet>,
    pending: Vec<Packet>,
    res: LaneResult,
}

impl Lane {
    /// A lane forwarding in `mode` with bursts of `batch`; `copy_to` for two ports.
    pub fn new(mode: Mode, batch: usize, copy_to: Option<Mempool>) -> Lane {
        Lane {
            mode,
            batch,
            copy_to,
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
        match &self.copy_to {
            None => self.pending.append(&mut self.rx_buf),
            Some(pool) => {
                for p in &self.rx_buf {
                    match copy_into(pool, p) {
                        Some(c) => self.pending.push(c),
                        None => self.res.dropped_nobuf += 1,
                    }
                }
                // The originals go back to the RX queue's cache in one go.
                rx.free_bulk(&mut self.rx_buf);
            }
        }
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
    pub fn finish(mut self, rx: pollnic::RxStats, tx: &mut Queue, flush: Duration) -> LaneResult {
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

/// A copy of `p` in a buffer from `pool`; `None` when the pool is empty.
#[inline]
fn copy_into(pool: &Mempool, p: &Packet) -> Option<Packet> {
    let mut c = pool.alloc()?;
    c.set_len(p.len()).ok()?;
    c.data_mut().copy_from_slice(p.data());
    Some(c)
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
            let mut l = Lane::new(mode, batch, None);
            while running() {
                if l.poll(a) + l.send(a) == 0 {
                    std::hint::spin_loop();
                }
            }
            vec![l.finish(a.rx_stats(), a, flush)]
        }
        Some(b) => {
            let mut ab = Lane::new(mode, batch, Some(b.mempool().clone()));
            let mut ba = Lane::new(mode, batch, Some(a.mempool().clone()));
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
