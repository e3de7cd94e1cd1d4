//! The manifests source (`--manifests DIR`, DESIGN §2): a directory of `*.yaml`, `*.yml`
//! and `*.json` files standing in for the API server. Owns reading and parsing the files
//! and turning each scan into the same store changes and events as the watch; polling
//! every [`ManifestsConfig::poll_interval`] (≤ 1 s).
//!
//! Rules: a file holds YAML documents (`---`) or JSON, each an object or a `List` of
//! objects (`kind: List` or `<Kind>List`). The same field selectors as the watch apply
//! (Pods of this node, the ExternalNode named like the node in its namespace). Missing
//! `resourceVersion`, `uid` and `creationTimestamp` are filled in, and an object whose
//! content did not change keeps them (so it produces no event). A file that does not parse
//! keeps its previous objects (an editor half-way through a save must not delete them);
//! a bad document is reported with file name and document index and skipped; neither
//! disturbs other files. When two files define the same object, the first file (by name)
//! wins and the duplicate is reported.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use serde_json::Value;
use sha1::{Digest, Sha1};

use super::crd::{ExternalNode, TrafficControl};
use super::source::{Event, KindStatus, Watched, apply_delta, send, set_status};
use super::store::Stores;
use super::types::{Kind, Namespace, Pod};
use super::watch::Delta;
use super::yaml;

/// Where and how to poll.
#[derive(Debug, Clone)]
pub struct ManifestsConfig {
    pub dir: PathBuf,
    pub node_name: String,
    pub external_node_namespace: String,
    pub poll_interval: Duration,
}

impl ManifestsConfig {
    pub fn new(dir: PathBuf, node_name: &str, external_node_namespace: &str) -> ManifestsConfig {
        ManifestsConfig {
            dir,
            node_name: node_name.to_string(),
            external_node_namespace: external_node_namespace.to_string(),
            poll_interval: Duration::from_millis(500),
        }
    }
}

/// One parsed object: its kind, key and JSON text. Kept as text, not as a `Value`, while
/// the file is unchanged: at 5,000 Pods the text is a few MB where `Value` trees were
/// tens of MB.
#[derive(Debug, Clone, PartialEq)]
pub struct RawObject {
    pub kind: Kind,
    pub key: String,
    /// `spec.nodeName` of a Pod (the field selector's input).
    pub node: Option<String>,
    pub json: String,
}

/// A file's parse: its good objects and the errors of its bad documents.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedFile {
    pub objects: Vec<RawObject>,
    pub errors: Vec<String>,
}

/// Parse one manifests file. `Err` = the file as a whole is unreadable (syntax).
pub fn parse_file(name: &str, text: &str) -> Result<ParsedFile, String> {
    let docs = if name.ends_with(".json") {
        vec![serde_json::from_str::<Value>(text).map_err(|e| format!("{name}: {e}"))?]
    } else {
        yaml::parse_documents(text).map_err(|e| format!("{name}: {e}"))?
    };
    let mut out = ParsedFile::default();
    for (i, doc) in docs.into_iter().enumerate() {
        if doc.is_null() {
            continue;
        }
        let is_list = doc
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| k.ends_with("List"))
            && doc.get("items").is_some_and(Value::is_array);
        let items = if is_list {
            match doc {
                Value::Object(mut m) => match m.remove("items") {
                    Some(Value::Array(a)) => a,
                    _ => Vec::new(),
                },
                _ => Vec::new(),
            }
            .into_iter()
            .enumerate()
            .map(|(j, v)| (format!("document {i} item {j}"), v))
            .collect()
        } else {
            vec![(format!("document {i}"), doc)]
        };
        for (at, v) in items {
            match raw_object(v) {
                Ok(o) => out.objects.push(o),
                Err(e) => out.errors.push(format!("{name} {at}: {e}")),
            }
        }
    }
    Ok(out)
}

