//! What a sync would do, decided by the same snapshot and plan as `reconcile`, and
//! nothing done (`tether plan`): only reads of OVSDB and the kernel.

use super::*;
use crate::netlink::NicConfig;

/// A sync's decisions, and the configuration each would move.
#[derive(Clone, Debug, Default)]
pub struct EnPreview {
    /// A step a crash left recorded: finished (restore) or rolled back (takeover) first.
    pub recorded: Option<String>,
    /// The NIC holding this node's ExternalNode's IPs, what the plan does with it, and its
    /// configuration (what a takeover would move to the host port).
    pub attach: Option<(String, Attach, Option<NicConfig>)>,
    /// NICs given back (no ExternalNode, or another NIC holds the IPs now), each with the
    /// host port's configuration that would go back to it.
    pub release: Vec<(String, Option<NicConfig>)>,
    /// The host port's external_ids a sync would write (the ExternalNode's name or IPs
    /// changed while its NIC stays attached): a re-label.
    pub relabel: Option<(String, BTreeMap<String, String>)>,
    /// Why nothing can be planned for the ExternalNode (invalid, NIC refused or missing).
    pub error: Option<String>,
}

impl EnController {
    pub fn preview(&self) -> EnPreview {
        let mut p = EnPreview {
            recorded: self.bridge.bridge_external_id(RECORD_KEY).ok().flatten(),
            ..EnPreview::default()
        };
        let attached = self.attached();
        let config_of = |name: &str| {
            self.links
                .link_by_name(name)
                .ok()
                .and_then(|l| capture(self.links.as_ref(), l.index).ok())
        };
        let release = |names: &[String]| -> Vec<(String, Option<NicConfig>)> {
            names.iter().map(|n| (n.clone(), config_of(n))).collect()
        };
        let key = self.key();
        let Some(en) = self.stores.external_nodes.get(&key) else {
            let all: Vec<String> = attached.iter().map(|a| a.nic.clone()).collect();
            p.release = release(&all);
            return p;
        };
        let found = en
            .spec
            .as_ref()
            .map_err(|e| e.to_string())
            .and_then(|spec| {
                spec.interfaces
                    .first()
                    .cloned()
                    .ok_or_else(|| "spec.interfaces is empty".to_string())
            })
            .and_then(|iface| {
                let (link, ips) = self.find_nic(&iface.ips).map_err(|e| e.to_string())?;
                Ok((link, ips, iface.name))
            });
        let (link, ips, iface_name) = match found {
            Ok(v) => v,
            Err(e) => {
                p.error = Some(format!("externalnode {key}: {e}"));
                return p;
            }
        };
        let views = self.views(&attached);
        let uplink = uplink_name(&link.name);
        let exists = self.links.link_by_name(&uplink).is_ok();
        let plan = plan_sync(&link.name, &uplink, exists, &views);
        if plan.judge {
            if let Err(e) = self.judge(&key, &link) {
                p.error = Some(e.to_string());
                return p;
            }
        }
        let config = match plan.attach {
            Attach::Keep => None,
            _ => capture(self.links.as_ref(), link.index).ok(),
        };
        // What `ensure_attached` would write on the host port of a NIC that stays.
        if plan.attach == Attach::Keep {
            if let Some(a) = attached.iter().find(|a| a.nic == link.name) {
                let uplink_port = a.uplink_port.clone().unwrap_or_else(|| Uuid(String::new()));
                let entity = external_entity_name(&en.metadata.name, &iface_name);
                let ids = host_external_ids(
                    &a.uplink,
                    &uplink_port,
                    &entity,
                    &en.metadata.namespace,
                    &ips,
                );
                if ids != a.ids {
                    p.relabel = Some((a.nic.clone(), ids));
                }
            }
        }
        p.attach = Some((link.name.clone(), plan.attach, config));
        p.release = release(&plan.release);
        p
    }
}
