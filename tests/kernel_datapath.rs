//! What only Open vSwitch's kernel (`system`) datapath does, checked with real packets in
//! the kernel tier's VM (scripts/kernel-tier.sh: Debian's 6.1 kernel and its openvswitch.ko):
//! the datapath outliving ovs-vswitchd, Debian's `ovs-ctl restart` and `force-reload-kmod`,
//! tunnel targets as the kernel's own devices, an underlay MTU with no room for a tunnel's
//! headers, ovsdb-server down. docs/datapath.md cites each test.
//!
//! On the userspace datapath (these machines' default) each test says SKIPPED and why:
//! there is no kernel datapath there to outlive anything, and tunnels are not devices.

#![allow(clippy::unwrap_used)]

mod common;
mod e2e;
mod externalnode_vm;

use std::time::Duration;

use common::pinger::{Pinger, now};
use common::{Netns, Sandbox, privileged, wait_for};
use externalnode_vm::*;

/// Run only on the kernel datapath; elsewhere say SKIPPED with `why`.
fn kernel_only(test: &str, why: &str) -> bool {
    if !privileged(test) {
        return false;
    }
    if !common::kernel_datapath() {
        eprintln!(
            "SKIPPED {test}: kernel datapath only ({why}); scripts/kernel-tier.sh runs it with \
             TETHER_TEST_DATAPATH=system"
        );
        return false;
    }
    true
}

/// The ExternalNode bed with tether holding `eth1`: the peer namespace reaches the VM at
/// 192.0.2.10 through the uplink and the host port.
fn attached() -> (Bed, common::Tether) {
    let bed = Bed::new();
    put(&bed.manifests, "en.yaml", EN_YAML);
    let t = bed.start();
    wait_for(Duration::from_secs(20), "the ExternalNode attached", || {
        (bed.status()["external_node"]["step"] == "attached").then_some(())
    });
    assert_clean_ping(&bed.peer, "192.0.2.10");
    (bed, t)
}

/// tether's flows (every category), as `ovs-ofctl dump-flows` prints them.
fn flows(sb: &Sandbox) -> Vec<String> {
    sb.dump_flows("br-int", None)
}

/// `ovs-dpctl show` in the VM: the kernel's own view, answered with ovs-vswitchd dead.
fn dpctl_show(vm: &Netns) -> String {
    vm.exec(&["ovs-dpctl", "show"])
}

/// The NIC's state where tether keeps it: the host port's addresses and routes of every
/// table, and the uplink enslaved to the datapath.
fn vm_state(vm: &Netns) -> serde_json::Value {
    serde_json::json!({
        "addr": json_of(&vm.ip(&["-j", "addr", "show", "dev", "eth1"]))[0]["addr_info"],
        "route4": json_of(&vm.ip(&["-j", "route", "show", "table", "all", "dev", "eth1"])),
        "route6": json_of(&vm.ip(&["-j", "-6", "route", "show", "table", "all", "dev", "eth1"])),
        "uplink_master": json_of(&vm.ip(&["-j", "link", "show", "dev", "eth1~"]))[0]["master"],
    })
}

/// ovs-vswitchd `kill -9`ed for 4 s: the kernel keeps the datapath, its ports and the
/// megaflows the VM's traffic already uses, so a ping that was running loses nothing while
/// the daemon is dead (a userspace datapath forwards nothing then). After the restart
/// (a plain one: no flow-restore-wait, so the new daemon flushes the megaflows) tether
/// replays its flows, and the ping goes on.
#[test]
fn a_killed_vswitchd_leaves_the_vm_reachable_and_tether_replays() {
    if !kernel_only(
        "a_killed_vswitchd_leaves_the_vm_reachable_and_tether_replays",
        "the userspace datapath dies with ovs-vswitchd",
    ) {
        return;
    }
    let (bed, t) = attached();
    let (sb, vm) = (&bed.sb, bed.sb.ns());
    let installed = flows(sb);
    let ping = Pinger::start(
        &bed.peer,
        "192.0.2.10",
        Duration::from_millis(100),
        sb.path("ping.txt"),
    );
    // The megaflows for both directions exist once a few echoes have gone through.
    std::thread::sleep(Duration::from_secs(2));
    sb.kill9("ovs-vswitchd");
    let killed = now();
    let show = dpctl_show(vm);
    assert!(
        show.contains("eth1~") && show.contains("eth1 (internal)"),
        "the datapath keeps its ports without ovs-vswitchd:\n{show}"
    );
    std::thread::sleep(Duration::from_secs(4));
    let restarted = now();
    sb.start_vswitchd();
    t.wait_log("openflow replayed", Duration::from_secs(20));
    let back = wait_for(Duration::from_secs(20), "tether's flows back", || {
        (flows(sb) == installed).then(now)
    });
    std::thread::sleep(Duration::from_secs(2));
    let pings = ping.stop();
    let dead = pings.lost_between(killed + 0.3, restarted);
    eprintln!(
        "vswitchd dead {:.1} s: {} sent then, lost {:?}; flows back {:.2} s after the restart; \
         lost overall {:?} of {}",
        restarted - killed,
        pings.sent_between(killed + 0.3, restarted),
        dead,
        back - restarted,
        pings.lost(),
        pings.sent
    );
    assert!(
        pings.sent_between(killed + 0.3, restarted) >= 20,
        "{}",
        pings.text
    );
    assert_eq!(dead, Vec::<u64>::new(), "lost while vswitchd was dead");
    // Reachable again after the replay: the last second's echoes all answered.
    assert_eq!(
        pings.lost_between(now() - 1.5, now()),
        Vec::<u64>::new(),
        "{}",
        pings.text
    );
}

