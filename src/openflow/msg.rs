//! OpenFlow messages: the 8-byte header (OF1.5 §7.1.1), framing, and every message tether
//! sends or must understand, for OpenFlow 1.5 (flows, bundles, multipart) and OpenFlow 1.0
//! (the no-flood `PORT_MOD` and the `FEATURES_REPLY` port list it needs), and the bundle
//! messages, which carry a whole message (§7.3.9). Flow mods and multipart bodies live in
//! [`super::flowmod`], the port description in [`super::port`]. Pure: bytes in, values out.
//!
//! A message type this module does not model decodes as [`Body::Other`] and encodes back
//! byte for byte; whether to accept it is the connection's decision.

use super::WireError;
use super::codec::{Reader, Writer, pad8};
use super::consts::{
    BundleCtrlType, ErrorType, HelloElemType, MsgType, MsgType10, Version, error_name,
};
use super::flowmod::{FlowMod, MultipartReply, MultipartRequest};
use super::oxm::Mac;
pub use super::port::{Port, port_name, port_name_field};

/// The OpenFlow header is 8 bytes: version, type, length, xid (OF1.5 §7.1.1).
pub const HEADER_LEN: usize = 8;

/// One message: header fields plus a typed body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Msg {
    pub version: Version,
    pub xid: u32,
    pub body: Body,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    Hello(Hello),
    Error(ErrorMsg),
    EchoRequest(Vec<u8>),
    EchoReply(Vec<u8>),
    FeaturesRequest,
    /// OF1.5 `ofp_switch_features`.
    FeaturesReply(FeaturesReply),
    /// OF1.0 `ofp_switch_features` with its port list.
    FeaturesReply10(FeaturesReply10),
    BarrierRequest,
    BarrierReply,
    FlowMod(FlowMod),
    BundleControl(BundleControl),
    BundleAdd(BundleAdd),
    MultipartRequest(MultipartRequest),
    MultipartReply(MultipartReply),
    /// OF1.5 `ofp_port_status`.
    PortStatus(PortStatus),
    /// OF1.0 `ofp_port_mod`.
    PortMod10(PortMod10),
    GetConfigRequest,
    GetConfigReply(SwitchConfig),
    SetConfig(SwitchConfig),
    /// A message type not modelled here (raw type number and body).
    Other {
        type_: u8,
        body: Vec<u8>,
    },
}

/// `OFPT_HELLO` with an optional version bitmap element (OF1.5 §7.5.1). Other elements are
/// kept raw so the message round-trips.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Hello {
    /// Bit n set = version n supported (bitmap word 0 covers versions 0..31).
    pub bitmap: Option<u32>,
    pub other_elements: Vec<u8>,
}

impl Hello {
    /// A hello offering exactly `versions`.
    pub fn offering(versions: &[Version]) -> Hello {
        Hello {
            bitmap: Some(versions.iter().fold(0, |b, v| b | 1u32 << (v.0 & 31))),
            other_elements: Vec::new(),
        }
    }

    /// Versions the peer supports: its bitmap, or without one every version up to the
    /// header's (OF1.5 §6.3.1).
    pub fn supports(&self, header_version: Version, v: Version) -> bool {
        match self.bitmap {
            Some(b) => v.0 < 32 && b & (1 << v.0) != 0,
            None => v.0 <= header_version.0,
        }
    }
}

/// `OFPT_ERROR` (OF1.5 §7.5.4). `experimenter` is set for `OFPET_EXPERIMENTER` errors, whose
/// `code` is then the experimenter's `exp_code`. `data` holds (a prefix of) the message that
/// failed, as the switch sent it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorMsg {
    pub type_: ErrorType,
    pub code: u16,
    pub experimenter: Option<u32>,
    pub data: Vec<u8>,
}

impl ErrorMsg {
    /// The OVS name of the error (`OFPBMC_BAD_PREREQ`) or `type/code` numbers.
    pub fn name(&self) -> String {
        match (
            error_name(self.type_, self.code, self.experimenter),
            self.experimenter,
        ) {
            (Some(n), _) => n.to_string(),
            (None, Some(e)) => format!("experimenter {e:#x} code {}", self.code),
            (None, None) => format!("{} code {}", self.type_, self.code),
        }
    }

