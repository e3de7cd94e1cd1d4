use super::*;
use crate::netlink::LinkFlags;

fn link(name: &str) -> Link {
    Link {
        index: 3,
        name: name.into(),
        mac: Some([2, 0, 0, 0, 0, 3]),
        mtu: 1500,
        flags: LinkFlags(LinkFlags::UP.0 | LinkFlags::BROADCAST.0),
        kind: None,
        altnames: Vec::new(),
        master: None,
    }
}

const IP: &str = "192.0.2.10";

fn ips() -> Vec<IpAddr> {
    vec![IP.parse().unwrap()]
}

/// The labels a host port for `nic` has when it is up to date.
fn labels(nic: &str) -> BTreeMap<String, String> {
    host_external_ids(
        &format!("{nic}~"),
        &Uuid(format!("u-{nic}")),
        "vm1-e0",
        "ns",
        &ips(),
    )
}

fn att(nic: &str, uplink_port: bool, uplink_link: bool) -> Attached {
    Attached {
        nic: nic.into(),
        uplink: format!("{nic}~"),
        host: Uuid(format!("h-{nic}")),
        uplink_port: uplink_port.then(|| Uuid(format!("u-{nic}"))),
        uplink_link,
        ids: labels(nic),
    }
}

fn snap(uplink_link: bool, refusal: Option<&str>, attached: Vec<Attached>) -> Snapshot {
    Snapshot {
        key: "ns/vm1".into(),
        wanted: Wanted::Present {
            nic: Nic {
                link: link("eth1"),
                ips: ips(),
                held: false,
                uplink: "eth1~".into(),
                uplink_link,
                refusal: refusal.map(str::to_string),
            },
            wanted: ips(),
            entity: "vm1-e0".into(),
            namespace: "ns".into(),
        },
        attached,
    }
}

fn plan(attach: Attach, release: &[&str]) -> EnPlan {
    EnPlan {
        refused: None,
        nic: Some(NicPlan {
            nic: "eth1".into(),
            uplink: "eth1~".into(),
            attach,
            relabel: None,
        }),
        release: release.iter().map(|s| s.to_string()).collect(),
    }
}

fn refused(e: EnError) -> EnPlan {
    EnPlan {
        refused: Some(e),
        nic: None,
        release: Vec::new(),
    }
}

#[test]
fn decisions() {
    let tunnel = "eth1 is a vxlan link: only plain NICs are taken over";
    let rows: Vec<(&str, Snapshot, EnPlan)> = vec![
        (
            "nothing attached: take over",
            snap(false, None, vec![]),
            plan(Attach::Takeover, &[]),
        ),
        (
            "a refused link is refused before anything is touched",
            snap(false, Some(tunnel), vec![]),
            refused(EnError::Refused {
                en: "ns/vm1".into(),
                detail: tunnel.into(),
            }),
        ),
        (
            "attached and whole: kept, the verdict not asked (it is an OVS port now)",
            snap(
                true,
                Some("eth1 is an Open vSwitch internal port"),
                vec![att("eth1", true, true)],
            ),
            plan(Attach::Keep, &[]),
        ),
        (
            "the uplink link is gone (reboot): re-attach",
            snap(false, None, vec![att("eth1", true, false)]),
            plan(Attach::Reattach, &[]),
        ),
        (
            "the uplink link is gone and the link is refused now: refused",
            snap(false, Some(tunnel), vec![att("eth1", true, false)]),
            refused(EnError::Refused {
                en: "ns/vm1".into(),
                detail: tunnel.into(),
            }),
        ),
        (
            "the uplink port is gone: rebuild",
            snap(true, None, vec![att("eth1", false, true)]),
            plan(Attach::Rebuild, &[]),
        ),
        (
            "someone else's half takeover: refused, nothing released",
            snap(true, None, vec![att("eth2", true, true)]),
            refused(EnError::Inconsistent {
                nic: "eth1".into(),
                detail: "link eth1~ exists but OVSDB has no host port eth1".into(),
            }),
        ),
        (
            "another NIC holds the IPs now: take it, give the old one back",
            snap(false, None, vec![att("eth2", true, true)]),
            plan(Attach::Takeover, &["eth2"]),
        ),
        (
            "both attached: keep this one, give the other back",
            snap(
                true,
                None,
                vec![att("eth1", true, true), att("eth2", true, true)],
            ),
            plan(Attach::Keep, &["eth2"]),
        ),
    ];
    for (what, s, want) in rows {
        assert_eq!(decide(&s), want, "{what}");
    }
}

#[test]
fn no_externalnode_releases_everything_and_an_unusable_one_nothing() {
    let mut s = snap(
        true,
        None,
        vec![att("eth1", true, true), att("eth2", true, true)],
    );
    s.wanted = Wanted::Absent;
    assert_eq!(
        decide(&s),
        EnPlan {
            refused: None,
            nic: None,
            release: vec!["eth1".into(), "eth2".into()],
        }
    );
    let e = EnError::NicNotFound { ips: ips() };
    s.wanted = Wanted::Unusable(e.clone());
    assert_eq!(decide(&s), refused(e));
}

#[test]
fn a_kept_nic_is_relabelled_only_when_its_labels_differ() {
    let mut a = att("eth1", true, true);
    assert_eq!(
        decide(&snap(true, None, vec![a.clone()]))
            .nic
            .unwrap()
            .relabel,
        None
    );
    a.ids.insert("entity-name".into(), "old-e0".into());
    assert_eq!(
        decide(&snap(true, None, vec![a])).nic.unwrap().relabel,
        Some(labels("eth1"))
    );
}

#[test]
fn the_uplink_name_comes_from_what_ovsdb_recorded() {
    let mut a = att("eth1", true, true);
    a.uplink = "eth1-up".into();
    a.ids = host_external_ids("eth1-up", &Uuid("u-eth1".into()), "vm1-e0", "ns", &ips());
    let p = decide(&snap(true, None, vec![a])).nic.unwrap();
    assert_eq!((p.uplink.as_str(), p.relabel), ("eth1-up", None));
}
