use std::collections::BTreeMap;

use super::*;
use crate::openflow::cookie;

fn port(name: &str, ids: &[(&str, &str)]) -> PortData {
    PortData {
        uuid: crate::ovsdb::Uuid::parse("00000000-0000-0000-0000-000000000001")
            .unwrap_or_else(|e| panic!("{e}")),
        name: name.into(),
        external_ids: ids
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        if_uuid: None,
        if_name: name.into(),
        if_type: String::new(),
        ofport: 1,
        error: None,
        options: BTreeMap::new(),
        mac: None,
        mac_in_use: None,
        mtu: None,
        ifindex: None,
    }
}

fn names() -> Names {
    let ports = [
        port("ret0", &[("antrea-type", "traffic-control")]),
        port("eth1", &[("antrea-type", "host")]),
        port("eth1~", &[("antrea-type", "uplink")]),
        port(
            "web-1a2b3c",
            &[
                ("container-id", "c1"),
                ("pod-namespace", "prod"),
                ("pod-name", "web"),
                ("attached-mac", "02:00:00:00:00:0A"),
            ],
        ),
    ];
    let mut n = Names::new(Some(4), &ports);
    n.add_tc("mirror");
    n.add_rule(2, "AntreaNetworkPolicy vm-ns/annp1 In ingress-drop-0");
    n
}

/// Every kind of owner, from the cookie (and, for L2, the match), with exact names.
#[test]
fn owners_from_cookies() {
    let n = names();
    let l2_match = [MatchField::EthDst([2, 0, 0, 0, 0, 0x0a], None)];
    let cases: Vec<(&str, u64, &[MatchField], OwnerKind)> = vec![
        (
            "base flows",
            cookie(4, Category::DEFAULT, 0),
            &[],
            OwnerKind::Pipeline,
        ),
        (
            "a Pod's L2 flow, by its MAC",
            cookie(4, Category::DEFAULT, 1),
            &l2_match,
            OwnerKind::L2 {
                pod: Some("prod/web".into()),
            },
        ),
        (
            "an L2 flow of a MAC no port has",
            cookie(4, Category::DEFAULT, 1),
            &[MatchField::EthDst([2, 0, 0, 0, 0, 0x0b], None)],
            OwnerKind::L2 { pod: None },
        ),
        (
            "a TC named by the daemon",
            cookie(5, Category::TRAFFIC_CONTROL, 0x7fff_80d2),
            &[],
            OwnerKind::TrafficControl {
                name: Some("mirror".into()),
                object: 0x7fff_80d2,
            },
        ),
        (
            "a TC nobody named",
            cookie(4, Category::TRAFFIC_CONTROL, 0x1234),
            &[],
            OwnerKind::TrafficControl {
                name: None,
                object: 0x1234,
            },
        ),
        (
            "a return port, by its traffic-control port",
            cookie(4, Category::TRAFFIC_CONTROL, object_id("port:ret0")),
            &[],
            OwnerKind::ReturnPort {
                port: Some("ret0".into()),
                object: object_id("port:ret0"),
            },
        ),
        (
            "the uplink pair of eth1",
            cookie(4, Category::EXTERNAL_NODE, nic_owner("eth1").object),
            &[],
            OwnerKind::ExternalNode {
                nic: Some("eth1".into()),
            },
        ),
        (
            "policy bypass",
            cookie(4, Category::EXTERNAL_NODE, 0),
            &[],
            OwnerKind::PolicyBypass,
        ),
        (
            "NetworkPolicy's own flows",
            cookie(4, Category::NETWORK_POLICY, 0),
            &[],
            OwnerKind::PolicyPipeline,
        ),
        (
            "a NetworkPolicy rule named by the daemon",
            cookie(4, Category::NETWORK_POLICY, 2),
            &[],
            OwnerKind::PolicyRule {
                name: Some("AntreaNetworkPolicy vm-ns/annp1 In ingress-drop-0".into()),
                conj_id: 2,
            },
        ),
        (
            "a NetworkPolicy rule nobody named",
            cookie(4, Category::NETWORK_POLICY, 7),
            &[],
            OwnerKind::PolicyRule {
                name: None,
                conj_id: 7,
            },
        ),
        (
            "an old round",
            cookie(3, Category::TRAFFIC_CONTROL, 0x7fff_80d2),
            &[],
            OwnerKind::Stale { round: 3 },
        ),
        ("cookie 0", 0, &[], OwnerKind::Unclaimed),
        (
            "another category (Antrea's agent's pipeline)",
            cookie(4, Category(5), 1),
            &[],
            OwnerKind::Unclaimed,
        ),
        (
            "the reserved byte set",
            cookie(4, Category::DEFAULT, 0) | 1 << 32,
            &[],
            OwnerKind::Unclaimed,
        ),
    ];
    for (what, ck, fields, want) in cases {
        assert_eq!(n.owner(ck, fields, 5), want, "{what}");
    }
}

/// A bridge without a recorded round: only the newest round present is live.
#[test]
fn without_a_recorded_round_the_newest_is_live() {
    let n = Names::new(None, &[]);
    assert_eq!(
        n.owner(cookie(7, Category::DEFAULT, 0), &[], 7),
        OwnerKind::Pipeline
    );
    assert_eq!(
        n.owner(cookie(6, Category::DEFAULT, 0), &[], 7),
        OwnerKind::Stale { round: 6 }
    );
}

#[test]
fn labels() {
    assert_eq!(
        OwnerKind::TrafficControl {
            name: None,
            object: 0x1234
        }
        .to_string(),
        "trafficcontrol #00001234 (name unknown: the daemon is not running)"
    );
    assert_eq!(
        OwnerKind::L2 {
            pod: Some("prod/web".into())
        }
        .to_string(),
        "l2 forwarding of Pod prod/web"
    );
}
