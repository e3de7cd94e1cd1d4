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
//! the barrier reply at once. A `replay` thread re-installs every owner's flows
//! and re-applies no-flood after each reconnect, since a restarted ovs-vswitchd has
//! forgotten both.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded, select};

use super::OfError;
use super::batch::{Batches, Op};
use super::conn::{Batch, Conn, ConnEvent, ConnOptions, Reply};
use super::consts::{BundleCtrlType, OFPPC10_NO_FLOOD, Version, bundle_flags, port};
use super::dump::{dumped_flows, flow_dump_request};
use super::flow::{Flow, Owner, ROUND_MASK};
use super::flowmod::{
    BundleAdd, BundleControl, FlowDesc, FlowMod, MultipartReplyBody, MultipartRequest,
    MultipartRequestBody,
};
use super::flowset::FlowSet;
use super::liveness::Backoff;
use super::msg::{Body, ErrorMsg, Msg, Port, PortMod10};

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
    /// The bridge's socket under OVS's run directory (`--ovs-rundir`,
    /// docs/design.md#settings-flags-and-config-file).
    pub fn for_bridge(rundir: &std::path::Path, bridge: &str, round: u16) -> OfFlowsConfig {
        OfFlowsConfig::new(rundir.join(format!("{bridge}.mgmt")), bridge, round)
    }

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

pub(super) struct State {
    pub(super) set: FlowSet,
    /// Requests waiting for the next bundle, and whether one is in flight
    /// (`openflow::batch`).
    pub(super) batches: Batches,
    /// A connection came up while the set was empty: the delete of this round's cookie
    /// (the leftovers of a run that crashed before persisting its round) still has to go,
    /// at the head of the next bundle. A bundle of its own would cost vswitchd one more
    /// flow-table commit, which at 5,000 ports is ~1.4 s of its CPU before the first real
    /// flows (issue 17's cold start).
    pub(super) purge_round: bool,
}

pub(super) struct Shared {
    pub(super) of15: Conn,
    pub(super) of10: Conn,
    state: Mutex<State>,
    /// Signalled when a bundle of queued requests has been answered.
    pub(super) idle: Condvar,
    /// Ports that want no-flood; its own lock, held across the OF1.0 port mods (they never
    /// wait for a flow bundle, nor a flow bundle for them).
    no_flood: Mutex<BTreeSet<u32>>,
    pub(super) timeout: Duration,
    /// The OF1.5 connection generation whose flow replay is done: until it equals the
    /// connection's, what the switch holds is not yet what tether installed (`drift`).
    pub(super) replayed: AtomicU64,
    bundle_id: AtomicU32,
    pub(super) counts: Counts,
    /// Why the flows on the switch may not be what tether installed right now, while
    /// that is so (`drift`): no flow monitor, or a read-back that fails.
    pub(super) drift_problem: Mutex<Option<String>>,
    /// The OF1.0 connection generation on which every port of the no-flood set is known
    /// to have been set (only changed with the set's lock held): a replay for that
    /// generation would only repeat it (`replay_no_flood`).
    no_flood_gen: AtomicU64,
}

