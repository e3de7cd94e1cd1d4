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
