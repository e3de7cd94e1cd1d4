//! tether as a product, through the binary
//! (docs/design.md#configuration-sources-and-exit-codes): `tether run` from a manifests
//! directory against a real userspace OVS; sd_notify READY/STATUS then STOPPING to a
//! `NOTIFY_SOCKET`; `tether status` (JSON, table, Prometheus metrics) over the state
//! socket; `tether check` passing against the live switch; SIGTERM → exit 0 with the flows
//! left in place and the socket removed.

#![allow(clippy::unwrap_used)]

mod common;
mod e2e;

use std::os::unix::net::UnixDatagram;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use common::{privileged, wait_for};
use e2e::Bed;

/// The binary under test (`TETHER_TEST_BIN` may name another build of it).
fn tether_bin() -> String {
    common::tether::binary().to_str().unwrap().to_string()
}

struct Guard(Option<Child>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn cli(bed: &Bed, args: &[&str]) -> Output {
    let bin = tether_bin();
    let mut argv = vec![bin.as_str()];
    argv.extend_from_slice(args);
    bed.sb.ns().command(&argv).output().unwrap()
}

fn out(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn run_notify_status_check_and_sigterm() {
    if !privileged("run_notify_status_check_and_sigterm") {
        return;
    }
    let mut bed = Bed::new();
    bed.add_pod("pa", 1);
    bed.add_pod("pb", 2);
    let _coll = bed.add_collector(&["coll0"]);
    bed.write_pods(&[("pa", "web"), ("pb", "web")]);
    bed.write("tc.yaml", e2e::MIRROR_WEB_TC);
    let args = bed.tether_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let sock = bed.sb.path("tether.sock");

    // A path socket: abstract ones are per network namespace (the unit test covers those).
    let notify_path = bed.sb.path("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let log = std::fs::File::create(bed.sb.path("tether.log")).unwrap();
    let bin = tether_bin();
    let mut argv = vec![bin.as_str(), "run"];
    argv.extend_from_slice(&args);
    let child = bed
        .sb
        .ns()
        .command(&argv)
        .env("NOTIFY_SOCKET", &notify_path)
        // WatchdogSec=0.2s: a WATCHDOG=1 every 100 ms from the event loop.
        .env("WATCHDOG_USEC", "200000")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut guard = Guard(Some(child));
    let logtext = || std::fs::read_to_string(bed.sb.path("tether.log")).unwrap_or_default();

    let mut buf = [0u8; 512];
    let mut recv = || {
        let n = notify
            .recv(&mut buf)
            .unwrap_or_else(|e| panic!("no notification: {e}\n{}", logtext()));
        String::from_utf8_lossy(&buf[..n]).to_string()
    };
    // Watchdog pings may come first; READY comes once.
    let ready = loop {
        let m = recv();
        if m != "WATCHDOG=1\n" {
            break m;
        }
    };
    assert!(
        ready.starts_with("READY=1\nSTATUS=ready: 1 TrafficControls, ")
            && ready
                .ends_with(" flows, ExternalNode waiting; ovsdb connected, openflow connected\n"),
        "{ready:?}"
    );

    // Status as JSON: the TC with both Pods, its target port and ofport, all four feeds.
    let coll_ofport = bed.ofport("coll0");
    let status = wait_for(Duration::from_secs(15), "status with the TC synced", || {
        let o = cli(
            &bed,
            &["status", "--json", "--state-socket", sock.to_str().unwrap()],
        );
        assert_eq!(o.status.code(), Some(0), "{}", out(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        (v["traffic_controls"][0]["effective_pods"].as_array()?.len() == 2).then_some(v)
    });
    assert_eq!(status["ready"], true);
    assert_eq!(status["node"], "vm1");
    assert_eq!(status["ovsdb"]["connected"], true);
    assert_eq!(status["openflow"]["connected"], true);
    let tc = &status["traffic_controls"][0];
    assert_eq!(tc["name"], "mirror-web");
    assert_eq!(
        tc["effective_pods"],
        serde_json::json!(["ns1/pa", "ns1/pb"])
    );
    assert_eq!(tc["target_port"], "coll0");
    assert_eq!(tc["target_ofport"], coll_ofport);
    assert_eq!(tc["last_error"], serde_json::Value::Null);
    let installed = bed.tc_flows().len();
    assert_eq!(tc["flows"], installed, "{:?}", bed.tc_flows());
    let kinds: Vec<(&str, bool)> = status["watches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["kind"].as_str().unwrap(), w["synced"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("Namespace", true),
            ("Pod", true),
            ("TrafficControl", true),
            ("ExternalNode", true)
        ]
    );
    let pods = status["watches"][1].clone();
    assert_eq!(pods["events"], 2, "{pods}");
    assert_eq!(status["external_node"]["step"], "waiting");

    // The table and the metrics.
    let o = cli(&bed, &["status", "--state-socket", sock.to_str().unwrap()]);
    let t = out(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    let row = t
        .lines()
        .find(|l| l.starts_with("mirror-web "))
        .unwrap_or_else(|| panic!("{t}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cols,
        [
            "mirror-web",
            "ns1/pa,ns1/pb",
            &format!("coll0({coll_ofport})"),
            "-",
            &installed.to_string(),
            "-"
        ],
        "{t}"
    );
    let o = cli(
        &bed,
        &[
            "status",
            "--metrics",
            "--state-socket",
            sock.to_str().unwrap(),
        ],
    );
    let m = out(&o);
    for line in [
        "tether_ready 1",
        "tether_connected{conn=\"ovsdb\"} 1",
        "tether_connected{conn=\"openflow\"} 1",
        "tether_trafficcontrols{state=\"all\"} 1",
        "tether_trafficcontrols{state=\"failing\"} 0",
        "tether_sync_errors_total{key=\"tc\"} 0",
    ] {
        assert!(m.lines().any(|l| l == line), "{line:?} missing in\n{m}");
    }
    assert!(
        m.lines()
            .any(|l| l.starts_with("tether_flow_mods_total ") && l != "tether_flow_mods_total 0"),
        "{m}"
    );

    // The preflight passes against the live switch (the running daemon is only a warning).
    let o = cli(&bed, &[&["check"][..], &args].concat());
    let t = out(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    for prefix in [
        "ok   privileges:",
        "ok   ovsdb:",
        "ok   bridge: br-int protocols=",
        "ok   openflow:",
        "ok   manifests:",
        "WARN state socket:",
    ] {
        assert!(
            t.lines().any(|l| l.starts_with(prefix)),
            "{prefix:?} in\n{t}"
        );
    }

    // The watchdog pings while running (every 100 ms here): wait for one, so the check
    // does not depend on how fast the steps above were.
    let mut pings = 0;
    for _ in 0..100 {
        if recv() == "WATCHDOG=1\n" {
            pings += 1;
            break;
        }
    }
    // SIGTERM: exit 0, STOPPING=1, socket gone, flows stay. A STATUS= refresh may be
    // queued in the socket from before the signal, or be sent while the loop has not yet
    // seen it (seen in the kernel tier's slow VM); READY= never comes twice, and nothing
    // comes after STOPPING=1.
    let mut c = guard.0.take().unwrap();
    common::run(Command::new("kill").args(["-TERM", &c.id().to_string()]));
    let mut before_stopping = Vec::new();
    loop {
        let m = recv();
        match m.as_str() {
            "WATCHDOG=1\n" => pings += 1,
            "STOPPING=1\n" => break,
            _ => before_stopping.push(m),
        }
    }
    assert!(
        before_stopping
            .iter()
            .all(|m| m.starts_with("STATUS=ready: ")),
        "{before_stopping:?}"
    );
    assert!(pings > 0, "no WATCHDOG=1 while running");
    assert_eq!(c.wait().unwrap().code(), Some(0), "{}", logtext());
    notify.set_nonblocking(true).unwrap();
    let mut after = Vec::new();
    while let Ok(n) = notify.recv(&mut buf) {
        after.push(String::from_utf8_lossy(&buf[..n]).to_string());
    }
    assert_eq!(after, Vec::<String>::new(), "sent after STOPPING=1");
    assert!(!sock.exists());
    assert_eq!(bed.tc_flows().len(), installed, "flows left in place");
    let o = cli(&bed, &["status", "--state-socket", sock.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
}
