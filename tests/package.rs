//! `scripts/package.sh`: what each package holds, read back with the packaging tools
//! themselves (`dpkg-deb`, `rpm`, `tar`), the .rpm installed into a scratch root with
//! `rpm -i --root`, and the tarball installed with its `install.sh --root` into a scratch
//! root laid out as a merged-/usr system. The .deb's install, upgrade and removal under a
//! real systemd are in `tests/systemd_vm.rs` (`deb_package_lifecycle_under_a_real_systemd`).
//!
//! One packaging run (most of this file's time) is shared by the tests below; it is made
//! under `umask 077`, so a mode that came from the caller's umask shows as a wrong mode.
#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `scripts/package.sh` for `formats` into `out`, run under `umask`.
fn package(umask: &str, formats: &str, out: &Path) -> Result<String, String> {
    common::try_run(with_umask(umask, &repo().join("scripts/package.sh")).args([
        "--binary",
        common::tether::binary().to_str().unwrap(),
        "--version",
        "0.1.0",
        "--out",
        out.to_str().unwrap(),
        "--formats",
        formats,
        "--fast",
    ]))
}

/// `program` run by a shell that first sets `umask` (no `unsafe` `pre_exec` needed).
fn with_umask(umask: &str, program: &Path) -> Command {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &format!("umask {umask} && exec \"$0\" \"$@\"")])
        .arg(program);
    cmd
}

/// The tests below that use [`packages`]: the last of them to finish removes its directory.
const SHARING: usize = 4;
static SHARED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
static FINISHED: AtomicUsize = AtomicUsize::new(0);

/// The shared packaging run's output directory (`/tmp/tt-<pid>-…`, which
/// `scripts/cleanup-stale.sh` removes if a filtered or killed run leaves it behind).
struct Packages(&'static Path);

impl Packages {
    fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
}

impl Drop for Packages {
    fn drop(&mut self) {
        if FINISHED.fetch_add(1, Ordering::SeqCst) + 1 == SHARING {
            let _ = std::fs::remove_dir_all(self.0);
        }
    }
}

/// All three formats, built once (under `umask 077`) for every test in this file.
fn packages() -> Packages {
    let built = SHARED.get_or_init(|| {
        let out = std::env::temp_dir().join(format!("tt-{}-pkgs", common::unique_suffix()));
        package("077", "deb,rpm,tar", &out).map(|_| out)
    });
    match built {
        Ok(dir) => Packages(dir),
        Err(e) => panic!("the shared packaging run failed: {e}"),
    }
}

/// A directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("tt-{}-{tag}", common::unique_suffix()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
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
    let out = packages();
    let rpm = out.path("tether-0.1.0-1.x86_64.rpm");
    let deb = out.path("tether_0.1.0_amd64.deb");
    let tar = out.path("tether-0.1.0-x86_64.tar.gz");

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
    let scratch = Scratch::new("rpm-root");
    let root = &scratch.0;
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

    // The tarball: the .rpm's tree under one directory, with an INSTALL note and the
    // install.sh it names (every entry and its mode: `package_modes_do_not_come_from_the_umask`).
    let note = common::run(Command::new("tar").args([
        "-xzOf",
        tar.to_str().unwrap(),
        "tether-0.1.0-x86_64/INSTALL",
    ]));
    assert!(note.lines().any(|l| l == "  ./install.sh"), "{note}");

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

/// `mode name` of each line of a `tar -tv`, `dpkg-deb -c` or `rpm -qlv` listing, sorted by
/// name (tar lists in directory order).
fn modes(listing: &str) -> Vec<String> {
    let mut out: Vec<(String, String)> = listing
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[f.len() - 1].to_owned(), f[0].to_owned())
        })
        .collect();
    out.sort();
    out.into_iter()
        .map(|(name, mode)| format!("{mode} {name}"))
        .collect()
}

