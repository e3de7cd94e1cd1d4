//! The one place tether calls the C library directly, for what std has no API for:
//! * turning SIGTERM/SIGINT into a message: the daemon must stop cleanly (exit 0, flows
//!   left in place) when systemd stops it. The handler only writes one byte to a pipe (the
//!   self-pipe trick; `write(2)` is async-signal-safe); a thread reads the pipe and tells
//!   the daemon;
//! * the file-creation mask around `bind(2)` of the state socket, so the socket is created
//!   with its final mode (a `chmod` after `bind` follows a symlink swapped in between);
//! * the effective user id, to check who owns the state socket's directory;
//! * inotify on a directory and poll(2) on a few descriptors, so that the manifests source
//!   sleeps until something in its directory changes instead of waking to look;
//! * TCP keepalive on a socket (std cannot set `SO_KEEPALIVE`), so that a long-lived watch
//!   that may be quiet for hours notices a dead peer.

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
    fn inotify_init1(flags: i32) -> i32;
    fn inotify_add_watch(fd: i32, pathname: *const std::ffi::c_char, mask: u32) -> i32;
    fn poll(fds: *mut PollFd, nfds: u64, timeout: i32) -> i32;
    fn setsockopt(fd: i32, level: i32, name: i32, value: *const i32, len: u32) -> i32;
}

/// `struct pollfd`.
#[repr(C)]
struct PollFd {
    fd: i32,
    events: i16,
    revents: i16,
}

const POLLIN: i16 = 0x1;
const POLLERR: i16 = 0x8;
const POLLHUP: i16 = 0x10;
const IN_NONBLOCK: i32 = 0o4000;
const IN_CLOEXEC: i32 = 0o2_000_000;

/// inotify(7) event bits.
pub mod inotify {
    pub const MODIFY: u32 = 0x2;
    pub const ATTRIB: u32 = 0x4;
    pub const CLOSE_WRITE: u32 = 0x8;
    pub const MOVED_FROM: u32 = 0x40;
    pub const MOVED_TO: u32 = 0x80;
    pub const CREATE: u32 = 0x100;
    pub const DELETE: u32 = 0x200;
    pub const DELETE_SELF: u32 = 0x400;
    pub const MOVE_SELF: u32 = 0x800;
    pub const UNMOUNT: u32 = 0x2000;
    pub const Q_OVERFLOW: u32 = 0x4000;
    pub const IGNORED: u32 = 0x8000;
    pub const ONLYDIR: u32 = 0x0100_0000;
}

/// A non-blocking inotify descriptor watching `dir` (a directory) for `mask`.
pub fn inotify_dir(dir: &std::path::Path, mask: u32) -> std::io::Result<std::fs::File> {
    use std::os::fd::FromRawFd;
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: inotify_init1 takes flags only and returns a new descriptor or -1.
    let fd = unsafe { inotify_init1(IN_NONBLOCK | IN_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor nothing else owns; the File closes it.
    let file = unsafe { std::fs::File::from_raw_fd(fd) };
    // SAFETY: `path` is a NUL-terminated string that outlives the call.
    let wd = unsafe { inotify_add_watch(fd, path.as_ptr(), mask | inotify::ONLYDIR) };
    if wd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(file)
}

/// Wait (up to `timeout`; `None`: forever) until one of `fds` is readable or hung up;
/// which ones are. An interrupted wait returns no descriptor ready.
pub fn wait_readable(
    fds: &[std::os::fd::BorrowedFd<'_>],
    timeout: Option<std::time::Duration>,
) -> std::io::Result<Vec<bool>> {
    use std::os::fd::AsRawFd as _;
    let mut p: Vec<PollFd> = fds
        .iter()
        .map(|f| PollFd {
            fd: f.as_raw_fd(),
            events: POLLIN,
            revents: 0,
        })
        .collect();
    let ms = timeout.map_or(-1, |t| i32::try_from(t.as_millis()).unwrap_or(i32::MAX));
    // SAFETY: `p` is a valid array of `p.len()` pollfd structs for the duration of the call.
    let n = unsafe { poll(p.as_mut_ptr(), p.len() as u64, ms) };
    if n < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::Interrupted {
            return Ok(vec![false; p.len()]);
        }
        return Err(e);
    }
    Ok(p.iter()
        .map(|f| f.revents & (POLLIN | POLLHUP | POLLERR) != 0)
        .collect())
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

#[cfg(all(target_os = "linux", target_env = "gnu"))]
unsafe extern "C" {
    fn mallopt(param: i32, value: i32) -> i32;
    fn malloc_trim(pad: usize) -> i32;
}

/// Give the heap's free pages back to the kernel. glibc keeps what a burst freed (a
/// 10,000-member AddressGroup's 1 MB event line decoded, its flows compiled and encoded:
/// ~15 MB that RSS kept after the burst was over) for the next burst; a daemon on a small
/// VM wants its resident size to follow what it holds. Called after large changes only (it
/// walks every arena: a few milliseconds). A no-op on the static musl build that ships,
/// whose heap returns large frees itself.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only releases free pages of malloc's own arenas; it takes
        // their locks itself and may be called from any thread at any time.
        unsafe {
            malloc_trim(0);
        }
    }
}

/// glibc's malloc gives each thread that allocates its own arena (up to 8 per core), and
/// memory freed in one arena is not reused by another: with a dozen threads, a cold start
/// at 5,000 ports had twice as much RSS as live heap. Two arenas keep the workers from
/// contending on one lock and the RSS near the heap. The static musl build that ships has
/// one heap already; this is a no-op there.
pub fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // M_ARENA_MAX from <malloc.h>.
        const M_ARENA_MAX: i32 = -8;
        // SAFETY: mallopt only sets a malloc tunable; called before any thread is started.
        let ok = unsafe { mallopt(M_ARENA_MAX, 2) };
        if ok != 1 {
            log::debug!("mallopt(M_ARENA_MAX, 2) refused");
        }
    }
}

/// Turn on TCP keepalive on `sock`: the first probe after `idle` without traffic, then one
/// every `interval`, and the connection fails after `count` unanswered probes (Linux
/// `SO_KEEPALIVE`, `TCP_KEEPIDLE`, `TCP_KEEPINTVL`, `TCP_KEEPCNT`; whole seconds, at least 1).
pub fn set_tcp_keepalive(
    sock: &std::net::TcpStream,
    idle: std::time::Duration,
    interval: std::time::Duration,
    count: u32,
) -> std::io::Result<()> {
    const SOL_SOCKET: i32 = 1;
    const SO_KEEPALIVE: i32 = 9;
    const IPPROTO_TCP: i32 = 6;
    const TCP_KEEPIDLE: i32 = 4;
    const TCP_KEEPINTVL: i32 = 5;
    const TCP_KEEPCNT: i32 = 6;
    let secs = |d: std::time::Duration| i32::try_from(d.as_secs().max(1)).unwrap_or(i32::MAX);
    let count = i32::try_from(count.max(1)).unwrap_or(i32::MAX);
    let fd = sock.as_raw_fd();
    for (level, name, value) in [
        (SOL_SOCKET, SO_KEEPALIVE, 1),
        (IPPROTO_TCP, TCP_KEEPIDLE, secs(idle)),
        (IPPROTO_TCP, TCP_KEEPINTVL, secs(interval)),
        (IPPROTO_TCP, TCP_KEEPCNT, count),
    ] {
        // SAFETY: `fd` is an open socket borrowed for the call; `value` is an i32 that
        // outlives it and its size is passed.
        let r = unsafe { setsockopt(fd, level, name, &value, 4) };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
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
