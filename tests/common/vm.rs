//! A VM with a real systemd: the cached Debian tree (`scripts/vm-tree.sh`) booted with
//! `systemd-nspawn --boot` on an overlay (the tree itself is never written), inside a network
//! namespace the test owns. Its NIC `eth1` is one end of a veth whose other end (`eth0`,
//! 192.0.2.1) sits in a second namespace, the "gateway": the only network the VM has.
//!
//! PID 1 on this machine is not systemd, so the container runs with `--register=no
//! --keep-unit`. Commands run inside it through `nsenter` into all of the container's
//! namespaces. Dropping the [`Vm`] (panics included) kills the container, unmounts the
//! overlay and removes its directory; `scripts/cleanup-stale.sh` does the same for a run that
//! was SIGKILLed (the directory is `/tmp/tt-<pid>-…`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::{Netns, run, try_run, unique_suffix};

/// The VM NIC's MAC and address; the gateway's address.
pub const NIC: &str = "eth1";
pub const NIC_MAC: &str = "02:00:00:00:01:10";
pub const VM_IP: &str = "192.0.2.10";
pub const GW_IP: &str = "192.0.2.1";

const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The cached tree, built on first use (minutes: debootstrap; cached after).
pub fn tree() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/vm-tree.sh");
    let out = run(Command::new(&script).stderr(Stdio::inherit()));
    let p = PathBuf::from(out.trim());
    assert!(p.join(".complete").exists(), "vm-tree.sh printed {p:?}");
    p
}

/// How the NIC gets its address before boot.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Addressing {
    /// 192.0.2.10/24 and a default route via the gateway, set from outside (as a cloud's
    /// static configuration would have done).
    Static,
    /// None: something inside the VM (a DHCP client) configures it.
    None,
}

pub struct Vm {
    pub name: String,
    dir: PathBuf,
    root: PathBuf,
    /// The VM's network namespace (replaced by [`Vm::power_cycle`]).
    pub net: Netns,
    /// The gateway: 192.0.2.1 on `eth0`, the other end of the VM's NIC.
    pub gw: Netns,
    nspawn: Option<Child>,
    leader: u32,
}

impl Vm {
    /// [`Vm::new`] then [`Vm::start`].
    pub fn boot(tag: &str, addressing: Addressing) -> Vm {
        let mut vm = Vm::new(tag, addressing);
        vm.start();
        vm
    }

    /// Mount an overlay of the tree and wire the network; not booted yet (files written
    /// now are there at first boot).
    pub fn new(tag: &str, addressing: Addressing) -> Vm {
        let tree = tree();
        let suffix = unique_suffix();
        let name = format!("tt-{suffix}-{tag}");
        let dir = PathBuf::from(format!("/tmp/{name}"));
        let root = dir.join("root");
        for d in ["upper", "work", "root"] {
            std::fs::create_dir_all(dir.join(d)).expect("create vm dirs");
        }
        run(Command::new("mount").args([
            "-t",
            "overlay",
            "overlay",
            "-o",
            &format!(
                "lowerdir={},upperdir={},workdir={}",
                tree.display(),
                dir.join("upper").display(),
                dir.join("work").display()
            ),
            root.to_str().expect("utf-8 path"),
        ]));
        let gw = Netns::new(&format!("{tag}-gw"));
        let net = Netns::new(&format!("{tag}-vm"));
        wire(&net, &gw, addressing);
        Vm {
            name,
            dir,
            root,
            net,
            gw,
            nspawn: None,
            leader: 0,
        }
    }

    /// Boot; returns once systemd reports the system running (or degraded).
    pub fn start(&mut self) {
        assert!(self.nspawn.is_none(), "already running");
        self.start_container();
    }

    /// The VM's private directory on the host (logs of helpers running outside it).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The container's root as the host sees it (writes land in the overlay).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Write a file inside the VM (parents created).
    pub fn write(&self, path: &str, contents: &str) {
        let p = self.root.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir in vm");
        std::fs::write(&p, contents).unwrap_or_else(|e| panic!("write {p:?}: {e}"));
    }

