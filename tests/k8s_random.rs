//! Seeded randomized test: 2,000 creates/updates/deletes of Pods and TrafficControls with
//! random faults (cut streams, garbage, 410s, 5xx, dropped connections, delays, history
//! compaction) interleaved. After quiescing, the stores equal the server exactly, and the
//! events the source sent replay to the same state. The seed is printed; rerun one with
//! `TETHER_SEED=<n> cargo test --test k8s_random`. Loopback only; no root needed.

mod apiserver;

use std::collections::BTreeMap;
use std::time::Duration;

use apiserver::client::{cluster_config, on_vm1, server_versions, start, store_versions};
use apiserver::{ApiServer, Fault, FaultAction, On, Options, namespace, pod, traffic_control};
use serde_json::json;
use tether::k8s::{Change, Credentials, Kind, KubeEvent, Resource};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).expect("fits")
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len())]
    }
}

fn mirror_apply<T: Resource>(m: &mut BTreeMap<String, String>, c: &Change<T>) {
    match c {
        Change::Added(o) | Change::Updated { new: o, .. } => {
            m.insert(o.key(), o.meta().resource_version.clone());
        }
        Change::Deleted(o) => {
            m.remove(&o.key());
        }
    }
}

#[test]
fn random_operations_and_faults_converge() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let seed: u64 = std::env::var("TETHER_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(now.as_secs() ^ u64::from(now.subsec_nanos()) << 20)
        | 1;
    eprintln!("k8s_random seed={seed} (rerun with TETHER_SEED={seed})");
    let mut rng = Rng(seed);

    let srv = ApiServer::start(Options {
        history: 64,
        bookmark_every: Some(Duration::from_millis(30)),
        ..Options::default()
    });
    for ns in ["a", "b", "c"] {
        srv.create(namespace(ns, json!({})));
    }
    let (src, stores, rx) = start(
        &cluster_config(&srv, Credentials::None),
        &[Kind::Pod, Kind::TrafficControl],
        7,
    );
    let consumer = std::thread::Builder::new()
        .name("events".into())
        .spawn(move || {
            let (mut pods, mut tcs) = (BTreeMap::new(), BTreeMap::new());
            for ev in rx.iter() {
                match ev {
                    KubeEvent::Pod(c) => mirror_apply(&mut pods, &c),
                    KubeEvent::TrafficControl(c) => mirror_apply(&mut tcs, &c),
                    _ => {}
                }
            }
            (pods, tcs)
        })
        .unwrap();

    let nodes = ["vm1", "vm1", "vm2"];
    let apps = ["web", "db", "cache"];
    let mut pod_keys: Vec<String> = Vec::new();
    let mut tc_keys: Vec<String> = Vec::new();
    let mut faults = 0;
    for i in 0..2000 {
        if rng.below(100) < 4 {
            faults += 1;
            let resource = rng.pick(&[Some("pods"), Some("trafficcontrols")]);
            let (on, action) = match rng.below(11) {
                0 => (
                    On::Watch,
                    FaultAction::CutMidChunk {
                        after: rng.below(3),
                    },
                ),
                1 => (
                    On::Watch,
                    FaultAction::Garbage {
                        after: rng.below(3),
                    },
                ),
                2 => (On::Watch, FaultAction::ErrorGone),
                3 => (
                    On::Watch,
                    FaultAction::StatusLine {
                        after: rng.below(2),
                        code: 500,
                    },
                ),
                4 => (On::Watch, FaultAction::HttpGone),
                5 => (On::Any, FaultAction::Status(rng.pick(&[500, 503]))),
                6 => (On::Any, FaultAction::Drop),
                7 => (
                    On::Any,
                    FaultAction::Delay(Duration::from_millis(rng.below(50) as u64)),
                ),
                8 => (On::List, FaultAction::ExpireContinue),
                9 => (
                    On::Watch,
                    FaultAction::EndStream {
                        after: rng.below(5),
                    },
                ),
                _ => {
                    srv.compact();
                    continue;
                }
            };
            srv.inject(Fault {
                on,
                resource,
                action,
            });
            // Give the watchers a moment to run into it; a fault nobody hit in time (a
            // list fault while no list is due) is withdrawn so they do not pile up.
            let until = std::time::Instant::now() + Duration::from_millis(100);
            while srv.pending_faults() > 0 && std::time::Instant::now() < until {
                std::thread::sleep(Duration::from_millis(1));
            }
            srv.clear_faults();
        }
        if i % 20 == 0 {
            // Let the watchers interleave with the writes instead of only catching up at
            // the end.
            std::thread::sleep(Duration::from_millis(1));
        }
        let op = rng.below(100);
        if op < 45 {
            // Pods: create, relabel, move between nodes, delete.
            if pod_keys.is_empty() || op < 20 {
                let ns = rng.pick(&["a", "b", "c"]);
                let name = format!("p{i}");
                srv.create(pod(
                    ns,
                    &name,
                    rng.pick(&nodes),
                    json!({"app": rng.pick(&apps)}),
                ));
                pod_keys.push(format!("{ns}/{name}"));
            } else if op < 38 {
                let k = pod_keys[rng.below(pod_keys.len())].clone();
                let mut p = srv.get("pods", &k).unwrap();
                p["metadata"]["labels"]["app"] = json!(rng.pick(&apps));
                if rng.below(4) == 0 {
                    p["spec"]["nodeName"] = json!(rng.pick(&nodes));
                }
                srv.update(p);
            } else {
                let idx = rng.below(pod_keys.len());
                srv.delete("pods", &pod_keys.swap_remove(idx));
            }
        } else if op < 60 {
            if tc_keys.is_empty() || op < 50 {
                let name = format!("tc{i}");
                srv.create(traffic_control(
                    &name,
                    rng.pick(&apps),
                    rng.below(100) as u64,
                ));
                tc_keys.push(name);
            } else if op < 56 {
                let k = tc_keys[rng.below(tc_keys.len())].clone();
                let mut t = srv.get("trafficcontrols", &k).unwrap();
                // Now and then an invalid VNI: stored with its validation error.
                let vni = if rng.below(10) == 0 {
                    16_777_216
                } else {
                    rng.below(1000) as u64
                };
                t["spec"]["targetPort"]["vxlan"]["vni"] = json!(vni);
                srv.update(t);
            } else {
                let idx = rng.below(tc_keys.len());
                srv.delete("trafficcontrols", &tc_keys.swap_remove(idx));
            }
        } else {
            // Let the watchers breathe now and then, so not every watch is too old.
            std::thread::yield_now();
        }
    }
    // Quiesce: no more faults, then the stores must reach the server's state.
    srv.clear_faults();
    let converged = || {
        store_versions(&stores.pods) == server_versions(&srv, "pods", on_vm1)
            && store_versions(&stores.traffic_controls)
                == server_versions(&srv, "trafficcontrols", |_| true)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !converged() {
        if std::time::Instant::now() > deadline {
            panic!(
                "seed={seed}: stores did not converge\npods store={:?}\npods server={:?}",
                store_versions(&stores.pods),
                server_versions(&srv, "pods", on_vm1)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let relists = srv
        .requests()
        .iter()
        .filter(|r| r.starts_with("GET") && !r.contains("\"watch\"") && !r.contains("continue"))
        .count();
    let fired = srv
        .requests()
        .iter()
        .filter(|r| r.starts_with("FAULT"))
        .count();
    eprintln!(
        "seed={seed}: faults injected={faults} fired={fired} pods={} tcs={} relists={relists} watches={}",
        stores.pods.len(),
        stores.traffic_controls.len(),
        srv.shared
            .watches_opened
            .load(std::sync::atomic::Ordering::SeqCst)
    );
    let pods_store = store_versions(&stores.pods);
    let tcs_store = store_versions(&stores.traffic_controls);
    drop(stores);
    src.stop();
    let (pods_mirror, tcs_mirror) = consumer.join().unwrap();
    assert_eq!(
        pods_mirror, pods_store,
        "seed={seed}: pod events do not replay to the store"
    );
    assert_eq!(
        tcs_mirror, tcs_store,
        "seed={seed}: TC events do not replay to the store"
    );
    assert!(
        relists > 2,
        "seed={seed}: the faults should have forced relists"
    );
    assert!(
        fired * 3 > faults,
        "seed={seed}: only {fired} of {faults} faults hit a request"
    );
}
