//! Thread-safe object stores fed by the watchers and the manifests source, read by the
//! controllers. A store owns the current objects of one kind and a secondary index, and
//! answers queries over them ("which TCs select a Pod with these labels"); it does not
//! decide what a change means (`controller::route` does).
//!
//! Readers get snapshots: every object is an immutable `Arc<T>`, replaced wholesale on
//! update, so a reader holding one never sees it change and never holds the lock while it
//! works. Writers return the [`Change`] they made (or `None` when nothing changed), which
//! is exactly what the source sends as an event.
//!
//! Indexes and complexity (n objects of the kind, L labels on the object):
//! - `get`: O(1); `list`: O(n log n) (sorted by key, for deterministic output).
//! - Pods by namespace and label ([`PodIndex`]): `Store<Pod>::in_namespace` is O(pods in
//!   it); `Store<Pod>::with_slot` returns the Pods carrying a `key=value` pair or a key,
//!   so a TC selecting `app=<x>` looks at its own Pods only, not at every Pod.
//! - TrafficControls by selector ([`SelectorIndex`]): every valid TC is filed under *one*
//!   slot its Pod selector requires: a `key=value` pair when a requirement pins a key to
//!   one value (`matchLabels`, `In` with one value), else a label key (a Pod lacking that
//!   key cannot match), else an "any" set (empty selector, only `NotIn` / `DoesNotExist`,
//!   or no Pod selector but a Namespace selector); likewise for its Namespace selector.
//!   Mapping a Pod or Namespace event to the TCs it affects costs O(L + c) where c = TCs
//!   filed under the object's label pairs or keys plus the "any" set — so 10,000 TCs that
//!   all select on `app=<x>` cost a Pod event only the few with its own value — and each
//!   candidate is then checked exactly with its selectors.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::crd::{ExternalNode, TrafficControl};
use super::selector::Labels;
use super::types::{Namespace, Pod, Resource};

/// What a write did to the store; the event sent to the controllers.
#[derive(Debug, Clone, PartialEq)]
pub enum Change<T> {
    Added(Arc<T>),
    Updated { old: Arc<T>, new: Arc<T> },
    Deleted(Arc<T>),
}

impl<T: Resource> Change<T> {
    /// The object after the change (the last state for a delete).
    pub fn object(&self) -> &Arc<T> {
        match self {
            Change::Added(o) | Change::Deleted(o) => o,
            Change::Updated { new, .. } => new,
        }
    }

    pub fn key(&self) -> String {
        self.object().key()
    }
}

/// A kind with a store, and the secondary index its store keeps.
pub trait Indexed: Resource {
    type Index: StoreIndex<Self>;
}

impl Indexed for Pod {
    type Index = PodIndex;
}

impl Indexed for Namespace {
    type Index = NoIndex;
}

impl Indexed for TrafficControl {
    type Index = SelectorIndex;
}

impl Indexed for ExternalNode {
    type Index = NoIndex;
}

/// A secondary index maintained under the store's write lock.
pub trait StoreIndex<T>: Default + Send + Sync + 'static {
    fn insert(&mut self, key: &str, obj: &T);
    fn remove(&mut self, key: &str, obj: &T);
}

/// For kinds that need no secondary index.
#[derive(Debug, Default)]
pub struct NoIndex;

impl<T> StoreIndex<T> for NoIndex {
    fn insert(&mut self, _: &str, _: &T) {}
    fn remove(&mut self, _: &str, _: &T) {}
}

/// Object keys by namespace.
#[derive(Debug, Default)]
pub struct ByNamespace {
    keys: HashMap<String, BTreeSet<String>>,
}

impl<T: Resource> StoreIndex<T> for ByNamespace {
    fn insert(&mut self, key: &str, obj: &T) {
        self.keys
            .entry(obj.meta().namespace.clone())
            .or_default()
            .insert(key.to_string());
    }
    fn remove(&mut self, key: &str, obj: &T) {
        let ns = &obj.meta().namespace;
        if let Some(set) = self.keys.get_mut(ns) {
            set.remove(key);
            if set.is_empty() {
                self.keys.remove(ns);
            }
        }
    }
}

/// Pods by namespace and by label: every Pod is filed under each of its `key\0value`
/// pairs and each of its label keys, the slots [`LabelSelector::index_slot`] names.
///
/// [`LabelSelector::index_slot`]: super::selector::LabelSelector::index_slot
#[derive(Debug, Default)]
pub struct PodIndex {
    namespaces: ByNamespace,
    labels: HashMap<String, BTreeSet<String>>,
}

fn label_slots(labels: &Labels) -> impl Iterator<Item = String> + '_ {
    labels
        .iter()
        .flat_map(|(k, v)| [format!("{k}\0{v}"), k.clone()])
}

