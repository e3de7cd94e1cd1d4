//! The uplink's held values (`uplink`): set with the move step on the userspace datapath
//! (IPv6 off only on the kernel's), kept at every sync, the NIC's own values back on
//! restore — before its addresses, after a crash at any record write, and from an
//! unreadable record — and the side door status reports.

use super::crash_recovery::crash_during;
use super::sim::Crash;
use super::*;

/// The NIC's own values, none of them the namespace's defaults nor the uplink's held ones.
const OWN: &[(DevSysctl, &str, &str)] = &[
    (DevSysctl::Ipv6DisableIpv6, "0", "1"),
    (DevSysctl::Ipv6AcceptDad, "0", "1"),
    (DevSysctl::Ipv4RpFilter, "0", "2"),
    (DevSysctl::Ipv4ArpIgnore, "1", "0"),
    (DevSysctl::Ipv4ArpAnnounce, "2", "0"),
];

fn with_own_values(fx: Fx) -> Fx {
    for (k, nic, default) in OWN {
        fx.links.put_sysctl(fx.eth1, *k, nic);
        fx.links.set_default_sysctl(*k, default);
    }
    fx
}

fn own() -> Vec<(DevSysctl, String)> {
    OWN.iter().map(|(k, v, _)| (*k, (*v).to_string())).collect()
}

fn sysctls(fx: &Fx, dev: &str) -> Vec<(DevSysctl, String)> {
    crate::netlink::read_sysctls(fx.links.as_ref(), dev).unwrap()
}

/// `key=value` of every sysctl written to link `index`, in order.
fn written(fx: &Fx, index: u32) -> Vec<String> {
    fx.links
        .calls()
        .iter()
        .filter_map(|c| match c {
            Call::SetSysctl(i, k, v) if *i == index => Some(format!("{}={v}", k.id())),
            _ => None,
        })
        .collect()
}

#[test]
fn the_uplink_is_held_on_the_userspace_datapath_and_given_back() {
    let fx = with_own_values(fixture());
    let before = fx.nic_now();
    fx.take_over(ETH1_IPS);
    assert_attached(&fx);
    assert_eq!(
        written(&fx, fx.eth1),
        [
            "ipv6.disable_ipv6=1",
            "ipv4.rp_filter=1",
            "ipv4.arp_ignore=8"
        ]
    );
    assert_eq!(fx.ctl.status().side_door, None);
    // The host port carries the NIC's own values, and the held configuration with it.
    assert_eq!(sysctls(&fx, "eth1"), own());

    // Restore: renamed back first, then the NIC's own values, IPv6 on again before its
    // IPv6 address comes back (the kernel refuses one on a device with IPv6 off: EACCES).
    fx.links.clear_calls();
    fx.delete_en();
    assert_pristine(&fx, &before);
    assert_eq!(sysctls(&fx, "eth1"), own());
    assert_eq!(
        written(&fx, fx.eth1),
        [
            "ipv6.disable_ipv6=0",
            "ipv4.rp_filter=0",
            "ipv4.arp_ignore=1"
        ]
    );
    let calls = fx.links.calls();
    let at = |f: &dyn Fn(&Call) -> bool| calls.iter().position(f).unwrap();
    let renamed = at(&|c| matches!(c, Call::SetName(i, n) if *i == fx.eth1 && n == "eth1"));
    let v6_on = at(
        &|c| matches!(c, Call::SetSysctl(i, DevSysctl::Ipv6DisableIpv6, v) if *i == fx.eth1 && v == "0"),
    );
    let v6_addr = at(&|c| matches!(c, Call::AddAddr(a) if a.local == ip("2001:db8:1::10")));
    assert!(renamed < v6_on && v6_on < v6_addr, "{calls:?}");
}

#[test]
fn the_kernel_datapath_holds_ipv6_off_only() {
    let fx = with_own_values(kernel_fixture());
    let before = fx.nic_now();
    fx.take_over(ETH1_IPS);
    assert_attached(&fx);
    assert_eq!(written(&fx, fx.eth1), ["ipv6.disable_ipv6=1"]);
    fx.links
        .set_sysctl("eth1~", DevSysctl::Ipv4RpFilter, "0")
        .unwrap();
    fx.links.set_all_sysctl(DevSysctl::Ipv4RpFilter, "0");
    fx.ctl.sync().unwrap();
    assert_eq!(fx.ctl.status().side_door, None, "no door to open");
    fx.delete_en();
    assert_pristine(&fx, &before);
    assert_eq!(sysctls(&fx, "eth1"), own());
}

