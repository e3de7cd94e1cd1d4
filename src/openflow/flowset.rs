//! The flows tether has installed, per owner, and the pure diff from those to a new
//! desired set. [`FlowSet::plan_apply`] returns the flow mods (delete_strict, modify_strict,
//! add) for one owner; the caller sends them as one bundle and calls [`FlowSet::commit`]
//! only when the switch accepted it, so the set always mirrors what is on the bridge.
//!
//! A flow key (table, priority, match) belongs to at most one owner; asking for a key
//! another owner holds is a [`OfError::Conflict`], not a silent takeover.

use std::collections::{BTreeMap, HashMap};

use super::OfError;
use super::consts::FlowModCommand;
use super::flow::{Flow, FlowKey, FlowValue, Owner, ROUND_MASK, cookie};
use super::flowmod::FlowMod;

/// Installed flows by owner, plus an index from key to owner for conflict checks.
#[derive(Debug, Default)]
pub struct FlowSet {
    round: u16,
    owners: BTreeMap<Owner, BTreeMap<FlowKey, FlowValue>>,
    holder: HashMap<FlowKey, Owner>,
}

/// What to send for one owner and the state to record once it is on the switch.
#[derive(Debug)]
pub struct Plan {
    pub owner: Owner,
    /// Flow mods in sending order: deletes, then modifies, then adds.
    pub mods: Vec<FlowMod>,
    next: BTreeMap<FlowKey, FlowValue>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.mods.is_empty()
    }
}

impl FlowSet {
    pub fn new(round: u16) -> FlowSet {
        FlowSet {
            round,
            ..FlowSet::default()
        }
    }

    pub fn round(&self) -> u16 {
        self.round
    }

    /// The cookie of `owner`'s flows in this round.
    pub fn cookie(&self, owner: Owner) -> u64 {
        cookie(self.round, owner.category, owner.object)
    }

    /// Number of installed flows over all owners.
    pub fn len(&self) -> usize {
        self.holder.len()
    }

    pub fn is_empty(&self) -> bool {
        self.holder.is_empty()
    }

    /// Installed flows of one owner, in key order.
    pub fn flows(&self, owner: Owner) -> Vec<Flow> {
        self.owners
            .get(&owner)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| Flow {
                        key: k.clone(),
                        value: v.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn owners(&self) -> impl Iterator<Item = Owner> + '_ {
        self.owners.keys().copied()
    }

    /// The mods that turn `owner`'s installed flows into `flows`. Identical duplicates are
    /// merged; two different flows with one key, or a key another owner holds, is an error.
    pub fn plan_apply(&self, owner: Owner, flows: Vec<Flow>) -> Result<Plan, OfError> {
        let mut next: BTreeMap<FlowKey, FlowValue> = BTreeMap::new();
        for f in flows {
            if let Some(other) = self.holder.get(&f.key).filter(|o| **o != owner) {
                return Err(OfError::Conflict {
                    flow: format!("{:?}", f.key),
                    owner: other.to_string(),
                });
            }
            match next.get(&f.key) {
                Some(v) if *v != f.value => {
                    return Err(OfError::Conflict {
                        flow: format!("{:?}", f.key),
                        owner: format!("{owner} (two different flows with one key)"),
                    });
                }
                Some(_) => {}
                None => {
                    next.insert(f.key, f.value);
                }
            }
        }
        let empty = BTreeMap::new();
        let old = self.owners.get(&owner).unwrap_or(&empty);
        let ck = self.cookie(owner);
        let (mut deletes, mut modifies, mut adds) = (Vec::new(), Vec::new(), Vec::new());
        for (k, v) in old {
            if !next.contains_key(k) {
                deletes.push(to_mod(k, v, FlowModCommand::DELETE_STRICT, ck));
            }
        }
        for (k, v) in &next {
            match old.get(k) {
                None => adds.push(to_mod(k, v, FlowModCommand::ADD, ck)),
                Some(o) if o == v => {}
                // MODIFY_STRICT changes instructions only (OF1.5 §6.4); a timeout change
                // needs the flow replaced, which ADD does for an identical key.
                Some(o) if o.idle_timeout == v.idle_timeout && o.hard_timeout == v.hard_timeout => {
                    modifies.push(to_mod(k, v, FlowModCommand::MODIFY_STRICT, ck));
                }
                Some(_) => adds.push(to_mod(k, v, FlowModCommand::ADD, ck)),
            }
        }
        deletes.append(&mut modifies);
        deletes.append(&mut adds);
        Ok(Plan {
            owner,
            mods: deletes,
            next,
        })
    }

    /// The mods that remove every flow of `owner`.
    pub fn plan_remove(&self, owner: Owner) -> Plan {
        let ck = self.cookie(owner);
        let mods = self
            .owners
            .get(&owner)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| to_mod(k, v, FlowModCommand::DELETE_STRICT, ck))
                    .collect()
            })
            .unwrap_or_default();
        Plan {
            owner,
            mods,
            next: BTreeMap::new(),
        }
    }

    /// Record a plan the switch accepted.
    pub fn commit(&mut self, plan: Plan) {
        if let Some(old) = self.owners.remove(&plan.owner) {
            for k in old.keys() {
                self.holder.remove(k);
            }
        }
        if plan.next.is_empty() {
            return;
        }
        for k in plan.next.keys() {
            self.holder.insert(k.clone(), plan.owner);
        }
        self.owners.insert(plan.owner, plan.next);
    }

    /// Everything needed to make a switch equal to this set after a reconnect: delete the
    /// current round's flows (whatever survived), then add every owner's flows. Flows of
    /// other rounds stay: a stale round is the daemon's to delete, after its first sync.
    pub fn replay_mods(&self) -> Vec<FlowMod> {
        let mut mods = Vec::with_capacity(self.len() + 1);
        mods.push(FlowMod::delete_by_cookie(
            u64::from(self.round) << 48,
            ROUND_MASK,
        ));
        for (owner, flows) in &self.owners {
            let ck = self.cookie(*owner);
            mods.extend(
                flows
                    .iter()
                    .map(|(k, v)| to_mod(k, v, FlowModCommand::ADD, ck)),
            );
        }
        mods
    }
}

fn to_mod(k: &FlowKey, v: &FlowValue, command: FlowModCommand, cookie: u64) -> FlowMod {
    Flow {
        key: k.clone(),
        value: v.clone(),
    }
    .to_flow_mod(command, cookie)
}
