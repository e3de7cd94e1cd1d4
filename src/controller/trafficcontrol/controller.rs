//! `TcController::sync(name)`: level-triggered reconciliation of one TrafficControl —
//! snapshot the stores and the interface store, ensure its target (and return) port,
//! compute its effective Pods and install exactly their mark flows in one bundle; release
//! ports nobody references any more. The controller keeps only what it installed
//! (per TC: ports, owner) and errors for status; the truth is the stores and OVSDB.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use super::device;
use super::ports::{port_name, port_spec, tunnel_identity};
use super::select;
use crate::controller::Bridge;
use crate::controller::Flows;
use crate::controller::interfaces::{Interfaces, Role};
use crate::k8s::{Action, Direction, Stores, TcPort, TrafficControl, ValidationError};
use crate::netlink::{LinkError, Links};
use crate::openflow::{Category, OfError, Owner};
use crate::ovsdb::{OvsdbError, PortKind};
use crate::pipeline::{self, TcAction, TcDirection};

/// Why a TrafficControl could not be synced; the message names the port or field.
#[derive(Debug, Clone, PartialEq)]
pub enum SyncError {
    Invalid(ValidationError),
    /// A port with the TC port's name exists and is not a traffic-control port.
    PortConflict {
        port: String,
        role: String,
    },
    Port {
        port: String,
        error: OvsdbError,
    },
    Flows(OfError),
    /// A `device` target (or return port) the host uses itself (see `device`).
    DeviceRefused {
        tc: String,
        device: String,
        reason: String,
    },
    /// The kernel could not be asked about a `device` target (retried).
    Link(LinkError),
    /// An `ovsInternal` port's netdev could not be brought up (retried).
    Up {
        port: String,
        error: LinkError,
    },
    /// The tunnel port would be the same tunnel to ovs-vswitchd as an existing port
    /// (`tunnel_identity`), which refuses the second ("File exists").
    TunnelClash {
        port: String,
        other: String,
        other_tcs: Vec<String>,
        identity: String,
    },
}

/// How often and how long an `ovsInternal` port's netdev is waited for (Antrea: every 1 s
/// for up to 5 s).
pub const OVS_INTERNAL_UP_RETRY: std::time::Duration = std::time::Duration::from_secs(1);
pub const OVS_INTERNAL_UP_TRIES: u32 = 5;

impl SyncError {
    /// Only a new version of the object can fix it: retrying the same spec cannot.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            SyncError::Invalid(_) | SyncError::DeviceRefused { .. } | SyncError::TunnelClash { .. }
        )
    }
}

impl std::fmt::Display for SyncError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SyncError::Invalid(e) => write!(f, "invalid spec: {e}"),
            SyncError::PortConflict { port, role } => write!(
                f,
                "port {port} exists on the bridge as a {role} port, not a traffic-control port; refusing to reuse it"
            ),
            SyncError::Port { port, error } => write!(f, "port {port}: {error}"),
            SyncError::Flows(e) => write!(f, "flows: {e}"),
            SyncError::DeviceRefused { tc, device, reason } => write!(
                f,
                "TrafficControl {tc}: refusing device {device} as a target or return port: {reason}"
            ),
            SyncError::Link(e) => write!(f, "checking a device target: {e}"),
            SyncError::TunnelClash {
                port,
                other,
                other_tcs,
                identity,
            } => write!(
                f,
                "port {port} would be the same tunnel ({identity}) as port {other}{}, and ovs-vswitchd allows only one: change the remote IP, key or port of one of them",
                if other_tcs.is_empty() {
                    String::new()
                } else {
                    format!(" of TrafficControl {}", other_tcs.join(", "))
                }
            ),
            SyncError::Up { port, error } => write!(
                f,
                "port {port}: cannot bring its netdev up (nothing sent to it would reach a capture): {error}"
            ),
        }
    }
}

impl std::error::Error for SyncError {}

/// What `tether status` shows per TC.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TcStatus {
    pub name: String,
    pub effective_pods: Vec<String>,
    pub target_port: Option<(String, u32)>,
    pub return_port: Option<(String, u32)>,
    pub flows: usize,
    pub last_error: Option<String>,
}

