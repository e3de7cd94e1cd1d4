//! The flows tether has installed, per owner, and the pure diff from those to a new
//! desired set. [`FlowSet::plan_apply`] returns the flow mods (delete_strict, modify_strict,
//! add) for one owner; the caller sends them as one bundle and calls [`FlowSet::commit`]
//! only when the switch accepted it, so the set always mirrors what is on the bridge.
//!
//! A flow key (table, priority, match) belongs to at most one owner. Asking for a key an
//! owner of *another category* holds is an [`OfError::Conflict`]; within one category the
//! key moves to the new owner (the later apply wins, and the old owner forgets it), so a
//! Pod moving from one TrafficControl to another is covered at once instead of waiting for
//! the first TC's sync to let go. The index that finds the holder stores key hashes, not
//! key copies: 100,000 flows are kept once.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::Arc;

use super::OfError;
use super::action::Instruction;
use super::consts::FlowModCommand;
use super::flow::{Flow, FlowKey, FlowValue, Owner, ROUND_MASK, cookie};
use super::flowmod::FlowMod;

/// The multiply-rotate hash rustc uses internally (FxHash): no keyed seed, which is fine
/// here (keys are our own flows, not attacker input) and several times faster than SipHash
/// on the deep derived hashes of flow keys.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(w));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }

    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    fn write_usize(&mut self, i: usize) {
        self.add(u64::try_from(i).unwrap_or(u64::MAX));
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl FxHasher {
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type FxBuild = BuildHasherDefault<FxHasher>;
type FlowMap = HashMap<FlowKey, FlowValue, FxBuild>;

fn key_hash(k: &FlowKey) -> u64 {
    let mut h = FxHasher::default();
    k.hash(&mut h);
    h.finish()
}

/// Owners of the keys with one hash: nearly always one.
#[derive(Debug, Clone)]
enum Holders {
    One(Owner),
    Many(Vec<Owner>),
}

/// How one owner's flows are to change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlowChange {
    /// Exactly these flows (the difference to what is installed is computed).
    Replace(Vec<Flow>),
    /// These flows added (or changed) and these keys removed, the rest untouched: for a
    /// caller that knows what changed in a large owner (one member of a 10,000-member
    /// AddressGroup), so neither side rebuilds or compares the other flows.
    Patch {
        add: Vec<Flow>,
        remove: Vec<FlowKey>,
    },
}

impl FlowChange {
    /// `flows` (one owner's) after this change, for a backend that keeps plain lists: a
    /// patch's flows replace those with their keys, its removed keys go, the rest stay.
    pub fn applied_to(self, flows: Vec<Flow>) -> Vec<Flow> {
        match self {
            FlowChange::Replace(next) => next,
            FlowChange::Patch { add, remove } => {
                let gone: HashSet<&FlowKey, FxBuild> =
                    remove.iter().chain(add.iter().map(|f| &f.key)).collect();
                let mut out: Vec<Flow> = flows
                    .into_iter()
                    .filter(|f| !gone.contains(&f.key))
                    .collect();
                let mut seen: HashSet<FlowKey, FxBuild> = HashSet::default();
                out.extend(add.into_iter().filter(|f| seen.insert(f.key.clone())));
                out
            }
        }
    }
}

/// Installed flows by owner, plus an index from key hash to owners for conflict checks.
#[derive(Debug, Default, Clone)]
pub struct FlowSet {
    round: u16,
    owners: BTreeMap<Owner, FlowMap>,
    holders: HashMap<u64, Holders, FxBuild>,
    len: usize,
    /// One copy of each distinct instruction list: a TrafficControl's marks, or the L2
    /// flows, differ only in their match, and callers build every flow's instructions
    /// apart (docs/design.md#benchmarks: 144 of the ~360 bytes each kept flow cost).
    instructions: HashSet<Arc<Vec<Instruction>>, FxBuild>,
    /// `instructions.len()` after the last pruning: prune again when it has doubled.
    pruned_at: usize,
}

/// What to send for one owner and the state to record once it is on the switch.
#[derive(Debug)]
pub struct OwnerPlan {
    pub owner: Owner,
    /// Flow mods in sending order: deletes, then modifies, then adds.
    pub mods: Vec<FlowMod>,
    next: Next,
    /// Keys taken over from other owners of the same category, removed from them on commit.
    taken: Vec<(Owner, FlowKey)>,
}

/// The owner's flows once a plan is on the switch.
#[derive(Debug)]
enum Next {
    /// All of them.
    Replace(FlowMap),
    /// The installed ones with these keys set (added or changed) and these removed.
    Patch { set: FlowMap, remove: Vec<FlowKey> },
}

/// What [`FlowSet::undo`] needs to take one committed plan back: the owner's flows before
/// it (all of them, or those of the keys a patch touched), and the keys it took from other
/// owners with their flows.
#[derive(Debug)]
pub struct Undo {
    owner: Owner,
    prev: Prev,
    taken: Vec<(Owner, FlowKey, FlowValue)>,
}

#[derive(Debug)]
enum Prev {
    All(FlowMap),
    /// Each key a patch touched, and its flow before (None: the owner did not hold it).
    Keys(Vec<(FlowKey, Option<FlowValue>)>),
}

impl OwnerPlan {
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
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Installed flows of one owner, sorted.
    pub fn flows(&self, owner: Owner) -> Vec<Flow> {
        let mut v: Vec<Flow> = self
            .owners
            .get(&owner)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| Flow {
                        key: k.clone(),
                        value: v.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    pub fn owners(&self) -> impl Iterator<Item = Owner> + '_ {
        self.owners.keys().copied()
    }

    /// Another owner holding `key`, if any.
    fn other_holder(&self, key: &FlowKey, h: u64, owner: Owner) -> Option<Owner> {
        let holds =
            |o: &Owner| *o != owner && self.owners.get(o).is_some_and(|m| m.contains_key(key));
        match self.holders.get(&h)? {
            Holders::One(o) => holds(o).then_some(*o),
            Holders::Many(v) => v.iter().copied().find(|o| holds(o)),
        }
    }

    /// The owner of the same category `owner` takes `key` from, if another holds it; a
    /// holder of another category is a conflict.
    fn may_take(&self, key: &FlowKey, owner: Owner) -> Result<Option<Owner>, OfError> {
        match self.other_holder(key, key_hash(key), owner) {
            Some(other) if other.category != owner.category => Err(OfError::Conflict {
                flow: format!("{key:?}"),
                owner: other.to_string(),
            }),
            other => Ok(other),
        }
    }

    /// The shared copy of `ins`, recording it if it is new. The caller's copy is dropped
    /// as the plan consumes its flows, so the duplicates go before the mods are built.
    fn intern(&mut self, ins: Arc<Vec<Instruction>>) -> Arc<Vec<Instruction>> {
        if let Some(shared) = self.instructions.get(&ins) {
            return shared.clone();
        }
        self.instructions.insert(ins.clone());
        ins
    }

    /// Forget instruction lists no flow uses any more (amortised: when the table doubled).
    fn prune_instructions(&mut self) {
        if self.instructions.len() >= 2 * self.pruned_at.max(32) {
            self.instructions.retain(|a| Arc::strong_count(a) > 1);
            self.pruned_at = self.instructions.len();
        }
    }

    /// Distinct instruction lists kept (for tests: flows share them).
    pub fn distinct_instructions(&self) -> usize {
        self.instructions
            .iter()
            .filter(|a| Arc::strong_count(a) > 1)
            .count()
    }

    /// The mods that turn `owner`'s installed flows into `flows`. Identical duplicates are
    /// merged; two different flows with one key, or a key another owner holds, is an error.
    /// Takes `&mut self` only to share instruction lists ([`FlowSet::intern`]); the
    /// installed flows do not change until [`FlowSet::commit`].
    pub fn plan_apply(&mut self, owner: Owner, flows: Vec<Flow>) -> Result<OwnerPlan, OfError> {
        let mut next = FlowMap::with_capacity_and_hasher(flows.len(), FxBuild::default());
        // With no other owner there is nobody to conflict with: skip hashing every key twice.
        let others = self.owners.keys().any(|o| *o != owner);
        let mut taken = Vec::new();
        for f in flows {
            if others {
                if let Some(other) = self.may_take(&f.key, owner)? {
                    taken.push((other, f.key.clone()));
                }
            }
            match next.entry(f.key) {
                Entry::Occupied(e) if *e.get() != f.value => {
                    return Err(OfError::Conflict {
                        flow: format!("{:?}", e.key()),
                        owner: format!("{owner} (two different flows with one key)"),
                    });
                }
                Entry::Occupied(_) => {}
                Entry::Vacant(e) => {
                    let mut value = f.value;
                    value.instructions = self.intern(value.instructions);
                    e.insert(value);
                }
            }
        }
        let ck = self.cookie(owner);
        let old = self.owners.get(&owner);
        let (mut mods, mut modifies, mut adds) = (Vec::new(), Vec::new(), Vec::new());
        for (k, v) in old.into_iter().flatten() {
            if !next.contains_key(k) {
                mods.push(to_mod(k, v, FlowModCommand::DELETE_STRICT, ck));
            }
        }
        adds.reserve(next.len());
        for (k, v) in &next {
            match old.and_then(|m| m.get(k)) {
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
        mods.append(&mut modifies);
        // A taken-over key is not in `old`, so it is an ADD: OF1.5 §6.4 replaces the
        // existing entry with the same match and priority, cookie included.
        mods.append(&mut adds);
        Ok(OwnerPlan {
            owner,
            mods,
            next: Next::Replace(next),
            taken,
        })
    }

    /// The mods that add (or change) `add` and delete `remove` in `owner`'s flows, leaving
    /// the rest as installed: the work is the size of the change, not of the owner. A key
    /// in both is changed, not deleted; removing a key the owner does not hold does
    /// nothing. Conflicts as in [`FlowSet::plan_apply`].
    pub fn plan_patch(
        &mut self,
        owner: Owner,
        add: Vec<Flow>,
        remove: Vec<FlowKey>,
    ) -> Result<OwnerPlan, OfError> {
        let ck = self.cookie(owner);
        let mut set = FlowMap::with_capacity_and_hasher(add.len(), FxBuild::default());
        let mut taken = Vec::new();
        let (mut modifies, mut adds) = (Vec::new(), Vec::new());
        for f in add {
            if let Some(v) = set.get(&f.key) {
                if *v != f.value {
                    return Err(OfError::Conflict {
                        flow: format!("{:?}", f.key),
                        owner: format!("{owner} (two different flows with one key)"),
                    });
                }
                continue;
            }
            if let Some(other) = self.may_take(&f.key, owner)? {
                taken.push((other, f.key.clone()));
            }
            let mut value = f.value;
            value.instructions = self.intern(value.instructions);
            let old = self.owners.get(&owner).and_then(|m| m.get(&f.key));
            match old {
                Some(o) if *o == value => continue,
                // As in `plan_apply`: MODIFY_STRICT only when the timeouts stay.
                Some(o)
                    if o.idle_timeout == value.idle_timeout
                        && o.hard_timeout == value.hard_timeout =>
                {
                    modifies.push(to_mod(&f.key, &value, FlowModCommand::MODIFY_STRICT, ck));
                }
                _ => adds.push(to_mod(&f.key, &value, FlowModCommand::ADD, ck)),
            }
            set.insert(f.key, value);
        }
        let held = self.owners.get(&owner);
        let mut mods = Vec::new();
        let mut gone = HashSet::with_capacity_and_hasher(remove.len(), FxBuild::default());
        for k in remove {
            if set.contains_key(&k) || gone.contains(&k) {
                continue;
            }
            if let Some(v) = held.and_then(|m| m.get(&k)) {
                mods.push(to_mod(&k, v, FlowModCommand::DELETE_STRICT, ck));
                gone.insert(k);
            }
        }
        let gone: Vec<FlowKey> = gone.into_iter().collect();
        mods.append(&mut modifies);
        mods.append(&mut adds);
        Ok(OwnerPlan {
            owner,
            mods,
            next: Next::Patch { set, remove: gone },
            taken,
        })
    }

    /// The mods that remove every flow of `owner`.
    pub fn plan_remove(&self, owner: Owner) -> OwnerPlan {
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
        OwnerPlan {
            owner,
            mods,
            next: Next::Replace(FlowMap::default()),
            taken: Vec::new(),
        }
    }

    /// Record a plan before the switch has it, returning what puts the set back if the
    /// switch refuses it ([`FlowSet::undo`]; undo in the reverse order of the commits).
    pub fn commit_undoable(&mut self, plan: OwnerPlan) -> Undo {
        let owner = plan.owner;
        let taken = plan
            .taken
            .iter()
            .filter_map(|(other, key)| {
                let v = self.owners.get(other)?.get(key)?;
                Some((*other, key.clone(), v.clone()))
            })
            .collect();
        let held = self.owners.get(&owner);
        let prev = match &plan.next {
            Next::Replace(_) => Prev::All(held.cloned().unwrap_or_default()),
            Next::Patch { set, remove } => Prev::Keys(
                set.keys()
                    .chain(remove)
                    .map(|k| (k.clone(), held.and_then(|m| m.get(k)).cloned()))
                    .collect(),
            ),
        };
        self.commit(plan);
        Undo { owner, prev, taken }
    }

    /// Put back what [`FlowSet::commit_undoable`] changed.
    pub fn undo(&mut self, u: Undo) {
        let next = match u.prev {
            Prev::All(m) => Next::Replace(m),
            Prev::Keys(keys) => {
                let (mut set, mut remove) = (FlowMap::default(), Vec::new());
                for (k, v) in keys {
                    match v {
                        Some(v) => {
                            set.insert(k, v);
                        }
                        None => remove.push(k),
                    }
                }
                Next::Patch { set, remove }
            }
        };
        self.commit(OwnerPlan {
            owner: u.owner,
            mods: Vec::new(),
            next,
            taken: Vec::new(),
        });
        for (other, key, value) in u.taken {
            self.hold(key_hash(&key), other);
            if self
                .owners
                .entry(other)
                .or_default()
                .insert(key, value)
                .is_none()
            {
                self.len += 1;
            }
        }
    }

    /// Record `owner` among the holders of key hash `h`.
    fn hold(&mut self, h: u64, owner: Owner) {
        match self.holders.get_mut(&h) {
            None => {
                self.holders.insert(h, Holders::One(owner));
            }
            Some(Holders::One(o)) if *o == owner => {}
            Some(Holders::One(o)) => {
                let first = *o;
                self.holders.insert(h, Holders::Many(vec![first, owner]));
            }
            Some(Holders::Many(v)) => {
                if !v.contains(&owner) {
                    v.push(owner);
                }
            }
        }
    }

    /// Record a plan the switch accepted.
    pub fn commit(&mut self, plan: OwnerPlan) {
        let owner = plan.owner;
        for (other, key) in &plan.taken {
            // The previous holder forgets the key, so its next apply cannot delete it. Its
            // stale holder entry is harmless: `other_holder` checks the owner's map.
            if let Some(m) = self.owners.get_mut(other) {
                if m.remove(key).is_some() {
                    self.len -= 1;
                }
                if m.is_empty() {
                    self.owners.remove(other);
                }
            }
        }
        match plan.next {
            Next::Replace(next) => self.replace(owner, next),
            Next::Patch { set, remove } => self.patch(owner, set, remove),
        }
        self.prune_instructions();
    }

    /// `owner`'s flows become `next`.
    fn replace(&mut self, owner: Owner, next: FlowMap) {
        if let Some(old) = self.owners.remove(&owner) {
            self.len -= old.len();
            for k in old.keys() {
                self.unhold(key_hash(k), owner);
            }
        }
        if next.is_empty() {
            return;
        }
        for k in next.keys() {
            self.hold(key_hash(k), owner);
        }
        self.len += next.len();
        self.owners.insert(owner, next);
    }

    /// `owner`'s flows with `set` put in and `remove` taken out.
    fn patch(&mut self, owner: Owner, set: FlowMap, remove: Vec<FlowKey>) {
        let mut held = self.owners.remove(&owner).unwrap_or_default();
        for k in remove {
            if held.remove(&k).is_some() {
                self.len -= 1;
                self.unhold(key_hash(&k), owner);
            }
        }
        for (k, v) in set {
            let h = key_hash(&k);
            if held.insert(k, v).is_none() {
                self.len += 1;
                self.hold(h, owner);
            }
        }
        if !held.is_empty() {
            self.owners.insert(owner, held);
        }
    }

    /// Forget `owner` among the holders of key hash `h`.
    fn unhold(&mut self, h: u64, owner: Owner) {
        let empty = match self.holders.get_mut(&h) {
            Some(Holders::One(o)) => *o == owner,
            Some(Holders::Many(v)) => {
                v.retain(|o| *o != owner);
                v.is_empty()
            }
            None => false,
        };
        if empty {
            self.holders.remove(&h);
        }
    }

    /// Everything needed to make a switch equal to this set after a reconnect: delete the
    /// current round's flows (whatever survived), then add every owner's flows. Flows of
    /// other rounds stay: a stale round is the daemon's to delete, after its first sync.
    pub fn replay_mods(&self) -> Vec<FlowMod> {
        let mut mods = Vec::with_capacity(self.len + 1);
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
    let mut fm = FlowMod::new(command, k.table, k.priority, k.match_.clone());
    fm.cookie = cookie;
    if command != FlowModCommand::DELETE_STRICT {
        fm.idle_timeout = v.idle_timeout;
        fm.hard_timeout = v.hard_timeout;
        fm.instructions = v.instructions.clone();
    }
    fm
}
