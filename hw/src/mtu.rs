//! MTU and frame-size arithmetic, as Linux counts them.
//!
//! The MTU is the largest L3 payload in bytes (Linux `dev->mtu`). A frame
//! on the wire adds the Ethernet header (14 bytes), the FCS (4) and 4 bytes
//! per VLAN tag: MTU 1500 is a 1518-byte frame (1522 with one 802.1Q tag),
//! MTU 9000 a 9018-byte frame (9022 with one tag). RX buffers hold frames
//! without the FCS (pollnic has the NIC strip it: RCTL.SECRC, HLREG0/RDRXCTL
//! CRCSTRIP), so a buffer needs room for `MTU + 14 + 4 × tags` bytes.

/// Ethernet header: destination and source MAC, EtherType (bytes).
pub const ETH_HLEN: u32 = 14;
/// Frame check sequence (bytes).
pub const FCS_LEN: u32 = 4;
/// One 802.1Q / 802.1ad tag (bytes).
pub const VLAN_HLEN: u32 = 4;
/// The standard Ethernet MTU, pollnic's default (bytes).
pub const DEFAULT_MTU: u32 = 1500;
/// Smallest MTU pollnic configures (bytes): the standard one.
pub const MIN_MTU: u32 = 1500;
/// Largest MTU pollnic configures (bytes): the common jumbo size, a
/// 9018-byte frame (both the 82576 and the 82599 take 9.5 KiB and more).
pub const MAX_MTU: u32 = 9000;
/// VLAN tags a receive buffer has room for beyond the MTU: the NIC allows 4
/// bytes per tag it recognizes (82576 RLPML, 82599 MAXFRS), and Linux igb
/// sizes for two (`IGB_ETH_PKT_HDR_PAD`).
pub const BUF_VLAN_TAGS: u32 = 2;
/// RX buffer sizes are programmed in 1 KiB units (SRRCTL.BSIZEPKT on both families).
pub const BUF_UNIT: u32 = 1024;

/// Whether `mtu` is one pollnic configures ([`MIN_MTU`]..=[`MAX_MTU`]).
pub const fn valid_mtu(mtu: u32) -> bool {
    mtu >= MIN_MTU && mtu <= MAX_MTU
}

/// The largest untagged frame at `mtu`, FCS included (bytes): `mtu + 18`.
/// This is what goes into the 82576's RLPML and the 82599's MAXFRS.MFS.
pub const fn max_frame(mtu: u32) -> u32 {
    mtu + ETH_HLEN + FCS_LEN
}

/// The largest frame the NIC may write for `mtu`, FCS stripped, with
/// [`BUF_VLAN_TAGS`] tags (bytes).
pub const fn max_rx_bytes(mtu: u32) -> u32 {
    mtu + ETH_HLEN + BUF_VLAN_TAGS * VLAN_HLEN
}

/// The RX buffer size for `mtu`: [`max_rx_bytes`] rounded up to 1 KiB, so
/// that every frame the NIC accepts fits one buffer (no descriptor chains):
/// 2048 at MTU 1500, 9216 at MTU 9000.
pub const fn rx_buf_size(mtu: u32) -> u32 {
    max_rx_bytes(mtu).div_ceil(BUF_UNIT) * BUF_UNIT
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn linux_frame_sizes() {
        assert_eq!(max_frame(1500), 1518);
        assert_eq!(max_frame(9000), 9018);
        assert_eq!(max_frame(9000) + VLAN_HLEN, 9022);
        assert_eq!(max_rx_bytes(1500), 1522);
        assert_eq!(rx_buf_size(1500), 2048);
        assert_eq!(rx_buf_size(9000), 9216);
        assert_eq!(rx_buf_size(3000), 3072);
        assert!(valid_mtu(1500) && valid_mtu(9000));
        assert!(!valid_mtu(1499) && !valid_mtu(9001) && !valid_mtu(0));
    }
}
