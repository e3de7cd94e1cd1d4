use super::*;
use serde_json::json;

fn tc(spec: serde_json::Value) -> TrafficControl {
    TrafficControl::decode(json!({"metadata": {"name": "tc1"}, "spec": spec})).unwrap()
}

fn err(spec: serde_json::Value) -> String {
    match tc(spec).spec {
        Ok(s) => panic!("expected an error, got {s:?}"),
        Err(e) => e.to_string(),
    }
}

fn base(target: serde_json::Value) -> serde_json::Value {
    json!({"appliedTo": {"podSelector": {"matchLabels": {"app": "web"}}},
           "direction": "Both", "action": "Redirect", "targetPort": target})
}

#[test]
fn full_spec_decodes_to_typed_values() {
    let t = tc(json!({
        "appliedTo": {"podSelector": {"matchLabels": {"app": "web"}},
                      "namespaceSelector": {}},
        "direction": "Ingress", "action": "Redirect",
        "targetPort": {"vxlan": {"remoteIP": "2001:db8::1", "vni": 16777215, "destinationPort": 4790}},
        "returnPort": {"ovsInternal": {"name": "tc-return"}},
        "unknownField": 1
    }));
    let s = t.spec.unwrap();
    assert_eq!(s.direction, TcDirection::Ingress);
    assert_eq!(s.action, TcAction::Redirect);
    assert_eq!(
        s.target_port,
        TcPort::Vxlan(UdpTunnel {
            remote_ip: "2001:db8::1".parse().unwrap(),
            vni: Some(16_777_215),
            destination_port: Some(4790)
        })
    );
    assert_eq!(
        s.return_port,
        Some(TcPort::OvsInternal {
            name: "tc-return".into()
        })
    );
    assert_eq!(
        s.applied_to.namespace_selector,
        Some(LabelSelector::default())
    );
}

#[test]
fn every_port_variant() {
    let s = tc(base(
        json!({"gre": {"remoteIP": "192.0.2.1", "key": 4294967295u64}}),
    ))
    .spec
    .unwrap();
    assert_eq!(
        s.target_port,
        TcPort::Gre(GreTunnel {
            remote_ip: "192.0.2.1".parse().unwrap(),
            key: Some(u32::MAX)
        })
    );
    let s = tc(base(
        json!({"erspan": {"remoteIP": "192.0.2.1", "sessionID": 1023, "version": 2,
                                      "dir": 1, "hardwareID": 4}}),
    ))
    .spec
    .unwrap();
    assert_eq!(
        s.target_port,
        TcPort::Erspan(ErspanTunnel {
            remote_ip: "192.0.2.1".parse().unwrap(),
            session_id: Some(1023),
            version: ErspanVersion::V2,
            index: None,
            dir: Some(1),
            hardware_id: Some(4)
        })
    );
    let s = tc(base(json!({"device": {"name": "eth7"}}))).spec.unwrap();
    assert_eq!(
        s.target_port,
        TcPort::Device {
            name: "eth7".into()
        }
    );
    let s = tc(base(json!({"geneve": {"remoteIP": "198.51.100.9"}})))
        .spec
        .unwrap();
    assert_eq!(
        s.target_port,
        TcPort::Geneve(UdpTunnel {
            remote_ip: "198.51.100.9".parse().unwrap(),
            vni: None,
            destination_port: None
        })
    );
}

