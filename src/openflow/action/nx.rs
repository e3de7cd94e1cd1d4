//! The Nicira actions NetworkPolicy needs whose bodies are more than a few fixed fields:
//! `NXAST_CT` (`struct nx_action_conntrack`, with nested actions) and `NXAST_CONTROLLER2`
//! (`struct nx_action_controller2`, a list of `NXAC2PT_*` properties). Layouts from OVS
//! `lib/ofp-actions.c` (`decode_NXAST_RAW_CT`, `encode_CT`, `decode_NXAST_RAW_CONTROLLER2`,
//! `encode_CONTROLLER`); properties are `ofpprop`s (OVS `lib/ofp-prop.c`: type, length
//! without padding, value, zeros to a multiple of 8). Pure encode/decode pairs; the
//! caller has written or read the 10-byte Nicira header (type, length, vendor, subtype).

use super::super::WireError;
use super::super::codec::{Reader, Writer, pad8};
use super::super::consts::{CT_RECIRC_NONE, ControllerPropType, PacketInReason};
use super::{Action, decode_actions, encode_actions};

/// Where `ct` takes its zone from: the `zone_src`/`zone` union of `nx_action_conntrack`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CtZone {
    /// `zone=N` (`zone_src` 0, `zone_imm` N; 0 is the default zone and is not printed).
    Imm(u16),
    /// `zone=NXM_NX_REG<n>[a..b]`: `src` is the field's NXM header, `ofs_nbits` is
    /// `ofs << 6 | (nbits - 1)`.
    Field { src: u32, ofs_nbits: u16 },
}

/// `NXAST_CT`: `ct(commit,table=T,zone=Z,exec(...))`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ct {
    /// [`super::super::consts::ct_flags`] bits (`commit`, `force`).
    pub flags: u16,
    pub zone: CtZone,
    /// Recirculation table, or [`CT_RECIRC_NONE`].
    pub table: u8,
    /// Well-known port of an ALG (21 ftp, 69 tftp), 0 for none.
    pub alg: u16,
    /// The nested actions (`exec(...)`, or a leading `NXAST_NAT`, kept raw).
    pub actions: Vec<Action>,
}

/// Bytes of `nx_action_conntrack` before its nested actions.
pub const CT_LEN: usize = 24;

impl Ct {
    /// `ct(table=<table>,zone=<zone>)`: track, then continue in `table`.
    pub fn track(zone: u16, table: u8) -> Ct {
        Ct {
            flags: 0,
            zone: CtZone::Imm(zone),
            table,
            alg: 0,
            actions: Vec::new(),
        }
    }

    /// The body after the Nicira subtype: flags, zone, table, pad, alg, nested actions.
    pub(super) fn encode_body(&self, w: &mut Writer<'_>) -> Result<(), WireError> {
        w.u16(self.flags);
        match self.zone {
            CtZone::Imm(z) => {
                w.u32(0);
                w.u16(z);
            }
            CtZone::Field { src, ofs_nbits } => {
                if src == 0 {
                    return Err(WireError::Invalid {
                        what: "ct zone field",
                        value: 0,
                    });
                }
                w.u32(src);
                w.u16(ofs_nbits);
            }
        }
        w.u8(self.table);
        w.zeros(3);
        w.u16(self.alg);
        encode_actions(&self.actions, w)
    }

    /// Decode the body after the subtype (`b` holds exactly the rest of the action).
    pub(super) fn decode_body(b: &mut Reader<'_>) -> Result<Ct, WireError> {
        let flags = b.u16("ct flags")?;
        let src = b.u32("ct zone_src")?;
        let z = b.u16("ct zone")?;
        let zone = if src == 0 {
            CtZone::Imm(z)
        } else {
            CtZone::Field { src, ofs_nbits: z }
        };
        let table = b.u8("ct recirc_table")?;
        b.skip(3, "ct padding")?;
        let alg = b.u16("ct alg")?;
        let actions = decode_actions(b)?;
        Ok(Ct {
            flags,
            zone,
            table,
            alg,
            actions,
        })
    }

    /// Whether `table=` is set.
    pub fn recirculates(&self) -> bool {
        self.table != CT_RECIRC_NONE
    }
}

