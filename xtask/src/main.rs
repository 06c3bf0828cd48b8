//! `cargo xtask`: the pollnic QEMU testbed.
//!
//! Boots Debian's kernel under QEMU (TCG) with two pairs of back-to-back emulated igb NICs behind an
//! emulated Intel IOMMU, shares the host's root filesystem into the guest, and runs host-built
//! binaries there. See `cargo xtask --help`.

#![forbid(unsafe_code)]

mod apt;
mod cargo;
mod cmd;
mod compare;
mod console;
mod count;
mod cpio;
mod demo;
mod elf;
mod fuzz;
mod guest;
mod install;
mod kmod;
mod layout;
mod noiommu_kmod;
mod qemu;
mod qmp;
mod runscript;
mod soak;
mod tests;
mod testtools;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};

use layout::Layout;
use qemu::VmOptions;

/// Exit status when the testbed itself fails (as opposed to a command in the guest).
const TESTBED_FAILURE: u8 = 125;

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    about = "The pollnic QEMU testbed",
    after_help = "Exit status: `vm` and `demo` exit with the guest command's status, `test` with 0 or 1; \
                  any testbed failure (QEMU, install, build, timeout) exits 125."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Which Debian kernel the guest boots: `current` (the newest in trixie-backports, 7.x:
    /// AF_XDP zero-copy on igb, busy polling) or `lts` (the host release's own, bookworm:
    /// 6.1). Default: $POLLNIC_GUEST_KERNEL, else `current`.
    #[arg(long, global = true, value_enum)]
    guest_kernel: Option<install::GuestKernel>,
}

#[derive(Subcommand)]
enum Command {
    /// Install what is missing (QEMU >= 8.1 from backports, busybox-static, kmod) and
    /// download + unpack Debian's guest kernel into target/testbed/. Needs root only to install.
    Setup,
    /// Build target/testbed/initramfs.cpio.gz (busybox, kernel modules, /init).
    Guest {
        /// Rebuild even if up to date.
        #[arg(long)]
        force: bool,
    },
    /// Boot the guest and run a command in it (in the repo, with the host's root as /).
    ///
    /// Several words after `--` are one command (quoted as given); a single word is a shell
    /// command line, so pipes and `;` work in it.
    ///
    /// Example: cargo xtask vm -- ls /dev/vfio
    ///
    /// Example: cargo xtask vm -- 'target/debug/pollnic status | grep vfio'
    Vm {
        #[command(flatten)]
        vm: VmArgs,
        /// Do not bind the NICs to vfio-pci (and do not build the pollnic CLI).
        #[arg(long)]
        no_bind: bool,
        /// The command and its arguments.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<OsString>,
    },
    /// The full test run: host tests, then the guest_* tests inside one guest.
    Test {
        #[command(flatten)]
        vm: VmArgs,
        /// Limit in seconds for each guest test executable (then it counts as failed).
        #[arg(long, default_value_t = 300)]
        test_timeout: u64,
        /// Seconds of fuzzing the rings (`cargo xtask fuzz`) after the host tests; 0 skips it
        /// (the summary says so).
        #[arg(long, default_value_t = 60)]
        fuzz_seconds: u64,
    },
    /// Fuzz the RX/TX rings, mempool and packets against a hostile device model
    /// (cargo-fuzz, libFuzzer + AddressSanitizer, nightly toolchain): the target `rings` (scalar
    /// burst loops), then `rings_vector` (vector loops), then `virtq` (the split virtqueue
    /// against a hostile virtio device), then `virtq_packed` (the packed one), each for a
    /// quarter of --seconds (--runs applies to each). Installs cargo-fuzz when missing; keeps the corpora in
    /// target/fuzz-corpus/<target>; a finding is saved in target/fuzz-artifacts/<target>/ and
    /// fails the run.
    ///
    /// Example: cargo xtask fuzz --seconds 600 --jobs 2
    ///
    /// Example (the long run the README quotes): cargo xtask fuzz --runs 10000000 --seconds 0 --background
    Fuzz {
        /// How long to fuzz, in seconds; 0 means no time limit (then give --runs).
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// Stop after this many executions per process (libFuzzer's -runs); 0 means no limit.
        #[arg(long, default_value_t = 0)]
        runs: u64,
        /// Fuzzing processes sharing one corpus; the machine-wide testbed lock is held meanwhile.
        #[arg(long, default_value_t = 1)]
        jobs: u32,
        /// Run at nice 19 without taking the testbed lock, so a long run can go on while
        /// guests boot (the guest gets the CPU first; the run just takes longer).
        #[arg(long)]
        background: bool,
    },
    /// Run the loopback example between the guest's two igb ports.
    ///
    /// Example: cargo xtask demo -- --frame-size 64
    Demo {
        #[command(flatten)]
        vm: VmArgs,
        /// How long the loopback runs.
        #[arg(long, default_value_t = 10)]
        seconds: u32,
        /// Send as fast as the generator can instead of at the paced default
        /// (20,000 packets/s, which the testbed sustains): under TCG the
        /// emulated NIC's RX ring then overflows, and the summary says so.
        #[arg(long)]
        full_speed: bool,
        /// Extra arguments for the loopback example (`--rate N` overrides the pace).
        #[arg(last = true, value_name = "ARGS")]
        extra: Vec<String>,
    },
    /// Soak: loopback traffic of mixed sizes over 2 RSS queues with RETA changes and packets
    /// dropped on another thread, for N minutes; then checks that every mempool is full,
    /// HugePages_Free is back, the ports re-open and the counters agree (tests/guest_soak.rs).
    ///
    /// Example: cargo xtask soak --minutes 10
    Soak {
        #[command(flatten)]
        vm: VmArgs,
        /// How long the traffic runs.
        #[arg(long, default_value_t = 10)]
        minutes: u64,
    },
    /// Compare receive paths (pollnic 1/2 queues, kernel AF_PACKET, recvmmsg and
    /// AF_XDP, DPDK testpmd) under the same traffic; writes results/compare-<date>/.
    ///
    /// Example: cargo xtask compare -- --seconds 5 --rate 30000
    Compare {
        #[command(flatten)]
        vm: VmArgs,
        /// Do not install DPDK or libxdp (their rows then say why they are missing).
        #[arg(long)]
        no_dpdk: bool,
        /// Do not load the guest-work counter (no instructions or bytes per packet).
        #[arg(long)]
        no_count: bool,
        /// Which port pair: `igb` (ports 0 and 1, the default) or `virtio`
        /// (the two virtio-net ports; the kernel rows then run on the
        /// kernel's virtio_net and are named `kernel-virtio-*`, pollnic's
        /// `pollnic-virtio-*`).
        #[arg(long, value_enum, default_value_t = compare::Family::Igb)]
        family: compare::Family,
        /// Extra arguments for the compare example.
        #[arg(last = true, value_name = "ARGS")]
        extra: Vec<String>,
    },
}

