use std::time::{Duration, Instant};

use super::render::{human, prometheus};
use super::*;

fn sample() -> Snapshot {
    let mut metrics = MetricsSnapshot {
        flow_mods: 17,
        openflow_reconnects: 1,
        ..Default::default()
    };
    metrics.syncs.insert(
        "tc".into(),
        SyncCounters {
            syncs: 3,
            errors: 1,
            duration_seconds_sum: 0.5,
            duration_seconds_max: 0.25,
        },
    );
    Snapshot {
        version: "0.1.0".into(),
        node: "vm1".into(),
        bridge: "br-int".into(),
        ready: true,
        uptime_seconds: 42,
        round: 3,
        ovsdb: ConnStatus {
            connected: true,
            socket: "/r/db.sock".into(),
            reconnects: 0,
        },
        openflow: ConnStatus {
            connected: false,
            socket: "/r/br-int.mgmt".into(),
            reconnects: 1,
        },
        flows: 12,
        queue_depth: 0,
        watches: vec![WatchStatus {
            kind: "Pod".into(),
            synced: true,
            resource_version: Some("7".into()),
            last_event_age_seconds: Some(4.4),
            events: 2,
            errors: 0,
            relists: 1,
            last_error: None,
            last_ok_age_seconds: Some(0.4),
        }],
        traffic_controls: vec![TcRow {
            name: "mirror-web".into(),
            effective_pods: vec!["default/a".into(), "default/b".into()],
            target_port: Some("tap0".into()),
            target_ofport: Some(5),
            return_port: None,
            return_ofport: None,
            flows: 4,
            last_error: None,
        }],
        external_node: EnRow {
            step: "attached".into(),
            nic: Some("eth1".into()),
            uplink: Some("eth1~".into()),
            uplink_ofport: Some(1),
            host_ofport: Some(2),
            addresses: vec!["192.0.2.10".into()],
            bypass_flows: 0,
            last_error: None,
        },
        metrics,
    }
}

#[test]
fn human_table() {
    assert_eq!(
        human(&sample()),
        "tether 0.1.0  node=vm1  bridge=br-int  round=3  READY  up 42s
ovsdb connected (/r/db.sock)  openflow DISCONNECTED (/r/br-int.mgmt, 1 reconnects)  flows=12  queue=0

WATCH
KIND  SYNCED  RV  LAST EVENT  EVENTS  ERRORS  RELISTS  LAST OK  LAST ERROR
Pod   yes     7   4s ago      2       0       1        0s ago   -

TRAFFICCONTROL
NAME        PODS                 TARGET   RETURN  FLOWS  LAST ERROR
mirror-web  default/a,default/b  tap0(5)  -       4      -

EXTERNALNODE
STEP      NIC   UPLINK    HOST PORT  ADDRESSES   BYPASS FLOWS  LAST ERROR
attached  eth1  eth1~(1)  eth1(2)    192.0.2.10  0             -
"
    );
}

#[test]
fn prometheus_text() {
    let t = prometheus(&sample());
    for line in [
        "# TYPE tether_syncs_total counter",
        "tether_syncs_total{key=\"tc\"} 3",
        "tether_sync_errors_total{key=\"tc\"} 1",
        "tether_sync_duration_seconds_sum{key=\"tc\"} 0.500000",
        "tether_flow_mods_total 17",
        "tether_openflow_reconnects_total 1",
        "tether_connected{conn=\"openflow\"} 0",
        "tether_watch_events_total{kind=\"Pod\"} 2",
        "tether_trafficcontrols{state=\"all\"} 1",
        "tether_ready 1",
    ] {
        assert!(t.lines().any(|l| l == line), "missing {line:?} in\n{t}");
    }
    // Every sample line is `name{labels} value` or `name value`, after its HELP and TYPE.
    for l in t.lines().filter(|l| !l.starts_with('#')) {
        let (_, v) = l.rsplit_once(' ').unwrap();
        assert!(v.parse::<f64>().is_ok(), "{l}");
    }
}

#[test]
fn json_round_trip() {
    let s = sample();
    let j = serde_json::to_string(&s).unwrap();
    let back: Snapshot = serde_json::from_str(&j).unwrap();
    assert_eq!(back, s);
}

#[test]
fn metrics_and_tracker() {
    let m = Metrics::default();
    m.record_sync("tc", true, Duration::from_millis(250));
    m.record_sync("tc", false, Duration::from_millis(500));
    let s = m.snapshot();
    assert_eq!(
        s.syncs["tc"],
        SyncCounters {
            syncs: 2,
            errors: 1,
            duration_seconds_sum: 0.75,
            duration_seconds_max: 0.5,
        }
    );
    let t = WatchTracker::default();
    let t0 = Instant::now();
    t.observe("Pod", "10", t0);
    t.observe("Pod", "", t0);
    assert_eq!(
        t.get("Pod", t0 + Duration::from_secs(2)),
        (Some("10".into()), Some(2.0), 2)
    );
    assert_eq!(t.get("Namespace", t0), (None, None, 0));
}

#[test]
fn server_answers_and_stops() {
    let dir = std::env::temp_dir().join(format!("tether-status-test-{}", std::process::id()));
    let path = dir.join("sub/tether.sock");
    let srv = Server::start(
        &path,
        Box::new(|r| match r {
            Request::Status => serde_json::to_string(&sample()).unwrap(),
            Request::Metrics => "m 1\n".into(),
        }),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(fetch(&path).unwrap(), sample());
    assert_eq!(ask(&path, Request::Metrics).unwrap(), "m 1\n");
    // A second server on the same path is refused while the first answers.
    assert!(matches!(
        Server::start(&path, Box::new(|_| String::new())),
        Err(StatusError::Bind(..))
    ));
    srv.stop();
    assert!(!path.exists());
    assert!(matches!(fetch(&path), Err(StatusError::Connect(..))));
    // A stale socket file (a killed daemon) is replaced.
    let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
    drop(l);
    let srv = Server::start(&path, Box::new(|_| "ok".into())).unwrap();
    assert_eq!(ask(&path, Request::Status).unwrap(), "ok");
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}
