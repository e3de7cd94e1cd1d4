//! `TcController::sync(name)`: level-triggered reconciliation of one TrafficControl.
//! A TC gone from the store, or invalid, is torn down; a `device` target the host uses is
//! refused before anything is created (`check_devices`, the rule in `device`). Otherwise:
//! snapshot (the stores, the interface store) → plan (`plan`: port steps, flows, ports to
//! release; pure) → apply through the `Bridge` and `Flows` traits, port decisions under
//! the port lock: every port to create in one OVSDB transaction, the ofports of
//! just-created ports in one more (the others come from the snapshot), no-flood for all at
//! once, internal ports brought up, and the TC's mark and return flows as ONE atomic
//! bundle → record what was installed. The controller keeps only that record (per TC:
//! ports, effective Pods, flow count), the flow owners' ids, the TCs refused for a tunnel
//! clash, and errors for status; the truth is the stores and OVSDB.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use sha1::{Digest, Sha1};

use super::device;
use super::error::{SyncError, TcStatus};
use super::plan::{FlowOwners, PortPlan, PortStep, plan_flows, plan_port, plan_release};
use super::ports::port_name;
use super::select;
use crate::controller::interfaces::{Interfaces, Role};
use crate::controller::{Bridge, Flows};
use crate::k8s::{Stores, TcPort, TrafficControl};
use crate::netlink::{DevSysctl, Links};
use crate::openflow::{Category, Flow, OfError, Owner};
use crate::ovsdb::{OvsdbError, PortSpec};

/// How often and how long an `ovsInternal` port's netdev is waited for (Antrea: every 1 s
/// for up to 5 s).
const OVS_INTERNAL_UP_RETRY: Duration = Duration::from_secs(1);
const OVS_INTERNAL_UP_TRIES: u32 = 5;

#[derive(Default)]
struct State {
    /// What is installed per TC.
    tcs: HashMap<String, TcStatus>,
    /// Flow owners: TC names, target ports (`target:<name>`) and return ports
    /// (`port:<name>`) → object id.
    owners: HashMap<String, u32>,
    /// The object ids in `owners`, to step past a hash collision.
    taken: HashSet<u32>,
    /// TCs refused for a tunnel that would clash with another's: re-checked whenever any
    /// TC changes (the other one may have gone).
    clashing: BTreeSet<String>,
}

impl State {
    fn owner(&mut self, key: &str) -> Owner {
        if let Some(id) = self.owners.get(key) {
            return Owner::new(Category::TRAFFIC_CONTROL, *id);
        }
        // Two keys with one hash (about 1 in 4,000 at 1,000 TCs): the later one steps to
        // the next free id, and is the only owner whose cookie depends on the order.
        let mut id = object_id(key);
        while self.taken.contains(&id) {
            id = id % 0x7fff_ffff + 1;
        }
        self.taken.insert(id);
        self.owners.insert(key.to_string(), id);
        Owner::new(Category::TRAFFIC_CONTROL, id)
    }
}

