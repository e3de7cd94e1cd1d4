//! `EnController`: sync, reset's `restore_all`, the preview, and status for this node's
//! ExternalNode. The truth is the store, OVSDB (the host and uplink ports, the step
//! record) and the kernel; the controller keeps only the status it reports. Here: the
//! snapshot a sync decides from and carrying out `plan::decide`'s plan (`reconcile`); in
//! `steps` the takeover and its undoing, in `recover` the step record, in `orphans` NICs
//! given back after OVS lost their host port, in `held` the configuration kept while
//! attached, in `settle` the waits and the identity check, in `door` the uplink's held
//! values and the side door status reports, in `preview` the plan shown.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use sha1::{Digest, Sha1};

mod door;
mod held;
mod orphans;
mod preview;
mod recover;
mod settle;
mod steps;

pub use preview::EnPreview;
use steps::Made;

use super::heldfile::HeldFiles;
use super::identity;
use super::plan::{Attach, Attached, EnPlan, Nic, NicPlan, Snapshot, Wanted, decide};
use super::record::{Hint, Phase, RECORD_KEY, Record, Step};
#[cfg(feature = "test-hooks")]
use super::types::CRASH_ENV;
use super::types::{EnConfig, EnError, EnStatus, external_entity_name, host_external_ids};
use super::uplink;
use super::verdict::{self, OvsPort};
use crate::controller::interfaces::{Interface, Role};
use crate::controller::{Bridge, Datapath, Flows, HostNetwork, NoHostNetwork};
use crate::k8s::{ExternalNode, Stores};
use crate::netlink::{
    Link, LinkError, Links, apply, apply_best_effort, capture, plan_move, plan_sysctls,
    read_sysctls, uplink_name,
};
use crate::openflow::{Category, Owner};
use crate::ovsdb::{OvsdbError, PortKind, PortSpec, Uuid};
use crate::pipeline::externalnode::{bypass_flows, uplink_pair_flows};

