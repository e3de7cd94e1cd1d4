//! The daemon's event loop: the one thread that turns what happens (Kubernetes events,
//! OVSDB updates, OpenFlow reconnects, finished syncs, timers) into work keys — through
//! `controller::route` — and into start-up's transitions ([`Startup`]). Every sync is a
//! queued key (the ExternalNode's recovery is its `En` sync; a reconnect queues every
//! key), but the loop also does OVS I/O itself, on the thread that pings systemd's
//! watchdog: at READY it flushes the deferred flows (one bundle), sweeps orphaned
//! TrafficControl ports (`TcController::sweep_orphans`, under the controller's port lock),
//! deletes the previous round if the flush did not, and writes `roundNum`; it clears
//! `flow-restore-wait` (then, and after the `En` sync that follows a reconnect once
//! ready); after an OVSDB reconnect it takes the bridge's OVSDB lock again; after a
//! `Bridge` sync it writes `roundNum` again. Each of these waits for the OVSDB or OpenFlow
//! connection thread's reply, bounded by its request timeout. (Diffing the ports after an
//! OVSDB event reads the interface store, rebuilt from the replica: no request.)

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, never, select, tick};

use super::Ovs;
use super::startup::{Next, Startup};
use crate::controller::deferred::DeferredFlows;
use crate::controller::queue::WorkQueue;
use crate::controller::route::{PortView, Trigger, route, sync_order};
use crate::controller::trafficcontrol::TcController;
use crate::controller::worker::{Done, SyncEnd};
use crate::controller::{Bridge, Key};
use crate::heartbeat::Heartbeats;
use crate::k8s::{Kind, KubeEvent, Source, Stores};
use crate::ovsdb::{self, DbEvent};
use crate::status::probe::Probe;
use crate::{notify, status};

/// What the loop reads from and drives.
pub(super) struct Parts {
    pub stop: Receiver<()>,
    pub kube: Receiver<KubeEvent>,
    pub done: Receiver<Done>,
    pub stores: Stores,
    pub bridge: Arc<dyn Bridge>,
    pub tc: Arc<TcController>,
    pub queue: Arc<WorkQueue<Key>>,
    pub deferred: Arc<DeferredFlows>,
    pub ovs: Ovs,
    pub probe: Arc<Probe>,
    pub source: Arc<Source>,
    pub heartbeats: Arc<Heartbeats>,
    /// The NetworkPolicy threads' (the controller's and the controlplane watches').
    pub more_heartbeats: Vec<Arc<Heartbeats>>,
    pub ready: Box<dyn FnOnce() + Send>,
    pub phases: super::phases::Phases,
}

pub(super) struct EventLoop {
    p: Parts,
    startup: Startup,
    ready: Option<Box<dyn FnOnce() + Send>>,
    /// The ports as last routed (port changes are diffs against it): a view, not the
    /// store, so only one store is alive at a time.
    ports: PortView,
    /// After an OpenFlow reconnect once ready: flow-restore-wait is cleared when the
    /// ExternalNode's resync (fresh ofports) has ended.
    restore_wait: bool,
    /// The OVSDB session was lost since the bridge's lock was taken: take it again on the
    /// next connection.
    relock: bool,
    reported_stuck: bool,
    status_line: status::render::StatusLine,
}

impl EventLoop {
    pub fn new(mut p: Parts) -> EventLoop {
        let ready = Some(std::mem::replace(&mut p.ready, Box::new(|| {})));
        EventLoop {
            ports: PortView::of(&p.bridge.interfaces()),
            p,
            startup: Startup::new(&Kind::ALL),
            ready,
            restore_wait: false,
            relock: false,
            reported_stuck: false,
            status_line: Default::default(),
        }
    }

