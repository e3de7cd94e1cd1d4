//! Value types for links, addresses and routes, as rtnetlink reports them.
//!
//! Plain data: no sockets, no neli. Numeric fields the kernel defines as open sets (scope,
//! protocol, route type, flags) are newtypes over the wire integer with associated consts, so
//! values this code has no name for still round-trip unchanged.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `IFF_*` link flags (`linux/if.h`, `ifi_flags` of `struct ifinfomsg`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LinkFlags(pub u32);

impl LinkFlags {
    pub const UP: LinkFlags = LinkFlags(0x1);
    pub const BROADCAST: LinkFlags = LinkFlags(0x2);
    pub const LOOPBACK: LinkFlags = LinkFlags(0x8);
    pub const POINTOPOINT: LinkFlags = LinkFlags(0x10);
    pub const RUNNING: LinkFlags = LinkFlags(0x40);
    pub const NOARP: LinkFlags = LinkFlags(0x80);
    pub const MULTICAST: LinkFlags = LinkFlags(0x1000);
    pub const LOWER_UP: LinkFlags = LinkFlags(0x1_0000);

    pub fn contains(self, other: LinkFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

/// A network interface as `RTM_GETLINK` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    pub index: u32,
    pub name: String,
    /// `IFLA_ADDRESS` when it is 6 bytes long (Ethernet-like); None for other link types.
    pub mac: Option<[u8; 6]>,
    pub mtu: u32,
    pub flags: LinkFlags,
    /// `IFLA_INFO_KIND` ("veth", "tun", "openvswitch", …); None for plain hardware NICs.
    pub kind: Option<String>,
    /// `IFLA_ALT_IFNAME`s (Linux ≥ 5.5). udev may add the old name here after a rename.
    pub altnames: Vec<String>,
    /// `IFLA_MASTER`: the bond, bridge or VRF this link is enslaved to.
    pub master: Option<u32>,
}

impl Link {
    pub fn is_up(&self) -> bool {
        self.flags.contains(LinkFlags::UP)
    }
}

/// `RT_SCOPE_*` (`linux/rtnetlink.h`, `enum rt_scope_t`), used by addresses and routes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scope(pub u8);

impl Scope {
    pub const UNIVERSE: Scope = Scope(0);
    pub const SITE: Scope = Scope(200);
    pub const LINK: Scope = Scope(253);
    pub const HOST: Scope = Scope(254);
    pub const NOWHERE: Scope = Scope(255);
}

/// `IFA_F_*` address flags (`linux/if_addr.h`). The low 8 bits travel in `ifa_flags`, the
/// full 32 bits in the `IFA_FLAGS` attribute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AddrFlags(pub u32);

impl AddrFlags {
    pub const SECONDARY: AddrFlags = AddrFlags(0x01);
    pub const NODAD: AddrFlags = AddrFlags(0x02);
    pub const OPTIMISTIC: AddrFlags = AddrFlags(0x04);
    pub const DADFAILED: AddrFlags = AddrFlags(0x08);
    pub const HOMEADDRESS: AddrFlags = AddrFlags(0x10);
    pub const DEPRECATED: AddrFlags = AddrFlags(0x20);
    pub const TENTATIVE: AddrFlags = AddrFlags(0x40);
    pub const PERMANENT: AddrFlags = AddrFlags(0x80);
    pub const MANAGETEMPADDR: AddrFlags = AddrFlags(0x100);
    pub const NOPREFIXROUTE: AddrFlags = AddrFlags(0x200);
    pub const MCAUTOJOIN: AddrFlags = AddrFlags(0x400);
    pub const STABLE_PRIVACY: AddrFlags = AddrFlags(0x800);

    /// The flags `RTM_NEWADDR` accepts from user space; the kernel computes the others
    /// (SECONDARY, PERMANENT, TENTATIVE, …) itself (`inet6_rtm_newaddr` masks to exactly this
    /// set in net/ipv6/addrconf.c; IPv4 keeps what it is given, so send no more than this).
    pub const SETTABLE: AddrFlags = AddrFlags(
        Self::NODAD.0
            | Self::OPTIMISTIC.0
            | Self::HOMEADDRESS.0
            | Self::MANAGETEMPADDR.0
            | Self::NOPREFIXROUTE.0
            | Self::MCAUTOJOIN.0,
    );

