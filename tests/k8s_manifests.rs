//! The manifests source (`--manifests DIR`): YAML multi-document and JSON `List` files
//! become the same stores and events as the watch; edits, new and removed files are
//! picked up by polling; a broken file is reported by name and document index and leaves
//! other files' objects alone. No root needed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crossbeam_channel::Receiver;
use tether::k8s::{Change, Kind, KubeEvent, ManifestsConfig, Resource, Source, Stores};

const LIMIT: Duration = Duration::from_secs(20);

fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tether-manifests-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    // Whatever the umask: tether refuses a directory group or others may write.
    chmod(&d, 0o755);
    d
}

fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn write(d: &Path, name: &str, text: &str) {
    // Write then rename, as editors and config management do, so a poll never sees half.
    let tmp = d.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).expect("write");
    chmod(&tmp, 0o644);
    std::fs::rename(&tmp, d.join(name)).expect("rename");
}

const OBJECTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata:
  name: prod
  labels: {team: a}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: prod, labels: {app: web}}
spec: {nodeName: vm1}
---
apiVersion: v1
kind: Pod
metadata: {name: elsewhere, namespace: prod}
spec: {nodeName: vm2}
---
apiVersion: crd.antrea.io/v1alpha1
kind: ExternalNode
metadata: {name: vm1}
spec:
  interfaces:
  - {name: eth0, ips: [192.0.2.10]}
---
apiVersion: crd.antrea.io/v1alpha1
kind: ExternalNode
metadata: {name: vm2, namespace: default}
spec:
  interfaces:
  - {name: eth0, ips: [192.0.2.11]}
"#;

const TCS: &str = r#"{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "crd.antrea.io/v1alpha2", "kind": "TrafficControl", "metadata": {"name": "mirror-web"},
   "spec": {"appliedTo": {"podSelector": {"matchLabels": {"app": "web"}}}, "direction": "Both",
            "action": "Mirror", "targetPort": {"ovsInternal": {"name": "tap0"}}}}]}"#;

fn next_event(rx: &Receiver<KubeEvent>) -> KubeEvent {
    rx.recv_timeout(LIMIT).expect("no event")
}

fn describe(ev: &KubeEvent) -> String {
    fn c<T: Resource>(kind: &str, c: &Change<T>) -> String {
        match c {
            Change::Added(o) => format!("{kind} added {}", o.key()),
            Change::Updated { new, .. } => format!("{kind} updated {}", new.key()),
            Change::Deleted(o) => format!("{kind} deleted {}", o.key()),
        }
    }
    match ev {
        KubeEvent::Pod(x) => c("Pod", x),
        KubeEvent::Namespace(x) => c("Namespace", x),
        KubeEvent::TrafficControl(x) => c("TrafficControl", x),
        KubeEvent::ExternalNode(x) => c("ExternalNode", x),
        KubeEvent::Synced(k) => format!("synced {k}"),
    }
}

