use super::*;
use serde_json::json;

#[test]
fn yaml_documents_lists_and_errors() {
    let text = r#"
apiVersion: v1
kind: Namespace
metadata: {name: prod, labels: {team: a}}
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec: {nodeName: vm1}
---
apiVersion: v1
kind: Service
metadata: {name: svc}
---
apiVersion: crd.antrea.io/v1alpha2
kind: TrafficControl
metadata: {}
---
apiVersion: v1
kind: List
items:
- apiVersion: crd.antrea.io/v1alpha2
  kind: TrafficControl
  metadata: {name: tc1, namespace: ignored}
  spec: {}
"#;
    let p = parse_file("objs.yaml", text).unwrap();
    let keys: Vec<(Kind, &str)> = p.objects.iter().map(|o| (o.kind, o.key.as_str())).collect();
    assert_eq!(
        keys,
        [
            (Kind::Namespace, "prod"),
            (Kind::Pod, "default/web"),
            (Kind::TrafficControl, "tc1")
        ]
    );
    assert_eq!(p.errors.len(), 2, "{:?}", p.errors);
    assert!(
        p.errors[0]
            .starts_with("objs.yaml document 2: unsupported apiVersion/kind \"v1\"/\"Service\""),
        "{:?}",
        p.errors
    );
    assert_eq!(p.errors[1], "objs.yaml document 3: metadata.name: required");
    assert!(
        parse_file("bad.yaml", "a: [1\n")
            .unwrap_err()
            .starts_with("bad.yaml: ")
    );
    let j = parse_file("l.json", r#"{"kind":"PodList","apiVersion":"v1","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"x"}}]}"#).unwrap();
    assert_eq!(j.objects[0].key, "x/p");
    assert!(
        parse_file("b.json", "{")
            .unwrap_err()
            .starts_with("b.json: ")
    );
}

#[test]
fn stamps_are_stable_until_content_changes() {
    let dir = std::env::temp_dir().join(format!("tether-mf-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = ManifestsConfig::new(dir.clone(), "vm1", "default");
    std::fs::write(
        dir.join("a.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: n1}\n",
    )
    .unwrap();
    std::fs::write(dir.join("skip.txt"), "not a manifest").unwrap();
    let mut s = Scanner::default();
    let t = UNIX_EPOCH + Duration::from_secs(1_764_493_200);
    let (d1, e1) = s.scan(&cfg, t);
    assert!(e1.is_empty(), "{e1:?}");
    let ns1 = d1[&Kind::Namespace][0].clone();
    assert_eq!(ns1["metadata"]["resourceVersion"], json!("1"));
    assert_eq!(
        ns1["metadata"]["creationTimestamp"],
        json!("2025-11-30T09:00:00Z")
    );
    let (d2, _) = s.scan(&cfg, t + Duration::from_secs(5));
    assert_eq!(d2[&Kind::Namespace][0], ns1);
    std::fs::write(
        dir.join("a.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: n1, labels: {x: y}}\n",
    )
    .unwrap();
    let (d3, _) = s.scan(&cfg, t + Duration::from_secs(9));
    let ns3 = &d3[&Kind::Namespace][0];
    assert_eq!(ns3["metadata"]["resourceVersion"], json!("2"));
    assert_eq!(
        ns3["metadata"]["creationTimestamp"],
        json!("2025-11-30T09:00:00Z")
    );
    assert_eq!(ns3["metadata"]["uid"], ns1["metadata"]["uid"]);
    // A broken file keeps its last good objects and reports the error.
    std::fs::write(dir.join("a.yaml"), "metadata: [\n").unwrap();
    let (d4, e4) = s.scan(&cfg, t);
    assert_eq!(&d4[&Kind::Namespace][0], ns3);
    assert_eq!(e4.len(), 1);
    assert!(e4[0].starts_with("a.yaml: "), "{e4:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn rfc3339_dates() {
    assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
    assert_eq!(
        rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)),
        "2000-02-29T00:00:00Z"
    );
    assert_eq!(
        rfc3339(UNIX_EPOCH + Duration::from_secs(4_107_542_399)),
        "2100-02-28T23:59:59Z"
    );
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tether-mf-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

const NS: &str = "apiVersion: v1\nkind: Namespace\nmetadata: {name: n1}\n";
const TC: &str =
    "apiVersion: crd.antrea.io/v1alpha2\nkind: TrafficControl\nmetadata: {name: tc1}\nspec: {}\n";

/// Keys of the objects one poll hands over, or None when the poll changed nothing.
fn poll_keys(s: &mut Scanner, cfg: &ManifestsConfig) -> Result<Option<Vec<String>>, DirError> {
    let mut keys = Vec::new();
    let p = s.poll(cfg, UNIX_EPOCH, |k, v| {
        keys.push(format!(
            "{k} {}",
            v["metadata"]["name"].as_str().unwrap_or("?")
        ))
    })?;
    Ok(p.changed.then_some(keys))
}

/// The directory renamed away (or unmounted, or unreadable) for a poll: every object
/// stays, and when it is back nothing has changed.
#[test]
fn a_directory_that_cannot_be_listed_changes_nothing() {
    let dir = tmpdir("gone");
    std::fs::write(dir.join("ns.yaml"), NS).unwrap();
    std::fs::write(dir.join("tc.yaml"), TC).unwrap();
    let cfg = ManifestsConfig::new(dir.clone(), "vm1", "default");
    let mut s = Scanner::default();
    assert_eq!(
        poll_keys(&mut s, &cfg).unwrap(),
        Some(vec![
            "Namespace n1".to_string(),
            "TrafficControl tc1".to_string()
        ])
    );
    let away = dir.with_extension("away");
    std::fs::rename(&dir, &away).unwrap();
    let e = poll_keys(&mut s, &cfg).unwrap_err();
    assert!(
        e.0.starts_with(&format!("{}: cannot list the directory: ", dir.display())),
        "{e}"
    );
    // A file where the directory was: ENOTDIR, the same.
    std::fs::write(&dir, "x").unwrap();
    assert!(poll_keys(&mut s, &cfg).is_err());
    std::fs::remove_file(&dir).unwrap();
    std::fs::rename(&away, &dir).unwrap();
    assert_eq!(poll_keys(&mut s, &cfg).unwrap(), None);
    // Only a file gone from a listable directory deletes its objects.
    std::fs::remove_file(dir.join("tc.yaml")).unwrap();
    assert_eq!(
        poll_keys(&mut s, &cfg).unwrap(),
        Some(vec!["Namespace n1".to_string()])
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// At start, before any good poll, a missing directory is an error, not an empty set.
#[test]
fn a_missing_directory_at_the_first_poll_is_an_error() {
    let dir = tmpdir("first").join("nope");
    let cfg = ManifestsConfig::new(dir, "vm1", "default");
    let mut s = Scanner::default();
    assert!(poll_keys(&mut s, &cfg).is_err());
    let (objs, errors) = s.scan(&cfg, UNIX_EPOCH);
    assert!(objs.values().all(Vec::is_empty));
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].contains("cannot list the directory"),
        "{errors:?}"
    );
}

/// A path that exists but cannot be used keeps the objects of its last good read: a
/// directory in place of a file, a dangling symlink, a file over the size limit.
#[test]
fn an_unusable_file_keeps_its_last_good_objects() {
    let dir = tmpdir("unusable");
    let cfg = ManifestsConfig::new(dir.clone(), "vm1", "default");
    std::fs::write(dir.join("tc.yaml"), TC).unwrap();
    let mut s = Scanner::default();
    assert!(poll_keys(&mut s, &cfg).unwrap().is_some());
    std::fs::remove_file(dir.join("tc.yaml")).unwrap();
    std::fs::create_dir(dir.join("tc.yaml")).unwrap();
    assert_eq!(poll_keys(&mut s, &cfg).unwrap(), None);
    let p = s.poll(&cfg, UNIX_EPOCH, |_, _| {}).unwrap();
    assert_eq!(
        p.errors,
        vec!["tc.yaml: not a regular file (a directory); skipped; keeping its last good objects"]
    );
    std::fs::remove_dir(dir.join("tc.yaml")).unwrap();
    std::os::unix::fs::symlink(dir.join("nowhere.yaml"), dir.join("tc.yaml")).unwrap();
    let p = s.poll(&cfg, UNIX_EPOCH, |_, _| {}).unwrap();
    assert!(!p.changed);
    assert!(
        p.errors[0].starts_with("tc.yaml: No such file or directory"),
        "{:?}",
        p.errors
    );
    std::fs::remove_file(dir.join("tc.yaml")).unwrap();
    // Sparse, so the test writes nothing: the size is refused before reading.
    let f = std::fs::File::create(dir.join("tc.yaml")).unwrap();
    f.set_len(crate::files::MANIFEST_MAX + 1).unwrap();
    let p = s.poll(&cfg, UNIX_EPOCH, |_, _| {}).unwrap();
    assert!(!p.changed);
    assert_eq!(
        p.errors,
        vec![
            "tc.yaml: 67108865 bytes, more than the limit of 67108864 bytes; skipped; keeping its last good objects"
        ]
    );
    // Good again: back to normal, no change (same objects).
    std::fs::write(dir.join("tc.yaml"), TC).unwrap();
    let p = s.poll(&cfg, UNIX_EPOCH, |_, _| {}).unwrap();
    assert!(!p.changed);
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    std::fs::remove_dir_all(&dir).unwrap();
}

fn chmod(p: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A directory or a file someone other than root or tether could change is refused: the
/// directory like one that cannot be listed (nothing changes), a file like one that cannot
/// be read (its last good objects kept, never deleted), each error naming it and the fix.
#[test]
fn what_others_can_change_is_refused_and_deletes_nothing() {
    let dir = tmpdir("modes");
    chmod(&dir, 0o755);
    let cfg = ManifestsConfig::new(dir.clone(), "vm1", "default");
    let tc = dir.join("tc.yaml");
    std::fs::write(dir.join("ns.yaml"), NS).unwrap();
    std::fs::write(&tc, TC).unwrap();
    chmod(&dir.join("ns.yaml"), 0o644);
    chmod(&tc, 0o644);
    let mut s = Scanner::default();
    assert!(poll_keys(&mut s, &cfg).unwrap().is_some());
    assert_eq!(check_dir(&dir), Ok(()));

    chmod(&dir, 0o777);
    let want = format!(
        "{d}: writable by group or others (mode 777): refusing to read it. fix: chmod go-w {d}",
        d = dir.display()
    );
    assert_eq!(check_dir(&dir), Err(DirError(want.clone())));
    assert_eq!(poll_keys(&mut s, &cfg), Err(DirError(want)));
    chmod(&dir, 0o755);
    assert_eq!(poll_keys(&mut s, &cfg).unwrap(), None);

    chmod(&tc, 0o666);
    let p = s.poll(&cfg, UNIX_EPOCH, |_, _| {}).unwrap();
    assert!(!p.changed);
    assert_eq!(
        p.errors,
        vec![format!(
            "tc.yaml: writable by group or others (mode 666): refusing to read it. fix: chmod go-w {}; keeping its last good objects",
            tc.display()
        )]
    );
    // Its content changed while others could write it: not read.
    std::fs::write(&tc, TC.replace("tc1", "tc2")).unwrap();
    assert_eq!(poll_keys(&mut s, &cfg).unwrap(), None);
    if crate::sys::euid() == 0 {
        chmod(&tc, 0o644);
        std::os::unix::fs::chown(&tc, Some(4242), None).unwrap();
        let p = s.poll(&cfg, UNIX_EPOCH, |_, _| {}).unwrap();
        assert!(!p.changed);
        assert_eq!(
            p.errors,
            vec![format!(
                "tc.yaml: owned by uid 4242, not by root: refusing to read it. fix: chown root {}; keeping its last good objects",
                tc.display()
            )]
        );
        std::os::unix::fs::chown(&tc, Some(0), None).unwrap();
    }
    // Fixed: read again.
    chmod(&tc, 0o644);
    assert_eq!(
        poll_keys(&mut s, &cfg).unwrap(),
        Some(vec![
            "Namespace n1".to_string(),
            "TrafficControl tc2".to_string()
        ])
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// FIFOs, sockets and devices are never opened (a FIFO would block the poller, /dev/zero
/// would never end); a symlink to a regular file anywhere is read.
#[test]
fn only_regular_files_are_read() {
    let dir = tmpdir("kinds");
    let outside = tmpdir("kinds-outside");
    let cfg = ManifestsConfig::new(dir.clone(), "vm1", "default");
    std::fs::write(outside.join("ns.yaml"), NS).unwrap();
    std::os::unix::fs::symlink(outside.join("ns.yaml"), dir.join("link.yaml")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.join("zero.yaml")).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("dir.yaml")).unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(dir.join("fifo.yaml"))
            .status()
            .unwrap()
            .success()
    );
    let _sock = std::os::unix::net::UnixListener::bind(dir.join("sock.yaml")).unwrap();
    let mut s = Scanner::default();
    let mut keys = Vec::new();
    let p = s
        .poll(&cfg, UNIX_EPOCH, |k, v| {
            keys.push(format!("{k} {}", v["metadata"]["name"].as_str().unwrap()))
        })
        .unwrap();
    assert_eq!(keys, vec!["Namespace n1"]);
    assert_eq!(
        p.errors,
        vec![
            "dir.yaml: not a regular file (a directory); skipped",
            "fifo.yaml: not a regular file (a FIFO); skipped",
            "sock.yaml: not a regular file (a socket); skipped",
            "zero.yaml: not a regular file (a character device); skipped",
        ]
    );
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&outside).unwrap();
}

/// A file whose stat key did not change is not read again once its mtime is older than
/// the racy window; a recent one is re-read (not re-parsed when its bytes are the same).
#[test]
fn unchanged_files_are_not_read_again() {
    let dir = tmpdir("stat");
    let cfg = ManifestsConfig::new(dir.clone(), "vm1", "default");
    let old = dir.join("old.yaml");
    std::fs::write(&old, NS).unwrap();
    let f = std::fs::File::options().write(true).open(&old).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(60))
        .unwrap();
    drop(f);
    let mut s = Scanner::default();
    assert!(poll_keys(&mut s, &cfg).unwrap().is_some());
    assert_eq!(s.reads, 1);
    assert_eq!(poll_keys(&mut s, &cfg).unwrap(), None);
    assert_eq!(poll_keys(&mut s, &cfg).unwrap(), None);
    assert_eq!(s.reads, 1);
    // Just written: re-read every poll until it settles, but unchanged content is no
    // change.
    std::fs::write(dir.join("new.yaml"), TC).unwrap();
    assert!(poll_keys(&mut s, &cfg).unwrap().is_some());
    assert_eq!(poll_keys(&mut s, &cfg).unwrap(), None);
    assert_eq!(s.reads, 3);
    // Same size, same second: the content is still seen (the racy case).
    std::fs::write(dir.join("new.yaml"), TC.replace("tc1", "tc2")).unwrap();
    assert_eq!(
        poll_keys(&mut s, &cfg).unwrap(),
        Some(vec![
            "Namespace n1".to_string(),
            "TrafficControl tc2".to_string()
        ])
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
