//! Benchmark group `trafficcontrol` (scripts/bench.sh), docs/design.md#benchmarks:
//! - cold start of the `tether` binary (release) with 1,000 TCs × 5,000 Pods (`type=dummy`
//!   ports) from a manifests dir, until the first full sync is done and every mark flow is
//!   on the switch; baseline: `ovs-ofctl --bundle add-flows` of the same flows;
//! - tether's peak RSS at that scale;
//! - both again with the static musl binary, when `scripts/build-static.sh` has built it
//!   (`tc_cold_start_static_…`, `tc_peak_rss_static_…`);
//! - a Pod label flip → flows committed, p50/p99 over 1,000 flips (in-process controller on
//!   the real switch); baseline: one `ovs-ofctl --bundle add-flows` of a flip's two flows;
//! - the cost of one Pod event at 100 vs 10,000 TCs (controller only, in-memory backends);
//! - at the Kubernetes default of 110 Pods per node, with one ExternalNode and 20 TCs
//!   (`tc_peak_rss_[static_]20tc_110pods_en`): peak RSS of the binary once the first full
//!   sync is done and the NIC taken over; baseline: the same binary on the same kind of VM
//!   with nothing to do (an empty manifests directory);
//! - soak (`tc_soak_rss_after_100000_flips`): the RSS of the in-process controller and
//!   flows backend on the real switch (110 Pods, 20 TCs) after 100,000 label flips;
//!   baseline: after the first 1,000 (a difference over ~1 MB is growth).

#![allow(clippy::unwrap_used)]

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/externalnode_vm/mod.rs"]
mod externalnode_vm;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tether::controller::Flows;
use tether::controller::interfaces::Interfaces;
use tether::controller::trafficcontrol::TcController;
use tether::controller::{Bridge, LiveBridge};
use tether::k8s::{Namespace, Pod, Resource, Stores, TrafficControl};
use tether::openflow::{Flow, OfError, OfFlows, OfFlowsConfig, Owner};
use tether::ovsdb::{OvsdbError, PortData, PortKind, PortSpec, Uuid};

const PODS: usize = 5000;
const TCS: usize = 1000;
const TARGETS: usize = 10;

fn pod_json(i: usize, app: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": format!("p{i}"), "namespace": "bench", "labels": {"app": format!("a{app}")}},
           "spec": {"nodeName": "vm1"}})
}

fn tc_json(j: usize) -> Value {
    json!({"apiVersion": "crd.antrea.io/v1alpha2", "kind": "TrafficControl",
           "metadata": {"name": format!("tc{j:05}"), "creationTimestamp": "2026-11-30T09:00:00Z"},
           "spec": {"appliedTo": {"podSelector": {"matchLabels": {"app": format!("a{j}")}}},
                    "direction": "Egress", "action": "Mirror",
                    "targetPort": {"ovsInternal": {"name": format!("tgt{}", j % TARGETS)}}}})
}

fn decode<T: Resource>(v: Value) -> T {
    T::from_wire(serde_json::from_value(v).unwrap())
}

fn mac(i: usize) -> String {
    format!(
        "02:00:00:{:02x}:{:02x}:{:02x}",
        (i >> 16) & 0xff,
        (i >> 8) & 0xff,
        i & 0xff
    )
}

fn pod_port(i: usize) -> PortSpec {
    PortSpec::new(&format!("p{i}"), PortKind::Other("dummy".into())).with_external_ids(
        BTreeMap::from([
            ("container-id".to_string(), format!("c{i}")),
            ("pod-name".to_string(), format!("p{i}")),
            ("pod-namespace".to_string(), "bench".to_string()),
            ("attached-mac".to_string(), mac(i)),
        ]),
    )
}