#[derive(Default)]
struct State {
    /// What is installed per TC.
    tcs: HashMap<String, TcStatus>,
    /// Flow owners: TC names and return-port names (`port:<name>`) → object id.
    owners: HashMap<String, u32>,
    next_object: u32,
    /// TCs refused for a tunnel that would clash with another's: re-checked whenever any
    /// TC changes (the other one may have gone).
    clashing: BTreeSet<String>,
}

impl State {
    fn owner(&mut self, key: &str) -> Owner {
        let next = &mut self.next_object;
        let id = *self.owners.entry(key.to_string()).or_insert_with(|| {
            *next += 1;
            *next
        });
        Owner::new(Category::TRAFFIC_CONTROL, id)
    }
}

pub struct TcController {
    stores: Stores,
    bridge: Arc<dyn Bridge>,
    flows: Arc<dyn Flows>,
    /// Read only: whether a `device` target is a link the host uses (`device`).
    links: Arc<dyn Links + Send + Sync>,
    state: Mutex<State>,
    /// Serializes port create/delete decisions across workers.
    ports: Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn direction(d: Direction) -> TcDirection {
    match d {
        Direction::Ingress => TcDirection::Ingress,
        Direction::Egress => TcDirection::Egress,
        Direction::Both => TcDirection::Both,
    }
}

fn action(a: Action) -> TcAction {
    match a {
        Action::Mirror => TcAction::Mirror,
        Action::Redirect => TcAction::Redirect,
    }
}

impl TcController {
    pub fn new(
        stores: Stores,
        bridge: Arc<dyn Bridge>,
        flows: Arc<dyn Flows>,
        links: Arc<dyn Links + Send + Sync>,
    ) -> TcController {
        TcController {
            stores,
            bridge,
            flows,
            links,
            state: Mutex::new(State::default()),
            ports: Mutex::new(()),
        }
    }

    /// The flow owner of a TC's mark flows.
    pub fn owner_of(&self, tc: &str) -> Owner {
        lock(&self.state).owner(tc)
    }

    /// Reconcile TrafficControl `name` with the stores and the bridge.
    pub fn sync(&self, name: &str) -> Result<(), SyncError> {
        let tc = self.stores.traffic_controls.get(name);
        let result = match tc.as_deref() {
            None => {
                self.teardown(name);
                return Ok(());
            }
            Some(TrafficControl { spec: Err(e), .. }) => {
                // What an earlier valid version installed must not stay behind.
                self.teardown(name);
                Err(SyncError::Invalid(e.clone()))
            }
            Some(tc @ TrafficControl { spec: Ok(_), .. }) => match self.check_devices(tc) {
                Err(e) => {
                    // Nothing of this TC may stay on a link the host uses.
                    if e.is_permanent() {
                        self.teardown(name);
                    }
                    Err(e)
                }
                Ok(()) => self.sync_valid(tc),
            },
        };
        {
            let mut st = lock(&self.state);
            if matches!(result, Err(SyncError::TunnelClash { .. })) {
                st.clashing.insert(name.to_string());
            } else {
                st.clashing.remove(name);
            }
        }
        if let Err(e) = &result {
            let mut st = lock(&self.state);
            let s = st.tcs.entry(name.to_string()).or_insert_with(|| TcStatus {
                name: name.to_string(),
                ..Default::default()
            });
            s.last_error = Some(e.to_string());
        }
        result
    }

    /// Refuse `device` ports the host uses itself, before anything is created; see
    /// `device`. Reads the kernel only.
    fn check_devices(&self, tc: &TrafficControl) -> Result<(), SyncError> {
        let Ok(spec) = &tc.spec else {
            return Ok(());
        };
        let devices = [Some(&spec.target_port), spec.return_port.as_ref()]
            .into_iter()
            .flatten()
            .filter_map(|p| match p {
                TcPort::Device { name } => Some(name),
                _ => None,
            });
        for name in devices {
            let link = match self.links.link_by_name(name) {
                Ok(l) => l,
                // Not there (yet): OVS attaches it when it appears.
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(SyncError::Link(e)),
            };
            let addrs = self
                .links
                .addrs(Some(link.index))
                .map_err(SyncError::Link)?;
            let routes = self.links.routes(link.index).map_err(SyncError::Link)?;
            if let Some(reason) = device::refusal(&link, &addrs, &routes, &self.en_links()) {
                return Err(SyncError::DeviceRefused {
                    tc: tc.metadata.name.clone(),
                    device: name.clone(),
                    reason,
                });
            }
        }
        Ok(())
    }

