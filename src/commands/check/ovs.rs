//! `tether check`: the OVS sockets, the bridge, and what OVS says about the ports tether
//! would take.

use super::*;

/// The OVS sockets and the bridge; the OVSDB client when it answers.
pub(super) fn check_ovs(cfg: &Config, out: &mut Vec<Finding>) -> Option<Arc<Client>> {
    // Long on purpose: The OVS checks in the order `tether check` prints them; each uses
    // what the one before found (socket, then client, then bridge).
    let db = cfg.ovsdb_socket();
    let fix_db = format!(
        "start Open vSwitch (systemctl start openvswitch-switch) or point --ovs-rundir at the directory holding db.sock (now {})",
        cfg.ovs_rundir.display()
    );
    if !db.exists() {
        out.push(bad(
            Level::Fail,
            "ovsdb",
            format!("{} does not exist", db.display()),
            fix_db,
        ));
        return None;
    }
    let client = Arc::new(Client::start(
        Remote::Unix(db.clone()),
        ClientOptions::default(),
    ));
    if let Err(e) = client.wait_connected(Duration::from_secs(3)) {
        out.push(bad(
            Level::Fail,
            "ovsdb",
            format!("{}: {e}", db.display()),
            fix_db,
        ));
        return None;
    }
    out.push(ok("ovsdb", format!("{} answers", db.display())));
    let rows = client.transact(&[Op::Select {
        table: "Bridge".into(),
        conditions: vec![Condition::name(&cfg.bridge)],
        columns: Some(vec!["protocols".into(), "datapath_type".into()]),
    }]);
    let row = match rows {
        Ok(r) => r.into_iter().next().and_then(|r| r.rows.into_iter().next()),
        Err(e) => {
            out.push(bad(
                Level::Fail,
                "bridge",
                format!("cannot read the Bridge table: {e}"),
                "check that ovsdb-server serves the Open_vSwitch database",
            ));
            return Some(client);
        }
    };
    let Some(row) = row else {
        out.push(ok(
            "bridge",
            format!(
                "{} does not exist yet; tether run creates it (datapath_type={})",
                cfg.bridge, cfg.datapath_type
            ),
        ));
        return Some(client);
    };
    let protocols: Vec<String> = row
        .get("protocols")
        .map(Datum::atoms)
        .unwrap_or_default()
        .iter()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    let dp = row
        .get("datapath_type")
        .and_then(Datum::as_str)
        .unwrap_or("")
        .to_string();
    let missing: Vec<&str> = ["OpenFlow10", "OpenFlow15"]
        .into_iter()
        .filter(|p| !protocols.iter().any(|q| q == p))
        .collect();
    if missing.is_empty() {
        out.push(ok(
            "bridge",
            format!("{} protocols={}", cfg.bridge, protocols.join(",")),
        ));
    } else {
        out.push(bad(
            Level::Warn,
            "bridge",
            format!(
                "{} lacks {} (has {:?}); tether run enables them",
                cfg.bridge,
                missing.join(","),
                protocols
            ),
            format!(
                "ovs-vsctl set bridge {} protocols=OpenFlow10,OpenFlow15 (or let tether run do it)",
                cfg.bridge
            ),
        ));
    }
    out.extend(preflight::datapath(&cfg.bridge, &dp, &cfg.datapath_type));
    let mgmt = cfg.openflow_socket();
    if !missing.is_empty() {
        return Some(client);
    }
    match crate::openflow::OfFlows::start(crate::openflow::OfFlowsConfig::new(
        mgmt.clone(),
        &cfg.bridge,
        0,
    )) {
        Ok(of) => match of.wait_connected(Duration::from_secs(3)) {
            Ok(()) => out.push(ok(
                "openflow",
                format!("{} speaks OpenFlow 1.0 and 1.5", mgmt.display()),
            )),
            Err(e) => out.push(bad(
                Level::Fail,
                "openflow",
                format!("{}: {e}", mgmt.display()),
                "check that ovs-vswitchd is running (systemctl status openvswitch-switch)",
            )),
        },
        Err(e) => out.push(bad(
            Level::Fail,
            "openflow",
            format!("{}: {e}", mgmt.display()),
            "check that ovs-vswitchd is running",
        )),
    }
    Some(client)
}
