//! systemd's readiness protocol (sd_notify(3)), written by hand: one `AF_UNIX`
//! `SOCK_DGRAM` datagram of newline-separated `KEY=VALUE` lines to `$NOTIFY_SOCKET`, which
//! is a path (`/run/systemd/notify`) or, with a leading `@`, an abstract socket (containers,
//! nspawn). The `sd-notify` crate has no abstract-socket support and `libsystemd` pulls 30
//! crates, so this is 60 lines of std.
//!
//! Owns: the message format, the address parsing, the watchdog interval. Does not decide
//! when to send what (the daemon and `main` do).

use std::ffi::OsStr;
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// Where `$NOTIFY_SOCKET` points.
pub fn address(notify_socket: &OsStr) -> io::Result<SocketAddr> {
    let b = notify_socket.as_bytes();
    match b.first() {
        Some(b'@') => SocketAddr::from_abstract_name(&b[1..]),
        Some(b'/') => SocketAddr::from_pathname(notify_socket),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("NOTIFY_SOCKET={notify_socket:?}: neither a path nor @abstract"),
        )),
    }
}

/// The datagram for `states` (`[("READY", "1"), ("STATUS", "…")]`). A newline inside a
/// value would start a new key, so it becomes a space.
pub fn message(states: &[(&str, &str)]) -> String {
    let mut s = String::new();
    for (k, v) in states {
        s.push_str(k);
        s.push('=');
        s.push_str(&v.replace('\n', " "));
        s.push('\n');
    }
    s
}

/// Send `states` to `$NOTIFY_SOCKET`. `Ok(false)` when not run by systemd (unset).
pub fn notify(states: &[(&str, &str)]) -> io::Result<bool> {
    let Some(p) = std::env::var_os("NOTIFY_SOCKET") else {
        return Ok(false);
    };
    let addr = address(&p)?;
    UnixDatagram::unbound()?.send_to_addr(message(states).as_bytes(), &addr)?;
    Ok(true)
}

/// [`notify`], logging instead of failing: a lost notification must not stop the daemon.
pub fn notify_or_log(states: &[(&str, &str)]) {
    if let Err(e) = notify(states) {
        log::warn!("sd_notify {states:?} failed: {e}");
    }
}

/// How often to send `WATCHDOG=1`: half of `WATCHDOG_USEC` (sd_watchdog_enabled(3)), and
/// only when `WATCHDOG_PID` is unset or is this process.
pub fn watchdog_interval(usec: Option<&str>, pid: Option<&str>, my_pid: u32) -> Option<Duration> {
    if let Some(p) = pid {
        if p.trim().parse::<u32>().ok() != Some(my_pid) {
            return None;
        }
    }
    let us: u64 = usec?.trim().parse().ok().filter(|&u| u > 0)?;
    Some(Duration::from_micros(us / 2))
}

/// [`watchdog_interval`] from this process's environment.
pub fn watchdog_from_env() -> Option<Duration> {
    watchdog_interval(
        std::env::var("WATCHDOG_USEC").ok().as_deref(),
        std::env::var("WATCHDOG_PID").ok().as_deref(),
        std::process::id(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_format() {
        assert_eq!(
            message(&[("READY", "1"), ("STATUS", "2 TrafficControls\nok")]),
            "READY=1\nSTATUS=2 TrafficControls ok\n"
        );
    }

    #[test]
    fn addresses() {
        let a = address(OsStr::new("@tether-test")).unwrap();
        assert_eq!(a.as_abstract_name(), Some(&b"tether-test"[..]));
        let p = address(OsStr::new("/run/systemd/notify")).unwrap();
        assert_eq!(
            p.as_pathname(),
            Some(std::path::Path::new("/run/systemd/notify"))
        );
        assert!(address(OsStr::new("vsock:2:1234")).is_err());
        assert!(address(OsStr::new("")).is_err());
    }

    #[test]
    fn watchdog() {
        assert_eq!(
            watchdog_interval(Some("20000000"), None, 7),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            watchdog_interval(Some("20000000"), Some("7"), 7),
            Some(Duration::from_secs(10))
        );
        assert_eq!(watchdog_interval(Some("20000000"), Some("8"), 7), None);
        assert_eq!(watchdog_interval(None, None, 7), None);
        assert_eq!(watchdog_interval(Some("0"), None, 7), None);
        assert_eq!(watchdog_interval(Some("x"), None, 7), None);
    }

    #[test]
    fn sends_to_an_abstract_socket() {
        let name = format!("tether-notify-test-{}", std::process::id());
        let rx = UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(&name).unwrap()).unwrap();
        let addr = address(OsStr::new(&format!("@{name}"))).unwrap();
        UnixDatagram::unbound()
            .unwrap()
            .send_to_addr(message(&[("READY", "1")]).as_bytes(), &addr)
            .unwrap();
        let mut buf = [0u8; 64];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\n");
    }
}
