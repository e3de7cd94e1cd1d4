//! The compiler: every NetworkPolicy flow of the VM from what is known of the
//! controlplane ([`State`]), as one pure function of the state and the compiler's own
//! history ([`Compiler::compile`]).
//!
//! Owns which rules apply to the VM, what each rule's peers and services resolve to,
//! which rules can be realized (and why not), and keeping conjunction ids and priorities
//! stable across calls, so that a change to one policy rewrites that policy's flows only.
//! Not the flows' shapes (`flows`), not applying them, and no I/O or clocks.
//!
//! Two ways to call it: [`Compiler::compile`] gives every flow (what `tether plan` and the
//! tests read), [`Compiler::update`] only what changed since its last call ([`Changes`]),
//! given which policies the watches changed ([`Scope`]). `update` rebuilds the rules of
//! those policies only, and a rule whose only change is its peers' addresses (a member of
//! its AddressGroup came or went) becomes a patch of those addresses' flows: one member of
//! a 10,000-member group costs one flow, not 10,000 (docs/networkpolicy.md#realization).
//!
//! A rule applies when its policy applies ([`State::applies`]) and, if it has its own
//! appliedTo groups, one of those is known and has members; otherwise the policy's own
//! appliedTo groups decide. Rules that do not apply are left out altogether, so their
//! conjunction ids are freed.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;

use super::conj::ConjAllocator;
use super::flows::{
    Addresses, BASE_OWNER, RuleSpec, RuleTables, VmPorts, base_flows, peer_flows, rule_flows,
    rule_tables,
};
use super::priority::{PriorityRange, RuleOrder, assign, range_for, tier};
use super::rule::{PeerMatch, Services, peer_match, services, skipped_services};
use crate::controlplane::{
    Direction, GroupKind, IpNet, NetworkPolicy, Peer, Rule, RuleAction, State,
};
use crate::openflow::{Category, Flow, FlowChange, Owner};

/// A rule's identity across calls: its policy's UID and its position in the policy's
/// rules. A policy without a UID (the controller always sends one, equal to its name) is
/// keyed by its name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleKey {
    pub policy_uid: String,
    pub index: usize,
}

/// Whether a rule's flows do what the rule says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuleStatus {
    Realizable,
    /// Installed, but part of the rule is left out (why, naming the fields): it matches
    /// less than it says.
    Partial(String),
    /// No flows: the rule matches nothing on this VM, or cannot be expressed (why, naming
    /// the fields).
    NotRealizable(String),
}

/// One rule as compiled, without its flows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleInfo {
    pub key: RuleKey,
    /// The policy's (controlplane) name.
    pub policy: String,
    pub policy_uid: String,
    pub rule_name: String,
    pub index: usize,
    pub direction: Direction,
    pub action: RuleAction,
    pub conj_id: u32,
    /// The table of its match flows, and its priority there (0 when the table had no
    /// priority left for it: see its status).
    pub table: u8,
    pub priority: u16,
    /// Category NetworkPolicy, object = `conj_id`.
    pub owner: Owner,
    /// How many flows it has.
    pub flows: usize,
    pub status: RuleStatus,
}

/// One rule as compiled, with its flows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompiledRule {
    pub info: RuleInfo,
    /// In the order of `flows::rule_flows`; empty unless the rule is realizable (in part).
    pub flows: Vec<Flow>,
}

/// A compiled rule reads as its [`RuleInfo`] (`rule.status`, `rule.conj_id`): the flows
/// are the only other field.
impl std::ops::Deref for CompiledRule {
    type Target = RuleInfo;
    fn deref(&self) -> &RuleInfo {
        &self.info
    }
}

/// Every NetworkPolicy flow of the VM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compiled {
    /// `flows::base_flows`, owned by `flows::BASE_OWNER`.
    pub base: Vec<Flow>,
    /// The rules that apply, by key.
    pub rules: Vec<CompiledRule>,
}

/// Which policies (controlplane names) changed since the compiler's last
/// [`Compiler::update`], as the watches say (`controlplane::Outcome`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Everything may have changed (the first sync, a resync).
    All,
    Policies(BTreeSet<String>),
}

impl Scope {
    /// Nothing changed.
    pub fn none() -> Scope {
        Scope::Policies(BTreeSet::new())
    }

    /// This scope and `other`.
    pub fn add(&mut self, other: Scope) {
        match (&mut *self, other) {
            (Scope::All, _) => {}
            (_, Scope::All) => *self = Scope::All,
            (Scope::Policies(a), Scope::Policies(b)) => a.extend(b),
        }
    }

