//! Network namespaces owned by one test, and running a test body inside one.
//!
//! Entering a namespace needs `setns(2)`, which std does not wrap and `unsafe_code` forbids.
//! So a test that must run *inside* a namespace (netlink calls act on the caller's namespace)
//! re-executes its own test binary under `ip netns exec`, filtered to that one test, with
//! `TETHER_IN_NETNS` set; the child runs the body, the parent asserts the child passed.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use super::{pid_alive, run, try_run};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// `<pid>-<n>`: unique among the tests of every process running now.
pub fn unique_suffix() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// A network namespace deleted (with every process left in it) when dropped, panics included.
pub struct Netns {
    name: String,
    keep: bool,
}

impl Netns {
    /// Create `tt-<pid>-<n>-<tag>` with `lo` up. `tag` keeps names readable in `ip netns`.
    pub fn new(tag: &str) -> Netns {
        let name = format!("tt-{}-{tag}", unique_suffix());
        assert!(name.len() < 64, "netns name too long: {name}");
        run(Command::new("ip").args(["netns", "add", &name]));
        let ns = Netns { name, keep: false };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// Adopt the namespace this process was started in by [`in_netns`] (not deleted on drop).
    fn adopt(name: String) -> Netns {
        Netns { name, keep: true }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ip netns exec <ns> <argv…>`, without running it.
    pub fn command(&self, argv: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).args(argv);
        c
    }

    /// Run argv in the namespace; panic on failure; stdout.
    pub fn exec(&self, argv: &[&str]) -> String {
        run(&mut self.command(argv))
    }

    pub fn try_exec(&self, argv: &[&str]) -> Result<String, String> {
        try_run(&mut self.command(argv))
    }

    /// `ip -n <ns> <args…>`; panic on failure.
    pub fn ip(&self, args: &[&str]) -> String {
        run(Command::new("ip").args(["-n", &self.name]).args(args))
    }

    pub fn try_ip(&self, args: &[&str]) -> Result<String, String> {
        try_run(Command::new("ip").args(["-n", &self.name]).args(args))
    }

    /// A bash script in the namespace (`set -e`); panic on failure.
    pub fn sh(&self, script: &str) -> String {
        self.exec(&["bash", "-ec", script])
    }

    /// Pids of the processes in this namespace.
    pub fn pids(&self) -> Vec<u32> {
        try_run(Command::new("ip").args(["netns", "pids", &self.name]))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    }

    /// Create a veth pair `a` (here) ↔ `b` (in `other`), both up.
    pub fn veth_to(&self, a: &str, other: &Netns, b: &str) {
        self.ip(&[
            "link",
            "add",
            a,
            "type",
            "veth",
            "peer",
            "name",
            b,
            "netns",
            &other.name,
        ]);
        self.ip(&["link", "set", a, "up"]);
        other.ip(&["link", "set", b, "up"]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        if std::env::var("TETHER_KEEP").as_deref() == Ok("1") {
            eprintln!("kept netns {} (TETHER_KEEP=1)", self.name);
            return;
        }
        for sig in ["-TERM", "-KILL"] {
            let pids = self.pids();
            if pids.is_empty() {
                break;
            }
            for p in &pids {
                let _ = Command::new("kill").args([sig, &p.to_string()]).output();
            }
            for _ in 0..50 {
                if !pids.iter().any(|p| pid_alive(*p)) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

const CHILD_ENV: &str = "TETHER_IN_NETNS";

/// Run `body` inside a fresh namespace. `test` is the test's path as libtest names it
/// (e.g. `"rename_15_chars"` or `"module::case"`).
///
/// In the parent: create the namespace, re-run this test binary there with `--exact test`,
/// forward its output, and panic if it failed. In the child: run `body` with the namespace.
pub fn in_netns(test: &str, body: impl FnOnce(&Netns)) {
    if let Ok(name) = std::env::var(CHILD_ENV) {
        let ns = Netns::adopt(name);
        body(&ns);
        return;
    }
    let ns = Netns::new("t");
    let exe: PathBuf = std::env::current_exe().expect("current test binary");
    let out = ns
        .command(&[
            exe.to_str().expect("utf-8 test binary path"),
            "--exact",
            test,
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, ns.name())
        .output()
        .expect("spawn test child under ip netns exec");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("--- {test} in netns {}:\n{stdout}{stderr}", ns.name());
    assert!(
        out.status.success(),
        "{test} failed inside netns {}",
        ns.name()
    );
    // A filter that matched nothing would "pass" silently; make sure the body really ran.
    assert!(
        stdout.contains("1 passed"),
        "{test}: the child ran no test; is the name passed to in_netns the exact libtest path?"
    );
}
