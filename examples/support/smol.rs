//! What the smoltcp examples (`smol-echo`, `smol-http`) share with the tests
//! that drive them: the body `smol-http` serves, and the `--ip` parser.

/// Byte `i` of the body that `smol-http --size N` serves (bytes `0..N`): a
/// 64-bit LCG stream (Knuth's MMIX constants), top byte of each step, so
/// that a shifted, truncated or repeated segment shows as a mismatch.
pub fn http_body(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 56) as u8
        })
        .collect()
}

/// Parse `--ip`, an IPv4 address with its prefix length (`10.0.0.2/24`).
///
/// # Errors
/// A message naming the option, when the text is not `A.B.C.D/LEN` with
/// `LEN` in 1..=32.
pub fn parse_ip_cidr(s: &str) -> Result<(std::net::Ipv4Addr, u8), String> {
    let bad = || format!("--ip `{s}`: give an IPv4 address and prefix length, e.g. 10.0.0.2/24");
    let (a, l) = s.split_once('/').ok_or_else(bad)?;
    let addr: std::net::Ipv4Addr = a.parse().map_err(|_| bad())?;
    let len: u8 = l.parse().map_err(|_| bad())?;
    if !(1..=32).contains(&len) {
        return Err(bad());
    }
    Ok((addr, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_is_reproducible_and_not_periodic_at_small_strides() {
        let b = http_body(1 << 16);
        assert_eq!(b, http_body(1 << 16));
        assert_eq!(&b[..100], &http_body(100)[..]);
        for stride in [1, 2, 251, 256, 1460, 4096] {
            assert_ne!(&b[..1000], &b[stride..stride + 1000], "stride {stride}");
        }
    }

    #[test]
    fn ip_cidr_parses_and_refuses() {
        assert_eq!(
            parse_ip_cidr("10.0.0.2/24").unwrap(),
            ("10.0.0.2".parse().unwrap(), 24)
        );
        for bad in ["10.0.0.2", "10.0.0/24", "10.0.0.2/0", "10.0.0.2/33", "x/24"] {
            assert!(parse_ip_cidr(bad).unwrap_err().contains("--ip"), "{bad}");
        }
    }
}
