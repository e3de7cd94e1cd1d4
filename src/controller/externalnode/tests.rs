//! Unit tests with fakes: Antrea's seed cases (docs/antrea-compat.md#seed-test-cases), rollback at every
//! step, and recovery from every recorded step.
//!
//! `Sim` plays OVS on top of the recording `FakeBridge`: an internal port gets a netdev in
//! the `FakeLinks` kernel model (as ovs-vswitchd creates its tap) and loses it when the
//! port is deleted — or keeps it (`linger`), as a busy datapath does. It can fail or
//! "crash" (panic) at the n-th record write, before or after the write lands.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::controller::interfaces::Interfaces;
use crate::controller::{Bridge, Datapath};
use crate::k8s::{ExternalNode, ExternalNodeSpec, NetworkInterface, ObjectMeta, Stores};
use crate::netlink::{
    Addr, Call, FakeLinks, Link, LinkError, Links, Prefix, Route, RouteProtocol, Scope,
};
use crate::netlink::{DevSysctl, LinkFlags};
use crate::openflow::{Category, Flow, Owner};
use crate::ovsdb::{OvsdbError, PortKind, PortSpec, Uuid};
use crate::pipeline::externalnode::uplink_pair_flows;
use crate::testing::{FakeBridge, FakeFlows};

const MAC1: [u8; 6] = [2, 0, 0, 0, 1, 0x10];
const MAC2: [u8; 6] = [2, 0, 0, 0, 1, 0x20];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Crash {
    BeforeWrite,
    AfterWrite,
}

#[derive(Default)]
struct Sim {
    bridge: FakeBridge,
    links: Arc<FakeLinks>,
    internal: Mutex<BTreeSet<String>>,
    linger: AtomicBool,
    /// Internal netdevs that outlived their port (`linger`), until `dpctl/del-if`.
    lingering: Mutex<BTreeSet<String>>,
    /// The kernel datapath model: a system port's netdev gets `ovs-system` as its master,
    /// which goes only when the switch has applied the delete (`delete_ports_applied`) —
    /// or, with `stuck`, only through `dpctl/del-if`; with `held`, never.
    kernel: Option<u32>,
    stuck: AtomicBool,
    held: AtomicBool,
    /// udev (MACAddressPolicy=) rewriting a new internal port's MAC.
    udev_mac: Option<[u8; 6]>,
    /// udev (AlternativeNamesPolicy=) giving the renamed NIC its old name as an altname
    /// late: after the rename step, before the host port's device is made (once).
    udev_late_altname: AtomicBool,
    /// Internal ports refused because a link had their name as an altname.
    name_taken: Mutex<BTreeSet<String>>,
    /// Record writes (Some values) seen so far.
    writes: AtomicUsize,
    fail_write: Mutex<Option<usize>>,
    crash_write: Mutex<Option<(usize, Crash)>>,
}

impl Bridge for Sim {
    fn interfaces(&self) -> Arc<Interfaces> {
        self.bridge.interfaces()
    }

    fn create_port(&self, spec: &PortSpec) -> Result<Uuid, OvsdbError> {
        if let PortKind::Internal { .. } = &spec.kind {
            if self.udev_late_altname.swap(false, Ordering::SeqCst) {
                if let Ok(up) = self
                    .links
                    .link_by_name(&crate::netlink::uplink_name(&spec.name))
                {
                    self.links.add_altname(up.index, &spec.name);
                }
            }
            // The kernel refuses a device whose name is another link's altname; OVS says so
            // in the Interface's error (ofport -1).
            let taken = self
                .links
                .links()
                .unwrap()
                .iter()
                .any(|l| l.altnames.contains(&spec.name));
            let mut refuse = self.bridge.refuse.lock().unwrap();
            let mut auto = self.name_taken.lock().unwrap();
            if taken {
                refuse.insert(
                    spec.name.clone(),
                    format!(
                        "could not add network device {} to ofproto (File exists)",
                        spec.name
                    ),
                );
                auto.insert(spec.name.clone());
            } else if auto.remove(&spec.name) {
                refuse.remove(&spec.name);
            }
        }
        let uuid = self.bridge.create_port(spec)?;
        if let (PortKind::System, Some(dp)) = (&spec.kind, self.kernel) {
            if let Ok(l) = self.links.link_by_name(&spec.name) {
                self.links.edit_link(l.index, |l| l.master = Some(dp));
            }
        }
        if let PortKind::Internal { mac } = &spec.kind {
            let refused = self.bridge.refuse.lock().unwrap().contains_key(&spec.name);
            if !refused {
                let mac = mac
                    .as_deref()
                    .and_then(crate::mac::parse)
                    .unwrap_or([2, 0, 0, 0, 0, 0xee]);
                let mac = self.udev_mac.unwrap_or(mac);
                self.links
                    .add_link(&spec.name, mac, spec.mtu_request.unwrap_or(1500), false);
                self.internal.lock().unwrap().insert(spec.name.clone());
            }
        }
        Ok(uuid)
    }

    fn ofport(&self, name: &str) -> Result<u32, OvsdbError> {
        self.bridge.ofport(name)
    }

    fn delete_ports(&self, ports: &[Uuid]) -> Result<(), OvsdbError> {
        let names = self.bridge.names_of(ports);
        self.bridge.delete_ports(ports)?;
        for n in names {
            if self.internal.lock().unwrap().remove(&n) {
                if self.linger.load(Ordering::SeqCst) {
                    self.lingering.lock().unwrap().insert(n);
                } else if let Ok(l) = self.links.link_by_name(&n) {
                    self.links.remove_link(l.index);
                }
            }
        }
        Ok(())
    }

    fn delete_ports_applied(&self, ports: &[Uuid], _: Duration) -> Result<(), OvsdbError> {
        let system: Vec<String> = self
            .bridge
            .ports
            .lock()
            .unwrap()
            .iter()
            .filter(|p| ports.contains(&p.uuid) && p.if_type.is_empty())
            .map(|p| p.name.clone())
            .collect();
        self.delete_ports(ports)?;
        if self.kernel.is_some() && !self.stuck.load(Ordering::SeqCst) {
            for n in system {
                if let Ok(l) = self.links.link_by_name(&n) {
                    self.links.edit_link(l.index, |l| l.master = None);
                }
            }
        }
        Ok(())
    }

