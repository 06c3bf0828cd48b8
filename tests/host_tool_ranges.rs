//! Every numeric option of every tool states its range in `--help`
//! (`[range: MIN..=MAX]`), and the tools hold to it: walked with 0, 1, the
//! minimum and maximum, one past each, `u32::MAX`, `u64::MAX`, a negative
//! number and a non-number, no value makes a tool panic or abort, and every
//! value outside the range is refused with exit status 2 and one line on
//! stderr naming the option, before any device is opened (the ports given
//! here do not exist, so a tool that got past its checks fails to open them
//! with status 1). An option that takes a value and states no range must
//! be one of the named non-numeric ones below: a new numeric option without
//! a range fails this test.

use std::path::PathBuf;
use std::process::{Command, Output};

/// Ports no host has (bus 0x7f, device 0x1f): opening them fails cleanly.
const NO_PORT: &str = "0000:7f:1f.6";
const NO_PORT2: &str = "0000:7f:1f.7";

struct Tool {
    name: &'static str,
    exe: PathBuf,
    /// Arguments before the option under test (a subcommand, required ports).
    base: Vec<String>,
    /// Options that take a value that is not a number.
    not_numeric: &'static [&'static str],
}

fn tools(dir: &std::path::Path) -> Vec<Tool> {
    let ex = pollnic_tests::example_exe;
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let pcap = dir.join("out.pcap").to_string_lossy().into_owned();
    vec![
        Tool {
            name: "loopback",
            exe: ex("loopback"),
            base: s(&["--tx", NO_PORT, "--rx", NO_PORT2]),
            not_numeric: &["--tx", "--rx", "--cores", "--rx-mode"],
        },
        Tool {
            name: "pktgen",
            exe: ex("pktgen"),
            base: s(&["--port", NO_PORT]),
            not_numeric: &["--port", "--dst", "--write"],
        },
        Tool {
            name: "capture",
            exe: ex("capture"),
            base: s(&["--port", NO_PORT, "--out", &pcap]),
            not_numeric: &["--port", "--out", "--cores"],
        },
        Tool {
            name: "fwd",
            exe: ex("fwd"),
            base: s(&["--ports", NO_PORT]),
            not_numeric: &["--ports", "--mode", "--cores"],
        },
        Tool {
            name: "compare",
            exe: ex("compare"),
            base: s(&[
                "--tx",
                NO_PORT,
                "--rx",
                NO_PORT2,
                "--out",
                &dir.to_string_lossy(),
            ]),
            not_numeric: &[
                "--tx", "--rx", "--paths", "--cores", "--out", "--label", "--pmu",
            ],
        },
        Tool {
            name: "smol-echo",
            exe: ex("smol-echo"),
            base: s(&["--port", NO_PORT, "--ip", "10.0.0.2/24"]),
            not_numeric: &["--port", "--ip"],
        },
        Tool {
            name: "smol-http",
            exe: ex("smol-http"),
            base: s(&["--port", NO_PORT, "--ip", "10.0.0.2/24"]),
            not_numeric: &["--port", "--ip"],
        },
        Tool {
            name: "pollnic doctor",
            exe: pollnic_tests::pollnic_exe().into(),
            base: s(&["doctor", NO_PORT]),
            not_numeric: &["--cores", "--sysfs", "--selfcheck"],
        },
        Tool {
            name: "pollnic rss",
            exe: pollnic_tests::pollnic_exe().into(),
            base: s(&["rss", "--src", "10.0.0.1", "--dst", "10.0.0.2"]),
            not_numeric: &["--src", "--dst", "--proto", "--key", "--reta", "--sysfs"],
        },
    ]
}

fn run(tool: &Tool, extra: &[&str]) -> Output {
    Command::new(&tool.exe)
        .args(&tool.base)
        .args(extra)
        .env_remove("POLLNIC_INJECT_PANIC")
        .output()
        .unwrap_or_else(|e| panic!("{}: cannot run {}: {e}", tool.name, tool.exe.display()))
}

