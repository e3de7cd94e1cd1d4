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
//!   "not a regular file");
//! * what configures tether (the config file, kubeconfigs, their tokens, keys and
//!   certificates, the manifests directory and its files) is read only when nobody but root
//!   or tether itself can change it: owned by root or by tether's effective uid, and not
//!   writable by group or others (the state socket's rule, [`untrusted`]). Anyone else who
//!   could write it could point tether at their own API server, or add, change and delete
//!   the objects it programs. The file checked is the one read: a symlink's target, checked
//!   with `stat` and again with `fstat` on the descriptor that is read, so a file swapped in
//!   between is checked too.
//!
//! The directory holding such a file is not checked (the manifests directory is, as the
//! file that lists what exists: `crate::k8s::manifests`). Someone who may write the
//! directory can only rename, delete or replace the file; a replacement must pass the rule
//! itself, so it can only be (a symlink to) another file that root or tether's user owns
//! and keeps unwritable, and a deleted config or kubeconfig stops tether at start.
//! Requiring the directories too would refuse Kubernetes' secret and projected volumes,
//! whose directory is a world-writable sticky tmpfs (mode 1777), where the service-account
//! token lives.

use std::fmt;
use std::fs::{File, Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

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
    /// Someone other than root or tether could change it ([`untrusted`]).
    Untrusted {
        problem: Untrusted,
        /// The path as given.
        path: PathBuf,
        /// Where `path` leads, when it is a symlink: the file that failed the rule.
        target: Option<PathBuf>,
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
            ReadError::Untrusted {
                problem,
                path,
                target,
            } => f.write_str(&problem.message(path, target.as_deref())),
            ReadError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ReadError {}

/// Who, besides root and tether, could change a file or directory: [`untrusted`]'s finding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Untrusted {
    /// The owner, when it is neither root nor tether's effective uid.
    pub owner: Option<u32>,
    /// The permission bits (`mode & 0o7777`), when group or others may write.
    pub writable: Option<u32>,
    /// tether's effective uid (named in the message when it is not root).
    pub euid: u32,
}

/// The state socket's rule (`crate::status::socket_path_problem`) for what configures
/// tether: owned by root or by `euid`, and not writable by group or others. `None` when
/// `uid` and `mode` (as `stat` gives them) pass.
pub fn untrusted(uid: u32, mode: u32, euid: u32) -> Option<Untrusted> {
    let owner = (uid != 0 && uid != euid).then_some(uid);
    let writable = (mode & 0o022 != 0).then_some(mode & 0o7777);
    (owner.is_some() || writable.is_some()).then_some(Untrusted {
        owner,
        writable,
        euid,
    })
}

impl Untrusted {
    /// What is wrong with `path` and the command that fixes it; `target` is the file a
    /// symlink at `path` leads to (the one that failed). Callers put the path's name (and
    /// what it is to them) in front, as for every [`ReadError`].
    pub fn message(&self, path: &Path, target: Option<&Path>) -> String {
        let owner = self.owner.map(|uid| {
            if self.euid == 0 {
                format!("owned by uid {uid}, not by root")
            } else {
                format!(
                    "owned by uid {uid}, not by root or uid {} (tether's)",
                    self.euid
                )
            }
        });
        let writable = self
            .writable
            .map(|mode| format!("writable by group or others (mode {mode:o})"));
        let what = match (owner, writable) {
            (Some(o), Some(w)) => format!("{o}, and {w}"),
            (Some(o), None) => o,
            (None, Some(w)) => w,
            (None, None) => "trusted".to_string(),
        };
        let subject = match target {
            Some(t) => format!("symlink to {}, which is ", t.display()),
            None => String::new(),
        };
        let p = target.unwrap_or(path).display();
        let fix = match (self.owner, self.writable) {
            (Some(_), Some(_)) => format!("chown root {p} && chmod go-w {p}"),
            (Some(_), None) => format!("chown root {p}"),
            _ => format!("chmod go-w {p}"),
        };
        format!("{subject}{what}: refusing to read it. fix: {fix}")
    }
}

/// [`untrusted`] on `m`, the metadata of `path` (symlinks followed), with tether's euid.
fn trusted(path: &Path, m: &Metadata) -> Result<(), ReadError> {
    let Some(problem) = untrusted(m.uid(), m.mode(), crate::sys::euid()) else {
        return Ok(());
    };
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|l| l.file_type().is_symlink());
    Err(ReadError::Untrusted {
        problem,
        path: path.to_path_buf(),
        target: is_link.then(|| std::fs::canonicalize(path).ok()).flatten(),
    })
}