    /// xid of the failed message, from the header at the start of `data`.
    pub fn failed_xid(&self) -> Option<u32> {
        let b = self.data.get(4..8)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// The failed message decoded, when the switch sent all of it.
    pub fn failed_msg(&self) -> Option<Msg> {
        Msg::decode(&self.data).ok()
    }
}

/// OF1.5 `ofp_switch_features` (§7.3.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeaturesReply {
    pub datapath_id: u64,
    pub n_buffers: u32,
    pub n_tables: u8,
    pub auxiliary_id: u8,
    pub capabilities: u32,
    pub reserved: u32,
}

/// OF1.0 `ofp_switch_features` (OF1.0 §5.3.1) with the port list OF1.0 carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeaturesReply10 {
    pub datapath_id: u64,
    pub n_buffers: u32,
    pub n_tables: u8,
    pub capabilities: u32,
    pub actions: u32,
    pub ports: Vec<PhyPort10>,
}

/// OF1.0 `ofp_phy_port` (OF1.0 §5.2.1), 48 bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhyPort10 {
    pub port_no: u16,
    pub hw_addr: Mac,
    pub name: [u8; 16],
    pub config: u32,
    pub state: u32,
    pub curr: u32,
    pub advertised: u32,
    pub supported: u32,
    pub peer: u32,
}

/// OF1.0 `ofp_port_mod` (OF1.0 §5.3.3), 32 bytes with the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortMod10 {
    pub port_no: u16,
    pub hw_addr: Mac,
    pub config: u32,
    pub mask: u32,
    pub advertise: u32,
}

/// `ofp_switch_config` (OF1.5 §7.3.2; the same layout and message numbers in OF1.0
/// §5.3.2): the body of `OFPT_SET_CONFIG` and `OFPT_GET_CONFIG_REPLY`. OVS sends a
/// service connection (the bridge's `.mgmt` socket) no packet-in until it has set a
/// non-zero `miss_send_len` (`ofconn_receives_async_msg` in `ofproto/connmgr.c`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchConfig {
    /// `OFPC_FRAG_*` (0: `frags=normal`).
    pub flags: u16,
    /// Bytes of a packet sent with a table-miss or `output:CONTROLLER` packet-in
    /// (`OFPCML_NO_BUFFER`, 0xffff: all of it).
    pub miss_send_len: u16,
}

impl SwitchConfig {
    fn encode(&self, w: &mut Writer<'_>) {
        w.u16(self.flags);
        w.u16(self.miss_send_len);
    }

    fn decode(r: &mut Reader<'_>) -> Result<SwitchConfig, WireError> {
        Ok(SwitchConfig {
            flags: r.u16("switch_config flags")?,
            miss_send_len: r.u16("switch_config miss_send_len")?,
        })
    }
}

/// OF1.5 `ofp_port_status` (§7.4.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortStatus {
    pub reason: u8,
    pub port: Port,
}

impl Body {
    /// Wire type number for `version` (OF1.0 and OF1.5 number some messages differently).
    pub fn type_code(&self, version: Version) -> Result<u8, WireError> {
        let v10 = version == Version::OF10;
        let t = match self {
            Body::Hello(_) => MsgType::HELLO.0,
            Body::Error(_) => MsgType::ERROR.0,
            Body::EchoRequest(_) => MsgType::ECHO_REQUEST.0,
            Body::EchoReply(_) => MsgType::ECHO_REPLY.0,
            Body::FeaturesRequest => MsgType::FEATURES_REQUEST.0,
            Body::FeaturesReply(_) if !v10 => MsgType::FEATURES_REPLY.0,
            Body::FeaturesReply10(_) if v10 => MsgType10::FEATURES_REPLY.0,
            Body::BarrierRequest if v10 => MsgType10::BARRIER_REQUEST.0,
            Body::BarrierReply if v10 => MsgType10::BARRIER_REPLY.0,
            Body::BarrierRequest => MsgType::BARRIER_REQUEST.0,
            Body::BarrierReply => MsgType::BARRIER_REPLY.0,
            Body::PortMod10(_) if v10 => MsgType10::PORT_MOD.0,
            // Numbered alike in OF1.0 and OF1.5.
            Body::GetConfigRequest => MsgType::GET_CONFIG_REQUEST.0,
            Body::GetConfigReply(_) => MsgType::GET_CONFIG_REPLY.0,
            Body::SetConfig(_) => MsgType::SET_CONFIG.0,
            Body::FlowMod(_) if !v10 => MsgType::FLOW_MOD.0,
            Body::BundleControl(_) if !v10 => MsgType::BUNDLE_CONTROL.0,
            Body::BundleAdd(_) if !v10 => MsgType::BUNDLE_ADD_MESSAGE.0,
            Body::MultipartRequest(_) if !v10 => MsgType::MULTIPART_REQUEST.0,
            Body::MultipartReply(_) if !v10 => MsgType::MULTIPART_REPLY.0,
            Body::PortStatus(_) if !v10 => MsgType::PORT_STATUS.0,
            Body::Other { type_, .. } => *type_,
            _ => {
                return Err(WireError::WrongVersion {
                    what: "message body",
                    version: version.0,
                });
            }
        };
        Ok(t)
    }
}

