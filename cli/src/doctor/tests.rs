//! Checks on made-up facts: a healthy host, then one thing broken at a time.

use super::checks::{self, any_failed, blocks, can_rw};
use super::facts::*;
use super::{report, Finding, Status};
use pollnic::pci::{BindMode, LinkState, PciDevice};
use pollnic::DeviceConfig;

fn addr(s: &str) -> pollnic::pci::PciAddress {
    s.parse().unwrap()
}

fn igb(a: &str, driver: Option<&str>, group: Option<u32>, node: Option<u32>) -> PciDevice {
    PciDevice {
        addr: addr(a),
        vendor: 0x8086,
        device: 0x10c9,
        class: 0x020000,
        model: pollnic::pci::lookup(0x8086, 0x10c9),
        driver: driver.map(str::to_owned),
        driver_override: None,
        iommu_group: group,
        interfaces: vec![],
        numa_node: node,
    }
}

fn healthy() -> Facts {
    Facts {
        iommu_units: vec!["dmar0".into()],
        iommu_groups: 12,
        cmdline: "console=ttyS0 intel_iommu=on iommu=pt".into(),
        vfio_pci_loaded: true,
        vfio_pci_available: Module::InTree,
        vfio_noiommu: Offer::Absent,
        uio_pci_generic: Offer::Available,
        vm: None,
        hugepages: Hugepages {
            supported: true,
            total: 512,
            free: 500,
            nodes: vec![NodePages {
                node: 0,
                total: 512,
                free: 500,
            }],
        },
        need: Need::of(&DeviceConfig::default(), 1),
        memlock: Memlock {
            soft: Some(8 << 20),
            hard: Some(8 << 20),
        },
        user: User {
            uid: 0,
            gid: 0,
            groups: vec![],
            name: Some("root".into()),
            cap_ipc_lock: true,
        },
        vfio_container: Some(NodeStat {
            mode: 0o666,
            uid: 0,
            gid: 0,
        }),
        ports: vec![PortFacts {
            addr: addr("0000:00:08.0"),
            device: Some(igb("0000:00:08.0", Some("vfio-pci"), Some(3), Some(0))),
            members: vec![],
            vfio_node: Some(NodeStat {
                mode: 0o600,
                uid: 0,
                gid: 0,
            }),
            link: LinkState::Up {
                speed_mbps: Some(1000),
            },
            mode: Some(BindMode::Vfio),
            virtio_features: None,
        }],
        cores: vec![CoreFacts {
            cpu: 2,
            online: true,
            node: Some(0),
            governor: Some("performance".into()),
        }],
        node_cpus: vec![(0, vec![0, 1, 2, 3]), (1, vec![4, 5, 6, 7])],
        isolated: vec![2],
        nohz_full: vec![2],
        irqbalance: vec![],
        waitpkg: Default::default(),
    }
}

fn find<'a>(fs: &'a [Finding], area: &str, status: Status) -> &'a Finding {
    fs.iter()
        .find(|f| f.area == area && f.status == status)
        .unwrap_or_else(|| panic!("no {status} finding for {area} in {fs:#?}"))
}

#[test]
fn a_healthy_host_is_all_ok() {
    let fs = checks::run(&healthy());
    assert!(fs.iter().all(|f| f.status == Status::Ok), "{fs:#?}");
    assert!(fs.iter().all(|f| f.fix.is_none()));
    assert!(!any_failed(&fs));
    let text = report::text(&fs);
    assert!(text.ends_with("0 warn, 0 fail\n"), "{text}");
}

#[test]
fn default_need_is_six_pages_per_queue() {
    let n = Need::of(&DeviceConfig::default(), 2);
    assert_eq!((n.mempool_pages, n.ring_pages), (4, 2));
    assert_eq!(n.per_queue(), 6);
    assert_eq!(n.pages(), 12);
    assert_eq!(n.bytes(), 24 << 20);
}

#[test]
fn no_hugepages_fails_with_the_nr_hugepages_fix() {
    let mut f = healthy();
    f.hugepages.total = 0;
    f.hugepages.free = 0;
    f.hugepages.nodes[0] = NodePages::default();
    let fs = checks::run(&f);
    let h = find(&fs, "hugepages", Status::Fail);
    assert!(h.detail.contains("0 total, 0 free"), "{}", h.detail);
    assert!(h.detail.contains("needs 6 per queue"), "{}", h.detail);
    assert_eq!(
        h.fix.as_deref().unwrap(),
        "echo 6 | sudo tee /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages   # or boot with hugepages=6"
    );
    assert!(any_failed(&fs));
    // Too few free: the fix raises the total by the shortfall.
    f.hugepages.total = 10;
    f.hugepages.free = 4;
    let h = checks::hugepages(&f);
    assert_eq!(h.status, Status::Fail);
    assert!(h.fix.unwrap().starts_with("echo 12 |"));
}

#[test]
fn a_short_node_pool_warns_with_the_node_fix() {
    let mut f = healthy();
    f.hugepages.nodes = vec![
        NodePages {
            node: 0,
            total: 2,
            free: 2,
        },
        NodePages {
            node: 1,
            total: 510,
            free: 498,
        },
    ];
    let h = checks::hugepages(&f);
    assert_eq!(h.status, Status::Warn, "{h:?}");
    assert!(h
        .fix
        .unwrap()
        .contains("node0/hugepages/hugepages-2048kB/nr_hugepages"));
}

#[test]
fn memlock_is_explained_for_unprivileged_users() {
    let mut f = healthy();
    f.user = User {
        uid: 1000,
        gid: 1000,
        groups: vec![1000],
        name: Some("alice".into()),
        cap_ipc_lock: false,
    };
    f.need = Need::of(&DeviceConfig::default(), 2); // 24 MiB
    let m = checks::memlock(&f);
    assert_eq!(m.status, Status::Fail);
    assert!(
        m.detail.contains("8192 KiB is below the 24576 KiB needed"),
        "{}",
        m.detail
    );
    assert!(m.detail.contains("CAP_IPC_LOCK"));
    let fix = m.fix.unwrap();
    assert!(fix.contains("alice - memlock 24576"), "{fix}");
    // A hard limit that allows it: ulimit is enough.
    f.memlock.hard = None;
    assert!(checks::memlock(&f)
        .fix
        .unwrap()
        .starts_with("ulimit -l 24576"));
    f.memlock.soft = Some(24 << 20);
    assert_eq!(checks::memlock(&f).status, Status::Ok);
}

