//! tether-side helpers for tests against the test server: a client, a source with short
//! backoffs, and store/server comparison.

use std::collections::BTreeMap;
use std::time::Duration;

use crossbeam_channel::Receiver;
use serde_json::Value;
use tether::k8s::{
    BackoffConfig, Client, ClusterConfig, Credentials, HttpConfig, Kind, KubeEvent, Source,
    SourceConfig, Store, Stores, WatchConfig,
};

use super::ApiServer;

pub fn cluster_config(srv: &ApiServer, credentials: Credentials) -> ClusterConfig {
    ClusterConfig {
        server: srv.url(),
        ca_pem: srv.shared_ca().map(|c| c.into_bytes()),
        client_cert_pem: None,
        client_key_pem: None,
        tls_server_name: None,
        insecure_skip_tls_verify: false,
        credentials,
        namespace: None,
        client_cert_files: None,
    }
}

/// Short timeouts so that tests notice trouble quickly.
pub fn http_config() -> HttpConfig {
    HttpConfig {
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(10),
        watch_stall_timeout: Duration::from_secs(30),
        allow_insecure: false,
        // The test API server speaks plain HTTP unless a test asks for TLS.
        allow_plain_http: true,
        tcp_keepalive: None,
    }
}

/// Watch config with millisecond backoffs and a given page size.
pub fn watch_config(page_size: u32) -> WatchConfig {
    WatchConfig {
        page_size,
        timeout_seconds: 290,
        backoff: BackoffConfig {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(100),
        },
    }
}

pub fn source_config(kinds: &[Kind], page_size: u32) -> SourceConfig {
    SourceConfig {
        node_name: "vm1".into(),
        external_node_namespace: "default".into(),
        kinds: kinds.to_vec(),
        watch: watch_config(page_size),
    }
}

/// Start an API source on `cc`; returns it, its stores and its event receiver.
pub fn start(
    cc: &ClusterConfig,
    kinds: &[Kind],
    page_size: u32,
) -> (Source, Stores, Receiver<KubeEvent>) {
    let client = Client::new(cc, http_config()).unwrap();
    let stores = Stores::default();
    let (tx, rx) = crossbeam_channel::bounded(10_000);
    let src =
        Source::start_api(client, source_config(kinds, page_size), stores.clone(), tx).unwrap();
    (src, stores, rx)
}

/// [`start`] with a watch config of its own.
pub fn start_with(
    cc: &ClusterConfig,
    kinds: &[Kind],
    watch: WatchConfig,
) -> (Source, Stores, Receiver<KubeEvent>) {
    let client = Client::new(cc, http_config()).unwrap();
    let stores = Stores::default();
    let (tx, rx) = crossbeam_channel::bounded(10_000);
    let cfg = SourceConfig {
        watch,
        ..source_config(kinds, watch.page_size)
    };
    let src = Source::start_api(client, cfg, stores.clone(), tx).unwrap();
    (src, stores, rx)
}

/// key → resourceVersion of a store.
pub fn store_versions<T: tether::k8s::store::Indexed>(s: &Store<T>) -> BTreeMap<String, String> {
    s.list()
        .iter()
        .map(|o| (o.key(), o.meta().resource_version.clone()))
        .collect()
}

/// key → resourceVersion of the server's objects that pass `keep`.
pub fn server_versions(
    srv: &ApiServer,
    resource: &str,
    keep: impl Fn(&Value) -> bool,
) -> BTreeMap<String, String> {
    srv.objects(resource)
        .into_iter()
        .filter(|(_, v)| keep(v))
        .map(|(k, v)| {
            (
                k,
                v["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect()
}

/// Pods the `spec.nodeName=vm1` selector lets through.
pub fn on_vm1(v: &Value) -> bool {
    v["spec"]["nodeName"] == "vm1"
}
