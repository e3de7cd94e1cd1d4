//! Bad TrafficControl and ExternalNode objects: each case decoded in a LIST page and in a
//! watch stream between valid objects, which must come through unaffected.

use super::*;

// ---------------------------------------------------------------------------------------
// TrafficControl

/// A valid spec every bad case is a variation of.
fn good_tc_spec() -> Value {
    json!({
        "appliedTo": {"podSelector": {"matchLabels": {"app": "web"}}},
        "direction": "Ingress",
        "action": "Mirror",
        "targetPort": {"device": {"name": "tap0"}},
    })
}

fn tc_obj(name: &str, spec: Option<Value>) -> Value {
    let mut o = json!({
        "apiVersion": "crd.antrea.io/v1alpha2",
        "kind": "TrafficControl",
        "metadata": {"name": name, "resourceVersion": "7", "uid": format!("uid-{name}")},
    });
    if let Some(s) = spec {
        o["spec"] = s;
    }
    o
}

/// `good_tc_spec()` with `pointer` set to `v` (`None` removes the field).
fn tc_with(pointer: &str, v: Option<Value>) -> Value {
    let mut s = good_tc_spec();
    let (parent, last) = pointer.rsplit_once('/').unwrap();
    let target = s.pointer_mut(parent).unwrap().as_object_mut().unwrap();
    match v {
        Some(v) => {
            target.insert(last.to_string(), v);
        }
        None => {
            target.remove(last);
        }
    }
    s
}

struct TcCase {
    name: &'static str,
    spec: Option<Value>,
    /// Substrings the error must contain: the field path first, then what is wrong.
    expect: &'static [&'static str],
}

