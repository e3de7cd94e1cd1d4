//! Waiting for the switch and the kernel to settle around a takeover or a release, and
//! checking the host port's identity (`identity`) once they have.

use super::*;

/// How long a release waits for ovs-vswitchd to apply the delete of the ports.
pub(super) const DELETE_APPLIED_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long it then waits for the NIC's master to go (after `dpctl/del-if`): 50 x 100 ms.
pub(super) const RELEASE_TRIES: u32 = 50;

/// How long the identity check after a takeover waits for ovs-vswitchd: 20 x 100 ms.
pub(super) const IDENTITY_TRIES: u32 = 20;

pub(super) const RELEASE_POLL: std::time::Duration = std::time::Duration::from_millis(100);

impl EnController {
    /// "verified", or what does not match now (the uplink's MAC and MTU are the NIC's).
    pub(super) fn identity_now(&self, a: &Attached) -> String {
        let Ok(up) = self.links.link_by_name(&a.uplink) else {
            return format!("uplink {} not found", a.uplink);
        };
        let Some(mac) = up.mac else {
            return format!("uplink {} has no MAC", a.uplink);
        };
        let m = self.identity_mismatches(&a.nic, &a.uplink, mac, up.mtu, Some(up.index));
        if m.is_empty() {
            "verified".into()
        } else {
            m.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        }
    }

    /// The identity facts of an attached NIC (see `identity`), read now.
    pub(super) fn identity_mismatches(
        &self,
        nic: &str,
        uplink: &str,
        mac: [u8; 6],
        mtu: u32,
        ifindex: Option<u32>,
    ) -> Vec<identity::Mismatch> {
        let links = self.links.as_ref();
        let ifs = self.bridge.interfaces();
        let up_link = match ifindex {
            Some(i) => links.link_by_index(i).ok(),
            None => links.link_by_name(uplink).ok(),
        };
        let facts = identity::Facts {
            mac,
            mtu,
            host_kernel_mac: links.link_by_name(nic).ok().and_then(|l| l.mac),
            host: ifs.get(nic).map(|i| &i.port),
            uplink: ifs.get(uplink).map(|i| &i.port),
            kernel_datapath: self.cfg.datapath_type != "netdev",
            uplink_master: up_link.and_then(|l| verdict::master_name(links, &l)),
        };
        identity::mismatches(&facts)
    }

    /// After the move: the host port must be the NIC's stand-in (MAC in the kernel and in
    /// OVSDB, the MTU OVS reports, no interface error, on the kernel datapath the uplink
    /// enslaved to ovs-system). ovs-vswitchd fills `mac_in_use` and `mtu` a moment after
    /// the port appears: waited for (2 s). A mismatch rolls the takeover back.
    pub(super) fn verify_identity(&self, rec: &Record) -> Result<(), EnError> {
        let mac = rec.config.mac.ok_or_else(|| EnError::NoMac {
            nic: rec.nic.clone(),
        })?;
        let mut tries = 0;
        loop {
            let m = self.identity_mismatches(
                &rec.nic,
                &rec.uplink,
                mac,
                rec.config.mtu,
                Some(rec.config.ifindex),
            );
            if m.is_empty() {
                log::info!(
                    "externalnode identity verified nic={} mac={} mtu={}",
                    rec.nic,
                    crate::mac::format(&mac),
                    rec.config.mtu
                );
                return Ok(());
            }
            tries += 1;
            if tries > IDENTITY_TRIES {
                return Err(EnError::Identity {
                    nic: rec.nic.clone(),
                    mismatches: m.iter().map(ToString::to_string).collect(),
                });
            }
            self.links.pause(RELEASE_POLL);
        }
    }

