//! The step record in OVSDB: writing it before each step, and at the next sync finishing
//! or rolling back whatever step a crash or a failure left recorded (or, when the record
//! does not decode, salvaging the NIC from what the kernel and OVSDB show).

use super::*;

impl EnController {
    pub(super) fn write_record(&self, rec: &Record) -> Result<(), EnError> {
        self.set_step(format!("{}:{}", rec.phase.name(), rec.step.name()));
        self.bridge
            .set_bridge_external_id(RECORD_KEY, Some(&rec.to_json()))
            .map_err(ovs_err(format!(
                "record step {}:{} for {}",
                rec.phase.name(),
                rec.step.name(),
                rec.nic
            )))
    }

    pub(super) fn clear_record(&self) -> Result<(), EnError> {
        self.bridge
            .set_bridge_external_id(RECORD_KEY, None)
            .map_err(ovs_err("remove the step record"))
    }

    /// Roll back a recorded takeover or finish a recorded restore.
    pub(super) fn finish_recorded(&self) -> Result<(), EnError> {
        let Some(raw) = self
            .bridge
            .bridge_external_id(RECORD_KEY)
            .map_err(ovs_err("read the step record"))?
        else {
            return Ok(());
        };
        let rec = match Record::from_json(&raw) {
            Ok(rec) => rec,
            Err(detail) => return self.salvage(&raw, detail),
        };
        log::warn!(
            "externalnode found an interrupted operation phase={} step={} nic={}; {}",
            rec.phase.name(),
            rec.step.name(),
            rec.nic,
            match rec.phase {
                Phase::Takeover => "rolling it back",
                Phase::Restore => "finishing it",
            }
        );
        self.unwind(rec, &Made::default())
    }

    /// A step record that does not decode (corrupted, or written by something else): the
    /// captured configuration in it is lost, so the NIC is recovered from what the kernel
    /// and OVSDB show, as a restore (what both a rolled-back takeover and a finished
    /// restore end in): the NIC is the link called like the uplink (or like the NIC), and
    /// its configuration is what the host port and the NIC carry now. The new record
    /// replaces the broken one before anything changes, so a crash here recovers
    /// normally. Only when no NIC can be named at all is the record left for an operator.
    pub(super) fn salvage(&self, raw: &str, detail: String) -> Result<(), EnError> {
        // Long on purpose: Salvaging follows one decision tree (which NIC, which ports,
        // what config); split, its cases would lose their order.
        let shown: String = raw.chars().take(512).collect();
        log::error!(
            "externalnode step record Bridge external_ids:{RECORD_KEY} is unreadable ({detail}): {shown:?}; recovering the NIC from the kernel and OVSDB"
        );
        let hint = Hint::from_json(raw);
        let links = self.links.as_ref();
        let nic = hint
            .nic
            .clone()
            .or_else(|| self.attached().first().map(|a| a.nic.clone()))
            .or_else(|| {
                // Renamed, no port yet: a lone `<nic>~` link (the short uplink form).
                let all = links.links().ok()?;
                let mut lone = all.iter().filter_map(|l| {
                    let nic = l.name.strip_suffix(crate::netlink::UPLINK_SUFFIX)?;
                    (!nic.is_empty() && !all.iter().any(|o| o.name == nic)).then(|| nic.to_string())
                });
                match (lone.next(), lone.next()) {
                    (Some(n), None) => Some(n),
                    _ => None,
                }
            });
        let Some(nic) = nic else {
            // No host port and no link with an uplink name: no step of a takeover or a
            // restore has left a trace, so there is nothing to undo.
            let uplinks = links.links().map(|all| {
                all.iter()
                    .any(|l| l.name.contains(crate::netlink::UPLINK_SUFFIX))
            });
            if uplinks.is_ok_and(|any| !any) {
                log::warn!(
                    "externalnode the unreadable record names no NIC and no NIC is half taken over; removing it"
                );
                return self.clear_record();
            }
            return Err(EnError::Record { detail });
        };
        let uplink = hint.uplink.unwrap_or_else(|| uplink_name(&nic));
        let nic_link = links
            .link_by_name(&uplink)
            .or_else(|_| links.link_by_name(&nic))
            .map_err(link_err(format!("find {nic} (or {uplink})")))?;
        let mut config = capture(links, nic_link.index)
            .map_err(link_err(format!("capture {}", nic_link.name)))?;
        // The host port holds what was moved already; the NIC what was not.
        let mut own_sysctls = None;
        match links.link_by_name(&nic) {
            Ok(host) if host.index != nic_link.index => {
                let on_host =
                    capture(links, host.index).map_err(link_err(format!("capture {nic}")))?;
                own_sysctls = Some(on_host.sysctls);
                config.mtu = on_host.mtu;
                for a in on_host.addrs {
                    if !config.addrs.iter().any(|b| b.local == a.local) {
                        config.addrs.push(a);
                    }
                }
                for r in on_host.routes {
                    let same = |q: &crate::netlink::Route| {
                        (q.table, q.dst, q.metric, q.tos) == (r.table, r.dst, r.metric, r.tos)
                    };
                    if !config.routes.iter().any(same) {
                        config.routes.push(r);
                    }
                }
            }
            _ => {}
        }
        // What the uplink carries of tether's held values is not the NIC's own: those are
        // on the host port (copied there before the uplink got them), or, once it is gone,
        // in the held configuration.
        let own_sysctls = own_sysctls.or_else(|| self.read_held(&nic).map(|h| h.config.sysctls));
        config.sysctls = uplink::own_values(&config.sysctls, own_sysctls.as_deref());
        config.name = nic.clone();
        log::warn!(
            "externalnode recovering nic={nic} uplink={uplink} from the kernel: addresses={}",
            config
                .addrs
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        );
        let rec = Record {
            phase: Phase::Restore,
            step: Step::Flows,
            nic,
            uplink,
            config,
        };
        self.write_record(&rec)?;
        self.unwind(rec, &Made::default())
    }
}
