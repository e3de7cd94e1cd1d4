//! A faithful in-process Kubernetes API server for tests and the `kube` benchmark: HTTP/1.1
//! over a std `TcpListener` on 127.0.0.1:0, optionally TLS (rustls, certificates made by
//! rcgen at test time, optional client certificates), bearer tokens (401), a global
//! resourceVersion counter, LIST with limit/continue over consistent snapshots, WATCH from
//! a resourceVersion with a bounded history (older → 410 as an `ERROR` event, or as HTTP
//! 410), bookmarks, the field selectors `spec.nodeName=` and `metadata.name=`, 404 for the
//! CRDs when they are not installed, and one-shot fault injection ([`Fault`]).
//!
//! Objects are plain JSON; tests mutate them through [`ApiServer::create`]/`update`/
//! `delete`, which record watch events like the real server does.
//!
//! Where tether could notice, it behaves like kube-apiserver (cited per item in
//! `serve.rs`, `http.rs`, `selectors.rs` and `list_watch.rs`): keep-alive connections (Go's net/http serves many requests per
//! connection); watch streams that end when the client goes away; bookmarks about once a
//! minute plus one 2 s before the watch's deadline (the watch cache's cadence; tests that
//! want them faster set [`Options::bookmark_every`]); the real BOOKMARK object shape;
//! `labelSelector`; the antrea-controller's controlplane watches (`controlplane.rs`);
//! `/version` and legacy discovery (`/api`, `/apis`, the group versions);
//! 422 for an invalid `resourceVersionMatch`. Watch bodies use real chunked transfer
//! encoding, one event per chunk by default, or several per chunk and split across chunks
//! ([`Chunking`]) so the client's parser is tested. It is itself checked against a real
//! client: `kubectl` (`tests/kubectl.rs`).

// Each test crate uses a different part of the server.
#![allow(dead_code)]
// Test support: a failed setup step is a failed test, with its location.
#![allow(clippy::unwrap_used)]

pub mod certs;
pub mod client;
pub mod controlplane;
pub mod cp_fixtures;
pub mod fixtures;
mod http;
mod list_watch;
mod selectors;
mod serve;

pub use certs::Certs;
// Each test crate uses a different subset of the builders.
#[allow(unused_imports)]
pub use fixtures::{external_node, namespace, pod, traffic_control, wait_until};

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value, json};

/// When a fault applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum On {
    List,
    Watch,
    Any,
}

/// What a fault does to the request it hits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultAction {
    /// Wait before answering.
    Delay(Duration),
    /// Answer with this HTTP status (500, 503…) and a Status body.
    Status(u16),
    /// Close the connection without answering.
    Drop,
    /// Watch: answer HTTP 410 Gone.
    HttpGone,
    /// Watch: send an `ERROR` event with code 410 first, then end the stream.
    ErrorGone,
    /// Watch: after `after` events, announce a chunk and cut the connection inside it.
    CutMidChunk { after: usize },
    /// Watch: after `after` events, send a line that is not JSON.
    Garbage { after: usize },
    /// Watch: after `after` events, send a bare `Status` object line and end.
    StatusLine { after: usize, code: u16 },
    /// Watch: end the stream cleanly after `after` events.
    EndStream { after: usize },
    /// List: a request with a continue token gets 410 (expired continue).
    ExpireContinue,
    /// List: a request with a continue token gets this status (a failed page).
    FailContinue(u16),
    /// 429 Too Many Requests with `Retry-After: <seconds>` (API Priority and Fairness).
    TooMany { retry_after: u64 },
    /// 302 Found to `location` (a proxy or a hostile server sending the client elsewhere;
    /// kube-apiserver never redirects).
    Redirect { location: String },
}

/// A one-shot fault for the next request that matches `on` and `resource` (plural).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub on: On,
    pub resource: Option<&'static str>,
    pub action: FaultAction,
}

