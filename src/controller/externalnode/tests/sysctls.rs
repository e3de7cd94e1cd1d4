//! The NIC's per-device sysctls: copied to the host port before its addresses, IPv6 off on
//! the uplink while it is held, and EACCES on an IPv6 address explained.

use super::*;

/// A hardened image: `net.ipv6.conf.default.disable_ipv6=1`, the NIC's own IPv6 on. The
/// host port (a new device, so with the default values) gets the NIC's per-device
/// sysctls before the addresses, and the takeover works; the record carries them; the NIC
/// comes back with its own. (Before: adding the IPv6 address failed with EACCES, logged
/// as "needs CAP_NET_ADMIN", rolled back, retried forever.)
#[test]
fn the_nic_sysctls_go_to_the_host_port_first() {
    let fx = fixture();
    for (k, nic, default) in [
        (DevSysctl::Ipv6DisableIpv6, "0", "1"),
        (DevSysctl::Ipv6AcceptRa, "2", "1"),
        (DevSysctl::Ipv6Autoconf, "0", "1"),
        (DevSysctl::Ipv6AcceptDad, "0", "1"),
        (DevSysctl::Ipv4RpFilter, "2", "0"),
        (DevSysctl::Ipv4ArpIgnore, "1", "0"),
        (DevSysctl::Ipv4ArpAnnounce, "2", "0"),
        (DevSysctl::Ipv4Forwarding, "1", "0"),
        (DevSysctl::Ipv6Forwarding, "0", "0"),
    ] {
        fx.links.put_sysctl(fx.eth1, k, nic);
        fx.links.set_default_sysctl(k, default);
    }
    let before = fx.nic_now();
    let nic_sysctls = crate::netlink::read_sysctls(fx.links.as_ref(), "eth1").unwrap();
    fx.take_over(ETH1_IPS);
    assert_attached(&fx);
    let host = crate::netlink::read_sysctls(fx.links.as_ref(), "eth1").unwrap();
    assert_eq!(host, nic_sysctls, "the host port carries the NIC's values");
    // Set before the first address, in DevSysctl order, only where they differed.
    let calls = fx.links.calls();
    let first_addr = calls
        .iter()
        .position(|c| matches!(c, Call::AddAddr(a) if a.local == ip("192.0.2.10")))
        .unwrap();
    let host_index = fx.links.link_by_name("eth1").unwrap().index;
    let sets: Vec<(usize, u32, String)> = calls
        .iter()
        .enumerate()
        .filter_map(|(i, c)| match c {
            Call::SetSysctl(dev, k, v) => Some((i, *dev, format!("{}={v}", k.id()))),
            _ => None,
        })
        .collect();
    let on = |dev: u32| -> Vec<&str> {
        sets.iter()
            .filter(|(_, d, _)| *d == dev)
            .map(|(_, _, s)| s.as_str())
            .collect()
    };
    assert_eq!(
        on(host_index),
        [
            "ipv6.disable_ipv6=0",
            "ipv6.accept_dad=0",
            "ipv6.accept_ra=2",
            "ipv6.autoconf=0",
            "ipv4.rp_filter=2",
            "ipv4.arp_ignore=1",
            "ipv4.arp_announce=2",
            "ipv4.forwarding=1",
        ]
    );
    assert!(
        sets.iter()
            .filter(|(_, d, _)| *d == host_index)
            .all(|(i, _, _)| *i < first_addr),
        "{calls:?}"
    );
    // The uplink, once its addresses have moved: IPv6 off, and (the userspace datapath)
    // the kernel stack kept off it (`uplink`); nothing else changes on it.
    assert_eq!(
        on(fx.eth1),
        [
            "ipv6.disable_ipv6=1",
            "ipv4.rp_filter=1",
            "ipv4.arp_ignore=8"
        ]
    );
    fx.delete_en();
    assert_pristine(&fx, &before);
    assert_eq!(
        crate::netlink::read_sysctls(fx.links.as_ref(), "eth1").unwrap(),
        nic_sysctls
    );
}

/// The uplink keeps the kernel's IPv6 link-local address through the rename, the same
/// one as the host port's (same MAC), and sends from it: IPv6 is off on it while it is
/// held, and the NIC's own value comes back with the restore, after a rollback too, and
/// on a NIC taken over before tether did this (a sync of an attached NIC turns it off).
#[test]
fn the_uplink_has_ipv6_off_while_it_is_held() {
    let fx = fixture_ipv6_on();
    let before = fx.nic_now();
    let disable = |dev: &str| {
        fx.links
            .sysctl(dev, DevSysctl::Ipv6DisableIpv6)
            .unwrap()
            .unwrap()
    };
    assert_eq!(disable("eth1"), "0");
    fx.take_over(&["192.0.2.10"]);
    assert_attached(&fx);
    assert_eq!(
        (disable("eth1~"), disable("eth1")),
        ("1".into(), "0".into())
    );

    // Turned on by someone (or by an older takeover): the next sync turns it off again.
    fx.links
        .set_sysctl("eth1~", DevSysctl::Ipv6DisableIpv6, "0")
        .unwrap();
    fx.ctl.sync().unwrap();
    assert_eq!(disable("eth1~"), "1");

    fx.delete_en();
    assert_pristine(&fx, &before);
    assert_eq!(disable("eth1"), "0");
    // A rollback at any call gives the NIC its value back too:
    // a_kernel_failure_at_every_takeover_call_rolls_back.
}

/// Without the copy (a NIC whose sysctls the kernel does not show), EACCES on the IPv6
/// address says what it means.
#[test]
fn eacces_on_an_ipv6_address_names_disable_ipv6() {
    let fx = fixture();
    fx.links.set_default_sysctl(DevSysctl::Ipv6DisableIpv6, "1");
    fx.want(ETH1_IPS);
    let err = fx.ctl.sync().unwrap_err().to_string();
    assert!(
        err.contains("IPv6 is disabled on eth1 (net.ipv6.conf.eth1.disable_ipv6=1; the kernel answers EACCES)"),
        "{err}"
    );
    assert!(!err.contains("CAP_NET_ADMIN"), "{err}");
}
