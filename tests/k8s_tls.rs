//! TLS and credentials against the test API server: a kubeconfig with a custom CA and a
//! client certificate, tls-server-name, a wrong CA (clear error, retried with backoff), and
//! an expired token followed by a rotated token file. Loopback only; no root needed.

mod apiserver;

use std::path::PathBuf;
use std::time::Duration;

use apiserver::client::{cluster_config, http_config, source_config};
use apiserver::cp_fixtures::base64;
use apiserver::{ApiServer, Certs, Options, namespace, wait_until};
use crossbeam_channel::Receiver;
use serde_json::json;
use tether::k8s::kubeconfig::load_kubeconfig;
use tether::k8s::{Client, ClusterConfig, Credentials, Kind, KubeEvent, Source, Stores};

const LIMIT: Duration = Duration::from_secs(20);

fn tls_server(names: &[&str], client_auth: bool, tokens: &[&str]) -> ApiServer {
    let srv = ApiServer::start(Options {
        certs: Some(Certs::new(names)),
        client_auth,
        tokens: tokens.iter().map(|s| s.to_string()).collect(),
        require_auth: true,
        ..Options::default()
    });
    srv.create(namespace("prod", json!({"team": "a"})));
    srv
}

fn start(cc: &ClusterConfig, kinds: &[Kind]) -> (Source, Stores, Receiver<KubeEvent>) {
    let client = Client::new(cc, http_config()).expect("client");
    let stores = Stores::default();
    let (tx, rx) = crossbeam_channel::bounded(1000);
    let src =
        Source::start_api(client, source_config(kinds, 500), stores.clone(), tx).expect("source");
    (src, stores, rx)
}

fn wait_synced(rx: &Receiver<KubeEvent>, kind: Kind) {
    loop {
        if rx.recv_timeout(LIMIT).expect("no Synced event") == KubeEvent::Synced(kind) {
            return;
        }
    }
}

