//! ExternalNode through the `tether` binary (docs/design.md#tier-3-end-to-end):
//! `tether run` in the VM namespace of the shared bed (`externalnode_vm`), the
//! ExternalNode from a manifests directory and from the test API server; `kill -9` of
//! tether at every step of takeover and restore (the test-only crash point
//! `TETHER_CRASH_AT=<phase>-<step>` aborts right after that step, as a `kill -9` there
//! would) → after a restart the VM is reachable and the state converges.
//!
//! The API server listens on 127.0.0.1 of the test's own namespace, which tether in the VM
//! namespace cannot reach; two byte relays bridge it through a unix socket (path-based
//! sockets work across network namespaces): TCP in the VM → unix socket → the server.
//!
//! Here: the daemon and the helpers the tests share; the tests are in
//! `externalnode_daemon/` (`sources.rs`, `antrea.rs`, `cli.rs`, `networkpolicy.rs`,
//! `reject.rs`).

#![allow(clippy::unwrap_used)]

#[path = "externalnode_daemon/antrea.rs"]
mod antrea;
mod apiserver;
#[path = "externalnode_daemon/cli.rs"]
mod cli;
mod common;
mod externalnode_vm;
#[path = "externalnode_daemon/networkpolicy.rs"]
mod networkpolicy;
#[path = "externalnode_daemon/reject.rs"]
mod reject;
#[path = "externalnode_daemon/sources.rs"]
mod sources;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use common::{Sandbox, privileged, wait_for};
use externalnode_vm::*;

/// `tether <cmd> --config <the agent config> <extra> <the sandbox's OVS, bridge, node and
/// state socket>`, for `run`, `plan` and `reset` alike.
fn tether_argv(sb: &Sandbox, cmd: &str, extra: &[&str], bridge: &str) -> Vec<String> {
    let dir = sb.dir().to_str().unwrap().to_string();
    let config = sb.path("tether.yaml");
    // The agent config's ExternalNode keys (Antrea's), read by the daemon.
    std::fs::write(&config, CONFIG).unwrap();
    let mut argv: Vec<String> = vec![
        common::tether::binary().to_str().unwrap().into(),
        cmd.into(),
        "--config".into(),
        config.to_str().unwrap().into(),
    ];
    argv.extend(extra.iter().map(|s| s.to_string()));
    argv.extend(
        [
            "--ovs-rundir",
            &dir,
            "--bridge",
            bridge,
            "--datapath-type",
            common::datapath(),
            "--node-name",
            "vm1",
            "--state-socket",
            &format!("{dir}/tether.sock"),
            "--state-dir",
            &format!("{dir}/state"),
        ]
        .map(String::from),
    );
    argv
}

/// `tether run` in the VM namespace, optionally with a crash point; killed on drop.
struct Daemon {
    child: Option<Child>,
    /// How many `ready` lines the shared log had when this daemon started.
    ready_before: usize,
}

impl Daemon {
    fn start(sb: &Sandbox, source: &[&str], crash_at: Option<&str>) -> Daemon {
        Daemon::start_on(sb, source, crash_at, "br-int")
    }

    fn start_on(sb: &Sandbox, source: &[&str], crash_at: Option<&str>, bridge: &str) -> Daemon {
        let argv = tether_argv(sb, "run", source, bridge);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(sb.path("tether.log"))
            .unwrap();
        let mut c = sb.ns().command(&argv);
        c.env("RUST_LOG", "info")
            .env_remove(tether::controller::externalnode::CRASH_ENV)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        if let Some(p) = crash_at {
            c.env(tether::controller::externalnode::CRASH_ENV, p);
        }
        let ready_before = ready_lines(sb);
        Daemon {
            child: Some(c.spawn().unwrap()),
            ready_before,
        }
    }

