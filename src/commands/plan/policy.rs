//! NetworkPolicy in `tether plan`. With the daemon running, its policy controller applies
//! every change within milliseconds: what is pending is what its status says (a failing
//! sync, watches not synced), and the switch's policy flows are what it keeps. With the
//! daemon stopped, the flows its next start installs: compiled from what the
//! antrea-controller's three watches say (opened here until their first bookmarks, then
//! closed) for the VM's pair as OVSDB has it, as that start compiles them (a fresh
//! compiler: the same conjunction ids and priorities). Reads only. When the controlplane
//! cannot be read in time, or the pair is not attached, the policy flows on the switch are
//! kept as they are, as the daemon keeps them, and the plan says why.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::openflow::flowmod::FlowDesc;
use crate::openflow::{Category, Flow, Owner};
use crate::ovsdb::PortData;
use crate::pipeline::policy::{Compiler, VmPorts, owners_of};

/// How long the plan waits for the three watches' first bookmarks.
const WAIT: Duration = Duration::from_secs(10);

/// The policy flows per owner.
pub type Sets = BTreeMap<Owner, Vec<Flow>>;
/// Rule labels by conjunction id.
pub type RuleNames = BTreeMap<u32, String>;

/// The policy flows per owner, with the rule names for the labels; or why not (the flows
/// on the switch then stay in the plan as they are).
pub fn desired(
    cfg: &Config,
    ports: &[PortData],
    current: &[FlowDesc],
) -> (Sets, RuleNames, Option<String>) {
    if let Ok(snap) = crate::status::fetch(&cfg.state_socket) {
        if let Some(np) = snap.network_policy {
            let names = np
                .policies
                .iter()
                .flat_map(|p| {
                    p.rules
                        .iter()
                        .map(move |r| (r.conj_id, format!("{} {} {}", p.name, r.direction, r.name)))
                })
                .collect();
            let why = match (&np.last_error, np.synced) {
                (Some(e), _) => Some(format!("the running daemon's last policy sync failed: {e}")),
                (None, false) => Some(
                    "the running daemon's controlplane watches have not all had their first bookmark"
                        .to_string(),
                ),
                (None, true) => None,
            };
            return (as_installed(current), names, why);
        }
    }
    match compile(cfg, ports) {
        Ok((sets, names)) => (sets, names, None),
        Err(why) => (as_installed(current), BTreeMap::new(), Some(why)),
    }
}

fn compile(cfg: &Config, ports: &[PortData]) -> Result<(Sets, RuleNames), String> {
    let vm = pair(ports).ok_or("the VM's NIC is not attached: policy flows stay as they are")?;
    let (tx, _rx) = crossbeam_channel::bounded(1024);
    let source = crate::wiring::start_controlplane_source(cfg, tx)
        .map_err(|e| format!("controlplane: {e}"))?
        .ok_or("no antreaKubeconfig")?;
    let end = Instant::now() + WAIT;
    let synced = loop {
        let done = source.state().lock().map(|s| s.synced()).unwrap_or(false);
        if done || Instant::now() > end {
            break done;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if !synced {
        source.stop();
        return Err(format!(
            "the controlplane watches had no first bookmark within {WAIT:?}: policy flows stay as they are"
        ));
    }
    let compiled = {
        let state = source
            .state()
            .lock()
            .map_err(|_| "controlplane state poisoned")?;
        Compiler::new()
            .compile(&state, vm)
            .map_err(|e| format!("compiling the policies: {e}"))?
    };
    source.stop();
    let names = compiled
        .rules
        .iter()
        .map(|r| {
            (
                r.conj_id,
                format!("{} {:?} {}", r.policy, r.direction, r.rule_name),
            )
        })
        .collect();
    Ok((owners_of(&compiled).into_iter().collect(), names))
}

/// The host and uplink ofports of the attached NIC (Antrea's `antrea-type` external_ids).
fn pair(ports: &[PortData]) -> Option<VmPorts> {
    let of = |kind: &str| {
        ports
            .iter()
            .find(|p| p.external_ids.get("antrea-type").map(String::as_str) == Some(kind))
            .and_then(|p| u32::try_from(p.ofport).ok())
            .filter(|o| *o > 0)
    };
    Some(VmPorts {
        host: of("host")?,
        uplink: of("uplink")?,
    })
}

/// The switch's policy flows of the newest round, per owner: kept as they are.
fn as_installed(current: &[FlowDesc]) -> BTreeMap<Owner, Vec<Flow>> {
    let newest = current
        .iter()
        .filter_map(|d| crate::openflow::flow::tether_cookie(d.cookie))
        .map(|(r, _, _)| r)
        .max();
    crate::controller::policy::carry_over(
        current
            .iter()
            .filter(|d| {
                crate::openflow::flow::tether_cookie(d.cookie)
                    .is_some_and(|(r, c, _)| Some(r) == newest && c == Category::NETWORK_POLICY)
            })
            .cloned()
            .collect(),
    )
}
