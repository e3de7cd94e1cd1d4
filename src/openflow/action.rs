//! Actions (OF1.5 §7.2.5) and instructions (OF1.5 §7.2.4) for flow mods and flow
//! descriptions, with the Nicira extension actions OVS understands (`NXAST_OUTPUT_REG`,
//! `NXAST_RESUBMIT_TABLE`, and for NetworkPolicy `NXAST_CONJUNCTION`, `NXAST_CT` and
//! `NXAST_CONTROLLER2` (the last two in `action/nx.rs`); layouts from OVS
//! `lib/ofp-actions.c`). Register loads are plain OF1.5 `SET_FIELD` actions with an
//! optional OXM mask, as OVS itself encodes them for 1.5. Anything else decodes as `Other`
//! and encodes back unchanged.

mod nx;

pub use nx::{CONTROLLER2_LEN, CT_LEN, ControllerProp, Ct, CtZone};

use super::WireError;
use super::codec::{LenMark, Reader, Writer};
use super::consts::{
    ActionType, InstructionType, NX_EXPERIMENTER, NxActionSubtype, OxmClass, ct_flags, port,
};
use super::oxm::MatchField;

/// One action.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// `OFPAT_OUTPUT`: `port` may be a number or one of [`port`] (NORMAL, IN_PORT …).
    Output { port: u32, max_len: u16 },
    /// `OFPAT_SET_FIELD` with the field's value and, for a partial load, its mask.
    SetField(MatchField),
    /// `NXAST_OUTPUT_REG`: output to the port held in bits of a field (`output:NXM_NX_REG1[]`).
    /// `src` is the NXM header of the field, `ofs_nbits` is `ofs << 6 | (nbits - 1)`.
    OutputReg {
        src: u32,
        ofs_nbits: u16,
        max_len: u16,
    },
    /// `NXAST_RESUBMIT_TABLE`: `resubmit(<in_port>,<table>)`; `in_port` 0xfff8 means "keep".
    Resubmit { in_port: u16, table: u8 },
    /// `NXAST_CONJUNCTION`: `conjunction(<id>,<clause + 1>/<n_clauses>)`. `clause` is the
    /// wire's 0-based clause number (OVS requires `clause < n_clauses`, 2 ≤ n ≤ 64).
    Conjunction { id: u32, clause: u8, n_clauses: u8 },
    /// `NXAST_CT`: `ct(commit,table=T,zone=Z,exec(...))`.
    Ct(Ct),
    /// `NXAST_CONTROLLER2`: `controller(userdata=…,pause,…)`, the properties in wire order.
    /// A plain `CONTROLLER:<max_len>` is [`Action::Output`] to [`port::CONTROLLER`].
    Controller2(Vec<ControllerProp>),
    /// Any other action: its type and the bytes after the 4-byte type/length header.
    Other { type_: ActionType, body: Vec<u8> },
}

/// `max_len` OVS uses for outputs that are not to the controller (`OFPCML_NO_BUFFER`).
pub const MAX_LEN_NO_BUFFER: u16 = 0xffff;

impl Action {
    /// `output:<port>` (also `NORMAL`, `IN_PORT` via [`port`]).
    pub fn output(port: u32) -> Action {
        Action::Output {
            port,
            max_len: MAX_LEN_NO_BUFFER,
        }
    }

    /// `output:NXM_NX_REG<idx>[]`, the whole 32-bit register.
    pub fn output_reg(idx: u8) -> Action {
        Action::OutputReg {
            src: u32::from(OxmClass::NXM_1.0) << 16 | u32::from(idx & 0x7f) << 9 | 4,
            ofs_nbits: 31,
            max_len: MAX_LEN_NO_BUFFER,
        }
    }

    /// `set_field:<value>[/<mask>]->reg<idx>`; a full-width mask is sent unmasked.
    pub fn load_reg(idx: u8, value: u32, mask: u32) -> Action {
        Action::SetField(MatchField::Reg {
            idx,
            value,
            mask: (mask != u32::MAX).then_some(mask),
        })
    }

    /// `output:CONTROLLER` with `max_len` bytes of the packet (`CONTROLLER:<max_len>`).
    pub fn to_controller(max_len: u16) -> Action {
        Action::Output {
            port: port::CONTROLLER,
            max_len,
        }
    }

    /// `conjunction(<id>,<k>/<n>)`, `k` counted from 1 as in ovs-ofctl's text.
    pub fn conjunction(id: u32, k: u8, n: u8) -> Action {
        Action::Conjunction {
            id,
            clause: k.wrapping_sub(1),
            n_clauses: n,
        }
    }

    /// `ct(commit,table=<table>,zone=<zone>,exec(<actions>))` (`table` may be
    /// [`super::consts::CT_RECIRC_NONE`]).
    pub fn ct_commit(zone: u16, table: u8, exec: Vec<Action>) -> Action {
        Action::Ct(Ct {
            flags: ct_flags::COMMIT,
            actions: exec,
            ..Ct::track(zone, table)
        })
    }

