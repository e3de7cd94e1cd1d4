//! What only Open vSwitch's kernel (`system`) datapath does, checked with real packets in
//! the kernel tier's VM (scripts/kernel-tier.sh: Debian's 6.1 kernel and its openvswitch.ko):
//! the datapath outliving ovs-vswitchd, Debian's `ovs-ctl restart` and `force-reload-kmod`,
//! tunnel targets as the kernel's own devices, an underlay MTU with no room for a tunnel's
//! headers, ovsdb-server down. docs/datapath.md cites each test.
//!
//! On the userspace datapath (these machines' default) each test says SKIPPED and why:
//! there is no kernel datapath there to outlive anything, and tunnels are not devices.

#![allow(clippy::unwrap_used)]

mod common;
mod e2e;
mod externalnode_vm;

use std::time::Duration;

use common::pinger::{Pinger, now};
use common::{Netns, Sandbox, privileged, wait_for};
use externalnode_vm::*;

/// Run only on the kernel datapath; elsewhere say SKIPPED with `why`.
fn kernel_only(test: &str, why: &str) -> bool {
    if !privileged(test) {
        return false;
    }
    if !common::kernel_datapath() {
        eprintln!(
            "SKIPPED {test}: kernel datapath only ({why}); scripts/kernel-tier.sh runs it with \
             TETHER_TEST_DATAPATH=system"
        );
        return false;
    }
    true
}

/// The ExternalNode bed with tether holding `eth1`: the peer namespace reaches the VM at
/// 192.0.2.10 through the uplink and the host port.
fn attached() -> (Bed, common::Tether) {
    attached_with("")
}

/// [`attached`], with `setup` run in the VM first (while the NIC is still plain).
fn attached_with(setup: &str) -> (Bed, common::Tether) {
    let bed = Bed::new();
    if !setup.is_empty() {
        bed.sb.ns().sh(setup);
    }
    put(&bed.manifests, "en.yaml", EN_YAML);
    let t = bed.start();
    wait_for(Duration::from_secs(20), "the ExternalNode attached", || {
        (bed.status()["external_node"]["step"] == "attached").then_some(())
    });
    assert_clean_ping(&bed.peer, "192.0.2.10");
    (bed, t)
}

/// tether's flows (every category), as `ovs-ofctl dump-flows` prints them.
fn flows(sb: &Sandbox) -> Vec<String> {
    sb.dump_flows("br-int", None)
}

/// `ovs-dpctl show` in the VM: the kernel's own view, answered with ovs-vswitchd dead.
fn dpctl_show(vm: &Netns) -> String {
    vm.exec(&["ovs-dpctl", "show"])
}

/// The NIC's state where tether keeps it: the host port's addresses and routes of every
/// table, and the uplink enslaved to the datapath.
fn vm_state(vm: &Netns) -> serde_json::Value {
    serde_json::json!({
        "addr": json_of(&vm.ip(&["-j", "addr", "show", "dev", "eth1"]))[0]["addr_info"],
        "route4": json_of(&vm.ip(&["-j", "route", "show", "table", "all", "dev", "eth1"])),
        "route6": json_of(&vm.ip(&["-j", "-6", "route", "show", "table", "all", "dev", "eth1"])),
        "uplink_master": json_of(&vm.ip(&["-j", "link", "show", "dev", "eth1~"]))[0]["master"],
    })
}

/// Debian's ovs-ctl on the sandbox's daemons: its files are the sandbox's (ovs-ctl writes
/// `<sysconfdir>/openvswitch/system-id.conf`).
fn ovs_ctl_env(c: &mut std::process::Command, sb: &Sandbox) {
    std::fs::create_dir_all(sb.path("openvswitch")).unwrap();
    for var in ["OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVS_SYSCONFDIR"] {
        c.env(var, sb.dir());
    }
}

