//! The transport of the controlplane watches: one thread per watched kind (`cp-watch-
//! networkpolicies`, `cp-watch-appliedtogroups`, `cp-watch-addressgroups`), each holding a
//! long-lived `GET /apis/controlplane.antrea.io/v1beta2/<plural>?watch=true&fieldSelector=
//! nodeName=<ns>/<en>` open over tether's HTTP client (`k8s::http`, so the same TLS rules,
//! tokens, line framing and size caps as the Kubernetes watches), decoding each line
//! (`event`) into the one shared [`State`] and publishing what it changed as [`Update`]s on
//! a bounded channel. Owns the threads, reconnects and their backoff, and each watch's
//! health for `tether status`; not what a policy means (the state and, later, the planner).
//!
//! How these watches differ from the Kubernetes ones (`k8s::source`), after the agent
//! (`pkg/agent/controller/networkpolicy/networkpolicy_controller.go`, Antrea `fc70f2bb70`):
//! - no LIST and no `timeoutSeconds`: the server sends everything as ADDED and one BOOKMARK
//!   on every watch, so every (re)connect calls [`State::on_watch_start`] and is a full
//!   resync; what was known stays until the new bookmark replaces it;
//! - no stall timer: a quiet stream is normal for hours (antrea-controller closes each watch
//!   after 2–4 h and sends no periodic bookmarks). ureq's own sockets have no TCP keepalive
//!   and no hook to set it, so the client opens its sockets itself with keepalive on
//!   (`k8s::http`'s `keepalive` connector, [`KEEPALIVE`]): a dead peer fails the read within
//!   about two minutes. The per-read timeout is only a backstop, [`READ_TIMEOUT`], longer
//!   than the controller's own close, against a server alive but stuck;
//! - [`Outcome::Restart`] (a patch of an unknown group, an `ERROR` event, an undecodable
//!   group event) drops the stream and reconnects after the backoff (the agent: 5 s);
//! - a stream that ends cleanly after its bookmark (the server's 2–4 h close) reconnects at
//!   once; a failure, or an end before the bookmark, backs off (`k8s::backoff`), and a
//!   bookmark resets the backoff.
//!
//! Each thread has a heartbeat ([`Source::heartbeats`], for the watchdog), busy only while
//! it handles a line. Undecodable lines are logged naming the watch, the object and the decoder's error (which
//! names the field), counted, and given to [`State::on_undecodable`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, select};

use super::event::{Event, bad_event_identity, decode_group_event, decode_policy_event};
use super::state::{Outcome, State};
use super::{GroupKind, Kind};
use crate::heartbeat::{Heartbeats, Pulse};
use crate::k8s::KubeError;
use crate::k8s::backoff::{Backoff, BackoffConfig};
use crate::k8s::http::{Client, HttpConfig, Keepalive, WatchStream};
use crate::k8s::source::BUSY_DEADLINE;

/// The API group and version every watch path starts with.
pub const API_PREFIX: &str = "/apis/controlplane.antrea.io/v1beta2";

/// TCP keepalive on the controlplane connections: a dead peer is noticed within 90 s.
pub const KEEPALIVE: Keepalive = Keepalive {
    idle: Duration::from_secs(30),
    interval: Duration::from_secs(10),
    count: 6,
};

/// Longest wait for the next line of a watch: a backstop against a server that is alive but
/// stuck, longer than the 2–4 h after which antrea-controller closes every watch itself
/// (a dead peer is keepalive's to notice, much sooner).
pub const READ_TIMEOUT: Duration = Duration::from_secs(6 * 3600);

/// The HTTP settings of the controlplane client: `base` (the TLS rules, timeouts) with
/// [`KEEPALIVE`] and the per-read timeout of a watch set to [`READ_TIMEOUT`].
pub fn http_config(base: HttpConfig) -> HttpConfig {
    HttpConfig {
        watch_stall_timeout: READ_TIMEOUT,
        tcp_keepalive: Some(KEEPALIVE),
        ..base
    }
}

/// What to watch and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceConfig {
    /// The span key `<externalNodeNamespace>/<ExternalNode name>` (Antrea's `nodeName` for an
    /// ExternalNode, `cmd/antrea-agent/agent.go:542-545`).
    pub node_key: String,
    /// Between failed attempts and after a restart.
    pub backoff: BackoffConfig,
}

