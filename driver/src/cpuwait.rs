//! Whether the CPU and the kernel offer user-mode waiting on a memory write:
//! WAITPKG (UMONITOR, UMWAIT, TPAUSE), what DPDK's power-monitor mode
//! (`rte_power_monitor`) uses to sleep until a NIC writes back the next RX
//! descriptor. pollnic detects and reports it (`pollnic doctor`, the
//! `compare` rows); no receive mode uses it
//! (docs/design/interrupts.md#waiting-on-the-descriptor-umonitorumwait).
//!
//! Sources: Intel SDM vol. 2 (CPUID leaf 07H, ECX bit 5 "WAITPKG"; UMWAIT,
//! UMONITOR, TPAUSE), Linux `arch/x86/kernel/cpu/umwait.c` (the
//! `umwait_control` sysfs group, created only when the boot CPU has
//! WAITPKG; `max_time` in TSC cycles, `enable_c02`).

use crate::pci::Sysfs;

/// What this machine offers for waiting on a descriptor's write-back with
/// UMONITOR/UMWAIT. Non-exhaustive: build one with [`Waitpkg::detect`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Waitpkg {
    /// The CPU has WAITPKG: CPUID.(EAX=07H, ECX=0):ECX bit 5 (false where
    /// the CPU's largest basic leaf is below 7, or off x86-64).
    pub cpu: bool,
    /// The kernel set user wait up: `/sys/devices/system/cpu/umwait_control/`
    /// exists (Linux 5.3 and later create it when the boot CPU has WAITPKG).
    pub kernel: bool,
    /// The longest UMWAIT the kernel allows, in TSC cycles
    /// (`umwait_control/max_time`, the IA32_UMWAIT_CONTROL limit; Linux's
    /// default is 100,000), when readable.
    pub max_time_tsc: Option<u64>,
}

impl Waitpkg {
    /// Read CPUID and `sysfs` (normally `/sys`).
    pub fn detect(sysfs: &Sysfs) -> Waitpkg {
        let dir = sysfs.root.join("devices/system/cpu/umwait_control");
        Waitpkg {
            cpu: cpu_has_waitpkg(),
            kernel: dir.is_dir(),
            max_time_tsc: std::fs::read_to_string(dir.join("max_time"))
                .ok()
                .and_then(|s| s.trim().parse().ok()),
        }
    }

    /// Whether a program could use UMONITOR/UMWAIT here: the CPU has it
    /// and the kernel set it up.
    pub fn usable(&self) -> bool {
        self.cpu && self.kernel
    }
}

#[cfg(target_arch = "x86_64")]
fn cpu_has_waitpkg() -> bool {
    use std::arch::x86_64::{__cpuid, __cpuid_count};
    // Leaf 0's EAX: the largest basic leaf; leaf 7 is defined only up to it.
    __cpuid(0).eax >= 7 && __cpuid_count(7, 0).ecx & (1 << 5) != 0
}

#[cfg(not(target_arch = "x86_64"))]
fn cpu_has_waitpkg() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_side_is_read_from_sysfs() {
        let root = std::env::temp_dir().join(format!("pollnic-umwait-{}", std::process::id()));
        let dir = root.join("devices/system/cpu/umwait_control");
        let none = Waitpkg::detect(&Sysfs::new(&root));
        assert!(!none.kernel && none.max_time_tsc.is_none(), "{none:?}");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("max_time"), "100000\n").unwrap();
        let w = Waitpkg::detect(&Sysfs::new(&root));
        std::fs::remove_dir_all(&root).unwrap();
        assert!(w.kernel, "{w:?}");
        assert_eq!(w.max_time_tsc, Some(100_000));
        assert_eq!(w.usable(), w.cpu);
    }

    /// CPUID agrees with the kernel's flags (x86-64 Linux).
    #[test]
    fn cpuid_agrees_with_proc_cpuinfo() {
        let info = std::fs::read_to_string("/proc/cpuinfo").expect("/proc/cpuinfo");
        let flags = info
            .lines()
            .find(|l| l.starts_with("flags"))
            .expect("a flags line in /proc/cpuinfo");
        let listed = flags.split_whitespace().any(|f| f == "waitpkg");
        assert_eq!(
            cpu_has_waitpkg(),
            listed,
            "CPUID.7.0:ECX[5] against /proc/cpuinfo's flags"
        );
    }
}
