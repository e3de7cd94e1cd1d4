//! Hostile and broken input from the host itself, through the `tether` binary with a real
//! userspace OVS and a manifests directory in the ExternalNode bed (`externalnode_vm`): the
//! directory renamed away and a file replaced by a directory (nothing is torn down: the
//! uplink and TC Port rows keep their UUIDs, no restore), an alias bomb, a 5,000-deep file,
//! a FIFO and a symlink to /dev/zero next to a good file (the daemon stays up and small,
//! the good file works, later changes are seen), ExternalNodes on 127.0.0.1, on an address
//! of `lo` and on the bridge's own port (no link event on either, recorded with
//! `ip monitor link`), and a `device` target that is a NIC the host uses (refused, left
//! alone).

#![allow(clippy::unwrap_used)]

mod common;
mod externalnode_vm;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{Netns, privileged, wait_for};
use externalnode_vm::*;
use serde_json::Value;

/// A TrafficControl whose target is an `ovsInternal` port (created even with no Pods).
fn tc_yaml(name: &str, port: &str) -> String {
    format!(
        "apiVersion: crd.antrea.io/v1alpha2
kind: TrafficControl
metadata:
  name: {name}
spec:
  appliedTo:
    podSelector:
      matchLabels:
        app: web
  direction: Both
  action: Mirror
  targetPort:
    ovsInternal:
      name: {port}
"
    )
}

fn en_yaml(ips: &str) -> String {
    format!(
        "apiVersion: crd.antrea.io/v1alpha1
kind: ExternalNode
metadata:
  name: vm1
  namespace: default
spec:
  interfaces:
  - ips: [{ips}]
"
    )
}

/// The kind errors `tether status` shows for the manifests source.
fn watch_errors(st: &Value) -> Vec<String> {
    st["watches"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w["last_error"].as_str().map(str::to_string))
        .collect()
}

fn vm_rss_peak_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The manifests directory renamed away for 3 s (a config tool swapping it, an unmounted
/// volume), then a file replaced by a directory for 3 s: every object stays as it is. The
/// uplink and the TC port keep their Port rows (same UUIDs), no restore is logged, and
/// status shows the directory's error and when it was last read. (Before: the NIC was
/// given back and taken over again, and the TC port deleted and re-created.)
#[test]
fn an_unreadable_manifests_directory_changes_nothing() {
    if !privileged("an_unreadable_manifests_directory_changes_nothing") {
        return;
    }
    let bed = Bed::new();
    put(&bed.manifests, "en.yaml", EN_YAML);
    put(&bed.manifests, "tc.yaml", &tc_yaml("mirror", "tap0"));
    let t = bed.start();
    let uplink = bed.wait_port("eth1~", Duration::from_secs(20));
    let tap = bed.wait_port("tap0", Duration::from_secs(20));
    let away = bed.manifests.with_extension("away");
    std::fs::rename(&bed.manifests, &away).unwrap();
    // While it is away: status names the directory's error, and when it was last read.
    let st = wait_for(Duration::from_secs(5), "status to show the error", || {
        let st = bed.status();
        watch_errors(&st)
            .iter()
            .any(|e| e.contains("cannot list the directory"))
            .then_some(st)
    });
    for w in st["watches"].as_array().unwrap() {
        assert!(w["synced"].as_bool().unwrap(), "{w}");
        assert!(w["last_ok_age_seconds"].as_f64().is_some(), "{w}");
    }
    std::thread::sleep(Duration::from_secs(3));
    std::fs::rename(&away, &bed.manifests).unwrap();
    wait_for(Duration::from_secs(5), "status to clear", || {
        watch_errors(&bed.status()).is_empty().then_some(())
    });
    // A file replaced by a directory for 3 s.
    std::fs::remove_file(bed.manifests.join("tc.yaml")).unwrap();
    std::fs::create_dir(bed.manifests.join("tc.yaml")).unwrap();
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        watch_errors(&bed.status())
            .iter()
            .any(|e| e.contains("tc.yaml: not a regular file (a directory)")),
        "{}",
        bed.status()
    );
    std::fs::remove_dir(bed.manifests.join("tc.yaml")).unwrap();
    put(&bed.manifests, "tc.yaml", &tc_yaml("mirror", "tap0"));
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        bed.port_uuid("eth1~"),
        Some(uplink),
        "the uplink was re-created"
    );
    assert_eq!(
        bed.port_uuid("tap0"),
        Some(tap),
        "the TC port was re-created"
    );
    let log = t.log();
    assert!(
        !log.contains("restoring nic"),
        "a restore was logged:\n{log}"
    );
    assert!(!log.contains("deleting its objects"), "{log}");
    let errors = log
        .lines()
        .filter(|l| l.contains("cannot list the directory"))
        .count();
    assert_eq!(errors, 1, "one error line for the outage:\n{log}");
    assert!(t.running());
}

