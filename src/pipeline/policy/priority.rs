//! A total order on policy rules and their OpenFlow priorities (reference Part B §2.3).
//!
//! Order: tier priority (lower wins), policy priority (lower wins), rule index, then the
//! policy UID and the rule id, so no two rules ever tie. Every rule gets its own OpenFlow
//! priority: no match flow is shared between rules and overlapping conjunctive flows
//! never sit at one priority (Antrea #367).
//!
//! Numbering is stable across calls, because moving a rule to another priority rewrites
//! all of its flows (OpenFlow cannot modify a priority; Antrea's
//! `ReassignFlowPriorities` deletes and re-adds them). [`assign`] keeps the previous
//! priority of every rule still in order, puts a new (or reordered) rule in the middle of
//! the gap between its neighbours, and renumbers the whole table, evenly spread over the
//! range, only when some gap is too small. Adding one rule to a table of a hundred then
//! changes that rule's flows only. The price is a renumbering every so often: each insert
//! halves a gap, so ~log2(range / rules) inserts at one spot fill it (about nine at 100
//! rules in [`POLICY_RANGE`]). Antrea instead guesses a priority from the tier and policy
//! priority and falls back to a gap search (`priority.go`).
//!
//! Baseline-tier rules (tier priority 253) live in the baseline tables
//! (Egress/IngressBaselineRule) with their own range; [`range_for`] picks it.

use std::cmp::Ordering;
use std::collections::BTreeMap;

/// Antrea's static tiers (`tier.go`); an empty tier is `application`.
pub mod tier {
    pub const EMERGENCY: i32 = 50;
    pub const SECURITYOPS: i32 = 100;
    pub const NETWORKOPS: i32 = 150;
    pub const PLATFORM: i32 = 200;
    pub const APPLICATION: i32 = 250;
    pub const BASELINE: i32 = 253;
}

/// An inclusive range of OpenFlow priorities.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PriorityRange {
    pub top: u16,
    pub bottom: u16,
}

impl PriorityRange {
    /// How many rules fit.
    pub fn capacity(&self) -> usize {
        usize::from(self.top.saturating_sub(self.bottom)) + usize::from(self.top >= self.bottom)
    }
}

/// The range for non-baseline tiers: Antrea's [100, 65000] (`priority.go`), but topped at
/// 64989 so that every rule sits below the rule tables' own flows (established/related
/// skip at 64990, the ND/MLD skip at 64991: `flows::base_flows`), which must win over
/// any rule.
pub const POLICY_RANGE: PriorityRange = PriorityRange {
    top: 64989,
    bottom: 100,
};

/// Antrea's range for the baseline tier: [10, 180].
pub const BASELINE_RANGE: PriorityRange = PriorityRange {
    top: 180,
    bottom: 10,
};

/// The range a rule of this tier priority is numbered in.
pub fn range_for(tier_priority: i32) -> PriorityRange {
    if tier_priority == tier::BASELINE {
        BASELINE_RANGE
    } else {
        POLICY_RANGE
    }
}

/// What orders one rule.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleOrder {
    pub tier_priority: i32,
    pub policy_priority: f64,
    pub rule_index: usize,
    pub policy_uid: String,
}

impl RuleOrder {
    /// The total order: tier, policy priority (`total_cmp`, so NaN sorts last), rule
    /// index, policy UID.
    pub fn cmp_order(&self, o: &RuleOrder) -> Ordering {
        self.tier_priority
            .cmp(&o.tier_priority)
            .then(self.policy_priority.total_cmp(&o.policy_priority))
            .then(self.rule_index.cmp(&o.rule_index))
            .then_with(|| self.policy_uid.cmp(&o.policy_uid))
    }
}

