//! A total order on policy rules and their OpenFlow priorities (reference Part B §2.3).
//!
//! Order: tier priority (lower wins), policy priority (lower wins), rule index, then the
//! policy UID and the rule id, so no two rules ever tie. Every rule gets its own OpenFlow
//! priority, counting down from the range's top: no match flow is shared between rules
//! and overlapping conjunctive flows never sit at one priority (Antrea #367). When the
//! order changes the whole table is renumbered; the caller rewrites it in one bundle
//! (instead of Antrea's gap search, `priority.go`).
//!
//! Baseline-tier rules (tier priority 253) live in the baseline tables
//! (Egress/IngressDefaultRule) with their own range; [`range_for`] picks it.

use std::cmp::Ordering;

/// Antrea's static tiers (`tier.go`); an empty tier is `application`.
pub mod tier {
    pub const EMERGENCY: i32 = 50;
    pub const SECURITYOPS: i32 = 100;
    pub const NETWORKOPS: i32 = 150;
    pub const PLATFORM: i32 = 200;
    pub const APPLICATION: i32 = 250;
    pub const BASELINE: i32 = 253;
}

/// An inclusive range of OpenFlow priorities, used from `top` downward.
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

/// Antrea's range for non-baseline tiers (`priority.go`): [100, 65000].
pub const POLICY_RANGE: PriorityRange = PriorityRange {
    top: 65000,
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

/// Numbers `rules` (rule id, order) from `range.top` downward in the total order (ties
/// on everything broken by the id). Returns (rule id, priority), highest priority first.
/// Errors when more rules than `range.capacity()` are given, or an id repeats.
pub fn assign<I: Ord + Clone + std::fmt::Debug>(
    rules: &[(I, RuleOrder)],
    range: PriorityRange,
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
    let mut out = Vec::with_capacity(sorted.len());
    let mut prio = range.top;
    for (id, _) in sorted {
        out.push((id.clone(), prio));
        prio = prio.saturating_sub(1);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(tier: i32, prio: f64, idx: usize, uid: &str) -> RuleOrder {
        RuleOrder {
            tier_priority: tier,
            policy_priority: prio,
            rule_index: idx,
            policy_uid: uid.to_string(),
        }
    }

    #[test]
    fn order_and_exact_priorities() {
        let rules = vec![
            ("app-b-0", r(tier::APPLICATION, 1.0, 0, "b")),
            ("app-a-1", r(tier::APPLICATION, 1.0, 1, "a")),
            ("app-a-0", r(tier::APPLICATION, 1.0, 0, "a")),
            ("app-c-0", r(tier::APPLICATION, 0.5, 0, "c")),
            ("emerg-0", r(tier::EMERGENCY, 9.0, 0, "z")),
            ("plat-0", r(tier::PLATFORM, 3.0, 0, "y")),
            ("app-d-0", r(tier::APPLICATION, 2.5, 0, "d")),
        ];
        assert_eq!(
            assign(&rules, POLICY_RANGE).unwrap(),
            [
                ("emerg-0", 65000),
                ("plat-0", 64999),
                ("app-c-0", 64998),
                ("app-a-0", 64997),
                ("app-b-0", 64996),
                ("app-a-1", 64995),
                ("app-d-0", 64994),
            ]
        );
        // The result does not depend on the input order.
        let mut rev = rules.clone();
        rev.reverse();
        assert_eq!(assign(&rev, POLICY_RANGE), assign(&rules, POLICY_RANGE));
    }

    #[test]
    fn a_rule_between_neighbours_renumbers_below_it() {
        let mut rules = vec![
            (1, r(tier::APPLICATION, 1.0, 0, "a")),
            (2, r(tier::APPLICATION, 3.0, 0, "b")),
        ];
        assert_eq!(
            assign(&rules, POLICY_RANGE).unwrap(),
            [(1, 65000), (2, 64999)]
        );
        rules.push((3, r(tier::APPLICATION, 2.0, 0, "c")));
        assert_eq!(
            assign(&rules, POLICY_RANGE).unwrap(),
            [(1, 65000), (3, 64999), (2, 64998)]
        );
    }

    #[test]
    fn full_ties_break_on_the_id_and_repeats_fail() {
        let same = r(tier::APPLICATION, 1.0, 0, "a");
        let rules = vec![("y", same.clone()), ("x", same.clone())];
        assert_eq!(
            assign(&rules, BASELINE_RANGE).unwrap(),
            [("x", 180), ("y", 179)]
        );
        let rules = vec![("x", same.clone()), ("x", same)];
        assert_eq!(
            assign(&rules, POLICY_RANGE).unwrap_err(),
            "rule id \"x\" is given twice"
        );
    }

    #[test]
    fn ranges_and_capacity() {
        assert_eq!(range_for(tier::BASELINE), BASELINE_RANGE);
        assert_eq!(range_for(tier::APPLICATION), POLICY_RANGE);
        assert_eq!(range_for(tier::EMERGENCY), POLICY_RANGE);
        assert_eq!(POLICY_RANGE.capacity(), 64901);
        assert_eq!(BASELINE_RANGE.capacity(), 171);
        let tiny = PriorityRange {
            top: 11,
            bottom: 10,
        };
        let rules: Vec<(usize, RuleOrder)> = (0..3)
            .map(|i| (i, r(tier::BASELINE, 1.0, i, "p")))
            .collect();
        assert_eq!(
            assign(&rules, tiny).unwrap_err(),
            "3 rules do not fit in OpenFlow priorities 10..=11 (2 fit)"
        );
        assert_eq!(assign(&rules[..2], tiny).unwrap(), [(0, 11), (1, 10)]);
        // The whole baseline range fills exactly, down to its bottom.
        let rules: Vec<(usize, RuleOrder)> = (0..171)
            .map(|i| (i, r(tier::BASELINE, 1.0, i, "p")))
            .collect();
        let got = assign(&rules, BASELINE_RANGE).unwrap();
        assert_eq!(got.first(), Some(&(0, 180)));
        assert_eq!(got.last(), Some(&(170, 10)));
    }
}
