//! ExternalNode end to end against a real userspace Open vSwitch
//! (docs/design.md#tier-3-end-to-end), driving [`EnController`] the way the daemon does.
//!
//! Topology: the sandbox namespace is the VM — ovs-vswitchd runs there and so does the
//! controller — with `eth1` (02:00:00:00:01:10, MTU 1450, 192.0.2.10/24, 2001:db8:1::10/64,
//! default routes via the peer) and `eth2` (198.51.100.10/24), veths to a `peer` namespace.
//! IPv6 DAD is off in both; the peer's veth ends send with tx checksum offload off (TCP
//! through the netdev datapath; docs/datapath.md#8-test-harness).
//!
//! The controller runs in an *agent* process inside the VM namespace (netlink acts on the
//! caller's namespace; entering one needs `setns`, i.e. unsafe): this test binary re-run
//! with `TETHER_EN_AGENT=<sandbox dir>` executes `agent_process`, which builds the real
//! backends (OVSDB client, `OfFlows`, `Rtnl`, the vswitchd control socket) and obeys one
//! command per stdin line (`recover`, `en <ifname|-> <ip,…>`, `absent`, `sync`, `replay`,
//! `gc`, `status`), answering `AGENT ok …` / `AGENT err …`. Each agent start is a daemon
//! start: a new cookie round, flows of the previous round deleted by `gc` after the first
//! sync (docs/design.md#rounds-and-flow-replacement-at-restart). `TETHER_CRASH_AT` makes an
//! agent abort at a step — a `kill -9` there.
//!
//! Harness-only: after a takeover the uplink is kept away from the kernel stack with
//! sysctls (docs/datapath.md#8-test-harness: the netdev datapath does not steal frames, so
//! the kernel would answer too and pings would show DUPs); they follow the device through
//! renames, so they are reset before the NIC is given back.

#![allow(clippy::unwrap_used)]

mod common;
mod externalnode_vm;
#[path = "externalnode/faulty.rs"]
mod faulty;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::{Sandbox, privileged, wait_for};
use externalnode_vm::*;
use tether::controller::LiveBridge;
use tether::controller::externalnode::{CRASH_ENV, EnConfig, EnController, PolicyBypassRule};
use tether::k8s::{ExternalNode, ExternalNodeSpec, NetworkInterface, ObjectMeta, Stores};
use tether::netlink::Rtnl;
use tether::openflow::{Category, OfFlows, OfFlowsConfig, Owner};
use tether::ovsdb::{BridgeDb, Client, ClientOptions, Remote};

const AGENT_ENV: &str = "TETHER_EN_AGENT";

// ---------------------------------------------------------------------------------------
// The agent (child side).

/// One agent command.
#[derive(Debug, PartialEq)]
enum Cmd {
    Recover,
    En { ifname: String, ips: Vec<String> },
    Absent,
    Sync,
    Replay,
    Gc,
    Status,
}

fn parse_cmd(line: &str) -> Result<Cmd, String> {
    let mut w = line.split_whitespace();
    let c = match w.next() {
        Some("recover") => Cmd::Recover,
        Some("en") => {
            let ifname = w.next().ok_or("en: missing ifname")?;
            let ips = w.next().ok_or("en: missing ips")?;
            Cmd::En {
                ifname: if ifname == "-" {
                    String::new()
                } else {
                    ifname.into()
                },
                ips: ips.split(',').map(str::to_string).collect(),
            }
        }
        Some("absent") => Cmd::Absent,
        Some("sync") => Cmd::Sync,
        Some("replay") => Cmd::Replay,
        Some("gc") => Cmd::Gc,
        Some("status") => Cmd::Status,
        other => return Err(format!("unknown command {other:?}")),
    };
    match w.next() {
        Some(extra) => Err(format!("unexpected {extra:?}")),
        None => Ok(c),
    }
}

fn bypass_rules() -> Vec<PolicyBypassRule> {
    [
        json!({"direction": "ingress", "protocol": "tcp", "cidr": "203.0.113.0/24", "port": 22}),
        json!({"direction": "egress", "protocol": "icmp", "cidr": "2001:db8:2::/48"}),
    ]
    .iter()
    .enumerate()
    .map(|(i, v)| {
        PolicyBypassRule::from_json(v, &format!("externalNode.policyBypassRules[{i}]")).unwrap()
    })
    .collect()
}

fn en_object(ifname: &str, ips: &[String]) -> ExternalNode {
    ExternalNode {
        metadata: ObjectMeta {
            name: "vm1".into(),
            namespace: "default".into(),
            ..ObjectMeta::default()
        },
        spec: Ok(ExternalNodeSpec {
            interfaces: vec![NetworkInterface {
                name: ifname.into(),
                ips: ips.iter().map(|s| s.parse().unwrap()).collect(),
            }],
        }),
    }
}

