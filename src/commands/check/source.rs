//! `tether check`: the source of objects (manifests directory or API server), the RBAC the
//! daemon needs, and what the source holds for this node.

use super::*;

/// This node's ExternalNode, when the source has one, and the TrafficControls.
pub(super) type Found = (Option<k8s::ExternalNode>, Vec<k8s::TrafficControl>);

/// The source's checks; what it holds for this node.
pub(super) fn check_source(cfg: &Config, out: &mut Vec<Finding>) -> Found {
    // Long on purpose: One arm per source (manifests, kubeconfig, in-cluster), each with
    // its checks in the order they are printed.
    let cc = match &cfg.source {
        Input::Manifests(dir) => return check_manifests(cfg, dir, out),
        Input::Kubeconfig(p) => k8s::kubeconfig::load_kubeconfig(p, None),
        Input::InCluster => k8s::kubeconfig::in_cluster(),
    };
    let cc = match cc {
        Ok(c) => c,
        Err(e) => {
            // A file others could change carries its own "fix: chmod …".
            let (detail, fix) = split_fix(
                &e.to_string(),
                "pass --kubeconfig FILE (or --manifests DIR to run without a cluster)",
            );
            out.push(bad(Level::Fail, "api credentials", detail, fix));
            return Found::default();
        }
    };
    let http = k8s::HttpConfig {
        allow_insecure: cfg.allow_insecure_tls,
        allow_plain_http: cfg.allow_plain_http,
        ..Default::default()
    };
    let client = match k8s::Client::new(&cc, http) {
        Ok(c) => c,
        Err(e) => {
            // Refusals carry their own "fix: …" (naming the config key and flag).
            let (detail, fix) =
                split_fix(&e.to_string(), "fix the kubeconfig's certificates or token");
            let detail = match &cfg.source {
                Input::Kubeconfig(p) => format!("kubeconfig {}: {detail}", p.display()),
                _ => detail,
            };
            out.push(bad(Level::Fail, "api credentials", detail, fix));
            return Found::default();
        }
    };
    match client.get("/version", &[]) {
        Ok(_) => out.push(ok("api", format!("{} answers /version", client.server()))),
        Err(
            e @ (KubeError::Transport { .. }
            | KubeError::Tls { .. }
            | KubeError::Config { .. }
            | KubeError::Shutdown),
        ) => {
            out.push(bad(
                Level::Fail,
                "api",
                format!("{}: {e}", client.server()),
                "check the server address, the network path and the CA in the kubeconfig",
            ));
            return Found::default();
        }
        // Any HTTP answer means reachable; /version may be closed to this user, and the
        // RBAC checks below say what matters.
        Err(e) => out.push(ok(
            "api",
            format!("{} reachable (/version: {e})", client.server()),
        )),
    }
    let scope = k8s::SourceConfig {
        node_name: cfg.node_name.clone(),
        external_node_namespace: cfg.external_node_namespace.clone(),
        kinds: Vec::new(),
        watch: k8s::WatchConfig::default(),
    };
    for kind in Kind::ALL {
        out.push(check_rbac(&client, &scope, kind));
    }
    // This node's ExternalNode and the TrafficControls, listed as the daemon lists them
    // (no `get` needed).
    (
        list::<k8s::ExternalNode>(&client, &scope)
            .into_iter()
            .next(),
        list::<k8s::TrafficControl>(&client, &scope),
    )
}

/// An error's text split at its own " fix: …", or the whole text and `fix`.
fn split_fix(text: &str, fix: &str) -> (String, String) {
    match text.split_once(" fix: ") {
        Some((d, f)) => (d.to_string(), f.to_string()),
        None => (text.to_string(), fix.to_string()),
    }
}

/// Every object of one kind in the daemon's scope (empty when the list fails: the RBAC
/// findings say why).
pub(super) fn list<R: k8s::Resource>(client: &k8s::Client, scope: &k8s::SourceConfig) -> Vec<R> {
    let (path, fs) = scope.scope(R::KIND);
    let q: Vec<(&str, String)> = fs.into_iter().map(|f| ("fieldSelector", f)).collect();
    client
        .get(&path, &q)
        .ok()
        .and_then(|body| k8s::watch::decode_list::<R>(&body).ok())
        .map(|l| l.items)
        .unwrap_or_default()
}

/// `list` and `watch` on one kind, in the scope the daemon uses; tried for real, so the
/// answer covers RBAC, admission and CRDs that are not installed.
pub(super) fn check_rbac(client: &k8s::Client, scope: &k8s::SourceConfig, kind: Kind) -> Finding {
    let (path, fs) = scope.scope(kind);
    let mut q = vec![("limit", "1".to_string())];
    if let Some(fs) = fs {
        q.push(("fieldSelector", fs));
    }
    let what = format!("rbac {}", kind.plural());
    let fix = "kubectl apply -f deploy/rbac.yaml (binds list/watch for tether's user)";
    if let Err(e) = client.get(&path, &q) {
        return match e {
            KubeError::Forbidden { message } => bad(
                Level::Fail,
                &what,
                format!("list {path}: forbidden: {message}"),
                fix,
            ),
            KubeError::NotFound { .. } => bad(
                Level::Fail,
                &what,
                format!("list {path}: not found"),
                "install Antrea's CRDs (crd.antrea.io) in the cluster",
            ),
            e => bad(Level::Fail, &what, format!("list {path}: {e}"), fix),
        };
    }
    q.push(("watch", "1".to_string()));
    q.push(("timeoutSeconds", "1".to_string()));
    match client.watch(&path, &q) {
        Ok(_) => ok(&what, format!("list+watch {path} allowed")),
        Err(KubeError::Forbidden { message }) => bad(
            Level::Fail,
            &what,
            format!("watch {path}: forbidden: {message}"),
            fix,
        ),
        Err(e) => bad(Level::Fail, &what, format!("watch {path}: {e}"), fix),
    }
}

pub(super) fn check_manifests(cfg: &Config, dir: &Path, out: &mut Vec<Finding>) -> Found {
    if let Err(e) = k8s::manifests::check_dir(dir) {
        let (detail, fix) = split_fix(&e.0, "chmod go-w the directory");
        out.push(bad(Level::Fail, "manifests", detail, fix));
        return Found::default();
    }
    if let Err(e) = std::fs::read_dir(dir) {
        out.push(bad(
            Level::Fail,
            "manifests",
            format!("{}: {e}", dir.display()),
            "create the directory or fix --manifests",
        ));
        return Found::default();
    }
    let mcfg = k8s::ManifestsConfig::new(
        dir.to_path_buf(),
        &cfg.node_name,
        &cfg.external_node_namespace,
    );
    let (mut objs, errors) = k8s::manifests::scan_once(&mcfg);
    let counts: Vec<String> = objs
        .iter()
        .map(|(k, v)| format!("{}={}", k.plural(), v.len()))
        .collect();
    if errors.is_empty() {
        out.push(ok(
            "manifests",
            format!("{} readable: {}", dir.display(), counts.join(" ")),
        ));
    } else {
        out.push(bad(
            Level::Fail,
            "manifests",
            format!("{}: {}", dir.display(), errors.join("; ")),
            "fix or remove the files named",
        ));
    }
    let en = objs
        .remove(&Kind::ExternalNode)
        .unwrap_or_default()
        .into_iter()
        .next()
        .and_then(|v| <k8s::ExternalNode as k8s::Resource>::decode(v).ok());
    let tcs = objs
        .remove(&Kind::TrafficControl)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|v| <k8s::TrafficControl as k8s::Resource>::decode(v).ok())
        .collect();
    (en, tcs)
}
