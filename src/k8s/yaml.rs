//! YAML documents (kubeconfig, the config file, manifests) as `serde_json::Value`, so that
//! YAML and JSON inputs share one serde path. yaml-rust2 scans and parses (YAML 1.2 core
//! schema, so `yes`/`on` stay strings as Kubernetes expects); this module builds the values
//! from its event stream itself, with bounds, instead of using `YamlLoader`:
//!
//! * `YamlLoader` expands aliases by cloning, so a few hundred bytes of nested aliases (an
//!   "alias bomb") become gigabytes; here every alias counts the nodes it stands for
//!   against [`Limits::max_alias_nodes`] and [`Limits::max_nodes`];
//! * yaml-rust2's `Parser::load` recurses once per nesting level, so a deeply nested file
//!   overflows the stack of the thread reading it; here the parser is driven event by
//!   event (`next_token` keeps its own state stack) and nesting is capped at
//!   [`Limits::max_depth`], which also bounds the recursion of everything that later walks
//!   the value (serde, `Drop`).
//!
//! JSON files get the same bounds through [`parse_json`] (a serde seed that counts as it
//! builds). Every error names the line and column it was found at; callers prefix the
//! file name.

use std::collections::HashMap;

use serde_json::{Map, Number, Value};
use yaml_rust2::Yaml;
use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::TScalarStyle;

/// Bounds on one YAML stream (a whole file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Nested mappings and sequences, the document's own top level counting as 1.
    /// Kubernetes objects need about 10; 64 leaves room for anything real.
    pub max_depth: usize,
    /// Node units in all documents of the stream, an alias counting every unit of what it
    /// refers to. A scalar or a sequence is 1 unit (about 40 bytes of `Value`), a mapping
    /// [`MAPPING_UNITS`] (a map's first allocation is about 650 bytes). 2,000,000 units
    /// are at most about 80 MB of values: 25,000 minimal Pods, or 2,500 Pods as
    /// `kubectl get -o yaml` prints them, fit in one file.
    pub max_nodes: usize,
    /// Of those, units that only aliases stand for (each is a copy). Real files alias a
    /// few labels or a shared spec; 100,000 units are at most about 4 MB.
    pub max_alias_nodes: usize,
}

/// What a mapping counts against [`Limits::max_nodes`], measured: 247,500 one-entry
/// mappings held 178 MB, 999,000 integers 40 MB.
pub const MAPPING_UNITS: usize = 16;

/// The limits every caller uses (documented in the README's limits section).
pub const LIMITS: Limits = Limits {
    max_depth: 64,
    max_nodes: 2_000_000,
    max_alias_nodes: 100_000,
};

/// Parse every document of a YAML stream (`---` separated) within [`LIMITS`]. Empty
/// documents come back as `Value::Null` so that document indexes in error messages match
/// the file.
pub fn parse_documents(text: &str) -> Result<Vec<Value>, String> {
    parse_documents_with(text, LIMITS)
}

/// [`parse_documents`] with explicit limits.
pub fn parse_documents_with(text: &str, limits: Limits) -> Result<Vec<Value>, String> {
    let mut parser = Parser::new_from_str(text);
    let mut b = Builder::new(limits);
    loop {
        let (ev, mark) = parser.next_token().map_err(|e| {
            let m = e.marker();
            format!("line {} column {}: {}", m.line(), m.col() + 1, e.info())
        })?;
        if ev == Event::StreamEnd {
            return Ok(b.docs);
        }
        b.event(ev)
            .map_err(|e| format!("line {} column {}: {e}", mark.line(), mark.col() + 1))?;
    }
}

/// Parse one JSON document within `limits`, as bounded as YAML: serde_json alone would
/// build any number of values (a 64 MiB file of `{"a":1},` is millions of maps, gigabytes)
/// and nests up to 128 deep. The same units, the same depth; errors name the line.
pub fn parse_json(text: &str, limits: Limits) -> Result<Value, String> {
    use serde::de::DeserializeSeed;
    let budget = std::cell::Cell::new(limits.max_nodes);
    let mut de = serde_json::Deserializer::from_str(text);
    let v = Bounded {
        budget: &budget,
        depth: limits.max_depth,
        limits,
    }
    .deserialize(&mut de)
    .map_err(|e| json_error(&e))?;
    de.end().map_err(|e| json_error(&e))?;
    Ok(v)
}

fn json_error(e: &serde_json::Error) -> String {
    // serde_json's message ends with " at line L column C"; lead with it as YAML does.
    let msg = e.to_string();
    let bare = msg
        .rsplit_once(" at line ")
        .map_or(msg.as_str(), |(m, _)| m)
        .to_string();
    format!("line {} column {}: {bare}", e.line(), e.column())
}