/// `stat` (following symlinks) and require that only root or tether can change what is
/// there, whatever its type (the manifests directory).
pub fn check_trusted(path: &Path) -> Result<Metadata, ReadError> {
    let m = std::fs::metadata(path).map_err(ReadError::Io)?;
    trusted(path, &m)?;
    Ok(m)
}

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

/// Whether the owner and mode of a file matter: [`Owner::Trusted`] for what configures
/// tether, [`Owner::Any`] for what the host describes itself with (`/proc`, networkd's
/// state files, owned by `systemd-network`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    Any,
    Trusted,
}

/// `stat` (following symlinks) and require a regular file no bigger than `max`.
pub fn check_regular(path: &Path, max: u64) -> Result<Metadata, ReadError> {
    let m = std::fs::metadata(path).map_err(ReadError::Io)?;
    regular(path, &m, max, Owner::Any)?;
    Ok(m)
}

/// [`check_regular`], and only root or tether can change it ([`untrusted`]).
pub fn check_trusted_regular(path: &Path, max: u64) -> Result<Metadata, ReadError> {
    let m = std::fs::metadata(path).map_err(ReadError::Io)?;
    regular(path, &m, max, Owner::Trusted)?;
    Ok(m)
}

/// The checks, in the order their errors are reported: the type, who can change it, the
/// size.
fn regular(path: &Path, m: &Metadata, max: u64, owner: Owner) -> Result<(), ReadError> {
    if !m.file_type().is_file() {
        return Err(ReadError::NotRegular { kind: kind_of(m) });
    }
    if owner == Owner::Trusted {
        trusted(path, m)?;
    }
    if m.len() > max {
        return Err(ReadError::TooBig { size: m.len(), max });
    }
    Ok(())
}

/// Read the regular file at `path` (symlinks to regular files followed), at most `max`
/// bytes; see the module doc for what is refused and why.
pub fn read_regular(path: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
    read_checked(path, max, Owner::Any)
}

/// [`read_regular`] for what configures tether: also refused when someone other than root
/// or tether could change it ([`untrusted`]).
pub fn read_trusted(path: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
    read_checked(path, max, Owner::Trusted)
}

fn read_checked(path: &Path, max: u64, owner: Owner) -> Result<Vec<u8>, ReadError> {
    let m = std::fs::metadata(path).map_err(ReadError::Io)?;
    regular(path, &m, max, owner)?;
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK | O_NOCTTY)
        .open(path)
        .map_err(ReadError::Io)?;
    read_open(f, path, max, owner)
}

/// The rest of [`read_regular`] on an open file: `fstat`, then a capped read.
fn read_open(f: File, path: &Path, max: u64, owner: Owner) -> Result<Vec<u8>, ReadError> {
    let m = f.metadata().map_err(ReadError::Io)?;
    regular(path, &m, max, owner)?;
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
    utf8(read_regular(path, max))
}

/// [`read_trusted`] as UTF-8 text.
pub fn read_trusted_text(path: &Path, max: u64) -> Result<String, String> {
    utf8(read_trusted(path, max))
}