impl Msg {
    pub fn new(version: Version, xid: u32, body: Body) -> Msg {
        Msg { version, xid, body }
    }

    /// Append the encoded message to `out` (length patched after the body).
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), WireError> {
        let type_ = self.body.type_code(self.version)?;
        let start = out.len();
        let mut w = Writer::new(out);
        w.u8(self.version.0);
        w.u8(type_);
        let mark = w.reserve_len_from(start);
        w.u32(self.xid);
        let r = self.encode_body(&mut w);
        if r.is_err() {
            // Leave `out` as it was, so a batch is never left with half a message.
            w.out.truncate(start);
            return r;
        }
        if let Err(e) = w.patch_len(mark) {
            w.out.truncate(start);
            return Err(e);
        }
        Ok(())
    }

    pub fn to_bytes(&self) -> Result<Vec<u8>, WireError> {
        let mut v = Vec::new();
        self.encode(&mut v)?;
        Ok(v)
    }

    fn encode_body(&self, w: &mut Writer<'_>) -> Result<(), WireError> {
        match &self.body {
            Body::Hello(h) => {
                if let Some(bitmap) = h.bitmap {
                    let start = w.pos();
                    w.u16(HelloElemType::VERSIONBITMAP.0);
                    w.u16(8);
                    w.u32(bitmap);
                    w.pad8_from(start);
                }
                w.bytes(&h.other_elements);
            }
            Body::Error(e) => {
                w.u16(e.type_.0);
                w.u16(e.code);
                if let Some(exp) = e.experimenter {
                    w.u32(exp);
                }
                w.bytes(&e.data);
            }
            Body::EchoRequest(d) | Body::EchoReply(d) => w.bytes(d),
            Body::FeaturesRequest
            | Body::BarrierRequest
            | Body::BarrierReply
            | Body::GetConfigRequest => {}
            Body::GetConfigReply(c) | Body::SetConfig(c) => c.encode(w),
            Body::FeaturesReply(f) => {
                w.u64(f.datapath_id);
                w.u32(f.n_buffers);
                w.u8(f.n_tables);
                w.u8(f.auxiliary_id);
                w.zeros(2);
                w.u32(f.capabilities);
                w.u32(f.reserved);
            }
            Body::FeaturesReply10(f) => {
                w.u64(f.datapath_id);
                w.u32(f.n_buffers);
                w.u8(f.n_tables);
                w.zeros(3);
                w.u32(f.capabilities);
                w.u32(f.actions);
                for p in &f.ports {
                    w.u16(p.port_no);
                    w.bytes(&p.hw_addr);
                    w.bytes(&p.name);
                    for v in [p.config, p.state, p.curr, p.advertised, p.supported, p.peer] {
                        w.u32(v);
                    }
                }
            }
            Body::PortMod10(p) => {
                w.u16(p.port_no);
                w.bytes(&p.hw_addr);
                w.u32(p.config);
                w.u32(p.mask);
                w.u32(p.advertise);
                w.zeros(4);
            }
            Body::PortStatus(s) => {
                w.u8(s.reason);
                w.zeros(7);
                s.port.encode(w)?;
            }
            Body::FlowMod(f) => f.encode(w)?,
            Body::BundleControl(b) => b.encode(w),
            Body::BundleAdd(b) => b.encode(w)?,
            Body::MultipartRequest(m) => m.encode(w)?,
            Body::MultipartReply(m) => m.encode(w)?,
            Body::Other { body, .. } => w.bytes(body),
        }
        Ok(())
    }

    /// Length of the message whose header starts `head`, checked: at least a header, and
    /// the version one the stream speaks. The stream reader calls this before reading the
    /// body, so a garbage header is caught before we wait for bytes that never come.
    pub fn frame_len(head: &[u8; HEADER_LEN]) -> Result<usize, WireError> {
        let len = usize::from(u16::from_be_bytes([head[2], head[3]]));
        if len < HEADER_LEN {
            return Err(WireError::BadLength {
                what: "message header",
                len,
            });
        }
        if head[0] == 0 || head[0] > Version::OF15.0 {
            return Err(WireError::WrongVersion {
                what: "message header",
                version: head[0],
            });
        }
        Ok(len)
    }

    /// Decode exactly one message: `buf` must be exactly the length its header says.
    pub fn decode(buf: &[u8]) -> Result<Msg, WireError> {
        let mut r = Reader::new(buf);
        let version = Version(r.u8("version")?);
        let type_ = r.u8("message type")?;
        let len = usize::from(r.u16("message length")?);
        let xid = r.u32("xid")?;
        if len < HEADER_LEN || len != buf.len() {
            return Err(WireError::BadLength {
                what: "message",
                len,
            });
        }
        let body = decode_body(version, type_, &mut r)?;
        r.finish("message body")?;
        Ok(Msg { version, xid, body })
    }
}