/// An alias bomb, a file nested 5,000 deep, a FIFO and a symlink to /dev/zero dropped
/// next to a good file: the daemon stays up (peak RSS under 100 MB), the good file's TC is
/// applied, each bad file is named in the log, and a change made afterwards is picked up
/// within 2 s. (Before: the bomb took the daemon to its 3 GB abort; the deep file overflowed
/// the manifests thread's stack; the FIFO blocked the poller for good.)
#[test]
fn hostile_files_next_to_a_good_one() {
    if !privileged("hostile_files_next_to_a_good_one") {
        return;
    }
    let bed = Bed::new();
    let d = &bed.manifests;
    let mut bomb = String::from(
        "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for w in ["a", "b", "c", "d", "e", "f", "g", "h", "i"].windows(2) {
        bomb.push_str(&format!(
            "{}: &{} [{}]\n",
            w[1],
            w[1],
            vec![format!("*{}", w[0]); 9].join(",")
        ));
    }
    put(d, "bomb.yaml", &bomb);
    let mut deep = String::new();
    for i in 0..5000 {
        deep.push_str(&" ".repeat(i));
        deep.push_str("k:\n");
    }
    put(d, "deep.yaml", &deep);
    assert!(
        std::process::Command::new("mkfifo")
            .arg(d.join("fifo.yaml"))
            .status()
            .unwrap()
            .success()
    );
    std::os::unix::fs::symlink("/dev/zero", d.join("zero.yaml")).unwrap();
    put(d, "tc.yaml", &tc_yaml("mirror", "tap0"));
    let t = bed.start();
    bed.wait_port("tap0", Duration::from_secs(20));
    for needle in [
        "bomb.yaml: line 6 column",
        "aliases expand to more than 100000 nodes",
        "deep.yaml: line 65 column",
        "fifo.yaml: not a regular file (a FIFO)",
        "zero.yaml: not a regular file (a character device)",
    ] {
        t.wait_log(needle, Duration::from_secs(5));
    }
    std::thread::sleep(Duration::from_secs(2));
    assert!(t.running());
    let peak = vm_rss_peak_kb(t.pid().unwrap());
    assert!(peak < 100 * 1024, "peak RSS {peak} kB");
    // A change after all that is still seen, within 2 s.
    let started = Instant::now();
    put(d, "tc.yaml", &tc_yaml("mirror", "tap1"));
    bed.wait_port("tap1", Duration::from_secs(2));
    eprintln!(
        "hostile files: peak RSS {peak} kB; change applied after {:?}",
        started.elapsed()
    );
    assert!(t.running());
}

/// `ip monitor link` in the VM namespace until dropped; the lines it printed.
struct LinkMonitor(Option<Child>);

