//! `pollnic doctor --selfcheck <addr>`: the report of
//! [`pollnic::lowlevel::selfcheck::selfcheck`], short enough to paste into a
//! bug report. Single registers are shown before and after; the multicast
//! table and the receive address registers are summed up.

use pollnic::lowlevel::selfcheck::{RegisterRead, SelfCheck};
use std::fmt::Write;

/// The report, one register per line, the tables summed up.
pub fn text(sc: &SelfCheck) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "pollnic selfcheck {}: {} ({:04x}, {} back end)",
        sc.addr, sc.name, sc.device, sc.family
    );
    if sc.registers.is_empty() {
        let _ = writeln!(out, "no register list for the {} back end", sc.family);
    } else {
        let _ = writeln!(out, "{:<10} {:>10}  {:>10}", "register", "before", "after");
    }
    let table = |r: &RegisterRead| {
        ["MTA(", "RAL(", "RAH("]
            .iter()
            .any(|p| r.name.starts_with(p))
    };
    for r in sc.registers.iter().filter(|r| !table(r)) {
        let _ = writeln!(
            out,
            "{:<10} {:#010x}  {:#010x}{}",
            r.name,
            r.before,
            r.after,
            note(r)
        );
    }
    let count = |p: &str, f: &dyn Fn(u32) -> bool, after: bool| {
        sc.registers
            .iter()
            .filter(|r| r.name.starts_with(p) && r.name != "RAH(0)")
            .filter(|r| f(if after { r.after } else { r.before }))
            .count()
    };
    if sc.registers.iter().any(|r| r.name.starts_with("MTA(")) {
        let nz = |v: u32| v != 0;
        let _ = writeln!(
            out,
            "MTA        {:>10}  {:>10}  (non-zero words of 128; pollnic leaves none)",
            count("MTA(", &nz, false),
            count("MTA(", &nz, true)
        );
    }
    let rars = sc
        .registers
        .iter()
        .filter(|r| r.name.starts_with("RAH("))
        .count();
    if rars > 1 {
        let av = |v: u32| v & (1 << 31) != 0;
        let label = format!("RAR 1..{}", rars - 1);
        let _ = writeln!(
            out,
            "{label:<10} {:>10}  {:>10}  (entries with RAH.AV set; pollnic leaves none)",
            count("RAH(", &av, false),
            count("RAH(", &av, true)
        );
    }
    let _ = writeln!(
        out,
        "link after bring-up: {}",
        if sc.link.up {
            format!("up {} Mb/s", sc.link.speed_mbps)
        } else {
            "down".to_owned()
        }
    );
    let _ = writeln!(out, "flow control after bring-up: {}", sc.flow_control);
    if sc.family == "igb" {
        let _ = writeln!(
            out,
            "power saving (I350 only): {} -> {}",
            sc.power_saving_before, sc.power_saving
        );
    }
    for w in power_saving_warnings(sc) {
        let _ = writeln!(out, "warn: {w}");
    }
    out
}

/// Warnings about the I350's Energy Efficient Ethernet and DMA coalescing,
/// which add wake-up latency to the first frame after a quiet spell: on
/// after pollnic's bring-up (the configuration asked for it), or found on
/// (the port's previous owner left it so; Linux igb turns both on), each
/// with how to turn it off.
pub fn power_saving_warnings(sc: &SelfCheck) -> Vec<String> {
    let mut v = Vec::new();
    if sc.power_saving.any() {
        v.push(format!(
            "{} after bring-up: they add wake-up latency; build the DeviceConfig with \
             .with_power_saving(PowerSaving::OFF) (the default)",
            sc.power_saving
        ));
    }
    if sc.power_saving_before.eee {
        v.push(
            "EEE was on when pollnic found the port (pollnic turns it off at open); under the \
             kernel's igb driver turn it off with `ethtool --set-eee <interface> eee off`"
                .to_owned(),
        );
    }
    if sc.power_saving_before.dma_coalescing {
        v.push(
            "DMA coalescing was on when pollnic found the port (pollnic turns it off at open); \
             the kernel's igb driver turns it on for every I350 and has no switch for it"
                .to_owned(),
        );
    }
    v
}

/// What a value means, for the 82599's pin and link registers.
fn note(r: &RegisterRead) -> String {
    let laser = |v: u32| if v & 0x8 != 0 { "off" } else { "on" };
    let module = |v: u32| if v & 0x4 != 0 { "present" } else { "absent" };
    let lms = |v: u32| match (v >> 13) & 0x7 {
        0 => "1G no AN",
        1 => "10G parallel no AN",
        2 => "1G AN",
        3 => "10G serial",
        4 => "KX4/KX/KR",
        5 => "SGMII",
        6 => "KX4/KX/KR + 1G AN",
        _ => "KX4/KX/KR + SGMII",
    };
    // CTRL_EXT.DRV_LOAD (bit 28 on both families): whether a driver has told
    // the manageability firmware that it owns the port.
    let drv_load = |v: u32| if v & (1 << 28) != 0 { "set" } else { "clear" };
    match r.name.as_str() {
        "CTRL_EXT" => format!("  DRV_LOAD {} -> {}", drv_load(r.before), drv_load(r.after)),
        "STATUS" => format!(
            "  link {} -> {}",
            if r.before & 0x2 != 0 { "up" } else { "down" },
            if r.after & 0x2 != 0 { "up" } else { "down" }
        ),
        "ESDP" => format!(
            "  SFP+ laser (SDP3) {} -> {}; module (SDP2) {} -> {}",
            laser(r.before),
            laser(r.after),
            module(r.before),
            module(r.after)
        ),
        "AUTOC" => format!("  LMS {} -> {}", lms(r.before), lms(r.after)),
        "LINKS" => format!(
            "  link {} -> {}",
            if r.before & (1 << 30) != 0 {
                "up"
            } else {
                "down"
            },
            if r.after & (1 << 30) != 0 {
                "up"
            } else {
                "down"
            }
        ),
        "FWSM" if r.before & 0xE == 0x4 => "  pass-through manageability firmware".to_owned(),
        _ => String::new(),
    }
}
