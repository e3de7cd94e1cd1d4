//! The move plan as a table, and apply / rollback / rename / wait_gone against the
//! recording fake. No root needed.

use std::net::IpAddr;
use std::time::Duration;

use tether::netlink::{
    Addr, Call, FakeLinks, LinkChange, LinkError, Links, MovePlan, Prefix, Route, RouteProtocol,
    Scope, apply, apply_best_effort, capture, plan_move,
};

fn ip(s: &str) -> IpAddr {
    s.parse().expect("test IP literal")
}

const MAC: [u8; 6] = [2, 0, 0, 0, 1, 0x10];

/// `eth1` (index 1) configured like a VM's NIC, `tgt0` (index 2) down with MTU 1500.
fn scenario() -> FakeLinks {
    let f = FakeLinks::new();
    let nic = f.add_link("eth1", MAC, 1450, true);
    f.add_link("tgt0", [2, 0, 0, 0, 1, 0x20], 1500, false);
    let mut a = Addr::new(nic, ip("192.0.2.10"), 24);
    a.label = Some("eth1".into());
    f.add_addr(&a).expect("seed the fake");
    a.local = ip("198.51.100.7");
    a.prefix_len = 32;
    a.label = Some("eth1:web".into());
    f.add_addr(&a).expect("seed the fake");
    a.local = ip("192.0.2.11");
    a.prefix_len = 24;
    a.label = Some("eth1".into());
    f.add_addr(&a).expect("seed the fake");
    let mut ll = Addr::new(nic, ip("fe80::ff:fe00:110"), 64);
    ll.scope = Scope::LINK;
    f.add_addr(&ll).expect("seed the fake");
    f.add_addr(&Addr::new(nic, ip("2001:db8:1::10"), 64))
        .expect("seed the fake");
    f.add_addr(&Addr::new(nic, ip("2001:db8:1::20"), 64))
        .expect("seed the fake");

    let mut dflt = Route::new(Prefix::default_for(ip("0.0.0.0")), nic);
    dflt.gateway = Some(ip("192.0.2.1"));
    dflt.metric = 100;
    f.add_route(&dflt).expect("seed the fake");
    let mut onlink = Route::new(Prefix::new(ip("203.0.113.0"), 24), nic);
    onlink.scope = Scope::LINK;
    onlink.metric = 50;
    f.add_route(&onlink).expect("seed the fake");
    let mut via = Route::new(Prefix::new(ip("198.51.100.128"), 25), nic);
    via.gateway = Some(ip("203.0.113.1"));
    via.protocol = RouteProtocol::STATIC;
    f.add_route(&via).expect("seed the fake");
    let mut onlink6 = Route::new(Prefix::new(ip("2001:db8:2::"), 48), nic);
    onlink6.metric = 10;
    f.add_route(&onlink6).expect("seed the fake");
    let mut dflt6 = Route::new(Prefix::default_for(ip("::")), nic);
    dflt6.gateway = Some(ip("2001:db8:1::1"));
    dflt6.metric = 1024;
    f.add_route(&dflt6).expect("seed the fake");
    let mut ll6 = Route::new(Prefix::new(ip("fe80::"), 64), nic);
    ll6.protocol = RouteProtocol::KERNEL;
    ll6.metric = 256;
    f.add_route(&ll6).expect("seed the fake");
    f.clear_calls();
    f
}

type Snapshot = (Vec<tether::netlink::Link>, Vec<Addr>, Vec<Route>);

/// `eth1~:3` → `eth1~`: the `:N` labels a rename invents for unlabelled IPv4 addresses
/// cannot be re-created by a rollback (moving.rs module doc), everything else must match.
fn without_rename_labels(mut s: Snapshot) -> Snapshot {
    for a in &mut s.1 {
        if let Some((head, n)) = a.label.as_deref().and_then(|l| l.rsplit_once(':')) {
            if n.bytes().all(|b| b.is_ascii_digit()) {
                a.label = Some(head.to_string());
            }
        }
    }
    s
}

fn lines(plan: &MovePlan) -> Vec<String> {
    plan.steps.iter().map(|s| s.to_string()).collect()
}

