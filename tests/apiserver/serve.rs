//! The HTTP side of the test API server: TLS setup, request parsing, routing, auth,
//! faults, LIST pages and chunked WATCH streams. State and the test-facing API are in
//! `mod.rs`.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{
    Certs, Chunking, Fault, FaultAction, On, Shared, Snapshot, kind_of, reason_phrase,
    resource_static, status_body,
};

pub(super) fn server_tls(c: &Certs, client_auth: bool) -> rustls::ServerConfig {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(c.server_cert_pem.as_bytes())
            .map(|c| c.unwrap())
            .collect();
    let key = PrivateKeyDer::from_pem_slice(c.server_key_pem.as_bytes()).unwrap();
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = if client_auth {
        let mut roots = rustls::RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(c.ca_pem.as_bytes()) {
            roots.add(ca.unwrap()).unwrap();
        }
        let v =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .unwrap();
        builder.with_client_cert_verifier(v)
    } else {
        builder.with_no_client_auth()
    };
    builder.with_single_cert(chain, key).unwrap()
}

/// A plain or TLS connection.
enum Conn {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ServerConnection, TcpStream>>),
}

impl Conn {
    fn tcp(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(t) => &t.sock,
        }
    }

    /// Cut the TCP connection without any TLS close_notify or final chunk.
    fn cut(&self) {
        let _ = self.tcp().shutdown(Shutdown::Both);
    }

    fn close(&mut self) {
        if let Conn::Tls(t) = self {
            t.conn.send_close_notify();
            let _ = t.flush();
        }
        let _ = self.tcp().shutdown(Shutdown::Both);
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(t) => t.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(t) => t.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Tls(t) => t.flush(),
        }
    }
}

struct Req {
    path: String,
    query: HashMap<String, String>,
    bearer: Option<String>,
    client_cert: bool,
    /// The client asked to close the connection after this request.
    close: bool,
}

/// What the connection does after a request.
#[derive(PartialEq, Eq)]
enum Next {
    KeepAlive,
    Close,
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Read one request head from a connection kept across requests (one `BufReader` for the
/// connection's life, so nothing a client sends early is lost).
fn read_request(r: &mut BufReader<Conn>) -> Option<Req> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let target = line.split_whitespace().nth(1)?.to_string();
    let mut bearer = None;
    let mut close = false;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("authorization") {
                bearer = v.trim().strip_prefix("Bearer ").map(str::to_string);
            } else if k.eq_ignore_ascii_case("connection") {
                close = v.trim().eq_ignore_ascii_case("close");
            }
        }
    }
    let (path, q) = target.split_once('?').unwrap_or((&target, ""));
    let query = q
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect();
    Some(Req {
        path: path.to_string(),
        query,
        bearer,
        client_cert: false,
        close,
    })
}

fn write_counted(sh: &Shared, conn: &mut Conn, data: &[u8]) -> io::Result<()> {
    sh.bytes_sent
        .fetch_add(data.len() as u64, Ordering::Relaxed);
    conn.write_all(data)
}

fn respond(sh: &Shared, conn: &mut Conn, code: u16, body: &Value) -> Next {
    respond_bytes(sh, conn, code, &serde_json::to_vec(body).unwrap())
}

/// A whole response; the connection stays open for the next request (HTTP/1.1, as Go's
/// net/http serves kube-apiserver's clients).
fn respond_bytes(sh: &Shared, conn: &mut Conn, code: u16, body: &[u8]) -> Next {
    let head = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        reason_phrase(code),
        body.len()
    );
    let ok = write_counted(sh, conn, head.as_bytes())
        .and_then(|_| write_counted(sh, conn, body))
        .and_then(|_| conn.flush())
        .is_ok();
    if ok { Next::KeepAlive } else { Next::Close }
}

fn status(sh: &Shared, conn: &mut Conn, code: u16, reason: &str, message: &str) -> Next {
    respond(sh, conn, code, &status_body(code, reason, message))
}