#[test]
fn vfio_node_permissions() {
    let alice = User {
        uid: 1000,
        gid: 1000,
        groups: vec![1000, 27],
        name: Some("alice".into()),
        cap_ipc_lock: false,
    };
    let st = |mode, uid, gid| NodeStat { mode, uid, gid };
    assert!(!can_rw(&st(0o600, 0, 0), &alice));
    assert!(can_rw(&st(0o600, 1000, 0), &alice));
    assert!(can_rw(&st(0o660, 0, 27), &alice));
    assert!(!can_rw(&st(0o640, 0, 27), &alice));
    assert!(can_rw(&st(0o666, 0, 0), &alice));
    let mut f = healthy();
    f.user = alice;
    f.memlock.soft = None;
    let fs = checks::run(&f);
    let p = find(&fs, "port 0000:00:08.0", Status::Fail);
    assert!(
        p.detail
            .contains("/dev/vfio/3 is mode 600 owner 0:0: alice cannot open it"),
        "{}",
        p.detail
    );
    assert_eq!(
        p.fix.as_deref(),
        Some("sudo pollnic bind --user alice 0000:00:08.0")
    );
}

#[test]
fn a_non_viable_group_names_every_other_member() {
    let mut f = healthy();
    f.ports[0].members = vec![
        Member {
            addr: addr("0000:00:04.1"),
            driver: Some("igb".into()),
            bridge: false,
            supported_nic: true,
        },
        Member {
            addr: addr("0000:00:04.2"),
            driver: None,
            bridge: false,
            supported_nic: false,
        },
        Member {
            addr: addr("0000:00:1e.0"),
            driver: Some("shpchp".into()),
            bridge: true,
            supported_nic: false,
        },
        Member {
            addr: addr("0000:00:04.3"),
            driver: Some("e1000".into()),
            bridge: false,
            supported_nic: false,
        },
    ];
    let fs = checks::run(&f);
    let g = find(&fs, "port 0000:00:08.0", Status::Fail);
    assert!(
        g.detail.starts_with(
            "IOMMU group 3 is not viable: 0000:00:04.1 (igb), 0000:00:04.3 (e1000) bound"
        ),
        "{}",
        g.detail
    );
    assert!(g.detail.contains("0000:00:04.2 (no driver)"));
    assert!(g.detail.contains("0000:00:1e.0 (shpchp)"));
    assert_eq!(
        g.fix.as_deref(),
        Some("sudo pollnic bind 0000:00:04.1; echo 0000:00:04.3 | sudo tee /sys/bus/pci/devices/0000:00:04.3/driver/unbind")
    );
    // Unbound and vfio members keep it viable, and are named.
    for m in &mut f.ports[0].members {
        if m.driver.as_deref() != Some("shpchp") {
            m.driver = if m.supported_nic {
                Some("vfio-pci".into())
            } else {
                None
            };
        }
    }
    assert!(f.ports[0].members.iter().all(|m| !blocks(m)));
    let fs = checks::run(&f);
    assert!(!any_failed(&fs), "{fs:#?}");
    assert!(fs.iter().any(|x| x
        .detail
        .contains("IOMMU group 3 is viable; other members: 0000:00:04.1 (vfio-pci)")));
}

#[test]
fn port_problems() {
    let mut f = healthy();
    f.ports[0].device.as_mut().unwrap().driver = Some("igb".into());
    f.ports[0].mode = None;
    f.ports[0].link = LinkState::Down;
    let fs = checks::run(&f);
    let d = find(&fs, "port 0000:00:08.0", Status::Fail);
    assert!(d.detail.contains("driver igb, not vfio-pci"));
    assert_eq!(d.fix.as_deref(), Some("sudo pollnic bind 0000:00:08.0"));
    find(&fs, "port 0000:00:08.0", Status::Warn);
    // Unknown address.
    f.ports[0].device = None;
    let fs = checks::run(&f);
    assert_eq!(
        find(&fs, "port 0000:00:08.0", Status::Fail)
            .fix
            .as_deref()
            .unwrap()
            .split_whitespace()
            .next(),
        Some("pollnic")
    );
    // No group: IOMMU fix, and uio_pci_generic (offered): a warning.
    let mut f = healthy();
    f.ports[0].device.as_mut().unwrap().iommu_group = None;
    let fs = checks::run(&f);
    let w = find(&fs, "port 0000:00:08.0", Status::Warn);
    let fix = w.fix.as_deref().unwrap();
    assert!(fix.contains("intel_iommu=on"), "{fix}");
    assert!(
        fix.contains("sudo pollnic bind --driver uio_pci_generic 0000:00:08.0"),
        "{fix}"
    );
    // Neither no-IOMMU route: a failure.
    f.uio_pci_generic = Offer::Absent;
    let fs = checks::run(&f);
    assert!(find(&fs, "port 0000:00:08.0", Status::Fail)
        .fix
        .as_deref()
        .unwrap()
        .contains("intel_iommu=on"));
}

#[test]
fn numa_mismatch_suggests_local_cores() {
    let mut f = healthy();
    f.ports[0].device.as_mut().unwrap().numa_node = Some(1);
    let fs = checks::port(&f, &f.ports[0]);
    let w = fs.iter().find(|x| x.status == Status::Warn).unwrap();
    assert!(
        w.detail.contains("core(s) 2 are on another node"),
        "{}",
        w.detail
    );
    assert_eq!(
        w.fix.as_deref(),
        Some("--cores 4,5,6,7   # cores of node 1")
    );
}

