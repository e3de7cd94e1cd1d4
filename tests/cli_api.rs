//! `tether check` against the in-repo test API server (no root needed): reachability, and
//! the list/watch verbs per resource tried for real — a 403 on one verb and CRDs that are
//! not installed are each reported with their fix, and fail the check (exit code 1).

#![allow(clippy::unwrap_used)]

mod apiserver;

use std::path::Path;

use apiserver::{ApiServer, Fault, FaultAction, On, Options};

const TETHER: &str = env!("CARGO_BIN_EXE_tether");

/// Writes a file tether reads as configuration (config file, kubeconfig, CA) with mode
/// 0600 whatever the test's umask: tether refuses one that group or others may write.
fn write_private(p: impl AsRef<Path>, text: impl AsRef<[u8]>) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(&p, text)?;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))
}

fn check(srv: &ApiServer, name: &str) -> (i32, String) {
    check_with(srv, name, &["--allow-plain-http"])
}

fn check_with(srv: &ApiServer, name: &str, extra: &[&str]) -> (i32, String) {
    let dir = std::env::temp_dir().join(format!("tether-cli-api-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("kubeconfig");
    write_private(
        &kc,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: vm\nclusters:\n- name: c\n  cluster: {{server: '{}'}}\nusers:\n- name: vm\n  user: {{}}\ncontexts:\n- name: vm\n  context: {{cluster: c, user: vm}}\n",
            srv.url().trim_end_matches('/')
        ),
    )
    .unwrap();
    let o = std::process::Command::new(TETHER)
        .args([
            "check",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--node-name",
            "vm1",
            "--external-node-namespace",
            "vm-ns",
            "--ovs-rundir",
            dir.join("no-ovs").to_str().unwrap(),
            "--state-socket",
            dir.join("tether.sock").to_str().unwrap(),
        ])
        .args(extra)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (
        o.status.code().unwrap(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

fn lines_starting(text: &str, prefix: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

#[test]
fn rbac_verbs_are_tried_and_reported() {
    let srv = ApiServer::start(Options::default());
    let (_, t) = check(&srv, "ok");
    assert_eq!(
        lines_starting(&t, "ok   rbac "),
        [
            "ok   rbac pods: list+watch /api/v1/pods allowed",
            "ok   rbac namespaces: list+watch /api/v1/namespaces allowed",
            "ok   rbac trafficcontrols: list+watch /apis/crd.antrea.io/v1alpha2/trafficcontrols allowed",
            "ok   rbac externalnodes: list+watch /apis/crd.antrea.io/v1alpha1/namespaces/vm-ns/externalnodes allowed",
        ],
        "{t}"
    );
    assert_eq!(lines_starting(&t, "ok   api: ").len(), 1, "{t}");
    // The field selectors the daemon uses were sent.
    let reqs = srv.requests().join("\n");
    assert!(
        reqs.contains("spec.nodeName%3Dvm1") || reqs.contains("spec.nodeName=vm1"),
        "{reqs}"
    );

    // list pods forbidden, watch namespaces forbidden, CRDs missing.
    srv.inject(Fault {
        on: On::List,
        resource: Some("pods"),
        action: FaultAction::Status(403),
    });
    srv.inject(Fault {
        on: On::Watch,
        resource: Some("namespaces"),
        action: FaultAction::Status(403),
    });
    srv.set_crds_installed(false);
    let (code, t) = check(&srv, "bad");
    assert_eq!(code, 1, "{t}");
    let fails = lines_starting(&t, "FAIL rbac ");
    assert_eq!(fails.len(), 4, "{t}");
    assert!(
        fails[0].starts_with("FAIL rbac pods: list /api/v1/pods: forbidden"),
        "{t}"
    );
    assert!(
        fails[1].starts_with("FAIL rbac namespaces: watch /api/v1/namespaces: forbidden"),
        "{t}"
    );
    assert_eq!(
        fails[2],
        "FAIL rbac trafficcontrols: list /apis/crd.antrea.io/v1alpha2/trafficcontrols: not found"
    );
    assert!(
        t.contains("     fix: kubectl apply -f deploy/rbac.yaml"),
        "{t}"
    );
    assert!(
        t.contains("     fix: install Antrea's CRDs (crd.antrea.io) in the cluster"),
        "{t}"
    );
}

#[test]
fn unreachable_api_fails_with_a_fix() {
    let mut srv = ApiServer::start(Options::default());
    srv.stop();
    let (code, t) = check(&srv, "down");
    assert_eq!(code, 1, "{t}");
    let api = lines_starting(&t, "FAIL api: ");
    assert_eq!(api.len(), 1, "{t}");
    assert!(
        t.contains("     fix: check the server address, the network path and the CA"),
        "{t}"
    );
    assert!(lines_starting(&t, "ok   rbac").is_empty(), "{t}");
}

/// A plain http:// server is refused unless allowPlainHTTP / --allow-plain-http says so,
/// and `check` says how to fix it.
#[test]
fn plain_http_is_refused_with_a_fix() {
    let srv = ApiServer::start(Options::default());
    let (code, t) = check_with(&srv, "plain", &[]);
    assert_eq!(code, 1, "{t}");
    let fail = lines_starting(&t, "FAIL api credentials: ");
    assert_eq!(fail.len(), 1, "{t}");
    assert!(
        fail[0].ends_with(
            "plain http:// would send the bearer token and every object in cleartext; refusing."
        ),
        "{t}"
    );
    let i = t
        .lines()
        .position(|l| l.starts_with("FAIL api credentials"))
        .unwrap();
    let fix = t.lines().nth(i + 1).unwrap();
    assert!(
        fix.starts_with("     fix: use the API server's https:// address"),
        "{fix}"
    );
    assert!(
        fix.ends_with("set allowPlainHTTP: true in the config (--allow-plain-http)"),
        "{fix}"
    );
}

/// `RUST_LOG=trace` must not write the bearer token anywhere: ureq-proto hex-dumps every
/// request head at trace, so its (and rustls's) trace records are dropped.
#[test]
fn trace_logging_never_shows_the_token() {
    const TOKEN: &str = "tok-5f0c2a9e-never-log-me";
    let srv = ApiServer::start(Options {
        certs: Some(apiserver::Certs::new(&["127.0.0.1"])),
        tokens: vec![TOKEN.to_string()],
        require_auth: true,
        ..Options::default()
    });
    let dir = std::env::temp_dir().join(format!("tether-cli-api-{}-trace", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.crt");
    write_private(&ca, srv.shared_ca().unwrap()).unwrap();
    let kc = dir.join("kubeconfig");
    write_private(
        &kc,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: vm\nclusters:\n- name: c\n  cluster: {{server: '{}', certificate-authority: {}}}\nusers:\n- name: vm\n  user: {{token: {TOKEN}}}\ncontexts:\n- name: vm\n  context: {{cluster: c, user: vm}}\n",
            srv.url(),
            ca.display()
        ),
    )
    .unwrap();
    let o = std::process::Command::new(TETHER)
        .args([
            "check",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--node-name",
            "vm1",
        ])
        .args(["--ovs-rundir", dir.join("no-ovs").to_str().unwrap()])
        .args(["--state-socket", dir.join("s.sock").to_str().unwrap()])
        .env("RUST_LOG", "trace")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // It did talk to the server with the token, and logging was on.
    assert!(out.contains("ok   rbac pods: list+watch"), "{out}");
    assert!(srv.requests().iter().any(|r| r.ends_with("auth=ok")));
    assert!(out.contains("DEBUG ureq"), "{out}");
    assert!(
        !out.contains("TRACE ureq") && !out.contains("TRACE rustls"),
        "{out}"
    );
    assert!(!out.contains(TOKEN), "{out}");
    // Not in hex either (the dump's form), in any 4-byte window.
    let hex: String = out
        .chars()
        .filter(char::is_ascii_hexdigit)
        .collect::<String>()
        .to_lowercase();
    for w in TOKEN.as_bytes().windows(4) {
        let h: String = w.iter().map(|b| format!("{b:02x}")).collect();
        assert!(
            !hex.contains(&h),
            "hex of {:?} in the log",
            String::from_utf8_lossy(w)
        );
    }
}

/// `tether run` with an `http://` kubeconfig and no allowPlainHTTP: refused as a
/// configuration error (exit 2) before it connects to anything — here there is no OVS at
/// all, which it would otherwise wait for forever, and no bridge is made.
#[test]
fn run_refuses_a_bad_source_before_touching_ovs() {
    let dir = std::env::temp_dir().join(format!("tether-cli-api-{}-run", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("kubeconfig");
    write_private(
        &kc,
        "apiVersion: v1\nkind: Config\ncurrent-context: vm\nclusters:\n- name: c\n  cluster: {server: 'http://192.0.2.1:8080'}\nusers:\n- name: vm\n  user: {token: t}\ncontexts:\n- name: vm\n  context: {cluster: c, user: vm}\n",
    )
    .unwrap();
    let mut child = std::process::Command::new(TETHER)
        .args([
            "run",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--node-name",
            "vm1",
            "--ovs-rundir",
            dir.join("no-ovs").to_str().unwrap(),
            "--state-socket",
            dir.join("run/tether.sock").to_str().unwrap(),
            "--state-dir",
            dir.join("state").to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("tether run kept going with a refused source (waiting for OVS?)");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.contains("plain http:// would send the bearer token"),
        "{err}"
    );
    assert!(!err.contains("connecting to ovsdb"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