/// ovs-vswitchd `kill -9`ed for 12 s: the kernel keeps the datapath, its ports and the
/// megaflows the VM's traffic already uses, and nothing expires them (ovs-vswitchd's
/// revalidators would after 10 s idle; these are not idle, and not revalidated), so a ping
/// that was running loses nothing while the daemon is dead (a userspace datapath forwards
/// nothing then). After the restart
/// (a plain one: no flow-restore-wait, so the new daemon flushes the megaflows) tether
/// replays its flows, and the ping goes on.
#[test]
fn a_killed_vswitchd_leaves_the_vm_reachable_and_tether_replays() {
    if !kernel_only(
        "a_killed_vswitchd_leaves_the_vm_reachable_and_tether_replays",
        "the userspace datapath dies with ovs-vswitchd",
    ) {
        return;
    }
    let (bed, t) = attached();
    let (sb, vm) = (&bed.sb, bed.sb.ns());
    let installed = flows(sb);
    let ping = Pinger::start(
        &bed.peer,
        "192.0.2.10",
        Duration::from_millis(100),
        sb.path("ping.txt"),
    );
    // The megaflows for both directions exist once a few echoes have gone through.
    std::thread::sleep(Duration::from_secs(2));
    sb.kill9("ovs-vswitchd");
    let killed = now();
    let show = dpctl_show(vm);
    assert!(
        show.contains("eth1~") && show.contains("eth1 (internal)"),
        "the datapath keeps its ports without ovs-vswitchd:\n{show}"
    );
    // Longer than ovs-vswitchd's own idle expiry of megaflows (`max-idle`, 10 s): with its
    // revalidators gone nothing expires them, and the kernel has no expiry of its own.
    std::thread::sleep(Duration::from_secs(12));
    let restarted = now();
    sb.start_vswitchd();
    t.wait_log("openflow replayed", Duration::from_secs(20));
    let back = wait_for(Duration::from_secs(20), "tether's flows back", || {
        (flows(sb) == installed).then(now)
    });
    std::thread::sleep(Duration::from_secs(2));
    let pings = ping.stop();
    // The window while it was dead, with a margin at each end: the kill itself, and the
    // restart, which flushes the datapath's megaflows (its loss is the replay's to count).
    let dead = pings.lost_between(killed + 0.3, restarted - 0.3);
    eprintln!(
        "vswitchd dead {:.1} s: {} sent then, lost {:?}; flows back {:.2} s after the restart; \
         lost overall {:?} of {}",
        restarted - killed,
        pings.sent_between(killed + 0.3, restarted),
        dead,
        back - restarted,
        pings.lost(),
        pings.sent
    );
    assert!(
        pings.sent_between(killed + 0.3, restarted) >= 20,
        "{}",
        pings.text
    );
    assert_eq!(dead, Vec::<u64>::new(), "lost while vswitchd was dead");
    // Reachable again after the replay: the last second's echoes all answered.
    assert_eq!(
        pings.lost_between(now() - 1.5, now()),
        Vec::<u64>::new(),
        "{}",
        pings.text
    );
}

/// Debian's `systemctl reload openvswitch-switch` (ovs-vswitchd.service's ExecReload):
/// `ovs-ctl restart` saves the flows, sets `flow-restore-wait`, restarts ovs-vswitchd, which
/// keeps the datapath's megaflows while the key is set, puts the flows back and clears the
/// key. tether reconnects and replays through it: not one echo is lost, and afterwards the
/// key is gone and the flows are exactly tether's.
#[test]
fn ovs_ctl_restart_as_debian_reloads_loses_no_packet() {
    if !kernel_only(
        "ovs_ctl_restart_as_debian_reloads_loses_no_packet",
        "flow-restore-wait keeps kernel megaflows; a userspace datapath restarts empty",
    ) {
        return;
    }
    let (bed, mut t) = attached();
    // ovs-ctl's own flow restore (ovs-save) may land after tether's replay: a change by
    // someone else that tether puts right (see force_reload_kmod_gives_the_vm_its_addresses_back).
    t.expect_drift();
    let (sb, vm) = (&bed.sb, bed.sb.ns());
    let installed = flows(sb);
    let ping = Pinger::start(
        &bed.peer,
        "192.0.2.10",
        Duration::from_millis(50),
        sb.path("ping.txt"),
    );
    std::thread::sleep(Duration::from_secs(2));
    let before = sb.pid("ovs-vswitchd").unwrap();
    let mut c = vm.command(&[
        "/usr/share/openvswitch/scripts/ovs-ctl",
        "--no-ovsdb-server",
        "--no-monitor",
        "--system-id=random",
        "--no-record-hostname",
        "restart",
    ]);
    ovs_ctl_env(&mut c, sb);
    let out = common::run(&mut c);
    let after = sb
        .pid("ovs-vswitchd")
        .expect("ovs-ctl started ovs-vswitchd");
    assert_ne!(before, after, "{out}");
    t.wait_log("openflow reconnected", Duration::from_secs(20));
    wait_for(Duration::from_secs(20), "tether's flows, exactly", || {
        (flows(sb) == installed).then_some(())
    });
    let other = sb.vsctl(&["get", "Open_vSwitch", ".", "other_config"]);
    assert!(!other.contains("flow-restore-wait"), "{other}");
    std::thread::sleep(Duration::from_secs(2));
    let pings = ping.stop();
    eprintln!(
        "ovs-ctl restart: {} echoes, lost {:?}",
        pings.sent,
        pings.lost()
    );
    assert!(pings.sent >= 40, "{}", pings.text);
    assert_eq!(pings.lost(), Vec::<u64>::new(), "{out}\n{}", pings.text);
}