/// Debian's `systemctl reload openvswitch-switch` (ovs-vswitchd.service's ExecReload):
/// `ovs-ctl restart` saves the flows, sets `flow-restore-wait`, restarts ovs-vswitchd, which
/// keeps the datapath's megaflows while the key is set, puts the flows back and clears the
/// key. tether reconnects and replays through it: not one echo is lost, and afterwards the
/// key is gone and the flows are exactly tether's.
#[test]
fn ovs_ctl_restart_as_debian_reloads_loses_no_packet() {
    if !kernel_only(
        "ovs_ctl_restart_as_debian_reloads_loses_no_packet",
        "flow-restore-wait keeps kernel megaflows; a userspace datapath restarts empty",
    ) {
        return;
    }
    let (bed, t) = attached();
    let (sb, vm) = (&bed.sb, bed.sb.ns());
    let installed = flows(sb);
    let ping = Pinger::start(
        &bed.peer,
        "192.0.2.10",
        Duration::from_millis(50),
        sb.path("ping.txt"),
    );
    std::thread::sleep(Duration::from_secs(2));
    let before = sb.pid("ovs-vswitchd").unwrap();
    let mut c = vm.command(&[
        "/usr/share/openvswitch/scripts/ovs-ctl",
        "--no-ovsdb-server",
        "--no-monitor",
        "--system-id=random",
        "--no-record-hostname",
        "restart",
    ]);
    for var in ["OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVS_SYSCONFDIR"] {
        c.env(var, sb.dir());
    }
    let out = common::run(&mut c);
    let after = sb
        .pid("ovs-vswitchd")
        .expect("ovs-ctl started ovs-vswitchd");
    assert_ne!(before, after, "{out}");
    t.wait_log("openflow reconnected", Duration::from_secs(20));
    wait_for(Duration::from_secs(20), "tether's flows, exactly", || {
        (flows(sb) == installed).then_some(())
    });
    let other = sb.vsctl(&["get", "Open_vSwitch", ".", "other_config"]);
    assert!(!other.contains("flow-restore-wait"), "{other}");
    std::thread::sleep(Duration::from_secs(2));
    let pings = ping.stop();
    eprintln!(
        "ovs-ctl restart: {} echoes, lost {:?}",
        pings.sent,
        pings.lost()
    );
    assert!(pings.sent >= 40, "{}", pings.text);
    assert_eq!(pings.lost(), Vec::<u64>::new(), "{out}\n{}", pings.text);
}

/// `ovs-ctl force-reload-kmod` (Debian's `force-reload-kmod` of openvswitch-switch): it
/// deletes the datapath and reloads the module, so every internal port — the host port
/// holding the VM's addresses among them — is a new device afterwards, and the uplink is
/// let go and attached again. The VM's addresses, routes of every table and the uplink's
/// attachment come back exactly, and the VM answers again.
#[test]
fn force_reload_kmod_gives_the_vm_its_addresses_back() {
    if !kernel_only(
        "force_reload_kmod_gives_the_vm_its_addresses_back",
        "there is no kernel module to reload on the userspace datapath",
    ) {
        return;
    }
    let (bed, t) = attached();
    let (sb, vm) = (&bed.sb, bed.sb.ns());
    vm.sh("ip route add 203.0.113.0/26 via 192.0.2.1 dev eth1 table 100");
    let before = vm_state(vm);
    let host_index =
        |vm: &Netns| json_of(&vm.ip(&["-j", "link", "show", "dev", "eth1"]))[0]["ifindex"].clone();
    let index_before = host_index(vm);
    let mut c = vm.command(&[
        "/usr/share/openvswitch/scripts/ovs-ctl",
        "--system-id=random",
        "force-reload-kmod",
    ]);
    for var in ["OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVS_SYSCONFDIR"] {
        c.env(var, sb.dir());
    }
    let out = common::run(&mut c);
    let reloaded = now();
    assert_ne!(
        host_index(vm),
        index_before,
        "a new host port device:\n{out}"
    );
    let state = wait_for(
        Duration::from_secs(30),
        "the VM's configuration back",
        || {
            let s = vm_state(vm);
            (s == before).then_some(s)
        },
    );
    assert_eq!(state, before);
    assert_clean_ping(&bed.peer, "192.0.2.10");
    assert_clean_ping(&bed.peer, "2001:db8:1::10");
    eprintln!("force-reload-kmod: back after {:.1} s", now() - reloaded);
    drop(t);
}
