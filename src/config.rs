//! `tether run` settings: command-line flags and the YAML config file
//! (docs/design.md#settings-flags-and-config-file). Every flag is also a config key
//! (camelCase, as Antrea's agent config writes them; the flag's own spelling is accepted
//! too); flags win over the file. The file also takes Antrea's
//! `externalNode.externalNodeNamespace`, `externalNode.policyBypassRules` and
//! `antreaClientConnection.kubeconfig` (the antrea-controller's API). Unknown keys
//! warn; an invalid value (a bypass rule included) refuses to start, naming the key, before
//! anything is connected to: `run` and `check` share this one validation. Pure: strings in,
//! `Config` out.

use std::path::PathBuf;

use serde_json::Value;

use crate::pipeline::externalnode::{PolicyBypassRule, parse_bypass_rules};

#[derive(Clone, Debug, PartialEq)]
/// Where the objects come from: a kubeconfig, a manifests directory, or in-cluster.
pub enum Input {
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
    pub source: Input,
    pub external_node_namespace: String,
    pub state_socket: PathBuf,
    /// Where an attached NIC's configuration is also kept (besides OVSDB), so that losing
    /// the bridge or the OVS database does not lose it (systemd's `StateDirectory=`).
    pub state_dir: PathBuf,
    /// `externalNode.policyBypassRules`, validated here so that `check` and `run` refuse a
    /// bad rule before connecting to anything.
    pub policy_bypass_rules: Vec<PolicyBypassRule>,
    /// Honour a kubeconfig's `insecure-skip-tls-verify` (refused otherwise).
    pub allow_insecure_tls: bool,
    /// Accept an `http://` API server (refused otherwise).
    pub allow_plain_http: bool,
    /// The kubeconfig of the antrea-controller's controlplane API (NetworkPolicy), Antrea's
    /// `antreaClientConnection.kubeconfig`; none: no NetworkPolicy source. The same TLS
    /// rules as the Kubernetes connection (`allow_insecure_tls`, `allow_plain_http`).
    pub antrea_kubeconfig: Option<PathBuf>,
    /// Warnings found while reading (unknown keys), for the log.
    pub warnings: Vec<String>,
    /// Information for the log (Antrea agent keys tether does not use, in one line).
    pub notes: Vec<String>,
}

impl Config {
    /// ovsdb-server's socket: `<ovs_rundir>/db.sock`.
    pub fn ovsdb_socket(&self) -> PathBuf {
        self.ovs_rundir.join("db.sock")
    }

