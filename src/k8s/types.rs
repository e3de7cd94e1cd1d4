//! Object metadata, Pod, Namespace, and the [`Resource`] trait every watched kind
//! implements (API path, wire type; its store's index is `store::Indexed`). Only the fields tether uses are modelled;
//! unknown fields are ignored. The Antrea CRDs live in `crd.rs`.

use std::fmt;

use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::error::KubeError;
use super::selector::Labels;

/// `metav1.ObjectMeta`, the fields we use.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(default)]
    pub name: String,
    /// Empty for cluster-scoped objects.
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub resource_version: String,
    #[serde(default)]
    pub generation: Option<i64>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub labels: Labels,
    /// RFC 3339 in UTC with second precision as the API server writes it
    /// (`2026-11-30T09:00:00Z`), so string order is time order.
    #[serde(default)]
    pub creation_timestamp: Option<String>,
}

impl ObjectMeta {
    /// The store and work-queue key: `namespace/name`, or `name` when cluster-scoped
    /// (client-go's `MetaNamespaceKeyFunc`).
    pub fn key(&self) -> String {
        object_key(&self.namespace, &self.name)
    }
}

/// `namespace/name`, or `name` for cluster-scoped objects.
pub fn object_key(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}/{name}")
    }
}

/// `"labels": null` is legal JSON from some writers; treat it as no labels.
fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// The kinds tether watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Pod,
    Namespace,
    TrafficControl,
    ExternalNode,
}

impl Kind {
    /// Every kind tether watches, the one list of them: in this order the daemon starts
    /// their watches, the manifests source applies them, `tether check` tries their RBAC
    /// and `tether status` shows them.
    pub const ALL: [Kind; 4] = [
        Kind::Pod,
        Kind::Namespace,
        Kind::TrafficControl,
        Kind::ExternalNode,
    ];

    /// `apiVersion` as written in manifests.
    pub fn api_version(self) -> &'static str {
        match self {
            Kind::Pod | Kind::Namespace => "v1",
            Kind::TrafficControl => "crd.antrea.io/v1alpha2",
            Kind::ExternalNode => "crd.antrea.io/v1alpha1",
        }
    }

    /// `kind` as written in manifests.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Pod => "Pod",
            Kind::Namespace => "Namespace",
            Kind::TrafficControl => "TrafficControl",
            Kind::ExternalNode => "ExternalNode",
        }
    }

    /// The plural resource name in URLs.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Pod => "pods",
            Kind::Namespace => "namespaces",
            Kind::TrafficControl => "trafficcontrols",
            Kind::ExternalNode => "externalnodes",
        }
    }

    pub fn namespaced(self) -> bool {
        matches!(self, Kind::Pod | Kind::ExternalNode)
    }

    /// Collection path, cluster-wide (`namespace` None) or in one namespace.
    pub fn collection_path(self, namespace: Option<&str>) -> String {
        let group = match self.api_version() {
            "v1" => "/api/v1".to_string(),
            gv => format!("/apis/{gv}"),
        };
        match namespace {
            Some(ns) if self.namespaced() => {
                format!("{group}/namespaces/{ns}/{}", self.plural())
            }
            _ => format!("{group}/{}", self.plural()),
        }
    }

    /// Find the kind of a manifest object from its `apiVersion` and `kind`.
    pub fn from_type(api_version: &str, kind: &str) -> Option<Kind> {
        Kind::ALL
            .into_iter()
            .find(|k| k.api_version() == api_version && k.name() == kind)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A kind tether watches: how to decode it (its store's index: `store::Indexed`).
pub trait Resource: Clone + fmt::Debug + PartialEq + Send + Sync + 'static {
    const KIND: Kind;
    /// The serde form read from JSON; converted (and validated) by [`Resource::from_wire`].
    type Wire: DeserializeOwned;

    fn from_wire(w: Self::Wire) -> Self;
    fn meta(&self) -> &ObjectMeta;
    fn meta_mut(&mut self) -> &mut ObjectMeta;

    fn key(&self) -> String {
        self.meta().key()
    }

    /// Decode one object. Only a broken envelope (e.g. `metadata` not an object) fails;
    /// an invalid CRD spec decodes into an object that carries its validation error.
    fn decode(v: serde_json::Value) -> Result<Self, KubeError> {
        serde_json::from_value::<Self::Wire>(v)
            .map(Self::from_wire)
            .map_err(|e| KubeError::Decode {
                what: Self::KIND.name().to_string(),
                detail: e.to_string(),
            })
    }
}

/// `v1.Pod`: metadata, `spec.nodeName`, `spec.hostNetwork`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct Pod {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: PodSpec,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(default)]
    pub node_name: String,
    #[serde(default)]
    pub host_network: bool,
}

