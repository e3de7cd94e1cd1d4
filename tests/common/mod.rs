//! Shared harness for the privileged integration tests: a real userspace Open vSwitch in a
//! private network namespace ([`Sandbox`]), namespace guards ([`Netns`]), and a way to run a
//! test body inside a namespace without `unsafe` ([`in_netns`]).
//!
//! Every privileged test starts with `if !common::privileged("name") { return; }`: without
//! root or OVS it FAILS with a message saying how to fix it; only `TETHER_SKIP_PRIVILEGED=1`
//! skips it, loudly, for quick local loops.
//!
//! Nothing here touches the root namespace's links, addresses or routes: daemons, veths and
//! addresses all live in namespaces the harness creates, named `tt-<pid>-<n>-…` so that
//! `scripts/cleanup-stale.sh` can remove what a SIGKILLed run left behind.

// Each test crate uses a different part of the harness.
#![allow(dead_code)]

pub mod netns;
pub mod ovs;
pub mod pinger;
pub mod privilege;
pub mod relay;
pub mod tether;
pub mod vm;

// Each test crate uses a different subset of these.
#[allow(unused_imports)]
pub use netns::{Netns, in_netns, unique_suffix};
#[allow(unused_imports)]
pub use ovs::{Sandbox, SandboxOpts, datapath, dpctl_name, kernel_datapath};
#[allow(unused_imports)]
pub use privilege::privileged;
#[allow(unused_imports)]
pub use tether::Tether;

use std::process::Command;
use std::time::{Duration, Instant};

/// Run a command; panic with its stderr when it fails. Returns stdout.
pub fn run(cmd: &mut Command) -> String {
    match try_run(cmd) {
        Ok(out) => out,
        Err(e) => panic!("{e}"),
    }
}

/// Run a command; Err names the command, its exit status and stderr.
pub fn try_run(cmd: &mut Command) -> Result<String, String> {
    let shown = format!("{cmd:?}");
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {shown}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{shown} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        ))
    }
}

/// How many times slower than this machine the one the tests run on may be:
/// `TETHER_TEST_TIMEOUT_SCALE` (a whole number, 1 by default). The kernel tier's VM sets it
/// (scripts/kernel-vm.sh: 8 under software emulation, where every fork and every OVS
/// reconfiguration takes several times as long).
pub fn timeout_scale() -> u32 {
    static SCALE: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *SCALE.get_or_init(
        || match std::env::var("TETHER_TEST_TIMEOUT_SCALE").as_deref() {
            Err(_) | Ok("") => 1,
            Ok(v) => match v.parse::<u32>() {
                Ok(n) if n >= 1 => n,
                _ => panic!("TETHER_TEST_TIMEOUT_SCALE={v:?}: a whole number >= 1"),
            },
        },
    )
}

/// `d` stretched by [`timeout_scale`]: what a deadline written for this machine becomes on
/// the machine the tests run on. Every wait of the harness goes through it.
pub fn patience(d: Duration) -> Duration {
    d * timeout_scale()
}

/// Poll `f` every 20 ms until it returns Some or `timeout` passes (then panic naming
/// `what`). Both stretch by [`patience`]: on a machine several times slower, each look
/// (often an `ovs-vsctl` or `ip` process) costs as much more, and looking as often would
/// take the CPU from what is being waited for.
pub fn wait_for<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let timeout = patience(timeout);
    let end = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() >= end {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(patience(Duration::from_millis(20)));
    }
}

/// True while `pid` exists and is not a zombie (kill -0 succeeds on zombies).
pub fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // Field 3 is the state; the comm field before it may contain spaces, so split after ')'.
        Ok(s) => s
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}
