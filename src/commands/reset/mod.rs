//! `tether reset`: give the VM back as it was before tether, with the daemon stopped and no
//! API server (an operator uninstalling tether, or rescuing a VM):
//! 1. refuse while a daemon runs: systemd's unit not stopped (a crash-restart gap
//!    included: `unit`), the daemon's OVSDB lock held, or its state socket answering;
//! 2. give every NIC back from what OVSDB records (the ExternalNode controller's own
//!    restore, after finishing or rolling back a step a crash left recorded): name, MAC,
//!    MTU, addresses with their lifetimes, routes, sysctls; a `<nic>~` whose host port or
//!    bridge OVS lost, from the state directory's copy of that configuration — and a reset
//!    that leaves a `<nic>~` fails;
//! 3. then, only if that worked: delete tether's ports, every flow with tether's cookie
//!    shape, tether's keys in `Bridge.external_ids`, and with `--delete-bridge` the bridge
//!    if tether created it and nothing else uses it.
//!
//! What step 3 does is planned as data from the bridge's state ([`plan`], pure); running
//! it again finds nothing to do.

use std::sync::Arc;
use std::time::Duration;

use super::{CmdError, load_config};
use crate::config::Config;
use crate::controller::externalnode::heldfile::HeldFiles;
use crate::controller::externalnode::record::HELD_PREFIX;
use crate::controller::externalnode::{EnConfig, EnController, RECORD_KEY};
use crate::controller::{AbsentBridge, AbsentFlows, Bridge, Flows, LiveBridge, VswitchdDatapath};
use crate::k8s::Stores;
use crate::netlink::{Links, uplink_name};
use crate::openflow::flow::tether_cookie;
use crate::openflow::flowmod::{FlowDesc, FlowMod};
use crate::openflow::{OfFlows, OfFlowsConfig};
use crate::ovsdb::bridgedb::CREATED_KEY;
use crate::ovsdb::{BridgeDb, BridgeView, Client, ClientOptions, Remote, Uuid, read_bridge};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    pub delete_bridge: bool,
}

pub const USAGE: &str = "tether reset [--delete-bridge] [run's --config/--bridge/--ovs-rundir/--state-socket/--state-dir]
  give the VM back as before tether: the ExternalNode NIC restored from what OVSDB records
  (a <nic>~ whose host port or bridge OVS lost: from the state directory's copy), tether's
  ports, flows and Bridge external_ids removed; --delete-bridge also removes the bridge if
  tether created it and nothing else uses it. Refuses while a tether daemon runs or is about
  to (systemd's tether.service not stopped, a restart pending included; the daemon's OVSDB
  lock held; its state socket answering). Exit: 0 done or nothing to do, 1 failed or a <nic>~ left (run it again once
  the cause is fixed), 2 bad usage.
";

pub fn parse_flags(args: &[String]) -> (Options, Vec<String>) {
    let mut o = Options::default();
    let rest = args
        .iter()
        .filter(|a| {
            let ours = *a == "--delete-bridge";
            o.delete_bridge |= ours;
            !ours
        })
        .cloned()
        .collect();
    (o, rest)
}

/// What happens to the bridge itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BridgeFate {
    /// Kept; with the reason when `--delete-bridge` asked otherwise.
    Keep(Option<String>),
    Delete,
}

/// What reset changes on the bridge once every NIC is back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cleanup {
    /// tether's ports (uuid, name).
    pub ports: Vec<(Uuid, String)>,
    /// The distinct tether cookies on the switch, each deleted exactly.
    pub cookies: Vec<u64>,
    /// How many flows they hold.
    pub flows: usize,
    /// `Bridge.external_ids` keys to remove (none when the bridge goes).
    pub keys: Vec<String>,
    pub bridge: BridgeFate,
}

impl Cleanup {
    pub fn is_empty(&self) -> bool {
        self.ports.is_empty()
            && self.cookies.is_empty()
            && self.keys.is_empty()
            && self.bridge != BridgeFate::Delete
    }
}