pub struct EnController {
    cfg: EnConfig,
    stores: Stores,
    bridge: Arc<dyn Bridge>,
    flows: Arc<dyn Flows>,
    links: Arc<dyn Links + Send + Sync>,
    datapath: Arc<dyn Datapath>,
    /// The host's network manager, told before a takeover and after a restore.
    hostnet: Arc<dyn HostNetwork>,
    status: Mutex<EnStatus>,
    /// One operation at a time: `sync` (a worker), `restore_all` (`tether reset`), and the
    /// test-only `recover` and `replay` all take it, held across their OVSDB, OpenFlow and
    /// netlink requests (docs/design.md#threads).
    serial: Mutex<()>,
    /// The NIC whose host port got its held configuration back, and until when that stays
    /// authoritative (`held`).
    put_back: Mutex<Option<(String, std::time::Instant)>>,
    /// The held configuration's copy outside OVS (`EnConfig::state_dir`).
    held_files: Option<HeldFiles>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The flow owner of one NIC's uplink pair: stable across restarts (derived from the name,
/// high bit set so it never equals the bypass owner 0).
pub fn nic_owner(nic: &str) -> Owner {
    let d = Sha1::digest(nic.as_bytes());
    let id = u32::from_be_bytes([d[0], d[1], d[2], d[3]]) | 0x8000_0000;
    Owner::new(Category::EXTERNAL_NODE, id)
}

const BYPASS_OWNER: Owner = Owner {
    category: Category::EXTERNAL_NODE,
    object: 0,
};

fn link_err(op: impl Into<String>) -> impl FnOnce(LinkError) -> EnError {
    let op = op.into();
    move |error| EnError::Link { op, error }
}

fn ovs_err(op: impl Into<String>) -> impl FnOnce(OvsdbError) -> EnError {
    let op = op.into();
    move |error| EnError::Ovsdb { op, error }
}

fn join(ips: &[IpAddr]) -> String {
    ips.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn many(mut errors: Vec<EnError>) -> Result<(), EnError> {
    match errors.len() {
        0 => Ok(()),
        1 => Err(errors.remove(0)),
        _ => Err(EnError::Many(errors)),
    }
}

impl EnController {
    pub fn new(
        cfg: EnConfig,
        stores: Stores,
        bridge: Arc<dyn Bridge>,
        flows: Arc<dyn Flows>,
        links: Arc<dyn Links + Send + Sync>,
        datapath: Arc<dyn Datapath>,
    ) -> EnController {
        let held_files = cfg.state_dir.as_ref().map(HeldFiles::new);
        EnController {
            cfg,
            held_files,
            stores,
            bridge,
            flows,
            links,
            datapath,
            hostnet: Arc::new(NoHostNetwork),
            status: Mutex::new(EnStatus {
                step: "waiting".into(),
                ..EnStatus::default()
            }),
            serial: Mutex::new(()),
            put_back: Mutex::new(None),
        }
    }

    /// Tell the host's network manager about takeovers (the daemon: systemd-networkd's
    /// runtime files; by default nothing is told).
    pub fn with_host_network(mut self, hostnet: Arc<dyn HostNetwork>) -> EnController {
        self.hostnet = hostnet;
        self
    }

    /// The store key of this node's ExternalNode.
    pub fn key(&self) -> String {
        format!("{}/{}", self.cfg.namespace, self.cfg.node_name)
    }

    /// The last sync's status, with the ports checked as they are now (`cut_off`).
    pub fn status(&self) -> EnStatus {
        let mut st = lock(&self.status).clone();
        if st.step == "attached" {
            st.cut_off = self.cut_off(&st);
        }
        st
    }

    /// Why the attached NIC is cut off right now, if it is: its host or uplink port gone
    /// from the bridge, or without an ofport (OVS could not open the device). A sync to
    /// repair it is already queued (port changes route to the ExternalNode).
    fn cut_off(&self, st: &EnStatus) -> Option<String> {
        let ifs = self.bridge.interfaces();
        let check = |name: Option<&String>, what: &str| {
            let name = name?;
            match ifs.get(name) {
                None => Some(format!("{what} port {name} is not on the bridge")),
                Some(i) if i.ofport().is_none() => Some(format!(
                    "{what} port {name} has no ofport{}",
                    i.port
                        .error
                        .as_ref()
                        .map(|e| format!(" ({e})"))
                        .unwrap_or_default()
                )),
                Some(_) => None,
            }
        };
        check(st.nic.as_ref(), "host").or_else(|| check(st.uplink.as_ref(), "uplink"))
    }

    /// Finish or roll back whatever step a crash interrupted, install the bypass flows,
    /// and report what OVSDB says is attached: the first part of every `sync`, alone.
    /// Tests only (the daemon's first `sync`, queued at start, does it).
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn recover(&self) -> Result<(), EnError> {
        let _g = lock(&self.serial);
        let mut errors = Vec::new();
        if let Err(e) = self.finish_recorded() {
            errors.push(e);
        }
        if let Err(e) = self.install_bypass() {
            errors.push(e);
        }
        self.refresh_status();
        self.finish(many(errors))
    }

    /// Give every NIC back (`tether reset`): finish or roll back a step a crash left
    /// recorded, then restore each NIC OVSDB says is attached, whatever the ExternalNode
    /// says (no API server needed). Returns the NICs restored.
    pub fn restore_all(&self) -> Result<Vec<String>, EnError> {
        let _g = lock(&self.serial);
        self.finish_recorded()?;
        let mut errors = Vec::new();
        // A `<nic>~` whose host port OVS lost: given back from the state directory.
        let mut restored = self.give_back_orphans().unwrap_or_else(|e| {
            errors.push(e);
            Vec::new()
        });
        for a in self.attached() {
            log::info!("reset: restoring nic={}", a.nic);
            match self.restore(&a) {
                Ok(()) => restored.push(a.nic.clone()),
                Err(e) => errors.push(e),
            }
        }
        many(errors).map(|()| restored)
    }

    /// Level-triggered: make the host match this node's ExternalNode in the store
    /// (absent → restore every attached NIC). Nothing happens before the store's first
    /// list: "not listed yet" must not read as "deleted".
    pub fn sync(&self) -> Result<(), EnError> {
        let _g = lock(&self.serial);
        let r = self.sync_locked();
        self.refresh_status();
        self.finish(r)
    }

    /// Re-install the uplink and bypass flows with freshly read ofports (after an OpenFlow
    /// reconnect: a restarted ovs-vswitchd has no flows and may have renumbered ports).
    /// Tests only: the daemon gets the same from `sync` (queued after every reconnect).
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn replay(&self) -> Result<(), EnError> {
        let _g = lock(&self.serial);
        let r = self.keep_pairs();
        let bypass = self.install_bypass();
        self.refresh_status();
        self.finish(many(r.err().into_iter().chain(bypass.err()).collect()))
    }

    /// The uplink flows of every NIC OVSDB says is attached, with fresh ofports.
    fn keep_pairs(&self) -> Result<(), EnError> {
        let errors = self
            .attached()
            .iter()
            .filter_map(|a| self.install_pair(&a.nic, &a.uplink).err())
            .collect();
        many(errors)
    }

    fn finish(&self, r: Result<(), EnError>) -> Result<(), EnError> {
        let mut st = lock(&self.status);
        match &r {
            Ok(()) => st.last_error = None,
            Err(e) => {
                log::warn!("externalnode sync failed en={} err={e}", self.key());
                st.last_error = Some(e.to_string());
            }
        }
        r
    }

    fn set_step(&self, step: String) {
        lock(&self.status).step = step;
    }

    /// Count a repair of something others did to the NIC's ports, for status.
    fn repaired(&self, what: String) {
        let mut st = lock(&self.status);
        st.repairs += 1;
        st.last_repair = Some(what);
    }

    fn refresh_status(&self) {
        let attached = self.attached();
        let ifs = self.bridge.interfaces();
        let door = attached.first().and_then(|a| self.side_door_now(a));
        let mut st = lock(&self.status);
        st.bypass_flows = bypass_flows(&self.cfg.bypass_rules).len();
        match attached.first() {
            Some(a) => {
                st.step = "attached".into();
                st.nic = Some(a.nic.clone());
                st.uplink = Some(a.uplink.clone());
                st.host_ofport = ifs.get(&a.nic).and_then(|i| i.ofport());
                st.uplink_ofport = ifs.get(&a.uplink).and_then(|i| i.ofport());
                st.entity_name = a.ids.get("entity-name").cloned();
                st.addresses = a
                    .ids
                    .get("ip-address")
                    .map(|s| s.split(',').map(str::to_string).collect())
                    .unwrap_or_default();
                st.identity = Some(self.identity_now(a));
                Self::log_side_door(&a.uplink, st.side_door.as_ref(), door.as_ref());
                st.side_door = door;
            }
            None => {
                *st = EnStatus {
                    step: "waiting".into(),
                    bypass_flows: st.bypass_flows,
                    last_error: st.last_error.take(),
                    repairs: st.repairs,
                    last_repair: st.last_repair.take(),
                    ..EnStatus::default()
                };
            }
        }
    }

    /// Recovery first (a recorded step a crash or a failure left), then: before the first
    /// list, keep what OVSDB says is attached forwarding (its flows, with fresh ofports);
    /// after it, reconcile with the store. The bypass flows need no ExternalNode.
    fn sync_locked(&self) -> Result<(), EnError> {
        let r = self.finish_recorded().and_then(|()| {
            // A `<nic>~` whose host port OVS lost gets the VM's configuration back first;
            // the reconcile below then finds the NIC and takes it over again.
            self.give_back_orphans()?;
            if self.stores.external_nodes.has_synced() {
                self.reconcile()
            } else {
                self.keep_pairs()
            }
        });
        let bypass = self.install_bypass();
        many(r.err().into_iter().chain(bypass.err()).collect())
    }

    /// Make the host match this node's ExternalNode in the store (absent: restore every
    /// attached NIC): `snapshot` → `plan::decide` → carry it out.
    fn reconcile(&self) -> Result<(), EnError> {
        let snap = self.snapshot();
        let plan = decide(&snap);
        self.carry_out(&snap, plan)
    }

    /// What a sync decides from (`plan`): the store's ExternalNode, the link holding its
    /// IPs with the verdict on it, and the NICs OVSDB says are attached. Reads only.
    pub(super) fn snapshot(&self) -> Snapshot {
        let attached = self.attached();
        let key = self.key();
        let wanted = match self.stores.external_nodes.get(&key) {
            None => Wanted::Absent,
            Some(en) => self
                .wanted(&key, &en, &attached)
                .unwrap_or_else(Wanted::Unusable),
        };
        Snapshot {
            key,
            wanted,
            attached,
        }
    }

    fn wanted(
        &self,
        key: &str,
        en: &ExternalNode,
        attached: &[Attached],
    ) -> Result<Wanted, EnError> {
        let spec = en.spec.as_ref().map_err(|e| EnError::Invalid {
            en: key.to_string(),
            detail: e.to_string(),
        })?;
        let iface = spec.interfaces.first().ok_or_else(|| EnError::Invalid {
            en: key.to_string(),
            detail: "spec.interfaces is empty".into(),
        })?;
        let (link, ips, held) = match self.find_nic(&iface.ips) {
            Ok((link, ips)) => (link, ips, false),
            // A host port the kernel re-created is empty until its configuration is put
            // back: it is still the NIC (`held`).
            Err(EnError::NicNotFound { ips }) => match self.held_host_for(attached, &ips) {
                Some((link, ips)) => (link, ips, true),
                None => return Err(EnError::NicNotFound { ips }),
            },
            Err(e) => return Err(e),
        };
        let uplink = uplink_name(&link.name);
        // Exactly that name: the kernel also finds a link by an altname.
        let uplink_link = self
            .links
            .link_by_name(&uplink)
            .is_ok_and(|l| l.name == uplink);
        let refusal = self.refusal(&link);
        Ok(Wanted::Present {
            nic: Nic {
                link,
                ips,
                held,
                uplink,
                uplink_link,
                refusal,
            },
            wanted: iface.ips.clone(),
            entity: external_entity_name(&en.metadata.name, &iface.name),
            namespace: en.metadata.namespace.clone(),
        })
    }

    /// Carry out `plan`, decided from `snap`.
    fn carry_out(&self, snap: &Snapshot, plan: EnPlan) -> Result<(), EnError> {
        if let Some(e) = plan.refused {
            return Err(e);
        }
        let mut errors = Vec::new();
        if let (Some(p), Wanted::Present { nic, wanted, .. }) = (plan.nic, &snap.wanted) {
            if nic.held {
                log::info!(
                    "externalnode no link holds {}; host port {} held them",
                    join(&nic.ips),
                    nic.link.name
                );
            }
            let mine = snap.attached.iter().find(|a| a.nic == p.nic);
            self.attach(p, mine, snap, nic, wanted)?;
        }
        let keeping = matches!(snap.wanted, Wanted::Present { .. });
        for a in snap
            .attached
            .iter()
            .filter(|a| plan.release.contains(&a.nic))
        {
            if keeping {
                log::info!("externalnode releasing old nic={}", a.nic);
            } else {
                log::info!(
                    "externalnode absent en={} restoring nic={}",
                    snap.key,
                    a.nic
                );
            }
            if let Err(e) = self.restore(a) {
                errors.push(e);
            }
        }
        many(errors)
    }

    /// Carry out the plan for the NIC holding the IPs.
    fn attach(
        &self,
        p: NicPlan,
        mine: Option<&Attached>,
        snap: &Snapshot,
        nic: &Nic,
        wanted: &[IpAddr],
    ) -> Result<(), EnError> {
        let Wanted::Present {
            entity, namespace, ..
        } = &snap.wanted
        else {
            return Ok(());
        };
        match (p.attach, mine) {
            (Attach::Keep, Some(a)) => self.ensure_attached(a, p.relabel.as_ref())?,
            (Attach::Reattach, Some(a)) => {
                log::warn!(
                    "externalnode ports of {} outlived their links (reboot?); re-attaching",
                    a.nic
                );
                self.drop_ports_and_flows(a)?;
                self.takeover(&nic.link, entity, namespace, &nic.ips)?;
            }
            (Attach::Rebuild, Some(a)) => {
                log::warn!(
                    "externalnode uplink port missing nic={} uplink={}",
                    a.nic,
                    a.uplink
                );
                self.restore(a)?;
                let (link, ips) = self.find_nic(wanted)?;
                self.takeover(&link, entity, namespace, &ips)?;
                self.repaired(format!(
                    "uplink port {} was missing: {} given back and taken over again",
                    a.uplink, a.nic
                ));
            }
            (Attach::Takeover, _) | (_, None) => {
                self.takeover(&nic.link, entity, namespace, &nic.ips)?
            }
        }
        Ok(())
    }

    fn find_nic(&self, ips: &[IpAddr]) -> Result<(Link, Vec<IpAddr>), EnError> {
        verdict::find_nic(self.links.as_ref(), ips)
    }

    /// Why `link` must not be taken over, if it must not (`verdict`). Reads only.
    fn refusal(&self, link: &Link) -> Option<String> {
        let ifs = self.bridge.interfaces();
        let ovs = match ifs.get(&link.name) {
            // Our own host port (one that outlived its links after a reboot is replaced).
            None
            | Some(Interface {
                role: Role::Host, ..
            }) => OvsPort::None,
            Some(i) => OvsPort::Other(i.role.describe()),
        };
        let master = verdict::master_name(self.links.as_ref(), link);
        verdict::refusal(link, master.as_deref(), &self.cfg.bridge, ovs)
    }

    /// Every NIC OVSDB says is attached: host ports, with their uplink port, and whether
    /// the kernel still has their uplink link.
    pub(super) fn attached(&self) -> Vec<Attached> {
        let ifs = self.bridge.interfaces();
        let mut v: Vec<Attached> = ifs
            .with_role(&Role::Host)
            .map(|h| {
                let nic = h.port.name.clone();
                let uplink = h
                    .port
                    .external_ids
                    .get("uplink-name")
                    .cloned()
                    .unwrap_or_else(|| uplink_name(&nic));
                let uplink_port = ifs
                    .get(&uplink)
                    .filter(|u| u.role == Role::Uplink)
                    .map(|u| u.uuid().clone());
                // Only "not found" means gone: another error is no evidence of a reboot.
                let uplink_link = !self
                    .links
                    .link_by_name(&uplink)
                    .is_err_and(|e| e.is_not_found());
                Attached {
                    nic,
                    uplink,
                    host: h.uuid().clone(),
                    uplink_port,
                    uplink_link,
                    ids: h.port.external_ids.clone(),
                }
            })
            .collect();
        v.sort_by(|a, b| a.nic.cmp(&b.nic));
        v
    }

    /// A NIC that stays attached: its new labels (if any), the network manager told, its
    /// held configuration kept, the uplink's held values (`uplink`), its flows.
    fn ensure_attached(
        &self,
        a: &Attached,
        relabel: Option<&BTreeMap<String, String>>,
    ) -> Result<(), EnError> {
        if let Some(ids) = relabel {
            log::info!(
                "externalnode updating host port nic={} entity={} ips={}",
                a.nic,
                ids.get("entity-name").map(String::as_str).unwrap_or(""),
                ids.get("ip-address").map(String::as_str).unwrap_or("")
            );
            self.bridge
                .set_port_external_ids(&a.nic, ids)
                .map_err(ovs_err(format!("set external_ids of host port {}", a.nic)))?;
        }
        if let Err(e) = self.hostnet.attached(&a.nic, &a.uplink) {
            log::warn!("externalnode nic={}: {e}", a.nic);
        }
        self.keep_held(&a.nic)?;
        self.hold_uplink(&a.uplink);
        self.install_pair(&a.nic, &a.uplink)
    }

    fn install_pair(&self, nic: &str, uplink: &str) -> Result<(), EnError> {
        let host_of = self
            .bridge
            .ofport(nic)
            .map_err(ovs_err(format!("ofport of host port {nic}")))?;
        let uplink_of = self
            .bridge
            .ofport(uplink)
            .map_err(ovs_err(format!("ofport of uplink port {uplink}")))?;
        self.flows
            .apply(nic_owner(nic), uplink_pair_flows(host_of, uplink_of))
            .map_err(|error| EnError::Flows {
                op: format!("uplink flows {nic}<->{uplink}"),
                error,
            })
    }

    fn install_bypass(&self) -> Result<(), EnError> {
        self.flows
            .apply(BYPASS_OWNER, bypass_flows(&self.cfg.bypass_rules))
            .map_err(|error| EnError::Flows {
                op: "policy bypass flows".into(),
                error,
            })
    }
}
