//! The seed's cases (docs/antrea-compat.md#seed-test-cases: add ×11, update ×5, shared target port, Pod
//! port appearing later, Pod and Namespace label moves, Pod delete) plus one case per
//! fix of docs/design.md#where-tether-differs-from-antrea-and-why, with recording fakes of OVSDB and OpenFlow.

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::controller::Bridge;
use crate::controller::route;
use crate::k8s::{Namespace, Pod, Resource, Stores, TrafficControl};
use crate::k8s::{TcAction, TcDirection};
use crate::netlink::FakeLinks;
use crate::openflow::{Category, Flow, OfError, Owner};
use crate::pipeline;
use crate::testing::{FakeBridge, FakeFlows};

struct Env {
    stores: Stores,
    bridge: Arc<FakeBridge>,
    flows: Arc<FakeFlows>,
    links: Arc<FakeLinks>,
    c: TcController,
}

fn env() -> Env {
    let stores = Stores::default();
    let bridge = Arc::new(FakeBridge::new());
    let flows = Arc::new(FakeFlows::new());
    let links = Arc::new(FakeLinks::new());
    let c = TcController::new(stores.clone(), bridge.clone(), flows.clone(), links.clone());
    Env {
        stores,
        bridge,
        flows,
        links,
        c,
    }
}

fn decode<T: Resource>(v: Value) -> T {
    T::from_wire(serde_json::from_value(v).unwrap())
}

fn tc_at(name: &str, ts: &str, spec: Value) -> TrafficControl {
    decode(json!({"metadata": {"name": name, "creationTimestamp": ts}, "spec": spec}))
}

fn tc(name: &str, spec: Value) -> TrafficControl {
    tc_at(name, "2026-11-30T09:00:00Z", spec)
}

fn pod(ns: &str, name: &str, labels: Value) -> Pod {
    decode(
        json!({"metadata": {"name": name, "namespace": ns, "labels": labels},
                  "spec": {"nodeName": "vm1"}}),
    )
}

fn namespace(name: &str, labels: Value) -> Namespace {
    decode(json!({"metadata": {"name": name, "labels": labels}}))
}

fn spec(applied_to: Value, direction: &str, action: &str, target: Value) -> Value {
    json!({"appliedTo": applied_to, "direction": direction, "action": action, "targetPort": target})
}

fn app_a() -> Value {
    json!({"podSelector": {"matchLabels": {"app": "a"}}})
}

fn device(name: &str) -> Value {
    json!({"device": {"name": name}})
}

impl Env {
    fn with_pods(self) -> (Env, u32, u32) {
        self.stores
            .namespaces
            .apply(namespace("ns1", json!({"env": "prod"})));
        self.stores
            .namespaces
            .apply(namespace("ns2", json!({"env": "dev"})));
        self.stores
            .pods
            .apply(pod("ns1", "pa", json!({"app": "a"})));
        self.stores
            .pods
            .apply(pod("ns2", "pb", json!({"app": "b"})));
        let a = self.bridge.add_pod_port("ns1", "pa");
        let b = self.bridge.add_pod_port("ns2", "pb");
        (self, a, b)
    }

    fn marks(&self, name: &str) -> Vec<Flow> {
        self.flows.of(self.c.owner_of(name))
    }

    fn ofport(&self, port: &str) -> u32 {
        u32::try_from(self.bridge.port(port).unwrap().ofport).unwrap()
    }
}

fn expect(pods: &[u32], target: u32, d: TcDirection, a: TcAction) -> Vec<Flow> {
    let mut f = pipeline::tc_mark_flows(pods, target, d, a);
    f.sort();
    f
}

// ---- TestTrafficControlAdd -------------------------------------------------------------

#[test]
fn add_device_target_not_yet_on_the_bridge() {
    let (e, a, _) = env().with_pods();
    e.stores.traffic_controls.apply(tc(
        "tc1",
        spec(app_a(), "Both", "Mirror", device("target1")),
    ));
    e.c.sync("tc1").unwrap();
    assert_eq!(
        e.bridge.take_log(),
        vec!["create target1 system", "ofport:target1"]
            .into_iter()
            .filter(|l| !l.starts_with("ofport"))
            .collect::<Vec<_>>()
    );
    let t = e.ofport("target1");
    assert_eq!(
        e.marks("tc1"),
        expect(&[a], t, TcDirection::Both, TcAction::Mirror)
    );
    assert!(e.flows.no_flood.lock().unwrap().contains(&t));
    assert_eq!(
        e.bridge
            .port("target1")
            .unwrap()
            .external_ids
            .get("antrea-type")
            .map(String::as_str),
        Some("traffic-control")
    );
}

