//! The manifests source (`--manifests DIR`, docs/design.md#sources): a directory of
//! `*.yaml`, `*.yml` and `*.json` files standing in for the API server. Owns reading and
//! parsing the files and turning each scan into the same store changes and events as the
//! watch; scanning when inotify says the directory changed (`dirwatch`), polling every
//! [`ManifestsConfig::poll_interval`] only where inotify cannot watch it.
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
//!
//! "I could not read it" never means "it was deleted": a directory that cannot be listed
//! (missing for a moment, an unmounted volume, EACCES, EIO, ELOOP) keeps every object as
//! it is and is retried; a file that exists but cannot be read, is not a regular file or
//! is bigger than 64 MiB keeps the objects of its last good read. Only a file gone from a
//! directory that could be listed loses its objects. FIFOs, sockets and devices (also
//! behind symlinks) are never opened, and a file whose stat key (device, inode, size,
//! mtime, ctime) did not change is not read again.
//!
//! Who may change them: the directory and each file (a symlink's target) must be owned by
//! root or tether's user and not writable by group or others (`crate::files::untrusted`).
//! The directory is checked as well as the files because it says what exists: whoever can
//! write it can delete a file, and so its objects, or add a symlink to any file root owns.
//! A refused directory is one that cannot be listed (nothing changes; `tether run` refuses
//! it at start, [`check_dir`]); a refused file is one that cannot be read (skipped, its
//! last good objects kept, the error logged naming it). The directories above it are not
//! checked (on an install they are root's: `/etc`, `/var/lib`). Whoever could write one
//! could swap the directory for one of their own (refused: it is theirs) or for a symlink
//! to another directory root owns (read as the manifests, the old files' objects deleted);
//! walking every ancestor, and every symlink on the way, is left out for now.

mod dirwatch;
mod parse;

pub use parse::{ParsedFile, RawObject, parse_file, rfc3339};

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, Sender};
use serde_json::Value;
use sha1::{Digest, Sha1};

use super::crd::{ExternalNode, TrafficControl};
use super::feed::{KindStatus, KubeEvent, StatusMap, Watched, apply_delta, send, set_status};
use super::store::Stores;
use super::types::{Kind, Namespace, Pod};
use super::watch::Delta;
use super::yaml;
use crate::files;

/// Where to look, and how often.
#[derive(Debug, Clone)]
pub struct ManifestsConfig {
    pub dir: PathBuf,
    pub node_name: String,
    pub external_node_namespace: String,
    /// How often the directory is polled where inotify cannot watch it.
    pub poll_interval: Duration,
    /// How often it is rescanned anyway while inotify watches it.
    pub rescan_interval: Duration,
}

