//! Booting the guest and running one script in it: [`run_in_guest`].

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::console::{forward_console, forward_stderr, Event};
use crate::guest::GuestImage;
use crate::install::QEMU;
use crate::layout::Layout;
use crate::qmp::Relay;
use crate::runscript::{
    full_script, hub_of, nic_id, nonce, virtio_id, NOPLATFORM_TAP, PACKED_PORT, PORTS,
    SHARED_GROUP, VIRTIO_NOPLATFORM, VIRTIO_PORTS, VIRTIO_QUEUE_PAIRS, VIRTIO_TRANSITIONAL,
};
use crate::{cmd, say};

/// How long QEMU may take to exit after the guest reported its exit status.
const POWEROFF_GRACE: Duration = Duration::from_secs(60);

/// How to boot the guest.
#[derive(Debug, Clone)]
pub struct VmOptions {
    /// Virtual CPUs.
    pub smp: u32,
    /// Guest memory in MiB.
    pub mem_mib: u32,
    /// 2 MiB hugepages reserved in the guest.
    pub hugepages: u32,
    /// Bind all NICs to vfio-pci (with the debug `pollnic` CLI) before the script runs.
    pub bind: bool,
    /// Kill the guest after this long, from QEMU start to power-off.
    pub timeout: Duration,
    /// Extra kernel command line words, appended last.
    pub kernel_args: String,
    /// Load the guest-work counter ([`crate::count`]); the guest then boots with
    /// `nokaslr` and finds the counter file in `$POLLNIC_COUNTS`.
    pub count: Option<crate::count::Count>,
    /// No virtual IOMMU: the plain-VM guest ([`crate::runscript::full_script`]
    /// binds the ports to `uio_pci_generic` then).
    pub no_iommu: bool,
}

impl Default for VmOptions {
    fn default() -> Self {
        Self {
            smp: 2,
            mem_mib: 3072,
            hugepages: 512,
            bind: true,
            timeout: Duration::from_secs(1800),
            kernel_args: String::new(),
            count: None,
            no_iommu: false,
        }
    }
}

/// What a finished run reports.
#[derive(Debug, Clone, Copy)]
pub struct RunOutcome {
    /// The script's exit status inside the guest.
    pub code: i32,
    /// From starting QEMU to the guest being ready to run the script (chroot set up).
    pub boot: Duration,
    /// From starting QEMU to QEMU's exit.
    pub total: Duration,
}

