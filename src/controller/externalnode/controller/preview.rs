//! What a sync would do (`tether plan`, `tether check`): the same snapshot and the same
//! decision as `reconcile`, and nothing done: only reads of OVSDB and the kernel.

use super::*;
use crate::netlink::NicConfig;

/// A sync's decision, with what it would start from and the configuration it would move.
#[derive(Clone, Debug)]
pub struct EnPreview {
    /// A step a crash left recorded: finished (restore) or rolled back (takeover) first.
    pub recorded: Option<String>,
    /// NICs given back first from the state directory's copy of their configuration (OVS
    /// lost their host port).
    pub orphans: Vec<String>,
    pub snapshot: Snapshot,
    pub plan: EnPlan,
    /// The configuration that would move, by link name: the NIC's for a takeover, the
    /// host port's for each NIC given back.
    pub configs: BTreeMap<String, NicConfig>,
}

impl EnController {
    pub fn preview(&self) -> EnPreview {
        let snapshot = self.snapshot();
        let plan = decide(&snapshot);
        let moving = plan
            .nic
            .iter()
            .filter(|p| p.attach != Attach::Keep)
            .map(|p| p.nic.clone())
            .chain(plan.release.iter().cloned());
        let configs = moving
            .filter_map(|name| {
                let l = self.links.link_by_name(&name).ok()?;
                Some((name, capture(self.links.as_ref(), l.index).ok()?))
            })
            .collect();
        EnPreview {
            recorded: self.bridge.bridge_external_id(RECORD_KEY).ok().flatten(),
            orphans: self.orphans(&snapshot.attached),
            snapshot,
            plan,
            configs,
        }
    }
}
