//! Reading a parsed JSON tree field by field, so that every decode error names the path of
//! the field that failed (`rules[0].services[1].port: expected an integer or a string,
//! found a boolean`). The decoders of this module's kinds are written on these helpers
//! rather than on serde derives: serde_json reports a line and column, which says nothing
//! on a one-line watch event.
//!
//! Owns the path-carrying error, the type checks and the element budget. It does not know
//! any controlplane type.
//!
//! Conventions, those of Go's encoding/json reading the same objects (Antrea's agent): a
//! `null` field is an absent one, unknown fields are ignored, absent strings are empty and
//! absent lists are empty. Depth is bounded by serde_json's own recursion limit (128) when
//! the line is parsed; length by [`Budget`].

use std::fmt;

use serde_json::{Map, Value};

/// A JSON object.
pub(super) type Obj = Map<String, Value>;

/// The most list elements one object may decode into. An element of a few bytes of JSON
/// (`{}`) decodes into a struct of a hundred, so without a bound one watch line (up to
/// `k8s::http`'s 64 MiB) could cost gigabytes. 2²¹ is 200 times the 10,000-member
/// AddressGroup of the benchmarks (a member and its IP count two).
pub const MAX_ELEMENTS: usize = 1 << 21;

/// A decode failure: what is wrong, and where (segments innermost first, added while the
/// error travels out of the nested decoders).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PathError {
    rev: Vec<Seg>,
    msg: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

impl PathError {
    pub(super) fn new(msg: impl Into<String>) -> PathError {
        PathError {
            rev: Vec::new(),
            msg: msg.into(),
        }
    }

    /// The error happened inside field `k`.
    pub(super) fn key(mut self, k: &str) -> PathError {
        self.rev.push(Seg::Key(k.to_string()));
        self
    }

    /// The error happened inside element `i`.
    pub(super) fn index(mut self, i: usize) -> PathError {
        self.rev.push(Seg::Index(i));
        self
    }

    /// `rules[0].services[1].port`; empty for the object itself.
    pub(super) fn path(&self) -> String {
        let mut s = String::new();
        for seg in self.rev.iter().rev() {
            match seg {
                Seg::Key(k) => {
                    if !s.is_empty() {
                        s.push('.');
                    }
                    s.push_str(k);
                }
                Seg::Index(i) => {
                    s.push('[');
                    s.push_str(&i.to_string());
                    s.push(']');
                }
            }
        }
        s
    }
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path();
        if path.is_empty() {
            f.write_str(&self.msg)
        } else {
            write!(f, "{path}: {}", self.msg)
        }
    }
}

/// Counts the list elements decoded so far in one object (see [`MAX_ELEMENTS`]).
#[derive(Debug)]
pub(super) struct Budget {
    left: usize,
}

impl Budget {
    pub(super) fn new() -> Budget {
        Budget { left: MAX_ELEMENTS }
    }

    fn take(&mut self, n: usize) -> Result<(), PathError> {
        self.left = self.left.checked_sub(n).ok_or_else(|| {
            PathError::new(format!(
                "{n} elements exceed what is left of the object's {MAX_ELEMENTS}"
            ))
        })?;
        Ok(())
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// "expected X, found Y" for `v`.
pub(super) fn expected(what: &str, v: &Value) -> PathError {
    PathError::new(format!("expected {what}, found {}", type_name(v)))
}

/// Field `k`, `None` when absent or `null`.
pub(super) fn field<'a>(m: &'a Obj, k: &str) -> Option<&'a Value> {
    m.get(k).filter(|v| !v.is_null())
}

pub(super) fn as_object(v: &Value) -> Result<&Obj, PathError> {
    v.as_object().ok_or_else(|| expected("an object", v))
}

/// An optional object field.
pub(super) fn object<'a>(m: &'a Obj, k: &str) -> Result<Option<&'a Obj>, PathError> {
    field(m, k)
        .map(|v| as_object(v).map_err(|e| e.key(k)))
        .transpose()
}

/// An optional string field, borrowed.
pub(super) fn str_opt<'a>(m: &'a Obj, k: &str) -> Result<Option<&'a str>, PathError> {
    match field(m, k) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(expected("a string", v).key(k)),
    }
}

/// A string field; absent is empty.
pub(super) fn string(m: &Obj, k: &str) -> Result<String, PathError> {
    Ok(str_opt(m, k)?.unwrap_or_default().to_string())
}

/// A string field that must be present and not empty.
pub(super) fn required(m: &Obj, k: &str) -> Result<String, PathError> {
    match str_opt(m, k)? {
        Some(s) if !s.is_empty() => Ok(s.to_string()),
        _ => Err(PathError::new("required").key(k)),
    }
}

/// An optional integer field within `lo..=hi` (a Go `int32`/`*int32` and its meaning).
pub(super) fn int(m: &Obj, k: &str, lo: i64, hi: i64) -> Result<Option<i64>, PathError> {
    field(m, k)
        .map(|v| int_value(v, lo, hi).map_err(|e| e.key(k)))
        .transpose()
}

