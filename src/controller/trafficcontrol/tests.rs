//! The seed's cases (docs/antrea-compat.md#seed-test-cases: add ×11, update ×5, shared target port, Pod
//! port appearing later, Pod and Namespace label moves, Pod delete) plus one case per
//! fix of docs/design.md#where-tether-differs-from-antrea-and-why, with recording fakes of OVSDB and OpenFlow.
//!
//! This file holds what they share: the `Env` fixture, the objects' builders and the
//! scenario steps. The tests are in `tests/`, one file per behaviour.

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::controller::Bridge;
use crate::controller::route;
use crate::k8s::{Namespace, Pod, Resource, Stores, TrafficControl};
use crate::k8s::{TcAction, TcDirection};
use crate::netlink::FakeLinks;
use crate::openflow::{Category, Flow, OfError, Owner};
use crate::pipeline;
use crate::testing::{FakeBridge, FakeFlows};

struct Env {
    stores: Stores,
    bridge: Arc<FakeBridge>,
    flows: Arc<FakeFlows>,
    links: Arc<FakeLinks>,
    c: TcController,
}

fn env() -> Env {
    let stores = Stores::default();
    let bridge = Arc::new(FakeBridge::new());
    let flows = Arc::new(FakeFlows::new());
    let links = Arc::new(FakeLinks::new());
    let c = TcController::new(stores.clone(), bridge.clone(), flows.clone(), links.clone());
    Env {
        stores,
        bridge,
        flows,
        links,
        c,
    }
}

fn decode<T: Resource>(v: Value) -> T {
    T::from_wire(serde_json::from_value(v).unwrap())
}

fn tc_at(name: &str, ts: &str, spec: Value) -> TrafficControl {
    decode(json!({"metadata": {"name": name, "creationTimestamp": ts}, "spec": spec}))
}

fn tc(name: &str, spec: Value) -> TrafficControl {
    tc_at(name, "2026-11-30T09:00:00Z", spec)
}

fn pod(ns: &str, name: &str, labels: Value) -> Pod {
    decode(
        json!({"metadata": {"name": name, "namespace": ns, "labels": labels},
                  "spec": {"nodeName": "vm1"}}),
    )
}

fn namespace(name: &str, labels: Value) -> Namespace {
    decode(json!({"metadata": {"name": name, "labels": labels}}))
}

fn spec(applied_to: Value, direction: &str, action: &str, target: Value) -> Value {
    json!({"appliedTo": applied_to, "direction": direction, "action": action, "targetPort": target})
}

fn app_a() -> Value {
    json!({"podSelector": {"matchLabels": {"app": "a"}}})
}

fn device(name: &str) -> Value {
    json!({"device": {"name": name}})
}

/// The TC most tests use: Pods `app=a` mirrored both ways to device `target`.
fn mirror_a(target: &str) -> Value {
    spec(app_a(), "Both", "Mirror", device(target))
}

impl Env {
    fn with_pods(self) -> (Env, u32, u32) {
        self.stores
            .namespaces
            .apply(namespace("ns1", json!({"env": "prod"})));
        self.stores
            .namespaces
            .apply(namespace("ns2", json!({"env": "dev"})));
        self.stores
            .pods
            .apply(pod("ns1", "pa", json!({"app": "a"})));
        self.stores
            .pods
            .apply(pod("ns2", "pb", json!({"app": "b"})));
        let a = self.bridge.add_pod_port("ns1", "pa");
        let b = self.bridge.add_pod_port("ns2", "pb");
        (self, a, b)
    }

    fn marks(&self, name: &str) -> Vec<Flow> {
        self.flows.of(self.c.owner_of(name))
    }

    fn ofport(&self, port: &str) -> u32 {
        u32::try_from(self.bridge.port(port).unwrap().ofport).unwrap()
    }

    /// TC `name` with `spec` in the store; no sync yet.
    fn apply(&self, name: &str, spec: Value) {
        self.stores.traffic_controls.apply(tc(name, spec));
    }

    /// [`Env::apply`], then a sync of `name` that must succeed.
    fn apply_synced(&self, name: &str, spec: Value) {
        self.apply(name, spec);
        self.c.sync(name).unwrap();
    }
}

fn expect(pods: &[u32], target: u32, d: TcDirection, a: TcAction) -> Vec<Flow> {
    let mut f = pipeline::tc_mark_flows(pods, target, d, a);
    f.sort();
    f
}

mod add;
mod failures;
mod ownership;
mod relabel;
mod update;