    fn set_port_external_ids(
        &self,
        port: &str,
        ids: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError> {
        self.bridge.set_port_external_ids(port, ids)
    }

    fn set_interface_options(
        &self,
        name: &str,
        options: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError> {
        self.bridge.set_interface_options(name, options)
    }

    fn bridge_external_id(&self, key: &str) -> Result<Option<String>, OvsdbError> {
        self.bridge.bridge_external_id(key)
    }

    fn set_bridge_external_id(&self, key: &str, value: Option<&str>) -> Result<(), OvsdbError> {
        if value.is_some() {
            let n = self.writes.fetch_add(1, Ordering::SeqCst);
            if *self.fail_write.lock().unwrap() == Some(n) {
                return Err(OvsdbError::Disconnected);
            }
            let crash = *self.crash_write.lock().unwrap();
            if crash == Some((n, Crash::BeforeWrite)) {
                panic!("simulated crash before record write {n}");
            }
            self.bridge.set_bridge_external_id(key, value)?;
            if crash == Some((n, Crash::AfterWrite)) {
                panic!("simulated crash after record write {n}");
            }
            return Ok(());
        }
        self.bridge.set_bridge_external_id(key, value)
    }
}

/// `dpctl/del-if` on the `Sim`'s datapath: removes a lingering internal netdev, or
/// releases a system port's netdev from `ovs-system` (unless `held`).
struct FakeDatapath {
    sim: Arc<Sim>,
    calls: Mutex<Vec<String>>,
}

impl Datapath for FakeDatapath {
    fn delete_interface(&self, name: &str) -> Result<bool, String> {
        self.calls.lock().unwrap().push(name.to_string());
        let links = &self.sim.links;
        if self.sim.lingering.lock().unwrap().remove(name) {
            if let Ok(l) = links.link_by_name(name) {
                links.remove_link(l.index);
                return Ok(true);
            }
        }
        match links.link_by_name(name) {
            Ok(l) if l.master.is_some() && self.sim.kernel.is_some() => {
                if !self.sim.held.load(Ordering::SeqCst) {
                    links.edit_link(l.index, |l| l.master = None);
                }
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

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

#[test]
fn external_entity_names_as_antrea() {
    // pkg/controller/externalnode/controller_test.go:92
    assert_eq!(external_entity_name("vm2", "ens192"), "vm2-e8be5");
    assert_eq!(external_entity_name("vm1", ""), "vm1");
    // printf eth1 | sha1sum → 3f1b9b2f…
    let h = external_entity_name("vm1", "eth1");
    assert_eq!(h.len(), "vm1-".len() + 5);
    assert!(h.starts_with("vm1-"));
}

#[test]
fn attach_info_keys() {
    // Antrea GetOVSAttachInfo: six keys, empty values left out.
    let ids = host_external_ids(
        "eth1~",
        &Uuid("u-1".into()),
        "vm1-abcde",
        "default",
        &[ip("192.0.2.10"), ip("2001:db8:1::10")],
    );
    let want: BTreeMap<String, String> = [
        ("antrea-type", "host"),
        ("uplink-name", "eth1~"),
        ("uplink-port", "u-1"),
        ("entity-name", "vm1-abcde"),
        ("entity-namespace", "default"),
        ("ip-address", "192.0.2.10,2001:db8:1::10"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(ids, want);
    let sparse = host_external_ids("eth1~", &Uuid(String::new()), "vm1", "", &[]);
    assert_eq!(
        sparse.keys().cloned().collect::<Vec<_>>(),
        ["antrea-type", "entity-name", "uplink-name"]
    );
}

#[test]
fn nothing_happens_before_the_store_has_listed() {
    let fx = fixture();
    let before = nic_state(&fx.links, fx.eth1);
    fx.ctl.sync().unwrap();
    assert_pristine(&fx, &before);
    assert_eq!(fx.ctl.status().step, "waiting");
    // Listed and absent: still nothing to do.
    set_en(&fx, None);
    fx.ctl.sync().unwrap();
    assert_pristine(&fx, &before);
}

#[test]
fn create_success() {
    let fx = fixture();
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
    fx.ctl.sync().unwrap();
    assert_attached(&fx);
    // The exact ports (Antrea TestCreateOVSPortsAndFlowsSuccess).
    assert_eq!(
        fx.sim.bridge.take_log(),
        ["create eth1~ system", "create eth1 internal"]
    );
    let up = fx.sim.bridge.port("eth1~").unwrap();
    assert_eq!(
        up.external_ids,
        BTreeMap::from([("antrea-type".to_string(), "uplink".to_string())])
    );
    let hp = fx.sim.bridge.port("eth1").unwrap();
    assert_eq!(
        hp.external_ids,
        host_external_ids(
            "eth1~",
            &up.uuid,
            "vm1",
            "default",
            &[ip("192.0.2.10"), ip("2001:db8:1::10")]
        )
    );
    // The kernel calls: rename (down, name, up), then the move.
    let calls = fx.links.calls();
    assert_eq!(
        &calls[..3],
        &[
            Call::SetDown(fx.eth1),
            Call::SetName(fx.eth1, "eth1~".into()),
            Call::SetUp(fx.eth1)
        ]
    );
    // Bypass flows are installed too.
    assert_eq!(fx.flows.of(Owner::new(Category::EXTERNAL_NODE, 0)).len(), 1);
    let st = fx.ctl.status();
    assert_eq!(st.step, "attached");
    assert_eq!(st.nic.as_deref(), Some("eth1"));
    assert_eq!(st.uplink.as_deref(), Some("eth1~"));
    assert_eq!(st.entity_name.as_deref(), Some("vm1"));
    assert_eq!(st.addresses, ["192.0.2.10", "2001:db8:1::10"]);
    assert_eq!(st.host_ofport, Some(u32::try_from(hp.ofport).unwrap()));
    assert_eq!(st.uplink_ofport, Some(u32::try_from(up.ofport).unwrap()));
    assert_eq!(st.last_error, None);
    // A second sync changes nothing (Antrea TestAddInterface "skip").
    fx.ctl.sync().unwrap();
    assert_eq!(fx.sim.bridge.take_log(), Vec::<String>::new());
}

#[test]
fn interface_lookup_by_ip() {
    let fx = fixture();
    // An IP on no link is dropped; the rest decide.
    set_en(
        &fx,
        Some(en("vm1", "eth1", &["192.0.2.10", "203.0.113.99"])),
    );
    fx.ctl.sync().unwrap();
    let hp = fx.sim.bridge.port("eth1").unwrap();
    assert_eq!(hp.external_ids["ip-address"], "192.0.2.10");
    assert_eq!(
        hp.external_ids["entity-name"],
        external_entity_name("vm1", "eth1")
    );

    let fx = fixture();
    set_en(&fx, Some(en("vm1", "", &["203.0.113.99"])));
    let e = fx.ctl.sync().unwrap_err();
    assert_eq!(
        e,
        EnError::NicNotFound {
            ips: vec![ip("203.0.113.99")]
        }
    );
    assert_eq!(e.to_string(), "cannot find interface via IPs 203.0.113.99");
    assert_eq!(fx.ctl.status().last_error, Some(e.to_string()));

    let fx = fixture();
    let before = nic_state(&fx.links, fx.eth1);
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "198.51.100.10"])));
    let e = fx.ctl.sync().unwrap_err();
    assert_eq!(
        e.to_string(),
        "the IPs are on different interfaces: 192.0.2.10 on eth1, 198.51.100.10 on eth2"
    );
    assert_pristine(&fx, &before);
}

#[test]
fn invalid_spec_is_an_error_naming_the_en() {
    let fx = fixture();
    let mut bad = en("vm1", "", &["192.0.2.10"]);
    bad.spec = Err(crate::k8s::ValidationError {
        errors: vec![crate::k8s::FieldError {
            path: "spec.interfaces".into(),
            message: "required".into(),
        }],
    });
    set_en(&fx, Some(bad));
    let e = fx.ctl.sync().unwrap_err();
    assert!(
        matches!(&e, EnError::Invalid { en, .. } if en == "default/vm1"),
        "{e}"
    );
    assert!(e.is_permanent());
    // A NIC not found (yet) may appear later: retried.
    assert!(!EnError::NicNotFound { ips: vec![] }.is_permanent());
}

#[test]
fn update_ports_data_when_ips_or_entity_change() {
    let fx = fixture();
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10"])));
    fx.ctl.sync().unwrap();
    fx.sim.bridge.take_log();
    // The VM gets another address on its (host) interface and the EN lists it.
    let host = fx.links.link_by_name("eth1").unwrap();
    add_addr(&fx.links, host.index, "192.0.2.11", 24, Some("eth1"));
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "192.0.2.11"])));
    fx.ctl.sync().unwrap();
    assert_eq!(fx.sim.bridge.take_log(), ["set_external_ids eth1"]);
    let hp = fx.sim.bridge.port("eth1").unwrap();
    assert_eq!(hp.external_ids["ip-address"], "192.0.2.10,192.0.2.11");
    // Only the interface name (so the entity name) changes.
    set_en(
        &fx,
        Some(en("vm1", "ens192", &["192.0.2.10", "192.0.2.11"])),
    );
    fx.ctl.sync().unwrap();
    assert_eq!(fx.sim.bridge.take_log(), ["set_external_ids eth1"]);
    let hp = fx.sim.bridge.port("eth1").unwrap();
    assert_eq!(hp.external_ids["entity-name"], "vm1-e8be5");
    assert_eq!(fx.ctl.status().addresses, ["192.0.2.10", "192.0.2.11"]);
    // No change: no write.
    fx.ctl.sync().unwrap();
    assert_eq!(fx.sim.bridge.take_log(), Vec::<String>::new());
}

