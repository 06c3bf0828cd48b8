//! `pollnic`: command-line front end. All logic lives in the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use pollnic::pci::{self, PciAddress, Sysfs};

/// Userspace poll-mode driver for Intel igb (82576/I350) and ixgbe (82599/X520) NICs over VFIO.
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
    /// List Intel Ethernet functions: address, device, driver, IOMMU group, link, interface.
    Status,
    /// Hand NICs to vfio-pci for pollnic (remembers their kernel driver). Needs root.
    Bind {
        /// PCI addresses, e.g. 0000:01:00.0 or 01:00.0 (see `pollnic status`).
        #[arg(required = true, value_name = "ADDR")]
        addrs: Vec<PciAddress>,
    },
    /// Give NICs back from vfio-pci to their previous kernel driver. Needs root.
    Unbind {
        /// PCI addresses, e.g. 0000:01:00.0 or 01:00.0 (see `pollnic status`).
        #[arg(required = true, value_name = "ADDR")]
        addrs: Vec<PciAddress>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let sysfs = Sysfs::new(cli.sysfs);
    match cli.command {
        Command::Status => status(&sysfs),
        Command::Bind { addrs } => for_each(&addrs, |a| {
            pci::bind_vfio(&sysfs, a).map(|r| {
                println!("{r}");
                for w in &r.warnings {
                    eprintln!("pollnic: warning: {}: {w}", r.addr);
                }
            })
        }),
        Command::Unbind { addrs } => for_each(&addrs, |a| {
            pci::unbind_vfio(&sysfs, a).map(|r| println!("{r}"))
        }),
    }
}

fn status(sysfs: &Sysfs) -> ExitCode {
    match pci::status(sysfs) {
        Ok(rows) if rows.is_empty() => {
            println!("{}", pci::NO_NICS_MESSAGE);
            ExitCode::SUCCESS
        }
        Ok(rows) => {
            print!("{}", pci::format_status(&rows));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pollnic: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `op` on every address, reporting each failure; fails if any did.
fn for_each(addrs: &[PciAddress], mut op: impl FnMut(PciAddress) -> pci::Result<()>) -> ExitCode {
    let mut ok = true;
    for &addr in addrs {
        if let Err(e) = op(addr) {
            eprintln!("pollnic: {e}");
            ok = false;
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
