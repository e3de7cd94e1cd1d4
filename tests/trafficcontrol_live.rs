//! One TrafficControl synced against a real Open vSwitch, counting what it asks of the
//! switch: a new TC with a target and a return port is one OVSDB transaction creating
//! both ports, one reading the ofports OVS gave them, one port-description request and one
//! OF1.0 batch for no-flood, and ONE atomic bundle holding its mark and return flows. A
//! second sync of the same TC, converged, asks the switch nothing: the ofports come from
//! the snapshot. Deleting the TC takes all its flows out in one bundle, then its ports.

#![allow(clippy::unwrap_used)]

#[allow(unused_imports)]
mod common;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use common::{Sandbox, privileged, wait_for};
use tether::controller::trafficcontrol::TcController;
use tether::controller::{Bridge, LiveBridge};
use tether::k8s::{Namespace, Pod, Resource, Stores, TrafficControl};
use tether::openflow::{OfCounts, OfFlows, OfFlowsConfig};
use tether::ovsdb::{BridgeDb, Client, ClientOptions, Remote};
use tether::testing::FakeLinks;

/// TrafficControl `mirror`: the Pods `app=web` redirected to a VXLAN target, back through
/// a Geneve return port to `return_remote`.
fn mirror(return_remote: &str) -> TrafficControl {
    TrafficControl::decode(json!({
        "metadata": {"name": "mirror", "creationTimestamp": "2026-12-01T00:00:00Z"},
        "spec": {
            "appliedTo": {"podSelector": {"matchLabels": {"app": "web"}}},
            "direction": "Both", "action": "Redirect",
            "targetPort": {"vxlan": {"remoteIP": "192.0.2.2"}},
            "returnPort": {"geneve": {"remoteIP": return_remote}}
        }
    }))
    .unwrap()
}

/// (OVSDB transactions, OpenFlow counts) so far.
fn counts(client: &Client, of: &OfFlows) -> (u64, OfCounts) {
    (client.transactions(), of.counts())
}

