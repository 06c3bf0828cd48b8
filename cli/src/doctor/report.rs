//! `pollnic doctor`'s output: an aligned text list (status, area, detail,
//! then `fix:` lines) or one JSON object.

use super::{Finding, Need, Status};

/// Counts of ok, warn and fail.
pub fn counts(findings: &[Finding]) -> (usize, usize, usize) {
    let n = |s| findings.iter().filter(|f| f.status == s).count();
    (n(Status::Ok), n(Status::Warn), n(Status::Fail))
}

/// The findings as text, one per line (`ok   area   detail`), each fix on
/// the next line after `fix:`, and a final count line.
pub fn text(findings: &[Finding]) -> String {
    let width = findings.iter().map(|f| f.area.len()).max().unwrap_or(0);
    let mut out = String::new();
    for f in findings {
        out.push_str(&format!(
            "{:<4}  {:<width$}  {}\n",
            f.status.to_string(),
            f.area,
            f.detail
        ));
        if let Some(fix) = &f.fix {
            out.push_str(&format!("{:<4}  {:<width$}  fix: {fix}\n", "", ""));
        }
    }
    let (ok, warn, fail) = counts(findings);
    out.push_str(&format!(
        "doctor: {ok} ok, {warn} warn, {fail} fail{}\n",
        if fail > 0 {
            " — pollnic will not run until every fail is fixed"
        } else {
            ""
        }
    ));
    out
}

/// The findings as one JSON object:
/// `{"ok":N,"warn":N,"fail":N,"need":{..},"findings":[{"area","status","detail","fix"}..]}`.
pub fn json(findings: &[Finding], need: &Need) -> String {
    let (ok, warn, fail) = counts(findings);
    serde_json::json!({
        "ok": ok,
        "warn": warn,
        "fail": fail,
        "need": {
            "hugepages_per_queue": need.per_queue(),
            "hugepages": need.pages(),
            "bytes": need.bytes(),
            "ports": need.ports,
            "queues": need.queues,
        },
        "findings": findings,
    })
    .to_string()
}
