//! The NetworkPolicy controller: what the controlplane watches know (`controlplane::State`)
//! and the VM's pair of ports become the policy flows on the switch, one bundle per change,
//! and realized policies are reported back ([`report`]).
//!
//! Rules it keeps (docs/networkpolicy.md#realization):
//! - nothing policy-visible happens before all three watches have had their first bookmark
//!   ([`State::synced`]); until then the flows already on the switch stay (those of the
//!   previous run, carried into this run's round by the daemon: [`carry_over`]);
//! - one change, one bundle: every owner the change touches (the policy pipeline's own
//!   flows, one owner per rule) goes in one [`Flows::change_many`], so the switch never
//!   holds half a policy; flows that go away are removed in that same bundle;
//! - only what changed is sent: the watches' updates name the policies they changed
//!   ([`Scope`]), the compiler rebuilds those only, and a group member that comes or goes
//!   is a patch of that member's flows ([`Compiler::update`]). After a failure everything
//!   is sent whole again;
//! - a sync that fails is retried with backoff, and the flows installed before it stay;
//! - the flows follow the pair's ofports (read from the ExternalNode controller). While
//!   they are not known (before the ExternalNode's first sync, during a takeover or a
//!   repair) nothing changes: the flows carried over from the previous run, or the last
//!   ones built, stay, and they match only the pair's ports.
//!
//! It runs on its own thread (`np-controller`), woken by the source's updates and by a
//! tick that notices port changes, resyncs and reports still due.

pub mod packetin;
pub mod report;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, select};

use crate::controller::Flows;
use crate::controlplane::{Outcome, State, Update};
use crate::heartbeat::Pulse;
use crate::k8s::backoff::{Backoff, BackoffConfig};
use crate::openflow::{Category, Flow, FlowChange, Owner};
use crate::pipeline::policy::{
    BASE_OWNER, Compiler, RuleInfo, RuleStatus, Scope, VmPorts, base_flows,
};
use report::{Reports, StatusSink, status_body};

/// Flows sent or gone in one sync above which the freed memory is given back
/// ([`crate::sys::release_free_memory`]).
const LARGE_CHANGE: usize = 1000;

/// How often the thread looks at the ports, the resync counter and reports still due.
const TICK: Duration = Duration::from_millis(250);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A rule's traffic, from its metric flows' statistics (`status::policy::counters`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counters {
    pub packets: u64,
    pub bytes: u64,
    pub sessions: u64,
}

/// One rule as `tether status` shows it (its JSON is `tether status --json`'s).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RuleView {
    pub name: String,
    pub direction: String,
    pub action: String,
    pub conj_id: u32,
    pub table: u8,
    pub priority: u16,
    pub flows: usize,
    /// `realized`, or why not.
    pub state: String,
    /// Filled in by the status probe (zero here).
    pub counters: Counters,
}

/// One policy as `tether status` shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PolicyView {
    pub name: String,
    /// `<type> <namespace>/<name>` of the Antrea policy it comes from.
    pub source: String,
    pub generation: i64,
    pub realized: bool,
    /// The generation antrea-controller has from us.
    pub reported: Option<i64>,
    pub rules: Vec<RuleView>,
}

impl PolicyView {
    /// What to call the policy: the Antrea policy it comes from, else its internal name.
    pub fn title(&self) -> &str {
        if self.source.is_empty() {
            &self.name
        } else {
            &self.source
        }
    }
}

/// The controller's state for `tether status` and the metrics.
#[derive(Clone, Debug, Default)]
pub struct PolicyStatus {
    /// All three watches have had their first bookmark.
    pub synced: bool,
    pub ports: Option<VmPorts>,
    pub policies: Vec<PolicyView>,
    pub syncs_total: u64,
    pub last_error: Option<String>,
    /// Policy flows on the switch (base and rules).
    pub flows: usize,
}

/// Where the pair's ofports come from (the ExternalNode controller's status).
pub type PortsFn = Box<dyn Fn() -> Option<VmPorts> + Send + Sync>;

pub struct PolicyController {
    flows: Arc<dyn Flows>,
    state: Arc<Mutex<State>>,
    ports: PortsFn,
    sink: Option<Arc<dyn StatusSink>>,
    node_key: String,
    inner: Mutex<Inner>,
}

