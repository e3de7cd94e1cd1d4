//! Moving a NIC's configuration (MTU, addresses, routes) to another link, and back.
//!
//! Three parts, so the interesting one is pure:
//! 1. [`capture`] reads a link's configuration through [`Links`]. Call it BEFORE the link
//!    goes down: a link going down loses its IPv6 addresses and every non-kernel route.
//! 2. [`plan_move`] turns a captured [`NicConfig`] into an ordered [`MovePlan`] of [`LinkStep`]s,
//!    without touching anything (table-tested).
//! 3. [`apply`] runs a plan; on the first failure it undoes, newest first, every step that
//!    changed something and reports the failure together with every undo error.
//!    [`apply_best_effort`] runs every step whatever fails and reports all errors: the
//!    restore path, where undoing would take the NIC's addresses away again.
//!
//! Order of a move, and why:
//! 1. target MTU, then target up (both IPv4 and IPv6 refuse a route through a link that is
//!    down: "Device for nexthop is not up", ENETDOWN);
//! 2. from the source link, if it still exists: its routes (gateway routes first), then its
//!    addresses (IPv4 secondaries before their primary: deleting a primary deletes its
//!    secondaries). This must come before the adds because IPv4 and IPv6 refuse a second
//!    route with the same destination, table, TOS and metric through another link
//!    (`EEXIST` with `NLM_F_EXCL`), and because the uplink must not keep answering for
//!    the host's addresses;
//! 3. to the target: addresses first (so connected routes exist), IPv4 in captured order,
//!    IPv6 in reverse (the kernel lists IPv6 addresses newest first, so this re-creates the
//!    same order), then routes, on-link ones before those with a gateway.
//!
//! An IPv6 route with a preferred source cannot be added while that address is still
//! `tentative` (DAD): such a route step is retried for up to 5 s ([`TENTATIVE_RETRIES`]).
//!
//! "Already there" is success for an add and "not there" is success for a delete; such
//! steps changed nothing and are not undone. The inverse of a plan ([`MovePlan::inverse`]) is
//! every step inverted, in reverse order: an exact undo while both links exist.
//!
//! One thing a rollback cannot re-create exactly: IPv4 labels the kernel invented. Renaming
//! a link relabels its IPv4 addresses (the first gets the new name, an unlabelled later one
//! `<new>:<position>`, e.g. `eth1~:3`); the plan, made from the configuration captured
//! before the rename, re-adds such an address to the renamed link as plain `eth1~`. Labels
//! are cosmetic aliases; the restore path (capture the target, move back to the NIC after
//! renaming it back) re-creates the original labels exactly.

use std::fmt;
use std::time::Duration;

use super::errno::EINVAL;
use super::sysctl::DevSysctl;
use super::types::{Addr, Link, Route, is_link_local};
use super::{IFNAME_MAX, LinkError, Links};

/// What [`capture`] reads from a NIC: enough to re-create its layer-3 configuration
/// elsewhere. Link-local addresses and fe80::/10 routes are left out: every link makes its
/// own (docs/antrea-compat.md#interface-config-capture). Routes of every table are kept,
/// multipath ones with their nexthops through this link as ifindex 0 ("this link"), so a
/// route through the NIC and another link moves with only its own nexthop re-pointed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NicConfig {
    pub ifindex: u32,
    pub name: String,
    pub mac: Option<[u8; 6]>,
    pub mtu: u32,
    /// Kernel order (see [`Links::addrs`]).
    pub addrs: Vec<Addr>,
    /// Routes of every table through the link, kernel order.
    pub routes: Vec<Route>,
    /// Its per-device sysctls ([`DevSysctl::ALL`] order; those the kernel has).
    pub sysctls: Vec<(DevSysctl, String)>,
}

impl NicConfig {
    /// The captured routes that cannot be re-created exactly (see [`Route::unmovable`]),
    /// each as `<route>: <why>`. A takeover refuses a NIC that has any.
    pub fn unmovable(&self) -> Vec<String> {
        self.routes
            .iter()
            .filter_map(|r| r.unmovable.as_ref().map(|why| format!("{r}: has {why}")))
            .collect()
    }
}

