use std::net::IpAddr;

use super::*;
use crate::netlink::Lifetime;

fn f(level: Level, what: &str, detail: &str, fix: Option<&str>) -> Finding {
    Finding {
        level,
        what: what.into(),
        detail: detail.into(),
        fix: fix.map(str::to_string),
    }
}

fn s(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn uplink_devices_on_top_and_wifi() {
    assert_eq!(uplink("eth1", "system", false, &[]), vec![]);
    assert_eq!(
        uplink(
            "eth1",
            "system",
            false,
            &s(&[("mv0", "macvlan"), ("ipv0", "ipvlan")])
        ),
        vec![f(
            Level::Fail,
            "uplink",
            "eth1 carries mv0 (macvlan), ipv0 (ipvlan), holding its receive handler: the kernel \
             gives a device one, so OVS cannot attach eth1 (EBUSY)",
            Some(
                "delete mv0 (ip link del mv0) or put it on another link, or take over another NIC"
            ),
        )]
    );
    assert_eq!(
        uplink("eth1", "netdev", true, &s(&[("mv0", "macvlan")])),
        vec![
            f(
                Level::Warn,
                "uplink",
                "eth1 carries mv0 (macvlan): the userspace datapath reads eth1 through a packet \
                 socket, so OVS can attach it, but mv0's traffic bypasses the bridge (no \
                 TrafficControl or policy sees it)",
                Some("move mv0 onto the host port eth1 after the takeover, or delete it"),
            ),
            f(
                Level::Warn,
                "uplink",
                "eth1 is a Wi-Fi link: a station carries frames of its own MAC only (802.11 \
                 three-address mode; Linux bridges refuse such links for that reason), and \
                 tether is tried on Ethernet NICs only",
                Some(
                    "use a wired NIC if there is one; otherwise check after the takeover that \
                     the host stays reachable"
                ),
            ),
        ]
    );
}

#[test]
fn leftovers_of_an_earlier_takeover() {
    let facts = |host_port, uplink_link, errors: &[(&str, &str)]| PortFacts {
        host_port,
        uplink_link,
        errors: s(errors),
    };
    assert_eq!(leftovers("eth1", "br-int", &facts(false, false, &[])), None);
    assert_eq!(leftovers("eth1", "br-int", &facts(true, true, &[])), None);
    // After a reboot: the NIC has its name back and the uplink is gone; the errors as
    // ovs-vswitchd 3.1.0 on the userspace datapath reports them (a veth in the NIC's place).
    assert_eq!(
        leftovers(
            "eth1",
            "br-int",
            &facts(
                true,
                false,
                &[
                    (
                        "eth1",
                        "could not open network device eth1 (Invalid argument)"
                    ),
                    (
                        "eth1~",
                        "could not open network device eth1~ (No such device)"
                    ),
                ]
            )
        ),
        Some(f(
            Level::Warn,
            "leftovers",
            "OVSDB has tether's ports eth1 and eth1~ but there is no link eth1~ (a reboot gave \
             the NIC its name back): tether run deletes them and takes eth1 over again; OVS \
             reports Interface eth1: could not open network device eth1 (Invalid argument); \
             Interface eth1~: could not open network device eth1~ (No such device)",
            Some(
                "nothing to do; to clean up by hand first: ovs-vsctl --if-exists del-port \
                 br-int eth1 -- --if-exists del-port br-int eth1~"
            ),
        ))
    );
    assert_eq!(
        leftovers("eth1", "br-int", &facts(false, true, &[])),
        Some(f(
            Level::Fail,
            "leftovers",
            "link eth1~ exists but OVSDB has no host port eth1: tether run refuses to take eth1 \
             over next to it",
            Some(
                "see what eth1~ is (ip -d link show eth1~): if it is a NIC an earlier takeover \
                 renamed, give it its name back once eth1 is gone; otherwise remove or rename it"
            ),
        ))
    );
    assert_eq!(
        leftovers(
            "eth1",
            "br-int",
            &facts(true, true, &[("eth1~", "could not set MTU")])
        ),
        Some(f(
            Level::Warn,
            "leftovers",
            "OVS reports Interface eth1~: could not set MTU",
            Some(
                "see ovs-vsctl list Interface eth1~ and ovs-vswitchd's log; if the port is a \
                 leftover: ovs-vsctl del-port br-int eth1~"
            ),
        ))
    );
}

fn dhcp(pid: u32, program: &str) -> DhcpClient {
    DhcpClient {
        pid,
        program: program.into(),
    }
}

const IFUPDOWN: &str = "eth1 is configured by ifupdown (/etc/network/interfaces); tether changes \
     nothing: ifup's dhclient keeps renewing through eth1~ (its socket stays on the NIC) and \
     puts the address on eth1, the host port, by name";

#[test]
fn network_managers_and_dhcp_clients() {
    assert_eq!(
        network("eth1", &Manager::None, &[], &[]),
        f(
            Level::Ok,
            "network",
            "eth1 is configured by no network manager; nothing to tell",
            None
        )
    );
    // ifup's own dhclient is not named twice.
    assert_eq!(
        network("eth1", &Manager::Ifupdown, &[dhcp(412, "dhclient")], &[]),
        f(Level::Ok, "network", IFUPDOWN, None)
    );
    assert_eq!(
        network("eth1", &Manager::None, &[dhcp(412, "dhclient")], &[]),
        f(
            Level::Ok,
            "network",
            "eth1 is configured by no network manager; nothing to tell; dhclient (pid 412) runs \
             for eth1: it keeps renewing through eth1~ (its socket stays on the NIC) and puts \
             the address on eth1, the host port, by name",
            None
        )
    );
    assert_eq!(
        network("eth1", &Manager::None, &[dhcp(77, "dhcpcd")], &[]),
        f(
            Level::Warn,
            "network",
            "eth1 is configured by no network manager; nothing to tell; dhcpcd (pid 77) runs for \
             eth1: tether was not tried with it",
            Some(
                "check after the takeover that dhcpcd renews the lease on eth1, the host port, or \
                 let systemd-networkd or ifupdown manage the NIC"
            )
        )
    );
    let nm = network("eth1", &Manager::NetworkManager, &[], &[]);
    assert_eq!(nm.level, Level::Ok);
    assert!(
        nm.detail.starts_with(
            "eth1 is configured by NetworkManager; before the takeover tether gives the host \
             port eth1 an in-memory NetworkManager profile tether-eth1"
        ),
        "{nm:?}"
    );
    assert_eq!(nm.fix, None);
}

#[test]
fn netplan_entries() {
    // Ubuntu's cloud-init netplan file: matched by MAC, renamed with set-name.
    let cloud = NetplanMatch {
        file: "/etc/netplan/50-cloud-init.yaml".into(),
        id: "ens5".into(),
        by: "macaddress",
        set_name: Some("ens5".into()),
    };
    assert_eq!(
        network("ens5", &Manager::None, &[], &[cloud]),
        f(
            Level::Warn,
            "network",
            "ens5 is configured by no network manager; nothing to tell; netplan \
             /etc/netplan/50-cloud-init.yaml ethernets.ens5 matches it by macaddress; with \
             set-name ens5: netplan apply renames the links it matches, and after the takeover \
             ens5~ still matches",
            Some(
                "do not run netplan apply while tether holds ens5, or match it by name in \
                 /etc/netplan/50-cloud-init.yaml"
            )
        )
    );
    let by_name = NetplanMatch {
        file: "/etc/netplan/01-eth1.yaml".into(),
        id: "eth1".into(),
        by: "name",
        set_name: None,
    };
    assert_eq!(
        network("eth1", &Manager::Ifupdown, &[], &[by_name]),
        f(
            Level::Ok,
            "network",
            &format!(
                "{IFUPDOWN}; netplan /etc/netplan/01-eth1.yaml ethernets.eth1 matches it by name"
            ),
            None
        )
    );
}

fn addr(ip: &str, len: u8, valid: u32, proto: u8) -> Addr {
    let mut a = Addr::new(2, ip.parse::<IpAddr>().unwrap(), len);
    if valid != u32::MAX {
        a.lifetime = Lifetime {
            valid,
            preferred: valid,
        };
    }
    a.proto = proto;
    a
}

#[test]
fn addresses_that_expire() {
    let networkd = Manager::Networkd {
        network_file: "/etc/systemd/network/10-nic.network".into(),
        drop_ins: vec![],
    };
    let forever = [addr("192.0.2.10", 24, u32::MAX, 0)];
    assert_eq!(lifetimes("eth1", &forever, &Manager::None, &[]), None);
    // fe80:: addresses are the link's own, never moved.
    let ll = [addr("fe80::1", 64, 3600, 0)];
    assert_eq!(lifetimes("eth1", &ll, &Manager::None, &[]), None);
    let leased = [
        addr("192.0.2.10", 24, 3542, 0),
        addr("192.0.2.11", 24, u32::MAX, 0),
    ];
    let head = "eth1 has addresses that expire: 192.0.2.10/24 (valid 3542 s)";
    assert_eq!(
        lifetimes("eth1", &leased, &networkd, &[]),
        Some(f(
            Level::Ok,
            "lifetimes",
            &format!(
                "{head}; systemd-networkd renews them on the host port (tether's .network file \
                 for it)"
            ),
            None
        ))
    );
    assert_eq!(
        lifetimes("eth1", &leased, &Manager::Ifupdown, &[]),
        Some(f(
            Level::Ok,
            "lifetimes",
            &format!(
                "{head}; ifupdown's dhclient renews them through eth1~ and puts them on the host \
                 port eth1"
            ),
            None
        ))
    );
    assert_eq!(
        lifetimes("eth1", &leased, &Manager::None, &[dhcp(412, "dhclient")]),
        Some(f(
            Level::Ok,
            "lifetimes",
            &format!(
                "{head}; dhclient (pid 412) renews them through eth1~ and puts them on the host \
                 port eth1"
            ),
            None
        ))
    );
    assert_eq!(
        lifetimes("eth1", &leased, &Manager::NetworkManager, &[]),
        Some(f(
            Level::Ok,
            "lifetimes",
            &format!(
                "{head}; NetworkManager renews them on the host port eth1 (tether's profile for \
                 it, with eth1's DHCP identity)"
            ),
            None
        ))
    );
    assert_eq!(
        lifetimes("eth1", &leased, &Manager::None, &[dhcp(77, "dhcpcd")]),
        Some(f(
            Level::Warn,
            "lifetimes",
            &format!("{head}; dhcpcd (pid 77) may renew them, but tether was not tried with it"),
            Some("check after the takeover that dhcpcd renews them on eth1, the host port")
        ))
    );
    assert_eq!(
        lifetimes("eth1", &leased, &Manager::None, &[]),
        Some(f(
            Level::Warn,
            "lifetimes",
            &format!(
                "{head}; no DHCP client tether knows of renews them (no systemd-networkd, \
                 ifupdown or dhclient for eth1): after the takeover the host port's copies expire"
            ),
            Some(
                "let systemd-networkd or ifupdown manage the NIC (tether keeps the lease renewing \
                 on the host port), or give it static addresses"
            )
        ))
    );
    // SLAAC only: the kernel renews them from router advertisements.
    let slaac = [addr(
        "2001:db8::5054:ff:fe12:3456",
        64,
        86400,
        IFAPROT_KERNEL_RA,
    )];
    assert_eq!(
        lifetimes("eth1", &slaac, &Manager::None, &[]),
        Some(f(
            Level::Ok,
            "lifetimes",
            "eth1 has addresses that expire: 2001:db8::5054:ff:fe12:3456/64 (valid 86400 s); the \
             kernel renews them from router advertisements",
            None
        ))
    );
}

/// An attached uplink on the userspace datapath: its side door, as status reports it, with
/// the fix; shut, what keeps it so; nothing on the kernel datapath.
#[test]
fn the_uplink_side_door() {
    use crate::controller::externalnode::uplink::UplinkFacts;
    use crate::netlink::DevSysctl;
    let facts = |all: &str, ipv4: &[&str]| UplinkFacts {
        sysctls: vec![
            (DevSysctl::Ipv6DisableIpv6, "1".into()),
            (DevSysctl::Ipv4RpFilter, "1".into()),
            (DevSysctl::Ipv4ArpIgnore, "8".into()),
        ],
        all_rp_filter: Some(all.into()),
        ipv4: ipv4.iter().map(|s| (*s).to_string()).collect(),
    };
    assert_eq!(
        side_door("eth1~", "netdev", Some(&facts("2", &[]))),
        Some(f(
            Level::Ok,
            "uplink",
            "eth1~'s kernel stack takes nothing for the VM past OVS (userspace datapath): no IPv4 \
             address, net.ipv4.conf.eth1~.rp_filter=1 with net.ipv4.conf.all.rp_filter=2, IPv6 off",
            None
        ))
    );
    assert_eq!(
        side_door("eth1~", "netdev", Some(&facts("2", &["203.0.113.99/24"]))),
        Some(f(
            Level::Warn,
            "uplink",
            "eth1~ holds IPv4 address 203.0.113.99/24 (a DHCP client that kept its lease on it?) \
             and net.ipv4.conf.eth1~.rp_filter=1 and net.ipv4.conf.all.rp_filter=2: the kernel \
             delivers IPv4 that arrives on eth1~ to the VM's sockets past OVS, from any source \
             (loose reverse-path check)",
            Some(
                "remove the IPv4 addresses from eth1~ and stop what adds them (README \"DHCP and \
                 network managers\"); tether sets eth1~'s own values again at every sync but \
                 changes no global setting: with an address on eth1~, \
                 net.ipv4.conf.all.rp_filter=2 (loose) lets IPv4 in"
            )
        ))
    );
    assert_eq!(
        side_door("eth1~", "netdev", None).map(|f| f.level),
        Some(Level::Warn)
    );
    assert_eq!(
        side_door("eth1~", "system", Some(&facts("0", &["203.0.113.99/24"]))),
        None
    );
}
