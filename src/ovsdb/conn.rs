//! The OVSDB connection: the only code that reads or writes the OVSDB socket (`bridgedb`
//! and `lock` send their requests through [`Client`]; `crate::unixctl` talks to
//! ovs-vswitchd's own control socket).
//!
//! One owner thread per connection holds the socket's write side, the table of pending
//! requests and the replica; a reader thread per session only turns bytes into messages
//! (through the [`Framer`]) and hands them over a bounded channel. Callers talk to the owner
//! with a request and a reply channel, so no lock is held across I/O.
//!
//! ```text
//!   Disconnected --connect ok--> Monitoring --monitor reply--> Connected
//!        ^  (backoff 0.1 s → 2 s)    |                            |
//!        +------- EOF / error / garbage / oversize ---------------+
//! ```
//! On every (re)connect the replica is rebuilt from the monitor reply, so it matches the
//! server after an ovsdb-server restart. Requests made while disconnected fail fast with
//! `Disconnected`; the callers' work queues retry them, and retry at once on the
//! [`DbEvent::Connected`] that follows.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, after, bounded, select};
use serde_json::{Value, json};

use super::framer::{DEFAULT_MAX_MESSAGE, Framer};
use super::ops::{Op, OpResult, parse_results, transact_params};
use super::replica::{Replica, monitor_params};
use super::rpc::{Incoming, echo_reply, request};
use super::{DB, OvsdbError};

/// Where ovsdb-server listens: `unix:PATH` or `tcp:IP:PORT`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Remote {
    Unix(PathBuf),
    Tcp(String),
}

impl Remote {
    pub fn parse(s: &str) -> Result<Remote, OvsdbError> {
        if let Some(p) = s.strip_prefix("unix:") {
            Ok(Remote::Unix(PathBuf::from(p)))
        } else if let Some(a) = s.strip_prefix("tcp:") {
            Ok(Remote::Tcp(a.to_string()))
        } else {
            Err(OvsdbError::Io {
                remote: s.to_string(),
                error: "remote must be unix:PATH or tcp:IP:PORT".into(),
            })
        }
    }
}

impl std::fmt::Display for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Remote::Unix(p) => write!(f, "unix:{}", p.display()),
            Remote::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// A request without a reply after this long fails with `Timeout`.
    pub request_timeout: Duration,
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// Framer cap on one message.
    pub max_message: usize,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            request_timeout: Duration::from_secs(10),
            // A restarted local server is back within a second or so; a failed connect() on
            // a unix socket costs microseconds, so the first retries come quickly.
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(2),
            max_message: DEFAULT_MAX_MESSAGE,
        }
    }
}

/// What the connection tells its subscribers. Coalescing consumers re-read the replica, so
/// a full channel drops events rather than blocking the owner thread.
#[derive(Clone, Debug, PartialEq)]
pub enum DbEvent {
    /// Monitoring again: the replica was rebuilt from the server.
    Connected,
    Disconnected(String),
    /// The replica changed.
    Updated,
}

struct Shared {
    replica: RwLock<Replica>,
    /// (connected, generation): bumped on every replica change or connection change.
    state: Mutex<(bool, u64)>,
    changed: Condvar,
    shutdown: AtomicBool,
    /// Transactions sent (one round trip each), for tests and benchmarks that count.
    transactions: AtomicU64,
}

impl Shared {
    fn bump(&self, connected: Option<bool>) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = connected {
            s.0 = c;
        }
        s.1 += 1;
        self.changed.notify_all();
    }
}

enum Cmd {
    Request {
        method: String,
        params: Value,
        reply: Sender<Result<Value, OvsdbError>>,
    },
}

/// A handle to one OVSDB connection; cheap to share behind an `Arc`. Dropping it stops the
/// owner thread.
pub struct Client {
    remote: Remote,
    shared: Arc<Shared>,
    cmds: Sender<Cmd>,
    events: Receiver<DbEvent>,
    timeout: Duration,
    thread: Option<JoinHandle<()>>,
}

