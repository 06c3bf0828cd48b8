//! Power saving of the I350 that trades latency for power: Energy
//! Efficient Ethernet (IEEE 802.3az) and DMA coalescing. The 82576 and the
//! 82599 have neither.

/// Power saving features of the I350 that trade latency for power
/// (`pollnic::DeviceConfig::power_saving`). Non-exhaustive: start from
/// [`PowerSaving::OFF`] or [`PowerSaving::LINUX`] and change one with
/// [`PowerSaving::with_eee`] / [`PowerSaving::with_dma_coalescing`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct PowerSaving {
    /// Energy Efficient Ethernet (IEEE 802.3az): the PHY advertises EEE at
    /// 100 Mb/s and 1 Gb/s (IPCNFG.EEE_100M_AN, EEE_1G_AN) and the link may
    /// enter low power idle in both directions and during PAUSE
    /// (EEER.TX_LPI_EN, RX_LPI_EN, LPI_FC), as Linux `igb_set_eee_i350`
    /// sets them; `ethtool --set-eee <if> eee on|off` for the kernel driver.
    /// Leaving low power idle takes microseconds (16.5 µs at 1000BASE-T).
    pub eee: bool,
    /// DMA coalescing: the port holds received frames in its packet buffer
    /// (up to its threshold, or a 1 ms watchdog) so that PCIe can stay in a
    /// low power state, as Linux `igb_init_dmac` programs it (DMACR,
    /// DMCTLX, DMCTXTH, DMCRTRH, FCRTC, PCIEMISC.LX_DECISION).
    pub dma_coalescing: bool,
}

impl PowerSaving {
    /// Both off: pollnic's default.
    pub const OFF: PowerSaving = PowerSaving {
        eee: false,
        dma_coalescing: false,
    };
    /// Both on: what Linux igb sets on an I350 by default.
    pub const LINUX: PowerSaving = PowerSaving {
        eee: true,
        dma_coalescing: true,
    };
    /// This setting with [`PowerSaving::eee`] set to `on`.
    #[must_use]
    pub const fn with_eee(mut self, on: bool) -> Self {
        self.eee = on;
        self
    }
    /// This setting with [`PowerSaving::dma_coalescing`] set to `on`.
    #[must_use]
    pub const fn with_dma_coalescing(mut self, on: bool) -> Self {
        self.dma_coalescing = on;
        self
    }
    /// Whether either feature is on.
    pub const fn any(self) -> bool {
        self.eee || self.dma_coalescing
    }
}

impl std::fmt::Display for PowerSaving {
    /// `EEE off, DMA coalescing off` (and `on` for each that is).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let w = |on: bool| if on { "on" } else { "off" };
        write!(
            f,
            "EEE {}, DMA coalescing {}",
            w(self.eee),
            w(self.dma_coalescing)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn off_by_default_and_linux_turns_both_on() {
        assert_eq!(PowerSaving::default(), PowerSaving::OFF);
        assert!(!PowerSaving::OFF.any() && PowerSaving::LINUX.any());
        assert_eq!(
            PowerSaving::OFF.with_eee(true).with_dma_coalescing(true),
            PowerSaving::LINUX
        );
        assert_eq!(PowerSaving::OFF.to_string(), "EEE off, DMA coalescing off");
        assert_eq!(
            PowerSaving::OFF.with_eee(true).to_string(),
            "EEE on, DMA coalescing off"
        );
    }
}