    /// Until `stop` fires or the source ends.
    pub fn run(mut self) {
        let ovs_events = self.p.ovs.client.events();
        let reconnects = self.p.ovs.of.reconnects().clone();
        // systemd's watchdog (WatchdogSec=): pinged from this loop, so a stuck loop is noticed.
        let watchdog = notify::watchdog_from_env().map_or_else(never, tick);
        // What `systemctl status` shows, refreshed when it changes (at most once a second;
        // looked at every 2 s, and only under systemd: an idle daemon wakes no more).
        let status_tick = if std::env::var_os("NOTIFY_SOCKET").is_some() {
            tick(Duration::from_secs(2))
        } else {
            never()
        };
        let stop = self.p.stop.clone();
        let (kube, done) = (self.p.kube.clone(), self.p.done.clone());
        loop {
            select! {
                recv(stop) -> _ => break,
                recv(watchdog) -> _ => self.watchdog(),
                recv(status_tick) -> _ => self.status(),
                recv(kube) -> ev => match ev {
                    Ok(ev) => self.on_kube(&ev),
                    Err(_) => {
                        log::error!("the kubernetes source stopped");
                        break;
                    }
                },
                recv(ovs_events) -> first => {
                    // Coalesce a burst of updates into one interface-store diff.
                    let mut reconnected = matches!(first, Ok(DbEvent::Connected));
                    self.relock |= matches!(first, Ok(DbEvent::Disconnected(_)));
                    while let Ok(ev) = ovs_events.try_recv() {
                        reconnected |= ev == DbEvent::Connected;
                        self.relock |= matches!(ev, DbEvent::Disconnected(_));
                    }
                    self.on_ovsdb(reconnected);
                },
                recv(reconnects) -> generation => self.on_openflow(generation.unwrap_or(0)),
                recv(done) -> d => if let Ok(d) = d { self.on_done(&d) },
            }
        }
    }

    fn queue(&self, keys: impl IntoIterator<Item = Key>) {
        for k in keys {
            self.p.queue.add(k);
        }
    }

    fn route(&self, trigger: Trigger<'_>) {
        let keys = route(trigger, &self.p.stores, &self.p.tc.clashing());
        self.queue(sync_order(trigger, &self.p.stores, keys));
    }

    fn on_kube(&mut self, ev: &KubeEvent) {
        status::probe::observe(&self.p.probe.watches, ev, Instant::now());
        if let KubeEvent::Synced(kind) = ev {
            log::info!("initial {} list is in", kind.plural());
            let (stores, clashing) = (&self.p.stores, self.p.tc.clashing());
            let next = self.startup.listed(*kind, Instant::now(), || {
                route(Trigger::All, stores, &clashing)
            });
            if let Next::QueueAll(keys) = next {
                self.p.phases.mark("lists_done");
                self.queue(keys);
            }
            return;
        }
        self.route(Trigger::Kube(ev));
    }

    fn on_ovsdb(&mut self, reconnected: bool) {
        if reconnected && self.relock {
            self.relock = false;
            // A new session holds no lock: take the bridge's again (a `tether reset` that
            // slipped into the gap holds it, and says so when it runs).
            let lock = ovsdb::lock::lock_id(self.p.ovs.db.name());
            match ovsdb::lock::try_lock(&self.p.ovs.client, &lock) {
                Ok(true) => log::info!("holding the OVSDB lock {lock} again"),
                Ok(false) => log::error!(
                    "the OVSDB lock {lock} is held by another client (tether reset, or a second tether on this bridge) since ovsdb-server came back"
                ),
                Err(e) => log::warn!("taking the OVSDB lock {lock} again failed: {e}"),
            }
        }
        if reconnected {
            // Syncs that failed while OVSDB was down would otherwise wait out their
            // 5 s+ backoff; the connection they needed is back now.
            let n = self.p.queue.retry_now();
            if n > 0 {
                log::info!("ovsdb connected: retrying {n} failed syncs now");
            }
        }
        if !self.p.ovs.db.is_current() {
            // Deleted (`ovs-vsctl del-br`), or a database that came back without it: the
            // bridge is made again; its ports and flows follow (OpenFlow reconnects, and
            // the ExternalNode's port changes sync it).
            self.queue([Key::Bridge]);
        }
        let now = PortView::of(&self.p.bridge.interfaces());
        self.route(Trigger::Ports {
            old: &self.ports,
            new: &now,
        });
        self.ports = now;
    }

    /// The OpenFlow connection came back and the backend has replayed every flow it
    /// holds. A restarted switch may renumber ports: re-read them and resync everything.
    fn on_openflow(&mut self, generation: u64) {
        // Generation 1 is the first connection, not a reconnect.
        if generation > 1 {
            self.p
                .probe
                .metrics
                .openflow_reconnects
                .fetch_add(1, Ordering::Relaxed);
        }
        log::info!("openflow reconnected: resyncing every key");
        self.ports = PortView::of(&self.p.bridge.interfaces());
        self.route(Trigger::All);
        // A switch restarted with flow-restore-wait waits for its flows: the replay put
        // them back, and the ExternalNode's resync fixes renumbered uplink ports. Before
        // READY the first full sync clears it.
        self.restore_wait = self.startup.is_ready();
    }