#[test]
fn capture_leaves_out_link_local() {
    let f = scenario();
    let cfg = capture(&f, 1).unwrap();
    assert_eq!(
        (cfg.name.as_str(), cfg.mtu, cfg.mac),
        ("eth1", 1450, Some(MAC))
    );
    let addrs: Vec<String> = cfg.addrs.iter().map(|a| a.to_string()).collect();
    assert_eq!(
        addrs,
        [
            "192.0.2.10/24",
            "198.51.100.7/32",
            "192.0.2.11/24",
            "2001:db8:1::20/64",
            "2001:db8:1::10/64"
        ]
    );
    assert_eq!(cfg.routes.len(), 5);
    assert!(cfg.routes.iter().all(|r| r.dst.addr != ip("fe80::")));
}

/// The takeover: the NIC was renamed (down/up dropped IPv6 and routes), its config moves to
/// the target. Order: target link, then uplink routes (gateway first) and addresses
/// (secondaries and newest first), then target addresses, then target routes (on-link first).
#[test]
fn plan_move_table() {
    let f = scenario();
    let cfg = capture(&f, 1).unwrap();
    let uplink = f.rename(1, "eth1~").unwrap();
    let tgt = f.link_by_index(2).unwrap();
    let plan = plan_move(&cfg, Some(&uplink), &tgt);
    assert_eq!(
        lines(&plan),
        [
            "set mtu 1450 on tgt0 (was 1500)",
            "set tgt0 up",
            "delete route default via 2001:db8:1::1 oif 1 metric 1024 from eth1~",
            "delete route 198.51.100.128/25 via 203.0.113.1 oif 1 metric 0 from eth1~",
            "delete route default via 192.0.2.1 oif 1 metric 100 from eth1~",
            "delete route 2001:db8:2::/48 oif 1 metric 10 from eth1~",
            "delete route 203.0.113.0/24 oif 1 metric 50 from eth1~",
            "delete address 2001:db8:1::20/64 from eth1~",
            "delete address 2001:db8:1::10/64 from eth1~",
            "delete address 192.0.2.11/24 from eth1~",
            "delete address 198.51.100.7/32 from eth1~",
            "delete address 192.0.2.10/24 from eth1~",
            "add address 192.0.2.10/24 to tgt0",
            "add address 198.51.100.7/32 to tgt0",
            "add address 192.0.2.11/24 to tgt0",
            "add address 2001:db8:1::10/64 to tgt0",
            "add address 2001:db8:1::20/64 to tgt0",
            "add route 203.0.113.0/24 oif 2 metric 50 to tgt0",
            "add route 2001:db8:2::/48 oif 2 metric 10 to tgt0",
            "add route default via 192.0.2.1 oif 2 metric 100 to tgt0",
            "add route 198.51.100.128/25 via 203.0.113.1 oif 2 metric 0 to tgt0",
            "add route default via 2001:db8:1::1 oif 2 metric 1024 to tgt0",
        ]
    );
    // Addresses and routes are re-pointed at the link each step names; labels follow.
    for s in &plan.steps {
        match &s.action {
            LinkChange::AddAddr(a) | LinkChange::DelAddr(a) => assert_eq!(a.ifindex, s.ifindex),
            LinkChange::AddRoute(r) | LinkChange::DelRoute(r) => assert_eq!(r.oif, s.ifindex),
            _ => {}
        }
    }
    let labels: Vec<Option<&str>> = plan
        .steps
        .iter()
        .filter_map(|s| match &s.action {
            LinkChange::AddAddr(a) => Some(a.label.as_deref()),
            _ => None,
        })
        .collect();
    assert_eq!(
        labels,
        [Some("tgt0"), Some("tgt0:web"), Some("tgt0"), None, None]
    );
}

#[test]
fn restore_plan_without_a_source_only_adds() {
    let f = scenario();
    let mut cfg = capture(&f, 1).unwrap();
    cfg.routes.truncate(1);
    cfg.addrs.truncate(1);
    // The target is up with the right MTU already: no link steps.
    let nic = f.link_by_index(1).unwrap();
    let plan = plan_move(&cfg, None, &nic);
    assert_eq!(
        lines(&plan),
        [
            "add address 192.0.2.10/24 to eth1",
            "add route default via 192.0.2.1 oif 1 metric 100 to eth1",
        ]
    );
}

