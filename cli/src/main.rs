//! `pollnic`: the command-line front end (status, bind, unbind, doctor,
//! rss). The driver work lives in the `pollnic` library; the host checks
//! (`doctor`) and the RSS calculator (`rsstool`) are this package's own.

#![deny(unsafe_code)]

mod bindcmd;
mod cores;
mod doctor;
#[cfg(test)]
mod fixture;
mod guard;
mod holders;
mod owner;
mod rsstool;
mod status;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use pollnic::lowlevel::selfcheck::selfcheck;
use pollnic::pci::{self, PciAddress, Sysfs};

/// Userspace poll-mode driver for three NIC families: Intel igb (82576/I350), Intel ixgbe (82599/X520) and virtio-net (the NIC of most VMs), over VFIO, or, opt-in and unsafe, over uio_pci_generic or VFIO's no-IOMMU mode where there is no IOMMU. The 82599 back end is tested against a software model only, not yet on hardware.
#[derive(Debug, Parser)]
#[command(name = "pollnic", version)]
struct Cli {
    /// sysfs mount point (to run against a fake tree).
    #[arg(long, global = true, default_value = "/sys", hide = true)]
    sysfs: PathBuf,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the Ethernet functions of the three families (Intel igb 82576/I350, Intel ixgbe
    /// 82599/X520, virtio-net): address, device, family, driver, DMA (the way in: vfio (iommu),
    /// vfio (no-iommu), uio (no-iommu)), IOMMU group, link, interface.
    Status,
    /// Hand NICs to vfio-pci (or, with no IOMMU, to uio_pci_generic or VFIO's no-IOMMU mode) for
    /// pollnic (remembers their kernel driver). Needs root.
    Bind {
        /// PCI addresses, e.g. 0000:01:00.0 or 01:00.0 (see `pollnic status`).
        #[arg(required = true, value_name = "ADDR")]
        addrs: Vec<PciAddress>,
        /// Hand each port's /dev/vfio/<group> to this user (name or UID, mode 0600), so
        /// pollnic runs without root; that user also needs RLIMIT_MEMLOCK raised (`pollnic doctor`).
        /// Refused with the no-IOMMU routes (--driver uio_pci_generic, --no-iommu).
        #[arg(long, value_name = "NAME")]
        user: Option<String>,
        /// Hand each port's /dev/vfio/<group> to this group (name or GID, mode 0660).
        #[arg(long, value_name = "NAME")]
        group: Option<String>,
        /// Driver to hand the ports to: vfio-pci (behind an IOMMU), or uio_pci_generic for a
        /// machine with no IOMMU (the NIC is then given physical addresses and can reach all of
        /// RAM; run the tools with --no-iommu). Loads the driver's module if need be.
        #[arg(long, value_enum, default_value = "vfio-pci", value_name = "DRIVER")]
        driver: bindcmd::DriverArg,
        /// vfio-pci on a machine with no IOMMU: turn on VFIO's no-IOMMU mode (the NIC is given
        /// physical addresses and can reach all of RAM; taints the kernel; needs a kernel built
        /// with CONFIG_VFIO_NOIOMMU) and bind in it; run the tools with --no-iommu.
        #[arg(long)]
        no_iommu: bool,
        /// Bind even a port whose kernel interface is up with an address or route, or whose
        /// IOMMU group holds a device in use by another kernel driver (refused otherwise).
        #[arg(long)]
        force: bool,
    },
    /// Check this host for pollnic: IOMMU, vfio-pci, hugepages, memlock, /dev/vfio, each port
    /// (driver, IOMMU group, link, NUMA node) and the cores; every finding is ok, warn or fail
    /// with the command that fixes it. Exits non-zero on any fail.
    Doctor {
        /// Ports to check (default: every supported NIC bound to vfio-pci).
        #[arg(value_name = "PORT")]
        ports: Vec<PciAddress>,
        /// Cores the poll loops will run on, e.g. 0,1 or 2-5.
        #[arg(long, default_value = "0")]
        cores: String,
        /// Queues per port (default: one per core in --cores). [range: 1..=16]
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..=16))]
        queues: Option<u16>,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// First contact with a port on real hardware: read its pin, link-mode
        /// and filter registers as found, bring it up, read them again and
        /// print a report to paste into a bug report (the port must be bound
        /// to vfio-pci; nothing is written beyond the bring-up).
        #[arg(long, value_name = "ADDR", conflicts_with_all = ["ports", "json"])]
        selfcheck: Option<PciAddress>,
    },
    /// Give NICs back from vfio-pci or uio_pci_generic to their previous kernel driver. Needs root.
    Unbind {
        /// PCI addresses, e.g. 0000:01:00.0 or 01:00.0 (see `pollnic status`).
        #[arg(required = true, value_name = "ADDR")]
        addrs: Vec<PciAddress>,
    },
    /// Which RX queue a flow lands on: its Toeplitz hash and redirection-table entry.
    ///
    /// Example: pollnic rss --src 10.0.0.1 --dst 10.0.0.2 --sport 1234 --dport 80 --proto tcp --queues 4
    Rss {
        /// Source IP address (IPv4 or IPv6).
        #[arg(long)]
        src: std::net::IpAddr,
        /// Destination IP address.
        #[arg(long)]
        dst: std::net::IpAddr,
        /// Source port. [range: 0..=65535]
        #[arg(long, default_value_t = 0)]
        sport: u16,
        /// Destination port. [range: 0..=65535]
        #[arg(long, default_value_t = 0)]
        dport: u16,
        /// tcp, udp (ports hashed) or other (addresses only).
        #[arg(long, default_value = "udp")]
        proto: String,
        /// Number of RX queues. [range: 1..=16]
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..=16), default_value_t = 2)]
        queues: u16,
        /// RSS key (receive-side scaling: the NIC spreads flows over its RX
        /// queues by a Toeplitz hash keyed with this): microsoft (default),
        /// symmetric, or 80 hex digits.
        #[arg(long, default_value = "microsoft")]
        key: String,
        /// Redirection table as queue numbers, repeated to 128 entries (default round robin).
        #[arg(long)]
        reta: Option<String>,
    },
}

