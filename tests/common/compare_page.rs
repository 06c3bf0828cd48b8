//! The commands of docs/tools/compare.md, read from the page, planned and
//! run in the counting guest in a short form: see `tests/guest_count_docs.rs`
//! (which also checks the parsing on the host). The page's runnable commands
//! are split in three parts, one test binary each, so that each stays within
//! the suite's 300 s per binary: the plain igb comparisons, the igb runs with
//! a mode or a profile (`--sweep`, `--load-curve`, `--forward`,
//! `--top-functions`), and the virtio-net ones.

use crate::{example_exe, port, vport};
use std::path::{Path, PathBuf};

pub fn page() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("docs/tools/compare.md")
}

/// The text after each `cargo xtask compare` on the page: in shell blocks
/// to the end of the line (a `#` comment cut off), in inline code spans to
/// the closing backtick (spans may wrap over lines).
pub fn page_commands(text: &str) -> Vec<String> {
    const CMD: &str = "cargo xtask compare";
    let mut out = Vec::new();
    let mut prose = String::new();
    let mut in_block = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            prose.push_str("\n\n");
            continue;
        }
        if in_block {
            if let Some(i) = line.find(CMD) {
                let rest = &line[i + CMD.len()..];
                let rest = rest.split('#').next().unwrap_or("");
                out.push(rest.trim().to_owned());
            }
            prose.push_str("\n\n");
        } else {
            prose.push_str(line);
            prose.push(' ');
        }
    }
    for (k, span) in prose.split('`').enumerate() {
        if k % 2 == 1 {
            if let Some(rest) = span.trim().strip_prefix(CMD) {
                out.push(rest.split_whitespace().collect::<Vec<_>>().join(" "));
            }
        }
    }
    out
}

/// What the test does with one command of the page.
#[derive(Debug, PartialEq)]
pub enum Plan {
    /// Run `compare` on the virtio-net ports (`--family virtio`) or the igb
    /// ports, with these arguments (the short form).
    Run { virtio: bool, args: Vec<String> },
    /// Not run here, and why.
    Skip(String),
}

/// The vCPUs of the counting guest (`cargo xtask compare`'s default).
const GUEST_VCPUS: u32 = 2;

pub fn plan(command: &str) -> Plan {
    if command.contains("...") {
        return Plan::Skip("elided (`...`): not a whole command".into());
    }
    let words: Vec<&str> = command.split_whitespace().collect();
    let (xtask, tool) = match words.iter().position(|w| *w == "--") {
        Some(i) => (&words[..i], &words[i + 1..]),
        None => (&words[..], &[][..]),
    };
    let mut virtio = false;
    let mut i = 0;
    while i < xtask.len() {
        match xtask[i] {
            "--smp" => {
                let n: u32 = xtask
                    .get(i + 1)
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("`--smp` without a number in `{command}`"));
                if n > GUEST_VCPUS {
                    return Plan::Skip(format!(
                        "asks for {n} vCPUs; the counting guest has {GUEST_VCPUS} \
                         (3- and 4-vCPU counting guests hung at boot in this testbed)"
                    ));
                }
                i += 2;
            }
            "--family" => {
                match xtask.get(i + 1).copied() {
                    Some("virtio") => virtio = true,
                    Some("igb") => virtio = false,
                    other => panic!("`--family {other:?}` in `{command}`: unknown family"),
                }
                i += 2;
            }
            "--count-cache" => {
                return Plan::Skip(
                    "needs the cache model on for the whole guest (`cache=on`, about 3 x the \
                     counter's boot time); the suite's counting guest keeps it in marker mode, \
                     armed only by guest_count's cache test"
                        .into(),
                );
            }
            // `--family` alone in prose ("`cargo xtask compare --family`"
            // names the option, not a command).
            other => panic!(
                "xtask option `{other}` in `{command}`: this test does not know what it \
                 changes; teach `plan` before putting it on the page"
            ),
        }
    }
    Plan::Run {
        virtio,
        args: short_form(tool),
    }
}

/// The command's own arguments, made short: rows of 0.5 s, 64-byte frames
/// only, no per-function profile unless the command asks for one, one sweep
/// trial, one load-curve rate without the knee search, and one pollnic path
/// for a sweep, load curve or forwarding run that names none (a drain: one
/// pollnic and one kernel row; the plain
/// comparison keeps all its default paths: those are what it tests).
/// Options given at their value in the counting guest (`--rate 20000`,
/// `--gen-core 1`, `--cores 0`) are dropped, so that a command that only
/// spells out the defaults is run once.
pub fn short_form(tool: &[&str]) -> Vec<String> {
    let has = |f: &str| tool.contains(&f);
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < tool.len() {
        let value = tool.get(i + 1).copied().unwrap_or("");
        match (tool[i], value) {
            ("--seconds" | "--sizes" | "--sweep-steps" | "--curve-rates", _)
            | ("--rate", "20000")
            | ("--gen-core", "1")
            | ("--cores", "0") => i += 2,
            (w, _) => {
                out.push(w.to_owned());
                i += 1;
            }
        }
    }
    out.extend(["--seconds", "0.5", "--sizes", "64"].map(String::from));
    if !has("--top-functions") {
        out.extend(["--top-functions", "0"].map(String::from));
    }
    let mode = has("--sweep") || has("--load-curve") || has("--forward");
    if (mode || has("--drain")) && !has("--paths") {
        let path = if has("--forward") {
            "pollnic-fwd-io"
        } else if has("--drain") {
            // A drain: one pollnic row and one kernel row, each held.
            "pollnic-1q-rxonly,kernel-afpacket"
        } else {
            "pollnic-1q"
        };
        out.extend(["--paths", path].map(String::from));
    }
    if has("--sweep") {
        out.extend(["--sweep-steps", "1"].map(String::from));
    }
    if has("--load-curve") {
        out.extend(["--curve-rates", "10000"].map(String::from));
        if !has("--no-curve-knee") {
            out.push("--no-curve-knee".into());
        }
    }
    out
}

