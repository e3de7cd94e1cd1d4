//! The traits the controllers program OVS and the host's network manager through, owned
//! here by their consumer: each is as narrow as the controllers need, so a fake is easy
//! (the kernel's links go through `netlink::Links`, which `netlink` owns). The production
//! adapters are in [`super::live`] (and [`super::deferred`] wraps `Flows` for the first
//! full sync); `tether plan`'s and `check`'s dry ones in `crate::commands::dry`. Test doubles: the recording
//! `FakeBridge` and `FakeFlows` in `crate::testing`, a `Datapath` fake in the
//! ExternalNode tests, and [`NoHostNetwork`] here (also what a controller uses unless told
//! otherwise). The protocol modules (`ovsdb`, `openflow`, `hostnet`) neither implement nor
//! import these traits; `live` does that for them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::interfaces::Interfaces;
use crate::hostnet::HostNetError;
use crate::openflow::{Flow, FlowChange, OfError, Owner};
use crate::ovsdb::{OvsdbError, PortSpec, Uuid};

/// The bridge's ports and external_ids in OVSDB.
pub trait Bridge: Send + Sync {
    /// The interface store: every port of the bridge, classified (a shared snapshot).
    fn interfaces(&self) -> Arc<Interfaces>;
    /// Create a port (one transaction); its Port UUID.
    fn create_port(&self, spec: &PortSpec) -> Result<Uuid, OvsdbError>;
    /// Create several ports in one transaction; their Port UUIDs in order.
    fn create_ports(&self, specs: &[PortSpec]) -> Result<Vec<Uuid>, OvsdbError> {
        specs.iter().map(|s| self.create_port(s)).collect()
    }
    /// The port's ofport, read fresh (waits for OVS to assign one; -1 is an error).
    fn ofport(&self, name: &str) -> Result<u32, OvsdbError>;
    /// Several ports' ofports, read fresh in one transaction (for ports just created: the
    /// snapshot cannot have them yet).
    fn ofports(&self, names: &[String]) -> Result<Vec<u32>, OvsdbError> {
        names.iter().map(|n| self.ofport(n)).collect()
    }
    /// Delete ports by Port UUID, one transaction.
    fn delete_ports(&self, ports: &[Uuid]) -> Result<(), OvsdbError>;
    /// Delete ports and wait (up to `within`) until ovs-vswitchd has applied the delete
    /// (`next_cfg`/`cur_cfg`): it has then taken them out of the datapath. `Timeout` when
    /// it has not (the delete is committed all the same). Fakes without a switch to wait
    /// for: the same as `delete_ports`.
    fn delete_ports_applied(&self, ports: &[Uuid], within: Duration) -> Result<(), OvsdbError> {
        let _ = within;
        self.delete_ports(ports)
    }
    /// Replace a Port's external_ids.
    fn set_port_external_ids(
        &self,
        port: &str,
        ids: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError>;
    /// Replace an Interface's options (ovs-vswitchd reconfigures the netdev in place: the
    /// port keeps its ofport).
    fn set_interface_options(
        &self,
        name: &str,
        options: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError>;
    /// One of the Bridge row's external_ids, read fresh (e.g. a recorded takeover step).
    fn bridge_external_id(&self, key: &str) -> Result<Option<String>, OvsdbError>;
    /// Set (`Some`) or remove (`None`) one of the Bridge row's external_ids.
    fn set_bridge_external_id(&self, key: &str, value: Option<&str>) -> Result<(), OvsdbError>;
    /// Create the bridge again, with tether's settings, if OVS lost it (deleted, or a
    /// database that came back without it); `true` when it did. Adapters that cannot lose
    /// their bridge: nothing to do.
    fn ensure_bridge(&self) -> Result<bool, OvsdbError> {
        Ok(false)
    }
}

/// The bridge's flows, by owner, and the OF1.0 no-flood bit of ports.
pub trait Flows: Send + Sync {
    /// Make `owner`'s flows exactly `flows` (one atomic bundle of the difference).
    fn apply(&self, owner: Owner, flows: Vec<Flow>) -> Result<(), OfError>;
    /// Make several owners' flows exactly theirs. A backend that can sends them as one
    /// bundle (a TrafficControl's mark and return flows change together; a cold start of
    /// 1,000 TCs is one commit for the switch, not 1,000). Returns the owners that failed,
    /// with why; every other owner's flows are installed.
    fn apply_many(&self, sets: Vec<(Owner, Vec<Flow>)>) -> Vec<(Owner, OfError)> {
        sets.into_iter()
            .filter_map(|(owner, flows)| self.apply(owner, flows).err().map(|e| (owner, e)))
            .collect()
    }
    /// Several owners' flows replaced or patched ([`FlowChange`]), as one bundle where the
    /// backend can; returns the owners that failed, as [`Flows::apply_many`]. The default
    /// replaces through `apply_many` and refuses every patch (the caller then replaces
    /// those owners); the backends that keep each owner's flows patch them.
    fn change_many(&self, changes: Vec<(Owner, FlowChange)>) -> Vec<(Owner, OfError)> {
        let mut sets = Vec::new();
        let mut refused = Vec::new();
        for (owner, change) in changes {
            match change {
                FlowChange::Replace(flows) => sets.push((owner, flows)),
                FlowChange::Patch { .. } => {
                    refused.push((owner, OfError::Unsupported("patching flows".into())));
                }
            }
        }
        let mut failed = if sets.is_empty() {
            Vec::new()
        } else {
            self.apply_many(sets)
        };
        failed.extend(refused);
        failed
    }
    /// Delete every flow of `owner`.
    fn remove(&self, owner: Owner) -> Result<(), OfError>;
    /// Set or clear OF1.0 `OFPPC_NO_FLOOD` on a port; remembered and re-applied after
    /// every reconnect while set.
    fn set_no_flood(&self, ofport: u32, on: bool) -> Result<(), OfError>;
    /// [`Flows::set_no_flood`] for several ports; a backend that can asks the switch once.
    fn set_no_flood_many(&self, ofports: &[u32], on: bool) -> Result<(), OfError> {
        ofports.iter().try_for_each(|p| self.set_no_flood(*p, on))
    }
    /// Delete every flow whose cookie carries `round` (a previous run's flows).
    fn delete_round(&self, round: u16) -> Result<(), OfError>;
    /// [`Flows::apply_many`], and every flow of `round` deleted in the same step. A backend
    /// that can sends both as one atomic bundle, so the switch goes from the old flows (a
    /// previous run's, or Antrea's agent's, whose tables are laid out differently) to the
    /// new ones with no mix of the two in between. The second value is the delete's result.
    fn replace_round(
        &self,
        sets: Vec<(Owner, Vec<Flow>)>,
        round: u16,
    ) -> (Vec<(Owner, OfError)>, Result<(), OfError>) {
        let failed = self.apply_many(sets);
        (failed, self.delete_round(round))
    }
}

/// The one thing the ExternalNode controller needs from ovs-vswitchd beyond OVSDB and
/// OpenFlow.
pub trait Datapath: Send + Sync {
    /// Remove `name` from the datapath if it outlived its OVSDB port; Ok(true) if removed.
    fn delete_interface(&self, name: &str) -> Result<bool, crate::unixctl::UnixctlError>;
}

/// The three points of a takeover at which the host's network manager is told
/// (idempotent each).
pub trait HostNetwork: Send + Sync {
    /// Before `nic` (index `ifindex`) is renamed to `uplink`. Returns what it did, if
    /// anything, for the log.
    fn before_takeover(
        &self,
        nic: &str,
        ifindex: u32,
        uplink: &str,
    ) -> Result<Option<String>, HostNetError>;
    /// On every sync while `nic` is attached: what `before_takeover` set up is still there
    /// (cheap when it is).
    fn attached(&self, nic: &str, uplink: &str) -> Result<(), HostNetError>;
    /// `nic` is a plain NIC again (given back, or a takeover rolled back).
    fn released(&self, nic: &str) -> Result<(), HostNetError>;
}

/// No network manager integration (unit tests, and hosts without one).
pub struct NoHostNetwork;

impl HostNetwork for NoHostNetwork {
    fn before_takeover(&self, _: &str, _: u32, _: &str) -> Result<Option<String>, HostNetError> {
        Ok(None)
    }
    fn attached(&self, _: &str, _: &str) -> Result<(), HostNetError> {
        Ok(())
    }
    fn released(&self, _: &str) -> Result<(), HostNetError> {
        Ok(())
    }
}