fn decode_body(version: Version, type_: u8, r: &mut Reader<'_>) -> Result<Body, WireError> {
    // Long on purpose: One arm per OpenFlow message type: a table.
    let v10 = version == Version::OF10;
    let v15 = version == Version::OF15;
    // HELLO, ERROR and ECHO share numbers and layouts across versions (OF1.5 §7.1.1).
    Ok(match type_ {
        t if t == MsgType::HELLO.0 => Body::Hello(decode_hello(r)?),
        t if t == MsgType::ERROR.0 => {
            let type_ = ErrorType(r.u16("error type")?);
            let code = r.u16("error code")?;
            let experimenter = if type_ == ErrorType::EXPERIMENTER && !v10 {
                Some(r.u32("error experimenter")?)
            } else {
                None
            };
            Body::Error(ErrorMsg {
                type_,
                code,
                experimenter,
                data: r.bytes(r.remaining(), "error data")?.to_vec(),
            })
        }
        t if t == MsgType::ECHO_REQUEST.0 => {
            Body::EchoRequest(r.bytes(r.remaining(), "echo data")?.to_vec())
        }
        t if t == MsgType::ECHO_REPLY.0 => {
            Body::EchoReply(r.bytes(r.remaining(), "echo data")?.to_vec())
        }
        t if t == MsgType::FEATURES_REQUEST.0 && (v10 || v15) => Body::FeaturesRequest,
        t if t == MsgType::FEATURES_REPLY.0 && v15 => {
            let datapath_id = r.u64("datapath_id")?;
            let n_buffers = r.u32("n_buffers")?;
            let n_tables = r.u8("n_tables")?;
            let auxiliary_id = r.u8("auxiliary_id")?;
            r.skip(2, "features padding")?;
            Body::FeaturesReply(FeaturesReply {
                datapath_id,
                n_buffers,
                n_tables,
                auxiliary_id,
                capabilities: r.u32("capabilities")?,
                reserved: r.u32("reserved")?,
            })
        }
        t if t == MsgType10::FEATURES_REPLY.0 && v10 => {
            Body::FeaturesReply10(decode_features10(r)?)
        }
        t if t == MsgType10::PORT_MOD.0 && v10 => {
            let port_no = r.u16("port_no")?;
            let hw_addr = r.array("hw_addr")?;
            let config = r.u32("config")?;
            let mask = r.u32("mask")?;
            let advertise = r.u32("advertise")?;
            r.skip(4, "port_mod padding")?;
            Body::PortMod10(PortMod10 {
                port_no,
                hw_addr,
                config,
                mask,
                advertise,
            })
        }
        t if t == MsgType::GET_CONFIG_REQUEST.0 => Body::GetConfigRequest,
        t if t == MsgType::GET_CONFIG_REPLY.0 => Body::GetConfigReply(SwitchConfig::decode(r)?),
        t if t == MsgType::SET_CONFIG.0 => Body::SetConfig(SwitchConfig::decode(r)?),
        t if t == MsgType10::BARRIER_REQUEST.0 && v10 => Body::BarrierRequest,
        t if t == MsgType10::BARRIER_REPLY.0 && v10 => Body::BarrierReply,
        t if t == MsgType::BARRIER_REQUEST.0 && v15 => Body::BarrierRequest,
        t if t == MsgType::BARRIER_REPLY.0 && v15 => Body::BarrierReply,
        t if t == MsgType::FLOW_MOD.0 && v15 => Body::FlowMod(FlowMod::decode(r)?),
        t if t == MsgType::BUNDLE_CONTROL.0 && v15 => {
            Body::BundleControl(BundleControl::decode(r)?)
        }
        t if t == MsgType::BUNDLE_ADD_MESSAGE.0 && v15 => Body::BundleAdd(BundleAdd::decode(r)?),
        t if t == MsgType::MULTIPART_REQUEST.0 && v15 => {
            Body::MultipartRequest(MultipartRequest::decode(r)?)
        }
        t if t == MsgType::MULTIPART_REPLY.0 && v15 => {
            Body::MultipartReply(MultipartReply::decode(r)?)
        }
        t if t == MsgType::PORT_STATUS.0 && v15 => {
            let reason = r.u8("port_status reason")?;
            r.skip(7, "port_status padding")?;
            Body::PortStatus(PortStatus {
                reason,
                port: Port::decode(r)?,
            })
        }
        _ => Body::Other {
            type_,
            body: r.bytes(r.remaining(), "message body")?.to_vec(),
        },
    })
}

