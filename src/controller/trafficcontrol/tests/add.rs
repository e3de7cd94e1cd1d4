//! A TC added (Antrea TestTrafficControlAdd): device and tunnel targets created, existing
//! target and return ports reused, `ovsInternal` targets brought up, and the Pods each kind
//! of appliedTo selects.

use super::*;

#[test]
fn add_device_target_not_yet_on_the_bridge() {
    let (e, a, _) = env().with_pods();
    e.apply_synced("tc1", mirror_a("target1"));
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
    e.apply_synced("tc1", spec(app_a(), "Egress", "Mirror", target));
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
    e.apply_synced("tc1", s);
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
    e.apply_synced("tc1", spec(app_a(), "Both", "Mirror", internal));
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
    e.apply("tc2", spec(app_a(), "Both", "Mirror", missing));
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

fn selection_case(applied_to: Value, want: &[&str]) {
    let (e, a, b) = env().with_pods();
    e.apply_synced("tc1", spec(applied_to, "Ingress", "Mirror", device("t1")));
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
    e.apply_synced("tc1", mirror_a("t1"));
    assert_eq!(e.c.status()[0].effective_pods, vec!["ns1/pa".to_string()]);
}
