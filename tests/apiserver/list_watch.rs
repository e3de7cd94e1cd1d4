//! The test API server's answers to a collection: LIST pages over consistent snapshots
//! (limit/continue), and chunked WATCH streams with history, bookmarks, 410s and the
//! stream faults.

use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::http::{Conn, Next, Req, respond_bytes, status, write_counted};
use super::selectors::Selection;
use super::serve::{is_stream_fault, take_fault_where};
use super::{Chunking, FaultAction, On, Shared, Snapshot, kind_of, status_body};

pub(super) fn serve_list(
    sh: &Shared,
    conn: &mut Conn,
    req: &Req,
    resource: &str,
    sel: &Selection,
) -> Next {
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

pub(super) fn chunk(sh: &Shared, conn: &mut Conn, data: &[u8]) -> io::Result<()> {
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
pub(super) fn client_gone(conn: &Conn) -> bool {
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
pub(super) fn end_stream(sh: &Shared, conn: &mut Conn) -> Next {
    match chunk(sh, conn, b"") {
        Ok(()) => Next::KeepAlive,
        Err(_) => Next::Close,
    }
}

pub(super) fn serve_watch(
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
