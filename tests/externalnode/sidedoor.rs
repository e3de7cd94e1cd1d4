//! The uplink is no side door around OVS. On the userspace datapath OVS reads `<nic>~`
//! through a packet socket, which taps and does not steal: the kernel receives every frame
//! too (docs/datapath.md#12-netdev-an-af_packet-socket-and-nothing-is-stolen), and as a
//! weak host it answered ARP there and delivered the VM's IPv4 to local sockets, past
//! whatever OVS drops. tether closes it with the uplink's sysctls while it holds the NIC
//! and gives the NIC's own values back. Nothing here calls `neutralise_uplink`.

use super::*;
use common::Netns;

/// The cookie of the test's own drop flows (round 0: no tether round deletes them).
const DROP_COOKIE: &str = "0xd00d";

/// Every per-device sysctl of `dev`, both families, as `ipv4/conf/<dev>/<key>=<value>`
/// lines; one the kernel will not read (`stable_secret` unset) is `?`.
fn dev_sysctls(vm: &Netns, dev: &str) -> Vec<String> {
    vm.sh(&format!(
        "for f in /proc/sys/net/ipv4/conf/{dev}/* /proc/sys/net/ipv6/conf/{dev}/*; do \
         printf '%s=%s\\n' \"${{f#/proc/sys/net/}}\" \"$(cat $f 2>/dev/null || echo '?')\"; done"
    ))
    .lines()
    .map(str::to_string)
    .collect()
}

fn sysctl(vm: &Netns, key: &str) -> String {
    vm.exec(&["sysctl", "-n", key]).trim().to_string()
}

/// How many of 3 pings from `from` to `to` were answered (0 when none: ping fails).
fn answered(from: &Netns, to: &str) -> u32 {
    let out = from
        .try_exec(&["ping", "-c", "3", "-i", "0.2", "-W", "1", to])
        .unwrap_or_else(|e| e);
    out.split(", ")
        .find_map(|p| p.strip_suffix(" received")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("ping {to}: no summary in {out}"))
}

const ACCEPT_ONCE: &str = "import socket,sys
fam=socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET
s=socket.socket(fam)
s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)
s.bind((sys.argv[1],5002))
s.listen(1)
s.settimeout(8)
try:
    s.accept()
    print('accepted')
except OSError:
    print('none')";

const CONNECT: &str = "import socket,sys
try:
    socket.create_connection((sys.argv[1],5002),timeout=2).close()
    print('connected')
except OSError as e:
    print('failed', e)";

/// Whether the peer's TCP connection to the VM's `addr` is accepted by a listener there.
fn tcp_reaches(vm: &Netns, peer: &Netns, addr: &str) -> bool {
    let mut server = vm
        .command(&[PY, "-c", ACCEPT_ONCE, addr])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(Duration::from_secs(5), "the VM's listener", || {
        let l = vm.exec(&["ss", "-Hltn", "sport", "=", ":5002"]);
        (!l.trim().is_empty()).then_some(())
    });
    let client = peer.exec(&[PY, "-c", CONNECT, addr]);
    if !client.starts_with("connected") {
        let _ = server.kill();
    }
    let out = server.wait_with_output().unwrap();
    let accepted = String::from_utf8_lossy(&out.stdout).contains("accepted");
    assert_eq!(
        accepted,
        client.starts_with("connected"),
        "TCP to {addr}: client {client:?}"
    );
    accepted
}

/// What OVS would do to the VM's traffic under a policy that drops ICMP echo and TCP to
/// it from outside (the uplink): table 70, above the pair flows.
fn block(sb: &Sandbox) {
    let uplink = ofport(sb, "eth1~");
    for m in [
        "icmp,nw_dst=192.0.2.10",
        "tcp,nw_dst=192.0.2.10",
        "icmp6,ipv6_dst=2001:db8:1::10,icmp_type=128",
        "tcp6,ipv6_dst=2001:db8:1::10",
    ] {
        sb.ofctl(&[
            "-O",
            "OpenFlow15",
            "add-flow",
            "br-int",
            &format!(
                "cookie={DROP_COOKIE},table=70,priority=250,in_port={uplink},{m},actions=drop"
            ),
        ]);
    }
}