/// The keys tether writes in `Bridge.external_ids` (and `tether-held:<nic>`, one per NIC
/// attached: `HELD_PREFIX`).
const KEYS: [&str; 3] = ["roundNum", RECORD_KEY, CREATED_KEY];

/// Plan step 3 from the bridge (after the NICs are back) and its flows.
pub fn plan(view: &BridgeView, bridge: &str, flows: &[FlowDesc], delete_bridge: bool) -> Cleanup {
    let ours = |p: &crate::ovsdb::PortData| {
        matches!(
            p.external_ids.get("antrea-type").map(String::as_str),
            Some("traffic-control" | "host" | "uplink")
        )
    };
    let ports: Vec<(Uuid, String)> = view
        .ports
        .iter()
        .filter(|p| ours(p))
        .map(|p| (p.uuid.clone(), p.name.clone()))
        .collect();
    let mut cookies: Vec<u64> = flows
        .iter()
        .map(|f| f.cookie)
        .filter(|c| tether_cookie(*c).is_some())
        .collect();
    let n = cookies.len();
    cookies.sort_unstable();
    cookies.dedup();
    let others: Vec<&str> = view
        .ports
        .iter()
        .filter(|p| !ours(p) && p.name != bridge)
        .map(|p| p.name.as_str())
        .collect();
    let foreign_flows = flows.len() - n;
    let fate = if !delete_bridge {
        BridgeFate::Keep(None)
    } else if view.external_ids.get(CREATED_KEY).map(String::as_str) != Some("true") {
        BridgeFate::Keep(Some(format!(
            "tether did not create it (no external_ids:{CREATED_KEY})"
        )))
    } else if !others.is_empty() {
        BridgeFate::Keep(Some(format!("other ports use it: {}", others.join(", "))))
    } else if foreign_flows > 0 {
        BridgeFate::Keep(Some(format!(
            "it holds {foreign_flows} flows tether did not install"
        )))
    } else {
        BridgeFate::Delete
    };
    let keys = if fate == BridgeFate::Delete {
        Vec::new()
    } else {
        let held = |k: &String| k.starts_with(HELD_PREFIX);
        KEYS.iter()
            .filter(|k| view.external_ids.contains_key(**k))
            .map(|k| k.to_string())
            .chain(view.external_ids.keys().filter(|k| held(k)).cloned())
            .collect()
    };
    Cleanup {
        ports,
        cookies,
        flows: n,
        keys,
        bridge: fate,
    }
}

/// The command: what it changed, one line each on stdout, and whether it failed
/// (then what was done before the failure is still listed).
pub fn main(args: &[String], out: &mut dyn std::io::Write) -> Result<u8, CmdError> {
    let (o, rest) = parse_flags(args);
    let cfg = load_config(&rest)?;
    // What it does goes to stdout, one line per change; the log (warnings) to stderr.
    crate::logging::init("warn");
    let mut lines = Vec::new();
    let r = reset(&cfg, &o, &mut lines);
    for l in &lines {
        let _ = writeln!(out, "{l}");
    }
    r.map(|()| 0)
}

