//! A stalled ovs-vswitchd inside a port delete, a crash at every step then a restart, and a
//! lingering datapath port removed through the vswitchd control socket.

use super::*;

/// Whether a process is stopped (SIGSTOP: state `T` in /proc/<pid>/stat).
fn stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.starts_with('T')))
        .unwrap_or(false)
}

/// ovs-vswitchd stopped (SIGSTOP, 3 s) inside the port delete of a restore, and of a
/// rollback at the ports, move and flows steps: the NIC is not renamed back while the
/// switch has not applied the delete (sampled every 20 ms while it is stopped), and ends
/// with no master, its addresses and routes exact. (Before: the rename followed the OVSDB
/// commit at once, so on the kernel datapath the NIC could still be a datapath port when it
/// got the VM's addresses back;
/// docs/datapath.md#14-why-renaming-back-too-early-cuts-the-vm-off-system-only.)
#[test]
fn a_stopped_vswitchd_in_the_middle_of_a_delete_delays_the_rename() {
    if !privileged("a_stopped_vswitchd_in_the_middle_of_a_delete_delays_the_rename") {
        return;
    }
    let (sb, _peer) = setup();
    let vm = sb.ns();
    let before = snapshot(vm, "eth1");
    let nic = before["link"][0]["ifindex"].as_u64().unwrap();
    let en = "en - 192.0.2.10,2001:db8:1::10";
    for case in ["restore", "ports", "move", "flows"] {
        let mut env = vec![(faulty::STOP_ENV, "1")];
        if case != "restore" {
            env.push((faulty::FAIL_ENV, case));
        }
        let mut a = Agent::spawn_env(&sb, None, &env);
        a.cmd("recover");
        a.cmd(en);
        let vswitchd = sb.pid("ovs-vswitchd").unwrap();
        let watching = std::sync::atomic::AtomicBool::new(true);
        let (r, (stopped_samples, early)) = std::thread::scope(|scope| {
            let watcher = scope.spawn(|| {
                let (mut samples, mut early) = (Vec::new(), Vec::new());
                while watching.load(std::sync::atomic::Ordering::SeqCst) {
                    if stopped(vswitchd) {
                        samples.push(Instant::now());
                        let name = link_name(vm, nic);
                        // Only a name read wholly inside the stop counts: under emulation
                        // one `ip` takes long enough for vswitchd to be continued, apply
                        // the delete and tether to rename the NIC while it runs.
                        if name.as_deref() != Some("eth1~") && stopped(vswitchd) {
                            early.push(name);
                        }
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                (samples, early)
            });
            let r = if case == "restore" {
                a.cmd("sync");
                a.cmd("absent");
                a.try_cmd("sync")
            } else {
                a.try_cmd("sync")
            };
            watching.store(false, std::sync::atomic::Ordering::SeqCst);
            (r, watcher.join().unwrap())
        });
        match case {
            "restore" => assert!(r.is_ok(), "restore: {r:?}"),
            _ => assert!(
                r.as_ref().is_err_and(|e| e.contains("rolled back")),
                "{case}: {r:?}"
            ),
        }
        // The samples must cover the stop, however long each `ip` takes (tens of
        // milliseconds here, ten times that in the kernel tier's emulated VM).
        let covered = match (stopped_samples.first(), stopped_samples.last()) {
            (Some(a), Some(b)) => b.duration_since(*a),
            _ => Duration::ZERO,
        };
        assert!(
            stopped_samples.len() >= 5 && covered >= faulty::STOP_FOR * 2 / 3,
            "{case}: vswitchd seen stopped in {} samples over {covered:?}",
            stopped_samples.len()
        );
        assert!(
            early.is_empty(),
            "{case}: the NIC was renamed while ovs-vswitchd had not applied the delete: {early:?}"
        );
        assert!(!stopped(vswitchd), "{case}: vswitchd left stopped");
        let link = json_of(&vm.ip(&["-j", "link", "show", "dev", "eth1"]));
        assert_eq!(link[0]["ifindex"].as_u64(), Some(nic), "{case}");
        assert_eq!(link[0].get("master"), None, "{case}: {link}");
        assert_restored(vm, "eth1", &before);
        assert_eq!(bridge_record(&sb), None, "{case}");
        assert_eq!(sb.vsctl(&["list-ports", "br-int"]).trim(), "", "{case}");
    }
}

/// kill -9 (abort) at every step of takeover and of restore; the next start recovers and
/// converges: the VM is reachable and the NIC, when given back, is exactly as before.
#[test]
fn crash_at_every_step_then_restart_converges() {
    if !privileged("crash_at_every_step_then_restart_converges") {
        return;
    }
    let (sb, peer) = setup();
    let vm = sb.ns();
    let eth1_before = snapshot(vm, "eth1");
    let en = "en - 192.0.2.10,2001:db8:1::10";
    for step in ["rename", "ports", "move", "flows"] {
        // Crash during the takeover …
        let mut a = Agent::spawn(&sb, Some(&format!("takeover-{step}")));
        a.cmd("recover");
        a.cmd(en);
        a.crash_on("sync");
        assert!(bridge_record(&sb).is_some(), "takeover-{step}: no record");
        // … the next start rolls it back, then takes over for good.
        let mut a = Agent::spawn(&sb, None);
        a.cmd("recover");
        assert_eq!(bridge_record(&sb), None, "takeover-{step}");
        assert_eq!(snapshot(vm, "eth1"), eth1_before, "rolled back at {step}");
        a.cmd(en);
        a.cmd("sync");
        a.cmd("gc");
        let out = ping(&peer, "192.0.2.10");
        assert!(out.contains("3 received"), "after takeover-{step}: {out}");
        let (host, uplink) = (ofport(&sb, "eth1"), ofport(&sb, "eth1~"));
        assert_eq!(
            en_flows(&sb),
            expected_en_flows(host, uplink),
            "takeover-{step}"
        );
        drop(a);

        // Crash during the restore …
        let rstep = match step {
            "rename" => "flows",
            "ports" => "ports",
            "move" => "rename",
            _ => "move",
        };
        let mut a = Agent::spawn(&sb, Some(&format!("restore-{rstep}")));
        a.cmd("recover");
        a.cmd("absent");
        a.crash_on("sync");
        // … the next start finishes it: the NIC exactly as before, reachable.
        let a = Agent::start_and_sync(&sb, None);
        assert_eq!(bridge_record(&sb), None, "restore-{rstep}");
        assert_eq!(snapshot(vm, "eth1"), eth1_before, "restore-{rstep}");
        assert_eq!(
            sb.vsctl(&["list-ports", "br-int"]).trim(),
            "",
            "restore-{rstep}"
        );
        assert_clean_ping(&peer, "192.0.2.10");
        drop(a);
    }
}

/// The vswitchd control socket as the controller uses it when a host netdev lingers:
/// `dpctl/show` lists the datapath's ports, `dpctl/del-if` removes one (here while its
/// OVSDB row still exists, which is when nothing else would), and errors carry OVS's text.
#[test]
fn unixctl_removes_a_datapath_port() {
    if !privileged("unixctl_removes_a_datapath_port") {
        return;
    }
    use tether::unixctl::{Unixctl, delete_dp_interface, parse_dpctl_show};
    let sb = Sandbox::start();
    sb.add_bridge("br-int");
    sb.add_internal_port("br-int", "p1", &[]);
    let ctl = Unixctl::for_daemon(sb.dir(), "ovs-vswitchd").unwrap();
    let pid = sb.pid("ovs-vswitchd").unwrap();
    assert_eq!(ctl.path(), sb.path(&format!("ovs-vswitchd.{pid}.ctl")));
    let names = |ctl: &Unixctl| -> Vec<String> {
        parse_dpctl_show(&ctl.call("dpctl/show", &[common::dpctl_name()]).unwrap())
            .into_iter()
            .map(|(_, n)| n)
            .collect()
    };
    assert_eq!(
        names(&ctl),
        [
            format!("ovs-{}", common::datapath()).as_str(),
            "br-int",
            "p1"
        ]
    );
    // The same text ovs-appctl prints.
    assert_eq!(
        ctl.call("dpctl/show", &[common::dpctl_name()]).unwrap(),
        sb.appctl(&["dpctl/show", common::dpctl_name()])
    );
    // vswitchd logs the removal; it then re-adds the port, because its OVSDB row is still
    // there (in the real case the row is gone, which is why the netdev lingered).
    let deletions = || {
        std::fs::read_to_string(sb.path("ovs-vswitchd.log"))
            .unwrap()
            .matches("bridge br-int: deleted interface p1 on port")
            .count()
    };
    assert_eq!(deletions(), 0);
    assert!(delete_dp_interface(&ctl, common::dpctl_name(), "p1").unwrap());
    wait_for(
        Duration::from_secs(5),
        "vswitchd to log the removal",
        || (deletions() == 1).then_some(()),
    );
    assert!(!delete_dp_interface(&ctl, common::dpctl_name(), "nope").unwrap());
    // The other datapath type's name does not exist: Antrea's `ovs-system`, which it always
    // asks, on the userspace datapath (docs/antrea-compat.md#removing-a-lingering-datapath-port);
    // `ovs-netdev` on the kernel's, where no userspace bridge runs.
    let other = if common::kernel_datapath() {
        "netdev@ovs-netdev"
    } else {
        "system@ovs-system"
    };
    let e = ctl.call("dpctl/show", &[other]).unwrap_err();
    assert!(
        e.to_string().contains("opening datapath") && e.to_string().contains("failed"),
        "{e}"
    );
}
