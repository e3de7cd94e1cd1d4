//! Realization status back to antrea-controller: a `NetworkPolicyStatus` POSTed to
//! `/apis/controlplane.antrea.io/v1beta2/networkpolicies/<name>/status` for each policy
//! whose every effective rule is on the switch, at the policy's current generation; again on
//! every generation change and after every resync of the watches (antrea-controller forgets
//! agents' reports when it restarts; Antrea #3075, #5097). The controller marks a policy
//! `Realized` only when every node of its span has reported its current generation.
//!
//! [`Reports`] decides what to send (pure); [`StatusSink`] sends it.

use std::collections::BTreeMap;

use crate::controlplane::source::API_PREFIX;
use crate::k8s::KubeError;

/// Where reports go: the controlplane API, or a test's recorder.
pub trait StatusSink: Send + Sync {
    /// POST one `NetworkPolicyStatus` body for policy `name`.
    fn post(&self, name: &str, body: &[u8]) -> Result<(), KubeError>;
}

impl StatusSink for crate::k8s::Client {
    fn post(&self, name: &str, body: &[u8]) -> Result<(), KubeError> {
        let path = format!("{API_PREFIX}/networkpolicies/{name}/status");
        crate::k8s::Client::post(self, &path, body).map(|_| ())
    }
}

/// The body Antrea's agent sends (`pkg/agent/controller/networkpolicy/status_controller.go`):
/// this node's span key and the generation realized. The agent never reports a failure
/// (`realizationFailure` is always false), and neither does tether: a rule it cannot
/// realize is shown in `tether status`, and the policy stays `Realizing` upstream.
pub fn status_body(name: &str, node_key: &str, generation: i64) -> Vec<u8> {
    serde_json::json!({
        "apiVersion": "controlplane.antrea.io/v1beta2",
        "kind": "NetworkPolicyStatus",
        "metadata": {"name": name},
        "nodes": [{"nodeName": node_key, "generation": generation, "realizationFailure": false}],
    })
    .to_string()
    .into_bytes()
}

/// What was reported, per policy name: the generation the controller has from us.
#[derive(Debug, Default)]
pub struct Reports {
    sent: BTreeMap<String, i64>,
}

impl Reports {
    /// The (name, generation) pairs to send now, given the realized policies: each one
    /// whose generation was not yet reported. Policies no longer realized or gone are
    /// forgotten, so they are reported again when they come back.
    pub fn due(&mut self, realized: &BTreeMap<String, i64>) -> Vec<(String, i64)> {
        self.sent.retain(|name, _| realized.contains_key(name));
        realized
            .iter()
            .filter(|(name, g)| self.sent.get(*name) != Some(*g))
            .map(|(n, g)| (n.clone(), *g))
            .collect()
    }

    pub fn sent(&mut self, name: &str, generation: i64) {
        self.sent.insert(name.to_string(), generation);
    }

    /// After a resync every policy is reported again.
    pub fn forget_all(&mut self) {
        self.sent.clear();
    }

    pub fn generation(&self, name: &str) -> Option<i64> {
        self.sent.get(name).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn realized(v: &[(&str, i64)]) -> BTreeMap<String, i64> {
        v.iter().map(|(n, g)| (n.to_string(), *g)).collect()
    }

    #[test]
    fn body_is_antreas_shape() {
        let b = status_body("uid-1", "vm-ns/vm1", 3);
        assert_eq!(
            String::from_utf8(b).unwrap(),
            r#"{"apiVersion":"controlplane.antrea.io/v1beta2","kind":"NetworkPolicyStatus","metadata":{"name":"uid-1"},"nodes":[{"generation":3,"nodeName":"vm-ns/vm1","realizationFailure":false}]}"#
        );
    }

    #[test]
    fn reports_each_generation_once_and_again_after_a_resync() {
        let mut r = Reports::default();
        let due = r.due(&realized(&[("a", 1), ("b", 4)]));
        assert_eq!(due, vec![("a".to_string(), 1), ("b".to_string(), 4)]);
        r.sent("a", 1);
        // b's POST failed: it is still due; a is not.
        assert_eq!(
            r.due(&realized(&[("a", 1), ("b", 4)])),
            vec![("b".into(), 4)]
        );
        r.sent("b", 4);
        assert!(r.due(&realized(&[("a", 1), ("b", 4)])).is_empty());
        // A generation change (even one that changes no flow: Antrea #3075).
        assert_eq!(
            r.due(&realized(&[("a", 2), ("b", 4)])),
            vec![("a".into(), 2)]
        );
        r.sent("a", 2);
        // b no longer realized (or gone): forgotten, reported again when it is back.
        assert!(r.due(&realized(&[("a", 2)])).is_empty());
        assert_eq!(
            r.due(&realized(&[("a", 2), ("b", 4)])),
            vec![("b".into(), 4)]
        );
        r.sent("b", 4);
        r.forget_all();
        assert_eq!(r.due(&realized(&[("a", 2), ("b", 4)])).len(), 2);
    }
}
