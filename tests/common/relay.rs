//! The guest's side of the testbed's QMP relay (`xtask/src/qmp.rs`): ask the
//! host to run `set_link <nic id> on|off` on an emulated igb port. The
//! testbed exports the relay directory as `POLLNIC_QMP_RELAY`; a request is a
//! file renamed into it, the answer a file the host renames into it.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long the host may take to answer one request.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

fn relay_dir() -> PathBuf {
    PathBuf::from(std::env::var("POLLNIC_QMP_RELAY").unwrap_or_else(|_| {
        panic!(
            "POLLNIC_QMP_RELAY is not set: this test runs inside the QEMU guest; use `cargo xtask test`"
        )
    }))
}

/// Sets testbed port `port`'s link (QEMU device `pollnic_port<N>`) up or down,
/// as a cable plugged or pulled; returns once QEMU has done it.
///
/// # Panics
/// When the relay answers with an error or does not answer within 30 s.
pub fn set_link(port: usize, up: bool) {
    set_link_of(&format!("pollnic_port{port}"), up)
}

/// Sets the link of the QEMU network device with id `nic` (e.g.
/// `pollnic_virtio0`, a virtio-net port) up or down; returns once QEMU has
/// done it.
///
/// # Panics
/// As [`set_link`].
pub fn set_link_of(nic: &str, up: bool) {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = relay_dir();
    let id = format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let request = format!("set_link {nic} {}\n", if up { "on" } else { "off" });
    let tmp = dir.join(format!("req-{id}.tmp"));
    std::fs::write(&tmp, &request).unwrap_or_else(|e| panic!("writing {}: {e}", tmp.display()));
    std::fs::rename(&tmp, dir.join(format!("req-{id}"))).expect("renaming the request");
    let resp = dir.join(format!("resp-{id}"));
    let deadline = Instant::now() + ANSWER_TIMEOUT;
    let answer = loop {
        if let Ok(text) = std::fs::read_to_string(&resp) {
            let _ = std::fs::remove_file(&resp);
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "the testbed's QMP relay did not answer `{}` within {ANSWER_TIMEOUT:?} ({})",
            request.trim(),
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(
        answer.trim(),
        "ok",
        "QMP relay refused `{}`",
        request.trim()
    );
}
