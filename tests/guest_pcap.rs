//! pktgen and capture end to end: `capture` on port 1 writes a pcap while
//! `pktgen` sends exactly 1000 mixed-size frames from port 0 at 2000 packets/s
//! and records what the NIC accepted in its own pcap (`--write`). `tcpdump -r`
//! (Debian's, installed by `cargo xtask test`) must read 1000 frames from
//! each file, with the same lengths and bytes in the same order; the capture
//! carries nanosecond timestamps and no temporary file is left behind. A
//! second test captures on two RSS queues (pcapng) and checks that both
//! queues receive traffic and every frame is written once, byte-identical.

use pollnic_tests::{env, example_exe, port};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const FRAMES: usize = 1000;

/// Every frame of `file` as tcpdump prints it (`-xx`: the whole frame in
/// hex), checked against the length tcpdump gives in its header line.
fn tcpdump_frames(file: &std::path::Path) -> Vec<Vec<u8>> {
    let out = Command::new("tcpdump")
        .args(["-r"])
        .arg(file)
        .args(["-nn", "-e", "-xx", "-s", "0"])
        .output()
        .expect("tcpdump (Debian package tcpdump; `cargo xtask test` installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "tcpdump -r {} failed: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut frames: Vec<(usize, Vec<u8>)> = Vec::new();
    for line in text.lines() {
        if let Some(hex) = line.trim_start().strip_prefix("0x") {
            let (_, bytes) = hex.split_once(':').expect("offset:");
            let f = &mut frames.last_mut().expect("hex before any header").1;
            for word in bytes.split_whitespace() {
                for i in (0..word.len()).step_by(2) {
                    f.push(u8::from_str_radix(&word[i..i + 2], 16).unwrap());
                }
            }
        } else {
            // "<ts> <src> > <dst>, ethertype IPv4 (0x0800), length 60: ..."
            let len = line
                .split(", length ")
                .nth(1)
                .and_then(|r| r.split(':').next())
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or_else(|| panic!("no frame length in tcpdump line {line:?}"));
            frames.push((len, Vec::new()));
        }
    }
    frames
        .into_iter()
        .enumerate()
        .map(|(i, (len, bytes))| {
            assert_eq!(
                bytes.len(),
                len,
                "frame {i}: tcpdump's length vs its hex dump"
            );
            bytes
        })
        .collect()
}

#[test]
#[ignore = "needs the QEMU igb testbed: run with `cargo xtask test`"]
fn pktgen_sends_1000_mixed_frames_and_capture_writes_them_all() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let rx_file = dir.path().join("rx.pcap");
    let tx_file = dir.path().join("sent.pcap");

    let mut capture = Command::new(example_exe("capture"))
        .args([
            "--port",
            &port(1),
            "--count",
            &FRAMES.to_string(),
            "--seconds",
            "120",
            "--out",
        ])
        .arg(&rx_file)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(capture.stdout.take().unwrap()).lines();
    let first = lines.next().expect("capture's start line").unwrap();
    println!("{first}");
    assert!(first.ends_with("; capturing"), "{first}");

    let gen = Command::new(example_exe("pktgen"))
        .args([
            "--port",
            &port(0),
            "--count",
            &FRAMES.to_string(),
            "--rate",
            "2000",
            "--frame-size",
            "0",
            "--seconds",
            "0",
            "--dst",
            &env("POLLNIC_PORT1_MAC"),
            "--write",
        ])
        .arg(&tx_file)
        .output()
        .unwrap();
    let gen_out = String::from_utf8_lossy(&gen.stdout);
    println!("{gen_out}{}", String::from_utf8_lossy(&gen.stderr));
    assert!(gen.status.success(), "pktgen failed");
    assert!(
        gen_out.contains(&format!("sent       {FRAMES} frames")),
        "{gen_out}"
    );
    assert!(
        gen_out.contains(&format!("tx_packets counter: {FRAMES})")),
        "{gen_out}"
    );

    // capture stops by itself after 1000 frames.
    let status = wait_for_capture(&mut capture, FRAMES);
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    println!("{}", rest.join("\n"));
    assert!(status.success(), "capture failed");
    assert!(rest
        .iter()
        .any(|l| l == &format!("written    {FRAMES} frames to {}", rx_file.display())));

    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["rx.pcap", "sent.pcap"],
        "no temporary file may remain"
    );
    let magic = &std::fs::read(&rx_file).unwrap()[..4];
    assert_eq!(
        magic,
        0xa1b2_3c4d_u32.to_ne_bytes(),
        "pcap with nanosecond timestamps, in the host's byte order"
    );

    let sent = tcpdump_frames(&tx_file);
    let got = tcpdump_frames(&rx_file);
    assert_eq!(
        sent.len(),
        FRAMES,
        "tcpdump reads {FRAMES} frames from pktgen's file"
    );
    assert_eq!(
        got.len(),
        FRAMES,
        "tcpdump reads {FRAMES} frames from the capture"
    );
    for (i, (s, g)) in sent.iter().zip(&got).enumerate() {
        assert_eq!(s.len(), g.len(), "frame {i}: length");
        assert!(s == g, "frame {i}: bytes differ");
        // And it is the test frame pktgen means to send: seq i, the pattern intact.
        let info = pollnic_tools::frame::parse(g).expect("a test frame");
        assert_eq!(info.seq, i as u64);
        assert_eq!(g.len(), pollnic_tools::frame::mixed_len(i as u64));
        assert!(pollnic_tools::frame::pattern_ok(g, i as u64));
    }
    let mut lens: Vec<usize> = got.iter().map(Vec::len).collect();
    lens.sort_unstable();
    lens.dedup();
    assert!(
        lens.len() > 100 && lens[0] == 60 && *lens.last().unwrap() == 1514,
        "mixed sizes 60..=1514"
    );
}

