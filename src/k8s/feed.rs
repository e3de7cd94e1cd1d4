//! What the two feeders of the stores share — the API watchers (`source`) and the
//! manifests directory (`manifests`): the events the controllers get, which store and event
//! each kind has, each kind's health for `tether status`, and applying a change to a store
//! and sending what it changed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender, select};

use super::crd::{ExternalNode, TrafficControl};
use super::store::{Change, Indexed, Store, Stores};
use super::types::{Kind, Namespace, Pod};
use super::watch::Delta;

/// What the source tells the controllers.
#[derive(Debug, Clone, PartialEq)]
pub enum KubeEvent {
    Pod(Change<Pod>),
    Namespace(Change<Namespace>),
    TrafficControl(Change<TrafficControl>),
    ExternalNode(Change<ExternalNode>),
    /// The first full list (or manifests scan) of this kind is in its store.
    Synced(Kind),
}

/// A kind the source can feed: its event wrapper and its store.
pub trait Watched: Indexed {
    fn event(c: Change<Self>) -> KubeEvent;
    fn store(stores: &Stores) -> &Arc<Store<Self>>;
}

impl Watched for Pod {
    fn event(c: Change<Self>) -> KubeEvent {
        KubeEvent::Pod(c)
    }
    fn store(s: &Stores) -> &Arc<Store<Self>> {
        &s.pods
    }
}

impl Watched for Namespace {
    fn event(c: Change<Self>) -> KubeEvent {
        KubeEvent::Namespace(c)
    }
    fn store(s: &Stores) -> &Arc<Store<Self>> {
        &s.namespaces
    }
}

impl Watched for TrafficControl {
    fn event(c: Change<Self>) -> KubeEvent {
        KubeEvent::TrafficControl(c)
    }
    fn store(s: &Stores) -> &Arc<Store<Self>> {
        &s.traffic_controls
    }
}

impl Watched for ExternalNode {
    fn event(c: Change<Self>) -> KubeEvent {
        KubeEvent::ExternalNode(c)
    }
    fn store(s: &Stores) -> &Arc<Store<Self>> {
        &s.external_nodes
    }
}

/// Health of one kind's feed, for `tether status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KindStatus {
    pub synced: bool,
    /// The error that is currently making this kind back off, if any.
    pub last_error: Option<String>,
    pub errors_total: u64,
    /// Full LISTs after the first one (410 Gone, a failed watch resume, …).
    pub relists: u64,
    /// When the source last read this kind successfully (a LIST, a watch, a manifests
    /// poll that could list the directory).
    pub last_ok: Option<std::time::Instant>,
    /// How the source learns of changes when that is worth saying (the manifests
    /// directory: "inotify", or "polling every …" and why).
    pub watch_mode: Option<String>,
}

pub(crate) type StatusMap = Arc<Mutex<BTreeMap<Kind, KindStatus>>>;

pub(crate) fn set_status(status: &StatusMap, kind: Kind, f: impl FnOnce(&mut KindStatus)) {
    f(status
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(kind)
        .or_default());
}

/// Send an event unless the source is stopping; false when it is (or nobody listens).
pub(crate) fn send(events: &Sender<KubeEvent>, stop: &Receiver<()>, ev: KubeEvent) -> bool {
    select! {
        send(events, ev) -> r => r.is_ok(),
        recv(stop) -> _ => false,
    }
}

/// Apply a store change and forward the resulting events; false when stopping.
pub(crate) fn apply_delta<T: Watched>(
    store: &Store<T>,
    d: Delta<T>,
    events: &Sender<KubeEvent>,
    stop: &Receiver<()>,
) -> bool {
    let changes = match d {
        Delta::Replace(objs) => store.replace(objs),
        Delta::ReplaceKeeping(mut objs, keep) => {
            for k in keep {
                if let Some(o) = store.get(&k) {
                    objs.push(T::clone(&o));
                }
            }
            store.replace(objs)
        }
        Delta::Apply(o) => store.apply(o).into_iter().collect(),
        Delta::Delete(o) => store.delete(&o.key()).into_iter().collect(),
    };
    changes.into_iter().all(|c| send(events, stop, T::event(c)))
}
