//! What the kernel datapath would do differently, made safe where it shows here
//! (docs/datapath.md), through the `tether` binary with a real userspace OVS in the
//! ExternalNode bed (`externalnode_vm`): a restart under the wrong datapath type changes
//! nothing and exits 2.

#![allow(clippy::unwrap_used)]

mod common;
mod externalnode_vm;

use std::time::Duration;

use common::{privileged, wait_for};
use externalnode_vm::*;

fn wait_attached(bed: &Bed) {
    wait_for(Duration::from_secs(20), "the ExternalNode attached", || {
        (bed.status()["external_node"]["step"] == "attached").then_some(())
    });
}

/// A VM taken over on a `netdev` bridge, tether restarted with `--datapath-type system`
/// (the default a user gets by dropping the flag): it refuses at start (exit 2) naming
/// both types and the fix, and changes nothing: the bridge stays netdev, the host port
/// keeps its addresses and the VM stays reachable. (Before: the bridge became `system`,
/// ovs-vswitchd rebuilt it, and the VM went offline.)
#[test]
fn a_restart_under_another_datapath_type_changes_nothing() {
    if !privileged("a_restart_under_another_datapath_type_changes_nothing") {
        return;
    }
    let bed = Bed::new();
    let vm = bed.sb.ns();
    put(&bed.manifests, "en.yaml", EN_YAML);
    let mut t = bed.start();
    wait_attached(&bed);
    // Harness-only (netdev datapath): keep the kernel off the uplink (module doc of
    // externalnode_vm).
    neutralise_uplink(vm, "eth1~", true);
    assert_clean_ping(vm, "192.0.2.1");
    assert_eq!(t.stop(), Some(0));
    let before = snapshot(vm, "eth1");

    // The other type than the bridge's (netdev here unless TETHER_TEST_DATAPATH=system).
    let (have, other) = if common::kernel_datapath() {
        ("system", "netdev")
    } else {
        ("netdev", "system")
    };
    let mut t = bed.start_with(other);
    let code = t.wait_exit(Duration::from_secs(20));
    let log = t.log();
    assert_eq!(code, Some(2), "exit code; log:\n{log}");
    assert!(
        log.contains(&format!(
            "bridge br-int has datapath_type {have} but datapathType is {other}; \
             tether never changes an existing bridge's datapath type"
        )),
        "{log}"
    );
    assert!(
        log.contains(&format!("Fix: set datapathType: {have}")),
        "{log}"
    );
    assert_eq!(
        bed.sb
            .vsctl(&["get", "Bridge", "br-int", "datapath_type"])
            .trim(),
        have
    );
    assert_eq!(snapshot(vm, "eth1"), before, "the host port changed");
    assert_clean_ping(vm, "192.0.2.1");
    // `tether check` fails on it too, with the same fix.
    let report = bed.check_with(other);
    let line = report
        .lines()
        .find(|l| l.starts_with("FAIL datapath: "))
        .unwrap_or_else(|| panic!("no datapath failure in\n{report}"));
    assert!(line.contains(have), "{line}");
}

fn sysctl(vm: &common::Netns, key: &str) -> String {
    vm.exec(&["sysctl", "-n", key]).trim().to_string()
}

/// A hardened image: `net.ipv6.conf.default.disable_ipv6=1` in the VM, the NIC's own IPv6
/// on (set before the default, as a distribution's sysctl.d does for the NICs it
/// configures). The host port, a new device, starts with IPv6 disabled; tether gives it
/// the NIC's per-device settings first, so the takeover works: the host port holds the
/// IPv6 address and IPv6 ping works through OVS. Deleting the ExternalNode gives the NIC
/// back with its addresses and its own settings. (Before: EACCES on the IPv6 address,
/// logged as "needs CAP_NET_ADMIN", rolled back and retried forever.)
#[test]
fn a_hardened_default_disable_ipv6_does_not_stop_the_takeover() {
    if !privileged("a_hardened_default_disable_ipv6_does_not_stop_the_takeover") {
        return;
    }
    let bed = Bed::new();
    let vm = bed.sb.ns();
    vm.exec(&[
        "sysctl",
        "-qw",
        "net.ipv6.conf.default.disable_ipv6=1",
        "net.ipv4.conf.eth1.arp_announce=2",
    ]);
    let before = snapshot(vm, "eth1");
    put(&bed.manifests, "en.yaml", EN_YAML);
    let t = bed.start();
    wait_attached(&bed);
    neutralise_uplink(vm, "eth1~", true);
    let addrs = vm.ip(&["-6", "addr", "show", "dev", "eth1"]);
    assert!(addrs.contains("2001:db8:1::10/64"), "{addrs}");
    assert_eq!(sysctl(vm, "net.ipv6.conf.eth1.disable_ipv6"), "0");
    assert_eq!(sysctl(vm, "net.ipv4.conf.eth1.arp_announce"), "2");
    assert_clean_ping(vm, "2001:db8:1::1");
    assert_clean_ping(vm, "192.0.2.1");
    assert!(!t.log().contains("CAP_NET_ADMIN"), "{}", t.log());
    // The identity check passed and status says so; the log names what was verified.
    assert_eq!(bed.status()["external_node"]["identity"], "verified");
    assert!(
        t.log()
            .contains("externalnode identity verified nic=eth1 mac=02:00:00:00:01:10 mtu=1450"),
        "{}",
        t.log()
    );
    std::fs::remove_file(bed.manifests.join("en.yaml")).unwrap();
    wait_for(Duration::from_secs(20), "eth1 given back", || {
        (bed.status()["external_node"]["step"] == "waiting"
            && vm.try_ip(&["link", "show", "dev", "eth1~"]).is_err())
        .then_some(())
    });
    assert_restored(vm, "eth1", &before);
    assert_eq!(sysctl(vm, "net.ipv6.conf.eth1.disable_ipv6"), "0");
    assert_eq!(sysctl(vm, "net.ipv4.conf.eth1.arp_ignore"), "0");
    assert_eq!(sysctl(vm, "net.ipv4.conf.eth1.arp_announce"), "2");
}