    fn covers(&self, policy: &str) -> bool {
        match self {
            Scope::All => true,
            Scope::Policies(p) => p.contains(policy),
        }
    }
}

/// What [`Compiler::update`] found changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Changes {
    /// Every rule that applies, by key (as [`Compiled::rules`] without the flows).
    pub rules: Vec<RuleInfo>,
    /// The owners whose flows change, in owner order: the base flows' owner when the ports
    /// changed (or on the first call), then each rule's. Owners of rules that are gone are
    /// not listed: the caller removes the owners it holds that no rule has.
    pub owners: Vec<(Owner, FlowChange)>,
}

/// Why nothing could be compiled; the caller keeps what is installed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompileError {
    /// Every conjunction id is held by a rule: only possible with ~2³² rules.
    ConjIdsExhausted(String),
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompileError::ConjIdsExhausted(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for CompileError {}

/// Every owner's flows, for a caller that applies them in one bundle: the base flows
/// under object 0, then each rule under its conjunction id, in id order. A rule's owner
/// with no flows is listed (so what it had is removed); owners of rules that are gone are
/// not, so the caller removes the owners it had that are not listed.
pub fn owners_of(c: &Compiled) -> Vec<(Owner, Vec<Flow>)> {
    let mut rules: Vec<(Owner, Vec<Flow>)> =
        c.rules.iter().map(|r| (r.owner, r.flows.clone())).collect();
    rules.sort_by_key(|(o, _)| *o);
    let mut out = vec![(BASE_OWNER, c.base.clone())];
    out.extend(rules);
    out
}

/// Conjunction ids and priorities from one call to the next, and what each rule was
/// last built from (for [`Compiler::update`]).
#[derive(Clone, Debug)]
pub struct Compiler {
    conj: ConjAllocator<RuleKey>,
    /// The priorities of the last call.
    priorities: Numbering,
    built: BTreeMap<RuleKey, Built>,
    /// The ports the base flows were last given for.
    base_for: Option<VmPorts>,
}

/// Per rule table, each rule's priority.
type Numbering = BTreeMap<u8, BTreeMap<RuleKey, u16>>;

/// What a rule's flows were last built from, and what they came to.
#[derive(Clone, Debug)]
struct Built {
    frame: Frame,
    /// Its peers' addresses, when the rule was realized (has flows).
    peers: Option<Addresses>,
    info: RuleInfo,
}

/// Everything a rule's flows depend on but its peers' addresses.
#[derive(Clone, Debug, PartialEq)]
struct Frame {
    rule: Rule,
    conj_id: u32,
    tables: RuleTables,
    priority: Option<u16>,
    ports: VmPorts,
}

impl Default for Compiler {
    fn default() -> Compiler {
        Compiler::new()
    }
}

/// One applying rule, before compiling.
struct Current<'s> {
    key: RuleKey,
    policy: &'s NetworkPolicy,
    rule: &'s Rule,
    baseline: bool,
}

/// One rule of a call: what it is, and its flows or their change.
struct Step {
    info: RuleInfo,
    change: Option<FlowChange>,
}

impl Compiler {
    pub fn new() -> Compiler {
        Compiler {
            conj: ConjAllocator::new(),
            priorities: BTreeMap::new(),
            built: BTreeMap::new(),
            base_for: None,
        }
    }

    /// Every flow for the rules of `state` that apply to the VM on `ports`. Same state
    /// and same history give the same result. Changes the history (ids, priorities) only
    /// when it succeeds.
    pub fn compile(&mut self, state: &State, ports: VmPorts) -> Result<Compiled, CompileError> {
        let steps = self.steps(state, ports, &Scope::All, true)?;
        let rules = steps
            .into_iter()
            .map(|s| {
                let flows = match s.change {
                    Some(FlowChange::Replace(f)) => f,
                    // A full call builds every rule.
                    _ => Vec::new(),
                };
                CompiledRule {
                    info: s.info,
                    flows,
                }
            })
            .collect();
        self.base_for = Some(ports);
        Ok(Compiled {
            base: base_flows(ports),
            rules,
        })
    }

