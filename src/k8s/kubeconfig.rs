//! Where the API server is and how to authenticate: kubeconfig files (YAML or JSON) and
//! in-cluster service-account config, resolved into a [`ClusterConfig`]. Owns parsing and
//! path resolution (file references are relative to the kubeconfig's directory, as in
//! client-go); it does not connect (that is `http.rs`).
//!
//! Supported: `clusters[].cluster.{server, certificate-authority(-data),
//! insecure-skip-tls-verify, tls-server-name}`, `users[].user.{client-certificate(-data),
//! client-key(-data), token, tokenFile}`, `contexts[].context.{cluster, user, namespace}`,
//! `current-context`. Not supported (refused with a message): `exec` and `auth-provider`
//! plugins, `proxy-url`. Every file read or named (the kubeconfig, its CA, client
//! certificate and key, a token file, the in-cluster token and CA) must be one that only
//! root or tether can change (`crate::files::untrusted`); otherwise it is refused, naming
//! the file and the `chmod`/`chown` that fixes it.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::error::KubeError;
use super::yaml;
use crate::files;

/// Service-account files of in-cluster config.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Everything `http::Client` needs to reach one API server.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// `https://host:port` (no trailing slash).
    pub server: String,
    /// PEM bundle of trusted CAs; `None` uses the built-in web roots.
    pub ca_pem: Option<Vec<u8>>,
    pub client_cert_pem: Option<Vec<u8>>,
    pub client_key_pem: Option<Vec<u8>>,
    /// Name to verify the server certificate against (and send as SNI).
    pub tls_server_name: Option<String>,
    pub insecure_skip_tls_verify: bool,
    pub credentials: Credentials,
    /// The context's default namespace, if any.
    pub namespace: Option<String>,
    /// Where the client certificate and key came from, when both are files: re-read so
    /// that rotated certificates (kubelet's `kubelet-client-current.pem`) are picked up.
    pub client_cert_files: Option<(PathBuf, PathBuf)>,
}

// Never print keys or tokens (docs/design.md#logs-signals-and-systemd).
impl std::fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterConfig")
            .field("server", &self.server)
            .field("ca_pem", &self.ca_pem.as_ref().map(|_| "<pem>"))
            .field("client_cert", &self.client_cert_pem.is_some())
            .field("tls_server_name", &self.tls_server_name)
            .field("insecure_skip_tls_verify", &self.insecure_skip_tls_verify)
            .field("credentials", &self.credentials)
            .finish()
    }
}

/// Bearer credentials.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    None,
    Token(String),
    /// Re-read every minute and after a 401 (bound service-account tokens rotate).
    TokenFile(PathBuf),
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credentials::None => f.write_str("None"),
            Credentials::Token(_) => f.write_str("Token(<redacted>)"),
            Credentials::TokenFile(p) => write!(f, "TokenFile({})", p.display()),
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct KubeconfigWire {
    #[serde(default)]
    clusters: Vec<Named<ClusterWire>>,
    #[serde(default)]
    users: Vec<Named<UserWire>>,
    #[serde(default)]
    contexts: Vec<Named<ContextWire>>,
    #[serde(default)]
    current_context: String,
}

