//! The real [`Links`] backend: one rtnetlink socket, neli's plain
//! `socket::synchronous::NlSocketHandle` (not its router), on which the thread that makes a
//! request sends it and reads the replies itself. neli frames the netlink headers and the
//! fixed `ifinfomsg`/`ifaddrmsg`/`rtmsg` bodies; the attributes are built and read by number
//! in `wire.rs`. This is the only file in the crate that imports neli. Per-device sysctls are
//! not netlink: they are files under `/proc/sys` (`sysctl.rs`).
//!
//! Every request that changes something carries `NLM_F_ACK` and succeeds only when the ACK
//! arrives; a kernel error (an `NLMSG_ERROR` with a negative errno) becomes a [`LinkError`]
//! naming what the request was about. Dumps end with `NLMSG_DONE` (the kernel never ACKs a
//! dump). Strict checking is on, so the kernel rejects attributes it would otherwise ignore
//! (Linux ≥ 4.20).
//!
//! Replies are awaited without a timeout: the kernel handles an rtnetlink request inside
//! the `sendmsg` that carries it (a dump continues as we read it), so the answer is already
//! queued, or on its way, when `send` returns.
//!
//! Threads: none of its own. neli's router would start an epoll thread that wakes up ten
//! times a second for good; a plain socket read by the requesting thread costs nothing while
//! idle. One request is in flight at a time (a mutex around the socket); replies are matched
//! by sequence number, and replies left over from an exchange that ended early are skipped.

use std::fmt::Debug;
use std::sync::Mutex;

use neli::consts::nl::NlmF;
use neli::consts::rtnl::{
    Ifa, IfaF, Iff, Ifla, RtAddrFamily, RtScope, RtTable, Rta, RtaType, Rtm, RtmF, Rtn, Rtprot,
};
use neli::consts::socket::NlFamily;
use neli::nl::NlPayload;
use neli::nl::NlmsghdrBuilder;
use neli::rtnl::{
    Ifaddrmsg, IfaddrmsgBuilder, Ifinfomsg, IfinfomsgBuilder, RtattrBuilder, Rtmsg, RtmsgBuilder,
};
use neli::socket::synchronous::NlSocketHandle;
use neli::types::{Buffer, RtBuffer};
use neli::utils::Groups;
use neli::{FromBytesWithInput, Size, ToBytes};

use super::types::{Addr, Link, LinkFlags, Route, RouteProtocol, TABLE_LOCAL};
use super::wire::{self, AddrHdr, Attr, LinkHdr, RouteHdr};
use super::{LinkError, Links, valid_ifname};

/// `RTM_DELLINKPROP` (`linux/rtnetlink.h`, Linux ≥ 5.5): not among neli's `Rtm` variants.
const RTM_DELLINKPROP: u16 = 109;
/// How many times a dump is read when the kernel says it was interrupted.
const DUMP_ATTEMPTS: usize = 3;
/// `NLA_F_NESTED | NLA_F_NET_BYTEORDER`: flag bits of an attribute type.
const NLA_FLAGS: u16 = 0xc000;

/// rtnetlink for the network namespace the process is in.
pub struct Rtnl {
    /// The socket and the next sequence number; held for a whole exchange.
    socket: Mutex<(NlSocketHandle, u32)>,
}

/// `NLMSG_ERROR` and `NLMSG_DONE` (`linux/netlink.h`).
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;

impl Rtnl {
    /// Open the socket. Needs no privilege; changing anything needs CAP_NET_ADMIN.
    pub fn connect() -> Result<Rtnl, LinkError> {
        let what = "open rtnetlink socket";
        let socket =
            NlSocketHandle::connect(NlFamily::Route, None, Groups::empty()).map_err(|e| {
                LinkError::Netlink {
                    what: what.into(),
                    detail: e.to_string(),
                }
            })?;
        socket
            .enable_strict_checking(true)
            .map_err(|e| LinkError::Netlink {
                what: "enable NETLINK_GET_STRICT_CHK".into(),
                detail: e.to_string(),
            })?;
        Ok(Rtnl {
            socket: Mutex::new((socket, 1)),
        })
    }