fn vm_hwm_mb(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// utime + stime of a process, in seconds (USER_HZ = 100).
fn cpu_seconds(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = s.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    ticks / 100.0
}

/// Mark flows on `bridge`; 0 while the switch is too busy to answer a dump within
/// ovs-ofctl's 10 s (it can be, committing 10,000 flows at 5,000 ports).
fn mark_flows(sb: &common::Sandbox, bridge: &str) -> usize {
    sb.try_ofctl(&[
        "-O",
        "OpenFlow15",
        "--no-stats",
        "dump-flows",
        bridge,
        "table=80,cookie=0x10000000000/0xff0000000000",
    ])
    .unwrap_or_default()
    .lines()
    .filter(|l| l.contains("priority=200"))
    .count()
}

/// Wait until ovs-vswitchd has stopped reconfiguring its bridges (its `bridge_reconfigure`
/// count unchanged for 3 s; at most a minute).
fn settle(sb: &common::Sandbox) {
    let count = || {
        sb.appctl(&["-t", "ovs-vswitchd", "coverage/show"])
            .lines()
            .find(|l| l.starts_with("bridge_reconfigure"))
            .and_then(|l| l.rsplit_once("total: "))
            .and_then(|(_, n)| n.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    let end = Instant::now() + Duration::from_secs(60);
    let mut last = count();
    while Instant::now() < end {
        std::thread::sleep(Duration::from_secs(3));
        let now = count();
        if now == last {
            return;
        }
        last = now;
    }
}

/// A sandbox as a node restarted at scale finds it: br-int with 5,000 Pod ports and the
/// TCs' 10 target ports (up), and the baselines' bridges; ovs-vswitchd settled.
fn node_at_scale() -> common::Sandbox {
    let sb = common::Sandbox::start_with(common::SandboxOpts { dummy: true });
    let br = sb.bridge_db("br-int");
    // Bridges for the baselines, made now: later, every reconfiguration of a switch with
    // 5,000 ports takes vswitchd seconds.
    sb.add_bridge("br-base");
    sb.add_bridge("br-flip");
    // The Pod ports and the TCs' 10 target ports, in one transaction: in OVS 3.1's
    // userspace datapath every later port added to a bridge of 5,000 ports costs vswitchd
    // 8-11 s of reconfiguration (measured here with `ovs-vsctl add-port`), which would
    // measure OVS, not tether. So this is the cold start of a node whose ports exist (a
    // restart, or targets made by the CNI/operator); port creation is measured separately.
    br.create_ports(&ports(PODS), true).unwrap();
    // Up, as a restarted node finds them: bringing a netdev up makes ovs-vswitchd
    // reconfigure the bridge, every one of its 5,000 ports (`bridge_reconfigure`,
    // `ofproto_update_port` in coverage/show: seconds of its time), which would measure
    // OVS, not tether. Then let it settle.
    sb.ns().sh(&(0..TARGETS)
        .map(|t| format!("ip link set tgt{t} up\n"))
        .collect::<String>());
    settle(&sb);
    sb
}

/// The cold start of `bin` on `sb` ([`node_at_scale`]); `tag` goes into the measure names
/// (`""` for the default build, `"static_"` for the static musl binary that ships).
fn cold_start(sb: &common::Sandbox, bin: &std::path::Path, tag: &str) {
    let dir = sb.dir().join("manifests");
    std::fs::create_dir_all(&dir).unwrap();
    let mut items =
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}})];
    items.extend((0..PODS).map(|i| pod_json(i, i % TCS)));
    items.extend((0..TCS).map(tc_json));
    std::fs::write(
        dir.join("all.json"),
        json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string(),
    )
    .unwrap();

    let d = sb.dir().to_str().unwrap().to_string();
    let args = [
        "--manifests",
        dir.to_str().unwrap(),
        "--ovs-rundir",
        &d,
        "--bridge",
        "br-int",
        "--datapath-type",
        "netdev",
        "--node-name",
        "vm1",
        "--state-socket",
        &format!("{d}/t.sock"),
        "--state-dir",
        &format!("{d}/state"),
    ];
    if std::env::var_os("BENCH_COVERAGE").is_some() {
        let before = sb.appctl(&["-t", "ovs-vswitchd", "coverage/show"]);
        eprintln!("vswitchd coverage before the cold start:\n{before}");
    }
    let vsw0 = cpu_seconds(sb.pid("ovs-vswitchd").unwrap());
    let t0 = Instant::now();
    let t = common::Tether::start_bin(bin, sb.ns(), &args, &sb.path("tether.log"));
    // Until every mark flow is on the switch (a TC whose target port OVS was slow to
    // number retries after its backoff: that counts). The end is seen in tether's log
    // (the flush's commit reply, read every 10 ms: no load on the switch) or, for flows
    // that come later, by dumping the switch every 500 ms (a dump of 10,000 flows costs
    // vswitchd real time: polling it hard would slow down what is measured). Either way
    // the dump must then hold every mark flow.
    let flushed = || t.log().contains("startup phase=flush_committed");
    let mut next_dump = t0 + Duration::from_millis(500);
    let mut seen_flush = false;
    let took = loop {
        std::thread::sleep(Duration::from_millis(10));
        let at = t0.elapsed();
        let just_flushed = !seen_flush && flushed();
        seen_flush |= just_flushed;
        let due = Instant::now() >= next_dump;
        if (just_flushed || due) && mark_flows(sb, "br-int") == PODS {
            break at;
        }
        if due {
            next_dump = Instant::now() + Duration::from_millis(500);
        }
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "mark flows never complete"
        );
    };
    t.wait_log("first full sync done", Duration::from_secs(60));
    // Diagnosis (stderr): each flow-table commit makes vswitchd re-translate every port.
    let coverage = sb.appctl(&["-t", "ovs-vswitchd", "coverage/show"]);
    if let Some(l) = coverage.lines().find(|l| l.starts_with("rev_flow_table")) {
        eprintln!("vswitchd flow-table commits during the cold start: {l}");
    }
    if std::env::var_os("BENCH_COVERAGE").is_some() {
        eprintln!("vswitchd coverage after the cold start:\n{coverage}");
    }
    // The daemon's own start-up milestones (`startup phase=<name> after=<ms>ms`).
    let phases: Vec<(String, f64)> = t
        .log()
        .lines()
        .filter_map(|l| {
            let rest = l.split_once("startup phase=")?.1;
            let (name, ms) = rest.split_once(" after=")?;
            Some((name.to_string(), ms.trim_end_matches("ms").parse().ok()?))
        })
        .collect();
    let rss = vm_hwm_mb(t.pid().unwrap());
    let cpu = cpu_seconds(t.pid().unwrap());
    let vsw = cpu_seconds(sb.pid("ovs-vswitchd").unwrap()) - vsw0;
    drop(t);

    // Baseline: the same mark flows (and the L2 flows) through ovs-ofctl on a fresh bridge.
    let mut text = String::new();
    for i in 0..PODS {
        text.push_str(&format!("cookie=0x1010000000001,table=80,priority=200,in_port={},actions=set_field:{}->reg9,set_field:0x400000/0xc00000->reg4,goto_table:90\n", i + 1, 6000 + i % TARGETS));
        text.push_str(&format!("cookie=0x1000000000001,table=70,priority=200,dl_dst={},actions=set_field:{}->reg1,set_field:0x200000/0x600000->reg0,goto_table:80\n", mac(i), i + 1));
    }
    let f = sb.path("base.flows");
    std::fs::write(&f, text).unwrap();
    let b0 = Instant::now();
    sb.ofctl(&[
        "-O",
        "OpenFlow15",
        "--bundle",
        "add-flows",
        "br-base",
        f.to_str().unwrap(),
    ]);
    let base = b0.elapsed();
    // The same flows by ovs-ofctl into the bridge that holds the 5,000 ports (emptied
    // first): what the switch needs for tether's one flush bundle, next to the flush.
    sb.ofctl(&["-O", "OpenFlow15", "del-flows", "br-int"]);
    std::thread::sleep(Duration::from_secs(3));
    let b1 = Instant::now();
    sb.ofctl(&[
        "-O",
        "OpenFlow15",
        "--bundle",
        "add-flows",
        "br-int",
        f.to_str().unwrap(),
    ]);
    let same_bridge = b1.elapsed().as_secs_f64() * 1e3;
    let ms = |name: &str| phases.iter().find(|(n, _)| n == name).map(|(_, ms)| *ms);
    if let (Some(a), Some(b)) = (ms("first_sync_done"), ms("flush_committed")) {
        println!(
            "bench tc_cold_start_{tag}flush_vs_ofctl_on_the_5000_port_bridge: tether={:.0}ms baseline={same_bridge:.0}ms ratio={:.2}",
            b - a,
            (b - a) / same_bridge
        );
    }
    println!(
        "bench tc_cold_start_{tag}{TCS}tc_{PODS}pods: tether={:.0}ms baseline={:.0}ms ratio={:.2}",
        took.as_secs_f64() * 1e3,
        base.as_secs_f64() * 1e3,
        took.as_secs_f64() / base.as_secs_f64()
    );
    // Where the cold start goes, each milestone against the whole baseline.
    for (name, ms) in &phases {
        println!(
            "bench tc_cold_start_{tag}phase_{name}: tether={ms:.0}ms baseline={:.0}ms ratio={:.2}",
            base.as_secs_f64() * 1e3,
            ms / (base.as_secs_f64() * 1e3)
        );
    }
    println!("bench tc_peak_rss_{tag}{TCS}tc_{PODS}pods: tether={rss:.1}MB");
    // CPU spent during the cold start: tether's, and ovs-vswitchd's serving it.
    println!(
        "bench tc_cold_start_{tag}cpu: tether={cpu:.2}s baseline={vsw:.2}s ratio={:.2}",
        cpu / vsw
    );
}