    /// What changed since the last call (of either kind), given that only the policies in
    /// `scope` may have: the base flows when the ports changed, every rebuilt rule's flows,
    /// and a patch for a rule whose peers' addresses are all that changed. After
    /// [`Compiler::forget`], everything is given whole again.
    pub fn update(
        &mut self,
        state: &State,
        ports: VmPorts,
        scope: &Scope,
    ) -> Result<Changes, CompileError> {
        let steps = self.steps(state, ports, scope, false)?;
        let mut owners = Vec::new();
        if self.base_for != Some(ports) {
            owners.push((BASE_OWNER, FlowChange::Replace(base_flows(ports))));
            self.base_for = Some(ports);
        }
        let mut rules = Vec::with_capacity(steps.len());
        let mut changed: Vec<(Owner, FlowChange)> = Vec::new();
        for s in steps {
            if let Some(c) = s.change {
                changed.push((s.info.owner, c));
            }
            rules.push(s.info);
        }
        changed.sort_by_key(|(o, _)| *o);
        owners.extend(changed);
        Ok(Changes { rules, owners })
    }

    /// Forget what the flows were built from (the switch may not hold them: a change was
    /// refused): the next [`Compiler::update`] gives every owner's flows whole. Ids and
    /// priorities stay.
    pub fn forget(&mut self) {
        self.built.clear();
        self.base_for = None;
    }

    /// Each applying rule, numbered, with its flows (`full`, or when it changed) or the
    /// change to them.
    fn steps(
        &mut self,
        state: &State,
        ports: VmPorts,
        scope: &Scope,
        full: bool,
    ) -> Result<Vec<Step>, CompileError> {
        let current = applying_rules(state);
        let keys: BTreeSet<RuleKey> = current.iter().map(|c| c.key.clone()).collect();
        let ids = self
            .conj
            .recompute(&keys)
            .map_err(CompileError::ConjIdsExhausted)?;
        let (priorities, overflow) = self.number(&current);
        let mut built = BTreeMap::new();
        let mut steps = Vec::with_capacity(current.len());
        for c in &current {
            // Every key was just given an id; a missing one would be an allocator bug.
            let Some(&conj_id) = ids.get(&c.key) else {
                continue;
            };
            let tables = rule_tables(c.rule.direction, c.baseline);
            let frame = Frame {
                rule: c.rule.clone(),
                conj_id,
                tables,
                priority: priorities
                    .get(&tables.rule)
                    .and_then(|t| t.get(&c.key))
                    .copied(),
                ports,
            };
            let prev = self.built.remove(&c.key).filter(|b| b.frame == frame);
            let (b, change) = match prev {
                Some(b) if !full && !scope.covers(&c.policy.name) => (b, None),
                prev => build(state, c, frame, overflow.get(&tables.rule), prev, full),
            };
            steps.push(Step {
                info: b.info.clone(),
                change,
            });
            built.insert(c.key.clone(), b);
        }
        self.built = built;
        self.priorities = priorities;
        Ok(steps)
    }

    /// Priorities per rule table, from the last call's; and for each table that ran out,
    /// why its last rules have none.
    fn number(&self, current: &[Current<'_>]) -> (Numbering, BTreeMap<u8, String>) {
        // A table holds one tier kind only (baseline or not), so one range.
        let mut by_table: BTreeMap<u8, (PriorityRange, Vec<(RuleKey, RuleOrder)>)> =
            BTreeMap::new();
        for c in current {
            let t = rule_tables(c.rule.direction, c.baseline).rule;
            let o = order(c);
            by_table
                .entry(t)
                .or_insert_with(|| (range_for(o.tier_priority), Vec::new()))
                .1
                .push((c.key.clone(), o));
        }
        let (mut out, mut overflow) = (BTreeMap::new(), BTreeMap::new());
        let none = BTreeMap::new();
        for (t, (range, mut rules)) in by_table {
            rules.sort_by(|a, b| a.1.cmp_order(&b.1).then_with(|| a.0.cmp(&b.0)));
            if rules.len() > range.capacity() {
                overflow.insert(
                    t,
                    format!(
                        "table {t} holds {} rules but has {} priorities ({}..={}); this \
                         rule is among the last in order",
                        rules.len(),
                        range.capacity(),
                        range.bottom,
                        range.top
                    ),
                );
                rules.truncate(range.capacity());
            }
            match assign(&rules, range, self.priorities.get(&t).unwrap_or(&none)) {
                Ok(v) => {
                    out.insert(t, v.into_iter().collect());
                }
                // Keys are unique and the count fits, so this cannot happen; the rules
                // then get no priority and say why.
                Err(e) => {
                    overflow.insert(t, e);
                }
            }
        }
        (out, overflow)
    }
}

/// Where a rule sorts: its tier (none: application), its policy's priority (none: after
/// every policy of the tier, as a K8s NetworkPolicy would; they cannot select a VM), its
/// index in the policy, its policy.
fn order(c: &Current<'_>) -> RuleOrder {
    RuleOrder {
        tier_priority: c.policy.tier_priority.unwrap_or(tier::APPLICATION),
        policy_priority: c.policy.priority.unwrap_or(f64::INFINITY),
        rule_index: c.key.index,
        policy_uid: c.key.policy_uid.clone(),
    }
}

/// The rules that apply, by key. Two policies with one UID (the controller never sends
/// that) would share keys: the second one's rules are left out.
fn applying_rules(state: &State) -> Vec<Current<'_>> {
    let mut out: BTreeMap<RuleKey, Current<'_>> = BTreeMap::new();
    for p in state.applied_policies() {
        let uid = if p.uid.is_empty() { &p.name } else { &p.uid };
        for (index, rule) in p.rules.iter().enumerate() {
            let groups = if rule.applied_to_groups.is_empty() {
                &p.applied_to_groups
            } else {
                &rule.applied_to_groups
            };
            let applies = groups.iter().any(|g| {
                state
                    .group(GroupKind::AppliedTo, g)
                    .is_some_and(|g| !g.members.is_empty())
            });
            let key = RuleKey {
                policy_uid: uid.clone(),
                index,
            };
            if applies && !out.contains_key(&key) {
                out.insert(
                    key.clone(),
                    Current {
                        key,
                        policy: p,
                        rule,
                        baseline: p.tier_priority == Some(tier::BASELINE),
                    },
                );
            }
        }
    }
    out.into_values().collect()
}

