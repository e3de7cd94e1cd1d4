//! Transaction operations (RFC 7047 §5.2) and their results: a pure encoder for
//! `insert`, `select`, `update`, `mutate`, `delete` and `wait`, and a decoder for the
//! result array that turns the first failure into `TxnFailed { op, error, details }`.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::OvsdbError;
use super::datum::{Datum, Uuid};

pub type Row = BTreeMap<String, Datum>;

/// `[column, function, value]` (§5.1 `<condition>`).
#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    pub column: String,
    pub function: &'static str,
    pub value: Datum,
}

impl Condition {
    pub fn eq(column: &str, value: Datum) -> Condition {
        Condition {
            column: column.to_string(),
            function: "==",
            value,
        }
    }

    pub fn uuid(u: &Uuid) -> Condition {
        Condition::eq("_uuid", Datum::uuid(u))
    }

    pub fn name(name: &str) -> Condition {
        Condition::eq("name", Datum::str(name))
    }

    fn to_json(&self) -> Value {
        json!([self.column, self.function, self.value.to_json()])
    }
}

/// `[column, mutator, value]` (§5.1 `<mutation>`); mutators `+= -= *= /= %= insert delete`.
#[derive(Clone, Debug, PartialEq)]
pub struct Mutation {
    pub column: String,
    pub mutator: &'static str,
    pub value: Datum,
}

impl Mutation {
    pub fn insert(column: &str, value: Datum) -> Mutation {
        Mutation {
            column: column.to_string(),
            mutator: "insert",
            value,
        }
    }

    pub fn delete(column: &str, value: Datum) -> Mutation {
        Mutation {
            column: column.to_string(),
            mutator: "delete",
            value,
        }
    }