/// Read the configuration of link `ifindex` (see [`NicConfig`] for what is kept).
pub fn capture(links: &dyn Links, ifindex: u32) -> Result<NicConfig, LinkError> {
    let link = links.link_by_index(ifindex)?;
    let addrs = links
        .addrs(Some(ifindex))?
        .into_iter()
        .filter(|a| !is_link_local(a.local))
        .collect();
    let routes = links
        .routes(ifindex)?
        .into_iter()
        .filter(|r| !(r.is_ipv6() && r.dst.len >= 10 && is_link_local(r.dst.addr)))
        .map(|mut r| {
            for n in &mut r.multipath {
                if n.ifindex == ifindex {
                    n.ifindex = 0;
                }
            }
            r
        })
        .collect();
    let sysctls = read_sysctls(links, &link.name)?;
    Ok(NicConfig {
        ifindex,
        name: link.name,
        mac: link.mac,
        mtu: link.mtu,
        addrs,
        routes,
        sysctls,
    })
}

/// The per-device sysctls of the link called `dev` that the kernel has.
pub fn read_sysctls(links: &dyn Links, dev: &str) -> Result<Vec<(DevSysctl, String)>, LinkError> {
    let mut out = Vec::new();
    for key in DevSysctl::ALL {
        if let Some(v) = links.sysctl(dev, key)? {
            out.push((key, v));
        }
    }
    Ok(out)
}

/// Steps giving `to` the sysctls of `cfg` where its `current` ones differ; a key `to`
/// does not have is skipped. They go before the addresses (a disabled IPv6 would refuse
/// them).
pub fn plan_sysctls(cfg: &NicConfig, to: &Link, current: &[(DevSysctl, String)]) -> MovePlan {
    let steps = cfg
        .sysctls
        .iter()
        .filter_map(|(key, value)| {
            let (_, was) = current.iter().find(|(k, _)| k == key)?;
            (was != value).then(|| {
                LinkStep::new(
                    to,
                    LinkChange::SetSysctl {
                        key: *key,
                        value: value.clone(),
                        was: was.clone(),
                    },
                )
            })
        })
        .collect();
    MovePlan { steps }
}

/// Steps giving `link` the values `want` (in that order) where its `current` ones differ;
/// a key the link does not have is skipped (the kernel lacks it: nothing to change). The
/// uplink's settings while the datapath holds it are such a list
/// (`controller::externalnode::uplink`); each step records the value it replaces, so a
/// rollback puts that back.
pub fn plan_sysctl_values(
    link: &Link,
    want: &[(DevSysctl, &str)],
    current: &[(DevSysctl, String)],
) -> MovePlan {
    let steps = want
        .iter()
        .filter_map(|(key, value)| {
            let (_, was) = current.iter().find(|(k, _)| k == key)?;
            (was != value).then(|| {
                LinkStep::new(
                    link,
                    LinkChange::SetSysctl {
                        key: *key,
                        value: (*value).to_string(),
                        was: was.clone(),
                    },
                )
            })
        })
        .collect();
    MovePlan { steps }
}

/// One change to one link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkChange {
    SetMtu {
        mtu: u32,
        was: u32,
    },
    SetUp,
    SetDown,
    AddAddr(Addr),
    DelAddr(Addr),
    AddRoute(Route),
    DelRoute(Route),
    /// A per-device sysctl of the link (by its name at plan time).
    SetSysctl {
        key: DevSysctl,
        value: String,
        was: String,
    },
}

/// An [`LinkChange`] on the link with index `ifindex`, called `link` when the plan was made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkStep {
    pub ifindex: u32,
    pub link: String,
    pub action: LinkChange,
}

/// Whether a step changed the system (and so must be undone on rollback).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Effect {
    Changed,
    Unchanged,
}

impl LinkStep {
    fn new(link: &Link, action: LinkChange) -> LinkStep {
        LinkStep {
            ifindex: link.index,
            link: link.name.clone(),
            action,
        }
    }

