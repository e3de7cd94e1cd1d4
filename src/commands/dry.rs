//! Dry backends for the controllers, shared by `tether plan` and `tether check`: the
//! bridge answers from a snapshot of its ports and `external_ids` read from OVSDB once
//! (plus what the run itself would create or delete), the kernel's links are read live,
//! and every write — ports, link changes, flows, a datapath interface's removal — is
//! recorded in a [`Recorder`] instead of made; OpenFlow is never touched (flows are what
//! each owner would hold). The controllers run their own code against these, so the plan
//! is what `run` would do, not a second model of it.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::controller::externalnode::EnController;
use crate::controller::interfaces::Interfaces;
use crate::controller::{Bridge, Datapath, Flows};
use crate::netlink::{Addr, DevSysctl, Link, LinkError, LinkFlags, Links, Route};
use crate::openflow::{Flow, FlowChange, OfError, Owner};
use crate::ovsdb::{OvsdbError, PortData, PortKind, PortSpec, Uuid};

/// A port change `run` would make.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PortChange {
    Create {
        name: String,
        kind: String,
        options: BTreeMap<String, String>,
    },
    Delete {
        name: String,
    },
    SetOptions {
        name: String,
        options: BTreeMap<String, String>,
    },
    SetExternalIds {
        name: String,
        ids: BTreeMap<String, String>,
    },
}

/// First placeholder ofport for a port that does not exist yet (OVS would pick the real
/// one); the plan's legend names each.
pub const NEW_OFPORT_BASE: u32 = 60_000;

#[derive(Default)]
struct Recorded {
    changes: Vec<PortChange>,
    /// Ports created in the plan: name → placeholder ofport.
    created: BTreeMap<String, u32>,
    /// Ports deleted in the plan.
    deleted: BTreeSet<Uuid>,
    /// Link changes, as sentences.
    links: Vec<String>,
    /// Desired flows per owner (what `apply` was asked for; `remove` leaves none).
    flows: BTreeMap<Owner, Vec<Flow>>,
}

/// The shared record of one plan.
#[derive(Clone, Default)]
pub struct Recorder(Arc<Mutex<Recorded>>);

impl Recorder {
    fn lock(&self) -> MutexGuard<'_, Recorded> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn port_changes(&self) -> Vec<PortChange> {
        self.lock().changes.clone()
    }

    pub fn link_changes(&self) -> Vec<String> {
        self.lock().links.clone()
    }

    /// Placeholder ofport → the new port's name.
    pub fn new_ofports(&self) -> BTreeMap<u32, String> {
        self.lock()
            .created
            .iter()
            .map(|(n, p)| (*p, n.clone()))
            .collect()
    }

    pub fn desired_flows(&self) -> BTreeMap<Owner, Vec<Flow>> {
        self.lock().flows.clone()
    }

    pub fn flows_of(&self, owner: Owner) -> Vec<Flow> {
        self.lock().flows.get(&owner).cloned().unwrap_or_default()
    }

    pub fn set_flows(&self, owner: Owner, flows: Vec<Flow>) {
        self.lock().flows.insert(owner, flows);
    }

    /// Record a port a plan would create (also used for the ExternalNode's ports),
    /// returning its placeholder ofport.
    pub fn create(&self, name: &str, kind: &str, options: BTreeMap<String, String>) -> u32 {
        let mut r = self.lock();
        if let Some(p) = r.created.get(name) {
            return *p;
        }
        let p = NEW_OFPORT_BASE + u32::try_from(r.created.len()).unwrap_or(0);
        r.created.insert(name.to_string(), p);
        r.changes.push(PortChange::Create {
            name: name.to_string(),
            kind: kind.to_string(),
            options,
        });
        p
    }

    pub fn delete(&self, name: &str) {
        self.lock().changes.push(PortChange::Delete {
            name: name.to_string(),
        });
    }

    fn link(&self, what: String) {
        self.lock().links.push(what);
    }
}

fn kind_text(k: &PortKind) -> (String, BTreeMap<String, String>) {
    match k {
        PortKind::System => ("system".into(), BTreeMap::new()),
        PortKind::Internal { .. } => ("internal".into(), BTreeMap::new()),
        PortKind::Tunnel { kind, options } => (kind.clone(), options.clone()),
        PortKind::Other(t) => (t.clone(), BTreeMap::new()),
    }
}

/// The bridge as OVSDB has it, plus the plan's own creations and deletions.
pub struct DryBridge {
    ports: Vec<PortData>,
    external_ids: BTreeMap<String, String>,
    rec: Recorder,
}

