//! The gate every privileged test passes first: root and the OVS tools, or a clear failure.

const TOOLS: &[&str] = &[
    "ovsdb-tool",
    "ovsdb-server",
    "ovs-vswitchd",
    "ovs-vsctl",
    "ovs-ofctl",
    "ovs-appctl",
    "ip",
];

/// Returns true when the test may run. Panics (fails the test) when not root or when a tool
/// is missing; returns false only when `TETHER_SKIP_PRIVILEGED=1` asks to skip, and says so.
pub fn privileged(test: &str) -> bool {
    if std::env::var("TETHER_SKIP_PRIVILEGED").as_deref() == Ok("1") {
        eprintln!("SKIPPED {test}: TETHER_SKIP_PRIVILEGED=1 (privileged tier not run)");
        return false;
    }
    if !is_root() {
        panic!(
            "{test} needs root (network namespaces, OVS daemons): run `sudo ./scripts/test.sh`, \
             or set TETHER_SKIP_PRIVILEGED=1 to skip the privileged tier deliberately"
        );
    }
    let missing: Vec<&str> = TOOLS.iter().copied().filter(|t| !on_path(t)).collect();
    if !missing.is_empty() {
        panic!(
            "{test} needs {} (install with `sudo ./scripts/install-deps.sh`)",
            missing.join(", ")
        );
    }
    if !std::path::Path::new(super::ovs::SCHEMA).exists() {
        panic!(
            "{test} needs {} (package openvswitch-switch)",
            super::ovs::SCHEMA
        );
    }
    true
}

/// Effective uid 0, read from /proc (no libc, no unsafe).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}
