//! `tether run` settings: command-line flags and the YAML config file (DESIGN §2). Every
//! flag is also a config key (camelCase, as Antrea's agent config writes them; the flag's
//! own spelling is accepted too); flags win over the file. The file also takes Antrea's
//! `externalNode.externalNodeNamespace` and `externalNode.policyBypassRules`. Unknown keys
//! warn; an invalid value (a bypass rule included) refuses to start, naming the key, before
//! anything is connected to: `run` and `check` share this one validation. Pure: strings
//! in, `Config` out.

pub mod check;

use std::path::PathBuf;

use serde_json::Value;

use crate::pipeline::externalnode::{PolicyBypassRule, parse_bypass_rules};

#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    Kubeconfig(PathBuf),
    Manifests(PathBuf),
    InCluster,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub node_name: String,
    pub ovs_rundir: PathBuf,
    pub bridge: String,
    pub datapath_type: String,
    pub source: Source,
    pub external_node_namespace: String,
    pub state_socket: PathBuf,
    /// `externalNode.policyBypassRules`, validated here so that `check` and `run` refuse a
    /// bad rule before connecting to anything.
    pub policy_bypass_rules: Vec<PolicyBypassRule>,
    /// Honour a kubeconfig's `insecure-skip-tls-verify` (refused otherwise).
    pub allow_insecure_tls: bool,
    /// Accept an `http://` API server (refused otherwise).
    pub allow_plain_http: bool,
    /// Warnings found while reading (unknown keys), for the log.
    pub warnings: Vec<String>,
}

/// A usage or configuration error: exit code 2, naming the flag or key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// One setting: flag name, config key, help.
pub const SETTINGS: &[(&str, &str, &str)] = &[
    (
        "--config",
        "",
        "FILE  YAML config file (keys below, plus externalNode.*)",
    ),
    (
        "--node-name",
        "nodeName",
        "NAME  this node (default $NODE_NAME, else the hostname)",
    ),
    (
        "--ovs-rundir",
        "ovsRundir",
        "DIR  where db.sock and <bridge>.mgmt live (default /var/run/openvswitch)",
    ),
    (
        "--bridge",
        "bridge",
        "NAME  the OVS bridge (default br-int)",
    ),
    (
        "--datapath-type",
        "datapathType",
        "system|netdev  (default system)",
    ),
    (
        "--kubeconfig",
        "kubeconfig",
        "FILE  API server credentials (or in-cluster config when absent)",
    ),
    (
        "--manifests",
        "manifests",
        "DIR  read objects from YAML/JSON files instead of an API server",
    ),
    (
        "--external-node-namespace",
        "externalNodeNamespace",
        "NS  namespace of this node's ExternalNode (default default)",
    ),
    (
        "--state-socket",
        "stateSocket",
        "PATH  status socket (default /run/tether/tether.sock)",
    ),
    (
        "--allow-insecure-tls",
        "allowInsecureTLS",
        "  honour insecure-skip-tls-verify in the kubeconfig (loud warning)",
    ),
    (
        "--allow-plain-http",
        "allowPlainHTTP",
        "  accept an http:// API server: token and objects in cleartext (test servers only)",
    ),
];

#[derive(Default)]
struct Raw {
    node_name: Option<String>,
    ovs_rundir: Option<String>,
    bridge: Option<String>,
    datapath_type: Option<String>,
    kubeconfig: Option<String>,
    manifests: Option<String>,
    external_node_namespace: Option<String>,
    state_socket: Option<String>,
    allow_insecure_tls: Option<bool>,
    allow_plain_http: Option<bool>,
}

impl Raw {
    fn set(&mut self, key: &str, value: String) -> bool {
        let slot = match key {
            "nodeName" => &mut self.node_name,
            "ovsRundir" => &mut self.ovs_rundir,
            "bridge" => &mut self.bridge,
            "datapathType" => &mut self.datapath_type,
            "kubeconfig" => &mut self.kubeconfig,
            "manifests" => &mut self.manifests,
            "externalNodeNamespace" => &mut self.external_node_namespace,
            "stateSocket" => &mut self.state_socket,
            _ => return false,
        };
        *slot = Some(value);
        true
    }

