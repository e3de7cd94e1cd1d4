//! rtnetlink message bodies ⇄ [`Link`], [`Addr`], [`Route`]: pure, no socket, no neli.
//!
//! A message is its fixed header (the `*Hdr` structs mirror `struct ifinfomsg`, `ifaddrmsg`
//! and `rtmsg` from `linux/rtnetlink.h` / `linux/if_addr.h`) plus a list of `(type, payload)`
//! attributes. `rtnl.rs` moves these between neli's types and the socket; everything about
//! which attribute means what lives here, by number, so that glibc and musl builds agree (neli
//! hides some `Rta` variants, such as `Rta::Pref`, behind `cfg(target_env = "gnu")`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::types::{
    Addr, AddrFlags, Lifetime, Link, LinkFlags, Nexthop, Prefix, ROUTE_F_ONLINK, Route, RoutePref,
    RouteProtocol, RouteType, Scope,
};

/// One attribute: type (flag bits masked off when decoding) and payload.
pub(crate) type Attr = (u16, Vec<u8>);

pub(crate) const AF_INET: u8 = 2;
pub(crate) const AF_INET6: u8 = 10;

/// `NLA_F_NESTED` | `NLA_F_NET_BYTEORDER` (`linux/netlink.h`): not part of the type.
const NLA_FLAGS: u16 = 0xc000;
pub(crate) const NLA_F_NESTED: u16 = 0x8000;

/// `IFLA_*` (`linux/if_link.h`).
pub(crate) mod ifla {
    pub const ADDRESS: u16 = 1;
    pub const IFNAME: u16 = 3;
    pub const MTU: u16 = 4;
    pub const LINKINFO: u16 = 18;
    pub const INFO_KIND: u16 = 1;
    pub const PROP_LIST: u16 = 52;
    pub const ALT_IFNAME: u16 = 53;
}

/// `IFA_*` (`linux/if_addr.h`).
pub(crate) mod ifa {
    pub const ADDRESS: u16 = 1;
    pub const LOCAL: u16 = 2;
    pub const LABEL: u16 = 3;
    pub const BROADCAST: u16 = 4;
    pub const CACHEINFO: u16 = 6;
    pub const FLAGS: u16 = 8;
    pub const RT_PRIORITY: u16 = 9;
    pub const PROTO: u16 = 11;
}

/// `RTA_*` (`linux/rtnetlink.h`, `enum rtattr_type_t`).
pub(crate) mod rta {
    pub const DST: u16 = 1;
    pub const SRC: u16 = 2;
    pub const IIF: u16 = 3;
    pub const OIF: u16 = 4;
    pub const GATEWAY: u16 = 5;
    pub const PRIORITY: u16 = 6;
    pub const PREFSRC: u16 = 7;
    pub const METRICS: u16 = 8;
    pub const MULTIPATH: u16 = 9;
    pub const FLOW: u16 = 11;
    pub const CACHEINFO: u16 = 12;
    pub const TABLE: u16 = 15;
    pub const MARK: u16 = 16;
    pub const VIA: u16 = 18;
    pub const NEWDST: u16 = 19;
    pub const PREF: u16 = 20;
    pub const ENCAP_TYPE: u16 = 21;
    pub const ENCAP: u16 = 22;
    pub const EXPIRES: u16 = 23;
    pub const PAD: u16 = 24;
    pub const UID: u16 = 25;
    pub const TTL_PROPAGATE: u16 = 26;
    pub const NH_ID: u16 = 30;

    /// What a route attribute this module does not re-create is, for messages.
    pub fn describe(ty: u16) -> String {
        match ty {
            SRC => "a source prefix (RTA_SRC)".into(),
            IIF => "an input interface (RTA_IIF)".into(),
            FLOW => "a realm (RTA_FLOW)".into(),
            MARK => "a mark (RTA_MARK)".into(),
            VIA => "a gateway of another family (RTA_VIA)".into(),
            NEWDST => "an MPLS label (RTA_NEWDST)".into(),
            ENCAP_TYPE | ENCAP => "an encapsulation (RTA_ENCAP)".into(),
            TTL_PROPAGATE => "RTA_TTL_PROPAGATE".into(),
            NH_ID => "a nexthop object (RTA_NH_ID)".into(),
            other => format!("route attribute {other}"),
        }
    }
}