    /// The ExternalNode's NIC and uplink, attached (OVSDB's host and uplink ports) or
    /// about to be (the link holding this node's ExternalNode's IPs, and its uplink name).
    fn en_links(&self) -> Vec<String> {
        let ifs = self.bridge.interfaces();
        let mut names: Vec<String> = ifs
            .iter()
            .filter(|i| matches!(i.role, Role::Host | Role::Uplink))
            .map(|i| i.port.name.clone())
            .collect();
        for en in self.stores.external_nodes.list() {
            let Ok(spec) = &en.spec else { continue };
            for ip in spec.interfaces.iter().flat_map(|i| i.ips.iter()) {
                if let Ok(Some(l)) = self.links.link_holding(*ip) {
                    names.push(crate::netlink::uplink_name(&l.name));
                    names.push(l.name);
                }
            }
        }
        names
    }

    fn sync_valid(&self, tc: &TrafficControl) -> Result<(), SyncError> {
        let Ok(spec) = &tc.spec else {
            return Ok(());
        };
        let name = tc.metadata.name.as_str();
        let (target, ret) = {
            let _g = lock(&self.ports);
            let ifs = self.bridge.interfaces();
            let target = self.ensure_port(&ifs, &spec.target_port)?;
            let ret = match &spec.return_port {
                Some(p) => {
                    let r = self.ensure_port(&ifs, p)?;
                    let owner = lock(&self.state).owner(&format!("port:{}", r.0));
                    self.flows
                        .apply(owner, vec![pipeline::tc_return_flow(r.1)])
                        .map_err(SyncError::Flows)?;
                    Some(r)
                }
                None => None,
            };
            // Ports this TC used before and no longer does (docs/design.md#the-old-return-port-is-released).
            let previous: Vec<String> = {
                let st = lock(&self.state);
                st.tcs
                    .get(name)
                    .map(|s| {
                        s.target_port
                            .iter()
                            .chain(s.return_port.iter())
                            .map(|(n, _)| n.clone())
                            .collect()
                    })
                    .unwrap_or_default()
            };
            for old in previous {
                if old != target.0 && ret.as_ref().is_none_or(|r| r.0 != old) {
                    self.release_port(&ifs, &old);
                }
            }
            (target, ret)
        };
        let ifs = self.bridge.interfaces();
        let pods = select::effective_pods(
            tc,
            spec,
            &self.stores.pods,
            &self.stores.namespaces,
            &self.stores.traffic_controls,
        );
        let mut pod_names = Vec::new();
        let mut ofports = Vec::new();
        for p in &pods {
            let key = p.metadata.key();
            if let Some(of) = ifs.pod(&key).and_then(|i| i.ofport()) {
                ofports.push(of);
                pod_names.push(key);
            }
        }
        ofports.sort_unstable();
        let flows = pipeline::tc_mark_flows(
            &ofports,
            target.1,
            direction(spec.direction),
            action(spec.action),
        );
        let n = flows.len();
        let owner = self.owner_of(name);
        self.flows.apply(owner, flows).map_err(SyncError::Flows)?;
        lock(&self.state).tcs.insert(
            name.to_string(),
            TcStatus {
                name: name.to_string(),
                effective_pods: pod_names,
                target_port: Some(target),
                return_port: ret,
                flows: n,
                last_error: None,
            },
        );
        Ok(())
    }

