//! The VM test bed shared by the ExternalNode end-to-end tests (library- and binary-level):
//! the sandbox namespace is the VM (ovs-vswitchd runs there) with `eth1` (02:00:00:00:01:10,
//! MTU 1450, 192.0.2.10/24, 2001:db8:1::10/64, default routes via the peer) and `eth2`
//! (198.51.100.10/24, 2001:db8:3::10/64), veths to a `peer` namespace; IPv6 DAD off in both
//! and tx offload off on the peer ends (docs/datapath.md#8-test-harness). Plus the
//! probes: `ip -j` snapshots, pings, a TCP transfer, flow and OVSDB readers.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Netns, Sandbox, wait_for};

mod bed;
#[allow(unused_imports)] // not every test binary drives the daemon
pub use bed::*;
use tether::controller::externalnode::RECORD_KEY;

pub const PY: &str = "/usr/bin/python3";

pub fn sysctl_dad_off(ns: &Netns) {
    ns.sh("sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0");
}

/// The VM and its peer (see the module doc).
pub fn setup() -> (Sandbox, Netns) {
    setup_with(crate::common::SandboxOpts::default())
}

/// [`setup`] on a sandbox started with `opts` (`dummy` for benchmarks' Pod ports).
pub fn setup_with(opts: crate::common::SandboxOpts) -> (Sandbox, Netns) {
    let sb = Sandbox::start_with(opts);
    sb.add_bridge("br-int");
    let peer = Netns::new("peer");
    let vm = sb.ns();
    sysctl_dad_off(vm);
    sysctl_dad_off(&peer);
    vm.veth_to("eth1", &peer, "eth0");
    vm.veth_to("eth2", &peer, "eth2p");
    vm.sh("ip link set eth1 down
         ip link set eth1 address 02:00:00:00:01:10 mtu 1450
         ip link set eth1 up
         ip addr add 192.0.2.10/24 dev eth1
         ip -6 addr add 2001:db8:1::10/64 dev eth1
         ip route add default via 192.0.2.1 dev eth1
         ip -6 route add default via 2001:db8:1::1 dev eth1
         ip link set eth2 down
         ip link set eth2 address 02:00:00:00:01:20
         ip link set eth2 up
         ip addr add 198.51.100.10/24 dev eth2
         ip -6 addr add 2001:db8:3::10/64 dev eth2");
    peer.sh("ip link set eth0 mtu 1450
         ip addr add 192.0.2.1/24 dev eth0
         ip -6 addr add 2001:db8:1::1/64 dev eth0
         ip addr add 198.51.100.1/24 dev eth2p
         ip -6 addr add 2001:db8:3::1/64 dev eth2p
         ethtool -K eth0 tx off >/dev/null
         ethtool -K eth2p tx off >/dev/null");
    (sb, peer)
}

pub fn json_of(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("bad JSON ({e}): {s}"))
}

/// `ip -j link/addr/route` of one device: what "restored exactly" is compared on.
pub fn snapshot(ns: &Netns, dev: &str) -> Value {
    json!({
        "link": json_of(&ns.ip(&["-j", "link", "show", "dev", dev])),
        "addr": json_of(&ns.ip(&["-j", "addr", "show", "dev", dev])),
        "route4": json_of(&ns.ip(&["-j", "route", "show", "table", "main", "dev", dev])),
        "route6": json_of(&ns.ip(&["-j", "-6", "route", "show", "table", "main", "dev", dev])),
    })
}

/// `dev` equals its snapshot from before the takeover. ovs-vswitchd turns PROMISC on
/// for the ports it reads with AF_PACKET and turns it off again when it closes the netdev,
/// a moment after the port row is gone; that is the only thing waited for.
pub fn assert_restored(ns: &Netns, dev: &str, before: &Value) {
    let promisc = |s: &Value| {
        s["link"][0]["flags"]
            .as_array()
            .unwrap()
            .contains(&json!("PROMISC"))
    };
    let now = wait_for(
        Duration::from_secs(5),
        "ovs-vswitchd to drop PROMISC",
        || {
            let s = snapshot(ns, dev);
            (!promisc(&s)).then_some(s)
        },
    );
    assert_eq!(&now, before, "{dev} not restored exactly");
}

/// Keep the kernel's IPv4 stack off the uplink, or set its values to 0. Redundant: tether
/// sets `arp_ignore=8`, `rp_filter=1` (and `disable_ipv6=1`) on the uplink itself while it
/// holds it on the netdev datapath, and gives the NIC its own values back whatever the
/// uplink then has (`tests/externalnode/sidedoor.rs` never calls this). Kept for the tests
/// that do. Only on the netdev datapath: the kernel one takes the uplink's frames itself.
pub fn neutralise_uplink(vm: &Netns, uplink: &str, on: bool) {
    if crate::common::kernel_datapath() {
        return;
    }
    let (arp, rp) = if on { (8, 1) } else { (0, 0) };
    vm.exec(&[
        "sysctl",
        "-qw",
        &format!("net.ipv4.conf.{uplink}.arp_ignore={arp}"),
        &format!("net.ipv4.conf.{uplink}.rp_filter={rp}"),
    ]);
}

pub fn ping(from: &Netns, to: &str) -> String {
    from.exec(&["ping", "-c", "3", "-i", "0.2", "-W", "2", to])
}

pub fn assert_clean_ping(from: &Netns, to: &str) {
    let out = ping(from, to);
    assert!(out.contains("3 received"), "ping {to}: {out}");
    assert!(!out.contains("DUP!"), "ping {to} got duplicates: {out}");
}

pub const TCP_SERVER: &str = "import socket,sys
fam=socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET
s=socket.socket(fam)
s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)
s.bind((sys.argv[1],int(sys.argv[2])))
s.listen(1)
s.settimeout(10)
c,_=s.accept()
c.sendall(b'x'*int(sys.argv[3]))
c.close()";

