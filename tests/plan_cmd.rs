//! `tether plan` against a real bridge, a real kernel and the manifests directory: on a
//! node tether never ran on (everything to create), converged (nothing to do), and after
//! one manifest edit (exactly that edit's change). Each time, OVSDB's contents, the flow
//! dump and `ip -j link/addr/route` must be byte-identical before and after the plan, and
//! what the plan said must be what `tether run` then did (checked with ovs-ofctl).
#![allow(clippy::unwrap_used)]

mod common;
mod e2e;

use std::process::Command;
use std::time::Duration;

use common::{Tether, privileged, tether::binary};
use e2e::Bed;
use serde_json::Value;

fn tc(direction: &str) -> String {
    format!(
        "apiVersion: crd.antrea.io/v1alpha2\nkind: TrafficControl\nmetadata:\n  name: mirror\nspec:\n  appliedTo:\n    podSelector:\n      matchLabels:\n        app: web\n  direction: {direction}\n  action: Mirror\n  targetPort:\n    device: {{name: coll0}}\n"
    )
}

/// Everything a plan must not change: OVSDB (without the counters ovs-vswitchd refreshes
/// on its own), the flows, and the namespace's links, addresses and routes.
fn state(bed: &Bed) -> (Value, Vec<String>, String) {
    let db = common::run(Command::new("ovsdb-client").args([
        "-f",
        "json",
        "dump",
        &bed.sb.db_remote(),
        "Open_vSwitch",
    ]));
    // One JSON object per table, a line each.
    let mut db: Vec<Value> = db
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for table in &mut db {
        let cols: Vec<String> = table["headings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_str().unwrap().to_string())
            .collect();
        let keep: Vec<usize> = (0..cols.len())
            .filter(|i| cols[*i] != "statistics")
            .collect();
        table["headings"] = keep.iter().map(|i| Value::from(cols[*i].clone())).collect();
        for row in table["data"].as_array_mut().unwrap() {
            *row = keep.iter().map(|i| row[*i].clone()).collect();
        }
    }
    let ns = bed.sb.ns();
    let ip = [
        ns.ip(&["-j", "link", "show"]),
        ns.ip(&["-j", "addr", "show"]),
        ns.ip(&["-j", "route", "show", "table", "all"]),
        ns.ip(&["-j", "-6", "route", "show", "table", "all"]),
    ]
    .join("\n");
    (Value::Array(db), bed.sb.dump_flows("br-int", None), ip)
}

/// The lines of `a` and `b` that differ, side by side.
fn diff_lines(a: &str, b: &str) -> String {
    let split = |s: &str| -> Vec<String> { s.split("},{").map(str::to_string).collect() };
    let (a, b) = (split(a), split(b));
    let gone: Vec<&String> = a.iter().filter(|l| !b.contains(l)).collect();
    let new: Vec<&String> = b.iter().filter(|l| !a.contains(l)).collect();
    format!("before only {gone:?}\nafter only {new:?}")
}

/// `tether plan` in the node's namespace, with its state checked unchanged around it.
fn plan(bed: &Bed) -> (i32, String) {
    plan_on(bed, "br-int", &[])
}

/// [`state`] once the kernel has settled on its own: IPv6 duplicate address detection
/// ends a second or two after a link comes up (the `tentative` flag goes, a local route
/// appears), which is no plan's doing.
fn settled(bed: &Bed) -> (Value, Vec<String>, String) {
    let end = std::time::Instant::now() + common::patience(Duration::from_secs(15));
    let mut last = state(bed);
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = state(bed);
        if (now == last && !now.2.contains("\"tentative\"")) || std::time::Instant::now() > end {
            return now;
        }
        last = now;
    }
}

