//! Every command line in README.md and docs/ that runs one of the project's
//! tools (`pollnic <sub>`, `target/<profile>/examples/<name>`, `cargo xtask
//! <sub>`), in a shell block or an inline code span, names a tool that is
//! built and only flags that the tool's `--help` lists. The dated pages
//! under docs/results/ are records of what ran on their day and are left
//! as they are.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn pages(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            if !p.ends_with("results") {
                pages(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
}

/// The candidate command lines of a page: each line of a sh/bash/console
/// block (with `\` continuations joined), and each inline code span.
fn commands(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let (mut in_block, mut shell, mut pending) = (false, false, String::new());
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if let Some(tag) = t.strip_prefix("```") {
            shell = !in_block
                && matches!(
                    tag.split_whitespace().next(),
                    Some("sh" | "bash" | "console")
                );
            in_block = !in_block;
            continue;
        }
        if in_block {
            if shell {
                let l = t.strip_prefix("$ ").unwrap_or(t);
                if let Some(head) = l.strip_suffix('\\') {
                    pending.push_str(head);
                    pending.push(' ');
                } else {
                    pending.push_str(l);
                    out.push((i + 1, std::mem::take(&mut pending)));
                }
            }
            continue;
        }
        for (k, span) in line.split('`').enumerate() {
            if k % 2 == 1 {
                out.push((i + 1, span.to_owned()));
            }
        }
    }
    out
}

/// Which tool a command runs, its subcommand, and the flags it passes.
#[derive(Debug, PartialEq, Eq, Hash, Clone)]
enum Tool {
    Pollnic,
    Example(String),
    Xtask,
}

const POLLNIC_SUBS: [&str; 5] = ["status", "bind", "unbind", "doctor", "rss"];

/// One tool run by a command line: the tool, its subcommand, its flags.
type Run = (Tool, Option<String>, Vec<String>);

