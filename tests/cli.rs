//! The `tether` command line without privileges: help, version, exit codes 2 for bad
//! usage and configuration (naming the flag or key), exit code 1 with a fix for a failed
//! preflight and for `status` without a daemon.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output};

const TETHER: &str = env!("CARGO_BIN_EXE_tether");

fn tether(args: &[&str]) -> Output {
    Command::new(TETHER)
        .args(args)
        .env_remove("NOTIFY_SOCKET")
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A directory for one test, mode 0755 whatever the umask (it is also a manifests
/// directory, which tether refuses when group or others may write it).
fn tmp(name: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let d = std::env::temp_dir().join(format!("tether-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// Writes a file tether reads as configuration (config file, kubeconfig, CA) with mode
/// 0600 whatever the test's umask: tether refuses one that group or others may write.
fn write_private(p: impl AsRef<Path>, text: impl AsRef<[u8]>) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(&p, text)?;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))
}

#[test]
fn version_and_help() {
    let o = tether(&["version"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!("tether {}\n", env!("CARGO_PKG_VERSION"))
    );
    for args in [
        &["--help"][..],
        &["run", "--help"],
        &["check", "-h"],
        &["status", "--help"],
    ] {
        let o = tether(args);
        assert_eq!(o.status.code(), Some(0), "{args:?}");
        let t = text(&o);
        for needle in [
            "  run ",
            "  check ",
            "  status ",
            "  version ",
            "--state-socket PATH",
            "[externalNodeNamespace]",
            "--json",
        ] {
            assert!(t.contains(needle), "{args:?}: {needle:?} missing in\n{t}");
        }
    }
}

#[test]
fn bad_usage_exits_2_naming_what() {
    for (args, needle) in [
        (&[][..], "usage: tether"),
        (&["frobnicate"], "unknown command \"frobnicate\""),
        (&["run", "--bogus"], "unknown argument --bogus"),
        (&["run", "--bridge"], "--bridge needs a value"),
        (&["run", "--datapath-type", "fast"], "datapathType"),
        (&["check", "--bridge", "a/b"], "bridge"),
        (
            &["status", "--kubeconfig", "k", "--manifests", "m"],
            "kubeconfig and manifests",
        ),
    ] {
        let o = tether(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(needle), "{args:?}: {}", text(&o));
    }
}

#[test]
fn invalid_config_value_exits_2_naming_the_key() {
    let d = tmp("config");
    let f = d.join("tether.yaml");
    write_private(&f, "bridge: br-int\ndatapathType: [netdev]\n").unwrap();
    let o = tether(&["run", "--config", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("datapathType must be a string"),
        "{}",
        text(&o)
    );
    // A bad bypass rule is refused by `run` and `check` alike before anything is connected
    // to (no OVS here: `run` used to retry forever, `check` to pass with rc 0).
    write_private(
        &f,
        "externalNode:\n  policyBypassRules:\n  - {direction: sideways, protocol: tcp, cidr: 192.0.2.0/24, port: 22}\n",
    )
    .unwrap();
    let none = d.join("no-ovs");
    for cmd in ["run", "check"] {
        let o = tether(&[
            cmd,
            "--config",
            f.to_str().unwrap(),
            "--ovs-rundir",
            none.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {}", text(&o));
        assert!(
            text(&o).contains("externalNode.policyBypassRules[0].direction: must be \"ingress\" or \"egress\", got \"sideways\""),
            "{cmd}: {}",
            text(&o)
        );
    }
    write_private(
        &f,
        "externalNode:\n  policyBypassRules:\n  - {direction: ingress, protocol: sctpx, cidr: 192.0.2.0/24, port: 22}\n",
    )
    .unwrap();
    let o = tether(&[
        "check",
        "--config",
        f.to_str().unwrap(),
        "--ovs-rundir",
        none.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("policyBypassRules[0].protocol"),
        "{}",
        text(&o)
    );
    write_private(&f, "externalNode:\n  externalNodeNamespace: 7\n").unwrap();
    let o = tether(&["check", "--config", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("externalNode.externalNodeNamespace"),
        "{}",
        text(&o)
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn check_fails_with_fixes_and_unknown_keys_warn() {
    let d = tmp("check");
    let f = d.join("tether.yaml");
    write_private(&f, "bridge: br-int\nfrobnicate: 1\n").unwrap();
    let o = tether(&[
        "check",
        "--config",
        f.to_str().unwrap(),
        "--ovs-rundir",
        d.join("no-ovs").to_str().unwrap(),
        "--manifests",
        d.join("no-manifests").to_str().unwrap(),
        "--state-socket",
        d.join("run/tether.sock").to_str().unwrap(),
        "--node-name",
        "vm1",
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    let rundir = d.join("no-ovs");
    for line in [
        "WARN config: config ".to_string(),
        "unknown key frobnicate ignored".to_string(),
        format!("FAIL ovsdb: {}/db.sock does not exist", rundir.display()),
        "     fix: start Open vSwitch (systemctl start openvswitch-switch) or point --ovs-rundir"
            .to_string(),
        format!("FAIL manifests: {}", d.join("no-manifests").display()),
        format!(
            "ok   state socket: {} can be created",
            d.join("run/tether.sock").display()
        ),
    ] {
        assert!(t.contains(&line), "{line:?} missing in\n{t}");
    }
    assert!(
        t.lines().last().unwrap().ends_with("failed, 1 warnings"),
        "{t}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn status_without_a_daemon_exits_1() {
    let d = tmp("status");
    let sock = d.join("tether.sock");
    for extra in [&[][..], &["--json"], &["--metrics"]] {
        let mut args = vec!["status", "--state-socket", sock.to_str().unwrap()];
        args.extend_from_slice(extra);
        let o = tether(&args);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(
            text(&o).contains("is `tether run` running with this --state-socket?"),
            "{}",
            text(&o)
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// The shipped sample config and example CRs are valid: the config parses with its bypass
/// rule, and each example decodes as the kind it claims with no validation error.
#[test]
fn shipped_config_and_examples_are_valid() {
    let root = env!("CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(format!("{root}/deploy/tether.yaml")).unwrap();
    let cfg = tether::config::parse_run(
        &["--config".into(), "deploy/tether.yaml".into()],
        &|_| Ok(text.clone()),
        &|_| None,
        &|| Some("vm1".into()),
    )
    .unwrap();
    assert_eq!(cfg.warnings, Vec::<String>::new());
    assert_eq!(cfg.external_node_namespace, "vm-ns");
    assert_eq!(
        cfg.source,
        tether::config::Input::Kubeconfig("/etc/tether/kubeconfig".into())
    );
    assert_eq!(cfg.policy_bypass_rules.len(), 1);
    for (file, kind, key) in [
        ("externalnode.yaml", "ExternalNode", "vm-ns/vm1"),
        ("trafficcontrol-mirror.yaml", "TrafficControl", "mirror-web"),
        (
            "trafficcontrol-redirect.yaml",
            "TrafficControl",
            "redirect-web",
        ),
    ] {
        let path = format!("{root}/deploy/examples/{file}");
        let p = tether::k8s::manifests::parse_file(file, &std::fs::read_to_string(&path).unwrap())
            .unwrap();
        assert_eq!(p.errors, Vec::<String>::new(), "{file}");
        assert_eq!(p.objects.len(), 1, "{file}");
        assert_eq!(p.objects[0].kind.name(), kind, "{file}");
        assert_eq!(p.objects[0].key, key, "{file}");
    }
}

/// `tether run` while OVS is absent: it retries, logging and telling systemd (`STATUS=`);
/// SIGTERM during start-up is a clean stop (exit 0). Under systemd (`JOURNAL_STREAM`) lines carry `<N>` priorities and
/// nothing else in front; otherwise `LEVEL target: message`.
#[test]
fn run_logs_for_journald_and_stops_on_sigterm_during_startup() {
    for journald in [true, false] {
        let d = tmp(&format!("journal-{journald}"));
        let log = d.join("log");
        let mut c = Command::new(TETHER);
        c.args([
            "run",
            "--ovs-rundir",
            d.join("no-ovs").to_str().unwrap(),
            "--manifests",
            d.to_str().unwrap(),
            "--state-socket",
            d.join("tether.sock").to_str().unwrap(),
            "--node-name",
            "vm1",
        ])
        .env("RUST_LOG", "info")
        .stderr(std::fs::File::create(&log).unwrap());
        if journald {
            c.env("JOURNAL_STREAM", "8:1234");
        } else {
            c.env_remove("JOURNAL_STREAM");
        }
        // Start-up stuck on OVS is also what systemd shows (STATUS=).
        let notify_path = d.join("notify");
        let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
        notify
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        c.env("NOTIFY_SOCKET", &notify_path);
        let mut child = c.spawn().unwrap();
        let mut buf = [0u8; 512];
        // A signal to this test process (CI run 16) interrupts the wait: wait again.
        let n = loop {
            match notify.recv(&mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => break r.unwrap(),
            }
        };
        let status = String::from_utf8_lossy(&buf[..n]).to_string();
        assert!(
            status.starts_with(&format!(
                "STATUS=connecting to ovsdb at {}/db.sock: ",
                d.join("no-ovs").display()
            )),
            "{status:?}"
        );
        let want = if journald {
            format!(
                "<4>connecting to ovsdb at {}/db.sock failed (retrying every 1s): ",
                d.join("no-ovs").display()
            )
        } else {
            format!(
                "WARN  tether::daemon: connecting to ovsdb at {}/db.sock failed (retrying every 1s): ",
                d.join("no-ovs").display()
            )
        };
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .any(|l| l.starts_with(&want))
        {
            assert!(
                std::time::Instant::now() < end,
                "{want:?} never logged:\n{}",
                std::fs::read_to_string(&log).unwrap()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert_eq!(child.wait().unwrap().code(), Some(0));
        let _ = std::fs::remove_dir_all(&d);
    }
}

/// The unit caps tether's memory and makes it, not ovs-vswitchd, the OOM killer's choice;
/// the cap is above tether's measured peak (55 MB static, 98 MB glibc at 1,000 TCs × 5,000
/// ports, plus ≤ 82 MB for the largest manifests file accepted).
#[test]
fn the_unit_limits_memory_and_yields_to_the_switch() {
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/systemd/tether.service"
    ))
    .unwrap();
    let value = |key: &str| {
        unit.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .map(str::to_string)
    };
    let max = value("MemoryMax").expect("MemoryMax= in the unit");
    let mb: u64 = max
        .strip_suffix('M')
        .expect("MemoryMax in M")
        .parse()
        .unwrap();
    assert!(
        mb >= (98 + 82) * 5 / 4,
        "MemoryMax={max} leaves too little room"
    );
    let oom: i32 = value("OOMScoreAdjust")
        .expect("OOMScoreAdjust=")
        .parse()
        .unwrap();
    assert!(oom > 0 && oom <= 1000, "OOMScoreAdjust={oom}");
}

/// `tether check --config <Antrea's agent config>` on a VM set up the way Antrea's
/// `install-vm.sh` and its docs leave it (our own files with the shape of theirs): the
/// kubeconfig comes from `clientConnection.kubeconfig`, the bridge from `ovsBridge`,
/// `antreaClientConnection.kubeconfig` is the controlplane's (no longer ignored), the
/// feature keys make one note; the kubeconfig's `insecure-skip-tls-verify: true` is refused
/// with a fix that names the CA first, then `allowInsecureTLS` / `--allow-insecure-tls`.
#[test]
fn check_reads_antreas_agent_config_and_names_the_tls_fix() {
    let d = tmp("antrea");
    let kc = d.join("antrea-agent.kubeconfig");
    // As `kubectl config set-cluster --insecure-skip-tls-verify=true` writes it.
    write_private(
        &kc,
        "apiVersion: v1\nclusters:\n- cluster:\n    insecure-skip-tls-verify: true\n    server: https://192.0.2.1:6443\n  name: kubernetes\ncontexts:\n- context:\n    cluster: kubernetes\n    user: antrea-agent\n  name: antrea-agent@kubernetes\ncurrent-context: antrea-agent@kubernetes\nkind: Config\npreferences: {}\nusers:\n- name: antrea-agent\n  user:\n    token: not-a-real-token\n",
    )
    .unwrap();
    let conf = d.join("antrea-agent.conf");
    write_private(
        &conf,
        format!(
            "featureGates:\n  ExternalNode: true\n  AntreaPolicy: true\nauditLogging:\n  maxSize: 500\novsBridge: br-int\nnodeType: externalNode\nexternalNode:\n  externalNodeNamespace: vm-ns\nclientConnection:\n  kubeconfig: {}\nantreaClientConnection:\n  kubeconfig: /etc/antrea/antrea-agent.antrea.kubeconfig\n",
            kc.display()
        ),
    )
    .unwrap();
    let o = tether(&[
        "check",
        "--config",
        conf.to_str().unwrap(),
        "--ovs-rundir",
        d.join("no-ovs").to_str().unwrap(),
        "--state-socket",
        d.join("run/tether.sock").to_str().unwrap(),
        "--node-name",
        "vm1",
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        !t.contains("WARN config"),
        "no warning per Antrea key:\n{t}"
    );
    assert!(
        t.contains("ok   config: config ")
            && t.contains("Antrea agent settings for features tether does not have, ignored: auditLogging, featureGates"),
        "{t}"
    );
    let i = t
        .lines()
        .position(|l| l.starts_with("FAIL api credentials: kubeconfig"))
        .unwrap_or_else(|| panic!("no credentials failure in\n{t}"));
    let line = t.lines().nth(i).unwrap();
    assert!(line.contains("insecure-skip-tls-verify"), "{line}");
    let fix = t.lines().nth(i + 1).unwrap();
    assert!(
        fix.contains("put the cluster CA in the kubeconfig")
            && fix.contains("--embed-certs=true")
            && fix.contains("allowInsecureTLS: true")
            && fix.contains("--allow-insecure-tls"),
        "{fix}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// The shipped RBAC grants only what tether uses (list and watch: it never gets one
/// object; the controlplane's three kinds only watched, and the one write, NetworkPolicy
/// realization status) and carries what a VM needs to keep working: short-lived tokens for its
/// account minted with `--duration` into a token file (which tether re-reads: k8s_tls's
/// `expired_token_then_rotated_token_file_recovers`), or the long-lived service-account
/// token Secret (as Antrea's VM RBAC has).
#[test]
fn shipped_rbac_is_list_watch_with_a_long_lived_token() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/rbac.yaml")).unwrap();
    let docs = tether::k8s::yaml::parse_documents(&text).unwrap();
    let mut verbs = Vec::new();
    for d in &docs {
        for rule in d["rules"].as_array().into_iter().flatten() {
            for v in rule["verbs"].as_array().unwrap() {
                for r in rule["resources"].as_array().unwrap() {
                    verbs.push(format!("{} {}", r.as_str().unwrap(), v.as_str().unwrap()));
                }
            }
        }
    }
    verbs.sort();
    assert_eq!(
        verbs,
        [
            "addressgroups watch",
            "appliedtogroups watch",
            "externalnodes list",
            "externalnodes watch",
            "namespaces list",
            "namespaces watch",
            "networkpolicies watch",
            "networkpolicies/status create",
            "pods list",
            "pods watch",
            "trafficcontrols list",
            "trafficcontrols watch",
        ]
    );
    let sa = docs.iter().find(|d| d["kind"] == "ServiceAccount").unwrap();
    let secret = docs
        .iter()
        .find(|d| d["kind"] == "Secret")
        .expect("a token Secret");
    assert_eq!(secret["type"], "kubernetes.io/service-account-token");
    assert_eq!(
        secret["metadata"]["annotations"]["kubernetes.io/service-account.name"],
        sa["metadata"]["name"]
    );
    assert_eq!(secret["metadata"]["namespace"], sa["metadata"]["namespace"]);
    // The short-lived way names the same account and ends in the token file tether reads.
    let mint = format!(
        "kubectl -n {} create token {} --duration=24h",
        sa["metadata"]["namespace"].as_str().unwrap(),
        sa["metadata"]["name"].as_str().unwrap()
    );
    assert!(text.contains(&mint), "{mint}");
    assert!(text.contains("`users[].user.tokenFile: /etc/tether/token`"));
}

/// Under systemd a fatal configuration error goes to the journal at priority 3, so
/// `journalctl -u tether -p err` shows why the start failed (it was filed at 6).
#[test]
fn fatal_config_errors_are_priority_3_under_systemd() {
    let o = Command::new(TETHER)
        .args(["run", "--datapath-type", "bogus"])
        .env("JOURNAL_STREAM", "8:12345")
        .env_remove("NOTIFY_SOCKET")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("<3>tether: datapathType: \"bogus\""),
        "{err}"
    );
}