/// Exit status for a bad command line (clap's, and `sysexits`' EX_USAGE
/// convention of 2 that the example tools share).
const USAGE_EXIT: u8 = 2;

/// Parse the command line; `--help`/`--version` print and exit 0, any error
/// prints one line naming the option, the value and the valid range, and
/// exits [`USAGE_EXIT`] before anything is touched.
/// The first item of `v` that an earlier one equals.
fn twice<T: PartialEq + Copy>(v: &[T]) -> Option<T> {
    v.iter()
        .enumerate()
        .find(|(i, x)| v[..*i].contains(x))
        .map(|(_, x)| *x)
}

fn parse_cli() -> Result<Cli, ExitCode> {
    Cli::try_parse().map_err(|e| {
        use clap::error::ErrorKind;
        if matches!(
            e.kind(),
            ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
        ) {
            e.exit()
        }
        eprintln!("pollnic: {}", one_line(&e));
        ExitCode::from(USAGE_EXIT)
    })
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

fn main() -> ExitCode {
    let cli = match parse_cli() {
        Ok(c) => c,
        Err(code) => return code,
    };
    let sysfs = Sysfs::new(cli.sysfs);
    // A port named twice is a bad command line (exit 2), said before any
    // check or guard looks at the ports (docs/tools/pollnic.md).
    if let Command::Bind { addrs, .. } | Command::Unbind { addrs } = &cli.command {
        if let Some(a) = twice(addrs) {
            eprintln!("pollnic: {a} is given twice: give each port once");
            return ExitCode::from(USAGE_EXIT);
        }
    }
    match cli.command {
        Command::Status => status(&sysfs),
        Command::Bind {
            addrs,
            user,
            group,
            driver,
            no_iommu,
            force,
        } => bind(
            &sysfs,
            &addrs,
            owner::Owner { user, group },
            driver,
            no_iommu,
            force,
        ),
        Command::Doctor {
            selfcheck: Some(addr),
            ..
        } => match selfcheck(addr, &pollnic::DeviceConfig::default()) {
            Ok(sc) => {
                print!("{}", doctor::selfcheck::text(&sc));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("pollnic: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Doctor {
            ports,
            cores,
            queues,
            json,
            selfcheck: None,
        } => doctor(sysfs, &ports, &cores, queues, json),
        Command::Unbind { addrs } => {
            if !say_who_holds(&sysfs, &addrs) {
                eprintln!("pollnic: nothing was unbound");
                return ExitCode::FAILURE;
            }
            match pci::unbind_vfio_all(&sysfs, &addrs) {
                Ok(reports) => {
                    for r in &reports {
                        println!("{r}");
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => failed(&e, "unbound"),
            }
        }
        Command::Rss {
            src,
            dst,
            sport,
            dport,
            proto,
            queues,
            key,
            reta,
        } => {
            match rss(
                src,
                dst,
                sport,
                dport,
                &proto,
                queues,
                &key,
                reta.as_deref(),
            ) {
                Ok(text) => {
                    print!("{text}");
                    ExitCode::SUCCESS
                }
                // Every failure of `rss` is a value on its command line.
                Err(e) => {
                    eprintln!("pollnic: {e}");
                    ExitCode::from(USAGE_EXIT)
                }
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn rss(
    src: std::net::IpAddr,
    dst: std::net::IpAddr,
    sport: u16,
    dport: u16,
    proto: &str,
    queues: u16,
    key: &str,
    reta: Option<&str>,
) -> Result<String, String> {
    // RETA entries hold a 4-bit queue number on the 82576 (and the 82599):
    // RSS spreads over at most 16 queues.
    if queues == 0 || queues > pollnic_hw::igb::MAX_QUEUES_82576 {
        return Err(format!(
            "--queues {queues}: RSS spreads over 1 to {} queues",
            pollnic_hw::igb::MAX_QUEUES_82576
        ));
    }
    let flow = rsstool::flow(src, dst, sport, dport, proto)?;
    let key = rsstool::parse_key(key)?;
    let reta = match reta {
        Some(r) => rsstool::parse_reta(r, queues)?,
        None => pollnic_hw::rss::Reta::round_robin(queues),
    };
    Ok(rsstool::explain(&flow, &key, &reta, queues))
}

fn status(sysfs: &Sysfs) -> ExitCode {
    match status::status(sysfs) {
        Ok(rows) if rows.is_empty() => {
            println!("{}", status::NO_NICS_MESSAGE);
            ExitCode::SUCCESS
        }
        Ok(rows) => {
            print!("{}", status::format_status(&rows));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pollnic: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `pollnic bind`: the library's checks, then the guard, then the bind (see
/// [`bindcmd`]), then `--user`/`--group`.
fn bind(
    sysfs: &Sysfs,
    addrs: &[PciAddress],
    owner: owner::Owner,
    driver: bindcmd::DriverArg,
    no_iommu: bool,
    force: bool,
) -> ExitCode {
    let mode = bindcmd::mode(driver, no_iommu);
    if mode.is_physical() && !owner.is_empty() {
        eprintln!("pollnic: {}", bindcmd::NO_USER_FOR_PHYSICAL);
        return ExitCode::from(USAGE_EXIT);
    }
    if let Err(e) = owner.resolve() {
        eprintln!("pollnic: {e}");
        return ExitCode::FAILURE;
    }
    // Every check that would make the bind fail, for every port, before the
    // guard's advice (which costs the user an interface); then the guard,
    // for every port before any is bound: nothing half-done.
    let gate = bindcmd::gate(
        || pci::check_bind_all(sysfs, addrs, mode),
        || {
            let mut refusals = guard::refusals(sysfs, addrs);
            // uio_pci_generic does not use the IOMMU group: its other members do not matter.
            if mode == pci::BindMode::Uio {
                refusals.retain(|r| !matches!(r, guard::Refusal::GroupInUse { .. }));
            }
            refusals
        },
        force,
    );
    for line in &gate.lines {
        eprintln!("pollnic: {line}");
    }
    if !gate.go {
        return ExitCode::FAILURE;
    }
    if let Some(w) = bindcmd::physical_warning(mode) {
        eprintln!("pollnic: {w}");
    }
    // All or nothing: every port is checked again before any is bound, and
    // a failure part-way puts back the ports already bound.
    let reports = match pci::bind_all(sysfs, addrs, mode) {
        Ok(reports) => reports,
        Err(e) => return failed(&e, "bound"),
    };
    let mut handed = true;
    for r in &reports {
        println!("{r}");
        for w in &r.warnings {
            eprintln!("pollnic: warning: {}: {w}", r.addr);
        }
        if !owner.is_empty() {
            match owner.apply(&r.node) {
                Ok(line) => println!("{}: {line}", r.addr),
                Err(e) => {
                    eprintln!("pollnic: {}: {e}", r.addr);
                    handed = false;
                }
            }
        }
    }
    if handed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Before an unbind: name the processes that hold each port's VFIO group,
/// since the kernel's unbind waits until they let go of it (a pollnic
/// program does at once, on VFIO's device-release request, and exits 69).
/// A port on `uio_pci_generic` has no such request: its unbind would not
/// wait, and the port would go to its kernel driver under the program that
/// drives it; so a held uio port is named and `false` is returned (the
/// unbind is refused).
fn say_who_holds(sysfs: &Sysfs, addrs: &[PciAddress]) -> bool {
    let mut free = true;
    for &addr in addrs {
        let Ok(dev) = pci::PciDevice::read(sysfs, addr) else {
            continue;
        };
        let Some(mode) = pci::BindMode::of(sysfs, &dev) else {
            continue;
        };
        let Some(node) = mode.node(sysfs, &dev) else {
            continue;
        };
        for (pid, comm) in holders::holders(std::path::Path::new("/proc"), &node) {
            if mode == pci::BindMode::Uio {
                free = false;
                eprintln!(
                    "pollnic: {addr} is in use by {comm} (pid {pid}) through {}: \
                     uio_pci_generic does not ask it to let go, and the port would change driver \
                     under it; stop pid {pid} first",
                    node.display()
                );
            } else {
                eprintln!(
                    "pollnic: {addr} is in use by {comm} (pid {pid}): the kernel asks it to \
                     release the port, and the unbind waits until it does (a pollnic program \
                     stops at once; if this hangs, stop pid {pid})"
                );
            }
        }
    }
    free
}

/// Reports a failed multi-port `bind`/`unbind` (`done`: "bound" or
/// "unbound"): each failed check on a line of its own, or the step that
/// failed with what was put back.
fn failed(e: &pci::Error, done: &str) -> ExitCode {
    match e {
        pci::Error::Refused { errors } => {
            for e in errors {
                eprintln!("pollnic: {e}");
            }
            eprintln!("pollnic: nothing was {done}");
        }
        e => eprintln!("pollnic: {e}"),
    }
    ExitCode::FAILURE
}

fn doctor(
    sysfs: Sysfs,
    ports: &[PciAddress],
    cores: &str,
    queues: Option<u16>,
    json: bool,
) -> ExitCode {
    // A list that does not parse, or names a core twice, is a bad command
    // line (status 2); a core this machine lacks is one of doctor's findings.
    let cores = match crate::cores::parse_cores(cores) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("pollnic: --cores {cores}: {e}");
            return ExitCode::from(USAGE_EXIT);
        }
    };
    if let Some(c) = twice(&cores) {
        eprintln!("pollnic: --cores: core {c} is given twice: give each core once");
        return ExitCode::from(USAGE_EXIT);
    }
    let cfg = pollnic::DeviceConfig::default()
        .with_queues(queues.unwrap_or(cores.len().min(usize::from(u16::MAX)) as u16));
    if let Err(e) = cfg.validate() {
        eprintln!("pollnic: --queues: {e}");
        return ExitCode::FAILURE;
    }
    let roots = doctor::Roots {
        sysfs,
        ..Default::default()
    };
    let facts = doctor::gather(&roots, ports, &cores, &cfg);
    let findings = doctor::run(&facts);
    if json {
        println!("{}", doctor::report::json(&findings, &facts.need));
    } else {
        print!("{}", doctor::report::text(&findings));
    }
    if doctor::checks::any_failed(&findings) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
