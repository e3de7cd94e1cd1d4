//! Fault campaigns (issue 9, part 1) against the `tether` binary with real userspace OVS:
//! the ExternalNode VM bed of `externalnode_vm` (the sandbox namespace is the VM, `eth1`
//! taken over) plus two Pods and a collector on the same `br-int` for TrafficControls.
//!
//! - `vswitchd_kill9_campaign`: ovs-vswitchd `kill -9` + restart with a TC and the EN
//!   active → the flows equal the set from before, no-flood is back on the TC port, and the
//!   VM answers pings.
//! - `ovsdb_restart_campaign`: ovsdb-server `kill -9` + restart, then a TC change that
//!   needs OVSDB → exactly the expected ports (no duplicate row, none lost) and flows.
//! - `api_fault_campaign`: random API faults (cut streams, 410 as HTTP and as an ERROR
//!   event, 5xx, bare Status lines, garbage lines, delays, streams ended early, expired
//!   continue tokens) during random object changes → the final OVS state equals what the
//!   final objects imply: checked directly (mark flows per selected Pod, target ports) and
//!   against a fresh, fault-free start of tether from the same objects.
//! - `tether_kill9_campaign`: tether `kill -9` at random moments during churn → restart
//!   converges; a sampler asserts the VM never loses its addresses or default routes.
//!
//! Counts come from `TETHER_FAULTS` (unset: a smoke run; `ci`; `full` = the issue's
//! counts) and can be overridden one by one (`FAULTS_VSWITCHD_KILLS`, `FAULTS_OVSDB_RESTARTS`,
//! `FAULTS_API_FAULTS`, `FAULTS_TETHER_KILLS`); `FAULTS_SEED` fixes the randomness.
//! Each campaign prints one `faults <name>: …` result line (scripts/faults.sh collects them).
//! Recovery times are printed, never asserted (no timed asserts in tests).

#![allow(clippy::unwrap_used)]

mod apiserver;
mod common;
mod externalnode_vm;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use apiserver::{ApiServer, Fault, FaultAction, Options};
use common::{Netns, Sandbox, Tether, privileged, wait_for};
use externalnode_vm::*;

// ---------------------------------------------------------------------------------------
// Counts and randomness

struct Counts {
    vswitchd_kills: usize,
    ovsdb_restarts: usize,
    api_faults: usize,
    tether_kills: usize,
}

fn counts() -> Counts {
    let tier = std::env::var("TETHER_FAULTS").unwrap_or_default();
    let base = match tier.as_str() {
        "full" => Counts {
            vswitchd_kills: 50,
            ovsdb_restarts: 20,
            api_faults: 10_000,
            tether_kills: 100,
        },
        "ci" => Counts {
            vswitchd_kills: 6,
            ovsdb_restarts: 4,
            api_faults: 80,
            tether_kills: 8,
        },
        _ => Counts {
            vswitchd_kills: 2,
            ovsdb_restarts: 2,
            api_faults: 30,
            tether_kills: 3,
        },
    };
    let get = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    Counts {
        vswitchd_kills: get("FAULTS_VSWITCHD_KILLS", base.vswitchd_kills),
        ovsdb_restarts: get("FAULTS_OVSDB_RESTARTS", base.ovsdb_restarts),
        api_faults: get("FAULTS_API_FAULTS", base.api_faults),
        tether_kills: get("FAULTS_TETHER_KILLS", base.tether_kills),
    }
}

/// xorshift64*, seeded from `FAULTS_SEED` (printed, so a failing run can be replayed).
struct Rng(u64);

impl Rng {
    fn new(campaign: &str) -> Rng {
        let seed = std::env::var("FAULTS_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos()
                    .to_le_bytes()[0..8]
                    .iter()
                    .fold(0u64, |a, b| a << 8 | u64::from(*b))
                    | 1
            });
        eprintln!("faults {campaign}: FAULTS_SEED={seed}");
        Rng(seed)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % u64::try_from(n).unwrap()).unwrap()
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

/// Poll `f` every 50 ms until it is `Ok`; on timeout, fail with its last error. Both the
/// interval and the timeout stretch by the harness's patience (`common::wait_for`).
fn wait_ok<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Result<T, String>) -> T {
    let timeout = common::patience(timeout);
    let end = Instant::now() + timeout;
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) if Instant::now() > end => {
                panic!("timed out after {timeout:?} waiting for {what}: {e}")
            }
            Err(_) => std::thread::sleep(common::patience(Duration::from_millis(50))),
        }
    }
}