fn tc_cases() -> Vec<TcCase> {
    let port = |p: Value| tc_with("/targetPort", Some(p));
    let ret = |p: Value| tc_with("/returnPort", Some(p));
    let sel = |p: &str, s: Value| {
        let mut spec = good_tc_spec();
        spec["appliedTo"][p] = s;
        Some(spec)
    };
    let c = |name, spec: Value, expect| TcCase {
        name,
        spec: Some(spec),
        expect,
    };
    vec![
        TcCase {
            name: "tc-no-spec",
            spec: None,
            expect: &["spec: required"],
        },
        c("tc-spec-a-string", json!("mirror everything"), &["spec: invalid type: string"]),
        c("tc-spec-empty", json!({}), &["spec.appliedTo: required", "spec.direction: required", "spec.action: required", "spec.targetPort: required"]),
        c("tc-no-applied-to", tc_with("/appliedTo", None), &["spec.appliedTo: required"]),
        c("tc-no-direction", tc_with("/direction", None), &["spec.direction: required"]),
        c("tc-direction-sideways", tc_with("/direction", Some(json!("Sideways"))), &["spec.direction", "Sideways"]),
        c("tc-direction-lowercase", tc_with("/direction", Some(json!("ingress"))), &["spec.direction", "ingress"]),
        c("tc-no-action", tc_with("/action", None), &["spec.action: required"]),
        c("tc-action-drop", tc_with("/action", Some(json!("Drop"))), &["spec.action", "Drop"]),
        c("tc-no-target-port", tc_with("/targetPort", None), &["spec.targetPort: required"]),
        c("tc-target-port-empty", port(json!({})), &["spec.targetPort: exactly one of", "found 0"]),
        c("tc-target-port-device-and-internal", port(json!({"device": {"name": "a"}, "ovsInternal": {"name": "b"}})), &["spec.targetPort: exactly one of", "found 2: ovsInternal, device"]),
        c("tc-target-port-vxlan-and-gre", port(json!({"vxlan": {"remoteIP": "192.0.2.1"}, "gre": {"remoteIP": "192.0.2.1"}})), &["spec.targetPort", "found 2: vxlan, gre"]),
        c("tc-target-port-all-six", port(json!({"device": {"name": "a"}, "ovsInternal": {"name": "b"}, "geneve": {"remoteIP": "192.0.2.1"}, "vxlan": {"remoteIP": "192.0.2.1"}, "gre": {"remoteIP": "192.0.2.1"}, "erspan": {"remoteIP": "192.0.2.1", "version": 1}})), &["spec.targetPort", "found 6"]),
        c("tc-device-name-empty", port(json!({"device": {"name": ""}})), &["spec.targetPort.device.name: required"]),
        c("tc-ovs-internal-no-name", port(json!({"ovsInternal": {}})), &["spec.targetPort.ovsInternal.name: required"]),
        c("tc-vxlan-no-remote", port(json!({"vxlan": {"vni": 1}})), &["spec.targetPort.vxlan.remoteIP: required"]),
        c("tc-vxlan-remote-not-ip", port(json!({"vxlan": {"remoteIP": "tunnel.example"}})), &["spec.targetPort.vxlan.remoteIP", "tunnel.example"]),
        c("tc-vxlan-remote-cidr", port(json!({"vxlan": {"remoteIP": "192.0.2.1/32"}})), &["spec.targetPort.vxlan.remoteIP", "192.0.2.1/32"]),
        c("tc-vxlan-vni-too-big", port(json!({"vxlan": {"remoteIP": "192.0.2.1", "vni": 16_777_216}})), &["spec.targetPort.vxlan.vni", "16777216"]),
        c("tc-vxlan-vni-negative", port(json!({"vxlan": {"remoteIP": "192.0.2.1", "vni": -1}})), &["spec.targetPort.vxlan.vni", "-1"]),
        c("tc-geneve-port-zero", port(json!({"geneve": {"remoteIP": "2001:db8::1", "destinationPort": 0}})), &["spec.targetPort.geneve.destinationPort", "0"]),
        c("tc-geneve-port-65536", port(json!({"geneve": {"remoteIP": "2001:db8::1", "destinationPort": 65_536}})), &["spec.targetPort.geneve.destinationPort", "65536"]),
        c("tc-gre-key-2-32", port(json!({"gre": {"remoteIP": "192.0.2.1", "key": 4_294_967_296_i64}})), &["spec.targetPort.gre.key", "4294967296"]),
        c("tc-gre-key-negative", port(json!({"gre": {"remoteIP": "192.0.2.1", "key": -5}})), &["spec.targetPort.gre.key", "-5"]),
        c("tc-erspan-version-3", port(json!({"erspan": {"remoteIP": "192.0.2.1", "version": 3}})), &["spec.targetPort.erspan.version: 3 is not one of 1, 2"]),
        c("tc-erspan-no-version", port(json!({"erspan": {"remoteIP": "192.0.2.1"}})), &["spec.targetPort.erspan.version: required"]),
        c("tc-erspan-session-1024", port(json!({"erspan": {"remoteIP": "192.0.2.1", "version": 1, "sessionID": 1024}})), &["spec.targetPort.erspan.sessionID", "1024"]),
        c("tc-erspan-dir-2", port(json!({"erspan": {"remoteIP": "192.0.2.1", "version": 2, "dir": 2}})), &["spec.targetPort.erspan.dir: 2 is not one of 0, 1"]),
        c("tc-erspan-index-2-31", port(json!({"erspan": {"remoteIP": "192.0.2.1", "version": 1, "index": 2_147_483_648_i64}})), &["spec.targetPort.erspan.index", "2147483648"]),
        c("tc-erspan-hwid-too-small", port(json!({"erspan": {"remoteIP": "192.0.2.1", "version": 2, "hardwareID": -2_147_483_649_i64}})), &["spec.targetPort.erspan.hardwareID", "-2147483649"]),
        c("tc-return-port-erspan", ret(json!({"erspan": {"remoteIP": "192.0.2.1", "version": 1}})), &["spec.returnPort.erspan: not allowed in a return port"]),
        c("tc-return-port-two-variants", ret(json!({"device": {"name": "a"}, "geneve": {"remoteIP": "192.0.2.1"}})), &["spec.returnPort: exactly one of ovsInternal, device, geneve, vxlan, gre must be set (found 2"]),
        c("tc-return-port-empty", ret(json!({})), &["spec.returnPort: exactly one of", "found 0"]),
        c("tc-selector-bad-key", sel("podSelector", json!({"matchLabels": {"bad key!": "x"}})).unwrap(), &["spec.appliedTo.podSelector.matchLabels", "invalid key"]),
        c("tc-selector-bad-value", sel("podSelector", json!({"matchLabels": {"app": "no spaces allowed"}})).unwrap(), &["spec.appliedTo.podSelector.matchLabels.app", "invalid value"]),
        c("tc-selector-value-64-chars", sel("namespaceSelector", json!({"matchLabels": {"env": "a".repeat(64)}})).unwrap(), &["spec.appliedTo.namespaceSelector.matchLabels.env", "invalid value"]),
        c("tc-selector-operator-like", sel("podSelector", json!({"matchExpressions": [{"key": "app", "operator": "Like", "values": ["w"]}]})).unwrap(), &["spec.appliedTo.podSelector.matchExpressions[0].operator", "Like"]),
        c("tc-selector-in-no-values", sel("podSelector", json!({"matchExpressions": [{"key": "app", "operator": "In", "values": []}]})).unwrap(), &["spec.appliedTo.podSelector.matchExpressions[0].values: must be non-empty for operator In or NotIn"]),
        c("tc-selector-exists-with-values", sel("namespaceSelector", json!({"matchExpressions": [{"key": "env", "operator": "Exists", "values": ["x"]}]})).unwrap(), &["spec.appliedTo.namespaceSelector.matchExpressions[0].values: must be empty for operator Exists or DoesNotExist"]),
        c("tc-selector-expression-bad-key", sel("podSelector", json!({"matchExpressions": [{"key": "-lead", "operator": "Exists"}]})).unwrap(), &["spec.appliedTo.podSelector.matchExpressions[0].key", "invalid key"]),
        c("tc-several-errors-at-once", json!({"appliedTo": {}, "direction": "Up", "action": "Copy", "targetPort": {"vxlan": {"remoteIP": "x", "vni": -1}}}), &["spec.direction", "spec.action", "spec.targetPort.vxlan.remoteIP", "spec.targetPort.vxlan.vni"]),
    ]
}

