//! What the running daemon tells `tether status` and a Prometheus scraper, and the unix
//! socket it tells it over (`--state-socket`; docs/design.md#the-state-socket).
//!
//! Protocol: one request per connection. The client writes one line, `status` or
//! `metrics`, and reads until EOF: a [`Snapshot`] as JSON, or Prometheus text format
//! 0.0.4. The socket is created mode 0600 (root only): status names ports and Pods.
//!
//! Owns: the snapshot types, what the event loop saw per kind ([`WatchTracker`]), the
//! socket server thread and the client, and rendering (`render`); the counters are
//! `crate::metrics`' (re-exported here). Does not own how a snapshot is
//! gathered from the controllers (`probe`, called by the daemon).

pub mod policy;
pub mod probe;
pub mod render;

pub use crate::metrics::{Metrics, MetricsSnapshot, SyncCounters};

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// Why the switch's flows may differ from those right now, while that is so (the
    /// flow monitor not running, a read-back of changed flows failing).
    #[serde(default)]
    pub flows_problem: Option<String>,
    /// Keys queued or waiting for a retry.
    pub queue_depth: usize,
    pub watches: Vec<WatchStatus>,
    pub traffic_controls: Vec<TcRow>,
    pub external_node: EnRow,
    pub metrics: MetricsSnapshot,
    /// Only with NetworkPolicy on (`antreaKubeconfig`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_policy: Option<policy::NpStatus>,
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
    /// How the source learns of this kind's changes, where that is worth saying (the
    /// manifests directory: "inotify", or "polling every …" with why inotify failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch_mode: Option<String>,
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
    /// Attached: "verified", or what of the host port's identity does not match.
    #[serde(default)]
    pub identity: Option<String>,
    pub last_error: Option<String>,
    /// What others did to the NIC's ports that tether repaired: how often, and the last.
    #[serde(default)]
    pub repairs: u64,
    #[serde(default)]
    pub last_repair: Option<String>,
    /// Attached but cut off as the ports are now: why (checked when status is asked).
    #[serde(default)]
    pub cut_off: Option<String>,
    /// Attached, and the uplink's kernel stack still takes traffic for the VM past OVS:
    /// why, naming the sysctls (as of the last sync).
    #[serde(default)]
    pub side_door: Option<String>,
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

/// How long one client may take to send its request line (a deadline for the whole line,
/// not per read, so a client trickling bytes is cut off too), and to take the answer.
pub const CLIENT_DEADLINE: Duration = Duration::from_secs(2);
/// Connections served at once; more are answered `error: busy` and closed at once.
pub const MAX_CLIENTS: usize = 32;

/// The state-socket thread. It blocks in `accept` (no polling, so an idle daemon does not
/// wake up) and serves each connection on a thread of its own, at most [`MAX_CLIENTS`] at
/// once, each within [`CLIENT_DEADLINE`]: an idle or slow client never delays another.
/// [`Server::stop`] wakes it by connecting once.
pub struct Server {
    path: PathBuf,
    stopping: std::sync::Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// How often the state thread looks whether its socket is still there (someone wiped the
/// runtime directory, or removed the socket) when it cannot watch the socket's directory
/// (inotify): one `stat` each time.
pub const SOCKET_CHECK: Duration = Duration::from_secs(2);

/// With the directory watched, a look this often all the same (a watch can miss what
/// happens to a directory above it): one wake-up a minute while idle.
pub const WATCHED_SOCKET_CHECK: Duration = Duration::from_secs(60);

/// After the directory reports a removal, how long to let it settle before looking.
const REMOVAL_SETTLE: Duration = Duration::from_millis(300);

/// Answers one request; the daemon builds it from [`probe::Probe`].
pub type Handler = std::sync::Arc<dyn Fn(Request) -> String + Send + Sync>;

/// Why the state socket may not be created at `path`, if it may not: its directory must
/// be owned by root (or by us) and writable by nobody else, or someone else could swap
/// the socket for something of theirs; and what is at `path` must be nothing or a socket.
/// `tether check` asks the same question.
pub fn socket_path_problem(path: &Path) -> Option<String> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // The nearest existing ancestor is what a new directory would be created in.
    let mut d = dir;
    while std::fs::symlink_metadata(d).is_err() {
        match d.parent() {
            Some(p) if !p.as_os_str().is_empty() => d = p,
            _ => break,
        }
    }
    if let Ok(m) = std::fs::metadata(d) {
        use std::os::unix::fs::MetadataExt;
        let me = crate::sys::euid();
        if m.uid() != 0 && m.uid() != me {
            return Some(format!(
                "{} is owned by uid {}, not by root: refusing to create the state socket in it",
                d.display(),
                m.uid()
            ));
        }
        if m.mode() & 0o022 != 0 {
            return Some(format!(
                "{} is writable by group or others (mode {:o}): refusing to create the state socket in it",
                d.display(),
                m.mode() & 0o7777
            ));
        }
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if !std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()) => Some(format!(
            "{} exists and is {}, not a socket: not touching it",
            path.display(),
            crate::files::kind_of(&m)
        )),
        _ => None,
    }
}

