//! 82599 hardware statistics counters, in the same [`Counter`] / [`Width`]
//! table shape as [`crate::igb::stats`] (the types are shared), so the
//! driver's clear-on-read accumulation code works on either table.
//!
//! Sources: offsets from Linux `ixgbe_type.h` (each pinned by a test); which
//! register backs which `ethtool -S` name from Linux `ixgbe_ethtool.c`
//! (`ixgbe_gstrings_stats`) and `ixgbe_main.c` (`ixgbe_update_stats`).
//!
//! How they are read:
//! - All of them clear on read: every Intel driver (Linux, DPDK, FreeBSD, ixy)
//!   adds each read to a running total.
//! - The 64-bit octet pairs (GORCL/GORCH, GOTCL/GOTCH, TORL/TORH) are read low
//!   first, then high. DPDK, FreeBSD and ixy add `high << 32`; Linux reads the
//!   high half on the 82599 only "to clear" and keeps the low 32 bits, so
//!   reading the high half after the low half is required either way.
//!
//! Names: pollnic reports the MAC counters under Linux igb's `ethtool -S`
//! names so that code written against one table reads the other. Linux ixgbe
//! prints some of the same registers under other names ([`LINUX_NAMES`]): its
//! `rx_packets`, `tx_packets`, `rx_bytes` and `tx_bytes` are the kernel's
//! software ring counts, and the MAC's GPRC/GPTC/GORC/GOTC appear as
//! `rx_pkts_nic`, `tx_pkts_nic`, `rx_bytes_nic` and `tx_bytes_nic`.
//! [`index_of`] accepts both. BPTC, MPTC, TORL/TORH, TPR and TPT have no
//! ixgbe `ethtool -S` line at all; they carry igb's names.
//!
//! Two Linux counters are sums over register arrays ([`SUMS`], [`total`]):
//! - `rx_missed_errors` = MPC(0..8), frames dropped because RX packet buffer
//!   n was full (one register per packet buffer; with DCB off only buffer 0
//!   has room, and the others read 0).
//! - `rx_no_dma_resources` = QPRDC(0..16), frames dropped because their queue
//!   had no free descriptor (with SRRCTL.DROP_EN set). On the 82599 this is
//!   the counter for a full RX ring; igb's `rx_no_buffer_count` (RNBC) has no
//!   82599 equivalent (`IXGBE_RNBC` is read only on the 82598).
//!
//! Two corrections Linux applies and pollnic's totals do not: GPRC also
//! counts the frames MPC counts, so Linux subtracts the MPC sum from it
//! ("work around hardware counting issue"); and on the 82598 only, MPRC
//! includes broadcasts.

use crate::stats::{c32, c64};
pub use crate::stats::{Counter, Sum, Width};

/// Good packets received, frames that passed filtering (`IXGBE_GPRC`);
/// Linux `rx_pkts_nic`.
pub const RX_PACKETS: Counter = c32("rx_packets", "GPRC", 0x04074);
/// Good packets transmitted (`IXGBE_GPTC`); Linux `tx_pkts_nic`.
pub const TX_PACKETS: Counter = c32("tx_packets", "GPTC", 0x04080);
/// Good octets received (`IXGBE_GORCL`/`IXGBE_GORCH`); Linux `rx_bytes_nic`.
pub const RX_BYTES: Counter = c64("rx_bytes", "GORCL/GORCH", 0x04088);
/// Good octets transmitted (`IXGBE_GOTCL`/`IXGBE_GOTCH`); Linux `tx_bytes_nic`.
pub const TX_BYTES: Counter = c64("tx_bytes", "GOTCL/GOTCH", 0x04090);
/// Frames with a bad CRC (`IXGBE_CRCERRS`); Linux `rx_crc_errors`.
pub const RX_CRC_ERRORS: Counter = c32("rx_crc_errors", "CRCERRS", 0x04000);
/// Frames with a length error (`IXGBE_RLEC`); Linux folds it into the
/// netdev `rx_length_errors` (not an `ethtool -S` line of its own).
pub const RX_LENGTH_ERRORS: Counter = c32("rx_length_errors", "RLEC", 0x04040);

