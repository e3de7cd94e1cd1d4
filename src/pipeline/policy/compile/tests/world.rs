//! Controlplane states for the compiler's tests, built as the watches deliver them: JSON
//! event lines in the controller's shapes (`src/controlplane/fixtures.rs` has the worked
//! example these follow), decoded and fed to a [`State`] until it is synced.

use std::net::IpAddr;

use serde_json::{Value, json};

use super::super::VmPorts;
use crate::controlplane::event::{decode_group_event, decode_policy_event};
use crate::controlplane::{GroupKind, State};

pub(super) const PORTS: VmPorts = VmPorts { host: 3, uplink: 2 };

/// The VM's AppliedToGroup, with the VM as its member.
pub(super) const VM_ATG: &str = "atg-vm1";

const API: &str = "controlplane.antrea.io/v1beta2";

// `annp1` of Antrea's docs/external-node.md as the controller sends it to vm-ns/vm1,
// copied from src/controlplane/fixtures.rs (a private module there).
pub(super) const NP_ADDED: &str = r#"{"type":"ADDED","object":{"kind":"NetworkPolicy","apiVersion":"controlplane.antrea.io/v1beta2","metadata":{"name":"5c1a6a2e-0000-4000-8000-00000000a001","uid":"5c1a6a2e-0000-4000-8000-00000000a001","generation":1},"rules":[{"direction":"In","from":{"addressGroups":["cacccce8-595f-5250-b361-a0ca752b2c72"],"ipBlocks":[{"cidr":{"ip":"AAAAAAAAAAAAAP//rBBkBQ==","prefixLength":32}}]},"to":{},"services":[{"protocol":"TCP","port":22}],"action":"Reject","enableLogging":false,"name":"RULE"}],"appliedToGroups":["9a47b91d-76f1-5b82-a456-3816a3514090"],"priority":9000,"tierPriority":250,"sourceRef":{"type":"AntreaNetworkPolicy","namespace":"vm-ns","name":"annp1","uid":"5c1a6a2e-0000-4000-8000-00000000a001"}}}"#;
pub(super) const NP_BOOKMARK: &str = r#"{"type":"BOOKMARK","object":{"kind":"NetworkPolicy","apiVersion":"controlplane.antrea.io/v1beta2","metadata":{"resourceVersion":"14"}}}"#;
pub(super) const ATG_ADDED: &str = r#"{"type":"ADDED","object":{"kind":"AppliedToGroup","apiVersion":"controlplane.antrea.io/v1beta2","metadata":{"name":"9a47b91d-76f1-5b82-a456-3816a3514090","uid":"9a47b91d-76f1-5b82-a456-3816a3514090"},"groupMembers":[{"externalEntity":{"name":"vm1","namespace":"vm-ns"}}]}}"#;
pub(super) const ATG_BOOKMARK: &str = r#"{"type":"BOOKMARK","object":{"kind":"AppliedToGroup","apiVersion":"controlplane.antrea.io/v1beta2","metadata":{"resourceVersion":"9"}}}"#;
pub(super) const AG_ADDED: &str = r#"{"type":"ADDED","object":{"kind":"AddressGroup","apiVersion":"controlplane.antrea.io/v1beta2","metadata":{"name":"cacccce8-595f-5250-b361-a0ca752b2c72","uid":"cacccce8-595f-5250-b361-a0ca752b2c72"},"groupMembers":[{"externalEntity":{"name":"vm2","namespace":"vm-ns"},"ips":["AAAAAAAAAAAAAP//rBBkBA=="]}]}}"#;
pub(super) const AG_BOOKMARK: &str = r#"{"type":"BOOKMARK","object":{"kind":"AddressGroup","apiVersion":"controlplane.antrea.io/v1beta2","metadata":{"resourceVersion":"11"}}}"#;

/// Policies and groups, fed in watch order (policies, AppliedToGroups, AddressGroups),
/// each watch's initial set closed by its bookmark.
pub(super) struct World {
    policies: Vec<Value>,
    applied_to: Vec<(String, usize)>,
    address: Vec<(String, Vec<String>)>,
}

impl World {
    /// No policies; [`VM_ATG`] holds the VM.
    pub(super) fn new() -> World {
        World {
            policies: Vec::new(),
            applied_to: vec![(VM_ATG.into(), 1)],
            address: Vec::new(),
        }
    }

    pub(super) fn policy(mut self, p: Value) -> World {
        self.policies.push(p);
        self
    }

    /// An AddressGroup with one ExternalEntity member per IP.
    pub(super) fn ag(mut self, name: &str, ips: &[&str]) -> World {
        self.address
            .push((name.into(), ips.iter().map(|s| s.to_string()).collect()));
        self
    }