/// A `Value` seed that spends `budget` units per node and `depth` levels.
#[derive(Clone, Copy)]
struct Bounded<'a> {
    budget: &'a std::cell::Cell<usize>,
    depth: usize,
    limits: Limits,
}

impl Bounded<'_> {
    fn spend<E: serde::de::Error>(&self, units: usize) -> Result<(), E> {
        match self.budget.get().checked_sub(units) {
            Some(left) => {
                self.budget.set(left);
                Ok(())
            }
            None => Err(E::custom(format!(
                "more than {} node units (a mapping counts {MAPPING_UNITS}): refusing to build it",
                self.limits.max_nodes
            ))),
        }
    }

    fn deeper<E: serde::de::Error>(&self) -> Result<Bounded<'_>, E> {
        if self.depth == 0 {
            return Err(E::custom(format!(
                "nested more than {} levels deep",
                self.limits.max_depth
            )));
        }
        Ok(Bounded {
            depth: self.depth - 1,
            ..*self
        })
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Bounded<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Bounded<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        self.spend(1)?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        self.spend(1)?;
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        self.spend(1)?;
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        self.spend(1)?;
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom(format!("{v} has no JSON form")))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        self.spend(1)?;
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Value, E> {
        self.spend(1)?;
        Ok(Value::String(v))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        self.spend(1)?;
        Ok(Value::Null)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Value, A::Error> {
        self.spend(1)?;
        let inner = self.deeper()?;
        let mut v = Vec::new();
        while let Some(x) = a.next_element_seed(inner)? {
            v.push(x);
        }
        Ok(Value::Array(v))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Value, A::Error> {
        self.spend(MAPPING_UNITS)?;
        let inner = self.deeper()?;
        let mut m = Map::new();
        while let Some(k) = a.next_key::<String>()? {
            self.spend(1)?;
            let v = a.next_value_seed(inner)?;
            m.insert(k, v);
        }
        Ok(Value::Object(m))
    }
}

/// A container being built, with the anchor id it will be registered under (0 = none).
enum Frame {
    Seq(Vec<Value>, usize),
    /// The mapping, the key waiting for its value, the anchor id.
    Map(Map<String, Value>, Option<String>, usize),
}

/// An anchored node: its value, how many nodes it counts, how deep it nests.
struct Anchored {
    value: Value,
    nodes: usize,
    depth: usize,
}

/// Turns parser events into values. `stack` holds the open containers together with the
/// node count at which each began (so a finished container knows its own size) and its
/// nesting depth below.
struct Builder {
    limits: Limits,
    docs: Vec<Value>,
    stack: Vec<(Frame, usize, usize)>,
    anchors: HashMap<usize, Anchored>,
    nodes: usize,
    alias_nodes: usize,
    /// The document being built has its value already (only its end may follow).
    doc_done: bool,
}

impl Builder {
    fn new(limits: Limits) -> Builder {
        Builder {
            limits,
            docs: Vec::new(),
            stack: Vec::new(),
            anchors: HashMap::new(),
            nodes: 0,
            alias_nodes: 0,
            doc_done: false,
        }
    }

    fn count(&mut self, n: usize) -> Result<(), String> {
        self.nodes = self.nodes.saturating_add(n);
        if self.nodes > self.limits.max_nodes {
            return Err(format!(
                "more than {} node units (a mapping counts {MAPPING_UNITS}, aliases what they refer to): refusing to build it",
                self.limits.max_nodes
            ));
        }
        Ok(())
    }

    fn check_depth(&self, below: usize) -> Result<(), String> {
        if self.stack.len() + below > self.limits.max_depth {
            return Err(format!(
                "nested more than {} levels deep",
                self.limits.max_depth
            ));
        }
        Ok(())
    }

    fn event(&mut self, ev: Event) -> Result<(), String> {
        match ev {
            Event::StreamStart | Event::StreamEnd | Event::Nothing => Ok(()),
            Event::DocumentStart => {
                // Anchors are per document (YAML 1.2 §3.2.2.2; yaml-rust2 clears them too).
                self.anchors.clear();
                self.doc_done = false;
                Ok(())
            }
            Event::DocumentEnd => {
                if !self.doc_done {
                    self.docs.push(Value::Null);
                }
                self.stack.clear();
                Ok(())
            }
            Event::SequenceStart(aid, _) => {
                self.check_depth(1)?;
                self.count(1)?;
                let start = self.nodes;
                self.stack.push((Frame::Seq(Vec::new(), aid), start, 1));
                Ok(())
            }
            Event::MappingStart(aid, _) => {
                self.check_depth(1)?;
                self.count(MAPPING_UNITS)?;
                let start = self.nodes;
                self.stack
                    .push((Frame::Map(Map::new(), None, aid), start, 1));
                Ok(())
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let Some((frame, start, depth)) = self.stack.pop() else {
                    return Err("unbalanced end of a collection".into());
                };
                let own = if matches!(frame, Frame::Map(..)) {
                    MAPPING_UNITS
                } else {
                    1
                };
                let nodes = self.nodes - start + own;
                let (value, aid) = match frame {
                    Frame::Seq(v, aid) => (Value::Array(v), aid),
                    Frame::Map(m, None, aid) => (Value::Object(m), aid),
                    Frame::Map(_, Some(k), _) => {
                        return Err(format!("mapping key {k:?} has no value"));
                    }
                };
                self.finish(value, aid, nodes, depth)
            }
            Event::Scalar(text, style, aid, tag) => {
                self.count(1)?;
                let value = scalar(text, style, tag.as_ref())?;
                self.finish(value, aid, 1, 0)
            }
            Event::Alias(id) => {
                let Some(a) = self.anchors.get(&id) else {
                    return Err("alias to an unknown anchor".into());
                };
                let (nodes, depth) = (a.nodes, a.depth);
                self.check_depth(depth)?;
                self.alias_nodes = self.alias_nodes.saturating_add(nodes);
                if self.alias_nodes > self.limits.max_alias_nodes {
                    return Err(format!(
                        "aliases expand to more than {} nodes: refusing to expand",
                        self.limits.max_alias_nodes
                    ));
                }
                self.count(nodes)?;
                let value = self.anchors.get(&id).map(|a| a.value.clone());
                self.finish(value.unwrap_or(Value::Null), 0, nodes, depth)
            }
        }
    }

    /// A node is complete: register its anchor, then hand it to its parent (or make it the
    /// document).
    fn finish(
        &mut self,
        value: Value,
        aid: usize,
        nodes: usize,
        depth: usize,
    ) -> Result<(), String> {
        if aid > 0 {
            self.anchors.insert(
                aid,
                Anchored {
                    value: value.clone(),
                    nodes,
                    depth,
                },
            );
        }
        let Some((parent, _, parent_depth)) = self.stack.last_mut() else {
            if self.doc_done {
                return Err("a second node at the top level of a document".into());
            }
            self.docs.push(value);
            self.doc_done = true;
            return Ok(());
        };
        *parent_depth = (*parent_depth).max(depth + 1);
        match parent {
            Frame::Seq(items, _) => items.push(value),
            Frame::Map(m, pending, _) => match pending.take() {
                Some(k) => {
                    m.insert(k, value);
                }
                None => *pending = Some(key_of(value)?),
            },
        }
        Ok(())
    }
}

/// A mapping key as a JSON object key: scalars only.
fn key_of(v: Value) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        other => Err(format!("unsupported mapping key {other}")),
    }
}

