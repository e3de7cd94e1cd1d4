//! The per-device sysctls a takeover carries from the NIC to the host port
//! (`net.ipv{4,6}.conf.<dev>.<key>`). A new device — the host internal port — starts with
//! the namespace's `default` values, not the NIC's: on a hardened image with
//! `net.ipv6.conf.default.disable_ipv6=1` the NIC's IPv6 address cannot be added to it
//! (EACCES, `ipv6_add_addr` in net/ipv6/addrconf.c; Antrea #5409). The same keys keep the
//! kernel stack off the uplink while the datapath holds it (`controller::externalnode::
//! uplink`). Owns the key list, the `/proc/sys` paths and the one real reader/writer;
//! netlink itself has no way to set IPv6 device configuration, so these are files. The
//! namespace-wide `all` values are only ever read ([`read_all`]): tether changes no global
//! setting.

use std::fmt;
use std::path::PathBuf;

use super::{LinkError, valid_ifname};

/// One per-device sysctl carried over, in the order they are applied: IPv6 enabled before
/// its addresses come, DAD and RA behaviour before the addresses, then IPv4 filtering and
/// ARP behaviour, forwarding last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DevSysctl {
    Ipv6DisableIpv6,
    Ipv6AcceptDad,
    Ipv6AcceptRa,
    Ipv6Autoconf,
    Ipv4RpFilter,
    Ipv4ArpIgnore,
    Ipv4ArpAnnounce,
    Ipv4Forwarding,
    Ipv6Forwarding,
}

impl DevSysctl {
    pub const ALL: [DevSysctl; 9] = [
        DevSysctl::Ipv6DisableIpv6,
        DevSysctl::Ipv6AcceptDad,
        DevSysctl::Ipv6AcceptRa,
        DevSysctl::Ipv6Autoconf,
        DevSysctl::Ipv4RpFilter,
        DevSysctl::Ipv4ArpIgnore,
        DevSysctl::Ipv4ArpAnnounce,
        DevSysctl::Ipv4Forwarding,
        DevSysctl::Ipv6Forwarding,
    ];

    /// `ipv4` or `ipv6`.
    pub fn family(self) -> &'static str {
        match self {
            DevSysctl::Ipv6DisableIpv6
            | DevSysctl::Ipv6AcceptDad
            | DevSysctl::Ipv6AcceptRa
            | DevSysctl::Ipv6Autoconf
            | DevSysctl::Ipv6Forwarding => "ipv6",
            DevSysctl::Ipv4RpFilter
            | DevSysctl::Ipv4ArpIgnore
            | DevSysctl::Ipv4ArpAnnounce
            | DevSysctl::Ipv4Forwarding => "ipv4",
        }
    }

    /// The file name under `conf/<dev>/`.
    pub fn key(self) -> &'static str {
        match self {
            DevSysctl::Ipv6DisableIpv6 => "disable_ipv6",
            DevSysctl::Ipv6AcceptDad => "accept_dad",
            DevSysctl::Ipv6AcceptRa => "accept_ra",
            DevSysctl::Ipv6Autoconf => "autoconf",
            DevSysctl::Ipv4RpFilter => "rp_filter",
            DevSysctl::Ipv4ArpIgnore => "arp_ignore",
            DevSysctl::Ipv4ArpAnnounce => "arp_announce",
            DevSysctl::Ipv4Forwarding | DevSysctl::Ipv6Forwarding => "forwarding",
        }
    }

    /// `ipv6.disable_ipv6`: the name used in the step record.
    pub fn id(self) -> String {
        format!("{}.{}", self.family(), self.key())
    }

    pub fn from_id(id: &str) -> Option<DevSysctl> {
        DevSysctl::ALL.into_iter().find(|k| k.id() == id)
    }

    /// `/proc/sys/net/<family>/conf/<dev>/<key>`; refused for a name that is not one
    /// interface name (it must not walk the tree).
    pub fn path(self, dev: &str) -> Result<PathBuf, LinkError> {
        if !valid_ifname(dev) || dev == "all" || dev == "default" {
            return Err(LinkError::Invalid {
                what: format!("sysctl {} of {dev:?}", self.id()),
                detail: "not an interface name".into(),
            });
        }
        Ok(PathBuf::from(format!(
            "/proc/sys/net/{}/conf/{dev}/{}",
            self.family(),
            self.key()
        )))
    }
}