/// 5,000 Pods labelled `app=a<i % groups>` and `tcs` TCs, TC j selecting `app=a<j>`.
fn stores_at_scale(tcs: usize, groups: usize) -> Stores {
    stores_of(PODS, tcs, groups)
}

/// `pods` Pods labelled `app=a<i % groups>` and `tcs` TCs, TC j selecting `app=a<j>`.
fn stores_of(pods: usize, tcs: usize, groups: usize) -> Stores {
    let s = Stores::default();
    s.namespaces
        .apply(decode::<Namespace>(json!({"metadata": {"name": "bench"}})));
    for i in 0..pods {
        s.pods.apply(decode::<Pod>(pod_json(i, i % groups)));
    }
    for j in 0..tcs {
        s.traffic_controls
            .apply(decode::<TrafficControl>(tc_json(j)));
    }
    s
}

/// The target ports' netdevs, up: the controller brings an ovsInternal target up and
/// waits for its netdev, which lives in the sandbox's namespace (or nowhere, in memory),
/// not this process's.
fn target_links() -> tether::testing::FakeLinks {
    let links = tether::testing::FakeLinks::new();
    for t in 0..TARGETS {
        let mac = [2, 0, 0, 0, 0xee, u8::try_from(t).unwrap_or(0)];
        links.add_link(&format!("tgt{t}"), mac, 1500, true);
    }
    links
}

