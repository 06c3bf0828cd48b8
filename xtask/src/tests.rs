//! `cargo xtask test`: the project's full test run.
//!
//! 1. setup + guest image;
//! 2. `cargo test --workspace` on the host (guest tests are `#[ignore]`d there; the
//!    doc-tests include every page of README.md and docs/), the library crates' rustdoc,
//!    clippy and `cargo publish --dry-run` ([`cargo::check_library`]), then a
//!    `fuzz_seconds` pass of the rings fuzz target (`cargo xtask fuzz`);
//! 3. build the `pollnic` CLI, the examples and the `guest_*` integration tests of the `pollnic-tests` package
//!    (none found is a failure: guest tests must never be skipped silently);
//! 4. boot one guest and run each `guest_*` executable with `--ignored --test-threads=1`,
//!    the NICs freshly bound to vfio-pci before each;
//! 5. print a timing summary and a final PASSED/FAILED line.

use std::fmt::Write as _;
use std::fs;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::cargo::{self, TestExe};
use crate::cmd::shell_quote;
use crate::layout::Layout;
use crate::qemu::{self, VmOptions};
use crate::{guest, say};

/// The package whose `guest_*` integration tests run in the guest.
pub const PACKAGE: &str = "pollnic-tests";
/// Integration test targets with this name prefix run in the guest.
const GUEST_PREFIX: &str = "guest_";
/// Guest tests with this prefix run in a second guest that loads the guest-work
/// counter ([`crate::count`]); the others run without it, as users run them.
const COUNT_PREFIX: &str = "guest_count";
/// Guest tests with this prefix run in a third guest with no virtual IOMMU,
/// as a plain cloud VM (`cargo xtask vm --no-iommu`), their ports bound to
/// `uio_pci_generic`.
const NO_IOMMU_PREFIX: &str = "guest_noiommu";
/// The least time the guest suite gets from boot to power-off: its binaries
/// take about 13 minutes, and one that fails runs once more.
const SUITE_TIMEOUT: Duration = Duration::from_secs(1800);

/// One guest test binary's result.
struct GuestResult {
    name: String,
    code: i32,
    secs: u64,
    /// The first run failed and a second one ran (its code is `code`).
    retried: bool,
    /// It could not be stopped in the first guest (a task stuck in that
    /// guest's kernel), and ran again in a fresh guest (its code is `code`).
    fresh_guest: bool,
}