    /// The step that undoes this one.
    pub fn inverse(&self) -> LinkStep {
        let action = match &self.action {
            LinkChange::SetMtu { mtu, was } => LinkChange::SetMtu {
                mtu: *was,
                was: *mtu,
            },
            LinkChange::SetUp => LinkChange::SetDown,
            LinkChange::SetDown => LinkChange::SetUp,
            LinkChange::AddAddr(a) => LinkChange::DelAddr(a.clone()),
            LinkChange::DelAddr(a) => LinkChange::AddAddr(a.clone()),
            LinkChange::AddRoute(r) => LinkChange::DelRoute(r.clone()),
            LinkChange::DelRoute(r) => LinkChange::AddRoute(r.clone()),
            LinkChange::SetSysctl { key, value, was } => LinkChange::SetSysctl {
                key: *key,
                value: was.clone(),
                was: value.clone(),
            },
        };
        LinkStep {
            ifindex: self.ifindex,
            link: self.link.clone(),
            action,
        }
    }

    /// EACCES on an IPv6 address or route means IPv6 is off on the device, not a missing
    /// capability (that is EPERM).
    fn ipv6_cause(&self, e: LinkError, ipv6: bool) -> LinkError {
        match e {
            LinkError::Permission { what, errno } if ipv6 && errno == super::errno::EACCES => {
                LinkError::Ipv6Disabled {
                    what,
                    dev: self.link.clone(),
                }
            }
            e => e,
        }
    }

    fn run(&self, links: &dyn Links) -> Result<Effect, LinkError> {
        let tolerate = |r: Result<(), LinkError>, ok_if: fn(&LinkError) -> bool| match r {
            Ok(()) => Ok(Effect::Changed),
            Err(e) if ok_if(&e) => Ok(Effect::Unchanged),
            Err(e) => Err(e),
        };
        let i = self.ifindex;
        match &self.action {
            LinkChange::SetMtu { mtu, .. } => links.set_mtu(i, *mtu).map(|()| Effect::Changed),
            LinkChange::SetUp => links.set_up(i).map(|()| Effect::Changed),
            LinkChange::SetDown => links.set_down(i).map(|()| Effect::Changed),
            LinkChange::AddAddr(a) => tolerate(
                links
                    .add_addr(a)
                    .map_err(|e| self.ipv6_cause(e, a.is_ipv6())),
                LinkError::is_exists,
            ),
            LinkChange::DelAddr(a) => tolerate(links.del_addr(a), LinkError::is_not_found),
            LinkChange::AddRoute(r) => tolerate(
                add_route_after_dad(links, r).map_err(|e| self.ipv6_cause(e, r.is_ipv6())),
                LinkError::is_exists,
            ),
            LinkChange::SetSysctl { key, value, .. } => links
                .set_sysctl(&self.link, *key, value)
                .map(|()| Effect::Changed),
            LinkChange::DelRoute(r) => tolerate(links.del_route(r), LinkError::is_not_found),
        }
    }
}

impl fmt::Display for LinkStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = &self.link;
        match &self.action {
            LinkChange::SetMtu { mtu, was } => write!(f, "set mtu {mtu} on {l} (was {was})"),
            LinkChange::SetUp => write!(f, "set {l} up"),
            LinkChange::SetDown => write!(f, "set {l} down"),
            LinkChange::AddAddr(a) => write!(f, "add address {a} to {l}"),
            LinkChange::DelAddr(a) => write!(f, "delete address {a} from {l}"),
            LinkChange::AddRoute(r) => write!(f, "add route {r} to {l}"),
            LinkChange::DelRoute(r) => write!(f, "delete route {r} from {l}"),
            LinkChange::SetSysctl { key, value, was } => write!(
                f,
                "set net.{}.conf.{l}.{}={value} (was {was})",
                key.family(),
                key.key()
            ),
        }
    }
}

/// An ordered list of steps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MovePlan {
    pub steps: Vec<LinkStep>,
}

impl MovePlan {
    /// Every step inverted, last first.
    pub fn inverse(&self) -> MovePlan {
        MovePlan {
            steps: self.steps.iter().rev().map(LinkStep::inverse).collect(),
        }
    }
}