/// A scalar as yaml-rust2's `YamlLoader` resolves it (quoted → string; a `!!bool`,
/// `!!int`, `!!float`, `!!null` tag → that type or an error; plain → the core schema),
/// then as JSON. Non-finite floats have no JSON form and are refused.
fn scalar(text: String, style: TScalarStyle, tag: Option<&Tag>) -> Result<Value, String> {
    let y = if style != TScalarStyle::Plain {
        Yaml::String(text)
    } else if let Some(tag) = tag {
        if tag.handle == "tag:yaml.org,2002:" {
            let bad = || format!("{text:?} is not a valid !!{}", tag.suffix);
            match tag.suffix.as_str() {
                "bool" => match text.as_str() {
                    "true" | "True" | "TRUE" => Yaml::Boolean(true),
                    "false" | "False" | "FALSE" => Yaml::Boolean(false),
                    _ => return Err(bad()),
                },
                "int" => Yaml::Integer(text.parse().map_err(|_| bad())?),
                "float" => match Yaml::from_str(&text) {
                    Yaml::Real(_) | Yaml::Integer(_) => Yaml::Real(text),
                    _ => return Err(bad()),
                },
                "null" => match text.as_str() {
                    "~" | "null" => Yaml::Null,
                    _ => return Err(bad()),
                },
                _ => Yaml::String(text),
            }
        } else {
            Yaml::String(text)
        }
    } else {
        Yaml::from_str(&text)
    };
    Ok(match y {
        Yaml::Null => Value::Null,
        Yaml::Boolean(b) => Value::Bool(b),
        Yaml::Integer(i) => Value::Number(i.into()),
        Yaml::Real(ref s) => {
            let f = y
                .as_f64()
                .ok_or_else(|| format!("bad floating point number {s:?}"))?;
            Value::Number(Number::from_f64(f).ok_or_else(|| format!("{s:?} has no JSON form"))?)
        }
        Yaml::String(s) => Value::String(s),
        // Scalars resolve to none of these.
        Yaml::Array(_) | Yaml::Hash(_) | Yaml::Alias(_) | Yaml::BadValue => {
            return Err("invalid YAML value".to_string());
        }
    })
}

#[cfg(test)]
mod tests;