    fn on_done(&mut self, done: &Done) {
        if done.key == Key::Bridge && done.ended == SyncEnd::Synced && self.startup.is_ready() {
            // A bridge made again has none of tether's external_ids: this run's round.
            let round = self.p.ovs.round.to_string();
            if let Err(e) = self
                .p
                .bridge
                .set_bridge_external_id("roundNum", Some(&round))
            {
                log::warn!("persisting roundNum={round} failed: {e}");
            }
        }
        if done.key == Key::En && self.restore_wait {
            self.restore_wait = false;
            clear_flow_restore_wait(&self.p.ovs.client);
        }
        if self.startup.synced(done) == Next::BecomeReady {
            self.become_ready();
        }
    }

    /// The first full sync ended: flows out, orphans swept, forwarding on, READY.
    fn become_ready(&mut self) {
        let p = &self.p;
        p.phases.mark("first_sync_done");
        let replacing = p.ovs.replacing();
        let (failed, replaced) = p.deferred.flush(replacing);
        p.phases.mark("flush_committed");
        if let Some(Err(e)) = &replaced {
            log::warn!("first full sync: deleting the flows of round {replacing:?} failed: {e}");
        }
        if !failed.is_empty() {
            for (owner, e) in &failed {
                log::warn!("first full sync: flows of {owner} failed: {e}");
            }
            // Deferral is over: their syncs now apply one by one.
            self.route(Trigger::All);
        }
        let swept = p.tc.sweep_orphans();
        if !swept.is_empty() {
            log::info!(
                "first full sync: removed orphaned ports {}",
                swept.join(",")
            );
        }
        // The old round went with the flush (or failed there, logged).
        let round = p.ovs.round;
        if replaced.is_none() {
            if let Some(prev) = replacing {
                if let Err(e) = p.ovs.of.delete_round(prev) {
                    log::warn!("deleting flows of the previous round {prev} failed: {e}");
                }
            }
        }
        if let Err(e) = p
            .bridge
            .set_bridge_external_id("roundNum", Some(&round.to_string()))
        {
            log::warn!("persisting roundNum={round} failed: {e}");
        }
        log::info!("first full sync done (round {round})");
        clear_flow_restore_wait(&p.ovs.client);
        p.probe.ready.store(true, Ordering::SeqCst);
        let line = status::render::summary(&p.probe.snapshot());
        notify::notify_or_log(&[("READY", "1"), ("STATUS", &line)]);
        if let Some(r) = self.ready.take() {
            r();
        }
    }

    fn watchdog(&mut self) {
        let now = Instant::now();
        let stuck: Vec<(String, Duration)> = self
            .p
            .heartbeats
            .stuck(now)
            .into_iter()
            .chain(self.p.source.heartbeats().stuck(now))
            .chain(self.p.more_heartbeats.iter().flat_map(|h| h.stuck(now)))
            .collect();
        if stuck.is_empty() {
            notify::notify_or_log(&[("WATCHDOG", "1")]);
            self.reported_stuck = false;
        } else if !self.reported_stuck {
            // No ping: systemd's watchdog restarts the service.
            for (name, age) in &stuck {
                log::error!(
                    "watchdog: thread {name} has made no progress for {}s; not pinging systemd's watchdog",
                    age.as_secs()
                );
            }
            self.reported_stuck = true;
        }
    }

    fn status(&mut self) {
        let snap = self.p.probe.snapshot();
        if let Some(line) = self.status_line.update(&snap, Instant::now()) {
            notify::notify_or_log(&[("STATUS", &line)]);
        }
    }
}

/// Let ovs-vswitchd forward: clear `flow-restore-wait` once every flow is in (the first
/// full sync, and the resync after a reconnect), never before.
fn clear_flow_restore_wait(client: &ovsdb::Client) {
    match ovsdb::bridgedb::clear_flow_restore_wait(client) {
        Ok(true) => {
            log::info!("cleared Open_vSwitch other_config:flow-restore-wait: the flows are in")
        }
        Ok(false) => {}
        Err(e) => log::warn!("clearing other_config:flow-restore-wait failed: {e}"),
    }
}
