//! The uplink of an attached NIC kept as the takeover left it (`uplink`'s held values,
//! at every sync), and whether its kernel stack still takes the VM's traffic past OVS (the
//! side door), read at every status refresh and logged when that changes.

use super::*;

impl EnController {
    /// The held values on an attached uplink, as a takeover leaves them: a NIC taken over
    /// by an older tether or by Antrea's agent lacks them, and someone may have turned one
    /// back. Not fatal: the VM is reachable either way; status reports a side door left.
    pub(super) fn hold_uplink(&self, name: &str) {
        let links = self.links.as_ref();
        let Ok(link) = links.link_by_name(name) else {
            return;
        };
        let plan = match read_sysctls(links, name) {
            Ok(now) => uplink::plan_held_values(&link, &now, &self.cfg.datapath_type),
            Err(e) => {
                log::warn!("externalnode cannot read the sysctls of uplink {name}: {e}");
                return;
            }
        };
        if plan.steps.is_empty() {
            return;
        }
        let what: Vec<String> = plan.steps.iter().map(ToString::to_string).collect();
        match apply(links, &plan) {
            Ok(_) => log::info!(
                "externalnode uplink={name} held values: {}",
                what.join("; ")
            ),
            Err(e) => log::warn!("externalnode uplink={name} cannot set its held values: {e}"),
        }
    }

    /// The side door of `a`'s uplink as the kernel shows it now (`uplink::side_door`);
    /// None when it is shut, or cannot be read.
    pub(super) fn side_door_now(&self, a: &Attached) -> Option<String> {
        match uplink::UplinkFacts::read(self.links.as_ref(), &a.uplink) {
            Ok(f) => uplink::side_door(&a.uplink, &self.cfg.datapath_type, &f),
            Err(e) => {
                log::debug!("externalnode cannot read uplink {}: {e}", a.uplink);
                None
            }
        }
    }

    /// Log a side door when it opens or changes, and when it shuts again.
    pub(super) fn log_side_door(uplink_name: &str, was: Option<&String>, now: Option<&String>) {
        if was == now {
            return;
        }
        match now {
            Some(why) => log::warn!(
                "externalnode uplink={uplink_name} side door open: {why}; fix: {}",
                uplink::side_door_fix(uplink_name)
            ),
            None => log::info!(
                "externalnode uplink={uplink_name} side door shut: the kernel stack takes nothing past OVS"
            ),
        }
    }
}
