//! What is known from the three controlplane watches: the pure state machine behind them
//! (the agent's side: `pkg/agent/controller/networkpolicy/networkpolicy_controller.go`'s
//! watch loop and `cache.go`'s patch application). The caller decodes lines (`event`)
//! and feeds them here with [`State::on_policy_event`] / [`State::on_group_event`]; each
//! call says what a policy can see of it ([`Outcome`]).
//!
//! Per watch:
//! ```text
//!   on_watch_start ──► Initial{pending} ── BOOKMARK: pending replaces known ──► Live
//!        ▲               │ ADDED/MODIFIED/DELETED                              │ events apply
//!        │               ▼ go to pending (known untouched)                     ▼ to known
//!        └── Restarting ◄── patch of an unknown group, ERROR, unreadable patch ─┘
//!            (the rest of the old stream is ignored; the caller opens a new watch)
//! ```
//! A reconnect is a new watch and a full resync: what the new initial set lacks is gone
//! at its bookmark, not before, so a reconnect never shows a moment with less policy.
//! Nothing is reported as changed until all three watches have had their first bookmark
//! ([`State::synced`]); the one that completes them reports [`Outcome::Synced`].
//!
//! Group members are keyed as Antrea keys them ([`MemberKey`]: reference plus IPs), and
//! a patch is insert(added) then delete(removed), so an IP change is a remove and an add
//! of the same member. Owns none of the I/O, and not what a policy becomes as flows: it
//! answers which policies to re-plan, and the groups' members to plan with.

use std::collections::{BTreeMap, BTreeSet};
use std::mem;
use std::net::IpAddr;

use super::event::{Event, GroupUpdate};
use super::group::{Group, GroupPatch, MemberKey, NamedPort};
use super::policy::NetworkPolicy;
use super::{GroupKind, Kind};

/// A group as known: its members by key.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupState {
    pub uid: String,
    pub members: BTreeMap<MemberKey, Vec<NamedPort>>,
}

impl GroupState {
    fn from_group(g: Group) -> (String, GroupState) {
        let members = g.members.into_iter().map(|m| (m.key, m.ports)).collect();
        (
            g.name,
            GroupState {
                uid: g.uid,
                members,
            },
        )
    }

    /// Insert `added`, then delete `removed` (the agent's order, `cache.go`). Whether the
    /// members changed.
    fn patch(&mut self, p: GroupPatch) -> bool {
        let mut changed = false;
        for m in p.added {
            changed |= self.members.get(&m.key) != Some(&m.ports);
            self.members.insert(m.key, m.ports);
        }
        for m in p.removed {
            changed |= self.members.remove(&m.key).is_some();
        }
        changed
    }

    /// Every member's IPs, once each.
    pub fn ips(&self) -> BTreeSet<IpAddr> {
        self.members
            .keys()
            .flat_map(|k| k.ips.iter().copied())
            .collect()
    }
}

/// What one event did, as far as policies can see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing a policy can see: an event of an initial set, a no-op, or anything before
    /// [`State::synced`].
    Unchanged,
    /// Re-plan these policies (by name): added, changed or deleted ones, and those naming
    /// a group whose members changed.
    Changed(BTreeSet<String>),
    /// The three watches have now all had their first bookmark: plan every policy.
    Synced,
    /// Open this watch again (after the caller's backoff) and call
    /// [`State::on_watch_start`]; until then its events are ignored. Why, for the log.
    Restart(String),
}

/// Where a watch is.
#[derive(Debug)]
enum Phase<T> {
    /// Before this stream's bookmark. `keep`: names whose events could not be read; their
    /// known version survives the replace ("unreadable" is not "deleted").
    Initial {
        pending: BTreeMap<String, T>,
        keep: BTreeSet<String>,
    },
    Live,
    Restarting,
}

/// What one applied change did to a watch.
enum Applied<T> {
    /// Ignored (restarting) or only the pending set changed.
    Quiet,
    /// The known set changed; the value it replaced or removed.
    Known(Option<T>),
}

/// One watch's objects.
#[derive(Debug)]
struct Watch<T> {
    known: BTreeMap<String, T>,
    phase: Phase<T>,
    /// This kind has had a first bookmark (on any stream).
    bookmarked: bool,
}