/// Runs everything; returns `Ok(true)` if all passed.
///
/// `per_binary` limits each guest test executable (it is killed and counted as failed, and
/// the next one runs); `opts.timeout` still bounds the whole guest run.
pub fn run(
    layout: &Layout,
    opts: &VmOptions,
    per_binary: Duration,
    fuzz_seconds: u64,
) -> Result<bool> {
    let started = Instant::now();

    let t = Instant::now();
    let image = guest::prepare(layout)?;
    // The guest_compare tests need dpdk-testpmd (DPDK row) and libxdp (AF_XDP row).
    crate::compare::ensure_peers();
    // tcpdump reads back guest_pcap's capture.
    crate::testtools::ensure()?;
    let setup = t.elapsed();

    let t = Instant::now();
    // The host tests run the `pollnic` command and the examples: `cargo test
    // --workspace` builds neither (they are other packages' targets).
    let host_ok = match cargo::build_pollnic_cli(layout)
        .and_then(|()| cargo::build_examples(layout))
        .and_then(|()| cargo::run(layout, &["test", "--workspace"]))
        .and_then(|()| cargo::check_library(layout))
    {
        Ok(()) => true,
        Err(err) => {
            say!("test: host tests failed: {err:#}");
            false
        }
    };
    let host = t.elapsed();

    let t = Instant::now();
    let fuzz = (fuzz_seconds > 0)
        .then(|| crate::fuzz::run(layout, crate::fuzz::Budget::seconds(fuzz_seconds), 1));
    let fuzz_time = t.elapsed();
    let fuzz_note = match &fuzz {
        None => "SKIPPED (--fuzz-seconds 0)".to_owned(),
        Some(Ok(o)) => crate::fuzz::describe(o),
        Some(Err(e)) => format!("FAILED: {e:#}"),
    };
    let fuzz_ok = match &fuzz {
        None => true,
        Some(Ok(o)) => o.clean,
        Some(Err(_)) => false,
    };
    if !fuzz_ok {
        say!("test: fuzzing failed: {fuzz_note}");
    }

    let t = Instant::now();
    if opts.bind {
        cargo::build_pollnic_cli(layout)?;
    }
    cargo::build_examples(layout)?;
    let exes = cargo::build_tests(layout, PACKAGE, GUEST_PREFIX)?;
    let build = t.elapsed();
    if exes.is_empty() {
        bail!(
            "no `{GUEST_PREFIX}*` integration tests found in the `{PACKAGE}` crate \
             (expected tests/{GUEST_PREFIX}*.rs wired as [[test]] targets): \
             refusing to pass with the guest tests silently skipped"
        );
    }
    say!(
        "test: {} guest test binaries: {}",
        exes.len(),
        exes.iter()
            .map(|e| e.name.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    );

    let t = Instant::now();
    let (counted, plain): (Vec<TestExe>, Vec<TestExe>) = exes
        .iter()
        .cloned()
        .partition(|e| e.name.starts_with(COUNT_PREFIX));
    let (no_iommu, plain): (Vec<TestExe>, Vec<TestExe>) = plain
        .into_iter()
        .partition(|e| e.name.starts_with(NO_IOMMU_PREFIX));
    // A binary that fails once runs again (below): give the whole suite room
    // for that, whatever `--timeout` says for a single command.
    let opts = &VmOptions {
        timeout: opts.timeout.max(SUITE_TIMEOUT),
        ..opts.clone()
    };
    let suite = Suite {
        layout,
        image: &image,
        bind: opts.bind,
        per_binary,
    };
    let (mut outcome, mut results) = suite.run(&plain, "guest-test-results.txt", false, opts);
    if !counted.is_empty() {
        let second = crate::count::prepare(
            layout,
            &image,
            true,
            true,
            // Only inside marked regions: guest_count's cache test marks
            // its sweeps, and the compare rows' bursts add little.
            crate::count::CacheModel::Marker,
        )
        .map(|count| {
            let opts = VmOptions {
                count: Some(count),
                ..opts.clone()
            };
            say!(
                "test: a second guest with the guest-work counter for {}",
                names(&counted)
            );
            suite.run(&counted, "guest-count-test-results.txt", false, &opts)
        });
        let second = match second {
            Ok((run, r)) => {
                results.extend(r);
                run
            }
            Err(e) => Err(e),
        };
        outcome = both(outcome, second);
    }
    if !no_iommu.is_empty() {
        let opts = VmOptions {
            no_iommu: true,
            ..opts.clone()
        };
        say!(
            "test: a third guest with no virtual IOMMU for {}",
            names(&no_iommu)
        );
        let (third, r) = suite.run(&no_iommu, "guest-noiommu-test-results.txt", true, &opts);
        results.extend(r);
        outcome = both(outcome, third);
    }
    let guest_time = t.elapsed();

    // Summary.
    let mut all_ok = host_ok && fuzz_ok;
    let mut out = String::from("\n---- xtask test summary ----\n");
    let line = |out: &mut String, what: &str, d: Duration, note: &str| {
        let _ = writeln!(out, "{what:<22}{:>8.1}s  {note}", d.as_secs_f64());
    };
    line(&mut out, "setup + guest image", setup, "");
    line(
        &mut out,
        "host tests",
        host,
        if host_ok { "ok" } else { "FAILED" },
    );
    line(&mut out, "fuzz (rings)", fuzz_time, &fuzz_note);
    line(&mut out, "build (guest tests)", build, "");
    let mut failures: Vec<String> = Vec::new();
    if !host_ok {
        failures.push("host tests".into());
    }
    if !fuzz_ok {
        failures.push("fuzz".into());
    }
    match &outcome {
        Ok(run) => {
            let note = format!(
                "boot to ready {:.1}s, QEMU {:.1}s, guest script exit status {}",
                run.boot.as_secs_f64(),
                run.total.as_secs_f64(),
                run.code
            );
            line(&mut out, "guest boot + tests", guest_time, &note);
            if run.code != 0 {
                all_ok = false;
            }
        }
        Err(err) => {
            say!("test: the guest run failed: {err:#}");
            line(
                &mut out,
                "guest boot + tests",
                guest_time,
                "FAILED (testbed error, see above)",
            );
            failures.push("guest run".into());
            all_ok = false;
        }
    }
    for exe in &exes {
        match results.iter().find(|r| r.name == exe.name) {
            Some(r) => {
                let status = match r.code {
                    0 if r.fresh_guest => "ok in a fresh guest (it could not be stopped in the \
                                           first one: see its output above)"
                        .to_owned(),
                    0 if r.retried => {
                        "ok on the second run (the first FAILED: see its output above)".to_owned()
                    }
                    0 => "ok".to_owned(),
                    124 | 137 => format!("FAILED (timed out, exit {})", r.code),
                    code => format!("FAILED (exit {code})"),
                };
                let _ = writeln!(out, "  {:<20}{:>8}s  {status}", r.name, r.secs);
                if r.code != 0 {
                    failures.push(r.name.clone());
                    all_ok = false;
                }
            }
            None => {
                let _ = writeln!(out, "  {:<20}{:>9}  DID NOT RUN", exe.name, "-");
                failures.push(format!("{} (did not run)", exe.name));
                all_ok = false;
            }
        }
    }
    if outcome.as_ref().is_ok_and(|r| r.code != 0) && failures.is_empty() {
        failures.push("guest script".into());
    }
    let total = started.elapsed().as_secs_f64();
    if all_ok {
        let _ = writeln!(
            out,
            "xtask test: PASSED (host tests + {} guest test binaries) in {total:.1}s",
            exes.len()
        );
    } else {
        let _ = writeln!(
            out,
            "xtask test: FAILED ({}) in {total:.1}s",
            failures.join("; ")
        );
    }
    print!("{out}");
    Ok(all_ok)
}

/// What every guest run of the suite shares.
struct Suite<'a> {
    layout: &'a Layout,
    image: &'a guest::GuestImage,
    bind: bool,
    per_binary: Duration,
}

