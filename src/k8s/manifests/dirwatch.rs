//! Waking the manifests thread when something in its directory changes (inotify), so an
//! idle daemon does not wake to look. A thread of its own waits (poll(2)) on the inotify
//! descriptor and on a pipe whose write end [`DirWatch`] holds: dropping it hangs the
//! pipe up and the thread ends. When the watch is gone (the directory deleted, moved or
//! unmounted, the event queue overflowed), [`DirWatch::lost`] says so and the manifests
//! thread starts a new one, polling meanwhile.

use std::io::Read;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, bounded};

use crate::sys::{self, inotify};

/// What makes a rescan worth it: a file written, created, deleted, renamed in or out, its
/// metadata changed (a symlink re-pointed, a mode changed); and the directory itself gone.
const MASK: u32 = inotify::MODIFY
    | inotify::ATTRIB
    | inotify::CLOSE_WRITE
    | inotify::MOVED_FROM
    | inotify::MOVED_TO
    | inotify::CREATE
    | inotify::DELETE
    | inotify::DELETE_SELF
    | inotify::MOVE_SELF;

/// Events after which the watch no longer covers the directory.
const LOST: u32 = inotify::DELETE_SELF
    | inotify::MOVE_SELF
    | inotify::UNMOUNT
    | inotify::IGNORED
    | inotify::Q_OVERFLOW;

pub struct DirWatch {
    changed: Receiver<()>,
    lost: Arc<AtomicBool>,
    hangup: Option<std::io::PipeWriter>,
    thread: Option<JoinHandle<()>>,
}

impl DirWatch {
    /// Watch `dir`; an error when inotify cannot (the directory missing, no inotify, the
    /// per-user watch limit reached).
    pub fn start(dir: &Path) -> std::io::Result<DirWatch> {
        let ino = sys::inotify_dir(dir, MASK)?;
        let (stop_r, stop_w) = std::io::pipe()?;
        let (tx, rx) = bounded(1);
        let lost = Arc::new(AtomicBool::new(false));
        let l = lost.clone();
        let thread = std::thread::Builder::new()
            .name("manifests-inotify".into())
            .spawn(move || wait_loop(ino, stop_r, &tx, &l))?;
        Ok(DirWatch {
            changed: rx,
            lost,
            hangup: Some(stop_w),
            thread: Some(thread),
        })
    }

    /// A value each time something changed (several changes may come as one).
    pub fn changed(&self) -> &Receiver<()> {
        &self.changed
    }

    /// The watch no longer covers the directory: start a new one.
    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }
}

impl Drop for DirWatch {
    fn drop(&mut self) {
        self.hangup = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn wait_loop(
    mut ino: std::fs::File,
    stop: std::io::PipeReader,
    changed: &Sender<()>,
    lost: &AtomicBool,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let ready = match sys::wait_readable(&[ino.as_fd(), stop.as_fd()], None) {
            Ok(r) => r,
            Err(e) => {
                log::warn!("manifests: waiting on inotify failed ({e}); polling instead");
                lost.store(true, Ordering::SeqCst);
                let _ = changed.try_send(());
                return;
            }
        };
        if ready.get(1).copied().unwrap_or(true) {
            return;
        }
        if !ready.first().copied().unwrap_or(false) {
            continue;
        }
        let mut gone = false;
        loop {
            match ino.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => gone |= events_lose_watch(buf.get(..n).unwrap_or_default()),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => {
                    gone = true;
                    break;
                }
            }
        }
        if gone {
            lost.store(true, Ordering::SeqCst);
        }
        // Full already: a rescan is pending, and it will see this change too.
        let _ = changed.try_send(());
        if gone {
            return;
        }
    }
}

/// Whether a buffer of `struct inotify_event`s (wd, mask, cookie, len, name[len]) holds
/// one after which the watch no longer covers the directory.
fn events_lose_watch(mut b: &[u8]) -> bool {
    let word = |b: &[u8], at: usize| {
        b.get(at..at + 4)
            .map_or(0, |w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]]))
    };
    while b.len() >= 16 {
        if word(b, 4) & LOST != 0 {
            return true;
        }
        let next = 16 + word(b, 12) as usize;
        b = b.get(next..).unwrap_or_default();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(mask: u32, name: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend(1i32.to_ne_bytes());
        v.extend(mask.to_ne_bytes());
        v.extend(0u32.to_ne_bytes());
        v.extend(u32::try_from(name.len()).unwrap().to_ne_bytes());
        v.extend(name);
        v
    }

    #[test]
    fn events_that_end_the_watch() {
        let mut b = event(inotify::CLOSE_WRITE, b"a.yaml\0\0");
        assert!(!events_lose_watch(&b));
        b.extend(event(inotify::IGNORED, b""));
        assert!(events_lose_watch(&b));
        assert!(events_lose_watch(&event(inotify::DELETE_SELF, b"")));
        assert!(!events_lose_watch(&event(inotify::MOVED_TO, b"b.yaml\0\0")));
        // A truncated buffer is not read past its end.
        assert!(!events_lose_watch(&b[..10]));
    }

    #[test]
    fn a_change_in_the_directory_wakes_the_waiter_and_a_deleted_directory_ends_it() {
        let dir = std::env::temp_dir().join(format!("tether-dirwatch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let w = DirWatch::start(&dir).unwrap();
        assert!(w.changed().try_recv().is_err(), "nothing yet");
        std::fs::write(dir.join("a.yaml"), "x").unwrap();
        w.changed()
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("a change wakes it");
        assert!(!w.lost());
        std::fs::remove_dir_all(&dir).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !w.lost() && std::time::Instant::now() < deadline {
            let _ = w
                .changed()
                .recv_timeout(std::time::Duration::from_millis(100));
        }
        assert!(w.lost(), "a deleted directory ends the watch");
        assert!(DirWatch::start(&dir).is_err(), "no directory, no watch");
        drop(w);
    }
}
