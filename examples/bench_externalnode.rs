//! Benchmark group `externalnode` (scripts/bench.sh), docs/design.md#benchmarks:
//! - `en_takeover_to_ping`: the ExternalNode appears → the takeover is done and the VM
//!   answers IPv4 ping through OVS;
//! - `en_delete_to_restored`: the ExternalNode is deleted → the NIC is plain again and
//!   answers ping.
//!
//! Baseline: the same takeover and undo by hand with `ip`, `ovs-vsctl` and `ovs-ofctl`,
//! run in the same sandbox, alternating with tether, median of 5.
//!
//! How "answers ping" is timed: the peer pings every 10 ms with `ping -D` (timestamped
//! replies) throughout; a measure ends at the first reply received after the operation
//! returned. IPv6 DAD is off (excluded, as the issue asks); strict reverse-path filtering
//! in the VM keeps the kernel from answering through the uplink
//! (docs/datapath.md#8-test-harness), so a reply after a takeover has crossed OVS.
//!
//! On the kernel datapath (`TETHER_TEST_DATAPATH=system`: scripts/bench.sh runs the group
//! in the kernel tier's VM too) the names end in `_system`.
//!
//! The controller must run inside the VM namespace (netlink acts on the caller's
//! namespace), so this program re-runs itself there with `BENCH_EN_CHILD` set.

#![allow(clippy::unwrap_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;
use tether::controller::LiveBridge;
use tether::controller::externalnode::{EnConfig, EnController};
use tether::k8s::{ExternalNode, ExternalNodeSpec, NetworkInterface, ObjectMeta, Stores};
use tether::netlink::Rtnl;
use tether::openflow::{Category, OfFlows, OfFlowsConfig, Owner};
use tether::ovsdb::{BridgeDb, Client, ClientOptions, Remote};

use common::{Netns, Sandbox, privileged};

const CHILD: &str = "BENCH_EN_CHILD";
const ROUNDS: usize = 5;

fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Timestamps of ping replies, collected by a reader thread.
struct Pinger {
    child: std::process::Child,
    replies: Arc<Mutex<Vec<f64>>>,
}

impl Pinger {
    fn start(peer: &str, to: &str) -> Pinger {
        let mut child = Command::new("ip")
            .args(["netns", "exec", peer, "ping", "-D", "-n", "-i", "0.01", to])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let replies = Arc::new(Mutex::new(Vec::new()));
        let r = replies.clone();
        std::thread::Builder::new()
            .name("bench-ping".into())
            .spawn(move || {
                for line in out.lines().map_while(Result::ok) {
                    if !line.contains("bytes from") {
                        continue;
                    }
                    let ts = line
                        .strip_prefix('[')
                        .and_then(|l| l.split(']').next())
                        .and_then(|t| t.parse::<f64>().ok());
                    if let Some(ts) = ts {
                        r.lock().unwrap().push(ts);
                    }
                }
            })
            .unwrap();
        Pinger { child, replies }
    }

