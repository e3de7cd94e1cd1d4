//! Reading one manifests file: YAML documents or JSON, each an object or a List, into raw
//! objects with their kind and key (`parse_file`); the timestamps filled in for objects
//! that lack them (`rfc3339`).

use super::*;

/// One parsed object: its kind, key and JSON text. Kept as text, not as a `Value`, while
/// the file is unchanged: at 5,000 Pods the text is a few MB where `Value` trees were
/// tens of MB.
#[derive(Debug, Clone, PartialEq)]
pub struct RawObject {
    pub kind: Kind,
    pub key: String,
    /// `spec.nodeName` of a Pod (the field selector's input).
    pub node: Option<String>,
    pub json: String,
}

/// A file's parse: its good objects and the errors of its bad documents.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedFile {
    pub objects: Vec<RawObject>,
    pub errors: Vec<String>,
}

/// Parse one manifests file. `Err` = the file as a whole is unreadable (syntax).
pub fn parse_file(name: &str, text: &str) -> Result<ParsedFile, String> {
    let docs = if name.ends_with(".json") {
        vec![yaml::parse_json(text, yaml::LIMITS).map_err(|e| format!("{name}: {e}"))?]
    } else {
        yaml::parse_documents(text).map_err(|e| format!("{name}: {e}"))?
    };
    let mut out = ParsedFile::default();
    for (i, doc) in docs.into_iter().enumerate() {
        if doc.is_null() {
            continue;
        }
        let is_list = doc
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| k.ends_with("List"))
            && doc.get("items").is_some_and(Value::is_array);
        let items = if is_list {
            match doc {
                Value::Object(mut m) => match m.remove("items") {
                    Some(Value::Array(a)) => a,
                    _ => Vec::new(),
                },
                _ => Vec::new(),
            }
            .into_iter()
            .enumerate()
            .map(|(j, v)| (format!("document {i} item {j}"), v))
            .collect()
        } else {
            vec![(format!("document {i}"), doc)]
        };
        for (at, v) in items {
            match raw_object(v) {
                Ok(o) => out.objects.push(o),
                Err(e) => out.errors.push(format!("{name} {at}: {e}")),
            }
        }
    }
    Ok(out)
}

pub(super) fn raw_object(mut v: Value) -> Result<RawObject, String> {
    let api_version = v.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind_name = v.get("kind").and_then(Value::as_str).unwrap_or("");
    let kind = Kind::from_type(api_version, kind_name).ok_or_else(|| {
        format!("unsupported apiVersion/kind {api_version:?}/{kind_name:?} (Namespace, Pod v1; TrafficControl crd.antrea.io/v1alpha2; ExternalNode crd.antrea.io/v1alpha1)")
    })?;
    let meta = v
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .ok_or("metadata: required")?;
    let name = meta
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or("metadata.name: required")?
        .to_string();
    // As `kubectl apply` does: namespaced kinds default to "default", cluster-scoped
    // kinds have none.
    let namespace = if kind.namespaced() {
        let ns = meta
            .get("namespace")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .unwrap_or("default")
            .to_string();
        meta.insert("namespace".into(), Value::String(ns.clone()));
        ns
    } else {
        meta.remove("namespace");
        String::new()
    };
    let node = (kind == Kind::Pod)
        .then(|| v.pointer("/spec/nodeName").and_then(Value::as_str))
        .flatten()
        .map(str::to_string);
    Ok(RawObject {
        kind,
        key: crate::k8s::types::object_key(&namespace, &name),
        node,
        json: v.to_string(),
    })
}

/// `YYYY-MM-DDTHH:MM:SSZ` (RFC 3339, UTC), as the API server writes creationTimestamp.
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
