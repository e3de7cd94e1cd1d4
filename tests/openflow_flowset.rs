//! The pure parts of the flow backend: the flow set's diff (which mods, in which order,
//! with which cookies), conflicts between owners, replay, and the connection's backoff and
//! keepalive state machines with injected time.

use std::time::{Duration, Instant};

use tether::openflow::OfError;
use tether::openflow::action::Action;
use tether::openflow::consts::{FlowModCommand, TABLE_ALL};
use tether::openflow::flow::{Category, Flow, Owner, cookie};
use tether::openflow::flowset::FlowSet;
use tether::openflow::liveness::{Backoff, Keepalive, KeepaliveAction};
use tether::openflow::oxm::MatchField;

const A: Owner = Owner {
    category: Category::TRAFFIC_CONTROL,
    object: 7,
};
const B: Owner = Owner {
    category: Category::EXTERNAL_NODE,
    object: 1,
};

fn flow(port: u32, out: u32) -> Flow {
    Flow::new(2, 200)
        .matching(MatchField::InPort(port))
        .actions([Action::output(out)])
}

/// (command, in_port, cookie) of each mod, in order.
fn summary(mods: &[tether::openflow::flowmod::FlowMod]) -> Vec<(FlowModCommand, u32, u64)> {
    mods.iter()
        .map(|m| {
            let port = match m.match_.fields().first() {
                Some(MatchField::InPort(p)) => *p,
                _ => 0,
            };
            (m.command, port, m.cookie)
        })
        .collect()
}

#[test]
fn diff_sends_only_the_difference_deletes_first() {
    let mut set = FlowSet::new(3);
    let ck = cookie(3, A.category, A.object);
    assert_eq!(ck, 0x0003_0100_0000_0007);
    let plan = set
        .plan_apply(A, vec![flow(1, 10), flow(2, 20), flow(3, 30)])
        .unwrap();
    let mut got = summary(&plan.mods);
    got.sort_by_key(|m| m.1);
    assert_eq!(
        got,
        vec![
            (FlowModCommand::ADD, 1, ck),
            (FlowModCommand::ADD, 2, ck),
            (FlowModCommand::ADD, 3, ck)
        ]
    );
    set.commit(plan);
    assert_eq!(set.len(), 3);

    // Same flows, other order, one duplicate: nothing to send.
    let plan = set
        .plan_apply(A, vec![flow(3, 30), flow(1, 10), flow(2, 20), flow(1, 10)])
        .unwrap();
    assert!(plan.is_empty());

    // 1 unchanged, 2 changed actions, 3 gone, 4 new; 5 new with a timeout.
    let plan = set
        .plan_apply(
            A,
            vec![
                flow(1, 10),
                flow(2, 21),
                flow(4, 40),
                flow(5, 50).timeouts(30, 0),
            ],
        )
        .unwrap();
    let got = summary(&plan.mods);
    assert_eq!(got[0], (FlowModCommand::DELETE_STRICT, 3, ck));
    assert_eq!(got[1], (FlowModCommand::MODIFY_STRICT, 2, ck));
    let mut adds = got[2..].to_vec();
    adds.sort_by_key(|m| m.1);
    assert_eq!(
        adds,
        vec![(FlowModCommand::ADD, 4, ck), (FlowModCommand::ADD, 5, ck)]
    );
    // Strict deletes carry no instructions; the modify carries the new ones.
    assert!(plan.mods[0].instructions.is_empty());
    assert_eq!(plan.mods[1].instructions, flow(2, 21).value.instructions);
    set.commit(plan);

    // A timeout change cannot be a modify (it changes instructions only): re-add.
    let plan = set
        .plan_apply(
            A,
            vec![
                flow(1, 10),
                flow(2, 21),
                flow(4, 40),
                flow(5, 50).timeouts(60, 0),
            ],
        )
        .unwrap();
    assert_eq!(summary(&plan.mods), vec![(FlowModCommand::ADD, 5, ck)]);
    assert_eq!(plan.mods[0].idle_timeout, 60);
}