/// What this backend has asked of the switch, for metrics and for tests that count.
#[derive(Default)]
pub(super) struct Counts {
    /// Requests that waited for the switch's answer (a barrier): one round trip each.
    round_trips: AtomicU64,
    /// Bundles committed.
    bundles: AtomicU64,
    /// Flow mods in committed bundles.
    flow_mods: AtomicU64,
    /// Read-backs of flows the switch reported changed (`drift`).
    pub(super) drift_checks: AtomicU64,
    /// Owners whose flows were found changed outside tether and installed again.
    pub(super) drift_repairs: AtomicU64,
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
            .spawn(move || replay_loop(&sh, &stop_rx, &rc_tx))
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
        self.shared.submit(owner, Op::Apply(flows))
    }

    /// One bundle for every owner (queued together: `openflow::batch`). Each owner is
    /// planned against the set as the owners before it left it (a key moving between two
    /// TCs of the batch ends with the later one, as with separate applies); if the switch
    /// refuses the bundle, the set is put back and each owner is applied alone, so the
    /// error lands on the owner that caused it.
    pub fn apply_many(&self, sets: Vec<(Owner, Vec<Flow>)>) -> Vec<(Owner, OfError)> {
        let owners: Vec<Owner> = sets.iter().map(|(o, _)| *o).collect();
        let results = self
            .shared
            .submit_many(sets.into_iter().map(|(o, f)| (o, Op::Apply(f))).collect());
        // As before group commit: the owners refused while planning (conflicts) first,
        // then those the switch refused, each in the order given.
        let (mut failed, refused): (Vec<_>, Vec<_>) = owners
            .into_iter()
            .zip(results)
            .filter_map(|(o, r)| r.err().map(|e| (o, e)))
            .partition(|(_, e)| matches!(e, OfError::Conflict { .. }));
        failed.extend(refused);
        failed
    }

    /// After a refused bundle: each owner alone (those that failed planning excepted), so
    /// the error lands on the owner that caused it.
    fn apply_each(&self, sets: Vec<(Owner, Vec<Flow>)>, failed: &mut Vec<(Owner, OfError)>) {
        let bad: BTreeSet<Owner> = failed.iter().map(|(o, _)| *o).collect();
        for (owner, flows) in sets {
            if !bad.contains(&owner) {
                if let Err(e) = self.apply(owner, flows) {
                    failed.push((owner, e));
                }
            }
        }
    }

    pub fn remove(&self, owner: Owner) -> Result<(), OfError> {
        self.shared.submit(owner, Op::Remove)
    }

    pub fn set_no_flood(&self, ofport: u32, on: bool) -> Result<(), OfError> {
        let mut no_flood = self.shared.lock_no_flood();
        // Already set on this connection (a replay re-applies the whole set after a
        // reconnect): every PORT_MOD makes vswitchd re-examine the port, which at 5,000
        // ports costs it far more than the flows do. Clearing is always sent.
        if on && no_flood.contains(&ofport) {
            return Ok(());
        }
        let generation = self.shared.of10.state().1;
        match self.shared.port_mod_no_flood(ofport, on) {
            Ok(()) => {}
            // Clearing the bit of a port that is gone: nothing left to clear or replay.
            Err(OfError::PortNotFound { .. }) if !on => {}
            Err(e) => return Err(e),
        }
        if on {
            self.shared.applied_no_flood(&no_flood, generation);
            no_flood.insert(ofport);
        } else {
            no_flood.remove(&ofport);
        }
        Ok(())
    }

    /// `set_no_flood(p, true)` for every port of `ofports` not yet set, in one batch
    /// (`Shared::port_mods_no_flood`); clearing goes port by port (a port already gone is
    /// no error then).
    pub fn set_no_flood_many(&self, ofports: &[u32], on: bool) -> Result<(), OfError> {
        if !on {
            return ofports
                .iter()
                .try_for_each(|p| self.set_no_flood(*p, false));
        }
        let mut no_flood = self.shared.lock_no_flood();
        let todo: Vec<u32> = ofports
            .iter()
            .copied()
            .filter(|p| !no_flood.contains(p))
            .collect::<BTreeSet<u32>>()
            .into_iter()
            .collect();
        let generation = self.shared.of10.state().1;
        self.shared.port_mods_no_flood(&todo, true)?;
        if !todo.is_empty() {
            self.shared.applied_no_flood(&no_flood, generation);
        }
        no_flood.extend(todo);
        Ok(())
    }

    /// One bundle: every owner's difference, then the delete of `round` by cookie (after
    /// the adds: an add that replaces an old flow of the same match and priority gives it
    /// the new cookie, so the delete cannot take it). If the switch refuses the bundle,
    /// the default (owners one by one, then the delete) runs instead.
    pub fn replace_round(
        &self,
        sets: Vec<(Owner, Vec<Flow>)>,
        round: u16,
    ) -> (Vec<(Owner, OfError)>, Result<(), OfError>) {
        let mut st = self.shared.lock_idle();
        let before = st.set.clone();
        let (mut mods, mut failed) = plan_many(&mut st.set, &sets);
        let n = mods.len();
        mods.push(FlowMod::delete_by_cookie(
            u64::from(round) << 48,
            ROUND_MASK,
        ));
        match self.shared.send(&mut st, mods) {
            Ok(()) => {
                log::info!(
                    "openflow replaced round {round} in one bundle: {n} flow mods for {} owners",
                    sets.len()
                );
                (failed, Ok(()))
            }
            Err(e) => {
                log::warn!(
                    "openflow one bundle replacing round {round} failed ({e}); applying owners one by one"
                );
                st.set = before;
                drop(st);
                self.apply_each(sets, &mut failed);
                (failed, self.delete_round(round))
            }
        }
    }

    pub fn delete_round(&self, round: u16) -> Result<(), OfError> {
        let fm = FlowMod::delete_by_cookie(u64::from(round) << 48, ROUND_MASK);
        let r = self
            .shared
            .transact15(vec![Body::FlowMod(fm)], "delete by cookie")?;
        first_error(&r, |_| format!("delete of round {round}"))
    }
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_no_flood(&self) -> MutexGuard<'_, BTreeSet<u32>> {
        self.no_flood.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn transact15(
        &self,
        bodies: impl Into<Batch>,
        what: &str,
    ) -> Result<Reply, OfError> {
        let bodies = bodies.into();
        log::debug!("openflow request what={what} messages={}", bodies.len());
        self.counts.round_trips.fetch_add(1, Ordering::Relaxed);
        self.of15.transact(bodies, self.timeout)
    }

    fn bundle(&self, mods: Vec<FlowMod>) -> Result<(), OfError> {
        let _st = self.lock_idle();
        self.bundle_mods(mods)
    }

    /// `mods` headed by the delete of this round's leftovers while that is pending
    /// (`State::purge_round`): an add after it in the same ordered bundle survives it.
    pub(super) fn with_purge(&self, st: &State, mut mods: Vec<FlowMod>) -> Vec<FlowMod> {
        if st.purge_round {
            let round = st.set.round();
            mods.insert(
                0,
                FlowMod::delete_by_cookie(u64::from(round) << 48, ROUND_MASK),
            );
        }
        mods
    }

    /// One bundle of the flow set's changes, the lock held ([`Shared::with_purge`]).
    fn send(&self, st: &mut State, mods: Vec<FlowMod>) -> Result<(), OfError> {
        let mods = self.with_purge(st, mods);
        self.bundle_mods(mods)?;
        st.purge_round = false;
        Ok(())
    }

    /// OPEN, ADD…, CLOSE (+ barrier); then COMMIT, or DISCARD if anything was rejected.
    pub(super) fn bundle_mods(&self, mods: Vec<FlowMod>) -> Result<(), OfError> {
        let id = self.bundle_id.fetch_add(1, Ordering::Relaxed);
        let flags = bundle_flags::ATOMIC | bundle_flags::ORDERED;
        let ctrl = |t| Body::BundleControl(BundleControl::new(id, t, flags));
        let n = mods.len();
        // Describing a rejected message needs its flow mod; keep only the few words we log.
        let summaries: Vec<_> = mods
            .iter()
            .map(|m| (m.command, m.table_id, m.priority))
            .collect();
        // Boxed into messages one by one as the connection encodes them.
        let adds = mods.into_iter().map(move |m| {
            Body::BundleAdd(BundleAdd {
                bundle_id: id,
                flags,
                // The connection sets the inner xid to the BUNDLE_ADD's.
                msg: Box::new(Msg::new(Version::OF15, 0, Body::FlowMod(m))),
                properties: Vec::new(),
            })
        });
        let bodies = std::iter::once(ctrl(BundleCtrlType::OPEN_REQUEST))
            .chain(adds)
            .chain(std::iter::once(ctrl(BundleCtrlType::CLOSE_REQUEST)));
        let bodies = Batch::streamed(n + 2, bodies);
        let describe = |i: usize, e: &ErrorMsg| match i {
            0 => format!("bundle {id} open"),
            i if i <= n => {
                let (command, table, priority) = summaries[i - 1];
                // The switch echoes the failed message; its match is the useful part.
                let detail = match e.failed_msg().map(|m| m.body) {
                    Some(Body::BundleAdd(b)) => match b.msg.body {
                        Body::FlowMod(fm) => format!(" match={:?}", fm.match_),
                        _ => String::new(),
                    },
                    Some(Body::FlowMod(fm)) => format!(" match={:?}", fm.match_),
                    _ => String::new(),
                };
                format!("flow_mod {command} table={table} priority={priority}{detail}")
            }
            _ => format!("bundle {id} close"),
        };
        let r = match self.transact15(bodies, "bundle") {
            Ok(r) => r,
            Err(e) => {
                self.discard(id, flags);
                return Err(e);
            }
        };
        if let Err(e) = first_error_with(&r, describe) {
            log::warn!("openflow bundle rejected bundle={id} err={e}; discarding");
            self.discard(id, flags);
            return Err(e);
        }
        let r = self.transact15(vec![ctrl(BundleCtrlType::COMMIT_REQUEST)], "commit")?;
        first_error(&r, |_| format!("bundle {id} commit ({n} flow mods)"))?;
        self.counts.bundles.fetch_add(1, Ordering::Relaxed);
        self.counts
            .flow_mods
            .fetch_add(u64::try_from(n).unwrap_or(u64::MAX), Ordering::Relaxed);
        Ok(())
    }

    /// Best effort: OVS also drops an open bundle when the connection closes.
    fn discard(&self, id: u32, flags: u16) {
        let body = Body::BundleControl(BundleControl::new(
            id,
            BundleCtrlType::DISCARD_REQUEST,
            flags,
        ));
        if let Err(e) = self.transact15(vec![body], "discard") {
            log::warn!("openflow bundle discard failed bundle={id} err={e}");
        }
    }

    /// OF1.5 port descriptions (§7.3.5.7), of one port or of all (`port::ANY`).
    fn port_desc(&self, port_no: u32) -> Result<Vec<Port>, OfError> {
        let req = Body::MultipartRequest(MultipartRequest {
            flags: 0,
            body: MultipartRequestBody::PortDesc { port_no },
        });
        let r = self.transact15(vec![req], "port description")?;
        first_error(&r, |_| format!("port description of {port_no}"))?;
        let mut out = Vec::new();
        for (_, m) in r.replies {
            if let Body::MultipartReply(mp) = m.body {
                if let MultipartReplyBody::PortDesc(v) = mp.body {
                    out.extend(v);
                }
            }
        }
        Ok(out)
    }

    fn port_mod_no_flood(&self, ofport: u32, on: bool) -> Result<(), OfError> {
        self.port_mods_no_flood(&[ofport], on)
    }

    /// No-flood on every port of `ofports` in two round trips whatever their number: one
    /// OF1.5 request holding a port description per port, one OF1.0 batch of PORT_MODs.
    fn port_mods_no_flood(&self, ofports: &[u32], on: bool) -> Result<(), OfError> {
        let mut port_nos = Vec::with_capacity(ofports.len());
        for &ofport in ofports {
            let p = u16::try_from(ofport)
                .ok()
                .filter(|p| *p < 0xff00)
                .ok_or(OfError::PortNotFound { ofport })?;
            port_nos.push(p);
        }
        if ofports.is_empty() {
            return Ok(());
        }
        // OVS rejects a PORT_MOD whose hw_addr is not the port's (OFPPMFC_BAD_HW_ADDR),
        // and the address may have changed since the last look: ask each time. Ask over
        // OF1.5 for these ports only: an OF1.0 FEATURES_REPLY is capped at 64 KiB, so it
        // lists only the first ~1,360 ports of a big bridge.
        let reqs: Vec<Body> = ofports
            .iter()
            .map(|&port_no| {
                Body::MultipartRequest(MultipartRequest {
                    flags: 0,
                    body: MultipartRequestBody::PortDesc { port_no },
                })
            })
            .collect();
        let r = self.transact15(reqs, "port description")?;
        let mut hw = std::collections::BTreeMap::new();
        for (_, m) in r.replies {
            if let Body::MultipartReply(mp) = m.body {
                if let MultipartReplyBody::PortDesc(v) = mp.body {
                    hw.extend(v.into_iter().map(|p| (p.port_no, p.hw_addr)));
                }
            }
        }
        let mut mods = Vec::with_capacity(ofports.len());
        for (&ofport, port_no) in ofports.iter().zip(port_nos) {
            let hw_addr = *hw.get(&ofport).ok_or(OfError::PortNotFound { ofport })?;
            mods.push(Body::PortMod10(PortMod10 {
                port_no,
                hw_addr,
                config: if on { OFPPC10_NO_FLOOD } else { 0 },
                mask: OFPPC10_NO_FLOOD,
                advertise: 0,
            }));
        }
        self.counts.round_trips.fetch_add(1, Ordering::Relaxed);
        let r = self.of10.transact(mods, self.timeout)?;
        first_error(&r, |i| {
            format!(
                "OF1.0 port_mod no-flood={on} port={}",
                ofports.get(i).copied().unwrap_or_default()
            )
        })
    }

    fn replay_all(&self) -> Result<(), OfError> {
        self.replay_flows()?;
        self.replay_no_flood()
    }

    fn replay_flows(&self) -> Result<(), OfError> {
        let mut st = self.lock_idle();
        if st.set.is_empty() {
            // Nothing of ours to put back: only this round's leftovers to delete, which
            // the next bundle does first.
            st.purge_round = true;
            log::info!(
                "openflow replayed flows=0 owners=0 (leftovers of this round go with the next bundle)"
            );
            return Ok(());
        }
        let mods = st.set.replay_mods();
        self.bundle_mods(mods)?;
        log::info!(
            "openflow replayed flows={} owners={}",
            st.set.len(),
            st.set.owners().count()
        );
        Ok(())
    }

    /// Re-apply no-flood to every port that wants it: all in one batch, or (when the
    /// batch fails, say for a port gone meanwhile) one by one, returning the first error.
    /// Ports were just set on OF1.0 connection `generation` (read before the PORT_MODs
    /// went out, so never newer than the connection that carried them): if everything
    /// already in `set` was set on that connection too (or it is empty), the whole set now
    /// is.
    fn applied_no_flood(&self, set: &BTreeSet<u32>, generation: u64) {
        if set.is_empty() || self.no_flood_gen.load(Ordering::SeqCst) == generation {
            self.no_flood_gen.store(generation, Ordering::SeqCst);
        }
    }

    fn replay_no_flood(&self) -> Result<(), OfError> {
        let no_flood = self.lock_no_flood();
        let generation = self.of10.state().1;
        // Every port was set on this very connection (a connection event handled after
        // the controllers already used it): repeating the PORT_MODs would change nothing.
        if self.no_flood_gen.load(Ordering::SeqCst) == generation {
            return Ok(());
        }
        let all: Vec<u32> = no_flood.iter().copied().collect();
        let mut first = None;
        if self.port_mods_no_flood(&all, true).is_err() {
            for &p in &all {
                if let Err(e) = self.port_mod_no_flood(p, true) {
                    first.get_or_insert(e);
                }
            }
        }
        match first {
            None => {
                self.no_flood_gen.store(generation, Ordering::SeqCst);
                Ok(())
            }
            Some(e) => Err(e),
        }
    }
}

