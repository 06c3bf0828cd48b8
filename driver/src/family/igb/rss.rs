//! RSS register programming (82576 datasheet §7.1.2.10, §8.10.21–23):
//! MRQC mode and hash fields, RXCSUM.PCSD (without it the descriptor carries
//! the IP checksum instead of the hash, and QEMU's igb does not do RSS at all),
//! the redirection table and the key.

use crate::family::HashTypes;
use crate::sys::mmio::Regs;
use pollnic_hw::igb::{bits::*, regs::*};
use pollnic_hw::rss::{key_registers, Reta, KEY_LEN};

/// The MRQC value: RSS mode plus the field bits. TCP/IPv6 sets both the
/// plain and the "Ex" bit, because QEMU's igb only looks at the latter.
pub fn mrqc(t: &HashTypes) -> u32 {
    let mut v = MRQC_MODE_RSS;
    let bits = [
        (t.ipv4, MRQC_FIELD_IPV4),
        (t.tcp_ipv4, MRQC_FIELD_TCP_IPV4),
        (t.udp_ipv4, MRQC_FIELD_UDP_IPV4),
        (t.ipv6, MRQC_FIELD_IPV6),
        (t.tcp_ipv6, MRQC_FIELD_TCP_IPV6 | MRQC_FIELD_TCP_IPV6_EX),
        (t.udp_ipv6, MRQC_FIELD_UDP_IPV6),
    ];
    for (on, b) in bits {
        if on {
            v |= b;
        }
    }
    v
}

/// Write the 128-entry redirection table (safe while traffic flows).
pub fn write_reta(r: &dyn Regs, reta: &Reta) {
    for (n, v) in reta.registers().iter().enumerate() {
        r.write32(RETA + 4 * n as u32, *v);
    }
}

/// Program key, table, RXCSUM.PCSD and MRQC (in that order: MRQC last turns it on).
pub fn enable(r: &dyn Regs, key: &[u8; KEY_LEN], reta: &Reta, types: &HashTypes) {
    for (n, v) in key_registers(key).iter().enumerate() {
        r.write32(RSSRK + 4 * n as u32, *v);
    }
    write_reta(r, reta);
    r.set_bits(RXCSUM, RXCSUM_PCSD);
    r.write32(MRQC, mrqc(types));
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn mrqc_values() {
        assert_eq!(mrqc(&HashTypes::default()), 0x00ff_0002 & !(1 << 19));
        let only_v4 = HashTypes {
            ipv4: true,
            tcp_ipv4: false,
            udp_ipv4: false,
            ipv6: false,
            tcp_ipv6: false,
            udp_ipv6: false,
        };
        assert_eq!(mrqc(&only_v4), 0x0002_0002);
    }
}