#[test]
fn long_alias_label_falls_back_to_the_link_name() {
    let f = scenario();
    let cfg = capture(&f, 1).unwrap();
    let long = f.add_link("abcdefghijklmno", MAC, 1450, true);
    let to = f.link_by_index(long).unwrap();
    let plan = plan_move(&cfg, None, &to);
    let labels: Vec<Option<&str>> = plan
        .steps
        .iter()
        .filter_map(|s| match &s.action {
            LinkChange::AddAddr(a) if !a.is_ipv6() => Some(a.label.as_deref()),
            _ => None,
        })
        .collect();
    // "abcdefghijklmno:web" would be 19 bytes.
    assert_eq!(labels, [Some("abcdefghijklmno"); 3]);
}

#[test]
fn labels_not_based_on_the_old_name_are_kept() {
    let f = scenario();
    let mut cfg = capture(&f, 1).unwrap();
    cfg.addrs.truncate(2);
    cfg.addrs[0].label = Some("eth10".into());
    cfg.addrs[1].label = Some("web".into());
    let plan = plan_move(&cfg, None, &f.link_by_index(2).unwrap());
    let labels: Vec<Option<&str>> = plan
        .steps
        .iter()
        .filter_map(|s| match &s.action {
            LinkChange::AddAddr(a) => Some(a.label.as_deref()),
            _ => None,
        })
        .collect();
    assert_eq!(labels, [Some("eth10"), Some("web")]);
}

#[test]
fn inverse_reverses_and_inverts() {
    let f = scenario();
    let cfg = capture(&f, 1).unwrap();
    let plan = plan_move(
        &cfg,
        Some(&f.link_by_index(1).unwrap()),
        &f.link_by_index(2).unwrap(),
    );
    let inv = plan.inverse();
    assert_eq!(inv.steps.len(), plan.steps.len());
    assert_eq!(
        inv.steps[0].to_string(),
        "delete route default via 2001:db8:1::1 oif 2 metric 1024 from tgt0"
    );
    assert_eq!(inv.steps[inv.steps.len() - 2].to_string(), "set tgt0 down");
    assert_eq!(
        inv.steps[inv.steps.len() - 1].to_string(),
        "set mtu 1500 on tgt0 (was 1450)"
    );
    assert_eq!(inv.inverse(), plan);
}

#[test]
fn apply_then_undo_restores_the_fake() {
    let f = scenario();
    let before = f.snapshot();
    let cfg = capture(&f, 1).unwrap();
    let plan = plan_move(
        &cfg,
        Some(&f.link_by_index(1).unwrap()),
        &f.link_by_index(2).unwrap(),
    );
    let applied = apply(&f, &plan).unwrap();
    assert_eq!(applied.changed.len(), plan.steps.len());
    let moved = capture(&f, 2).unwrap();
    assert_eq!(moved.addrs.len(), 5);
    assert_eq!(moved.routes.len(), 5);
    assert_eq!(capture(&f, 1).unwrap().addrs, vec![]);
    applied.undo(&f).unwrap();
    assert_eq!(f.snapshot(), before);
}

