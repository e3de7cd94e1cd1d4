//! JSON-RPC 1.0 messages as RFC 7047 §4 uses them: requests, responses, notifications.
//! Pure: `Value` in, `Incoming` out, and request/response encoders.

use serde_json::{Value, json};

use super::OvsdbError;

#[derive(Clone, Debug, PartialEq)]
pub enum Incoming {
    /// A request from the server (only `echo` in practice, §4.1.11).
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// The reply to one of our requests; ids are ours, so always integers.
    Response {
        id: u64,
        result: Value,
        error: Value,
    },
    /// `update` / `update2` / `locked` … (id null).
    Notification { method: String, params: Value },
}

impl Incoming {
    pub fn classify(v: Value) -> Result<Incoming, OvsdbError> {
        let Value::Object(mut o) = v else {
            return Err(OvsdbError::Protocol("message is not a JSON object".into()));
        };
        let id = o.remove("id").unwrap_or(Value::Null);
        if let Some(method) = o.remove("method") {
            let method = method
                .as_str()
                .ok_or_else(|| OvsdbError::Protocol(format!("method is not a string: {method}")))?
                .to_string();
            let params = o.remove("params").unwrap_or(Value::Null);
            return Ok(if id.is_null() {
                Incoming::Notification { method, params }
            } else {
                Incoming::Request { id, method, params }
            });
        }
        if !o.contains_key("result") && !o.contains_key("error") {
            return Err(OvsdbError::Protocol(
                "message has neither method nor result/error".into(),
            ));
        }
        let id = id
            .as_u64()
            .ok_or_else(|| OvsdbError::Protocol(format!("response id is not one of ours: {id}")))?;
        Ok(Incoming::Response {
            id,
            result: o.remove("result").unwrap_or(Value::Null),
            error: o.remove("error").unwrap_or(Value::Null),
        })
    }
}

pub fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"id": id, "method": method, "params": params})
}

/// The reply to the server's `echo`: the same params back (§4.1.11).
pub fn echo_reply(id: Value, params: Value) -> Value {
    json!({"id": id, "result": params, "error": null})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_each_kind() {
        let echo = serde_json::from_str(r#"{"id":"echo","method":"echo","params":[]}"#).unwrap();
        assert_eq!(
            Incoming::classify(echo).unwrap(),
            Incoming::Request {
                id: json!("echo"),
                method: "echo".into(),
                params: json!([])
            }
        );
        let upd =
            serde_json::from_str(r#"{"id":null,"method":"update2","params":[1,{}]}"#).unwrap();
        assert_eq!(
            Incoming::classify(upd).unwrap(),
            Incoming::Notification {
                method: "update2".into(),
                params: json!([1, {}])
            }
        );
        let resp =
            serde_json::from_str(r#"{"id":7,"result":null,"error":"unknown method"}"#).unwrap();
        assert_eq!(
            Incoming::classify(resp).unwrap(),
            Incoming::Response {
                id: 7,
                result: Value::Null,
                error: json!("unknown method")
            }
        );
    }

    #[test]
    fn malformed_messages_are_errors() {
        for bad in [
            r#"[1]"#,
            r#"{"id":1}"#,
            r#"{"id":"x","result":[]}"#,
            r#"{"method":3,"params":[]}"#,
        ] {
            let v = serde_json::from_str(bad).unwrap();
            assert!(Incoming::classify(v).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn encoders_exact() {
        assert_eq!(
            request(3, "transact", json!(["Open_vSwitch"])).to_string(),
            r#"{"id":3,"method":"transact","params":["Open_vSwitch"]}"#
        );
        assert_eq!(
            echo_reply(json!("echo"), json!([])).to_string(),
            r#"{"error":null,"id":"echo","result":[]}"#
        );
    }
}