/// MPC(n), missed packets of RX packet buffer `n` in 0..8 (`IXGBE_MPC(n)`).
pub const fn mpc(n: u16) -> u32 {
    0x03FA0 + 4 * n as u32
}
/// QPRDC(n), RX packets dropped for want of descriptors, statistics index
/// `n` in 0..16 (`IXGBE_QPRDC(n)`). RX queues map onto the 16 indices
/// through RQSMR.
pub const fn qprdc(n: u16) -> u32 {
    0x01430 + 0x40 * n as u32
}

macro_rules! mpc {
    ($n:literal) => {
        c32(
            concat!("rx_missed_errors_pb", $n),
            concat!("MPC(", $n, ")"),
            mpc($n),
        )
    };
}
macro_rules! qprdc {
    ($n:literal) => {
        c32(
            concat!("rx_no_dma_resources_q", $n),
            concat!("QPRDC(", $n, ")"),
            qprdc($n),
        )
    };
}

/// Every counter pollnic reads: the MAC counters first, then the register
/// arrays behind [`SUMS`].
pub const COUNTERS: &[Counter] = &[
    RX_PACKETS,
    TX_PACKETS,
    RX_BYTES,
    TX_BYTES,
    c32("rx_broadcast", "BPRC", 0x04078),
    c32("tx_broadcast", "BPTC", 0x040F4),
    c32("rx_multicast", "MPRC", 0x0407C),
    c32("tx_multicast", "MPTC", 0x040F0),
    RX_CRC_ERRORS,
    RX_LENGTH_ERRORS,
    c32("rx_long_length_errors", "ROC", 0x040AC),
    c32("rx_short_length_errors", "RUC", 0x040A4),
    c32("rx_flow_control_xon", "LXONRXCNT", 0x041A4),
    c32("rx_flow_control_xoff", "LXOFFRXCNT", 0x041A8),
    c32("tx_flow_control_xon", "LXONTXC", 0x03F60),
    c32("tx_flow_control_xoff", "LXOFFTXC", 0x03F68),
    c64("rx_total_bytes", "TORL/TORH", 0x040C0),
    c32("rx_total_packets", "TPR", 0x040D0),
    c32("tx_total_packets", "TPT", 0x040D4),
    mpc!(0),
    mpc!(1),
    mpc!(2),
    mpc!(3),
    mpc!(4),
    mpc!(5),
    mpc!(6),
    mpc!(7),
    qprdc!(0),
    qprdc!(1),
    qprdc!(2),
    qprdc!(3),
    qprdc!(4),
    qprdc!(5),
    qprdc!(6),
    qprdc!(7),
    qprdc!(8),
    qprdc!(9),
    qprdc!(10),
    qprdc!(11),
    qprdc!(12),
    qprdc!(13),
    qprdc!(14),
    qprdc!(15),
];

/// Sums of register arrays, under their Linux names.
pub const SUMS: &[Sum] = &[
    Sum {
        name: "rx_missed_errors",
        parts: &[
            "rx_missed_errors_pb0",
            "rx_missed_errors_pb1",
            "rx_missed_errors_pb2",
            "rx_missed_errors_pb3",
            "rx_missed_errors_pb4",
            "rx_missed_errors_pb5",
            "rx_missed_errors_pb6",
            "rx_missed_errors_pb7",
        ],
    },
    Sum {
        name: "rx_no_dma_resources",
        parts: &[
            "rx_no_dma_resources_q0",
            "rx_no_dma_resources_q1",
            "rx_no_dma_resources_q2",
            "rx_no_dma_resources_q3",
            "rx_no_dma_resources_q4",
            "rx_no_dma_resources_q5",
            "rx_no_dma_resources_q6",
            "rx_no_dma_resources_q7",
            "rx_no_dma_resources_q8",
            "rx_no_dma_resources_q9",
            "rx_no_dma_resources_q10",
            "rx_no_dma_resources_q11",
            "rx_no_dma_resources_q12",
            "rx_no_dma_resources_q13",
            "rx_no_dma_resources_q14",
            "rx_no_dma_resources_q15",
        ],
    },
];