/// A failure injected at every step in turn: apply reports that step, undoes exactly the
/// steps that changed something (newest first), and leaves the state as it found it.
#[test]
fn failure_at_each_step_rolls_back_everything() {
    let template = scenario();
    let cfg = capture(&template, 1).unwrap();
    let uplink = template.rename(1, "eth1~").unwrap();
    let plan = plan_move(&cfg, Some(&uplink), &template.link_by_index(2).unwrap());
    for n in 0..plan.steps.len() {
        let f = scenario();
        f.rename(1, "eth1~").unwrap();
        f.clear_calls();
        let before = f.snapshot();
        let injected = LinkError::Other {
            what: "injected".into(),
            errno: 5,
        };
        f.fail_call(n, injected.clone());
        let err = apply(&f, &plan).unwrap_err();
        assert_eq!(err.index, n);
        assert_eq!(err.failed.step, plan.steps[n]);
        assert_eq!(err.failed.error, injected);
        assert_eq!(err.rollback_errors, vec![], "step {n}");
        assert_eq!(
            without_rename_labels(f.snapshot()),
            without_rename_labels(before.clone()),
            "state after a failure at step {n}"
        );

        // The rollback calls are the inverses of the steps that changed something. After
        // the rename only the IPv4 addresses were left on eth1~: the IPv6 and route deletes
        // found nothing, changed nothing, and are not undone.
        let calls = f.calls();
        let undo = &calls[n + 1..];
        let changed: Vec<&str> = plan.steps[..n]
            .iter()
            .filter(|s| match &s.action {
                LinkChange::DelRoute(_) => false,
                LinkChange::DelAddr(a) => !a.is_ipv6(),
                _ => true,
            })
            .map(|s| s.link.as_str())
            .collect();
        assert_eq!(undo.len(), changed.len(), "step {n}: {undo:#?}");
        assert_eq!(err.undone, changed.len());
    }
}

#[test]
fn rollback_errors_are_all_reported() {
    let f = scenario();
    let before = f.snapshot();
    let cfg = capture(&f, 1).unwrap();
    let plan = plan_move(
        &cfg,
        Some(&f.link_by_index(1).unwrap()),
        &f.link_by_index(2).unwrap(),
    );
    // LinkStep 5 fails; of the 5 undo calls that follow (steps 4..0 inverted), the 1st and 3rd
    // fail too.
    f.fail_call(
        5,
        LinkError::Other {
            what: "step".into(),
            errno: 5,
        },
    );
    f.fail_call(
        6,
        LinkError::Busy {
            what: "undo a".into(),
            errno: 16,
        },
    );
    f.fail_call(
        8,
        LinkError::Busy {
            what: "undo b".into(),
            errno: 16,
        },
    );
    let err = apply(&f, &plan).unwrap_err();
    assert_eq!(err.index, 5);
    assert_eq!(err.undone, 3);
    let failed: Vec<String> = err.rollback_errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        failed,
        [
            "add route default via 192.0.2.1 oif 1 metric 100 to eth1: undo a: busy (errno 16)",
            "add route default via 2001:db8:1::1 oif 1 metric 1024 to eth1: undo b: busy (errno 16)",
        ]
    );
    assert_eq!(
        err.to_string(),
        "step 5 (delete route 2001:db8:2::/48 oif 1 metric 10 from eth1: \
         step: Input/output error (os error 5)) failed; rolled back 3 step(s); \
         rollback: add route default via 192.0.2.1 oif 1 metric 100 to eth1: undo a: busy (errno 16); \
         rollback: add route default via 2001:db8:1::1 oif 1 metric 1024 to eth1: undo b: busy (errno 16)"
    );
    assert_ne!(
        f.snapshot(),
        before,
        "the two routes whose re-add failed are missing"
    );
}

#[test]
fn best_effort_runs_every_step_and_reports_every_error() {
    let f = scenario();
    let cfg = capture(&f, 1).unwrap();
    // The rename drops eth1's routes, which would otherwise clash with the target's.
    f.rename(1, "eth1~").unwrap();
    let tgt = f.link_by_index(2).unwrap();
    let plan = plan_move(&cfg, None, &tgt);
    f.fail_call(
        2,
        LinkError::Other {
            what: "a".into(),
            errno: 5,
        },
    );
    f.fail_call(
        9,
        LinkError::Other {
            what: "b".into(),
            errno: 5,
        },
    );
    let errs = apply_best_effort(&f, &plan).unwrap_err();
    let failed: Vec<String> = errs.iter().map(|e| e.step.to_string()).collect();
    assert_eq!(
        failed,
        [
            "add address 192.0.2.10/24 to tgt0",
            "add route default via 192.0.2.1 oif 2 metric 100 to tgt0",
        ]
    );
    // Everything else landed.
    let moved = capture(&f, 2).unwrap();
    assert_eq!((moved.addrs.len(), moved.routes.len()), (4, 4));
}