    /// Delete the host and uplink ports and wait until ovs-vswitchd has applied it (a
    /// plain commit returns before the switch has taken the NIC out of the datapath). A
    /// wait that times out is logged, not an error: what matters next is whether the NIC
    /// is still held, which `wait_nic_released` checks.
    pub(super) fn delete_applied(
        &self,
        ports: &[Uuid],
        nic: &str,
        uplink: &str,
        errors: &mut Vec<EnError>,
    ) {
        if ports.is_empty() {
            return;
        }
        let started = std::time::Instant::now();
        match self.bridge.delete_ports_applied(ports, DELETE_APPLIED_WAIT) {
            Ok(()) => {
                let took = started.elapsed();
                if took >= std::time::Duration::from_millis(500) {
                    log::info!(
                        "externalnode ovs-vswitchd applied the delete of {nic} and {uplink} after {}ms",
                        took.as_millis()
                    );
                }
            }
            Err(OvsdbError::Timeout { .. }) => log::warn!(
                "externalnode ovs-vswitchd has not applied the delete of {nic} and {uplink} within {}s (is it running?); checking the NIC itself",
                DELETE_APPLIED_WAIT.as_secs()
            ),
            Err(e) => errors.push(ovs_err(format!("delete ports {nic} and {uplink}"))(e)),
        }
    }

    /// The NIC (by ifindex) must have no master before it is renamed back: on the kernel
    /// datapath a port of `ovs-system` is enslaved to it (vport-netdev). If it still is,
    /// or (kernel datapath) `dpctl/show` still lists it, remove it with `dpctl/del-if`
    /// and wait (bounded) for the master to go.
    pub(super) fn wait_nic_released(&self, ifindex: u32) -> Result<(), EnError> {
        let links = self.links.as_ref();
        let link = match links.link_by_index(ifindex) {
            Ok(l) => l,
            // Nothing to rename; the rename step reports what is missing.
            Err(_) => return Ok(()),
        };
        let kernel = self.cfg.datapath_type != "netdev";
        if link.master.is_none() && !kernel {
            return Ok(());
        }
        match self.datapath.delete_interface(&link.name) {
            Ok(true) => log::warn!(
                "externalnode {} was still a datapath port after its OVS port was deleted; removed it with dpctl/del-if",
                link.name
            ),
            Ok(false) => {}
            // With no master the kernel holds nothing: vswitchd not answering is fine.
            Err(e) if link.master.is_none() => {
                log::debug!("externalnode dpctl/show for {} failed: {e}", link.name);
            }
            Err(e) => log::warn!(
                "externalnode {} still has a master; dpctl/del-if failed: {e}",
                link.name
            ),
        }
        // Counted, not timed: `Links::pause` is the clock (fakes do not sleep).
        let mut tries = 0;
        loop {
            let l = links
                .link_by_index(ifindex)
                .map_err(link_err(format!("look up {}", link.name)))?;
            let Some(m) = l.master else {
                return Ok(());
            };
            tries += 1;
            if tries > RELEASE_TRIES {
                let master =
                    verdict::master_name(links, &l).unwrap_or_else(|| format!("index {m}"));
                return Err(EnError::Held {
                    nic: l.name.clone(),
                    master,
                });
            }
            links.pause(RELEASE_POLL);
        }
    }

    /// Wait until the host port's netdev (called like the NIC) is gone; if the datapath
    /// keeps it, remove it through ovs-vswitchd and wait again. A link with that name
    /// that IS the NIC (same ifindex) is not the host port.
    pub(super) fn wait_host_netdev_gone(&self, nic: &str, ifindex: u32) -> Result<(), EnError> {
        let links = self.links.as_ref();
        match links.link_by_name(nic) {
            Ok(l) if l.index != ifindex => {}
            Ok(_) => return Ok(()),
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(link_err(format!("look up {nic}"))(e)),
        }
        match links.wait_gone(nic) {
            Ok(()) => return Ok(()),
            Err(LinkError::Timeout { .. }) => {}
            Err(e) => return Err(link_err(format!("wait for {nic} to go"))(e)),
        }
        log::warn!(
            "externalnode host netdev {nic} outlived its port; removing it via ovs-vswitchd"
        );
        self.datapath
            .delete_interface(nic)
            .map_err(|e| EnError::Datapath {
                nic: nic.to_string(),
                error: e.to_string(),
            })?;
        links
            .wait_gone(nic)
            .map_err(link_err(format!("wait for {nic} to go after dpctl/del-if")))
    }
}