/// `IFLA_MASTER` (`linux/if_link.h`).
const IFLA_MASTER: u16 = 10;

/// `struct rtnexthop` is 8 bytes: len u16, flags u8, hops u8, ifindex i32.
const RTNH_LEN: usize = 8;

/// USER_HZ: `rta_cacheinfo.rta_expires` counts clock ticks of 1/100 s on every Linux ABI.
const USER_HZ: i64 = 100;

/// `RTM_F_CLONED` (`linux/rtnetlink.h`): a cached exception, not a configured route.
const RTM_F_CLONED: u32 = 0x200;

/// `struct ifinfomsg` fields this module reads or writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LinkHdr {
    pub index: u32,
    pub flags: u32,
    pub change: u32,
}

impl LinkHdr {
    /// A request about link `index` that changes no flags.
    pub fn on(index: u32) -> LinkHdr {
        LinkHdr {
            index,
            ..LinkHdr::default()
        }
    }
}

/// `struct ifaddrmsg`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AddrHdr {
    pub family: u8,
    pub prefix_len: u8,
    pub flags: u8,
    pub scope: u8,
    pub index: u32,
}

/// `struct rtmsg`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RouteHdr {
    pub family: u8,
    pub dst_len: u8,
    pub src_len: u8,
    pub tos: u8,
    pub table: u8,
    pub protocol: u8,
    pub scope: u8,
    pub kind: u8,
    pub flags: u32,
}

fn find(attrs: &[Attr], ty: u16) -> Option<&[u8]> {
    attrs
        .iter()
        .find(|(t, _)| *t == ty)
        .map(|(_, p)| p.as_slice())
}

fn u32_of(p: &[u8], what: &str) -> Result<u32, String> {
    let b: [u8; 4] = p
        .get(..4)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| format!("{what}: {} bytes, want 4", p.len()))?;
    Ok(u32::from_ne_bytes(b))
}

/// A NUL-terminated (or unterminated) string attribute.
fn str_of(p: &[u8]) -> String {
    let end = p.iter().position(|b| *b == 0).unwrap_or(p.len());
    String::from_utf8_lossy(&p[..end]).into_owned()
}

pub(crate) fn str_attr(ty: u16, s: &str) -> Attr {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    (ty, v)
}

fn ip_of(family: u8, p: &[u8], what: &str) -> Result<IpAddr, String> {
    match (family, p.len()) {
        (AF_INET, 4) => Ok(IpAddr::V4(Ipv4Addr::new(p[0], p[1], p[2], p[3]))),
        (AF_INET6, 16) => {
            let mut b = [0u8; 16];
            b.copy_from_slice(p);
            Ok(IpAddr::V6(Ipv6Addr::from(b)))
        }
        _ => Err(format!("{what}: {} bytes for family {family}", p.len())),
    }
}

pub(crate) fn ip_bytes(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    }
}

pub(crate) fn family_of(ip: IpAddr) -> u8 {
    if ip.is_ipv6() { AF_INET6 } else { AF_INET }
}

/// Split a nested attribute payload into its attributes (4-byte aligned TLVs, RFC 3549 §2.3.2).
pub(crate) fn parse_nested(mut p: &[u8]) -> Result<Vec<Attr>, String> {
    let mut out = Vec::new();
    while p.len() >= 4 {
        let len = usize::from(u16::from_ne_bytes([p[0], p[1]]));
        let ty = u16::from_ne_bytes([p[2], p[3]]) & !NLA_FLAGS;
        if len < 4 || len > p.len() {
            return Err(format!("nested attribute {ty}: bad length {len}"));
        }
        out.push((ty, p[4..len].to_vec()));
        let padded = (len + 3) & !3;
        p = p.get(padded..).unwrap_or(&[]);
    }
    Ok(out)
}

