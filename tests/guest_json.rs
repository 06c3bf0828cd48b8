//! `--json` on loopback, fwd, pktgen and capture: every line of stdout is
//! one JSON object (`start`, `second`..., `summary`), and the summary
//! carries the counts, rates, per-queue shares, drops and (loopback) latency
//! percentiles that agree with the hardware counters.

use pollnic_tests::{example_exe, port};
use serde_json::Value;
use std::process::Command;

/// Runs example `name` with `args`; every stdout line must parse as JSON.
fn json_lines(name: &str, args: &[&str]) -> Vec<Value> {
    let out = Command::new(example_exe(name)).args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    println!(
        "$ {name} {}\n{text}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{name} failed");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert_eq!(
        lines.first().and_then(|v| v["type"].as_str()),
        Some("start"),
        "{name}: no start object"
    );
    assert_eq!(
        lines.last().and_then(|v| v["type"].as_str()),
        Some("summary"),
        "{name}: no summary object"
    );
    lines
}

#[test]
#[ignore = "needs the QEMU igb testbed: run with `cargo xtask test`"]
fn loopback_json_has_rates_shares_drops_and_latency() {
    let lines = json_lines(
        "loopback",
        &[
            "--tx",
            &port(0),
            "--rx",
            &port(1),
            "--seconds",
            "3",
            "--rate",
            "5000",
            "--json",
        ],
    );
    let seconds = lines.iter().filter(|v| v["type"] == "second").count();
    assert!(seconds >= 1, "a second object at least");
    let s = lines.last().unwrap();
    let received = s["received"].as_u64().unwrap();
    assert!(received > 5000, "{s}");
    assert_eq!(
        s["lost"].as_u64().unwrap(),
        s["sent"].as_u64().unwrap() - received
    );
    assert_eq!(s["queues"][0]["share"], 1.0);
    // The receiving port reports checksum status: every IPv4 header good.
    assert_eq!(s["bad_checksums"].as_u64(), Some(0), "{s}");
    assert_eq!(
        s["rx_port_counters"]["rx_packets"].as_u64().unwrap(),
        received
    );
    assert_eq!(s["tx_port_counters"]["tx_packets"], s["sent"]);
    let lat = &s["latency"];
    assert_eq!(lat["samples"].as_u64().unwrap(), received);
    let (p50, p99, max) = (
        lat["p50_ns"].as_u64().unwrap(),
        lat["p99_ns"].as_u64().unwrap(),
        lat["max_ns"].as_u64().unwrap(),
    );
    assert!(0 < p50 && p50 <= p99 && p99 <= max, "{lat}");
    assert!(s["rx"]["pps"].as_f64().unwrap() > 0.0);
}

#[test]
#[ignore = "needs the QEMU igb testbed: run with `cargo xtask test`"]
fn pktgen_capture_and_fwd_json() {
    let p = json_lines(
        "pktgen",
        &[
            "--port",
            &port(2),
            "--count",
            "300",
            "--rate",
            "3000",
            "--seconds",
            "0",
            "--json",
        ],
    );
    let s = p.last().unwrap();
    assert_eq!(s["sent"], 300);
    assert_eq!(s["tx_packets_counter"], 300);

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("idle.pcapng");
    let c = json_lines(
        "capture",
        &[
            "--port",
            &port(3),
            "--seconds",
            "2",
            "--json",
            "--out",
            file.to_str().unwrap(),
        ],
    );
    let s = c.last().unwrap();
    assert_eq!(s["frames"], 0);
    assert_eq!(s["file"], file.to_str().unwrap());
    assert!(file.is_file(), "an empty capture is still a complete file");

    let f = json_lines("fwd", &["--ports", &port(1), "--seconds", "2", "--json"]);
    let s = f.last().unwrap();
    assert_eq!(s["mode"], "io");
    assert_eq!(s["directions"][0]["received"], 0);
    assert!(s["ports"][0]["counters"]["rx_packets"].is_u64());
}
