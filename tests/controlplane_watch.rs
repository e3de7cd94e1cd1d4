//! tether's controlplane source (`controlplane::source`) against the test server's
//! controlplane API (`tests/apiserver/controlplane.rs`): the initial sync across all four
//! bookmark shapes (Synced only once all three watches have bookmarked), a patch changing
//! a member's IP, a patch of an unknown group (that watch restarts and resyncs), a closed
//! watch (reconnect, full resync: what was deleted meanwhile is gone after the bookmark),
//! the server unreachable at start, TLS with a CA in the kubeconfig (through the config and
//! `wiring`), bad lines skipped with a log naming the object, the field selector, TCP
//! keepalive on the watches' sockets.
//! Loopback only; no root, no OVS.

// Test support: a failed step is a failed test, with its location.
#![allow(clippy::unwrap_used)]

mod apiserver;

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use apiserver::client::{cluster_config, http_config};
use apiserver::controlplane::{ADDRESS, APPLIED_TO, POLICIES, patch_text};
use apiserver::cp_fixtures::{AG, ANNP1, ATG, VM1, VM2, annp1, ee_member, policy};
use apiserver::{ApiServer, Certs, Options, wait_until};
use crossbeam_channel::Receiver;
use tether::controlplane::{GroupKind, Kind, Outcome, Source, SourceConfig, Update, WatchStatus};
use tether::k8s::{BackoffConfig, Client, ClusterConfig, Credentials, KubeError};

const LIMIT: Duration = Duration::from_secs(20);

/// A second policy: from AG, applied to ATG, generation 3.
const ANNP2: &str = "5c1a6a2e-0000-4000-8000-00000000a002";

/// The log lines of this test binary (every test's: filter by what you look for).
static LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, r: &log::Record<'_>) {
        LOG.lock()
            .unwrap()
            .push(format!("{} {}", r.level(), r.args()));
    }
    fn flush(&self) {}
}

fn capture_logs() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        log::set_boxed_logger(Box::new(Capture)).unwrap();
        log::set_max_level(log::LevelFilter::Info);
    });
}

/// The worked example for vm1, plus a policy and groups only vm2 sees.
fn populated(opts: Options) -> ApiServer {
    let srv = ApiServer::start(opts);
    populate(&srv);
    srv
}

fn populate(srv: &ApiServer) {
    srv.cp_add_policy(&annp1(), &[VM1]);
    srv.cp_add_group(APPLIED_TO, ATG, &[ee_member("vm-ns", "vm1", &[])], &[VM1]);
    srv.cp_add_group(
        ADDRESS,
        AG,
        &[ee_member("vm-ns", "vm2", &["172.16.100.4"])],
        &[VM1, VM2],
    );
    srv.cp_add_policy(
        &policy(
            "5c1a6a2e-0000-4000-8000-00000000b001",
            1,
            "other",
            AG,
            "10.0.0.0/8",
            80,
            "Drop",
            "0c0c0c0c-0000-5000-8000-000000000001",
        ),
        &[VM2],
    );
    srv.cp_add_group(
        APPLIED_TO,
        "0c0c0c0c-0000-5000-8000-000000000001",
        &[ee_member("vm-ns", "vm2", &[])],
        &[VM2],
    );
}

/// The source as `wiring` builds it (keepalive, the long read timeout), with the test
/// server's short timeouts and millisecond backoffs.
fn source_for(cc: &ClusterConfig, node_key: &str) -> (Source, Receiver<Update>) {
    let client =
        Client::new(cc, tether::controlplane::source::http_config(http_config())).expect("client");
    let (tx, rx) = crossbeam_channel::bounded(100);
    let cfg = SourceConfig {
        node_key: node_key.into(),
        backoff: BackoffConfig {
            initial: Duration::from_millis(20),
            max: Duration::from_millis(200),
        },
    };
    (Source::start(client, cfg, tx).expect("source"), rx)
}

fn start(srv: &ApiServer) -> (Source, Receiver<Update>) {
    source_for(&cluster_config(srv, Credentials::None), VM1)
}

/// The updates up to and including the first that `stop` accepts.
fn until(rx: &Receiver<Update>, what: &str, stop: impl Fn(&Update) -> bool) -> Vec<Update> {
    let mut seen = Vec::new();
    loop {
        let u = rx
            .recv_timeout(LIMIT)
            .unwrap_or_else(|_| panic!("no {what}; got {seen:?}"));
        let done = stop(&u);
        seen.push(u);
        if done {
            return seen;
        }
    }
}

fn synced(rx: &Receiver<Update>) -> Vec<Update> {
    until(rx, "Synced", |u| u.outcome == Outcome::Synced)
}

