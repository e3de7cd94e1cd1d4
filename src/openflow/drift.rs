//! Flows someone else changed (`ovs-ofctl del-flows`, `mod-flows`, an `add-flow` under
//! tether's cookie): the backend watches the switch's flow tables through OVS's flow
//! monitor (`monitor`, on the OpenFlow 1.0 connection; no polling). An update to a flow
//! under this round's cookie makes its owner a suspect, as does the monitor losing
//! updates (paused by OVS, a reconnect, a full queue: then every owner is). After a
//! quiet [`SETTLE`], with no bundle in flight, the suspects' flows are read back from the
//! switch and compared with what tether installed; an owner whose flows differ is
//! installed again exactly — its cookie's flows deleted and its own added, in one bundle —
//! logged and counted (`OfCounts::drift_repairs`). tether's own changes come back as
//! updates too (they are made on the OpenFlow 1.5 connection): read back, they match,
//! and cost one cookie-indexed dump.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::MutexGuard;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, select};

use super::consts::FlowModCommand;
use super::dump::{dumped_flows, flow_dump_request};
use super::flow::{Category, OWNER_MASK, Owner, ROUND_MASK, cookie};
use super::flowmod::{FlowDesc, FlowMod};
use super::monitor::{self, Notice, Update};
use super::shared::{Shared, State};
use super::{Flow, Instruction, Match, OfError};

/// Quiet time after the last update before the suspects are read back: a `del-flows`
/// or one of tether's bundles arrives as a burst.
pub const SETTLE: Duration = Duration::from_millis(200);

/// Above this many suspects, one dump of the whole round instead of one per owner.
const PER_OWNER_DUMPS: usize = 64;

const MONITOR_ID: u32 = 1;

/// Whom to read back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
enum Suspects {
    #[default]
    None,
    Some(BTreeSet<u64>),
    All,
}

impl Suspects {
    fn add(&mut self, owner_cookie: u64) {
        match self {
            Suspects::None => *self = Suspects::Some(BTreeSet::from([owner_cookie])),
            Suspects::Some(s) => {
                s.insert(owner_cookie);
            }
            Suspects::All => {}
        }
    }
}

/// What one look found: owners re-installed, with what differed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repair {
    pub owner: Owner,
    /// Installed by tether, not on the switch (or not as installed).
    pub missing: usize,
    /// On the switch under the owner's cookie, not installed by tether (or changed).
    pub unexpected: usize,
}

/// A flow as compared: what it matches and does, not its counters or flags.
type Comparable = (u8, u16, u16, u16, Match, Vec<Instruction>);

/// The switch reports a match in its own canonical form (64-bit `xreg`s for the 32-bit
/// registers tether wrote, in its own order): brought to tether's by `Match::new`.
fn comparable_desc(d: &FlowDesc) -> Comparable {
    (
        d.table_id,
        d.priority,
        d.idle_timeout,
        d.hard_timeout,
        Match::new(d.match_.fields().to_vec()),
        d.instructions.clone(),
    )
}

fn comparable_flow(f: &Flow) -> Comparable {
    comparable_desc(&f.to_desc())
}

/// `installed` against `on_switch` (both one owner's): what is missing from the switch
/// and what is there unexpectedly, counted with multiplicity.
pub fn diff(installed: &[Flow], on_switch: &[FlowDesc]) -> (usize, usize) {
    let mut want: BTreeMap<Comparable, isize> = BTreeMap::new();
    for f in installed {
        *want.entry(comparable_flow(f)).or_default() += 1;
    }
    for d in on_switch {
        *want.entry(comparable_desc(d)).or_default() -= 1;
    }
    let missing = want
        .values()
        .filter(|n| **n > 0)
        .map(|n| n.unsigned_abs())
        .sum();
    let unexpected = want
        .values()
        .filter(|n| **n < 0)
        .map(|n| n.unsigned_abs())
        .sum();
    (missing, unexpected)
}

fn owner_of(c: u64) -> Owner {
    Owner {
        category: Category(((c >> 40) & 0xff) as u8),
        object: (c & 0xffff_ffff) as u32,
    }
}

impl Shared {
    /// Ask the switch for updates of every flow (additions, deletions, modifications).
    fn start_monitor(&self) -> Result<(), OfError> {
        let flags = monitor::flags::ADD | monitor::flags::DELETE | monitor::flags::MODIFY;
        let r = self
            .of10
            .transact(vec![monitor::request(MONITOR_ID, flags)], self.timeout)?;
        match r.errors.first() {
            None => Ok(()),
            Some((_, e)) => Err(OfError::Switch {
                name: e.name(),
                type_: e.type_.0,
                code: e.code,
                failed: "NXST_FLOW_MONITOR request".into(),
            }),
        }
    }

