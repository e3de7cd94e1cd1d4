//! `kube` benchmark group (scripts/bench.sh kube): the initial paged LIST of 10,000 Pods
//! from the in-repo test API server (TLS, pages of 500) into tether's Pod store.
//!
//! Measures, each in a fresh child process so memory figures do not mix:
//! - time from starting the source to "initial sync done";
//! - bytes of resident memory per cached Pod (VmRSS delta / 10,000).
//!
//! Baseline, measured the same way in the same run: a naive client that GETs the same
//! pages over the same ureq/TLS stack and keeps every Pod as a `serde_json::Value` (what
//! caching whole objects costs), so the ratio shows what typed decoding of only the fields
//! we use buys. Goal (issue 4): ≤ 1 s.

#[path = "../tests/apiserver/mod.rs"]
mod apiserver;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use apiserver::{ApiServer, Certs, Options};
use serde_json::json;
use tether::k8s::{
    Client, ClusterConfig, Credentials, HttpConfig, Kind, KubeEvent, Source, Stores,
};

const PODS: usize = 10_000;

fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// A Pod as a real API server returns it: most of it is fields tether ignores.
fn realistic_pod(i: usize) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("web-{i:05}-7d9f8c6b5-x2k4q"), "namespace": format!("team-{}", i % 20),
            "labels": {"app": "web", "pod-template-hash": "7d9f8c6b5", "tier": format!("t{}", i % 3)},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-30T08:00:00Z"},
            "generateName": "web-7d9f8c6b5-",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8c6b5",
                                 "uid": "0b5f2f5e-1c1e-4a4e-9f55-3b8f1f7d2a10", "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"nodeName": "vm1", "hostNetwork": false, "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "web", "image": "registry.example/web:1.27.3",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
                "imagePullPolicy": "IfNotPresent"}],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]},
        "status": {"phase": "Running", "podIP": format!("10.10.{}.{}", i / 250, i % 250 + 2), "hostIP": "192.0.2.10",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-30T08:00:05Z"}],
            "containerStatuses": [{"name": "web", "ready": true, "restartCount": 0, "image": "registry.example/web:1.27.3",
                "imageID": "registry.example/web@sha256:4f2d0e1c9b8a7f6e5d4c3b2a19080706050403020100ffeeddccbbaa99887766",
                "containerID": "containerd://a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90",
                "state": {"running": {"startedAt": "2026-11-30T08:00:04Z"}}}]}})
}

