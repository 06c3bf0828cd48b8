//! pktgen's output: a text line per second and a summary, or the same as
//! JSON objects (one per line) for monitoring.

use pollnic::Device;
use pollnic_tools::gen::FrameSize;
use pollnic_tools::metrics::{Throughput, TxAccount};
use std::path::PathBuf;
use std::time::Duration;

pub struct Reporter {
    json: bool,
    tick: u64,
    /// The largest frame sent, on the wire with FCS, when it is over 1518
    /// bytes, and this port's MTU: a receiver at a smaller MTU drops them.
    pub jumbo: Option<(usize, u32)>,
}

impl Reporter {
    pub fn new(json: bool) -> Reporter {
        Reporter {
            json,
            tick: 0,
            jumbo: None,
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn start(
        &mut self,
        dev: &Device,
        size: &FrameSize,
        vlan: Option<u16>,
        (hw_vlan, hw_csum): (bool, bool),
        tso: Option<(u16, usize)>,
        flows: u32,
        rate: u64,
        count: u64,
        seconds: u64,
    ) {
        if self.json {
            pollnic_tools::jsonout::emit(&serde_json::json!({
                "type": "start", "port": dev.addr().to_string(), "frame_size": size.describe(),
                "vlan": vlan, "vlan_by_nic": hw_vlan, "checksums_by_nic": hw_csum,
                "tso_mss": tso.map(|t| t.0), "tso_payload": tso.map(|t| t.1), "flows": flows, "rate_pps": rate, "count": count, "seconds": seconds,
            }));
            return;
        }
        let frames = match tso {
            Some((mss, payload)) if dev.family() == pollnic::NicFamily::VirtioNet => format!(
                "TCP/IPv4 frames of {payload} bytes of payload cut by the virtio-net device into \
                 {} segments of at most {mss} bytes each (TSO through the virtio_net_hdr: \
                 segmentation done by the host, not this CPU)",
                (payload as u64).div_ceil(mss as u64)
            ),
            Some((mss, payload)) => format!(
                "TCP/IPv4 frames of {payload} bytes of payload cut by the NIC into {} segments of \
                 at most {mss} bytes each (TSO: segmentation done in hardware)",
                (payload as u64).div_ceil(mss as u64)
            ),
            None => format!("{} frames", size.describe()),
        };
        println!(
            "pollnic pktgen: {} ({}), {}{}{}, {} flow(s), {}, {}, {}",
            dev.addr(),
            dev.mac_string(),
            frames,
            vlan.map(|v| format!(
                " tagged VLAN {v} ({})",
                if hw_vlan {
                    "inserted by the NIC"
                } else {
                    "in software"
                }
            ))
            .unwrap_or_default(),
            if hw_csum {
                ", IPv4 and UDP checksums inserted by the NIC"
            } else {
                ""
            },
            flows,
            if rate == 0 {
                "as fast as possible".into()
            } else {
                format!("{rate} pps")
            },
            if count == 0 {
                "no count limit".into()
            } else {
                format!("{count} frames")
            },
            if seconds == 0 {
                "no time limit".into()
            } else {
                format!("{seconds} s")
            },
        );
    }

    /// One second: `frames` and `bytes` (no FCS) handed to the NIC in it.
    pub fn second(&mut self, dev: &Device, frames: u64, bytes: u64) {
        self.tick += 1;
        let t = Throughput {
            packets: frames,
            bytes,
            elapsed: Duration::from_secs(1),
        };
        if self.json {
            println!(
                "{}",
                serde_json::json!({
                    "type": "second",
                    "second": self.tick,
                    "port": dev.addr().to_string(),
                    "tx_pps": frames,
                    "tx_mbps_l2": t.payload_mbps(),
                    "tx_mbps_l1": t.l1_mbps(),
                })
            );
        } else {
            println!("[{:>3} s] tx {t}", self.tick);
        }
    }

    #[allow(clippy::too_many_arguments)]
    /// `segments`: with TSO, the segments the NIC sends per frame.
    pub fn summary(
        &mut self,
        dev: &mut Device,
        segments: Option<u64>,
        sent: u64,
        bytes: u64,
        elapsed: Duration,
        span: Duration,
        full_events: u64,
        interrupted: bool,
        written: Option<(PathBuf, u64)>,
    ) {
        // Timed from the first burst to the last (bursts of one are frames).
        let t = Throughput {
            packets: sent,
            bytes,
            elapsed: span,
        };
        let stats = dev.stats();
        let hw = stats.get("tx_packets").unwrap_or(0);
        // This port's own nonzero drop and error counters, as the receiving
        // tools name theirs.
        let refused = pollnic_tools::refused::refused(|n| stats.get(n));
        // With TSO, QEMU's igb counts each frame once in tx_packets (GPTC),
        // not per segment, so only the frames are held against it.
        let account = TxAccount {
            handed: sent,
            tx_packets: hw,
            received: None,
        };
        if self.json {
            println!(
                "{}",
                serde_json::json!({
                    "type": "summary",
                    "port": dev.addr().to_string(),
                    "sent": sent,
                    "tso_segments": segments.map(|n| n * sent),
                    "bytes": bytes,
                    "seconds": elapsed.as_secs_f64(),
                    "tx_pps": t.measurable().then(|| t.pps()),
                    "tx_mbps_l2": t.measurable().then(|| t.payload_mbps()),
                    "tx_mbps_l1": t.measurable().then(|| t.l1_mbps()),
                    "tx_packets_counter": hw,
                    "not_transmitted": account.not_transmitted(),
                    "tx_ring_full_events": full_events,
                    "refused": refused.iter().map(|r| (r.counter.to_owned(), serde_json::json!(r.count))).collect::<serde_json::Map<_, _>>(),
                    "receiver_mtu_needed": self.jumbo.map(|(_, mtu)| mtu),
                    "interrupted": interrupted,
                    "written": written.as_ref().map(|(p, n)| serde_json::json!({"file": p.display().to_string(), "frames": n})),
                })
            );
            return;
        }
        if let (true, Some(line)) = (
            interrupted,
            pollnic_tools::signal::interrupted_line("the device was"),
        ) {
            println!("{line}");
        }
        println!("--- summary ---");
        println!(
            "sent       {sent} frames, {bytes} bytes in {:.2} s (tx_packets counter: {hw})",
            elapsed.as_secs_f64()
        );
        if let Some(n) = segments {
            println!(
                "segments   {} expected on the wire, {n} per frame (TSO: cut by the NIC; \
                 QEMU's igb counts a TSO frame once in tx_packets)",
                n * sent
            );
        }
        if let Some(line) = account.shortfall_line() {
            println!("{line}");
        }
        println!("tx rate    {} (timed by burst)", t.summary());
        println!("ring full  {full_events} bursts found the TX ring full");
        if let Some((p, n)) = written {
            println!("written    {n} frames to {}", p.display());
        }
        for r in &refused {
            println!("refused    {} {}: {}", r.count, r.counter, r.meaning);
        }
        if let Some((wire, mtu)) = self.jumbo {
            println!(
                "receiver   frames up to {wire} bytes on the wire: an Intel port receiving \
                 them at a smaller MTU drops them (at the default 1500, every frame over 1518 \
                 bytes), which QEMU's igb does not count; open the receiver with --mtu {mtu} \
                 (a virtio-net receiver takes frames up to its device's MTU, whatever its own)"
            );
        }
    }
}
