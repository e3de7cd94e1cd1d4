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

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

mod externalnode;
mod finding;
mod ovs;
pub mod preflight;
mod source;

use externalnode::check_external_node;
use ovs::check_ovs;
use source::check_source;

mod controlplane;

pub use finding::{Finding, Level, report};
use finding::{bad, ok};

use super::{CmdError, load_config};
use crate::config::{Config, Input};
use crate::k8s::{self, Kind, KubeError};
use crate::netlink::Links;
use crate::ovsdb::{Client, ClientOptions, Condition, Datum, Op, Remote};

/// The command: the configuration's own warnings and notes, then every check; the report
/// on stdout, exit 1 when something failed.
pub fn main(args: &[String], out: &mut dyn std::io::Write) -> Result<u8, CmdError> {
    let cfg = load_config(args)?;
    // The report goes to stdout; log lines (warnings, or RUST_LOG's) to stderr.
    crate::logging::init("warn");
    let mut findings = Vec::new();
    for w in &cfg.warnings {
        findings.push(Finding {
            level: Level::Warn,
            what: "config".into(),
            detail: w.clone(),
            fix: Some("remove or correct the key".into()),
        });
    }
    for n in &cfg.notes {
        findings.push(Finding {
            level: Level::Ok,
            what: "config".into(),
            detail: n.clone(),
            fix: None,
        });
    }
    findings.extend(run(&cfg));
    let (text, code) = report(&findings);
    let _ = out.write_all(text.as_bytes());
    Ok(code)
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
    controlplane::check_controlplane(cfg, &mut out);
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
}
