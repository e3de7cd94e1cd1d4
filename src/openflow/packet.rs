//! Packet-in and packet-out bodies for NetworkPolicy's Reject and logging, pure. `msg`
//! keeps both message types raw ([`Body::Other`]); these codecs read and write those raw
//! bodies, so nothing about how other messages decode changes.
//!
//! - `OFPT_PACKET_OUT` (OF1.5 §7.3.7, `struct ofp_packet_out`): buffer id, actions length,
//!   2 pad bytes, an `ofp_match` (in_port and other pipeline fields), the actions, the
//!   packet.
//! - `NXT_PACKET_IN2` (OVS `include/openflow/nicira-ext.h`, `ofputil_put_packet_in` in
//!   `lib/ofp-packet.c`): an `OFPT_EXPERIMENTER` message (vendor `NX_EXPERIMENTER`,
//!   subtype 30) whose body is `NXPINT_*` properties (`lib/ofp-prop.c` layout; 64-bit
//!   values have 4 zero bytes before them, `ofpprop_put_be64`). Antrea asks for this
//!   format (`NXT_SET_PACKET_IN_FORMAT`, subtype 16, `NXPIF_NXT_PACKET_IN2` = 2) and reads
//!   the userdata and the registers in the metadata (reference Part B §2.4).

use super::WireError;
use super::action::{Action, decode_actions, encode_actions};
use super::codec::{Reader, Writer, pad8};
use super::consts::{MsgType, NX_EXPERIMENTER, PacketInReason};
use super::msg::Body;
use super::oxm::{Match, MatchField};

/// `NXT_PACKET_IN2`'s subtype (`enum nicira_type`, OVS `lib/ofp-msgs.c`).
pub const NXT_PACKET_IN2: u32 = 30;
/// `NXT_SET_PACKET_IN_FORMAT`'s subtype.
pub const NXT_SET_PACKET_IN_FORMAT: u32 = 16;
/// `NXPIF_NXT_PACKET_IN2`: the packet-in format Antrea selects.
pub const NXPIF_NXT_PACKET_IN2: u32 = 2;
/// `OFP_NO_BUFFER` (OF1.5 §7.2.6.1).
pub const NO_BUFFER: u32 = 0xffff_ffff;

/// An `OFPT_PACKET_OUT` body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketOut {
    pub buffer_id: u32,
    /// Pipeline fields; OVS wants `in_port` here.
    pub match_: Match,
    pub actions: Vec<Action>,
    pub data: Vec<u8>,
}

impl PacketOut {
    /// Send `data` as if it arrived on `in_port`, through `actions`.
    pub fn new(in_port: u32, actions: Vec<Action>, data: Vec<u8>) -> PacketOut {
        PacketOut {
            buffer_id: NO_BUFFER,
            match_: Match::new(vec![MatchField::InPort(in_port)]),
            actions,
            data,
        }
    }

    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), WireError> {
        w.u32(self.buffer_id);
        let len_at = w.pos();
        w.u16(0);
        w.zeros(2);
        self.match_.encode(w)?;
        let start = w.pos();
        encode_actions(&self.actions, w)?;
        let len = w.pos() - start;
        let v = u16::try_from(len).map_err(|_| WireError::TooLong { len })?;
        w.out[len_at..len_at + 2].copy_from_slice(&v.to_be_bytes());
        w.bytes(&self.data);
        Ok(())
    }

    /// Decode a whole body (the rest after the actions is the packet).
    pub fn decode(r: &mut Reader<'_>) -> Result<PacketOut, WireError> {
        let buffer_id = r.u32("packet_out buffer_id")?;
        let actions_len = usize::from(r.u16("packet_out actions_len")?);
        r.skip(2, "packet_out padding")?;
        let match_ = Match::decode(r)?;
        let mut ar = r.sub(actions_len, "packet_out actions")?;
        let actions = decode_actions(&mut ar)?;
        let data = r.rest().to_vec();
        r.skip(data.len(), "packet_out data")?;
        Ok(PacketOut {
            buffer_id,
            match_,
            actions,
            data,
        })
    }

    /// The raw message body `msg` carries.
    pub fn to_body(&self) -> Result<Body, WireError> {
        let mut body = Vec::new();
        self.encode(&mut Writer::new(&mut body))?;
        Ok(Body::Other {
            type_: MsgType::PACKET_OUT.0,
            body,
        })
    }
}