impl Fault {
    pub fn watch(action: FaultAction) -> Fault {
        Fault {
            on: On::Watch,
            resource: None,
            action,
        }
    }
    pub fn list(action: FaultAction) -> Fault {
        Fault {
            on: On::List,
            resource: None,
            action,
        }
    }
    pub fn any(action: FaultAction) -> Fault {
        Fault {
            on: On::Any,
            resource: None,
            action,
        }
    }
}

/// Server options.
#[derive(Clone)]
pub struct Options {
    pub certs: Option<Certs>,
    /// Ask TLS clients for a certificate (verified against the CA; optional to present).
    pub client_auth: bool,
    /// Accepted bearer tokens; empty = anonymous access allowed (unless `require_auth`).
    pub tokens: Vec<String>,
    pub require_auth: bool,
    /// Watch events kept; a watch from before the oldest gets 410.
    pub history: usize,
    pub crds_installed: bool,
    /// Bookmark period on idle watches that asked for bookmarks (kube-apiserver: about a
    /// minute). A bookmark also goes 2 s before the watch's deadline.
    pub bookmark_every: Option<Duration>,
    /// Report "too old" watches as HTTP 410 instead of a 200 + ERROR event.
    pub gone_as_http: bool,
    /// How watch events are cut into chunks.
    pub chunking: Chunking,
    /// Play a load balancer that forgets idle connections: a request arriving on a
    /// connection idle for longer than this is answered by closing it.
    pub forget_idle_after: Option<Duration>,
}

/// How watch events go into HTTP chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chunking {
    /// One event per chunk (what kube-apiserver's encoder does with HTTP/1.1).
    PerEvent,
    /// Every event ready at once in one chunk, and chunks of at most `n` bytes, so events
    /// span chunks (what a proxy re-chunking the stream does).
    Split(usize),
}

impl Default for Options {
    fn default() -> Self {
        Options {
            certs: None,
            client_auth: false,
            tokens: Vec::new(),
            require_auth: false,
            history: 1000,
            crds_installed: true,
            bookmark_every: Some(Duration::from_secs(60)),
            gone_as_http: false,
            chunking: Chunking::PerEvent,
            forget_idle_after: None,
        }
    }
}

struct Hist {
    rv: u64,
    resource: String,
    type_: &'static str,
    old: Option<Value>,
    new: Value,
}

/// A LIST result frozen at one resourceVersion, for continue tokens; items are the
/// objects' cached JSON, so paging 10,000 objects costs no deep copies.
struct Snapshot {
    rv: u64,
    items: Vec<Arc<Vec<u8>>>,
}

struct State {
    rv: u64,
    objects: BTreeMap<(String, String), Value>,
    /// Each object's JSON, kept next to it (LIST pages are built from these).
    encoded: HashMap<(String, String), Arc<Vec<u8>>>,
    history: VecDeque<Hist>,
    /// Events with rv <= this are gone from the history.
    compacted: u64,
    tokens: Vec<String>,
    crds_installed: bool,
    faults: VecDeque<Fault>,
    snapshots: HashMap<u64, Snapshot>,
    next_snapshot: u64,
    requests: Vec<String>,
}

/// State shared by the connection threads.
pub struct Shared {
    state: Mutex<State>,
    cv: Condvar,
    stop: AtomicBool,
    opts: Options,
    tls: Option<Arc<rustls::ServerConfig>>,
    /// The antrea-controller's controlplane API (`controlplane.rs`), with its own lock.
    cp: Mutex<controlplane::Cp>,
    cp_cv: Condvar,
    pub watches_opened: AtomicU64,
    pub bytes_sent: AtomicU64,
}

/// A running server; dropping it stops it.
pub struct ApiServer {
    pub addr: SocketAddr,
    pub shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

/// Plural resource name and key of a JSON object.
pub fn resource_of(kind: &str) -> &'static str {
    match kind {
        "Pod" => "pods",
        "Namespace" => "namespaces",
        "TrafficControl" => "trafficcontrols",
        "ExternalNode" => "externalnodes",
        other => panic!("test server does not serve kind {other}"),
    }
}

