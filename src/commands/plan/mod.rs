//! `tether plan`: what `tether run` would change right now, changing nothing. It loads the
//! objects from the same source (`run`'s source code, stopped once every kind is listed),
//! reads OVSDB, the switch's flows and the kernel, and runs the controllers' own syncs
//! against backends that read for real and record every write (`commands::dry`). The ExternalNode
//! is previewed by its controller's own snapshot and plan (`EnController::preview`). The
//! difference is printed as data ([`Pending`]): ports, link changes, ExternalNode steps, and
//! flows to add or delete in ovs-ofctl syntax.
//!
//! Exit codes: 0 nothing to do, 3 changes pending, 1 could not read what it needs, 2 bad
//! usage or configuration.

mod policy;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::dry::{self, DryBridge, DryFlows, DryLinks, PortChange, Recorder};
use super::{CmdError, load_config};
use crate::config::Config;
use crate::controller::externalnode::plan::Attach;
use crate::controller::externalnode::{EnError, EnPreview, nic_owner, uplink};
use crate::controller::trafficcontrol::ports::port_name;
use crate::controller::trafficcontrol::{TcController, object_id};
use crate::controller::{Bridge, Flows, l2::L2Controller};
use crate::k8s::{Kind, KubeEvent, Stores};
use crate::netlink::{NicConfig, uplink_name};
use crate::openflow::flow::tether_cookie;
use crate::openflow::flowmod::FlowDesc;
use crate::openflow::ofctl::format_flow;
use crate::openflow::{Category, Flow, Owner};
use crate::ovsdb::{Client, ClientOptions, PortData, Remote, read_bridge};
use crate::pipeline::externalnode::{bypass_flows, uplink_pair_flows};

pub const EXIT_NOTHING: u8 = 0;
pub const EXIT_PENDING: u8 = 3;

pub const USAGE: &str =
    "tether plan [--json] [run's flags: --config, --manifests/--kubeconfig, --bridge, …]
  what tether run would change now, changing nothing: ports to create or delete, link
  changes, the ExternalNode's takeover or restore with the addresses and routes that would
  move, and flows to add or delete (ovs-ofctl syntax). Exit: 0 nothing to do, 3 changes
  pending, 1 could not read what it needs, 2 bad usage or configuration.
";

/// A flow to add or delete, with its owner.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct FlowLine {
    pub owner: String,
    pub flow: String,
}

/// What `run` would change.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Pending {
    /// `create bridge …` when it does not exist.
    pub bridge: Option<String>,
    pub ports: Vec<String>,
    pub links: Vec<String>,
    pub externalnode: Vec<String>,
    pub add: Vec<FlowLine>,
    pub delete: Vec<FlowLine>,
    /// Placeholder ofports in the flows to add, and the new port each stands for.
    pub new_ofports: BTreeMap<u32, String>,
    /// What could not be planned (an object `run` would refuse or retry), per object.
    pub problems: Vec<String>,
}

impl Pending {
    pub fn is_empty(&self) -> bool {
        self.bridge.is_none()
            && self.ports.is_empty()
            && self.links.is_empty()
            && self.externalnode.is_empty()
            && self.add.is_empty()
            && self.delete.is_empty()
    }
}