    pub fn contains(self, other: AddrFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

/// `IFA_CACHEINFO` lifetimes in seconds; [`Lifetime::FOREVER`] (`INFINITY_LIFE_TIME`) for
/// addresses that never expire. DHCP/SLAAC addresses have finite ones, and moving an address
/// must keep them (iproute2 prints them as `valid_lft` / `preferred_lft`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Lifetime {
    pub valid: u32,
    pub preferred: u32,
}

impl Lifetime {
    pub const FOREVER_SECS: u32 = u32::MAX;
    pub const FOREVER: Lifetime = Lifetime {
        valid: u32::MAX,
        preferred: u32::MAX,
    };

    pub fn is_forever(&self) -> bool {
        *self == Self::FOREVER
    }
}

/// An address prefix such as `192.0.2.0/24` or the default route's `::/0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl Prefix {
    pub fn new(addr: IpAddr, len: u8) -> Prefix {
        Prefix { addr, len }
    }

    /// `0.0.0.0/0` or `::/0` of the family of `like`.
    pub fn default_for(like: IpAddr) -> Prefix {
        let addr = match like {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        Prefix { addr, len: 0 }
    }

    pub fn is_default(&self) -> bool {
        self.len == 0
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// True for 169.254.0.0/16 and fe80::/10: addresses a link gets (or could get) by itself and
/// that must not be copied to another link (Antrea's `GetInterfaceConfig`;
/// docs/antrea-compat.md#interface-config-capture).
pub fn is_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

/// One address of a link (`struct ifaddrmsg` + attributes).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Addr {
    pub ifindex: u32,
    /// The link's own address (`IFA_LOCAL`, or `IFA_ADDRESS` when there is no `IFA_LOCAL`).
    pub local: IpAddr,
    pub prefix_len: u8,
    /// The far end of a point-to-point address (`IFA_ADDRESS` when it differs from local).
    pub peer: Option<IpAddr>,
    /// `IFA_BROADCAST` (IPv4 only), when one was configured.
    pub broadcast: Option<Ipv4Addr>,
    pub scope: Scope,
    pub flags: AddrFlags,
    /// `IFA_LABEL` (IPv4 only): the link's name, or `<name>:<alias>`.
    pub label: Option<String>,
    pub lifetime: Lifetime,
    /// `IFA_RT_PRIORITY`: the metric of the prefix route the kernel adds (0 = default).
    pub metric: u32,
    /// `IFA_PROTO` (Linux ≥ 6.1): who added the address (0 = unspecified).
    pub proto: u8,
}

impl Addr {
    /// A permanent address with everything else at its default.
    pub fn new(ifindex: u32, local: IpAddr, prefix_len: u8) -> Addr {
        Addr {
            ifindex,
            local,
            prefix_len,
            peer: None,
            broadcast: None,
            scope: Scope::UNIVERSE,
            flags: AddrFlags::default(),
            label: None,
            lifetime: Lifetime::FOREVER,
            metric: 0,
            proto: 0,
        }
    }

    pub fn is_ipv6(&self) -> bool {
        self.local.is_ipv6()
    }
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.local, self.prefix_len)
    }
}

/// `RTPROT_*` (`linux/rtnetlink.h`): who installed a route.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RouteProtocol(pub u8);

impl RouteProtocol {
    pub const UNSPEC: RouteProtocol = RouteProtocol(0);
    pub const REDIRECT: RouteProtocol = RouteProtocol(1);
    /// Derived from an address (connected routes, fe80::/64); the kernel re-creates these.
    pub const KERNEL: RouteProtocol = RouteProtocol(2);
    /// What `ip route add` uses unless told otherwise.
    pub const BOOT: RouteProtocol = RouteProtocol(3);
    pub const STATIC: RouteProtocol = RouteProtocol(4);
    pub const RA: RouteProtocol = RouteProtocol(9);
    pub const DHCP: RouteProtocol = RouteProtocol(16);
}

/// `RTN_*` (`linux/rtnetlink.h`): the route type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RouteType(pub u8);

impl RouteType {
    pub const UNSPEC: RouteType = RouteType(0);
    pub const UNICAST: RouteType = RouteType(1);
    pub const LOCAL: RouteType = RouteType(2);
    pub const BROADCAST: RouteType = RouteType(3);
    pub const MULTICAST: RouteType = RouteType(5);
    pub const BLACKHOLE: RouteType = RouteType(6);
    pub const UNREACHABLE: RouteType = RouteType(7);
}

/// `ICMPV6_ROUTER_PREF_*` (`linux/icmpv6.h`), the IPv6-only `RTA_PREF` attribute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RoutePref(pub u8);

impl RoutePref {
    pub const MEDIUM: RoutePref = RoutePref(0);
    pub const HIGH: RoutePref = RoutePref(1);
    pub const LOW: RoutePref = RoutePref(3);
}

/// `RT_TABLE_MAIN`: the table of routes added without a `table`.
pub const TABLE_MAIN: u32 = 254;
/// `RT_TABLE_LOCAL`: local and broadcast routes the kernel derives from addresses.
pub const TABLE_LOCAL: u32 = 255;

/// `RTNH_F_ONLINK` (`linux/rtnetlink.h`): "the gateway is on this link, do not check".
pub const ROUTE_F_ONLINK: u32 = 0x4;

/// One nexthop of a multipath route (`struct rtnexthop` + `RTA_GATEWAY`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Nexthop {
    /// The output link. In a captured [`crate::netlink::NicConfig`], 0 stands for "the
    /// captured link itself", so the route can be re-created on another link.
    pub ifindex: u32,
    pub gateway: Option<IpAddr>,
    /// `rtnh_hops`: the weight minus one (iproute2 prints `weight rtnh_hops + 1`).
    pub hops: u8,
    /// `rtnh_flags`; only [`ROUTE_F_ONLINK`] is sent when adding (the kernel sets `dead`
    /// and `linkdown` itself).
    pub flags: u8,
}

