//! NICs given back from their held configuration after OVS lost their host port: a
//! `<nic>~` left without the host port that carried the VM's addresses (`ovs-vsctl
//! del-port <nic>`, `del-br`, an OVS database replaced by an empty one). Without the host
//! port nothing else knows the NIC's addresses, routes and settings: the state
//! directory's copy of the held configuration (`heldfile`; OVSDB's may be gone with the
//! bridge) gives the NIC back the way a restore does — the uplink port deleted if it is
//! still there, the NIC released by the datapath, renamed back, its sysctls, addresses and
//! routes put back. `sync` then takes it over again; `tether reset` stops there.
//!
//! Every step is idempotent and the held file goes last, so a crash anywhere in between
//! is finished by the next look: a NIC that already has its own name back (no `<nic>~`)
//! and no master gets the held configuration put on it (what it lacks of it), then the
//! file goes.

use std::collections::BTreeSet;

use super::steps::Unwinding;
use super::*;
use crate::controller::externalnode::record::Held;

impl EnController {
    /// Give back every NIC the state directory holds a configuration for whose host port
    /// OVSDB no longer has; the NICs given back.
    pub(super) fn give_back_orphans(&self) -> Result<Vec<String>, EnError> {
        let mut given = Vec::new();
        let mut errors = Vec::new();
        for nic in self.orphans(&self.attached()) {
            match self.give_back(&nic) {
                Ok(true) => given.push(nic),
                Ok(false) => {}
                Err(e) => errors.push(e),
            }
        }
        many(errors).map(|()| given)
    }

    /// The NICs the state directory holds a configuration for that are not attached (no
    /// host port in OVSDB): each is given back before anything else. Reads only.
    pub(super) fn orphans(&self, attached: &[Attached]) -> Vec<String> {
        let Some(files) = &self.held_files else {
            return Vec::new();
        };
        let attached: BTreeSet<&str> = attached.iter().map(|a| a.nic.as_str()).collect();
        files
            .nics()
            .into_iter()
            .filter(|n| !attached.contains(n.as_str()))
            .collect()
    }

    /// Give `nic` back from its held configuration, if `<nic>~` (or a half-given-back
    /// NIC) is there to give back; false when there is nothing to do.
    fn give_back(&self, nic: &str) -> Result<bool, EnError> {
        let Some(held) = self.read_held(nic) else {
            return Ok(false);
        };
        let uplink = uplink_name(nic);
        let links = self.links.as_ref();
        let nic_link = match links.link_by_name(&uplink) {
            Ok(l) => l,
            Err(e) if e.is_not_found() => return self.finish_give_back(nic, held),
            Err(e) => return Err(link_err(format!("find uplink {uplink}"))(e)),
        };
        log::warn!(
            "externalnode {uplink} has no host port {nic} (deleted outside tether, or OVS lost \
             the bridge or its database): giving the NIC back from its held configuration"
        );
        self.set_step("giveback".into());
        let mut config = held.config;
        config.ifindex = nic_link.index;
        config.name = nic.to_string();
        let rec = Record {
            phase: Phase::Restore,
            step: Step::Flows,
            nic: nic.to_string(),
            uplink: uplink.clone(),
            config,
        };
        let mut u = Unwinding::default();
        self.forget_flows(&rec);
        if !self.undo_ports(&rec, &Made::default(), &mut u) {
            return many(u.errors).map(|()| false);
        }
        self.undo_rename(&rec, &mut u);
        self.undo_move(&rec, &mut u);
        self.gave_back(nic, u, "given back from its held configuration")
    }

    /// The end of a give-back: nothing failed, the network manager told, the held file
    /// dropped last (a crash before it is finished by the next look), logged and counted.
    fn gave_back(&self, nic: &str, u: Unwinding, how: &str) -> Result<bool, EnError> {
        if !u.errors.is_empty() {
            return many(u.errors).map(|()| false);
        }
        self.release_host_network(nic);
        self.drop_held(nic)?;
        log::info!("externalnode {nic} {how}");
        self.repaired(format!("host port {nic} was lost: {nic} {how}"));
        Ok(true)
    }

    /// The uplink flows of a NIC being given back: their ports are gone, and a takeover
    /// replaces them. With the bridge gone OpenFlow is down: a failure here is no reason
    /// to leave the VM cut off, so it is only logged.
    fn forget_flows(&self, rec: &Record) {
        let mut flows = Unwinding::default();
        self.undo_flows(rec, &mut flows);
        for e in flows.errors {
            log::warn!("externalnode giving {} back: {e}", rec.nic);
        }
    }

    /// No `<nic>~`: a NIC with its own name and no master (a give-back interrupted after
    /// the rename) gets what it lacks of the held configuration, then the file goes. A
    /// NIC that is still some datapath's port, or no NIC at all, is left alone.
    fn finish_give_back(&self, nic: &str, held: Held) -> Result<bool, EnError> {
        let links = self.links.as_ref();
        let link = match links.link_by_name(nic) {
            Ok(l) if l.master.is_none() => l,
            Ok(_) => return Ok(false),
            Err(e) if e.is_not_found() => {
                log::warn!(
                    "externalnode held configuration of {nic}: neither {nic} nor {} exists; keeping it",
                    uplink_name(nic)
                );
                return Ok(false);
            }
            Err(e) => return Err(link_err(format!("find {nic}"))(e)),
        };
        let mut config = held.config;
        config.ifindex = link.index;
        let rec = Record {
            phase: Phase::Restore,
            step: Step::Move,
            nic: nic.to_string(),
            uplink: uplink_name(nic),
            config,
        };
        self.forget_flows(&rec);
        let mut u = Unwinding {
            nic_link: Some(Ok(link)),
            errors: Vec::new(),
        };
        self.undo_move(&rec, &mut u);
        self.gave_back(
            nic,
            u,
            "had its own name back: its held configuration is back on it",
        )
    }
}