    /// Fill unset fields from `other` (flags first, then the file).
    fn or(self, other: Raw) -> Raw {
        Raw {
            node_name: self.node_name.or(other.node_name),
            ovs_rundir: self.ovs_rundir.or(other.ovs_rundir),
            bridge: self.bridge.or(other.bridge),
            datapath_type: self.datapath_type.or(other.datapath_type),
            kubeconfig: self.kubeconfig.or(other.kubeconfig),
            manifests: self.manifests.or(other.manifests),
            external_node_namespace: self
                .external_node_namespace
                .or(other.external_node_namespace),
            state_socket: self.state_socket.or(other.state_socket),
            allow_insecure_tls: self.allow_insecure_tls.or(other.allow_insecure_tls),
            allow_plain_http: self.allow_plain_http.or(other.allow_plain_http),
        }
    }
}

fn flag_key(flag: &str) -> Option<&'static str> {
    SETTINGS
        .iter()
        .find(|(f, k, _)| *f == flag && !k.is_empty())
        .map(|(_, k, _)| *k)
}

/// The file's settings. `text` is YAML (JSON is YAML too).
fn parse_file(
    name: &str,
    text: &str,
    warnings: &mut Vec<String>,
) -> Result<(Raw, Option<String>, Vec<Value>), ConfigError> {
    let docs = crate::k8s::yaml::parse_documents(text)
        .map_err(|e| ConfigError(format!("config {name}: {e}")))?;
    let mut raw = Raw::default();
    let mut en_ns = None;
    let mut rules = Vec::new();
    let Some(doc) = docs.into_iter().next() else {
        return Ok((raw, en_ns, rules));
    };
    let Value::Object(map) = doc else {
        return Err(ConfigError(format!(
            "config {name}: the top level must be a mapping"
        )));
    };
    for (k, v) in map {
        // Accept the flag spelling too (`node-name` for `nodeName`).
        let key = flag_key(&format!("--{k}"))
            .unwrap_or(k.as_str())
            .to_string();
        match (key.as_str(), v) {
            ("externalNode", Value::Object(en)) => {
                for (ek, ev) in en {
                    match (ek.as_str(), ev) {
                        ("externalNodeNamespace", Value::String(s)) => en_ns = Some(s),
                        ("policyBypassRules", Value::Array(a)) => rules = a,
                        ("policyBypassRules", Value::Null) => {}
                        ("externalNodeNamespace" | "policyBypassRules", other) => {
                            return Err(ConfigError(format!(
                                "config {name}: externalNode.{ek}: unexpected value {other}"
                            )));
                        }
                        _ => warnings.push(format!(
                            "config {name}: unknown key externalNode.{ek} ignored"
                        )),
                    }
                }
            }
            ("externalNode", other) => {
                return Err(ConfigError(format!(
                    "config {name}: externalNode must be a mapping, got {other}"
                )));
            }
            ("allowInsecureTLS", Value::Bool(b)) => raw.allow_insecure_tls = Some(b),
            ("allowPlainHTTP", Value::Bool(b)) => raw.allow_plain_http = Some(b),
            (k @ ("allowInsecureTLS" | "allowPlainHTTP"), other) => {
                return Err(ConfigError(format!(
                    "config {name}: {k} must be true or false, got {other}"
                )));
            }
            // Antrea agent keys that make sense only on a K8s Node or are ours anyway.
            ("nodeType" | "featureGates" | "trafficEncapMode", _) => {}
            (k, Value::String(s)) => {
                if !raw.set(k, s) {
                    warnings.push(format!("config {name}: unknown key {k} ignored"));
                }
            }
            (k, other) => {
                if SETTINGS.iter().any(|(_, key, _)| *key == k) {
                    return Err(ConfigError(format!(
                        "config {name}: {k} must be a string, got {other}"
                    )));
                }
                warnings.push(format!("config {name}: unknown key {k} ignored"));
            }
        }
    }
    Ok((raw, en_ns, rules))
}