#[test]
fn delete_restores_the_nic_exactly() {
    let fx = fixture();
    let before = nic_state(&fx.links, fx.eth1);
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
    fx.ctl.sync().unwrap();
    assert_attached(&fx);
    set_en(&fx, None);
    fx.ctl.sync().unwrap();
    assert_pristine(&fx, &before);
    assert_eq!(fx.ctl.status().step, "waiting");
    assert!(fx.dp.calls.lock().unwrap().is_empty());
    // The bypass flows stay: they belong to the config, not to the EN.
    assert_eq!(fx.flows.of(Owner::new(Category::EXTERNAL_NODE, 0)).len(), 1);
}

#[test]
fn an_address_added_while_attached_goes_back_with_the_nic() {
    let fx = fixture();
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10"])));
    fx.ctl.sync().unwrap();
    let host = fx.links.link_by_name("eth1").unwrap();
    add_addr(&fx.links, host.index, "192.0.2.11", 24, Some("eth1"));
    set_en(&fx, None);
    fx.ctl.sync().unwrap();
    let (l, addrs, _) = nic_state(&fx.links, fx.eth1);
    assert_eq!(l.name, "eth1");
    let locals: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
    assert_eq!(
        locals,
        ["192.0.2.10/24", "192.0.2.11/24", "2001:db8:1::10/64"]
    );
}

#[test]
fn different_interface_takes_the_new_one_then_restores_the_old() {
    let fx = fixture();
    let before1 = nic_state(&fx.links, fx.eth1);
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10"])));
    fx.ctl.sync().unwrap();
    fx.sim.bridge.take_log();
    set_en(&fx, Some(en("vm1", "", &["198.51.100.10"])));
    fx.ctl.sync().unwrap();
    assert_eq!(
        fx.sim.bridge.take_log(),
        [
            "create eth2~ system",
            "create eth2 internal",
            "delete eth1~,eth1"
        ]
    );
    assert_eq!(nic_state(&fx.links, fx.eth1), before1);
    assert_eq!(fx.links.link_by_index(fx.eth2).unwrap().name, "eth2~");
    assert_eq!(
        port_names(&fx),
        vec!["br-int".to_string(), "eth2".into(), "eth2~".into()]
    );
    assert_eq!(pair_flows(&fx).len(), 1);
    assert_eq!(fx.ctl.status().nic.as_deref(), Some("eth2"));
}

#[test]
fn a_15_byte_nic_name_gets_the_short_uplink_name() {
    let fx = fixture_with("abcdefghijklmno");
    let before = nic_state(&fx.links, fx.eth1);
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10"])));
    fx.ctl.sync().unwrap();
    assert_eq!(
        fx.links.link_by_index(fx.eth1).unwrap().name,
        "abcdefgh~2938dc"
    );
    let hp = fx.sim.bridge.port("abcdefghijklmno").unwrap();
    assert_eq!(hp.external_ids["uplink-name"], "abcdefgh~2938dc");
    set_en(&fx, None);
    fx.ctl.sync().unwrap();
    assert_eq!(nic_state(&fx.links, fx.eth1), before);
}

#[test]
fn a_lingering_host_netdev_is_removed_through_the_datapath() {
    let fx = fixture();
    let before = nic_state(&fx.links, fx.eth1);
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10"])));
    fx.ctl.sync().unwrap();
    fx.sim.linger.store(true, Ordering::SeqCst);
    set_en(&fx, None);
    fx.ctl.sync().unwrap();
    assert_eq!(*fx.dp.calls.lock().unwrap(), ["eth1"]);
    assert_pristine(&fx, &before);
    // It polled the way Antrea does (every 50 ms, 2 s) before asking the datapath.
    let pauses = fx
        .links
        .calls()
        .iter()
        .filter(|c| matches!(c, Call::Pause(_)))
        .count();
    assert_eq!(pauses, 40);
}