fn agent_main(dir: &str) {
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .is_test(false)
        .try_init();
    let dir = std::path::PathBuf::from(dir);
    let client = Arc::new(
        Client::connect(
            Remote::Unix(dir.join("db.sock")),
            ClientOptions::default(),
            Duration::from_secs(10),
        )
        .unwrap(),
    );
    let bridge = Arc::new(LiveBridge::new(
        BridgeDb::ensure(client, "br-int", common::datapath()).unwrap(),
    ));
    let prev: u16 = bridge
        .db()
        .external_id("roundNum")
        .unwrap()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    let round = prev.wrapping_add(1).max(1);
    let flows = Arc::new(
        OfFlows::start(OfFlowsConfig::new(dir.join("br-int.mgmt"), "br-int", round)).unwrap(),
    );
    flows.wait_connected(Duration::from_secs(10)).unwrap();
    flows
        .apply(
            Owner::new(Category::DEFAULT, 0),
            tether::pipeline::base_flows(),
        )
        .unwrap();
    let fault = faulty::Fault::from_env();
    let links = Arc::new(faulty::FaultyLinks {
        inner: Rtnl::connect().unwrap(),
        fault: fault.clone(),
    });
    let en_bridge = Arc::new(faulty::FaultyBridge {
        inner: bridge.clone(),
        fault: fault.clone(),
        stop_vswitchd: std::env::var_os(faulty::STOP_ENV).map(|_| dir.join("ovs-vswitchd.pid")),
    });
    let en_flows = Arc::new(faulty::FaultyFlows {
        inner: flows.clone(),
        fault,
    });
    let stores = Stores::default();
    let cfg = EnConfig {
        node_name: "vm1".into(),
        bridge: "br-int".into(),
        namespace: "default".into(),
        bypass_rules: bypass_rules(),
        ovs_rundir: dir.clone(),
        datapath_type: common::datapath().into(),
        state_dir: None,
    };
    let datapath = Arc::new(tether::controller::VswitchdDatapath::new(
        &cfg.ovs_rundir,
        &cfg.datapath_type,
    ));
    let ctl = EnController::new(cfg, stores.clone(), en_bridge, en_flows, links, datapath);
    let mut seen = 0u64;
    println!("AGENT ready round={round}");
    log::debug!("agent ready round={round}");
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        log::debug!("agent command {line:?}");
        let base = seen;
        while let Ok(g) = flows.reconnects().try_recv() {
            seen = seen.max(g);
        }
        let r: Result<String, String> = match parse_cmd(&line) {
            Err(e) => Err(e),
            Ok(Cmd::Recover) => ctl
                .recover()
                .map(|()| String::new())
                .map_err(|e| e.to_string()),
            Ok(Cmd::En { ifname, ips }) => {
                stores
                    .external_nodes
                    .replace(vec![en_object(&ifname, &ips)]);
                Ok(String::new())
            }
            Ok(Cmd::Absent) => {
                stores.external_nodes.replace(Vec::new());
                Ok(String::new())
            }
            Ok(Cmd::Sync) => ctl
                .sync()
                .map(|()| String::new())
                .map_err(|e| e.to_string()),
            Ok(Cmd::Replay) => {
                // As the daemon does: once OfFlows has re-connected (and replayed what it
                // had), re-install with ofports read fresh. A reconnect newer than the
                // last one seen before this command is the one the test caused.
                let deadline = Instant::now() + common::patience(Duration::from_secs(10));
                while seen <= base && Instant::now() < deadline {
                    if let Ok(g) = flows.reconnects().recv_timeout(Duration::from_millis(100)) {
                        seen = seen.max(g);
                    }
                }
                if seen <= base {
                    Err("no OpenFlow reconnect within 10 s".to_string())
                } else {
                    ctl.replay()
                        .map(|()| String::new())
                        .map_err(|e| e.to_string())
                }
            }
            Ok(Cmd::Gc) => {
                let r = if prev == 0 {
                    Ok(())
                } else {
                    flows.delete_round(prev)
                };
                r.and_then(|()| {
                    bridge
                        .db()
                        .set_external_id("roundNum", &round.to_string())
                        .map_err(|e| tether::openflow::OfError::Timeout {
                            what: e.to_string(),
                        })
                })
                .map(|()| String::new())
                .map_err(|e| e.to_string())
            }
            Ok(Cmd::Status) => Ok(format!("{:?}", ctl.status())),
        };
        match r {
            Ok(s) => println!("AGENT ok {s}"),
            Err(e) => println!("AGENT err {}", e.replace('\n', " ")),
        }
        std::io::stdout().flush().unwrap();
    }
}

/// The agent's entry point when this binary runs as one (see the module doc); run
/// directly, it checks the command grammar the parent and the agent share.
#[test]
fn agent_process() {
    if let Ok(dir) = std::env::var(AGENT_ENV) {
        agent_main(&dir);
        return;
    }
    assert_eq!(
        parse_cmd("en - 192.0.2.10,2001:db8:1::10").unwrap(),
        Cmd::En {
            ifname: String::new(),
            ips: vec!["192.0.2.10".into(), "2001:db8:1::10".into()]
        }
    );
    assert_eq!(
        parse_cmd("en eth1 192.0.2.10").unwrap(),
        Cmd::En {
            ifname: "eth1".into(),
            ips: vec!["192.0.2.10".into()]
        }
    );
    assert_eq!(parse_cmd("sync").unwrap(), Cmd::Sync);
    assert_eq!(parse_cmd("gc").unwrap(), Cmd::Gc);
    assert!(parse_cmd("sync now").is_err());
    assert!(parse_cmd("fly").is_err());
    assert!(parse_cmd("en eth1").is_err());
}