fn changed(names: &[&str]) -> Outcome {
    Outcome::Changed(names.iter().map(|s| s.to_string()).collect())
}

fn policy_names(src: &Source) -> BTreeSet<String> {
    let st = src.state().lock().unwrap();
    st.policies().map(|p| p.name.clone()).collect()
}

fn ag_ips(src: &Source, name: &str) -> Option<BTreeSet<IpAddr>> {
    src.state().lock().unwrap().address_group_ips(name)
}

fn ips(a: &[&str]) -> Option<BTreeSet<IpAddr>> {
    Some(a.iter().map(|s| s.parse().unwrap()).collect())
}

fn status(src: &Source, kind: Kind) -> WatchStatus {
    src.status().get(&kind).cloned().unwrap_or_default()
}

/// The state right after the initial sync of the worked example.
fn assert_example(src: &Source) {
    assert_eq!(policy_names(src), BTreeSet::from([ANNP1.to_string()]));
    assert_eq!(ag_ips(src, AG), ips(&["172.16.100.4"]));
    let st = src.state().lock().unwrap();
    let atg = st.group(GroupKind::AppliedTo, ATG).expect("the ATG");
    let members: Vec<String> = atg.members.keys().map(|k| format!("{k:?}")).collect();
    assert_eq!(members.len(), 1, "{members:?}");
    assert!(members[0].contains("vm1"), "{members:?}");
    assert!(st.synced());
    assert!(st.applies(st.policy(ANNP1).unwrap()));
}

#[test]
fn initial_sync_waits_for_all_three_bookmarks_and_accepts_every_bookmark_shape() {
    let srv = populated(Options::default());
    // The address groups are unreachable at first: the two others bookmark, nothing is
    // announced.
    srv.cp_hold(ADDRESS, true);
    let (src, rx) = start(&srv);
    wait_until("two watches synced", LIMIT, || {
        status(&src, Kind::NetworkPolicy).synced
            && status(&src, Kind::AppliedToGroup).synced
            && status(&src, Kind::AddressGroup).errors_total >= 1
    });
    assert!(
        rx.try_recv().is_err(),
        "announced before the third bookmark"
    );
    assert!(!src.state().lock().unwrap().synced());
    srv.cp_hold(ADDRESS, false);
    let got = synced(&rx);
    assert_eq!(
        got,
        vec![Update {
            kind: Kind::AddressGroup,
            outcome: Outcome::Synced
        }]
    );
    assert_example(&src);
    // The fourth shape on a reconnect; what is known is unchanged by it.
    srv.cp_close_watches(Some(POLICIES));
    wait_until("reconnected", LIMIT, || {
        let s = status(&src, Kind::NetworkPolicy);
        s.reconnects == 1 && s.synced
    });
    let shapes: BTreeSet<usize> = srv.cp_bookmarks_sent().iter().map(|(_, s)| *s).collect();
    assert_eq!(shapes, BTreeSet::from([0, 1, 2, 3]));
    assert_example(&src);
    assert!(
        rx.try_recv().is_err(),
        "a resync of the same set changed something"
    );
    // The watches asked for vm1's span, JSON, no LIST.
    let w = srv.cp_watches();
    assert!(
        w.iter().all(|r| r.ends_with(" nodeName=vm-ns/vm1")),
        "{w:?}"
    );
    assert!(
        srv.requests()
            .iter()
            .all(|r| r.contains("\"watch\": \"true\"")),
        "{:?}",
        srv.requests()
    );
    // Waiting on quiet streams is not being stuck, however long.
    assert_eq!(
        src.heartbeats()
            .stuck(Instant::now() + Duration::from_secs(24 * 3600)),
        vec![]
    );
    // Stopping interrupts the three open streams at once.
    let t = Instant::now();
    src.stop();
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
}

