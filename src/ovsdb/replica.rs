//! The local replica of the tables tether reads, kept by `monitor_cond` (RFC 7047 §4.1.5 as
//! extended by OVS: `update2` with `initial`/`insert`/`modify`/`delete`) or, when the server
//! lacks it, plain `monitor` (`update` with `old`/`new`). Pure: JSON updates in, rows out.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::OvsdbError;
use super::datum::{Atom, Datum, Uuid};
use super::ops::{Row, parse_row};

/// The tables and columns we monitor (docs/design.md#the-ovs-data-contract: ports, their
/// ofports and external_ids, the bridge's external_ids for the flow round, next_cfg/cur_cfg
/// to know when vswitchd has applied a change).
pub const MONITORED: &[(&str, &[&str])] = &[
    ("Open_vSwitch", &["bridges", "next_cfg", "cur_cfg"]),
    (
        "Bridge",
        &[
            "name",
            "ports",
            "external_ids",
            "other_config",
            "datapath_type",
            "datapath_id",
            "protocols",
            "fail_mode",
        ],
    ),
    ("Port", &["name", "interfaces", "external_ids"]),
    (
        "Interface",
        &[
            "name",
            "type",
            "ofport",
            "error",
            "mac",
            "mac_in_use",
            "mtu",
            "ifindex",
            "options",
            "external_ids",
        ],
    ),
];

/// Params for `monitor_cond` (`cond == true`) or `monitor` with monitor id `id`.
pub fn monitor_params(db: &str, id: &Value, cond: bool) -> Value {
    let mut reqs = Map::new();
    for (table, cols) in MONITORED {
        let r = if cond {
            json!([{"columns": cols}])
        } else {
            json!({"columns": cols})
        };
        reqs.insert((*table).to_string(), r);
    }
    json!([db, id, reqs])
}

/// Monitored columns holding at most one value (max = 1: scalars and optional columns such
/// as `ofport` or `mac_in_use`, vswitch.ovsschema): an update2 `modify` carries their new
/// value, as ovsdb-server diffs only composite types (`ovsdb_datum_diff` in
/// lib/ovsdb-data.c: `!ovsdb_type_is_composite` → the new datum). Every other monitored
/// column is a set or map with max > 1, and `modify` carries a diff. (Seen for real:
/// `mac_in_use` going from a random MAC to the requested one arrives as just the new one.)
const SINGLE: &[(&str, &str)] = &[
    ("Open_vSwitch", "next_cfg"),
    ("Open_vSwitch", "cur_cfg"),
    ("Bridge", "name"),
    ("Bridge", "datapath_type"),
    ("Bridge", "datapath_id"),
    ("Bridge", "fail_mode"),
    ("Port", "name"),
    ("Interface", "name"),
    ("Interface", "type"),
    ("Interface", "ofport"),
    ("Interface", "error"),
    ("Interface", "mac"),
    ("Interface", "mac_in_use"),
    ("Interface", "mtu"),
    ("Interface", "ifindex"),
];

pub type Table = BTreeMap<Uuid, Row>;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Replica {
    pub tables: BTreeMap<String, Table>,
}

impl Replica {
    pub fn table(&self, name: &str) -> Option<&Table> {
        self.tables.get(name)
    }

    /// Rows of `table` whose `name` column equals `name`.
    pub fn by_name(&self, table: &str, name: &str) -> Option<(&Uuid, &Row)> {
        self.tables
            .get(table)?
            .iter()
            .find(|(_, r)| r.get("name").and_then(Datum::as_str) == Some(name))
    }

    pub fn row(&self, table: &str, uuid: &Uuid) -> Option<&Row> {
        self.tables.get(table)?.get(uuid)
    }

    /// Apply a `monitor` reply or `update` notification (`<table-updates>`, §4.1.6).
    pub fn apply_update(&mut self, updates: &Value) -> Result<(), OvsdbError> {
        for (table, rows) in as_object(updates, "table-updates")? {
            let t = self.tables.entry(table.clone()).or_default();
            for (uuid, change) in as_object(rows, "table-update")? {
                let uuid = Uuid::parse(uuid)?;
                match change.get("new") {
                    Some(new) if !new.is_null() => {
                        t.insert(uuid, parse_row(new)?);
                    }
                    _ => {
                        t.remove(&uuid);
                    }
                }
            }
        }
        Ok(())
    }