impl Suite<'_> {
    /// Run `exes` in a guest booted with `opts`, their results in
    /// `target/testbed/<results>`. A binary that cannot be stopped (exit
    /// 137: still alive 30 s after `timeout`'s TERM, a task stuck in the
    /// guest's kernel, as TCG guests have shown with timer wake-ups that
    /// never came) ends that guest: the guest's kernel is then not to be
    /// trusted, and the binaries after it would each hang in turn. A fresh
    /// guest runs that binary and the rest, once; the summary says so. A
    /// binary that wedges the fresh guest too fails.
    fn run(
        &self,
        exes: &[TestExe],
        results: &str,
        no_iommu: bool,
        opts: &VmOptions,
    ) -> (Result<qemu::RunOutcome>, Vec<GuestResult>) {
        let path = self.layout.testbed.join(results);
        let wedged_path = self.layout.testbed.join(format!("{results}.wedged"));
        let mut todo: Vec<TestExe> = exes.to_vec();
        let mut all: Vec<GuestResult> = Vec::new();
        let mut outcome: Option<Result<qemu::RunOutcome>> = None;
        let mut rebooted: Option<String> = None;
        loop {
            let _ = fs::remove_file(&path);
            let _ = fs::remove_file(&wedged_path);
            let script = guest_script(
                self.layout,
                &todo,
                &path.display().to_string(),
                &wedged_path.display().to_string(),
                self.bind,
                no_iommu,
                self.per_binary,
            );
            let run = qemu::run_in_guest(self.layout, self.image, &script, opts);
            all.extend(read_results(&path));
            let wedged = fs::read_to_string(&wedged_path)
                .ok()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty());
            outcome = Some(match outcome {
                // The wedged guest's status is that of the binary that
                // wedged it; what counts is the fresh guest's.
                Some(Ok(prev)) => run.map(|r| qemu::RunOutcome {
                    boot: prev.boot,
                    total: prev.total + r.total,
                    ..r
                }),
                Some(Err(e)) => Err(e),
                None => run,
            });
            let Some(name) = wedged else { break };
            if rebooted.is_some() {
                all.push(GuestResult {
                    name,
                    code: 137,
                    secs: 0,
                    retried: false,
                    fresh_guest: true,
                });
                break;
            }
            todo = after_wedge(&todo, &all, &name);
            say!(
                "test: {name} could not be stopped (a task stuck in the guest's kernel): booting a \
                 fresh guest for {}",
                names(&todo)
            );
            rebooted = Some(name);
        }
        if let Some(name) = rebooted {
            for r in all.iter_mut().filter(|r| r.name == name) {
                r.fresh_guest = true;
            }
        }
        (outcome.expect("one run at least"), all)
    }
}

