//! Cold-start batching of flows. While the first full sync runs, the flows of the deferred
//! categories are collected per owner instead of sent; [`DeferredFlows::flush`] sends them
//! all with one [`Flows::apply_many`] at the end of that sync — or, when the bridge holds
//! the flows of a previous round, with one [`Flows::replace_round`] that also deletes them.
//!
//! Two scopes:
//! * [`Scope::AllBut`] the ExternalNode category, on a bridge without old flows:
//!   ovs-vswitchd rebuilds its translation state for every port after each flow-table
//!   commit, so at 5,000 ports 1,000 one-TC bundles cost it ~20 s of CPU where one bundle
//!   of the same flows costs ~1 s, and the L2 flows' own bundle another ~1.4 s. The
//!   ExternalNode's flows (uplink, host, policy bypass) pass straight through: the VM's
//!   connectivity must not wait for the TCs. (The daemon sends the base flows, which they
//!   build on, straight to the switch too.)
//! * [`Scope::All`], on a bridge that holds a previous round (tether's own after a restart,
//!   or Antrea's agent's, adopted): the old flows keep forwarding until one atomic bundle
//!   puts every new flow in and takes every old one out. Antrea's pipeline uses other table
//!   numbers than tether's, so the two must never be on the switch mixed.
//!
//! Ordering: `flush` holds the collection lock while it sends, and every `apply`/`remove`
//! of a deferred category takes that lock first, so a sync that comes after the flush can
//! never be overtaken by the older flows the flush is sending.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::controller::Flows;
use crate::openflow::{Category, Flow, FlowChange, OfError, Owner};

/// What a flush did: the owners whose flows failed, and the old round's delete (None when
/// there was none to do).
pub type Flushed = (Vec<(Owner, OfError)>, Option<Result<(), OfError>>);

/// Which owners' flows wait for the flush.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    AllBut(Category),
    All,
}

pub struct DeferredFlows {
    inner: Arc<dyn Flows>,
    scope: Scope,
    /// `Some` until the flush: the latest flows asked for, per owner.
    pending: Mutex<Option<BTreeMap<Owner, Vec<Flow>>>>,
}

