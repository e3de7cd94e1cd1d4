//! Failure isolation: an invalid TC, a port OVS refuses, an OpenFlow error, a device the
//! host uses, and a tunnel clashing with another TC's fail only their own TC.

use super::*;

#[test]
fn invalid_tc_is_reported_and_removes_what_it_had() {
    let (e, _, _) = env().with_pods();
    e.apply_synced("tc1", mirror_a("t1"));
    e.apply(
        "tc1",
        spec(
            app_a(),
            "Both",
            "Mirror",
            json!({"vxlan": {"remoteIP": "1.1.1.1", "vni": 16777216}}),
        ),
    );
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
    e.apply("bad", mirror_a("missing0"));
    e.stores
        .traffic_controls
        .apply(tc_at("good", "2026-11-30T10:00:00Z", mirror_a("t1")));
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
    e.apply("tc1", mirror_a("t1"));
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
    e.apply_synced("good", mirror_a("coll0"));
    e.bridge.take_log();
    e.apply("bad", spec(app_a(), "Ingress", "Mirror", device("ens3")));
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
    e.apply("bad", s);
    let err = e.c.sync("bad").unwrap_err();
    assert!(
        err.to_string().ends_with(
            "ens3 has routes through it (default via 192.0.2.1): the host sends traffic out of it"
        ),
        "{err}"
    );
    assert!(!e.bridge.names().contains("ens3"));
    // A device that does not exist yet is attached when it appears, as before.
    e.apply_synced("later", mirror_a("t9"));
    assert!(e.bridge.names().contains("t9"));
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
    e.apply_synced("mirror-v1", spec(app_a(), "Both", "Mirror", v1));
    let first = e.bridge.names();
    e.apply("mirror-v2", spec(app_a(), "Both", "Mirror", v2));
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
