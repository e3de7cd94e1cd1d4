//! `OfFlows`: the flows backend on a real bridge. It owns two connections to
//! `<bridge>.mgmt` — OpenFlow 1.5 for flows, OpenFlow 1.0 for the no-flood port bit that
//! only 1.0 has (docs/antrea-compat.md#no-flood-on-tc-ports) — the [`FlowSet`] of what is
//! installed, and the set of ports that want no-flood.
//!
//! Every change is one atomic, ordered bundle (OF1.5 §6.8): OPEN, ADD_MESSAGE…, CLOSE and
//! a barrier; if the switch rejected any bundled message we DISCARD, otherwise COMMIT
//! (what `ovs-ofctl --bundle` does too: OVS checks a flow mod when it is added, and a
//! commit would install the others). OVS puts no limit on the messages in a bundle
//! (`ofproto/bundles.c`; 100,000 flow mods in one bundle are benchmarked) but discards a
//! bundle idle for 10 s (`connmgr.c` `BUNDLE_IDLE_TIMEOUT_DEFAULT`), so the commit follows
//! the barrier reply at once.
//!
//! This file is the backend's face: its settings, starting and stopping its threads, and
//! the operations the controllers call. The parts behind it own one thing each: `shared`
//! (the state, the connections, one bundle), `commit` (group commit and the one fallback
//! for a refused bundle), `replay` (after a reconnect), `noflood` (the OF1.0 port bit),
//! `drift` (flows others change), `dump` (reading flows back).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::OfError;
use super::commit::failed_owners;
use super::conn::{Conn, ConnOptions};
use super::consts::{Version, port};
use super::dump::{dumped_flows, flow_dump_request, table_dump_request};
use super::flow::{Flow, Owner, ROUND_MASK};
use super::flowmod::{FlowDesc, FlowMod};
use super::flowset::{FlowChange, FlowSet};
use super::msg::{Body, Port};
use super::shared::{Batches, Counts, Op, Shared, State, first_error};

#[derive(Clone, Debug)]
pub struct OfFlowsConfig {
    /// The bridge's OpenFlow socket, `<rundir>/<bridge>.mgmt`.
    pub mgmt: PathBuf,
    /// Short name for threads and logs (the bridge name).
    pub name: String,
    /// This run's cookie round (docs/antrea-compat.md#cookies-and-rounds).
    pub round: u16,
    /// How long one request may wait for the switch.
    pub timeout: Duration,
    /// Watch the switch for flows others change and put tether's back (`drift`): only
    /// the daemon, which owns the round. A tool that opens the bridge with the daemon's
    /// round (`reset`, `check`) must never, or it would take the daemon's flows for
    /// foreign ones.
    pub watch_drift: bool,
}

impl OfFlowsConfig {
    pub fn new(mgmt: PathBuf, name: &str, round: u16) -> OfFlowsConfig {
        OfFlowsConfig {
            mgmt,
            name: name.to_string(),
            round,
            timeout: Duration::from_secs(60),
            watch_drift: false,
        }
    }
}

/// A reading of the backend's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OfCounts {
    pub round_trips: u64,
    pub bundles: u64,
    pub flow_mods: u64,
    pub drift_checks: u64,
    pub drift_repairs: u64,
}

/// The real flows backend (`controller::Flows`); see the module docs.
pub struct OfFlows {
    shared: Arc<Shared>,
    stop: Option<Sender<()>>,
    replayer: Option<JoinHandle<()>>,
    drift: Option<JoinHandle<()>>,
    reconnects: Receiver<u64>,
}

