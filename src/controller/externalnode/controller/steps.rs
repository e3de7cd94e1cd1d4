//! The takeover and the undoing of it (a rollback, or a restore): each a loop over its
//! phase's steps as `record::Phase::steps` lists them, recording each step before it runs
//! and offering a crash point after it; one function per step.

use super::*;

/// What undoing has found so far: the NIC once renamed back (for the move), and every
/// step's errors (undoing goes on after most of them: best effort).
#[derive(Default)]
pub(super) struct Unwinding {
    pub(super) nic_link: Option<Result<Link, EnError>>,
    pub(super) errors: Vec<EnError>,
}

/// What this process made so far in the operation being done or undone: the ports, and
/// their ofports (host, uplink) once known.
#[derive(Default)]
pub(super) struct Made {
    pub(super) ports: Vec<Uuid>,
    pub(super) ofports: Option<(u32, u32)>,
}

/// The test-only crash point (see [`CRASH_ENV`]); compiled out of every build without the
/// `test-hooks` feature, so the shipped binary never reads the variable.
#[cfg(feature = "test-hooks")]
pub(super) fn crash_point(phase: Phase, step: Step) {
    if let Ok(at) = std::env::var(CRASH_ENV) {
        if at == format!("{}-{}", phase.name(), step.name()) {
            log::error!("crash point reached at={at} ({CRASH_ENV}); aborting");
            std::process::abort();
        }
    }
}

#[cfg(not(feature = "test-hooks"))]
pub(super) fn crash_point(_: Phase, _: Step) {}

impl EnController {
    /// Take over `link` (see the module doc of `record` for the steps).
    pub(super) fn takeover(
        &self,
        link: &Link,
        entity: &str,
        namespace: &str,
        ips: &[IpAddr],
    ) -> Result<(), EnError> {
        let nic = link.name.clone();
        let config =
            capture(self.links.as_ref(), link.index).map_err(link_err(format!("capture {nic}")))?;
        if config.mac.is_none() {
            return Err(EnError::NoMac { nic });
        }
        let unmovable = config.unmovable();
        if !unmovable.is_empty() {
            return Err(EnError::Unmovable {
                nic,
                routes: unmovable,
            });
        }
        let uplink = uplink_name(&nic);
        log::info!("externalnode taking over nic={nic} uplink={uplink} entity={entity}");
        let mut rec = Record {
            phase: Phase::Takeover,
            step: Step::Rename,
            nic: nic.clone(),
            uplink,
            config,
        };
        self.write_record(&rec)?;
        // Before the rename, so that the network manager follows it the right way. Not
        // fatal: without it the takeover still works where the manager matches the NIC
        // by name (README "DHCP and network managers").
        match self
            .hostnet
            .before_takeover(&nic, rec.config.ifindex, &rec.uplink)
        {
            Ok(Some(did)) => log::info!("externalnode {did}"),
            Ok(None) => {}
            Err(e) => log::warn!(
                "externalnode nic={nic}: telling the network manager failed: {e}; taking over anyway"
            ),
        }
        let mut made = Made::default();
        if let Err(error) = self.takeover_steps(&mut rec, &mut made, entity, namespace, ips) {
            log::warn!("externalnode takeover failed nic={nic} err={error}; rolling back");
            let rollback = match self.unwind(rec, &made) {
                Ok(()) => Vec::new(),
                Err(EnError::Many(v)) => v,
                Err(e) => vec![e],
            };
            return Err(EnError::RolledBack {
                nic,
                error: Box::new(error),
                rollback,
            });
        }
        // Not fatal: the next sync of the attached NIC records it (`held`).
        if let Err(e) = self.hold_now(&nic) {
            log::warn!("externalnode nic={nic}: {e}");
        }
        self.clear_record()
    }

    /// Run the takeover's steps as `Phase::Takeover.steps()` lists them: before each, the
    /// record names it (the first one `takeover` wrote already); after each, a crash point.
    pub(super) fn takeover_steps(
        &self,
        rec: &mut Record,
        made: &mut Made,
        entity: &str,
        namespace: &str,
        ips: &[IpAddr],
    ) -> Result<(), EnError> {
        for (i, step) in Phase::Takeover.steps().into_iter().enumerate() {
            if i > 0 {
                rec.step = step;
                self.write_record(rec)?;
            }
            match step {
                Step::Rename => self.take_rename(rec)?,
                Step::Ports => self.take_ports(rec, made, entity, namespace, ips)?,
                Step::Move => self.take_move(rec)?,
                Step::Flows => self.take_flows(rec, made)?,
            }
            crash_point(Phase::Takeover, step);
        }
        Ok(())
    }

