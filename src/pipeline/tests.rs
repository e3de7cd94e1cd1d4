use super::*;
use crate::openflow::Instruction;

#[test]
fn every_table_has_one_miss_flow_and_output_misses_to_normal() {
    let flows = base_flows();
    for t in TABLES {
        let misses: Vec<&Flow> = flows
            .iter()
            .filter(|f| f.key.table == t.id && f.key.priority == priority::MISS)
            .collect();
        assert_eq!(misses.len(), 1, "{}", t.name);
        let want = match t.miss_goto {
            Some(n) => vec![Instruction::GotoTable(n)],
            None => vec![Instruction::ApplyActions(vec![Action::output(
                port::NORMAL,
            )])],
        };
        assert_eq!(*misses[0].value.instructions, want, "{}", t.name);
    }
    // Sparse ids, tens apart, in pipeline order; every miss goes to the next table.
    let ids: Vec<u8> = TABLES.iter().map(|t| t.id).collect();
    assert_eq!(
        ids,
        [
            0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140
        ]
    );
    for w in TABLES.windows(2) {
        assert_eq!(w[0].miss_goto, Some(w[1].id), "{}", w[0].name);
    }
    assert_eq!(flows.len(), TABLES.len() + 4);
}

#[test]
fn returned_packets_skip_marks() {
    let f = base_flows();
    let ret = f
        .iter()
        .find(|f| f.key.table == table::TRAFFIC_CONTROL && f.key.priority == priority::HIGH)
        .unwrap();
    // reg0=0x200006/0x60000f (docs/antrea-compat.md#trafficcontrol-flows, common flow 3).
    assert_eq!(
        ret.key.match_.fields(),
        &[MatchField::Reg {
            idx: 0,
            value: 0x20_0006,
            mask: Some(0x60_000f)
        }]
    );
    assert_eq!(
        *ret.value.instructions,
        vec![Instruction::GotoTable(table::OUTPUT)]
    );
}

#[test]
fn mark_flows_per_direction() {
    let both = tc_mark_flows(&[3, 7], 9, TcDirection::Both, TcAction::Redirect);
    assert_eq!(both.len(), 4);
    let ingress = tc_mark_flows(&[3], 9, TcDirection::Ingress, TcAction::Mirror);
    assert_eq!(
        ingress[0].key.match_.fields(),
        &[MatchField::Reg {
            idx: 1,
            value: 3,
            mask: None
        }]
    );
    assert_eq!(
        *ingress[0].value.instructions,
        vec![
            Instruction::ApplyActions(vec![
                Action::load_reg(9, 9, u32::MAX),
                Action::load_reg(4, 0x40_0000, 0xc0_0000),
            ]),
            Instruction::GotoTable(table::INGRESS_SECURITY),
        ]
    );
    let egress = tc_mark_flows(&[3], 9, TcDirection::Egress, TcAction::Redirect);
    assert_eq!(egress[0].key.match_.fields(), &[MatchField::InPort(3)]);
    assert_eq!(
        egress[0].value.instructions[0],
        Instruction::ApplyActions(vec![
            Action::load_reg(9, 9, u32::MAX),
            Action::load_reg(4, 0x80_0000, 0xc0_0000),
        ])
    );
    assert!(tc_mark_flows(&[], 9, TcDirection::Both, TcAction::Mirror).is_empty());
}

#[test]
fn macs_parse_strictly() {
    assert_eq!(
        crate::mac::parse("02:00:00:00:01:0a"),
        Some([2, 0, 0, 0, 1, 10])
    );
    for bad in [
        "02:00:00:00:01",
        "02:00:00:00:01:0a:00",
        "2:00:00:00:01:0a",
        "zz:00:00:00:01:0a",
        "",
    ] {
        assert_eq!(crate::mac::parse(bad), None, "{bad}");
    }
}
