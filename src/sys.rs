//! The one place tether calls the C library directly, for what std has no API for:
//! * turning SIGTERM/SIGINT into a message: the daemon must stop cleanly (exit 0, flows
//!   left in place) when systemd stops it. The handler only writes one byte to a pipe (the
//!   self-pipe trick; `write(2)` is async-signal-safe); a thread reads the pipe and tells
//!   the daemon;
//! * the file-creation mask around `bind(2)` of the state socket, so the socket is created
//!   with its final mode (a `chmod` after `bind` follows a symlink swapped in between);
//! * the effective user id, to check who owns the state socket's directory.

// The only unsafe code in the crate (Cargo.toml denies it everywhere else).
#![allow(unsafe_code)]

use std::io::Read;
use std::os::fd::{AsRawFd, IntoRawFd};
use std::sync::atomic::{AtomicI32, Ordering};

use crossbeam_channel::{Receiver, bounded};

const SIGINT: i32 = 2;
const SIGTERM: i32 = 15;

static PIPE_WRITE_FD: AtomicI32 = AtomicI32::new(-1);

unsafe extern "C" {
    fn signal(signum: i32, handler: extern "C" fn(i32)) -> usize;
    fn write(fd: i32, buf: *const u8, count: usize) -> isize;
    fn umask(mask: u32) -> u32;
    fn geteuid() -> u32;
}

/// Run `f` with the process's file-creation mask set to `mask`, then put the old one
/// back. The mask is process-wide: a file another thread creates meanwhile gets it too,
/// so pass only masks stricter than the usual one.
pub fn with_umask<T>(mask: u32, f: impl FnOnce() -> T) -> T {
    // SAFETY: umask(2) cannot fail and touches no memory; it only swaps an integer.
    let old = unsafe { umask(mask) };
    let r = f();
    // SAFETY: as above.
    unsafe {
        umask(old);
    }
    r
}

/// The effective user id.
pub fn euid() -> u32 {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    unsafe { geteuid() }
}

extern "C" fn on_signal(sig: i32) {
    let fd = PIPE_WRITE_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        // Truncation is fine: the signal numbers we catch fit a byte.
        let b = [u8::try_from(sig).unwrap_or(0)];
        // SAFETY: `fd` is the write end of a pipe that stays open for the process's life
        // (its owner was leaked with into_raw_fd); `b` is a valid 1-byte buffer.
        unsafe {
            write(fd, b.as_ptr(), 1);
        }
    }
}

/// Install handlers for SIGTERM and SIGINT; the receiver gets the signal number.
pub fn termination_signals() -> std::io::Result<Receiver<i32>> {
    let (mut reader, writer) = std::io::pipe()?;
    PIPE_WRITE_FD.store(writer.into_raw_fd(), Ordering::SeqCst);
    let (tx, rx) = bounded(4);
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let _fd = reader.as_raw_fd();
            let mut b = [0u8; 1];
            while let Ok(1) = reader.read(&mut b) {
                if tx.send(i32::from(b[0])).is_err() {
                    return;
                }
            }
        })?;
    for sig in [SIGTERM, SIGINT] {
        // SAFETY: `on_signal` is an `extern "C" fn(i32)` that only performs an
        // async-signal-safe write(2); glibc/musl `signal` installs it with SA_RESTART.
        unsafe {
            signal(sig, on_signal);
        }
    }
    Ok(rx)
}