    /// Rename the NIC to its uplink name.
    pub(super) fn take_rename(&self, rec: &Record) -> Result<(), EnError> {
        let (nic, uplink) = (&rec.nic, &rec.uplink);
        self.links
            .rename(rec.config.ifindex, uplink)
            .map_err(link_err(format!("rename {nic} to {uplink}")))?;
        Ok(())
    }

    /// Create the uplink port (the renamed NIC) and the host port (an internal port with
    /// the NIC's name, MAC and MTU), and learn their ofports.
    pub(super) fn take_ports(
        &self,
        rec: &Record,
        made: &mut Made,
        entity: &str,
        namespace: &str,
        ips: &[IpAddr],
    ) -> Result<(), EnError> {
        let (nic, uplink) = (&rec.nic, &rec.uplink);
        let up_spec = PortSpec::new(uplink, PortKind::System)
            .with_external_ids(BTreeMap::from([("antrea-type".into(), "uplink".into())]));
        let up_uuid = self
            .bridge
            .create_port(&up_spec)
            .map_err(ovs_err(format!("create uplink port {uplink}")))?;
        made.ports.push(up_uuid.clone());
        let uplink_of = self
            .bridge
            .ofport(uplink)
            .map_err(ovs_err(format!("ofport of uplink port {uplink}")))?;
        let mac = rec.config.mac.as_ref().map(crate::mac::format);
        let mut host_spec = PortSpec::new(nic, PortKind::Internal { mac })
            .with_external_ids(host_external_ids(uplink, &up_uuid, entity, namespace, ips));
        host_spec.mtu_request = Some(rec.config.mtu);
        let host_uuid = self
            .bridge
            .create_port(&host_spec)
            .map_err(ovs_err(format!("create host port {nic}")))?;
        made.ports.push(host_uuid.clone());
        let host_of = match self.bridge.ofport(nic) {
            Ok(of) => of,
            Err(e) if self.uplink_has_altname(rec) => {
                // systemd-udevd gave the renamed NIC its old name as an altname, a moment
                // after the rename (the rename step removes one that is there at once), and
                // the kernel refused the host port's device that name. Take it off and
                // have OVS make the device again.
                log::warn!(
                    "externalnode host port {nic} refused ({e}): udev gave {uplink} the \
                     altname {nic}; removing it and creating the host port again"
                );
                self.links
                    .del_altname(rec.config.ifindex, nic)
                    .map_err(link_err(format!("remove altname {nic} of {uplink}")))?;
                self.bridge
                    .delete_ports(std::slice::from_ref(&host_uuid))
                    .map_err(ovs_err(format!("delete the refused host port {nic}")))?;
                made.ports.retain(|p| *p != host_uuid);
                let again = self
                    .bridge
                    .create_port(&host_spec)
                    .map_err(ovs_err(format!("create host port {nic}")))?;
                made.ports.push(again);
                self.bridge
                    .ofport(nic)
                    .map_err(ovs_err(format!("ofport of host port {nic}")))?
            }
            Err(e) => return Err(ovs_err(format!("ofport of host port {nic}"))(e)),
        };
        made.ofports = Some((host_of, uplink_of));
        Ok(())
    }

    /// The uplink (the renamed NIC) carries the NIC's name as an altname.
    fn uplink_has_altname(&self, rec: &Record) -> bool {
        self.links
            .link_by_index(rec.config.ifindex)
            .is_ok_and(|l| l.altnames.contains(&rec.nic))
    }

    /// Give the host port the NIC's sysctls, addresses and routes, give the uplink its
    /// held values (`uplink`: IPv6 off, its link-local address being the host port's; on
    /// the userspace datapath the kernel stack kept off it too), and check that the host
    /// port is the NIC to the outside (`identity`). One plan: a failure undoes all of it,
    /// and the NIC's own values are in the record for a crash.
    pub(super) fn take_move(&self, rec: &Record) -> Result<(), EnError> {
        let (nic, uplink) = (&rec.nic, &rec.uplink);
        let ifindex = rec.config.ifindex;
        let links = self.links.as_ref();
        let host = links
            .link_by_name(nic)
            .map_err(link_err(format!("find host port netdev {nic}")))?;
        if host.index == ifindex {
            return Err(EnError::Link {
                op: format!("find host port netdev {nic}"),
                error: LinkError::Exists {
                    what: format!("{nic} is still the NIC (index {ifindex})"),
                    errno: crate::netlink::errno::EEXIST,
                },
            });
        }
        let nic_link = links
            .link_by_index(ifindex)
            .map_err(link_err(format!("find uplink {uplink}")))?;
        // The host port is a new device with the namespace's default sysctls: give it the
        // NIC's first (IPv6 enabled before its addresses come), then the addresses.
        let current = read_sysctls(links, &host.name)
            .map_err(link_err(format!("read the sysctls of host port {nic}")))?;
        let mut plan = plan_sysctls(&rec.config, &host, &current);
        plan.steps
            .extend(plan_move(&rec.config, Some(&nic_link), &host).steps);
        let uplink_now = read_sysctls(links, &nic_link.name)
            .map_err(link_err(format!("read the sysctls of uplink {uplink}")))?;
        plan.steps.extend(
            uplink::plan_held_values(&nic_link, &uplink_now, &self.cfg.datapath_type).steps,
        );
        apply(links, &plan).map_err(|error| EnError::Move {
            nic: nic.clone(),
            error,
        })?;
        self.verify_identity(rec)
    }