/// One `NXAC2PT_*` property of `NXAST_CONTROLLER2`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ControllerProp {
    /// `max_len=` (absent: 65535, the whole packet).
    MaxLen(u16),
    /// `id=` (absent: 0).
    ControllerId(u16),
    /// `reason=` (absent: [`PacketInReason::ACTION`]).
    Reason(PacketInReason),
    /// `userdata=`: copied into the packet-in's `NXPINT_USERDATA`.
    Userdata(Vec<u8>),
    /// `pause`: the switch stops the pipeline and sends a continuation.
    Pause,
    /// `meter_id=`.
    MeterId(u32),
    /// Any other property, or a known one with an unexpected length: type and value.
    Other {
        type_: ControllerPropType,
        value: Vec<u8>,
    },
}

impl ControllerProp {
    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), WireError> {
        let start = w.pos();
        let (type_, value): (ControllerPropType, Vec<u8>) = match self {
            ControllerProp::MaxLen(v) => (ControllerPropType::MAX_LEN, u16_prop(*v)),
            ControllerProp::ControllerId(v) => (ControllerPropType::CONTROLLER_ID, u16_prop(*v)),
            ControllerProp::Reason(r) => (ControllerPropType::REASON, vec![r.0]),
            ControllerProp::Userdata(d) => (ControllerPropType::USERDATA, d.clone()),
            ControllerProp::Pause => (ControllerPropType::PAUSE, Vec::new()),
            ControllerProp::MeterId(m) => (ControllerPropType::METER_ID, m.to_be_bytes().to_vec()),
            ControllerProp::Other { type_, value } => (*type_, value.clone()),
        };
        w.u16(type_.0);
        let mark = w.reserve_len_from(start);
        w.bytes(&value);
        w.patch_len(mark)?;
        w.pad8_from(start);
        Ok(())
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<ControllerProp, WireError> {
        let type_ = ControllerPropType(r.u16("controller2 property type")?);
        let len = usize::from(r.u16("controller2 property length")?);
        if len < 4 {
            return Err(WireError::BadLength {
                what: "controller2 property",
                len,
            });
        }
        let v = r.bytes(len - 4, "controller2 property value")?;
        r.skip(pad8(len), "controller2 property padding")?;
        Ok(match (type_, v.len()) {
            (ControllerPropType::MAX_LEN, 4) if v[2..] == [0, 0] => {
                ControllerProp::MaxLen(u16::from_be_bytes([v[0], v[1]]))
            }
            (ControllerPropType::CONTROLLER_ID, 4) if v[2..] == [0, 0] => {
                ControllerProp::ControllerId(u16::from_be_bytes([v[0], v[1]]))
            }
            (ControllerPropType::REASON, 1) => ControllerProp::Reason(PacketInReason(v[0])),
            (ControllerPropType::USERDATA, _) => ControllerProp::Userdata(v.to_vec()),
            (ControllerPropType::PAUSE, 0) => ControllerProp::Pause,
            (ControllerPropType::METER_ID, 4) => {
                ControllerProp::MeterId(u32::from_be_bytes([v[0], v[1], v[2], v[3]]))
            }
            _ => ControllerProp::Other {
                type_,
                value: v.to_vec(),
            },
        })
    }
}

/// A 16-bit property value as OVS writes it (`ofpprop_put_u16`): the value and two zero
/// bytes. A 2-byte value (which OVS also accepts) decodes as `Other`, so it round-trips.
fn u16_prop(v: u16) -> Vec<u8> {
    let [a, b] = v.to_be_bytes();
    vec![a, b, 0, 0]
}

/// Bytes of `nx_action_controller2` before its properties.
pub const CONTROLLER2_LEN: usize = 16;

/// The body of `NXAST_CONTROLLER2` after the subtype: 6 zero bytes, then the properties.
pub(super) fn encode_controller2(
    props: &[ControllerProp],
    w: &mut Writer<'_>,
) -> Result<(), WireError> {
    w.zeros(6);
    props.iter().try_for_each(|p| p.encode(w))
}

pub(super) fn decode_controller2(b: &mut Reader<'_>) -> Result<Vec<ControllerProp>, WireError> {
    b.skip(6, "controller2 padding")?;
    let mut v = Vec::new();
    while !b.is_empty() {
        v.push(ControllerProp::decode(b)?);
    }
    Ok(v)
}
