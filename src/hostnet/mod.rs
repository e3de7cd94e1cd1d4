//! The host's network manager, around an ExternalNode takeover: who configures the NIC, and
//! the one step tether takes so that it keeps configuring the right link afterwards.
//!
//! Owns: detecting what manages a NIC (systemd-networkd, NetworkManager, ifupdown) for
//! `tether check` and the logs, and for systemd-networkd the runtime `.network` files and
//! `networkctl reload` (see `networkd` for why). Does not own the takeover itself (the
//! ExternalNode controller calls in through `controller::HostNetwork` at three points: before the
//! rename, on every sync while attached, after the NIC is back under its own name).
//!
//! NetworkManager gets an in-memory profile for the host port (`nm`, run by `nmcli`);
//! ifupdown needs no step (README "DHCP and network managers" says what each does after a
//! takeover, as tried in the systemd test container).

pub mod networkd;
pub mod nm;
mod nmcli;

pub use nmcli::NetworkManager;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What configures a NIC, as far as its state files say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Manager {
    Networkd {
        network_file: PathBuf,
        drop_ins: Vec<PathBuf>,
    },
    NetworkManager,
    Ifupdown,
    None,
}

impl fmt::Display for Manager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Manager::Networkd { network_file, .. } => {
                write!(f, "systemd-networkd ({})", network_file.display())
            }
            Manager::NetworkManager => f.write_str("NetworkManager"),
            Manager::Ifupdown => f.write_str("ifupdown (/etc/network/interfaces)"),
            Manager::None => f.write_str("no network manager"),
        }
    }
}

impl Manager {
    /// What tether does about it at a takeover, for `tether check`.
    pub fn plan(&self, nic: &str) -> String {
        let uplink = crate::netlink::uplink_name(nic);
        match self {
            Manager::Networkd { .. } => format!(
                "before the takeover tether writes {dir}/{} ({uplink} unmanaged) and {dir}/{} \
                 (the host port {nic} gets this configuration), then runs networkctl reload; \
                 both go when the NIC is given back",
                networkd::uplink_file_name(nic),
                networkd::host_file_name(nic),
                dir = networkd::CONFIG_DIR,
            ),
            Manager::NetworkManager => format!(
                "before the takeover tether gives the host port {nic} an in-memory \
                 NetworkManager profile {} (nmcli connection add save no: the settings and DHCP \
                 identity of {nic}'s own profile) and sets {nic} unmanaged (NetworkManager \
                 follows the NIC to {uplink}); once attached the profile is brought up; when \
                 the NIC is given back the profile goes, {nic} is managed again and its own \
                 profile up again",
                nm::profile_name(nic)
            ),
            Manager::Ifupdown => format!(
                "tether changes nothing: ifup's dhclient keeps renewing through {uplink} (its \
                 socket stays on the NIC) and puts the address on {nic}, the host port, by name"
            ),
            Manager::None => "nothing to tell".into(),
        }
    }
}

/// Where the managers keep their per-link state (tests point these at temp dirs).
#[derive(Clone, Debug)]
pub struct Paths {
    pub networkd_state: PathBuf,
    pub networkd_config: PathBuf,
    /// NetworkManager's per-device state files, by ifindex.
    pub nm_devices: PathBuf,
    /// ifupdown's `ifstate.<nic>` files.
    pub ifupdown_state: PathBuf,
}

impl Default for Paths {
    fn default() -> Paths {
        Paths {
            networkd_state: networkd::STATE_DIR.into(),
            networkd_config: networkd::CONFIG_DIR.into(),
            nm_devices: "/run/NetworkManager/devices".into(),
            ifupdown_state: "/run/network".into(),
        }
    }
}

/// Small text files only: state files and `.network` files.
const FILE_MAX: u64 = 1 << 20;

fn read(path: &Path) -> Option<String> {
    crate::files::read_text(path, FILE_MAX).ok()
}

/// False when this process is in another network namespace than PID 1 (a test's, or a
/// container's without its own init): the managers' state files, keyed by ifindex, then
/// describe other links, and their files are not this namespace's to write. Unknown (PID 1's
/// namespace unreadable, as under the unit with only CAP_NET_ADMIN) counts as the same:
/// the unit runs in the host's namespace.
pub fn in_init_netns() -> bool {
    match (
        std::fs::read_link("/proc/self/ns/net"),
        std::fs::read_link("/proc/1/ns/net"),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => true,
    }
}

