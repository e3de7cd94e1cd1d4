//! HTTPS to the API server: the only file that uses ureq (with its part `keepalive`, a TCP
//! connector for watches that stay quiet for hours). Owns the agent (TLS from the
//! [`ClusterConfig`]), bearer tokens (a token file is re-read every minute and after a 401,
//! as client-go's cached file token source does), client certificate files (re-read on the
//! same schedule and after a TLS failure; a changed pair rebuilds the agent), request
//! timeouts, and turning non-2xx
//! answers into [`KubeError`]s with the API `Status` kept (ureq's status-as-error is off).
//! It does not know about list/watch semantics (`watch.rs`) or threads (`source.rs`).
//!
//! `tls-server-name` is honoured with a resolver override: requests go to
//! `https://<tls-server-name>:<port>` and the name resolves to the configured server's
//! address, so SNI and certificate verification use the override name (the Host header
//! carries it too, which the API server ignores).

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ureq::http::Uri;
use ureq::tls::{Certificate, ClientCert, PemItem, PrivateKey, RootCerts, TlsConfig};
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{Connector, DefaultConnector, NextTimeout, RustlsConnector};

mod keepalive;

pub use keepalive::Keepalive;

use super::error::KubeError;
use super::kubeconfig::{ClusterConfig, Credentials};
use super::watch::StatusWire;

/// How often a token file is re-read (client-go `NewCachedFileTokenSource`).
pub const TOKEN_REREAD: Duration = Duration::from_secs(60);

/// Timeouts and policy of the client; `Default` is what the daemon uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpConfig {
    /// TCP connect plus TLS handshake.
    pub connect_timeout: Duration,
    /// Whole non-watch request, and the wait for a watch's response headers.
    pub request_timeout: Duration,
    /// Longest silence on an open watch before it is treated as dead; must exceed the
    /// watch `timeoutSeconds` (290 s) since bookmarks may be the only traffic.
    pub watch_stall_timeout: Duration,
    /// Honour `insecure-skip-tls-verify` (refused unless this is set).
    pub allow_insecure: bool,
    /// Accept an `http://` server (refused unless this is set: the bearer token and every
    /// object would cross the network in cleartext).
    pub allow_plain_http: bool,
    /// TCP keepalive on every connection (ureq's own sockets have none): for watches that
    /// may be quiet for longer than any sensible `watch_stall_timeout`.
    pub tcp_keepalive: Option<Keepalive>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            watch_stall_timeout: Duration::from_secs(300),
            allow_insecure: false,
            allow_plain_http: false,
            tcp_keepalive: None,
        }
    }
}

/// What to do about `insecure-skip-tls-verify`: the better fix first.
pub const INSECURE_TLS_FIX: &str = "fix: put the cluster CA in the kubeconfig and drop insecure-skip-tls-verify (kubectl config set-cluster NAME --certificate-authority=ca.crt --embed-certs=true), or, if you really mean it, set allowInsecureTLS: true in the config (--allow-insecure-tls)";

/// What to do about an `http://` server.
pub const PLAIN_HTTP_FIX: &str = "fix: use the API server's https:// address with the cluster CA in the kubeconfig (kubectl config set-cluster NAME --server=https://HOST:6443 --certificate-authority=ca.crt --embed-certs=true), or, for a test server you trust, set allowPlainHTTP: true in the config (--allow-plain-http)";

/// Bearer token, re-read from its file when stale or rejected. No `Debug`: it holds the
/// token.
struct TokenSource {
    creds: Credentials,
    cached: Mutex<Option<(String, Instant)>>,
}

impl TokenSource {
    fn token(&self) -> Result<Option<String>, KubeError> {
        match &self.creds {
            Credentials::None => Ok(None),
            Credentials::Token(t) => Ok(Some(t.clone())),
            Credentials::TokenFile(path) => {
                let mut g = self.cached.lock().unwrap_or_else(|e| e.into_inner());
                if let Some((t, at)) = g.as_ref() {
                    if at.elapsed() < TOKEN_REREAD {
                        return Ok(Some(t.clone()));
                    }
                }
                let t = read_token(path)?;
                *g = Some((t.clone(), Instant::now()));
                Ok(Some(t))
            }
        }
    }