fn plan_on(bed: &Bed, bridge: &str, extra: &[&str]) -> (i32, String) {
    let before = settled(bed);
    let mut argv = vec![binary().to_string_lossy().into_owned(), "plan".into()];
    argv.extend(extra.iter().map(|s| s.to_string()));
    argv.extend(
        bed.tether_args()
            .into_iter()
            .map(|a| if a == "br-int" { bridge.to_string() } else { a }),
    );
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let out = bed.sb.ns().command(&argv).output().unwrap();
    let after = state(bed);
    if before != after {
        let db = |s: &(Value, Vec<String>, String)| s.0.to_string();
        panic!(
            "tether plan changed something:\nflows equal: {}\nip: {}\novsdb equal: {}",
            before.1 == after.1,
            diff_lines(&before.2, &after.2),
            db(&before) == db(&after)
        );
    }
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The `flows to add` lines of a plan, placeholders replaced by `real(name)`.
fn planned_adds(text: &str, real: impl Fn(&str) -> u32) -> Vec<String> {
    let legend: Vec<(String, String)> = text
        .lines()
        .skip_while(|l| !l.starts_with("new ports' ofports"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| {
            // `  60000 (0xea60) = coll0`
            let (of, name) = l.trim().split_once(" = ").unwrap();
            let of = of.split_whitespace().next().unwrap();
            (of.to_string(), name.to_string())
        })
        .collect();
    let mut v: Vec<String> = text
        .lines()
        .skip_while(|l| !l.starts_with("flows to add"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| {
            let mut l = l.trim().to_string();
            for (of, name) in &legend {
                let n = real(name).to_string();
                l = l
                    .replace(&format!("={of} "), &format!("={n} "))
                    .replace(&format!("={of},"), &format!("={n},"))
                    .replace(&format!("{of:}->"), &format!("{n}->"))
                    .replace(&format!(":{of}"), &format!(":{n}"));
                let hex = format!("{:#x}", of.parse::<u32>().unwrap());
                let real_hex = format!("{:#x}", real(name));
                l = l.replace(&format!("{hex}->"), &format!("{real_hex}->"));
                l = l.replace(&format!("={hex} "), &format!("={real_hex} "));
            }
            l
        })
        .collect();
    v.sort();
    v
}

/// The bridge's tether flows without their cookies, as ovs-ofctl prints them.
fn tether_flows(bed: &Bed) -> Vec<String> {
    let mut v: Vec<String> = bed
        .sb
        .dump_flows("br-int", Some("cookie=0x0/0xff00000000"))
        .into_iter()
        .filter(|l| l.starts_with("cookie=0x") && !l.starts_with("cookie=0x0,"))
        .map(|l| l.split_once(", ").unwrap().1.to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn plan_shows_exactly_what_run_then_does_and_changes_nothing() {
    if !privileged("plan_shows_exactly_what_run_then_does_and_changes_nothing") {
        return;
    }
    let mut bed = Bed::new();
    bed.add_pod("pa", 1);
    bed.add_pod("pb", 2);
    let _coll = bed.add_collector(&["coll0"]);
    bed.write_pods(&[("pa", "web")]);
    bed.write("tc.yaml", &tc("Both"));

    // A bridge that does not exist yet: run would create it (and nothing is created now).
    let (code, text) = plan_on(&bed, "br-new", &[]);
    assert_eq!(code, 3, "{text}");
    let create = format!(
        "bridge:\n  create bridge br-new (datapath_type {}, OpenFlow10+15, fail_mode standalone)\n",
        common::datapath()
    );
    assert!(text.starts_with(&create), "{text}");
    assert!(bed.sb.try_vsctl(&["br-exists", "br-new"]).is_err());

    // A node tether never ran on: everything to create.
    let (code, text) = plan(&bed);
    assert_eq!(code, 3, "{text}");
    assert!(
        text.starts_with("ports:\n  create port coll0 (type system)\nflows to add (24):\n"),
        "{text}"
    );
    assert!(!text.contains("flows to delete"), "{text}");
    assert!(
        text.ends_with(
            "changes pending: 1 port, 0 link, 0 externalnode, 24 flows to add, 0 to delete\n"
        ),
        "{text}"
    );

    // What run then does is what the plan said.
    let args = bed.tether_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut t = Tether::start(bed.sb.ns(), &args, &bed.sb.path("tether.log"));
    t.wait_log("startup phase=flush_committed", Duration::from_secs(30));
    t.stop();
    assert_eq!(
        planned_adds(&text, |n| bed.ofport(n)),
        tether_flows(&bed),
        "{text}"
    );

    // Converged: nothing to do.
    let (code, text) = plan(&bed);
    assert_eq!(
        (code, text.as_str()),
        (
            0,
            "nothing to do: the bridge, its flows and the VM's links are as tether run would make them\n"
        )
    );

    let (code, json) = plan_on(&bed, "br-int", &["--json"]);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(code, 0);
    for k in [
        "ports",
        "links",
        "externalnode",
        "add",
        "delete",
        "problems",
    ] {
        assert_eq!(v[k], serde_json::json!([]), "{k} in {json}");
    }
    assert_eq!(v["bridge"], Value::Null);

    // One edit: mirror only Egress → exactly the ingress mark flow goes.
    let before = tether_flows(&bed);
    bed.write("tc.yaml", &tc("Egress"));
    let (code, text) = plan(&bed);
    assert_eq!(code, 3, "{text}");
    let pa = bed.ofport("veth-pa");
    let coll = bed.ofport("coll0");
    let gone = format!(
        "table=80, priority=200,reg1={pa:#x} actions=set_field:{coll:#x}->reg9,set_field:0x400000/0xc00000->reg4,goto_table:90"
    );
    assert_eq!(
        text,
        format!(
            "flows to delete (1):\n  # trafficcontrol mirror\n  {gone}\nchanges pending: 0 port, 0 link, 0 externalnode, 0 flows to add, 1 to delete\n"
        )
    );
    let mut t = Tether::start(bed.sb.ns(), &args, &bed.sb.path("tether2.log"));
    t.wait_log("startup phase=flush_committed", Duration::from_secs(30));
    t.stop();
    let after = tether_flows(&bed);
    let mut expected = before.clone();
    expected.retain(|l| *l != gone);
    assert_eq!(after, expected);
}
