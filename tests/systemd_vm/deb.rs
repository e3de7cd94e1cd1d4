//! The .deb package's lifecycle under a real systemd: install, configure and start, an
//! upgrade under traffic, then reset and removal giving the NIC back as before.

use super::*;

/// The packages of the binary under test (`scripts/package.sh`), one per version, in a
/// directory removed on drop.
struct Packages {
    dir: std::path::PathBuf,
}

impl Packages {
    fn build(versions: &[&str], formats: &str) -> Packages {
        let dir = std::env::temp_dir().join(format!("tt-pkg-{}", common::unique_suffix()));
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        for v in versions {
            common::run(
                std::process::Command::new(repo.join("scripts/package.sh")).args([
                    "--binary",
                    common::tether::binary().to_str().expect("utf-8 path"),
                    "--version",
                    v,
                    "--out",
                    dir.to_str().expect("utf-8 path"),
                    "--formats",
                    formats,
                    "--fast",
                ]),
            );
        }
        Packages { dir }
    }

    fn path(&self, file: &str) -> std::path::PathBuf {
        self.dir.join(file)
    }
}

impl Drop for Packages {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `ip -j` state of the NIC: what "given back as before" is compared on.
fn nic_state(vm: &Vm) -> String {
    vm.sh(&format!(
        "ip -j link show dev {NIC} | sed 's/\"PROMISC\",//'; ip -j addr show dev {NIC}; \
         ip -j route show table all dev {NIC} | tr '}}' '\\n' | sort; ip -j -6 route show table all dev {NIC} | tr '}}' '\\n' | sort"
    ))
}

/// The .deb on a real systemd: installed (not started), configured, started; upgraded to a
/// higher version while 50 pings a second cross the bridge (none lost, no port re-created,
/// the flows moved to the next round); then `tether reset` and removal give the NIC back.
#[test]
fn deb_package_lifecycle_under_a_real_systemd() {
    if !common::privileged("deb_package_lifecycle_under_a_real_systemd") {
        return;
    }
    let mut c = Checks::new("deb_package");
    let pkgs = Packages::build(&["0.1.0", "0.1.1"], "deb");
    let vm = Vm::boot("sdpkg", Addressing::Static);
    // Once the link-local address is through DAD.
    let before = poll(Duration::from_secs(10), || {
        let s = nic_state(&vm);
        (!s.contains("tentative")).then_some(s)
    })
    .expect("eth1's addresses settle");
    for v in ["0.1.0", "0.1.1"] {
        let f = format!("tether_{v}_amd64.deb");
        vm.copy_in(&pkgs.path(&f), &format!("/root/{f}"), 0o644);
    }

    // Install: files in place, tether not started (it has no config yet).
    let (code, out) = vm.status("dpkg -i /root/tether_0.1.0_amd64.deb");
    c.check(
        "dpkg -i",
        "exit 0, says it is not started",
        format!("exit {code}: {}", out.trim().replace('\n', " | ")),
        code == 0 && out.contains("installed, not started"),
    );
    let state = vm.sh(
        "systemctl is-active tether || true; systemctl is-enabled tether || true; \
         stat -c '%a %U' /etc/tether/tether.yaml /etc/tether /usr/bin/tether; \
         grep ^ExecStart= /lib/systemd/system/tether.service; man -w tether 2>/dev/null || ls /usr/share/man/man8/tether.8.gz",
    );
    c.check(
        "after install",
        "inactive, disabled; config 600, dir 700, binary 755; ExecStart /usr/bin/tether; man page",
        state.trim().replace('\n', " | "),
        state.starts_with(
            "inactive\ndisabled\n600 root\n700 root\n755 root\nExecStart=/usr/bin/tether run",
        ) && state.contains("tether.8"),
    );

    // Configure from a manifests directory and start.
    vm.write(&format!("{MANIFESTS}/externalnode.yaml"), EXTERNAL_NODE);
    vm.write(&format!("{MANIFESTS}/pods.yaml"), PODS);
    vm.write(&format!("{MANIFESTS}/mirror.yaml"), MIRROR);
    vm.sh(&format!(
        "sed -i -e 's|^kubeconfig: .*|manifests: {MANIFESTS}|' \
         -e 's|^datapathType: .*|datapathType: netdev|' \
         -e 's|^# nodeName: .*|nodeName: vm1|' /etc/tether/tether.yaml && \
         systemctl enable --now tether"
    ));
    let attached = poll(Duration::from_secs(30), || {
        let (ok, _) = taken_over(&vm);
        (ok && vm.prop("tether", "StatusText").starts_with("ready")).then_some(())
    })
    .is_some();
    c.check(
        "enable --now",
        "ready, NIC taken over",
        taken_over(&vm).1,
        attached,
    );
    let ports = |vm: &Vm| vm.sh("ovs-vsctl --format=csv --columns=_uuid,name list Port | sort");
    let round = |vm: &Vm| {
        vm.sh("ovs-vsctl get Bridge br-int external_ids:roundNum")
            .trim()
            .trim_matches('"')
            .to_string()
    };
    let (ports0, round0) = (ports(&vm), round(&vm));
    let pid0 = active_pid(&vm).2;

    // Upgrade under traffic: 50 pings a second from the gateway, through the bridge. (Each
    // is answered twice here: on the userspace datapath the VM's kernel also sees what
    // arrives on the uplink and answers from its own stack; the `system` datapath keeps the
    // uplink's packets from the stack. `tests/externalnode_vm` neutralises this where it
    // counts packets; here only losses count.)
    let ping = vm
        .gw
        .command(&["ping", "-q", "-i", "0.02", "-c", "500", "-W", "1", VM_IP])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let (code, out) = vm.status("dpkg -i /root/tether_0.1.1_amd64.deb");
    c.check(
        "dpkg -i of the higher version",
        "exit 0",
        format!("exit {code}: {}", out.trim().replace('\n', " | ")),
        code == 0,
    );
    let out = ping.wait_with_output().unwrap();
    let summary = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .unwrap_or("")
        .to_string();
    c.check(
        "pings during the upgrade",
        "500 transmitted, 500 received",
        summary.clone(),
        summary.starts_with("500 packets transmitted, 500 received"),
    );
    let ready = poll(Duration::from_secs(30), || {
        let (a, _, pid) = active_pid(&vm);
        (a == "active" && pid != pid0 && vm.prop("tether", "StatusText").starts_with("ready"))
            .then_some(pid)
    });
    c.check(
        "the upgrade restarted it",
        "a new MainPID, ready",
        format!("{pid0} → {ready:?}"),
        ready.is_some(),
    );
    let (ports1, round1) = (ports(&vm), round(&vm));
    c.check(
        "no port re-created",
        "the same Port rows (uuid, name)",
        if ports1 == ports0 {
            "same".into()
        } else {
            format!("{ports0} → {ports1}")
        },
        ports1 == ports0,
    );
    let next: u32 = round0.parse::<u32>().unwrap_or(0) + 1;
    let stale = vm.sh(&format!(
        "ovs-ofctl -O OpenFlow15 dump-flows br-int | grep -c 'cookie=0x{round0:x}' || true",
        round0 = round0.parse::<u32>().unwrap_or(0)
    ));
    c.check(
        "flows replaced by round",
        &format!("roundNum {round0} → {next}, no flow of round {round0} left"),
        format!(
            "roundNum {round1}, {} flows of round {round0}",
            stale.trim()
        ),
        round1 == next.to_string() && stale.trim() == "0",
    );

    // Reset, then remove: the NIC as before the package came.
    let (code, out) =
        vm.status("systemctl stop tether && tether reset --config /etc/tether/tether.yaml");
    c.check(
        "systemctl stop; tether reset",
        "exit 0, restored eth1",
        format!("exit {code}: {}", out.trim().replace('\n', " | ")),
        code == 0 && out.contains("restored eth1"),
    );
    let (code, out) = vm.status("dpkg -r tether");
    c.check(
        "dpkg -r",
        "exit 0, says the network stays and how to reset",
        format!("exit {code}: {}", out.trim().replace('\n', " | ")),
        code == 0 && out.contains("tether reset"),
    );
    let after = poll(Duration::from_secs(5), || {
        let s = nic_state(&vm);
        (s == before).then_some(s)
    });
    c.check(
        "the NIC after reset and removal",
        "ip -j link/addr/route equal to before install",
        if after.is_some() {
            "equal".into()
        } else {
            let now = nic_state(&vm);
            let diff: Vec<String> = before
                .lines()
                .zip(now.lines())
                .filter(|(a, b)| a != b)
                .map(|(a, b)| format!("before {a} / now {b}"))
                .collect();
            diff.join(" || ")
        },
        after.is_some(),
    );
    let gone = vm.sh("ls /usr/bin/tether /lib/systemd/system/tether.service 2>&1 || true; test -f /etc/tether/tether.yaml && echo config kept");
    c.check(
        "after dpkg -r",
        "binary and unit gone, config kept (conffile)",
        gone.trim().replace('\n', " | "),
        gone.contains("No such file")
            && gone.contains("config kept")
            && !gone.contains("\n/usr/bin/tether"),
    );
    c.check(
        "VM reaches its gateway",
        "ping ok",
        format!("{}", ping_gw(&vm)),
        ping_gw(&vm),
    );
    drop(vm);
    c.finish();
}