fn reset(cfg: &Config, o: &Options, out: &mut Vec<String>) -> Result<(), CmdError> {
    // systemd restarting a crashed daemon (or one waiting for OVS) holds no lock yet.
    if let Some(refused) = unit::check() {
        return Err(CmdError::Failed(refused));
    }
    // The daemon owns the state socket while it runs; a stale file refuses connections.
    if crate::status::fetch(&cfg.state_socket).is_ok() {
        return Err(CmdError::Failed(format!(
            "a tether daemon answers on {}: stop it first (systemctl stop tether); reset never runs beside it",
            cfg.state_socket.display()
        )));
    }
    let db_sock = cfg.ovsdb_socket();
    let client = Arc::new(Client::start(
        Remote::Unix(db_sock.clone()),
        ClientOptions::default(),
    ));
    client
        .wait_connected(Duration::from_secs(5))
        .map_err(|e| format!("ovsdb {}: {e}", db_sock.display()))?;
    // The daemon holds the bridge's lock for as long as it runs (a busy or slow state
    // socket, another path or version: the lock says it all the same).
    let lock = crate::ovsdb::lock::lock_id(&cfg.bridge);
    let locked = crate::ovsdb::lock::try_lock(&client, &lock)
        .map_err(|e| format!("ovsdb {}: lock {lock}: {e}", db_sock.display()))?;
    if !locked {
        return Err(CmdError::Failed(format!(
            "a tether daemon holds the OVSDB lock {lock} on {}: stop it first (systemctl stop tether); reset never runs beside it",
            db_sock.display()
        )));
    }
    let Some(db) = BridgeDb::open(client.clone(), &cfg.bridge).map_err(|e| e.to_string())? else {
        // The bridge went with what it recorded; the state directory still has the held
        // configuration of a NIC taken over (a `<nic>~` to give back).
        let bridge: Arc<dyn Bridge> = Arc::new(AbsentBridge {
            name: cfg.bridge.clone(),
        });
        let flows: Arc<dyn Flows> = Arc::new(AbsentFlows {
            bridge: cfg.bridge.clone(),
        });
        restore_nics(cfg, bridge, flows, out)?;
        if out.is_empty() {
            out.push(format!(
                "bridge {} does not exist: nothing to reset",
                cfg.bridge
            ));
        }
        return no_uplink_left(cfg);
    };
    let of = give_nics_back(cfg, &client, db, out)?;
    // The replica follows the restore's transactions; read the bridge as it is now.
    let view = read_bridge(&client, &cfg.bridge)
        .ok_or_else(|| CmdError::Failed("the bridge went while resetting".into()))?;
    let dumped = of.dump(0, 0).map_err(|e| format!("flow dump: {e}"))?;
    let p = plan(&view, &cfg.bridge, &dumped, o.delete_bridge);
    let db = BridgeDb::open(client, &cfg.bridge)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| CmdError::Failed("the bridge went while resetting".into()))?;
    carry_out(&p, &cfg.bridge, db, of, out)?;
    if out.is_empty() {
        out.push(format!("nothing to reset on bridge {}", cfg.bridge));
    }
    no_uplink_left(cfg)
}

/// A reset that leaves a NIC renamed to its uplink name has not given the VM back: a
/// failure, whatever else worked. Looks for the uplink name of every NIC the state
/// directory still holds a configuration for, and of every interface in the kernel
/// enslaved to OVS's datapath under a tether uplink name.
fn no_uplink_left(cfg: &Config) -> Result<(), CmdError> {
    let files = HeldFiles::new(&cfg.state_dir);
    let links = crate::netlink::Rtnl::connect().map_err(|e| format!("netlink: {e}"))?;
    let mut left: Vec<String> = files
        .nics()
        .into_iter()
        .map(|n| uplink_name(&n))
        .filter(|u| links.link_by_name(u).is_ok())
        .collect();
    left.sort();
    left.dedup();
    if left.is_empty() {
        return Ok(());
    }
    Err(CmdError::Failed(format!(
        "{} still there: the NIC is not given back (its configuration is kept in {}); fix the cause and run tether reset again",
        left.join(", "),
        cfg.state_dir.display()
    )))
}

