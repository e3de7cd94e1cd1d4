//! `AddressGroup` and `AppliedToGroup` of `controlplane.antrea.io/v1beta2`, their patches
//! (`AddressGroupPatch`, `AppliedToGroupPatch`) and their members: the typed forms and
//! their decoders (`pkg/apis/controlplane/v1beta2/types.go`).
//!
//! Owns a member's identity ([`MemberKey`]): Antrea's `normalizeGroupMember`
//! (`pkg/apis/controlplane/sets.go`) keys a member by its reference plus its IP bytes, so
//! an IP change is sent as a patch that removes the old key and adds the new one. Not the
//! group store (that is `state`).

use std::net::IpAddr;

use serde_json::Value;

use super::ip::ip_value;
use super::json::{Budget, Obj, PathError, as_object, int_as, list, object, string};
use super::policy::Protocol;

/// A group as ADDED (or MODIFIED with a full object) sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub name: String,
    pub uid: String,
    pub members: Vec<GroupMember>,
}

/// The members to insert, then the members to delete (in that order, as the agent applies
/// them), by [`MemberKey`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupPatch {
    pub name: String,
    pub uid: String,
    pub added: Vec<GroupMember>,
    pub removed: Vec<GroupMember>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMember {
    pub key: MemberKey,
    /// Named ports (Pods only; an ExternalEntity made from an ExternalNode has none).
    pub ports: Vec<NamedPort>,
}

/// What identifies a member: its reference and its IPs, in the order sent.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemberKey {
    pub entity: MemberRef,
    /// Empty for AppliedToGroup members (the controller sends their IPs only in
    /// AddressGroups).
    pub ips: Vec<IpAddr>,
}

/// A member's reference. When a member carries several (it should not), the first of
/// Antrea's key order wins: pod, externalEntity, service, then node.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemberRef {
    Pod {
        namespace: String,
        name: String,
    },
    ExternalEntity {
        namespace: String,
        name: String,
    },
    Service {
        namespace: String,
        name: String,
    },
    Node {
        name: String,
    },
    /// No reference: the member is its IPs.
    Ips,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedPort {
    pub port: u16,
    pub name: String,
    /// TCP when absent (Kubernetes' default for a container port).
    pub protocol: Protocol,
}

/// `groupMembers` of a full group object.
pub(super) fn group_value(
    m: &Obj,
    name: String,
    uid: String,
    b: &mut Budget,
) -> Result<Group, PathError> {
    Ok(Group {
        name,
        uid,
        members: members(m, "groupMembers", b)?,
    })
}

/// `addedGroupMembers` and `removedGroupMembers` of a patch object.
pub(super) fn patch_value(
    m: &Obj,
    name: String,
    uid: String,
    b: &mut Budget,
) -> Result<GroupPatch, PathError> {
    Ok(GroupPatch {
        name,
        uid,
        added: members(m, "addedGroupMembers", b)?,
        removed: members(m, "removedGroupMembers", b)?,
    })
}

fn members(m: &Obj, k: &str, b: &mut Budget) -> Result<Vec<GroupMember>, PathError> {
    list(m, k, b, |v, b| member(as_object(v)?, b))
}

fn member(m: &Obj, b: &mut Budget) -> Result<GroupMember, PathError> {
    let ns_name = |k: &str| -> Result<Option<(String, String)>, PathError> {
        let Some(r) = object(m, k)? else {
            return Ok(None);
        };
        let f = |f| string(r, f).map_err(|e| e.key(k));
        Ok(Some((f("namespace")?, f("name")?)))
    };
    let entity = if let Some((namespace, name)) = ns_name("pod")? {
        MemberRef::Pod { namespace, name }
    } else if let Some((namespace, name)) = ns_name("externalEntity")? {
        MemberRef::ExternalEntity { namespace, name }
    } else if let Some((namespace, name)) = ns_name("service")? {
        MemberRef::Service { namespace, name }
    } else if let Some((_, name)) = ns_name("node")? {
        MemberRef::Node { name }
    } else {
        MemberRef::Ips
    };
    Ok(GroupMember {
        key: MemberKey {
            entity,
            ips: list(m, "ips", b, |v: &Value, _| ip_value(v))?,
        },
        ports: list(m, "ports", b, |v, _| {
            let p = as_object(v)?;
            Ok(NamedPort {
                port: int_as(p, "port", 0, 65535)?.unwrap_or(0),
                name: string(p, "name")?,
                protocol: match string(p, "protocol")?.as_str() {
                    "" => Protocol::Tcp,
                    s => Protocol::parse(s),
                },
            })
        })?,
    })
}
