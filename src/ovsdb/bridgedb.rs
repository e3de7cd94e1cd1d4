//! [`BridgeDb`], the bridge API controllers use: the operations Antrea's `ovsconfig`
//! performs (docs/antrea-compat.md#ovsdb), each one transaction, and the Bridge row's own
//! ops (create, update, external_ids, `next_cfg`). Pure op builders (`*_ops`) are separate
//! from the calls that send them, so the exact transactions are unit-tested; the Port and
//! Interface rows and their ops are in `port`.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use super::OvsdbError;
use super::conn::Client;
use super::datum::{Atom, Datum, Uuid};
use super::ops::{Condition, Mutation, Op, OpResult, Row};
use super::port::{
    PORT_WAIT, PortData, PortSpec, create_port_ops, delete_ports_op, ofport_of, ofport_ops,
    opt_str, port_data_in,
};

/// The `Open_vSwitch.other_config` key with which ovs-vswitchd starts without forwarding
/// until its controller has put its flows back (Antrea's containerised OVS starts with it
/// set, and Antrea's agent clears it once its flows are in).
pub const FLOW_RESTORE_WAIT: &str = "flow-restore-wait";

/// Remove [`FLOW_RESTORE_WAIT`] from `Open_vSwitch.other_config`; Ok(true) when it was set.
pub fn clear_flow_restore_wait(client: &Client) -> Result<bool, OvsdbError> {
    let r = client.transact(&[Op::Select {
        table: "Open_vSwitch".into(),
        conditions: Vec::new(),
        columns: Some(vec!["other_config".into()]),
    }])?;
    let set = r
        .first()
        .and_then(|r| r.rows.first())
        .and_then(|row| row.get("other_config"))
        .is_some_and(|d| d.to_str_map().contains_key(FLOW_RESTORE_WAIT));
    if !set {
        return Ok(false);
    }
    client.transact(&[Op::Mutate {
        table: "Open_vSwitch".into(),
        conditions: Vec::new(),
        mutations: vec![Mutation::delete(
            "other_config",
            Datum::set(vec![Atom::str(FLOW_RESTORE_WAIT)]),
        )],
    }])?;
    Ok(true)
}

/// Set one key of a map column, leaving the others (delete the key, then insert it: RFC 7047
/// map `insert` never overwrites).
pub fn set_map_key_op(table: &str, row: &Uuid, column: &str, key: &str, value: &str) -> Op {
    Op::Mutate {
        table: table.into(),
        conditions: vec![Condition::uuid(row)],
        mutations: vec![
            Mutation::delete(column, Datum::set(vec![Atom::str(key)])),
            Mutation::insert(column, Datum::Map(vec![(Atom::str(key), Atom::str(value))])),
        ],
    }
}

/// The database's root row, as `ovs-vsctl init` makes it, when there is none: a database
/// replaced by an empty one (ovs-lib does that when a schema conversion fails) has no
/// `Open_vSwitch` row, and a bridge hung off no row would vanish with the transaction.
/// The wait makes it a no-op when someone else (ovs-ctl) inserted one meanwhile.
pub fn init_open_vswitch(client: &Client) -> Result<bool, OvsdbError> {
    let has_row = client.with_replica(|r| r.table("Open_vSwitch").is_some_and(|t| !t.is_empty()));
    if has_row {
        return Ok(false);
    }
    let ops = [
        Op::Wait {
            table: "Open_vSwitch".into(),
            conditions: vec![],
            columns: vec![],
            until: "==",
            rows: vec![],
            timeout_ms: Some(0),
        },
        Op::Insert {
            table: "Open_vSwitch".into(),
            row: Row::new(),
            uuid_name: None,
        },
    ];
    match client.transact(&ops) {
        Ok(_) => {
            log::warn!(
                "ovsdb: the database had no Open_vSwitch row; created one (as ovs-vsctl init)"
            );
            Ok(true)
        }
        Err(OvsdbError::TxnFailed { error, .. }) if error == "timed out" => Ok(false),
        Err(e) => Err(e),
    }
}

/// `Bridge.external_ids` key marking a bridge tether created (`"true"`).
pub const CREATED_KEY: &str = "tether-created";

