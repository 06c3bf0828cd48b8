//! Core lists for the tools' `--cores` options: parse them, check them
//! against this process's affinity mask, and pin a thread. (The library's
//! `pollnic::run_pinned` checks and pins on its own, with typed errors.)

/// Core numbers are below this (Linux's largest NR_CPUS is 8192).
const MAX_CORE: usize = 8192;

/// Parse a core list like `0,1` or `0-3,6`.
///
/// # Errors
/// A message naming the bad item.
pub fn parse_cores(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        if let Some((a, b)) = item.split_once('-') {
            let (a, b): (usize, usize) = (
                a.parse().map_err(|_| {
                    format!("bad core `{item}` in `{s}` (expected e.g. 0,1 or 0-3)")
                })?,
                b.parse().map_err(|_| {
                    format!("bad core `{item}` in `{s}` (expected e.g. 0,1 or 0-3)")
                })?,
            );
            if a > b {
                return Err(format!("bad core range `{item}` in `{s}`"));
            }
            if b >= MAX_CORE {
                return Err(format!(
                    "core {b} in `{s}` is beyond any machine (cores are numbered below {MAX_CORE})"
                ));
            }
            out.extend(a..=b);
        } else {
            out.push(
                item.parse().map_err(|_| {
                    format!("bad core `{item}` in `{s}` (expected e.g. 0,1 or 0-3)")
                })?,
            );
        }
    }
    if out.is_empty() {
        return Err("empty core list".into());
    }
    Ok(out)
}

/// Pin the calling thread to `core`. Returns false when the OS refused (e.g.
/// the core does not exist or is outside the process's cpuset).
pub fn pin_current_thread(core: usize) -> bool {
    core_affinity::set_for_current(core_affinity::CoreId { id: core })
}

/// Check that `cores` is not empty and names only cores this process may run
/// on (its affinity mask: `taskset -p $$` shows it), before any thread starts.
///
/// # Errors
/// A message naming the first core that is not allowed, with the allowed list.
pub fn check_cores(cores: &[usize]) -> Result<(), String> {
    if cores.is_empty() {
        return Err("no cores given".into());
    }
    let allowed: Vec<usize> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .iter()
        .map(|c| c.id)
        .collect();
    if let Some(bad) = cores.iter().find(|c| !allowed.contains(c)) {
        return Err(format!(
            "core {bad} is not available to this process (allowed: {allowed:?}; see `taskset -p $$`, cpusets, isolcpus)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_lists() {
        assert_eq!(parse_cores("0,1").unwrap(), vec![0, 1]);
        assert_eq!(parse_cores("0-3,6").unwrap(), vec![0, 1, 2, 3, 6]);
        assert!(parse_cores("a").is_err());
        assert!(parse_cores("3-1").is_err());
        assert!(parse_cores("").is_err());
        assert!(parse_cores("0-10000000000").is_err());
        assert!(parse_cores("0-18446744073709551615").is_err());
    }
    #[test]
    fn core_check_uses_the_affinity_mask() {
        assert!(check_cores(&[]).is_err());
        let e = check_cores(&[100_000]).unwrap_err();
        assert!(e.contains("core 100000 is not available"), "{e}");
        let first = core_affinity::get_core_ids().unwrap()[0].id;
        check_cores(&[first]).unwrap();
    }
}