/// `/version` and legacy discovery, as kube-apiserver answers them (kubectl asks for the
/// aggregated form first and falls back to these when the answer is plain JSON).
fn discovery(path: &str, crds: bool) -> Option<Value> {
    let resource = |name: &str, kind: &str, namespaced: bool, short: &[&str]| {
        json!({"name": name, "singularName": kind.to_lowercase(), "namespaced": namespaced,
               "kind": kind, "verbs": ["get", "list", "watch"], "shortNames": short})
    };
    Some(match path.trim_end_matches('/') {
        "/version" => json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0",
            "gitCommit": "tether-test", "gitTreeState": "clean", "buildDate": "2026-11-30T09:00:00Z",
            "goVersion": "go1.24", "compiler": "gc", "platform": "linux/amd64"}),
        "/api" => json!({"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}),
        "/api/v1" => json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
            resource("namespaces", "Namespace", false, &["ns"]),
            resource("pods", "Pod", true, &["po"])]}),
        "/apis" => {
            let groups = if crds {
                vec![json!({"name": "crd.antrea.io", "versions": [
                    {"groupVersion": "crd.antrea.io/v1alpha2", "version": "v1alpha2"},
                    {"groupVersion": "crd.antrea.io/v1alpha1", "version": "v1alpha1"}],
                    "preferredVersion": {"groupVersion": "crd.antrea.io/v1alpha2", "version": "v1alpha2"}})]
            } else {
                Vec::new()
            };
            json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        }
        "/apis/crd.antrea.io/v1alpha2" if crds => {
            json!({"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": "crd.antrea.io/v1alpha2",
            "resources": [resource("trafficcontrols", "TrafficControl", false, &["tc"])]})
        }
        "/apis/crd.antrea.io/v1alpha1" if crds => {
            json!({"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": "crd.antrea.io/v1alpha1",
            "resources": [resource("externalnodes", "ExternalNode", true, &["en"])]})
        }
        _ => return None,
    })
}

/// The label selector grammar of `k8s.io/apimachinery/pkg/labels` that clients send:
/// `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`, comma-separated.
#[derive(Debug)]
enum LabelReq {
    Eq(String, String),
    Ne(String, String),
    Exists(String),
    Absent(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

fn label_selector(s: &str) -> Result<Vec<LabelReq>, String> {
    // Split on commas outside parentheses.
    let mut parts = Vec::new();
    let (mut depth, mut cur) = (0, String::new());
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    parts.push(cur);
    let set = |v: &str| -> Vec<String> {
        v.trim()
            .trim_start_matches('(')
            .trim_end_matches(')')
            .split(',')
            .map(|x| x.trim().to_string())
            .collect()
    };
    let mut out = Vec::new();
    for p in parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
        let r = if let Some((k, v)) = p.split_once("!=") {
            LabelReq::Ne(k.trim().into(), v.trim().into())
        } else if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
            LabelReq::Eq(k.trim().into(), v.trim().into())
        } else if let Some((k, v)) = p.split_once(" notin ") {
            LabelReq::NotIn(k.trim().into(), set(v))
        } else if let Some((k, v)) = p.split_once(" in ") {
            LabelReq::In(k.trim().into(), set(v))
        } else if let Some(k) = p.strip_prefix('!') {
            LabelReq::Absent(k.trim().into())
        } else if p
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        {
            LabelReq::Exists(p.into())
        } else {
            return Err(format!("unable to parse requirement: {p:?}"));
        };
        out.push(r);
    }
    Ok(out)
}