/// Guest machine options shared by the commands that boot it.
#[derive(Args)]
struct VmArgs {
    /// Virtual CPUs.
    #[arg(long, default_value_t = 2)]
    smp: u32,
    /// Guest memory in MiB.
    #[arg(long, default_value_t = 3072)]
    mem: u32,
    /// 2 MiB hugepages reserved in the guest.
    #[arg(long, default_value_t = 512)]
    hugepages: u32,
    /// Overall limit in seconds, from boot to power-off.
    #[arg(long, default_value_t = 900)]
    timeout: u64,
    /// Extra kernel command line words (e.g. `loglevel=7` to see the boot log).
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    kernel_args: Option<String>,
    /// Load the guest-work counter (a TCG plugin): per vCPU, user and kernel
    /// instructions and bytes loaded and stored, the idle loop left out; the
    /// guest boots with `nokaslr` and reads them from `$POLLNIC_COUNTS`
    /// (docs/design/counting.md). `compare` counts unless `--no-count`.
    #[arg(long)]
    count: bool,
    /// With the counter: count instructions only, not memory bytes (faster).
    #[arg(long)]
    count_no_mem: bool,
    /// With the counter: no per-function profile (`compare --top-functions`
    /// then says there is none; faster).
    #[arg(long)]
    count_no_profile: bool,
    /// With the counter (implies `--count`): the plugin's cache model, per
    /// vCPU L1D and L2 and a shared LLC (Ice Lake-SP sizes), with device
    /// writes found by a byte shadow; `marker` models only marked regions
    /// (docs/design/counting.md). Slower; off by default.
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "on", require_equals = true, value_name = "on|marker")]
    count_cache: Option<count::CacheModel>,
    /// Boot the guest that looks like a plain cloud VM: no virtual IOMMU
    /// (no `intel-iommu` device, no `intel_iommu=on`), virtio-net ports
    /// without `iommu_platform` (no VIRTIO_F_ACCESS_PLATFORM). The ports
    /// are bound to `uio_pci_generic` instead of vfio-pci, and the guest
    /// has `POLLNIC_NO_IOMMU=1` (docs/no-iommu.md).
    #[arg(long)]
    no_iommu: bool,
}