/// Boots the guest, runs `script` (POSIX sh text) in it, and returns its exit status.
///
/// The script runs as root inside `chroot /host` (the host's root, read-only, with the
/// repository read-write at its own path), with cwd = the repository and the environment
/// `POLLNIC_GUEST=1`, `POLLNIC_PORT{0..3}` (PCI addresses), `POLLNIC_PORT{0..3}_MAC`,
/// `POLLNIC_QMP_RELAY` (the directory through which the guest asks for `set_link`, see
/// [`crate::qmp`]), plus the host's `PATH`, `HOME`, `RUST_BACKTRACE`, `RUST_LOG` and
/// `POLLNIC_*`. Unless
/// `opts.bind` is false, all NICs are first bound to vfio-pci with
/// `target/debug/pollnic bind` (the caller must have built it).
///
/// Errors (not an exit code) when QEMU cannot start, dies, the guest's init fails, the
/// guest never reports a status, or `opts.timeout` expires.
pub fn run_in_guest(
    layout: &Layout,
    image: &GuestImage,
    script: &str,
    opts: &VmOptions,
) -> Result<RunOutcome> {
    let _testbed = testbed_lock()?;
    // The no-IOMMU guest boots its own initramfs (VFIO rebuilt with no-IOMMU mode; built
    // once, under the lock since the build keeps both cores busy).
    let noiommu_image;
    let image = if opts.no_iommu {
        noiommu_image = crate::guest::for_no_iommu(layout, image)?;
        &noiommu_image
    } else {
        image
    };
    let shares = layout.rw_shares()?;
    if opts.bind && !layout.pollnic_debug_bin().is_file() {
        bail!(
            "{} is missing: build it with `cargo build -p pollnic --bin pollnic` (or pass --no-bind)",
            layout.pollnic_debug_bin().display()
        );
    }
    let nonce = nonce();
    let run_dir = layout.testbed.join("run");
    std::fs::create_dir_all(&run_dir).with_context(|| format!("creating {}", run_dir.display()))?;
    let script_path = run_dir.join(format!("run-{nonce}.sh"));
    let relay_dir = run_dir.join(format!("qmp-{nonce}"));
    crate::layout::check_plain_path(&relay_dir)?;
    let counts = opts
        .count
        .as_ref()
        .map(|c| (c, run_dir.join(format!("count-{nonce}.txt"))));
    let counts_export = match &counts {
        Some((_, file)) => format!("export POLLNIC_COUNTS={}\n", cmd::shell_quote(file)),
        None => String::new(),
    };
    let script = format!(
        "export POLLNIC_QMP_RELAY={}\n{counts_export}{script}",
        cmd::shell_quote(&relay_dir)
    );
    std::fs::write(
        &script_path,
        full_script(layout, &script, opts.bind, opts.no_iommu),
    )
    .with_context(|| format!("writing {}", script_path.display()))?;
    crate::layout::check_plain_path(&script_path)?;

    // QMP listens in /tmp: a unix socket path must stay under 108 bytes.
    let qmp_socket = PathBuf::from(format!("/tmp/pollnic-qmp-{nonce}.sock"));
    let nics = (0..PORTS.len())
        .map(nic_id)
        .chain((0..VIRTIO_PORTS.len()).map(virtio_id))
        .collect();
    let relay = Relay::start(&relay_dir, &qmp_socket, nics)?;
    let plugin = counts.as_ref().map(|(c, file)| c.qemu_arg(file));
    let result = boot(
        image,
        &shares,
        &script_path,
        &nonce,
        &qmp_socket,
        opts,
        plugin.as_deref(),
    );
    relay.stop();
    if let Some((_, file)) = &counts {
        let _ = std::fs::remove_file(file);
    }
    let _ = std::fs::remove_file(&qmp_socket);
    let _ = std::fs::remove_file(&script_path);
    result
}

/// The machine-wide lock file that keeps two testbeds from running at once.
///
/// On a 2-core machine two TCG guests starve each other (stalled vCPUs, flaky timing
/// tests, meaningless measurements), also when they come from two clones of the
/// repository; so the lock lives in `/tmp`, not in the clone.
pub const TESTBED_LOCK: &str = "/tmp/pollnic-testbed.lock";

/// Takes [`TESTBED_LOCK`] exclusively, waiting (and saying so) while another testbed runs.
/// The lock is released when the returned file is dropped, or when this process dies.
pub fn testbed_lock() -> Result<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(TESTBED_LOCK)
        .with_context(|| format!("opening the testbed lock {TESTBED_LOCK}"))?;
    match f.try_lock() {
        Ok(()) => return Ok(f),
        Err(std::fs::TryLockError::WouldBlock) => {
            eprintln!("[xtask] another testbed is running (lock {TESTBED_LOCK} held); waiting for it to finish");
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("locking {TESTBED_LOCK}"));
        }
    }
    f.lock()
        .with_context(|| format!("locking {TESTBED_LOCK}"))?;
    eprintln!("[xtask] testbed lock taken");
    Ok(f)
}

/// The kernel command line (the init script reads its `pollnic_*` words from it).
///
/// `init_on_alloc=0`: Debian zeroes every page at allocation by default, which under TCG
/// makes reserving 1 GiB of hugepages take ~5 s (boot to ready 13 s instead of 7 s).
///
/// `idle=poll`: under multi-threaded TCG a halted (idle) vCPU was intermittently
/// never woken again: RCU "timer wakeup didn't happen ... cpu=0" stalls and every
/// task sleeping on that CPU frozen, seen here about once in four test runs, with
/// or without the TSC-deadline timer and NOHZ. With `idle=poll` the guest never
/// halts a vCPU, so nothing depends on that wake-up.
fn cmdline(shares: &[PathBuf], script: &Path, nonce: &str, opts: &VmOptions) -> String {
    let rw: Vec<String> = shares.iter().map(|p| p.display().to_string()).collect();
    let mut line = format!(
        "console=ttyS0{} quiet panic=-1 init_on_alloc=0 idle=poll pollnic_script={} pollnic_nonce={nonce} pollnic_rw={} pollnic_hugepages={}",
        if opts.no_iommu { "" } else { " intel_iommu=on" },
        script.display(),
        rw.join(","),
        opts.hugepages
    );
    if opts.count.is_some() {
        // The counter leaves the idle loop out by its fixed address.
        line.push_str(" nokaslr");
    }
    if !opts.kernel_args.trim().is_empty() {
        line.push(' ');
        line.push_str(opts.kernel_args.trim());
    }
    line
}

