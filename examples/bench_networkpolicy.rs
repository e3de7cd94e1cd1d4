//! Benchmark group `networkpolicy` (scripts/bench.sh), docs/design.md#benchmarks: the
//! `tether` binary (release) enforcing Antrea-native NetworkPolicy for a VM, driven by the
//! in-repo test API server as the antrea-controller's controlplane API, on a real
//! ovs-vswitchd (userspace datapath), in the bed of the e2e tests
//! (`tests/externalnode_daemon/networkpolicy.rs`).
//!
//! - `np_realize_one_rule_p50`/`_p99`: one policy with one rule (ingress Drop TCP 5201 from
//!   an ipBlock) added → its flows committed, over 30 add/delete cycles;
//! - `np_realize_one_rule_with_100_policies_p50`/`_p99`: the same with 100 other policies
//!   installed and reported (one rule each, distinct priorities and ipBlocks; the measured
//!   one goes in the middle of their order). Goal ratio ≤ 1.0;
//! - `np_addressgroup_10k_realize`: an AddressGroup of 10,000 members and one policy whose
//!   ingress rule names it, added together → every flow committed; median of 3. The
//!   members' addresses are IPv6, from 2001:db8:100::/64 (documentation space; they are
//!   only flow matches, never on the wire; the IPv4 documentation ranges hold too few).
//!   Goal ratio ≤ 1.0;
//! - `np_addressgroup_10k_rss_growth`: tether's VmRSS once that is realized (1 s later)
//!   minus its VmRSS before any policy arrived, which is the baseline. Goal: growth ≤ 10 MB
//!   (≤ 1 KB per member);
//! - `np_addressgroup_patch_p99`: a one-member patch of that group (adding a member, then
//!   removing it, alternately) → its one flow committed, over 30 patches;
//! - `np_throughput_100_rules`: iperf3 (TCP, 5 s) from the peer to the VM through the pair
//!   with the 100 policies (none matches the traffic) and one Allow below them that does;
//!   baseline: NetworkPolicy on, no policy applied (the VM taken out of the policies'
//!   AppliedToGroup: br-int holds the base policy flows only, as with no policy). 4 runs
//!   each, alternating (the machine's load drifts); each side's median. Goal ratio ≥ 0.9.
//!
//! When flows are committed: for one rule, from tether's state socket
//! (`tether::status::fetch`), polled back to back from just before the change until the
//! policy controller's `syncs` has grown (it counts a sync once its one bundle is
//! committed) and its flow count is the expected one. At 10,000 members one poll costs
//! ~15 ms (it reads every policy flow's counters from the switch), more than a patch: there
//! an `ovs-ofctl monitor` of br-int reads the commit on the switch (its first update of a
//! member's flow; the bundle is atomic), and the state socket confirms it afterwards.
//!
//! Latency baselines: the flows tether added (`dump-flows` of its NetworkPolicy flows
//! after the change minus before) put on a scratch bridge `br-base` of the same
//! ovs-vswitchd, which holds what br-int held before, by one `ovs-ofctl -O OpenFlow15
//! --bundle add-flows`, timed as a process (start-up included, ~15 ms here), deleted
//! between samples; with a flow monitor on br-base where tether's measure has one.

#![allow(clippy::unwrap_used)]

#[path = "../tests/apiserver/mod.rs"]
mod apiserver;
#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/externalnode_vm/mod.rs"]
mod externalnode_vm;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tether::openflow::Category;
use tether::openflow::flow::cookie;
use tether::status::policy::NpStatus;

use apiserver::controlplane::{ADDRESS, APPLIED_TO, POLICIES};
use apiserver::cp_fixtures::{ee_member, ip};
use common::{Netns, Sandbox, Tether, privileged, wait_for};