fn labels_match(obj: &Value, sel: &[LabelReq]) -> bool {
    let l = |k: &str| obj["metadata"]["labels"][k].as_str().map(str::to_string);
    sel.iter().all(|r| match r {
        LabelReq::Eq(k, v) => l(k).as_deref() == Some(v.as_str()),
        LabelReq::Ne(k, v) => l(k).as_deref() != Some(v.as_str()),
        LabelReq::Exists(k) => l(k).is_some(),
        LabelReq::Absent(k) => l(k).is_none(),
        LabelReq::In(k, vs) => l(k).is_some_and(|x| vs.contains(&x)),
        LabelReq::NotIn(k, vs) => l(k).is_none_or(|x| !vs.contains(&x)),
    })
}

/// What a LIST or WATCH selects.
struct Selection {
    ns: Option<String>,
    fields: Vec<(String, String)>,
    labels: Vec<LabelReq>,
}

impl Selection {
    fn matches(&self, obj: &Value) -> bool {
        matches(obj, &self.ns, &self.fields) && labels_match(obj, &self.labels)
    }
}

/// (resource plural, namespace) for a collection path, or None (404).
fn route(path: &str, crds: bool) -> Option<(String, Option<String>)> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group_ok, rest) = match segs.as_slice() {
        ["api", "v1", rest @ ..] => (true, rest.to_vec()),
        ["apis", "crd.antrea.io", v, rest @ ..] if crds => {
            let r = rest.last().copied().unwrap_or("");
            (
                (r == "trafficcontrols" && *v == "v1alpha2")
                    || (r == "externalnodes" && *v == "v1alpha1"),
                rest.to_vec(),
            )
        }
        _ => return None,
    };
    if !group_ok {
        return None;
    }
    let core = segs[0] == "api";
    match rest.as_slice() {
        [r] => {
            let ok = if core {
                matches!(*r, "pods" | "namespaces")
            } else {
                true
            };
            ok.then(|| (r.to_string(), None))
        }
        ["namespaces", ns, r] => {
            let ok = if core {
                *r == "pods"
            } else {
                *r == "externalnodes"
            };
            ok.then(|| (r.to_string(), Some(ns.to_string())))
        }
        _ => None,
    }
}

/// Parsed field selector: (field, value) pairs that must all hold.
fn field_selector(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        let (f, v) = part
            .split_once("==")
            .or_else(|| part.split_once('='))
            .ok_or_else(|| format!("invalid selector: '{part}'; can't understand '{part}'"))?;
        if !matches!(f, "spec.nodeName" | "metadata.name" | "metadata.namespace") {
            return Err(format!("field label not supported: {f}"));
        }
        out.push((f.to_string(), v.to_string()));
    }
    Ok(out)
}

fn matches(obj: &Value, ns: &Option<String>, fields: &[(String, String)]) -> bool {
    if let Some(ns) = ns {
        if obj["metadata"]["namespace"].as_str() != Some(ns.as_str()) {
            return false;
        }
    }
    fields.iter().all(|(f, v)| {
        let got = match f.as_str() {
            "spec.nodeName" => obj["spec"]["nodeName"].as_str().unwrap_or(""),
            "metadata.name" => obj["metadata"]["name"].as_str().unwrap_or(""),
            _ => obj["metadata"]["namespace"].as_str().unwrap_or(""),
        };
        got == v
    })
}

/// Faults that act on an open watch stream (picked up by streams already open).
fn is_stream_fault(a: &FaultAction) -> bool {
    matches!(
        a,
        FaultAction::ErrorGone
            | FaultAction::CutMidChunk { .. }
            | FaultAction::Garbage { .. }
            | FaultAction::StatusLine { .. }
            | FaultAction::EndStream { .. }
    )
}

fn take_fault_where(
    sh: &Shared,
    on: On,
    resource: &str,
    pred: impl Fn(&FaultAction) -> bool,
) -> Option<FaultAction> {
    let mut st = sh.state.lock().unwrap();
    let i = st.faults.iter().position(|f| {
        (f.on == on || f.on == On::Any)
            && f.resource.is_none_or(|r| r == resource)
            && pred(&f.action)
    })?;
    let f = st.faults.remove(i)?;
    st.requests.push(format!("FAULT {resource} {:?}", f.action));
    Some(f.action)
}

