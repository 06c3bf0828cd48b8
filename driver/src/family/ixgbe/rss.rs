//! 82599 RSS (datasheet §7.1.2.8; Linux `ixgbe_setup_mrqc`,
//! `ixgbe_store_reta`, `ixgbe_store_key`): a 40-byte key in RSSRK(0..10),
//! 128 one-byte entries in RETA(0..32) with the queue in bits 3:0,
//! RXCSUM.PCSD so the descriptor carries the hash, and MRQC with
//! MRQE = 0001b (RSS only; igb's 010b would select a DCB mode here).

use crate::family::HashTypes;
use crate::sys::mmio::Regs;
use pollnic_hw::ixgbe::{bits::*, regs::*};
use pollnic_hw::rss::{key_registers, Reta, KEY_LEN};

/// The MRQC value: MRQE = RSS plus the hash field bits.
pub fn mrqc(t: &HashTypes) -> u32 {
    let mut v = MRQC_MRQE_RSS;
    for (on, b) in [
        (t.ipv4, MRQC_FIELD_IPV4),
        (t.tcp_ipv4, MRQC_FIELD_TCP_IPV4),
        (t.udp_ipv4, MRQC_FIELD_UDP_IPV4),
        (t.ipv6, MRQC_FIELD_IPV6),
        (t.tcp_ipv6, MRQC_FIELD_TCP_IPV6),
        (t.udp_ipv6, MRQC_FIELD_UDP_IPV6),
    ] {
        if on {
            v |= b;
        }
    }
    v
}

/// Write the 128-entry table: entry i in byte i % 4 of RETA(i / 4), each
/// queue index masked to the 4 bits the 82599 has.
pub fn write_reta(r: &dyn Regs, reta: &Reta) {
    let nibbles = RETA_ENTRY_MASK * 0x0101_0101;
    for (n, v) in reta.registers().iter().enumerate() {
        r.write32(pollnic_hw::ixgbe::regs::reta(n as u16), v & nibbles);
    }
}

/// Key, table, RXCSUM.PCSD, then MRQC (which turns RSS on).
/// PSRTYPE(0) for `queues` RSS queues, as Linux `ixgbe_setup_psrtype`
/// writes it ("PSRTYPE must be initialized in non 82598 adapters").
pub fn psrtype0(queues: u16) -> u32 {
    let rqpl = match queues {
        0..=1 => 0,
        2..=3 => 1,
        _ => 2,
    };
    PSRTYPE_HEADERS | rqpl << PSRTYPE_RQPL_SHIFT
}

pub fn enable(r: &dyn Regs, key: &[u8; KEY_LEN], reta: &Reta, types: &HashTypes) {
    let queues = reta.0.iter().copied().max().map_or(1, |q| u16::from(q) + 1);
    r.write32(psrtype(0), psrtype0(queues));
    for (n, v) in key_registers(key).iter().enumerate() {
        r.write32(rssrk(n as u16), *v);
    }
    write_reta(r, reta);
    r.set_bits(RXCSUM, RXCSUM_PCSD);
    r.write32(MRQC, mrqc(types));
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn psrtype_is_linuxs_for_the_queue_count() {
        assert_eq!(psrtype0(1), 0x1330);
        assert_eq!(psrtype0(2), 0x1330 | 1 << 29);
        assert_eq!(psrtype0(4), 0x1330 | 2 << 29);
    }

    #[test]
    fn mrqc_is_rss_only_with_the_82599_field_bits() {
        // MRQE 1 | TCP_IPV4 16 | IPV4 17 | IPV6 20 | TCP_IPV6 21 | UDP_IPV4 22 | UDP_IPV6 23.
        assert_eq!(mrqc(&HashTypes::default()), 0x00F3_0001);
        let v4 = HashTypes {
            ipv4: true,
            tcp_ipv4: false,
            udp_ipv4: false,
            ipv6: false,
            tcp_ipv6: false,
            udp_ipv6: false,
        };
        assert_eq!(mrqc(&v4), 0x0002_0001);
    }
}
