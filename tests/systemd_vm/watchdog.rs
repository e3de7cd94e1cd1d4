//! The systemd watchdog: pinged within its period, and a hung thread makes tether miss it
//! and be restarted.

use super::*;

#[test]
fn watchdog_under_a_real_systemd() {
    if !common::privileged("watchdog_under_a_real_systemd") {
        return;
    }
    let mut c = Checks::new("watchdog");
    let vm = Vm::boot("sdwd", Addressing::Static);
    // A stricter watchdog than the unit's 60 s: 13 periods in the 130 s below.
    install_by_readme(
        &vm,
        &mut c,
        "mkdir -p /etc/systemd/system/tether.service.d
         printf '[Service]\\nWatchdogSec=10s\\n' >/etc/systemd/system/tether.service.d/watchdog.conf",
    );
    let (_, _, pid0) = active_pid(&vm);
    let end = Instant::now() + Duration::from_secs(130);
    let mut seen = Vec::new();
    while Instant::now() < end {
        let (a, _, p) = active_pid(&vm);
        let r = vm.prop("tether", "NRestarts");
        if a != "active" || p != pid0 || r != "0" {
            seen.push(format!("{a} pid {p} NRestarts {r}"));
            break;
        }
        std::thread::sleep(Duration::from_secs(5));
    }
    c.check(
        "130 s with WatchdogSec=10s",
        "active throughout, same MainPID, NRestarts 0",
        if seen.is_empty() {
            format!(
                "active, MainPID {pid0}, NRestarts {}, WatchdogUSec {}",
                vm.prop("tether", "NRestarts"),
                vm.prop("tether", "WatchdogUSec")
            )
        } else {
            seen.join("; ")
        },
        seen.is_empty() && vm.prop("tether", "WatchdogUSec") == "10s",
    );

    // A thread made to hang: the manifests poller, 10 s after it starts (test-only hook).
    vm.sh(
        "printf '[Service]\\nEnvironment=TETHER_TEST_HANG=manifests\\n' \
           >/etc/systemd/system/tether.service.d/hang.conf
         systemctl daemon-reload
         systemctl restart tether",
    );
    let (_, _, pid1) = active_pid(&vm);
    // Hangs at ~10 s, stuck after its 60 s deadline, then 10 s without a ping.
    let killed = poll(Duration::from_secs(150), || {
        let j = vm.journal("tether", "");
        j.contains("Watchdog timeout").then_some(j)
    });
    let j = killed.unwrap_or_else(|| vm.journal("tether", ""));
    let named = j
        .lines()
        .find(|l| l.contains("watchdog: thread manifests"))
        .unwrap_or("")
        .to_string();
    c.check(
        "hung thread named in the log",
        "\"watchdog: thread manifests has made no progress …\" at priority err",
        named.clone(),
        !named.is_empty()
            && vm
                .journal("tether", "-p err")
                .contains("watchdog: thread manifests"),
    );
    c.check(
        "hung thread → systemd's watchdog kills tether",
        "\"Watchdog timeout\" in the journal",
        j.lines()
            .find(|l| l.contains("Watchdog timeout"))
            .unwrap_or("none")
            .to_string(),
        j.contains("Watchdog timeout"),
    );
    let restarted = poll(Duration::from_secs(30), || {
        let (a, _, p) = active_pid(&vm);
        (a == "active" && p != pid1 && p != 0).then_some(p)
    });
    c.check(
        "… and restarts it",
        "active again, new MainPID, NRestarts 1",
        format!(
            "MainPID {pid1} → {restarted:?}, NRestarts {}",
            vm.prop("tether", "NRestarts")
        ),
        restarted.is_some() && vm.prop("tether", "NRestarts") == "1",
    );
    drop(vm);
    c.finish();
}
