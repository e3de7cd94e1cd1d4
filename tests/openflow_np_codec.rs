//! The NetworkPolicy actions and match fields without a switch: exact bytes for each
//! (layouts from OVS `lib/ofp-actions.c` and `lib/meta-flow.xml`; the same bytes, inside
//! the `flow_mod_np_*` vectors, are read back by `ovs-ofctl ofp-print` in
//! `openflow_print`), decode gives the value back, re-encoding gives the bytes back, every
//! strict prefix is rejected, encoding appends after a prefilled buffer without touching
//! it, and values we do not model round-trip raw.

#[path = "openflow/cases.rs"]
mod cases;

use tether::openflow::WireError;
use tether::openflow::action::{Action, ControllerProp, Ct, CtZone, decode_actions};
use tether::openflow::codec::{Reader, Writer};
use tether::openflow::consts::{ActionType, ControllerPropType, OxmClass, PacketInReason};
use tether::openflow::oxm::{Be128, Match, MatchField};

const PREFILL: usize = 5;

/// Encode after a prefilled buffer; the prefill must be untouched.
fn bytes_of(encode: impl FnOnce(&mut Writer<'_>) -> Result<(), WireError>) -> Vec<u8> {
    let mut buf = vec![0xa5u8; PREFILL];
    encode(&mut Writer::new(&mut buf)).expect("encodes");
    assert!(buf[..PREFILL].iter().all(|&b| b == 0xa5), "prefill touched");
    buf.split_off(PREFILL)
}

/// `a` encodes to exactly `want`, decodes back to `a`, and no strict prefix decodes.
fn action_exact(a: &Action, want: &str) {
    let b = bytes_of(|w| a.encode(w));
    assert_eq!(cases::hex(&b), want, "{a:?}");
    let mut r = Reader::new(&b);
    assert_eq!(Action::decode(&mut r).expect("decodes"), *a);
    assert!(r.is_empty());
    for n in 0..b.len() {
        assert!(
            Action::decode(&mut Reader::new(&b[..n])).is_err(),
            "{a:?}: prefix {n} decoded"
        );
    }
}

/// `f` encodes to exactly `want`, decodes back to `f`, and no strict prefix decodes.
fn field_exact(f: &MatchField, want: &str) {
    let b = bytes_of(|w| f.encode(w));
    assert_eq!(cases::hex(&b), want, "{f:?}");
    let mut r = Reader::new(&b);
    assert_eq!(MatchField::decode(&mut r).expect("decodes"), *f);
    assert!(r.is_empty());
    for n in 0..b.len() {
        assert!(
            MatchField::decode(&mut Reader::new(&b[..n])).is_err(),
            "{f:?}: prefix {n} decoded"
        );
    }
}

fn roundtrip_raw_action(b: &[u8]) -> Action {
    let a = Action::decode(&mut Reader::new(b)).expect("decodes");
    assert_eq!(bytes_of(|w| a.encode(w)), b, "{a:?}");
    a
}

#[test]
fn conjunction_exact_bytes() {
    // nx_action_conjunction: vendor header, subtype 34, clause (0-based), n_clauses, id.
    action_exact(
        &Action::conjunction(6, 2, 3),
        "ff ff 00 10 00 00 23 20 00 22 01 03 00 00 00 06\n",
    );
    assert_eq!(
        Action::conjunction(0x1234_5678, 1, 2),
        Action::Conjunction {
            id: 0x1234_5678,
            clause: 0,
            n_clauses: 2
        }
    );
}

#[test]
fn ct_exact_bytes() {
    // nx_action_conntrack: flags, zone_src, zone, recirc_table, pad[3], alg, actions.
    action_exact(
        &Action::Ct(Ct::track(65520, 2)),
        "ff ff 00 18 00 00 23 20 00 23 00 00 00 00 00 00\n\
         ff f0 02 00 00 00 00 00\n",
    );
    // commit, zone from NXM_NX_REG1[0..15], table 13, exec(set_field:0x6/0xffffffff->ct_label).
    let ct = Action::Ct(Ct {
        zone: CtZone::Field {
            src: 0x0001_0204,
            ofs_nbits: 15,
        },
        ..match Action::ct_commit(
            0,
            13,
            vec![Action::SetField(MatchField::CtLabel {
                value: Be128::from(6),
                mask: Some(Be128::from(0xffff_ffff)),
            })],
        ) {
            Action::Ct(ct) => ct,
            _ => unreachable!(),
        }
    });
    action_exact(
        &ct,
        "ff ff 00 40 00 00 23 20 00 23 00 01 00 01 02 04\n\
         00 0f 0d 00 00 00 00 00 00 19 00 28 00 01 d9 20\n\
         00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 06\n\
         00 00 00 00 00 00 00 00 00 00 00 00 ff ff ff ff\n",
    );
    // ct without table: NX_CT_RECIRC_NONE; alg ftp; force.
    action_exact(
        &Action::Ct(Ct {
            flags: 3,
            alg: 21,
            ..Ct::track(1, 0xff)
        }),
        "ff ff 00 18 00 00 23 20 00 23 00 03 00 00 00 00\n\
         00 01 ff 00 00 00 00 15\n",
    );
}

#[test]
fn ct_with_a_raw_nested_action_round_trips() {
    // ct(commit,nat(src)) as OVS would send it: the NXAST_NAT (36) stays raw inside.
    let mut b = vec![
        0xff, 0xff, 0, 0x28, 0, 0, 0x23, 0x20, 0, 0x23, 0, 1, 0, 0, 0, 0, 0xff, 0xf0, 0xff, 0, 0,
        0, 0, 0,
    ];
    b.extend([
        0xff, 0xff, 0, 0x10, 0, 0, 0x23, 0x20, 0, 0x24, 0, 0, 0, 1, 0, 0,
    ]);
    let Action::Ct(ct) = roundtrip_raw_action(&b) else {
        panic!("not ct")
    };
    assert_eq!(
        ct.actions,
        vec![Action::Other {
            type_: ActionType::EXPERIMENTER,
            body: vec![0, 0, 0x23, 0x20, 0, 0x24, 0, 0, 0, 1, 0, 0],
        }]
    );
}

#[test]
fn controller_exact_bytes() {
    // nx_action_controller2: 6 zero bytes, then NXAC2PT_* ofpprops padded to 8.
    action_exact(
        &Action::controller(&[1, 3], true),
        "ff ff 00 20 00 00 23 20 00 25 00 00 00 00 00 00\n\
         00 03 00 06 01 03 00 00 00 04 00 04 00 00 00 00\n",
    );
    // 16-bit properties carry two zero bytes after the value (OVS `ofpprop_put_u16`).
    action_exact(
        &Action::Controller2(vec![
            ControllerProp::MaxLen(128),
            ControllerProp::ControllerId(3),
            ControllerProp::Reason(PacketInReason::NO_MATCH),
            ControllerProp::MeterId(2),
        ]),
        "ff ff 00 30 00 00 23 20 00 25 00 00 00 00 00 00\n\
         00 00 00 08 00 80 00 00 00 01 00 08 00 03 00 00\n\
         00 02 00 05 00 00 00 00 00 05 00 08 00 00 00 02\n",
    );
    // OFPAT_OUTPUT to CONTROLLER with max_len.
    action_exact(
        &Action::to_controller(128),
        "00 00 00 10 ff ff ff fd 00 80 00 00 00 00 00 00\n",
    );
}

#[test]
fn unknown_controller_properties_round_trip() {
    // An unknown property (9) and a 2-byte max_len (OVS accepts it; we write 4 bytes).
    let b = [
        0xff, 0xff, 0, 0x20, 0, 0, 0x23, 0x20, 0, 0x25, 0, 0, 0, 0, 0, 0, //
        0, 9, 0, 5, 0xab, 0, 0, 0, //
        0, 0, 0, 6, 0, 0x80, 0, 0,
    ];
    assert_eq!(
        roundtrip_raw_action(&b),
        Action::Controller2(vec![
            ControllerProp::Other {
                type_: ControllerPropType(9),
                value: vec![0xab],
            },
            ControllerProp::Other {
                type_: ControllerPropType::MAX_LEN,
                value: vec![0, 0x80],
            },
        ])
    );
}

#[test]
fn nicira_actions_with_a_wrong_length_are_errors() {
    // A conjunction of 24 bytes, a ct of 16, a controller2 of 8: not OVS's layouts.
    for (sub, len) in [(0x22u8, 24u8), (0x23, 16), (0x25, 8)] {
        let mut b = vec![0xff, 0xff, 0, len, 0, 0, 0x23, 0x20, 0, sub];
        b.resize(usize::from(len).max(b.len()), 0);
        assert!(
            Action::decode(&mut Reader::new(&b)).is_err(),
            "subtype {sub} len {len}"
        );
        // As part of a list too (the list decoder is what flow mods use).
        assert!(decode_actions(&mut Reader::new(&b)).is_err());
    }
    // A property whose length runs past the action.
    let b = [
        0xff, 0xff, 0, 0x18, 0, 0, 0x23, 0x20, 0, 0x25, 0, 0, 0, 0, 0, 0, //
        0, 3, 0, 0x20, 1, 2, 3, 4,
    ];
    assert!(Action::decode(&mut Reader::new(&b)).is_err());
}

#[test]
fn conntrack_and_conjunction_fields_exact_bytes() {
    // NXM_1 (class 0x0001) fields 37, 106, 107, 108 (OVS lib/meta-flow.xml).
    field_exact(&MatchField::ConjId(6), "00 01 4a 04 00 00 00 06\n");
    field_exact(&MatchField::CtZone(65520), "00 01 d4 02 ff f0\n");
    field_exact(
        &MatchField::CtMark {
            value: 1,
            mask: None,
        },
        "00 01 d6 04 00 00 00 01\n",
    );
    field_exact(
        &MatchField::CtMark {
            value: 1,
            mask: Some(3),
        },
        "00 01 d7 08 00 00 00 01 00 00 00 03\n",
    );
    field_exact(
        &MatchField::CtLabel {
            value: Be128::from(0x0102),
            mask: None,
        },
        "00 01 d8 10 00 00 00 00 00 00 00 00 00 00 00 00\n\
         00 00 01 02\n",
    );
    field_exact(
        &MatchField::CtLabel {
            value: Be128::from(6 << 32),
            mask: Some(Be128::from(0xffff_ffff << 32)),
        },
        "00 01 d9 20 00 00 00 00 00 00 00 00 00 00 00 06\n\
         00 00 00 00 00 00 00 00 00 00 00 00 ff ff ff ff\n\
         00 00 00 00\n",
    );
}

#[test]
fn port_range_and_icmp_code_fields_exact_bytes() {
    // OPENFLOW_BASIC fields 13..18 with hasmask, 20 and 30 (OF1.5 §7.2.3.7).
    field_exact(
        &MatchField::TcpSrcMasked(0x400, 0xfc00),
        "80 00 1b 04 04 00 fc 00\n",
    );
    field_exact(
        &MatchField::TcpDstMasked(0x1000, 0xf000),
        "80 00 1d 04 10 00 f0 00\n",
    );
    field_exact(
        &MatchField::UdpSrcMasked(0x8000, 0x8000),
        "80 00 1f 04 80 00 80 00\n",
    );
    field_exact(
        &MatchField::UdpDstMasked(0x50, 0xfff0),
        "80 00 21 04 00 50 ff f0\n",
    );
    field_exact(&MatchField::SctpSrc(5000, None), "80 00 22 02 13 88\n");
    field_exact(
        &MatchField::SctpDst(0x400, Some(0xfc00)),
        "80 00 25 04 04 00 fc 00\n",
    );
    field_exact(&MatchField::Icmpv4Code(10), "80 00 28 01 0a\n");
    field_exact(&MatchField::Icmpv6Code(4), "80 00 3c 01 04\n");
    // The exact forms are unchanged.
    field_exact(&MatchField::TcpDst(443), "80 00 1c 02 01 bb\n");
}

#[test]
fn masked_fields_canonicalise() {
    let m = Match::new(vec![
        MatchField::TcpDstMasked(0x1234, 0xffff),
        MatchField::UdpSrcMasked(0x1234, 0xff00),
        MatchField::SctpDst(80, Some(0xffff)),
        MatchField::CtLabel {
            value: Be128::from(u128::MAX),
            mask: Some(Be128::from(0xff)),
        },
        MatchField::CtLabel {
            value: Be128::from(5),
            mask: Some(Be128::from(u128::MAX)),
        },
        MatchField::CtMark {
            value: 0xff,
            mask: Some(0xf),
        },
    ]);
    assert_eq!(
        m.fields(),
        &[
            MatchField::TcpDst(0x1234),
            MatchField::UdpSrcMasked(0x1200, 0xff00),
            MatchField::SctpDst(80, None),
            MatchField::CtMark {
                value: 0xf,
                mask: Some(0xf)
            },
            MatchField::CtLabel {
                value: Be128::from(5),
                mask: None
            },
            MatchField::CtLabel {
                value: Be128::from(0xff),
                mask: Some(Be128::from(0xff))
            },
        ]
    );
}

#[test]
fn unmodelled_masks_and_a_full_port_mask_round_trip() {
    // ct_zone and conj_id are not maskable in OVS: with hasmask they stay raw.
    for b in [
        &[0x00u8, 0x01, 0xd5, 0x04, 0xff, 0xf0, 0xff, 0xff][..],
        &[0x00, 0x01, 0x4b, 0x08, 0, 0, 0, 6, 0xff, 0xff, 0xff, 0xff][..],
    ] {
        let f = MatchField::decode(&mut Reader::new(b)).unwrap();
        assert!(
            matches!(
                f,
                MatchField::Other {
                    class: OxmClass::NXM_1,
                    hasmask: true,
                    ..
                }
            ),
            "{f:?}"
        );
        assert_eq!(bytes_of(|w| f.encode(w)), b);
    }
    // A masked port with an all-ones mask decodes masked, so its bytes come back.
    let b = [0x80, 0x00, 0x1d, 0x04, 0x01, 0xbb, 0xff, 0xff];
    let f = MatchField::decode(&mut Reader::new(&b)).unwrap();
    assert_eq!(f, MatchField::TcpDstMasked(443, 0xffff));
    assert_eq!(bytes_of(|w| f.encode(w)), b);
    // A wrong width is an error, as for the older fields.
    assert!(MatchField::decode(&mut Reader::new(&[0x00, 0x01, 0xd4, 0x04, 0, 0, 0, 1])).is_err());
}

#[test]
fn packet_out_exact_bytes() {
    use tether::openflow::packet::PacketOut;
    let po = cases::packet_out();
    let b = bytes_of(|w| po.encode(w));
    // buffer_id, actions_len 16, pad, match {in_port=5} padded to 16, output:3, packet.
    let head = "ff ff ff ff 00 10 00 00 00 01 00 0c 80 00 00 04\n\
                00 00 00 05 00 00 00 00 00 00 00 10 00 00 00 03\n\
                ff ff 00 00 00 00 00 00\n";
    assert_eq!(cases::hex(&b[..40]), head);
    assert_eq!(b[40..], cases::rst_packet()[..]);
    assert_eq!(
        PacketOut::decode(&mut Reader::new(&b)).expect("decodes"),
        po
    );
    // Every prefix short of the packet fails; a shorter packet is a shorter packet.
    for n in 0..b.len() {
        match PacketOut::decode(&mut Reader::new(&b[..n])) {
            Err(_) => assert!(n < 40, "prefix {n} failed inside the packet"),
            Ok(p) => {
                assert!(n >= 40, "prefix {n} decoded");
                assert_eq!(bytes_of(|w| p.encode(w)), b[..n]);
            }
        }
    }
}

#[test]
fn packet_in2_exact_bytes_and_accessors() {
    use tether::openflow::packet::{PacketIn2, PacketInProp};
    let pi = cases::packet_in2();
    let b = bytes_of(|w| pi.encode(w));
    let hex = cases::hex(&b);
    // vendor, subtype 30, then NXPINT_PACKET (len 4 + 54, padded to 64) …
    assert!(hex.starts_with("00 00 23 20 00 00 00 1e 00 00 00 3a 02 00 00 00\n"));
    // … table_id, cookie (4 zero bytes, then the 64-bit value), reason, metadata, userdata.
    assert_eq!(
        cases::hex(&b[72..]),
        "00 03 00 05 0f 00 00 00 00 04 00 10 00 00 00 00\n\
         00 01 02 00 00 00 00 07 00 05 00 05 01 00 00 00\n\
         00 06 00 14 80 00 00 04 00 00 00 05 00 01 06 04\n\
         00 00 00 06 00 00 00 00 00 07 00 06 01 03 00 00\n"
    );
    let back = PacketIn2::decode(&mut Reader::new(&b))
        .expect("decodes")
        .expect("is a packet-in2");
    assert_eq!(back, pi);
    assert_eq!(back.userdata(), Some(&[1u8, 3][..]));
    assert_eq!(back.table_id(), Some(15));
    assert_eq!(back.reg(3), 6);
    assert_eq!(back.reg(0), 0);
    assert_eq!(back.packet(), Some(&cases::rst_packet()[..]));
    // A prefix fails, or (ending on a property boundary) is fewer properties.
    for n in 0..b.len() {
        if let Ok(p) = PacketIn2::decode(&mut Reader::new(&b[..n])) {
            let p = p.expect("still a packet-in2");
            assert_eq!(bytes_of(|w| p.encode(w)), b[..n], "prefix {n}");
        }
    }
    // OVS writes registers as OF1.5 xreg pairs: reg2:reg3 in one OXM_OF_PKT_REG1.
    let merged = PacketIn2 {
        props: vec![PacketInProp::Metadata(vec![MatchField::Other {
            class: OxmClass::PACKET_REGS,
            field: 1,
            hasmask: false,
            payload: vec![0, 0, 0, 0x0f, 0, 0, 0, 6],
        }])],
    };
    assert_eq!((merged.reg(2), merged.reg(3)), (0x0f, 6));
    // Another experimenter message is not a packet-in.
    let other = [0, 0, 0x23, 0x20, 0, 0, 0, 0x10, 0, 0, 0, 2];
    assert_eq!(PacketIn2::decode(&mut Reader::new(&other)), Ok(None));
}

#[test]
fn zero_conntrack_values_print_as_ovs_does() {
    use tether::openflow::action::Instruction;
    use tether::openflow::ofctl::{format_instructions, format_match};
    // `ovs-ofctl -O OpenFlow15 parse-flow "ip,ct_mark=0/0xf,ct_label=0/0xf,
    // actions=ct(commit,exec(set_field:0/0xf->ct_mark))"` (OVS 3.1) prints
    // `ct_mark=0/0xf,ct_label=0/0xf,ip` and the actions as given: C's `%#x` and
    // `ds_put_hex` write zero as `0`.
    let fields = vec![
        MatchField::EthType(0x0800),
        MatchField::CtMark {
            value: 0,
            mask: Some(0xf),
        },
        MatchField::CtLabel {
            value: Be128::from(0),
            mask: Some(Be128::from(0xf)),
        },
    ];
    assert_eq!(
        format_match(&fields, 0x8000),
        "ct_mark=0/0xf,ct_label=0/0xf,ip"
    );
    let ins = [Instruction::ApplyActions(vec![Action::Ct(Ct {
        flags: 1,
        actions: vec![Action::SetField(MatchField::CtMark {
            value: 0,
            mask: Some(0xf),
        })],
        ..Ct::track(0, 0xff)
    })])];
    assert_eq!(
        format_instructions(&ins),
        "ct(commit,exec(set_field:0/0xf->ct_mark))"
    );
}
