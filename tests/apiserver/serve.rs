//! The test API server's request handling: TLS setup, a connection's request loop, auth,
//! routing to discovery, LIST or WATCH, and the injected faults that act on a request. The
//! HTTP layer is in `http.rs`, paths and selectors in `selectors.rs`, LIST pages and WATCH
//! streams in `list_watch.rs`; state and the test-facing API are in `mod.rs`.

use std::collections::BTreeMap;
use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::json;

use super::controlplane;
use super::http::{Conn, Next, Req, read_request, respond, status, write_counted};
use super::list_watch::{serve_list, serve_watch};
use super::selectors::{Selection, discovery, field_selector, label_selector, route};
use super::{Certs, Fault, FaultAction, On, Shared, resource_static, status_body};

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

/// Faults that act on an open watch stream (picked up by streams already open).
pub(super) fn is_stream_fault(a: &FaultAction) -> bool {
    matches!(
        a,
        FaultAction::ErrorGone
            | FaultAction::CutMidChunk { .. }
            | FaultAction::Garbage { .. }
            | FaultAction::StatusLine { .. }
            | FaultAction::EndStream { .. }
    )
}

pub(super) fn take_fault_where(
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
            "{} {} {:?} auth={}",
            req.method,
            req.path,
            q,
            if ok { "ok" } else { "denied" }
        ));
        (ok, st.crds_installed)
    };
    if !authorized {
        return status(sh, conn, 401, "Unauthorized", "Unauthorized");
    }
    if let Some(rest) = req.path.strip_prefix(controlplane::PREFIX) {
        return controlplane::serve(sh, conn, req, rest, watch);
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
