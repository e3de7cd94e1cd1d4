//! The event → keys table: one row per kind of event, with the exact keys expected.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::k8s::{Change, ExternalNode, KubeEvent, Namespace, Pod, Resource, Stores};
use crate::ovsdb::PortData;

fn obj<T: Resource>(v: serde_json::Value) -> T {
    T::decode(v).unwrap()
}

fn pod(ns: &str, name: &str, labels: serde_json::Value) -> Pod {
    obj(
        json!({"metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": {"nodeName": "n"}}),
    )
}

fn namespace(name: &str, labels: serde_json::Value) -> Namespace {
    obj(json!({"metadata": {"name": name, "labels": labels}}))
}

fn tc(name: &str, applied_to: serde_json::Value) -> TrafficControl {
    obj(json!({
        "metadata": {"name": name, "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {"appliedTo": applied_to, "action": "Mirror", "direction": "Both",
                 "targetPort": {"ovsInternal": {"name": "t"}}}
    }))
}

/// Namespaces `prod` (team=a) and `dev`; Pods prod/web (app=web), prod/db (app=db),
/// dev/web (app=web); TCs `web` (app=web), `db` (app=db), `team-a` (Namespaces team=a),
/// `other` (app=other).
fn stores() -> Stores {
    let s = Stores::default();
    s.namespaces.apply(namespace("prod", json!({"team": "a"})));
    s.namespaces.apply(namespace("dev", json!({})));
    s.pods.apply(pod("prod", "web", json!({"app": "web"})));
    s.pods.apply(pod("prod", "db", json!({"app": "db"})));
    s.pods.apply(pod("dev", "web", json!({"app": "web"})));
    s.traffic_controls.apply(tc(
        "web",
        json!({"podSelector": {"matchLabels": {"app": "web"}}}),
    ));
    s.traffic_controls.apply(tc(
        "db",
        json!({"podSelector": {"matchLabels": {"app": "db"}}}),
    ));
    s.traffic_controls.apply(tc(
        "team-a",
        json!({"namespaceSelector": {"matchLabels": {"team": "a"}}}),
    ));
    s.traffic_controls.apply(tc(
        "other",
        json!({"podSelector": {"matchLabels": {"app": "other"}}}),
    ));
    s
}

fn tcs(names: &[&str]) -> BTreeSet<Key> {
    names.iter().map(|n| Key::Tc(n.to_string())).collect()
}

fn kube(ev: KubeEvent, clashing: &[&str]) -> BTreeSet<Key> {
    let clashing = clashing.iter().map(|s| s.to_string()).collect();
    route(Trigger::Kube(&ev), &stores(), &clashing)
}

