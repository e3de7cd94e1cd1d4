//! Gathering a [`Snapshot`] from the running daemon's parts. The daemon builds one
//! [`Probe`] and hands [`Probe::handler`] to the state-socket [`Server`](super::Server).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::time::Instant;

use super::{
    ConnStatus, EnRow, Handler, Metrics, Request, Snapshot, TcRow, WatchStatus, WatchTracker,
};
use crate::controller::Key;
use crate::controller::externalnode::EnController;
use crate::controller::queue::WorkQueue;
use crate::controller::trafficcontrol::TcController;
use crate::k8s::{Kind, KubeEvent, Resource, Source};
use crate::openflow::OfFlows;
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
    /// With NetworkPolicy on: the controller and its watches' health.
    pub policy: Option<PolicyProbe>,
}

/// What the NetworkPolicy status is read from.
pub struct PolicyProbe {
    pub controller: Arc<crate::controller::policy::PolicyController>,
    pub packet_ins: Arc<std::sync::Mutex<crate::controller::policy::packetin::Counts>>,
    pub watches: Arc<
        std::sync::Mutex<
            std::collections::BTreeMap<crate::controlplane::Kind, crate::controlplane::WatchStatus>,
        >,
    >,
}

impl PolicyProbe {
    fn status(&self, of: &OfFlows, round: u16) -> super::policy::NpStatus {
        use crate::openflow::flow::{ROUND_MASK, cookie};
        use crate::pipeline::table;
        let watches = self
            .watches
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|(k, w)| super::policy::NpWatch {
                kind: k.plural().to_string(),
                synced: w.synced,
                errors: w.errors_total,
                reconnects: w.reconnects,
                last_error: w.last_error,
            })
            .collect();
        // Every rule's counters are on its metric flows: those two tables only (a rule of
        // a 10,000-member group has 10,000 other flows, which a status poll, a Prometheus
        // scrape, need not read: ~15 ms and a burst of memory at that size).
        let descs = of
            .dump_tables(
                cookie(round, crate::openflow::Category::NETWORK_POLICY, 0),
                ROUND_MASK | 0xff << 40,
                &[table::EGRESS_METRIC, table::INGRESS_METRIC],
            )
            .unwrap_or_default();
        let counters = super::policy::counters(&descs);
        let packet_ins = self
            .packet_ins
            .lock()
            .map(|c| super::policy::PacketIns::from(&*c))
            .unwrap_or_default();
        super::policy::np_status(self.controller.status(), watches, &counters, packet_ins)
    }
}

impl Probe {
    pub fn snapshot(&self) -> Snapshot {
        // Long on purpose: It copies every part of the daemon into one snapshot struct,
        // field by field.
        let now = Instant::now();
        let kinds = self.source.status();
        // Namespaces first, then the rest in `Kind::ALL` order: the order `tether status`
        // has always shown (a contract of its JSON).
        let mut order = Kind::ALL;
        order.sort_by_key(|k| *k != Kind::Namespace);
        let watches = order
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
                    watch_mode: st.watch_mode,
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
        let mut metrics = self.metrics.snapshot();
        let counts = self.openflow.counts();
        metrics.flow_mods = counts.flow_mods;
        metrics.flow_drift_repairs = counts.drift_repairs;
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
            flows_problem: self.openflow.drift_problem(),
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
                repairs: e.repairs,
                last_repair: e.last_repair,
                cut_off: e.cut_off,
                side_door: e.side_door,
            },
            metrics,
            network_policy: self
                .policy
                .as_ref()
                .map(|p| p.status(&self.openflow, self.round.load(Ordering::Relaxed))),
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
