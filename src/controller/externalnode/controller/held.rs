//! The held configuration (`record::Held`): what an attached NIC's host port carries, kept
//! in OVSDB (Bridge external_ids `tether-held:<nic>`) for as long as the NIC is attached.
//!
//! A host port the kernel re-created — the openvswitch module reloaded, as Debian's
//! `ovs-ctl force-reload-kmod` does — is a new device (a new ifindex) with the namespace's
//! default sysctls and nothing else: the held configuration goes back on it. The tool that
//! reloaded the module may put part of it back itself a moment later (ovs-ctl flushes the
//! device, then re-adds its addresses and main-table IPv4 routes only; deleting the address
//! takes every route through it, of every table, with it), so for [`PUT_BACK_WINDOW`] after
//! that — and for [`PUT_BACK_QUIET`] after the last look that had something to put back —
//! the held configuration stays what the host port must carry, and the ExternalNode is
//! looked at again every [`RECHECK`] (the worker asks the controller, `recheck_after`). Otherwise every sync of an attached NIC records what the
//! host port carries now: a DHCP renewal or an operator's route is what a later put-back
//! restores.

use std::time::{Duration, Instant};

use super::*;
use crate::controller::externalnode::record::Held;
use crate::netlink::{Lifetime, NicConfig};

/// How long after a re-created host port was found the held configuration stays
/// authoritative (ovs-ctl's restore comes after its flows are back: seconds, more on a
/// slow VM; under the kernel tier's emulation it came after more than 30 s).
pub(super) const PUT_BACK_WINDOW: Duration = Duration::from_secs(60);

/// ... and how long after the last look that had to put something back (or failed to).
pub(super) const PUT_BACK_QUIET: Duration = Duration::from_secs(30);

/// How often the ExternalNode is synced again during that window.
pub(super) const RECHECK: Duration = Duration::from_secs(2);

/// `c` without what changes by itself from one look to the next: the device's index (a
/// re-created port has a new one) and the remaining lifetimes of addresses and routes
/// (only whether an address expires, and whether it is deprecated, are kept).
fn comparable(c: &NicConfig) -> NicConfig {
    let mut c = c.clone();
    c.ifindex = 0;
    for a in &mut c.addrs {
        a.ifindex = 0;
        if !a.lifetime.is_forever() {
            a.lifetime = Lifetime {
                valid: 1,
                preferred: u32::from(a.lifetime.preferred > 0),
            };
        }
    }
    for r in &mut c.routes {
        r.expires = None;
    }
    c
}

impl EnController {
    /// The held configuration of `nic`: OVSDB's if it has a readable one, else the state
    /// directory's (an unreadable one is logged and treated as none: the next sync of an
    /// attached NIC writes it anew).
    pub(super) fn read_held(&self, nic: &str) -> Option<Held> {
        self.read_held_ovsdb(nic)
            .or_else(|| self.read_held_file(nic))
    }

    fn read_held_ovsdb(&self, nic: &str) -> Option<Held> {
        let raw = match self.bridge.bridge_external_id(&Held::key(nic)) {
            Ok(raw) => raw?,
            Err(e) => {
                log::warn!("externalnode cannot read the held configuration of {nic}: {e}");
                return None;
            }
        };
        match Held::from_json(nic, &raw) {
            Ok(h) => Some(h),
            Err(e) => {
                log::warn!(
                    "externalnode Bridge external_ids:{} is unreadable ({e}); recording it again",
                    Held::key(nic)
                );
                None
            }
        }
    }

    fn read_held_file(&self, nic: &str) -> Option<Held> {
        match self.held_files.as_ref()?.read(nic) {
            Ok(h) => h,
            Err(e) => {
                log::warn!("externalnode held configuration of {nic} is unreadable: {e}");
                None
            }
        }
    }

    /// Record `held` in OVSDB and in the state directory (both are tried; the first
    /// failure is the error).
    pub(super) fn write_held(&self, held: &Held) -> Result<(), EnError> {
        let db = self
            .bridge
            .set_bridge_external_id(&Held::key(&held.nic), Some(&held.to_json()))
            .map_err(ovs_err(format!(
                "record the held configuration of {}",
                held.nic
            )));
        let file = self.write_held_file(held);
        db.and(file)
    }

    fn write_held_file(&self, held: &Held) -> Result<(), EnError> {
        match &self.held_files {
            Some(f) => f.write(held).map_err(|detail| EnError::State {
                op: format!("keep the held configuration of {}", held.nic),
                detail,
            }),
            None => Ok(()),
        }
    }

    /// The NIC is itself again: nothing is held for it any more.
    pub(super) fn drop_held(&self, nic: &str) -> Result<(), EnError> {
        let mut window = lock(&self.put_back);
        if window.as_ref().is_some_and(|(n, _)| n == nic) {
            *window = None;
        }
        drop(window);
        // The file last: it is what gives the NIC back if OVS loses its copy.
        self.bridge
            .set_bridge_external_id(&Held::key(nic), None)
            .map_err(ovs_err(format!("remove the held configuration of {nic}")))?;
        self.drop_held_file(nic)
    }