/// The QEMU command line. The igb ports get the device ids [`nic_id`] (what `set_link` names)
/// and QMP listens on `qmp_socket` (server, not waiting for a client).
fn qemu_command(
    image: &GuestImage,
    shares: &[PathBuf],
    append: &str,
    qmp_socket: &Path,
    opts: &VmOptions,
    plugin: Option<&str>,
) -> Command {
    let mut c = Command::new(QEMU);
    if let Some(arg) = plugin {
        c.args(["-plugin", arg]);
    }
    // Extra QEMU arguments for debugging the testbed, e.g. `-trace
    // e1000e_rx_not_written_to_guest -D /tmp/qemu-trace.log`.
    if let Some(extra) = std::env::var_os("POLLNIC_QEMU_ARGS") {
        c.args(extra.to_string_lossy().split_whitespace());
    }
    // One host thread per vCPU (MTTCG), counting or not. Round-robin TCG
    // (`thread=single`) was tried for counting guests of more than 2 vCPUs
    // on 2026-12-05 and does not work with the counter on QEMU 10.0.2: a
    // vCPU runs translated code before QEMU's queued plugin initialisation
    // of it, and the guest crashed at boot (QEMU SIGSEGV in generated code,
    // then a guest kernel panic with the plugin's lookups guarded);
    // docs/design/counting.md.
    c.args([
        "-machine",
        "q35,kernel-irqchip=split",
        "-accel",
        "tcg",
        "-cpu",
        "max",
    ])
    .args([
        "-smp",
        &opts.smp.to_string(),
        "-m",
        &opts.mem_mib.to_string(),
    ])
    .args(if opts.no_iommu {
        &[][..]
    } else {
        &["-device", "intel-iommu,intremap=on,caching-mode=on"][..]
    })
    .args([
        "-nodefaults",
        "-display",
        "none",
        "-serial",
        "stdio",
        "-no-reboot",
    ])
    .arg("-kernel")
    .arg(image.kernel.vmlinuz())
    .arg("-initrd")
    .arg(&image.initramfs)
    .args(["-append", append])
    .arg("-qmp")
    .arg(format!("unix:{},server=on,wait=off", qmp_socket.display()))
    .args([
        "-virtfs",
        "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
    ]);
    for (i, share) in shares.iter().enumerate() {
        c.arg("-virtfs").arg(format!(
            "local,path={},mount_tag=rw{i},security_model=none,multidevs=remap",
            share.display()
        ));
    }
    for (i, (pci, mac)) in PORTS.iter().enumerate() {
        let slot = &pci[8..10];
        let hub = hub_of(i);
        c.args(["-netdev", &format!("hubport,id=p{i},hubid={hub}")]);
        c.args([
            "-device",
            &format!("igb,netdev=p{i},addr=0x{slot},mac={mac},id={}", nic_id(i)),
        ]);
    }
    // The virtio-net ports, back to back through the private bridge of
    // [`in_private_net`]: each on a multi-queue tap with VIRTIO_QUEUE_PAIRS
    // queues (a hub port has one), so the device offers VIRTIO_NET_F_MQ
    // (`mq=on`), VIRTIO_NET_F_RSS (`rss=on`; QEMU's software RSS when its
    // eBPF steering is not used) and VIRTIO_NET_F_HASH_REPORT (`hash=on`,
    // which always takes the software path). No vhost: QEMU's own
    // virtio-net model moves the frames. rx_queue_size 1024 (QEMU's
    // largest; TX stays at 256, the most QEMU allows but for vhost-user);
    // host_mtu=9000 offers VIRTIO_NET_F_MTU with an MTU of 9000 (jumbo
    // frames; the taps and the bridge take 9000 too).
    // Then the two devices the bad-input test must see refused.
    for (i, (pci, mac)) in VIRTIO_PORTS.iter().enumerate() {
        let slot = &pci[8..10];
        c.args([
            "-netdev",
            &format!(
                "tap,id=v{i},ifname={},queues={VIRTIO_QUEUE_PAIRS},vhost=off,script=no,\
                 downscript=no",
                virtio_tap(i)
            ),
        ]);
        c.args([
            "-device",
            &format!(
                "virtio-net-pci,netdev=v{i},addr=0x{slot},mac={mac},id={},disable-legacy=on,\
                 {}{}rx_queue_size=1024,mq=on,rss=on,hash=on,host_mtu=9000",
                virtio_id(i),
                // Port 1 also offers VIRTIO_F_RING_PACKED (`packed=on`) and
                // VIRTIO_F_IN_ORDER (`in_order=on`, QEMU 9.1+), so every test
                // between the two ports runs a split ring, completions in
                // any order, on one side and a packed ring in order on the
                // other, at no extra boot (split in order: port 1 held to
                // split by DeviceConfig::virtq_layout).
                if i == PACKED_PORT {
                    "packed=on,in_order=on,"
                } else {
                    ""
                },
                // The plain-VM guest's ports offer no VIRTIO_F_ACCESS_PLATFORM.
                if opts.no_iommu {
                    ""
                } else {
                    "iommu_platform=on,"
                }
            ),
        ]);
    }
    for (name, pci, opts) in [
        ("np", VIRTIO_NOPLATFORM, "disable-legacy=on"),
        ("tr", VIRTIO_TRANSITIONAL, "disable-legacy=off"),
    ] {
        let slot = &pci[8..10];
        let netdev = if name == "np" {
            // On the bridge, for guest_virtio_kernel (VIRTIO_NOPLATFORM).
            format!("tap,id=vnp,ifname={NOPLATFORM_TAP},queues=1,vhost=off,script=no,downscript=no")
        } else {
            format!("hubport,id=v{name},hubid=2")
        };
        c.args(["-netdev", &netdev]);
        c.args([
            "-device",
            &format!("virtio-net-pci,netdev=v{name},addr=0x{slot},{opts}"),
        ]);
    }
    // Two root ports as functions of one slot, without ACS, each with an igb
    // behind it: all four share one IOMMU group (see SHARED_GROUP).
    for f in 0..SHARED_GROUP.len() {
        c.args([
            "-device",
            &format!(
                "pcie-root-port,id=pollnic_rp{f},bus=pcie.0,addr=0x4.{f},multifunction=on,\
                 chassis={},disable-acs=on",
                10 + f
            ),
        ]);
        // On a hub of their own (no traffic), so QEMU does not warn "no peer".
        c.args(["-netdev", &format!("hubport,id=pg{f},hubid=2")]);
        c.args([
            "-device",
            &format!("igb,netdev=pg{f},bus=pollnic_rp{f},addr=0.0,mac=52:54:00:12:35:0{f}"),
        ]);
    }
    c
}

