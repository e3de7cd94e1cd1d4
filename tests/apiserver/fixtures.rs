//! Object builders and waiting helpers shared by the k8s tests.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub fn pod(ns: &str, name: &str, node: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"namespace": ns, "name": name, "labels": labels},
           "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
           "status": {"phase": "Running"}})
}

pub fn namespace(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

pub fn traffic_control(name: &str, app: &str, vni: u64) -> Value {
    json!({"apiVersion": "crd.antrea.io/v1alpha2", "kind": "TrafficControl",
           "metadata": {"name": name},
           "spec": {"appliedTo": {"podSelector": {"matchLabels": {"app": app}}},
                    "direction": "Both", "action": "Mirror",
                    "targetPort": {"vxlan": {"remoteIP": "192.0.2.9", "vni": vni}}}})
}

pub fn external_node(ns: &str, name: &str, ip: &str) -> Value {
    json!({"apiVersion": "crd.antrea.io/v1alpha1", "kind": "ExternalNode",
           "metadata": {"namespace": ns, "name": name},
           "spec": {"interfaces": [{"name": "eth0", "ips": [ip]}]}})
}

/// Poll `cond` until it holds; panic with `what` after `limit` (a liveness bound, not a
/// performance assertion).
pub fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}