    /// After a 401: the next request re-reads the file.
    fn invalidate(&self) {
        *self.cached.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

fn read_token(path: &std::path::Path) -> Result<String, KubeError> {
    let t =
        crate::files::read_text(path, crate::files::SECRET_MAX).map_err(|e| KubeError::Config {
            what: format!("token file {}", path.display()),
            detail: e.to_string(),
        })?;
    Ok(t.trim().to_string())
}

/// The errors of a request sent on a connection the peer had closed while it was idle in
/// the pool: reset, aborted, broken pipe, EOF before any response, or ureq's "peer
/// disconnected" for the same.
fn stale_connection(e: &ureq::Error) -> bool {
    use std::io::ErrorKind as K;
    match e {
        ureq::Error::Io(io) => matches!(
            io.kind(),
            K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::UnexpectedEof
        ),
        _ => false,
    }
}

/// Resolves the `tls-server-name` host to the configured server's address.
#[derive(Debug)]
struct OverrideResolver {
    name: String,
    target: Uri,
    inner: DefaultResolver,
}

impl Resolver for OverrideResolver {
    fn resolve(
        &self,
        uri: &Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        if uri.host() == Some(self.name.as_str()) {
            self.inner.resolve(&self.target, config, timeout)
        } else {
            self.inner.resolve(uri, config, timeout)
        }
    }
}

/// A connection to one API server, shared by the watcher threads.
pub struct Client {
    current: Mutex<CurrentAgent>,
    /// Every agent built, so that shutdown reaches streams opened before a rotation.
    all_agents: Mutex<Vec<ureq::Agent>>,
    cc: ClusterConfig,
    base: String,
    server: String,
    tokens: TokenSource,
    cfg: HttpConfig,
}

fn certs(pem: &[u8], what: &str) -> Result<Vec<Certificate<'static>>, KubeError> {
    let mut out = Vec::new();
    for item in ureq::tls::parse_pem(pem) {
        match item {
            Ok(PemItem::Certificate(c)) => out.push(c),
            Ok(_) => {}
            Err(e) => {
                return Err(KubeError::Config {
                    what: what.to_string(),
                    detail: e.to_string(),
                });
            }
        }
    }
    if out.is_empty() {
        return Err(KubeError::Config {
            what: what.to_string(),
            detail: "no PEM certificate found".to_string(),
        });
    }
    Ok(out)
}

/// Build an agent for `cc` with the given client certificate and key PEMs.
fn build_agent(
    cc: &ClusterConfig,
    cfg: HttpConfig,
    client: Option<(&[u8], &[u8])>,
) -> Result<ureq::Agent, KubeError> {
    let mut tls = TlsConfig::builder();
    if let Some(ca) = &cc.ca_pem {
        tls = tls.root_certs(RootCerts::new_with_certs(&certs(
            ca,
            "certificate-authority",
        )?));
    }
    if let Some((cert, key)) = client {
        let chain = certs(cert, "client-certificate")?;
        let key = PrivateKey::from_pem(key).map_err(|e| KubeError::Config {
            what: "client-key".to_string(),
            detail: e.to_string(),
        })?;
        tls = tls.client_cert(Some(ClientCert::new_with_certs(&chain, key)));
    }
    if cc.insecure_skip_tls_verify {
        if !cfg.allow_insecure {
            return Err(KubeError::Config {
                what: "insecure-skip-tls-verify".to_string(),
                detail: format!(
                    "the kubeconfig disables server certificate verification, so anyone on the path could impersonate the API server; refusing. {INSECURE_TLS_FIX}"
                ),
            });
        }
        tls = tls.disable_verification(true);
    }
    let config = ureq::Agent::config_builder()
        .tls_config(tls.build())
        .http_status_as_error(false)
        .proxy(None)
        .https_only(false)
        // A redirect would take the bearer token elsewhere (and possibly to http://): the
        // API server never sends one; a 3xx is an error like any other non-2xx.
        .max_redirects(0)
        .timeout_connect(Some(cfg.connect_timeout))
        .timeout_recv_response(Some(cfg.request_timeout))
        .build();
    let resolver = match &cc.tls_server_name {
        Some(name) => {
            let target: Uri = cc.server.parse().map_err(|e| KubeError::Config {
                what: format!("server {:?}", cc.server),
                detail: format!("not a URL: {e}"),
            })?;
            Some(OverrideResolver {
                name: name.clone(),
                target,
                inner: DefaultResolver::default(),
            })
        }
        None => None,
    };
    Ok(match (cfg.tcp_keepalive, resolver) {
        (Some(k), resolver) => {
            // No proxy connectors: the agent has no proxy (`proxy(None)` above).
            let connector = keepalive::KeepaliveConnector(k).chain(RustlsConnector::default());
            match resolver {
                Some(r) => ureq::Agent::with_parts(config, connector, r),
                None => ureq::Agent::with_parts(config, connector, DefaultResolver::default()),
            }
        }
        (None, Some(r)) => ureq::Agent::with_parts(config, DefaultConnector::new(), r),
        (None, None) => ureq::Agent::new_with_config(config),
    })
}

// By hand: the client key must never reach a log line.
impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.server)
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// The agent in use and the client certificate it was built with.
struct CurrentAgent {
    agent: ureq::Agent,
    client_pem: Option<(Vec<u8>, Vec<u8>)>,
    checked: Instant,
    /// A 401 or TLS failure asks for the certificate files to be re-read now.
    stale: bool,
}