/// The bridge row to create when absent, as `ovs-vsctl add-br` does (with its local port),
/// plus Antrea's settings: OF1.0 (no-flood) and OF1.5, the datapath type, fail_mode
/// standalone so the VM stays reachable while tether is down, and a pinned datapath-id
/// (docs/antrea-compat.md#bridge-settings) so attaching the uplink cannot change the DPID
/// under the OpenFlow connection.
pub fn create_bridge_ops(name: &str, datapath_type: &str, dpid: &str, fail_mode: &str) -> Vec<Op> {
    vec![
        Op::Insert {
            table: "Interface".into(),
            row: Row::from([
                ("name".into(), Datum::str(name)),
                ("type".into(), Datum::str("internal")),
            ]),
            uuid_name: Some("brif".into()),
        },
        Op::Insert {
            table: "Port".into(),
            row: Row::from([
                ("name".into(), Datum::str(name)),
                ("interfaces".into(), Datum::named("brif")),
            ]),
            uuid_name: Some("brport".into()),
        },
        Op::Insert {
            table: "Bridge".into(),
            row: {
                let mut row = bridge_settings(name, datapath_type, fail_mode);
                row.insert("ports".into(), Datum::named("brport"));
                row.insert(
                    "other_config".into(),
                    Datum::Map(vec![(Atom::str("datapath-id"), Atom::str(dpid))]),
                );
                // So `tether reset --delete-bridge` knows the bridge is tether's to delete.
                row.insert(
                    "external_ids".into(),
                    Datum::Map(vec![(Atom::str(CREATED_KEY), Atom::str("true"))]),
                );
                row
            },
            uuid_name: Some("br".into()),
        },
        Op::Mutate {
            table: "Open_vSwitch".into(),
            conditions: vec![],
            mutations: vec![Mutation::insert("bridges", Datum::named("br"))],
        },
    ]
}

fn bridge_settings(name: &str, datapath_type: &str, fail_mode: &str) -> Row {
    Row::from([
        ("name".into(), Datum::str(name)),
        (
            "protocols".into(),
            Datum::set(vec![Atom::str("OpenFlow10"), Atom::str("OpenFlow15")]),
        ),
        ("datapath_type".into(), Datum::str(datapath_type)),
        ("fail_mode".into(), Datum::str(fail_mode)),
    ])
}

/// For an existing bridge: the same settings but the datapath type (never changed: see
/// [`BridgeDb::ensure`]), and a datapath-id only if none is pinned (map `insert` keeps an
/// existing key).
pub fn update_bridge_ops(uuid: &Uuid, name: &str, dpid: &str, fail_mode: &str) -> Vec<Op> {
    vec![
        Op::Update {
            table: "Bridge".into(),
            conditions: vec![Condition::uuid(uuid)],
            row: {
                // `name` is immutable: an update that names it fails.
                let mut row = bridge_settings(name, "", fail_mode);
                row.remove("name");
                row.remove("datapath_type");
                row
            },
        },
        Op::Mutate {
            table: "Bridge".into(),
            conditions: vec![Condition::uuid(uuid)],
            mutations: vec![Mutation::insert(
                "other_config",
                Datum::Map(vec![(Atom::str("datapath-id"), Atom::str(dpid))]),
            )],
        },
    ]
}

/// The two ops that end a transaction whose effect must be waited for, as `ovs-vsctl`
/// does: bump `next_cfg`, then read it back (the value `cur_cfg` must reach).
pub fn bump_next_cfg_ops() -> [Op; 2] {
    [
        Op::Mutate {
            table: "Open_vSwitch".into(),
            conditions: vec![],
            mutations: vec![Mutation::add("next_cfg", 1)],
        },
        Op::Select {
            table: "Open_vSwitch".into(),
            conditions: vec![],
            columns: Some(vec!["next_cfg".into()]),
        },
    ]
}

/// The `next_cfg` read back by [`bump_next_cfg_ops`] (the transaction's last result).
fn next_cfg_of(r: &[OpResult]) -> Result<i64, OvsdbError> {
    r.last()
        .and_then(|r| r.rows.first())
        .and_then(|row| row.get("next_cfg"))
        .and_then(Datum::as_int)
        .ok_or_else(|| OvsdbError::Protocol("select next_cfg returned nothing".into()))
}

/// `0000` + a random locally administered unicast MAC, as Antrea pins on VMs.
pub fn random_dpid() -> String {
    let mut b = [0u8; 6];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_ok();
    if !ok {
        // Fall back to time and pid: uniqueness per host is all that matters.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let x = t ^ (u128::from(std::process::id()) << 64);
        b.copy_from_slice(&x.to_le_bytes()[..6]);
    }
    b[0] = (b[0] & 0xfe) | 0x02;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("0000{hex}")
}