impl DryBridge {
    pub fn new(
        ports: Vec<PortData>,
        external_ids: BTreeMap<String, String>,
        rec: Recorder,
    ) -> Self {
        DryBridge {
            ports,
            external_ids,
            rec,
        }
    }

    fn real(&self, name: &str) -> Option<&PortData> {
        self.ports.iter().find(|p| p.name == name)
    }
}

impl Bridge for DryBridge {
    fn interfaces(&self) -> Arc<Interfaces> {
        let r = self.rec.lock();
        let ports = self
            .ports
            .iter()
            .filter(|p| !r.deleted.contains(&p.uuid))
            .cloned()
            .collect();
        Arc::new(Interfaces::new(ports))
    }

    fn create_port(&self, spec: &PortSpec) -> Result<Uuid, OvsdbError> {
        let (kind, options) = kind_text(&spec.kind);
        self.rec.create(&spec.name, &kind, options);
        Ok(Uuid(String::new()))
    }

    fn ofport(&self, name: &str) -> Result<u32, OvsdbError> {
        if let Some(p) = self.rec.lock().created.get(name) {
            return Ok(*p);
        }
        match self.real(name).map(|p| p.ofport) {
            Some(p) if p > 0 => Ok(u32::try_from(p).unwrap_or(0)),
            _ => Err(OvsdbError::PortFailed {
                name: name.to_string(),
                error: "no ofport in OVSDB".into(),
            }),
        }
    }

    fn delete_ports(&self, ports: &[Uuid]) -> Result<(), OvsdbError> {
        for u in ports {
            let name = self
                .ports
                .iter()
                .find(|p| &p.uuid == u)
                .map_or_else(|| u.to_string(), |p| p.name.clone());
            self.rec.lock().deleted.insert(u.clone());
            self.rec.delete(&name);
        }
        Ok(())
    }

