//! RSS register programming (82576 datasheet §7.1.2.10, §8.10.21–23):
//! MRQC mode and hash fields, RXCSUM.PCSD (without it the descriptor carries
//! the IP checksum instead of the hash, and QEMU's igb does not do RSS at all),
//! the redirection table and the key.

use crate::mmio::Regs;
use pollnic_hw::igb::{bits::*, regs::*};
use pollnic_hw::rss::{key_registers, Reta, KEY_LEN};

/// Which packet types are hashed (the rest go to queue 0 with hash 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashTypes {
    /// IPv4 addresses.
    pub ipv4: bool,
    /// TCP/IPv4 addresses and ports.
    pub tcp_ipv4: bool,
    /// UDP/IPv4 addresses and ports.
    pub udp_ipv4: bool,
    /// IPv6 addresses.
    pub ipv6: bool,
    /// TCP/IPv6 addresses and ports.
    pub tcp_ipv6: bool,
    /// UDP/IPv6 addresses and ports.
    pub udp_ipv6: bool,
}

impl Default for HashTypes {
    /// All six on.
    fn default() -> Self {
        HashTypes {
            ipv4: true,
            tcp_ipv4: true,
            udp_ipv4: true,
            ipv6: true,
            tcp_ipv6: true,
            udp_ipv6: true,
        }
    }
}

impl HashTypes {
    /// The MRQC value: RSS mode plus the field bits. TCP/IPv6 sets both the
    /// plain and the "Ex" bit, because QEMU's igb only looks at the latter.
    pub fn mrqc(&self) -> u32 {
        let mut v = MRQC_MODE_RSS;
        let bits = [
            (self.ipv4, MRQC_FIELD_IPV4),
            (self.tcp_ipv4, MRQC_FIELD_TCP_IPV4),
            (self.udp_ipv4, MRQC_FIELD_UDP_IPV4),
            (self.ipv6, MRQC_FIELD_IPV6),
            (self.tcp_ipv6, MRQC_FIELD_TCP_IPV6 | MRQC_FIELD_TCP_IPV6_EX),
            (self.udp_ipv6, MRQC_FIELD_UDP_IPV6),
        ];
        for (on, b) in bits {
            if on {
                v |= b;
            }
        }
        v
    }
}

/// Write the 128-entry redirection table (safe while traffic flows).
pub fn write_reta(r: &impl Regs, reta: &Reta) {
    for (n, v) in reta.registers().iter().enumerate() {
        r.write32(RETA + 4 * n as u32, *v);
    }
}

/// Program key, table, RXCSUM.PCSD and MRQC (in that order: MRQC last turns it on).
pub fn enable(r: &impl Regs, key: &[u8; KEY_LEN], reta: &Reta, types: &HashTypes) {
    for (n, v) in key_registers(key).iter().enumerate() {
        r.write32(RSSRK + 4 * n as u32, *v);
    }
    write_reta(r, reta);
    r.set_bits(RXCSUM, RXCSUM_PCSD);
    r.write32(MRQC, types.mrqc());
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn mrqc_values() {
        assert_eq!(HashTypes::default().mrqc(), 0x00ff_0002 & !(1 << 19));
        let only_v4 = HashTypes {
            ipv4: true,
            tcp_ipv4: false,
            udp_ipv4: false,
            ipv6: false,
            tcp_ipv6: false,
            udp_ipv6: false,
        };
        assert_eq!(only_v4.mrqc(), 0x0002_0002);
    }
}
