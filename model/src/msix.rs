//! MSI-X as both software models do it: per-vector cause (EICR), mask
//! (EIMS/EIMC), auto-clear (EIAC) and throttle (EITR) bits, and one
//! eventfd per vector that a firing vector signals (what VFIO does with an
//! MSI-X message). The family's layout (offsets, EITR format, IVAR) stays
//! in its model (`igb/irq.rs`, `ixgbe/irq.rs`).
//!
//! A cause raises a message only when it newly becomes set (with EIAC the
//! bit clears itself when its message is sent; without, it stays set until
//! an EICR write clears it). A throttled interrupt fires once its interval
//! has passed, at the model's next register access, frame or `tick`, and
//! only if the vector is still unmasked with its cause set (silicon;
//! QEMU 10.0's igb timer fires anyway: see docs/nics/qemu-igb.md).

use pollnic::lowlevel::io::IrqEvent;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where a family keeps its MSI-X registers, and how its EITR reads.
pub(crate) struct Layout {
    pub eicr: u32,
    pub eims: u32,
    pub eiac: u32,
    /// EITR offset of a vector.
    pub eitr: fn(u16) -> u32,
    /// The interval, in µs, an EITR value asks for.
    pub usecs: fn(u32) -> u32,
}

/// MSI-X state: the eventfds (empty: MSI-X off), when each vector last fired,
/// which are held back by their throttle, and how often each fired.
#[derive(Default)]
pub(crate) struct Msix {
    pub events: Vec<Arc<IrqEvent>>,
    last: Vec<Option<Instant>>,
    pending: u32,
    pub fired: Vec<u64>,
}

fn reg(regs: &HashMap<u32, u32>, off: u32) -> u32 {
    regs.get(&off).copied().unwrap_or(0)
}

impl Msix {
    pub fn enable(&mut self, events: Vec<Arc<IrqEvent>>) {
        let n = events.len();
        self.events = events;
        self.last = vec![None; n];
        self.fired = vec![0; n];
        self.pending = 0;
    }
    pub fn disable(&mut self) {
        *self = Msix::default();
    }
    /// Forget throttle history (a device reset); MSI-X itself, a PCI
    /// setting, stays.
    pub fn reset(&mut self) {
        let events = std::mem::take(&mut self.events);
        self.enable(events);
    }

    /// The throttle interval of vector `v`.
    pub fn interval(regs: &HashMap<u32, u32>, l: &Layout, v: u16) -> Duration {
        Duration::from_micros((l.usecs)(reg(regs, (l.eitr)(v))) as u64)
    }

    /// Vector `v`'s cause is set (a queue wrote back a frame): raise it if
    /// it was not set already. A cause still set from an earlier frame (no
    /// EIAC auto-clear, not yet cleared through EICR) raises no second
    /// message: QEMU's igb signals only causes that newly become set and
    /// unmasked (`igb_raise_interrupts`).
    pub fn cause(&mut self, regs: &mut HashMap<u32, u32>, l: &Layout, v: u16) {
        let was = reg(regs, l.eicr);
        regs.insert(l.eicr, was | 1 << v);
        if was & 1 << v == 0 {
            self.raise(regs, l, v);
        }
    }

    /// EIMS write: unmask, and fire any vector whose cause is already set.
    pub fn unmask(&mut self, regs: &mut HashMap<u32, u32>, l: &Layout, val: u32) {
        let was = reg(regs, l.eims);
        regs.insert(l.eims, was | val);
        let raised = val & !was & reg(regs, l.eicr);
        for v in 0..32u16 {
            if raised & 1 << v != 0 {
                self.raise(regs, l, v);
            }
        }
    }

    /// EIMC write: mask.
    pub fn mask(regs: &mut HashMap<u32, u32>, l: &Layout, val: u32) {
        let m = reg(regs, l.eims) & !val;
        regs.insert(l.eims, m);
    }

    fn raise(&mut self, regs: &mut HashMap<u32, u32>, l: &Layout, v: u16) {
        if v as usize >= self.events.len() || reg(regs, l.eims) & 1 << v == 0 {
            return; // no such vector, or masked: the cause waits in EICR
        }
        let iv = Msix::interval(regs, l, v);
        if self.last[v as usize].is_some_and(|t| t.elapsed() < iv) {
            self.pending |= 1 << v;
            return;
        }
        self.fire(regs, l, v);
    }

    fn fire(&mut self, regs: &mut HashMap<u32, u32>, l: &Layout, v: u16) {
        let bit = 1 << v;
        self.events[v as usize].signal();
        self.fired[v as usize] += 1;
        self.last[v as usize] = Some(Instant::now());
        self.pending &= !bit;
        if reg(regs, l.eiac) & bit != 0 {
            let e = reg(regs, l.eicr) & !bit;
            regs.insert(l.eicr, e);
        }
    }

    /// Fire the throttled vectors whose interval has passed, if still
    /// unmasked with their cause set; forget the others.
    pub fn tick(&mut self, regs: &mut HashMap<u32, u32>, l: &Layout) {
        if self.pending == 0 {
            return;
        }
        for v in 0..self.events.len() as u16 {
            let bit = 1 << v;
            if self.pending & bit == 0 {
                continue;
            }
            if reg(regs, l.eims) & reg(regs, l.eicr) & bit == 0 {
                self.pending &= !bit;
                continue;
            }
            let iv = Msix::interval(regs, l, v);
            if self.last[v as usize].is_none_or(|t| t.elapsed() >= iv) {
                self.fire(regs, l, v);
            }
        }
    }
}
