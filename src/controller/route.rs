//! Event → work keys: the one place that decides which syncs an event makes necessary.
//! Pure over the stores and the interface store, so every mapping is table-tested
//! (`route/tests.rs`). Over-approximating is safe (a sync of an unaffected key changes
//! nothing); missing a key is a bug, since nothing else would resync that object.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use super::Key;
use super::interfaces::{Interfaces, Role};
use super::l2::l2_flows;
use super::trafficcontrol::select;
use crate::k8s::{Change, KubeEvent, Labels, Pod, Stores, TrafficControl};

/// What happened.
#[derive(Clone, Copy, Debug)]
pub enum Trigger<'a> {
    /// A watched object changed (`Synced` maps to nothing: start-up counts those).
    Kube(&'a KubeEvent),
    /// The bridge's ports changed between two views of the interface store.
    Ports {
        old: &'a PortView,
        new: &'a PortView,
    },
    /// Everything: the first full sync, and an OpenFlow reconnect (a restarted switch may
    /// have renumbered every port).
    All,
}

/// The keys `trigger` makes necessary. `clashing` are the TCs refused for a tunnel clash
/// with another TC: any TC change may resolve it, so they are resynced with every one.
pub fn route(trigger: Trigger<'_>, stores: &Stores, clashing: &BTreeSet<String>) -> BTreeSet<Key> {
    let tcs = |names: BTreeSet<String>| names.into_iter().map(Key::Tc).collect();
    match trigger {
        Trigger::Kube(ev) => match ev {
            KubeEvent::Synced(_) => BTreeSet::new(),
            KubeEvent::ExternalNode(_) => BTreeSet::from([Key::En]),
            KubeEvent::Pod(c) => {
                let ns = &c.object().metadata.namespace;
                let (old, new) = labels(c, |p| &p.metadata.labels);
                tcs(tcs_for_pod(stores, ns, old, new))
            }
            KubeEvent::Namespace(c) => {
                let (old, new) = labels(c, |n| &n.metadata.labels);
                tcs(tcs_for_namespace(stores, old, new))
            }
            KubeEvent::TrafficControl(c) => {
                let (old, new) = objects(c);
                tcs(tcs_for_tc(stores, clashing, old, new))
            }
        },
        Trigger::Ports { old, new } => {
            let mut keys: BTreeSet<Key> = tcs(tcs_for_ports(stores, old, new));
            if old.l2 != new.l2 {
                keys.insert(Key::L2);
            }
            if old.en != new.en {
                keys.insert(Key::En);
            }
            keys
        }
        Trigger::All => {
            let mut keys: BTreeSet<Key> = tcs(stores.traffic_controls.keys());
            keys.insert(Key::L2);
            keys.insert(Key::En);
            keys
        }
    }
}

/// The object before and after a change (`None` on the side where it does not exist).
fn objects<T>(c: &Change<T>) -> (Option<&T>, Option<&T>) {
    match c {
        Change::Added(n) => (None, Some(n.as_ref())),
        Change::Deleted(o) => (Some(o.as_ref()), None),
        Change::Updated { old, new } => (Some(old.as_ref()), Some(new.as_ref())),
    }
}

fn labels<T>(c: &Change<T>, f: impl Fn(&T) -> &Labels) -> (Option<&Labels>, Option<&Labels>) {
    let (old, new) = objects(c);
    (old.map(&f), new.map(&f))
}

/// `keys` (from [`route`]) in the order to sync them: for a Pod event, the TCs that now
/// select the Pod come first. The Pod's flows then move by the gaining TC's ADD taking
/// their keys over (one bundle), and the losing TC's sync finds nothing left to delete. In
/// the other order a relabel is a DELETE bundle and then an ADD bundle, and at 5,000 ports
/// every flow-table commit costs ovs-vswitchd ~25 ms that the next bundle waits for
/// (docs/design.md#the-path-of-one-event). Every other trigger keeps the keys' own order.
pub fn sync_order(trigger: Trigger<'_>, stores: &Stores, keys: BTreeSet<Key>) -> Vec<Key> {
    let first: BTreeSet<Key> = match trigger {
        Trigger::Kube(KubeEvent::Pod(c)) => {
            let ns = &c.object().metadata.namespace;
            let (old, new) = labels(c, |p| &p.metadata.labels);
            let before = tcs_for_pod(stores, ns, old, None);
            tcs_for_pod(stores, ns, None, new)
                .into_iter()
                .filter(|t| !before.contains(t))
                .map(Key::Tc)
                .collect()
        }
        _ => BTreeSet::new(),
    };
    let (mut ordered, rest): (Vec<Key>, Vec<Key>) =
        keys.into_iter().partition(|k| first.contains(k));
    ordered.extend(rest);
    ordered
}