fn add_tunnel(target: Value, want_name: &str, want_log: &str) {
    let (e, a, _) = env().with_pods();
    e.stores
        .traffic_controls
        .apply(tc("tc1", spec(app_a(), "Egress", "Mirror", target)));
    e.c.sync("tc1").unwrap();
    assert_eq!(
        e.bridge.take_log(),
        vec![format!("create {want_name} {want_log}")]
    );
    let t = e.ofport(want_name);
    assert_eq!(
        e.marks("tc1"),
        expect(&[a], t, TcDirection::Egress, TcAction::Mirror)
    );
    assert!(e.flows.no_flood.lock().unwrap().contains(&t));
}

#[test]
fn add_vxlan_target() {
    add_tunnel(
        json!({"vxlan": {"remoteIP": "1.1.1.1"}}),
        "vxlan-cb3ab8",
        r#"vxlan{"remote_ip": "1.1.1.1"}"#,
    );
}

#[test]
fn add_geneve_target() {
    add_tunnel(
        json!({"geneve": {"remoteIP": "1.1.1.1"}}),
        "geneve-e17764",
        r#"geneve{"remote_ip": "1.1.1.1"}"#,
    );
}

#[test]
fn add_gre_target() {
    add_tunnel(
        json!({"gre": {"remoteIP": "1.1.1.1"}}),
        "gre-b2d3bd",
        r#"gre{"remote_ip": "1.1.1.1"}"#,
    );
}

#[test]
fn add_erspan_v2_target() {
    add_tunnel(
        json!({"erspan": {"remoteIP": "10.0.10.2", "sessionID": 1, "version": 2, "dir": 1, "hardwareID": 4}}),
        "erspan-f82ac8",
        r#"erspan{"erspan_dir": "1", "erspan_hwid": "4", "erspan_ver": "2", "key": "1", "remote_ip": "10.0.10.2"}"#,
    );
}

#[test]
fn add_with_existing_target_and_return_ports() {
    let (e, a, _) = env().with_pods();
    let t = e
        .bridge
        .add_port("target1", &[("antrea-type", "traffic-control")], None);
    let r = e
        .bridge
        .add_port("return1", &[("antrea-type", "traffic-control")], None);
    let mut s = spec(app_a(), "Both", "Redirect", device("target1"));
    s["returnPort"] = device("return1");
    e.stores.traffic_controls.apply(tc("tc1", s));
    e.c.sync("tc1").unwrap();
    assert!(e.bridge.take_log().is_empty(), "existing ports are reused");
    assert_eq!(
        e.marks("tc1"),
        expect(&[a], t, TcDirection::Both, TcAction::Redirect)
    );
    assert_eq!(
        e.flows.of(e.c.owner_of("port:return1")),
        vec![pipeline::tc_return_flow(r)]
    );
    let nf = e.flows.no_flood.lock().unwrap().clone();
    assert!(nf.contains(&t) && nf.contains(&r));
    let st = &e.c.status()[0];
    assert_eq!(st.target_port, Some(("target1".into(), t)));
    assert_eq!(st.return_port, Some(("return1".into(), r)));
    assert_eq!(st.effective_pods, vec!["ns1/pa".to_string()]);
}

fn selection_case(applied_to: Value, want: &[&str]) {
    let (e, a, b) = env().with_pods();
    e.stores.traffic_controls.apply(tc(
        "tc1",
        spec(applied_to, "Ingress", "Mirror", device("t1")),
    ));
    e.c.sync("tc1").unwrap();
    let t = e.ofport("t1");
    let mut ports: Vec<u32> = want
        .iter()
        .map(|p| if *p == "pa" { a } else { b })
        .collect();
    ports.sort();
    assert_eq!(
        e.marks("tc1"),
        expect(&ports, t, TcDirection::Ingress, TcAction::Mirror)
    );
}

