//! Every decoder on the JSON forms the controller sends: the worked example's
//! lines verbatim, the bookmark shapes, DELETED shapes, the E2b and E4 rules; then bad
//! input, which must be an error naming the object and the field.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::*;
use crate::controlplane::fixtures::*;
use crate::controlplane::group::{GroupMember, MemberKey, MemberRef, NamedPort};
use crate::controlplane::ip::IpNet;
use crate::controlplane::policy::{
    Direction, IpBlock, Peer, Port, Protocol, Rule, RuleAction, Service,
};

fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(a, b, c, d))
}

fn ee(name: &str, ips: Vec<IpAddr>) -> GroupMember {
    GroupMember {
        key: MemberKey {
            entity: MemberRef::ExternalEntity {
                namespace: "vm-ns".into(),
                name: name.into(),
            },
            ips,
        },
        ports: vec![],
    }
}

fn np(line: &str) -> Event<NetworkPolicy> {
    decode_policy_event(line.as_bytes()).unwrap()
}

fn ag(line: &str) -> Event<GroupUpdate> {
    decode_group_event(GroupKind::Address, line.as_bytes()).unwrap()
}

fn atg(line: &str) -> Event<GroupUpdate> {
    decode_group_event(GroupKind::AppliedTo, line.as_bytes()).unwrap()
}

#[test]
fn the_worked_example_decodes_exactly() {
    assert_eq!(np(NP_ADDED), Event::Added(annp1()));
    assert_eq!(
        np(NP_BOOKMARK),
        Event::Bookmark {
            resource_version: Some("14".into())
        }
    );
    assert_eq!(
        atg(ATG_ADDED),
        Event::Added(GroupUpdate::Full(Group {
            name: ATG.into(),
            uid: ATG.into(),
            members: vec![ee("vm1", vec![])],
        }))
    );
    assert_eq!(
        atg(ATG_BOOKMARK),
        Event::Bookmark {
            resource_version: Some("9".into())
        }
    );
    assert_eq!(
        ag(AG_ADDED),
        Event::Added(GroupUpdate::Full(Group {
            name: AG.into(),
            uid: AG.into(),
            members: vec![ee("vm2", vec![v4(172, 16, 100, 4)])],
        }))
    );
    assert_eq!(
        ag(AG_BOOKMARK),
        Event::Bookmark {
            resource_version: Some("11".into())
        }
    );
    assert_eq!(
        ag(AG_PATCH),
        Event::Modified(GroupUpdate::Patch(GroupPatch {
            name: AG.into(),
            uid: AG.into(),
            added: vec![ee("vm2", vec![v4(172, 16, 100, 6)])],
            removed: vec![ee("vm2", vec![v4(172, 16, 100, 4)])],
        }))
    );
    assert_eq!(
        atg(ATG_PATCH),
        Event::Modified(GroupUpdate::Patch(GroupPatch {
            name: ATG.into(),
            uid: ATG.into(),
            added: vec![ee("vm1-3e616", vec![])],
            removed: vec![ee("vm1", vec![])],
        }))
    );
    assert_eq!(
        np(NP_DELETED),
        Event::Deleted(Deleted {
            name: NP.into(),
            uid: NP.into(),
            generation: Some(1),
            source_ref: Some(annp1_source()),
        })
    );
    assert_eq!(
        ag(AG_DELETED),
        Event::Deleted(Deleted {
            name: AG.into(),
            uid: AG.into(),
            generation: None,
            source_ref: None,
        })
    );
}

