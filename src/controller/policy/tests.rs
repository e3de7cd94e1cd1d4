//! The controller against a fake switch, fed the controller's own lines
//! (`controlplane::fixtures`: Antrea's worked example `annp1`): what each sync sends,
//! whole or as a patch, and that a refused change is followed by everything whole.

use std::sync::{Arc, Mutex};

use super::*;
use crate::controlplane::fixtures::{
    AG_ADDED, AG_BOOKMARK, AG_PATCH, ATG_ADDED, ATG_BOOKMARK, NP_ADDED, NP_BOOKMARK,
};
use crate::controlplane::{GroupKind, decode_group_event, decode_policy_event};
use crate::openflow::OfError;
use crate::pipeline::policy::owners_of;
use crate::testing::FakeFlows;

const PORTS: VmPorts = VmPorts { host: 3, uplink: 2 };

fn synced_state() -> State {
    let mut s = State::new();
    for l in [NP_ADDED, NP_BOOKMARK] {
        s.on_policy_event(decode_policy_event(l.as_bytes()).unwrap());
    }
    for l in [ATG_ADDED, ATG_BOOKMARK] {
        let ev = decode_group_event(GroupKind::AppliedTo, l.as_bytes()).unwrap();
        s.on_group_event(GroupKind::AppliedTo, ev);
    }
    for l in [AG_ADDED, AG_BOOKMARK] {
        let ev = decode_group_event(GroupKind::Address, l.as_bytes()).unwrap();
        s.on_group_event(GroupKind::Address, ev);
    }
    assert!(s.synced());
    s
}

fn controller(flows: Arc<FakeFlows>, state: Arc<Mutex<State>>) -> PolicyController {
    PolicyController::new(
        flows,
        state,
        Box::new(|| Some(PORTS)),
        None,
        "vm-ns/vm1".into(),
        BTreeSet::new(),
    )
}

/// What the fake switch holds equals a fresh compile of `state`.
fn holds_a_fresh_compile(flows: &FakeFlows, state: &State) {
    let whole = Compiler::new().compile(state, PORTS).unwrap();
    for (owner, mut want) in owners_of(&whole) {
        want.sort();
        assert_eq!(flows.of(owner), want, "{owner}");
    }
}

#[test]
fn a_member_change_is_one_patch_and_a_refusal_is_followed_by_everything_whole() {
    let flows = Arc::new(FakeFlows::new());
    let state = Arc::new(Mutex::new(synced_state()));
    let c = controller(flows.clone(), state.clone());
    c.sync().unwrap();
    let rule = Owner::new(Category::NETWORK_POLICY, 2);
    assert_eq!(
        flows.changes.lock().unwrap().last().unwrap(),
        &vec![(BASE_OWNER, false), (rule, false)]
    );
    holds_a_fresh_compile(&flows, &state.lock().unwrap());
    assert_eq!(c.status().flows, flows.total());

    // Nothing changed: nothing sent.
    c.sync().unwrap();
    assert_eq!(flows.changes.lock().unwrap().len(), 1);

    // vm2's address changes (a patch: remove .4, add .6): one patch of the rule's owner.
    let ev = decode_group_event(GroupKind::Address, AG_PATCH.as_bytes()).unwrap();
    let outcome = state.lock().unwrap().on_group_event(GroupKind::Address, ev);
    c.note(&outcome);
    c.sync().unwrap();
    assert_eq!(
        flows.changes.lock().unwrap().last().unwrap(),
        &vec![(rule, true)]
    );
    holds_a_fresh_compile(&flows, &state.lock().unwrap());
    assert_eq!(c.status().flows, flows.total());

    // The switch refuses the next change: the sync fails, and once it is back every
    // owner goes whole (the compiler no longer knows what the switch holds).
    *flows.fail.lock().unwrap() = Some(OfError::Disconnected {
        socket: "br-int.mgmt".into(),
    });
    let mut state_now = state.lock().unwrap();
    let back = AG_PATCH.replace("rBBkBg==", "rBBkBw==").replace(
        r#""removedGroupMembers":[{"externalEntity":{"name":"vm2","namespace":"vm-ns"},"ips":["AAAAAAAAAAAAAP//rBBkBA=="]}]"#,
        r#""removedGroupMembers":[{"externalEntity":{"name":"vm2","namespace":"vm-ns"},"ips":["AAAAAAAAAAAAAP//rBBkBg=="]}]"#,
    );
    let ev = decode_group_event(GroupKind::Address, back.as_bytes()).unwrap();
    let outcome = state_now.on_group_event(GroupKind::Address, ev);
    assert!(matches!(outcome, Outcome::Changed(_)), "{outcome:?}");
    drop(state_now);
    c.note(&outcome);
    assert!(c.sync().is_err());
    *flows.fail.lock().unwrap() = None;
    c.sync().unwrap();
    assert_eq!(
        flows.changes.lock().unwrap().last().unwrap(),
        &vec![(BASE_OWNER, false), (rule, false)]
    );
    holds_a_fresh_compile(&flows, &state.lock().unwrap());
}