fn port_line(c: &PortChange) -> String {
    let opts = |o: &BTreeMap<String, String>| {
        o.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    match c {
        PortChange::Create {
            name,
            kind,
            options,
        } if options.is_empty() => format!("create port {name} (type {kind})"),
        PortChange::Create {
            name,
            kind,
            options,
        } => format!(
            "create port {name} (type {kind}, options {})",
            opts(options)
        ),
        PortChange::Delete { name } => format!("delete port {name}"),
        PortChange::SetOptions { name, options } => {
            format!("set options of {name} to {}", opts(options))
        }
        PortChange::SetExternalIds { name, ids } => {
            format!("set external_ids of {name} to {}", opts(ids))
        }
    }
}

/// A flow's text without its cookie (rounds and owners are compared apart).
fn flow_text(table: u8, priority: u16, d: FlowDesc) -> String {
    let d = FlowDesc {
        table_id: table,
        priority,
        cookie: 0,
        stats: Vec::new(),
        ..d
    };
    format_flow(&d, false)
}

/// Desired flows per owner against the switch's: the flows to add and to delete, compared
/// by owner and text (a flow that only changes round is unchanged: `run` re-installs it
/// under its new round in the same bundle that deletes the old). Pure.
pub fn diff_flows(
    desired: &BTreeMap<Owner, Vec<Flow>>,
    current: &[FlowDesc],
    label: &dyn Fn(Owner) -> String,
) -> (Vec<FlowLine>, Vec<FlowLine>) {
    let want: BTreeSet<(Owner, String)> = desired
        .iter()
        .flat_map(|(o, fs)| {
            fs.iter()
                .map(move |f| (*o, flow_text(f.key.table, f.key.priority, f.to_desc())))
        })
        .collect();
    let have: BTreeSet<(Owner, String)> = current
        .iter()
        .filter_map(|d| {
            let (_, category, object) = tether_cookie(d.cookie)?;
            Some((
                Owner::new(category, object),
                flow_text(d.table_id, d.priority, d.clone()),
            ))
        })
        .collect();
    let line = |(o, t): &(Owner, String)| FlowLine {
        owner: label(*o),
        flow: t.clone(),
    };
    let mut add: Vec<FlowLine> = want.difference(&have).map(line).collect();
    let mut del: Vec<FlowLine> = have.difference(&want).map(line).collect();
    add.sort();
    del.sort();
    (add, del)
}

fn config_lines(verb: &str, target: &str, c: &NicConfig) -> Vec<String> {
    let mut v = Vec::new();
    for a in &c.addrs {
        v.push(format!("  {verb} address {a} to {target}"));
    }
    for r in &c.routes {
        v.push(format!("  {verb} route {r} to {target}"));
    }
    v
}

/// Load every kind from `run`'s source, then stop it.
fn load(cfg: &Config) -> Result<Stores, CmdError> {
    let stores = Stores::default();
    let (tx, rx) = crossbeam_channel::unbounded();
    let source = crate::wiring::start_source(cfg, &stores, tx).map_err(|e| e.to_string())?;
    let mut synced = BTreeSet::new();
    let end = Instant::now() + Duration::from_secs(30);
    while synced.len() < Kind::ALL.len() {
        let left = end.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(KubeEvent::Synced(k)) => {
                synced.insert(k);
            }
            Ok(_) => {}
            Err(_) => {
                let status = source.status();
                source.stop();
                let missing: Vec<String> = Kind::ALL
                    .iter()
                    .filter(|k| !synced.contains(*k))
                    .map(|k| {
                        let why = status
                            .get(k)
                            .and_then(|s| s.last_error.clone())
                            .unwrap_or_else(|| "no answer".into());
                        format!("{} ({why})", k.plural())
                    })
                    .collect();
                return Err(CmdError::Failed(format!(
                    "could not list within 30 s: {}",
                    missing.join(", ")
                )));
            }
        }
    }
    source.stop();
    Ok(stores)
}

/// What OVS has now: the bridge's ports and external_ids and its flows, or, for a bridge
/// that does not exist yet, the line that says `run` creates it.
type OvsNow = (
    Vec<PortData>,
    BTreeMap<String, String>,
    Vec<FlowDesc>,
    Option<String>,
);