/// Every JSON object under `v` that has a `path` and a `received`.
fn rows<'a>(v: &'a serde_json::Value, out: &mut Vec<&'a serde_json::Value>) {
    match v {
        serde_json::Value::Object(m) => {
            if m.contains_key("path") && m.contains_key("received") {
                out.push(v);
            }
            m.values().for_each(|x| rows(x, out));
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| rows(x, out)),
        _ => {}
    }
}

fn run(n: usize, virtio: bool, args: &[String]) {
    let (tx, rx) = if virtio {
        (vport(0), vport(1))
    } else {
        (port(0), port(1))
    };
    let out = std::env::temp_dir().join(format!("pollnic-count-docs-{}-{n}", std::process::id()));
    let mut args = args.to_vec();
    if virtio && !args.iter().any(|a| a == "--paths") {
        // The kernel's virtio rows hand the port to virtio_net and back each
        // row; in this testbed that corrupted the guest's memory in about 1
        // run in 6 (docs/design/testbed.md, "Stray DMA on the virtio ports").
        println!("virtio: pollnic's rows only; the kernel's virtio rows are left out (docs/design/testbed.md, stray DMA on the virtio ports)");
        args.extend(["--paths", "pollnic-1q,pollnic-1q-rxonly"].map(String::from));
    }
    let cmd = std::process::Command::new(example_exe("compare"))
        .args(["--tx", &tx, "--rx", &rx])
        .args(&args)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&cmd.stdout).to_string() + &String::from_utf8_lossy(&cmd.stderr);
    println!("{text}");
    let what = format!("compare {} (the page's command {n})", args.join(" "));
    assert!(cmd.status.success(), "{what} failed:\n{text}");
    assert!(!text.contains("is not available"), "{what}:\n{text}");
    let mut found = Vec::new();
    let files: Vec<serde_json::Value> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .map(|e| serde_json::from_str(&std::fs::read_to_string(e.path()).unwrap()).unwrap())
        .collect();
    files.iter().for_each(|f| rows(f, &mut found));
    assert!(!found.is_empty(), "{what}: no rows in {}", out.display());
    let pollnic: Vec<_> = found
        .iter()
        .filter(|r| {
            let p = r["path"].as_str().unwrap_or("");
            p.starts_with("pollnic") || p.starts_with("tx-pollnic")
        })
        .collect();
    assert!(
        pollnic
            .iter()
            .any(|r| r["received"].as_u64().unwrap_or(0) > 0),
        "{what}: no pollnic row received frames: {pollnic:?}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// Which test binary runs a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// igb, plain comparisons (`guest_count_docs`).
    IgbPlain,
    /// igb with `--sweep`, `--load-curve`, `--forward` or `--top-functions`
    /// (`guest_count_docs_modes`).
    IgbModes,
    /// `--family virtio` (`guest_count_docs_virtio`).
    Virtio,
}

/// The part a runnable command belongs to.
pub fn part(virtio: bool, args: &[String]) -> Part {
    let mode = ["--sweep", "--load-curve", "--forward", "--drain"]
        .iter()
        .any(|m| args.iter().any(|a| a == m));
    let profile = args
        .windows(2)
        .any(|w| w[0] == "--top-functions" && w[1] != "0");
    if virtio {
        Part::Virtio
    } else if mode || profile {
        Part::IgbModes
    } else {
        Part::IgbPlain
    }
}

/// The page's distinct runnable commands as (virtio, short-form arguments),
/// each once, printing each skipped one with its reason.
pub fn runnable() -> Vec<(bool, Vec<String>)> {
    let cmds = page_commands(&std::fs::read_to_string(page()).unwrap());
    let mut out: Vec<(bool, Vec<String>)> = Vec::new();
    for c in &cmds {
        // `cargo xtask compare --family` in prose names the option.
        if c == "--family" {
            continue;
        }
        match plan(c) {
            Plan::Skip(why) => println!("not run: `cargo xtask compare {c}`: {why}"),
            Plan::Run { virtio, args } => {
                if !out.contains(&(virtio, args.clone())) {
                    out.push((virtio, args));
                }
            }
        }
    }
    out
}

/// Run, in the counting guest, every runnable command of the page in `which`;
/// returns how many ran.
pub fn run_part(which: Part) -> usize {
    assert!(
        std::env::var_os("POLLNIC_COUNTS").is_some(),
        "no $POLLNIC_COUNTS: this test runs in the counting guest of `cargo xtask test`"
    );
    let mut ran = 0;
    for (n, (virtio, args)) in runnable().into_iter().enumerate() {
        if part(virtio, &args) != which {
            continue;
        }
        println!("running compare {}", args.join(" "));
        let t = std::time::Instant::now();
        run(n, virtio, &args);
        println!("took {:.1} s", t.elapsed().as_secs_f64());
        ran += 1;
    }
    ran
}