    /// The uplink pair's flows, with the ofports the ports step learnt.
    pub(super) fn take_flows(&self, rec: &Record, made: &Made) -> Result<(), EnError> {
        let (nic, uplink) = (&rec.nic, &rec.uplink);
        let Some((host_of, uplink_of)) = made.ofports else {
            return self.install_pair(nic, uplink);
        };
        self.flows
            .apply(nic_owner(nic), uplink_pair_flows(host_of, uplink_of))
            .map_err(|error| EnError::Flows {
                op: format!("uplink flows {nic}<->{uplink}"),
                error,
            })
    }

    /// Give an attached NIC back: capture the host port's configuration (that is where
    /// the addresses live now, including any added meanwhile), record it, then unwind.
    pub(super) fn restore(&self, a: &Attached) -> Result<(), EnError> {
        let links = self.links.as_ref();
        let nic_link = match links.link_by_name(&a.uplink) {
            Ok(l) => l,
            Err(e) if e.is_not_found() => {
                // Antrea #5111: the NIC is back already; only our ports and flows remain.
                log::warn!(
                    "externalnode uplink {} is gone; deleting the ports of {} only",
                    a.uplink,
                    a.nic
                );
                self.drop_ports_and_flows(a)?;
                self.release_host_network(&a.nic);
                return self.drop_held(&a.nic);
            }
            Err(e) => return Err(link_err(format!("find uplink {}", a.uplink))(e)),
        };
        let host = links
            .link_by_name(&a.nic)
            .map_err(link_err(format!("find host port netdev {}", a.nic)))?;
        let mut config =
            capture(links, host.index).map_err(link_err(format!("capture {}", a.nic)))?;
        config.ifindex = nic_link.index;
        config.name = a.nic.clone();
        for r in config.unmovable() {
            log::warn!(
                "externalnode cannot move a route back to nic={}: {r}; it goes with the host port",
                a.nic
            );
        }
        log::info!("externalnode restoring nic={} uplink={}", a.nic, a.uplink);
        let rec = Record {
            phase: Phase::Restore,
            step: Step::Flows,
            nic: a.nic.clone(),
            uplink: a.uplink.clone(),
            config,
        };
        self.write_record(&rec)?;
        let made = Made {
            ports: [Some(a.host.clone()), a.uplink_port.clone()]
                .into_iter()
                .flatten()
                .collect(),
            ofports: None,
        };
        self.unwind(rec, &made)
    }

    pub(super) fn release_host_network(&self, nic: &str) {
        if let Err(e) = self.hostnet.released(nic) {
            log::warn!("externalnode nic={nic}: giving the NIC back to the network manager: {e}");
        }
    }

    pub(super) fn drop_ports_and_flows(&self, a: &Attached) -> Result<(), EnError> {
        self.flows
            .remove(nic_owner(&a.nic))
            .map_err(|error| EnError::Flows {
                op: format!("remove uplink flows of {}", a.nic),
                error,
            })?;
        let ports: Vec<Uuid> = [Some(a.host.clone()), a.uplink_port.clone()]
            .into_iter()
            .flatten()
            .collect();
        self.bridge
            .delete_ports(&ports)
            .map_err(ovs_err(format!("delete ports of {}", a.nic)))
    }

