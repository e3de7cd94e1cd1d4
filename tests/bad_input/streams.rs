//! Garbage Kubernetes input as it arrives: manifest files and watch-stream lines.

use super::*;

// ---------------------------------------------------------------------------------------
// Manifest files

const GOOD_POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web-1\n  namespace: ns1\nspec:\n  nodeName: vm1\n";

#[test]
fn garbage_manifests() {
    // (case, file name, text, expected errors of its bad documents; the good Pod around
    // them must still parse). `None` = the whole file is refused with that error prefix.
    type Case = (
        &'static str,
        &'static str,
        String,
        Result<Vec<&'static str>, &'static str>,
    );
    let cases: Vec<Case> = vec![
        ("mf-unknown-kind", "a.yaml", format!("apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n---\n{GOOD_POD}"), Ok(vec!["a.yaml document 0: unsupported apiVersion/kind \"v1\"/\"Service\""])),
        ("mf-wrong-api-version", "a.yaml", format!("{GOOD_POD}---\napiVersion: crd.antrea.io/v1beta1\nkind: TrafficControl\nmetadata:\n  name: t\n"), Ok(vec!["a.yaml document 1: unsupported apiVersion/kind \"crd.antrea.io/v1beta1\"/\"TrafficControl\""])),
        ("mf-no-metadata", "a.yaml", format!("apiVersion: v1\nkind: Namespace\n---\n{GOOD_POD}"), Ok(vec!["a.yaml document 0: metadata: required"])),
        ("mf-metadata-a-string", "a.yaml", format!("apiVersion: v1\nkind: Namespace\nmetadata: ns1\n---\n{GOOD_POD}"), Ok(vec!["a.yaml document 0: metadata: required"])),
        ("mf-no-name", "a.yaml", format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  labels: {{a: b}}\n---\n{GOOD_POD}"), Ok(vec!["a.yaml document 0: metadata.name: required"])),
        ("mf-name-a-number", "a.yaml", format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: 7\n---\n{GOOD_POD}"), Ok(vec!["a.yaml document 0: metadata.name: required"])),
        ("mf-scalar-document", "a.yaml", format!("hello world\n---\n{GOOD_POD}"), Ok(vec!["a.yaml document 0: unsupported apiVersion/kind \"\"/\"\""])),
        ("mf-list-with-bad-item", "l.yaml", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: web-1\n    namespace: ns1\n- kind: Pod\n".to_string(), Ok(vec!["l.yaml document 0 item 1: unsupported apiVersion/kind \"\"/\"Pod\""])),
        ("mf-yaml-syntax", "b.yaml", format!("{GOOD_POD}---\nmetadata: {{name: [\n"), Err("b.yaml: ")),
        ("mf-yaml-tab-indent", "b.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n\tname: x\n".to_string(), Err("b.yaml: ")),
        ("mf-json-garbage", "c.json", "{\"apiVersion\": \"v1\", \"kind\": ".to_string(), Err("c.json: ")),
        ("mf-control-bytes", "d.yaml", format!("\u{1}\u{2}: [\u{1b}\n---\n{GOOD_POD}"), Err("d.yaml: line 2 column 1: while parsing a flow sequence")),
    ];
    run_table(
        "manifests",
        &cases,
        |c| c.0.to_string(),
        |(_, file, text, want)| match (parse_file(file, text), want) {
            (Ok(p), Ok(errs)) => {
                assert_eq!(p.errors.len(), errs.len(), "{:?}", p.errors);
                for (got, w) in p.errors.iter().zip(errs) {
                    assert!(got.starts_with(w), "{got:?} does not start with {w:?}");
                }
                assert_eq!(p.objects.len(), 1, "the good Pod survives: {:?}", p.objects);
                assert_eq!(p.objects[0].kind, Kind::Pod);
                assert_eq!(p.objects[0].key, "ns1/web-1");
            }
            (Err(e), Err(w)) => assert!(e.starts_with(w), "{e:?} does not start with {w:?}"),
            (got, w) => panic!("got {got:?}, want {w:?}"),
        },
    );
}

// ---------------------------------------------------------------------------------------
// Watch-stream lines

