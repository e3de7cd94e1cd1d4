//! Self-tests of the shared harness: a sandbox really runs OVS in its own namespace, two run
//! side by side, dummy ports work, a panicking test still cleans up, and `in_netns` runs the
//! body inside the namespace.

// Test helpers fail loudly by design; clippy.toml only covers #[test] fns.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

use common::{Netns, Sandbox, SandboxOpts, in_netns, privileged};

fn netns_exists(name: &str) -> bool {
    common::run(Command::new("ip").args(["netns", "list"]))
        .lines()
        .any(|l| l.split_whitespace().next() == Some(name))
}

#[test]
fn sandbox_runs_ovs_in_its_own_netns() {
    if !privileged("sandbox_runs_ovs_in_its_own_netns") {
        return;
    }
    let sb = Sandbox::start();
    sb.add_bridge("br-int");
    sb.add_internal_port("br-int", "p1", &[]);
    let ofport = sb.vsctl(&["get", "Interface", "p1", "ofport"]);
    assert_eq!(ofport.trim(), "1");
    // The internal port's tap exists in the sandbox namespace, not in ours.
    sb.ns().ip(&["link", "show", "p1"]);
    assert!(
        Command::new("ip")
            .args(["link", "show", "p1"])
            .output()
            .unwrap()
            .status
            .code()
            != Some(0)
    );
    // Both daemons' pids are in the sandbox namespace.
    let pids = sb.ns().pids();
    assert!(pids.contains(&sb.pid("ovsdb-server").unwrap()));
    assert!(pids.contains(&sb.pid("ovs-vswitchd").unwrap()));
    assert!(sb.mgmt("br-int").exists());
}

#[test]
fn two_sandboxes_side_by_side() {
    if !privileged("two_sandboxes_side_by_side") {
        return;
    }
    let a = Sandbox::start();
    let b = Sandbox::start();
    a.add_bridge("br-int");
    b.add_bridge("br-int");
    let dpid = |s: &Sandbox| s.vsctl(&["get", "Bridge", "br-int", "datapath_id"]);
    assert_ne!(dpid(&a).trim(), "[]");
    assert_ne!(dpid(&b).trim(), "[]");
    assert_ne!(a.dir(), b.dir());
}

#[test]
fn dummy_ports_with_enable_dummy() {
    if !privileged("dummy_ports_with_enable_dummy") {
        return;
    }
    let sb = Sandbox::start_with(SandboxOpts { dummy: true });
    // On a userspace bridge whatever the test datapath: dummy ports live in ovs-vswitchd
    // only, and a kernel datapath cannot hold them (ofport -1 on a `system` bridge). The
    // scale benches, which use them, run on `netdev` for that reason.
    sb.vsctl(&[
        "add-br",
        "br-int",
        "--",
        "set",
        "bridge",
        "br-int",
        "datapath_type=netdev",
    ]);
    sb.vsctl(&[
        "add-port",
        "br-int",
        "d1",
        "--",
        "set",
        "Interface",
        "d1",
        "type=dummy",
    ]);
    let v = sb.vsctl_json("Interface", Some("d1"), "ofport,error");
    assert_eq!(v["data"][0][0], serde_json::json!(1));
    assert_eq!(v["data"][0][1], serde_json::json!(["set", []]));
}

#[test]
fn kill9_and_restart_vswitchd() {
    if !privileged("kill9_and_restart_vswitchd") {
        return;
    }
    let sb = Sandbox::start();
    sb.add_bridge("br-int");
    let before = sb.pid("ovs-vswitchd").unwrap();
    sb.kill9("ovs-vswitchd");
    assert_eq!(sb.pid("ovs-vswitchd"), None);
    sb.start_vswitchd();
    let after = sb.pid("ovs-vswitchd").unwrap();
    assert_ne!(before, after);
    assert_eq!(
        sb.dump_flows("br-int", None),
        vec!["priority=0 actions=NORMAL"]
    );
}

#[test]
fn guard_cleans_up_after_a_panic() {
    if !privileged("guard_cleans_up_after_a_panic") {
        return;
    }
    let (dir, ns, pids) = std::panic::catch_unwind(|| {
        let sb = Sandbox::start();
        let info = (
            sb.dir().to_path_buf(),
            sb.ns().name().to_string(),
            vec![
                sb.pid("ovsdb-server").unwrap(),
                sb.pid("ovs-vswitchd").unwrap(),
            ],
        );
        std::panic::panic_any(info);
    })
    .unwrap_err()
    .downcast::<(std::path::PathBuf, String, Vec<u32>)>()
    .map(|b| *b)
    .unwrap();
    assert!(!dir.exists(), "sandbox dir {} left behind", dir.display());
    assert!(!netns_exists(&ns), "netns {ns} left behind");
    for p in pids {
        assert!(!common::pid_alive(p), "daemon pid {p} left running");
    }
}

#[test]
fn in_netns_runs_the_body_inside() {
    if !privileged("in_netns_runs_the_body_inside") {
        return;
    }
    in_netns("in_netns_runs_the_body_inside", |ns| {
        // A link added here (plain `ip`, no -n) is visible through `ip -n <ns>`: the body
        // really runs inside. (This kernel has no `dummy` link type; veth it is.)
        common::run(Command::new("ip").args([
            "link",
            "add",
            "tt-probe",
            "type",
            "veth",
            "peer",
            "name",
            "tt-probe2",
        ]));
        assert!(ns.ip(&["link", "show", "tt-probe"]).contains("tt-probe"));
    });
}

#[test]
fn netns_guard_deletes_namespace() {
    if !privileged("netns_guard_deletes_namespace") {
        return;
    }
    let name = {
        let ns = Netns::new("g");
        assert!(netns_exists(ns.name()));
        ns.name().to_string()
    };
    assert!(!netns_exists(&name));
}
