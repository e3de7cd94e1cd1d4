//! Host networking over rtnetlink: links, addresses and routes of the namespace the daemon
//! runs in, and moving a NIC's configuration to another link and back.
//!
//! What it owns:
//! * [`Links`], the narrow, object-safe trait the ExternalNode controller consumes, with the
//!   composite operations built on it ([`Links::rename`], [`Links::wait_gone`],
//!   [`Links::link_holding`]) so a recording fake exercises them too;
//! * [`Rtnl`] (`rtnl.rs`), the real backend and the only file in the crate that imports
//!   neli; every request asks for an ACK and checks it, and errno maps to [`LinkError`];
//! * value types ([`Link`], [`Addr`], [`Route`]) in `types.rs`;
//! * the pure move plan and its apply/rollback step in `moving.rs` ([`capture`],
//!   [`plan_move`], [`apply`], [`apply_best_effort`]);
//! * the uplink naming rule in `naming.rs` ([`uplink_name`]);
//! * the per-device sysctls a takeover carries over, in `sysctl.rs` ([`DevSysctl`]): files
//!   under `/proc/sys/net/ipv{4,6}/conf/`, as netlink cannot set IPv6 device settings;
//! * [`FakeLinks`] (`fake.rs`), an in-memory kernel model that records calls and injects
//!   failures, for this module's tests and the controller's.
//!
//! What it does not own: OVS ports (the `ovsdb` module), deciding *when* to take a NIC over
//! (the controller), neighbours, policy rules (they name links by name, so they follow the
//! name from the NIC to the host port and back by themselves), or links in other
//! namespaces.
//!
//! Kernel behaviour this module relies on (found while testing on Linux 6.18, veth links):
//! * setting a link down removes its IPv6 addresses and every non-kernel route through it,
//!   IPv4 included; IPv4 addresses stay (`keep_addr_on_down=0`, the default). Capture first.
//! * IPv6 keeps a link's addresses newest-first within a scope, IPv4 keeps primaries in the
//!   order they were added, so re-adding IPv6 addresses in reverse restores the same order.
//! * deleting an IPv4 primary address also deletes its secondaries unless
//!   `promote_secondaries` is set, so addresses are deleted secondaries-first.
//! * `RTM_GETLINK` by `IFLA_IFNAME` also matches alternative names, so a link can be "found"
//!   under a name it does not carry as its primary name; [`Link::name`] is the real one.
//! * an IPv6 route whose preferred source is a `tentative` address (DAD running, ~2 s after
//!   it was added) is refused with EINVAL; moving routes therefore waits for DAD.
//! * renaming a link onto a name that is another link's name or altname is `EEXIST`, its
//!   own altname included; the kernel keeps no altname for the old name by itself, but
//!   systemd-udevd adds one on the rename's "move" event (`AlternativeNamesPolicy=` of
//!   Debian's `99-default.link`), asynchronously, a moment later (seen in the kernel tier's
//!   reboot: the uplink got `altname enp0s16` after tether had checked);
//! * renaming a link rewrites its IPv4 labels: the first address takes the new name, later
//!   ones `<new>:<alias>` or, without an alias, `<new>:<position>` (`inetdev_changename`).

#[cfg(any(test, feature = "test-hooks"))]
mod fake;
mod moving;
mod naming;
mod rtnl;
pub mod sysctl;
mod types;
mod wire;

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

#[cfg(any(test, feature = "test-hooks"))]
pub use fake::{Call, FakeLinks};
pub use moving::{
    Applied, ApplyError, LinkChange, LinkStep, MovePlan, NicConfig, StepError, TENTATIVE_RETRIES,
    TENTATIVE_RETRY_INTERVAL, apply, apply_best_effort, capture, plan_move, plan_sysctl_values,
    plan_sysctls, read_sysctls,
};
pub use naming::{IFNAME_MAX, UPLINK_SUFFIX, uplink_name, valid_ifname};
pub use rtnl::Rtnl;
pub use sysctl::DevSysctl;
pub use types::{
    Addr, AddrFlags, Lifetime, Link, LinkFlags, Nexthop, Prefix, ROUTE_F_ONLINK, Route, RoutePref,
    RouteProtocol, RouteType, Scope, TABLE_LOCAL, TABLE_MAIN, is_link_local,
};

