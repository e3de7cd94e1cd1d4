//! The list/watch source against the in-repo test API server: paging, field selectors,
//! events, every injected fault, missing CRDs, bookmarks, invalid objects, shutdown.
//! Loopback only; no root needed.

mod apiserver;

use std::time::Duration;

use apiserver::client::{
    cluster_config, http_config, on_vm1, server_versions, start, store_versions,
};
use apiserver::{
    ApiServer, Fault, FaultAction, Options, external_node, namespace, pod, traffic_control,
    wait_until,
};
use crossbeam_channel::Receiver;
use serde_json::json;
use tether::k8s::{Change, Client, Credentials, Kind, KubeEvent, Resource};

const LIMIT: Duration = Duration::from_secs(20);

fn wait_synced(rx: &Receiver<KubeEvent>, kinds: &[Kind]) -> Vec<KubeEvent> {
    let mut seen = Vec::new();
    let mut events = Vec::new();
    while seen.len() < kinds.len() {
        let ev = rx.recv_timeout(LIMIT).expect("no Synced event");
        if let KubeEvent::Synced(k) = ev {
            seen.push(k);
        } else {
            events.push(ev);
        }
    }
    seen.sort();
    let mut want = kinds.to_vec();
    want.sort();
    assert_eq!(seen, want);
    events
}

fn next_pod_change(rx: &Receiver<KubeEvent>) -> Change<tether::k8s::Pod> {
    loop {
        match rx.recv_timeout(LIMIT).expect("no event") {
            KubeEvent::Pod(c) => return c,
            _ => continue,
        }
    }
}

fn pod_lists(srv: &ApiServer) -> usize {
    srv.requests()
        .iter()
        .filter(|r| r.starts_with("GET /api/v1/pods ") && !r.contains("\"watch\""))
        .count()
}