    /// The bridge's OpenFlow management socket: `<ovs_rundir>/<bridge>.mgmt`.
    pub fn openflow_socket(&self) -> PathBuf {
        self.ovs_rundir.join(format!("{}.mgmt", self.bridge))
    }
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
        "--antrea-kubeconfig",
        "antreaKubeconfig",
        "FILE  antrea-controller API credentials, for NetworkPolicy (Antrea: antreaClientConnection.kubeconfig)",
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
        "--state-dir",
        "stateDir",
        "DIR  keeps an attached NIC's configuration (default /var/lib/tether)",
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
    antrea_kubeconfig: Option<String>,
    external_node_namespace: Option<String>,
    state_socket: Option<String>,
    state_dir: Option<String>,
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
            "antreaKubeconfig" => &mut self.antrea_kubeconfig,
            "externalNodeNamespace" => &mut self.external_node_namespace,
            "stateSocket" => &mut self.state_socket,
            "stateDir" => &mut self.state_dir,
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
            antrea_kubeconfig: self.antrea_kubeconfig.or(other.antrea_kubeconfig),
            external_node_namespace: self
                .external_node_namespace
                .or(other.external_node_namespace),
            state_socket: self.state_socket.or(other.state_socket),
            state_dir: self.state_dir.or(other.state_dir),
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

/// Antrea's agent-config spelling of a setting → tether's key (`pkg/config/agent/config.go`).
/// `clientConnection.kubeconfig` and `antreaClientConnection.kubeconfig` are handled where
/// the nested key is read.
const ANTREA_SPELLINGS: &[(&str, &str)] = &[
    ("ovsBridge", "bridge"),
    ("ovsDatapathType", "datapathType"),
    ("ovsRunDir", "ovsRundir"),
];

/// The other top-level keys of Antrea's `AgentConfig` (`pkg/config/agent/config.go`): a
/// VM's `antrea-agent.conf` sets some of them for features tether does not have. They are
/// listed in one info line, not warned about one by one.
const ANTREA_OTHER_KEYS: &[&str] = &[
    "featureGates",
    "cniSocket",
    "hostGateway",
    "trafficEncapMode",
    "podCIDRs",
    "noSNAT",
    "snatFullyRandomPorts",
    "tunnelType",
    "tunnelPort",
    "tunnelCsum",
    "defaultMTU",
    "hostProcPathPrefix",
    "serviceCIDR",
    "serviceCIDRv6",
    "trafficEncryptionMode",
    "wireGuard",
    "enableBridgingMode",
    "disableTXChecksumOffload",
    "apiPort",
    "clusterPort",
    "memberlist",
    "enablePrometheusMetrics",
    "flowCollectorAddr",
    "flowPollInterval",
    "activeFlowExportTimeout",
    "idleFlowExportTimeout",
    "nodePortLocal",
    "flowExporter",
    "kubeAPIServerOverride",
    "dnsServerOverride",
    "fqdnCacheMinTTL",
    "tlsCipherSuites",
    "tlsMinVersion",
    "transportInterface",
    "transportInterfaceCIDRs",
    "multicast",
    "antreaProxy",
    "egress",
    "ipsec",
    "multicluster",
    "auditLogging",
    "secondaryNetwork",
    "packetInRate",
    "hostNetworkAcceleration",
    "hostNetworkMode",
];

/// What a config file said.
#[derive(Default)]
struct FileSettings {
    raw: Raw,
    en_ns: Option<String>,
    rules: Vec<Value>,
    /// Antrea agent keys tether does not use (one info line).
    ignored_antrea: Vec<String>,
}

/// The file's settings. `text` is YAML (JSON is YAML too): tether's keys, and Antrea's
/// agent config (`/etc/antrea/antrea-agent.conf`) unchanged.
fn parse_file(
    name: &str,
    text: &str,
    warnings: &mut Vec<String>,
) -> Result<FileSettings, ConfigError> {
    // Long on purpose: Every config-file key (tether's and Antrea's agent config), each
    // validated and named in its error: a table.
    let err = |m: String| ConfigError(format!("config {name}: {m}"));
    let docs = crate::k8s::yaml::parse_documents(text).map_err(err)?;
    let mut out = FileSettings::default();
    let Some(doc) = docs.into_iter().next() else {
        return Ok(out);
    };
    let map = match doc {
        Value::Object(map) => map,
        // An empty file (or only comments) is an empty config.
        Value::Null => return Ok(out),
        _ => return Err(err("the top level must be a mapping".into())),
    };
    // One setting, two spellings (tether's and Antrea's): only one may be given.
    let mut seen: std::collections::BTreeMap<&'static str, String> = Default::default();
    let mut claim = |key: &'static str, spelled: &str| -> Result<(), ConfigError> {
        match seen.insert(key, spelled.to_string()) {
            Some(first) if first != spelled => Err(err(format!(
                "{first} and {spelled} both set the same setting ({key}); keep one"
            ))),
            _ => Ok(()),
        }
    };
    for (spelled, v) in map {
        // Accept the flag spelling too (`node-name` for `nodeName`), and Antrea's.
        let key = ANTREA_SPELLINGS
            .iter()
            .find(|(a, _)| *a == spelled)
            .map(|(_, t)| *t)
            .or_else(|| flag_key(&format!("--{spelled}")))
            .unwrap_or(spelled.as_str())
            .to_string();
        match (key.as_str(), v) {
            ("externalNode", Value::Object(en)) => {
                for (ek, ev) in en {
                    match (ek.as_str(), ev) {
                        ("externalNodeNamespace", Value::String(s)) => out.en_ns = Some(s),
                        ("policyBypassRules", Value::Array(a)) => out.rules = a,
                        ("policyBypassRules", Value::Null) => {}
                        ("externalNodeNamespace" | "policyBypassRules", other) => {
                            return Err(err(format!(
                                "externalNode.{ek}: unexpected value {other}"
                            )));
                        }
                        _ => warnings.push(format!(
                            "config {name}: unknown key externalNode.{ek} ignored"
                        )),
                    }
                }
            }
            ("externalNode", Value::Null) => {}
            ("externalNode", other) => {
                return Err(err(format!("externalNode must be a mapping, got {other}")));
            }
            // Antrea's kubeconfigs: the Kubernetes API, and the antrea-controller's API.
            (section @ ("clientConnection" | "antreaClientConnection"), Value::Object(cc)) => {
                let setting = if section == "clientConnection" {
                    "kubeconfig"
                } else {
                    "antreaKubeconfig"
                };
                for (ck, cv) in cc {
                    match (ck.as_str(), cv) {
                        ("kubeconfig", Value::String(s)) => {
                            claim(setting, &format!("{section}.kubeconfig"))?;
                            out.raw.set(setting, s);
                        }
                        ("kubeconfig", other) => {
                            return Err(err(format!(
                                "{section}.kubeconfig must be a string, got {other}"
                            )));
                        }
                        _ => out.ignored_antrea.push(format!("{section}.{ck}")),
                    }
                }
            }
            ("clientConnection" | "antreaClientConnection", Value::Null) => {}
            (section @ ("clientConnection" | "antreaClientConnection"), other) => {
                return Err(err(format!("{section} must be a mapping, got {other}")));
            }
            ("nodeType", Value::String(t)) if t == "externalNode" => {}
            ("nodeType", other) => {
                return Err(err(format!(
                    "nodeType {other}: tether runs on an ExternalNode (a VM or bare-metal host), not on a Kubernetes Node; set nodeType: externalNode or remove the key"
                )));
            }
            (k, _) if ANTREA_OTHER_KEYS.contains(&k) => out.ignored_antrea.push(k.to_string()),
            (k @ ("allowInsecureTLS" | "allowPlainHTTP"), Value::Bool(b)) => {
                if k == "allowInsecureTLS" {
                    out.raw.allow_insecure_tls = Some(b);
                } else {
                    out.raw.allow_plain_http = Some(b);
                }
            }
            (k @ ("allowInsecureTLS" | "allowPlainHTTP"), other) => {
                return Err(err(format!("{k} must be true or false, got {other}")));
            }
            (k, Value::String(s)) => match SETTINGS.iter().find(|(_, key, _)| *key == k) {
                Some((_, key, _)) => {
                    claim(key, &spelled)?;
                    out.raw.set(k, s);
                }
                None => warnings.push(format!("config {name}: unknown key {k} ignored")),
            },
            (k, other) => {
                if SETTINGS.iter().any(|(_, key, _)| *key == k) {
                    return Err(err(format!("{k} must be a string, got {other}")));
                }
                warnings.push(format!("config {name}: unknown key {k} ignored"));
            }
        }
    }
    out.ignored_antrea.sort();
    Ok(out)
}

