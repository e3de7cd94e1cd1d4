//! Label selectors with apimachinery's semantics (`metav1.LabelSelectorAsSelector` and
//! `labels.Requirement.Matches`). Owns parsing the wire form into a validated
//! [`LabelSelector`] and matching labels; what a *missing* selector means is the caller's
//! rule (for TrafficControl see `types::AppliedTo::selects`).
//!
//! - An empty selector (`{}`) matches everything.
//! - `matchLabels` and every `matchExpressions` entry are ANDed.
//! - `In`/`NotIn` need at least one value; `Exists`/`DoesNotExist` take none.
//! - `NotIn` and `DoesNotExist` match objects that lack the key.
//! - An unknown operator, a bad key or value is an error for the object that carries the
//!   selector, never a silent "matches nothing".

use std::collections::BTreeMap;

use serde::Deserialize;

use super::validate::{Errors, ValidationError, check_label_key, check_label_value};

/// Labels of an object, sorted so that output and comparisons are deterministic.
pub type Labels = BTreeMap<String, String>;

/// The wire form (`metav1.LabelSelector`); unknown fields ignored.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelectorWire {
    #[serde(default)]
    pub match_labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub match_expressions: Option<Vec<RequirementWire>>,
}

/// One `matchExpressions` entry on the wire.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct RequirementWire {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub operator: String,
    #[serde(default)]
    pub values: Option<Vec<String>>,
}

/// A selector operator (apimachinery `metav1.LabelSelectorOperator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// One validated requirement: `key operator values`. `matchLabels` entries become `In`
/// with one value, as in apimachinery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    pub values: Vec<String>,
}

impl Requirement {
    pub fn matches(&self, labels: &Labels) -> bool {
        let v = labels.get(&self.key);
        match self.operator {
            Operator::In => v.is_some_and(|v| self.values.iter().any(|x| x == v)),
            Operator::NotIn => v.is_none_or(|v| !self.values.iter().any(|x| x == v)),
            Operator::Exists => v.is_some(),
            Operator::DoesNotExist => v.is_none(),
        }
    }

    /// True when only objects carrying `key` can match (used by the store's index).
    pub fn needs_key(&self) -> bool {
        matches!(self.operator, Operator::In | Operator::Exists)
    }
}

