//! `tether check`: this node's ExternalNode, read only: the NIC it would take over and
//! whether it may.

use super::*;

/// The decision `tether run` would reach on this node's ExternalNode — its controller's
/// own (`EnController::preview` over backends that only read), rendered without touching
/// anything — and beyond it what OVS and the host need of the NIC: what an earlier
/// takeover left, who configures it, and whether each of its routes can be moved.
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
    use crate::controller::externalnode::EnError;
    use crate::controller::externalnode::plan::{Attach, Wanted};
    use crate::controller::externalnode::uplink::UplinkFacts;
    use preflight::{gather, host::RealHost};
    let key = format!("{}/{}", en.metadata.namespace, en.metadata.name);
    let what = "externalnode";
    let fix_ips = "make spec.interfaces[0].ips the addresses of the VM NIC to attach";
    let preview = match preview(cfg, client, en) {
        Ok(p) => p,
        Err(e) => {
            out.push(bad(
                Level::Warn,
                what,
                format!("{key}: cannot preview tether run's decision: netlink: {e}"),
                "run tether check as root",
            ));
            return;
        }
    };
    for nic in &preview.orphans {
        out.push(bad(
            Level::Warn,
            what,
            format!(
                "{key}: OVS lost {nic}'s host port: tether run gives {nic} back from the state directory's copy of its configuration first"
            ),
            "nothing to do; tether reset gives it back too",
        ));
    }
    let plan = &preview.plan;
    let nic = match (&plan.refused, &preview.snapshot.wanted) {
        (Some(EnError::Refused { detail, .. }), _) => {
            out.push(bad(
                Level::Fail,
                what,
                format!("{key}: tether run refuses to take it over: {detail}"),
                fix_ips,
            ));
            return;
        }
        (Some(EnError::Inconsistent { nic, .. }), _) => {
            let facts = preflight::nic::PortFacts {
                host_port: false,
                uplink_link: true,
                ..gather::port_facts(client, links, nic, false)
            };
            out.extend(preflight::nic::leftovers(nic, &cfg.bridge, &facts));
            return;
        }
        (Some(e), _) => {
            out.push(bad(Level::Fail, what, format!("{key}: {e}"), fix_ips));
            return;
        }
        (None, Wanted::Present { nic, .. }) => nic,
        (None, _) => return,
    };
    for n in &plan.release {
        out.push(ok(
            what,
            format!("{key}: tether run gives {n} back (another NIC holds the IPs now)"),
        ));
    }
    let Some(p) = &plan.nic else { return };
    let link = &nic.link;
    let attached = preview.snapshot.attached.iter().any(|a| a.nic == p.nic);
    let ports = gather::port_facts(client, links, &link.name, attached);
    let leftovers = preflight::nic::leftovers(&link.name, &cfg.bridge, &ports);
    match p.attach {
        Attach::Keep => {
            let relabel = if p.relabel.is_some() {
                " (tether run re-labels its host port)"
            } else {
                ""
            };
            out.push(ok(
                what,
                format!(
                    "{key}: {} is attached (tether's host port){relabel}",
                    link.name
                ),
            ));
            out.extend(leftovers);
            let facts = UplinkFacts::read(links, &p.uplink).ok();
            out.extend(preflight::nic::side_door(
                &p.uplink,
                &cfg.datapath_type,
                facts.as_ref(),
            ));
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
        Attach::Rebuild => {
            out.push(bad(
                Level::Warn,
                what,
                format!(
                    "{key}: {} is attached but its uplink port {} is gone from the bridge: tether run gives {} back and takes it over again",
                    p.nic, p.uplink, p.nic
                ),
                "nothing to do",
            ));
            out.extend(preflight::mtu(&link.name, link.mtu, tunnels));
            return;
        }
        Attach::Reattach | Attach::Takeover => {}
    }
    let uplink = gather::uplink(cfg, &RealHost, links, link);
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
        out.extend(gather::network(&RealHost, links, link, &m));
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
                "{key}: would {} {} ({}, {} addresses, {} routes)",
                if p.attach == Attach::Reattach {
                    "re-attach"
                } else {
                    "take over"
                },
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

/// `tether run`'s decision on `en`, from OVSDB as it is (no bridge when OVS is not
/// reachable) and the kernel, through backends that only read.
fn preview(
    cfg: &Config,
    client: Option<&Client>,
    en: &k8s::ExternalNode,
) -> Result<crate::controller::externalnode::EnPreview, crate::netlink::LinkError> {
    use crate::commands::dry::{self, DryBridge, DryFlows, DryLinks, Recorder};
    let view = client.and_then(|c| crate::ovsdb::read_bridge(c, &cfg.bridge));
    let (ports, ids) = view.map_or_else(Default::default, |v| (v.ports, v.external_ids));
    let rec = Recorder::default();
    let real = crate::netlink::Rtnl::connect()?;
    let links = Arc::new(DryLinks {
        real,
        rec: rec.clone(),
    });
    let stores = k8s::Stores::default();
    stores.external_nodes.replace(vec![en.clone()]);
    let en = dry::en_controller(
        cfg,
        stores,
        Arc::new(DryBridge::new(ports, ids, rec.clone())),
        Arc::new(DryFlows(rec.clone())),
        links,
        &rec,
    );
    Ok(en.preview())
}
