//! The systemd tier: tether installed by the README's Install commands on a VM with a real
//! systemd as PID 1 (a Debian bookworm container, `tests/common/vm.rs`), and checked with
//! systemd's own tools: unit states, `StatusText`, `NRestarts`, the journal at priority err,
//! the service's own mount namespace, a reboot.
//!
//! Each test prints a table of its checks (expected, observed) and fails at the end if any
//! check did not hold, so one run shows every check's outcome.
//!
//! Here: the checks table and the install and status helpers the tests share; the tests are
//! in `systemd_vm/` (`unit.rs`, `watchdog.rs`, `deb.rs`, `networkd.rs`).

mod common;
#[path = "systemd_vm/deb.rs"]
mod deb;
#[path = "systemd_vm/networkd.rs"]
mod networkd;
#[path = "systemd_vm/nm.rs"]
mod nm;
#[path = "systemd_vm/unit.rs"]
mod unit;
#[path = "systemd_vm/watchdog.rs"]
mod watchdog;

use std::path::Path;
use std::time::{Duration, Instant};

use common::vm::{Addressing, GW_IP, NIC, VM_IP, Vm};

/// Checks and their outcomes, printed as a table.
struct Checks {
    test: &'static str,
    rows: Vec<(String, String, String, bool)>,
}

impl Checks {
    fn new(test: &'static str) -> Checks {
        Checks {
            test,
            rows: Vec::new(),
        }
    }

    fn check(&mut self, what: &str, expected: &str, observed: impl Into<String>, ok: bool) {
        let observed: String = observed.into();
        let observed = observed.trim().replace('\n', " / ");
        eprintln!(
            "[{}] {} {what}: expected {expected}; observed {observed}",
            self.test,
            if ok { "ok  " } else { "FAIL" }
        );
        self.rows
            .push((what.to_string(), expected.to_string(), observed, ok));
    }

    fn finish(self) {
        let mut table = format!(
            "\n{}: systemd checks\n| check | expected | observed | |\n|---|---|---|---|\n",
            self.test
        );
        for (w, e, o, ok) in &self.rows {
            let o: String = o.chars().take(160).collect();
            table.push_str(&format!(
                "| {w} | {e} | {o} | {} |\n",
                if *ok { "ok" } else { "FAIL" }
            ));
        }
        eprintln!("{table}");
        let failed: Vec<&str> = self
            .rows
            .iter()
            .filter(|r| !r.3)
            .map(|r| r.0.as_str())
            .collect();
        assert!(
            failed.is_empty(),
            "{}: failed checks: {failed:?}",
            self.test
        );
    }
}

/// Poll `f` every 250 ms until it returns Some or `timeout` passes.
fn poll<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The shell lines of the README's manual install block ("### Manual install" under
/// "## Install"; the packages come first there and have their own test below).
fn readme_install() -> Vec<String> {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let after = readme
        .split_once("\n## Install\n")
        .expect("README has an ## Install section")
        .1
        .split_once("\n### Manual install\n")
        .expect("README's Install has a ### Manual install section")
        .1;
    let block = after
        .split_once("```sh\n")
        .expect("an sh block under ## Install")
        .1
        .split_once("```")
        .expect("the block ends")
        .0;
    block
        .lines()
        .map(|l| match l.find(" #") {
            Some(i) => l[..i].trim().to_string(),
            None => l.trim().to_string(),
        })
        .filter(|l| !l.is_empty())
        .collect()
}

const MANIFESTS: &str = "/etc/tether/manifests";

const EXTERNAL_NODE: &str = "\
apiVersion: crd.antrea.io/v1alpha1
kind: ExternalNode
metadata:
  name: vm1
  namespace: vm-ns
