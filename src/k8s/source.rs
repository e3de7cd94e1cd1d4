//! Starting and stopping the object source — the API server (one watcher thread per kind)
//! or a manifests directory — which keeps the [`Stores`] current and tells the controllers
//! what changed through one bounded channel of [`KubeEvent`]s. Owns the threads and the thin
//! driver loop around the pure `watch::Watcher`; it does no HTTP itself (`http.rs`) and
//! does not interpret objects (controllers do).
//!
//! Per kind (docs/design.md#sources, docs/antrea-compat.md#what-is-watched): Pods of this
//! node only (`spec.nodeName=<node>`), all Namespaces, all TrafficControls, and the one
//! ExternalNode named like the node in the ExternalNode namespace (`metadata.name=<node>`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::crd::{ExternalNode, TrafficControl};
use super::error::KubeError;
use super::feed::{KindStatus, KubeEvent, StatusMap, Watched, apply_delta, send, set_status};
use super::http::Client;
use super::manifests::{self, ManifestsConfig};
use super::store::{Store, Stores};
use super::types::{Kind, Namespace, Pod};
use super::watch::{
    BadEvent, Request, WatchConfig, WatchNext, Watcher, bad_event_identity, decode_event,
    decode_list,
};
use crate::heartbeat::{Heartbeats, Pulse};

/// What to watch and how.
#[derive(Debug, Clone)]
pub struct SourceConfig {
    pub node_name: String,
    pub external_node_namespace: String,
    /// The kinds to watch (the daemon: all four; a TC-only or EN-only setup: fewer).
    pub kinds: Vec<Kind>,
    pub watch: WatchConfig,
}

impl SourceConfig {
    /// Collection path and field selector for `kind`.
    pub fn scope(&self, kind: Kind) -> (String, Option<String>) {
        match kind {
            Kind::Pod => (
                kind.collection_path(None),
                Some(format!("spec.nodeName={}", self.node_name)),
            ),
            Kind::ExternalNode => (
                kind.collection_path(Some(&self.external_node_namespace)),
                Some(format!("metadata.name={}", self.node_name)),
            ),
            Kind::Namespace | Kind::TrafficControl => (kind.collection_path(None), None),
        }
    }
}

/// A running source; [`Source::stop`] ends and joins its threads.
pub struct Source {
    threads: Vec<JoinHandle<()>>,
    stop_tx: Option<Sender<()>>,
    client: Option<Arc<Client>>,
    status: StatusMap,
    heartbeats: Arc<Heartbeats>,
}

/// How long a source thread may be busy (a poll, a page, applying a list) without progress
/// before the watchdog treats it as stuck.
pub const BUSY_DEADLINE: Duration = Duration::from_secs(60);

impl Source {
    /// Watch the API server: one thread per kind, named `watch-<kind>`.
    pub fn start_api(
        client: Client,
        cfg: SourceConfig,
        stores: Stores,
        events: Sender<KubeEvent>,
    ) -> Result<Source, KubeError> {
        let client = Arc::new(client);
        let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
        let status: StatusMap = Arc::default();
        let heartbeats = Arc::new(Heartbeats::default());
        let mut threads = Vec::new();
        for kind in cfg.kinds.clone() {
            let name = format!("watch-{}", kind.plural());
            let ctx = WatchCtx {
                pulse: heartbeats.register(&name, BUSY_DEADLINE, Instant::now()),
                client: Arc::clone(&client),
                cfg: cfg.clone(),
                stores: stores.clone(),
                events: events.clone(),
                stop: stop_rx.clone(),
                status: Arc::clone(&status),
                kind,
            };
            let spawned =
                std::thread::Builder::new()
                    .name(name.clone())
                    .spawn(move || match kind {
                        Kind::Pod => run_watcher::<Pod>(&ctx),
                        Kind::Namespace => run_watcher::<Namespace>(&ctx),
                        Kind::TrafficControl => run_watcher::<TrafficControl>(&ctx),
                        Kind::ExternalNode => run_watcher::<ExternalNode>(&ctx),
                    });
            match spawned {
                Ok(h) => threads.push(h),
                Err(e) => {
                    let mut s = Source {
                        threads,
                        stop_tx: Some(stop_tx),
                        client: Some(client),
                        status,
                        heartbeats,
                    };
                    s.stop_inner();
                    return Err(KubeError::Config {
                        what: format!("thread {name}"),
                        detail: e.to_string(),
                    });
                }
            }
        }
        Ok(Source {
            threads,
            stop_tx: Some(stop_tx),
            client: Some(client),
            status,
            heartbeats,
        })
    }