/// `ovs-ctl force-reload-kmod` (Debian's `force-reload-kmod` of openvswitch-switch): it
/// deletes the datapath and reloads the module, so every internal port — the host port
/// holding the VM's addresses among them — is a new device afterwards, and the uplink is
/// let go and attached again. The VM's addresses, routes of every table and the uplink's
/// attachment come back exactly, and the VM answers again.
#[test]
fn force_reload_kmod_gives_the_vm_its_addresses_back() {
    if !kernel_only(
        "force_reload_kmod_gives_the_vm_its_addresses_back",
        "there is no kernel module to reload on the userspace datapath",
    ) {
        return;
    }
    // A route of another table, which ovs-ctl's own restore does not know. (Held from
    // the takeover; one added to the host port later is held from the next sync on.)
    let (bed, mut t) =
        attached_with("ip route add 203.0.113.0/26 via 192.0.2.1 dev eth1 table 100");
    // ovs-ctl saves the switch's flows and adds them back after the restart (ovs-save):
    // that restore is a change to tether's flows by someone else, and it can land after
    // tether has reconnected and replayed (then tether finds the old flows and puts its
    // own back, as it should). Seen once in CI's kernel tier.
    t.expect_drift();
    let (sb, vm) = (&bed.sb, bed.sb.ns());
    let before = vm_state(vm);
    let host_index =
        |vm: &Netns| json_of(&vm.ip(&["-j", "link", "show", "dev", "eth1"]))[0]["ifindex"].clone();
    let index_before = host_index(vm);
    let mut c = vm.command(&[
        "/usr/share/openvswitch/scripts/ovs-ctl",
        "--system-id=random",
        "force-reload-kmod",
    ]);
    ovs_ctl_env(&mut c, sb);
    let out = common::run(&mut c);
    let reloaded = now();
    assert_ne!(
        host_index(vm),
        index_before,
        "a new host port device:\n{out}"
    );
    let end = std::time::Instant::now() + common::patience(Duration::from_secs(30));
    loop {
        let now = vm_state(vm);
        if now == before {
            break;
        }
        if std::time::Instant::now() > end {
            assert_eq!(
                now,
                before,
                "the VM's configuration back\n{out}\n{}",
                t.log()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_clean_ping(&bed.peer, "192.0.2.10");
    assert_clean_ping(&bed.peer, "2001:db8:1::10");
    eprintln!("force-reload-kmod: back after {:.1} s", now() - reloaded);
    drop(t);
}

/// The TrafficControl bed with an underlay to a `remote` namespace: `ul0` in the VM
/// (198.51.100.10/24, 2001:db8:5::10/64) ↔ `eth0` there (198.51.100.2, 2001:db8:5::2).
/// Pods `pa` (203.0.113.1, labelled `app: web`) and `pb` (203.0.113.2).
fn tunnel_bed() -> (e2e::Bed, Netns) {
    let mut bed = e2e::Bed::new();
    bed.add_pod("pa", 1);
    bed.add_pod("pb", 2);
    bed.write_pods(&[("pa", "web")]);
    let remote = Netns::new("remote");
    for ns in [bed.sb.ns(), &remote] {
        ns.sh("sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0");
    }
    bed.sb.ns().veth_to("ul0", &remote, "eth0");
    bed.sb
        .ns()
        .sh("ip addr add 198.51.100.10/24 dev ul0; ip -6 addr add 2001:db8:5::10/64 dev ul0");
    remote.sh("ip addr add 198.51.100.2/24 dev eth0; ip -6 addr add 2001:db8:5::2/64 dev eth0");
    (bed, remote)
}

fn mirror_to(target: &str) -> String {
    format!(
        "apiVersion: crd.antrea.io/v1alpha2\nkind: TrafficControl\nmetadata:\n  name: mirror\n\
         spec:\n  appliedTo:\n    podSelector:\n      matchLabels:\n        app: web\n  \
         direction: Egress\n  action: Mirror\n  targetPort:\n    {target}\n"
    )
}

/// `ip -d -j link show dev` in `ns`, if the device exists.
fn link_details(ns: &Netns, dev: &str) -> Option<serde_json::Value> {
    let out = ns
        .command(&["ip", "-d", "-j", "link", "show", "dev", dev])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| json_of(&String::from_utf8_lossy(&out.stdout))[0].clone())
}

/// Whether a UDP socket is bound to `port` in `ns` (`/proc/net/udp` or `udp6`).
fn udp_bound(ns: &Netns, file: &str, port: u16) -> bool {
    let text = ns.exec(&["cat", file]);
    let want = format!(":{port:04X} ");
    text.lines().skip(1).any(|l| {
        l.split_whitespace()
            .nth(1)
            .is_some_and(|local| format!("{local} ").ends_with(&want))
    })
}

/// A mirror to every tunnel kind, over an IPv4 and an IPv6 underlay: on the kernel datapath
/// each target is the kernel's own device in collect-metadata mode, enslaved to the datapath
/// (`vxlan_sys_4789`, `genev_sys_6081`, `gre_sys`, `erspan_sys`, `ip6gre_sys`,
/// `ip6erspan_sys`: one per type and UDP port, shared), its module loaded on demand, the UDP
/// port bound in the VM's namespace; the copies of the Pod's packets reach the remote end
/// encapsulated (tcpdump there).
#[test]
fn tunnel_targets_are_the_kernels_devices_and_carry_the_copies() {
    if !kernel_only(
        "tunnel_targets_are_the_kernels_devices_and_carry_the_copies",
        "userspace tunnels are built in ovs-vswitchd, with no kernel device",
    ) {
        return;
    }
    let (bed, remote) = tunnel_bed();
    let args = bed.tether_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let _t = common::Tether::start(bed.sb.ns(), &args, &bed.sb.path("tether.log"));
    let vm = bed.sb.ns();
    let cases = [
        (
            "vxlan: {remoteIP: 198.51.100.2}",
            "udp dst port 4789",
            "vxlan_sys_4789",
            "vxlan",
        ),
        (
            "geneve: {remoteIP: 198.51.100.2}",
            "udp dst port 6081",
            "genev_sys_6081",
            "geneve",
        ),
        (
            "gre: {remoteIP: 198.51.100.2}",
            "ip proto 47",
            "gre_sys",
            "gretap",
        ),
        (
            "erspan: {remoteIP: 198.51.100.2, sessionID: 1, version: 2}",
            "ip proto 47",
            "erspan_sys",
            "erspan",
        ),
        (
            "vxlan: {remoteIP: \"2001:db8:5::2\"}",
            "ip6 and udp dst port 4789",
            "vxlan_sys_4789",
            "vxlan",
        ),
        (
            "geneve: {remoteIP: \"2001:db8:5::2\"}",
            "ip6 and udp dst port 6081",
            "genev_sys_6081",
            "geneve",
        ),
        (
            "gre: {remoteIP: \"2001:db8:5::2\"}",
            "ip6 proto 47",
            "ip6gre_sys",
            "ip6gretap",
        ),
        (
            "erspan: {remoteIP: \"2001:db8:5::2\", sessionID: 2, version: 1, index: 3}",
            "ip6 proto 47",
            "ip6erspan_sys",
            "ip6erspan",
        ),
    ];
    let mut seen = Vec::new();
    for (target, filter, dev, kind) in cases {
        bed.write("tc.yaml", &mirror_to(target));
        let remote_ip = target.split('"').nth(1).unwrap_or("198.51.100.2");
        // The device appears a moment before the datapath takes it as a port: wait for both.
        let what = format!("{target}: {dev} enslaved to ovs-system");
        let (link, ofport) = wait_for(Duration::from_secs(20), &what, || {
            let l = link_details(vm, dev).filter(|l| l["master"] == "ovs-system")?;
            let v = bed.sb.vsctl_json("Interface", None, "ofport,options");
            let of = v["data"].as_array()?.iter().find_map(|r| {
                r[1].to_string()
                    .contains(&format!("\"{remote_ip}\""))
                    .then(|| r[0].as_i64())
                    .flatten()
                    .filter(|o| *o > 0)
            })?;
            Some((l, of))
        });
        // The mark flow sends the copies to this target.
        bed.wait_flows(&format!("{target}: mark flow"), |f| {
            f.len() == 1 && f[0].contains(&format!("set_field:{ofport:#x}->reg9"))
        });
        assert_eq!(link["linkinfo"]["info_kind"], kind, "{target}: {link}");
        assert_eq!(link["master"], "ovs-system", "{target}: {link}");
        assert_eq!(
            link["linkinfo"]["info_data"]["external"],
            serde_json::json!(true),
            "{target}: collect-metadata mode: {link}"
        );
        match dev {
            "vxlan_sys_4789" | "genev_sys_6081" => {
                let port = if dev.starts_with("vxlan") { 4789 } else { 6081 };
                assert!(
                    udp_bound(vm, "/proc/net/udp", port) || udp_bound(vm, "/proc/net/udp6", port),
                    "{target}: UDP {port} bound in the VM's namespace"
                );
            }
            _ => {}
        }
        let cap = e2e::Capture::start(&remote, "eth0", filter, bed.sb.path("cap.txt"));
        assert_eq!(bed.ping(0, 1, 5), 5, "{target}: the Pods' own ping");
        let n = cap.count();
        // The first copy may wait on the underlay's neighbour resolution.
        assert!(n >= 4, "{target}: {n} copies of 5 reached the remote end");
        seen.push(format!("{kind} {n}/5"));
    }
    for module in ["vxlan", "geneve", "ip_gre", "ip6_gre"] {
        assert!(
            std::path::Path::new(&format!("/sys/module/{module}")).exists(),
            "module {module} loaded"
        );
    }
    eprintln!("tunnel copies at the remote end: {}", seen.join(", "));
}

/// An underlay whose MTU (1500) leaves no room for VXLAN's 50 bytes around a full-size frame
/// of the Pods (1500): the kernel's vxlan device sends with DF and does not fragment, so the
/// copy of a full-size packet is lost while a smaller one arrives. The device also answers
/// the copy with an ICMP "fragmentation needed" into the datapath, made to look as if the
/// Pod's peer sent it; the target port's drop flow takes it (its counter moves), so the Pod
/// never lowers its path MTU to its peer and its full-size traffic keeps flowing. (Before
/// the drop flow, `NORMAL` delivered the ICMP: every later full-size packet from Pod pa to
/// pb failed with "message too long, mtu=1450" for ten minutes.)
#[test]
fn an_underlay_without_room_for_the_tunnel_loses_only_the_copy() {
    if !kernel_only(
        "an_underlay_without_room_for_the_tunnel_loses_only_the_copy",
        "userspace tunnels have no MTU logic (docs/datapath.md#6-mtu)",
    ) {
        return;
    }
    let (bed, remote) = tunnel_bed();
    let args = bed.tether_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let _t = common::Tether::start(bed.sb.ns(), &args, &bed.sb.path("tether.log"));
    bed.write("tc.yaml", &mirror_to("vxlan: {remoteIP: 198.51.100.2}"));
    bed.wait_flows("the mark flow", |f| f.len() == 1);
    let target = wait_for(Duration::from_secs(20), "the vxlan port's ofport", || {
        let v = bed.sb.vsctl_json("Interface", None, "name,ofport,type");
        v["data"].as_array()?.iter().find_map(|r| {
            (r[2] == "vxlan")
                .then(|| r[1].as_i64())
                .flatten()
                .filter(|o| *o > 0)
        })
    });
    let pa = &bed.pods[0].ns;
    let ping = |size: &str| {
        let out = pa
            .command(&[
                "ping",
                "-c",
                "5",
                "-i",
                "0.2",
                "-W",
                "1",
                "-M",
                "do",
                "-s",
                size,
                "203.0.113.2",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    let small = e2e::Capture::start(
        &remote,
        "eth0",
        "udp dst port 4789",
        bed.sb.path("small.txt"),
    );
    let text = ping("1400");
    assert!(text.contains(" 5 received"), "{text}");
    let n = small.count();
    assert!(n >= 4, "{n} copies of 5 small packets arrived");

    let large = e2e::Capture::start(
        &remote,
        "eth0",
        "udp dst port 4789",
        bed.sb.path("large.txt"),
    );
    for round in 0..2 {
        let text = ping("1472");
        assert!(
            text.contains(" 5 received") && !text.contains("message too long"),
            "round {round}: the Pods' own full-size ping: {text}"
        );
    }
    assert_eq!(
        large.count(),
        0,
        "a copy too large for the underlay arrived"
    );
    let route = pa.exec(&["ip", "route", "get", "203.0.113.2"]);
    assert!(!route.contains("mtu"), "Pod pa learnt a path MTU: {route}");
    let drops = bed.sb.ofctl(&[
        "-O",
        "OpenFlow15",
        "dump-flows",
        "br-int",
        &format!("table=0,in_port={target}"),
    ]);
    let n_packets: u64 = drops
        .split("n_packets=")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        n_packets >= 1,
        "the device's ICMP was taken by the target's drop flow: {drops}"
    );
    eprintln!(
        "vxlan over a 1500-byte underlay: small copies {n}/5, large 0/10, ICMPs dropped at the target {n_packets}"
    );
}

/// ovsdb-server `kill -9`ed with ovs-vswitchd alive: the kernel datapath and the daemon's
/// upcall handling go on without the database, so the VM stays reachable, new flows
/// included (a ping to an address not pinged before); ovsdb-server back, tether reconnects
/// and nothing changes.
#[test]
fn a_dead_ovsdb_server_leaves_the_vm_reachable() {
    if !kernel_only(
        "a_dead_ovsdb_server_leaves_the_vm_reachable",
        "the userspace datapath stops forwarding while ovs-vswitchd waits for the database",
    ) {
        return;
    }
    let (bed, t) = attached();
    let sb = &bed.sb;
    let installed = flows(sb);
    let ping = Pinger::start(
        &bed.peer,
        "192.0.2.10",
        Duration::from_millis(100),
        sb.path("ping.txt"),
    );
    std::thread::sleep(Duration::from_secs(1));
    sb.kill9("ovsdb-server");
    let killed = now();
    std::thread::sleep(Duration::from_secs(3));
    // A flow the datapath has not seen: an upcall, handled without the database.
    assert_clean_ping(&bed.peer, "2001:db8:1::10");
    let restarted = now();
    sb.start_ovsdb();
    t.wait_log("ovsdb remote=", Duration::from_secs(20));
    wait_for(Duration::from_secs(20), "tether connected again", || {
        (bed.status()["ovsdb"]["connected"] == true).then_some(())
    });
    assert_eq!(flows(sb), installed);
    let pings = ping.stop();
    eprintln!(
        "ovsdb-server dead {:.1} s: lost {:?} of {}",
        restarted - killed,
        pings.lost_between(killed, restarted),
        pings.sent_between(killed, restarted)
    );
    assert_eq!(pings.lost(), Vec::<u64>::new(), "{}", pings.text);
}

/// The host port's MAC changed behind OVS's back (`ip link set … address`): ovs-vswitchd
/// puts `Interface.mac` back on its next reconfiguration, which a link change itself
/// triggers (an rtnetlink notification), and tether's identity check says so.
#[test]
fn a_host_port_mac_changed_behind_ovs_is_set_back() {
    if !kernel_only(
        "a_host_port_mac_changed_behind_ovs_is_set_back",
        "the internal port is a tap on the userspace datapath, not ovs-vswitchd's own device",
    ) {
        return;
    }
    let (bed, _t) = attached();
    let vm = bed.sb.ns();
    vm.ip(&["link", "set", "eth1", "address", "02:00:00:00:99:99"]);
    let mac = wait_for(Duration::from_secs(10), "the host port's MAC back", || {
        let l = json_of(&vm.ip(&["-j", "link", "show", "dev", "eth1"]));
        let mac = l[0]["address"].as_str().unwrap_or("").to_string();
        (mac == "02:00:00:00:01:10").then_some(mac)
    });
    assert_eq!(mac, "02:00:00:00:01:10");
    wait_for(Duration::from_secs(10), "identity verified", || {
        (bed.status()["external_node"]["identity"] == "verified").then_some(())
    });
    assert_clean_ping(&bed.peer, "192.0.2.10");
}

/// What tether refuses to do (docs/datapath.md#2-changing-an-existing-bridges-datapath_type),
/// done by hand to a `system` bridge: `datapath_type=netdev` makes ovs-vswitchd destroy the
/// bridge and build it again, so an internal port is a new device (another ifindex) and
/// the address it carried is gone.
#[test]
fn changing_a_bridges_datapath_type_recreates_its_internal_ports() {
    if !kernel_only(
        "changing_a_bridges_datapath_type_recreates_its_internal_ports",
        "it starts from a `system` bridge",
    ) {
        return;
    }
    let sb = Sandbox::start();
    sb.add_bridge("br-int");
    sb.add_internal_port("br-int", "p1", &[]);
    let vm = sb.ns();
    let index = |vm: &Netns| {
        wait_for(Duration::from_secs(10), "p1's netdev", || {
            vm.try_ip(&["-j", "link", "show", "dev", "p1"])
                .ok()
                .map(|s| json_of(&s)[0]["ifindex"].as_u64().unwrap_or(0))
        })
    };
    let before = index(vm);
    vm.sh("ip link set p1 up; ip addr add 192.0.2.20/24 dev p1");
    sb.vsctl(&["set", "Bridge", "br-int", "datapath_type=netdev"]);
    let after = wait_for(Duration::from_secs(20), "p1 re-created", || {
        let i = index(vm);
        (i != before).then_some(i)
    });
    let addrs = vm.ip(&["-br", "addr", "show", "dev", "p1"]);
    assert!(!addrs.contains("192.0.2.20"), "{addrs}");
    eprintln!("datapath_type system -> netdev: p1 index {before} -> {after}, address gone");
}

/// How the ping measures above read ping's output (pure; runs everywhere).
#[test]
fn ping_output_is_read_as_ping_prints_it() {
    let text = "PING 192.0.2.10 (192.0.2.10) 56(84) bytes of data.
[100.500000] 64 bytes from 192.0.2.10: icmp_seq=1 ttl=64 time=0.1 ms
[100.900000] 64 bytes from 192.0.2.10: icmp_seq=3 ttl=64 time=0.1 ms
[100.950000] 64 bytes from 192.0.2.10: icmp_seq=3 ttl=64 time=0.1 ms (DUP!)

--- 192.0.2.10 ping statistics ---
4 packets transmitted, 2 received, +1 duplicates, 50% packet loss, time 300ms
";
    let p = common::pinger::parse(text, 100.5, Duration::from_millis(100));
    assert_eq!(p.sent, 4);
    assert_eq!(
        p.answered.iter().map(|(s, t)| (*s, *t)).collect::<Vec<_>>(),
        [(1, 100.5), (3, 100.9)]
    );
    assert_eq!(p.lost(), [2, 4]);
    // A lost one sits between its answered neighbours (100.7), the last one an interval
    // after the last answer (101.0).
    assert!((p.sent_at(2) - 100.7).abs() < 1e-9, "{}", p.sent_at(2));
    assert!((p.sent_at(4) - 101.0).abs() < 1e-9, "{}", p.sent_at(4));
    assert_eq!(p.lost_between(100.6, 100.8), [2]);
    assert_eq!(p.sent_between(100.4, 100.95), 3);
}
