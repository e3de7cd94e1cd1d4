//! Whether systemd runs, or is about to run, tether's unit: `tether reset` must not run
//! then. In a crash-restart gap (`Restart=on-failure`, `RestartSec=5s`) no daemon holds
//! the OVSDB lock or answers on the state socket, yet one starts within seconds and would
//! take the NIC over again under the reset; a daemon still waiting for OVS
//! (`activating`) holds neither yet either. Asked of systemd itself, only where systemd
//! is the init system.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The unit the packages and the README install.
pub const UNIT: &str = "tether.service";

/// Why reset must not run, from `systemctl show -p LoadState,ActiveState,SubState` of
/// the unit: anything but stopped (`inactive`, `failed`) or not installed. Pure.
pub fn refusal(unit: &str, show: &str) -> Option<String> {
    let prop = |k: &str| {
        show.lines()
            .find_map(|l| l.strip_prefix(k)?.strip_prefix('='))
            .unwrap_or("")
            .trim()
    };
    if prop("LoadState") != "loaded" {
        return None;
    }
    match prop("ActiveState") {
        "" | "inactive" | "failed" => None,
        state => Some(format!(
            "systemd's {unit} is {state} ({}): a tether daemon runs or is about to; stop it first (systemctl stop tether); reset never runs beside it",
            prop("SubState")
        )),
    }
}

/// [`refusal`] of systemd's own answer; None where systemd is not the init system or
/// does not answer within 5 s (reset then relies on the OVSDB lock and the socket).
pub fn check() -> Option<String> {
    if !std::path::Path::new("/run/systemd/system").is_dir() {
        return None;
    }
    let mut child = Command::new("systemctl")
        .args(["show", "-p", "LoadState,ActiveState,SubState", UNIT])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                log::warn!("reset: systemctl show {UNIT} did not answer within 5 s");
                return None;
            }
        }
    }
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut out).ok()?;
    refusal(UNIT, &out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_stopped_or_absent_unit_lets_reset_run() {
        let show = |load: &str, active: &str, sub: &str| {
            format!("LoadState={load}\nActiveState={active}\nSubState={sub}\n")
        };
        let refused = |state: &str| {
            format!(
                "systemd's tether.service is {state}: a tether daemon runs or is about to; stop it first (systemctl stop tether); reset never runs beside it"
            )
        };
        let rows = [
            (show("loaded", "inactive", "dead"), None),
            (show("loaded", "failed", "failed"), None),
            (show("not-found", "inactive", "dead"), None),
            (show("masked", "inactive", "dead"), None),
            (String::new(), None),
            (
                show("loaded", "activating", "auto-restart"),
                Some(refused("activating (auto-restart)")),
            ),
            (
                show("loaded", "activating", "start"),
                Some(refused("activating (start)")),
            ),
            (
                show("loaded", "active", "running"),
                Some(refused("active (running)")),
            ),
            (
                show("loaded", "deactivating", "stop-sigterm"),
                Some(refused("deactivating (stop-sigterm)")),
            ),
        ];
        for (text, want) in rows {
            assert_eq!(refusal(UNIT, &text), want, "{text}");
        }
    }
}
