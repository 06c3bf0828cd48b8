//! Receive-side scaling math: the Toeplitz hash the NIC computes over a
//! flow's addresses and ports, and the redirection table (RETA) that maps the
//! hash to an RX queue.
//!
//! Sources: Microsoft "RSS hashing functions" and "Verifying the RSS hash
//! calculation" (the key and the verification values tested below); 82576
//! datasheet §7.1.2.10 (RSS: 128-entry RETA indexed by the hash's 7 low bits,
//! 40-byte RSSRK, MRQC hash-type bits); QEMU `hw/net/igb_core.c`
//! (`E1000_RSS_QUEUE`: `RETA[hash & 0x7f] & 0xf`).

use std::net::{Ipv4Addr, Ipv6Addr};

/// Length of the RSS key in bytes (RSSRK0..9).
pub const KEY_LEN: usize = 40;
/// Number of redirection table entries (RETA0..31, four per register).
pub const RETA_LEN: usize = 128;
/// The longest hash input: IPv6 source and destination plus two ports.
const MAX_INPUT: usize = 36;

/// Microsoft's default RSS key, the one in its verification suite and the
/// default of Linux igb/ixgbe before 3.19 and of DPDK's test suite.
pub const MICROSOFT_KEY: [u8; KEY_LEN] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// A symmetric key (0x6d5a repeated): the hash of (a→b) equals that of (b→a),
/// so both directions of a flow land on the same queue (Woo and Park,
/// "Scalable TCP Session Monitoring with Symmetric Receive-side Scaling").
pub const SYMMETRIC_KEY: [u8; KEY_LEN] = [
    0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a,
    0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a,
    0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a,
];

/// A table-driven Toeplitz hasher for one key: for each input byte position,
/// a 256-entry table of the key windows its set bits select (36 KiB).
#[derive(Clone)]
pub struct Toeplitz {
    table: Box<[[u32; 256]; MAX_INPUT]>,
    key: [u8; KEY_LEN],
}

impl std::fmt::Debug for Toeplitz {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toeplitz").field("key", &self.key).finish()
    }
}

impl Toeplitz {
    /// Build the tables for `key`.
    pub fn new(key: &[u8; KEY_LEN]) -> Self {
        // window(b) = the 32 key bits starting at bit b (MSB first).
        let window = |bit: usize| -> u32 {
            let mut w = 0u64;
            for i in 0..5 {
                w = (w << 8) | *key.get(bit / 8 + i).unwrap_or(&0) as u64;
            }
            ((w << (bit % 8)) >> 8) as u32
        };
        let mut table = Box::new([[0u32; 256]; MAX_INPUT]);
        for (pos, row) in table.iter_mut().enumerate() {
            for (byte, slot) in row.iter_mut().enumerate() {
                let mut h = 0;
                for bit in 0..8 {
                    if byte & (0x80 >> bit) != 0 {
                        h ^= window(pos * 8 + bit);
                    }
                }
                *slot = h;
            }
        }
        Toeplitz { table, key: *key }
    }

    /// The key.
    pub fn key(&self) -> &[u8; KEY_LEN] {
        &self.key
    }

    /// Hash of `input` (at most 36 bytes; longer input is truncated, which no
    /// RSS hash type needs).
    #[inline]
    pub fn hash(&self, input: &[u8]) -> u32 {
        input
            .iter()
            .take(MAX_INPUT)
            .enumerate()
            .fold(0, |h, (i, &b)| h ^ self.table[i][b as usize])
    }

    /// Hash of a flow under the hash type the NIC would use for it.
    pub fn hash_flow(&self, flow: &FlowKey) -> u32 {
        let mut buf = [0u8; MAX_INPUT];
        let n = flow.hash_input(&mut buf);
        self.hash(&buf[..n])
    }
}

/// IP protocol of a flow, as far as RSS cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum L4 {
    /// TCP: ports are hashed (TCP/IPv4, TCP/IPv6 hash types).
    Tcp,
    /// UDP: ports are hashed when the UDP hash types are on (pollnic turns them on).
    Udp,
    /// Anything else: addresses only.
    Other,
}

/// The fields RSS hashes: addresses, and ports for TCP and UDP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlowKey {
    /// IPv4.
    V4 {
        /// Source address.
        src: Ipv4Addr,
        /// Destination address.
        dst: Ipv4Addr,
        /// Source port (ignored for `L4::Other`).
        sport: u16,
        /// Destination port.
        dport: u16,
        /// Protocol.
        l4: L4,
    },
    /// IPv6 (no extension headers).
    V6 {
        /// Source address.
        src: Ipv6Addr,
        /// Destination address.
        dst: Ipv6Addr,
        /// Source port.
        sport: u16,
        /// Destination port.
        dport: u16,
        /// Protocol.
        l4: L4,
    },
}