impl DeferredFlows {
    /// Start collecting the flows of `scope`.
    pub fn new(inner: Arc<dyn Flows>, scope: Scope) -> DeferredFlows {
        DeferredFlows {
            inner,
            scope,
            pending: Mutex::new(Some(BTreeMap::new())),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<BTreeMap<Owner, Vec<Flow>>>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn defers(&self, owner: Owner) -> bool {
        match self.scope {
            Scope::AllBut(c) => owner.category != c,
            Scope::All => true,
        }
    }

    /// Send what was collected and stop collecting: one `apply_many`, or with `old_round`
    /// one `replace_round` that also deletes that round's flows (its result is the second
    /// value; None when nothing was deleted). Returns the owners whose flows failed; their
    /// syncs must run again. A second flush does nothing.
    pub fn flush(&self, old_round: Option<u16>) -> Flushed {
        let mut pending = self.lock();
        let sets: Vec<(Owner, Vec<Flow>)> = match pending.take() {
            Some(sets) => sets.into_iter().collect(),
            None => return (Vec::new(), None),
        };
        match old_round {
            Some(round) => {
                let (failed, deleted) = self.inner.replace_round(sets, round);
                (failed, Some(deleted))
            }
            None if sets.is_empty() => (Vec::new(), None),
            None => (self.inner.apply_many(sets), None),
        }
    }

    /// Whether flows are still being collected.
    pub fn collecting(&self) -> bool {
        self.lock().is_some()
    }
}

impl Flows for DeferredFlows {
    fn apply(&self, owner: Owner, flows: Vec<Flow>) -> Result<(), OfError> {
        if !self.defers(owner) {
            return self.inner.apply(owner, flows);
        }
        let mut pending = self.lock();
        match pending.as_mut() {
            Some(sets) => {
                sets.insert(owner, flows);
                Ok(())
            }
            None => {
                drop(pending);
                self.inner.apply(owner, flows)
            }
        }
    }

    /// Deferred owners are collected while collecting; the others (and every owner after
    /// the flush) go to the backend as one `apply_many`.
    fn apply_many(&self, sets: Vec<(Owner, Vec<Flow>)>) -> Vec<(Owner, OfError)> {
        let mut pending = self.lock();
        let now: Vec<(Owner, Vec<Flow>)> = match pending.as_mut() {
            Some(collected) => sets
                .into_iter()
                .filter_map(|(owner, flows)| {
                    if self.defers(owner) {
                        collected.insert(owner, flows);
                        None
                    } else {
                        Some((owner, flows))
                    }
                })
                .collect(),
            None => sets,
        };
        drop(pending);
        if now.is_empty() {
            return Vec::new();
        }
        self.inner.apply_many(now)
    }

    /// As `apply_many`: a deferred owner's change is made to its collected flows (a patch
    /// of an owner not collected goes to the backend, which holds its flows).
    fn change_many(&self, changes: Vec<(Owner, FlowChange)>) -> Vec<(Owner, OfError)> {
        let mut pending = self.lock();
        let now: Vec<(Owner, FlowChange)> = match pending.as_mut() {
            Some(collected) => changes
                .into_iter()
                .filter_map(|(owner, change)| {
                    let collect = self.defers(owner)
                        && (collected.contains_key(&owner)
                            || matches!(change, FlowChange::Replace(_)));
                    if !collect {
                        return Some((owner, change));
                    }
                    let flows = collected.remove(&owner).unwrap_or_default();
                    collected.insert(owner, change.applied_to(flows));
                    None
                })
                .collect(),
            None => changes,
        };
        drop(pending);
        if now.is_empty() {
            return Vec::new();
        }
        self.inner.change_many(now)
    }

    fn remove(&self, owner: Owner) -> Result<(), OfError> {
        if self.defers(owner) {
            let mut pending = self.lock();
            if let Some(sets) = pending.as_mut() {
                sets.remove(&owner);
            }
            // Held across the call: a flush cannot send this owner's flows afterwards.
            return self.inner.remove(owner);
        }
        self.inner.remove(owner)
    }

    fn set_no_flood(&self, ofport: u32, on: bool) -> Result<(), OfError> {
        self.inner.set_no_flood(ofport, on)
    }

    fn set_no_flood_many(&self, ofports: &[u32], on: bool) -> Result<(), OfError> {
        self.inner.set_no_flood_many(ofports, on)
    }

    fn delete_round(&self, round: u16) -> Result<(), OfError> {
        self.inner.delete_round(round)
    }

    fn replace_round(
        &self,
        sets: Vec<(Owner, Vec<Flow>)>,
        round: u16,
    ) -> (Vec<(Owner, OfError)>, Result<(), OfError>) {
        self.inner.replace_round(sets, round)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::{Action, MatchField};
    use crate::testing::FakeFlows;

    fn tc(object: u32) -> Owner {
        Owner::new(Category::TRAFFIC_CONTROL, object)
    }

    fn flow(port: u32) -> Flow {
        Flow::new(3, 200)
            .matching(MatchField::InPort(port))
            .actions([Action::output(port + 100)])
    }

    #[test]
    fn collects_all_but_the_externalnode_until_the_flush_then_passes_through() {
        let inner = Arc::new(FakeFlows::default());
        let d = DeferredFlows::new(inner.clone(), Scope::AllBut(Category::EXTERNAL_NODE));
        let en = Owner::new(Category::EXTERNAL_NODE, 1);
        // Another category goes straight to the switch.
        d.apply(en, vec![flow(9)]).unwrap();
        assert_eq!(inner.of(en), vec![flow(9)]);
        // TC flows are collected; a later apply of one owner replaces its earlier one.
        d.apply(tc(1), vec![flow(1)]).unwrap();
        d.apply(tc(2), vec![flow(2)]).unwrap();
        d.apply(tc(1), vec![flow(3)]).unwrap();
        d.apply(tc(4), vec![flow(4)]).unwrap();
        d.remove(tc(4)).unwrap();
        // So are the other categories' (the L2 forwarding flows).
        let l2 = Owner::new(Category::DEFAULT, 1);
        d.apply(l2, vec![flow(7)]).unwrap();
        assert!(inner.of(tc(1)).is_empty());
        assert!(inner.of(l2).is_empty());
        assert_eq!(*inner.applies.lock().unwrap(), 1);
        assert!(d.collecting());
        // One batch of the three live owners, with their latest flows.
        assert!(d.flush(None).0.is_empty());
        assert_eq!(*inner.batches.lock().unwrap(), vec![3]);
        assert_eq!(inner.of(l2), vec![flow(7)]);
        assert_eq!(inner.of(tc(1)), vec![flow(3)]);
        assert_eq!(inner.of(tc(2)), vec![flow(2)]);
        assert!(inner.of(tc(4)).is_empty());
        // After the flush: straight through, and a second flush sends nothing.
        assert!(!d.collecting());
        d.apply(tc(2), vec![flow(5)]).unwrap();
        assert_eq!(inner.of(tc(2)), vec![flow(5)]);
        assert!(d.flush(None).0.is_empty());
        assert_eq!(*inner.batches.lock().unwrap(), vec![3]);
    }

    #[test]
    fn a_failed_flush_names_the_owners() {
        let inner = Arc::new(FakeFlows::default());
        let d = DeferredFlows::new(inner.clone(), Scope::AllBut(Category::EXTERNAL_NODE));
        d.apply(tc(1), vec![flow(1)]).unwrap();
        d.apply(tc(2), vec![flow(2)]).unwrap();
        *inner.fail.lock().unwrap() = Some(OfError::Disconnected {
            socket: "br-int.mgmt".into(),
        });
        let failed: Vec<Owner> = d.flush(None).0.into_iter().map(|(o, _)| o).collect();
        assert_eq!(failed, vec![tc(1), tc(2)]);
        assert!(!d.collecting());
    }

    /// On a bridge with a previous round, every category waits, and the flush is one
    /// replace of that round (Antrea's flows are never mixed with tether's).
    #[test]
    fn scope_all_defers_every_owner_and_replaces_the_round() {
        let inner = Arc::new(FakeFlows::default());
        let d = DeferredFlows::new(inner.clone(), Scope::All);
        let base = Owner::new(Category::DEFAULT, 0);
        let en = Owner::new(Category::EXTERNAL_NODE, 1);
        d.apply(base, vec![flow(8)]).unwrap();
        d.apply(en, vec![flow(9)]).unwrap();
        d.apply(tc(1), vec![flow(1)]).unwrap();
        assert_eq!(
            *inner.applies.lock().unwrap(),
            0,
            "nothing sent before the flush"
        );
        let (failed, deleted) = d.flush(Some(7));
        assert!(failed.is_empty());
        assert_eq!(deleted, Some(Ok(())));
        assert_eq!(*inner.replaced.lock().unwrap(), vec![(3, 7)]);
        assert_eq!(inner.of(en), vec![flow(9)]);
        d.apply(en, vec![flow(10)]).unwrap();
        assert_eq!(inner.of(en), vec![flow(10)]);
    }

    #[test]
    fn changes_patch_the_collected_flows_and_pass_through_after_the_flush() {
        let inner = Arc::new(FakeFlows::default());
        let d = DeferredFlows::new(inner.clone(), Scope::AllBut(Category::EXTERNAL_NODE));
        let np = Owner::new(Category::NETWORK_POLICY, 2);
        let patch = |add: Vec<Flow>, remove: Vec<Flow>| FlowChange::Patch {
            add,
            remove: remove.into_iter().map(|f| f.key).collect(),
        };
        assert!(
            d.change_many(vec![(np, FlowChange::Replace(vec![flow(1), flow(2)]))])
                .is_empty()
        );
        assert!(
            d.change_many(vec![(np, patch(vec![flow(3)], vec![flow(1)]))])
                .is_empty()
        );
        assert!(inner.of(np).is_empty(), "collected, not sent");
        assert!(d.flush(None).0.is_empty());
        assert_eq!(inner.of(np), vec![flow(2), flow(3)]);
        // After the flush the backend patches what it holds.
        assert!(
            d.change_many(vec![(np, patch(vec![flow(4)], vec![flow(2)]))])
                .is_empty()
        );
        assert_eq!(inner.of(np), vec![flow(3), flow(4)]);
    }
}