    /// Read the suspects back and re-install every owner whose flows differ, the state
    /// lock held throughout (no bundle of tether's can interleave).
    fn check(&self, suspects: &Suspects) -> Result<Vec<Repair>, OfError> {
        let st = self.lock_idle();
        let round = st.set.round();
        let round_bits = u64::from(round) << 48;
        let mut on_switch: BTreeMap<u64, Vec<FlowDesc>> = BTreeMap::new();
        let mut owners: BTreeSet<u64> = match suspects {
            Suspects::None => return Ok(Vec::new()),
            Suspects::Some(s) if s.len() <= PER_OWNER_DUMPS => {
                let reqs: Vec<_> = s
                    .iter()
                    .map(|c| flow_dump_request(*c, OWNER_MASK))
                    .collect();
                for d in dumped_flows(self.transact15(reqs, "flow read-back")?) {
                    on_switch.entry(d.cookie & OWNER_MASK).or_default().push(d);
                }
                s.clone()
            }
            Suspects::Some(_) | Suspects::All => {
                let r = self.transact15(
                    vec![flow_dump_request(round_bits, ROUND_MASK)],
                    "flow read-back",
                )?;
                for d in dumped_flows(r) {
                    on_switch.entry(d.cookie & OWNER_MASK).or_default().push(d);
                }
                let mut all: BTreeSet<u64> = st.set.owners().map(|o| st.set.cookie(o)).collect();
                all.extend(on_switch.keys().copied());
                all
            }
        };
        owners.retain(|c| c & ROUND_MASK == round_bits);
        self.counts.drift_checks.fetch_add(1, Ordering::Relaxed);
        let mut repairs = Vec::new();
        let mut mods = Vec::new();
        for c in owners {
            let owner = owner_of(c);
            let installed = st.set.flows(owner);
            let found = on_switch.remove(&c).unwrap_or_default();
            let (missing, unexpected) = diff(&installed, &found);
            if missing == 0 && unexpected == 0 {
                continue;
            }
            log::debug!(
                "openflow read-back of {owner}: installed {:?} on the switch {:?}",
                installed.iter().map(comparable_flow).collect::<Vec<_>>(),
                found.iter().map(comparable_desc).collect::<Vec<_>>()
            );
            mods.push(FlowMod::delete_by_cookie(c, OWNER_MASK));
            mods.extend(installed.iter().map(|f| {
                f.to_flow_mod(
                    FlowModCommand::ADD,
                    cookie(round, owner.category, owner.object),
                )
            }));
            repairs.push(Repair {
                owner,
                missing,
                unexpected,
            });
        }
        if !mods.is_empty() {
            // Not `with_purge`: a pending purge of the round goes with the next bundle of
            // the flow set's own (it would take every other owner's flows with it here).
            self.bundle_mods(mods)?;
            self.counts
                .drift_repairs
                .fetch_add(repairs.len() as u64, Ordering::Relaxed);
        }
        drop::<MutexGuard<'_, State>>(st);
        Ok(repairs)
    }
}

impl Shared {
    fn set_drift_problem(&self, problem: Option<String>) {
        *self.drift_problem.lock().unwrap_or_else(|e| e.into_inner()) = problem;
    }
}