#[test]
fn range_and_enum_errors_name_the_field() {
    assert_eq!(
        err(base(
            json!({"vxlan": {"remoteIP": "192.0.2.1", "vni": 16777216}})
        )),
        "spec.targetPort.vxlan.vni: 16777216 out of range 0..16777215"
    );
    assert_eq!(
        err(base(
            json!({"geneve": {"remoteIP": "192.0.2.1", "destinationPort": 0}})
        )),
        "spec.targetPort.geneve.destinationPort: 0 out of range 1..65535"
    );
    assert_eq!(
        err(base(json!({"gre": {"remoteIP": "192.0.2.1", "key": -1}}))),
        "spec.targetPort.gre.key: -1 out of range 0..4294967295"
    );
    assert_eq!(
        err(base(
            json!({"erspan": {"remoteIP": "192.0.2.1", "version": 3, "sessionID": 1024}})
        )),
        "spec.targetPort.erspan.sessionID: 1024 out of range 0..1023; spec.targetPort.erspan.version: 3 is not one of 1, 2"
    );
    assert_eq!(
        err(base(
            json!({"erspan": {"remoteIP": "192.0.2.1", "version": 2, "dir": 2}})
        )),
        "spec.targetPort.erspan.dir: 2 is not one of 0, 1"
    );
    // The ranges ovs-vswitchd accepts; the CRD bounds neither.
    for (field, v, range) in [
        ("index", -1i64, "0..1048575"),
        ("index", 0x10_0000, "0..1048575"),
        ("hardwareID", 64, "0..63"),
        ("hardwareID", -1, "0..63"),
    ] {
        let mut port = json!({"erspan": {"remoteIP": "192.0.2.1", "version": 2}});
        port["erspan"][field] = json!(v);
        assert_eq!(
            err(base(port)),
            format!("spec.targetPort.erspan.{field}: {v} out of range {range}")
        );
    }
    for (field, v) in [("index", 0xF_FFFF), ("hardwareID", 0x3F), ("index", 0)] {
        let mut port = json!({"erspan": {"remoteIP": "192.0.2.1", "version": 1}});
        port["erspan"][field] = json!(v);
        assert!(tc(base(port)).spec.is_ok(), "{field}={v}");
    }
    assert_eq!(
        err(base(json!({"vxlan": {"remoteIP": "192.0.2.300"}}))),
        "spec.targetPort.vxlan.remoteIP: \"192.0.2.300\" is not an IPv4 or IPv6 address"
    );
    assert_eq!(
        err(base(json!({"vxlan": {}}))),
        "spec.targetPort.vxlan.remoteIP: required"
    );
    assert_eq!(
        err(base(json!({"ovsInternal": {"name": ""}}))),
        "spec.targetPort.ovsInternal.name: required"
    );
}

#[test]
fn exactly_one_port_variant() {
    assert_eq!(
        err(base(
            json!({"vxlan": {"remoteIP": "192.0.2.1"}, "gre": {"remoteIP": "192.0.2.1"}})
        )),
        "spec.targetPort: exactly one of ovsInternal, device, geneve, vxlan, gre, erspan must be set (found 2: vxlan, gre)"
    );
    assert_eq!(
        err(base(json!({}))),
        "spec.targetPort: exactly one of ovsInternal, device, geneve, vxlan, gre, erspan must be set (found 0)"
    );
    let mut s = base(json!({"device": {"name": "eth7"}}));
    s["returnPort"] = json!({"erspan": {"remoteIP": "192.0.2.1", "version": 1}});
    assert_eq!(
        err(s),
        "spec.returnPort.erspan: not allowed in a return port"
    );
}

#[test]
fn missing_fields_and_type_errors() {
    assert_eq!(
        err(json!({})),
        "spec.appliedTo: required; spec.direction: required; spec.action: required; spec.targetPort: required"
    );
    let mut s = base(json!({"device": {"name": "eth7"}}));
    s["direction"] = json!("Sideways");
    assert_eq!(
        err(s),
        "spec.direction: \"Sideways\" is not one of Ingress, Egress, Both"
    );
    let e = err(base(
        json!({"vxlan": {"remoteIP": "192.0.2.1", "vni": "five"}}),
    ));
    // A type error names the field too (found by re-parsing with one field per line).
    assert_eq!(
        e,
        "spec.targetPort.vxlan.vni: invalid type: string \"five\", expected i64"
    );
    let t = TrafficControl::decode(json!({"metadata": {"name": "x"}})).unwrap();
    assert_eq!(t.spec.unwrap_err().to_string(), "spec: required");
}

#[test]
fn selector_errors_surface_on_the_object() {
    let s = json!({"appliedTo": {"podSelector": {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}},
                   "direction": "Both", "action": "Mirror", "targetPort": {"device": {"name": "eth7"}}});
    assert_eq!(
        err(s),
        "spec.appliedTo.podSelector.matchExpressions[0].operator: \"Bogus\" is not one of In, NotIn, Exists, DoesNotExist"
    );
}