/// Plan moving `cfg` (captured from some link) onto `to`, deleting it from `from` first
/// when that link still exists. `to` is the target's current state: only an MTU that
/// differs and a link that is down produce steps. The same function restores: capture the
/// target, then plan from it back to the NIC.
pub fn plan_move(cfg: &NicConfig, from: Option<&Link>, to: &Link) -> MovePlan {
    let mut steps = Vec::new();
    if to.mtu != cfg.mtu {
        steps.push(LinkStep::new(
            to,
            LinkChange::SetMtu {
                mtu: cfg.mtu,
                was: to.mtu,
            },
        ));
    }
    if !to.is_up() {
        steps.push(LinkStep::new(to, LinkChange::SetUp));
    }
    let addrs = addr_order(&cfg.addrs);
    // A route that cannot be re-created exactly is never re-created inexactly: a takeover
    // refuses such a NIC before planning; a restore leaves it (and logs it).
    let movable: Vec<Route> = cfg
        .routes
        .iter()
        .filter(|r| r.unmovable.is_none())
        .cloned()
        .collect();
    let routes = route_order(&movable);
    if let Some(from) = from {
        for r in routes.iter().rev() {
            steps.push(LinkStep::new(from, LinkChange::DelRoute(route_on(r, from))));
        }
        for a in addrs.iter().rev() {
            steps.push(LinkStep::new(
                from,
                LinkChange::DelAddr(addr_on(a, &cfg.name, from)),
            ));
        }
    }
    for a in &addrs {
        steps.push(LinkStep::new(
            to,
            LinkChange::AddAddr(addr_on(a, &cfg.name, to)),
        ));
    }
    for r in &routes {
        steps.push(LinkStep::new(to, LinkChange::AddRoute(route_on(r, to))));
    }
    MovePlan { steps }
}

/// IPv4 in captured order, then IPv6 reversed (module doc, step 3).
fn addr_order(addrs: &[Addr]) -> Vec<&Addr> {
    let v4 = addrs.iter().filter(|a| !a.is_ipv6());
    let v6 = addrs.iter().rev().filter(|a| a.is_ipv6());
    v4.chain(v6).collect()
}

/// On-link routes, then routes through a gateway (multipath ones among them), each group
/// in captured order.
fn route_order(routes: &[Route]) -> Vec<&Route> {
    let direct = routes.iter().filter(|r| !r.has_gateway());
    let via = routes.iter().filter(|r| r.has_gateway());
    direct.chain(via).collect()
}

/// `a` as it should be on `link`: its index, and an IPv4 label re-based from the old link
/// name to the new one (`eth1` → `<new>`, `eth1:web` → `<new>:web`; any other label is
/// kept). A label the kernel would refuse as too long falls back to the link's name.
fn addr_on(a: &Addr, old_name: &str, link: &Link) -> Addr {
    let mut a = a.clone();
    a.ifindex = link.index;
    if let Some(label) = &a.label {
        let suffix = label
            .strip_prefix(old_name)
            .filter(|s| s.is_empty() || s.starts_with(':'));
        if let Some(suffix) = suffix {
            let relabelled = format!("{}{suffix}", link.name);
            a.label = Some(if relabelled.len() <= IFNAME_MAX {
                relabelled
            } else {
                link.name.clone()
            });
        }
    }
    a
}

/// `r` through `link`: its output link, or its nexthops through "this link" (0).
fn route_on(r: &Route, link: &Link) -> Route {
    let mut r = r.clone();
    if r.multipath.is_empty() {
        r.oif = link.index;
    } else {
        for n in &mut r.multipath {
            if n.ifindex == 0 {
                n.ifindex = link.index;
            }
        }
    }
    r
}

/// How long an IPv6 route with a preferred source waits for that address to finish DAD.
pub const TENTATIVE_RETRY_INTERVAL: Duration = Duration::from_millis(100);
pub const TENTATIVE_RETRIES: u32 = 50;