/// A handle on one bridge through a shared [`Client`]. Its row's UUID is shared by every
/// clone and follows a bridge created again ([`BridgeDb::ensure_again`]).
#[derive(Clone)]
pub struct BridgeDb {
    client: Arc<Client>,
    name: String,
    uuid: Arc<std::sync::Mutex<Uuid>>,
    /// The `fail_mode` this handle keeps the bridge at ([`BridgeDb::ensure_with`]).
    fail_mode: &'static str,
}

/// `fail_mode=standalone`: without flows (tether down and OVS restarted) the bridge is a
/// learning switch and the VM stays reachable.
pub const STANDALONE: &str = "standalone";
/// `fail_mode=secure`: without flows the bridge forwards nothing (NetworkPolicy on: no
/// moment without policy after an ovs-vswitchd restart).
pub const SECURE: &str = "secure";

impl BridgeDb {
    /// Create the bridge or bring an existing one to tether's settings, then wait (≤ 5 s)
    /// until vswitchd has given it a datapath_id.
    pub fn ensure(
        client: Arc<Client>,
        name: &str,
        datapath_type: &str,
    ) -> Result<BridgeDb, OvsdbError> {
        BridgeDb::ensure_with(client, name, datapath_type, STANDALONE)
    }

    /// [`BridgeDb::ensure`] with the bridge's `fail_mode` ([`STANDALONE`] or [`SECURE`]).
    /// Changing an existing bridge's mode makes OVS flush its flows (a bridge without
    /// controllers, `connmgr_set_fail_mode`): done here, at start, before any flow of this
    /// run is sent; a restart with the same mode changes nothing.
    pub fn ensure_with(
        client: Arc<Client>,
        name: &str,
        datapath_type: &str,
        fail_mode: &'static str,
    ) -> Result<BridgeDb, OvsdbError> {
        let existing = select_bridge(&client, name)?;
        let uuid = match existing {
            Some(found) => {
                // Never change an existing bridge's datapath type: ovs-vswitchd would
                // destroy and re-create its ofproto (bridge.c `bridge_reconfigure`: a
                // bridge whose type changed is deleted and added again), re-creating the
                // host port's netdev without its addresses, and the VM is cut off.
                if normalized_datapath(&found.datapath_type) != normalized_datapath(datapath_type) {
                    return Err(OvsdbError::DatapathMismatch {
                        bridge: name.to_string(),
                        existing: normalized_datapath(&found.datapath_type).to_string(),
                        configured: normalized_datapath(datapath_type).to_string(),
                    });
                }
                // Pin the DPID the bridge already has (when none is pinned yet): a new one
                // would make vswitchd drop every OpenFlow connection to the bridge.
                let dpid = found
                    .datapath_id
                    .filter(|d| d.len() == 16 && d.chars().all(|c| c.is_ascii_hexdigit()))
                    .unwrap_or_else(random_dpid);
                client.transact(&update_bridge_ops(&found.uuid, name, &dpid, fail_mode))?;
                found.uuid
            }
            None => {
                init_open_vswitch(&client)?;
                let dpid = random_dpid();
                let r =
                    client.transact(&create_bridge_ops(name, datapath_type, &dpid, fail_mode))?;
                r.get(2)
                    .and_then(|r| r.uuid.clone())
                    .ok_or_else(|| OvsdbError::Protocol("bridge insert returned no uuid".into()))?
            }
        };
        let wait = [Op::Wait {
            table: "Bridge".into(),
            conditions: vec![Condition::uuid(&uuid)],
            columns: vec!["datapath_id".into()],
            until: "!=",
            rows: vec![Row::from([("datapath_id".into(), Datum::empty_set())])],
            timeout_ms: Some(u64::try_from(PORT_WAIT.as_millis()).unwrap_or(u64::MAX)),
        }];
        client.transact(&wait).map_err(|e| match e {
            OvsdbError::TxnFailed { error, .. } if error == "timed out" => OvsdbError::Timeout {
                method: format!("datapath_id of bridge {name} (is ovs-vswitchd running?)"),
                ms: 5000,
            },
            e => e,
        })?;
        Ok(BridgeDb {
            client,
            name: name.to_string(),
            uuid: Arc::new(std::sync::Mutex::new(uuid)),
            fail_mode,
        })
    }

