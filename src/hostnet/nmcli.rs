//! NetworkManager's side of a takeover, run with `nmcli` (the steps and why: `nm`). Each
//! step is one `nmcli` command with the timeout of every host network command; a failure
//! names the command and what it printed.

use std::path::PathBuf;

use super::nm::{self, PortKind};
use super::{HostNetError, Manager, Paths, detect, err, read, run_command};

/// NetworkManager through `nmcli`.
pub struct NetworkManager {
    /// Off when not in PID 1's network namespace (`in_init_netns`).
    pub enabled: bool,
    pub paths: Paths,
    /// Where NM keeps in-memory profiles (`save no`): tether's profile there says that
    /// tether set NM up for a NIC.
    pub runtime_profiles: PathBuf,
    /// The host port's device kind: a tap on the userspace datapath, generic on the kernel
    /// one.
    pub port: PortKind,
    /// The command (`nmcli`; tests substitute their own).
    pub nmcli: Vec<String>,
    /// Where the NIC's own profile's UUID is kept while it is attached (tether's state
    /// directory: it outlives a restart of tether), to bring that profile up again when the
    /// NIC is given back. None: not kept.
    pub state_dir: Option<PathBuf>,
}

impl NetworkManager {
    /// For the datapath type in use (`system` or `netdev`), keeping what it must remember
    /// in `state_dir`.
    pub fn for_datapath(datapath_type: &str, state_dir: Option<PathBuf>) -> NetworkManager {
        NetworkManager {
            enabled: super::in_init_netns(),
            paths: Paths::default(),
            runtime_profiles: "/run/NetworkManager/system-connections".into(),
            port: if datapath_type == "netdev" {
                PortKind::Tap
            } else {
                PortKind::Generic
            },
            nmcli: vec!["nmcli".into()],
            state_dir,
        }
    }

    /// The file that keeps the NIC's own profile's UUID while `nic` is attached.
    fn own_profile_file(&self, nic: &str) -> Option<PathBuf> {
        self.state_dir
            .as_ref()
            .map(|d| d.join(format!("nm-{nic}.profile")))
    }