impl StoreIndex<Pod> for PodIndex {
    fn insert(&mut self, key: &str, pod: &Pod) {
        StoreIndex::<Pod>::insert(&mut self.namespaces, key, pod);
        for slot in label_slots(&pod.metadata.labels) {
            self.labels.entry(slot).or_default().insert(key.to_string());
        }
    }
    fn remove(&mut self, key: &str, pod: &Pod) {
        StoreIndex::<Pod>::remove(&mut self.namespaces, key, pod);
        for slot in label_slots(&pod.metadata.labels) {
            if let Some(set) = self.labels.get_mut(&slot) {
                set.remove(key);
                if set.is_empty() {
                    self.labels.remove(&slot);
                }
            }
        }
    }
}

/// Where one selector is filed: under one `key\0value` pair or label key it requires, or
/// among "any".
#[derive(Debug, Default)]
struct KeyIndex {
    by_key: HashMap<String, BTreeSet<String>>,
    any: BTreeSet<String>,
}

impl KeyIndex {
    fn slot(&mut self, label_key: Option<&str>) -> &mut BTreeSet<String> {
        match label_key {
            Some(k) => self.by_key.entry(k.to_string()).or_default(),
            None => &mut self.any,
        }
    }

    fn remove(&mut self, label_key: Option<&str>, key: &str) {
        match label_key {
            Some(k) => {
                if let Some(set) = self.by_key.get_mut(k) {
                    set.remove(key);
                    if set.is_empty() {
                        self.by_key.remove(k);
                    }
                }
            }
            None => {
                self.any.remove(key);
            }
        }
    }

    /// Keys filed under any of `labels`' pairs (`key\0value`) or keys, plus "any".
    fn candidates<'a>(&self, labels: impl Iterator<Item = &'a Labels>, out: &mut BTreeSet<String>) {
        out.extend(self.any.iter().cloned());
        let mut pair = String::new();
        for l in labels {
            for (k, v) in l {
                pair.clear();
                pair.push_str(k);
                pair.push('\0');
                pair.push_str(v);
                for slot in [pair.as_str(), k.as_str()] {
                    if let Some(set) = self.by_key.get(slot) {
                        out.extend(set.iter().cloned());
                    }
                }
            }
        }
    }
}

/// TrafficControls by the label keys their selectors require (see the module doc).
#[derive(Debug, Default)]
pub struct SelectorIndex {
    pods: KeyIndex,
    namespaces: KeyIndex,
}

/// The slots a TC is filed in: (pod slot, namespace slot); `None` = not filed there.
type Slots = (Option<Option<String>>, Option<Option<String>>);

fn tc_slots(tc: &TrafficControl) -> Slots {
    let Ok(spec) = &tc.spec else {
        return (None, None);
    };
    let first_key = |s: &super::selector::LabelSelector| s.index_slot();
    let a = &spec.applied_to;
    let pod = match (&a.pod_selector, &a.namespace_selector) {
        (None, None) => None,
        (Some(p), _) => Some(first_key(p)),
        (None, Some(_)) => Some(None),
    };
    let ns = a.namespace_selector.as_ref().map(first_key);
    (pod, ns)
}

impl StoreIndex<TrafficControl> for SelectorIndex {
    fn insert(&mut self, key: &str, tc: &TrafficControl) {
        let (pod, ns) = tc_slots(tc);
        if let Some(p) = pod {
            self.pods.slot(p.as_deref()).insert(key.to_string());
        }
        if let Some(n) = ns {
            self.namespaces.slot(n.as_deref()).insert(key.to_string());
        }
    }
    fn remove(&mut self, key: &str, tc: &TrafficControl) {
        let (pod, ns) = tc_slots(tc);
        if let Some(p) = pod {
            self.pods.remove(p.as_deref(), key);
        }
        if let Some(n) = ns {
            self.namespaces.remove(n.as_deref(), key);
        }
    }
}

struct Inner<T: Indexed> {
    objects: HashMap<String, Arc<T>>,
    index: T::Index,
}

/// The objects of one kind, keyed by `namespace/name`.
pub struct Store<T: Indexed> {
    inner: RwLock<Inner<T>>,
    synced: AtomicBool,
}

impl<T: Indexed> Default for Store<T> {
    fn default() -> Self {
        Store {
            inner: RwLock::new(Inner {
                objects: HashMap::new(),
                index: T::Index::default(),
            }),
            synced: AtomicBool::new(false),
        }
    }
}

impl<T: Indexed> std::fmt::Debug for Store<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Store<{}>({} objects)", T::KIND, self.len())
    }
}

impl<T: Indexed> Store<T> {
    pub fn new() -> Store<T> {
        Store::default()
    }