fn raw_object(mut v: Value) -> Result<RawObject, String> {
    let api_version = v.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind_name = v.get("kind").and_then(Value::as_str).unwrap_or("");
    let kind = Kind::from_type(api_version, kind_name).ok_or_else(|| {
        format!("unsupported apiVersion/kind {api_version:?}/{kind_name:?} (Namespace, Pod v1; TrafficControl crd.antrea.io/v1alpha2; ExternalNode crd.antrea.io/v1alpha1)")
    })?;
    let meta = v
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .ok_or("metadata: required")?;
    let name = meta
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or("metadata.name: required")?
        .to_string();
    // As `kubectl apply` does: namespaced kinds default to "default", cluster-scoped
    // kinds have none.
    let namespace = if kind.namespaced() {
        let ns = meta
            .get("namespace")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .unwrap_or("default")
            .to_string();
        meta.insert("namespace".into(), Value::String(ns.clone()));
        ns
    } else {
        meta.remove("namespace");
        String::new()
    };
    let node = (kind == Kind::Pod)
        .then(|| v.pointer("/spec/nodeName").and_then(Value::as_str))
        .flatten()
        .map(str::to_string);
    Ok(RawObject {
        kind,
        key: super::types::object_key(&namespace, &name),
        node,
        json: v.to_string(),
    })
}

/// Stamped metadata of an object we have emitted, kept while its content (known by the
/// SHA-1 of its JSON text) is unchanged.
#[derive(Debug, Clone)]
struct Stamp {
    digest: [u8; 20],
    resource_version: String,
    uid: String,
    created: String,
}

/// Scanner state across polls.
#[derive(Debug, Default)]
pub struct Scanner {
    files: BTreeMap<String, (Vec<u8>, ParsedFile)>,
    stamps: HashMap<(Kind, String), Stamp>,
    next_rv: u64,
    reported: HashMap<String, String>,
    /// Errors of the last full scan, repeated while nothing changes.
    last_errors: Vec<String>,
    scanned_once: bool,
}

impl Scanner {
    /// Like [`Scanner::scan`], but `None` when no file was added, removed or changed since
    /// the last scan: an idle poll then costs a directory read and a byte comparison, not
    /// a decode and store diff of every object (at 5,000 Pods that is most of a core).
    ///
    /// Each stamped object goes to `visit` (kinds in [`Kind::ALL`] order) instead of into
    /// a collection: the caller decodes each at once, so a scan never holds every object
    /// as a `Value` tree.
    pub fn visit_if_changed(
        &mut self,
        cfg: &ManifestsConfig,
        now: SystemTime,
        visit: impl FnMut(Kind, Value),
    ) -> Option<Vec<String>> {
        let (seen, errors) = read_files(cfg);
        let unchanged = self.scanned_once
            && errors.is_empty()
            && seen.len() == self.files.len()
            && seen
                .iter()
                .all(|(n, b)| self.files.get(n).is_some_and(|(old, _)| old == b));
        if unchanged {
            return None;
        }
        Some(self.visit(cfg, now, (seen, errors), visit))
    }

    /// Read the directory; returns the desired objects per kind (already filtered and
    /// stamped) and the errors of this scan.
    pub fn scan(
        &mut self,
        cfg: &ManifestsConfig,
        now: SystemTime,
    ) -> (BTreeMap<Kind, Vec<Value>>, Vec<String>) {
        let mut out: BTreeMap<Kind, Vec<Value>> =
            Kind::ALL.iter().map(|k| (*k, Vec::new())).collect();
        let files = read_files(cfg);
        let errors = self.visit(cfg, now, files, |kind, v| {
            out.entry(kind).or_default().push(v)
        });
        (out, errors)
    }

