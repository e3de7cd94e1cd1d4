//! The OpenFlow codec without a switch: every case of `tests/openflow/cases.rs` round-trips
//! (value → bytes → value, and bytes → value → bytes), every strict prefix of its bytes is
//! rejected, encoding appends to a buffer without touching what was there, and random or
//! mutated bytes never panic a decoder.

#[path = "openflow/cases.rs"]
mod cases;

use tether::openflow::WireError;
use tether::openflow::action::{Action, Instruction, decode_actions};
use tether::openflow::codec::{Reader, Writer};
use tether::openflow::consts::{ErrorType, Version};
use tether::openflow::msg::{Body, ErrorMsg, Msg};
use tether::openflow::oxm::{Match, MatchField};

#[test]
fn every_message_round_trips() {
    for (name, msg) in cases::cases() {
        let bytes = msg.to_bytes().unwrap();
        assert_eq!(
            usize::from(u16::from_be_bytes([bytes[2], bytes[3]])),
            bytes.len(),
            "{name}: header length"
        );
        let back = Msg::decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(back, msg, "{name}");
        assert_eq!(back.to_bytes().unwrap(), bytes, "{name}: re-encoding");
    }
}

#[test]
fn every_truncated_prefix_fails() {
    for (name, msg) in cases::cases() {
        let bytes = msg.to_bytes().unwrap();
        for n in 0..bytes.len() {
            assert!(
                Msg::decode(&bytes[..n]).is_err(),
                "{name}: prefix of {n} bytes decoded"
            );
        }
    }
}

#[test]
fn truncated_bodies_with_a_consistent_header_fail_or_reencode_exactly() {
    // A prefix whose header length is patched to match passes framing, so the body
    // decoders themselves must notice. Variable-length bodies (echo data, error data)
    // legitimately accept shorter bodies; then the result must re-encode to the same bytes.
    let mut rejected = 0;
    for (name, msg) in cases::cases() {
        let bytes = msg.to_bytes().unwrap();
        for n in 8..bytes.len() {
            let mut b = bytes[..n].to_vec();
            b[2..4].copy_from_slice(&u16::try_from(n).unwrap().to_be_bytes());
            match Msg::decode(&b) {
                Err(_) => rejected += 1,
                Ok(m) => assert_eq!(m.to_bytes().unwrap(), b, "{name}: {n}-byte body"),
            }
        }
    }
    assert!(rejected > 1000, "only {rejected} truncated bodies rejected");
}

#[test]
fn fixed_structures_reject_every_prefix() {
    let flow = cases::tcp_flow();
    let mut buf = Vec::new();
    flow.key.match_.encode(&mut Writer::new(&mut buf)).unwrap();
    for n in 0..buf.len() {
        assert!(
            Match::decode(&mut Reader::new(&buf[..n])).is_err(),
            "match prefix {n}"
        );
    }
    let mut actions = Vec::new();
    for a in [
        Action::output(3),
        Action::output_reg(1),
        Action::resubmit(4),
        Action::load_reg(4, 0x800000, 0xc00000),
    ] {
        let mut one = Vec::new();
        a.encode(&mut Writer::new(&mut one)).unwrap();
        for n in 1..one.len() {
            assert!(
                decode_actions(&mut Reader::new(&one[..n])).is_err(),
                "{a:?}: prefix {n}"
            );
        }
        actions.push(a);
    }
    let ins = Instruction::ApplyActions(actions.clone());
    let mut one = Vec::new();
    ins.encode(&mut Writer::new(&mut one)).unwrap();
    assert_eq!(
        Instruction::decode(&mut Reader::new(&one)).unwrap(),
        Instruction::ApplyActions(actions)
    );
    for n in 0..one.len() {
        assert!(Instruction::decode(&mut Reader::new(&one[..n])).is_err());
    }
}

#[test]
fn encoding_appends_and_leaves_prefilled_bytes_alone() {
    for (name, msg) in cases::cases() {
        let mut buf = vec![0xa5u8; 13];
        msg.encode(&mut buf).unwrap();
        assert!(buf[..13].iter().all(|&b| b == 0xa5), "{name}");
        assert_eq!(buf[13..], msg.to_bytes().unwrap()[..], "{name}");
    }
}

#[test]
fn exact_bytes_of_antrea_wire_details() {
    // docs/antrea-compat.md#wire-encoding-of-fields-and-actions: reg4 masked load,
    // NXAST_OUTPUT_REG of reg1, goto.
    let mut b = Vec::new();
    let mut w = Writer::new(&mut b);
    Action::load_reg(4, 0x800000, 0xc00000)
        .encode(&mut w)
        .unwrap();
    Action::output_reg(1).encode(&mut w).unwrap();
    Instruction::GotoTable(3).encode(&mut w).unwrap();
    assert_eq!(
        cases::hex(&b),
        "00 19 00 10 00 01 09 08 00 80 00 00 00 c0 00 00\n\
         ff ff 00 18 00 00 23 20 00 0f 00 1f 00 01 02 04\n\
         ff ff 00 00 00 00 00 00 00 01 00 08 03 00 00 00\n"
    );
}