/// A route through one link, or a multipath route with a nexthop through it
/// (`struct rtmsg` + attributes), in any table.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Route {
    pub table: u32,
    /// Destination; `len == 0` is a default route.
    pub dst: Prefix,
    pub gateway: Option<IpAddr>,
    /// `RTA_PREFSRC`: the source address for locally generated packets.
    pub prefsrc: Option<IpAddr>,
    /// `RTA_OIF`; 0 for a multipath route (its links are in `multipath`).
    pub oif: u32,
    /// `RTA_PRIORITY` (what iproute2 calls metric).
    pub metric: u32,
    pub scope: Scope,
    pub protocol: RouteProtocol,
    pub kind: RouteType,
    pub tos: u8,
    /// `rtm_flags`; only [`ROUTE_F_ONLINK`] is meaningful when adding.
    pub flags: u32,
    /// `RTA_PREF` (IPv6 only).
    pub pref: Option<RoutePref>,
    /// The raw `RTA_METRICS` nest (mtu, advmss, …), re-sent unchanged; empty when none.
    pub metrics: Vec<u8>,
    /// `RTA_MULTIPATH`: the nexthops of an ECMP route; empty for a single-path route.
    pub multipath: Vec<Nexthop>,
    /// `RTA_EXPIRES` (IPv6): seconds left for a route learnt from a router advertisement.
    pub expires: Option<u32>,
    /// Why this route cannot be re-created exactly from the fields above (a nexthop object,
    /// an encapsulation, a source prefix, …), naming the attribute; None when it can.
    /// A NIC with such a route is not taken over.
    pub unmovable: Option<String>,
}

impl Route {
    /// A unicast main-table route with every optional field unset.
    pub fn new(dst: Prefix, oif: u32) -> Route {
        Route {
            table: TABLE_MAIN,
            dst,
            gateway: None,
            prefsrc: None,
            oif,
            metric: 0,
            scope: Scope::UNIVERSE,
            protocol: RouteProtocol::BOOT,
            kind: RouteType::UNICAST,
            tos: 0,
            flags: 0,
            pref: None,
            metrics: Vec::new(),
            multipath: Vec::new(),
            expires: None,
            unmovable: None,
        }
    }

    pub fn is_ipv6(&self) -> bool {
        self.dst.addr.is_ipv6()
    }

    /// The route leaves through link `ifindex` (its output link, or one of its nexthops).
    pub fn uses(&self, ifindex: u32) -> bool {
        if self.multipath.is_empty() {
            self.oif == ifindex
        } else {
            self.multipath.iter().any(|n| n.ifindex == ifindex)
        }
    }

    /// It needs a gateway (a single-path route via one, or any multipath route).
    pub fn has_gateway(&self) -> bool {
        self.gateway.is_some() || !self.multipath.is_empty()
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.dst.is_default() {
            write!(f, "default")?;
        } else {
            write!(f, "{}", self.dst)?;
        }
        if let Some(gw) = self.gateway {
            write!(f, " via {gw}")?;
        }
        if self.multipath.is_empty() {
            write!(f, " oif {}", self.oif)?;
        }
        for n in &self.multipath {
            write!(f, " nexthop")?;
            if let Some(gw) = n.gateway {
                write!(f, " via {gw}")?;
            }
            write!(f, " oif {} weight {}", n.ifindex, u16::from(n.hops) + 1)?;
        }
        if self.table != TABLE_MAIN {
            write!(f, " table {}", self.table)?;
        }
        write!(f, " metric {}", self.metric)
    }
}