    /// Send one request and read every reply. `decode` turns each reply body into a value
    /// (or skips it). Non-dump requests must end with an ACK. A dump the kernel marks
    /// `NLM_F_DUMP_INTR` (the table changed while it was being read, so the result may
    /// miss or repeat entries) is re-run, up to [`DUMP_ATTEMPTS`] times in all.
    fn exchange<P, T>(
        &self,
        what: &str,
        ty: u16,
        flags: NlmF,
        body: P,
        mut decode: impl FnMut(&P) -> Result<Option<T>, String>,
    ) -> Result<Vec<T>, LinkError>
    where
        P: Size + ToBytes + FromBytesWithInput<Input = usize> + Debug + Clone,
    {
        // Long on purpose: The netlink request/response loop in one piece: send, read until
        // DONE or ACK, re-run an interrupted dump; its states share the buffers.
        let dump = flags.contains(NlmF::DUMP);
        let net = |detail: String| LinkError::Netlink {
            what: what.into(),
            detail,
        };
        let mut guard = self.socket.lock().unwrap_or_else(|e| e.into_inner());
        let (socket, next_seq) = &mut *guard;
        for _ in 0..DUMP_ATTEMPTS {
            let seq = *next_seq;
            *next_seq = next_seq.wrapping_add(1);
            let msg = NlmsghdrBuilder::default()
                .nl_type(Rtm::from(ty))
                .nl_flags(flags | NlmF::REQUEST)
                .nl_pid(socket.pid())
                .nl_seq(seq)
                .nl_payload(NlPayload::Payload(body.clone()))
                .build()
                .map_err(|e| build_error(what, e))?;
            socket
                .send(&msg)
                .map_err(|e| net(format!("send failed: {e}")))?;
            let mut out = Vec::new();
            let mut interrupted = false;
            // Ends at the ACK or error (a request), NLMSG_DONE (a dump) or the one reply
            // of a GET without NLM_F_ACK.
            let mut done = false;
            let mut acked = false;
            while !done {
                let (msgs, _) = socket
                    .recv::<Rtm, P>()
                    .map_err(|e| net(format!("receive failed: {e}")))?;
                for m in msgs {
                    let m = m.map_err(|e| net(format!("cannot parse a reply: {e}")))?;
                    if *m.nl_seq() != seq || *m.nl_pid() != socket.pid() {
                        continue;
                    }
                    interrupted |= m.nl_flags().contains(NlmF::DUMP_INTR);
                    let nl_type = u16::from(*m.nl_type());
                    match m.nl_payload() {
                        NlPayload::Ack(_) => {
                            acked = true;
                            done = true;
                        }
                        NlPayload::Err(e) => return Err(LinkError::from_errno(-*e.error(), what)),
                        // A dump that failed part-way says so in its NLMSG_DONE.
                        NlPayload::DumpExtAck(e) if *e.error() != 0 => {
                            return Err(LinkError::from_errno(-*e.error(), what));
                        }
                        NlPayload::Payload(p) if nl_type != NLMSG_DONE => {
                            if let Some(v) = decode(p).map_err(&net)? {
                                out.push(v);
                            }
                            if !m.nl_flags().contains(NlmF::MULTI) && !flags.contains(NlmF::ACK) {
                                done = true;
                            }
                        }
                        _ => {}
                    }
                    if done || nl_type == NLMSG_DONE || nl_type == NLMSG_ERROR {
                        done = true;
                        break;
                    }
                }
            }
            if dump && interrupted {
                log::debug!("netlink dump interrupted, re-reading what=\"{what}\"");
                continue;
            }
            if !dump && flags.contains(NlmF::ACK) && !acked {
                return Err(net("the kernel sent no ACK".into()));
            }
            return Ok(out);
        }
        Err(net(format!(
            "dump interrupted by concurrent changes {DUMP_ATTEMPTS} times"
        )))
    }

    /// A request whose only reply is the ACK.
    fn ack<P>(&self, what: &str, ty: u16, flags: NlmF, body: P) -> Result<(), LinkError>
    where
        P: Size + ToBytes + FromBytesWithInput<Input = usize> + Debug + Clone,
    {
        self.exchange(what, ty, flags | NlmF::ACK, body, |_| Ok(None::<()>))
            .map(drop)
    }

    fn get_link(&self, what: &str, index: u32, attrs: Vec<Attr>) -> Result<Link, LinkError> {
        let body = link_msg(
            what,
            LinkHdr {
                index,
                ..LinkHdr::default()
            },
            attrs,
        )?;
        let mut links =
            self.exchange(what, u16::from(Rtm::Getlink), NlmF::ACK, body, decode_link)?;
        match (links.pop(), links.is_empty()) {
            (Some(link), true) => Ok(link),
            _ => Err(LinkError::Netlink {
                what: what.into(),
                detail: "expected exactly one RTM_NEWLINK reply".into(),
            }),
        }
    }

