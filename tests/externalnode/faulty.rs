//! Backends for the ExternalNode agent that misbehave on request, wrapping the real ones:
//! a takeover failing at the ports, move or flows step (`TETHER_EN_AGENT_FAIL`), and
//! ovs-vswitchd SIGSTOPped for a few seconds inside every port delete
//! (`TETHER_EN_AGENT_STOP_VSWITCHD=1`: the pid from the sandbox's pid file), as a busy or
//! stalled switch would be.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tether::controller::Bridge;
use tether::controller::Flows;
use tether::controller::interfaces::Interfaces;
use tether::netlink::{Addr, DevSysctl, Link, LinkError, Links, Route};
use tether::openflow::{Category, Flow, OfError, Owner};
use tether::ovsdb::{OvsdbError, PortKind, PortSpec, Uuid};

pub const FAIL_ENV: &str = "TETHER_EN_AGENT_FAIL";
pub const STOP_ENV: &str = "TETHER_EN_AGENT_STOP_VSWITCHD";
/// How long ovs-vswitchd stays stopped inside a delete.
pub const STOP_FOR: Duration = Duration::from_secs(3);

/// Fails the next takeover at `step` once (`ports`: the host port; `move`: the first
/// address; `flows`: the uplink pair flows).
#[derive(Default)]
pub struct Fault {
    step: Option<String>,
    fired: AtomicBool,
}

impl Fault {
    pub fn from_env() -> Arc<Fault> {
        Arc::new(Fault {
            step: std::env::var(FAIL_ENV).ok(),
            fired: AtomicBool::new(false),
        })
    }

    fn hit(&self, step: &str) -> bool {
        self.step.as_deref() == Some(step) && !self.fired.swap(true, Ordering::SeqCst)
    }
}

fn signal(pid: u32, sig: &str) {
    let _ = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status();
}

pub struct FaultyBridge<B> {
    pub inner: Arc<B>,
    pub fault: Arc<Fault>,
    /// ovs-vswitchd's pid file, when it is to be stopped inside deletes.
    pub stop_vswitchd: Option<std::path::PathBuf>,
}

impl<B: Bridge> FaultyBridge<B> {
    /// Stop ovs-vswitchd now and let it go on after [`STOP_FOR`], from another thread:
    /// the delete about to be sent is committed by ovsdb-server but not applied.
    fn stall(&self) {
        let pid = self
            .stop_vswitchd
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .and_then(|s| s.trim().parse::<u32>().ok());
        if let Some(pid) = pid {
            signal(pid, "-STOP");
            eprintln!("AGENT-LOG vswitchd stopped");
            std::thread::spawn(move || {
                std::thread::sleep(STOP_FOR);
                eprintln!("AGENT-LOG vswitchd continued");
                signal(pid, "-CONT");
            });
        }
    }
}

impl<B: Bridge> Bridge for FaultyBridge<B> {
    fn interfaces(&self) -> Arc<Interfaces> {
        self.inner.interfaces()
    }

    fn create_port(&self, spec: &PortSpec) -> Result<Uuid, OvsdbError> {
        if matches!(spec.kind, PortKind::Internal { .. }) && self.fault.hit("ports") {
            return Err(OvsdbError::Protocol(
                "injected failure at the ports step".into(),
            ));
        }
        self.inner.create_port(spec)
    }

    fn ofport(&self, name: &str) -> Result<u32, OvsdbError> {
        self.inner.ofport(name)
    }

    fn delete_ports(&self, ports: &[Uuid]) -> Result<(), OvsdbError> {
        self.stall();
        self.inner.delete_ports(ports)
    }

    fn delete_ports_applied(&self, ports: &[Uuid], within: Duration) -> Result<(), OvsdbError> {
        self.stall();
        self.inner.delete_ports_applied(ports, within)
    }