    /// Wait for the crash point to abort it (SIGABRT).
    fn expect_abort(mut self, sb: &Sandbox, what: &str) {
        let mut c = self.child.take().unwrap();
        let end = Instant::now() + common::patience(Duration::from_secs(20));
        let st = loop {
            if let Some(st) = c.try_wait().unwrap() {
                break st;
            }
            if Instant::now() > end {
                let _ = c.kill();
                panic!(
                    "{what}: tether did not reach its crash point\n{}",
                    log_tail(sb)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(st.signal(), Some(6), "{what}: {st}\n{}", log_tail(sb));
    }

    /// SIGTERM; flows and ports stay (docs/design.md#logs-signals-and-systemd), exit code 0.
    /// Waits for the daemon's `ready` first: a SIGTERM before it installs its handlers kills
    /// it by the default action (systemd counts that as clean too, but it is not what this
    /// checks), and under QEMU's emulation a restart can look attached before then.
    fn stop(mut self, sb: &Sandbox) {
        let mut c = self.child.take().unwrap();
        let end = Instant::now() + common::patience(Duration::from_secs(20));
        while ready_lines(sb) <= self.ready_before
            && c.try_wait().unwrap().is_none()
            && Instant::now() < end
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        common::run(std::process::Command::new("kill").args(["-TERM", &c.id().to_string()]));
        let st = c.wait().unwrap();
        assert!(st.success(), "tether after SIGTERM: {st}\n{}", log_tail(sb));
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The daemon logs `ready` once its signal handlers, sources and controllers are up.
fn ready_lines(sb: &Sandbox) -> usize {
    let text = std::fs::read_to_string(sb.path("tether.log")).unwrap_or_default();
    text.lines()
        .filter(|l| l.trim_end().ends_with(" ready"))
        .count()
}

fn log_tail(sb: &Sandbox) -> String {
    let text = std::fs::read_to_string(sb.path("tether.log")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

fn write_en(dir: &Path, yaml: Option<&str>) {
    let f = dir.join("en.yaml");
    match yaml {
        Some(y) => {
            // Write then rename, so the poller never reads half a file.
            let tmp = dir.join(".en.yaml.tmp");
            std::fs::write(&tmp, y).unwrap();
            std::fs::rename(&tmp, &f).unwrap();
        }
        None => {
            let _ = std::fs::remove_file(&f);
        }
    }
}

/// Attached as expected: ports with Antrea's external_ids, the pair flows on the current
/// ofports, no step in flight.
fn wait_attached(sb: &Sandbox, ips: &str, what: &str) {
    // Polled while tether may still be rolling back or creating ports: every read may fail.
    let try_ofport = |name: &str| -> Option<u32> {
        sb.try_vsctl(&["get", "Interface", name, "ofport"])
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let try_ids = |port: &str| -> Option<serde_json::Value> {
        let out = sb
            .try_vsctl(&[
                "--format=json",
                "--columns=external_ids",
                "list",
                "Port",
                port,
            ])
            .ok()?;
        let v: serde_json::Value = serde_json::from_str(&out).ok()?;
        Some(v["data"][0][0].clone())
    };
    wait_for(Duration::from_secs(15), what, || {
        let (host, uplink) = (try_ofport("eth1")?, try_ofport("eth1~")?);
        let ids = try_ids("eth1")?;
        let ok = bridge_record(sb).is_none()
            && ids == host_ids(sb, "eth1~", ips)
            && en_flows(sb) == expected_en_flows(host, uplink);
        ok.then_some(())
    });
}

/// Given back: `eth1` equals its snapshot, nothing of ours on the bridge.
fn wait_restored(sb: &Sandbox, before: &serde_json::Value, what: &str) {
    wait_for(Duration::from_secs(15), what, || {
        (sb.vsctl(&["list-ports", "br-int"]).trim().is_empty() && bridge_record(sb).is_none())
            .then_some(())
    });
    assert_restored(sb.ns(), "eth1", before);
}

fn manifests_args(dir: &Path) -> Vec<String> {
    vec!["--manifests".into(), dir.to_str().unwrap().into()]
}
