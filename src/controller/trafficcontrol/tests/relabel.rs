//! Pods and Namespaces changing under TCs (Antrea TestPodUpdateFromCNIServer,
//! TestPodLabelsUpdate, TestNamespaceLabelsUpdate, TestPodDelete): a Pod port appearing
//! later, label moves between an effective TC and its alternatives, a Pod deleted, and
//! which of two TCs is effective whatever the sync order.

use super::*;

#[test]
fn pod_port_appearing_later_is_picked_up() {
    let e = env();
    e.stores.pods.apply(pod("ns1", "late", json!({"app": "a"})));
    e.apply_synced("tc1", mirror_a("t1"));
    assert!(e.marks("tc1").is_empty(), "no port yet, no flows");
    let before = route::PortView::of(&e.bridge.interfaces());
    let p = e.bridge.add_pod_port("ns1", "late");
    let now = route::PortView::of(&e.bridge.interfaces());
    let keys = route::tcs_for_ports(&e.stores, &before, &now);
    assert_eq!(
        keys.into_iter().collect::<Vec<_>>(),
        vec!["tc1".to_string()]
    );
    e.c.sync("tc1").unwrap();
    let t = e.ofport("t1");
    assert_eq!(
        e.marks("tc1"),
        expect(&[p], t, TcDirection::Both, TcAction::Mirror)
    );
}

fn three_tcs(e: &Env) {
    // tc2 is the oldest of the two selecting app=b, so it is effective; tc3 alternative.
    let b = json!({"podSelector": {"matchLabels": {"app": "b"}}});
    e.stores
        .traffic_controls
        .apply(tc_at("tc1", "2026-11-30T08:00:00Z", mirror_a("t1")));
    e.stores.traffic_controls.apply(tc_at(
        "tc2",
        "2026-11-30T08:01:00Z",
        spec(b.clone(), "Both", "Mirror", device("t2")),
    ));
    e.stores.traffic_controls.apply(tc_at(
        "tc3",
        "2026-11-30T08:02:00Z",
        spec(b, "Both", "Redirect", device("t3")),
    ));
    for n in ["tc3", "tc2", "tc1"] {
        e.c.sync(n).unwrap();
    }
}

#[test]
fn pod_label_moves_between_tcs_effective_and_alternative() {
    let (e, a, b) = env().with_pods();
    three_tcs(&e);
    let (t1, t2) = (e.ofport("t1"), e.ofport("t2"));
    assert_eq!(
        e.marks("tc2"),
        expect(&[b], t2, TcDirection::Both, TcAction::Mirror)
    );
    assert!(
        e.marks("tc3").is_empty(),
        "tc3 is only an alternative for pb"
    );
    // pa moves from app=a to app=b: tc1 loses it, tc2 (effective) gains it.
    let old = e.stores.pods.get("ns1/pa").unwrap().metadata.labels.clone();
    e.stores.pods.apply(pod("ns1", "pa", json!({"app": "b"})));
    let keys = route::tcs_for_pod(
        &e.stores,
        "ns1",
        Some(&old),
        Some(&e.stores.pods.get("ns1/pa").unwrap().metadata.labels),
    );
    assert_eq!(
        keys.iter().map(String::as_str).collect::<Vec<_>>(),
        vec!["tc1", "tc2", "tc3"]
    );
    for k in keys {
        e.c.sync(&k).unwrap();
    }
    assert!(e.marks("tc1").is_empty());
    let mut both = vec![a, b];
    both.sort();
    assert_eq!(
        e.marks("tc2"),
        expect(&both, t2, TcDirection::Both, TcAction::Mirror)
    );
    assert!(e.marks("tc3").is_empty());
    let _ = t1;
    // tc2 goes: tc3 becomes effective for both Pods.
    e.stores.traffic_controls.delete("tc2");
    for k in ["tc2", "tc3"] {
        e.c.sync(k).unwrap();
    }
    let t3 = e.ofport("t3");
    assert_eq!(
        e.marks("tc3"),
        expect(&both, t3, TcDirection::Both, TcAction::Redirect)
    );
    assert!(!e.bridge.names().contains("t2"));
}

#[test]
fn namespace_label_move() {
    let (e, a, _) = env().with_pods();
    e.apply_synced(
        "tc1",
        spec(
            json!({"namespaceSelector": {"matchLabels": {"env": "dev"}}}),
            "Both",
            "Mirror",
            device("t1"),
        ),
    );
    let t = e.ofport("t1");
    let old = e
        .stores
        .namespaces
        .get("ns1")
        .unwrap()
        .metadata
        .labels
        .clone();
    e.stores
        .namespaces
        .apply(namespace("ns1", json!({"env": "dev"})));
    let new = e
        .stores
        .namespaces
        .get("ns1")
        .unwrap()
        .metadata
        .labels
        .clone();
    assert!(route::tcs_for_namespace(&e.stores, Some(&old), Some(&new)).contains("tc1"));
    e.c.sync("tc1").unwrap();
    let mut ports = vec![a, e.ofport("pb-veth")];
    ports.sort();
    assert_eq!(
        e.marks("tc1"),
        expect(&ports, t, TcDirection::Both, TcAction::Mirror)
    );
}

#[test]
fn pod_delete_removes_its_flows() {
    let (e, _, _) = env().with_pods();
    e.apply_synced("tc1", mirror_a("t1"));
    assert_eq!(e.marks("tc1").len(), 2);
    let gone = e.stores.pods.delete("ns1/pa").unwrap();
    let keys = route::tcs_for_pod(&e.stores, "ns1", Some(&gone.object().metadata.labels), None);
    assert!(keys.contains("tc1"));
    e.c.sync("tc1").unwrap();
    assert!(e.marks("tc1").is_empty());
}

#[test]
fn fix_effective_tc_is_deterministic_whatever_the_sync_order() {
    for order in [["old", "new"], ["new", "old"]] {
        let (e, a, _) = env().with_pods();
        e.stores
            .traffic_controls
            .apply(tc_at("new", "2026-11-30T09:00:00Z", mirror_a("t-new")));
        e.stores
            .traffic_controls
            .apply(tc_at("old", "2026-11-30T08:00:00Z", mirror_a("t-old")));
        for n in order {
            e.c.sync(n).unwrap();
        }
        assert_eq!(
            e.marks("old"),
            expect(&[a], e.ofport("t-old"), TcDirection::Both, TcAction::Mirror)
        );
        assert!(e.marks("new").is_empty(), "{order:?}");
    }
    // Equal timestamps: the lower name wins.
    let (e, a, _) = env().with_pods();
    e.apply("b", mirror_a("tb"));
    e.apply("a", mirror_a("ta"));
    e.c.sync("b").unwrap();
    e.c.sync("a").unwrap();
    assert_eq!(e.marks("a").len(), 2);
    assert!(e.marks("b").is_empty());
    let _ = a;
}
