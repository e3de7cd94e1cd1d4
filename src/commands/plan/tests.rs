use super::*;
use crate::openflow::action::Action;
use crate::openflow::cookie;
use crate::openflow::oxm::MatchField;

fn flow(port: u32) -> Flow {
    Flow::new(3, 200)
        .matching(MatchField::InPort(port))
        .actions([Action::output(9)])
        .goto(4)
}

fn on_switch(ck: u64, f: &Flow) -> FlowDesc {
    FlowDesc {
        cookie: ck,
        ..f.to_desc()
    }
}

fn label(o: Owner) -> String {
    format!("owner {}", o.object)
}

/// Compared by owner and text: a flow that only changes round is unchanged; one that
/// moves owner is deleted from the old and added to the new; foreign flows are not ours
/// to delete.
#[test]
fn flows_diff_by_owner_and_text() {
    let a = Owner::new(Category::TRAFFIC_CONTROL, 1);
    let b = Owner::new(Category::TRAFFIC_CONTROL, 2);
    let desired = BTreeMap::from([(a, vec![flow(1), flow(2)]), (b, vec![flow(3)])]);
    let current = vec![
        on_switch(cookie(7, Category::TRAFFIC_CONTROL, 1), &flow(1)),
        on_switch(cookie(6, Category::TRAFFIC_CONTROL, 1), &flow(3)),
        on_switch(cookie(7, Category::TRAFFIC_CONTROL, 1), &flow(4)),
        on_switch(0x99, &flow(5)),
    ];
    let (add, del) = diff_flows(&desired, &current, &label);
    let line = |o: &str, p: u32| FlowLine {
        owner: o.into(),
        flow: format!("table=3, priority=200,in_port={p} actions=output:9,goto_table:4"),
    };
    assert_eq!(add, vec![line("owner 1", 2), line("owner 2", 3)]);
    assert_eq!(del, vec![line("owner 1", 3), line("owner 1", 4)]);
}

#[test]
fn render_lists_each_part_and_the_total() {
    let p = Pending {
        ports: vec!["create port tap0 (type internal)".into()],
        add: vec![FlowLine {
            owner: "trafficcontrol mirror".into(),
            flow: "table=3, priority=200,in_port=1 actions=goto_table:4".into(),
        }],
        new_ofports: BTreeMap::from([(60_000, "tap0".into())]),
        ..Pending::default()
    };
    assert_eq!(
        render(&p),
        "\
ports:
  create port tap0 (type internal)
flows to add (1):
  # trafficcontrol mirror
  table=3, priority=200,in_port=1 actions=goto_table:4
new ports' ofports (OVS assigns the real numbers):
  60000 (0xea60) = tap0
changes pending: 1 port, 0 link, 0 externalnode, 1 flows to add, 0 to delete
"
    );
    assert!(render(&Pending::default()).starts_with("nothing to do"));
    assert!(Pending::default().is_empty());
}
