//! `tether run`: builds the parts and wires them together. It decides only what must be
//! settled before any controller runs: this run's round (`roundNum` + 1, wrapping to 1);
//! the deferral scope (with an earlier round on the bridge every flow, the base flows
//! included, waits for the first full sync; without one all but the ExternalNode's wait,
//! and the base flows go out at once); and which OVS answers end the start instead of
//! being retried: a bridge of another datapath type (a configuration error, exit 2) and
//! the bridge's OVSDB lock held by someone else (exit 1).
//!
//! 1. OVS ([`Ovs::connect`]): OVSDB (retrying) → the bridge's OVSDB lock → ensure the
//!    bridge → this run's flow round (`Bridge.external_ids:roundNum` + 1) → OpenFlow →
//!    the pipeline's base flows.
//! 2. The Kubernetes source (API or manifests directory) feeding the stores.
//! 3. The controllers and their workers (`controller::worker`), sharing one queue of
//!    TrafficControl, L2, ExternalNode and Bridge keys; no-flood is restored on the
//!    traffic-control ports, and `L2` and `En` are queued at once (the ExternalNode's
//!    first sync recovers whatever a crash interrupted).
//! 4. The event loop ([`events`]): source, OVSDB, OpenFlow and worker events → queue keys
//!    (through `controller::route`), start-up ([`startup`]) → READY, systemd's watchdog.
//!
//! Stopping (the `stop` channel, fed by SIGTERM/SIGINT in `main`) leaves every flow and
//! port in place: the VM stays reachable while tether is down.

mod events;
mod phases;
mod policy;
pub mod startup;

use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, bounded, select, unbounded};

use crate::config::{Config, Input};
use crate::controller::deferred::{DeferredFlows, Scope};
use crate::controller::externalnode::EnController;
use crate::controller::l2::L2Controller;
use crate::controller::queue::{QueueConfig, SystemClock, WorkQueue};
use crate::controller::trafficcontrol::TcController;
use crate::controller::worker::{Controllers, Workers};
use crate::controller::{Bridge, Flows, Key, LiveBridge, VswitchdDatapath};
use crate::heartbeat::Heartbeats;
use crate::k8s::{self, Source, Stores};
use crate::metrics::Metrics;
use crate::openflow::{Category, OfFlows, OfFlowsConfig, Owner};
use crate::ovsdb::{self, BridgeDb, Client, ClientOptions, Remote};
use crate::status::WatchTracker;
use crate::status::probe::Probe;
use crate::{notify, pipeline, status};

/// Flow owner of the pipeline's base flows.
const BASE_OWNER: Owner = Owner {
    category: Category::DEFAULT,
    object: 0,
};

const TC_WORKERS: usize = 4;
/// How long one sync may take without being "stuck" for the watchdog (a takeover waits up
/// to ~10 s for vswitchd and DAD; OVSDB and OpenFlow requests time out well before).
const WORKER_DEADLINE: Duration = Duration::from_secs(120);

#[derive(Debug)]
pub enum DaemonError {
    /// Stopped before start-up finished.
    Stopped,
    /// An invalid configuration value found while starting (exit code 2), naming the key.
    Config(String),
    Setup(String),
}

impl std::fmt::Display for DaemonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DaemonError::Stopped => f.write_str("stopped during start-up"),
            DaemonError::Setup(m) => f.write_str(m),
            DaemonError::Config(m) => write!(f, "config: {m}"),
        }
    }
}

impl std::error::Error for DaemonError {}

