//! `tether check`'s preflight of the host itself, beyond the OVS sockets and the source:
//! whether the kernel and Open vSwitch can do what the configuration and the objects ask,
//! and whether the ExternalNode's NIC can be attached and kept configured.
//!
//! Owns the verdicts: pure functions from plain facts to [`Finding`]s, every non-Ok one
//! with a fix; here the kernel datapath, the bridge's datapath type and
//! `flow-restore-wait`; in `tunnel` the tunnel types in use, their UDP ports and their
//! headers against the NIC's MTU; in `nic` the NIC. Facts come from `host` (/proc, /sys,
//! /lib/modules, netplan's files through the [`host::Host`] trait) and `gather` (OVSDB,
//! ovs-vswitchd's control socket, netlink), which `check` calls. Does not own the verdicts
//! `tether run` itself reaches (`externalnode::verdict`, which `check` calls directly).
//!
//! `what` labels are stable words: "kernel datapath", "datapath", "flow-restore-wait"
//! here; "tunnels", "udp ports", "mtu" in `tunnel`; "uplink", "leftovers", "network",
//! "lifetimes" in `nic`.

pub mod gather;
pub mod host;
pub mod nic;
pub mod tunnel;

use std::fmt;

use super::finding::{Finding, Level, bad, ok};
pub use tunnel::{Tunnel, TunnelKind, mtu, tunnels_of};

/// Where a kernel module is, as `modprobe` would find it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Module {
    /// `/sys/module/<name>` exists: loaded, or built in with parameters.
    Loaded,
    /// Listed in `/lib/modules/<release>/modules.builtin`.
    BuiltIn,
    /// Listed in `modules.dep`: `modprobe` (or the kernel's own request when OVS creates
    /// a tunnel device) loads it.
    Loadable,
    Missing,
}

impl Module {
    pub fn present(self) -> bool {
        self != Module::Missing
    }
}

impl fmt::Display for Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Module::Loaded => "loaded",
            Module::BuiltIn => "built in",
            Module::Loadable => "loadable",
            Module::Missing => "missing",
        })
    }
}

/// What the host says about OVS's kernel datapath.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatapathFacts {
    /// `/proc/sys/kernel/osrelease`.
    pub release: String,
    pub module: Module,
    /// A link `ovs-system` (kind openvswitch) exists: the kernel datapath is in use.
    pub ovs_system_link: bool,
}

/// Item 1: the kernel datapath against `datapathType`. OVS's `datapath_types` is no evidence:
/// ovs-vswitchd lists `system` even when the module is absent (seen with OVS 3.1.0 on a
/// kernel without it: `[netdev, system]`, and in its log "Generic Netlink family
/// 'ovs_datapath' does not exist"; creating a system bridge then fails with "failed to
/// open datapath of type system: No such file or directory").
pub fn kernel_datapath(configured: &str, f: &DatapathFacts) -> Finding {
    const WHAT: &str = "kernel datapath";
    let has = f.ovs_system_link || f.module.present();
    let evidence = if f.ovs_system_link {
        "the ovs-system datapath exists".to_string()
    } else {
        format!("the openvswitch module is {}", f.module)
    };
    if configured == "system" {
        if has {
            return ok(WHAT, format!("{evidence} (Linux {})", f.release));
        }
        return bad(
            Level::Fail,
            WHAT,
            format!(
                "datapathType is system, but the openvswitch kernel module is not loaded \
                 (no /sys/module/openvswitch) and not in /lib/modules/{}: OVS cannot create \
                 the bridge's datapath",
                f.release
            ),
            "install the kernel's openvswitch module (modprobe openvswitch must work; some \
             distributions ship it in an extra modules package), then restart Open vSwitch; \
             or set datapathType: netdev (the userspace datapath)",
        );
    }
    if f.ovs_system_link || matches!(f.module, Module::Loaded | Module::BuiltIn) {
        return bad(
            Level::Warn,
            WHAT,
            format!(
                "datapathType is netdev although this host has the kernel datapath \
                 ({evidence}): netdev is OVS's userspace datapath, every packet goes \
                 through ovs-vswitchd (slower, more CPU)"
            ),
            "set datapathType: system, unless the userspace datapath is what you want",
        );
    }
    ok(
        WHAT,
        format!(
            "none needed: datapathType is {configured} (the openvswitch module is {})",
            f.module
        ),
    )
}

/// Item 2: the existing bridge's `datapath_type` against the config. OVS writes "" for its
/// default, `system`. `tether run` refuses to start (exit 2) rather than change it under
/// the ports on the bridge.
pub fn datapath(bridge: &str, existing: &str, configured: &str) -> Option<Finding> {
    // The comparison `tether run` makes (`Bridge::ensure`): "" is OVS's default, system.
    let existing = crate::ovsdb::normalized_datapath(existing);
    (existing != crate::ovsdb::normalized_datapath(configured)).then(|| {
        bad(
            Level::Fail,
            "datapath",
            format!(
                "bridge {bridge} has datapath_type={existing}, configured {configured}: tether \
                 run refuses to start rather than change it"
            ),
            format!(
                "set datapathType: {existing} in the config, or delete the bridge \
                 (ovs-vsctl del-br {bridge}) to let tether create it"
            ),
        )
    })
}

/// Item 10: `Open_vSwitch other_config:flow-restore-wait` (`value`): while it is true
/// ovs-vswitchd keeps the datapath's old flows and installs no new ones, so new traffic is
/// not forwarded. `tether run` clears it after its first full sync; left set with no
/// tether running, a start did not finish.
pub fn flow_restore_wait(value: Option<&str>, tether_running: bool) -> Option<Finding> {
    const WHAT: &str = "flow-restore-wait";
    if value != Some("true") {
        return None;
    }
    if tether_running {
        return Some(ok(
            WHAT,
            "set: the running tether clears it after its first full sync",
        ));
    }
    Some(bad(
        Level::Warn,
        WHAT,
        "Open_vSwitch other_config:flow-restore-wait=true and no tether is running (a start \
         that did not finish?): ovs-vswitchd forwards no new traffic until it is cleared",
        "start tether (it clears it after its first full sync), or clear it by hand: \
         ovs-vsctl remove Open_vSwitch . other_config flow-restore-wait",
    ))
}

#[cfg(test)]
mod tests;