impl SourceConfig {
    /// The watch's path and query for `kind`.
    pub fn request(&self, kind: Kind) -> (String, Vec<(&'static str, String)>) {
        (
            format!("{API_PREFIX}/{}", kind.plural()),
            vec![
                ("watch", "true".to_string()),
                ("fieldSelector", format!("nodeName={}", self.node_key)),
            ],
        )
    }
}

/// What one event changed, published for the policy controller (never `Unchanged`).
/// `Restart` is published too (the source reconnects by itself; the consumer may log it or
/// show it); `Synced` once, when the three watches have all had their first bookmark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    /// The watch the event came from.
    pub kind: Kind,
    pub outcome: Outcome,
}

/// Health of one watch, for `tether status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchStatus {
    /// A stream is open and has had its bookmark.
    pub synced: bool,
    /// What is making this watch back off, if anything (cleared by the next bookmark).
    pub last_error: Option<String>,
    /// Failed requests, failed streams, restarts and undecodable lines.
    pub errors_total: u64,
    /// Watches opened after the first (each one a full resync).
    pub reconnects: u64,
    /// Lines that did not decode (also in `errors_total`).
    pub undecodable_total: u64,
    /// When a line last arrived.
    pub last_ok: Option<Instant>,
}

type StatusMap = Arc<Mutex<BTreeMap<Kind, WatchStatus>>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The running watches; [`Source::stop`] (or dropping it) ends and joins them.
pub struct Source {
    threads: Vec<JoinHandle<()>>,
    stop_tx: Option<Sender<()>>,
    client: Arc<Client>,
    state: Arc<Mutex<State>>,
    status: StatusMap,
    heartbeats: Arc<Heartbeats>,
}

impl Source {
    /// Open the three watches over `client`, feeding one [`State`] and sending every
    /// outcome other than `Unchanged` to `updates` (bounded: a slow consumer holds the
    /// watches back, it loses nothing).
    pub fn start(
        client: Client,
        cfg: SourceConfig,
        updates: Sender<Update>,
    ) -> Result<Source, KubeError> {
        let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
        let status: StatusMap = Arc::new(Mutex::new(
            Kind::ALL
                .iter()
                .map(|k| (*k, WatchStatus::default()))
                .collect(),
        ));
        let mut s = Source {
            threads: Vec::new(),
            stop_tx: Some(stop_tx),
            client: Arc::new(client),
            state: Arc::new(Mutex::new(State::new())),
            status,
            heartbeats: Arc::new(Heartbeats::default()),
        };
        for kind in Kind::ALL {
            let name = format!("cp-watch-{}", kind.plural());
            let w = WatchThread {
                pulse: s.heartbeats.register(&name, BUSY_DEADLINE, Instant::now()),
                kind,
                client: Arc::clone(&s.client),
                cfg: cfg.clone(),
                state: Arc::clone(&s.state),
                status: Arc::clone(&s.status),
                updates: updates.clone(),
                stop: stop_rx.clone(),
            };
            match std::thread::Builder::new()
                .name(name.clone())
                .spawn(move || w.run())
            {
                Ok(h) => s.threads.push(h),
                Err(e) => {
                    s.stop_inner();
                    return Err(KubeError::Config {
                        what: format!("thread {name}"),
                        detail: e.to_string(),
                    });
                }
            }
        }
        Ok(s)
    }

    /// What is known from the watches (the policy controller reads it after an
    /// [`Update`]). Hold the lock briefly: the watch threads wait for it.
    pub fn state(&self) -> &Arc<Mutex<State>> {
        &self.state
    }

    /// The heartbeats of the watch threads (for the watchdog): busy only while handling a
    /// line, idle while waiting on a stream, a connection or a backoff.
    pub fn heartbeats(&self) -> &Arc<Heartbeats> {
        &self.heartbeats
    }

    /// Each watch's health, shared (for a thread that outlives a borrow of the source).
    pub fn status_handle(&self) -> Arc<Mutex<BTreeMap<Kind, WatchStatus>>> {
        Arc::clone(&self.status)
    }

    /// Each watch's health.
    pub fn status(&self) -> BTreeMap<Kind, WatchStatus> {
        lock(&self.status).clone()
    }