#[test]
fn kubernetes_events() {
    let web = Arc::new(pod("prod", "web", json!({"app": "web"})));
    let relabelled = Arc::new(pod("prod", "web", json!({"app": "db"})));
    let dev_web = Arc::new(pod("dev", "web", json!({"app": "web"})));
    let plain = Arc::new(pod("dev", "x", json!({})));
    let ns_old = Arc::new(namespace("dev", json!({})));
    let ns_new = Arc::new(namespace("dev", json!({"team": "a"})));
    let new_tc = Arc::new(tc(
        "new",
        json!({"podSelector": {"matchLabels": {"app": "db"}}}),
    ));
    let en: Arc<ExternalNode> = Arc::new(obj(
        json!({"metadata": {"name": "vm", "namespace": "default"}, "spec": {"interfaces": []}}),
    ));
    let rows: Vec<(&str, KubeEvent, &[&str], BTreeSet<Key>)> = vec![
        (
            "a Pod added: the TCs selecting it, by labels and by Namespace",
            KubeEvent::Pod(Change::Added(web.clone())),
            &[],
            tcs(&["team-a", "web"]),
        ),
        (
            "a Pod deleted: the TCs that selected it",
            KubeEvent::Pod(Change::Deleted(dev_web.clone())),
            &[],
            tcs(&["web"]),
        ),
        (
            "a Pod relabelled: the TCs before and after",
            KubeEvent::Pod(Change::Updated {
                old: web.clone(),
                new: relabelled,
            }),
            &[],
            tcs(&["db", "team-a", "web"]),
        ),
        (
            "a Pod nobody selects",
            KubeEvent::Pod(Change::Added(plain)),
            &[],
            tcs(&[]),
        ),
        (
            "a Namespace relabelled into a selector",
            KubeEvent::Namespace(Change::Updated {
                old: ns_old,
                new: ns_new.clone(),
            }),
            &[],
            tcs(&["team-a"]),
        ),
        (
            "a Namespace deleted that no selector matched",
            KubeEvent::Namespace(Change::Deleted(Arc::new(namespace("dev", json!({}))))),
            &[],
            tcs(&[]),
        ),
        (
            "a TC added: itself and every TC sharing one of its Pods",
            KubeEvent::TrafficControl(Change::Added(new_tc.clone())),
            &[],
            tcs(&["db", "new", "team-a"]),
        ),
        (
            "a TC deleted: the same, from its old selection",
            KubeEvent::TrafficControl(Change::Deleted(new_tc.clone())),
            &[],
            tcs(&["db", "new", "team-a"]),
        ),
        (
            "any TC change also resyncs the clashing ones",
            KubeEvent::TrafficControl(Change::Added(new_tc)),
            &["other"],
            tcs(&["db", "new", "other", "team-a"]),
        ),
        (
            "an ExternalNode: its one key",
            KubeEvent::ExternalNode(Change::Added(en)),
            &[],
            BTreeSet::from([Key::En]),
        ),
        (
            "a kind's list is in: start-up counts it, no key",
            KubeEvent::Synced(crate::k8s::Kind::Pod),
            &[],
            BTreeSet::new(),
        ),
    ];
    for (what, ev, clashing, want) in rows {
        assert_eq!(kube(ev, clashing), want, "{what}");
    }
}