#[test]
fn every_bookmark_shape_of_every_server_is_a_bookmark() {
    // Antrea ≤2.4.x, 2.5.0–2.6.2, 2.7.0+ (#8124), and 2.7.0+ with sendInitialEvents; and an
    // object with no metadata at all (the body is never read by the agent).
    let shapes = [
        (r#"{"creationTimestamp":null}"#, None),
        ("{}", None),
        (r#"{"resourceVersion":"42"}"#, Some("42")),
        (
            r#"{"resourceVersion":"43","annotations":{"k8s.io/initial-events-end":"true"}}"#,
            Some("43"),
        ),
    ];
    for kind in Kind::ALL {
        for (meta, rv) in shapes {
            let line = format!(
                r#"{{"type":"BOOKMARK","object":{{"kind":"{}","apiVersion":"controlplane.antrea.io/v1beta2","metadata":{meta}}}}}"#,
                kind.name()
            );
            let want = Some(rv.map(str::to_string));
            let got = match kind {
                Kind::NetworkPolicy => match np(&line) {
                    Event::Bookmark { resource_version } => Some(resource_version),
                    _ => None,
                },
                Kind::AppliedToGroup => match atg(&line) {
                    Event::Bookmark { resource_version } => Some(resource_version),
                    _ => None,
                },
                Kind::AddressGroup => match ag(&line) {
                    Event::Bookmark { resource_version } => Some(resource_version),
                    _ => None,
                },
            };
            assert_eq!(got, want, "{line}");
        }
    }
    assert_eq!(
        np(r#"{"type":"BOOKMARK","object":{"kind":"NetworkPolicy"}}"#),
        Event::Bookmark {
            resource_version: None
        }
    );
}

#[test]
fn e2b_egress_drop_to_an_ip_block() {
    // The rule of Antrea's VM e2e case anp-vmagent-egress-tcp-ip (test/e2e/vmagent_test.go)
    // as the controller sends it, peer B = 10.0.0.12, in a policy of priority 1.
    let rule = r#"{"direction":"Out","from":{},"to":{"ipBlocks":[{"cidr":{"ip":"AAAAAAAAAAAAAP//CgAADA==","prefixLength":32}}]},"services":[{"protocol":"TCP","port":5201}],"action":"Drop","enableLogging":false,"name":"RULE"}"#;
    let line = format!(
        r#"{{"type":"ADDED","object":{{"kind":"NetworkPolicy","apiVersion":"controlplane.antrea.io/v1beta2","metadata":{{"name":"p","uid":"p","generation":2}},"rules":[{rule}],"appliedToGroups":["{ATG}"],"priority":1,"tierPriority":250}}}}"#
    );
    let Event::Added(p) = np(&line) else {
        panic!("not ADDED")
    };
    assert_eq!(p.priority, Some(1.0));
    assert_eq!(p.generation, 2);
    assert_eq!(p.source_ref, None);
    assert_eq!(
        p.rules,
        vec![Rule {
            direction: Direction::Out,
            from: Peer::default(),
            to: Peer {
                ip_blocks: vec![IpBlock {
                    cidr: IpNet::new(v4(10, 0, 0, 12), 32).unwrap(),
                    except: vec![],
                }],
                ..Peer::default()
            },
            services: vec![Service {
                protocol: Protocol::Tcp,
                port: Some(Port::Number(5201)),
                ..Service::default()
            }],
            priority: 0,
            action: RuleAction::Drop,
            enable_logging: false,
            applied_to_groups: vec![],
            name: "RULE".into(),
            log_label: String::new(),
            l7: false,
        }]
    );
    assert!(p.rules[0].from.is_empty());
}

/// A policy line holding `rules` (JSON), with `creationTimestamp` as given.
fn policy_line(rules: &str, extra_meta: &str) -> String {
    format!(
        r#"{{"type":"MODIFIED","object":{{"kind":"NetworkPolicy","metadata":{{"name":"p","uid":"u"{extra_meta}}},"rules":{rules},"priority":1.5,"tierPriority":253}}}}"#
    )
}

#[test]
fn services_peers_and_rule_fields() {
    let rules = r#"[
        {"direction":"In","from":{"ipBlocks":[
            {"cidr":{"ip":"AAAAAAAAAAAAAP//AAAAAA=="}},
            {"cidr":{"ip":"AAAAAAAAAAAAAAAAAAAAAA=="}},
            {"cidr":{"ip":"AAAAAAAAAAAAAP//CgABAQ==","prefixLength":8},
             "except":[{"ip":"AAAAAAAAAAAAAP//CgEAAA==","prefixLength":16}]}]},
         "to":{},
         "services":[{"protocol":"ICMP","icmpType":8,"icmpCode":0},
                     {"protocol":"UDP","port":"dns"},
                     {"protocol":"TCP","port":"80"},
                     {"port":1000,"endPort":2000,"srcPort":5,"srcEndPort":6},
                     {"protocol":"IGMP","igmpType":17,"groupAddress":"224.0.0.1"},
                     {"protocol":"GRE"}],
         "priority":3,"action":"Pass","enableLogging":true,"name":"r1","logLabel":"lbl"},
        {"direction":"Out","from":{},
         "to":{"fqdns":["*.example.com"],"toServices":[{"namespace":"ns","name":"svc"}],
               "labelIdentities":[7]},
         "appliedToGroups":["g2"],"l7Protocols":[{"http":{}}]}]"#;
    let Event::Modified(p) = np(&policy_line(rules, r#","creationTimestamp":null"#)) else {
        panic!("not MODIFIED")
    };
    // creationTimestamp null (Antrea ≤2.4) and absent (2.5+) decode the same.
    assert_eq!(np(&policy_line(rules, "")), Event::Modified(p.clone()));
    assert_eq!(p.priority, Some(1.5));
    assert_eq!(p.tier_priority, Some(253));
    assert_eq!(p.generation, 0);
    let r = &p.rules[0];
    let nets: Vec<String> = r
        .from
        .ip_blocks
        .iter()
        .map(|b| b.cidr.to_string())
        .collect();
    assert_eq!(nets, ["0.0.0.0/0", "::/0", "10.0.0.0/8"]);
    assert_eq!(
        r.from.ip_blocks[2].except,
        vec![IpNet::new(v4(10, 1, 0, 0), 16).unwrap()]
    );
    assert_eq!(
        r.from.ip_blocks[1].cidr,
        IpNet::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0).unwrap()
    );
    assert_eq!(
        r.services,
        vec![
            Service {
                protocol: Protocol::Icmp,
                icmp_type: Some(8),
                icmp_code: Some(0),
                ..Service::default()
            },
            Service {
                protocol: Protocol::Udp,
                port: Some(Port::Named("dns".into())),
                ..Service::default()
            },
            Service {
                protocol: Protocol::Tcp,
                port: Some(Port::Named("80".into())),
                ..Service::default()
            },
            Service {
                protocol: Protocol::Tcp,
                port: Some(Port::Number(1000)),
                end_port: Some(2000),
                src_port: Some(5),
                src_end_port: Some(6),
                ..Service::default()
            },
            Service {
                protocol: Protocol::Igmp,
                igmp_type: Some(17),
                group_address: "224.0.0.1".into(),
                ..Service::default()
            },
            Service {
                protocol: Protocol::Other("GRE".into()),
                ..Service::default()
            },
        ]
    );
    assert_eq!(
        (
            r.priority,
            r.action,
            r.enable_logging,
            r.name.as_str(),
            r.log_label.as_str()
        ),
        (3, RuleAction::Pass, true, "r1", "lbl")
    );
    let r = &p.rules[1];
    // No action: Allow. Unused fields of the other kinds of peer are kept.
    assert_eq!(r.action, RuleAction::Allow);
    assert_eq!(r.to.fqdns, ["*.example.com"]);
    assert_eq!(r.to.to_services[0].name, "svc");
    assert_eq!(r.to.label_identities, [7]);
    assert_eq!(r.applied_to_groups, ["g2"]);
    assert!(r.l7);
    assert!(r.services.is_empty());
    let groups: Vec<(GroupKind, &str)> = p.groups().collect();
    assert_eq!(groups, [(GroupKind::AppliedTo, "g2")]);
}

#[test]
fn members_of_every_kind() {
    let line = r#"{"type":"ADDED","object":{"kind":"AddressGroup","metadata":{"name":"g","creationTimestamp":null},
        "groupMembers":[
          {"pod":{"name":"web","namespace":"ns"},"ips":["AAAAAAAAAAAAAP//CgAABQ==","IAENuAAAAAAAAAAAAAAAAQ=="],
           "ports":[{"port":8080,"name":"http","protocol":"TCP"},{"port":53,"name":"dns","protocol":"UDP"},{"name":"x"}]},
          {"node":{"name":"n1"},"ips":["wAACAQ=="]},
          {"service":{"name":"s","namespace":"ns"}},
          {"ips":["AAAAAAAAAAAAAP//CgAABg=="]}]}}"#;
    let Event::Added(GroupUpdate::Full(g)) = ag(line) else {
        panic!("not a full ADDED")
    };
    assert_eq!(g.uid, "");
    let keys: Vec<&MemberKey> = g.members.iter().map(|m| &m.key).collect();
    assert_eq!(
        keys,
        [
            &MemberKey {
                entity: MemberRef::Pod {
                    namespace: "ns".into(),
                    name: "web".into()
                },
                ips: vec![v4(10, 0, 0, 5), "2001:db8::1".parse().unwrap()],
            },
            &MemberKey {
                entity: MemberRef::Node { name: "n1".into() },
                ips: vec![v4(192, 0, 2, 1)],
            },
            &MemberKey {
                entity: MemberRef::Service {
                    namespace: "ns".into(),
                    name: "s".into()
                },
                ips: vec![],
            },
            &MemberKey {
                entity: MemberRef::Ips,
                ips: vec![v4(10, 0, 0, 6)],
            },
        ]
    );
    assert_eq!(
        g.members[0].ports,
        [
            NamedPort {
                port: 8080,
                name: "http".into(),
                protocol: Protocol::Tcp
            },
            NamedPort {
                port: 53,
                name: "dns".into(),
                protocol: Protocol::Udp
            },
            NamedPort {
                port: 0,
                name: "x".into(),
                protocol: Protocol::Tcp
            },
        ]
    );
}

