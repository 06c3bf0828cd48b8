//! The example tools' command lines. Every numeric option states its range
//! in its `--help` (`[range: MIN..=MAX]`) and clap enforces it when parsing,
//! so a value out of range is refused before any device is opened: one line
//! on stderr naming the option, the value and the range, and exit status 2
//! (the status clap and the BSD `sysexits` usage convention give a bad
//! command line). Checks clap cannot make (a combination of options, a
//! power of two) return a [`Usage`], which exits the same way.

use std::fmt;

/// Exit status for a bad command line.
pub const USAGE_EXIT: i32 = 2;

/// A bad command line found after parsing; [`exit_with`] exits 2 for it.
#[derive(Debug)]
pub struct Usage(pub String);

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

impl From<String> for Usage {
    fn from(s: String) -> Self {
        Usage(s)
    }
}

/// Parse this process's arguments into `T`. `--help` and `--version` print
/// and exit 0; any error prints one line, `TOOL: <clap's message>`, and
/// exits [`USAGE_EXIT`].
///
/// A negative number is taken as an option's value, not as an unknown
/// option: `--rate -5` is refused for its range, naming `--rate`, instead
/// of "unexpected argument '-5'".
pub fn parse<T: clap::Parser>(tool: &str) -> T {
    try_parse_from::<T>(std::env::args_os()).unwrap_or_else(|e| {
        use clap::error::ErrorKind;
        if matches!(
            e.kind(),
            ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
        ) {
            e.exit()
        }
        eprintln!("{tool}: {}", one_line(&e));
        std::process::exit(USAGE_EXIT)
    })
}

