//! The order, the first numbering, and what stays put across calls.

use super::*;

fn r(tier: i32, prio: f64, idx: usize, uid: &str) -> RuleOrder {
    RuleOrder {
        tier_priority: tier,
        policy_priority: prio,
        rule_index: idx,
        policy_uid: uid.to_string(),
    }
}

fn fresh<I: Ord + Clone + std::fmt::Debug>(
    rules: &[(I, RuleOrder)],
    range: PriorityRange,
) -> Result<Vec<(I, u16)>, String> {
    assign(rules, range, &BTreeMap::new())
}

fn map<I: Ord + Clone>(v: &[(I, u16)]) -> BTreeMap<I, u16> {
    v.iter().cloned().collect()
}

const TINY: PriorityRange = PriorityRange {
    top: 14,
    bottom: 10,
};

#[test]
fn order_and_first_numbering_spread_evenly() {
    let rules = vec![
        ("app-b-0", r(tier::APPLICATION, 1.0, 0, "b")),
        ("app-a-1", r(tier::APPLICATION, 1.0, 1, "a")),
        ("app-a-0", r(tier::APPLICATION, 1.0, 0, "a")),
        ("app-c-0", r(tier::APPLICATION, 0.5, 0, "c")),
        ("emerg-0", r(tier::EMERGENCY, 9.0, 0, "z")),
        ("plat-0", r(tier::PLATFORM, 3.0, 0, "y")),
        ("app-d-0", r(tier::APPLICATION, 2.5, 0, "d")),
    ];
    // Seven rules split [100, 64989] into eight equal gaps: 64990 - k·64891/8.
    assert_eq!(
        fresh(&rules, POLICY_RANGE).unwrap(),
        [
            ("emerg-0", 56879),
            ("plat-0", 48768),
            ("app-c-0", 40656),
            ("app-a-0", 32545),
            ("app-b-0", 24434),
            ("app-a-1", 16322),
            ("app-d-0", 8211),
        ]
    );
    // The result does not depend on the input order.
    let mut rev = rules.clone();
    rev.reverse();
    assert_eq!(fresh(&rev, POLICY_RANGE), fresh(&rules, POLICY_RANGE));
    // A policy without a priority sorts last in its tier (the compiler passes infinity).
    let last = ("none-0", r(tier::APPLICATION, f64::INFINITY, 0, "0"));
    let base = ("base-0", r(tier::BASELINE, 0.0, 0, "0"));
    let mut more = rules.clone();
    more.extend([base.clone(), last.clone()]);
    let got = fresh(&more, POLICY_RANGE).unwrap();
    let order: Vec<&str> = got.iter().map(|(id, _)| *id).collect();
    assert_eq!(&order[6..], ["app-d-0", "none-0", "base-0"]);
}

#[test]
fn a_new_rule_takes_the_middle_of_its_gap_and_nothing_else_moves() {
    let mut rules = vec![
        (1, r(tier::APPLICATION, 1.0, 0, "a")),
        (2, r(tier::APPLICATION, 3.0, 0, "b")),
    ];
    let first = fresh(&rules, BASELINE_RANGE).unwrap();
    // 181 - k·172/3.
    assert_eq!(first, [(1, 124), (2, 67)]);
    rules.push((3, r(tier::APPLICATION, 2.0, 0, "c")));
    let second = assign(&rules, BASELINE_RANGE, &map(&first)).unwrap();
    assert_eq!(second, [(1, 124), (3, 96), (2, 67)]);
    // Above everything, and below: the gaps to the range's ends.
    rules.push((4, r(tier::EMERGENCY, 1.0, 0, "d")));
    rules.push((5, r(tier::APPLICATION, 9.0, 0, "e")));
    let third = assign(&rules, BASELINE_RANGE, &map(&second)).unwrap();
    assert_eq!(third, [(4, 153), (1, 124), (3, 96), (2, 67), (5, 38)]);
    // Two new rules in one gap share it evenly.
    rules.push((6, r(tier::APPLICATION, 1.5, 0, "f")));
    rules.push((7, r(tier::APPLICATION, 1.5, 1, "f")));
    let fourth = assign(&rules, BASELINE_RANGE, &map(&third)).unwrap();
    assert_eq!(
        fourth,
        [
            (4, 153),
            (1, 124),
            (6, 115),
            (7, 106),
            (3, 96),
            (2, 67),
            (5, 38)
        ]
    );
    // Removing rules moves nobody; the same input and history give the same output.
    rules.retain(|(id, _)| *id != 6 && *id != 3);
    let fifth = assign(&rules, BASELINE_RANGE, &map(&fourth)).unwrap();
    assert_eq!(fifth, [(4, 153), (1, 124), (7, 106), (2, 67), (5, 38)]);
    assert_eq!(
        assign(&rules, BASELINE_RANGE, &map(&fourth)).unwrap(),
        fifth
    );
}

