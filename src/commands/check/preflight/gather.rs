//! The preflight's reads: OVSDB (the `Open_vSwitch` row, Interface errors), ovs-vswitchd's
//! control socket (its version), netlink (links) and the host's files ([`Host`]), each
//! turned into the facts one verdict takes, and the verdict's findings. `check` calls
//! these in its sections; everything here only reads.

use std::collections::BTreeMap;
use std::path::Path;

use super::host::{self, Host, Modules};
use super::nic::{self, PortFacts};
use super::tunnel::{self, Tunnel};
use super::{DatapathFacts, Module};
use crate::commands::check::finding::Finding;
use crate::config::Config;
use crate::hostnet::Manager;
use crate::netlink::{Link, Links, uplink_name};
use crate::ovsdb::{Client, Condition, Datum, Op, bridgedb::FLOW_RESTORE_WAIT};

/// What the `Open_vSwitch` row and ovs-vswitchd say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OvsRow {
    pub ovs_version: Option<String>,
    /// `other_config:flow-restore-wait`.
    pub flow_restore_wait: Option<String>,
}

pub fn open_vswitch(client: &Client, rundir: &Path) -> Option<OvsRow> {
    let r = client
        .transact(&[Op::Select {
            table: "Open_vSwitch".into(),
            conditions: Vec::new(),
            columns: Some(vec!["ovs_version".into(), "other_config".into()]),
        }])
        .ok()?;
    let row = r.into_iter().next()?.rows.into_iter().next()?;
    let column = row.get("ovs_version").and_then(Datum::as_str);
    let appctl = if column.is_some_and(|v| !v.trim().is_empty()) {
        None
    } else {
        crate::unixctl::Unixctl::for_daemon(rundir, "ovs-vswitchd")
            .and_then(|u| u.call("version", &[]))
            .ok()
    };
    Some(OvsRow {
        ovs_version: host::ovs_version(column, appctl.as_deref()),
        flow_restore_wait: row
            .get("other_config")
            .and_then(|d| d.to_str_map().get(FLOW_RESTORE_WAIT).cloned()),
    })
}

/// Items 1 and 10: the kernel datapath, and `flow-restore-wait` left set.
pub fn ovs_host(
    cfg: &Config,
    host: &dyn Host,
    client: Option<&Client>,
    links: Option<&dyn Links>,
) -> Vec<Finding> {
    let release = host::release(host);
    let modules = Modules::read(host, &release);
    let ovs_system_link = links
        .and_then(|l| l.link_by_name("ovs-system").ok())
        .is_some_and(|l| l.kind.as_deref() == Some("openvswitch"));
    let facts = DatapathFacts {
        module: modules.state(host, "openvswitch"),
        release,
        ovs_system_link,
    };
    let mut out = vec![super::kernel_datapath(&cfg.datapath_type, &facts)];
    if let Some(row) = client.and_then(|c| open_vswitch(c, &cfg.ovs_rundir)) {
        let running = std::os::unix::net::UnixStream::connect(&cfg.state_socket).is_ok();
        out.extend(super::flow_restore_wait(
            row.flow_restore_wait.as_deref(),
            running,
        ));
    }
    out
}

/// Items 5 and 6, for the kernel datapath: what the tunnels need, and their UDP ports.
pub fn tunnels(
    cfg: &Config,
    host: &dyn Host,
    client: Option<&Client>,
    links: Option<&dyn Links>,
    tunnels: &[Tunnel],
) -> Vec<Finding> {
    if cfg.datapath_type != "system" || tunnels.is_empty() {
        return Vec::new();
    }
    let release = host::release(host);
    let known = Modules::read(host, &release);
    let modules: BTreeMap<String, Module> = tunnels
        .iter()
        .map(|t| tunnel::need(t.kind, t.ipv6).module)
        .map(|m| (m.to_string(), known.state(host, m)))
        .collect();
    let version = client
        .and_then(|c| open_vswitch(c, &cfg.ovs_rundir))
        .and_then(|r| r.ovs_version);
    let mut out = tunnel::tunnels(tunnels, &release, version.as_deref(), &modules);
    let names: Vec<String> = links
        .and_then(|l| l.links().ok())
        .unwrap_or_default()
        .into_iter()
        .map(|l| l.name)
        .collect();
    out.extend(tunnel::udp_ports(tunnels, &host::udp_ports(host), &names));
    out
}

/// Item 3's facts the shared verdict lacks: Wi-Fi, and devices on top of the NIC.
pub fn uplink(cfg: &Config, host: &dyn Host, links: &dyn Links, link: &Link) -> Vec<Finding> {
    let all = links.links().unwrap_or_default();
    nic::uplink(
        &link.name,
        &cfg.datapath_type,
        host::wireless(host, link),
        &host::uppers(host, &all, link),
    )
}

/// Item 4's facts: `host_port` as OVSDB's Port table says, the uplink link from netlink,
/// the errors of the Interface rows named like the NIC or its uplink.
pub fn port_facts(
    client: Option<&Client>,
    links: &dyn Links,
    nic: &str,
    host_port: bool,
) -> PortFacts {
    let uplink = uplink_name(nic);
    // Exactly that name: the kernel also finds a link by an altname.
    let uplink_link = links.link_by_name(&uplink).is_ok_and(|l| l.name == uplink);
    let mut errors = Vec::new();
    if let Some(c) = client {
        let select = |name: &str| Op::Select {
            table: "Interface".into(),
            conditions: vec![Condition::name(name)],
            columns: Some(vec!["name".into(), "error".into()]),
        };
        if let Ok(r) = c.transact(&[select(nic), select(&uplink)]) {
            for row in r.iter().flat_map(|r| &r.rows) {
                let name = row.get("name").and_then(Datum::as_str).unwrap_or_default();
                if let Some(e) = row.get("error").and_then(Datum::as_str) {
                    if !e.is_empty() {
                        errors.push((name.to_string(), e.to_string()));
                    }
                }
            }
        }
    }
    PortFacts {
        host_port,
        uplink_link,
        errors,
    }
}

/// Items 8 and 9 for `link` (the NIC, or the host port once attached): who configures it,
/// and whether its expiring addresses are renewed. Only in PID 1's network namespace,
/// where the managers' state files describe these links.
pub fn network(host: &dyn Host, links: &dyn Links, link: &Link, manager: &Manager) -> Vec<Finding> {
    let clients = host::dhcp_clients(host, &link.name);
    let netplan = host::netplan(host, link);
    let mut out = vec![nic::network(&link.name, manager, &clients, &netplan)];
    let addrs = links.addrs(Some(link.index)).unwrap_or_default();
    out.extend(nic::lifetimes(&link.name, &addrs, manager, &clients));
    out
}