    /// An existing bridge as it is, changing nothing (`tether reset`); `None` if absent.
    pub fn open(client: Arc<Client>, name: &str) -> Result<Option<BridgeDb>, OvsdbError> {
        Ok(select_bridge(&client, name)?.map(|found| BridgeDb {
            client,
            name: name.to_string(),
            uuid: Arc::new(std::sync::Mutex::new(found.uuid)),
            fail_mode: STANDALONE,
        }))
    }

    /// Remove the bridge (its Port and Interface rows go with it: nothing else refers to
    /// them), as `ovs-vsctl del-br` does.
    pub fn delete_bridge(self) -> Result<(), OvsdbError> {
        self.client.transact(&[Op::Mutate {
            table: "Open_vSwitch".into(),
            conditions: vec![],
            mutations: vec![Mutation::delete("bridges", Datum::uuid(&self.uuid()))],
        }])?;
        Ok(())
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The bridge row's UUID (the one this handle created or found last).
    pub fn uuid(&self) -> Uuid {
        self.uuid.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether the replica's bridge of this name is the row this handle works on: not
    /// when someone deleted the bridge (`ovs-vsctl del-br`), or OVS's database came back
    /// without it or with another row of the same name.
    pub fn is_current(&self) -> bool {
        let mine = self.uuid();
        self.client
            .with_replica(|r| r.by_name("Bridge", &self.name).map(|(u, _)| *u == mine))
            .unwrap_or(false)
    }

    /// When the bridge is not current ([`BridgeDb::is_current`]): create it again, or
    /// take the new row of the same name to tether's settings, as at start
    /// ([`BridgeDb::ensure`]), and work on that row from now on. `true` when it did.
    pub fn ensure_again(&self, datapath_type: &str) -> Result<bool, OvsdbError> {
        if self.is_current() {
            return Ok(false);
        }
        let fresh = BridgeDb::ensure_with(
            self.client.clone(),
            &self.name,
            datapath_type,
            self.fail_mode,
        )?;
        *self.uuid.lock().unwrap_or_else(|e| e.into_inner()) = fresh.uuid();
        Ok(true)
    }

    pub fn client(&self) -> &Arc<Client> {
        &self.client
    }

    /// One transaction; the new Port's UUID.
    pub fn create_port(&self, spec: &PortSpec) -> Result<Uuid, OvsdbError> {
        let r = self
            .client
            .transact(&create_port_ops(&self.uuid(), spec, 0))?;
        r.get(1).and_then(|r| r.uuid.clone()).ok_or_else(|| {
            OvsdbError::Protocol(format!("insert of port {} returned no uuid", spec.name))
        })
    }

    /// Many ports in ONE transaction. With `wait_applied`, also bump `next_cfg` and return
    /// only once ovs-vswitchd has applied it (`cur_cfg`), as `ovs-vsctl` does.
    pub fn create_ports(
        &self,
        specs: &[PortSpec],
        wait_applied: bool,
    ) -> Result<Vec<Uuid>, OvsdbError> {
        let mut ops: Vec<Op> = specs
            .iter()
            .enumerate()
            .flat_map(|(i, s)| create_port_ops(&self.uuid(), s, i))
            .collect();
        if wait_applied {
            ops.extend(bump_next_cfg_ops());
        }
        let r = self.client.transact(&ops)?;
        let uuids = (0..specs.len())
            .map(|i| {
                r.get(i * 3 + 1)
                    .and_then(|r| r.uuid.clone())
                    .ok_or_else(|| {
                        OvsdbError::Protocol(format!(
                            "insert of port {} returned no uuid",
                            specs[i].name
                        ))
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if wait_applied {
            // ovs-vswitchd opens every new port in one reconfiguration: its time grows with
            // their number (seconds for thousands on a busy machine), and so does the wait.
            let n = u32::try_from(specs.len()).unwrap_or(u32::MAX);
            let within = Duration::from_secs(30) + Duration::from_millis(10) * n;
            self.wait_cur_cfg_within(next_cfg_of(&r)?, within)?;
        }
        Ok(uuids)
    }

    fn wait_cur_cfg_within(&self, target: i64, within: Duration) -> Result<(), OvsdbError> {
        let applied = self.client.wait_until(within, |r| {
            r.table("Open_vSwitch").is_some_and(|t| {
                t.values().any(|row| {
                    row.get("cur_cfg")
                        .and_then(Datum::as_int)
                        .is_some_and(|c| c >= target)
                })
            })
        });
        if applied {
            Ok(())
        } else {
            Err(OvsdbError::Timeout {
                method: format!("ovs-vswitchd applying cfg {target}"),
                ms: u64::try_from(within.as_millis()).unwrap_or(u64::MAX),
            })
        }
    }

    /// Remove ports in one transaction that also bumps `next_cfg`, then wait (up to
    /// `within`) until ovs-vswitchd has applied it (`cur_cfg`): only then has it taken the
    /// ports out of the datapath. The commit stands when the wait times out (`Timeout`).
    pub fn delete_ports_applied(&self, ports: &[Uuid], within: Duration) -> Result<(), OvsdbError> {
        if ports.is_empty() {
            return Ok(());
        }
        let mut ops = vec![delete_ports_op(&self.uuid(), ports)];
        ops.extend(bump_next_cfg_ops());
        let r = self.client.transact(&ops)?;
        self.wait_cur_cfg_within(next_cfg_of(&r)?, within)
    }

    /// Remove ports (by Port UUID) in one transaction.
    pub fn delete_ports(&self, ports: &[Uuid]) -> Result<(), OvsdbError> {
        if ports.is_empty() {
            return Ok(());
        }
        self.client
            .transact(&[delete_ports_op(&self.uuid(), ports)])?;
        Ok(())
    }

    /// The interface's ofport, waiting up to 5 s for OVS to assign one. ofport -1 is
    /// `PortFailed` with OVS's error text (e.g. a missing device).
    pub fn get_ofport(&self, ifname: &str) -> Result<u32, OvsdbError> {
        let mut v = self.get_ofports(&[ifname.to_string()])?;
        v.pop().ok_or_else(|| OvsdbError::NotFound {
            table: "Interface".into(),
            name: ifname.into(),
        })
    }

    /// [`BridgeDb::get_ofport`] for several interfaces in ONE transaction (a wait and a
    /// select per name), in the order of `ifnames`.
    pub fn get_ofports(&self, ifnames: &[String]) -> Result<Vec<u32>, OvsdbError> {
        let ops: Vec<Op> = ifnames
            .iter()
            .flat_map(|n| ofport_ops(n, PORT_WAIT))
            .collect();
        let r = self.client.transact(&ops).map_err(|e| match e {
            OvsdbError::TxnFailed { op, error, .. } if op % 2 == 0 && error == "timed out" => {
                OvsdbError::Timeout {
                    method: format!(
                        "ofport of {}",
                        ifnames.get(op / 2).map_or("?", String::as_str)
                    ),
                    ms: 5000,
                }
            }
            e => e,
        })?;
        ifnames
            .iter()
            .enumerate()
            .map(|(i, name)| ofport_of(r.get(i * 2 + 1).and_then(|r| r.rows.first()), name))
            .collect()
    }

    /// Replace a Port's whole external_ids map (Antrea's `SetPortExternalIDs`).
    pub fn set_port_external_ids(
        &self,
        port: &str,
        ids: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError> {
        let r = self.client.transact(&[Op::Update {
            table: "Port".into(),
            conditions: vec![Condition::name(port)],
            row: Row::from([("external_ids".into(), Datum::str_map(ids))]),
        }])?;
        if r.first().and_then(|r| r.count) == Some(0) {
            return Err(OvsdbError::NotFound {
                table: "Port".into(),
                name: port.into(),
            });
        }
        Ok(())
    }

    /// Replace an Interface's options.
    pub fn set_interface_options(
        &self,
        name: &str,
        options: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError> {
        let r = self.client.transact(&[Op::Update {
            table: "Interface".into(),
            conditions: vec![Condition::name(name)],
            row: Row::from([("options".into(), Datum::str_map(options))]),
        }])?;
        if r.first().and_then(|r| r.count) == Some(0) {
            return Err(OvsdbError::NotFound {
                table: "Interface".into(),
                name: name.into(),
            });
        }
        Ok(())
    }

    /// A Port's external_ids, read fresh from the server.
    pub fn port_external_ids(&self, port: &str) -> Result<BTreeMap<String, String>, OvsdbError> {
        let r = self.client.transact(&[Op::Select {
            table: "Port".into(),
            conditions: vec![Condition::name(port)],
            columns: Some(vec!["external_ids".into()]),
        }])?;
        r.first()
            .and_then(|r| r.rows.first())
            .map(|row| {
                row.get("external_ids")
                    .map(Datum::to_str_map)
                    .unwrap_or_default()
            })
            .ok_or_else(|| OvsdbError::NotFound {
                table: "Port".into(),
                name: port.into(),
            })
    }

    /// One of the bridge's external_ids (e.g. `roundNum`), read fresh.
    pub fn external_id(&self, key: &str) -> Result<Option<String>, OvsdbError> {
        let r = self.client.transact(&[Op::Select {
            table: "Bridge".into(),
            conditions: vec![Condition::uuid(&self.uuid())],
            columns: Some(vec!["external_ids".into()]),
        }])?;
        Ok(r.first()
            .and_then(|r| r.rows.first())
            .and_then(|row| row.get("external_ids"))
            .and_then(|d| d.to_str_map().remove(key)))
    }

    pub fn set_external_id(&self, key: &str, value: &str) -> Result<(), OvsdbError> {
        self.client.transact(&[set_map_key_op(
            "Bridge",
            &self.uuid(),
            "external_ids",
            key,
            value,
        )])?;
        Ok(())
    }

    /// Set (`Some`) or remove (`None`) one of the bridge's external_ids.
    pub fn set_bridge_external_id(&self, key: &str, value: Option<&str>) -> Result<(), OvsdbError> {
        match value {
            Some(v) => self.set_external_id(key, v),
            None => self.remove_external_id(key),
        }
    }

    /// Remove one of the bridge's external_ids (absent is fine).
    pub fn remove_external_id(&self, key: &str) -> Result<(), OvsdbError> {
        self.client.transact(&[Op::Mutate {
            table: "Bridge".into(),
            conditions: vec![Condition::uuid(&self.uuid())],
            mutations: vec![Mutation::delete(
                "external_ids",
                Datum::set(vec![Atom::str(key)]),
            )],
        }])?;
        Ok(())
    }

    /// The bridge's ports from the replica (Antrea's `GetPortList`).
    pub fn list_ports(&self) -> Vec<PortData> {
        self.client.with_replica(|r| {
            let Some(br) = r.row("Bridge", &self.uuid()) else {
                return Vec::new();
            };
            br.get("ports")
                .map(Datum::atoms)
                .unwrap_or_default()
                .iter()
                .filter_map(Atom::as_uuid)
                .filter_map(|p| port_data_in(r, p))
                .collect()
        })
    }

    /// One port from the replica, by name.
    pub fn port_by_name(&self, name: &str) -> Option<PortData> {
        self.client.with_replica(|r| {
            let (u, _) = r.by_name("Port", name)?;
            port_data_in(r, u)
        })
    }
}

/// OVS's name for a datapath type: an empty `datapath_type` is `system`
/// (`ofproto_normalize_type`).
/// A bridge as the replica shows it, read without changing anything (`tether flows`,
/// `plan`, `reset` look before they touch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BridgeView {
    pub uuid: Uuid,
    pub external_ids: BTreeMap<String, String>,
    pub ports: Vec<PortData>,
}

/// Bridge `name` from a connected client's replica; `None` if there is no such bridge.
pub fn read_bridge(client: &Client, name: &str) -> Option<BridgeView> {
    client.with_replica(|r| {
        let (uuid, br) = r.by_name("Bridge", name)?;
        let ports = br
            .get("ports")
            .map(Datum::atoms)
            .unwrap_or_default()
            .iter()
            .filter_map(Atom::as_uuid)
            .filter_map(|p| port_data_in(r, p))
            .collect();
        Some(BridgeView {
            uuid: uuid.clone(),
            external_ids: br
                .get("external_ids")
                .map(Datum::to_str_map)
                .unwrap_or_default(),
            ports,
        })
    })
}

pub fn normalized_datapath(t: &str) -> &str {
    if t.is_empty() { "system" } else { t }
}

/// What [`BridgeDb::ensure`] needs of an existing bridge row.
struct Existing {
    uuid: Uuid,
    datapath_id: Option<String>,
    datapath_type: String,
}

/// The bridge's UUID, current datapath_id and datapath_type, if it exists.
fn select_bridge(client: &Client, name: &str) -> Result<Option<Existing>, OvsdbError> {
    let r = client.transact(&[Op::Select {
        table: "Bridge".into(),
        conditions: vec![Condition::name(name)],
        columns: Some(vec![
            "_uuid".into(),
            "datapath_id".into(),
            "datapath_type".into(),
        ]),
    }])?;
    Ok(r.first().and_then(|r| r.rows.first()).and_then(|row| {
        Some(Existing {
            uuid: row.get("_uuid").and_then(Datum::as_uuid)?.clone(),
            datapath_id: opt_str(row, "datapath_id"),
            datapath_type: opt_str(row, "datapath_type").unwrap_or_default(),
        })
    }))
}

#[cfg(test)]
mod tests;
