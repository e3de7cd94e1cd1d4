//! `Compiler::update`: what changed, and nothing else, against `compile`'s whole answer.
//! Every test checks the changes by applying them to the owners' flows as a switch would
//! hold them and comparing with a fresh compile of the new state by a compiler with the
//! same history.

use std::collections::BTreeMap;

use serde_json::json;

use super::super::*;
use super::world::*;
use crate::openflow::ofctl::format_flow;

type Held = BTreeMap<Owner, Vec<Flow>>;

/// What a switch holds after `compile`.
fn held(c: &Compiled) -> Held {
    owners_of(c)
        .into_iter()
        .filter(|(_, f)| !f.is_empty())
        .collect()
}

/// `held` after `changes`, with the owners no rule has removed (as the controller does).
fn apply(mut held: Held, changes: &Changes) -> Held {
    for (owner, change) in changes.owners.clone() {
        let flows = change.applied_to(held.remove(&owner).unwrap_or_default());
        if !flows.is_empty() {
            held.insert(owner, flows);
        }
    }
    let wanted: BTreeSet<Owner> = changes.rules.iter().map(|r| r.owner).collect();
    held.retain(|o, _| *o == BASE_OWNER || wanted.contains(o));
    held
}

/// Each owner's flows as sorted `ovs-ofctl` text.
fn text(h: &Held) -> BTreeMap<Owner, Vec<String>> {
    h.iter()
        .map(|(o, f)| {
            let mut t: Vec<String> = f.iter().map(|f| format_flow(&f.to_desc(), false)).collect();
            t.sort();
            (*o, t)
        })
        .collect()
}

/// `update` from `before` to `after` (scope `scope`) must leave what a fresh compile of
/// `after` (same history) gives; returns the changes.
fn check(compiler: &mut Compiler, before: &Compiled, after: &World, scope: Scope) -> Changes {
    let mut twin = compiler.clone();
    let changes = compiler.update(&after.state(), PORTS, &scope).unwrap();
    let whole = twin.compile(&after.state(), PORTS).unwrap();
    assert_eq!(text(&apply(held(before), &changes)), text(&held(&whole)));
    let infos: Vec<RuleInfo> = whole.rules.iter().map(|r| r.info.clone()).collect();
    assert_eq!(changes.rules, infos);
    changes
}

fn ips(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("2001:db8:100::{i:x}")).collect()
}

fn with_group(members: &[String]) -> World {
    with_group_and(members, "Drop")
}

/// `p`: `action` from the members of AddressGroup `ag`; `other`: egress Allow TCP 80.
fn with_group_and(members: &[String], action: &str) -> World {
    let m: Vec<&str> = members.iter().map(String::as_str).collect();
    World::new()
        .ag("ag", &m)
        .policy(policy(
            "p",
            250,
            5.0,
            vec![ingress(action, json!({"addressGroups": ["ag"]}), json!([]))],
        ))
        .policy(policy(
            "other",
            250,
            6.0,
            vec![egress(
                "Allow",
                json!({}),
                json!([{"protocol": "TCP", "port": 80}]),
            )],
        ))
}

/// `p`'s rule ("other" sorts first and has id 2).
const RULE: Owner = Owner {
    category: Category::NETWORK_POLICY,
    object: 3,
};
const OTHER: Owner = Owner {
    category: Category::NETWORK_POLICY,
    object: 2,
};

#[test]
fn one_member_more_or_less_is_a_patch_of_one_flow() {
    let mut compiler = Compiler::new();
    let before = compiler
        .compile(&with_group(&ips(100)).state(), PORTS)
        .unwrap();
    let mut more = ips(100);
    more.push("192.0.2.7".into());
    let p = Scope::Policies(BTreeSet::from(["p".to_string()]));
    let changes = check(&mut compiler, &before, &with_group(&more), p.clone());
    let [(owner, FlowChange::Patch { add, remove })] = changes.owners.as_slice() else {
        panic!("{:?}", changes.owners)
    };
    assert_eq!(*owner, RULE);
    assert!(remove.is_empty());
    let add: Vec<String> = add
        .iter()
        .map(|f| format_flow(&f.to_desc(), false))
        .collect();
    assert_eq!(
        add,
        ["table=100, priority=32545,ip,nw_src=192.0.2.7 actions=conjunction(3,1/2)"]
    );
    assert_eq!(changes.rules[1].flows, before.rules[1].flows.len() + 1);
    // And out again, with another member swapped for a new address.
    let mut swapped = ips(100);
    swapped[9] = "2001:db8:100::ffff".into();
    let before = compiler.compile(&with_group(&more).state(), PORTS).unwrap();
    let changes = check(&mut compiler, &before, &with_group(&swapped), p);
    let [(_, FlowChange::Patch { add, remove })] = changes.owners.as_slice() else {
        panic!("{:?}", changes.owners)
    };
    assert_eq!(add.len(), 1);
    let mut gone: Vec<String> = remove
        .iter()
        .map(|k| format!("{:?}", k.match_.fields()))
        .collect();
    gone.sort();
    assert_eq!(gone.len(), 2, "{gone:?}");
    assert!(
        gone[0].contains("192.0.2.7") && gone[1].contains("2001:db8:100::a"),
        "{gone:?}"
    );
}

