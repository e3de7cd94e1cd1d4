//! `tether run`: the threads and their start-up order (DESIGN §4).
//!
//! 1. OVSDB (connect, retrying) → ensure the bridge → this run's flow round
//!    (`Bridge.external_ids:roundNum` + 1).
//! 2. OpenFlow (`OfFlows`: OF1.5 flows + OF1.0 no-flood) → the pipeline's base flows.
//! 3. The Kubernetes source (API or manifests directory) feeding the stores.
//! 4. Workers (4, sharing one queue of TrafficControl, L2 and ExternalNode keys; the
//!    ExternalNode first recovers whatever a crash interrupted) and the event
//!    thread mapping source, OVSDB and OpenFlow events to queue keys.
//! 5. After the first full sync: orphaned TC ports swept, the previous round's flows
//!    deleted, the round persisted — so a restart never interrupts forwarding.
//!
//! Stopping (the `stop` channel, fed by SIGTERM/SIGINT in `main`) leaves every flow and
//! port in place: the VM stays reachable while tether is down.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, bounded, never, select, tick};

use crate::config::{Config, Source as SourceKind};
use crate::controller::bridge::{LiveBridge, OvsBridge};
use crate::controller::deferred::{DeferredFlows, Scope};
use crate::controller::externalnode::{EnConfig, EnController};
use crate::controller::interfaces::{Interfaces, Role};
use crate::controller::queue::{Outcome, QueueConfig, SystemClock, WorkQueue};
use crate::controller::trafficcontrol::TcController;
use crate::heartbeat::{Heartbeats, Pulse};
use crate::k8s::{self, Event as KubeEvent, Kind, Source, SourceConfig, Stores};
use crate::openflow::{Category, Flows, OfFlows, OfFlowsConfig, Owner};
use crate::ovsdb::{self, Client, ClientOptions, Remote};
use crate::pipeline;
use crate::status::probe::{CountingFlows, Probe};
use crate::status::{Metrics, WatchTracker};
use crate::{notify, status};

/// Flow owners of the pipeline itself.
const BASE_OWNER: Owner = Owner {
    category: Category::DEFAULT,
    object: 0,
};
const L2_OWNER: Owner = Owner {
    category: Category::DEFAULT,
    object: 1,
};

const TC_WORKERS: usize = 4;
/// How long one sync may take without being "stuck" for the watchdog (a takeover waits up
/// to ~10 s for vswitchd and DAD; OVSDB and OpenFlow requests time out well before).
const WORKER_DEADLINE: Duration = Duration::from_secs(120);

/// A unit of work: one TrafficControl, or the L2 forwarding flows of the Pod ports.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Key {
    Tc(String),
    L2,
    /// This node's ExternalNode.
    En,
}

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

/// Everything the daemon runs; dropping it after `stop` joins the threads.
struct Running {
    threads: Vec<JoinHandle<()>>,
    queue: Arc<WorkQueue<Key>>,
    source: Option<Arc<Source>>,
    status: Option<status::Server>,
}

fn start_source(
    cfg: &Config,
    stores: &Stores,
    events: crossbeam_channel::Sender<KubeEvent>,
) -> Result<Source, DaemonError> {
    let kinds = vec![
        Kind::Namespace,
        Kind::Pod,
        Kind::TrafficControl,
        Kind::ExternalNode,
    ];
    let err = |e: k8s::KubeError| DaemonError::Setup(e.to_string());
    match &cfg.source {
        SourceKind::Manifests(dir) => Source::start_manifests(
            k8s::ManifestsConfig::new(dir.clone(), &cfg.node_name, &cfg.external_node_namespace),
            stores.clone(),
            events,
        )
        .map_err(err),
        SourceKind::Kubeconfig(path) => {
            let cc = k8s::kubeconfig::load_kubeconfig(path, None).map_err(err)?;
            let http = k8s::HttpConfig {
                allow_insecure: cfg.allow_insecure_tls,
                allow_plain_http: cfg.allow_plain_http,
                ..Default::default()
            };
            let client = k8s::Client::new(&cc, http).map_err(err)?;
            Source::start_api(client, source_config(cfg, kinds), stores.clone(), events)
                .map_err(err)
        }
        SourceKind::InCluster => {
            let cc = k8s::kubeconfig::in_cluster().map_err(err)?;
            let client = k8s::Client::new(&cc, k8s::HttpConfig::default()).map_err(err)?;
            Source::start_api(client, source_config(cfg, kinds), stores.clone(), events)
                .map_err(err)
        }
    }
}