/// The watcher's loop (its own thread, `of-drift-<bridge>`), until `stop`.
pub(super) fn drift_loop(sh: &Shared, stop: &Receiver<()>) {
    let mut suspects = Suspects::None;
    let mut last_update = Instant::now();
    let mut paused = false;
    let mut lost = sh.of10.unsolicited_lost();
    // The OF1.0 connection generation the monitor was started on (the replay thread
    // takes the connection's events: a new generation is how a reconnect shows here).
    let mut monitoring: Option<u64> = None;
    let mut monitor_failures = 0u32;
    loop {
        let due = match (&suspects, paused) {
            (Suspects::None, _) | (_, true) => Duration::from_secs(3600),
            _ => SETTLE.saturating_sub(last_update.elapsed()),
        };
        // Until a monitor runs on the current connection, look again now and then.
        let (up, generation) = sh.of10.state();
        let due = if up && monitoring == Some(generation) {
            due
        } else {
            due.min(Duration::from_millis(500))
        };
        select! {
            recv(stop) -> _ => return,
            recv(sh.of10.unsolicited()) -> m => {
                let Ok(m) = m else { return };
                match monitor::decode(&m.body) {
                    Ok(Some(Notice::Updates(updates))) => {
                        let round_bits = u64::from(sh.lock().set.round()) << 48;
                        for u in updates {
                            if let Update::Flow { cookie, .. } = u {
                                if cookie & ROUND_MASK == round_bits {
                                    suspects.add(cookie & OWNER_MASK);
                                    last_update = Instant::now();
                                }
                            }
                        }
                    }
                    Ok(Some(Notice::Paused)) => {
                        log::info!("openflow flow monitor paused by the switch; reading every flow back once it resumes");
                        paused = true;
                    }
                    Ok(Some(Notice::Resumed)) => {
                        paused = false;
                        suspects = Suspects::All;
                        last_update = Instant::now();
                    }
                    Ok(None) => {}
                    Err(e) => {
                        log::warn!("openflow flow monitor update unreadable ({e}); reading every flow back");
                        suspects = Suspects::All;
                        last_update = Instant::now();
                    }
                }
            },
            default(due) => {}
        }
        let (up, generation) = sh.of10.state();
        if up && monitoring != Some(generation) {
            if monitoring.is_some() {
                // Reconnected: whatever changed while disconnected went unseen.
                suspects = Suspects::All;
                last_update = Instant::now();
                paused = false;
            }
            match sh.start_monitor() {
                Ok(()) => {
                    monitoring = Some(generation);
                    monitor_failures = 0;
                    sh.set_drift_problem(None);
                }
                Err(e) => {
                    sh.set_drift_problem(Some(format!(
                        "the flow monitor is not running ({e}): flows others change go unnoticed"
                    )));
                    if monitor_failures == 0 {
                        log::warn!(
                            "openflow flow monitor not started ({e}); flows others change go unnoticed until it is"
                        );
                    }
                    monitor_failures += 1;
                }
            }
        }
        let now_lost = sh.of10.unsolicited_lost();
        if now_lost != lost {
            lost = now_lost;
            suspects = Suspects::All;
        }
        if paused || suspects == Suspects::None || last_update.elapsed() < SETTLE {
            continue;
        }
        let (up, generation) = sh.of15.state();
        if !up {
            // The replay after the reconnect puts everything back.
            suspects = Suspects::None;
            continue;
        }
        if sh.replayed.load(Ordering::SeqCst) != generation {
            // Reconnected, not yet replayed: the switch is still being given its flows.
            last_update = Instant::now();
            continue;
        }
        match sh.check(&suspects) {
            Ok(repairs) => {
                for r in &repairs {
                    log::warn!(
                        "openflow flows of {} on the switch differed from what tether installed \
                         ({} missing, {} unexpected: changed outside tether); installed them again",
                        r.owner,
                        r.missing,
                        r.unexpected
                    );
                }
                suspects = Suspects::None;
                sh.set_drift_problem(None);
            }
            Err(e) => {
                log::warn!("openflow reading flows back failed ({e}); trying again");
                sh.set_drift_problem(Some(format!(
                    "flows changed on the switch; reading them back failed ({e}): not repaired yet"
                )));
                last_update = Instant::now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::flow::Flow;

    #[test]
    fn diff_counts_missing_and_unexpected() {
        let a = Flow::new(0, 100).goto(10);
        let b = Flow::new(10, 200);
        let installed = vec![a.clone(), b.clone()];
        let desc = |f: &Flow, cookie: u64| FlowDesc {
            cookie,
            stats: vec![1, 2, 3],
            flags: 1,
            ..f.to_desc()
        };
        // As installed (counters, cookie and flags do not count).
        assert_eq!(diff(&installed, &[desc(&a, 9), desc(&b, 9)]), (0, 0));
        // Deleted.
        assert_eq!(diff(&installed, &[]), (2, 0));
        // Modified: b's actions changed.
        let b2 = Flow::new(10, 200).goto(20);
        assert_eq!(diff(&installed, &[desc(&a, 9), desc(&b2, 9)]), (1, 1));
        // A foreign flow under the owner's cookie.
        let c = Flow::new(0, 5);
        assert_eq!(
            diff(&installed, &[desc(&a, 9), desc(&b, 9), desc(&c, 9)]),
            (0, 1)
        );
    }

    #[test]
    fn owner_from_cookie() {
        let c = cookie(3, Category(2), 0x8000_0007);
        assert_eq!(
            owner_of(c & OWNER_MASK),
            Owner::new(Category(2), 0x8000_0007)
        );
    }

    #[test]
    fn suspects_grow_until_all() {
        let mut s = Suspects::None;
        s.add(1);
        s.add(2);
        s.add(1);
        assert_eq!(s, Suspects::Some(BTreeSet::from([1, 2])));
        let mut all = Suspects::All;
        all.add(3);
        assert_eq!(all, Suspects::All);
    }
}
