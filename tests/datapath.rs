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

    let mut t = bed.start_with("system");
    let code = t.wait_exit(Duration::from_secs(20));
    let log = t.log();
    assert_eq!(code, Some(2), "exit code; log:\n{log}");
    assert!(
        log.contains(
            "bridge br-int has datapath_type netdev but datapathType is system; \
             tether never changes an existing bridge's datapath type"
        ),
        "{log}"
    );
    assert!(log.contains("Fix: set datapathType: netdev"), "{log}");
    assert_eq!(
        bed.sb
            .vsctl(&["get", "Bridge", "br-int", "datapath_type"])
            .trim(),
        "netdev"
    );
    assert_eq!(snapshot(vm, "eth1"), before, "the host port changed");
    assert_clean_ping(vm, "192.0.2.1");
    // `tether check` fails on it too, with the same fix.
    let report = bed.check_with("system");
    let line = report
        .lines()
        .find(|l| l.starts_with("FAIL datapath: "))
        .unwrap_or_else(|| panic!("no datapath failure in\n{report}"));
    assert!(line.contains("netdev"), "{line}");
}