impl FlowKey {
    /// Serialize the hash input (source address, destination address, then
    /// source and destination port for TCP/UDP, all in network order) into
    /// `buf`; returns its length.
    pub fn hash_input(&self, buf: &mut [u8; MAX_INPUT]) -> usize {
        let (mut n, sport, dport, l4) = match *self {
            FlowKey::V4 {
                src,
                dst,
                sport,
                dport,
                l4,
            } => {
                buf[..4].copy_from_slice(&src.octets());
                buf[4..8].copy_from_slice(&dst.octets());
                (8, sport, dport, l4)
            }
            FlowKey::V6 {
                src,
                dst,
                sport,
                dport,
                l4,
            } => {
                buf[..16].copy_from_slice(&src.octets());
                buf[16..32].copy_from_slice(&dst.octets());
                (32, sport, dport, l4)
            }
        };
        if l4 != L4::Other {
            buf[n..n + 2].copy_from_slice(&sport.to_be_bytes());
            buf[n + 2..n + 4].copy_from_slice(&dport.to_be_bytes());
            n += 4;
        }
        n
    }

    /// The same flow seen from the other end.
    pub fn reversed(&self) -> FlowKey {
        match *self {
            FlowKey::V4 {
                src,
                dst,
                sport,
                dport,
                l4,
            } => FlowKey::V4 {
                src: dst,
                dst: src,
                sport: dport,
                dport: sport,
                l4,
            },
            FlowKey::V6 {
                src,
                dst,
                sport,
                dport,
                l4,
            } => FlowKey::V6 {
                src: dst,
                dst: src,
                sport: dport,
                dport: sport,
                l4,
            },
        }
    }
}

/// The 128-entry redirection table: entry `hash & 0x7f` names the queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reta(pub [u8; RETA_LEN]);

impl Reta {
    /// Round robin over `queues` queues (entry i → i mod queues), the default
    /// of Linux igb and DPDK.
    pub fn round_robin(queues: u16) -> Reta {
        let q = queues.max(1) as usize;
        Reta(std::array::from_fn(|i| (i % q) as u8))
    }

    /// The queue a hash lands on.
    #[inline]
    pub fn queue_for_hash(&self, hash: u32) -> u16 {
        self.0[(hash & 0x7f) as usize] as u16
    }

    /// The 32 RETA register values (entry 4n in bits 7:0 of register n).
    pub fn registers(&self) -> [u32; RETA_LEN / 4] {
        std::array::from_fn(|n| {
            u32::from_le_bytes([
                self.0[4 * n],
                self.0[4 * n + 1],
                self.0[4 * n + 2],
                self.0[4 * n + 3],
            ])
        })
    }
}

/// The 10 RSSRK register values for `key` (byte 4n in bits 7:0 of register n,
/// as QEMU reads the key bytes from its little-endian register file).
pub fn key_registers(key: &[u8; KEY_LEN]) -> [u32; KEY_LEN / 4] {
    std::array::from_fn(|n| {
        u32::from_le_bytes([key[4 * n], key[4 * n + 1], key[4 * n + 2], key[4 * n + 3]])
    })
}