/// `(option, range)` for every value-taking option in `--help`; the range
/// is `None` where the help states none.
fn options(tool: &Tool) -> Vec<(String, Option<(String, String)>)> {
    let help = run(tool, &["--help"]);
    assert!(help.status.success(), "{} --help failed", tool.name);
    let text = String::from_utf8_lossy(&help.stdout).into_owned();
    let mut out: Vec<(String, Option<(String, String)>)> = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("--") || (t.starts_with('-') && t.contains(", --")) {
            let long = t
                .split_whitespace()
                .find(|w| w.starts_with("--"))
                .unwrap()
                .trim_end_matches(',')
                .to_string();
            if t.contains('<') {
                out.push((long, None));
            }
        }
        if let Some(i) = t.find("[range: ") {
            let r = &t[i + 8..];
            let r = &r[..r.find(']').expect("closing bracket")];
            let (lo, hi) = r.split_once("..=").expect("MIN..=MAX");
            if let Some(last) = out.last_mut() {
                last.1 = Some((lo.to_string(), hi.to_string()));
            }
        }
    }
    out
}

fn stderr_lines(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// The values to try and whether each lies in `lo..=hi`.
fn boundary_values(lo: &str, hi: &str) -> Vec<(String, bool)> {
    if lo.contains('.') || hi.contains('.') {
        let (a, b): (f64, f64) = (lo.parse().unwrap(), hi.parse().unwrap());
        return [
            "0",
            "1",
            lo,
            hi,
            &(a - 1.0).to_string(),
            &(b + 1.0).to_string(),
            "-1",
            "x",
        ]
        .iter()
        .map(|v| {
            let inside = v.parse::<f64>().is_ok_and(|x| (a..=b).contains(&x));
            (v.to_string(), inside)
        })
        .collect();
    }
    let (a, b): (u128, u128) = (lo.parse().unwrap(), hi.parse().unwrap());
    let mut vals = vec![
        "0".to_string(),
        "1".to_string(),
        lo.to_string(),
        hi.to_string(),
        (b + 1).to_string(),
        u32::MAX.to_string(),
        u64::MAX.to_string(),
        "-1".to_string(),
        "x".to_string(),
    ];
    if a > 0 {
        vals.push((a - 1).to_string());
    }
    vals.into_iter()
        .map(|v| {
            let inside = v.parse::<u128>().is_ok_and(|x| (a..=b).contains(&x));
            (v, inside)
        })
        .collect()
}

#[test]
fn every_numeric_option_states_its_range_and_the_tools_hold_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut walked = 0;
    for tool in tools(dir.path()) {
        let opts = options(&tool);
        assert!(
            !opts.is_empty(),
            "{}: no options found in --help",
            tool.name
        );
        for (opt, range) in opts {
            let Some((lo, hi)) = range else {
                assert!(
                    tool.not_numeric.contains(&opt.as_str()) || opt == "--help",
                    "{}: {opt} takes a value but its --help states no [range: MIN..=MAX] \
                     (a numeric option needs one; a non-numeric one goes in this test's list)",
                    tool.name
                );
                continue;
            };
            for (value, inside) in boundary_values(&lo, &hi) {
                // `--opt=value`, so that `-1` is a value, not a flag.
                let o = run(&tool, &[&format!("{opt}={value}")]);
                let what = format!("{} {opt} {value}", tool.name);
                let code = o.status.code();
                let err = stderr_lines(&o);
                assert!(
                    code.is_some(),
                    "{what}: killed by a signal (abort?): {err:?}"
                );
                assert_ne!(code, Some(101), "{what}: panicked: {err:?}");
                assert!(
                    !err.iter().any(|l| l.contains("panicked")),
                    "{what}: panicked: {err:?}"
                );
                if !inside {
                    assert_eq!(
                        code,
                        Some(2),
                        "{what}: out of {lo}..={hi} but not refused: {err:?}"
                    );
                }
                if code == Some(2) {
                    assert_eq!(err.len(), 1, "{what}: want one line on stderr, got {err:?}");
                    assert!(
                        err[0].contains(&opt),
                        "{what}: the line does not name {opt}: {err:?}"
                    );
                }
                walked += 1;
            }
        }
    }
    assert!(walked > 200, "only {walked} cases walked");
}

