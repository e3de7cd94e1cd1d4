//! The fuzz targets of tether (docs/reliability.md#fuzzing): one function per decoder that reads bytes
//! from outside the process. Each must return (Ok or Err) for every input — a panic, an
//! overflow or an endless loop is a crash. Both drivers (libFuzzer via cargo-fuzz, and the
//! stable `mutate` loop) call these, so a crash found by either reproduces with the other.
//!
//! Beyond "no panic", targets check cheap properties where the codec promises them: an
//! OpenFlow message that decodes re-encodes without error and decodes to the same value;
//! an OVSDB datum that decodes round-trips through `to_json`.

use serde_json::Value;

use tether::controller::externalnode::Record;
use tether::controlplane::{
    GroupKind, Kind, State, bad_event_identity, decode_group_event, decode_group_event_general,
    decode_policy_event,
};
use tether::k8s::KubeError;
use tether::k8s::manifests::parse_file;
use tether::k8s::watch::{decode_event, decode_list};
use tether::k8s::{ExternalNode, Namespace, Pod, TrafficControl};
use tether::openflow::msg::{HEADER_LEN, Msg};
use tether::ovsdb::Datum;
use tether::ovsdb::framer::Framer;

/// A target: its name and its body.
pub type Target = (&'static str, fn(&[u8]));

/// Every target, by name (the `mutate` driver and scripts/fuzz.sh iterate this).
pub const TARGETS: &[Target] = &[
    ("openflow_msg", openflow_msg),
    ("ovsdb_framer", ovsdb_framer),
    ("ovsdb_datum", ovsdb_datum),
    ("watch_event", watch_event),
    ("manifests", manifests),
    ("step_record", step_record),
    ("cp_policy_event", cp_policy_event),
    ("cp_address_group_event", cp_address_group_event),
    ("cp_applied_to_group_event", cp_applied_to_group_event),
];

/// OpenFlow: the stream reader's header check, then the message decoder on exactly the
/// bytes given (as the connection passes one frame); decoded messages must round-trip.
pub fn openflow_msg(data: &[u8]) {
    if let Some(head) = data.first_chunk::<HEADER_LEN>() {
        let _ = Msg::frame_len(head);
    }
    if let Ok(m) = Msg::decode(data) {
        // A message we accepted must be one we can write back, and read again the same.
        if let Ok(bytes) = m.to_bytes() {
            let again = Msg::decode(&bytes);
            assert_eq!(again.as_ref(), Ok(&m), "re-decode of {bytes:02x?}");
        }
    }
}

/// OVSDB framing: the first byte picks read sizes so messages split at many points; the
/// framer must deliver or refuse, and never hold more than its cap.
pub fn ovsdb_framer(data: &[u8]) {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let step = usize::from(split % 64) + 1;
    let max = 2048;
    let mut f = Framer::new(max);
    for chunk in rest.chunks(step) {
        f.push(chunk);
        loop {
            match f.next_message() {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) => return,
            }
        }
        // Held bytes stay within the cap plus one read.
        assert!(
            f.pending() <= max + step,
            "framer holds {} bytes",
            f.pending()
        );
    }
}

/// OVSDB datum: any JSON value; a datum that decodes must round-trip through `to_json`.
pub fn ovsdb_datum(data: &[u8]) {
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    if let Ok(d) = Datum::from_json(&v) {
        let back = Datum::from_json(&d.to_json());
        assert_eq!(back.as_ref(), Ok(&d), "round trip of {v}");
    }
    // Rows are maps of datums; a row of garbage columns must not panic either.
    if let Value::Object(m) = &v {
        for c in m.values() {
            let _ = Datum::from_json(c);
        }
    }
}

/// Kubernetes watch-stream lines and LIST bodies, for every kind tether watches.
pub fn watch_event(data: &[u8]) {
    let _ = decode_event::<Pod>(data);
    let _ = decode_event::<Namespace>(data);
    let _ = decode_event::<TrafficControl>(data);
    let _ = decode_event::<ExternalNode>(data);
    let _ = decode_list::<TrafficControl>(data);
    let _ = decode_list::<ExternalNode>(data);
}

/// Manifest files: YAML (multi-document, lists) or JSON by the first byte's parity.
pub fn manifests(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let name = if pick & 1 == 0 { "f.yaml" } else { "f.json" };
    if let Ok(p) = parse_file(name, &text) {
        // Every error names the file.
        for e in &p.errors {
            assert!(e.starts_with(name), "{e}");
        }
    }
}

/// The ExternalNode step record read back from `Bridge.external_ids:tether-en-op` at every
/// start (a panic here is a crash loop under systemd): any UTF-8 text must decode or be
/// refused, and a record that decodes must re-encode to one that decodes the same.
pub fn step_record(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = tether::controller::externalnode::Hint::from_json(&text);
    if let Ok(r) = Record::from_json(&text) {
        let again = Record::from_json(&r.to_json());
        assert_eq!(again.as_ref(), Ok(&r), "re-decode of {text}");
    }
}

/// Controlplane `networkpolicies` watch lines: every line of the input, decoded and fed to
/// one [`State`] (so bookmarks, deletes and restarts run too).
pub fn cp_policy_event(data: &[u8]) {
    controlplane_stream(Kind::NetworkPolicy, data);
}

/// Controlplane `addressgroups` watch lines (full groups and `AddressGroupPatch`es).
pub fn cp_address_group_event(data: &[u8]) {
    controlplane_stream(Kind::AddressGroup, data);
}

/// Controlplane `appliedtogroups` watch lines (full groups and `AppliedToGroupPatch`es).
pub fn cp_applied_to_group_event(data: &[u8]) {
    controlplane_stream(Kind::AppliedToGroup, data);
}

/// One watch stream of `kind`: a line that decodes goes to the state, one that does not
/// must be a decode error naming the kind, and goes to the state as undecodable.
fn controlplane_stream(kind: Kind, data: &[u8]) {
    let mut state = State::new();
    state.on_watch_start(kind);
    for line in data.split(|&b| b == b'\n') {
        // The fast path for plain group lines must agree with the general decoder.
        let group = match kind {
            Kind::AddressGroup => Some(GroupKind::Address),
            Kind::AppliedToGroup => Some(GroupKind::AppliedTo),
            Kind::NetworkPolicy => None,
        };
        if let Some(gk) = group {
            if let Ok(ev) = decode_group_event(gk, line) {
                assert_eq!(Ok(ev), decode_group_event_general(gk, line));
            }
        }
        let decoded = match kind {
            Kind::NetworkPolicy => decode_policy_event(line).map(|e| state.on_policy_event(e)),
            Kind::AddressGroup => decode_group_event(GroupKind::Address, line)
                .map(|e| state.on_group_event(GroupKind::Address, e)),
            Kind::AppliedToGroup => decode_group_event(GroupKind::AppliedTo, line)
                .map(|e| state.on_group_event(GroupKind::AppliedTo, e)),
        };
        match decoded {
            Ok(_) => {}
            Err(KubeError::Decode { what, .. }) => {
                assert!(what.starts_with(kind.name()), "{what}");
                let (ty, name) = bad_event_identity(line);
                let _ = state.on_undecodable(kind, ty.as_deref(), name.as_deref());
            }
            Err(other) => panic!("not a decode error: {other:?}"),
        }
    }
    // Whatever the stream did, the views over the state hold.
    for p in state.policies() {
        let _ = state.applies(p);
        let _ = state.missing_groups(p);
    }
}
