//! Which bridge ports and flows are a TC's: only traffic-control ports are reused, orphans
//! are swept, a restart rebuilds from OVSDB, ports an older tether wrote are fixed, and flow
//! owners come from names.

use super::*;

#[test]
fn fix_only_traffic_control_ports_are_reused() {
    let (e, _, _) = env().with_pods();
    e.apply("bad", mirror_a("pa-veth"));
    let b = json!({"podSelector": {"matchLabels": {"app": "b"}}});
    e.apply("good", spec(b, "Egress", "Mirror", device("t1")));
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
    e.apply_synced("tc1", mirror_a("kept"));
    assert_eq!(e.c.sweep_orphans(), vec!["stale-tap".to_string()]);
    let names = e.bridge.names();
    assert!(!names.contains("stale-tap"));
    assert!(names.contains("kept") && names.contains("someone-elses"));
}

#[test]
fn fix_restart_rebuilds_from_ovsdb_without_recreating_ports() {
    let (e, a, _) = env().with_pods();
    e.apply_synced("tc1", mirror_a("t1"));
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

/// A tunnel port whose options differ from what its TC implies (written by an older tether:
/// the ERSPAN hardware ID was decimal) is fixed in place, keeping its ofport.
#[test]
fn tunnel_options_are_fixed_in_place() {
    let (e, _, _) = env().with_pods();
    let v2 = json!({"erspan": {"remoteIP": "10.0.10.2", "sessionID": 1, "version": 2, "hardwareID": 10}});
    e.apply_synced("m", spec(app_a(), "Both", "Mirror", v2));
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
    e.apply_synced("m", spec(app_a(), "Both", "Mirror", gre));
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
