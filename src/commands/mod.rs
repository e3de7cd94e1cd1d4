//! The `tether` binary's commands, one module each, all with one signature
//! ([`Command::main`]): the arguments after the command's name and stdout in, the exit code
//! of a command that did its work (`check`'s 1 for a failed check, `plan`'s 3 for pending
//! changes) or a [`CmdError`] out. [`dispatch`] picks the command, prints its usage on
//! `--help` and turns an error into its line on stderr and its exit code
//! (docs/design.md#exit-codes).
//!
//! Owns: the command table, argument-level parsing shared by every command (the config
//! file and flags, through `config`) and the error type. Does not own what the commands
//! share with the daemon (`wiring`: the OVS sockets, the source, the ExternalNode
//! controller's settings).

use std::io::Write;
use std::process::ExitCode;

use crate::config::{self, Config, SETTINGS};

pub mod check;
pub mod dry;
pub mod flows;
pub mod plan;
pub mod reset;
pub mod run;
pub mod status;

/// Why a command did not do its work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CmdError {
    /// The command's own flags are wrong: exit 2, its usage follows the message.
    Usage(String),
    /// The configuration (flags, config file) cannot be used: exit 2.
    Config(String),
    /// The command could not do its work: exit 1, `tether <command>: <why>` on stderr.
    Failed(String),
    /// Already said through the log (the daemon's stderr is its log): exit with this code.
    Logged(u8),
}

impl std::fmt::Display for CmdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CmdError::Usage(m) | CmdError::Config(m) | CmdError::Failed(m) => f.write_str(m),
            CmdError::Logged(code) => write!(f, "failed (exit {code}, see the log)"),
        }
    }
}

impl std::error::Error for CmdError {}

/// The commands' helpers build their failures as text with context; `?` makes them a
/// [`CmdError::Failed`].
impl From<String> for CmdError {
    fn from(why: String) -> CmdError {
        CmdError::Failed(why)
    }
}

/// One command of the binary.
pub struct Command {
    pub name: &'static str,
    /// Its line in the general usage.
    pub summary: &'static str,
    /// Its own `--help` text; `None`: the general usage (which lists `run`'s flags).
    pub usage: Option<&'static str>,
    /// Runs it: the arguments after its name, stdout.
    pub main: fn(&[String], &mut dyn Write) -> Result<u8, CmdError>,
}

pub const COMMANDS: &[Command] = &[
    Command {
        name: "run",
        summary: "run the daemon (READY to systemd after the first full sync)",
        usage: None,
        main: run::main,
    },
    Command {
        name: "check",
        summary: "preflight: OVS sockets, bridge, privileges, API and RBAC or manifests",
        usage: None,
        main: check::main,
    },
    Command {
        name: "status",
        summary: "ask the running daemon (--json for JSON, --metrics for Prometheus text)",
        usage: None,
        main: status::main,
    },
    Command {
        name: "plan",
        summary: "what run would change now, changing nothing (see plan --help)",
        usage: Some(plan::USAGE),
        main: plan::main,
    },
    Command {
        name: "flows",
        summary: "the bridge's flows as ovs-ofctl prints them, grouped by owner (see flows --help)",
        usage: Some(flows::USAGE),
        main: flows::main,
    },
    Command {
        name: "reset",
        summary: "give the VM back as before tether, daemon stopped (see reset --help)",
        usage: Some(reset::USAGE),
        main: reset::main,
    },
    Command {
        name: "version",
        summary: "print the version",
        usage: None,
        main: version,
    },
];

fn version(_: &[String], out: &mut dyn Write) -> Result<u8, CmdError> {
    let _ = writeln!(out, "tether {}", env!("CARGO_PKG_VERSION"));
    Ok(0)
}

/// The general usage: the commands, the exit codes, and the flags of `run` and `check`.
pub fn usage() -> String {
    let mut s = String::from("usage: tether <command> [flags]\n\ncommands:\n");
    for c in COMMANDS {
        s.push_str(&format!("  {:<10}{}\n", c.name, c.summary));
    }
    s.push_str(
        "\nexit codes: 0 ok / clean stop, 1 runtime failure or failed check, 2 bad usage or config\n",
    );
    s.push_str("\nflags of run and check (each also a config-file key; status reads --config and --state-socket):\n");
    for (flag, key, help) in SETTINGS {
        let key = if key.is_empty() {
            String::new()
        } else {
            format!(" [{key}]")
        };
        s.push_str(&format!("  {flag} {help}{key}\n"));
    }
    s.push_str(
        "\nstatus flags:\n  --json  the snapshot as JSON\n  --metrics  Prometheus text format\n",
    );
    s
}

/// Run the command `args` names (`args` without the program's name) and say how it ended.
pub fn dispatch(args: &[String]) -> ExitCode {
    let rest = args.get(1..).unwrap_or_default();
    let name = match args.first().map(String::as_str) {
        Some("--version") => "version",
        Some("--help" | "-h" | "help") => {
            print!("{}", usage());
            return ExitCode::SUCCESS;
        }
        Some(name) => name,
        None => {
            eprint!("{}", usage());
            return ExitCode::from(2);
        }
    };
    let Some(cmd) = COMMANDS.iter().find(|c| c.name == name) else {
        eprint!("tether: unknown command {name:?}\n\n{}", usage());
        return ExitCode::from(2);
    };
    if cmd.name != "version" && rest.iter().any(|a| a == "--help" || a == "-h") {
        print!("{}", cmd.usage.map_or_else(usage, String::from));
        return ExitCode::SUCCESS;
    }
    // Not locked for the whole command: `run` lasts as long as the daemon.
    let mut stdout = std::io::stdout();
    let result = (cmd.main)(rest, &mut stdout);
    let _ = stdout.flush();
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e @ CmdError::Usage(_)) => {
            let usage = cmd.usage.map_or_else(usage, String::from);
            eprint!("tether {}: {e}\n\n{usage}", cmd.name);
            ExitCode::from(2)
        }
        Err(CmdError::Config(why)) => {
            crate::logging::fatal(&why);
            ExitCode::from(2)
        }
        Err(e @ CmdError::Failed(_)) => {
            eprintln!("tether {}: {e}", cmd.name);
            ExitCode::from(1)
        }
        Err(CmdError::Logged(code)) => ExitCode::from(code),
    }
}

/// The configuration every command reads: its flags (`args`, the command's own taken out)
/// over the config file (`--config`, or `/etc/tether/tether.yaml` when it exists).
pub fn load_config(args: &[String]) -> Result<Config, CmdError> {
    let exists = std::path::Path::new(config::DEFAULT_CONFIG).exists();
    config::parse_run(
        &config::with_default_config(args, exists),
        &|p| crate::files::read_trusted_text(std::path::Path::new(p), crate::files::CONFIG_MAX),
        &|k| std::env::var(k).ok(),
        &hostname,
    )
    .map_err(|e| CmdError::Config(e.to_string()))
}

fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The general usage lists the commands in the table's order, aligned as before.
    #[test]
    fn usage_lists_every_command() {
        let u = usage();
        assert!(u.starts_with(
            "usage: tether <command> [flags]\n\ncommands:\n  run       run the daemon (READY to systemd after the first full sync)\n  check     preflight:"
        ));
        assert!(u.contains("\n  version   print the version\n\nexit codes: 0 ok / clean stop, 1 runtime failure or failed check, 2 bad usage or config\n\nflags of run and check"));
    }
}