fn read_ovs(cfg: &Config) -> Result<OvsNow, CmdError> {
    let db = cfg.ovsdb_socket();
    let client = Client::start(Remote::Unix(db.clone()), ClientOptions::default());
    client
        .wait_connected(Duration::from_secs(5))
        .map_err(|e| format!("ovsdb {}: {e}", db.display()))?;
    let view = read_bridge(&client, &cfg.bridge);
    drop(client);
    Ok(match view {
        Some(v) => (
            v.ports,
            v.external_ids,
            crate::openflow::dump::dump_all(&cfg.openflow_socket())?,
            None,
        ),
        None => (
            Vec::new(),
            BTreeMap::new(),
            Vec::new(),
            Some(format!(
                "create bridge {} (datapath_type {}, OpenFlow10+15, fail_mode {})",
                cfg.bridge,
                cfg.datapath_type,
                if cfg.antrea_kubeconfig.is_some() {
                    "secure"
                } else {
                    "standalone"
                }
            )),
        ),
    })
}

/// Work out the plan. Reads only.
pub fn compute(cfg: &Config) -> Result<Pending, CmdError> {
    let stores = load(cfg)?;
    let (ports, ids, current, bridge_line) = read_ovs(cfg)?;
    let mut plan = Pending {
        bridge: bridge_line,
        ..Pending::default()
    };
    let rec = Recorder::default();
    let bridge: Arc<dyn Bridge> = Arc::new(DryBridge::new(ports.clone(), ids, rec.clone()));
    let flows: Arc<dyn Flows> = Arc::new(DryFlows(rec.clone()));
    let rtnl = crate::netlink::Rtnl::connect().map_err(|e| format!("netlink: {e}"))?;
    let links = Arc::new(DryLinks {
        real: rtnl,
        rec: rec.clone(),
    });
    rec.set_flows(
        Owner::new(Category::DEFAULT, 0),
        crate::pipeline::base_flows(),
    );

    // The TrafficControls, in the order of their names, then the orphan sweep and the L2
    // flows: as the first full sync does.
    let tc = TcController::new(stores.clone(), bridge.clone(), flows.clone(), links.clone());
    let names = stores.traffic_controls.keys();
    for n in &names {
        if let Err(e) = tc.sync(n) {
            plan.problems.push(format!("trafficcontrol {n}: {e}"));
        }
    }
    tc.sweep_orphans();
    if let Err(e) = L2Controller::new(bridge.clone(), flows.clone()).sync() {
        plan.problems.push(format!("l2: {e}"));
    }

    // The ExternalNode: its controller's own decision, previewed.
    let en = dry::en_controller(cfg, stores.clone(), bridge, flows, links, &rec);
    rec.set_flows(
        Owner::new(Category::EXTERNAL_NODE, 0),
        bypass_flows(&cfg.policy_bypass_rules),
    );
    externalnode_steps(&en.preview(), &cfg.datapath_type, &ports, &rec, &mut plan);

    // NetworkPolicy: the flows the daemon would compile now (or those on the switch, kept).
    let mut rules = BTreeMap::new();
    if cfg.antrea_kubeconfig.is_some() {
        let (sets, names, why) = policy::desired(cfg, &ports, &current);
        for (owner, fl) in sets {
            rec.set_flows(owner, fl);
        }
        rules = names;
        if let Some(why) = why {
            plan.problems.push(format!("networkpolicy: {why}"));
        }
    }
    let label = labeller(&stores, &ports, rules);
    let (add, delete) = diff_flows(&rec.desired_flows(), &current, &label);
    plan.add = add;
    plan.delete = delete;
    plan.ports = rec.port_changes().iter().map(port_line).collect();
    plan.links = rec.link_changes();
    plan.new_ofports = rec.new_ofports();
    Ok(plan)
}

