//! The plans as tables: a snapshot in, the exact steps, releases and flows out.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::k8s::{GreTunnel, TcAction, TcDirection};
use crate::openflow::Category;
use crate::ovsdb::PortData;

fn row(
    name: &str,
    if_type: &str,
    ofport: i64,
    ids: &[(&str, &str)],
    options: &[(&str, &str)],
) -> PortData {
    let map = |v: &[(&str, &str)]| -> BTreeMap<String, String> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    PortData {
        uuid: Uuid(format!("uuid-{name}")),
        name: name.into(),
        external_ids: map(ids),
        if_uuid: None,
        if_name: name.into(),
        if_type: if_type.into(),
        ofport,
        error: None,
        options: map(options),
        mac: None,
        mac_in_use: None,
        mtu: None,
        ifindex: None,
    }
}

const TC: &[(&str, &str)] = &[("antrea-type", "traffic-control")];

fn gre(remote: &str, key: Option<u32>) -> TcPort {
    TcPort::Gre(GreTunnel {
        remote_ip: remote.parse().unwrap(),
        key,
    })
}

fn none(_: &str) -> Vec<String> {
    Vec::new()
}

#[test]
fn port_steps() {
    let dev = TcPort::Device { name: "t1".into() };
    let internal = TcPort::OvsInternal {
        name: "cap0".into(),
    };
    let gre4 = gre("192.0.2.2", Some(7));
    let gre6 = gre("2001:db8::2", Some(7));
    let gre4_name = port_name(&gre4);
    let gre6_name = port_name(&gre6);
    let gre4_opts = [("key", "7"), ("remote_ip", "192.0.2.2")];
    type Row = (&'static str, Vec<PortData>, TcPort, PortStep, bool);
    let rows: Vec<Row> = vec![
        (
            "absent: create",
            vec![],
            dev.clone(),
            PortStep::Create(port_spec(&dev)),
            false,
        ),
        (
            "present: keep, ofport from the snapshot",
            vec![row("t1", "", 7, TC, &[])],
            dev.clone(),
            PortStep::Keep { ofport: Some(7) },
            false,
        ),
        (
            "present without an ofport yet: keep, ofport unknown",
            vec![row("t1", "", 0, TC, &[])],
            dev.clone(),
            PortStep::Keep { ofport: None },
            false,
        ),
        (
            "ovsInternal: created internal, brought up",
            vec![],
            internal.clone(),
            PortStep::Create(port_spec(&internal)),
            true,
        ),
        (
            "tunnel with the same options: keep",
            vec![row(&gre4_name, "gre", 3, TC, &gre4_opts)],
            gre4.clone(),
            PortStep::Keep { ofport: Some(3) },
            false,
        ),
        (
            "tunnel with other options: fixed in place",
            vec![row(
                &gre4_name,
                "gre",
                3,
                TC,
                &[("key", "8"), ("remote_ip", "192.0.2.2")],
            )],
            gre4.clone(),
            PortStep::SetOptions {
                options: gre4_opts
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ofport: Some(3),
            },
            false,
        ),
        (
            "IPv6 GRE an older tether wrote as gre: re-created as ip6gre",
            vec![row(
                &gre6_name,
                "gre",
                4,
                TC,
                &[("key", "7"), ("remote_ip", "2001:db8::2")],
            )],
            gre6.clone(),
            PortStep::Recreate {
                old: Uuid(format!("uuid-{gre6_name}")),
                spec: port_spec(&gre6),
            },
            false,
        ),
    ];
    for (what, ports, p, want, internal) in rows {
        let ifs = Interfaces::new(ports);
        let got = plan_port(&ifs, &p, none).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(got.name, port_name(&p), "{what}");
        assert_eq!(got.step, want, "{what}");
        assert_eq!(got.internal, internal, "{what}");
    }
}

#[test]
fn port_refusals() {
    // A Pod's port named like the target.
    let ifs = Interfaces::new(vec![row(
        "t1",
        "",
        5,
        &[
            ("pod-name", "a"),
            ("pod-namespace", "ns"),
            ("container-id", "a"),
        ],
        &[],
    )]);
    let err = plan_port(&ifs, &TcPort::Device { name: "t1".into() }, none).unwrap_err();
    assert_eq!(
        err,
        SyncError::PortConflict {
            port: "t1".into(),
            role: "Pod ns/a".into()
        }
    );
    // A tunnel ovs-vswitchd would see as the same as another port's (same remote, key).
    let other = gre("192.0.2.2", Some(7));
    let other_name = port_name(&other);
    let ifs = Interfaces::new(vec![row(
        "gre-other",
        "gre",
        3,
        TC,
        &[("key", "7"), ("remote_ip", "192.0.2.2")],
    )]);
    let err = plan_port(&ifs, &other, |p| vec![format!("tc-of-{p}")]).unwrap_err();
    match err {
        SyncError::TunnelClash {
            port,
            other,
            other_tcs,
            ..
        } => {
            assert_eq!(port, other_name);
            assert_eq!(other, "gre-other");
            assert_eq!(other_tcs, vec!["tc-of-gre-other".to_string()]);
        }
        e => panic!("{e:?}"),
    }
}

#[test]
fn known_ofports() {
    let p = |step| PortPlan {
        name: "p".into(),
        step,
        internal: false,
    };
    assert_eq!(
        p(PortStep::Keep { ofport: Some(4) }).known_ofport(),
        Some(4)
    );
    assert_eq!(p(PortStep::Keep { ofport: None }).known_ofport(), None);
    assert_eq!(
        p(PortStep::SetOptions {
            options: BTreeMap::new(),
            ofport: Some(9)
        })
        .known_ofport(),
        Some(9)
    );
    assert_eq!(
        p(PortStep::Create(port_spec(&TcPort::Device {
            name: "p".into()
        })))
        .known_ofport(),
        None
    );
}

#[test]
fn releases() {
    let referenced = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    let prev = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    type Row = (
        &'static str,
        Vec<String>,
        Vec<&'static str>,
        BTreeSet<String>,
        Vec<&'static str>,
    );
    let rows: Vec<Row> = vec![
        (
            "first sync: nothing before",
            prev(&[]),
            vec!["t1"],
            referenced(&["t1"]),
            vec![],
        ),
        (
            "unchanged",
            prev(&["t1", "r1"]),
            vec!["t1", "r1"],
            referenced(&["t1", "r1"]),
            vec![],
        ),
        (
            "the old return port goes",
            prev(&["t1", "r1"]),
            vec!["t1", "r2"],
            referenced(&["t1", "r2"]),
            vec!["r1"],
        ),
        (
            "unless another TC still wants it",
            prev(&["t1", "r1"]),
            vec!["t1"],
            referenced(&["t1", "r1"]),
            vec![],
        ),
        (
            "a new target: the old one goes",
            prev(&["t1"]),
            vec!["t2"],
            referenced(&["t2"]),
            vec!["t1"],
        ),
    ];
    for (what, previous, now, referenced, want) in rows {
        assert_eq!(plan_release(&previous, &now, &referenced), want, "{what}");
    }
}

#[test]
fn flows_are_one_set_per_owner() {
    let tc = Owner::new(Category::TRAFFIC_CONTROL, 1);
    let port = Owner::new(Category::TRAFFIC_CONTROL, 2);
    let target = Owner::new(Category::TRAFFIC_CONTROL, 3);
    let owners = FlowOwners {
        marks: tc,
        target,
        ret: Some(port),
    };
    let plan = plan_flows(
        &[9, 3, 3],
        owners,
        20,
        Some(21),
        TcDirection::Both,
        TcAction::Mirror,
    );
    assert_eq!(
        plan,
        FlowPlan {
            marks: (
                tc,
                pipeline::tc_mark_flows(&[3, 9], 20, TcDirection::Both, TcAction::Mirror)
            ),
            target: (target, vec![pipeline::tc_target_flow(20)]),
            ret: Some((port, vec![pipeline::tc_return_flow(21)])),
        }
    );
    assert_eq!(
        plan.clone().sets().len(),
        3,
        "mark, target and return flows go out together"
    );
    let owners = FlowOwners {
        ret: None,
        ..owners
    };
    let plan = plan_flows(
        &[],
        owners,
        20,
        None,
        TcDirection::Ingress,
        TcAction::Redirect,
    );
    assert_eq!(plan.marks, (tc, Vec::new()));
    assert_eq!(
        plan.sets(),
        vec![
            (tc, Vec::new()),
            (target, vec![pipeline::tc_target_flow(20)])
        ]
    );
}
