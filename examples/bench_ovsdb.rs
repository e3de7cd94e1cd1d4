//! Benchmark group `ovsdb` (scripts/bench.sh): creating internal ports through tether's OVSDB
//! client vs `ovs-vsctl`. Every measurement gets a fresh sandbox (a netns that already holds
//! hundreds of taps slows vswitchd down, which would favour whoever runs first); rounds
//! alternate who goes first and the median is printed. Both sides wait until ovs-vswitchd has
//! applied the change (`next_cfg`/`cur_cfg`), as `ovs-vsctl` does by default.
//!   bench ovsdb_200_ports_one_txn: …   (baseline: one `ovs-vsctl` call adding 200)
//!   bench ovsdb_200_ports_200_txns: …  (baseline: 200 `ovs-vsctl add-port` calls)

// A benchmark aborts loudly on any setup failure.
#![allow(clippy::unwrap_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::process::Command;
use std::time::Instant;

use common::Sandbox;
use tether::ovsdb::{BridgeDb, PortKind, PortSpec};

const N: usize = 200;
const ROUNDS: usize = 3;

fn vsctl(sb: &Sandbox, args: &[String]) {
    let mut c = Command::new("ovs-vsctl");
    c.env("OVS_RUNDIR", sb.dir()).arg("--timeout=60").args(args);
    common::run(&mut c);
}

fn add_port_args(name: &str) -> Vec<String> {
    [
        "add-port",
        "br-int",
        name,
        "--",
        "set",
        "Interface",
        name,
        "type=internal",
    ]
    .map(String::from)
    .to_vec()
}

/// A fresh sandbox with br-int, and a connected client when tether is the one measured.
fn setup(ours: bool) -> (Sandbox, Option<BridgeDb>) {
    let sb = Sandbox::start();
    let br = sb.bridge_db("br-int");
    (sb, ours.then_some(br))
}

fn check(sb: &Sandbox) {
    let ports = sb.vsctl(&["list-ports", "br-int"]).lines().count();
    assert_eq!(ports, N);
}

fn bulk(ours: bool) -> f64 {
    let (sb, br) = setup(ours);
    let t = Instant::now();
    match br {
        Some(br) => {
            let specs: Vec<PortSpec> = (0..N)
                .map(|i| PortSpec::new(&format!("p{i}"), PortKind::Internal { mac: None }))
                .collect();
            br.create_ports(&specs, true).unwrap();
        }
        None => {
            let mut args = Vec::new();
            for i in 0..N {
                args.push("--".to_string());
                args.extend(add_port_args(&format!("p{i}")));
            }
            vsctl(&sb, &args[1..]);
        }
    }
    let took = t.elapsed();
    check(&sb);
    took.as_secs_f64() * 1000.0
}

fn singles(ours: bool) -> f64 {
    let (sb, br) = setup(ours);
    let t = Instant::now();
    for i in 0..N {
        let name = format!("p{i}");
        match &br {
            Some(br) => {
                br.create_ports(
                    &[PortSpec::new(&name, PortKind::Internal { mac: None })],
                    true,
                )
                .unwrap();
            }
            None => vsctl(&sb, &add_port_args(&name)),
        }
    }
    let took = t.elapsed();
    check(&sb);
    took.as_secs_f64() * 1000.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn measure(name: &str, f: fn(bool) -> f64) {
    let (mut ours, mut base) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        if round % 2 == 0 {
            ours.push(f(true));
            base.push(f(false));
        } else {
            base.push(f(false));
            ours.push(f(true));
        }
    }
    let (o, b) = (median(ours), median(base));
    println!(
        "bench {name}: tether={o:.1}ms baseline={b:.1}ms ratio={:.2}",
        o / b
    );
}

fn main() {
    assert!(common::privileged("bench_ovsdb"), "bench_ovsdb needs root");
    measure("ovsdb_200_ports_one_txn", bulk);
    measure("ovsdb_200_ports_200_txns", singles);
}