impl VmArgs {
    fn options(&self, bind: bool) -> VmOptions {
        VmOptions {
            smp: self.smp,
            mem_mib: self.mem,
            hugepages: self.hugepages,
            bind,
            timeout: Duration::from_secs(self.timeout),
            kernel_args: self.kernel_args.clone().unwrap_or_default(),
            count: None,
            no_iommu: self.no_iommu,
        }
    }

    /// [`Self::options`], with the counter loaded when `count` (or `--count`) says so.
    fn options_counting(&self, layout: &Layout, bind: bool, count: bool) -> Result<VmOptions> {
        let mut opts = self.options(bind);
        let cache = self.count_cache.unwrap_or_default();
        if count || self.count || cache != count::CacheModel::Off {
            let image = guest::prepare(layout)?;
            opts.count = Some(count::prepare(
                layout,
                &image,
                !self.count_no_mem,
                !self.count_no_profile,
                cache,
            )?);
        }
        Ok(opts)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command, cli.guest_kernel) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("[xtask] error: {err:#}");
            ExitCode::from(TESTBED_FAILURE)
        }
    }
}

fn status(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(TESTBED_FAILURE))
}

fn run(command: Command, guest_kernel: Option<install::GuestKernel>) -> Result<ExitCode> {
    let mut layout = Layout::discover()?;
    layout.guest_kernel = install::GuestKernel::choose(guest_kernel)?;
    match command {
        Command::Setup => {
            install::setup(&layout)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Guest { force } => {
            let kernel = install::setup(&layout)?;
            guest::build(&layout, &kernel, force)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Vm {
            vm,
            no_bind,
            command,
        } => {
            let opts = vm.options_counting(&layout, !no_bind, false)?;
            let image = guest::prepare(&layout)?;
            if opts.bind {
                cargo::build_pollnic_cli(&layout)?;
            }
            let script = match command.as_slice() {
                [line] => format!("{}\n", line.to_string_lossy()),
                words => format!("{}\n", cmd::shell_join(words)),
            };
            let outcome = qemu::run_in_guest(&layout, &image, &script, &opts)?;
            Ok(status(outcome.code))
        }
        Command::Test {
            vm,
            test_timeout,
            fuzz_seconds,
        } => {
            let passed = tests::run(
                &layout,
                &vm.options(true),
                Duration::from_secs(test_timeout),
                fuzz_seconds,
            )?;
            Ok(if passed {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Fuzz {
            seconds,
            runs,
            jobs,
            background,
        } => {
            if seconds == 0 && runs == 0 {
                anyhow::bail!(
                    "`--seconds 0` needs a `--runs N` limit (or give a positive --seconds)"
                );
            }
            let budget = fuzz::Budget {
                seconds,
                runs,
                background,
            };
            let outcome = fuzz::run(&layout, budget, jobs)?;
            say!("fuzz: {}", fuzz::describe(&outcome));
            Ok(if outcome.clean {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Demo {
            vm,
            seconds,
            full_speed,
            extra,
        } => {
            let opts = vm.options_counting(&layout, true, false)?;
            let outcome = demo::run(&layout, &opts, seconds, full_speed, &extra)?;
            Ok(status(outcome.code))
        }
        Command::Soak { vm, minutes } => {
            let opts = vm.options_counting(&layout, true, false)?;
            let outcome = soak::run(&layout, &opts, minutes)?;
            Ok(status(outcome.code))
        }
        Command::Compare {
            mut vm,
            no_dpdk,
            no_count,
            family,
            mut extra,
        } => {
            // One flag asks for both: the plugin's model (here) and its
            // figures in the rows (the example's `--count-cache`).
            let example_asks = extra.iter().any(|a| a == "--count-cache");
            if example_asks && vm.count_cache.is_none() {
                vm.count_cache = Some(count::CacheModel::On);
            }
            if vm.count_cache.is_some_and(|c| c != count::CacheModel::Off) && !example_asks {
                extra.push("--count-cache".into());
            }
            if no_count && vm.count_cache.is_some_and(|c| c != count::CacheModel::Off) {
                anyhow::bail!("`--count-cache` needs the counter: drop `--no-count`");
            }
            let opts = vm.options_counting(&layout, true, !no_count)?;
            let outcome = compare::run(&layout, &opts, no_dpdk, family, &extra)?;
            Ok(status(outcome.code))
        }
    }
}