#[test]
fn errors_and_status_lines() {
    let e = np(
        r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old","reason":"Expired","code":410}}"#,
    );
    assert_eq!(
        e,
        Event::Error(KubeError::Gone {
            message: "too old".into()
        })
    );
    let e = ag(r#"{"kind":"Status","code":500,"reason":"InternalError","message":"x"}"#);
    assert_eq!(
        e,
        Event::Error(KubeError::Status {
            code: 500,
            reason: "InternalError".into(),
            message: "x".into(),
            retry_after: None
        })
    );
}

/// The decode error of `line` on `kind`'s watch, as (what, detail).
fn bad(kind: Kind, line: &str) -> (String, String) {
    let r = match kind {
        Kind::NetworkPolicy => decode_policy_event(line.as_bytes()).map(|_| ()),
        Kind::AppliedToGroup => {
            decode_group_event(GroupKind::AppliedTo, line.as_bytes()).map(|_| ())
        }
        Kind::AddressGroup => decode_group_event(GroupKind::Address, line.as_bytes()).map(|_| ()),
    };
    match r {
        Err(KubeError::Decode { what, detail }) => (what, detail),
        other => panic!("{line}: {other:?}"),
    }
}

#[test]
fn bad_objects_are_errors_naming_the_object_and_the_field() {
    let (np_, ag_, atg_) = (
        Kind::NetworkPolicy,
        Kind::AddressGroup,
        Kind::AppliedToGroup,
    );
    let p = |rules: &str| policy_line(rules, "");
    let cases: Vec<(Kind, String, &str, &str)> = vec![
        (
            np_,
            p(r#"[{"direction":"In","services":[{"port":true}]}]"#),
            "NetworkPolicy p",
            "rules[0].services[0].port: expected an integer or a string, found a boolean",
        ),
        (
            np_,
            p(r#"[{"direction":"In","services":[{"port":65536}]}]"#),
            "NetworkPolicy p",
            "rules[0].services[0].port: 65536 out of range 0..=65535",
        ),
        (
            np_,
            p(r#"[{"direction":"In","services":[{"protocol":"ICMP","icmpType":256}]}]"#),
            "NetworkPolicy p",
            "rules[0].services[0].icmpType: 256 out of range 0..=255",
        ),
        (
            np_,
            p(r#"[{"direction":"Sideways"}]"#),
            "NetworkPolicy p",
            "rules[0].direction: \"Sideways\" is not In or Out",
        ),
        (
            np_,
            p(r#"[{"to":{}}]"#),
            "NetworkPolicy p",
            "rules[0].direction: required",
        ),
        (
            np_,
            p(r#"[{"direction":"In","action":"Maybe"}]"#),
            "NetworkPolicy p",
            "rules[0].action: \"Maybe\" is not Allow, Drop, Pass or Reject",
        ),
        (
            np_,
            p(r#"[{"direction":"Out","to":{"ipBlocks":[{"cidr":{"ip":"AAAAAAAAAAAAAP//CgAADA==","prefixLength":40}}]}}]"#),
            "NetworkPolicy p",
            "rules[0].to.ipBlocks[0].cidr.prefixLength: 40 out of range 0..=32",
        ),
        (
            np_,
            p(r#"[{"direction":"Out","to":{"ipBlocks":[{"except":[]}]}}]"#),
            "NetworkPolicy p",
            "rules[0].to.ipBlocks[0].cidr: required",
        ),
        (
            np_,
            p(r#"[{"direction":"In","from":{"addressGroups":"g"}}]"#),
            "NetworkPolicy p",
            "rules[0].from.addressGroups: expected an array, found a string",
        ),
        (
            np_,
            p(r#"{"direction":"In"}"#),
            "NetworkPolicy p",
            "rules: expected an array, found an object",
        ),
        (
            np_,
            r#"{"type":"ADDED","object":{"kind":"NetworkPolicy","metadata":{"name":"p","generation":"1"}}}"#.into(),
            "NetworkPolicy p",
            "metadata.generation: expected an integer, found a string",
        ),
        (
            np_,
            r#"{"type":"ADDED","object":{"kind":"NetworkPolicy","metadata":{"name":"p"},"priority":"high"}}"#.into(),
            "NetworkPolicy p",
            "priority: expected a number, found a string",
        ),
        (
            np_,
            r#"{"type":"ADDED","object":{"kind":"NetworkPolicy","metadata":{"name":"p"},"tierPriority":2147483648}}"#.into(),
            "NetworkPolicy p",
            "tierPriority: 2147483648 out of range -2147483648..=2147483647",
        ),
        (
            np_,
            r#"{"type":"ADDED","object":{"kind":"AddressGroup","metadata":{"name":"p"}}}"#.into(),
            "NetworkPolicy p",
            "kind: \"AddressGroup\" is not NetworkPolicy",
        ),
        (
            np_,
            r#"{"type":"ADDED","object":{"kind":"NetworkPolicy","metadata":{"uid":"u"}}}"#.into(),
            "NetworkPolicy watch event",
            "object.metadata.name: required",
        ),
        (
            np_,
            r#"{"type":"ADDED","object":{"kind":"NetworkPolicy","metadata":{"name":7}}}"#.into(),
            "NetworkPolicy watch event",
            "object.metadata.name: expected a string, found a number",
        ),
        (
            np_,
            r#"{"type":"DELETED","object":{"metadata":{"name":"p"},"sourceRef":{"name":1}}}"#.into(),
            "NetworkPolicy p",
            "sourceRef.name: expected a string, found a number",
        ),
        (
            np_,
            r#"{"type":"ADDED","object":[]}"#.into(),
            "NetworkPolicy watch event",
            "object: expected an object, found an array",
        ),
        (
            np_,
            r#"{"type":"ADDED"}"#.into(),
            "NetworkPolicy watch event",
            "object: expected an object, found null",
        ),
        (
            np_,
            r#"{"type":"RENAMED","object":{}}"#.into(),
            "NetworkPolicy watch event",
            "unknown event type \"RENAMED\"",
        ),
        (
            np_,
            r#"{"object":{}}"#.into(),
            "NetworkPolicy watch event",
            "no \"type\"",
        ),
        (
            np_,
            r#"{"type":"ERROR","object":"gone"}"#.into(),
            "NetworkPolicy watch event",
            "object: invalid type: string \"gone\", expected struct StatusWire",
        ),
        (
            ag_,
            r#"{"type":"ADDED","object":{"kind":"AddressGroup","metadata":{"name":"g"},"groupMembers":[{"pod":{"name":"a"},"ips":["AAAAAAA="]}]}}"#.into(),
            "AddressGroup g",
            "groupMembers[0].ips[0]: 5 bytes is neither an IPv4 (4) nor an IPv6 (16) address",
        ),
        (
            ag_,
            r#"{"type":"MODIFIED","object":{"kind":"AddressGroupPatch","metadata":{"name":"g"},"removedGroupMembers":[{"externalEntity":"vm1"}]}}"#.into(),
            "AddressGroup g",
            "removedGroupMembers[0].externalEntity: expected an object, found a string",
        ),
        (
            ag_,
            r#"{"type":"ADDED","object":{"kind":"AddressGroupPatch","metadata":{"name":"g"}}}"#.into(),
            "AddressGroup g",
            "kind: AddressGroupPatch on ADDED",
        ),
        (
            atg_,
            r#"{"type":"MODIFIED","object":{"kind":"AddressGroupPatch","metadata":{"name":"g"}}}"#.into(),
            "AppliedToGroup g",
            "kind: \"AddressGroupPatch\" is not AppliedToGroup or AppliedToGroupPatch",
        ),
        (
            atg_,
            r#"{"type":"ADDED","object":{"kind":"AppliedToGroup","metadata":{"name":"g"},"groupMembers":[{"pod":{"name":"a"},"ports":[{"port":-1}]}]}}"#.into(),
            "AppliedToGroup g",
            "groupMembers[0].ports[0].port: -1 out of range 0..=65535",
        ),
    ];
    for (kind, line, what, detail) in cases {
        assert_eq!(
            bad(kind, &line),
            (what.to_string(), detail.to_string()),
            "{line}"
        );
    }
}

#[test]
fn truncated_and_garbage_lines_are_errors() {
    let full = NP_ADDED.as_bytes();
    for n in 0..full.len() {
        match decode_policy_event(&full[..n]) {
            Err(KubeError::Decode { what, .. }) => {
                assert_eq!(what, "NetworkPolicy watch event", "{n}")
            }
            other => panic!("prefix {n}: {other:?}"),
        }
    }
    let (what, detail) = bad(Kind::AddressGroup, "[1]");
    assert_eq!(
        (what.as_str(), detail.as_str()),
        ("AddressGroup watch event", "not a JSON object")
    );
    // A recursion bomb: serde_json's depth limit ends it (no stack overflow).
    let deep = format!(
        r#"{{"type":"ADDED","object":{}{}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let (what, detail) = bad(Kind::NetworkPolicy, &deep);
    assert_eq!(what, "NetworkPolicy watch event");
    assert!(detail.starts_with("recursion limit exceeded"), "{detail}");
}

#[test]
fn huge_arrays_are_refused_naming_the_field() {
    let ids = vec!["0"; crate::controlplane::MAX_ELEMENTS + 1].join(",");
    let line = policy_line(
        &format!(r#"[{{"direction":"In","from":{{"labelIdentities":[{ids}]}}}}]"#),
        "",
    );
    assert_eq!(
        bad(Kind::NetworkPolicy, &line),
        (
            "NetworkPolicy p".to_string(),
            format!(
                "rules[0].from.labelIdentities: {} elements exceed what is left of the object's {}",
                crate::controlplane::MAX_ELEMENTS + 1,
                crate::controlplane::MAX_ELEMENTS
            )
        )
    );
}

#[test]
fn identity_of_a_bad_line() {
    assert_eq!(
        bad_event_identity(
            br#"{"type":"MODIFIED","object":{"metadata":{"name":"g"},"addedGroupMembers":7}}"#
        ),
        (Some("MODIFIED".to_string()), Some("g".to_string()))
    );
    assert_eq!(bad_event_identity(b"{\"type\":\"ADD"), (None, None));
    assert_eq!(
        bad_event_identity(br#"{"type":"ADDED","object":{"metadata":{"name":""}}}"#),
        (Some("ADDED".to_string()), None)
    );
}