    /// Create the TC port if missing (reusing only a `traffic-control` port:
    /// docs/design.md#only-traffic-control-ports-are-reused),
    /// read its ofport fresh and set no-flood on it.
    fn ensure_port(&self, ifs: &Interfaces, p: &TcPort) -> Result<(String, u32), SyncError> {
        let name = port_name(p);
        let perr = |error| SyncError::Port {
            port: name.clone(),
            error,
        };
        let spec = port_spec(p);
        match ifs.get(&name) {
            Some(i) if i.role != Role::TrafficControl => {
                return Err(SyncError::PortConflict {
                    port: name.clone(),
                    role: i.role.describe(),
                });
            }
            Some(i) if matches!(&spec.kind, PortKind::Tunnel { kind, .. } if *kind != i.port.if_type) =>
            {
                // Same name, other type: an older tether wrote `gre`/`erspan` for an IPv6
                // remote. The netdev must be re-created anyway: delete and create.
                log::info!(
                    "tc port={name} type {} -> {}; re-creating it",
                    i.port.if_type,
                    match &spec.kind {
                        PortKind::Tunnel { kind, .. } => kind.as_str(),
                        _ => "",
                    }
                );
                self.bridge
                    .delete_ports(std::slice::from_ref(i.uuid()))
                    .map_err(perr)?;
                self.bridge.create_port(&spec).map_err(perr)?;
            }
            Some(i) => {
                // Same name, other options: written by an older tether (the ERSPAN
                // hardware ID was decimal). Fixed in place, the ofport stays.
                if let PortKind::Tunnel { options, .. } = &spec.kind {
                    if i.port.options != *options {
                        log::info!("tc port={name} options {:?} -> {options:?}", i.port.options);
                        self.bridge
                            .set_interface_options(&name, options)
                            .map_err(perr)?;
                    }
                }
            }
            None => {
                if let PortKind::Tunnel { kind, options } = &spec.kind {
                    let identity = tunnel_identity(kind, options);
                    let clash = ifs.iter().find(|i| {
                        i.port.name != name
                            && identity.is_some()
                            && tunnel_identity(&i.port.if_type, &i.port.options) == identity
                    });
                    if let Some(other) = clash {
                        return Err(SyncError::TunnelClash {
                            port: name.clone(),
                            other: other.port.name.clone(),
                            other_tcs: self.tcs_using(&other.port.name),
                            identity: identity.unwrap_or_default(),
                        });
                    }
                }
                self.bridge.create_port(&spec).map_err(perr)?;
            }
        }
        let ofport = self.bridge.ofport(&name).map_err(perr)?;
        self.flows
            .set_no_flood(ofport, true)
            .map_err(SyncError::Flows)?;
        if matches!(p, TcPort::OvsInternal { .. }) {
            self.bring_up(&name)?;
        }
        Ok((name, ofport))
    }

    /// An `ovsInternal` port's netdev must be up, or nothing sent to it reaches a capture
    /// tool on it (ovs-vswitchd creates it down, and again after every restart). Checked at
    /// every sync, so a port found at start or re-created by a restarted switch comes up
    /// too. As Antrea (`controller.go`): retried every 1 s for up to 5 s while the netdev
    /// is not there yet.
    fn bring_up(&self, name: &str) -> Result<(), SyncError> {
        let mut tries = 0;
        loop {
            let r = match self.links.link_by_name(name) {
                Ok(l) if l.is_up() => return Ok(()),
                Ok(l) => self.links.set_up(l.index),
                Err(e) => Err(e),
            };
            match r {
                Ok(()) => {
                    log::info!("tc port={name} brought up");
                    return Ok(());
                }
                Err(e) if e.is_not_found() && tries < OVS_INTERNAL_UP_TRIES => {
                    tries += 1;
                    self.links.pause(OVS_INTERNAL_UP_RETRY);
                }
                Err(error) => {
                    return Err(SyncError::Up {
                        port: name.to_string(),
                        error,
                    });
                }
            }
        }
    }

    /// The TCs in the store whose target or return port is `port`.
    fn tcs_using(&self, port: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .stores
            .traffic_controls
            .list()
            .iter()
            .filter(|tc| {
                tc.spec.as_ref().is_ok_and(|s| {
                    port_name(&s.target_port) == port
                        || s.return_port.as_ref().is_some_and(|r| port_name(r) == port)
                })
            })
            .map(|tc| tc.metadata.name.clone())
            .collect();
        v.sort();
        v
    }