#[test]
fn manifests_directory_is_a_source() {
    let d = dir("main");
    write(&d, "objects.yaml", OBJECTS);
    write(&d, "tcs.json", TCS);
    write(&d, "README.txt", "not a manifest");
    let stores = Stores::default();
    let (tx, rx) = crossbeam_channel::bounded(100);
    let mut cfg = ManifestsConfig::new(d.clone(), "vm1", "default");
    cfg.poll_interval = Duration::from_millis(20);
    let src = Source::start_manifests(cfg, stores.clone(), tx).expect("source");

    let first: Vec<String> = (0..8).map(|_| describe(&next_event(&rx))).collect();
    assert_eq!(
        first,
        [
            "Namespace added prod",
            "Pod added prod/web",
            "TrafficControl added mirror-web",
            "ExternalNode added default/vm1",
            "synced Pod",
            "synced Namespace",
            "synced TrafficControl",
            "synced ExternalNode",
        ]
    );
    let pod = stores.pods.get("prod/web").expect("pod");
    assert_eq!(pod.metadata.resource_version, "1");
    assert!(
        pod.metadata
            .creation_timestamp
            .as_deref()
            .is_some_and(|t| t.ends_with('Z'))
    );
    assert!(
        stores
            .traffic_controls
            .get("mirror-web")
            .expect("tc")
            .spec
            .is_ok()
    );

    // An edit: one update, nothing for unchanged objects.
    write(
        &d,
        "objects.yaml",
        &OBJECTS.replace("labels: {app: web}", "labels: {app: db}"),
    );
    match next_event(&rx) {
        KubeEvent::Pod(Change::Updated { old, new }) => {
            assert_eq!(old.metadata.labels["app"], "web");
            assert_eq!(new.metadata.labels["app"], "db");
            assert_eq!(
                old.metadata.creation_timestamp,
                new.metadata.creation_timestamp
            );
            assert_ne!(old.metadata.resource_version, new.metadata.resource_version);
        }
        other => panic!("{}", describe(&other)),
    }

    // A broken file keeps its objects; a bad document is reported by index; another
    // file's new object still arrives.
    write(&d, "tcs.json", "{\"kind\": ");
    write(
        &d,
        "more.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: dev}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\n",
    );
    assert_eq!(describe(&next_event(&rx)), "Namespace added dev");
    assert!(stores.traffic_controls.get("mirror-web").is_some());
    let mut errs = String::new();
    let deadline = std::time::Instant::now() + LIMIT;
    while !(errs.contains("tcs.json: line 1 column 9: EOF while parsing")
        && errs.contains("more.yaml document 1: unsupported apiVersion/kind"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "errors not reported: {errs}"
        );
        errs = format!("{:?}", src.status());
        std::thread::sleep(Duration::from_millis(5));
    }

    // Fixing the file and removing another: the TC comes back unchanged (no event), the
    // removed file's Namespace is deleted.
    write(&d, "tcs.json", TCS);
    std::fs::remove_file(d.join("more.yaml")).expect("rm");
    assert_eq!(describe(&next_event(&rx)), "Namespace deleted dev");
    // Removing everything deletes everything.
    std::fs::remove_file(d.join("objects.yaml")).expect("rm");
    std::fs::remove_file(d.join("tcs.json")).expect("rm");
    let mut rest: Vec<String> = (0..4).map(|_| describe(&next_event(&rx))).collect();
    rest.sort();
    assert_eq!(
        rest,
        [
            "ExternalNode deleted default/vm1",
            "Namespace deleted prod",
            "Pod deleted prod/web",
            "TrafficControl deleted mirror-web"
        ]
    );
    src.stop();
    assert!(rx.try_recv().is_err(), "no stray events");
    std::fs::remove_dir_all(&d).expect("cleanup");
}

#[test]
fn the_same_kind_in_two_files_keeps_the_first() {
    let d = dir("dup");
    let ns = "apiVersion: v1\nkind: Namespace\nmetadata: {name: x, labels: {from: FILE}}\n";
    write(&d, "a.yaml", &ns.replace("FILE", "a"));
    write(&d, "b.yaml", &ns.replace("FILE", "b"));
    let stores = Stores::default();
    let (tx, rx) = crossbeam_channel::bounded(100);
    let mut cfg = ManifestsConfig::new(d.clone(), "vm1", "default");
    cfg.poll_interval = Duration::from_millis(20);
    let src = Source::start_manifests(cfg, stores.clone(), tx).expect("source");
    while next_event(&rx) != KubeEvent::Synced(Kind::ExternalNode) {}
    assert_eq!(
        stores.namespaces.get("x").expect("ns").metadata.labels["from"],
        "a"
    );
    let status = format!("{:?}", src.status());
    assert!(
        status.contains("b.yaml: Namespace x is already defined in a.yaml; ignored"),
        "{status}"
    );
    src.stop();
    std::fs::remove_dir_all(&d).expect("cleanup");
}