/// What a fresh guest runs after `wedged` could not be stopped: it and
/// every binary of `todo` that has no result yet, in their order.
fn after_wedge(todo: &[TestExe], done: &[GuestResult], wedged: &str) -> Vec<TestExe> {
    todo.iter()
        .filter(|e| e.name == wedged || !done.iter().any(|r| r.name == e.name))
        .cloned()
        .collect()
}

/// Two guest runs as one: the first failing status, the first boot, both
/// durations; an error of either.
fn both(a: Result<qemu::RunOutcome>, b: Result<qemu::RunOutcome>) -> Result<qemu::RunOutcome> {
    match (a, b) {
        (Ok(a), Ok(b)) => Ok(qemu::RunOutcome {
            code: if a.code != 0 { a.code } else { b.code },
            boot: a.boot,
            total: a.total + b.total,
        }),
        (Err(e), _) | (_, Err(e)) => Err(e),
    }
}

/// The test binaries' names, space-separated.
fn names(exes: &[TestExe]) -> String {
    exes.iter()
        .map(|e| e.name.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs each test binary in turn and appends `<name> <exit> <secs>` to `results`.
fn guest_script(
    layout: &Layout,
    exes: &[TestExe],
    results: &str,
    wedged: &str,
    bind: bool,
    no_iommu: bool,
    per_binary: Duration,
) -> String {
    let limit = per_binary.as_secs().max(1);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "results={}\nwedged={}\n: > \"$results\"\nfailed=0",
        shell_quote(results),
        shell_quote(wedged)
    );
    // A binary `timeout` had to stop (124: TERM; 137: KILL 30 s later, most
    // often a task stuck in the kernel): the stacks of the tasks in state D
    // (sysrq `w`) go to the output, so a hang says where it is. Seen once:
    // guest_virtio_kernel's smol-http blocked on a mutex for minutes. A
    // binary still alive after the KILL (137) ends the guest: its name goes
    // to `$wedged` and the host boots a fresh guest for it and the rest
    // (`Suite::run`).
    s.push_str(
        "stuck() {\n\
         [ \"$1\" -eq 124 ] || [ \"$1\" -eq 137 ] || return 0\n\
         echo \"pollnic-testbed: $2 did not end in time (exit $1); tasks blocked in the kernel (sysrq w):\" >&2\n\
         { echo w > /proc/sysrq-trigger; } 2>/dev/null\n\
         sleep 1\n\
         dmesg 2>/dev/null | grep -A 40 -e 'Show Blocked State' -e ' state:D' | tail -n 300 >&2\n\
         [ \"$1\" -eq 137 ] || return 0\n\
         echo \"pollnic-testbed: $2 could not be stopped: this guest's kernel is not to be trusted any more; ending it\" >&2\n\
         echo \"$2\" > \"$wedged\"\n\
         sync\n\
         exit 3\n\
         }\n",
    );
    // The ports each binary starts from: vfio-pci, or uio_pci_generic in
    // the guest with no IOMMU.
    let bind_lines =
        |on_fail: &str| crate::runscript::bind_commands(layout, no_iommu, true, on_fail);
    for (i, exe) in exes.iter().enumerate() {
        let _ = writeln!(s, "echo '==== guest test: {} ===='", exe.name);
        if bind && i > 0 {
            // Tests may hand a NIC back to the kernel, and leave its interface up with an
            // address (the kernel-path comparison, the bind guard's test): start each binary
            // from a clean bind, forced past `pollnic bind`'s active-interface guard.
            s.push_str(&bind_lines(
                "echo 'pollnic-testbed: re-binding the NICs failed' >&2",
            ));
        }
        let rebind = if bind {
            bind_lines("true")
        } else {
            String::new()
        };
        // `timeout` is the host's coreutils (the guest runs in the host's root).
        // A binary that fails (not by timeout) runs once more, loudly: under
        // TCG a vCPU can stall for seconds and starve a pinned thread (seen
        // once in guest_fwd's two-port test). A real failure fails twice, and
        // the summary names every binary that needed the second run.
        let _ = writeln!(
            s,
            "start=$(date +%s)\nretried=0\ntimeout -k 30 {limit} {exe} --ignored --test-threads=1\nrc=$?\n\
             stuck $rc {name}\n\
             if [ $rc -ne 0 ] && [ $rc -ne 124 ]; then\n\
             echo 'pollnic-testbed: {name} FAILED (exit '$rc'); running it once more, as TCG vCPU stalls can starve a pinned thread' >&2\n\
             {rebind}timeout -k 30 {limit} {exe} --ignored --test-threads=1\nrc=$?\n\
             stuck $rc {name}\n\
             retried=1\n\
             fi\n\
             [ $rc -ne 124 ] || echo 'pollnic-testbed: {name} timed out after {limit}s (--test-timeout)' >&2\n\
             echo \"{name} $rc $(( $(date +%s) - start )) $retried\" >> \"$results\"\n\
             [ $rc -eq 0 ] || failed=$((failed + 1))",
            exe = shell_quote(&exe.path),
            name = exe.name,
        );
    }
    s.push_str("sync\n[ $failed -eq 0 ]\n");
    s
}

fn read_results(path: &std::path::Path) -> Vec<GuestResult> {
    let Ok(text) = fs::read_to_string(path).context("reading guest test results") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some(GuestResult {
                name: w.next()?.to_owned(),
                code: w.next()?.parse().ok()?,
                secs: w.next()?.parse().ok()?,
                retried: w.next() == Some("1"),
                fresh_guest: false,
            })
        })
        .collect()
}

