//! The flow-carrying message bodies of OpenFlow 1.5: `FLOW_MOD` (§7.3.4) and the multipart flow-description and
//! port-description requests and replies (§7.3.5.2, §7.3.5.7) used to read state back.

use std::sync::Arc;

use super::WireError;
use super::action::{Instruction, decode_instructions, encode_instructions};
use super::codec::{Reader, Writer, pad8};
use super::consts::{FlowModCommand, GROUP_ANY, MultipartType, NO_BUFFER, TABLE_ALL, port};
use super::oxm::Match;
use super::port::Port;

/// `ofp_flow_mod` (OF1.5 §7.3.4.1), 48 bytes before the match.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowMod {
    pub cookie: u64,
    pub cookie_mask: u64,
    pub table_id: u8,
    pub command: FlowModCommand,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub priority: u16,
    pub buffer_id: u32,
    pub out_port: u32,
    pub out_group: u32,
    pub flags: u16,
    pub importance: u16,
    pub match_: Match,
    /// Shared with the flow set's copy (see [`Match`]).
    pub instructions: Arc<Vec<Instruction>>,
}

impl FlowMod {
    /// A flow mod with the defaults every tether mod shares: no buffer, out_port and
    /// out_group ANY (no filter on deletes), no flags, no timeouts.
    pub fn new(command: FlowModCommand, table_id: u8, priority: u16, match_: Match) -> FlowMod {
        FlowMod {
            cookie: 0,
            cookie_mask: 0,
            table_id,
            command,
            idle_timeout: 0,
            hard_timeout: 0,
            priority,
            buffer_id: NO_BUFFER,
            out_port: port::ANY,
            out_group: GROUP_ANY,
            flags: 0,
            importance: 0,
            match_,
            instructions: Arc::default(),
        }
    }

    /// `DELETE` in every table of the flows whose cookie matches `cookie` under `mask`.
    pub fn delete_by_cookie(cookie: u64, mask: u64) -> FlowMod {
        FlowMod {
            cookie,
            cookie_mask: mask,
            ..FlowMod::new(FlowModCommand::DELETE, TABLE_ALL, 0, Match::default())
        }
    }

    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), WireError> {
        w.u64(self.cookie);
        w.u64(self.cookie_mask);
        w.u8(self.table_id);
        w.u8(self.command.0);
        w.u16(self.idle_timeout);
        w.u16(self.hard_timeout);
        w.u16(self.priority);
        w.u32(self.buffer_id);
        w.u32(self.out_port);
        w.u32(self.out_group);
        w.u16(self.flags);
        w.u16(self.importance);
        self.match_.encode(w)?;
        encode_instructions(&self.instructions, w)
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<FlowMod, WireError> {
        let cookie = r.u64("cookie")?;
        let cookie_mask = r.u64("cookie_mask")?;
        let table_id = r.u8("table_id")?;
        let command = FlowModCommand(r.u8("command")?);
        let idle_timeout = r.u16("idle_timeout")?;
        let hard_timeout = r.u16("hard_timeout")?;
        let priority = r.u16("priority")?;
        let buffer_id = r.u32("buffer_id")?;
        let out_port = r.u32("out_port")?;
        let out_group = r.u32("out_group")?;
        let flags = r.u16("flags")?;
        let importance = r.u16("importance")?;
        let match_ = Match::decode(r)?;
        let instructions = Arc::new(decode_instructions(r)?);
        Ok(FlowMod {
            cookie,
            cookie_mask,
            table_id,
            command,
            idle_timeout,
            hard_timeout,
            priority,
            buffer_id,
            out_port,
            out_group,
            flags,
            importance,
            match_,
            instructions,
        })
    }
}

/// `ofp_flow_stats_request` body for `OFPMP_FLOW_DESC` (OF1.5 §7.3.5.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowDescRequest {
    pub table_id: u8,
    pub out_port: u32,
    pub out_group: u32,
    pub cookie: u64,
    pub cookie_mask: u64,
    pub match_: Match,
}

