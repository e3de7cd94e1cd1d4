//! The runner's steps against a stand-in `nmcli` (a shell script that logs its arguments
//! and answers `device show` and `connection show` from files): which commands run, in
//! which order, and what tether keeps in its state directory between takeover and give-back.

use super::*;

const OWN: &str = "148ceed3-3d3e-3dc9-930e-80cf6365b952";
/// What NetworkManager 1.42 showed after the give-back in the kernel tier when it took
/// the NIC's static addresses as an external connection.
const EXTERNAL: &str = "1382c7af-60f8-4754-bd03-5c03896cec4a";

struct Bed {
    root: PathBuf,
    nm: NetworkManager,
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn bed(tag: &str) -> Bed {
    let root = std::env::temp_dir().join(format!("tether-nmcli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let paths = Paths {
        networkd_state: root.join("netif/links"),
        networkd_config: root.join("network"),
        nm_devices: root.join("nm"),
        ifupdown_state: root.join("ifupdown"),
    };
    for d in [
        &paths.networkd_state,
        &paths.nm_devices,
        &root.join("profiles"),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    let script = format!(
        "echo \"$*\" >> {log}; case \"$*\" in \
         *'device show eth1') cat {root}/device ;; \
         *'connection show uuid '*) cat {root}/profile ;; esac",
        log = root.join("log").display(),
        root = root.display(),
    );
    let nm = NetworkManager {
        enabled: true,
        paths,
        runtime_profiles: root.join("profiles"),
        port: PortKind::Tap,
        nmcli: vec!["sh".into(), "-c".into(), script, "nmcli".into()],
        state_dir: Some(root.join("state")),
    };
    Bed { root, nm }
}

impl Bed {
    /// What `nmcli device show eth1` answers from now on.
    fn device(&self, uuid: &str, state: &str, connection: &str) {
        std::fs::write(
            self.root.join("device"),
            format!(
                "GENERAL.CON-UUID:{uuid}\nGENERAL.STATE:{state}\nGENERAL.CONNECTION:{connection}\n"
            ),
        )
        .unwrap();
    }

    /// The commands run so far, one line each, and forget them.
    fn calls(&self) -> Vec<String> {
        let log = self.root.join("log");
        let calls = std::fs::read_to_string(&log).unwrap_or_default();
        let _ = std::fs::remove_file(log);
        calls.lines().map(str::to_string).collect()
    }

    fn kept(&self) -> Option<String> {
        std::fs::read_to_string(self.root.join("state/nm-eth1.profile")).ok()
    }

    /// NetworkManager's in-memory profile file for tether's profile (what `has_profile` sees).
    fn tether_profile(&self, present: bool) {
        let path = self.root.join("profiles/tether-eth1.nmconnection");
        if present {
            std::fs::write(path, "").unwrap();
        } else {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Takeover, then a give-back where NetworkManager has put an external connection on the
/// NIC: the NIC's own profile, kept by UUID from the takeover, is brought up again.
#[test]
fn the_nics_own_profile_is_kept_at_the_takeover_and_brought_up_at_the_give_back() {
    let b = bed("cycle");
    std::fs::write(b.nm.paths.nm_devices.join("2"), "[device]\nmanaged=true\n").unwrap();
    b.device(OWN, "100 (connected)", "nic");
    // Every profile field empty: the values themselves are nm.rs's tests.
    std::fs::write(
        b.root.join("profile"),
        "\n".repeat(nm::profile_fields().len()),
    )
    .unwrap();
    let did = b.nm.before_takeover("eth1", 2).unwrap();
    assert!(did.is_some_and(|d| d.contains("tether-eth1")));
    let calls = b.calls();
    assert_eq!(calls.len(), 4, "{calls:#?}");
    assert_eq!(calls[0], "-t -f GENERAL,DHCP4,DHCP6 device show eth1");
    assert!(calls[1].ends_with(&format!("connection show uuid {OWN}")));
    assert!(
        calls[2].starts_with("connection add save no type tun tun.mode tap con-name tether-eth1")
    );
    assert_eq!(calls[3], "device set eth1 managed no");
    assert_eq!(b.kept(), Some(format!("{OWN}\n")));

    b.tether_profile(true);
    b.device(EXTERNAL, "100 (connected (externally))", "eth1");
    b.nm.released("eth1").unwrap();
    assert_eq!(
        b.calls(),
        [
            "connection delete tether-eth1".to_string(),
            "device set eth1 managed yes".into(),
            "-t -f GENERAL,DHCP4,DHCP6 device show eth1".into(),
            format!("connection up uuid {OWN}"),
        ]
    );
    assert_eq!(b.kept(), None);
}

/// NetworkManager already on the NIC's own profile (as after a DHCP profile): no `up`,
/// which would start its activation over. With no tether profile left (a reboot) nothing
/// runs, and a stale UUID goes.
#[test]
fn the_give_back_leaves_nm_alone_when_it_is_on_the_nics_profile_or_has_nothing_of_tethers() {
    let b = bed("already");
    std::fs::create_dir_all(b.root.join("state")).unwrap();
    std::fs::write(b.root.join("state/nm-eth1.profile"), format!("{OWN}\n")).unwrap();
    b.tether_profile(true);
    b.device(OWN, "70 (connecting (getting IP configuration))", "nic");
    b.nm.released("eth1").unwrap();
    assert_eq!(
        b.calls(),
        [
            "connection delete tether-eth1",
            "device set eth1 managed yes",
            "-t -f GENERAL,DHCP4,DHCP6 device show eth1",
        ]
    );
    assert_eq!(b.kept(), None);

    std::fs::write(b.root.join("state/nm-eth1.profile"), format!("{OWN}\n")).unwrap();
    b.tether_profile(false);
    b.nm.released("eth1").unwrap();
    assert_eq!(b.calls(), Vec::<String>::new());
    assert_eq!(b.kept(), None);
}