/// An integer within `lo..=hi`. `1.0` is refused, as Go refuses it for an integer field.
pub(super) fn int_value(v: &Value, lo: i64, hi: i64) -> Result<i64, PathError> {
    let n = v.as_i64().ok_or_else(|| expected("an integer", v))?;
    if n < lo || n > hi {
        return Err(PathError::new(format!("{n} out of range {lo}..={hi}")));
    }
    Ok(n)
}

/// An optional integer field within `lo..=hi` (inside `T`'s range), as a `T`.
pub(super) fn int_as<T: TryFrom<i64>>(
    m: &Obj,
    k: &str,
    lo: i64,
    hi: i64,
) -> Result<Option<T>, PathError> {
    int(m, k, lo, hi)?
        .map(|n| fit(n).map_err(|e| e.key(k)))
        .transpose()
}

/// `n` as a narrower integer; callers have range-checked it, so this only fails when a
/// caller's range is wider than `T`.
pub(super) fn fit<T: TryFrom<i64>>(n: i64) -> Result<T, PathError> {
    T::try_from(n).map_err(|_| PathError::new(format!("{n} out of range")))
}

/// An optional number field (a Go `*float64`).
pub(super) fn float(m: &Obj, k: &str) -> Result<Option<f64>, PathError> {
    match field(m, k) {
        None => Ok(None),
        Some(v) => v
            .as_f64()
            .map(Some)
            .ok_or_else(|| expected("a number", v).key(k)),
    }
}

/// A boolean field; absent is false.
pub(super) fn boolean(m: &Obj, k: &str) -> Result<bool, PathError> {
    match field(m, k) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(expected("a boolean", v).key(k)),
    }
}

/// A list field decoded element by element; absent is empty. Each element's error is
/// placed at `k[i]`; the elements are charged to `budget` before any is decoded.
pub(super) fn list<T>(
    m: &Obj,
    k: &str,
    budget: &mut Budget,
    mut each: impl FnMut(&Value, &mut Budget) -> Result<T, PathError>,
) -> Result<Vec<T>, PathError> {
    let items = match field(m, k) {
        None => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(v) => return Err(expected("an array", v).key(k)),
    };
    budget.take(items.len()).map_err(|e| e.key(k))?;
    let mut out = Vec::with_capacity(items.len());
    for (i, v) in items.iter().enumerate() {
        out.push(each(v, budget).map_err(|e| e.index(i).key(k))?);
    }
    Ok(out)
}

/// A list of strings (group names, FQDNs); absent is empty.
pub(super) fn strings(m: &Obj, k: &str, budget: &mut Budget) -> Result<Vec<String>, PathError> {
    list(m, k, budget, |v, _| match v {
        Value::String(s) => Ok(s.clone()),
        v => Err(expected("a string", v)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Obj {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn errors_name_the_path() {
        let m = obj(json!({"rules": [{}, {"services": [{"port": true}]}]}));
        let e = list(&m, "rules", &mut Budget::new(), |v, b| {
            list(as_object(v)?, "services", b, |s, _| {
                int(as_object(s)?, "port", 0, 65535)
            })
        })
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "rules[1].services[0].port: expected an integer, found a boolean"
        );
        assert_eq!(PathError::new("x").to_string(), "x");
    }

    #[test]
    fn null_is_absent_and_types_are_checked() {
        let m = obj(json!({"n": null, "s": "a", "i": 7, "f": 1.5, "b": true, "o": {}}));
        assert_eq!(str_opt(&m, "n").unwrap(), None);
        assert_eq!(string(&m, "n").unwrap(), "");
        assert_eq!(required(&m, "s").unwrap(), "a");
        assert_eq!(required(&m, "n").unwrap_err().to_string(), "n: required");
        assert_eq!(int(&m, "i", 0, 10).unwrap(), Some(7));
        assert_eq!(
            int(&m, "i", 0, 5).unwrap_err().to_string(),
            "i: 7 out of range 0..=5"
        );
        assert_eq!(
            int(&m, "f", 0, 5).unwrap_err().to_string(),
            "f: expected an integer, found a number"
        );
        assert_eq!(float(&m, "i").unwrap(), Some(7.0));
        assert_eq!(float(&m, "f").unwrap(), Some(1.5));
        assert!(boolean(&m, "b").unwrap());
        assert!(!boolean(&m, "n").unwrap());
        assert_eq!(
            boolean(&m, "s").unwrap_err().to_string(),
            "s: expected a boolean, found a string"
        );
        assert!(object(&m, "o").unwrap().is_some());
        assert_eq!(
            object(&m, "s").unwrap_err().to_string(),
            "s: expected an object, found a string"
        );
        assert_eq!(
            strings(&m, "n", &mut Budget::new()).unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn the_budget_bounds_all_lists_of_an_object() {
        let m = obj(json!({"a": [1, 2, 3]}));
        let mut b = Budget { left: 5 };
        list(&m, "a", &mut b, |_, _| Ok(())).unwrap();
        let e = list(&m, "a", &mut b, |_, _| Ok(())).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("a: 3 elements exceed what is left of the object's {MAX_ELEMENTS}")
        );
    }
}