#[test]
fn a_patch_changes_a_members_ip_and_span_changes_add_and_remove_policies() {
    let srv = populated(Options::default());
    let (src, rx) = start(&srv);
    synced(&rx);
    // vm2 moves from .4 to .6: one patch removes and adds the same member.
    srv.cp_patch_group(
        ADDRESS,
        AG,
        &[ee_member("vm-ns", "vm2", &["172.16.100.6"])],
        &[ee_member("vm-ns", "vm2", &["172.16.100.4"])],
    );
    let u = until(&rx, "Changed", |_| true);
    assert_eq!(u[0].outcome, changed(&[ANNP1]));
    assert_eq!(ag_ips(&src, AG), ips(&["172.16.100.6"]));
    // A member added: both IPs.
    srv.cp_patch_group(
        ADDRESS,
        AG,
        &[ee_member("vm-ns", "vm3", &["172.16.100.7"])],
        &[],
    );
    until(&rx, "Changed", |_| true);
    assert_eq!(ag_ips(&src, AG), ips(&["172.16.100.6", "172.16.100.7"]));
    // A policy's span grows to vm1 (ADDED) and shrinks again (DELETED); a MODIFIED
    // carries the whole new policy.
    let other = "5c1a6a2e-0000-4000-8000-00000000b001";
    srv.cp_set_span(POLICIES, other, &[VM1, VM2]);
    assert_eq!(
        until(&rx, "Changed", |_| true)[0].outcome,
        changed(&[other])
    );
    assert_eq!(
        policy_names(&src),
        BTreeSet::from([ANNP1.to_string(), other.to_string()])
    );
    srv.cp_modify_policy(&policy(
        ANNP1,
        2,
        "annp1",
        AG,
        "172.16.100.8/32",
        2222,
        "Drop",
        ATG,
    ));
    assert_eq!(
        until(&rx, "Changed", |_| true)[0].outcome,
        changed(&[ANNP1])
    );
    {
        let st = src.state().lock().unwrap();
        let p = st.policy(ANNP1).unwrap();
        assert_eq!(p.generation, 2);
    }
    srv.cp_set_span(POLICIES, other, &[VM2]);
    assert_eq!(
        until(&rx, "Changed", |_| true)[0].outcome,
        changed(&[other])
    );
    assert_eq!(policy_names(&src), BTreeSet::from([ANNP1.to_string()]));
    src.stop();
}

#[test]
fn a_patch_of_an_unknown_group_restarts_that_watch_and_resyncs() {
    let srv = populated(Options::default());
    let (src, rx) = start(&srv);
    synced(&rx);
    let unknown = "dddddddd-0000-5000-8000-000000000001";
    let line = format!(
        r#"{{"type":"MODIFIED","object":{}}}"#,
        patch_text(
            ADDRESS,
            unknown,
            &[ee_member("vm-ns", "vm9", &["10.9.9.9"])],
            &[]
        )
    );
    srv.cp_raw(ADDRESS, VM1, &line);
    let u = until(&rx, "Restart", |_| true);
    assert_eq!(u[0].kind, Kind::AddressGroup);
    assert!(
        matches!(&u[0].outcome, Outcome::Restart(why) if why.contains(unknown)),
        "{u:?}"
    );
    wait_until("address groups resynced", LIMIT, || {
        let s = status(&src, Kind::AddressGroup);
        s.reconnects == 1 && s.synced
    });
    // The other watches were not touched; what is known is what the server has.
    assert_eq!(status(&src, Kind::NetworkPolicy).reconnects, 0);
    assert_eq!(status(&src, Kind::AppliedToGroup).reconnects, 0);
    assert_example(&src);
    assert_eq!(ag_ips(&src, unknown), None);
    assert!(status(&src, Kind::AddressGroup).errors_total >= 1);
    src.stop();
}

#[test]
fn a_closed_watch_reconnects_with_a_full_resync() {
    let srv = populated(Options::default());
    srv.cp_add_policy(
        &policy(ANNP2, 3, "annp2", AG, "192.0.2.0/24", 443, "Allow", ATG),
        &[VM1],
    );
    let (src, rx) = start(&srv);
    synced(&rx);
    assert_eq!(
        policy_names(&src),
        BTreeSet::from([ANNP1.to_string(), ANNP2.to_string()])
    );
    // The controller closes the watch and is away for a while; meanwhile annp2 goes.
    srv.cp_hold(POLICIES, true);
    srv.cp_close_watches(Some(POLICIES));
    wait_until("the reconnect refused", LIMIT, || {
        status(&src, Kind::NetworkPolicy).errors_total >= 2
    });
    srv.cp_delete(POLICIES, ANNP2);
    // No moment with less policy: until the new bookmark, the old set stays.
    assert_eq!(
        policy_names(&src),
        BTreeSet::from([ANNP1.to_string(), ANNP2.to_string()])
    );
    assert!(!status(&src, Kind::NetworkPolicy).synced);
    srv.cp_hold(POLICIES, false);
    let u = until(&rx, "Changed", |_| true);
    assert_eq!(u[0].outcome, changed(&[ANNP2]));
    assert_eq!(policy_names(&src), BTreeSet::from([ANNP1.to_string()]));
    let s = status(&src, Kind::NetworkPolicy);
    assert!(
        s.synced && s.reconnects >= 1 && s.last_error.is_none(),
        "{s:?}"
    );
    // Every watch closed at once: all resync, nothing changes.
    srv.cp_close_watches(None);
    wait_until("all resynced", LIMIT, || {
        Kind::ALL.iter().all(|k| {
            let s = status(&src, *k);
            s.synced && s.reconnects >= 1
        }) && status(&src, Kind::AddressGroup).reconnects == 1
    });
    assert_example(&src);
    src.stop();
}