/// Plan every owner's flows against `set`, each against the set as the owners before it
/// left it (a key moving between two owners of the batch ends with the later one, as with
/// separate applies), committing each plan to `set`: the flow mods in order, and the
/// owners whose flows could not be planned.
fn plan_many(
    set: &mut FlowSet,
    sets: &[(Owner, Vec<Flow>)],
) -> (Vec<FlowMod>, Vec<(Owner, OfError)>) {
    let mut failed = Vec::new();
    let mut mods = Vec::new();
    for (owner, flows) in sets {
        match set.plan_apply(*owner, flows.clone()) {
            Ok(mut plan) => {
                mods.append(&mut plan.mods);
                set.commit(plan);
            }
            Err(e) => failed.push((*owner, e)),
        }
    }
    (mods, failed)
}

/// The first switch error of a batch as an [`OfError::Switch`], naming the message.
fn first_error(r: &Reply, describe: impl Fn(usize) -> String) -> Result<(), OfError> {
    first_error_with(r, |i, _| describe(i))
}

fn first_error_with(
    r: &Reply,
    describe: impl Fn(usize, &ErrorMsg) -> String,
) -> Result<(), OfError> {
    match r.errors.first() {
        None => Ok(()),
        Some((i, e)) => Err(OfError::Switch {
            name: e.name(),
            type_: e.type_.0,
            code: e.code,
            failed: describe(*i, e),
        }),
    }
}