#[test]
fn garbage_watch_lines() {
    let pod = json!({"metadata": {"name": "p", "namespace": "ns1", "resourceVersion": "5"}});
    // (case, line, check of the result)
    type Check = fn(Result<WatchEvent<Pod>, KubeError>);
    let cases: Vec<(&str, String, Check)> = vec![
        ("watch-bare-status-410", json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410, "reason": "Expired", "message": "too old resource version: 1 (5)"}).to_string(), |r| {
            assert_eq!(r.unwrap(), WatchEvent::Error(KubeError::Gone { message: "too old resource version: 1 (5)".into() }));
        }),
        ("watch-bare-status-500", json!({"kind": "Status", "code": 500, "reason": "InternalError", "message": "etcd down"}).to_string(), |r| {
            assert_eq!(r.unwrap(), WatchEvent::Error(KubeError::Status { code: 500, reason: "InternalError".into(), message: "etcd down".into(), retry_after: None }));
        }),
        ("watch-error-event-410", json!({"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "gone"}}).to_string(), |r| {
            assert_eq!(r.unwrap(), WatchEvent::Error(KubeError::Gone { message: "gone".into() }));
        }),
        ("watch-error-event-object-a-string", json!({"type": "ERROR", "object": "boom"}).to_string(), |r| {
            let e = r.unwrap_err().to_string();
            assert!(e.starts_with("cannot decode Pod watch event: invalid type: string"), "{e}");
        }),
        ("watch-unknown-type", json!({"type": "PATCHED", "object": pod}).to_string(), |r| {
            assert_eq!(r.unwrap_err().to_string(), "cannot decode Pod watch event: unknown event type \"PATCHED\"");
        }),
        ("watch-no-type-no-status", json!({"object": pod}).to_string(), |r| {
            assert_eq!(r.unwrap_err().to_string(), "cannot decode Pod watch event: no \"type\"");
        }),
        ("watch-not-json", "HTTP/1.1 502 Bad Gateway".to_string(), |r| {
            assert!(r.unwrap_err().to_string().starts_with("cannot decode Pod watch event: "));
        }),
        ("watch-truncated-line", json!({"type": "ADDED", "object": pod}).to_string()[..30].to_string(), |r| {
            assert!(r.unwrap_err().to_string().contains("EOF while parsing"));
        }),
        ("watch-line-an-array", "[1,2,3]".to_string(), |r| {
            assert!(r.unwrap_err().to_string().starts_with("cannot decode Pod watch event: invalid type: integer `1`, expected a string"));
        }),
        ("watch-bookmark-without-rv", json!({"type": "BOOKMARK", "object": {"metadata": {}}}).to_string(), |r| {
            assert_eq!(r.unwrap_err().to_string(), "cannot decode Pod watch event: BOOKMARK without metadata.resourceVersion");
        }),
        ("watch-object-metadata-a-string", json!({"type": "ADDED", "object": {"metadata": "p"}}).to_string(), |r| {
            let e = r.unwrap_err();
            assert!(matches!(&e, KubeError::Decode { what, .. } if what == "Pod"), "{e:?}");
        }),
        ("watch-labels-a-list", json!({"type": "ADDED", "object": {"metadata": {"name": "p", "labels": ["a"]}}}).to_string(), |r| {
            let e = r.unwrap_err();
            assert!(matches!(&e, KubeError::Decode { what, detail } if what == "Pod" && detail.contains("invalid type: sequence")), "{e:?}");
        }),
        ("watch-oversized-line", format!("{{\"type\":\"ADDED\",\"object\":{{\"metadata\":{{\"name\":\"{}\"}}}}}}", "x".repeat(4 << 20)), |r| {
            // Decodes (the length cap is the HTTP reader's business), no panic, no copy blow-up.
            match r.unwrap() {
                WatchEvent::Added(p) => assert_eq!(p.metadata.name.len(), 4 << 20),
                other => panic!("{other:?}"),
            }
        }),
    ];
    run_table(
        "watch lines",
        &cases,
        |c| c.0.to_string(),
        |(_, line, check)| {
            check(decode_event::<Pod>(line.as_bytes()));
            // The next good line of the same stream is unaffected.
            let good = json!({"type": "ADDED", "object": pod}).to_string();
            match decode_event::<Pod>(good.as_bytes()).unwrap() {
                WatchEvent::Added(p) => assert_eq!(p.metadata.key(), "ns1/p"),
                other => panic!("{other:?}"),
            }
        },
    );
}