fn decode_hello(r: &mut Reader<'_>) -> Result<Hello, WireError> {
    let mut hello = Hello::default();
    while !r.is_empty() {
        let start = r.rest();
        let type_ = HelloElemType(r.u16("hello element type")?);
        let len = usize::from(r.u16("hello element length")?);
        if len < 4 {
            return Err(WireError::BadLength {
                what: "hello element",
                len,
            });
        }
        let mut body = r.sub(len - 4, "hello element")?;
        // The last element's padding may be missing in old implementations; accept that.
        let padding = pad8(len).min(r.remaining());
        r.skip(padding, "hello element padding")?;
        if type_ == HelloElemType::VERSIONBITMAP && hello.bitmap.is_none() {
            if body.remaining() < 4 || body.remaining() % 4 != 0 {
                return Err(WireError::BadLength {
                    what: "hello version bitmap",
                    len,
                });
            }
            // Word 0 covers versions 0..31; later words are for versions not yet defined.
            hello.bitmap = Some(body.u32("version bitmap")?);
        } else {
            let used = len + padding;
            hello.other_elements.extend_from_slice(&start[..used]);
        }
    }
    Ok(hello)
}

fn decode_features10(r: &mut Reader<'_>) -> Result<FeaturesReply10, WireError> {
    let datapath_id = r.u64("datapath_id")?;
    let n_buffers = r.u32("n_buffers")?;
    let n_tables = r.u8("n_tables")?;
    r.skip(3, "features padding")?;
    let capabilities = r.u32("capabilities")?;
    let actions = r.u32("actions")?;
    if !r.remaining().is_multiple_of(48) {
        return Err(WireError::BadLength {
            what: "OF1.0 port list",
            len: r.remaining(),
        });
    }
    let mut ports = Vec::with_capacity(r.remaining() / 48);
    while !r.is_empty() {
        ports.push(PhyPort10 {
            port_no: r.u16("port_no")?,
            hw_addr: r.array("hw_addr")?,
            name: r.array("port name")?,
            config: r.u32("config")?,
            state: r.u32("state")?,
            curr: r.u32("curr")?,
            advertised: r.u32("advertised")?,
            supported: r.u32("supported")?,
            peer: r.u32("peer")?,
        });
    }
    Ok(FeaturesReply10 {
        datapath_id,
        n_buffers,
        n_tables,
        capabilities,
        actions,
        ports,
    })
}

/// `ofp_bundle_ctrl_msg` (OF1.5 §7.3.9.1); properties kept raw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BundleControl {
    pub bundle_id: u32,
    pub type_: BundleCtrlType,
    pub flags: u16,
    pub properties: Vec<u8>,
}