fn pod_port(ns: &str, name: &str, ofport: i64, mac: &str) -> PortData {
    PortData {
        uuid: crate::ovsdb::Uuid(format!("u-{ns}-{name}")),
        name: format!("{name}-veth"),
        external_ids: [
            ("pod-name", name),
            ("pod-namespace", ns),
            ("container-id", name),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        if_uuid: None,
        if_name: format!("{name}-veth"),
        if_type: String::new(),
        ofport,
        error: None,
        options: Default::default(),
        mac: None,
        mac_in_use: Some(mac.to_string()),
        mtu: None,
        ifindex: None,
    }
}

/// tether's own port of the ExternalNode (`antrea-type` host or uplink).
fn en_port(name: &str, role: &str, ofport: i64, ifindex: Option<i64>) -> PortData {
    PortData {
        uuid: crate::ovsdb::Uuid(format!("u-{name}")),
        name: name.into(),
        external_ids: [("antrea-type".to_string(), role.to_string())].into(),
        if_uuid: None,
        if_name: name.into(),
        if_type: String::new(),
        ofport,
        error: None,
        options: Default::default(),
        mac: None,
        mac_in_use: Some("02:00:00:00:01:10".into()),
        mtu: Some(1500),
        ifindex,
    }
}

/// The ExternalNode's ports: whatever changes in them (one deleted, an ofport, a new
/// device behind the host port) syncs the ExternalNode, and only it.
#[test]
fn externalnode_port_changes() {
    let s = stores();
    let none = BTreeSet::new();
    let ifs = |ports: Vec<PortData>| PortView::of(&Interfaces::new(ports));
    let pair = |host_ifindex| {
        vec![
            en_port("eth1", "host", 2, Some(host_ifindex)),
            en_port("eth1~", "uplink", 1, Some(3)),
        ]
    };
    let en = BTreeSet::from([Key::En]);
    type Row = (&'static str, Vec<PortData>, Vec<PortData>, BTreeSet<Key>);
    let rows: Vec<Row> = vec![
        ("nothing changed", pair(7), pair(7), BTreeSet::new()),
        (
            "the host port is a new device (module reloaded)",
            pair(7),
            pair(9),
            en.clone(),
        ),
        (
            "the uplink port was deleted",
            pair(7),
            vec![en_port("eth1", "host", 2, Some(7))],
            en.clone(),
        ),
        (
            "an error on the host port",
            pair(7),
            vec![
                PortData {
                    error: Some("could not open network device eth1".into()),
                    ..en_port("eth1", "host", -1, Some(7))
                },
                en_port("eth1~", "uplink", 1, Some(3)),
            ],
            en.clone(),
        ),
        ("the pair appeared", vec![], pair(7), en),
    ];
    for (what, old, new, want) in rows {
        let (old, new) = (ifs(old), ifs(new));
        let got = route(
            Trigger::Ports {
                old: &old,
                new: &new,
            },
            &s,
            &none,
        );
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn port_changes() {
    let s = stores();
    let none = BTreeSet::new();
    let ifs = |ports: Vec<PortData>| PortView::of(&Interfaces::new(ports));
    let base = || vec![pod_port("prod", "web", 5, "02:00:00:00:00:05")];
    type Row = (&'static str, Vec<PortData>, Vec<PortData>, BTreeSet<Key>);
    let rows: Vec<Row> = vec![
        ("nothing changed", base(), base(), BTreeSet::new()),
        (
            "a Pod's port appeared: its TCs and the L2 flows",
            vec![],
            base(),
            tcs(&["team-a", "web"])
                .into_iter()
                .chain([Key::L2])
                .collect(),
        ),
        (
            "a Pod's ofport changed: its TCs and the L2 flows",
            base(),
            vec![pod_port("prod", "web", 9, "02:00:00:00:00:05")],
            tcs(&["team-a", "web"])
                .into_iter()
                .chain([Key::L2])
                .collect(),
        ),
        (
            "only the MAC changed: the L2 flows",
            base(),
            vec![pod_port("prod", "web", 5, "02:00:00:00:00:99")],
            BTreeSet::from([Key::L2]),
        ),
        (
            "a port of a Pod not in the store: L2 only",
            vec![],
            vec![pod_port("prod", "gone", 7, "02:00:00:00:00:07")],
            BTreeSet::from([Key::L2]),
        ),
    ];
    for (what, old, new, want) in rows {
        let (old, new) = (ifs(old), ifs(new));
        let got = route(
            Trigger::Ports {
                old: &old,
                new: &new,
            },
            &s,
            &none,
        );
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn everything() {
    let got = route(Trigger::All, &stores(), &BTreeSet::new());
    let want: BTreeSet<Key> = tcs(&["db", "other", "team-a", "web"])
        .into_iter()
        .chain([Key::L2, Key::En])
        .collect();
    assert_eq!(got, want);
}

/// A relabel syncs the TC that gains the Pod before the ones it leaves (the gaining TC's
/// ADD takes the flow over in one bundle); other triggers keep the keys' order.
#[test]
fn a_relabel_syncs_the_gaining_tc_first() {
    let s = stores();
    let web = Arc::new(pod("prod", "web", json!({"app": "web"})));
    let relabelled = Arc::new(pod("prod", "web", json!({"app": "db"})));
    let ev = KubeEvent::Pod(Change::Updated {
        old: web.clone(),
        new: relabelled.clone(),
    });
    let none = BTreeSet::new();
    let keys = route(Trigger::Kube(&ev), &s, &none);
    assert_eq!(
        sync_order(Trigger::Kube(&ev), &s, keys),
        vec![
            Key::Tc("db".into()),
            Key::Tc("team-a".into()),
            Key::Tc("web".into())
        ]
    );
    // And back: `web` first.
    let back = KubeEvent::Pod(Change::Updated {
        old: relabelled,
        new: web,
    });
    let keys = route(Trigger::Kube(&back), &s, &none);
    assert_eq!(
        sync_order(Trigger::Kube(&back), &s, keys),
        vec![
            Key::Tc("web".into()),
            Key::Tc("db".into()),
            Key::Tc("team-a".into())
        ]
    );
    let all = route(Trigger::All, &s, &none);
    let want: Vec<Key> = all.iter().cloned().collect();
    assert_eq!(sync_order(Trigger::All, &s, all), want);
}
