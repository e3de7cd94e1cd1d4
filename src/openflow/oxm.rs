//! OXM match fields (OF1.5 §7.2.3) and the `ofp_match` structure that carries them. The
//! same [`MatchField`] value is the payload of a `set_field` action, so a masked register
//! load is `MatchField::Reg { mask: Some(..) }` in both places.
//!
//! Header layout (OF1.5 §7.2.3.2): `class(16) | field(7) | hasmask(1) | length(8)`, where
//! length counts the value and, when masked, the mask. Field numbers for the
//! `OPENFLOW_BASIC` class are OF1.5 §7.2.3.7; registers, `conj_id` and the conntrack fields
//! (`ct_state`, `ct_zone`, `ct_mark`, `ct_label`) are Nicira fields in class `NXM_1` (OVS
//! `lib/meta-flow.xml`; docs/antrea-compat.md#wire-encoding-of-fields-and-actions).
//! Transport ports may carry a mask (meta-flow.xml: "Maskable: bitwise" since OVS 1.6;
//! OVS accepts and dumps `OXM_OF_TCP_DST` with `hasmask`), which is how Antrea writes port
//! ranges (`portsToBitRanges`). The exact forms `TcpDst(u16)` … predate the masks, so a
//! masked TCP/UDP port is its own variant; [`Match::new`] turns a full mask into the exact
//! form.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use super::WireError;
use super::codec::{Reader, Writer, pad8};
use super::consts::{MATCH_TYPE_OXM, OxmClass};

/// An Ethernet address.
pub type Mac = [u8; 6];

/// A 128-bit field value as its big-endian bytes. Byte-aligned on purpose: a `u128` in a
/// variant aligns the whole [`MatchField`] to 16 bytes and grows every match of every
/// flow tether holds (the openflow bench's peak RSS went from 62 to 70 MB with it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Be128(pub [u8; 16]);

impl Be128 {
    pub const fn get(self) -> u128 {
        u128::from_be_bytes(self.0)
    }
}

impl From<u128> for Be128 {
    fn from(v: u128) -> Be128 {
        Be128(v.to_be_bytes())
    }
}

/// One match (or set_field) field. Optional masks are the OXM `hasmask` form; `None` is an
/// exact match. Fields we do not model decode as [`MatchField::Other`] and encode back
/// byte for byte.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MatchField {
    InPort(u32),
    EthDst(Mac, Option<Mac>),
    EthSrc(Mac, Option<Mac>),
    EthType(u16),
    IpProto(u8),
    Ipv4Src(Ipv4Addr, Option<Ipv4Addr>),
    Ipv4Dst(Ipv4Addr, Option<Ipv4Addr>),
    TcpSrc(u16),
    TcpDst(u16),
    UdpSrc(u16),
    UdpDst(u16),
    Icmpv4Type(u8),
    Ipv6Src(Ipv6Addr, Option<Ipv6Addr>),
    Ipv6Dst(Ipv6Addr, Option<Ipv6Addr>),
    Icmpv6Type(u8),
    /// `tp_src=0x…/0x…` of TCP: a port range as value/mask.
    TcpSrcMasked(u16, u16),
    /// `tp_dst=0x…/0x…` of TCP.
    TcpDstMasked(u16, u16),
    UdpSrcMasked(u16, u16),
    UdpDstMasked(u16, u16),
    SctpSrc(u16, Option<u16>),
    SctpDst(u16, Option<u16>),
    Icmpv4Code(u8),
    Icmpv6Code(u8),
    /// Nicira `NXM_NX_CONJ_ID`: the id of a matched `conjunction`, 32 bits, no mask.
    ConjId(u32),
    /// Nicira `NXM_NX_CT_ZONE`, 16 bits, no mask.
    CtZone(u16),
    /// Nicira `NXM_NX_CT_MARK`, 32 bits.
    CtMark {
        value: u32,
        mask: Option<u32>,
    },
    /// Nicira `NXM_NX_CT_LABEL`, 128 bits (the wire's big-endian bytes).
    CtLabel {
        value: Be128,
        mask: Option<Be128>,
    },
    /// Nicira `NXM_NX_REG<idx>`, idx 0..=15, 32 bits.
    Reg {
        idx: u8,
        value: u32,
        mask: Option<u32>,
    },
    /// Nicira `NXM_NX_CT_STATE` (bits in [`super::consts::ct_state`]).
    CtState {
        value: u32,
        mask: Option<u32>,
    },
    /// Anything else, kept raw: `payload` is everything after the 4-byte header.
    Other {
        class: OxmClass,
        field: u8,
        hasmask: bool,
        payload: Vec<u8>,
    },
}

