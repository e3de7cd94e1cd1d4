//! The state machine on the worked example's lines and on hand-made events: sync, patches
//! (an IP change, an unknown group), bookmark replace-all across a reconnect, restarts.

use std::net::{IpAddr, Ipv4Addr};

use super::*;
use crate::controlplane::event::{decode_group_event, decode_policy_event};
use crate::controlplane::fixtures::*;
use crate::controlplane::group::{GroupMember, MemberRef};

fn v4(d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(172, 16, 100, d))
}

/// Feed one line of `kind`'s watch.
fn feed(s: &mut State, kind: Kind, line: &str) -> Outcome {
    match kind {
        Kind::NetworkPolicy => s.on_policy_event(decode_policy_event(line.as_bytes()).unwrap()),
        Kind::AppliedToGroup => s.on_group_event(
            GroupKind::AppliedTo,
            decode_group_event(GroupKind::AppliedTo, line.as_bytes()).unwrap(),
        ),
        Kind::AddressGroup => s.on_group_event(
            GroupKind::Address,
            decode_group_event(GroupKind::Address, line.as_bytes()).unwrap(),
        ),
    }
}

fn names(n: &[&str]) -> Outcome {
    Outcome::Changed(n.iter().map(|s| s.to_string()).collect())
}

/// The worked example's three initial sets, in stream order.
fn synced_example() -> State {
    let mut s = State::new();
    assert_eq!(
        feed(&mut s, Kind::NetworkPolicy, NP_ADDED),
        Outcome::Unchanged
    );
    assert_eq!(
        feed(&mut s, Kind::NetworkPolicy, NP_BOOKMARK),
        Outcome::Unchanged
    );
    assert!(s.has_bookmarked(Kind::NetworkPolicy) && !s.synced());
    assert_eq!(
        feed(&mut s, Kind::AppliedToGroup, ATG_ADDED),
        Outcome::Unchanged
    );
    assert_eq!(
        feed(&mut s, Kind::AppliedToGroup, ATG_BOOKMARK),
        Outcome::Unchanged
    );
    assert_eq!(
        feed(&mut s, Kind::AddressGroup, AG_ADDED),
        Outcome::Unchanged
    );
    assert!(!s.synced());
    assert_eq!(
        feed(&mut s, Kind::AddressGroup, AG_BOOKMARK),
        Outcome::Synced
    );
    assert!(s.synced());
    s
}

fn ee(name: &str, ips: Vec<IpAddr>) -> MemberKey {
    MemberKey {
        entity: MemberRef::ExternalEntity {
            namespace: "vm-ns".into(),
            name: name.into(),
        },
        ips,
    }
}

#[test]
fn the_worked_example_syncs_and_applies() {
    let s = synced_example();
    assert_eq!(s.policy(NP), Some(&annp1()));
    let applied: Vec<&str> = s.applied_policies().map(|p| p.name.as_str()).collect();
    assert_eq!(applied, [NP]);
    assert_eq!(s.address_group_ips(AG), Some(BTreeSet::from([v4(4)])));
    assert_eq!(s.address_group_ips("nope"), None);
    assert!(s.missing_groups(&annp1()).is_empty());
    let atg = s.group(GroupKind::AppliedTo, ATG).unwrap();
    assert_eq!(atg.uid, ATG);
    assert_eq!(atg.members.keys().collect::<Vec<_>>(), [&ee("vm1", vec![])]);
}