/// Replays after every (re)connect, and retries with backoff until they succeed: after an
/// ovs-vswitchd restart the management socket answers before every port is back, so a
/// first no-flood attempt can find its port missing (and a flow replay can race a second
/// disconnect).
fn replay_loop(sh: &Shared, stop: &Receiver<()>, reconnects: &Sender<u64>) {
    let mut flows_due: Option<u64> = None;
    let mut no_flood_due = false;
    let mut retry_at: Option<Instant> = None;
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
    let mut failures = 0u32;
    loop {
        let wait = retry_at.map_or(Duration::from_secs(3600), |t| {
            t.saturating_duration_since(Instant::now())
        });
        select! {
            recv(stop) -> _ => return,
            recv(sh.of15.events()) -> ev => match ev {
                Ok(ConnEvent::Connected { generation }) => {
                    flows_due = Some(generation);
                    no_flood_due = true;
                    retry_at = Some(Instant::now());
                    backoff.reset();
                }
                Ok(ConnEvent::Disconnected { .. }) => {}
                Err(_) => return,
            },
            recv(sh.of10.events()) -> ev => match ev {
                Ok(ConnEvent::Connected { .. }) => {
                    no_flood_due = true;
                    retry_at = Some(Instant::now());
                    backoff.reset();
                }
                Ok(ConnEvent::Disconnected { .. }) => {}
                Err(_) => return,
            },
            default(wait) => {}
        }
        if retry_at.is_none_or(|t| Instant::now() < t) {
            continue;
        }
        let mut failed = None;
        if let Some(generation) = flows_due {
            match sh.replay_flows() {
                Ok(()) => {
                    flows_due = None;
                    sh.replayed.store(generation, Ordering::SeqCst);
                    let _ = reconnects.try_send(generation);
                }
                Err(e) => failed = Some(format!("flows: {e}")),
            }
        }
        if no_flood_due && flows_due.is_none() {
            match sh.replay_no_flood() {
                Ok(()) => no_flood_due = false,
                Err(e) => failed = Some(format!("no-flood: {e}")),
            }
        }
        match failed {
            None => {
                failures = 0;
                retry_at = None;
            }
            Some(err) => {
                // Retries repeat themselves; say it once per streak, then quietly.
                if failures == 0 {
                    log::warn!("openflow replay failed, retrying err={err}");
                } else {
                    log::debug!("openflow replay retry failed attempt={failures} err={err}");
                }
                failures += 1;
                retry_at = Some(Instant::now() + backoff.next_delay());
            }
        }
    }
}