// ---------------------------------------------------------------------------------------
// The parent side.

struct Agent {
    child: Child,
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
}

impl Agent {
    fn spawn(sb: &Sandbox, crash_at: Option<&str>) -> Agent {
        Agent::spawn_env(sb, crash_at, &[])
    }

    /// [`Agent::spawn`] with extra environment (the `faulty` backends' switches).
    fn spawn_env(sb: &Sandbox, crash_at: Option<&str>, env: &[(&str, &str)]) -> Agent {
        let exe = std::env::current_exe().unwrap();
        let mut c = sb.ns().command(&[
            exe.to_str().unwrap(),
            "--exact",
            "agent_process",
            "--nocapture",
            "--test-threads=1",
        ]);
        c.env(AGENT_ENV, sb.dir())
            .env_remove(CRASH_ENV)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(p) = crash_at {
            c.env(CRASH_ENV, p);
        }
        c.env_remove(faulty::FAIL_ENV).env_remove(faulty::STOP_ENV);
        for (k, v) in env {
            c.env(k, v);
        }
        let mut child = c.spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let mut a = Agent { child, stdin, out };
        let ready = a.reply().expect("agent exited before it was ready");
        assert!(ready.starts_with("ready"), "{ready}");
        a
    }

    /// The next `AGENT …` line, without the prefix; None at end of output.
    fn reply(&mut self) -> Option<String> {
        loop {
            let mut line = String::new();
            if self.out.read_line(&mut line).unwrap() == 0 {
                return None;
            }
            // libtest prints `test agent_process ... ` without a newline first.
            if let Some(at) = line.find("AGENT ") {
                return Some(line[at + "AGENT ".len()..].trim_end().to_string());
            }
        }
    }

    fn try_cmd(&mut self, cmd: &str) -> Result<String, String> {
        writeln!(self.stdin, "{cmd}").unwrap();
        self.stdin.flush().unwrap();
        let r = self
            .reply()
            .unwrap_or_else(|| panic!("agent died during {cmd:?}"));
        match r.strip_prefix("ok") {
            Some(rest) => Ok(rest.trim().to_string()),
            None => Err(r.strip_prefix("err ").unwrap_or(&r).to_string()),
        }
    }

    fn cmd(&mut self, cmd: &str) -> String {
        self.try_cmd(cmd)
            .unwrap_or_else(|e| panic!("agent {cmd:?} failed: {e}"))
    }

    /// Send `cmd` and expect the agent to abort at its crash point (SIGABRT, no reply).
    fn crash_on(mut self, cmd: &str) {
        writeln!(self.stdin, "{cmd}").unwrap();
        self.stdin.flush().unwrap();
        assert_eq!(self.reply(), None, "agent survived {cmd:?}");
        let st = self.child.wait().unwrap();
        assert_eq!(st.signal(), Some(6), "agent did not abort: {st}");
    }