struct Inner {
    compiler: Compiler,
    /// The policies changed since the last successful sync.
    scope: Scope,
    /// Owners whose flows are on the switch (or carried over from the previous run).
    installed: BTreeSet<Owner>,
    /// The ports the installed flows were built for.
    built_for: Option<VmPorts>,
    /// Realized policies and their generation, as of the last successful sync.
    realized: BTreeMap<String, i64>,
    reports: Reports,
    status: PolicyStatus,
}

impl PolicyController {
    /// `carried`: owners of the previous run's policy flows the daemon put into this run's
    /// round ([`carry_over`]); the first sync replaces or removes them.
    pub fn new(
        flows: Arc<dyn Flows>,
        state: Arc<Mutex<State>>,
        ports: PortsFn,
        sink: Option<Arc<dyn StatusSink>>,
        node_key: String,
        carried: BTreeSet<Owner>,
    ) -> PolicyController {
        PolicyController {
            flows,
            state,
            ports,
            sink,
            node_key,
            inner: Mutex::new(Inner {
                compiler: Compiler::new(),
                scope: Scope::All,
                installed: carried,
                built_for: None,
                realized: BTreeMap::new(),
                reports: Reports::default(),
                status: PolicyStatus::default(),
            }),
        }
    }

    pub fn status(&self) -> PolicyStatus {
        let inner = lock(&self.inner);
        let mut st = inner.status.clone();
        for p in &mut st.policies {
            p.reported = inner.reports.generation(&p.name);
        }
        st
    }

    /// The rule whose conjunction is `conj_id`, as the audit log names it: from the last
    /// realized views and the policy's own rule (its `logLabel`).
    pub fn logged_rule(&self, conj_id: u32) -> Option<packetin::audit::LoggedRule> {
        let (policy, rule) = lock(&self.inner).status.policies.iter().find_map(|p| {
            let r = p.rules.iter().find(|r| r.conj_id == conj_id)?;
            Some((p.name.clone(), r.clone()))
        })?;
        let state = lock(&self.state);
        let p = state.applied_policies().find(|p| p.name == policy)?;
        let log_label = p
            .rules
            .iter()
            .find(|r| r.name == rule.name)
            .map(|r| r.log_label.clone())
            .unwrap_or_default();
        let np_ref = match &p.source_ref {
            Some(s) if s.namespace.is_empty() => format!("{}:{}", s.policy_type, s.name),
            Some(s) => format!("{}:{}/{}", s.policy_type, s.namespace, s.name),
            None => p.name.clone(),
        };
        Some(packetin::audit::LoggedRule {
            np_ref,
            rule: rule.name,
            disposition: rule.action,
            table: rule.table,
            priority: rule.priority,
            log_label,
        })
    }

    /// Compile what is known for the current ports and put it on the switch in one bundle.
    /// Before the first bookmarks of all three watches: nothing (Ok).
    pub fn sync(&self) -> Result<(), String> {
        let ports = (self.ports)();
        let state = lock(&self.state);
        let mut inner = lock(&self.inner);
        inner.status.synced = state.synced();
        inner.status.ports = ports;
        if !state.synced() {
            return Ok(());
        }
        let Some(ports) = ports else {
            // The pair is not known right now: the ExternalNode's first sync has not run
            // yet (every start: the flows carried over from the previous run must stay),
            // a takeover or restore is in flight, or a port is missing and being repaired.
            // The flows on the switch stay as they are; they match only the pair's ports.
            return Ok(());
        };
        let scope = std::mem::replace(&mut inner.scope, Scope::none());
        let changes = match inner.compiler.update(&state, ports, &scope) {
            Ok(c) => c,
            // Nothing changed in the compiler: the flows on the switch stay.
            Err(e) => {
                inner.scope.add(scope);
                let why = format!("compiling the policies: {e}");
                inner.status.last_error = Some(why.clone());
                return Err(why);
            }
        };
        let generations: BTreeMap<String, i64> = state
            .applied_policies()
            .map(|p| (p.name.clone(), p.generation))
            .collect();
        let views = policy_views(&changes.rules, &state);
        drop(state);

        let wanted: BTreeSet<Owner> = std::iter::once(BASE_OWNER)
            .chain(changes.rules.iter().map(|r| r.owner))
            .collect();
        let flow_count =
            base_flows(ports).len() + changes.rules.iter().map(|r| r.flows).sum::<usize>();
        let mut all = changes.owners;
        let sent: usize = all
            .iter()
            .map(|(_, c)| match c {
                FlowChange::Replace(f) => f.len(),
                FlowChange::Patch { add, remove } => add.len() + remove.len(),
            })
            .sum();
        // A large change leaves a burst of freed memory behind (the event line, the flows
        // built and encoded, or those removed).
        let large = sent.max(inner.status.flows.abs_diff(flow_count)) >= LARGE_CHANGE;
        for gone in inner.installed.difference(&wanted) {
            all.push((*gone, FlowChange::Replace(Vec::new())));
        }
        let failed = if all.is_empty() {
            Vec::new()
        } else {
            self.flows.change_many(all)
        };
        inner.status.syncs_total += 1;
        if !failed.is_empty() {
            // The switch refused: what failed keeps its old flows (or none); retried, with
            // every owner's flows whole (the compiler no longer knows what the switch holds).
            let why = failed
                .iter()
                .map(|(o, e)| format!("{o}: {e}"))
                .collect::<Vec<_>>()
                .join("; ");
            let failed_owners: BTreeSet<Owner> = failed.iter().map(|(o, _)| *o).collect();
            inner.installed = wanted.union(&failed_owners).copied().collect();
            inner.compiler.forget();
            inner.status.last_error = Some(why.clone());
            inner.status.policies = views;
            inner.realized.clear();
            return Err(why);
        }
        inner.installed = wanted;
        inner.built_for = Some(ports);
        inner.status.last_error = None;
        inner.status.flows = flow_count;
        inner.status.policies = views;
        // Realized: every policy applied to this node, its flows now on the switch.
        inner.realized = generations;
        drop(inner);
        if large {
            crate::sys::release_free_memory();
        }
        Ok(())
    }

