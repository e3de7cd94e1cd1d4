//! Routes of every table, multipath routes and policy rules across takeover and release,
//! and routes that cannot move refusing the takeover untouched.

use super::*;

/// The routes of `table`, as `ip -j` shows them (v4 then v6), without the fields that
/// change on their own.
fn routes_json(vm: &common::Netns, table: &str) -> Value {
    // Sorted: the kernel lists routes of equal prefix (each link's fe80::/64) in the
    // order their links came up, which a rename and a new host port change.
    let clean = |v: Value| {
        let mut rows: Vec<Value> = v.as_array().cloned().unwrap_or_default();
        for r in &mut rows {
            if let Some(o) = r.as_object_mut() {
                o.remove("expires");
            }
        }
        rows.sort_by_key(Value::to_string);
        Value::Array(rows)
    };
    json!([
        clean(json_of(&vm.ip(&["-j", "route", "show", "table", table]))),
        clean(json_of(
            &vm.ip(&["-j", "-6", "route", "show", "table", table])
        )),
    ])
}

fn rules_json(vm: &common::Netns) -> Value {
    json!([
        json_of(&vm.ip(&["-j", "rule", "show"])),
        json_of(&vm.ip(&["-j", "-6", "rule", "show"])),
    ])
}

/// Routes in a table other than main, an IPv4 and an IPv6 ECMP route with one nexthop
/// through the NIC and one through eth2, and policy rules naming the NIC: after the
/// takeover every one of them is there as before (the ECMP nexthop and the table-100
/// routes on the host port, none `dead` or `linkdown`, the rules attached), real packets
/// use them, and after the release everything is exactly as before. (Before this change
/// the table-100 route was lost and the ECMP nexthop stayed `dead linkdown` on the bare
/// uplink.)
#[test]
fn routes_of_every_table_multipath_and_rules_move_and_come_back() {
    if !privileged("routes_of_every_table_multipath_and_rules_move_and_come_back") {
        return;
    }
    let (sb, peer) = setup();
    let vm = sb.ns();
    vm.sh("ip route add 203.0.113.0/26 via 192.0.2.1 dev eth1 table 100
         ip -6 route add 2001:db8:9::/48 via 2001:db8:1::1 dev eth1 table 100
         ip route add 203.0.113.128/25 proto static nexthop via 192.0.2.1 dev eth1 weight 1 nexthop via 198.51.100.1 dev eth2 weight 2
         ip -6 route add 2001:db8:7::/48 nexthop via 2001:db8:1::1 dev eth1 nexthop via 2001:db8:3::1 dev eth2
         ip rule add iif eth1 lookup 100 pref 1000
         ip rule add oif eth1 lookup 100 pref 1001
         ip -6 rule add oif eth1 lookup 100 pref 1001");
    // The far ends, reachable through either path.
    peer.sh("ip addr add 203.0.113.5/32 dev lo
         ip addr add 203.0.113.129/32 dev lo
         ip -6 addr add 2001:db8:7::1/128 dev lo
         ip -6 addr add 2001:db8:9::1/128 dev lo
         ip route add 198.51.100.0/24 dev eth2p 2>/dev/null || true");
    let before = json!({
        "t100": routes_json(vm, "100"),
        "main": routes_json(vm, "main"),
        "rules": rules_json(vm),
    });
    let nexthop_flags = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .flat_map(|fam| fam.as_array().unwrap().iter())
            .flat_map(|r| {
                let mut f: Vec<Value> = r["flags"].as_array().cloned().unwrap_or_default();
                for n in r["nexthops"].as_array().into_iter().flatten() {
                    f.extend(n["flags"].as_array().cloned().unwrap_or_default());
                }
                f
            })
            .map(|f| f.as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(nexthop_flags(&before["main"]), Vec::<String>::new());

    let mut agent = Agent::start_and_sync(&sb, Some("en - 192.0.2.10,2001:db8:1::10"));
    neutralise_uplink(vm, "eth1~", true);
    let host = vm.ip(&["-j", "link", "show", "eth1"]);
    assert!(host.contains("\"link_type\":\"ether\""), "{host}");
    let after = json!({
        "t100": routes_json(vm, "100"),
        "main": routes_json(vm, "main"),
        "rules": rules_json(vm),
    });
    // Same names, same everything: eth1 is the host port now (the uplink is eth1~).
    assert_eq!(after["t100"], before["t100"]);
    assert_eq!(after["rules"], before["rules"], "rules detached or lost");
    assert_eq!(
        nexthop_flags(&after["main"]),
        Vec::<String>::new(),
        "{}",
        after["main"]
    );
    let main_through = |v: &Value, dst: &str| -> Value {
        v.as_array()
            .unwrap()
            .iter()
            .flat_map(|fam| fam.as_array().unwrap().iter())
            .find(|r| r["dst"] == dst)
            .cloned()
            .unwrap_or(Value::Null)
    };
    for dst in ["203.0.113.128/25", "2001:db8:7::/48"] {
        assert_eq!(
            main_through(&after["main"], dst),
            main_through(&before["main"], dst),
            "{dst}"
        );
    }
    assert!(
        !vm.ip(&["route", "show", "table", "all"]).contains("eth1~"),
        "a route left on the uplink:\n{}",
        vm.ip(&["route", "show", "table", "all"])
    );
    // Real packets: the policy rule picks table 100 for traffic bound to eth1, and the
    // ECMP destinations answer, through the host port (OVS).
    let ping = |args: &[&str]| {
        vm.try_exec(&[&["ping", "-c", "2", "-i", "0.2", "-W", "2"][..], args].concat())
            .unwrap_or_else(|e| e)
    };
    for (args, what) in [
        (
            &["-I", "eth1", "203.0.113.5"][..],
            "table 100 via the oif rule",
        ),
        (&["203.0.113.129"], "IPv4 ECMP"),
        (&["2001:db8:7::1"], "IPv6 ECMP"),
        (&["-I", "eth1", "2001:db8:9::1"], "IPv6 table 100"),
    ] {
        let out = ping(args);
        assert!(out.contains("2 received"), "{what}: {out}");
    }

    neutralise_uplink(vm, "eth1~", false);
    agent.cmd("absent");
    agent.cmd("sync");
    let restored = json!({
        "t100": routes_json(vm, "100"),
        "main": routes_json(vm, "main"),
        "rules": rules_json(vm),
    });
    assert_eq!(restored, before, "not restored exactly");
    assert!(vm.try_ip(&["link", "show", "eth1~"]).is_err());
}

/// Routes tether cannot re-create exactly — one using a nexthop object, an IPv6
/// source-specific route — make it refuse the takeover, naming each, before any link is
/// touched (`ip monitor link` sees nothing). Once they are gone, the takeover happens.
#[test]
fn routes_that_cannot_move_refuse_the_takeover_untouched() {
    if !privileged("routes_that_cannot_move_refuse_the_takeover_untouched") {
        return;
    }
    let (sb, _peer) = setup();
    let vm = sb.ns();
    vm.sh("ip nexthop add id 7 via 192.0.2.1 dev eth1
         ip route add 203.0.113.64/26 nhid 7
         ip -6 route add 2001:db8:8::/48 from 2001:db8:1::/64 via 2001:db8:1::1 dev eth1");
    let before = json!({"main": routes_json(vm, "main"), "eth1": snapshot(vm, "eth1")});
    let monitor = vm
        .command(&["ip", "monitor", "link"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut agent = Agent::spawn(&sb, None);
    agent.cmd("recover");
    agent.cmd("en - 192.0.2.10,2001:db8:1::10");
    let e = agent.try_cmd("sync").unwrap_err();
    assert!(
        e.starts_with("refusing to take over eth1: 2 route(s) through it cannot be moved"),
        "{e}"
    );
    assert!(
        e.contains("203.0.113.64/26 via 192.0.2.1")
            && e.contains("has a nexthop object (RTA_NH_ID)"),
        "{e}"
    );
    assert!(
        e.contains("2001:db8:8::/48 via 2001:db8:1::1")
            && e.contains("has a source prefix (RTA_SRC)"),
        "{e}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let mut monitor = monitor;
    let _ = monitor.kill();
    let out = monitor.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "", "a link changed");
    assert_eq!(
        json!({"main": routes_json(vm, "main"), "eth1": snapshot(vm, "eth1")}),
        before
    );
    assert_eq!(sb.try_vsctl(&["get", "Port", "eth1~", "_uuid"]).ok(), None);
    vm.sh("ip route del 203.0.113.64/26
         ip nexthop del id 7
         ip -6 route del 2001:db8:8::/48 from 2001:db8:1::/64");
    agent.cmd("sync");
    assert!(vm.try_ip(&["link", "show", "eth1~"]).is_ok());
}
