//! What the running daemon tells `tether status` and a Prometheus scraper, and the unix
//! socket it tells it over (DESIGN §2 `--state-socket`).
//!
//! Protocol: one request per connection. The client writes one line, `status` or
//! `metrics`, and reads until EOF: a [`Snapshot`] as JSON, or Prometheus text format
//! 0.0.4. The socket is created mode 0600 (root only): status names ports and Pods.
//!
//! Owns: the snapshot types, the counters ([`Metrics`], [`WatchTracker`]), the socket
//! server thread and the client, and rendering (`render`). Does not own how a snapshot is
//! gathered from the controllers (`probe`, called by the daemon).

pub mod probe;
pub mod render;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Everything `tether status` shows.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub version: String,
    pub node: String,
    pub bridge: String,
    /// The first full sync is done (READY was sent).
    pub ready: bool,
    pub uptime_seconds: u64,
    pub round: u16,
    pub ovsdb: ConnStatus,
    pub openflow: ConnStatus,
    /// Flows tether installed (all owners).
    pub flows: usize,
    /// Keys queued or waiting for a retry.
    pub queue_depth: usize,
    pub watches: Vec<WatchStatus>,
    pub traffic_controls: Vec<TcRow>,
    pub external_node: EnRow,
    pub metrics: MetricsSnapshot,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnStatus {
    pub connected: bool,
    pub socket: String,
    pub reconnects: u64,
}

/// One resource kind's feed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WatchStatus {
    pub kind: String,
    pub synced: bool,
    /// The resourceVersion of the newest object event seen.
    pub resource_version: Option<String>,
    pub last_event_age_seconds: Option<f64>,
    pub events: u64,
    /// Failed list/watch requests; each one makes the watcher relist (410, list error) or
    /// re-watch from its resourceVersion.
    pub errors: u64,
    /// Full LISTs after the first (410 Gone, an expired resume point, …).
    #[serde(default)]
    pub relists: u64,
    pub last_error: Option<String>,
    /// Seconds since the source last read this kind successfully (a LIST, a watch, a
    /// manifests poll that could list the directory); None before the first.
    #[serde(default)]
    pub last_ok_age_seconds: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcRow {
    pub name: String,
    pub effective_pods: Vec<String>,
    pub target_port: Option<String>,
    pub target_ofport: Option<u32>,
    pub return_port: Option<String>,
    pub return_ofport: Option<u32>,
    pub flows: usize,
    pub last_error: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnRow {
    pub step: String,
    pub nic: Option<String>,
    pub uplink: Option<String>,
    pub uplink_ofport: Option<u32>,
    pub host_ofport: Option<u32>,
    pub addresses: Vec<String>,
    pub bypass_flows: usize,
    pub last_error: Option<String>,
}

/// Counters per sync key kind (`tc`, `en`, `l2`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SyncCounters {
    pub syncs: u64,
    pub errors: u64,
    pub duration_seconds_sum: f64,
    pub duration_seconds_max: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricsSnapshot {
    pub syncs: BTreeMap<String, SyncCounters>,
    /// Flow adds + deletes sent (the difference each apply computed).
    pub flow_mods: u64,
    pub openflow_reconnects: u64,
}

/// Counters the workers and the event loop bump; read by the status thread.
#[derive(Default)]
pub struct Metrics {
    syncs: Mutex<BTreeMap<&'static str, SyncCounters>>,
    pub flow_mods: AtomicU64,
    pub openflow_reconnects: AtomicU64,
}

impl Metrics {
    /// One sync of a `kind` key took `took`; `ok` = it succeeded.
    pub fn record_sync(&self, kind: &'static str, ok: bool, took: Duration) {
        let mut m = self.syncs.lock().unwrap_or_else(|e| e.into_inner());
        let c = m.entry(kind).or_default();
        c.syncs += 1;
        if !ok {
            c.errors += 1;
        }
        let s = took.as_secs_f64();
        c.duration_seconds_sum += s;
        if s > c.duration_seconds_max {
            c.duration_seconds_max = s;
        }
    }

    pub fn snapshot(&self) -> MetricsSnapshot {
        let m = self.syncs.lock().unwrap_or_else(|e| e.into_inner());
        MetricsSnapshot {
            syncs: m
                .iter()
                .map(|(k, v)| ((*k).to_string(), v.clone()))
                .collect(),
            flow_mods: self.flow_mods.load(Ordering::Relaxed),
            openflow_reconnects: self.openflow_reconnects.load(Ordering::Relaxed),
        }
    }
}

#[derive(Clone, Debug, Default)]
struct KindSeen {
    rv: Option<String>,
    at: Option<Instant>,
    events: u64,
}

/// What the event loop saw per kind (the source itself reports sync state and errors).
#[derive(Default)]
pub struct WatchTracker {
    kinds: Mutex<BTreeMap<String, KindSeen>>,
}

impl WatchTracker {
    /// An object event of `kind` carrying `resource_version` arrived at `now`.
    pub fn observe(&self, kind: &str, resource_version: &str, now: Instant) {
        let mut m = self.kinds.lock().unwrap_or_else(|e| e.into_inner());
        let k = m.entry(kind.to_string()).or_default();
        if !resource_version.is_empty() {
            k.rv = Some(resource_version.to_string());
        }
        k.at = Some(now);
        k.events += 1;
    }

    /// (resourceVersion, age of the last event, events) of `kind`.
    pub fn get(&self, kind: &str, now: Instant) -> (Option<String>, Option<f64>, u64) {
        let m = self.kinds.lock().unwrap_or_else(|e| e.into_inner());
        match m.get(kind) {
            Some(k) => (
                k.rv.clone(),
                k.at.map(|t| now.saturating_duration_since(t).as_secs_f64()),
                k.events,
            ),
            None => (None, None, 0),
        }
    }
}

#[derive(Debug)]
pub enum StatusError {
    /// The socket could not be created (path, reason).
    Bind(PathBuf, std::io::Error),
    /// Nobody answers on the socket: the daemon is not running (path, reason).
    Connect(PathBuf, std::io::Error),
    Io(PathBuf, std::io::Error),
    /// The daemon answered something we cannot read.
    Decode(String),
}

impl std::fmt::Display for StatusError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StatusError::Bind(p, e) => {
                write!(f, "state socket {}: cannot listen: {e}", p.display())
            }
            StatusError::Connect(p, e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                write!(
                    f,
                    "state socket {}: {e} (it is root-only, mode 0600: use sudo)",
                    p.display()
                )
            }
            StatusError::Connect(p, e) => write!(
                f,
                "state socket {}: {e} (is `tether run` running with this --state-socket?)",
                p.display()
            ),
            StatusError::Io(p, e) => write!(f, "state socket {}: {e}", p.display()),
            StatusError::Decode(e) => write!(f, "cannot decode the daemon's answer: {e}"),
        }
    }
}