impl Client {
    /// Start the owner thread; it connects (and reconnects) in the background.
    pub fn start(remote: Remote, opts: ClientOptions) -> Client {
        let shared = Arc::new(Shared {
            replica: RwLock::new(Replica::default()),
            state: Mutex::new((false, 0)),
            changed: Condvar::new(),
            shutdown: AtomicBool::new(false),
            transactions: AtomicU64::new(0),
        });
        let (cmd_tx, cmd_rx) = bounded(256);
        let (ev_tx, ev_rx) = bounded(1024);
        let owner = SocketThread {
            remote: remote.clone(),
            opts: opts.clone(),
            shared: shared.clone(),
            cmds: cmd_rx,
            events: ev_tx,
            next_id: 1,
        };
        let thread = std::thread::Builder::new()
            .name("ovsdb-conn".into())
            .spawn(move || owner.run())
            .ok();
        Client {
            remote,
            shared,
            cmds: cmd_tx,
            events: ev_rx,
            timeout: opts.request_timeout,
            thread,
        }
    }

    /// Start and wait until the first monitor reply is in, or fail after `timeout`.
    pub fn connect(
        remote: Remote,
        opts: ClientOptions,
        timeout: Duration,
    ) -> Result<Client, OvsdbError> {
        let c = Client::start(remote, opts);
        c.wait_connected(timeout)?;
        Ok(c)
    }

    pub fn remote(&self) -> &Remote {
        &self.remote
    }

    /// Bumped on every replica or connection change: callers cache what they derive from
    /// the replica and rebuild it only when this moves.
    /// Transactions sent since the client started.
    pub fn transactions(&self) -> u64 {
        self.shared.transactions.load(Ordering::Relaxed)
    }

    pub fn generation(&self) -> u64 {
        self.shared.state.lock().map(|s| s.1).unwrap_or(0)
    }

    pub fn is_connected(&self) -> bool {
        self.shared.state.lock().map(|s| s.0).unwrap_or(false)
    }

    /// Wait until the connection is up and its replica loaded.
    pub fn wait_connected(&self, timeout: Duration) -> Result<(), OvsdbError> {
        if self.wait_until(timeout, |_| true) {
            Ok(())
        } else {
            Err(OvsdbError::Timeout {
                method: format!("connect to {}", self.remote),
                ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            })
        }
    }

    /// Wait until connected and `pred(replica)` holds; false after `timeout`.
    pub fn wait_until(&self, timeout: Duration, mut pred: impl FnMut(&Replica) -> bool) -> bool {
        let end = Instant::now() + timeout;
        let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if st.0 && self.with_replica(&mut pred) {
                return true;
            }
            let now = Instant::now();
            if now >= end {
                return false;
            }
            st = self
                .shared
                .changed
                .wait_timeout(st, end - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Read the replica under its lock.
    pub fn with_replica<T>(&self, f: impl FnOnce(&Replica) -> T) -> T {
        let r = self
            .shared
            .replica
            .read()
            .unwrap_or_else(|e| e.into_inner());
        f(&r)
    }

    /// Connection and replica events (see [`DbEvent`]).
    pub fn events(&self) -> Receiver<DbEvent> {
        self.events.clone()
    }

    /// Any JSON-RPC method; the `result` on success.
    pub fn request(&self, method: &str, params: Value) -> Result<Value, OvsdbError> {
        let (tx, rx) = bounded(1);
        self.cmds
            .send(Cmd::Request {
                method: method.to_string(),
                params,
                reply: tx,
            })
            .map_err(|_| OvsdbError::Shutdown)?;
        // The owner enforces the request timeout; this is the backstop if it is wedged.
        rx.recv_timeout(self.timeout + Duration::from_secs(2))
            .map_err(|_| OvsdbError::Timeout {
                method: method.to_string(),
                ms: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
            })?
    }

    /// One atomic transaction; per-op results, or the failing op's error.
    pub fn transact(&self, ops: &[Op]) -> Result<Vec<OpResult>, OvsdbError> {
        self.shared.transactions.fetch_add(1, Ordering::Relaxed);
        let result = self.request("transact", transact_params(DB, ops))?;
        parse_results(&result, ops.len())
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        // Wake the owner: a closed command channel ends its select.
        let (tx, _) = bounded(0);
        self.cmds = tx;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    fn open(remote: &Remote) -> std::io::Result<Stream> {
        Ok(match remote {
            Remote::Unix(p) => Stream::Unix(UnixStream::connect(p)?),
            Remote::Tcp(a) => Stream::Tcp(TcpStream::connect(a)?),
        })
    }

    fn try_clone(&self) -> std::io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
    }

    fn set_write_timeout(&self, write: Duration) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_write_timeout(Some(write)),
            Stream::Tcp(s) => s.set_write_timeout(Some(write)),
        }
    }

