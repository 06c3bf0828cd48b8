//! The kernel's tuning knobs that the tuned and busy-polling rows set, each
//! saved before it is changed and restored (then read back) after the row:
//! sysctls, IRQ affinity, per-device NAPI settings, channel count and
//! interrupt coalescing.
//!
//! Sources: Linux `Documentation/networking/scaling.rst` (RSS, IRQ affinity,
//! RPS), `Documentation/networking/napi.rst` (busy polling,
//! `napi_defer_hard_irqs`, `gro_flush_timeout`), `Documentation/admin-guide/
//! sysctl/net.rst` (`netdev_budget`, `netdev_budget_usecs`) and ethtool(8)
//! (`-C rx-usecs`, `-L combined`).

use std::io;
use std::path::PathBuf;

/// One knob: where it lives and how it is read and written.
#[derive(Clone, Debug)]
enum Knob {
    /// A procfs or sysfs file holding one value.
    File(PathBuf),
    /// `ethtool -C <if> rx-usecs` (ETHTOOL_GCOALESCE / ETHTOOL_SCOALESCE).
    RxUsecs(String),
    /// `ethtool -L <if> combined` (ETHTOOL_GCHANNELS / ETHTOOL_SCHANNELS).
    Combined(String),
}

impl Knob {
    fn read(&self) -> io::Result<String> {
        match self {
            Knob::File(p) => std::fs::read_to_string(p).map(|s| s.trim().to_owned()),
            Knob::RxUsecs(ifname) => crate::sock::rx_usecs(ifname).map(|v| v.to_string()),
            Knob::Combined(ifname) => crate::sock::combined_channels(ifname).map(|v| v.to_string()),
        }
    }

    fn write(&self, value: &str) -> io::Result<()> {
        let number = || {
            value
                .parse::<u32>()
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, value.to_owned()))
        };
        match self {
            Knob::File(p) => std::fs::write(p, value),
            Knob::RxUsecs(ifname) => crate::sock::set_rx_usecs(ifname, number()?),
            Knob::Combined(ifname) => {
                crate::sock::set_combined_channels(ifname, number()?).map(|_| ())
            }
        }
    }
}

/// Knobs set for one row, with the values they had before.
#[derive(Default)]
pub struct Knobs {
    /// (name as a user would write it, knob, value before, value set).
    set: Vec<(String, Knob, String, String)>,
}

impl Knobs {
    fn apply(&mut self, name: String, knob: Knob, value: &str) -> Result<(), String> {
        let before = knob.read().map_err(|e| format!("reading {name}: {e}"))?;
        knob.write(value)
            .map_err(|e| format!("setting {name} = {value}: {e}"))?;
        let now = knob.read().map_err(|e| format!("reading {name}: {e}"))?;
        self.set.push((name.clone(), knob, before, now.clone()));
        if now != value {
            return Err(format!("{name}: set to {value}, reads back {now}"));
        }
        Ok(())
    }

    /// `sysctl -w net.core.<name>=<value>`.
    pub fn sysctl(&mut self, name: &str, value: &str) -> Result<(), String> {
        let path = PathBuf::from("/proc/sys").join(name.replace('.', "/"));
        self.apply(format!("sysctl {name}"), Knob::File(path), value)
    }

    /// `/sys/class/net/<if>/<name>` (e.g. `napi_defer_hard_irqs`, `gro_flush_timeout`).
    pub fn netdev(&mut self, ifname: &str, name: &str, value: &str) -> Result<(), String> {
        let path = PathBuf::from(format!("/sys/class/net/{ifname}/{name}"));
        self.apply(format!("{ifname} {name}"), Knob::File(path), value)
    }

    /// `/proc/irq/<irq>/smp_affinity_list`.
    pub fn irq_affinity(&mut self, irq: u32, label: &str, cores: &str) -> Result<(), String> {
        let path = PathBuf::from(format!("/proc/irq/{irq}/smp_affinity_list"));
        self.apply(
            format!("IRQ {irq} ({label}) smp_affinity_list"),
            Knob::File(path),
            cores,
        )
    }

    /// `ethtool -C <if> rx-usecs <usecs>`.
    pub fn rx_usecs(&mut self, ifname: &str, usecs: u32) -> Result<(), String> {
        self.apply(
            format!("ethtool -C {ifname} rx-usecs"),
            Knob::RxUsecs(ifname.to_owned()),
            &usecs.to_string(),
        )
    }

    /// `ethtool -L <if> combined <n>` (the driver resets the port when it changes).
    pub fn combined(&mut self, ifname: &str, n: u32) -> Result<(), String> {
        self.apply(
            format!("ethtool -L {ifname} combined"),
            Knob::Combined(ifname.to_owned()),
            &n.to_string(),
        )
    }

    /// What was set, for the row's note: `name=value` each.
    pub fn describe(&self) -> String {
        self.set
            .iter()
            .map(|(name, _, _, now)| format!("{name}={now}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Puts every knob back (last set, first restored) and reads each back.
    /// Returns `restored N knobs` or what did not come back.
    pub fn restore(mut self) -> Result<String, String> {
        let mut bad = Vec::new();
        let n = self.set.len();
        while let Some((name, knob, before, _)) = self.set.pop() {
            if let Err(e) = knob.write(&before) {
                bad.push(format!("{name}: writing back {before}: {e}"));
                continue;
            }
            match knob.read() {
                Ok(now) if now == before => {}
                Ok(now) => bad.push(format!("{name}: wrote back {before}, reads {now}")),
                Err(e) => bad.push(format!("{name}: reading back: {e}")),
            }
        }
        if bad.is_empty() {
            Ok(format!("knobs restored: all {n} read back as before"))
        } else {
            Err(format!("KNOBS NOT RESTORED: {}", bad.join("; ")))
        }
    }
}

impl Drop for Knobs {
    /// A row that fails half-way still puts back what it changed.
    fn drop(&mut self) {
        while let Some((name, knob, before, _)) = self.set.pop() {
            if let Err(e) = knob.write(&before) {
                eprintln!("compare: restoring {name} to {before}: {e}");
            }
        }
    }
}

/// The IRQ of each RX queue of `ifname`, from /proc/interrupts (index = queue;
/// see [`pollnic_tools::cputime::parse_queue_irqs`]).
/// A virtio-net interface's vectors carry the virtio device's name
/// (`virtio<N>-input.<n>`), read from its `device` link.
pub fn queue_irqs(ifname: &str) -> Result<Vec<u32>, String> {
    let text = std::fs::read_to_string("/proc/interrupts")
        .map_err(|e| format!("reading /proc/interrupts: {e}"))?;
    let virtio = std::fs::read_link(format!("/sys/class/net/{ifname}/device"))
        .ok()
        .and_then(|l| l.file_name().and_then(|n| n.to_str()).map(str::to_owned))
        .filter(|n| n.starts_with("virtio"));
    let name = virtio.as_deref().unwrap_or(ifname);
    pollnic_tools::cputime::parse_queue_irqs(&text, name).ok_or_else(|| {
        format!("{ifname}: no IRQ named {name}-TxRx-<n>, {name}-rx-<n>, {name}-input.<n> or {name} in /proc/interrupts")
    })
}