#[test]
fn uncommitted_plans_change_nothing() {
    let mut set = FlowSet::new(1);
    let p = set.plan_apply(A, vec![flow(1, 10)]).unwrap();
    set.commit(p);
    // The switch rejected this one: the caller never commits it.
    let _rejected = set.plan_apply(A, vec![flow(9, 90)]).unwrap();
    assert_eq!(set.flows(A), vec![flow(1, 10)]);
    let plan = set.plan_apply(A, vec![flow(1, 10)]).unwrap();
    assert!(plan.is_empty());
}

#[test]
fn same_category_owners_hand_flows_over() {
    let a2 = Owner {
        category: Category::TRAFFIC_CONTROL,
        object: 8,
    };
    let mut set = FlowSet::new(1);
    let p = set.plan_apply(A, vec![flow(1, 10), flow(2, 10)]).unwrap();
    set.commit(p);
    // a2 takes in_port=1 (a Pod moving between TCs): an ADD with a2's cookie.
    let plan = set.plan_apply(a2, vec![flow(1, 20)]).unwrap();
    assert_eq!(
        summary(&plan.mods),
        vec![(FlowModCommand::ADD, 1, 0x0001_0100_0000_0008)]
    );
    set.commit(plan);
    assert_eq!(set.flows(A), vec![flow(2, 10)], "A forgot the key");
    assert_eq!(set.flows(a2), vec![flow(1, 20)]);
    assert_eq!(set.len(), 2);
    // A's next apply without the key must not delete a2's flow.
    let plan = set.plan_apply(A, vec![flow(2, 10)]).unwrap();
    assert!(plan.is_empty());
}

/// Plans are recorded before the switch answers (several owners share one bundle); a
/// refused bundle puts the set back exactly, a taken-over key included.
#[test]
fn undo_puts_the_set_back_in_reverse_order() {
    let a2 = Owner {
        category: Category::TRAFFIC_CONTROL,
        object: 8,
    };
    let mut set = FlowSet::new(1);
    let p = set.plan_apply(A, vec![flow(1, 10), flow(2, 10)]).unwrap();
    set.commit(p);
    let p = set.plan_apply(B, vec![flow(9, 90)]).unwrap();
    set.commit(p);
    let p = set.plan_apply(a2, vec![flow(1, 20)]).unwrap();
    let u1 = set.commit_undoable(p);
    let u2 = set.commit_undoable(set.plan_remove(A));
    let p = set.plan_apply(B, vec![flow(9, 91), flow(8, 80)]).unwrap();
    let u3 = set.commit_undoable(p);
    assert_eq!(set.flows(A), vec![]);
    assert_eq!(set.len(), 3);
    set.undo(u3);
    set.undo(u2);
    set.undo(u1);
    assert_eq!(set.flows(A), vec![flow(1, 10), flow(2, 10)]);
    assert_eq!(set.flows(a2), vec![]);
    assert_eq!(set.flows(B), vec![flow(9, 90)]);
    assert_eq!(set.len(), 3);
    // The holder index is right again: A's flows are A's (a2 taking in_port=1 is a
    // hand-over again, B asking for it a conflict).
    let plan = set.plan_apply(a2, vec![flow(1, 20)]).unwrap();
    assert_eq!(
        summary(&plan.mods),
        vec![(FlowModCommand::ADD, 1, 0x0001_0100_0000_0008)]
    );
    assert!(set.plan_apply(B, vec![flow(2, 10)]).is_err());
}

