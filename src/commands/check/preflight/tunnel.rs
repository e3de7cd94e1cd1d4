//! The tunnels the TrafficControls ask for, judged for `tether check`: what OVS's kernel
//! datapath needs for each type (module, Linux, OVS), their UDP ports against what is
//! bound already, and their headers against the NIC's MTU. Pure: the tunnels and plain
//! host facts in, findings out.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::Module;
use crate::commands::check::finding::{Finding, Level, bad, ok};
use crate::controller::trafficcontrol::ports::{GENEVE_DEFAULT_PORT, VXLAN_DEFAULT_PORT};
use crate::k8s::{ErspanVersion, TcPort, TrafficControl};

/// The tunnel types of TrafficControl ports, as OVS builds them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TunnelKind {
    Vxlan,
    Geneve,
    Gre,
    ErspanV1,
    ErspanV2,
}

impl fmt::Display for TunnelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TunnelKind::Vxlan => "vxlan",
            TunnelKind::Geneve => "geneve",
            TunnelKind::Gre => "gre",
            TunnelKind::ErspanV1 => "erspan v1",
            TunnelKind::ErspanV2 => "erspan v2",
        })
    }
}

/// One tunnel port a TrafficControl asks for (target or return port).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tunnel {
    /// The TrafficControl's name.
    pub tc: String,
    pub kind: TunnelKind,
    /// The outer header's family (the remote IP's; an IPv4-mapped one counts as IPv4).
    pub ipv6: bool,
    /// VXLAN/Geneve: the UDP port, the default applied.
    pub udp_port: Option<u16>,
    /// GRE: a key is configured, so the header carries one.
    pub gre_key: bool,
}

impl Tunnel {
    pub fn from_port(tc: &str, p: &TcPort) -> Option<Tunnel> {
        let v6 = |ip: &std::net::IpAddr| ip.to_canonical().is_ipv6();
        let (kind, ipv6, udp_port, gre_key) = match p {
            TcPort::Vxlan(t) => (
                TunnelKind::Vxlan,
                v6(&t.remote_ip),
                Some(t.destination_port.unwrap_or(VXLAN_DEFAULT_PORT)),
                false,
            ),
            TcPort::Geneve(t) => (
                TunnelKind::Geneve,
                v6(&t.remote_ip),
                Some(t.destination_port.unwrap_or(GENEVE_DEFAULT_PORT)),
                false,
            ),
            TcPort::Gre(g) => (TunnelKind::Gre, v6(&g.remote_ip), None, g.key.is_some()),
            TcPort::Erspan(e) => (
                match e.version {
                    ErspanVersion::V1 => TunnelKind::ErspanV1,
                    ErspanVersion::V2 => TunnelKind::ErspanV2,
                },
                v6(&e.remote_ip),
                None,
                false,
            ),
            TcPort::OvsInternal { .. } | TcPort::Device { .. } => return None,
        };
        Some(Tunnel {
            tc: tc.to_string(),
            kind,
            ipv6,
            udp_port,
            gre_key,
        })
    }

    /// Bytes the tunnel adds to a packet of the inner link's MTU: the outer IP header
    /// (20, or 40 for IPv6), the tunnel headers, and the inner Ethernet header (14; OVS
    /// tunnels carry whole frames, GRE as Transparent Ethernet Bridging). Tunnel headers:
    /// VXLAN UDP 8 + 8 (RFC 7348 §5), Geneve UDP 8 + 8 with no options (RFC 8926 §3.4;
    /// tether sets none), GRE 4 + 4 with a key (RFC 2890 §2), ERSPAN GRE 8 (with the
    /// sequence number) + the type II header 8 (v1) or type III 12 (v2, no optional
    /// subheader) (draft-foschiano-erspan §4). A VLAN tag on the inner frame adds 4 more.
    pub fn overhead(&self) -> u32 {
        let ip = if self.ipv6 { 40 } else { 20 };
        let headers = match self.kind {
            TunnelKind::Vxlan | TunnelKind::Geneve | TunnelKind::ErspanV1 => 16,
            TunnelKind::Gre if self.gre_key => 8,
            TunnelKind::Gre => 4,
            TunnelKind::ErspanV2 => 20,
        };
        ip + headers + 14
    }

    fn family(&self) -> &'static str {
        if self.ipv6 { "IPv6" } else { "IPv4" }
    }
}

/// The tunnels the valid TrafficControls use, target and return ports, sorted by kind.
pub fn tunnels_of(tcs: &[TrafficControl]) -> Vec<Tunnel> {
    let mut out: Vec<Tunnel> = tcs
        .iter()
        .filter_map(|tc| Some((&tc.metadata.name, tc.spec.as_ref().ok()?)))
        .flat_map(|(name, s)| {
            std::iter::once(&s.target_port)
                .chain(s.return_port.as_ref())
                .filter_map(|p| Tunnel::from_port(name, p))
        })
        .collect();
    out.sort_by(|a, b| (a.kind, &a.tc).cmp(&(b.kind, &b.tc)));
    out
}

