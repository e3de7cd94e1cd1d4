//! What others do to Open vSwitch while tether holds the VM's NIC
//! (docs/reliability.md#outside-changes), each done with OVS's own tools: with the daemon
//! running, the VM answers again within 5 s and the log and `tether status` say what
//! happened; with the daemon stopped, `tether reset` gives the NIC back exactly as it was
//! before the takeover (`ip -j` of link, addresses and routes).

#![allow(clippy::unwrap_used)]

mod common;
mod externalnode_vm;

use std::time::{Duration, Instant};

use serde_json::Value;

use common::{Tether, privileged, tether::binary, wait_for};
use externalnode_vm::*;

/// The bed with tether holding `eth1`, and `eth1` as it was before.
fn attached() -> (Bed, Tether, Value) {
    let bed = Bed::new();
    let before = snapshot(bed.sb.ns(), "eth1");
    put(&bed.manifests, "en.yaml", EN_YAML);
    let t = bed.start();
    wait_attached(&bed, "the takeover");
    assert_clean_ping(&bed.peer, "192.0.2.10");
    // tether's own changes come back through the flow monitor too: read back, they match.
    std::thread::sleep(Duration::from_millis(500));
    let m = &bed.status()["metrics"];
    assert_eq!(m["flow_drift_repairs"].as_u64().unwrap_or(0), 0, "{m}");
    (bed, t, before)
}

fn wait_attached(bed: &Bed, what: &str) {
    wait_for(
        Duration::from_secs(20),
        &format!("the ExternalNode attached after {what}"),
        || (bed.status()["external_node"]["step"] == "attached").then_some(()),
    );
    neutralise_uplink(bed.sb.ns(), "eth1~", true);
}

/// The peer reaches the VM again within 5 s (stretched under emulation); how long it took.
fn reachable_again(bed: &Bed, what: &str) -> Duration {
    let t0 = Instant::now();
    wait_for(
        Duration::from_secs(5),
        &format!("the VM answering after {what}"),
        || {
            let o = bed
                .peer
                .try_exec(&["ping", "-c", "1", "-W", "1", "192.0.2.10"])
                .ok()?;
            o.contains(" 1 received").then_some(())
        },
    );
    let took = t0.elapsed();
    eprintln!("outside change {what}: the VM answered again after {took:?}");
    took
}

/// `tether reset` with the daemon's settings; exit code and output.
fn reset(bed: &Bed) -> (i32, String) {
    let dir = bed.sb.dir().to_str().unwrap().to_string();
    let state = bed.sb.path("state");
    let mut argv = vec![binary().to_str().unwrap().to_string(), "reset".into()];
    argv.extend(
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
            bed.sock.to_str().unwrap(),
        ]
        .map(String::from),
    );
    if common::tether::state_dir_flag() {
        argv.extend(["--state-dir".into(), state.to_str().unwrap().to_string()]);
    }
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let o = bed.sb.ns().command(&argv).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code().unwrap_or(-1), text)
}

/// With the daemon running: `change` (with OVS's tools), then the VM answers again, the
/// log has `logged`, tether holds the NIC again, and status counts the repair at
/// `counted` (a JSON pointer).
fn survives(test: &str, what: &str, change: impl Fn(&Bed), logged: &str, counted: &str) {
    if !privileged(test) {
        return;
    }
    let (bed, t, _) = attached();
    change(&bed);
    reachable_again(&bed, what);
    t.wait_log(logged, Duration::from_secs(10));
    wait_attached(&bed, what);
    assert_clean_ping(&bed.peer, "192.0.2.10");
    let st = bed.status();
    assert_eq!(st["external_node"]["last_error"], Value::Null, "{st}");
    assert!(
        st.pointer(counted).and_then(Value::as_u64).unwrap_or(0) >= 1,
        "{counted} in {st}"
    );
}

/// With the daemon stopped: `change`; `tether plan` shows the ExternalNode step `planned`
/// (the controller's own decision) and `tether check` the finding `checked`; then
/// `tether reset` gives `eth1` back exactly.
fn reset_after(test: &str, change: impl Fn(&Bed), planned: &str, checked: &str) {
    if !privileged(test) {
        return;
    }
    let (bed, mut t, before) = attached();
    assert_eq!(t.stop(), Some(0));
    change(&bed);
    let (code, plan) = bed.tool("plan");
    assert_eq!(code, 3, "{plan}");
    assert!(plan.lines().any(|l| l.trim_start() == planned), "{plan}");
    let (_, check) = bed.tool("check");
    assert!(check.lines().any(|l| l == checked), "{check}");
    let (code, out) = reset(&bed);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("restored eth1: its name, MAC, MTU, sysctls, addresses and routes are back"),
        "{out}"
    );
    assert_restored(bed.sb.ns(), "eth1", &before);
    assert!(
        bed.sb
            .ns()
            .try_ip(&["link", "show", "dev", "eth1~"])
            .is_err()
    );
}