impl FlowDescRequest {
    /// Every flow in every table whose cookie matches `cookie` under `mask`.
    pub fn by_cookie(cookie: u64, mask: u64) -> FlowDescRequest {
        FlowDescRequest {
            table_id: TABLE_ALL,
            out_port: port::ANY,
            out_group: GROUP_ANY,
            cookie,
            cookie_mask: mask,
            match_: Match::default(),
        }
    }
}

/// One `ofp_flow_desc` (OF1.5 §7.3.5.2). `stats` is the OXS list of `ofp_stats`, raw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowDesc {
    pub table_id: u8,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub flags: u16,
    pub importance: u16,
    pub cookie: u64,
    pub match_: Match,
    pub stats: Vec<u8>,
    pub instructions: Vec<Instruction>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MultipartRequestBody {
    FlowDesc(FlowDescRequest),
    /// `OFPMP_PORT_DESC` for one port or `port::ANY`.
    PortDesc {
        port_no: u32,
    },
    Other {
        type_: MultipartType,
        body: Vec<u8>,
    },
}

/// `ofp_multipart_request` (OF1.5 §7.3.5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MultipartRequest {
    pub flags: u16,
    pub body: MultipartRequestBody,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MultipartReplyBody {
    FlowDesc(Vec<FlowDesc>),
    PortDesc(Vec<Port>),
    Other { type_: MultipartType, body: Vec<u8> },
}

/// `ofp_multipart_reply` (OF1.5 §7.3.5); `flags & MULTIPART_MORE` says more parts follow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MultipartReply {
    pub flags: u16,
    pub body: MultipartReplyBody,
}

impl MultipartRequest {
    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), WireError> {
        let type_ = match &self.body {
            MultipartRequestBody::FlowDesc(_) => MultipartType::FLOW_DESC,
            MultipartRequestBody::PortDesc { .. } => MultipartType::PORT_DESC,
            MultipartRequestBody::Other { type_, .. } => *type_,
        };
        w.u16(type_.0);
        w.u16(self.flags);
        w.zeros(4);
        match &self.body {
            MultipartRequestBody::FlowDesc(f) => {
                w.u8(f.table_id);
                w.zeros(3);
                w.u32(f.out_port);
                w.u32(f.out_group);
                w.zeros(4);
                w.u64(f.cookie);
                w.u64(f.cookie_mask);
                f.match_.encode(w)?;
            }
            MultipartRequestBody::PortDesc { port_no } => {
                w.u32(*port_no);
                w.zeros(4);
            }
            MultipartRequestBody::Other { body, .. } => w.bytes(body),
        }
        Ok(())
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<MultipartRequest, WireError> {
        let type_ = MultipartType(r.u16("multipart type")?);
        let flags = r.u16("multipart flags")?;
        r.skip(4, "multipart padding")?;
        let body = match type_ {
            MultipartType::FLOW_DESC => {
                let table_id = r.u8("table_id")?;
                r.skip(3, "flow desc request padding")?;
                let out_port = r.u32("out_port")?;
                let out_group = r.u32("out_group")?;
                r.skip(4, "flow desc request padding")?;
                MultipartRequestBody::FlowDesc(FlowDescRequest {
                    table_id,
                    out_port,
                    out_group,
                    cookie: r.u64("cookie")?,
                    cookie_mask: r.u64("cookie_mask")?,
                    match_: Match::decode(r)?,
                })
            }
            MultipartType::PORT_DESC => {
                let port_no = r.u32("port_no")?;
                r.skip(4, "port desc request padding")?;
                MultipartRequestBody::PortDesc { port_no }
            }
            _ => MultipartRequestBody::Other {
                type_,
                body: r.bytes(r.remaining(), "multipart body")?.to_vec(),
            },
        };
        Ok(MultipartRequest { flags, body })
    }
}

