//! What an ExternalNode sync does, decided in one place: [`EnController`]'s `snapshot`
//! gathers what the store, OVSDB and the kernel say (reads only) into a [`Snapshot`], and
//! [`decide`] (pure) turns it into an [`EnPlan`] whose effects are data: the NIC to keep,
//! take over, re-attach or rebuild, the host port's new labels, the NICs to give back, or
//! why nothing may be done. `sync` carries the plan out; `tether plan`, `tether check` and
//! `preview` render the same plan, so none of them can disagree with `run`.
//!
//! [`EnController`]: super::EnController

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::types::{EnError, host_external_ids};
use crate::netlink::Link;
use crate::ovsdb::Uuid;

/// One NIC OVSDB says is attached: a host port (`antrea-type=host`) and what it records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attached {
    pub nic: String,
    pub uplink: String,
    pub host: Uuid,
    /// The uplink port, when the bridge still has a port of that name with the uplink role.
    pub uplink_port: Option<Uuid>,
    /// The kernel still has a link called like its uplink (only "not found" counts as gone:
    /// another error is no evidence of a reboot).
    pub uplink_link: bool,
    pub ids: BTreeMap<String, String>,
}

/// The link holding the ExternalNode's IPs, as the snapshot found it.
#[derive(Clone, Debug, PartialEq)]
pub struct Nic {
    pub link: Link,
    /// The ExternalNode's IPs found on it, sorted.
    pub ips: Vec<IpAddr>,
    /// No link held the IPs: this is an attached NIC's host port, re-created empty, whose
    /// held configuration has them.
    pub held: bool,
    /// `uplink_name(link.name)`.
    pub uplink: String,
    /// A link of exactly that name exists.
    pub uplink_link: bool,
    /// Why the link must not be taken over (`verdict`), if it must not.
    pub refusal: Option<String>,
}

/// What the store says this node wants.
#[derive(Clone, Debug, PartialEq)]
pub enum Wanted {
    /// No ExternalNode for this node: every attached NIC goes back.
    Absent,
    /// An ExternalNode nothing can be done for yet (invalid, its NIC not found or
    /// ambiguous): nothing is changed.
    Unusable(EnError),
    Present {
        nic: Nic,
        /// All of `spec.interfaces[0].ips` (to find the NIC again after a rebuild).
        wanted: Vec<IpAddr>,
        entity: String,
        namespace: String,
    },
}

/// What a sync sees.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    /// The ExternalNode's store key (`namespace/name`).
    pub key: String,
    pub wanted: Wanted,
    /// Sorted by NIC name.
    pub attached: Vec<Attached>,
}

/// What to do about the NIC holding the ExternalNode's IPs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attach {
    /// Attached and whole: refresh the host port's external_ids and the flows.
    Keep,
    /// The ports outlived their links (a reboot: the NIC has its own name and addresses
    /// again, the uplink link is gone; Antrea #4122): drop the ports, take the NIC again.
    Reattach,
    /// The uplink port vanished under us: give the NIC back, then take it again.
    Rebuild,
    /// Not attached: take it over.
    Takeover,
}

/// The decision about the NIC holding the IPs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NicPlan {
    pub nic: String,
    pub uplink: String,
    pub attach: Attach,
    /// `Keep` only: the host port's external_ids, when they differ from what it has (the
    /// ExternalNode's name or IPs changed).
    pub relabel: Option<BTreeMap<String, String>>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct EnPlan {
    /// Why nothing may be done (then nothing is, not even a release): invalid, no NIC,
    /// a refused link, someone else's half-done takeover.
    pub refused: Option<EnError>,
    pub nic: Option<NicPlan>,
    /// Attached NICs given back after `nic` is in (a different NIC holds the IPs now), or
    /// all of them (no ExternalNode).
    pub release: Vec<String>,
}

/// The plan for a snapshot. Pure.
pub fn decide(s: &Snapshot) -> EnPlan {
    let refused = |e: EnError| EnPlan {
        refused: Some(e),
        nic: None,
        release: Vec::new(),
    };
    let (nic, entity, namespace) = match &s.wanted {
        Wanted::Absent => {
            return EnPlan {
                refused: None,
                nic: None,
                release: s.attached.iter().map(|a| a.nic.clone()).collect(),
            };
        }
        Wanted::Unusable(e) => return refused(e.clone()),
        Wanted::Present {
            nic,
            entity,
            namespace,
            ..
        } => (nic, entity, namespace),
    };
    let name = &nic.link.name;
    let mine = s.attached.iter().find(|a| &a.nic == name);
    // The verdict is asked of any link that is not (still) our host port with its uplink.
    let judged = !mine.is_some_and(|a| a.uplink_link);
    if let Some(detail) = nic.refusal.clone().filter(|_| judged) {
        return refused(EnError::Refused {
            en: s.key.clone(),
            detail,
        });
    }
    let attach = match mine {
        Some(a) if !a.uplink_link => Attach::Reattach,
        Some(a) if a.uplink_port.is_some() => Attach::Keep,
        Some(_) => Attach::Rebuild,
        None if nic.uplink_link => {
            // Someone else's half-done takeover (or a replica behind our own writes):
            // never stack a second one.
            return refused(EnError::Inconsistent {
                nic: name.clone(),
                detail: format!(
                    "link {} exists but OVSDB has no host port {name}",
                    nic.uplink
                ),
            });
        }
        None => Attach::Takeover,
    };
    let relabel = mine.filter(|_| attach == Attach::Keep).and_then(|a| {
        let uplink_port = a.uplink_port.clone().unwrap_or_else(|| Uuid(String::new()));
        let ids = host_external_ids(&a.uplink, &uplink_port, entity, namespace, &nic.ips);
        (ids != a.ids).then_some(ids)
    });
    EnPlan {
        refused: None,
        nic: Some(NicPlan {
            nic: name.clone(),
            uplink: mine.map_or_else(|| nic.uplink.clone(), |a| a.uplink.clone()),
            attach,
            relabel,
        }),
        release: s
            .attached
            .iter()
            .filter(|a| &a.nic != name)
            .map(|a| a.nic.clone())
            .collect(),
    }
}

#[cfg(test)]
mod tests;