#[test]
fn a_server_unreachable_at_start_is_retried_until_it_is_up() {
    // A port nobody listens on yet.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cc = cluster_config(&ApiServer::start(Options::default()), Credentials::None);
    cc.server = format!("http://127.0.0.1:{port}");
    let (src, rx) = source_for(&cc, VM1);
    wait_until("backing off", LIMIT, || {
        Kind::ALL.iter().all(|k| status(&src, *k).errors_total >= 2)
    });
    let err = status(&src, Kind::NetworkPolicy).last_error.unwrap();
    assert!(
        err.starts_with(&format!(
            "transport error (GET http://127.0.0.1:{port}/apis/controlplane.antrea.io/v1beta2/networkpolicies)"
        )) || err.contains("/apis/controlplane.antrea.io/v1beta2/networkpolicies"),
        "{err}"
    );
    assert!(rx.try_recv().is_err());
    let srv = ApiServer::start_at(port, Options::default());
    populate(&srv);
    synced(&rx);
    assert_example(&src);
    assert_eq!(status(&src, Kind::NetworkPolicy).last_error, None);
    src.stop();
}

#[test]
fn tls_with_the_ca_in_the_antrea_kubeconfig_through_the_config() {
    let srv = populated(Options {
        certs: Some(Certs::new(&["127.0.0.1"])),
        ..Options::default()
    });
    let certs = srv.shared.opts_certs();
    let dir = std::env::temp_dir().join(format!("tether-cp-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("ca.crt"), &certs.ca_pem).unwrap();
    let kc = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: antrea\nclusters:\n- name: antrea\n  cluster:\n    server: {}\n    certificate-authority: ca.crt\nusers:\n- name: vm1\n  user: {{}}\ncontexts:\n- name: antrea\n  context: {{cluster: antrea, user: vm1}}\n",
        srv.url()
    );
    std::fs::write(dir.join("antrea.kubeconfig"), kc).unwrap();
    let conf = format!(
        "nodeName: vm1\nexternalNode:\n  externalNodeNamespace: vm-ns\nantreaClientConnection:\n  kubeconfig: {}\n",
        dir.join("antrea.kubeconfig").display()
    );
    let args: Vec<String> = ["--config", "antrea-agent.conf"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let cfg = tether::config::parse_run(&args, &|_| Ok(conf.clone()), &|_| None, &|| None)
        .expect("config");
    assert_eq!(tether::wiring::controlplane_node_key(&cfg), VM1);
    let (tx, rx) = crossbeam_channel::bounded(100);
    let src = tether::wiring::start_controlplane_source(&cfg, tx)
        .expect("source")
        .expect("an antrea kubeconfig is configured");
    synced(&rx);
    assert_example(&src);
    src.stop();
    // Without the CA the handshake fails, reported as TLS and retried.
    let mut cc = cluster_config(&srv, Credentials::None);
    cc.ca_pem = None;
    let (src, rx) = source_for(&cc, VM1);
    wait_until("TLS failure reported", LIMIT, || {
        status(&src, Kind::AddressGroup).errors_total >= 2
    });
    let err = status(&src, Kind::AddressGroup).last_error.unwrap();
    assert!(
        err.starts_with(&format!("TLS with {} failed: ", srv.url())),
        "{err}"
    );
    assert!(rx.try_recv().is_err());
    src.stop();
    // No antrea kubeconfig: no source.
    let plain = tether::config::parse_run(&[], &|_| Ok(String::new()), &|_| None, &|| {
        Some("vm1".into())
    })
    .unwrap();
    let (tx, _rx) = crossbeam_channel::bounded(1);
    assert!(
        tether::wiring::start_controlplane_source(&plain, tx)
            .unwrap()
            .is_none()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_lines_are_skipped_with_a_log_naming_the_object() {
    capture_logs();
    let srv = populated(Options::default());
    let (src, rx) = start(&srv);
    synced(&rx);
    let bad = "5c1a6a2e-0000-4000-8000-0000000bad01";
    let text = policy(bad, 1, "bad", AG, "10.1.0.0/16", 53, "Drop", ATG)
        .replace(r#""ip":""#, r#""ip":"not base64!"#);
    srv.cp_raw(
        POLICIES,
        VM1,
        &format!(r#"{{"type":"ADDED","object":{text}}}"#),
    );
    srv.cp_raw(POLICIES, VM1, "this is not json");
    // A good event after them still applies.
    srv.cp_add_policy(
        &policy(ANNP2, 1, "annp2", AG, "192.0.2.0/24", 443, "Allow", ATG),
        &[VM1],
    );
    let u = until(&rx, "Changed", |_| true);
    assert_eq!(u[0].outcome, changed(&[ANNP2]));
    assert_eq!(
        policy_names(&src),
        BTreeSet::from([ANNP1.to_string(), ANNP2.to_string()])
    );
    let s = status(&src, Kind::NetworkPolicy);
    assert_eq!(s.undecodable_total, 2, "{s:?}");
    assert_eq!(s.reconnects, 0, "a bad policy line restarted the watch");
    let logs = LOG.lock().unwrap().clone();
    let line = logs
        .iter()
        .find(|l| l.contains(bad))
        .unwrap_or_else(|| panic!("no log names {bad}: {logs:?}"));
    assert!(
        line.starts_with(&format!(
            "ERROR controlplane kind=NetworkPolicy object={bad} type=ADDED undecodable watch event, skipped: "
        )),
        "{line}"
    );
    assert!(line.contains("ip"), "the field is not named: {line}");
    assert!(
        logs.iter()
            .any(|l| l.starts_with("ERROR controlplane kind=NetworkPolicy object=? type=?")),
        "{logs:?}"
    );
    src.stop();
}

#[test]
fn the_field_selector_is_honoured() {
    let srv = populated(Options::default());
    // vm2's view: the other policy and its group, the shared AG; not annp1.
    let (src, rx) = source_for(&cluster_config(&srv, Credentials::None), VM2);
    synced(&rx);
    assert_eq!(
        policy_names(&src),
        BTreeSet::from(["5c1a6a2e-0000-4000-8000-00000000b001".to_string()])
    );
    assert_eq!(ag_ips(&src, AG), ips(&["172.16.100.4"]));
    src.stop();
    // A node nobody spans: synced, and empty.
    let (src, rx) = source_for(&cluster_config(&srv, Credentials::None), "vm-ns/vm3");
    synced(&rx);
    assert_eq!(policy_names(&src), BTreeSet::new());
    assert_eq!(ag_ips(&src, AG), None);
    src.stop();
    // An unknown field label: 400, named.
    let client = Client::new(&cluster_config(&srv, Credentials::None), http_config()).unwrap();
    let e = client
        .watch(
            "/apis/controlplane.antrea.io/v1beta2/addressgroups",
            &[
                ("watch", "true".to_string()),
                ("fieldSelector", "spec.nodeName=vm1".to_string()),
            ],
        )
        .err()
        .expect("400");
    assert!(
        matches!(&e, KubeError::Status { code: 400, message, .. }
            if message == "field label not supported: spec.nodeName"),
        "{e}"
    );
}

/// The client's connections to `port` (their `/proc/net/tcp` lines: local side first, as
/// `st` and `tr`, the state and the active timer).
fn client_sockets(port: u16) -> Vec<(String, String)> {
    let text = std::fs::read_to_string("/proc/net/tcp").unwrap();
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let remote_port = u16::from_str_radix(f[2].split(':').nth(1)?, 16).ok()?;
            (remote_port == port).then(|| (f[3].to_string(), f[5].to_string()))
        })
        .collect()
}

#[test]
fn the_watches_sockets_have_tcp_keepalive() {
    let srv = populated(Options::default());
    let (src, rx) = start(&srv);
    synced(&rx);
    let socks = client_sockets(srv.addr.port());
    let established: Vec<_> = socks.iter().filter(|(st, _)| st == "01").collect();
    assert_eq!(established.len(), 3, "{socks:?}");
    // Timer 2 is the keepalive timer, armed only when SO_KEEPALIVE is on.
    assert!(
        established.iter().all(|(_, tr)| tr.starts_with("02:")),
        "{socks:?}"
    );
    src.stop();
    // The Kubernetes client's sockets (ureq's own connector) have none.
    let client = Client::new(&cluster_config(&srv, Credentials::None), http_config()).unwrap();
    let _w = client
        .watch(
            "/apis/controlplane.antrea.io/v1beta2/networkpolicies",
            &[("watch", "true".to_string())],
        )
        .unwrap();
    let socks = client_sockets(srv.addr.port());
    assert!(
        socks
            .iter()
            .any(|(st, tr)| st == "01" && tr.starts_with("00:")),
        "{socks:?}"
    );
}