impl Client {
    pub fn new(cc: &ClusterConfig, cfg: HttpConfig) -> Result<Client, KubeError> {
        let server_uri: Uri = cc.server.parse().map_err(|e| KubeError::Config {
            what: format!("server {:?}", cc.server),
            detail: format!("not a URL: {e}"),
        })?;
        match server_uri.scheme_str() {
            Some("https") => {}
            Some("http") if cfg.allow_plain_http => log::warn!(
                "server={} PLAIN HTTP (allowPlainHTTP): the token and every object cross the network in cleartext",
                cc.server
            ),
            Some("http") => {
                return Err(KubeError::Config {
                    what: format!("server {}", cc.server),
                    detail: format!(
                        "plain http:// would send the bearer token and every object in cleartext; refusing. {PLAIN_HTTP_FIX}"
                    ),
                });
            }
            other => {
                return Err(KubeError::Config {
                    what: format!("server {:?}", cc.server),
                    detail: format!("scheme {:?} is not https", other.unwrap_or("")),
                });
            }
        }
        let client_pem = match (&cc.client_cert_pem, &cc.client_key_pem) {
            (Some(c), Some(k)) => Some((c.clone(), k.clone())),
            _ => None,
        };
        let agent = build_agent(
            cc,
            cfg,
            client_pem
                .as_ref()
                .map(|(c, k)| (c.as_slice(), k.as_slice())),
        )?;
        if cc.insecure_skip_tls_verify {
            log::warn!(
                "server={} TLS VERIFICATION DISABLED (insecure-skip-tls-verify): anyone on the path can impersonate the API server",
                cc.server
            );
        }
        let base = base_url(&server_uri, &cc.server, cc.tls_server_name.as_deref());
        Ok(Client {
            current: Mutex::new(CurrentAgent {
                agent: agent.clone(),
                client_pem,
                checked: Instant::now(),
                stale: false,
            }),
            all_agents: Mutex::new(vec![agent]),
            cc: cc.clone(),
            base,
            server: cc.server.clone(),
            tokens: TokenSource {
                creds: cc.credentials.clone(),
                cached: Mutex::new(None),
            },
            cfg,
        })
    }

    /// The agent to use now; rebuilt when the client certificate files changed (kubelet
    /// rotates them), checked every minute and after a 401 or TLS failure.
    fn agent(&self) -> ureq::Agent {
        let mut cur = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((cert_path, key_path)) = &self.cc.client_cert_files {
            if cur.stale || cur.checked.elapsed() >= TOKEN_REREAD {
                cur.stale = false;
                cur.checked = Instant::now();
                let read = |p: &PathBuf| crate::files::read_regular(p, crate::files::SECRET_MAX);
                match (read(cert_path), read(key_path)) {
                    (Ok(c), Ok(k)) => {
                        let same = cur
                            .client_pem
                            .as_ref()
                            .is_some_and(|(oc, ok)| *oc == c && *ok == k);
                        if !same {
                            match build_agent(&self.cc, self.cfg, Some((&c, &k))) {
                                Ok(a) => {
                                    log::info!(
                                        "server={} cert={} client certificate reloaded",
                                        self.server,
                                        cert_path.display()
                                    );
                                    cur.agent = a.clone();
                                    cur.client_pem = Some((c, k));
                                    self.all_agents
                                        .lock()
                                        .unwrap_or_else(|e| e.into_inner())
                                        .push(a);
                                }
                                Err(e) => log::warn!(
                                    "cert={} cannot use the rotated client certificate: {e}",
                                    cert_path.display()
                                ),
                            }
                        }
                    }
                    (Err(e), _) | (_, Err(e)) => log::warn!(
                        "cert={} cannot re-read the client certificate or key: {e}",
                        cert_path.display()
                    ),
                }
            }
        }
        cur.agent.clone()
    }

