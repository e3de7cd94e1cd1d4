//! The antrea-controller's controlplane API (`controlplane.antrea.io/v1beta2`) as a source
//! of NetworkPolicy for the VM: the three watched kinds, their events, and what is known
//! from them. Antrea paths cited in this module are at antrea-io/antrea `fc70f2bb70`
//! (v2.8.0-dev).
//!
//! An agent watches `networkpolicies`, `appliedtogroups` and `addressgroups` with
//! `fieldSelector=nodeName=<ns>/<en>`, JSON, without LIST. Each watch starts with ADDED for
//! everything in the node's span and one BOOKMARK; that set replaces what was known. Then
//! ADDED/MODIFIED/DELETED, where a group's MODIFIED is a member patch.
//!
//! All pure (like `k8s::watch`: no sockets, no threads, no clock) but `source`:
//! - `event`: one watch line → [`Event`] (with `policy` and `group`, the typed objects;
//!   `ip`, the base64 addresses and CIDRs; `json`, field-path errors and size bounds);
//! - `state`: the [`State`] of the three watches: initial sets, bookmarks, patches,
//!   restarts, "synced", and which policies an event changed;
//! - `source`: the transport, a thread per watch over `k8s::http` feeding one [`State`]
//!   and publishing [`Update`]s; reconnects, backoff, each watch's [`WatchStatus`].
//!
//! Not here: what a policy means as flows (the planner), and status reports back to the
//! controller.

pub mod event;
mod fast;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod group;
pub mod ip;
mod json;
pub mod policy;
pub mod source;
pub mod state;

use std::fmt;

pub use event::{
    Deleted, Event, GroupUpdate, bad_event_identity, decode_group_event,
    decode_group_event_general, decode_policy_event,
};
pub use group::{Group, GroupMember, GroupPatch, MemberKey, MemberRef, NamedPort};
pub use ip::{IpNet, decode_ip};
pub use json::MAX_ELEMENTS;
pub use policy::{
    Direction, IpBlock, NetworkPolicy, Peer, Port, Protocol, Rule, RuleAction, Service, ServiceRef,
    SourceRef,
};
pub use source::{Source, SourceConfig, Update, WatchStatus};
pub use state::{GroupState, Outcome, State};

/// The three watched kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    NetworkPolicy,
    AppliedToGroup,
    AddressGroup,
}

impl Kind {
    /// In the order the watches are started and shown.
    pub const ALL: [Kind; 3] = [
        Kind::NetworkPolicy,
        Kind::AppliedToGroup,
        Kind::AddressGroup,
    ];

    /// The object's `kind`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::NetworkPolicy => "NetworkPolicy",
            Kind::AppliedToGroup => "AppliedToGroup",
            Kind::AddressGroup => "AddressGroup",
        }
    }

    /// The resource name in the watch URL
    /// (`/apis/controlplane.antrea.io/v1beta2/<plural>`).
    pub fn plural(self) -> &'static str {
        match self {
            Kind::NetworkPolicy => "networkpolicies",
            Kind::AppliedToGroup => "appliedtogroups",
            Kind::AddressGroup => "addressgroups",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The two group kinds: a policy's appliedTo groups, and its peers' address groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GroupKind {
    AppliedTo,
    Address,
}

impl GroupKind {
    /// The `kind` of this group's MODIFIED patches.
    pub fn patch_name(self) -> &'static str {
        match self {
            GroupKind::AppliedTo => "AppliedToGroupPatch",
            GroupKind::Address => "AddressGroupPatch",
        }
    }
}

impl From<GroupKind> for Kind {
    fn from(k: GroupKind) -> Kind {
        match k {
            GroupKind::AppliedTo => Kind::AppliedToGroup,
            GroupKind::Address => Kind::AddressGroup,
        }
    }
}
