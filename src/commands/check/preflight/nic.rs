//! The ExternalNode NIC's verdicts for `tether check`, beyond `externalnode::verdict`
//! (which `tether run` shares): what keeps OVS from attaching it ("uplink"), whether the
//! uplink of an attached NIC is a side door around OVS ("uplink", the verdict `tether run`
//! reports in status: `externalnode::uplink::side_door`), what an earlier takeover left
//! behind ("leftovers"), who configures it ("network") and whether addresses that expire
//! keep being renewed after the takeover ("lifetimes"). Pure: plain facts in, findings
//! out.

use crate::commands::check::finding::{Finding, Level, bad, ok};
use crate::controller::externalnode::uplink::UplinkFacts;
use crate::hostnet::Manager;
use crate::netlink::{Addr, is_link_local, uplink_name};

/// Link kinds that take their lower device's receive handler (`macvlan_port_create`,
/// `ipvlan_port_create` call `netdev_rx_handler_register`). A device has one, so OVS's
/// kernel datapath, which needs it too, cannot attach a NIC carrying one (EBUSY).
pub const UPPER_KINDS: &[&str] = &["macvlan", "macvtap", "ipvlan", "ipvtap"];

/// The README's advice where NetworkManager would keep the lease on the uplink.
/// A DHCP client process naming the NIC on its command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DhcpClient {
    pub pid: u32,
    /// `dhclient` or `dhcpcd`.
    pub program: String,
}

/// A netplan `network.ethernets.<id>` entry that applies to the NIC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetplanMatch {
    pub file: String,
    pub id: String,
    /// "macaddress", "driver" or "name" (the `match:` key that decides, or the id itself).
    pub by: &'static str,
    pub set_name: Option<String>,
}

/// Item 3: what keeps OVS from attaching `nic` that `verdict::refusal` does not cover: devices
/// on top of it holding its receive handler (`uppers`, name and kind), and Wi-Fi.
pub fn uplink(
    nic: &str,
    datapath_type: &str,
    wireless: bool,
    uppers: &[(String, String)],
) -> Vec<Finding> {
    const WHAT: &str = "uplink";
    let mut out = Vec::new();
    if !uppers.is_empty() {
        let list: Vec<String> = uppers.iter().map(|(n, k)| format!("{n} ({k})")).collect();
        let list = list.join(", ");
        let first = &uppers[0].0;
        out.push(if datapath_type == "system" {
            bad(
                Level::Fail,
                WHAT,
                format!(
                    "{nic} carries {list}, holding its receive handler: the kernel gives a device \
                     one, so OVS cannot attach {nic} (EBUSY)"
                ),
                format!(
                    "delete {first} (ip link del {first}) or put it on another link, or take over \
                     another NIC"
                ),
            )
        } else {
            bad(
                Level::Warn,
                WHAT,
                format!(
                    "{nic} carries {list}: the userspace datapath reads {nic} through a packet \
                     socket, so OVS can attach it, but {first}'s traffic bypasses the bridge \
                     (no TrafficControl or policy sees it)"
                ),
                format!("move {first} onto the host port {nic} after the takeover, or delete it"),
            )
        });
    }
    if wireless {
        out.push(bad(
            Level::Warn,
            WHAT,
            format!(
                "{nic} is a Wi-Fi link: a station carries frames of its own MAC only (802.11 \
                 three-address mode; Linux bridges refuse such links for that reason), and \
                 tether is tried on Ethernet NICs only"
            ),
            "use a wired NIC if there is one; otherwise check after the takeover that the host \
             stays reachable",
        ));
    }
    out
}

/// An attached NIC's uplink on the userspace datapath: whether its kernel stack still
/// takes traffic for the VM past OVS. None on the kernel datapath (its vport takes every
/// frame) or when the uplink could not be read (`facts`).
pub fn side_door(
    uplink: &str,
    datapath_type: &str,
    facts: Option<&UplinkFacts>,
) -> Option<Finding> {
    const WHAT: &str = "uplink";
    if !crate::controller::externalnode::uplink::tapped(datapath_type) {
        return None;
    }
    let Some(f) = facts else {
        return Some(bad(
            Level::Warn,
            WHAT,
            format!(
                "cannot read {uplink}'s sysctls and addresses: whether its kernel stack takes traffic past OVS is unknown"
            ),
            "run tether check as root",
        ));
    };
    Some(
        match crate::controller::externalnode::uplink::side_door(uplink, datapath_type, f) {
            Some(why) => bad(
                Level::Warn,
                WHAT,
                why,
                crate::controller::externalnode::uplink::side_door_fix(uplink),
            ),
            None => {
                let (dev, all) = f.rp_filter();
                ok(
                    WHAT,
                    format!(
                        "{uplink}'s kernel stack takes nothing for the VM past OVS (userspace datapath): \
                     no IPv4 address, net.ipv4.conf.{uplink}.rp_filter={dev} with \
                     net.ipv4.conf.all.rp_filter={all}, IPv6 off"
                    ),
                )
            }
        },
    )
}