/// Encode attributes as a nested payload (the inverse of [`parse_nested`]).
pub(crate) fn encode_nested(attrs: &[Attr]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for (ty, p) in attrs {
        let len = u16::try_from(p.len() + 4)
            .map_err(|_| format!("attribute {ty}: {} bytes is too long", p.len()))?;
        out.extend_from_slice(&len.to_ne_bytes());
        out.extend_from_slice(&ty.to_ne_bytes());
        out.extend_from_slice(p);
        out.resize((out.len() + 3) & !3, 0);
    }
    Ok(out)
}

pub(crate) fn decode_link(hdr: &LinkHdr, attrs: &[Attr]) -> Result<Link, String> {
    let name = find(attrs, ifla::IFNAME)
        .map(str_of)
        .ok_or_else(|| format!("link {}: no IFLA_IFNAME", hdr.index))?;
    let mtu = find(attrs, ifla::MTU)
        .map(|p| u32_of(p, "IFLA_MTU"))
        .transpose()?
        .unwrap_or(0);
    let mac = find(attrs, ifla::ADDRESS).and_then(|p| <[u8; 6]>::try_from(p).ok());
    let kind = match find(attrs, ifla::LINKINFO) {
        Some(p) => parse_nested(p)?
            .iter()
            .find(|(t, _)| *t == ifla::INFO_KIND)
            .map(|(_, k)| str_of(k)),
        None => None,
    };
    let altnames = match find(attrs, ifla::PROP_LIST) {
        Some(p) => parse_nested(p)?
            .iter()
            .filter(|(t, _)| *t == ifla::ALT_IFNAME)
            .map(|(_, n)| str_of(n))
            .collect(),
        None => Vec::new(),
    };
    let master = find(attrs, IFLA_MASTER)
        .map(|p| u32_of(p, "IFLA_MASTER"))
        .transpose()?
        .filter(|m| *m != 0);
    Ok(Link {
        index: hdr.index,
        name,
        mac,
        mtu,
        flags: LinkFlags(hdr.flags),
        kind,
        altnames,
        master,
    })
}

pub(crate) fn decode_addr(hdr: &AddrHdr, attrs: &[Attr]) -> Result<Addr, String> {
    let f = hdr.family;
    let address = find(attrs, ifa::ADDRESS)
        .map(|p| ip_of(f, p, "IFA_ADDRESS"))
        .transpose()?;
    let local = find(attrs, ifa::LOCAL)
        .map(|p| ip_of(f, p, "IFA_LOCAL"))
        .transpose()?;
    // IFA_LOCAL is the link's own address when present; IFA_ADDRESS is then the peer
    // (equal to local unless point-to-point). Without IFA_LOCAL, IFA_ADDRESS is local.
    let (own, peer) = match (local, address) {
        (Some(l), Some(a)) if a != l => (l, Some(a)),
        (Some(l), _) => (l, None),
        (None, Some(a)) => (a, None),
        (None, None) => return Err(format!("address on link {}: no IFA_ADDRESS", hdr.index)),
    };
    let broadcast = match find(attrs, ifa::BROADCAST) {
        Some(p) => match ip_of(f, p, "IFA_BROADCAST")? {
            IpAddr::V4(b) => Some(b),
            IpAddr::V6(_) => None,
        },
        None => None,
    };
    let flags = match find(attrs, ifa::FLAGS) {
        Some(p) => u32_of(p, "IFA_FLAGS")?,
        None => u32::from(hdr.flags),
    };
    let lifetime = match find(attrs, ifa::CACHEINFO) {
        // struct ifa_cacheinfo { ifa_prefered, ifa_valid, cstamp, tstamp }
        Some(p) if p.len() >= 8 => Lifetime {
            preferred: u32_of(&p[0..4], "IFA_CACHEINFO")?,
            valid: u32_of(&p[4..8], "IFA_CACHEINFO")?,
        },
        _ => Lifetime::FOREVER,
    };
    Ok(Addr {
        ifindex: hdr.index,
        local: own,
        prefix_len: hdr.prefix_len,
        peer,
        broadcast,
        scope: Scope(hdr.scope),
        flags: AddrFlags(flags),
        label: find(attrs, ifa::LABEL).map(str_of),
        lifetime,
        metric: find(attrs, ifa::RT_PRIORITY)
            .map(|p| u32_of(p, "IFA_RT_PRIORITY"))
            .transpose()?
            .unwrap_or(0),
        proto: find(attrs, ifa::PROTO)
            .and_then(|p| p.first().copied())
            .unwrap_or(0),
    })
}

