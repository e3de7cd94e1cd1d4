//! Cold-start batching of flows. While the first full sync runs, the flows of one category
//! (TrafficControl's) are collected per owner instead of sent; [`DeferredFlows::flush`]
//! sends them all with one [`Flows::apply_many`] at the end of that sync.
//!
//! Why: ovs-vswitchd rebuilds its translation state for every port after each flow-table
//! commit, so at 5,000 ports 1,000 one-TC bundles cost it ~20 s of CPU where one bundle of
//! the same flows costs ~1 s. Other categories (the ExternalNode's uplink flows, the L2
//! flows) pass straight through: the VM's connectivity must not wait for the TCs.
//!
//! Ordering: `flush` holds the collection lock while it sends, and every `apply`/`remove`
//! of the category takes that lock first, so a sync that comes after the flush can never
//! be overtaken by the older flows the flush is sending.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::openflow::{Category, Flow, Flows, OfError, Owner};

pub struct DeferredFlows {
    inner: Arc<dyn Flows>,
    category: Category,
    /// `Some` until the flush: the latest flows asked for, per owner.
    pending: Mutex<Option<BTreeMap<Owner, Vec<Flow>>>>,
}

impl DeferredFlows {
    /// Start collecting `category`'s flows.
    pub fn new(inner: Arc<dyn Flows>, category: Category) -> DeferredFlows {
        DeferredFlows {
            inner,
            category,
            pending: Mutex::new(Some(BTreeMap::new())),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<BTreeMap<Owner, Vec<Flow>>>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Send what was collected (one `apply_many`) and stop collecting. Returns the owners
    /// whose flows failed; their syncs must run again. A second flush does nothing.
    pub fn flush(&self) -> Vec<(Owner, OfError)> {
        let mut pending = self.lock();
        match pending.take() {
            Some(sets) if !sets.is_empty() => self.inner.apply_many(sets.into_iter().collect()),
            _ => Vec::new(),
        }
    }

    /// Whether flows are still being collected.
    pub fn collecting(&self) -> bool {
        self.lock().is_some()
    }
}

impl Flows for DeferredFlows {
    fn apply(&self, owner: Owner, flows: Vec<Flow>) -> Result<(), OfError> {
        if owner.category != self.category {
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

    fn remove(&self, owner: Owner) -> Result<(), OfError> {
        if owner.category == self.category {
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

    fn delete_round(&self, round: u16) -> Result<(), OfError> {
        self.inner.delete_round(round)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::fake::FakeFlows;
    use crate::openflow::{Action, MatchField};

    fn tc(object: u32) -> Owner {
        Owner::new(Category::TRAFFIC_CONTROL, object)
    }

    fn flow(port: u32) -> Flow {
        Flow::new(3, 200)
            .matching(MatchField::InPort(port))
            .actions([Action::output(port + 100)])
    }

    /// Counts `apply` and `apply_many` calls on top of a fake.
    #[derive(Default)]
    struct Counting {
        fake: FakeFlows,
        applies: Mutex<usize>,
        batches: Mutex<Vec<usize>>,
    }

    impl Flows for Counting {
        fn apply(&self, owner: Owner, flows: Vec<Flow>) -> Result<(), OfError> {
            *self.applies.lock().unwrap() += 1;
            self.fake.apply(owner, flows)
        }
        fn apply_many(&self, sets: Vec<(Owner, Vec<Flow>)>) -> Vec<(Owner, OfError)> {
            self.batches.lock().unwrap().push(sets.len());
            sets.into_iter()
                .filter_map(|(o, f)| self.fake.apply(o, f).err().map(|e| (o, e)))
                .collect()
        }
        fn remove(&self, owner: Owner) -> Result<(), OfError> {
            self.fake.remove(owner)
        }
        fn set_no_flood(&self, ofport: u32, on: bool) -> Result<(), OfError> {
            self.fake.set_no_flood(ofport, on)
        }
        fn delete_round(&self, round: u16) -> Result<(), OfError> {
            self.fake.delete_round(round)
        }
    }

    #[test]
    fn collects_the_category_until_the_flush_then_passes_through() {
        let inner = Arc::new(Counting::default());
        let d = DeferredFlows::new(inner.clone(), Category::TRAFFIC_CONTROL);
        let en = Owner::new(Category::EXTERNAL_NODE, 1);
        // Another category goes straight to the switch.
        d.apply(en, vec![flow(9)]).unwrap();
        assert_eq!(inner.fake.of(en), vec![flow(9)]);
        // TC flows are collected; a later apply of one owner replaces its earlier one.
        d.apply(tc(1), vec![flow(1)]).unwrap();
        d.apply(tc(2), vec![flow(2)]).unwrap();
        d.apply(tc(1), vec![flow(3)]).unwrap();
        d.apply(tc(4), vec![flow(4)]).unwrap();
        d.remove(tc(4)).unwrap();
        assert!(inner.fake.of(tc(1)).is_empty());
        assert_eq!(*inner.applies.lock().unwrap(), 1);
        assert!(d.collecting());
        // One batch of the two live owners, with their latest flows.
        assert!(d.flush().is_empty());
        assert_eq!(*inner.batches.lock().unwrap(), vec![2]);
        assert_eq!(inner.fake.of(tc(1)), vec![flow(3)]);
        assert_eq!(inner.fake.of(tc(2)), vec![flow(2)]);
        assert!(inner.fake.of(tc(4)).is_empty());
        // After the flush: straight through, and a second flush sends nothing.
        assert!(!d.collecting());
        d.apply(tc(2), vec![flow(5)]).unwrap();
        assert_eq!(inner.fake.of(tc(2)), vec![flow(5)]);
        assert!(d.flush().is_empty());
        assert_eq!(*inner.batches.lock().unwrap(), vec![2]);
    }

    #[test]
    fn a_failed_flush_names_the_owners() {
        let inner = Arc::new(Counting::default());
        let d = DeferredFlows::new(inner.clone(), Category::TRAFFIC_CONTROL);
        d.apply(tc(1), vec![flow(1)]).unwrap();
        d.apply(tc(2), vec![flow(2)]).unwrap();
        *inner.fake.fail.lock().unwrap() = Some(OfError::Disconnected {
            socket: "br-int.mgmt".into(),
        });
        let failed: Vec<Owner> = d.flush().into_iter().map(|(o, _)| o).collect();
        assert_eq!(failed, vec![tc(1), tc(2)]);
        assert!(!d.collecting());
    }
}