/// The span key of this VM: the agent config's `externalNodeNamespace` and the EN's name.
const NODE: &str = "default/vm1";
const ATG: &str = "atg-vm1";
const VM4: &str = "192.0.2.10";
const PEER4: &str = "192.0.2.1";
/// Set in the child that runs the measures ([`main`]).
const CHILD: &str = "BENCH_NP_CHILD";
const SAMPLES: usize = 30;
const OTHERS: usize = 100;
const MEMBERS: usize = 10_000;
const GROUP_SAMPLES: usize = 3;
const IPERF_SECS: &str = "5";
/// Throughput runs with the policies, and as many without.
const THROUGHPUT_ROUNDS: usize = 4;
/// What the 10,000 members' addresses start with ([`member`]).
const MEMBER_PREFIX: &str = "ipv6_src=2001:db8:100::";
/// The member the patches add and remove (not one of the 10,000).
const EXTRA: &str = "2001:db8:100::ffff";

/// A controlplane NetworkPolicy applied to this VM (ATG), as an Antrea-native policy in
/// the application tier.
fn np(uid: &str, priority: f64, rules: Value) -> String {
    json!({
        "kind": "NetworkPolicy", "apiVersion": "controlplane.antrea.io/v1beta2",
        "metadata": {"name": uid, "uid": uid, "generation": 1},
        "rules": rules, "appliedToGroups": [ATG], "priority": priority, "tierPriority": 250,
        "sourceRef": {"type": "AntreaNetworkPolicy", "namespace": "vm-ns", "name": uid, "uid": uid},
    })
    .to_string()
}

fn ip_block(cidr: &str) -> Value {
    let (a, p) = cidr.split_once('/').unwrap();
    json!({"cidr": {"ip": ip(a), "prefixLength": p.parse::<u32>().unwrap()}})
}

/// One ingress rule on TCP 5201.
fn rule(peer: Value, action: &str) -> Value {
    json!([{"direction": "In", "from": peer, "to": {},
            "services": [{"protocol": "TCP", "port": 5201}],
            "action": action, "priority": 0, "enableLogging": false,
            "name": format!("in-{}-0", action.to_lowercase())}])
}

fn drop_from(cidr: &str) -> Value {
    rule(json!({"ipBlocks": [ip_block(cidr)]}), "Drop")
}

/// Member `i` of the big AddressGroup: an ExternalEntity with one IPv6 address.
fn member(i: usize) -> String {
    ee_member(
        "vm-ns",
        &format!("ee-{i}"),
        &[&format!("2001:db8:100::{:x}", i + 1)],
    )
}

/// Nearest-rank percentile, `hundredths` = 50 for p50, 99 for p99.
fn pct(v: &mut [f64], hundredths: usize) -> f64 {
    v.sort_by(f64::total_cmp);
    let rank = (v.len() * hundredths).div_ceil(100).max(1);
    v[rank - 1]
}