fn source_config(cfg: &Config, kinds: Vec<Kind>) -> SourceConfig {
    SourceConfig {
        node_name: cfg.node_name.clone(),
        external_node_namespace: cfg.external_node_namespace.clone(),
        kinds,
        watch: k8s::WatchConfig::default(),
    }
}

/// L2ForwardingCalc flows for every Pod port with a MAC and an ofport.
fn l2_flows(ifs: &Interfaces) -> Vec<crate::openflow::Flow> {
    let mut flows: Vec<_> = ifs
        .iter()
        .filter(|i| matches!(i.role, Role::Pod { .. }))
        .filter_map(|i| {
            Some(pipeline::l2_port_flow(
                pipeline::parse_mac(i.mac()?)?,
                i.ofport()?,
            ))
        })
        .collect();
    flows.sort();
    flows.dedup_by(|a, b| a.key == b.key);
    flows
}

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
    let db = cfg.ovs_rundir.join("db.sock");
    let client = Arc::new(Client::start(
        Remote::Unix(db.clone()),
        ClientOptions::default(),
    ));
    retry(
        &format!("connecting to ovsdb at {}", db.display()),
        Duration::from_secs(1),
        &stop,
        || client.wait_connected(Duration::from_secs(1)),
    )?;
    // A bridge of another datapath type is a configuration error (exit 2), not something
    // to retry: nothing is changed, and waiting cannot fix it.
    let bridge = retry(
        &format!("setting up bridge {}", cfg.bridge),
        Duration::from_secs(2),
        &stop,
        || match ovsdb::Bridge::ensure(client.clone(), &cfg.bridge, &cfg.datapath_type) {
            Err(e @ ovsdb::OvsdbError::DatapathMismatch { .. }) => Ok(Err(e)),
            r => r.map(Ok),
        },
    )?
    .map_err(|e| DaemonError::Config(e.to_string()))?;
    let prev_round: Option<u16> = bridge
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
    let mgmt: PathBuf = cfg.ovs_rundir.join(format!("{}.mgmt", cfg.bridge));
    let of = Arc::new(
        OfFlows::start(OfFlowsConfig::new(mgmt.clone(), &cfg.bridge, round))
            .map_err(|e| DaemonError::Setup(format!("openflow {}: {e}", mgmt.display())))?,
    );
    retry(
        &format!("connecting to openflow at {}", mgmt.display()),
        Duration::from_millis(500),
        &stop,
        || of.wait_connected(Duration::from_secs(1)),
    )?;
    let metrics = Arc::new(Metrics::default());
    let counting: Arc<dyn Flows> = Arc::new(CountingFlows {
        inner: of.clone(),
        metrics: metrics.clone(),
    });
    // TC flows wait for the end of the first full sync and go out as one bundle. When the
    // bridge holds a previous round (tether's after a restart, or Antrea's agent's, adopted)
    // every flow waits, and that bundle also takes the old round out: the switch never
    // holds a mix of the two pipelines.
    let replacing = prev_round.filter(|p| *p != round);
    let scope = match replacing {
        Some(_) => Scope::All,
        None => Scope::Only(Category::TRAFFIC_CONTROL),
    };
    let deferred = Arc::new(DeferredFlows::new(counting, scope));
    let flows: Arc<dyn Flows> = deferred.clone();
    retry(
        "installing the pipeline's base flows",
        Duration::from_secs(1),
        &stop,
        || flows.apply(BASE_OWNER, pipeline::base_flows()),
    )?;

    let stores = Stores::default();
    let (ev_tx, ev_rx) = bounded(4096);
    let source = start_source(&cfg, &stores, ev_tx)?;
    let bridge: Arc<dyn OvsBridge> = Arc::new(LiveBridge::new(bridge));
    let netlink = || {
        crate::netlink::Rtnl::connect()
            .map(Arc::new)
            .map_err(|e| DaemonError::Setup(format!("netlink: {e}")))
    };
    // Its own socket: the TrafficControl workers only read (device targets), and never
    // wait behind a takeover's requests.
    let tc = Arc::new(TcController::new(
        stores.clone(),
        bridge.clone(),
        deferred.clone(),
        netlink()?,
    ));
    let links = netlink()?;
    let en = Arc::new(
        EnController::new(
            EnConfig {
                node_name: cfg.node_name.clone(),
                bridge: cfg.bridge.clone(),
                namespace: cfg.external_node_namespace.clone(),
                bypass_rules: cfg.policy_bypass_rules.clone(),
                ovs_rundir: cfg.ovs_rundir.clone(),
                datapath_type: cfg.datapath_type.clone(),
            },
            stores.clone(),
            bridge.clone(),
            flows.clone(),
            links,
        )
        .with_host_network(Arc::new(crate::hostnet::Networkd::default())),
    );
    if let Err(e) = en.recover() {
        log::warn!("externalnode recovery failed (retried by the first sync): {e}");
    }
    if let Err(e) = tc.restore_no_flood() {
        log::warn!("restoring no-flood on traffic-control ports failed: {e}");
    }
    let queue = Arc::new(WorkQueue::new(
        QueueConfig::default(),
        Arc::new(SystemClock),
    ));
    // Keys still owed their first sync attempt; READY waits for them.
    let initial: Arc<Mutex<Option<HashSet<Key>>>> = Arc::new(Mutex::new(None));
    let source = Arc::new(source);
    let watches = Arc::new(WatchTracker::default());
    let probe = Arc::new(Probe {
        node: cfg.node_name.clone(),
        bridge: cfg.bridge.clone(),
        round: round.into(),
        started: std::time::Instant::now(),
        ready: false.into(),
        ovsdb: client.clone(),
        ovsdb_socket: db.display().to_string(),
        openflow: of.clone(),
        openflow_socket: mgmt.display().to_string(),
        queue: queue.clone(),
        source: source.clone(),
        tc: tc.clone(),
        en: en.clone(),
        metrics: metrics.clone(),
        watches: watches.clone(),
    });
    let status_server = status::Server::start(&cfg.state_socket, probe.clone().handler())
        .map_err(|e| DaemonError::Setup(e.to_string()))?;
    let mut running = Running {
        threads: Vec::new(),
        queue: queue.clone(),
        source: Some(source.clone()),
        status: Some(status_server),
    };
    let workers = Workers {
        queue: queue.clone(),
        tc: tc.clone(),
        en: en.clone(),
        bridge: bridge.clone(),
        flows: flows.clone(),
        initial: initial.clone(),
        metrics: metrics.clone(),
        reported: Arc::new(Mutex::new(HashMap::new())),
    };
    let heartbeats = Arc::new(Heartbeats::default());
    for i in 0..TC_WORKERS {
        let w = workers.clone();
        let name = format!("tc-worker-{i}");
        let pulse = heartbeats.register(&name, WORKER_DEADLINE, std::time::Instant::now());
        let h = std::thread::Builder::new()
            .name(name)
            .spawn(move || w.run(&pulse))
            .map_err(|e| DaemonError::Setup(format!("spawn worker: {e}")))?;
        running.threads.push(h);
    }
    queue.add(Key::L2);

    let ovs_events = client.events();
    let reconnects = of.reconnects().clone();
    let mut ifs = bridge.interfaces();
    let mut synced: HashSet<Kind> = HashSet::new();
    let mut ready = Some(ready);
    // Short: READY waits for this tick twice (all lists in → queue the first sync → all
    // synced), and it stops ticking once ready.
    let ticker = tick(Duration::from_millis(20));
    // systemd's watchdog (WatchdogSec=): pinged from this loop, so a stuck loop is noticed.
    let watchdog = notify::watchdog_from_env().map_or_else(never, tick);
    let mut reported_stuck = false;
    // What `systemctl status` shows, refreshed when it changes (at most once a second;
    // looked at every 2 s, and only under systemd: an idle daemon wakes no more).
    let status_tick = if std::env::var_os("NOTIFY_SOCKET").is_some() {
        tick(Duration::from_secs(2))
    } else {
        never()
    };
    let mut status_line = status::render::StatusLine::default();
    loop {
        // The ticker only matters until the first full sync; then the loop sleeps on events.
        let t = if ready.is_some() {
            ticker.clone()
        } else {
            never()
        };
        select! {
            recv(stop) -> _ => break,
            recv(watchdog) -> _ => {
                let now = std::time::Instant::now();
                let stuck: Vec<(String, Duration)> = heartbeats
                    .stuck(now)
                    .into_iter()
                    .chain(source.heartbeats().stuck(now))
                    .collect();
                if stuck.is_empty() {
                    notify::notify_or_log(&[("WATCHDOG", "1")]);
                    reported_stuck = false;
                } else if !reported_stuck {
                    // No ping: systemd's watchdog restarts the service.
                    for (name, age) in &stuck {
                        log::error!(
                            "watchdog: thread {name} has made no progress for {}s; not pinging systemd's watchdog",
                            age.as_secs()
                        );
                    }
                    reported_stuck = true;
                }
            },
            recv(status_tick) -> _ => {
                if let Some(line) = status_line.update(&probe.snapshot(), std::time::Instant::now()) {
                    notify::notify_or_log(&[("STATUS", &line)]);
                }
            },
            recv(ev_rx) -> ev => match ev {
                Ok(ev) => {
                    status::probe::observe(&watches, &ev, std::time::Instant::now());
                    on_kube_event(ev, &tc, &queue, &mut synced);
                }
                Err(_) => {
                    log::error!("the kubernetes source stopped");
                    break;
                }
            },
            recv(ovs_events) -> first => {
                // Coalesce a burst of updates into one interface-store diff.
                let mut reconnected = matches!(first, Ok(ovsdb::Event::Connected));
                while let Ok(ev) = ovs_events.try_recv() {
                    reconnected |= ev == ovsdb::Event::Connected;
                }
                if reconnected {
                    // Syncs that failed while OVSDB was down would otherwise wait out their
                    // 5 s+ backoff; the connection they needed is back now.
                    let n = queue.retry_now();
                    if n > 0 {
                        log::info!("ovsdb connected: retrying {n} failed syncs now");
                    }
                }
                let now = bridge.interfaces();
                for k in tc.keys_for_ports(&ifs, &now) {
                    queue.add(Key::Tc(k));
                }
                if l2_flows(&ifs) != l2_flows(&now) {
                    queue.add(Key::L2);
                }
                ifs = now;
            },
            recv(reconnects) -> generation => {
                // Generation 1 is the first connection, not a reconnect.
                if generation.is_ok_and(|g| g > 1) {
                    metrics.openflow_reconnects.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                // A restarted switch may renumber ports: re-read them and resync everything.
                log::info!("openflow reconnected: resyncing every TrafficControl");
                ifs = bridge.interfaces();
                if let Err(e) = en.replay() {
                    log::warn!("externalnode replay failed: {e}");
                    queue.add(Key::En);
                }
                // A switch restarted with flow-restore-wait waits for its flows, which the
                // replay just put back; before the first full sync they are not all in yet.
                if ready.is_none() {
                    clear_flow_restore_wait(&client);
                }
                queue.add(Key::L2);
                for k in stores.traffic_controls.keys() {
                    queue.add(Key::Tc(k));
                }
            },
            recv(t) -> _ => {
                if synced.len() == 4 {
                    let mut init = initial.lock().unwrap_or_else(|e| e.into_inner());
                    match init.as_ref() {
                        None => {
                            let mut keys: HashSet<Key> = stores.traffic_controls.keys().into_iter().map(Key::Tc).collect();
                            keys.insert(Key::L2);
                            keys.insert(Key::En);
                            for k in &keys {
                                queue.add(k.clone());
                            }
                            *init = Some(keys);
                        }
                        Some(left) if left.is_empty() => {
                            drop(init);
                            let (failed, replaced) = deferred.flush(replacing);
                            if let Some(Err(e)) = &replaced {
                                log::warn!("first full sync: deleting the flows of round {replacing:?} failed: {e}");
                            }
                            if !failed.is_empty() {
                                for (owner, e) in &failed {
                                    log::warn!("first full sync: flows of {owner} failed: {e}");
                                }
                                // Deferral is over: their syncs now apply one by one.
                                for k in stores.traffic_controls.keys() {
                                    queue.add(Key::Tc(k));
                                }
                            }
                            // The old round went with the flush (or failed there, logged).
                            let prev = if replaced.is_some() { None } else { prev_round };
                            first_full_sync(&tc, of.as_ref(), bridge.as_ref(), prev, round);
                            clear_flow_restore_wait(&client);
                            if let Some(r) = ready.take() {
                                probe.ready.store(true, std::sync::atomic::Ordering::SeqCst);
                                notify_ready(&probe);
                                r();
                            }
                        }
                        Some(_) => {}
                    }
                }
            },
        }
    }
    log::info!("stopping: flows and ports stay in place");
    notify::notify_or_log(&[("STOPPING", "1")]);
    if let Some(s) = running.status.take() {
        s.stop();
    }
    drop(probe);
    running.queue.shutdown();
    for h in running.threads.drain(..) {
        let _ = h.join();
    }
    drop(source);
    if let Some(s) = running.source.take().and_then(|s| Arc::try_unwrap(s).ok()) {
        s.stop();
    }
    Ok(())
}

