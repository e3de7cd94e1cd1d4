//! The one error type of the Kubernetes source, [`KubeError`]. Variants are the conditions
//! a caller acts on: `Gone` → relist, `Unauthorized` → re-read the token, `NotFound` → the
//! CRD is not installed (retry later), `Tls`/`Transport` → back off and reconnect.

use std::fmt;

/// What went wrong talking to the API server, reading a kubeconfig or decoding an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeError {
    /// HTTP 410 or a watch `ERROR` event with code 410: the resourceVersion is too old.
    Gone { message: String },
    /// HTTP 401: the bearer token or client certificate was rejected.
    Unauthorized { message: String },
    /// HTTP 403: RBAC does not allow the request.
    Forbidden { message: String },
    /// HTTP 404 on a collection: usually the CRD is not installed.
    NotFound { url: String, message: String },
    /// Any other non-2xx answer, with the API `Status` fields kept, and the seconds of a
    /// `Retry-After` header (429 and 503 from API Priority and Fairness send one).
    Status {
        code: u16,
        reason: String,
        message: String,
        retry_after: Option<u64>,
    },
    /// The TLS handshake failed (unknown CA, name mismatch, bad client certificate).
    Tls { server: String, detail: String },
    /// Connection refused/reset, timeout, a stream cut mid-chunk.
    Transport { what: String, detail: String },
    /// A body, list page or watch line that is not what the API promises.
    Decode { what: String, detail: String },
    /// A kubeconfig, in-cluster or credential problem; not retried by the caller.
    Config { what: String, detail: String },
    /// The source is shutting down.
    Shutdown,
}

impl KubeError {
    /// Build the variant for an HTTP status code and its `Status` body fields.
    pub fn from_status(code: u16, url: &str, reason: String, message: String) -> KubeError {
        match code {
            401 => KubeError::Unauthorized { message },
            403 => KubeError::Forbidden { message },
            404 => KubeError::NotFound {
                url: url.to_string(),
                message,
            },
            410 => KubeError::Gone { message },
            _ => KubeError::Status {
                code,
                reason,
                message,
                retry_after: None,
            },
        }
    }

    /// The same error with the `Retry-After` the server sent (a `Status` error only).
    pub fn with_retry_after(self, seconds: Option<u64>) -> KubeError {
        match self {
            KubeError::Status {
                code,
                reason,
                message,
                ..
            } => KubeError::Status {
                code,
                reason,
                message,
                retry_after: seconds,
            },
            other => other,
        }
    }

    /// How long the server asked us to wait, if it did.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            KubeError::Status {
                retry_after: Some(s),
                ..
            } => Some(std::time::Duration::from_secs(*s)),
            _ => None,
        }
    }

    /// Errors worth retrying with backoff (everything except bad configuration and shutdown).
    pub fn is_retryable(&self) -> bool {
        !matches!(self, KubeError::Config { .. } | KubeError::Shutdown)
    }
}

impl fmt::Display for KubeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KubeError::Gone { message } => {
                write!(f, "resource version expired (410 Gone): {message}")
            }
            KubeError::Unauthorized { message } => write!(f, "unauthorized (401): {message}"),
            KubeError::Forbidden { message } => write!(f, "forbidden (403): {message}"),
            KubeError::NotFound { url, message } => write!(
                f,
                "not found (404) at {url}: {message} (is the CRD installed?)"
            ),
            KubeError::Status {
                code,
                reason,
                message,
                retry_after,
            } => {
                write!(f, "API error {code} {reason}: {message}")?;
                if let Some(s) = retry_after {
                    write!(f, " (Retry-After {s}s)")?;
                }
                Ok(())
            }
            KubeError::Tls { server, detail } => write!(f, "TLS with {server} failed: {detail}"),
            KubeError::Transport { what, detail } => write!(f, "{what}: {detail}"),
            KubeError::Decode { what, detail } => write!(f, "cannot decode {what}: {detail}"),
            KubeError::Config { what, detail } => write!(f, "{what}: {detail}"),
            KubeError::Shutdown => write!(f, "shutting down"),
        }
    }
}

impl std::error::Error for KubeError {}