/// A rule built against its previous build `prev` (same frame, or None): its flows
/// whole (`full`, a new or reframed rule, peers that were or are "any"), a patch of its
/// peer flows when only its peers' addresses changed, or no change.
fn build(
    state: &State,
    c: &Current<'_>,
    frame: Frame,
    overflow: Option<&String>,
    prev: Option<Built>,
    full: bool,
) -> (Built, Option<FlowChange>) {
    let parts = match frame.priority {
        Some(_) => parts(state, c.rule),
        None => Err(overflow.cloned().unwrap_or_default()),
    };
    let status = match &parts {
        Ok(p) if p.notes.is_empty() => RuleStatus::Realizable,
        Ok(p) => RuleStatus::Partial(p.notes.join("; ")),
        Err(why) => RuleStatus::NotRealizable(why.clone()),
    };
    let prev = prev.filter(|_| !full);
    let (flows, change, peers) = match parts {
        Ok(p) => {
            let spec = RuleSpec {
                direction: c.rule.direction,
                action: c.rule.action,
                conj_id: frame.conj_id,
                tables: frame.tables,
                priority: frame.priority.unwrap_or(0),
                peer: &p.peer,
                services: &p.services,
                ports: frame.ports,
                log: c.rule.enable_logging,
            };
            let before = prev
                .as_ref()
                .and_then(|b| Some((b.peers.as_ref()?, b.info.flows)));
            let (flows, change) = match (before, &p.peer) {
                // Same frame, so same services: the same flows.
                (Some((Addresses::Any, n)), Addresses::Any) => (n, None),
                (Some((Addresses::Only(old), n)), Addresses::Only(new)) => {
                    let (added, removed) = net_diff(old, new);
                    let change =
                        (!added.is_empty() || !removed.is_empty()).then(|| FlowChange::Patch {
                            add: peer_flows(&spec, added.iter()),
                            remove: peer_flows(&spec, removed.iter())
                                .into_iter()
                                .map(|f| f.key)
                                .collect(),
                        });
                    (n + added.len() - removed.len(), change)
                }
                _ => {
                    let flows = rule_flows(&spec);
                    (flows.len(), Some(FlowChange::Replace(flows)))
                }
            };
            (flows, change, Some(p.peer))
        }
        // Nothing to remove when the last build had no flows either.
        Err(_) if prev.as_ref().is_some_and(|b| b.info.flows == 0) => (0, None, None),
        Err(_) => (0, Some(FlowChange::Replace(Vec::new())), None),
    };
    let info = RuleInfo {
        key: c.key.clone(),
        policy: c.policy.name.clone(),
        policy_uid: c.policy.uid.clone(),
        rule_name: c.rule.name.clone(),
        index: c.key.index,
        direction: c.rule.direction,
        action: c.rule.action,
        conj_id: frame.conj_id,
        table: frame.tables.rule,
        priority: frame.priority.unwrap_or(0),
        owner: Owner::new(Category::NETWORK_POLICY, frame.conj_id),
        flows,
        status,
    };
    (Built { frame, peers, info }, change)
}