/// What `tether plan` and `tether check` say of a NIC whose host port OVS lost.
const GIVE_BACK_PLANNED: &str = "give eth1 back from the state directory's copy of its configuration (OVS lost its host port): rename eth1~ to eth1, put its addresses, routes and sysctls back";
const GIVE_BACK_CHECKED: &str = "WARN externalnode: default/vm1: OVS lost eth1's host port: tether run gives eth1 back from the state directory's copy of its configuration first";

/// `ovs-vsctl <args>` on the bed's switch.
fn vsctl(args: &'static [&'static str]) -> impl Fn(&Bed) {
    move |bed: &Bed| {
        bed.sb.vsctl(args);
    }
}

#[test]
fn host_port_deleted_while_running() {
    survives(
        "host_port_deleted_while_running",
        "del-port eth1",
        vsctl(&["del-port", "br-int", "eth1"]),
        "giving the NIC back from its held configuration",
        "/external_node/repairs",
    );
}

#[test]
fn host_port_deleted_then_reset() {
    reset_after(
        "host_port_deleted_then_reset",
        vsctl(&["del-port", "br-int", "eth1"]),
        GIVE_BACK_PLANNED,
        GIVE_BACK_CHECKED,
    );
}

#[test]
fn uplink_port_deleted_while_running() {
    survives(
        "uplink_port_deleted_while_running",
        "del-port eth1~",
        vsctl(&["del-port", "br-int", "eth1~"]),
        "uplink port missing nic=eth1",
        "/external_node/repairs",
    );
}

#[test]
fn uplink_port_deleted_then_reset() {
    reset_after(
        "uplink_port_deleted_then_reset",
        vsctl(&["del-port", "br-int", "eth1~"]),
        "give eth1 back and take it over again (its uplink port is gone): rename eth1 to eth1~, create its ports, move its configuration to the host port eth1:",
        "WARN externalnode: default/vm1: eth1 is attached but its uplink port eth1~ is gone from the bridge: tether run gives eth1 back and takes it over again",
    );
}

#[test]
fn bridge_deleted_while_running() {
    survives(
        "bridge_deleted_while_running",
        "del-br br-int",
        vsctl(&["del-br", "br-int"]),
        "created it again with tether's settings",
        "/metrics/bridge_recreations",
    );
}

#[test]
fn bridge_deleted_then_reset() {
    reset_after(
        "bridge_deleted_then_reset",
        vsctl(&["del-br", "br-int"]),
        GIVE_BACK_PLANNED,
        GIVE_BACK_CHECKED,
    );
}

/// OVS's database replaced by an empty one, as ovs-lib does when a schema conversion
/// fails: ovsdb-server stopped, a fresh database (no `Open_vSwitch` row, no bridge),
/// ovsdb-server started; ovs-vswitchd (still running) then removes every bridge.
fn empty_the_database(bed: &Bed) {
    bed.sb.kill9("ovsdb-server");
    let db = bed.sb.path("conf.db");
    std::fs::remove_file(&db).unwrap();
    common::run(std::process::Command::new("ovsdb-tool").args([
        "create",
        db.to_str().unwrap(),
        common::ovs::SCHEMA,
    ]));
    bed.sb.start_ovsdb();
}

#[test]
fn database_emptied_while_running() {
    survives(
        "database_emptied_while_running",
        "an emptied OVS database",
        empty_the_database,
        "created it again with tether's settings",
        "/metrics/bridge_recreations",
    );
}

#[test]
fn database_emptied_then_reset() {
    reset_after(
        "database_emptied_then_reset",
        empty_the_database,
        GIVE_BACK_PLANNED,
        GIVE_BACK_CHECKED,
    );
}

/// Every flow of the bridge, as `ovs-ofctl dump-flows` prints them without counters.
fn all_flows(bed: &Bed) -> Vec<String> {
    let mut v = bed.sb.dump_flows("br-int", None);
    v.sort();
    v
}