/// OXM field numbers of the `OPENFLOW_BASIC` class (OF1.5 §7.2.3.7).
mod basic {
    pub const IN_PORT: u8 = 0;
    pub const ETH_DST: u8 = 3;
    pub const ETH_SRC: u8 = 4;
    pub const ETH_TYPE: u8 = 5;
    pub const IP_PROTO: u8 = 10;
    pub const IPV4_SRC: u8 = 11;
    pub const IPV4_DST: u8 = 12;
    pub const TCP_SRC: u8 = 13;
    pub const TCP_DST: u8 = 14;
    pub const UDP_SRC: u8 = 15;
    pub const UDP_DST: u8 = 16;
    pub const SCTP_SRC: u8 = 17;
    pub const SCTP_DST: u8 = 18;
    pub const ICMPV4_TYPE: u8 = 19;
    pub const ICMPV4_CODE: u8 = 20;
    pub const IPV6_SRC: u8 = 26;
    pub const IPV6_DST: u8 = 27;
    pub const ICMPV6_TYPE: u8 = 29;
    pub const ICMPV6_CODE: u8 = 30;
}

/// Field numbers in class `NXM_1` (OVS `lib/meta-flow.xml`; registers are 0..=15).
const NXM_CONJ_ID: u8 = 37;
const NXM_CT_STATE: u8 = 105;
const NXM_CT_ZONE: u8 = 106;
const NXM_CT_MARK: u8 = 107;
const NXM_CT_LABEL: u8 = 108;

/// EtherTypes and IP protocol numbers that flow builders use.
pub mod values {
    pub const ETH_TYPE_IPV4: u16 = 0x0800;
    pub const ETH_TYPE_ARP: u16 = 0x0806;
    pub const ETH_TYPE_IPV6: u16 = 0x86dd;
    pub const IP_PROTO_ICMP: u8 = 1;
    pub const IP_PROTO_TCP: u8 = 6;
    pub const IP_PROTO_UDP: u8 = 17;
    pub const IP_PROTO_SCTP: u8 = 132;
    pub const IP_PROTO_ICMPV6: u8 = 58;
}

