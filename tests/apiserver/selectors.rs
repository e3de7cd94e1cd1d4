//! What a request asks for: `/version` and legacy discovery, the collection paths (resource
//! and namespace), and the label and field selectors, as kube-apiserver parses them.

use serde_json::{Value, json};

/// `/version` and legacy discovery, as kube-apiserver answers them (kubectl asks for the
/// aggregated form first and falls back to these when the answer is plain JSON).
pub(super) fn discovery(path: &str, crds: bool) -> Option<Value> {
    let resource = |name: &str, kind: &str, namespaced: bool, short: &[&str]| {
        json!({"name": name, "singularName": kind.to_lowercase(), "namespaced": namespaced,
               "kind": kind, "verbs": ["get", "list", "watch"], "shortNames": short})
    };
    Some(match path.trim_end_matches('/') {
        "/version" => json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0",
            "gitCommit": "tether-test", "gitTreeState": "clean", "buildDate": "2026-11-30T09:00:00Z",
            "goVersion": "go1.24", "compiler": "gc", "platform": "linux/amd64"}),
        "/api" => json!({"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}),
        "/api/v1" => json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
            resource("namespaces", "Namespace", false, &["ns"]),
            resource("pods", "Pod", true, &["po"])]}),
        "/apis" => {
            let groups = if crds {
                vec![json!({"name": "crd.antrea.io", "versions": [
                    {"groupVersion": "crd.antrea.io/v1alpha2", "version": "v1alpha2"},
                    {"groupVersion": "crd.antrea.io/v1alpha1", "version": "v1alpha1"}],
                    "preferredVersion": {"groupVersion": "crd.antrea.io/v1alpha2", "version": "v1alpha2"}})]
            } else {
                Vec::new()
            };
            json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        }
        "/apis/crd.antrea.io/v1alpha2" if crds => {
            json!({"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": "crd.antrea.io/v1alpha2",
            "resources": [resource("trafficcontrols", "TrafficControl", false, &["tc"])]})
        }
        "/apis/crd.antrea.io/v1alpha1" if crds => {
            json!({"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": "crd.antrea.io/v1alpha1",
            "resources": [resource("externalnodes", "ExternalNode", true, &["en"])]})
        }
        _ => return None,
    })
}

/// The label selector grammar of `k8s.io/apimachinery/pkg/labels` that clients send:
/// `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`, comma-separated.
#[derive(Debug)]
pub(super) enum LabelReq {
    Eq(String, String),
    Ne(String, String),
    Exists(String),
    Absent(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

pub(super) fn label_selector(s: &str) -> Result<Vec<LabelReq>, String> {
    // Split on commas outside parentheses.
    let mut parts = Vec::new();
    let (mut depth, mut cur) = (0, String::new());
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    parts.push(cur);
    let set = |v: &str| -> Vec<String> {
        v.trim()
            .trim_start_matches('(')
            .trim_end_matches(')')
            .split(',')
            .map(|x| x.trim().to_string())
            .collect()
    };
    let mut out = Vec::new();
    for p in parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
        let r = if let Some((k, v)) = p.split_once("!=") {
            LabelReq::Ne(k.trim().into(), v.trim().into())
        } else if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
            LabelReq::Eq(k.trim().into(), v.trim().into())
        } else if let Some((k, v)) = p.split_once(" notin ") {
            LabelReq::NotIn(k.trim().into(), set(v))
        } else if let Some((k, v)) = p.split_once(" in ") {
            LabelReq::In(k.trim().into(), set(v))
        } else if let Some(k) = p.strip_prefix('!') {
            LabelReq::Absent(k.trim().into())
        } else if p
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        {
            LabelReq::Exists(p.into())
        } else {
            return Err(format!("unable to parse requirement: {p:?}"));
        };
        out.push(r);
    }
    Ok(out)
}

fn labels_match(obj: &Value, sel: &[LabelReq]) -> bool {
    let l = |k: &str| obj["metadata"]["labels"][k].as_str().map(str::to_string);
    sel.iter().all(|r| match r {
        LabelReq::Eq(k, v) => l(k).as_deref() == Some(v.as_str()),
        LabelReq::Ne(k, v) => l(k).as_deref() != Some(v.as_str()),
        LabelReq::Exists(k) => l(k).is_some(),
        LabelReq::Absent(k) => l(k).is_none(),
        LabelReq::In(k, vs) => l(k).is_some_and(|x| vs.contains(&x)),
        LabelReq::NotIn(k, vs) => l(k).is_none_or(|x| !vs.contains(&x)),
    })
}

/// What a LIST or WATCH selects.
pub(super) struct Selection {
    pub(super) ns: Option<String>,
    pub(super) fields: Vec<(String, String)>,
    pub(super) labels: Vec<LabelReq>,
}

impl Selection {
    pub(super) fn matches(&self, obj: &Value) -> bool {
        matches(obj, &self.ns, &self.fields) && labels_match(obj, &self.labels)
    }
}

/// (resource plural, namespace) for a collection path, or None (404).
pub(super) fn route(path: &str, crds: bool) -> Option<(String, Option<String>)> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group_ok, rest) = match segs.as_slice() {
        ["api", "v1", rest @ ..] => (true, rest.to_vec()),
        ["apis", "crd.antrea.io", v, rest @ ..] if crds => {
            let r = rest.last().copied().unwrap_or("");
            (
                (r == "trafficcontrols" && *v == "v1alpha2")
                    || (r == "externalnodes" && *v == "v1alpha1"),
                rest.to_vec(),
            )
        }
        _ => return None,
    };
    if !group_ok {
        return None;
    }
    let core = segs[0] == "api";
    match rest.as_slice() {
        [r] => {
            let ok = if core {
                matches!(*r, "pods" | "namespaces")
            } else {
                true
            };
            ok.then(|| (r.to_string(), None))
        }
        ["namespaces", ns, r] => {
            let ok = if core {
                *r == "pods"
            } else {
                *r == "externalnodes"
            };
            ok.then(|| (r.to_string(), Some(ns.to_string())))
        }
        _ => None,
    }
}

/// Parsed field selector: (field, value) pairs that must all hold.
pub(super) fn field_selector(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        let (f, v) = part
            .split_once("==")
            .or_else(|| part.split_once('='))
            .ok_or_else(|| format!("invalid selector: '{part}'; can't understand '{part}'"))?;
        if !matches!(f, "spec.nodeName" | "metadata.name" | "metadata.namespace") {
            return Err(format!("field label not supported: {f}"));
        }
        out.push((f.to_string(), v.to_string()));
    }
    Ok(out)
}

fn matches(obj: &Value, ns: &Option<String>, fields: &[(String, String)]) -> bool {
    if let Some(ns) = ns {
        if obj["metadata"]["namespace"].as_str() != Some(ns.as_str()) {
            return false;
        }
    }
    fields.iter().all(|(f, v)| {
        let got = match f.as_str() {
            "spec.nodeName" => obj["spec"]["nodeName"].as_str().unwrap_or(""),
            "metadata.name" => obj["metadata"]["name"].as_str().unwrap_or(""),
            _ => obj["metadata"]["namespace"].as_str().unwrap_or(""),
        };
        got == v
    })
}
