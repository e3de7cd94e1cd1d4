use super::*;
use crate::netlink::{FakeLinks, LinkChange, LinkStep};

fn uplink() -> Link {
    let links = FakeLinks::new();
    let i = links.add_link("eth1~", [2, 0, 0, 0, 1, 0x10], 1450, true);
    links.link_by_index(i).unwrap()
}

fn values(v: &[(DevSysctl, &str)]) -> Vec<(DevSysctl, String)> {
    v.iter().map(|(k, v)| (*k, (*v).to_string())).collect()
}

#[test]
fn held_values_per_datapath() {
    assert_eq!(
        held_values("netdev"),
        [
            (DevSysctl::Ipv6DisableIpv6, "1"),
            (DevSysctl::Ipv4RpFilter, "1"),
            (DevSysctl::Ipv4ArpIgnore, "8"),
        ]
    );
    // The kernel datapath's rx_handler takes every frame: only the link-local address.
    assert_eq!(held_values("system"), [(DevSysctl::Ipv6DisableIpv6, "1")]);
    assert_eq!(
        describe("eth1~", "netdev"),
        "net.ipv6.conf.eth1~.disable_ipv6=1, net.ipv4.conf.eth1~.rp_filter=1, net.ipv4.conf.eth1~.arp_ignore=8"
    );
    assert_eq!(
        describe("eth1~", "system"),
        "net.ipv6.conf.eth1~.disable_ipv6=1"
    );
}

/// The NIC's own values are given back from what the host port carries, which is the
/// NIC's per-device sysctls (`DevSysctl::ALL`, captured and copied): a key set here and
/// not among them would stay on the NIC after the restore.
#[test]
fn every_held_key_is_one_the_nic_carries() {
    for dt in ["netdev", "system"] {
        for (k, v) in held_values(dt) {
            assert!(DevSysctl::ALL.contains(k), "{dt}: {k:?}={v}");
            // In apply order, like the host port's copy.
        }
        let keys: Vec<DevSysctl> = held_values(dt).iter().map(|(k, _)| *k).collect();
        let mut sorted = keys.clone();
        sorted.sort_by_key(|k| DevSysctl::ALL.iter().position(|a| a == k));
        assert_eq!(keys, sorted, "{dt}");
    }
}

#[test]
fn the_plan_sets_what_differs_and_records_what_it_replaces() {
    let up = uplink();
    let step = |key, value: &str, was: &str| LinkStep {
        ifindex: up.index,
        link: "eth1~".into(),
        action: LinkChange::SetSysctl {
            key,
            value: value.into(),
            was: was.into(),
        },
    };
    let nic = values(&[
        (DevSysctl::Ipv6DisableIpv6, "0"),
        (DevSysctl::Ipv6AcceptRa, "1"),
        (DevSysctl::Ipv4RpFilter, "0"),
        (DevSysctl::Ipv4ArpIgnore, "1"),
        (DevSysctl::Ipv4ArpAnnounce, "2"),
    ]);
    let plan = plan_held_values(&up, &nic, "netdev");
    assert_eq!(
        plan.steps,
        [
            step(DevSysctl::Ipv6DisableIpv6, "1", "0"),
            step(DevSysctl::Ipv4RpFilter, "1", "0"),
            step(DevSysctl::Ipv4ArpIgnore, "8", "1"),
        ]
    );
    assert_eq!(
        plan.steps
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [
            "set net.ipv6.conf.eth1~.disable_ipv6=1 (was 0)",
            "set net.ipv4.conf.eth1~.rp_filter=1 (was 0)",
            "set net.ipv4.conf.eth1~.arp_ignore=8 (was 1)",
        ]
    );
    // Undone newest first, to exactly the values it replaced.
    assert_eq!(
        plan.inverse().steps,
        [
            step(DevSysctl::Ipv4ArpIgnore, "1", "8"),
            step(DevSysctl::Ipv4RpFilter, "0", "1"),
            step(DevSysctl::Ipv6DisableIpv6, "0", "1"),
        ]
    );
    assert_eq!(
        plan_held_values(&up, &nic, "system").steps,
        [step(DevSysctl::Ipv6DisableIpv6, "1", "0")]
    );
    // Loose (2) becomes strict all the same: one value to check, whatever the NIC had.
    let set = values(&[
        (DevSysctl::Ipv6DisableIpv6, "1"),
        (DevSysctl::Ipv4RpFilter, "2"),
        (DevSysctl::Ipv4ArpIgnore, "8"),
    ]);
    assert_eq!(
        plan_held_values(&up, &set, "netdev").steps,
        [step(DevSysctl::Ipv4RpFilter, "1", "2")]
    );
    // Already so, or a key the kernel does not have (IPv6 off in the kernel): nothing.
    let done = values(&[
        (DevSysctl::Ipv4RpFilter, "1"),
        (DevSysctl::Ipv4ArpIgnore, "8"),
    ]);
    assert!(plan_held_values(&up, &done, "netdev").steps.is_empty());
    assert!(plan_held_values(&up, &[], "netdev").steps.is_empty());
}

fn facts(dev_rp: &str, all_rp: &str, v6: &str, ipv4: &[&str]) -> UplinkFacts {
    UplinkFacts {
        sysctls: values(&[
            (DevSysctl::Ipv6DisableIpv6, v6),
            (DevSysctl::Ipv4RpFilter, dev_rp),
            (DevSysctl::Ipv4ArpIgnore, "8"),
        ]),
        all_rp_filter: Some(all_rp.into()),
        ipv4: ipv4.iter().map(|s| (*s).to_string()).collect(),
    }
}