impl MatchField {
    /// `(class, field)` of the OXM header: also the canonical sort key, which puts every
    /// prerequisite (eth_type before ip_proto before ports) ahead of the fields needing it.
    pub fn class_field(&self) -> (OxmClass, u8) {
        use MatchField::*;
        let b = OxmClass::OPENFLOW_BASIC;
        match self {
            InPort(_) => (b, basic::IN_PORT),
            EthDst(..) => (b, basic::ETH_DST),
            EthSrc(..) => (b, basic::ETH_SRC),
            EthType(_) => (b, basic::ETH_TYPE),
            IpProto(_) => (b, basic::IP_PROTO),
            Ipv4Src(..) => (b, basic::IPV4_SRC),
            Ipv4Dst(..) => (b, basic::IPV4_DST),
            TcpSrc(_) | TcpSrcMasked(..) => (b, basic::TCP_SRC),
            TcpDst(_) | TcpDstMasked(..) => (b, basic::TCP_DST),
            UdpSrc(_) | UdpSrcMasked(..) => (b, basic::UDP_SRC),
            UdpDst(_) | UdpDstMasked(..) => (b, basic::UDP_DST),
            SctpSrc(..) => (b, basic::SCTP_SRC),
            SctpDst(..) => (b, basic::SCTP_DST),
            Icmpv4Type(_) => (b, basic::ICMPV4_TYPE),
            Icmpv4Code(_) => (b, basic::ICMPV4_CODE),
            Ipv6Src(..) => (b, basic::IPV6_SRC),
            Ipv6Dst(..) => (b, basic::IPV6_DST),
            Icmpv6Type(_) => (b, basic::ICMPV6_TYPE),
            Icmpv6Code(_) => (b, basic::ICMPV6_CODE),
            Reg { idx, .. } => (OxmClass::NXM_1, *idx),
            ConjId(_) => (OxmClass::NXM_1, NXM_CONJ_ID),
            CtState { .. } => (OxmClass::NXM_1, NXM_CT_STATE),
            CtZone(_) => (OxmClass::NXM_1, NXM_CT_ZONE),
            CtMark { .. } => (OxmClass::NXM_1, NXM_CT_MARK),
            CtLabel { .. } => (OxmClass::NXM_1, NXM_CT_LABEL),
            Other { class, field, .. } => (*class, *field),
        }
    }

    /// Sort key for a canonical match: OPENFLOW_BASIC fields first (prerequisite order),
    /// then Nicira fields, then anything else.
    fn order(&self) -> (u8, u16, u8) {
        let (class, field) = self.class_field();
        let rank = match class {
            OxmClass::OPENFLOW_BASIC => 0,
            OxmClass::NXM_1 | OxmClass::NXM_0 => 1,
            _ => 2,
        };
        (rank, class.0, field)
    }

    /// The same field with its value masked and a full mask removed.
    pub fn canonical(self) -> MatchField {
        // Long on purpose: one arm per maskable field, a table to read against the enum.
        use MatchField::*;
        fn mac(v: Mac, m: Option<Mac>) -> (Mac, Option<Mac>) {
            match m {
                Some(m) if m == [0xff; 6] => (v, None),
                Some(m) => {
                    let mut out = v;
                    out.iter_mut().zip(m).for_each(|(b, k)| *b &= k);
                    (out, Some(m))
                }
                None => (v, None),
            }
        }
        fn v4(v: Ipv4Addr, m: Option<Ipv4Addr>) -> (Ipv4Addr, Option<Ipv4Addr>) {
            match m {
                Some(m) if m == Ipv4Addr::BROADCAST => (v, None),
                Some(m) => (Ipv4Addr::from(v.to_bits() & m.to_bits()), Some(m)),
                None => (v, None),
            }
        }
        fn v6(v: Ipv6Addr, m: Option<Ipv6Addr>) -> (Ipv6Addr, Option<Ipv6Addr>) {
            match m {
                Some(m) if m.to_bits() == u128::MAX => (v, None),
                Some(m) => (Ipv6Addr::from(v.to_bits() & m.to_bits()), Some(m)),
                None => (v, None),
            }
        }
        fn word(v: u32, m: Option<u32>) -> (u32, Option<u32>) {
            match m {
                Some(u32::MAX) => (v, None),
                Some(m) => (v & m, Some(m)),
                None => (v, None),
            }
        }
        fn port(v: u16, m: u16) -> Result<u16, (u16, u16)> {
            if m == u16::MAX {
                Ok(v)
            } else {
                Err((v & m, m))
            }
        }
        fn port_opt(v: u16, m: Option<u16>) -> (u16, Option<u16>) {
            match m.map(|m| port(v, m)) {
                Some(Err((v, m))) => (v, Some(m)),
                _ => (v, None),
            }
        }
        match self {
            TcpSrcMasked(v, m) => port(v, m).map_or_else(|(v, m)| TcpSrcMasked(v, m), TcpSrc),
            TcpDstMasked(v, m) => port(v, m).map_or_else(|(v, m)| TcpDstMasked(v, m), TcpDst),
            UdpSrcMasked(v, m) => port(v, m).map_or_else(|(v, m)| UdpSrcMasked(v, m), UdpSrc),
            UdpDstMasked(v, m) => port(v, m).map_or_else(|(v, m)| UdpDstMasked(v, m), UdpDst),
            SctpSrc(v, m) => {
                let (v, m) = port_opt(v, m);
                SctpSrc(v, m)
            }
            SctpDst(v, m) => {
                let (v, m) = port_opt(v, m);
                SctpDst(v, m)
            }
            CtMark { value, mask } => {
                let (value, mask) = word(value, mask);
                CtMark { value, mask }
            }
            CtLabel { value, mask } => match mask.map(Be128::get) {
                Some(u128::MAX) | None => CtLabel { value, mask: None },
                Some(m) => CtLabel {
                    value: (value.get() & m).into(),
                    mask: Some(m.into()),
                },
            },
            EthDst(v, m) => {
                let (v, m) = mac(v, m);
                EthDst(v, m)
            }
            EthSrc(v, m) => {
                let (v, m) = mac(v, m);
                EthSrc(v, m)
            }
            Ipv4Src(v, m) => {
                let (v, m) = v4(v, m);
                Ipv4Src(v, m)
            }
            Ipv4Dst(v, m) => {
                let (v, m) = v4(v, m);
                Ipv4Dst(v, m)
            }
            Ipv6Src(v, m) => {
                let (v, m) = v6(v, m);
                Ipv6Src(v, m)
            }
            Ipv6Dst(v, m) => {
                let (v, m) = v6(v, m);
                Ipv6Dst(v, m)
            }
            Reg { idx, value, mask } => {
                let (value, mask) = word(value, mask);
                Reg { idx, value, mask }
            }
            CtState { value, mask } => {
                let (value, mask) = word(value, mask);
                CtState { value, mask }
            }
            other => other,
        }
    }