/// A campaign's result line, on a line of its own in stderr (libtest's "test … ok" lines
/// share stdout), where scripts/faults.sh picks it up.
fn result(line: String) {
    eprintln!("\n{line}");
}

fn millis(d: Duration) -> u128 {
    d.as_millis()
}

/// `p50/max` of recovery times, and how many took longer than `limit`.
/// The `p`-th percentile (nearest rank) of `times`; zero when empty.
fn percentile(times: &[Duration], p: usize) -> Duration {
    let mut t = times.to_vec();
    t.sort();
    match t.len() {
        0 => Duration::ZERO,
        n => t[((n * p).div_ceil(100)).clamp(1, n) - 1],
    }
}

fn summary(times: &[Duration], limit: Duration) -> String {
    if times.is_empty() {
        return "recover_p50=- recover_max=-".into();
    }
    format!(
        "recover_p50={}ms recover_max={}ms over_{}ms={}",
        millis(percentile(times, 50)),
        millis(percentile(times, 100)),
        millis(limit),
        times.iter().filter(|d| **d > limit).count()
    )
}

// ---------------------------------------------------------------------------------------
// The bed: the VM (EN) + Pods pa/pb + a collector with coll0/coll1, all on br-int

/// Port rows by name (count), Interface rows by name (count), ports listed on br-int.
type Rows = (BTreeMap<String, usize>, BTreeMap<String, usize>, usize);

struct Bed {
    sb: Sandbox,
    peer: Netns,
    _pods: Vec<Netns>,
    _coll: Netns,
    manifests: PathBuf,
    config: PathBuf,
}

impl Bed {
    fn new() -> Bed {
        let (sb, peer) = setup();
        let mut pods = Vec::new();
        for (name, n) in [("pa", 1u8), ("pb", 2)] {
            let ns = Netns::new(name);
            let port = format!("veth-{name}");
            ns.veth_to("eth0", sb.ns(), &port);
            let mac = format!("02:00:00:00:00:{n:02x}");
            ns.ip(&["link", "set", "eth0", "address", &mac]);
            ns.ip(&["addr", "add", &format!("203.0.113.{n}/24"), "dev", "eth0"]);
            sb.vsctl(&[
                "add-port",
                "br-int",
                &port,
                "--",
                "set",
                "Port",
                &port,
                &format!("external_ids:container-id=cid-{name}"),
                &format!("external_ids:pod-name={name}"),
                "external_ids:pod-namespace=ns1",
                &format!("external_ids:attached-mac=\"{mac}\""),
            ]);
            pods.push(ns);
        }
        let coll = Netns::new("coll");
        coll.veth_to("eth0", sb.ns(), "coll0");
        coll.veth_to("eth1", sb.ns(), "coll1");
        let manifests = sb.dir().join("manifests");
        std::fs::create_dir_all(&manifests).unwrap();
        let config = sb.path("tether.yaml");
        std::fs::write(&config, CONFIG).unwrap();
        Bed {
            sb,
            peer,
            _pods: pods,
            _coll: coll,
            manifests,
            config,
        }
    }

    fn write(&self, file: &str, text: &str) {
        write_atomic(&self.manifests, file, text);
    }

    fn args(&self, source: &[&str]) -> Vec<String> {
        let dir = self.sb.dir().to_str().unwrap().to_string();
        let mut v: Vec<String> = vec!["--config".into(), self.config.to_str().unwrap().into()];
        v.extend(source.iter().map(|s| (*s).to_string()));
        v.extend(
            [
                "--ovs-rundir",
                &dir,
                "--bridge",
                "br-int",
                "--datapath-type",
                common::datapath(),
                "--node-name",
                "vm1",
                "--state-socket",
                &format!("{dir}/tether.sock"),
            ]
            .map(String::from),
        );
        v
    }

    fn start(&self, source: &[&str], log: &str) -> Tether {
        let args = self.args(source);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Tether::start(self.sb.ns(), &args, &self.sb.path(log))
    }

    fn manifests_source(&self) -> Vec<String> {
        vec![
            "--manifests".into(),
            self.manifests.to_str().unwrap().into(),
        ]
    }