/// sd_notify READY=1 with the one-line STATUS (what `systemctl status` shows).
fn notify_ready(probe: &Probe) {
    let line = status::render::summary(&probe.snapshot());
    notify::notify_or_log(&[("READY", "1"), ("STATUS", &line)]);
}

/// Let ovs-vswitchd forward: clear `flow-restore-wait` once every flow is in (the first
/// full sync, and the replay after a reconnect), never before.
fn clear_flow_restore_wait(client: &Client) {
    match ovsdb::bridge::clear_flow_restore_wait(client) {
        Ok(true) => {
            log::info!("cleared Open_vSwitch other_config:flow-restore-wait: the flows are in")
        }
        Ok(false) => {}
        Err(e) => log::warn!("clearing other_config:flow-restore-wait failed: {e}"),
    }
}

fn first_full_sync(
    tc: &TcController,
    of: &OfFlows,
    bridge: &dyn OvsBridge,
    prev: Option<u16>,
    round: u16,
) {
    let swept = tc.sweep_orphans();
    if !swept.is_empty() {
        log::info!(
            "first full sync: removed orphaned ports {}",
            swept.join(",")
        );
    }
    if let Some(p) = prev {
        if p != round {
            if let Err(e) = of.delete_round(p) {
                log::warn!("deleting flows of the previous round {p} failed: {e}");
            }
        }
    }
    if let Err(e) = bridge.set_bridge_external_id("roundNum", Some(&round.to_string())) {
        log::warn!("persisting roundNum={round} failed: {e}");
    }
    log::info!("first full sync done (round {round})");
}