/// The host-side tap of virtio-net port `i` (inside the private namespace).
fn virtio_tap(i: usize) -> String {
    format!("pollnic-vt{i}")
}

/// The bridge joining the virtio-net ports' taps.
const VIRTIO_BRIDGE: &str = "pollnic-vbr";

/// Wraps the QEMU command so that it runs in a network namespace of its own
/// (`unshare --net`), in which a shell first makes the virtio-net ports'
/// back end: two multi-queue taps (MTU 9000) on a bridge that nothing else
/// joins, then `exec`s QEMU. The bridge acts as a hub: STP off, forwarding
/// at once (`forward_delay 0`), no learning on its ports (every frame floods
/// to the other tap), no multicast snooping; IPv6 is off in the namespace
/// before any device exists, so no router solicitation or MLD report ever
/// reaches a port, and nothing has an IPv4 address. QEMU keeps the
/// namespace's only reference, so the taps and the bridge go when QEMU
/// exits; the host's own network is never touched. QMP (a unix socket) and
/// the 9p shares do not depend on the network namespace.
///
/// Errors when not root (a network namespace and taps need it), or when
/// `unshare` or `ip` is missing.
fn in_private_net(qemu: &Command) -> Result<Command> {
    if !cmd::is_root() {
        bail!(
            "the testbed's virtio-net ports sit on tap devices in a private network namespace, \
             which needs root: run xtask as root (e.g. `sudo -E cargo xtask test`)"
        );
    }
    let find = |tool: &str| {
        cmd::find_program(tool).with_context(|| {
            format!(
                "`{tool}` is missing; the testbed makes its virtio-net back end with it: \
                 `apt-get install util-linux iproute2`"
            )
        })
    };
    let (unshare, ip) = (find("unshare")?, find("ip")?);
    let ip = cmd::shell_quote(&ip);
    let mut setup = format!(
        "set -e\n\
         {ip} link set lo up\n\
         echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6\n\
         echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6\n",
    );
    setup.push_str(&format!(
        "{ip} link add {VIRTIO_BRIDGE} mtu 9000 type bridge stp_state 0 forward_delay 0 \
         mcast_snooping 0\n"
    ));
    // QEMU opens a `queues=1` tap without IFF_MULTI_QUEUE, which a
    // multi-queue tap refuses (EINVAL): the no-ACCESS_PLATFORM device's tap
    // is a plain one.
    let taps = (0..VIRTIO_PORTS.len())
        .map(|i| (virtio_tap(i), " multi_queue"))
        .chain([(NOPLATFORM_TAP.to_string(), "")]);
    for (tap, mq) in taps {
        setup.push_str(&format!(
            "{ip} tuntap add dev {tap} mode tap{mq}\n\
             {ip} link set dev {tap} mtu 9000 master {VIRTIO_BRIDGE}\n\
             {ip} link set dev {tap} type bridge_slave learning off\n\
             {ip} link set dev {tap} up\n"
        ));
    }
    setup.push_str(&format!(
        "{ip} link set dev {VIRTIO_BRIDGE} up\nexec \"$@\"\n"
    ));
    let mut c = Command::new(unshare);
    c.args(["--net", "--", "sh", "-c", &setup, "sh"])
        .arg(qemu.get_program())
        .args(qemu.get_args());
    Ok(c)
}