    fn try_ofport(&self, name: &str) -> Option<u32> {
        self.sb
            .try_vsctl(&["get", "Interface", name, "ofport"])
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// EN attached: the pair flows on the current ofports of `eth1` and `eth1~`.
    fn en_attached(&self) -> bool {
        match (self.try_ofport("eth1"), self.try_ofport("eth1~")) {
            (Some(h), Some(u)) => en_flows(&self.sb) == expected_en_flows(h, u),
            _ => false,
        }
    }

    /// All flows of br-int, canonical, or None while the switch does not answer.
    fn try_flows(&self) -> Option<Vec<String>> {
        self.sb.try_dump_flows("br-int", None).ok()
    }

    /// Whether `port` has NO_FLOOD in the OpenFlow 1.0 port description.
    fn no_flood(&self, port: &str) -> Option<bool> {
        let show = self
            .sb
            .try_ofctl(&["-O", "OpenFlow10", "show", "br-int"])
            .ok()?;
        let text: String = show
            .lines()
            .skip_while(|l| !l.contains(&format!("({port})")))
            .take(3)
            .collect();
        Some(text.contains("NO_FLOOD"))
    }

    /// Port and Interface rows by name with their counts (a duplicate shows as 2), and the
    /// bridge's port list: rows nobody references would show as a mismatch.
    fn rows(&self) -> Option<Rows> {
        let names = |table: &str| -> Option<BTreeMap<String, usize>> {
            let out = self
                .sb
                .try_vsctl(&["--format=json", "--columns=name", "list", table])
                .ok()?;
            let v: Value = serde_json::from_str(&out).ok()?;
            let mut m = BTreeMap::new();
            for row in v["data"].as_array()? {
                *m.entry(row[0].as_str()?.to_string()).or_insert(0) += 1;
            }
            Some(m)
        };
        let on_bridge = self
            .sb
            .try_vsctl(&["list-ports", "br-int"])
            .ok()?
            .lines()
            .count();
        Some((names("Port")?, names("Interface")?, on_bridge))
    }
}

fn write_atomic(dir: &Path, file: &str, text: &str) {
    let tmp = dir.join(format!(".{file}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(file)).unwrap();
}

/// Namespace ns1 and Pods pa/pb with a `sel` label each (`none` selects nothing).
fn pods_yaml(sel: &[(&str, &str)]) -> String {
    let mut y = String::from("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns1\n");
    for (p, s) in sel {
        y.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {p}\n  namespace: ns1\n  labels:\n    sel: {s}\nspec:\n  nodeName: vm1\n"
        ));
    }
    y
}

/// A mirror TC selecting Pods labelled `sel=<name>`, to a device.
fn tc_yaml(name: &str, direction: &str, target: &str) -> String {
    format!(
        "apiVersion: crd.antrea.io/v1alpha2\nkind: TrafficControl\nmetadata:\n  name: {name}\nspec:\n  appliedTo:\n    podSelector:\n      matchLabels:\n        sel: {name}\n  direction: {direction}\n  action: Mirror\n  targetPort:\n    device: {{name: {target}}}\n"
    )
}

fn tc_json(name: &str, direction: &str, target: &str) -> Value {
    json!({"apiVersion": "crd.antrea.io/v1alpha2", "kind": "TrafficControl",
           "metadata": {"name": name},
           "spec": {"appliedTo": {"podSelector": {"matchLabels": {"sel": name}}},
                    "direction": direction, "action": "Mirror",
                    "targetPort": {"device": {"name": target}}}})
}

fn pod_json(name: &str, sel: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "ns1", "labels": {"sel": sel}},
           "spec": {"nodeName": "vm1"}})
}

/// What the final objects imply: per Pod selected by an existing TC, its mark flows
/// (Ingress → `reg1=<ofport>`, Egress → `in_port=<ofport>`, Both → both), each sending to
/// that TC's target port; and exactly the target ports of existing TCs on the bridge.
struct Expect {
    /// (pod port, direction, target port) of every selected Pod.
    marks: Vec<(String, String, String)>,
    targets: Vec<String>,
}

fn expect(tcs: &BTreeMap<String, (String, String)>, pods: &BTreeMap<String, String>) -> Expect {
    let mut marks = Vec::new();
    for (pod, sel) in pods {
        if let Some((dir, target)) = tcs.get(sel) {
            marks.push((format!("veth-{pod}"), dir.clone(), target.clone()));
        }
    }
    let mut targets: Vec<String> = tcs.values().map(|(_, t)| t.clone()).collect();
    targets.sort();
    targets.dedup();
    Expect { marks, targets }
}

