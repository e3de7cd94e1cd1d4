//! `tether check`: a preflight of what `tether run` needs on this host with this
//! configuration — OVS sockets, the bridge and its OpenFlow versions, privileges, the
//! object source (API reachability and the RBAC verbs, or the manifests directory), the
//! state socket; and, through `preflight`, the host: the kernel datapath, the tunnels the
//! TrafficControls use, the ExternalNode's NIC. Each finding says what is wrong and how
//! to fix it.
//!
//! Exit code (docs/design.md#exit-codes): 0 nothing failed (warnings allowed), 1 something
//! failed; a bad configuration is caught before (2). Reads only: it never creates the
//! bridge or a port.

use std::fmt::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::{Config, Input, preflight};
use crate::k8s::{self, Kind, KubeError};
use crate::netlink::Links;
use crate::ovsdb::{Client, ClientOptions, Condition, Datum, Op, Remote};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Ok,
    Warn,
    Fail,
}

/// One finding: what was checked, the outcome, and how to fix it when not `Ok`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub level: Level,
    pub what: String,
    pub detail: String,
    pub fix: Option<String>,
}

pub(super) fn ok(what: &str, detail: impl Into<String>) -> Finding {
    Finding {
        level: Level::Ok,
        what: what.into(),
        detail: detail.into(),
        fix: None,
    }
}

pub(super) fn bad(
    level: Level,
    what: &str,
    detail: impl Into<String>,
    fix: impl Into<String>,
) -> Finding {
    Finding {
        level,
        what: what.into(),
        detail: detail.into(),
        fix: Some(fix.into()),
    }
}

/// The report text and the exit code.
pub fn report(findings: &[Finding]) -> (String, u8) {
    let mut o = String::new();
    let mut failed = 0;
    let mut warned = 0;
    for f in findings {
        let tag = match f.level {
            Level::Ok => "ok  ",
            Level::Warn => {
                warned += 1;
                "WARN"
            }
            Level::Fail => {
                failed += 1;
                "FAIL"
            }
        };
        let _ = writeln!(o, "{tag} {}: {}", f.what, f.detail);
        if let Some(fix) = &f.fix {
            let _ = writeln!(o, "     fix: {fix}");
        }
    }
    let _ = writeln!(
        o,
        "{} checks: {} failed, {} warnings",
        findings.len(),
        failed,
        warned
    );
    (o, u8::from(failed > 0))
}

/// `CAP_NET_ADMIN` (capability 12) in the effective set, from `/proc/self/status`'s
/// `CapEff:` hex mask.
pub fn has_net_admin(proc_status: &str) -> Option<bool> {
    let hex = proc_status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))?
        .trim();
    let mask = u64::from_str_radix(hex, 16).ok()?;
    Some(mask & (1 << 12) != 0)
}

/// Run every check.
pub fn run(cfg: &Config) -> Vec<Finding> {
    let mut out = Vec::new();
    let caps = std::fs::read_to_string("/proc/self/status").ok();
    match caps.as_deref().and_then(has_net_admin) {
        Some(true) => out.push(ok("privileges", "CAP_NET_ADMIN held (netlink changes)")),
        _ => out.push(bad(
            Level::Fail,
            "privileges",
            "CAP_NET_ADMIN missing: the ExternalNode takeover cannot move links or addresses",
            "run as root, or under systemd/tether.service (AmbientCapabilities=CAP_NET_ADMIN)",
        )),
    }
    let client = check_ovs(cfg, &mut out);
    let client = client.as_deref();
    let host = preflight::host::RealHost;
    let links = crate::netlink::Rtnl::connect();
    let links_ok = links.as_ref().ok().map(|l| l as &dyn Links);
    out.extend(preflight::gather::ovs_host(cfg, &host, client, links_ok));
    let (en, tcs) = check_source(cfg, &mut out);
    let tunnels = preflight::tunnels_of(&tcs);
    if let Some(en) = en {
        match &links {
            Ok(l) => check_external_node(cfg, client, l, &en, &tunnels, &mut out),
            Err(e) => out.push(bad(
                Level::Warn,
                "externalnode",
                format!(
                    "{}/{}: cannot read the host's links: {e}",
                    en.metadata.namespace, en.metadata.name
                ),
                "run tether check as root",
            )),
        }
    }
    out.extend(preflight::gather::tunnels(
        cfg, &host, client, links_ok, &tunnels,
    ));
    check_state_socket(&cfg.state_socket, &mut out);
    out
}

