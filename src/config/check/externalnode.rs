//! `tether check`: this node's ExternalNode, read only: the NIC it would take over and
//! whether it may.

use super::*;

/// The verdict `tether run` would reach on this node's ExternalNode, without touching
/// anything: a valid spec, the link holding its IPs, whether that link may be taken over
/// (`verdict`, then what OVS needs of it beyond that), what an earlier takeover left, who
/// configures it, and whether each of its routes can be moved.
pub(super) fn check_external_node(
    cfg: &Config,
    client: Option<&Client>,
    links: &dyn Links,
    en: &k8s::ExternalNode,
    tunnels: &[preflight::Tunnel],
    out: &mut Vec<Finding>,
) {
    // Long on purpose: The checks `tether check` reports for the ExternalNode, in the order
    // it prints them; each is a few lines, and they share what the earlier ones found.
    use crate::controller::externalnode::verdict::{self, OvsPort};
    use preflight::{gather, host::RealHost};
    let key = format!("{}/{}", en.metadata.namespace, en.metadata.name);
    let what = "externalnode";
    let fix_ips = "make spec.interfaces[0].ips the addresses of the VM NIC to attach";
    let spec = match &en.spec {
        Ok(s) => s,
        Err(e) => {
            out.push(bad(Level::Fail, what, format!("{key}: {e}"), fix_ips));
            return;
        }
    };
    let Some(iface) = spec.interfaces.first() else {
        out.push(bad(
            Level::Fail,
            what,
            format!("{key}: no interface"),
            fix_ips,
        ));
        return;
    };
    let link = match verdict::find_nic(links, &iface.ips) {
        Ok((l, _)) => l,
        Err(e) => {
            out.push(bad(Level::Fail, what, format!("{key}: {e}"), fix_ips));
            return;
        }
    };
    let role = client.and_then(|c| ovs_role(c, &link.name));
    let is_host = role.as_deref() == Some("host");
    let ports = gather::port_facts(client, links, &link.name, is_host);
    let leftovers = preflight::nic::leftovers(&link.name, &cfg.bridge, &ports);
    // The host port with its uplink link is attached; without it (a reboot) `tether run`
    // replaces the ports and judges the link like any other.
    if is_host && ports.uplink_link {
        out.push(ok(
            what,
            format!("{key}: {} is attached (tether's host port)", link.name),
        ));
        out.extend(leftovers);
        out.push(ok(
            "network",
            format!(
                "{} (the host port) is configured by {}",
                link.name,
                crate::hostnet::detect(&Default::default(), &link.name, link.index)
            ),
        ));
        out.extend(preflight::mtu(&link.name, link.mtu, tunnels));
        return;
    }
    if let Some(role) = role.filter(|_| !is_host) {
        let r = verdict::refusal(&link, None, &cfg.bridge, OvsPort::Other(role));
        out.push(bad(
            Level::Fail,
            what,
            format!("{key}: {}", r.unwrap_or_default()),
            fix_ips,
        ));
        return;
    }
    let master = verdict::master_name(links, &link);
    if let Some(r) = verdict::refusal(&link, master.as_deref(), &cfg.bridge, OvsPort::None) {
        out.push(bad(
            Level::Fail,
            what,
            format!("{key}: tether run refuses to take it over: {r}"),
            fix_ips,
        ));
        return;
    }
    let uplink = gather::uplink(cfg, &RealHost, links, &link);
    let refused = uplink.iter().any(|f| f.level == Level::Fail);
    out.extend(uplink);
    if let Some(f) = leftovers {
        let stop = f.level == Level::Fail;
        out.push(f);
        if stop {
            return;
        }
    }
    if refused {
        return;
    }
    if crate::hostnet::in_init_netns() {
        let m = crate::hostnet::detect(&Default::default(), &link.name, link.index);
        out.extend(gather::network(&RealHost, links, &link, &m));
    }
    match crate::netlink::capture(links, link.index) {
        Ok(c) if !c.unmovable().is_empty() => out.push(bad(
            Level::Fail,
            what,
            format!(
                "{key}: {} has routes tether cannot move exactly: {}",
                link.name,
                c.unmovable().join("; ")
            ),
            "replace them by plain routes (no nexthop object, encapsulation or source prefix), or remove them",
        )),
        Ok(c) => out.push(ok(
            what,
            format!(
                "{key}: would take over {} ({}, {} addresses, {} routes)",
                link.name,
                link.kind.as_deref().unwrap_or("NIC"),
                c.addrs.len(),
                c.routes.len()
            ),
        )),
        Err(e) => out.push(bad(
            Level::Warn,
            what,
            format!("{key}: cannot read {}: {e}", link.name),
            "run tether check as root",
        )),
    }
    out.extend(preflight::mtu(&link.name, link.mtu, tunnels));
}