/// `pods` Pod ports and the TCs' target ports (tether's, made as a restart finds them).
fn ports(pods: usize) -> Vec<PortSpec> {
    let mut specs: Vec<PortSpec> = (0..pods).map(pod_port).collect();
    specs.extend((0..TARGETS).map(|t| {
        PortSpec::new(&format!("tgt{t}"), PortKind::Internal { mac: None }).with_external_ids(
            BTreeMap::from([("antrea-type".to_string(), "traffic-control".to_string())]),
        )
    }));
    specs
}

/// The TC controller in this process on `sb`'s br-int (real OVSDB and OpenFlow), every TC
/// of `stores` synced once.
fn synced_controller(sb: &common::Sandbox, stores: &Stores) -> TcController {
    let of =
        Arc::new(OfFlows::start(OfFlowsConfig::new(sb.mgmt("br-int"), "br-int", 100)).unwrap());
    of.wait_connected(Duration::from_secs(10)).unwrap();
    let c = TcController::new(
        stores.clone(),
        Arc::new(LiveBridge::new(sb.bridge_db("br-int"))),
        of,
        Arc::new(target_links()),
    );
    for tc in stores.traffic_controls.keys() {
        c.sync(&tc).unwrap();
    }
    c
}

/// Relabel Pod `i` to `app=a<to>` and sync the TCs the daemon's router picks, in its
/// order; each sync's time (ms).
fn flip(stores: &Stores, c: &TcController, i: usize, to: usize) -> Vec<(String, f64)> {
    use tether::controller::Key;
    use tether::controller::route::{Trigger, route, sync_order};
    let key = format!("bench/p{i}");
    let old = stores.pods.get(&key).unwrap();
    stores.pods.apply(decode::<Pod>(pod_json(i, to)));
    let new = stores.pods.get(&key).unwrap();
    let ev = tether::k8s::KubeEvent::Pod(tether::k8s::Change::Updated { old, new });
    let keys = route(Trigger::Kube(&ev), stores, &Default::default());
    sync_order(Trigger::Kube(&ev), stores, keys)
        .into_iter()
        .filter_map(|k| match k {
            Key::Tc(name) => Some(name),
            _ => None,
        })
        .map(|k| {
            let t = Instant::now();
            c.sync(&k).unwrap();
            (k, t.elapsed().as_secs_f64() * 1e3)
        })
        .collect()
}