/// Every sync of an attached NIC sets the held values again (one turned back, or a NIC a
/// tether without them took over), and status says why the door is open while it is:
/// `all` loose with an address on the uplink, the one case tether cannot close itself.
#[test]
fn status_reports_a_side_door_and_a_sync_closes_what_it_can() {
    let fx = with_own_values(fixture());
    fx.take_over(ETH1_IPS);
    let door = || fx.ctl.status().side_door;
    fx.links.clear_calls();
    fx.links
        .set_sysctl("eth1~", DevSysctl::Ipv4RpFilter, "0")
        .unwrap();
    fx.ctl.sync().unwrap();
    assert_eq!(
        written(&fx, fx.eth1),
        ["ipv4.rp_filter=0", "ipv4.rp_filter=1"]
    );
    assert_eq!(door(), None);

    // `all` loose: still shut, the uplink holding no IPv4 address …
    fx.links.set_all_sysctl(DevSysctl::Ipv4RpFilter, "2");
    fx.ctl.sync().unwrap();
    assert_eq!(door(), None);
    // … open once it holds one.
    let stray = Addr::new(fx.eth1, ip("203.0.113.99"), 24);
    fx.links.add_addr(&stray).unwrap();
    fx.ctl.sync().unwrap();
    assert_eq!(
        door().as_deref(),
        Some(
            "eth1~ holds IPv4 address 203.0.113.99/24 (a DHCP client that kept its lease on it?) \
             and net.ipv4.conf.eth1~.rp_filter=1 and net.ipv4.conf.all.rp_filter=2: the kernel \
             delivers IPv4 that arrives on eth1~ to the VM's sockets past OVS, from any source \
             (loose reverse-path check)"
        )
    );
    fx.links.del_addr(&stray).unwrap();
    fx.ctl.sync().unwrap();
    assert_eq!(door(), None);
}

/// A crash at every record write of a takeover and of a restore (before and after it):
/// the next start gives the NIC exactly its own values, with its IPv6 address. The
/// interesting ones: after the move step (the uplink holds tether's values, the record
/// the NIC's) and after the restore's rename (the NIC has its name back and still
/// tether's values, IPv6 off).
#[test]
fn a_crash_at_every_write_gives_the_nic_its_own_values() {
    for restore in [false, true] {
        for k in 0..if restore { 5 } else { 4 } {
            for how in [Crash::BeforeWrite, Crash::AfterWrite] {
                let what = format!("restore={restore} write={k} {how:?}");
                let fx = with_own_values(fixture());
                let before = fx.nic_now();
                if restore {
                    fx.take_over(ETH1_IPS);
                    set_en(&fx, None);
                } else {
                    fx.want(ETH1_IPS);
                }
                crash_during(&fx, k, how, || {
                    let _ = fx.ctl.sync();
                });
                let ctl = controller(&fx);
                ctl.recover().unwrap_or_else(|e| panic!("{what}: {e}"));
                ctl.sync().unwrap_or_else(|e| panic!("{what}: {e}"));
                if restore {
                    assert_pristine(&fx, &before);
                } else {
                    assert_attached(&fx);
                    set_en(&fx, None);
                    ctl.sync().unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_pristine(&fx, &before);
                }
                assert_eq!(sysctls(&fx, "eth1"), own(), "{what}");
            }
        }
    }
}

/// A step record that does not decode: the NIC is recovered from the kernel, and its own
/// values from the host port or, once that is gone, the held configuration — not from the
/// uplink, which holds tether's (before: the NIC came back with IPv6 off, its IPv6 address
/// refused). A restore that had renamed the NIC back leaves no trace the record could
/// name; the state directory's held file gives the NIC back at the next sync.
#[test]
fn an_unreadable_record_gives_the_nic_its_own_values() {
    for (restore, k) in [(false, 3), (true, 1), (true, 3), (true, 4)] {
        let what = format!("restore={restore} write={k}");
        let dir = std::env::temp_dir().join(format!(
            "tether-sidedoor-{restore}-{k}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let fx = with_own_values(fixture());
        let with_state = || {
            new_controller_in(
                &fx.sim,
                &fx.flows,
                &fx.dp,
                &fx.stores,
                &fx.links,
                Some(dir.clone()),
            )
        };
        let ctl = with_state();
        fx.want(ETH1_IPS);
        if restore {
            ctl.sync().unwrap();
            set_en(&fx, None);
        }
        crash_during(&fx, k, Crash::BeforeWrite, || {
            let _ = ctl.sync();
        });
        fx.sim
            .bridge
            .set_bridge_external_id(RECORD_KEY, Some("{not json"))
            .unwrap();
        let ctl = with_state();
        ctl.recover().unwrap_or_else(|e| panic!("{what}: {e}"));
        if restore {
            ctl.sync().unwrap_or_else(|e| panic!("{what}: {e}"));
        }
        let (l, addrs, _) = nic_state(&fx.links, fx.eth1);
        assert_eq!(l.name, "eth1", "{what}");
        let addrs: Vec<String> = addrs.iter().map(ToString::to_string).collect();
        if restore && k == 3 {
            // The host port was deleted with the addresses, the uplink not renamed yet:
            // salvaging recovers from the kernel only, which has none left
            // (`an_unreadable_record_is_recovered_from_the_kernel`).
            assert!(addrs.is_empty(), "{what}: {addrs:?}");
        } else {
            assert_eq!(addrs, ["192.0.2.10/24", "2001:db8:1::10/64"], "{what}");
        }
        assert_eq!(sysctls(&fx, "eth1"), own(), "{what}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
