//! [`FakeLinks`]: an in-memory [`Links`] that behaves like the kernel where callers depend
//! on it, records every change, and fails on request.
//!
//! Kernel behaviour modelled (checked against Linux 6.18 by `tests/netlink_kernel.rs`):
//! names and altnames share one namespace (`EEXIST`), lookup by name also finds altnames,
//! setting a link down drops its IPv6 addresses and every route through it, IPv6 addresses
//! are listed newest first, a second route with the same table, destination, TOS and metric
//! is `EEXIST`, deleting something absent is `EADDRNOTAVAIL` / `ESRCH`, a missing link is
//! `ENODEV`, a rename rewrites IPv4 labels (`:N` for unlabelled later addresses), routes are
//! listed by destination, per-device sysctls (new links take the `default` ones; an IPv6
//! address on a link with `disable_ipv6=1` is `EACCES`). Not modelled: connected (kernel) routes, DAD, lifetimes running down.
//! Optionally it plays udev and keeps the old name as an altname after a rename.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use super::errno::{EACCES, EADDRNOTAVAIL, EEXIST, ENODEV, ENOENT, ESRCH};
use super::sysctl::DevSysctl;
use super::types::{Addr, Link, LinkFlags, Route};
use super::{IFNAME_MAX, LinkError, Links};

/// One recorded call that changes state (reads are not recorded), or a pause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    SetUp(u32),
    SetDown(u32),
    SetMtu(u32, u32),
    SetName(u32, String),
    DelAltname(u32, String),
    AddAddr(Addr),
    DelAddr(Addr),
    AddRoute(Route),
    DelRoute(Route),
    SetSysctl(u32, DevSysctl, String),
    Pause(Duration),
}

#[derive(Default)]
struct State {
    links: Vec<Link>,
    addrs: Vec<Addr>,
    routes: Vec<Route>,
    calls: Vec<Call>,
    /// Changing calls seen so far (pauses excluded); indexes `failures`.
    changes: usize,
    failures: Vec<(usize, LinkError)>,
    udev_altnames: bool,
    /// Per-device sysctls by ifindex (they follow renames), and the `default` values a
    /// new link starts with.
    sysctls: BTreeMap<(u32, DevSysctl), String>,
    defaults: BTreeMap<DevSysctl, String>,
    /// The namespace-wide `all` values (read only through [`Links`]).
    all: BTreeMap<DevSysctl, String>,
}

/// See the module doc. Cheap to create; all methods take `&self`.
#[derive(Default)]
pub struct FakeLinks {
    state: Mutex<State>,
}

