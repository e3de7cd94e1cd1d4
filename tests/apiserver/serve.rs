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
    Certs, Fault, FaultAction, On, Shared, Snapshot, kind_of, reason_phrase, resource_static,
    status_body,
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

fn read_request(conn: &mut Conn) -> Option<Req> {
    let mut r = BufReader::new(conn);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let target = line.split_whitespace().nth(1)?.to_string();
    let mut bearer = None;
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
    })
}

fn write_counted(sh: &Shared, conn: &mut Conn, data: &[u8]) -> io::Result<()> {
    sh.bytes_sent
        .fetch_add(data.len() as u64, Ordering::Relaxed);
    conn.write_all(data)
}

fn respond(sh: &Shared, conn: &mut Conn, code: u16, body: &Value) {
    respond_bytes(sh, conn, code, &serde_json::to_vec(body).unwrap());
}

fn respond_bytes(sh: &Shared, conn: &mut Conn, code: u16, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        reason_phrase(code),
        body.len()
    );
    let _ = write_counted(sh, conn, head.as_bytes()).and_then(|_| write_counted(sh, conn, body));
    let _ = conn.flush();
    conn.close();
}

fn status(sh: &Shared, conn: &mut Conn, code: u16, reason: &str, message: &str) {
    respond(sh, conn, code, &status_body(code, reason, message));
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
    let _ = sock.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = sock.set_nodelay(true);
    let mut conn = match &sh.tls {
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
    let Some(mut req) = read_request(&mut conn) else {
        return;
    };
    req.client_cert = client_cert;
    serve(sh, &mut conn, &req);
}

fn serve(sh: &Shared, conn: &mut Conn, req: &Req) {
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
    let Some((resource, ns)) = route(&req.path, crds) else {
        return status(
            sh,
            conn,
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
    };
    let fields = match field_selector(
        req.query
            .get("fieldSelector")
            .map(String::as_str)
            .unwrap_or(""),
    ) {
        Ok(f) => f,
        Err(e) => return status(sh, conn, 400, "BadRequest", &e),
    };
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
        Some(FaultAction::Drop) => return conn.cut(),
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
        Some(FaultAction::ExpireContinue) => {
            // Not a continued list: keep the fault for the next one.
            let mut st = sh.state.lock().unwrap();
            st.requests.pop();
            st.faults.push_front(Fault {
                on: On::List,
                resource: Some(resource_static(&resource)),
                action: FaultAction::ExpireContinue,
            });
        }
        other => stream_fault = other,
    }
    if watch {
        sh.watches_opened.fetch_add(1, Ordering::SeqCst);
        serve_watch(sh, conn, req, &resource, &ns, &fields, stream_fault);
    } else {
        serve_list(sh, conn, req, &resource, &ns, &fields);
    }
}

fn serve_list(
    sh: &Shared,
    conn: &mut Conn,
    req: &Req,
    resource: &str,
    ns: &Option<String>,
    fields: &[(String, String)],
) {
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
                .filter(|((r, _), o)| r == resource && matches(o, ns, fields))
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
    respond_bytes(sh, conn, 200, &body);
}

fn chunk(sh: &Shared, conn: &mut Conn, data: &[u8]) -> io::Result<()> {
    write_counted(sh, conn, format!("{:x}\r\n", data.len()).as_bytes())?;
    write_counted(sh, conn, data)?;
    write_counted(sh, conn, b"\r\n")?;
    conn.flush()
}

fn event_line(type_: &str, obj: &Value) -> Vec<u8> {
    let mut v = serde_json::to_vec(&json!({"type": type_, "object": obj})).unwrap();
    v.push(b'\n');
    v
}

#[allow(clippy::too_many_arguments)]
fn serve_watch(
    sh: &Shared,
    conn: &mut Conn,
    req: &Req,
    resource: &str,
    ns: &Option<String>,
    fields: &[(String, String)],
    fault: Option<FaultAction>,
) {
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

    // Too old? Decide before the 200 when configured to answer HTTP 410.
    let mut cursor: u64;
    let mut initial: Vec<Vec<u8>> = Vec::new();
    {
        let st = sh.state.lock().unwrap();
        if rv_param.is_empty() || rv_param == "0" {
            cursor = st.rv;
            for ((r, _), o) in &st.objects {
                if r == resource && matches(o, ns, fields) {
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
    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    if write_counted(sh, conn, head.as_bytes())
        .and_then(|_| conn.flush())
        .is_err()
    {
        return;
    }
    let mut sent = 0usize;
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
    for line in initial {
        if chunk(sh, conn, &line).is_err() {
            return;
        }
        sent += 1;
    }
    let mut fault = fault;
    // "after N events" counts from when the fault was picked up.
    let mut base = 0usize;
    let mut last_bookmark = Instant::now();
    loop {
        if fault.is_none() {
            fault = take_fault_where(sh, On::Watch, resource, is_stream_fault);
            base = sent;
        }
        let since = sent - base;
        // Faults that trigger after N events.
        match &fault {
            Some(FaultAction::ErrorGone) => {
                let _ = chunk(sh, conn, &gone_line(cursor, cursor + 1));
                let _ = chunk(sh, conn, b"");
                return conn.close();
            }
            Some(FaultAction::CutMidChunk { after }) if since >= *after => {
                let line = event_line(
                    "ADDED",
                    &json!({"kind": kind, "metadata": {"name": "partial"}}),
                );
                let _ = write_counted(sh, conn, format!("{:x}\r\n", line.len()).as_bytes());
                let _ = write_counted(sh, conn, &line[..line.len() / 2]);
                let _ = conn.flush();
                return conn.cut();
            }
            Some(FaultAction::Garbage { after }) if since >= *after => {
                let _ = chunk(sh, conn, b"this is not json {\n");
                // The client must give up on this stream; end it like a server would.
                let _ = chunk(sh, conn, b"");
                return conn.close();
            }
            Some(FaultAction::StatusLine { after, code }) if since >= *after => {
                let mut l = serde_json::to_vec(&status_body(
                    *code,
                    "InternalError",
                    "injected status line",
                ))
                .unwrap();
                l.push(b'\n');
                let _ = chunk(sh, conn, &l);
                let _ = chunk(sh, conn, b"");
                return conn.close();
            }
            Some(FaultAction::EndStream { after }) if since >= *after => {
                let _ = chunk(sh, conn, b"");
                return conn.close();
            }
            _ => {}
        }
        let mut lines = Vec::new();
        {
            let mut st = sh.state.lock().unwrap();
            loop {
                if sh.stop.load(Ordering::SeqCst) || started.elapsed() >= timeout {
                    drop(st);
                    let _ = chunk(sh, conn, b"");
                    return conn.close();
                }
                if cursor < st.compacted {
                    let l = gone_line(cursor, st.compacted);
                    drop(st);
                    let _ = chunk(sh, conn, &l);
                    let _ = chunk(sh, conn, b"");
                    return conn.close();
                }
                let from = cursor;
                for h in st.history.iter().filter(|h| h.rv > from) {
                    cursor = h.rv;
                    if h.resource != resource {
                        continue;
                    }
                    let was = h.old.as_ref().is_some_and(|o| matches(o, ns, fields));
                    let is = matches(&h.new, ns, fields);
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
                if bookmarks {
                    if let Some(every) = sh.opts.bookmark_every {
                        if last_bookmark.elapsed() >= every {
                            last_bookmark = Instant::now();
                            cursor = cursor.max(st.rv);
                            lines.push(event_line(
                                "BOOKMARK",
                                &json!({"kind": kind, "apiVersion": api_version, "metadata": {"resourceVersion": cursor.to_string()}}),
                            ));
                            break;
                        }
                    }
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
        for l in lines {
            if chunk(sh, conn, &l).is_err() {
                return;
            }
            sent += 1;
        }
    }
}