    /// Poll a manifests directory (one thread, `manifests`).
    pub fn start_manifests(
        cfg: ManifestsConfig,
        stores: Stores,
        events: Sender<KubeEvent>,
    ) -> Result<Source, KubeError> {
        let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
        let status: StatusMap = Arc::default();
        let st = Arc::clone(&status);
        let heartbeats = Arc::new(Heartbeats::default());
        let pulse = heartbeats.register("manifests", BUSY_DEADLINE, Instant::now());
        let h = std::thread::Builder::new()
            .name("manifests".to_string())
            .spawn(move || manifests::run(&cfg, &stores, &events, &stop_rx, &st, &pulse))
            .map_err(|e| KubeError::Config {
                what: "thread manifests".to_string(),
                detail: e.to_string(),
            })?;
        Ok(Source {
            threads: vec![h],
            stop_tx: Some(stop_tx),
            client: None,
            status,
            heartbeats,
        })
    }

    /// The heartbeats of the source's threads (for the watchdog).
    pub fn heartbeats(&self) -> &Arc<Heartbeats> {
        &self.heartbeats
    }

    /// Per-kind sync state and current errors.
    pub fn status(&self) -> BTreeMap<Kind, KindStatus> {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Stop every thread (interrupting open watches) and join them.
    pub fn stop(mut self) {
        self.stop_inner();
    }

    fn stop_inner(&mut self) {
        // Dropping the sender wakes every `recv_timeout`/`select!` on the stop channel.
        self.stop_tx = None;
        if let Some(c) = &self.client {
            c.shutdown();
        }
        for h in self.threads.drain(..) {
            if h.join().is_err() {
                log::error!("a source thread panicked");
            }
        }
    }
}

impl Drop for Source {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

struct WatchCtx {
    pulse: Pulse,
    client: Arc<Client>,
    cfg: SourceConfig,
    stores: Stores,
    events: Sender<KubeEvent>,
    stop: Receiver<()>,
    status: StatusMap,
    kind: Kind,
}

impl WatchCtx {
    fn stopping(&self) -> bool {
        matches!(
            self.stop.try_recv(),
            Err(crossbeam_channel::TryRecvError::Disconnected)
        )
    }

    fn record_error(&self, err: &KubeError, attempts: u32) {
        // Logarithmic rate limit: the 1st, 2nd, 4th, 8th... failure in a row is logged.
        if attempts.is_power_of_two() || attempts == 0 {
            log::warn!("kind={} attempt={attempts} err={err}", self.kind);
        } else {
            log::debug!("kind={} attempt={attempts} err={err}", self.kind);
        }
        set_status(&self.status, self.kind, |s| {
            s.last_error = Some(err.to_string());
            s.errors_total += 1;
        });
    }
}

fn seed(kind: Kind) -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    u64::from(nanos) ^ ((kind as u64) << 32) ^ u64::from(std::process::id())
}

/// The driver: ask the machine what to do, do it, report back. Returns on stop.
fn run_watcher<T: Watched>(ctx: &WatchCtx) {
    let (path, field_selector) = ctx.cfg.scope(ctx.kind);
    let mut d = Driver::<T> {
        ctx,
        path,
        store: T::store(&ctx.stores),
        w: Watcher::new(ctx.cfg.watch, seed(ctx.kind)),
        attempts: 0,
        synced: false,
    };
    loop {
        if ctx.stopping() {
            return;
        }
        let now = Instant::now();
        let req = match d.w.poll(now) {
            WatchNext::Wait(at) => {
                ctx.pulse.idle();
                match ctx.stop.recv_timeout(at.saturating_duration_since(now)) {
                    Err(RecvTimeoutError::Timeout) => continue,
                    _ => return,
                }
            }
            WatchNext::Send(req) => req,
        };
        let mut query = req.query();
        if let Some(fs) = &field_selector {
            query.push(("fieldSelector", fs.clone()));
        }
        let go_on = match req {
            Request::List { .. } => d.list(&query),
            Request::Watch { .. } => d.watch(&query),
        };
        if go_on.is_break() {
            return;
        }
    }
}

/// One kind's watcher and what doing its requests has learnt: failures in a row (for the
/// log's cadence), and whether the first list is in.
struct Driver<'a, T: Watched> {
    ctx: &'a WatchCtx,
    path: String,
    store: &'a Arc<Store<T>>,
    w: Watcher<T>,
    attempts: u32,
    synced: bool,
}

/// `Break`: stopping.
type Go = std::ops::ControlFlow<()>;