/// Multi-queue capture under traffic: `capture --queues 2` (RSS, one pinned
/// thread per queue) while pktgen sends 400 mixed-size frames of 64 flows
/// from port 0. Both queues must receive some of them, and the pcapng file
/// must hold every frame exactly once, each byte-identical to what pktgen
/// recorded for its sequence number (frames of different queues may
/// interleave in the file in any order).
#[test]
#[ignore = "needs the QEMU igb testbed: run with `cargo xtask test`"]
fn capture_on_two_rss_queues_writes_every_frame_of_both() {
    const N: usize = 400;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let rx_file = dir.path().join("rx2.pcapng");
    let tx_file = dir.path().join("sent2.pcap");
    let mut capture = Command::new(example_exe("capture"))
        .args([
            "--port",
            &port(1),
            "--queues",
            "2",
            "--cores",
            "0,1",
            "--count",
            &N.to_string(),
            "--seconds",
            "120",
            "--out",
        ])
        .arg(&rx_file)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(capture.stdout.take().unwrap()).lines();
    let first = lines.next().expect("capture's start line").unwrap();
    println!("{first}");
    assert!(
        first.contains("2 queue(s) on cores [0, 1]") && first.ends_with("; capturing"),
        "{first}"
    );
    let gen = Command::new(example_exe("pktgen"))
        .args([
            "--port",
            &port(0),
            "--count",
            &N.to_string(),
            "--rate",
            "1000",
            "--frame-size",
            "0",
            "--flows",
            "64",
            "--seconds",
            "0",
            "--dst",
            &env("POLLNIC_PORT1_MAC"),
            "--write",
        ])
        .arg(&tx_file)
        .output()
        .unwrap();
    println!(
        "{}{}",
        String::from_utf8_lossy(&gen.stdout),
        String::from_utf8_lossy(&gen.stderr)
    );
    assert!(gen.status.success(), "pktgen failed");
    let status = wait_for_capture(&mut capture, N);
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    println!("{}", rest.join("\n"));
    assert!(status.success(), "capture failed");
    // "  queue 0          137 frames (34.2 %)"
    let per_queue: Vec<u64> = rest
        .iter()
        .filter_map(|l| l.trim_start().strip_prefix("queue "))
        .map(|r| r.split_whitespace().nth(1).unwrap().parse().unwrap())
        .collect();
    assert_eq!(per_queue.len(), 2, "one summary line per queue");
    assert!(
        per_queue.iter().all(|&n| n > 0),
        "RSS spread the 64 flows over both queues: {per_queue:?}"
    );
    assert_eq!(per_queue.iter().sum::<u64>(), N as u64);

    let sent = tcpdump_frames(&tx_file);
    let got = tcpdump_frames(&rx_file);
    assert_eq!(sent.len(), N);
    assert_eq!(got.len(), N, "tcpdump reads {N} frames from the capture");
    let mut seen = vec![false; N];
    for g in &got {
        let seq = pollnic_tools::frame::parse(g).expect("a test frame").seq as usize;
        assert!(seq < N && !seen[seq], "frame {seq} twice or out of range");
        seen[seq] = true;
        assert!(
            g == &sent[seq],
            "frame {seq}: bytes differ from what pktgen sent"
        );
    }
    // Each packet block carries the NIC's checksum status as its comment:
    // the test frames' IPv4 header checksum good, no UDP checksum to check.
    let bytes = std::fs::read(&rx_file).unwrap();
    let mut r = pcap_file::pcapng::PcapNgReader::new(&bytes[..]).unwrap();
    let mut comments = Vec::new();
    while let Some(b) = r.next_block() {
        if let pcap_file::pcapng::Block::EnhancedPacket(p) = b.unwrap() {
            for o in &p.options {
                if let pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketOption::Comment(
                    c,
                ) = o
                {
                    comments.push(c.to_string());
                }
            }
        }
    }
    assert_eq!(comments.len(), N, "one comment per frame");
    assert!(
        comments
            .iter()
            .all(|c| c == "pollnic: checksum ip=good l4=not-checked"),
        "{:?}",
        comments
            .iter()
            .find(|c| *c != "pollnic: checksum ip=good l4=not-checked")
    );
}