/// [`parse`]'s parser, on any argument list.
fn try_parse_from<T: clap::Parser>(
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> Result<T, clap::Error> {
    let mut cmd = T::command().allow_negative_numbers(true);
    let mut m = cmd.try_get_matches_from_mut(args)?;
    T::from_arg_matches_mut(&mut m).map_err(|e| e.format(&mut cmd))
}

/// End the process after `run` failed: [`USAGE_EXIT`] for a [`Usage`],
/// [`crate::signal::REMOVED_EXIT`] for `pollnic::Error::DeviceRemoved` (the
/// kernel took a port back), 1 for anything else, with one line `TOOL:
/// message`.
pub fn exit_with(tool: &str, e: &(dyn std::error::Error + 'static)) -> ! {
    eprintln!("{tool}: {e}");
    std::process::exit(exit_status(e))
}

/// The status [`exit_with`] exits with for `e`.
pub fn exit_status(e: &(dyn std::error::Error + 'static)) -> i32 {
    if e.is::<Usage>() {
        USAGE_EXIT
    } else if matches!(
        e.downcast_ref::<pollnic::Error>(),
        Some(pollnic::Error::DeviceRemoved { .. })
    ) {
        crate::signal::REMOVED_EXIT
    } else {
        1
    }
}

/// `--cores`: a list such as `0,2-3` ([`crate::cores::parse_cores`]), without
/// duplicates, of cores this process may run on ([`crate::cores::check_cores`]).
///
/// # Errors
/// A [`Usage`] naming `option`.
pub fn cores(option: &str, s: &str) -> Result<Vec<usize>, Usage> {
    let cores = crate::cores::parse_cores(s).map_err(|e| Usage(format!("{option} {s}: {e}")))?;
    if let Some(c) = cores
        .iter()
        .enumerate()
        .find(|(i, c)| cores[..*i].contains(c))
        .map(|(_, c)| *c)
    {
        return Err(Usage(format!(
            "{option} {s}: core {c} is given twice: give each core once"
        )));
    }
    crate::cores::check_cores(&cores).map_err(|e| Usage(format!("{option} {s}: {e}")))?;
    Ok(cores)
}

/// A value parser for a number of seconds in `0.1..=3600` (compare's rows).
///
/// # Errors
/// The message clap prints.
pub fn row_seconds(s: &str) -> Result<f64, String> {
    f64_in(s, 0.1, 3600.0)
}

/// A value parser for a percentage in `0..=100`.
///
/// # Errors
/// The message clap prints.
pub fn percent(s: &str) -> Result<f64, String> {
    f64_in(s, 0.0, 100.0)
}

fn f64_in(s: &str, lo: f64, hi: f64) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if v.is_finite() && (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{s} is not in {lo}..={hi}"))
    }
}

/// clap's error in brief: its first line; for a missing argument, the
/// arguments' names and then the usage line; where clap lists the possible
/// values on a line of their own, those too.
fn one_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let mut line = lines
        .first()
        .copied()
        .unwrap_or("bad command line")
        .trim_start_matches("error: ")
        .to_string();
    if e.kind() == clap::error::ErrorKind::MissingRequiredArgument {
        let names: Vec<&str> = lines
            .iter()
            .skip(1)
            .take_while(|l| !l.starts_with("Usage:"))
            .copied()
            .collect();
        line = format!("{line} {}", names.join(", "));
        if let Some(usage) = lines.iter().find(|l| l.starts_with("Usage:")) {
            line = format!("{line}\n{usage}");
        }
    } else if let Some(p) = lines.iter().find(|l| l.starts_with("[possible values")) {
        line = format!("{line} {p}");
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removed_device_has_its_own_exit_status() {
        let addr: pollnic::pci::PciAddress = "0000:00:08.0".parse().unwrap();
        let removed: Box<dyn std::error::Error> = Box::new(pollnic::Error::DeviceRemoved { addr });
        assert_eq!(exit_status(&*removed), crate::signal::REMOVED_EXIT);
        assert!(removed.to_string().contains("pollnic bind 0000:00:08.0"));
        let other: Box<dyn std::error::Error> = Box::new(pollnic::Error::NoPorts);
        assert_eq!(exit_status(&*other), 1);
        assert_eq!(exit_status(&Usage("x".into())), USAGE_EXIT);
    }

    #[test]
    fn duplicate_cores_are_refused_and_fractions_checked() {
        let e = cores("--cores", "0,0").unwrap_err().to_string();
        assert!(e.contains("core 0 is given twice"), "{e}");
        assert!(cores("--cores", "x").is_err());
        assert_eq!(row_seconds("3"), Ok(3.0));
        assert!(row_seconds("0").unwrap_err().contains("0.1..=3600"));
        assert!(percent("nan").is_err() && percent("-1").is_err() && percent("101").is_err());
    }
}

/// How the receive queues wait for frames: `--rx-mode`, `--max-spin-us`,
/// `--rx-usecs`, `--max-latency-us` ([`pollnic::RxMode`],
/// [`pollnic::DeviceConfig::moderation`]).
#[derive(clap::Args, Clone, Debug)]
pub struct RxModeArgs {
    /// How each RX queue's thread waits: `poll` (busy-poll, a core per
    /// queue), `irq` (sleep on the queue's own interrupt, an MSI-X vector,
    /// at every empty poll) or `adaptive` (poll while frames arrive, spin on an empty
    /// ring for twice the measured gap between frames, at most
    /// --max-spin-us, then sleep).
    #[arg(long, default_value = "poll", value_parser = ["poll", "irq", "adaptive"])]
    pub rx_mode: String,
    /// Adaptive mode: the longest spin on an empty ring before the queue
    /// sleeps on its interrupt, in µs (0: sleep at the first empty poll). [range: 0..=1000000]
    #[arg(value_parser = clap::value_parser!(u64).range(0..=1_000_000), long, default_value_t = 50)]
    pub max_spin_us: u64,
    /// Interrupt throttle in µs: at least this long between two interrupts
    /// of one queue (the NIC's EITR, interrupt throttle register; 0 = none),
    /// as `ethtool -C <if> rx-usecs`. [range: 0..=1022]
    #[arg(value_parser = clap::value_parser!(u32).range(0..=1022), long, default_value_t = 0, conflicts_with = "max_latency_us")]
    pub rx_usecs: u32,
    /// Dynamic interrupt moderation instead of a fixed --rx-usecs: igb's
    /// classes (49 µs for small frames, 245 µs for bulk), never longer than
    /// this many µs. [range: 1..=1022]
    #[arg(value_parser = clap::value_parser!(u32).range(1..=1022), long)]
    pub max_latency_us: Option<u32>,
}

impl RxModeArgs {
    /// The mode these options name.
    pub fn mode(&self) -> pollnic::RxMode {
        match self.rx_mode.as_str() {
            "irq" => pollnic::RxMode::interrupt(),
            "adaptive" => pollnic::RxMode::Adaptive {
                max_spin: std::time::Duration::from_micros(self.max_spin_us),
                timeout: pollnic::irq::DEFAULT_WAIT,
            },
            _ => pollnic::RxMode::BusyPoll,
        }
    }
    /// The interrupt moderation these options name.
    pub fn moderation(&self) -> pollnic::Moderation {
        match self.max_latency_us {
            Some(us) => pollnic::Moderation::dynamic(us),
            None => pollnic::Moderation::Fixed {
                usecs: self.rx_usecs,
            },
        }
    }
}

/// `--no-iommu`: the DMA addressing every tool offers
/// ([`pollnic::DmaAddressing`]).
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct DmaArgs {
    /// Open the ports with physical addresses, for a machine with no IOMMU
    /// (ports bound with `pollnic bind --driver uio_pci_generic`). UNSAFE
    /// for the machine: the NIC can then reach all of RAM. Needs root
    /// (CAP_SYS_ADMIN). See docs/no-iommu.md.
    #[arg(long)]
    pub no_iommu: bool,
}

impl DmaArgs {
    /// `cfg` with the addressing asked for; with `--no-iommu`, one loud line
    /// on stderr first, naming `tool`.
    pub fn apply(self, tool: &str, cfg: pollnic::DeviceConfig) -> pollnic::DeviceConfig {
        if self.no_iommu {
            eprintln!(
                "{tool}: WARNING --no-iommu: DMA with physical addresses and no IOMMU; the NIC \
                 can read and write all of this machine's RAM"
            );
            cfg.with_unsafe_no_iommu()
        } else {
            cfg
        }
    }
}