/// The bridge matches `e` (plus the EN's two ports and the Pods' ports).
fn matches(bed: &Bed, e: &Expect) -> Result<(), String> {
    let flows = bed.try_flows().ok_or("no flows")?;
    let marks: Vec<&String> = flows
        .iter()
        .filter(|l| l.contains("table=3, priority=200"))
        .collect();
    let mut want = 0;
    for (pod, dir, target) in &e.marks {
        let p = bed.try_ofport(pod).ok_or("pod ofport")?;
        let t = bed.try_ofport(target).ok_or(format!("no port {target}"))?;
        let keys: &[String] = match dir.as_str() {
            "Ingress" => &[format!("reg1={p:#x} ")],
            "Egress" => &[format!("in_port={p} ")],
            _ => &[format!("reg1={p:#x} "), format!("in_port={p} ")],
        };
        for k in keys {
            want += 1;
            let hit = marks
                .iter()
                .any(|l| l.contains(k.as_str()) && l.contains(&format!("set_field:{t:#x}->reg9,")));
            if !hit {
                return Err(format!(
                    "no mark flow {k}→{target} (ofport {t}): {marks:#?}; ofports {}",
                    bed.sb
                        .try_vsctl(&["--columns=name,ofport", "list", "Interface"])
                        .unwrap_or_default()
                        .replace('\n', " ")
                ));
            }
        }
    }
    if marks.len() != want {
        return Err(format!(
            "{} mark flows, want {want}: {marks:#?}",
            marks.len()
        ));
    }
    let (ports, ifaces, on_bridge) = bed.rows().ok_or("no rows")?;
    let mut want_ports: Vec<String> = ["br-int", "eth1", "eth1~", "veth-pa", "veth-pb"]
        .iter()
        .map(|s| (*s).to_string())
        .chain(e.targets.iter().cloned())
        .collect();
    want_ports.sort();
    let got: Vec<String> = ports.keys().cloned().collect();
    if got != want_ports || ports.values().any(|n| *n != 1) || ifaces != ports {
        return Err(format!(
            "ports {ports:?} interfaces {ifaces:?}, want {want_ports:?}"
        ));
    }
    if on_bridge + 1 != want_ports.len() {
        return Err(format!(
            "{on_bridge} ports on br-int, want {}",
            want_ports.len()
        ));
    }
    for t in &e.targets {
        if bed.no_flood(t) != Some(true) {
            return Err(format!("{t} lacks NO_FLOOD"));
        }
    }
    Ok(())
}

/// Take over `eth1` (EN from the manifests dir) and make the VM pingable from its peer.
fn attach(bed: &Bed) {
    wait_for(Duration::from_secs(20), "EN attached", || {
        bed.en_attached().then_some(())
    });
    neutralise_uplink(bed.sb.ns(), "eth1~", true);
    reachable(bed);
}

/// The VM answers its peer (three clean pings, v4 and v6) — after the first answer, since
/// the peer's neighbour entry may need a moment after a restart.
fn reachable(bed: &Bed) {
    for ip in ["192.0.2.10", "2001:db8:1::10"] {
        wait_for(Duration::from_secs(10), &format!("{ip} answers"), || {
            bed.peer
                .try_exec(&["ping", "-c", "1", "-W", "1", ip])
                .ok()
                .map(|_| ())
        });
        assert_clean_ping(&bed.peer, ip);
    }
}

// ---------------------------------------------------------------------------------------
// Campaign 1: ovs-vswitchd kill -9

#[test]
fn vswitchd_kill9_campaign() {
    if !privileged("vswitchd_kill9_campaign") {
        return;
    }
    let n = counts().vswitchd_kills;
    let bed = Bed::new();
    bed.write("pods.yaml", &pods_yaml(&[("pa", "m"), ("pb", "none")]));
    bed.write("tc.yaml", &tc_yaml("m", "Both", "coll0"));
    bed.write("en.yaml", EN_YAML);
    let src = bed.manifests_source();
    let src: Vec<&str> = src.iter().map(String::as_str).collect();
    let t = bed.start(&src, "tether.log");
    attach(&bed);
    let mut tcs = BTreeMap::new();
    tcs.insert("m".to_string(), ("Both".to_string(), "coll0".to_string()));
    let pods: BTreeMap<String, String> = [("pa", "m"), ("pb", "none")]
        .iter()
        .map(|(a, b)| ((*a).to_string(), (*b).to_string()))
        .collect();
    let e = expect(&tcs, &pods);
    wait_ok(Duration::from_secs(15), "TC programmed", || {
        matches(&bed, &e)
    });
    let before = bed.try_flows().unwrap();
    let mut times = Vec::new();
    for i in 0..n {
        bed.sb.kill9("ovs-vswitchd");
        let t0 = Instant::now();
        bed.sb.start_vswitchd();
        let took = wait_for(
            Duration::from_secs(30),
            &format!("kill {i}: flows and no-flood back"),
            || (bed.try_flows()? == before && bed.no_flood("coll0")?).then(|| t0.elapsed()),
        );
        times.push(took);
        assert!(bed.en_attached(), "kill {i}: EN flows");
        reachable(&bed);
        assert!(t.running(), "kill {i}: tether exited\n{}", t.log());
    }
    result(format!(
        "faults vswitchd-kill9: runs={n} converged={n} reachable={n} {}",
        summary(&times, Duration::from_secs(2))
    ));
}