fn is_valid_ifname(s: &str) -> bool {
    !s.is_empty() && s.len() <= 15 && !s.contains(['/', ' ', ':']) && s != "." && s != ".."
}

/// Parse `tether run` arguments (after `run`). `read_file` and `env` are injected so the
/// parser stays pure and testable.
pub fn parse_run(
    args: &[String],
    read_file: &dyn Fn(&str) -> Result<String, String>,
    env: &dyn Fn(&str) -> Option<String>,
    hostname: &dyn Fn() -> Option<String>,
) -> Result<Config, ConfigError> {
    let mut flags = Raw::default();
    let mut config_file = None;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        if flag == "--allow-insecure-tls" {
            flags.allow_insecure_tls = Some(true);
            i += 1;
            continue;
        }
        if flag == "--allow-plain-http" {
            flags.allow_plain_http = Some(true);
            i += 1;
            continue;
        }
        let known = flag == "--config" || flag_key(&flag).is_some();
        if !known {
            return Err(ConfigError(format!(
                "unknown argument {a} (see tether run --help)"
            )));
        }
        let value = match inline {
            Some(v) => v,
            None => {
                i += 1;
                args.get(i)
                    .cloned()
                    .ok_or_else(|| ConfigError(format!("{flag} needs a value")))?
            }
        };
        if flag == "--config" {
            config_file = Some(value);
        } else if let Some(k) = flag_key(&flag) {
            flags.set(k, value);
        }
        i += 1;
    }
    let mut warnings = Vec::new();
    let (file, en_ns, rules) = match &config_file {
        Some(path) => {
            let text = read_file(path).map_err(|e| ConfigError(format!("config {path}: {e}")))?;
            let (raw, en_ns, rules) = parse_file(path, &text, &mut warnings)?;
            let rules = parse_bypass_rules(&rules)
                .map_err(|e| ConfigError(format!("config {path}: {e}")))?;
            (raw, en_ns, rules)
        }
        None => (Raw::default(), None, Vec::new()),
    };
    let r = flags.or(file);
    let node_name = r
        .node_name
        .or_else(|| env("NODE_NAME"))
        .or_else(hostname)
        .ok_or_else(|| ConfigError("nodeName: not set and no hostname".into()))?;
    if node_name.is_empty() {
        return Err(ConfigError("nodeName: must not be empty".into()));
    }
    let datapath_type = r.datapath_type.unwrap_or_else(|| "system".into());
    if datapath_type != "system" && datapath_type != "netdev" {
        return Err(ConfigError(format!(
            "datapathType: {datapath_type:?} is not one of system, netdev"
        )));
    }
    let bridge = r.bridge.unwrap_or_else(|| "br-int".into());
    if !is_valid_ifname(&bridge) {
        return Err(ConfigError(format!(
            "bridge: {bridge:?} is not a valid interface name (1-15 bytes, no '/', ':' or space)"
        )));
    }
    let source = match (r.kubeconfig, r.manifests) {
        (Some(_), Some(_)) => {
            return Err(ConfigError(
                "kubeconfig and manifests: give exactly one source, not both".into(),
            ));
        }
        (Some(k), None) => Source::Kubeconfig(PathBuf::from(k)),
        (None, Some(m)) => Source::Manifests(PathBuf::from(m)),
        (None, None) => Source::InCluster,
    };
    let external_node_namespace = r
        .external_node_namespace
        .or(en_ns)
        .unwrap_or_else(|| "default".into());
    Ok(Config {
        node_name,
        ovs_rundir: PathBuf::from(
            r.ovs_rundir
                .unwrap_or_else(|| "/var/run/openvswitch".into()),
        ),
        bridge,
        datapath_type,
        source,
        external_node_namespace,
        state_socket: PathBuf::from(
            r.state_socket
                .unwrap_or_else(|| "/run/tether/tether.sock".into()),
        ),
        policy_bypass_rules: rules,
        allow_insecure_tls: r.allow_insecure_tls.unwrap_or(false),
        allow_plain_http: r.allow_plain_http.unwrap_or(false),
        warnings,
    })
}

#[cfg(test)]
mod tests;