#[test]
fn the_side_door_verdict() {
    let door = |f: &UplinkFacts| side_door("eth1~", "netdev", f);
    // As tether leaves it, whatever `all` says while the uplink holds no IPv4 address:
    // loose mode refuses a device without one too (measured).
    for all in ["0", "1", "2"] {
        assert_eq!(door(&facts("1", all, "1", &[])), None, "all={all}");
    }
    // Strict, with an address: open for what the uplink's own routes cover.
    let addr = ["203.0.113.99/24"];
    assert_eq!(
        door(&facts("1", "0", "1", &addr)).as_deref(),
        Some(
            "eth1~ holds IPv4 address 203.0.113.99/24 (a DHCP client that kept its lease on it?) \
             and net.ipv4.conf.eth1~.rp_filter=1 and net.ipv4.conf.all.rp_filter=0: the kernel \
             delivers IPv4 that arrives on eth1~ to the VM's sockets past OVS, from the sources \
             its own routes cover"
        )
    );
    // The gap: `all` loose and an address on the uplink.
    assert_eq!(
        door(&facts("1", "2", "1", &addr)).as_deref(),
        Some(
            "eth1~ holds IPv4 address 203.0.113.99/24 (a DHCP client that kept its lease on it?) \
             and net.ipv4.conf.eth1~.rp_filter=1 and net.ipv4.conf.all.rp_filter=2: the kernel \
             delivers IPv4 that arrives on eth1~ to the VM's sockets past OVS, from any source \
             (loose reverse-path check)"
        )
    );
    // Values turned back by someone (until the next sync sets them again).
    assert_eq!(
        door(&facts("0", "0", "0", &[])).as_deref(),
        Some(
            "net.ipv4.conf.eth1~.rp_filter=0 and net.ipv4.conf.all.rp_filter=0: no reverse-path \
             check, the kernel delivers IPv4 that arrives on eth1~ to the VM's sockets past OVS; \
             net.ipv6.conf.eth1~.disable_ipv6=0: the kernel delivers IPv6 that arrives on eth1~ \
             to the VM's sockets past OVS"
        )
    );
    // `all` strict makes up for the device's 0 (the larger counts).
    assert_eq!(door(&facts("0", "1", "1", &[])), None);
    // No IPv6 in the kernel (no disable_ipv6 file): nothing to deliver.
    let mut no_v6 = facts("1", "0", "1", &[]);
    no_v6
        .sysctls
        .retain(|(k, _)| *k != DevSysctl::Ipv6DisableIpv6);
    assert_eq!(door(&no_v6), None);
    // The kernel datapath takes every frame the uplink receives: no door, whatever the
    // values.
    assert_eq!(
        side_door("eth1~", "system", &facts("0", "2", "0", &addr)),
        None
    );
}

#[test]
fn the_facts_are_read_from_the_uplink() {
    let links = FakeLinks::new();
    let i = links.add_link("eth1~", [2, 0, 0, 0, 1, 0x10], 1450, true);
    links.put_sysctl(i, DevSysctl::Ipv4RpFilter, "1");
    links.set_all_sysctl(DevSysctl::Ipv4RpFilter, "2");
    let ip = |s: &str| s.parse().unwrap();
    links
        .add_addr(&crate::netlink::Addr::new(i, ip("203.0.113.99"), 24))
        .unwrap();
    links
        .add_addr(&crate::netlink::Addr::new(i, ip("2001:db8:9::1"), 64))
        .unwrap();
    assert_eq!(
        UplinkFacts::read(&links, "eth1~").unwrap(),
        UplinkFacts {
            sysctls: values(&[(DevSysctl::Ipv4RpFilter, "1")]),
            all_rp_filter: Some("2".into()),
            ipv4: vec!["203.0.113.99/24".into()],
        }
    );
    assert!(UplinkFacts::read(&links, "eth9~").is_err());
}

/// A step record that does not decode leaves the uplink's values to read: those tether
/// set come from a copy of the NIC's own, the others are the NIC's.
#[test]
fn the_nic_own_values_behind_the_held_ones() {
    let shown = values(&[
        (DevSysctl::Ipv6DisableIpv6, "1"),
        (DevSysctl::Ipv6AcceptRa, "2"),
        (DevSysctl::Ipv4RpFilter, "1"),
        (DevSysctl::Ipv4ArpIgnore, "8"),
        (DevSysctl::Ipv4ArpAnnounce, "2"),
    ]);
    let host = values(&[
        (DevSysctl::Ipv6DisableIpv6, "0"),
        (DevSysctl::Ipv6AcceptRa, "1"),
        (DevSysctl::Ipv4RpFilter, "0"),
        (DevSysctl::Ipv4ArpIgnore, "1"),
        (DevSysctl::Ipv4ArpAnnounce, "0"),
    ]);
    assert_eq!(
        own_values(&shown, Some(&host)),
        values(&[
            (DevSysctl::Ipv6DisableIpv6, "0"),
            (DevSysctl::Ipv6AcceptRa, "2"),
            (DevSysctl::Ipv4RpFilter, "0"),
            (DevSysctl::Ipv4ArpIgnore, "1"),
            (DevSysctl::Ipv4ArpAnnounce, "2"),
        ])
    );
    // Not at tether's value: the NIC's own, whatever the copy says.
    let untouched = values(&[
        (DevSysctl::Ipv4RpFilter, "2"),
        (DevSysctl::Ipv4ArpIgnore, "0"),
    ]);
    assert_eq!(own_values(&untouched, Some(&host)), untouched);
    // No copy, or a copy without the key: what the uplink shows.
    assert_eq!(own_values(&shown, None), shown);
    assert_eq!(own_values(&shown, Some(&[])), shown);
}
