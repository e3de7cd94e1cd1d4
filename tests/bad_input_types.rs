//! Type errors inside a spec name the field (docs/reliability.md#bad-input-catalogue: "a clear error naming the object and
//! field"): a number where a string belongs, a string for a VNI, a float for a port, a list
//! for matchLabels, a string for an IP list. Found by the reliability campaign; serde's own
//! error only said what type was wrong, `k8s::crd::spec_wire` now says where.

#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};
use tether::k8s::watch::decode_list;
use tether::k8s::{ExternalNode, TrafficControl};

fn tc(spec: Value) -> String {
    let body = json!({"metadata": {"resourceVersion": "1"}, "items": [
        {"metadata": {"name": "t"}, "spec": spec}]});
    let page = decode_list::<TrafficControl>(body.to_string().as_bytes()).unwrap();
    page.items[0]
        .spec
        .as_ref()
        .map(|_| ())
        .unwrap_err()
        .to_string()
}

fn base() -> Value {
    json!({"appliedTo": {"podSelector": {}}, "direction": "Ingress", "action": "Mirror",
           "targetPort": {"device": {"name": "tap0"}}})
}

#[test]
fn tc_direction_a_number_names_the_field() {
    let mut s = base();
    s["direction"] = json!(5);
    let e = tc(s);
    assert!(e.starts_with("spec.direction: "), "{e}");
}

#[test]
fn tc_vni_a_string_names_the_field() {
    let mut s = base();
    s["targetPort"] = json!({"vxlan": {"remoteIP": "192.0.2.1", "vni": "5000"}});
    let e = tc(s);
    assert!(e.starts_with("spec.targetPort.vxlan.vni: "), "{e}");
}

#[test]
fn tc_destination_port_a_float_names_the_field() {
    let mut s = base();
    s["targetPort"] = json!({"geneve": {"remoteIP": "192.0.2.1", "destinationPort": 6081.5}});
    let e = tc(s);
    assert!(
        e.starts_with("spec.targetPort.geneve.destinationPort: "),
        "{e}"
    );
}

#[test]
fn tc_match_labels_a_list_names_the_field() {
    let mut s = base();
    s["appliedTo"] = json!({"podSelector": {"matchLabels": ["app=web"]}});
    let e = tc(s);
    assert!(
        e.starts_with("spec.appliedTo.podSelector.matchLabels: "),
        "{e}"
    );
}

#[test]
fn en_ips_a_string_names_the_field() {
    let body = json!({"metadata": {"resourceVersion": "1"}, "items": [
        {"metadata": {"name": "vm1", "namespace": "vms"},
         "spec": {"interfaces": [{"name": "eth0", "ips": "192.0.2.10"}]}}]});
    let page = decode_list::<ExternalNode>(body.to_string().as_bytes()).unwrap();
    let e = page.items[0]
        .spec
        .as_ref()
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("spec.interfaces[0].ips: "), "{e}");
}
