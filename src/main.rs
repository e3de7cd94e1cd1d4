//! The `tether` binary: parse arguments, set up logging, hand over to the library.
//! Exit codes: 0 clean stop, 1 runtime failure, 2 bad usage or configuration.

use std::io::Write;
use std::process::ExitCode;

use tether::config::{self, SETTINGS};

fn usage() -> String {
    let mut s = String::from(
        "usage: tether <command> [flags]\n\ncommands:\n  run       run the daemon\n  version   print the version\n\nrun flags (each also a config-file key):\n",
    );
    for (flag, key, help) in SETTINGS {
        let key = if key.is_empty() {
            String::new()
        } else {
            format!(" [{key}]")
        };
        s.push_str(&format!("  {flag} {help}{key}\n"));
    }
    s
}

/// Log lines: under systemd (`JOURNAL_STREAM` set) `<N>` syslog priorities and no
/// timestamps (journald adds its own); otherwise `level target: message`.
fn init_logging() {
    let journald = std::env::var_os("JOURNAL_STREAM").is_some();
    let mut b = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"));
    b.format(move |f, r| {
        if journald {
            let prio = match r.level() {
                log::Level::Error => 3,
                log::Level::Warn => 4,
                log::Level::Info => 6,
                log::Level::Debug | log::Level::Trace => 7,
            };
            writeln!(f, "<{prio}>{}", r.args())
        } else {
            writeln!(f, "{:5} {}: {}", r.level(), r.target(), r.args())
        }
    });
    b.init();
}

fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn run(args: &[String]) -> ExitCode {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{}", usage());
        return ExitCode::SUCCESS;
    }
    let cfg = match config::parse_run(
        args,
        &|p| std::fs::read_to_string(p).map_err(|e| e.to_string()),
        &|k| std::env::var(k).ok(),
        &hostname,
    ) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tether: {e}");
            return ExitCode::from(2);
        }
    };
    init_logging();
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

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("run") => run(&args[1..]),
        Some("version" | "--version") => {
            println!("tether {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Some("--help" | "-h" | "help") => {
            print!("{}", usage());
            ExitCode::SUCCESS
        }
        _ => {
            eprint!("{}", usage());
            ExitCode::from(2)
        }
    }
}
