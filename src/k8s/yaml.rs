//! YAML documents (kubeconfig, manifests) as `serde_json::Value`, so that YAML and JSON
//! inputs share one serde path. Owns only the conversion; yaml-rust2 parses (YAML 1.2
//! core schema, so `yes`/`on` stay strings as Kubernetes expects).

use serde_json::{Map, Number, Value};
use yaml_rust2::{Yaml, YamlLoader};

/// Parse every document of a YAML stream (`---` separated). Empty documents come back as
/// `Value::Null` so that document indexes in error messages match the file.
pub fn parse_documents(text: &str) -> Result<Vec<Value>, String> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| e.to_string())?;
    docs.iter()
        .enumerate()
        .map(|(i, d)| to_json(d).map_err(|e| format!("document {i}: {e}")))
        .collect()
}

/// Convert one YAML node. Aliases and non-finite floats have no JSON form and are refused.
pub fn to_json(y: &Yaml) -> Result<Value, String> {
    Ok(match y {
        Yaml::Null => Value::Null,
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Integer(i) => Value::Number((*i).into()),
        Yaml::Real(s) => {
            let f = y
                .as_f64()
                .ok_or_else(|| format!("bad floating point number {s:?}"))?;
            Value::Number(Number::from_f64(f).ok_or_else(|| format!("{s:?} has no JSON form"))?)
        }
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Array(a) => Value::Array(a.iter().map(to_json).collect::<Result<_, _>>()?),
        Yaml::Hash(h) => {
            let mut m = Map::new();
            for (k, v) in h {
                let key = match k {
                    Yaml::String(s) => s.clone(),
                    Yaml::Integer(i) => i.to_string(),
                    Yaml::Boolean(b) => b.to_string(),
                    Yaml::Real(s) => s.clone(),
                    other => return Err(format!("unsupported mapping key {other:?}")),
                };
                m.insert(key, to_json(v)?);
            }
            Value::Object(m)
        }
        Yaml::Alias(_) => return Err("YAML aliases are not supported".to_string()),
        Yaml::BadValue => return Err("invalid YAML value".to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn documents_convert_to_json() {
        let docs = parse_documents(
            "a: 1\nb: [x, 'y', 2.5, true, null]\nc: {d: yes}\n---\n---\nkey: \"0123\"\n",
        )
        .unwrap();
        assert_eq!(
            docs,
            vec![
                json!({"a": 1, "b": ["x", "y", 2.5, true, null], "c": {"d": "yes"}}),
                Value::Null,
                json!({"key": "0123"})
            ]
        );
    }

    #[test]
    fn errors_are_reported() {
        assert!(parse_documents("a: [1, 2\n").is_err());
        // yaml-rust2 resolves anchors itself.
        assert_eq!(
            parse_documents("a: &x 1\nb: *x\n").unwrap(),
            vec![json!({"a": 1, "b": 1})]
        );
    }
}