fn assert_good_tc(tc: &TrafficControl, name: &str) {
    assert_eq!(tc.metadata.name, name);
    let s = tc.spec.as_ref().unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(s.direction, TcDirection::Ingress);
    assert_eq!(
        s.target_port,
        TcPort::Device {
            name: "tap0".into()
        }
    );
}

fn assert_tc_error(tc: &TrafficControl, c: &TcCase) {
    assert_eq!(tc.metadata.name, c.name, "the object keeps its name");
    let err = match &tc.spec {
        Ok(s) => panic!("accepted: {s:?}"),
        Err(e) => e.to_string(),
    };
    for want in c.expect {
        assert!(err.contains(want), "error {err:?} lacks {want:?}");
    }
    // Every message starts with a field path under `spec`.
    let e = tc.spec.as_ref().unwrap_err();
    assert!(!e.errors.is_empty());
    for f in &e.errors {
        assert!(f.path.starts_with("spec"), "path {:?}", f.path);
    }
}

#[test]
fn traffic_control_fields_in_a_list_page() {
    let cases = tc_cases();
    run_table(
        "TrafficControl (LIST page)",
        &cases,
        |c| c.name.to_string(),
        |c| {
            let body = json!({
                "kind": "TrafficControlList",
                "metadata": {"resourceVersion": "42"},
                "items": [
                    tc_obj("aa-good", Some(good_tc_spec())),
                    tc_obj(c.name, c.spec.clone()),
                    tc_obj("zz-good", Some(good_tc_spec())),
                ],
            });
            let page = decode_list::<TrafficControl>(body.to_string().as_bytes()).unwrap();
            assert_eq!(page.items.len(), 3, "no object dropped");
            assert_eq!(page.resource_version, "42");
            assert_good_tc(&page.items[0], "aa-good");
            assert_tc_error(&page.items[1], c);
            assert_good_tc(&page.items[2], "zz-good");
        },
    );
}