    /// Seconds from `t0` to the first reply after `after` (both UNIX seconds).
    fn first_reply_after(&self, t0: f64, after: f64) -> f64 {
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(ts) = self.replies.lock().unwrap().iter().find(|ts| **ts > after) {
                return ts - t0;
            }
            assert!(Instant::now() < end, "no ping reply within 10 s");
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for Pinger {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn en() -> ExternalNode {
    ExternalNode {
        metadata: ObjectMeta {
            name: "vm1".into(),
            namespace: "default".into(),
            ..ObjectMeta::default()
        },
        spec: Ok(ExternalNodeSpec {
            interfaces: vec![NetworkInterface {
                name: String::new(),
                ips: vec![
                    "192.0.2.10".parse().unwrap(),
                    "2001:db8:1::10".parse().unwrap(),
                ],
            }],
        }),
    }
}

const BASELINE_TAKEOVER: &str = r#"
ip link set eth1 down; ip link set eth1 name 'eth1~'; ip link set 'eth1~' up
ovs-vsctl --timeout=10 add-port br-int 'eth1~' -- set Port 'eth1~' external_ids:antrea-type=uplink \
  -- add-port br-int eth1 -- set Interface eth1 type=internal 'mac="02:00:00:00:01:10"' mtu_request=1450 \
  -- set Port eth1 external_ids:antrea-type=host
ip addr flush dev 'eth1~' scope global; ip link set eth1 up
ip addr add 192.0.2.10/24 dev eth1; ip -6 addr add 2001:db8:1::10/64 dev eth1
ip route replace default via 192.0.2.1 dev eth1; ip -6 route replace default via 2001:db8:1::1 dev eth1
H=$(ovs-vsctl --timeout=10 get Interface eth1 ofport); U=$(ovs-vsctl --timeout=10 get Interface 'eth1~' ofport)
printf 'table=70,priority=190,in_port=%s,actions=set_field:%s->reg1,set_field:0x200000/0x600000->reg0,goto_table:80\ntable=70,priority=190,in_port=%s,actions=set_field:%s->reg1,set_field:0x200000/0x600000->reg0,goto_table:80\n' $H $U $U $H \
  | ovs-ofctl --timeout=10 -O OpenFlow15 --bundle add-flows br-int -
"#;

const BASELINE_UNDO: &str = r#"
H=$(ovs-vsctl --timeout=10 get Interface eth1 ofport); U=$(ovs-vsctl --timeout=10 get Interface 'eth1~' ofport)
ovs-ofctl --timeout=10 -O OpenFlow15 del-flows br-int "table=70,in_port=$H"
ovs-ofctl --timeout=10 -O OpenFlow15 del-flows br-int "table=70,in_port=$U"
ovs-vsctl --timeout=10 del-port br-int eth1 -- del-port br-int 'eth1~'
ip link set 'eth1~' down; ip link set 'eth1~' name eth1; ip link set eth1 up
ip addr add 192.0.2.10/24 dev eth1; ip -6 addr add 2001:db8:1::10/64 dev eth1
ip route replace default via 192.0.2.1 dev eth1; ip -6 route replace default via 2001:db8:1::1 dev eth1
"#;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// `name`, with `_system` on the kernel datapath (`TETHER_TEST_DATAPATH=system`, as
/// scripts/bench.sh runs this group again in the kernel tier's VM).
fn line(name: &str, tether: f64, baseline: f64) {
    let suffix = if common::kernel_datapath() {
        "_system"
    } else {
        ""
    };
    println!(
        "bench {name}{suffix}: tether={:.1}ms baseline={:.1}ms ratio={:.2}",
        tether * 1e3,
        baseline * 1e3,
        tether / baseline
    );
}

fn child(dir: &str, peer: &str) {
    let dir = std::path::PathBuf::from(dir);
    let client = Arc::new(
        Client::connect(
            Remote::Unix(dir.join("db.sock")),
            ClientOptions::default(),
            Duration::from_secs(10),
        )
        .unwrap(),
    );
    let bridge = Arc::new(LiveBridge::new(
        BridgeDb::ensure(client, "br-int", common::datapath()).unwrap(),
    ));
    let flows =
        Arc::new(OfFlows::start(OfFlowsConfig::new(dir.join("br-int.mgmt"), "br-int", 1)).unwrap());
    flows.wait_connected(Duration::from_secs(10)).unwrap();
    flows
        .apply(
            Owner::new(Category::DEFAULT, 0),
            tether::pipeline::base_flows(),
        )
        .unwrap();
    let stores = Stores::default();
    stores.external_nodes.replace(Vec::new());
    let cfg = EnConfig {
        node_name: "vm1".into(),
        bridge: "br-int".into(),
        namespace: "default".into(),
        ovs_rundir: dir.clone(),
        datapath_type: common::datapath().into(),
        ..EnConfig::default()
    };
    let datapath = Arc::new(tether::controller::VswitchdDatapath::new(
        &cfg.ovs_rundir,
        &cfg.datapath_type,
    ));
    let ctl = EnController::new(
        cfg,
        stores.clone(),
        bridge,
        flows.clone(),
        Arc::new(Rtnl::connect().unwrap()),
        datapath,
    );
    ctl.recover().unwrap();
    // Let the bridge settle (ensure() re-keys the datapath id, which resets connections).
    std::thread::sleep(Duration::from_millis(500));
    let pinger = Pinger::start(peer, "192.0.2.10");
    let script = |s: &str| {
        let out = Command::new("bash")
            .args(["-ec", s])
            .env("OVS_RUNDIR", &dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "baseline script failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let (mut t_take, mut t_del, mut b_take, mut b_del) = (vec![], vec![], vec![], vec![]);
    for _ in 0..ROUNDS {
        let t0 = now_secs();
        stores.external_nodes.replace(vec![en()]);
        ctl.sync().unwrap();
        t_take.push(pinger.first_reply_after(t0, now_secs()));

        let t0 = now_secs();
        stores.external_nodes.replace(Vec::new());
        ctl.sync().unwrap();
        t_del.push(pinger.first_reply_after(t0, now_secs()));

        let t0 = now_secs();
        script(BASELINE_TAKEOVER);
        b_take.push(pinger.first_reply_after(t0, now_secs()));

        let t0 = now_secs();
        script(BASELINE_UNDO);
        b_del.push(pinger.first_reply_after(t0, now_secs()));
    }
    line("en_takeover_to_ping", median(t_take), median(b_take));
    line("en_delete_to_restored", median(t_del), median(b_del));
}

fn main() {
    if let Ok(spec) = std::env::var(CHILD) {
        let v: serde_json::Value = serde_json::from_str(&spec).unwrap();
        child(v["dir"].as_str().unwrap(), v["peer"].as_str().unwrap());
        return;
    }
    if !privileged("bench_externalnode") {
        return;
    }
    let sb = Sandbox::start();
    sb.add_bridge("br-int");
    let peer = Netns::new("peer");
    let vm = sb.ns();
    for ns in [vm, &peer] {
        ns.sh("sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0");
    }
    // Strict reverse-path filtering: the kernel drops what arrives on the uplink for the
    // host's addresses, so replies only come through OVS (module doc).
    vm.sh("sysctl -qw net.ipv4.conf.all.rp_filter=1 net.ipv4.conf.default.rp_filter=1");
    vm.veth_to("eth1", &peer, "eth0");
    vm.sh("ip link set eth1 down
         ip link set eth1 address 02:00:00:00:01:10 mtu 1450
         ip link set eth1 up
         ip addr add 192.0.2.10/24 dev eth1
         ip -6 addr add 2001:db8:1::10/64 dev eth1
         ip route add default via 192.0.2.1 dev eth1
         ip -6 route add default via 2001:db8:1::1 dev eth1");
    peer.sh("ip link set eth0 mtu 1450
         ip addr add 192.0.2.1/24 dev eth0
         ip -6 addr add 2001:db8:1::1/64 dev eth0");
    let exe = std::env::current_exe().unwrap();
    let spec = json!({"dir": sb.dir(), "peer": peer.name()}).to_string();
    let out = vm
        .command(&[exe.to_str().unwrap()])
        .env(CHILD, spec)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    print!("{}", String::from_utf8_lossy(&out.stdout));
    assert!(out.status.success(), "benchmark child failed");
}
