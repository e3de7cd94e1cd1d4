//! Log setup for the binary: `RUST_LOG` filters (default `info` for `run`, `warn` for
//! `check`), journald-friendly lines
//! under systemd, and a cap on the libraries whose trace output holds secrets. Owns only
//! the logger; what is logged is each module's business.
//!
//! Why the cap: at `trace`, ureq-proto hex-dumps every request head it writes, bearer
//! token included, and rustls traces its key schedule. So `RUST_LOG=trace` (what an
//! operator reaches for when something is wrong) would put the API token in the journal.
//! Records of [`CAPPED`] targets are dropped above `debug` whatever `RUST_LOG` says; a
//! lower level that `RUST_LOG` asks for still applies.

use std::io::Write;

use log::{Level, Log, Metadata, Record};

/// Crates never logged at `trace`.
pub const CAPPED: &[&str] = &["ureq", "ureq_proto", "rustls"];

/// True when `target` is one of [`CAPPED`] or a module inside one.
pub fn is_capped(target: &str) -> bool {
    CAPPED.iter().any(|c| {
        target
            .strip_prefix(c)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
    })
}

/// Drops trace records of [`CAPPED`] targets, passes everything else to `inner`.
pub struct Capped<L> {
    pub inner: L,
}

impl<L: Log> Log for Capped<L> {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        !(m.level() > Level::Debug && is_capped(m.target())) && self.inner.enabled(m)
    }

    fn log(&self, r: &Record<'_>) {
        if self.enabled(r.metadata()) {
            self.inner.log(r);
        }
    }

    fn flush(&self) {
        self.inner.flush();
    }
}

/// Print a message that ends the process (a bad configuration, before the logger exists)
/// to stderr: under systemd with priority 3 (`<3>`), so `journalctl -u tether -p err`
/// shows why the start failed; journald would file an unprefixed line at 6 (info).
pub fn fatal(msg: &str) {
    if std::env::var_os("JOURNAL_STREAM").is_some() {
        eprintln!("<3>tether: {msg}");
    } else {
        eprintln!("tether: {msg}");
    }
}

/// Install the process's logger, `default` being the filter when `RUST_LOG` is unset.
/// Under systemd (`JOURNAL_STREAM` set) lines carry `<N>`
/// syslog priorities and no timestamps (journald adds its own); otherwise
/// `level target: message`.
pub fn init(default: &str) {
    let journald = std::env::var_os("JOURNAL_STREAM").is_some();
    let mut b =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default));
    b.format(move |f, r| {
        if journald {
            let prio = match r.level() {
                Level::Error => 3,
                Level::Warn => 4,
                Level::Info => 6,
                Level::Debug | Level::Trace => 7,
            };
            writeln!(f, "<{prio}>{}", r.args())
        } else {
            writeln!(f, "{:5} {}: {}", r.level(), r.target(), r.args())
        }
    });
    let inner = b.build();
    let max = inner.filter();
    if log::set_boxed_logger(Box::new(Capped { inner })).is_ok() {
        log::set_max_level(max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn capped_targets() {
        assert!(is_capped("ureq"));
        assert!(is_capped("ureq_proto::util"));
        assert!(is_capped("rustls::client::hs"));
        assert!(!is_capped("ureqx"));
        assert!(!is_capped("tether::k8s::http"));
    }

    struct Collect(Mutex<Vec<String>>);

    impl Log for Collect {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn log(&self, r: &Record<'_>) {
            self.0
                .lock()
                .unwrap()
                .push(format!("{} {}", r.level(), r.target()));
        }
        fn flush(&self) {}
    }

    #[test]
    fn trace_of_capped_targets_is_dropped() {
        let l = Capped {
            inner: Collect(Mutex::new(Vec::new())),
        };
        for (level, target) in [
            (Level::Trace, "ureq_proto::util"),
            (Level::Debug, "ureq_proto::client"),
            (Level::Trace, "rustls::conn"),
            (Level::Trace, "tether::daemon"),
        ] {
            l.log(
                &Record::builder()
                    .level(level)
                    .target(target)
                    .args(format_args!("x"))
                    .build(),
            );
        }
        assert_eq!(
            *l.inner.0.lock().unwrap(),
            ["DEBUG ureq_proto::client", "TRACE tether::daemon"]
        );
    }
}
