//! The fast path against the general decoder: on every shape it takes, the same event;
//! on everything else, `None` (the general decoder answers, and names the problem).

use serde_json::{Value, json};

use super::super::event::{decode_group_event, decode_group_event_general};
use super::super::fixtures::{AG_ADDED, AG_BOOKMARK, AG_DELETED, AG_PATCH, ATG_ADDED, ATG_PATCH};
use super::*;

/// The fast path takes `line` and agrees with the general decoder.
fn same(kind: GroupKind, line: &str) {
    let fast = group_event(kind, line.as_bytes());
    let general = decode_group_event_general(kind, line.as_bytes());
    assert!(fast.is_some(), "the fast path refused {line}");
    assert_eq!(fast.map(Ok), Some(general), "{line}");
}

/// The fast path leaves `line` to the general decoder.
fn left(kind: GroupKind, line: &str) {
    assert!(
        group_event(kind, line.as_bytes()).is_none(),
        "the fast path took {line}"
    );
}

fn b64_v4(a: [u8; 4]) -> String {
    // ::ffff:a.b.c.d as base64 of its 16 bytes: 12 fixed bytes ("AAAAAAAAAAAAAP//"), then 4.
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let n = u32::from_be_bytes(a);
    let c = |s: u32| T[((n >> s) & 63) as usize] as char;
    format!(
        "AAAAAAAAAAAAAP//{}{}{}{}{}{}==",
        c(26),
        c(20),
        c(14),
        c(8),
        c(2),
        T[((n & 3) << 4) as usize] as char
    )
}

fn line(ty: &str, object: Value) -> String {
    json!({"type": ty, "object": object}).to_string()
}

fn group(kind: &str, members: Value) -> Value {
    json!({"kind": kind, "apiVersion": "controlplane.antrea.io/v1beta2",
           "metadata": {"name": "g", "uid": "u", "resourceVersion": "7"},
           "groupMembers": members})
}

#[test]
fn the_controllers_own_lines_agree() {
    same(GroupKind::Address, AG_ADDED);
    same(GroupKind::Address, AG_PATCH);
    same(GroupKind::AppliedTo, ATG_ADDED);
    same(GroupKind::AppliedTo, ATG_PATCH);
    left(GroupKind::Address, AG_BOOKMARK);
    left(GroupKind::Address, AG_DELETED);
}

#[test]
fn every_member_shape_agrees() {
    let ip = b64_v4([192, 0, 2, 7]);
    assert_eq!(
        crate::controlplane::ip::decode_ip(&ip).unwrap().to_string(),
        "192.0.2.7"
    );
    let members = json!([
        {"pod": {"namespace": "ns", "name": "p"}, "ips": [ip],
         "ports": [{"port": 80, "name": "http", "protocol": "TCP"}, {"port": 53, "name": "dns", "protocol": "UDP"}, {"name": "x"}]},
        {"externalEntity": {"namespace": "vm-ns", "name": "vm2"}, "ips": [ip, "IAENuAAAAAAAAAAAAAAAAQ=="]},
        {"service": {"namespace": "ns", "name": "s"}},
        {"node": {"name": "n1"}, "ips": []},
        {"ips": [ip]},
        // Several references: the first of Antrea's order wins, in both.
        {"externalEntity": {"namespace": "a", "name": "b"}, "pod": {"namespace": "c", "name": "d"}},
        // Nulls: absent in both.
        {"externalEntity": {"namespace": "vm-ns", "name": "e"}, "ips": null, "ports": null},
        {"pod": null, "service": {"name": "only-name"}},
    ]);
    same(
        GroupKind::Address,
        &line("ADDED", group("AddressGroup", members.clone())),
    );
    same(
        GroupKind::Address,
        &line("MODIFIED", group("AddressGroup", members.clone())),
    );
    same(
        GroupKind::AppliedTo,
        &line("ADDED", group("AppliedToGroup", members.clone())),
    );
    let patch = json!({"kind": "AddressGroupPatch", "metadata": {"name": "g"},
        "addedGroupMembers": members, "removedGroupMembers": null});
    same(GroupKind::Address, &line("MODIFIED", patch));
    // No members at all, no uid.
    same(
        GroupKind::Address,
        &line(
            "ADDED",
            json!({"kind": "AddressGroup", "metadata": {"name": "g"}}),
        ),
    );
}