impl<T: Watched> Driver<'_, T> {
    /// A request failed: counted and logged, and the machine told (it backs off).
    fn failed(&mut self, e: KubeError, list: bool) -> Go {
        if self.ctx.stopping() {
            return Go::Break(());
        }
        self.attempts += 1;
        self.ctx.record_error(&e, self.attempts);
        let now = Instant::now();
        if list {
            self.w.on_list_error(e, now);
        } else {
            self.w.on_watch_error(e, now);
        }
        Go::Continue(())
    }

    /// One LIST page: into the store when the list is complete, `Synced` after the first.
    fn list(&mut self, query: &[(&str, String)]) -> Go {
        let ctx = self.ctx;
        // The request has its own timeout: waiting on it is not being stuck.
        ctx.pulse.idle();
        let got = ctx.client.get(&self.path, query);
        ctx.pulse.busy();
        let page = match got.and_then(|b| decode_list::<T>(&b)) {
            Ok(page) => page,
            Err(e) => return self.failed(e, true),
        };
        self.attempts = 0;
        for (key, err) in &page.skipped {
            log::error!(
                "kind={} object={key} cannot be decoded, skipped (its previous version, if any, is kept): {err}",
                ctx.kind
            );
        }
        let Some(delta) = self.w.on_list_page(page) else {
            return Go::Continue(());
        };
        // Status first: whoever sees the list's events sees it counted.
        let relist = self.synced;
        set_status(&ctx.status, ctx.kind, |s| {
            s.synced = true;
            s.last_error = None;
            s.relists += u64::from(relist);
            s.last_ok = Some(Instant::now());
        });
        if !apply_delta(self.store, delta, &ctx.events, &ctx.stop) {
            return Go::Break(());
        }
        if !self.synced {
            self.synced = true;
            log::info!(
                "kind={} initial sync done objects={}",
                ctx.kind,
                self.store.len()
            );
            if !send(&ctx.events, &ctx.stop, KubeEvent::Synced(ctx.kind)) {
                return Go::Break(());
            }
        }
        Go::Continue(())
    }

    /// One WATCH stream, event by event, until it ends or fails.
    fn watch(&mut self, query: &[(&str, String)]) -> Go {
        let ctx = self.ctx;
        ctx.pulse.idle();
        let opened = ctx.client.watch(&self.path, query);
        ctx.pulse.busy();
        let mut stream = match opened {
            Ok(s) => s,
            Err(e) => return self.failed(e, false),
        };
        self.w.on_watch_opened(Instant::now());
        loop {
            // Reads time out on a silent stream (watch_stall_timeout).
            ctx.pulse.idle();
            let next = stream.next_line();
            ctx.pulse.busy();
            let line = match next {
                None => {
                    self.w.on_watch_end(Instant::now());
                    return Go::Continue(());
                }
                Some(Err(e)) => return self.failed(e, false),
                Some(Ok(line)) => line,
            };
            let ev = match decode_event::<T>(&line) {
                Ok(ev) => ev,
                Err(e) => match self.bad_event(&line, e) {
                    BadEvent::Skipped => continue,
                    BadEvent::Rewatch | BadEvent::Relist => return Go::Continue(()),
                },
            };
            match self.w.on_watch_event(ev, Instant::now()) {
                Ok(delta) => {
                    let now = Instant::now();
                    let recovered = self.attempts > 0;
                    set_status(&ctx.status, ctx.kind, |s| {
                        s.last_ok = Some(now);
                        if recovered {
                            s.last_error = None;
                        }
                    });
                    self.attempts = 0;
                    if let Some(delta) = delta {
                        if !apply_delta(self.store, delta, &ctx.events, &ctx.stop) {
                            return Go::Break(());
                        }
                    }
                }
                Err(e) => {
                    self.attempts += 1;
                    ctx.record_error(&e, self.attempts);
                    return Go::Continue(());
                }
            }
        }
    }

    /// One undecodable object must not stall the kind: skip it (named), and relist if it
    /// keeps coming back.
    fn bad_event(&mut self, line: &[u8], e: KubeError) -> BadEvent {
        let id = bad_event_identity(line);
        let key = id.as_ref().map(|(k, _)| k.as_str());
        let rv = id.as_ref().map(|(_, r)| r.as_str());
        let what = self.w.on_bad_event(key, rv, e.clone(), Instant::now());
        log::error!(
            "kind={} object={} undecodable watch event ({e}): {}",
            self.ctx.kind,
            key.unwrap_or("?"),
            match what {
                BadEvent::Skipped => "skipped",
                BadEvent::Rewatch => "re-watching",
                BadEvent::Relist => "it came back: relisting",
            }
        );
        set_status(&self.ctx.status, self.ctx.kind, |s| {
            s.last_error = Some(e.to_string());
            s.errors_total += 1;
        });
        what
    }
}
