//! The netlink backend against the real kernel, each test in a fresh network namespace.
//!
//! Namespace entry: `common::in_netns` re-runs this test binary under `ip netns exec`
//! (netlink acts on the caller's namespace and `setns` would need `unsafe`). Links are veth
//! pairs (this kernel has no `dummy` type); addresses are documentation ranges only.
//!
//! The kernel's own view is read with `ip -j` and compared exactly. Normalised, and only
//! there: finite address lifetimes (`valid_life_time`/`preferred_life_time` count down by
//! the second, so they become "finite" and are checked not to have grown). IPv6 DAD is
//! turned off for the namespace (`accept_dad=0`) so re-created link-local addresses are not
//! `tentative` for ~2 s after a link comes back up (snapshots still wait for the flag to
//! clear, which then takes milliseconds); one address also carries `nodad` to show that flag
//! is carried across.
//!
//! The tests themselves stay in this file, at the crate root: `in_netns` re-runs each one by
//! its exact libtest name, which a module would prefix. Setup and snapshot helpers are in
//! `netlink_kernel/fixtures.rs`.

// Only the namespace half of the harness is used here.
#[allow(unused_imports)]
mod common;
#[path = "netlink_kernel/fixtures.rs"]
mod fixtures;

use serde_json::Value;

use common::{in_netns, privileged};
use fixtures::{addr_snapshot, configure_nic, ip, json, no_dad, route_snapshot, veth};
use tether::netlink::{
    Addr, AddrFlags, Lifetime, LinkError, Links, Prefix, Route, RoutePref, RouteProtocol, Rtnl,
    Scope, apply, capture, errno, plan_move, uplink_name,
};