fn labels_of<T: k8s::Resource>(o: &T) -> &k8s::Labels {
    &o.meta().labels
}

fn on_kube_event(
    ev: KubeEvent,
    tc: &TcController,
    queue: &WorkQueue<Key>,
    synced: &mut HashSet<Kind>,
) {
    use k8s::Change;
    let keys = match ev {
        KubeEvent::Synced(kind) => {
            log::info!("initial {} list is in", kind.plural());
            synced.insert(kind);
            return;
        }
        KubeEvent::Pod(c) => {
            let ns = c.object().metadata.namespace.clone();
            match &c {
                Change::Added(p) => tc.keys_for_pod(&ns, None, Some(labels_of(p.as_ref()))),
                Change::Deleted(p) => tc.keys_for_pod(&ns, Some(labels_of(p.as_ref())), None),
                Change::Updated { old, new } => tc.keys_for_pod(
                    &ns,
                    Some(labels_of(old.as_ref())),
                    Some(labels_of(new.as_ref())),
                ),
            }
        }
        KubeEvent::Namespace(c) => match &c {
            Change::Added(n) => tc.keys_for_namespace(None, Some(labels_of(n.as_ref()))),
            Change::Deleted(n) => tc.keys_for_namespace(Some(labels_of(n.as_ref())), None),
            Change::Updated { old, new } => {
                tc.keys_for_namespace(Some(labels_of(old.as_ref())), Some(labels_of(new.as_ref())))
            }
        },
        KubeEvent::TrafficControl(c) => match &c {
            Change::Added(t) => tc.keys_for_tc(None, Some(t)),
            Change::Deleted(t) => tc.keys_for_tc(Some(t), None),
            Change::Updated { old, new } => tc.keys_for_tc(Some(old), Some(new)),
        },
        KubeEvent::ExternalNode(_) => {
            queue.add(Key::En);
            Default::default()
        }
    };
    for k in keys {
        queue.add(Key::Tc(k));
    }
}