    /// Apply a `monitor_cond` reply or `update2` notification (`<table-updates2>`).
    pub fn apply_update2(&mut self, updates: &Value) -> Result<(), OvsdbError> {
        for (table, rows) in as_object(updates, "table-updates2")? {
            let t = self.tables.entry(table.clone()).or_default();
            for (uuid, change) in as_object(rows, "table-update2")? {
                let uuid = Uuid::parse(uuid)?;
                let change = as_object(change, "row-update2")?;
                if let Some(row) = change.get("initial").or_else(|| change.get("insert")) {
                    t.insert(uuid, parse_row(row)?);
                } else if let Some(diff) = change.get("modify") {
                    let row = t.entry(uuid).or_default();
                    for (col, d) in as_object(diff, "modify")? {
                        let d = Datum::from_json(d)?;
                        let scalar = SINGLE.contains(&(table.as_str(), col.as_str()));
                        let merged = apply_diff(row.get(col), d, scalar);
                        row.insert(col.clone(), merged);
                    }
                } else if change.contains_key("delete") {
                    t.remove(&uuid);
                } else {
                    return Err(OvsdbError::Protocol(format!(
                        "row-update2 for {table} {uuid} has no known key"
                    )));
                }
            }
        }
        Ok(())
    }
}

fn as_object<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>, OvsdbError> {
    v.as_object()
        .ok_or_else(|| OvsdbError::Protocol(format!("{what} is not an object: {v}")))
}

