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
//! we use buys. Goal: ≤ 1 s.
//!
//! And what one VM costs the API server at steady state (`kube_steady_*`): one ExternalNode,
//! 10 TrafficControls, 5 Pods, nothing changing, the test API server at kube-apiserver's
//! cadence (a bookmark a minute on idle watches; each watch ends at its `timeoutSeconds`),
//! for `BENCH_KUBE_STEADY_SECS` (default 600, 0 skips it) after the first lists, scaled to
//! an hour: requests (LISTs and WATCHes), bytes the VM received (counted by a TCP relay
//! in front of the server) and relists. Goal: 0 relists, no periodic LIST. No
//! baseline: this is the figure that sizes how many VMs one cluster carries.

#[path = "../tests/apiserver/mod.rs"]
mod apiserver;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use apiserver::{ApiServer, Certs, Options, external_node, namespace, pod, traffic_control};
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
    let secs: u64 = std::env::var("BENCH_KUBE_STEADY_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600);
    if secs > 0 {
        steady(secs);
    }
}

/// A TCP relay from a local port to `upstream`, counting the bytes that flow back to the
/// client (what the VM receives; TLS passes through untouched).
fn counting_relay(
    upstream: std::net::SocketAddr,
    received: Arc<AtomicU64>,
) -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("relay listen");
    let addr = l.local_addr().expect("relay addr");
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(client) = c else { continue };
            let Ok(server) = TcpStream::connect(upstream) else {
                continue;
            };
            let (c2, s2) = (
                client.try_clone().expect("clone"),
                server.try_clone().expect("clone"),
            );
            let n = received.clone();
            std::thread::spawn(move || pipe(c2, s2, None));
            std::thread::spawn(move || pipe(server, client, Some(n)));
        }
    });
    addr
}

fn pipe(mut from: TcpStream, mut to: TcpStream, count: Option<Arc<AtomicU64>>) {
    let mut buf = [0u8; 16 * 1024];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 || to.write_all(&buf[..n]).is_err() {
            break;
        }
        if let Some(c) = &count {
            c.fetch_add(n as u64, Ordering::Relaxed);
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
}

/// WATCH requests the server has seen.
fn count_watches(srv: &ApiServer) -> usize {
    srv.requests()
        .iter()
        .filter(|l| l.starts_with("GET ") && l.contains("\"watch\""))
        .count()
}

/// The `kube_steady_*` measures (see the module docs).
fn steady(secs: u64) {
    let srv = ApiServer::start(Options {
        certs: Some(Certs::new(&["127.0.0.1"])),
        bookmark_every: Some(Duration::from_secs(60)),
        ..Options::default()
    });
    srv.create(namespace("default", json!({})));
    for i in 0..5 {
        srv.create(pod(
            "default",
            &format!("p{i}"),
            "vm1",
            json!({"app": "web"}),
        ));
    }
    for i in 0..10u64 {
        srv.create(traffic_control(&format!("tc{i}"), "web", i + 1));
    }
    srv.create(external_node("default", "vm1", "192.0.2.10"));
    let received = Arc::new(AtomicU64::new(0));
    let upstream: std::net::SocketAddr = srv
        .url()
        .trim_start_matches("https://")
        .parse()
        .expect("server addr");
    let relay = counting_relay(upstream, received.clone());
    let ca = srv.shared.opts_certs().ca_pem;
    let client = Client::new(
        &cluster(&format!("https://{relay}"), &ca),
        HttpConfig::default(),
    )
    .expect("client");
    let stores = Stores::default();
    let (tx, rx) = crossbeam_channel::bounded(1024);
    let cfg = tether::k8s::SourceConfig {
        node_name: "vm1".into(),
        external_node_namespace: "default".into(),
        kinds: Kind::ALL.to_vec(),
        watch: tether::k8s::WatchConfig::default(),
    };
    let src = Source::start_api(client, cfg, stores, tx).expect("source");
    let mut synced = 0;
    while synced < Kind::ALL.len() {
        if let KubeEvent::Synced(_) = rx.recv_timeout(Duration::from_secs(60)).expect("sync") {
            synced += 1;
        }
    }
    // Each kind opens its watch after its list: let them all be open first.
    let opened = Instant::now();
    while count_watches(&srv) < Kind::ALL.len() && opened.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
    }
    // Steady state from here: count what the window costs.
    let count = |srv: &ApiServer| {
        let r = srv.requests();
        let gets: Vec<&String> = r.iter().filter(|l| l.starts_with("GET ")).collect();
        let watches = gets.iter().filter(|l| l.contains("\"watch\"")).count();
        (gets.len() - watches, watches)
    };
    let relists = |src: &Source| src.status().values().map(|s| s.relists).sum::<u64>();
    let (lists0, watches0) = count(&srv);
    let (bytes0, relists0) = (received.load(Ordering::Relaxed), relists(&src));
    let t0 = Instant::now();
    // Drain events meanwhile (there should be none but bookmarks, which are not events).
    while t0.elapsed() < Duration::from_secs(secs) {
        let _ = rx.recv_timeout(Duration::from_secs(1));
    }
    let hours = t0.elapsed().as_secs_f64() / 3600.0;
    let (lists1, watches1) = count(&srv);
    let (bytes1, relists1) = (received.load(Ordering::Relaxed), relists(&src));
    src.stop();
    #[allow(clippy::cast_precision_loss)] // counts are small
    let per_hour = |n: u64| n as f64 / hours;
    let requests = (lists1 - lists0 + watches1 - watches0) as u64;
    eprintln!(
        "steady {:.0}s: {} LISTs, {} WATCHes, {} bytes, {} relists",
        hours * 3600.0,
        lists1 - lists0,
        watches1 - watches0,
        bytes1 - bytes0,
        relists1 - relists0
    );
    println!(
        "bench kube_steady_requests_per_hour: tether={:.0}",
        per_hour(requests)
    );
    println!(
        "bench kube_steady_lists_per_hour: tether={:.0}",
        per_hour((lists1 - lists0) as u64)
    );
    println!(
        "bench kube_steady_bytes_received_per_hour: tether={:.0}B",
        per_hour(bytes1 - bytes0)
    );
    println!(
        "bench kube_steady_relists_per_hour: tether={:.0}",
        per_hour(relists1 - relists0)
    );
}