/// What went wrong with a netlink request. Kernel errors carry the errno; `what` names the
/// link, address or route the request was about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkError {
    /// ENODEV, ENOENT, ESRCH (no such route), EADDRNOTAVAIL (no such address).
    NotFound { what: String, errno: i32 },
    /// EEXIST: the name, address or route is already there.
    Exists { what: String, errno: i32 },
    /// EBUSY (e.g. renaming an UP link before Linux 6.2).
    Busy { what: String, errno: i32 },
    /// EPERM, EACCES: not CAP_NET_ADMIN in this namespace.
    Permission { what: String, errno: i32 },
    /// Any other errno.
    Other { what: String, errno: i32 },
    /// Refused before sending: the argument cannot be valid (a 16-byte name, say).
    Invalid { what: String, detail: String },
    /// The socket failed, or a reply could not be decoded; no errno from the kernel.
    Netlink { what: String, detail: String },
    /// A bounded wait ran out.
    Timeout { what: String },
    /// EACCES adding an IPv6 address or route: IPv6 is disabled on the device
    /// (`ipv6_add_addr` in net/ipv6/addrconf.c).
    Ipv6Disabled { what: String, dev: String },
}

/// errno values (asm-generic/errno-base.h, errno.h); identical on every Linux architecture
/// this daemon targets.
pub mod errno {
    pub const EPERM: i32 = 1;
    pub const ENOENT: i32 = 2;
    pub const ESRCH: i32 = 3;
    pub const EACCES: i32 = 13;
    pub const EBUSY: i32 = 16;
    pub const EEXIST: i32 = 17;
    pub const ENODEV: i32 = 19;
    pub const EINVAL: i32 = 22;
    pub const EADDRNOTAVAIL: i32 = 99;
}

impl LinkError {
    /// Map a (positive) errno from the kernel to the variant a caller acts on.
    pub fn from_errno(errno: i32, what: impl Into<String>) -> LinkError {
        let what = what.into();
        match errno {
            errno::ENODEV | errno::ENOENT | errno::ESRCH | errno::EADDRNOTAVAIL => {
                LinkError::NotFound { what, errno }
            }
            errno::EEXIST => LinkError::Exists { what, errno },
            errno::EBUSY => LinkError::Busy { what, errno },
            errno::EPERM | errno::EACCES => LinkError::Permission { what, errno },
            _ => LinkError::Other { what, errno },
        }
    }

    /// The kernel's errno, when the kernel refused the request.
    pub fn errno(&self) -> Option<i32> {
        match self {
            LinkError::NotFound { errno, .. }
            | LinkError::Exists { errno, .. }
            | LinkError::Busy { errno, .. }
            | LinkError::Permission { errno, .. }
            | LinkError::Other { errno, .. } => Some(*errno),
            LinkError::Ipv6Disabled { .. } => Some(errno::EACCES),
            _ => None,
        }
    }

    /// What the failed request was about.
    pub fn what(&self) -> &str {
        match self {
            LinkError::NotFound { what, .. }
            | LinkError::Exists { what, .. }
            | LinkError::Busy { what, .. }
            | LinkError::Permission { what, .. }
            | LinkError::Other { what, .. }
            | LinkError::Invalid { what, .. }
            | LinkError::Netlink { what, .. }
            | LinkError::Ipv6Disabled { what, .. }
            | LinkError::Timeout { what } => what,
        }
    }

