//! The `--cores` list `pollnic doctor` takes, and the kernel's CPU lists
//! (`0-3,6`) it reads from sysfs.

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
}
