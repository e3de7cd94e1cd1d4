//! Port and Interface rows: what tether creates (`PortSpec`), what it reads back
//! (`PortData`, from the replica), and the pure ops that create, delete and wait for them.

use std::collections::BTreeMap;
use std::time::Duration;

use super::OvsdbError;
use super::datum::{Atom, Datum, Uuid};
use super::ops::{Condition, Mutation, Op, Row};

/// How long `get_ofport` and `ensure` let OVS take (Antrea's `defaultGetPortTimeout`).
pub const PORT_WAIT: Duration = Duration::from_secs(5);

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortKind {
    /// An existing netdev (`type ""`): a NIC, a veth end, an uplink.
    System,
    /// An OVS internal port, optionally with a fixed MAC.
    Internal { mac: Option<String> },
    /// A tunnel: `vxlan`, `geneve`, `gre`, `erspan` (… any type OVS knows) with its options.
    Tunnel {
        kind: String,
        options: BTreeMap<String, String>,
    },
    /// Any other Interface type, e.g. `dummy` for scale tests.
    Other(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortSpec {
    pub name: String,
    pub kind: PortKind,
    pub external_ids: BTreeMap<String, String>,
    pub ofport_request: Option<u16>,
    pub mtu_request: Option<u32>,
}

impl PortSpec {
    pub fn new(name: &str, kind: PortKind) -> PortSpec {
        PortSpec {
            name: name.to_string(),
            kind,
            external_ids: BTreeMap::new(),
            ofport_request: None,
            mtu_request: None,
        }
    }

    pub fn with_external_ids(mut self, ids: BTreeMap<String, String>) -> PortSpec {
        self.external_ids = ids;
        self
    }
}

/// A port as the replica sees it (Antrea's `OVSPortData`): Port + its first Interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortData {
    pub uuid: Uuid,
    pub name: String,
    pub external_ids: BTreeMap<String, String>,
    pub if_uuid: Option<Uuid>,
    pub if_name: String,
    pub if_type: String,
    /// 0 while OVS has not assigned one yet, -1 when OVS failed to open the interface.
    pub ofport: i64,
    /// The Interface `error` column, e.g. `could not open network device x (No such device)`.
    pub error: Option<String>,
    pub options: BTreeMap<String, String>,
    pub mac: Option<String>,
    pub mac_in_use: Option<String>,
    /// The MTU ovs-vswitchd reports for the netdev (`mtu` column), once it has one.
    pub mtu: Option<i64>,
    /// The netdev's kernel ifindex (`ifindex` column): a new one means a new device, as
    /// after the kernel module was reloaded (`ovs-ctl force-reload-kmod`).
    pub ifindex: Option<i64>,
}

/// Insert Interface, insert Port, add it to the bridge: the three ops of Antrea's
/// `createPort`. `tag` keeps uuid-names unique when several ports share a transaction.
pub fn create_port_ops(bridge: &Uuid, spec: &PortSpec, tag: usize) -> Vec<Op> {
    let iface = format!("iface{tag}");
    let port = format!("port{tag}");
    let mut irow = Row::from([("name".to_string(), Datum::str(&spec.name))]);
    match &spec.kind {
        PortKind::System => {}
        PortKind::Internal { mac } => {
            irow.insert("type".into(), Datum::str("internal"));
            if let Some(m) = mac {
                irow.insert("mac".into(), Datum::str(m));
            }
        }
        PortKind::Tunnel { kind, options } => {
            irow.insert("type".into(), Datum::str(kind));
            if !options.is_empty() {
                irow.insert("options".into(), Datum::str_map(options));
            }
        }
        PortKind::Other(t) => {
            irow.insert("type".into(), Datum::str(t));
        }
    }
    if let Some(o) = spec.ofport_request {
        irow.insert("ofport_request".into(), Datum::int(i64::from(o)));
    }
    if let Some(m) = spec.mtu_request {
        irow.insert("mtu_request".into(), Datum::int(i64::from(m)));
    }
    let mut prow = Row::from([
        ("name".to_string(), Datum::str(&spec.name)),
        ("interfaces".to_string(), Datum::named(&iface)),
    ]);
    if !spec.external_ids.is_empty() {
        prow.insert("external_ids".into(), Datum::str_map(&spec.external_ids));
    }
    vec![
        Op::Insert {
            table: "Interface".into(),
            row: irow,
            uuid_name: Some(iface),
        },
        Op::Insert {
            table: "Port".into(),
            row: prow,
            uuid_name: Some(port.clone()),
        },
        Op::Mutate {
            table: "Bridge".into(),
            conditions: vec![Condition::uuid(bridge)],
            mutations: vec![Mutation::insert("ports", Datum::named(&port))],
        },
    ]
}

/// One mutate removing the ports from the bridge; OVSDB garbage-collects the Port and
/// Interface rows (Antrea's `DeletePorts`). A port already gone is a no-op.
pub fn delete_ports_op(bridge: &Uuid, ports: &[Uuid]) -> Op {
    Op::Mutate {
        table: "Bridge".into(),
        conditions: vec![Condition::uuid(bridge)],
        mutations: vec![Mutation::delete(
            "ports",
            Datum::set(ports.iter().cloned().map(Atom::Uuid).collect()),
        )],
    }
}

/// `wait` until the Interface has an ofport, then `select` it with its error, in one
/// transaction so the value cannot be stale (Antrea's `GetOFPort`).
pub fn ofport_ops(ifname: &str, timeout: Duration) -> Vec<Op> {
    vec![
        Op::Wait {
            table: "Interface".into(),
            conditions: vec![Condition::name(ifname)],
            columns: vec!["ofport".into()],
            until: "!=",
            rows: vec![Row::from([("ofport".into(), Datum::empty_set())])],
            timeout_ms: Some(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
        },
        Op::Select {
            table: "Interface".into(),
            conditions: vec![Condition::name(ifname)],
            columns: Some(vec!["ofport".into(), "error".into()]),
        },
    ]
}

/// The ofport of an Interface row selected by [`ofport_ops`]; its `error` when OVS could
/// not assign one.
pub(super) fn ofport_of(row: Option<&Row>, ifname: &str) -> Result<u32, OvsdbError> {
    let row = row.ok_or_else(|| OvsdbError::NotFound {
        table: "Interface".into(),
        name: ifname.into(),
    })?;
    let ofport = row.get("ofport").and_then(Datum::as_int).unwrap_or(0);
    if ofport > 0 {
        return u32::try_from(ofport)
            .map_err(|_| OvsdbError::Datum(format!("ofport {ofport} of {ifname}")));
    }
    Err(OvsdbError::PortFailed {
        name: ifname.into(),
        error: row
            .get("error")
            .and_then(Datum::as_str)
            .unwrap_or("no error reported")
            .to_string(),
    })
}

pub(super) fn port_data_in(r: &super::Replica, port: &Uuid) -> Option<PortData> {
    let p = r.row("Port", port)?;
    let if_uuid = p
        .get("interfaces")
        .and_then(|d| d.atoms().first())
        .and_then(Atom::as_uuid)
        .cloned();
    let iface = if_uuid.as_ref().and_then(|u| r.row("Interface", u));
    let icol = |c: &str| iface.and_then(|i| opt_str(i, c));
    Some(PortData {
        uuid: port.clone(),
        name: opt_str(p, "name").unwrap_or_default(),
        external_ids: p
            .get("external_ids")
            .map(Datum::to_str_map)
            .unwrap_or_default(),
        if_uuid,
        if_name: icol("name").unwrap_or_default(),
        if_type: icol("type").unwrap_or_default(),
        ofport: iface
            .and_then(|i| i.get("ofport"))
            .and_then(Datum::as_int)
            .unwrap_or(0),
        error: icol("error"),
        options: iface
            .and_then(|i| i.get("options"))
            .map(Datum::to_str_map)
            .unwrap_or_default(),
        mac: icol("mac"),
        mac_in_use: icol("mac_in_use"),
        mtu: iface.and_then(|i| i.get("mtu")).and_then(Datum::as_int),
        ifindex: iface.and_then(|i| i.get("ifindex")).and_then(Datum::as_int),
    })
}

/// A string column's value, if it holds one.
pub(super) fn opt_str(row: &Row, col: &str) -> Option<String> {
    row.get(col).and_then(Datum::as_str).map(str::to_string)
}