    /// A daemon start: recover, sync with the given EN state, drop the previous round.
    fn start_and_sync(sb: &Sandbox, en: Option<&str>) -> Agent {
        let mut a = Agent::spawn(sb, None);
        a.cmd("recover");
        a.cmd(en.unwrap_or("absent"));
        a.cmd("sync");
        a.cmd("gc");
        a
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Takeover → v4/v6 ping and TCP through OVS (flow counters) → add an IP → kill -9
/// ovs-vswitchd and replay → move to eth2 (eth1 restored exactly) → delete (eth2
/// restored exactly).
#[test]
fn takeover_traffic_update_move_and_exact_restore() {
    if !privileged("takeover_traffic_update_move_and_exact_restore") {
        return;
    }
    let (sb, peer) = setup();
    let vm = sb.ns();
    let eth1_before = snapshot(vm, "eth1");
    let eth2_before = snapshot(vm, "eth2");
    assert_clean_ping(&peer, "192.0.2.10");

    let mut agent = Agent::start_and_sync(&sb, Some("en - 192.0.2.10,2001:db8:1::10"));
    neutralise_uplink(vm, "eth1~", true);

    // OVSDB: the two ports as Antrea writes them, and no step left in flight.
    assert_eq!(
        port_ids(&sb, "eth1~"),
        json!(["map", [["antrea-type", "uplink"]]])
    );
    assert_eq!(
        port_ids(&sb, "eth1"),
        host_ids(&sb, "eth1~", "192.0.2.10,2001:db8:1::10")
    );
    let iface = sb.vsctl_json("Interface", Some("eth1"), "type,mac_in_use,mtu");
    assert_eq!(
        iface["data"][0],
        json!(["internal", "02:00:00:00:01:10", 1450])
    );
    assert_eq!(bridge_record(&sb), None);
    let (host, uplink) = (ofport(&sb, "eth1"), ofport(&sb, "eth1~"));
    assert_eq!(en_flows(&sb), expected_en_flows(host, uplink));
    // The kernel: the NIC is the uplink, bare; the internal port carries the config.
    let up = snapshot(vm, "eth1~");
    assert_eq!(up["route4"], json!([]));
    let host_addrs: Vec<String> = snapshot(vm, "eth1")["addr"][0]["addr_info"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["scope"] == "global")
        .map(|a| format!("{}/{}", a["local"].as_str().unwrap(), a["prefixlen"]))
        .collect();
    assert_eq!(host_addrs, ["192.0.2.10/24", "2001:db8:1::10/64"]);

    // Traffic through OVS, both ways, proven by the pair flows' counters.
    let before = pair_packets(&sb);
    assert_clean_ping(&peer, "192.0.2.10");
    assert_clean_ping(&peer, "2001:db8:1::10");
    tcp_transfer(vm, &peer, "192.0.2.10");
    tcp_transfer(vm, &peer, "2001:db8:1::10");
    // Flow counters lag (docs/datapath.md#8-test-harness): poll until both directions
    // counted ≥ 6 pings.
    wait_for(Duration::from_secs(5), "pair flow counters", || {
        let now = pair_packets(&sb);
        let grew =
            |p: u32| now.get(&p).copied().unwrap_or(0) >= before.get(&p).copied().unwrap_or(0) + 6;
        (grew(host) && grew(uplink)).then_some(())
    });
    let st = agent.cmd("status");
    assert!(
        st.contains("step: \"attached\"") && st.contains("nic: Some(\"eth1\")"),
        "{st}"
    );

    // An IP added on the VM and to the ExternalNode: external_ids follow.
    vm.ip(&["addr", "add", "192.0.2.11/24", "dev", "eth1"]);
    agent.cmd("en - 192.0.2.10,2001:db8:1::10,192.0.2.11");
    agent.cmd("sync");
    assert_eq!(
        port_ids(&sb, "eth1"),
        host_ids(&sb, "eth1~", "192.0.2.10,192.0.2.11,2001:db8:1::10")
    );
    vm.ip(&["addr", "del", "192.0.2.11/24", "dev", "eth1"]);
    agent.cmd("en - 192.0.2.10,2001:db8:1::10");
    agent.cmd("sync");
    assert_eq!(
        port_ids(&sb, "eth1"),
        host_ids(&sb, "eth1~", "192.0.2.10,2001:db8:1::10")
    );

    // kill -9 ovs-vswitchd: its flows are gone; after the OpenFlow reconnect the daemon
    // calls replay() and the uplink flows are back with fresh ofports.
    sb.kill9("ovs-vswitchd");
    sb.start_vswitchd();
    let t = Instant::now();
    wait_for(
        Duration::from_secs(10),
        "replay after vswitchd restart",
        || agent.try_cmd("replay").ok(),
    );
    let (host, uplink) = (ofport(&sb, "eth1"), ofport(&sb, "eth1~"));
    assert_eq!(en_flows(&sb), expected_en_flows(host, uplink));
    eprintln!("uplink flows back {:?} after vswitchd restart", t.elapsed());
    assert_clean_ping(&peer, "192.0.2.10");
    assert_clean_ping(&peer, "2001:db8:1::10");

    // The EN's IP moves to eth2: eth2 is taken over, then eth1 restored exactly.
    neutralise_uplink(vm, "eth1~", false);
    agent.cmd("en - 198.51.100.10");
    agent.cmd("sync");
    // PROMISC is the one difference, and it is ovs-vswitchd's: the killed instance turned
    // it on, the restarted one found it on and "restores" it to on when it lets go of
    // the netdev. eth2 (attached after the restart) is compared with PROMISC included.
    let mut now = snapshot(vm, "eth1");
    for k in ["link", "addr"] {
        let flags = now[k][0]["flags"].as_array_mut().unwrap();
        flags.retain(|f| f != "PROMISC");
    }
    assert_eq!(now, eth1_before);
    assert_eq!(
        port_ids(&sb, "eth2"),
        host_ids(&sb, "eth2~", "198.51.100.10")
    );
    assert!(sb.try_vsctl(&["get", "Port", "eth1~", "name"]).is_err());
    let out = ping(&peer, "198.51.100.10");
    assert!(out.contains("3 received"), "{out}");

    // Delete: eth2 restored exactly, nothing of ours left on the bridge.
    agent.cmd("absent");
    agent.cmd("sync");
    assert_restored(vm, "eth2", &eth2_before);
    assert_eq!(sb.vsctl(&["list-ports", "br-int"]).trim(), "");
    assert_eq!(
        en_flows(&sb),
        vec![
            "table=1, priority=200,icmp6,ipv6_dst=2001:db8:2::/48 actions=goto_table:2",
            "table=4, priority=200,tcp,nw_src=203.0.113.0/24,tp_dst=22 actions=goto_table:5"
        ]
    );
    assert_eq!(bridge_record(&sb), None);
    assert_clean_ping(&peer, "192.0.2.10");
    assert_clean_ping(&peer, "2001:db8:1::10");
}

/// Whether a process is stopped (SIGSTOP: state `T` in /proc/<pid>/stat).
fn stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.starts_with('T')))
        .unwrap_or(false)
}