    /// Names of the ports some valid TC in the store wants.
    fn referenced_ports(&self) -> BTreeSet<String> {
        let mut used = BTreeSet::new();
        for tc in self.stores.traffic_controls.list() {
            if let Ok(spec) = &tc.spec {
                used.insert(port_name(&spec.target_port));
                if let Some(r) = &spec.return_port {
                    used.insert(port_name(r));
                }
            }
        }
        used
    }

    /// Delete a TC port when no TC references it any more (shared ports are ref-counted by
    /// the stores themselves). Failures are logged; the orphan sweep retries them.
    fn release_port(&self, ifs: &Interfaces, port: &str) {
        if self.referenced_ports().contains(port) {
            return;
        }
        let Some(i) = ifs.get(port).filter(|i| i.role == Role::TrafficControl) else {
            return;
        };
        let owner_key = format!("port:{port}");
        let owner = lock(&self.state).owners.get(&owner_key).copied();
        if let Some(id) = owner {
            if let Err(e) = self.flows.remove(Owner::new(Category::TRAFFIC_CONTROL, id)) {
                log::warn!("port={port} removing return-port flows failed: {e}");
            }
        }
        if let Some(of) = i.ofport() {
            let _ = self.flows.set_no_flood(of, false);
        }
        match self.bridge.delete_ports(std::slice::from_ref(i.uuid())) {
            Ok(()) => log::info!("port={port} deleted: no TrafficControl uses it"),
            Err(e) => log::warn!("port={port} delete failed: {e}"),
        }
    }

    fn teardown(&self, name: &str) {
        let owner = lock(&self.state).owners.get(name).copied();
        if let Some(id) = owner {
            if let Err(e) = self.flows.remove(Owner::new(Category::TRAFFIC_CONTROL, id)) {
                log::warn!("tc={name} removing flows failed: {e}");
            }
        }
        let prev = lock(&self.state).tcs.remove(name);
        let _g = lock(&self.ports);
        let ifs = self.bridge.interfaces();
        if let Some(s) = prev {
            for (p, _) in s.target_port.iter().chain(s.return_port.iter()) {
                self.release_port(&ifs, p);
            }
        }
    }

    /// After the first full sync: delete `traffic-control` ports no TC claims (e.g. their TC
    /// was deleted while tether was down). Returns the names deleted.
    pub fn sweep_orphans(&self) -> Vec<String> {
        let _g = lock(&self.ports);
        let ifs = self.bridge.interfaces();
        let used = self.referenced_ports();
        let orphans: Vec<_> = ifs
            .with_role(&Role::TrafficControl)
            .filter(|i| !used.contains(&i.port.name))
            .map(|i| (i.port.name.clone(), i.uuid().clone()))
            .collect();
        if orphans.is_empty() {
            return Vec::new();
        }
        let uuids: Vec<_> = orphans.iter().map(|(_, u)| u.clone()).collect();
        match self.bridge.delete_ports(&uuids) {
            Ok(()) => {
                let names: Vec<String> = orphans.into_iter().map(|(n, _)| n).collect();
                log::info!(
                    "deleted orphaned traffic-control ports: {}",
                    names.join(",")
                );
                names
            }
            Err(e) => {
                log::warn!("deleting orphaned traffic-control ports failed: {e}");
                Vec::new()
            }
        }
    }

    /// Re-apply no-flood to every traffic-control port with a valid ofport (Antrea's
    /// `restorePortConfigs`, run at start; ports with ofport -1 are skipped, Antrea #4674).
    pub fn restore_no_flood(&self) -> Result<(), OfError> {
        for i in self.bridge.interfaces().with_role(&Role::TrafficControl) {
            if let Some(of) = i.ofport() {
                self.flows.set_no_flood(of, true)?;
            }
        }
        Ok(())
    }

    pub fn status(&self) -> Vec<TcStatus> {
        let mut v: Vec<TcStatus> = lock(&self.state).tcs.values().cloned().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// TCs refused for a tunnel clash with another TC (`route` resyncs them with every
    /// TC change: the other one may have gone).
    pub fn clashing(&self) -> BTreeSet<String> {
        lock(&self.state).clashing.clone()
    }
}
