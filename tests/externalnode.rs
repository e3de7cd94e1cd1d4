//! ExternalNode end to end against a real userspace Open vSwitch
//! (docs/design.md#tier-3-end-to-end), driving [`EnController`] the way the daemon does.
//!
//! Topology: the sandbox namespace is the VM — ovs-vswitchd runs there and so does the
//! controller — with `eth1` (02:00:00:00:01:10, MTU 1450, 192.0.2.10/24, 2001:db8:1::10/64,
//! default routes via the peer) and `eth2` (198.51.100.10/24), veths to a `peer` namespace.
//! IPv6 DAD is off in both; the peer's veth ends send with tx checksum offload off (TCP
//! through the netdev datapath; docs/datapath.md#8-test-harness).
//!
//! The controller runs in an *agent* process inside the VM namespace (netlink acts on the
//! caller's namespace; entering one needs `setns`, i.e. unsafe): this test binary re-run
//! with `TETHER_EN_AGENT=<sandbox dir>` executes `agent_process`, which builds the real
//! backends (OVSDB client, `OfFlows`, `Rtnl`, the vswitchd control socket) and obeys one
//! command per stdin line (`recover`, `en <ifname|-> <ip,…>`, `absent`, `sync`, `replay`,
//! `gc`, `status`), answering `AGENT ok …` / `AGENT err …`. Each agent start is a daemon
//! start: a new cookie round, flows of the previous round deleted by `gc` after the first
//! sync (docs/design.md#rounds-and-flow-replacement-at-restart). `TETHER_CRASH_AT` makes an
//! agent abort at a step — a `kill -9` there.
//!
//! Some tests still keep the uplink away from the kernel stack with the harness's own
//! sysctls after a takeover (`neutralise_uplink`); tether does that itself now on the
//! netdev datapath (docs/datapath.md#12-netdev-an-af_packet-socket-and-nothing-is-stolen),
//! and `sidedoor.rs` shows it without them.
//!
//! `agent_process` stays here, at the crate root: the parent re-runs this binary with
//! `--exact agent_process`. The agent itself is in `externalnode/agent.rs`, the tests by
//! behaviour in the other `externalnode/` files.

#![allow(clippy::unwrap_used)]

#[path = "externalnode/agent.rs"]
mod agent;
mod common;
mod externalnode_vm;
#[path = "externalnode/faulty.rs"]
mod faulty;
#[path = "externalnode/recovery.rs"]
mod recovery;
#[path = "externalnode/routes.rs"]
mod routes;
#[path = "externalnode/sidedoor.rs"]
mod sidedoor;
#[path = "externalnode/takeover.rs"]
mod takeover;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use agent::{Agent, Cmd, agent_main, parse_cmd};
use common::{Sandbox, privileged, wait_for};
use externalnode_vm::*;
use tether::controller::LiveBridge;
use tether::controller::externalnode::{CRASH_ENV, EnConfig, EnController, PolicyBypassRule};
use tether::k8s::{ExternalNode, ExternalNodeSpec, NetworkInterface, ObjectMeta, Stores};
use tether::netlink::Rtnl;
use tether::openflow::{Category, OfFlows, OfFlowsConfig, Owner};
use tether::ovsdb::{BridgeDb, Client, ClientOptions, Remote};

const AGENT_ENV: &str = "TETHER_EN_AGENT";

/// The agent's entry point when this binary runs as one (see the module doc); run
/// directly, it checks the command grammar the parent and the agent share.
#[test]
fn agent_process() {
    if let Ok(dir) = std::env::var(AGENT_ENV) {
        agent_main(&dir);
        return;
    }
    assert_eq!(
        parse_cmd("en - 192.0.2.10,2001:db8:1::10").unwrap(),
        Cmd::En {
            ifname: String::new(),
            ips: vec!["192.0.2.10".into(), "2001:db8:1::10".into()]
        }
    );
    assert_eq!(
        parse_cmd("en eth1 192.0.2.10").unwrap(),
        Cmd::En {
            ifname: "eth1".into(),
            ips: vec!["192.0.2.10".into()]
        }
    );
    assert_eq!(parse_cmd("sync").unwrap(), Cmd::Sync);
    assert_eq!(parse_cmd("gc").unwrap(), Cmd::Gc);
    assert!(parse_cmd("sync now").is_err());
    assert!(parse_cmd("fly").is_err());
    assert!(parse_cmd("en eth1").is_err());
}

/// The name of link `ifindex` in the VM, read with `ip -j`.
fn link_name(vm: &common::Netns, ifindex: u64) -> Option<String> {
    let links = json_of(&vm.ip(&["-j", "link", "show"]));
    links.as_array()?.iter().find_map(|l| {
        (l["ifindex"].as_u64() == Some(ifindex))
            .then(|| l["ifname"].as_str().unwrap_or("").to_string())
    })
}
