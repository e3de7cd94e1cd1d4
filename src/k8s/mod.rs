//! Kubernetes source: types, validation, selectors, stores, list/watch, manifests.
//!
//! Owns everything between the API server (or a manifests directory) and the object
//! stores the controllers read: decoding and validating objects, the watch state machine,
//! the HTTP transport, and the events telling controllers what changed. It does not decide
//! what a change means for OVS; that is `controller/`.
//!
//! Layout: pure parts — `types`/`crd` (objects), `validate`, `selector`, `store`,
//! `watch` (state machine + codec), `backoff`, `yaml` — and the parts that touch the
//! outside: `kubeconfig` (reads the files a kubeconfig names), `http` (the only user of
//! ureq and the only network I/O), `source` (watcher threads driving `watch` over `http`),
//! `manifests` (directory poller); `feed` is what those two feeders share (the events,
//! each kind's health, applying a change to a store).
//!
//! For the controllers: build a [`Client`] from [`kubeconfig::discover`] and start
//! [`Source::start_api`], or [`Source::start_manifests`]; both fill [`Stores`] and send
//! [`KubeEvent`]s (`Change::{Added, Updated, Deleted}` per kind, then `Synced(kind)` once the
//! first full list of that kind is in its store) on one bounded channel.

pub mod backoff;
pub mod crd;
pub mod error;
pub mod feed;
pub mod http;
pub mod kubeconfig;
pub mod manifests;
pub mod selector;
pub mod source;
pub mod store;
pub mod types;
pub mod validate;
pub mod watch;
pub mod yaml;

pub use backoff::BackoffConfig;
pub use crd::{
    AppliedTo, ErspanTunnel, ErspanVersion, ExternalNode, ExternalNodeSpec, GreTunnel,
    NetworkInterface, TcAction, TcDirection, TcPort, TrafficControl, TrafficControlSpec, UdpTunnel,
};
pub use error::KubeError;
pub use feed::{KindStatus, KubeEvent};
pub use http::{Client, HttpConfig};
pub use kubeconfig::{ClusterConfig, Credentials};
pub use manifests::ManifestsConfig;
pub use selector::{LabelSelector, Labels};
pub use source::{Source, SourceConfig};
pub use store::{Change, Store, Stores};
pub use types::{Kind, Namespace, ObjectMeta, Pod, PodSpec, Resource};
pub use validate::{FieldError, ValidationError};
pub use watch::WatchConfig;