#[test]
fn replay_reinstalls_flows_with_fresh_ofports() {
    let fx = fixture();
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10"])));
    fx.ctl.sync().unwrap();
    // ovs-vswitchd restarted: no flows, ports renumbered.
    fx.flows.owners.lock().unwrap().clear();
    for p in fx.sim.bridge.ports.lock().unwrap().iter_mut() {
        p.ofport += 10;
    }
    fx.ctl.replay().unwrap();
    assert_attached(&fx);
    let host_of = fx.sim.bridge.port("eth1").unwrap().ofport;
    assert!(host_of > 10);
    assert_eq!(fx.flows.of(Owner::new(Category::EXTERNAL_NODE, 0)).len(), 1);
}

#[test]
fn restart_rebuilds_state_from_ovsdb() {
    let fx = fixture();
    set_en(
        &fx,
        Some(en("vm1", "ens192", &["192.0.2.10", "2001:db8:1::10"])),
    );
    fx.ctl.sync().unwrap();
    fx.sim.bridge.take_log();
    fx.flows.owners.lock().unwrap().clear();
    // A new process: only OVSDB, the kernel and the store remain.
    let ctl = controller(&fx);
    ctl.recover().unwrap();
    let st = ctl.status();
    assert_eq!(st.step, "attached");
    assert_eq!(st.nic.as_deref(), Some("eth1"));
    assert_eq!(st.entity_name.as_deref(), Some("vm1-e8be5"));
    assert_eq!(st.addresses, ["192.0.2.10", "2001:db8:1::10"]);
    assert_eq!(fx.flows.of(Owner::new(Category::EXTERNAL_NODE, 0)).len(), 1);
    ctl.sync().unwrap();
    assert_eq!(fx.sim.bridge.take_log(), Vec::<String>::new());
    assert_attached(&fx);
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

/// How many changing kernel calls a successful takeover makes.
fn takeover_link_calls() -> usize {
    let fx = fixture_ipv6_on();
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
    fx.ctl.sync().unwrap();
    fx.links
        .calls()
        .iter()
        .filter(|c| !matches!(c, Call::Pause(_)))
        .count()
}

#[test]
fn a_kernel_failure_at_every_takeover_call_rolls_back() {
    let n = takeover_link_calls();
    assert!(n >= 10, "{n}");
    for k in 0..n {
        let fx = fixture_ipv6_on();
        let before = nic_state(&fx.links, fx.eth1);
        let sysctls = crate::netlink::read_sysctls(fx.links.as_ref(), "eth1").unwrap();
        set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
        fx.links.fail_call(
            k,
            LinkError::Permission {
                what: format!("injected failure {k}"),
                errno: 1,
            },
        );
        let e = fx.ctl.sync().unwrap_err();
        assert!(
            matches!(&e, EnError::RolledBack { rollback, .. } if rollback.is_empty()),
            "call {k}: {e}"
        );
        // The kernel renames an address's label with its link (inetdev_changename, seen
        // in tests/netlink_kernel.rs); the fake does not, so undo that here.
        for a in fx.links.addrs(Some(fx.eth1)).unwrap() {
            if a.label.as_deref() == Some("eth1~") {
                fx.links.del_addr(&a).unwrap();
                let mut b = a.clone();
                b.label = Some("eth1".into());
                fx.links.add_addr(&b).unwrap();
            }
        }
        assert_pristine(&fx, &before);
        assert_eq!(
            crate::netlink::read_sysctls(fx.links.as_ref(), "eth1").unwrap(),
            sysctls,
            "call {k}: the NIC's sysctls (the uplink's IPv6 among them)"
        );
        // And the next attempt succeeds.
        fx.ctl.sync().unwrap();
        assert_attached(&fx);
    }
}

#[test]
fn an_ovs_failure_at_every_takeover_step_rolls_back() {
    // Uplink port refused, host port refused (ofport -1), flows refused.
    for case in ["uplink", "host", "flows"] {
        let fx = fixture();
        let before = nic_state(&fx.links, fx.eth1);
        set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
        match case {
            "uplink" => {
                fx.sim.bridge.refuse.lock().unwrap().insert(
                    "eth1~".into(),
                    "could not open network device eth1~ (No such device)".into(),
                );
            }
            "host" => {
                fx.sim.bridge.refuse.lock().unwrap().insert(
                    "eth1".into(),
                    "could not open network device eth1 (Invalid argument)".into(),
                );
            }
            _ => *fx.flows.fail_owner.lock().unwrap() = Some(|o| o.object != 0),
        }
        let e = fx.ctl.sync().unwrap_err();
        assert!(matches!(&e, EnError::RolledBack { .. }), "{case}: {e}");
        assert_pristine(&fx, &before);
    }
    // A record write failing at each step (OVSDB gone mid-way).
    for k in 0..4 {
        let fx = fixture();
        let before = nic_state(&fx.links, fx.eth1);
        set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
        *fx.sim.fail_write.lock().unwrap() = Some(k);
        let e = fx.ctl.sync().unwrap_err();
        assert!(e.to_string().contains("record step"), "write {k}: {e}");
        assert_pristine(&fx, &before);
    }
}

#[test]
fn flows_failure_after_the_move_gives_the_addresses_back() {
    // Antrea F8: its rollback left the VM without addresses.
    let fx = fixture();
    let before = nic_state(&fx.links, fx.eth1);
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
    *fx.flows.fail_owner.lock().unwrap() = Some(|o| o.object != 0);
    let e = fx.ctl.sync().unwrap_err();
    assert!(
        e.to_string()
            .starts_with("taking over eth1 failed: uplink flows eth1<->eth1~"),
        "{e}"
    );
    assert_pristine(&fx, &before);
    *fx.flows.fail_owner.lock().unwrap() = None;
    fx.ctl.sync().unwrap();
    assert_attached(&fx);
}

/// Run `f` until the simulated crash at record write `k` (counted from now).
fn crash_during(fx: &Fx, k: usize, how: Crash, f: impl FnOnce()) {
    fx.sim.writes.store(0, Ordering::SeqCst);
    *fx.sim.crash_write.lock().unwrap() = Some((k, how));
    let r = catch_unwind(AssertUnwindSafe(f));
    assert!(r.is_err(), "no crash at write {k} {how:?}");
    *fx.sim.crash_write.lock().unwrap() = None;
}

#[test]
fn recovery_rolls_back_a_takeover_crashed_at_every_step() {
    for k in 0..4 {
        for how in [Crash::BeforeWrite, Crash::AfterWrite] {
            let fx = fixture();
            let before = nic_state(&fx.links, fx.eth1);
            set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
            crash_during(&fx, k, how, || {
                let _ = fx.ctl.sync();
            });
            if how == Crash::AfterWrite || k > 0 {
                assert!(record(&fx).is_some(), "write {k} {how:?}");
            }
            // The restarted process.
            let ctl = controller(&fx);
            ctl.recover().unwrap();
            assert_pristine(&fx, &before);
            ctl.sync().unwrap();
            assert_attached(&fx);
        }
    }
}

#[test]
fn recovery_finishes_a_restore_crashed_at_every_step() {
    for k in 0..4 {
        for how in [Crash::BeforeWrite, Crash::AfterWrite] {
            let fx = fixture();
            let before = nic_state(&fx.links, fx.eth1);
            set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
            fx.ctl.sync().unwrap();
            set_en(&fx, None);
            crash_during(&fx, k, how, || {
                let _ = fx.ctl.sync();
            });
            let rec = record(&fx).map(|r| Record::from_json(&r).unwrap());
            if how == Crash::AfterWrite || k > 0 {
                assert_eq!(rec.as_ref().map(|r| r.phase), Some(Phase::Restore));
            }
            let ctl = controller(&fx);
            ctl.recover().unwrap();
            if rec.is_some() {
                assert_pristine(&fx, &before);
            }
            ctl.sync().unwrap();
            assert_pristine(&fx, &before);
        }
    }
}

#[test]
fn a_restore_record_carries_the_host_config() {
    let fx = fixture();
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
    fx.ctl.sync().unwrap();
    set_en(&fx, None);
    crash_during(&fx, 1, Crash::BeforeWrite, || {
        let _ = fx.ctl.sync();
    });
    let rec = Record::from_json(&record(&fx).unwrap()).unwrap();
    assert_eq!((rec.phase, rec.step), (Phase::Restore, Step::Flows));
    assert_eq!((rec.nic.as_str(), rec.uplink.as_str()), ("eth1", "eth1~"));
    assert_eq!(rec.config.ifindex, fx.eth1);
    assert_eq!((rec.config.mac, rec.config.mtu), (Some(MAC1), 1450));
    let locals: Vec<String> = rec.config.addrs.iter().map(|a| a.to_string()).collect();
    assert_eq!(locals, ["192.0.2.10/24", "2001:db8:1::10/64"]);
    assert_eq!(rec.config.routes.len(), 3);
}

/// Every address the kernel holds on the NIC, its uplink name or the host port.
fn addresses_anywhere(fx: &Fx) -> Vec<String> {
    let (links, addrs, _) = fx.links.snapshot();
    let ours: Vec<u32> = links
        .iter()
        .filter(|l| l.name == "eth1" || l.name == "eth1~")
        .map(|l| l.index)
        .collect();
    let mut v: Vec<String> = addrs
        .iter()
        .filter(|a| ours.contains(&a.ifindex))
        .map(|a| a.to_string())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// A record that does not decode (here: not JSON at all, and a good one with a multi-byte
/// character where hex digits belong, which used to panic on a string slice) is logged
/// and the NIC is recovered from the kernel and OVSDB, at every crash point of a takeover
/// and of a restore: the NIC has its name back with every address the kernel still had
/// anywhere, no port, flow or record is left, and a sync takes it over again.
#[test]
fn an_unreadable_record_is_recovered_from_the_kernel() {
    for restore in [false, true] {
        for k in 0..4 {
            for corrupt in ["{not json", "metrics"] {
                let fx = fixture();
                let en1 = en("vm1", "", &["192.0.2.10", "2001:db8:1::10"]);
                set_en(&fx, Some(en1.clone()));
                if restore {
                    fx.ctl.sync().unwrap();
                    set_en(&fx, None);
                }
                crash_during(&fx, k, Crash::AfterWrite, || {
                    let _ = fx.ctl.sync();
                });
                let good = record(&fx).expect("a record");
                let bad = if corrupt == "metrics" {
                    let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
                    v["routes"][0]["metrics"] = serde_json::json!("€0");
                    v.to_string()
                } else {
                    corrupt.to_string()
                };
                fx.sim
                    .bridge
                    .set_bridge_external_id(RECORD_KEY, Some(&bad))
                    .unwrap();
                let had = addresses_anywhere(&fx);
                let what = format!("restore={restore} write={k} record={corrupt}");
                let ctl = controller(&fx);
                ctl.recover().unwrap_or_else(|e| panic!("{what}: {e}"));
                let (l, _, _) = nic_state(&fx.links, fx.eth1);
                assert_eq!(l.name, "eth1", "{what}");
                assert!(l.is_up(), "{what}");
                assert_eq!(addresses_anywhere(&fx), had, "{what}");
                assert_eq!(port_names(&fx), vec!["br-int".to_string()], "{what}");
                assert_eq!(record(&fx), None, "{what}");
                assert!(pair_flows(&fx).is_empty(), "{what}");
                if had.is_empty() {
                    // A restore that crashed after deleting the host port (which held the
                    // addresses) with its record destroyed: the kernel has nothing left to
                    // recover from, so the NIC stays plain.
                    assert!(restore && k == 3, "{what}");
                    continue;
                }
                set_en(&fx, Some(en1));
                ctl.sync().unwrap_or_else(|e| panic!("{what}: {e}"));
                // Taken over again with what survived (an IPv6 address that lived only in
                // the broken record is gone: setting the NIC down had removed it).
                assert_eq!(nic_state(&fx.links, fx.eth1).0.name, "eth1~", "{what}");
                let host = fx.links.link_by_name("eth1").unwrap();
                let (_, on_host, _) = nic_state(&fx.links, host.index);
                let mut on_host: Vec<String> = on_host.iter().map(|a| a.to_string()).collect();
                on_host.sort();
                assert_eq!(on_host, had, "{what}");
                if k == 3 || restore {
                    assert_attached(&fx);
                }
            }
        }
    }
}

/// A record no NIC can be recovered from (nothing named, no host port, but a link with
/// an uplink-style name tether cannot map back) is reported and left for an operator;
/// nothing is touched and nothing panics. With no such link there is nothing to undo and
/// the record goes.
#[test]
fn a_record_naming_nothing_is_kept_only_when_something_is_half_done() {
    let fx = fixture();
    let before = nic_state(&fx.links, fx.eth1);
    fx.sim
        .bridge
        .set_bridge_external_id(RECORD_KEY, Some("{not json"))
        .unwrap();
    controller(&fx).recover().unwrap();
    assert_eq!(record(&fx), None);
    assert_eq!(nic_state(&fx.links, fx.eth1), before);
    // A long NIC name's uplink (`<head>~<hash>`) cannot be mapped back to its NIC.
    fx.links
        .add_link("eth7verylo~a1b2c3", [2, 0, 0, 0, 7, 7], 1500, true);
    fx.sim
        .bridge
        .set_bridge_external_id(RECORD_KEY, Some("{not json"))
        .unwrap();
    let e = controller(&fx).recover().unwrap_err();
    assert!(
        e.to_string()
            .starts_with("Bridge external_ids:tether-en-op is unreadable (not JSON"),
        "{e}"
    );
    assert_eq!(record(&fx).as_deref(), Some("{not json"));
    assert_eq!(nic_state(&fx.links, fx.eth1), before);
}

#[test]
fn the_uplink_already_gone_only_deletes_the_ports() {
    // Antrea #5111: a NIC given back by hand (or an earlier attempt) is not restored again.
    let fx = fixture();
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10"])));
    fx.ctl.sync().unwrap();
    let host = fx.links.link_by_name("eth1").unwrap();
    fx.links.remove_link(host.index);
    fx.links.set_name(fx.eth1, "eth9").unwrap();
    set_en(&fx, None);
    fx.ctl.sync().unwrap();
    assert_eq!(port_names(&fx), vec!["br-int".to_string()]);
    assert!(pair_flows(&fx).is_empty());
}

#[test]
fn a_half_done_takeover_nobody_recorded_is_left_alone() {
    let fx = fixture();
    // `eth1~` exists next to `eth1`, but no record and no ports explain it.
    fx.links.add_link("eth1~", MAC2, 1500, true);
    let before = nic_state(&fx.links, fx.eth1);
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10"])));
    let e = fx.ctl.sync().unwrap_err();
    assert_eq!(
        e.to_string(),
        "refusing to take over eth1: link eth1~ exists but OVSDB has no host port eth1"
    );
    assert_eq!(nic_state(&fx.links, fx.eth1), before);
    assert_eq!(port_names(&fx), vec!["br-int".to_string()]);
}

#[test]
fn ports_that_outlived_a_reboot_are_replaced() {
    // Antrea #4122: after a reboot OVS still has eth1~ and eth1, the kernel has a plain
    // eth1 with its addresses and no eth1~.
    let fx = fixture();
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
    fx.ctl.sync().unwrap();
    let host = fx.links.link_by_name("eth1").unwrap();
    fx.links.remove_link(host.index);
    fx.links.set_name(fx.eth1, "eth1").unwrap();
    add_addr(&fx.links, fx.eth1, "192.0.2.10", 24, Some("eth1"));
    add_addr(&fx.links, fx.eth1, "2001:db8:1::10", 64, None);
    add_gw(&fx.links, fx.eth1, "192.0.2.1", 100);
    fx.sim.bridge.take_log();
    fx.sim.internal.lock().unwrap().clear();
    let ctl = controller(&fx);
    ctl.recover().unwrap();
    ctl.sync().unwrap();
    assert_eq!(
        fx.sim.bridge.take_log(),
        [
            "delete eth1~,eth1",
            "create eth1~ system",
            "create eth1 internal"
        ]
    );
    let (l, addrs, _) = nic_state(&fx.links, fx.eth1);
    assert_eq!(l.name, "eth1~");
    assert!(addrs.is_empty());
    assert_eq!(pair_flows(&fx).len(), 1);
}

/// The link holding an ExternalNode's IP is judged before anything is touched: loopback,
/// the bridge's own internal port, another OVS port, a bond slave and a tunnel are refused
/// permanently (no retry until the object changes), with no link call at all.
#[test]
fn links_that_must_not_be_taken_over_are_refused_untouched() {
    type Setup = fn(&Fx) -> u32;
    let cases: Vec<(&str, Setup, &str)> = vec![
        (
            "an address on lo",
            |fx| {
                let lo = fx.links.add_link("lo", [0; 6], 65536, true);
                fx.links.edit_link(lo, |l| {
                    l.flags = LinkFlags(LinkFlags::UP.0 | LinkFlags::LOOPBACK.0);
                    l.mac = None;
                });
                lo
            },
            "lo is the loopback interface",
        ),
        (
            "the bridge's own port",
            |fx| {
                let br = fx.links.add_link("br-int", [2, 0, 0, 0, 9, 9], 1500, true);
                fx.links.edit_link(br, |l| l.kind = Some("tun".into()));
                br
            },
            "br-int is the OVS bridge's own internal port",
        ),
        (
            "a TrafficControl port",
            |fx| {
                fx.sim
                    .bridge
                    .add_port("coll0", &[("antrea-type", "traffic-control")], None);
                fx.links.add_link("coll0", [2, 0, 0, 0, 9, 8], 1500, true)
            },
            "coll0 is already a port of bridge br-int (traffic-control)",
        ),
        (
            "a bond slave",
            |fx| {
                let bond = fx.links.add_link("bond0", [2, 0, 0, 0, 9, 7], 1500, true);
                let s = fx.links.add_link("eth3", [2, 0, 0, 0, 9, 6], 1500, true);
                fx.links.edit_link(s, |l| l.master = Some(bond));
                s
            },
            "eth3 is enslaved to bond0",
        ),
        (
            "a vxlan link",
            |fx| {
                let v = fx.links.add_link("vx0", [2, 0, 0, 0, 9, 5], 1450, true);
                fx.links.edit_link(v, |l| l.kind = Some("vxlan".into()));
                v
            },
            "vx0 is a vxlan link: only plain NICs are taken over",
        ),
    ];
    for (what, setup, want) in cases {
        let fx = fixture();
        let idx = setup(&fx);
        add_addr(&fx.links, idx, "203.0.113.7", 32, None);
        fx.links.clear_calls();
        let before = fx.links.snapshot();
        set_en(&fx, Some(en("vm1", "", &["203.0.113.7"])));
        let e = fx.ctl.sync().unwrap_err();
        assert!(e.is_permanent(), "{what}: {e}");
        assert!(
            e.to_string().starts_with(&format!(
                "ExternalNode default/vm1: refusing to take over: {want}"
            )),
            "{what}: {e}"
        );
        assert_eq!(fx.links.calls(), vec![], "{what}: a link was touched");
        assert_eq!(fx.links.snapshot(), before, "{what}");
        assert_eq!(record(&fx), None, "{what}");
        assert!(fx.ctl.status().last_error.is_some(), "{what}");
    }
}

/// A route that cannot be re-created exactly (here: one using a nexthop object) makes the
/// takeover refuse, naming the route; nothing is touched. It is not permanent: once the
/// route is changed, the next sync takes the NIC over.
#[test]
fn an_unmovable_route_refuses_the_takeover_naming_it() {
    let fx = fixture();
    let mut r = Route::new(Prefix::new(ip("198.51.100.0"), 24), fx.eth1);
    r.gateway = Some(ip("192.0.2.1"));
    r.unmovable = Some("a nexthop object (RTA_NH_ID)".into());
    fx.links.add_route(&r).unwrap();
    fx.links.clear_calls();
    let before = fx.links.snapshot();
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
    let e = fx.ctl.sync().unwrap_err();
    assert!(!e.is_permanent());
    assert_eq!(
        e.to_string(),
        format!(
            "refusing to take over eth1: 1 route(s) through it cannot be moved to the host port exactly and would be lost: 198.51.100.0/24 via 192.0.2.1 oif {} metric 0: has a nexthop object (RTA_NH_ID)",
            fx.eth1
        )
    );
    assert_eq!(fx.links.calls(), vec![]);
    assert_eq!(fx.links.snapshot(), before);
    fx.links.del_route(&r).unwrap();
    fx.ctl.sync().unwrap();
    assert_attached(&fx);
}

/// Kernel datapath model: the uplink is enslaved to `ovs-system` until ovs-vswitchd has
/// applied the delete. A restore (and a rollback at every takeover step) renames it back
/// only once it has no master, and the NIC ends exact. (Before: deleted without waiting,
/// renamed back while still a datapath port: the NIC kept its master.)
#[test]
fn the_nic_is_renamed_back_only_once_the_datapath_let_it_go() {
    let fx = kernel_fixture();
    let before = nic_state(&fx.links, fx.eth1);
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
    fx.ctl.sync().unwrap();
    let up = fx.links.link_by_index(fx.eth1).unwrap();
    assert_eq!(up.name, "eth1~");
    assert_eq!(up.master, fx.sim.kernel, "attached: enslaved to ovs-system");
    set_en(&fx, None);
    fx.ctl.sync().unwrap();
    assert_eq!(fx.links.link_by_index(fx.eth1).unwrap().master, None);
    assert_pristine(&fx, &before);

    // A datapath that keeps the port after the delete was applied: dpctl/del-if first.
    fx.sim.stuck.store(true, Ordering::SeqCst);
    fx.dp.calls.lock().unwrap().clear();
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
    fx.ctl.sync().unwrap();
    set_en(&fx, None);
    fx.ctl.sync().unwrap();
    assert_eq!(*fx.dp.calls.lock().unwrap(), ["eth1~"]);
    assert_pristine(&fx, &before);

    // One that never lets go: the NIC is not renamed back, the error names it, and the
    // record stays for the next sync, which finishes once the datapath lets go.
    fx.sim.held.store(true, Ordering::SeqCst);
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
    fx.ctl.sync().unwrap();
    set_en(&fx, None);
    let err = fx.ctl.sync().unwrap_err().to_string();
    assert!(
        err.contains("eth1~ is still enslaved to ovs-system (a datapath port)"),
        "{err}"
    );
    let up = fx.links.link_by_index(fx.eth1).unwrap();
    assert_eq!(up.name, "eth1~", "not renamed while held");
    assert!(fx.sim.bridge_external_id(RECORD_KEY).unwrap().is_some());
    fx.sim.held.store(false, Ordering::SeqCst);
    fx.ctl.sync().unwrap();
    assert_pristine(&fx, &before);
}

/// The same for a rollback at every OVS step of a takeover on the kernel datapath model.
#[test]
fn a_rollback_at_every_step_renames_only_a_released_nic() {
    for step in 0..8 {
        let fx = kernel_fixture();
        fx.sim.stuck.store(step % 2 == 1, Ordering::SeqCst);
        let before = nic_state(&fx.links, fx.eth1);
        *fx.sim.fail_write.lock().unwrap() = Some(step / 2);
        set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
        let _ = fx.ctl.sync();
        let l = fx.links.link_by_index(fx.eth1).unwrap();
        assert_eq!(l.master, None, "step {step}: {l:?}");
        *fx.sim.fail_write.lock().unwrap() = None;
        if l.name == "eth1" {
            assert_pristine(&fx, &before);
        }
    }
}

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
    let before = nic_state(&fx.links, fx.eth1);
    let nic_sysctls = crate::netlink::read_sysctls(fx.links.as_ref(), "eth1").unwrap();
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
    fx.ctl.sync().unwrap();
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
    // The uplink: IPv6 off once its addresses have moved (nothing else changes on it).
    assert_eq!(on(fx.eth1), ["ipv6.disable_ipv6=1"]);
    set_en(&fx, None);
    fx.ctl.sync().unwrap();
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
    let before = nic_state(&fx.links, fx.eth1);
    let disable = |dev: &str| {
        fx.links
            .sysctl(dev, DevSysctl::Ipv6DisableIpv6)
            .unwrap()
            .unwrap()
    };
    assert_eq!(disable("eth1"), "0");
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10"])));
    fx.ctl.sync().unwrap();
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

    set_en(&fx, None);
    fx.ctl.sync().unwrap();
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
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
    let err = fx.ctl.sync().unwrap_err().to_string();
    assert!(
        err.contains("IPv6 is disabled on eth1 (net.ipv6.conf.eth1.disable_ipv6=1; the kernel answers EACCES)"),
        "{err}"
    );
    assert!(!err.contains("CAP_NET_ADMIN"), "{err}");
}

/// A host port whose kernel MAC is not the NIC's (udev rewrote it): the takeover rolls
/// back, the error names the field, the NIC is as it was. On the kernel datapath model an
/// attached NIC's status says "verified" (uplink enslaved to ovs-system).
#[test]
fn a_host_port_that_is_not_the_nics_stand_in_rolls_back() {
    let fx0 = fixture();
    let sim = Arc::new(Sim {
        links: fx0.links.clone(),
        udev_mac: Some([2, 0, 0, 0, 0, 0x99]),
        ..Sim::default()
    });
    sim.bridge.add_port("br-int", &[], None);
    let dp = Arc::new(FakeDatapath {
        sim: sim.clone(),
        calls: Mutex::new(Vec::new()),
    });
    let ctl = new_controller(&sim, &fx0.flows, &dp, &fx0.stores, &fx0.links);
    let before = nic_state(&fx0.links, fx0.eth1);
    set_en(&fx0, Some(en("vm1", "", &["192.0.2.10"])));
    let err = ctl.sync().unwrap_err().to_string();
    assert!(
        err.contains(
            "host port eth1 is not the NIC's stand-in after the takeover: host port MAC (kernel) is 02:00:00:00:00:99 (want 02:00:00:00:01:10)"
        ),
        "{err}"
    );
    assert_eq!(nic_state(&fx0.links, fx0.eth1), before);
    assert!(fx0.links.link_by_name("eth1~").is_err());

    let fx = kernel_fixture();
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10"])));
    fx.ctl.sync().unwrap();
    assert_eq!(fx.ctl.status().identity.as_deref(), Some("verified"));
}

fn held(fx: &Fx, nic: &str) -> Option<String> {
    fx.sim
        .bridge
        .bridge_ids
        .lock()
        .unwrap()
        .get(&format!("tether-held:{nic}"))
        .cloned()
}

/// A link's addresses and routes as they would be on any device (indexes left out).
fn config_of(links: &FakeLinks, index: u32) -> (Vec<String>, Vec<String>) {
    let (_, addrs, routes) = nic_state(links, index);
    (
        addrs
            .iter()
            .map(|a| format!("{}/{}", a.local, a.prefix_len))
            .collect(),
        routes
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r.oif = 0;
                r.to_string()
            })
            .collect(),
    )
}