/// Every entry of the tarball, with its mode; `T` is its top directory.
const TAR_MODES: &[&str] = &[
    "drwxr-xr-x T/",
    "-rw-r--r-- T/INSTALL",
    "drwxr-xr-x T/etc/",
    "drwx------ T/etc/tether/",
    "-rw------- T/etc/tether/tether.yaml",
    "-rwxr-xr-x T/install.sh",
    "drwxr-xr-x T/usr/",
    "drwxr-xr-x T/usr/bin/",
    "-rwxr-xr-x T/usr/bin/tether",
    "drwxr-xr-x T/usr/lib/",
    "drwxr-xr-x T/usr/lib/systemd/",
    "drwxr-xr-x T/usr/lib/systemd/system/",
    "-rw-r--r-- T/usr/lib/systemd/system/tether.service",
    "drwxr-xr-x T/usr/share/",
    "drwxr-xr-x T/usr/share/doc/",
    "drwxr-xr-x T/usr/share/doc/tether/",
    "-rw-r--r-- T/usr/share/doc/tether/README.md",
    "-rw-r--r-- T/usr/share/doc/tether/copyright",
    "drwxr-xr-x T/usr/share/doc/tether/examples/",
    "-rw-r--r-- T/usr/share/doc/tether/examples/externalnode.yaml",
    "-rw-r--r-- T/usr/share/doc/tether/examples/trafficcontrol-mirror.yaml",
    "-rw-r--r-- T/usr/share/doc/tether/examples/trafficcontrol-redirect.yaml",
    "-rw-r--r-- T/usr/share/doc/tether/rbac.yaml",
    "drwxr-xr-x T/usr/share/man/",
    "drwxr-xr-x T/usr/share/man/man8/",
    "-rw-r--r-- T/usr/share/man/man8/tether.8.gz",
];

/// Every entry of the .deb's data, with its mode (the unit under /lib: see README "Install").
const DEB_MODES: &[&str] = &[
    "drwxr-xr-x ./",
    "drwxr-xr-x ./etc/",
    "drwx------ ./etc/tether/",
    "-rw------- ./etc/tether/tether.yaml",
    "drwxr-xr-x ./lib/",
    "drwxr-xr-x ./lib/systemd/",
    "drwxr-xr-x ./lib/systemd/system/",
    "-rw-r--r-- ./lib/systemd/system/tether.service",
    "drwxr-xr-x ./usr/",
    "drwxr-xr-x ./usr/bin/",
    "-rwxr-xr-x ./usr/bin/tether",
    "drwxr-xr-x ./usr/share/",
    "drwxr-xr-x ./usr/share/doc/",
    "drwxr-xr-x ./usr/share/doc/tether/",
    "-rw-r--r-- ./usr/share/doc/tether/README.md",
    "-rw-r--r-- ./usr/share/doc/tether/copyright",
    "drwxr-xr-x ./usr/share/doc/tether/examples/",
    "-rw-r--r-- ./usr/share/doc/tether/examples/externalnode.yaml",
    "-rw-r--r-- ./usr/share/doc/tether/examples/trafficcontrol-mirror.yaml",
    "-rw-r--r-- ./usr/share/doc/tether/examples/trafficcontrol-redirect.yaml",
    "-rw-r--r-- ./usr/share/doc/tether/rbac.yaml",
    "drwxr-xr-x ./usr/share/man/",
    "drwxr-xr-x ./usr/share/man/man8/",
    "-rw-r--r-- ./usr/share/man/man8/tether.8.gz",
];

/// Every path the .rpm owns, with its mode.
const RPM_MODES: &[&str] = &[
    "drwx------ /etc/tether",
    "-rw------- /etc/tether/tether.yaml",
    "-rwxr-xr-x /usr/bin/tether",
    "-rw-r--r-- /usr/lib/systemd/system/tether.service",
    "drwxr-xr-x /usr/share/doc/tether",
    "-rw-r--r-- /usr/share/doc/tether/README.md",
    "-rw-r--r-- /usr/share/doc/tether/copyright",
    "drwxr-xr-x /usr/share/doc/tether/examples",
    "-rw-r--r-- /usr/share/doc/tether/examples/externalnode.yaml",
    "-rw-r--r-- /usr/share/doc/tether/examples/trafficcontrol-mirror.yaml",
    "-rw-r--r-- /usr/share/doc/tether/examples/trafficcontrol-redirect.yaml",
    "-rw-r--r-- /usr/share/doc/tether/rbac.yaml",
    "-rw-r--r-- /usr/share/man/man8/tether.8.gz",
];

