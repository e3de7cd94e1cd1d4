//! A Reject rule's answer, as bytes: the packet a rejected packet gets back (Antrea
//! `pkg/agent/controller/networkpolicy/reject.go`, `pkg/agent/openflow/packetout.go`;
//! reference Part B §2.4). Pure: a frame in ([`parse`]), a frame out ([`answer`]); no
//! sockets, no OpenFlow (the packet-in thread, `controller::policy::packetin`, does those).
//!
//! - TCP (not a RST): a RST|ACK from the original destination, ports swapped, `seq` = the
//!   segment's `ack` (0 without the ACK flag), `ack` = its `seq` + its length (payload,
//!   plus one each for SYN and FIN): RFC 9293 §3.10.7.1's reset for a closed port, with ACK
//!   always set, as Antrea sends it and as Linux needs it in SYN-SENT (a RST without
//!   an acceptable ACK is ignored there). Antrea sends `seq` 0 and `ack` = `seq` + 1
//!   whatever the segment: right for a SYN, ignored by the peer for anything else.
//! - Anything else over IPv4: ICMP destination unreachable, code 10 "host administratively
//!   prohibited" (Antrea's choice): Linux maps it to `EHOSTUNREACH`, fatal, so a connected
//!   UDP socket fails with "No route to host" (`net/ipv4/icmp.c` `icmp_err_convert`).
//!   It quotes the original datagram from its IP header on, up to the 576 bytes an
//!   ICMP error may take (RFC 1812 §4.3.2.3), never less than the header and 8 bytes when
//!   the original has them (RFC 792): Linux finds the UDP socket by that quoted header.
//! - Anything else over IPv6: ICMPv6 destination unreachable, code 1 "administratively
//!   prohibited" (Antrea's choice too). Linux maps it to `EACCES` ("Permission denied"),
//!   fatal. Codes 2 and 3 map to `EHOSTUNREACH` but are *not* fatal
//!   (`net/ipv6/icmp.c` `tab_unreach`), and `__udp6_lib_err` reports a non-fatal error to
//!   a socket only with `IPV6_RECVERR`: with code 3 an ordinary UDP client (iperf3) would
//!   see nothing and time out. No ICMPv6 code gives a UDP client "No route to host"; code
//!   1 is the one that fails it at once, and it says what happened. It quotes as much of
//!   the original as fits in 1280 bytes (RFC 4443 §2.4(c), §3.1).
//! - Never an answer to an ICMP or ICMPv6 error (RFC 1122 §3.2.2, RFC 4443 §2.4(e)), a
//!   RST (RFC 9293 §3.10.7.1), a non-first fragment (RFC 1122 §3.2.2; RFC 4443 §2.4(e)
//!   asks only that it be considered, and without the upper-layer header there is
//!   nothing useful to quote), a packet to a broadcast or multicast address (Ethernet or
//!   IP), or from an unspecified, broadcast or multicast one ([`NoAnswer`]).
//! - Ethernet addresses swapped; a single 802.1Q/802.1ad tag is kept as it came; TTL and
//!   hop limit 64; checksums computed (IPv4 header, TCP and ICMPv6 with the pseudo-header,
//!   ICMP over its message).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::openflow::oxm::values::{ETH_TYPE_IPV4, ETH_TYPE_IPV6};
/// The IP protocol numbers, under the short names the packet code uses.
pub use crate::openflow::oxm::values::{
    IP_PROTO_ICMP as PROTO_ICMP, IP_PROTO_ICMPV6 as PROTO_ICMPV6, IP_PROTO_SCTP as PROTO_SCTP,
    IP_PROTO_TCP as PROTO_TCP, IP_PROTO_UDP as PROTO_UDP,
};

/// 802.1Q and 802.1ad tag protocol identifiers.
const TPIDS: [u16; 2] = [0x8100, 0x88a8];
const ETH_HEADER: usize = 14;