/// Step 2: every NIC back, by the ExternalNode controller's own restore. Returns the
/// OpenFlow connection step 3 deletes the flows through.
fn give_nics_back(
    cfg: &Config,
    client: &Client,
    db: BridgeDb,
    out: &mut Vec<String>,
) -> Result<Arc<OfFlows>, CmdError> {
    let round = read_bridge(client, &cfg.bridge)
        .and_then(|v| {
            v.external_ids
                .get("roundNum")
                .and_then(|r| r.parse::<u16>().ok())
        })
        .filter(|r| *r != 0)
        .unwrap_or(1);
    let mgmt = cfg.openflow_socket();
    // Only to let the ExternalNode controller run; it holds no flows, so it sends nothing
    // of its own (the flows are deleted in step 3, by cookie).
    let of = Arc::new(
        OfFlows::start(OfFlowsConfig::new(mgmt.clone(), &cfg.bridge, round))
            .map_err(|e| format!("openflow {}: {e}", mgmt.display()))?,
    );
    of.wait_connected(Duration::from_secs(5))
        .map_err(|e| format!("openflow {}: {e}", mgmt.display()))?;
    let bridge: Arc<dyn Bridge> = Arc::new(LiveBridge::new(db));
    let flows: Arc<dyn Flows> = of.clone();
    restore_nics(cfg, bridge, flows, out)?;
    Ok(of)
}

/// Every NIC back, by the ExternalNode controller's own restore (and its give-back of a
/// NIC whose host port OVS lost).
fn restore_nics(
    cfg: &Config,
    bridge: Arc<dyn Bridge>,
    flows: Arc<dyn Flows>,
    out: &mut Vec<String>,
) -> Result<(), CmdError> {
    let links = crate::netlink::Rtnl::connect().map_err(|e| format!("netlink: {e}"))?;
    let en = EnController::new(
        EnConfig {
            // reset installs no flow: no bypass rules.
            bypass_rules: Vec::new(),
            ..crate::wiring::en_config(cfg)
        },
        Stores::default(),
        bridge,
        flows,
        Arc::new(links),
        Arc::new(VswitchdDatapath::new(&cfg.ovs_rundir, &cfg.datapath_type)),
    )
    .with_host_network(Arc::new(crate::hostnet::HostNet::for_datapath(
        &cfg.datapath_type,
        &cfg.state_dir,
    )));
    let nics = en.restore_all().map_err(|e| {
        format!(
            "could not give the NIC back ({e}); nothing else was changed: fix the cause and run tether reset again"
        )
    })?;
    out.extend(nics.iter().map(|n| {
        format!("restored {n}: its name, MAC, MTU, sysctls, addresses and routes are back")
    }));
    Ok(())
}

/// Step 3: carry out `p`.
fn carry_out(
    p: &Cleanup,
    bridge: &str,
    db: BridgeDb,
    of: Arc<OfFlows>,
    out: &mut Vec<String>,
) -> Result<(), CmdError> {
    if !p.ports.is_empty() {
        let uuids: Vec<Uuid> = p.ports.iter().map(|(u, _)| u.clone()).collect();
        db.delete_ports(&uuids)
            .map_err(|e| format!("deleting ports: {e}"))?;
        out.extend(
            p.ports
                .iter()
                .map(|(_, name)| format!("deleted port {name}")),
        );
    }
    if !p.cookies.is_empty() {
        let mods = p
            .cookies
            .iter()
            .map(|c| FlowMod::delete_by_cookie(*c, u64::MAX))
            .collect();
        of.bundle(mods)
            .map_err(|e| format!("deleting flows: {e}"))?;
        out.push(format!(
            "deleted {} flows ({} cookies)",
            p.flows,
            p.cookies.len()
        ));
    }
    drop(of);
    for k in &p.keys {
        db.set_bridge_external_id(k, None)
            .map_err(|e| format!("clearing external_ids:{k}: {e}"))?;
        out.push(format!("cleared external_ids:{k} of bridge {bridge}"));
    }
    match &p.bridge {
        BridgeFate::Delete => {
            db.delete_bridge()
                .map_err(|e| format!("deleting bridge {bridge}: {e}"))?;
            out.push(format!("deleted bridge {bridge}"));
        }
        BridgeFate::Keep(Some(why)) => out.push(format!("kept bridge {bridge}: {why}")),
        BridgeFate::Keep(None) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests;
pub mod unit;
