//! One line of a controlplane watch stream, decoded (the server's side:
//! `pkg/apiserver/storage/ram/watch.go` and the controller's `store/` event builders).
//!
//! `{"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, "object": {...}}`, one compact JSON
//! object per line, with no `resourceVersion` on objects. What differs from a Kubernetes
//! watch (`k8s::watch::decode_event`):
//! - MODIFIED of a group carries a patch (`AddressGroupPatch`/`AppliedToGroupPatch`),
//!   recognised by the object's `kind`; DELETED carries metadata only (a policy's also its
//!   `sourceRef`);
//! - BOOKMARK ends the initial set and its body means nothing: servers have sent
//!   `{"creationTimestamp":null}`, `{}`, `{"resourceVersion":"N"}` and the last with
//!   `annotations`; all are accepted, any `resourceVersion` is kept for logs;
//! - `creationTimestamp` (null before Antrea 2.5, absent since) is never read.
//!
//! Owns the envelope and the mapping of event types. A line that does not decode is an
//! error naming the kind, the object's name when it can be read, and the field.

use serde_json::Value;

use super::group::{Group, GroupPatch, group_value, patch_value};
use super::json::{Budget, Obj, PathError, as_object, field, int, object, string};
use super::policy::{NetworkPolicy, SourceRef, policy_value, source_ref};
use super::{GroupKind, Kind};
use crate::k8s::KubeError;
use crate::k8s::watch::StatusWire;

/// One decoded watch line of a kind whose full object is `T`.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<T> {
    Added(T),
    Modified(T),
    Deleted(Deleted),
    /// The end of the initial set.
    Bookmark {
        resource_version: Option<String>,
    },
    /// An `ERROR` event (a `metav1.Status`), or a bare `Status` line.
    Error(KubeError),
}

/// What a DELETED event says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deleted {
    pub name: String,
    pub uid: String,
    /// NetworkPolicy only.
    pub generation: Option<i64>,
    /// NetworkPolicy only.
    pub source_ref: Option<SourceRef>,
}

/// The body of a group's ADDED or MODIFIED.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupUpdate {
    Full(Group),
    Patch(GroupPatch),
}

/// A line of the `networkpolicies` watch.
pub fn decode_policy_event(line: &[u8]) -> Result<Event<NetworkPolicy>, KubeError> {
    let kind = Kind::NetworkPolicy;
    decode(kind, line, |ty, m, name, b| {
        check_kind(m, &[kind.name()])?;
        let p = policy_value(m, name, b)?;
        Ok(if ty == "ADDED" {
            Event::Added(p)
        } else {
            Event::Modified(p)
        })
    })
}

/// A line of the `addressgroups` or `appliedtogroups` watch.
pub fn decode_group_event(kind: GroupKind, line: &[u8]) -> Result<Event<GroupUpdate>, KubeError> {
    // The plain shape (nearly every line, and all the large ones) without a JSON tree;
    // anything else, errors included, goes the general way below.
    if let Some(ev) = super::fast::group_event(kind, line) {
        return Ok(ev);
    }
    decode_group_event_general(kind, line)
}

/// [`decode_group_event`] through the general decoder, which names what is wrong (public
/// for the fuzz target, which checks that the fast path agrees with it).
pub fn decode_group_event_general(
    kind: GroupKind,
    line: &[u8],
) -> Result<Event<GroupUpdate>, KubeError> {
    let full = Kind::from(kind).name();
    decode(kind.into(), line, |ty, m, name, b| {
        let uid = uid(m)?;
        let patch = match check_kind(m, &[full, kind.patch_name()])? {
            Some(k) => k == kind.patch_name(),
            // No kind (never seen from a real server): a patch's fields make it a patch.
            None => field(m, "groupMembers").is_none() && ty == "MODIFIED",
        };
        if patch && ty == "ADDED" {
            return Err(PathError::new(format!("{} on ADDED", kind.patch_name())).key("kind"));
        }
        let u = if patch {
            GroupUpdate::Patch(patch_value(m, name, uid, b)?)
        } else {
            GroupUpdate::Full(group_value(m, name, uid, b)?)
        };
        Ok(if ty == "ADDED" {
            Event::Added(u)
        } else {
            Event::Modified(u)
        })
    })
}