/// The config file every command reads when none is given: the one the unit names.
pub const DEFAULT_CONFIG: &str = "/etc/tether/tether.yaml";

/// `args` with `--config DEFAULT_CONFIG` first when they name no config file and the
/// default exists (`exists`): `tether reset`, `status` or `plan` typed by hand then see
/// the daemon's own settings (its bridge, sockets and state directory).
pub fn with_default_config(args: &[String], exists: bool) -> Vec<String> {
    let named = args
        .iter()
        .any(|a| a == "--config" || a.starts_with("--config="));
    if named || !exists {
        return args.to_vec();
    }
    let mut v = vec!["--config".to_string(), DEFAULT_CONFIG.to_string()];
    v.extend_from_slice(args);
    v
}

/// Parse `tether run` arguments (after `run`). `read_file` and `env` are injected so the
/// parser stays pure and testable; the binary reads the file with
/// `files::read_trusted_text`, which refuses one that someone other than root or tether
/// could change (its error is this file's error: exit 2).
pub fn parse_run(
    args: &[String],
    read_file: &dyn Fn(&str) -> Result<String, String>,
    env: &dyn Fn(&str) -> Option<String>,
    hostname: &dyn Fn() -> Option<String>,
) -> Result<Config, ConfigError> {
    // Long on purpose: Every `tether run` flag and its precedence over the file and the
    // environment, in one place so the order of precedence is visible.
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
    let mut notes = Vec::new();
    let (file, en_ns, rules) = match &config_file {
        Some(path) => {
            let text = read_file(path).map_err(|e| ConfigError(format!("config {path}: {e}")))?;
            let f = parse_file(path, &text, &mut warnings)?;
            let rules = parse_bypass_rules(&f.rules)
                .map_err(|e| ConfigError(format!("config {path}: {e}")))?;
            if !f.ignored_antrea.is_empty() {
                notes.push(format!(
                    "config {path}: Antrea agent settings for features tether does not have, ignored: {}",
                    f.ignored_antrea.join(", ")
                ));
            }
            (f.raw, f.en_ns, rules)
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
    if !crate::netlink::valid_ifname(&bridge) {
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
        (Some(k), None) => Input::Kubeconfig(PathBuf::from(k)),
        (None, Some(m)) => Input::Manifests(PathBuf::from(m)),
        (None, None) => Input::InCluster,
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
        state_dir: PathBuf::from(r.state_dir.unwrap_or_else(|| "/var/lib/tether".into())),
        policy_bypass_rules: rules,
        allow_insecure_tls: r.allow_insecure_tls.unwrap_or(false),
        allow_plain_http: r.allow_plain_http.unwrap_or(false),
        antrea_kubeconfig: r.antrea_kubeconfig.map(PathBuf::from),
        warnings,
        notes,
    })
}

#[cfg(test)]
mod tests;