/// Numbers `rules` (rule id, order) in `range`, highest priority first in the total order
/// (ties on everything broken by the id), keeping what it can of `previous` (the last
/// call's result for this table; see the module doc). Returns (rule id, priority),
/// highest priority first. Deterministic: the same rules and the same `previous` give the
/// same numbers. Errors when more rules than `range.capacity()` are given, or an id
/// repeats.
pub fn assign<I: Ord + Clone + std::fmt::Debug>(
    rules: &[(I, RuleOrder)],
    range: PriorityRange,
    previous: &BTreeMap<I, u16>,
) -> Result<Vec<(I, u16)>, String> {
    if rules.len() > range.capacity() {
        return Err(format!(
            "{} rules do not fit in OpenFlow priorities {}..={} ({} fit)",
            rules.len(),
            range.bottom,
            range.top,
            range.capacity()
        ));
    }
    let mut sorted: Vec<&(I, RuleOrder)> = rules.iter().collect();
    sorted.sort_by(|a, b| a.1.cmp_order(&b.1).then_with(|| a.0.cmp(&b.0)));
    if let Some(w) = sorted.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(format!("rule id {:?} is given twice", w[0].0));
    }
    let old: Vec<Option<u16>> = sorted
        .iter()
        .map(|(id, _)| {
            previous
                .get(id)
                .copied()
                .filter(|p| (range.bottom..=range.top).contains(p))
        })
        .collect();
    let kept = keep_in_order(&old);
    let prios = match fill_gaps(&kept, range) {
        Some(p) => p,
        // Renumber all: cannot fail once the capacity check has passed.
        None => fill_gaps(&vec![None; sorted.len()], range)
            .ok_or_else(|| format!("{} rules do not fit", sorted.len()))?,
    };
    Ok(sorted
        .into_iter()
        .zip(prios)
        .map(|((id, _), p)| (id.clone(), p))
        .collect())
}

/// The longest subsequence of the `Some` priorities that is strictly decreasing (what can
/// stay where it is); the rest become `None`. Patience sorting, O(n log n), a function
/// of `old` alone, so deterministic.
fn keep_in_order(old: &[Option<u16>]) -> Vec<Option<u16>> {
    // Over the rules that have a priority: `tails[k]` is the position (in `old`) ending the
    // best subsequence of length k+1 found so far; `back` links each to its predecessor.
    let mut tails: Vec<usize> = Vec::new();
    let mut back: Vec<Option<usize>> = vec![None; old.len()];
    for (i, p) in old.iter().enumerate() {
        let Some(p) = p else { continue };
        // Strictly decreasing: extend the longest subsequence whose last priority is
        // above `p`.
        let k = tails.partition_point(|&t| old[t].is_some_and(|q| q > *p));
        back[i] = k.checked_sub(1).and_then(|j| tails.get(j).copied());
        if k == tails.len() {
            tails.push(i);
        } else {
            tails[k] = i;
        }
    }
    let mut out = vec![None; old.len()];
    let mut at = tails.last().copied();
    while let Some(i) = at {
        out[i] = old[i];
        at = back[i];
    }
    out
}

/// `kept` with every run of `None` placed evenly inside the gap between its neighbours
/// (the range's ends count as neighbours one past them). `None` when some run does not
/// fit its gap.
fn fill_gaps(kept: &[Option<u16>], range: PriorityRange) -> Option<Vec<u16>> {
    let mut out = Vec::with_capacity(kept.len());
    let mut hi = i64::from(range.top) + 1;
    let mut i = 0;
    while i < kept.len() {
        if let Some(p) = kept[i] {
            out.push(p);
            hi = i64::from(p);
            i += 1;
            continue;
        }
        let run = kept[i..].iter().take_while(|p| p.is_none()).count();
        let lo = kept
            .get(i + run)
            .copied()
            .flatten()
            .map_or(i64::from(range.bottom) - 1, i64::from);
        let (gap, m) = (hi - lo, i64::try_from(run).ok()?);
        // m rules need m free priorities strictly between hi and lo.
        if gap - 1 < m {
            return None;
        }
        // Step at least 1 (gap ≥ m + 1), so the run is strictly decreasing and stays
        // inside (lo, hi): the k-th lands at hi - (k+1)·gap/(m+1).
        for k in 1..=m {
            out.push(u16::try_from(hi - k * gap / (m + 1)).ok()?);
        }
        i += run;
    }
    Some(out)
}

#[cfg(test)]
mod tests;
