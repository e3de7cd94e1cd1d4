//! The bad-input catalogue (issue 9, part 2): every input tether reads from outside —
//! TrafficControl and ExternalNode objects, label selectors, policy bypass rules, `tether
//! run` flags and config files, kubeconfigs, manifest files, watch-stream lines, OVSDB
//! JSON-RPC bytes and OpenFlow messages — fed values out of range, of the wrong shape, in
//! conflicting combinations, or plain garbage.
//!
//! Each case asserts three things: the error names the object (or file, key, message) and
//! the field; nothing panics (every case runs inside `catch_unwind`, so a panic is reported
//! as that case's failure with its name instead of aborting the table); and the objects
//! around the bad one are unaffected — CRD cases decode a LIST page and a watch stream with
//! a valid object on either side and assert those decode to exactly the valid spec.
//!
//! Wrong-*type* CRD fields whose error does not yet name the field live in
//! `bad_input_pending.rs` (not committed, see docs/reliability.md), so this file stays green.
//! The binary-level part (tether itself with a directory of bad manifests) is at the end.

#![allow(clippy::unwrap_used)]

mod common;
mod e2e;

use std::net::IpAddr;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use tether::config::parse_run;
use tether::k8s::crd::{TcDirection, TcPort};
use tether::k8s::kubeconfig::parse_kubeconfig;
use tether::k8s::manifests::parse_file;
use tether::k8s::types::Kind;
use tether::k8s::watch::{WatchEvent, decode_event, decode_list};
use tether::k8s::{ExternalNode, KubeError, Pod, TrafficControl};
use tether::openflow::WireError;
use tether::openflow::msg::Msg;
use tether::ovsdb::framer::Framer;
use tether::ovsdb::{Atom, Datum, OvsdbError};
use tether::pipeline::externalnode::{PolicyBypassRule, parse_bypass_rules};

/// Run every case of a table; a failing or panicking case is reported by name, all at once.
fn run_table<C>(table: &str, cases: &[C], name: impl Fn(&C) -> String, check: impl Fn(&C)) {
    let mut failed = Vec::new();
    for c in cases {
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| check(c))) {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_string()))
                .unwrap_or_default();
            failed.push(format!("{}: {msg}", name(c)));
        }
    }
    eprintln!("{table}: {} cases, {} failed", cases.len(), failed.len());
    assert!(failed.is_empty(), "{table}:\n{}", failed.join("\n"));
}

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

// ---------------------------------------------------------------------------------------
// Policy bypass rules (agent config `externalNode.policyBypassRules`)

#[test]
fn policy_bypass_rules() {
    let good =
        json!({"direction": "ingress", "protocol": "tcp", "cidr": "192.0.2.0/24", "port": 22});
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "rule-not-a-mapping",
            json!("ingress tcp 22"),
            "externalNode.policyBypassRules[1]: must be a mapping",
        ),
        (
            "rule-direction-both",
            json!({"direction": "both", "protocol": "ip", "cidr": "192.0.2.0/24"}),
            "externalNode.policyBypassRules[1].direction: must be \"ingress\" or \"egress\", got \"both\"",
        ),
        (
            "rule-no-direction",
            json!({"protocol": "ip", "cidr": "192.0.2.0/24"}),
            "externalNode.policyBypassRules[1].direction: required",
        ),
        (
            "rule-protocol-sctp",
            json!({"direction": "egress", "protocol": "sctp", "cidr": "192.0.2.0/24", "port": 9}),
            "externalNode.policyBypassRules[1].protocol: must be one of tcp, udp, icmp, ip, got \"sctp\"",
        ),
        (
            "rule-protocol-number",
            json!({"direction": "egress", "protocol": 6, "cidr": "192.0.2.0/24", "port": 9}),
            "externalNode.policyBypassRules[1].protocol: must be a string, got 6",
        ),
        (
            "rule-cidr-prefix-33",
            json!({"direction": "egress", "protocol": "ip", "cidr": "192.0.2.0/33"}),
            "externalNode.policyBypassRules[1].cidr: \"192.0.2.0/33\" is not a CIDR",
        ),
        (
            "rule-cidr-garbage",
            json!({"direction": "egress", "protocol": "ip", "cidr": "::/::"}),
            "externalNode.policyBypassRules[1].cidr: \"::/::\" is not a CIDR",
        ),
        (
            "rule-port-70000",
            json!({"direction": "ingress", "protocol": "udp", "cidr": "2001:db8::/64", "port": 70000}),
            "externalNode.policyBypassRules[1].port: must be in 0..65535, got 70000",
        ),
        (
            "rule-port-negative",
            json!({"direction": "ingress", "protocol": "udp", "cidr": "2001:db8::/64", "port": -1}),
            "externalNode.policyBypassRules[1].port: must be in 0..65535, got -1",
        ),
        (
            "rule-port-string",
            json!({"direction": "ingress", "protocol": "udp", "cidr": "2001:db8::/64", "port": "53"}),
            "externalNode.policyBypassRules[1].port: must be an integer, got \"53\"",
        ),
        (
            "rule-tcp-no-port",
            json!({"direction": "ingress", "protocol": "tcp", "cidr": "192.0.2.0/24"}),
            "externalNode.policyBypassRules[1].port: required (1..65535) for protocol tcp",
        ),
        (
            "rule-misspelt-key",
            json!({"direction": "ingress", "protocol": "ip", "cidrs": "192.0.2.0/24"}),
            "externalNode.policyBypassRules[1].cidrs: unknown key",
        ),
    ];
    run_table(
        "policy bypass rules",
        &cases,
        |c| c.0.to_string(),
        |(_, bad, want)| {
            let err = parse_bypass_rules(&[good.clone(), bad.clone(), good.clone()]).unwrap_err();
            assert!(
                err.starts_with(want),
                "{err:?} does not start with {want:?}"
            );
            // The good rule alone still parses.
            let ok = PolicyBypassRule::from_json(&good, "r").unwrap();
            assert_eq!(ok.port, 22);
        },
    );
}