/// The OVS sockets and the bridge; the OVSDB client when it answers.
fn check_ovs(cfg: &Config, out: &mut Vec<Finding>) -> Option<Arc<Client>> {
    // Long on purpose: The OVS checks in the order `tether check` prints them; each uses
    // what the one before found (socket, then client, then bridge).
    let db = cfg.ovs_rundir.join("db.sock");
    let fix_db = format!(
        "start Open vSwitch (systemctl start openvswitch-switch) or point --ovs-rundir at the directory holding db.sock (now {})",
        cfg.ovs_rundir.display()
    );
    if !db.exists() {
        out.push(bad(
            Level::Fail,
            "ovsdb",
            format!("{} does not exist", db.display()),
            fix_db,
        ));
        return None;
    }
    let client = Arc::new(Client::start(
        Remote::Unix(db.clone()),
        ClientOptions::default(),
    ));
    if let Err(e) = client.wait_connected(Duration::from_secs(3)) {
        out.push(bad(
            Level::Fail,
            "ovsdb",
            format!("{}: {e}", db.display()),
            fix_db,
        ));
        return None;
    }
    out.push(ok("ovsdb", format!("{} answers", db.display())));
    let rows = client.transact(&[Op::Select {
        table: "Bridge".into(),
        conditions: vec![Condition::name(&cfg.bridge)],
        columns: Some(vec!["protocols".into(), "datapath_type".into()]),
    }]);
    let row = match rows {
        Ok(r) => r.into_iter().next().and_then(|r| r.rows.into_iter().next()),
        Err(e) => {
            out.push(bad(
                Level::Fail,
                "bridge",
                format!("cannot read the Bridge table: {e}"),
                "check that ovsdb-server serves the Open_vSwitch database",
            ));
            return Some(client);
        }
    };
    let Some(row) = row else {
        out.push(ok(
            "bridge",
            format!(
                "{} does not exist yet; tether run creates it (datapath_type={})",
                cfg.bridge, cfg.datapath_type
            ),
        ));
        return Some(client);
    };
    let protocols: Vec<String> = row
        .get("protocols")
        .map(Datum::atoms)
        .unwrap_or_default()
        .iter()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    let dp = row
        .get("datapath_type")
        .and_then(Datum::as_str)
        .unwrap_or("")
        .to_string();
    let missing: Vec<&str> = ["OpenFlow10", "OpenFlow15"]
        .into_iter()
        .filter(|p| !protocols.iter().any(|q| q == p))
        .collect();
    if missing.is_empty() {
        out.push(ok(
            "bridge",
            format!("{} protocols={}", cfg.bridge, protocols.join(",")),
        ));
    } else {
        out.push(bad(
            Level::Warn,
            "bridge",
            format!(
                "{} lacks {} (has {:?}); tether run enables them",
                cfg.bridge,
                missing.join(","),
                protocols
            ),
            format!(
                "ovs-vsctl set bridge {} protocols=OpenFlow10,OpenFlow15 (or let tether run do it)",
                cfg.bridge
            ),
        ));
    }
    out.extend(preflight::datapath(&cfg.bridge, &dp, &cfg.datapath_type));
    let mgmt = cfg.ovs_rundir.join(format!("{}.mgmt", cfg.bridge));
    if !missing.is_empty() {
        return Some(client);
    }
    match crate::openflow::OfFlows::start(crate::openflow::OfFlowsConfig::new(
        mgmt.clone(),
        &cfg.bridge,
        0,
    )) {
        Ok(of) => match of.wait_connected(Duration::from_secs(3)) {
            Ok(()) => out.push(ok(
                "openflow",
                format!("{} speaks OpenFlow 1.0 and 1.5", mgmt.display()),
            )),
            Err(e) => out.push(bad(
                Level::Fail,
                "openflow",
                format!("{}: {e}", mgmt.display()),
                "check that ovs-vswitchd is running (systemctl status openvswitch-switch)",
            )),
        },
        Err(e) => out.push(bad(
            Level::Fail,
            "openflow",
            format!("{}: {e}", mgmt.display()),
            "check that ovs-vswitchd is running",
        )),
    }
    Some(client)
}

/// This node's ExternalNode, when the source has one, and the TrafficControls.
type Found = (Option<k8s::ExternalNode>, Vec<k8s::TrafficControl>);