    fn mark_stale(&self) {
        self.current.lock().unwrap_or_else(|e| e.into_inner()).stale = true;
    }

    /// The server URL, for messages.
    pub fn server(&self) -> &str {
        &self.server
    }

    fn url(&self, path: &str, query: &[(&str, String)]) -> String {
        let mut u = format!("{}{}", self.base, path);
        for (i, (k, v)) in query.iter().enumerate() {
            u.push(if i == 0 { '?' } else { '&' });
            u.push_str(&encode_query(k));
            u.push('=');
            u.push_str(&encode_query(v));
        }
        u
    }

    fn call(
        &self,
        path: &str,
        query: &[(&str, String)],
        watch: bool,
    ) -> Result<ureq::http::Response<ureq::Body>, KubeError> {
        self.call_with(path, query, if watch { Req::Watch } else { Req::Get })
    }

    fn call_with(
        &self,
        path: &str,
        query: &[(&str, String)],
        how: Req<'_>,
    ) -> Result<ureq::http::Response<ureq::Body>, KubeError> {
        let url = self.url(path, query);
        // Surface a token file that cannot be read as what it is.
        let token = self.tokens.token()?;
        let auth = token.as_ref().map(|t| format!("Bearer {t}"));
        let send = || -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
            match how {
                Req::Get | Req::Watch => {
                    let mut req = self.agent().get(&url).header("Accept", "application/json");
                    if let Some(a) = &auth {
                        req = req.header("Authorization", a);
                    }
                    let req = if matches!(how, Req::Watch) {
                        req.config()
                            .timeout_recv_body(None)
                            .timeout_per_read(Some(self.cfg.watch_stall_timeout))
                            .build()
                    } else {
                        req.config()
                            .timeout_recv_body(Some(self.cfg.request_timeout))
                            .build()
                    };
                    req.call()
                }
                Req::Post(body) => {
                    let mut req = self
                        .agent()
                        .post(&url)
                        .header("Accept", "application/json")
                        .header("Content-Type", "application/json");
                    if let Some(a) = &auth {
                        req = req.header("Authorization", a);
                    }
                    req.config()
                        .timeout_recv_body(Some(self.cfg.request_timeout))
                        .build()
                        .send(body)
                }
            }
        };
        let resp = match send() {
            // A pooled keep-alive connection the server or a load balancer closed while it
            // sat idle fails the first request sent on it: a GET is idempotent, so it is
            // sent again once, on a new connection, without counting as an error. The only
            // POST tether sends (a NetworkPolicy's realization status) is idempotent too.
            Err(e) if stale_connection(&e) => {
                log::debug!(
                    "server={} {path}: {e}; retrying once on a new connection",
                    self.server
                );
                send()
            }
            r => r,
        };
        let resp = resp.map_err(|e| {
            let e = self.map_err(e, path);
            if matches!(e, KubeError::Tls { .. }) {
                self.mark_stale();
            }
            e
        })?;
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        if (200..300).contains(&status) {
            return Ok(resp);
        }
        if status == 401 {
            self.tokens.invalidate();
            self.mark_stale();
        }
        let body = resp
            .into_body()
            .into_with_config()
            .limit(1 << 20)
            .read_to_vec()
            .unwrap_or_default();
        let st: StatusWire = serde_json::from_slice(&body).unwrap_or_default();
        let message = if st.message.is_empty() {
            String::from_utf8_lossy(&body[..body.len().min(256)])
                .trim()
                .to_string()
        } else {
            st.message
        };
        Err(KubeError::from_status(status, path, st.reason, message).with_retry_after(retry_after))
    }

    /// GET a non-watch resource (a LIST page, one object); the whole body.
    pub fn get(&self, path: &str, query: &[(&str, String)]) -> Result<Vec<u8>, KubeError> {
        let resp = self.call(path, query, false)?;
        resp.into_body()
            .into_with_config()
            .limit(BODY_MAX)
            .read_to_vec()
            .map_err(|e| self.map_err(e, path))
    }

    /// POST `body` (JSON) to `path`; the response body.
    pub fn post(&self, path: &str, body: &[u8]) -> Result<Vec<u8>, KubeError> {
        let resp = self.call_with(path, &[], Req::Post(body))?;
        resp.into_body()
            .into_with_config()
            .limit(BODY_MAX)
            .read_to_vec()
            .map_err(|e| self.map_err(e, path))
    }

    /// Open a WATCH; the stream yields one line per event.
    pub fn watch(&self, path: &str, query: &[(&str, String)]) -> Result<WatchStream, KubeError> {
        let resp = self.call(path, query, true)?;
        Ok(WatchStream {
            reader: BufReader::new(resp.into_body().into_reader()),
            server: self.server.clone(),
        })
    }

    /// Interrupt every blocked read of this client (watches) and refuse new requests:
    /// for process shutdown only.
    pub fn shutdown(&self) {
        for a in self
            .all_agents
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            a.clone().shutdown();
        }
    }

    fn map_err(&self, e: ureq::Error, path: &str) -> KubeError {
        map_ureq_error(e, &self.server, path)
    }
}