    /// The same error about something described differently (e.g. with a link's name).
    pub fn map_what(self, f: impl FnOnce(String) -> String) -> LinkError {
        match self {
            LinkError::NotFound { what, errno } => LinkError::NotFound {
                what: f(what),
                errno,
            },
            LinkError::Exists { what, errno } => LinkError::Exists {
                what: f(what),
                errno,
            },
            LinkError::Busy { what, errno } => LinkError::Busy {
                what: f(what),
                errno,
            },
            LinkError::Permission { what, errno } => LinkError::Permission {
                what: f(what),
                errno,
            },
            LinkError::Other { what, errno } => LinkError::Other {
                what: f(what),
                errno,
            },
            LinkError::Invalid { what, detail } => LinkError::Invalid {
                what: f(what),
                detail,
            },
            LinkError::Netlink { what, detail } => LinkError::Netlink {
                what: f(what),
                detail,
            },
            LinkError::Timeout { what } => LinkError::Timeout { what: f(what) },
            LinkError::Ipv6Disabled { what, dev } => LinkError::Ipv6Disabled { what: f(what), dev },
        }
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, LinkError::NotFound { .. })
    }

    pub fn is_exists(&self) -> bool {
        matches!(self, LinkError::Exists { .. })
    }
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkError::NotFound { what, errno } => write!(f, "{what}: not found (errno {errno})"),
            LinkError::Exists { what, errno } => {
                write!(f, "{what}: already exists (errno {errno})")
            }
            LinkError::Busy { what, errno } => write!(f, "{what}: busy (errno {errno})"),
            // EPERM is the capability check (`netlink_ns_capable`); EACCES comes from
            // the object itself (IPv6 disabled on the device, an LSM), not a capability.
            LinkError::Permission { what, errno } if *errno == errno::EPERM => {
                write!(
                    f,
                    "{what}: permission denied (errno {errno}); needs CAP_NET_ADMIN"
                )
            }
            LinkError::Permission { what, errno } => {
                write!(f, "{what}: refused by the kernel (EACCES, errno {errno})")
            }
            LinkError::Ipv6Disabled { what, dev } => write!(
                f,
                "{what}: IPv6 is disabled on {dev} (net.ipv6.conf.{dev}.disable_ipv6=1; the kernel answers EACCES)"
            ),
            // io::Error's Display is strerror plus "(os error N)".
            LinkError::Other { what, errno } => {
                write!(f, "{what}: {}", std::io::Error::from_raw_os_error(*errno))
            }
            LinkError::Invalid { what, detail } => write!(f, "{what}: invalid: {detail}"),
            LinkError::Netlink { what, detail } => write!(f, "{what}: netlink: {detail}"),
            LinkError::Timeout { what } => write!(f, "{what}: timed out"),
        }
    }
}

impl std::error::Error for LinkError {}

/// Antrea's `RenameInterface` pacing: a failed rename is retried every 100 ms for 1 s.
pub const RENAME_RETRY_INTERVAL: Duration = Duration::from_millis(100);
pub const RENAME_RETRIES: u32 = 10;
/// Antrea's wait for the internal port's netdev to disappear: every 50 ms for up to 2 s.
pub const GONE_POLL_INTERVAL: Duration = Duration::from_millis(50);
pub const GONE_POLLS: u32 = 40;

/// Links, addresses and routes of one network namespace. Object-safe and small, so the
/// controller holds a `&dyn Links` (or `Box<dyn Links + Send>`) and tests pass a fake.
///
/// Links are named by index: names change (that is the point of a rename), indexes do not.
pub trait Links {
    /// Every link in the namespace.
    fn links(&self) -> Result<Vec<Link>, LinkError>;
    /// The link called `name` (the kernel also matches alternative names).
    fn link_by_name(&self, name: &str) -> Result<Link, LinkError>;
    fn link_by_index(&self, ifindex: u32) -> Result<Link, LinkError>;
    fn set_up(&self, ifindex: u32) -> Result<(), LinkError>;
    fn set_down(&self, ifindex: u32) -> Result<(), LinkError>;
    fn set_mtu(&self, ifindex: u32, mtu: u32) -> Result<(), LinkError>;
    /// One rename attempt, no down/up and no retry; [`Links::rename`] is the whole dance.
    fn set_name(&self, ifindex: u32, name: &str) -> Result<(), LinkError>;
    fn del_altname(&self, ifindex: u32, altname: &str) -> Result<(), LinkError>;
    /// Addresses of one link, or of every link when `ifindex` is None, in kernel order.
    fn addrs(&self, ifindex: Option<u32>) -> Result<Vec<Addr>, LinkError>;
    /// Add exactly this address (`Exists` if it is already there).
    fn add_addr(&self, addr: &Addr) -> Result<(), LinkError>;
    /// Delete this address (`NotFound` if it is not there).
    fn del_addr(&self, addr: &Addr) -> Result<(), LinkError>;
    /// Routes of every table that leave through `ifindex` (as their output link or one of
    /// their nexthops), IPv4 then IPv6, in kernel order; the local table's routes the
    /// kernel derives from addresses are left out.
    fn routes(&self, ifindex: u32) -> Result<Vec<Route>, LinkError>;
    /// Add exactly this route (`Exists` if one with the same key is already there).
    fn add_route(&self, route: &Route) -> Result<(), LinkError>;
    /// Delete this route (`NotFound` if it is not there).
    fn del_route(&self, route: &Route) -> Result<(), LinkError>;
    /// A per-device sysctl of the link called `dev`; None when the kernel has no such
    /// file (IPv6 off in the kernel).
    fn sysctl(&self, dev: &str, key: DevSysctl) -> Result<Option<String>, LinkError>;
    /// Set a per-device sysctl of the link called `dev`.
    fn set_sysctl(&self, dev: &str, key: DevSysctl, value: &str) -> Result<(), LinkError>;
    /// The namespace-wide (`all`) value of `key`, which the kernel combines with a
    /// device's own for some keys ([`DevSysctl::all_path`]); None when the kernel has no
    /// such file. Read only: tether changes no global setting.
    fn sysctl_all(&self, key: DevSysctl) -> Result<Option<String>, LinkError>;