    /// Stop every watch (interrupting open streams) and join the threads.
    pub fn stop(mut self) {
        self.stop_inner();
    }

    fn stop_inner(&mut self) {
        // Dropping the sender wakes every wait on the stop channel; shutting the client
        // down wakes the reads blocked on open streams.
        self.stop_tx = None;
        self.client.shutdown();
        for h in self.threads.drain(..) {
            if h.join().is_err() {
                log::error!("a controlplane watch thread panicked");
            }
        }
    }
}

impl Drop for Source {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

/// How a stream ended.
enum End {
    Stopping,
    /// The server ended it cleanly; whether it had had its bookmark.
    Closed {
        bookmarked: bool,
    },
    Failed(KubeError),
    /// The state asked for a new watch.
    Restart(String),
}

/// One watch's thread.
struct WatchThread {
    pulse: Pulse,
    kind: Kind,
    client: Arc<Client>,
    cfg: SourceConfig,
    state: Arc<Mutex<State>>,
    status: StatusMap,
    updates: Sender<Update>,
    stop: Receiver<()>,
}

impl WatchThread {
    fn set_status(&self, f: impl FnOnce(&mut WatchStatus)) {
        f(lock(&self.status).entry(self.kind).or_default());
    }

    /// Wait `d` unless stopping; false when stopping.
    fn sleep(&self, d: Duration) -> bool {
        self.pulse.idle();
        matches!(self.stop.recv_timeout(d), Err(RecvTimeoutError::Timeout))
    }

    fn stopping(&self) -> bool {
        matches!(
            self.stop.try_recv(),
            Err(crossbeam_channel::TryRecvError::Disconnected)
        )
    }

    fn failed(&self, what: &str, attempt: u32) {
        // Logarithmic rate limit, as the Kubernetes watches: attempts 1, 2, 4, 8, …
        if attempt.is_power_of_two() {
            log::warn!("controlplane kind={} attempt={attempt} {what}", self.kind);
        } else {
            log::debug!("controlplane kind={} attempt={attempt} {what}", self.kind);
        }
        self.set_status(|s| {
            s.last_error = Some(what.to_string());
            s.errors_total += 1;
        });
    }

    fn run(&self) {
        let mut backoff = Backoff::new(self.cfg.backoff, seed(self.kind));
        let (path, query) = self.cfg.request(self.kind);
        let mut opened_before = false;
        loop {
            if self.stopping() {
                return;
            }
            // The request has its own timeouts: waiting on it is not being stuck.
            self.pulse.idle();
            let opened = self.client.watch(&path, &query);
            self.pulse.busy();
            let stream = match opened {
                Ok(s) => s,
                Err(e) => {
                    if self.stopping() {
                        return;
                    }
                    let d = backoff.next_delay();
                    self.failed(&format!("{e}"), backoff.attempts());
                    if !self.sleep(d) {
                        return;
                    }
                    continue;
                }
            };
            if opened_before {
                self.set_status(|s| s.reconnects += 1);
            }
            opened_before = true;
            self.set_status(|s| s.synced = false);
            lock(&self.state).on_watch_start(self.kind);
            let end = self.stream(stream, &mut backoff);
            if matches!(end, End::Stopping) {
                return;
            }
            // No stream, no bookmark: what is known stays, but this watch is not current.
            self.set_status(|s| s.synced = false);
            let delay = match end {
                End::Stopping => return,
                End::Closed { bookmarked: true } => {
                    log::info!(
                        "controlplane kind={} the server ended the watch; reconnecting (a full resync)",
                        self.kind
                    );
                    continue;
                }
                End::Closed { bookmarked: false } => {
                    let d = backoff.next_delay();
                    self.failed(
                        &format!(
                            "watch from {} ended before its bookmark",
                            self.client.server()
                        ),
                        backoff.attempts(),
                    );
                    d
                }
                End::Failed(e) => {
                    if self.stopping() {
                        return;
                    }
                    let d = backoff.next_delay();
                    self.failed(&e.to_string(), backoff.attempts());
                    d
                }
                End::Restart(why) => {
                    let d = backoff.next_delay();
                    log::warn!(
                        "controlplane kind={} restarting the watch in {d:?} (a full resync): {why}",
                        self.kind
                    );
                    self.set_status(|s| {
                        s.last_error = Some(format!("restarted: {why}"));
                        s.errors_total += 1;
                    });
                    d
                }
            };
            if !self.sleep(delay) {
                return;
            }
        }
    }