/// The addresses in `new` and not in `old`, and those in `old` and not in `new` (both
/// sorted, as [`PeerMatch`] keeps them).
fn net_diff(old: &PeerMatch, new: &PeerMatch) -> (Vec<IpNet>, Vec<IpNet>) {
    let (mut added, mut removed) = (Vec::new(), Vec::new());
    for (o, n) in [(&old.v4, &new.v4), (&old.v6, &new.v6)] {
        let (mut i, mut j) = (0, 0);
        while i < o.len() || j < n.len() {
            match (o.get(i), n.get(j)) {
                (Some(a), Some(b)) if a == b => {
                    i += 1;
                    j += 1;
                }
                (Some(a), Some(b)) if a < b => {
                    removed.push(*a);
                    i += 1;
                }
                (Some(a), None) => {
                    removed.push(*a);
                    i += 1;
                }
                (_, Some(b)) => {
                    added.push(*b);
                    j += 1;
                }
                (None, None) => break,
            }
        }
    }
    (added, removed)
}

/// What a realizable rule's flows are built from, and what of it is left out.
struct Parts {
    services: Services,
    peer: Addresses,
    notes: Vec<String>,
}

/// A rule's services and peers, or why it cannot be realized (naming the fields).
fn parts(state: &State, rule: &Rule) -> Result<Parts, String> {
    let mut fatal = Vec::new();
    let mut notes = Vec::new();
    if rule.l7 {
        fatal.push("l7Protocols: L7 rules cannot be enforced on a VM".to_string());
    }
    let services = match services(&rule.services) {
        Ok(Services::Matches(m)) if m.is_empty() => {
            fatal.push(skipped_services(&rule.services).join("; "));
            None
        }
        Ok(s) => {
            notes.extend(skipped_services(&rule.services));
            Some(s)
        }
        Err(e) => {
            fatal.push(e);
            None
        }
    };
    let (side, peer) = match rule.direction {
        Direction::In => ("from", &rule.from),
        Direction::Out => ("to", &rule.to),
    };
    let peer = match resolve(state, peer, side) {
        Ok((a, n)) => {
            notes.extend(n);
            Some(a)
        }
        Err(e) => {
            fatal.push(e);
            None
        }
    };
    match (services, peer, fatal.is_empty()) {
        (Some(services), Some(peer), true) => Ok(Parts {
            services,
            peer,
            notes,
        }),
        _ => Err(fatal.join("; ")),
    }
}

/// The addresses of a rule's remote side (`side`: "from" or "to"), and the parts of it
/// left out. A peer with nothing in it is any address; one whose parts resolve to no
/// address matches nothing, which is the error (naming each part).
fn resolve(state: &State, peer: &Peer, side: &str) -> Result<(Addresses, Vec<String>), String> {
    let unsupported = [
        (
            "fqdns",
            peer.fqdns.len(),
            "FQDN peers are not supported on a VM yet",
        ),
        (
            "toServices",
            peer.to_services.len(),
            "Service peers are not supported on a VM yet",
        ),
        (
            "labelIdentities",
            peer.label_identities.len(),
            "label identities are not supported on a VM",
        ),
    ];
    let mut left_out: Vec<String> = unsupported
        .iter()
        .filter(|(_, n, _)| *n > 0)
        .map(|(field, _, why)| format!("{side}.{field}: {why}"))
        .collect();
    if peer.address_groups.is_empty() && peer.ip_blocks.is_empty() {
        if left_out.is_empty() {
            return Ok((Addresses::Any, left_out));
        }
        return Err(format!(
            "{side}: no address to match ({})",
            left_out.join("; ")
        ));
    }
    let mut empty = Vec::new();
    // Every member's IPs, repeats and all: `peer_match` sorts them once (a 10,000-member
    // group is resolved again on each of its patches).
    let mut ips: Vec<IpAddr> = Vec::new();
    for g in &peer.address_groups {
        let Some(group) = state.group(GroupKind::Address, g) else {
            left_out.push(format!("{side}.addressGroups: {g} is not known yet"));
            continue;
        };
        let before = ips.len();
        ips.extend(group.members.keys().flat_map(|k| k.ips.iter().copied()));
        if ips.len() == before {
            empty.push(format!("{side}.addressGroups: {g} has no addresses"));
        }
    }
    let m = peer_match(&ips, &peer.ip_blocks);
    if m.v4.is_empty() && m.v6.is_empty() {
        if !peer.ip_blocks.is_empty() {
            empty.push(format!("{side}.ipBlocks: every CIDR is excepted"));
        }
        left_out.extend(empty);
        return Err(format!(
            "{side}: no address to match ({})",
            left_out.join("; ")
        ));
    }
    Ok((Addresses::Only(m), left_out))
}

#[cfg(test)]
mod tests;
