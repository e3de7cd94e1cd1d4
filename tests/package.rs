//! `scripts/package.sh`: what each package holds, read back with the packaging tools
//! themselves (`dpkg-deb`, `rpm`, `tar`), and the .rpm installed into a scratch root with
//! `rpm -i --root`. The .deb's install, upgrade and removal under a real systemd are in
//! `tests/systemd_vm.rs` (`deb_package_lifecycle_under_a_real_systemd`).
#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Out(PathBuf);

impl Drop for Out {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn build() -> Out {
    let out = Out(std::env::temp_dir().join(format!("tt-pkgs-{}", common::unique_suffix())));
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    common::run(Command::new(repo.join("scripts/package.sh")).args([
        "--binary",
        common::tether::binary().to_str().unwrap(),
        "--version",
        "0.1.0",
        "--out",
        out.0.to_str().unwrap(),
    ]));
    out
}

const FILES: &[&str] = &[
    "/etc/tether",
    "/etc/tether/tether.yaml",
    "/usr/bin/tether",
    "/usr/lib/systemd/system/tether.service",
    "/usr/share/doc/tether",
    "/usr/share/doc/tether/README.md",
    "/usr/share/doc/tether/copyright",
    "/usr/share/doc/tether/examples",
    "/usr/share/doc/tether/examples/externalnode.yaml",
    "/usr/share/doc/tether/examples/trafficcontrol-mirror.yaml",
    "/usr/share/doc/tether/examples/trafficcontrol-redirect.yaml",
    "/usr/share/doc/tether/rbac.yaml",
    "/usr/share/man/man8/tether.8.gz",
];

#[test]
fn packages_hold_what_an_operator_needs() {
    if !common::privileged("packages_hold_what_an_operator_needs") {
        return;
    }
    let out = build();
    let rpm = out.0.join("tether-0.1.0-1.x86_64.rpm");
    let deb = out.0.join("tether_0.1.0_amd64.deb");
    let tar = out.0.join("tether-0.1.0-x86_64.tar.gz");

    // The .rpm: files, metadata, scriptlets.
    let rpm_s = rpm.to_str().unwrap();
    let listed = common::run(Command::new("rpm").args(["-qlp", rpm_s]));
    assert_eq!(listed.lines().collect::<Vec<_>>(), FILES);
    let info = common::run(Command::new("rpm").args([
        "-qp",
        "--queryformat",
        "%{NAME} %{VERSION} %{LICENSE}\n",
        rpm_s,
    ]));
    assert_eq!(info, "tether 0.1.0 Apache-2.0\n");
    let requires = common::run(Command::new("rpm").args(["-qp", "--requires", rpm_s]));
    assert!(requires.lines().any(|l| l == "openvswitch"), "{requires}");
    let config = common::run(Command::new("rpm").args(["-qp", "--configfiles", rpm_s]));
    assert_eq!(config, "/etc/tether/tether.yaml\n");
    let scripts = common::run(Command::new("rpm").args(["-qp", "--scripts", rpm_s]));
    assert!(scripts.contains("postinstall scriptlet"), "{scripts}");
    assert!(
        scripts.contains("systemctl try-restart tether.service"),
        "{scripts}"
    );
    assert!(scripts.contains("preuninstall scriptlet"), "{scripts}");
    assert!(
        scripts.contains("systemctl stop tether.service"),
        "{scripts}"
    );
    // Nothing in them touches a link, an address or the bridge.
    for word in ["ip ", "ovs-vsctl", "tether reset\n", "ifdown", "nmcli"] {
        assert!(
            !scripts.contains(word),
            "scriptlets contain {word:?}: {scripts}"
        );
    }

    // Installed into a scratch root (its scriptlets would run chrooted there, where there
    // is no shell: --noscripts; Requires are the host's business: --nodeps).
    let root = out.0.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let root_s = root.to_str().unwrap();
    common::run(Command::new("rpm").args(["--root", root_s, "--initdb"]));
    common::run(Command::new("rpm").args([
        "-i",
        "--root",
        root_s,
        "--nodeps",
        "--noscripts",
        rpm_s,
    ]));
    let mode = |p: &str| {
        std::fs::metadata(root.join(p.trim_start_matches('/')))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode("/usr/bin/tether"), 0o755);
    assert_eq!(mode("/etc/tether"), 0o700);
    assert_eq!(mode("/etc/tether/tether.yaml"), 0o600);
    let unit = std::fs::read_to_string(root.join("usr/lib/systemd/system/tether.service")).unwrap();
    assert!(
        unit.lines()
            .any(|l| l == "ExecStart=/usr/bin/tether run --config /etc/tether/tether.yaml"),
        "the packaged unit runs the packaged binary"
    );
    let q = common::run(Command::new("rpm").args(["--root", root_s, "-q", "tether"]));
    assert_eq!(q, "tether-0.1.0-1.x86_64\n");

    // The .deb: metadata and the config file dpkg keeps on upgrade.
    let deb_s = deb.to_str().unwrap();
    let field = |f: &str| common::run(Command::new("dpkg-deb").args(["-f", deb_s, f]));
    assert_eq!(field("Package"), "tether\n");
    assert_eq!(field("Version"), "0.1.0\n");
    assert_eq!(field("Depends"), "openvswitch-switch\n");
    let conffiles = common::run(Command::new("dpkg-deb").args(["--info", deb_s, "conffiles"]));
    assert_eq!(conffiles, "/etc/tether/tether.yaml\n");
    let listing = common::run(Command::new("dpkg-deb").args(["-c", deb_s]));
    for want in [
        "-rw------- root/root",
        "./etc/tether/tether.yaml",
        "./lib/systemd/system/tether.service",
        "./usr/share/man/man8/tether.8.gz",
    ] {
        assert!(listing.contains(want), "{want} in {listing}");
    }

    // The tarball: the same tree under one directory, with an INSTALL note.
    let names = common::run(Command::new("tar").args(["-tzf", tar.to_str().unwrap()]));
    for want in [
        "tether-0.1.0-x86_64/INSTALL",
        "tether-0.1.0-x86_64/usr/bin/tether",
        "tether-0.1.0-x86_64/etc/tether/tether.yaml",
        "tether-0.1.0-x86_64/lib/systemd/system/tether.service",
    ] {
        assert!(names.lines().any(|l| l == want), "{want} in {names}");
    }

    // The man page is tether's own --help.
    let man = common::run(Command::new("sh").args([
        "-c",
        &format!(
            "dpkg-deb --fsys-tarfile {deb_s} | tar -xOf - ./usr/share/man/man8/tether.8.gz | gzip -dc"
        ),
    ]));
    assert!(man.starts_with(".TH TETHER 8"), "{man}");
    assert!(man.contains("tether plan [--json]"), "{man}");
}