/// The queue a flow lands on: Toeplitz hash, then the redirection table.
pub fn queue_for(hasher: &Toeplitz, reta: &Reta, flow: &FlowKey) -> (u32, u16) {
    let h = hasher.hash_flow(flow);
    (h, reta.queue_for_hash(h))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(src: &str, sport: u16, dst: &str, dport: u16, l4: L4) -> FlowKey {
        FlowKey::V4 {
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            sport,
            dport,
            l4,
        }
    }
    fn v6(src: &str, sport: u16, dst: &str, dport: u16, l4: L4) -> FlowKey {
        FlowKey::V6 {
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            sport,
            dport,
            l4,
        }
    }

    /// Microsoft's RSS verification suite, IPv4: (source, sport, destination,
    /// dport, hash of addresses only, hash with TCP ports).
    const IPV4: &[(&str, u16, &str, u16, u32, u32)] = &[
        (
            "66.9.149.187",
            2794,
            "161.142.100.80",
            1766,
            0x323e8fc2,
            0x51ccc178,
        ),
        (
            "199.92.111.2",
            14230,
            "65.69.140.83",
            4739,
            0xd718262a,
            0xc626b0ea,
        ),
        (
            "24.19.198.95",
            12898,
            "12.22.207.184",
            38024,
            0xd2d0a5de,
            0x5c2b394a,
        ),
        (
            "38.27.205.30",
            48228,
            "209.142.163.6",
            2217,
            0x82989176,
            0xafc7327f,
        ),
        (
            "153.39.163.191",
            44251,
            "202.188.127.2",
            1303,
            0x5d1809c5,
            0x10e828a2,
        ),
    ];
    /// The same suite, IPv6.
    const IPV6: &[(&str, u16, &str, u16, u32, u32)] = &[
        (
            "3ffe:2501:200:1fff::7",
            2794,
            "3ffe:2501:200:3::1",
            1766,
            0x2cc18cd5,
            0x40207d3d,
        ),
        (
            "3ffe:501:8::260:97ff:fe40:efab",
            14230,
            "ff02::1",
            4739,
            0x0f0c461c,
            0xdde51bbf,
        ),
        (
            "3ffe:1900:4545:3:200:f8ff:fe21:67cf",
            44251,
            "fe80::200:f8ff:fe21:67cf",
            38024,
            0x4b61e985,
            0x02d1feef,
        ),
    ];

    #[test]
    fn microsoft_verification_ipv4() {
        let t = Toeplitz::new(&MICROSOFT_KEY);
        for &(s, sp, d, dp, ip, tcp) in IPV4 {
            assert_eq!(t.hash_flow(&v4(s, sp, d, dp, L4::Other)), ip, "{s} -> {d}");
            assert_eq!(
                t.hash_flow(&v4(s, sp, d, dp, L4::Tcp)),
                tcp,
                "{s}:{sp} -> {d}:{dp}"
            );
        }
    }

    #[test]
    fn microsoft_verification_ipv6() {
        let t = Toeplitz::new(&MICROSOFT_KEY);
        for &(s, sp, d, dp, ip, tcp) in IPV6 {
            assert_eq!(t.hash_flow(&v6(s, sp, d, dp, L4::Other)), ip, "{s} -> {d}");
            assert_eq!(
                t.hash_flow(&v6(s, sp, d, dp, L4::Tcp)),
                tcp,
                "{s}:{sp} -> {d}:{dp}"
            );
        }
    }

    /// The table-driven hash equals the bit-by-bit definition.
    #[test]
    fn table_matches_bitwise_definition() {
        fn bitwise(key: &[u8; KEY_LEN], input: &[u8]) -> u32 {
            let mut h = 0u32;
            let mut k = u32::from_be_bytes([key[0], key[1], key[2], key[3]]);
            let mut next = 4;
            let mut kbits = 0;
            for &b in input {
                for bit in 0..8 {
                    if b & (0x80 >> bit) != 0 {
                        h ^= k;
                    }
                    let nb = key.get(next).copied().unwrap_or(0);
                    k = (k << 1) | ((nb >> (7 - kbits)) & 1) as u32;
                    kbits += 1;
                    if kbits == 8 {
                        kbits = 0;
                        next += 1;
                    }
                }
            }
            h
        }
        let t = Toeplitz::new(&MICROSOFT_KEY);
        let input: Vec<u8> = (0..36u8)
            .map(|i| i.wrapping_mul(37).wrapping_add(11))
            .collect();
        for n in [1, 8, 12, 32, 36] {
            assert_eq!(t.hash(&input[..n]), bitwise(&MICROSOFT_KEY, &input[..n]));
        }
    }

    #[test]
    fn symmetric_key_hashes_both_directions_alike() {
        let t = Toeplitz::new(&SYMMETRIC_KEY);
        for &(s, sp, d, dp, _, _) in IPV4 {
            let f = v4(s, sp, d, dp, L4::Udp);
            assert_eq!(t.hash_flow(&f), t.hash_flow(&f.reversed()));
        }
        for &(s, sp, d, dp, _, _) in IPV6 {
            let f = v6(s, sp, d, dp, L4::Tcp);
            assert_eq!(t.hash_flow(&f), t.hash_flow(&f.reversed()));
        }
        // The Microsoft key is not symmetric.
        let m = Toeplitz::new(&MICROSOFT_KEY);
        let f = v4(IPV4[0].0, IPV4[0].1, IPV4[0].2, IPV4[0].3, L4::Tcp);
        assert_ne!(m.hash_flow(&f), m.hash_flow(&f.reversed()));
    }

    #[test]
    fn reta_round_robin_and_registers() {
        let r = Reta::round_robin(2);
        assert_eq!(r.queue_for_hash(0x51ccc178), (0x78 % 2) as u16);
        assert_eq!(r.registers()[0], 0x0100_0100);
        let r4 = Reta::round_robin(4);
        assert_eq!(r4.registers()[0], 0x0302_0100);
        assert_eq!(r4.queue_for_hash(0xffff_ff83), 3);
        assert_eq!(key_registers(&MICROSOFT_KEY)[0], 0xda56_5a6d);
    }
}