/// TTL and hop limit of an answer (Linux's default).
pub const TTL: u8 = 64;
/// ICMP "destination unreachable" (RFC 792) and code 10, "host administratively
/// prohibited" (RFC 1122 §3.2.2.1).
pub const ICMP_DEST_UNREACH: u8 = 3;
pub const ICMP_HOST_PROHIBITED: u8 = 10;
/// ICMPv6 "destination unreachable" and code 1, "communication with destination
/// administratively prohibited" (RFC 4443 §3.1).
pub const ICMPV6_DEST_UNREACH: u8 = 1;
pub const ICMPV6_ADMIN_PROHIBITED: u8 = 1;
/// The largest ICMP error (RFC 1812 §4.3.2.3) and ICMPv6 error (RFC 4443 §2.4(c)).
const ICMP4_MAX: usize = 576;
const ICMP6_MAX: usize = 1280;

const TCP_FIN: u8 = 0x01;
const TCP_SYN: u8 = 0x02;
const TCP_RST: u8 = 0x04;
const TCP_ACK: u8 = 0x10;

/// Why a packet gets no answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoAnswer {
    /// Too short for a header it claims, or a length that does not add up.
    Malformed(&'static str),
    /// Not IPv4 or IPv6 (or under more than one VLAN tag).
    NotIp,
    /// To a broadcast or multicast address.
    ToGroup,
    /// From an unspecified, broadcast or multicast address.
    BadSource,
    /// An ICMP or ICMPv6 error message.
    IcmpError,
    /// A TCP RST.
    Reset,
    /// A fragment other than the first.
    Fragment,
}

impl std::fmt::Display for NoAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoAnswer::Malformed(what) => write!(f, "malformed {what}"),
            NoAnswer::NotIp => f.write_str("not IP"),
            NoAnswer::ToGroup => f.write_str("to a broadcast or multicast address"),
            NoAnswer::BadSource => f.write_str("from an unspecified or group address"),
            NoAnswer::IcmpError => f.write_str("an ICMP error"),
            NoAnswer::Reset => f.write_str("a TCP reset"),
            NoAnswer::Fragment => f.write_str("a non-first fragment"),
        }
    }
}

/// The upper layer as far as an answer or an audit line needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L4 {
    Tcp {
        src: u16,
        dst: u16,
        seq: u32,
        ack: u32,
        flags: u8,
        /// The TCP header's length (data offset × 4).
        header_len: usize,
    },
    /// UDP and SCTP: their ports.
    Ports { src: u16, dst: u16 },
    /// ICMP or ICMPv6.
    Icmp { type_: u8, code: u8 },
    /// Another protocol, or a non-first fragment (no upper-layer header).
    Other,
}

/// A parsed frame. `ip` is the IP packet without the Ethernet padding (and possibly cut
/// short, as captured).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    pub eth_dst: [u8; 6],
    pub eth_src: [u8; 6],
    /// The VLAN tag (TPID and TCI) when there is one.
    pub vlan: Option<[u8; 4]>,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub ip: &'a [u8],
    /// The upper-layer protocol (after any IPv6 extension headers).
    pub proto: u8,
    /// The upper-layer header's offset in `ip`.
    pub l4_at: usize,
    /// The upper layer's length as the IP header says (may exceed what was captured).
    pub l4_len: usize,
    /// The IP packet's length as its header says.
    pub ip_len: usize,
    /// Not the first fragment of a datagram.
    pub later_fragment: bool,
    pub l4: L4,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn need(b: &[u8], n: usize, what: &'static str) -> Result<(), NoAnswer> {
    if b.len() < n {
        Err(NoAnswer::Malformed(what))
    } else {
        Ok(())
    }
}