/// Who manages link `ifindex` (called `nic`).
pub fn detect(paths: &Paths, nic: &str, ifindex: u32) -> Manager {
    if let Some(text) = read(&paths.networkd_state.join(ifindex.to_string())) {
        let st = networkd::parse_link_state(&text);
        if st.managed() {
            return Manager::Networkd {
                network_file: st.network_file.unwrap_or_default(),
                drop_ins: st.drop_ins,
            };
        }
    }
    if let Some(text) = read(&paths.nm_devices.join(ifindex.to_string())) {
        // `[device]` … `managed=true` (NetworkManager's nm-manager.c device state file).
        if text.lines().any(|l| l.trim() == "managed=true") {
            return Manager::NetworkManager;
        }
    }
    if paths.ifupdown_state.join(format!("ifstate.{nic}")).exists() {
        return Manager::Ifupdown;
    }
    Manager::None
}

/// Why a step on the host's network manager failed.
#[derive(Debug)]
pub struct HostNetError {
    pub op: String,
    pub detail: String,
}

impl fmt::Display for HostNetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.op, self.detail)
    }
}

fn err(op: impl Into<String>, detail: impl fmt::Display) -> HostNetError {
    HostNetError {
        op: op.into(),
        detail: detail.to_string(),
    }
}

/// What tether does about the host's network manager at a takeover: systemd-networkd's
/// runtime `.network` files, or NetworkManager's in-memory profile (whichever manages the
/// NIC; ifupdown needs nothing).
pub struct HostNet {
    pub networkd: Networkd,
    pub nm: NetworkManager,
}

impl HostNet {
    /// For the datapath type in use (`system` or `netdev`: the host port's kind to NM),
    /// keeping what NetworkManager's side must remember in tether's `state_dir`.
    pub fn for_datapath(datapath_type: &str, state_dir: &Path) -> HostNet {
        HostNet {
            networkd: Networkd::default(),
            nm: NetworkManager::for_datapath(datapath_type, Some(state_dir.to_path_buf())),
        }
    }

    /// See `controller::HostNetwork`.
    pub fn before_takeover(
        &self,
        nic: &str,
        ifindex: u32,
        uplink: &str,
    ) -> Result<Option<String>, HostNetError> {
        match self.networkd.before_takeover(nic, ifindex, uplink)? {
            Some(done) => Ok(Some(done)),
            None => self.nm.before_takeover(nic, ifindex),
        }
    }

    pub fn attached(&self, nic: &str, uplink: &str) -> Result<(), HostNetError> {
        self.networkd.attached(nic, uplink)?;
        self.nm.attached(nic, uplink)
    }

    pub fn released(&self, nic: &str) -> Result<(), HostNetError> {
        self.networkd.released(nic)?;
        self.nm.released(nic)
    }
}

/// systemd-networkd's runtime `.network` files and `networkctl reload`.
pub struct Networkd {
    /// Off when not in PID 1's network namespace ([`in_init_netns`]).
    pub enabled: bool,
    pub paths: Paths,
    /// The reload command (`networkctl reload`; tests substitute their own).
    pub reload: Vec<String>,
}

impl Default for Networkd {
    fn default() -> Networkd {
        Networkd {
            enabled: in_init_netns(),
            paths: Paths::default(),
            reload: vec!["networkctl".into(), "reload".into()],
        }
    }
}

/// A reload that hangs (D-Bus wedged) must not hang the ExternalNode worker.
const RELOAD_TIMEOUT: Duration = Duration::from_secs(20);

impl Networkd {
    fn dir(&self) -> &Path {
        &self.paths.networkd_config
    }

