//! The bridge's OVSDB lock (RFC 7047 §4.1.8): `tether run` holds `tether_<bridge>` for as
//! long as its session lasts, and `tether reset` takes it before touching anything, so
//! the two never run on one bridge at once — whatever the state socket says (busy, slow,
//! another path, another version). ovsdb-server releases a lock when its session ends,
//! so a killed daemon holds nothing.

use serde_json::{Value, json};

use super::{Client, OvsdbError};

/// The lock's name for `bridge`: an `<id>` as ovsdb-server wants one
/// (`[a-zA-Z_][a-zA-Z0-9_]*`, `ovsdb_parser_is_id`), every other byte of the name an `_`.
pub fn lock_id(bridge: &str) -> String {
    let name: String = bridge
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("tether_{name}")
}

/// Ask for `id` on this session: true when it is ours now. When another session holds it,
/// the request stays queued at the server until that one lets go (its "locked" notice is
/// not waited for: the caller decides what a refusal means).
pub fn try_lock(client: &Client, id: &str) -> Result<bool, OvsdbError> {
    let r = client.request("lock", json!([id]))?;
    locked(&r).ok_or_else(|| OvsdbError::Protocol(format!("lock {id}: unexpected reply {r}")))
}

/// The `locked` member of a `lock` reply.
fn locked(reply: &Value) -> Option<bool> {
    reply.get("locked")?.as_bool()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_replies() {
        assert_eq!(lock_id("br-int"), "tether_br_int");
        assert_eq!(lock_id("br.0"), "tether_br_0");
        assert_eq!(locked(&json!({"locked": true})), Some(true));
        assert_eq!(locked(&json!({"locked": false})), Some(false));
        assert_eq!(locked(&json!({})), None);
        assert_eq!(locked(&json!({"locked": "yes"})), None);
    }
}