#[test]
fn exists_and_absent_are_tolerated_and_not_undone() {
    let f = scenario();
    let cfg = capture(&f, 1).unwrap();
    let nic = f.link_by_index(1).unwrap();
    // Moving onto the link that already has it all: every add finds it there.
    let applied = apply(&f, &plan_move(&cfg, None, &nic)).unwrap();
    assert_eq!(applied.changed, vec![]);
}

#[test]
fn rename_is_down_rename_up() {
    let f = scenario();
    let l = f.rename(1, "eth1~").unwrap();
    assert_eq!((l.name.as_str(), l.is_up()), ("eth1~", true));
    assert_eq!(
        f.calls(),
        [
            Call::SetDown(1),
            Call::SetName(1, "eth1~".into()),
            Call::SetUp(1)
        ]
    );
    // IPv4 labels rewritten as Linux 6.18 does (tests/netlink_kernel.rs checks the kernel).
    let labels: Vec<(String, Option<String>)> = f
        .addrs(Some(1))
        .unwrap()
        .into_iter()
        .filter(|a| !a.is_ipv6())
        .map(|a| (a.local.to_string(), a.label))
        .collect();
    assert_eq!(
        labels,
        [
            ("192.0.2.10".to_string(), Some("eth1~".to_string())),
            ("198.51.100.7".to_string(), Some("eth1~:web".to_string())),
            ("192.0.2.11".to_string(), Some("eth1~:3".to_string())),
        ]
    );
    // Same name: nothing to do.
    f.clear_calls();
    f.rename(1, "eth1~").unwrap();
    assert_eq!(f.calls(), []);
}

#[test]
fn rename_retries_every_100ms_then_succeeds() {
    let f = scenario();
    for n in 1..=3 {
        f.fail_call(
            n,
            LinkError::Exists {
                what: "x".into(),
                errno: 17,
            },
        );
    }
    f.rename(1, "eth1~").unwrap();
    let p = Call::Pause(Duration::from_millis(100));
    let name = Call::SetName(1, "eth1~".into());
    assert_eq!(
        f.calls(),
        [
            Call::SetDown(1),
            name.clone(),
            p.clone(),
            name.clone(),
            p.clone(),
            name.clone(),
            p,
            name,
            Call::SetUp(1)
        ]
    );
}

#[test]
fn rename_gives_up_after_one_second_and_brings_the_link_up() {
    let f = scenario();
    let err = f.rename(1, "tgt0").unwrap_err();
    assert!(err.is_exists(), "{err:?}");
    let calls = f.calls();
    let names = calls
        .iter()
        .filter(|c| matches!(c, Call::SetName(..)))
        .count();
    let pauses: Duration = calls
        .iter()
        .map(|c| match c {
            Call::Pause(d) => *d,
            _ => Duration::ZERO,
        })
        .sum();
    assert_eq!((names, pauses), (11, Duration::from_secs(1)));
    assert_eq!(calls.last(), Some(&Call::SetUp(1)));
    assert_eq!(f.link_by_index(1).unwrap().name, "eth1");
}

#[test]
fn rename_does_not_retry_a_missing_link_or_a_bad_name() {
    let f = scenario();
    f.fail_call(
        1,
        LinkError::NotFound {
            what: "x".into(),
            errno: 19,
        },
    );
    assert!(f.rename(1, "eth1~").unwrap_err().is_not_found());
    assert_eq!(
        f.calls(),
        [
            Call::SetDown(1),
            Call::SetName(1, "eth1~".into()),
            Call::SetUp(1)
        ]
    );
    f.clear_calls();
    let err = f.rename(1, "sixteen-bytes-xx").unwrap_err();
    assert!(matches!(err, LinkError::Invalid { .. }), "{err:?}");
    assert_eq!(f.calls(), []);
}

