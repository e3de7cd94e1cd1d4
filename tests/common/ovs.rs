//! A real Open vSwitch (`ovsdb-server` + `ovs-vswitchd`, the userspace `netdev` datapath,
//! or the kernel's with `TETHER_TEST_DATAPATH=system`: see [`datapath`]) in a private
//! network namespace, with every socket, pid file, log and the database in a private temp
//! dir. One namespace per sandbox: two vswitchds in one namespace clash over the
//! `ovs-netdev` tap (docs/datapath.md#8-test-harness). Dropping the sandbox stops the
//! daemons, kills whatever is left in the namespace, deletes it and removes the dir — also
//! on panic.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::{Netns, patience, pid_alive, run, try_run, unique_suffix, wait_for};

pub const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";
/// Seconds for every ovs-vsctl/ovs-ofctl/ovs-appctl call: without it they hang forever
/// while vswitchd is down (docs/datapath.md#8-test-harness). Stretched by [`patience`].
pub fn tool_timeout() -> u64 {
    patience(Duration::from_secs(10)).as_secs()
}

/// The datapath type every test uses: `TETHER_TEST_DATAPATH`, `netdev` by default (these
/// machines' kernels have no openvswitch module). `system` needs the module and fails
/// loudly without it, rather than timing out on bridges that never get a datapath_id
/// (docs/datapath.md#8-test-harness).
pub fn datapath() -> &'static str {
    static DP: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
    DP.get_or_init(|| match std::env::var("TETHER_TEST_DATAPATH").as_deref() {
        Err(_) | Ok("") | Ok("netdev") => "netdev",
        Ok("system") => {
            assert!(
                Path::new("/sys/module/openvswitch").exists(),
                "TETHER_TEST_DATAPATH=system but the openvswitch kernel module is not \
                     loaded (modprobe openvswitch), so ovs-vswitchd has no kernel datapath"
            );
            "system"
        }
        Ok(other) => panic!("TETHER_TEST_DATAPATH={other:?}: use netdev or system"),
    })
}

/// The kernel datapath is in use (no netdev-only workarounds).
pub fn kernel_datapath() -> bool {
    datapath() == "system"
}

/// `netdev@ovs-netdev` or `system@ovs-system`, as `dpctl/*` names the datapath.
pub fn dpctl_name() -> &'static str {
    tether::unixctl::datapath_name(datapath())
}

#[derive(Clone, Debug, Default)]
pub struct SandboxOpts {
    /// Start ovs-vswitchd with `--enable-dummy` so `type=dummy` ports work (scale tests).
    pub dummy: bool,
}

pub struct Sandbox {
    dir: PathBuf,
    ns: Netns,
    opts: SandboxOpts,
    keep: bool,
}

impl Sandbox {
    pub fn start() -> Sandbox {
        Sandbox::start_with(SandboxOpts::default())
    }