/// TCs selecting a Pod of `namespace` with labels `old` (before) or `new` (after).
pub fn tcs_for_pod(
    stores: &Stores,
    namespace: &str,
    old: Option<&Labels>,
    new: Option<&Labels>,
) -> BTreeSet<String> {
    let ns = stores
        .namespaces
        .get(namespace)
        .map(|n| n.metadata.labels.clone())
        .unwrap_or_default();
    old.into_iter()
        .chain(new)
        .flat_map(|l| stores.traffic_controls.selecting_pod(&ns, l))
        .collect()
}

/// TCs selecting `pod` as it is now.
fn tcs_selecting(stores: &Stores, pod: &Pod) -> BTreeSet<String> {
    tcs_for_pod(
        stores,
        &pod.metadata.namespace,
        None,
        Some(&pod.metadata.labels),
    )
}

/// TCs whose Namespace selector matched the Namespace before or after: their selected
/// Pods may have changed.
pub fn tcs_for_namespace(
    stores: &Stores,
    old: Option<&Labels>,
    new: Option<&Labels>,
) -> BTreeSet<String> {
    old.into_iter()
        .chain(new)
        .flat_map(|l| stores.traffic_controls.selecting_namespace(l))
        .collect()
}

/// A TC changed: itself, every TC sharing a Pod with its old or new selection (which of
/// them is effective may move), and the clashing ones.
pub fn tcs_for_tc(
    stores: &Stores,
    clashing: &BTreeSet<String>,
    old: Option<&TrafficControl>,
    new: Option<&TrafficControl>,
) -> BTreeSet<String> {
    let mut keys = clashing.clone();
    for tc in old.into_iter().chain(new) {
        keys.insert(tc.metadata.name.clone());
        let Ok(spec) = &tc.spec else { continue };
        for pod in select::selected_pods(spec, &stores.pods, &stores.namespaces) {
            keys.extend(tcs_selecting(stores, &pod));
        }
    }
    keys
}

/// What a port change is routed on: each Pod's ofport, and a digest of the L2 flows the
/// ports give. The event loop keeps this between OVSDB updates instead of the previous
/// interface store: at 5,000 ports two stores alive at once were a fifth of the cold
/// start's peak heap (docs/design.md#the-path-of-one-event).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortView {
    /// `namespace/name` → the Pod port's usable ofport.
    pods: BTreeMap<String, Option<u32>>,
    /// SipHash of `l2_flows`: only compared for equality, and a collision (2^-64) would
    /// only delay an L2 sync to the next port change or resync.
    l2: u64,
    /// SipHash of the ExternalNode's host and uplink ports as OVS reports them (row,
    /// ofport, error, netdev ifindex, MAC and MTU in use): someone deleted one, or the
    /// kernel module was reloaded and the host port is a new device. Each needs the
    /// ExternalNode synced (a rebuild, or the VM's configuration put back).
    en: u64,
}

impl PortView {
    pub fn of(ifs: &Interfaces) -> PortView {
        let pods = ifs
            .iter()
            .filter_map(|i| match &i.role {
                Role::Pod { namespace, name } => Some((format!("{namespace}/{name}"), i.ofport())),
                _ => None,
            })
            .collect();
        let mut h = std::hash::DefaultHasher::new();
        l2_flows(ifs).hash(&mut h);
        let l2 = h.finish();
        let mut en: Vec<_> = ifs
            .iter()
            .filter(|i| matches!(i.role, Role::Host | Role::Uplink))
            .map(|i| {
                let p = &i.port;
                (
                    &p.name,
                    &p.uuid.0,
                    p.ofport,
                    &p.error,
                    p.ifindex,
                    &p.mac_in_use,
                    p.mtu,
                )
            })
            .collect();
        en.sort();
        let mut h = std::hash::DefaultHasher::new();
        en.hash(&mut h);
        PortView {
            pods,
            l2,
            en: h.finish(),
        }
    }
}

/// TCs selecting a Pod whose port appeared, went, or changed ofport.
pub fn tcs_for_ports(stores: &Stores, old: &PortView, new: &PortView) -> BTreeSet<String> {
    let (a, b) = (&old.pods, &new.pods);
    let mut keys = BTreeSet::new();
    for k in a.keys().chain(b.keys()) {
        if a.get(k) == b.get(k) {
            continue;
        }
        if let Some(pod) = stores.pods.get(k) {
            keys.extend(tcs_selecting(stores, &pod));
        }
    }
    keys
}

#[cfg(test)]
mod tests;