    /// Write `name` with `text` (atomically, mode 0644: networkd runs as its own user and
    /// the unit's UMask is 0077). Returns false when it already had that content.
    fn put(&self, name: &str, text: &str) -> Result<bool, HostNetError> {
        use std::io::Write;
        use std::os::unix::fs::PermissionsExt;
        let path = self.dir().join(name);
        self.dir_readable_by_networkd()?;
        if read(&path).as_deref() == Some(text) {
            return Ok(false);
        }
        let op = format!("write {}", path.display());
        let tmp = self.dir().join(format!(".{name}.tmp"));
        let mut f = std::fs::File::create(&tmp).map_err(|e| err(&op, e))?;
        f.set_permissions(std::fs::Permissions::from_mode(0o644))
            .and_then(|()| f.write_all(text.as_bytes()))
            .and_then(|()| f.sync_all())
            .map_err(|e| err(&op, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| err(&op, e))?;
        Ok(true)
    }

    /// networkd runs as its own user and skips, logging at debug level only, a directory it
    /// cannot read: one made under a 0077 umask is given o+rx.
    fn dir_readable_by_networkd(&self) -> Result<(), HostNetError> {
        use std::os::unix::fs::PermissionsExt;
        let dir = self.dir();
        let op = format!("directory {}", dir.display());
        let meta = std::fs::metadata(dir).map_err(|e| err(&op, e))?;
        let mode = meta.permissions().mode();
        if mode & 0o005 != 0o005 {
            log::warn!(
                "{op} has mode {:o}: systemd-networkd could not read it; adding o+rx",
                mode & 0o7777
            );
            std::fs::set_permissions(
                dir,
                std::fs::Permissions::from_mode((mode & 0o7777) | 0o005),
            )
            .map_err(|e| err(&op, e))?;
        }
        Ok(())
    }

    /// Remove `name` if it is one of tether's files. Returns whether it was there.
    fn remove(&self, name: &str) -> Result<bool, HostNetError> {
        let path = self.dir().join(name);
        match read(&path) {
            Some(t) if t.starts_with(networkd::HEADER) => std::fs::remove_file(&path)
                .map(|()| true)
                .map_err(|e| err(format!("remove {}", path.display()), e)),
            Some(_) => {
                log::warn!(
                    "{} is not tether's (no tether header); left in place",
                    path.display()
                );
                Ok(false)
            }
            None => Ok(false),
        }
    }

    fn run_reload(&self) -> Result<(), HostNetError> {
        run_command(&self.reload).map(drop)
    }
}

/// Run `cmd` (program and arguments) to its end within [`RELOAD_TIMEOUT`]; its stdout
/// (the first 1 MiB). A failure names the command, its exit status and its stderr.
pub(crate) fn run_command(cmd: &[String]) -> Result<String, HostNetError> {
    use std::io::Read;
    let shown = cmd.join(" ");
    let (prog, args) = cmd.split_first().ok_or_else(|| err("run", "no command"))?;
    let mut child = std::process::Command::new(prog)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| err(&shown, e))?;
    // Read stdout on the side: a chatty command must not block on a full pipe.
    let stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        if let Some(o) = stdout {
            let _ = o.take(FILE_MAX).read_to_string(&mut out);
        }
        out
    });
    let end = Instant::now() + RELOAD_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(st)) if st.success() => return Ok(reader.join().unwrap_or_default()),
            Ok(Some(st)) => {
                let mut msg = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = (&mut e).take(4096).read_to_string(&mut msg);
                }
                return Err(err(&shown, format!("{st}: {}", msg.trim())));
            }
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(err(&shown, format!("no answer within {RELOAD_TIMEOUT:?}")));
            }
            Err(e) => return Err(err(&shown, e)),
        }
    }
}

impl Networkd {
    /// See `controller::HostNetwork` (adapted in `controller::live`).
    pub fn before_takeover(
        &self,
        nic: &str,
        ifindex: u32,
        uplink: &str,
    ) -> Result<Option<String>, HostNetError> {
        if !self.enabled {
            return Ok(None);
        }
        let Manager::Networkd {
            network_file,
            drop_ins,
        } = detect(&self.paths, nic, ifindex)
        else {
            return Ok(None);
        };
        let iaid = read(&self.paths.networkd_state.join(ifindex.to_string()))
            .and_then(|t| networkd::parse_link_state(&t).dhcp_lease)
            .and_then(|lease| read(&lease))
            .and_then(|t| networkd::lease_iaid(&t));
        let text = read(&network_file).ok_or_else(|| {
            err(
                format!("read {}", network_file.display()),
                "unreadable (networkd's state names it)",
            )
        })?;
        let drop_ins: Vec<(PathBuf, String)> = drop_ins
            .into_iter()
            .filter_map(|p| read(&p).map(|t| (p, t)))
            .collect();
        let host = networkd::render_host(nic, &network_file, &text, &drop_ins, iaid);
        let mut changed = self.put(
            &networkd::uplink_file_name(nic),
            &networkd::render_uplink(nic, uplink),
        )?;
        changed |= self.put(&networkd::host_file_name(nic), &host)?;
        if changed {
            self.run_reload()?;
        }
        Ok(Some(format!(
            "systemd-networkd manages {nic} ({}): {uplink} marked unmanaged, the host port {nic} \
             configured from it ({}/00-tether-{nic}*.network)",
            network_file.display(),
            self.dir().display()
        )))
    }