// ---------------------------------------------------------------------------------------
// Campaign 2: ovsdb-server restart

#[test]
fn ovsdb_restart_campaign() {
    if !privileged("ovsdb_restart_campaign") {
        return;
    }
    let n = counts().ovsdb_restarts;
    let bed = Bed::new();
    let pods: BTreeMap<String, String> = [("pa", "m"), ("pb", "m")]
        .iter()
        .map(|(a, b)| ((*a).to_string(), (*b).to_string()))
        .collect();
    bed.write("pods.yaml", &pods_yaml(&[("pa", "m"), ("pb", "m")]));
    bed.write("tc.yaml", &tc_yaml("m", "Ingress", "coll0"));
    bed.write("en.yaml", EN_YAML);
    let src = bed.manifests_source();
    let src: Vec<&str> = src.iter().map(String::as_str).collect();
    let t = bed.start(&src, "tether.log");
    attach(&bed);
    let mut times = Vec::new();
    let mut db_times = Vec::new();
    for i in 0..n {
        bed.sb.kill9("ovsdb-server");
        bed.sb.start_ovsdb();
        // A change that needs OVSDB: the TC moves to the other collector port.
        let (dir, target) = if i % 2 == 0 {
            ("Egress", "coll1")
        } else {
            ("Ingress", "coll0")
        };
        let t0 = Instant::now();
        bed.write("tc.yaml", &tc_yaml("m", dir, target));
        let mut tcs = BTreeMap::new();
        tcs.insert("m".to_string(), (dir.to_string(), target.to_string()));
        let e = expect(&tcs, &pods);
        // tether's part: its transaction is in the restarted database. The rest (ofport,
        // flows) also waits for ovs-vswitchd's own reconnect, whose backoff (1 s doubling
        // to 8 s) grows when restarts come quickly.
        let in_db = wait_for(
            Duration::from_secs(30),
            &format!("restart {i}: Port {target} in the database"),
            || {
                let (ports, _, _) = bed.rows()?;
                ports.contains_key(target).then(|| t0.elapsed())
            },
        );
        db_times.push(in_db);
        let took = wait_ok(
            Duration::from_secs(30),
            &format!("restart {i}: ports and flows for {target}"),
            || matches(&bed, &e).map(|()| t0.elapsed()),
        );
        times.push(took);
        assert!(bed.en_attached(), "restart {i}: EN flows");
        assert!(t.running(), "restart {i}: tether exited\n{}", t.log());
    }
    reachable(&bed);
    result(format!(
        "faults ovsdb-restart: runs={n} converged={n} duplicate_rows=0 lost_rows=0 db_p50={}ms db_max={}ms {}",
        millis(percentile(&db_times, 50)),
        millis(percentile(&db_times, 100)),
        summary(&times, Duration::from_secs(2))
    ));
}

// ---------------------------------------------------------------------------------------
// Campaign 3: API faults during random changes

fn random_fault(rng: &mut Rng) -> (&'static str, Fault) {
    let after = rng.below(3);
    let (name, action, on_list) = match rng.below(10) {
        0 => (
            "delay",
            FaultAction::Delay(Duration::from_millis(50 + rng.below(400) as u64)),
            false,
        ),
        1 => ("status-500", FaultAction::Status(500), false),
        2 => ("status-503", FaultAction::Status(503), rng.below(2) == 0),
        3 => ("drop", FaultAction::Drop, rng.below(2) == 0),
        4 => ("http-410", FaultAction::HttpGone, false),
        5 => ("error-410", FaultAction::ErrorGone, false),
        6 => ("cut-mid-chunk", FaultAction::CutMidChunk { after }, false),
        7 => ("garbage-line", FaultAction::Garbage { after }, false),
        8 => (
            "status-line",
            FaultAction::StatusLine {
                after,
                code: *rng.pick(&[410, 500]),
            },
            false,
        ),
        _ => ("end-stream", FaultAction::EndStream { after }, false),
    };
    let f = if on_list {
        Fault::list(action)
    } else if matches!(
        action,
        FaultAction::Delay(_) | FaultAction::Drop | FaultAction::Status(_)
    ) {
        Fault::any(action)
    } else {
        Fault::watch(action)
    };
    (name, f)
}

