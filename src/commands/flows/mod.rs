//! `tether flows`: the bridge's flows as `ovs-ofctl dump-flows` prints them, grouped by
//! what owns each (read back from the cookies, [`owners`]), with their packet counters;
//! filters by owner and table, and the flows no owner claims. It only reads: one OVSDB
//! monitor, one OpenFlow flow dump, and the running daemon's status for TC names.

pub mod owners;

use std::time::Duration;

use serde_json::json;

use super::{CmdError, load_config};
use crate::config::Config;
use crate::openflow::dump::dump_all;
use crate::openflow::flow::tether_cookie;
use crate::openflow::flowmod::FlowDesc;
use crate::openflow::ofctl::{FlowStats, format_flow};
use crate::ovsdb::{Client, ClientOptions, Remote, read_bridge};
use owners::{Names, OwnerKind};

/// What to show.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Only this TrafficControl's mark flows.
    pub tc: Option<String>,
    /// Only the ExternalNode's flows (uplink pair and policy bypass).
    pub externalnode: bool,
    pub table: Option<u8>,
    /// Only flows no current owner claims.
    pub unowned: bool,
    pub no_stats: bool,
    pub json: bool,
}

pub const USAGE: &str = "tether flows [--tc NAME] [--externalnode] [--table N] [--unowned] [--no-stats] [--json] [run's --config/--bridge/--ovs-rundir/--state-socket]
  the bridge's flows as ovs-ofctl dump-flows prints them, grouped by owner (read from the
  cookies; TC names come from the running daemon, or from --tc). Exit: 0 shown, 1 could not
  read the bridge, 2 bad usage.
";

/// Split `tether flows`'s own flags from the rest (which go to the config parser).
pub fn parse_flags(args: &[String]) -> Result<(Options, Vec<String>), String> {
    let mut o = Options::default();
    let mut rest = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match flag {
            "--tc" => o.tc = Some(value("--tc")?),
            "--table" => {
                let v = value("--table")?;
                o.table = Some(
                    v.parse()
                        .map_err(|_| format!("--table {v:?}: not a table number (0-254)"))?,
                );
            }
            "--externalnode" => o.externalnode = true,
            "--unowned" => o.unowned = true,
            "--no-stats" => o.no_stats = true,
            "--json" => o.json = true,
            _ => rest.push(a.clone()),
        }
    }
    if o.tc.is_some() && o.externalnode {
        return Err("--tc and --externalnode select different owners: give one".into());
    }
    Ok((o, rest))
}

/// One flow and its owner.
#[derive(Clone, Debug)]
pub struct Row {
    pub owner: OwnerKind,
    pub desc: FlowDesc,
}

/// Give every flow its owner, keep those `o` selects, and order them by owner, table,
/// priority (highest first) and text.
pub fn annotate(descs: Vec<FlowDesc>, names: &Names, o: &Options) -> Vec<Row> {
    let newest = descs
        .iter()
        .filter_map(|d| tether_cookie(d.cookie))
        .map(|(round, _, _)| round)
        .max()
        .unwrap_or(0);
    let want_tc =
        o.tc.as_deref()
            .map(crate::controller::trafficcontrol::object_id);
    let mut rows: Vec<Row> = descs
        .into_iter()
        .map(|d| Row {
            owner: names.owner(d.cookie, d.match_.fields(), newest),
            desc: d,
        })
        .filter(|r| o.table.is_none_or(|t| r.desc.table_id == t))
        .filter(|r| !o.unowned || r.owner.is_unowned())
        .filter(|r| {
            !o.externalnode
                || matches!(
                    r.owner,
                    OwnerKind::ExternalNode { .. } | OwnerKind::PolicyBypass
                )
        })
        .filter(|r| match (want_tc, &r.owner) {
            (None, _) => true,
            (Some(id), OwnerKind::TrafficControl { object, .. }) => *object == id,
            _ => false,
        })
        .collect();
    rows.sort_by_cached_key(|r| {
        (
            r.owner.clone(),
            r.desc.table_id,
            std::cmp::Reverse(r.desc.priority),
            format_flow(&r.desc, false),
        )
    });
    rows
}