    /// Make the NIC of `rec` a plain NIC again with `rec.config`: remove the flows, delete
    /// the ports, wait for the host netdev to go, rename the NIC back, re-add its
    /// addresses and routes. Every step is idempotent, so this both rolls back any prefix
    /// of a takeover and finishes any prefix of a restore. All steps are tried; the record
    /// is removed only when all succeeded (a later sync or start retries otherwise).
    pub(super) fn unwind(&self, mut rec: Record, made: &Made) -> Result<(), EnError> {
        let phase = rec.phase;
        let restoring = phase == Phase::Restore;
        let mut u = Unwinding::default();
        // Undoing runs the restore's steps whichever phase it undoes; only a restore
        // records them (a rolled-back takeover keeps its record until the end).
        for step in Phase::Restore.steps() {
            if restoring {
                rec.step = step;
                if let Err(e) = self.write_record(&rec) {
                    u.errors.push(e);
                }
            } else {
                self.set_step(format!("rollback:{}", step.name()));
            }
            match step {
                Step::Flows => self.undo_flows(&rec, &mut u),
                Step::Ports => {
                    // Never rename a NIC the datapath still holds (docs/datapath.md): it
                    // would keep the VM's addresses while OVS takes its frames. The
                    // record stays; retried.
                    if !self.undo_ports(&rec, made, &mut u) {
                        return many(u.errors);
                    }
                }
                Step::Rename => self.undo_rename(&rec, &mut u),
                Step::Move => self.undo_move(&rec, &mut u),
            }
            if restoring {
                crash_point(phase, step);
            }
        }
        if u.errors.is_empty() {
            // The NIC is itself again: the network manager may have it back. (Not while
            // any step failed: the uplink may still be called <nic>~, and must stay
            // unmanaged until it is not.)
            self.release_host_network(&rec.nic);
            self.clear_record()?;
            self.drop_held(&rec.nic)?;
            log::info!(
                "externalnode {} done nic={}",
                match phase {
                    Phase::Takeover => "rollback",
                    Phase::Restore => "restore",
                },
                rec.nic
            );
        }
        many(u.errors)
    }

    pub(super) fn undo_flows(&self, rec: &Record, u: &mut Unwinding) {
        if let Err(error) = self.flows.remove(nic_owner(&rec.nic)) {
            u.errors.push(EnError::Flows {
                op: format!("remove uplink flows of {}", rec.nic),
                error,
            });
        }
    }

    /// Delete the host and uplink ports (those made now, and those OVSDB shows); false
    /// when the datapath still holds the NIC, and undoing must stop here.
    pub(super) fn undo_ports(&self, rec: &Record, made: &Made, u: &mut Unwinding) -> bool {
        let (nic, uplink) = (&rec.nic, &rec.uplink);
        let ifs = self.bridge.interfaces();
        let mut ports = made.ports.clone();
        for (name, role) in [(nic, Role::Host), (uplink, Role::Uplink)] {
            if let Some(i) = ifs.get(name).filter(|i| i.role == role) {
                if !ports.contains(i.uuid()) {
                    ports.push(i.uuid().clone());
                }
            }
        }
        self.delete_applied(&ports, nic, uplink, &mut u.errors);
        if let Err(e) = self.wait_host_netdev_gone(nic, rec.config.ifindex) {
            u.errors.push(e);
        }
        match self.wait_nic_released(rec.config.ifindex) {
            Ok(()) => true,
            Err(e) => {
                u.errors.push(e);
                false
            }
        }
    }

    /// Give the NIC its own name back (found by index, else by either name).
    pub(super) fn undo_rename(&self, rec: &Record, u: &mut Unwinding) {
        let (nic, uplink) = (&rec.nic, &rec.uplink);
        let links = self.links.as_ref();
        let found = match links.link_by_index(rec.config.ifindex) {
            Ok(l) if l.name == *nic || l.name == *uplink => Ok(l),
            _ => links
                .link_by_name(uplink)
                .or_else(|_| links.link_by_name(nic)),
        };
        u.nic_link = Some(match found {
            Ok(l) if l.name != *nic => links
                .rename(l.index, nic)
                .map_err(link_err(format!("rename {} back to {nic}", l.name))),
            other => other.map_err(link_err(format!("find {nic} (or {uplink})"))),
        });
    }

    /// Put the NIC's captured sysctls, addresses and routes back on it.
    pub(super) fn undo_move(&self, rec: &Record, u: &mut Unwinding) {
        let links = self.links.as_ref();
        match u.nic_link.take() {
            Some(Ok(l)) => {
                // The NIC kept its own sysctls while attached; these steps only undo what
                // was changed on the host port since (its values go back with the NIC).
                let mut plan = match read_sysctls(links, &l.name) {
                    Ok(current) => plan_sysctls(&rec.config, &l, &current),
                    Err(e) => {
                        log::warn!("externalnode cannot read the sysctls of {}: {e}", l.name);
                        crate::netlink::MovePlan::default()
                    }
                };
                plan.steps.extend(plan_move(&rec.config, None, &l).steps);
                if let Err(errs) = apply_best_effort(links, &plan) {
                    u.errors.push(EnError::Restore {
                        nic: rec.nic.clone(),
                        errors: errs,
                    });
                }
            }
            Some(Err(e)) => u.errors.push(e),
            None => {}
        }
    }
}