#[test]
fn api_fault_campaign() {
    if !privileged("api_fault_campaign") {
        return;
    }
    let total = counts().api_faults;
    let mut rng = Rng::new("api-faults");
    let bed = Bed::new();
    let srv = ApiServer::start(Options {
        // A short history, so resumed watches meet 410 on their own too.
        history: 20,
        // Busy streams, so that faults "after N events" fire without waiting a minute.
        bookmark_every: Some(Duration::from_millis(200)),
        ..Options::default()
    });
    let api = common::relay::ApiInNetns::new(bed.sb.ns(), bed.sb.dir(), &srv.url(), None);
    let kubeconfig = &api.kubeconfig;
    let src = [
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--allow-plain-http",
    ];

    srv.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns1"}}));
    let mut pods: BTreeMap<String, String> = BTreeMap::new();
    for p in ["pa", "pb"] {
        srv.create(pod_json(p, "none"));
        pods.insert(p.into(), "none".into());
    }
    let mut tcs: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut t = bed.start(&src, "tether.log");
    t.wait_log("first full sync done", Duration::from_secs(20));

    let names = ["tc0", "tc1", "tc2"];
    let dirs = ["Ingress", "Egress", "Both"];
    let targets = ["coll0", "coll1"];
    let mut injected = 0usize;
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    let mut changes = 0usize;
    let started = Instant::now();
    while injected < total {
        let batch = (total - injected).min(1 + rng.below(6));
        for _ in 0..batch {
            let (k, f) = random_fault(&mut rng);
            *kinds.entry(k).or_insert(0) += 1;
            srv.inject(f);
        }
        injected += batch;
        for _ in 0..1 + rng.below(3) {
            changes += 1;
            match rng.below(3) {
                0 => {
                    let p = *rng.pick(&["pa", "pb"]);
                    let sel = *rng.pick(&["tc0", "tc1", "tc2", "none"]);
                    srv.update(pod_json(p, sel));
                    pods.insert(p.into(), sel.into());
                }
                1 if !tcs.is_empty() && rng.below(3) == 0 => {
                    let name = tcs.keys().nth(rng.below(tcs.len())).unwrap().clone();
                    srv.delete("trafficcontrols", &name);
                    tcs.remove(&name);
                }
                _ => {
                    let name = *rng.pick(&names);
                    let (d, tg) = (*rng.pick(&dirs), *rng.pick(&targets));
                    let obj = tc_json(name, d, tg);
                    if tcs.contains_key(name) {
                        srv.update(obj);
                    } else {
                        srv.create(obj);
                    }
                    tcs.insert(name.into(), (d.into(), tg.into()));
                }
            }
        }
        // Let tether consume the faults (each costs it a request and usually a backoff).
        let mut seen = (srv.pending_faults(), Instant::now());
        while srv.pending_faults() > 4 {
            std::thread::sleep(Duration::from_millis(20));
            let p = srv.pending_faults();
            if p != seen.0 {
                seen = (p, Instant::now());
            } else if seen.1.elapsed() > Duration::from_millis(1500) {
                // Only request-time faults left and every watch idle: an ERROR 410 on an
                // open stream makes that kind relist, which meets list faults too.
                srv.inject(Fault::watch(FaultAction::ErrorGone));
                *kinds.entry("error-410").or_insert(0) += 1;
                injected += 1;
                seen = (p + 1, Instant::now());
            }
        }
        std::thread::sleep(Duration::from_millis(rng.below(60) as u64));
        assert!(t.running(), "tether exited\n{}", t.log());
    }
    // Drain: every injected fault meets a request. Request-time faults wait for a new
    // request, which idle watches do not make: an extra ERROR 410 (counted) forces a relist.
    let mut nudges = 0usize;
    wait_ok(
        Duration::from_secs(180),
        "all faults consumed",
        || match srv.pending_faults() {
            0 => Ok(()),
            n => {
                std::thread::sleep(Duration::from_millis(1500));
                if srv.pending_faults() == n {
                    srv.inject(Fault::watch(FaultAction::ErrorGone));
                    nudges += 1;
                }
                Err(format!("{n} pending; requests: {:?}", last_requests(&srv)))
            }
        },
    );
    injected += nudges;
    let fault_secs = started.elapsed().as_secs();
    let e = expect(&tcs, &pods);
    let t0 = Instant::now();
    let conv = wait_ok(Duration::from_secs(90), "final state", || {
        matches_tc_only(&bed, &e).map(|()| t0.elapsed())
    });
    let faulted = stripped(&bed.try_flows().unwrap());
    let faulted_ports = bed.rows().unwrap();
    // The oracle: a fresh tether from the same objects, without faults.
    t.kill9();
    let t2 = bed.start(&src, "tether-fresh.log");
    t2.wait_log("first full sync done", Duration::from_secs(30));
    wait_for(
        Duration::from_secs(20),
        "fresh start equals the faulted end state",
        || (stripped(&bed.try_flows()?) == faulted && bed.rows()? == faulted_ports).then_some(()),
    );
    let requests = srv.requests().len();
    result(format!(
        "faults api: faults={injected} nudges={nudges} changes={changes} requests={requests} fault_phase={fault_secs}s converge={}ms final_state=equal fresh_start=equal kinds={kinds:?}",
        millis(conv)
    ));
}