    /// Requests name links by index; when one fails, say which link that was (one more
    /// request, on the error path only; the index stays if the link is gone).
    fn named<T>(&self, ifindex: u32, r: Result<T, LinkError>) -> Result<T, LinkError> {
        r.map_err(|e| match self.link_by_index(ifindex) {
            Ok(link) => e.map_what(|w| {
                w.replace(
                    &format!("link index {ifindex}"),
                    &format!("link {} (index {ifindex})", link.name),
                )
            }),
            Err(_) => e,
        })
    }

    fn set_link(&self, what: &str, hdr: LinkHdr, attrs: Vec<Attr>) -> Result<(), LinkError> {
        let body = link_msg(what, hdr, attrs)?;
        self.ack(what, u16::from(Rtm::Setlink), NlmF::empty(), body)
    }
}

impl Links for Rtnl {
    fn links(&self) -> Result<Vec<Link>, LinkError> {
        let what = "list links";
        let body = link_msg(what, LinkHdr::default(), Vec::new())?;
        self.exchange(what, u16::from(Rtm::Getlink), NlmF::DUMP, body, decode_link)
    }

    fn link_by_name(&self, name: &str) -> Result<Link, LinkError> {
        let what = format!("link {name}");
        if !valid_ifname(name) {
            return Err(LinkError::Invalid {
                what,
                detail: "not a valid interface name".into(),
            });
        }
        self.get_link(&what, 0, vec![wire::str_attr(wire::ifla::IFNAME, name)])
    }

    fn link_by_index(&self, ifindex: u32) -> Result<Link, LinkError> {
        self.get_link(&format!("link index {ifindex}"), ifindex, Vec::new())
    }

    fn set_up(&self, ifindex: u32) -> Result<(), LinkError> {
        let hdr = LinkHdr {
            index: ifindex,
            flags: LinkFlags::UP.0,
            change: LinkFlags::UP.0,
        };
        let what = format!("set link index {ifindex} up");
        self.named(ifindex, self.set_link(&what, hdr, Vec::new()))
    }

    fn set_down(&self, ifindex: u32) -> Result<(), LinkError> {
        let hdr = LinkHdr {
            index: ifindex,
            flags: 0,
            change: LinkFlags::UP.0,
        };
        let what = format!("set link index {ifindex} down");
        self.named(ifindex, self.set_link(&what, hdr, Vec::new()))
    }

    fn set_mtu(&self, ifindex: u32, mtu: u32) -> Result<(), LinkError> {
        let attrs = vec![(wire::ifla::MTU, mtu.to_ne_bytes().to_vec())];
        let what = format!("set mtu {mtu} on link index {ifindex}");
        self.named(ifindex, self.set_link(&what, LinkHdr::on(ifindex), attrs))
    }

    fn set_name(&self, ifindex: u32, name: &str) -> Result<(), LinkError> {
        let what = format!("rename link index {ifindex} to {name}");
        if !valid_ifname(name) {
            return Err(LinkError::Invalid {
                what,
                detail: "not a valid interface name".into(),
            });
        }
        let attrs = vec![wire::str_attr(wire::ifla::IFNAME, name)];
        self.named(ifindex, self.set_link(&what, LinkHdr::on(ifindex), attrs))
    }

    fn del_altname(&self, ifindex: u32, altname: &str) -> Result<(), LinkError> {
        let what = format!("remove altname {altname} of link index {ifindex}");
        let nest = wire::encode_nested(&[wire::str_attr(wire::ifla::ALT_IFNAME, altname)])
            .map_err(|detail| LinkError::Invalid {
                what: what.clone(),
                detail,
            })?;
        let attrs = vec![(wire::ifla::PROP_LIST | wire::NLA_F_NESTED, nest)];
        let body = link_msg(&what, LinkHdr::on(ifindex), attrs)?;
        let r = self.ack(&what, RTM_DELLINKPROP, NlmF::empty(), body);
        self.named(ifindex, r)
    }

    fn addrs(&self, ifindex: Option<u32>) -> Result<Vec<Addr>, LinkError> {
        let what = match ifindex {
            Some(i) => format!("list addresses of link index {i}"),
            None => "list addresses".to_string(),
        };
        // With strict checking the kernel filters on ifa_index itself; filter here as well
        // so the result does not depend on that.
        let hdr = AddrHdr {
            index: ifindex.unwrap_or(0),
            ..AddrHdr::default()
        };
        let body = addr_msg(&what, hdr, Vec::new())?;
        self.exchange(&what, u16::from(Rtm::Getaddr), NlmF::DUMP, body, |m| {
            let a = decode_addr(m)?;
            Ok(a.filter(|a| ifindex.is_none_or(|i| a.ifindex == i)))
        })
    }

