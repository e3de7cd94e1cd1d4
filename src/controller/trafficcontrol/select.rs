//! Which Pods a TrafficControl applies to, and which TC is *effective* for a Pod when
//! several select it. Pure over store snapshots.
//!
//! Effective rule (docs/design.md#effective-trafficcontrol-per-pod, fixing Antrea's random `PopAny`): among the valid TCs that
//! select a Pod, the oldest by `creationTimestamp` wins, ties broken by name. It depends only
//! on the stores, so every worker and every restart reaches the same answer.
//!
//! Cost for one TC: O(P) selector checks over the node's Pods P, plus, per selected Pod,
//! the store's indexed lookup of the other TCs selecting it (store.rs doc).

use std::sync::Arc;

use crate::k8s::{Labels, Namespace, Pod, Store, TrafficControl, TrafficControlSpec};

/// The ordering key of the effective rule: (creationTimestamp, name). RFC 3339 UTC strings
/// order as times; a missing timestamp sorts first.
pub fn precedence(tc: &TrafficControl) -> (&str, &str) {
    (
        tc.metadata.creation_timestamp.as_deref().unwrap_or(""),
        &tc.metadata.name,
    )
}

fn namespace_labels(namespaces: &Store<Namespace>, ns: &str) -> Labels {
    namespaces
        .get(ns)
        .map(|n| n.metadata.labels.clone())
        .unwrap_or_default()
}

/// Pods selected by `spec` (hostNetwork Pods never are), sorted by key.
pub fn selected_pods(
    spec: &TrafficControlSpec,
    pods: &Store<Pod>,
    namespaces: &Store<Namespace>,
) -> Vec<Arc<Pod>> {
    let a = &spec.applied_to;
    if a.pod_selector.is_none() && a.namespace_selector.is_none() {
        return Vec::new();
    }
    // Only the Pods filed under the Pod selector's slot can match it (every Pod when the
    // selector pins no key, or there is only a Namespace selector).
    let candidates = match a.pod_selector.as_ref().and_then(|s| s.index_slot()) {
        Some(slot) => pods.with_slot(&slot),
        None => pods.list(),
    };
    let mut ns_cache: std::collections::HashMap<String, Labels> = Default::default();
    candidates
        .into_iter()
        .filter(|p| !p.spec.host_network)
        .filter(|p| {
            let ns = &p.metadata.namespace;
            if !ns_cache.contains_key(ns) {
                ns_cache.insert(ns.clone(), namespace_labels(namespaces, ns));
            }
            a.selects(&p.metadata.labels, &ns_cache[ns])
        })
        .collect()
}

/// Is `tc` the effective TC for `pod`?
pub fn is_effective(
    tc: &TrafficControl,
    pod: &Pod,
    namespaces: &Store<Namespace>,
    tcs: &Store<TrafficControl>,
) -> bool {
    let ns = namespace_labels(namespaces, &pod.metadata.namespace);
    let mine = precedence(tc);
    tcs.selecting_pod(&ns, &pod.metadata.labels)
        .into_iter()
        .filter(|k| *k != tc.metadata.name)
        .filter_map(|k| tcs.get(&k))
        .all(|other| precedence(&other) > mine)
}

/// The Pods for which `tc` is effective: the ones its mark flows cover.
pub fn effective_pods(
    tc: &TrafficControl,
    spec: &TrafficControlSpec,
    pods: &Store<Pod>,
    namespaces: &Store<Namespace>,
    tcs: &Store<TrafficControl>,
) -> Vec<Arc<Pod>> {
    selected_pods(spec, pods, namespaces)
        .into_iter()
        .filter(|p| is_effective(tc, p, namespaces, tcs))
        .collect()
}