/// Parse an Ethernet frame down to its upper-layer header.
pub fn parse(frame: &[u8]) -> Result<Packet<'_>, NoAnswer> {
    need(frame, ETH_HEADER, "Ethernet header")?;
    let mut eth_dst = [0; 6];
    let mut eth_src = [0; 6];
    eth_dst.copy_from_slice(&frame[..6]);
    eth_src.copy_from_slice(&frame[6..12]);
    let (vlan, at) = if TPIDS.contains(&be16(frame, 12)) {
        need(frame, ETH_HEADER + 4, "VLAN tag")?;
        let mut tag = [0; 4];
        tag.copy_from_slice(&frame[12..16]);
        (Some(tag), 16)
    } else {
        (None, 12)
    };
    let ip = &frame[at + 2..];
    let (src, dst, ip, l3) = match be16(frame, at) {
        ETH_TYPE_IPV4 => ipv4(ip)?,
        ETH_TYPE_IPV6 => ipv6(ip)?,
        _ => return Err(NoAnswer::NotIp),
    };
    let l4 = if l3.later_fragment {
        L4::Other
    } else {
        upper(l3.proto, ip.get(l3.l4_at..).unwrap_or_default())?
    };
    Ok(Packet {
        eth_dst,
        eth_src,
        vlan,
        src,
        dst,
        ip,
        proto: l3.proto,
        l4_at: l3.l4_at,
        l4_len: l3.l4_len,
        ip_len: l3.ip_len,
        later_fragment: l3.later_fragment,
        l4,
    })
}

struct L3 {
    proto: u8,
    l4_at: usize,
    l4_len: usize,
    ip_len: usize,
    later_fragment: bool,
}

type Parsed<'a> = (IpAddr, IpAddr, &'a [u8], L3);

fn ipv4(b: &[u8]) -> Result<Parsed<'_>, NoAnswer> {
    need(b, 20, "IPv4 header")?;
    let ihl = usize::from(b[0] & 0x0f) * 4;
    let total = usize::from(be16(b, 2));
    if b[0] >> 4 != 4 || ihl < 20 || total < ihl {
        return Err(NoAnswer::Malformed("IPv4 header"));
    }
    need(b, ihl, "IPv4 options")?;
    let addr = |at: usize| IpAddr::V4(Ipv4Addr::new(b[at], b[at + 1], b[at + 2], b[at + 3]));
    Ok((
        addr(12),
        addr(16),
        // Without the Ethernet padding a short packet carries.
        &b[..total.min(b.len())],
        L3 {
            proto: b[9],
            l4_at: ihl,
            l4_len: total - ihl,
            ip_len: total,
            later_fragment: be16(b, 6) & 0x1fff != 0,
        },
    ))
}

/// IPv6 extension headers walked to find the upper layer (RFC 8200 §4).
const HOP_BY_HOP: u8 = 0;
const ROUTING: u8 = 43;
const FRAGMENT: u8 = 44;
const AUTH: u8 = 51;
const DEST_OPTS: u8 = 60;

fn ipv6(b: &[u8]) -> Result<Parsed<'_>, NoAnswer> {
    need(b, 40, "IPv6 header")?;
    if b[0] >> 4 != 6 {
        return Err(NoAnswer::Malformed("IPv6 header"));
    }
    let total = 40 + usize::from(be16(b, 4));
    let b = &b[..total.min(b.len())];
    let addr = |at: usize| {
        let mut a = [0u8; 16];
        a.copy_from_slice(&b[at..at + 16]);
        IpAddr::V6(Ipv6Addr::from(a))
    };
    let (mut next, mut at, mut later_fragment) = (b[6], 40, false);
    loop {
        let len = match next {
            HOP_BY_HOP | ROUTING | DEST_OPTS => {
                need(b, at + 2, "IPv6 extension header")?;
                (usize::from(b[at + 1]) + 1) * 8
            }
            AUTH => {
                need(b, at + 2, "IPv6 authentication header")?;
                (usize::from(b[at + 1]) + 2) * 4
            }
            FRAGMENT => {
                need(b, at + 4, "IPv6 fragment header")?;
                later_fragment |= be16(b, at + 2) >> 3 != 0;
                8
            }
            _ => break,
        };
        if at + len > total {
            return Err(NoAnswer::Malformed("IPv6 extension header"));
        }
        next = b[at];
        at += len;
    }
    Ok((
        addr(8),
        addr(24),
        b,
        L3 {
            proto: next,
            l4_at: at,
            l4_len: total - at,
            ip_len: total,
            later_fragment,
        },
    ))
}