#[test]
fn a_reordered_rule_moves_alone() {
    let mut rules: Vec<(usize, RuleOrder)> = (0..5)
        .map(|i| {
            (
                i,
                r(tier::APPLICATION, 10.0 * i as f64, 0, &format!("p{i}")),
            )
        })
        .collect();
    let first = fresh(&rules, BASELINE_RANGE).unwrap();
    assert_eq!(first, [(0, 153), (1, 124), (2, 95), (3, 67), (4, 38)]);
    // Policy 4 gets the lowest priority value, so its rule goes first.
    rules[4].1.policy_priority = -1.0;
    let second = assign(&rules, BASELINE_RANGE, &map(&first)).unwrap();
    assert_eq!(second, [(4, 167), (0, 153), (1, 124), (2, 95), (3, 67)]);
    // Policy 1 moves between 3 and 4's old place: the other four keep theirs.
    rules[1].1.policy_priority = 35.0;
    let third = assign(&rules, BASELINE_RANGE, &map(&second)).unwrap();
    assert_eq!(third, [(4, 167), (0, 153), (2, 95), (3, 67), (1, 38)]);
}

#[test]
fn a_full_gap_renumbers_the_whole_table() {
    let mut rules = vec![
        ("a", r(tier::APPLICATION, 1.0, 0, "a")),
        ("d", r(tier::APPLICATION, 4.0, 0, "d")),
    ];
    // 15 - k·6/3.
    let first = fresh(&rules, TINY).unwrap();
    assert_eq!(first, [("a", 13), ("d", 11)]);
    rules.push(("c", r(tier::APPLICATION, 3.0, 0, "c")));
    let second = assign(&rules, TINY, &map(&first)).unwrap();
    assert_eq!(second, [("a", 13), ("c", 12), ("d", 11)]);
    // No room between a (13) and c (12): 15 - k·6/5 for all four.
    rules.push(("b", r(tier::APPLICATION, 2.0, 0, "b")));
    let third = assign(&rules, TINY, &map(&second)).unwrap();
    assert_eq!(third, [("a", 14), ("b", 13), ("c", 12), ("d", 11)]);
    // A previous priority outside the range (the range changed) counts as none.
    let old = BTreeMap::from([("a", 65000), ("b", 13)]);
    assert_eq!(
        assign(&rules[..1], TINY, &old).unwrap(),
        [("a", 12)],
        "a is numbered afresh"
    );
}

#[test]
fn one_more_rule_in_a_table_of_a_hundred_changes_one_priority() {
    let order = |i: usize| r(tier::APPLICATION, i as f64, 0, &format!("p{i:03}"));
    let mut rules: Vec<(usize, RuleOrder)> = (0..200).step_by(2).map(|i| (i, order(i))).collect();
    let first = fresh(&rules, POLICY_RANGE).unwrap();
    for i in [51, 199, 1, 0] {
        let mut with = rules.clone();
        with.push((i + 1000, order(i)));
        if i == 0 {
            // Ties with rule 0 on everything but the policy UID ("p000" both): the id
            // breaks it, and the new rule still lands in a gap.
            with.last_mut().unwrap().1.policy_uid = "p000z".into();
        }
        let got = assign(&with, POLICY_RANGE, &map(&first)).unwrap();
        let changed: Vec<usize> = got
            .iter()
            .filter(|(id, p)| first.iter().find(|(f, _)| f == id).map(|(_, q)| q) != Some(p))
            .map(|(id, _)| *id)
            .collect();
        assert_eq!(changed, [i + 1000], "inserting at {i}");
    }
    // Every numbering is strictly decreasing, in range.
    rules.push((1051, order(51)));
    let got = assign(&rules, POLICY_RANGE, &map(&first)).unwrap();
    assert!(got.windows(2).all(|w| w[0].1 > w[1].1));
    assert!(got.iter().all(|(_, p)| (100..=64989).contains(p)));
}