spec:
  interfaces:
    - ips: [\"192.0.2.10\"]
";

const PODS: &str = "\
apiVersion: v1
kind: Namespace
metadata:
  name: demo
---
apiVersion: v1
kind: Pod
metadata:
  name: web-a
  namespace: demo
  labels:
    app: web
spec:
  nodeName: vm1
";

const MIRROR: &str = "\
apiVersion: crd.antrea.io/v1alpha2
kind: TrafficControl
metadata:
  name: mirror-web
spec:
  appliedTo:
    podSelector:
      matchLabels:
        app: web
  direction: Both
  action: Mirror
  targetPort:
    ovsInternal:
      name: tap0
";

/// Install tether in `vm` by running the README's Install commands inside it, from a copy of
/// the files they name. Two lines are stood in for, and must be there to be: the build (the
/// binary under test is copied to the path it would have built) and the kubeconfig (this VM
/// uses a manifests directory). The config "edit it" step points it at the manifests
/// directory, the userspace datapath and node name vm1. `before_start` runs just before the
/// last command (`systemctl daemon-reload && systemctl enable --now tether`). Returns what
/// `tether check` printed.
fn install_by_readme(vm: &Vm, c: &mut Checks, before_start: &str) -> String {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The test build (debug, with the test hooks) stands for the release binary.
    vm.copy_in(
        &common::tether::binary(),
        "/root/src/target/x86_64-unknown-linux-musl/release/tether",
        0o755,
    );
    vm.copy_in(
        &repo.join("systemd/tether.service"),
        "/root/src/systemd/tether.service",
        0o644,
    );
    vm.copy_in(
        &repo.join("deploy/tether.yaml"),
        "/root/src/deploy/tether.yaml",
        0o644,
    );
    vm.write(&format!("{MANIFESTS}/externalnode.yaml"), EXTERNAL_NODE);
    vm.write(&format!("{MANIFESTS}/pods.yaml"), PODS);
    let lines = readme_install();
    let last = lines.len() - 1;
    let (mut built, mut kubeconfig) = (false, false);
    let mut check = String::new();
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with("./scripts/build-static.sh") {
            built = true;
            continue;
        }
        if line.contains("my-kubeconfig") {
            kubeconfig = true;
            continue;
        }
        if i == last && !before_start.is_empty() {
            vm.sh(before_start);
        }
        let (code, out) = vm.status(&format!("cd /root/src && {line}"));
        if line.starts_with("tether check") {
            check = out.clone();
            c.check(
                "README install: tether check",
                "exit 0",
                format!("exit {code}: {}", out.lines().last().unwrap_or("")),
                code == 0,
            );
        } else {
            assert_eq!(code, 0, "README install line `{line}` failed: {out}");
        }
        if line.contains("deploy/tether.yaml /etc/tether/tether.yaml") {
            // "# edit it"
            vm.sh(&format!(
                "sed -i -e 's|^kubeconfig: .*|manifests: {MANIFESTS}|' \
                 -e 's|^datapathType: .*|datapathType: netdev|' \
                 -e 's|^# nodeName: .*|nodeName: vm1|' /etc/tether/tether.yaml"
            ));
        }
    }
    assert!(
        built && kubeconfig,
        "the README's Install block changed: expected its build-static and my-kubeconfig lines"
    );
    check
}

/// `StatusText`, once it satisfies `ok` (or the last one seen).
fn status_text_until(vm: &Vm, timeout: Duration, ok: impl Fn(&str) -> bool) -> (bool, String) {
    let mut last = String::new();
    let hit = poll(timeout, || {
        last = vm.prop("tether", "StatusText");
        ok(&last).then_some(())
    });
    (hit.is_some(), last)
}

/// The "N flows" of a STATUS= line.
fn flow_count(status: &str) -> Option<u64> {
    let (before, _) = status.split_once(" flows")?;
    before.rsplit(' ').next()?.parse().ok()
}

fn flows(vm: &Vm) -> String {
    let mut l: Vec<String> = vm
        .sh("ovs-ofctl -O OpenFlow15 --no-stats --no-names dump-flows br-int")
        .lines()
        .filter(|l| !l.starts_with("OFPST_FLOW") && !l.contains("reply"))
        .map(|l| l.trim().to_string())
        .collect();
    l.sort();
    l.join("\n")
}

fn ping_gw(vm: &Vm) -> bool {
    vm.try_sh(&format!("ping -c 3 -i 0.2 -W 1 {GW_IP}")).is_ok()
}

/// `eth1~` is a port of br-int and the internal port `eth1` holds the address.
fn taken_over(vm: &Vm) -> (bool, String) {
    let ports = vm.try_sh("ovs-vsctl list-ports br-int").unwrap_or_default();
    let addr = vm
        .try_sh(&format!("ip -br addr show dev {NIC}"))
        .unwrap_or_default();
    let ok = ports.lines().any(|p| p == format!("{NIC}~"))
        && ports.lines().any(|p| p == NIC)
        && addr.contains(&format!("{VM_IP}/24"));
    (
        ok,
        format!(
            "ports [{}]; {}",
            ports.trim().replace('\n', " "),
            addr.trim()
        ),
    )
}

fn active_pid(vm: &Vm) -> (String, String, u32) {
    let active = vm.prop("tether", "ActiveState");
    let sub = vm.prop("tether", "SubState");
    let pid = vm.prop("tether", "MainPID").parse().unwrap_or(0);
    (active, sub, pid)
}