impl<T: PartialEq> Watch<T> {
    fn new() -> Watch<T> {
        Watch {
            known: BTreeMap::new(),
            phase: Phase::Initial {
                pending: BTreeMap::new(),
                keep: BTreeSet::new(),
            },
            bookmarked: false,
        }
    }

    /// The map events go to now, and whether it is the known one.
    fn target(&mut self) -> Option<(&mut BTreeMap<String, T>, bool)> {
        match &mut self.phase {
            Phase::Initial { pending, .. } => Some((pending, false)),
            Phase::Live => Some((&mut self.known, true)),
            Phase::Restarting => None,
        }
    }

    fn put(&mut self, name: String, v: T) -> Applied<T> {
        match self.target() {
            Some((map, true)) if map.get(&name) != Some(&v) => Applied::Known(map.insert(name, v)),
            Some((map, false)) => {
                map.insert(name, v);
                Applied::Quiet
            }
            _ => Applied::Quiet,
        }
    }

    fn remove(&mut self, name: &str) -> Applied<T> {
        match self.target() {
            Some((map, true)) => match map.remove(name) {
                Some(old) => Applied::Known(Some(old)),
                None => Applied::Quiet,
            },
            Some((map, false)) => {
                map.remove(name);
                Applied::Quiet
            }
            None => Applied::Quiet,
        }
    }

    /// The stream's bookmark: the initial set replaces what was known. The names that
    /// differ, or `None` when this was not the first bookmark of the stream.
    fn bookmark(&mut self) -> Option<BTreeSet<String>> {
        if !matches!(self.phase, Phase::Initial { .. }) {
            return None;
        }
        let Phase::Initial { mut pending, keep } = mem::replace(&mut self.phase, Phase::Live)
        else {
            return None;
        };
        // Moved, not copied (a group can be large); so they are left out of the diff.
        let mut carried = BTreeSet::new();
        for k in keep {
            if pending.contains_key(&k) {
                continue;
            }
            if let Some(old) = self.known.remove(&k) {
                pending.insert(k.clone(), old);
                carried.insert(k);
            }
        }
        let old = mem::replace(&mut self.known, pending);
        self.bookmarked = true;
        let mut diff: BTreeSet<String> = old
            .iter()
            .filter(|(k, v)| self.known.get(*k) != Some(v))
            .map(|(k, _)| k.clone())
            .collect();
        diff.extend(
            self.known
                .keys()
                .filter(|k| !old.contains_key(*k) && !carried.contains(*k))
                .cloned(),
        );
        Some(diff)
    }

    fn start(&mut self) {
        self.phase = Phase::Initial {
            pending: BTreeMap::new(),
            keep: BTreeSet::new(),
        };
    }

    fn restart(&mut self) {
        self.phase = Phase::Restarting;
    }

    /// An event about `name` could not be read: in an initial set, keep the known version.
    fn keep(&mut self, name: &str) {
        if let Phase::Initial { keep, .. } = &mut self.phase {
            keep.insert(name.to_string());
        }
    }
}

/// What is known from the three watches.
#[derive(Debug)]
pub struct State {
    policies: Watch<NetworkPolicy>,
    applied_to: Watch<GroupState>,
    address: Watch<GroupState>,
    /// Group → the known policies that name it.
    refs: BTreeMap<(GroupKind, String), BTreeSet<String>>,
}

impl Default for State {
    fn default() -> State {
        State::new()
    }
}

impl State {
    /// Nothing known; every watch is in its (first) initial set.
    pub fn new() -> State {
        State {
            policies: Watch::new(),
            applied_to: Watch::new(),
            address: Watch::new(),
            refs: BTreeMap::new(),
        }
    }

    /// All three watches have had their first bookmark: what is known may be acted on.
    pub fn synced(&self) -> bool {
        self.policies.bookmarked && self.applied_to.bookmarked && self.address.bookmarked
    }

    /// Whether `kind`'s watch has had its first bookmark.
    pub fn has_bookmarked(&self, kind: Kind) -> bool {
        match kind {
            Kind::NetworkPolicy => self.policies.bookmarked,
            Kind::AppliedToGroup => self.applied_to.bookmarked,
            Kind::AddressGroup => self.address.bookmarked,
        }
    }

