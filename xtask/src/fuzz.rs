//! `cargo xtask fuzz`: the cargo-fuzz targets `rings` and `rings_vector` (fuzz/fuzz_targets/,
//! the rings on their scalar and on their vector burst loops against a hostile device model,
//! fuzz/hostile.rs), `virtq` (the split virtqueue against a hostile virtio device,
//! fuzz/virtq_hostile.rs) and `virtq_packed` (the packed virtqueue against one,
//! fuzz/virtq_packed_hostile.rs) under libFuzzer with AddressSanitizer, one after the other,
//! each for a quarter of the time (the first two read the seeds in fuzz/seeds/rings, the
//! virtqueue targets those in `fuzz/seeds/<target>`).
//!
//! Installs cargo-fuzz from crates.io when missing (`cargo install cargo-fuzz --locked`), builds
//! the target on the nightly toolchain (ASan, debug assertions and overflow checks on), and runs
//! it for the given time on `<target>/fuzz-corpus/rings` (kept between runs) plus the committed
//! seeds in `fuzz/seeds/rings`, holding the machine-wide testbed lock (it keeps the CPUs busy).

use std::io::{BufRead, BufReader, Write as _};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::cmd;
use crate::layout::Layout;
use crate::say;

/// The fuzz targets' names (fuzz/Cargo.toml `[[bin]]`): the descriptor rings on the scalar and
/// the vector burst loops, the split virtqueue and the packed one; each with its seed corpus
/// (fuzz/seeds/<seeds>, one per input format).
const TARGETS: [(&str, &str); 4] = [
    ("rings", "rings"),
    ("rings_vector", "rings"),
    ("virtq", "virtq"),
    ("virtq_packed", "virtq_packed"),
];
/// Longest input in bytes: about 80 steps of the hostile-device harness.
const MAX_LEN: u32 = 256;

/// What one run did.
pub struct FuzzOutcome {
    /// Inputs executed (libFuzzer's count).
    pub execs: u64,
    /// Wall time of the fuzzing itself (not the build).
    pub run: Duration,
    /// Wall time to install cargo-fuzz (zero when it was there) and build the target.
    pub prepare: Duration,
    /// True when libFuzzer found nothing and exited cleanly.
    pub clean: bool,
    /// Where the full output went.
    pub log: PathBuf,
}

/// A `cargo` command on the nightly toolchain (through rustup's `cargo +nightly`).
fn nightly_cargo() -> Command {
    nightly_cargo_niced(false)
}

/// [`nightly_cargo`], run through `nice -n 19` when `niced`.
fn nightly_cargo_niced(niced: bool) -> Command {
    let mut c = if niced {
        let mut n = Command::new("nice");
        n.args(["-n", "19", "cargo"]);
        n
    } else {
        Command::new("cargo")
    };
    c.arg("+nightly");
    // xtask runs under stable cargo, which exports RUSTC/RUSTDOC pointing at stable tools.
    for var in ["RUSTC", "RUSTDOC", "RUSTC_WRAPPER", "CARGO"] {
        c.env_remove(var);
    }
    c
}

