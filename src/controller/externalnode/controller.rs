//! `EnController`: recover, sync, replay and status for this node's ExternalNode. The
//! truth is the store, OVSDB (the host and uplink ports, the step record) and the kernel;
//! the controller keeps only the status it reports.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use sha1::{Digest, Sha1};

use super::identity;
use super::record::{Hint, Phase, RECORD_KEY, Record, Step};
#[cfg(feature = "test-hooks")]
use super::types::CRASH_ENV;
use super::types::{EnConfig, EnError, EnStatus, external_entity_name, host_external_ids};
use super::verdict::{self, OvsPort};
use crate::controller::interfaces::{Interface, Role};
use crate::controller::{Bridge, Datapath, Flows, HostNetwork, NoHostNetwork, VswitchdDatapath};
use crate::k8s::Stores;
use crate::netlink::{
    Link, LinkError, Links, apply, apply_best_effort, capture, plan_move, plan_sysctls,
    read_sysctls, uplink_name,
};
use crate::openflow::{Category, Owner};
use crate::ovsdb::unixctl;
use crate::ovsdb::{OvsdbError, PortKind, PortSpec, Uuid};
use crate::pipeline::externalnode::{bypass_flows, uplink_pair_flows};

/// A NIC attached to the bridge, as OVSDB records it.
#[derive(Clone, Debug)]
struct Attached {
    nic: String,
    uplink: String,
    host: Uuid,
    uplink_port: Option<Uuid>,
    ids: BTreeMap<String, String>,
}

/// What undoing has found so far: the NIC once renamed back (for the move), and every
/// step's errors (undoing goes on after most of them: best effort).
#[derive(Default)]
struct Unwinding {
    nic_link: Option<Result<Link, EnError>>,
    errors: Vec<EnError>,
}

/// What this process made so far in the operation being done or undone: the ports, and
/// their ofports (host, uplink) once known.
#[derive(Default)]
struct Made {
    ports: Vec<Uuid>,
    ofports: Option<(u32, u32)>,
}

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
    /// One operation at a time (sync, recover and replay may come from different threads).
    serial: Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The flow owner of one NIC's uplink pair: stable across restarts (derived from the name,
/// high bit set so it never equals the bypass owner 0).
fn nic_owner(nic: &str) -> Owner {
    let d = Sha1::digest(nic.as_bytes());
    let id = u32::from_be_bytes([d[0], d[1], d[2], d[3]]) | 0x8000_0000;
    Owner::new(Category::EXTERNAL_NODE, id)
}

/// How long a release waits for ovs-vswitchd to apply the delete of the ports.
const DELETE_APPLIED_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// How long it then waits for the NIC's master to go (after `dpctl/del-if`): 50 x 100 ms.
const RELEASE_TRIES: u32 = 50;
/// How long the identity check after a takeover waits for ovs-vswitchd: 20 x 100 ms.
const IDENTITY_TRIES: u32 = 20;
const RELEASE_POLL: std::time::Duration = std::time::Duration::from_millis(100);

const BYPASS_OWNER: Owner = Owner {
    category: Category::EXTERNAL_NODE,
    object: 0,
};

/// The test-only crash point (see [`CRASH_ENV`]); compiled out of every build without the
/// `test-hooks` feature, so the shipped binary never reads the variable.
#[cfg(feature = "test-hooks")]
fn crash_point(phase: Phase, step: Step) {
    if let Ok(at) = std::env::var(CRASH_ENV) {
        if at == format!("{}-{}", phase.name(), step.name()) {
            log::error!("crash point reached at={at} ({CRASH_ENV}); aborting");
            std::process::abort();
        }
    }
}

#[cfg(not(feature = "test-hooks"))]
fn crash_point(_: Phase, _: Step) {}

fn link_err(op: impl Into<String>) -> impl FnOnce(LinkError) -> EnError {
    let op = op.into();
    move |error| EnError::Link { op, error }
}

