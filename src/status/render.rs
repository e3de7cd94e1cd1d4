//! Text forms of a [`Snapshot`]: the human table `tether status` prints and the
//! Prometheus text exposition format 0.0.4 (`# HELP`, `# TYPE`, `name{label="v"} value`).
//! Pure: snapshot in, string out.

use std::fmt::Write;

use super::Snapshot;

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

fn port(name: Option<&String>, ofport: Option<u32>) -> String {
    match (name, ofport) {
        (Some(n), Some(o)) => format!("{n}({o})"),
        (Some(n), None) => format!("{n}(?)"),
        _ => "-".into(),
    }
}

fn conn(c: &super::ConnStatus) -> &'static str {
    if c.connected {
        "connected"
    } else {
        "DISCONNECTED"
    }
}

/// `s` safe for a terminal: control characters (an object name or an error text from the
/// API server can carry escape sequences or newlines) written as Rust escapes, `\u{1b}`.
pub fn printable(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Left-aligned columns, two spaces apart; every cell made [`printable`].
fn table(out: &mut String, rows: &[Vec<String>]) {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| printable(c)).collect())
        .collect();
    let rows = &rows;
    let n = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..n)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    for r in rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i + 1 == r.len() {
                line.push_str(c);
            } else {
                let _ = write!(line, "{c:<w$}  ", w = widths[i]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

/// The table `tether status` prints.
pub fn human(s: &Snapshot) -> String {
    // Long on purpose: The `tether status` table, section by section as printed: a flat
    // list reads best whole.
    let mut o = String::new();
    let _ = writeln!(
        o,
        "tether {}  node={}  bridge={}  round={}  {}  up {}s",
        s.version,
        s.node,
        s.bridge,
        s.round,
        if s.ready { "READY" } else { "STARTING" },
        s.uptime_seconds
    );
    let _ = writeln!(
        o,
        "ovsdb {} ({})  openflow {} ({}, {} reconnects)  flows={}  queue={}",
        conn(&s.ovsdb),
        s.ovsdb.socket,
        conn(&s.openflow),
        s.openflow.socket,
        s.openflow.reconnects,
        s.flows,
        s.queue_depth
    );
    if let Some(p) = &s.flows_problem {
        let _ = writeln!(o, "FLOWS NOT VERIFIED: {}", printable(p));
    }
    let m = &s.metrics;
    if m.flow_drift_repairs + m.bridge_recreations + s.external_node.repairs > 0 {
        let _ = writeln!(
            o,
            "changed outside tether, repaired: flows of {} owners, bridge {} times, ExternalNode ports {} times{}",
            m.flow_drift_repairs,
            m.bridge_recreations,
            s.external_node.repairs,
            s.external_node
                .last_repair
                .as_ref()
                .map(|r| format!(" (last: {r})"))
                .unwrap_or_default()
        );
    }
    o.push_str("\nWATCH\n");
    let mut rows = vec![vec![
        "KIND".into(),
        "SYNCED".into(),
        "RV".into(),
        "LAST EVENT".into(),
        "EVENTS".into(),
        "ERRORS".into(),
        "RELISTS".into(),
        "LAST OK".into(),
        "LAST ERROR".into(),
    ]];
    for w in &s.watches {
        rows.push(vec![
            w.kind.clone(),
            if w.synced { "yes" } else { "no" }.into(),
            opt(w.resource_version.as_ref()),
            w.last_event_age_seconds
                .map_or_else(|| "-".into(), |a| format!("{a:.0}s ago")),
            w.events.to_string(),
            w.errors.to_string(),
            w.relists.to_string(),
            w.last_ok_age_seconds
                .map_or_else(|| "-".into(), |a| format!("{a:.0}s ago")),
            opt(w.last_error.as_ref()),
        ]);
    }
    table(&mut o, &rows);
    o.push_str("\nTRAFFICCONTROL\n");
    let mut rows = vec![vec![
        "NAME".into(),
        "PODS".into(),
        "TARGET".into(),
        "RETURN".into(),
        "FLOWS".into(),
        "LAST ERROR".into(),
    ]];
    for t in &s.traffic_controls {
        rows.push(vec![
            t.name.clone(),
            if t.effective_pods.is_empty() {
                "-".into()
            } else {
                t.effective_pods.join(",")
            },
            port(t.target_port.as_ref(), t.target_ofport),
            port(t.return_port.as_ref(), t.return_ofport),
            t.flows.to_string(),
            opt(t.last_error.as_ref()),
        ]);
    }
    table(&mut o, &rows);
    let e = &s.external_node;
    o.push_str("\nEXTERNALNODE\n");
    table(
        &mut o,
        &[
            vec![
                "STEP".into(),
                "NIC".into(),
                "UPLINK".into(),
                "HOST PORT".into(),
                "ADDRESSES".into(),
                "BYPASS FLOWS".into(),
                "LAST ERROR".into(),
            ],
            vec![
                e.step.clone(),
                opt(e.nic.as_ref()),
                port(e.uplink.as_ref(), e.uplink_ofport),
                port(e.nic.as_ref(), e.host_ofport),
                if e.addresses.is_empty() {
                    "-".into()
                } else {
                    e.addresses.join(",")
                },
                e.bypass_flows.to_string(),
                opt(e.cut_off.as_ref().or(e.last_error.as_ref())),
            ],
        ],
    );
    if let Some(d) = &e.side_door {
        let _ = writeln!(o, "UPLINK SIDE DOOR OPEN: {}", printable(d));
    }
    if let Some(np) = &s.network_policy {
        human_policy(&mut o, np);
    }
    o
}

/// The NETWORKPOLICY section: the watches in one line, then a row per rule.
fn human_policy(o: &mut String, np: &super::policy::NpStatus) {
    let watches: Vec<String> = np
        .watches
        .iter()
        .map(|w| {
            format!(
                "{} {}{}",
                w.kind,
                if w.synced { "synced" } else { "not synced" },
                w.last_error
                    .as_ref()
                    .map(|e| format!(" ({})", printable(e)))
                    .unwrap_or_default()
            )
        })
        .collect();
    let pi = &np.packet_ins;
    o.push_str(&format!(
        "\nNETWORKPOLICY  {}; {} flows; {}; rejects answered {}/{} ({} over the rate limit); audit lines {}{}\n",
        watches.join(", "),
        np.flows,
        match np.ports {
            Some((h, u)) => format!("VM pair {h}<->{u}"),
            None => "VM not attached".into(),
        },
        pi.answered,
        pi.rejects,
        pi.rate_limited,
        pi.logged,
        np.last_error
            .as_ref()
            .map(|e| format!("; last error: {}", printable(e)))
            .unwrap_or_default()
    ));
    let mut rows = vec![vec![
        "POLICY".into(),
        "GEN".into(),
        "RULE".into(),
        "ACTION".into(),
        "TABLE/PRIO".into(),
        "PACKETS".into(),
        "BYTES".into(),
        "SESSIONS".into(),
        "STATE".into(),
    ]];
    for p in &np.policies {
        let head = printable(p.title());
        let generation = match p.reported {
            Some(r) if r == p.generation => format!("{} reported", p.generation),
            _ => p.generation.to_string(),
        };
        if p.rules.is_empty() {
            rows.push(vec![
                head.clone(),
                generation.clone(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "no rules".into(),
            ]);
        }
        for r in &p.rules {
            rows.push(vec![
                head.clone(),
                generation.clone(),
                format!("{} {}", r.direction, printable(&r.name)),
                r.action.clone(),
                format!("{}/{}", r.table, r.priority),
                r.counters.packets.to_string(),
                r.counters.bytes.to_string(),
                r.counters.sessions.to_string(),
                printable(&r.state),
            ]);
        }
    }
    table(o, &rows);
}

/// Escape a label value (exposition format: backslash, quote, newline).
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn metric(o: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, String)]) {
    let _ = writeln!(o, "# HELP {name} {help}");
    let _ = writeln!(o, "# TYPE {name} {kind}");
    for (labels, v) in samples {
        let _ = writeln!(o, "{name}{labels} {v}");
    }
}

/// Prometheus text exposition format 0.0.4.
pub fn prometheus(s: &Snapshot) -> String {
    // Long on purpose: One block per metric family, in the order scrapers see them: a flat
    // list reads best whole.
    let mut o = String::new();
    let b = |x: bool| if x { "1" } else { "0" }.to_string();
    let one = |v: String| vec![(String::new(), v)];
    metric(
        &mut o,
        "tether_ready",
        "gauge",
        "1 once the first full sync is done.",
        &one(b(s.ready)),
    );
    let per_key = |f: &dyn Fn(&super::SyncCounters) -> String| -> Vec<(String, String)> {
        s.metrics
            .syncs
            .iter()
            .map(|(k, c)| (format!("{{key=\"{}\"}}", label(k)), f(c)))
            .collect()
    };
    metric(
        &mut o,
        "tether_syncs_total",
        "counter",
        "Syncs run, by key kind (tc, en, l2).",
        &per_key(&|c| c.syncs.to_string()),
    );
    metric(
        &mut o,
        "tether_sync_errors_total",
        "counter",
        "Syncs that failed (retried with backoff).",
        &per_key(&|c| c.errors.to_string()),
    );
    metric(
        &mut o,
        "tether_sync_duration_seconds_sum",
        "counter",
        "Total time spent syncing.",
        &per_key(&|c| format!("{:.6}", c.duration_seconds_sum)),
    );
    metric(
        &mut o,
        "tether_sync_duration_seconds_max",
        "gauge",
        "Longest single sync since start.",
        &per_key(&|c| format!("{:.6}", c.duration_seconds_max)),
    );
    metric(
        &mut o,
        "tether_flow_mods_total",
        "counter",
        "Flow adds and deletes sent to the switch.",
        &one(s.metrics.flow_mods.to_string()),
    );
    metric(
        &mut o,
        "tether_flows",
        "gauge",
        "Flows tether has installed.",
        &one(s.flows.to_string()),
    );
    metric(
        &mut o,
        "tether_openflow_reconnects_total",
        "counter",
        "OpenFlow reconnects followed by a full flow replay.",
        &one(s.metrics.openflow_reconnects.to_string()),
    );
    metric(
        &mut o,
        "tether_outside_repairs_total",
        "counter",
        "Changes others made to OVS that tether repaired: flows installed again (per owner), the bridge made again, the ExternalNode's ports.",
        &[
            (
                "{what=\"flows\"}".into(),
                s.metrics.flow_drift_repairs.to_string(),
            ),
            (
                "{what=\"bridge\"}".into(),
                s.metrics.bridge_recreations.to_string(),
            ),
            (
                "{what=\"externalnode\"}".into(),
                s.external_node.repairs.to_string(),
            ),
        ],
    );
    metric(
        &mut o,
        "tether_connected",
        "gauge",
        "1 when the connection to the switch is up.",
        &[
            ("{conn=\"ovsdb\"}".into(), b(s.ovsdb.connected)),
            ("{conn=\"openflow\"}".into(), b(s.openflow.connected)),
        ],
    );
    metric(
        &mut o,
        "tether_queue_depth",
        "gauge",
        "Keys queued or waiting for a retry.",
        &one(s.queue_depth.to_string()),
    );
    let per_kind = |f: &dyn Fn(&super::WatchStatus) -> String| -> Vec<(String, String)> {
        s.watches
            .iter()
            .map(|w| (format!("{{kind=\"{}\"}}", label(&w.kind)), f(w)))
            .collect()
    };
    metric(
        &mut o,
        "tether_watch_events_total",
        "counter",
        "Object events received, by kind.",
        &per_kind(&|w| w.events.to_string()),
    );
    metric(
        &mut o,
        "tether_watch_errors_total",
        "counter",
        "Failed list/watch requests (each one relists or re-watches), by kind.",
        &per_kind(&|w| w.errors.to_string()),
    );
    metric(
        &mut o,
        "tether_watch_relists_total",
        "counter",
        "Full LISTs after the first one (410 Gone, expired resume point), by kind.",
        &per_kind(&|w| w.relists.to_string()),
    );
    metric(
        &mut o,
        "tether_watch_synced",
        "gauge",
        "1 once the kind's first list is in.",
        &per_kind(&|w| b(w.synced)),
    );
    metric(
        &mut o,
        "tether_externalnode_side_door",
        "gauge",
        "1 while the attached uplink's kernel stack takes traffic for the VM past OVS (userspace datapath; tether status says why).",
        &one(b(s.external_node.side_door.is_some())),
    );
    let tc_errors = s
        .traffic_controls
        .iter()
        .filter(|t| t.last_error.is_some())
        .count();
    metric(
        &mut o,
        "tether_trafficcontrols",
        "gauge",
        "TrafficControls known, and those whose last sync failed.",
        &[
            (
                "{state=\"all\"}".into(),
                s.traffic_controls.len().to_string(),
            ),
            ("{state=\"failing\"}".into(), tc_errors.to_string()),
        ],
    );
    if let Some(np) = &s.network_policy {
        prometheus_policy(&mut o, np);
    }
    o
}

/// Per-rule counters of NetworkPolicy, labelled by policy (its source), rule and direction.
fn prometheus_policy(o: &mut String, np: &super::policy::NpStatus) {
    let per_rule = |f: &dyn Fn(&super::policy::NpRule) -> u64| -> Vec<(String, String)> {
        np.policies
            .iter()
            .flat_map(|p| {
                p.rules.iter().map(move |r| {
                    (
                        format!(
                            "{{policy=\"{}\",rule=\"{}\",direction=\"{}\",action=\"{}\"}}",
                            label(p.title()),
                            label(&r.name),
                            label(&r.direction),
                            label(&r.action)
                        ),
                        f(r).to_string(),
                    )
                })
            })
            .collect()
    };
    metric(
        o,
        "tether_networkpolicy_rule_packets_total",
        "counter",
        "Packets matched by each NetworkPolicy rule (its metric flows).",
        &per_rule(&|r| r.counters.packets),
    );
    metric(
        o,
        "tether_networkpolicy_rule_bytes_total",
        "counter",
        "Bytes matched by each NetworkPolicy rule.",
        &per_rule(&|r| r.counters.bytes),
    );
    metric(
        o,
        "tether_networkpolicy_rule_sessions_total",
        "counter",
        "Connections each NetworkPolicy rule allowed, or packets it refused.",
        &per_rule(&|r| r.counters.sessions),
    );
    let realized = np.policies.iter().filter(|p| p.realized).count();
    metric(
        o,
        "tether_networkpolicies",
        "gauge",
        "NetworkPolicies applied to this VM, and those realized on the switch.",
        &[
            ("{state=\"all\"}".into(), np.policies.len().to_string()),
            ("{state=\"realized\"}".into(), realized.to_string()),
        ],
    );
    let pi = &np.packet_ins;
    metric(
        o,
        "tether_networkpolicy_packetins_total",
        "counter",
        "Packet-ins from policy flows, by what became of them.",
        &[
            ("{what=\"reject\"}".into(), pi.rejects.to_string()),
            ("{what=\"answered\"}".into(), pi.answered.to_string()),
            (
                "{what=\"rate_limited\"}".into(),
                pi.rate_limited.to_string(),
            ),
            (
                "{what=\"not_answered\"}".into(),
                pi.not_answered.to_string(),
            ),
            ("{what=\"audit_logged\"}".into(), pi.logged.to_string()),
            (
                "{what=\"audit_rate_limited\"}".into(),
                pi.log_rate_limited.to_string(),
            ),
        ],
    );
    metric(
        o,
        "tether_networkpolicy_synced",
        "gauge",
        "1 once all three controlplane watches have had their first bookmark.",
        &[(String::new(), if np.synced { "1" } else { "0" }.into())],
    );
}

/// The one line `systemctl status tether` shows (sd_notify `STATUS=`): readiness, the
/// connections, TrafficControls, flows and the ExternalNode's step.
pub fn summary(s: &Snapshot) -> String {
    let conn = |c: &super::ConnStatus| {
        if c.connected {
            "connected"
        } else {
            "DISCONNECTED"
        }
    };
    format!(
        "{}: {} TrafficControls, {} flows{}, ExternalNode {}; ovsdb {}, openflow {}",
        if s.ready { "ready" } else { "starting" },
        s.traffic_controls.len(),
        s.flows,
        if s.flows_problem.is_some() {
            " (NOT VERIFIED)"
        } else {
            ""
        },
        match (&s.external_node.cut_off, s.external_node.step.as_str()) {
            (Some(why), _) => format!("CUT OFF ({why})"),
            (None, "") => "waiting".to_string(),
            (None, step) if s.external_node.side_door.is_some() => {
                format!("{step} (UPLINK SIDE DOOR OPEN)")
            }
            (None, step) => step.to_string(),
        },
        conn(&s.ovsdb),
        conn(&s.openflow),
    )
}

/// When to send the summary again: when it changed, at most once a second.
#[derive(Debug, Default)]
pub struct StatusLine {
    sent: Option<(String, std::time::Instant)>,
}

impl StatusLine {
    /// The line to send now, if any.
    pub fn update(&mut self, s: &Snapshot, now: std::time::Instant) -> Option<String> {
        let line = summary(s);
        match &self.sent {
            Some((last, _)) if *last == line => None,
            Some((_, at))
                if now.saturating_duration_since(*at) < std::time::Duration::from_secs(1) =>
            {
                None
            }
            _ => {
                self.sent = Some((line.clone(), now));
                Some(line)
            }
        }
    }
}