/// One contract line, `bench <name>: tether=<n><unit> baseline=<n><unit> ratio=<t/b>`.
fn line(name: &str, tether: f64, baseline: f64, unit: &str) {
    println!(
        "bench {name}: tether={tether:.2}{unit} baseline={baseline:.2}{unit} ratio={:.2}",
        tether / baseline
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn rss_mb(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: f64 = s
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    kb / 1024.0
}

/// The VM attached by `tether run` watching the test API server and its controlplane,
/// the VM in the AppliedToGroup, an iperf3 server on the VM, and the scratch bridge.
struct Bed {
    sb: Sandbox,
    peer: Netns,
    srv: apiserver::ApiServer,
    _api: common::relay::ApiInNetns,
    tether: Option<Tether>,
    iperf: Child,
    sock: PathBuf,
}

impl Drop for Bed {
    // tether and iperf3 first, then (field order) the sandbox with its namespace, so the
    // relays' connections end before the API server waits for its streams.
    fn drop(&mut self) {
        drop(self.tether.take());
        let _ = self.iperf.kill();
        let _ = self.iperf.wait();
    }
}

impl Bed {
    fn new() -> Bed {
        let (sb, peer) = externalnode_vm::setup();
        let srv = apiserver::ApiServer::start(apiserver::Options::default());
        let api = common::relay::ApiInNetns::new(sb.ns(), sb.dir(), &srv.url(), None);
        let k = api.kubeconfig.to_str().unwrap().to_string();
        let config = sb.path("tether.yaml");
        std::fs::write(&config, externalnode_vm::CONFIG).unwrap();
        let dir = sb.dir().to_str().unwrap().to_string();
        let sock = sb.path("tether.sock");
        let args = [
            "--config",
            config.to_str().unwrap(),
            "--kubeconfig",
            &k,
            "--antrea-kubeconfig",
            &k,
            "--allow-plain-http",
            "--ovs-rundir",
            &dir,
            "--bridge",
            "br-int",
            "--datapath-type",
            common::datapath(),
            "--node-name",
            "vm1",
            "--state-socket",
            sock.to_str().unwrap(),
        ];
        let tether = Tether::start(sb.ns(), &args, &sb.path("tether.log"));
        srv.create(
            json!({"apiVersion": "crd.antrea.io/v1alpha1", "kind": "ExternalNode",
            "metadata": {"namespace": "default", "name": "vm1"},
            "spec": {"interfaces": [{"ips": ["192.0.2.10", "2001:db8:1::10"]}]}}),
        );
        wait_for(Duration::from_secs(30), "the takeover", || {
            let s = tether::status::fetch(&sock).ok()?;
            let np = s.network_policy?;
            (s.external_node.step == "attached" && np.synced && np.ports.is_some()).then_some(())
        });
        externalnode_vm::neutralise_uplink(sb.ns(), "eth1~", true);
        let iperf = sb
            .ns()
            .command(&["iperf3", "-s", "-p", "5201"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        sb.add_bridge("br-base");
        let bed = Bed {
            sb,
            peer,
            srv,
            _api: api,
            tether: Some(tether),
            iperf,
            sock,
        };
        bed.srv.cp_add_group(
            APPLIED_TO,
            ATG,
            &[ee_member("default", "vm1", &[])],
            &[NODE],
        );
        // The group alone changes no flow (no sync to wait for): a policy applied through
        // it, realized and removed, shows it is in.
        let flows = bed.np().flows;
        bed.srv
            .cp_add_policy(&np("np-warmup", 1.0, drop_from("198.51.100.0/24")), &[NODE]);
        bed.wait_np("the first policy", |np| np.flows > flows);
        bed.srv.cp_delete(POLICIES, "np-warmup");
        bed.wait_np("the first policy gone", |np| np.flows == flows);
        bed
    }

    fn np(&self) -> NpStatus {
        tether::status::fetch(&self.sock)
            .unwrap()
            .network_policy
            .expect("NetworkPolicy on")
    }

    /// Poll the state socket back to back until `done`; the time it first held.
    fn wait_np(&self, what: &str, done: impl Fn(&NpStatus) -> bool) -> (Instant, NpStatus) {
        let end = Instant::now() + common::patience(Duration::from_secs(60));
        loop {
            let np = self.np();
            if done(&np) {
                return (Instant::now(), np);
            }
            assert!(Instant::now() < end, "{what}: not within 60 s: {np:?}");
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// tether's NetworkPolicy flows on br-int as `ovs-ofctl dump-flows` prints them.
    fn np_flows(&self) -> BTreeSet<String> {
        let round = tether::status::fetch(&self.sock).unwrap().round;
        let c = cookie(round, Category::NETWORK_POLICY, 0);
        let filter = format!("cookie={c:#x}/0xffffff0000000000");
        self.sb
            .dump_flows("br-int", Some(&filter))
            .into_iter()
            .collect()
    }

    fn pid(&self) -> u32 {
        self.tether.as_ref().and_then(Tether::pid).unwrap()
    }

    /// Mbit/s of a 5 s iperf3 TCP run from the peer to the VM.
    fn iperf(&self) -> f64 {
        let out = self.peer.exec(&[
            "iperf3", "-c", VM4, "-p", "5201", "-B", PEER4, "-t", IPERF_SECS, "-J",
        ]);
        let v: Value = serde_json::from_str(&out).unwrap();
        v["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap_or_else(|| panic!("iperf3: {out}"))
            / 1e6
    }

    /// `ovs-ofctl -O OpenFlow15 <args> -` with `lines` on its stdin.
    fn ofctl_stdin(&self, args: &[&str], lines: &[String]) {
        std::fs::write(self.sb.path("stdin.flows"), lines.join("\n") + "\n").unwrap();
        let mut argv = vec!["-O", "OpenFlow15"];
        argv.extend_from_slice(args);
        argv.push("-");
        let out = std::process::Command::new("ovs-ofctl")
            .env("OVS_RUNDIR", self.sb.dir())
            .args(&argv)
            .stdin(std::fs::File::open(self.sb.path("stdin.flows")).unwrap())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "ovs-ofctl {argv:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// br-base holds `held`; then `samples` times: `--bundle add-flows` of `added` (timed),
    /// their strict delete (untimed). Milliseconds. `watch`: with a flow monitor on br-base,
    /// as tether's measure has on br-int (the switch sends it every change).
    fn baseline(
        &self,
        held: &BTreeSet<String>,
        added: &[String],
        samples: usize,
        watch: bool,
    ) -> Vec<f64> {
        self.sb.ofctl(&["-O", "OpenFlow15", "del-flows", "br-base"]);
        let held: Vec<String> = held.iter().cloned().collect();
        if !held.is_empty() {
            self.ofctl_stdin(&["--bundle", "add-flows", "br-base"], &held);
        }
        let f = self.sb.path("added.flows");
        std::fs::write(&f, added.join("\n") + "\n").unwrap();
        // What a strict delete matches on: not the actions, not the cookie.
        let matches: Vec<String> = added
            .iter()
            .map(|l| {
                let m = l.split(" actions=").next().unwrap();
                m.split_once(", ").map_or(m, |(_, rest)| rest).to_string()
            })
            .collect();
        let _monitor = watch.then(|| Monitor::start(&self.sb, "br-base"));
        let mut out = Vec::new();
        for _ in 0..samples {
            let t = Instant::now();
            self.sb.ofctl(&[
                "-O",
                "OpenFlow15",
                "--bundle",
                "add-flows",
                "br-base",
                f.to_str().unwrap(),
            ]);
            out.push(ms(t.elapsed()));
            self.ofctl_stdin(&["--strict", "del-flows", "br-base"], &matches);
        }
        out
    }
}

/// `ovs-ofctl monitor` of a bridge's flow changes (not the flows already there): each
/// line it prints with the time it was read. The switch sends a bundle's updates when it
/// commits it.
struct Monitor {
    child: Child,
    lines: Arc<Mutex<Vec<(Instant, String)>>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Monitor {
    fn start(sb: &Sandbox, bridge: &str) -> Monitor {
        let started = Instant::now();
        let mut child = std::process::Command::new("ovs-ofctl")
            .env("OVS_RUNDIR", sb.dir())
            .args(["monitor", bridge, "watch:!initial"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        // ovs-ofctl prints the answer to its request on stdout, what the switch sends
        // unasked afterwards on stderr (flushed per message).
        let out: [Box<dyn std::io::Read + Send>; 2] = [
            Box::new(child.stdout.take().unwrap()),
            Box::new(child.stderr.take().unwrap()),
        ];
        let readers = out
            .into_iter()
            .enumerate()
            .map(|(i, out)| {
                let l = lines.clone();
                std::thread::Builder::new()
                    .name(format!("bench-monitor-{i}"))
                    .spawn(move || {
                        for line in BufReader::new(out).lines().map_while(Result::ok) {
                            l.lock().unwrap().push((Instant::now(), line));
                        }
                    })
                    .unwrap()
            })
            .collect();
        let m = Monitor {
            child,
            lines,
            readers,
        };
        // The answer to the request: from then on it watches.
        m.wait(started, &["reply"]);
        m
    }

    /// When the first line read after `t0` that contains every one of `needles` was read.
    fn wait(&self, t0: Instant, needles: &[&str]) -> Instant {
        let end = Instant::now() + common::patience(Duration::from_secs(30));
        loop {
            {
                let lines = self.lines.lock().unwrap();
                let hit = lines
                    .iter()
                    .find(|(t, l)| *t >= t0 && needles.iter().all(|n| l.contains(n)));
                if let Some((t, _)) = hit {
                    return *t;
                }
                let tail = &lines[lines.len().saturating_sub(10)..];
                assert!(
                    Instant::now() < end,
                    "no flow update {needles:?} within 30 s; the last: {tail:?}"
                );
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
    }
}

/// [`SAMPLES`] cycles of: policy `uid-<i>` (the measured rule, priority 50.5: in the
/// middle of the others) added → committed (timed), deleted → gone. Returns the times
/// (ms), the flows before and those the first add put on br-int.
fn realize_cycles(b: &Bed, uid: &str) -> (Vec<f64>, BTreeSet<String>, Vec<String>) {
    let before = b.np_flows();
    let base = b.np();
    let mut expected = None;
    let mut added = Vec::new();
    let mut times = Vec::new();
    for i in 0..SAMPLES {
        let name = format!("{uid}-{i}");
        let text = np(&name, 50.5, drop_from("198.51.100.0/24"));
        let s0 = b.np().syncs;
        let t0 = Instant::now();
        b.srv.cp_add_policy(&text, &[NODE]);
        let (t1, st) = b.wait_np("one rule committed", |np| {
            np.syncs > s0
                && match expected {
                    Some(n) => np.flows == n,
                    None => np.flows > base.flows,
                }
        });
        times.push(ms(t1 - t0));
        if expected.is_none() {
            expected = Some(st.flows);
            added = b.np_flows().difference(&before).cloned().collect();
        }
        let s1 = b.np().syncs;
        b.srv.cp_delete(POLICIES, &name);
        b.wait_np("one rule removed", |np| {
            np.syncs > s1 && np.flows == base.flows
        });
        std::thread::sleep(Duration::from_millis(20));
    }
    (times, before, added)
}

fn one_rule(b: &Bed, name: &str, uid: &str) {
    let (mut t, before, added) = realize_cycles(b, uid);
    eprintln!(
        "{name}: {} flows added per policy; samples (ms): {t:.1?}",
        added.len()
    );
    let mut base = b.baseline(&before, &added, SAMPLES, false);
    for (p, label) in [(50, "p50"), (99, "p99")] {
        line(
            &format!("{name}_{label}"),
            pct(&mut t, p),
            pct(&mut base, p),
            "ms",
        );
    }
}

/// Measures 3–5: the 10,000-member AddressGroup.
fn address_group(b: &Bed, rss_before: f64) {
    let members: Vec<String> = (0..MEMBERS).map(member).collect();
    let base = b.np();
    let before = b.np_flows();
    let mut times = Vec::new();
    let mut expected = None;
    let mut added = Vec::new();
    let mut rss_after = 0.0;
    for i in 0..GROUP_SAMPLES {
        let (ag, uid) = (format!("ag-10k-{i}"), format!("np-10k-{i}"));
        let text = np(
            &uid,
            5.0,
            rule(json!({"addressGroups": [ag.clone()]}), "Drop"),
        );
        let monitor = Monitor::start(&b.sb, "br-int");
        let s0 = b.np().syncs;
        let t0 = Instant::now();
        b.srv.cp_add_group(ADDRESS, &ag, &members, &[NODE]);
        b.srv.cp_add_policy(&text, &[NODE]);
        // Read on the switch: a status poll once the 10,000 flows are there takes ~15 ms
        // (it reads every policy flow's counters), which would be counted. The members'
        // flows are one bundle: the first of them seen is the commit.
        let t1 = monitor.wait(t0, &["event=ADDED", MEMBER_PREFIX]);
        let (t2, st) = b.wait_np("10k members committed", |np| {
            np.syncs > s0
                && match expected {
                    Some(n) => np.flows == n,
                    None => np.policies.iter().any(|p| {
                        p.name == uid
                            && p.rules
                                .iter()
                                .any(|r| r.state == "realized" && r.flows >= MEMBERS)
                    }),
                }
        });
        drop(monitor);
        times.push(ms(t1 - t0));
        eprintln!(
            "10k realize: {:.1}ms on the switch, {:.1}ms by the state socket",
            ms(t1 - t0),
            ms(t2 - t0)
        );
        if expected.is_none() {
            expected = Some(st.flows);
            std::thread::sleep(Duration::from_secs(1));
            rss_after = rss_mb(b.pid());
            added = b.np_flows().difference(&before).cloned().collect();
        }
        if i + 1 == GROUP_SAMPLES {
            patches(b, &ag, &before, &added, st.flows);
        }
        let s1 = b.np().syncs;
        b.srv.cp_delete(POLICIES, &uid);
        b.srv.cp_delete(ADDRESS, &ag);
        b.wait_np("10k members removed", |np| {
            np.syncs > s1 && np.flows == base.flows
        });
    }
    eprintln!(
        "10k: tether's RSS {:.1}MB before, {rss_after:.1}MB realized, {:.1}MB once deleted",
        rss_before,
        rss_mb(b.pid())
    );
    let mut bt = Vec::new();
    for _ in 0..GROUP_SAMPLES {
        bt.extend(b.baseline(&before, &added, 1, true));
    }
    eprintln!("10k realize: baseline samples (ms): {bt:.1?}");
    line(
        "np_addressgroup_10k_realize",
        pct(&mut times, 50),
        pct(&mut bt, 50),
        "ms",
    );
    line(
        "np_addressgroup_10k_rss_growth",
        rss_after - rss_before,
        rss_before,
        "MB",
    );
}

/// Measure 5: one member added to (even samples) or removed from (odd) group `ag`.
fn patches(b: &Bed, ag: &str, before: &BTreeSet<String>, added: &[String], flows: usize) {
    let extra = [ee_member("vm-ns", "ee-extra", &[EXTRA])];
    let mut times = Vec::new();
    let mut changed = Vec::new();
    // Read on the switch (module doc): a status poll here takes longer than a patch.
    let poll = Instant::now();
    b.np();
    eprintln!(
        "patch: one state socket poll at 10k members: {:.1}ms",
        ms(poll.elapsed())
    );
    let monitor = Monitor::start(&b.sb, "br-int");
    for i in 0..SAMPLES {
        let add = i % 2 == 0;
        let s0 = b.np().syncs;
        let want = if add { flows + 1 } else { flows };
        let t0 = Instant::now();
        let (plus, minus, event) = if add {
            (&extra[..], &[][..], "event=ADDED")
        } else {
            (&[][..], &extra[..], "event=DELETED")
        };
        b.srv.cp_patch_group(ADDRESS, ag, plus, minus);
        let t1 = monitor.wait(t0, &[event, EXTRA]);
        times.push(ms(t1 - t0));
        b.wait_np("patch committed", |np| np.syncs > s0 && np.flows == want);
        if i == 0 {
            let now = b.np_flows();
            let mut was: BTreeSet<String> = before.clone();
            was.extend(added.iter().cloned());
            changed = now.difference(&was).cloned().collect();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!(
        "patch: {} flow(s) changed: {changed:?}; samples (ms): {times:.1?}",
        changed.len()
    );
    let mut held = before.clone();
    held.extend(added.iter().cloned());
    let mut base = b.baseline(&held, &changed, SAMPLES, true);
    eprintln!(
        "patch: p50 {:.1}ms, baseline p50 {:.1}ms",
        pct(&mut times, 50),
        pct(&mut base, 50)
    );
    line(
        "np_addressgroup_patch_p99",
        pct(&mut times, 99),
        pct(&mut base, 99),
        "ms",
    );
}

/// The 100 other policies, priorities 1..=100 (a measured one goes in the middle),
/// realized and reported: tether POSTs each one's status from the thread that syncs, so a
/// change arriving during those 100 POSTs would wait for them (stderr: how long they take).
fn install_others(b: &Bed) {
    let t0 = Instant::now();
    for i in 0..OTHERS {
        let text = np(
            &format!("np-other-{i}"),
            1.0 + f64::from(u32::try_from(i).unwrap()),
            drop_from(&format!("203.0.113.{i}/32")),
        );
        b.srv.cp_add_policy(&text, &[NODE]);
    }
    let (t1, _) = b.wait_np("100 policies", |np| {
        np.policies.len() == OTHERS && np.policies.iter().all(|p| p.realized)
    });
    let (t2, _) = b.wait_np("100 policies reported", |np| {
        np.policies.iter().all(|p| p.reported == Some(p.generation))
    });
    eprintln!(
        "100 policies added at once: realized after {:.0}ms, reported after {:.0}ms",
        ms(t1 - t0),
        ms(t2 - t0)
    );
}

/// One Allow that matches the iperf3 traffic, below the 100 in precedence.
fn install_allow(b: &Bed) {
    let s0 = b.np().syncs;
    b.srv.cp_add_policy(
        &np(
            "np-allow",
            200.0,
            rule(json!({"ipBlocks": [ip_block("192.0.2.1/32")]}), "Allow"),
        ),
        &[NODE],
    );
    b.wait_np("the Allow", |np| {
        np.syncs > s0
            && np
                .policies
                .iter()
                .any(|p| p.name == "np-allow" && p.realized)
    });
}

/// Put the VM into the policies' AppliedToGroup or take it out: every policy applies to
/// it or none does, in one sync (one bundle). Out, br-int holds the base policy flows only,
/// as with no policy at all; in, every policy is realized and reported again.
fn applied(b: &Bed, on: bool, flows: usize) {
    let vm = [ee_member("default", "vm1", &[])];
    let s0 = b.np().syncs;
    if on {
        b.srv.cp_patch_group(APPLIED_TO, ATG, &vm, &[]);
    } else {
        b.srv.cp_patch_group(APPLIED_TO, ATG, &[], &vm);
    }
    b.wait_np("the AppliedToGroup patched", |np| {
        np.syncs > s0
            && np.flows == flows
            && np
                .policies
                .iter()
                .all(|p| p.realized && p.reported == Some(p.generation))
    });
}

/// iperf3 through the policies (the Allow must have counted the traffic).
fn iperf_with_policies(b: &Bed) -> f64 {
    let before = allow_packets(b);
    let tput = b.iperf();
    assert!(
        allow_packets(b) > before,
        "the Allow rule saw no packet of the iperf3 run: {:?}",
        b.np()
    );
    tput
}

fn allow_packets(b: &Bed) -> u64 {
    b.np()
        .policies
        .iter()
        .find(|p| p.name == "np-allow")
        .map_or(0, |p| p.rules.iter().map(|r| r.counters.packets).sum())
}

fn run() {
    let t_all = Instant::now();
    let b = Bed::new();
    let base_flows = b.np().flows;
    let rss_before = rss_mb(b.pid());

    address_group(&b, rss_before);
    one_rule(&b, "np_realize_one_rule", "np-one");

    install_others(&b);
    one_rule(&b, "np_realize_one_rule_with_100_policies", "np-mid");

    // Throughput with and without the policies, alternating (the machine's load drifts).
    install_allow(&b);
    let (_, st) = b.wait_np("the Allow reported", |np| {
        np.policies.iter().all(|p| p.reported == Some(p.generation))
    });
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for _ in 0..THROUGHPUT_ROUNDS {
        applied(&b, false, base_flows);
        without.push(b.iperf());
        applied(&b, true, st.flows);
        with.push(iperf_with_policies(&b));
    }
    eprintln!(
        "throughput (Mbit/s): with the 100 rules and the Allow {with:.0?}, without {without:.0?}"
    );
    line(
        "np_throughput_100_rules",
        pct(&mut with, 50),
        pct(&mut without, 50),
        "Mbit/s",
    );
    eprintln!("networkpolicy group: {:.0}s", t_all.elapsed().as_secs_f64());
}

/// Runs the group in a child process and, once it is done, kills what it left running in
/// this namespace: a failing benchmark aborts (the `bench` profile inherits release's
/// `panic = "abort"`, so no guard runs), and the API server's relay here would outlive it,
/// holding the caller's stdout open. Its namespaces and what runs in them are
/// `scripts/cleanup-stale.sh`'s (bench.sh runs it on exit).
fn main() {
    if std::env::var_os(CHILD).is_some() {
        run();
        return;
    }
    if !privileged("bench_networkpolicy") {
        return;
    }
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .env(CHILD, "1")
        .spawn()
        .unwrap();
    let st = child.wait().unwrap();
    kill_leftovers(child.id());
    std::process::exit(st.code().unwrap_or(1));
}

/// Kill the processes whose command line names the child's sandbox (`/tmp/tt-<pid>-…`,
/// `common::unique_suffix`): the relays, tether, the OVS daemons. None after a clean run.
fn kill_leftovers(child: u32) {
    let tag = format!("/tmp/tt-{child}-");
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(&tag) {
            eprintln!("bench_networkpolicy: killing pid {pid}, left by the failed run");
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}