/// The type of a line that did not decode and the name of its object, when those parts of
/// it are readable: enough for the state to know what it may have missed.
pub fn bad_event_identity(line: &[u8]) -> (Option<String>, Option<String>) {
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return (None, None);
    };
    let ty = v.get("type").and_then(Value::as_str).map(str::to_string);
    let name = v
        .pointer("/object/metadata/name")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    (ty, name)
}

/// Decode a line of `kind`'s watch; `body` decodes the object of ADDED/MODIFIED (given the
/// event type, the object, its name and the object's budget).
fn decode<T>(
    kind: Kind,
    line: &[u8],
    body: impl Fn(&str, &Obj, String, &mut Budget) -> Result<Event<T>, PathError>,
) -> Result<Event<T>, KubeError> {
    let bad = |what: String, detail: String| KubeError::Decode { what, detail };
    let event = || format!("{} watch event", kind.name());
    let v: Value = serde_json::from_slice(line).map_err(|e| bad(event(), e.to_string()))?;
    let top = v
        .as_object()
        .ok_or_else(|| bad(event(), "not a JSON object".to_string()))?;
    let ty = match top.get("type") {
        Some(Value::String(t)) => t.as_str(),
        None if top.get("kind").and_then(Value::as_str) == Some("Status") => {
            return Ok(Event::Error(status(&v).map_err(|d| bad(event(), d))?));
        }
        None => return Err(bad(event(), "no \"type\"".to_string())),
        Some(other) => {
            return Err(bad(
                event(),
                format!("type: expected a string, found {other}"),
            ));
        }
    };
    let object = top.get("object").unwrap_or(&Value::Null);
    match ty {
        "BOOKMARK" => {
            return Ok(Event::Bookmark {
                resource_version: object
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            });
        }
        "ERROR" => {
            return status(object)
                .map(Event::Error)
                .map_err(|d| bad(event(), format!("object: {d}")));
        }
        "ADDED" | "MODIFIED" | "DELETED" => {}
        other => return Err(bad(event(), format!("unknown event type {other:?}"))),
    }
    let m = as_object(object).map_err(|e| bad(event(), e.key("object").to_string()))?;
    // The object is named in every error from here on; its name is the first thing read.
    let name = metadata_name(m).map_err(|e| bad(event(), e.key("object").to_string()))?;
    let what = || format!("{} {name}", kind.name());
    if ty == "DELETED" {
        return deleted(kind, m, name.clone())
            .map(Event::Deleted)
            .map_err(|e| bad(what(), e.to_string()));
    }
    body(ty, m, name.clone(), &mut Budget::new()).map_err(|e| bad(what(), e.to_string()))
}

/// `metadata.name`, required.
fn metadata_name(m: &Obj) -> Result<String, PathError> {
    let md = object(m, "metadata")?.ok_or_else(|| PathError::new("required").key("metadata"))?;
    super::json::required(md, "name").map_err(|e| e.key("metadata"))
}

fn uid(m: &Obj) -> Result<String, PathError> {
    match object(m, "metadata")? {
        Some(md) => string(md, "uid").map_err(|e| e.key("metadata")),
        None => Ok(String::new()),
    }
}

fn deleted(kind: Kind, m: &Obj, name: String) -> Result<Deleted, PathError> {
    let policy = kind == Kind::NetworkPolicy;
    let generation = match (policy, object(m, "metadata")?) {
        (true, Some(md)) => {
            int(md, "generation", i64::MIN, i64::MAX).map_err(|e| e.key("metadata"))?
        }
        _ => None,
    };
    Ok(Deleted {
        name,
        uid: uid(m)?,
        generation,
        source_ref: if policy { source_ref(m)? } else { None },
    })
}

/// The object's `kind`, which must be one of `allowed` when present.
fn check_kind<'a>(m: &'a Obj, allowed: &[&str]) -> Result<Option<&'a str>, PathError> {
    match super::json::str_opt(m, "kind")? {
        None => Ok(None),
        Some(k) if allowed.contains(&k) => Ok(Some(k)),
        Some(k) => {
            Err(PathError::new(format!("{k:?} is not {}", allowed.join(" or "))).key("kind"))
        }
    }
}

/// A `metav1.Status` as the error it reports.
fn status(v: &Value) -> Result<KubeError, String> {
    let s: StatusWire = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    Ok(s.into_error("watch"))
}

#[cfg(test)]
mod tests;