/// The body of an `RTM_NEWADDR` (everything) or `RTM_DELADDR` (just the key: index, prefix
/// length and addresses; a stale label or lifetime must not stop a delete from matching).
pub(crate) fn encode_addr(a: &Addr, delete: bool) -> (AddrHdr, Vec<Attr>) {
    let family = family_of(a.local);
    let settable = a.flags.0 & AddrFlags::SETTABLE.0;
    let hdr = AddrHdr {
        family,
        prefix_len: a.prefix_len,
        // The low byte in the header for old kernels; IFA_FLAGS (below) wins on new ones.
        flags: if delete { 0 } else { settable.to_le_bytes()[0] },
        scope: if delete { 0 } else { a.scope.0 },
        index: a.ifindex,
    };
    let mut attrs = Vec::new();
    if family == AF_INET {
        attrs.push((ifa::LOCAL, ip_bytes(a.local)));
        attrs.push((ifa::ADDRESS, ip_bytes(a.peer.unwrap_or(a.local))));
    } else if let Some(peer) = a.peer {
        attrs.push((ifa::LOCAL, ip_bytes(a.local)));
        attrs.push((ifa::ADDRESS, ip_bytes(peer)));
    } else {
        attrs.push((ifa::ADDRESS, ip_bytes(a.local)));
    }
    if delete {
        return (hdr, attrs);
    }
    if let Some(b) = a.broadcast {
        attrs.push((ifa::BROADCAST, b.octets().to_vec()));
    }
    if let Some(label) = &a.label {
        attrs.push(str_attr(ifa::LABEL, label));
    }
    attrs.push((ifa::FLAGS, settable.to_ne_bytes().to_vec()));
    if !a.lifetime.is_forever() {
        let mut ci = Vec::with_capacity(16);
        ci.extend_from_slice(&a.lifetime.preferred.to_ne_bytes());
        ci.extend_from_slice(&a.lifetime.valid.to_ne_bytes());
        ci.extend_from_slice(&[0; 8]);
        attrs.push((ifa::CACHEINFO, ci));
    }
    if a.metric != 0 {
        attrs.push((ifa::RT_PRIORITY, a.metric.to_ne_bytes().to_vec()));
    }
    if a.proto != 0 {
        attrs.push((ifa::PROTO, vec![a.proto]));
    }
    (hdr, attrs)
}

