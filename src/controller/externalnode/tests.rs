//! Unit tests with fakes: Antrea's seed cases (docs/antrea-compat.md#seed-test-cases), rollback at every
//! step, and recovery from every recorded step.
//!
//! This file holds what they share: the `Fx` fixture (a VM with two NICs over the `Sim` of
//! OVS in `tests/sim.rs`), its scenario steps, and the assertions on a NIC taken over or
//! given back. The tests are in `tests/`, one file per behaviour.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::*;
use crate::controller::Bridge;
use crate::k8s::{ExternalNode, ExternalNodeSpec, NetworkInterface, ObjectMeta, Stores};
use crate::netlink::{
    Addr, Call, DevSysctl, FakeLinks, Link, LinkError, Links, Prefix, Route, RouteProtocol, Scope,
};
use crate::openflow::{Category, Flow, Owner};
use crate::ovsdb::Uuid;
use crate::pipeline::externalnode::uplink_pair_flows;
use crate::testing::FakeFlows;

mod sim;
use sim::{FakeDatapath, Sim};

const MAC1: [u8; 6] = [2, 0, 0, 0, 1, 0x10];
const MAC2: [u8; 6] = [2, 0, 0, 0, 1, 0x20];

struct Fx {
    links: Arc<FakeLinks>,
    sim: Arc<Sim>,
    flows: Arc<FakeFlows>,
    dp: Arc<FakeDatapath>,
    stores: Stores,
    ctl: EnController,
    eth1: u32,
    eth2: u32,
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn rules() -> Vec<PolicyBypassRule> {
    vec![
        PolicyBypassRule::from_json(
            &serde_json::json!({"direction":"ingress","protocol":"tcp","cidr":"203.0.113.0/24","port":22}),
            "r[0]",
        )
        .unwrap(),
    ]
}

fn controller(fx: &Fx) -> EnController {
    new_controller(&fx.sim, &fx.flows, &fx.dp, &fx.stores, &fx.links)
}

fn new_controller(
    sim: &Arc<Sim>,
    flows: &Arc<FakeFlows>,
    dp: &Arc<FakeDatapath>,
    stores: &Stores,
    links: &Arc<FakeLinks>,
) -> EnController {
    new_controller_in(sim, flows, dp, stores, links, None)
}

/// [`new_controller`] keeping held configurations in `state_dir` too.
fn new_controller_in(
    sim: &Arc<Sim>,
    flows: &Arc<FakeFlows>,
    dp: &Arc<FakeDatapath>,
    stores: &Stores,
    links: &Arc<FakeLinks>,
    state_dir: Option<std::path::PathBuf>,
) -> EnController {
    let cfg = EnConfig {
        state_dir,
        node_name: "vm1".into(),
        namespace: "default".into(),
        bypass_rules: rules(),
        // The kernel datapath only where the Sim models it (the uplink's master).
        datapath_type: if sim.kernel.is_some() {
            "system"
        } else {
            "netdev"
        }
        .into(),
        ..EnConfig::default()
    };
    EnController::new(
        cfg,
        stores.clone(),
        sim.clone(),
        flows.clone(),
        links.clone(),
        dp.clone(),
    )
}

fn add_addr(links: &FakeLinks, idx: u32, s: &str, len: u8, label: Option<&str>) {
    let mut a = Addr::new(idx, ip(s), len);
    a.label = label.map(str::to_string);
    links.add_addr(&a).unwrap();
}

fn add_gw(links: &FakeLinks, idx: u32, gw: &str, metric: u32) {
    let g = ip(gw);
    let mut r = Route::new(Prefix::default_for(g), idx);
    r.gateway = Some(g);
    r.metric = metric;
    links.add_route(&r).unwrap();
}

/// A VM with `eth1` (v4+v6, default routes and a connected-style route) and `eth2`.
fn fixture_with(nic1: &str) -> Fx {
    fixture_opts(nic1, false)
}

/// [`fixture`] on the kernel datapath model: the uplink is enslaved to `ovs-system`.
fn kernel_fixture() -> Fx {
    fixture_opts("eth1", true)
}

fn fixture_opts(nic1: &str, kernel: bool) -> Fx {
    let links = Arc::new(FakeLinks::new());
    let eth1 = links.add_link(nic1, MAC1, 1450, true);
    let eth2 = links.add_link("eth2", MAC2, 1500, true);
    add_addr(&links, eth1, "192.0.2.10", 24, Some(nic1));
    add_addr(&links, eth1, "2001:db8:1::10", 64, None);
    let mut conn = Route::new(Prefix::new(ip("192.0.2.0"), 24), eth1);
    conn.protocol = RouteProtocol::KERNEL;
    conn.scope = Scope::LINK;
    links.add_route(&conn).unwrap();
    add_gw(&links, eth1, "192.0.2.1", 100);
    add_gw(&links, eth1, "2001:db8:1::1", 1024);
    add_addr(&links, eth2, "198.51.100.10", 24, Some("eth2"));
    add_addr(&links, eth2, "2001:db8:2::10", 64, None);
    let kernel = kernel.then(|| links.add_link("ovs-system", [2, 0, 0, 0, 0, 0xaa], 1500, false));
    links.clear_calls();
    let sim = Arc::new(Sim {
        links: links.clone(),
        kernel,
        ..Sim::default()
    });
    sim.bridge.add_port("br-int", &[], None);
    let flows = Arc::new(FakeFlows::default());
    let dp = Arc::new(FakeDatapath {
        sim: sim.clone(),
        calls: Mutex::new(Vec::new()),
    });
    let stores = Stores::default();
    let ctl = new_controller(&sim, &flows, &dp, &stores, &links);
    Fx {
        links,
        sim,
        flows,
        dp,
        stores,
        ctl,
        eth1,
        eth2,
    }
}

fn fixture() -> Fx {
    fixture_with("eth1")
}

/// A NIC with IPv6 on (the fixture's links show no sysctls unless given some), so the
/// takeover turns it off on the uplink.
fn fixture_ipv6_on() -> Fx {
    let fx = fixture();
    fx.links
        .put_sysctl(fx.eth1, DevSysctl::Ipv6DisableIpv6, "0");
    fx.links.set_default_sysctl(DevSysctl::Ipv6DisableIpv6, "0");
    fx
}

fn en(name: &str, ifname: &str, ips: &[&str]) -> ExternalNode {
    ExternalNode {
        metadata: ObjectMeta {
            name: name.into(),
            namespace: "default".into(),
            ..ObjectMeta::default()
        },
        spec: Ok(ExternalNodeSpec {
            interfaces: vec![NetworkInterface {
                name: ifname.into(),
                ips: ips.iter().map(|s| ip(s)).collect(),
            }],
        }),
    }
}

fn set_en(fx: &Fx, e: Option<ExternalNode>) {
    fx.stores.external_nodes.replace(e.into_iter().collect());
}

/// The addresses `eth1` has in the fixture: the ExternalNode most tests ask for.
const ETH1_IPS: &[&str] = &["192.0.2.10", "2001:db8:1::10"];

/// The scenario steps most tests share.
impl Fx {
    /// The NIC's state now, to compare with once it is given back.
    fn nic_now(&self) -> NicState {
        nic_state(&self.links, self.eth1)
    }