fn utf8(read: Result<Vec<u8>, ReadError>) -> Result<String, String> {
    String::from_utf8(read.map_err(|e| e.to_string())?).map_err(|_| "not UTF-8".to_string())
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

    fn chmod(p: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// The rule and its messages, exactly (pure: uid, mode, euid).
    #[test]
    fn untrusted_rule_and_messages() {
        let p = Path::new("/etc/tether/tether.yaml");
        let msg = |uid, mode, euid| untrusted(uid, mode, euid).map(|u| u.message(p, None));
        // Root's or ours, not writable by group or others: read. The file type bits and
        // setuid/sticky bits do not matter.
        assert_eq!(msg(0, 0o100600, 0), None);
        assert_eq!(msg(0, 0o100644, 0), None);
        assert_eq!(msg(0, 0o040755, 0), None);
        assert_eq!(msg(0, 0o100444, 1000), None);
        assert_eq!(msg(1000, 0o100640, 1000), None);
        assert_eq!(msg(0, 0o104755, 0), None);
        assert_eq!(
            msg(0, 0o100666, 0).unwrap(),
            "writable by group or others (mode 666): refusing to read it. fix: chmod go-w /etc/tether/tether.yaml"
        );
        assert_eq!(
            msg(0, 0o100620, 0).unwrap(),
            "writable by group or others (mode 620): refusing to read it. fix: chmod go-w /etc/tether/tether.yaml"
        );
        assert_eq!(
            msg(0, 0o041777, 0).unwrap(),
            "writable by group or others (mode 1777): refusing to read it. fix: chmod go-w /etc/tether/tether.yaml"
        );
        assert_eq!(
            msg(4242, 0o100600, 0).unwrap(),
            "owned by uid 4242, not by root: refusing to read it. fix: chown root /etc/tether/tether.yaml"
        );
        assert_eq!(
            msg(4242, 0o100600, 1000).unwrap(),
            "owned by uid 4242, not by root or uid 1000 (tether's): refusing to read it. fix: chown root /etc/tether/tether.yaml"
        );
        // A file of tether's user is not root's: only trusted when tether runs as it.
        assert_eq!(
            msg(1000, 0o100600, 0).unwrap(),
            "owned by uid 1000, not by root: refusing to read it. fix: chown root /etc/tether/tether.yaml"
        );
        assert_eq!(
            msg(4242, 0o100602, 0).unwrap(),
            "owned by uid 4242, not by root, and writable by group or others (mode 602): refusing to read it. fix: chown root /etc/tether/tether.yaml && chmod go-w /etc/tether/tether.yaml"
        );
        // Through a symlink, the target is named and fixed.
        assert_eq!(
            untrusted(0, 0o100666, 0)
                .unwrap()
                .message(p, Some(Path::new("/srv/t.yaml"))),
            "symlink to /srv/t.yaml, which is writable by group or others (mode 666): refusing to read it. fix: chmod go-w /srv/t.yaml"
        );
    }

    /// The I/O wrappers: the mode and owner of what is read (a symlink's target), for
    /// files and directories; `read_regular` does not look at either.
    #[test]
    fn trusted_reads() {
        let d = dir();
        chmod(&d, 0o755);
        let a = d.join("a");
        std::fs::write(&a, b"hello").unwrap();
        chmod(&a, 0o644);
        assert_eq!(read_trusted(&a, 5).unwrap(), b"hello");
        assert_eq!(read_trusted_text(&a, 5).unwrap(), "hello");
        assert!(check_trusted_regular(&a, 5).is_ok());
        assert!(check_trusted(&d).is_ok());
        chmod(&a, 0o666);
        let want = format!(
            "writable by group or others (mode 666): refusing to read it. fix: chmod go-w {}",
            a.display()
        );
        assert_eq!(read_trusted(&a, 5).unwrap_err().to_string(), want);
        assert_eq!(read_trusted_text(&a, 5).unwrap_err(), want);
        assert_eq!(check_trusted_regular(&a, 5).unwrap_err().to_string(), want);
        assert_eq!(read_regular(&a, 5).unwrap(), b"hello");
        // Before the size: it is not read at all.
        assert_eq!(read_trusted(&a, 4).unwrap_err().to_string(), want);
        // The type first: a FIFO or a directory is "not a regular file" whatever its mode.
        chmod(&d, 0o777);
        assert_eq!(
            read_trusted(&d, 5).unwrap_err().to_string(),
            "not a regular file (a directory); skipped"
        );
        assert_eq!(
            check_trusted(&d).unwrap_err().to_string(),
            format!(
                "writable by group or others (mode 777): refusing to read it. fix: chmod go-w {}",
                d.display()
            )
        );
        chmod(&d, 0o755);
        // A symlink: its target is what is checked and named.
        let link = d.join("link");
        std::os::unix::fs::symlink(&a, &link).unwrap();
        assert_eq!(
            read_trusted(&link, 5).unwrap_err().to_string(),
            format!(
                "symlink to {real}, which is writable by group or others (mode 666): refusing to read it. fix: chmod go-w {real}",
                real = std::fs::canonicalize(&a).unwrap().display(),
            )
        );
        chmod(&a, 0o600);
        assert_eq!(read_trusted(&link, 5).unwrap(), b"hello");
        assert!(
            read_trusted(&d.join("missing"), 5)
                .unwrap_err()
                .is_not_found()
        );
        // Another user's file (chown needs root; the tests run as root).
        if crate::sys::euid() == 0 {
            std::os::unix::fs::chown(&a, Some(4242), None).unwrap();
            assert_eq!(
                read_trusted(&a, 5).unwrap_err().to_string(),
                format!(
                    "owned by uid 4242, not by root: refusing to read it. fix: chown root {}",
                    a.display()
                )
            );
            std::os::unix::fs::chown(&d, Some(4242), None).unwrap();
            assert_eq!(
                check_trusted(&d).unwrap_err().to_string(),
                format!(
                    "owned by uid 4242, not by root: refusing to read it. fix: chown root {}",
                    d.display()
                )
            );
        }
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
            read_open(f, &fifo, 5, Owner::Trusted)
                .unwrap_err()
                .to_string(),
            "not a regular file (a FIFO); skipped"
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