    fn remember_own_profile(&self, nic: &str, uuid: &str) -> Result<(), HostNetError> {
        let Some(path) = self.own_profile_file(nic) else {
            return Ok(());
        };
        let tmp = path.with_extension("tmp");
        std::fs::create_dir_all(path.parent().unwrap_or(&path))
            .and_then(|()| std::fs::write(&tmp, format!("{uuid}\n")))
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| {
                err(
                    format!("keep {nic}'s NetworkManager profile in {}", path.display()),
                    e,
                )
            })
    }

    fn own_profile(&self, nic: &str) -> Option<String> {
        nm::kept_uuid(&read(&self.own_profile_file(nic)?)?)
    }

    fn forget_own_profile(&self, nic: &str) {
        if let Some(path) = self.own_profile_file(nic) {
            let _ = std::fs::remove_file(path);
        }
    }

    fn run(&self, args: &[String]) -> Result<String, HostNetError> {
        let mut cmd = self.nmcli.clone();
        cmd.extend(args.iter().cloned());
        run_command(&cmd)
    }

    fn device(&self, dev: &str) -> Result<nm::DeviceInfo, HostNetError> {
        let out = self
            .run(&["-t", "-f", "GENERAL,DHCP4,DHCP6", "device", "show", dev].map(String::from))?;
        Ok(nm::device_info(&out))
    }

    /// tether's profile for `nic` is in NM (NM writes in-memory profiles under /run).
    fn has_profile(&self, nic: &str) -> bool {
        self.runtime_profiles
            .join(format!("{}.nmconnection", nm::profile_name(nic)))
            .exists()
    }

    /// See `controller::HostNetwork`: when NetworkManager manages `nic`, the host port's
    /// profile made from the NIC's, and the NIC unmanaged.
    pub fn before_takeover(&self, nic: &str, ifindex: u32) -> Result<Option<String>, HostNetError> {
        if !self.enabled || detect(&self.paths, nic, ifindex) != Manager::NetworkManager {
            return Ok(None);
        }
        let dev = self.device(nic)?;
        if dev.profile_uuid.is_empty() {
            // NM manages the link but configures nothing on it: nothing to carry over.
            return Ok(None);
        }
        let fields = nm::profile_fields();
        let text = self.run(
            &[
                "-g",
                &fields.join(","),
                "connection",
                "show",
                "uuid",
                &dev.profile_uuid,
            ]
            .map(String::from),
        )?;
        let profile = nm::parse_values(&fields, &text).ok_or_else(|| HostNetError {
            op: format!("read NetworkManager profile {}", dev.profile_uuid),
            detail: format!(
                "{} lines for {} fields: {text:?}",
                text.lines().count(),
                fields.len()
            ),
        })?;
        let metric = read(&self.paths.nm_devices.join(ifindex.to_string()))
            .and_then(|t| nm::effective_metric(&t));
        if self.has_profile(nic) {
            // Left by a run that stopped between here and the takeover.
            self.run(&nm::delete(nic))?;
        }
        self.run(&nm::add_profile(nic, self.port, &profile, &dev, metric))?;
        if let Err(e) = self.remember_own_profile(nic, &dev.profile_uuid) {
            log::warn!("{e} (when {nic} is given back NetworkManager picks its profile itself)");
        }
        self.run(&nm::set_managed(nic, false))?;
        Ok(Some(format!(
            "NetworkManager manages {nic} (profile {:?}): the host port {nic} gets an in-memory \
             profile {} with its settings and DHCP identity (client-id {}, DUID {}, IAID {}), \
             and {nic} is unmanaged while attached",
            dev.connection,
            nm::profile_name(nic),
            dev.client_id.as_deref().unwrap_or("none"),
            dev.duid.as_deref().unwrap_or("none"),
            dev.iaid.as_deref().unwrap_or("none"),
        )))
    }

    /// On every sync while attached, where tether set NM up: the uplink stays unmanaged and
    /// the host port has tether's profile up (after the takeover, and again after anything
    /// took it down).
    pub fn attached(&self, nic: &str, uplink: &str) -> Result<(), HostNetError> {
        if !self.enabled || !self.has_profile(nic) {
            return Ok(());
        }
        let up = self.device(uplink)?;
        if up.state != nm::STATE_UNMANAGED {
            log::warn!(
                "NetworkManager manages {uplink} (state {}): unmanaged again",
                up.state
            );
            self.run(&nm::set_managed(uplink, false))?;
        }
        let host = self.device(nic)?;
        if !nm::needs_up(nic, &host) {
            return Ok(());
        }
        if self.port == PortKind::Generic && host.state == nm::STATE_UNMANAGED {
            self.run(&nm::set_managed(nic, true))?;
        }
        self.run(&nm::up(nic))?;
        log::info!(
            "NetworkManager: the host port {nic} has profile {} up (it was {:?}, state {})",
            nm::profile_name(nic),
            host.connection,
            host.state
        );
        Ok(())
    }

    /// `nic` is the NIC again: tether's profile goes, NM manages the NIC again, and the
    /// NIC's own profile is up on it (it renews the lease, or owns the static settings).
    pub fn released(&self, nic: &str) -> Result<(), HostNetError> {
        if !self.enabled {
            return Ok(());
        }
        if !self.has_profile(nic) {
            // Nothing of tether's in NM (gone with a reboot): nor any UUID kept for it.
            self.forget_own_profile(nic);
            return Ok(());
        }
        self.run(&nm::delete(nic))?;
        self.run(&nm::set_managed(nic, true))?;
        log::info!(
            "NetworkManager: profile {} deleted, {nic} managed again",
            nm::profile_name(nic)
        );
        let Some(own) = self.own_profile(nic) else {
            return Ok(());
        };
        let dev = self.device(nic)?;
        if nm::needs_own_profile(&own, &dev) {
            self.run(&nm::up_own(&own))?;
            log::info!(
                "NetworkManager: {nic}'s own profile {own} up again (NetworkManager was on {:?}, \
                 state {})",
                dev.connection,
                dev.state
            );
        }
        self.forget_own_profile(nic);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
