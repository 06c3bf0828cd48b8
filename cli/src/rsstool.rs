//! `pollnic rss`: which queue a flow lands on, and why, before touching the NIC.
//! The same software Toeplitz + redirection table the guest tests check
//! against QEMU's igb.

use pollnic_hw::rss::{FlowKey, Reta, Toeplitz, KEY_LEN, L4, MICROSOFT_KEY, SYMMETRIC_KEY};
use std::fmt::Write;
use std::net::IpAddr;

/// Parse a key: `microsoft`, `symmetric`, or 80 hex digits (colons and spaces allowed).
///
/// # Errors
/// A message saying what forms are accepted.
pub fn parse_key(s: &str) -> Result<[u8; KEY_LEN], String> {
    match s {
        "microsoft" | "default" => return Ok(MICROSOFT_KEY),
        "symmetric" => return Ok(SYMMETRIC_KEY),
        _ => {}
    }
    let hex: String = s
        .trim_start_matches("0x")
        .chars()
        .filter(|c| !matches!(c, ':' | ' ' | '-'))
        .collect();
    let bad = || {
        format!("bad RSS key `{s}`: give `microsoft`, `symmetric`, or 40 bytes as 80 hex digits (as `ethtool -x` prints it)")
    };
    if hex.len() != 2 * KEY_LEN {
        return Err(bad());
    }
    let mut key = [0u8; KEY_LEN];
    for (i, b) in key.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(key)
}

/// Parse a redirection table: a comma-separated list of queue numbers,
/// repeated to fill 128 entries (so `0,1` is round robin over two queues).
///
/// # Errors
/// A message naming the bad entry.
pub fn parse_reta(s: &str, queues: u16) -> Result<Reta, String> {
    let list: Vec<u8> = s
        .split(',')
        .map(|x| {
            x.trim()
                .parse::<u8>()
                .map_err(|_| format!("bad RETA entry `{x}` in `{s}`"))
        })
        .collect::<Result<_, _>>()?;
    if list.is_empty() || list.len() > 128 {
        return Err(format!("RETA `{s}` must list 1 to 128 queue numbers"));
    }
    if let Some(q) = list.iter().find(|&&q| q as u16 >= queues) {
        return Err(format!("RETA names queue {q} but --queues is {queues}"));
    }
    Ok(Reta(std::array::from_fn(|i| list[i % list.len()])))
}

/// Build the flow from its parts.
///
/// # Errors
/// Mixed address families or an unknown protocol.
pub fn flow(
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    dport: u16,
    proto: &str,
) -> Result<FlowKey, String> {
    let l4 = match proto {
        "tcp" => L4::Tcp,
        "udp" => L4::Udp,
        "other" | "ip" => L4::Other,
        p => return Err(format!("unknown protocol `{p}`: use tcp, udp or other")),
    };
    match (src, dst) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => Ok(FlowKey::V4 {
            src,
            dst,
            sport,
            dport,
            l4,
        }),
        (IpAddr::V6(src), IpAddr::V6(dst)) => Ok(FlowKey::V6 {
            src,
            dst,
            sport,
            dport,
            l4,
        }),
        _ => Err("source and destination must both be IPv4 or both IPv6".into()),
    }
}

fn describe(f: &FlowKey) -> String {
    let (s, d, sp, dp, l4) = match *f {
        FlowKey::V4 {
            src,
            dst,
            sport,
            dport,
            l4,
        } => (src.to_string(), dst.to_string(), sport, dport, l4),
        FlowKey::V6 {
            src,
            dst,
            sport,
            dport,
            l4,
        } => (format!("[{src}]"), format!("[{dst}]"), sport, dport, l4),
    };
    match l4 {
        L4::Tcp => format!("tcp {s}:{sp} -> {d}:{dp}"),
        L4::Udp => format!("udp {s}:{sp} -> {d}:{dp}"),
        L4::Other => format!("ip  {s} -> {d} (ports not hashed)"),
    }
}

/// The report `pollnic rss` prints: hash input, hash, RETA index, queue, for
/// the flow and for its reverse direction.
pub fn explain(f: &FlowKey, key: &[u8; KEY_LEN], reta: &Reta, queues: u16) -> String {
    let t = Toeplitz::new(key);
    let mut out = String::new();
    let key_name = match *key {
        k if k == MICROSOFT_KEY => "microsoft (DPDK igb default)",
        k if k == SYMMETRIC_KEY => "symmetric (0x6d5a repeated)",
        _ => "custom",
    };
    let key_hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
    let _ = writeln!(out, "key         {key_name}: {key_hex}");
    let _ = writeln!(
        out,
        "queues      {queues}; redirection table (RETA) entries 0..8: {:?}",
        &reta.0[..8]
    );
    for (label, flow) in [("flow", *f), ("reverse", f.reversed())] {
        let mut buf = [0u8; 36];
        let n = flow.hash_input(&mut buf);
        let h = t.hash(&buf[..n]);
        let input: Vec<String> = buf[..n].iter().map(|b| format!("{b:02x}")).collect();
        let _ = writeln!(out, "{label:<11} {}", describe(&flow));
        let _ = writeln!(out, "  input     {} ({n} bytes)", input.join(" "));
        let _ = writeln!(out, "  hash      {h:#010x}");
        let _ = writeln!(
            out,
            "  RETA[{:>3}] -> queue {}",
            h & 0x7f,
            reta.queue_for_hash(h)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn explains_the_microsoft_example() {
        let f = flow(
            "66.9.149.187".parse().unwrap(),
            "161.142.100.80".parse().unwrap(),
            2794,
            1766,
            "tcp",
        )
        .unwrap();
        let text = explain(&f, &MICROSOFT_KEY, &Reta::round_robin(2), 2);
        assert!(text.contains("hash      0x51ccc178"), "{text}");
        assert!(text.contains("RETA[120] -> queue 0"), "{text}");
    }
    #[test]
    fn parsing() {
        assert_eq!(parse_key("symmetric").unwrap(), SYMMETRIC_KEY);
        let hex: String = MICROSOFT_KEY.iter().map(|b| format!("{b:02x}:")).collect();
        assert_eq!(parse_key(hex.trim_end_matches(':')).unwrap(), MICROSOFT_KEY);
        assert!(parse_key("abcd").is_err());
        let plain: String = MICROSOFT_KEY.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(parse_key(&format!("0x{plain}")).unwrap(), MICROSOFT_KEY);
        assert_eq!(parse_reta("0,1", 2).unwrap(), Reta::round_robin(2));
        assert!(parse_reta("0,2", 2).is_err());
        assert!(flow(
            "1.2.3.4".parse().unwrap(),
            "::1".parse().unwrap(),
            1,
            2,
            "udp"
        )
        .is_err());
        assert!(flow(
            "1.2.3.4".parse().unwrap(),
            "1.2.3.5".parse().unwrap(),
            1,
            2,
            "sctp"
        )
        .is_err());
    }
}
