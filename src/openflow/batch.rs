//! Group commit of flow changes: how [`super::OfFlows::apply`] and `remove` reach the
//! switch without holding the flow-set lock across a round trip.
//!
//! A caller queues its request and, if no bundle is in flight, becomes the leader: it
//! plans every queued request against the flow set in order, records the plans at once
//! (so the next plans see them), releases the lock, sends one bundle, and takes the lock
//! back to publish each request's result. Requests that arrive meanwhile wait in the queue
//! and go together in the next bundle: four workers no longer take turns holding the lock
//! across two round trips, and a burst of changes costs ovs-vswitchd one flow-table commit
//! (at 5,000 ports each commit makes it rebuild its translation state for every port,
//! ~25 ms here) instead of one per owner.
//!
//! Order on the switch is the order of the plans: one bundle is in flight at a time. If the
//! switch refuses a bundle, its plans are undone in reverse order and, when it held more
//! than one request, each is sent alone, so the error lands on the owner that caused it.
//! `apply_many` queues its owners together, so they share one bundle (a TrafficControl's
//! marks and return flows, the start-up flush). The exclusive operations (a round's
//! replacement, the replay after a reconnect, a raw bundle) wait until no bundle is in
//! flight and hold the lock throughout.

use std::collections::HashMap;
use std::sync::MutexGuard;

use super::OfError;
use super::backend::{Shared, State};
use super::flow::{Flow, Owner};

/// What one caller asked for.
pub(super) enum Op {
    Apply(Vec<Flow>),
    Remove,
}

pub(super) struct Request {
    ticket: u64,
    owner: Owner,
    op: Op,
}

/// The queue and its results, part of the backend's [`State`].
#[derive(Default)]
pub(super) struct Batches {
    queue: Vec<Request>,
    in_flight: bool,
    results: HashMap<u64, Result<(), OfError>>,
    next_ticket: u64,
}

impl Shared {
    /// Queue `op` for `owner` and wait for its result, leading the batches when nobody is.
    pub(super) fn submit(&self, owner: Owner, op: Op) -> Result<(), OfError> {
        self.submit_many(vec![(owner, op)]).pop().unwrap_or(Ok(()))
    }

    /// Queue every `(owner, op)` at once (so they share one bundle, planned in this order)
    /// and wait for their results, in the same order.
    pub(super) fn submit_many(&self, ops: Vec<(Owner, Op)>) -> Vec<Result<(), OfError>> {
        let mut st = self.lock();
        let first = st.batches.next_ticket;
        let n = ops.len() as u64;
        st.batches.next_ticket += n;
        for (i, (owner, op)) in (first..).zip(ops) {
            st.batches.queue.push(Request {
                ticket: i,
                owner,
                op,
            });
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

    /// The lock, once no bundle is in flight: for operations that send while holding it.
    pub(super) fn lock_idle(&self) -> MutexGuard<'_, State> {
        let mut st = self.lock();
        while st.batches.in_flight {
            st = self.idle.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st
    }

    /// Plan, record and send `batch` as one bundle (the lock released while it is on the
    /// wire); publish each request's result.
    fn send_batch<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        batch: Vec<Request>,
    ) -> MutexGuard<'a, State> {
        let alone = batch.len() == 1;
        let mut mods = Vec::new();
        let mut undo = Vec::new();
        let mut sent = Vec::new();
        for req in batch {
            // Kept to resend it alone if the bundle it shares is refused.
            let again = match (&req.op, alone) {
                (Op::Apply(f), false) => Some(Op::Apply(f.clone())),
                (Op::Remove, false) => Some(Op::Remove),
                (_, true) => None,
            };
            let plan = match req.op {
                Op::Apply(flows) => st.set.plan_apply(req.owner, flows),
                Op::Remove => Ok(st.set.plan_remove(req.owner)),
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
                    sent.push((req.ticket, req.owner, again));
                }
            }
        }
        if mods.is_empty() {
            return st;
        }
        let mods = self.with_purge(&st, mods);
        drop(st);
        let r = self.bundle_mods(mods);
        let mut st = self.lock();
        match r {
            Ok(()) => {
                st.purge_round = false;
                for (ticket, _, _) in sent {
                    st.batches.results.insert(ticket, Ok(()));
                }
            }
            Err(e) => {
                for u in undo.into_iter().rev() {
                    st.set.undo(u);
                }
                if alone {
                    for (ticket, _, _) in sent {
                        st.batches.results.insert(ticket, Err(e.clone()));
                    }
                } else {
                    log::warn!(
                        "openflow one bundle for {} owners failed ({e}); sending them one by one",
                        sent.len()
                    );
                    for (ticket, owner, again) in sent {
                        if let Some(op) = again {
                            st = self.send_batch(st, vec![Request { ticket, owner, op }]);
                        }
                    }
                }
            }
        }
        st
    }
}
