//! The antrea-controller's controlplane API (`controlplane.antrea.io/v1beta2`) as the test
//! server serves it to a VM agent: watches of `networkpolicies`, `appliedtogroups` and
//! `addressgroups` with `fieldSelector=nodeName=<ns>/<en>` (or `metadata.name=`; any other
//! field label is 400, `pkg/apis/controlplane/v1beta2/conversion.go:28-40`), JSON, one
//! compact event per line, `Content-Type: application/json` (no `;stream=watch`).
//!
//! Every watch starts with ADDED for every object in the watcher's span and one BOOKMARK,
//! whatever `resourceVersion` says (`pkg/apiserver/storage/ram/store.go:229-275`,
//! `watch.go:139-149`); the BOOKMARK rotates through the four shapes Antrea servers have
//! sent (`watch.go:33-68`, #8124). Then: ADDED/DELETED on span changes
//! (`store/util.go:25-47`), MODIFIED with the full NetworkPolicy (`store/networkpolicy.go:
//! 64-65`), MODIFIED with an `AddressGroupPatch`/`AppliedToGroupPatch` for a group's member
//! changes (`store/addressgroup.go:65-70,121-140`, `store/appliedtogroup.go:55-102`), DELETED
//! with metadata only (NetworkPolicy: name, uid, generation, sourceRef). A watcher sees only
//! events whose object spans its node. Objects are kept as JSON text in Go's field order
//! (`cp_fixtures` builds them). Tests can close watches, refuse new ones (503: the
//! controller away), and send raw lines (bad ones, a patch of an unknown group).
//!
//! Antrea paths are at `fc70f2bb70`; `docs/networkpolicy.md` lists them.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;

use super::http::{Conn, Next, Req, status, write_counted};
use super::list_watch::{chunk, client_gone, end_stream};
use super::{ApiServer, Shared};

/// Every controlplane path starts with this.
pub const PREFIX: &str = "/apis/controlplane.antrea.io/v1beta2/";
pub const API_VERSION: &str = "controlplane.antrea.io/v1beta2";
pub const POLICIES: &str = "networkpolicies";
pub const APPLIED_TO: &str = "appliedtogroups";
pub const ADDRESS: &str = "addressgroups";

fn kind(resource: &str) -> &'static str {
    match resource {
        POLICIES => "NetworkPolicy",
        APPLIED_TO => "AppliedToGroup",
        _ => "AddressGroup",
    }
}