#[test]
fn traffic_control_fields_in_a_watch_stream() {
    let cases = tc_cases();
    run_table(
        "TrafficControl (watch)",
        &cases,
        |c| c.name.to_string(),
        |c| {
            let lines = [
                json!({"type": "ADDED", "object": tc_obj("aa-good", Some(good_tc_spec()))}),
                json!({"type": "MODIFIED", "object": tc_obj(c.name, c.spec.clone())}),
                json!({"type": "ADDED", "object": tc_obj("zz-good", Some(good_tc_spec()))}),
            ];
            let ev: Vec<WatchEvent<TrafficControl>> = lines
                .iter()
                .map(|l| decode_event(l.to_string().as_bytes()).unwrap())
                .collect();
            match &ev[..] {
                [
                    WatchEvent::Added(a),
                    WatchEvent::Modified(bad),
                    WatchEvent::Added(z),
                ] => {
                    assert_good_tc(a, "aa-good");
                    assert_tc_error(bad, c);
                    assert_good_tc(z, "zz-good");
                }
                other => panic!("events {other:?}"),
            }
        },
    );
}

// ---------------------------------------------------------------------------------------
// ExternalNode

fn en_obj(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "crd.antrea.io/v1alpha1",
        "kind": "ExternalNode",
        "metadata": {"name": name, "namespace": "vms", "resourceVersion": "3"},
        "spec": spec,
    })
}

fn good_en_spec() -> Value {
    json!({"interfaces": [{"name": "eth0", "ips": ["192.0.2.10", "2001:db8::10"]}]})
}

#[test]
fn external_node_fields() {
    let cases: Vec<(&str, Value, &[&str])> = vec![
        (
            "en-no-interfaces",
            json!({}),
            &["spec.interfaces: required"],
        ),
        (
            "en-zero-interfaces",
            json!({"interfaces": []}),
            &["spec.interfaces: must have exactly 1 item, has 0"],
        ),
        (
            "en-two-interfaces",
            json!({"interfaces": [{"ips": ["192.0.2.1"]}, {"ips": ["192.0.2.2"]}]}),
            &["spec.interfaces: must have exactly 1 item, has 2"],
        ),
        (
            "en-no-ips",
            json!({"interfaces": [{"name": "eth0"}]}),
            &["spec.interfaces[0].ips: must have at least 1 item"],
        ),
        (
            "en-empty-ips",
            json!({"interfaces": [{"name": "eth0", "ips": []}]}),
            &["spec.interfaces[0].ips: must have at least 1 item"],
        ),
        (
            "en-ip-out-of-range",
            json!({"interfaces": [{"ips": ["192.0.2.300"]}]}),
            &["spec.interfaces[0].ips[0]", "192.0.2.300"],
        ),
        (
            "en-ip-is-a-cidr",
            json!({"interfaces": [{"ips": ["192.0.2.1", "192.0.2.0/24"]}]}),
            &["spec.interfaces[0].ips[1]", "192.0.2.0/24"],
        ),
        (
            "en-ip-is-a-name",
            json!({"interfaces": [{"ips": ["vm1.example"]}]}),
            &["spec.interfaces[0].ips[0]", "vm1.example"],
        ),
    ];
    run_table(
        "ExternalNode",
        &cases,
        |c| c.0.to_string(),
        |(name, spec, expect)| {
            let body = json!({
                "metadata": {"resourceVersion": "9"},
                "items": [en_obj("good-a", good_en_spec()), en_obj(name, spec.clone()), en_obj("good-z", good_en_spec())],
            });
            let page = decode_list::<ExternalNode>(body.to_string().as_bytes()).unwrap();
            assert_eq!(page.items.len(), 3);
            for (i, n) in [(0, "good-a"), (2, "good-z")] {
                let s = page.items[i].spec.as_ref().unwrap();
                assert_eq!(page.items[i].metadata.key(), format!("vms/{n}"));
                assert_eq!(
                    s.interfaces[0].ips,
                    vec![
                        "192.0.2.10".parse::<IpAddr>().unwrap(),
                        "2001:db8::10".parse().unwrap()
                    ]
                );
            }
            let bad = &page.items[1];
            assert_eq!(bad.metadata.key(), format!("vms/{name}"));
            let err = bad.spec.as_ref().map(|_| ()).unwrap_err().to_string();
            for w in *expect {
                assert!(err.contains(w), "error {err:?} lacks {w:?}");
            }
        },
    );
}