#[test]
fn an_ip_change_keeps_the_member_with_its_new_ip() {
    let mut s = synced_example();
    assert_eq!(feed(&mut s, Kind::AddressGroup, AG_PATCH), names(&[NP]));
    let g = s.group(GroupKind::Address, AG).unwrap();
    assert_eq!(
        g.members.keys().collect::<Vec<_>>(),
        [&ee("vm2", vec![v4(6)])]
    );
    assert_eq!(s.address_group_ips(AG), Some(BTreeSet::from([v4(6)])));
    // The same patch again: the add is already there, the remove is gone: nothing moves.
    assert_eq!(
        feed(&mut s, Kind::AddressGroup, AG_PATCH),
        Outcome::Unchanged
    );
    // The appliedTo patch renames the member (vm1 → vm1-3e616); the policy still applies.
    assert_eq!(feed(&mut s, Kind::AppliedToGroup, ATG_PATCH), names(&[NP]));
    let g = s.group(GroupKind::AppliedTo, ATG).unwrap();
    assert_eq!(
        g.members.keys().collect::<Vec<_>>(),
        [&ee("vm1-3e616", vec![])]
    );
    assert!(s.applies(&annp1()));
}

#[test]
fn a_patch_inserts_then_deletes() {
    // The agent's order: a key both added and removed in one patch ends up removed.
    let mut g = GroupState::default();
    let m = |d| GroupMember {
        key: ee("vm2", vec![v4(d)]),
        ports: vec![],
    };
    assert!(g.patch(GroupPatch {
        name: AG.into(),
        uid: AG.into(),
        added: vec![m(4), m(5)],
        removed: vec![m(4)],
    }));
    assert_eq!(
        g.members.keys().collect::<Vec<_>>(),
        [&ee("vm2", vec![v4(5)])]
    );
    // Removing what is not there changes nothing.
    assert!(!g.patch(GroupPatch {
        name: AG.into(),
        uid: AG.into(),
        added: vec![],
        removed: vec![m(9)],
    }));
}

#[test]
fn a_patch_for_an_unknown_group_restarts_that_watch() {
    let mut s = synced_example();
    let unknown = AG_PATCH.replace(AG, "00000000-0000-0000-0000-00000000dead");
    assert_eq!(
        feed(&mut s, Kind::AddressGroup, &unknown),
        Outcome::Restart(
            "AddressGroupPatch for unknown AddressGroup 00000000-0000-0000-0000-00000000dead"
                .into()
        )
    );
    // The rest of that stream is ignored: the known group does not move.
    assert_eq!(
        feed(&mut s, Kind::AddressGroup, AG_PATCH),
        Outcome::Unchanged
    );
    assert_eq!(
        feed(&mut s, Kind::AddressGroup, AG_DELETED),
        Outcome::Unchanged
    );
    assert_eq!(s.address_group_ips(AG), Some(BTreeSet::from([v4(4)])));
    // Other watches go on.
    assert_eq!(feed(&mut s, Kind::AppliedToGroup, ATG_PATCH), names(&[NP]));
    // The new stream is a full resync: its initial set replaces the group at its bookmark.
    s.on_watch_start(Kind::AddressGroup);
    let now = AG_ADDED.replace("AAAAAAAAAAAAAP//rBBkBA==", "AAAAAAAAAAAAAP//rBBkBg==");
    assert_eq!(feed(&mut s, Kind::AddressGroup, &now), Outcome::Unchanged);
    assert_eq!(s.address_group_ips(AG), Some(BTreeSet::from([v4(4)])));
    assert_eq!(feed(&mut s, Kind::AddressGroup, AG_BOOKMARK), names(&[NP]));
    assert_eq!(s.address_group_ips(AG), Some(BTreeSet::from([v4(6)])));
    assert!(s.synced());
}

#[test]
fn the_bookmark_of_a_reconnect_replaces_all_and_not_before() {
    let mut s = synced_example();
    s.on_watch_start(Kind::NetworkPolicy);
    // The new initial set has another policy and lacks annp1.
    let other = NP_ADDED.replace(NP, "p2");
    assert_eq!(
        feed(&mut s, Kind::NetworkPolicy, &other),
        Outcome::Unchanged
    );
    assert!(s.policy(NP).is_some(), "annp1 is gone before the bookmark");
    assert!(
        s.policy("p2").is_none(),
        "p2 is visible before the bookmark"
    );
    assert_eq!(
        feed(&mut s, Kind::NetworkPolicy, NP_BOOKMARK),
        names(&[NP, "p2"])
    );
    assert!(s.policy(NP).is_none());
    assert!(s.policy("p2").is_some());
    // Group changes now reach p2 only.
    assert_eq!(feed(&mut s, Kind::AddressGroup, AG_PATCH), names(&["p2"]));
    // A later bookmark on the same stream changes nothing.
    assert_eq!(
        feed(&mut s, Kind::NetworkPolicy, NP_BOOKMARK),
        Outcome::Unchanged
    );
}