/// `modify` semantics (OVS `ovsdb-server(7)`, update2): a column of at most one value is
/// replaced (see [`SINGLE`]); for a set the diff is the symmetric difference; for a map, a
/// key with the same value is removed, a different value replaces, a new key is added.
fn apply_diff(old: Option<&Datum>, diff: Datum, scalar: bool) -> Datum {
    if scalar {
        return diff;
    }
    match (old, diff) {
        (Some(Datum::Map(old)), Datum::Map(diff)) => {
            let mut m: Vec<(Atom, Atom)> = old.clone();
            for (k, v) in diff {
                match m.iter().position(|(ok, _)| *ok == k) {
                    Some(i) if m[i].1 == v => {
                        m.remove(i);
                    }
                    Some(i) => m[i].1 = v,
                    None => m.push((k, v)),
                }
            }
            Datum::Map(m)
        }
        (Some(Datum::Set(old)), Datum::Set(diff)) => {
            let mut s = old.clone();
            for a in diff {
                match s.iter().position(|x| *x == a) {
                    Some(i) => {
                        s.remove(i);
                    }
                    None => s.push(a),
                }
            }
            Datum::Set(s)
        }
        (_, diff) => diff,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const U1: &str = "11111111-1111-1111-1111-111111111111";

    #[test]
    fn monitor_cond_params_exact() {
        let p = monitor_params("Open_vSwitch", &json!(1), true);
        assert_eq!(p[0], json!("Open_vSwitch"));
        assert_eq!(
            p[2]["Port"],
            json!([{"columns": ["name", "interfaces", "external_ids"]}])
        );
        let p = monitor_params("Open_vSwitch", &json!(1), false);
        assert_eq!(
            p[2]["Port"],
            json!({"columns": ["name", "interfaces", "external_ids"]})
        );
    }

    #[test]
    fn update2_initial_modify_delete() {
        let mut r = Replica::default();
        r.apply_update2(&json!({"Interface": {U1: {"initial": {
            "name": "p1", "ofport": ["set", []],
            "external_ids": ["map", [["a", "1"], ["b", "2"]]]}}}}))
            .unwrap();
        let u = Uuid(U1.into());
        assert_eq!(
            r.row("Interface", &u).unwrap()["ofport"],
            Datum::empty_set()
        );
        // ofport assigned (set-of-0 → set-of-1 is a symmetric difference), a changed, b removed, c added.
        r.apply_update2(&json!({"Interface": {U1: {"modify": {
            "ofport": 5,
            "external_ids": ["map", [["a", "9"], ["b", "2"], ["c", "3"]]]}}}}))
            .unwrap();
        let row = r.row("Interface", &u).unwrap();
        assert_eq!(row["ofport"].as_int(), Some(5));
        assert_eq!(
            row["external_ids"].to_str_map(),
            BTreeMap::from([("a".into(), "9".into()), ("c".into(), "3".into())])
        );
        // An optional column (max 1) changing value: the new value, not a diff (as a real
        // ovsdb-server sends mac_in_use), and back to unset.
        r.apply_update2(&json!({"Interface": {U1: {"modify": {"ofport": 6}}}}))
            .unwrap();
        assert_eq!(r.row("Interface", &u).unwrap()["ofport"].as_int(), Some(6));
        r.apply_update2(&json!({"Interface": {U1: {"modify": {
            "mac_in_use": "46:08:c9:71:d9:db"}}}}))
            .unwrap();
        r.apply_update2(&json!({"Interface": {U1: {"modify": {
            "mac_in_use": "02:00:00:00:01:10"}}}}))
            .unwrap();
        assert_eq!(
            r.row("Interface", &u).unwrap()["mac_in_use"].as_str(),
            Some("02:00:00:00:01:10")
        );
        r.apply_update2(&json!({"Interface": {U1: {"modify": {"ofport": ["set", []]}}}}))
            .unwrap();
        assert_eq!(r.row("Interface", &u).unwrap()["ofport"].as_int(), None);
        // A scalar is replaced.
        r.apply_update2(&json!({"Interface": {U1: {"modify": {"type": "internal"}}}}))
            .unwrap();
        assert_eq!(
            r.row("Interface", &u).unwrap()["type"].as_str(),
            Some("internal")
        );
        assert_eq!(r.by_name("Interface", "p1").map(|(id, _)| id), Some(&u));
        r.apply_update2(&json!({"Interface": {U1: {"delete": null}}}))
            .unwrap();
        assert!(r.row("Interface", &u).is_none());
    }

    #[test]
    fn set_diff_symmetric() {
        let a = |s: &str| Atom::Uuid(Uuid(s.into()));
        let old = Datum::set(vec![a(U1), a("22222222-2222-2222-2222-222222222222")]);
        let diff = Datum::set(vec![
            a("22222222-2222-2222-2222-222222222222"),
            a("33333333-3333-3333-3333-333333333333"),
        ]);
        assert_eq!(
            apply_diff(Some(&old), diff, false),
            Datum::set(vec![a(U1), a("33333333-3333-3333-3333-333333333333")])
        );
    }

    #[test]
    fn one_element_set_grows() {
        // Bridge.ports with one port gaining a second: a diff of one, not a replacement.
        let a = |s: &str| Atom::Uuid(Uuid(s.into()));
        let old = Datum::set(vec![a(U1)]);
        let diff = Datum::set(vec![a("22222222-2222-2222-2222-222222222222")]);
        assert_eq!(
            apply_diff(Some(&old), diff, false),
            Datum::set(vec![a(U1), a("22222222-2222-2222-2222-222222222222")])
        );
    }

    #[test]
    fn update_old_new() {
        let mut r = Replica::default();
        r.apply_update(&json!({"Port": {U1: {"new": {"name": "p1"}}}}))
            .unwrap();
        assert!(r.by_name("Port", "p1").is_some());
        r.apply_update(&json!({"Port": {U1: {"old": {"name": "p1"}}}}))
            .unwrap();
        assert!(r.by_name("Port", "p1").is_none());
    }

    #[test]
    fn malformed_updates_are_errors() {
        let mut r = Replica::default();
        assert!(r.apply_update2(&json!([])).is_err());
        assert!(
            r.apply_update2(&json!({"Port": {"bad-uuid": {"insert": {}}}}))
                .is_err()
        );
        assert!(
            r.apply_update2(&json!({"Port": {U1: {"weird": {}}}}))
                .is_err()
        );
        assert!(r.apply_update(&json!({"Port": {U1: {"new": 3}}})).is_err());
    }
}