fn take_fault(sh: &Shared, on: On, resource: &str) -> Option<FaultAction> {
    take_fault_where(sh, on, resource, |_| true)
}

pub(super) fn handle_conn(sh: &Shared, sock: TcpStream) {
    // Idle keep-alive connections are closed after a while, as a real server's idle
    // timeout does (the client then opens a new one).
    let _ = sock.set_read_timeout(Some(Duration::from_secs(30)));
    let _ = sock.set_nodelay(true);
    let conn = match &sh.tls {
        None => Conn::Plain(sock),
        Some(cfg) => {
            let Ok(c) = rustls::ServerConnection::new(Arc::clone(cfg)) else {
                return;
            };
            let mut s = rustls::StreamOwned::new(c, sock);
            while s.conn.is_handshaking() {
                if s.conn.complete_io(&mut s.sock).is_err() {
                    // Handshake refused (e.g. the client does not trust our CA).
                    return;
                }
            }
            Conn::Tls(Box::new(s))
        }
    };
    let client_cert =
        matches!(&conn, Conn::Tls(t) if t.conn.peer_certificates().is_some_and(|c| !c.is_empty()));
    let mut r = BufReader::new(conn);
    let mut last = Instant::now();
    loop {
        let Some(mut req) = read_request(&mut r) else {
            return;
        };
        if sh.stop.load(Ordering::SeqCst) {
            return;
        }
        req.client_cert = client_cert;
        if sh
            .opts
            .forget_idle_after
            .is_some_and(|t| last.elapsed() > t)
        {
            // A load balancer that dropped the idle connection: nothing comes back.
            sh.state
                .lock()
                .unwrap()
                .requests
                .push(format!("FORGOT idle connection, dropped GET {}", req.path));
            r.get_mut().cut();
            return;
        }
        let next = serve(sh, r.get_mut(), &req);
        if next == Next::Close || req.close {
            r.get_mut().close();
            return;
        }
        last = Instant::now();
    }
}