#[test]
fn anything_else_is_left_to_the_general_decoder() {
    let ag = |members: Value| line("ADDED", group("AddressGroup", members));
    for l in [
        // Not the plain shape: the general decoder decides (Ok or an error naming it).
        line(
            "ADDED",
            json!({"metadata": {"name": "g"}, "groupMembers": []}),
        ),
        line("ADDED", group("AppliedToGroup", json!([]))),
        line(
            "ADDED",
            json!({"kind": "AddressGroupPatch", "metadata": {"name": "g"}}),
        ),
        line(
            "ADDED",
            json!({"kind": "AddressGroup", "metadata": {"name": ""}}),
        ),
        line("ADDED", json!({"kind": "AddressGroup"})),
        line(
            "ADDED",
            json!({"kind": "AddressGroup", "metadata": {"name": 5}}),
        ),
        line("DELETED", group("AddressGroup", json!([]))),
        line("ERROR", json!({"kind": "Status", "code": 410})),
        ag(json!([{"ips": ["not base64"]}])),
        ag(json!([{"ips": [5]}])),
        ag(json!([{"ports": [{"port": 70000}]}])),
        ag(json!([{"ports": [{"port": 80.5}]}])),
        ag(json!([{"pod": "p"}])),
        ag(json!({"a": 1})),
        // A field it does not know, anywhere: the general decoder ignores it (or not).
        ag(json!([{"externalEntity": {"namespace": "vm-ns", "name": "e", "uid": "z"}}])),
        ag(json!([{"ips": [], "extra": [1, 2]}])),
        line(
            "ADDED",
            json!({"kind": "AddressGroup", "metadata": {"name": "g", "labels": {}}}),
        ),
        line(
            "ADDED",
            json!({"kind": "AddressGroup", "metadata": {"name": "g"}, "span": []}),
        ),
        // An escaped string cannot be borrowed: the general decoder unescapes it.
        ag(json!([{"externalEntity": {"namespace": "ns", "name": "tab\there"}}])),
        "{not json".to_string(),
        "[]".to_string(),
    ] {
        left(GroupKind::Address, &l);
    }
    // The escaped name decodes the general way, as before.
    let escaped = ag(json!([{"externalEntity": {"namespace": "ns", "name": "tab\there"}}]));
    assert!(decode_group_event(GroupKind::Address, escaped.as_bytes()).is_ok());
}

#[test]
fn the_budget_is_the_general_decoders() {
    // One member with more IPs than the whole object may hold: the general decoder's error.
    let ip = b64_v4([192, 0, 2, 1]);
    let ips: Vec<&str> = std::iter::repeat_n(ip.as_str(), MAX_ELEMENTS).collect();
    let l = line("ADDED", group("AddressGroup", json!([{"ips": ips}])));
    left(GroupKind::Address, &l);
    let e = decode_group_event(GroupKind::Address, l.as_bytes()).unwrap_err();
    assert!(e.to_string().contains("exceed"), "{e}");
}

#[test]
fn ten_thousand_members_agree() {
    let members: Vec<Value> = (0..10_000u32)
        .map(|i| {
            let [_, _, c, d] = i.to_be_bytes();
            json!({"externalEntity": {"namespace": "vm-ns", "name": format!("ee-{i}")},
                   "ips": [b64_v4([198, 51, c, d])]})
        })
        .collect();
    same(
        GroupKind::Address,
        &line("ADDED", group("AddressGroup", Value::Array(members))),
    );
}

#[test]
fn lines_a_json_tree_refuses_are_refused() {
    // Found by the fuzz target: serde skips what it ignores without the checks a JSON tree
    // makes. These the general decoder refuses, and so must the whole decoder.
    for l in [
        r#"{"type":"ADDED","object":{"kind":"AddressGroup","apiVersion":"\ud800","metadata":{"name":"g"}}}"#,
        r#"{"type":"ADDED","object":{"kind":"AddressGroup","x":1e999,"metadata":{"name":"g"}}}"#,
        r#"{"type":"ADDED","object":{"kind":"AddressGroup","x":-1e999,"metadata":{"name":"g"}}}"#,
    ] {
        let general = decode_group_event_general(GroupKind::Address, l.as_bytes());
        assert_eq!(
            decode_group_event(GroupKind::Address, l.as_bytes()),
            general,
            "{l}"
        );
    }
    let mut bytes = br#"{"type":"ADDED","object":{"kind":"AddressGroup","x":"#.to_vec();
    bytes.extend_from_slice(b"\"\xff\xfe\",\"metadata\":{\"name\":\"g\"}}}");
    assert!(decode_group_event(GroupKind::Address, &bytes).is_err());
}