/// The cookie object of a TrafficControl's mark flows (`key` = its name), of a target
/// port's flow (`target:<name>`) or of a return port's (`port:<name>`): the first 4 bytes
/// of `sha1(key)` with the top bit
/// clear, never 0. Stable across restarts, so `tether flows --tc NAME` finds a TC's flows
/// by its name alone, with or without a running daemon.
pub fn object_id(key: &str) -> u32 {
    let d = Sha1::digest(key.as_bytes());
    let id = u32::from_be_bytes([d[0], d[1], d[2], d[3]]) & 0x7fff_ffff;
    id.max(1)
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
        // Port decisions (create, reuse, release) are serialized across workers: two TCs
        // sharing a port must not both create it, nor one delete it while another adopts it.
        let ports = lock(&self.ports);
        let ifs = self.bridge.interfaces();
        let target = plan_port(&ifs, &spec.target_port, |p| self.tcs_using(p))?;
        let ret = match &spec.return_port {
            Some(p) => Some(plan_port(&ifs, p, |p| self.tcs_using(p))?),
            None => None,
        };
        let plans: Vec<&PortPlan> = std::iter::once(&target).chain(ret.as_ref()).collect();
        let ofports = self.apply_ports(&plans)?;
        drop(ports);

        let pods = select::effective_pods(
            tc,
            spec,
            &self.stores.pods,
            &self.stores.namespaces,
            &self.stores.traffic_controls,
        );
        let (pod_names, pod_ofports): (Vec<String>, Vec<u32>) = pods
            .iter()
            .filter_map(|p| {
                let key = p.metadata.key();
                let of = ifs.pod(&key).and_then(|i| i.ofport())?;
                Some((key, of))
            })
            .unzip();
        let ret_port = ret.as_ref().map(|r| (r.name.clone(), ofports[1]));
        let owners = {
            let mut st = lock(&self.state);
            FlowOwners {
                marks: st.owner(name),
                target: st.owner(&format!("target:{}", target.name)),
                ret: ret_port
                    .as_ref()
                    .map(|(n, _)| st.owner(&format!("port:{n}"))),
            }
        };
        let flows = plan_flows(
            &pod_ofports,
            owners,
            ofports[0],
            ret_port.as_ref().map(|(_, of)| *of),
            spec.direction,
            spec.action,
        );
        let n = flows.marks.1.len();
        let now: Vec<&str> = std::iter::once(target.name.as_str())
            .chain(ret.as_ref().map(|r| r.name.as_str()))
            .collect();
        self.install(name, flows.sets(), &now)?;
        let target_port = (target.name.clone(), ofports[0]);
        lock(&self.state).tcs.insert(
            name.to_string(),
            TcStatus {
                name: name.to_string(),
                effective_pods: pod_names,
                target_port: Some(target_port),
                return_port: ret_port,
                flows: n,
                last_error: None,
            },
        );
        Ok(())
    }

    /// Apply TC `name`'s flow sets as one bundle. Ports it stopped using (not in `now`; its
    /// old return port, say) lose their flows in the same bundle, then go. Deciding which
    /// needs the port lock until they are gone (a TC adopting one meanwhile must not lose
    /// its flow): held across the bundle only then; a TC keeping its ports (every
    /// steady-state sync) never waits on it.
    fn install(
        &self,
        name: &str,
        mut sets: Vec<(Owner, Vec<Flow>)>,
        now: &[&str],
    ) -> Result<(), SyncError> {
        let previous = self.previous_ports(name);
        let releasing = !previous.iter().all(|p| now.contains(&p.as_str()));
        let guard = releasing.then(|| lock(&self.ports));
        let release = match guard {
            Some(_) => plan_release(&previous, now, &self.referenced_ports()),
            None => Vec::new(),
        };
        sets.extend(
            self.port_owners(&release)
                .into_iter()
                .map(|o| (o, Vec::new())),
        );
        if let Some((_, e)) = self.flows.apply_many(sets).into_iter().next() {
            return Err(SyncError::Flows(e));
        }
        if !release.is_empty() {
            let ifs = self.bridge.interfaces();
            for p in &release {
                self.release_port(&ifs, p);
            }
        }
        Ok(())
    }

    /// Carry out the port steps; the ports' ofports, in order. Creates go out in one
    /// transaction, and only ports just created (or whose ofport the snapshot lacks) are
    /// asked for theirs, in one more.
    fn apply_ports(&self, plans: &[&PortPlan]) -> Result<Vec<u32>, SyncError> {
        let port_err = |port: &str| {
            let port = port.to_string();
            move |error| SyncError::Port { port, error }
        };
        let mut create: Vec<PortSpec> = Vec::new();
        for p in plans {
            match &p.step {
                PortStep::Keep { .. } => {}
                PortStep::Create(spec) if create.iter().any(|c| c.name == spec.name) => {}
                PortStep::Create(spec) => create.push(spec.clone()),
                PortStep::Recreate { old, spec } => {
                    log::info!("tc port={} type -> {:?}; re-creating it", p.name, spec.kind);
                    self.bridge
                        .delete_ports(std::slice::from_ref(old))
                        .map_err(port_err(&p.name))?;
                    create.push(spec.clone());
                }
                PortStep::SetOptions { options, .. } => {
                    log::info!("tc port={} options -> {options:?}", p.name);
                    self.bridge
                        .set_interface_options(&p.name, options)
                        .map_err(port_err(&p.name))?;
                }
            }
        }
        if !create.is_empty() {
            // Named after the first port when the transaction fails as a whole.
            self.bridge
                .create_ports(&create)
                .map_err(port_err(&create[0].name))?;
        }
        let mut unknown: Vec<String> = plans
            .iter()
            .filter(|p| p.known_ofport().is_none())
            .map(|p| p.name.clone())
            .collect();
        // A return port that is also the target is one port.
        unknown.dedup();
        let fresh: HashMap<String, u32> = if unknown.is_empty() {
            HashMap::new()
        } else {
            let ofports = self.bridge.ofports(&unknown).map_err(|e| SyncError::Port {
                port: failed_port(&e).unwrap_or(&unknown[0]).to_string(),
                error: e,
            })?;
            unknown.iter().cloned().zip(ofports).collect()
        };
        let ofports: Vec<u32> = plans
            .iter()
            .map(|p| {
                p.known_ofport()
                    .or_else(|| fresh.get(&p.name).copied())
                    .unwrap_or_default()
            })
            .collect();
        self.flows
            .set_no_flood_many(&ofports, true)
            .map_err(SyncError::Flows)?;
        for p in plans.iter().filter(|p| p.internal) {
            self.bring_up(&p.name)?;
        }
        Ok(ofports)
    }

    /// The ports TC `name` used, as last installed.
    fn previous_ports(&self, name: &str) -> Vec<String> {
        lock(&self.state)
            .tcs
            .get(name)
            .map(|s| {
                s.target_port
                    .iter()
                    .chain(s.return_port.iter())
                    .map(|(n, _)| n.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The flow owners of these ports' own flows: a target's drop flow, a return port's
    /// flow (those that have one).
    fn port_owners(&self, ports: &[String]) -> Vec<Owner> {
        let st = lock(&self.state);
        ports
            .iter()
            .flat_map(|p| [format!("target:{p}"), format!("port:{p}")])
            .filter_map(|k| st.owners.get(&k))
            .map(|id| Owner::new(Category::TRAFFIC_CONTROL, *id))
            .collect()
    }

    /// An `ovsInternal` port's netdev must be up, or nothing sent to it reaches a capture
    /// tool on it (ovs-vswitchd creates it down, and again after every restart). Checked at
    /// every sync, so a port found at start or re-created by a restarted switch comes up
    /// too. As Antrea (`controller.go`): retried every 1 s for up to 5 s while the netdev
    /// is not there yet.
    ///
    /// Before it comes up, its IPv6 is turned off: a capture port must stay silent, but the
    /// kernel would send a router solicitation, an MLD report and a DAD probe out of it,
    /// into the bridge, which floods each to every port (at 5,000 ports, 10 targets' 30
    /// packets were 150,000 sends and seconds of ovs-vswitchd's time during a cold start:
    /// `netdev_sent`/`xlate_actions_too_many_output` in its `coverage/show`). Capture
    /// tools read it through packet sockets, which IPv6 being off does not touch.
    fn bring_up(&self, name: &str) -> Result<(), SyncError> {
        let mut tries = 0;
        loop {
            let r = match self.links.link_by_name(name) {
                Ok(l) if l.is_up() => return Ok(()),
                Ok(l) => {
                    if let Err(e) = self.links.set_sysctl(name, DevSysctl::Ipv6DisableIpv6, "1") {
                        log::warn!(
                            "tc port={name}: turning its IPv6 off failed ({e}); it may send its own packets into the bridge"
                        );
                    }
                    self.links.set_up(l.index)
                }
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
        for owner in self.port_owners(&[port.to_string()]) {
            if let Err(e) = self.flows.remove(owner) {
                log::warn!("port={port} removing its flows failed: {e}");
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

    /// TC `name` is gone (or invalid): its mark flows and the flows of the ports it alone
    /// used go in ONE bundle, then those ports.
    fn teardown(&self, name: &str) {
        let previous = self.previous_ports(name);
        lock(&self.state).tcs.remove(name);
        let _g = lock(&self.ports);
        let release = plan_release(&previous, &[], &self.referenced_ports());
        let tc_owner = lock(&self.state)
            .owners
            .get(name)
            .map(|id| Owner::new(Category::TRAFFIC_CONTROL, *id));
        let sets = tc_owner
            .into_iter()
            .chain(self.port_owners(&release))
            .map(|o| (o, Vec::new()))
            .collect();
        for (owner, e) in self.flows.apply_many(sets) {
            log::warn!("tc={name} removing flows of {owner} failed: {e}");
        }
        let ifs = self.bridge.interfaces();
        for p in &release {
            self.release_port(&ifs, p);
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

/// The port an OVSDB error names, when it names one.
fn failed_port(e: &OvsdbError) -> Option<&str> {
    match e {
        OvsdbError::PortFailed { name, .. } | OvsdbError::NotFound { name, .. } => Some(name),
        _ => None,
    }
}