/// The name of link `ifindex` in the VM, read with `ip -j`.
fn link_name(vm: &common::Netns, ifindex: u64) -> Option<String> {
    let links = json_of(&vm.ip(&["-j", "link", "show"]));
    links.as_array()?.iter().find_map(|l| {
        (l["ifindex"].as_u64() == Some(ifindex))
            .then(|| l["ifname"].as_str().unwrap_or("").to_string())
    })
}

/// ovs-vswitchd stopped (SIGSTOP, 3 s) inside the port delete of a restore, and of a
/// rollback at the ports, move and flows steps: the NIC is not renamed back while the
/// switch has not applied the delete (sampled every 20 ms while it is stopped), and ends
/// with no master, its addresses and routes exact. (Before: the rename followed the OVSDB
/// commit at once, so on the kernel datapath the NIC could still be a datapath port when it
/// got the VM's addresses back;
/// docs/datapath.md#14-why-renaming-back-too-early-cuts-the-vm-off-system-only.)
#[test]
fn a_stopped_vswitchd_in_the_middle_of_a_delete_delays_the_rename() {
    if !privileged("a_stopped_vswitchd_in_the_middle_of_a_delete_delays_the_rename") {
        return;
    }
    let (sb, _peer) = setup();
    let vm = sb.ns();
    let before = snapshot(vm, "eth1");
    let nic = before["link"][0]["ifindex"].as_u64().unwrap();
    let en = "en - 192.0.2.10,2001:db8:1::10";
    for case in ["restore", "ports", "move", "flows"] {
        let mut env = vec![(faulty::STOP_ENV, "1")];
        if case != "restore" {
            env.push((faulty::FAIL_ENV, case));
        }
        let mut a = Agent::spawn_env(&sb, None, &env);
        a.cmd("recover");
        a.cmd(en);
        let vswitchd = sb.pid("ovs-vswitchd").unwrap();
        let watching = std::sync::atomic::AtomicBool::new(true);
        let (r, (stopped_samples, early)) = std::thread::scope(|scope| {
            let watcher = scope.spawn(|| {
                let (mut samples, mut early) = (Vec::new(), Vec::new());
                while watching.load(std::sync::atomic::Ordering::SeqCst) {
                    if stopped(vswitchd) {
                        samples.push(Instant::now());
                        let name = link_name(vm, nic);
                        // Only a name read wholly inside the stop counts: under emulation
                        // one `ip` takes long enough for vswitchd to be continued, apply
                        // the delete and tether to rename the NIC while it runs.
                        if name.as_deref() != Some("eth1~") && stopped(vswitchd) {
                            early.push(name);
                        }
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                (samples, early)
            });
            let r = if case == "restore" {
                a.cmd("sync");
                a.cmd("absent");
                a.try_cmd("sync")
            } else {
                a.try_cmd("sync")
            };
            watching.store(false, std::sync::atomic::Ordering::SeqCst);
            (r, watcher.join().unwrap())
        });
        match case {
            "restore" => assert!(r.is_ok(), "restore: {r:?}"),
            _ => assert!(
                r.as_ref().is_err_and(|e| e.contains("rolled back")),
                "{case}: {r:?}"
            ),
        }
        // The samples must cover the stop, however long each `ip` takes (tens of
        // milliseconds here, ten times that in the kernel tier's emulated VM).
        let covered = match (stopped_samples.first(), stopped_samples.last()) {
            (Some(a), Some(b)) => b.duration_since(*a),
            _ => Duration::ZERO,
        };
        assert!(
            stopped_samples.len() >= 5 && covered >= faulty::STOP_FOR * 2 / 3,
            "{case}: vswitchd seen stopped in {} samples over {covered:?}",
            stopped_samples.len()
        );
        assert!(
            early.is_empty(),
            "{case}: the NIC was renamed while ovs-vswitchd had not applied the delete: {early:?}"
        );
        assert!(!stopped(vswitchd), "{case}: vswitchd left stopped");
        let link = json_of(&vm.ip(&["-j", "link", "show", "dev", "eth1"]));
        assert_eq!(link[0]["ifindex"].as_u64(), Some(nic), "{case}");
        assert_eq!(link[0].get("master"), None, "{case}: {link}");
        assert_restored(vm, "eth1", &before);
        assert_eq!(bridge_record(&sb), None, "{case}");
        assert_eq!(sb.vsctl(&["list-ports", "br-int"]).trim(), "", "{case}");
    }
}

/// kill -9 (abort) at every step of takeover and of restore; the next start recovers and
/// converges: the VM is reachable and the NIC, when given back, is exactly as before.
#[test]
fn crash_at_every_step_then_restart_converges() {
    if !privileged("crash_at_every_step_then_restart_converges") {
        return;
    }
    let (sb, peer) = setup();
    let vm = sb.ns();
    let eth1_before = snapshot(vm, "eth1");
    let en = "en - 192.0.2.10,2001:db8:1::10";
    for step in ["rename", "ports", "move", "flows"] {
        // Crash during the takeover …
        let mut a = Agent::spawn(&sb, Some(&format!("takeover-{step}")));
        a.cmd("recover");
        a.cmd(en);
        a.crash_on("sync");
        assert!(bridge_record(&sb).is_some(), "takeover-{step}: no record");
        // … the next start rolls it back, then takes over for good.
        let mut a = Agent::spawn(&sb, None);
        a.cmd("recover");
        assert_eq!(bridge_record(&sb), None, "takeover-{step}");
        assert_eq!(snapshot(vm, "eth1"), eth1_before, "rolled back at {step}");
        a.cmd(en);
        a.cmd("sync");
        a.cmd("gc");
        let out = ping(&peer, "192.0.2.10");
        assert!(out.contains("3 received"), "after takeover-{step}: {out}");
        let (host, uplink) = (ofport(&sb, "eth1"), ofport(&sb, "eth1~"));
        assert_eq!(
            en_flows(&sb),
            expected_en_flows(host, uplink),
            "takeover-{step}"
        );
        drop(a);

        // Crash during the restore …
        let rstep = match step {
            "rename" => "flows",
            "ports" => "ports",
            "move" => "rename",
            _ => "move",
        };
        let mut a = Agent::spawn(&sb, Some(&format!("restore-{rstep}")));
        a.cmd("recover");
        a.cmd("absent");
        a.crash_on("sync");
        // … the next start finishes it: the NIC exactly as before, reachable.
        let a = Agent::start_and_sync(&sb, None);
        assert_eq!(bridge_record(&sb), None, "restore-{rstep}");
        assert_eq!(snapshot(vm, "eth1"), eth1_before, "restore-{rstep}");
        assert_eq!(
            sb.vsctl(&["list-ports", "br-int"]).trim(),
            "",
            "restore-{rstep}"
        );
        assert_clean_ping(&peer, "192.0.2.10");
        drop(a);
    }
}

/// The vswitchd control socket as the controller uses it when a host netdev lingers:
/// `dpctl/show` lists the datapath's ports, `dpctl/del-if` removes one (here while its
/// OVSDB row still exists, which is when nothing else would), and errors carry OVS's text.
#[test]
fn unixctl_removes_a_datapath_port() {
    if !privileged("unixctl_removes_a_datapath_port") {
        return;
    }
    use tether::ovsdb::unixctl::{Unixctl, delete_dp_interface, parse_dpctl_show};
    let sb = Sandbox::start();
    sb.add_bridge("br-int");
    sb.add_internal_port("br-int", "p1", &[]);
    let ctl = Unixctl::for_daemon(sb.dir(), "ovs-vswitchd").unwrap();
    let pid = sb.pid("ovs-vswitchd").unwrap();
    assert_eq!(ctl.path(), sb.path(&format!("ovs-vswitchd.{pid}.ctl")));
    let names = |ctl: &Unixctl| -> Vec<String> {
        parse_dpctl_show(&ctl.call("dpctl/show", &[common::dpctl_name()]).unwrap())
            .into_iter()
            .map(|(_, n)| n)
            .collect()
    };
    assert_eq!(
        names(&ctl),
        [
            format!("ovs-{}", common::datapath()).as_str(),
            "br-int",
            "p1"
        ]
    );
    // The same text ovs-appctl prints.
    assert_eq!(
        ctl.call("dpctl/show", &[common::dpctl_name()]).unwrap(),
        sb.appctl(&["dpctl/show", common::dpctl_name()])
    );
    // vswitchd logs the removal; it then re-adds the port, because its OVSDB row is still
    // there (in the real case the row is gone, which is why the netdev lingered).
    let deletions = || {
        std::fs::read_to_string(sb.path("ovs-vswitchd.log"))
            .unwrap()
            .matches("bridge br-int: deleted interface p1 on port")
            .count()
    };
    assert_eq!(deletions(), 0);
    assert!(delete_dp_interface(&ctl, common::dpctl_name(), "p1").unwrap());
    wait_for(
        Duration::from_secs(5),
        "vswitchd to log the removal",
        || (deletions() == 1).then_some(()),
    );
    assert!(!delete_dp_interface(&ctl, common::dpctl_name(), "nope").unwrap());
    // The other datapath type's name does not exist: Antrea's `ovs-system`, which it always
    // asks, on the userspace datapath (docs/antrea-compat.md#removing-a-lingering-datapath-port);
    // `ovs-netdev` on the kernel's, where no userspace bridge runs.
    let other = if common::kernel_datapath() {
        "netdev@ovs-netdev"
    } else {
        "system@ovs-system"
    };
    let e = ctl.call("dpctl/show", &[other]).unwrap_err();
    assert!(
        e.to_string().contains("opening datapath") && e.to_string().contains("failed"),
        "{e}"
    );
}

/// A 15-byte NIC name (the kernel's maximum): `<nic>~` would not fit, so the uplink gets
/// the short form `<8 bytes>~<6 hex of sha1>`; the internal port keeps the full name.
#[test]
fn a_15_byte_nic_name_end_to_end() {
    if !privileged("a_15_byte_nic_name_end_to_end") {
        return;
    }
    const NIC: &str = "enp0s31f6abcdef";
    let uplink = tether::netlink::uplink_name(NIC);
    assert_eq!(uplink.len(), 15);
    let sb = Sandbox::start();
    sb.add_bridge("br-int");
    let peer = common::Netns::new("peer");
    let vm = sb.ns();
    for ns in [vm, &peer] {
        ns.sh("sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0");
    }
    vm.veth_to(NIC, &peer, "eth0");
    vm.ip(&["addr", "add", "203.0.113.10/24", "dev", NIC]);
    peer.ip(&["addr", "add", "203.0.113.1/24", "dev", "eth0"]);
    let before = snapshot(vm, NIC);

    let mut agent = Agent::start_and_sync(&sb, Some("en - 203.0.113.10"));
    assert_eq!(
        json_of(&vm.ip(&["-j", "link", "show", "dev", &uplink]))[0]["ifname"],
        json!(uplink)
    );
    let iface = sb.vsctl_json("Interface", Some(NIC), "name,type,ofport");
    assert_eq!(iface["data"][0][0], json!(NIC));
    assert_eq!(iface["data"][0][1], json!("internal"));
    assert!(iface["data"][0][2].as_i64().unwrap() > 0);
    neutralise_uplink(vm, &uplink, true);
    assert_clean_ping(&peer, "203.0.113.10");
    neutralise_uplink(vm, &uplink, false);
    agent.cmd("absent");
    agent.cmd("sync");
    assert_restored(vm, NIC, &before);
}

/// The routes of `table`, as `ip -j` shows them (v4 then v6), without the fields that
/// change on their own.
fn routes_json(vm: &common::Netns, table: &str) -> Value {
    // Sorted: the kernel lists routes of equal prefix (each link's fe80::/64) in the
    // order their links came up, which a rename and a new host port change.
    let clean = |v: Value| {
        let mut rows: Vec<Value> = v.as_array().cloned().unwrap_or_default();
        for r in &mut rows {
            if let Some(o) = r.as_object_mut() {
                o.remove("expires");
            }
        }
        rows.sort_by_key(Value::to_string);
        Value::Array(rows)
    };
    json!([
        clean(json_of(&vm.ip(&["-j", "route", "show", "table", table]))),
        clean(json_of(
            &vm.ip(&["-j", "-6", "route", "show", "table", table])
        )),
    ])
}

fn rules_json(vm: &common::Netns) -> Value {
    json!([
        json_of(&vm.ip(&["-j", "rule", "show"])),
        json_of(&vm.ip(&["-j", "-6", "rule", "show"])),
    ])
}

/// Routes in a table other than main, an IPv4 and an IPv6 ECMP route with one nexthop
/// through the NIC and one through eth2, and policy rules naming the NIC: after the
/// takeover every one of them is there as before (the ECMP nexthop and the table-100
/// routes on the host port, none `dead` or `linkdown`, the rules attached), real packets
/// use them, and after the release everything is exactly as before. (Before this change
/// the table-100 route was lost and the ECMP nexthop stayed `dead linkdown` on the bare
/// uplink.)
#[test]
fn routes_of_every_table_multipath_and_rules_move_and_come_back() {
    if !privileged("routes_of_every_table_multipath_and_rules_move_and_come_back") {
        return;
    }
    let (sb, peer) = setup();
    let vm = sb.ns();
    vm.sh("ip route add 203.0.113.0/26 via 192.0.2.1 dev eth1 table 100
         ip -6 route add 2001:db8:9::/48 via 2001:db8:1::1 dev eth1 table 100
         ip route add 203.0.113.128/25 proto static nexthop via 192.0.2.1 dev eth1 weight 1 nexthop via 198.51.100.1 dev eth2 weight 2
         ip -6 route add 2001:db8:7::/48 nexthop via 2001:db8:1::1 dev eth1 nexthop via 2001:db8:3::1 dev eth2
         ip rule add iif eth1 lookup 100 pref 1000
         ip rule add oif eth1 lookup 100 pref 1001
         ip -6 rule add oif eth1 lookup 100 pref 1001");
    // The far ends, reachable through either path.
    peer.sh("ip addr add 203.0.113.5/32 dev lo
         ip addr add 203.0.113.129/32 dev lo
         ip -6 addr add 2001:db8:7::1/128 dev lo
         ip -6 addr add 2001:db8:9::1/128 dev lo
         ip route add 198.51.100.0/24 dev eth2p 2>/dev/null || true");
    let before = json!({
        "t100": routes_json(vm, "100"),
        "main": routes_json(vm, "main"),
        "rules": rules_json(vm),
    });
    let nexthop_flags = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .flat_map(|fam| fam.as_array().unwrap().iter())
            .flat_map(|r| {
                let mut f: Vec<Value> = r["flags"].as_array().cloned().unwrap_or_default();
                for n in r["nexthops"].as_array().into_iter().flatten() {
                    f.extend(n["flags"].as_array().cloned().unwrap_or_default());
                }
                f
            })
            .map(|f| f.as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(nexthop_flags(&before["main"]), Vec::<String>::new());

    let mut agent = Agent::start_and_sync(&sb, Some("en - 192.0.2.10,2001:db8:1::10"));
    neutralise_uplink(vm, "eth1~", true);
    let host = vm.ip(&["-j", "link", "show", "eth1"]);
    assert!(host.contains("\"link_type\":\"ether\""), "{host}");
    let after = json!({
        "t100": routes_json(vm, "100"),
        "main": routes_json(vm, "main"),
        "rules": rules_json(vm),
    });
    // Same names, same everything: eth1 is the host port now (the uplink is eth1~).
    assert_eq!(after["t100"], before["t100"]);
    assert_eq!(after["rules"], before["rules"], "rules detached or lost");
    assert_eq!(
        nexthop_flags(&after["main"]),
        Vec::<String>::new(),
        "{}",
        after["main"]
    );
    let main_through = |v: &Value, dst: &str| -> Value {
        v.as_array()
            .unwrap()
            .iter()
            .flat_map(|fam| fam.as_array().unwrap().iter())
            .find(|r| r["dst"] == dst)
            .cloned()
            .unwrap_or(Value::Null)
    };
    for dst in ["203.0.113.128/25", "2001:db8:7::/48"] {
        assert_eq!(
            main_through(&after["main"], dst),
            main_through(&before["main"], dst),
            "{dst}"
        );
    }
    assert!(
        !vm.ip(&["route", "show", "table", "all"]).contains("eth1~"),
        "a route left on the uplink:\n{}",
        vm.ip(&["route", "show", "table", "all"])
    );
    // Real packets: the policy rule picks table 100 for traffic bound to eth1, and the
    // ECMP destinations answer, through the host port (OVS).
    let ping = |args: &[&str]| {
        vm.try_exec(&[&["ping", "-c", "2", "-i", "0.2", "-W", "2"][..], args].concat())
            .unwrap_or_else(|e| e)
    };
    for (args, what) in [
        (
            &["-I", "eth1", "203.0.113.5"][..],
            "table 100 via the oif rule",
        ),
        (&["203.0.113.129"], "IPv4 ECMP"),
        (&["2001:db8:7::1"], "IPv6 ECMP"),
        (&["-I", "eth1", "2001:db8:9::1"], "IPv6 table 100"),
    ] {
        let out = ping(args);
        assert!(out.contains("2 received"), "{what}: {out}");
    }

    neutralise_uplink(vm, "eth1~", false);
    agent.cmd("absent");
    agent.cmd("sync");
    let restored = json!({
        "t100": routes_json(vm, "100"),
        "main": routes_json(vm, "main"),
        "rules": rules_json(vm),
    });
    assert_eq!(restored, before, "not restored exactly");
    assert!(vm.try_ip(&["link", "show", "eth1~"]).is_err());
}

/// Routes tether cannot re-create exactly — one using a nexthop object, an IPv6
/// source-specific route — make it refuse the takeover, naming each, before any link is
/// touched (`ip monitor link` sees nothing). Once they are gone, the takeover happens.
#[test]
fn routes_that_cannot_move_refuse_the_takeover_untouched() {
    if !privileged("routes_that_cannot_move_refuse_the_takeover_untouched") {
        return;
    }
    let (sb, _peer) = setup();
    let vm = sb.ns();
    vm.sh("ip nexthop add id 7 via 192.0.2.1 dev eth1
         ip route add 203.0.113.64/26 nhid 7
         ip -6 route add 2001:db8:8::/48 from 2001:db8:1::/64 via 2001:db8:1::1 dev eth1");
    let before = json!({"main": routes_json(vm, "main"), "eth1": snapshot(vm, "eth1")});
    let monitor = vm
        .command(&["ip", "monitor", "link"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut agent = Agent::spawn(&sb, None);
    agent.cmd("recover");
    agent.cmd("en - 192.0.2.10,2001:db8:1::10");
    let e = agent.try_cmd("sync").unwrap_err();
    assert!(
        e.starts_with("refusing to take over eth1: 2 route(s) through it cannot be moved"),
        "{e}"
    );
    assert!(
        e.contains("203.0.113.64/26 via 192.0.2.1")
            && e.contains("has a nexthop object (RTA_NH_ID)"),
        "{e}"
    );
    assert!(
        e.contains("2001:db8:8::/48 via 2001:db8:1::1")
            && e.contains("has a source prefix (RTA_SRC)"),
        "{e}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let mut monitor = monitor;
    let _ = monitor.kill();
    let out = monitor.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "", "a link changed");
    assert_eq!(
        json!({"main": routes_json(vm, "main"), "eth1": snapshot(vm, "eth1")}),
        before
    );
    assert_eq!(sb.try_vsctl(&["get", "Port", "eth1~", "_uuid"]).ok(), None);
    vm.sh("ip route del 203.0.113.64/26
         ip nexthop del id 7
         ip -6 route del 2001:db8:8::/48 from 2001:db8:1::/64");
    agent.cmd("sync");
    assert!(vm.try_ip(&["link", "show", "eth1~"]).is_ok());
}