    /// One scan of the files just read, handing each stamped object to `visit`; returns
    /// the scan's errors.
    fn visit(
        &mut self,
        cfg: &ManifestsConfig,
        now: SystemTime,
        (seen, mut errors): (BTreeMap<String, Vec<u8>>, Vec<String>),
        mut visit: impl FnMut(Kind, Value),
    ) -> Vec<String> {
        self.files.retain(|name, _| seen.contains_key(name));
        for (name, bytes) in seen {
            if self.files.get(&name).is_some_and(|(b, _)| *b == bytes) {
                continue;
            }
            let parsed = String::from_utf8(bytes.clone())
                .map_err(|_| format!("{name}: not UTF-8"))
                .and_then(|t| parse_file(&name, &t));
            match parsed {
                Ok(p) => {
                    self.files.insert(name, (bytes, p));
                }
                // Keep the previous good parse (or nothing) of a broken file.
                Err(e) => errors.push(e),
            }
        }
        let mut desired: BTreeMap<Kind, BTreeMap<String, String>> = BTreeMap::new();
        let mut owner: HashMap<(Kind, String), String> = HashMap::new();
        for (name, (_, parsed)) in &self.files {
            errors.extend(parsed.errors.iter().cloned());
            for o in &parsed.objects {
                if !selected(cfg, o) {
                    continue;
                }
                let id = (o.kind, o.key.clone());
                if let Some(first) = owner.get(&id) {
                    errors.push(format!(
                        "{name}: {} {} is already defined in {first}; ignored",
                        o.kind, o.key
                    ));
                    continue;
                }
                owner.insert(id, name.clone());
                desired
                    .entry(o.kind)
                    .or_default()
                    .insert(o.key.clone(), o.json.clone());
            }
        }
        self.stamps.retain(|id, _| owner.contains_key(id));
        for kind in Kind::ALL {
            for (key, json) in desired.remove(&kind).unwrap_or_default() {
                visit(kind, self.stamp(kind, key, &json, now));
            }
        }
        self.scanned_once = true;
        self.last_errors = errors.clone();
        errors
    }

    fn stamp(&mut self, kind: Kind, key: String, json: &str, now: SystemTime) -> Value {
        let id = (kind, key);
        let digest: [u8; 20] = Sha1::digest(json.as_bytes()).into();
        let prev = self.stamps.get(&id);
        let s = match prev {
            Some(s) if s.digest == digest => s.clone(),
            _ => {
                self.next_rv += 1;
                let (uid, created) = match prev {
                    Some(p) => (p.uid.clone(), p.created.clone()),
                    None => (
                        format!("manifest-{}-{}", kind.plural(), self.next_rv),
                        rfc3339(now),
                    ),
                };
                Stamp {
                    digest,
                    resource_version: self.next_rv.to_string(),
                    uid,
                    created,
                }
            }
        };
        self.stamps.insert(id, s.clone());
        // The text is ours (serialized from a Value at parse time): it parses back.
        let mut v: Value = serde_json::from_str(json).unwrap_or(Value::Null);
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("resourceVersion".into(), Value::String(s.resource_version));
            m.entry("uid").or_insert(Value::String(s.uid));
            m.entry("creationTimestamp")
                .or_insert(Value::String(s.created));
        }
        v
    }

    /// Errors to log now: only those not already reported by the previous scan.
    fn fresh_errors(&mut self, errors: Vec<String>) -> Vec<String> {
        let mut now = HashMap::new();
        let mut fresh = Vec::new();
        for e in errors {
            if !self.reported.contains_key(&e) {
                fresh.push(e.clone());
            }
            now.insert(e, String::new());
        }
        self.reported = now;
        fresh
    }
}

/// The manifests files of the directory (`*.yaml`, `*.yml`, `*.json`, not hidden) by name,
/// and the errors reading them.
fn read_files(cfg: &ManifestsConfig) -> (BTreeMap<String, Vec<u8>>, Vec<String>) {
    let mut errors = Vec::new();
    let mut seen = BTreeMap::new();
    match std::fs::read_dir(&cfg.dir) {
        Err(e) => errors.push(format!("{}: {e}", cfg.dir.display())),
        Ok(rd) => {
            for entry in rd.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let wanted = [".yaml", ".yml", ".json"].iter().any(|s| name.ends_with(s));
                if !wanted || name.starts_with('.') {
                    continue;
                }
                match std::fs::read(entry.path()) {
                    Ok(bytes) => {
                        seen.insert(name, bytes);
                    }
                    Err(e) => errors.push(format!("{name}: {e}")),
                }
            }
        }
    }
    (seen, errors)
}

