//! The ExternalNode bed driven through the `tether` binary: a manifests directory, the
//! daemon started with it (`Bed::start`, or `Bed::start_with` for other flags), and its
//! `check` and `status` as the tests read them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::CONFIG;
use crate::common::{Netns, Sandbox, Tether, tether::binary, wait_for};

/// Write then rename, as config tools do, so a poll never sees half a file.
pub fn put(dir: &Path, name: &str, text: &str) {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

pub struct Bed {
    pub sb: Sandbox,
    pub peer: Netns,
    pub manifests: PathBuf,
    pub sock: PathBuf,
}

impl Bed {
    pub fn new() -> Bed {
        Bed::new_with(crate::common::SandboxOpts::default())
    }

    pub fn new_with(opts: crate::common::SandboxOpts) -> Bed {
        let (sb, peer) = super::setup_with(opts);
        let manifests = sb.dir().join("manifests");
        std::fs::create_dir_all(&manifests).unwrap();
        // In a directory of its own, as /run/tether is (a test wipes it).
        let sock = sb.dir().join("run/tether.sock");
        Bed {
            sb,
            peer,
            manifests,
            sock,
        }
    }

    pub fn start(&self) -> Tether {
        self.start_with(crate::common::datapath())
    }

    /// The daemon with another `--datapath-type` (the bridge is netdev).
    pub fn start_with(&self, datapath_type: &str) -> Tether {
        self.start_bin(&binary(), datapath_type)
    }

    /// [`Bed::start_with`] of another build of tether (benchmarks: the static one).
    pub fn start_bin(&self, bin: &Path, datapath_type: &str) -> Tether {
        let config = self.sb.path("tether.yaml");
        std::fs::write(&config, CONFIG).unwrap();
        let dir = self.sb.dir().to_str().unwrap().to_string();
        let args = [
            "--config",
            config.to_str().unwrap(),
            "--manifests",
            self.manifests.to_str().unwrap(),
            "--ovs-rundir",
            &dir,
            "--bridge",
            "br-int",
            "--datapath-type",
            datapath_type,
            "--node-name",
            "vm1",
            "--state-socket",
            self.sock.to_str().unwrap(),
        ];
        Tether::start_bin(bin, self.sb.ns(), &args, &self.sb.path("tether.log"))
    }

    pub fn port_uuid(&self, name: &str) -> Option<String> {
        self.sb
            .try_vsctl(&["get", "Port", name, "_uuid"])
            .ok()
            .map(|s| s.trim().to_string())
    }

    pub fn wait_port(&self, name: &str, within: Duration) -> String {
        wait_for(within, &format!("Port {name}"), || self.port_uuid(name))
    }

    /// `tether check` in the VM namespace with the daemon's config and source.
    pub fn check(&self) -> String {
        self.check_with(crate::common::datapath())
    }

    /// [`Bed::check`] with another `--datapath-type`.
    pub fn check_with(&self, datapath_type: &str) -> String {
        let dir = self.sb.dir().to_str().unwrap().to_string();
        let bin = binary();
        let o = self
            .sb
            .ns()
            .command(&[
                bin.to_str().unwrap(),
                "check",
                "--manifests",
                self.manifests.to_str().unwrap(),
                "--ovs-rundir",
                &dir,
                "--node-name",
                "vm1",
                "--datapath-type",
                datapath_type,
                "--state-socket",
                &format!("{dir}/check.sock"),
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// `tether <cmd>` (`plan` or `check`) with the daemon's settings, its state directory
    /// included; exit code and stdout.
    pub fn tool(&self, cmd: &str) -> (i32, String) {
        let dir = self.sb.dir().to_str().unwrap().to_string();
        let config = self.sb.path("tether.yaml");
        std::fs::write(&config, CONFIG).unwrap();
        let state = self.sb.path("state");
        let check_sock = format!("{dir}/check.sock");
        let sock = if cmd == "check" {
            check_sock.as_str()
        } else {
            self.sock.to_str().unwrap()
        };
        let o = self
            .sb
            .ns()
            .command(&[
                binary().to_str().unwrap(),
                cmd,
                "--config",
                config.to_str().unwrap(),
                "--manifests",
                self.manifests.to_str().unwrap(),
                "--ovs-rundir",
                &dir,
                "--bridge",
                "br-int",
                "--node-name",
                "vm1",
                "--datapath-type",
                crate::common::datapath(),
                "--state-socket",
                sock,
                "--state-dir",
                state.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    }

    pub fn status(&self) -> Value {
        let o = std::process::Command::new(binary())
            .args([
                "status",
                "--json",
                "--state-socket",
                self.sock.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        serde_json::from_slice(&o.stdout).unwrap_or(Value::Null)
    }
}