    /// Append the OXM TLV.
    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), WireError> {
        use MatchField::*;
        let mut payload = [0u8; 32];
        let (len, hasmask) = match self {
            InPort(v) => put(&mut payload, &v.to_be_bytes(), None::<&[u8]>),
            EthDst(v, m) | EthSrc(v, m) => put(&mut payload, v, m.as_ref().map(|m| &m[..])),
            EthType(v) | TcpSrc(v) | TcpDst(v) | UdpSrc(v) | UdpDst(v) => {
                put(&mut payload, &v.to_be_bytes(), None::<&[u8]>)
            }
            IpProto(v) | Icmpv4Type(v) | Icmpv6Type(v) | Icmpv4Code(v) | Icmpv6Code(v) => {
                put(&mut payload, &[*v], None)
            }
            TcpSrcMasked(v, m) | TcpDstMasked(v, m) | UdpSrcMasked(v, m) | UdpDstMasked(v, m) => {
                put(&mut payload, &v.to_be_bytes(), Some(&m.to_be_bytes()[..]))
            }
            SctpSrc(v, m) | SctpDst(v, m) => {
                let m = m.map(u16::to_be_bytes);
                put(&mut payload, &v.to_be_bytes(), m.as_ref().map(|m| &m[..]))
            }
            CtZone(v) => put(&mut payload, &v.to_be_bytes(), None),
            ConjId(v) => put(&mut payload, &v.to_be_bytes(), None),
            CtLabel { value, mask } => put(&mut payload, &value.0, mask.as_ref().map(|m| &m.0[..])),
            Ipv4Src(v, m) | Ipv4Dst(v, m) => {
                let m = m.map(|m| m.octets());
                put(&mut payload, &v.octets(), m.as_ref().map(|m| &m[..]))
            }
            Ipv6Src(v, m) | Ipv6Dst(v, m) => {
                let m = m.map(|m| m.octets());
                put(&mut payload, &v.octets(), m.as_ref().map(|m| &m[..]))
            }
            Reg { idx, value, mask } => {
                if *idx > 15 {
                    return Err(WireError::Invalid {
                        what: "register index",
                        value: u64::from(*idx),
                    });
                }
                let m = mask.map(u32::to_be_bytes);
                put(
                    &mut payload,
                    &value.to_be_bytes(),
                    m.as_ref().map(|m| &m[..]),
                )
            }
            CtState { value, mask } | CtMark { value, mask } => {
                let m = mask.map(u32::to_be_bytes);
                put(
                    &mut payload,
                    &value.to_be_bytes(),
                    m.as_ref().map(|m| &m[..]),
                )
            }
            Other {
                class,
                field,
                hasmask,
                payload,
            } => {
                let len = u8::try_from(payload.len())
                    .map_err(|_| WireError::TooLong { len: payload.len() })?;
                w.u32(header(*class, *field, *hasmask, len));
                w.bytes(payload);
                return Ok(());
            }
        };
        let (class, field) = self.class_field();
        // `put` never writes more than 32 bytes, so the length fits a u8.
        let len8 = u8::try_from(len).map_err(|_| WireError::TooLong { len })?;
        w.u32(header(class, field, hasmask, len8));
        w.bytes(&payload[..len]);
        Ok(())
    }

    /// Decode one OXM TLV.
    pub fn decode(r: &mut Reader<'_>) -> Result<MatchField, WireError> {
        // Long on purpose: One arm per OXM field: a table.
        use MatchField::*;
        let [c0, c1, fm, len] = r.array::<4>("oxm header")?;
        let class = OxmClass(u16::from_be_bytes([c0, c1]));
        let field = fm >> 1;
        let hasmask = fm & 1 != 0;
        let len = usize::from(len);
        let payload = r.bytes(len, "oxm payload")?;
        let other = || Other {
            class,
            field,
            hasmask,
            payload: payload.to_vec(),
        };
        // Known (class, field) → (value width, may carry a mask in our model).
        let width = match (class, field) {
            (OxmClass::OPENFLOW_BASIC, f) => match f {
                basic::IN_PORT => Some((4, false)),
                basic::ETH_DST | basic::ETH_SRC => Some((6, true)),
                basic::ETH_TYPE => Some((2, false)),
                basic::TCP_SRC
                | basic::TCP_DST
                | basic::UDP_SRC
                | basic::UDP_DST
                | basic::SCTP_SRC
                | basic::SCTP_DST => Some((2, true)),
                basic::IP_PROTO
                | basic::ICMPV4_TYPE
                | basic::ICMPV6_TYPE
                | basic::ICMPV4_CODE
                | basic::ICMPV6_CODE => Some((1, false)),
                basic::IPV4_SRC | basic::IPV4_DST => Some((4, true)),
                basic::IPV6_SRC | basic::IPV6_DST => Some((16, true)),
                _ => None,
            },
            (OxmClass::NXM_1, f) => match f {
                0..=15 | NXM_CT_STATE | NXM_CT_MARK => Some((4, true)),
                NXM_CONJ_ID => Some((4, false)),
                NXM_CT_ZONE => Some((2, false)),
                NXM_CT_LABEL => Some((16, true)),
                _ => None,
            },
            _ => None,
        };
        let Some((width, maskable)) = width else {
            return Ok(other());
        };
        if hasmask && !maskable {
            return Ok(other());
        }
        let want = if hasmask { 2 * width } else { width };
        if len != want {
            return Err(WireError::BadLength {
                what: "oxm field",
                len,
            });
        }
        let (v, m) = payload.split_at(width);
        let m = hasmask.then_some(m);
        let u16of = |b: &[u8]| u16::from_be_bytes([b[0], b[1]]);
        let u16v = || u16of(v);
        // A masked port keeps its mask even when it is all ones: bytes round-trip.
        let port = |exact: fn(u16) -> MatchField, masked: fn(u16, u16) -> MatchField| match m {
            Some(m) => masked(u16v(), u16of(m)),
            None => exact(u16v()),
        };
        let u128of = |b: &[u8]| {
            let mut a = [0u8; 16];
            a.copy_from_slice(b);
            u128::from_be_bytes(a)
        };
        let u32of = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let mac = |b: &[u8]| -> Mac { [b[0], b[1], b[2], b[3], b[4], b[5]] };
        let v4 = |b: &[u8]| Ipv4Addr::new(b[0], b[1], b[2], b[3]);
        let v6 = |b: &[u8]| {
            let mut a = [0u8; 16];
            a.copy_from_slice(b);
            Ipv6Addr::from(a)
        };
        Ok(match (class, field) {
            (OxmClass::OPENFLOW_BASIC, f) => match f {
                basic::IN_PORT => InPort(u32of(v)),
                basic::ETH_DST => EthDst(mac(v), m.map(mac)),
                basic::ETH_SRC => EthSrc(mac(v), m.map(mac)),
                basic::ETH_TYPE => EthType(u16v()),
                basic::TCP_SRC => port(TcpSrc, TcpSrcMasked),
                basic::TCP_DST => port(TcpDst, TcpDstMasked),
                basic::UDP_SRC => port(UdpSrc, UdpSrcMasked),
                basic::UDP_DST => port(UdpDst, UdpDstMasked),
                basic::SCTP_SRC => SctpSrc(u16v(), m.map(u16of)),
                basic::SCTP_DST => SctpDst(u16v(), m.map(u16of)),
                basic::IP_PROTO => IpProto(v[0]),
                basic::ICMPV4_TYPE => Icmpv4Type(v[0]),
                basic::ICMPV6_TYPE => Icmpv6Type(v[0]),
                basic::ICMPV4_CODE => Icmpv4Code(v[0]),
                basic::ICMPV6_CODE => Icmpv6Code(v[0]),
                basic::IPV4_SRC => Ipv4Src(v4(v), m.map(v4)),
                basic::IPV4_DST => Ipv4Dst(v4(v), m.map(v4)),
                basic::IPV6_SRC => Ipv6Src(v6(v), m.map(v6)),
                basic::IPV6_DST => Ipv6Dst(v6(v), m.map(v6)),
                _ => other(),
            },
            (_, NXM_CT_STATE) => CtState {
                value: u32of(v),
                mask: m.map(u32of),
            },
            (_, NXM_CT_MARK) => CtMark {
                value: u32of(v),
                mask: m.map(u32of),
            },
            (_, NXM_CT_LABEL) => CtLabel {
                value: u128of(v).into(),
                mask: m.map(|m| u128of(m).into()),
            },
            (_, NXM_CT_ZONE) => CtZone(u16v()),
            (_, NXM_CONJ_ID) => ConjId(u32of(v)),
            _ => Reg {
                idx: field,
                value: u32of(v),
                mask: m.map(u32of),
            },
        })
    }
}