#[test]
fn add_only_pod_selector() {
    selection_case(app_a(), &["pa"]);
}

#[test]
fn add_only_namespace_selector() {
    selection_case(
        json!({"namespaceSelector": {"matchLabels": {"env": "dev"}}}),
        &["pb"],
    );
}

#[test]
fn add_both_selectors_intersect() {
    selection_case(
        json!({"podSelector": {"matchLabels": {"app": "a"}}, "namespaceSelector": {"matchLabels": {"env": "dev"}}}),
        &[],
    );
    selection_case(
        json!({"podSelector": {"matchLabels": {"app": "b"}}, "namespaceSelector": {"matchLabels": {"env": "dev"}}}),
        &["pb"],
    );
}

#[test]
fn add_nil_nil_selects_nothing() {
    selection_case(json!({}), &[]);
}

#[test]
fn add_empty_empty_selects_all() {
    selection_case(
        json!({"podSelector": {}, "namespaceSelector": {}}),
        &["pa", "pb"],
    );
}

#[test]
fn host_network_pods_are_skipped() {
    let (e, _, _) = env().with_pods();
    let mut p: Pod = pod("ns1", "hn", json!({"app": "a"}));
    p.spec.host_network = true;
    e.stores.pods.apply(p);
    e.bridge.add_pod_port("ns1", "hn");
    e.stores
        .traffic_controls
        .apply(tc("tc1", spec(app_a(), "Both", "Mirror", device("t1"))));
    e.c.sync("tc1").unwrap();
    assert_eq!(e.c.status()[0].effective_pods, vec!["ns1/pa".to_string()]);
}

// ---- TestTrafficControlUpdate --------------------------------------------------------

#[test]
fn update_target_port_releases_the_old_one() {
    let (e, a, _) = env().with_pods();
    e.stores
        .traffic_controls
        .apply(tc("tc1", spec(app_a(), "Both", "Mirror", device("t1"))));
    e.c.sync("tc1").unwrap();
    e.stores
        .traffic_controls
        .apply(tc("tc1", spec(app_a(), "Both", "Mirror", device("t2"))));
    e.c.sync("tc1").unwrap();
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
    e.stores
        .traffic_controls
        .apply(tc("tc1", spec(app_a(), "Both", "Mirror", device("t1"))));
    e.c.sync("tc1").unwrap();
    let t = e.ofport("t1");
    e.stores
        .traffic_controls
        .apply(tc("tc1", spec(app_a(), "Both", "Redirect", device("t1"))));
    e.c.sync("tc1").unwrap();
    assert_eq!(
        e.marks("tc1"),
        expect(&[a], t, TcDirection::Both, TcAction::Redirect)
    );
    e.stores.traffic_controls.apply(tc(
        "tc1",
        spec(app_a(), "Ingress", "Redirect", device("t1")),
    ));
    e.c.sync("tc1").unwrap();
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
    e.stores
        .traffic_controls
        .apply(tc("tc1", spec(app_a(), "Both", "Mirror", device("t1"))));
    e.c.sync("tc1").unwrap();
    let t = e.ofport("t1");
    e.stores.traffic_controls.apply(tc(
        "tc1",
        spec(
            json!({"podSelector": {"matchLabels": {"app": "b"}}}),
            "Both",
            "Mirror",
            device("t1"),
        ),
    ));
    e.c.sync("tc1").unwrap();
    assert_eq!(
        e.marks("tc1"),
        expect(&[b], t, TcDirection::Both, TcAction::Mirror)
    );
    e.stores.traffic_controls.apply(tc(
        "tc1",
        spec(
            json!({"namespaceSelector": {"matchLabels": {"env": "prod"}}}),
            "Both",
            "Mirror",
            device("t1"),
        ),
    ));
    e.c.sync("tc1").unwrap();
    assert_eq!(
        e.marks("tc1"),
        expect(&[a], t, TcDirection::Both, TcAction::Mirror)
    );
}

// ---- TestSharedTargetPort ------------------------------------------------------------