/// The four BOOKMARK `object.metadata` shapes (reference §2.4), given the store's rv.
pub fn bookmark_metadata(shape: usize, rv: u64) -> String {
    match shape % 4 {
        // Antrea <= 2.4.x.
        0 => r#"{"creationTimestamp":null}"#.to_string(),
        // 2.5.0-2.5.2, 2.6.0-2.6.2.
        1 => "{}".to_string(),
        // 2.5.3, 2.6.3, 2.7.0+.
        2 => format!(r#"{{"resourceVersion":"{rv}"}}"#),
        // The same, asked with sendInitialEvents=true&allowWatchBookmarks=true.
        _ => format!(
            r#"{{"resourceVersion":"{rv}","annotations":{{"k8s.io/initial-events-end":"true"}}}}"#
        ),
    }
}

/// One object as stored.
#[derive(Clone, Debug)]
enum Body {
    /// A NetworkPolicy's whole JSON text.
    Policy(String),
    /// A group's members, each a JSON text.
    Group(Vec<String>),
}

#[derive(Clone, Debug)]
struct Object {
    body: Body,
    span: BTreeSet<String>,
}

/// One event as recorded: which watchers see it, and its line.
struct Entry {
    resource: String,
    name: String,
    nodes: BTreeSet<String>,
    line: String,
}

/// The controlplane part of the server's state.
#[derive(Default)]
pub struct Cp {
    objects: BTreeMap<(String, String), Object>,
    log: Vec<Entry>,
    /// Per resource: each store counts its own resourceVersion.
    rv: BTreeMap<String, u64>,
    next_bookmark: usize,
    /// The bookmark shapes sent, in order.
    bookmarks_sent: Vec<(String, usize)>,
    /// Watches of these resources get 503.
    held: BTreeSet<String>,
    /// Bumping a resource's generation ends its open watches.
    close_gen: BTreeMap<String, u64>,
    watches: Vec<String>,
    /// `NetworkPolicyStatus` bodies POSTed, in order: (policy name, body).
    statuses: Vec<(String, Value)>,
    /// Status POSTs get 503 while set.
    refuse_status: bool,
}

impl Cp {
    fn bump(&mut self, resource: &str) -> u64 {
        let rv = self.rv.entry(resource.to_string()).or_insert(10);
        *rv += 1;
        *rv
    }

    fn push(&mut self, resource: &str, name: &str, nodes: BTreeSet<String>, line: String) {
        self.bump(resource);
        self.log.push(Entry {
            resource: resource.to_string(),
            name: name.to_string(),
            nodes,
            line,
        });
    }
}

fn event(type_: &str, object: &str) -> String {
    format!(r#"{{"type":"{type_}","object":{object}}}"#)
}

fn group_text(resource: &str, name: &str, members: &[String]) -> String {
    let mut s = format!(
        r#"{{"kind":"{}","apiVersion":"{API_VERSION}","metadata":{{"name":"{name}","uid":"{name}"}}"#,
        kind(resource)
    );
    if !members.is_empty() {
        s.push_str(&format!(r#","groupMembers":[{}]"#, members.join(",")));
    }
    s.push('}');
    s
}

/// A group's MODIFIED: the patch object (`addedGroupMembers`, `removedGroupMembers`, both
/// omitted when empty).
pub fn patch_text(resource: &str, name: &str, added: &[String], removed: &[String]) -> String {
    let mut s = format!(
        r#"{{"kind":"{}Patch","apiVersion":"{API_VERSION}","metadata":{{"name":"{name}","uid":"{name}"}}"#,
        kind(resource)
    );
    if !added.is_empty() {
        s.push_str(&format!(r#","addedGroupMembers":[{}]"#, added.join(",")));
    }
    if !removed.is_empty() {
        s.push_str(&format!(
            r#","removedGroupMembers":[{}]"#,
            removed.join(",")
        ));
    }
    s.push('}');
    s
}

fn deleted_text(resource: &str, name: &str, body: &Body) -> String {
    match body {
        Body::Policy(text) => {
            let v: Value = serde_json::from_str(text).unwrap();
            let g = v["metadata"]["generation"].as_i64().unwrap_or(0);
            let r = &v["sourceRef"];
            format!(
                r#"{{"kind":"NetworkPolicy","apiVersion":"{API_VERSION}","metadata":{{"name":"{name}","uid":"{name}","generation":{g}}},"sourceRef":{{"type":{},"namespace":{},"name":{},"uid":{}}}}}"#,
                r["type"], r["namespace"], r["name"], r["uid"]
            )
        }
        Body::Group(_) => format!(
            r#"{{"kind":"{}","apiVersion":"{API_VERSION}","metadata":{{"name":"{name}","uid":"{name}"}}}}"#,
            kind(resource)
        ),
    }
}

fn object_text(resource: &str, name: &str, o: &Object) -> String {
    match &o.body {
        Body::Policy(t) => t.clone(),
        Body::Group(m) => group_text(resource, name, m),
    }
}

fn span(nodes: &[&str]) -> BTreeSet<String> {
    nodes.iter().map(|s| s.to_string()).collect()
}

fn name_of(text: &str) -> String {
    let v: Value = serde_json::from_str(text).unwrap();
    v["metadata"]["name"].as_str().unwrap().to_string()
}

/// What tests do to the controlplane.
impl ApiServer {
    fn cp(&self) -> std::sync::MutexGuard<'_, Cp> {
        self.shared.cp.lock().unwrap()
    }

    fn cp_changed(&self) {
        self.shared.cp_cv.notify_all();
    }

    /// A NetworkPolicy (its JSON text) spanning `nodes`: ADDED to them.
    pub fn cp_add_policy(&self, text: &str, nodes: &[&str]) {
        let name = name_of(text);
        let mut cp = self.cp();
        cp.objects.insert(
            (POLICIES.into(), name.clone()),
            Object {
                body: Body::Policy(text.to_string()),
                span: span(nodes),
            },
        );
        cp.push(POLICIES, &name, span(nodes), event("ADDED", text));
        drop(cp);
        self.cp_changed();
    }

    /// A new version of a known NetworkPolicy: MODIFIED (the full object) to its span.
    pub fn cp_modify_policy(&self, text: &str) {
        let name = name_of(text);
        let mut cp = self.cp();
        let o = cp
            .objects
            .get_mut(&(POLICIES.into(), name.clone()))
            .unwrap();
        o.body = Body::Policy(text.to_string());
        let nodes = o.span.clone();
        cp.push(POLICIES, &name, nodes, event("MODIFIED", text));
        drop(cp);
        self.cp_changed();
    }

    /// A group (`appliedtogroups` or `addressgroups`) with these members (JSON texts,
    /// `cp_fixtures::ee_member`) spanning `nodes`: ADDED to them.
    pub fn cp_add_group(&self, resource: &str, name: &str, members: &[String], nodes: &[&str]) {
        let mut cp = self.cp();
        cp.objects.insert(
            (resource.into(), name.into()),
            Object {
                body: Body::Group(members.to_vec()),
                span: span(nodes),
            },
        );
        cp.push(
            resource,
            name,
            span(nodes),
            event("ADDED", &group_text(resource, name, members)),
        );
        drop(cp);
        self.cp_changed();
    }

    /// Members added and removed: MODIFIED with the group's patch to its span.
    pub fn cp_patch_group(&self, resource: &str, name: &str, added: &[String], removed: &[String]) {
        let mut cp = self.cp();
        let o = cp.objects.get_mut(&(resource.into(), name.into())).unwrap();
        let Body::Group(members) = &mut o.body else {
            panic!("{resource}/{name} is not a group");
        };
        members.retain(|m| !removed.contains(m));
        members.extend(added.iter().cloned());
        let nodes = o.span.clone();
        let line = event("MODIFIED", &patch_text(resource, name, added, removed));
        cp.push(resource, name, nodes, line);
        drop(cp);
        self.cp_changed();
    }

    /// The object's span becomes `nodes`: ADDED to the nodes that enter it, DELETED to
    /// those that leave (a span change alone).
    pub fn cp_set_span(&self, resource: &str, name: &str, nodes: &[&str]) {
        let mut cp = self.cp();
        let o = cp.objects.get_mut(&(resource.into(), name.into())).unwrap();
        let new = span(nodes);
        let entered: BTreeSet<String> = new.difference(&o.span).cloned().collect();
        let left: BTreeSet<String> = o.span.difference(&new).cloned().collect();
        o.span = new;
        let o = o.clone();
        if !entered.is_empty() {
            let line = event("ADDED", &object_text(resource, name, &o));
            cp.push(resource, name, entered, line);
        }
        if !left.is_empty() {
            let line = event("DELETED", &deleted_text(resource, name, &o.body));
            cp.push(resource, name, left, line);
        }
        drop(cp);
        self.cp_changed();
    }

    /// The object is gone: DELETED (metadata only) to its span.
    pub fn cp_delete(&self, resource: &str, name: &str) {
        let mut cp = self.cp();
        let o = cp.objects.remove(&(resource.into(), name.into())).unwrap();
        let line = event("DELETED", &deleted_text(resource, name, &o.body));
        cp.push(resource, name, o.span, line);
        drop(cp);
        self.cp_changed();
    }

    /// A raw line (without its newline) to `node`'s watches of `resource`.
    pub fn cp_raw(&self, resource: &str, node: &str, line: &str) {
        let name = serde_json::from_str::<Value>(line)
            .ok()
            .and_then(|v| v["object"]["metadata"]["name"].as_str().map(str::to_string))
            .unwrap_or_default();
        self.cp()
            .push(resource, &name, span(&[node]), line.to_string());
        self.cp_changed();
    }

    /// End the open watches of `resource` (every resource: `None`) cleanly, as the
    /// controller does after 2–4 h.
    pub fn cp_close_watches(&self, resource: Option<&str>) {
        let mut cp = self.cp();
        for r in [POLICIES, APPLIED_TO, ADDRESS] {
            if resource.is_none_or(|x| x == r) {
                *cp.close_gen.entry(r.to_string()).or_default() += 1;
            }
        }
        drop(cp);
        self.cp_changed();
    }

    /// While held, new watches of `resource` get 503 (the controller unreachable).
    pub fn cp_hold(&self, resource: &str, held: bool) {
        let mut cp = self.cp();
        if held {
            cp.held.insert(resource.to_string());
        } else {
            cp.held.remove(resource);
        }
    }

    /// The bookmark shapes sent so far (0..4, `bookmark_metadata`), with their resource.
    pub fn cp_bookmarks_sent(&self) -> Vec<(String, usize)> {
        self.cp().bookmarks_sent.clone()
    }

    /// Every controlplane watch request served (`<resource> <fieldSelector>`), refused ones
    /// included.
    /// The `NetworkPolicyStatus` bodies POSTed so far: (policy name from the path, body).
    pub fn cp_statuses(&self) -> Vec<(String, Value)> {
        self.cp().statuses.clone()
    }

    /// Answer status POSTs with 503 (the controller away) while `refuse`.
    pub fn cp_refuse_status(&self, refuse: bool) {
        self.cp().refuse_status = refuse;
    }

    pub fn cp_watches(&self) -> Vec<String> {
        self.cp().watches.clone()
    }
}

/// The parsed field selector: `(nodeName, metadata.name)`.
type Fields = (Option<String>, Option<String>);

fn fields(sel: &str) -> Result<Fields, String> {
    let mut out = (None, None);
    for term in sel.split(',').filter(|t| !t.is_empty()) {
        let (k, v) = term
            .split_once("==")
            .or_else(|| term.split_once('='))
            .ok_or_else(|| format!("invalid selector: '{sel}'; can't understand '{term}'"))?;
        if let Some(label) = k.strip_suffix('!') {
            return Err(format!("field label not supported: {label}"));
        }
        match k {
            "nodeName" => out.0 = Some(v.to_string()),
            "metadata.name" => out.1 = Some(v.to_string()),
            other => return Err(format!("field label not supported: {other}")),
        }
    }
    Ok(out)
}

fn selected(f: &Fields, name: &str, nodes: &BTreeSet<String>) -> bool {
    f.0.as_ref().is_none_or(|n| nodes.contains(n)) && f.1.as_ref().is_none_or(|x| x == name)
}

/// Serve a request under [`PREFIX`]; `rest` is the path after it.
pub(super) fn serve(sh: &Shared, conn: &mut Conn, req: &Req, rest: &str, watch: bool) -> Next {
    if req.method == "POST" {
        return serve_status(sh, conn, req, rest);
    }
    let resource = match rest {
        POLICIES | APPLIED_TO | ADDRESS => rest,
        _ => {
            return status(
                sh,
                conn,
                404,
                "NotFound",
                "the server could not find the requested resource",
            );
        }
    };
    let sel = req.query.get("fieldSelector").cloned().unwrap_or_default();
    {
        let mut cp = sh.cp.lock().unwrap();
        cp.watches.push(format!("{resource} {sel}"));
        if cp.held.contains(resource) {
            drop(cp);
            return status(
                sh,
                conn,
                503,
                "ServiceUnavailable",
                "the antrea-controller is not available (held by the test)",
            );
        }
    }
    if !watch {
        // tether never lists these (a LIST ignores nodeName and returns every group).
        return status(
            sh,
            conn,
            405,
            "MethodNotAllowed",
            "the test controlplane serves watches only",
        );
    }
    let f = match fields(&sel) {
        Ok(f) => f,
        Err(e) => return status(sh, conn, 400, "BadRequest", &e),
    };
    serve_watch(sh, conn, resource, &f)
}

/// `POST networkpolicies/<name>/status` with a `NetworkPolicyStatus` (the agent's
/// `UpdateStatus`, `pkg/apiserver/registry/networkpolicy/networkpolicy/subresources.go`):
/// the controller answers 201 with the body; a body whose `metadata.name` is not the path's,
/// or that is not a NetworkPolicyStatus, is 400, as its `Create` validates.
fn serve_status(sh: &Shared, conn: &mut Conn, req: &Req, rest: &str) -> Next {
    let Some(name) = rest
        .strip_prefix("networkpolicies/")
        .and_then(|r| r.strip_suffix("/status"))
        .filter(|n| !n.is_empty() && !n.contains('/'))
    else {
        return status(
            sh,
            conn,
            405,
            "MethodNotAllowed",
            "POST is only for networkpolicies/<name>/status",
        );
    };
    if sh.cp.lock().unwrap().refuse_status {
        return status(
            sh,
            conn,
            503,
            "ServiceUnavailable",
            "status refused by the test",
        );
    }
    let body: Value = match serde_json::from_slice(&req.body) {
        Ok(v) => v,
        Err(e) => return status(sh, conn, 400, "BadRequest", &format!("body: {e}")),
    };
    if body["metadata"]["name"] != name || body["nodes"].as_array().is_none() {
        return status(
            sh,
            conn,
            400,
            "BadRequest",
            "the NetworkPolicyStatus must name the policy of the path and list nodes",
        );
    }
    sh.cp
        .lock()
        .unwrap()
        .statuses
        .push((name.to_string(), body.clone()));
    let text = body.to_string();
    let head = format!(
        "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        text.len()
    );
    if conn.write_all(head.as_bytes()).is_err() || conn.write_all(text.as_bytes()).is_err() {
        return Next::Close;
    }
    let _ = conn.flush();
    Next::KeepAlive
}

fn serve_watch(sh: &Shared, conn: &mut Conn, resource: &str, f: &Fields) -> Next {
    sh.watches_opened.fetch_add(1, Ordering::SeqCst);
    let (mut cursor, initial, epoch) = {
        let mut cp = sh.cp.lock().unwrap();
        let mut lines: Vec<String> = cp
            .objects
            .iter()
            .filter(|((r, n), o)| r == resource && selected(f, n, &o.span))
            .map(|((r, n), o)| event("ADDED", &object_text(r, n, o)))
            .collect();
        let shape = cp.next_bookmark % 4;
        cp.next_bookmark += 1;
        cp.bookmarks_sent.push((resource.to_string(), shape));
        let rv = *cp.rv.get(resource).unwrap_or(&10);
        lines.push(event(
            "BOOKMARK",
            &format!(
                r#"{{"kind":"{}","apiVersion":"{API_VERSION}","metadata":{}}}"#,
                kind(resource),
                bookmark_metadata(shape, rv)
            ),
        ));
        let epoch = cp.close_gen.get(resource).copied().unwrap_or(0);
        (cp.log.len(), lines, epoch)
    };
    // kube-apiserver's serveWatch adds ";stream=watch" to every media type but JSON.
    let head =
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    if write_counted(sh, conn, head.as_bytes())
        .and_then(|_| conn.flush())
        .is_err()
    {
        return Next::Close;
    }
    let send = |conn: &mut Conn, lines: &[String]| {
        lines
            .iter()
            .all(|l| chunk(sh, conn, format!("{l}\n").as_bytes()).is_ok())
    };
    if !send(conn, &initial) {
        return Next::Close;
    }
    loop {
        let mut lines = Vec::new();
        {
            let mut cp = sh.cp.lock().unwrap();
            loop {
                if sh.stop.load(Ordering::SeqCst)
                    || cp.close_gen.get(resource).copied().unwrap_or(0) != epoch
                {
                    drop(cp);
                    return end_stream(sh, conn);
                }
                if client_gone(conn) {
                    return Next::Close;
                }
                for e in &cp.log[cursor..] {
                    if e.resource == resource && selected(f, &e.name, &e.nodes) {
                        lines.push(e.line.clone());
                    }
                }
                cursor = cp.log.len();
                if !lines.is_empty() {
                    break;
                }
                cp = sh
                    .cp_cv
                    .wait_timeout(cp, Duration::from_millis(50))
                    .unwrap()
                    .0;
            }
        }
        if !send(conn, &lines) {
            return Next::Close;
        }
    }
}