    fn drop_held_file(&self, nic: &str) -> Result<(), EnError> {
        match &self.held_files {
            Some(f) => f.remove(nic).map_err(|detail| EnError::State {
                op: format!("remove the held configuration of {nic}"),
                detail,
            }),
            None => Ok(()),
        }
    }

    /// After a takeover: what the host port carries now is what is held.
    pub(super) fn hold_now(&self, nic: &str) -> Result<(), EnError> {
        let links = self.links.as_ref();
        let host = links
            .link_by_name(nic)
            .map_err(link_err(format!("find host port netdev {nic}")))?;
        let mut config = capture(links, host.index).map_err(link_err(format!("capture {nic}")))?;
        config.name = nic.to_string();
        self.write_held(&Held {
            nic: nic.to_string(),
            config,
        })
    }

    /// On a sync of an attached NIC: put the held configuration back on a host port that
    /// is a new device (and keep doing so during the window after), else record what the
    /// host port carries now.
    pub(super) fn keep_held(&self, nic: &str) -> Result<(), EnError> {
        let links = self.links.as_ref();
        let host = match links.link_by_name(nic) {
            Ok(l) => l,
            // ovs-vswitchd has not (re-)created it yet: its port row changes when it does,
            // which syncs the ExternalNode again.
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(link_err(format!("find host port netdev {nic}"))(e)),
        };
        let held = self.read_held(nic);
        let now = Instant::now();
        let mut window = lock(&self.put_back);
        let recreated = held
            .as_ref()
            .is_some_and(|h| h.config.ifindex != host.index);
        let within = window
            .as_ref()
            .is_some_and(|(n, until)| n == nic && now < *until);
        match held {
            Some(mut h) if recreated || within => {
                if recreated {
                    log::warn!(
                        "externalnode host port {nic} is a new device (index {} now {}): \
                         putting the VM's addresses, routes and settings back",
                        h.config.ifindex,
                        host.index
                    );
                    *window = Some((nic.to_string(), now + PUT_BACK_WINDOW));
                }
                drop(window);
                let current = read_sysctls(links, nic)
                    .map_err(link_err(format!("read the sysctls of host port {nic}")))?;
                let mut plan = plan_sysctls(&h.config, &host, &current);
                plan.steps.extend(plan_move(&h.config, None, &host).steps);
                let put = apply_best_effort(links, &plan);
                let busy = match &put {
                    Ok(applied) if applied.changed.is_empty() => false,
                    Ok(applied) => {
                        log::info!(
                            "externalnode host port {nic}: {} changes put back",
                            applied.changed.len()
                        );
                        true
                    }
                    Err(_) => true,
                };
                if busy {
                    // Someone is still changing it: keep watching for a while yet.
                    let mut window = lock(&self.put_back);
                    if let Some((n, until)) = window.as_mut() {
                        if n == nic {
                            *until = (*until).max(Instant::now() + PUT_BACK_QUIET);
                        }
                    }
                }
                if recreated {
                    h.config.ifindex = host.index;
                    self.write_held(&h)?;
                }
                put.map(|_| ()).map_err(|errors| EnError::Restore {
                    nic: nic.to_string(),
                    errors,
                })
            }
            held => {
                *window = None;
                drop(window);
                let mut live =
                    capture(links, host.index).map_err(link_err(format!("capture {nic}")))?;
                live.name = nic.to_string();
                let same = held
                    .as_ref()
                    .is_some_and(|h| comparable(&h.config) == comparable(&live));
                let held = Held {
                    nic: nic.to_string(),
                    config: live,
                };
                if !same {
                    self.write_held(&held)?;
                } else if self
                    .read_held_file(nic)
                    .is_none_or(|f| comparable(&f.config) != comparable(&held.config))
                {
                    // OVSDB has it, the state directory not (yet): a NIC taken over
                    // before the state directory, or a write that failed.
                    self.write_held_file(&held)?;
                }
                Ok(())
            }
        }
    }

    /// When no link holds the ExternalNode's IPs: the host port of an attached NIC whose
    /// held configuration has them (a re-created host port, still empty), and those IPs.
    pub(super) fn held_host_for(
        &self,
        attached: &[Attached],
        wanted: &[IpAddr],
    ) -> Option<(Link, Vec<IpAddr>)> {
        attached.iter().find_map(|a| {
            let held = self.read_held(&a.nic)?;
            let ips: Vec<IpAddr> = wanted
                .iter()
                .filter(|ip| held.config.addrs.iter().any(|x| x.local == **ip))
                .copied()
                .collect();
            if ips.is_empty() {
                return None;
            }
            let link = self.links.link_by_name(&a.nic).ok()?;
            Some((link, ips))
        })
    }

    /// When the worker should sync the ExternalNode again by itself: during the window
    /// after a put-back.
    pub fn recheck_after(&self) -> Option<Duration> {
        lock(&self.put_back)
            .as_ref()
            .filter(|(_, until)| Instant::now() < *until)
            .map(|_| RECHECK)
    }
}