    // A writer that panicked mid-update leaves the maps consistent (each write is a
    // single insert/remove pair), so a poisoned lock is still safe to use.
    fn read(&self) -> RwLockReadGuard<'_, Inner<T>> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner<T>> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self, key: &str) -> Option<Arc<T>> {
        self.read().objects.get(key).cloned()
    }

    /// A snapshot of every object, sorted by key.
    pub fn list(&self) -> Vec<Arc<T>> {
        let g = self.read();
        let mut v: Vec<(&String, &Arc<T>)> = g.objects.iter().collect();
        v.sort_by(|a, b| a.0.cmp(b.0));
        v.into_iter().map(|(_, o)| Arc::clone(o)).collect()
    }

    pub fn keys(&self) -> BTreeSet<String> {
        self.read().objects.keys().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.read().objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True once the first full list (or manifests scan) has been applied.
    pub fn has_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Insert or replace one object; `None` when an identical object was already stored.
    pub fn apply(&self, obj: T) -> Option<Change<T>> {
        let mut g = self.write();
        Self::apply_locked(&mut g, obj)
    }

    fn apply_locked(g: &mut Inner<T>, obj: T) -> Option<Change<T>> {
        let key = obj.key();
        if let Some(old) = g.objects.get(&key) {
            if **old == obj {
                return None;
            }
        }
        let new = Arc::new(obj);
        let old = g.objects.insert(key.clone(), Arc::clone(&new));
        // Unfile the old version first: old and new may share an index slot.
        if let Some(old) = &old {
            g.index.remove(&key, old);
        }
        g.index.insert(&key, &new);
        match old {
            Some(old) => Some(Change::Updated { old, new }),
            None => Some(Change::Added(new)),
        }
    }

    /// Remove one object by key; `None` when it was not stored.
    pub fn delete(&self, key: &str) -> Option<Change<T>> {
        let mut g = self.write();
        let old = g.objects.remove(key)?;
        g.index.remove(key, &old);
        Some(Change::Deleted(old))
    }

    /// Make the store hold exactly `objs` (a relist or a manifests rescan): returns the
    /// adds, updates, and deletes of objects that vanished, and marks the store synced.
    pub fn replace(&self, objs: Vec<T>) -> Vec<Change<T>> {
        let mut changes = Vec::new();
        {
            let mut g = self.write();
            let mut seen = BTreeSet::new();
            for o in objs {
                seen.insert(o.key());
                changes.extend(Self::apply_locked(&mut g, o));
            }
            let mut gone: Vec<String> = g
                .objects
                .keys()
                .filter(|k| !seen.contains(*k))
                .cloned()
                .collect();
            gone.sort();
            for k in gone {
                if let Some(old) = g.objects.remove(&k) {
                    g.index.remove(&k, &old);
                    changes.push(Change::Deleted(old));
                }
            }
        }
        self.synced.store(true, Ordering::Release);
        changes
    }
}

impl Store<Pod> {
    /// The Pods filed under a selector's index slot (`key\0value` or a label key; see
    /// [`LabelSelector::index_slot`]), sorted by key: the only Pods that selector can match.
    ///
    /// [`LabelSelector::index_slot`]: super::selector::LabelSelector::index_slot
    pub fn with_slot(&self, slot: &str) -> Vec<Arc<Pod>> {
        let g = self.read();
        g.index
            .labels
            .get(slot)
            .into_iter()
            .flatten()
            .filter_map(|k| g.objects.get(k).cloned())
            .collect()
    }

    /// The Pods of one namespace, sorted by key.
    pub fn in_namespace(&self, namespace: &str) -> Vec<Arc<Pod>> {
        let g = self.read();
        g.index
            .namespaces
            .keys
            .get(namespace)
            .into_iter()
            .flatten()
            .filter_map(|k| g.objects.get(k).cloned())
            .collect()
    }
}

impl Store<TrafficControl> {
    /// Keys of the valid TCs whose selectors select a Pod with `pod_labels` in a
    /// Namespace with `namespace_labels` (the index narrows, the selectors decide).
    pub fn selecting_pod(
        &self,
        namespace_labels: &Labels,
        pod_labels: &Labels,
    ) -> BTreeSet<String> {
        let g = self.read();
        let mut cand = BTreeSet::new();
        g.index
            .pods
            .candidates(std::iter::once(pod_labels), &mut cand);
        cand.retain(|k| {
            let Some(Ok(spec)) = g.objects.get(k).map(|t| &t.spec) else {
                return false;
            };
            spec.applied_to.selects(pod_labels, namespace_labels)
        });
        cand
    }

    /// Keys of the valid TCs whose Namespace selector matches a Namespace with `labels`.
    pub fn selecting_namespace(&self, labels: &Labels) -> BTreeSet<String> {
        let g = self.read();
        let mut cand = BTreeSet::new();
        g.index
            .namespaces
            .candidates(std::iter::once(labels), &mut cand);
        cand.retain(|k| {
            let Some(Ok(spec)) = g.objects.get(k).map(|t| &t.spec) else {
                return false;
            };
            spec.applied_to
                .namespace_selector
                .as_ref()
                .is_some_and(|sel| sel.matches(labels))
        });
        cand
    }
}

/// The stores of every kind tether watches, shared between the source and controllers.
#[derive(Debug, Default, Clone)]
pub struct Stores {
    pub pods: Arc<Store<Pod>>,
    pub namespaces: Arc<Store<Namespace>>,
    pub traffic_controls: Arc<Store<TrafficControl>>,
    pub external_nodes: Arc<Store<ExternalNode>>,
}

#[cfg(test)]
mod tests;