/// Child: serve 10,000 Pods over TLS; print the URL and the CA, then wait for stdin EOF.
fn serve() {
    let srv = ApiServer::start(Options {
        certs: Some(Certs::new(&["127.0.0.1"])),
        ..Options::default()
    });
    for i in 0..PODS {
        srv.create(realistic_pod(i));
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", srv.url()).ok();
    write!(out, "{}", srv.shared.opts_certs().ca_pem).ok();
    writeln!(out, "END").ok();
    out.flush().ok();
    let mut sink = String::new();
    while std::io::stdin()
        .read_line(&mut sink)
        .map(|n| n > 0)
        .unwrap_or(false)
    {}
}

fn cluster(url: &str, ca: &str) -> ClusterConfig {
    ClusterConfig {
        server: url.to_string(),
        ca_pem: Some(ca.as_bytes().to_vec()),
        client_cert_pem: None,
        client_key_pem: None,
        tls_server_name: None,
        insecure_skip_tls_verify: false,
        credentials: Credentials::None,
        namespace: None,
        client_cert_files: None,
    }
}

/// Child: measure one client; print "<ms> <bytes per pod>".
fn measure(which: &str, url: &str, ca: &str) {
    let cc = cluster(url, ca);
    let client = Client::new(&cc, HttpConfig::default()).expect("client");
    let before = rss_bytes();
    let t0 = Instant::now();
    let (count, keep): (usize, Box<dyn std::any::Any>) = if which == "tether" {
        let stores = Stores::default();
        let (tx, rx) = crossbeam_channel::bounded(2 * PODS);
        let cfg = tether::k8s::SourceConfig {
            node_name: "vm1".into(),
            external_node_namespace: "default".into(),
            kinds: vec![Kind::Pod],
            watch: tether::k8s::WatchConfig::default(),
        };
        let src = Source::start_api(client, cfg, stores.clone(), tx).expect("source");
        loop {
            match rx.recv_timeout(Duration::from_secs(60)).expect("sync") {
                KubeEvent::Synced(Kind::Pod) => break,
                _ => continue,
            }
        }
        let n = stores.pods.len();
        // Keep the store alive past the measurement; stop the watcher first.
        src.stop();
        (n, Box::new((stores, rx)))
    } else {
        let mut all: Vec<serde_json::Value> = Vec::with_capacity(PODS);
        let mut cont: Option<String> = None;
        loop {
            let mut q = vec![
                ("limit", "500".to_string()),
                ("fieldSelector", "spec.nodeName=vm1".to_string()),
            ];
            if let Some(c) = &cont {
                q.push(("continue", c.clone()));
            }
            let tp = Instant::now();
            let body = client.get("/api/v1/pods", &q).expect("list");
            if std::env::var_os("BENCH_TRACE").is_some() {
                eprintln!("page {} bytes in {:?}", body.len(), tp.elapsed());
            }
            let mut page: serde_json::Value = serde_json::from_slice(&body).expect("json");
            cont = page["metadata"]["continue"].as_str().map(str::to_string);
            if let serde_json::Value::Array(items) = page["items"].take() {
                all.extend(items);
            }
            if cont.is_none() {
                break;
            }
        }
        (all.len(), Box::new(all))
    };
    let elapsed = t0.elapsed();
    let after = rss_bytes();
    assert_eq!(count, PODS, "{which}: wrong number of Pods cached");
    println!(
        "{} {}",
        elapsed.as_secs_f64() * 1000.0,
        after.saturating_sub(before) / PODS as u64
    );
    drop(keep);
}

fn run_child(args: &[&str]) -> (f64, u64) {
    let exe = std::env::current_exe().expect("exe");
    let out = Command::new(exe).args(args).output().expect("child");
    assert!(
        out.status.success(),
        "child {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8_lossy(&out.stdout);
    let mut it = s.split_whitespace();
    let ms = it.next().and_then(|v| v.parse().ok()).expect("ms");
    let bytes = it.next().and_then(|v| v.parse().ok()).expect("bytes");
    (ms, bytes)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("--serve") => return serve(),
        Some("--measure") => return measure(&args[2], &args[3], &args[4]),
        _ => {}
    }
    let exe = std::env::current_exe().expect("exe");
    let mut server = Command::new(exe)
        .arg("--serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("server child");
    let mut lines = BufReader::new(server.stdout.take().expect("stdout")).lines();
    let url = lines.next().expect("url").expect("url");
    let mut ca = String::new();
    for l in lines.by_ref() {
        let l = l.expect("line");
        if l == "END" {
            break;
        }
        ca.push_str(&l);
        ca.push('\n');
    }
    // Warm-up so that both contenders meet a server whose allocations have settled.
    run_child(&["--measure", "baseline", &url, &ca]);
    let (t_ms, t_bytes) = run_child(&["--measure", "tether", &url, &ca]);
    let (b_ms, b_bytes) = run_child(&["--measure", "baseline", &url, &ca]);
    println!(
        "bench kube_initial_list_10k_pods: tether={t_ms:.1}ms baseline={b_ms:.1}ms ratio={:.2}",
        t_ms / b_ms
    );
    println!(
        "bench kube_memory_per_cached_pod: tether={t_bytes}B baseline={b_bytes}B ratio={:.2}",
        t_bytes as f64 / b_bytes.max(1) as f64
    );
    drop(server.stdin.take());
    let _ = server.wait();
}
