//! TrafficControl end to end (DESIGN §7 tier 3): the `tether` binary, real userspace OVS in
//! a private netns, Pods and a collector as namespaces, real packets counted with tcpdump.

#![allow(clippy::unwrap_used)]

mod common;
mod e2e;

use std::time::Duration;

use common::{Tether, privileged};
use e2e::{Bed, Capture};

fn tc_yaml(name: &str, direction: &str, action: &str, target: &str, ret: Option<&str>) -> String {
    let mut y = format!(
        "apiVersion: crd.antrea.io/v1alpha2\nkind: TrafficControl\nmetadata:\n  name: {name}\nspec:\n  appliedTo:\n    podSelector:\n      matchLabels:\n        app: web\n  direction: {direction}\n  action: {action}\n  targetPort:\n    {target}\n"
    );
    if let Some(r) = ret {
        y.push_str(&format!("  returnPort:\n    {r}\n"));
    }
    y
}

#[test]
fn mirror_egress_ingress_both_to_a_device() {
    if !privileged("mirror_egress_ingress_both_to_a_device") {
        return;
    }
    let mut bed = Bed::new();
    bed.add_pod("pa", 1);
    bed.add_pod("pb", 2);
    let coll = bed.add_collector(&["coll0"]);
    bed.write_pods(&[("pa", "web")]);
    let args = bed.tether_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let _t = Tether::start(bed.sb.ns(), &args, &bed.sb.path("tether.log"));
    let pa = bed.ofport("veth-pa");
    assert_eq!(
        bed.ping(0, 1, 3),
        3,
        "Pod to Pod works with the pipeline and no TC"
    );

    for (direction, want_req, want_rep) in [("Egress", 5, 0), ("Ingress", 0, 5), ("Both", 5, 5)] {
        bed.write(
            "tc.yaml",
            &tc_yaml("mirror", direction, "Mirror", "device: {name: coll0}", None),
        );
        let n = match direction {
            "Both" => 2,
            _ => 1,
        };
        let flows = bed.wait_flows(&format!("{direction} mark flows"), |f| {
            f.iter()
                .filter(|l| l.contains("table=3, priority=200"))
                .count()
                == n
                && f.iter().any(|l| {
                    l.contains(&match direction {
                        "Egress" => format!("in_port={pa} "),
                        _ => format!("reg1={pa:#x} "),
                    })
                })
        });
        let req = Capture::start(
            &coll,
            "eth0",
            "icmp[icmptype] == icmp-echo and src 203.0.113.1",
            bed.sb.path("req.txt"),
        );
        let rep = Capture::start(
            &coll,
            "eth0",
            "icmp[icmptype] == icmp-echoreply and dst 203.0.113.1",
            bed.sb.path("rep.txt"),
        );
        assert_eq!(
            bed.ping(0, 1, 5),
            5,
            "{direction}: ping keeps working while mirrored"
        );
        let all = bed.sb.dump_flows("br-int", None);
        assert_eq!(
            (req.count(), rep.count()),
            (want_req, want_rep),
            "{direction} copies; flows: {flows:#?} all: {all:#?}"
        );
    }
    // No-flood on the target port (OF1.0 view).
    let show = bed.sb.ofctl(&["-O", "OpenFlow10", "show", "br-int"]);
    let coll_line = show
        .lines()
        .skip_while(|l| !l.contains("(coll0)"))
        .take(3)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(coll_line.contains("NO_FLOOD"), "{coll_line}");
    let _ = Duration::from_secs(0);
}