impl FakeLinks {
    pub fn new() -> FakeLinks {
        FakeLinks::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock has failed already; keep the state.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Create a link (not recorded); returns its index (1, 2, … in creation order).
    pub fn add_link(&self, name: &str, mac: [u8; 6], mtu: u32, up: bool) -> u32 {
        let mut s = self.lock();
        let index = s.links.iter().map(|l| l.index).max().unwrap_or(0) + 1;
        s.links.push(Link {
            index,
            name: name.to_string(),
            mac: Some(mac),
            mtu,
            flags: if up { LinkFlags::UP } else { LinkFlags(0) },
            kind: Some("veth".into()),
            altnames: Vec::new(),
            master: None,
        });
        let defaults: Vec<(DevSysctl, String)> =
            s.defaults.iter().map(|(k, v)| (*k, v.clone())).collect();
        for (k, v) in defaults {
            s.sysctls.insert((index, k), v);
        }
        index
    }

    /// The `default` value new links start with (`net.<family>.conf.default.<key>`); links
    /// created before keep theirs. Every key starts unset (absent) until given one here or
    /// with [`FakeLinks::put_sysctl`].
    pub fn set_default_sysctl(&self, key: DevSysctl, value: &str) {
        self.lock().defaults.insert(key, value.to_string());
    }

    /// The namespace-wide `all` value of `key` ([`Links::sysctl_all`]); absent until set.
    pub fn set_all_sysctl(&self, key: DevSysctl, value: &str) {
        self.lock().all.insert(key, value.to_string());
    }

    /// Set a link's sysctl directly (not recorded).
    pub fn put_sysctl(&self, index: u32, key: DevSysctl, value: &str) {
        self.lock().sysctls.insert((index, key), value.to_string());
    }

    /// Remove a link and everything on it (not recorded), like OVS deleting a port.
    pub fn remove_link(&self, index: u32) {
        let mut s = self.lock();
        s.links.retain(|l| l.index != index);
        s.addrs.retain(|a| a.ifindex != index);
        s.routes.retain(|r| !r.uses(index));
    }

    /// Change a link's attributes directly (not recorded): its kind, flags, master, MAC.
    pub fn edit_link(&self, index: u32, f: impl FnOnce(&mut Link)) {
        if let Some(l) = self.lock().links.iter_mut().find(|l| l.index == index) {
            f(l);
        }
    }

    /// Give a link an altname directly (not recorded).
    pub fn add_altname(&self, index: u32, altname: &str) {
        let mut s = self.lock();
        if let Some(l) = s.links.iter_mut().find(|l| l.index == index) {
            l.altnames.push(altname.to_string());
        }
    }

    /// After every successful rename, keep the old name as an altname (what udev does on
    /// some distributions; Antrea #6301).
    pub fn set_udev_altnames(&self, on: bool) {
        self.lock().udev_altnames = on;
    }

    /// The `n`-th changing call from now on (0-based, pauses not counted) fails with
    /// `error` and changes nothing.
    pub fn fail_call(&self, n: usize, error: LinkError) {
        let mut s = self.lock();
        let at = s.changes + n;
        s.failures.push((at, error));
    }

    /// Every changing call and pause so far.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// Forget the recorded calls (and restart the count `fail_call` uses).
    pub fn clear_calls(&self) {
        let mut s = self.lock();
        s.calls.clear();
        s.changes = 0;
        s.failures.clear();
    }

    /// All links, addresses and routes, each in the order the kernel would list them, for
    /// comparing states.
    pub fn snapshot(&self) -> (Vec<Link>, Vec<Addr>, Vec<Route>) {
        let s = self.lock();
        let v4 = s.addrs.iter().filter(|a| !a.is_ipv6());
        let v6 = s.addrs.iter().filter(|a| a.is_ipv6());
        (
            s.links.clone(),
            v4.chain(v6).cloned().collect(),
            s.routes.clone(),
        )
    }

    /// Record `call`; Err if a failure was injected for it.
    fn change(&self, call: Call) -> Result<MutexGuard<'_, State>, LinkError> {
        let mut s = self.lock();
        s.calls.push(call);
        let n = s.changes;
        s.changes += 1;
        if let Some(pos) = s.failures.iter().position(|(at, _)| *at == n) {
            let (_, e) = s.failures.remove(pos);
            return Err(e);
        }
        Ok(s)
    }
}

fn no_dev(index: u32) -> LinkError {
    LinkError::from_errno(ENODEV, format!("link index {index}"))
}

fn link_mut(s: &mut State, index: u32) -> Result<&mut Link, LinkError> {
    s.links
        .iter_mut()
        .find(|l| l.index == index)
        .ok_or_else(|| no_dev(index))
}

/// What a rename does to IPv4 labels (`inetdev_changename` in net/ipv4/devinet.c): the
/// first address takes the new name, each later one the new name plus its old `:alias`, or
/// `:<position>` when it had none.
fn relabel(addrs: &mut [Addr], ifindex: u32, name: &str) {
    let v4 = addrs
        .iter_mut()
        .filter(|a| a.ifindex == ifindex && !a.is_ipv6());
    for (pos, a) in v4.enumerate() {
        if pos == 0 {
            a.label = Some(name.to_string());
            continue;
        }
        let old = a.label.clone().unwrap_or_default();
        let suffix = match old.find(':') {
            Some(colon) => old[colon..].to_string(),
            None => format!(":{}", pos + 1),
        };
        let keep = IFNAME_MAX.saturating_sub(suffix.len()).min(name.len());
        let head = name.get(..keep).unwrap_or(name);
        a.label = Some(format!("{head}{suffix}"));
    }
}

/// Where the kernel would list a route: this model keeps them sorted by family, then
/// destination, then metric (the kernel's tries are ordered by destination too).
fn route_order(r: &Route) -> (bool, IpAddr, u8, u32) {
    (r.is_ipv6(), r.dst.addr, r.dst.len, r.metric)
}