/// The issue: files package.sh wrote with a shell redirection (the copyright, the man page,
/// the INSTALL note) took their mode from the caller's umask (0600 under 077, 0666 under
/// 000). The shared run is made under 077; the tarball is made again under 000 (`--formats
/// tar`, the cheap one) and must list the same entries with the same modes.
#[test]
fn package_modes_do_not_come_from_the_umask() {
    if !common::privileged("package_modes_do_not_come_from_the_umask") {
        return;
    }
    let open = Scratch::new("pkg-umask-000");
    package("000", "tar", &open.0).unwrap();
    let out = packages();
    let tar = |dir: &Path| {
        let file = dir.join("tether-0.1.0-x86_64.tar.gz");
        modes(&common::run(
            Command::new("tar").args(["-tvzf", file.to_str().unwrap()]),
        ))
    };
    let want: Vec<String> = TAR_MODES
        .iter()
        .map(|l| l.replace(" T/", " tether-0.1.0-x86_64/"))
        .collect();
    assert_eq!(tar(out.0), want, "tarball made under umask 077");
    assert_eq!(tar(&open.0), want, "tarball made under umask 000");

    let deb = out.path("tether_0.1.0_amd64.deb");
    let deb_s = deb.to_str().unwrap();
    let listed = modes(&common::run(Command::new("dpkg-deb").args(["-c", deb_s])));
    assert_eq!(listed, DEB_MODES, ".deb made under umask 077");
    let control = modes(&common::run(Command::new("sh").args([
        "-c",
        &format!("dpkg-deb --ctrl-tarfile {deb_s} | tar -tvf -"),
    ])));
    assert_eq!(
        control,
        [
            "drwxr-xr-x ./",
            "-rw-r--r-- ./conffiles",
            "-rw-r--r-- ./control",
            "-rwxr-xr-x ./postinst",
            "-rwxr-xr-x ./postrm",
            "-rwxr-xr-x ./prerm",
        ]
    );

    let rpm = out.path("tether-0.1.0-1.x86_64.rpm");
    let listed = modes(&common::run(
        Command::new("rpm").args(["-qlvp", rpm.to_str().unwrap()]),
    ));
    assert_eq!(listed, RPM_MODES, ".rpm made under umask 077");
}

/// The issue: the .rpm had no %postun, so systemd kept a removed unit loaded until the next
/// daemon-reload. Like the .deb's postrm it reloads systemd (when systemd runs) and
/// restarts nothing: on an upgrade %post of the new package has already run `try-restart`,
/// as the .deb's postinst does. rpm runs the old package's %postun after %post of the new
/// one (when the old files are gone), so it reloads on an upgrade ($1 >= 1) as well.
#[test]
fn rpm_postun_reloads_systemd_on_removal_and_upgrade() {
    if !common::privileged("rpm_postun_reloads_systemd_on_removal_and_upgrade") {
        return;
    }
    let out = packages();
    let rpm = out.path("tether-0.1.0-1.x86_64.rpm");
    let rpm_s = rpm.to_str().unwrap();
    let scripts = common::run(Command::new("rpm").args(["-qp", "--scripts", rpm_s]));
    let postun = scripts
        .split_once("postuninstall scriptlet (using /bin/sh):\n")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no %postun run by /bin/sh in {scripts}"));
    // Up to the next scriptlet's header, without comments.
    let code: Vec<&str> = postun
        .lines()
        .take_while(|l| !l.contains(" scriptlet (using "))
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .collect();
    assert_eq!(
        code,
        [
            "if [ -d /run/systemd/system ]; then",
            "    systemctl daemon-reload >/dev/null 2>&1 || :",
            "fi",
        ],
        "{scripts}"
    );
}

