//! What an ExternalNode sync must do, decided from a snapshot as data: which NIC to
//! attach and how, whether the verdict must be asked first, and which other attached
//! NICs to give back. Pure; `reconcile` gathers the snapshot and carries the plan out.

/// One NIC OVSDB says is attached, as the plan needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachedView {
    pub nic: String,
    /// OVSDB still has its uplink port.
    pub uplink_port: bool,
    /// The kernel still has a link called like its uplink.
    pub uplink_link: bool,
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
    /// A link called like the NIC's uplink exists, with no step in flight and no host
    /// port in OVSDB: someone else's half-done takeover (or a replica behind our own
    /// writes). Never stack a second one.
    Refuse { uplink: String },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnPlan {
    /// Ask the verdict (may this link be taken over at all?) before any link is touched:
    /// the link is not (still) our host port.
    pub judge: bool,
    pub attach: Attach,
    /// Other attached NICs, given back after the new one is in (a different NIC holds the
    /// IPs now).
    pub release: Vec<String>,
}

/// The plan for `nic` (the link holding the ExternalNode's IPs, whose uplink name is
/// `uplink`; `uplink_link`: a link of that name exists).
pub fn plan_sync(nic: &str, uplink: &str, uplink_link: bool, attached: &[AttachedView]) -> EnPlan {
    let mine = attached.iter().find(|a| a.nic == nic);
    let attach = match mine {
        Some(a) if !a.uplink_link => Attach::Reattach,
        Some(a) if a.uplink_port => Attach::Keep,
        Some(_) => Attach::Rebuild,
        None if uplink_link => Attach::Refuse {
            uplink: uplink.to_string(),
        },
        None => Attach::Takeover,
    };
    EnPlan {
        judge: !mine.is_some_and(|a| a.uplink_link),
        attach,
        release: attached
            .iter()
            .filter(|a| a.nic != nic)
            .map(|a| a.nic.clone())
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn att(nic: &str, uplink_port: bool, uplink_link: bool) -> AttachedView {
        AttachedView {
            nic: nic.into(),
            uplink_port,
            uplink_link,
        }
    }

    #[test]
    fn plans() {
        type Row = (&'static str, Vec<AttachedView>, bool, EnPlan);
        let plan = |judge, attach, release: &[&str]| EnPlan {
            judge,
            attach,
            release: release.iter().map(|s| s.to_string()).collect(),
        };
        let refuse = Attach::Refuse {
            uplink: "eth1~".into(),
        };
        let rows: Vec<Row> = vec![
            (
                "nothing attached: judge, then take over",
                vec![],
                false,
                plan(true, Attach::Takeover, &[]),
            ),
            (
                "attached and whole: keep, no verdict",
                vec![att("eth1", true, true)],
                true,
                plan(false, Attach::Keep, &[]),
            ),
            (
                "the uplink link is gone (reboot): judge, re-attach",
                vec![att("eth1", true, false)],
                false,
                plan(true, Attach::Reattach, &[]),
            ),
            (
                "the uplink port is gone: rebuild, no verdict",
                vec![att("eth1", false, true)],
                true,
                plan(false, Attach::Rebuild, &[]),
            ),
            (
                "someone else's half takeover: refuse",
                vec![],
                true,
                plan(true, refuse, &[]),
            ),
            (
                "another NIC holds the IPs now: take it, give the old one back",
                vec![att("eth2", true, true)],
                false,
                plan(true, Attach::Takeover, &["eth2"]),
            ),
            (
                "both attached: keep this one, give the other back",
                vec![att("eth1", true, true), att("eth2", true, true)],
                true,
                plan(false, Attach::Keep, &["eth2"]),
            ),
        ];
        for (what, attached, uplink_link, want) in rows {
            assert_eq!(
                plan_sync("eth1", "eth1~", uplink_link, &attached),
                want,
                "{what}"
            );
        }
    }
}