/// What OVSDB and the kernel show of an earlier takeover of the NIC.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortFacts {
    /// OVSDB has a port named like the NIC with `antrea-type=host`.
    pub host_port: bool,
    /// A link named like the NIC's uplink (`uplink_name`) exists.
    pub uplink_link: bool,
    /// Interface rows named like the NIC or the uplink with a non-empty `error`.
    pub errors: Vec<(String, String)>,
}

/// Item 4: leftovers of an earlier takeover, judged as `tether run` judges them: the ports with
/// no uplink link (a reboot gave the NIC its name back) are replaced; an uplink link with
/// no host port is someone else's half-done takeover, which it refuses to stack a second
/// one on (the controller's "Inconsistent" error).
pub fn leftovers(nic: &str, bridge: &str, f: &PortFacts) -> Option<Finding> {
    const WHAT: &str = "leftovers";
    let uplink = uplink_name(nic);
    let errors: Vec<String> = f
        .errors
        .iter()
        .map(|(n, e)| format!("Interface {n}: {e}"))
        .collect();
    let errors_note = if errors.is_empty() {
        String::new()
    } else {
        format!("; OVS reports {}", errors.join("; "))
    };
    match (f.host_port, f.uplink_link) {
        (true, false) => Some(bad(
            Level::Warn,
            WHAT,
            format!(
                "OVSDB has tether's ports {nic} and {uplink} but there is no link {uplink} (a \
                 reboot gave the NIC its name back): tether run deletes them and takes {nic} \
                 over again{errors_note}"
            ),
            format!(
                "nothing to do; to clean up by hand first: ovs-vsctl --if-exists del-port \
                 {bridge} {nic} -- --if-exists del-port {bridge} {uplink}"
            ),
        )),
        (false, true) => Some(bad(
            Level::Fail,
            WHAT,
            format!(
                "link {uplink} exists but OVSDB has no host port {nic}: tether run refuses to \
                 take {nic} over next to it{errors_note}"
            ),
            format!(
                "see what {uplink} is (ip -d link show {uplink}): if it is a NIC an earlier \
                 takeover renamed, give it its name back once {nic} is gone; otherwise remove \
                 or rename it"
            ),
        )),
        _ if !errors.is_empty() => {
            let first = &f.errors[0].0;
            Some(bad(
                Level::Warn,
                WHAT,
                format!("OVS reports {}", errors.join("; ")),
                format!(
                    "see ovs-vsctl list Interface {first} and ovs-vswitchd's log; if the port is \
                     a leftover: ovs-vsctl del-port {bridge} {first}"
                ),
            ))
        }
        _ => None,
    }
}

