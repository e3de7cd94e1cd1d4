//! A worked example: `annp1` of Antrea's docs/external-node.md, watched by `vm-ns/vm1`,
//! line by line as the controller sends it (compact JSON in Go struct order, IPs as base64
//! of 16 bytes, `prefixLength` and rule `priority` omitted when 0, `"to":{}` on an ingress
//! rule), and the policy its first line decodes to. The group names are the controller's
//! (uuid5 of the normalized selector); the policy UID is invented. Shared by the decoder
//! and state tests.

use std::net::{IpAddr, Ipv4Addr};

use super::ip::IpNet;
use super::policy::{
    Direction, IpBlock, NetworkPolicy, Peer, Port, Protocol, Rule, RuleAction, Service, SourceRef,
};

pub(crate) const NP_ADDED: &str = r#"{"type":"ADDED","object":{"kind":"NetworkPolicy","apiVersion":"controlplane.antrea.io/v1beta2","metadata":{"name":"5c1a6a2e-0000-4000-8000-00000000a001","uid":"5c1a6a2e-0000-4000-8000-00000000a001","generation":1},"rules":[{"direction":"In","from":{"addressGroups":["cacccce8-595f-5250-b361-a0ca752b2c72"],"ipBlocks":[{"cidr":{"ip":"AAAAAAAAAAAAAP//rBBkBQ==","prefixLength":32}}]},"to":{},"services":[{"protocol":"TCP","port":22}],"action":"Reject","enableLogging":false,"name":"RULE"}],"appliedToGroups":["9a47b91d-76f1-5b82-a456-3816a3514090"],"priority":9000,"tierPriority":250,"sourceRef":{"type":"AntreaNetworkPolicy","namespace":"vm-ns","name":"annp1","uid":"5c1a6a2e-0000-4000-8000-00000000a001"}}}"#;
pub(crate) const NP_BOOKMARK: &str = r#"{"type":"BOOKMARK","object":{"kind":"NetworkPolicy","apiVersion":"controlplane.antrea.io/v1beta2","metadata":{"resourceVersion":"14"}}}"#;
pub(crate) const ATG_ADDED: &str = r#"{"type":"ADDED","object":{"kind":"AppliedToGroup","apiVersion":"controlplane.antrea.io/v1beta2","metadata":{"name":"9a47b91d-76f1-5b82-a456-3816a3514090","uid":"9a47b91d-76f1-5b82-a456-3816a3514090"},"groupMembers":[{"externalEntity":{"name":"vm1","namespace":"vm-ns"}}]}}"#;
pub(crate) const ATG_BOOKMARK: &str = r#"{"type":"BOOKMARK","object":{"kind":"AppliedToGroup","apiVersion":"controlplane.antrea.io/v1beta2","metadata":{"resourceVersion":"9"}}}"#;
pub(crate) const AG_ADDED: &str = r#"{"type":"ADDED","object":{"kind":"AddressGroup","apiVersion":"controlplane.antrea.io/v1beta2","metadata":{"name":"cacccce8-595f-5250-b361-a0ca752b2c72","uid":"cacccce8-595f-5250-b361-a0ca752b2c72"},"groupMembers":[{"externalEntity":{"name":"vm2","namespace":"vm-ns"},"ips":["AAAAAAAAAAAAAP//rBBkBA=="]}]}}"#;
pub(crate) const AG_BOOKMARK: &str = r#"{"type":"BOOKMARK","object":{"kind":"AddressGroup","apiVersion":"controlplane.antrea.io/v1beta2","metadata":{"resourceVersion":"11"}}}"#;
pub(crate) const AG_PATCH: &str = r#"{"type":"MODIFIED","object":{"kind":"AddressGroupPatch","apiVersion":"controlplane.antrea.io/v1beta2","metadata":{"name":"cacccce8-595f-5250-b361-a0ca752b2c72","uid":"cacccce8-595f-5250-b361-a0ca752b2c72"},"addedGroupMembers":[{"externalEntity":{"name":"vm2","namespace":"vm-ns"},"ips":["AAAAAAAAAAAAAP//rBBkBg=="]}],"removedGroupMembers":[{"externalEntity":{"name":"vm2","namespace":"vm-ns"},"ips":["AAAAAAAAAAAAAP//rBBkBA=="]}]}}"#;
pub(crate) const ATG_PATCH: &str = r#"{"type":"MODIFIED","object":{"kind":"AppliedToGroupPatch","apiVersion":"controlplane.antrea.io/v1beta2","metadata":{"name":"9a47b91d-76f1-5b82-a456-3816a3514090","uid":"9a47b91d-76f1-5b82-a456-3816a3514090"},"addedGroupMembers":[{"externalEntity":{"name":"vm1-3e616","namespace":"vm-ns"}}],"removedGroupMembers":[{"externalEntity":{"name":"vm1","namespace":"vm-ns"}}]}}"#;
pub(crate) const NP_DELETED: &str = r#"{"type":"DELETED","object":{"kind":"NetworkPolicy","apiVersion":"controlplane.antrea.io/v1beta2","metadata":{"name":"5c1a6a2e-0000-4000-8000-00000000a001","uid":"5c1a6a2e-0000-4000-8000-00000000a001","generation":1},"sourceRef":{"type":"AntreaNetworkPolicy","namespace":"vm-ns","name":"annp1","uid":"5c1a6a2e-0000-4000-8000-00000000a001"}}}"#;
pub(crate) const AG_DELETED: &str = r#"{"type":"DELETED","object":{"kind":"AddressGroup","apiVersion":"controlplane.antrea.io/v1beta2","metadata":{"name":"cacccce8-595f-5250-b361-a0ca752b2c72","uid":"cacccce8-595f-5250-b361-a0ca752b2c72"}}}"#;

pub(crate) const NP: &str = "5c1a6a2e-0000-4000-8000-00000000a001";
pub(crate) const ATG: &str = "9a47b91d-76f1-5b82-a456-3816a3514090";
pub(crate) const AG: &str = "cacccce8-595f-5250-b361-a0ca752b2c72";

pub(crate) fn annp1_source() -> SourceRef {
    SourceRef {
        policy_type: "AntreaNetworkPolicy".into(),
        namespace: "vm-ns".into(),
        name: "annp1".into(),
        uid: NP.into(),
    }
}

/// The policy of `NP_ADDED`, written out.
pub(crate) fn annp1() -> NetworkPolicy {
    NetworkPolicy {
        name: NP.into(),
        uid: NP.into(),
        generation: 1,
        rules: vec![Rule {
            direction: Direction::In,
            from: Peer {
                address_groups: vec![AG.into()],
                ip_blocks: vec![IpBlock {
                    cidr: IpNet::new(IpAddr::V4(Ipv4Addr::new(172, 16, 100, 5)), 32).unwrap(),
                    except: vec![],
                }],
                ..Peer::default()
            },
            to: Peer::default(),
            services: vec![Service {
                protocol: Protocol::Tcp,
                port: Some(Port::Number(22)),
                ..Service::default()
            }],
            priority: 0,
            action: RuleAction::Reject,
            enable_logging: false,
            applied_to_groups: vec![],
            name: "RULE".into(),
            log_label: String::new(),
            l7: false,
        }],
        applied_to_groups: vec![ATG.into()],
        priority: Some(9000.0),
        tier_priority: Some(250),
        source_ref: Some(annp1_source()),
    }
}