fn selected(cfg: &ManifestsConfig, o: &RawObject) -> bool {
    match o.kind {
        Kind::Pod => o.node.as_deref() == Some(cfg.node_name.as_str()),
        Kind::ExternalNode => {
            o.key == super::types::object_key(&cfg.external_node_namespace, &cfg.node_name)
        }
        Kind::Namespace | Kind::TrafficControl => true,
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` (RFC 3339, UTC), as the API server writes creationTimestamp.
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// One scan's objects, decoded as they come.
#[derive(Default)]
struct Decoded {
    namespaces: Vec<Namespace>,
    pods: Vec<Pod>,
    traffic_controls: Vec<TrafficControl>,
    external_nodes: Vec<ExternalNode>,
    errors: Vec<String>,
}

impl Decoded {
    fn add(&mut self, kind: Kind, v: Value) {
        fn push<T: Watched>(v: Value, out: &mut Vec<T>, errors: &mut Vec<String>) {
            match T::decode(v) {
                Ok(o) => out.push(o),
                Err(e) => errors.push(e.to_string()),
            }
        }
        match kind {
            Kind::Namespace => push(v, &mut self.namespaces, &mut self.errors),
            Kind::Pod => push(v, &mut self.pods, &mut self.errors),
            Kind::TrafficControl => push(v, &mut self.traffic_controls, &mut self.errors),
            Kind::ExternalNode => push(v, &mut self.external_nodes, &mut self.errors),
        }
    }

    /// Apply to the stores; false when stopping. Namespaces first, so that a Pod's
    /// namespace labels are known when its event arrives.
    fn apply(self, stores: &Stores, events: &Sender<Event>, stop: &Receiver<()>) -> bool {
        apply_delta(
            &stores.namespaces,
            Delta::Replace(self.namespaces),
            events,
            stop,
        ) && apply_delta(&stores.pods, Delta::Replace(self.pods), events, stop)
            && apply_delta(
                &stores.traffic_controls,
                Delta::Replace(self.traffic_controls),
                events,
                stop,
            )
            && apply_delta(
                &stores.external_nodes,
                Delta::Replace(self.external_nodes),
                events,
                stop,
            )
    }
}

/// The poll loop of the `manifests` thread; returns on stop.
pub(crate) fn run(
    cfg: &ManifestsConfig,
    stores: &Stores,
    events: &Sender<Event>,
    stop: &Receiver<()>,
    status: &std::sync::Arc<std::sync::Mutex<BTreeMap<Kind, KindStatus>>>,
) {
    let mut scanner = Scanner::default();
    let mut first = true;
    loop {
        let mut decoded = Decoded::default();
        let scan = scanner.visit_if_changed(cfg, SystemTime::now(), |k, v| decoded.add(k, v));
        let errors = match scan {
            Some(mut errors) => {
                errors.append(&mut decoded.errors);
                if !decoded.apply(stores, events, stop) {
                    return;
                }
                // Decode errors found while applying belong to this state too.
                scanner.last_errors = errors.clone();
                errors
            }
            None => scanner.last_errors.clone(),
        };
        for e in scanner.fresh_errors(errors.clone()) {
            log::warn!("manifests dir={} err={e}", cfg.dir.display());
        }
        for kind in Kind::ALL {
            set_status(status, kind, |s| {
                s.synced = true;
                s.last_error = (!errors.is_empty()).then(|| errors.join("; "));
            });
        }
        if first {
            first = false;
            for kind in Kind::ALL {
                if !send(events, stop, Event::Synced(kind)) {
                    return;
                }
            }
        }
        match stop.recv_timeout(cfg.poll_interval) {
            Err(RecvTimeoutError::Timeout) => {}
            _ => return,
        }
    }
}

/// For tests and tools: the directory's objects as one scan would see them.
pub fn scan_once(cfg: &ManifestsConfig) -> (BTreeMap<Kind, Vec<Value>>, Vec<String>) {
    Scanner::default().scan(cfg, SystemTime::now())
}

#[cfg(test)]
mod tests;