/// Run until `stop` fires. `ready` is called once, after the first full sync.
pub fn run(
    cfg: Config,
    stop: Receiver<()>,
    ready: impl FnOnce() + Send + 'static,
) -> Result<(), DaemonError> {
    for w in &cfg.warnings {
        log::warn!("{w}");
    }
    for n in &cfg.notes {
        log::info!("{n}");
    }
    // A source that cannot work (an http:// server not allowed, a kubeconfig that does
    // not load) is a configuration error: refused before the bridge or a flow is made.
    check_source(&cfg)?;
    let phases = phases::Phases::start();
    let ovs = Ovs::connect(&cfg, &stop, &phases)?;
    let deferred = base_flows(&ovs, &stop)?;
    phases.mark("base_flows_committed");
    let flows: Arc<dyn Flows> = deferred.clone();
    let stores = Stores::default();
    let (kube_tx, kube_rx) = bounded(4096);
    let source = Arc::new(
        crate::wiring::start_source(&cfg, &stores, kube_tx)
            .map_err(|e| DaemonError::Setup(e.to_string()))?,
    );
    let bridge: Arc<dyn Bridge> = Arc::new(LiveBridge::keeping(ovs.db.clone(), &cfg.datapath_type));
    let controllers = controllers(&cfg, &stores, &bridge, &flows)?;
    let policy = policy::start(&cfg, &ovs, &flows, &controllers.en)?;
    if let Err(e) = controllers.tc.restore_no_flood() {
        log::warn!("restoring no-flood on traffic-control ports failed: {e}");
    }
    let queue = Arc::new(WorkQueue::new(
        QueueConfig::default(),
        Arc::new(SystemClock),
    ));
    let metrics = Arc::new(Metrics::default());
    let mut probe = probe(&cfg, &ovs, &queue, &source, &controllers, &metrics);
    if let Some(p) = &policy {
        if let Some(pr) = Arc::get_mut(&mut probe) {
            pr.policy = Some(status::probe::PolicyProbe {
                controller: p.controller.clone(),
                packet_ins: p.rejects.clone(),
                watches: p.source.status_handle(),
            });
        }
    }
    let status_server = status::Server::start(&cfg.state_socket, probe.clone().handler())
        .map_err(|e| DaemonError::Setup(e.to_string()))?;
    let (done_tx, done_rx) = unbounded();
    let heartbeats = Arc::new(Heartbeats::default());
    let tc = controllers.tc.clone();
    let workers = Workers::new(queue.clone(), controllers, metrics, done_tx);
    let workers = start_workers(workers, &heartbeats)?;
    // The ExternalNode's first sync recovers an interrupted takeover or restore and puts
    // its flows back; neither waits for the lists.
    queue.add(Key::L2);
    queue.add(Key::En);
    events::EventLoop::new(events::Parts {
        stop,
        kube: kube_rx,
        done: done_rx,
        stores,
        bridge,
        tc,
        queue: queue.clone(),
        deferred,
        ovs,
        probe,
        source: source.clone(),
        heartbeats,
        more_heartbeats: policy
            .as_ref()
            .map(|p| vec![p.heartbeats.clone(), p.source.heartbeats().clone()])
            .unwrap_or_default(),
        ready: Box::new(ready),
        phases,
    })
    .run();

    log::info!("stopping: flows and ports stay in place");
    notify::notify_or_log(&[("STOPPING", "1")]);
    if let Some(p) = policy {
        p.stop();
    }
    status_server.stop();
    queue.shutdown();
    for h in workers {
        let _ = h.join();
    }
    if let Ok(s) = Arc::try_unwrap(source) {
        s.stop();
    }
    Ok(())
}

/// The flows backend the controllers use, with the pipeline's base flows in. TC flows wait
/// for the end of the first full sync and go out as one bundle. When the bridge holds a
/// previous round (tether's after a restart, or Antrea's agent's, adopted) every flow
/// waits, and that bundle also takes the old round out: the switch never holds a mix of
/// the two pipelines.
fn base_flows(ovs: &Ovs, stop: &Receiver<()>) -> Result<Arc<DeferredFlows>, DaemonError> {
    let scope = match ovs.replacing() {
        Some(_) => Scope::All,
        None => Scope::AllBut(Category::EXTERNAL_NODE),
    };
    let deferred = Arc::new(DeferredFlows::new(ovs.of.clone(), scope));
    // On a fresh bridge the base flows go out now, ahead of the ExternalNode's flows that
    // build on them; on a bridge with a previous round they wait, to replace it atomically.
    let target: Arc<dyn Flows> = match scope {
        Scope::All => deferred.clone(),
        Scope::AllBut(_) => ovs.of.clone(),
    };
    let what = "installing the pipeline's base flows";
    retry(what, Duration::from_secs(1), stop, || {
        target.apply(BASE_OWNER, pipeline::base_flows())
    })?;
    Ok(deferred)
}