#[test]
fn paged_list_field_selectors_then_watch_events() {
    let srv = ApiServer::start(Options::default());
    srv.create(namespace("prod", json!({"team": "a"})));
    srv.create(namespace("dev", json!({})));
    for i in 0..5 {
        srv.create(pod(
            "prod",
            &format!("web-{i}"),
            "vm1",
            json!({"app": "web"}),
        ));
    }
    srv.create(pod("prod", "elsewhere-1", "vm2", json!({"app": "web"})));
    srv.create(pod("dev", "elsewhere-2", "vm2", json!({})));
    srv.create(traffic_control("tc1", "web", 100));
    srv.create(external_node("default", "vm1", "192.0.2.10"));
    srv.create(external_node("default", "vm2", "192.0.2.11"));
    srv.create(external_node("other", "vm1", "192.0.2.12"));

    let (src, stores, rx) = start(&cluster_config(&srv, Credentials::None), &Kind::ALL, 2);
    let initial = wait_synced(&rx, &Kind::ALL);
    // One Added per object that passed the selectors.
    assert_eq!(initial.len(), 5 + 2 + 1 + 1, "{initial:?}");

    assert_eq!(
        store_versions(&stores.pods),
        server_versions(&srv, "pods", on_vm1)
    );
    assert_eq!(stores.pods.len(), 5);
    assert_eq!(
        store_versions(&stores.namespaces),
        server_versions(&srv, "namespaces", |_| true)
    );
    assert_eq!(
        store_versions(&stores.traffic_controls),
        server_versions(&srv, "trafficcontrols", |_| true)
    );
    assert_eq!(
        stores.external_nodes.keys().into_iter().collect::<Vec<_>>(),
        ["default/vm1"]
    );
    assert!(stores.pods.has_synced());

    wait_until("pod watch opened", LIMIT, || {
        srv.requests()
            .iter()
            .any(|r| r.starts_with("GET /api/v1/pods ") && r.contains("\"watch\""))
    });
    let reqs = srv.requests();
    let pod_reqs: Vec<&String> = reqs
        .iter()
        .filter(|r| r.starts_with("GET /api/v1/pods "))
        .collect();
    // 5 Pods, pages of 2: three LIST requests, then a WATCH.
    assert!(
        pod_reqs[0].contains(r#""fieldSelector": "spec.nodeName=vm1""#),
        "{pod_reqs:?}"
    );
    assert!(
        pod_reqs[0].contains(r#""limit": "2""#) && !pod_reqs[0].contains("continue"),
        "{pod_reqs:?}"
    );
    assert!(pod_reqs[1].contains(r#""continue": "#), "{pod_reqs:?}");
    assert!(pod_reqs[2].contains(r#""continue": "#), "{pod_reqs:?}");
    let rv = srv.resource_version();
    let w = pod_reqs[3];
    assert!(
        w.contains(r#""allowWatchBookmarks": "true""#)
            && w.contains(r#""timeoutSeconds": "290""#)
            && w.contains(r#""watch": "true""#)
            && w.contains(&format!(r#""resourceVersion": "{rv}""#)),
        "{w}"
    );
    let en_req = reqs.iter().find(|r| r.contains("externalnodes")).unwrap();
    assert!(
        en_req.starts_with("GET /apis/crd.antrea.io/v1alpha1/namespaces/default/externalnodes ")
            && en_req.contains(r#""fieldSelector": "metadata.name=vm1""#),
        "{en_req}"
    );

    // Add, update, delete on this node arrive as such; a Pod elsewhere does not.
    srv.create(pod("dev", "other-node", "vm2", json!({})));
    let created = srv.create(pod("dev", "new", "vm1", json!({"app": "db"})));
    match next_pod_change(&rx) {
        Change::Added(p) => {
            assert_eq!(p.key(), "dev/new");
            assert_eq!(
                p.metadata.resource_version,
                created["metadata"]["resourceVersion"]
            );
            assert_eq!(p.metadata.labels["app"], "db");
        }
        other => panic!("{other:?}"),
    }
    let mut changed = created.clone();
    changed["metadata"]["labels"] = json!({"app": "web"});
    srv.update(changed);
    match next_pod_change(&rx) {
        Change::Updated { old, new } => {
            assert_eq!(old.metadata.labels["app"], "db");
            assert_eq!(new.metadata.labels["app"], "web");
        }
        other => panic!("{other:?}"),
    }
    srv.delete("pods", "dev/new");
    match next_pod_change(&rx) {
        Change::Deleted(p) => assert_eq!(p.key(), "dev/new"),
        other => panic!("{other:?}"),
    }
    assert_eq!(stores.pods.get("dev/new"), None);
    assert_eq!(stores.pods.get("dev/other-node"), None);
    src.stop();
}

/// Each fault, then a change that must still arrive; `relist` says whether the fault
/// must cost a new LIST (410) or only a re-WATCH from the last resourceVersion.
#[test]
fn watcher_recovers_from_every_fault() {
    // Busy streams: faults "after N events" count the bookmarks too.
    let srv = ApiServer::start(Options {
        bookmark_every: Some(Duration::from_millis(200)),
        ..Options::default()
    });
    for i in 0..5 {
        srv.create(pod("ns", &format!("p{i}"), "vm1", json!({})));
    }
    let (src, stores, rx) = start(&cluster_config(&srv, Credentials::None), &[Kind::Pod], 2);
    wait_synced(&rx, &[Kind::Pod]);
    let pods = Some("pods");
    let w = |action| Fault {
        on: apiserver::On::Watch,
        resource: pods,
        action,
    };
    let l = |action| Fault {
        on: apiserver::On::List,
        resource: pods,
        action,
    };
    let end = || w(FaultAction::EndStream { after: 0 });
    let cases: Vec<(&str, Vec<Fault>, bool)> = vec![
        (
            "stream cut mid-chunk",
            vec![w(FaultAction::CutMidChunk { after: 1 })],
            false,
        ),
        (
            "garbage line",
            vec![w(FaultAction::Garbage { after: 1 })],
            false,
        ),
        (
            "Status object in the stream",
            vec![w(FaultAction::StatusLine {
                after: 0,
                code: 500,
            })],
            false,
        ),
        ("clean end of stream", vec![end()], false),
        ("ERROR 410 event", vec![w(FaultAction::ErrorGone)], true),
        (
            "HTTP 410 on watch",
            vec![w(FaultAction::HttpGone), end()],
            true,
        ),
        (
            "500 on watch",
            vec![w(FaultAction::Status(500)), end()],
            false,
        ),
        (
            "503 on watch",
            vec![w(FaultAction::Status(503)), end()],
            false,
        ),
        (
            "dropped connection",
            vec![w(FaultAction::Drop), end()],
            false,
        ),
        (
            "delayed answer",
            vec![
                end(),
                w(FaultAction::Delay(Duration::from_millis(300))),
                end(),
            ],
            false,
        ),
        (
            "503 on relist",
            vec![l(FaultAction::Status(503)), w(FaultAction::ErrorGone)],
            true,
        ),
        (
            "dropped list",
            vec![l(FaultAction::Drop), w(FaultAction::ErrorGone)],
            true,
        ),
        (
            "expired continue token",
            vec![l(FaultAction::ExpireContinue), w(FaultAction::ErrorGone)],
            true,
        ),
    ];
    for (n, (name, faults, relist)) in cases.into_iter().enumerate() {
        let start = srv.requests().len();
        for f in faults {
            srv.inject(f);
        }
        srv.create(pod(
            "ns",
            &format!("after-{n}"),
            "vm1",
            json!({"case": n.to_string()}),
        ));
        wait_until(&format!("{name}: faults consumed"), LIMIT, || {
            srv.pending_faults() == 0
        });
        // Recovered = a watch request after the last fault fired; what happened between
        // the first fault and then tells re-watch from relist.
        let mut window = Vec::new();
        wait_until(&format!("{name}: re-watch after the faults"), LIMIT, || {
            let reqs = srv.requests();
            let Some(last_fault) = reqs.iter().rposition(|r| r.starts_with("FAULT")) else {
                return false;
            };
            let Some(first_fault) = reqs[start..].iter().position(|r| r.starts_with("FAULT"))
            else {
                return false;
            };
            let rewatch = reqs[last_fault..]
                .iter()
                .position(|r| r.starts_with("GET /api/v1/pods ") && r.contains("\"watch\""));
            match rewatch {
                Some(i) => {
                    window = reqs[start + first_fault..last_fault + i].to_vec();
                    true
                }
                None => false,
            }
        });
        wait_until(&format!("{name}: store converges"), LIMIT, || {
            store_versions(&stores.pods) == server_versions(&srv, "pods", on_vm1)
        });
        let lists = window
            .iter()
            .filter(|r| r.starts_with("GET /api/v1/pods ") && !r.contains("\"watch\""))
            .count();
        if relist {
            assert!(lists >= 1, "{name}: expected a relist: {window:#?}");
        } else {
            assert_eq!(lists, 0, "{name}: unexpected relist: {window:#?}");
        }
    }
    let status = src.status();
    assert!(status[&Kind::Pod].errors_total >= 11, "{status:?}");
    src.stop();
}

#[test]
fn relist_after_compaction_synthesizes_deletes() {
    let srv = ApiServer::start(Options::default());
    for i in 0..3 {
        srv.create(pod("ns", &format!("p{i}"), "vm1", json!({})));
    }
    let (src, stores, rx) = start(&cluster_config(&srv, Credentials::None), &[Kind::Pod], 500);
    wait_synced(&rx, &[Kind::Pod]);
    let pods = Some("pods");
    // End the stream; hold the next watch for a second, during which p1 is deleted and the
    // history compacted: the watch finds its version too old (410) and the relist no
    // longer has p1.
    srv.inject(Fault {
        on: apiserver::On::Watch,
        resource: pods,
        action: FaultAction::EndStream { after: 0 },
    });
    srv.inject(Fault {
        on: apiserver::On::Watch,
        resource: pods,
        action: FaultAction::Delay(Duration::from_secs(1)),
    });
    wait_until("stream ended", LIMIT, || srv.pending_faults() == 1);
    srv.delete("pods", "ns/p1");
    srv.compact();
    match next_pod_change(&rx) {
        Change::Deleted(p) => {
            assert_eq!(p.key(), "ns/p1");
            // The delete was synthesized from the store's last state, not a watch event.
            assert_ne!(
                p.metadata.resource_version,
                srv.resource_version().to_string()
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        store_versions(&stores.pods),
        server_versions(&srv, "pods", on_vm1)
    );
    let st = src.status()[&Kind::Pod].clone();
    assert!(st.errors_total >= 1, "{st:?} {:#?}", srv.requests());
    assert_eq!(st.relists, 1, "one full LIST after the initial one");
    src.stop();
}

#[test]
fn http_410_mode_relists_too() {
    let srv = ApiServer::start(Options {
        gone_as_http: true,
        ..Options::default()
    });
    srv.create(pod("ns", "a", "vm1", json!({})));
    let (src, stores, rx) = start(&cluster_config(&srv, Credentials::None), &[Kind::Pod], 500);
    wait_synced(&rx, &[Kind::Pod]);
    let before = pod_lists(&srv);
    srv.inject(Fault::watch(FaultAction::EndStream { after: 0 }));
    srv.inject(Fault::watch(FaultAction::Delay(Duration::from_secs(1))));
    wait_until("stream ended", LIMIT, || srv.pending_faults() == 1);
    srv.create(pod("ns", "b", "vm1", json!({})));
    srv.compact();
    wait_until("relist", LIMIT, || pod_lists(&srv) > before);
    wait_until("store converges", LIMIT, || {
        store_versions(&stores.pods) == server_versions(&srv, "pods", on_vm1)
    });
    assert!(
        srv.requests()
            .iter()
            .any(|r| r.starts_with("GET /api/v1/pods ") && r.contains("\"watch\""))
    );
    src.stop();
}

#[test]
fn missing_crd_is_a_clear_error_and_is_retried() {
    let srv = ApiServer::start(Options {
        crds_installed: false,
        ..Options::default()
    });
    let (src, stores, rx) = start(
        &cluster_config(&srv, Credentials::None),
        &[Kind::TrafficControl],
        500,
    );
    wait_until("several 404s", LIMIT, || {
        src.status()
            .get(&Kind::TrafficControl)
            .is_some_and(|s| s.errors_total >= 3)
    });
    let st = src.status()[&Kind::TrafficControl].clone();
    let err = st.last_error.unwrap();
    assert!(
        err.starts_with("not found (404) at /apis/crd.antrea.io/v1alpha2/trafficcontrols")
            && err.ends_with("(is the CRD installed?)"),
        "{err}"
    );
    assert!(!st.synced);
    assert!(rx.try_recv().is_err(), "no event before the CRD exists");
    srv.set_crds_installed(true);
    srv.create(traffic_control("tc1", "web", 5));
    wait_synced(&rx, &[Kind::TrafficControl]);
    assert_eq!(
        stores
            .traffic_controls
            .keys()
            .into_iter()
            .collect::<Vec<_>>(),
        ["tc1"]
    );
    assert_eq!(src.status()[&Kind::TrafficControl].last_error, None);
    src.stop();
}

#[test]
fn bookmarks_move_the_resume_point() {
    let srv = ApiServer::start(Options {
        bookmark_every: Some(Duration::from_millis(20)),
        ..Options::default()
    });
    srv.create(pod("ns", "a", "vm1", json!({})));
    let (src, _stores, rx) = start(&cluster_config(&srv, Credentials::None), &[Kind::Pod], 500);
    wait_synced(&rx, &[Kind::Pod]);
    // Other kinds move the global version; only bookmarks tell the Pod watcher.
    for i in 0..3 {
        srv.create(namespace(&format!("n{i}"), json!({})));
    }
    let rv = srv.resource_version();
    let want = format!(r#""resourceVersion": "{rv}""#);
    // End the stream after its next line until a re-watch starts from the bookmarked
    // version.
    wait_until("re-watch from the bookmark's version", LIMIT, || {
        let found = srv
            .requests()
            .iter()
            .filter(|r| r.contains("\"watch\""))
            .any(|r| r.contains(&want));
        if !found && srv.pending_faults() == 0 {
            // After one more line: the bookmark, since nothing else changes Pods.
            srv.inject(Fault::watch(FaultAction::EndStream { after: 1 }));
        }
        found
    });
    src.stop();
}

#[test]
fn invalid_traffic_control_is_stored_with_its_field_error() {
    let srv = ApiServer::start(Options::default());
    srv.create(traffic_control("bad", "web", 16_777_216));
    srv.create(traffic_control("good", "web", 7));
    let (src, stores, rx) = start(
        &cluster_config(&srv, Credentials::None),
        &[Kind::TrafficControl],
        500,
    );
    wait_synced(&rx, &[Kind::TrafficControl]);
    let bad = stores.traffic_controls.get("bad").unwrap();
    assert_eq!(
        bad.spec.as_ref().unwrap_err().to_string(),
        "spec.targetPort.vxlan.vni: 16777216 out of range 0..16777215"
    );
    assert!(stores.traffic_controls.get("good").unwrap().spec.is_ok());
    src.stop();
}

/// A pooled keep-alive connection that a load balancer forgot while it sat idle: the next
/// GET on it gets nothing back. The client sends it again once on a new connection,
/// silently (before: an error, and a backoff).
#[test]
fn a_forgotten_idle_connection_is_retried_once() {
    let srv = ApiServer::start(Options {
        forget_idle_after: Some(Duration::from_millis(300)),
        ..Options::default()
    });
    srv.create(pod("ns", "p1", "vm1", json!({})));
    let client = Client::new(&cluster_config(&srv, Credentials::None), http_config()).unwrap();
    let q = [("limit", "10".to_string())];
    client.get("/api/v1/pods", &q).unwrap();
    std::thread::sleep(Duration::from_millis(600));
    let body = client
        .get("/api/v1/pods", &q)
        .expect("retried on a new connection");
    assert!(String::from_utf8_lossy(&body).contains("\"p1\""));
    let reqs = srv.requests();
    assert_eq!(
        reqs.iter()
            .filter(|r| r.starts_with("FORGOT idle connection"))
            .count(),
        1,
        "{reqs:#?}"
    );
    assert_eq!(
        reqs.iter()
            .filter(|r| r.starts_with("GET /api/v1/pods"))
            .count(),
        2
    );
}

fn pod_status(src: &tether::k8s::Source) -> tether::k8s::KindStatus {
    src.status().get(&Kind::Pod).cloned().unwrap_or_default()
}

/// A real server with its watch cache off sends no bookmarks: a quiet resource's watch
/// just ends at `timeoutSeconds`. That is not an error: tether re-watches at once, and
/// a change made later still arrives. (Before: every quiet watch counted as an error and
/// the backoff grew towards 30 s, so changes came late.)
#[test]
fn quiet_watches_are_not_errors() {
    let srv = ApiServer::start(Options {
        bookmark_every: None,
        ..Options::default()
    });
    srv.create(pod("ns", "p1", "vm1", json!({})));
    // The daemon's own backoff (0.8 s doubling): with it, counting quiet ends as failures
    // spaces the watches 2.8, 3.6, 5.2 s apart instead of 2 s.
    let watch = tether::k8s::WatchConfig {
        timeout_seconds: 2,
        backoff: tether::k8s::BackoffConfig::default(),
        ..apiserver::client::watch_config(500)
    };
    let (src, stores, rx) = apiserver::client::start_with(
        &cluster_config(&srv, Credentials::None),
        &[Kind::Pod],
        watch,
    );
    wait_synced(&rx, &[Kind::Pod]);
    let opened = || {
        srv.shared
            .watches_opened
            .load(std::sync::atomic::Ordering::SeqCst)
    };
    let first = opened();
    std::thread::sleep(Duration::from_millis(10_500));
    let st = pod_status(&src);
    assert_eq!(st.errors_total, 0, "{st:?}");
    assert_eq!(st.last_error, None);
    // Re-watched at once each time: 5 more windows of 2 s in 10.5 s (backing off: 3).
    let more = opened() - first;
    assert!(
        more >= 5,
        "only {more} watches opened in 10.5 s after the first"
    );
    srv.create(pod("ns", "p2", "vm1", json!({})));
    wait_until("the late change", LIMIT, || {
        stores.pods.get("ns/p2").is_some()
    });
    src.stop();
}

/// 429 with Retry-After (API Priority and Fairness): the next request waits what the
/// server asked, not the (here 10 ms) backoff.
#[test]
fn retry_after_is_honoured() {
    let srv = ApiServer::start(Options::default());
    srv.create(pod("ns", "p1", "vm1", json!({})));
    srv.inject(Fault::list(FaultAction::TooMany { retry_after: 2 }));
    let t0 = std::time::Instant::now();
    let (src, _stores, rx) = start(&cluster_config(&srv, Credentials::None), &[Kind::Pod], 500);
    wait_synced(&rx, &[Kind::Pod]);
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(1900),
        "listed again after {took:?}"
    );
    let st = pod_status(&src);
    assert_eq!(st.errors_total, 1);
    src.stop();
}

/// A LIST page that fails resumes with its continue token: the request after the failed
/// one carries the same token (before: the whole list started over).
#[test]
fn a_failed_list_page_resumes() {
    let srv = ApiServer::start(Options::default());
    for i in 0..5 {
        srv.create(pod("ns", &format!("p{i}"), "vm1", json!({})));
    }
    srv.inject(Fault::list(FaultAction::FailContinue(500)));
    let (src, stores, rx) = start(&cluster_config(&srv, Credentials::None), &[Kind::Pod], 2);
    wait_synced(&rx, &[Kind::Pod]);
    assert_eq!(stores.pods.len(), 5);
    let lists: Vec<String> = srv
        .requests()
        .into_iter()
        .filter(|r| r.starts_with("GET /api/v1/pods") && !r.contains("\"watch\""))
        .collect();
    let token = |r: &str| {
        r.split("\"continue\": \"")
            .nth(1)
            .and_then(|t| t.split('"').next())
            .map(str::to_string)
    };
    assert_eq!(lists.len(), 4, "{lists:#?}");
    assert_eq!(token(&lists[0]), None);
    assert!(token(&lists[1]).is_some());
    assert_eq!(
        token(&lists[2]),
        token(&lists[1]),
        "resumed with the same token"
    );
    assert_eq!(pod_status(&src).relists, 0);
    src.stop();
}

/// One object the client cannot decode (labels that are not a map): in the LIST it is
/// skipped and named, the others are stored; in the watch it is skipped and the stream
/// goes on (a later change still arrives); the same object failing again relists.
/// (Before: the bad event made the watch re-start from the same version forever.)
#[test]
fn an_undecodable_object_does_not_stall_its_kind() {
    let srv = ApiServer::start(Options::default());
    let bad = |v: u64| {
        let mut p = pod("ns", "bad", "vm1", json!({}));
        p["metadata"]["labels"] = json!([v]);
        p
    };
    srv.create(bad(1));
    srv.create(pod("ns", "good", "vm1", json!({})));
    let (src, stores, rx) = start(&cluster_config(&srv, Credentials::None), &[Kind::Pod], 500);
    wait_synced(&rx, &[Kind::Pod]);
    assert!(stores.pods.get("ns/good").is_some());
    assert!(stores.pods.get("ns/bad").is_none());
    srv.update(bad(2));
    srv.create(pod("ns", "later", "vm1", json!({})));
    wait_until("a change after the bad event", LIMIT, || {
        stores.pods.get("ns/later").is_some()
    });
    assert_eq!(pod_status(&src).relists, 0);
    assert!(
        pod_status(&src)
            .last_error
            .unwrap_or_default()
            .contains("Pod")
    );
    // The same object again: relist (and the list skips it again, keeping the rest).
    srv.update(bad(3));
    wait_until("a relist", LIMIT, || pod_status(&src).relists == 1);
    let mut fixed = pod("ns", "bad", "vm1", json!({"app": "web"}));
    fixed["metadata"]["uid"] = json!("x");
    srv.update(fixed);
    wait_until("the fixed object", LIMIT, || {
        stores.pods.get("ns/bad").is_some()
    });
    assert_eq!(stores.pods.len(), 3);
    src.stop();
}

/// A watch ends when its client goes away, as kube-apiserver's does when the request's
/// context is cancelled (before: the test server kept it until its timeout).
#[test]
fn watches_end_when_the_client_goes_away() {
    let srv = ApiServer::start(Options::default());
    let (src, _, rx) = start(&cluster_config(&srv, Credentials::None), &[Kind::Pod], 500);
    wait_synced(&rx, &[Kind::Pod]);
    wait_until("a watch open", LIMIT, || {
        srv.shared
            .watches_opened
            .load(std::sync::atomic::Ordering::SeqCst)
            >= 1
    });
    src.stop();
    wait_until("the server ending the watch", LIMIT, || {
        srv.requests()
            .iter()
            .any(|r| r == "WATCH pods ended: the client went away")
    });
}

/// Events several to a chunk and split across chunks (a proxy re-chunking the stream):
/// the client's stream parser does not care.
#[test]
fn events_split_across_chunks() {
    let srv = ApiServer::start(Options {
        chunking: apiserver::Chunking::Split(7),
        bookmark_every: Some(Duration::from_millis(100)),
        ..Options::default()
    });
    let (src, stores, rx) = start(&cluster_config(&srv, Credentials::None), &[Kind::Pod], 2);
    wait_synced(&rx, &[Kind::Pod]);
    for i in 0..20 {
        srv.create(pod(
            "ns",
            &format!("p{i}"),
            "vm1",
            json!({"i": i.to_string()}),
        ));
    }
    wait_until("20 pods", LIMIT, || stores.pods.len() == 20);
    assert_eq!(
        store_versions(&stores.pods),
        server_versions(&srv, "pods", on_vm1)
    );
    assert_eq!(pod_status(&src).errors_total, 0);
    src.stop();
}

/// A redirect is not followed (it would take the bearer token elsewhere, maybe to
/// `http://`): the 302 is an error naming its status, and the other address sees nothing.
#[test]
fn redirects_are_not_followed() {
    let srv = ApiServer::start(Options::default());
    let elsewhere = ApiServer::start(Options::default());
    srv.inject(Fault::list(FaultAction::Redirect {
        location: format!("{}api/v1/pods", elsewhere.url()),
    }));
    let client = Client::new(
        &cluster_config(&srv, Credentials::Token("secret-token".into())),
        http_config(),
    )
    .unwrap();
    let e = client
        .get("/api/v1/pods", &[("limit", "10".to_string())])
        .unwrap_err();
    assert!(e.to_string().contains("302"), "{e}");
    assert_eq!(elsewhere.requests(), Vec::<String>::new());
}