impl OfFlows {
    /// Start both connections and the replay thread. Returns at once; use
    /// [`OfFlows::wait_connected`] to wait for the switch.
    pub fn start(cfg: OfFlowsConfig) -> Result<OfFlows, OfError> {
        let of15 = Conn::start(
            &cfg.mgmt,
            ConnOptions::new(Version::OF15, &format!("of15-{}", cfg.name)),
        )?;
        let of10 = Conn::start(
            &cfg.mgmt,
            ConnOptions::new(Version::OF10, &format!("of10-{}", cfg.name)),
        )?;
        let shared = Arc::new(Shared {
            of15,
            of10,
            state: Mutex::new(State {
                set: FlowSet::new(cfg.round),
                batches: Batches::default(),
                purge_round: false,
            }),
            idle: Condvar::new(),
            no_flood: Mutex::new(BTreeSet::new()),
            timeout: cfg.timeout,
            replayed: AtomicU64::new(0),
            bundle_id: AtomicU32::new(1),
            counts: Counts::default(),
            drift_problem: Mutex::new(None),
            no_flood_gen: AtomicU64::new(0),
        });
        let (stop_tx, stop_rx) = bounded::<()>(1);
        let drift = if cfg.watch_drift {
            let sh = shared.clone();
            let stop = stop_rx.clone();
            Some(
                std::thread::Builder::new()
                    .name(format!("of-drift-{}", cfg.name))
                    .spawn(move || super::drift::drift_loop(&sh, &stop))
                    .map_err(|e| OfError::Io {
                        socket: cfg.mgmt.display().to_string(),
                        error: format!("cannot spawn flow watch thread: {e}"),
                    })?,
            )
        } else {
            None
        };
        let (rc_tx, rc_rx) = bounded(8);
        let sh = shared.clone();
        let replayer = std::thread::Builder::new()
            .name(format!("of-replay-{}", cfg.name))
            .spawn(move || super::replay::replay_loop(&sh, &stop_rx, &rc_tx))
            .map_err(|e| OfError::Io {
                socket: cfg.mgmt.display().to_string(),
                error: format!("cannot spawn replay thread: {e}"),
            })?;
        Ok(OfFlows {
            shared,
            stop: Some(stop_tx),
            replayer: Some(replayer),
            drift,
            reconnects: rc_rx,
        })
    }

    /// Wait until both connections are up.
    pub fn wait_connected(&self, timeout: Duration) -> Result<(), OfError> {
        self.shared.of15.wait_connected(timeout)?;
        self.shared.of10.wait_connected(timeout)?;
        Ok(())
    }

    /// One value (the OF1.5 connection generation) after each completed flow replay: the
    /// daemon re-reads ofports then, since a restarted switch may renumber them. No-flood
    /// is re-applied after it, retried until every wanted port is back.
    pub fn reconnects(&self) -> &Receiver<u64> {
        &self.reconnects
    }

    /// Re-install every owner's flows (deleting whatever the current round left on the
    /// switch first) and re-apply no-flood, in one bundle plus the port mods.
    pub fn replay_all(&self) -> Result<(), OfError> {
        self.shared.replay_all()
    }

    /// What this backend has asked of the switch since it started.
    pub fn counts(&self) -> OfCounts {
        let c = &self.shared.counts;
        OfCounts {
            round_trips: c.round_trips.load(Ordering::Relaxed),
            bundles: c.bundles.load(Ordering::Relaxed),
            flow_mods: c.flow_mods.load(Ordering::Relaxed),
            drift_checks: c.drift_checks.load(Ordering::Relaxed),
            drift_repairs: c.drift_repairs.load(Ordering::Relaxed),
        }
    }