    fn add_addr(&self, addr: &Addr) -> Result<(), LinkError> {
        let what = format!("add address {addr} to link index {}", addr.ifindex);
        let (hdr, attrs) = wire::encode_addr(addr, false);
        let body = addr_msg(&what, hdr, attrs)?;
        let flags = NlmF::CREATE | NlmF::EXCL;
        let r = self.ack(&what, u16::from(Rtm::Newaddr), flags, body);
        self.named(addr.ifindex, r)
    }

    fn del_addr(&self, addr: &Addr) -> Result<(), LinkError> {
        let what = format!("delete address {addr} from link index {}", addr.ifindex);
        let (hdr, attrs) = wire::encode_addr(addr, true);
        let body = addr_msg(&what, hdr, attrs)?;
        let r = self.ack(&what, u16::from(Rtm::Deladdr), NlmF::empty(), body);
        self.named(addr.ifindex, r)
    }

    fn routes(&self, ifindex: u32) -> Result<Vec<Route>, LinkError> {
        let what = format!("list routes of link index {ifindex}");
        let mut out = Vec::new();
        // One dump per family: AF_UNSPEC would also dump multicast (ipmr) tables.
        for family in [wire::AF_INET, wire::AF_INET6] {
            let hdr = RouteHdr {
                family,
                ..RouteHdr::default()
            };
            let body = route_msg(&what, hdr, Vec::new())?;
            out.extend(
                self.exchange(&what, u16::from(Rtm::Getroute), NlmF::DUMP, body, |m| {
                    let r = decode_route(m)?;
                    Ok(r.filter(|r| r.uses(ifindex) && !kernel_local(r)))
                })?,
            );
        }
        Ok(out)
    }

    fn add_route(&self, route: &Route) -> Result<(), LinkError> {
        let via = route_link(route);
        let what = format!("add route {route} on link index {via}");
        let (hdr, attrs) = wire::encode_route(route).map_err(|e| build_error(&what, e))?;
        let body = route_msg(&what, hdr, attrs)?;
        // A multipath route may exist already with only its other nexthops (IPv6 keeps the
        // survivors when one nexthop's link goes away): replace it with the whole set.
        let flags = if route.multipath.is_empty() {
            NlmF::CREATE | NlmF::EXCL
        } else {
            NlmF::CREATE | NlmF::REPLACE
        };
        let r = self.ack(&what, u16::from(Rtm::Newroute), flags, body);
        self.named(via, r)
    }

    fn del_route(&self, route: &Route) -> Result<(), LinkError> {
        let via = route_link(route);
        let what = format!("delete route {route} on link index {via}");
        let (hdr, attrs) = wire::encode_route(route).map_err(|e| build_error(&what, e))?;
        let body = route_msg(&what, hdr, attrs)?;
        let r = self.ack(&what, u16::from(Rtm::Delroute), NlmF::empty(), body);
        self.named(via, r)
    }

    // Per-device sysctls are /proc/sys files (netlink cannot set IPv6 device settings).
    fn sysctl(&self, dev: &str, key: super::DevSysctl) -> Result<Option<String>, LinkError> {
        super::sysctl::read(dev, key)
    }

    fn set_sysctl(&self, dev: &str, key: super::DevSysctl, value: &str) -> Result<(), LinkError> {
        super::sysctl::write(dev, key, value)
    }

    fn sysctl_all(&self, key: super::DevSysctl) -> Result<Option<String>, LinkError> {
        super::sysctl::read_all(key)
    }
}

/// The link a route is about, for messages: its output link or its first nexthop's.
fn route_link(r: &Route) -> u32 {
    r.multipath.first().map_or(r.oif, |n| n.ifindex)
}

/// Local, broadcast and anycast routes the kernel itself keeps in the local table for a
/// link's addresses: they come and go with the addresses, so they are not moved.
fn kernel_local(r: &Route) -> bool {
    r.table == TABLE_LOCAL && r.protocol == RouteProtocol::KERNEL
}

fn build_error(what: &str, e: impl std::fmt::Display) -> LinkError {
    LinkError::Netlink {
        what: what.into(),
        detail: format!("cannot build request: {e}"),
    }
}

fn rt_buffer<T>(what: &str, attrs: Vec<Attr>) -> Result<RtBuffer<T, Buffer>, LinkError>
where
    T: RtaType + From<u16>,
{
    let mut buf = RtBuffer::new();
    for (ty, payload) in attrs {
        let attr = RtattrBuilder::default()
            .rta_type(T::from(ty))
            .rta_payload(Buffer::from(payload))
            .build()
            .map_err(|e| build_error(what, e))?;
        buf.push(attr);
    }
    Ok(buf)
}

