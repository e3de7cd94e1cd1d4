//! The ExternalNode controller (Antrea `pkg/agent/externalnode/external_node_controller.go`,
//! with the fixes of docs/design.md#crash-safe-takeover-and-restore): it attaches the VM's NIC to the OVS bridge and gives it back.
//!
//! Owns: finding the NIC that holds `spec.interfaces[0].ips` and judging whether it may be
//! taken over at all (`verdict`: loopback, the bridge, other OVS ports, bond slaves and
//! tunnels are refused before any link is touched), the takeover (capture →
//! rename to the uplink name → uplink + host ports → move sysctls, addresses and routes,
//! keep the kernel stack off the uplink (`uplink`) → check the host port's identity
//! (`identity`) → uplink flows), re-labelling, moving to another NIC, the exact restore, policy-bypass flows, and
//! the step record that makes all of it crash-safe (`record`). Does not own: the sockets
//! (it programs through [`Bridge`], [`Flows`], [`Links`] and [`Datapath`]), the watch
//! (the stores), or when to sync (the daemon's work queue: one key, level-triggered).
//!
//! ```text
//!              sync(): store synced?──no──► Waiting
//!                         │ EN absent ──► restore every attached NIC ──► Waiting
//!                         ▼ EN present: NIC = link holding interfaces[0].ips
//!        NIC attached? ──yes──► rewrite host external_ids if changed, flows ──► Attached
//!                         │ no
//!                         ▼
//!                      takeover(NIC), then restore any other attached NIC ──► Attached
//! ```
//!
//!
//! Driving it (the daemon): build an [`EnConfig`] (`node_name`, `namespace`, the rules from
//! [`parse_bypass_rules`], `ovs_rundir`, `datapath_type`, `state_dir`) and the backends
//! (the [`Datapath`] among them: `tether plan` passes a dry one); run `sync()` on one
//! work-queue key whenever the ExternalNode store, a host or uplink port, or the bridge
//! changes, and after every OpenFlow reconnect (queued at start too). Each sync first
//! finishes or rolls back a step a crash or failure left recorded and gives back NICs
//! whose host port OVS lost, then decides from one snapshot (`plan`) and carries that
//! out; before the store's first list it only re-installs what OVSDB says is attached.
//! Failures back off and retry like any key. `tether reset` calls `restore_all()`;
//! `tether plan` and `tether check` render `preview()`. The pipeline's base flows must be
//! installed: the uplink pair continues to `TrafficControl` and leaves through `Output`.
//!
//! [`Bridge`]: crate::controller::Bridge
//! [`Flows`]: crate::controller::Flows
//! [`Datapath`]: crate::controller::Datapath
//! [`Links`]: crate::netlink::Links

mod controller;
pub mod heldfile;
pub mod identity;
pub mod plan;
pub mod record;
mod types;
pub mod uplink;
pub mod verdict;

pub use crate::pipeline::externalnode::{
    BypassDirection, BypassProtocol, Cidr, PolicyBypassRule, parse_bypass_rules,
};
pub use controller::{EnController, EnPreview, nic_owner};
pub use record::{Hint, Phase, RECORD_KEY, Record, Step};
pub use types::{CRASH_ENV, EnConfig, EnError, EnStatus, external_entity_name, host_external_ids};

#[cfg(test)]
mod tests;