#[test]
fn a_patch_sends_only_what_it_names() {
    let mut set = FlowSet::new(3);
    let ck = cookie(3, A.category, A.object);
    let p = set
        .plan_apply(A, vec![flow(1, 10), flow(2, 20), flow(3, 30)])
        .unwrap();
    set.commit(p);
    // 4 added; 3 removed; 2 changed; 1 named again as installed (nothing); 9 removed but
    // never held (nothing); 2 also named for removal (changed, not deleted).
    let plan = set
        .plan_patch(
            A,
            vec![flow(4, 40), flow(2, 21), flow(1, 10)],
            vec![flow(3, 30).key, flow(9, 90).key, flow(2, 20).key],
        )
        .unwrap();
    assert_eq!(
        summary(&plan.mods),
        vec![
            (FlowModCommand::DELETE_STRICT, 3, ck),
            (FlowModCommand::MODIFY_STRICT, 2, ck),
            (FlowModCommand::ADD, 4, ck),
        ]
    );
    set.commit(plan);
    assert_eq!(set.flows(A), vec![flow(1, 10), flow(2, 21), flow(4, 40)]);
    assert_eq!(set.len(), 3);
    // The result is what a full apply of the same flows would have left: nothing to do.
    let plan = set
        .plan_apply(A, vec![flow(1, 10), flow(2, 21), flow(4, 40)])
        .unwrap();
    assert!(plan.is_empty());
    // Conflicts as for a full apply: another category's key, or one key twice.
    let p = set.plan_apply(B, vec![flow(7, 70)]).unwrap();
    set.commit(p);
    let err = set.plan_patch(A, vec![flow(7, 71)], vec![]).unwrap_err();
    assert!(matches!(err, OfError::Conflict { .. }), "{err}");
    let err = set
        .plan_patch(A, vec![flow(5, 1), flow(5, 2)], vec![])
        .unwrap_err();
    assert!(matches!(err, OfError::Conflict { .. }), "{err}");
    // Removing everything leaves no owner behind.
    let keys = set.flows(A).into_iter().map(|f| f.key).collect();
    let p = set.plan_patch(A, vec![], keys).unwrap();
    assert_eq!(p.mods.len(), 3);
    set.commit(p);
    assert_eq!(set.owners().collect::<Vec<_>>(), vec![B]);
    assert_eq!(set.len(), 1);
}

#[test]
fn an_undone_patch_puts_back_exactly_the_keys_it_touched() {
    let a2 = Owner {
        category: Category::TRAFFIC_CONTROL,
        object: 8,
    };
    let mut set = FlowSet::new(1);
    let p = set.plan_apply(A, vec![flow(1, 10), flow(2, 20)]).unwrap();
    set.commit(p);
    let p = set.plan_apply(a2, vec![flow(5, 50)]).unwrap();
    set.commit(p);
    // Changes 1, removes 2, adds 3, takes 5 over from a2 (same category).
    let p = set
        .plan_patch(
            A,
            vec![flow(1, 11), flow(3, 30), flow(5, 51)],
            vec![flow(2, 20).key],
        )
        .unwrap();
    let u = set.commit_undoable(p);
    assert_eq!(set.flows(A), vec![flow(1, 11), flow(3, 30), flow(5, 51)]);
    assert_eq!(set.flows(a2), vec![]);
    set.undo(u);
    assert_eq!(set.flows(A), vec![flow(1, 10), flow(2, 20)]);
    assert_eq!(set.flows(a2), vec![flow(5, 50)]);
    assert_eq!(set.len(), 3);
    // The holder index follows: B may not have A's key 2, and a2's 5 is a2's again.
    assert!(set.plan_apply(B, vec![flow(2, 20)]).is_err());
    assert!(set.plan_apply(a2, vec![flow(5, 50)]).unwrap().is_empty());
}

#[test]
fn owners_cannot_take_each_others_flows() {
    let mut set = FlowSet::new(1);
    let p = set.plan_apply(A, vec![flow(1, 10)]).unwrap();
    set.commit(p);
    let err = set.plan_apply(B, vec![flow(1, 99)]).unwrap_err();
    assert!(
        matches!(&err, OfError::Conflict { owner, .. } if owner == "owner(category=1,object=7)"),
        "{err}"
    );
    // Two different flows with one key from one owner.
    let err = set.plan_apply(B, vec![flow(5, 1), flow(5, 2)]).unwrap_err();
    assert!(matches!(err, OfError::Conflict { .. }), "{err}");
    // Once A lets go, B may have it.
    set.commit(set.plan_remove(A));
    assert!(set.is_empty());
    let p = set.plan_apply(B, vec![flow(1, 99)]).unwrap();
    set.commit(p);
    assert_eq!(set.flows(B), vec![flow(1, 99)]);
    assert_eq!(set.owners().collect::<Vec<_>>(), vec![B]);
}