#[test]
fn nothing_in_scope_changes_nothing_and_forget_gives_everything_whole() {
    let mut compiler = Compiler::new();
    let w = with_group(&ips(3));
    let before = compiler.compile(&w.state(), PORTS).unwrap();
    // The same state, nothing in scope: no owner changes.
    let changes = check(&mut compiler, &before, &w, Scope::none());
    assert_eq!(changes.owners, vec![]);
    // In scope but unchanged: nothing either.
    let all = check(&mut compiler, &before, &w, Scope::All);
    assert_eq!(all.owners, vec![]);
    // A policy the watches did not name keeps its flows, even if its group changed under
    // it: the scope is the caller's promise.
    let changes = compiler
        .update(&with_group(&ips(4)).state(), PORTS, &Scope::none())
        .unwrap();
    assert_eq!(changes.owners, vec![]);
    assert_eq!(changes.rules[1].flows, before.rules[1].flows.len());
    // After forget, every owner whole, the base flows first.
    compiler.forget();
    let changes = check(&mut compiler, &before, &w, Scope::none());
    let owners: Vec<(Owner, bool)> = changes
        .owners
        .iter()
        .map(|(o, c)| (*o, matches!(c, FlowChange::Replace(_))))
        .collect();
    assert_eq!(
        owners,
        vec![(BASE_OWNER, true), (OTHER, true), (RULE, true)]
    );
}

#[test]
fn other_changes_replace_the_rule_whole() {
    let mut compiler = Compiler::new();
    let before = compiler
        .compile(&with_group(&ips(3)).state(), PORTS)
        .unwrap();
    let p = || Scope::Policies(BTreeSet::from(["p".to_string()]));
    // The rule's action changes: replaced (same addresses).
    let drop_to_allow = with_group_and(&ips(3), "Allow");
    let changes = check(&mut compiler, &before, &drop_to_allow, p());
    assert!(
        matches!(changes.owners.as_slice(), [(RULE, FlowChange::Replace(_))]),
        "{:?}",
        changes.owners
    );
    // The group emptied: the rule matches nothing, its flows go.
    let before = compiler.compile(&drop_to_allow.state(), PORTS).unwrap();
    let empty = with_group(&[]);
    let changes = check(&mut compiler, &before, &empty, p());
    assert_eq!(changes.owners, vec![(RULE, FlowChange::Replace(vec![]))]);
    assert!(matches!(
        changes.rules[1].status,
        RuleStatus::NotRealizable(_)
    ));
    // Still empty: nothing to do.
    let before = compiler.compile(&empty.state(), PORTS).unwrap();
    assert_eq!(check(&mut compiler, &before, &empty, p()).owners, vec![]);
    // Members again: whole.
    let changes = check(&mut compiler, &before, &with_group(&ips(2)), p());
    assert!(matches!(changes.owners.as_slice(), [(RULE, FlowChange::Replace(f))] if f.len() == 5));
    // New ports: the base flows and every rule whole.
    let before = compiler
        .compile(&with_group(&ips(2)).state(), PORTS)
        .unwrap();
    let moved = VmPorts { host: 7, uplink: 2 };
    let changes = compiler
        .update(&with_group(&ips(2)).state(), moved, &Scope::none())
        .unwrap();
    let replaced: Vec<Owner> = changes.owners.iter().map(|(o, _)| *o).collect();
    assert_eq!(replaced, vec![BASE_OWNER, OTHER, RULE]);
    let whole = Compiler::new()
        .compile(&with_group(&ips(2)).state(), moved)
        .unwrap();
    assert_eq!(text(&apply(held(&before), &changes)), text(&held(&whole)));
}

#[test]
fn a_deleted_policy_leaves_its_owner_to_the_caller() {
    let mut compiler = Compiler::new();
    let before = compiler
        .compile(&with_group(&ips(2)).state(), PORTS)
        .unwrap();
    let without = World::new().ag("ag", &["2001:db8:100::1"]).policy(policy(
        "other",
        250,
        6.0,
        vec![egress(
            "Allow",
            json!({}),
            json!([{"protocol": "TCP", "port": 80}]),
        )],
    ));
    let changes = check(
        &mut compiler,
        &before,
        &without,
        Scope::Policies(BTreeSet::from(["p".to_string()])),
    );
    assert_eq!(changes.owners, vec![]);
    assert_eq!(changes.rules.len(), 1);
}
