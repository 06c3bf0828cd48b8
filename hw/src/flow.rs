//! Ethernet flow control (IEEE 802.3 Annex 31B PAUSE frames): which
//! directions a port uses, and the receive packet buffer levels at which it
//! sends XOFF (stop) and XON (go again), computed as Linux computes them.

/// Which PAUSE directions a port uses (ethtool's `-A rx on|off tx on|off`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FlowControl {
    /// Neither: received PAUSE frames are ignored, none are sent.
    None,
    /// Honour received PAUSE frames (stop transmitting for their time); send none.
    Rx,
    /// Send XOFF when the receive packet buffer fills past its high water
    /// mark and XON when it drains below the low one; ignore received ones.
    Tx,
    /// Both directions: the default of Linux igb (`e1000_fc_default`, which
    /// the NVM of common boards resolves to full) and ixgbe (`ixgbe_sw_init`:
    /// `ixgbe_fc_full`).
    #[default]
    Full,
}

impl FlowControl {
    /// Whether received PAUSE frames stop this port's transmitter.
    pub const fn receives_pause(self) -> bool {
        matches!(self, FlowControl::Rx | FlowControl::Full)
    }
    /// Whether the port sends PAUSE frames when its receive buffer fills.
    pub const fn sends_pause(self) -> bool {
        matches!(self, FlowControl::Tx | FlowControl::Full)
    }
    /// The mode with these two directions.
    pub const fn from_directions(rx: bool, tx: bool) -> FlowControl {
        match (rx, tx) {
            (false, false) => FlowControl::None,
            (true, false) => FlowControl::Rx,
            (false, true) => FlowControl::Tx,
            (true, true) => FlowControl::Full,
        }
    }
    /// `none`, `rx`, `tx` or `full`.
    pub const fn name(self) -> &'static str {
        match self {
            FlowControl::None => "none",
            FlowControl::Rx => "rx",
            FlowControl::Tx => "tx",
            FlowControl::Full => "full",
        }
    }
}

impl std::fmt::Display for FlowControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The PAUSE time a port asks for in its XOFF frames, in quanta of 512 bit
/// times: Linux's 0xFFFF (igb `igb_reset`, ixgbe `IXGBE_DEFAULT_FCPAUSE`).
pub const PAUSE_TIME: u16 = 0xFFFF;

/// igb's water marks in bytes, `(high, low)`, for a receive packet buffer of
/// `pba_kb` KB and frames of up to `max_frame` bytes (MTU + 14 + FCS 4 +
/// VLAN 4), as Linux `igb_reset` sets them: high is the lower of 90 % of the
/// buffer and the buffer less two frames, rounded down to 16 bytes (FCRTH's
/// granularity); low is 16 bytes below it.
pub const fn igb_water_marks(pba_kb: u32, max_frame: u32) -> (u32, u32) {
    let pba = pba_kb << 10;
    let ninety = pba * 9 / 10;
    let less_two = pba.saturating_sub(2 * max_frame);
    let hwm = if ninety < less_two { ninety } else { less_two };
    let high = hwm & 0xFFFF_FFF0;
    (high, high.saturating_sub(16))
}

/// Bit times to KB, rounded up (Linux `IXGBE_BT2KB`).
const fn bt2kb(bt: u32) -> u32 {
    bt.div_ceil(8 * 1024)
}
/// Bytes to bit times (`IXGBE_B2BT`).
const fn b2bt(bytes: u32) -> u32 {
    bytes * 8
}

/// The 82599's delay value in bit times: what may still arrive after the
/// port decides to send XOFF (Linux `IXGBE_DV`, from IEEE 802.1Qbb Annex O:
/// the PFC response delay 672, twice the copper cable delay 5556, twice the
/// interface delay 4096 + 2048 + 12800, the higher-layer delay 6144).
const fn ixgbe_dv(max_frame_link: u32, max_frame_tc: u32) -> u32 {
    let interface = 4096 + 2048 + 12800;
    36 * (b2bt(max_frame_link) + 672 + 2 * 5556 + 2 * interface + 6144) / 25
        + 1
        + 2 * b2bt(max_frame_tc)
}

/// The 82599's low-threshold delay in bit times (Linux `IXGBE_LOW_DV`: the
/// PCI bus delay 10000).
const fn ixgbe_low_dv(max_frame_tc: u32) -> u32 {
    2 * (2 * b2bt(max_frame_tc) + 36 * 10000 / 25 + 1)
}

/// The 82599's water marks in KB, `(high, low)`, for a receive packet buffer
/// of `rx_pba_kb` KB at MTU `mtu`, as Linux `ixgbe_hpbthresh` and
/// `ixgbe_lpbthresh` compute them for one traffic class without SR-IOV:
/// high = the buffer less the delay value of a frame of MTU + 14 + 4 + 20
/// (framing) bytes; low = the low delay value of an MTU + 14 + 4 frame; a
/// low above the high is 0 (`ixgbe_pbthresh_setup`). A buffer too small for
/// the delay gets Linux's fallback high mark, the frame size + 1.
pub const fn ixgbe_water_marks_kb(rx_pba_kb: u32, mtu: u32) -> (u32, u32) {
    let link = mtu + 14 + 4 + 20;
    let kb = bt2kb(ixgbe_dv(link, link));
    let high = if rx_pba_kb >= kb {
        rx_pba_kb - kb
    } else {
        link + 1
    };
    let low = bt2kb(ixgbe_low_dv(mtu + 14 + 4));
    (high, if low > high { 0 } else { low })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_82599s_marks_for_one_512_kib_buffer() {
        // At MTU 1500: DV = 36 x 68,120 / 25 + 1 + 24,608 = 122,701 bit
        // times, 15 KB; low DV = 2 x (24,288 + 14,400 + 1) = 77,378, 10 KB.
        assert_eq!(ixgbe_water_marks_kb(512, 1500), (497, 10));
        // Jumbo frames take more headroom.
        let (high, low) = ixgbe_water_marks_kb(512, 9000);
        assert!(high < 497 && low > 10, "{high} {low}");
    }

    #[test]
    fn igbs_marks_for_the_82576s_64_kb_buffer() {
        // 90 % of 65,536 = 58,982 < 65,536 - 2 x 1522; rounded down to 16.
        assert_eq!(igb_water_marks(64, 1522), (58_976, 58_960));
        // With 9022-byte frames two frames cost more than 10 %.
        assert_eq!(
            igb_water_marks(64, 9022),
            ((65_536 - 18_044) & !0xF, 47_472)
        );
    }

    #[test]
    fn modes_and_directions() {
        for m in [
            FlowControl::None,
            FlowControl::Rx,
            FlowControl::Tx,
            FlowControl::Full,
        ] {
            assert_eq!(
                FlowControl::from_directions(m.receives_pause(), m.sends_pause()),
                m
            );
        }
        assert_eq!(FlowControl::default(), FlowControl::Full);
        assert_eq!(FlowControl::Tx.to_string(), "tx");
    }
}