#[test]
fn remove_deletes_strictly_and_replay_readds_everything() {
    let mut set = FlowSet::new(2);
    let p = set.plan_apply(A, vec![flow(1, 10), flow(2, 20)]).unwrap();
    set.commit(p);
    let p = set.plan_apply(B, vec![flow(3, 30)]).unwrap();
    set.commit(p);
    let replay = set.replay_mods();
    // First: delete whatever this round left, in every table.
    assert_eq!(replay[0].command, FlowModCommand::DELETE);
    assert_eq!(replay[0].table_id, TABLE_ALL);
    assert_eq!(replay[0].cookie, 0x0002_0000_0000_0000);
    assert_eq!(replay[0].cookie_mask, 0xffff_0000_0000_0000);
    let mut adds = summary(&replay[1..]);
    adds.sort_by_key(|m| m.1);
    assert_eq!(
        adds,
        vec![
            (FlowModCommand::ADD, 1, cookie(2, A.category, A.object)),
            (FlowModCommand::ADD, 2, cookie(2, A.category, A.object)),
            (FlowModCommand::ADD, 3, cookie(2, B.category, B.object)),
        ]
    );
    let plan = set.plan_remove(A);
    let mut dels = summary(&plan.mods);
    dels.sort_by_key(|m| m.1);
    assert_eq!(
        dels,
        vec![
            (
                FlowModCommand::DELETE_STRICT,
                1,
                cookie(2, A.category, A.object)
            ),
            (
                FlowModCommand::DELETE_STRICT,
                2,
                cookie(2, A.category, A.object)
            ),
        ]
    );
    set.commit(plan);
    assert_eq!(set.len(), 1);
    assert!(set.plan_remove(A).is_empty());
}

#[test]
fn backoff_doubles_to_the_cap_and_resets() {
    let mut b = Backoff::new(Duration::from_millis(50), Duration::from_secs(1));
    let seq: Vec<u128> = (0..7).map(|_| b.next_delay().as_millis()).collect();
    assert_eq!(seq, vec![50, 100, 200, 400, 800, 1000, 1000]);
    b.reset();
    assert_eq!(b.next_delay(), Duration::from_millis(50));
}

#[test]
fn keepalive_probes_after_silence_and_gives_up_after_another_interval() {
    let t0 = Instant::now();
    let s = Duration::from_secs(1);
    let mut k = Keepalive::new(5 * s, t0);
    assert_eq!(k.next_due(), t0 + 5 * s);
    assert_eq!(k.poll(t0 + 4 * s), KeepaliveAction::Nothing);
    assert_eq!(k.poll(t0 + 5 * s), KeepaliveAction::SendEcho);
    // Probe out: due again when the answer is overdue.
    assert_eq!(k.next_due(), t0 + 10 * s);
    assert_eq!(k.poll(t0 + 6 * s), KeepaliveAction::Nothing);
    // An answer (anything received) resets it.
    k.received(t0 + 7 * s);
    assert_eq!(k.next_due(), t0 + 12 * s);
    assert_eq!(k.poll(t0 + 11 * s), KeepaliveAction::Nothing);
    assert_eq!(k.poll(t0 + 12 * s), KeepaliveAction::SendEcho);
    assert_eq!(k.poll(t0 + 16 * s), KeepaliveAction::Nothing);
    assert_eq!(k.poll(t0 + 17 * s), KeepaliveAction::Dead);
}

/// Flows built apart with equal instructions keep one shared copy of them (docs/design.md#benchmarks: most
/// of a kept flow's heap was its own instruction list); a list nobody uses is let go.
#[test]
fn equal_instructions_are_kept_once() {
    let mut set = FlowSet::new(1);
    let flows: Vec<Flow> = (1..=100).map(|p| flow(p, 10)).collect();
    let p = set.plan_apply(A, flows).unwrap();
    set.commit(p);
    let p = set
        .plan_apply(B, vec![flow(500, 11), flow(501, 11)])
        .unwrap();
    set.commit(p);
    assert_eq!(set.distinct_instructions(), 2);
    let installed = set.flows(A);
    assert_eq!(installed.len(), 100);
    assert!(
        installed
            .windows(2)
            .all(|w| std::sync::Arc::ptr_eq(&w[0].value.instructions, &w[1].value.instructions)),
        "A's flows share one instruction list"
    );
    drop(installed);
    // The mods still carry the instructions themselves.
    let mods = set.replay_mods();
    assert_eq!(mods.len(), 103);
    assert_eq!(mods[1].instructions, flow(1, 10).value.instructions);
    drop(mods);
    let p = set.plan_remove(A);
    set.commit(p);
    assert_eq!(set.distinct_instructions(), 1);
}
