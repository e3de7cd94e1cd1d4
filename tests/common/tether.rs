//! The `tether` binary under test, run as a child process (inside a namespace), killed on
//! drop. Its stderr goes to a log file that failure messages show.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{Netns, patience, pid_alive, wait_for};

/// The binary cargo built for this test run (integration tests get its path from cargo;
/// examples fall back to the target dir next to themselves), or `TETHER_TEST_BIN`.
pub fn binary() -> PathBuf {
    // Another build under the same tests (an older one, to show a test failing before a
    // change): TETHER_TEST_BIN=/path/to/tether.
    if let Some(p) = std::env::var_os("TETHER_TEST_BIN") {
        return PathBuf::from(p);
    }
    if let Some(p) = option_env!("CARGO_BIN_EXE_tether") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/examples/<bench> → target/<profile>/tether
    exe.parent()
        .and_then(Path::parent)
        .map(|d| d.join("tether"))
        .expect("target dir")
}

/// Whether the harness gives tether `--state-dir` (always, but for a build from before the
/// flag: `TETHER_TEST_NO_STATE_DIR=1` with `TETHER_TEST_BIN`, to show a test failing on it).
pub fn state_dir_flag() -> bool {
    std::env::var_os("TETHER_TEST_NO_STATE_DIR").is_none()
}

pub struct Tether {
    child: Option<Child>,
    log: PathBuf,
    /// The test changes flows behind tether's back: their repair is expected.
    drift_expected: bool,
}

impl Tether {
    /// `tether run <args>` inside `ns`, with `RUST_LOG` as given (default `info`).
    pub fn start(ns: &Netns, args: &[&str], log: &Path) -> Tether {
        Tether::start_bin(&binary(), ns, args, log)
    }

    /// [`Tether::start`] with another build of the binary (the static one, say).
    pub fn start_bin(bin: &Path, ns: &Netns, args: &[&str], log: &Path) -> Tether {
        let mut argv = vec![bin.to_str().expect("utf-8 path"), "run"];
        argv.extend_from_slice(args);
        // Never the machine's own /var/lib/tether: a state directory beside the log.
        let state = log.with_file_name("state");
        if !args.contains(&"--state-dir") && state_dir_flag() {
            argv.extend(["--state-dir", state.to_str().expect("utf-8 path")]);
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("open tether log");
        let child = ns
            .command(&argv)
            .env(
                "RUST_LOG",
                std::env::var("TETHER_TEST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("dup log"))
            .stderr(file)
            .spawn()
            .expect("spawn tether");
        Tether {
            child: Some(child),
            log: log.to_path_buf(),
            drift_expected: false,
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Wait for a line containing `needle` in the log.
    pub fn wait_log(&self, needle: &str, timeout: Duration) {
        wait_for(timeout, &format!("tether log line {needle:?}"), || {
            self.log().contains(needle).then_some(())
        });
    }

    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait; the exit code.
    pub fn stop(&mut self) -> Option<i32> {
        let mut c = self.child.take()?;
        let _ = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .output();
        let deadline = std::time::Instant::now() + patience(Duration::from_secs(5));
        while std::time::Instant::now() < deadline {
            if let Ok(Some(st)) = c.try_wait() {
                return st.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        c.wait().ok().and_then(|s| s.code())
    }

    /// Wait (up to `timeout`, stretched by [`patience`]) for the daemon to exit by itself;
    /// its exit code, or None if it is still running (or was killed by a signal).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = std::time::Instant::now() + patience(timeout);
        let c = self.child.as_mut()?;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(st)) = c.try_wait() {
                self.child = None;
                return st.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    pub fn running(&self) -> bool {
        self.pid().is_some_and(pid_alive)
    }
}

impl Tether {
    /// This test changes tether's flows itself (`ovs-ofctl del-flows`, …).
    pub fn expect_drift(&mut self) {
        self.drift_expected = true;
    }
}

/// What tether logs when it finds its flows changed on the switch (`openflow::drift`).
pub const DRIFT_LOG: &str = "differed from what tether installed";

impl Drop for Tether {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- tether log {}:\n{}", self.log.display(), self.log());
        }
        self.kill9();
        // Every test is also a check that tether does not mistake its own flows, read
        // back from the switch, for someone else's changes.
        let log = self.log();
        if !self.drift_expected && !std::thread::panicking() && log.contains(DRIFT_LOG) {
            panic!(
                "tether found its flows changed on the switch though the test changed none:\n{log}"
            );
        }
    }
}