    /// ExternalNode `vm1` asks for the NIC holding `ips` (no interface name); no sync yet.
    fn want(&self, ips: &[&str]) {
        set_en(self, Some(en("vm1", "", ips)));
    }

    /// [`Fx::want`], then a sync that must succeed (it takes the NIC over).
    fn take_over(&self, ips: &[&str]) {
        self.want(ips);
        self.ctl.sync().unwrap();
    }

    /// The ExternalNode deleted (listed as absent), then a sync that must succeed.
    fn delete_en(&self) {
        set_en(self, None);
        self.ctl.sync().unwrap();
    }
}

type NicState = (Link, Vec<Addr>, Vec<Route>);

/// One link's state in the kernel model (its addresses and routes, in order).
fn nic_state(links: &FakeLinks, index: u32) -> NicState {
    let (all, addrs, routes) = links.snapshot();
    let l = all.into_iter().find(|l| l.index == index).unwrap();
    // The kernel keeps one list per family (`ip addr` shows IPv4, then IPv6); the fake
    // keeps one list, so order across families means nothing.
    let mut addrs: Vec<Addr> = addrs.into_iter().filter(|a| a.ifindex == index).collect();
    addrs.sort_by_key(Addr::is_ipv6);
    (
        l,
        addrs,
        routes.into_iter().filter(|r| r.oif == index).collect(),
    )
}

fn port_names(fx: &Fx) -> Vec<String> {
    fx.sim.bridge.names().into_iter().collect()
}

fn record(fx: &Fx) -> Option<String> {
    fx.sim
        .bridge
        .bridge_ids
        .lock()
        .unwrap()
        .get(RECORD_KEY)
        .cloned()
}

fn pair_flows(fx: &Fx) -> Vec<Vec<Flow>> {
    fx.flows
        .owners
        .lock()
        .unwrap()
        .iter()
        .filter(|(o, _)| o.category == Category::EXTERNAL_NODE && o.object != 0)
        .map(|(_, f)| f.clone())
        .collect()
}

/// Assert the VM is exactly as before any takeover and tether left nothing behind.
fn assert_pristine(fx: &Fx, before: &NicState) {
    assert_eq!(&nic_state(&fx.links, fx.eth1), before);
    assert_eq!(port_names(fx), vec!["br-int".to_string()]);
    assert_eq!(record(fx), None);
    assert!(pair_flows(fx).is_empty());
    assert!(fx.links.link_by_name("eth1~").is_err());
}

fn assert_attached(fx: &Fx) {
    let (l, addrs, routes) = nic_state(&fx.links, fx.eth1);
    assert_eq!(l.name, "eth1~");
    assert!(addrs.is_empty(), "uplink keeps no address: {addrs:?}");
    assert!(routes.is_empty(), "uplink keeps no route: {routes:?}");
    let host = fx.links.link_by_name("eth1").unwrap();
    assert_ne!(host.index, fx.eth1);
    assert_eq!((host.mac, host.mtu, host.is_up()), (Some(MAC1), 1450, true));
    let (_, haddrs, hroutes) = nic_state(&fx.links, host.index);
    let locals: Vec<String> = haddrs.iter().map(|a| a.to_string()).collect();
    assert_eq!(locals, ["192.0.2.10/24", "2001:db8:1::10/64"]);
    assert_eq!(hroutes.len(), 3);
    assert_eq!(
        port_names(fx),
        vec!["br-int".to_string(), "eth1".into(), "eth1~".into()]
    );
    assert_eq!(record(fx), None);
    let up = fx.sim.bridge.port("eth1~").unwrap();
    let hp = fx.sim.bridge.port("eth1").unwrap();
    assert_eq!(
        pair_flows(fx),
        vec![{
            let mut f = uplink_pair_flows(
                u32::try_from(hp.ofport).unwrap(),
                u32::try_from(up.ofport).unwrap(),
            );
            f.sort();
            f
        }]
    );
}

mod crash_recovery;
mod giveback;
mod refusals;
mod restart;
mod restore;
mod rollback;
mod sidedoor;
mod sysctls;
mod takeover;
mod udev;
