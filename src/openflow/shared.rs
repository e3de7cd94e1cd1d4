//! What the backend's parts share: the two connections, the flow set and the group
//! commit's queue under one lock ([`State`]), the no-flood set under its own, the counters;
//! and the ways to the switch every part uses — a request and its reply
//! ([`Shared::transact15`]), one atomic ordered bundle ([`Shared::bundle_mods`]), the
//! ports' descriptions. Who changes the flow set is not decided here: `commit` (applies,
//! removes, a round's replacement), `replay` (after a reconnect), `drift` (flows others
//! changed); no-flood is `noflood`'s.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::OfError;
use super::conn::{Batch, Conn, Reply};
use super::consts::{BundleCtrlType, Version, bundle_flags};
use super::flow::{Flow, FlowKey, Owner, ROUND_MASK};
use super::flowmod::{FlowMod, MultipartReplyBody, MultipartRequest, MultipartRequestBody};
use super::flowset::FlowSet;
use super::msg::{Body, BundleAdd, BundleControl, ErrorMsg, Msg, Port};

pub(super) struct State {
    pub(super) set: FlowSet,
    /// Requests waiting for the next bundle, and whether one is in flight
    /// (`openflow::commit`).
    pub(super) batches: Batches,
    /// A connection came up while the set was empty: the delete of this round's cookie
    /// (the leftovers of a run that crashed before persisting its round) still has to go,
    /// at the head of the next bundle. A bundle of its own would cost vswitchd one more
    /// flow-table commit, which at 5,000 ports is ~1.4 s of its CPU before the first real
    /// flows (the cold start, docs/design.md#start-up).
    pub(super) purge_round: bool,
}

pub(super) struct Shared {
    pub(super) of15: Conn,
    pub(super) of10: Conn,
    pub(super) state: Mutex<State>,
    /// Signalled when a bundle of queued requests has been answered.
    pub(super) idle: Condvar,
    /// Ports that want no-flood; its own lock, held across the OF1.0 port mods (they never
    /// wait for a flow bundle, nor a flow bundle for them).
    pub(super) no_flood: Mutex<BTreeSet<u32>>,
    pub(super) timeout: Duration,
    /// The OF1.5 connection generation whose flow replay is done: until it equals the
    /// connection's, what the switch holds is not yet what tether installed (`drift`).
    pub(super) replayed: AtomicU64,
    pub(super) bundle_id: AtomicU32,
    pub(super) counts: Counts,
    /// Why the flows on the switch may not be what tether installed right now, while
    /// that is so (`drift`): no flow monitor, or a read-back that fails.
    pub(super) drift_problem: Mutex<Option<String>>,
    /// The OF1.0 connection generation on which every port of the no-flood set is known
    /// to have been set (only changed with the set's lock held): a replay for that
    /// generation would only repeat it (`replay_no_flood`).
    pub(super) no_flood_gen: AtomicU64,
}

/// What this backend has asked of the switch, for metrics and for tests that count.
#[derive(Default)]
pub(super) struct Counts {
    /// Requests that waited for the switch's answer (a barrier): one round trip each.
    pub(super) round_trips: AtomicU64,
    /// Bundles committed.
    pub(super) bundles: AtomicU64,
    /// Flow mods in committed bundles.
    pub(super) flow_mods: AtomicU64,
    /// Read-backs of flows the switch reported changed (`drift`).
    pub(super) drift_checks: AtomicU64,
    /// Owners whose flows were found changed outside tether and installed again.
    pub(super) drift_repairs: AtomicU64,
}

/// What one caller asked of the group commit (`commit`).
#[derive(Clone)]
pub(super) enum Op {
    /// Install exactly these flows for the owner.
    Apply(Owner, Vec<Flow>),
    /// Add (or change) these flows of the owner and delete these keys of it.
    Patch(Owner, Vec<Flow>, Vec<FlowKey>),
    /// Delete every flow of the owner.
    Remove(Owner),
    /// Delete every flow of this earlier round by cookie (a round's replacement).
    DeleteRound(u16),
}

pub(super) struct Request {
    pub(super) ticket: u64,
    pub(super) op: Op,
}

/// The group commit's queue and its results (`commit`), part of [`State`].
#[derive(Default)]
pub(super) struct Batches {
    pub(super) queue: Vec<Request>,
    pub(super) in_flight: bool,
    pub(super) results: HashMap<u64, Result<(), OfError>>,
    pub(super) next_ticket: u64,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The lock, once no bundle is in flight: for operations that send while holding it.
    pub(super) fn lock_idle(&self) -> MutexGuard<'_, State> {
        let mut st = self.lock();
        while st.batches.in_flight {
            st = self.idle.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st
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

    /// Raw flow mods as one bundle, exclusive (no group bundle in flight, the lock held).
    pub(super) fn bundle(&self, mods: Vec<FlowMod>) -> Result<(), OfError> {
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
    pub(super) fn port_desc(&self, port_no: u32) -> Result<Vec<Port>, OfError> {
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
}

/// The first switch error of a batch as an [`OfError::Switch`], naming the message.
pub(super) fn first_error(r: &Reply, describe: impl Fn(usize) -> String) -> Result<(), OfError> {
    first_error_with(r, |i, _| describe(i))
}

pub(super) fn first_error_with(
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
