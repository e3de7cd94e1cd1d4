//! The daemon's counters: syncs per key kind with their durations, OpenFlow reconnects,
//! bridges made again. The workers and the event loop bump them; the state socket
//! (`status`) reads a [`MetricsSnapshot`] of them for `tether status` and Prometheus.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Counters per sync key kind (`tc`, `en`, `l2`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SyncCounters {
    pub syncs: u64,
    pub errors: u64,
    pub duration_seconds_sum: f64,
    pub duration_seconds_max: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricsSnapshot {
    pub syncs: BTreeMap<String, SyncCounters>,
    /// Flow mods sent in committed bundles (`openflow::OfFlows::counts`).
    pub flow_mods: u64,
    pub openflow_reconnects: u64,
    /// Owners whose flows were found changed on the switch by someone else and installed
    /// again (`openflow::drift`).
    #[serde(default)]
    pub flow_drift_repairs: u64,
    /// Times the bridge was found gone and made again.
    #[serde(default)]
    pub bridge_recreations: u64,
}

/// Counters the workers and the event loop bump; read by the status thread.
#[derive(Default)]
pub struct Metrics {
    syncs: Mutex<BTreeMap<&'static str, SyncCounters>>,
    pub openflow_reconnects: AtomicU64,
    pub bridge_recreations: AtomicU64,
}

impl Metrics {
    /// One sync of a `kind` key took `took`; `ok` = it succeeded.
    pub fn record_sync(&self, kind: &'static str, ok: bool, took: Duration) {
        let mut m = self.syncs.lock().unwrap_or_else(|e| e.into_inner());
        let c = m.entry(kind).or_default();
        c.syncs += 1;
        if !ok {
            c.errors += 1;
        }
        let s = took.as_secs_f64();
        c.duration_seconds_sum += s;
        if s > c.duration_seconds_max {
            c.duration_seconds_max = s;
        }
    }

    pub fn snapshot(&self) -> MetricsSnapshot {
        let m = self.syncs.lock().unwrap_or_else(|e| e.into_inner());
        MetricsSnapshot {
            syncs: m
                .iter()
                .map(|(k, v)| ((*k).to_string(), v.clone()))
                .collect(),
            flow_mods: 0,
            openflow_reconnects: self.openflow_reconnects.load(Ordering::Relaxed),
            flow_drift_repairs: 0,
            bridge_recreations: self.bridge_recreations.load(Ordering::Relaxed),
        }
    }
}