fn ovs_err(op: impl Into<String>) -> impl FnOnce(OvsdbError) -> EnError {
    let op = op.into();
    move |error| EnError::Ovsdb { op, error }
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
    ) -> EnController {
        let datapath = Arc::new(VswitchdDatapath {
            rundir: cfg.ovs_rundir.clone(),
            datapath: unixctl::datapath_name(&cfg.datapath_type).to_string(),
        });
        EnController {
            cfg,
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
        }
    }

    /// Replace how lingering datapath ports are removed (tests use a fake).
    pub fn with_datapath(mut self, datapath: Arc<dyn Datapath>) -> EnController {
        self.datapath = datapath;
        self
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

    pub fn status(&self) -> EnStatus {
        lock(&self.status).clone()
    }

    /// Finish or roll back whatever step a crash interrupted, install the bypass flows,
    /// and report what OVSDB says is attached. The daemon gets this from its first
    /// `sync` (queued at start); tools and tests call it alone.
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
    /// The daemon gets the same from `sync` (queued after every reconnect); tools and
    /// tests call it alone.
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

    fn refresh_status(&self) {
        let attached = self.attached();
        let ifs = self.bridge.interfaces();
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
            }
            None => {
                *st = EnStatus {
                    step: "waiting".into(),
                    bypass_flows: st.bypass_flows,
                    last_error: st.last_error.take(),
                    ..EnStatus::default()
                };
            }
        }
    }

    /// "verified", or what does not match now (the uplink's MAC and MTU are the NIC's).
    fn identity_now(&self, a: &Attached) -> String {
        let Ok(up) = self.links.link_by_name(&a.uplink) else {
            return format!("uplink {} not found", a.uplink);
        };
        let Some(mac) = up.mac else {
            return format!("uplink {} has no MAC", a.uplink);
        };
        let m = self.identity_mismatches(&a.nic, &a.uplink, mac, up.mtu, Some(up.index));
        if m.is_empty() {
            "verified".into()
        } else {
            m.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        }
    }

    /// Recovery first (a recorded step a crash or a failure left), then: before the first
    /// list, keep what OVSDB says is attached forwarding (its flows, with fresh ofports);
    /// after it, reconcile with the store. The bypass flows need no ExternalNode.
    fn sync_locked(&self) -> Result<(), EnError> {
        let r = self.finish_recorded().and_then(|()| {
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
    /// attached NIC).
    fn reconcile(&self) -> Result<(), EnError> {
        let attached = self.attached();
        let key = self.key();
        let Some(en) = self.stores.external_nodes.get(&key) else {
            let mut errors = Vec::new();
            for a in &attached {
                log::info!("externalnode absent en={key} restoring nic={}", a.nic);
                if let Err(e) = self.restore(a) {
                    errors.push(e);
                }
            }
            return many(errors);
        };
        let spec = en.spec.as_ref().map_err(|e| EnError::Invalid {
            en: key.clone(),
            detail: e.to_string(),
        })?;
        let iface = spec.interfaces.first().ok_or_else(|| EnError::Invalid {
            en: key.clone(),
            detail: "spec.interfaces is empty".into(),
        })?;
        let (link, ips) = self.find_nic(&iface.ips)?;
        let entity = external_entity_name(&en.metadata.name, &iface.name);
        let namespace = en.metadata.namespace.clone();
        let stale = |a: &Attached| {
            self.links
                .link_by_name(&a.uplink)
                .is_err_and(|e| e.is_not_found())
        };
        // Before any link is touched: a link that is not (still) our host port must be one
        // we may take over at all.
        if !attached.iter().any(|a| a.nic == link.name && !stale(a)) {
            self.judge(&key, &link)?;
        }
        match attached.iter().find(|a| a.nic == link.name) {
            // The ports survived but the kernel side did not (a reboot: the NIC has its
            // own name and addresses again, the uplink link is gone; Antrea #4122).
            Some(a) if stale(a) => {
                log::warn!(
                    "externalnode ports of {} outlived their links (reboot?); re-attaching",
                    a.nic
                );
                self.drop_ports_and_flows(a)?;
                self.takeover(&link, &entity, &namespace, &ips)?;
            }
            Some(a) if a.uplink_port.is_some() => {
                self.ensure_attached(a, &entity, &namespace, &ips)?
            }
            Some(a) => {
                // The uplink port vanished under us: give the NIC back, then take it again.
                log::warn!(
                    "externalnode uplink port missing nic={} uplink={}",
                    a.nic,
                    a.uplink
                );
                self.restore(a)?;
                let (link, ips) = self.find_nic(&iface.ips)?;
                self.takeover(&link, &entity, &namespace, &ips)?;
            }
            None => {
                // A link called like the NIC next to one called like its uplink, with no
                // step in flight and no host port in OVSDB: someone else's half-done
                // takeover (or a replica behind our own writes). Never stack a second one.
                let uplink = uplink_name(&link.name);
                if self.links.link_by_name(&uplink).is_ok() {
                    return Err(EnError::Inconsistent {
                        nic: link.name.clone(),
                        detail: format!(
                            "link {uplink} exists but OVSDB has no host port {}",
                            link.name
                        ),
                    });
                }
                self.takeover(&link, &entity, &namespace, &ips)?
            }
        }
        // A different NIC holds the IPs now: the old one goes back after the new one is in.
        let mut errors = Vec::new();
        for a in attached.iter().filter(|a| a.nic != link.name) {
            log::info!("externalnode releasing old nic={} new={}", a.nic, link.name);
            if let Err(e) = self.restore(a) {
                errors.push(e);
            }
        }
        many(errors)
    }

    fn find_nic(&self, ips: &[IpAddr]) -> Result<(Link, Vec<IpAddr>), EnError> {
        verdict::find_nic(self.links.as_ref(), ips)
    }

    /// Refuse (permanently, until the object changes) a link that must not be taken over;
    /// see `verdict`. Reads only.
    fn judge(&self, en: &str, link: &Link) -> Result<(), EnError> {
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
        match verdict::refusal(link, master.as_deref(), &self.cfg.bridge, ovs) {
            Some(detail) => Err(EnError::Refused {
                en: en.to_string(),
                detail,
            }),
            None => Ok(()),
        }
    }

    /// Every NIC OVSDB says is attached: host ports, with their uplink port.
    fn attached(&self) -> Vec<Attached> {
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
                Attached {
                    nic,
                    uplink,
                    host: h.uuid().clone(),
                    uplink_port,
                    ids: h.port.external_ids.clone(),
                }
            })
            .collect();
        v.sort_by(|a, b| a.nic.cmp(&b.nic));
        v
    }

    fn ensure_attached(
        &self,
        a: &Attached,
        entity: &str,
        namespace: &str,
        ips: &[IpAddr],
    ) -> Result<(), EnError> {
        let uplink_port = a.uplink_port.clone().unwrap_or_else(|| Uuid(String::new()));
        let ids = host_external_ids(&a.uplink, &uplink_port, entity, namespace, ips);
        if ids != a.ids {
            log::info!(
                "externalnode updating host port nic={} entity={entity} ips={}",
                a.nic,
                ids.get("ip-address").map(String::as_str).unwrap_or("")
            );
            self.bridge
                .set_port_external_ids(&a.nic, &ids)
                .map_err(ovs_err(format!("set external_ids of host port {}", a.nic)))?;
        }
        if let Err(e) = self.hostnet.attached(&a.nic, &a.uplink) {
            log::warn!("externalnode nic={}: {e}", a.nic);
        }
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

    fn write_record(&self, rec: &Record) -> Result<(), EnError> {
        self.set_step(format!("{}:{}", rec.phase.name(), rec.step.name()));
        self.bridge
            .set_bridge_external_id(RECORD_KEY, Some(&rec.to_json()))
            .map_err(ovs_err(format!(
                "record step {}:{} for {}",
                rec.phase.name(),
                rec.step.name(),
                rec.nic
            )))
    }

    fn clear_record(&self) -> Result<(), EnError> {
        self.bridge
            .set_bridge_external_id(RECORD_KEY, None)
            .map_err(ovs_err("remove the step record"))
    }

    /// Roll back a recorded takeover or finish a recorded restore.
    fn finish_recorded(&self) -> Result<(), EnError> {
        let Some(raw) = self
            .bridge
            .bridge_external_id(RECORD_KEY)
            .map_err(ovs_err("read the step record"))?
        else {
            return Ok(());
        };
        let rec = match Record::from_json(&raw) {
            Ok(rec) => rec,
            Err(detail) => return self.salvage(&raw, detail),
        };
        log::warn!(
            "externalnode found an interrupted operation phase={} step={} nic={}; {}",
            rec.phase.name(),
            rec.step.name(),
            rec.nic,
            match rec.phase {
                Phase::Takeover => "rolling it back",
                Phase::Restore => "finishing it",
            }
        );
        self.unwind(rec, &Made::default())
    }

    /// A step record that does not decode (corrupted, or written by something else): the
    /// captured configuration in it is lost, so the NIC is recovered from what the kernel
    /// and OVSDB show, as a restore (what both a rolled-back takeover and a finished
    /// restore end in): the NIC is the link called like the uplink (or like the NIC), and
    /// its configuration is what the host port and the NIC carry now. The new record
    /// replaces the broken one before anything changes, so a crash here recovers
    /// normally. Only when no NIC can be named at all is the record left for an operator.
    fn salvage(&self, raw: &str, detail: String) -> Result<(), EnError> {
        let shown: String = raw.chars().take(512).collect();
        log::error!(
            "externalnode step record Bridge external_ids:{RECORD_KEY} is unreadable ({detail}): {shown:?}; recovering the NIC from the kernel and OVSDB"
        );
        let hint = Hint::from_json(raw);
        let links = self.links.as_ref();
        let nic = hint
            .nic
            .clone()
            .or_else(|| self.attached().first().map(|a| a.nic.clone()))
            .or_else(|| {
                // Renamed, no port yet: a lone `<nic>~` link (the short uplink form).
                let all = links.links().ok()?;
                let mut lone = all.iter().filter_map(|l| {
                    let nic = l.name.strip_suffix(crate::netlink::UPLINK_SUFFIX)?;
                    (!nic.is_empty() && !all.iter().any(|o| o.name == nic)).then(|| nic.to_string())
                });
                match (lone.next(), lone.next()) {
                    (Some(n), None) => Some(n),
                    _ => None,
                }
            });
        let Some(nic) = nic else {
            // No host port and no link with an uplink name: no step of a takeover or a
            // restore has left a trace, so there is nothing to undo.
            let uplinks = links.links().map(|all| {
                all.iter()
                    .any(|l| l.name.contains(crate::netlink::UPLINK_SUFFIX))
            });
            if uplinks.is_ok_and(|any| !any) {
                log::warn!(
                    "externalnode the unreadable record names no NIC and no NIC is half taken over; removing it"
                );
                return self.clear_record();
            }
            return Err(EnError::Record { detail });
        };
        let uplink = hint.uplink.unwrap_or_else(|| uplink_name(&nic));
        let nic_link = links
            .link_by_name(&uplink)
            .or_else(|_| links.link_by_name(&nic))
            .map_err(link_err(format!("find {nic} (or {uplink})")))?;
        let mut config = capture(links, nic_link.index)
            .map_err(link_err(format!("capture {}", nic_link.name)))?;
        // The host port holds what was moved already; the NIC what was not.
        match links.link_by_name(&nic) {
            Ok(host) if host.index != nic_link.index => {
                let on_host =
                    capture(links, host.index).map_err(link_err(format!("capture {nic}")))?;
                config.mtu = on_host.mtu;
                for a in on_host.addrs {
                    if !config.addrs.iter().any(|b| b.local == a.local) {
                        config.addrs.push(a);
                    }
                }
                for r in on_host.routes {
                    let same = |q: &crate::netlink::Route| {
                        (q.table, q.dst, q.metric, q.tos) == (r.table, r.dst, r.metric, r.tos)
                    };
                    if !config.routes.iter().any(same) {
                        config.routes.push(r);
                    }
                }
            }
            _ => {}
        }
        config.name = nic.clone();
        log::warn!(
            "externalnode recovering nic={nic} uplink={uplink} from the kernel: addresses={}",
            config
                .addrs
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        );
        let rec = Record {
            phase: Phase::Restore,
            step: Step::Flows,
            nic,
            uplink,
            config,
        };
        self.write_record(&rec)?;
        self.unwind(rec, &Made::default())
    }

    /// Take over `link` (see the module doc of `record` for the steps).
    fn takeover(
        &self,
        link: &Link,
        entity: &str,
        namespace: &str,
        ips: &[IpAddr],
    ) -> Result<(), EnError> {
        let nic = link.name.clone();
        let config =
            capture(self.links.as_ref(), link.index).map_err(link_err(format!("capture {nic}")))?;
        if config.mac.is_none() {
            return Err(EnError::NoMac { nic });
        }
        let unmovable = config.unmovable();
        if !unmovable.is_empty() {
            return Err(EnError::Unmovable {
                nic,
                routes: unmovable,
            });
        }
        let uplink = uplink_name(&nic);
        log::info!("externalnode taking over nic={nic} uplink={uplink} entity={entity}");
        let mut rec = Record {
            phase: Phase::Takeover,
            step: Step::Rename,
            nic: nic.clone(),
            uplink,
            config,
        };
        self.write_record(&rec)?;
        // Before the rename, so that the network manager follows it the right way. Not
        // fatal: without it the takeover still works where the manager matches the NIC
        // by name (README "DHCP and network managers").
        match self
            .hostnet
            .before_takeover(&nic, rec.config.ifindex, &rec.uplink)
        {
            Ok(Some(did)) => log::info!("externalnode {did}"),
            Ok(None) => {}
            Err(e) => log::warn!(
                "externalnode nic={nic}: telling the network manager failed: {e}; taking over anyway"
            ),
        }
        let mut made = Made::default();
        if let Err(error) = self.takeover_steps(&mut rec, &mut made, entity, namespace, ips) {
            log::warn!("externalnode takeover failed nic={nic} err={error}; rolling back");
            let rollback = match self.unwind(rec, &made) {
                Ok(()) => Vec::new(),
                Err(EnError::Many(v)) => v,
                Err(e) => vec![e],
            };
            return Err(EnError::RolledBack {
                nic,
                error: Box::new(error),
                rollback,
            });
        }
        self.clear_record()
    }

    /// Run the takeover's steps as `Phase::Takeover.steps()` lists them: before each, the
    /// record names it (the first one `takeover` wrote already); after each, a crash point.
    fn takeover_steps(
        &self,
        rec: &mut Record,
        made: &mut Made,
        entity: &str,
        namespace: &str,
        ips: &[IpAddr],
    ) -> Result<(), EnError> {
        for (i, step) in Phase::Takeover.steps().into_iter().enumerate() {
            if i > 0 {
                rec.step = step;
                self.write_record(rec)?;
            }
            match step {
                Step::Rename => self.take_rename(rec)?,
                Step::Ports => self.take_ports(rec, made, entity, namespace, ips)?,
                Step::Move => self.take_move(rec)?,
                Step::Flows => self.take_flows(rec, made)?,
            }
            crash_point(Phase::Takeover, step);
        }
        Ok(())
    }

    /// Rename the NIC to its uplink name.
    fn take_rename(&self, rec: &Record) -> Result<(), EnError> {
        let (nic, uplink) = (&rec.nic, &rec.uplink);
        self.links
            .rename(rec.config.ifindex, uplink)
            .map_err(link_err(format!("rename {nic} to {uplink}")))?;
        Ok(())
    }

    /// Create the uplink port (the renamed NIC) and the host port (an internal port with
    /// the NIC's name, MAC and MTU), and learn their ofports.
    fn take_ports(
        &self,
        rec: &Record,
        made: &mut Made,
        entity: &str,
        namespace: &str,
        ips: &[IpAddr],
    ) -> Result<(), EnError> {
        let (nic, uplink) = (&rec.nic, &rec.uplink);
        let up_spec = PortSpec::new(uplink, PortKind::System)
            .with_external_ids(BTreeMap::from([("antrea-type".into(), "uplink".into())]));
        let up_uuid = self
            .bridge
            .create_port(&up_spec)
            .map_err(ovs_err(format!("create uplink port {uplink}")))?;
        made.ports.push(up_uuid.clone());
        let uplink_of = self
            .bridge
            .ofport(uplink)
            .map_err(ovs_err(format!("ofport of uplink port {uplink}")))?;
        let mac = rec.config.mac.as_ref().map(crate::mac::format);
        let mut host_spec = PortSpec::new(nic, PortKind::Internal { mac })
            .with_external_ids(host_external_ids(uplink, &up_uuid, entity, namespace, ips));
        host_spec.mtu_request = Some(rec.config.mtu);
        let host_uuid = self
            .bridge
            .create_port(&host_spec)
            .map_err(ovs_err(format!("create host port {nic}")))?;
        made.ports.push(host_uuid);
        let host_of = self
            .bridge
            .ofport(nic)
            .map_err(ovs_err(format!("ofport of host port {nic}")))?;
        made.ofports = Some((host_of, uplink_of));
        Ok(())
    }

    /// Give the host port the NIC's sysctls, addresses and routes, and check that it is
    /// the NIC to the outside (`identity`).
    fn take_move(&self, rec: &Record) -> Result<(), EnError> {
        let (nic, uplink) = (&rec.nic, &rec.uplink);
        let ifindex = rec.config.ifindex;
        let links = self.links.as_ref();
        let host = links
            .link_by_name(nic)
            .map_err(link_err(format!("find host port netdev {nic}")))?;
        if host.index == ifindex {
            return Err(EnError::Link {
                op: format!("find host port netdev {nic}"),
                error: LinkError::Exists {
                    what: format!("{nic} is still the NIC (index {ifindex})"),
                    errno: crate::netlink::errno::EEXIST,
                },
            });
        }
        let nic_link = links
            .link_by_index(ifindex)
            .map_err(link_err(format!("find uplink {uplink}")))?;
        // The host port is a new device with the namespace's default sysctls: give it the
        // NIC's first (IPv6 enabled before its addresses come), then the addresses.
        let current = read_sysctls(links, &host.name)
            .map_err(link_err(format!("read the sysctls of host port {nic}")))?;
        let mut plan = plan_sysctls(&rec.config, &host, &current);
        plan.steps
            .extend(plan_move(&rec.config, Some(&nic_link), &host).steps);
        apply(links, &plan).map_err(|error| EnError::Move {
            nic: nic.clone(),
            error,
        })?;
        self.verify_identity(rec)
    }

    /// The uplink pair's flows, with the ofports the ports step learnt.
    fn take_flows(&self, rec: &Record, made: &Made) -> Result<(), EnError> {
        let (nic, uplink) = (&rec.nic, &rec.uplink);
        let Some((host_of, uplink_of)) = made.ofports else {
            return self.install_pair(nic, uplink);
        };
        self.flows
            .apply(nic_owner(nic), uplink_pair_flows(host_of, uplink_of))
            .map_err(|error| EnError::Flows {
                op: format!("uplink flows {nic}<->{uplink}"),
                error,
            })
    }

    /// The identity facts of an attached NIC (see `identity`), read now.
    fn identity_mismatches(
        &self,
        nic: &str,
        uplink: &str,
        mac: [u8; 6],
        mtu: u32,
        ifindex: Option<u32>,
    ) -> Vec<identity::Mismatch> {
        let links = self.links.as_ref();
        let ifs = self.bridge.interfaces();
        let up_link = match ifindex {
            Some(i) => links.link_by_index(i).ok(),
            None => links.link_by_name(uplink).ok(),
        };
        let facts = identity::Facts {
            mac,
            mtu,
            host_kernel_mac: links.link_by_name(nic).ok().and_then(|l| l.mac),
            host: ifs.get(nic).map(|i| &i.port),
            uplink: ifs.get(uplink).map(|i| &i.port),
            kernel_datapath: self.cfg.datapath_type != "netdev",
            uplink_master: up_link.and_then(|l| verdict::master_name(links, &l)),
        };
        identity::mismatches(&facts)
    }

    /// After the move: the host port must be the NIC's stand-in (MAC in the kernel and in
    /// OVSDB, the MTU OVS reports, no interface error, on the kernel datapath the uplink
    /// enslaved to ovs-system). ovs-vswitchd fills `mac_in_use` and `mtu` a moment after
    /// the port appears: waited for (2 s). A mismatch rolls the takeover back.
    fn verify_identity(&self, rec: &Record) -> Result<(), EnError> {
        let mac = rec.config.mac.ok_or_else(|| EnError::NoMac {
            nic: rec.nic.clone(),
        })?;
        let mut tries = 0;
        loop {
            let m = self.identity_mismatches(
                &rec.nic,
                &rec.uplink,
                mac,
                rec.config.mtu,
                Some(rec.config.ifindex),
            );
            if m.is_empty() {
                log::info!(
                    "externalnode identity verified nic={} mac={} mtu={}",
                    rec.nic,
                    crate::mac::format(&mac),
                    rec.config.mtu
                );
                return Ok(());
            }
            tries += 1;
            if tries > IDENTITY_TRIES {
                return Err(EnError::Identity {
                    nic: rec.nic.clone(),
                    mismatches: m.iter().map(ToString::to_string).collect(),
                });
            }
            self.links.pause(RELEASE_POLL);
        }
    }

    /// Give an attached NIC back: capture the host port's configuration (that is where
    /// the addresses live now, including any added meanwhile), record it, then unwind.
    fn restore(&self, a: &Attached) -> Result<(), EnError> {
        let links = self.links.as_ref();
        let nic_link = match links.link_by_name(&a.uplink) {
            Ok(l) => l,
            Err(e) if e.is_not_found() => {
                // Antrea #5111: the NIC is back already; only our ports and flows remain.
                log::warn!(
                    "externalnode uplink {} is gone; deleting the ports of {} only",
                    a.uplink,
                    a.nic
                );
                self.drop_ports_and_flows(a)?;
                self.release_host_network(&a.nic);
                return Ok(());
            }
            Err(e) => return Err(link_err(format!("find uplink {}", a.uplink))(e)),
        };
        let host = links
            .link_by_name(&a.nic)
            .map_err(link_err(format!("find host port netdev {}", a.nic)))?;
        let mut config =
            capture(links, host.index).map_err(link_err(format!("capture {}", a.nic)))?;
        config.ifindex = nic_link.index;
        config.name = a.nic.clone();
        for r in config.unmovable() {
            log::warn!(
                "externalnode cannot move a route back to nic={}: {r}; it goes with the host port",
                a.nic
            );
        }
        log::info!("externalnode restoring nic={} uplink={}", a.nic, a.uplink);
        let rec = Record {
            phase: Phase::Restore,
            step: Step::Flows,
            nic: a.nic.clone(),
            uplink: a.uplink.clone(),
            config,
        };
        self.write_record(&rec)?;
        let made = Made {
            ports: [Some(a.host.clone()), a.uplink_port.clone()]
                .into_iter()
                .flatten()
                .collect(),
            ofports: None,
        };
        self.unwind(rec, &made)
    }

    fn release_host_network(&self, nic: &str) {
        if let Err(e) = self.hostnet.released(nic) {
            log::warn!("externalnode nic={nic}: giving the NIC back to the network manager: {e}");
        }
    }

    fn drop_ports_and_flows(&self, a: &Attached) -> Result<(), EnError> {
        self.flows
            .remove(nic_owner(&a.nic))
            .map_err(|error| EnError::Flows {
                op: format!("remove uplink flows of {}", a.nic),
                error,
            })?;
        let ports: Vec<Uuid> = [Some(a.host.clone()), a.uplink_port.clone()]
            .into_iter()
            .flatten()
            .collect();
        self.bridge
            .delete_ports(&ports)
            .map_err(ovs_err(format!("delete ports of {}", a.nic)))
    }

    /// Make the NIC of `rec` a plain NIC again with `rec.config`: remove the flows, delete
    /// the ports, wait for the host netdev to go, rename the NIC back, re-add its
    /// addresses and routes. Every step is idempotent, so this both rolls back any prefix
    /// of a takeover and finishes any prefix of a restore. All steps are tried; the record
    /// is removed only when all succeeded (a later sync or start retries otherwise).
    fn unwind(&self, mut rec: Record, made: &Made) -> Result<(), EnError> {
        let phase = rec.phase;
        let restoring = phase == Phase::Restore;
        let mut u = Unwinding::default();
        // Undoing runs the restore's steps whichever phase it undoes; only a restore
        // records them (a rolled-back takeover keeps its record until the end).
        for step in Phase::Restore.steps() {
            if restoring {
                rec.step = step;
                if let Err(e) = self.write_record(&rec) {
                    u.errors.push(e);
                }
            } else {
                self.set_step(format!("rollback:{}", step.name()));
            }
            match step {
                Step::Flows => self.undo_flows(&rec, &mut u),
                Step::Ports => {
                    // Never rename a NIC the datapath still holds (docs/datapath.md): it
                    // would keep the VM's addresses while OVS takes its frames. The
                    // record stays; retried.
                    if !self.undo_ports(&rec, made, &mut u) {
                        return many(u.errors);
                    }
                }
                Step::Rename => self.undo_rename(&rec, &mut u),
                Step::Move => self.undo_move(&rec, &mut u),
            }
            if restoring {
                crash_point(phase, step);
            }
        }
        if u.errors.is_empty() {
            // The NIC is itself again: the network manager may have it back. (Not while
            // any step failed: the uplink may still be called <nic>~, and must stay
            // unmanaged until it is not.)
            self.release_host_network(&rec.nic);
            self.clear_record()?;
            log::info!(
                "externalnode {} done nic={}",
                match phase {
                    Phase::Takeover => "rollback",
                    Phase::Restore => "restore",
                },
                rec.nic
            );
        }
        many(u.errors)
    }

    fn undo_flows(&self, rec: &Record, u: &mut Unwinding) {
        if let Err(error) = self.flows.remove(nic_owner(&rec.nic)) {
            u.errors.push(EnError::Flows {
                op: format!("remove uplink flows of {}", rec.nic),
                error,
            });
        }
    }

    /// Delete the host and uplink ports (those made now, and those OVSDB shows); false
    /// when the datapath still holds the NIC, and undoing must stop here.
    fn undo_ports(&self, rec: &Record, made: &Made, u: &mut Unwinding) -> bool {
        let (nic, uplink) = (&rec.nic, &rec.uplink);
        let ifs = self.bridge.interfaces();
        let mut ports = made.ports.clone();
        for (name, role) in [(nic, Role::Host), (uplink, Role::Uplink)] {
            if let Some(i) = ifs.get(name).filter(|i| i.role == role) {
                if !ports.contains(i.uuid()) {
                    ports.push(i.uuid().clone());
                }
            }
        }
        self.delete_applied(&ports, nic, uplink, &mut u.errors);
        if let Err(e) = self.wait_host_netdev_gone(nic, rec.config.ifindex) {
            u.errors.push(e);
        }
        match self.wait_nic_released(rec.config.ifindex) {
            Ok(()) => true,
            Err(e) => {
                u.errors.push(e);
                false
            }
        }
    }

    /// Give the NIC its own name back (found by index, else by either name).
    fn undo_rename(&self, rec: &Record, u: &mut Unwinding) {
        let (nic, uplink) = (&rec.nic, &rec.uplink);
        let links = self.links.as_ref();
        let found = match links.link_by_index(rec.config.ifindex) {
            Ok(l) if l.name == *nic || l.name == *uplink => Ok(l),
            _ => links
                .link_by_name(uplink)
                .or_else(|_| links.link_by_name(nic)),
        };
        u.nic_link = Some(match found {
            Ok(l) if l.name != *nic => links
                .rename(l.index, nic)
                .map_err(link_err(format!("rename {} back to {nic}", l.name))),
            other => other.map_err(link_err(format!("find {nic} (or {uplink})"))),
        });
    }

    /// Put the NIC's captured sysctls, addresses and routes back on it.
    fn undo_move(&self, rec: &Record, u: &mut Unwinding) {
        let links = self.links.as_ref();
        match u.nic_link.take() {
            Some(Ok(l)) => {
                // The NIC kept its own sysctls while attached; these steps only undo what
                // was changed on the host port since (its values go back with the NIC).
                let mut plan = match read_sysctls(links, &l.name) {
                    Ok(current) => plan_sysctls(&rec.config, &l, &current),
                    Err(e) => {
                        log::warn!("externalnode cannot read the sysctls of {}: {e}", l.name);
                        crate::netlink::Plan::default()
                    }
                };
                plan.steps.extend(plan_move(&rec.config, None, &l).steps);
                if let Err(errs) = apply_best_effort(links, &plan) {
                    u.errors.push(EnError::Restore {
                        nic: rec.nic.clone(),
                        errors: errs,
                    });
                }
            }
            Some(Err(e)) => u.errors.push(e),
            None => {}
        }
    }

    /// Delete the host and uplink ports and wait until ovs-vswitchd has applied it (a
    /// plain commit returns before the switch has taken the NIC out of the datapath). A
    /// wait that times out is logged, not an error: what matters next is whether the NIC
    /// is still held, which `wait_nic_released` checks.
    fn delete_applied(&self, ports: &[Uuid], nic: &str, uplink: &str, errors: &mut Vec<EnError>) {
        if ports.is_empty() {
            return;
        }
        let started = std::time::Instant::now();
        match self.bridge.delete_ports_applied(ports, DELETE_APPLIED_WAIT) {
            Ok(()) => {
                let took = started.elapsed();
                if took >= std::time::Duration::from_millis(500) {
                    log::info!(
                        "externalnode ovs-vswitchd applied the delete of {nic} and {uplink} after {}ms",
                        took.as_millis()
                    );
                }
            }
            Err(OvsdbError::Timeout { .. }) => log::warn!(
                "externalnode ovs-vswitchd has not applied the delete of {nic} and {uplink} within {}s (is it running?); checking the NIC itself",
                DELETE_APPLIED_WAIT.as_secs()
            ),
            Err(e) => errors.push(ovs_err(format!("delete ports {nic} and {uplink}"))(e)),
        }
    }

    /// The NIC (by ifindex) must have no master before it is renamed back: on the kernel
    /// datapath a port of `ovs-system` is enslaved to it (vport-netdev). If it still is,
    /// or (kernel datapath) `dpctl/show` still lists it, remove it with `dpctl/del-if`
    /// and wait (bounded) for the master to go.
    fn wait_nic_released(&self, ifindex: u32) -> Result<(), EnError> {
        let links = self.links.as_ref();
        let link = match links.link_by_index(ifindex) {
            Ok(l) => l,
            // Nothing to rename; the rename step reports what is missing.
            Err(_) => return Ok(()),
        };
        let kernel = self.cfg.datapath_type != "netdev";
        if link.master.is_none() && !kernel {
            return Ok(());
        }
        match self.datapath.delete_interface(&link.name) {
            Ok(true) => log::warn!(
                "externalnode {} was still a datapath port after its OVS port was deleted; removed it with dpctl/del-if",
                link.name
            ),
            Ok(false) => {}
            // With no master the kernel holds nothing: vswitchd not answering is fine.
            Err(e) if link.master.is_none() => {
                log::debug!("externalnode dpctl/show for {} failed: {e}", link.name);
            }
            Err(e) => log::warn!(
                "externalnode {} still has a master; dpctl/del-if failed: {e}",
                link.name
            ),
        }
        // Counted, not timed: `Links::pause` is the clock (fakes do not sleep).
        let mut tries = 0;
        loop {
            let l = links
                .link_by_index(ifindex)
                .map_err(link_err(format!("look up {}", link.name)))?;
            let Some(m) = l.master else {
                return Ok(());
            };
            tries += 1;
            if tries > RELEASE_TRIES {
                let master =
                    verdict::master_name(links, &l).unwrap_or_else(|| format!("index {m}"));
                return Err(EnError::Held {
                    nic: l.name.clone(),
                    master,
                });
            }
            links.pause(RELEASE_POLL);
        }
    }

    /// Wait until the host port's netdev (called like the NIC) is gone; if the datapath
    /// keeps it, remove it through ovs-vswitchd and wait again. A link with that name
    /// that IS the NIC (same ifindex) is not the host port.
    fn wait_host_netdev_gone(&self, nic: &str, ifindex: u32) -> Result<(), EnError> {
        let links = self.links.as_ref();
        match links.link_by_name(nic) {
            Ok(l) if l.index != ifindex => {}
            Ok(_) => return Ok(()),
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(link_err(format!("look up {nic}"))(e)),
        }
        match links.wait_gone(nic) {
            Ok(()) => return Ok(()),
            Err(LinkError::Timeout { .. }) => {}
            Err(e) => return Err(link_err(format!("wait for {nic} to go"))(e)),
        }
        log::warn!(
            "externalnode host netdev {nic} outlived its port; removing it via ovs-vswitchd"
        );
        self.datapath
            .delete_interface(nic)
            .map_err(|error| EnError::Datapath {
                nic: nic.to_string(),
                error,
            })?;
        links
            .wait_gone(nic)
            .map_err(link_err(format!("wait for {nic} to go after dpctl/del-if")))
    }
}
