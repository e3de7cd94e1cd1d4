//! Which link an ExternalNode may take over, decided before any link is touched: finding
//! the link that holds `spec.interfaces[0].ips`, and the verdict on that link. Shared by
//! the controller and `tether check`, so both say the same. Pure but for the reads
//! through [`Links`].
//!
//! Accepted: a real, plain NIC — a link with an Ethernet MAC of kind none (hardware and
//! virtual NICs: virtio, ENA, Hyper-V, VMXNET3, SR-IOV VFs), `veth`, `vlan`, `bond`, `team`,
//! `macvlan` or `dummy`, not enslaved to another link. Refused: loopback, the bridge's own
//! internal port, any other OVS port, a link enslaved to a bond, bridge or VRF, and links
//! of other kinds (tun/tap, vxlan, geneve, gre, ipip, sit, wireguard, bridge, vrf, ipvlan,
//! …): taking one over would cut the host off or make OVS loop into itself.

use std::net::IpAddr;

use super::types::EnError;
use crate::netlink::{Link, LinkFlags, Links};

/// Link kinds (`IFLA_INFO_KIND`) a takeover accepts besides plain NICs (no kind).
pub const ACCEPTED_KINDS: &[&str] = &["veth", "vlan", "bond", "team", "macvlan", "dummy"];

/// What OVS knows about a link of the same name, for the verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OvsPort {
    /// No OVS port of that name.
    None,
    /// A port of tether's bridge that is not tether's host port (role named).
    Other(String),
}

/// Why `link` must not be taken over, if it must not. `master` is the name of the link it
/// is enslaved to, when it is. The host port tether made itself never reaches this (it is
/// recognised as attached first).
pub fn refusal(link: &Link, master: Option<&str>, bridge: &str, ovs: OvsPort) -> Option<String> {
    let name = &link.name;
    if link.flags.contains(LinkFlags::LOOPBACK) || name == "lo" {
        return Some(format!("{name} is the loopback interface"));
    }
    if name == bridge {
        return Some(format!(
            "{name} is the OVS bridge's own internal port: taking it over would attach the bridge to itself"
        ));
    }
    if let OvsPort::Other(role) = &ovs {
        return Some(format!(
            "{name} is already a port of bridge {bridge} ({role})"
        ));
    }
    if link.kind.as_deref() == Some("openvswitch") {
        return Some(format!("{name} is an Open vSwitch internal port"));
    }
    if let Some(m) = link.master {
        let m = master.map_or_else(|| format!("index {m}"), str::to_string);
        return Some(format!(
            "{name} is enslaved to {m} (a bond, bridge or VRF port): the IPs belong on the master, take that over instead"
        ));
    }
    if let Some(kind) = link.kind.as_deref() {
        if !ACCEPTED_KINDS.contains(&kind) {
            return Some(format!(
                "{name} is a {kind} link: only plain NICs are taken over (no kind, or {})",
                ACCEPTED_KINDS.join(", ")
            ));
        }
    }
    if link.mac.is_none() {
        return Some(format!("{name} has no Ethernet MAC to give the host port"));
    }
    None
}

/// The link holding the IPs (Antrea `getHostInterfaceName`): IPs on no link are logged
/// and dropped; IPs on different links are an error. The IPs found, sorted as strings
/// (Antrea's `sets.List`).
pub fn find_nic(links: &dyn Links, ips: &[IpAddr]) -> Result<(Link, Vec<IpAddr>), EnError> {
    let mut found: Vec<(IpAddr, Link)> = Vec::new();
    for ip in ips {
        match links.link_holding(*ip).map_err(|error| EnError::Link {
            op: format!("looking up the link holding {ip}"),
            error,
        })? {
            Some(l) => found.push((*ip, l)),
            None => log::warn!("externalnode ip={ip} is on no interface; ignoring it"),
        }
    }
    let Some((_, first)) = found.first() else {
        return Err(EnError::NicNotFound { ips: ips.to_vec() });
    };
    if found.iter().any(|(_, l)| l.index != first.index) {
        return Err(EnError::NicAmbiguous {
            links: found.iter().map(|(ip, l)| (*ip, l.name.clone())).collect(),
        });
    }
    let link = first.clone();
    let mut ips: Vec<IpAddr> = found.into_iter().map(|(ip, _)| ip).collect();
    ips.sort_by_key(IpAddr::to_string);
    ips.dedup();
    Ok((link, ips))
}

/// The name of `link`'s master, for messages.
pub fn master_name(links: &dyn Links, link: &Link) -> Option<String> {
    link.master
        .and_then(|m| links.link_by_index(m).ok())
        .map(|l| l.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(name: &str, kind: Option<&str>) -> Link {
        Link {
            index: 3,
            name: name.into(),
            mac: Some([2, 0, 0, 0, 0, 3]),
            mtu: 1500,
            flags: LinkFlags(LinkFlags::UP.0 | LinkFlags::BROADCAST.0),
            kind: kind.map(str::to_string),
            altnames: Vec::new(),
            master: None,
        }
    }

    #[test]
    fn plain_nics_are_accepted() {
        for kind in [
            None,
            Some("veth"),
            Some("vlan"),
            Some("bond"),
            Some("dummy"),
        ] {
            assert_eq!(
                refusal(&link("eth1", kind), None, "br-int", OvsPort::None),
                None,
                "{kind:?}"
            );
        }
    }

    #[test]
    fn verdicts() {
        let mut lo = link("lo", None);
        lo.flags = LinkFlags(LinkFlags::UP.0 | LinkFlags::LOOPBACK.0);
        lo.mac = None;
        let mut slave = link("eth3", None);
        slave.master = Some(9);
        let mut nomac = link("ppp0", None);
        nomac.mac = None;
        let cases: Vec<(Link, Option<&str>, OvsPort, &str)> = vec![
            (lo, None, OvsPort::None, "lo is the loopback interface"),
            (
                link("br-int", Some("tun")),
                None,
                OvsPort::None,
                "br-int is the OVS bridge's own internal port: taking it over would attach the bridge to itself",
            ),
            (
                link("coll0", None),
                None,
                OvsPort::Other("traffic-control".into()),
                "coll0 is already a port of bridge br-int (traffic-control)",
            ),
            (
                link("ovs-p1", Some("openvswitch")),
                None,
                OvsPort::None,
                "ovs-p1 is an Open vSwitch internal port",
            ),
            (
                slave.clone(),
                Some("bond0"),
                OvsPort::None,
                "eth3 is enslaved to bond0 (a bond, bridge or VRF port): the IPs belong on the master, take that over instead",
            ),
            (
                slave,
                None,
                OvsPort::None,
                "eth3 is enslaved to index 9 (a bond, bridge or VRF port): the IPs belong on the master, take that over instead",
            ),
            (
                link("tap0", Some("tun")),
                None,
                OvsPort::None,
                "tap0 is a tun link: only plain NICs are taken over (no kind, or veth, vlan, bond, team, macvlan, dummy)",
            ),
            (
                link("vx0", Some("vxlan")),
                None,
                OvsPort::None,
                "vx0 is a vxlan link: only plain NICs are taken over (no kind, or veth, vlan, bond, team, macvlan, dummy)",
            ),
            (
                nomac,
                None,
                OvsPort::None,
                "ppp0 has no Ethernet MAC to give the host port",
            ),
        ];
        for (l, master, ovs, want) in cases {
            assert_eq!(
                refusal(&l, master, "br-int", ovs).as_deref(),
                Some(want),
                "{}",
                l.name
            );
        }
    }
}