/// Item 8: who configures the NIC: its network manager (`hostnet::detect`), DHCP clients
/// running for it outside one, netplan entries matching it. Warns for clients tether was
/// not tried with
/// (dhcpcd), and for netplan's `set-name` on a MAC or driver match (`netplan apply`
/// renames the links it matches, and after the takeover the uplink still matches).
pub fn network(
    nic: &str,
    manager: &Manager,
    clients: &[DhcpClient],
    netplan: &[NetplanMatch],
) -> Finding {
    const WHAT: &str = "network";
    let uplink = uplink_name(nic);
    let mut parts = vec![format!(
        "{nic} is configured by {manager}; {}",
        manager.plan(nic)
    )];
    let mut fixes: Vec<String> = Vec::new();
    for c in clients {
        match c.program.as_str() {
            // ifup's own dhclient: the manager's plan said it.
            "dhclient" if *manager == Manager::Ifupdown => {}
            "dhclient" => parts.push(format!(
                "dhclient (pid {}) runs for {nic}: it keeps renewing through {uplink} (its \
                 socket stays on the NIC) and puts the address on {nic}, the host port, by name",
                c.pid
            )),
            other => {
                parts.push(format!(
                    "{other} (pid {}) runs for {nic}: tether was not tried with it",
                    c.pid
                ));
                fixes.push(format!(
                    "check after the takeover that {other} renews the lease on {nic}, the host \
                     port, or let systemd-networkd or ifupdown manage the NIC"
                ));
            }
        }
    }
    for m in netplan {
        parts.push(format!(
            "netplan {} ethernets.{} matches it by {}",
            m.file, m.id, m.by
        ));
        if let (Some(name), "macaddress" | "driver") = (&m.set_name, m.by) {
            parts.push(format!(
                "with set-name {name}: netplan apply renames the links it matches, and after \
                 the takeover {uplink} still matches"
            ));
            fixes.push(format!(
                "do not run netplan apply while tether holds {nic}, or match it by name in {}",
                m.file
            ));
        }
    }
    let detail = parts.join("; ");
    if fixes.is_empty() {
        ok(WHAT, detail)
    } else {
        bad(Level::Warn, WHAT, detail, fixes.join("; "))
    }
}

/// `IFAPROT_KERNEL_RA` (linux/if_addr.h, `IFA_PROTO` since Linux 6.3): an address the
/// kernel made from a router advertisement (SLAAC), which it renews itself.
pub const IFAPROT_KERNEL_RA: u8 = 2;

/// Item 9: addresses with finite lifetimes (DHCP, SLAAC) on the NIC: after the takeover they
/// live on the host port, and something must keep renewing them there.
pub fn lifetimes(
    nic: &str,
    addrs: &[Addr],
    manager: &Manager,
    clients: &[DhcpClient],
) -> Option<Finding> {
    // Long on purpose: The finite-lifetime cases (DHCPv4, SLAAC, DHCPv6, static) with what
    // keeps each alive, in the order they are reported.
    const WHAT: &str = "lifetimes";
    let finite: Vec<&Addr> = addrs
        .iter()
        .filter(|a| !a.lifetime.is_forever() && !is_link_local(a.local))
        .collect();
    if finite.is_empty() {
        return None;
    }
    let uplink = uplink_name(nic);
    let list: Vec<String> = finite
        .iter()
        .map(|a| format!("{a} (valid {} s)", a.lifetime.valid))
        .collect();
    let head = format!("{nic} has addresses that expire: {}", list.join(", "));
    if finite
        .iter()
        .all(|a| a.is_ipv6() && a.proto == IFAPROT_KERNEL_RA)
    {
        return Some(ok(
            WHAT,
            format!("{head}; the kernel renews them from router advertisements"),
        ));
    }
    let dhclient = clients.iter().find(|c| c.program == "dhclient");
    let other = clients.iter().find(|c| c.program != "dhclient");
    let renewer = match (manager, dhclient) {
        (Manager::Networkd { .. }, _) => Some(
            "systemd-networkd renews them on the host port (tether's .network file for it)"
                .to_string(),
        ),
        (Manager::Ifupdown, _) => Some(format!(
            "ifupdown's dhclient renews them through {uplink} and puts them on the host port {nic}"
        )),
        (Manager::NetworkManager, _) => Some(format!(
            "NetworkManager renews them on the host port {nic} (tether's profile for it, with \
             {nic}'s DHCP identity)"
        )),
        (Manager::None, Some(c)) => Some(format!(
            "dhclient (pid {}) renews them through {uplink} and puts them on the host port {nic}",
            c.pid
        )),
        _ => None,
    };
    if let Some(r) = renewer {
        return Some(ok(WHAT, format!("{head}; {r}")));
    }
    if let Some(c) = other {
        return Some(bad(
            Level::Warn,
            WHAT,
            format!(
                "{head}; {} (pid {}) may renew them, but tether was not tried with it",
                c.program, c.pid
            ),
            format!(
                "check after the takeover that {} renews them on {nic}, the host port",
                c.program
            ),
        ));
    }
    Some(bad(
        Level::Warn,
        WHAT,
        format!(
            "{head}; no DHCP client tether knows of renews them (no systemd-networkd, ifupdown \
             or dhclient for {nic}): after the takeover the host port's copies expire"
        ),
        "let systemd-networkd or ifupdown manage the NIC (tether keeps the lease renewing on \
         the host port), or give it static addresses",
    ))
}

#[cfg(test)]
mod tests;