impl LinkMonitor {
    fn start(ns: &Netns) -> LinkMonitor {
        let c = ns
            .command(&["ip", "-o", "monitor", "link"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // Let it subscribe before anything happens.
        std::thread::sleep(Duration::from_millis(200));
        LinkMonitor(Some(c))
    }

    fn lines(mut self) -> Vec<String> {
        let mut c = self.0.take().unwrap();
        let _ = c.kill();
        let out = c.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for LinkMonitor {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// ExternalNodes on 127.0.0.1, on a unicast address of `lo`, and on an address of the
/// bridge's own port: refused before any link is touched — no link event at all on `lo`
/// or `br-int` (`ip monitor link`), nothing in OVSDB, the error in status, the daemon up.
/// (Before: `lo` was set down, renamed `lo~` and rolled back, 12 times in 18 s; the
/// bridge's port was renamed and added to its own bridge.)
#[test]
fn externalnodes_on_loopback_or_the_bridge_touch_no_link() {
    if !privileged("externalnodes_on_loopback_or_the_bridge_touch_no_link") {
        return;
    }
    let bed = Bed::new();
    let vm = bed.sb.ns();
    vm.sh("ip addr add 203.0.113.251/32 dev lo
         ip addr add 203.0.113.250/32 dev br-int");
    let t = bed.start();
    for (ips, want) in [
        (
            "127.0.0.1",
            "127.0.0.1 is a loopback address: an ExternalNode names the VM's own unicast addresses",
        ),
        (
            "203.0.113.251",
            "refusing to take over: lo is the loopback interface",
        ),
        (
            "203.0.113.250",
            "refusing to take over: br-int is the OVS bridge's own internal port",
        ),
    ] {
        let mon = LinkMonitor::start(vm);
        put(&bed.manifests, "en.yaml", &en_yaml(ips));
        let st = wait_for(Duration::from_secs(10), want, || {
            let st = bed.status();
            st["external_node"]["last_error"]
                .as_str()
                .is_some_and(|e| e.contains(want))
                .then_some(st)
        });
        // A few polls' worth: a retry would show up here.
        std::thread::sleep(Duration::from_secs(2));
        let lines = mon.lines();
        let touched: Vec<&String> = lines
            .iter()
            .filter(|l| l.contains(": lo:") || l.contains("br-int"))
            .collect();
        assert!(touched.is_empty(), "{ips}: link events {touched:?}");
        assert_eq!(st["external_node"]["step"], "waiting", "{ips}: {st}");
        assert_eq!(bed.port_uuid("lo~"), None);
        assert_eq!(bed.port_uuid("br-int~"), None);
        assert_eq!(bridge_record(&bed.sb), None);
        assert!(
            vm.ip(&["addr", "show", "dev", "lo"])
                .contains("203.0.113.251/32")
        );
        assert!(vm.ip(&["link", "show", "dev", "lo"]).contains("UP"));
        assert!(t.running());
        // `tether check` reaches the same verdict, without touching anything either.
        let mon = LinkMonitor::start(vm);
        let report = bed.check();
        let line = report
            .lines()
            .find(|l| l.starts_with("FAIL externalnode: default/vm1: "))
            .unwrap_or_else(|| panic!("{ips}: no externalnode verdict in\n{report}"))
            .to_string();
        let reason = want.trim_start_matches("refusing to take over: ");
        assert!(line.contains(reason), "{ips}: {line}");
        assert!(mon.lines().is_empty(), "{ips}: check changed a link");
    }
    // And the good case: the NIC it took over.
    put(&bed.manifests, "en.yaml", EN_YAML);
    wait_for(Duration::from_secs(15), "the ExternalNode attached", || {
        (bed.status()["external_node"]["step"] == "attached").then_some(())
    });
    let report = bed.check();
    assert!(
        report.contains("ok   externalnode: default/vm1: eth1 is attached (tether's host port)"),
        "{report}"
    );
}

/// A TrafficControl whose `device` target is a NIC the host uses (eth2: an address and a
/// connected route) is refused, naming the TC and the device: eth2 is not attached to the
/// bridge and keeps its address; a good TC next to it works. (Before: eth2 was attached
/// with no message; on the kernel datapath it would stop serving the host.)
#[test]
fn a_device_target_the_host_uses_is_refused() {
    if !privileged("a_device_target_the_host_uses_is_refused") {
        return;
    }
    let bed = Bed::new();
    let vm = bed.sb.ns();
    let before = snapshot(vm, "eth2");
    let bad = tc_yaml("capture-mgmt", "x")
        .replace("ovsInternal:\n      name: x", "device:\n      name: eth2");
    put(&bed.manifests, "bad.yaml", &bad);
    put(&bed.manifests, "good.yaml", &tc_yaml("mirror", "tap0"));
    let t = bed.start();
    bed.wait_port("tap0", Duration::from_secs(20));
    t.wait_log(
        "TrafficControl capture-mgmt: refusing device eth2 as a target or return port: eth2 carries the host's addresses 198.51.100.10/24, 2001:db8:3::10/64",
        Duration::from_secs(10),
    );
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(bed.port_uuid("eth2"), None, "eth2 was attached");
    assert_eq!(snapshot(vm, "eth2"), before);
    let st = bed.status();
    let row = st["traffic_controls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "capture-mgmt")
        .cloned()
        .unwrap();
    assert!(
        row["last_error"]
            .as_str()
            .unwrap()
            .contains("refusing device eth2"),
        "{row}"
    );
    // Permanent for that TC: not retried (one log line), the daemon and the good TC fine.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        t.log().matches("refusing device eth2").count(),
        1,
        "{}",
        t.log()
    );
    assert!(t.running());
}
