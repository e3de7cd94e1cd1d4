//! A TrafficControl's target port is a sink: what its far side sends into the bridge (a
//! collector's own traffic, a capture tool's kernel, a tunnel device's ICMP) is dropped at
//! the Classifier and reaches no Pod and no uplink. The `tether` binary, real OVS, Pods and
//! a collector as namespaces, packets counted with tcpdump.

#![allow(clippy::unwrap_used)]

mod common;
mod e2e;

use common::{Tether, privileged};
use e2e::{Bed, Capture};

const MIRROR_BOTH: &str = "apiVersion: crd.antrea.io/v1alpha2
kind: TrafficControl
metadata:
  name: mirror
spec:
  appliedTo:
    podSelector:
      matchLabels:
        app: web
  direction: Both
  action: Mirror
  targetPort:
    device:
      name: coll0
";

/// The collector on the mirror's target port pings a Pod: before, its ARP request went
/// through the bridge's `NORMAL` to every port, the Pod answered, and the collector could
/// talk to the Pods (and, on a VM, through the uplink). Now nothing it sends gets past the
/// Classifier, while the copies still reach it and the Pods still reach each other.
#[test]
fn what_comes_in_on_a_target_port_reaches_no_pod() {
    if !privileged("what_comes_in_on_a_target_port_reaches_no_pod") {
        return;
    }
    let mut bed = Bed::new();
    bed.add_pod("pa", 1);
    bed.add_pod("pb", 2);
    let coll = bed.add_collector(&["coll0"]);
    const COLL_MAC: &str = "02:00:00:00:00:99";
    coll.ip(&["link", "set", "eth0", "address", COLL_MAC]);
    coll.ip(&["addr", "add", "203.0.113.99/24", "dev", "eth0"]);
    bed.write_pods(&[("pa", "web")]);
    bed.write("tc.yaml", MIRROR_BOTH);
    let args = bed.tether_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let _t = Tether::start(bed.sb.ns(), &args, &bed.sb.path("tether.log"));
    bed.wait_flows("the mirror's mark flows", |f| f.len() == 2);
    let target = bed.ofport("coll0");
    let seen_by_pa = Capture::start(
        &bed.pods[0].ns,
        "eth0",
        &format!("ether src {COLL_MAC}"),
        bed.sb.path("pa.txt"),
    );
    let copies = Capture::start(
        &coll,
        "eth0",
        "icmp and src 203.0.113.1",
        bed.sb.path("copies.txt"),
    );
    let out = coll
        .command(&["ping", "-c", "3", "-i", "0.2", "-W", "1", "203.0.113.1"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(" 0 received"),
        "the collector reached a Pod: {text}"
    );
    assert_eq!(bed.ping(0, 1, 3), 3, "Pod to Pod still works");
    assert_eq!(
        seen_by_pa.count(),
        0,
        "a frame from the collector reached Pod pa"
    );
    assert_eq!(
        copies.count(),
        3,
        "the mirror still copies pa's echo requests"
    );
    // The flow that does it: one per target port, below a return port's.
    let drop = format!("priority=190,in_port={target} actions=drop");
    let targets = bed.target_flows();
    assert!(
        targets.len() == 1 && targets[0].ends_with(&drop),
        "{targets:#?}"
    );
}