fn last_requests(srv: &ApiServer) -> Vec<String> {
    let r = srv.requests();
    r[r.len().saturating_sub(8)..].to_vec()
}

/// `matches` without the EN (campaign 3 has no ExternalNode).
fn matches_tc_only(bed: &Bed, e: &Expect) -> Result<(), String> {
    let flows = bed.try_flows().ok_or("no flows")?;
    let marks: Vec<&String> = flows
        .iter()
        .filter(|l| l.contains("table=3, priority=200"))
        .collect();
    let mut want = 0;
    for (pod, dir, target) in &e.marks {
        let p = bed.try_ofport(pod).ok_or("pod ofport")?;
        let t = bed.try_ofport(target).ok_or(format!("no port {target}"))?;
        let keys: Vec<String> = match dir.as_str() {
            "Ingress" => vec![format!("reg1={p:#x} ")],
            "Egress" => vec![format!("in_port={p} ")],
            _ => vec![format!("reg1={p:#x} "), format!("in_port={p} ")],
        };
        for k in keys {
            want += 1;
            if !marks
                .iter()
                .any(|l| l.contains(&k) && l.contains(&format!("set_field:{t:#x}->reg9,")))
            {
                return Err(format!("no mark flow {k}→{target}: {marks:#?}"));
            }
        }
    }
    if marks.len() != want {
        return Err(format!(
            "{} mark flows, want {want}: {marks:#?}",
            marks.len()
        ));
    }
    let (ports, ifaces, on_bridge) = bed.rows().ok_or("no rows")?;
    let mut want_ports: Vec<String> = ["br-int", "veth-pa", "veth-pb"]
        .iter()
        .map(|s| (*s).to_string())
        .chain(e.targets.iter().cloned())
        .collect();
    want_ports.sort();
    let got: Vec<String> = ports.keys().cloned().collect();
    if got != want_ports || ports.values().any(|n| *n != 1) || ifaces != ports {
        return Err(format!(
            "ports {ports:?} interfaces {ifaces:?}, want {want_ports:?}"
        ));
    }
    if on_bridge + 1 != want_ports.len() {
        return Err(format!("{on_bridge} ports on br-int"));
    }
    Ok(())
}

/// Flows without their cookies (the cookie carries tether's round, new on each start).
fn stripped(flows: &[String]) -> Vec<String> {
    let mut v: Vec<String> = flows
        .iter()
        .map(|l| match l.split_once(", ") {
            Some((c, rest)) if c.starts_with("cookie=") => rest.to_string(),
            _ => l.clone(),
        })
        .collect();
    v.sort();
    v
}

// ---------------------------------------------------------------------------------------
// Campaign 4: tether kill -9 during churn