    /// Wait between retries. The only source of delay here, so a fake can record it
    /// instead of sleeping.
    fn pause(&self, d: Duration) {
        std::thread::sleep(d);
    }

    /// The link that holds `ip` as one of its own (local) addresses, if any.
    fn link_holding(&self, ip: IpAddr) -> Result<Option<Link>, LinkError> {
        match self.addrs(None)?.iter().find(|a| a.local == ip) {
            Some(a) => self.link_by_index(a.ifindex).map(Some),
            None => Ok(None),
        }
    }

    /// Rename a link the way Antrea's `RenameInterface` does: down → rename → up, a failed
    /// rename retried every [`RENAME_RETRY_INTERVAL`] up to [`RENAME_RETRIES`] times (the old
    /// name of a port OVS is still deleting can linger), then remove the altname equal to the
    /// old name if one was kept (udev adds it on some distributions; Antrea #6301), since it
    /// would block creating the internal port under that name. NotFound, Permission and
    /// Invalid are not retried. The link is set up again even when the rename fails.
    /// Returns the renamed link.
    fn rename(&self, ifindex: u32, new_name: &str) -> Result<Link, LinkError> {
        let old = self.link_by_index(ifindex)?;
        if old.name == new_name {
            return Ok(old);
        }
        if !valid_ifname(new_name) {
            return Err(LinkError::Invalid {
                what: format!("rename link {} to {new_name:?}", old.name),
                detail: format!("not a valid interface name (1..={IFNAME_MAX} bytes)"),
            });
        }
        // The name may be this link's own altname (udev gives a renamed link its old
        // predictable name as one, a moment after the rename): the kernel refuses a rename
        // onto it like onto another link's name, so it goes first.
        if old.altnames.iter().any(|a| a == new_name) {
            self.del_altname(ifindex, new_name)?;
        }
        self.set_down(ifindex)?;
        let mut attempt = 0;
        let renamed = loop {
            match self.set_name(ifindex, new_name) {
                Ok(()) => break Ok(()),
                Err(
                    e @ (LinkError::NotFound { .. }
                    | LinkError::Permission { .. }
                    | LinkError::Invalid { .. }),
                ) => break Err(e),
                Err(e) if attempt >= RENAME_RETRIES => break Err(e),
                Err(e) => {
                    log::debug!(
                        "rename retry link={} to={new_name} attempt={attempt} err={e}",
                        old.name
                    );
                    attempt += 1;
                    self.pause(RENAME_RETRY_INTERVAL);
                }
            }
        };
        // Up again whatever happened: a NIC left down takes the host off the network.
        let up = self.set_up(ifindex);
        renamed?;
        up?;
        let link = self.link_by_index(ifindex)?;
        if link.altnames.contains(&old.name) {
            self.del_altname(ifindex, &old.name)?;
            return self.link_by_index(ifindex);
        }
        Ok(link)
    }

    /// Poll until no link is called `name` (every [`GONE_POLL_INTERVAL`], at most
    /// [`GONE_POLLS`] times); `Timeout` if it stays.
    fn wait_gone(&self, name: &str) -> Result<(), LinkError> {
        for poll in 0..=GONE_POLLS {
            match self.link_by_name(name) {
                Err(LinkError::NotFound { .. }) => return Ok(()),
                Err(e) => return Err(e),
                Ok(_) if poll == GONE_POLLS => break,
                Ok(_) => self.pause(GONE_POLL_INTERVAL),
            }
        }
        Err(LinkError::Timeout {
            what: format!("waiting for link {name} to disappear"),
        })
    }
}