impl ManifestsConfig {
    pub fn new(dir: PathBuf, node_name: &str, external_node_namespace: &str) -> ManifestsConfig {
        ManifestsConfig {
            dir,
            node_name: node_name.to_string(),
            external_node_namespace: external_node_namespace.to_string(),
            poll_interval: Duration::from_millis(500),
            rescan_interval: Duration::from_secs(30),
        }
    }
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

/// What identifies a file's content without reading it: a file whose key is unchanged
/// (and was not modified just before it was read, see [`FileState::settled`]) is not read
/// again. ctime is in the key because tools that copy files (`rsync -t`, `cp -p`, tar)
/// restore mtime, but never ctime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct StatKey {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl StatKey {
    fn of(m: &std::fs::Metadata) -> StatKey {
        StatKey {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

/// The last read of a file: its key, when it was read (wall clock, compared with the
/// file's mtime), the SHA-1 of what was read and why that content could not be used.
#[derive(Clone, Debug)]
struct Seen {
    stat: StatKey,
    read_at: SystemTime,
    digest: [u8; 20],
    error: Option<String>,
}

/// How long after its last modification a file's stat key is not trusted: file
/// timestamps tick at the kernel's coarse clock (a jiffy), so a file rewritten twice in
/// quick succession with the same size can keep its mtime ("racy git").
const RACY: Duration = Duration::from_secs(2);

/// One file of the directory, across polls.
#[derive(Clone, Debug, Default)]
struct FileState {
    /// The last successful read (good or bad content).
    seen: Option<Seen>,
    /// The last good parse: what the file contributes, kept while it is unreadable or
    /// does not parse (an editor half-way through a save must not delete it).
    good: Option<ParsedFile>,
    /// Why the last poll could not use the file's current content, if it could not.
    error: Option<String>,
}

impl FileState {
    /// True when the file's stat key `stat` is the one last read and the file had not
    /// been modified within [`RACY`] of that read: its content cannot have changed.
    fn settled(&self, stat: &StatKey) -> bool {
        let Some(seen) = &self.seen else { return false };
        let mtime = UNIX_EPOCH
            + Duration::new(
                u64::try_from(stat.mtime.0).unwrap_or(0),
                u32::try_from(stat.mtime.1).unwrap_or(0),
            );
        seen.stat == *stat && seen.read_at.duration_since(mtime).is_ok_and(|d| d >= RACY)
    }
}

/// The directory could not be listed: nothing is known about its files, so every object
/// is kept as it is ("I could not read it" never means "it was deleted").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirError(pub String);

impl std::fmt::Display for DirError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What one poll found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Polled {
    /// The objects changed since the last poll; they were handed to the visitor.
    pub changed: bool,
    /// Every error that holds now: unreadable and skipped files, bad documents,
    /// duplicates.
    pub errors: Vec<String>,
}

/// Scanner state across polls.
#[derive(Debug, Default)]
pub struct Scanner {
    files: BTreeMap<String, FileState>,
    stamps: HashMap<(Kind, String), Stamp>,
    next_rv: u64,
    reported: HashMap<String, String>,
    /// Duplicate definitions found by the last visit (they change only when files do).
    duplicates: Vec<String>,
    scanned_once: bool,
    /// Files read so far (tests check that an unchanged file is not read again).
    reads: u64,
}

impl Scanner {
    /// Poll the directory. When it cannot be listed (missing, EACCES, EIO, ELOOP, not a
    /// directory), `Err` and nothing changes. Otherwise each file is read if it is new or
    /// its stat key changed, and when any file's objects changed (or on the first poll)
    /// every stamped object goes to `visit` (kinds in [`Kind::ALL`] order), so the caller
    /// decodes each at once and a scan never holds every object as a `Value` tree.
    ///
    /// Files that exist but cannot be used (unreadable, not a regular file, too big, not
    /// parseable) keep the objects of their last good read. Only a file that is gone from
    /// a directory that could be listed loses its objects.
    pub fn poll(
        &mut self,
        cfg: &ManifestsConfig,
        now: SystemTime,
        visit: impl FnMut(Kind, Value),
    ) -> Result<Polled, DirError> {
        let names = list_dir(&cfg.dir)?;
        let mut changed = !self.scanned_once;
        let before = self.files.len();
        self.files.retain(|name, f| {
            let keep = names.contains(name);
            if !keep && f.good.is_some() {
                log::info!("manifests file={name} removed: deleting its objects");
            }
            keep
        });
        changed |= self.files.len() != before;
        for name in &names {
            let state = self.files.entry(name.clone()).or_default();
            changed |= refresh(&cfg.dir, name, state, &mut self.reads);
        }
        if changed {
            self.visit(cfg, now, visit);
        }
        self.scanned_once = true;
        let mut errors = Vec::new();
        for f in self.files.values() {
            errors.extend(f.error.iter().cloned());
            if let Some(p) = &f.good {
                errors.extend(p.errors.iter().cloned());
            }
        }
        errors.extend(self.duplicates.iter().cloned());
        Ok(Polled { changed, errors })
    }

    /// Read the directory; returns the desired objects per kind (already filtered and
    /// stamped) and the errors of this scan (a directory that cannot be listed is one).
    pub fn scan(
        &mut self,
        cfg: &ManifestsConfig,
        now: SystemTime,
    ) -> (BTreeMap<Kind, Vec<Value>>, Vec<String>) {
        let mut out: BTreeMap<Kind, Vec<Value>> =
            Kind::ALL.iter().map(|k| (*k, Vec::new())).collect();
        // Every call yields the whole set, as if it were the first poll.
        self.scanned_once = false;
        match self.poll(cfg, now, |kind, v| out.entry(kind).or_default().push(v)) {
            Ok(p) => (out, p.errors),
            Err(e) => (out, vec![e.0]),
        }
    }

    /// Hand every stamped object of the current files to `visit`; records duplicates.
    fn visit(
        &mut self,
        cfg: &ManifestsConfig,
        now: SystemTime,
        mut visit: impl FnMut(Kind, Value),
    ) {
        let mut duplicates = Vec::new();
        let mut desired: BTreeMap<Kind, BTreeMap<String, String>> = BTreeMap::new();
        let mut owner: HashMap<(Kind, String), String> = HashMap::new();
        for (name, f) in &self.files {
            let Some(parsed) = &f.good else { continue };
            for o in &parsed.objects {
                if !selected(cfg, o) {
                    continue;
                }
                let id = (o.kind, o.key.clone());
                if let Some(first) = owner.get(&id) {
                    duplicates.push(format!(
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
        self.duplicates = duplicates;
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

/// The directory's own rule (see the module doc): an error when someone other than root or
/// tether could change `dir` (its target, when it is a symlink). A directory that is
/// missing or cannot be looked at passes: listing it says why, and a missing one is waited
/// for.
pub fn check_dir(dir: &Path) -> Result<(), DirError> {
    match files::check_trusted(dir) {
        Err(e @ files::ReadError::Untrusted { .. }) => {
            Err(DirError(format!("{}: {e}", dir.display())))
        }
        _ => Ok(()),
    }
}

/// The names of the manifests files in `dir` (`*.yaml`, `*.yml`, `*.json`, not hidden:
/// editors' and Kubernetes volumes' `..data` entries start with a dot). Any error listing
/// it, including one on a single entry, is a [`DirError`]: a partial listing would read as
/// deleted files.
fn list_dir(dir: &Path) -> Result<BTreeSet<String>, DirError> {
    check_dir(dir)?;
    let err =
        |e: std::io::Error| DirError(format!("{}: cannot list the directory: {e}", dir.display()));
    let mut names = BTreeSet::new();
    for entry in std::fs::read_dir(dir).map_err(err)? {
        let entry = entry.map_err(err)?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let wanted = [".yaml", ".yml", ".json"].iter().any(|s| name.ends_with(s));
        if wanted && !name.starts_with('.') {
            names.insert(name);
        }
    }
    Ok(names)
}

/// Bring one file's state up to date; true when its objects changed. Reads the file only
/// if its stat key changed (or is too recent to trust), parses it only if its content
/// did, and never opens what is not a regular file or what others could change (see
/// `crate::files`).
fn refresh(dir: &Path, name: &str, state: &mut FileState, reads: &mut u64) -> bool {
    let path = dir.join(name);
    let kept = |state: &FileState| {
        if state.good.is_some() {
            "; keeping its last good objects"
        } else {
            ""
        }
    };
    let meta = match files::check_trusted_regular(&path, files::MANIFEST_MAX) {
        Ok(m) => m,
        Err(e) => {
            state.error = Some(format!("{name}: {e}{}", kept(state)));
            return false;
        }
    };
    let stat = StatKey::of(&meta);
    if state.settled(&stat) {
        state.error = state.seen.as_ref().and_then(|s| s.error.clone());
        return false;
    }
    let read_at = SystemTime::now();
    *reads += 1;
    let bytes = match files::read_trusted(&path, files::MANIFEST_MAX) {
        Ok(b) => b,
        Err(e) => {
            state.seen = None;
            state.error = Some(format!("{name}: {e}{}", kept(state)));
            return false;
        }
    };
    let digest: [u8; 20] = Sha1::digest(&bytes).into();
    if let Some(seen) = state.seen.as_mut().filter(|s| s.digest == digest) {
        seen.stat = stat;
        seen.read_at = read_at;
        state.error = seen.error.clone();
        return false;
    }
    let parsed = String::from_utf8(bytes)
        .map_err(|_| format!("{name}: not UTF-8"))
        .and_then(|t| parse_file(name, &t));
    let (changed, error) = match parsed {
        Ok(p) => {
            let changed = state.good.as_ref() != Some(&p);
            state.good = Some(p);
            (changed, None)
        }
        Err(e) => (false, Some(format!("{e}{}", kept(state)))),
    };
    state.error = error.clone();
    state.seen = Some(Seen {
        stat,
        read_at,
        digest,
        error,
    });
    changed
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
    fn apply(self, stores: &Stores, events: &Sender<KubeEvent>, stop: &Receiver<()>) -> bool {
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

/// The scan loop of the `manifests` thread; returns on stop. The kinds are reported
/// synced only after the first poll that could list the directory: a directory missing
/// at start must not read as "no objects" (that would give the ExternalNode's NIC back).
pub(crate) fn run(
    cfg: &ManifestsConfig,
    stores: &Stores,
    events: &Sender<KubeEvent>,
    stop: &Receiver<()>,
    status: &std::sync::Arc<std::sync::Mutex<BTreeMap<Kind, KindStatus>>>,
    pulse: &crate::heartbeat::Pulse,
) {
    let mut scanner = Scanner::default();
    let mut watch = Watching::default();
    let mut synced = false;
    let mut dir_failing = false;
    let mut decode_errors: Vec<String> = Vec::new();
    loop {
        pulse.busy();
        let mut decoded = Decoded::default();
        let polled = scanner.poll(cfg, SystemTime::now(), |k, v| decoded.add(k, v));
        match polled {
            Err(e) => {
                // One line when it starts failing, not one per poll.
                if !dir_failing {
                    log::error!(
                        "manifests dir={} err={e}; keeping every object as it is and retrying",
                        cfg.dir.display()
                    );
                    dir_failing = true;
                }
                for kind in Kind::ALL {
                    set_status(status, kind, |s| s.last_error = Some(e.0.clone()));
                }
            }
            Ok(polled) => {
                if dir_failing {
                    log::info!("manifests dir={} readable again", cfg.dir.display());
                    dir_failing = false;
                }
                if polled.changed {
                    decode_errors = std::mem::take(&mut decoded.errors);
                    if !decoded.apply(stores, events, stop) {
                        return;
                    }
                }
                let mut errors = polled.errors;
                errors.extend(decode_errors.iter().cloned());
                for e in scanner.fresh_errors(errors.clone()) {
                    log::warn!("manifests dir={} err={e}", cfg.dir.display());
                }
                let ok_at = std::time::Instant::now();
                for kind in Kind::ALL {
                    set_status(status, kind, |s| {
                        s.synced = true;
                        s.last_ok = Some(ok_at);
                        s.last_error = (!errors.is_empty()).then(|| errors.join("; "));
                    });
                }
                if !synced {
                    synced = true;
                    for kind in Kind::ALL {
                        if !send(events, stop, KubeEvent::Synced(kind)) {
                            return;
                        }
                    }
                }
            }
        }
        pulse.idle();
        if !watch.wait(cfg, status, stop) {
            return;
        }
    }
}

/// How long the directory must be quiet after an inotify event before it is rescanned.
const SETTLE: Duration = Duration::from_millis(100);

/// How the manifests thread learns of changes: inotify on the directory where it works
/// (a rescan after every change, and every [`ManifestsConfig::rescan_interval`] for what
/// inotify cannot see: a symlinked file's target changed in another directory), polling
/// every [`ManifestsConfig::poll_interval`] where it does not (the directory missing, no
/// inotify, the watch limit reached) until a watch can be set up again.
#[derive(Default)]
struct Watching {
    watch: Option<dirwatch::DirWatch>,
    /// Why inotify could not be used, as last logged.
    failed: Option<String>,
}

impl Watching {
    fn refresh(&mut self, cfg: &ManifestsConfig, status: &StatusMap) {
        if self.watch.as_ref().is_some_and(|w| !w.lost()) {
            return;
        }
        self.watch = None;
        let mode = match dirwatch::DirWatch::start(&cfg.dir) {
            Ok(w) => {
                self.watch = Some(w);
                if self.failed.take().is_some() {
                    log::info!(
                        "manifests dir={}: watching it with inotify again",
                        cfg.dir.display()
                    );
                }
                "inotify".to_string()
            }
            Err(e) => {
                let why = e.to_string();
                if self.failed.as_deref() != Some(why.as_str()) {
                    log::warn!(
                        "manifests dir={}: inotify unavailable ({why}); polling every {:?}",
                        cfg.dir.display(),
                        cfg.poll_interval
                    );
                    self.failed = Some(why.clone());
                }
                format!("polling every {:?} (inotify: {why})", cfg.poll_interval)
            }
        };
        for kind in Kind::ALL {
            set_status(status, kind, |s| s.watch_mode = Some(mode.clone()));
        }
    }

    /// Sleep until the directory changed (settled), the rescan or poll interval passed, or
    /// `stop` fired (false).
    fn wait(&mut self, cfg: &ManifestsConfig, status: &StatusMap, stop: &Receiver<()>) -> bool {
        self.refresh(cfg, status);
        let changed = self.changed();
        crossbeam_channel::select! {
            recv(stop) -> _ => false,
            recv(changed) -> _ => {
                // Let a burst of changes settle before looking: a file deleted and made
                // again (or replaced by something else) is one change, as the poll saw it.
                // At most 1 s: a directory that never goes quiet is still rescanned.
                for _ in 0..10 {
                    if changed.recv_timeout(SETTLE).is_err() {
                        break;
                    }
                }
                true
            }
            default(self.interval(cfg)) => true,
        }
    }

    fn changed(&self) -> Receiver<()> {
        self.watch
            .as_ref()
            .map_or_else(crossbeam_channel::never, |w| w.changed().clone())
    }

    fn interval(&self, cfg: &ManifestsConfig) -> Duration {
        match self.watch {
            Some(_) => cfg.rescan_interval,
            None => cfg.poll_interval,
        }
    }
}

/// For tests and tools: the directory's objects as one scan would see them.
pub fn scan_once(cfg: &ManifestsConfig) -> (BTreeMap<Kind, Vec<Value>>, Vec<String>) {
    Scanner::default().scan(cfg, SystemTime::now())
}

#[cfg(test)]
mod tests;