/// `path mode` of everything under `root` (`path/ mode` for a directory, `path -> target`
/// for a symlink, which is not followed), sorted.
fn tree(root: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(root).unwrap().to_str().unwrap();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.push(format!("{rel} -> {}", target.display()));
            } else if meta.is_dir() {
                out.push(format!("{rel}/ {mode:o}"));
                walk(root, &path, out);
            } else {
                out.push(format!("{rel} {mode:o}"));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

/// A root as Fedora's and Debian's (since bookworm) are: /bin, /sbin and /lib are symlinks
/// into /usr.
fn merged_usr_root(root: &Path) {
    for d in ["etc", "usr", "usr/bin", "usr/sbin", "usr/lib"] {
        let path = root.join(d);
        std::fs::create_dir(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for l in ["bin", "sbin", "lib"] {
        std::os::unix::fs::symlink(format!("usr/{l}"), root.join(l)).unwrap();
    }
}

/// What the tarball's install.sh leaves in a merged-/usr root, but for the config file(s).
const INSTALLED: &[&str] = &[
    "bin -> usr/bin",
    "etc/ 755",
    "etc/tether/ 700",
    "lib -> usr/lib",
    "sbin -> usr/sbin",
    "usr/ 755",
    "usr/bin/ 755",
    "usr/bin/tether 755",
    "usr/lib/ 755",
    "usr/lib/systemd/ 755",
    "usr/lib/systemd/system/ 755",
    "usr/lib/systemd/system/tether.service 644",
    "usr/sbin/ 755",
    "usr/share/ 755",
    "usr/share/doc/ 755",
    "usr/share/doc/tether/ 755",
    "usr/share/doc/tether/README.md 644",
    "usr/share/doc/tether/copyright 644",
    "usr/share/doc/tether/examples/ 755",
    "usr/share/doc/tether/examples/externalnode.yaml 644",
    "usr/share/doc/tether/examples/trafficcontrol-mirror.yaml 644",
    "usr/share/doc/tether/examples/trafficcontrol-redirect.yaml 644",
    "usr/share/doc/tether/rbac.yaml 644",
    "usr/share/man/ 755",
    "usr/share/man/man8/ 755",
    "usr/share/man/man8/tether.8.gz 644",
];

/// The issue: the tarball's documented install (`cp -a usr lib etc /`) failed on a merged-/usr
/// system ("cannot overwrite non-directory '/lib' with directory 'lib'") and replaced an
/// edited /etc/tether/tether.yaml. Its install.sh, run with `--root` (under a hostile
/// umask) into a merged-/usr root: a first install, then an upgrade over an edited config.
#[test]
fn tarball_installs_on_merged_usr_and_keeps_the_config() {
    if !common::privileged("tarball_installs_on_merged_usr_and_keeps_the_config") {
        return;
    }
    let out = packages();
    let scratch = Scratch::new("tar-install");
    let unpacked = scratch.0.join("unpacked");
    let root = scratch.0.join("root");
    std::fs::create_dir(&unpacked).unwrap();
    std::fs::create_dir(&root).unwrap();
    let tar = out.path("tether-0.1.0-x86_64.tar.gz");
    common::run(Command::new("tar").args([
        "-xzf",
        tar.to_str().unwrap(),
        "-C",
        unpacked.to_str().unwrap(),
    ]));
    let shipped = unpacked.join("tether-0.1.0-x86_64");
    merged_usr_root(&root);
    let install = || {
        common::run(
            with_umask("077", &shipped.join("install.sh")).args(["--root", root.to_str().unwrap()]),
        )
    };
    let with = |extra: &[&str]| {
        let mut want: Vec<String> = INSTALLED.iter().map(|l| l.to_string()).collect();
        want.extend(extra.iter().map(|l| l.to_string()));
        want.sort();
        want
    };
    let config = root.join("etc/tether/tether.yaml");
    let default = std::fs::read(repo().join("deploy/tether.yaml")).unwrap();

    // A first install: the shipped config.
    let said = install();
    assert_eq!(tree(&root), with(&["etc/tether/tether.yaml 600"]), "{said}");
    assert_eq!(std::fs::read(&config).unwrap(), default);
    for file in [
        "usr/bin/tether",
        "usr/lib/systemd/system/tether.service",
        "usr/share/man/man8/tether.8.gz",
    ] {
        assert!(
            std::fs::read(root.join(file)).unwrap() == std::fs::read(shipped.join(file)).unwrap(),
            "{file} differs from the tarball's"
        );
    }
    let unit = std::fs::read_to_string(root.join("usr/lib/systemd/system/tether.service")).unwrap();
    assert!(
        unit.lines()
            .any(|l| l == "ExecStart=/usr/bin/tether run --config /etc/tether/tether.yaml"),
        "the unit runs the installed binary"
    );

    // The operator's edit survives an upgrade, byte for byte; the new default goes beside it.
    let edited = b"# edited by the operator\nnodeName: vm-7\nsource: manifests\n";
    std::fs::write(&config, edited).unwrap();
    let said = install();
    assert_eq!(
        tree(&root),
        with(&[
            "etc/tether/tether.yaml 600",
            "etc/tether/tether.yaml.new 600"
        ]),
        "{said}"
    );
    assert_eq!(std::fs::read(&config).unwrap(), edited);
    assert_eq!(
        std::fs::read(root.join("etc/tether/tether.yaml.new")).unwrap(),
        default
    );
    let kept = format!(
        "tether: kept {}; this version's default is beside it: {}.new",
        config.display(),
        config.display()
    );
    assert!(said.lines().any(|l| l == kept), "{kept:?} in {said}");
}
