//! The systemd tier: tether installed by the README's Install commands on a VM with a real
//! systemd as PID 1 (a Debian bookworm container, `tests/common/vm.rs`), and checked with
//! systemd's own tools: unit states, `StatusText`, `NRestarts`, the journal at priority err,
//! the service's own mount namespace, a reboot.
//!
//! Each test prints a table of its checks (expected, observed) and fails at the end if any
//! check did not hold, so one run shows every check's outcome.

mod common;
#[path = "systemd_vm/networkd.rs"]
mod networkd;

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

#[test]
fn unit_lifecycle_under_a_real_systemd() {
    if !common::privileged("unit_lifecycle_under_a_real_systemd") {
        return;
    }
    let mut c = Checks::new("unit_lifecycle");
    let mut vm = Vm::boot("sdlife", Addressing::Static);
    // A hardened image: new devices get IPv6 disabled, the NIC has its own IPv6 on. The host
    // port (a new device) must get the NIC's settings from inside the sandbox.
    vm.sh(
        "sysctl -qw net.ipv6.conf.default.disable_ipv6=1 net.ipv4.conf.eth1.arp_announce=2 \
           && ip -6 addr add 2001:db8:1::10/64 dev eth1 nodad",
    );
    install_by_readme(&vm, &mut c, "");

    // Active only after READY: systemd logs "Started" when READY=1 arrives; tether sends it
    // after its first full sync.
    let journal = vm.journal("tether", "");
    let synced = journal.find("first full sync done");
    let started = journal.find("Started tether.service");
    c.check(
        "active only after READY (first full sync logged before systemd's \"Started\")",
        "sync line < Started line",
        format!("sync at {synced:?}, Started at {started:?}"),
        matches!((synced, started), (Some(a), Some(b)) if a < b),
    );
    let (active, _, pid0) = active_pid(&vm);
    let status0 = vm.prop("tether", "StatusText");
    c.check(
        "enable --now: active with READY's STATUS",
        "active; \"ready: 0 TrafficControls, …, ExternalNode …; ovsdb connected, openflow connected\"",
        format!("{active}; {status0:?}"),
        active == "active"
            && status0.starts_with("ready: 0 TrafficControls")
            && status0.ends_with("ovsdb connected, openflow connected"),
    );
    let (ok, seen) = taken_over(&vm);
    c.check(
        "NIC taken over",
        "eth1~ and eth1 on br-int, 192.0.2.10 on eth1",
        seen,
        ok,
    );
    c.check(
        "VM reaches its gateway",
        "ping ok",
        format!("{}", ping_gw(&vm)),
        ping_gw(&vm),
    );

    let v6 = vm.sh("ip -6 addr show dev eth1; cat /proc/sys/net/ipv6/conf/eth1/disable_ipv6 /proc/sys/net/ipv4/conf/eth1/arp_announce");
    c.check(
        "default.disable_ipv6=1: the host port has the NIC's IPv6 and settings",
        "2001:db8:1::10/64 on eth1, disable_ipv6 0, arp_announce 2",
        v6.split_whitespace().collect::<Vec<_>>().join(" "),
        v6.contains("2001:db8:1::10/64") && v6.trim_end().ends_with("0\n2"),
    );

    // The service's own mount namespace: a file written back with the value it has (a
    // change without a change), a directory probed with a new file.
    for (path, writable) in [
        ("/proc/sys/net/ipv4/conf/eth1/arp_announce", true),
        ("/proc/sys/net/ipv6/conf/eth1/accept_ra", true),
        ("/proc/sys/net/core/somaxconn", false),
        ("/proc/sys/kernel/domainname", false),
        ("/run/systemd", false),
        ("/etc", false),
        ("/run/openvswitch", false),
        ("/run/tether", true),
    ] {
        let probe = if path.starts_with("/proc/") {
            format!("v=$(cat {path}) && echo $v > {path}")
        } else {
            format!("touch {path}/tt-probe && rm {path}/tt-probe")
        };
        let (code, out) = vm.status(&format!("nsenter -t {pid0} -m -- sh -c '{probe}'"));
        c.check(
            &format!("nsenter -t $MAINPID -m: {path}"),
            if writable { "writable" } else { "read-only" },
            if code == 0 {
                "writable".to_string()
            } else {
                format!("not writable: {}", out.trim())
            },
            (code == 0) == writable,
        );
    }

    // STATUS= follows the summary: a TrafficControl added.
    vm.sh(
        "ovs-vsctl add-port br-int web-a -- set interface web-a type=internal \
         -- set port web-a external_ids:container-id=c-web-a external_ids:pod-name=web-a \
         external_ids:pod-namespace=demo",
    );
    vm.write(&format!("{MANIFESTS}/mirror.yaml"), MIRROR);
    let (ok, status1) = status_text_until(&vm, Duration::from_secs(15), |s| {
        s.starts_with("ready: 1 TrafficControls") && s != status0
    });
    c.check(
        "STATUS= after a TrafficControl is added",
        "\"ready: 1 TrafficControls, <more> flows, …\"",
        format!("before {status0:?}; after {status1:?}"),
        ok,
    );
    let (n0, n1) = (flow_count(&status0), flow_count(&status1));
    c.check(
        "STATUS= flow count grows with the TrafficControl",
        "more flows than before",
        format!("{n0:?} → {n1:?}"),
        matches!((n0, n1), (Some(a), Some(b)) if b > a),
    );

    // ... and OVS stopped, then started again.
    vm.sh("systemctl stop ovs-vswitchd ovsdb-server");
    let (ok, status2) = status_text_until(&vm, Duration::from_secs(15), |s| {
        s.contains("ovsdb DISCONNECTED")
    });
    c.check(
        "STATUS= after OVS is stopped",
        "\"… ovsdb DISCONNECTED, openflow DISCONNECTED\"",
        status2,
        ok,
    );
    vm.sh("systemctl start openvswitch-switch");
    let (ok, status3) = status_text_until(&vm, Duration::from_secs(30), |s| {
        s.starts_with("ready: 1 TrafficControls")
            && s.ends_with("ovsdb connected, openflow connected")
    });
    c.check("STATUS= after OVS is back", "connected again", status3, ok);
    let back = poll(Duration::from_secs(20), || ping_gw(&vm).then_some(())).is_some();
    c.check(
        "VM reachable after the OVS restart",
        "ping ok",
        format!("{back}"),
        back,
    );
    let (_, _, pid_now) = active_pid(&vm);
    c.check(
        "OVS restart does not restart tether",
        "same MainPID, NRestarts 0",
        format!(
            "MainPID {pid0} → {pid_now}, NRestarts {}",
            vm.prop("tether", "NRestarts")
        ),
        pid_now == pid0 && vm.prop("tether", "NRestarts") == "0",
    );

    // systemctl stop: exit 0, flows unchanged, VM still reachable.
    let before = flows(&vm);
    vm.sh("systemctl stop tether");
    let status = vm.prop("tether", "ExecMainStatus");
    let result = vm.prop("tether", "Result");
    let after = flows(&vm);
    c.check(
        "systemctl stop",
        "exit 0, Result=success",
        format!("exit {status}, Result={result}"),
        status == "0" && result == "success",
    );
    c.check(
        "flow dump unchanged by the stop",
        "identical",
        format!(
            "{} flows before, {} after, identical: {}",
            before.lines().count(),
            after.lines().count(),
            before == after
        ),
        before == after && !before.is_empty(),
    );
    c.check(
        "VM reachable with tether stopped",
        "ping ok",
        format!("{}", ping_gw(&vm)),
        ping_gw(&vm),
    );

    // kill -9: restarted (RestartSec=5s) and READY again.
    vm.sh("systemctl start tether");
    let (_, _, pid1) = active_pid(&vm);
    vm.sh(&format!("kill -9 {pid1}"));
    // In the gap before the restart (once systemd has seen the death: `auto-restart` for
    // RestartSec=5s) no daemon holds the lock or the socket: reset still refuses, on
    // systemd's word.
    let (code, out) = vm.status(
        "for i in $(seq 40); do
           [ \"$(systemctl show -p SubState --value tether)\" = auto-restart ] && break
           sleep 0.1
         done
         tether reset --config /etc/tether/tether.yaml",
    );
    c.check(
        "tether reset in the crash-restart gap",
        "exit 1, activating (auto-restart)",
        format!("exit {code}: {out}"),
        code == 1 && out.contains("tether.service is activating (auto-restart)"),
    );
    let restarted = poll(Duration::from_secs(40), || {
        let (a, _, p) = active_pid(&vm);
        (a == "active" && p != pid1 && p != 0).then_some(p)
    });
    let status4 = vm.prop("tether", "StatusText");
    c.check(
        "kill -9 → restarted and READY",
        "active, new MainPID, NRestarts 1, StatusText ready",
        format!(
            "MainPID {pid1} → {restarted:?}, NRestarts {}, {status4:?}",
            vm.prop("tether", "NRestarts")
        ),
        restarted.is_some()
            && vm.prop("tether", "NRestarts") == "1"
            && status4.starts_with("ready:"),
    );

    // OVS started after tether: tether waits (activating, longer than WatchdogSec), then READY.
    vm.sh(
        "systemctl stop tether ovs-vswitchd ovsdb-server openvswitch-switch
         systemctl mask --runtime ovsdb-server ovs-vswitchd openvswitch-switch
         systemctl start --no-block tether",
    );
    // (A manual start resets NRestarts to 0.)
    let waiting = poll(Duration::from_secs(10), || {
        let (_, _, p) = active_pid(&vm);
        (p != 0).then_some(p)
    });
    std::thread::sleep(Duration::from_secs(70));
    let (a, sub, pid2) = active_pid(&vm);
    let restarts = vm.prop("tether", "NRestarts");
    c.check(
        "OVS not running: tether waits",
        "activating (start) for 70 s (> WatchdogSec=60), same MainPID, NRestarts 0",
        format!("{a} ({sub}) MainPID {waiting:?} → {pid2}, NRestarts {restarts}"),
        a == "activating" && waiting == Some(pid2) && restarts == "0",
    );
    let t = Instant::now();
    vm.sh(
        "systemctl unmask --runtime ovsdb-server ovs-vswitchd openvswitch-switch
         systemctl start openvswitch-switch",
    );
    let ready = poll(Duration::from_secs(60), || {
        (vm.prop("tether", "ActiveState") == "active").then_some(t.elapsed())
    });
    let (_, _, pid3) = active_pid(&vm);
    c.check(
        "OVS started after tether → READY",
        "active, same MainPID",
        format!("active after {ready:?}, MainPID {pid2} → {pid3}"),
        ready.is_some() && pid3 == pid2,
    );

    // A bad config: exit 2, not restarted, the reason at priority err.
    vm.sh("systemctl stop tether
         cp /etc/tether/tether.yaml /root/tether.yaml.good
         sed -i 's|^datapathType: .*|datapathType: bogus|' /etc/tether/tether.yaml");
    let restarts_before = vm.prop("tether", "NRestarts");
    let (code, _) = vm.status("systemctl start tether");
    std::thread::sleep(Duration::from_secs(8));
    let (a, _, _) = active_pid(&vm);
    let exit = vm.prop("tether", "ExecMainStatus");
    let restarts_after = vm.prop("tether", "NRestarts");
    c.check(
        "bad config → exit 2, not restarted",
        "start fails, exit 2, failed, NRestarts unchanged after 8 s (> RestartSec)",
        format!(
            "systemctl start rc {code}, exit {exit}, {a}, NRestarts {restarts_before} → {restarts_after}"
        ),
        code != 0 && exit == "2" && a == "failed" && restarts_before == restarts_after,
    );
    let err = vm.journal("tether", "-p err");
    c.check(
        "journalctl -u tether -p err shows the reason",
        "a line naming datapathType",
        err.lines()
            .filter(|l| l.contains("datapathType"))
            .collect::<Vec<_>>()
            .join(" / "),
        err.contains("datapathType") && err.contains("bogus"),
    );
    vm.sh("cp /root/tether.yaml.good /etc/tether/tether.yaml
         systemctl reset-failed tether
         systemctl start tether");

    // Reboot with the unit enabled: a fresh kernel (the NIC back as eth1 with its address,
    // no OVS devices), OVSDB and /etc kept.
    let st = vm.reboot();
    c.check(
        "systemctl reboot",
        "container exits 133 (reboot)",
        format!("{st}"),
        st.code() == Some(133),
    );
    vm.power_cycle(Addressing::Static);
    let up = poll(Duration::from_secs(90), || {
        (vm.prop("tether", "ActiveState") == "active").then_some(())
    });
    let status5 = vm.prop("tether", "StatusText");
    c.check(
        "after reboot: started at boot and READY",
        "active, StatusText ready",
        format!("{:?}; {status5:?}", vm.prop("tether", "ActiveState")),
        up.is_some() && status5.starts_with("ready:"),
    );
    let (ok, seen) = poll(Duration::from_secs(20), || {
        let t = taken_over(&vm);
        t.0.then_some(t)
    })
    .unwrap_or_else(|| taken_over(&vm));
    c.check(
        "after reboot: NIC taken over",
        "eth1~ and eth1 on br-int, 192.0.2.10 on eth1",
        seen,
        ok,
    );
    let reach = poll(Duration::from_secs(20), || ping_gw(&vm).then_some(())).is_some();
    c.check(
        "after reboot: VM reaches its gateway",
        "ping ok",
        format!("{reach}"),
        reach,
    );
    drop(vm);
    c.finish();
}

#[test]
fn watchdog_under_a_real_systemd() {
    if !common::privileged("watchdog_under_a_real_systemd") {
        return;
    }
    let mut c = Checks::new("watchdog");
    let vm = Vm::boot("sdwd", Addressing::Static);
    // A stricter watchdog than the unit's 60 s: 13 periods in the 130 s below.
    install_by_readme(
        &vm,
        &mut c,
        "mkdir -p /etc/systemd/system/tether.service.d
         printf '[Service]\\nWatchdogSec=10s\\n' >/etc/systemd/system/tether.service.d/watchdog.conf",
    );
    let (_, _, pid0) = active_pid(&vm);
    let end = Instant::now() + Duration::from_secs(130);
    let mut seen = Vec::new();
    while Instant::now() < end {
        let (a, _, p) = active_pid(&vm);
        let r = vm.prop("tether", "NRestarts");
        if a != "active" || p != pid0 || r != "0" {
            seen.push(format!("{a} pid {p} NRestarts {r}"));
            break;
        }
        std::thread::sleep(Duration::from_secs(5));
    }
    c.check(
        "130 s with WatchdogSec=10s",
        "active throughout, same MainPID, NRestarts 0",
        if seen.is_empty() {
            format!(
                "active, MainPID {pid0}, NRestarts {}, WatchdogUSec {}",
                vm.prop("tether", "NRestarts"),
                vm.prop("tether", "WatchdogUSec")
            )
        } else {
            seen.join("; ")
        },
        seen.is_empty() && vm.prop("tether", "WatchdogUSec") == "10s",
    );

    // A thread made to hang: the manifests poller, 10 s after it starts (test-only hook).
    vm.sh(
        "printf '[Service]\\nEnvironment=TETHER_TEST_HANG=manifests\\n' \
           >/etc/systemd/system/tether.service.d/hang.conf
         systemctl daemon-reload
         systemctl restart tether",
    );
    let (_, _, pid1) = active_pid(&vm);
    // Hangs at ~10 s, stuck after its 60 s deadline, then 10 s without a ping.
    let killed = poll(Duration::from_secs(150), || {
        let j = vm.journal("tether", "");
        j.contains("Watchdog timeout").then_some(j)
    });
    let j = killed.unwrap_or_else(|| vm.journal("tether", ""));
    let named = j
        .lines()
        .find(|l| l.contains("watchdog: thread manifests"))
        .unwrap_or("")
        .to_string();
    c.check(
        "hung thread named in the log",
        "\"watchdog: thread manifests has made no progress …\" at priority err",
        named.clone(),
        !named.is_empty()
            && vm
                .journal("tether", "-p err")
                .contains("watchdog: thread manifests"),
    );
    c.check(
        "hung thread → systemd's watchdog kills tether",
        "\"Watchdog timeout\" in the journal",
        j.lines()
            .find(|l| l.contains("Watchdog timeout"))
            .unwrap_or("none")
            .to_string(),
        j.contains("Watchdog timeout"),
    );
    let restarted = poll(Duration::from_secs(30), || {
        let (a, _, p) = active_pid(&vm);
        (a == "active" && p != pid1 && p != 0).then_some(p)
    });
    c.check(
        "… and restarts it",
        "active again, new MainPID, NRestarts 1",
        format!(
            "MainPID {pid1} → {restarted:?}, NRestarts {}",
            vm.prop("tether", "NRestarts")
        ),
        restarted.is_some() && vm.prop("tether", "NRestarts") == "1",
    );
    drop(vm);
    c.finish();
}

/// The packages of the binary under test (`scripts/package.sh`), one per version, in a
/// directory removed on drop.
struct Packages {
    dir: std::path::PathBuf,
}

impl Packages {
    fn build(versions: &[&str], formats: &str) -> Packages {
        let dir = std::env::temp_dir().join(format!("tt-pkg-{}", common::unique_suffix()));
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        for v in versions {
            common::run(
                std::process::Command::new(repo.join("scripts/package.sh")).args([
                    "--binary",
                    common::tether::binary().to_str().expect("utf-8 path"),
                    "--version",
                    v,
                    "--out",
                    dir.to_str().expect("utf-8 path"),
                    "--formats",
                    formats,
                    "--fast",
                ]),
            );
        }
        Packages { dir }
    }

    fn path(&self, file: &str) -> std::path::PathBuf {
        self.dir.join(file)
    }
}

impl Drop for Packages {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `ip -j` state of the NIC: what "given back as before" is compared on.
fn nic_state(vm: &Vm) -> String {
    vm.sh(&format!(
        "ip -j link show dev {NIC} | sed 's/\"PROMISC\",//'; ip -j addr show dev {NIC}; \
         ip -j route show table all dev {NIC} | tr '}}' '\\n' | sort; ip -j -6 route show table all dev {NIC} | tr '}}' '\\n' | sort"
    ))
}

/// The .deb on a real systemd: installed (not started), configured, started; upgraded to a
/// higher version while 50 pings a second cross the bridge (none lost, no port re-created,
/// the flows moved to the next round); then `tether reset` and removal give the NIC back.
#[test]
fn deb_package_lifecycle_under_a_real_systemd() {
    if !common::privileged("deb_package_lifecycle_under_a_real_systemd") {
        return;
    }
    let mut c = Checks::new("deb_package");
    let pkgs = Packages::build(&["0.1.0", "0.1.1"], "deb");
    let vm = Vm::boot("sdpkg", Addressing::Static);
    // Once the link-local address is through DAD.
    let before = poll(Duration::from_secs(10), || {
        let s = nic_state(&vm);
        (!s.contains("tentative")).then_some(s)
    })
    .expect("eth1's addresses settle");
    for v in ["0.1.0", "0.1.1"] {
        let f = format!("tether_{v}_amd64.deb");
        vm.copy_in(&pkgs.path(&f), &format!("/root/{f}"), 0o644);
    }

    // Install: files in place, tether not started (it has no config yet).
    let (code, out) = vm.status("dpkg -i /root/tether_0.1.0_amd64.deb");
    c.check(
        "dpkg -i",
        "exit 0, says it is not started",
        format!("exit {code}: {}", out.trim().replace('\n', " | ")),
        code == 0 && out.contains("installed, not started"),
    );
    let state = vm.sh(
        "systemctl is-active tether || true; systemctl is-enabled tether || true; \
         stat -c '%a %U' /etc/tether/tether.yaml /etc/tether /usr/bin/tether; \
         grep ^ExecStart= /lib/systemd/system/tether.service; man -w tether 2>/dev/null || ls /usr/share/man/man8/tether.8.gz",
    );
    c.check(
        "after install",
        "inactive, disabled; config 600, dir 700, binary 755; ExecStart /usr/bin/tether; man page",
        state.trim().replace('\n', " | "),
        state.starts_with(
            "inactive\ndisabled\n600 root\n700 root\n755 root\nExecStart=/usr/bin/tether run",
        ) && state.contains("tether.8"),
    );

    // Configure from a manifests directory and start.
    vm.write(&format!("{MANIFESTS}/externalnode.yaml"), EXTERNAL_NODE);
    vm.write(&format!("{MANIFESTS}/pods.yaml"), PODS);
    vm.write(&format!("{MANIFESTS}/mirror.yaml"), MIRROR);
    vm.sh(&format!(
        "sed -i -e 's|^kubeconfig: .*|manifests: {MANIFESTS}|' \
         -e 's|^datapathType: .*|datapathType: netdev|' \
         -e 's|^# nodeName: .*|nodeName: vm1|' /etc/tether/tether.yaml && \
         systemctl enable --now tether"
    ));
    let attached = poll(Duration::from_secs(30), || {
        let (ok, _) = taken_over(&vm);
        (ok && vm.prop("tether", "StatusText").starts_with("ready")).then_some(())
    })
    .is_some();
    c.check(
        "enable --now",
        "ready, NIC taken over",
        taken_over(&vm).1,
        attached,
    );
    let ports = |vm: &Vm| vm.sh("ovs-vsctl --format=csv --columns=_uuid,name list Port | sort");
    let round = |vm: &Vm| {
        vm.sh("ovs-vsctl get Bridge br-int external_ids:roundNum")
            .trim()
            .trim_matches('"')
            .to_string()
    };
    let (ports0, round0) = (ports(&vm), round(&vm));
    let pid0 = active_pid(&vm).2;

    // Upgrade under traffic: 50 pings a second from the gateway, through the bridge. (Each
    // is answered twice here: on the userspace datapath the VM's kernel also sees what
    // arrives on the uplink and answers from its own stack; the `system` datapath keeps the
    // uplink's packets from the stack. `tests/externalnode_vm` neutralises this where it
    // counts packets; here only losses count.)
    let ping = vm
        .gw
        .command(&["ping", "-q", "-i", "0.02", "-c", "500", "-W", "1", VM_IP])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let (code, out) = vm.status("dpkg -i /root/tether_0.1.1_amd64.deb");
    c.check(
        "dpkg -i of the higher version",
        "exit 0",
        format!("exit {code}: {}", out.trim().replace('\n', " | ")),
        code == 0,
    );
    let out = ping.wait_with_output().unwrap();
    let summary = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .unwrap_or("")
        .to_string();
    c.check(
        "pings during the upgrade",
        "500 transmitted, 500 received",
        summary.clone(),
        summary.starts_with("500 packets transmitted, 500 received"),
    );
    let ready = poll(Duration::from_secs(30), || {
        let (a, _, pid) = active_pid(&vm);
        (a == "active" && pid != pid0 && vm.prop("tether", "StatusText").starts_with("ready"))
            .then_some(pid)
    });
    c.check(
        "the upgrade restarted it",
        "a new MainPID, ready",
        format!("{pid0} → {ready:?}"),
        ready.is_some(),
    );
    let (ports1, round1) = (ports(&vm), round(&vm));
    c.check(
        "no port re-created",
        "the same Port rows (uuid, name)",
        if ports1 == ports0 {
            "same".into()
        } else {
            format!("{ports0} → {ports1}")
        },
        ports1 == ports0,
    );
    let next: u32 = round0.parse::<u32>().unwrap_or(0) + 1;
    let stale = vm.sh(&format!(
        "ovs-ofctl -O OpenFlow15 dump-flows br-int | grep -c 'cookie=0x{round0:x}' || true",
        round0 = round0.parse::<u32>().unwrap_or(0)
    ));
    c.check(
        "flows replaced by round",
        &format!("roundNum {round0} → {next}, no flow of round {round0} left"),
        format!(
            "roundNum {round1}, {} flows of round {round0}",
            stale.trim()
        ),
        round1 == next.to_string() && stale.trim() == "0",
    );

    // Reset, then remove: the NIC as before the package came.
    let (code, out) =
        vm.status("systemctl stop tether && tether reset --config /etc/tether/tether.yaml");
    c.check(
        "systemctl stop; tether reset",
        "exit 0, restored eth1",
        format!("exit {code}: {}", out.trim().replace('\n', " | ")),
        code == 0 && out.contains("restored eth1"),
    );
    let (code, out) = vm.status("dpkg -r tether");
    c.check(
        "dpkg -r",
        "exit 0, says the network stays and how to reset",
        format!("exit {code}: {}", out.trim().replace('\n', " | ")),
        code == 0 && out.contains("tether reset"),
    );
    let after = poll(Duration::from_secs(5), || {
        let s = nic_state(&vm);
        (s == before).then_some(s)
    });
    c.check(
        "the NIC after reset and removal",
        "ip -j link/addr/route equal to before install",
        if after.is_some() {
            "equal".into()
        } else {
            let now = nic_state(&vm);
            let diff: Vec<String> = before
                .lines()
                .zip(now.lines())
                .filter(|(a, b)| a != b)
                .map(|(a, b)| format!("before {a} / now {b}"))
                .collect();
            diff.join(" || ")
        },
        after.is_some(),
    );
    let gone = vm.sh("ls /usr/bin/tether /lib/systemd/system/tether.service 2>&1 || true; test -f /etc/tether/tether.yaml && echo config kept");
    c.check(
        "after dpkg -r",
        "binary and unit gone, config kept (conffile)",
        gone.trim().replace('\n', " | "),
        gone.contains("No such file")
            && gone.contains("config kept")
            && !gone.contains("\n/usr/bin/tether"),
    );
    c.check(
        "VM reaches its gateway",
        "ping ok",
        format!("{}", ping_gw(&vm)),
        ping_gw(&vm),
    );
    drop(vm);
    c.finish();
}