impl BundleControl {
    pub fn new(bundle_id: u32, type_: BundleCtrlType, flags: u16) -> BundleControl {
        BundleControl {
            bundle_id,
            type_,
            flags,
            properties: Vec::new(),
        }
    }

    pub fn encode(&self, w: &mut Writer<'_>) {
        w.u32(self.bundle_id);
        w.u16(self.type_.0);
        w.u16(self.flags);
        w.bytes(&self.properties);
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<BundleControl, WireError> {
        Ok(BundleControl {
            bundle_id: r.u32("bundle_id")?,
            type_: BundleCtrlType(r.u16("bundle control type")?),
            flags: r.u16("bundle flags")?,
            properties: r.bytes(r.remaining(), "bundle properties")?.to_vec(),
        })
    }
}

/// `ofp_bundle_add_msg` (OF1.5 §7.3.9.6): a whole message inside, whose xid must equal the
/// outer one (OVS answers `OFPBFC_MSG_BAD_XID` otherwise). Bytes after the inner message
/// (padding and properties) are kept raw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BundleAdd {
    pub bundle_id: u32,
    pub flags: u16,
    pub msg: Box<Msg>,
    pub properties: Vec<u8>,
}

impl BundleAdd {
    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), WireError> {
        w.u32(self.bundle_id);
        w.zeros(2);
        w.u16(self.flags);
        self.msg.encode(w.out)?;
        w.bytes(&self.properties);
        Ok(())
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<BundleAdd, WireError> {
        let bundle_id = r.u32("bundle_id")?;
        r.skip(2, "bundle add padding")?;
        let flags = r.u16("bundle flags")?;
        let head = r.rest();
        if head.len() < 4 {
            return Err(WireError::Truncated {
                what: "bundled message header",
                need: 4,
                have: head.len(),
            });
        }
        let len = usize::from(u16::from_be_bytes([head[2], head[3]]));
        let inner = r.bytes(len, "bundled message")?;
        let msg = Box::new(Msg::decode(inner)?);
        Ok(BundleAdd {
            bundle_id,
            flags,
            msg,
            properties: r.bytes(r.remaining(), "bundle add properties")?.to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testing::hex;

    /// Each vector as `ovs-ofctl ofp-print` (OVS 3.1) reads it:
    /// `OFPT_SET_CONFIG (OF1.5) (xid=0x7): frags=normal miss_send_len=65535`,
    /// `OFPT_GET_CONFIG_REQUEST (OF1.5) (xid=0x8):`,
    /// `OFPT_GET_CONFIG_REPLY (OF1.5) (xid=0x8): frags=normal miss_send_len=128`,
    /// `OFPT_SET_CONFIG (xid=0x7): frags=normal miss_send_len=65535` (OF1.0).
    #[test]
    fn switch_config_messages_exact_bytes() {
        let all = SwitchConfig {
            flags: 0,
            miss_send_len: 0xffff,
        };
        for (msg, want) in [
            (
                Msg::new(Version::OF15, 7, Body::SetConfig(all)),
                "06 09 000c 00000007 0000 ffff",
            ),
            (
                Msg::new(Version::OF15, 8, Body::GetConfigRequest),
                "06 07 0008 00000008",
            ),
            (
                Msg::new(
                    Version::OF15,
                    8,
                    Body::GetConfigReply(SwitchConfig {
                        flags: 0,
                        miss_send_len: 128,
                    }),
                ),
                "06 08 000c 00000008 0000 0080",
            ),
            (
                Msg::new(Version::OF10, 7, Body::SetConfig(all)),
                "01 09 000c 00000007 0000 ffff",
            ),
        ] {
            let mut buf = vec![0xa5; 3];
            msg.encode(&mut buf).unwrap();
            assert_eq!(&buf[..3], &[0xa5; 3], "prefill touched");
            assert_eq!(buf[3..], hex(want), "{msg:?}");
            assert_eq!(Msg::decode(&buf[3..]).unwrap(), msg);
            for n in 0..buf.len() - 3 {
                assert!(Msg::decode(&buf[3..3 + n]).is_err(), "{msg:?}: prefix {n}");
            }
        }
        // A body with a byte too many, header length consistent: refused.
        assert!(Msg::decode(&hex("06 09 000d 00000007 0000 ffff 00")).is_err());
    }
}