/// Linux ixgbe's `ethtool -S` name for a counter of [`COUNTERS`] where it
/// differs from pollnic's: `(linux_name, pollnic_name)`.
pub const LINUX_NAMES: &[(&str, &str)] = &[
    ("rx_pkts_nic", "rx_packets"),
    ("tx_pkts_nic", "tx_packets"),
    ("rx_bytes_nic", "rx_bytes"),
    ("tx_bytes_nic", "tx_bytes"),
    ("broadcast", "rx_broadcast"),
    ("multicast", "rx_multicast"),
];

/// Index of a counter in [`COUNTERS`] by its pollnic name or its Linux
/// ixgbe name ([`LINUX_NAMES`]). Sums have no index; see [`total`].
pub fn index_of(name: &str) -> Option<usize> {
    let name = LINUX_NAMES
        .iter()
        .find(|(linux, _)| *linux == name)
        .map_or(name, |(_, ours)| ours);
    COUNTERS.iter().position(|c| c.name == name)
}

/// The value named `name` given running totals indexed like [`COUNTERS`]:
/// a counter by either name, or a [`Sum`] of counters. `None` for an
/// unknown name or a `totals` shorter than [`COUNTERS`].
pub fn total(name: &str, totals: &[u64]) -> Option<u64> {
    if let Some(i) = index_of(name) {
        return totals.get(i).copied();
    }
    let sum = SUMS.iter().find(|s| s.name == name)?;
    sum.parts.iter().try_fold(0u64, |acc, part| {
        Some(acc.wrapping_add(*totals.get(index_of(part)?)?))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_registers_aligned() {
        for (i, a) in COUNTERS.iter().enumerate() {
            for b in &COUNTERS[i + 1..] {
                assert_ne!(a.name, b.name);
                assert_ne!(a.width, b.width, "{} and {}", a.name, b.name);
            }
            match a.width {
                Width::Bits32(o) => assert!(o % 4 == 0 && o < 0x10000, "{}", a.name),
                Width::Bits64 { lo, hi } => {
                    assert_eq!(hi, lo + 4);
                    assert_eq!(lo % 8, 0, "{}: pairs start 8-aligned", a.name);
                }
            }
            // No pollnic name is also used as a Linux alias or a sum.
            assert!(LINUX_NAMES.iter().all(|(l, _)| *l != a.name));
            assert!(SUMS.iter().all(|s| s.name != a.name));
        }
    }

    #[test]
    fn offsets_match_ixgbe_type_h() {
        let off = |name: &str| COUNTERS[index_of(name).unwrap()].width;
        assert_eq!(off("rx_packets"), Width::Bits32(0x04074)); // IXGBE_GPRC
        assert_eq!(off("tx_packets"), Width::Bits32(0x04080)); // IXGBE_GPTC
        assert_eq!(
            off("rx_bytes"),
            Width::Bits64 {
                lo: 0x04088, // IXGBE_GORCL
                hi: 0x0408C, // IXGBE_GORCH
            }
        );
        assert_eq!(
            off("tx_bytes"),
            Width::Bits64 {
                lo: 0x04090, // IXGBE_GOTCL
                hi: 0x04094, // IXGBE_GOTCH
            }
        );
        assert_eq!(off("rx_broadcast"), Width::Bits32(0x04078)); // IXGBE_BPRC
        assert_eq!(off("tx_broadcast"), Width::Bits32(0x040F4)); // IXGBE_BPTC
        assert_eq!(off("rx_multicast"), Width::Bits32(0x0407C)); // IXGBE_MPRC
        assert_eq!(off("tx_multicast"), Width::Bits32(0x040F0)); // IXGBE_MPTC
        assert_eq!(off("rx_crc_errors"), Width::Bits32(0x04000)); // IXGBE_CRCERRS
        assert_eq!(off("rx_length_errors"), Width::Bits32(0x04040)); // IXGBE_RLEC
        assert_eq!(off("rx_long_length_errors"), Width::Bits32(0x040AC)); // IXGBE_ROC
        assert_eq!(off("rx_short_length_errors"), Width::Bits32(0x040A4)); // IXGBE_RUC
        assert_eq!(off("rx_flow_control_xon"), Width::Bits32(0x041A4)); // IXGBE_LXONRXCNT
        assert_eq!(off("rx_flow_control_xoff"), Width::Bits32(0x041A8)); // IXGBE_LXOFFRXCNT
        assert_eq!(off("tx_flow_control_xon"), Width::Bits32(0x03F60)); // IXGBE_LXONTXC
        assert_eq!(off("tx_flow_control_xoff"), Width::Bits32(0x03F68)); // IXGBE_LXOFFTXC
        assert_eq!(
            off("rx_total_bytes"),
            Width::Bits64 {
                lo: 0x040C0, // IXGBE_TORL
                hi: 0x040C4, // IXGBE_TORH
            }
        );
        assert_eq!(off("rx_total_packets"), Width::Bits32(0x040D0)); // IXGBE_TPR
        assert_eq!(off("tx_total_packets"), Width::Bits32(0x040D4)); // IXGBE_TPT
                                                                     // IXGBE_MPC(_i) 0x03FA0 + i*4, 8 of them.
        assert_eq!(off("rx_missed_errors_pb0"), Width::Bits32(0x03FA0));
        assert_eq!(off("rx_missed_errors_pb7"), Width::Bits32(0x03FBC));
        // IXGBE_QPRDC(_i) 0x01430 + i*0x40, 16 of them.
        assert_eq!(off("rx_no_dma_resources_q0"), Width::Bits32(0x01430));
        assert_eq!(
            off("rx_no_dma_resources_q15"),
            Width::Bits32(0x01430 + 15 * 0x40)
        );
        assert_eq!(COUNTERS.len(), 19 + 8 + 16);
        assert_eq!(index_of("rx_packets"), Some(0));
    }

    #[test]
    fn macro_names_and_registers_line_up() {
        let c = COUNTERS[index_of("rx_no_dma_resources_q12").unwrap()];
        assert_eq!(c.register, "QPRDC(12)");
        assert_eq!(c.width, Width::Bits32(qprdc(12)));
        let c = COUNTERS[index_of("rx_missed_errors_pb3").unwrap()];
        assert_eq!(c.register, "MPC(3)");
        assert_eq!(c.width, Width::Bits32(mpc(3)));
    }

    #[test]
    fn linux_names_resolve() {
        assert_eq!(index_of("rx_pkts_nic"), index_of("rx_packets"));
        assert_eq!(index_of("tx_bytes_nic"), index_of("tx_bytes"));
        assert_eq!(index_of("broadcast"), index_of("rx_broadcast"));
        for (linux, ours) in LINUX_NAMES {
            assert!(index_of(ours).is_some(), "{linux} -> {ours}");
        }
        assert_eq!(index_of("rx_no_buffer_count"), None, "82598-only RNBC");
    }

    #[test]
    fn sums_add_their_parts() {
        for s in SUMS {
            assert!(index_of(s.name).is_none());
            for p in s.parts {
                assert!(index_of(p).is_some(), "{}: {p}", s.name);
            }
        }
        let mut totals = vec![0u64; COUNTERS.len()];
        totals[index_of("rx_missed_errors_pb0").unwrap()] = 5;
        totals[index_of("rx_missed_errors_pb7").unwrap()] = 2;
        totals[index_of("rx_no_dma_resources_q0").unwrap()] = 10;
        totals[index_of("rx_no_dma_resources_q15").unwrap()] = 1;
        totals[index_of("rx_packets").unwrap()] = 99;
        assert_eq!(total("rx_missed_errors", &totals), Some(7));
        assert_eq!(total("rx_no_dma_resources", &totals), Some(11));
        assert_eq!(total("rx_pkts_nic", &totals), Some(99));
        assert_eq!(total("rx_packets", &totals), Some(99));
        assert_eq!(total("no_such_counter", &totals), None);
        assert_eq!(total("rx_packets", &[]), None);
        assert_eq!(total("rx_missed_errors", &totals[..3]), None);
    }

    #[test]
    fn shares_the_igb_table_shape() {
        // The same types: a function over igb's table takes this one.
        fn offsets(t: &[Counter]) -> usize {
            t.len()
        }
        assert_eq!(offsets(COUNTERS), COUNTERS.len());
        // The MAC counters common to both sit at the same offsets.
        for name in ["rx_packets", "tx_packets", "rx_bytes", "tx_bytes"] {
            let ours = COUNTERS[index_of(name).unwrap()];
            let igb = crate::igb::stats::COUNTERS[crate::igb::stats::index_of(name).unwrap()];
            assert_eq!(ours.width, igb.width, "{name}");
        }
    }
}