/// The openvswitch module reloaded (`ovs-ctl force-reload-kmod`): the host port is a new
/// device with nothing on it, not even the NIC's MTU or sysctls, and no link holds the
/// ExternalNode's IPs. The held configuration, recorded at the takeover and kept in
/// OVSDB, goes back on it, and stays what it must carry for a while: what a restore
/// script flushes after that comes back at the next look, which the controller asks
/// for. A restore gives the NIC back and forgets it.
#[test]
fn a_recreated_host_port_gets_the_held_configuration_back() {
    let fx = fixture_ipv6_on();
    fx.links
        .put_sysctl(fx.eth1, DevSysctl::Ipv4ArpAnnounce, "2");
    fx.links.set_default_sysctl(DevSysctl::Ipv4ArpAnnounce, "0");
    let before = nic_state(&fx.links, fx.eth1);
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
    fx.ctl.sync().unwrap();
    assert_attached(&fx);
    let host = fx.links.link_by_name("eth1").unwrap();
    let attached = config_of(&fx.links, host.index);
    assert_eq!(attached.0, ["192.0.2.10/24", "2001:db8:1::10/64"]);
    let raw = held(&fx, "eth1").expect("held after the takeover");
    assert!(raw.contains("\"192.0.2.10\""), "{raw}");
    assert_eq!(fx.ctl.recheck_after(), None);

    // The module reloads: a new, empty device of the same name, with default settings and
    // a new index (the kernel never hands an index out twice in a namespace; the fake
    // reuses the highest, hence the link in between).
    fx.links.remove_link(host.index);
    fx.links
        .add_link("spacer", [2, 0, 0, 0, 0, 0x99], 1500, false);
    let new = fx.links.add_link("eth1", MAC1, 1500, true);
    assert_ne!(new, host.index);
    assert!(fx.links.link_holding(ip("192.0.2.10")).unwrap().is_none());
    fx.ctl.sync().unwrap();
    assert_eq!(config_of(&fx.links, new), attached);
    let now = fx.links.link_by_index(new).unwrap();
    assert_eq!(now.mtu, 1450);
    let sysctl = |k| fx.links.sysctl("eth1", k).unwrap().unwrap();
    assert_eq!(sysctl(DevSysctl::Ipv4ArpAnnounce), "2");
    assert_eq!(
        fx.ctl.recheck_after(),
        Some(std::time::Duration::from_secs(2))
    );

    // A restore script then flushes the routes and re-adds only part of them: the next
    // look (within the window) puts the rest back, rather than recording the loss.
    for r in nic_state(&fx.links, new).2 {
        if r.gateway.is_some_and(|g| g.is_ipv6()) {
            fx.links.del_route(&r).unwrap();
        }
    }
    fx.ctl.sync().unwrap();
    assert_eq!(config_of(&fx.links, new), attached);
    assert!(
        held(&fx, "eth1")
            .unwrap()
            .contains(&format!("\"ifindex\":{new}"))
    );

    // The ExternalNode deleted: the NIC gets everything back, and nothing stays held.
    set_en(&fx, None);
    fx.ctl.sync().unwrap();
    assert_pristine(&fx, &before);
    assert_eq!(held(&fx, "eth1"), None);
}