/// `n` timed label flips, `gap` apart (after the untimed flip back); their times (ms).
fn timed_flips(stores: &Stores, c: &TcController, n: usize, gap: Duration) -> Vec<f64> {
    let mut lat = Vec::new();
    let t0 = Instant::now();
    for n in 0..n {
        let i = (n * 7) % PODS;
        let from = i % TCS;
        let to = (from + 1) % TCS;
        std::thread::sleep(gap);
        let t = Instant::now();
        let syncs = flip(stores, c, i, if n % 2 == 0 { to } else { from });
        lat.push(t.elapsed().as_secs_f64() * 1e3);
        if t.elapsed() > Duration::from_millis(20) {
            // When the slow ones happen and which sync took the time (stderr).
            eprintln!(
                "slow flip {n}: {:.1} ms at {:.3} s: {syncs:.1?}",
                t.elapsed().as_secs_f64() * 1e3,
                t0.elapsed().as_secs_f64()
            );
        }
        // Put it back for the next round (not timed).
        if n % 2 == 0 {
            flip(stores, c, i, from);
        }
    }
    lat
}

/// Nearest-rank percentile, `hundredths` = 50 for p50, 99 for p99.
fn pct(v: &mut [f64], hundredths: usize) -> f64 {
    v.sort_by(f64::total_cmp);
    let rank = (v.len() * hundredths).div_ceil(100).max(1);
    v[rank - 1]
}

fn label_flips(sb: &common::Sandbox) {
    // Diagnosis of the tail: `BENCH_STATS_INTERVAL=<ms>` sets ovs-vswitchd's
    // stats-update-interval (default 5,000 ms), the pass over every interface's
    // statistics that holds its main thread (and so a bundle's commit) at 5,000 ports.
    if let Ok(ms) = std::env::var("BENCH_STATS_INTERVAL") {
        sb.vsctl(&[
            "set",
            "Open_vSwitch",
            ".",
            &format!("other_config:stats-update-interval={ms}"),
        ]);
        settle(sb);
    }
    let stores = stores_at_scale(TCS, TCS);
    let c = synced_controller(sb, &stores);
    // Back to back (each timed flip right after the untimed one putting the last back),
    // then isolated: 50 ms apart, longer than ovs-vswitchd's ~25 ms rebuild after a commit
    // at 5,000 ports, which a flip arriving during it waits for.
    let mut lat = timed_flips(&stores, &c, 1000, Duration::ZERO);
    let mut isolated = timed_flips(&stores, &c, 400, Duration::from_millis(50));
    // Baseline: shelling out one bundle with the two flows a flip changes.
    let f = sb.path("flip.flows");
    std::fs::write(&f, "cookie=0x1,table=80,priority=200,in_port=1,actions=set_field:0x3->reg9,set_field:0x400000/0xc00000->reg4,goto_table:90\ncookie=0x1,table=80,priority=200,in_port=2,actions=set_field:0x3->reg9,set_field:0x400000/0xc00000->reg4,goto_table:90\n").unwrap();
    let mut base = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        sb.ofctl(&[
            "-O",
            "OpenFlow15",
            "--bundle",
            "add-flows",
            "br-flip",
            f.to_str().unwrap(),
        ]);
        base.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let (p50, p99) = (pct(&mut lat, 50), pct(&mut lat, 99));
    let (i50, i99) = (pct(&mut isolated, 50), pct(&mut isolated, 99));
    let (b50, b99) = (pct(&mut base, 50), pct(&mut base, 99));
    println!(
        "bench tc_label_flip_isolated_p50: tether={i50:.2}ms baseline={b50:.2}ms ratio={:.2}",
        i50 / b50
    );
    println!(
        "bench tc_label_flip_isolated_p99: tether={i99:.2}ms baseline={b99:.2}ms ratio={:.2}",
        i99 / b99
    );
    println!(
        "bench tc_label_flip_p50: tether={p50:.2}ms baseline={b50:.2}ms ratio={:.2}",
        p50 / b50
    );
    println!(
        "bench tc_label_flip_p99: tether={p99:.2}ms baseline={b99:.2}ms ratio={:.2}",
        p99 / b99
    );
}

