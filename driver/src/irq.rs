//! Receive modes: busy-poll, interrupt and adaptive, over one MSI-X vector
//! per RX queue.
//!
//! The burst loop stays the same in every mode: call
//! [`crate::Queue::rx_burst`], then [`crate::Queue::wait_rx`] with what it
//! returned. In busy-poll mode `wait_rx` returns at once; in interrupt mode
//! an empty poll arms the queue's vector and sleeps on its eventfd; in
//! adaptive mode only a run of empty polls does (NAPI's idea, and DPDK
//! l3fwd-power's `rte_eth_dev_rx_intr_enable` after a run of idle polls).
//!
//! Arming follows the order that loses no frame: clear the vector's cause
//! (EICR), unmask it (EIMS), then look at the ring once more; a frame that
//! arrived in between is taken without sleeping, and one that arrives later
//! raises the vector. On waking the queue masks its vector itself (EIMC):
//! QEMU's igb has no EIAM auto-mask, and its EITR timer may signal a vector
//! once more after it was masked, so a wake-up with nothing in the ring
//! only costs one more poll.

use crate::family::VectorRegs;
use crate::io::{DeviceBar, IrqEvent};
use std::sync::Arc;
use std::time::Duration;

/// How long an interrupt-mode wait blocks at most by default: the loop then
/// polls once and can look at a stop flag.
pub const DEFAULT_WAIT: Duration = Duration::from_millis(100);
/// Empty polls in a row before an adaptive queue sleeps, by default.
pub const DEFAULT_IDLE_POLLS: u32 = 300;

/// How a queue's thread waits for frames ([`crate::Queue::wait_rx`]).
/// Non-exhaustive: match with a `_` arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RxMode {
    /// Poll without ever sleeping: one core per queue, the lowest latency
    /// (the default, and DPDK's poll mode).
    #[default]
    BusyPoll,
    /// Every empty poll arms the queue's MSI-X vector and blocks on its
    /// eventfd for at most `timeout`.
    Interrupt {
        /// Longest sleep per empty poll.
        timeout: Duration,
    },
    /// Poll while frames arrive; after `idle_polls` empty polls in a row
    /// arm the vector and block (at most `timeout`); back to polling on the
    /// first interrupt.
    Adaptive {
        /// Empty polls in a row before sleeping (at least 1).
        idle_polls: u32,
        /// Longest sleep.
        timeout: Duration,
    },
}

impl RxMode {
    /// Interrupt mode with [`DEFAULT_WAIT`].
    pub const fn interrupt() -> RxMode {
        RxMode::Interrupt {
            timeout: DEFAULT_WAIT,
        }
    }
    /// Adaptive mode with [`DEFAULT_IDLE_POLLS`] and [`DEFAULT_WAIT`].
    pub const fn adaptive() -> RxMode {
        RxMode::Adaptive {
            idle_polls: DEFAULT_IDLE_POLLS,
            timeout: DEFAULT_WAIT,
        }
    }
    /// Whether the mode needs the queue's MSI-X vector.
    pub fn uses_interrupts(&self) -> bool {
        !matches!(self, RxMode::BusyPoll)
    }
    /// The name the command lines use: `poll`, `irq`, `adaptive`.
    pub fn name(&self) -> &'static str {
        match self {
            RxMode::BusyPoll => "poll",
            RxMode::Interrupt { .. } => "irq",
            RxMode::Adaptive { .. } => "adaptive",
        }
    }
}

impl std::str::FromStr for RxMode {
    type Err = crate::error::ParseNameError;
    /// `poll` (or `busy-poll`), `irq` (or `interrupt`), `adaptive`, with the
    /// default timeout and idle-poll run.
    fn from_str(s: &str) -> Result<RxMode, Self::Err> {
        match s {
            "poll" | "busy-poll" => Ok(RxMode::BusyPoll),
            "irq" | "interrupt" => Ok(RxMode::interrupt()),
            "adaptive" => Ok(RxMode::adaptive()),
            _ => Err(crate::error::ParseNameError::new(
                "RX mode",
                s,
                "poll, irq or adaptive",
            )),
        }
    }
}

/// What a queue's waits did, since the device was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IrqStats {
    /// Times the queue armed its vector and blocked.
    pub sleeps: u64,
    /// Interrupts taken from the vector's eventfd while blocked (an
    /// eventfd read may take several).
    pub interrupts: u64,
    /// Sleeps that ended by the timeout, no interrupt.
    pub timeouts: u64,
    /// Arms that found a frame already in the ring (no sleep).
    pub raced: u64,
}

/// One RX queue's MSI-X vector: its eventfd and registers.
pub(crate) struct QueueIrq {
    pub event: Arc<IrqEvent>,
    pub regs: VectorRegs,
    pub bar: Arc<dyn DeviceBar>,
}

impl QueueIrq {
    /// Clear the cause, unmask (EICR then EIMS).
    pub fn arm(&self) {
        let r = self.bar.regs();
        r.write32(self.regs.eicr, self.regs.bit);
        r.write32(self.regs.eims, self.regs.bit);
    }
    /// Mask (EIMC).
    pub fn mask(&self) {
        self.bar.regs().write32(self.regs.eimc, self.regs.bit);
    }
    /// Program the vector's throttle (EITR) to `usecs` µs.
    pub fn set_usecs(&self, usecs: u32) {
        self.bar
            .regs()
            .write32(self.regs.eitr, (self.regs.eitr_value)(usecs));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn modes_parse_by_their_command_line_names() {
        for m in [RxMode::BusyPoll, RxMode::interrupt(), RxMode::adaptive()] {
            assert_eq!(m.name().parse::<RxMode>().unwrap(), m);
        }
        let e = "napi".parse::<RxMode>().unwrap_err();
        assert_eq!((e.what(), e.given()), ("RX mode", "napi"));
        assert!(e.to_string().contains("poll, irq or adaptive"), "{e}");
        assert!(!RxMode::BusyPoll.uses_interrupts());
        assert!(RxMode::adaptive().uses_interrupts());
    }
}