    fn set_port_external_ids(
        &self,
        port: &str,
        ids: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError> {
        self.inner.set_port_external_ids(port, ids)
    }

    fn set_interface_options(
        &self,
        name: &str,
        options: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError> {
        self.inner.set_interface_options(name, options)
    }

    fn bridge_external_id(&self, key: &str) -> Result<Option<String>, OvsdbError> {
        self.inner.bridge_external_id(key)
    }

    fn set_bridge_external_id(&self, key: &str, value: Option<&str>) -> Result<(), OvsdbError> {
        self.inner.set_bridge_external_id(key, value)
    }
}

pub struct FaultyLinks<L> {
    pub inner: L,
    pub fault: Arc<Fault>,
}

impl<L: Links> Links for FaultyLinks<L> {
    fn links(&self) -> Result<Vec<Link>, LinkError> {
        self.inner.links()
    }
    fn link_by_name(&self, name: &str) -> Result<Link, LinkError> {
        self.inner.link_by_name(name)
    }
    fn link_by_index(&self, ifindex: u32) -> Result<Link, LinkError> {
        self.inner.link_by_index(ifindex)
    }
    fn set_up(&self, ifindex: u32) -> Result<(), LinkError> {
        self.inner.set_up(ifindex)
    }
    fn set_down(&self, ifindex: u32) -> Result<(), LinkError> {
        self.inner.set_down(ifindex)
    }
    fn set_mtu(&self, ifindex: u32, mtu: u32) -> Result<(), LinkError> {
        self.inner.set_mtu(ifindex, mtu)
    }
    fn set_name(&self, ifindex: u32, name: &str) -> Result<(), LinkError> {
        self.inner.set_name(ifindex, name)
    }
    fn del_altname(&self, ifindex: u32, altname: &str) -> Result<(), LinkError> {
        self.inner.del_altname(ifindex, altname)
    }
    fn addrs(&self, ifindex: Option<u32>) -> Result<Vec<Addr>, LinkError> {
        self.inner.addrs(ifindex)
    }
    fn add_addr(&self, addr: &Addr) -> Result<(), LinkError> {
        if self.fault.hit("move") {
            return Err(LinkError::from_errno(
                22,
                format!("injected: address {addr}"),
            ));
        }
        self.inner.add_addr(addr)
    }
    fn del_addr(&self, addr: &Addr) -> Result<(), LinkError> {
        self.inner.del_addr(addr)
    }
    fn routes(&self, ifindex: u32) -> Result<Vec<Route>, LinkError> {
        self.inner.routes(ifindex)
    }
    fn add_route(&self, route: &Route) -> Result<(), LinkError> {
        self.inner.add_route(route)
    }
    fn del_route(&self, route: &Route) -> Result<(), LinkError> {
        self.inner.del_route(route)
    }
    fn sysctl(&self, dev: &str, key: DevSysctl) -> Result<Option<String>, LinkError> {
        self.inner.sysctl(dev, key)
    }
    fn set_sysctl(&self, dev: &str, key: DevSysctl, value: &str) -> Result<(), LinkError> {
        self.inner.set_sysctl(dev, key, value)
    }
    fn sysctl_all(&self, key: DevSysctl) -> Result<Option<String>, LinkError> {
        self.inner.sysctl_all(key)
    }
    fn link_holding(&self, ip: IpAddr) -> Result<Option<Link>, LinkError> {
        self.inner.link_holding(ip)
    }
}

pub struct FaultyFlows<F> {
    pub inner: Arc<F>,
    pub fault: Arc<Fault>,
}

impl<F: Flows> Flows for FaultyFlows<F> {
    fn apply(&self, owner: Owner, flows: Vec<Flow>) -> Result<(), OfError> {
        // The uplink pair's owner (the bypass flows are object 0).
        if owner.category == Category::EXTERNAL_NODE && owner.object != 0 && self.fault.hit("flows")
        {
            return Err(OfError::Timeout {
                what: "injected failure at the flows step".into(),
            });
        }
        self.inner.apply(owner, flows)
    }
    fn remove(&self, owner: Owner) -> Result<(), OfError> {
        self.inner.remove(owner)
    }
    fn set_no_flood(&self, ofport: u32, on: bool) -> Result<(), OfError> {
        self.inner.set_no_flood(ofport, on)
    }
    fn delete_round(&self, round: u16) -> Result<(), OfError> {
        self.inner.delete_round(round)
    }
}
