//! ovs-vswitchd's control socket (`ovs-appctl`'s transport): JSON-RPC 1.0 over
//! `<rundir>/ovs-vswitchd.<pid>.ctl`, the pid read from `<rundir>/ovs-vswitchd.pid`.
//! Requests are `{"id", "method": <command>, "params": [<args as strings>]}`; the reply's
//! `result` is the command's text output, `error` its failure text (OVS `lib/unixctl.c`).
//!
//! Owns: one blocking request per connection ([`Unixctl::call`]) and, on top of it,
//! removing a datapath port that outlived its OVSDB row ([`delete_dp_interface`], Antrea's
//! `DeleteDPInterface`; docs/antrea-compat.md#removing-a-lingering-datapath-port) — OVS
//! sometimes keeps an internal netdev busy after its port is deleted, and then the NIC's
//! old name stays taken. The parser of `dpctl/show` is pure ([`parse_dpctl_show`]). Does
//! not own: OVSDB (`ovsdb`), whose JSON stream framing it borrows (`ovsdb::framer`).
//!
//! The userspace datapath is `netdev@ovs-netdev`, the kernel one `system@ovs-system`;
//! Antrea only ever asks `ovs-system`, which does not exist on a netdev bridge.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::ovsdb::OvsdbError;
use crate::ovsdb::framer::Framer;

/// Why a control-socket command did not give its output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UnixctlError {
    /// The pid file or the socket could not be read or reached.
    Io { path: String, error: String },
    /// The daemon closed the connection before its reply.
    Closed { path: String },
    /// No reply within the command's timeout.
    Timeout { method: String, ms: u64 },
    /// The reply is not the protocol's JSON-RPC (or grew past the reply cap).
    Protocol(String),
    /// The daemon ran the command and it failed: its error text.
    Failed { method: String, error: String },
}

impl std::fmt::Display for UnixctlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UnixctlError::Io { path, error } => write!(f, "control socket {path}: {error}"),
            UnixctlError::Closed { path } => {
                write!(f, "control socket {path}: closed before the reply")
            }
            UnixctlError::Timeout { method, ms } => {
                write!(f, "ovs-appctl {method}: no reply within {ms} ms")
            }
            UnixctlError::Protocol(m) => write!(f, "control socket protocol error: {m}"),
            UnixctlError::Failed { method, error } => {
                write!(f, "ovs-appctl {method} failed: {error}")
            }
        }
    }
}

impl std::error::Error for UnixctlError {}

/// The framer's complaints (bad JSON, a reply over the cap).
impl From<OvsdbError> for UnixctlError {
    fn from(e: OvsdbError) -> UnixctlError {
        UnixctlError::Protocol(e.to_string())
    }
}

/// How long one command may take.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// Cap on one reply (a `dpctl/show` of thousands of ports is well under this).
const MAX_REPLY: usize = 4 << 20;

/// The datapath name for a bridge's `datapath_type`.
pub fn datapath_name(datapath_type: &str) -> &'static str {
    match datapath_type {
        "netdev" => "netdev@ovs-netdev",
        _ => "system@ovs-system",
    }
}

/// A daemon's control socket.
#[derive(Clone, Debug)]
pub struct Unixctl {
    path: PathBuf,
    timeout: Duration,
}

impl Unixctl {
    pub fn at(path: PathBuf) -> Unixctl {
        Unixctl {
            path,
            timeout: TIMEOUT,
        }
    }

    /// The socket of the running `daemon` (e.g. `ovs-vswitchd`) in `rundir`, found through
    /// its pid file as `ovs-appctl -t <daemon>` finds it.
    pub fn for_daemon(rundir: &Path, daemon: &str) -> Result<Unixctl, UnixctlError> {
        let pidfile = rundir.join(format!("{daemon}.pid"));
        let text = std::fs::read_to_string(&pidfile).map_err(|e| UnixctlError::Io {
            path: pidfile.display().to_string(),
            error: format!("cannot read pid file: {e}"),
        })?;
        let pid: u32 = text.trim().parse().map_err(|_| UnixctlError::Io {
            path: pidfile.display().to_string(),
            error: format!("pid file holds {:?}, not a pid", text.trim()),
        })?;
        Ok(Unixctl::at(rundir.join(format!("{daemon}.{pid}.ctl"))))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Run one command; its text output, or `Failed` with the daemon's error text.
    pub fn call(&self, method: &str, params: &[&str]) -> Result<String, UnixctlError> {
        let path = self.path.display().to_string();
        let io = |e: std::io::Error| UnixctlError::Io {
            path: path.clone(),
            error: e.to_string(),
        };
        let mut s = UnixStream::connect(&self.path).map_err(io)?;
        s.set_read_timeout(Some(self.timeout)).map_err(io)?;
        s.set_write_timeout(Some(self.timeout)).map_err(io)?;
        let req = encode_request(0, method, params);
        s.write_all(req.as_bytes()).map_err(io)?;
        let mut framer = Framer::new(MAX_REPLY);
        let mut buf = [0u8; 8192];
        loop {
            if let Some(v) = framer.next_message()? {
                return decode_reply(method, &v);
            }
            let n = match s.read(&mut buf) {
                Ok(0) => return Err(UnixctlError::Closed { path }),
                Ok(n) => n,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(UnixctlError::Timeout {
                        method: method.to_string(),
                        ms: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
                    });
                }
                Err(e) => return Err(io(e)),
            };
            framer.push(&buf[..n]);
        }
    }
}

