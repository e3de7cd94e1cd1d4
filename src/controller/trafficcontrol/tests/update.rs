//! A TC changed (Antrea TestTrafficControlUpdate, TestSharedTargetPort): its target, return
//! port, action, direction and selectors, with the ports it no longer uses released and a
//! shared target kept until its last TC goes.

use super::*;

#[test]
fn update_target_port_releases_the_old_one() {
    let (e, a, _) = env().with_pods();
    e.apply_synced("tc1", mirror_a("t1"));
    e.apply_synced("tc1", mirror_a("t2"));
    assert!(!e.bridge.names().contains("t1"));
    let t2 = e.ofport("t2");
    assert_eq!(
        e.marks("tc1"),
        expect(&[a], t2, TcDirection::Both, TcAction::Mirror)
    );
}

#[test]
fn update_action_and_direction() {
    let (e, a, _) = env().with_pods();
    e.apply_synced("tc1", mirror_a("t1"));
    let t = e.ofport("t1");
    e.apply_synced("tc1", spec(app_a(), "Both", "Redirect", device("t1")));
    assert_eq!(
        e.marks("tc1"),
        expect(&[a], t, TcDirection::Both, TcAction::Redirect)
    );
    e.apply_synced("tc1", spec(app_a(), "Ingress", "Redirect", device("t1")));
    assert_eq!(
        e.marks("tc1"),
        expect(&[a], t, TcDirection::Ingress, TcAction::Redirect)
    );
    assert_eq!(
        e.bridge.take_log(),
        vec!["create t1 system"],
        "the port is kept"
    );
}

#[test]
fn update_pod_and_namespace_selectors() {
    let (e, a, b) = env().with_pods();
    e.apply_synced("tc1", mirror_a("t1"));
    let t = e.ofport("t1");
    e.apply_synced(
        "tc1",
        spec(
            json!({"podSelector": {"matchLabels": {"app": "b"}}}),
            "Both",
            "Mirror",
            device("t1"),
        ),
    );
    assert_eq!(
        e.marks("tc1"),
        expect(&[b], t, TcDirection::Both, TcAction::Mirror)
    );
    e.apply_synced(
        "tc1",
        spec(
            json!({"namespaceSelector": {"matchLabels": {"env": "prod"}}}),
            "Both",
            "Mirror",
            device("t1"),
        ),
    );
    assert_eq!(
        e.marks("tc1"),
        expect(&[a], t, TcDirection::Both, TcAction::Mirror)
    );
}

#[test]
fn fix_changing_the_return_port_releases_the_old_one() {
    let (e, _, _) = env().with_pods();
    let mut s = spec(app_a(), "Both", "Redirect", device("t1"));
    s["returnPort"] = device("r1");
    e.apply_synced("tc1", s.clone());
    let r1_owner = e.c.owner_of("port:r1");
    assert_eq!(e.flows.of(r1_owner).len(), 1);
    s["returnPort"] = device("r2");
    e.apply_synced("tc1", s);
    let names = e.bridge.names();
    assert!(
        !names.contains("r1"),
        "Antrea released the NEW name and leaked r1"
    );
    assert!(names.contains("r2"));
    assert!(
        e.flows.of(r1_owner).is_empty(),
        "r1's Classifier flow is gone"
    );
    assert_eq!(
        e.flows.of(e.c.owner_of("port:r2")),
        vec![pipeline::tc_return_flow(e.ofport("r2"))]
    );
}

#[test]
fn shared_target_port_lives_until_its_last_tc() {
    let (e, _, _) = env().with_pods();
    e.apply("tc1", mirror_a("shared"));
    e.apply(
        "tc2",
        spec(
            json!({"podSelector": {"matchLabels": {"app": "b"}}}),
            "Both",
            "Mirror",
            device("shared"),
        ),
    );
    e.c.sync("tc1").unwrap();
    e.c.sync("tc2").unwrap();
    assert_eq!(e.bridge.take_log(), vec!["create shared system"]);
    e.stores.traffic_controls.delete("tc1");
    e.c.sync("tc1").unwrap();
    assert!(e.bridge.names().contains("shared"));
    assert!(e.marks("tc1").is_empty());
    e.stores.traffic_controls.delete("tc2");
    e.c.sync("tc2").unwrap();
    assert!(!e.bridge.names().contains("shared"));
    assert_eq!(e.bridge.take_log(), vec!["delete shared"]);
    assert_eq!(e.flows.total(), 0);
}
