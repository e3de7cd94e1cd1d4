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
        flows_problem: None,
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
            watch_mode: None,
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
            identity: Some("verified".into()),
            last_error: None,
            repairs: 0,
            last_repair: None,
            cut_off: None,
            side_door: None,
        },
        metrics,
        network_policy: None,
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
        "tether_externalnode_side_door 0",
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
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sub/tether.sock");
    let srv = Server::start(
        &path,
        std::sync::Arc::new(|r| match r {
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
        Server::start(&path, std::sync::Arc::new(|_| String::new())),
        Err(StatusError::Bind(..))
    ));
    srv.stop();
    assert!(!path.exists());
    assert!(matches!(fetch(&path), Err(StatusError::Connect(..))));
    // A stale socket file (a killed daemon) is replaced.
    let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
    drop(l);
    let srv = Server::start(&path, std::sync::Arc::new(|_| "ok".into())).unwrap();
    assert_eq!(ask(&path, Request::Status).unwrap(), "ok");
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

fn private_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tether-status-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn ok_handler() -> Handler {
    std::sync::Arc::new(|_| "ok\n".into())
}

/// Eight clients that connect and say nothing (and one that trickles bytes) do not keep
/// `tether status` from being answered. The old server answered one connection at a time
/// with a 2 s read timeout each: 8 idle ones were 16 s, past the client's 10 s.
#[test]
fn idle_clients_do_not_block_status() {
    let dir = private_dir("idle");
    let path = dir.join("tether.sock");
    let srv = Server::start(&path, ok_handler()).unwrap();
    let idle: Vec<UnixStream> = (0..8)
        .map(|_| UnixStream::connect(&path).unwrap())
        .collect();
    let mut slow = UnixStream::connect(&path).unwrap();
    slow.write_all(b"sta").unwrap();
    // Answered by its own thread while the others idle.
    let started = Instant::now();
    assert_eq!(ask(&path, Request::Status).unwrap(), "ok\n");
    let took = started.elapsed();
    // The trickling client is cut off at the deadline, whatever it sends.
    let mut rest = String::new();
    slow.set_read_timeout(Some(CLIENT_DEADLINE * 3)).unwrap();
    let r = slow.read_to_string(&mut rest);
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(rest, "", "a request cut off at the deadline gets no answer");
    drop(idle);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
    // Printed, not asserted (no timed asserts): it is milliseconds, not 16 s.
    eprintln!("status with 8 idle clients answered in {took:?}");
}

/// Past MAX_CLIENTS connections at once, new ones are told `error: busy` at once; when
/// the idle ones go, status is served again.
#[test]
fn too_many_clients_are_turned_away_at_once() {
    let dir = private_dir("busy");
    let path = dir.join("tether.sock");
    let srv = Server::start(&path, ok_handler()).unwrap();
    let idle: Vec<UnixStream> = (0..MAX_CLIENTS)
        .map(|_| UnixStream::connect(&path).unwrap())
        .collect();
    // The server counts a connection when it accepts it: wait until all are accepted.
    let mut answer = String::new();
    for _ in 0..100 {
        answer = ask(&path, Request::Status).unwrap();
        if answer == "error: busy\n" {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(answer, "error: busy\n");
    drop(idle);
    let mut ok = false;
    for _ in 0..100 {
        if ask(&path, Request::Status).unwrap() == "ok\n" {
            ok = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(ok);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Only a stale socket is ever removed; anything else at the path (a file, a symlink, a
/// directory) is refused and left as it is, and a directory someone else could write to
/// is refused.
#[test]
fn the_socket_is_created_safely() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = private_dir("safe");
    let path = dir.join("tether.sock");
    let victim = dir.join("victim");
    std::fs::write(&victim, "keep me").unwrap();
    // A regular file where the socket goes.
    std::fs::write(&path, "not a socket").unwrap();
    let e = Server::start(&path, ok_handler())
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("exists and is a regular file, not a socket: not touching it"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "not a socket");
    std::fs::remove_file(&path).unwrap();
    // A symlink to another file: neither the link nor its target is touched.
    std::os::unix::fs::symlink(&victim, &path).unwrap();
    let e = Server::start(&path, ok_handler())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("exists and is a symlink, not a socket"), "{e}");
    assert!(
        std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    assert_eq!(
        std::fs::metadata(&victim).unwrap().permissions().mode() & 0o777,
        0o644
    );
    std::fs::remove_file(&path).unwrap();
    // A world-writable directory, and one owned by someone else.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = Server::start(&path, ok_handler())
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("is writable by group or others (mode 777)"),
        "{e}"
    );
    // A missing directory is judged by the nearest existing ancestor.
    let e = Server::start(&dir.join("sub/tether.sock"), ok_handler())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("is writable by group or others"), "{e}");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    if crate::sys::euid() == 0 {
        std::os::unix::fs::chown(&dir, Some(65534), None).unwrap();
        let e = Server::start(&path, ok_handler())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("is owned by uid 65534, not by root"), "{e}");
        std::os::unix::fs::chown(&dir, Some(0), None).unwrap();
    }
    // Fine now: created 0600 by the mask (no chmod), a new directory 0700.
    let srv = Server::start(&dir.join("run/tether.sock"), ok_handler()).unwrap();
    let m = std::fs::symlink_metadata(dir.join("run/tether.sock")).unwrap();
    assert_eq!(m.mode() & 0o777, 0o600);
    assert_eq!(
        std::fs::metadata(dir.join("run")).unwrap().mode() & 0o777,
        0o700
    );
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The STATUS= line says what changed (connections, counts, the ExternalNode's step), and
/// is sent again only when it changes, at most once a second.
#[test]
fn status_line_follows_the_snapshot() {
    let mut s = sample();
    assert_eq!(
        super::render::summary(&s),
        "ready: 1 TrafficControls, 12 flows, ExternalNode attached; ovsdb connected, openflow DISCONNECTED"
    );
    let mut l = super::render::StatusLine::default();
    let t0 = Instant::now();
    assert!(l.update(&s, t0).is_some());
    assert_eq!(l.update(&s, t0 + Duration::from_secs(5)), None, "unchanged");
    s.flows = 19;
    assert_eq!(l.update(&s, t0 + Duration::from_millis(5500)), Some(
        "ready: 1 TrafficControls, 19 flows, ExternalNode attached; ovsdb connected, openflow DISCONNECTED".to_string()
    ));
    s.ovsdb.connected = false;
    assert_eq!(
        l.update(&s, t0 + Duration::from_millis(5900)),
        None,
        "within a second"
    );
    let line = l.update(&s, t0 + Duration::from_millis(6600)).unwrap();
    assert!(
        line.ends_with("ovsdb DISCONNECTED, openflow DISCONNECTED"),
        "{line}"
    );
}

/// Flows that may differ from the switch's (no flow monitor, a failing read-back) are
/// said so in STATUS= and in `tether status`, with the reason.
#[test]
fn unverified_flows_are_said_so() {
    let mut s = sample();
    s.flows_problem = Some(
        "the flow monitor is not running (timed out): flows others change go unnoticed".into(),
    );
    assert_eq!(
        super::render::summary(&s),
        "ready: 1 TrafficControls, 12 flows (NOT VERIFIED), ExternalNode attached; ovsdb connected, openflow DISCONNECTED"
    );
    assert!(
        super::render::human(&s).contains(
            "\nFLOWS NOT VERIFIED: the flow monitor is not running (timed out): flows others change go unnoticed\n"
        ),
        "{}",
        super::render::human(&s)
    );
}

/// An uplink whose kernel stack takes the VM's traffic past OVS is said so in STATUS=,
/// in `tether status` with the reason, and in the metrics.
#[test]
fn an_open_side_door_is_said_so() {
    let mut s = sample();
    s.external_node.side_door =
        Some("eth1~ holds IPv4 address 203.0.113.99/24 and net.ipv4.conf.all.rp_filter=2".into());
    assert_eq!(
        super::render::summary(&s),
        "ready: 1 TrafficControls, 12 flows, ExternalNode attached (UPLINK SIDE DOOR OPEN); ovsdb connected, openflow DISCONNECTED"
    );
    let h = super::render::human(&s);
    assert!(
        h.ends_with(
            "\nUPLINK SIDE DOOR OPEN: eth1~ holds IPv4 address 203.0.113.99/24 and net.ipv4.conf.all.rp_filter=2\n"
        ),
        "{h}"
    );
    let t = prometheus(&s);
    assert!(
        t.lines().any(|l| l == "tether_externalnode_side_door 1"),
        "{t}"
    );
}

#[test]
fn names_and_errors_cannot_drive_the_terminal() {
    let mut snap = sample();
    snap.traffic_controls[0].name = "evil\u{1b}[2Jname".into();
    snap.traffic_controls[0].last_error = Some("line one\nline two\r".into());
    let out = human(&snap);
    assert!(!out.contains('\u{1b}'), "{out}");
    assert!(out.contains("evil\\u{1b}[2Jname"), "{out}");
    assert!(out.contains("line one\\nline two\\r"), "{out}");
    assert_eq!(super::render::printable("plain-name"), "plain-name");
}

/// The socket's directory wiped (`rm -r`, as of a runtime directory): the wipe itself is
/// not disturbed (the socket is made again only once the removal has settled), and the
/// server answers there again, woken by the directory's removal.
#[test]
fn a_wiped_socket_directory_is_made_again() {
    let dir = private_dir("wiped");
    let run = dir.join("run");
    let path = run.join("tether.sock");
    let srv = Server::start(&path, ok_handler()).unwrap();
    assert_eq!(ask(&path, Request::Status).unwrap(), "ok\n");
    for round in 0..3 {
        std::fs::remove_dir_all(&run).unwrap_or_else(|e| panic!("round {round}: {e}"));
        let started = Instant::now();
        let end = started + Duration::from_secs(10);
        while ask(&path, Request::Status).ok().as_deref() != Some("ok\n") {
            assert!(Instant::now() < end, "round {round}: not answering again");
            std::thread::sleep(Duration::from_millis(20));
        }
        // Printed, not asserted: about REMOVAL_SETTLE, not SOCKET_CHECK.
        eprintln!(
            "round {round}: answering again after {:?}",
            started.elapsed()
        );
    }
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

fn with_policy() -> Snapshot {
    use super::policy::{Counters, NpPolicy, NpRule, NpStatus, NpWatch};
    let mut s = sample();
    s.network_policy = Some(NpStatus {
        synced: true,
        watches: vec![
            NpWatch {
                kind: "networkpolicies".into(),
                synced: true,
                ..NpWatch::default()
            },
            NpWatch {
                kind: "addressgroups".into(),
                synced: false,
                last_error: Some("503".into()),
                ..NpWatch::default()
            },
        ],
        ports: Some((2, 1)),
        flows: 35,
        syncs: 4,
        last_error: None,
        packet_ins: super::policy::PacketIns {
            rejects: 4,
            answered: 3,
            rate_limited: 1,
            logged: 2,
            ..Default::default()
        },
        policies: vec![NpPolicy {
            name: "uid-1".into(),
            source: "AntreaNetworkPolicy vm-ns/annp1".into(),
            generation: 2,
            realized: true,
            reported: Some(2),
            rules: vec![NpRule {
                name: "ingress-drop-0".into(),
                direction: "In".into(),
                action: "Drop".into(),
                conj_id: 2,
                table: 100,
                priority: 32544,
                flows: 7,
                state: "realized".into(),
                counters: Counters {
                    packets: 12,
                    bytes: 888,
                    sessions: 12,
                },
            }],
        }],
    });
    s
}

/// The NETWORKPOLICY section: the watches in a line, a row per rule with its counters.
#[test]
fn human_networkpolicy_section() {
    let t = human(&with_policy());
    let section = &t[t.find("\nNETWORKPOLICY").unwrap()..];
    assert_eq!(
        section,
        "
NETWORKPOLICY  networkpolicies synced, addressgroups not synced (503); 35 flows; VM pair 2<->1; rejects answered 3/4 (1 over the rate limit); audit lines 2
POLICY                           GEN         RULE               ACTION  TABLE/PRIO  PACKETS  BYTES  SESSIONS  STATE
AntreaNetworkPolicy vm-ns/annp1  2 reported  In ingress-drop-0  Drop    100/32544   12       888    12        realized
"
    );
}

#[test]
fn prometheus_networkpolicy() {
    let t = prometheus(&with_policy());
    let labels = "{policy=\"AntreaNetworkPolicy vm-ns/annp1\",rule=\"ingress-drop-0\",direction=\"In\",action=\"Drop\"}";
    for line in [
        format!("tether_networkpolicy_rule_packets_total{labels} 12"),
        format!("tether_networkpolicy_rule_bytes_total{labels} 888"),
        format!("tether_networkpolicy_rule_sessions_total{labels} 12"),
        "tether_networkpolicies{state=\"realized\"} 1".to_string(),
        "tether_networkpolicy_synced 1".to_string(),
        "tether_networkpolicy_packetins_total{what=\"rate_limited\"} 1".to_string(),
    ] {
        assert!(t.lines().any(|l| l == line), "missing {line:?} in\n{t}");
    }
    assert!(!prometheus(&sample()).contains("networkpolicy"));
}