#[derive(Deserialize)]
struct Named<T> {
    name: String,
    #[serde(alias = "cluster", alias = "user", alias = "context")]
    value: Option<T>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct ClusterWire {
    #[serde(default)]
    server: String,
    certificate_authority: Option<String>,
    certificate_authority_data: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: bool,
    tls_server_name: Option<String>,
    proxy_url: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct UserWire {
    client_certificate: Option<String>,
    client_certificate_data: Option<String>,
    client_key: Option<String>,
    client_key_data: Option<String>,
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<String>,
    exec: Option<serde_json::Value>,
    auth_provider: Option<serde_json::Value>,
}

#[derive(Deserialize, Default)]
struct ContextWire {
    #[serde(default)]
    cluster: String,
    #[serde(default)]
    user: String,
    namespace: Option<String>,
}

fn config_err(what: impl Into<String>, detail: impl Into<String>) -> KubeError {
    KubeError::Config {
        what: what.into(),
        detail: detail.into(),
    }
}

/// A file a kubeconfig names (certificate, key, CA): at most 1 MiB, regular files only,
/// and only root or tether may be able to change it (`files::untrusted`).
fn read_file(path: &Path, what: &str) -> Result<Vec<u8>, KubeError> {
    read_capped(path, what, files::SECRET_MAX)
}

fn read_capped(path: &Path, what: &str, max: u64) -> Result<Vec<u8>, KubeError> {
    files::read_trusted(path, max)
        .map_err(|e| config_err(format!("{what} {}", path.display()), e.to_string()))
}

/// A token file is read when a request needs one (`http.rs`, again every minute: bound
/// tokens rotate); here it is only checked, so that one someone other than root or tether
/// could change is refused at start. Anything else wrong with it (missing: a token written
/// after start) is left to that read, as before.
fn check_token_file(path: &Path, what: &str) -> Result<(), KubeError> {
    match files::check_trusted_regular(path, files::SECRET_MAX) {
        Err(e @ files::ReadError::Untrusted { .. }) => Err(config_err(
            format!("{what} {}", path.display()),
            e.to_string(),
        )),
        _ => Ok(()),
    }
}

/// Read and resolve a kubeconfig file; `context` overrides `current-context`.
pub fn load_kubeconfig(path: &Path, context: Option<&str>) -> Result<ClusterConfig, KubeError> {
    let text = String::from_utf8(read_capped(path, "kubeconfig", files::CONFIG_MAX)?)
        .map_err(|_| config_err(format!("kubeconfig {}", path.display()), "not UTF-8"))?;
    let base = path.parent().unwrap_or(Path::new("."));
    parse_kubeconfig(&text, base, context).map_err(|e| match e {
        KubeError::Config { what, detail } => {
            config_err(format!("kubeconfig {}: {what}", path.display()), detail)
        }
        other => other,
    })
}

/// Resolve kubeconfig text; relative file references are taken from `base_dir`.
pub fn parse_kubeconfig(
    text: &str,
    base_dir: &Path,
    context: Option<&str>,
) -> Result<ClusterConfig, KubeError> {
    // Long on purpose: The kubeconfig schema walked top to bottom (contexts, clusters,
    // users, each field checked and named in its error); splitting it scatters one schema
    // over several places.
    // JSON is YAML 1.2, so one parser reads both forms.
    let doc = yaml::parse_documents(text)
        .map_err(|e| config_err("syntax", e))?
        .into_iter()
        .next()
        .unwrap_or_default();
    let kc: KubeconfigWire =
        serde_json::from_value(doc).map_err(|e| config_err("structure", e.to_string()))?;
    let ctx_name = context.unwrap_or(&kc.current_context);
    if ctx_name.is_empty() {
        return Err(config_err(
            "current-context",
            "not set and no context given",
        ));
    }
    let find = |what: &str, name: &str, n: Vec<String>| {
        config_err(
            what.to_string(),
            format!("{name:?} not found (have: {})", n.join(", ")),
        )
    };
    let names = |v: &[String]| v.to_vec();
    let ctx_names: Vec<String> = kc.contexts.iter().map(|c| c.name.clone()).collect();
    let ctx = kc
        .contexts
        .into_iter()
        .find(|c| c.name == ctx_name)
        .ok_or_else(|| find("context", ctx_name, names(&ctx_names)))?
        .value
        .unwrap_or_default();
    let cl_names: Vec<String> = kc.clusters.iter().map(|c| c.name.clone()).collect();
    let cluster = kc
        .clusters
        .into_iter()
        .find(|c| c.name == ctx.cluster)
        .ok_or_else(|| find("cluster", &ctx.cluster, names(&cl_names)))?
        .value
        .unwrap_or_default();
    // A context may name no user (anonymous); a named but missing user is an error.
    let user = if ctx.user.is_empty() {
        UserWire::default()
    } else {
        let u_names: Vec<String> = kc.users.iter().map(|c| c.name.clone()).collect();
        kc.users
            .into_iter()
            .find(|u| u.name == ctx.user)
            .ok_or_else(|| find("user", &ctx.user, names(&u_names)))?
            .value
            .unwrap_or_default()
    };

    if cluster.server.is_empty() {
        return Err(config_err(
            format!("cluster {:?}", ctx.cluster),
            "no server",
        ));
    }
    if cluster.proxy_url.is_some() {
        return Err(config_err(
            format!("cluster {:?}", ctx.cluster),
            "proxy-url is not supported",
        ));
    }
    if user.exec.is_some() || user.auth_provider.is_some() {
        return Err(config_err(
            format!("user {:?}", ctx.user),
            "exec and auth-provider plugins are not supported; use a token, tokenFile or client certificate",
        ));
    }
    let resolve = |p: &str| {
        let p = Path::new(p);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            base_dir.join(p)
        }
    };
    let data_or_file = |data: Option<String>,
                        file: Option<String>,
                        what: &str|
     -> Result<Option<Vec<u8>>, KubeError> {
        if let Some(d) = data {
            return decode_base64(&d)
                .map(Some)
                .map_err(|e| config_err(format!("{what}-data"), e));
        }
        match file {
            Some(f) => read_file(&resolve(&f), what).map(Some),
            None => Ok(None),
        }
    };
    let client_cert_files = match (&user.client_certificate_data, &user.client_key_data) {
        (None, None) => user
            .client_certificate
            .as_deref()
            .zip(user.client_key.as_deref())
            .map(|(c, k)| (resolve(c), resolve(k))),
        _ => None,
    };
    let ca_pem = data_or_file(
        cluster.certificate_authority_data,
        cluster.certificate_authority,
        "certificate-authority",
    )?;
    let client_cert_pem = data_or_file(
        user.client_certificate_data,
        user.client_certificate,
        "client-certificate",
    )?;
    let client_key_pem = data_or_file(user.client_key_data, user.client_key, "client-key")?;
    if client_cert_pem.is_some() != client_key_pem.is_some() {
        return Err(config_err(
            format!("user {:?}", ctx.user),
            "client-certificate and client-key must be given together",
        ));
    }
    let credentials = match (user.token, user.token_file) {
        (Some(t), _) if !t.is_empty() => Credentials::Token(t),
        (_, Some(f)) => {
            let path = resolve(&f);
            check_token_file(&path, "token file")?;
            Credentials::TokenFile(path)
        }
        _ => Credentials::None,
    };
    Ok(ClusterConfig {
        server: cluster.server.trim_end_matches('/').to_string(),
        ca_pem,
        client_cert_pem,
        client_key_pem,
        tls_server_name: cluster.tls_server_name.filter(|s| !s.is_empty()),
        insecure_skip_tls_verify: cluster.insecure_skip_tls_verify,
        credentials,
        namespace: ctx.namespace,
        client_cert_files,
    })
}

/// The source docs/design.md#sources prescribes: the kubeconfig when one is given, else
/// in-cluster config when its files exist, else an error saying what to pass.
pub fn discover(kubeconfig: Option<&Path>) -> Result<ClusterConfig, KubeError> {
    match kubeconfig {
        Some(p) => load_kubeconfig(p, None),
        None if in_cluster_available() => in_cluster(),
        None => Err(config_err(
            "API server",
            "no --kubeconfig or --manifests given and no in-cluster service account found",
        )),
    }
}

/// True when the in-cluster service-account files and environment exist.
pub fn in_cluster_available() -> bool {
    std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
        && Path::new(SERVICE_ACCOUNT_DIR).join("token").exists()
}

/// In-cluster config from `$KUBERNETES_SERVICE_HOST`/`_PORT` and the service-account dir.
pub fn in_cluster() -> Result<ClusterConfig, KubeError> {
    let host = std::env::var("KUBERNETES_SERVICE_HOST")
        .map_err(|_| config_err("in-cluster config", "KUBERNETES_SERVICE_HOST is not set"))?;
    let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".to_string());
    in_cluster_from(&host, &port, Path::new(SERVICE_ACCOUNT_DIR))
}

/// In-cluster config with explicit inputs (testable).
pub fn in_cluster_from(host: &str, port: &str, sa_dir: &Path) -> Result<ClusterConfig, KubeError> {
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    let token = sa_dir.join("token");
    if !token.exists() {
        return Err(config_err(
            format!("in-cluster token {}", token.display()),
            "missing",
        ));
    }
    check_token_file(&token, "in-cluster token")?;
    let namespace = crate::files::read_text(&sa_dir.join("namespace"), files::SECRET_MAX)
        .ok()
        .map(|s| s.trim().to_string());
    Ok(ClusterConfig {
        server: format!("https://{host}:{port}"),
        ca_pem: Some(read_file(&sa_dir.join("ca.crt"), "in-cluster CA")?),
        client_cert_pem: None,
        client_key_pem: None,
        tls_server_name: None,
        insecure_skip_tls_verify: false,
        credentials: Credentials::TokenFile(token),
        namespace,
        client_cert_files: None,
    })
}

/// Standard base64 (RFC 4648 §4) with optional padding; whitespace is ignored.
pub fn decode_base64(s: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc: u32 = 0;
    let mut bits = 0u32;
    let mut pad = 0usize;
    for (i, c) in s.bytes().enumerate() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => {
                pad += 1;
                continue;
            }
            b' ' | b'\n' | b'\r' | b'\t' => continue,
            _ => return Err(format!("invalid base64 character at offset {i}")),
        };
        if pad > 0 {
            return Err(format!("base64 data after padding at offset {i}"));
        }
        acc = ((acc << 6) | u32::from(v)) & 0xffff;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits).to_le_bytes()[0]);
        }
    }
    if bits >= 6 || pad > 2 {
        return Err("truncated base64".to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