    /// `controller(userdata=<userdata>[,pause])`: packet-in with userdata, as Antrea's
    /// Reject/logging (`userdata=01.<op>`) and DNS interception (`02`, `pause`) send it.
    pub fn controller(userdata: &[u8], pause: bool) -> Action {
        let mut props = vec![ControllerProp::Userdata(userdata.to_vec())];
        if pause {
            props.push(ControllerProp::Pause);
        }
        Action::Controller2(props)
    }

    /// `resubmit(,<table>)`.
    pub fn resubmit(table: u8) -> Action {
        Action::Resubmit {
            in_port: port::IN_PORT_16,
            table,
        }
    }

    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), WireError> {
        let start = w.pos();
        match self {
            Action::Output { port, max_len } => {
                w.u16(ActionType::OUTPUT.0);
                w.u16(16);
                w.u32(*port);
                w.u16(*max_len);
                w.zeros(6);
            }
            Action::SetField(f) => {
                w.u16(ActionType::SET_FIELD.0);
                let mark = w.reserve_len_from(start);
                f.encode(w)?;
                w.pad8_from(start);
                w.patch_len(mark)?;
            }
            Action::OutputReg {
                src,
                ofs_nbits,
                max_len,
            } => {
                nx_header(w, 24, NxActionSubtype::OUTPUT_REG);
                w.u16(*ofs_nbits);
                w.u32(*src);
                w.u16(*max_len);
                w.zeros(6);
            }
            Action::Resubmit { in_port, table } => {
                nx_header(w, 16, NxActionSubtype::RESUBMIT_TABLE);
                w.u16(*in_port);
                w.u8(*table);
                w.zeros(3);
            }
            Action::Conjunction {
                id,
                clause,
                n_clauses,
            } => {
                nx_header(w, 16, NxActionSubtype::CONJUNCTION);
                w.u8(*clause);
                w.u8(*n_clauses);
                w.u32(*id);
            }
            Action::Ct(ct) => {
                let mark = nx_header_var(w, start, NxActionSubtype::CT);
                ct.encode_body(w)?;
                w.patch_len(mark)?;
            }
            Action::Controller2(props) => {
                let mark = nx_header_var(w, start, NxActionSubtype::CONTROLLER2);
                nx::encode_controller2(props, w)?;
                w.patch_len(mark)?;
            }
            Action::Other { type_, body } => {
                w.u16(type_.0);
                let mark = w.reserve_len_from(start);
                w.bytes(body);
                w.patch_len(mark)?;
            }
        }
        Ok(())
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<Action, WireError> {
        // Long on purpose: one arm per action layout (and its length rule), a table.
        let type_ = ActionType(r.u16("action type")?);
        let len = usize::from(r.u16("action length")?);
        if len < 8 || len % 8 != 0 {
            return Err(WireError::BadLength {
                what: "action",
                len,
            });
        }
        let mut b = r.sub(len - 4, "action body")?;
        let other = |b: &Reader<'_>| Action::Other {
            type_,
            body: b.rest().to_vec(),
        };
        match type_ {
            ActionType::OUTPUT => {
                if len != 16 {
                    return Err(WireError::BadLength {
                        what: "output action",
                        len,
                    });
                }
                let port = b.u32("output port")?;
                let max_len = b.u16("output max_len")?;
                Ok(Action::Output { port, max_len })
            }
            ActionType::SET_FIELD => {
                let f = MatchField::decode(&mut b)?;
                // What is left is padding; it must be shorter than 8 bytes (OF1.5 §7.2.5).
                if b.remaining() >= 8 {
                    return Err(WireError::BadLength {
                        what: "set_field action",
                        len,
                    });
                }
                Ok(Action::SetField(f))
            }
            ActionType::EXPERIMENTER => {
                let all = b.clone();
                let exp = b.u32("action experimenter")?;
                if exp != NX_EXPERIMENTER {
                    return Ok(other(&all));
                }
                let sub = NxActionSubtype(b.u16("nx action subtype")?);
                match (sub, len) {
                    (NxActionSubtype::OUTPUT_REG, 24) => {
                        let ofs_nbits = b.u16("output_reg ofs_nbits")?;
                        let src = b.u32("output_reg src")?;
                        let max_len = b.u16("output_reg max_len")?;
                        Ok(Action::OutputReg {
                            src,
                            ofs_nbits,
                            max_len,
                        })
                    }
                    (NxActionSubtype::RESUBMIT_TABLE, 16) => {
                        let in_port = b.u16("resubmit in_port")?;
                        let table = b.u8("resubmit table")?;
                        Ok(Action::Resubmit { in_port, table })
                    }
                    (NxActionSubtype::CONJUNCTION, 16) => {
                        let clause = b.u8("conjunction clause")?;
                        let n_clauses = b.u8("conjunction n_clauses")?;
                        let id = b.u32("conjunction id")?;
                        Ok(Action::Conjunction {
                            id,
                            clause,
                            n_clauses,
                        })
                    }
                    (NxActionSubtype::CT, CT_LEN..) => Ok(Action::Ct(Ct::decode_body(&mut b)?)),
                    (NxActionSubtype::CONTROLLER2, CONTROLLER2_LEN..) => {
                        Ok(Action::Controller2(nx::decode_controller2(&mut b)?))
                    }
                    (
                        NxActionSubtype::OUTPUT_REG
                        | NxActionSubtype::RESUBMIT_TABLE
                        | NxActionSubtype::CONJUNCTION
                        | NxActionSubtype::CT
                        | NxActionSubtype::CONTROLLER2,
                        _,
                    ) => Err(WireError::BadLength {
                        what: "nicira action",
                        len,
                    }),
                    _ => Ok(other(&all)),
                }
            }
            _ => Ok(other(&b)),
        }
    }
}

