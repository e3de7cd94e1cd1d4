//! What one TrafficControl's sync must do, as data: pure functions of a snapshot (the TC,
//! the interface store, the stores' answers) to the port steps, the flows and the ports
//! to release. The controller applies them; `plan/tests.rs` tests them as tables.

use std::collections::{BTreeMap, BTreeSet};

use super::error::SyncError;
use super::ports::{port_name, port_spec, tunnel_identity};
use crate::controller::interfaces::{Interfaces, Role};
use crate::k8s::{TcAction, TcDirection, TcPort};
use crate::openflow::{Flow, Owner};
use crate::ovsdb::{PortKind, PortSpec, Uuid};
use crate::pipeline;

/// What to do about one of the TC's ports (its target or return port).
#[derive(Clone, Debug, PartialEq)]
pub enum PortStep {
    /// On the bridge as wanted; its ofport when the snapshot has one.
    Keep { ofport: Option<u32> },
    /// Not on the bridge: create it.
    Create(PortSpec),
    /// On the bridge with another Interface type (an older tether wrote `gre`/`erspan` for
    /// an IPv6 remote): the netdev must be re-created anyway, so delete and create.
    Recreate { old: Uuid, spec: PortSpec },
    /// On the bridge with other options (an older tether wrote the ERSPAN hardware ID in
    /// decimal): fixed in place, the ofport stays.
    SetOptions {
        options: BTreeMap<String, String>,
        ofport: Option<u32>,
    },
}

/// One port of the TC and what to do about it.
#[derive(Clone, Debug, PartialEq)]
pub struct PortPlan {
    pub name: String,
    pub step: PortStep,
    /// An `ovsInternal` port: its netdev must be brought up.
    pub internal: bool,
}

impl PortPlan {
    /// The ofport the snapshot already gives (no OVSDB request needed).
    pub fn known_ofport(&self) -> Option<u32> {
        match self.step {
            PortStep::Keep { ofport } | PortStep::SetOptions { ofport, .. } => ofport,
            PortStep::Create(_) | PortStep::Recreate { .. } => None,
        }
    }
}

/// The step for port `p`. Refuses to reuse a port of the same name that is not a
/// traffic-control port (docs/design.md#only-traffic-control-ports-are-reused), and a new
/// tunnel that ovs-vswitchd would see as the same tunnel as an existing port (it refuses
/// the second with "File exists"); `tcs_using(port)` names the TCs of the other port.
pub fn plan_port(
    ifs: &Interfaces,
    p: &TcPort,
    tcs_using: impl Fn(&str) -> Vec<String>,
) -> Result<PortPlan, SyncError> {
    let name = port_name(p);
    let spec = port_spec(p);
    let internal = matches!(p, TcPort::OvsInternal { .. });
    let step = match ifs.get(&name) {
        Some(i) if i.role != Role::TrafficControl => {
            return Err(SyncError::PortConflict {
                port: name,
                role: i.role.describe(),
            });
        }
        Some(i) => match &spec.kind {
            PortKind::Tunnel { kind, .. } if *kind != i.port.if_type => PortStep::Recreate {
                old: i.uuid().clone(),
                spec,
            },
            PortKind::Tunnel { options, .. } if i.port.options != *options => {
                PortStep::SetOptions {
                    options: options.clone(),
                    ofport: i.ofport(),
                }
            }
            _ => PortStep::Keep { ofport: i.ofport() },
        },
        None => {
            if let PortKind::Tunnel { kind, options } = &spec.kind {
                if let Some(identity) = tunnel_identity(kind, options) {
                    let clash = ifs.iter().find(|i| {
                        i.port.name != name
                            && tunnel_identity(&i.port.if_type, &i.port.options).as_ref()
                                == Some(&identity)
                    });
                    if let Some(other) = clash {
                        return Err(SyncError::TunnelClash {
                            port: name,
                            other: other.port.name.clone(),
                            other_tcs: tcs_using(&other.port.name),
                            identity,
                        });
                    }
                }
            }
            PortStep::Create(spec)
        }
    };
    Ok(PortPlan {
        name,
        step,
        internal,
    })
}

/// The ports a TC used (per what was last installed) and no longer does, that no valid TC
/// in the store wants: they are released (docs/design.md#the-old-return-port-is-released).
pub fn plan_release(
    previous: &[String],
    now: &[&str],
    referenced: &BTreeSet<String>,
) -> Vec<String> {
    let mut out: Vec<String> = previous
        .iter()
        .filter(|p| !now.contains(&p.as_str()) && !referenced.contains(*p))
        .cloned()
        .collect();
    out.dedup();
    out
}

/// A TC's flows, by owner: its mark flows; the target port's drop flow and the return
/// port's flow, each under its port's own owner (ports may be shared; a port's flow goes
/// when the port does).
#[derive(Clone, Debug, PartialEq)]
pub struct FlowPlan {
    pub marks: (Owner, Vec<Flow>),
    pub target: (Owner, Vec<Flow>),
    pub ret: Option<(Owner, Vec<Flow>)>,
}

impl FlowPlan {
    /// Every owner's flows, for one atomic `apply_many`.
    pub fn sets(self) -> Vec<(Owner, Vec<Flow>)> {
        [self.marks, self.target]
            .into_iter()
            .chain(self.ret)
            .collect()
    }
}

/// The owners of a TC's flows: its own (`marks`), its target port's and its return port's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowOwners {
    pub marks: Owner,
    pub target: Owner,
    pub ret: Option<Owner>,
}

/// The flows that make the switch mirror or redirect the effective Pods' traffic
/// (`pod_ofports`) to `target`, drop what comes in on `target`, and take what comes back
/// on `ret` into L2 forwarding.
pub fn plan_flows(
    pod_ofports: &[u32],
    owners: FlowOwners,
    target: u32,
    ret: Option<u32>,
    direction: TcDirection,
    action: TcAction,
) -> FlowPlan {
    let mut ofports = pod_ofports.to_vec();
    ofports.sort_unstable();
    ofports.dedup();
    FlowPlan {
        marks: (
            owners.marks,
            pipeline::tc_mark_flows(&ofports, target, direction, action),
        ),
        target: (owners.target, vec![pipeline::tc_target_flow(target)]),
        ret: owners
            .ret
            .zip(ret)
            .map(|(o, port)| (o, vec![pipeline::tc_return_flow(port)])),
    }
}

#[cfg(test)]
mod tests;