/// In-memory backends: the controller's own cost, without OVS.
struct MemBridge(Arc<Interfaces>);

impl Bridge for MemBridge {
    fn interfaces(&self) -> Arc<Interfaces> {
        self.0.clone()
    }
    fn create_port(&self, _: &PortSpec) -> Result<Uuid, OvsdbError> {
        Ok(Uuid("00000000-0000-0000-0000-000000000000".into()))
    }
    fn ofport(&self, name: &str) -> Result<u32, OvsdbError> {
        Ok(u32::try_from(name.len()).unwrap_or(1) + 6000)
    }
    fn delete_ports(&self, _: &[Uuid]) -> Result<(), OvsdbError> {
        Ok(())
    }
    fn set_port_external_ids(
        &self,
        _: &str,
        _: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError> {
        Ok(())
    }
    fn set_interface_options(
        &self,
        _: &str,
        _: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError> {
        Ok(())
    }
    fn bridge_external_id(&self, _: &str) -> Result<Option<String>, OvsdbError> {
        Ok(None)
    }
    fn set_bridge_external_id(&self, _: &str, _: Option<&str>) -> Result<(), OvsdbError> {
        Ok(())
    }
}

struct NullFlows;

impl Flows for NullFlows {
    fn apply(&self, _: Owner, _: Vec<Flow>) -> Result<(), OfError> {
        Ok(())
    }
    fn remove(&self, _: Owner) -> Result<(), OfError> {
        Ok(())
    }
    fn set_no_flood(&self, _: u32, _: bool) -> Result<(), OfError> {
        Ok(())
    }
    fn delete_round(&self, _: u16) -> Result<(), OfError> {
        Ok(())
    }
}

/// Mean cost of one Pod label event. The Pods only ever carry labels 0..100, so every
/// event touches exactly two TCs at either scale; the other 9,900 TCs select nothing here
/// and must cost nothing.
fn event_cost(tcs: usize) -> f64 {
    const GROUPS: usize = 100;
    let stores = stores_at_scale(tcs, GROUPS);
    let ports: Vec<PortData> = (0..PODS)
        .map(|i| {
            let s = pod_port(i);
            PortData {
                uuid: Uuid(format!("00000000-0000-0000-0000-{i:012}")),
                name: s.name.clone(),
                external_ids: s.external_ids,
                if_uuid: None,
                if_name: s.name,
                if_type: "dummy".into(),
                ofport: i64::try_from(i).unwrap() + 1,
                error: None,
                options: BTreeMap::new(),
                mac: None,
                mac_in_use: None,
                mtu: None,
                ifindex: None,
            }
        })
        .collect();
    let c = TcController::new(
        stores.clone(),
        Arc::new(MemBridge(Arc::new(Interfaces::new(ports)))),
        Arc::new(NullFlows),
        Arc::new(target_links()),
    );
    let n = 1000;
    let t = Instant::now();
    for k in 0..n {
        let i = (k * 13) % PODS;
        flip(&stores, &c, i, (i % GROUPS + 1 + k % 2) % GROUPS);
    }
    t.elapsed().as_secs_f64() * 1e3 / n as f64
}

/// The RSS now, of this process.
fn self_rss_mb() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

const SMALL_PODS: usize = 110;
const SMALL_TCS: usize = 20;

/// Peak RSS of `bin` run on a fresh VM bed, with `full` = one ExternalNode, 110 Pods
/// (dummy ports made beforehand, as a CNI would) and 20 TCs in the manifests directory,
/// or nothing (the baseline).
fn small_scale_rss(bin: &std::path::Path, full: bool) -> f64 {
    let bed = externalnode_vm::Bed::new_with(common::SandboxOpts { dummy: true });
    bed.sb
        .bridge_db("br-int")
        .create_ports(&(0..SMALL_PODS).map(pod_port).collect::<Vec<_>>(), true)
        .unwrap();
    if full {
        let mut items =
            vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}})];
        items.extend((0..SMALL_PODS).map(|i| pod_json(i, i % SMALL_TCS)));
        items.extend((0..SMALL_TCS).map(tc_json));
        externalnode_vm::put(
            &bed.manifests,
            "all.json",
            &json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string(),
        );
        externalnode_vm::put(&bed.manifests, "en.yaml", externalnode_vm::EN_YAML);
    }
    let t = bed.start_bin(bin, "netdev");
    t.wait_log("first full sync done", Duration::from_secs(60));
    if full {
        bed.wait_port("eth1~", Duration::from_secs(30));
        common::wait_for(Duration::from_secs(30), "every mark flow", || {
            (mark_flows(&bed.sb, "br-int") == SMALL_PODS).then_some(())
        });
    }
    // A little steady state after start-up (status probes, a resync) before reading.
    std::thread::sleep(Duration::from_secs(2));
    vm_hwm_mb(t.pid().unwrap())
}