    /// A new watch of `kind` is open (the first, or a reconnect): its events form a new
    /// initial set until its bookmark.
    pub fn on_watch_start(&mut self, kind: Kind) {
        match kind {
            Kind::NetworkPolicy => self.policies.start(),
            Kind::AppliedToGroup => self.applied_to.start(),
            Kind::AddressGroup => self.address.start(),
        }
    }

    pub fn on_policy_event(&mut self, ev: Event<NetworkPolicy>) -> Outcome {
        match ev {
            Event::Added(p) | Event::Modified(p) => {
                let name = p.name.clone();
                match self.policies.put(name.clone(), p) {
                    Applied::Quiet => Outcome::Unchanged,
                    Applied::Known(old) => {
                        if let Some(old) = old {
                            index(&mut self.refs, &old, false);
                        }
                        if let Some(new) = self.policies.known.get(&name) {
                            index(&mut self.refs, new, true);
                        }
                        self.visible(BTreeSet::from([name]))
                    }
                }
            }
            Event::Deleted(d) => match self.policies.remove(&d.name) {
                Applied::Quiet => Outcome::Unchanged,
                Applied::Known(old) => {
                    if let Some(old) = old {
                        index(&mut self.refs, &old, false);
                    }
                    self.visible(BTreeSet::from([d.name]))
                }
            },
            Event::Bookmark { .. } => {
                let was = self.synced();
                let Some(diff) = self.policies.bookmark() else {
                    return Outcome::Unchanged;
                };
                self.refs.clear();
                for p in self.policies.known.values() {
                    index(&mut self.refs, p, true);
                }
                self.after_bookmark(was, diff)
            }
            Event::Error(e) => {
                self.policies.restart();
                Outcome::Restart(format!("NetworkPolicy watch: {e}"))
            }
        }
    }

    pub fn on_group_event(&mut self, kind: GroupKind, ev: Event<GroupUpdate>) -> Outcome {
        let changed = match ev {
            Event::Added(GroupUpdate::Full(g)) | Event::Modified(GroupUpdate::Full(g)) => {
                let (name, g) = GroupState::from_group(g);
                match self.groups_mut(kind).put(name.clone(), g) {
                    Applied::Quiet => None,
                    Applied::Known(_) => Some(name),
                }
            }
            Event::Added(GroupUpdate::Patch(p)) | Event::Modified(GroupUpdate::Patch(p)) => {
                let w = self.groups_mut(kind);
                let Some((map, live)) = w.target() else {
                    return Outcome::Unchanged;
                };
                let name = p.name.clone();
                let Some(g) = map.get_mut(&name) else {
                    // The agent restarts the watch too (a full resync): applying members to
                    // nothing would leave the group wrong until the next one.
                    w.restart();
                    return Outcome::Restart(format!(
                        "{} for unknown {} {name}",
                        kind.patch_name(),
                        Kind::from(kind)
                    ));
                };
                (g.patch(p) && live).then_some(name)
            }
            Event::Deleted(d) => match self.groups_mut(kind).remove(&d.name) {
                Applied::Quiet => None,
                Applied::Known(_) => Some(d.name),
            },
            Event::Bookmark { .. } => {
                let was = self.synced();
                let Some(diff) = self.groups_mut(kind).bookmark() else {
                    return Outcome::Unchanged;
                };
                let names = diff.iter().flat_map(|g| self.users(kind, g)).collect();
                return self.after_bookmark(was, names);
            }
            Event::Error(e) => {
                self.groups_mut(kind).restart();
                return Outcome::Restart(format!("{} watch: {e}", Kind::from(kind)));
            }
        };
        match changed {
            Some(g) => self.visible(self.users(kind, &g).collect()),
            None => Outcome::Unchanged,
        }
    }