    pub fn attached(&self, nic: &str, uplink: &str) -> Result<(), HostNetError> {
        // Only where tether set networkd up at the takeover (its host file is there): the
        // uplink must stay unmanaged even if someone removed that file.
        if !self.enabled || read(&self.dir().join(networkd::host_file_name(nic))).is_none() {
            return Ok(());
        }
        if self.put(
            &networkd::uplink_file_name(nic),
            &networkd::render_uplink(nic, uplink),
        )? {
            log::warn!(
                "{}/{} was missing; written again",
                self.dir().display(),
                networkd::uplink_file_name(nic)
            );
            self.run_reload()?;
        }
        Ok(())
    }

    pub fn released(&self, nic: &str) -> Result<(), HostNetError> {
        if !self.enabled {
            return Ok(());
        }
        let a = self.remove(&networkd::uplink_file_name(nic))?;
        let b = self.remove(&networkd::host_file_name(nic))?;
        if a || b {
            self.run_reload()?;
            log::info!("systemd-networkd: removed tether's files for {nic}; reloaded");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Dirs {
        root: PathBuf,
        nd: Networkd,
    }

    impl Drop for Dirs {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }

    fn dirs(tag: &str) -> Dirs {
        let root =
            std::env::temp_dir().join(format!("tether-hostnet-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let paths = Paths {
            networkd_state: root.join("netif/links"),
            networkd_config: root.join("network"),
            nm_devices: root.join("nm"),
            ifupdown_state: root.join("ifupdown"),
        };
        for d in [
            &paths.networkd_state,
            &paths.networkd_config,
            &paths.nm_devices,
            &paths.ifupdown_state,
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        let log = root.join("reloads");
        Dirs {
            nd: Networkd {
                enabled: true,
                paths,
                reload: vec![
                    "sh".into(),
                    "-c".into(),
                    format!("echo reload >> {}", log.display()),
                ],
            },
            root,
        }
    }

    fn reloads(d: &Dirs) -> usize {
        std::fs::read_to_string(d.root.join("reloads")).map_or(0, |s| s.lines().count())
    }

    #[test]
    fn detects_each_manager_by_its_state_files() {
        let d = dirs("detect");
        let p = &d.nd.paths;
        assert_eq!(detect(p, "eth1", 2), Manager::None);
        std::fs::write(p.ifupdown_state.join("ifstate.eth1"), "eth1\n").unwrap();
        assert_eq!(detect(p, "eth1", 2), Manager::Ifupdown);
        std::fs::write(p.nm_devices.join("2"), "[device]\nmanaged=true\n").unwrap();
        assert_eq!(detect(p, "eth1", 2), Manager::NetworkManager);
        std::fs::write(p.networkd_state.join("2"), "ADMIN_STATE=unmanaged\n").unwrap();
        assert_eq!(detect(p, "eth1", 2), Manager::NetworkManager);
        std::fs::write(
            p.networkd_state.join("2"),
            "ADMIN_STATE=configured\nNETWORK_FILE=/etc/systemd/network/10-nic.network\n",
        )
        .unwrap();
        assert_eq!(
            detect(p, "eth1", 2),
            Manager::Networkd {
                network_file: "/etc/systemd/network/10-nic.network".into(),
                drop_ins: vec![]
            }
        );
    }

    #[test]
    fn takeover_writes_both_files_reloads_once_and_release_removes_them() {
        let d = dirs("cycle");
        let src = d.root.join("10-nic.network");
        std::fs::write(
            &src,
            "[Match]\nMACAddress=02:00:00:00:01:10\n[Network]\nDHCP=ipv4\n",
        )
        .unwrap();
        std::fs::write(
            d.nd.paths.networkd_state.join("2"),
            format!("ADMIN_STATE=configured\nNETWORK_FILE={}\n", src.display()),
        )
        .unwrap();
        let did = d.nd.before_takeover("eth1", 2, "eth1~").unwrap();
        assert!(did.unwrap().starts_with("systemd-networkd manages eth1"));
        let cfg = &d.nd.paths.networkd_config;
        assert_eq!(
            std::fs::read_to_string(cfg.join("00-tether-eth1-uplink.network")).unwrap(),
            networkd::render_uplink("eth1", "eth1~")
        );
        let host = std::fs::read_to_string(cfg.join("00-tether-eth1.network")).unwrap();
        assert!(
            host.contains("[Match]\nName=eth1\nKind=openvswitch tun\n\n[Network]\nDHCP=ipv4\n"),
            "{host}"
        );
        assert!(!host.contains("MACAddress"), "{host}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(cfg.join("00-tether-eth1.network"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644);
        assert_eq!(reloads(&d), 1);
        // Again (a retried takeover): same files, no second reload.
        d.nd.before_takeover("eth1", 2, "eth1~").unwrap();
        assert_eq!(reloads(&d), 1);
        // Attached: nothing to do; the uplink file removed by hand comes back.
        d.nd.attached("eth1", "eth1~").unwrap();
        assert_eq!(reloads(&d), 1);
        std::fs::remove_file(cfg.join("00-tether-eth1-uplink.network")).unwrap();
        d.nd.attached("eth1", "eth1~").unwrap();
        assert!(cfg.join("00-tether-eth1-uplink.network").exists());
        assert_eq!(reloads(&d), 2);
        // Released: both gone, one reload; again: nothing.
        d.nd.released("eth1").unwrap();
        assert!(!cfg.join("00-tether-eth1.network").exists());
        assert!(!cfg.join("00-tether-eth1-uplink.network").exists());
        assert_eq!(reloads(&d), 3);
        d.nd.released("eth1").unwrap();
        assert_eq!(reloads(&d), 3);
    }

    #[test]
    fn a_directory_networkd_cannot_read_is_opened_up() {
        use std::os::unix::fs::PermissionsExt;
        let d = dirs("mode");
        let cfg = &d.nd.paths.networkd_config;
        std::fs::set_permissions(cfg, std::fs::Permissions::from_mode(0o700)).unwrap();
        let src = d.root.join("10-nic.network");
        std::fs::write(&src, "[Match]\nName=eth1\n[Network]\nDHCP=yes\n").unwrap();
        std::fs::write(
            d.nd.paths.networkd_state.join("2"),
            format!("ADMIN_STATE=configured\nNETWORK_FILE={}\n", src.display()),
        )
        .unwrap();
        d.nd.before_takeover("eth1", 2, "eth1~").unwrap();
        let mode = std::fs::metadata(cfg).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o705);
    }

    #[test]
    fn nothing_happens_where_networkd_does_not_manage_the_nic() {
        let d = dirs("none");
        assert_eq!(d.nd.before_takeover("eth1", 2, "eth1~").unwrap(), None);
        d.nd.attached("eth1", "eth1~").unwrap();
        d.nd.released("eth1").unwrap();
        assert_eq!(
            std::fs::read_dir(&d.nd.paths.networkd_config)
                .unwrap()
                .count(),
            0
        );
        assert_eq!(reloads(&d), 0);
    }

    #[test]
    fn a_file_not_written_by_tether_is_never_removed() {
        let d = dirs("foreign");
        let p = d.nd.paths.networkd_config.join("00-tether-eth1.network");
        std::fs::write(&p, "[Match]\nName=eth1\n").unwrap();
        d.nd.released("eth1").unwrap();
        assert!(p.exists());
        assert_eq!(reloads(&d), 0);
    }

    #[test]
    fn a_failing_reload_names_the_command() {
        let mut d = dirs("fail");
        d.nd.reload = vec!["sh".into(), "-c".into(), "echo no bus >&2; exit 3".into()];
        let src = d.root.join("10-nic.network");
        std::fs::write(&src, "[Match]\nName=eth1\n[Network]\nDHCP=yes\n").unwrap();
        std::fs::write(
            d.nd.paths.networkd_state.join("2"),
            format!("ADMIN_STATE=configuring\nNETWORK_FILE={}\n", src.display()),
        )
        .unwrap();
        let e = d.nd.before_takeover("eth1", 2, "eth1~").unwrap_err();
        assert_eq!(e.op, "sh -c echo no bus >&2; exit 3");
        assert_eq!(e.detail, "exit status: 3: no bus");
    }
}
