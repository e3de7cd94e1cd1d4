//! What the netlink tests set up with `ip` (veth pairs, a VM-like NIC, DAD off) and the
//! kernel's own view read back with `ip -j` (address and route snapshots).

use std::net::IpAddr;
use std::time::Duration;

use serde_json::Value;

use super::common;
use super::common::Netns;

pub(crate) fn ip(s: &str) -> IpAddr {
    s.parse().expect("test IP literal")
}

/// DAD off for links created after this (see the module doc).
pub(crate) fn no_dad(ns: &Netns) {
    ns.sh("sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0");
}

pub(crate) fn veth(ns: &Netns, a: &str, b: &str) {
    ns.ip(&["link", "add", a, "type", "veth", "peer", "name", b]);
    ns.ip(&["link", "set", a, "up"]);
    ns.ip(&["link", "set", b, "up"]);
}

pub(crate) fn json(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("bad JSON from ip ({e}): {s}"))
}

/// `ip -j addr show dev <dev>` with finite lifetimes replaced by "finite"; also returns the
/// finite values, in order.
pub(crate) fn addr_snapshot(ns: &Netns, dev: &str) -> (Value, Vec<u64>) {
    // A new IPv6 address is `tentative` until the kernel's DAD work item has run, even with
    // DAD off (it then only clears the flag, within milliseconds): wait for that first.
    common::wait_for(
        Duration::from_secs(5),
        "IPv6 addresses to leave tentative",
        || {
            let t = ns.ip(&["-6", "addr", "show", "dev", dev, "tentative"]);
            t.trim().is_empty().then_some(())
        },
    );
    let mut v = json(&ns.ip(&["-j", "addr", "show", "dev", dev]));
    let mut finite = Vec::new();
    for link in v.as_array_mut().expect("ip -j addr: an array of links") {
        let infos = link["addr_info"].as_array_mut().expect("addr_info array");
        for a in infos {
            for key in ["valid_life_time", "preferred_life_time"] {
                let n = a[key].as_u64().expect("numeric lifetime");
                if n != u64::from(u32::MAX) {
                    finite.push(n);
                    a[key] = Value::from("finite");
                }
            }
        }
    }
    (v, finite)
}

/// `ip -j route` and `ip -j -6 route` of the main table through `dev`.
pub(crate) fn route_snapshot(ns: &Netns, dev: &str) -> (Value, Value) {
    (
        json(&ns.ip(&["-j", "route", "show", "table", "main", "dev", dev])),
        json(&ns.ip(&["-j", "-6", "route", "show", "table", "main", "dev", dev])),
    )
}

/// A NIC as a DHCP/SLAAC-configured VM might have it, plus the cases that trip a naive
/// move: a secondary, an alias label, finite lifetimes, `nodad`, an on-link route that a
/// gateway route depends on, preferred sources, metrics and an IPv6 route preference.
pub(crate) fn configure_nic(ns: &Netns, dev: &str) {
    ns.sh(&format!(
        "ip link set {dev} down
         ip link set {dev} mtu 1450 address 02:00:00:00:01:10
         ip link set {dev} up
         ip addr add 192.0.2.10/24 brd + dev {dev} valid_lft 7200 preferred_lft 7200
         ip addr add 192.0.2.11/24 dev {dev}
         ip addr add 198.51.100.7/32 dev {dev} label {dev}:web
         ip -6 addr add 2001:db8:1::10/64 dev {dev} nodad
         ip -6 addr add 2001:db8:1::20/64 dev {dev} valid_lft 3600 preferred_lft 1800
         ip route add 203.0.113.0/24 dev {dev} metric 50
         ip route add default via 192.0.2.1 dev {dev} metric 100
         ip route add 198.51.100.128/25 via 203.0.113.1 dev {dev} proto static
         ip route add 198.51.100.64/26 via 192.0.2.254 dev {dev} src 198.51.100.7 metric 20
         ip -6 route add 2001:db8:2::/48 dev {dev} metric 10
         ip -6 route add 2001:db8:3::/48 via 2001:db8:1::1 dev {dev} src 2001:db8:1::10
         ip -6 route add default via 2001:db8:1::1 dev {dev} metric 1024 pref high"
    ));
}