    /// A line of `kind`'s watch that did not decode, with what could be read of it
    /// (`event::bad_event_identity`). The object's known version stays, also across an
    /// initial set's replace; but a group event that may have been a patch leaves that
    /// group's members unknown, so that watch restarts.
    pub fn on_undecodable(
        &mut self,
        kind: Kind,
        event_type: Option<&str>,
        name: Option<&str>,
    ) -> Outcome {
        let group = match kind {
            Kind::NetworkPolicy => None,
            Kind::AppliedToGroup => Some(GroupKind::AppliedTo),
            Kind::AddressGroup => Some(GroupKind::Address),
        };
        let maybe_patch = !matches!(event_type, Some("ADDED" | "DELETED"));
        match (group, name) {
            (Some(g), n) if maybe_patch || n.is_none() => {
                self.groups_mut(g).restart();
                Outcome::Restart(format!(
                    "{kind} {}: an event that did not decode may have changed its members",
                    n.unwrap_or("(name unreadable)")
                ))
            }
            (Some(g), Some(n)) => {
                self.groups_mut(g).keep(n);
                Outcome::Unchanged
            }
            (None, Some(n)) => {
                self.policies.keep(n);
                Outcome::Unchanged
            }
            (None, None) | (Some(_), None) => Outcome::Unchanged,
        }
    }

    pub fn policy(&self, name: &str) -> Option<&NetworkPolicy> {
        self.policies.known.get(name)
    }

    /// Every known policy, by name.
    pub fn policies(&self) -> impl Iterator<Item = &NetworkPolicy> {
        self.policies.known.values()
    }

    pub fn group(&self, kind: GroupKind, name: &str) -> Option<&GroupState> {
        match kind {
            GroupKind::AppliedTo => self.applied_to.known.get(name),
            GroupKind::Address => self.address.known.get(name),
        }
    }

    /// The IPs of an address group's members; `None` while the group is unknown.
    pub fn address_group_ips(&self, name: &str) -> Option<BTreeSet<IpAddr>> {
        self.group(GroupKind::Address, name).map(GroupState::ips)
    }

    /// Whether the policy applies here: one of its appliedTo groups (its own or a rule's)
    /// is known and has a member. The controller sends only policies whose span holds
    /// this VM, so this is false only while a group is missing or emptied.
    pub fn applies(&self, p: &NetworkPolicy) -> bool {
        p.groups().any(|(k, g)| {
            k == GroupKind::AppliedTo && self.group(k, g).is_some_and(|g| !g.members.is_empty())
        })
    }

    /// The policies that [`State::applies`] holds for, by name.
    pub fn applied_policies(&self) -> impl Iterator<Item = &NetworkPolicy> {
        self.policies().filter(|p| self.applies(p))
    }

    /// The groups a policy names that are not known (yet: the three streams are not
    /// ordered with each other), once each. A rule naming one is incomplete.
    pub fn missing_groups<'a>(&self, p: &'a NetworkPolicy) -> BTreeSet<(GroupKind, &'a str)> {
        p.groups()
            .filter(|(k, g)| self.group(*k, g).is_none())
            .collect()
    }

    fn groups_mut(&mut self, kind: GroupKind) -> &mut Watch<GroupState> {
        match kind {
            GroupKind::AppliedTo => &mut self.applied_to,
            GroupKind::Address => &mut self.address,
        }
    }

    /// The known policies naming group `name`.
    fn users<'s>(&'s self, kind: GroupKind, name: &str) -> impl Iterator<Item = String> + use<'s> {
        self.refs
            .get(&(kind, name.to_string()))
            .into_iter()
            .flatten()
            .cloned()
    }

    /// `names` as an outcome: nothing is visible before sync.
    fn visible(&self, names: BTreeSet<String>) -> Outcome {
        if self.synced() && !names.is_empty() {
            Outcome::Changed(names)
        } else {
            Outcome::Unchanged
        }
    }

    fn after_bookmark(&self, was_synced: bool, names: BTreeSet<String>) -> Outcome {
        if !was_synced && self.synced() {
            Outcome::Synced
        } else {
            self.visible(names)
        }
    }
}

/// Add (or remove) `p`'s name under every group it names.
fn index(refs: &mut BTreeMap<(GroupKind, String), BTreeSet<String>>, p: &NetworkPolicy, add: bool) {
    for (k, g) in p.groups() {
        let key = (k, g.to_string());
        if add {
            refs.entry(key).or_default().insert(p.name.clone());
        } else if let Some(users) = refs.get_mut(&key) {
            users.remove(&p.name);
            if users.is_empty() {
                refs.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests;