#[test]
fn a_new_tc_with_a_return_port_is_four_round_trips_and_one_bundle() {
    if !privileged("a_new_tc_with_a_return_port_is_four_round_trips_and_one_bundle") {
        return;
    }
    let sb = Sandbox::start();
    sb.add_bridge("br-int");
    // A Pod's port, as a CNI adds it.
    sb.add_internal_port(
        "br-int",
        "web-veth",
        &[
            ("pod-name", "web"),
            ("pod-namespace", "prod"),
            ("container-id", "web"),
        ],
    );
    let client = Arc::new(Client::start(
        Remote::Unix(sb.db_sock()),
        ClientOptions::default(),
    ));
    client
        .wait_connected(common::patience(Duration::from_secs(10)))
        .unwrap();
    let bridge = Arc::new(LiveBridge::new(
        BridgeDb::ensure(client.clone(), "br-int", common::datapath()).unwrap(),
    ));
    let pod_of = wait_for(
        Duration::from_secs(10),
        "the Pod's ofport in the replica",
        || bridge.interfaces().pod("prod/web").and_then(|i| i.ofport()),
    );
    let mut cfg = OfFlowsConfig::new(sb.dir().join("br-int.mgmt"), "br-int", 1);
    cfg.timeout = common::patience(Duration::from_secs(20));
    let of = Arc::new(OfFlows::start(cfg).unwrap());
    of.wait_connected(common::patience(Duration::from_secs(10)))
        .unwrap();
    // The backend replays its flow set on every connection: wait until it has, so that
    // only the sync is counted. (The set is empty: the replay sends nothing, and the
    // delete of this round's leftovers heads the next bundle, the sync's.)
    of.reconnects()
        .recv_timeout(common::patience(Duration::from_secs(10)))
        .expect("the first connection's replay");

    let stores = Stores::default();
    stores
        .namespaces
        .apply(Namespace::decode(json!({"metadata": {"name": "prod"}})).unwrap());
    stores.pods.apply(
        Pod::decode(json!({
            "metadata": {"name": "web", "namespace": "prod", "labels": {"app": "web"}},
            "spec": {"nodeName": "vm1"}
        }))
        .unwrap(),
    );
    stores.traffic_controls.apply(mirror("192.0.2.3"));
    let c = TcController::new(
        stores.clone(),
        bridge.clone(),
        of.clone(),
        Arc::new(FakeLinks::new()),
    );

    let (db0, of0) = counts(&client, &of);
    c.sync("mirror").unwrap();
    let (db1, of1) = counts(&client, &of);
    let st = &c.status()[0];
    let (target, ret) = (
        st.target_port.clone().unwrap(),
        st.return_port.clone().unwrap(),
    );
    println!(
        "one new TC with a return port: ovsdb transactions={} openflow round trips={} bundles={} flow mods={}",
        db1 - db0,
        of1.round_trips - of0.round_trips,
        of1.bundles - of0.bundles,
        of1.flow_mods - of0.flow_mods
    );
    assert_eq!(
        db1 - db0,
        2,
        "one transaction creating both ports, one reading their ofports"
    );
    assert_eq!(
        of1.bundles - of0.bundles,
        1,
        "mark, target and return flows in one bundle"
    );
    // Outside the bundle: one port-description request, one OF1.0 no-flood batch. The
    // bundle itself is two (open/add/close with a barrier, then commit).
    assert_eq!(of1.round_trips - of0.round_trips, 2 + 2);
    // Two mark flows (to and from the Pod), the target port's drop flow and the return
    // port's flow; the connection's first bundle also deletes the round's leftovers by
    // cookie.
    assert_eq!(of1.flow_mods - of0.flow_mods, 4 + 1);
    let dump = sb.ofctl(&["dump-flows", "br-int"]);
    assert!(dump.contains(&format!("in_port={}", ret.1)), "{dump}");
    assert!(dump.contains(&format!("in_port={pod_of}")), "{dump}");
    assert_eq!(st.effective_pods, vec!["prod/web".to_string()]);
    assert!(
        target.0.starts_with("vxlan-") && ret.0.starts_with("geneve-"),
        "{target:?} {ret:?}"
    );

    // Converged: once the replica has both ports' ofports, a resync asks nothing.
    wait_for(
        Duration::from_secs(10),
        "the TC ports' ofports in the replica",
        || {
            let ifs = bridge.interfaces();
            (ifs.get(&target.0).and_then(|i| i.ofport()).is_some()
                && ifs.get(&ret.0).and_then(|i| i.ofport()).is_some())
            .then_some(())
        },
    );
    let (db2, of2) = counts(&client, &of);
    c.sync("mirror").unwrap();
    let (db3, of3) = counts(&client, &of);
    assert_eq!(
        (db3 - db2, of3.round_trips - of2.round_trips),
        (0, 0),
        "a converged TC costs nothing"
    );

    // A new return port: its flow in, the old one's out, in one bundle; then the old port
    // goes.
    stores.traffic_controls.apply(mirror("192.0.2.4"));
    let (_, of6) = counts(&client, &of);
    c.sync("mirror").unwrap();
    let (_, of7) = counts(&client, &of);
    assert_eq!(
        of7.bundles - of6.bundles,
        1,
        "the return port's change is one bundle"
    );
    assert_eq!(
        of7.flow_mods - of6.flow_mods,
        2,
        "one return flow in, one out"
    );
    let new_ret = c.status()[0].return_port.clone().unwrap();
    assert_ne!(new_ret.0, ret.0);
    let ports = sb.vsctl(&["list-ports", "br-int"]);
    assert!(
        !ports.contains(&ret.0),
        "the old return port is gone: {ports}"
    );

    // Deleted: the mark flows and the target's and return port's flows go in one bundle,
    // then both ports.
    stores.traffic_controls.delete("mirror");
    let (_, of4) = counts(&client, &of);
    c.sync("mirror").unwrap();
    let (_, of5) = counts(&client, &of);
    assert_eq!(
        of5.bundles - of4.bundles,
        1,
        "one bundle takes every flow of the TC out"
    );
    assert_eq!(of5.flow_mods - of4.flow_mods, 4);
    let ports = sb.vsctl(&["list-ports", "br-int"]);
    assert_eq!(
        ports.split_whitespace().collect::<Vec<_>>(),
        vec!["web-veth"],
        "{ports}"
    );
}