fn resource_static(resource: &str) -> &'static str {
    match resource {
        "pods" => "pods",
        "namespaces" => "namespaces",
        "trafficcontrols" => "trafficcontrols",
        _ => "externalnodes",
    }
}

fn kind_of(resource: &str) -> (&'static str, &'static str) {
    match resource {
        "pods" => ("Pod", "v1"),
        "namespaces" => ("Namespace", "v1"),
        "trafficcontrols" => ("TrafficControl", "crd.antrea.io/v1alpha2"),
        "externalnodes" => ("ExternalNode", "crd.antrea.io/v1alpha1"),
        _ => ("Unknown", "v1"),
    }
}

pub fn key_of(obj: &Value) -> String {
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    match obj["metadata"]["namespace"].as_str() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

fn status_body(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

fn reason_phrase(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        410 => "Gone",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

impl Shared {
    /// The server's test PKI (TLS servers only).
    pub fn opts_certs(&self) -> Certs {
        self.opts.certs.clone().expect("not a TLS server")
    }
}

impl ApiServer {
    pub fn start(opts: Options) -> ApiServer {
        ApiServer::start_at(0, opts)
    }

    /// On a given loopback port (0: any), e.g. one a client was already told about.
    pub fn start_at(port: u16, opts: Options) -> ApiServer {
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
        let addr = listener.local_addr().unwrap();
        let tls = opts
            .certs
            .as_ref()
            .map(|c| Arc::new(serve::server_tls(c, opts.client_auth)));
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                rv: 1,
                objects: BTreeMap::new(),
                encoded: HashMap::new(),
                history: VecDeque::new(),
                compacted: 1,
                tokens: opts.tokens.clone(),
                crds_installed: opts.crds_installed,
                faults: VecDeque::new(),
                snapshots: HashMap::new(),
                next_snapshot: 1,
                requests: Vec::new(),
            }),
            cv: Condvar::new(),
            stop: AtomicBool::new(false),
            opts,
            tls,
            cp: Mutex::default(),
            cp_cv: Condvar::new(),
            watches_opened: AtomicU64::new(0),
            bytes_sent: AtomicU64::new(0),
        });
        let sh = Arc::clone(&shared);
        let accept = std::thread::Builder::new()
            .name("apiserver-accept".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if sh.stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(sock) = conn else { continue };
                    let sh = Arc::clone(&sh);
                    let _ = std::thread::Builder::new()
                        .name("apiserver-conn".into())
                        .spawn(move || serve::handle_conn(&sh, sock));
                }
            })
            .unwrap();
        ApiServer {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// `https://127.0.0.1:<port>` or `http://…` without TLS.
    pub fn url(&self) -> String {
        let scheme = if self.shared.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.addr)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock().unwrap()
    }

    /// The CA that signed the server certificate (TLS servers only).
    pub fn shared_ca(&self) -> Option<String> {
        self.shared.opts.certs.as_ref().map(|c| c.ca_pem.clone())
    }

    fn record(
        &self,
        st: &mut State,
        resource: &str,
        type_: &'static str,
        old: Option<Value>,
        new: Value,
    ) {
        st.history.push_back(Hist {
            rv: st.rv,
            resource: resource.to_string(),
            type_,
            old,
            new,
        });
        while st.history.len() > self.shared.opts.history {
            let h = st.history.pop_front().unwrap();
            st.compacted = h.rv;
        }
        self.shared.cv.notify_all();
    }

    /// Create an object (fills uid, resourceVersion, creationTimestamp). Returns it.
    pub fn create(&self, mut obj: Value) -> Value {
        let resource = resource_of(obj["kind"].as_str().unwrap());
        let mut st = self.lock();
        st.rv += 1;
        let rv = st.rv;
        let m = obj["metadata"].as_object_mut().unwrap();
        m.insert("resourceVersion".into(), json!(rv.to_string()));
        m.insert("uid".into(), json!(format!("uid-{rv}")));
        m.entry("creationTimestamp")
            .or_insert(json!("2026-11-30T09:00:00Z"));
        let key = key_of(&obj);
        let id = (resource.to_string(), key.clone());
        st.encoded
            .insert(id.clone(), Arc::new(serde_json::to_vec(&obj).unwrap()));
        let prev = st.objects.insert(id, obj.clone());
        assert!(prev.is_none(), "create of existing {resource} {key}");
        self.record(&mut st, resource, "ADDED", None, obj.clone());
        obj
    }

    /// Replace an existing object (keeps uid and creationTimestamp). Returns it.
    pub fn update(&self, mut obj: Value) -> Value {
        let resource = resource_of(obj["kind"].as_str().unwrap());
        let key = key_of(&obj);
        let mut st = self.lock();
        let old = st
            .objects
            .get(&(resource.to_string(), key.clone()))
            .cloned()
            .expect("update of missing object");
        st.rv += 1;
        let rv = st.rv;
        let m = obj["metadata"].as_object_mut().unwrap();
        m.insert("resourceVersion".into(), json!(rv.to_string()));
        m.insert("uid".into(), old["metadata"]["uid"].clone());
        m.insert(
            "creationTimestamp".into(),
            old["metadata"]["creationTimestamp"].clone(),
        );
        let id = (resource.to_string(), key);
        st.encoded
            .insert(id.clone(), Arc::new(serde_json::to_vec(&obj).unwrap()));
        st.objects.insert(id, obj.clone());
        self.record(&mut st, resource, "MODIFIED", Some(old), obj.clone());
        obj
    }

    /// Delete by resource (plural) and key; the DELETED event carries a new resourceVersion.
    pub fn delete(&self, resource: &str, key: &str) -> Option<Value> {
        let mut st = self.lock();
        let id = (resource.to_string(), key.to_string());
        let mut old = st.objects.remove(&id)?;
        st.encoded.remove(&id);
        st.rv += 1;
        let rv = st.rv;
        let prev = old.clone();
        old["metadata"]["resourceVersion"] = json!(rv.to_string());
        self.record(&mut st, resource, "DELETED", Some(prev), old.clone());
        Some(old)
    }

    pub fn get(&self, resource: &str, key: &str) -> Option<Value> {
        self.lock()
            .objects
            .get(&(resource.to_string(), key.to_string()))
            .cloned()
    }

    /// Every object of a resource, by key.
    pub fn objects(&self, resource: &str) -> BTreeMap<String, Value> {
        self.lock()
            .objects
            .iter()
            .filter(|((r, _), _)| r == resource)
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect()
    }

    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    /// Forget the whole watch history: every watch from an older version gets 410.
    pub fn compact(&self) {
        let mut st = self.lock();
        st.history.clear();
        st.compacted = st.rv;
        st.snapshots.clear();
        self.shared.cv.notify_all();
    }

    pub fn set_tokens(&self, tokens: &[&str]) {
        self.lock().tokens = tokens.iter().map(|s| s.to_string()).collect();
    }

    pub fn set_crds_installed(&self, installed: bool) {
        self.lock().crds_installed = installed;
    }

    pub fn inject(&self, f: Fault) {
        self.lock().faults.push_back(f);
        // Open streams pick up stream faults at once.
        self.shared.cv.notify_all();
    }

    pub fn clear_faults(&self) {
        self.lock().faults.clear();
    }

    pub fn pending_faults(&self) -> usize {
        self.lock().faults.len()
    }

    /// Request lines served so far (`GET /path?query`, with the auth outcome).
    pub fn requests(&self) -> Vec<String> {
        self.lock().requests.clone()
    }

    /// Stop accepting and end every stream.
    pub fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.cv.notify_all();
        let _ = TcpStream::connect(self.addr);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.stop();
    }
}