/// The ExternalNode's part, rendered from its controller's own decision: steps (with the
/// configuration that would move, and the uplink's values while attached), its ports and
/// its pair flows recorded in `rec`.
fn externalnode_steps(
    p: &EnPreview,
    datapath_type: &str,
    ports: &[PortData],
    rec: &Recorder,
    plan: &mut Pending,
) {
    let steps = &mut plan.externalnode;
    if let Some(r) = &p.recorded {
        steps.push(format!("finish or roll back the recorded step first: {r}"));
    }
    for nic in &p.orphans {
        steps.push(format!(
            "give {nic} back from the state directory's copy of its configuration (OVS lost its host port): rename {} to {nic}, put its addresses, routes and sysctls back",
            uplink_name(nic)
        ));
    }
    if let Some(e) = &p.plan.refused {
        plan.problems.push(match e {
            EnError::Invalid { .. } | EnError::Refused { .. } => e.to_string(),
            _ => format!("externalnode {}: {e}", p.snapshot.key),
        });
    }
    let ofport_of = |name: &str| {
        ports
            .iter()
            .find(|x| x.name == name)
            .and_then(|x| u32::try_from(x.ofport).ok())
    };
    // Pairs of NICs that stay attached keep their flows (`run` re-installs them as are):
    // those whose uplink port OVSDB has with its role, as `run` requires.
    for a in p
        .snapshot
        .attached
        .iter()
        .filter(|a| a.uplink_port.is_some())
    {
        if let (Some(h), Some(u)) = (ofport_of(&a.nic), ofport_of(&a.uplink)) {
            rec.set_flows(nic_owner(&a.nic), uplink_pair_flows(h, u));
        }
    }
    let config = |nic: &str| -> Vec<String> {
        p.configs
            .get(nic)
            .map(|c| config_lines("move", nic, c))
            .unwrap_or_default()
    };
    if let Some(n) = &p.plan.nic {
        let nic = &n.nic;
        let why = match n.attach {
            Attach::Keep => None,
            Attach::Takeover => Some(format!("take over {nic}")),
            Attach::Reattach => Some(format!("re-attach {nic} (its ports outlived their links)")),
            Attach::Rebuild => Some(format!(
                "give {nic} back and take it over again (its uplink port is gone)"
            )),
        };
        if let Some(why) = why {
            let uplink = uplink_name(nic);
            steps.push(format!(
                "{why}: rename {nic} to {uplink}, create its ports, move its configuration to the host port {nic}:"
            ));
            steps.extend(config(nic));
            steps.push(format!(
                "  while attached: {} (the NIC's own values come back with it)",
                uplink::describe(&uplink, datapath_type)
            ));
            let host = rec.create(nic, "internal", BTreeMap::new());
            let up = rec.create(&uplink, "system", BTreeMap::new());
            rec.set_flows(nic_owner(nic), uplink_pair_flows(host, up));
        }
        if let Some(ids) = &n.relabel {
            let text = ids
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",");
            steps.push(format!("re-label the host port {nic}: external_ids {text}"));
        }
    }
    for a in p
        .snapshot
        .attached
        .iter()
        .filter(|a| p.plan.release.contains(&a.nic))
    {
        let nic = &a.nic;
        steps.push(format!(
            "give {nic} back: delete its ports, rename {} to {nic}, move its configuration back:",
            a.uplink
        ));
        steps.extend(config(nic));
        rec.delete(nic);
        rec.delete(&a.uplink);
        rec.set_flows(nic_owner(nic), Vec::new());
    }
}

/// Names for the flows' owners: the TCs in the store and their target and return ports
/// (those run would create too), the bridge's TC ports.
fn labeller(
    stores: &Stores,
    ports: &[PortData],
    rules: BTreeMap<u32, String>,
) -> impl Fn(Owner) -> String {
    let mut names: BTreeMap<u32, String> = BTreeMap::new();
    let mut port = |p: &str| {
        names.insert(
            object_id(&format!("port:{p}")),
            format!("trafficcontrol return port {p}"),
        );
        names.insert(
            object_id(&format!("target:{p}")),
            format!("trafficcontrol target port {p}"),
        );
    };
    for tc in stores.traffic_controls.list() {
        if let Ok(spec) = &tc.spec {
            port(&port_name(&spec.target_port));
            if let Some(r) = &spec.return_port {
                port(&port_name(r));
            }
        }
    }
    for x in ports {
        if x.external_ids.get("antrea-type").map(String::as_str) == Some("traffic-control") {
            port(&x.name);
        }
    }
    for n in stores.traffic_controls.keys() {
        names.insert(object_id(&n), format!("trafficcontrol {n}"));
    }
    move |o: Owner| match (o.category, o.object) {
        (Category::DEFAULT, 0) => "pipeline".into(),
        (Category::DEFAULT, 1) => "l2 forwarding".into(),
        (Category::EXTERNAL_NODE, 0) => "externalnode policy bypass".into(),
        (Category::NETWORK_POLICY, 0) => "networkpolicy pipeline".into(),
        (Category::NETWORK_POLICY, id) => match rules.get(&id) {
            Some(n) => format!("networkpolicy rule {n}"),
            None => format!("networkpolicy rule (conjunction {id})"),
        },
        (Category::EXTERNAL_NODE, _) => "externalnode uplink pair".into(),
        (Category::TRAFFIC_CONTROL, id) => names
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("trafficcontrol #{id:08x}")),
        (c, id) => format!("category {} object {id:#x}", c.0),
    }
}

