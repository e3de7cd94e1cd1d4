//! The held configuration's second home: one root-only file per attached NIC under the
//! state directory (`--state-dir`, the unit's `StateDirectory=`), `held-<nic>.json`, the
//! same JSON as OVSDB's `tether-held:<nic>` (`record::Held`). OVSDB loses its copy with
//! the bridge (`ovs-vsctl del-br`) or the database (one replaced by an empty one); this
//! one goes only when the NIC is given back, so a `<nic>~` left without its host port can
//! always get the VM's addresses, routes and settings back (`controller::held`).
//!
//! Written whole to a temporary file (mode 0600, in a 0700 directory), synced, then renamed
//! over the old one: a crash leaves the old file or the new one, never half of one.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::record::Held;

const PREFIX: &str = "held-";
const SUFFIX: &str = ".json";

/// The held-configuration files of one state directory.
#[derive(Clone, Debug)]
pub struct HeldFiles {
    dir: PathBuf,
}

impl HeldFiles {
    pub fn new(dir: impl Into<PathBuf>) -> HeldFiles {
        HeldFiles { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, nic: &str) -> PathBuf {
        self.dir.join(format!("{PREFIX}{nic}{SUFFIX}"))
    }

    /// Replace `held.nic`'s file with `held`.
    pub fn write(&self, held: &Held) -> Result<(), String> {
        let path = self.path(&held.nic);
        let fail = |what: &str, e: std::io::Error| format!("{what} {}: {e}", path.display());
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| format!("create state directory {}: {e}", self.dir.display()))?;
        let tmp = self.dir.join(format!(".{PREFIX}{}{SUFFIX}.tmp", held.nic));
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| fail("create", e))?;
        f.write_all(held.to_json().as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|e| fail("write", e))?;
        fs::rename(&tmp, &path).map_err(|e| fail("rename onto", e))
    }

    /// `nic`'s held configuration, if there is a file; an unreadable one is an error that
    /// names it (never "nothing held").
    pub fn read(&self, nic: &str) -> Result<Option<Held>, String> {
        let path = self.path(nic);
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("read {}: {e}", path.display())),
        };
        Held::from_json(nic, &text)
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Remove `nic`'s file (none is fine).
    pub fn remove(&self, nic: &str) -> Result<(), String> {
        let path = self.path(nic);
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(format!("remove {}: {e}", path.display())),
        }
    }

    /// The NICs that have a file, sorted (none when the directory does not exist).
    pub fn nics(&self) -> Vec<String> {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut v: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let nic = name.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
                crate::netlink::valid_ifname(nic).then(|| nic.to_string())
            })
            .collect();
        v.sort();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::externalnode::record::tests::sample;
    use std::os::unix::fs::PermissionsExt;

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tether-heldfile-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn write_read_list_remove() {
        let dir = temp_dir("rw");
        let files = HeldFiles::new(dir.join("state"));
        assert_eq!(files.nics(), Vec::<String>::new());
        assert_eq!(files.read("eth1").unwrap(), None);
        let held = Held {
            nic: "eth1".into(),
            config: sample(),
        };
        files.write(&held).unwrap();
        assert_eq!(files.read("eth1").unwrap(), Some(held.clone()));
        assert_eq!(files.nics(), vec!["eth1".to_string()]);
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.join("state")), 0o700);
        assert_eq!(mode(&dir.join("state/held-eth1.json")), 0o600);
        // Rewritten whole; no temporary file is left behind.
        files.write(&held).unwrap();
        let names: Vec<_> = fs::read_dir(dir.join("state"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec!["held-eth1.json".to_string()]);
        files.remove("eth1").unwrap();
        files.remove("eth1").unwrap();
        assert_eq!(files.read("eth1").unwrap(), None);
        assert_eq!(files.nics(), Vec::<String>::new());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_unreadable_file_is_an_error_naming_it() {
        let dir = temp_dir("bad");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("held-eth1.json"), "{\"ifindex\":").unwrap();
        fs::write(dir.join("held-a b.json"), "{}").unwrap();
        fs::write(dir.join("other.json"), "{}").unwrap();
        let files = HeldFiles::new(&dir);
        let err = files.read("eth1").unwrap_err();
        assert!(
            err.starts_with(&format!(
                "{}: not JSON",
                dir.join("held-eth1.json").display()
            )),
            "{err}"
        );
        // Only valid interface names count.
        assert_eq!(files.nics(), vec!["eth1".to_string()]);
        let _ = fs::remove_dir_all(&dir);
    }
}