#[test]
fn canonical_match_masks_values_and_sorts() {
    let a = Match::new(vec![
        MatchField::Reg {
            idx: 0,
            value: 0xffff_ffff,
            mask: Some(0xf),
        },
        MatchField::EthType(0x800),
        MatchField::InPort(1),
        MatchField::Reg {
            idx: 1,
            value: 7,
            mask: Some(u32::MAX),
        },
    ]);
    assert_eq!(
        a.fields(),
        &[
            MatchField::InPort(1),
            MatchField::EthType(0x800),
            MatchField::Reg {
                idx: 0,
                value: 0xf,
                mask: Some(0xf)
            },
            MatchField::Reg {
                idx: 1,
                value: 7,
                mask: None
            },
        ]
    );
}

#[test]
fn unknown_values_round_trip() {
    let unknown = Msg::new(
        Version::OF15,
        5,
        Body::Other {
            type_: 10, // PACKET_IN: not modelled, kept raw
            body: vec![1, 2, 3, 4, 5, 6, 7, 8],
        },
    );
    let bytes = unknown.to_bytes().unwrap();
    assert_eq!(Msg::decode(&bytes).unwrap(), unknown);
    let err = Msg::new(
        Version::OF15,
        6,
        Body::Error(ErrorMsg {
            type_: ErrorType(0x77),
            code: 3,
            experimenter: None,
            data: vec![],
        }),
    );
    let back = Msg::decode(&err.to_bytes().unwrap()).unwrap();
    assert_eq!(back, err);
    let Body::Error(e) = back.body else { panic!() };
    assert_eq!(e.name(), "ErrorType(0x77) code 3");
}

#[test]
fn framing_rejects_garbage_headers() {
    assert_eq!(
        Msg::frame_len(b"GARBAGE!"),
        Err(WireError::WrongVersion {
            what: "message header",
            version: b'G'
        })
    );
    assert_eq!(
        Msg::frame_len(&[6, 0, 0, 4, 0, 0, 0, 1]),
        Err(WireError::BadLength {
            what: "message header",
            len: 4
        })
    );
    assert_eq!(Msg::frame_len(&[6, 0, 0xff, 0xff, 0, 0, 0, 1]), Ok(65535));
}

/// xorshift64*: deterministic, no crates.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        let n = u64::try_from(n).expect("usize fits u64");
        usize::try_from(self.next() % n).expect("below a usize")
    }

    fn byte(&mut self) -> u8 {
        self.next().to_le_bytes()[0]
    }
}

#[test]
fn random_and_mutated_bytes_never_panic() {
    let mut rng = Rng(0x7e7e_4e12_0001_beef);
    let vectors: Vec<Vec<u8>> = cases::cases()
        .iter()
        .map(|(_, m)| m.to_bytes().unwrap())
        .collect();
    let mut decoded = 0;
    for i in 0..60_000 {
        let bytes = if i % 3 == 0 {
            // Pure noise with a plausible header (so the body decoders get exercised).
            let len = 8 + rng.below(300);
            let mut b: Vec<u8> = (0..len).map(|_| rng.byte()).collect();
            b[0] = if rng.below(2) == 0 { 6 } else { 1 };
            b[1] = u8::try_from(rng.below(36)).unwrap();
            b[2..4].copy_from_slice(&u16::try_from(len).unwrap().to_be_bytes());
            b
        } else {
            // A valid message with a few bytes changed.
            let mut b = vectors[rng.below(vectors.len())].clone();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(b.len());
                b[at] = rng.byte();
            }
            b
        };
        if let Ok(m) = Msg::decode(&bytes) {
            decoded += 1;
            // Whatever decodes must encode without panicking too.
            let _ = m.to_bytes();
        }
        let mut head = [0u8; 8];
        head.copy_from_slice(&bytes[..8]);
        let _ = Msg::frame_len(&head);
    }
    assert!(
        decoded > 100,
        "mutations too destructive: {decoded} decoded"
    );
}

#[test]
fn ovs_merged_packet_registers_split_back_into_nicira_registers() {
    // What OVS 3.1 sends in a flow-desc reply for `reg0=0x200006/0x60000f,reg1=0x32`:
    // one OXM_OF_PKT_REG0 (class 0x8001) carrying both halves.
    let merged = MatchField::Other {
        class: tether::openflow::consts::OxmClass::PACKET_REGS,
        field: 0,
        hasmask: true,
        payload: vec![
            0, 0x20, 0, 6, 0, 0, 0, 0x32, 0, 0x60, 0, 0x0f, 0xff, 0xff, 0xff, 0xff,
        ],
    };
    assert_eq!(
        Match::new(vec![merged]).fields(),
        &[
            MatchField::Reg {
                idx: 0,
                value: 0x200006,
                mask: Some(0x60000f)
            },
            MatchField::Reg {
                idx: 1,
                value: 0x32,
                mask: None
            },
        ]
    );
}
