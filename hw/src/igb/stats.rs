//! Hardware statistics counters, named as Linux igb's `ethtool -S` names them.
//!
//! Source: 82576 datasheet §8.19 (statistics registers: all clear on read; for
//! the 64-bit octet counters read the low register first, then the high one,
//! which clears both) and Linux `igb_ethtool.c` (`igb_gstrings_stats`) for the
//! names. QEMU's igb implements the same clear-on-read pairs but never counts
//! MPC or RNBC (it back-pressures instead of dropping).

pub(crate) use crate::stats::{c32, c64};
pub use crate::stats::{Counter, Sum, Width};

/// Good packets received (frames); `ethtool -S` `rx_packets`.
pub const RX_PACKETS: Counter = c32("rx_packets", "GPRC", 0x4074);
/// Good packets transmitted; `tx_packets`.
pub const TX_PACKETS: Counter = c32("tx_packets", "GPTC", 0x4080);
/// Good octets received, destination address through CRC inclusive (bytes); `rx_bytes`.
pub const RX_BYTES: Counter = c64("rx_bytes", "GORCL/GORCH", 0x4088);
/// Good octets transmitted, including CRC (bytes); `tx_bytes`.
pub const TX_BYTES: Counter = c64("tx_bytes", "GOTCL/GOTCH", 0x4090);
/// Packets dropped because the RX packet buffer was full; `rx_missed_errors`.
pub const RX_MISSED_ERRORS: Counter = c32("rx_missed_errors", "MPC", 0x4010);
/// Packets that found no free RX descriptor; `rx_no_buffer_count`.
pub const RX_NO_BUFFER_COUNT: Counter = c32("rx_no_buffer_count", "RNBC", 0x40a0);

/// Every counter pollnic reads, in `ethtool -S` order.
pub const COUNTERS: &[Counter] = &[
    RX_PACKETS,
    TX_PACKETS,
    RX_BYTES,
    TX_BYTES,
    c32("rx_broadcast", "BPRC", 0x4078),
    c32("tx_broadcast", "BPTC", 0x40f4),
    c32("rx_multicast", "MPRC", 0x407c),
    c32("tx_multicast", "MPTC", 0x40f0),
    c32("collisions", "COLC", 0x4028),
    c32("rx_crc_errors", "CRCERRS", 0x4000),
    RX_NO_BUFFER_COUNT,
    RX_MISSED_ERRORS,
    c32("tx_aborted_errors", "ECOL", 0x4018),
    c32("tx_carrier_errors", "TNCRS", 0x4034),
    c32("tx_window_errors", "LATECOL", 0x4020),
    c32("tx_deferred_ok", "DC", 0x4030),
    c32("tx_single_coll_ok", "SCC", 0x4014),
    c32("tx_multi_coll_ok", "MCC", 0x401c),
    c32("rx_long_length_errors", "ROC", 0x40ac),
    c32("rx_short_length_errors", "RUC", 0x40a4),
    c32("rx_align_errors", "ALGNERRC", 0x4004),
    c32("rx_flow_control_xon", "XONRXC", 0x4048),
    c32("rx_flow_control_xoff", "XOFFRXC", 0x4050),
    c32("tx_flow_control_xon", "XONTXC", 0x404c),
    c32("tx_flow_control_xoff", "XOFFTXC", 0x4054),
    c64("rx_total_bytes", "TORL/TORH", 0x40c0),
    c64("tx_total_bytes", "TOTL/TOTH", 0x40c8),
    c32("rx_total_packets", "TPR", 0x40d0),
    c32("tx_total_packets", "TPT", 0x40d4),
];

/// Counters Linux igb reports as sums of registers of [`COUNTERS`]:
/// `rx_length_errors` = RUC + ROC (`igb_update_stats`: "RLEC on some newer
/// hardware can be incorrect so build our own version based on RUC and ROC"),
/// frames dropped for being shorter than 64 bytes or longer than the
/// maximum (1518/1522 bytes, or RLPML with RCTL.LPE).
pub const SUMS: &[Sum] = &[Sum {
    name: "rx_length_errors",
    parts: &["rx_short_length_errors", "rx_long_length_errors"],
}];

/// Index of a counter in [`COUNTERS`] by its `ethtool -S` name.
pub fn index_of(name: &str) -> Option<usize> {
    COUNTERS.iter().position(|c| c.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn names_are_unique_and_registers_aligned() {
        for (i, a) in COUNTERS.iter().enumerate() {
            for b in &COUNTERS[i + 1..] {
                assert_ne!(a.name, b.name);
            }
            match a.width {
                Width::Bits32(o) => assert!(o % 4 == 0 && (0x4000..0x4200).contains(&o)),
                Width::Bits64 { lo, hi } => assert_eq!(hi, lo + 4),
            }
        }
    }
    #[test]
    fn well_known_offsets() {
        assert_eq!(RX_PACKETS.width, Width::Bits32(0x4074));
        assert_eq!(
            RX_BYTES.width,
            Width::Bits64 {
                lo: 0x4088,
                hi: 0x408c
            }
        );
        assert_eq!(
            TX_BYTES.width,
            Width::Bits64 {
                lo: 0x4090,
                hi: 0x4094
            }
        );
        assert_eq!(RX_MISSED_ERRORS.width, Width::Bits32(0x4010));
        assert_eq!(RX_NO_BUFFER_COUNT.width, Width::Bits32(0x40a0));
        assert_eq!(index_of("rx_packets"), Some(0));
        for s in SUMS {
            for p in s.parts {
                assert!(index_of(p).is_some(), "{p}");
            }
        }
    }
}