/// What OVS's kernel datapath needs for one tunnel type: the kernel module that provides
/// the device OVS creates (`dpif-netlink-rtnl.c`: vxlan, geneve, gretap/erspan in ip_gre,
/// ip6gretap/ip6erspan in ip6_gre), the first upstream Linux whose OVS module supports it,
/// and the first OVS release (OVS Documentation/faq/releases.rst, "Are all features
/// available with all datapaths?": "Linux upstream" and "Userspace" columns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Need {
    pub what: &'static str,
    pub module: &'static str,
    pub linux: (u32, u32),
    pub ovs: (u32, u32),
}

pub fn need(kind: TunnelKind, ipv6: bool) -> Need {
    let n = |what, module, linux, ovs| Need {
        what,
        module,
        linux,
        ovs,
    };
    match (kind, ipv6) {
        (TunnelKind::Vxlan, false) => n("VXLAN", "vxlan", (3, 12), (2, 4)),
        (TunnelKind::Vxlan, true) => n("VXLAN over IPv6", "vxlan", (4, 3), (2, 6)),
        (TunnelKind::Geneve, false) => n("Geneve", "geneve", (3, 18), (2, 4)),
        (TunnelKind::Geneve, true) => n("Geneve over IPv6", "geneve", (4, 4), (2, 6)),
        (TunnelKind::Gre, false) => n("GRE", "ip_gre", (3, 11), (2, 4)),
        (TunnelKind::Gre, true) => n("GRE over IPv6", "ip6_gre", (4, 18), (2, 6)),
        (TunnelKind::ErspanV1 | TunnelKind::ErspanV2, false) => {
            n("ERSPAN", "ip_gre", (4, 18), (2, 10))
        }
        (TunnelKind::ErspanV1 | TunnelKind::ErspanV2, true) => {
            n("ERSPAN over IPv6", "ip6_gre", (4, 18), (2, 10))
        }
    }
}