fn upper(proto: u8, b: &[u8]) -> Result<L4, NoAnswer> {
    Ok(match proto {
        PROTO_TCP => {
            need(b, 20, "TCP header")?;
            L4::Tcp {
                src: be16(b, 0),
                dst: be16(b, 2),
                seq: be32(b, 4),
                ack: be32(b, 8),
                flags: b[13],
                header_len: usize::from(b[12] >> 4) * 4,
            }
        }
        PROTO_UDP | PROTO_SCTP => {
            need(b, 4, "UDP/SCTP ports")?;
            L4::Ports {
                src: be16(b, 0),
                dst: be16(b, 2),
            }
        }
        PROTO_ICMP | PROTO_ICMPV6 => {
            need(b, 2, "ICMP header")?;
            L4::Icmp {
                type_: b[0],
                code: b[1],
            }
        }
        _ => L4::Other,
    })
}

impl Packet<'_> {
    fn is_icmp_error(&self) -> bool {
        match (self.proto, self.l4) {
            // Destination unreachable, source quench, redirect, time exceeded, parameter
            // problem (RFC 792; RFC 1122 §3.2.2); the rest are queries.
            (PROTO_ICMP, L4::Icmp { type_, .. }) => matches!(type_, 3 | 4 | 5 | 11 | 12),
            // Types below 128 are errors (RFC 4443 §2.1).
            (PROTO_ICMPV6, L4::Icmp { type_, .. }) => type_ < 128,
            _ => false,
        }
    }
}

fn to_group(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => a.is_multicast() || a.is_broadcast(),
        IpAddr::V6(a) => a.is_multicast(),
    }
}

fn bad_source(ip: IpAddr) -> bool {
    ip.is_unspecified() || to_group(ip)
}

/// What the answer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    TcpReset,
    Icmp,
    Icmpv6,
}

/// The answer to a rejected frame, or why there is none.
pub fn answer(p: &Packet<'_>) -> Result<(Kind, Vec<u8>), NoAnswer> {
    if p.eth_dst[0] & 1 != 0 || to_group(p.dst) {
        return Err(NoAnswer::ToGroup);
    }
    if p.eth_src[0] & 1 != 0 || bad_source(p.src) {
        return Err(NoAnswer::BadSource);
    }
    if p.later_fragment {
        return Err(NoAnswer::Fragment);
    }
    if p.is_icmp_error() {
        return Err(NoAnswer::IcmpError);
    }
    let mut out = Vec::with_capacity(ETH_HEADER + 4 + 60);
    out.extend_from_slice(&p.eth_src);
    out.extend_from_slice(&p.eth_dst);
    if let Some(tag) = p.vlan {
        out.extend_from_slice(&tag);
    }
    if let L4::Tcp {
        src,
        dst,
        seq,
        ack,
        flags,
        header_len,
    } = p.l4
    {
        if flags & TCP_RST != 0 {
            return Err(NoAnswer::Reset);
        }
        let payload = p
            .l4_len
            .checked_sub(header_len.max(20))
            .ok_or(NoAnswer::Malformed("TCP data offset"))?;
        let len = u32::try_from(payload).map_err(|_| NoAnswer::Malformed("TCP length"))?
            + u32::from(flags & TCP_SYN != 0)
            + u32::from(flags & TCP_FIN != 0);
        let rst_seq = if flags & TCP_ACK != 0 { ack } else { 0 };
        let mut tcp = Vec::with_capacity(20);
        tcp.extend_from_slice(&dst.to_be_bytes());
        tcp.extend_from_slice(&src.to_be_bytes());
        tcp.extend_from_slice(&rst_seq.to_be_bytes());
        tcp.extend_from_slice(&seq.wrapping_add(len).to_be_bytes());
        // Data offset 5 (no options), RST|ACK, window 0, checksum, urgent pointer 0.
        tcp.extend_from_slice(&[0x50, TCP_RST | TCP_ACK, 0, 0, 0, 0, 0, 0]);
        ip_packet(&mut out, p.dst, p.src, PROTO_TCP, tcp, 16, true);
        return Ok((Kind::TcpReset, out));
    }
    let (kind, type_, code, proto, max) = match p.src {
        IpAddr::V4(_) => (
            Kind::Icmp,
            ICMP_DEST_UNREACH,
            ICMP_HOST_PROHIBITED,
            PROTO_ICMP,
            ICMP4_MAX - 20,
        ),
        IpAddr::V6(_) => (
            Kind::Icmpv6,
            ICMPV6_DEST_UNREACH,
            ICMPV6_ADMIN_PROHIBITED,
            PROTO_ICMPV6,
            ICMP6_MAX - 40,
        ),
    };
    // Type, code, checksum, 4 unused bytes, then the original from its IP header on.
    let quoted = &p.ip[..p.ip.len().min(max - 8)];
    let mut icmp = Vec::with_capacity(8 + quoted.len());
    icmp.extend_from_slice(&[type_, code, 0, 0, 0, 0, 0, 0]);
    icmp.extend_from_slice(quoted);
    ip_packet(&mut out, p.dst, p.src, proto, icmp, 2, false);
    Ok((kind, out))
}

