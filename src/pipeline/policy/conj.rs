//! Conjunction ids (reference Part B §2.3): one u32 id per rule, shared by all tables.
//!
//! An id stays with its rule for as long as the rule persists across recomputations.
//! Freed ids are reused lowest first, so the same history gives the same ids. Ids up to
//! [`RESERVED`] are never handed out (Antrea keeps 1 for its always-on DNS flow).
//!
//! Antrea delays reuse by ≥5 s so flow stats keep the old mapping; with no clocks here,
//! such a delay is the caller's (hold a removed rule in the set until it may go).

use std::collections::{BTreeMap, BTreeSet};

/// The highest reserved id; the first one given out is `RESERVED + 1`.
pub const RESERVED: u32 = 1;

/// Ids by rule id, and the ids that were given out and freed.
#[derive(Clone, Debug, Default)]
pub struct ConjAllocator<I: Ord + Clone> {
    by_rule: BTreeMap<I, u32>,
    free: BTreeSet<u32>,
    /// The next never-used id (u64: so that `u32::MAX` itself can be handed out).
    next: u64,
}

impl<I: Ord + Clone> ConjAllocator<I> {
    pub fn new() -> Self {
        ConjAllocator {
            by_rule: BTreeMap::new(),
            free: BTreeSet::new(),
            next: u64::from(RESERVED) + 1,
        }
    }

    /// The id of `rule`, if it has one.
    pub fn get(&self, rule: &I) -> Option<u32> {
        self.by_rule.get(rule).copied()
    }

    /// How many rules hold an id.
    pub fn len(&self) -> usize {
        self.by_rule.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_rule.is_empty()
    }

    /// Makes `rules` the current set: rules that are gone free their ids first, rules
    /// that persist keep theirs, new rules get the lowest free ids in rule-id order.
    /// Returns every current rule's id. Errors, changing nothing, when the u32 ids run
    /// out.
    pub fn recompute(&mut self, rules: &BTreeSet<I>) -> Result<BTreeMap<I, u32>, String> {
        let mut next = self.clone();
        let gone: Vec<I> = next
            .by_rule
            .keys()
            .filter(|r| !rules.contains(*r))
            .cloned()
            .collect();
        for r in gone {
            if let Some(id) = next.by_rule.remove(&r) {
                next.free.insert(id);
            }
        }
        for r in rules {
            if !next.by_rule.contains_key(r) {
                let id = next.take()?;
                next.by_rule.insert(r.clone(), id);
            }
        }
        *self = next;
        Ok(self.by_rule.clone())
    }

    fn take(&mut self) -> Result<u32, String> {
        if let Some(id) = self.free.pop_first() {
            return Ok(id);
        }
        let id = u32::try_from(self.next).map_err(|_| {
            format!(
                "conjunction ids exhausted: all {} ids above {RESERVED} are in use",
                u32::MAX - RESERVED
            )
        })?;
        self.next += 1;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[&'static str]) -> BTreeSet<&'static str> {
        v.iter().copied().collect()
    }

    fn ids(a: &ConjAllocator<&'static str>, v: &[&'static str]) -> Vec<Option<u32>> {
        v.iter().map(|r| a.get(r)).collect()
    }

    #[test]
    fn stable_ids_and_lowest_first_reuse() {
        let mut a = ConjAllocator::new();
        assert!(a.is_empty());
        let got = a.recompute(&set(&["c", "a", "b"])).unwrap();
        assert_eq!(
            got.into_iter().collect::<Vec<_>>(),
            [("a", 2), ("b", 3), ("c", 4)]
        );
        // b goes, d and e come: d takes b's 3, e a new 5; a and c keep theirs.
        a.recompute(&set(&["a", "c", "d", "e"])).unwrap();
        assert_eq!(
            ids(&a, &["a", "b", "c", "d", "e"]),
            [Some(2), None, Some(4), Some(3), Some(5)]
        );
        // Two freed at once are reused lowest first, in rule-id order.
        a.recompute(&set(&["d", "e"])).unwrap();
        a.recompute(&set(&["d", "e", "z", "y"])).unwrap();
        assert_eq!(
            ids(&a, &["d", "e", "y", "z"]),
            [Some(3), Some(5), Some(2), Some(4)]
        );
        assert_eq!(a.len(), 4);
        // Recomputing the same set changes nothing.
        let before = a.recompute(&set(&["d", "e", "z", "y"])).unwrap();
        assert_eq!(a.recompute(&set(&["d", "e", "z", "y"])).unwrap(), before);
        // Empty frees everything; the next rule gets the lowest id above the reserved.
        assert!(a.recompute(&BTreeSet::new()).unwrap().is_empty());
        a.recompute(&set(&["q"])).unwrap();
        assert_eq!(a.get(&"q"), Some(RESERVED + 1));
    }

    #[test]
    fn exhaustion_fails_and_changes_nothing() {
        let mut a: ConjAllocator<u8> = ConjAllocator::new();
        a.recompute(&[1u8].into_iter().collect()).unwrap();
        a.next = u64::from(u32::MAX); // as if every id below had been given out and kept
        let err = a.recompute(&[1u8, 2, 3].into_iter().collect()).unwrap_err();
        assert_eq!(
            err,
            "conjunction ids exhausted: all 4294967294 ids above 1 are in use"
        );
        assert_eq!((a.len(), a.get(&1), a.get(&2)), (1, Some(2), None));
        // The last id, u32::MAX itself, is still given out.
        a.recompute(&[1u8, 2].into_iter().collect()).unwrap();
        assert_eq!(a.get(&2), Some(u32::MAX));
        // Freeing one makes room again.
        a.recompute(&[2u8, 3].into_iter().collect()).unwrap();
        assert_eq!(a.get(&3), Some(2));
    }
}