/// Waits for `capture`, which stops by itself after `frames` frames; kills it
/// and fails the test if it has not stopped within 60 s (frames lost).
fn wait_for_capture(capture: &mut std::process::Child, frames: usize) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(s) = capture.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            capture.kill().unwrap();
            panic!("capture did not stop after {frames} frames within 60 s (frames lost?)");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `capture --count 300` while 1000 frames arrive: 300 are written and the
/// other 700 are drained and reported as arrived after the stop, so that
/// written + after the stop equals the port's `rx_packets`; the rate is
/// timed from the first written frame to the last.
#[test]
#[ignore = "needs the QEMU igb testbed: run with `cargo xtask test`"]
fn capture_past_its_count_reports_every_frame_the_nic_counted() {
    let dir = tempfile::tempdir().unwrap();
    let rx_file = dir.path().join("rx.pcap");
    let mut capture = Command::new(example_exe("capture"))
        .args([
            "--port",
            &port(1),
            "--count",
            "300",
            "--seconds",
            "120",
            "--out",
        ])
        .arg(&rx_file)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(capture.stdout.take().unwrap()).lines();
    let first = lines.next().expect("capture's start line").unwrap();
    assert!(first.ends_with("; capturing"), "{first}");
    let gen = Command::new(example_exe("pktgen"))
        .args([
            "--port",
            &port(0),
            "--count",
            "1000",
            "--rate",
            "2000",
            "--seconds",
            "0",
        ])
        .args(["--dst", &env("POLLNIC_PORT1_MAC")])
        .output()
        .unwrap();
    assert!(gen.status.success(), "pktgen failed");
    let status = wait_for_capture(&mut capture, 300);
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let text = rest.join("\n");
    println!("{text}");
    assert!(status.success(), "capture failed");
    // The summary's lines start with their key; the counter sits inside one.
    let num = |key: &str| -> u64 {
        let l = rest
            .iter()
            .find(|l| l.starts_with(key) || (key.ends_with(':') && l.contains(key)))
            .unwrap_or_else(|| panic!("no `{key}` in:\n{text}"));
        let tail = &l[l.find(key).unwrap() + key.len()..];
        tail.trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let written = num("written");
    let after = num("after stop");
    let rx_packets = num("rx_packets counter:");
    assert_eq!(written, 300, "{text}");
    assert_eq!(
        written + after,
        rx_packets,
        "written + after the stop = rx_packets:\n{text}"
    );
    assert_eq!(rx_packets, 1000, "{text}");
    assert!(text.contains("from the first frame to the last"), "{text}");
}
