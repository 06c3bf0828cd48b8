//! Every tool's help says in words what its jargon does (issue 46 item 12).
//!
//! The help texts keep the names the field uses (register names such as
//! EITR or DCMD.VLE, QEMU's TCG, RSS), but where a reader first meets one in
//! a tool's `--help` or `-h`, words saying what it is or does must stand
//! next to it: within [`WINDOW`] characters either side of its first
//! occurrence. The tools: the `pollnic` command and each of its subcommands,
//! and every example of the pollnic-tools package (the list is read from
//! examples/Cargo.toml, so a new tool is checked too). No hardware needed:
//! only the built binaries (`cargo build -p pollnic-cli --bin pollnic` and
//! `cargo build -p pollnic-tools --examples`, into this test's target dir).

use pollnic_tests::profile_dir;
use std::path::Path;
use std::process::Command;

/// How far from a term, in characters either side, its gloss may stand.
const WINDOW: usize = 160;

/// Each term (matched case-sensitively, as a whole word) and the phrases
/// that gloss it (matched case-insensitively); one of them must stand near
/// the term's first occurrence in each help text that uses the term.
const TERMS: &[(&str, &[&str])] = &[
    (
        "DCMD.VLE",
        &["VLAN insertion", "insert the tag", "VLAN tag insertion"],
    ),
    (
        "ICR.RXO",
        &[
            "receive ring overrun",
            "RX ring overrun",
            "no free descriptor",
        ],
    ),
    ("EITR", &["interrupt throttle"]),
    ("TDT", &["transmit tail", "TX tail"]),
    ("D3hot", &["power state"]),
    ("TCG", &["CPU emulation in software"]),
    ("RETA", &["redirection table"]),
    (
        "MSI-X",
        &[
            "message-signalled interrupt",
            "its own interrupt",
            "own interrupt",
        ],
    ),
    ("RSS", &["receive-side scaling"]),
    ("ROC", &["longer than", "oversize"]),
    ("RNBC", &["no free descriptor"]),
    ("MPC", &["packet buffer was full", "missed"]),
    ("PAYLEN", &["payload length"]),
    ("FCS", &["frame check sequence", "CRC"]),
    ("DDIO", &["Data Direct I/O", "straight into"]),
    ("LLC", &["last-level cache"]),
    ("RPS", &["receive packet steering"]),
    ("RFS", &["receive flow steering"]),
    (
        "PMU",
        &["performance monitoring unit", "performance counter"],
    ),
    ("Toeplitz", &["hash"]),
];

/// The examples of pollnic-tools, by name, from examples/Cargo.toml.
fn example_names() -> Vec<String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let mut names = Vec::new();
    let mut in_example = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_example = line == "[[example]]";
        } else if in_example {
            if let Some(value) = line.strip_prefix("name").map(str::trim_start) {
                if let Some(value) = value.strip_prefix('=') {
                    names.push(value.trim().trim_matches('"').to_string());
                }
            }
        }
    }
    assert!(
        names.len() >= 7,
        "{}: expected at least the seven tools, found {names:?}",
        manifest.display()
    );
    names
}

/// The help text `exe args` prints (stdout), with every run of whitespace
/// made one space, so that wrapping does not move a gloss out of reach.
fn help(exe: &Path, args: &[&str]) -> String {
    one_line(&help_raw(exe, args))
}

/// `text` with every run of whitespace made one space.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The help text `exe args` prints (stdout), as printed.
fn help_raw(exe: &Path, args: &[&str]) -> String {
    assert!(
        exe.is_file(),
        "{} not built: run `cargo build -p pollnic-cli --bin pollnic` and \
         `cargo build -p pollnic-tools --examples` into this test's target dir first",
        exe.display()
    );
    let out = Command::new(exe).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{} {}: {}",
        exe.display(),
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The char index of the first whole-word, case-sensitive occurrence of
/// `term` in `chars`, skipping value placeholders such as `<RETA>`.
fn first_occurrence(chars: &[char], term: &str) -> Option<usize> {
    let term: Vec<char> = term.chars().collect();
    let word = |c: char| c.is_alphanumeric() || c == '_';
    (0..chars.len().saturating_sub(term.len() - 1)).find(|&i| {
        chars[i..i + term.len()] == term[..]
            && (i == 0 || !word(chars[i - 1]) && chars[i - 1] != '<')
            && chars.get(i + term.len()).is_none_or(|&c| !word(c))
    })
}

/// Each jargon term in `text` with no gloss near its first occurrence, as
/// one line per term naming the tool, the term and the text around it.
fn unglossed(tool: &str, text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut missing = Vec::new();
    for (term, glosses) in TERMS {
        let Some(at) = first_occurrence(&chars, term) else {
            continue;
        };
        let start = at.saturating_sub(WINDOW);
        let end = (at + term.chars().count() + WINDOW).min(chars.len());
        let around: String = chars[start..end].iter().collect();
        let lower = around.to_lowercase();
        if !glosses.iter().any(|g| lower.contains(&g.to_lowercase())) {
            missing.push(format!(
                "{tool}: {term} is not explained near its first use \
                 (want one of {glosses:?} within {WINDOW} characters): …{around}…"
            ));
        }
    }
    missing
}

#[test]
fn every_tools_help_says_what_its_jargon_does() {
    let mut missing = Vec::new();
    let mut checked = 0;

    let pollnic = profile_dir().join("pollnic");
    let top = help_raw(&pollnic, &["--help"]);
    missing.extend(unglossed("pollnic --help", &one_line(&top)));
    missing.extend(unglossed("pollnic -h", &help(&pollnic, &["-h"])));
    checked += 1;
    // Subcommands, as `pollnic --help` lists them: the first word of each
    // line under "Commands:" indented by two spaces (`help` has no help).
    let subcommands: Vec<&str> = top
        .lines()
        .skip_while(|line| *line != "Commands:")
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .collect();
    for expected in ["status", "bind", "doctor", "unbind", "rss"] {
        assert!(
            subcommands.contains(&expected),
            "subcommand {expected} not found in `pollnic --help`: {subcommands:?}"
        );
    }
    for sub in &subcommands {
        for flag in ["--help", "-h"] {
            let text = help(&pollnic, &[sub, flag]);
            missing.extend(unglossed(&format!("pollnic {sub} {flag}"), &text));
        }
        checked += 1;
    }

    for name in example_names() {
        let exe = profile_dir().join("examples").join(&name);
        for flag in ["--help", "-h"] {
            let text = help(&exe, &[flag]);
            missing.extend(unglossed(&format!("{name} {flag}"), &text));
        }
        checked += 1;
    }

    assert!(checked >= 13, "only {checked} tools checked");
    assert!(
        missing.is_empty(),
        "{} unexplained terms in the tools' help:\n{}",
        missing.len(),
        missing.join("\n")
    );
}

#[test]
fn first_occurrence_skips_placeholders_and_parts_of_words() {
    let chars: Vec<char> = "--reta <RETA> RSSX xRSS, RSS: spread".chars().collect();
    assert_eq!(first_occurrence(&chars, "RETA"), None);
    assert_eq!(first_occurrence(&chars, "RSS"), Some(25));
    let text = "queues spread by RSS.";
    assert_eq!(unglossed("t", text).len(), 1);
    assert!(unglossed("t", "RSS (receive-side scaling) spreads flows").is_empty());
}