/// systemd-udevd gives the renamed NIC its old predictable name as an altname on the
/// rename's "move" event, a moment later: after the rename step has looked (and removed one
/// already there), before OVS makes the host port's device, which the kernel then refuses
/// ("File exists", ofport -1). Seen in the kernel tier's reboot scenario, where it left the
/// VM cut off: the rollback could not rename the NIC back onto its own altname either. Now
/// the takeover removes the altname and has the host port made again; and a rollback
/// renames onto the NIC's own altname by removing it first.
#[test]
fn a_late_udev_altname_neither_blocks_the_host_port_nor_the_rename_back() {
    let fx = fixture();
    let before = nic_state(&fx.links, fx.eth1);
    fx.sim.udev_late_altname.store(true, Ordering::SeqCst);
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
    fx.ctl.sync().unwrap();
    assert_attached(&fx);
    let uplink = fx.links.link_by_index(fx.eth1).unwrap();
    assert_eq!(uplink.altnames, Vec::<String>::new());
    let host = fx.links.link_by_name("eth1").unwrap();
    assert_ne!(host.index, fx.eth1);
    assert!(
        fx.links
            .calls()
            .contains(&Call::DelAltname(fx.eth1, "eth1".into())),
        "{:?}",
        fx.links.calls()
    );
    set_en(&fx, None);
    fx.ctl.sync().unwrap();
    assert_pristine(&fx, &before);

    // The altname cannot be removed then (the takeover fails with it in place): the
    // rollback's rename back must not stall on it.
    let fx = fixture();
    let before = nic_state(&fx.links, fx.eth1);
    fx.sim.udev_late_altname.store(true, Ordering::SeqCst);
    fx.links.fail_call(
        // the rename's three changes (down, name, up), then the altname's removal
        3,
        LinkError::Permission {
            what: "injected".into(),
            errno: 1,
        },
    );
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
    let e = fx.ctl.sync().unwrap_err();
    assert!(
        matches!(&e, EnError::RolledBack { error, rollback, .. }
            if rollback.is_empty() && error.to_string().contains("remove altname eth1 of eth1~")),
        "{e}"
    );
    for a in fx.links.addrs(Some(fx.eth1)).unwrap() {
        if a.label.as_deref() == Some("eth1~") {
            fx.links.del_addr(&a).unwrap();
            let mut b = a.clone();
            b.label = Some("eth1".into());
            fx.links.add_addr(&b).unwrap();
        }
    }
    assert_pristine(&fx, &before);
}

/// A link renamed onto its own altname: the altname goes first (the kernel refuses the
/// rename otherwise, as onto any name in use).
#[test]
fn a_rename_onto_the_links_own_altname_removes_it_first() {
    let fx = fixture();
    fx.links.add_altname(fx.eth1, "lan0");
    let l = fx.links.rename(fx.eth1, "lan0").unwrap();
    assert_eq!((l.name.as_str(), l.altnames.len()), ("lan0", 0));
}

mod giveback;