    fn shutdown(&self) {
        let _ = match self {
            Stream::Unix(s) => s.shutdown(std::net::Shutdown::Both),
            Stream::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Reader thread: bytes → messages. Ends on EOF, error, or when told to stop. Its reads
/// block without a timeout (an idle daemon should not wake up to poll): the owner ends a
/// session by shutting the socket down, which makes a blocked read return.
fn read_loop(
    mut s: Stream,
    max: usize,
    out: Sender<Result<Value, OvsdbError>>,
    stop: Arc<AtomicBool>,
) {
    let mut framer = Framer::new(max);
    let mut buf = vec![0u8; 64 * 1024];
    while !stop.load(Ordering::SeqCst) {
        match s.read(&mut buf) {
            Ok(0) => {
                let _ = out.send(Err(OvsdbError::Protocol(
                    "connection closed by server".into(),
                )));
                return;
            }
            Ok(n) => {
                framer.push(&buf[..n]);
                loop {
                    match framer.next_message() {
                        Ok(Some(v)) => {
                            if out.send(Ok(v)).is_err() {
                                return;
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            let _ = out.send(Err(e));
                            return;
                        }
                    }
                }
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut
                    || e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                let _ = out.send(Err(OvsdbError::Protocol(format!("read failed: {e}"))));
                return;
            }
        }
    }
}

enum PendingKind {
    User(Sender<Result<Value, OvsdbError>>),
    /// Our monitor request; `cond` says whether it was `monitor_cond`.
    Monitor {
        cond: bool,
    },
}

struct Pending {
    method: String,
    deadline: Instant,
    kind: PendingKind,
}

struct SocketThread {
    remote: Remote,
    opts: ClientOptions,
    shared: Arc<Shared>,
    cmds: Receiver<Cmd>,
    events: Sender<DbEvent>,
    next_id: u64,
}

impl SocketThread {
    fn run(mut self) {
        let mut backoff = self.opts.backoff_min;
        let mut logged_down = false;
        while !self.shared.shutdown.load(Ordering::SeqCst) {
            let reason = match Stream::open(&self.remote) {
                Ok(stream) => {
                    let (reason, monitored) = self.session(stream);
                    if monitored {
                        backoff = self.opts.backoff_min;
                        logged_down = false;
                    }
                    reason
                }
                Err(e) => format!("connect failed: {e}"),
            };
            if self.shared.shutdown.load(Ordering::SeqCst) {
                break;
            }
            self.shared.bump(Some(false));
            let _ = self.events.try_send(DbEvent::Disconnected(reason.clone()));
            if logged_down {
                log::debug!(
                    "ovsdb remote={} down: {reason}; retry in {backoff:?}",
                    self.remote
                );
            } else {
                log::warn!(
                    "ovsdb remote={} down: {reason}; retrying every {:?}-{:?}",
                    self.remote,
                    self.opts.backoff_min,
                    self.opts.backoff_max
                );
                logged_down = true;
            }
            if !self.idle(backoff) {
                break;
            }
            backoff = (backoff * 2).min(self.opts.backoff_max);
        }
        self.shared.bump(Some(false));
    }

    /// Wait out a backoff, failing requests fast. False when shutting down.
    fn idle(&mut self, d: Duration) -> bool {
        let end = after(d);
        loop {
            select! {
                recv(self.cmds) -> cmd => match cmd {
                    Ok(Cmd::Request { reply, .. }) => {
                        let _ = reply.send(Err(OvsdbError::Disconnected));
                    }
                    Err(_) => return false,
                },
                recv(end) -> _ => return true,
            }
        }
    }

    fn alloc_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// One connected session. Returns why it ended and whether monitoring was established.
    fn session(&mut self, stream: Stream) -> (String, bool) {
        let io_timeout = Duration::from_secs(5);
        let setup = stream
            .set_write_timeout(io_timeout)
            .and_then(|_| stream.try_clone());
        let reader_stream = match setup {
            Ok(s) => s,
            Err(e) => return (format!("socket setup failed: {e}"), false),
        };
        let mut writer = stream;
        let stop = Arc::new(AtomicBool::new(false));
        let (frames_tx, frames) = bounded(256);
        let max = self.opts.max_message;
        let reader_stop = stop.clone();
        let reader = std::thread::Builder::new()
            .name("ovsdb-reader".into())
            .spawn(move || read_loop(reader_stream, max, frames_tx, reader_stop));
        let reader = match reader {
            Ok(r) => r,
            Err(e) => return (format!("cannot spawn reader: {e}"), false),
        };
        let mut pending: HashMap<u64, Pending> = HashMap::new();
        let mut monitored = false;
        let reason = self.drive(&mut writer, &frames, &mut pending, &mut monitored);
        stop.store(true, Ordering::SeqCst);
        writer.shutdown();
        // A reader blocked on a full channel must see it closed, or the join would hang.
        drop(frames);
        let _ = reader.join();
        for (_, p) in pending.drain() {
            if let PendingKind::User(reply) = p.kind {
                let _ = reply.send(Err(OvsdbError::Disconnected));
            }
        }
        (reason, monitored)
    }

    fn send(&self, w: &mut Stream, msg: &Value) -> Result<(), String> {
        let bytes = serde_json::to_vec(msg).map_err(|e| format!("encode failed: {e}"))?;
        w.write_all(&bytes)
            .map_err(|e| format!("write failed: {e}"))
    }

    fn send_monitor(
        &mut self,
        w: &mut Stream,
        pending: &mut HashMap<u64, Pending>,
        cond: bool,
    ) -> Result<(), String> {
        let id = self.alloc_id();
        let method = if cond { "monitor_cond" } else { "monitor" };
        self.send(
            w,
            &request(id, method, monitor_params(DB, &json!("tether"), cond)),
        )?;
        pending.insert(
            id,
            Pending {
                method: method.into(),
                deadline: Instant::now() + self.opts.request_timeout,
                kind: PendingKind::Monitor { cond },
            },
        );
        Ok(())
    }

    fn drive(
        &mut self,
        w: &mut Stream,
        frames: &Receiver<Result<Value, OvsdbError>>,
        pending: &mut HashMap<u64, Pending>,
        monitored: &mut bool,
    ) -> String {
        if let Err(e) = self.send_monitor(w, pending, true) {
            return e;
        }
        loop {
            let next_deadline = pending.values().map(|p| p.deadline).min();
            let timer = match next_deadline {
                Some(d) => after(d.saturating_duration_since(Instant::now())),
                None => after(Duration::from_secs(3600)),
            };
            select! {
                recv(self.cmds) -> cmd => match cmd {
                    Ok(Cmd::Request { method, params, reply }) => {
                        let id = self.alloc_id();
                        if let Err(e) = self.send(w, &request(id, &method, params)) {
                            let _ = reply.send(Err(OvsdbError::Disconnected));
                            return e;
                        }
                        pending.insert(id, Pending {
                            method,
                            deadline: Instant::now() + self.opts.request_timeout,
                            kind: PendingKind::User(reply),
                        });
                    }
                    Err(_) => return "client shut down".into(),
                },
                recv(frames) -> msg => {
                    let msg = match msg {
                        Ok(Ok(v)) => v,
                        Ok(Err(e)) => return e.to_string(),
                        Err(_) => return "reader stopped".into(),
                    };
                    if let Err(e) = self.handle(w, msg, pending, monitored) {
                        return e;
                    }
                },
                recv(timer) -> _ => {
                    let now = Instant::now();
                    let expired: Vec<u64> =
                        pending.iter().filter(|(_, p)| p.deadline <= now).map(|(id, _)| *id).collect();
                    for id in expired {
                        if let Some(p) = pending.remove(&id) {
                            let ms = u64::try_from(self.opts.request_timeout.as_millis()).unwrap_or(u64::MAX);
                            match p.kind {
                                PendingKind::User(reply) => {
                                    let _ = reply.send(Err(OvsdbError::Timeout { method: p.method, ms }));
                                }
                                PendingKind::Monitor { .. } => {
                                    return format!("{} got no reply within {ms} ms", p.method);
                                }
                            }
                        }
                    }
                },
            }
        }
    }

    fn handle(
        &mut self,
        w: &mut Stream,
        msg: Value,
        pending: &mut HashMap<u64, Pending>,
        monitored: &mut bool,
    ) -> Result<(), String> {
        // Long on purpose: One arm per JSON-RPC message the server sends (replies, errors,
        // updates, echo), each touching the pending requests or the replica.
        match Incoming::classify(msg).map_err(|e| e.to_string())? {
            Incoming::Request { id, method, params } => {
                if method == "echo" {
                    self.send(w, &echo_reply(id, params))?;
                } else {
                    log::debug!("ovsdb: ignoring server request {method}");
                }
            }
            Incoming::Notification { method, params } => {
                let updates = params.get(1).cloned().unwrap_or(Value::Null);
                let applied = {
                    let mut r = self
                        .shared
                        .replica
                        .write()
                        .unwrap_or_else(|e| e.into_inner());
                    match method.as_str() {
                        "update2" => Some(r.apply_update2(&updates)),
                        "update" => Some(r.apply_update(&updates)),
                        _ => None,
                    }
                };
                match applied {
                    Some(Ok(())) => {
                        self.shared.bump(None);
                        let _ = self.events.try_send(DbEvent::Updated);
                    }
                    Some(Err(e)) => return Err(format!("bad {method} notification: {e}")),
                    None => log::debug!("ovsdb: ignoring notification {method}"),
                }
            }
            Incoming::Response { id, result, error } => {
                let Some(p) = pending.remove(&id) else {
                    // A reply to a request that already timed out.
                    return Ok(());
                };
                match p.kind {
                    PendingKind::User(reply) => {
                        let r = if error.is_null() {
                            Ok(result)
                        } else {
                            Err(OvsdbError::Rpc {
                                method: p.method,
                                error: error_text(&error),
                            })
                        };
                        let _ = reply.send(r);
                    }
                    PendingKind::Monitor { cond } => {
                        if !error.is_null() {
                            if cond {
                                // Servers before OVS 2.6 lack monitor_cond.
                                log::info!(
                                    "ovsdb: monitor_cond refused ({}); using monitor",
                                    error_text(&error)
                                );
                                return self.send_monitor(w, pending, false);
                            }
                            return Err(format!("monitor failed: {}", error_text(&error)));
                        }
                        let mut fresh = Replica::default();
                        let r = if cond {
                            fresh.apply_update2(&result)
                        } else {
                            fresh.apply_update(&result)
                        };
                        r.map_err(|e| format!("bad monitor reply: {e}"))?;
                        *self
                            .shared
                            .replica
                            .write()
                            .unwrap_or_else(|e| e.into_inner()) = fresh;
                        *monitored = true;
                        self.shared.bump(Some(true));
                        log::info!("ovsdb remote={} connected", self.remote);
                        let _ = self.events.try_send(DbEvent::Connected);
                    }
                }
            }
        }
        Ok(())
    }
}

fn error_text(e: &Value) -> String {
    match e {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remotes_parse() {
        assert_eq!(
            Remote::parse("unix:/run/openvswitch/db.sock").unwrap(),
            Remote::Unix(PathBuf::from("/run/openvswitch/db.sock"))
        );
        assert_eq!(
            Remote::parse("tcp:127.0.0.1:6640").unwrap(),
            Remote::Tcp("127.0.0.1:6640".into())
        );
        assert!(Remote::parse("/run/openvswitch/db.sock").is_err());
        assert_eq!(
            Remote::Unix(PathBuf::from("/x/db.sock")).to_string(),
            "unix:/x/db.sock"
        );
    }
}