    fn set_port_external_ids(
        &self,
        port: &str,
        ids: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError> {
        if self.real(port).map(|p| &p.external_ids) != Some(ids) {
            self.rec.lock().changes.push(PortChange::SetExternalIds {
                name: port.to_string(),
                ids: ids.clone(),
            });
        }
        Ok(())
    }

    fn set_interface_options(
        &self,
        name: &str,
        options: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError> {
        self.rec.lock().changes.push(PortChange::SetOptions {
            name: name.to_string(),
            options: options.clone(),
        });
        Ok(())
    }

    fn bridge_external_id(&self, key: &str) -> Result<Option<String>, OvsdbError> {
        Ok(self.external_ids.get(key).cloned())
    }

    fn set_bridge_external_id(&self, _: &str, _: Option<&str>) -> Result<(), OvsdbError> {
        Ok(())
    }
}

/// Flows: what each owner would hold.
pub struct DryFlows(pub Recorder);

impl Flows for DryFlows {
    fn apply(&self, owner: Owner, flows: Vec<Flow>) -> Result<(), OfError> {
        self.0.set_flows(owner, flows);
        Ok(())
    }

    fn remove(&self, owner: Owner) -> Result<(), OfError> {
        self.0.set_flows(owner, Vec::new());
        Ok(())
    }

    fn change_many(&self, changes: Vec<(Owner, FlowChange)>) -> Vec<(Owner, OfError)> {
        for (owner, change) in changes {
            let flows = change.applied_to(self.0.flows_of(owner));
            self.0.set_flows(owner, flows);
        }
        Vec::new()
    }

    fn set_no_flood(&self, _: u32, _: bool) -> Result<(), OfError> {
        Ok(())
    }

    fn delete_round(&self, _: u16) -> Result<(), OfError> {
        Ok(())
    }
}

/// The kernel's links, read for real; changes recorded. A port the plan creates shows up
/// as an up link of that name, so a controller waiting for its netdev goes on.
pub struct DryLinks<L> {
    pub real: L,
    pub rec: Recorder,
}

impl<L: Links> DryLinks<L> {
    fn name_of(&self, ifindex: u32) -> String {
        self.real
            .link_by_index(ifindex)
            .map_or_else(|_| format!("#{ifindex}"), |l| l.name)
    }
}

impl<L: Links> Links for DryLinks<L> {
    fn links(&self) -> Result<Vec<Link>, LinkError> {
        self.real.links()
    }

    fn link_by_name(&self, name: &str) -> Result<Link, LinkError> {
        match self.real.link_by_name(name) {
            Err(e) if e.is_not_found() && self.rec.lock().created.contains_key(name) => Ok(Link {
                index: 0,
                name: name.to_string(),
                mac: None,
                mtu: 1500,
                flags: LinkFlags(LinkFlags::UP.0),
                kind: None,
                altnames: Vec::new(),
                master: None,
            }),
            r => r,
        }
    }

    fn link_by_index(&self, ifindex: u32) -> Result<Link, LinkError> {
        self.real.link_by_index(ifindex)
    }

    fn set_up(&self, ifindex: u32) -> Result<(), LinkError> {
        self.rec.link(format!("bring {} up", self.name_of(ifindex)));
        Ok(())
    }

    fn set_down(&self, ifindex: u32) -> Result<(), LinkError> {
        self.rec
            .link(format!("take {} down", self.name_of(ifindex)));
        Ok(())
    }

    fn set_mtu(&self, ifindex: u32, mtu: u32) -> Result<(), LinkError> {
        self.rec
            .link(format!("set the MTU of {} to {mtu}", self.name_of(ifindex)));
        Ok(())
    }

    fn set_name(&self, ifindex: u32, name: &str) -> Result<(), LinkError> {
        self.rec
            .link(format!("rename {} to {name}", self.name_of(ifindex)));
        Ok(())
    }

    fn del_altname(&self, ifindex: u32, altname: &str) -> Result<(), LinkError> {
        self.rec.link(format!(
            "remove altname {altname} of {}",
            self.name_of(ifindex)
        ));
        Ok(())
    }

    fn addrs(&self, ifindex: Option<u32>) -> Result<Vec<Addr>, LinkError> {
        self.real.addrs(ifindex)
    }

    fn add_addr(&self, addr: &Addr) -> Result<(), LinkError> {
        self.rec.link(format!("add address {addr}"));
        Ok(())
    }

    fn del_addr(&self, addr: &Addr) -> Result<(), LinkError> {
        self.rec.link(format!("delete address {addr}"));
        Ok(())
    }

    fn routes(&self, ifindex: u32) -> Result<Vec<Route>, LinkError> {
        self.real.routes(ifindex)
    }

    fn add_route(&self, route: &Route) -> Result<(), LinkError> {
        self.rec.link(format!("add route {route}"));
        Ok(())
    }

    fn del_route(&self, route: &Route) -> Result<(), LinkError> {
        self.rec.link(format!("delete route {route}"));
        Ok(())
    }

    fn sysctl(&self, dev: &str, key: DevSysctl) -> Result<Option<String>, LinkError> {
        match self.real.sysctl(dev, key) {
            Err(e) if e.is_not_found() && self.rec.lock().created.contains_key(dev) => Ok(None),
            r => r,
        }
    }

    fn set_sysctl(&self, dev: &str, key: DevSysctl, value: &str) -> Result<(), LinkError> {
        if self.real.sysctl(dev, key).ok().flatten().as_deref() != Some(value) {
            self.rec.link(format!("set {key:?} of {dev} to {value}"));
        }
        Ok(())
    }

    fn sysctl_all(&self, key: DevSysctl) -> Result<Option<String>, LinkError> {
        self.real.sysctl_all(key)
    }

    fn pause(&self, _: Duration) {}

    fn link_holding(&self, ip: IpAddr) -> Result<Option<Link>, LinkError> {
        self.real.link_holding(ip)
    }
}

/// The datapath: removing a port that lingers in it is recorded, never done (a live
/// `dpctl/del-if` would change the switch).
pub struct DryDatapath(pub Recorder);

impl Datapath for DryDatapath {
    fn delete_interface(&self, name: &str) -> Result<bool, crate::unixctl::UnixctlError> {
        self.0.link(format!(
            "remove {name} from the datapath if it lingers there"
        ));
        Ok(false)
    }
}

/// The ExternalNode controller over dry backends: what `tether plan` and `tether check`
/// preview the daemon's decision with.
pub fn en_controller(
    cfg: &crate::config::Config,
    stores: crate::k8s::Stores,
    bridge: Arc<dyn Bridge>,
    flows: Arc<dyn Flows>,
    links: Arc<dyn Links + Send + Sync>,
    rec: &Recorder,
) -> EnController {
    EnController::new(
        crate::wiring::en_config(cfg),
        stores,
        bridge,
        flows,
        links,
        Arc::new(DryDatapath(rec.clone())),
    )
}