/// What the sync workers share.
#[derive(Clone)]
struct Workers {
    queue: Arc<WorkQueue<Key>>,
    tc: Arc<TcController>,
    en: Arc<EnController>,
    bridge: Arc<dyn OvsBridge>,
    flows: Arc<dyn Flows>,
    initial: Arc<Mutex<Option<HashSet<Key>>>>,
    metrics: Arc<Metrics>,
    /// The permanent error last logged per object (`tc=<name>`, `externalnode`), so
    /// re-syncs of an unchanged invalid object (after a reconnect, say) do not log it again.
    reported: Arc<Mutex<HashMap<String, String>>>,
}

impl Workers {
    fn run(&self, pulse: &Pulse) {
        loop {
            pulse.idle();
            let Some(key) = self.queue.get() else { break };
            pulse.busy();
            let started = std::time::Instant::now();
            // (synced, retry): a failure is retried with backoff unless only a change of
            // the object can fix it.
            let (ok, retry) = match &key {
                Key::Tc(name) => {
                    let r = self.tc.sync(name);
                    let permanent = r.as_ref().is_err_and(|e| e.is_permanent());
                    self.report(&format!("tc={name}"), r, permanent)
                }
                Key::En => {
                    let r = self.en.sync();
                    let permanent = r.as_ref().is_err_and(|e| e.is_permanent());
                    self.report("externalnode", r, permanent)
                }
                Key::L2 => match self
                    .flows
                    .apply(L2_OWNER, l2_flows(&self.bridge.interfaces()))
                {
                    Ok(()) => (true, false),
                    Err(e) => {
                        log::warn!("l2 forwarding flows failed (retrying with backoff): {e}");
                        (false, true)
                    }
                },
            };
            self.metrics
                .record_sync(key_kind(&key), ok, started.elapsed());
            if let Some(left) = self
                .initial
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_mut()
            {
                left.remove(&key);
            }
            let outcome = if retry {
                Outcome::Failure
            } else {
                Outcome::Success
            };
            self.queue.done(key, outcome);
        }
    }

    /// Log a sync's result; returns (synced, retry). A permanent error is logged once
    /// while it stays the same, and is not retried.
    fn report<E: std::fmt::Display>(
        &self,
        who: &str,
        result: Result<(), E>,
        permanent: bool,
    ) -> (bool, bool) {
        let mut reported = self.reported.lock().unwrap_or_else(|e| e.into_inner());
        match result {
            Ok(()) => {
                reported.remove(who);
                (true, false)
            }
            Err(e) if permanent => {
                let text = e.to_string();
                if reported.get(who) == Some(&text) {
                    log::debug!("{who} still skipped: {text}");
                } else {
                    log::warn!("{who} skipped until the object changes: {text}");
                    reported.insert(who.to_string(), text);
                }
                (false, false)
            }
            Err(e) => {
                reported.remove(who);
                log::warn!("{who} sync failed (retrying with backoff): {e}");
                (false, true)
            }
        }
    }
}

/// The metrics label of a key.
fn key_kind(k: &Key) -> &'static str {
    match k {
        Key::Tc(_) => "tc",
        Key::En => "en",
        Key::L2 => "l2",
    }
}
