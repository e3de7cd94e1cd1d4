//! The `tether` binary: parse arguments, set up logging, hand over to the library.
//! Exit codes (docs/design.md#exit-codes): 0 clean stop, 1 runtime failure, 2 bad usage or
//! configuration.

use std::process::ExitCode;

use tether::config::{self, Config, SETTINGS};
use tether::status;

const COMMANDS: &str = "usage: tether <command> [flags]

commands:
  run       run the daemon (READY to systemd after the first full sync)
  check     preflight: OVS sockets, bridge, privileges, API and RBAC or manifests
  status    ask the running daemon (--json for JSON, --metrics for Prometheus text)
  plan      what run would change now, changing nothing (see plan --help)
  flows     the bridge's flows as ovs-ofctl prints them, grouped by owner (see flows --help)
  reset     give the VM back as before tether, daemon stopped (see reset --help)
  version   print the version

exit codes: 0 ok / clean stop, 1 runtime failure or failed check, 2 bad usage or config
";

fn usage() -> String {
    let mut s = String::from(COMMANDS);
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

fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn parse(args: &[String]) -> Result<Config, ExitCode> {
    let exists = std::path::Path::new(config::DEFAULT_CONFIG).exists();
    config::parse_run(
        &config::with_default_config(args, exists),
        &|p| tether::files::read_trusted_text(std::path::Path::new(p), tether::files::CONFIG_MAX),
        &|k| std::env::var(k).ok(),
        &hostname,
    )
    .map_err(|e| {
        tether::logging::fatal(&e.to_string());
        ExitCode::from(2)
    })
}

fn wants_help(args: &[String]) -> bool {
    args.iter().any(|a| a == "--help" || a == "-h")
}

fn run(args: &[String]) -> ExitCode {
    tether::sys::limit_malloc_arenas();
    let cfg = match parse(args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    tether::logging::init("info");
    // The kubeconfig and its files are checked by `daemon::run` before it connects to
    // anything; the manifests directory here (a directory others can change: exit 2).
    if let config::Input::Manifests(dir) = &cfg.source {
        if let Err(e) = tether::k8s::manifests::check_dir(dir) {
            log::error!("config: {e}");
            return ExitCode::from(2);
        }
    }
    let stop = match tether::sys::termination_signals() {
        Ok(rx) => rx,
        Err(e) => {
            log::error!("cannot install signal handlers: {e}");
            return ExitCode::from(1);
        }
    };
    let (stop_tx, stop_rx) = crossbeam_channel::bounded(1);
    let _ = std::thread::Builder::new()
        .name("stop".into())
        .spawn(move || {
            if let Ok(sig) = stop.recv() {
                log::info!("signal {sig}: stopping");
                let _ = stop_tx.send(());
            }
        });
    match tether::daemon::run(cfg, stop_rx, || log::info!("ready")) {
        Ok(()) | Err(tether::daemon::DaemonError::Stopped) => ExitCode::SUCCESS,
        Err(e @ tether::daemon::DaemonError::Config(_)) => {
            log::error!("{e}");
            ExitCode::from(2)
        }
        Err(e) => {
            log::error!("{e}");
            ExitCode::from(1)
        }
    }
}

fn check(args: &[String]) -> ExitCode {
    let cfg = match parse(args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    // The report goes to stdout; log lines (warnings, or RUST_LOG's) to stderr.
    tether::logging::init("warn");
    let mut findings = Vec::new();
    for w in &cfg.warnings {
        findings.push(config::check::Finding {
            level: config::check::Level::Warn,
            what: "config".into(),
            detail: w.clone(),
            fix: Some("remove or correct the key".into()),
        });
    }
    for n in &cfg.notes {
        findings.push(config::check::Finding {
            level: config::check::Level::Ok,
            what: "config".into(),
            detail: n.clone(),
            fix: None,
        });
    }
    findings.extend(config::check::run(&cfg));
    let (text, code) = config::check::report(&findings);
    print!("{text}");
    ExitCode::from(code)
}

fn status_cmd(args: &[String]) -> ExitCode {
    let json = args.iter().any(|a| a == "--json");
    let metrics = args.iter().any(|a| a == "--metrics");
    let rest: Vec<String> = args
        .iter()
        .filter(|a| *a != "--json" && *a != "--metrics")
        .cloned()
        .collect();
    let cfg = match parse(&rest) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let path = &cfg.state_socket;
    let out = if metrics {
        status::ask(path, status::Request::Metrics)
    } else if json {
        status::ask(path, status::Request::Status)
    } else {
        status::fetch(path).map(|s| status::render::human(&s))
    };
    match out {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tether status: {e}");
            ExitCode::from(1)
        }
    }
}

fn flows_cmd(args: &[String]) -> ExitCode {
    let (opts, rest) = match tether::flows::parse_flags(args) {
        Ok(v) => v,
        Err(e) => {
            eprint!("tether flows: {e}\n\n{}", tether::flows::USAGE);
            return ExitCode::from(2);
        }
    };
    let cfg = match parse(&rest) {
        Ok(c) => c,
        Err(code) => return code,
    };
    tether::logging::init("warn");
    let (text, code) = tether::flows::run(&cfg, &opts);
    if code == 0 {
        print!("{text}");
    } else {
        eprint!("{text}");
    }
    ExitCode::from(code)
}

fn plan_cmd(args: &[String]) -> ExitCode {
    let (json, rest) = tether::plan::parse_flags(args);
    let cfg = match parse(&rest) {
        Ok(c) => c,
        Err(code) => return code,
    };
    tether::logging::init("warn");
    let (text, code) = tether::plan::run(&cfg, json);
    if code == 1 {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    ExitCode::from(code)
}

fn reset_cmd(args: &[String]) -> ExitCode {
    let (opts, rest) = tether::reset::parse_flags(args);
    let cfg = match parse(&rest) {
        Ok(c) => c,
        Err(code) => return code,
    };
    // What it does goes to stdout, one line per change; the log (warnings) to stderr.
    tether::logging::init("warn");
    let (lines, result) = tether::reset::run(&cfg, &opts);
    for l in &lines {
        println!("{l}");
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tether reset: {e}");
            ExitCode::from(1)
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rest = args.get(1..).unwrap_or_default();
    match args.first().map(String::as_str) {
        Some("plan") if wants_help(rest) => {
            print!("{}", tether::plan::USAGE);
            ExitCode::SUCCESS
        }
        Some("reset") if wants_help(rest) => {
            print!("{}", tether::reset::USAGE);
            ExitCode::SUCCESS
        }
        Some("flows") if wants_help(rest) => {
            print!("{}", tether::flows::USAGE);
            ExitCode::SUCCESS
        }
        Some("run" | "check" | "status") if wants_help(rest) => {
            print!("{}", usage());
            ExitCode::SUCCESS
        }
        Some("run") => run(rest),
        Some("check") => check(rest),
        Some("status") => status_cmd(rest),
        Some("flows") => flows_cmd(rest),
        Some("reset") => reset_cmd(rest),
        Some("plan") => plan_cmd(rest),
        Some("version" | "--version") => {
            println!("tether {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Some("--help" | "-h" | "help") => {
            print!("{}", usage());
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprint!("tether: unknown command {other:?}\n\n{}", usage());
            ExitCode::from(2)
        }
        None => {
            eprint!("{}", usage());
            ExitCode::from(2)
        }
    }
}
