//! Field-path validation errors and the checks shared by the CRD types: every message
//! starts with the JSON path of the offending field, e.g.
//! `spec.targetPort.vxlan.vni: 16777216 out of range 0..16777215`. This module owns the
//! error shape and the primitive checks (ranges, IPs, Kubernetes names and label syntax);
//! the per-type rules live next to the types in `types.rs` and `selector.rs`.

use std::fmt;
use std::net::IpAddr;

/// One invalid field: its JSON path and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Every problem found in one object (validation does not stop at the first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    pub errors: Vec<FieldError>,
}

impl ValidationError {
    pub fn one(path: impl Into<String>, message: impl Into<String>) -> ValidationError {
        ValidationError {
            errors: vec![FieldError {
                path: path.into(),
                message: message.into(),
            }],
        }
    }
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ValidationError {}

/// Collects field errors while walking an object.
#[derive(Debug, Default)]
pub struct Errors(pub Vec<FieldError>);

impl Errors {
    pub fn add(&mut self, path: &str, message: impl Into<String>) {
        self.0.push(FieldError {
            path: path.to_string(),
            message: message.into(),
        });
    }

    pub fn into_result<T>(self, value: T) -> Result<T, ValidationError> {
        if self.0.is_empty() {
            Ok(value)
        } else {
            Err(ValidationError { errors: self.0 })
        }
    }

    /// A required field: records "required" when absent.
    pub fn required<'a, T>(&mut self, path: &str, v: &'a Option<T>) -> Option<&'a T> {
        if v.is_none() {
            self.add(path, "required");
        }
        v.as_ref()
    }

    /// An integer that must lie in `lo..=hi` (CRD `minimum`/`maximum`).
    pub fn range(&mut self, path: &str, v: i64, lo: i64, hi: i64) -> Option<i64> {
        if v < lo || v > hi {
            self.add(path, format!("{v} out of range {lo}..{hi}"));
            None
        } else {
            Some(v)
        }
    }

    /// An IPv4 or IPv6 literal (CRD `oneOf: format ipv4|ipv6`).
    pub fn ip(&mut self, path: &str, v: &str) -> Option<IpAddr> {
        match v.parse::<IpAddr>() {
            Ok(ip) => Some(ip),
            Err(_) => {
                self.add(path, format!("{v:?} is not an IPv4 or IPv6 address"));
                None
            }
        }
    }

    /// A string that must be one of the CRD's enum values.
    pub fn one_of<T: Copy>(&mut self, path: &str, v: &str, allowed: &[(&str, T)]) -> Option<T> {
        if let Some((_, t)) = allowed.iter().find(|(name, _)| *name == v) {
            return Some(*t);
        }
        let names: Vec<&str> = allowed.iter().map(|(n, _)| *n).collect();
        self.add(path, format!("{v:?} is not one of {}", names.join(", ")));
        None
    }
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, at most 63 bytes: label values (non-empty)
/// and the name part of label keys (apimachinery `validation.IsQualifiedName`).
fn is_label_token(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// RFC 1123 subdomain (lowercase, dots, ≤ 253 bytes): the optional prefix of a label key.
fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253
        && !s.is_empty()
        && s.split('.').all(|part| {
            let b = part.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

/// A label key: `[prefix/]name` (apimachinery `IsQualifiedName`). Err says why.
pub fn check_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        if !is_dns1123_subdomain(p) {
            return Err(format!(
                "{key:?}: prefix must be a DNS-1123 subdomain (lowercase alphanumerics, '-', '.')"
            ));
        }
    }
    if !is_label_token(name) {
        return Err(format!(
            "{key:?}: name part must be 1..63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
        ));
    }
    Ok(())
}

/// A label value: empty, or a label token (apimachinery `IsValidLabelValue`).
pub fn check_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() || is_label_token(value) {
        Ok(())
    } else {
        Err(format!(
            "{value:?}: must be empty or 1..63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_syntax() {
        assert!(check_label_key("app").is_ok());
        assert!(check_label_key("example.com/app-1").is_ok());
        assert!(check_label_key("Example.com/app").is_err());
        assert!(check_label_key("-app").is_err());
        assert!(check_label_key("").is_err());
        assert!(check_label_key(&"a".repeat(64)).is_err());
        assert!(check_label_value("").is_ok());
        assert!(check_label_value("v1.2_x").is_ok());
        assert!(check_label_value("v1 ").is_err());
    }

    #[test]
    fn range_message_names_path_value_and_bounds() {
        let mut e = Errors::default();
        assert_eq!(
            e.range("spec.targetPort.vxlan.vni", 16777216, 0, 16777215),
            None
        );
        assert_eq!(
            e.into_result(()).unwrap_err().to_string(),
            "spec.targetPort.vxlan.vni: 16777216 out of range 0..16777215"
        );
    }
}