fn serve(sh: &Shared, conn: &mut Conn, req: &Req) -> Next {
    let watch = req
        .query
        .get("watch")
        .is_some_and(|v| v == "true" || v == "1");
    let (authorized, crds) = {
        let mut st = sh.state.lock().unwrap();
        let tokens_ok = match &req.bearer {
            Some(t) => st.tokens.iter().any(|x| x == t),
            None => false,
        };
        let anonymous = st.tokens.is_empty() && !sh.opts.require_auth;
        let ok = req.client_cert || tokens_ok || anonymous;
        let q: BTreeMap<_, _> = req.query.iter().collect();
        st.requests.push(format!(
            "GET {} {:?} auth={}",
            req.path,
            q,
            if ok { "ok" } else { "denied" }
        ));
        (ok, st.crds_installed)
    };
    if !authorized {
        return status(sh, conn, 401, "Unauthorized", "Unauthorized");
    }
    if let Some(body) = discovery(&req.path, crds) {
        return respond(sh, conn, 200, &body);
    }
    let Some((resource, ns)) = route(&req.path, crds) else {
        return status(
            sh,
            conn,
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
    };
    // resourceVersionMatch, as staging/src/k8s.io/apimachinery/pkg/apis/meta/internalversion/
    // validation ValidateListOptions: only NotOlderThan and Exact, never with watch, only
    // with a resourceVersion (Exact: not "0"). Otherwise 422 Invalid.
    if let Some(m) = req.query.get("resourceVersionMatch") {
        let rv = req
            .query
            .get("resourceVersion")
            .map(String::as_str)
            .unwrap_or("");
        let problem = if watch {
            Some("resourceVersionMatch is forbidden for watch")
        } else if !matches!(m.as_str(), "NotOlderThan" | "Exact") {
            Some("supported values: \"Exact\", \"NotOlderThan\"")
        } else if rv.is_empty() {
            Some("resourceVersionMatch is forbidden unless resourceVersion is provided")
        } else if m == "Exact" && rv == "0" {
            Some("resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"")
        } else {
            None
        };
        if let Some(p) = problem {
            let mut body = status_body(
                422,
                "Invalid",
                &format!("resourceVersionMatch: Invalid value: {m:?}: {p}"),
            );
            body["details"] = json!({"causes": [{"reason": "FieldValueInvalid", "message": p, "field": "resourceVersionMatch"}]});
            return respond(sh, conn, 422, &body);
        }
    }
    let fields = match field_selector(
        req.query
            .get("fieldSelector")
            .map(String::as_str)
            .unwrap_or(""),
    ) {
        Ok(f) => f,
        Err(e) => return status(sh, conn, 400, "BadRequest", &e),
    };
    let labels = match label_selector(
        req.query
            .get("labelSelector")
            .map(String::as_str)
            .unwrap_or(""),
    ) {
        Ok(l) => l,
        Err(e) => return status(sh, conn, 400, "BadRequest", &e),
    };
    let sel = Selection { ns, fields, labels };
    let fault = take_fault(sh, if watch { On::Watch } else { On::List }, &resource);
    let mut stream_fault = None;
    match fault {
        Some(FaultAction::Delay(d)) => std::thread::sleep(d),
        Some(FaultAction::Status(code)) => {
            return status(
                sh,
                conn,
                code,
                "InternalError",
                &format!("injected fault {code}"),
            );
        }
        Some(FaultAction::Drop) => {
            conn.cut();
            return Next::Close;
        }
        Some(FaultAction::HttpGone) if watch => {
            return status(
                sh,
                conn,
                410,
                "Expired",
                "too old resource version (injected)",
            );
        }
        Some(FaultAction::ExpireContinue) if !watch && req.query.contains_key("continue") => {
            return status(
                sh,
                conn,
                410,
                "Expired",
                "The provided continue parameter is too old (injected)",
            );
        }
        Some(FaultAction::FailContinue(code)) if !watch && req.query.contains_key("continue") => {
            return status(
                sh,
                conn,
                code,
                "InternalError",
                "injected failure of a continued list",
            );
        }
        Some(a @ (FaultAction::ExpireContinue | FaultAction::FailContinue(_))) => {
            // Not a continued list: keep the fault for the next one.
            let mut st = sh.state.lock().unwrap();
            st.requests.pop();
            st.faults.push_front(Fault {
                on: On::List,
                resource: Some(resource_static(&resource)),
                action: a,
            });
        }
        Some(FaultAction::Redirect { location }) => {
            let head =
                format!("HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n");
            let ok = write_counted(sh, conn, head.as_bytes())
                .and_then(|_| conn.flush())
                .is_ok();
            return if ok { Next::KeepAlive } else { Next::Close };
        }
        Some(FaultAction::TooMany { retry_after }) => {
            let body = serde_json::to_vec(&status_body(
                429,
                "TooManyRequests",
                "Too many requests, please try again later.",
            ))
            .unwrap();
            let head = format!(
                "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: {retry_after}\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            let ok = write_counted(sh, conn, head.as_bytes())
                .and_then(|_| write_counted(sh, conn, &body))
                .and_then(|_| conn.flush())
                .is_ok();
            return if ok { Next::KeepAlive } else { Next::Close };
        }
        other => stream_fault = other,
    }
    if watch {
        sh.watches_opened.fetch_add(1, Ordering::SeqCst);
        serve_watch(sh, conn, req, &resource, &sel, stream_fault)
    } else {
        serve_list(sh, conn, req, &resource, &sel)
    }
}

fn serve_list(sh: &Shared, conn: &mut Conn, req: &Req, resource: &str, sel: &Selection) -> Next {
    let limit: usize = req
        .query
        .get("limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let mut st = sh.state.lock().unwrap();
    let (snap_id, offset) = match req.query.get("continue") {
        Some(c) => {
            let parsed = c
                .split_once(':')
                .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<usize>().ok()?)));
            match parsed {
                Some((id, off)) if st.snapshots.contains_key(&id) => (id, off),
                _ => {
                    drop(st);
                    return status(
                        sh,
                        conn,
                        410,
                        "Expired",
                        "The provided continue parameter is too old to display a consistent list result.",
                    );
                }
            }
        }
        None => {
            let items: Vec<Arc<Vec<u8>>> = st
                .objects
                .iter()
                .filter(|((r, _), o)| r == resource && sel.matches(o))
                .map(|(id, _)| Arc::clone(&st.encoded[id]))
                .collect();
            let id = st.next_snapshot;
            st.next_snapshot += 1;
            let rv = st.rv;
            st.snapshots.insert(id, Snapshot { rv, items });
            (id, 0)
        }
    };
    let snap = &st.snapshots[&snap_id];
    let end = if limit == 0 {
        snap.items.len()
    } else {
        (offset + limit).min(snap.items.len())
    };
    let items: Vec<Arc<Vec<u8>>> = snap.items[offset.min(end)..end].to_vec();
    let rv = snap.rv;
    let more = end < snap.items.len();
    let finished = if more {
        None
    } else {
        st.snapshots.remove(&snap_id)
    };
    drop(st);
    drop(finished);
    let (kind, api_version) = kind_of(resource);
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if more {
        meta["continue"] = json!(format!("{snap_id}:{end}"));
    }
    let head = json!({"kind": format!("{kind}List"), "apiVersion": api_version, "metadata": meta});
    let mut body = serde_json::to_vec(&head).unwrap();
    body.pop(); // the closing brace: append the items, then close.
    body.extend_from_slice(b",\"items\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(item);
    }
    body.extend_from_slice(b"]}");
    respond_bytes(sh, conn, 200, &body)
}

fn chunk(sh: &Shared, conn: &mut Conn, data: &[u8]) -> io::Result<()> {
    write_counted(sh, conn, format!("{:x}\r\n", data.len()).as_bytes())?;
    write_counted(sh, conn, data)?;
    write_counted(sh, conn, b"\r\n")?;
    conn.flush()
}

/// Write ready event lines as the configured chunking cuts them.
fn send_lines(sh: &Shared, conn: &mut Conn, lines: &[Vec<u8>]) -> io::Result<()> {
    match sh.opts.chunking {
        Chunking::PerEvent => {
            for l in lines {
                chunk(sh, conn, l)?;
            }
            Ok(())
        }
        Chunking::Split(n) => {
            let all: Vec<u8> = lines.concat();
            for part in all.chunks(n.max(1)) {
                chunk(sh, conn, part)?;
            }
            Ok(())
        }
    }
}

fn event_line(type_: &str, obj: &Value) -> Vec<u8> {
    let mut v = serde_json::to_vec(&json!({"type": type_, "object": obj})).unwrap();
    v.push(b'\n');
    v
}

/// A BOOKMARK's object as kube-apiserver sends it: an empty object of the watched kind
/// with only `metadata.resourceVersion` set — typed objects serialize their zero values
/// (`creationTimestamp: null`, a Pod's `spec.containers: null`), custom resources do not.
fn bookmark_object(kind: &str, api_version: &str, rv: u64) -> Value {
    let mut o = json!({"kind": kind, "apiVersion": api_version,
                       "metadata": {"resourceVersion": rv.to_string()}});
    match kind {
        "Pod" => {
            o["metadata"]["creationTimestamp"] = Value::Null;
            o["spec"] = json!({"containers": null});
            o["status"] = json!({});
        }
        "Namespace" => {
            o["metadata"]["creationTimestamp"] = Value::Null;
            o["spec"] = json!({});
            o["status"] = json!({});
        }
        _ => {}
    }
    o
}

/// The client closed its end (or sent something, which a watching client never does):
/// kube-apiserver's handler sees the request context cancelled and ends the watch.
fn client_gone(conn: &Conn) -> bool {
    let t = conn.tcp();
    if t.set_nonblocking(true).is_err() {
        return true;
    }
    let mut b = [0u8; 1];
    let gone = match t.peek(&mut b) {
        Ok(_) => true,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
        Err(_) => true,
    };
    let _ = t.set_nonblocking(false);
    gone
}

/// The end of a chunked watch body; the connection can carry the next request.
fn end_stream(sh: &Shared, conn: &mut Conn) -> Next {
    match chunk(sh, conn, b"") {
        Ok(()) => Next::KeepAlive,
        Err(_) => Next::Close,
    }
}

fn serve_watch(
    sh: &Shared,
    conn: &mut Conn,
    req: &Req,
    resource: &str,
    sel: &Selection,
    fault: Option<FaultAction>,
) -> Next {
    let timeout = Duration::from_secs(
        req.query
            .get("timeoutSeconds")
            .and_then(|t| t.parse().ok())
            .unwrap_or(1800),
    );
    let bookmarks = req
        .query
        .get("allowWatchBookmarks")
        .is_some_and(|v| v == "true");
    let rv_param = req
        .query
        .get("resourceVersion")
        .cloned()
        .unwrap_or_default();
    let (kind, api_version) = kind_of(resource);
    let started = Instant::now();
    let deadline = started + timeout;
    // kube-apiserver's watch cache (cacher/cache_watcher.go nextBookmarkTime): a bookmark
    // every bookmarkFrequency (a minute), and one 2 s before the watch's deadline.
    let pre_deadline = deadline.checked_sub(Duration::from_secs(2));
    let next_bookmark = |now: Instant, pre_sent: bool| -> Option<Instant> {
        if !bookmarks {
            return None;
        }
        let periodic = sh.opts.bookmark_every.map(|e| now + e);
        let pre = pre_deadline.filter(|p| !pre_sent && *p > now);
        match (periodic, pre) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    };

    // Too old? Decide before the 200 when configured to answer HTTP 410.
    let mut cursor: u64;
    let mut initial: Vec<Vec<u8>> = Vec::new();
    {
        let st = sh.state.lock().unwrap();
        if rv_param.is_empty() || rv_param == "0" {
            cursor = st.rv;
            for ((r, _), o) in &st.objects {
                if r == resource && sel.matches(o) {
                    initial.push(event_line("ADDED", o));
                }
            }
        } else {
            cursor = rv_param.parse().unwrap_or(0);
            if cursor < st.compacted && sh.opts.gone_as_http {
                let msg = format!("too old resource version: {cursor} ({})", st.compacted);
                drop(st);
                return status(sh, conn, 410, "Expired", &msg);
            }
        }
    }
    let head =
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    if write_counted(sh, conn, head.as_bytes())
        .and_then(|_| conn.flush())
        .is_err()
    {
        return Next::Close;
    }
    let mut sent = initial.len();
    let gone_line = |cursor: u64, compacted: u64| {
        event_line(
            "ERROR",
            &status_body(
                410,
                "Expired",
                &format!("too old resource version: {cursor} ({compacted})"),
            ),
        )
    };
    if send_lines(sh, conn, &initial).is_err() {
        return Next::Close;
    }
    let mut fault = fault;
    // "after N events" counts from when the fault was picked up.
    let mut base = 0usize;
    let mut pre_sent = false;
    let mut bookmark_at = next_bookmark(started, pre_sent);
    loop {
        if fault.is_none() {
            fault = take_fault_where(sh, On::Watch, resource, is_stream_fault);
            base = sent;
        }
        let since = sent - base;
        // Faults that trigger after N events.
        match &fault {
            Some(FaultAction::ErrorGone) => {
                if chunk(sh, conn, &gone_line(cursor, cursor + 1)).is_err() {
                    return Next::Close;
                }
                return end_stream(sh, conn);
            }
            Some(FaultAction::CutMidChunk { after }) if since >= *after => {
                let line = event_line(
                    "ADDED",
                    &json!({"kind": kind, "metadata": {"name": "partial"}}),
                );
                let _ = write_counted(sh, conn, format!("{:x}\r\n", line.len()).as_bytes());
                let _ = write_counted(sh, conn, &line[..line.len() / 2]);
                let _ = conn.flush();
                conn.cut();
                return Next::Close;
            }
            Some(FaultAction::Garbage { after }) if since >= *after => {
                // The client must give up on this stream; end it like a server would.
                if chunk(sh, conn, b"this is not json {\n").is_err() {
                    return Next::Close;
                }
                return end_stream(sh, conn);
            }
            Some(FaultAction::StatusLine { after, code }) if since >= *after => {
                let mut l = serde_json::to_vec(&status_body(
                    *code,
                    "InternalError",
                    "injected status line",
                ))
                .unwrap();
                l.push(b'\n');
                if chunk(sh, conn, &l).is_err() {
                    return Next::Close;
                }
                return end_stream(sh, conn);
            }
            Some(FaultAction::EndStream { after }) if since >= *after => {
                return end_stream(sh, conn);
            }
            _ => {}
        }
        let mut lines = Vec::new();
        {
            let mut st = sh.state.lock().unwrap();
            loop {
                let now = Instant::now();
                if sh.stop.load(Ordering::SeqCst) || now >= deadline {
                    drop(st);
                    return end_stream(sh, conn);
                }
                if client_gone(conn) {
                    st.requests
                        .push(format!("WATCH {resource} ended: the client went away"));
                    return Next::Close;
                }
                if cursor < st.compacted {
                    let l = gone_line(cursor, st.compacted);
                    drop(st);
                    if chunk(sh, conn, &l).is_err() {
                        return Next::Close;
                    }
                    return end_stream(sh, conn);
                }
                let from = cursor;
                for h in st.history.iter().filter(|h| h.rv > from) {
                    cursor = h.rv;
                    if h.resource != resource {
                        continue;
                    }
                    let was = h.old.as_ref().is_some_and(|o| sel.matches(o));
                    let is = sel.matches(&h.new);
                    let t = match (h.type_, was, is) {
                        ("ADDED", _, true) => "ADDED",
                        ("MODIFIED", true, true) => "MODIFIED",
                        ("MODIFIED", false, true) => "ADDED",
                        ("MODIFIED", true, false) => "DELETED",
                        ("DELETED", true, _) => "DELETED",
                        _ => continue,
                    };
                    lines.push(event_line(t, &h.new));
                    // Respect "after N" faults exactly.
                    if matches!(&fault, Some(FaultAction::CutMidChunk { after } | FaultAction::Garbage { after }
                        | FaultAction::StatusLine { after, .. } | FaultAction::EndStream { after }) if since + lines.len() >= *after)
                    {
                        break;
                    }
                }
                if !lines.is_empty() {
                    break;
                }
                if bookmark_at.is_some_and(|at| now >= at) {
                    if pre_deadline.is_some_and(|p| now >= p) {
                        pre_sent = true;
                    }
                    bookmark_at = next_bookmark(now, pre_sent);
                    cursor = cursor.max(st.rv);
                    lines.push(event_line(
                        "BOOKMARK",
                        &bookmark_object(kind, api_version, cursor),
                    ));
                    break;
                }
                if fault.is_none()
                    && st.faults.iter().any(|f| {
                        f.on != On::List
                            && f.resource.is_none_or(|r| r == resource)
                            && is_stream_fault(&f.action)
                    })
                {
                    break;
                }
                st = sh.cv.wait_timeout(st, Duration::from_millis(50)).unwrap().0;
            }
        }
        sent += lines.len();
        if send_lines(sh, conn, &lines).is_err() {
            return Next::Close;
        }
    }
}
