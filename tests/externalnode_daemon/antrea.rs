//! A VM whose NIC Antrea's agent took over: tether adopts it without redoing the takeover.

use super::*;

/// A VM the way Antrea's agent leaves it after taking its NIC over
/// (docs/antrea-compat.md#port-external-ids, docs/antrea-compat.md#externalnode-flows,
/// docs/antrea-compat.md#takeover-and-restore-sequence): `eth1` renamed `eth1~` and
/// attached as the uplink (`antrea-type=uplink`), an internal host port `eth1` with the
/// NIC's MAC and MTU and Antrea's external_ids, the addresses and routes on it, Antrea's VM
/// pipeline (tables 0–16, its cookies, round 3 in `roundNum`) on the bridge.
fn antrea_takeover(sb: &Sandbox) {
    let vm = sb.ns();
    vm.sh("ip link set eth1 down
         ip link set eth1 name eth1~
         ip addr flush dev eth1~
         ip link set eth1~ up");
    sb.vsctl(&[
        "add-port",
        "br-int",
        "eth1~",
        "--",
        "set",
        "Port",
        "eth1~",
        "external_ids:antrea-type=uplink",
    ]);
    let uplink = sb
        .vsctl(&["get", "Port", "eth1~", "_uuid"])
        .trim()
        .to_string();
    sb.vsctl(&[
        "add-port",
        "br-int",
        "eth1",
        "--",
        "set",
        "Interface",
        "eth1",
        "type=internal",
        "mac=\"02:00:00:00:01:10\"",
        "mtu_request=1450",
        "--",
        "set",
        "Port",
        "eth1",
        "external_ids:antrea-type=host",
        "external_ids:uplink-name=eth1~",
        &format!("external_ids:uplink-port={uplink}"),
        "external_ids:entity-name=vm1",
        "external_ids:entity-namespace=default",
        "external_ids:ip-address=\"192.0.2.10,2001:db8:1::10\"",
    ]);
    wait_for(Duration::from_secs(5), "host port netdev", || {
        vm.try_ip(&["link", "show", "eth1"]).ok()
    });
    vm.sh("ip link set eth1 up
         ip addr add 192.0.2.10/24 dev eth1
         ip -6 addr add 2001:db8:1::10/64 dev eth1
         ip route add default via 192.0.2.1 dev eth1
         ip -6 route add default via 2001:db8:1::1 dev eth1");
    neutralise_uplink(vm, "eth1~", true);
    // Antrea's agent leaves the uplink's IPv6 on (tether turns it off when it adopts the
    // NIC); on the userspace datapath the kernel would answer through it as well. Harness
    // only.
    if !common::kernel_datapath() {
        vm.sh("sysctl -qw net.ipv6.conf.eth1~.disable_ipv6=1");
    }
    let (h, u) = (ofport(sb, "eth1"), ofport(sb, "eth1~"));
    let d = "cookie=0x3000000000000";
    let en = "cookie=0x3080000000000";
    let mut flows = vec![
        format!("{d},table=0,priority=200,ip actions=goto_table:1"),
        format!("{d},table=0,priority=190 actions=goto_table:16"),
        format!("{d},table=0,priority=0 actions=drop"),
        format!("{en},table=1,priority=200,ip actions=ct(table=2,zone=65520)"),
        format!("{en},table=2,priority=210,ct_state=+inv+trk,ip actions=drop"),
        format!(
            "{en},table=8,priority=200,ip,in_port={h} actions=set_field:0x200000/0x600000->reg0,set_field:{u}->reg1,goto_table:9"
        ),
        format!(
            "{en},table=8,priority=200,ip,in_port={u} actions=set_field:0x200000/0x600000->reg0,set_field:{h}->reg1,goto_table:9"
        ),
        format!(
            "{en},table=14,priority=200,ct_state=+new+trk,ip actions=ct(commit,table=15,zone=65520)"
        ),
        format!("{en},table=15,priority=200,reg0=0x200000/0x600000 actions=output:NXM_NX_REG1[]"),
        format!("{d},table=15,priority=0 actions=drop"),
        format!("{en},table=16,priority=200,in_port={h} actions=output:{u}"),
        format!("{en},table=16,priority=200,in_port={u} actions=output:{h}"),
        format!("{d},table=16,priority=0 actions=drop"),
    ];
    for t in 1..15 {
        flows.push(format!(
            "{d},table={t},priority=0 actions=goto_table:{}",
            t + 1
        ));
    }
    let file = sb.path("antrea-flows.txt");
    std::fs::write(&file, flows.join("\n") + "\n").unwrap();
    sb.ofctl(&[
        "-O",
        "OpenFlow15",
        "add-flows",
        "br-int",
        file.to_str().unwrap(),
    ]);
    sb.vsctl(&["set", "Bridge", "br-int", "external_ids:roundNum=3"]);
}

/// Adopt, do not redo: tether started on a VM whose NIC Antrea's agent took over (the same
/// ExternalNode) keeps the links, the addresses and the ports as they are and replaces
/// Antrea's flows by its own in one atomic bundle. A ping at 50 pps across the switch-over
/// loses nothing; `ip monitor link` sees no link go down.
#[test]
fn adopts_a_vm_antreas_agent_took_over() {
    if !privileged("adopts_a_vm_antreas_agent_took_over") {
        return;
    }
    let (sb, peer) = setup();
    let vm = sb.ns();
    antrea_takeover(&sb);
    // Antrea's pipeline forwards, both families.
    assert_clean_ping(&peer, "192.0.2.10");
    assert_clean_ping(&peer, "2001:db8:1::10");
    let ports = (
        sb.vsctl(&["get", "Port", "eth1", "_uuid"]),
        sb.vsctl(&["get", "Port", "eth1~", "_uuid"]),
    );
    let host_before = snapshot(vm, "eth1");
    let antrea_round = "cookie=0x3000000000000/0xffff000000000000";
    assert!(!sb.dump_flows("br-int", Some(antrea_round)).is_empty());

    let dir = sb.dir().join("manifests");
    std::fs::create_dir_all(&dir).unwrap();
    write_en(&dir, Some(EN_YAML));
    let monitor = vm
        .command(&["ip", "-o", "monitor", "link"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // 50 pps for 8 s, across the whole switch-over.
    let ping = peer
        .command(&[
            "ping",
            "-c",
            "400",
            "-i",
            "0.02",
            "-W",
            "1",
            "-q",
            "192.0.2.10",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let args = manifests_args(&dir);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let d = Daemon::start(&sb, &args, None);
    wait_attached(&sb, "192.0.2.10,2001:db8:1::10", "adopted");
    wait_for(Duration::from_secs(10), "Antrea's round gone", || {
        sb.dump_flows("br-int", Some(antrea_round))
            .is_empty()
            .then_some(())
    });
    let out = ping.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("400 packets transmitted, 400 received, 0% packet loss"),
        "{text}\n{}",
        log_tail(&sb)
    );
    let mut monitor = monitor;
    let _ = monitor.kill();
    let events = String::from_utf8_lossy(&monitor.wait_with_output().unwrap().stdout).into_owned();
    assert!(
        !events
            .lines()
            .any(|l| l.contains("eth1") && !l.contains(",UP")),
        "a link went down:\n{events}"
    );
    // Nothing moved: the same ports, the same host port configuration; one switch-over.
    assert_eq!(
        (
            sb.vsctl(&["get", "Port", "eth1", "_uuid"]),
            sb.vsctl(&["get", "Port", "eth1~", "_uuid"])
        ),
        ports
    );
    assert_eq!(snapshot(vm, "eth1"), host_before);
    let log = std::fs::read_to_string(sb.path("tether.log")).unwrap();
    assert!(!log.contains("taking over"), "{log}");
    assert!(
        log.contains("openflow replaced round 3 in one bundle"),
        "{log}"
    );
    assert_eq!(
        sb.vsctl(&["get", "Bridge", "br-int", "external_ids:roundNum"])
            .trim(),
        "\"4\""
    );
    assert_clean_ping(&peer, "2001:db8:1::10");
    // The uplink has IPv6 off, as after tether's own takeover.
    assert_eq!(
        vm.exec(&["sysctl", "-n", "net.ipv6.conf.eth1~.disable_ipv6"])
            .trim(),
        "1"
    );
    d.stop(&sb);
}