    /// An AppliedToGroup with `members` ExternalEntities.
    pub(super) fn atg(mut self, name: &str, members: usize) -> World {
        self.applied_to.push((name.into(), members));
        self
    }

    pub(super) fn state(&self) -> State {
        let mut s = State::new();
        for p in &self.policies {
            s.on_policy_event(decode_policy_event(added(p).as_bytes()).unwrap());
        }
        s.on_policy_event(decode_policy_event(bookmark("NetworkPolicy").as_bytes()).unwrap());
        let atgs = self.applied_to.iter().map(|(name, n)| {
            let members: Vec<Value> = (0..*n)
                .map(|i| json!({"externalEntity": {"name": format!("vm{}", i + 1), "namespace": "vm-ns"}}))
                .collect();
            group("AppliedToGroup", name, members)
        });
        feed(&mut s, GroupKind::AppliedTo, "AppliedToGroup", atgs);
        let ags = self.address.iter().map(|(name, ips)| {
            let members: Vec<Value> = ips
                .iter()
                .enumerate()
                .map(|(i, ip)| {
                    json!({
                        "externalEntity": {"name": format!("peer{i}"), "namespace": "vm-ns"},
                        "ips": [b64(ip.parse().unwrap())],
                    })
                })
                .collect();
            group("AddressGroup", name, members)
        });
        feed(&mut s, GroupKind::Address, "AddressGroup", ags);
        assert!(s.synced());
        s
    }
}

fn feed(s: &mut State, kind: GroupKind, name: &str, objects: impl Iterator<Item = Value>) {
    for o in objects {
        s.on_group_event(
            kind,
            decode_group_event(kind, added(&o).as_bytes()).unwrap(),
        );
    }
    s.on_group_event(
        kind,
        decode_group_event(kind, bookmark(name).as_bytes()).unwrap(),
    );
}

fn added(object: &Value) -> String {
    json!({"type": "ADDED", "object": object}).to_string()
}

fn bookmark(kind: &str) -> String {
    json!({"type": "BOOKMARK", "object": {"kind": kind, "apiVersion": API, "metadata": {"resourceVersion": "1"}}})
        .to_string()
}

fn group(kind: &str, name: &str, members: Vec<Value>) -> Value {
    json!({
        "kind": kind,
        "apiVersion": API,
        "metadata": {"name": name, "uid": name},
        "groupMembers": members,
    })
}

/// An Antrea-native policy named and UID'd `uid` in the tier of priority `tier`, applied
/// to [`VM_ATG`]; rules without a name get `rule<i>`.
pub(super) fn policy(uid: &str, tier: i32, priority: f64, mut rules: Vec<Value>) -> Value {
    for (i, r) in rules.iter_mut().enumerate() {
        if r.get("name").is_none() {
            r["name"] = json!(format!("rule{i}"));
        }
    }
    json!({
        "kind": "NetworkPolicy",
        "apiVersion": API,
        "metadata": {"name": uid, "uid": uid, "generation": 1},
        "rules": rules,
        "appliedToGroups": [VM_ATG],
        "priority": priority,
        "tierPriority": tier,
        "sourceRef": {"type": "AntreaClusterNetworkPolicy", "namespace": "", "name": uid, "uid": uid},
    })
}

/// An ingress rule (`"to": {}` as the controller sends it).
pub(super) fn ingress(action: &str, from: Value, services: Value) -> Value {
    json!({"direction": "In", "from": from, "to": {}, "services": services, "action": action, "enableLogging": false})
}

pub(super) fn egress(action: &str, to: Value, services: Value) -> Value {
    json!({"direction": "Out", "from": {}, "to": to, "services": services, "action": action, "enableLogging": false})
}

/// An `IPNet` (`prefixLength` omitted when 0, as Go's omitempty does).
pub(super) fn cidr(s: &str) -> Value {
    let (a, p) = s.split_once('/').unwrap();
    let p: u8 = p.parse().unwrap();
    let mut v = json!({"ip": b64(a.parse().unwrap())});
    if p != 0 {
        v["prefixLength"] = json!(p);
    }
    v
}

/// An `IPAddress`: standard base64 of the 16-byte form (IPv4-mapped for IPv4).
fn b64(ip: IpAddr) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    };
    let mut s = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                s.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                s.push('=');
            }
        }
    }
    s
}

#[test]
fn base64_as_the_controller_sends_it() {
    assert_eq!(
        b64("172.16.100.4".parse().unwrap()),
        "AAAAAAAAAAAAAP//rBBkBA=="
    );
}
