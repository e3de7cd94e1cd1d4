//! How the flow set's changes reach the switch: group commit, and the one way a refused
//! bundle is handled.
//!
//! A caller queues its requests (an owner's flows, an owner's removal, the delete of an
//! earlier round) and, if no bundle is in flight, becomes the leader: it plans every
//! queued request against the flow set in order, records the plans at once (so the next
//! plans see them), releases the lock, sends one bundle, and takes the lock back to publish
//! each request's result. Requests that arrive meanwhile wait in the queue and go together
//! in the next bundle: four workers no longer take turns holding the lock across two round
//! trips, and a burst of changes costs ovs-vswitchd one flow-table commit (at 5,000 ports
//! each commit makes it rebuild its translation state for every port, ~25 ms here)
//! instead of one per owner. A round's replacement at start-up is such a batch too: every
//! owner's flows, then the delete of the old round by cookie.
//!
//! Order on the switch is the order of the plans: one bundle is in flight at a time. If
//! the switch refuses a bundle, its plans are undone in reverse order (each plan recorded
//! how) and, when it held more than one request, each is sent alone, in order, so the error
//! lands on the request that caused it. The exclusive operations (the replay after a
//! reconnect, a raw bundle, drift's read-back) wait until no bundle is in flight and hold
//! the lock throughout.

use std::sync::MutexGuard;

use super::OfError;
use super::flow::{Owner, ROUND_MASK};
use super::flowmod::FlowMod;
use super::shared::{Op, Request, Shared, State};

impl Shared {
    /// Queue `op` and wait for its result, leading the batches when nobody is.
    pub(super) fn submit(&self, op: Op) -> Result<(), OfError> {
        self.submit_many(vec![op]).pop().unwrap_or(Ok(()))
    }

    /// Queue every op at once (so they share one bundle, planned in this order) and wait
    /// for their results, in the same order.
    pub(super) fn submit_many(&self, ops: Vec<Op>) -> Vec<Result<(), OfError>> {
        let mut st = self.lock();
        let first = st.batches.next_ticket;
        let n = ops.len() as u64;
        st.batches.next_ticket += n;
        for (ticket, op) in (first..).zip(ops) {
            st.batches.queue.push(Request { ticket, op });
        }
        loop {
            if (first..first + n).all(|t| st.batches.results.contains_key(&t)) {
                return (first..first + n)
                    .map(|t| st.batches.results.remove(&t).unwrap_or(Ok(())))
                    .collect();
            }
            if st.batches.in_flight {
                st = self.idle.wait(st).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            // Lead one bundle of everything queued (this request included); whoever is
            // still waiting afterwards leads the next.
            st.batches.in_flight = true;
            let batch = std::mem::take(&mut st.batches.queue);
            st = self.send_batch(st, batch);
            st.batches.in_flight = false;
            self.idle.notify_all();
        }
    }

    /// Plan, record and send `batch` as one bundle (the lock released while it is on the
    /// wire); publish each request's result. A refused bundle of several requests is
    /// undone and each request sent alone.
    fn send_batch<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        batch: Vec<Request>,
    ) -> MutexGuard<'a, State> {
        let alone = batch.len() == 1;
        let owners = batch
            .iter()
            .filter(|r| !matches!(r.op, Op::DeleteRound(_)))
            .count();
        let mut replaced = None;
        let mut mods = Vec::new();
        let mut undo = Vec::new();
        let mut sent = Vec::new();
        for req in batch {
            // Kept to resend it alone if the bundle it shares is refused.
            let again = (!alone).then(|| req.op.clone());
            let plan = match req.op {
                Op::Apply(owner, flows) => st.set.plan_apply(owner, flows),
                Op::Patch(owner, add, remove) => st.set.plan_patch(owner, add, remove),
                Op::Remove(owner) => Ok(st.set.plan_remove(owner)),
                Op::DeleteRound(round) => {
                    // No change to the set: the old round's flows are not in it. After the
                    // adds before it: an add that replaces an old flow of the same match
                    // and priority gives it the new cookie, so the delete cannot take it.
                    mods.push(FlowMod::delete_by_cookie(
                        u64::from(round) << 48,
                        ROUND_MASK,
                    ));
                    replaced = Some(round);
                    sent.push((req.ticket, again));
                    continue;
                }
            };
            match plan {
                Err(e) => {
                    st.batches.results.insert(req.ticket, Err(e));
                }
                Ok(plan) if plan.is_empty() => {
                    st.set.commit(plan);
                    st.batches.results.insert(req.ticket, Ok(()));
                }
                Ok(mut plan) => {
                    mods.append(&mut plan.mods);
                    undo.push(st.set.commit_undoable(plan));
                    sent.push((req.ticket, again));
                }
            }
        }
        if mods.is_empty() {
            return st;
        }
        let n = mods.len() - usize::from(replaced.is_some());
        let mods = self.with_purge(&st, mods);
        drop(st);
        let r = self.bundle_mods(mods);
        let mut st = self.lock();
        match r {
            Ok(()) => {
                st.purge_round = false;
                for (ticket, _) in sent {
                    st.batches.results.insert(ticket, Ok(()));
                }
                if let Some(round) = replaced {
                    log::info!(
                        "openflow replaced round {round} in one bundle: {n} flow mods for {owners} owners"
                    );
                }
            }
            Err(e) => {
                for u in undo.into_iter().rev() {
                    st.set.undo(u);
                }
                if alone {
                    for (ticket, _) in sent {
                        st.batches.results.insert(ticket, Err(e.clone()));
                    }
                } else {
                    log::warn!(
                        "openflow one bundle of {} requests failed ({e}); sending them one by one",
                        sent.len()
                    );
                    for (ticket, again) in sent {
                        if let Some(op) = again {
                            st = self.send_batch(st, vec![Request { ticket, op }]);
                        }
                    }
                }
            }
        }
        st
    }
}

/// The owners whose request failed, from the results of `submit_many` for their ops in
/// the same order: those refused while planning (conflicts) first, then those the switch
/// refused, each in the order given.
pub(super) fn failed_owners(
    owners: Vec<Owner>,
    results: Vec<Result<(), OfError>>,
) -> Vec<(Owner, OfError)> {
    let (mut failed, refused): (Vec<_>, Vec<_>) = owners
        .into_iter()
        .zip(results)
        .filter_map(|(o, r)| r.err().map(|e| (o, e)))
        .partition(|(_, e)| matches!(e, OfError::Conflict { .. }));
    failed.extend(refused);
    failed
}