/// rustls failures reach us either as `Error::Rustls`/`Tls` or as an `io::Error` that wraps
/// the rustls error; the message is the only stable thing to recognise the latter by.
/// The request a [`Client`] sends.
#[derive(Clone, Copy)]
enum Req<'a> {
    Get,
    Watch,
    Post(&'a [u8]),
}

fn looks_like_tls(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    [
        "certificate",
        "tls",
        "handshake",
        "alert",
        "peer sent",
        "unknownissuer",
    ]
    .iter()
    .any(|k| m.contains(k))
}

fn map_ureq_error(e: ureq::Error, server: &str, path: &str) -> KubeError {
    let msg = e.to_string();
    match e {
        ureq::Error::Rustls(_) | ureq::Error::Tls(_) | ureq::Error::Pem(_) => KubeError::Tls {
            server: server.to_string(),
            detail: msg,
        },
        ureq::Error::Io(ref io) if looks_like_tls(&io.to_string()) => KubeError::Tls {
            server: server.to_string(),
            detail: msg,
        },
        _ => KubeError::Transport {
            what: format!("GET {server}{path}"),
            detail: msg,
        },
    }
}

/// Largest watch event accepted (the API server's own request limit is 3 MiB per object).
const MAX_EVENT: u64 = 64 << 20;

/// An open watch response body, read line by line.
pub struct WatchStream {
    reader: BufReader<ureq::BodyReader<'static>>,
    server: String,
}

impl WatchStream {
    /// The next non-empty line; `None` at a clean end of the stream.
    pub fn next_line(&mut self) -> Option<Result<Vec<u8>, KubeError>> {
        loop {
            let mut line = Vec::new();
            match (&mut self.reader)
                .take(MAX_EVENT)
                .read_until(b'\n', &mut line)
            {
                Ok(0) => return None,
                Ok(n) => {
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    if line.last() != Some(&b'\n') {
                        // EOF in the middle of a line: the stream was cut; or a line
                        // that never ends, which would otherwise eat all memory.
                        let detail = if n as u64 >= MAX_EVENT {
                            format!("event longer than {MAX_EVENT} bytes")
                        } else {
                            "stream ended inside an event".to_string()
                        };
                        return Some(Err(KubeError::Transport {
                            what: format!("watch from {}", self.server),
                            detail,
                        }));
                    }
                    return Some(Ok(line));
                }
                Err(e) => {
                    return Some(Err(KubeError::Transport {
                        what: format!("watch from {}", self.server),
                        detail: e.to_string(),
                    }));
                }
            }
        }
    }
}