#[test]
fn shared_target_port_lives_until_its_last_tc() {
    let (e, _, _) = env().with_pods();
    e.stores
        .traffic_controls
        .apply(tc("tc1", spec(app_a(), "Both", "Mirror", device("shared"))));
    e.stores.traffic_controls.apply(tc(
        "tc2",
        spec(
            json!({"podSelector": {"matchLabels": {"app": "b"}}}),
            "Both",
            "Mirror",
            device("shared"),
        ),
    ));
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

// ---- TestPodUpdateFromCNIServer ------------------------------------------------------

#[test]
fn pod_port_appearing_later_is_picked_up() {
    let e = env();
    e.stores.pods.apply(pod("ns1", "late", json!({"app": "a"})));
    e.stores
        .traffic_controls
        .apply(tc("tc1", spec(app_a(), "Both", "Mirror", device("t1"))));
    e.c.sync("tc1").unwrap();
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

// ---- TestPodLabelsUpdate / TestNamespaceLabelsUpdate / TestPodDelete ------------------

fn three_tcs(e: &Env) {
    // tc2 is the oldest of the two selecting app=b, so it is effective; tc3 alternative.
    let b = json!({"podSelector": {"matchLabels": {"app": "b"}}});
    e.stores.traffic_controls.apply(tc_at(
        "tc1",
        "2026-11-30T08:00:00Z",
        spec(app_a(), "Both", "Mirror", device("t1")),
    ));
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
    e.stores.traffic_controls.apply(tc(
        "tc1",
        spec(
            json!({"namespaceSelector": {"matchLabels": {"env": "dev"}}}),
            "Both",
            "Mirror",
            device("t1"),
        ),
    ));
    e.c.sync("tc1").unwrap();
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
    e.stores
        .traffic_controls
        .apply(tc("tc1", spec(app_a(), "Both", "Mirror", device("t1"))));
    e.c.sync("tc1").unwrap();
    assert_eq!(e.marks("tc1").len(), 2);
    let gone = e.stores.pods.delete("ns1/pa").unwrap();
    let keys = route::tcs_for_pod(&e.stores, "ns1", Some(&gone.object().metadata.labels), None);
    assert!(keys.contains("tc1"));
    e.c.sync("tc1").unwrap();
    assert!(e.marks("tc1").is_empty());
}

// ---- fixes (docs/design.md#where-tether-differs-from-antrea-and-why) --------

#[test]
fn fix_changing_the_return_port_releases_the_old_one() {
    let (e, _, _) = env().with_pods();
    let mut s = spec(app_a(), "Both", "Redirect", device("t1"));
    s["returnPort"] = device("r1");
    e.stores.traffic_controls.apply(tc("tc1", s.clone()));
    e.c.sync("tc1").unwrap();
    let r1_owner = e.c.owner_of("port:r1");
    assert_eq!(e.flows.of(r1_owner).len(), 1);
    s["returnPort"] = device("r2");
    e.stores.traffic_controls.apply(tc("tc1", s));
    e.c.sync("tc1").unwrap();
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
fn fix_effective_tc_is_deterministic_whatever_the_sync_order() {
    for order in [["old", "new"], ["new", "old"]] {
        let (e, a, _) = env().with_pods();
        e.stores.traffic_controls.apply(tc_at(
            "new",
            "2026-11-30T09:00:00Z",
            spec(app_a(), "Both", "Mirror", device("t-new")),
        ));
        e.stores.traffic_controls.apply(tc_at(
            "old",
            "2026-11-30T08:00:00Z",
            spec(app_a(), "Both", "Mirror", device("t-old")),
        ));
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
    e.stores
        .traffic_controls
        .apply(tc("b", spec(app_a(), "Both", "Mirror", device("tb"))));
    e.stores
        .traffic_controls
        .apply(tc("a", spec(app_a(), "Both", "Mirror", device("ta"))));
    e.c.sync("b").unwrap();
    e.c.sync("a").unwrap();
    assert_eq!(e.marks("a").len(), 2);
    assert!(e.marks("b").is_empty());
    let _ = a;
}

#[test]
fn fix_only_traffic_control_ports_are_reused() {
    let (e, _, _) = env().with_pods();
    e.stores.traffic_controls.apply(tc(
        "bad",
        spec(app_a(), "Both", "Mirror", device("pa-veth")),
    ));
    let b = json!({"podSelector": {"matchLabels": {"app": "b"}}});
    e.stores
        .traffic_controls
        .apply(tc("good", spec(b, "Egress", "Mirror", device("t1"))));
    let err = e.c.sync("bad").unwrap_err();
    assert_eq!(
        err.to_string(),
        "port pa-veth exists on the bridge as a Pod ns1/pa port, not a traffic-control port; refusing to reuse it"
    );
    e.c.sync("good").unwrap();
    assert_eq!(e.marks("good").len(), 1, "another TC is unaffected");
    // Deleting the bad TC never deletes the Pod's port.
    e.stores.traffic_controls.delete("bad");
    e.c.sync("bad").unwrap();
    assert!(e.bridge.names().contains("pa-veth"));
}

#[test]
fn fix_orphaned_tc_ports_swept_after_first_sync() {
    let (e, _, _) = env().with_pods();
    e.bridge
        .add_port("stale-tap", &[("antrea-type", "traffic-control")], None);
    e.bridge
        .add_port("kept", &[("antrea-type", "traffic-control")], None);
    e.bridge.add_port("someone-elses", &[], None);
    e.stores
        .traffic_controls
        .apply(tc("tc1", spec(app_a(), "Both", "Mirror", device("kept"))));
    e.c.sync("tc1").unwrap();
    assert_eq!(e.c.sweep_orphans(), vec!["stale-tap".to_string()]);
    let names = e.bridge.names();
    assert!(!names.contains("stale-tap"));
    assert!(names.contains("kept") && names.contains("someone-elses"));
}

#[test]
fn fix_restart_rebuilds_from_ovsdb_without_recreating_ports() {
    let (e, a, _) = env().with_pods();
    e.stores
        .traffic_controls
        .apply(tc("tc1", spec(app_a(), "Both", "Mirror", device("t1"))));
    e.c.sync("tc1").unwrap();
    e.bridge.take_log();
    // A new controller (tether restarted) over the same OVSDB and stores.
    let flows = Arc::new(FakeFlows::new());
    let c2 = TcController::new(
        e.stores.clone(),
        e.bridge.clone(),
        flows.clone(),
        e.links.clone(),
    );
    c2.restore_no_flood().unwrap();
    let t = e.ofport("t1");
    assert!(flows.no_flood.lock().unwrap().contains(&t));
    c2.sync("tc1").unwrap();
    assert!(e.bridge.take_log().is_empty(), "no port created or deleted");
    assert_eq!(
        flows.of(c2.owner_of("tc1")),
        expect(&[a], t, TcDirection::Both, TcAction::Mirror)
    );
    assert!(c2.sweep_orphans().is_empty());
}

// ---- Failure isolation -----------------------------------------------------------------

#[test]
fn invalid_tc_is_reported_and_removes_what_it_had() {
    let (e, _, _) = env().with_pods();
    e.stores
        .traffic_controls
        .apply(tc("tc1", spec(app_a(), "Both", "Mirror", device("t1"))));
    e.c.sync("tc1").unwrap();
    e.stores.traffic_controls.apply(tc(
        "tc1",
        spec(
            app_a(),
            "Both",
            "Mirror",
            json!({"vxlan": {"remoteIP": "1.1.1.1", "vni": 16777216}}),
        ),
    ));
    let err = e.c.sync("tc1").unwrap_err();
    assert!(matches!(err, SyncError::Invalid(_)));
    // Not retried: only a new version of the object can fix it.
    assert!(err.is_permanent());
    assert!(
        err.to_string().contains("spec.targetPort.vxlan.vni"),
        "{err}"
    );
    assert!(e.marks("tc1").is_empty());
    assert!(!e.bridge.names().contains("t1"));
    assert_eq!(
        e.c.status()[0].last_error.as_deref(),
        Some(err.to_string().as_str())
    );
}

#[test]
fn refused_port_fails_only_its_tc() {
    let (e, a, _) = env().with_pods();
    e.bridge.refuse.lock().unwrap().insert(
        "missing0".into(),
        "could not open network device missing0 (No such device)".into(),
    );
    e.stores.traffic_controls.apply(tc(
        "bad",
        spec(app_a(), "Both", "Mirror", device("missing0")),
    ));
    e.stores.traffic_controls.apply(tc_at(
        "good",
        "2026-11-30T10:00:00Z",
        spec(app_a(), "Both", "Mirror", device("t1")),
    ));
    let err = e.c.sync("bad").unwrap_err();
    assert_eq!(
        err.to_string(),
        "port missing0: ovs could not add interface \"missing0\" (ofport -1): could not open network device missing0 (No such device)"
    );
    e.c.sync("good").unwrap();
    // "bad" is older but invalid at the OVS level; it still claims the Pod (it is valid as a
    // spec), so "good" is an alternative: no flows, but it synced without error.
    assert!(e.marks("good").is_empty());
    let _ = a;
}

#[test]
fn openflow_error_fails_only_that_sync() {
    let (e, _, _) = env().with_pods();
    e.stores
        .traffic_controls
        .apply(tc("tc1", spec(app_a(), "Both", "Mirror", device("t1"))));
    *e.flows.fail.lock().unwrap() = Some(OfError::Switch {
        name: "OFPBAC_BAD_OUT_PORT".into(),
        type_: 2,
        code: 4,
        failed: "FLOW_MOD".into(),
    });
    assert!(matches!(e.c.sync("tc1"), Err(SyncError::Flows(_))));
    *e.flows.fail.lock().unwrap() = None;
    e.c.sync("tc1").unwrap();
    assert_eq!(e.marks("tc1").len(), 2);
    assert_eq!(e.c.status()[0].last_error, None);
}

/// A `device` target the host uses itself is refused before any port is created: a
/// permanent error for that TC only, naming the TC and the device; another TC is
/// unaffected, and what the TC had installed before goes.
#[test]
fn device_targets_the_host_uses_are_refused() {
    use crate::netlink::{Addr, Links, Prefix, Route};
    let (e, _, _) = env().with_pods();
    // The VM's management NIC: an address and the default route.
    let mgmt = e.links.add_link("ens3", [2, 0, 0, 0, 3, 3], 1500, true);
    e.links
        .add_addr(&Addr::new(mgmt, "192.0.2.10".parse().unwrap(), 24))
        .unwrap();
    let mut def = Route::new(Prefix::new("0.0.0.0".parse().unwrap(), 0), mgmt);
    def.gateway = Some("192.0.2.1".parse().unwrap());
    e.links.add_route(&def).unwrap();
    // A capture NIC with no address: fine.
    e.links.add_link("coll0", [2, 0, 0, 0, 3, 4], 1500, true);
    e.stores
        .traffic_controls
        .apply(tc("good", spec(app_a(), "Both", "Mirror", device("coll0"))));
    e.c.sync("good").unwrap();
    e.bridge.take_log();
    e.stores.traffic_controls.apply(tc(
        "bad",
        spec(app_a(), "Ingress", "Mirror", device("ens3")),
    ));
    let err = e.c.sync("bad").unwrap_err();
    assert!(err.is_permanent());
    assert_eq!(
        err.to_string(),
        "TrafficControl bad: refusing device ens3 as a target or return port: ens3 carries the host's addresses 192.0.2.10/24: capturing it would take them off the network"
    );
    assert!(
        e.bridge.take_log().is_empty(),
        "a port was created or deleted"
    );
    assert!(!e.bridge.names().contains("ens3"));
    assert!(e.bridge.names().contains("coll0"));
    // A return port counts too, and so do routes alone.
    e.links
        .del_addr(&Addr::new(mgmt, "192.0.2.10".parse().unwrap(), 24))
        .unwrap();
    let mut s = spec(app_a(), "Both", "Redirect", device("coll0"));
    s["returnPort"] = device("ens3");
    e.stores.traffic_controls.apply(tc("bad", s));
    let err = e.c.sync("bad").unwrap_err();
    assert!(
        err.to_string().ends_with(
            "ens3 has routes through it (default via 192.0.2.1): the host sends traffic out of it"
        ),
        "{err}"
    );
    assert!(!e.bridge.names().contains("ens3"));
    // A device that does not exist yet is attached when it appears, as before.
    e.stores
        .traffic_controls
        .apply(tc("later", spec(app_a(), "Both", "Mirror", device("t9"))));
    e.c.sync("later").unwrap();
    assert!(e.bridge.names().contains("t9"));
}

/// An `ovsInternal` target comes up when created and whenever a sync finds it down (a
/// restarted ovs-vswitchd re-creates it down); one that never appears is retried every
/// 1 s for 5 s, then reported on the TC (Antrea `controller.go`).
#[test]
fn ovs_internal_targets_are_brought_up() {
    use crate::netlink::{Call, DevSysctl, Links};
    use std::time::Duration;
    let (e, _, _) = env().with_pods();
    let tap = e.links.add_link("tap0", [2, 0, 0, 0, 7, 1], 1500, false);
    e.links.clear_calls();
    let internal = json!({"ovsInternal": {"name": "tap0"}});
    e.stores
        .traffic_controls
        .apply(tc("tc1", spec(app_a(), "Both", "Mirror", internal)));
    e.c.sync("tc1").unwrap();
    // IPv6 off first, so the kernel sends nothing out of the capture port.
    let quiet = Call::SetSysctl(tap, DevSysctl::Ipv6DisableIpv6, "1".into());
    assert_eq!(e.links.calls(), vec![quiet.clone(), Call::SetUp(tap)]);
    assert!(e.links.link_by_index(tap).unwrap().is_up());
    // Up already: nothing to do.
    e.links.clear_calls();
    e.c.sync("tc1").unwrap();
    assert_eq!(e.links.calls(), vec![]);
    // Found down again (the switch restarted): brought up again.
    e.links.set_down(tap).unwrap();
    e.links.clear_calls();
    e.c.sync("tc1").unwrap();
    assert_eq!(e.links.calls(), vec![quiet, Call::SetUp(tap)]);
    // A netdev that never appears: 5 waits of 1 s, then an error on the TC.
    let missing = json!({"ovsInternal": {"name": "tap9"}});
    e.stores
        .traffic_controls
        .apply(tc("tc2", spec(app_a(), "Both", "Mirror", missing)));
    e.links.clear_calls();
    let err = e.c.sync("tc2").unwrap_err();
    assert!(!err.is_permanent());
    assert_eq!(
        e.links.calls(),
        vec![Call::Pause(Duration::from_secs(1)); 5]
    );
    assert!(
        err.to_string()
            .starts_with("port tap9: cannot bring its netdev up"),
        "{err}"
    );
    let st = e.c.status();
    let row = st.iter().find(|s| s.name == "tc2").unwrap();
    assert!(
        row.last_error
            .as_deref()
            .unwrap()
            .contains("cannot bring its netdev up")
    );
}

/// Antrea's two ERSPAN doc examples: the same remote IP and session ID (v1 and v2). OVS
/// holds only one such tunnel ("File exists"), so the later TC gets a permanent error
/// naming the earlier one, whose port is untouched; when the earlier TC goes, the later
/// one is re-checked and gets its port.
#[test]
fn clashing_tunnels_refuse_the_later_tc() {
    let (e, _, _) = env().with_pods();
    let v1 = json!({"erspan": {"remoteIP": "10.0.10.2", "sessionID": 1, "version": 1, "index": 1}});
    let v2 = json!({"erspan": {"remoteIP": "10.0.10.2", "sessionID": 1, "version": 2, "dir": 0, "hardwareID": 4}});
    e.stores
        .traffic_controls
        .apply(tc("mirror-v1", spec(app_a(), "Both", "Mirror", v1)));
    e.c.sync("mirror-v1").unwrap();
    let first = e.bridge.names();
    e.stores
        .traffic_controls
        .apply(tc("mirror-v2", spec(app_a(), "Both", "Mirror", v2)));
    let err = e.c.sync("mirror-v2").unwrap_err();
    let s = err.to_string();
    assert!(err.is_permanent(), "{s}");
    assert!(
        s.contains("would be the same tunnel (erspan dst_port=- key=1 remote_ip=10.0.10.2) as port erspan-")
            && s.ends_with("of TrafficControl mirror-v1, and ovs-vswitchd allows only one: change the remote IP, key or port of one of them"),
        "{s}"
    );
    assert_eq!(e.bridge.names(), first, "no port created");
    // The earlier TC going makes the later one worth another try.
    let gone = e.stores.traffic_controls.get("mirror-v1").unwrap();
    assert!(route::tcs_for_tc(&e.stores, &e.c.clashing(), Some(&gone), None).contains("mirror-v2"));
    e.stores.traffic_controls.delete("mirror-v1");
    e.c.sync("mirror-v1").unwrap();
    e.c.sync("mirror-v2").unwrap();
    assert_eq!(e.bridge.names().len(), first.len());
}

/// A tunnel port whose options differ from what its TC implies (written by an older tether:
/// the ERSPAN hardware ID was decimal) is fixed in place, keeping its ofport.
#[test]
fn tunnel_options_are_fixed_in_place() {
    let (e, _, _) = env().with_pods();
    let v2 = json!({"erspan": {"remoteIP": "10.0.10.2", "sessionID": 1, "version": 2, "hardwareID": 10}});
    e.stores
        .traffic_controls
        .apply(tc("m", spec(app_a(), "Both", "Mirror", v2)));
    e.c.sync("m").unwrap();
    let port = e
        .bridge
        .names()
        .into_iter()
        .find(|n| n.starts_with("erspan-"))
        .unwrap();
    let of = e.ofport(&port);
    let mut old = e.bridge.port(&port).unwrap().options;
    assert_eq!(old.get("erspan_hwid").map(String::as_str), Some("a"));
    old.insert("erspan_hwid".into(), "10".into());
    e.bridge.set_interface_options(&port, &old).unwrap();
    e.bridge.take_log();
    e.c.sync("m").unwrap();
    assert_eq!(
        e.bridge.take_log().len(),
        1,
        "one options update, no re-create"
    );
    assert_eq!(
        e.bridge
            .port(&port)
            .unwrap()
            .options
            .get("erspan_hwid")
            .map(String::as_str),
        Some("a")
    );
    assert_eq!(e.ofport(&port), of);
}

/// A GRE port to an IPv6 remote that an older tether wrote as `gre` is re-created as
/// `ip6gre` under the same name (a type change re-creates the netdev anyway).
#[test]
fn an_ipv6_gre_port_of_the_old_type_is_recreated() {
    let (e, _, _) = env().with_pods();
    let gre = json!({"gre": {"remoteIP": "2001:db8::2", "key": 1}});
    e.stores
        .traffic_controls
        .apply(tc("m", spec(app_a(), "Both", "Mirror", gre)));
    e.c.sync("m").unwrap();
    let port = e
        .bridge
        .names()
        .into_iter()
        .find(|n| n.starts_with("gre-"))
        .unwrap();
    assert_eq!(e.bridge.port(&port).unwrap().if_type, "ip6gre");
    e.bridge.set_if_type(&port, "gre");
    e.bridge.take_log();
    e.c.sync("m").unwrap();
    let log = e.bridge.take_log();
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!(log[0], format!("delete {port}"));
    assert!(
        log[1].starts_with(&format!("create {port} ip6gre")),
        "{log:?}"
    );
    assert_eq!(e.bridge.port(&port).unwrap().if_type, "ip6gre");
    e.bridge.take_log();
    e.c.sync("m").unwrap();
    assert_eq!(e.bridge.take_log(), Vec::<String>::new(), "converged");
}

/// A TC's and a return port's flow owners come from their names (sha1, top bit clear), so
/// they are the same in every process: `tether flows --tc NAME` relies on it.
#[test]
fn owners_are_derived_from_names() {
    assert_eq!(object_id("mirror"), 0x7fff_80d2);
    assert_eq!(object_id("port:r1"), 0x0933_e90f);
    let e = env();
    assert_eq!(
        e.c.owner_of("mirror"),
        Owner::new(Category::TRAFFIC_CONTROL, 0x7fff_80d2)
    );
    assert_eq!(e.c.owner_of("port:r1").object, 0x0933_e90f);
    // Asked again, the same owner.
    assert_eq!(e.c.owner_of("mirror").object, 0x7fff_80d2);
}
