//! Fault campaigns (docs/reliability.md#fault-campaigns) against the `tether` binary with real userspace OVS:
//! the ExternalNode VM bed of `externalnode_vm` (the sandbox namespace is the VM, `eth1`
//! taken over) plus two Pods and a collector on the same `br-int` for TrafficControls.
//!
//! - `vswitchd_kill9_campaign`: ovs-vswitchd `kill -9` + restart with a TC and the EN
//!   active → the flows equal the set from before, no-flood is back on the TC port, and the
//!   VM answers pings.
//! - `ovsdb_restart_campaign`: ovsdb-server `kill -9` + restart, then a TC change that
//!   needs OVSDB → exactly the expected ports (no duplicate row, none lost) and flows.
//! - `api_fault_campaign`: random API faults (cut streams, 410 as HTTP and as an ERROR
//!   event, 5xx, bare Status lines, garbage lines, delays, streams ended early, expired
//!   continue tokens) during random object changes → the final OVS state equals what the
//!   final objects imply: checked directly (mark flows per selected Pod, target ports) and
//!   against a fresh, fault-free start of tether from the same objects.
//! - `tether_kill9_campaign`: tether `kill -9` at random moments during churn → restart
//!   converges; a sampler asserts the VM never loses its addresses or default routes.
//!
//! Counts come from `TETHER_FAULTS` (unset: a smoke run; `ci`; `full` = the issue's
//! counts) and can be overridden one by one (`FAULTS_VSWITCHD_KILLS`, `FAULTS_OVSDB_RESTARTS`,
//! `FAULTS_API_FAULTS`, `FAULTS_TETHER_KILLS`); `FAULTS_SEED` fixes the randomness.
//! Each campaign prints one `faults <name>: …` result line (scripts/faults.sh collects them).
//! Recovery times are printed, never asserted (no timed asserts in tests).
//!
//! Here: counts, randomness and result lines. The bed is in `faults/bed.rs`, the campaigns
//! in `faults/ovs.rs` (1 and 2), `faults/api.rs` (3) and `faults/tether_kill.rs` (4).

#![allow(clippy::unwrap_used)]

#[path = "faults/api.rs"]
mod api;
mod apiserver;
#[path = "faults/bed.rs"]
mod bed;
mod common;
mod externalnode_vm;
#[path = "faults/ovs.rs"]
mod ovs;
#[path = "faults/tether_kill.rs"]
mod tether_kill;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use apiserver::{ApiServer, Fault, FaultAction, Options};
use bed::{Bed, Expect, attach, expect, matches, pod_json, pods_yaml, reachable, tc_json, tc_yaml};
use common::{Netns, Sandbox, Tether, privileged, wait_for};
use externalnode_vm::*;

// ---------------------------------------------------------------------------------------
// Counts and randomness

struct Counts {
    vswitchd_kills: usize,
    ovsdb_restarts: usize,
    api_faults: usize,
    tether_kills: usize,
}

fn counts() -> Counts {
    let tier = std::env::var("TETHER_FAULTS").unwrap_or_default();
    let base = match tier.as_str() {
        "full" => Counts {
            vswitchd_kills: 50,
            ovsdb_restarts: 20,
            api_faults: 10_000,
            tether_kills: 100,
        },
        "ci" => Counts {
            vswitchd_kills: 6,
            ovsdb_restarts: 4,
            api_faults: 80,
            tether_kills: 8,
        },
        _ => Counts {
            vswitchd_kills: 2,
            ovsdb_restarts: 2,
            api_faults: 30,
            tether_kills: 3,
        },
    };
    let get = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    Counts {
        vswitchd_kills: get("FAULTS_VSWITCHD_KILLS", base.vswitchd_kills),
        ovsdb_restarts: get("FAULTS_OVSDB_RESTARTS", base.ovsdb_restarts),
        api_faults: get("FAULTS_API_FAULTS", base.api_faults),
        tether_kills: get("FAULTS_TETHER_KILLS", base.tether_kills),
    }
}

/// xorshift64*, seeded from `FAULTS_SEED` (printed, so a failing run can be replayed).
struct Rng(u64);

impl Rng {
    fn new(campaign: &str) -> Rng {
        let seed = std::env::var("FAULTS_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos()
                    .to_le_bytes()[0..8]
                    .iter()
                    .fold(0u64, |a, b| a << 8 | u64::from(*b))
                    | 1
            });
        eprintln!("faults {campaign}: FAULTS_SEED={seed}");
        Rng(seed)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % u64::try_from(n).unwrap()).unwrap()
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

/// Poll `f` every 50 ms until it is `Ok`; on timeout, fail with its last error. Both the
/// interval and the timeout stretch by the harness's patience (`common::wait_for`).
fn wait_ok<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Result<T, String>) -> T {
    let timeout = common::patience(timeout);
    let end = Instant::now() + timeout;
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) if Instant::now() > end => {
                panic!("timed out after {timeout:?} waiting for {what}: {e}")
            }
            Err(_) => std::thread::sleep(common::patience(Duration::from_millis(50))),
        }
    }
}

/// A campaign's result line, on a line of its own in stderr (libtest's "test … ok" lines
/// share stdout), where scripts/faults.sh picks it up.
fn result(line: String) {
    eprintln!("\n{line}");
}

fn millis(d: Duration) -> u128 {
    d.as_millis()
}

/// `p50/max` of recovery times, and how many took longer than `limit`.
/// The `p`-th percentile (nearest rank) of `times`; zero when empty.
fn percentile(times: &[Duration], p: usize) -> Duration {
    let mut t = times.to_vec();
    t.sort();
    match t.len() {
        0 => Duration::ZERO,
        n => t[((n * p).div_ceil(100)).clamp(1, n) - 1],
    }
}

fn summary(times: &[Duration], limit: Duration) -> String {
    if times.is_empty() {
        return "recover_p50=- recover_max=-".into();
    }
    format!(
        "recover_p50={}ms recover_max={}ms over_{}ms={}",
        millis(percentile(times, 50)),
        millis(percentile(times, 100)),
        millis(limit),
        times.iter().filter(|d| **d > limit).count()
    )
}