#[test]
fn tether_kill9_campaign() {
    if !privileged("tether_kill9_campaign") {
        return;
    }
    let n = counts().tether_kills;
    let mut rng = Rng::new("tether-kill9");
    let bed = Bed::new();
    let mut pods: BTreeMap<String, String> = [("pa", "m"), ("pb", "none")]
        .iter()
        .map(|(a, b)| ((*a).to_string(), (*b).to_string()))
        .collect();
    let mut tc = ("Both".to_string(), "coll0".to_string());
    let write_all = |pods: &BTreeMap<String, String>, tc: &(String, String)| {
        let p: Vec<(&str, &str)> = pods.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        bed.write("pods.yaml", &pods_yaml(&p));
        bed.write("tc.yaml", &tc_yaml("m", &tc.0, &tc.1));
    };
    write_all(&pods, &tc);
    bed.write("en.yaml", EN_YAML);
    let src = bed.manifests_source();
    let src: Vec<&str> = src.iter().map(String::as_str).collect();
    let t = bed.start(&src, "tether.log");
    attach(&bed);
    drop(t);

    // The sampler: the VM's addresses and routes, every 50 ms, for the whole campaign.
    let stop = Arc::new(AtomicBool::new(false));
    let samples = Arc::new(AtomicU64::new(0));
    let vm_name = bed.sb.ns().name().to_string();
    let sampler = {
        let (stop, samples) = (stop.clone(), samples.clone());
        std::thread::spawn(move || {
            let mut bad = Vec::new();
            let vm = VmProbe(vm_name);
            while !stop.load(Ordering::Relaxed) {
                if let Err(e) = vm.check() {
                    bad.push(e);
                }
                samples.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(common::patience(Duration::from_millis(50)));
            }
            bad
        })
    };
    let mut kill_after = Vec::new();
    for i in 0..n {
        let mut t = bed.start(&src, "tether.log");
        // Churn while it starts: the TC's direction/target and the Pods' labels change.
        let end = Instant::now() + Duration::from_millis(rng.below(1500) as u64);
        while Instant::now() < end {
            match rng.below(2) {
                0 => {
                    tc = (
                        (*rng.pick(&["Ingress", "Egress", "Both"])).to_string(),
                        (*rng.pick(&["coll0", "coll1"])).to_string(),
                    );
                }
                _ => {
                    let p = (*rng.pick(&["pa", "pb"])).to_string();
                    pods.insert(p, (*rng.pick(&["m", "none"])).to_string());
                }
            }
            write_all(&pods, &tc);
            std::thread::sleep(Duration::from_millis(rng.below(300) as u64));
        }
        kill_after.push(end);
        assert!(t.running(), "run {i}: tether exited\n{}", t.log());
        t.kill9();
    }
    // The last start: converges to what the final manifests imply.
    let t = bed.start(&src, "tether.log");
    let mut tcs = BTreeMap::new();
    tcs.insert("m".to_string(), tc.clone());
    let e = expect(&tcs, &pods);
    wait_ok(
        Duration::from_secs(30),
        "converged after the last kill",
        || {
            matches(&bed, &e)?;
            if bed.en_attached() {
                Ok(())
            } else {
                Err("EN not attached".into())
            }
        },
    );
    reachable(&bed);
    stop.store(true, Ordering::Relaxed);
    let bad = sampler.join().unwrap();
    let samples = samples.load(Ordering::Relaxed);
    assert!(
        bad.is_empty(),
        "the VM lost addresses or routes in {} of {samples} samples: {:?}",
        bad.len(),
        &bad[..bad.len().min(5)]
    );
    assert!(t.running());
    result(format!(
        "faults tether-kill9: kills={n} converged=1/1 final_state=expected vm_samples={samples} vm_lost=0"
    ));
}

/// The VM namespace by name, for the sampler thread (a `Netns` guard is not `Send`-shared).
struct VmProbe(String);

impl VmProbe {
    fn ip(&self, args: &[&str]) -> Result<String, String> {
        let out = std::process::Command::new("ip")
            .args(["-n", &self.0])
            .args(args)
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn check(&self) -> Result<(), String> {
        let addrs = self.ip(&["-j", "addr", "show"])?;
        for a in ["\"192.0.2.10\"", "\"2001:db8:1::10\""] {
            if !addrs.contains(a) {
                return Err(format!("address {a} missing"));
            }
        }
        let r4 = self.ip(&["-j", "route", "show", "default"])?;
        let r6 = self.ip(&["-j", "-6", "route", "show", "default"])?;
        if !r4.contains("\"192.0.2.1\"") || !r6.contains("\"2001:db8:1::1\"") {
            return Err(format!("default routes missing: {r4} {r6}"));
        }
        Ok(())
    }
}