impl std::error::Error for StatusError {}

/// The request line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    Status,
    Metrics,
}

impl Request {
    fn line(self) -> &'static str {
        match self {
            Request::Status => "status\n",
            Request::Metrics => "metrics\n",
        }
    }

    pub fn parse(line: &str) -> Option<Request> {
        match line.trim() {
            "status" => Some(Request::Status),
            "metrics" => Some(Request::Metrics),
            _ => None,
        }
    }
}

/// The state-socket thread. It blocks in `accept` (no polling, so an idle daemon does not
/// wake up); [`Server::stop`] wakes it by connecting once.
pub struct Server {
    path: PathBuf,
    stopping: std::sync::Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// Answers one request; the daemon builds it from [`probe::Probe`].
pub type Handler = Box<dyn Fn(Request) -> String + Send>;

impl Server {
    /// Listen on `path` (its directory is created; a stale socket file is replaced).
    pub fn start(path: &Path, handler: Handler) -> Result<Server, StatusError> {
        let bind_err = |e| StatusError::Bind(path.to_path_buf(), e);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(bind_err)?;
        }
        // A socket left by a previous (killed) run: replace it, unless someone answers.
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                return Err(bind_err(std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    "another tether is listening there",
                )));
            }
            std::fs::remove_file(path).map_err(bind_err)?;
        }
        let listener = UnixListener::bind(path).map_err(bind_err)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(bind_err)?;
        let stopping = std::sync::Arc::new(AtomicBool::new(false));
        let st = stopping.clone();
        let thread = std::thread::Builder::new()
            .name("state-socket".into())
            .spawn(move || serve(&listener, &handler, &st))
            .map_err(bind_err)?;
        Ok(Server {
            path: path.to_path_buf(),
            stopping,
            thread: Some(thread),
        })
    }

    pub fn stop(mut self) {
        self.stop_inner();
    }

    fn stop_inner(&mut self) {
        let Some(t) = self.thread.take() else { return };
        self.stopping.store(true, Ordering::SeqCst);
        let _ = UnixStream::connect(&self.path);
        let _ = t.join();
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

fn serve(listener: &UnixListener, handler: &Handler, stopping: &AtomicBool) {
    for conn in listener.incoming() {
        if stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(mut conn) = conn else { continue };
        // A client that connects and says nothing must not block the next one for long.
        let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
        let _ = conn.set_write_timeout(Some(Duration::from_secs(2)));
        let mut line = String::new();
        let mut r = BufReader::new(&conn).take(256);
        if r.read_line(&mut line).is_err() {
            continue;
        }
        let answer = match Request::parse(&line) {
            Some(req) => handler(req),
            None => format!("error: unknown request {:?}\n", line.trim()),
        };
        let _ = conn.write_all(answer.as_bytes());
    }
}

/// Ask the daemon listening on `path`; the raw answer.
pub fn ask(path: &Path, req: Request) -> Result<String, StatusError> {
    let mut s = UnixStream::connect(path).map_err(|e| StatusError::Connect(path.into(), e))?;
    let io = |e| StatusError::Io(path.into(), e);
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(io)?;
    s.write_all(req.line().as_bytes()).map_err(io)?;
    let mut out = String::new();
    s.read_to_string(&mut out).map_err(io)?;
    Ok(out)
}

/// Ask for the status snapshot.
pub fn fetch(path: &Path) -> Result<Snapshot, StatusError> {
    let text = ask(path, Request::Status)?;
    serde_json::from_str(&text).map_err(|e| StatusError::Decode(format!("{e}: {text}")))
}

#[cfg(test)]
mod tests;
