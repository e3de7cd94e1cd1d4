//! The unit's lifecycle under a real systemd: installed by the README, READY and STATUS=,
//! its mount namespace, OVS stopped and restarted, stop, kill -9, OVS started after tether,
//! a bad config, and a reboot with the unit enabled.

use super::*;

#[test]
fn unit_lifecycle_under_a_real_systemd() {
    if !common::privileged("unit_lifecycle_under_a_real_systemd") {
        return;
    }
    let mut c = Checks::new("unit_lifecycle");
    let mut vm = Vm::boot("sdlife", Addressing::Static);
    // A hardened image: new devices get IPv6 disabled, the NIC has its own IPv6 on. The host
    // port (a new device) must get the NIC's settings from inside the sandbox.
    vm.sh(
        "sysctl -qw net.ipv6.conf.default.disable_ipv6=1 net.ipv4.conf.eth1.arp_announce=2 \
           && ip -6 addr add 2001:db8:1::10/64 dev eth1 nodad",
    );
    install_by_readme(&vm, &mut c, "");

    // Active only after READY: systemd logs "Started" when READY=1 arrives; tether sends it
    // after its first full sync.
    let journal = vm.journal("tether", "");
    let synced = journal.find("first full sync done");
    let started = journal.find("Started tether.service");
    c.check(
        "active only after READY (first full sync logged before systemd's \"Started\")",
        "sync line < Started line",
        format!("sync at {synced:?}, Started at {started:?}"),
        matches!((synced, started), (Some(a), Some(b)) if a < b),
    );
    let (active, _, pid0) = active_pid(&vm);
    let status0 = vm.prop("tether", "StatusText");
    c.check(
        "enable --now: active with READY's STATUS",
        "active; \"ready: 0 TrafficControls, …, ExternalNode …; ovsdb connected, openflow connected\"",
        format!("{active}; {status0:?}"),
        active == "active"
            && status0.starts_with("ready: 0 TrafficControls")
            && status0.ends_with("ovsdb connected, openflow connected"),
    );
    let (ok, seen) = taken_over(&vm);
    c.check(
        "NIC taken over",
        "eth1~ and eth1 on br-int, 192.0.2.10 on eth1",
        seen,
        ok,
    );
    c.check(
        "VM reaches its gateway",
        "ping ok",
        format!("{}", ping_gw(&vm)),
        ping_gw(&vm),
    );

    let v6 = vm.sh("ip -6 addr show dev eth1; cat /proc/sys/net/ipv6/conf/eth1/disable_ipv6 /proc/sys/net/ipv4/conf/eth1/arp_announce");
    c.check(
        "default.disable_ipv6=1: the host port has the NIC's IPv6 and settings",
        "2001:db8:1::10/64 on eth1, disable_ipv6 0, arp_announce 2",
        v6.split_whitespace().collect::<Vec<_>>().join(" "),
        v6.contains("2001:db8:1::10/64") && v6.trim_end().ends_with("0\n2"),
    );

    // The service's own mount namespace: a file written back with the value it has (a
    // change without a change), a directory probed with a new file.
    for (path, writable) in [
        ("/proc/sys/net/ipv4/conf/eth1/arp_announce", true),
        ("/proc/sys/net/ipv6/conf/eth1/accept_ra", true),
        ("/proc/sys/net/core/somaxconn", false),
        ("/proc/sys/kernel/domainname", false),
        ("/run/systemd", false),
        ("/etc", false),
        ("/run/openvswitch", false),
        ("/run/tether", true),
    ] {
        let probe = if path.starts_with("/proc/") {
            format!("v=$(cat {path}) && echo $v > {path}")
        } else {
            format!("touch {path}/tt-probe && rm {path}/tt-probe")
        };
        let (code, out) = vm.status(&format!("nsenter -t {pid0} -m -- sh -c '{probe}'"));
        c.check(
            &format!("nsenter -t $MAINPID -m: {path}"),
            if writable { "writable" } else { "read-only" },
            if code == 0 {
                "writable".to_string()
            } else {
                format!("not writable: {}", out.trim())
            },
            (code == 0) == writable,
        );
    }

    // STATUS= follows the summary: a TrafficControl added.
    vm.sh(
        "ovs-vsctl add-port br-int web-a -- set interface web-a type=internal \
         -- set port web-a external_ids:container-id=c-web-a external_ids:pod-name=web-a \
         external_ids:pod-namespace=demo",
    );
    vm.write(&format!("{MANIFESTS}/mirror.yaml"), MIRROR);
    let (ok, status1) = status_text_until(&vm, Duration::from_secs(15), |s| {
        s.starts_with("ready: 1 TrafficControls") && s != status0
    });
    c.check(
        "STATUS= after a TrafficControl is added",
        "\"ready: 1 TrafficControls, <more> flows, …\"",
        format!("before {status0:?}; after {status1:?}"),
        ok,
    );
    let (n0, n1) = (flow_count(&status0), flow_count(&status1));
    c.check(
        "STATUS= flow count grows with the TrafficControl",
        "more flows than before",
        format!("{n0:?} → {n1:?}"),
        matches!((n0, n1), (Some(a), Some(b)) if b > a),
    );

    // ... and OVS stopped, then started again.
    vm.sh("systemctl stop ovs-vswitchd ovsdb-server");
    let (ok, status2) = status_text_until(&vm, Duration::from_secs(15), |s| {
        s.contains("ovsdb DISCONNECTED")
    });
    c.check(
        "STATUS= after OVS is stopped",
        "\"… ovsdb DISCONNECTED, openflow DISCONNECTED\"",
        status2,
        ok,
    );
    vm.sh("systemctl start openvswitch-switch");
    let (ok, status3) = status_text_until(&vm, Duration::from_secs(30), |s| {
        s.starts_with("ready: 1 TrafficControls")
            && s.ends_with("ovsdb connected, openflow connected")
    });
    c.check("STATUS= after OVS is back", "connected again", status3, ok);
    let back = poll(Duration::from_secs(20), || ping_gw(&vm).then_some(())).is_some();
    c.check(
        "VM reachable after the OVS restart",
        "ping ok",
        format!("{back}"),
        back,
    );
    let (_, _, pid_now) = active_pid(&vm);
    c.check(
        "OVS restart does not restart tether",
        "same MainPID, NRestarts 0",
        format!(
            "MainPID {pid0} → {pid_now}, NRestarts {}",
            vm.prop("tether", "NRestarts")
        ),
        pid_now == pid0 && vm.prop("tether", "NRestarts") == "0",
    );

    // systemctl stop: exit 0, flows unchanged, VM still reachable.
    let before = flows(&vm);
    vm.sh("systemctl stop tether");
    let status = vm.prop("tether", "ExecMainStatus");
    let result = vm.prop("tether", "Result");
    let after = flows(&vm);
    c.check(
        "systemctl stop",
        "exit 0, Result=success",
        format!("exit {status}, Result={result}"),
        status == "0" && result == "success",
    );
    c.check(
        "flow dump unchanged by the stop",
        "identical",
        format!(
            "{} flows before, {} after, identical: {}",
            before.lines().count(),
            after.lines().count(),
            before == after
        ),
        before == after && !before.is_empty(),
    );
    c.check(
        "VM reachable with tether stopped",
        "ping ok",
        format!("{}", ping_gw(&vm)),
        ping_gw(&vm),
    );

    // kill -9: restarted (RestartSec=5s) and READY again.
    vm.sh("systemctl start tether");
    let (_, _, pid1) = active_pid(&vm);
    vm.sh(&format!("kill -9 {pid1}"));
    // In the gap before the restart (once systemd has seen the death: `auto-restart` for
    // RestartSec=5s) no daemon holds the lock or the socket: reset still refuses, on
    // systemd's word.
    let (code, out) = vm.status(
        "for i in $(seq 40); do
           [ \"$(systemctl show -p SubState --value tether)\" = auto-restart ] && break
           sleep 0.1
         done
         tether reset --config /etc/tether/tether.yaml",
    );
    c.check(
        "tether reset in the crash-restart gap",
        "exit 1, activating (auto-restart)",
        format!("exit {code}: {out}"),
        code == 1 && out.contains("tether.service is activating (auto-restart)"),
    );
    let restarted = poll(Duration::from_secs(40), || {
        let (a, _, p) = active_pid(&vm);
        (a == "active" && p != pid1 && p != 0).then_some(p)
    });
    let status4 = vm.prop("tether", "StatusText");
    c.check(
        "kill -9 → restarted and READY",
        "active, new MainPID, NRestarts 1, StatusText ready",
        format!(
            "MainPID {pid1} → {restarted:?}, NRestarts {}, {status4:?}",
            vm.prop("tether", "NRestarts")
        ),
        restarted.is_some()
            && vm.prop("tether", "NRestarts") == "1"
            && status4.starts_with("ready:"),
    );

    // OVS started after tether: tether waits (activating, longer than WatchdogSec), then READY.
    vm.sh(
        "systemctl stop tether ovs-vswitchd ovsdb-server openvswitch-switch
         systemctl mask --runtime ovsdb-server ovs-vswitchd openvswitch-switch
         systemctl start --no-block tether",
    );
    // (A manual start resets NRestarts to 0.)
    let waiting = poll(Duration::from_secs(10), || {
        let (_, _, p) = active_pid(&vm);
        (p != 0).then_some(p)
    });
    std::thread::sleep(Duration::from_secs(70));
    let (a, sub, pid2) = active_pid(&vm);
    let restarts = vm.prop("tether", "NRestarts");
    c.check(
        "OVS not running: tether waits",
        "activating (start) for 70 s (> WatchdogSec=60), same MainPID, NRestarts 0",
        format!("{a} ({sub}) MainPID {waiting:?} → {pid2}, NRestarts {restarts}"),
        a == "activating" && waiting == Some(pid2) && restarts == "0",
    );
    let t = Instant::now();
    vm.sh(
        "systemctl unmask --runtime ovsdb-server ovs-vswitchd openvswitch-switch
         systemctl start openvswitch-switch",
    );
    let ready = poll(Duration::from_secs(60), || {
        (vm.prop("tether", "ActiveState") == "active").then_some(t.elapsed())
    });
    let (_, _, pid3) = active_pid(&vm);
    c.check(
        "OVS started after tether → READY",
        "active, same MainPID",
        format!("active after {ready:?}, MainPID {pid2} → {pid3}"),
        ready.is_some() && pid3 == pid2,
    );

    // A bad config: exit 2, not restarted, the reason at priority err.
    vm.sh("systemctl stop tether
         cp /etc/tether/tether.yaml /root/tether.yaml.good
         sed -i 's|^datapathType: .*|datapathType: bogus|' /etc/tether/tether.yaml");
    let restarts_before = vm.prop("tether", "NRestarts");
    let (code, _) = vm.status("systemctl start tether");
    std::thread::sleep(Duration::from_secs(8));
    let (a, _, _) = active_pid(&vm);
    let exit = vm.prop("tether", "ExecMainStatus");
    let restarts_after = vm.prop("tether", "NRestarts");
    c.check(
        "bad config → exit 2, not restarted",
        "start fails, exit 2, failed, NRestarts unchanged after 8 s (> RestartSec)",
        format!(
            "systemctl start rc {code}, exit {exit}, {a}, NRestarts {restarts_before} → {restarts_after}"
        ),
        code != 0 && exit == "2" && a == "failed" && restarts_before == restarts_after,
    );
    let err = vm.journal("tether", "-p err");
    c.check(
        "journalctl -u tether -p err shows the reason",
        "a line naming datapathType",
        err.lines()
            .filter(|l| l.contains("datapathType"))
            .collect::<Vec<_>>()
            .join(" / "),
        err.contains("datapathType") && err.contains("bogus"),
    );
    vm.sh("cp /root/tether.yaml.good /etc/tether/tether.yaml
         systemctl reset-failed tether
         systemctl start tether");

    // Reboot with the unit enabled: a fresh kernel (the NIC back as eth1 with its address,
    // no OVS devices), OVSDB and /etc kept.
    let st = vm.reboot();
    c.check(
        "systemctl reboot",
        "container exits 133 (reboot)",
        format!("{st}"),
        st.code() == Some(133),
    );
    vm.power_cycle(Addressing::Static);
    let up = poll(Duration::from_secs(90), || {
        (vm.prop("tether", "ActiveState") == "active").then_some(())
    });
    let status5 = vm.prop("tether", "StatusText");
    c.check(
        "after reboot: started at boot and READY",
        "active, StatusText ready",
        format!("{:?}; {status5:?}", vm.prop("tether", "ActiveState")),
        up.is_some() && status5.starts_with("ready:"),
    );
    let (ok, seen) = poll(Duration::from_secs(20), || {
        let t = taken_over(&vm);
        t.0.then_some(t)
    })
    .unwrap_or_else(|| taken_over(&vm));
    c.check(
        "after reboot: NIC taken over",
        "eth1~ and eth1 on br-int, 192.0.2.10 on eth1",
        seen,
        ok,
    );
    let reach = poll(Duration::from_secs(20), || ping_gw(&vm).then_some(())).is_some();
    c.check(
        "after reboot: VM reaches its gateway",
        "ping ok",
        format!("{reach}"),
        reach,
    );
    drop(vm);
    c.finish();
}
