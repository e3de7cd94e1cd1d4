//! Gathering a [`Snapshot`] from the running daemon's parts, and the [`CountingFlows`]
//! wrapper that counts flow mods for the metrics. The daemon builds one [`Probe`] and
//! hands [`Probe::handler`] to the state-socket [`Server`](super::Server).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::time::Instant;

use super::{
    ConnStatus, EnRow, Handler, Metrics, Request, Snapshot, TcRow, WatchStatus, WatchTracker,
};
use crate::controller::externalnode::EnController;
use crate::controller::queue::WorkQueue;
use crate::controller::trafficcontrol::TcController;
use crate::controller::{Flows, Key};
use crate::k8s::{Kind, KubeEvent, Resource, Source};
use crate::openflow::{Flow, OfError, OfFlows, Owner};
use crate::ovsdb::Client;

/// The daemon's parts the snapshot reads. Cheap to clone pieces; shared with the
/// state-socket thread.
pub struct Probe {
    pub node: String,
    pub bridge: String,
    pub round: AtomicU16,
    pub started: Instant,
    pub ready: AtomicBool,
    pub ovsdb: Arc<Client>,
    pub ovsdb_socket: String,
    pub openflow: Arc<OfFlows>,
    pub openflow_socket: String,
    pub queue: Arc<WorkQueue<Key>>,
    pub source: Arc<Source>,
    pub tc: Arc<TcController>,
    pub en: Arc<EnController>,
    pub metrics: Arc<Metrics>,
    pub watches: Arc<WatchTracker>,
}

impl Probe {
    pub fn snapshot(&self) -> Snapshot {
        let now = Instant::now();
        let kinds = self.source.status();
        let watches = Kind::ALL
            .iter()
            .map(|k| {
                let st = kinds.get(k).cloned().unwrap_or_default();
                let (rv, age, events) = self.watches.get(k.name(), now);
                WatchStatus {
                    kind: k.name().to_string(),
                    synced: st.synced,
                    resource_version: rv,
                    last_event_age_seconds: age,
                    events,
                    errors: st.errors_total,
                    relists: st.relists,
                    last_error: st.last_error,
                    last_ok_age_seconds: st
                        .last_ok
                        .map(|t| now.saturating_duration_since(t).as_secs_f64()),
                }
            })
            .collect();
        let traffic_controls = self
            .tc
            .status()
            .into_iter()
            .map(|t| TcRow {
                name: t.name,
                effective_pods: t.effective_pods,
                target_ofport: t.target_port.as_ref().map(|p| p.1),
                target_port: t.target_port.map(|p| p.0),
                return_ofport: t.return_port.as_ref().map(|p| p.1),
                return_port: t.return_port.map(|p| p.0),
                flows: t.flows,
                last_error: t.last_error,
            })
            .collect();
        let e = self.en.status();
        let metrics = self.metrics.snapshot();
        Snapshot {
            version: env!("CARGO_PKG_VERSION").to_string(),
            node: self.node.clone(),
            bridge: self.bridge.clone(),
            ready: self.ready.load(Ordering::SeqCst),
            uptime_seconds: now.saturating_duration_since(self.started).as_secs(),
            round: self.round.load(Ordering::Relaxed),
            ovsdb: ConnStatus {
                connected: self.ovsdb.is_connected(),
                socket: self.ovsdb_socket.clone(),
                reconnects: 0,
            },
            openflow: ConnStatus {
                connected: self
                    .openflow
                    .wait_connected(std::time::Duration::ZERO)
                    .is_ok(),
                socket: self.openflow_socket.clone(),
                reconnects: metrics.openflow_reconnects,
            },
            flows: self.openflow.flow_count(),
            queue_depth: self.queue.len(),
            watches,
            traffic_controls,
            external_node: EnRow {
                step: e.step,
                nic: e.nic,
                uplink: e.uplink,
                uplink_ofport: e.uplink_ofport,
                host_ofport: e.host_ofport,
                addresses: e.addresses,
                bypass_flows: e.bypass_flows,
                identity: e.identity,
                last_error: e.last_error,
            },
            metrics,
        }
    }