/// What `tether status` and the metrics read.
fn probe(
    cfg: &Config,
    ovs: &Ovs,
    queue: &Arc<WorkQueue<Key>>,
    source: &Arc<Source>,
    controllers: &Controllers,
    metrics: &Arc<Metrics>,
) -> Arc<Probe> {
    Arc::new(Probe {
        node: cfg.node_name.clone(),
        bridge: cfg.bridge.clone(),
        round: ovs.round.into(),
        started: Instant::now(),
        ready: false.into(),
        ovsdb: ovs.client.clone(),
        ovsdb_socket: ovs.db_socket.display().to_string(),
        openflow: ovs.of.clone(),
        openflow_socket: ovs.mgmt.display().to_string(),
        queue: queue.clone(),
        source: source.clone(),
        tc: controllers.tc.clone(),
        en: controllers.en.clone(),
        metrics: metrics.clone(),
        watches: Arc::new(WatchTracker::default()),
        policy: None,
    })
}

/// The daemon's connections to Open vSwitch, and this run's flow round.
pub(crate) struct Ovs {
    pub client: Arc<Client>,
    pub db: BridgeDb,
    pub db_socket: PathBuf,
    pub of: Arc<OfFlows>,
    pub mgmt: PathBuf,
    pub round: u16,
    /// The round found on the bridge (a previous run's, or Antrea's agent's).
    pub prev_round: Option<u16>,
}

impl Ovs {
    /// Connect to OVSDB, ensure the bridge, pick this run's round, connect OpenFlow; each
    /// retried until it works or `stop` fires.
    fn connect(
        cfg: &Config,
        stop: &Receiver<()>,
        phases: &phases::Phases,
    ) -> Result<Ovs, DaemonError> {
        let db_socket = cfg.ovsdb_socket();
        let client = Arc::new(Client::start(
            Remote::Unix(db_socket.clone()),
            ClientOptions::default(),
        ));
        let what = format!("connecting to ovsdb at {}", db_socket.display());
        retry(&what, Duration::from_secs(1), stop, || {
            client.wait_connected(Duration::from_secs(1))
        })?;
        phases.mark("ovsdb_loaded");
        // One tether per bridge, and never beside `tether reset`: the lock is this
        // session's until the process ends.
        let lock = ovsdb::lock::lock_id(&cfg.bridge);
        let what = format!("taking the OVSDB lock {lock}");
        let locked = retry(&what, Duration::from_secs(1), stop, || {
            ovsdb::lock::try_lock(&client, &lock)
        })?;
        if !locked {
            return Err(DaemonError::Setup(format!(
                "another tether, or tether reset, holds the OVSDB lock {lock} on {}: one tether per bridge",
                db_socket.display()
            )));
        }
        log::info!("holding the OVSDB lock {lock}");
        // A bridge of another datapath type is a configuration error (exit 2), not
        // something to retry: nothing is changed, and waiting cannot fix it.
        let what = format!("setting up bridge {}", cfg.bridge);
        let db = retry(
            &what,
            Duration::from_secs(2),
            stop,
            || match BridgeDb::ensure_with(
                client.clone(),
                &cfg.bridge,
                &cfg.datapath_type,
                policy::fail_mode(cfg),
            ) {
                Err(e @ ovsdb::OvsdbError::DatapathMismatch { .. }) => Ok(Err(e)),
                r => r.map(Ok),
            },
        )?
        .map_err(|e| DaemonError::Config(e.to_string()))?;
        let prev_round: Option<u16> = db
            .external_id("roundNum")
            .ok()
            .flatten()
            .and_then(|s| s.parse().ok());
        let round = match prev_round.unwrap_or(0).wrapping_add(1) {
            0 => 1,
            r => r,
        };
        log::info!(
            "bridge={} round={round} (previous {prev_round:?})",
            cfg.bridge
        );
        let mgmt = cfg.openflow_socket();
        let of = Arc::new(
            OfFlows::start(OfFlowsConfig {
                watch_drift: true,
                ..OfFlowsConfig::new(mgmt.clone(), &cfg.bridge, round)
            })
            .map_err(|e| DaemonError::Setup(format!("openflow {}: {e}", mgmt.display())))?,
        );
        let what = format!("connecting to openflow at {}", mgmt.display());
        retry(&what, Duration::from_millis(500), stop, || {
            of.wait_connected(Duration::from_secs(1))
        })?;
        phases.mark("openflow_connected");
        Ok(Ovs {
            client,
            db,
            db_socket,
            of,
            mgmt,
            round,
            prev_round,
        })
    }