#[test]
fn link_lookups_match_ip_link() {
    if !privileged("link_lookups_match_ip_link") {
        return;
    }
    in_netns("link_lookups_match_ip_link", |ns| {
        no_dad(ns);
        veth(ns, "eth1", "peer1");
        ns.sh("ip link set eth1 down
               ip link set eth1 mtu 1400 address 02:00:00:00:01:10 up
               ip addr add 192.0.2.10/24 dev eth1
               ip -6 addr add 2001:db8:1::10/64 dev eth1 nodad");
        let rt = Rtnl::connect().unwrap();
        let kernel = &json(&ns.ip(&["-j", "link", "show", "dev", "eth1"]))[0];
        let l = rt.link_by_name("eth1").unwrap();
        assert_eq!(u64::from(l.index), kernel["ifindex"].as_u64().unwrap());
        assert_eq!(l.name, "eth1");
        assert_eq!(l.mac, Some([2, 0, 0, 0, 1, 0x10]));
        assert_eq!(l.mtu, 1400);
        assert!(l.is_up());
        assert_eq!(l.kind.as_deref(), Some("veth"));
        assert_eq!(l.altnames, Vec::<String>::new());
        assert_eq!(rt.link_by_index(l.index).unwrap(), l);

        let names: Vec<String> = rt.links().unwrap().into_iter().map(|l| l.name).collect();
        let listed: Vec<String> = json(&ns.ip(&["-j", "link", "show"]))
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["ifname"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(names, listed);
        // Besides the kernel's fallback tunnel devices, which every new namespace gets once
        // their module is loaded (gre0, gretap0, erspan0 after a GRE port anywhere: seen in
        // the kernel tier), these are the test's own links.
        let fallback = [
            "gre0", "gretap0", "erspan0", "ip6gre0", "ip6tnl0", "sit0", "tunl0",
        ];
        let own: Vec<&str> = names
            .iter()
            .map(String::as_str)
            .filter(|n| !fallback.contains(n))
            .collect();
        assert_eq!(own, ["lo", "peer1", "eth1"]);

        assert_eq!(rt.link_holding(ip("192.0.2.10")).unwrap(), Some(l.clone()));
        assert_eq!(
            rt.link_holding(ip("2001:db8:1::10")).unwrap(),
            Some(l.clone())
        );
        assert_eq!(rt.link_holding(ip("192.0.2.99")).unwrap(), None);

        // An altname is found by name too (kernel behaviour), and can be removed.
        ns.ip(&[
            "link", "property", "add", "dev", "eth1", "altname", "nic-alt",
        ]);
        let by_alt = rt.link_by_name("nic-alt").unwrap();
        assert_eq!(
            (by_alt.name.as_str(), by_alt.altnames),
            ("eth1", vec!["nic-alt".into()])
        );
        rt.del_altname(l.index, "nic-alt").unwrap();
        assert!(rt.link_by_name("nic-alt").unwrap_err().is_not_found());
        let kernel = &json(&ns.ip(&["-j", "link", "show", "dev", "eth1"]))[0];
        assert_eq!(kernel.get("altnames"), None);

        // MTU and up/down.
        rt.set_mtu(l.index, 1300).unwrap();
        rt.set_down(l.index).unwrap();
        let kernel = &json(&ns.ip(&["-j", "link", "show", "dev", "eth1"]))[0];
        assert_eq!(kernel["mtu"], 1300);
        assert_eq!(
            kernel["flags"],
            serde_json::json!(["BROADCAST", "MULTICAST"])
        );
        rt.set_up(l.index).unwrap();
        assert!(rt.link_by_index(l.index).unwrap().is_up());
    });
}

#[test]
fn rename_14_and_15_character_names() {
    if !privileged("rename_14_and_15_character_names") {
        return;
    }
    in_netns("rename_14_and_15_character_names", |ns| {
        veth(ns, "abcdefghijklmn", "p14");
        veth(ns, "abcdefghijklmno", "p15");
        let rt = Rtnl::connect().unwrap();
        for (nic, uplink) in [
            ("abcdefghijklmn", "abcdefghijklmn~"),
            ("abcdefghijklmno", "abcdefgh~2938dc"),
        ] {
            assert_eq!(uplink_name(nic), uplink);
            let before = rt.link_by_name(nic).unwrap();
            let after = rt.rename(before.index, uplink).unwrap();
            assert_eq!(after.name, uplink);
            assert!(after.is_up(), "{uplink} is up again");
            // No udev here: this kernel keeps no altname for the old name by itself.
            assert_eq!(after.altnames, Vec::<String>::new());
            let kernel = &json(&ns.ip(&["-j", "link", "show", "dev", uplink]))[0];
            assert_eq!(kernel["ifindex"].as_u64(), Some(u64::from(before.index)));
            assert!(rt.link_by_name(nic).unwrap_err().is_not_found());
            // And back.
            assert_eq!(rt.rename(after.index, nic).unwrap().name, nic);
        }
        // `<15 chars>~` is 16 bytes: refused before the kernel sees it.
        let l = rt.link_by_name("abcdefghijklmno").unwrap();
        let err = rt.rename(l.index, "abcdefghijklmno~").unwrap_err();
        assert!(matches!(err, LinkError::Invalid { .. }), "{err:?}");
        // The kernel refuses it too (IFNAMSIZ), which is why the hashed form exists.
        assert!(
            ns.try_ip(&["link", "set", "abcdefghijklmno", "name", "abcdefghijklmno~"])
                .is_err()
        );
    });
}

#[test]
fn rename_onto_an_existing_name_is_exists() {
    if !privileged("rename_onto_an_existing_name_is_exists") {
        return;
    }
    in_netns("rename_onto_an_existing_name_is_exists", |ns| {
        veth(ns, "eth1", "peer1");
        let rt = Rtnl::connect().unwrap();
        let l = rt.link_by_name("eth1").unwrap();
        // Retried for ~1 s (the name might be on its way out), then reported.
        let err = rt.rename(l.index, "peer1").unwrap_err();
        assert_eq!(
            err,
            LinkError::Exists {
                what: format!("rename link eth1 (index {}) to peer1", l.index),
                errno: errno::EEXIST,
            }
        );
        // Still called eth1, and up again.
        let after = rt.link_by_index(l.index).unwrap();
        assert_eq!((after.name.as_str(), after.is_up()), ("eth1", true));
        // An altname blocks a rename just like a name does. Through `rename`, which sets the
        // link down first as tether always does: on Debian 12's kernel (6.1, the kernel tier)
        // a bare IFLA_IFNAME on an UP link is EBUSY before any name check (`dev_change_name`
        // refuses a running link), while this machine's newer kernel renames UP links and
        // answers EEXIST.
        ns.ip(&[
            "link", "property", "add", "dev", "peer1", "altname", "taken0",
        ]);
        let err = rt.rename(l.index, "taken0").unwrap_err();
        assert!(err.is_exists(), "{err}");
        let after = rt.link_by_index(l.index).unwrap();
        assert_eq!((after.name.as_str(), after.is_up()), ("eth1", true));
    });
}

/// A link renamed onto its own altname (udev gives a renamed NIC its old name as one, a
/// moment later: the kernel tier's reboot): the kernel refuses it like any name in use, so
/// `rename` takes the altname off first.
#[test]
fn rename_onto_its_own_altname() {
    if !privileged("rename_onto_its_own_altname") {
        return;
    }
    in_netns("rename_onto_its_own_altname", |ns| {
        veth(ns, "eth1~", "peer1");
        ns.ip(&["link", "property", "add", "dev", "eth1~", "altname", "eth1"]);
        let rt = Rtnl::connect().unwrap();
        let l = rt.link_by_name("eth1~").unwrap();
        assert_eq!(l.altnames, ["eth1"]);
        let after = rt.rename(l.index, "eth1").unwrap();
        assert_eq!(
            (after.name.as_str(), after.altnames.len(), after.is_up()),
            ("eth1", 0, true)
        );
    });
}

#[test]
fn missing_links_and_absent_objects_are_typed_errors() {
    if !privileged("missing_links_and_absent_objects_are_typed_errors") {
        return;
    }
    in_netns("missing_links_and_absent_objects_are_typed_errors", |ns| {
        no_dad(ns);
        veth(ns, "eth1", "peer1");
        let rt = Rtnl::connect().unwrap();
        let i = rt.link_by_name("eth1").unwrap().index;
        let missing = 4242;

        assert_eq!(
            rt.link_by_name("nosuch0").unwrap_err(),
            LinkError::NotFound {
                what: "link nosuch0".into(),
                errno: errno::ENODEV
            }
        );
        assert_eq!(
            rt.link_by_index(missing).unwrap_err(),
            LinkError::NotFound {
                what: "link index 4242".into(),
                errno: errno::ENODEV
            }
        );
        assert!(rt.set_up(missing).unwrap_err().is_not_found());
        assert!(rt.rename(missing, "x0").unwrap_err().is_not_found());
        assert_eq!(rt.wait_gone("nosuch0"), Ok(()));

        // Deleting an absent address / route; adding to a missing link.
        let a4 = Addr::new(i, ip("192.0.2.10"), 24);
        assert_eq!(
            rt.del_addr(&a4).unwrap_err(),
            LinkError::NotFound {
                what: format!("delete address 192.0.2.10/24 from link eth1 (index {i})"),
                errno: errno::EADDRNOTAVAIL
            }
        );
        let a6 = Addr::new(i, ip("2001:db8:1::10"), 64);
        assert_eq!(
            rt.del_addr(&a6).unwrap_err().errno(),
            Some(errno::EADDRNOTAVAIL)
        );
        let r = Route::new(Prefix::new(ip("203.0.113.0"), 24), i);
        assert_eq!(rt.del_route(&r).unwrap_err().errno(), Some(errno::ESRCH));
        let mut a_missing = a4.clone();
        a_missing.ifindex = missing;
        assert_eq!(
            rt.add_addr(&a_missing).unwrap_err().errno(),
            Some(errno::ENODEV)
        );

        // Adding twice.
        rt.add_addr(&a4).unwrap();
        assert_eq!(rt.add_addr(&a4).unwrap_err().errno(), Some(errno::EEXIST));
        rt.add_route(&r).unwrap();
        assert!(rt.add_route(&r).unwrap_err().is_exists());
        // The same destination and metric through another link is "exists" too: why a move
        // deletes from the source before it adds to the target.
        let mut other = r.clone();
        other.oif = rt.link_by_name("peer1").unwrap().index;
        assert!(rt.add_route(&other).unwrap_err().is_exists());
        other.metric = 7;
        rt.add_route(&other).unwrap();
        let mut r6 = Route::new(Prefix::new(ip("2001:db8:5::"), 48), i);
        r6.metric = 10;
        rt.add_route(&r6).unwrap();
        r6.oif = other.oif;
        assert!(rt.add_route(&r6).unwrap_err().is_exists());
    });
}

#[test]
fn addresses_and_routes_round_trip_through_the_kernel() {
    if !privileged("addresses_and_routes_round_trip_through_the_kernel") {
        return;
    }
    in_netns("addresses_and_routes_round_trip_through_the_kernel", |ns| {
        no_dad(ns);
        veth(ns, "eth1", "peer1");
        // A fixed MAC, so the link-local address is known.
        ns.sh("ip link set eth1 down; ip link set eth1 address 02:00:00:00:01:10 up");
        let rt = Rtnl::connect().unwrap();
        let i = rt.link_by_name("eth1").unwrap().index;

        let mut v4 = Addr::new(i, ip("192.0.2.10"), 24);
        v4.broadcast = Some("192.0.2.255".parse().unwrap());
        v4.label = Some("eth1:dhcp".into());
        v4.lifetime = Lifetime {
            valid: 7200,
            preferred: 3600,
        };
        let mut v6 = Addr::new(i, ip("2001:db8:1::10"), 64);
        v6.flags = AddrFlags::NODAD;
        v6.metric = 77;
        rt.add_addr(&v4).unwrap();
        rt.add_addr(&v6).unwrap();
        let (addrs, finite) = addr_snapshot(ns, "eth1");
        assert!(finite.iter().all(|n| *n <= 7200), "{finite:?}");
        assert_eq!(
            addrs[0]["addr_info"],
            serde_json::json!([
                {"family": "inet", "local": "192.0.2.10", "prefixlen": 24,
                 "broadcast": "192.0.2.255", "scope": "global", "dynamic": true,
                 "label": "eth1:dhcp", "valid_life_time": "finite",
                 "preferred_life_time": "finite"},
                {"family": "inet6", "local": "2001:db8:1::10", "prefixlen": 64,
                 "scope": "global", "metric": 77, "nodad": true,
                 "valid_life_time": 4294967295u32,
                 "preferred_life_time": 4294967295u32},
                {"family": "inet6", "local": "fe80::ff:fe00:110", "prefixlen": 64,
                 "scope": "link", "valid_life_time": 4294967295u32,
                 "preferred_life_time": 4294967295u32},
            ])
        );
        // Read back: what we set, plus what the kernel computed (PERMANENT, lifetimes).
        let listed = rt.addrs(Some(i)).unwrap();
        assert_eq!(listed.len(), 3);
        let got4 = &listed[0];
        assert_eq!(
            (
                got4.local,
                got4.broadcast,
                got4.label.as_deref(),
                got4.scope
            ),
            (v4.local, v4.broadcast, Some("eth1:dhcp"), Scope::UNIVERSE)
        );
        assert!(got4.lifetime.valid <= 7200 && got4.lifetime.preferred <= 3600);
        let got6 = &listed[1];
        assert_eq!(
            got6.flags,
            AddrFlags(AddrFlags::NODAD.0 | AddrFlags::PERMANENT.0)
        );
        assert_eq!((got6.metric, got6.lifetime), (77, Lifetime::FOREVER));
        assert!(listed[2].local.to_string().starts_with("fe80::"));

        let mut onlink = Route::new(Prefix::new(ip("203.0.113.0"), 24), i);
        onlink.scope = Scope::LINK;
        onlink.metric = 50;
        let mut dflt = Route::new(Prefix::default_for(ip("0.0.0.0")), i);
        dflt.gateway = Some(ip("203.0.113.1"));
        dflt.metric = 100;
        dflt.protocol = RouteProtocol::STATIC;
        let mut dflt6 = Route::new(Prefix::default_for(ip("::")), i);
        dflt6.gateway = Some(ip("2001:db8:1::1"));
        dflt6.metric = 1024;
        dflt6.pref = Some(RoutePref::HIGH);
        for r in [&onlink, &dflt, &dflt6] {
            rt.add_route(r).unwrap();
        }
        let (r4, r6) = route_snapshot(ns, "eth1");
        assert_eq!(
            r4,
            serde_json::json!([
                {"dst": "default", "gateway": "203.0.113.1", "protocol": "static",
                 "metric": 100, "flags": []},
                {"dst": "192.0.2.0/24", "protocol": "kernel", "scope": "link",
                 "prefsrc": "192.0.2.10", "flags": []},
                {"dst": "203.0.113.0/24", "scope": "link", "metric": 50, "flags": []},
            ])
        );
        assert_eq!(
            r6,
            serde_json::json!([
                {"dst": "2001:db8:1::/64", "protocol": "kernel", "metric": 77, "flags": [],
                 "pref": "medium"},
                {"dst": "fe80::/64", "protocol": "kernel", "metric": 256, "flags": [],
                 "pref": "medium"},
                {"dst": "default", "gateway": "2001:db8:1::1", "metric": 1024, "flags": [],
                 "pref": "high"},
            ])
        );
        let listed = rt.routes(i).unwrap();
        assert!(listed.contains(&onlink), "{listed:#?}");
        assert!(listed.contains(&dflt), "{listed:#?}");
        let got6 = listed
            .iter()
            .find(|r| r.is_ipv6() && r.dst.is_default())
            .unwrap();
        assert_eq!(
            (got6.gateway, got6.metric, got6.pref),
            (dflt6.gateway, 1024, dflt6.pref)
        );

        for r in [&dflt6, &dflt, &onlink] {
            rt.del_route(r).unwrap();
        }
        rt.del_addr(&v6).unwrap();
        rt.del_addr(&v4).unwrap();
        assert_eq!(rt.addrs(Some(i)).unwrap().len(), 1, "only fe80:: is left");
        assert_eq!(route_snapshot(ns, "eth1").0, serde_json::json!([]));
    });
}

/// The ExternalNode takeover and its undo, by the library alone: capture, rename to the
/// uplink name (which flushes IPv6 and routes), move to another link; then capture that
/// link, rename back, move back. Every snapshot of the NIC must equal the original.
#[test]
fn move_to_another_link_and_back_restores_exact_snapshots() {
    if !privileged("move_to_another_link_and_back_restores_exact_snapshots") {
        return;
    }
    in_netns(
        "move_to_another_link_and_back_restores_exact_snapshots",
        |ns| {
            no_dad(ns);
            veth(ns, "eth1", "peer1");
            veth(ns, "tgt0", "peer2");
            ns.sh("ip link set tgt0 down address 02:00:00:00:01:20");
            configure_nic(ns, "eth1");
            let (addr_before, life_before) = addr_snapshot(ns, "eth1");
            let routes_before = route_snapshot(ns, "eth1");
            let rt = Rtnl::connect().unwrap();

            // 1. capture before anything goes down.
            let nic = rt.link_by_name("eth1").unwrap();
            let cfg = capture(&rt, nic.index).unwrap();
            assert_eq!((cfg.mtu, cfg.mac), (1450, Some([2, 0, 0, 0, 1, 0x10])));
            let locals: Vec<String> = cfg.addrs.iter().map(|a| a.to_string()).collect();
            assert_eq!(
                locals,
                [
                    "192.0.2.10/24",
                    "198.51.100.7/32",
                    "192.0.2.11/24",
                    "2001:db8:1::20/64",
                    "2001:db8:1::10/64"
                ]
            );
            let dsts: Vec<String> = cfg.routes.iter().map(|r| r.dst.to_string()).collect();
            assert_eq!(
                dsts,
                [
                    "0.0.0.0/0",
                    "192.0.2.0/24",
                    "198.51.100.64/26",
                    "198.51.100.128/25",
                    "203.0.113.0/24",
                    "2001:db8:1::/64",
                    "2001:db8:2::/48",
                    "2001:db8:3::/48",
                    "::/0"
                ]
            );

            // 2. rename to the uplink name: down → rename → up.
            let uplink = rt.rename(nic.index, &uplink_name("eth1")).unwrap();
            assert_eq!(uplink.name, "eth1~");
            // What the down did (docs/datapath.md#8-test-harness), and the kernel's label
            // rewrite on rename: the second address without an alias label became `:3`.
            let (after_rename, _) = addr_snapshot(ns, "eth1~");
            let kept: Vec<(&str, &str)> = after_rename[0]["addr_info"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| {
                    (
                        a["local"].as_str().unwrap(),
                        a["label"].as_str().unwrap_or(""),
                    )
                })
                .collect();
            assert_eq!(
                kept,
                [
                    ("192.0.2.10", "eth1~"),
                    ("198.51.100.7", "eth1~:web"),
                    ("192.0.2.11", "eth1~:3"),
                    ("fe80::ff:fe00:110", "")
                ]
            );
            let (r4, r6) = route_snapshot(ns, "eth1~");
            assert_eq!(
                r4.as_array().unwrap().len(),
                1,
                "only the connected route: {r4}"
            );
            assert_eq!(r6.as_array().unwrap().len(), 1, "only fe80::/64: {r6}");

            // 3. move to the other link.
            let tgt = rt.link_by_name("tgt0").unwrap();
            let plan = plan_move(&cfg, Some(&uplink), &tgt);
            apply(&rt, &plan).unwrap();
            // The target now carries exactly the NIC's configuration.
            let (tgt_addrs, _) = addr_snapshot(ns, "tgt0");
            let global = |v: &Value| -> Vec<Value> {
                v[0]["addr_info"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|a| a["scope"] == "global")
                    .cloned()
                    .collect()
            };
            let renamed = serde_json::to_string(&global(&addr_before))
                .unwrap()
                .replace("eth1", "tgt0");
            assert_eq!(serde_json::to_string(&global(&tgt_addrs)).unwrap(), renamed);
            assert_eq!(tgt_addrs[0]["mtu"], 1450);
            assert_eq!(route_snapshot(ns, "tgt0"), routes_before);
            // And the uplink carries none of it.
            let (up_addrs, _) = addr_snapshot(ns, "eth1~");
            assert_eq!(global(&up_addrs), Vec::<Value>::new());
            let (r4, r6) = route_snapshot(ns, "eth1~");
            assert_eq!(
                (r4.as_array().unwrap().len(), r6.as_array().unwrap().len()),
                (0, 1)
            );

            // 4. restore: capture the target, rename the NIC back, move back.
            let back_cfg = capture(&rt, tgt.index).unwrap();
            let nic = rt.rename(uplink.index, "eth1").unwrap();
            let tgt = rt.link_by_index(tgt.index).unwrap();
            let back = plan_move(&back_cfg, Some(&tgt), &nic);
            apply(&rt, &back).unwrap();

            let (addr_after, life_after) = addr_snapshot(ns, "eth1");
            assert_eq!(addr_after, addr_before);
            assert_eq!(route_snapshot(ns, "eth1"), routes_before);
            // Finite lifetimes were carried over, not reset to their configured values.
            assert_eq!(life_after.len(), life_before.len());
            assert!(life_after.iter().zip(&life_before).all(|(a, b)| a <= b));
            let (tgt_addrs, _) = addr_snapshot(ns, "tgt0");
            assert_eq!(global(&tgt_addrs), Vec::<Value>::new());
            assert_eq!(route_snapshot(ns, "tgt0").0, serde_json::json!([]));
        },
    );
}

/// A plan applied and then undone leaves both links exactly as they were, MTU and
/// down state of the target included.
#[test]
fn applied_plan_undo_restores_both_links() {
    if !privileged("applied_plan_undo_restores_both_links") {
        return;
    }
    in_netns("applied_plan_undo_restores_both_links", |ns| {
        no_dad(ns);
        veth(ns, "eth1", "peer1");
        veth(ns, "tgt0", "peer2");
        ns.ip(&["link", "set", "tgt0", "down"]);
        configure_nic(ns, "eth1");
        let snap = |dev: &str| (addr_snapshot(ns, dev).0, route_snapshot(ns, dev));
        let (nic_before, tgt_before) = (snap("eth1"), snap("tgt0"));
        let tgt_link_before = ns.ip(&["-j", "link", "show", "dev", "tgt0"]);

        let rt = Rtnl::connect().unwrap();
        let nic = rt.link_by_name("eth1").unwrap();
        let tgt = rt.link_by_name("tgt0").unwrap();
        let cfg = capture(&rt, nic.index).unwrap();
        let applied = apply(&rt, &plan_move(&cfg, Some(&nic), &tgt)).unwrap();
        assert_ne!(snap("tgt0"), tgt_before);
        applied.undo(&rt).unwrap();

        assert_eq!(snap("eth1"), nic_before);
        assert_eq!(snap("tgt0"), tgt_before);
        assert_eq!(
            ns.ip(&["-j", "link", "show", "dev", "tgt0"]),
            tgt_link_before
        );
    });
}

/// A failure part-way (here: the target refuses an MTU it cannot take) is rolled back.
#[test]
fn failed_move_rolls_back() {
    if !privileged("failed_move_rolls_back") {
        return;
    }
    in_netns("failed_move_rolls_back", |ns| {
        no_dad(ns);
        veth(ns, "eth1", "peer1");
        veth(ns, "tgt0", "peer2");
        configure_nic(ns, "eth1");
        let snap = |dev: &str| (addr_snapshot(ns, dev).0, route_snapshot(ns, dev));
        let (nic_before, tgt_before) = (snap("eth1"), snap("tgt0"));

        let rt = Rtnl::connect().unwrap();
        let nic = rt.link_by_name("eth1").unwrap();
        let tgt = rt.link_by_name("tgt0").unwrap();
        let cfg = capture(&rt, nic.index).unwrap();
        let mut plan = plan_move(&cfg, Some(&nic), &tgt);
        // Break the last route step: a gateway the target cannot reach (ENETUNREACH).
        let last = plan.steps.last_mut().unwrap();
        let tether::netlink::LinkChange::AddRoute(r) = &mut last.action else {
            panic!("last step is a route: {last}")
        };
        r.gateway = Some(ip("2001:db8:99::1"));
        let err = apply(&rt, &plan).unwrap_err();
        assert_eq!(err.index, plan.steps.len() - 1);
        // The kernel checks the gateway is reachable: EHOSTUNREACH.
        assert_eq!(err.failed.error.errno(), Some(113), "{err}");
        assert_eq!(err.rollback_errors, vec![], "{err}");

        assert_eq!(snap("eth1"), nic_before);
        assert_eq!(snap("tgt0"), tgt_before);
    });
}

/// With DAD on (the default), a moved IPv6 address is `tentative` for ~2 s and the kernel
/// refuses a route naming it as source; the move waits instead of failing.
#[test]
fn move_waits_for_dad_before_a_route_with_an_ipv6_source() {
    if !privileged("move_waits_for_dad_before_a_route_with_an_ipv6_source") {
        return;
    }
    in_netns(
        "move_waits_for_dad_before_a_route_with_an_ipv6_source",
        |ns| {
            veth(ns, "eth1", "peer1");
            veth(ns, "tgt0", "peer2");
            // DAD off on the source only, so setting it up is quick; on by default for tgt0.
            ns.sh("sysctl -qw net.ipv6.conf.eth1.accept_dad=0
               ip -6 addr add 2001:db8:1::10/64 dev eth1
               ip -6 route add 2001:db8:3::/48 via 2001:db8:1::1 dev eth1 src 2001:db8:1::10");
            let routes_before = route_snapshot(ns, "eth1").1;
            let rt = Rtnl::connect().unwrap();
            let nic = rt.link_by_name("eth1").unwrap();
            let tgt = rt.link_by_name("tgt0").unwrap();
            let cfg = capture(&rt, nic.index).unwrap();
            apply(&rt, &plan_move(&cfg, Some(&nic), &tgt)).unwrap();
            let moved = route_snapshot(ns, "tgt0").1;
            let with_src: Vec<&Value> = moved
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["dst"] == "2001:db8:3::/48")
                .collect();
            assert_eq!(
                with_src,
                [
                    &serde_json::json!({"dst": "2001:db8:3::/48", "gateway": "2001:db8:1::1",
                                 "prefsrc": "2001:db8:1::10", "metric": 1024, "flags": [],
                                 "pref": "medium"})
                ]
            );
            assert_eq!(moved, routes_before);
        },
    );
}

#[test]
fn wait_gone_returns_once_the_link_is_deleted() {
    if !privileged("wait_gone_returns_once_the_link_is_deleted") {
        return;
    }
    in_netns("wait_gone_returns_once_the_link_is_deleted", |ns| {
        veth(ns, "eth1", "peer1");
        let rt = Rtnl::connect().unwrap();
        // Deleted by another process while we poll (well inside the 2 s bound).
        let mut deleter = ns
            .command(&["sh", "-c", "sleep 0.3; ip link del eth1"])
            .spawn()
            .unwrap();
        assert_eq!(rt.wait_gone("eth1"), Ok(()));
        assert!(deleter.wait().unwrap().success());
        assert!(rt.link_by_name("peer1").unwrap_err().is_not_found());
        // A link that stays is a Timeout after the bound.
        veth(ns, "eth2", "peer2");
        assert_eq!(
            rt.wait_gone("eth2"),
            Err(LinkError::Timeout {
                what: "waiting for link eth2 to disappear".into()
            })
        );
    });
}

/// Dumps that span many datagrams end at NLMSG_DONE with every entry, and the socket stays
/// usable: 500 IPv4 addresses, 250 IPv4 and 500 IPv6 routes (tens of KB each), read twice.
#[test]
fn large_dumps_return_every_entry() {
    if !privileged("large_dumps_return_every_entry") {
        return;
    }
    in_netns("large_dumps_return_every_entry", |ns| {
        no_dad(ns);
        veth(ns, "eth1", "peer1");
        let mut batch = String::new();
        for b in 1..=250u32 {
            batch.push_str(&format!("address add 198.51.100.{b}/32 dev eth1\n"));
            batch.push_str(&format!("address add 192.0.2.{b}/32 dev eth1\n"));
            batch.push_str(&format!("route add 203.0.113.{b}/32 dev eth1\n"));
            batch.push_str(&format!("route add 2001:db8:5::{b:x}/128 dev eth1\n"));
            batch.push_str(&format!("route add 2001:db8:6::{b:x}/128 dev eth1\n"));
        }
        // Removed on drop, so a failing `ip -batch` (a panic) leaves no file behind.
        struct TempFile(std::path::PathBuf);
        impl Drop for TempFile {
            fn drop(&mut self) {
                let _ = std::fs::remove_file(&self.0);
            }
        }
        let file =
            TempFile(std::env::temp_dir().join(format!("tt-nl-batch-{}", std::process::id())));
        std::fs::write(&file.0, batch).unwrap();
        ns.ip(&["-batch", file.0.to_str().unwrap()]);

        let rt = Rtnl::connect().unwrap();
        let i = rt.link_by_name("eth1").unwrap().index;
        for _ in 0..2 {
            let addrs = rt.addrs(Some(i)).unwrap();
            assert_eq!(addrs.iter().filter(|a| a.local.is_ipv4()).count(), 500);
            let routes = rt.routes(i).unwrap();
            let host = |v6: bool| {
                routes
                    .iter()
                    .filter(|r| r.is_ipv6() == v6 && r.dst.len == if v6 { 128 } else { 32 })
                    .count()
            };
            assert_eq!((host(false), host(true)), (250, 500));
            // A request with an ACK between the dumps.
            assert_eq!(rt.link_by_index(i).unwrap().name, "eth1");
        }
    });
}