fn small_scale(bin: &std::path::Path, tag: &str) {
    let base = small_scale_rss(bin, false);
    let rss = small_scale_rss(bin, true);
    println!(
        "bench tc_peak_rss_{tag}{SMALL_TCS}tc_{SMALL_PODS}pods_en: tether={rss:.1}MB baseline={base:.1}MB ratio={:.2}",
        rss / base
    );
}

/// RSS after many label flips through the controller and the real flows backend: what
/// stays behind per flip (stores, flow set, interface store, queues) shows as growth.
fn soak() {
    let flips: usize = std::env::var("BENCH_SOAK_FLIPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let sb = common::Sandbox::start_with(common::SandboxOpts { dummy: true });
    sb.bridge_db("br-int")
        .create_ports(&ports(SMALL_PODS), true)
        .unwrap();
    let stores = stores_of(SMALL_PODS, SMALL_TCS, SMALL_TCS);
    let c = synced_controller(&sb, &stores);
    let mut after_1k = 0.0;
    for n in 0..flips {
        let i = (n / 2 * 7) % SMALL_PODS;
        let home = i % SMALL_TCS;
        let to = if n % 2 == 0 {
            (home + 1) % SMALL_TCS
        } else {
            home
        };
        flip(&stores, &c, i, to);
        if n + 1 == 1000 {
            after_1k = self_rss_mb();
        }
    }
    let after = self_rss_mb();
    println!(
        "bench tc_soak_rss_after_{flips}_flips: tether={after:.1}MB baseline={after_1k:.1}MB ratio={:.2}",
        after / after_1k
    );
}

fn main() {
    assert!(
        common::privileged("bench_trafficcontrol"),
        "bench_trafficcontrol needs root"
    );
    // The daemon's allocator settings, for the measures taken in this process.
    tether::sys::limit_malloc_arenas();
    // `TC_BENCH=event|cold|flip|small|soak` runs only that part (for profiling); default:
    // all.
    let part = std::env::var("TC_BENCH").unwrap_or_default();
    let wants = |p: &str| part.is_empty() || part == p;
    if wants("cold") {
        cold_start(&node_at_scale(), &common::tether::binary(), "");
    }
    if wants("flip") {
        label_flips(&node_at_scale());
    }
    // The binary that ships is the static musl build (scripts/build-static.sh): its
    // allocator, not glibc's per-thread arenas, decides its RSS.
    let stat = common::tether::binary()
        .parent()
        .and_then(std::path::Path::parent)
        .map(|t| t.join("x86_64-unknown-linux-musl/release/tether"))
        .filter(|p| p.exists());
    if stat.is_none() && (wants("cold") || wants("small")) {
        eprintln!("static binary not built (scripts/build-static.sh): its measures are skipped");
    }
    if let (true, Some(bin)) = (wants("cold"), &stat) {
        cold_start(&node_at_scale(), bin, "static_");
    }
    if wants("small") {
        small_scale(&common::tether::binary(), "");
        if let Some(bin) = &stat {
            small_scale(bin, "static_");
        }
    }
    if wants("soak") {
        soak();
    }
    if !wants("event") {
        return;
    }
    let small = event_cost(100);
    let large = event_cost(10_000);
    println!(
        "bench tc_pod_event_cost_10000tc_vs_100tc: tether={large:.3}ms baseline={small:.3}ms ratio={:.2}",
        large / small
    );
}