/// `major.minor` at the start of a version string: "6.18.44-fc-v669" → (6, 18),
/// "2.17.9" → (2, 17).
pub fn major_minor(v: &str) -> Option<(u32, u32)> {
    let mut it = v.split(|c: char| !c.is_ascii_digit());
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

fn tcs_of(tunnels: &[&Tunnel]) -> String {
    let names: BTreeSet<&str> = tunnels.iter().map(|t| t.tc.as_str()).collect();
    format!("tc {}", names.into_iter().collect::<Vec<_>>().join(", "))
}

/// Item 5: kernel, modules and OVS against the tunnel types in use (kernel datapath only: the
/// userspace datapath builds tunnel headers itself). A missing module fails (OVS cannot
/// create the tunnel's device); a kernel older than the first upstream one with the
/// feature only warns (distribution kernels backport); an older OVS fails.
pub fn tunnels(
    tunnels: &[Tunnel],
    release: &str,
    ovs_version: Option<&str>,
    modules: &BTreeMap<String, Module>,
) -> Vec<Finding> {
    // Long on purpose: One check per tunnel type (module, kernel version, OVS version), in
    // the order they are reported.
    const WHAT: &str = "tunnels";
    if tunnels.is_empty() {
        return Vec::new();
    }
    let mut by_need: Vec<(Need, Vec<&Tunnel>)> = Vec::new();
    for t in tunnels {
        let n = need(t.kind, t.ipv6);
        match by_need.iter_mut().find(|(m, _)| *m == n) {
            Some((_, ts)) => ts.push(t),
            None => by_need.push((n, vec![t])),
        }
    }
    let kernel = major_minor(release);
    let ovs = ovs_version.and_then(major_minor);
    let mut out = Vec::new();
    for (n, ts) in &by_need {
        let used = format!("{} ({})", n.what, tcs_of(ts));
        let module = modules.get(n.module).copied().unwrap_or(Module::Missing);
        if !module.present() {
            out.push(bad(
                Level::Fail,
                WHAT,
                format!(
                    "{used} needs the {} kernel module: not loaded, not built in, not in \
                     /lib/modules/{release}/modules.dep",
                    n.module
                ),
                format!(
                    "install the modules of kernel {release} (modprobe {} must work), or use \
                     another tunnel type",
                    n.module
                ),
            ));
        }
        if kernel.is_some_and(|k| k < n.linux) {
            out.push(bad(
                Level::Warn,
                WHAT,
                format!(
                    "{used} needs Linux {}.{} or later in OVS's kernel datapath; this is {release}",
                    n.linux.0, n.linux.1
                ),
                "upgrade the kernel, unless your distribution backported it (ovs-vswitchd's \
                 log says when creating the port fails)",
            ));
        }
        if let (Some(have), Some(v)) = (ovs, ovs_version) {
            if have < n.ovs {
                out.push(bad(
                    Level::Fail,
                    WHAT,
                    format!(
                        "{used} needs Open vSwitch {}.{} or later; this is {v}",
                        n.ovs.0, n.ovs.1
                    ),
                    "upgrade Open vSwitch, or use another tunnel type",
                ));
            }
        }
    }
    if out.is_empty() {
        let mods: BTreeMap<&str, Module> = by_need
            .iter()
            .map(|(n, _)| {
                (
                    n.module,
                    modules.get(n.module).copied().unwrap_or(Module::Missing),
                )
            })
            .collect();
        let mods: Vec<String> = mods.iter().map(|(m, s)| format!("{m} {s}")).collect();
        let used: Vec<String> = by_need
            .iter()
            .map(|(n, ts)| format!("{} ({})", n.what, tcs_of(ts)))
            .collect();
        out.push(ok(
            WHAT,
            format!(
                "{}: Linux {release}, Open vSwitch {}, module {}",
                used.join(", "),
                ovs_version.unwrap_or("version unknown"),
                mods.join(", ")
            ),
        ));
    }
    out
}

/// The device OVS's kernel datapath creates for a UDP tunnel port, bound to that port
/// (`dpif-netlink-rtnl.c`: `vxlan_sys_%d`, `genev_sys_%d`).
pub fn ovs_udp_device(kind: TunnelKind, port: u16) -> Option<String> {
    match kind {
        TunnelKind::Vxlan => Some(format!("vxlan_sys_{port}")),
        TunnelKind::Geneve => Some(format!("genev_sys_{port}")),
        _ => None,
    }
}

/// Item 6: the UDP ports of the VXLAN/Geneve tunnels against the host's bound ones (`bound`,
/// from /proc/net/udp and udp6) and its links (`links`, names). Kernel datapath only:
/// there OVS's tunnel device must bind the port itself (a socket already on it makes
/// creating `vxlan_sys_4789` fail, EADDRINUSE), and a port bound by that very device is
/// OVS's own; the userspace datapath opens no socket for its tunnels.
pub fn udp_ports(tunnels: &[Tunnel], bound: &BTreeSet<u16>, links: &[String]) -> Option<Finding> {
    const WHAT: &str = "udp ports";
    let mut ports: BTreeMap<(u16, TunnelKind), Vec<&Tunnel>> = BTreeMap::new();
    for t in tunnels {
        if let Some(p) = t.udp_port {
            ports.entry((p, t.kind)).or_default().push(t);
        }
    }
    if ports.is_empty() {
        return None;
    }
    let mut taken = Vec::new();
    let mut fine = Vec::new();
    for ((port, kind), ts) in &ports {
        let dev = ovs_udp_device(*kind, *port).unwrap_or_default();
        let ours = links.contains(&dev);
        match (bound.contains(port), ours) {
            (true, false) => taken.push(format!("{port} ({kind}, {})", tcs_of(ts))),
            (true, true) => fine.push(format!("{port} bound by OVS's own {dev}")),
            (false, _) => fine.push(format!("{port} free")),
        }
    }
    if taken.is_empty() {
        return Some(ok(WHAT, format!("UDP {}", fine.join(", "))));
    }
    Some(bad(
        Level::Warn,
        WHAT,
        format!(
            "UDP {} already bound on this host, and not by OVS's own tunnel device \
             (vxlan_sys_<port>, genev_sys_<port>): the kernel datapath cannot create the \
             tunnel's device on it",
            taken.join(", ")
        ),
        "find the owner (ss -ulpn, ip -d link show type vxlan) and stop it or move it, or \
         give the TrafficControl another destinationPort",
    ))
}

/// Item 7: tunnel headers against the NIC's MTU: a mirrored or redirected packet of the NIC's
/// own MTU, plus [`Tunnel::overhead`], must fit in one packet through the NIC (the tunnel's
/// way out; assumed, as for the host's default route). It never does for a packet of full
/// size, so any tunnel warns, naming the largest packet that fits.
pub fn mtu(nic: &str, nic_mtu: u32, tunnels: &[Tunnel]) -> Option<Finding> {
    let worst = tunnels.iter().max_by_key(|t| t.overhead())?;
    let mut seen: Vec<String> = Vec::new();
    for t in tunnels {
        let s = format!("{} over {} {}", t.kind, t.family(), t.overhead());
        if !seen.contains(&s) {
            seen.push(s);
        }
    }
    let fits = nic_mtu.saturating_sub(worst.overhead());
    Some(bad(
        Level::Warn,
        "mtu",
        format!(
            "{nic} has mtu {nic_mtu}; tunnel headers add {} bytes: mirrored or redirected \
             packets over {fits} bytes do not fit in one tunnel packet through {nic}",
            seen.join(", ")
        ),
        format!(
            "raise {nic}'s mtu to {} if the path to the tunnel's far end carries it, or accept \
             that larger packets are fragmented or dropped",
            nic_mtu + worst.overhead()
        ),
    ))
}

#[cfg(test)]
mod tests;
