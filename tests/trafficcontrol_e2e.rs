//! TrafficControl end to end (docs/design.md#tier-3-end-to-end): the `tether` binary, real
//! userspace OVS in a private netns, Pods and a collector as namespaces, real packets
//! counted with tcpdump.
//!
//! Here: the helpers the tests share; the tests are in `trafficcontrol_e2e/` by kind of
//! TrafficControl (`mirror.rs`, `redirect.rs`, `tunnels.rs`) and `restarts.rs`.

#![allow(clippy::unwrap_used)]

mod apiserver;
mod common;
mod e2e;
#[path = "trafficcontrol_e2e/mirror.rs"]
mod mirror;
#[path = "trafficcontrol_e2e/redirect.rs"]
mod redirect;
#[path = "trafficcontrol_e2e/restarts.rs"]
mod restarts;
#[path = "trafficcontrol_e2e/tunnels.rs"]
mod tunnels;

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

fn start(bed: &Bed, log: &str) -> Tether {
    let args = bed.tether_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Tether::start(bed.sb.ns(), &args, &bed.sb.path(log))
}

fn bed_with_pods() -> Bed {
    let mut bed = Bed::new();
    bed.add_pod("pa", 1);
    bed.add_pod("pb", 2);
    bed.write_pods(&[("pa", "web")]);
    bed
}

fn port_names(bed: &Bed) -> Vec<String> {
    let mut v: Vec<String> = bed
        .sb
        .vsctl(&["list-ports", "br-int"])
        .lines()
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

/// True once `dev` in the OVS namespace is administratively up.
fn link_up(bed: &Bed, dev: &str) -> bool {
    bed.sb
        .ns()
        .try_ip(&["-o", "link", "show", "dev", dev])
        .is_ok_and(|l| l.contains("<") && l.split('>').next().unwrap_or("").contains(",UP"))
}
