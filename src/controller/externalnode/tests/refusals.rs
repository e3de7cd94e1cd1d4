//! Takeovers refused before anything is touched: a half-done takeover nobody recorded,
//! links that are not plain NICs, and a route that cannot be moved exactly.

use super::*;
use crate::netlink::LinkFlags;

#[test]
fn a_half_done_takeover_nobody_recorded_is_left_alone() {
    let fx = fixture();
    // `eth1~` exists next to `eth1`, but no record and no ports explain it.
    fx.links.add_link("eth1~", MAC2, 1500, true);
    let before = fx.nic_now();
    fx.want(&["192.0.2.10"]);
    let e = fx.ctl.sync().unwrap_err();
    assert_eq!(
        e.to_string(),
        "refusing to take over eth1: link eth1~ exists but OVSDB has no host port eth1"
    );
    assert_eq!(nic_state(&fx.links, fx.eth1), before);
    assert_eq!(port_names(&fx), vec!["br-int".to_string()]);
}

/// The link holding an ExternalNode's IP is judged before anything is touched: loopback,
/// the bridge's own internal port, another OVS port, a bond slave and a tunnel are refused
/// permanently (no retry until the object changes), with no link call at all.
#[test]
fn links_that_must_not_be_taken_over_are_refused_untouched() {
    type Setup = fn(&Fx) -> u32;
    let cases: Vec<(&str, Setup, &str)> = vec![
        (
            "an address on lo",
            |fx| {
                let lo = fx.links.add_link("lo", [0; 6], 65536, true);
                fx.links.edit_link(lo, |l| {
                    l.flags = LinkFlags(LinkFlags::UP.0 | LinkFlags::LOOPBACK.0);
                    l.mac = None;
                });
                lo
            },
            "lo is the loopback interface",
        ),
        (
            "the bridge's own port",
            |fx| {
                let br = fx.links.add_link("br-int", [2, 0, 0, 0, 9, 9], 1500, true);
                fx.links.edit_link(br, |l| l.kind = Some("tun".into()));
                br
            },
            "br-int is the OVS bridge's own internal port",
        ),
        (
            "a TrafficControl port",
            |fx| {
                fx.sim
                    .bridge
                    .add_port("coll0", &[("antrea-type", "traffic-control")], None);
                fx.links.add_link("coll0", [2, 0, 0, 0, 9, 8], 1500, true)
            },
            "coll0 is already a port of bridge br-int (traffic-control)",
        ),
        (
            "a bond slave",
            |fx| {
                let bond = fx.links.add_link("bond0", [2, 0, 0, 0, 9, 7], 1500, true);
                let s = fx.links.add_link("eth3", [2, 0, 0, 0, 9, 6], 1500, true);
                fx.links.edit_link(s, |l| l.master = Some(bond));
                s
            },
            "eth3 is enslaved to bond0",
        ),
        (
            "a vxlan link",
            |fx| {
                let v = fx.links.add_link("vx0", [2, 0, 0, 0, 9, 5], 1450, true);
                fx.links.edit_link(v, |l| l.kind = Some("vxlan".into()));
                v
            },
            "vx0 is a vxlan link: only plain NICs are taken over",
        ),
    ];
    for (what, setup, want) in cases {
        let fx = fixture();
        let idx = setup(&fx);
        add_addr(&fx.links, idx, "203.0.113.7", 32, None);
        fx.links.clear_calls();
        let before = fx.links.snapshot();
        fx.want(&["203.0.113.7"]);
        let e = fx.ctl.sync().unwrap_err();
        assert!(e.is_permanent(), "{what}: {e}");
        assert!(
            e.to_string().starts_with(&format!(
                "ExternalNode default/vm1: refusing to take over: {want}"
            )),
            "{what}: {e}"
        );
        assert_eq!(fx.links.calls(), vec![], "{what}: a link was touched");
        assert_eq!(fx.links.snapshot(), before, "{what}");
        assert_eq!(record(&fx), None, "{what}");
        assert!(fx.ctl.status().last_error.is_some(), "{what}");
    }
}

/// A route that cannot be re-created exactly (here: one using a nexthop object) makes the
/// takeover refuse, naming the route; nothing is touched. It is not permanent: once the
/// route is changed, the next sync takes the NIC over.
#[test]
fn an_unmovable_route_refuses_the_takeover_naming_it() {
    let fx = fixture();
    let mut r = Route::new(Prefix::new(ip("198.51.100.0"), 24), fx.eth1);
    r.gateway = Some(ip("192.0.2.1"));
    r.unmovable = Some("a nexthop object (RTA_NH_ID)".into());
    fx.links.add_route(&r).unwrap();
    fx.links.clear_calls();
    let before = fx.links.snapshot();
    fx.want(ETH1_IPS);
    let e = fx.ctl.sync().unwrap_err();
    assert!(!e.is_permanent());
    assert_eq!(
        e.to_string(),
        format!(
            "refusing to take over eth1: 1 route(s) through it cannot be moved to the host port exactly and would be lost: 198.51.100.0/24 via 192.0.2.1 oif {} metric 0: has a nexthop object (RTA_NH_ID)",
            fx.eth1
        )
    );
    assert_eq!(fx.links.calls(), vec![]);
    assert_eq!(fx.links.snapshot(), before);
    fx.links.del_route(&r).unwrap();
    fx.ctl.sync().unwrap();
    assert_attached(&fx);
}