#[test]
fn many_changes_keep_the_invariants() {
    // A deterministic random walk of inserts, removes and reorders in a small range, so
    // that gaps fill and renumbering happens: every result is strictly decreasing, in
    // range, and either keeps every surviving in-order rule's priority or renumbers all.
    let range = PriorityRange {
        top: 200,
        bottom: 100,
    };
    let mut seed: u64 = 0x5eed;
    let mut rand = |n: usize| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        usize::try_from((seed >> 33) % u64::try_from(n).unwrap()).unwrap()
    };
    let mut rules: BTreeMap<u32, f64> = BTreeMap::new();
    let mut prev: BTreeMap<u32, u16> = BTreeMap::new();
    let (mut renumbered, mut next_id) = (0, 0u32);
    for _ in 0..2000 {
        let op = rand(10);
        if op < 5 && rules.len() < 60 {
            rules.insert(next_id, rand(1000) as f64);
            next_id += 1;
        } else if op < 8 && !rules.is_empty() {
            let k = *rules.keys().nth(rand(rules.len())).unwrap();
            rules.remove(&k);
        } else if let Some(k) = rules.keys().nth(rand(rules.len().max(1))) {
            let k = *k;
            rules.insert(k, rand(1000) as f64);
        }
        let input: Vec<(u32, RuleOrder)> = rules
            .iter()
            .map(|(id, p)| (*id, r(tier::APPLICATION, *p, 0, "p")))
            .collect();
        let got = assign(&input, range, &prev).unwrap();
        assert_eq!(got.len(), rules.len());
        assert!(got.windows(2).all(|w| w[0].1 > w[1].1), "{got:?}");
        assert!(got.iter().all(|(_, p)| (100..=200).contains(p)));
        let moved = got
            .iter()
            .filter(|(id, p)| prev.get(id).is_some_and(|q| q != p))
            .count();
        // Only a reordered rule (at most one per step) moves, unless all are renumbered.
        if moved > 1 {
            assert_eq!(got, assign(&input, range, &BTreeMap::new()).unwrap());
            renumbered += 1;
        }
        prev = map(&got);
    }
    assert!(renumbered > 0, "the walk never filled a gap");
}

#[test]
fn full_ties_break_on_the_id_and_repeats_fail() {
    let same = r(tier::APPLICATION, 1.0, 0, "a");
    let rules = vec![("y", same.clone()), ("x", same.clone())];
    assert_eq!(
        fresh(&rules, BASELINE_RANGE).unwrap(),
        [("x", 124), ("y", 67)]
    );
    let rules = vec![("x", same.clone()), ("x", same)];
    assert_eq!(
        fresh(&rules, POLICY_RANGE).unwrap_err(),
        "rule id \"x\" is given twice"
    );
}

#[test]
fn ranges_and_capacity() {
    assert_eq!(range_for(tier::BASELINE), BASELINE_RANGE);
    assert_eq!(range_for(tier::APPLICATION), POLICY_RANGE);
    assert_eq!(range_for(tier::EMERGENCY), POLICY_RANGE);
    assert_eq!(POLICY_RANGE.capacity(), 64890);
    assert_eq!(BASELINE_RANGE.capacity(), 171);
    let tiny = PriorityRange {
        top: 11,
        bottom: 10,
    };
    let rules: Vec<(usize, RuleOrder)> = (0..3)
        .map(|i| (i, r(tier::BASELINE, 1.0, i, "p")))
        .collect();
    assert_eq!(
        fresh(&rules, tiny).unwrap_err(),
        "3 rules do not fit in OpenFlow priorities 10..=11 (2 fit)"
    );
    assert_eq!(fresh(&rules[..2], tiny).unwrap(), [(0, 11), (1, 10)]);
    // The whole baseline range fills exactly, down to its bottom.
    let rules: Vec<(usize, RuleOrder)> = (0..171)
        .map(|i| (i, r(tier::BASELINE, 1.0, i, "p")))
        .collect();
    let got = fresh(&rules, BASELINE_RANGE).unwrap();
    assert_eq!(got.first(), Some(&(0, 180)));
    assert_eq!(got.last(), Some(&(170, 10)));
}