fn nx_header(w: &mut Writer<'_>, len: u16, sub: NxActionSubtype) {
    w.u16(ActionType::EXPERIMENTER.0);
    w.u16(len);
    w.u32(NX_EXPERIMENTER);
    w.u16(sub.0);
}

/// A Nicira action header whose length is patched once the body is written.
fn nx_header_var(w: &mut Writer<'_>, start: usize, sub: NxActionSubtype) -> LenMark {
    w.u16(ActionType::EXPERIMENTER.0);
    let mark = w.reserve_len_from(start);
    w.u32(NX_EXPERIMENTER);
    w.u16(sub.0);
    mark
}

/// Encode a list of actions back to back.
pub fn encode_actions(actions: &[Action], w: &mut Writer<'_>) -> Result<(), WireError> {
    actions.iter().try_for_each(|a| a.encode(w))
}

/// Decode actions until the reader is empty.
pub fn decode_actions(r: &mut Reader<'_>) -> Result<Vec<Action>, WireError> {
    let mut v = Vec::new();
    while !r.is_empty() {
        v.push(Action::decode(r)?);
    }
    Ok(v)
}

/// One instruction.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Instruction {
    /// `OFPIT_GOTO_TABLE`.
    GotoTable(u8),
    /// `OFPIT_APPLY_ACTIONS`.
    ApplyActions(Vec<Action>),
    /// Any other instruction: its type and the bytes after the 4-byte header.
    Other {
        type_: InstructionType,
        body: Vec<u8>,
    },
}

impl Instruction {
    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), WireError> {
        let start = w.pos();
        match self {
            Instruction::GotoTable(t) => {
                w.u16(InstructionType::GOTO_TABLE.0);
                w.u16(8);
                w.u8(*t);
                w.zeros(3);
            }
            Instruction::ApplyActions(actions) => {
                w.u16(InstructionType::APPLY_ACTIONS.0);
                let mark = w.reserve_len_from(start);
                w.zeros(4);
                encode_actions(actions, w)?;
                w.patch_len(mark)?;
            }
            Instruction::Other { type_, body } => {
                w.u16(type_.0);
                let mark = w.reserve_len_from(start);
                w.bytes(body);
                w.patch_len(mark)?;
            }
        }
        Ok(())
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<Instruction, WireError> {
        let type_ = InstructionType(r.u16("instruction type")?);
        let len = usize::from(r.u16("instruction length")?);
        if len < 8 || len % 8 != 0 {
            return Err(WireError::BadLength {
                what: "instruction",
                len,
            });
        }
        let mut b = r.sub(len - 4, "instruction body")?;
        match type_ {
            InstructionType::GOTO_TABLE => {
                if len != 8 {
                    return Err(WireError::BadLength {
                        what: "goto_table instruction",
                        len,
                    });
                }
                Ok(Instruction::GotoTable(b.u8("goto table id")?))
            }
            InstructionType::APPLY_ACTIONS => {
                b.skip(4, "apply_actions padding")?;
                Ok(Instruction::ApplyActions(decode_actions(&mut b)?))
            }
            _ => Ok(Instruction::Other {
                type_,
                body: b.rest().to_vec(),
            }),
        }
    }
}

pub fn encode_instructions(ins: &[Instruction], w: &mut Writer<'_>) -> Result<(), WireError> {
    ins.iter().try_for_each(|i| i.encode(w))
}

pub fn decode_instructions(r: &mut Reader<'_>) -> Result<Vec<Instruction>, WireError> {
    let mut v = Vec::new();
    while !r.is_empty() {
        v.push(Instruction::decode(r)?);
    }
    Ok(v)
}