fn boot(
    image: &GuestImage,
    shares: &[PathBuf],
    script: &Path,
    nonce: &str,
    qmp_socket: &Path,
    opts: &VmOptions,
    plugin: Option<&str>,
) -> Result<RunOutcome> {
    let append = cmdline(shares, script, nonce, opts);
    let mut qemu = in_private_net(&qemu_command(
        image, shares, &append, qmp_socket, opts, plugin,
    ))?;
    qemu.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if std::env::var_os("POLLNIC_XTASK_VERBOSE").is_some() {
        say!("vm: {}", cmd::describe(&qemu));
    }
    say!(
        "vm: booting the guest ({} vCPU, {} MiB, TCG; timeout {}s)",
        opts.smp,
        opts.mem_mib,
        opts.timeout.as_secs()
    );
    let start = Instant::now();
    let mut child = qemu
        .spawn()
        .with_context(|| format!("cannot start {QEMU} (run `cargo xtask setup`)"))?;

    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().expect("piped");
    let console = thread::spawn({
        let nonce = nonce.to_owned();
        move || forward_console(stdout, std::io::stdout(), &nonce, tx)
    });
    let stderr = child.stderr.take().expect("piped");
    let errors = thread::spawn(move || forward_stderr(stderr));

    let outcome = supervise(&mut child, &rx, start, opts.timeout);
    let _ = console.join();
    let stderr_tail = errors.join().unwrap_or_default();
    let with_stderr = |msg: String| {
        if stderr_tail.is_empty() {
            msg
        } else {
            format!("{msg}\nQEMU's stderr ended with:\n{stderr_tail}")
        }
    };
    match outcome {
        Supervised::Done { code, boot, total } => {
            say!(
                "vm: guest exit status {code}; ready after {:.1}s, total {:.1}s",
                boot.map(|b| b.as_secs_f64()).unwrap_or(f64::NAN),
                total.as_secs_f64()
            );
            Ok(RunOutcome {
                code,
                boot: boot.unwrap_or_default(),
                total,
            })
        }
        Supervised::InitFailed(why) => bail!("the guest's init failed: {why}"),
        Supervised::Panicked { line, ready } => bail!(
            "the guest kernel panicked ({}): {line}; see the console output above",
            if ready {
                "while the command ran"
            } else {
                "during boot"
            }
        ),
        Supervised::TimedOut { ready } => bail!(
            "timed out after {}s ({}); QEMU was killed. Raise it with --timeout SECS",
            opts.timeout.as_secs(),
            if ready {
                "the command was still running"
            } else {
                "the guest never became ready"
            }
        ),
        Supervised::NoStatus { ready, .. } if stderr_tail.contains("terminating on signal") => {
            bail!(with_stderr(format!(
                "QEMU was stopped by a signal from outside xtask ({})",
                if ready {
                    "the command had started"
                } else {
                    "the guest never became ready"
                }
            )))
        }
        Supervised::NoStatus { status, ready } => bail!(with_stderr(format!(
            "QEMU exited ({status}) without the guest reporting an exit status ({}); \
             see the console output above (a kernel panic?)",
            if ready {
                "the command had started"
            } else {
                "the guest never became ready"
            }
        ))),
    }
}