    /// The previous round whose flows the first full sync replaces, if any.
    pub(crate) fn replacing(&self) -> Option<u16> {
        self.prev_round.filter(|p| *p != self.round)
    }
}

/// The three controllers. The TrafficControl and ExternalNode controllers get their own
/// netlink sockets: the TC workers only read (device targets), and never wait behind a
/// takeover's requests.
fn controllers(
    cfg: &Config,
    stores: &Stores,
    bridge: &Arc<dyn Bridge>,
    flows: &Arc<dyn Flows>,
) -> Result<Controllers, DaemonError> {
    let netlink = || {
        crate::netlink::Rtnl::connect()
            .map(Arc::new)
            .map_err(|e| DaemonError::Setup(format!("netlink: {e}")))
    };
    let tc = TcController::new(stores.clone(), bridge.clone(), flows.clone(), netlink()?);
    let en = EnController::new(
        crate::wiring::en_config(cfg),
        stores.clone(),
        bridge.clone(),
        flows.clone(),
        netlink()?,
        Arc::new(VswitchdDatapath::new(&cfg.ovs_rundir, &cfg.datapath_type)),
    )
    .with_host_network(Arc::new(crate::hostnet::HostNet::for_datapath(
        &cfg.datapath_type,
        &cfg.state_dir,
    )));
    Ok(Controllers {
        tc: Arc::new(tc),
        en: Arc::new(en),
        l2: L2Controller::new(bridge.clone(), flows.clone()),
        bridge: bridge.clone(),
    })
}

fn start_workers(
    workers: Workers,
    heartbeats: &Arc<Heartbeats>,
) -> Result<Vec<JoinHandle<()>>, DaemonError> {
    let workers = Arc::new(workers);
    (0..TC_WORKERS)
        .map(|i| {
            let w = workers.clone();
            let name = format!("sync-worker-{i}");
            let pulse = heartbeats.register(&name, WORKER_DEADLINE, Instant::now());
            std::thread::Builder::new()
                .name(name)
                .spawn(move || w.run(&pulse))
                .map_err(|e| DaemonError::Setup(format!("spawn worker: {e}")))
        })
        .collect()
}

/// The API source's settings, checked the way [`crate::wiring::start_source`] will use them (the
/// kubeconfig loaded, the client built: scheme, TLS and credentials), connecting to
/// nothing. Errors are configuration errors (exit 2).
fn check_source(cfg: &Config) -> Result<(), DaemonError> {
    let cc = match &cfg.source {
        Input::Manifests(_) => return Ok(()),
        Input::Kubeconfig(path) => k8s::kubeconfig::load_kubeconfig(path, None),
        Input::InCluster => k8s::kubeconfig::in_cluster(),
    }
    .map_err(|e| DaemonError::Config(e.to_string()))?;
    let http = match &cfg.source {
        Input::Kubeconfig(_) => k8s::HttpConfig {
            allow_insecure: cfg.allow_insecure_tls,
            allow_plain_http: cfg.allow_plain_http,
            ..Default::default()
        },
        _ => Default::default(),
    };
    k8s::Client::new(&cc, http)
        .map(drop)
        .map_err(|e| DaemonError::Config(e.to_string()))
}

/// Retry `f` every `every` until it succeeds or `stop` fires, logging the first failure and
/// then every tenth.
fn retry<T, E: std::fmt::Display>(
    what: &str,
    every: Duration,
    stop: &Receiver<()>,
    mut f: impl FnMut() -> Result<T, E>,
) -> Result<T, DaemonError> {
    let mut n = 0u32;
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(e) => {
                if n.is_multiple_of(10) {
                    log::warn!("{what} failed (retrying every {every:?}): {e}");
                    // What `systemctl status tether` shows while start-up is stuck.
                    notify::notify_or_log(&[("STATUS", &format!("{what}: {e}"))]);
                }
                n += 1;
            }
        }
        select! {
            recv(stop) -> _ => return Err(DaemonError::Stopped),
            default(every) => {}
        }
    }
}
