//! Every message we encode, read back by Open vSwitch's own decoder: the bytes must equal
//! the stored vector (`tests/openflow/<case>.hex`) and `ovs-ofctl ofp-print` of them must
//! print exactly the stored text (`<case>.txt`), so a wrong byte fails twice — once
//! against our vector and once in OVS's reading. `TETHER_BLESS=1` rewrites both files
//! (review the diff: the `.txt` files are the proof).

#[path = "openflow/cases.rs"]
mod cases;
// The shared harness re-exports more than this file uses.
#[allow(unused_imports)]
mod common;

use std::path::PathBuf;
use std::process::Command;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/openflow")
}

fn ofp_print(hex: &str) -> String {
    common::run(Command::new("ovs-ofctl").args(["ofp-print", hex.trim()]))
}

#[test]
fn ofp_print_reads_every_message_as_stored() {
    if !common::privileged("ofp_print_reads_every_message_as_stored") {
        return;
    }
    let bless = std::env::var("TETHER_BLESS").as_deref() == Ok("1");
    let mut failures = Vec::new();
    for (name, msg) in cases::cases() {
        let bytes = msg.to_bytes().unwrap();
        let hex = cases::hex(&bytes);
        let printed = ofp_print(&hex);
        let hex_path = dir().join(format!("{name}.hex"));
        let txt_path = dir().join(format!("{name}.txt"));
        if bless {
            std::fs::write(&hex_path, &hex).unwrap();
            std::fs::write(&txt_path, &printed).unwrap();
            continue;
        }
        let want_hex = std::fs::read_to_string(&hex_path)
            .unwrap_or_else(|e| panic!("{}: {e}", hex_path.display()));
        let want_txt = std::fs::read_to_string(&txt_path)
            .unwrap_or_else(|e| panic!("{}: {e}", txt_path.display()));
        if hex != want_hex {
            failures.push(format!("{name}: bytes differ\n got: {hex}want: {want_hex}"));
        }
        if printed != want_txt {
            failures.push(format!(
                "{name}: ovs-ofctl ofp-print differs\n got:\n{printed}want:\n{want_txt}"
            ));
        }
        // A decode error in OVS's text would otherwise be blessed into the stored file.
        assert!(
            !printed.contains("***decode error"),
            "{name}: OVS could not decode our bytes:\n{printed}"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn stored_vectors_decode_to_the_same_messages() {
    // The stored hex is the source of truth: decoding it gives the case's value back.
    // (Runs without privileges: no OVS needed.)
    for (name, msg) in cases::cases() {
        let path = dir().join(format!("{name}.hex"));
        let Ok(hex) = std::fs::read_to_string(&path) else {
            panic!("missing vector {}", path.display());
        };
        let bytes = cases::unhex(&hex);
        let decoded = tether::openflow::msg::Msg::decode(&bytes)
            .unwrap_or_else(|e| panic!("{name}: stored vector does not decode: {e}"));
        assert_eq!(decoded, msg, "{name}");
    }
}