/// One `NXPINT_*` property of `NXT_PACKET_IN2`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PacketInProp {
    /// `NXPINT_PACKET` (0): the packet, or its first bytes.
    Packet(Vec<u8>),
    /// `NXPINT_FULL_LEN` (1): the packet's length when `Packet` is truncated.
    FullLen(u32),
    /// `NXPINT_BUFFER_ID` (2).
    BufferId(u32),
    /// `NXPINT_TABLE_ID` (3).
    TableId(u8),
    /// `NXPINT_COOKIE` (4): the cookie of the flow that sent the packet.
    Cookie(u64),
    /// `NXPINT_REASON` (5).
    Reason(PacketInReason),
    /// `NXPINT_METADATA` (6): OXM fields (registers, in_port, ct fields …), no header.
    Metadata(Vec<MatchField>),
    /// `NXPINT_USERDATA` (7): the `controller(userdata=…)` bytes.
    Userdata(Vec<u8>),
    /// `NXPINT_CONTINUATION` (8): opaque, for `NXT_RESUME` after `pause`.
    Continuation(Vec<u8>),
    /// Anything else, or a known type with an unexpected length.
    Other { type_: u16, value: Vec<u8> },
}

impl PacketInProp {
    fn encode(&self, w: &mut Writer<'_>) -> Result<(), WireError> {
        let start = w.pos();
        let (type_, value): (u16, Vec<u8>) = match self {
            PacketInProp::Packet(p) => (0, p.clone()),
            PacketInProp::FullLen(n) => (1, n.to_be_bytes().to_vec()),
            PacketInProp::BufferId(n) => (2, n.to_be_bytes().to_vec()),
            PacketInProp::TableId(t) => (3, vec![*t]),
            PacketInProp::Cookie(c) => {
                let mut v = vec![0; 4];
                v.extend(c.to_be_bytes());
                (4, v)
            }
            PacketInProp::Reason(r) => (5, vec![r.0]),
            PacketInProp::Metadata(fields) => {
                let mut v = Vec::new();
                let mut mw = Writer::new(&mut v);
                fields.iter().try_for_each(|f| f.encode(&mut mw))?;
                (6, v)
            }
            PacketInProp::Userdata(d) => (7, d.clone()),
            PacketInProp::Continuation(d) => (8, d.clone()),
            PacketInProp::Other { type_, value } => (*type_, value.clone()),
        };
        w.u16(type_);
        let mark = w.reserve_len_from(start);
        w.bytes(&value);
        w.patch_len(mark)?;
        w.pad8_from(start);
        Ok(())
    }

    fn decode(r: &mut Reader<'_>) -> Result<PacketInProp, WireError> {
        let type_ = r.u16("packet_in2 property type")?;
        let len = usize::from(r.u16("packet_in2 property length")?);
        if len < 4 {
            return Err(WireError::BadLength {
                what: "packet_in2 property",
                len,
            });
        }
        let v = r.bytes(len - 4, "packet_in2 property value")?;
        r.skip(pad8(len), "packet_in2 property padding")?;
        let u32of = |v: &[u8]| u32::from_be_bytes([v[0], v[1], v[2], v[3]]);
        Ok(match (type_, v.len()) {
            (0, _) => PacketInProp::Packet(v.to_vec()),
            (1, 4) => PacketInProp::FullLen(u32of(v)),
            (2, 4) => PacketInProp::BufferId(u32of(v)),
            (3, 1) => PacketInProp::TableId(v[0]),
            (4, 12) if v[..4] == [0; 4] => {
                let mut c = [0u8; 8];
                c.copy_from_slice(&v[4..]);
                PacketInProp::Cookie(u64::from_be_bytes(c))
            }
            (5, 1) => PacketInProp::Reason(PacketInReason(v[0])),
            (6, _) => {
                let mut mr = Reader::new(v);
                let mut fields = Vec::new();
                while !mr.is_empty() {
                    fields.push(MatchField::decode(&mut mr)?);
                }
                PacketInProp::Metadata(fields)
            }
            (7, _) => PacketInProp::Userdata(v.to_vec()),
            (8, _) => PacketInProp::Continuation(v.to_vec()),
            _ => PacketInProp::Other {
                type_,
                value: v.to_vec(),
            },
        })
    }
}