fn header(class: OxmClass, field: u8, hasmask: bool, len: u8) -> u32 {
    u32::from(class.0) << 16
        | u32::from(field & 0x7f) << 9
        | u32::from(hasmask) << 8
        | u32::from(len)
}

/// Copy value and optional mask into `buf`; returns (length, hasmask).
fn put(buf: &mut [u8; 32], v: &[u8], m: Option<&[u8]>) -> (usize, bool) {
    buf[..v.len()].copy_from_slice(v);
    match m {
        Some(m) => {
            buf[v.len()..v.len() + m.len()].copy_from_slice(m);
            (v.len() + m.len(), true)
        }
        None => (v.len(), false),
    }
}

/// An `ofp_match` of type OXM: the fields, kept in canonical order so two matches with
/// the same fields compare equal whatever order a builder added them in.
///
/// The fields are shared (`Arc`): a flow's match is copied into every flow mod sent for it
/// and into the installed set, and 100,000 deep copies cost more than the switch's work.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Match {
    fields: Arc<[MatchField]>,
}

impl Match {
    /// A canonical match: fields sorted, masked values cleared outside their mask (OVS
    /// rejects value bits outside the mask with `OFPBMC_BAD_WILDCARDS`, OF1.5 §7.2.3.5),
    /// and all-ones masks dropped, so equal matches compare equal.
    pub fn new(fields: Vec<MatchField>) -> Match {
        let mut fields: Vec<MatchField> = fields
            .into_iter()
            .flat_map(|f| split_xreg(f).into_iter().flatten())
            .map(MatchField::canonical)
            .collect();
        fields.sort_by(|a, b| a.order().cmp(&b.order()).then_with(|| a.cmp(b)));
        Match {
            fields: fields.into(),
        }
    }