fn attrs_of<T>(buf: &RtBuffer<T, Buffer>) -> Vec<Attr>
where
    T: RtaType,
    for<'a> u16: From<&'a T>,
{
    buf.iter()
        .map(|a| {
            (
                u16::from(a.rta_type()) & !NLA_FLAGS,
                a.rta_payload().as_ref().to_vec(),
            )
        })
        .collect()
}

fn link_msg(what: &str, hdr: LinkHdr, attrs: Vec<Attr>) -> Result<Ifinfomsg, LinkError> {
    let index = i32::try_from(hdr.index)
        .map_err(|_| build_error(what, format!("ifindex {} out of range", hdr.index)))?;
    IfinfomsgBuilder::default()
        .ifi_family(RtAddrFamily::Unspecified)
        .ifi_index(index)
        .ifi_flags(Iff::from_bits_retain(hdr.flags))
        .ifi_change(Iff::from_bits_retain(hdr.change))
        .rtattrs(rt_buffer::<Ifla>(what, attrs)?)
        .build()
        .map_err(|e| build_error(what, e))
}

fn decode_link(m: &Ifinfomsg) -> Result<Option<Link>, String> {
    let index = u32::try_from(*m.ifi_index()).map_err(|_| "negative ifi_index".to_string())?;
    let hdr = LinkHdr {
        index,
        flags: m.ifi_flags().bits(),
        change: 0,
    };
    wire::decode_link(&hdr, &attrs_of(m.rtattrs())).map(Some)
}

fn addr_msg(what: &str, hdr: AddrHdr, attrs: Vec<Attr>) -> Result<Ifaddrmsg, LinkError> {
    IfaddrmsgBuilder::default()
        .ifa_family(RtAddrFamily::from(hdr.family))
        .ifa_prefixlen(hdr.prefix_len)
        .ifa_flags(IfaF::from_bits_retain(hdr.flags))
        .ifa_scope(RtScope::from(hdr.scope))
        .ifa_index(hdr.index)
        .rtattrs(rt_buffer::<Ifa>(what, attrs)?)
        .build()
        .map_err(|e| build_error(what, e))
}

fn decode_addr(m: &Ifaddrmsg) -> Result<Option<Addr>, String> {
    let family = u8::from(m.ifa_family());
    if family != wire::AF_INET && family != wire::AF_INET6 {
        return Ok(None);
    }
    let hdr = AddrHdr {
        family,
        prefix_len: *m.ifa_prefixlen(),
        flags: m.ifa_flags().bits(),
        scope: u8::from(m.ifa_scope()),
        index: *m.ifa_index(),
    };
    wire::decode_addr(&hdr, &attrs_of(m.rtattrs())).map(Some)
}

fn route_msg(what: &str, hdr: RouteHdr, attrs: Vec<Attr>) -> Result<Rtmsg, LinkError> {
    RtmsgBuilder::default()
        .rtm_family(RtAddrFamily::from(hdr.family))
        .rtm_dst_len(hdr.dst_len)
        .rtm_src_len(hdr.src_len)
        .rtm_tos(hdr.tos)
        .rtm_table(RtTable::from(hdr.table))
        .rtm_protocol(Rtprot::from(hdr.protocol))
        .rtm_scope(RtScope::from(hdr.scope))
        .rtm_type(Rtn::from(hdr.kind))
        .rtm_flags(RtmF::from_bits_retain(hdr.flags))
        .rtattrs(rt_buffer::<Rta>(what, attrs)?)
        .build()
        .map_err(|e| build_error(what, e))
}

fn decode_route(m: &Rtmsg) -> Result<Option<Route>, String> {
    let hdr = RouteHdr {
        family: u8::from(m.rtm_family()),
        dst_len: *m.rtm_dst_len(),
        src_len: *m.rtm_src_len(),
        tos: *m.rtm_tos(),
        table: u8::from(m.rtm_table()),
        protocol: u8::from(m.rtm_protocol()),
        scope: u8::from(m.rtm_scope()),
        kind: u8::from(m.rtm_type()),
        flags: m.rtm_flags().bits(),
    };
    wire::decode_route(&hdr, &attrs_of(m.rtattrs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The controller shares one backend between threads.
    #[test]
    fn backends_are_send_and_sync() {
        fn shareable<T: Send + Sync>() {}
        shareable::<Rtnl>();
        shareable::<crate::netlink::FakeLinks>();
    }
}