// ---------------------------------------------------------------------------------------
// `tether run` flags and config file

fn run_args(args: &[&str], file: &str) -> Result<tether::config::Config, String> {
    let args: Vec<String> = args.iter().map(|s| (*s).to_string()).collect();
    let file = file.to_string();
    parse_run(
        &args,
        &|p| {
            if p == "/etc/tether/config.yaml" {
                Ok(file.clone())
            } else {
                Err("No such file or directory".to_string())
            }
        },
        &|_| None,
        &|| Some("vm1".to_string()),
    )
    .map_err(|e| e.to_string())
}

#[test]
fn broken_config() {
    let cfg = ["--config", "/etc/tether/config.yaml"];
    let cases: Vec<(&str, Vec<&str>, &str, &str)> = vec![
        (
            "cfg-unknown-flag",
            vec!["--bridgee", "br-int"],
            "",
            "unknown argument --bridgee",
        ),
        (
            "cfg-flag-without-value",
            vec!["--bridge"],
            "",
            "--bridge needs a value",
        ),
        (
            "cfg-bridge-16-bytes",
            vec!["--bridge", "br-0123456789abc"],
            "",
            "bridge: \"br-0123456789abc\" is not a valid interface name",
        ),
        (
            "cfg-bridge-slash",
            vec!["--bridge=br/int"],
            "",
            "bridge: \"br/int\" is not a valid interface name",
        ),
        (
            "cfg-datapath-dpdk",
            vec!["--datapath-type", "dpdk"],
            "",
            "datapathType: \"dpdk\" is not one of system, netdev",
        ),
        (
            "cfg-empty-node-name",
            vec!["--node-name="],
            "",
            "nodeName: must not be empty",
        ),
        (
            "cfg-two-sources",
            vec!["--kubeconfig", "/k", "--manifests", "/m"],
            "",
            "kubeconfig and manifests: give exactly one source",
        ),
        (
            "cfg-file-missing",
            vec!["--config", "/nope.yaml"],
            "",
            "config /nope.yaml: No such file or directory",
        ),
        (
            "cfg-file-yaml-syntax",
            cfg.to_vec(),
            "nodeName: [vm1\n  bridge: {",
            "config /etc/tether/config.yaml: ",
        ),
        (
            "cfg-file-top-level-list",
            cfg.to_vec(),
            "- nodeName: vm1\n",
            "config /etc/tether/config.yaml: the top level must be a mapping",
        ),
        (
            "cfg-file-bridge-a-list",
            cfg.to_vec(),
            "bridge: [br-int]\n",
            "config /etc/tether/config.yaml: bridge must be a string",
        ),
        (
            "cfg-file-insecure-yes-string",
            cfg.to_vec(),
            "allowInsecureTLS: \"maybe\"\n",
            "config /etc/tether/config.yaml: allowInsecureTLS must be true or false",
        ),
        (
            "cfg-file-external-node-scalar",
            cfg.to_vec(),
            "externalNode: on\n",
            "config /etc/tether/config.yaml: externalNode must be a mapping",
        ),
        (
            "cfg-file-bypass-rules-scalar",
            cfg.to_vec(),
            "externalNode:\n  policyBypassRules: all\n",
            "config /etc/tether/config.yaml: externalNode.policyBypassRules: unexpected value",
        ),
    ];
    run_table(
        "config",
        &cases,
        |c| c.0.to_string(),
        |(_, args, file, want)| {
            let err = run_args(args, file).unwrap_err();
            assert!(
                err.starts_with(want),
                "{err:?} does not start with {want:?}"
            );
        },
    );
    // Unknown keys only warn and the rest of the file still applies.
    let c = run_args(&cfg, "bridgee: br-x\nbridge: br-ok\n").unwrap();
    assert_eq!(c.bridge, "br-ok");
    assert_eq!(
        c.warnings,
        vec!["config /etc/tether/config.yaml: unknown key bridgee ignored".to_string()]
    );
}

// ---------------------------------------------------------------------------------------
// kubeconfig

fn kubeconfig(cluster: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c1\ncontexts:\n- name: c1\n  context:\n    cluster: k1\n    user: u1\nclusters:\n- name: k1\n  cluster:\n{cluster}users:\n- name: u1\n  user:\n{user}"
    )
}