    /// The state-socket handler: JSON for `status`, Prometheus text for `metrics`.
    pub fn handler(self: Arc<Self>) -> Handler {
        Arc::new(move |req| {
            let s = self.snapshot();
            match req {
                Request::Status => serde_json::to_string_pretty(&s)
                    .map(|mut j| {
                        j.push('\n');
                        j
                    })
                    .unwrap_or_else(|e| format!("error: {e}\n")),
                Request::Metrics => super::render::prometheus(&s),
            }
        })
    }
}

/// Record an object event's kind and resourceVersion.
pub fn observe(tracker: &WatchTracker, ev: &KubeEvent, now: Instant) {
    use crate::k8s::Change;
    fn rv<T: Resource>(c: &Change<T>) -> String {
        c.object().meta().resource_version.clone()
    }
    let (kind, rv) = match ev {
        KubeEvent::Pod(c) => (Kind::Pod, rv(c)),
        KubeEvent::Namespace(c) => (Kind::Namespace, rv(c)),
        KubeEvent::TrafficControl(c) => (Kind::TrafficControl, rv(c)),
        KubeEvent::ExternalNode(c) => (Kind::ExternalNode, rv(c)),
        KubeEvent::Synced(_) => return,
    };
    tracker.observe(kind.name(), &rv, now);
}

/// A [`Flows`] that counts the flow adds and deletes each `apply` implies (the symmetric
/// difference with what the backend says is installed) before passing it on.
pub struct CountingFlows {
    pub inner: Arc<OfFlows>,
    pub metrics: Arc<Metrics>,
}

impl CountingFlows {
    /// Flow adds and deletes that applying `flows` for `owner` implies.
    fn changed(&self, owner: Owner, flows: &[Flow]) -> usize {
        let old: BTreeSet<Flow> = self.inner.installed(owner).into_iter().collect();
        let new: BTreeSet<&Flow> = flows.iter().collect();
        old.iter().filter(|f| !new.contains(f)).count()
            + new.iter().filter(|f| !old.contains(**f)).count()
    }
}

impl Flows for CountingFlows {
    fn apply(&self, owner: Owner, flows: Vec<Flow>) -> Result<(), OfError> {
        let changed = self.changed(owner, &flows);
        self.inner.apply(owner, flows)?;
        self.metrics.flow_mods.fetch_add(
            u64::try_from(changed).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        Ok(())
    }

    fn apply_many(&self, sets: Vec<(Owner, Vec<Flow>)>) -> Vec<(Owner, OfError)> {
        let changed: Vec<(Owner, usize)> = sets
            .iter()
            .map(|(owner, flows)| (*owner, self.changed(*owner, flows)))
            .collect();
        let failed = self.inner.apply_many(sets);
        let n: usize = changed
            .iter()
            .filter(|(o, _)| !failed.iter().any(|(f, _)| f == o))
            .map(|(_, n)| n)
            .sum();
        self.metrics
            .flow_mods
            .fetch_add(u64::try_from(n).unwrap_or(u64::MAX), Ordering::Relaxed);
        failed
    }

    fn replace_round(
        &self,
        sets: Vec<(Owner, Vec<Flow>)>,
        round: u16,
    ) -> (Vec<(Owner, OfError)>, Result<(), OfError>) {
        let changed: usize = sets.iter().map(|(o, f)| self.changed(*o, f)).sum();
        let r = self.inner.replace_round(sets, round);
        self.metrics.flow_mods.fetch_add(
            u64::try_from(changed).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        r
    }

    fn remove(&self, owner: Owner) -> Result<(), OfError> {
        let n = self.inner.installed(owner).len();
        self.inner.remove(owner)?;
        self.metrics
            .flow_mods
            .fetch_add(u64::try_from(n).unwrap_or(u64::MAX), Ordering::Relaxed);
        Ok(())
    }

    fn set_no_flood(&self, ofport: u32, on: bool) -> Result<(), OfError> {
        self.inner.set_no_flood(ofport, on)
    }

    fn set_no_flood_many(&self, ofports: &[u32], on: bool) -> Result<(), OfError> {
        self.inner.set_no_flood_many(ofports, on)
    }

    fn delete_round(&self, round: u16) -> Result<(), OfError> {
        self.inner.delete_round(round)
    }
}