/// The kernel's `EEXIST` key for a route (`fib_table_insert`, `fib6_add_rt2node`).
fn same_route_key(a: &Route, b: &Route) -> bool {
    a.table == b.table && a.dst == b.dst && a.tos == b.tos && a.metric == b.metric
}

impl Links for FakeLinks {
    fn links(&self) -> Result<Vec<Link>, LinkError> {
        Ok(self.lock().links.clone())
    }

    fn link_by_name(&self, name: &str) -> Result<Link, LinkError> {
        self.lock()
            .links
            .iter()
            .find(|l| l.name == name || l.altnames.iter().any(|a| a == name))
            .cloned()
            .ok_or_else(|| LinkError::from_errno(ENODEV, format!("link {name}")))
    }

    fn link_by_index(&self, ifindex: u32) -> Result<Link, LinkError> {
        self.lock()
            .links
            .iter()
            .find(|l| l.index == ifindex)
            .cloned()
            .ok_or_else(|| no_dev(ifindex))
    }

    fn set_up(&self, ifindex: u32) -> Result<(), LinkError> {
        let mut s = self.change(Call::SetUp(ifindex))?;
        let l = link_mut(&mut s, ifindex)?;
        l.flags = LinkFlags(l.flags.0 | LinkFlags::UP.0);
        Ok(())
    }

    fn set_down(&self, ifindex: u32) -> Result<(), LinkError> {
        let mut s = self.change(Call::SetDown(ifindex))?;
        let l = link_mut(&mut s, ifindex)?;
        l.flags = LinkFlags(l.flags.0 & !LinkFlags::UP.0);
        s.addrs.retain(|a| !(a.ifindex == ifindex && a.is_ipv6()));
        s.routes.retain(|r| !r.uses(ifindex));
        Ok(())
    }

    fn set_mtu(&self, ifindex: u32, mtu: u32) -> Result<(), LinkError> {
        let mut s = self.change(Call::SetMtu(ifindex, mtu))?;
        link_mut(&mut s, ifindex)?.mtu = mtu;
        Ok(())
    }

    fn set_name(&self, ifindex: u32, name: &str) -> Result<(), LinkError> {
        let mut s = self.change(Call::SetName(ifindex, name.to_string()))?;
        let taken = s.links.iter().any(|l| {
            l.index != ifindex && (l.name == name || l.altnames.iter().any(|a| a == name))
        });
        if taken {
            return Err(LinkError::from_errno(
                EEXIST,
                format!("rename link index {ifindex} to {name}"),
            ));
        }
        let udev = s.udev_altnames;
        let l = link_mut(&mut s, ifindex)?;
        let old = std::mem::replace(&mut l.name, name.to_string());
        if udev && old != name {
            l.altnames.push(old);
        }
        relabel(&mut s.addrs, ifindex, name);
        Ok(())
    }

    fn del_altname(&self, ifindex: u32, altname: &str) -> Result<(), LinkError> {
        let mut s = self.change(Call::DelAltname(ifindex, altname.to_string()))?;
        let l = link_mut(&mut s, ifindex)?;
        let before = l.altnames.len();
        l.altnames.retain(|a| a != altname);
        if l.altnames.len() == before {
            return Err(LinkError::from_errno(
                ENODEV,
                format!("altname {altname} of link index {ifindex}"),
            ));
        }
        Ok(())
    }

    fn addrs(&self, ifindex: Option<u32>) -> Result<Vec<Addr>, LinkError> {
        let s = self.lock();
        let v4 = s.addrs.iter().filter(|a| !a.is_ipv6());
        let v6 = s.addrs.iter().filter(|a| a.is_ipv6());
        Ok(v4
            .chain(v6)
            .filter(|a| ifindex.is_none_or(|i| a.ifindex == i))
            .cloned()
            .collect())
    }