/// The source's checks; what it holds for this node.
fn check_source(cfg: &Config, out: &mut Vec<Finding>) -> Found {
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
            out.push(bad(
                Level::Fail,
                "api credentials",
                e.to_string(),
                "pass --kubeconfig FILE (or --manifests DIR to run without a cluster)",
            ));
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
            let text = e.to_string();
            let (detail, fix) = match text.split_once(" fix: ") {
                Some((d, f)) => (d.to_string(), f.to_string()),
                None => (
                    text,
                    "fix the kubeconfig's certificates or token".to_string(),
                ),
            };
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

/// Every object of one kind in the daemon's scope (empty when the list fails: the RBAC
/// findings say why).
fn list<R: k8s::Resource>(client: &k8s::Client, scope: &k8s::SourceConfig) -> Vec<R> {
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
fn check_rbac(client: &k8s::Client, scope: &k8s::SourceConfig, kind: Kind) -> Finding {
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

fn check_manifests(cfg: &Config, dir: &Path, out: &mut Vec<Finding>) -> Found {
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

/// The verdict `tether run` would reach on this node's ExternalNode, without touching
/// anything: a valid spec, the link holding its IPs, whether that link may be taken over
/// (`verdict`, then what OVS needs of it beyond that), what an earlier takeover left, who
/// configures it, and whether each of its routes can be moved.
fn check_external_node(
    cfg: &Config,
    client: Option<&Client>,
    links: &dyn Links,
    en: &k8s::ExternalNode,
    tunnels: &[preflight::Tunnel],
    out: &mut Vec<Finding>,
) {
    // Long on purpose: The checks `tether check` reports for the ExternalNode, in the order
    // it prints them; each is a few lines, and they share what the earlier ones found.
    use crate::controller::externalnode::verdict::{self, OvsPort};
    use preflight::{gather, host::RealHost};
    let key = format!("{}/{}", en.metadata.namespace, en.metadata.name);
    let what = "externalnode";
    let fix_ips = "make spec.interfaces[0].ips the addresses of the VM NIC to attach";
    let spec = match &en.spec {
        Ok(s) => s,
        Err(e) => {
            out.push(bad(Level::Fail, what, format!("{key}: {e}"), fix_ips));
            return;
        }
    };
    let Some(iface) = spec.interfaces.first() else {
        out.push(bad(
            Level::Fail,
            what,
            format!("{key}: no interface"),
            fix_ips,
        ));
        return;
    };
    let link = match verdict::find_nic(links, &iface.ips) {
        Ok((l, _)) => l,
        Err(e) => {
            out.push(bad(Level::Fail, what, format!("{key}: {e}"), fix_ips));
            return;
        }
    };
    let role = client.and_then(|c| ovs_role(c, &link.name));
    let is_host = role.as_deref() == Some("host");
    let ports = gather::port_facts(client, links, &link.name, is_host);
    let leftovers = preflight::nic::leftovers(&link.name, &cfg.bridge, &ports);
    // The host port with its uplink link is attached; without it (a reboot) `tether run`
    // replaces the ports and judges the link like any other.
    if is_host && ports.uplink_link {
        out.push(ok(
            what,
            format!("{key}: {} is attached (tether's host port)", link.name),
        ));
        out.extend(leftovers);
        out.push(ok(
            "network",
            format!(
                "{} (the host port) is configured by {}",
                link.name,
                crate::hostnet::detect(&Default::default(), &link.name, link.index)
            ),
        ));
        out.extend(preflight::mtu(&link.name, link.mtu, tunnels));
        return;
    }
    if let Some(role) = role.filter(|_| !is_host) {
        let r = verdict::refusal(&link, None, &cfg.bridge, OvsPort::Other(role));
        out.push(bad(
            Level::Fail,
            what,
            format!("{key}: {}", r.unwrap_or_default()),
            fix_ips,
        ));
        return;
    }
    let master = verdict::master_name(links, &link);
    if let Some(r) = verdict::refusal(&link, master.as_deref(), &cfg.bridge, OvsPort::None) {
        out.push(bad(
            Level::Fail,
            what,
            format!("{key}: tether run refuses to take it over: {r}"),
            fix_ips,
        ));
        return;
    }
    let uplink = gather::uplink(cfg, &RealHost, links, &link);
    let refused = uplink.iter().any(|f| f.level == Level::Fail);
    out.extend(uplink);
    if let Some(f) = leftovers {
        let stop = f.level == Level::Fail;
        out.push(f);
        if stop {
            return;
        }
    }
    if refused {
        return;
    }
    if crate::hostnet::in_init_netns() {
        let m = crate::hostnet::detect(&Default::default(), &link.name, link.index);
        out.extend(gather::network(&RealHost, links, &link, &m));
    }
    match crate::netlink::capture(links, link.index) {
        Ok(c) if !c.unmovable().is_empty() => out.push(bad(
            Level::Fail,
            what,
            format!(
                "{key}: {} has routes tether cannot move exactly: {}",
                link.name,
                c.unmovable().join("; ")
            ),
            "replace them by plain routes (no nexthop object, encapsulation or source prefix), or remove them",
        )),
        Ok(c) => out.push(ok(
            what,
            format!(
                "{key}: would take over {} ({}, {} addresses, {} routes)",
                link.name,
                link.kind.as_deref().unwrap_or("NIC"),
                c.addrs.len(),
                c.routes.len()
            ),
        )),
        Err(e) => out.push(bad(
            Level::Warn,
            what,
            format!("{key}: cannot read {}: {e}", link.name),
            "run tether check as root",
        )),
    }
    out.extend(preflight::mtu(&link.name, link.mtu, tunnels));
}

/// The `antrea-type` (or `foreign`) of the OVSDB port called `name`, when it has one.
fn ovs_role(client: &Client, name: &str) -> Option<String> {
    let rows = client
        .transact(&[Op::Select {
            table: "Port".into(),
            conditions: vec![Condition::name(name)],
            columns: Some(vec!["external_ids".into()]),
        }])
        .ok()?;
    let row = rows.into_iter().next()?.rows.into_iter().next()?;
    let role = row
        .get("external_ids")
        .and_then(|d| d.to_str_map().get("antrea-type").cloned())
        .unwrap_or_else(|| "foreign".to_string());
    Some(role)
}

fn check_state_socket(path: &Path, out: &mut Vec<Finding>) {
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        out.push(bad(
            Level::Warn,
            "state socket",
            format!("{}: a tether is already running here", path.display()),
            "stop it first, or give this one another --state-socket",
        ));
        return;
    }
    // The same verdict `tether run` reaches before creating it.
    if let Some(problem) = crate::status::socket_path_problem(path) {
        out.push(bad(
            Level::Fail,
            "state socket",
            problem,
            "use a directory only root can write to (the default /run/tether), or remove what is at the path",
        ));
        return;
    }
    let dir = path.parent().unwrap_or(Path::new("/"));
    let mut d = dir;
    // The nearest existing ancestor must be writable for the directory to be created.
    while !d.exists() {
        d = d.parent().unwrap_or(Path::new("/"));
    }
    match probe_writable(d) {
        Ok(()) => out.push(ok(
            "state socket",
            format!("{} can be created", path.display()),
        )),
        Err(e) => out.push(bad(
            Level::Fail,
            "state socket",
            format!("{} not writable: {e}", d.display()),
            "run as root or pass --state-socket in a writable directory",
        )),
    }
}

/// Create and remove a probe file in `dir`: a new file only (`O_CREAT|O_EXCL`, and
/// `O_NOFOLLOW`), so a symlink planted at the name can never make this write elsewhere.
fn probe_writable(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    // asm-generic/fcntl.h; the same on x86_64 and aarch64.
    const O_NOFOLLOW: i32 = 0o400000;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut last = None;
    for attempt in 0..4u32 {
        let probe = dir.join(format!(
            ".tether-check-{}-{nanos:x}-{attempt}",
            std::process::id()
        ));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(O_NOFOLLOW)
            .open(&probe)
        {
            Ok(_) => return std::fs::remove_file(&probe),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free probe name")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_admin_from_capeff() {
        let s = "Name:\ttether\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        assert_eq!(has_net_admin(s), Some(true));
        let s = "CapEff:\t0000000000000000\n";
        assert_eq!(has_net_admin(s), Some(false));
        assert_eq!(has_net_admin("CapEff:\t0000000000001000\n"), Some(true));
        assert_eq!(has_net_admin("nothing"), None);
    }

    /// The probe never writes through a symlink planted at its name.
    #[test]
    fn probe_file_is_new_and_never_followed() {
        let d = std::env::temp_dir().join(format!("tether-probe-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        probe_writable(&d).unwrap();
        assert_eq!(
            std::fs::read_dir(&d).unwrap().count(),
            0,
            "probe left behind"
        );
        let _ = std::fs::remove_dir_all(&d);
        assert!(probe_writable(&d).is_err());
    }

    #[test]
    fn report_counts_and_exit_code() {
        let f = vec![
            ok("ovsdb", "/r/db.sock answers"),
            bad(Level::Warn, "bridge", "br lacks OpenFlow15", "set it"),
        ];
        let (text, code) = report(&f);
        assert_eq!(
            text,
            "ok   ovsdb: /r/db.sock answers\nWARN bridge: br lacks OpenFlow15\n     fix: set it\n2 checks: 0 failed, 1 warnings\n"
        );
        assert_eq!(code, 0);
        let (_, code) = report(&[bad(Level::Fail, "x", "y", "z")]);
        assert_eq!(code, 1);
    }
}
