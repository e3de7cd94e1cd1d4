use super::*;
use crate::openflow::action::Action;
use crate::openflow::oxm::MatchField;
use crate::openflow::{Category, Flow, cookie};

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

#[test]
fn flags() {
    let (o, rest) = parse_flags(&args(&[
        "--tc",
        "mirror",
        "--table=3",
        "--json",
        "--config",
        "c.yaml",
    ]))
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        o,
        Options {
            tc: Some("mirror".into()),
            table: Some(3),
            json: true,
            ..Options::default()
        }
    );
    assert_eq!(rest, args(&["--config", "c.yaml"]));
    assert_eq!(
        parse_flags(&args(&["--table", "x"])).unwrap_err(),
        "--table \"x\": not a table number (0-254)"
    );
    assert_eq!(
        parse_flags(&args(&["--tc"])).unwrap_err(),
        "--tc needs a value"
    );
    assert!(parse_flags(&args(&["--tc", "a", "--externalnode"])).is_err());
}

fn desc(ck: u64, table: u8, priority: u16, out: u32) -> FlowDesc {
    let flow = Flow::new(table, priority)
        .matching(MatchField::InPort(out))
        .actions([Action::output(out)]);
    FlowDesc {
        cookie: ck,
        ..flow.to_desc()
    }
}

fn flows() -> Vec<FlowDesc> {
    let tc = crate::controller::trafficcontrol::object_id("mirror");
    vec![
        desc(0, 0, 0, 9),
        desc(cookie(2, Category::TRAFFIC_CONTROL, tc), 3, 200, 1),
        desc(cookie(2, Category::DEFAULT, 0), 0, 0, 2),
        desc(cookie(2, Category::TRAFFIC_CONTROL, tc), 3, 210, 3),
        desc(cookie(1, Category::DEFAULT, 0), 0, 0, 4),
        desc(cookie(2, Category::EXTERNAL_NODE, 0), 1, 200, 5),
    ]
}

/// Grouped by owner (pipeline first, unclaimed last), highest priority first.
#[test]
fn text_groups_flows_by_owner() {
    let mut names = Names::new(Some(2), &[]);
    names.add_tc("mirror");
    let rows = annotate(flows(), &names, &Options::default());
    assert_eq!(
        render_text(&rows, false),
        "\
# pipeline: 1 flow
cookie=0x2000000000000, priority=0,in_port=2 actions=output:2
# externalnode policy bypass: 1 flow
cookie=0x2080000000000, table=1, priority=200,in_port=5 actions=output:5
# trafficcontrol mirror: 2 flows
cookie=0x201007fff80d2, table=3, priority=210,in_port=3 actions=output:3
cookie=0x201007fff80d2, table=3, priority=200,in_port=1 actions=output:1
# stale: round 1, not the bridge's: 1 flow
cookie=0x1000000000000, priority=0,in_port=4 actions=output:4
# unclaimed: not a tether cookie: 1 flow
priority=0,in_port=9 actions=output:9
"
    );
}

#[test]
fn filters() {
    let names = Names::new(Some(2), &[]);
    let pick = |o: Options| -> Vec<u32> {
        annotate(flows(), &names, &o)
            .iter()
            .map(|r| match r.desc.match_.fields().first() {
                Some(MatchField::InPort(p)) => *p,
                _ => 0,
            })
            .collect()
    };
    // --tc works by name without the daemon: the owner id is the name's hash.
    assert_eq!(
        pick(Options {
            tc: Some("mirror".into()),
            ..Options::default()
        }),
        vec![3, 1]
    );
    assert_eq!(
        pick(Options {
            tc: Some("other".into()),
            ..Options::default()
        }),
        Vec::<u32>::new()
    );
    assert_eq!(
        pick(Options {
            unowned: true,
            ..Options::default()
        }),
        vec![4, 9]
    );
    assert_eq!(
        pick(Options {
            externalnode: true,
            ..Options::default()
        }),
        vec![5]
    );
    assert_eq!(
        pick(Options {
            table: Some(3),
            ..Options::default()
        }),
        vec![3, 1]
    );
}

#[test]
fn json_names_each_flow() {
    let names = Names::new(Some(2), &[]);
    let rows = annotate(vec![flows().remove(1)], &names, &Options::default());
    let v: serde_json::Value =
        serde_json::from_str(&render_json(&rows)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        v,
        serde_json::json!([{
            "owner": "trafficcontrol #7fff80d2 (name unknown: the daemon is not running)",
            "kind": "trafficcontrol",
            "name": null,
            "cookie": "0x201007fff80d2",
            "round": 2,
            "table": 3,
            "priority": 200,
            "n_packets": null,
            "n_bytes": null,
            "flow": "cookie=0x201007fff80d2, table=3, priority=200,in_port=1 actions=output:1",
        }])
    );
}