/// The tool runs in `cmd`: the first tool it names, and what follows a `--`
/// that hands its arguments on (`cargo xtask compare -- ...` to the compare
/// example, `cargo xtask demo -- ...` to loopback, and `cargo xtask vm --
/// '<command>'` to the command it runs in the guest).
fn parse(cmd: &str) -> Vec<Run> {
    // A list (`a & sleep 3; b`, `a && b`, `a | b`): each command on its own.
    if cmd.contains([';', '&', '|']) {
        return cmd.split([';', '&', '|']).flat_map(parse).collect();
    }
    let cleaned = cmd.replace(['\'', '"'], " ");
    let words: Vec<&str> = cleaned.split_whitespace().collect();
    let found = words.iter().enumerate().find_map(|(i, w)| {
        let next = words.get(i + 1).copied();
        if *w == "xtask" && i > 0 && words[i - 1] == "cargo" {
            Some((Tool::Xtask, i))
        } else if let Some((_, name)) = w.split_once("/examples/") {
            let name = name
                .trim_end_matches(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'));
            let real = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            (w.starts_with("target/") && real).then(|| (Tool::Example(name.to_owned()), i))
        } else if (*w == "pollnic" || w.ends_with("/pollnic"))
            && next.is_some_and(|n| POLLNIC_SUBS.contains(&n))
        {
            Some((Tool::Pollnic, i))
        } else {
            None
        }
    });
    let Some((tool, at)) = found else {
        return Vec::new();
    };
    let rest: Vec<&str> = words[at + 1..]
        .iter()
        .copied()
        .take_while(|w| {
            !matches!(*w, "|" | "||" | "&&" | ";" | ">" | "2>" | "2>&1") && !w.starts_with('#')
        })
        .collect();
    let (own, handed) = match rest.iter().position(|w| *w == "--") {
        Some(k) => (&rest[..k], Some(&rest[k + 1..])),
        None => (&rest[..], None),
    };
    let sub = match tool {
        Tool::Example(_) => None,
        _ => own
            .first()
            .filter(|w| !w.starts_with('-'))
            .map(|w| w.to_string()),
    };
    // A placeholder such as `cargo xtask ...` names no subcommand.
    if sub
        .as_deref()
        .is_some_and(|s| !s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
    {
        return Vec::new();
    }
    let flags = |ws: &[&str]| -> Vec<String> {
        ws.iter()
            .filter(|w| w.starts_with("--") && w.len() > 2)
            .map(|w| {
                let w = w.split('=').next().unwrap();
                w.trim_end_matches(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                    .to_owned()
            })
            .collect()
    };
    let mut runs = vec![(tool.clone(), sub.clone(), flags(own))];
    if let Some(handed) = handed {
        match (&tool, sub.as_deref()) {
            (Tool::Xtask, Some("compare")) => {
                runs.push((Tool::Example("compare".into()), None, flags(handed)))
            }
            (Tool::Xtask, Some("demo")) => {
                runs.push((Tool::Example("loopback".into()), None, flags(handed)))
            }
            (Tool::Xtask, _) => runs.extend(parse(&handed.join(" "))),
            _ => {}
        }
    }
    runs
}

fn help(tool: &Tool, sub: Option<&str>) -> Result<String, String> {
    let exe = match tool {
        Tool::Pollnic => PathBuf::from(pollnic_tests::pollnic_exe()),
        Tool::Xtask => pollnic_tests::xtask_exe(),
        // Built next to the tools' examples (`cargo xtask test` builds every
        // package's examples first).
        Tool::Example(name) => {
            let exe = pollnic_tests::example_exe("loopback").with_file_name(name);
            if !exe.is_file() {
                return Err(format!("no example `{name}` is built ({})", exe.display()));
            }
            exe
        }
    };
    let mut c = Command::new(&exe);
    c.args(sub).arg("--help");
    let out = c
        .output()
        .map_err(|e| format!("running {}: {e}", exe.display()))?;
    if !out.status.success() {
        return Err(format!(
            "`{} {} --help` failed: {}",
            exe.display(),
            sub.unwrap_or(""),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether `help` lists `flag` as a word of its own (`--rate`, not `--rate-limit`).
fn lists(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(i, _)| {
        let after = help[i + flag.len()..].chars().next();
        !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

#[test]
fn every_documented_command_names_a_built_tool_and_its_real_flags() {
    let root = repo_root();
    let mut files = vec![root.join("README.md")];
    pages(&root.join("docs"), &mut files);
    let mut helps: HashMap<(Tool, Option<String>), Result<String, String>> = HashMap::new();
    let (mut checked, mut wrong) = (0, Vec::new());
    for file in &files {
        let text = fs::read_to_string(file).unwrap();
        for (line, cmd) in commands(&text) {
            for (tool, sub, flags) in parse(&cmd) {
                let sub = match (&tool, sub) {
                    (Tool::Pollnic, Some(s)) if POLLNIC_SUBS.contains(&s.as_str()) => Some(s),
                    (Tool::Xtask, Some(s)) => Some(s),
                    _ => None,
                };
                let key = (tool.clone(), sub.clone());
                let text = helps
                    .entry(key)
                    .or_insert_with(|| help(&tool, sub.as_deref()))
                    .clone();
                let top = match &tool {
                    Tool::Xtask => helps
                        .entry((Tool::Xtask, None))
                        .or_insert_with(|| help(&Tool::Xtask, None))
                        .clone()
                        .unwrap_or_default(),
                    _ => String::new(),
                };
                let at = format!(
                    "{}:{line}: `{}`",
                    file.strip_prefix(&root).unwrap().display(),
                    cmd.trim()
                );
                checked += 1;
                match text {
                    Err(e) => wrong.push(format!("{at}: {e}")),
                    Ok(h) => {
                        for f in flags.iter().filter(|f| !lists(&h, f) && !lists(&top, f)) {
                            wrong.push(format!("{at}: {f} is not in its --help"));
                        }
                    }
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} commands found: is the parser broken?"
    );
    assert!(
        wrong.is_empty(),
        "{} wrong command line(s):\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