/// The plan as text.
pub fn render(p: &Pending) -> String {
    let mut s = String::new();
    let section = |s: &mut String, title: &str, lines: &[String]| {
        if !lines.is_empty() {
            s.push_str(&format!("{title}:\n"));
            for l in lines {
                s.push_str(&format!("  {l}\n"));
            }
        }
    };
    if let Some(b) = &p.bridge {
        s.push_str(&format!("bridge:\n  {b}\n"));
    }
    section(&mut s, "ports", &p.ports);
    section(&mut s, "links", &p.links);
    section(&mut s, "externalnode", &p.externalnode);
    let flows = |s: &mut String, title: &str, v: &[FlowLine]| {
        if v.is_empty() {
            return;
        }
        s.push_str(&format!("{title} ({}):\n", v.len()));
        let mut last = "";
        for f in v {
            if f.owner != last {
                s.push_str(&format!("  # {}\n", f.owner));
                last = &f.owner;
            }
            s.push_str(&format!("  {}\n", f.flow));
        }
    };
    flows(&mut s, "flows to add", &p.add);
    flows(&mut s, "flows to delete", &p.delete);
    if !p.new_ofports.is_empty() {
        s.push_str("new ports' ofports (OVS assigns the real numbers):\n");
        for (of, name) in &p.new_ofports {
            s.push_str(&format!("  {of} ({of:#x}) = {name}\n"));
        }
    }
    section(
        &mut s,
        "problems (run would log these and retry)",
        &p.problems,
    );
    if p.is_empty() {
        s.push_str("nothing to do: the bridge, its flows and the VM's links are as tether run would make them\n");
    } else {
        s.push_str(&format!(
            "changes pending: {} port, {} link, {} externalnode, {} flows to add, {} to delete\n",
            p.ports.len() + usize::from(p.bridge.is_some()),
            p.links.len(),
            p.externalnode.len(),
            p.add.len(),
            p.delete.len()
        ));
    }
    s
}

/// Only `--json` is plan's own flag.
pub fn parse_flags(args: &[String]) -> (bool, Vec<String>) {
    let json = args.iter().any(|a| a == "--json");
    (
        json,
        args.iter().filter(|a| *a != "--json").cloned().collect(),
    )
}

/// The command: the plan as text (or JSON) and its exit code.
pub fn main(args: &[String], out: &mut dyn std::io::Write) -> Result<u8, CmdError> {
    let (json, rest) = parse_flags(args);
    let cfg = load_config(&rest)?;
    crate::logging::init("warn");
    let p = compute(&cfg)?;
    let code = if p.is_empty() {
        EXIT_NOTHING
    } else {
        EXIT_PENDING
    };
    let text = if json {
        let mut t = serde_json::to_string_pretty(&p).unwrap_or_else(|_| "{}".into());
        t.push('\n');
        t
    } else {
        render(&p)
    };
    let _ = out.write_all(text.as_bytes());
    Ok(code)
}

#[cfg(test)]
mod tests;
