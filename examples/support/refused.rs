//! The drop and error counters a tool's summary names when they are not
//! zero: frames a port refused (too long for its MTU, too short, a bad FCS)
//! or lost (a full packet buffer, a ring with no free descriptor, a
//! virtqueue the device broke), each with what usually causes it and what
//! changes it. Counters a family does not have are absent from its
//! `Stats` and skipped, never shown as 0.

/// One nonzero counter: its `ethtool -S` name, its total, and a sentence
/// with the cause and the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The counter's name (`Stats::get`).
    pub counter: &'static str,
    /// Its total over the run.
    pub count: u64,
    /// What it counts, the usual cause, and the option that changes it.
    pub meaning: &'static str,
}

/// The counters looked at, in the order shown.
const COUNTERS: [(&str, &str); 8] = [
    (
        "rx_long_length_errors",
        "frames longer than the port's MTU allows, dropped by the NIC (ROC): open the port with \
         --mtu large enough for them (at most 9000)",
    ),
    (
        "rx_length_errors",
        "frames of a wrong length, too long for the MTU or under 64 bytes, dropped by the NIC \
         (RLEC): for long ones open the port with a larger --mtu",
    ),
    (
        "rx_short_length_errors",
        "frames under 64 bytes, dropped by the NIC (RUC): the sender pads too little",
    ),
    (
        "rx_crc_errors",
        "frames with a bad frame check sequence (CRCERRS): a bad cable, optic or sender",
    ),
    (
        "rx_missed_errors",
        "frames dropped because the NIC's packet buffer was full (MPC): the rings were emptied \
         too slowly; more queues (--queues) or a larger --ring-size",
    ),
    (
        "rx_no_buffer_count",
        "times a frame found no free descriptor in its ring (RNBC): the loop fell behind; a \
         larger --ring-size",
    ),
    (
        "rx_errors",
        "frames the device wrote with a bad length, dropped by pollnic (virtio-net)",
    ),
    (
        "device_errors",
        "virtqueue protocol breaks by the device, which stop the queue until the port is \
         opened again (virtio-net)",
    ),
];

/// The nonzero counters among [`COUNTERS`], as `get` (a port's
/// `Stats::get`) reports them. `rx_length_errors` is left out where
/// `rx_long_length_errors` exists (on igb it is RUC + ROC, both shown).
pub fn refused(get: impl Fn(&str) -> Option<u64>) -> Vec<Refused> {
    let split = get("rx_long_length_errors").is_some();
    COUNTERS
        .iter()
        .filter(|(name, _)| !(split && *name == "rx_length_errors"))
        .filter_map(|&(counter, meaning)| {
            let count = get(counter).filter(|&n| n > 0)?;
            Some(Refused {
                counter,
                count,
                meaning,
            })
        })
        .collect()
}

/// A kind of drop the port cannot count: what is lost, why nothing counts
/// it, and what to change if it is happening.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uncounted {
    /// The drop, in a few words (also its key in the tools' JSON).
    pub what: &'static str,
    /// Why no counter shows it, and the option that avoids it.
    pub meaning: &'static str,
}

/// The drops a receiving port cannot count, from the counters its `Stats`
/// keeps (`get`, as `Stats::get`) and whether the port is a NIC model
/// emulated by QEMU ([`emulated_by_qemu`]): QEMU's 82576 keeps the length
/// counters but drops a frame longer than the MTU allows before counting
/// it (`hw/net/igb_core.c`, `igb_receive_assign`), and a virtio-net device
/// has no counters at all. Tools print these so that frames refused for
/// their size do not vanish without a word.
pub fn uncounted(get: impl Fn(&str) -> Option<u64>, emulated: bool) -> Vec<Uncounted> {
    let mut out = Vec::new();
    let length_counters =
        get("rx_long_length_errors").is_some() || get("rx_length_errors").is_some();
    if !length_counters {
        out.push(Uncounted {
            what: "oversize",
            meaning: "frames longer than the receive buffers are dropped by the device \
                      without a count (virtio-net has no length counter); the buffers are \
                      sized for the device's MTU (VIRTIO_NET_F_MTU, 1500 without it), so \
                      frames up to that size arrive whatever this port's --mtu: for larger \
                      ones raise the device's MTU on the hypervisor (QEMU: host_mtu=9000 on \
                      the virtio-net device)",
        });
    } else if emulated {
        out.push(Uncounted {
            what: "oversize",
            meaning: "frames longer than this port's MTU allows are dropped by QEMU's NIC \
                      model without a count (a real 82576 counts them as \
                      rx_long_length_errors): if a sender's frames are larger, open this port \
                      with a larger --mtu (at most 9000)",
        });
    }
    if get("rx_missed_errors").is_none() {
        out.push(Uncounted {
            what: "missed",
            meaning: "frames lost while the receive ring was full are not counted by this \
                      family (a tap-backed virtio-net port loses them in the host's tap \
                      queue): a larger --ring-size, or more queues",
        });
    }
    out
}

/// Whether `addr` (a PCI address as sysfs names it, `0000:00:03.0`) is an
/// Intel NIC model emulated by QEMU: subsystem vendor 1af4 (Red Hat, which
/// QEMU gives the devices it emulates) under Intel's vendor ID. `false`
/// when sysfs cannot tell.
pub fn emulated_by_qemu(addr: &str) -> bool {
    let read = |f: &str| {
        std::fs::read_to_string(format!("/sys/bus/pci/devices/{addr}/{f}"))
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    };
    read("vendor") == "0x8086" && read("subsystem_vendor") == "0x1af4"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonzero_counters_are_named_with_their_fix_and_absent_ones_skipped() {
        // igb: the split length counters, and rx_length_errors (their sum)
        // not shown twice.
        let igb = |n: &str| match n {
            "rx_long_length_errors" => Some(200),
            "rx_length_errors" => Some(200),
            "rx_crc_errors" | "rx_short_length_errors" | "rx_missed_errors" => Some(0),
            _ => None,
        };
        let r = refused(igb);
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!((r[0].counter, r[0].count), ("rx_long_length_errors", 200));
        assert!(r[0].meaning.contains("--mtu"));
        // The 82599: RLEC only.
        let ixgbe = |n: &str| (n == "rx_length_errors").then_some(3);
        assert_eq!(refused(ixgbe)[0].counter, "rx_length_errors");
        // virtio-net: the driver's own.
        let virtio = |n: &str| match n {
            "device_errors" => Some(1),
            "rx_errors" => Some(0),
            _ => None,
        };
        assert_eq!(refused(virtio)[0].counter, "device_errors");
        assert!(refused(|_| None).is_empty());
    }

    #[test]
    fn drops_a_port_cannot_count_are_named_with_the_fix() {
        // virtio-net: packets and bytes only.
        let virtio = |n: &str| matches!(n, "rx_packets" | "rx_bytes").then_some(5);
        let u = uncounted(virtio, false);
        let what: Vec<_> = u.iter().map(|u| u.what).collect();
        assert_eq!(what, ["oversize", "missed"]);
        assert!(u[0].meaning.contains("host_mtu"), "{u:?}");
        // A real 82576 counts both: nothing to say.
        let igb = |n: &str| {
            matches!(
                n,
                "rx_long_length_errors" | "rx_length_errors" | "rx_missed_errors"
            )
            .then_some(0)
        };
        assert!(uncounted(igb, false).is_empty());
        // QEMU's 82576 has the counters but drops oversize frames uncounted.
        let u = uncounted(igb, true);
        assert_eq!(u.len(), 1);
        assert!(u[0].meaning.contains("QEMU"), "{u:?}");
    }
}
