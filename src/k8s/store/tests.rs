use super::*;
use serde_json::json;

fn pod(ns: &str, name: &str, rv: &str, labels: serde_json::Value) -> Pod {
    Pod::decode(json!({"metadata": {"namespace": ns, "name": name, "resourceVersion": rv, "labels": labels}}))
        .unwrap()
}

fn tc(name: &str, applied_to: serde_json::Value) -> TrafficControl {
    TrafficControl::decode(json!({"metadata": {"name": name},
        "spec": {"appliedTo": applied_to, "direction": "Both", "action": "Mirror",
                 "targetPort": {"device": {"name": "eth7"}}}}))
    .unwrap()
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn apply_update_delete_and_identical_apply() {
    let s: Store<Pod> = Store::new();
    let c = s.apply(pod("a", "p1", "1", json!({}))).unwrap();
    assert!(matches!(c, Change::Added(ref p) if p.key() == "a/p1"));
    assert_eq!(s.apply(pod("a", "p1", "1", json!({}))), None);
    let snapshot = s.get("a/p1").unwrap();
    match s.apply(pod("a", "p1", "2", json!({"x": "y"}))).unwrap() {
        Change::Updated { old, new } => {
            assert_eq!(old.metadata.resource_version, "1");
            assert_eq!(new.metadata.resource_version, "2");
        }
        other => panic!("{other:?}"),
    }
    // The reader's snapshot did not change under it.
    assert_eq!(snapshot.metadata.resource_version, "1");
    assert!(matches!(s.delete("a/p1"), Some(Change::Deleted(_))));
    assert_eq!(s.delete("a/p1"), None);
    assert!(s.is_empty());
}

#[test]
fn replace_synthesizes_deletes_and_marks_synced() {
    let s: Store<Pod> = Store::new();
    assert!(!s.has_synced());
    s.apply(pod("a", "keep", "1", json!({})));
    s.apply(pod("a", "change", "1", json!({})));
    s.apply(pod("b", "gone", "1", json!({})));
    let changes = s.replace(vec![
        pod("a", "keep", "1", json!({})),
        pod("a", "change", "2", json!({})),
        pod("c", "new", "1", json!({})),
    ]);
    let kinds: Vec<(String, &str)> = changes
        .iter()
        .map(|c| {
            let k = match c {
                Change::Added(_) => "added",
                Change::Updated { .. } => "updated",
                Change::Deleted(_) => "deleted",
            };
            (c.key(), k)
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("a/change".into(), "updated"),
            ("c/new".into(), "added"),
            ("b/gone".into(), "deleted")
        ]
    );
    assert!(s.has_synced());
    assert_eq!(
        s.keys().into_iter().collect::<Vec<_>>(),
        ["a/change", "a/keep", "c/new"]
    );
    let in_a: Vec<String> = s.in_namespace("a").iter().map(|p| p.key()).collect();
    assert_eq!(in_a, ["a/change", "a/keep"]);
    assert!(s.in_namespace("b").is_empty());
}

#[test]
fn tc_index_maps_pod_and_namespace_events() {
    let s: Store<TrafficControl> = Store::new();
    s.apply(tc(
        "by-app",
        json!({"podSelector": {"matchLabels": {"app": "web"}}}),
    ));
    s.apply(tc(
        "by-tier",
        json!({"podSelector": {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}}),
    ));
    s.apply(tc("not-prod", json!({"podSelector": {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]}})));
    s.apply(tc(
        "ns-team",
        json!({"namespaceSelector": {"matchLabels": {"team": "a"}}}),
    ));
    s.apply(tc("nothing", json!({})));
    s.apply(tc(
        "invalid",
        json!({"podSelector": {"matchExpressions": [{"key": "a", "operator": "Bad"}]}}),
    ));
    let ns_a = labels(&[("team", "a")]);
    let ns_b = labels(&[("team", "b")]);
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    // What a Pod event affects: the TCs selecting it before or after.
    let affected_by_pod = |ns: &Labels, old: Option<&Labels>, new: Option<&Labels>| {
        let mut out = BTreeSet::new();
        for l in old.into_iter().chain(new) {
            out.extend(s.selecting_pod(ns, l));
        }
        out
    };
    let affected_by_namespace = |old: Option<&Labels>, new: Option<&Labels>| {
        let mut out = BTreeSet::new();
        for l in old.into_iter().chain(new) {
            out.extend(s.selecting_namespace(l));
        }
        out
    };

    let web = labels(&[("app", "web"), ("env", "prod")]);
    assert_eq!(affected_by_pod(&ns_b, None, Some(&web)), set(&["by-app"]));
    assert_eq!(
        affected_by_pod(&ns_a, Some(&web), None),
        set(&["by-app", "ns-team"])
    );
    let plain = labels(&[]);
    assert_eq!(
        affected_by_pod(&ns_b, None, Some(&plain)),
        set(&["not-prod"])
    );
    // A label change moves the Pod from one TC to another: both are affected.
    let tiered = labels(&[("tier", "1"), ("env", "prod")]);
    assert_eq!(
        affected_by_pod(&ns_b, Some(&web), Some(&tiered)),
        set(&["by-app", "by-tier"])
    );

    assert_eq!(
        affected_by_namespace(Some(&ns_b), Some(&ns_a)),
        set(&["ns-team"])
    );
    assert_eq!(affected_by_namespace(Some(&ns_b), None), set(&[]));

    // Updating a TC re-files it; deleting unfiles it.
    s.apply(tc(
        "by-app",
        json!({"podSelector": {"matchLabels": {"role": "db"}}}),
    ));
    assert_eq!(affected_by_pod(&ns_b, None, Some(&web)), set(&[]));
    s.delete("not-prod");
    assert_eq!(affected_by_pod(&ns_b, None, Some(&plain)), set(&[]));
    let g = s.read();
    assert!(
        !g.index.pods.by_key.contains_key("app"),
        "stale index slot left behind"
    );
    assert_eq!(g.index.pods.any, set(&["ns-team"]));
}

#[test]
fn pods_are_found_by_label_pair_and_key_and_the_index_follows_updates() {
    let s: Store<Pod> = Store::new();
    s.apply(pod("a", "p1", "1", json!({"app": "web", "tier": "x"})));
    s.apply(pod("b", "p2", "1", json!({"app": "web"})));
    s.apply(pod("a", "p3", "1", json!({"app": "db"})));
    let keys = |slot: &str| -> Vec<String> { s.with_slot(slot).iter().map(|p| p.key()).collect() };
    assert_eq!(keys("app\0web"), vec!["a/p1", "b/p2"]);
    assert_eq!(keys("app"), vec!["a/p1", "a/p3", "b/p2"]);
    assert_eq!(keys("tier\0x"), vec!["a/p1"]);
    assert!(keys("tier\0y").is_empty());
    // A label change moves the Pod between slots; a delete empties them.
    s.apply(pod("a", "p1", "2", json!({"app": "db"})));
    assert_eq!(keys("app\0web"), vec!["b/p2"]);
    assert_eq!(keys("app\0db"), vec!["a/p1", "a/p3"]);
    assert!(keys("tier").is_empty());
    s.delete("b/p2");
    assert!(keys("app\0web").is_empty());
    assert_eq!(s.in_namespace("a").len(), 2);
}
