//! Kubernetes source: types, validation, selectors, stores, list/watch, manifests.