/// `Resource::meta` and `meta_mut` for a kind whose metadata is its `metadata` field
/// (every kind tether watches).
macro_rules! metadata_field {
    () => {
        fn meta(&self) -> &ObjectMeta {
            &self.metadata
        }
        fn meta_mut(&mut self) -> &mut ObjectMeta {
            &mut self.metadata
        }
    };
}
pub(crate) use metadata_field;

/// The `Resource` impl of a core kind that is its own wire form (decoded as is, nothing
/// to validate).
macro_rules! core_resource {
    ($t:ty, $kind:expr) => {
        impl Resource for $t {
            const KIND: Kind = $kind;
            type Wire = $t;
            fn from_wire(w: $t) -> $t {
                w
            }
            metadata_field!();
        }
    };
}

core_resource!(Pod, Kind::Pod);

/// `v1.Namespace`: only metadata (labels feed namespace selectors).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct Namespace {
    #[serde(default)]
    pub metadata: ObjectMeta,
}

core_resource!(Namespace, Kind::Namespace);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_decodes_used_fields_and_ignores_the_rest() {
        let v = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "prod", "uid": "u1",
                         "resourceVersion": "42", "generation": 3,
                         "labels": {"app": "web"}, "creationTimestamp": "2026-11-30T09:00:00Z",
                         "annotations": {"x": "y"}},
            "spec": {"nodeName": "vm1", "hostNetwork": true, "containers": []},
            "status": {"phase": "Running"}
        });
        let p = Pod::decode(v).unwrap();
        assert_eq!(p.key(), "prod/web-1");
        assert_eq!(p.metadata.resource_version, "42");
        assert_eq!(p.metadata.generation, Some(3));
        assert_eq!(
            p.metadata.labels.get("app").map(String::as_str),
            Some("web")
        );
        assert_eq!(
            p.metadata.creation_timestamp.as_deref(),
            Some("2026-11-30T09:00:00Z")
        );
        assert_eq!(
            p.spec,
            PodSpec {
                node_name: "vm1".into(),
                host_network: true
            }
        );
        let n =
            Namespace::decode(serde_json::json!({"metadata": {"name": "prod", "labels": null}}))
                .unwrap();
        assert_eq!(n.key(), "prod");
        assert!(n.metadata.labels.is_empty());
        assert!(Pod::decode(serde_json::json!({"metadata": 5})).is_err());
    }

    #[test]
    fn collection_paths() {
        assert_eq!(Kind::Pod.collection_path(None), "/api/v1/pods");
        assert_eq!(
            Kind::Namespace.collection_path(Some("x")),
            "/api/v1/namespaces"
        );
        assert_eq!(
            Kind::TrafficControl.collection_path(None),
            "/apis/crd.antrea.io/v1alpha2/trafficcontrols"
        );
        assert_eq!(
            Kind::ExternalNode.collection_path(Some("default")),
            "/apis/crd.antrea.io/v1alpha1/namespaces/default/externalnodes"
        );
        assert_eq!(
            Kind::from_type("crd.antrea.io/v1alpha2", "TrafficControl"),
            Some(Kind::TrafficControl)
        );
        assert_eq!(
            Kind::from_type("crd.antrea.io/v1alpha1", "TrafficControl"),
            None
        );
    }
}