#[cfg(test)]
mod suite_tests {
    use super::*;

    fn exe(name: &str) -> TestExe {
        TestExe {
            name: name.into(),
            path: format!("/t/{name}").into(),
        }
    }

    fn result(name: &str) -> GuestResult {
        GuestResult {
            name: name.into(),
            code: 0,
            secs: 1,
            retried: false,
            fresh_guest: false,
        }
    }

    /// The binary that wedged the guest runs again first, then those that
    /// never ran; those that ended keep their results.
    #[test]
    fn a_fresh_guest_runs_the_wedged_binary_and_the_rest() {
        let todo = [
            exe("guest_a"),
            exe("guest_b"),
            exe("guest_c"),
            exe("guest_d"),
        ];
        let done = [result("guest_a")];
        let next: Vec<String> = after_wedge(&todo, &done, "guest_b")
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(next, ["guest_b", "guest_c", "guest_d"]);
    }

    /// A binary still alive after `timeout`'s KILL names itself in the
    /// wedge file and ends the guest's script; one that only timed out
    /// (124) does not.
    #[test]
    fn a_binary_that_cannot_be_stopped_ends_the_guest_script() {
        let layout = Layout::discover().expect("layout");
        let s = guest_script(
            &layout,
            &[exe("guest_a")],
            "/r/results.txt",
            "/r/results.txt.wedged",
            false,
            false,
            Duration::from_secs(300),
        );
        let stuck = &s[s.find("stuck() {").unwrap()..s.find("\n}\n").unwrap()];
        assert!(stuck.contains("[ \"$1\" -eq 137 ] || return 0"), "{stuck}");
        assert!(stuck.contains("echo \"$2\" > \"$wedged\""), "{stuck}");
        assert!(stuck.contains("exit 3"), "{stuck}");
        assert!(s.contains("wedged=/r/results.txt.wedged\n"), "{s}");
    }
}