    pub fn start_with(opts: SandboxOpts) -> Sandbox {
        let dir = PathBuf::from(format!("/tmp/tt-{}", unique_suffix()));
        std::fs::create_dir_all(&dir).expect("create sandbox dir");
        std::fs::write(dir.join("owner.pid"), std::process::id().to_string())
            .expect("write owner.pid");
        let ns = Netns::new("ovs");
        let sb = Sandbox {
            dir,
            ns,
            opts,
            keep: std::env::var("TETHER_KEEP").as_deref() == Ok("1"),
        };
        run(Command::new("ovsdb-tool").args([
            "create",
            sb.path("conf.db").to_str().expect("utf-8"),
            SCHEMA,
        ]));
        sb.start_ovsdb();
        sb.vsctl(&["--no-wait", "init"]);
        sb.start_vswitchd();
        sb
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// `unix:<dir>/db.sock`
    pub fn db_remote(&self) -> String {
        format!("unix:{}", self.path("db.sock").display())
    }

    pub fn db_sock(&self) -> PathBuf {
        self.path("db.sock")
    }

    /// tether's own OVSDB client on this sandbox, and `bridge` (of the test datapath) made
    /// sure of.
    pub fn bridge_db(&self, bridge: &str) -> tether::ovsdb::BridgeDb {
        let client = std::sync::Arc::new(
            tether::ovsdb::Client::connect(
                tether::ovsdb::Remote::Unix(self.db_sock()),
                tether::ovsdb::ClientOptions::default(),
                patience(Duration::from_secs(10)),
            )
            .expect("connect to the sandbox's ovsdb-server"),
        );
        tether::ovsdb::BridgeDb::ensure(client, bridge, datapath()).expect("ensure the bridge")
    }

    /// `<dir>/<bridge>.mgmt`, the bridge's OpenFlow socket.
    pub fn mgmt(&self, bridge: &str) -> PathBuf {
        self.path(&format!("{bridge}.mgmt"))
    }

    pub fn ns(&self) -> &Netns {
        &self.ns
    }

    fn daemon_env(&self, c: &mut Command) {
        for var in ["OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVS_SYSCONFDIR"] {
            c.env(var, &self.dir);
        }
    }

    fn tool(&self, tool: &str, args: &[&str]) -> Command {
        let mut c = Command::new(tool);
        self.daemon_env(&mut c);
        c.arg(format!("--timeout={}", tool_timeout())).args(args);
        c
    }

    pub fn start_ovsdb(&self) {
        let mut c = self.ns.command(&[
            "ovsdb-server",
            self.path("conf.db").to_str().expect("utf-8"),
            &format!("--remote=punix:{}", self.db_sock().display()),
            "--pidfile",
            "--log-file",
            "--detach",
            "--no-chdir",
            "-vconsole:off",
            "-vsyslog:off",
            "-vfile:info",
        ]);
        self.daemon_env(&mut c);
        run(&mut c);
    }

    pub fn start_vswitchd(&self) {
        let remote = self.db_remote();
        let mut argv = vec![
            "ovs-vswitchd",
            remote.as_str(),
            "--pidfile",
            "--log-file",
            "--detach",
            "--no-chdir",
            "-vconsole:off",
            "-vsyslog:off",
        ];
        if self.opts.dummy {
            argv.push("--enable-dummy");
        }
        let mut c = self.ns.command(&argv);
        self.daemon_env(&mut c);
        run(&mut c);
    }

    /// Pid of a running daemon (`ovsdb-server` or `ovs-vswitchd`), from its pid file.
    pub fn pid(&self, daemon: &str) -> Option<u32> {
        let pid: u32 = std::fs::read_to_string(self.path(&format!("{daemon}.pid")))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        pid_alive(pid).then_some(pid)
    }

    /// `kill -9` a daemon and wait until it is gone.
    pub fn kill9(&self, daemon: &str) {
        let pid = self
            .pid(daemon)
            .unwrap_or_else(|| panic!("{daemon} is not running"));
        run(Command::new("kill").args(["-KILL", &pid.to_string()]));
        wait_for(Duration::from_secs(5), &format!("{daemon} to die"), || {
            (!pid_alive(pid)).then_some(())
        });
        // A detached daemon is reaped by pid 1 a little later; until then the new one
        // may find the old pid "running" (kill -0 succeeds on zombies). Wait for the
        // reaping (bounded), and drop the stale pid file either way.
        for _ in 0..250 * super::timeout_scale() {
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_file(self.path(&format!("{daemon}.pid")));
    }

    pub fn vsctl(&self, args: &[&str]) -> String {
        run(&mut self.tool("ovs-vsctl", args))
    }

    pub fn try_vsctl(&self, args: &[&str]) -> Result<String, String> {
        try_run(&mut self.tool("ovs-vsctl", args))
    }

    pub fn ofctl(&self, args: &[&str]) -> String {
        run(&mut self.tool("ovs-ofctl", args))
    }

    pub fn try_ofctl(&self, args: &[&str]) -> Result<String, String> {
        try_run(&mut self.tool("ovs-ofctl", args))
    }

    pub fn appctl(&self, args: &[&str]) -> String {
        run(&mut self.tool("ovs-appctl", args))
    }

    /// Add a bridge the way tether expects one: the test datapath, OF1.0 + OF1.5.
    pub fn add_bridge(&self, name: &str) {
        self.vsctl(&[
            "add-br",
            name,
            "--",
            "set",
            "bridge",
            name,
            &format!("datapath_type={}", datapath()),
            "protocols=OpenFlow10,OpenFlow15",
        ]);
    }

    /// Add an internal port `name` to `bridge` (as a CNI adds a Pod's), with `port_ids` as
    /// the Port's external_ids.
    pub fn add_internal_port(&self, bridge: &str, name: &str, port_ids: &[(&str, &str)]) {
        let ids: Vec<String> = port_ids
            .iter()
            .map(|(k, v)| format!("external_ids:{k}={v}"))
            .collect();
        let mut args = vec!["add-port", bridge, name, "--", "set", "Interface", name];
        args.push("type=internal");
        if !ids.is_empty() {
            args.extend(["--", "set", "Port", name]);
            args.extend(ids.iter().map(String::as_str));
        }
        self.vsctl(&args);
    }

    /// `ovs-vsctl --format=json --columns=<cols> list <table> [record]` parsed.
    pub fn vsctl_json(&self, table: &str, record: Option<&str>, cols: &str) -> serde_json::Value {
        let columns = format!("--columns={cols}");
        let mut args = vec!["--format=json", columns.as_str(), "list", table];
        if let Some(r) = record {
            args.push(r);
        }
        serde_json::from_str(&self.vsctl(&args)).expect("ovs-vsctl JSON")
    }

    /// Canonical OF1.5 flow text: `--no-stats --no-names`, leading spaces trimmed, sorted.
    pub fn dump_flows(&self, bridge: &str, filter: Option<&str>) -> Vec<String> {
        self.try_dump_flows(bridge, filter)
            .unwrap_or_else(|e| panic!("dump-flows {bridge}: {e}"))
    }

    /// [`Sandbox::dump_flows`], or why not (e.g. while ovs-vswitchd restarts).
    pub fn try_dump_flows(
        &self,
        bridge: &str,
        filter: Option<&str>,
    ) -> Result<Vec<String>, String> {
        let mut args = vec![
            "-O",
            "OpenFlow15",
            "--no-stats",
            "--no-names",
            "dump-flows",
            bridge,
        ];
        if let Some(f) = filter {
            args.push(f);
        }
        let mut lines: Vec<String> = self
            .try_ofctl(&args)?
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect();
        lines.sort();
        Ok(lines)
    }

    /// Last `n` lines of each daemon log, for failure messages.
    pub fn logs(&self, n: usize) -> String {
        let mut s = String::new();
        for f in ["ovsdb-server.log", "ovs-vswitchd.log"] {
            if let Ok(text) = std::fs::read_to_string(self.path(f)) {
                let lines: Vec<&str> = text.lines().collect();
                s.push_str(&format!("--- {f}\n"));
                for l in &lines[lines.len().saturating_sub(n)..] {
                    s.push_str(l);
                    s.push('\n');
                }
            }
        }
        s
    }

    fn stop_daemon(&self, daemon: &str, extra: &[&str]) {
        let Some(pid) = self.pid(daemon) else {
            return;
        };
        let ctl = self.path(&format!("{daemon}.{pid}.ctl"));
        let mut c = Command::new("ovs-appctl");
        self.daemon_env(&mut c);
        c.args([
            "--timeout=5",
            "-t",
            ctl.to_str().unwrap_or_default(),
            "exit",
        ])
        .args(extra);
        let _ = c.output();
        for _ in 0..100 * super::timeout_scale() {
            if !pid_alive(pid) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .output();
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("sandbox {} logs:\n{}", self.dir.display(), self.logs(30));
        }
        if self.keep {
            eprintln!("kept sandbox {} (TETHER_KEEP=1)", self.dir.display());
            return;
        }
        self.stop_daemon("ovs-vswitchd", &["--cleanup"]);
        self.stop_daemon("ovsdb-server", &[]);
        // The namespace guard (a field) kills leftovers and deletes the netns after this.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