impl Server {
    /// Listen on `path`: its directory is created (mode 0700) when missing and must pass
    /// [`socket_path_problem`]; a stale socket of a killed run is replaced, anything else
    /// at `path` is refused. The socket is created mode 0600 (the mask is set around
    /// `bind`, so no `chmod` follows a link).
    pub fn start(path: &Path, handler: Handler) -> Result<Server, StatusError> {
        let listener = listen(path)?;
        let stopping = std::sync::Arc::new(AtomicBool::new(false));
        let st = stopping.clone();
        let at = path.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("state-socket".into())
            .spawn(move || serve(listener, &at, &handler, &st))
            .map_err(|e| StatusError::Bind(path.to_path_buf(), e))?;
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
        // Wakes the accept at once; with the socket gone, the next check does.
        let _ = UnixStream::connect(&self.path);
        let _ = t.join();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The socket's identity on disk, to tell it from a replacement or its absence.
fn inode(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// Bind the state socket at `path` (see [`Server::start`]).
fn listen(path: &Path) -> Result<UnixListener, StatusError> {
    {
        let bind_err = |e| StatusError::Bind(path.to_path_buf(), e);
        let refuse =
            |m: String| bind_err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, m));
        if let Some(p) = socket_path_problem(path) {
            return Err(refuse(p));
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(bind_err)?;
        }
        // A socket left by a previous (killed) run: replace it, unless someone answers.
        if std::fs::symlink_metadata(path).is_ok() {
            if UnixStream::connect(path).is_ok() {
                return Err(bind_err(std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    "another tether is listening there",
                )));
            }
            // Checked above to be a socket: unlink removes that node, never a link target.
            std::fs::remove_file(path).map_err(bind_err)?;
        }
        crate::sys::with_umask(0o177, || UnixListener::bind(path)).map_err(bind_err)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

/// The socket's directory, watched for the socket's removal and its own: a wiped runtime
/// directory wakes the state thread at once. None where inotify cannot watch it.
fn watch_dir(path: &Path) -> Option<std::fs::File> {
    use crate::sys::inotify::{DELETE, DELETE_SELF, MOVE_SELF, MOVED_FROM};
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    crate::sys::inotify_dir(dir, DELETE | DELETE_SELF | MOVED_FROM | MOVE_SELF).ok()
}

/// Read every pending event of a non-blocking inotify descriptor (what they say does not
/// matter: the socket is looked at after any of them).
fn drain(watch: &mut std::fs::File) {
    let mut buf = [0u8; 4096];
    while matches!(watch.read(&mut buf), Ok(n) if n > 0) {}
}

/// Answer clients until `stopping`. When the socket's directory reports a removal (or
/// every [`WATCHED_SOCKET_CHECK`]; every [`SOCKET_CHECK`] where it cannot be watched),
/// make sure the socket at `path` is still this listener's, and listen there again if it
/// is not (the runtime directory wiped: `tether status` and `reset`'s check must keep
/// finding us).
fn serve(mut listener: UnixListener, path: &Path, handler: &Handler, stopping: &AtomicBool) {
    use std::os::fd::AsFd as _;
    let active = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut bound = inode(path);
    let mut watch = watch_dir(path);
    // A removal was seen: look once it has settled (`rm -r` empties the directory, then
    // removes it; a socket made again in between would make that fail).
    let mut look_at: Option<Instant> = None;
    let mut last_error = String::new();
    loop {
        let every = if watch.is_some() {
            WATCHED_SOCKET_CHECK
        } else {
            SOCKET_CHECK
        };
        let wait = look_at.map_or(every, |t| t.saturating_duration_since(Instant::now()));
        let (ready, changed) = {
            let mut fds = vec![listener.as_fd()];
            fds.extend(watch.as_ref().map(|w| w.as_fd()));
            let r = crate::sys::wait_readable(&fds, Some(wait)).unwrap_or_default();
            (
                r.first().copied().unwrap_or(false),
                r.get(1).copied().unwrap_or(false),
            )
        };
        if stopping.load(Ordering::SeqCst) {
            return;
        }
        if changed {
            if let Some(w) = watch.as_mut() {
                drain(w);
            }
            look_at.get_or_insert(Instant::now() + REMOVAL_SETTLE);
            continue;
        }
        if !ready {
            if look_at.is_some_and(|t| Instant::now() < t) {
                continue;
            }
            look_at = None;
            if inode(path) != bound {
                match listen(path) {
                    Ok(l) => {
                        log::warn!(
                            "state socket {} was removed (runtime directory wiped?): listening there again",
                            path.display()
                        );
                        listener = l;
                        bound = inode(path);
                        // The directory may be a new one: watch that.
                        watch = watch_dir(path);
                        last_error.clear();
                    }
                    Err(e) => {
                        // Until it can listen again, look every SOCKET_CHECK.
                        watch = None;
                        let e = e.to_string();
                        if e != last_error {
                            log::warn!("state socket {} is gone: {e}", path.display());
                            last_error = e;
                        }
                    }
                }
            }
            continue;
        }
        let Ok((mut conn, _)) = listener.accept() else {
            continue;
        };
        let _ = conn.set_write_timeout(Some(CLIENT_DEADLINE));
        if active.fetch_add(1, Ordering::SeqCst) >= MAX_CLIENTS {
            active.fetch_sub(1, Ordering::SeqCst);
            let _ = conn.write_all(b"error: busy\n");
            // Closing with the request unread would reset the connection before the client
            // reads the answer: take what it sent already, briefly.
            let _ = conn.set_read_timeout(Some(Duration::from_millis(20)));
            let _ = conn.read(&mut [0u8; 256]);
            continue;
        }
        let (h, a) = (handler.clone(), active.clone());
        let spawned = std::thread::Builder::new()
            .name("state-client".into())
            .spawn(move || {
                answer(&mut conn, &h);
                a.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            active.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Read one request line within [`CLIENT_DEADLINE`] and answer it.
fn answer(conn: &mut UnixStream, handler: &Handler) {
    let deadline = Instant::now() + CLIENT_DEADLINE;
    let mut line = Vec::new();
    let mut buf = [0u8; 256];
    while !line.contains(&b'\n') && line.len() < 256 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || conn.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => line.extend_from_slice(&buf[..n]),
            Err(_) => return,
        }
    }
    let first = line.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(first);
    let answer = match Request::parse(&line) {
        Some(req) => handler(req),
        None => format!("error: unknown request {:?}\n", line.trim()),
    };
    let _ = conn.write_all(answer.as_bytes());
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
