//! A device's counters, read from any thread: [`StatsReader`] and where its
//! figures come from ([`StatsSource`], chosen by the back end).

use crate::counters::DeviceCounters;
use crate::family::DescFamily;
use crate::lowlevel::io::DeviceBar;
use crate::refresh::SharedStats;
use crate::stats::Stats;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Reads a device's hardware counters from any thread ([`Device::stats_reader`](crate::Device::stats_reader)).
///
/// # Example
///
/// A reporter thread printing the received-packet total every second
/// while the queues run on pinned threads:
///
/// ```no_run
/// use pollnic::{Counter, Device, DeviceConfig};
/// use std::time::Duration;
///
/// let dev = Device::open("0000:03:00.0", &DeviceConfig::default())?;
/// let reader = dev.stats_reader(); // Send + Sync + Clone
/// std::thread::spawn(move || loop {
///     let s = reader.stats(); // totals since open, in 64 bits
///     println!("rx_packets {:?} rx_missed {:?}", s.counter(Counter::RxPackets), s.counter(Counter::RxMissedErrors));
///     std::thread::sleep(Duration::from_secs(1));
/// });
/// // ... run the queues (pollnic::run_pinned) ...
/// # Ok::<(), pollnic::Error>(())
/// ```
#[derive(Clone)]
pub struct StatsReader {
    pub(super) family: &'static str,
    pub(super) source: StatsSource,
    pub(super) stats: SharedStats,
    pub(super) open: Arc<AtomicBool>,
}

/// Where a device's counters come from.
#[derive(Clone)]
pub(super) enum StatsSource {
    /// The family's clear-on-read registers (igb, ixgbe).
    Registers {
        family: &'static dyn DescFamily,
        bar: Arc<dyn DeviceBar>,
    },
    /// The driver's own per-queue counters (virtio-net, which has no
    /// counter registers): set, not added, from the queues' totals.
    Driver(DeviceCounters),
}

impl StatsSource {
    pub(super) fn update(&self, s: &mut Stats) {
        match self {
            StatsSource::Registers { family, bar } => family.update_stats(bar.regs(), s),
            StatsSource::Driver(counters) => {
                let mut t = crate::counters::QueueSnapshot::default();
                for q in counters.iter() {
                    let q = q.snapshot();
                    t.rx_packets += q.rx_packets;
                    t.tx_packets += q.tx_packets;
                    t.rx_bytes += q.rx_bytes;
                    t.tx_bytes += q.tx_bytes;
                    t.rx_errors += q.rx_errors;
                    t.rx_nombuf += q.rx_nombuf;
                    t.rx_kicks += q.rx_kicks;
                    t.tx_kicks += q.tx_kicks;
                    t.device_errors += q.device_errors;
                    t.virtqueues_stopped += q.virtqueues_stopped;
                }
                for (name, v) in [
                    ("rx_packets", t.rx_packets),
                    ("tx_packets", t.tx_packets),
                    ("rx_bytes", t.rx_bytes),
                    ("tx_bytes", t.tx_bytes),
                    ("rx_errors", t.rx_errors),
                    ("rx_nombuf", t.rx_nombuf),
                    ("rx_kicks", t.rx_kicks),
                    ("tx_kicks", t.tx_kicks),
                    ("device_errors", t.device_errors),
                    ("virtqueues_stopped", t.virtqueues_stopped),
                ] {
                    s.set_extra(name, v);
                }
            }
        }
    }
}

impl StatsReader {
    /// The counter totals since the device was opened, read from the
    /// hardware first while the device is open (as [`Device::stats`](crate::Device::stats)).
    pub fn stats(&self) -> Stats {
        let mut s = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        if self.open.load(Ordering::Acquire) {
            self.source.update(&mut s);
        }
        s.clone()
    }
}

impl std::fmt::Debug for StatsReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatsReader")
            .field("family", &self.family)
            .field("open", &self.open.load(Ordering::Relaxed))
            .finish()
    }
}