/// A validated label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    pub requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Validate a wire selector found at `path` (e.g. `spec.appliedTo.podSelector`).
    pub fn from_wire(w: &LabelSelectorWire, path: &str) -> Result<LabelSelector, ValidationError> {
        let mut errs = Errors::default();
        let mut requirements = Vec::new();
        for (k, v) in w.match_labels.iter().flatten() {
            let p = format!("{path}.matchLabels");
            if let Err(e) = check_label_key(k) {
                errs.add(&p, format!("invalid key {e}"));
            }
            if let Err(e) = check_label_value(v) {
                errs.add(&format!("{p}.{k}"), format!("invalid value {e}"));
            }
            requirements.push(Requirement {
                key: k.clone(),
                operator: Operator::In,
                values: vec![v.clone()],
            });
        }
        for (i, r) in w.match_expressions.iter().flatten().enumerate() {
            let p = format!("{path}.matchExpressions[{i}]");
            if let Err(e) = check_label_key(&r.key) {
                errs.add(&format!("{p}.key"), format!("invalid key {e}"));
            }
            let op = errs.one_of(
                &format!("{p}.operator"),
                &r.operator,
                &[
                    ("In", Operator::In),
                    ("NotIn", Operator::NotIn),
                    ("Exists", Operator::Exists),
                    ("DoesNotExist", Operator::DoesNotExist),
                ],
            );
            let values = r.values.clone().unwrap_or_default();
            match op {
                Some(Operator::In | Operator::NotIn) if values.is_empty() => errs.add(
                    &format!("{p}.values"),
                    "must be non-empty for operator In or NotIn",
                ),
                Some(Operator::Exists | Operator::DoesNotExist) if !values.is_empty() => errs.add(
                    &format!("{p}.values"),
                    "must be empty for operator Exists or DoesNotExist",
                ),
                _ => {}
            }
            for (j, v) in values.iter().enumerate() {
                if let Err(e) = check_label_value(v) {
                    errs.add(&format!("{p}.values[{j}]"), format!("invalid value {e}"));
                }
            }
            if let Some(operator) = op {
                requirements.push(Requirement {
                    key: r.key.clone(),
                    operator,
                    values,
                });
            }
        }
        errs.into_result(LabelSelector { requirements })
    }

    /// Every requirement holds (vacuously true for the empty selector).
    pub fn matches(&self, labels: &Labels) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// apimachinery's `LabelSelectorAsSelector` on an optional selector: a nil selector
    /// selects nothing, an empty one everything.
    pub fn matches_opt(selector: Option<&LabelSelector>, labels: &Labels) -> bool {
        selector.is_some_and(|s| s.matches(labels))
    }

    /// Label keys an object must carry to match: empty when the selector can match objects
    /// without any particular key (the empty selector, or only `NotIn`/`DoesNotExist`).
    pub fn required_keys(&self) -> impl Iterator<Item = &str> {
        self.requirements
            .iter()
            .filter(|r| r.needs_key())
            .map(|r| r.key.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(json: &str) -> Result<LabelSelector, ValidationError> {
        let w: LabelSelectorWire = serde_json::from_str(json).unwrap();
        LabelSelector::from_wire(&w, "spec.appliedTo.podSelector")
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn empty_selector_matches_everything() {
        let s = sel("{}").unwrap();
        assert!(s.matches(&labels(&[])));
        assert!(s.matches(&labels(&[("app", "web")])));
        assert_eq!(s.required_keys().count(), 0);
    }

    #[test]
    fn match_labels_and_expressions_are_anded() {
        let s = sel(r#"{"matchLabels":{"app":"web"},
            "matchExpressions":[{"key":"tier","operator":"In","values":["a","b"]},
                                {"key":"env","operator":"NotIn","values":["prod"]},
                                {"key":"team","operator":"Exists"},
                                {"key":"legacy","operator":"DoesNotExist"}]}"#)
        .unwrap();
        let base = [("app", "web"), ("tier", "b"), ("team", "x")];
        assert!(s.matches(&labels(&base)));
        // NotIn matches a missing key and a different value, not the listed value.
        assert!(s.matches(&labels(&[
            ("app", "web"),
            ("tier", "a"),
            ("team", ""),
            ("env", "dev")
        ])));
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("tier", "a"),
            ("team", "x"),
            ("env", "prod")
        ])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "c"), ("team", "x")])));
        assert!(!s.matches(&labels(&[("app", "db"), ("tier", "a"), ("team", "x")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "a")])));
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("tier", "a"),
            ("team", "x"),
            ("legacy", "1")
        ])));
        let mut keys: Vec<&str> = s.required_keys().collect();
        keys.sort();
        assert_eq!(keys, ["app", "team", "tier"]);
    }

    #[test]
    fn nil_selects_nothing_empty_selects_everything() {
        let l = labels(&[("app", "web")]);
        assert!(!LabelSelector::matches_opt(None, &l));
        assert!(LabelSelector::matches_opt(Some(&sel("{}").unwrap()), &l));
        assert!(LabelSelector::matches_opt(
            Some(&sel("{}").unwrap()),
            &labels(&[])
        ));
    }

    #[test]
    fn only_negative_requirements_need_no_key() {
        let s = sel(r#"{"matchExpressions":[{"key":"env","operator":"NotIn","values":["prod"]}]}"#)
            .unwrap();
        assert_eq!(s.required_keys().count(), 0);
        assert!(s.matches(&labels(&[])));
    }

    #[test]
    fn invalid_selectors_are_errors_with_paths() {
        let e = sel(r#"{"matchExpressions":[{"key":"a","operator":"Equals","values":["x"]}]}"#)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "spec.appliedTo.podSelector.matchExpressions[0].operator: \"Equals\" is not one of In, NotIn, Exists, DoesNotExist"
        );
        let e =
            sel(r#"{"matchExpressions":[{"key":"a","operator":"In","values":[]}]}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "spec.appliedTo.podSelector.matchExpressions[0].values: must be non-empty for operator In or NotIn"
        );
        let e = sel(r#"{"matchExpressions":[{"key":"a","operator":"Exists","values":["x"]}]}"#)
            .unwrap_err();
        assert!(
            e.to_string().contains("must be empty for operator Exists"),
            "{e}"
        );
        let e = sel(r#"{"matchLabels":{"app":"bad value"}}"#).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("spec.appliedTo.podSelector.matchLabels.app: invalid value"),
            "{e}"
        );
        let e = sel(r#"{"matchLabels":{"Bad/key":"v"}}"#).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("spec.appliedTo.podSelector.matchLabels: invalid key"),
            "{e}"
        );
    }
}