    /// Copy a host file into the VM.
    pub fn copy_in(&self, from: &Path, to: &str, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        let p = self.root.join(to.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir in vm");
        std::fs::copy(from, &p).unwrap_or_else(|e| panic!("copy {from:?} → {p:?}: {e}"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    fn start_container(&mut self) {
        let console = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("console.log"))
            .expect("console log");
        let child = Command::new("systemd-nspawn")
            .args([
                "--quiet",
                "--boot",
                "--register=no",
                "--keep-unit",
                "--console=pipe",
                // A VM's root has CAP_NET_ADMIN; nspawn drops it unless asked, even with a
                // network namespace of the container's own (ovs-vswitchd's taps need it).
                "--capability=CAP_NET_ADMIN",
                "--bind=/dev/net/tun",
            ])
            .arg(format!(
                "--network-namespace-path=/run/netns/{}",
                self.net.name()
            ))
            .arg(format!("--machine={}", self.name))
            .arg("-D")
            .arg(&self.root)
            // A VM's /proc/sys/net is writable (tether sets the host port's per-device
            // settings there); nspawn mounts /proc/sys read-only unless told which part
            // of the API file systems the container may write (systemd-nspawn(1),
            // $SYSTEMD_NSPAWN_API_VFS_WRITABLE).
            .env("SYSTEMD_NSPAWN_API_VFS_WRITABLE", "network")
            .stdin(Stdio::null())
            .stdout(console.try_clone().expect("dup"))
            .stderr(console)
            .spawn()
            .expect("spawn systemd-nspawn (package systemd-container)");
        let pid = child.id();
        self.nspawn = Some(child);
        // The container's PID 1 is nspawn's child once it runs systemd: before that, the
        // child nspawn forks first (its "outer child") sets up and exits, and a pid taken
        // then is gone by the time it is used (seen on a loaded machine: every VM of a run
        // "failed to boot" with nsenter finding no /proc/<pid>/ns).
        self.leader = wait(Duration::from_secs(30), "the container's PID 1", || {
            let child: u32 = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse().ok())?;
            let comm = std::fs::read_to_string(format!("/proc/{child}/comm")).ok()?;
            (comm.trim() == "systemd").then_some(child)
        });
        // Six VMs booting at once on two cores: allow 150 s, and say what was pending.
        let end = Instant::now() + Duration::from_secs(150);
        let state = loop {
            let s = self
                .try_sh("systemctl is-system-running")
                .unwrap_or_else(|e| e);
            // `degraded` exits 1, so it arrives inside the error text: its last word.
            let s = s.split_whitespace().last().unwrap_or("").to_string();
            if matches!(s.as_str(), "running" | "degraded") {
                break s;
            }
            if Instant::now() >= end {
                let jobs = self
                    .try_sh("systemctl list-jobs --no-legend --no-pager")
                    .unwrap_or_else(|e| e);
                panic!(
                    "timed out after 150 s waiting for systemd in the vm to boot: \
                     is-system-running says {s:?}; jobs:\n{jobs}"
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        if state == "degraded" {
            eprintln!(
                "vm {}: degraded at boot:\n{}",
                self.name,
                self.sh("systemctl --failed --no-legend")
            );
        }
    }

    fn command(&self, script: &str) -> Command {
        let mut c = Command::new("nsenter");
        c.arg("-t")
            .arg(self.leader.to_string())
            .args(["-a", "--", "/usr/bin/env", "-i"])
            .arg(format!("PATH={PATH}"))
            .args(["LANG=C.UTF-8", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0"])
            .args(["/bin/bash", "-ec", script]);
        c.stdin(Stdio::null());
        c
    }

    /// A bash script inside the VM (`set -e`); panics on failure; stdout.
    pub fn sh(&self, script: &str) -> String {
        match self.try_sh(script) {
            Ok(o) => o,
            Err(e) => panic!("in vm {}: {e}", self.name),
        }
    }

    pub fn try_sh(&self, script: &str) -> Result<String, String> {
        try_run(&mut self.command(script))
    }

    /// The exit status of a script inside the VM, and its stdout+stderr.
    pub fn status(&self, script: &str) -> (i32, String) {
        let out = self.command(script).output().expect("run nsenter");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code().unwrap_or(-1), text)
    }

    /// `systemctl show -p <prop> --value <unit>`.
    pub fn prop(&self, unit: &str, prop: &str) -> String {
        self.sh(&format!("systemctl show -p {prop} --value {unit}"))
            .trim()
            .to_string()
    }

    /// The unit's journal (message text only).
    pub fn journal(&self, unit: &str, extra: &str) -> String {
        self.try_sh(&format!(
            "journalctl -u {unit} --no-pager -o cat {extra} 2>/dev/null"
        ))
        .unwrap_or_default()
    }

    /// `systemctl reboot` inside; waits for the container to exit and returns nspawn's status
    /// (133: a reboot was asked for). The caller boots it again with [`Vm::power_cycle`].
    pub fn reboot(&mut self) -> ExitStatus {
        let _ = self.try_sh("systemctl reboot");
        let mut child = self.nspawn.take().expect("container running");
        let status = wait(
            Duration::from_secs(60),
            "the container to shut down",
            || child.try_wait().ok().flatten(),
        );
        self.leader = 0;
        status
    }

    /// Boot again after [`Vm::reboot`] with the kernel state a real reboot leaves: a new
    /// network namespace whose NIC is fresh (`eth1`, same MAC, configured as at first boot)
    /// and none of OVS's devices; the overlay (disks: OVSDB, /etc) keeps what it had.
    pub fn power_cycle(&mut self, addressing: Addressing) {
        assert!(self.nspawn.is_none(), "power_cycle after reboot()");
        let net = Netns::new(&format!(
            "{}-vm",
            self.name.rsplit('-').next().unwrap_or("x")
        ));
        // Dropping the old namespace takes the old veth (and its gateway end) with it, but
        // the kernel tears a namespace down in the background: wait for the gateway's end
        // to go, or the new pair's `eth0` exists already (a flake seen in CI).
        self.net = net;
        wait(
            Duration::from_secs(10),
            "the old gateway veth to go",
            || {
                self.gw
                    .try_exec(&["ip", "link", "show", "eth0"])
                    .is_err()
                    .then_some(())
            },
        );
        wire(&self.net, &self.gw, addressing);
        self.start_container();
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.nspawn.take() {
            if self.leader != 0 {
                // SIGKILL to the container's PID 1 ends its PID namespace, every process in it.
                let _ = Command::new("kill")
                    .args(["-KILL", &self.leader.to_string()])
                    .output();
            }
            let end = Instant::now() + Duration::from_secs(20);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A DHCP server on the gateway's `eth0`: `dnsmasq` with 2-minute leases (its minimum),
/// 192.0.2.10 reserved for the VM NIC's MAC and the gateway as router. No DNS. Killed on
/// drop; its log (`--log-dhcp`) is a file.
pub struct Dnsmasq {
    child: Child,
    pub log: PathBuf,
}

impl Dnsmasq {
    /// DHCPv4 with 2-minute leases, the NIC's MAC reserved for the VM's address.
    pub fn start(gw: &Netns, dir: &Path) -> Dnsmasq {
        Dnsmasq::spawn(gw, dir, &[format!("--dhcp-host={NIC_MAC},{VM_IP}")])
    }

    /// DHCPv4 keyed by client-id (`client_id` reserved for the VM's address) and stateful
    /// DHCPv6 from 2001:db8:1::100–1ff with router advertisements, 2-minute leases both: a
    /// client whose client-id, DUID or IAID changes gets other addresses.
    pub fn start_by_client_id(gw: &Netns, dir: &Path, client_id: &str) -> Dnsmasq {
        gw.ip(&[
            "-6",
            "addr",
            "add",
            "2001:db8:1::1/64",
            "dev",
            "eth0",
            "nodad",
        ]);
        Dnsmasq::spawn(
            gw,
            dir,
            &[
                format!("--dhcp-host=id:{client_id},{VM_IP}"),
                "--dhcp-range=2001:db8:1::100,2001:db8:1::1ff,64,2m".into(),
                "--enable-ra".into(),
                "--ra-param=eth0,10,600".into(),
            ],
        )
    }

    fn spawn(gw: &Netns, dir: &Path, extra: &[String]) -> Dnsmasq {
        let log = dir.join("dnsmasq.log");
        let mut args: Vec<String> = [
            "dnsmasq",
            "--keep-in-foreground",
            "--conf-file=/dev/null",
            "--interface=eth0",
            "--bind-interfaces",
            "--port=0",
            "--dhcp-range=192.0.2.50,192.0.2.99,255.255.255.0,2m",
        ]
        .map(String::from)
        .into();
        args.extend(extra.iter().cloned());
        args.extend([
            format!("--dhcp-option=option:router,{GW_IP}"),
            format!("--dhcp-leasefile={}", dir.join("leases").display()),
            "--pid-file=".into(),
            "--log-dhcp".into(),
            format!("--log-facility={}", log.display()),
        ]);
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let child = gw
            .command(&argv)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn dnsmasq (package dnsmasq-base)");
        Dnsmasq { child, log }
    }

    /// `DHCPREPLY` lines so far (DHCPv6 leases granted or renewed).
    pub fn replies(&self) -> Vec<String> {
        self.lines_with("DHCPREPLY")
    }

    /// `DHCPACK` lines so far (each one a lease granted or renewed).
    pub fn acks(&self) -> Vec<String> {
        self.lines_with("DHCPACK")
    }

    fn lines_with(&self, word: &str) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(word))
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Dnsmasq {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// eth1 (02:00:00:00:01:10) in `net` ↔ eth0 in `gw`, both up.
fn wire(net: &Netns, gw: &Netns, addressing: Addressing) {
    net.veth_to(NIC, gw, "eth0");
    // Down while the MAC changes, as a NIC that had this MAC from the start: the kernel
    // derives the IPv6 link-local address from the MAC when the link comes up.
    net.ip(&["link", "set", NIC, "down"]);
    net.ip(&["link", "set", NIC, "address", NIC_MAC]);
    net.ip(&["link", "set", NIC, "up"]);
    if addressing == Addressing::Static {
        net.ip(&["addr", "add", &format!("{VM_IP}/24"), "dev", NIC]);
        net.ip(&["route", "add", "default", "via", GW_IP]);
    }
    gw.ip(&["addr", "add", &format!("{GW_IP}/24"), "dev", "eth0"]);
    // The userspace datapath does not fill in checksums a veth left to offload.
    let _ = gw.try_exec(&["ethtool", "-K", "eth0", "tx", "off"]);
}

fn wait<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() >= end {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        if std::thread::panicking() && self.nspawn.is_some() {
            eprintln!(
                "--- vm {}: journal (tether, openvswitch, networking), last 80 lines:\n{}",
                self.name,
                self.try_sh(
                    "journalctl --no-pager -o short-monotonic -n 80 -u tether -u ovs-vswitchd \
                     -u ovsdb-server -u systemd-networkd -u NetworkManager -u networking"
                )
                .unwrap_or_else(|e| e)
            );
        }
        self.stop();
        if std::env::var("TETHER_KEEP").as_deref() == Ok("1") {
            eprintln!(
                "kept {} (TETHER_KEEP=1; overlay still mounted)",
                self.dir.display()
            );
            return;
        }
        let _ = Command::new("umount").arg(&self.root).output();
        let _ = Command::new("umount").arg("-l").arg(&self.root).output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