impl MultipartReply {
    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), WireError> {
        let type_ = match &self.body {
            MultipartReplyBody::FlowDesc(_) => MultipartType::FLOW_DESC,
            MultipartReplyBody::PortDesc(_) => MultipartType::PORT_DESC,
            MultipartReplyBody::Other { type_, .. } => *type_,
        };
        w.u16(type_.0);
        w.u16(self.flags);
        w.zeros(4);
        match &self.body {
            MultipartReplyBody::FlowDesc(flows) => {
                for f in flows {
                    f.encode(w)?;
                }
            }
            MultipartReplyBody::PortDesc(ports) => {
                for p in ports {
                    p.encode(w)?;
                }
            }
            MultipartReplyBody::Other { body, .. } => w.bytes(body),
        }
        Ok(())
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<MultipartReply, WireError> {
        let type_ = MultipartType(r.u16("multipart type")?);
        let flags = r.u16("multipart flags")?;
        r.skip(4, "multipart padding")?;
        let body = match type_ {
            MultipartType::FLOW_DESC => {
                let mut v = Vec::new();
                while !r.is_empty() {
                    v.push(FlowDesc::decode(r)?);
                }
                MultipartReplyBody::FlowDesc(v)
            }
            MultipartType::PORT_DESC => {
                let mut v = Vec::new();
                while !r.is_empty() {
                    v.push(Port::decode(r)?);
                }
                MultipartReplyBody::PortDesc(v)
            }
            _ => MultipartReplyBody::Other {
                type_,
                body: r.bytes(r.remaining(), "multipart body")?.to_vec(),
            },
        };
        Ok(MultipartReply { flags, body })
    }
}

impl FlowDesc {
    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), WireError> {
        let start = w.pos();
        let mark = w.reserve_len_from(start);
        w.zeros(2);
        w.u8(self.table_id);
        w.zeros(1);
        w.u16(self.priority);
        w.u16(self.idle_timeout);
        w.u16(self.hard_timeout);
        w.u16(self.flags);
        w.u16(self.importance);
        w.u64(self.cookie);
        self.match_.encode(w)?;
        // ofp_stats: reserved, length (without padding), OXS fields, padding (§7.2.6).
        let stats_start = w.pos();
        w.u16(0);
        let stats_mark = w.reserve_len_from(stats_start);
        w.bytes(&self.stats);
        w.patch_len(stats_mark)?;
        w.pad8_from(stats_start);
        encode_instructions(&self.instructions, w)?;
        w.patch_len(mark)?;
        Ok(())
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<FlowDesc, WireError> {
        let len = usize::from(r.u16("flow desc length")?);
        if len < 24 {
            return Err(WireError::BadLength {
                what: "flow desc",
                len,
            });
        }
        let mut b = r.sub(len - 2, "flow desc")?;
        b.skip(2, "flow desc padding")?;
        let table_id = b.u8("table_id")?;
        b.skip(1, "flow desc padding")?;
        let priority = b.u16("priority")?;
        let idle_timeout = b.u16("idle_timeout")?;
        let hard_timeout = b.u16("hard_timeout")?;
        let flags = b.u16("flags")?;
        let importance = b.u16("importance")?;
        let cookie = b.u64("cookie")?;
        let match_ = Match::decode(&mut b)?;
        b.skip(2, "stats reserved")?;
        let slen = usize::from(b.u16("stats length")?);
        if slen < 4 {
            return Err(WireError::BadLength {
                what: "flow stats",
                len: slen,
            });
        }
        let stats = b.bytes(slen - 4, "flow stats")?.to_vec();
        b.skip(pad8(slen), "flow stats padding")?;
        let instructions = decode_instructions(&mut b)?;
        Ok(FlowDesc {
            table_id,
            priority,
            idle_timeout,
            hard_timeout,
            flags,
            importance,
            cookie,
            match_,
            stats,
            instructions,
        })
    }
}
