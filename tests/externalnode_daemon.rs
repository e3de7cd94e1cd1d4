//! ExternalNode through the `tether` binary (docs/design.md#tier-3-end-to-end):
//! `tether run` in the VM namespace of the shared bed (`externalnode_vm`), the
//! ExternalNode from a manifests directory and from the test API server; `kill -9` of
//! tether at every step of takeover and restore (the test-only crash point
//! `TETHER_CRASH_AT=<phase>-<step>` aborts right after that step, as a `kill -9` there
//! would) → after a restart the VM is reachable and the state converges.
//!
//! The API server listens on 127.0.0.1 of the test's own namespace, which tether in the VM
//! namespace cannot reach; two byte relays bridge it through a unix socket (path-based
//! sockets work across network namespaces): TCP in the VM → unix socket → the server.

#![allow(clippy::unwrap_used)]

mod apiserver;
mod common;
mod externalnode_vm;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use common::{Sandbox, privileged, wait_for};
use externalnode_vm::*;

/// `tether <cmd> --config <the agent config> <extra> <the sandbox's OVS, bridge, node and
/// state socket>`, for `run`, `plan` and `reset` alike.
fn tether_argv(sb: &Sandbox, cmd: &str, extra: &[&str], bridge: &str) -> Vec<String> {
    let dir = sb.dir().to_str().unwrap().to_string();
    let config = sb.path("tether.yaml");
    // The agent config's ExternalNode keys (Antrea's), read by the daemon.
    std::fs::write(&config, CONFIG).unwrap();
    let mut argv: Vec<String> = vec![
        common::tether::binary().to_str().unwrap().into(),
        cmd.into(),
        "--config".into(),
        config.to_str().unwrap().into(),
    ];
    argv.extend(extra.iter().map(|s| s.to_string()));
    argv.extend(
        [
            "--ovs-rundir",
            &dir,
            "--bridge",
            bridge,
            "--datapath-type",
            common::datapath(),
            "--node-name",
            "vm1",
            "--state-socket",
            &format!("{dir}/tether.sock"),
            "--state-dir",
            &format!("{dir}/state"),
        ]
        .map(String::from),
    );
    argv
}

/// `tether run` in the VM namespace, optionally with a crash point; killed on drop.
struct Daemon {
    child: Option<Child>,
}

impl Daemon {
    fn start(sb: &Sandbox, source: &[&str], crash_at: Option<&str>) -> Daemon {
        Daemon::start_on(sb, source, crash_at, "br-int")
    }

    fn start_on(sb: &Sandbox, source: &[&str], crash_at: Option<&str>, bridge: &str) -> Daemon {
        let argv = tether_argv(sb, "run", source, bridge);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(sb.path("tether.log"))
            .unwrap();
        let mut c = sb.ns().command(&argv);
        c.env("RUST_LOG", "info")
            .env_remove(tether::controller::externalnode::CRASH_ENV)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        if let Some(p) = crash_at {
            c.env(tether::controller::externalnode::CRASH_ENV, p);
        }
        Daemon {
            child: Some(c.spawn().unwrap()),
        }
    }