fn unblock(sb: &Sandbox) {
    sb.ofctl(&[
        "-O",
        "OpenFlow15",
        "del-flows",
        "br-int",
        &format!("cookie={DROP_COOKIE}/-1"),
    ]);
}

/// Both families, ICMP and TCP: whether the peer reaches the VM.
fn reaches(sb: &Sandbox, peer: &Netns) -> [(&'static str, bool); 4] {
    let vm = sb.ns();
    [
        ("ping 192.0.2.10", answered(peer, "192.0.2.10") > 0),
        ("ping 2001:db8:1::10", answered(peer, "2001:db8:1::10") > 0),
        ("tcp 192.0.2.10", tcp_reaches(vm, peer, "192.0.2.10")),
        (
            "tcp 2001:db8:1::10",
            tcp_reaches(vm, peer, "2001:db8:1::10"),
        ),
    ]
}

/// The VM's NIC with per-device values of its own (not the namespace's defaults), so a
/// restore that wrote defaults, or left the uplink's, would show. `rp_filter` is the
/// kernel's default, 0, and `all` stays 0 too: the door is open only then (systemd's
/// `50-default.conf` sets 2, which on an uplink without an address shuts IPv4 already).
fn own_values(vm: &Netns) {
    vm.sh(
        "sysctl -qw net.ipv4.conf.eth1.arp_ignore=1 net.ipv4.conf.eth1.rp_filter=0 \
           net.ipv4.conf.eth1.arp_announce=2 net.ipv4.conf.eth1.accept_local=1",
    );
}

const EN: &str = "en - 192.0.2.10,2001:db8:1::10";

/// Under a drop in OVS, the peer's ping and TCP to the VM's IPv4 and IPv6 address fail
/// (before: IPv4 got through the uplink, around OVS; IPv6 was closed already by the
/// uplink's `disable_ipv6`), and work once the drop is gone, without duplicates. The gap
/// rp_filter leaves: with `net.ipv4.conf.all.rp_filter=2` the door stays shut while the
/// uplink holds no IPv4 address (the kernel's reverse-path check refuses a device without
/// one in loose mode too), opens when it holds one, and status says so. After the
/// restore the NIC's sysctls are exactly its own again and its IPv6 addresses are back.
#[test]
fn the_uplink_is_no_side_door_around_ovs() {
    if !privileged("the_uplink_is_no_side_door_around_ovs") {
        return;
    }
    let (sb, peer) = setup();
    let vm = sb.ns();
    own_values(vm);
    let sysctls_before = dev_sysctls(vm, "eth1");
    let eth1_before = snapshot(vm, "eth1");

    let mut agent = Agent::start_and_sync(&sb, Some(EN));
    let netdev = !common::kernel_datapath();
    let uplink = |k: &str| sysctl(vm, &format!("net.ipv4.conf.eth1~.{k}"));
    assert_eq!(sysctl(vm, "net.ipv6.conf.eth1~.disable_ipv6"), "1");
    if netdev {
        assert_eq!(
            (uplink("arp_ignore"), uplink("rp_filter")),
            ("8".into(), "1".into())
        );
    } else {
        // The kernel datapath's rx_handler takes every frame: nothing else to close.
        assert_eq!(
            (uplink("arp_ignore"), uplink("rp_filter")),
            ("1".into(), "0".into())
        );
    }
    for (what, ok) in reaches(&sb, &peer) {
        assert!(ok, "{what} before any drop");
    }

    block(&sb);
    for (what, ok) in reaches(&sb, &peer) {
        assert!(!ok, "{what} got past OVS's drop");
    }

    // The namespace's `all` in loose mode: the uplink's effective rp_filter is 2, and the
    // door stays shut while the uplink holds no address …
    vm.exec(&["sysctl", "-qw", "net.ipv4.conf.all.rp_filter=2"]);
    assert_eq!(answered(&peer, "192.0.2.10"), 0, "all.rp_filter=2");
    agent.cmd("sync");
    let st = agent.cmd("status");
    assert!(st.contains("side_door: None"), "{st}");
    // … and opens when it holds one (a DHCP client that kept its lease on `<nic>~`).
    vm.ip(&["addr", "add", "203.0.113.99/24", "dev", "eth1~"]);
    let got = answered(&peer, "192.0.2.10");
    agent.cmd("sync");
    let st = agent.cmd("status");
    if netdev {
        assert_eq!(got, 3, "all.rp_filter=2 and an address on the uplink");
        assert!(
            st.contains("side_door: Some(")
                && st.contains("net.ipv4.conf.all.rp_filter=2")
                && st.contains("203.0.113.99/24"),
            "{st}"
        );
    } else {
        assert_eq!(got, 0, "the kernel datapath takes the uplink's frames");
        assert!(st.contains("side_door: None"), "{st}");
    }
    vm.ip(&["addr", "del", "203.0.113.99/24", "dev", "eth1~"]);
    vm.exec(&["sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0"]);
    agent.cmd("sync");
    let st = agent.cmd("status");
    assert!(st.contains("side_door: None"), "{st}");

    unblock(&sb);
    for (what, ok) in reaches(&sb, &peer) {
        assert!(ok, "{what} once the drop is gone");
    }
    assert_clean_ping(&peer, "192.0.2.10");
    assert_clean_ping(&peer, "2001:db8:1::10");

    agent.cmd("absent");
    agent.cmd("sync");
    assert_restored(vm, "eth1", &eth1_before);
    assert_eq!(dev_sysctls(vm, "eth1"), sysctls_before);
    assert_clean_ping(&peer, "2001:db8:1::10");
}

/// kill -9 (abort) where the uplink carries tether's values — right after the takeover's
/// move and flows steps, and the restore's ports and rename steps (renamed back, the
/// uplink's values still on it) — and the next start gives the NIC its own values and its
/// IPv6 addresses back.
#[test]
fn a_crash_while_the_uplink_is_closed_gives_the_nic_its_own_values_back() {
    if !privileged("a_crash_while_the_uplink_is_closed_gives_the_nic_its_own_values_back") {
        return;
    }
    let (sb, peer) = setup();
    let vm = sb.ns();
    own_values(vm);
    let sysctls_before = dev_sysctls(vm, "eth1");
    let eth1_before = snapshot(vm, "eth1");
    for at in [
        "takeover-move",
        "takeover-flows",
        "restore-ports",
        "restore-rename",
    ] {
        if at.starts_with("restore") {
            drop(Agent::start_and_sync(&sb, Some(EN)));
        }
        let mut a = Agent::spawn(&sb, Some(at));
        a.cmd("recover");
        a.cmd(if at.starts_with("restore") {
            "absent"
        } else {
            EN
        });
        a.crash_on("sync");
        assert!(bridge_record(&sb).is_some(), "{at}: no record");
        if at == "restore-rename" {
            // Renamed back with the uplink's values: IPv6 is still off on the NIC.
            assert_eq!(sysctl(vm, "net.ipv6.conf.eth1.disable_ipv6"), "1", "{at}");
        }
        drop(Agent::start_and_sync(&sb, None));
        assert_eq!(bridge_record(&sb), None, "{at}");
        assert_restored(vm, "eth1", &eth1_before);
        assert_eq!(dev_sysctls(vm, "eth1"), sysctls_before, "{at}");
        assert_clean_ping(&peer, "2001:db8:1::10");
    }
}
