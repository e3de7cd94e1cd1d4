//! `tether flows` against a real bridge and the real ovs-ofctl: the daemon runs the demo's
//! kind of setup (two Pods, a mirroring TrafficControl), someone else adds a flow, packets
//! cross the bridge, and `tether flows` must print exactly the flows and counters
//! `ovs-ofctl dump-flows` prints, grouped by the right owners, with or without the daemon.
#![allow(clippy::unwrap_used)]

mod common;
mod e2e;

use std::process::Command;
use std::time::Duration;

use common::{Tether, privileged, tether::binary};
use e2e::Bed;

const TC: &str = "apiVersion: crd.antrea.io/v1alpha2\nkind: TrafficControl\nmetadata:\n  name: mirror\nspec:\n  appliedTo:\n    podSelector:\n      matchLabels:\n        app: web\n  direction: Both\n  action: Mirror\n  targetPort:\n    device: {name: coll0}\n";
const FOREIGN: &str = "cookie=0x99, table=7, priority=5 actions=drop";
/// How ovs-ofctl dumps it: an OF1.5 add from ovs-ofctl sets `reset_counts`.
const FOREIGN_DUMPED: &str = "cookie=0x99, table=7, reset_counts priority=5 actions=drop";

fn flows(bed: &Bed, extra: &[&str]) -> (String, i32) {
    let mut args = vec!["flows".to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(bed.tether_args());
    let out = Command::new(binary()).args(&args).output().unwrap();
    assert!(
        out.stderr.is_empty() || !out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// The flow lines (not the `#` headers), trimmed and sorted as the harness sorts
/// ovs-ofctl's.
fn flow_lines(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.trim().to_string())
        .collect();
    v.sort();
    v
}

/// `header` and the flow lines under it.
fn group(text: &str, header: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.starts_with(header))
        .skip(1)
        .take_while(|l| !l.starts_with('#'))
        .map(|l| l.trim().to_string())
        .collect()
}

/// Counters and all, without what moves on its own (`duration`, `idle_age`).
fn without_ages(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty() && !l.starts_with("OFPST"))
        .map(|l| {
            l.trim()
                .split(", ")
                .filter(|p| !p.starts_with("duration=") && !p.starts_with("idle_age="))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect();
    v.sort();
    v
}

#[test]
fn flows_match_ovs_ofctl_and_name_their_owners() {
    if !privileged("flows_match_ovs_ofctl_and_name_their_owners") {
        return;
    }
    let mut bed = Bed::new();
    bed.add_pod("pa", 1);
    bed.add_pod("pb", 2);
    let _coll = bed.add_collector(&["coll0"]);
    bed.write_pods(&[("pa", "web")]);
    bed.write("tc.yaml", TC);
    let args = bed.tether_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut t = Tether::start(bed.sb.ns(), &args, &bed.sb.path("tether.log"));
    t.wait_log("startup phase=flush_committed", Duration::from_secs(30));
    bed.wait_flows("mirror's mark flows", |f| {
        f.iter()
            .filter(|l| l.contains("table=80, priority=200"))
            .count()
            == 2
    });
    bed.sb.ofctl(&["add-flow", "br-int", FOREIGN]);
    assert_eq!(bed.ping(0, 1, 3), 3);

    // Every flow on the bridge, exactly as ovs-ofctl prints it.
    let (text, code) = flows(&bed, &["--no-stats"]);
    assert_eq!(code, 0);
    assert_eq!(
        flow_lines(&text),
        bed.sb.dump_flows("br-int", None),
        "{text}"
    );

    // The owners.
    let pa = bed.ofport("veth-pa");
    let tc_flows = group(&text, "# trafficcontrol mirror: 2 flows");
    assert_eq!(tc_flows.len(), 2, "{text}");
    assert!(
        tc_flows
            .iter()
            .any(|l| l.contains(&format!("in_port={pa} ")))
    );
    assert_eq!(
        group(&text, "# unclaimed: not a tether cookie: 1 flow"),
        vec![FOREIGN_DUMPED.to_string()],
        "{text}"
    );
    assert_eq!(
        group(&text, "# l2 forwarding of Pod ns1/pa: 1 flow").len(),
        1,
        "{text}"
    );
    assert_eq!(
        group(&text, "# l2 forwarding of Pod ns1/pb: 1 flow").len(),
        1,
        "{text}"
    );
    assert!(text.starts_with("# pipeline: "), "{text}");

    // Counters: equal to ovs-ofctl's whenever nothing moved between its two dumps.
    let mut equal = false;
    for _ in 0..5 {
        let before = bed
            .sb
            .ofctl(&["-O", "OpenFlow15", "--no-names", "dump-flows", "br-int"]);
        let (ours, _) = flows(&bed, &[]);
        let after = bed
            .sb
            .ofctl(&["-O", "OpenFlow15", "--no-names", "dump-flows", "br-int"]);
        if without_ages(&before) != without_ages(&after) {
            continue;
        }
        assert_eq!(without_ages(&ours), without_ages(&before));
        equal = true;
        break;
    }
    assert!(equal, "the bridge's counters never held still for one dump");
    let (ours, _) = flows(&bed, &[]);
    let pb_l2 = group(&ours, "# l2 forwarding of Pod ns1/pb: 1 flow");
    assert!(
        !pb_l2[0].contains("n_packets=0,"),
        "the pings went through pb's L2 flow: {}",
        pb_l2[0]
    );

    // Filters.
    let (only, _) = flows(&bed, &["--tc", "mirror", "--no-stats"]);
    assert_eq!(flow_lines(&only), {
        let mut v = tc_flows.clone();
        v.sort();
        v
    });
    let (unowned, _) = flows(&bed, &["--unowned", "--no-stats"]);
    assert_eq!(
        unowned,
        format!("# unclaimed: not a tether cookie: 1 flow\n{FOREIGN_DUMPED}\n")
    );
    let (t3, _) = flows(&bed, &["--table", "80", "--no-stats"]);
    assert_eq!(
        flow_lines(&t3),
        bed.sb.dump_flows("br-int", Some("table=80"))
    );
    let (json, _) = flows(&bed, &["--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let foreign: Vec<&serde_json::Value> = v
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "unclaimed")
        .collect();
    assert_eq!(foreign.len(), 1);
    assert_eq!(foreign[0]["flow"], FOREIGN_DUMPED);
    assert_eq!(foreign[0]["n_packets"], 0);

    // Without the daemon: the TC is still found by name, and shown by its id otherwise.
    t.stop();
    let (only, code) = flows(&bed, &["--tc", "mirror", "--no-stats"]);
    assert_eq!(code, 0);
    assert_eq!(
        group(&only, "# trafficcontrol mirror: 2 flows").len(),
        2,
        "{only}"
    );
    let (all, _) = flows(&bed, &["--no-stats"]);
    assert!(
        all.contains("(name unknown: the daemon is not running): 2 flows"),
        "{all}"
    );

    // A bridge that does not exist: exit 1 and why.
    let mut args = vec!["flows".to_string()];
    args.extend(bed.tether_args());
    let i = args.iter().position(|a| a == "br-int").unwrap();
    args[i] = "br-none".into();
    let out = Command::new(binary()).args(&args).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "tether flows: bridge br-none does not exist\n"
    );
}