/// A route from a dump, or None for what is not a route through a link: cached
/// exceptions, routes with neither an output link nor nexthops (blackhole, unreachable),
/// and families other than IPv4/IPv6. Attributes this module does not re-create mark the
/// route [`Route::unmovable`] rather than being dropped silently.
pub(crate) fn decode_route(hdr: &RouteHdr, attrs: &[Attr]) -> Result<Option<Route>, String> {
    // Long on purpose: One arm per route attribute the kernel sends, each decoded or
    // marking the route unmovable: a table.
    let f = hdr.family;
    if (f != AF_INET && f != AF_INET6) || hdr.flags & RTM_F_CLONED != 0 {
        return Ok(None);
    }
    let oif = find(attrs, rta::OIF)
        .map(|p| u32_of(p, "RTA_OIF"))
        .transpose()?;
    let (multipath, mut unmovable) = match find(attrs, rta::MULTIPATH) {
        Some(p) => decode_multipath(f, p)?,
        None => (Vec::new(), None),
    };
    if oif.is_none() && multipath.is_empty() {
        return Ok(None);
    }
    let carried = [
        rta::DST,
        rta::OIF,
        rta::GATEWAY,
        rta::PRIORITY,
        rta::PREFSRC,
        rta::METRICS,
        rta::MULTIPATH,
        rta::TABLE,
        rta::PREF,
        rta::EXPIRES,
        // Kernel statistics and padding: nothing to re-create.
        rta::CACHEINFO,
        rta::PAD,
        rta::UID,
    ];
    if let Some((t, _)) = attrs.iter().find(|(t, _)| !carried.contains(t)) {
        unmovable.get_or_insert_with(|| rta::describe(*t));
    }
    if hdr.src_len > 0 {
        unmovable.get_or_insert_with(|| rta::describe(rta::SRC));
    }
    let unspecified = if f == AF_INET6 {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    } else {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    };
    let dst_addr = find(attrs, rta::DST)
        .map(|p| ip_of(f, p, "RTA_DST"))
        .transpose()?
        .unwrap_or(unspecified);
    let ip = |ty: u16, what: &str| find(attrs, ty).map(|p| ip_of(f, p, what)).transpose();
    // Only IPv6 routes expire; a dump reports the time left in RTA_CACHEINFO.rta_expires
    // (clock ticks), an add takes RTA_EXPIRES (seconds).
    let expires = if f == AF_INET6 {
        match find(attrs, rta::CACHEINFO).and_then(|p| p.get(8..12)) {
            Some(b) => {
                let ticks = i64::from(i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                (ticks > 0)
                    .then(|| u32::try_from((ticks + USER_HZ - 1) / USER_HZ).unwrap_or(u32::MAX))
            }
            None => None,
        }
    } else {
        None
    };
    Ok(Some(Route {
        // RTA_TABLE carries ids above 255 that do not fit rtm_table.
        table: find(attrs, rta::TABLE)
            .map(|p| u32_of(p, "RTA_TABLE"))
            .transpose()?
            .unwrap_or(u32::from(hdr.table)),
        dst: Prefix::new(dst_addr, hdr.dst_len),
        gateway: ip(rta::GATEWAY, "RTA_GATEWAY")?,
        prefsrc: ip(rta::PREFSRC, "RTA_PREFSRC")?,
        oif: oif.unwrap_or(0),
        metric: find(attrs, rta::PRIORITY)
            .map(|p| u32_of(p, "RTA_PRIORITY"))
            .transpose()?
            .unwrap_or(0),
        scope: Scope(hdr.scope),
        protocol: RouteProtocol(hdr.protocol),
        kind: RouteType(hdr.kind),
        tos: hdr.tos,
        flags: hdr.flags,
        pref: if f == AF_INET6 {
            find(attrs, rta::PREF)
                .and_then(|p| p.first().copied())
                .map(RoutePref)
        } else {
            None
        },
        metrics: find(attrs, rta::METRICS)
            .map(<[u8]>::to_vec)
            .unwrap_or_default(),
        multipath,
        expires,
        unmovable,
    }))
}

/// The `RTA_MULTIPATH` payload: `rtnexthop` structs, each followed by its own attributes
/// (`RTNH_ALIGN`ed to 4 bytes). A nexthop attribute other than `RTA_GATEWAY` makes the
/// route unmovable (the second value names it).
fn decode_multipath(family: u8, mut p: &[u8]) -> Result<(Vec<Nexthop>, Option<String>), String> {
    let mut out = Vec::new();
    let mut unmovable = None;
    while p.len() >= RTNH_LEN {
        let len = usize::from(u16::from_ne_bytes([p[0], p[1]]));
        if len < RTNH_LEN || len > p.len() {
            return Err(format!("RTA_MULTIPATH: bad rtnexthop length {len}"));
        }
        let ifindex = i32::from_ne_bytes([p[4], p[5], p[6], p[7]]);
        let ifindex = u32::try_from(ifindex).map_err(|_| "RTA_MULTIPATH: negative ifindex")?;
        let attrs = parse_nested(&p[RTNH_LEN..len])?;
        if let Some((t, _)) = attrs.iter().find(|(t, _)| *t != rta::GATEWAY) {
            unmovable.get_or_insert_with(|| format!("a nexthop with {}", rta::describe(*t)));
        }
        out.push(Nexthop {
            ifindex,
            gateway: find(&attrs, rta::GATEWAY)
                .map(|g| ip_of(family, g, "RTA_MULTIPATH RTA_GATEWAY"))
                .transpose()?,
            flags: p[2],
            hops: p[3],
        });
        let padded = (len + 3) & !3;
        p = p.get(padded..).unwrap_or(&[]);
    }
    Ok((out, unmovable))
}

/// The inverse of [`decode_multipath`] for what this module re-creates.
fn encode_multipath(hops: &[Nexthop]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for n in hops {
        let attrs = match n.gateway {
            Some(gw) => encode_nested(&[(rta::GATEWAY, ip_bytes(gw))])?,
            None => Vec::new(),
        };
        let len = u16::try_from(RTNH_LEN + attrs.len())
            .map_err(|_| "RTA_MULTIPATH: nexthop too long".to_string())?;
        let ifindex = i32::try_from(n.ifindex).map_err(|_| "RTA_MULTIPATH: ifindex too big")?;
        out.extend_from_slice(&len.to_ne_bytes());
        // Only ONLINK is ours to set; DEAD and LINKDOWN are the kernel's (and refused).
        out.push(n.flags & u8::try_from(ROUTE_F_ONLINK).unwrap_or(0));
        out.push(n.hops);
        out.extend_from_slice(&ifindex.to_ne_bytes());
        out.extend_from_slice(&attrs);
    }
    Ok(out)
}

/// The body of an `RTM_NEWROUTE` or `RTM_DELROUTE` for exactly this route. Err only for a
/// route that cannot be encoded (a multipath nexthop too long or out of range).
pub(crate) fn encode_route(r: &Route) -> Result<(RouteHdr, Vec<Attr>), String> {
    let family = family_of(r.dst.addr);
    let hdr = RouteHdr {
        family,
        dst_len: r.dst.len,
        src_len: 0,
        tos: r.tos,
        // RT_TABLE_UNSPEC in the header when the id needs RTA_TABLE's 32 bits.
        table: u8::try_from(r.table).unwrap_or(0),
        protocol: r.protocol.0,
        scope: r.scope.0,
        kind: r.kind.0,
        flags: r.flags & ROUTE_F_ONLINK,
    };
    let mut attrs = vec![(rta::TABLE, r.table.to_ne_bytes().to_vec())];
    if r.dst.len > 0 {
        attrs.push((rta::DST, ip_bytes(r.dst.addr)));
    }
    if let Some(gw) = r.gateway {
        attrs.push((rta::GATEWAY, ip_bytes(gw)));
    }
    if let Some(src) = r.prefsrc {
        attrs.push((rta::PREFSRC, ip_bytes(src)));
    }
    if r.multipath.is_empty() {
        attrs.push((rta::OIF, r.oif.to_ne_bytes().to_vec()));
    } else {
        attrs.push((rta::MULTIPATH, encode_multipath(&r.multipath)?));
    }
    attrs.push((rta::PRIORITY, r.metric.to_ne_bytes().to_vec()));
    if let (Some(p), true) = (r.pref, family == AF_INET6) {
        attrs.push((rta::PREF, vec![p.0]));
    }
    if let (Some(e), true) = (r.expires, family == AF_INET6) {
        attrs.push((rta::EXPIRES, e.to_ne_bytes().to_vec()));
    }
    if !r.metrics.is_empty() {
        attrs.push((rta::METRICS | NLA_F_NESTED, r.metrics.clone()));
    }
    Ok((hdr, attrs))
}

#[cfg(test)]
mod tests;