    /// Note what an update of the watches changed, for the next sync.
    fn note(&self, outcome: &Outcome) {
        let scope = match outcome {
            Outcome::Changed(names) => Scope::Policies(names.clone()),
            Outcome::Synced => Scope::All,
            Outcome::Unchanged | Outcome::Restart(_) => return,
        };
        lock(&self.inner).scope.add(scope);
    }

    /// POST the reports that are due; failures stay due.
    fn report(&self) -> Result<(), String> {
        let Some(sink) = &self.sink else {
            return Ok(());
        };
        let due = {
            let mut inner = lock(&self.inner);
            let realized = inner.realized.clone();
            inner.reports.due(&realized)
        };
        let mut errors = Vec::new();
        for (name, generation) in due {
            match sink.post(&name, &status_body(&name, &self.node_key, generation)) {
                Ok(()) => {
                    log::info!("networkpolicy {name}: realized generation {generation}, reported");
                    lock(&self.inner).reports.sent(&name, generation);
                }
                Err(e) => errors.push(format!("status of {name}: {e}")),
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    fn ports_changed(&self) -> bool {
        let now = (self.ports)();
        lock(&self.inner).built_for != now
    }

    /// A resync of the watches: every policy is reported again, and compiled again.
    fn forget_reports(&self) {
        let mut inner = lock(&self.inner);
        inner.reports.forget_all();
        inner.scope = Scope::All;
    }

    /// The controller's loop: a sync after updates (coalesced), after a port change, and
    /// on retry. `resyncs` counts the watches' reconnects (each a full resync after which
    /// every policy is reported again). Reports go out from a thread of their own
    /// (`np-report`), woken after each sync: a hundred POSTs to a slow controller must
    /// not hold the next policy change back (the bench saw 1.3–2 s of that).
    pub fn run(
        &self,
        updates: &Receiver<Update>,
        resyncs: &dyn Fn() -> u64,
        stop: &Receiver<()>,
        pulse: &Pulse,
    ) {
        std::thread::scope(|scope| {
            let (wake_tx, wake_rx) = crossbeam_channel::bounded::<()>(1);
            let reporter = std::thread::Builder::new()
                .name("np-report".into())
                .spawn_scoped(scope, move || self.report_loop(&wake_rx));
            if let Err(e) = &reporter {
                log::error!("networkpolicy: no status reports (thread np-report: {e})");
            }
            self.sync_loop(updates, resyncs, stop, pulse, &wake_tx);
            // Dropping the sender ends the reporter.
            drop(wake_tx);
        });
    }

    fn sync_loop(
        &self,
        updates: &Receiver<Update>,
        resyncs: &dyn Fn() -> u64,
        stop: &Receiver<()>,
        pulse: &Pulse,
        wake_reporter: &crossbeam_channel::Sender<()>,
    ) {
        let mut backoff = Backoff::new(BackoffConfig::default(), 0x6e70);
        let mut dirty = true;
        let mut sync_at = Instant::now();
        let mut seen_resyncs = resyncs();
        loop {
            pulse.idle();
            select! {
                recv(stop) -> _ => return,
                recv(updates) -> u => match u {
                    Ok(u) => {
                        log::debug!("networkpolicy update from {:?}: {:?}", u.kind, u.outcome);
                        self.note(&u.outcome);
                        dirty = true;
                        while let Ok(u) = updates.try_recv() {
                            self.note(&u.outcome);
                        }
                    }
                    Err(_) => return,
                },
                default(TICK) => {}
            }
            pulse.busy();
            let r = resyncs();
            if r != seen_resyncs {
                seen_resyncs = r;
                self.forget_reports();
                dirty = true;
            }
            if self.ports_changed() {
                dirty = true;
            }
            let now = Instant::now();
            if dirty && now >= sync_at {
                match self.sync() {
                    Ok(()) => {
                        dirty = false;
                        backoff.reset();
                        let _ = wake_reporter.try_send(());
                    }
                    Err(e) => {
                        let wait = backoff.next_delay();
                        log::warn!("networkpolicy sync failed, retrying in {wait:?}: {e}");
                        sync_at = now + wait;
                    }
                }
            }
        }
    }

    /// POST what is due after each wake-up; failures are retried with backoff.
    fn report_loop(&self, wake: &Receiver<()>) {
        let mut backoff = Backoff::new(BackoffConfig::default(), 0x7374);
        let mut retry: Option<Instant> = None;
        loop {
            let wait = retry.map_or(Duration::from_secs(3600), |t| {
                t.saturating_duration_since(Instant::now())
            });
            match wake.recv_timeout(wait) {
                Ok(()) | Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
            }
            match self.report() {
                Ok(()) => {
                    backoff.reset();
                    retry = None;
                }
                Err(e) => {
                    let wait = backoff.next_delay();
                    log::warn!("networkpolicy status report failed, retrying in {wait:?}: {e}");
                    retry = Some(Instant::now() + wait);
                }
            }
        }
    }
}

/// The views of the policies `rules` came from.
fn policy_views(rules: &[RuleInfo], state: &State) -> Vec<PolicyView> {
    let mut views: Vec<PolicyView> = state
        .applied_policies()
        .map(|p| PolicyView {
            name: p.name.clone(),
            source: p
                .source_ref
                .as_ref()
                .map(|s| format!("{} {}/{}", s.policy_type, s.namespace, s.name))
                .unwrap_or_default(),
            generation: p.generation,
            realized: true,
            reported: None,
            rules: Vec::new(),
        })
        .collect();
    for r in rules {
        let Some(v) = views.iter_mut().find(|v| v.name == r.policy) else {
            continue;
        };
        let state = match &r.status {
            RuleStatus::Realizable => "realized".to_string(),
            RuleStatus::Partial(why) => format!("realized in part: {why}"),
            RuleStatus::NotRealizable(why) => format!("not realized: {why}"),
        };
        v.rules.push(RuleView {
            name: r.rule_name.clone(),
            direction: format!("{:?}", r.direction),
            action: format!("{:?}", r.action),
            conj_id: r.conj_id,
            table: r.table,
            priority: r.priority,
            flows: r.flows,
            state,
            counters: Counters::default(),
        });
    }
    views
}

/// The previous run's policy flows, read back from the switch and grouped by owner, to be
/// installed under this run's round in the first bundle, so the old round's delete does
/// not leave a moment without policy (Antrea #5777). Only tether's own pipeline is carried
/// (the caller knows the previous round was tether's).
pub fn carry_over(descs: Vec<crate::openflow::flowmod::FlowDesc>) -> BTreeMap<Owner, Vec<Flow>> {
    let mut out: BTreeMap<Owner, Vec<Flow>> = BTreeMap::new();
    for d in descs {
        let Some((_, category, object)) = crate::openflow::flow::tether_cookie(d.cookie) else {
            continue;
        };
        if category != Category::NETWORK_POLICY {
            continue;
        }
        let mut f = Flow::new(d.table_id, d.priority);
        f.key.match_ = d.match_;
        f.value.instructions = Arc::new(d.instructions);
        f.value.idle_timeout = d.idle_timeout;
        f.value.hard_timeout = d.hard_timeout;
        out.entry(Owner::new(category, object)).or_default().push(f);
    }
    out
}

#[cfg(test)]
mod tests;