    pub fn add(column: &str, n: i64) -> Mutation {
        Mutation {
            column: column.to_string(),
            mutator: "+=",
            value: Datum::int(n),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Insert {
        table: String,
        row: Row,
        uuid_name: Option<String>,
    },
    Select {
        table: String,
        conditions: Vec<Condition>,
        columns: Option<Vec<String>>,
    },
    Update {
        table: String,
        conditions: Vec<Condition>,
        row: Row,
    },
    Mutate {
        table: String,
        conditions: Vec<Condition>,
        mutations: Vec<Mutation>,
    },
    Delete {
        table: String,
        conditions: Vec<Condition>,
    },
    /// Blocks until `until` (`==` or `!=`) holds between the selected `columns` and `rows`,
    /// or fails with `timed out` after `timeout_ms` (§5.2.6).
    Wait {
        table: String,
        conditions: Vec<Condition>,
        columns: Vec<String>,
        until: &'static str,
        rows: Vec<Row>,
        timeout_ms: Option<u64>,
    },
}

fn conditions_json(c: &[Condition]) -> Value {
    Value::Array(c.iter().map(Condition::to_json).collect())
}

fn row_json(row: &Row) -> Value {
    Value::Object(
        row.iter()
            .map(|(k, v)| (k.clone(), v.to_json()))
            .collect::<Map<_, _>>(),
    )
}

impl Op {
    pub fn to_json(&self) -> Value {
        match self {
            Op::Insert {
                table,
                row,
                uuid_name,
            } => {
                let mut o = json!({"op": "insert", "table": table, "row": row_json(row)});
                if let Some(n) = uuid_name {
                    o["uuid-name"] = json!(n);
                }
                o
            }
            Op::Select {
                table,
                conditions,
                columns,
            } => {
                let mut o =
                    json!({"op": "select", "table": table, "where": conditions_json(conditions)});
                if let Some(c) = columns {
                    o["columns"] = json!(c);
                }
                o
            }
            Op::Update {
                table,
                conditions,
                row,
            } => json!({"op": "update", "table": table, "where": conditions_json(conditions),
                        "row": row_json(row)}),
            Op::Mutate {
                table,
                conditions,
                mutations,
            } => json!({"op": "mutate", "table": table, "where": conditions_json(conditions),
                        "mutations": mutations.iter()
                            .map(|m| json!([m.column, m.mutator, m.value.to_json()]))
                            .collect::<Vec<_>>()}),
            Op::Delete { table, conditions } => {
                json!({"op": "delete", "table": table, "where": conditions_json(conditions)})
            }
            Op::Wait {
                table,
                conditions,
                columns,
                until,
                rows,
                timeout_ms,
            } => {
                let mut o = json!({"op": "wait", "table": table, "where": conditions_json(conditions),
                    "columns": columns, "until": until,
                    "rows": rows.iter().map(row_json).collect::<Vec<_>>()});
                if let Some(t) = timeout_ms {
                    o["timeout"] = json!(t);
                }
                o
            }
        }
    }
}

/// `["Open_vSwitch", op...]`, the params of a `transact` request.
pub fn transact_params(db: &str, ops: &[Op]) -> Value {
    let mut v = vec![json!(db)];
    v.extend(ops.iter().map(Op::to_json));
    Value::Array(v)
}

/// The result of one successful op.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpResult {
    /// `insert`: the new row's UUID.
    pub uuid: Option<Uuid>,
    /// `select`: the rows.
    pub rows: Vec<Row>,
    /// `update`, `mutate`, `delete`: rows affected.
    pub count: Option<u64>,
}

impl OpResult {
    pub fn from_json(v: &Value) -> Result<OpResult, OvsdbError> {
        let mut r = OpResult::default();
        if let Some(u) = v.get("uuid") {
            r.uuid = Datum::from_json(u)?.as_uuid().cloned();
        }
        if let Some(Value::Array(rows)) = v.get("rows") {
            for row in rows {
                r.rows.push(parse_row(row)?);
            }
        }
        r.count = v.get("count").and_then(Value::as_u64);
        Ok(r)
    }
}

pub fn parse_row(v: &Value) -> Result<Row, OvsdbError> {
    let obj = v
        .as_object()
        .ok_or_else(|| OvsdbError::Datum(format!("row is not an object: {v}")))?;
    obj.iter()
        .map(|(k, v)| Ok((k.clone(), Datum::from_json(v)?)))
        .collect()
}

/// Decode a `transact` result array for `n_ops` ops (§4.1.3): one result per op; a failed
/// op has `error`/`details` and the ones after it are `null`; a commit failure adds one
/// more element with an `error`.
pub fn parse_results(result: &Value, n_ops: usize) -> Result<Vec<OpResult>, OvsdbError> {
    let arr = result.as_array().ok_or_else(|| {
        OvsdbError::Protocol(format!("transact result is not an array: {result}"))
    })?;
    for (i, r) in arr.iter().enumerate() {
        if let Some(err) = r.get("error").filter(|e| !e.is_null()) {
            return Err(OvsdbError::TxnFailed {
                op: i,
                error: err.as_str().unwrap_or_default().to_string(),
                details: r
                    .get("details")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            });
        }
    }
    if arr.len() < n_ops {
        return Err(OvsdbError::Protocol(format!(
            "transact returned {} results for {n_ops} ops",
            arr.len()
        )));
    }
    arr[..n_ops].iter().map(OpResult::from_json).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_port_transaction_exact_json() {
        // The shape of docs/antrea-compat.md#example-transactions (EN host internal port).
        let br = Uuid::parse("0c4ac2c5-16b1-4e2c-9dd6-8e5a10ad0b1c").unwrap();
        let ops = vec![
            Op::Insert {
                table: "Interface".into(),
                row: Row::from([
                    ("name".into(), Datum::str("ens192")),
                    ("type".into(), Datum::str("internal")),
                    ("mac".into(), Datum::str("00:50:56:aa:bb:cc")),
                ]),
                uuid_name: Some("rowif1".into()),
            },
            Op::Insert {
                table: "Port".into(),
                row: Row::from([
                    ("name".into(), Datum::str("ens192")),
                    ("interfaces".into(), Datum::named("rowif1")),
                ]),
                uuid_name: Some("rowp1".into()),
            },
            Op::Mutate {
                table: "Bridge".into(),
                conditions: vec![Condition::uuid(&br)],
                mutations: vec![Mutation::insert("ports", Datum::named("rowp1"))],
            },
        ];
        assert_eq!(
            transact_params("Open_vSwitch", &ops).to_string(),
            concat!(
                r#"["Open_vSwitch","#,
                r#"{"op":"insert","row":{"mac":"00:50:56:aa:bb:cc","name":"ens192","type":"internal"},"table":"Interface","uuid-name":"rowif1"},"#,
                r#"{"op":"insert","row":{"interfaces":["named-uuid","rowif1"],"name":"ens192"},"table":"Port","uuid-name":"rowp1"},"#,
                r#"{"mutations":[["ports","insert",["named-uuid","rowp1"]]],"op":"mutate","table":"Bridge","where":[["_uuid","==",["uuid","0c4ac2c5-16b1-4e2c-9dd6-8e5a10ad0b1c"]]]}]"#
            )
        );
    }

    #[test]
    fn wait_select_exact_json() {
        let ops = [
            Op::Wait {
                table: "Interface".into(),
                conditions: vec![Condition::name("p1")],
                columns: vec!["ofport".into()],
                until: "!=",
                rows: vec![Row::from([("ofport".into(), Datum::empty_set())])],
                timeout_ms: Some(5000),
            },
            Op::Select {
                table: "Interface".into(),
                conditions: vec![Condition::name("p1")],
                columns: Some(vec!["ofport".into(), "error".into()]),
            },
        ];
        assert_eq!(
            ops[0].to_json().to_string(),
            r#"{"columns":["ofport"],"op":"wait","rows":[{"ofport":["set",[]]}],"table":"Interface","timeout":5000,"until":"!=","where":[["name","==","p1"]]}"#
        );
        assert_eq!(
            ops[1].to_json().to_string(),
            r#"{"columns":["ofport","error"],"op":"select","table":"Interface","where":[["name","==","p1"]]}"#
        );
    }

    #[test]
    fn results_decode() {
        let v: Value = serde_json::from_str(
            r#"[{"uuid":["uuid","36bb0c43-4b2e-4fbd-9e27-e3bcbd1a85ac"]},{"rows":[{"ofport":3,"error":["set",[]]}]},{"count":1}]"#,
        )
        .unwrap();
        let r = parse_results(&v, 3).unwrap();
        assert_eq!(
            r[0].uuid.as_ref().map(Uuid::as_str),
            Some("36bb0c43-4b2e-4fbd-9e27-e3bcbd1a85ac")
        );
        assert_eq!(r[1].rows[0]["ofport"].as_int(), Some(3));
        assert_eq!(r[2].count, Some(1));
    }

    #[test]
    fn failures_name_the_op() {
        // As ovsdb-server reports a constraint violation on the second op.
        let v: Value = serde_json::from_str(
            r#"[{"uuid":["uuid","36bb0c43-4b2e-4fbd-9e27-e3bcbd1a85ac"]},{"error":"constraint violation","details":"Transaction causes multiple rows in \"Port\" table to have identical values (\"p1\") for index on column \"name\"."},null]"#,
        )
        .unwrap();
        assert_eq!(
            parse_results(&v, 3),
            Err(OvsdbError::TxnFailed {
                op: 1,
                error: "constraint violation".into(),
                details: "Transaction causes multiple rows in \"Port\" table to have identical values (\"p1\") for index on column \"name\".".into(),
            })
        );
        // A commit failure is an extra element after the ops.
        let v: Value = serde_json::from_str(
            r#"[{"count":1},{"error":"referential integrity violation","details":"x"}]"#,
        )
        .unwrap();
        assert!(matches!(
            parse_results(&v, 1),
            Err(OvsdbError::TxnFailed { op: 1, .. })
        ));
        assert!(matches!(
            parse_results(&serde_json::json!({}), 1),
            Err(OvsdbError::Protocol(_))
        ));
        assert!(matches!(
            parse_results(&serde_json::json!([]), 1),
            Err(OvsdbError::Protocol(_))
        ));
    }
}