#[test]
fn rename_removes_the_old_name_altname_udev_kept() {
    let f = scenario();
    f.set_udev_altnames(true);
    f.add_altname(1, "enp0s3");
    let l = f.rename(1, "eth1~").unwrap();
    // The old name is gone (it would block the internal port); other altnames stay.
    assert_eq!(l.altnames, ["enp0s3"]);
    assert_eq!(
        f.calls(),
        [
            Call::SetDown(1),
            Call::SetName(1, "eth1~".into()),
            Call::SetUp(1),
            Call::DelAltname(1, "eth1".into())
        ]
    );
    assert!(f.link_by_name("eth1").unwrap_err().is_not_found());
}

#[test]
fn wait_gone_polls_every_50ms_for_2s() {
    let f = scenario();
    assert_eq!(f.wait_gone("nosuch0"), Ok(()));
    assert_eq!(f.calls(), []);
    let err = f.wait_gone("tgt0").unwrap_err();
    assert_eq!(
        err,
        LinkError::Timeout {
            what: "waiting for link tgt0 to disappear".into()
        }
    );
    assert_eq!(f.calls(), vec![Call::Pause(Duration::from_millis(50)); 40]);
}

#[test]
fn link_holding_finds_the_owner() {
    let f = scenario();
    assert_eq!(
        f.link_holding(ip("2001:db8:1::10"))
            .unwrap()
            .map(|l| l.index),
        Some(1)
    );
    assert_eq!(
        f.link_holding(ip("198.51.100.7")).unwrap().map(|l| l.index),
        Some(1)
    );
    assert_eq!(f.link_holding(ip("192.0.2.99")).unwrap(), None);
}

fn one_route_plan(prefsrc: &str) -> (FakeLinks, MovePlan) {
    let f = FakeLinks::new();
    let i = f.add_link("eth1", MAC, 1500, true);
    let mut r = Route::new(Prefix::new(ip("2001:db8:3::"), 48), i);
    r.prefsrc = Some(ip(prefsrc));
    let step = tether::netlink::LinkStep {
        ifindex: i,
        link: "eth1".into(),
        action: LinkChange::AddRoute(r),
    };
    (f, MovePlan { steps: vec![step] })
}

#[test]
fn a_route_with_an_ipv6_source_waits_for_dad() {
    let (f, plan) = one_route_plan("2001:db8:1::10");
    // "Invalid source address" while the address is tentative.
    for n in 0..3 {
        f.fail_call(
            n,
            LinkError::Other {
                what: "x".into(),
                errno: 22,
            },
        );
    }
    apply(&f, &plan).unwrap();
    let pauses = f
        .calls()
        .iter()
        .filter(|c| **c == Call::Pause(Duration::from_millis(100)))
        .count();
    assert_eq!(pauses, 3);
    assert_eq!(f.routes(1).unwrap().len(), 1);

    // Bounded: 50 retries (5 s), then the error stands.
    let (f, plan) = one_route_plan("2001:db8:1::10");
    for n in 0..=50 {
        f.fail_call(
            n,
            LinkError::Other {
                what: "x".into(),
                errno: 22,
            },
        );
    }
    let err = apply(&f, &plan).unwrap_err();
    assert_eq!(err.failed.error.errno(), Some(22));
    assert_eq!(
        f.calls()
            .iter()
            .filter(|c| matches!(c, Call::Pause(_)))
            .count(),
        50
    );
}

#[test]
fn other_route_errors_are_not_retried() {
    // An IPv4 source: EINVAL is final.
    let (f, mut plan) = one_route_plan("2001:db8:1::10");
    if let LinkChange::AddRoute(r) = &mut plan.steps[0].action {
        r.dst = Prefix::new(ip("198.51.100.0"), 24);
        r.prefsrc = Some(ip("192.0.2.10"));
    }
    f.fail_call(
        0,
        LinkError::Other {
            what: "x".into(),
            errno: 22,
        },
    );
    assert!(apply(&f, &plan).is_err());
    assert_eq!(f.calls().len(), 1);
    // An IPv6 source but another errno: final too.
    let (f, plan) = one_route_plan("2001:db8:1::10");
    f.fail_call(
        0,
        LinkError::Other {
            what: "x".into(),
            errno: 101,
        },
    );
    assert!(apply(&f, &plan).is_err());
    assert_eq!(f.calls().len(), 1);
}