/// The request bytes for `method params…`.
pub fn encode_request(id: u64, method: &str, params: &[&str]) -> String {
    json!({"id": id, "method": method, "params": params}).to_string()
}

/// A reply's text: `result` when `error` is null, else `Failed` carrying the error text.
pub fn decode_reply(method: &str, v: &Value) -> Result<String, UnixctlError> {
    match v.get("error") {
        None | Some(Value::Null) => match v.get("result") {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(Value::Null) | None => Ok(String::new()),
            Some(other) => Err(UnixctlError::Protocol(format!(
                "unixctl {method}: result is not a string: {other}"
            ))),
        },
        Some(Value::String(e)) => Err(UnixctlError::Failed {
            method: method.to_string(),
            error: e.trim_end().to_string(),
        }),
        Some(other) => Err(UnixctlError::Failed {
            method: method.to_string(),
            error: other.to_string(),
        }),
    }
}

/// `(port number, name)` of every port in `dpctl/show` output, whose port lines read
/// `  port 3: eth1 (tap)` or `  port 2: eth1~` (OVS `lib/dpctl.c show_dpif`).
pub fn parse_dpctl_show(text: &str) -> Vec<(u32, String)> {
    text.lines()
        .filter_map(|l| {
            let rest = l.trim_start().strip_prefix("port ")?;
            let (num, tail) = rest.split_once(": ")?;
            let n: u32 = num.parse().ok()?;
            let name = tail.split(' ').next()?;
            (!name.is_empty()).then(|| (n, name.to_string()))
        })
        .collect()
}

/// Remove `name` from the datapath if it is still there: `dpctl/show <dp>`, then
/// `dpctl/del-if <dp> <name>`. Ok(true) when a port was removed, Ok(false) when there was
/// none (or it vanished meanwhile: "No such device").
pub fn delete_dp_interface(
    ctl: &Unixctl,
    datapath: &str,
    name: &str,
) -> Result<bool, UnixctlError> {
    let shown = ctl.call("dpctl/show", &[datapath])?;
    if !parse_dpctl_show(&shown).iter().any(|(_, n)| n == name) {
        return Ok(false);
    }
    match ctl.call("dpctl/del-if", &[datapath, name]) {
        Ok(_) => Ok(true),
        Err(UnixctlError::Failed { error, .. }) if error.contains("No such device") => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_and_reply_codec() {
        assert_eq!(
            encode_request(0, "dpctl/show", &["netdev@ovs-netdev"]),
            r#"{"id":0,"method":"dpctl/show","params":["netdev@ovs-netdev"]}"#
        );
        let ok = json!({"id": 0, "result": "netdev@ovs-netdev:\n", "error": null});
        assert_eq!(
            decode_reply("dpctl/show", &ok).unwrap(),
            "netdev@ovs-netdev:\n"
        );
        let err = json!({"id": 0, "result": null, "error": "opening datapath ovs-system failed (No such file or directory)\n"});
        assert_eq!(
            decode_reply("dpctl/show", &err).unwrap_err(),
            UnixctlError::Failed {
                method: "dpctl/show".into(),
                error: "opening datapath ovs-system failed (No such file or directory)".into()
            }
        );
        let bad = json!({"id": 0, "result": 5, "error": null});
        assert!(matches!(
            decode_reply("x", &bad),
            Err(UnixctlError::Protocol(_))
        ));
    }

    #[test]
    fn dpctl_show_ports() {
        // Shape of `ovs-appctl dpctl/show netdev@ovs-netdev` on OVS 3.1.
        let text = "netdev@ovs-netdev:\n  lookups: hit:12 missed:3 lost:0\n  flows: 2\n  port 0: ovs-netdev (tap)\n  port 1: br-int (tap)\n  port 2: eth1~\n  port 3: eth1 (tap)\n";
        assert_eq!(
            parse_dpctl_show(text),
            vec![
                (0, "ovs-netdev".to_string()),
                (1, "br-int".to_string()),
                (2, "eth1~".to_string()),
                (3, "eth1".to_string()),
            ]
        );
        assert!(parse_dpctl_show("netdev@ovs-netdev:\n  flows: 0\n").is_empty());
    }

    #[test]
    fn datapath_names() {
        assert_eq!(datapath_name("netdev"), "netdev@ovs-netdev");
        assert_eq!(datapath_name("system"), "system@ovs-system");
        assert_eq!(datapath_name(""), "system@ovs-system");
    }
}
