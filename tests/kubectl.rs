//! The in-repo test API server, checked by a real client: `kubectl` (on these machines)
//! runs against it for what tether relies on — discovery, LIST of core and CRD kinds,
//! chunked LIST (`--chunk-size`), field and label selectors, and a WATCH that receives an
//! ADDED, a MODIFIED and a DELETED event the test makes. If kubectl reads the server as a
//! kube-apiserver, the server's habits that tether's tests depend on are real ones.

#![allow(clippy::unwrap_used)]

mod apiserver;

use std::io::BufReader;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use apiserver::{ApiServer, Options, namespace, pod, traffic_control, wait_until};
use serde_json::{Value, json};

struct Kubectl {
    dir: PathBuf,
}

impl Kubectl {
    fn new(srv: &ApiServer, tag: &str) -> Kubectl {
        let dir = std::env::temp_dir().join(format!("tether-kubectl-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("kubeconfig"),
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters:\n- name: t\n  cluster: {{server: '{}'}}\nusers:\n- name: t\n  user: {{}}\ncontexts:\n- name: t\n  context: {{cluster: t, user: t}}\n",
                srv.url()
            ),
        )
        .unwrap();
        Kubectl { dir }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new("kubectl");
        c.arg("--kubeconfig")
            .arg(self.dir.join("kubeconfig"))
            .arg("--cache-dir")
            .arg(self.dir.join("cache"))
            .args(args)
            .env("HOME", &self.dir)
            .env_remove("KUBECONFIG");
        c
    }

    /// Run; the JSON it printed (panics with stderr on failure).
    fn json(&self, args: &[&str]) -> Value {
        let o = self.command(args).output().unwrap();
        assert!(
            o.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
            panic!(
                "kubectl {args:?} printed no JSON ({e}): {}",
                String::from_utf8_lossy(&o.stdout)
            )
        })
    }
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn names(list: &Value) -> Vec<String> {
    let mut v: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

fn server() -> ApiServer {
    let srv = ApiServer::start(Options::default());
    srv.create(namespace("prod", json!({"team": "a"})));
    for (name, node, app) in [
        ("web-1", "vm1", "web"),
        ("web-2", "vm1", "web"),
        ("db-1", "vm1", "db"),
        ("web-3", "vm2", "web"),
        ("cache-1", "vm2", "cache"),
    ] {
        srv.create(pod("prod", name, node, json!({"app": app})));
    }
    srv.create(traffic_control("mirror-web", "web", 5));
    srv
}

#[test]
fn kubectl_lists_with_discovery_chunks_and_selectors() {
    let srv = server();
    let k = Kubectl::new(&srv, "get");
    let all = k.json(&["get", "pods", "-A", "-o", "json"]);
    assert_eq!(names(&all), ["cache-1", "db-1", "web-1", "web-2", "web-3"]);
    // A CRD kind, found through discovery of crd.antrea.io.
    let tcs = k.json(&["get", "trafficcontrols.crd.antrea.io", "-o", "json"]);
    assert_eq!(names(&tcs), ["mirror-web"]);
    let short = k.json(&["get", "tc", "-o", "json"]);
    assert_eq!(names(&short), ["mirror-web"]);
    // Chunked: pages of 2 with continue tokens, the same 5 Pods in the end.
    let before = srv.requests().len();
    let chunked = k.json(&["get", "pods", "-A", "--chunk-size=2", "-o", "json"]);
    assert_eq!(names(&chunked), names(&all));
    let pages: Vec<String> = srv.requests()[before..]
        .iter()
        .filter(|r| r.starts_with("GET /api/v1/pods"))
        .cloned()
        .collect();
    assert_eq!(pages.len(), 3, "{pages:#?}");
    assert!(
        pages.iter().all(|p| p.contains("\"limit\": \"2\"")),
        "{pages:#?}"
    );
    assert_eq!(
        pages.iter().filter(|p| p.contains("\"continue\"")).count(),
        2
    );
    // The selectors tether sends, and a label selector.
    let mine = k.json(&[
        "get",
        "pods",
        "-A",
        "--field-selector",
        "spec.nodeName=vm1",
        "-o",
        "json",
    ]);
    assert_eq!(names(&mine), ["db-1", "web-1", "web-2"]);
    let web = k.json(&["get", "pods", "-n", "prod", "-l", "app=web", "-o", "json"]);
    assert_eq!(names(&web), ["web-1", "web-2", "web-3"]);
    let not_web = k.json(&[
        "get",
        "pods",
        "-A",
        "-l",
        "app notin (web,db)",
        "-o",
        "json",
    ]);
    assert_eq!(names(&not_web), ["cache-1"]);
    let v = k.command(&["version", "-o", "json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(v["serverVersion"]["gitVersion"], "v1.33.0");
}

/// `kubectl get pods --watch --output-watch-events -o json`: the initial objects, then
/// ADDED, MODIFIED and DELETED of a Pod the test makes.
#[test]
fn kubectl_watches_added_modified_deleted() {
    let srv = server();
    let k = Kubectl::new(&srv, "watch");
    let mut child = k
        .command(&[
            "get",
            "pods",
            "-n",
            "prod",
            "--watch",
            "--output-watch-events",
            "-o",
            "json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = crossbeam_channel::unbounded::<Value>();
    std::thread::spawn(move || {
        for v in serde_json::Deserializer::from_reader(BufReader::new(out)).into_iter::<Value>() {
            match v {
                Ok(v) => {
                    if tx.send(v).is_err() {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
    });
    let next = || {
        rx.recv_timeout(Duration::from_secs(20))
            .expect("kubectl printed nothing")
    };
    // The listed objects first, as ADDED.
    for _ in 0..5 {
        assert_eq!(next()["type"], "ADDED");
    }
    wait_until("kubectl's watch open", Duration::from_secs(10), || {
        srv.requests()
            .iter()
            .any(|r| r.starts_with("GET /api/v1/namespaces/prod/pods") && r.contains("\"watch\""))
    });
    srv.create(pod("prod", "new", "vm1", json!({"app": "web"})));
    srv.update(pod("prod", "new", "vm1", json!({"app": "db"})));
    srv.delete("pods", "prod/new");
    let events: Vec<(String, String, String)> = (0..3)
        .map(|_| {
            let e = next();
            (
                e["type"].as_str().unwrap().to_string(),
                e["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                e["object"]["metadata"]["labels"]["app"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(
        events,
        [
            ("ADDED".into(), "new".into(), "web".into()),
            ("MODIFIED".into(), "new".into(), "db".into()),
            ("DELETED".into(), "new".into(), "db".into()),
        ]
    );
    let _ = child.kill();
    let _ = child.wait();
    // kubectl went away: its watch ended with it.
    wait_until(
        "the watch ending with kubectl",
        Duration::from_secs(10),
        || {
            srv.requests()
                .iter()
                .any(|r| r == "WATCH pods ended: the client went away")
        },
    );
}
