//! RFC 7047 §5.1 values: atoms, sets and maps, and their JSON notation both ways.
//!
//! `<atom>` is a JSON string, number or boolean, or `["uuid", "..."]` /
//! `["named-uuid", "..."]`; a set is `["set", [atoms]]` except that a one-element set may be
//! written as the atom itself; a map is `["map", [[k, v], ...]]`. We always encode sets in
//! the `["set", …]` form except for single atoms, as ovsdb-server accepts both.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::OvsdbError;

/// A row UUID as the server writes it (`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Uuid(pub String);

impl Uuid {
    /// Parse and validate the 8-4-4-4-12 hex form.
    pub fn parse(s: &str) -> Result<Uuid, OvsdbError> {
        let ok = s.len() == 36
            && s.char_indices().all(|(i, c)| match i {
                8 | 13 | 18 | 23 => c == '-',
                _ => c.is_ascii_hexdigit(),
            });
        if ok {
            Ok(Uuid(s.to_string()))
        } else {
            Err(OvsdbError::Datum(format!("invalid uuid {s:?}")))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Uuid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Atom {
    Integer(i64),
    Real(f64),
    Boolean(bool),
    String(String),
    Uuid(Uuid),
    /// A row inserted earlier in the same transaction (RFC 7047 §5.2.1 `uuid-name`).
    NamedUuid(String),
}

impl Atom {
    pub fn str(s: impl Into<String>) -> Atom {
        Atom::String(s.into())
    }

    pub fn to_json(&self) -> Value {
        match self {
            Atom::Integer(i) => json!(i),
            Atom::Real(r) => json!(r),
            Atom::Boolean(b) => json!(b),
            Atom::String(s) => json!(s),
            Atom::Uuid(u) => json!(["uuid", u.0]),
            Atom::NamedUuid(n) => json!(["named-uuid", n]),
        }
    }

    pub fn from_json(v: &Value) -> Result<Atom, OvsdbError> {
        match v {
            Value::String(s) => Ok(Atom::String(s.clone())),
            Value::Bool(b) => Ok(Atom::Boolean(*b)),
            Value::Number(n) => match n.as_i64() {
                Some(i) => Ok(Atom::Integer(i)),
                None => n
                    .as_f64()
                    .map(Atom::Real)
                    .ok_or_else(|| OvsdbError::Datum(format!("number out of range: {n}"))),
            },
            Value::Array(a) => match (a.first().and_then(Value::as_str), a.get(1), a.len()) {
                (Some("uuid"), Some(Value::String(u)), 2) => Ok(Atom::Uuid(Uuid::parse(u)?)),
                (Some("named-uuid"), Some(Value::String(n)), 2) => Ok(Atom::NamedUuid(n.clone())),
                _ => Err(OvsdbError::Datum(format!("not an atom: {v}"))),
            },
            _ => Err(OvsdbError::Datum(format!("not an atom: {v}"))),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Atom::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Atom::Integer(i) => Some(*i),
            _ => None,
        }
    }

    pub fn as_uuid(&self) -> Option<&Uuid> {
        match self {
            Atom::Uuid(u) => Some(u),
            _ => None,
        }
    }
}

/// A column value.
#[derive(Clone, Debug, PartialEq)]
pub enum Datum {
    /// A set; a scalar column holds a one-element set, an unset optional column an empty one.
    Set(Vec<Atom>),
    /// A map, in the order the server sent it (ovsdb-server sorts keys).
    Map(Vec<(Atom, Atom)>),
}

impl Datum {
    pub fn atom(a: Atom) -> Datum {
        Datum::Set(vec![a])
    }

    pub fn str(s: impl Into<String>) -> Datum {
        Datum::atom(Atom::String(s.into()))
    }

    pub fn int(i: i64) -> Datum {
        Datum::atom(Atom::Integer(i))
    }

    pub fn uuid(u: &Uuid) -> Datum {
        Datum::atom(Atom::Uuid(u.clone()))
    }

    pub fn named(n: &str) -> Datum {
        Datum::atom(Atom::NamedUuid(n.to_string()))
    }

    pub fn empty_set() -> Datum {
        Datum::Set(Vec::new())
    }

    pub fn set(atoms: Vec<Atom>) -> Datum {
        Datum::Set(atoms)
    }

    /// A string→string map (external_ids, options, other_config).
    pub fn str_map<'a>(m: impl IntoIterator<Item = (&'a String, &'a String)>) -> Datum {
        Datum::Map(
            m.into_iter()
                .map(|(k, v)| (Atom::String(k.clone()), Atom::String(v.clone())))
                .collect(),
        )
    }

    pub fn to_json(&self) -> Value {
        match self {
            Datum::Set(atoms) if atoms.len() == 1 => atoms[0].to_json(),
            Datum::Set(atoms) => {
                json!(["set", atoms.iter().map(Atom::to_json).collect::<Vec<_>>()])
            }
            Datum::Map(pairs) => json!([
                "map",
                pairs
                    .iter()
                    .map(|(k, v)| json!([k.to_json(), v.to_json()]))
                    .collect::<Vec<_>>()
            ]),
        }
    }

    pub fn from_json(v: &Value) -> Result<Datum, OvsdbError> {
        if let Value::Array(a) = v {
            match (a.first().and_then(Value::as_str), a.get(1), a.len()) {
                (Some("set"), Some(Value::Array(items)), 2) => {
                    return items
                        .iter()
                        .map(Atom::from_json)
                        .collect::<Result<_, _>>()
                        .map(Datum::Set);
                }
                (Some("map"), Some(Value::Array(items)), 2) => {
                    let mut pairs = Vec::with_capacity(items.len());
                    for p in items {
                        match p.as_array().map(Vec::as_slice) {
                            Some([k, v]) => pairs.push((Atom::from_json(k)?, Atom::from_json(v)?)),
                            _ => {
                                return Err(OvsdbError::Datum(format!("not a map pair: {p}")));
                            }
                        }
                    }
                    return Ok(Datum::Map(pairs));
                }
                _ => {}
            }
        }
        Atom::from_json(v).map(Datum::atom)
    }

    /// The single atom of a scalar (or set-of-one) column.
    pub fn as_atom(&self) -> Option<&Atom> {
        match self {
            Datum::Set(a) if a.len() == 1 => Some(&a[0]),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        self.as_atom().and_then(Atom::as_str)
    }

    pub fn as_int(&self) -> Option<i64> {
        self.as_atom().and_then(Atom::as_int)
    }

    pub fn as_uuid(&self) -> Option<&Uuid> {
        self.as_atom().and_then(Atom::as_uuid)
    }

    /// The atoms of a set column (empty for a map).
    pub fn atoms(&self) -> &[Atom] {
        match self {
            Datum::Set(a) => a,
            Datum::Map(_) => &[],
        }
    }

    /// A string→string map; non-string pairs are skipped. An empty set reads as an empty map.
    pub fn to_str_map(&self) -> BTreeMap<String, String> {
        match self {
            Datum::Map(pairs) => pairs
                .iter()
                .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.as_str()?.to_string())))
                .collect(),
            Datum::Set(_) => BTreeMap::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const U: &str = "36bb0c43-4b2e-4fbd-9e27-e3bcbd1a85ac";

    #[test]
    fn atoms_encode_exactly() {
        assert_eq!(Atom::Integer(-3).to_json().to_string(), "-3");
        assert_eq!(Atom::Real(1.5).to_json().to_string(), "1.5");
        assert_eq!(Atom::Boolean(true).to_json().to_string(), "true");
        assert_eq!(Atom::str("a\"b").to_json().to_string(), r#""a\"b""#);
        assert_eq!(
            Atom::Uuid(Uuid::parse(U).unwrap()).to_json().to_string(),
            format!(r#"["uuid","{U}"]"#)
        );
        assert_eq!(
            Atom::NamedUuid("rowp1".into()).to_json().to_string(),
            r#"["named-uuid","rowp1"]"#
        );
    }

    #[test]
    fn data_encode_exactly() {
        assert_eq!(Datum::str("x").to_json().to_string(), r#""x""#);
        assert_eq!(Datum::empty_set().to_json().to_string(), r#"["set",[]]"#);
        assert_eq!(
            Datum::set(vec![Atom::str("OpenFlow10"), Atom::str("OpenFlow15")])
                .to_json()
                .to_string(),
            r#"["set",["OpenFlow10","OpenFlow15"]]"#
        );
        let m: BTreeMap<String, String> =
            [("antrea-type".to_string(), "uplink".to_string())].into();
        assert_eq!(
            Datum::str_map(&m).to_json().to_string(),
            r#"["map",[["antrea-type","uplink"]]]"#
        );
    }

    #[test]
    fn decode_what_ovsdb_server_sends() {
        // As captured from ovsdb-server 3.1.
        let v: Value = serde_json::from_str(
            r#"["map",[["attached-mac","02:00:00:00:00:01"],["pod-name","pod-a"]]]"#,
        )
        .unwrap();
        let d = Datum::from_json(&v).unwrap();
        assert_eq!(
            d.to_str_map(),
            BTreeMap::from([
                ("attached-mac".to_string(), "02:00:00:00:00:01".to_string()),
                ("pod-name".to_string(), "pod-a".to_string())
            ])
        );
        assert_eq!(
            Datum::from_json(&serde_json::json!(10)).unwrap().as_int(),
            Some(10)
        );
        assert_eq!(
            Datum::from_json(&serde_json::json!(["set", []])).unwrap(),
            Datum::empty_set()
        );
        let s = Datum::from_json(&serde_json::json!(["set", [["uuid", U], ["uuid", U]]])).unwrap();
        assert_eq!(s.atoms().len(), 2);
        assert_eq!(
            Datum::from_json(&serde_json::json!(["uuid", U]))
                .unwrap()
                .as_uuid(),
            Some(&Uuid(U.to_string()))
        );
    }

    #[test]
    fn round_trip() {
        for d in [
            Datum::int(7),
            Datum::empty_set(),
            Datum::set(vec![Atom::Integer(1), Atom::Integer(2)]),
            Datum::Map(vec![(Atom::str("k"), Atom::Integer(1))]),
            Datum::named("row1"),
        ] {
            assert_eq!(Datum::from_json(&d.to_json()).unwrap(), d);
        }
    }

    #[test]
    fn bad_values_are_errors() {
        for bad in [
            r#"["uuid","not-a-uuid"]"#,
            r#"["map",[["k"]]]"#,
            r#"["set",[{"a":1}]]"#,
            r#"{"a":1}"#,
            r#"null"#,
            r#"["uuid"]"#,
        ] {
            let v: Value = serde_json::from_str(bad).unwrap();
            assert!(Datum::from_json(&v).is_err(), "{bad} accepted");
        }
    }
}
