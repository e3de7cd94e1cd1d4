//! `tether flows` prints flows as ovs-ofctl does (`src/openflow/ofctl.rs`). The expected
//! text here is not ours: it is what `ovs-ofctl ofp-print` printed for the stored message
//! bytes of `tests/openflow/` (kept next to them in `<case>.txt`, and re-checked against
//! the installed ovs-ofctl by `openflow_print`). A live comparison with `ovs-ofctl
//! dump-flows` on a real bridge is in `tests/flows_cmd.rs`.

#[path = "openflow/cases.rs"]
mod cases;

use tether::openflow::flowmod::{FlowDesc, MultipartReplyBody};
use tether::openflow::msg::{Body, Msg};
use tether::openflow::ofctl::{format_flow, format_instructions, format_match};

fn stored(name: &str) -> (Vec<u8>, String) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/openflow/");
    let read = |ext: &str| {
        std::fs::read_to_string(format!("{dir}{name}.{ext}"))
            .unwrap_or_else(|e| panic!("{name}.{ext}: {e}"))
    };
    let bytes = read("hex")
        .split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).unwrap_or_else(|e| panic!("{name}.hex: {e}")))
        .collect();
    let txt = read("txt");
    (bytes, txt)
}

/// Every flow of a stored FLOW_DESC reply, with its counters, exactly as ovs-ofctl printed
/// it (including OVS's `?` for an absent counter and its odd form of an absent duration).
#[test]
fn flow_descriptions_print_as_ovs_ofctl_does() {
    let (bytes, txt) = stored("flow_desc_reply");
    let msg = Msg::decode(&bytes).unwrap();
    let Body::MultipartReply(mp) = msg.body else {
        panic!("not a multipart reply")
    };
    let MultipartReplyBody::FlowDesc(flows) = mp.body else {
        panic!("not a flow description")
    };
    let got: Vec<String> = flows.iter().map(|d| format_flow(d, true)).collect();
    let want: Vec<&str> = txt.lines().skip(1).collect();
    assert_eq!(got, want);
}

/// The match and actions of every stored flow mod, as ovs-ofctl printed them.
#[test]
fn flow_mod_matches_and_actions_print_as_ovs_ofctl_does() {
    for name in [
        "flow_mod_add",
        "flow_mod_add_v6",
        "bundle_add",
        "flow_mod_np_ct",
        "flow_mod_np_conj",
        "flow_mod_np_icmp6",
        "flow_mod_np_icmp",
    ] {
        let (bytes, txt) = stored(name);
        let msg = Msg::decode(&bytes).unwrap();
        let fm = match msg.body {
            Body::FlowMod(fm) => fm,
            Body::BundleAdd(b) => match b.msg.body {
                Body::FlowMod(fm) => fm,
                other => panic!("{name}: {other:?}"),
            },
            other => panic!("{name}: {other:?}"),
        };
        let line = txt.lines().find(|l| l.contains(" table:")).unwrap();
        // `… table:<n> <match> cookie:… actions=<actions>`
        let after_table = line.split(" table:").nth(1).unwrap();
        let want_match = after_table
            .split_once(' ')
            .unwrap()
            .1
            .split(" cookie:")
            .next()
            .unwrap();
        let want_actions = line.split("actions=").nth(1).unwrap();
        assert_eq!(
            format_match(fm.match_.fields(), fm.priority),
            want_match,
            "{name}"
        );
        assert_eq!(
            format_instructions(&fm.instructions),
            want_actions,
            "{name}"
        );
    }
}

/// With `--no-stats`, table 0 and cookie 0 are left out, as ovs-ofctl leaves them.
#[test]
fn without_stats_the_defaults_are_left_out() {
    let d = FlowDesc::default();
    assert_eq!(format_flow(&d, false), "priority=0 actions=drop");
    let d = FlowDesc {
        priority: 0x8000,
        ..d
    };
    assert_eq!(format_flow(&d, false), "actions=drop");
}