/// Percent-encode a query component (RFC 3986 §2.3: only unreserved characters pass).
fn encode_query(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Largest LIST page (or object) read. The pages asked for hold 500 objects (a few MiB
/// for Pods); a body this size, parsed, stays well inside the unit's `MemoryMax=256M`
/// beside everything else, where the former 256 MiB cap let a hostile server take the
/// daemon down.
pub const BODY_MAX: u64 = 32 << 20;

/// The URL requests go to: the kubeconfig's server, or with `tls-server-name` that name
/// at the server's port (resolved to the server's address), keeping the server URL's
/// path (an API behind a proxy: `https://rancher/k8s/clusters/c-1`).
fn base_url(server_uri: &Uri, server: &str, tls_server_name: Option<&str>) -> String {
    match tls_server_name {
        Some(name) => {
            let scheme = server_uri.scheme_str().unwrap_or("https");
            let default_port = if scheme == "http" { 80 } else { 443 };
            let port = server_uri.port_u16().unwrap_or(default_port);
            let path = server_uri.path().trim_end_matches('/');
            format!("{scheme}://{name}:{port}{path}")
        }
        None => server.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_server_name_keeps_the_servers_path_and_port() {
        let u = |s: &str| -> Uri { s.parse().unwrap() };
        let s = "https://192.0.2.1:6443/k8s/clusters/c-1";
        assert_eq!(
            base_url(&u(s), s, Some("api.example")),
            "https://api.example:6443/k8s/clusters/c-1"
        );
        let s = "https://192.0.2.1/";
        assert_eq!(
            base_url(&u(s), s, Some("api.example")),
            "https://api.example:443"
        );
        assert_eq!(base_url(&u(s), s, None), s);
    }

    #[test]
    fn query_encoding() {
        assert_eq!(encode_query("spec.nodeName=vm-1"), "spec.nodeName%3Dvm-1");
        assert_eq!(encode_query("a b/c"), "a%20b%2Fc");
    }

    #[test]
    fn tls_messages_are_recognised() {
        assert!(looks_like_tls("invalid peer certificate: UnknownIssuer"));
        assert!(!looks_like_tls("Connection refused (os error 111)"));
    }

    #[test]
    fn insecure_is_refused_unless_allowed() {
        let cc = ClusterConfig {
            server: "https://192.0.2.1:6443".into(),
            ca_pem: None,
            client_cert_pem: None,
            client_key_pem: None,
            tls_server_name: None,
            insecure_skip_tls_verify: true,
            credentials: Credentials::None,
            namespace: None,
            client_cert_files: None,
        };
        let e = Client::new(&cc, HttpConfig::default()).unwrap_err();
        assert!(
            e.to_string().starts_with("insecure-skip-tls-verify: "),
            "{e}"
        );
        // The refusal says how to fix it: the CA first, then the key and the flag.
        assert!(e.to_string().ends_with(INSECURE_TLS_FIX), "{e}");
        assert!(INSECURE_TLS_FIX.contains("--certificate-authority=ca.crt --embed-certs=true"));
        assert!(INSECURE_TLS_FIX.contains("allowInsecureTLS: true"));
        assert!(INSECURE_TLS_FIX.contains("--allow-insecure-tls"));
        let allowed = HttpConfig {
            allow_insecure: true,
            ..HttpConfig::default()
        };
        assert!(Client::new(&cc, allowed).is_ok());
    }

    /// A bearer token must not go out in cleartext because a kubeconfig says `http://`.
    #[test]
    fn plain_http_is_refused_unless_allowed() {
        let cc = ClusterConfig {
            server: "http://192.0.2.1:8080".into(),
            ca_pem: None,
            client_cert_pem: None,
            client_key_pem: None,
            tls_server_name: None,
            insecure_skip_tls_verify: false,
            credentials: Credentials::Token("secret-token".into()),
            namespace: None,
            client_cert_files: None,
        };
        let e = Client::new(&cc, HttpConfig::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "server http://192.0.2.1:8080: plain http:// would send the bearer token and every object in cleartext; refusing. {PLAIN_HTTP_FIX}"
            )
        );
        assert!(PLAIN_HTTP_FIX.contains("allowPlainHTTP: true"));
        assert!(PLAIN_HTTP_FIX.contains("--allow-plain-http"));
        let allowed = HttpConfig {
            allow_plain_http: true,
            ..HttpConfig::default()
        };
        assert!(Client::new(&cc, allowed).is_ok());
        // allowInsecureTLS alone does not allow plain HTTP.
        let tls_only = HttpConfig {
            allow_insecure: true,
            ..HttpConfig::default()
        };
        assert!(Client::new(&cc, tls_only).is_err());
        let ftp = ClusterConfig {
            server: "ftp://192.0.2.1".into(),
            ..cc
        };
        assert_eq!(
            Client::new(&ftp, allowed).unwrap_err().to_string(),
            "server \"ftp://192.0.2.1\": scheme \"ftp\" is not https"
        );
    }
}