#[test]
fn flows_deleted_while_running() {
    if !privileged("flows_deleted_while_running") {
        return;
    }
    let (bed, mut t, _) = attached();
    t.expect_drift();
    let before = all_flows(&bed);
    bed.sb.ofctl(&["del-flows", "br-int"]);
    reachable_again(&bed, "del-flows");
    t.wait_log(
        "differed from what tether installed",
        Duration::from_secs(10),
    );
    assert!(bed.status()["metrics"]["flow_drift_repairs"].as_u64() >= Some(1));
    wait_for(Duration::from_secs(5), "every flow back", || {
        (all_flows(&bed) == before).then_some(())
    });
    assert_clean_ping(&bed.peer, "192.0.2.10");
}

#[test]
fn a_flow_modified_or_added_under_tethers_cookie_is_put_right() {
    if !privileged("a_flow_modified_or_added_under_tethers_cookie_is_put_right") {
        return;
    }
    let (bed, mut t, _) = attached();
    t.expect_drift();
    let before = all_flows(&bed);
    // The uplink pair's flows (matching in_port) told to drop, and a flow of someone
    // else's under the same cookie.
    let pair = before
        .iter()
        .find(|f| f.contains("in_port="))
        .unwrap_or_else(|| panic!("no uplink flow in {before:#?}"))
        .clone();
    let cookie = pair
        .split([',', ' '])
        .find_map(|w| w.strip_prefix("cookie="))
        .unwrap()
        .to_string();
    bed.sb.ofctl(&[
        "mod-flows",
        "br-int",
        &format!("cookie={cookie}/-1,actions=drop"),
    ]);
    bed.sb.ofctl(&[
        "add-flow",
        "br-int",
        &format!("cookie={cookie},table=0,priority=1,arp,actions=drop"),
    ]);
    t.wait_log(
        "differed from what tether installed",
        Duration::from_secs(10),
    );
    assert!(bed.status()["metrics"]["flow_drift_repairs"].as_u64() >= Some(1));
    wait_for(
        Duration::from_secs(5),
        "the flows as tether installed them",
        || (all_flows(&bed) == before).then_some(()),
    );
    assert_clean_ping(&bed.peer, "192.0.2.10");
}

#[test]
fn runtime_directory_wiped_while_running() {
    if !privileged("runtime_directory_wiped_while_running") {
        return;
    }
    let (bed, t, _) = attached();
    // The state socket's directory, as systemd-tmpfiles or an operator would wipe it.
    let dir = bed.sb.path("run");
    let sock = dir.join("tether.sock");
    assert_eq!(
        bed.sock.parent(),
        Some(dir.as_path()),
        "the bed's socket is in run/"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    t.wait_log("listening there again", Duration::from_secs(10));
    wait_for(
        Duration::from_secs(5),
        "tether status answering again",
        || (bed.status()["external_node"]["step"] == "attached").then_some(()),
    );
    assert!(sock.exists());
    assert_clean_ping(&bed.peer, "192.0.2.10");
}

#[test]
fn reset_is_refused_beside_a_daemon_whose_socket_is_busy() {
    if !privileged("reset_is_refused_beside_a_daemon_whose_socket_is_busy") {
        return;
    }
    let (bed, _t, _) = attached();
    // 32 idle clients: the state socket answers "error: busy" to the next one.
    let idle: Vec<std::os::unix::net::UnixStream> = (0..32)
        .map(|_| std::os::unix::net::UnixStream::connect(&bed.sock).unwrap())
        .collect();
    // Until the daemon has taken all 32 in (a moment under emulation), a 33rd is served.
    wait_for(Duration::from_secs(10), "the state socket busy", || {
        use std::io::Read;
        let mut c = std::os::unix::net::UnixStream::connect(&bed.sock).ok()?;
        c.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        let mut answer = String::new();
        let _ = c.read_to_string(&mut answer);
        (answer == "error: busy\n").then_some(())
    });
    let (code, out) = reset(&bed);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("holds the OVSDB lock tether_br_int")
            && out.contains("reset never runs beside it"),
        "{out}"
    );
    drop(idle);
    assert_eq!(bed.status()["external_node"]["step"], "attached");
    assert!(
        bed.sb
            .ns()
            .try_ip(&["link", "show", "dev", "eth1~"])
            .is_ok()
    );
    assert_clean_ping(&bed.peer, "192.0.2.10");
}