#[test]
fn cores_are_checked_alike_everywhere_and_contradictions_refused() {
    let dir = tempfile::tempdir().unwrap();
    for tool in tools(dir.path()) {
        if !tool.not_numeric.contains(&"--cores") {
            continue;
        }
        for (cores, want) in [
            ("0,0", "given twice"),
            ("x", "--cores"),
            ("4096", "--cores"),
        ] {
            if cores == "4096" && tool.name == "pollnic doctor" {
                // doctor reports a core the machine lacks as a finding.
                continue;
            }
            let o = run(&tool, &["--cores", cores]);
            let err = stderr_lines(&o);
            assert_eq!(
                o.status.code(),
                Some(2),
                "{} --cores {cores}: {err:?}",
                tool.name
            );
            assert_eq!(err.len(), 1, "{} --cores {cores}: {err:?}", tool.name);
            assert!(
                err[0].contains(want),
                "{} --cores {cores}: {err:?}",
                tool.name
            );
        }
    }
    let fwd = &tools(dir.path())[3];
    let o = run(fwd, &["--promisc", "--no-promisc"]);
    assert_eq!(o.status.code(), Some(2), "{:?}", stderr_lines(&o));
}

/// Runs `exe` with `args` (split on spaces) and returns its exit status and stderr.
fn status_and_stderr(exe: &std::path::Path, args: &str) -> (Option<i32>, String) {
    let o = Command::new(exe)
        .args(args.split(' ').filter(|a| !a.is_empty()))
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_missing_argument_is_named_with_the_usage_line_and_exits_2() {
    let pollnic: std::path::PathBuf = pollnic_tests::pollnic_exe().into();
    let ex = pollnic_tests::example_exe;
    let cases: [(std::path::PathBuf, &str, &str); 6] = [
        (pollnic.clone(), "bind", "<ADDR>"),
        (pollnic.clone(), "rss --src 1.2.3.4", "--dst <DST>"),
        (ex("loopback"), "", "--tx <ADDR>"),
        (ex("loopback"), "--tx 00:08.0", "--rx <ADDR>"),
        (ex("fwd"), "", "<"),
        (ex("compare"), "", "<"),
    ];
    for (exe, args, name) in cases {
        let (code, err) = status_and_stderr(&exe, args);
        let what = format!("{} {args}", exe.display());
        assert_eq!(code, Some(2), "{what}: {err}");
        let lines: Vec<&str> = err.lines().collect();
        assert!(
            lines[0].contains("required arguments were not provided") && lines[0].contains(name),
            "{what}: the missing argument is not named: {err}"
        );
        assert!(
            lines.get(1).is_some_and(|l| l.starts_with("Usage: ")),
            "{what}: no usage line after it: {err}"
        );
    }
}

#[test]
fn pollnic_rss_refuses_bad_values_with_exit_2() {
    let pollnic: std::path::PathBuf = pollnic_tests::pollnic_exe().into();
    for (args, want) in [
        ("rss --src 1.2.3.4 --dst 5.6.7.8 --key abc", "key"),
        ("rss --src 1.2.3.4 --dst 5.6.7.8 --reta 0,5 --queues 2", "5"),
        ("rss --src 1.2.3.4 --dst ::1", "IPv4 or both IPv6"),
        ("rss --src 1.2.3.4 --dst 5.6.7.8 --queues 0", "queues"),
    ] {
        let (code, err) = status_and_stderr(&pollnic, args);
        assert_eq!(code, Some(2), "{args}: {err}");
        assert!(
            err.starts_with("pollnic: ") && err.contains(want),
            "{args}: {err}"
        );
    }
}