    pub fn fields(&self) -> &[MatchField] {
        &self.fields
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// `ofp_match`: type, length (without padding), OXM fields, padding to 8 (OF1.5 §7.2.3.1).
    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), WireError> {
        let start = w.pos();
        w.u16(MATCH_TYPE_OXM);
        let mark = w.reserve_len_from(start);
        for f in self.fields.iter() {
            f.encode(w)?;
        }
        w.patch_len(mark)?;
        w.pad8_from(start);
        Ok(())
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<Match, WireError> {
        let type_ = r.u16("match type")?;
        if type_ != MATCH_TYPE_OXM {
            return Err(WireError::Invalid {
                what: "match type",
                value: u64::from(type_),
            });
        }
        let len = usize::from(r.u16("match length")?);
        if len < 4 {
            return Err(WireError::BadLength { what: "match", len });
        }
        let mut fr = r.sub(len - 4, "match fields")?;
        r.skip(pad8(len), "match padding")?;
        let mut fields = Vec::new();
        while !fr.is_empty() {
            fields.push(MatchField::decode(&mut fr)?);
        }
        Ok(Match {
            fields: fields.into(),
        })
    }
}

/// An `OXM_OF_PKT_REG<n>` (64 bits, OF1.5 §7.2.3.10) as the two 32-bit Nicira registers it
/// covers (`reg<2n>` is the high half), leaving out a half whose mask is zero; any other
/// field as it is.
fn split_xreg(f: MatchField) -> [Option<MatchField>; 2] {
    let MatchField::Other {
        class: OxmClass::PACKET_REGS,
        field,
        hasmask,
        payload,
    } = &f
    else {
        return [Some(f), None];
    };
    let want = if *hasmask { 16 } else { 8 };
    if payload.len() != want || *field > 7 {
        return [Some(f), None];
    }
    let word =
        |i: usize| u32::from_be_bytes([payload[i], payload[i + 1], payload[i + 2], payload[i + 3]]);
    [(0, field * 2), (4, field * 2 + 1)].map(|(half, idx)| {
        let value = word(half);
        let mask = if *hasmask { word(8 + half) } else { u32::MAX };
        (mask != 0).then_some(MatchField::Reg {
            idx,
            value,
            mask: Some(mask),
        })
    })
}

#[cfg(test)]
mod size_tests {
    /// A match field is held once per field of every flow tether keeps: it stays as small
    /// as its largest byte-aligned variant (an IPv6 address with its mask), not aligned
    /// to 16 bytes by a `u128`.
    #[test]
    fn a_match_field_is_no_bigger_than_an_ipv6_pair() {
        assert_eq!(std::mem::align_of::<super::MatchField>(), 8);
        assert!(
            std::mem::size_of::<super::MatchField>() <= 40,
            "{}",
            std::mem::size_of::<super::MatchField>()
        );
    }
}