/// Add `r`; while the kernel refuses its IPv6 preferred source with EINVAL ("Invalid source
/// address": the address was just added and is `tentative` until DAD ends, 1.4–1.9 s on
/// this kernel), retry every [`TENTATIVE_RETRY_INTERVAL`], at most [`TENTATIVE_RETRIES`]
/// times. Without this, a moved NIC whose routes name an IPv6 source fails, and rolls back,
/// every time DAD is on.
fn add_route_after_dad(links: &dyn Links, r: &Route) -> Result<(), LinkError> {
    let waits_for_dad = r.prefsrc.is_some_and(|s| s.is_ipv6());
    let mut tries = 0;
    loop {
        match links.add_route(r) {
            Err(LinkError::Other { errno, .. })
                if errno == EINVAL && waits_for_dad && tries < TENTATIVE_RETRIES =>
            {
                tries += 1;
                links.pause(TENTATIVE_RETRY_INTERVAL);
            }
            other => return other,
        }
    }
}

/// A step that failed and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepError {
    pub step: LinkStep,
    pub error: LinkError,
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.step, self.error)
    }
}

/// What a successful [`apply`] changed, in order; [`Applied::undo`] reverts exactly that.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    pub changed: Vec<LinkStep>,
}

impl Applied {
    /// Undo every changed step, newest first, trying all of them; Err lists every failure.
    pub fn undo(&self, links: &dyn Links) -> Result<(), Vec<StepError>> {
        let errors = undo(links, &self.changed);
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

/// [`apply`] failed at step `index`; the steps it had changed were undone, except those
/// in `rollback_errors`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApplyError {
    pub index: usize,
    pub failed: Box<StepError>,
    /// How many changed steps rollback undid successfully.
    pub undone: usize,
    pub rollback_errors: Vec<StepError>,
}

impl fmt::Display for ApplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "step {} ({}) failed; rolled back {} step(s)",
            self.index, self.failed, self.undone
        )?;
        for e in &self.rollback_errors {
            write!(f, "; rollback: {e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ApplyError {}

/// Run `plan` all-or-nothing (see the module doc).
pub fn apply(links: &dyn Links, plan: &MovePlan) -> Result<Applied, ApplyError> {
    let mut changed = Vec::new();
    for (index, step) in plan.steps.iter().enumerate() {
        match step.run(links) {
            Ok(Effect::Changed) => changed.push(step.clone()),
            Ok(Effect::Unchanged) => {}
            Err(error) => {
                log::warn!(
                    "netlink plan failed step={index} op=\"{step}\" err={error}; rolling back"
                );
                let rollback_errors = undo(links, &changed);
                return Err(ApplyError {
                    index,
                    failed: Box::new(StepError {
                        step: step.clone(),
                        error,
                    }),
                    undone: changed.len() - rollback_errors.len(),
                    rollback_errors,
                });
            }
        }
    }
    Ok(Applied { changed })
}

/// Run every step of `plan` whatever fails; Err lists every failed step.
pub fn apply_best_effort(links: &dyn Links, plan: &MovePlan) -> Result<Applied, Vec<StepError>> {
    let mut changed = Vec::new();
    let mut errors = Vec::new();
    for step in &plan.steps {
        match step.run(links) {
            Ok(Effect::Changed) => changed.push(step.clone()),
            Ok(Effect::Unchanged) => {}
            Err(error) => {
                log::warn!("netlink step failed op=\"{step}\" err={error}");
                errors.push(StepError {
                    step: step.clone(),
                    error,
                });
            }
        }
    }
    if errors.is_empty() {
        Ok(Applied { changed })
    } else {
        Err(errors)
    }
}

fn undo(links: &dyn Links, changed: &[LinkStep]) -> Vec<StepError> {
    let mut errors = Vec::new();
    for step in changed.iter().rev() {
        let inverse = step.inverse();
        if let Err(error) = inverse.run(links) {
            log::warn!("netlink rollback failed op=\"{inverse}\" err={error}");
            errors.push(StepError {
                step: inverse,
                error,
            });
        }
    }
    errors
}