#[test]
fn applied_to_semantics() {
    let l = |k: &str| -> Labels { [(k.to_string(), "1".to_string())].into_iter().collect() };
    let sel = |k: &str| {
        LabelSelector::from_wire(
            &serde_json::from_value(json!({"matchLabels": {k: "1"}})).unwrap(),
            "x",
        )
        .unwrap()
    };
    let none = AppliedTo::default();
    assert!(!none.selects(&l("a"), &l("n")));
    let pod_only = AppliedTo {
        pod_selector: Some(sel("a")),
        namespace_selector: None,
    };
    assert!(pod_only.selects(&l("a"), &Labels::new()));
    assert!(!pod_only.selects(&l("b"), &Labels::new()));
    let ns_only = AppliedTo {
        pod_selector: None,
        namespace_selector: Some(sel("n")),
    };
    assert!(ns_only.selects(&Labels::new(), &l("n")));
    assert!(!ns_only.selects(&l("a"), &l("m")));
    let both = AppliedTo {
        pod_selector: Some(sel("a")),
        namespace_selector: Some(sel("n")),
    };
    assert!(both.selects(&l("a"), &l("n")));
    assert!(!both.selects(&l("a"), &l("m")));
}

#[test]
fn external_node() {
    let en = ExternalNode::decode(json!({"metadata": {"name": "vm1", "namespace": "default"},
        "spec": {"interfaces": [{"name": "eth0", "ips": ["192.0.2.10", "2001:db8::10"]}]}}))
    .unwrap();
    assert_eq!(en.key(), "default/vm1");
    let s = en.spec.unwrap();
    assert_eq!(s.interfaces[0].name, "eth0");
    assert_eq!(s.interfaces[0].ips.len(), 2);
    let bad = ExternalNode::decode(json!({"metadata": {"name": "vm1"},
        "spec": {"interfaces": [{"name": "eth0", "ips": ["bogus"]}]}}))
    .unwrap();
    assert_eq!(
        bad.spec.unwrap_err().to_string(),
        "spec.interfaces[0].ips[0]: \"bogus\" is not an IPv4 or IPv6 address"
    );
    let two = ExternalNode::decode(json!({"metadata": {"name": "vm1"},
        "spec": {"interfaces": [{"ips": ["192.0.2.1"]}, {"ips": ["192.0.2.2"]}]}}))
    .unwrap();
    assert_eq!(
        two.spec.unwrap_err().to_string(),
        "spec.interfaces: must have exactly 1 item, has 2"
    );
    let no_ips = ExternalNode::decode(json!({"metadata": {"name": "vm1"},
        "spec": {"interfaces": [{"name": "eth0"}]}}))
    .unwrap();
    assert_eq!(
        no_ips.spec.unwrap_err().to_string(),
        "spec.interfaces[0].ips: must have at least 1 item"
    );
}

/// Addresses no NIC can be taken over for: `127.0.0.1` made tether set `lo` down and
/// rename it, over and over. Refused in validation, so nothing touches a link.
#[test]
fn external_node_ips_must_be_unicast_addresses_of_the_vm() {
    for (ip, why) in [
        ("127.0.0.1", "a loopback address"),
        ("127.8.9.1", "a loopback address"),
        ("::1", "a loopback address"),
        ("::ffff:127.0.0.1", "a loopback address"),
        ("0.0.0.0", "the unspecified address"),
        ("::", "the unspecified address"),
        ("224.0.0.1", "a multicast address"),
        ("ff02::1", "a multicast address"),
        ("255.255.255.255", "the broadcast address"),
        ("169.254.1.1", "a link-local address"),
        ("fe80::1", "a link-local address"),
    ] {
        let en = ExternalNode::decode(json!({"metadata": {"name": "vm1"},
            "spec": {"interfaces": [{"ips": ["192.0.2.10", ip]}]}}))
        .unwrap();
        let shown: std::net::IpAddr = ip.parse().unwrap();
        assert_eq!(
            en.spec.unwrap_err().to_string(),
            format!(
                "spec.interfaces[0].ips[1]: {shown} is {why}: an ExternalNode names the VM's own unicast addresses"
            ),
            "{ip}"
        );
    }
}