#[test]
fn core_findings() {
    let mut f = healthy();
    f.isolated.clear();
    f.cores[0].governor = Some("powersave".into());
    f.cores.push(CoreFacts {
        cpu: 9,
        online: false,
        node: None,
        governor: None,
    });
    f.irqbalance = vec![812];
    let fs = checks::run(&f);
    // Core 9 is absent: reported, and never in the suggested command line.
    let fix = find(&fs, "core 2", Status::Warn).fix.clone().unwrap();
    assert!(fix.contains("isolcpus=2 nohz_full=2 rcu_nocbs=2`"), "{fix}");
    assert!(fs
        .iter()
        .any(|x| x.area == "core 2" && x.detail.contains("powersave")));
    find(&fs, "core 9", Status::Fail);
    let irq = find(&fs, "irqbalance", Status::Warn);
    assert!(irq.detail.contains("pid 812"));
    assert!(irq
        .fix
        .as_deref()
        .unwrap()
        .contains("IRQBALANCE_BANNED_CPULIST=2,9"));
}

#[test]
fn iommu_and_vfio_module() {
    let mut f = healthy();
    f.iommu_groups = 0;
    f.iommu_units.clear();
    f.cmdline = "quiet".into();
    f.uio_pci_generic = Offer::Absent;
    let i = checks::iommu(&f);
    assert_eq!(i.status, Status::Fail);
    assert!(i.detail.contains("no IOMMU option"));
    assert!(i.fix.unwrap().contains("update-grub"));
    f.vfio_pci_loaded = false;
    assert_eq!(checks::vfio_pci(&f).status, Status::Warn);
    assert_eq!(
        checks::vfio_pci(&f).fix.as_deref(),
        Some("sudo modprobe vfio-pci")
    );
    f.vfio_pci_available = Module::NotInTree;
    assert_eq!(checks::vfio_pci(&f).status, Status::Fail);
    f.vfio_container = None;
    assert_eq!(checks::vfio_container(&f).status, Status::Fail);
}

#[test]
fn json_has_counts_need_and_findings() {
    let mut f = healthy();
    f.hugepages.free = 0;
    let fs = checks::run(&f);
    let v: serde_json::Value = serde_json::from_str(&report::json(&fs, &f.need)).unwrap();
    assert_eq!(v["fail"], 1);
    assert_eq!(v["need"]["hugepages_per_queue"], 6);
    let h = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["area"] == "hugepages")
        .unwrap();
    assert_eq!(h["status"], "fail");
    assert!(h["fix"].as_str().unwrap().contains("nr_hugepages"));
}