#[test]
fn broken_kubeconfig() {
    let server = "    server: https://192.0.2.1:6443\n";
    let token = "    token: abc\n";
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "kc-yaml-syntax",
            "clusters: [\n  - {name: k1\n".into(),
            "syntax",
        ),
        ("kc-top-level-string", "just a string".into(), "structure"),
        (
            "kc-clusters-a-string",
            "current-context: c1\nclusters: k1\n".into(),
            "structure",
        ),
        (
            "kc-no-current-context",
            kubeconfig(server, token).replace("current-context: c1\n", ""),
            "current-context: not set and no context given",
        ),
        (
            "kc-context-missing",
            kubeconfig(server, token).replace("current-context: c1", "current-context: c9"),
            "context: \"c9\" not found (have: c1)",
        ),
        (
            "kc-cluster-missing",
            kubeconfig(server, token).replace("cluster: k1", "cluster: k9"),
            "cluster: \"k9\" not found (have: k1)",
        ),
        (
            "kc-user-missing",
            kubeconfig(server, token).replace("user: u1", "user: u9"),
            "user: \"u9\" not found (have: u1)",
        ),
        (
            "kc-no-server",
            kubeconfig("    insecure-skip-tls-verify: false\n", token),
            "cluster \"k1\": no server",
        ),
        (
            "kc-proxy-url",
            kubeconfig(
                &format!("{server}    proxy-url: http://192.0.2.9:3128\n"),
                token,
            ),
            "cluster \"k1\": proxy-url is not supported",
        ),
        (
            "kc-exec-plugin",
            kubeconfig(server, "    exec:\n      command: aws\n"),
            "user \"u1\": exec and auth-provider plugins are not supported",
        ),
        (
            "kc-ca-data-not-base64",
            kubeconfig(
                &format!("{server}    certificate-authority-data: '***'\n"),
                token,
            ),
            "certificate-authority-data: ",
        ),
        (
            "kc-cert-without-key",
            kubeconfig(server, "    client-certificate-data: QUJD\n"),
            "user \"u1\": client-certificate and client-key must be given together",
        ),
        (
            "kc-ca-file-missing",
            kubeconfig(
                &format!("{server}    certificate-authority: /nonexistent/ca.crt\n"),
                token,
            ),
            "/nonexistent/ca.crt",
        ),
    ];
    run_table(
        "kubeconfig",
        &cases,
        |c| c.0.to_string(),
        |(_, text, want)| {
            let err = parse_kubeconfig(text, Path::new("/tmp"), None).unwrap_err();
            assert!(
                matches!(err, KubeError::Config { .. }),
                "not a config error: {err:?}"
            );
            assert!(!err.is_retryable(), "config errors are not retried");
            let s = err.to_string();
            assert!(s.contains(want), "{s:?} lacks {want:?}");
        },
    );
    // The template itself is good (so each case fails for its own reason).
    let ok = parse_kubeconfig(&kubeconfig(server, token), Path::new("/tmp"), None).unwrap();
    assert_eq!(ok.server, "https://192.0.2.1:6443");
}

// ---------------------------------------------------------------------------------------
// Input files others could change, through the binary

/// `tether ARGS` with no OVS behind `--ovs-rundir`; its exit code and output (stdout, then
/// stderr). Killed after 20 s (before the rule, `run` went on to wait for OVS forever).
fn tether_bin(args: &[&str]) -> (Option<i32>, String) {
    use std::io::Read;
    let mut child = std::process::Command::new(common::tether::binary())
        .args(args)
        .env_remove("NOTIFY_SOCKET")
        .env_remove("JOURNAL_STREAM")
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    (code, out)
}

fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A file written with an explicit mode (not the umask's).
fn write_mode(p: &Path, text: &str, mode: u32) {
    std::fs::write(p, text).unwrap();
    chmod(p, mode);
}

/// The config file, a kubeconfig, its token file and the manifests directory, when someone
/// other than root or tether could change them: `tether run` exits 2 before connecting to
/// anything, naming the file and the fix; `tether check` reports a failed finding with that
/// fix (the config file itself is a configuration error there too: exit 2).
#[test]
fn input_files_others_can_change_are_refused() {
    if !common::privileged("input_files_others_can_change_are_refused") {
        return;
    }
    let d = std::env::temp_dir().join(format!("tether-bad-modes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    chmod(&d, 0o755);
    let p = |name: &str| d.join(name).to_str().unwrap().to_string();
    let (cfg, kc, token, m, ovs) = (p("tether.yaml"), p("kc"), p("token"), p("m"), p("no-ovs"));
    let sock = p("run/tether.sock");
    std::fs::create_dir(&m).unwrap();
    chmod(Path::new(&m), 0o755);
    write_mode(
        Path::new(&m).join("ns.yaml").as_path(),
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: n1}\n",
        0o644,
    );
    write_mode(
        Path::new(&cfg),
        &format!("manifests: {m}\novsRundir: {ovs}\n"),
        0o600,
    );
    write_mode(Path::new(&token), "t0k3n\n", 0o600);
    write_mode(
        Path::new(&kc),
        &kubeconfig(
            "    server: https://192.0.2.1:6443\n    insecure-skip-tls-verify: false\n",
            &format!("    tokenFile: {token}\n"),
        ),
        0o600,
    );
    let run = |source: &[&str]| {
        let mut args = vec!["run", "--ovs-rundir", &ovs, "--state-socket", &sock];
        args.extend_from_slice(source);
        tether_bin(&args)
    };
    let check = |source: &[&str]| {
        let mut args = vec!["check", "--ovs-rundir", &ovs, "--state-socket", &sock];
        args.extend_from_slice(source);
        tether_bin(&args)
    };
    let refused = |(code, out): (Option<i32>, String), want_code: i32, want: &str| {
        assert_eq!(code, Some(want_code), "{out}");
        assert!(out.contains(want), "{want:?} missing in:\n{out}");
    };

    // The config file, 0666.
    chmod(Path::new(&cfg), 0o666);
    let want = format!(
        "tether: config {cfg}: writable by group or others (mode 666): refusing to read it. fix: chmod go-w {cfg}"
    );
    refused(run(&["--config", &cfg]), 2, &want);
    refused(check(&["--config", &cfg]), 2, &want);
    chmod(Path::new(&cfg), 0o600);

    // The kubeconfig, 0666.
    chmod(Path::new(&kc), 0o666);
    refused(
        run(&["--kubeconfig", &kc]),
        2,
        &format!(
            "config: kubeconfig {kc}: writable by group or others (mode 666): refusing to read it. fix: chmod go-w {kc}"
        ),
    );
    refused(
        check(&["--kubeconfig", &kc]),
        1,
        &format!(
            "FAIL api credentials: kubeconfig {kc}: writable by group or others (mode 666): refusing to read it.\n     fix: chmod go-w {kc}\n"
        ),
    );
    chmod(Path::new(&kc), 0o600);

    // The token file it names, owned by another user.
    std::os::unix::fs::chown(&token, Some(4242), None).unwrap();
    refused(
        run(&["--kubeconfig", &kc]),
        2,
        &format!(
            "config: kubeconfig {kc}: token file {token}: owned by uid 4242, not by root: refusing to read it. fix: chown root {token}"
        ),
    );
    refused(
        check(&["--kubeconfig", &kc]),
        1,
        &format!(
            "FAIL api credentials: kubeconfig {kc}: token file {token}: owned by uid 4242, not by root: refusing to read it.\n     fix: chown root {token}\n"
        ),
    );
    std::os::unix::fs::chown(&token, Some(0), None).unwrap();

    // The manifests directory, world-writable (through the config file, as installed).
    chmod(Path::new(&m), 0o777);
    refused(
        run(&["--config", &cfg]),
        2,
        &format!(
            "config: {m}: writable by group or others (mode 777): refusing to read it. fix: chmod go-w {m}"
        ),
    );
    refused(
        check(&["--config", &cfg]),
        1,
        &format!(
            "FAIL manifests: {m}: writable by group or others (mode 777): refusing to read it.\n     fix: chmod go-w {m}\n"
        ),
    );
    // A manifests file others can write is reported by `check` (`run` skips it, keeping
    // its objects: src/k8s/manifests/tests.rs).
    chmod(Path::new(&m), 0o755);
    chmod(&Path::new(&m).join("ns.yaml"), 0o666);
    refused(
        check(&["--config", &cfg]),
        1,
        &format!(
            "FAIL manifests: {m}: ns.yaml: writable by group or others (mode 666): refusing to read it. fix: chmod go-w {m}/ns.yaml\n"
        ),
    );
    // Fixed: the same check no longer fails on the manifests.
    chmod(&Path::new(&m).join("ns.yaml"), 0o644);
    let (_, out) = check(&["--config", &cfg]);
    assert!(
        out.contains(&format!("ok   manifests: {m} readable: ")),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

// ---------------------------------------------------------------------------------------
// Manifest files

const GOOD_POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web-1\n  namespace: ns1\nspec:\n  nodeName: vm1\n";

#[test]
fn garbage_manifests() {
    // (case, file name, text, expected errors of its bad documents; the good Pod around
    // them must still parse). `None` = the whole file is refused with that error prefix.
    type Case = (
        &'static str,
        &'static str,
        String,
        Result<Vec<&'static str>, &'static str>,
    );
    let cases: Vec<Case> = vec![
        ("mf-unknown-kind", "a.yaml", format!("apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n---\n{GOOD_POD}"), Ok(vec!["a.yaml document 0: unsupported apiVersion/kind \"v1\"/\"Service\""])),
        ("mf-wrong-api-version", "a.yaml", format!("{GOOD_POD}---\napiVersion: crd.antrea.io/v1beta1\nkind: TrafficControl\nmetadata:\n  name: t\n"), Ok(vec!["a.yaml document 1: unsupported apiVersion/kind \"crd.antrea.io/v1beta1\"/\"TrafficControl\""])),
        ("mf-no-metadata", "a.yaml", format!("apiVersion: v1\nkind: Namespace\n---\n{GOOD_POD}"), Ok(vec!["a.yaml document 0: metadata: required"])),
        ("mf-metadata-a-string", "a.yaml", format!("apiVersion: v1\nkind: Namespace\nmetadata: ns1\n---\n{GOOD_POD}"), Ok(vec!["a.yaml document 0: metadata: required"])),
        ("mf-no-name", "a.yaml", format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  labels: {{a: b}}\n---\n{GOOD_POD}"), Ok(vec!["a.yaml document 0: metadata.name: required"])),
        ("mf-name-a-number", "a.yaml", format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: 7\n---\n{GOOD_POD}"), Ok(vec!["a.yaml document 0: metadata.name: required"])),
        ("mf-scalar-document", "a.yaml", format!("hello world\n---\n{GOOD_POD}"), Ok(vec!["a.yaml document 0: unsupported apiVersion/kind \"\"/\"\""])),
        ("mf-list-with-bad-item", "l.yaml", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: web-1\n    namespace: ns1\n- kind: Pod\n".to_string(), Ok(vec!["l.yaml document 0 item 1: unsupported apiVersion/kind \"\"/\"Pod\""])),
        ("mf-yaml-syntax", "b.yaml", format!("{GOOD_POD}---\nmetadata: {{name: [\n"), Err("b.yaml: ")),
        ("mf-yaml-tab-indent", "b.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n\tname: x\n".to_string(), Err("b.yaml: ")),
        ("mf-json-garbage", "c.json", "{\"apiVersion\": \"v1\", \"kind\": ".to_string(), Err("c.json: ")),
        ("mf-control-bytes", "d.yaml", format!("\u{1}\u{2}: [\u{1b}\n---\n{GOOD_POD}"), Err("d.yaml: line 2 column 1: while parsing a flow sequence")),
    ];
    run_table(
        "manifests",
        &cases,
        |c| c.0.to_string(),
        |(_, file, text, want)| match (parse_file(file, text), want) {
            (Ok(p), Ok(errs)) => {
                assert_eq!(p.errors.len(), errs.len(), "{:?}", p.errors);
                for (got, w) in p.errors.iter().zip(errs) {
                    assert!(got.starts_with(w), "{got:?} does not start with {w:?}");
                }
                assert_eq!(p.objects.len(), 1, "the good Pod survives: {:?}", p.objects);
                assert_eq!(p.objects[0].kind, Kind::Pod);
                assert_eq!(p.objects[0].key, "ns1/web-1");
            }
            (Err(e), Err(w)) => assert!(e.starts_with(w), "{e:?} does not start with {w:?}"),
            (got, w) => panic!("got {got:?}, want {w:?}"),
        },
    );
}

// ---------------------------------------------------------------------------------------
// Watch-stream lines

#[test]
fn garbage_watch_lines() {
    let pod = json!({"metadata": {"name": "p", "namespace": "ns1", "resourceVersion": "5"}});
    // (case, line, check of the result)
    type Check = fn(Result<WatchEvent<Pod>, KubeError>);
    let cases: Vec<(&str, String, Check)> = vec![
        ("watch-bare-status-410", json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410, "reason": "Expired", "message": "too old resource version: 1 (5)"}).to_string(), |r| {
            assert_eq!(r.unwrap(), WatchEvent::Error(KubeError::Gone { message: "too old resource version: 1 (5)".into() }));
        }),
        ("watch-bare-status-500", json!({"kind": "Status", "code": 500, "reason": "InternalError", "message": "etcd down"}).to_string(), |r| {
            assert_eq!(r.unwrap(), WatchEvent::Error(KubeError::Status { code: 500, reason: "InternalError".into(), message: "etcd down".into(), retry_after: None }));
        }),
        ("watch-error-event-410", json!({"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "gone"}}).to_string(), |r| {
            assert_eq!(r.unwrap(), WatchEvent::Error(KubeError::Gone { message: "gone".into() }));
        }),
        ("watch-error-event-object-a-string", json!({"type": "ERROR", "object": "boom"}).to_string(), |r| {
            let e = r.unwrap_err().to_string();
            assert!(e.starts_with("cannot decode Pod watch event: invalid type: string"), "{e}");
        }),
        ("watch-unknown-type", json!({"type": "PATCHED", "object": pod}).to_string(), |r| {
            assert_eq!(r.unwrap_err().to_string(), "cannot decode Pod watch event: unknown event type \"PATCHED\"");
        }),
        ("watch-no-type-no-status", json!({"object": pod}).to_string(), |r| {
            assert_eq!(r.unwrap_err().to_string(), "cannot decode Pod watch event: no \"type\"");
        }),
        ("watch-not-json", "HTTP/1.1 502 Bad Gateway".to_string(), |r| {
            assert!(r.unwrap_err().to_string().starts_with("cannot decode Pod watch event: "));
        }),
        ("watch-truncated-line", json!({"type": "ADDED", "object": pod}).to_string()[..30].to_string(), |r| {
            assert!(r.unwrap_err().to_string().contains("EOF while parsing"));
        }),
        ("watch-line-an-array", "[1,2,3]".to_string(), |r| {
            assert!(r.unwrap_err().to_string().starts_with("cannot decode Pod watch event: invalid type: integer `1`, expected a string"));
        }),
        ("watch-bookmark-without-rv", json!({"type": "BOOKMARK", "object": {"metadata": {}}}).to_string(), |r| {
            assert_eq!(r.unwrap_err().to_string(), "cannot decode Pod watch event: BOOKMARK without metadata.resourceVersion");
        }),
        ("watch-object-metadata-a-string", json!({"type": "ADDED", "object": {"metadata": "p"}}).to_string(), |r| {
            let e = r.unwrap_err();
            assert!(matches!(&e, KubeError::Decode { what, .. } if what == "Pod"), "{e:?}");
        }),
        ("watch-labels-a-list", json!({"type": "ADDED", "object": {"metadata": {"name": "p", "labels": ["a"]}}}).to_string(), |r| {
            let e = r.unwrap_err();
            assert!(matches!(&e, KubeError::Decode { what, detail } if what == "Pod" && detail.contains("invalid type: sequence")), "{e:?}");
        }),
        ("watch-oversized-line", format!("{{\"type\":\"ADDED\",\"object\":{{\"metadata\":{{\"name\":\"{}\"}}}}}}", "x".repeat(4 << 20)), |r| {
            // Decodes (the length cap is the HTTP reader's business), no panic, no copy blow-up.
            match r.unwrap() {
                WatchEvent::Added(p) => assert_eq!(p.metadata.name.len(), 4 << 20),
                other => panic!("{other:?}"),
            }
        }),
    ];
    run_table(
        "watch lines",
        &cases,
        |c| c.0.to_string(),
        |(_, line, check)| {
            check(decode_event::<Pod>(line.as_bytes()));
            // The next good line of the same stream is unaffected.
            let good = json!({"type": "ADDED", "object": pod}).to_string();
            match decode_event::<Pod>(good.as_bytes()).unwrap() {
                WatchEvent::Added(p) => assert_eq!(p.metadata.key(), "ns1/p"),
                other => panic!("{other:?}"),
            }
        },
    );
}

// ---------------------------------------------------------------------------------------
// OVSDB JSON-RPC bytes

#[test]
fn garbage_and_oversized_ovsdb() {
    let good = br#"{"id":1,"result":{},"error":null}"#;
    type Check = fn(&[Value], OvsdbError);
    let cases: Vec<(&str, Vec<u8>, Check)> = vec![
        ("ovsdb-array-not-object", b"[1,2]".to_vec(), |_, e| {
            assert_eq!(
                e,
                OvsdbError::Protocol("expected '{' to start a message, got byte 0x5b".into())
            );
        }),
        (
            "ovsdb-http-response",
            b"HTTP/1.1 400 Bad Request\r\n".to_vec(),
            |_, e| {
                assert_eq!(
                    e,
                    OvsdbError::Protocol("expected '{' to start a message, got byte 0x48".into())
                );
            },
        ),
        ("ovsdb-nul-byte", vec![0], |_, e| {
            assert_eq!(
                e,
                OvsdbError::Protocol("expected '{' to start a message, got byte 0x00".into())
            );
        }),
        (
            "ovsdb-mismatched-brackets",
            b"{\"id\":1]".to_vec(),
            |_, e| {
                assert!(
                    matches!(&e, OvsdbError::Protocol(m) if m.starts_with("invalid JSON message: ")),
                    "{e:?}"
                );
            },
        ),
        (
            "ovsdb-invalid-json-inside",
            b"{\"id\":,}".to_vec(),
            |_, e| {
                assert!(
                    matches!(&e, OvsdbError::Protocol(m) if m.starts_with("invalid JSON message: ")),
                    "{e:?}"
                );
            },
        ),
        (
            "ovsdb-oversized-unfinished",
            {
                let mut v = b"{\"id\":1,\"result\":\"".to_vec();
                v.extend(std::iter::repeat_n(b'a', 5000));
                v
            },
            |_, e| assert_eq!(e, OvsdbError::Oversize { limit: 4096 }),
        ),
        (
            "ovsdb-oversized-complete",
            {
                let mut v = b"{\"id\":1,\"result\":\"".to_vec();
                v.extend(std::iter::repeat_n(b'a', 5000));
                v.extend(b"\"}");
                v
            },
            |_, e| assert_eq!(e, OvsdbError::Oversize { limit: 4096 }),
        ),
        (
            "ovsdb-deep-nesting",
            {
                let mut v = b"{\"a\":".to_vec();
                v.extend(std::iter::repeat_n(b'[', 1000));
                v.extend(std::iter::repeat_n(b']', 1000));
                v.push(b'}');
                v
            },
            |_, e| {
                // serde_json's recursion limit (128) turns it into an error, not a stack overflow.
                assert!(
                    matches!(&e, OvsdbError::Protocol(m) if m.contains("recursion limit")),
                    "{e:?}"
                );
            },
        ),
    ];
    run_table(
        "ovsdb framer",
        &cases,
        |c| c.0.to_string(),
        |(_, bytes, check)| {
            // A good message first: delivered before the garbage poisons the stream.
            let mut f = Framer::new(4096);
            f.push(good);
            f.push(b"\n");
            f.push(bytes);
            let mut got = Vec::new();
            let err = loop {
                match f.next_message() {
                    Ok(Some(v)) => got.push(v),
                    Ok(None) => panic!("no error; messages {got:?}"),
                    Err(e) => break e,
                }
            };
            assert_eq!(got, vec![json!({"id":1,"result":{},"error":null})]);
            check(&got, err);
        },
    );

    // Datum decoding: each bad datum names what it is; a row's other columns are unaffected.
    let datums: Vec<(&str, Value, &str)> = vec![
        (
            "datum-set-not-a-list",
            json!(["set", 5]),
            "ovsdb datum: not an atom: [\"set\",5]",
        ),
        (
            "datum-map-pair-of-one",
            json!(["map", [["k"]]]),
            "ovsdb datum: not a map pair: [\"k\"]",
        ),
        (
            "datum-map-not-pairs",
            json!(["map", [5]]),
            "ovsdb datum: not a map pair: 5",
        ),
        (
            "datum-uuid-garbage",
            json!(["uuid", "not-a-uuid"]),
            "not-a-uuid",
        ),
        (
            "datum-object",
            json!({"a": 1}),
            "ovsdb datum: not an atom: {\"a\":1}",
        ),
        ("datum-null", Value::Null, "ovsdb datum: not an atom: null"),
        (
            "datum-set-of-sets",
            json!(["set", [["set", []]]]),
            "ovsdb datum: not an atom: [\"set\",[]]",
        ),
    ];
    run_table(
        "ovsdb datum",
        &datums,
        |c| c.0.to_string(),
        |(_, v, want)| {
            let e = Datum::from_json(v).unwrap_err().to_string();
            assert!(e.contains(want), "{e:?} lacks {want:?}");
            assert_eq!(
                Datum::from_json(&json!(["set", ["a", 1]])).unwrap(),
                Datum::Set(vec![Atom::str("a"), Atom::Integer(1)])
            );
        },
    );
}

// ---------------------------------------------------------------------------------------
// OpenFlow messages

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn garbage_and_oversized_openflow() {
    // Header checks done before the body is read.
    let heads: Vec<(&str, [u8; 8], WireError)> = vec![
        (
            "of-length-below-header",
            [6, 0, 0, 4, 0, 0, 0, 1],
            WireError::BadLength {
                what: "message header",
                len: 4,
            },
        ),
        (
            "of-length-zero",
            [6, 2, 0, 0, 0, 0, 0, 1],
            WireError::BadLength {
                what: "message header",
                len: 0,
            },
        ),
        (
            "of-version-zero",
            [0, 0, 0, 8, 0, 0, 0, 1],
            WireError::WrongVersion {
                what: "message header",
                version: 0,
            },
        ),
        (
            "of-version-7",
            [7, 0, 0, 8, 0, 0, 0, 1],
            WireError::WrongVersion {
                what: "message header",
                version: 7,
            },
        ),
        (
            "of-http-text",
            *b"HTTP/1.1",
            WireError::WrongVersion {
                what: "message header",
                version: b'H',
            },
        ),
    ];
    run_table(
        "openflow headers",
        &heads,
        |c| c.0.to_string(),
        |(_, h, want)| {
            assert_eq!(Msg::frame_len(h).unwrap_err(), *want);
            assert_eq!(Msg::frame_len(&[6, 2, 0, 8, 0, 0, 0, 1]).unwrap(), 8);
        },
    );

    // Whole messages that must be refused with an error (never a panic).
    let echo_ok = hex("06 02 00 08 00 00 00 07");
    let mut oversized = vec![6, 2, 0xff, 0xff, 0, 0, 0, 1];
    oversized.resize(70_000, 0xab);
    let msgs: Vec<(&str, Vec<u8>, &str)> = vec![
        ("of-empty", vec![], "truncated"),
        ("of-header-cut", hex("06 02 00"), "truncated"),
        ("of-length-says-more", hex("06 02 00 10 00 00 00 01"), ""),
        (
            "of-length-says-less",
            hex("06 02 00 08 00 00 00 01 aa bb"),
            "",
        ),
        ("of-oversized-buffer", oversized, ""),
        (
            "of-features-reply-short",
            hex("06 06 00 0c 00 00 00 01 00 00 00 00"),
            "truncated",
        ),
        (
            "of-port-status-short",
            hex("06 0c 00 10 00 00 00 01 00 00 00 00 00 00 00 00"),
            "truncated",
        ),
        (
            "of-error-short",
            hex("06 01 00 0a 00 00 00 01 00 01"),
            "truncated",
        ),
        (
            "of-hello-element-len-zero",
            hex("06 00 00 10 00 00 00 01 00 01 00 00 00 00 00 00"),
            "",
        ),
        (
            "of-hello-element-len-huge",
            hex("06 00 00 10 00 00 00 01 00 01 00 ff 00 00 00 12"),
            "",
        ),
        (
            "of-multipart-reply-short",
            hex("06 13 00 0c 00 00 00 01 00 0d 00 00"),
            "",
        ),
        (
            "of-port-desc-port-len-bad",
            hex("06 13 00 18 00 00 00 01 00 0d 00 00 00 00 00 00 00 00 00 01 00 02 00 00"),
            "",
        ),
    ];
    run_table(
        "openflow messages",
        &msgs,
        |c| c.0.to_string(),
        |(_, bytes, want)| {
            let e = Msg::decode(bytes).expect_err("garbage decoded");
            assert!(e.to_string().contains(want), "{e} lacks {want:?}");
            // The next message on the stream is unaffected.
            let ok = Msg::decode(&echo_ok).unwrap();
            assert_eq!(ok.xid, 7);
        },
    );
}

// ---------------------------------------------------------------------------------------
// The daemon itself: a manifests directory full of bad objects next to a good one.

fn tc_yaml(name: &str, target: &str) -> String {
    format!(
        "apiVersion: crd.antrea.io/v1alpha2\nkind: TrafficControl\nmetadata:\n  name: {name}\nspec:\n  appliedTo:\n    podSelector:\n      matchLabels:\n        app: web\n  direction: Ingress\n  action: Mirror\n  targetPort:\n    {target}\n"
    )
}

#[test]
fn daemon_reports_each_bad_object_and_programs_the_good_one() {
    if !common::privileged("daemon_reports_each_bad_object_and_programs_the_good_one") {
        return;
    }
    let mut bed = e2e::Bed::new();
    bed.add_pod("pa", 1);
    bed.write_pods(&[("pa", "web")]);
    let bad: Vec<(&str, &str, &str)> = vec![
        (
            "bad-vni",
            "vxlan: {remoteIP: 203.0.113.9, vni: 16777216}",
            "tc=bad-vni skipped until the object changes: invalid spec: spec.targetPort.vxlan.vni",
        ),
        (
            "bad-two-ports",
            "{device: {name: a}, gre: {remoteIP: 203.0.113.9}}",
            "tc=bad-two-ports skipped until the object changes: invalid spec: spec.targetPort: exactly one of",
        ),
        (
            "bad-remote",
            "geneve: {remoteIP: nowhere}",
            "tc=bad-remote skipped until the object changes: invalid spec: spec.targetPort.geneve.remoteIP",
        ),
        (
            "bad-erspan",
            "erspan: {remoteIP: 203.0.113.9, version: 9}",
            "tc=bad-erspan skipped until the object changes: invalid spec: spec.targetPort.erspan.version: 9 is not one of 1, 2",
        ),
    ];
    let mut all = String::new();
    for (name, target, _) in &bad {
        all.push_str(&tc_yaml(name, target));
        all.push_str("---\n");
    }
    all.push_str(&tc_yaml("good", "device: {name: tap-good}"));
    bed.write("tcs.yaml", &all);
    bed.write("junk.yaml", "kind: [\n");
    bed.write(
        "service.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
    );
    let _coll = bed.add_collector(&["tap-good"]);

    let args = bed.tether_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let t = common::Tether::start(bed.sb.ns(), &args, &bed.sb.path("tether-bad.log"));
    // The good TC is programmed exactly: one mirror flow for pa's ingress.
    let pa = bed.ofport("veth-pa");
    let flows = bed.wait_flows("the good TC's mark flow", |f| {
        f.iter()
            .filter(|l| l.contains("table=3, priority=200"))
            .count()
            == 1
    });
    let tap = bed.ofport("tap-good");
    let mark: Vec<&String> = flows
        .iter()
        .filter(|l| l.contains("table=3, priority=200"))
        .collect();
    assert!(
        mark[0].contains(&format!("reg1={pa:#x} ")) && mark[0].contains(&format!("{tap}")),
        "{flows:#?}"
    );
    for (_, _, line) in &bad {
        t.wait_log(line, Duration::from_secs(15));
    }
    t.wait_log("junk.yaml: ", Duration::from_secs(5));
    t.wait_log(
        "service.yaml document 0: unsupported apiVersion/kind \"v1\"/\"Service\"",
        Duration::from_secs(5),
    );
    // No port for any bad TC, the daemon is still running, nothing panicked.
    let ports = bed.sb.vsctl(&["list-ports", "br-int"]);
    let mut ports: Vec<&str> = ports.lines().collect();
    ports.sort_unstable();
    assert_eq!(ports, vec!["tap-good", "veth-pa"]);
    assert!(t.running(), "tether exited:\n{}", t.log());
    assert!(!t.log().contains("panicked"), "{}", t.log());

    // An invalid spec is not retried (only a new version can fix it): past the queue's first
    // backoff (5 s) each bad TC is still reported exactly once...
    std::thread::sleep(Duration::from_secs(6));
    let log = t.log();
    for (name, _, line) in &bad {
        assert_eq!(log.matches(line).count(), 1, "tc {name} retried:\n{log}");
    }
    // ...and fixing the object programs it at once.
    let mut fixed = String::new();
    for (i, (name, _, _)) in bad.iter().enumerate().skip(1) {
        let target = format!("vxlan: {{remoteIP: 203.0.113.9, vni: {}}}", 7000 + i);
        fixed.push_str(&tc_yaml(name, &target));
        fixed.push_str("---\n");
    }
    fixed.push_str(&tc_yaml(
        "bad-vni",
        "vxlan: {remoteIP: 203.0.113.9, vni: 5000}",
    ));
    fixed.push_str("---\n");
    fixed.push_str(&tc_yaml("good", "device: {name: tap-good}"));
    bed.write("tcs.yaml", &fixed);
    common::wait_for(Duration::from_secs(15), "the fixed TCs' ports", || {
        let ports = bed.sb.try_vsctl(&["list-ports", "br-int"]).ok()?;
        (ports.lines().count() == 2 + bad.len()).then_some(())
    });
    assert!(t.running(), "tether exited:\n{}", t.log());
}
