//! Bad input through the `tether` binary itself: input files others could change, and a
//! manifests directory full of bad objects next to a good one (root and OVS).

use super::*;

// ---------------------------------------------------------------------------------------
// Input files others could change, through the binary

/// `tether ARGS` with no OVS behind `--ovs-rundir`; its exit code and output (stdout, then
/// stderr). Killed after 20 s (before the rule, `run` went on to wait for OVS forever).
fn tether_bin(args: &[&str]) -> (Option<i32>, String) {
    use std::io::Read;
    let mut child = std::process::Command::new(common::tether::binary())
        .args(args)
        .env_remove("NOTIFY_SOCKET")
        .env_remove("JOURNAL_STREAM")
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    (code, out)
}

fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A file written with an explicit mode (not the umask's).
fn write_mode(p: &Path, text: &str, mode: u32) {
    std::fs::write(p, text).unwrap();
    chmod(p, mode);
}

/// The config file, a kubeconfig, its token file and the manifests directory, when someone
/// other than root or tether could change them: `tether run` exits 2 before connecting to
/// anything, naming the file and the fix; `tether check` reports a failed finding with that
/// fix (the config file itself is a configuration error there too: exit 2).
#[test]
fn input_files_others_can_change_are_refused() {
    if !common::privileged("input_files_others_can_change_are_refused") {
        return;
    }
    let d = std::env::temp_dir().join(format!("tether-bad-modes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    chmod(&d, 0o755);
    let p = |name: &str| d.join(name).to_str().unwrap().to_string();
    let (cfg, kc, token, m, ovs) = (p("tether.yaml"), p("kc"), p("token"), p("m"), p("no-ovs"));
    let sock = p("run/tether.sock");
    std::fs::create_dir(&m).unwrap();
    chmod(Path::new(&m), 0o755);
    write_mode(
        Path::new(&m).join("ns.yaml").as_path(),
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: n1}\n",
        0o644,
    );
    write_mode(
        Path::new(&cfg),
        &format!("manifests: {m}\novsRundir: {ovs}\n"),
        0o600,
    );
    write_mode(Path::new(&token), "t0k3n\n", 0o600);
    write_mode(
        Path::new(&kc),
        &kubeconfig(
            "    server: https://192.0.2.1:6443\n    insecure-skip-tls-verify: false\n",
            &format!("    tokenFile: {token}\n"),
        ),
        0o600,
    );
    let run = |source: &[&str]| {
        let mut args = vec!["run", "--ovs-rundir", &ovs, "--state-socket", &sock];
        args.extend_from_slice(source);
        tether_bin(&args)
    };
    let check = |source: &[&str]| {
        let mut args = vec!["check", "--ovs-rundir", &ovs, "--state-socket", &sock];
        args.extend_from_slice(source);
        tether_bin(&args)
    };
    let refused = |(code, out): (Option<i32>, String), want_code: i32, want: &str| {
        assert_eq!(code, Some(want_code), "{out}");
        assert!(out.contains(want), "{want:?} missing in:\n{out}");
    };

    // The config file, 0666.
    chmod(Path::new(&cfg), 0o666);
    let want = format!(
        "tether: config {cfg}: writable by group or others (mode 666): refusing to read it. fix: chmod go-w {cfg}"
    );
    refused(run(&["--config", &cfg]), 2, &want);
    refused(check(&["--config", &cfg]), 2, &want);
    chmod(Path::new(&cfg), 0o600);

    // The kubeconfig, 0666.
    chmod(Path::new(&kc), 0o666);
    refused(
        run(&["--kubeconfig", &kc]),
        2,
        &format!(
            "config: kubeconfig {kc}: writable by group or others (mode 666): refusing to read it. fix: chmod go-w {kc}"
        ),
    );
    refused(
        check(&["--kubeconfig", &kc]),
        1,
        &format!(
            "FAIL api credentials: kubeconfig {kc}: writable by group or others (mode 666): refusing to read it.\n     fix: chmod go-w {kc}\n"
        ),
    );
    chmod(Path::new(&kc), 0o600);

    // The token file it names, owned by another user.
    std::os::unix::fs::chown(&token, Some(4242), None).unwrap();
    refused(
        run(&["--kubeconfig", &kc]),
        2,
        &format!(
            "config: kubeconfig {kc}: token file {token}: owned by uid 4242, not by root: refusing to read it. fix: chown root {token}"
        ),
    );
    refused(
        check(&["--kubeconfig", &kc]),
        1,
        &format!(
            "FAIL api credentials: kubeconfig {kc}: token file {token}: owned by uid 4242, not by root: refusing to read it.\n     fix: chown root {token}\n"
        ),
    );
    std::os::unix::fs::chown(&token, Some(0), None).unwrap();

    // The manifests directory, world-writable (through the config file, as installed).
    chmod(Path::new(&m), 0o777);
    refused(
        run(&["--config", &cfg]),
        2,
        &format!(
            "config: {m}: writable by group or others (mode 777): refusing to read it. fix: chmod go-w {m}"
        ),
    );
    refused(
        check(&["--config", &cfg]),
        1,
        &format!(
            "FAIL manifests: {m}: writable by group or others (mode 777): refusing to read it.\n     fix: chmod go-w {m}\n"
        ),
    );
    // A manifests file others can write is reported by `check` (`run` skips it, keeping
    // its objects: src/k8s/manifests/tests.rs).
    chmod(Path::new(&m), 0o755);
    chmod(&Path::new(&m).join("ns.yaml"), 0o666);
    refused(
        check(&["--config", &cfg]),
        1,
        &format!(
            "FAIL manifests: {m}: ns.yaml: writable by group or others (mode 666): refusing to read it. fix: chmod go-w {m}/ns.yaml\n"
        ),
    );
    // Fixed: the same check no longer fails on the manifests.
    chmod(&Path::new(&m).join("ns.yaml"), 0o644);
    let (_, out) = check(&["--config", &cfg]);
    assert!(
        out.contains(&format!("ok   manifests: {m} readable: ")),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

// ---------------------------------------------------------------------------------------
// The daemon itself: a manifests directory full of bad objects next to a good one.

fn tc_yaml(name: &str, target: &str) -> String {
    format!(
        "apiVersion: crd.antrea.io/v1alpha2\nkind: TrafficControl\nmetadata:\n  name: {name}\nspec:\n  appliedTo:\n    podSelector:\n      matchLabels:\n        app: web\n  direction: Ingress\n  action: Mirror\n  targetPort:\n    {target}\n"
    )
}

#[test]
fn daemon_reports_each_bad_object_and_programs_the_good_one() {
    if !common::privileged("daemon_reports_each_bad_object_and_programs_the_good_one") {
        return;
    }
    let mut bed = e2e::Bed::new();
    bed.add_pod("pa", 1);
    bed.write_pods(&[("pa", "web")]);
    let bad: Vec<(&str, &str, &str)> = vec![
        (
            "bad-vni",
            "vxlan: {remoteIP: 203.0.113.9, vni: 16777216}",
            "tc=bad-vni skipped until the object changes: invalid spec: spec.targetPort.vxlan.vni",
        ),
        (
            "bad-two-ports",
            "{device: {name: a}, gre: {remoteIP: 203.0.113.9}}",
            "tc=bad-two-ports skipped until the object changes: invalid spec: spec.targetPort: exactly one of",
        ),
        (
            "bad-remote",
            "geneve: {remoteIP: nowhere}",
            "tc=bad-remote skipped until the object changes: invalid spec: spec.targetPort.geneve.remoteIP",
        ),
        (
            "bad-erspan",
            "erspan: {remoteIP: 203.0.113.9, version: 9}",
            "tc=bad-erspan skipped until the object changes: invalid spec: spec.targetPort.erspan.version: 9 is not one of 1, 2",
        ),
    ];
    let mut all = String::new();
    for (name, target, _) in &bad {
        all.push_str(&tc_yaml(name, target));
        all.push_str("---\n");
    }
    all.push_str(&tc_yaml("good", "device: {name: tap-good}"));
    bed.write("tcs.yaml", &all);
    bed.write("junk.yaml", "kind: [\n");
    bed.write(
        "service.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
    );
    let _coll = bed.add_collector(&["tap-good"]);

    let args = bed.tether_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let t = common::Tether::start(bed.sb.ns(), &args, &bed.sb.path("tether-bad.log"));
    // The good TC is programmed exactly: one mirror flow for pa's ingress.
    let pa = bed.ofport("veth-pa");
    let flows = bed.wait_flows("the good TC's mark flow", |f| {
        f.iter()
            .filter(|l| l.contains("table=80, priority=200"))
            .count()
            == 1
    });
    let tap = bed.ofport("tap-good");
    let mark: Vec<&String> = flows
        .iter()
        .filter(|l| l.contains("table=80, priority=200"))
        .collect();
    assert!(
        mark[0].contains(&format!("reg1={pa:#x} ")) && mark[0].contains(&format!("{tap}")),
        "{flows:#?}"
    );
    for (_, _, line) in &bad {
        t.wait_log(line, Duration::from_secs(15));
    }
    t.wait_log("junk.yaml: ", Duration::from_secs(5));
    t.wait_log(
        "service.yaml document 0: unsupported apiVersion/kind \"v1\"/\"Service\"",
        Duration::from_secs(5),
    );
    // No port for any bad TC, the daemon is still running, nothing panicked.
    let ports = bed.sb.vsctl(&["list-ports", "br-int"]);
    let mut ports: Vec<&str> = ports.lines().collect();
    ports.sort_unstable();
    assert_eq!(ports, vec!["tap-good", "veth-pa"]);
    assert!(t.running(), "tether exited:\n{}", t.log());
    assert!(!t.log().contains("panicked"), "{}", t.log());

    // An invalid spec is not retried (only a new version can fix it): past the queue's first
    // backoff (5 s) each bad TC is still reported exactly once...
    std::thread::sleep(Duration::from_secs(6));
    let log = t.log();
    for (name, _, line) in &bad {
        assert_eq!(log.matches(line).count(), 1, "tc {name} retried:\n{log}");
    }
    // ...and fixing the object programs it at once.
    let mut fixed = String::new();
    for (i, (name, _, _)) in bad.iter().enumerate().skip(1) {
        let target = format!("vxlan: {{remoteIP: 203.0.113.9, vni: {}}}", 7000 + i);
        fixed.push_str(&tc_yaml(name, &target));
        fixed.push_str("---\n");
    }
    fixed.push_str(&tc_yaml(
        "bad-vni",
        "vxlan: {remoteIP: 203.0.113.9, vni: 5000}",
    ));
    fixed.push_str("---\n");
    fixed.push_str(&tc_yaml("good", "device: {name: tap-good}"));
    bed.write("tcs.yaml", &fixed);
    common::wait_for(Duration::from_secs(15), "the fixed TCs' ports", || {
        let ports = bed.sb.try_vsctl(&["list-ports", "br-int"]).ok()?;
        (ports.lines().count() == 2 + bad.len()).then_some(())
    });
    assert!(t.running(), "tether exited:\n{}", t.log());
}
