//! Reading files that someone else writes (manifests, the config, kubeconfigs, tokens and
//! certificates): regular files only, size-capped, and never blocking. Owns only that;
//! what a file means is its reader's business.
//!
//! Why each rule:
//! * a FIFO in a manifests directory blocks `open(2)` for reading until a writer appears,
//!   and a read of `/dev/zero` (a symlink dropped next to a good file) never ends; so the
//!   target is checked with `stat` first (a device is never opened: opening some, such as
//!   `/dev/watchdog`, has effects), then opened with `O_NONBLOCK` and checked again with
//!   `fstat` on the descriptor, so a FIFO swapped in between cannot block either;
//! * a size cap keeps one huge file from taking the daemon's memory: the size is checked
//!   before reading and the read itself stops one byte past the cap (the file may grow);
//! * a symlink is followed only when its target is a regular file (any other target is
//!   "not a regular file").

use std::fmt;
use std::fs::{File, Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// `O_NONBLOCK` and `O_NOCTTY` (asm-generic/fcntl.h; the same on x86_64 and aarch64).
const O_NONBLOCK: i32 = 0o4000;
const O_NOCTTY: i32 = 0o400;

/// 1 MiB: tokens, CA bundles, client certificates and keys.
pub const SECRET_MAX: u64 = 1 << 20;
/// 4 MiB: the config file and kubeconfigs.
pub const CONFIG_MAX: u64 = 4 << 20;
/// 64 MiB: one manifests file.
pub const MANIFEST_MAX: u64 = 64 << 20;

/// Why a file was not read.
#[derive(Debug)]
pub enum ReadError {
    /// It exists but is a directory, FIFO, socket, device… (`kind` says which).
    NotRegular {
        kind: &'static str,
    },
    /// Bigger than the cap.
    TooBig {
        size: u64,
        max: u64,
    },
    Io(std::io::Error),
}

impl ReadError {
    /// The path does not exist (or a symlink points nowhere).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::Io(e) if e.kind() == std::io::ErrorKind::NotFound)
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::NotRegular { kind } => {
                write!(f, "not a regular file ({kind}); skipped")
            }
            ReadError::TooBig { size, max } => {
                write!(
                    f,
                    "{size} bytes, more than the limit of {max} bytes; skipped"
                )
            }
            ReadError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ReadError {}

/// What kind of thing a non-regular file is, for messages.
pub fn kind_of(m: &Metadata) -> &'static str {
    let t = m.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_symlink() {
        "a symlink"
    } else if t.is_file() {
        "a regular file"
    } else {
        "an unknown file type"
    }
}

/// `stat` (following symlinks) and require a regular file no bigger than `max`.
pub fn check_regular(path: &Path, max: u64) -> Result<Metadata, ReadError> {
    let m = std::fs::metadata(path).map_err(ReadError::Io)?;
    regular(&m, max)?;
    Ok(m)
}

fn regular(m: &Metadata, max: u64) -> Result<(), ReadError> {
    if !m.file_type().is_file() {
        return Err(ReadError::NotRegular { kind: kind_of(m) });
    }
    if m.len() > max {
        return Err(ReadError::TooBig { size: m.len(), max });
    }
    Ok(())
}

/// Read the regular file at `path` (symlinks to regular files followed), at most `max`
/// bytes; see the module doc for what is refused and why.
pub fn read_regular(path: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
    check_regular(path, max)?;
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK | O_NOCTTY)
        .open(path)
        .map_err(ReadError::Io)?;
    read_open(f, max)
}

/// The rest of [`read_regular`] on an open file: `fstat`, then a capped read.
fn read_open(f: File, max: u64) -> Result<Vec<u8>, ReadError> {
    let m = f.metadata().map_err(ReadError::Io)?;
    regular(&m, max)?;
    let mut out = Vec::with_capacity(usize::try_from(m.len()).unwrap_or(0));
    f.take(max.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(ReadError::Io)?;
    let size = u64::try_from(out.len()).unwrap_or(u64::MAX);
    if size > max {
        return Err(ReadError::TooBig { size, max });
    }
    Ok(out)
}

/// [`read_regular`] as UTF-8 text.
pub fn read_text(path: &Path, max: u64) -> Result<String, String> {
    let bytes = read_regular(path, max).map_err(|e| e.to_string())?;
    String::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!(
            "tether-files-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn regular_files_symlinks_and_caps() {
        let d = dir();
        std::fs::write(d.join("a"), b"hello").unwrap();
        std::os::unix::fs::symlink(d.join("a"), d.join("link")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", d.join("zero")).unwrap();
        std::os::unix::fs::symlink(&d, d.join("dirlink")).unwrap();
        std::os::unix::fs::symlink(d.join("nowhere"), d.join("dangling")).unwrap();
        assert_eq!(read_regular(&d.join("a"), 5).unwrap(), b"hello");
        assert_eq!(read_regular(&d.join("link"), 5).unwrap(), b"hello");
        assert_eq!(
            read_regular(&d.join("a"), 4).unwrap_err().to_string(),
            "5 bytes, more than the limit of 4 bytes; skipped"
        );
        assert_eq!(
            read_regular(&d.join("zero"), 5).unwrap_err().to_string(),
            "not a regular file (a character device); skipped"
        );
        assert_eq!(
            read_regular(&d.join("dirlink"), 5).unwrap_err().to_string(),
            "not a regular file (a directory); skipped"
        );
        assert!(
            read_regular(&d.join("dangling"), 5)
                .unwrap_err()
                .is_not_found()
        );
        assert_eq!(read_text(&d.join("a"), 9).unwrap(), "hello");
        std::fs::write(d.join("bin"), [0xff, 0xfe]).unwrap();
        assert_eq!(read_text(&d.join("bin"), 9).unwrap_err(), "not UTF-8");
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A FIFO with no writer: reading it must return at once, not block.
    #[test]
    fn a_fifo_does_not_block() {
        let d = dir();
        let fifo = d.join("f");
        let ok = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success();
        assert!(ok);
        let e = read_regular(&fifo, 5).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file (a FIFO); skipped");
        // Past the stat check (as if it were swapped in after it): O_NONBLOCK opens at
        // once, and fstat refuses it.
        let f = OpenOptions::new()
            .read(true)
            .custom_flags(O_NONBLOCK | O_NOCTTY)
            .open(&fifo)
            .unwrap();
        assert_eq!(
            read_open(f, 5).unwrap_err().to_string(),
            "not a regular file (a FIFO); skipped"
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
