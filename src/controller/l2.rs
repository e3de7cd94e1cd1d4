//! The L2 forwarding controller: one `L2ForwardingCalc` flow per Pod port (its MAC to its
//! ofport), all under one owner, recomputed from the interface store whenever a Pod
//! port's MAC or ofport changes.

use std::sync::Arc;

use super::interfaces::{Interfaces, Role};
use super::traits::{Bridge, Flows};
use crate::openflow::{Category, Flow, OfError, Owner};
use crate::pipeline;

/// The owner of every L2 forwarding flow (the pipeline's base flows are object 0).
pub const L2_OWNER: Owner = Owner {
    category: Category::DEFAULT,
    object: 1,
};

/// The flows for every Pod port with a MAC and an ofport, sorted, one per MAC.
pub fn l2_flows(ifs: &Interfaces) -> Vec<Flow> {
    let mut flows: Vec<_> = ifs
        .iter()
        .filter(|i| matches!(i.role, Role::Pod { .. }))
        .filter_map(|i| {
            Some(pipeline::l2_port_flow(
                crate::mac::parse(i.mac()?)?,
                i.ofport()?,
            ))
        })
        .collect();
    flows.sort();
    flows.dedup_by(|a, b| a.key == b.key);
    flows
}

pub struct L2Controller {
    bridge: Arc<dyn Bridge>,
    flows: Arc<dyn Flows>,
}

impl L2Controller {
    pub fn new(bridge: Arc<dyn Bridge>, flows: Arc<dyn Flows>) -> L2Controller {
        L2Controller { bridge, flows }
    }

    /// Snapshot the interface store, plan its flows, apply them as one bundle.
    pub fn sync(&self) -> Result<(), OfError> {
        self.flows
            .apply(L2_OWNER, l2_flows(&self.bridge.interfaces()))
    }
}
