//! The in-repo test API server, checked by a second real client: the official Python
//! Kubernetes client (`kubernetes` from PyPI, pinned in `scripts/py-kubernetes.sh`, cached
//! venv). `tests/python/client_habits.py` lists (all, in pages with continue tokens, by
//! field selector), watches with bookmarks while this test adds, changes and deletes a Pod,
//! and watches from a resourceVersion the server has compacted away (410). What the client
//! makes of each answer is compared exactly.

#![allow(clippy::unwrap_used)]

mod apiserver;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use apiserver::{ApiServer, Options, namespace, pod};
use serde_json::{Value, json};

fn python() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/py-kubernetes.sh");
    let out = Command::new(&script)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "scripts/py-kubernetes.sh failed");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

#[test]
fn python_client_lists_watches_with_bookmarks_and_sees_410() {
    let py = python();
    let srv = ApiServer::start(Options {
        // Asked for explicitly: the real cadence is a minute.
        bookmark_every: Some(Duration::from_millis(200)),
        ..Options::default()
    });
    srv.create(namespace("prod", json!({})));
    for (name, node) in [("web-1", "vm1"), ("web-2", "vm1"), ("db-1", "vm2")] {
        srv.create(pod("prod", name, node, json!({"app": "web"})));
    }
    let dir = std::env::temp_dir().join(format!("tether-pyclient-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters:\n- name: t\n  cluster: {{server: '{}'}}\nusers:\n- name: t\n  user: {{}}\ncontexts:\n- name: t\n  context: {{cluster: t, user: t}}\n",
            srv.url()
        ),
    )
    .unwrap();
    let mut child = Command::new(&py)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/client_habits.py"))
        .arg(&kubeconfig)
        .env("HOME", &dir)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (tx, rx) = crossbeam_channel::unbounded::<String>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let next = |want: &str| -> String {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("the Python client never said {want}"));
        assert!(line.starts_with(want), "expected {want}, got {line}");
        line
    };
    next("LISTED");
    let mut p = pod("prod", "web-9", "vm1", json!({"app": "web"}));
    p = srv.create(p);
    p["metadata"]["labels"]["v"] = json!("2");
    srv.update(p);
    srv.delete("pods", "prod/web-9").unwrap();
    next("WATCHED");
    srv.compact();
    stdin.write_all(b"go\n").unwrap();
    let result = next("RESULT");
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    let out: Value = serde_json::from_str(result.trim_start_matches("RESULT ")).unwrap();
    eprintln!("python client saw: {out:#}");
    assert_eq!(out["list"], json!(["db-1", "web-1", "web-2"]));
    assert_eq!(out["paged"], json!(["db-1", "web-1", "web-2"]));
    assert_eq!(out["pages"], 2);
    assert_eq!(out["field"], json!(["web-1", "web-2"]));
    assert_eq!(
        out["events"],
        json!([
            ["ADDED", "web-9", {"app": "web"}],
            ["MODIFIED", "web-9", {"app": "web", "v": "2"}],
            ["DELETED", "web-9", {"app": "web", "v": "2"}],
        ])
    );
    // A bookmark after the DELETED, of the watched kind, whose version the client took
    // as its own (what it resumes from).
    let b = &out["bookmark"];
    assert_eq!(b["kind"], "Pod");
    assert_eq!(b["apiVersion"], "v1");
    assert_eq!(b["rv"], b["client_rv"]);
    assert_eq!(b["rv"], json!(srv.resource_version().to_string()));
    // A watch from a compacted version: the client raises 410 Expired with the server's
    // reason and message.
    assert_eq!(out["gone"]["status"], 410);
    assert!(
        out["gone"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("Expired: too old resource version"),
        "{}",
        out["gone"]
    );
}