    /// Read one stream until it ends, fails, or the state asks for a new one.
    fn stream(&self, mut stream: WatchStream, backoff: &mut Backoff) -> End {
        let mut bookmarked = false;
        loop {
            // A quiet stream is normal (keepalive notices a dead peer).
            self.pulse.idle();
            let next = stream.next_line();
            self.pulse.busy();
            let line = match next {
                None => return End::Closed { bookmarked },
                Some(Err(e)) => return End::Failed(e),
                Some(Ok(line)) => line,
            };
            if self.stopping() {
                return End::Stopping;
            }
            let (outcome, bookmark) = self.apply(&line);
            self.set_status(|s| s.last_ok = Some(Instant::now()));
            if bookmark && !matches!(outcome, Outcome::Restart(_)) {
                bookmarked = true;
                backoff.reset();
                self.set_status(|s| {
                    s.synced = true;
                    s.last_error = None;
                });
                log::info!("controlplane kind={} watch synced", self.kind);
            }
            match outcome {
                Outcome::Unchanged => {}
                Outcome::Restart(why) => {
                    if !self.publish(Outcome::Restart(why.clone())) {
                        return End::Stopping;
                    }
                    return End::Restart(why);
                }
                other => {
                    if !self.publish(other) {
                        return End::Stopping;
                    }
                }
            }
        }
    }

    /// Decode `line` into the state: what it changed, and whether it was a bookmark.
    fn apply(&self, line: &[u8]) -> (Outcome, bool) {
        let decoded = match self.kind {
            Kind::NetworkPolicy => decode_policy_event(line).map(|ev| {
                let b = matches!(ev, Event::Bookmark { .. });
                (lock(&self.state).on_policy_event(ev), b)
            }),
            Kind::AppliedToGroup | Kind::AddressGroup => {
                let gk = if self.kind == Kind::AddressGroup {
                    GroupKind::Address
                } else {
                    GroupKind::AppliedTo
                };
                decode_group_event(gk, line).map(|ev| {
                    let b = matches!(ev, Event::Bookmark { .. });
                    (lock(&self.state).on_group_event(gk, ev), b)
                })
            }
        };
        match decoded {
            Ok(r) => r,
            Err(e) => {
                let (ty, name) = bad_event_identity(line);
                log::error!(
                    "controlplane kind={} object={} type={} undecodable watch event, skipped: {e}",
                    self.kind,
                    name.as_deref().unwrap_or("?"),
                    ty.as_deref().unwrap_or("?"),
                );
                self.set_status(|s| {
                    s.undecodable_total += 1;
                    s.errors_total += 1;
                    s.last_error = Some(format!(
                        "object {}: {e}",
                        name.as_deref().unwrap_or("(name unreadable)")
                    ));
                });
                let o = lock(&self.state).on_undecodable(self.kind, ty.as_deref(), name.as_deref());
                (o, false)
            }
        }
    }

    /// Send an update unless stopping; false when stopping (or nobody listens).
    fn publish(&self, outcome: Outcome) -> bool {
        let u = Update {
            kind: self.kind,
            outcome,
        };
        select! {
            send(self.updates, u) -> r => r.is_ok(),
            recv(self.stop) -> _ => false,
        }
    }
}

fn seed(kind: Kind) -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    u64::from(nanos) ^ ((kind as u64) << 32) ^ u64::from(std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watch_request_names_the_span_key() {
        let cfg = SourceConfig {
            node_key: "vm-ns/vm1".into(),
            backoff: BackoffConfig::default(),
        };
        let (path, query) = cfg.request(Kind::AddressGroup);
        assert_eq!(path, "/apis/controlplane.antrea.io/v1beta2/addressgroups");
        assert_eq!(
            query,
            vec![
                ("watch", "true".to_string()),
                ("fieldSelector", "nodeName=vm-ns/vm1".to_string())
            ]
        );
        let h = http_config(HttpConfig::default());
        assert_eq!(h.watch_stall_timeout, READ_TIMEOUT);
        assert_eq!(h.tcp_keepalive, Some(KEEPALIVE));
        assert_eq!(KEEPALIVE.detects_within(), Duration::from_secs(90));
    }
}