pub const TCP_CLIENT: &str = "import socket,sys,time
end=time.time()+5
while True:
    try:
        c=socket.create_connection((sys.argv[1],int(sys.argv[2])),timeout=5)
        break
    except OSError:
        if time.time()>end: raise
        time.sleep(0.05)
n=0
while True:
    b=c.recv(65536)
    if not b: break
    n+=len(b)
print(n)";

/// A 200 kB TCP transfer from the VM's `addr` to the peer.
pub fn tcp_transfer(vm: &Netns, peer: &Netns, addr: &str) {
    let mut server = vm
        .command(&[PY, "-c", TCP_SERVER, addr, "5001", "200000"])
        .spawn()
        .unwrap();
    let got = peer.exec(&[PY, "-c", TCP_CLIENT, addr, "5001"]);
    assert!(server.wait().unwrap().success());
    assert_eq!(got.trim(), "200000", "TCP transfer from {addr}");
}

/// `n_packets` of the EN pair flows, by in_port.
pub fn pair_packets(sb: &Sandbox) -> BTreeMap<u32, u64> {
    let out = sb.ofctl(&[
        "-O",
        "OpenFlow15",
        "dump-flows",
        "br-int",
        "cookie=0x80000000000/0xff0000000000,table=70",
    ]);
    let field = |l: &str, k: &str| -> Option<u64> {
        let at = l.find(k)? + k.len();
        l[at..]
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    out.lines()
        .filter_map(|l| {
            let port = u32::try_from(field(l, "in_port=")?).ok()?;
            Some((port, field(l, "n_packets=")?))
        })
        .collect()
}

pub fn ofport(sb: &Sandbox, name: &str) -> u32 {
    sb.vsctl(&["get", "Interface", name, "ofport"])
        .trim()
        .parse()
        .unwrap()
}

/// The ExternalNode flows in OVS's canonical text, cookies cut off (they carry the round).
pub fn en_flows(sb: &Sandbox) -> Vec<String> {
    let mut v: Vec<String> = sb
        .dump_flows("br-int", Some("cookie=0x80000000000/0xff0000000000"))
        .into_iter()
        .map(|l| match l.split_once(", ") {
            Some((c, rest)) if c.starts_with("cookie=") => rest.to_string(),
            _ => l,
        })
        .collect();
    v.sort();
    v
}

pub fn expected_en_flows(host: u32, uplink: u32) -> Vec<String> {
    let mut v = vec![
        "table=30, priority=200,icmp6,ipv6_dst=2001:db8:2::/48 actions=goto_table:70".to_string(),
        format!(
            "table=70, priority=190,in_port={host} actions=set_field:{uplink:#x}->reg1,set_field:0x200000/0x600000->reg0,goto_table:80"
        ),
        format!(
            "table=70, priority=190,in_port={uplink} actions=set_field:{host:#x}->reg1,set_field:0x200000/0x600000->reg0,goto_table:80"
        ),
        "table=90, priority=200,tcp,nw_src=203.0.113.0/24,tp_dst=22 actions=goto_table:130"
            .to_string(),
    ];
    v.sort();
    v
}

pub fn port_ids(sb: &Sandbox, port: &str) -> Value {
    let v = sb.vsctl_json("Port", Some(port), "external_ids");
    v["data"][0][0].clone()
}

pub fn host_ids(sb: &Sandbox, uplink: &str, ips: &str) -> Value {
    // Empty while the uplink port does not exist (a poller then simply sees no match).
    let uuid = sb
        .try_vsctl(&["get", "Port", uplink, "_uuid"])
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let entity = tether::controller::externalnode::external_entity_name("vm1", "");
    json!([
        "map",
        [
            ["antrea-type", "host"],
            ["entity-name", entity],
            ["entity-namespace", "default"],
            ["ip-address", ips],
            ["uplink-name", uplink],
            ["uplink-port", uuid],
        ]
    ])
}

pub fn bridge_record(sb: &Sandbox) -> Option<String> {
    sb.try_vsctl(&[
        "get",
        "Bridge",
        "br-int",
        &format!("external_ids:{RECORD_KEY}"),
    ])
    .ok()
}

/// An agent config with one IPv4 and one IPv6 policy-bypass rule (Antrea's keys).
pub const CONFIG: &str = "externalNode:
  externalNodeNamespace: default
  policyBypassRules:
  - {direction: ingress, protocol: tcp, cidr: 203.0.113.0/24, port: 22}
  - {direction: egress, protocol: icmp, cidr: \"2001:db8:2::/48\"}
";

/// This node's ExternalNode (`vm1`) holding the VM NIC's IPv4 and IPv6 addresses.
pub const EN_YAML: &str = "apiVersion: crd.antrea.io/v1alpha1
kind: ExternalNode
metadata:
  name: vm1
  namespace: default
spec:
  interfaces:
  - ips: [\"192.0.2.10\", \"2001:db8:1::10\"]
";
