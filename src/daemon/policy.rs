//! NetworkPolicy in the daemon: with an Antrea kubeconfig (`antreaKubeconfig`), the three
//! controlplane watches (`controlplane::Source`) and the policy controller's thread
//! (`controller::policy`), fed the ExternalNode's ports. The previous run's policy flows
//! are carried into this run's round first, so restarting tether never leaves the VM
//! without its policy (docs/networkpolicy.md#restarts).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Sender, bounded};

use super::{DaemonError, Ovs};
use crate::config::Config;
use crate::controller::Flows;
use crate::controller::externalnode::EnController;
use crate::controller::policy::report::StatusSink;
use crate::controller::policy::{PolicyController, carry_over};
use crate::controlplane::{Kind, Source};
use crate::heartbeat::Heartbeats;
use crate::openflow::flow::{ROUND_MASK, tether_cookie};
use crate::openflow::{Category, Owner};
use crate::pipeline::policy::VmPorts;
use crate::pipeline::table;

/// A sync may take this long before the watchdog calls the thread stuck.
const DEADLINE: std::time::Duration = std::time::Duration::from_secs(120);

/// The running policy parts.
pub(crate) struct Policy {
    pub controller: Arc<PolicyController>,
    pub source: Source,
    pub heartbeats: Arc<Heartbeats>,
    thread: JoinHandle<()>,
    stop: Sender<()>,
}

impl Policy {
    pub fn stop(self) {
        drop(self.stop);
        let _ = self.thread.join();
        self.source.stop();
    }
}

/// Start the source and the controller, if NetworkPolicy is configured.
pub(crate) fn start(
    cfg: &Config,
    ovs: &Ovs,
    flows: &Arc<dyn Flows>,
    en: &Arc<EnController>,
) -> Result<Option<Policy>, DaemonError> {
    if cfg.antrea_kubeconfig.is_none() {
        return Ok(None);
    }
    let carried = carry(ovs, flows);
    let (tx, rx) = bounded(64);
    let source = crate::wiring::start_controlplane_source(cfg, tx)
        .map_err(|e| DaemonError::Setup(format!("controlplane: {e}")))?
        .ok_or_else(|| DaemonError::Setup("controlplane: no kubeconfig".into()))?;
    let sink: Option<Arc<dyn StatusSink>> = match crate::wiring::controlplane_client(cfg) {
        Ok(c) => Some(Arc::new(c)),
        Err(e) => {
            log::warn!("networkpolicy: cannot build the status client, not reporting: {e}");
            None
        }
    };
    let en = en.clone();
    let ports = Box::new(move || {
        let st = en.status();
        match (st.step.as_str(), st.host_ofport, st.uplink_ofport) {
            ("attached", Some(host), Some(uplink)) if st.cut_off.is_none() => {
                Some(VmPorts { host, uplink })
            }
            _ => None,
        }
    });
    let controller = Arc::new(PolicyController::new(
        flows.clone(),
        source.state().clone(),
        ports,
        sink,
        crate::wiring::controlplane_node_key(cfg),
        carried,
    ));
    let heartbeats = Arc::new(Heartbeats::default());
    let pulse = heartbeats.register("np-controller", DEADLINE, Instant::now());
    let (stop_tx, stop_rx) = bounded::<()>(0);
    let c = controller.clone();
    let status = source.status_handle();
    let thread = std::thread::Builder::new()
        .name("np-controller".into())
        .spawn(move || {
            let resyncs = || {
                status
                    .lock()
                    .map(|m| m.get(&Kind::NetworkPolicy).map_or(0, |w| w.reconnects))
                    .unwrap_or(0)
            };
            c.run(&rx, &resyncs, &stop_rx, &pulse);
        })
        .map_err(|e| DaemonError::Setup(format!("thread np-controller: {e}")))?;
    Ok(Some(Policy {
        controller,
        source,
        heartbeats,
        thread,
        stop: stop_tx,
    }))
}

/// Put the previous round's policy flows into this run's round (through the deferred
/// flows, so they go out in the bundle that deletes the old round). Only when the previous
/// round is tether's own pipeline (its Output base flow in table 140): Antrea's agent's
/// policy flows live in other tables.
fn carry(ovs: &Ovs, flows: &Arc<dyn Flows>) -> BTreeSet<Owner> {
    let Some(prev) = ovs.replacing() else {
        return BTreeSet::new();
    };
    let descs = match ovs.of.dump(u64::from(prev) << 48, ROUND_MASK) {
        Ok(d) => d,
        Err(e) => {
            log::warn!("networkpolicy: cannot read round {prev}'s flows to keep them: {e}");
            return BTreeSet::new();
        }
    };
    let tethers = descs.iter().any(|d| {
        d.table_id == table::OUTPUT
            && tether_cookie(d.cookie).is_some_and(|(_, c, o)| c == Category::DEFAULT && o == 0)
    });
    if !tethers {
        return BTreeSet::new();
    }
    let carried = carry_over(descs);
    let n: usize = carried.values().map(Vec::len).sum();
    let mut owners = BTreeSet::new();
    for (owner, fl) in carried {
        match flows.apply(owner, fl) {
            Ok(()) => {
                owners.insert(owner);
            }
            Err(e) => log::warn!("networkpolicy: cannot keep {owner}'s flows: {e}"),
        }
    }
    if n > 0 {
        log::info!(
            "networkpolicy: keeping round {prev}'s {n} policy flows ({} owners) until the controlplane has synced",
            owners.len()
        );
    }
    owners
}

/// The bridge's `fail_mode`: with NetworkPolicy on `secure`, so that after an
/// ovs-vswitchd restart its table stays empty (dropping) until tether has put its flows
/// back, where standalone installs a NORMAL flow that forwards everything around the
/// policy until then (measured by the e2e tests). Without NetworkPolicy `standalone`: with
/// tether down and OVS restarted the VM stays reachable. A change of mode makes OVS flush
/// the bridge's flows: it happens once, at the start that turns NetworkPolicy on or off,
/// before this run installs anything (connectivity waits for the first full sync then;
/// policy never has a gap).
pub(crate) fn fail_mode(cfg: &Config) -> &'static str {
    if cfg.antrea_kubeconfig.is_some() {
        crate::ovsdb::bridgedb::SECURE
    } else {
        crate::ovsdb::bridgedb::STANDALONE
    }
}
