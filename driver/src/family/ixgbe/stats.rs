//! 82599 counters: the table of `pollnic_hw::ixgbe::stats`, Linux ixgbe's
//! sums (`rx_missed_errors` = MPC(0..8), `rx_no_dma_resources` =
//! QPRDC(0..16)) and its alternative names (`rx_pkts_nic`, ...).

use crate::stats::{Stats, StatsLayout};
use pollnic_hw::ixgbe::stats::{COUNTERS, LINUX_NAMES, SUMS};

/// The 82599 layout.
pub static LAYOUT: StatsLayout = StatsLayout {
    counters: COUNTERS,
    sums: SUMS,
    aliases: LINUX_NAMES,
    extra: &[],
};

/// Read every statistics register once to clear it (§4.6.5).
pub fn clear(r: &dyn crate::sys::mmio::Regs) {
    Stats::new(&LAYOUT).read_registers(r);
}
