//! The clock pollnic time-stamps with: CLOCK_MONOTONIC in ns, which means
//! the same in every process of a machine (so a sender in one process and a
//! receiver in another measure latency on one clock).

/// CLOCK_MONOTONIC now, in ns (`clock_gettime(2)`; a vDSO call, no syscall
/// on x86-64 Linux; under QEMU/TCG with the HPET clocksource each read exits
/// into the emulator).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always
    // exists on Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_clock_moves_forward() {
        let a = super::monotonic_ns();
        let b = super::monotonic_ns();
        assert!(b >= a && a > 0);
    }
}