/// Text: a `# <owner>: <n> flows` line, then the owner's flows as ovs-ofctl prints them.
pub fn render_text(rows: &[Row], stats: bool) -> String {
    let mut groups: Vec<(String, Vec<&Row>)> = Vec::new();
    for r in rows {
        let label = r.owner.to_string();
        match groups.last_mut() {
            Some((l, v)) if *l == label => v.push(r),
            _ => groups.push((label, vec![r])),
        }
    }
    let mut s = String::new();
    for (label, v) in groups {
        let n = v.len();
        s.push_str(&format!(
            "# {label}: {n} flow{}\n",
            if n == 1 { "" } else { "s" }
        ));
        for r in v {
            s.push_str(&format_flow(&r.desc, stats));
            s.push('\n');
        }
    }
    if rows.is_empty() {
        s.push_str("# no flows match\n");
    }
    s
}

/// JSON: one object per flow.
pub fn render_json(rows: &[Row]) -> String {
    let v: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            let st = FlowStats::decode(&r.desc.stats);
            let round = tether_cookie(r.desc.cookie).map(|(round, _, _)| round);
            json!({
                "owner": r.owner.to_string(),
                "kind": r.owner.kind(),
                "name": r.owner.name(),
                "cookie": format!("{:#x}", r.desc.cookie),
                "round": round,
                "table": r.desc.table_id,
                "priority": r.desc.priority,
                "n_packets": st.packets,
                "n_bytes": st.bytes,
                "flow": format_flow(&r.desc, false),
            })
        })
        .collect();
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_else(|_| "[]".into());
    s.push('\n');
    s
}

/// Read the bridge's ports and round from OVSDB, the TC and NIC names from the running
/// daemon (if it answers), and every flow from the switch.
pub fn gather(cfg: &Config, o: &Options) -> Result<(Vec<FlowDesc>, Names), CmdError> {
    let db = cfg.ovsdb_socket();
    let client = Client::start(Remote::Unix(db.clone()), ClientOptions::default());
    client
        .wait_connected(Duration::from_secs(5))
        .map_err(|e| format!("ovsdb {}: {e}", db.display()))?;
    let bridge = read_bridge(&client, &cfg.bridge)
        .ok_or_else(|| format!("bridge {} does not exist", cfg.bridge))?;
    let round = bridge
        .external_ids
        .get("roundNum")
        .and_then(|r| r.parse().ok());
    let mut names = Names::new(round, &bridge.ports);
    if let Ok(snap) = crate::status::fetch(&cfg.state_socket) {
        for tc in &snap.traffic_controls {
            names.add_tc(&tc.name);
        }
        if let Some(nic) = &snap.external_node.nic {
            names.add_nic(nic);
        }
        for p in snap.network_policy.iter().flat_map(|np| &np.policies) {
            let policy = p.title();
            for r in &p.rules {
                names.add_rule(r.conj_id, &format!("{policy} {} {}", r.direction, r.name));
            }
        }
    }
    if let Some(tc) = &o.tc {
        names.add_tc(tc);
    }
    drop(client);
    Ok((dump_all(&cfg.openflow_socket())?, names))
}

/// The command: gather, annotate, print.
pub fn main(args: &[String], out: &mut dyn std::io::Write) -> Result<u8, CmdError> {
    let (o, rest) = parse_flags(args).map_err(CmdError::Usage)?;
    let cfg = load_config(&rest)?;
    crate::logging::init("warn");
    let (descs, names) = gather(&cfg, &o)?;
    let rows = annotate(descs, &names, &o);
    let text = if o.json {
        render_json(&rows)
    } else {
        render_text(&rows, !o.no_stats)
    };
    let _ = out.write_all(text.as_bytes());
    Ok(0)
}

#[cfg(test)]
mod tests;