impl DevSysctl {
    /// `/proc/sys/net/<family>/conf/all/<key>`: the namespace-wide value. For some keys
    /// the kernel uses the larger of it and the device's own (`IN_DEV_MAXCONF` in
    /// include/linux/inetdevice.h: `rp_filter`, `arp_ignore`), so a device's value alone
    /// does not say what the kernel does.
    pub fn all_path(self) -> PathBuf {
        PathBuf::from(format!(
            "/proc/sys/net/{}/conf/all/{}",
            self.family(),
            self.key()
        ))
    }
}

impl fmt::Display for DevSysctl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "net.{}.conf.*.{}", self.family(), self.key())
    }
}

/// The value of `key` for `dev` from `/proc/sys`; None when the file does not exist (IPv6
/// off in the kernel, or a key this kernel lacks).
pub fn read(dev: &str, key: DevSysctl) -> Result<Option<String>, LinkError> {
    read_file(&key.path(dev)?)
}

fn read_file(path: &std::path::Path) -> Result<Option<String>, LinkError> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s.trim().to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(path, "read", &e)),
    }
}

/// The namespace-wide (`all`) value of `key`; None when the kernel has no such file.
pub fn read_all(key: DevSysctl) -> Result<Option<String>, LinkError> {
    read_file(&key.all_path())
}

/// Write `value` to `key` of `dev`.
pub fn write(dev: &str, key: DevSysctl, value: &str) -> Result<(), LinkError> {
    let path = key.path(dev)?;
    std::fs::write(&path, value).map_err(|e| io_error(&path, "write", &e))
}

fn io_error(path: &std::path::Path, op: &str, e: &std::io::Error) -> LinkError {
    let what = format!("{op} {}", path.display());
    match e.raw_os_error() {
        // A read-only /proc/sys (ProtectKernelTunables= without the unit's
        // ReadWritePaths= for conf/) is EROFS: say where to look.
        Some(30) => LinkError::Invalid {
            what,
            detail: "read-only file system: the service's sandbox must allow writing \
                     /proc/sys/net/ipv4/conf and /proc/sys/net/ipv6/conf"
                .into(),
        },
        Some(n) => LinkError::from_errno(n, what),
        None => LinkError::Netlink {
            what,
            detail: e.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_paths_and_refusals() {
        assert_eq!(DevSysctl::Ipv6DisableIpv6.id(), "ipv6.disable_ipv6");
        assert_eq!(DevSysctl::Ipv4Forwarding.id(), "ipv4.forwarding");
        assert_eq!(DevSysctl::Ipv6Forwarding.id(), "ipv6.forwarding");
        for k in DevSysctl::ALL {
            assert_eq!(DevSysctl::from_id(&k.id()), Some(k));
        }
        assert_eq!(DevSysctl::from_id("ipv6.mtu"), None);
        assert_eq!(
            DevSysctl::Ipv4ArpIgnore.path("eth1").unwrap(),
            PathBuf::from("/proc/sys/net/ipv4/conf/eth1/arp_ignore")
        );
        assert_eq!(
            DevSysctl::Ipv6AcceptRa.path("eth0.10").unwrap(),
            PathBuf::from("/proc/sys/net/ipv6/conf/eth0.10/accept_ra")
        );
        assert_eq!(
            DevSysctl::Ipv4RpFilter.all_path(),
            PathBuf::from("/proc/sys/net/ipv4/conf/all/rp_filter")
        );
        for bad in ["", "..", ".", "a/b", "all", "default", "sixteen-bytes-xx"] {
            assert!(DevSysctl::Ipv4RpFilter.path(bad).is_err(), "{bad:?}");
        }
    }
}