    /// Wait for the crash point to abort it (SIGABRT).
    fn expect_abort(mut self, sb: &Sandbox, what: &str) {
        let mut c = self.child.take().unwrap();
        let end = Instant::now() + common::patience(Duration::from_secs(20));
        let st = loop {
            if let Some(st) = c.try_wait().unwrap() {
                break st;
            }
            if Instant::now() > end {
                let _ = c.kill();
                panic!(
                    "{what}: tether did not reach its crash point\n{}",
                    log_tail(sb)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(st.signal(), Some(6), "{what}: {st}\n{}", log_tail(sb));
    }

    /// SIGTERM; flows and ports stay (docs/design.md#logs-signals-and-systemd), exit code 0.
    fn stop(mut self) {
        let mut c = self.child.take().unwrap();
        common::run(std::process::Command::new("kill").args(["-TERM", &c.id().to_string()]));
        assert!(c.wait().unwrap().success());
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn log_tail(sb: &Sandbox) -> String {
    let text = std::fs::read_to_string(sb.path("tether.log")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

fn write_en(dir: &Path, yaml: Option<&str>) {
    let f = dir.join("en.yaml");
    match yaml {
        Some(y) => {
            // Write then rename, so the poller never reads half a file.
            let tmp = dir.join(".en.yaml.tmp");
            std::fs::write(&tmp, y).unwrap();
            std::fs::rename(&tmp, &f).unwrap();
        }
        None => {
            let _ = std::fs::remove_file(&f);
        }
    }
}

/// Attached as expected: ports with Antrea's external_ids, the pair flows on the current
/// ofports, no step in flight.
fn wait_attached(sb: &Sandbox, ips: &str, what: &str) {
    // Polled while tether may still be rolling back or creating ports: every read may fail.
    let try_ofport = |name: &str| -> Option<u32> {
        sb.try_vsctl(&["get", "Interface", name, "ofport"])
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let try_ids = |port: &str| -> Option<serde_json::Value> {
        let out = sb
            .try_vsctl(&[
                "--format=json",
                "--columns=external_ids",
                "list",
                "Port",
                port,
            ])
            .ok()?;
        let v: serde_json::Value = serde_json::from_str(&out).ok()?;
        Some(v["data"][0][0].clone())
    };
    wait_for(Duration::from_secs(15), what, || {
        let (host, uplink) = (try_ofport("eth1")?, try_ofport("eth1~")?);
        let ids = try_ids("eth1")?;
        let ok = bridge_record(sb).is_none()
            && ids == host_ids(sb, "eth1~", ips)
            && en_flows(sb) == expected_en_flows(host, uplink);
        ok.then_some(())
    });
}

/// Given back: `eth1` equals its snapshot, nothing of ours on the bridge.
fn wait_restored(sb: &Sandbox, before: &serde_json::Value, what: &str) {
    wait_for(Duration::from_secs(15), what, || {
        (sb.vsctl(&["list-ports", "br-int"]).trim().is_empty() && bridge_record(sb).is_none())
            .then_some(())
    });
    assert_restored(sb.ns(), "eth1", before);
}

fn manifests_args(dir: &Path) -> Vec<String> {
    vec!["--manifests".into(), dir.to_str().unwrap().into()]
}

#[test]
fn daemon_from_manifests_with_kill9_at_every_step() {
    if !privileged("daemon_from_manifests_with_kill9_at_every_step") {
        return;
    }
    let (sb, peer) = setup();
    let vm = sb.ns();
    let before = snapshot(vm, "eth1");
    let dir = sb.dir().join("manifests");
    std::fs::create_dir_all(&dir).unwrap();
    write_en(&dir, Some(EN_YAML));
    let args = manifests_args(&dir);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();

    // Takeover from the manifests directory; traffic through OVS.
    let d = Daemon::start(&sb, &args, None);
    wait_attached(&sb, "192.0.2.10,2001:db8:1::10", "takeover from manifests");
    neutralise_uplink(vm, "eth1~", true);
    assert_clean_ping(&peer, "192.0.2.10");
    assert_clean_ping(&peer, "2001:db8:1::10");
    tcp_transfer(vm, &peer, "2001:db8:1::10");
    neutralise_uplink(vm, "eth1~", false);
    // A restart of tether does not interrupt anything and changes nothing.
    d.stop();
    let d = Daemon::start(&sb, &args, None);
    wait_attached(&sb, "192.0.2.10,2001:db8:1::10", "restart while attached");
    d.stop();

    for (take, restore) in [
        ("rename", "flows"),
        ("ports", "ports"),
        ("move", "rename"),
        ("flows", "move"),
    ] {
        // From attached: delete the EN, crash in the restore, restart → restored exactly.
        write_en(&dir, None);
        Daemon::start(&sb, &args, Some(&format!("restore-{restore}")))
            .expect_abort(&sb, &format!("restore-{restore}"));
        let d = Daemon::start(&sb, &args, None);
        wait_restored(&sb, &before, &format!("restart after restore-{restore}"));
        assert_clean_ping(&peer, "192.0.2.10");
        d.stop();

        // From plain: the EN comes back, crash in the takeover, restart → attached.
        write_en(&dir, Some(EN_YAML));
        Daemon::start(&sb, &args, Some(&format!("takeover-{take}")))
            .expect_abort(&sb, &format!("takeover-{take}"));
        let d = Daemon::start(&sb, &args, None);
        wait_attached(
            &sb,
            "192.0.2.10,2001:db8:1::10",
            &format!("restart after takeover-{take}"),
        );
        let out = ping(&peer, "192.0.2.10");
        assert!(out.contains("3 received"), "after takeover-{take}: {out}");
        d.stop();
    }

    // Finally the delete, by a running daemon.
    let d = Daemon::start(&sb, &args, None);
    write_en(&dir, None);
    wait_restored(&sb, &before, "delete from manifests");
    d.stop();
}

fn en_json(ips: &[&str]) -> serde_json::Value {
    json!({"apiVersion": "crd.antrea.io/v1alpha1", "kind": "ExternalNode",
           "metadata": {"namespace": "default", "name": "vm1"},
           "spec": {"interfaces": [{"ips": ips}]}})
}

#[test]
fn daemon_from_the_api_server() {
    if !privileged("daemon_from_the_api_server") {
        return;
    }
    let (sb, peer) = setup();
    let vm = sb.ns();
    let before = snapshot(vm, "eth1");
    let srv = apiserver::ApiServer::start(apiserver::Options::default());
    let api = common::relay::ApiInNetns::new(vm, sb.dir(), &srv.url(), None);
    let kubeconfig = &api.kubeconfig;
    let args = [
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--allow-plain-http",
    ];

    let d = Daemon::start(&sb, &args, None);
    srv.create(en_json(&["192.0.2.10", "2001:db8:1::10"]));
    wait_attached(&sb, "192.0.2.10,2001:db8:1::10", "takeover from the API");
    neutralise_uplink(vm, "eth1~", true);
    assert_clean_ping(&peer, "192.0.2.10");
    assert_clean_ping(&peer, "2001:db8:1::10");

    // An IP added on the VM and to the ExternalNode: external_ids follow.
    vm.ip(&["addr", "add", "192.0.2.11/24", "dev", "eth1"]);
    srv.update(en_json(&["192.0.2.10", "2001:db8:1::10", "192.0.2.11"]));
    wait_attached(
        &sb,
        "192.0.2.10,192.0.2.11,2001:db8:1::10",
        "external_ids follow the new IP",
    );
    vm.ip(&["addr", "del", "192.0.2.11/24", "dev", "eth1"]);

    // kill -9 of tether while attached: traffic keeps flowing, the restart converges.
    drop(d);
    assert_clean_ping(&peer, "192.0.2.10");
    srv.update(en_json(&["192.0.2.10", "2001:db8:1::10"]));
    let d = Daemon::start(&sb, &args, None);
    wait_attached(&sb, "192.0.2.10,2001:db8:1::10", "restart after kill -9");

    neutralise_uplink(vm, "eth1~", false);
    srv.delete("externalnodes", "default/vm1");
    wait_restored(&sb, &before, "delete from the API");
    assert_clean_ping(&peer, "192.0.2.10");
    assert_clean_ping(&peer, "2001:db8:1::10");
    d.stop();
}

/// A VM the way Antrea's agent leaves it after taking its NIC over
/// (docs/antrea-compat.md#port-external-ids, docs/antrea-compat.md#externalnode-flows,
/// docs/antrea-compat.md#takeover-and-restore-sequence): `eth1` renamed `eth1~` and
/// attached as the uplink (`antrea-type=uplink`), an internal host port `eth1` with the
/// NIC's MAC and MTU and Antrea's external_ids, the addresses and routes on it, Antrea's VM
/// pipeline (tables 0–16, its cookies, round 3 in `roundNum`) on the bridge.
fn antrea_takeover(sb: &Sandbox) {
    let vm = sb.ns();
    vm.sh("ip link set eth1 down
         ip link set eth1 name eth1~
         ip addr flush dev eth1~
         ip link set eth1~ up");
    sb.vsctl(&[
        "add-port",
        "br-int",
        "eth1~",
        "--",
        "set",
        "Port",
        "eth1~",
        "external_ids:antrea-type=uplink",
    ]);
    let uplink = sb
        .vsctl(&["get", "Port", "eth1~", "_uuid"])
        .trim()
        .to_string();
    sb.vsctl(&[
        "add-port",
        "br-int",
        "eth1",
        "--",
        "set",
        "Interface",
        "eth1",
        "type=internal",
        "mac=\"02:00:00:00:01:10\"",
        "mtu_request=1450",
        "--",
        "set",
        "Port",
        "eth1",
        "external_ids:antrea-type=host",
        "external_ids:uplink-name=eth1~",
        &format!("external_ids:uplink-port={uplink}"),
        "external_ids:entity-name=vm1",
        "external_ids:entity-namespace=default",
        "external_ids:ip-address=\"192.0.2.10,2001:db8:1::10\"",
    ]);
    wait_for(Duration::from_secs(5), "host port netdev", || {
        vm.try_ip(&["link", "show", "eth1"]).ok()
    });
    vm.sh("ip link set eth1 up
         ip addr add 192.0.2.10/24 dev eth1
         ip -6 addr add 2001:db8:1::10/64 dev eth1
         ip route add default via 192.0.2.1 dev eth1
         ip -6 route add default via 2001:db8:1::1 dev eth1");
    neutralise_uplink(vm, "eth1~", true);
    // Antrea's agent leaves the uplink's IPv6 on (tether turns it off when it adopts the
    // NIC); on the userspace datapath the kernel would answer through it as well. Harness
    // only.
    if !common::kernel_datapath() {
        vm.sh("sysctl -qw net.ipv6.conf.eth1~.disable_ipv6=1");
    }
    let (h, u) = (ofport(sb, "eth1"), ofport(sb, "eth1~"));
    let d = "cookie=0x3000000000000";
    let en = "cookie=0x3080000000000";
    let mut flows = vec![
        format!("{d},table=0,priority=200,ip actions=goto_table:1"),
        format!("{d},table=0,priority=190 actions=goto_table:16"),
        format!("{d},table=0,priority=0 actions=drop"),
        format!("{en},table=1,priority=200,ip actions=ct(table=2,zone=65520)"),
        format!("{en},table=2,priority=210,ct_state=+inv+trk,ip actions=drop"),
        format!(
            "{en},table=8,priority=200,ip,in_port={h} actions=set_field:0x200000/0x600000->reg0,set_field:{u}->reg1,goto_table:9"
        ),
        format!(
            "{en},table=8,priority=200,ip,in_port={u} actions=set_field:0x200000/0x600000->reg0,set_field:{h}->reg1,goto_table:9"
        ),
        format!(
            "{en},table=14,priority=200,ct_state=+new+trk,ip actions=ct(commit,table=15,zone=65520)"
        ),
        format!("{en},table=15,priority=200,reg0=0x200000/0x600000 actions=output:NXM_NX_REG1[]"),
        format!("{d},table=15,priority=0 actions=drop"),
        format!("{en},table=16,priority=200,in_port={h} actions=output:{u}"),
        format!("{en},table=16,priority=200,in_port={u} actions=output:{h}"),
        format!("{d},table=16,priority=0 actions=drop"),
    ];
    for t in 1..15 {
        flows.push(format!(
            "{d},table={t},priority=0 actions=goto_table:{}",
            t + 1
        ));
    }
    let file = sb.path("antrea-flows.txt");
    std::fs::write(&file, flows.join("\n") + "\n").unwrap();
    sb.ofctl(&[
        "-O",
        "OpenFlow15",
        "add-flows",
        "br-int",
        file.to_str().unwrap(),
    ]);
    sb.vsctl(&["set", "Bridge", "br-int", "external_ids:roundNum=3"]);
}

/// Adopt, do not redo: tether started on a VM whose NIC Antrea's agent took over (the same
/// ExternalNode) keeps the links, the addresses and the ports as they are and replaces
/// Antrea's flows by its own in one atomic bundle. A ping at 50 pps across the switch-over
/// loses nothing; `ip monitor link` sees no link go down.
#[test]
fn adopts_a_vm_antreas_agent_took_over() {
    if !privileged("adopts_a_vm_antreas_agent_took_over") {
        return;
    }
    let (sb, peer) = setup();
    let vm = sb.ns();
    antrea_takeover(&sb);
    // Antrea's pipeline forwards, both families.
    assert_clean_ping(&peer, "192.0.2.10");
    assert_clean_ping(&peer, "2001:db8:1::10");
    let ports = (
        sb.vsctl(&["get", "Port", "eth1", "_uuid"]),
        sb.vsctl(&["get", "Port", "eth1~", "_uuid"]),
    );
    let host_before = snapshot(vm, "eth1");
    let antrea_round = "cookie=0x3000000000000/0xffff000000000000";
    assert!(!sb.dump_flows("br-int", Some(antrea_round)).is_empty());

    let dir = sb.dir().join("manifests");
    std::fs::create_dir_all(&dir).unwrap();
    write_en(&dir, Some(EN_YAML));
    let monitor = vm
        .command(&["ip", "-o", "monitor", "link"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // 50 pps for 8 s, across the whole switch-over.
    let ping = peer
        .command(&[
            "ping",
            "-c",
            "400",
            "-i",
            "0.02",
            "-W",
            "1",
            "-q",
            "192.0.2.10",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let args = manifests_args(&dir);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let d = Daemon::start(&sb, &args, None);
    wait_attached(&sb, "192.0.2.10,2001:db8:1::10", "adopted");
    wait_for(Duration::from_secs(10), "Antrea's round gone", || {
        sb.dump_flows("br-int", Some(antrea_round))
            .is_empty()
            .then_some(())
    });
    let out = ping.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("400 packets transmitted, 400 received, 0% packet loss"),
        "{text}\n{}",
        log_tail(&sb)
    );
    let mut monitor = monitor;
    let _ = monitor.kill();
    let events = String::from_utf8_lossy(&monitor.wait_with_output().unwrap().stdout).into_owned();
    assert!(
        !events
            .lines()
            .any(|l| l.contains("eth1") && !l.contains(",UP")),
        "a link went down:\n{events}"
    );
    // Nothing moved: the same ports, the same host port configuration; one switch-over.
    assert_eq!(
        (
            sb.vsctl(&["get", "Port", "eth1", "_uuid"]),
            sb.vsctl(&["get", "Port", "eth1~", "_uuid"])
        ),
        ports
    );
    assert_eq!(snapshot(vm, "eth1"), host_before);
    let log = std::fs::read_to_string(sb.path("tether.log")).unwrap();
    assert!(!log.contains("taking over"), "{log}");
    assert!(
        log.contains("openflow replaced round 3 in one bundle"),
        "{log}"
    );
    assert_eq!(
        sb.vsctl(&["get", "Bridge", "br-int", "external_ids:roundNum"])
            .trim(),
        "\"4\""
    );
    assert_clean_ping(&peer, "2001:db8:1::10");
    // The uplink has IPv6 off, as after tether's own takeover.
    assert_eq!(
        vm.exec(&["sysctl", "-n", "net.ipv6.conf.eth1~.disable_ipv6"])
            .trim(),
        "1"
    );
    d.stop();
}

/// `ip -j link/addr/route` of the whole VM namespace, every routing table: what "the VM as
/// before tether" is compared on. Routes are sorted: the kernel lists a table in the order
/// its entries were (re)inserted, which carries no meaning.
fn vm_snapshot(vm: &common::Netns) -> serde_json::Value {
    let routes = |args: &[&str]| {
        let mut v: Vec<serde_json::Value> = json_of(&vm.ip(args)).as_array().unwrap().clone();
        v.sort_by_key(|r| r.to_string());
        serde_json::Value::Array(v)
    };
    json!({
        "link": json_of(&vm.ip(&["-j", "link", "show"])),
        "addr": json_of(&vm.ip(&["-j", "addr", "show"])),
        "route4": routes(&["-j", "route", "show", "table", "all"]),
        "route6": routes(&["-j", "-6", "route", "show", "table", "all"]),
    })
}

/// The VM namespace equals `before` (ovs-vswitchd drops PROMISC a moment after a port
/// goes: that is the only thing waited for).
fn assert_vm_restored(vm: &common::Netns, before: &serde_json::Value, what: &str) {
    let end = Instant::now() + common::patience(Duration::from_secs(5));
    loop {
        let now = vm_snapshot(vm);
        if &now == before {
            return;
        }
        if Instant::now() > end {
            for k in ["link", "addr", "route4", "route6"] {
                assert_eq!(now[k], before[k], "{what}: {k} is not as before tether");
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `tether <cmd> [extra]` in the VM namespace: (exit code, stdout, stderr).
fn tether_cmd(sb: &Sandbox, cmd: &str, bridge: &str, extra: &[&str]) -> (i32, String, String) {
    let argv = tether_argv(sb, cmd, extra, bridge);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let out = sb.ns().command(&argv).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn reset(sb: &Sandbox, bridge: &str, extra: &[&str]) -> (i32, String, String) {
    tether_cmd(sb, "reset", bridge, extra)
}

/// Flows on br-int as ovs-ofctl prints them, and whether tether's keys are gone.
fn bridge_clean(sb: &Sandbox) -> (Vec<String>, String, String) {
    (
        sb.dump_flows("br-int", None),
        sb.vsctl(&["list-ports", "br-int"]),
        sb.vsctl(&["get", "Bridge", "br-int", "external_ids"]),
    )
}

const FOREIGN: &str = "cookie=0x99, table=7, priority=5 actions=drop";
const FOREIGN_DUMPED: &str = "cookie=0x99, table=7, reset_counts priority=5 actions=drop";
const TC_YAML: &str = "apiVersion: crd.antrea.io/v1alpha2\nkind: TrafficControl\nmetadata:\n  name: tap\nspec:\n  appliedTo:\n    podSelector:\n      matchLabels:\n        app: web\n  direction: Both\n  action: Mirror\n  targetPort:\n    ovsInternal: {name: tap0}\n";

/// `tether reset` gives the VM back exactly (the whole namespace's links, addresses and
/// routes equal a snapshot from before tether ever ran) and leaves no tether port, flow or
/// key: after a SIGTERM'd daemon, after `kill -9` at every takeover step, twice in a row;
/// it refuses beside a running daemon and keeps a bridge tether did not create.
#[test]
fn reset_gives_the_vm_back_exactly() {
    if !privileged("reset_gives_the_vm_back_exactly") {
        return;
    }
    let (sb, peer) = setup();
    let vm = sb.ns();
    sb.ofctl(&["add-flow", "br-int", FOREIGN]);
    let ids_before = sb.vsctl(&["get", "Bridge", "br-int", "external_ids"]);
    let before = vm_snapshot(vm);
    let dir = sb.dir().join("manifests");
    std::fs::create_dir_all(&dir).unwrap();
    write_en(&dir, Some(EN_YAML));
    std::fs::write(dir.join("tc.yaml"), TC_YAML).unwrap();
    let args = manifests_args(&dir);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let clean = || {
        (
            vec![FOREIGN_DUMPED.to_string()],
            String::new(),
            ids_before.clone(),
        )
    };

    // Attached, with a TrafficControl port; a reset beside the running daemon is refused.
    let d = Daemon::start(&sb, &args, None);
    wait_attached(&sb, "192.0.2.10,2001:db8:1::10", "takeover");
    wait_for(Duration::from_secs(15), "the TC's port", || {
        sb.try_vsctl(&["get", "Interface", "tap0", "ofport"]).ok()
    });
    let (code, out, err) = reset(&sb, "br-int", &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(out, "");
    let sock = sb.path("tether.sock");
    assert_eq!(
        err,
        format!(
            "tether reset: a tether daemon answers on {}: stop it first (systemctl stop tether); reset never runs beside it\n",
            sock.display()
        )
    );
    assert!(sb.vsctl(&["list-ports", "br-int"]).contains("eth1~"));
    d.stop();

    // After a SIGTERM (ports and flows stay): reset.
    let (code, out, err) = reset(&sb, "br-int", &["--delete-bridge"]);
    assert_eq!(code, 0, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "restored eth1: its name, MAC, MTU, sysctls, addresses and routes are back"
    );
    assert_eq!(lines[1], "deleted port tap0");
    assert!(
        lines[2].starts_with("deleted ") && lines[2].ends_with(" cookies)"),
        "{out}"
    );
    assert_eq!(lines[3], "cleared external_ids:roundNum of bridge br-int");
    assert_eq!(
        lines[4],
        "kept bridge br-int: tether did not create it (no external_ids:tether-created)"
    );
    assert_eq!(lines.len(), 5, "{out}");
    assert_vm_restored(vm, &before, "reset after SIGTERM");
    assert_eq!(bridge_clean(&sb), clean());
    assert_clean_ping(&peer, "192.0.2.10");

    // Again: nothing to do, nothing changes.
    let (code, out, err) = reset(&sb, "br-int", &[]);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (0, "nothing to reset on bridge br-int\n", "")
    );
    assert_vm_restored(vm, &before, "second reset");

    // `kill -9` at each step of a takeover, then reset without a daemon.
    for step in ["rename", "ports", "move", "flows"] {
        Daemon::start(&sb, &args, Some(&format!("takeover-{step}")))
            .expect_abort(&sb, &format!("takeover-{step}"));
        let (code, out, err) = reset(&sb, "br-int", &[]);
        assert_eq!(code, 0, "after takeover-{step}: {out}{err}");
        assert_vm_restored(vm, &before, &format!("reset after takeover-{step}"));
        assert_eq!(bridge_clean(&sb), clean(), "after takeover-{step}");
    }
    assert_clean_ping(&peer, "192.0.2.10");

    // A bridge tether created goes with --delete-bridge.
    let empty = sb.dir().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let args = manifests_args(&empty);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let d = Daemon::start_on(&sb, &args, None, "br-new");
    wait_for(Duration::from_secs(15), "br-new's round", || {
        sb.try_vsctl(&["get", "Bridge", "br-new", "external_ids:roundNum"])
            .ok()
    });
    d.stop();
    let (code, out, err) = reset(&sb, "br-new", &["--delete-bridge"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.ends_with("deleted bridge br-new\n"), "{out}");
    assert!(sb.try_vsctl(&["br-exists", "br-new"]).is_err());
    assert_vm_restored(vm, &before, "after deleting br-new");
}

fn plan_cmd(sb: &Sandbox, source: &[&str]) -> (i32, String, String) {
    tether_cmd(sb, "plan", "br-int", source)
}

/// `tether plan` on a VM about to be taken over names the takeover and every address and
/// route that would move, and changes nothing; once converged it has nothing to do.
#[test]
fn plan_previews_the_takeover_and_changes_nothing() {
    if !privileged("plan_previews_the_takeover_and_changes_nothing") {
        return;
    }
    let (sb, _peer) = setup();
    let vm = sb.ns();
    let dir = sb.dir().join("manifests");
    std::fs::create_dir_all(&dir).unwrap();
    write_en(&dir, Some(EN_YAML));
    let args = manifests_args(&dir);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let state = || {
        (
            vm_snapshot(vm),
            sb.dump_flows("br-int", None),
            sb.vsctl(&[
                "--format=json",
                "--columns=name,external_ids,options",
                "list",
                "Interface",
            ]),
            sb.vsctl(&["get", "Bridge", "br-int", "external_ids"]),
        )
    };
    let before = state();
    let (code, out, err) = plan_cmd(&sb, &args);
    assert_eq!(state(), before, "tether plan changed something");
    assert_eq!((code, err.as_str()), (3, ""), "{out}");
    let en: Vec<&str> = out
        .lines()
        .skip_while(|l| *l != "externalnode:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert_eq!(
        en[0],
        "  take over eth1: rename eth1 to eth1~, create its ports, move its configuration to the host port eth1:"
    );
    assert!(
        en.iter().any(|l| l.contains("address 192.0.2.10/24")),
        "{out}"
    );
    assert!(
        en.iter().any(|l| l.contains("address 2001:db8:1::10/64")),
        "{out}"
    );
    assert!(
        en.iter().any(|l| l.contains("default via 192.0.2.1")),
        "{out}"
    );
    assert!(
        en.iter().any(|l| l.contains("default via 2001:db8:1::1")),
        "{out}"
    );
    assert!(
        out.starts_with(
            "ports:\n  create port eth1 (type internal)\n  create port eth1~ (type system)\n"
        ),
        "{out}"
    );

    let d = Daemon::start(&sb, &args, None);
    wait_attached(&sb, "192.0.2.10,2001:db8:1::10", "takeover");
    d.stop();
    let before = state();
    let (code, out, err) = plan_cmd(&sb, &args);
    assert_eq!(state(), before, "tether plan changed something");
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (
            0,
            "nothing to do: the bridge, its flows and the VM's links are as tether run would make them\n",
            ""
        )
    );

    // The ExternalNode keeps only its IPv4 address: a re-label of the host port, no more.
    write_en(&dir, Some(&EN_YAML.replace(", \"2001:db8:1::10\"", "")));
    let (code, out, _) = plan_cmd(&sb, &args);
    assert_eq!(state(), before, "tether plan changed something");
    assert_eq!(code, 3, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert_eq!(lines[0], "externalnode:");
    assert!(
        lines[1].starts_with("  re-label the host port eth1: external_ids ")
            && lines[1].contains("ip-address=192.0.2.10,")
            && !lines[1].contains("2001:db8"),
        "{out}"
    );
    assert_eq!(
        lines[2],
        "changes pending: 0 port, 0 link, 1 externalnode, 0 flows to add, 0 to delete"
    );
    let d = Daemon::start(&sb, &args, None);
    wait_attached(&sb, "192.0.2.10", "re-labelled by run");
    d.stop();
}