    fn add_addr(&self, addr: &Addr) -> Result<(), LinkError> {
        let mut s = self.change(Call::AddAddr(addr.clone()))?;
        link_mut(&mut s, addr.ifindex)?;
        let exists = s.addrs.iter().any(|a| {
            a.ifindex == addr.ifindex && a.local == addr.local && a.prefix_len == addr.prefix_len
        });
        if exists {
            return Err(LinkError::from_errno(EEXIST, format!("address {addr}")));
        }
        // `ipv6_add_addr` (net/ipv6/addrconf.c): EACCES while IPv6 is disabled on the link.
        if addr.is_ipv6()
            && s.sysctls
                .get(&(addr.ifindex, DevSysctl::Ipv6DisableIpv6))
                .map(String::as_str)
                == Some("1")
        {
            return Err(LinkError::from_errno(EACCES, format!("address {addr}")));
        }
        if addr.is_ipv6() {
            // Newest first within a scope (ipv6_link_dev_addr in net/ipv6/addrconf.c).
            let at = s
                .addrs
                .iter()
                .position(|a| a.ifindex == addr.ifindex && a.is_ipv6() && a.scope >= addr.scope)
                .unwrap_or(s.addrs.len());
            s.addrs.insert(at, addr.clone());
        } else {
            s.addrs.push(addr.clone());
        }
        Ok(())
    }

    fn del_addr(&self, addr: &Addr) -> Result<(), LinkError> {
        let mut s = self.change(Call::DelAddr(addr.clone()))?;
        link_mut(&mut s, addr.ifindex)?;
        let pos = s.addrs.iter().position(|a| {
            a.ifindex == addr.ifindex && a.local == addr.local && a.prefix_len == addr.prefix_len
        });
        match pos {
            Some(p) => {
                s.addrs.remove(p);
                Ok(())
            }
            None => Err(LinkError::from_errno(
                EADDRNOTAVAIL,
                format!("address {addr}"),
            )),
        }
    }

    fn routes(&self, ifindex: u32) -> Result<Vec<Route>, LinkError> {
        let s = self.lock();
        let v4 = s.routes.iter().filter(|r| !r.is_ipv6());
        let v6 = s.routes.iter().filter(|r| r.is_ipv6());
        Ok(v4.chain(v6).filter(|r| r.uses(ifindex)).cloned().collect())
    }

    fn add_route(&self, route: &Route) -> Result<(), LinkError> {
        let mut s = self.change(Call::AddRoute(route.clone()))?;
        if route.multipath.is_empty() {
            link_mut(&mut s, route.oif)?;
        }
        for n in &route.multipath {
            link_mut(&mut s, n.ifindex)?;
        }
        if s.routes.iter().any(|r| same_route_key(r, route)) {
            return Err(LinkError::from_errno(EEXIST, format!("route {route}")));
        }
        let at = s
            .routes
            .iter()
            .position(|r| route_order(r) > route_order(route))
            .unwrap_or(s.routes.len());
        s.routes.insert(at, route.clone());
        Ok(())
    }

    fn del_route(&self, route: &Route) -> Result<(), LinkError> {
        let mut s = self.change(Call::DelRoute(route.clone()))?;
        let pos = s.routes.iter().position(|r| {
            same_route_key(r, route)
                && r.oif == route.oif
                && r.gateway == route.gateway
                && r.multipath == route.multipath
        });
        match pos {
            Some(p) => {
                s.routes.remove(p);
                Ok(())
            }
            None => Err(LinkError::from_errno(ESRCH, format!("route {route}"))),
        }
    }

    fn sysctl(&self, dev: &str, key: DevSysctl) -> Result<Option<String>, LinkError> {
        let index = self.link_by_name(dev)?.index;
        Ok(self.lock().sysctls.get(&(index, key)).cloned())
    }

    fn set_sysctl(&self, dev: &str, key: DevSysctl, value: &str) -> Result<(), LinkError> {
        let index = self.link_by_name(dev)?.index;
        let mut s = self.change(Call::SetSysctl(index, key, value.to_string()))?;
        if !s.sysctls.contains_key(&(index, key)) {
            return Err(LinkError::from_errno(
                ENOENT,
                format!(
                    "write /proc/sys/net/{}/conf/{dev}/{}",
                    key.family(),
                    key.key()
                ),
            ));
        }
        s.sysctls.insert((index, key), value.to_string());
        Ok(())
    }

    fn sysctl_all(&self, key: DevSysctl) -> Result<Option<String>, LinkError> {
        Ok(self.lock().all.get(&key).cloned())
    }

    fn pause(&self, d: Duration) {
        self.lock().calls.push(Call::Pause(d));
    }
}