/// Fails with what to run when the nightly toolchain is missing; installs cargo-fuzz if needed.
fn ensure_tools() -> Result<()> {
    let ok = nightly_cargo()
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        bail!(
            "the fuzz target needs the nightly toolchain (for -Zsanitizer=address), and \
             `cargo +nightly --version` failed: install it with `rustup toolchain install nightly`"
        );
    }
    let have_fuzz = nightly_cargo()
        .args(["fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !have_fuzz {
        say!("fuzz: cargo-fuzz is missing; installing it (`cargo install cargo-fuzz --locked`, about 2 minutes)");
        let t = Instant::now();
        cmd::run(cmd::cargo().args(["install", "cargo-fuzz", "--locked"]))
            .context("installing cargo-fuzz failed; install it by hand with `cargo install cargo-fuzz --locked`")?;
        say!(
            "fuzz: cargo-fuzz installed in {:.0} s",
            t.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// The cargo-fuzz flags shared by build and run: ASan (cargo-fuzz's default), debug
/// assertions, no comparison tracing (1.7× the executions per second here; the harness
/// decodes its input with `%` and bit tests, so there are few magic values to find).
fn fuzz_args(layout: &Layout) -> Vec<String> {
    vec![
        "--sanitizer=address".into(),
        "--debug-assertions".into(),
        "--no-trace-compares".into(),
        "--target-dir".into(),
        layout.target.join("fuzz").display().to_string(),
    ]
}

/// How long one fuzzing run goes on, and how it shares the machine.
#[derive(Clone, Copy)]
pub struct Budget {
    /// Time limit in seconds (libFuzzer `-max_total_time`); 0 means none.
    pub seconds: u64,
    /// Execution limit per process (libFuzzer `-runs`); 0 means none.
    pub runs: u64,
    /// Run at nice 19 without the testbed lock.
    pub background: bool,
}

impl Budget {
    /// A time-limited run holding the testbed lock (what `cargo xtask test` does).
    pub fn seconds(seconds: u64) -> Self {
        Self {
            seconds,
            runs: 0,
            background: false,
        }
    }
}

/// Installs and builds as needed, then fuzzes each target in turn within a quarter of `budget`
/// (at least 1 s each when time-limited) with `jobs` libFuzzer processes sharing one corpus per
/// target, holding the testbed lock while fuzzing unless `budget.background`. The outcome adds
/// the runs up (executions, times) and is clean only when all are; `log` is the last one's.
pub fn run(layout: &Layout, budget: Budget, jobs: u32) -> Result<FuzzOutcome> {
    let share = Budget {
        seconds: if budget.seconds == 0 {
            0
        } else {
            (budget.seconds / TARGETS.len() as u64).max(1)
        },
        ..budget
    };
    let mut total: Option<FuzzOutcome> = None;
    for (target, seeds) in TARGETS {
        say!("fuzz: target {target}");
        let o = run_target(layout, target, seeds, share, jobs)?;
        say!("fuzz: {target}: {}", describe(&o));
        total = Some(match total {
            None => o,
            Some(t) => FuzzOutcome {
                execs: t.execs + o.execs,
                run: t.run + o.run,
                prepare: t.prepare + o.prepare,
                clean: t.clean && o.clean,
                log: o.log,
            },
        });
    }
    Ok(total.expect("four targets"))
}

/// [`run`] for one target.
fn run_target(
    layout: &Layout,
    target: &str,
    seeds: &str,
    budget: Budget,
    jobs: u32,
) -> Result<FuzzOutcome> {
    let t = Instant::now();
    ensure_tools()?;
    let mut build = nightly_cargo();
    build
        .current_dir(&layout.repo)
        .args(["fuzz", "build"])
        .args(fuzz_args(layout))
        .arg(target);
    say!("{}", cmd::describe(&build));
    cmd::run(&mut build).context("building the fuzz target failed")?;
    let prepare = t.elapsed();

    let corpus = layout.target.join("fuzz-corpus").join(target);
    let artifacts = layout.target.join("fuzz-artifacts").join(target);
    let logs = layout.target.join("fuzz-logs");
    for dir in [&corpus, &artifacts, &logs] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let seeds = layout.repo.join("fuzz").join("seeds").join(seeds);
    let log = logs.join(format!("{target}-{}.log", crate::runscript::nonce()));

    let command = |job: u32| {
        let mut c = nightly_cargo_niced(budget.background);
        c.current_dir(&layout.repo)
            .args(["fuzz", "run"])
            .args(fuzz_args(layout))
            .arg(target)
            .arg(&corpus)
            .arg(&seeds)
            .arg("--")
            .arg(format!("-max_total_time={}", budget.seconds))
            .arg(format!(
                "-runs={}",
                if budget.runs == 0 {
                    -1
                } else {
                    budget.runs as i64
                }
            ))
            .arg(format!("-max_len={MAX_LEN}"))
            .arg(format!("-artifact_prefix={}/", artifacts.display()))
            .arg(format!("-seed={}", 1 + job))
            .arg("-print_final_stats=1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        c
    };
    let _lock = if budget.background {
        say!("fuzz: --background: nice 19, not taking the testbed lock");
        None
    } else {
        Some(crate::qemu::testbed_lock()?)
    };
    let t = Instant::now();
    // `jobs` independent libFuzzer processes on one corpus directory (each
    // reloads what the others add); their executions add up.
    let mut children = Vec::new();
    for job in 0..jobs.max(1) {
        let mut c = command(job);
        say!("{}", cmd::describe(&c));
        let path = if jobs > 1 {
            log.with_extension(format!("{job}.log"))
        } else {
            log.clone()
        };
        say!("fuzz: output in {}", path.display());
        let mut child = c
            .spawn()
            .with_context(|| format!("cannot start `{}`", cmd::describe(&c)))?;
        let stderr = child.stderr.take().context("no stderr pipe")?;
        let mut out =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        let show = job == 0;
        let reader = std::thread::spawn(move || {
            let mut execs = 0u64;
            for line in BufReader::new(stderr).lines() {
                let line = line.unwrap_or_default();
                let _ = writeln!(out, "{line}");
                if let Some(n) = executions(&line) {
                    execs = execs.max(n);
                }
                // Progress lines are many; show job 0's milestones and anything else.
                let progress = line.starts_with('#') && !line.contains("DONE");
                if !progress || (show && line.contains("pulse")) {
                    eprintln!("{line}");
                }
            }
            execs
        });
        children.push((child, reader));
    }
    let mut execs = 0u64;
    let mut clean = true;
    for (mut child, reader) in children {
        let status = child.wait().context("waiting for cargo fuzz")?;
        clean &= status.success();
        execs += reader.join().unwrap_or(0);
    }
    let run = t.elapsed();
    Ok(FuzzOutcome {
        execs,
        run,
        prepare,
        clean,
        log,
    })
}

/// The execution count in a libFuzzer status line: `#12345\tpulse ...` or
/// `stat::number_of_executed_units: 12345` or `Done 12345 runs in 60 second(s)`.
pub fn executions(line: &str) -> Option<u64> {
    if let Some(rest) = line.strip_prefix('#') {
        return rest
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok();
    }
    if let Some(rest) = line.strip_prefix("stat::number_of_executed_units:") {
        return rest.trim().parse().ok();
    }
    if let Some(rest) = line.strip_prefix("Done ") {
        return rest.split_whitespace().next()?.parse().ok();
    }
    None
}

/// One line for summaries.
pub fn describe(o: &FuzzOutcome) -> String {
    format!(
        "{} executions in {:.0} s ({:.0}/s), install+build {:.0} s, {}; log {}",
        o.execs,
        o.run.as_secs_f64(),
        o.execs as f64 / o.run.as_secs_f64().max(1e-3),
        o.prepare.as_secs_f64(),
        if o.clean {
            "no findings"
        } else {
            "FAILED: see the log and target/fuzz-artifacts/<target>/"
        },
        o.log.display()
    )
}

#[cfg(test)]
mod tests {
    use super::executions;

    #[test]
    fn reads_libfuzzer_counts() {
        assert_eq!(
            executions("#4096\tpulse  cov: 1342 ft: 6227 corp: 548/81Kb exec/s: 1365 rss: 130Mb"),
            Some(4096)
        );
        assert_eq!(
            executions("stat::number_of_executed_units: 19003"),
            Some(19003)
        );
        assert_eq!(executions("Done 19003 runs in 31 second(s)"), Some(19003));
        assert_eq!(executions("INFO: Seed: 123"), None);
    }
}