/// An `NXT_PACKET_IN2`: its properties in wire order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PacketIn2 {
    pub props: Vec<PacketInProp>,
}

impl PacketIn2 {
    /// The experimenter body: vendor, subtype, properties.
    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), WireError> {
        w.u32(NX_EXPERIMENTER);
        w.u32(NXT_PACKET_IN2);
        self.props.iter().try_for_each(|p| p.encode(w))
    }

    /// Decode an experimenter body; `Ok(None)` if it is not an `NXT_PACKET_IN2`.
    pub fn decode(r: &mut Reader<'_>) -> Result<Option<PacketIn2>, WireError> {
        let vendor = r.u32("experimenter id")?;
        let subtype = r.u32("experimenter subtype")?;
        if vendor != NX_EXPERIMENTER || subtype != NXT_PACKET_IN2 {
            return Ok(None);
        }
        let mut props = Vec::new();
        while !r.is_empty() {
            props.push(PacketInProp::decode(r)?);
        }
        Ok(Some(PacketIn2 { props }))
    }

    /// The packet-in carried by a raw `msg` body, if it is one.
    pub fn from_body(body: &Body) -> Result<Option<PacketIn2>, WireError> {
        match body {
            Body::Other { type_, body } if *type_ == MsgType::EXPERIMENTER.0 => {
                PacketIn2::decode(&mut Reader::new(body))
            }
            _ => Ok(None),
        }
    }

    pub fn to_body(&self) -> Result<Body, WireError> {
        let mut body = Vec::new();
        self.encode(&mut Writer::new(&mut body))?;
        Ok(Body::Other {
            type_: MsgType::EXPERIMENTER.0,
            body,
        })
    }

    pub fn packet(&self) -> Option<&[u8]> {
        self.props.iter().find_map(|p| match p {
            PacketInProp::Packet(d) => Some(&d[..]),
            _ => None,
        })
    }

    pub fn userdata(&self) -> Option<&[u8]> {
        self.props.iter().find_map(|p| match p {
            PacketInProp::Userdata(d) => Some(&d[..]),
            _ => None,
        })
    }

    pub fn table_id(&self) -> Option<u8> {
        self.props.iter().find_map(|p| match p {
            PacketInProp::TableId(t) => Some(*t),
            _ => None,
        })
    }

    /// Register `idx` from the metadata (0 when absent, as OVS leaves zero fields out).
    pub fn reg(&self, idx: u8) -> u32 {
        let fields = self.props.iter().find_map(|p| match p {
            PacketInProp::Metadata(f) => Some(f.clone()),
            _ => None,
        });
        // OVS writes registers as 64-bit `xreg` pairs in OF1.5; `Match::new` splits them.
        Match::new(fields.unwrap_or_default())
            .fields()
            .iter()
            .find_map(|f| match f {
                MatchField::Reg { idx: i, value, .. } if *i == idx => Some(*value),
                _ => None,
            })
            .unwrap_or(0)
    }
}

/// The raw body of `NXT_SET_PACKET_IN_FORMAT` asking for `format`.
pub fn set_packet_in_format(format: u32) -> Body {
    let mut body = Vec::new();
    let mut w = Writer::new(&mut body);
    w.u32(NX_EXPERIMENTER);
    w.u32(NXT_SET_PACKET_IN_FORMAT);
    w.u32(format);
    Body::Other {
        type_: MsgType::EXPERIMENTER.0,
        body,
    }
}
