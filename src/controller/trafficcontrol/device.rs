//! Whether a TrafficControl `device` target is a link the host itself uses. Attaching such
//! a link to the bridge as a system port hands its frames to OVS: on the kernel datapath
//! it stops serving the host (a `device` named after the management NIC cut the VM off).
//! Refused: loopback, a link with an address other than link-local, a link routes go
//! through, and the ExternalNode's NIC and its uplink. A link that does not exist (yet) is
//! not judged: OVS attaches it when it appears, as Antrea does. Pure.

use crate::netlink::{Addr, Link, LinkFlags, Route, is_link_local};

/// Why `link` (with its addresses and routes) must not be a device target, if it must
/// not. `en_links` are the ExternalNode's NIC and uplink names.
pub fn refusal(
    link: &Link,
    addrs: &[Addr],
    routes: &[Route],
    en_links: &[String],
) -> Option<String> {
    let name = &link.name;
    if en_links.iter().any(|n| n == name) {
        return Some(format!(
            "{name} is the ExternalNode's NIC or uplink: the VM reaches the network through it"
        ));
    }
    if link.flags.contains(LinkFlags::LOOPBACK) || name == "lo" {
        return Some(format!("{name} is the loopback interface"));
    }
    let host: Vec<String> = addrs
        .iter()
        .filter(|a| !is_link_local(a.local))
        .map(ToString::to_string)
        .collect();
    if !host.is_empty() {
        return Some(format!(
            "{name} carries the host's addresses {}: capturing it would take them off the network",
            host.join(", ")
        ));
    }
    // The IPv6 link-local prefix route every link has by itself does not count.
    let through: Vec<String> = routes
        .iter()
        .filter(|r| !(r.is_ipv6() && r.dst.len >= 10 && is_link_local(r.dst.addr)))
        .map(|r| {
            let dst = if r.dst.is_default() {
                "default".to_string()
            } else {
                r.dst.to_string()
            };
            match r.gateway {
                Some(gw) => format!("{dst} via {gw}"),
                None => dst,
            }
        })
        .collect();
    if !through.is_empty() {
        return Some(format!(
            "{name} has routes through it ({}): the host sends traffic out of it",
            through.join("; ")
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::Prefix;

    fn link(name: &str) -> Link {
        Link {
            index: 4,
            name: name.into(),
            mac: Some([2, 0, 0, 0, 0, 4]),
            mtu: 1500,
            flags: LinkFlags::UP,
            kind: Some("veth".into()),
            altnames: Vec::new(),
            master: None,
        }
    }

    #[test]
    fn verdicts() {
        let ll = Addr::new(4, "fe80::1".parse().unwrap(), 64);
        let fe80 = Route::new(Prefix::new("fe80::".parse().unwrap(), 64), 4);
        // A capture NIC: up, link-local only. Accepted.
        assert_eq!(
            refusal(
                &link("coll0"),
                std::slice::from_ref(&ll),
                std::slice::from_ref(&fe80),
                &[]
            ),
            None
        );
        let mut lo = link("lo");
        lo.flags = LinkFlags(LinkFlags::UP.0 | LinkFlags::LOOPBACK.0);
        assert_eq!(
            refusal(&lo, &[], &[], &[]).as_deref(),
            Some("lo is the loopback interface")
        );
        let a = Addr::new(4, "192.0.2.10".parse().unwrap(), 24);
        let a6 = Addr::new(4, "2001:db8:1::10".parse().unwrap(), 64);
        assert_eq!(
            refusal(&link("eth0"), &[a, ll, a6], &[], &[]).as_deref(),
            Some(
                "eth0 carries the host's addresses 192.0.2.10/24, 2001:db8:1::10/64: capturing it would take them off the network"
            )
        );
        let mut def = Route::new(Prefix::new("0.0.0.0".parse().unwrap(), 0), 4);
        def.gateway = Some("192.0.2.1".parse().unwrap());
        assert_eq!(
            refusal(&link("eth0"), &[], &[def, fe80], &[]).as_deref(),
            Some(
                "eth0 has routes through it (default via 192.0.2.1): the host sends traffic out of it"
            )
        );
        assert_eq!(
            refusal(&link("eth1~"), &[], &[], &["eth1".into(), "eth1~".into()]).as_deref(),
            Some(
                "eth1~ is the ExternalNode's NIC or uplink: the VM reaches the network through it"
            )
        );
    }
}