fn errors(src: &Source, kind: Kind) -> (u64, String) {
    let s = src.status().get(&kind).cloned().unwrap_or_default();
    (s.errors_total, s.last_error.unwrap_or_default())
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tether-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

#[test]
fn kubeconfig_with_custom_ca_and_client_certificate() {
    let srv = tls_server(&["127.0.0.1"], true, &["a-token-nobody-has"]);
    let certs = srv.shared.opts_certs();
    let dir = temp_dir("kc-mtls");
    std::fs::write(dir.join("client.pem"), &certs.client_cert_pem).unwrap();
    let kc = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: vm\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority-data: {}\nusers:\n- name: node\n  user:\n    client-certificate: client.pem\n    client-key-data: {}\ncontexts:\n- name: vm\n  context: {{cluster: c, user: node}}\n",
        srv.url(),
        base64(certs.ca_pem.as_bytes()),
        base64(certs.client_key_pem.as_bytes())
    );
    std::fs::write(dir.join("kubeconfig"), kc).unwrap();
    let cc = load_kubeconfig(&dir.join("kubeconfig"), None).unwrap();
    let (src, stores, rx) = start(&cc, &[Kind::Namespace]);
    wait_synced(&rx, Kind::Namespace);
    assert_eq!(
        stores.namespaces.keys().into_iter().collect::<Vec<_>>(),
        ["prod"]
    );
    assert!(
        srv.requests().iter().all(|r| r.ends_with("auth=ok")),
        "{:?}",
        srv.requests()
    );
    src.stop();

    // The same server without the client certificate: 401, kept as a clear error.
    let anonymous = cluster_config(&srv, Credentials::None);
    let (src, _, _) = start(&anonymous, &[Kind::Namespace]);
    wait_until("401 reported", LIMIT, || {
        errors(&src, Kind::Namespace).0 >= 2
    });
    assert_eq!(
        errors(&src, Kind::Namespace).1,
        "unauthorized (401): Unauthorized"
    );
    src.stop();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tls_server_name_overrides_the_verified_name() {
    let srv = tls_server(&["kubernetes.test"], false, &["t"]);
    let mut cc = cluster_config(&srv, Credentials::Token("t".into()));
    // The certificate does not name 127.0.0.1: without the override the handshake fails.
    let (src, _, _) = start(&cc, &[Kind::Namespace]);
    wait_until("name mismatch reported", LIMIT, || {
        errors(&src, Kind::Namespace).0 >= 1
    });
    let (_, err) = errors(&src, Kind::Namespace);
    assert!(
        err.starts_with(&format!("TLS with {} failed: ", srv.url())),
        "{err}"
    );
    src.stop();
    cc.tls_server_name = Some("kubernetes.test".into());
    let (src, stores, rx) = start(&cc, &[Kind::Namespace]);
    wait_synced(&rx, Kind::Namespace);
    assert_eq!(stores.namespaces.len(), 1);
    src.stop();
}

#[test]
fn wrong_ca_is_a_clear_tls_error_retried_with_backoff() {
    let srv = tls_server(&["127.0.0.1"], false, &["t"]);
    let mut cc = cluster_config(&srv, Credentials::Token("t".into()));
    cc.ca_pem = Some(srv.shared.opts_certs().other_ca_pem.into_bytes());
    let (src, stores, rx) = start(&cc, &[Kind::Namespace]);
    wait_until("several TLS failures", LIMIT, || {
        errors(&src, Kind::Namespace).0 >= 4
    });
    let (_, err) = errors(&src, Kind::Namespace);
    assert!(
        err.starts_with(&format!("TLS with {} failed: ", srv.url()))
            && err.contains("UnknownIssuer"),
        "{err}"
    );
    // Nothing got through, nothing was stored, the source keeps trying.
    assert!(srv.requests().is_empty(), "{:?}", srv.requests());
    assert!(stores.namespaces.is_empty() && !stores.namespaces.has_synced());
    assert!(rx.try_recv().is_err());
    src.stop();
}

#[test]
fn expired_token_then_rotated_token_file_recovers() {
    let srv = tls_server(&["127.0.0.1"], false, &["fresh-token"]);
    let dir = temp_dir("token");
    let token = dir.join("token");
    std::fs::write(&token, "expired-token\n").unwrap();
    let cc = cluster_config(&srv, Credentials::TokenFile(token.clone()));
    let (src, stores, rx) = start(&cc, &[Kind::Namespace]);
    wait_until("401s", LIMIT, || errors(&src, Kind::Namespace).0 >= 2);
    assert!(
        errors(&src, Kind::Namespace)
            .1
            .starts_with("unauthorized (401)")
    );
    // The kubelet rotates the file; a 401 made the client drop its cached token.
    std::fs::write(&token, "fresh-token\n").unwrap();
    wait_synced(&rx, Kind::Namespace);
    assert_eq!(stores.namespaces.len(), 1);
    assert!(srv.requests().last().unwrap().ends_with("auth=ok"));
    src.stop();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn rotated_client_certificate_files_are_picked_up() {
    let srv = tls_server(&["127.0.0.1"], true, &["a-token-nobody-has"]);
    let certs = srv.shared.opts_certs();
    let dir = temp_dir("cert-rotation");
    // Start with a certificate the server does not accept.
    std::fs::write(dir.join("client.pem"), &certs.stranger_cert_pem).unwrap();
    std::fs::write(dir.join("client.key"), &certs.stranger_key_pem).unwrap();
    std::fs::write(dir.join("ca.pem"), &certs.ca_pem).unwrap();
    let kc = format!(
        "current-context: vm\nclusters:\n- name: c\n  cluster: {{server: '{}', certificate-authority: ca.pem}}\nusers:\n- name: node\n  user: {{client-certificate: client.pem, client-key: client.key}}\ncontexts:\n- name: vm\n  context: {{cluster: c, user: node}}\n",
        srv.url()
    );
    std::fs::write(dir.join("kubeconfig"), kc).unwrap();
    let cc = load_kubeconfig(&dir.join("kubeconfig"), None).unwrap();
    assert_eq!(
        cc.client_cert_files,
        Some((dir.join("client.pem"), dir.join("client.key")))
    );
    let (src, stores, rx) = start(&cc, &[Kind::Namespace]);
    wait_until("rejected certificate reported", LIMIT, || {
        errors(&src, Kind::Namespace).0 >= 2
    });
    let (_, err) = errors(&src, Kind::Namespace);
    assert!(
        err.starts_with(&format!("TLS with {} failed: ", srv.url())),
        "{err}"
    );
    // The kubelet writes the renewed pair; the failure made the client re-read the files.
    std::fs::write(dir.join("client.key"), &certs.client_key_pem).unwrap();
    std::fs::write(dir.join("client.pem"), &certs.client_cert_pem).unwrap();
    wait_synced(&rx, Kind::Namespace);
    assert_eq!(stores.namespaces.len(), 1);
    src.stop();
    std::fs::remove_dir_all(&dir).unwrap();
}