/// Append an IP header (v4 or v6, by the addresses) and `l4`, its checksum (at
/// `csum_at` in `l4`) filled in; ICMP's covers only the message, TCP's and ICMPv6's the
/// pseudo-header too (RFC 9293 §3.1, RFC 4443 §2.3). `df`: IPv4's don't-fragment flag.
fn ip_packet(
    out: &mut Vec<u8>,
    src: IpAddr,
    dst: IpAddr,
    proto: u8,
    mut l4: Vec<u8>,
    csum_at: usize,
    df: bool,
) {
    // Both are at most 1280 bytes (ICMP6_MAX), so the lengths fit.
    let l4_len = u16::try_from(l4.len()).unwrap_or(u16::MAX);
    let mut sum = Checksum::default();
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            out.extend_from_slice(&ETH_TYPE_IPV4.to_be_bytes());
            let start = out.len();
            let flags: u16 = if df { 0x4000 } else { 0 };
            out.extend_from_slice(&[0x45, 0]);
            out.extend_from_slice(&(20 + l4_len).to_be_bytes());
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(&flags.to_be_bytes());
            out.extend_from_slice(&[TTL, proto, 0, 0]);
            out.extend_from_slice(&s.octets());
            out.extend_from_slice(&d.octets());
            let mut h = Checksum::default();
            h.add(&out[start..]);
            let c = h.finish();
            out[start + 10..start + 12].copy_from_slice(&c.to_be_bytes());
            if proto != PROTO_ICMP {
                sum.add(&s.octets());
                sum.add(&d.octets());
                sum.add(&[0, proto]);
                sum.add(&l4_len.to_be_bytes());
            }
        }
        (s, d) => {
            let (s, d) = (v6(s), v6(d));
            out.extend_from_slice(&ETH_TYPE_IPV6.to_be_bytes());
            out.extend_from_slice(&[0x60, 0, 0, 0]);
            out.extend_from_slice(&l4_len.to_be_bytes());
            out.extend_from_slice(&[proto, TTL]);
            out.extend_from_slice(&s.octets());
            out.extend_from_slice(&d.octets());
            sum.add(&s.octets());
            sum.add(&d.octets());
            sum.add(&u32::from(l4_len).to_be_bytes());
            sum.add(&[0, 0, 0, proto]);
        }
    }
    sum.add(&l4);
    let c = sum.finish();
    l4[csum_at..csum_at + 2].copy_from_slice(&c.to_be_bytes());
    out.extend_from_slice(&l4);
}

fn v6(a: IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

/// The Internet checksum (RFC 1071): the one's complement of the one's complement sum
/// of 16-bit words. Every part added but the last must have an even length.
#[derive(Default)]
struct Checksum(u32);

impl Checksum {
    fn add(&mut self, b: &[u8]) {
        for w in b.chunks(2) {
            let v = u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]);
            self.0 += u32::from(v);
            self.0 = (self.0 & 0xffff) + (self.0 >> 16);
        }
    }

    fn finish(&self) -> u16 {
        // `add` folds after every word, so the sum fits in 16 bits.
        !u16::try_from(self.0 & 0xffff).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests;
