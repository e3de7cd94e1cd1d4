//! What the daemon (`tether run`) and the commands build alike from a [`Config`]: the
//! ExternalNode controller's settings, the object source, and the NetworkPolicy source. (The OVS sockets are
//! `Config`'s own: [`Config::ovsdb_socket`], [`Config::openflow_socket`].) Building them in
//! one place keeps `plan` and `reset` seeing what `run` sees.

use crossbeam_channel::Sender;

use crate::config::{Config, Input};
use crate::controller::externalnode::EnConfig;
use crate::controlplane;
use crate::k8s::{self, Kind, KubeError, KubeEvent, Source, SourceConfig, Stores};

/// The ExternalNode controller's part of the configuration.
pub fn en_config(cfg: &Config) -> EnConfig {
    EnConfig {
        node_name: cfg.node_name.clone(),
        bridge: cfg.bridge.clone(),
        namespace: cfg.external_node_namespace.clone(),
        bypass_rules: cfg.policy_bypass_rules.clone(),
        ovs_rundir: cfg.ovs_rundir.clone(),
        datapath_type: cfg.datapath_type.clone(),
        state_dir: Some(cfg.state_dir.clone()),
    }
}

/// Start the object source `cfg` names (a kubeconfig, in-cluster, or a manifests
/// directory), filling `stores` and sending what changes to `events`.
pub fn start_source(
    cfg: &Config,
    stores: &Stores,
    events: Sender<KubeEvent>,
) -> Result<Source, KubeError> {
    let api = |cc: &k8s::ClusterConfig, http: k8s::HttpConfig| {
        let client = k8s::Client::new(cc, http)?;
        let sc = SourceConfig {
            node_name: cfg.node_name.clone(),
            external_node_namespace: cfg.external_node_namespace.clone(),
            kinds: Kind::ALL.to_vec(),
            watch: k8s::WatchConfig::default(),
        };
        Source::start_api(client, sc, stores.clone(), events.clone())
    };
    match &cfg.source {
        Input::Manifests(dir) => Source::start_manifests(
            k8s::ManifestsConfig::new(dir.clone(), &cfg.node_name, &cfg.external_node_namespace),
            stores.clone(),
            events.clone(),
        ),
        Input::Kubeconfig(path) => {
            let cc = k8s::kubeconfig::load_kubeconfig(path, None)?;
            let http = k8s::HttpConfig {
                allow_insecure: cfg.allow_insecure_tls,
                allow_plain_http: cfg.allow_plain_http,
                ..Default::default()
            };
            api(&cc, http)
        }
        Input::InCluster => api(&k8s::kubeconfig::in_cluster()?, Default::default()),
    }
}

/// The span key the controlplane watches select on: `<externalNodeNamespace>/<node>` (the
/// ExternalNode is named like the node).
pub fn controlplane_node_key(cfg: &Config) -> String {
    format!("{}/{}", cfg.external_node_namespace, cfg.node_name)
}

/// Start the NetworkPolicy source, the antrea-controller's controlplane API, with the
/// kubeconfig `cfg` names (`antreaKubeconfig`, Antrea's `antreaClientConnection.kubeconfig`)
/// and the Kubernetes connection's TLS rules, sending what changes to `updates`. `None`
/// when no such kubeconfig is configured. (Not started by the daemon yet: a source whose
/// policies nothing enforces would mislead; the policy controller will call this.)
pub fn start_controlplane_source(
    cfg: &Config,
    updates: Sender<controlplane::Update>,
) -> Result<Option<controlplane::Source>, KubeError> {
    if cfg.antrea_kubeconfig.is_none() {
        return Ok(None);
    }
    let client = controlplane_client(cfg)?;
    let sc = controlplane::SourceConfig {
        node_key: controlplane_node_key(cfg),
        backoff: k8s::BackoffConfig::default(),
    };
    controlplane::Source::start(client, sc, updates).map(Some)
}

/// A client of the antrea-controller's API from `antreaKubeconfig` (the same TLS rules as
/// the Kubernetes connection; keepalive on).
pub fn controlplane_client(cfg: &Config) -> Result<k8s::Client, KubeError> {
    let Some(path) = &cfg.antrea_kubeconfig else {
        return Err(KubeError::Config {
            what: "antreaKubeconfig".into(),
            detail: "not set".into(),
        });
    };
    let cc = k8s::kubeconfig::load_kubeconfig(path, None)?;
    let http = controlplane::source::http_config(k8s::HttpConfig {
        allow_insecure: cfg.allow_insecure_tls,
        allow_plain_http: cfg.allow_plain_http,
        ..Default::default()
    });
    k8s::Client::new(&cc, http)
}