    /// Why the switch's flows may differ from tether's right now, if they may: the flow
    /// monitor not running (changes by others go unseen), or a read-back failing.
    pub fn drift_problem(&self) -> Option<String> {
        self.shared
            .drift_problem
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Number of flows installed through this backend (all owners), for status output.
    pub fn flow_count(&self) -> usize {
        self.shared.lock().set.len()
    }

    /// The flows tether believes are installed for `owner`.
    pub fn installed(&self, owner: Owner) -> Vec<Flow> {
        self.shared.lock().set.flows(owner)
    }

    /// Flows on the switch whose cookie matches `cookie` under `mask` (multipart
    /// FLOW_DESC), all parts collected.
    pub fn dump(&self, cookie: u64, mask: u64) -> Result<Vec<FlowDesc>, OfError> {
        let r = self
            .shared
            .transact15(vec![flow_dump_request(cookie, mask)], "flow dump")?;
        Ok(dumped_flows(r))
    }

    /// [`OfFlows::dump`] of these tables only: one request per table, one round trip.
    pub fn dump_tables(
        &self,
        cookie: u64,
        mask: u64,
        tables: &[u8],
    ) -> Result<Vec<FlowDesc>, OfError> {
        let reqs: Vec<_> = tables
            .iter()
            .map(|t| table_dump_request(*t, cookie, mask))
            .collect();
        let r = self.shared.transact15(reqs, "flow dump")?;
        Ok(dumped_flows(r))
    }

    /// The bridge's ports as OF1.5 port descriptions (numbers, names, hw_addr).
    pub fn ports(&self) -> Result<Vec<Port>, OfError> {
        self.shared.port_desc(port::ANY)
    }

    /// Send raw flow mods as one bundle (what `apply` uses); for tools and tests.
    pub fn bundle(&self, mods: Vec<FlowMod>) -> Result<(), OfError> {
        self.shared.bundle(mods)
    }
}

impl Drop for OfFlows {
    fn drop(&mut self) {
        self.stop = None;
        if let Some(t) = self.replayer.take() {
            let _ = t.join();
        }
        if let Some(t) = self.drift.take() {
            let _ = t.join();
        }
    }
}

/// The flow operations; `controller::Flows` (adapted in `controller::live`) documents
/// each.
impl OfFlows {
    pub fn apply(&self, owner: Owner, flows: Vec<Flow>) -> Result<(), OfError> {
        self.shared.submit(Op::Apply(owner, flows))
    }

    /// One bundle for every owner (queued together: `openflow::commit`). Each owner is
    /// planned against the set as the owners before it left it (a key moving between two
    /// TCs of the batch ends with the later one, as with separate applies); if the switch
    /// refuses the bundle, the set is put back and each owner is applied alone, so the
    /// error lands on the owner that caused it.
    pub fn apply_many(&self, sets: Vec<(Owner, Vec<Flow>)>) -> Vec<(Owner, OfError)> {
        let owners: Vec<Owner> = sets.iter().map(|(o, _)| *o).collect();
        let results = self
            .shared
            .submit_many(sets.into_iter().map(|(o, f)| Op::Apply(o, f)).collect());
        failed_owners(owners, results)
    }

    /// Several owners' flows replaced or patched, in one bundle (as [`OfFlows::apply_many`]).
    pub fn change_many(&self, changes: Vec<(Owner, FlowChange)>) -> Vec<(Owner, OfError)> {
        let owners: Vec<Owner> = changes.iter().map(|(o, _)| *o).collect();
        let ops = changes
            .into_iter()
            .map(|(o, c)| match c {
                FlowChange::Replace(flows) => Op::Apply(o, flows),
                FlowChange::Patch { add, remove } => Op::Patch(o, add, remove),
            })
            .collect();
        failed_owners(owners, self.shared.submit_many(ops))
    }

    pub fn remove(&self, owner: Owner) -> Result<(), OfError> {
        self.shared.submit(Op::Remove(owner))
    }

    pub fn set_no_flood(&self, ofport: u32, on: bool) -> Result<(), OfError> {
        self.shared.set_no_flood(ofport, on)
    }

    pub fn set_no_flood_many(&self, ofports: &[u32], on: bool) -> Result<(), OfError> {
        self.shared.set_no_flood_many(ofports, on)
    }

    /// One bundle: every owner's difference, then the delete of `round` by cookie. If the
    /// switch refuses it, each goes alone, in that order (`openflow::commit`).
    pub fn replace_round(
        &self,
        sets: Vec<(Owner, Vec<Flow>)>,
        round: u16,
    ) -> (Vec<(Owner, OfError)>, Result<(), OfError>) {
        let owners: Vec<Owner> = sets.iter().map(|(o, _)| *o).collect();
        let mut ops: Vec<Op> = sets.into_iter().map(|(o, f)| Op::Apply(o, f)).collect();
        ops.push(Op::DeleteRound(round));
        let mut results = self.shared.submit_many(ops);
        let deleted = results.pop().unwrap_or(Ok(()));
        (failed_owners(owners, results), deleted)
    }

    pub fn delete_round(&self, round: u16) -> Result<(), OfError> {
        let fm = FlowMod::delete_by_cookie(u64::from(round) << 48, ROUND_MASK);
        let r = self
            .shared
            .transact15(vec![Body::FlowMod(fm)], "delete by cookie")?;
        first_error(&r, |_| format!("delete of round {round}"))
    }
}
