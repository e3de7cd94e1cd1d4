//! The common shape of an AddressGroup or AppliedToGroup event (ADDED or MODIFIED, a full
//! group or its patch), decoded straight into the typed form with serde: no
//! `serde_json::Value` tree. A 10,000-member AddressGroup is a ~1 MB line; the tree cost
//! ~100,000 allocations and, on a heap that had just been given back to the kernel, 20–28
//! ms in the daemon, a quarter of the time from the event to the flows committed.
//!
//! Owns only speed. Anything but the plain shape — a field it does not know, a field of
//! another type, an escaped string, a port out of range, a patch on ADDED, a bookmark, an
//! error, too many elements — returns `None`, and the general decoder (`event`) decodes the
//! line and names what is wrong. The fast path accepts a subset of what the general one
//! accepts and builds what it would build from it (the tests and the fuzz targets compare
//! the two); `null` is "absent" in both. It knows every field it accepts (serde would skip
//! an unknown one without the checks a JSON tree makes: a number out of range, say).

use serde::Deserialize;

use super::GroupKind;
use super::event::{Event, GroupUpdate};
use super::group::{Group, GroupMember, GroupPatch, MemberKey, MemberRef, NamedPort};
use super::ip::decode_ip;
use super::json::MAX_ELEMENTS;
use super::policy::Protocol;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    ty: &'a str,
    #[serde(borrow)]
    object: Object<'a>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Object<'a> {
    #[serde(borrow)]
    kind: Option<&'a str>,
    #[serde(rename = "apiVersion", borrow)]
    _api_version: Option<&'a str>,
    #[serde(borrow)]
    metadata: Option<Metadata<'a>>,
    #[serde(rename = "groupMembers", borrow)]
    members: Option<Vec<Member<'a>>>,
    #[serde(rename = "addedGroupMembers", borrow)]
    added: Option<Vec<Member<'a>>>,
    #[serde(rename = "removedGroupMembers", borrow)]
    removed: Option<Vec<Member<'a>>>,
}

/// What Antrea's controller sends in a group's `metadata` (the fields read, and those it
/// may add that nothing reads, checked as a tree would check them).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Metadata<'a> {
    #[serde(borrow)]
    name: Option<&'a str>,
    #[serde(borrow)]
    uid: Option<&'a str>,
    #[serde(rename = "resourceVersion", borrow)]
    _resource_version: Option<&'a str>,
    #[serde(rename = "creationTimestamp", borrow)]
    _creation_timestamp: Option<&'a str>,
    #[serde(rename = "generation")]
    _generation: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Member<'a> {
    #[serde(borrow)]
    pod: Option<Ref<'a>>,
    #[serde(rename = "externalEntity", borrow)]
    external_entity: Option<Ref<'a>>,
    #[serde(borrow)]
    service: Option<Ref<'a>>,
    #[serde(borrow)]
    node: Option<Ref<'a>>,
    #[serde(borrow)]
    ips: Option<Vec<&'a str>>,
    #[serde(borrow)]
    ports: Option<Vec<Port<'a>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Ref<'a> {
    #[serde(borrow)]
    namespace: Option<&'a str>,
    #[serde(borrow)]
    name: Option<&'a str>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Port<'a> {
    port: Option<i64>,
    #[serde(borrow)]
    name: Option<&'a str>,
    #[serde(borrow)]
    protocol: Option<&'a str>,
}

/// The event, when the line has the common shape and is valid; else `None` (decode it
/// with the general decoder).
pub(super) fn group_event(kind: GroupKind, line: &[u8]) -> Option<Event<GroupUpdate>> {
    // serde skips the fields it ignores without checking all of them as a JSON tree would
    // (an escape naming no character, bytes that are not UTF-8): such a line goes the
    // general way, which refuses it. Controlplane lines carry no escapes at all.
    let text = std::str::from_utf8(line).ok()?;
    if text.contains('\\') {
        return None;
    }
    let l: Line<'_> = serde_json::from_str(text).ok()?;
    let added = match l.ty {
        "ADDED" => true,
        "MODIFIED" => false,
        _ => return None,
    };
    let o = l.object;
    let patch = match o.kind? {
        k if k == super::Kind::from(kind).name() => false,
        k if k == kind.patch_name() => true,
        _ => return None,
    };
    if patch && added {
        return None;
    }
    let md = o.metadata?;
    let name = md.name.filter(|n| !n.is_empty())?.to_string();
    let uid = md.uid.unwrap_or_default().to_string();
    // The general decoder charges every list element to one budget per object.
    let lists = [&o.members, &o.added, &o.removed];
    let elements: usize = lists
        .iter()
        .filter_map(|l| l.as_ref())
        .flatten()
        .map(|m| 1 + m.ips.as_ref().map_or(0, Vec::len) + m.ports.as_ref().map_or(0, Vec::len))
        .sum();
    if elements > MAX_ELEMENTS {
        return None;
    }
    let members = |l: Option<Vec<Member<'_>>>| -> Option<Vec<GroupMember>> {
        l.unwrap_or_default().into_iter().map(member).collect()
    };
    let update = if patch {
        // A patch's own fields only: a full group's list is not read (nor by the other).
        GroupUpdate::Patch(GroupPatch {
            name,
            uid,
            added: members(o.added)?,
            removed: members(o.removed)?,
        })
    } else {
        GroupUpdate::Full(Group {
            name,
            uid,
            members: members(o.members)?,
        })
    };
    Some(if added {
        Event::Added(update)
    } else {
        Event::Modified(update)
    })
}

fn member(m: Member<'_>) -> Option<GroupMember> {
    let pair = |r: Ref<'_>| {
        (
            r.namespace.unwrap_or_default().to_string(),
            r.name.unwrap_or_default().to_string(),
        )
    };
    // Antrea's key order: pod, externalEntity, service, node.
    let entity = if let Some(r) = m.pod {
        let (namespace, name) = pair(r);
        MemberRef::Pod { namespace, name }
    } else if let Some(r) = m.external_entity {
        let (namespace, name) = pair(r);
        MemberRef::ExternalEntity { namespace, name }
    } else if let Some(r) = m.service {
        let (namespace, name) = pair(r);
        MemberRef::Service { namespace, name }
    } else if let Some(r) = m.node {
        MemberRef::Node { name: pair(r).1 }
    } else {
        MemberRef::Ips
    };
    let ips = m
        .ips
        .unwrap_or_default()
        .into_iter()
        .map(|s| decode_ip(s).ok())
        .collect::<Option<Vec<_>>>()?;
    let ports = m
        .ports
        .unwrap_or_default()
        .into_iter()
        .map(|p| {
            Some(NamedPort {
                port: u16::try_from(p.port.unwrap_or(0)).ok()?,
                name: p.name.unwrap_or_default().to_string(),
                protocol: match p.protocol.unwrap_or_default() {
                    "" => Protocol::Tcp,
                    s => Protocol::parse(s),
                },
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(GroupMember {
        key: MemberKey { entity, ips },
        ports,
    })
}

#[cfg(test)]
mod tests;