#[test]
fn an_unchanged_resync_reports_nothing() {
    let mut s = synced_example();
    for (kind, added, bookmark) in [
        (Kind::NetworkPolicy, NP_ADDED, NP_BOOKMARK),
        (Kind::AppliedToGroup, ATG_ADDED, ATG_BOOKMARK),
        (Kind::AddressGroup, AG_ADDED, AG_BOOKMARK),
    ] {
        s.on_watch_start(kind);
        assert_eq!(feed(&mut s, kind, added), Outcome::Unchanged);
        assert_eq!(feed(&mut s, kind, bookmark), Outcome::Unchanged, "{kind}");
    }
    // A MODIFIED that repeats the body (another node's span changed) is no change either.
    assert_eq!(
        feed(
            &mut s,
            Kind::NetworkPolicy,
            &NP_ADDED.replace("ADDED", "MODIFIED")
        ),
        Outcome::Unchanged
    );
}

#[test]
fn live_events_change_their_policies() {
    let mut s = synced_example();
    let gen2 = NP_ADDED.replace(r#""generation":1"#, r#""generation":2"#);
    assert_eq!(feed(&mut s, Kind::NetworkPolicy, &gen2), names(&[NP]));
    assert_eq!(s.policy(NP).map(|p| p.generation), Some(2));
    // Deleting the address group: the policy is now missing it.
    assert_eq!(feed(&mut s, Kind::AddressGroup, AG_DELETED), names(&[NP]));
    let p = s.policy(NP).unwrap().clone();
    assert_eq!(
        s.missing_groups(&p),
        BTreeSet::from([(GroupKind::Address, AG)])
    );
    assert_eq!(feed(&mut s, Kind::AddressGroup, AG_ADDED), names(&[NP]));
    assert_eq!(feed(&mut s, Kind::NetworkPolicy, NP_DELETED), names(&[NP]));
    assert_eq!(s.policies().count(), 0);
    // No policy names the groups any more; deleting an unknown policy is nothing.
    assert_eq!(
        feed(&mut s, Kind::AddressGroup, AG_PATCH),
        Outcome::Unchanged
    );
    assert_eq!(
        feed(&mut s, Kind::NetworkPolicy, NP_DELETED),
        Outcome::Unchanged
    );
}

#[test]
fn nothing_is_visible_before_all_three_bookmarks() {
    let mut s = State::new();
    for (kind, line) in [
        (Kind::NetworkPolicy, NP_ADDED),
        (Kind::NetworkPolicy, NP_BOOKMARK),
        (Kind::AddressGroup, AG_ADDED),
        (Kind::AddressGroup, AG_BOOKMARK),
        // Live on two watches, but not synced: applied, not reported.
        (Kind::AddressGroup, AG_PATCH),
        (Kind::NetworkPolicy, NP_DELETED),
        (Kind::NetworkPolicy, NP_ADDED),
        (Kind::AppliedToGroup, ATG_ADDED),
    ] {
        assert_eq!(feed(&mut s, kind, line), Outcome::Unchanged, "{line}");
    }
    assert_eq!(s.address_group_ips(AG), Some(BTreeSet::from([v4(6)])));
    // The appliedTo group is still in its initial set: the policy does not apply yet.
    assert!(!s.applies(&annp1()));
    assert_eq!(
        s.missing_groups(&annp1()),
        BTreeSet::from([(GroupKind::AppliedTo, ATG)])
    );
    assert_eq!(
        feed(&mut s, Kind::AppliedToGroup, ATG_BOOKMARK),
        Outcome::Synced
    );
    assert!(s.applies(&annp1()));
}

#[test]
fn patches_in_an_initial_set_apply_to_it() {
    let mut s = synced_example();
    s.on_watch_start(Kind::AddressGroup);
    assert_eq!(
        feed(&mut s, Kind::AddressGroup, AG_ADDED),
        Outcome::Unchanged
    );
    assert_eq!(
        feed(&mut s, Kind::AddressGroup, AG_PATCH),
        Outcome::Unchanged
    );
    assert_eq!(s.address_group_ips(AG), Some(BTreeSet::from([v4(4)])));
    assert_eq!(feed(&mut s, Kind::AddressGroup, AG_BOOKMARK), names(&[NP]));
    assert_eq!(s.address_group_ips(AG), Some(BTreeSet::from([v4(6)])));
}

#[test]
fn an_emptied_applied_to_group_stops_the_policy_applying() {
    let mut s = synced_example();
    let empty = ATG_PATCH.replace(
        r#""addedGroupMembers":[{"externalEntity":{"name":"vm1-3e616","namespace":"vm-ns"}}],"#,
        "",
    );
    assert_eq!(feed(&mut s, Kind::AppliedToGroup, &empty), names(&[NP]));
    assert!(!s.applies(&annp1()));
    assert_eq!(s.applied_policies().count(), 0);
    assert_eq!(s.policies().count(), 1);
}

#[test]
fn error_events_restart_their_watch() {
    let mut s = synced_example();
    let line = r#"{"type":"ERROR","object":{"kind":"Status","code":500,"reason":"InternalError","message":"boom"}}"#;
    assert_eq!(
        feed(&mut s, Kind::AppliedToGroup, line),
        Outcome::Restart("AppliedToGroup watch: API error 500 InternalError: boom".into())
    );
    assert_eq!(
        feed(&mut s, Kind::AppliedToGroup, ATG_PATCH),
        Outcome::Unchanged
    );
    assert!(s.synced(), "a restart keeps what is known");
    assert_eq!(
        feed(&mut s, Kind::NetworkPolicy, line),
        Outcome::Restart("NetworkPolicy watch: API error 500 InternalError: boom".into())
    );
}

#[test]
fn undecodable_events() {
    let mut s = synced_example();
    // A policy that could not be read in a new initial set keeps its known version.
    s.on_watch_start(Kind::NetworkPolicy);
    assert_eq!(
        s.on_undecodable(Kind::NetworkPolicy, Some("ADDED"), Some(NP)),
        Outcome::Unchanged
    );
    assert_eq!(
        feed(&mut s, Kind::NetworkPolicy, NP_BOOKMARK),
        Outcome::Unchanged
    );
    assert_eq!(s.policy(NP), Some(&annp1()));
    // An unreadable group MODIFIED may have been a patch: restart.
    assert_eq!(
        s.on_undecodable(Kind::AddressGroup, Some("MODIFIED"), Some(AG)),
        Outcome::Restart(format!(
            "AddressGroup {AG}: an event that did not decode may have changed its members"
        ))
    );
    assert_eq!(
        s.on_undecodable(Kind::AppliedToGroup, None, None),
        Outcome::Restart(
            "AppliedToGroup (name unreadable): an event that did not decode may have changed its members"
                .into()
        )
    );
    // An unreadable group ADDED in an initial set keeps the known group.
    s.on_watch_start(Kind::AddressGroup);
    assert_eq!(
        s.on_undecodable(Kind::AddressGroup, Some("ADDED"), Some(AG)),
        Outcome::Unchanged
    );
    assert_eq!(
        feed(&mut s, Kind::AddressGroup, AG_BOOKMARK),
        Outcome::Unchanged
    );
    assert_eq!(s.address_group_ips(AG), Some(BTreeSet::from([v4(4)])));
    assert_eq!(
        s.on_undecodable(Kind::NetworkPolicy, None, None),
        Outcome::Unchanged
    );
}