enum Supervised {
    Done {
        code: i32,
        boot: Option<Duration>,
        total: Duration,
    },
    InitFailed(String),
    TimedOut {
        ready: bool,
    },
    NoStatus {
        status: std::process::ExitStatus,
        ready: bool,
    },
    Panicked {
        line: String,
        ready: bool,
    },
}

fn supervise(
    child: &mut Child,
    rx: &Receiver<Event>,
    start: Instant,
    timeout: Duration,
) -> Supervised {
    let mut boot = None;
    let mut code = None;
    let mut init_failed = None;
    let mut panic = None;
    let mut grace_deadline = None;
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Event::Ready) => {
                let at = start.elapsed();
                boot = Some(at);
                say!("vm: guest ready after {:.1}s", at.as_secs_f64());
            }
            Ok(Event::Exit(c)) => {
                code = Some(c);
                grace_deadline = Some(Instant::now() + POWEROFF_GRACE);
            }
            Ok(Event::InitFailed(why)) => {
                init_failed = Some(why);
                grace_deadline = Some(Instant::now() + POWEROFF_GRACE);
            }
            Ok(Event::Panic(line)) => {
                say!("vm: the guest kernel panicked");
                panic = Some(line);
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {}
        }
        match child.try_wait() {
            Ok(Some(status)) => {
                // Drain what the reader already saw (it ends when QEMU's stdout closes).
                while let Ok(event) = rx.recv_timeout(Duration::from_millis(500)) {
                    match event {
                        Event::Ready => boot = boot.or(Some(start.elapsed())),
                        Event::Exit(c) => code = Some(c),
                        Event::InitFailed(why) => init_failed = Some(why),
                        Event::Panic(line) => panic = Some(line),
                    }
                }
                let total = start.elapsed();
                return match (init_failed, code, panic) {
                    (Some(why), _, _) => Supervised::InitFailed(why),
                    (None, Some(code), _) => Supervised::Done { code, boot, total },
                    (None, None, Some(line)) => Supervised::Panicked {
                        line,
                        ready: boot.is_some(),
                    },
                    (None, None, None) => Supervised::NoStatus {
                        status,
                        ready: boot.is_some(),
                    },
                };
            }
            Ok(None) => {}
            Err(err) => {
                say!("vm: cannot wait for QEMU: {err}");
            }
        }
        let now = Instant::now();
        if let Some(deadline) = grace_deadline {
            if now > deadline {
                say!(
                    "vm: QEMU did not exit {}s after the guest finished; killing it",
                    POWEROFF_GRACE.as_secs()
                );
                let _ = child.kill();
                let _ = child.wait();
                return match (init_failed, code) {
                    (Some(why), _) => Supervised::InitFailed(why),
                    (None, Some(code)) => Supervised::Done {
                        code,
                        boot,
                        total: start.elapsed(),
                    },
                    (None, None) => unreachable!("grace period starts only after a report"),
                };
            }
        }
        if now.duration_since(start) > timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Supervised::TimedOut {
                ready: boot.is_some(),
            };
        }
    }
}