#[test]
fn gathers_hugepages_and_cap_eff_from_a_fake_tree() {
    let dir = tempfile::tempdir().unwrap();
    let w = |p: &str, s: &str| {
        let p = dir.path().join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    };
    w("kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "512\n");
    w(
        "kernel/mm/hugepages/hugepages-2048kB/free_hugepages",
        "488\n",
    );
    w(
        "devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages",
        "256\n",
    );
    w(
        "devices/system/node/node0/hugepages/hugepages-2048kB/free_hugepages",
        "250\n",
    );
    w(
        "devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages",
        "256\n",
    );
    w(
        "devices/system/node/node1/hugepages/hugepages-2048kB/free_hugepages",
        "238\n",
    );
    let h = gather_hugepages(&pollnic::pci::Sysfs::new(dir.path()));
    assert!(h.supported);
    assert_eq!((h.total, h.free), (512, 488));
    assert_eq!(h.nodes.len(), 2);
    assert_eq!(
        h.nodes[1],
        NodePages {
            node: 1,
            total: 256,
            free: 238
        }
    );
    assert_eq!(
        cap_eff("Name:\tx\nCapEff:\t000001ffffffffff\n"),
        Some(0x1ff_ffff_ffff)
    );
    assert_eq!(cap_eff("CapEff:\t0000000000000000"), Some(0));
    assert_eq!(parse_cpulist("0-2,5\n"), vec![0, 1, 2, 5]);
    assert!(parse_cpulist("\n").is_empty());
}

#[test]
fn a_family_caveat_is_a_warning_in_the_families_words() {
    // ixgbe: the text `pollnic doctor` has always printed.
    let mut f = healthy();
    let d = f.ports[0].device.as_mut().unwrap();
    d.device = 0x10fb;
    d.model = pollnic::pci::lookup(0x8086, 0x10fb);
    let fs = checks::port(&f, &f.ports[0]);
    let w = find(&fs, "port 0000:00:08.0", Status::Warn);
    assert_eq!(
        w.detail,
        "82599ES 10-Gigabit SFI/SFP+ Network Connection is an ixgbe part: \
         its back end is tested only against pollnic's software 82599, never on hardware"
    );
    assert_eq!(
        w.fix.as_deref(),
        Some(
            "an igb port is the tested path (`pollnic status`); `pollnic unbind 0000:00:08.0` gives this one back"
        )
    );
    // A third family (defined only in its test module) is named by itself.
    use pollnic::test_family::{with_third, TEST_DEVICE_ID};
    let d = f.ports[0].device.as_mut().unwrap();
    d.device = TEST_DEVICE_ID;
    d.model = pollnic::pci::lookup_in(&with_third(), 0x8086, TEST_DEVICE_ID);
    let fs = checks::port(&f, &f.ports[0]);
    assert!(!fs.iter().any(|x| x.status == Status::Fail), "{fs:#?}");
    let w = find(&fs, "port 0000:00:08.0", Status::Warn);
    assert_eq!(
        w.detail,
        "Test-only Third Family Connection is an e1000e part: a test-only family"
    );
    assert!(w
        .fix
        .as_deref()
        .unwrap()
        .starts_with("use a real port (`pollnic status`)"));
    // igb has none.
    let f = healthy();
    let fs = checks::port(&f, &f.ports[0]);
    assert!(fs.iter().all(|x| x.status == Status::Ok), "{fs:#?}");
}

#[test]
fn an_82599_the_back_end_cannot_bring_up_is_a_failure_naming_what_is_missing() {
    for (id, what) in [(0x151c, "10GBASE-T PHY"), (0x1558, "ESDP SDP0/SDP1")] {
        let mut f = healthy();
        let d = f.ports[0].device.as_mut().unwrap();
        d.device = id;
        d.model = pollnic::pci::lookup(0x8086, id);
        let fs = checks::port(&f, &f.ports[0]);
        let x = find(&fs, "port 0000:00:08.0", Status::Fail);
        assert!(
            x.detail.contains(what) && x.detail.contains("refuses it"),
            "{}",
            x.detail
        );
        assert!(
            x.detail.contains("not supported by pollnic yet"),
            "{}",
            x.detail
        );
    }
    // A plain SFP+ 82599 gets no such failure.
    let mut f = healthy();
    let d = f.ports[0].device.as_mut().unwrap();
    d.device = 0x10fb;
    d.model = pollnic::pci::lookup(0x8086, 0x10fb);
    let fs = checks::port(&f, &f.ports[0]);
    assert!(!fs.iter().any(|x| x.status == Status::Fail), "{fs:#?}");
}

#[test]
fn the_selfcheck_report_on_the_software_82599_shows_laser_link_mode_and_filters() {
    use pollnic_model::ixgbe::Soft82599;
    let m = Soft82599::default();
    m.set_eeprom_link_mode(pollnic_hw::ixgbe::bits::AUTOC_LMS_1G_AN);
    let cfg = pollnic::DeviceConfig::default()
        .with_rx_ring_size(64)
        .with_tx_ring_size(64)
        .with_mempool_size(512);
    let sc = pollnic::lowlevel::selfcheck::selfcheck_on(m.io(), m.ident(), &cfg).unwrap();
    let t = crate::doctor::selfcheck::text(&sc);
    assert!(
        t.starts_with("pollnic selfcheck 0000:5e:00.0: 82599ES"),
        "{t}"
    );
    assert!(
        t.contains("SFP+ laser (SDP3) off -> on; module (SDP2) present -> present"),
        "{t}"
    );
    assert!(t.contains("LMS 1G AN -> 10G serial"), "{t}");
    assert!(t.contains("DRV_LOAD clear -> set"), "{t}");
    assert!(t.contains("flow control after bring-up: full"), "{t}");
    assert!(t.contains("MTA               128           0"), "{t}");
    assert!(t.contains("RAR 1..127        127           0"), "{t}");
    assert!(t.contains("link after bring-up: up 10000 Mb/s"), "{t}");
    assert!(t.lines().count() < 15, "short enough to paste: {t}");
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

#[test]
fn the_selfcheck_report_on_the_software_82576_has_the_igb_equivalents() {
    use pollnic_model::igb::Soft82576;
    let m = Soft82576::default();
    let cfg = pollnic::DeviceConfig::default()
        .with_rx_ring_size(64)
        .with_tx_ring_size(64)
        .with_mempool_size(512);
    let sc = pollnic::lowlevel::selfcheck::selfcheck_on(m.io(), m.ident(), &cfg).unwrap();
    let t = crate::doctor::selfcheck::text(&sc);
    assert!(t.contains("igb back end"), "{t}");
    assert!(t.contains("STATUS") && t.contains("link down -> up"), "{t}");
    assert!(t.contains("RAR 1..15"), "{t}");
    assert!(t.contains("DRV_LOAD clear -> set"), "{t}");
    assert!(t.contains("flow control after bring-up: full"), "{t}");
    assert!(t.contains("link after bring-up: up 1000 Mb/s"), "{t}");
    assert!(!t.contains("SFP+ laser"), "{t}");
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

#[test]
fn the_selfcheck_report_warns_when_i350_power_saving_is_on() {
    use pollnic::config::PowerSaving;
    use pollnic_model::igb::{ModelConfig, Soft82576};
    let cfg = pollnic::DeviceConfig::default()
        .with_rx_ring_size(64)
        .with_tx_ring_size(64)
        .with_mempool_size(512);
    // The software I350's NVM turns EEE on; pollnic's default turns it off.
    let m = Soft82576::with_device(ModelConfig::default(), 0x1521);
    let sc = pollnic::lowlevel::selfcheck::selfcheck_on(m.io(), m.ident(), &cfg).unwrap();
    let t = crate::doctor::selfcheck::text(&sc);
    assert!(
        t.contains(
            "power saving (I350 only): EEE on, DMA coalescing off -> EEE off, DMA coalescing off"
        ),
        "{t}"
    );
    assert!(
        t.contains("warn: EEE was on") && t.contains("ethtool --set-eee"),
        "{t}"
    );
    assert!(!t.contains("after bring-up: they add"), "{t}");
    // Asked for, as Linux sets them: a warning with the setting that turns them off.
    let m = Soft82576::with_device(ModelConfig::default(), 0x1521);
    let sc = pollnic::lowlevel::selfcheck::selfcheck_on(
        m.io(),
        m.ident(),
        &cfg.clone().with_power_saving(PowerSaving::LINUX),
    )
    .unwrap();
    let w = crate::doctor::selfcheck::power_saving_warnings(&sc);
    assert!(
        w.iter().any(
            |w| w.starts_with("EEE on, DMA coalescing on after bring-up")
                && w.contains("with_power_saving(PowerSaving::OFF)")
        ),
        "{w:?}"
    );
    // The 82576 has neither: nothing to warn about.
    let m = Soft82576::default();
    let sc = pollnic::lowlevel::selfcheck::selfcheck_on(m.io(), m.ident(), &cfg).unwrap();
    assert!(crate::doctor::selfcheck::power_saving_warnings(&sc).is_empty());
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

#[test]
fn doctor_says_whether_the_cpu_offers_waitpkg() {
    let fs = checks::run(&healthy());
    let w = find(&fs, "cpu-wait", Status::Ok);
    assert!(
        w.detail
            .contains("this CPU offers WAITPKG (UMONITOR/UMWAIT): no"),
        "{}",
        w.detail
    );
    assert!(w.detail.contains("user wait: no"), "{}", w.detail);
}

/// A host with no IOMMU at all: no groups, the port on igb with none.
fn no_iommu_host() -> Facts {
    let mut f = healthy();
    f.iommu_groups = 0;
    f.iommu_units.clear();
    f.cmdline = "quiet".into();
    f.vfio_pci_loaded = false;
    f.vfio_container = None;
    let p = &mut f.ports[0];
    let d = p.device.as_mut().unwrap();
    d.iommu_group = None;
    d.driver = Some("igb".into());
    p.mode = None;
    p.vfio_node = None;
    f
}

#[test]
fn no_iommu_with_uio_pci_generic_is_a_warning_naming_the_three_ways() {
    let f = no_iommu_host();
    let i = checks::iommu(&f);
    assert_eq!(i.status, Status::Warn, "{i:#?}");
    for want in [
        "IOMMU off",
        "three ways, best first",
        "(a) best: turn the IOMMU on",
        "(b) VFIO no-IOMMU mode",
        "taints the kernel",
        "this kernel does not offer it (built without CONFIG_VFIO_NOIOMMU)",
        "(c) uio_pci_generic",
        "physical addresses and can reach all of RAM",
        "this kernel offers it (module in modules.dep)",
    ] {
        assert!(i.detail.contains(want), "{want:?} missing: {}", i.detail);
    }
    let fix = i.fix.as_deref().unwrap();
    assert!(
        fix.starts_with("(a) add `intel_iommu=on iommu=pt`"),
        "{fix}"
    );
    assert!(fix.contains("update-grub"), "{fix}");
    assert!(
        fix.ends_with(
            "; or (c) sudo pollnic bind --driver uio_pci_generic 0000:00:08.0, then run the tools \
             with --no-iommu"
        ),
        "{fix}"
    );
    assert!(
        !fix.contains("--no-iommu 0000"),
        "(b) is not offered: {fix}"
    );
    // The port: not bound, the uio command as its fix.
    let fs = checks::run(&f);
    let d = find(&fs, "port 0000:00:08.0", Status::Fail);
    assert!(
        d.fix
            .as_deref()
            .unwrap()
            .starts_with("sudo pollnic bind --driver uio_pci_generic 0000:00:08.0"),
        "{d:#?}"
    );
}

#[test]
fn no_iommu_and_no_route_is_a_failure() {
    let mut f = no_iommu_host();
    f.uio_pci_generic = Offer::Absent;
    let i = checks::iommu(&f);
    assert_eq!(i.status, Status::Fail);
    assert!(
        i.detail
            .contains("(c) uio_pci_generic (no IOMMU: the NIC is given physical addresses"),
        "{}",
        i.detail
    );
    assert!(i
        .detail
        .contains("this kernel does not offer it (not in modules.dep"));
    let fix = i.fix.unwrap();
    assert!(
        fix.starts_with("(a) ") && !fix.contains("(b)") && !fix.contains("(c)"),
        "{fix}"
    );
    // Unknown is not offered either, and says so.
    f.uio_pci_generic = Offer::Unknown;
    f.vfio_noiommu = Offer::Unknown;
    let i = checks::iommu(&f);
    assert_eq!(i.status, Status::Fail);
    assert_eq!(
        i.detail.matches("could not be determined").count(),
        2,
        "{}",
        i.detail
    );
    assert!(
        i.detail.contains("modprobe -n -v uio_pci_generic"),
        "{}",
        i.detail
    );
    assert!(
        i.detail.contains("ls /sys/module/vfio/parameters/"),
        "{}",
        i.detail
    );
}

#[test]
fn in_a_vm_the_iommu_fix_is_the_hypervisors() {
    let mut f = no_iommu_host();
    f.vm = Some("QEMU Standard PC (Q35 + ICH9, 2009)".into());
    let i = checks::iommu(&f);
    assert!(
        i.detail.contains(
            "this is a VM (QEMU Standard PC (Q35 + ICH9, 2009)), so it is the hypervisor's"
        ),
        "{}",
        i.detail
    );
    let fix = i.fix.unwrap();
    assert!(
        fix.starts_with("(a) give the VM a virtual IOMMU from the hypervisor"),
        "{fix}"
    );
    assert!(
        fix.contains("-device intel-iommu,intremap=on,caching-mode=on"),
        "{fix}"
    );
    assert!(!fix.contains("update-grub"), "{fix}");
    // Bare metal: GRUB, not QEMU.
    f.vm = None;
    let fix = checks::iommu(&f).fix.unwrap();
    assert!(
        fix.contains("update-grub") && !fix.contains("intel-iommu,"),
        "{fix}"
    );
}

#[test]
fn vfio_noiommu_offered_is_named_with_its_command() {
    let mut f = no_iommu_host();
    f.uio_pci_generic = Offer::Absent;
    f.vfio_noiommu = Offer::Available;
    let i = checks::iommu(&f);
    assert_eq!(i.status, Status::Warn);
    assert!(i.detail.contains("(b) VFIO no-IOMMU mode"));
    assert!(i
        .detail
        .contains("this kernel offers it (CONFIG_VFIO_NOIOMMU)"));
    let fix = i.fix.unwrap();
    assert!(
        fix.contains(
            "; or (b) sudo pollnic bind --no-iommu 0000:00:08.0, then run the tools with --no-iommu"
        ),
        "{fix}"
    );
    assert!(!fix.contains("(c)"), "{fix}");
    f.vfio_noiommu = Offer::Ready;
    assert!(checks::iommu(&f)
        .detail
        .contains("this kernel offers it, and it is on"));
}

#[test]
fn vfio_pci_unknown_is_not_claimed_loadable() {
    let mut f = healthy();
    f.vfio_pci_loaded = false;
    f.vfio_pci_available = Module::Unknown;
    let v = checks::vfio_pci(&f);
    assert_eq!(v.status, Status::Warn);
    assert!(v.detail.contains("could not be determined"), "{}", v.detail);
    assert!(
        !v.detail.contains("`pollnic bind` loads it"),
        "{}",
        v.detail
    );
    f.vfio_pci_available = Module::InTree;
    assert!(checks::vfio_pci(&f)
        .detail
        .contains("`pollnic bind` loads it"));
}

#[test]
fn a_port_on_uio_pci_generic_is_a_warning_and_needs_no_vfio() {
    let mut f = no_iommu_host();
    f.uio_pci_generic = Offer::Ready;
    f.ports[0].device.as_mut().unwrap().driver = Some("uio_pci_generic".into());
    f.ports[0].mode = Some(BindMode::Uio);
    let fs = checks::run(&f);
    assert!(!any_failed(&fs), "{fs:#?}");
    let w = find(&fs, "port 0000:00:08.0", Status::Warn);
    assert!(
        w.detail
            .contains("driver uio_pci_generic, uio (no-iommu): no IOMMU")
            && w.detail.contains("only with --no-iommu"),
        "{}",
        w.detail
    );
    find(&fs, "vfio-pci", Status::Ok);
    find(&fs, "/dev/vfio", Status::Ok);
    find(&fs, "iommu", Status::Warn);
}

#[test]
fn gathers_the_no_iommu_routes_and_the_vm_from_a_fake_tree() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let w = |p: &str, s: &str| {
        let p = root.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    };
    let roots = Roots {
        sysfs: pollnic::pci::Sysfs::new(root.join("sys")),
        proc: root.join("proc"),
        dev: root.join("dev"),
        modules: root.join("lib/modules"),
        boot: root.join("boot"),
    };
    // Nothing readable: unknown, bare metal.
    assert_eq!(vfio_noiommu(&roots), Offer::Unknown);
    assert_eq!(uio_pci_generic(&roots), Offer::Unknown);
    assert_eq!(detect_vm(&roots), None);

    w("proc/sys/kernel/osrelease", "6.1.0-28-amd64\n");
    // A release but no module tree for it: missing, not unknown.
    let no_tree = Module::NoTree {
        dir: root
            .join("lib/modules/6.1.0-28-amd64")
            .display()
            .to_string(),
    };
    assert_eq!(module_state(&roots, "vfio-pci"), no_tree);
    assert_eq!(vfio_pci_available(&roots), no_tree);
    assert_eq!(uio_pci_generic(&roots), Offer::NoModuleTree);
    assert_eq!(vfio_noiommu(&roots), Offer::NoModuleTree);
    w(
        "lib/modules/6.1.0-28-amd64/modules.dep",
        "kernel/drivers/uio/uio_pci_generic.ko.xz: kernel/drivers/uio/uio.ko.xz\n\
         kernel/drivers/vfio/pci/vfio-pci.ko.xz: kernel/drivers/vfio/vfio.ko.xz\n",
    );
    assert_eq!(uio_pci_generic(&roots), Offer::Available);
    assert_eq!(module_state(&roots, "vfio-pci"), Module::InTree);
    assert_eq!(module_state(&roots, "vfio_pci"), Module::InTree);
    // A dependency after the colon is not the module of the line.
    assert_eq!(module_state(&roots, "uio"), Module::NotInTree);
    assert_eq!(module_state(&roots, "igb_uio"), Module::NotInTree);
    w("sys/bus/pci/drivers/uio_pci_generic/bind", "");
    assert_eq!(uio_pci_generic(&roots), Offer::Ready);

    // vfio not loaded: the kernel config says.
    w(
        "boot/config-6.1.0-28-amd64",
        "CONFIG_VFIO=m\n# CONFIG_VFIO_NOIOMMU is not set\n",
    );
    assert_eq!(vfio_noiommu(&roots), Offer::Absent);
    w(
        "boot/config-6.1.0-28-amd64",
        "CONFIG_VFIO=m\nCONFIG_VFIO_NOIOMMU=y\n",
    );
    assert_eq!(vfio_noiommu(&roots), Offer::Available);
    // vfio loaded: its parameter says, whatever the config.
    w("sys/module/vfio/refcnt", "1\n");
    assert_eq!(vfio_noiommu(&roots), Offer::Absent);
    w(
        "sys/module/vfio/parameters/enable_unsafe_noiommu_mode",
        "N\n",
    );
    assert_eq!(vfio_noiommu(&roots), Offer::Available);
    w(
        "sys/module/vfio/parameters/enable_unsafe_noiommu_mode",
        "Y\n",
    );
    assert_eq!(vfio_noiommu(&roots), Offer::Ready);

    w(
        "proc/cpuinfo",
        "processor\t: 0\nflags\t\t: fpu vme sse2 hypervisor lahf_lm\n",
    );
    assert_eq!(
        detect_vm(&roots).as_deref(),
        Some("the CPU's hypervisor flag in /proc/cpuinfo")
    );
    w("sys/class/dmi/id/sys_vendor", "QEMU\n");
    w(
        "sys/class/dmi/id/product_name",
        "Standard PC (Q35 + ICH9, 2009)\n",
    );
    assert_eq!(
        detect_vm(&roots).as_deref(),
        Some("QEMU Standard PC (Q35 + ICH9, 2009)")
    );
    w("sys/class/dmi/id/sys_vendor", "Dell Inc.\n");
    w("sys/class/dmi/id/product_name", "PowerEdge R640\n");
    w(
        "proc/cpuinfo",
        "processor\t: 0\nflags\t\t: fpu vme sse2 lahf_lm\n",
    );
    assert_eq!(detect_vm(&roots), None);
}

/// Doctor on the recorded machine of issue 46 ([`crate::fixture`]): a VM
/// with no IOMMU, no VFIO or UIO module, and one virtio-net port on
/// virtio-pci carrying the default route, whose features lack
/// ACCESS_PLATFORM.
fn fixture_findings(edit: impl FnOnce(&Roots)) -> Vec<Finding> {
    let dir = tempfile::tempdir().unwrap();
    let roots = crate::fixture::vm_without_iommu(dir.path());
    edit(&roots);
    let facts = gather(
        &roots,
        &[crate::fixture::port()],
        &[],
        &DeviceConfig::default(),
    );
    checks::run(&facts)
}

const AREA: &str = "port 0000:00:03.0";

#[test]
fn on_the_recorded_vm_doctor_names_the_missing_access_platform_and_its_fix() {
    let fs = fixture_findings(|_| {});
    // The machine as recorded: a VM without an IOMMU, no route to offer.
    let i = find(&fs, "iommu", Status::Fail);
    assert!(
        i.detail.contains("this is a VM (the CPU's hypervisor flag"),
        "{}",
        i.detail
    );
    // The port's features: ACCESS_PLATFORM missing, said in words, with the fix.
    let missing: Vec<&Finding> = fs
        .iter()
        .filter(|f| f.area == AREA && f.detail.contains("does not offer VIRTIO_F_ACCESS_PLATFORM"))
        .collect();
    assert_eq!(missing.len(), 1, "{fs:#?}");
    let m = missing[0];
    assert_eq!(m.status, Status::Fail, "{m:#?}");
    for want in [
        "VIRTIO_F_ACCESS_PLATFORM (bit 33: the device's DMA goes through the IOMMU",
        "/sys/bus/pci/devices/0000:00:03.0/virtio*/features",
        "needs both a virtual IOMMU and this bit",
        "the no-IOMMU routes do not need it",
    ] {
        assert!(m.detail.contains(want), "{want:?} missing: {}", m.detail);
    }
    let fix = m.fix.as_deref().unwrap();
    for want in [
        "-device virtio-net-pci,disable-legacy=on,iommu_platform=on",
        "-device intel-iommu,intremap=on,caching-mode=on",
        "virtio-iommu-pci",
        "no no-IOMMU route is known to be offered by this kernel",
    ] {
        assert!(fix.contains(want), "{want:?} missing: {fix}");
    }
    // The driver finding advises no bind that would be refused (issue 46,
    // item 1): no IOMMU and no no-IOMMU route here, so no bind at all.
    let drv = fs
        .iter()
        .find(|f| f.area == AREA && f.detail.contains("not vfio-pci"))
        .unwrap_or_else(|| panic!("{fs:#?}"));
    let drv_fix = drv.fix.as_deref().unwrap();
    assert!(!drv_fix.contains("pollnic bind"), "{drv_fix}");
    assert!(drv_fix.starts_with("none yet: no way in"), "{drv_fix}");
    // VERSION_1 is there: not named as missing.
    assert!(
        !fs.iter()
            .any(|f| f.detail.contains("does not offer VIRTIO_F_VERSION_1")),
        "{fs:#?}"
    );
    // The optional ones it lacks, as information.
    let info = fs
        .iter()
        .find(|f| f.area == AREA && f.detail.contains("optional features absent"))
        .unwrap_or_else(|| panic!("{fs:#?}"));
    assert_eq!(info.status, Status::Ok);
    assert!(
        info.detail
            .starts_with("virtio features read from /sys/bus/pci/devices/0000:00:03.0/virtio*/features: VIRTIO_F_ACCESS_PLATFORM missing"),
        "{}",
        info.detail
    );
    for absent in [
        "VIRTIO_NET_F_MTU (bit 3",
        "VIRTIO_NET_F_STATUS (bit 16",
        "VIRTIO_NET_F_CTRL_VQ (bit 17",
        "VIRTIO_NET_F_CTRL_RX (bit 18",
        "VIRTIO_NET_F_MQ (bit 22",
        "VIRTIO_NET_F_HASH_REPORT (bit 57",
        "VIRTIO_NET_F_RSS (bit 60",
    ] {
        assert!(info.detail.contains(absent), "{absent:?}: {}", info.detail);
    }
    for present in ["VIRTIO_NET_F_MAC", "VIRTIO_F_EVENT_IDX"] {
        assert!(
            !info.detail.contains(present),
            "{present:?}: {}",
            info.detail
        );
    }
}

#[test]
fn on_the_recorded_vm_a_no_iommu_route_makes_it_a_warning_naming_the_route() {
    let fs = fixture_findings(|roots| {
        let dep = roots.modules.join("6.18.44-fc-v1147/modules.dep");
        std::fs::create_dir_all(dep.parent().unwrap()).unwrap();
        std::fs::write(
            dep,
            "kernel/drivers/uio/uio_pci_generic.ko: kernel/drivers/uio/uio.ko\n",
        )
        .unwrap();
    });
    let m = fs
        .iter()
        .find(|f| f.area == AREA && f.detail.contains("does not offer VIRTIO_F_ACCESS_PLATFORM"))
        .unwrap_or_else(|| panic!("{fs:#?}"));
    assert_eq!(m.status, Status::Warn, "{m:#?}");
    let fix = m.fix.as_deref().unwrap();
    assert!(
        fix.contains(
            "or the no-IOMMU route: `sudo pollnic bind --driver uio_pci_generic 0000:00:03.0`, \
             then run the tools with --no-iommu"
        ),
        "{fix}"
    );
    assert!(
        !fix.contains("--no-iommu 0000"),
        "(b) is not offered: {fix}"
    );
    // The driver finding advises the route that would succeed.
    let drv = fs
        .iter()
        .find(|f| f.area == AREA && f.detail.contains("not vfio-pci"))
        .unwrap_or_else(|| panic!("{fs:#?}"));
    assert_eq!(
        drv.fix.as_deref(),
        Some("sudo pollnic bind --driver uio_pci_generic 0000:00:03.0   # no IOMMU: see the iommu finding")
    );
}

#[test]
fn on_the_recorded_vm_behind_an_iommu_or_with_the_bit_or_off_virtio_pci() {
    let port = |roots: &Roots| roots.sysfs.device_dir(crate::fixture::port());
    // Behind an IOMMU (a group): a failure, the hypervisor's fix alone.
    let fs = fixture_findings(|roots| {
        let g = roots.sysfs.iommu_group_devices(3);
        std::fs::create_dir_all(&g).unwrap();
        std::os::unix::fs::symlink(
            "../../../kernel/iommu_groups/3",
            port(roots).join("iommu_group"),
        )
        .unwrap();
    });
    let m = fs
        .iter()
        .find(|f| f.area == AREA && f.detail.contains("does not offer VIRTIO_F_ACCESS_PLATFORM"))
        .unwrap_or_else(|| panic!("{fs:#?}"));
    assert_eq!(m.status, Status::Fail);
    assert!(m.detail.contains("bypasses the IOMMU"), "{}", m.detail);
    assert!(!m.fix.as_deref().unwrap().contains("no-IOMMU"), "{m:#?}");
    // Behind an IOMMU without the bit, vfio-pci would be refused: no bind advised.
    let drv = fs
        .iter()
        .find(|f| f.area == AREA && f.detail.contains("not vfio-pci"))
        .unwrap_or_else(|| panic!("{fs:#?}"));
    let drv_fix = drv.fix.as_deref().unwrap();
    assert!(
        drv_fix.starts_with("none yet: `pollnic bind` would refuse it (the device lacks VIRTIO_F_ACCESS_PLATFORM (bit 33")
            && drv_fix.ends_with("see the virtio features finding)"),
        "{drv:#?}"
    );

    // The bit offered (as behind a vIOMMU with iommu_platform=on): ok.
    let fs = fixture_findings(|roots| {
        let mut bits = crate::fixture::FEATURES.to_owned();
        bits.replace_range(33..34, "1");
        std::fs::write(port(roots).join("virtio2/features"), bits).unwrap();
    });
    assert!(
        !fs.iter()
            .any(|f| f.detail.contains("does not offer VIRTIO_F_")),
        "{fs:#?}"
    );
    assert!(
        fs.iter().any(|f| f.area == AREA
            && f.status == Status::Ok
            && f.detail.starts_with(
                "the virtio-net device offers VIRTIO_F_VERSION_1 and VIRTIO_F_ACCESS_PLATFORM"
            )),
        "{fs:#?}"
    );

    // A garbled file: a warning, never a guess.
    let fs = fixture_findings(|roots| {
        std::fs::write(port(roots).join("virtio2/features"), "1100\n").unwrap();
    });
    let w = fs
        .iter()
        .find(|f| f.area == AREA && f.detail.starts_with("virtio features could not be read"))
        .unwrap_or_else(|| panic!("{fs:#?}"));
    assert_eq!(w.status, Status::Warn);
    assert!(w.detail.contains("4 characters"), "{}", w.detail);
    assert!(!fs
        .iter()
        .any(|f| f.detail.contains("does not offer VIRTIO_F_")));

    // No virtio driver bound to virtio2: unknown, and said so.
    let fs = fixture_findings(|roots| {
        std::fs::remove_file(port(roots).join("virtio2/driver")).unwrap();
    });
    let w = fs
        .iter()
        .find(|f| f.area == AREA && f.detail.starts_with("virtio features unknown"))
        .unwrap_or_else(|| panic!("{fs:#?}"));
    assert_eq!(w.status, Status::Warn);
    assert!(!fs
        .iter()
        .any(|f| f.detail.contains("does not offer VIRTIO_F_")));

    // On vfio-pci: sysfs cannot tell, nothing is said about features.
    let fs = fixture_findings(|roots| {
        let link = port(roots).join("driver");
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink("../../../bus/pci/drivers/vfio-pci", link).unwrap();
    });
    assert!(
        !fs.iter()
            .any(|f| f.detail.contains("virtio features") || f.detail.contains("VIRTIO_F_")),
        "{fs:#?}"
    );
}

#[test]
fn on_the_recorded_vm_vfio_pci_is_missing_unless_the_kernel_has_it() {
    let vfio = |fs: &[Finding]| {
        fs.iter()
            .find(|f| f.area == "vfio-pci")
            .cloned()
            .unwrap_or_else(|| panic!("{fs:#?}"))
    };
    // As recorded: no /lib/modules at all, vfio-pci neither loaded nor
    // built in. Missing, said so, with what to do.
    let v = vfio(&fixture_findings(|_| {}));
    assert_eq!(v.status, Status::Fail, "{v:#?}");
    for want in [
        "vfio-pci is missing",
        "not built in (no /sys/module/vfio_pci)",
        "/lib/modules/6.18.44-fc-v1147 does not exist",
    ] {
        assert!(v.detail.contains(want), "{want:?} missing: {}", v.detail);
    }
    assert!(
        !v.detail.contains("could not be determined"),
        "{}",
        v.detail
    );
    // The no-IOMMU routes are missing for the same reason, and said so.
    let fs = fixture_findings(|_| {});
    let i = find(&fs, "iommu", Status::Fail);
    for want in [
        "(b) VFIO no-IOMMU mode",
        "(c) uio_pci_generic",
        "this kernel does not offer it (not built in, and no modules are installed for the \
         running kernel: /lib/modules/<release> is missing)",
    ] {
        assert!(i.detail.contains(want), "{want:?} missing: {}", i.detail);
    }
    assert!(
        !i.detail.contains("could not be determined"),
        "{}",
        i.detail
    );
    let fix = v.fix.as_deref().unwrap();
    for want in [
        "install the kernel modules package of the running kernel, release 6.18.44-fc-v1147",
        "Debian: linux-image-6.18.44-fc-v1147",
        "booted with `nomodule`",
        "or, as this VM has no IOMMU, the no-IOMMU route with uio_pci_generic",
        "see the iommu finding",
    ] {
        assert!(fix.contains(want), "{want:?} missing: {fix}");
    }

    // Built in (or loaded): /sys/module/vfio_pci, or the driver's directory.
    let v = vfio(&fixture_findings(|roots| {
        std::fs::create_dir_all(roots.sysfs.root.join("module/vfio_pci")).unwrap();
    }));
    assert_eq!(v.status, Status::Ok, "{v:#?}");
    assert!(v.detail.contains("/sys/module/vfio_pci"), "{}", v.detail);
    let v = vfio(&fixture_findings(|roots| {
        std::fs::create_dir_all(roots.sysfs.driver_dir("vfio-pci")).unwrap();
    }));
    assert_eq!(v.status, Status::Ok, "{v:#?}");

    // A module tree that has it: loadable, a warning; one without: missing.
    let tree = |dep: &'static str| {
        move |roots: &Roots| {
            let d = roots.modules.join("6.18.44-fc-v1147");
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("modules.dep"), dep).unwrap();
        }
    };
    let v = vfio(&fixture_findings(tree(
        "kernel/drivers/vfio/pci/vfio-pci.ko: kernel/drivers/vfio/vfio.ko\n",
    )));
    assert_eq!(v.status, Status::Warn, "{v:#?}");
    assert_eq!(v.fix.as_deref(), Some("sudo modprobe vfio-pci"));
    let v = vfio(&fixture_findings(tree(
        "kernel/drivers/uio/uio_pci_generic.ko: kernel/drivers/uio/uio.ko\n",
    )));
    assert_eq!(v.status, Status::Fail, "{v:#?}");
    assert!(v.detail.contains("not in modules.dep"), "{}", v.detail);
}
