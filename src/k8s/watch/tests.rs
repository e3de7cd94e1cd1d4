use super::*;
use crate::k8s::types::Pod;
use serde_json::json;

fn pod(name: &str, rv: &str) -> Pod {
    Pod::decode(json!({"metadata": {"namespace": "ns", "name": name, "resourceVersion": rv}}))
        .unwrap()
}

fn cfg() -> WatchConfig {
    WatchConfig {
        page_size: 2,
        timeout_seconds: 290,
        backoff: BackoffConfig {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(8),
        },
    }
}

fn gone() -> KubeError {
    KubeError::Gone {
        message: "too old".into(),
    }
}

#[test]
fn list_pages_then_watch_then_relist_on_410() {
    let t0 = Instant::now();
    let mut w: Watcher<Pod> = Watcher::new(cfg(), 7);
    assert_eq!(
        w.poll(t0),
        WatchNext::Send(Request::List {
            limit: 2,
            continue_token: None
        })
    );
    let d = w.on_list_page(ListPage {
        items: vec![pod("a", "5"), pod("b", "6")],
        resource_version: "10".into(),
        continue_token: Some("c1".into()),
        skipped: vec![],
    });
    assert_eq!(d, None);
    assert_eq!(
        w.state(),
        &State::Listing {
            continue_token: "c1".into()
        }
    );
    assert_eq!(
        w.poll(t0),
        WatchNext::Send(Request::List {
            limit: 2,
            continue_token: Some("c1".into())
        })
    );
    let d = w.on_list_page(ListPage {
        items: vec![pod("c", "7")],
        resource_version: "10".into(),
        continue_token: None,
        skipped: vec![],
    });
    assert_eq!(
        d,
        Some(Delta::Replace(vec![
            pod("a", "5"),
            pod("b", "6"),
            pod("c", "7")
        ]))
    );
    let watch = |rv: &str| {
        WatchNext::Send(Request::Watch {
            resource_version: rv.into(),
            timeout_seconds: 290,
        })
    };
    assert_eq!(w.poll(t0), watch("10"));

    w.on_watch_opened(t0);
    assert_eq!(
        w.on_watch_event(WatchEvent::Added(pod("d", "11")), t0),
        Ok(Some(Delta::Apply(pod("d", "11"))))
    );
    assert_eq!(
        w.on_watch_event(
            WatchEvent::Bookmark {
                resource_version: "15".into()
            },
            t0
        ),
        Ok(None)
    );
    assert_eq!(
        w.on_watch_event(WatchEvent::Deleted(pod("a", "16")), t0),
        Ok(Some(Delta::Delete(pod("a", "16"))))
    );
    // A clean end re-watches from the last rv immediately.
    w.on_watch_end(t0);
    assert_eq!(w.poll(t0), watch("16"));

    // A transport error keeps rv but backs off.
    w.on_watch_opened(t0);
    let d = w.on_watch_error(
        KubeError::Transport {
            what: "watch".into(),
            detail: "cut".into(),
        },
        t0,
    );
    assert!(
        d >= Duration::from_millis(750) && d < Duration::from_millis(1250),
        "{d:?}"
    );
    assert_eq!(w.poll(t0), WatchNext::Wait(t0 + d));
    assert_eq!(w.poll(t0 + d), watch("16"));

    // ERROR 410 in the stream → relist after the (grown) backoff.
    w.on_watch_opened(t0);
    let e = w.on_watch_event(WatchEvent::Error(gone()), t0 + d);
    assert_eq!(e, Err(gone()));
    assert_eq!(w.state(), &State::NeedList);
    assert_eq!(w.last_error(), Some(&gone()));
    let WatchNext::Wait(at) = w.poll(t0 + d) else {
        panic!("expected a backoff")
    };
    let d2 = at - (t0 + d);
    assert!(
        d2 >= Duration::from_millis(1500) && d2 < Duration::from_millis(2500),
        "{d2:?}"
    );
    assert_eq!(
        w.poll(at),
        WatchNext::Send(Request::List {
            limit: 2,
            continue_token: None
        })
    );
}

#[test]
fn http_410_on_watch_relists_and_list_errors_restart_the_list() {
    let t0 = Instant::now();
    let mut w: Watcher<Pod> = Watcher::new(cfg(), 1);
    w.on_list_page(ListPage {
        items: vec![pod("a", "1")],
        resource_version: "3".into(),
        continue_token: Some("c".into()),
        skipped: vec![],
    });
    // Expired continue token: the half-read list is thrown away.
    w.on_list_error(gone(), t0);
    assert_eq!(w.state(), &State::NeedList);
    let later = t0 + Duration::from_secs(60);
    let d = w.on_list_page(ListPage {
        items: vec![pod("b", "4")],
        resource_version: "4".into(),
        continue_token: None,
        skipped: vec![],
    });
    assert_eq!(d, Some(Delta::Replace(vec![pod("b", "4")])));
    w.on_watch_error(gone(), later);
    assert_eq!(w.state(), &State::NeedList);
}

#[test]
fn backoff_grows_to_max_and_resets_on_success() {
    let t0 = Instant::now();
    let mut w: Watcher<Pod> = Watcher::new(cfg(), 3);
    let mut last = Duration::ZERO;
    for _ in 0..6 {
        last = w.on_list_error(
            KubeError::NotFound {
                url: "u".into(),
                message: "m".into(),
            },
            t0,
        );
    }
    assert!(
        last <= Duration::from_secs(8) && last >= Duration::from_secs(6),
        "{last:?}"
    );
    w.on_list_page(ListPage {
        items: vec![],
        resource_version: "1".into(),
        continue_token: None,
        skipped: vec![],
    });
    assert_eq!(w.last_error(), None);
    let d = w.on_watch_error(
        KubeError::Transport {
            what: "w".into(),
            detail: "x".into(),
        },
        t0,
    );
    assert!(d < Duration::from_millis(1250), "backoff not reset: {d:?}");
}

/// A quiet resource: the server ends the watch at its timeout with no event (no bookmarks
/// either, with its watch cache off). That is not a failure: re-watch at once, backoff
/// reset. Before, every such watch counted as an error and the backoff grew to 30 s.
#[test]
fn a_quiet_watch_that_ends_after_its_timeout_is_rewatched_at_once() {
    let t0 = Instant::now();
    let mut w: Watcher<Pod> = Watcher::new(cfg(), 3);
    w.on_list_page(ListPage {
        items: vec![],
        resource_version: "1".into(),
        continue_token: None,
        skipped: vec![],
    });
    // A failure arms the backoff …
    w.on_watch_error(
        KubeError::Transport {
            what: "w".into(),
            detail: "x".into(),
        },
        t0,
    );
    let t1 = t0 + Duration::from_secs(10);
    for i in 0..5u32 {
        let opened = t1 + Duration::from_secs(300) * i;
        w.on_watch_opened(opened);
        let end = opened + Duration::from_secs(290);
        w.on_watch_end(end);
        assert!(
            matches!(w.poll(end), WatchNext::Send(Request::Watch { .. })),
            "{i}"
        );
        assert_eq!(w.last_error(), None);
    }
    // … and the next failure starts from the first step again: it was reset.
    let d = w.on_watch_error(
        KubeError::Transport {
            what: "w".into(),
            detail: "x".into(),
        },
        t1,
    );
    assert!(d < Duration::from_millis(1250), "{d:?}");
}

/// API Priority and Fairness answers 429 (or 503) with Retry-After: the wait is what it
/// asked (capped at 60 s), never shorter than our own backoff.
#[test]
fn retry_after_is_honoured_and_capped() {
    let t0 = Instant::now();
    let mut w: Watcher<Pod> = Watcher::new(cfg(), 3);
    let busy = |s: u64| {
        KubeError::from_status(
            429,
            "/api/v1/pods",
            "TooManyRequests".into(),
            "slow down".into(),
        )
        .with_retry_after(Some(s))
    };
    assert_eq!(w.on_list_error(busy(7), t0), Duration::from_secs(7));
    assert_eq!(w.poll(t0), WatchNext::Wait(t0 + Duration::from_secs(7)));
    assert_eq!(w.on_list_error(busy(3600), t0), RETRY_AFTER_MAX);
    assert_eq!(
        busy(7).to_string(),
        "API error 429 TooManyRequests: slow down (Retry-After 7s)"
    );
}

/// A LIST page that fails (not 410) resumes with the same continue token; only an expired
/// token (410) starts from the first page. Before, any error restarted the whole list.
#[test]
fn a_failed_list_page_resumes_with_its_continue_token() {
    let t0 = Instant::now();
    let mut w: Watcher<Pod> = Watcher::new(cfg(), 1);
    w.on_list_page(ListPage {
        items: vec![pod("a", "1")],
        resource_version: "3".into(),
        continue_token: Some("c1".into()),
        skipped: vec![],
    });
    w.on_list_error(
        KubeError::from_status(500, "/api/v1/pods", "InternalError".into(), "boom".into()),
        t0,
    );
    let later = t0 + Duration::from_secs(60);
    assert_eq!(
        w.poll(later),
        WatchNext::Send(Request::List {
            limit: 2,
            continue_token: Some("c1".into())
        })
    );
    let d = w.on_list_page(ListPage {
        items: vec![pod("b", "2")],
        resource_version: "3".into(),
        continue_token: None,
        skipped: vec![],
    });
    assert_eq!(d, Some(Delta::Replace(vec![pod("a", "1"), pod("b", "2")])));
}

/// One undecodable object in a watch: skipped (the stream goes on from its
/// resourceVersion); the same object failing again relists; lines without any identity
/// re-watch, and the third relists. In a LIST, a bad item is skipped and its key kept.
#[test]
fn undecodable_objects_are_skipped_then_relisted() {
    let t0 = Instant::now();
    let mut w: Watcher<Pod> = Watcher::new(cfg(), 1);
    w.on_list_page(ListPage {
        items: vec![],
        resource_version: "1".into(),
        continue_token: None,
        skipped: vec![],
    });
    let e = || KubeError::Decode {
        what: "Pod watch event".into(),
        detail: "bad".into(),
    };
    assert_eq!(
        w.on_bad_event(Some("ns/a"), Some("5"), e(), t0),
        BadEvent::Skipped
    );
    assert_eq!(w.state(), &State::Watching { rv: "5".into() });
    assert!(
        matches!(w.poll(t0), WatchNext::Send(_)),
        "no backoff for a skip"
    );
    assert_eq!(
        w.on_bad_event(Some("ns/b"), Some("6"), e(), t0),
        BadEvent::Skipped
    );
    assert_eq!(
        w.on_bad_event(Some("ns/a"), Some("7"), e(), t0),
        BadEvent::Relist
    );
    assert_eq!(w.state(), &State::NeedList);
    let line = br#"{"type":"MODIFIED","object":{"metadata":{"namespace":"ns","name":"a","resourceVersion":"9","labels":[1]}}}"#;
    assert!(decode_event::<Pod>(line).is_err());
    assert_eq!(
        bad_event_identity(line),
        Some(("ns/a".to_string(), "9".to_string()))
    );
    assert_eq!(bad_event_identity(b"not json"), None);
    // The list skips the bad item, names it, and keeps the rest.
    let page: ListPage<Pod> = decode_list(
        br#"{"metadata":{"resourceVersion":"12"},"items":[
            {"metadata":{"namespace":"ns","name":"a","resourceVersion":"5"}},
            {"metadata":{"namespace":"ns","name":"b","resourceVersion":"6","labels":[1]}}]}"#,
    )
    .unwrap();
    assert_eq!(page.items, vec![pod("a", "5")]);
    assert_eq!(page.skipped.len(), 1);
    assert_eq!(page.skipped[0].0, "ns/b");
    assert_eq!(
        w.on_list_page(page),
        Some(Delta::ReplaceKeeping(
            vec![pod("a", "5")],
            vec!["ns/b".into()]
        ))
    );
    // Without any identity: re-watch with backoff, the third time relist.
    assert_eq!(w.on_bad_event(None, None, e(), t0), BadEvent::Rewatch);
    assert_eq!(w.on_bad_event(None, None, e(), t0), BadEvent::Rewatch);
    assert_eq!(w.on_bad_event(None, None, e(), t0), BadEvent::Relist);
}

#[test]
fn empty_stream_end_backs_off() {
    let t0 = Instant::now();
    let mut w: Watcher<Pod> = Watcher::new(cfg(), 3);
    w.on_list_page(ListPage {
        items: vec![],
        resource_version: "1".into(),
        continue_token: None,
        skipped: vec![],
    });
    w.on_watch_opened(t0);
    w.on_watch_end(t0);
    assert!(matches!(w.poll(t0), WatchNext::Wait(_)));
}

#[test]
fn codec() {
    let page: ListPage<Pod> = decode_list(
        br#"{"kind":"PodList","metadata":{"resourceVersion":"12","continue":"abc"},
             "items":[{"metadata":{"namespace":"ns","name":"a","resourceVersion":"5"}}]}"#,
    )
    .unwrap();
    assert_eq!(
        page,
        ListPage {
            items: vec![pod("a", "5")],
            resource_version: "12".into(),
            continue_token: Some("abc".into()),
            skipped: vec![],
        }
    );
    assert!(decode_list::<Pod>(br#"{"items":[]}"#).is_err());

    let ev = decode_event::<Pod>(br#"{"type":"MODIFIED","object":{"metadata":{"namespace":"ns","name":"a","resourceVersion":"9"}}}"#);
    assert_eq!(ev, Ok(WatchEvent::Modified(pod("a", "9"))));
    let ev = decode_event::<Pod>(
        br#"{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"20"}}}"#,
    );
    assert_eq!(
        ev,
        Ok(WatchEvent::Bookmark {
            resource_version: "20".into()
        })
    );
    let ev = decode_event::<Pod>(
        br#"{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old resource version: 1 (5)"}}"#,
    );
    assert_eq!(
        ev,
        Ok(WatchEvent::Error(KubeError::Gone {
            message: "too old resource version: 1 (5)".into()
        }))
    );
    let ev = decode_event::<Pod>(
        br#"{"kind":"Status","code":500,"reason":"InternalError","message":"boom"}"#,
    );
    assert_eq!(
        ev,
        Ok(WatchEvent::Error(KubeError::Status {
            code: 500,
            reason: "InternalError".into(),
            message: "boom".into(),
            retry_after: None,
        }))
    );
    assert!(matches!(
        decode_event::<Pod>(b"garbage{"),
        Err(KubeError::Decode { .. })
    ));
    assert!(matches!(
        decode_event::<Pod>(br#"{"type":"WHAT","object":{}}"#),
        Err(KubeError::Decode { .. })
    ));
}

#[test]
fn request_queries() {
    assert_eq!(
        Request::Watch {
            resource_version: "7".into(),
            timeout_seconds: 290
        }
        .query(),
        vec![
            ("watch", "true".to_string()),
            ("allowWatchBookmarks", "true".to_string()),
            ("resourceVersion", "7".to_string()),
            ("timeoutSeconds", "290".to_string())
        ]
    );
    assert_eq!(
        Request::List {
            limit: 500,
            continue_token: Some("x".into())
        }
        .query(),
        vec![("limit", "500".to_string()), ("continue", "x".to_string())]
    );
}

/// A page is decoded straight into the wire type; the item-by-item `Value` read, kept for
/// pages with a bad item, must give the same answer whenever both can be used.
#[test]
fn list_fast_path_agrees_with_the_item_by_item_read() {
    // A Pod as the API server writes it: mostly fields tether never reads.
    let item = |name: &str, rv: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv, "uid": "u",
                "labels": {"app": "web"}, "annotations": {"a": "b"},
                "ownerReferences": [{"kind": "ReplicaSet", "name": "web", "controller": true}]},
            "spec": {"nodeName": "vm1", "containers": [{"name": "web", "ports": [{"containerPort": 8080}]}]},
            "status": {"phase": "Running", "podIP": "10.0.0.2",
                "conditions": [{"type": "Ready", "status": "True"}]}})
    };
    let page = |items: Vec<serde_json::Value>| {
        json!({"kind": "PodList", "metadata": {"resourceVersion": "12", "continue": "c"}, "items": items})
            .to_string()
    };
    let lenient = |body: &str| {
        let (meta, items, skipped) = decode_list_items::<Pod>(body.as_bytes()).unwrap();
        ListPage {
            items,
            resource_version: meta.resource_version,
            continue_token: meta.continue_token,
            skipped,
        }
    };
    let good = page(vec![item("a", "5"), item("b", "6")]);
    let fast: ListPage<Pod> = decode_list(good.as_bytes()).unwrap();
    assert_eq!(fast, lenient(&good));
    assert_eq!(fast.items.len(), 2);
    assert_eq!(fast.items[1].spec.node_name, "vm1");
    assert_eq!(fast.continue_token.as_deref(), Some("c"));

    // One bad item: the page falls back and names it.
    let mut bad = item("b", "6");
    bad["metadata"]["labels"] = json!([1]);
    let mixed = page(vec![item("a", "5"), bad]);
    let got: ListPage<Pod> = decode_list(mixed.as_bytes()).unwrap();
    assert_eq!(got, lenient(&mixed));
    assert_eq!(got.items.len(), 1);
    assert_eq!(got.skipped[0].0, "ns/b");

    // A duplicated key fails the typed read (serde_json refuses a duplicate field) but not
    // the `Value` one (the last wins): the fallback keeps the item, as before.
    let dup = good.replacen(r#""uid":"u""#, r#""uid":"u","uid":"v""#, 1);
    assert_ne!(dup, good);
    assert!(serde_json::from_slice::<ListWire<Pod>>(dup.as_bytes()).is_err());
    let got: ListPage<Pod> = decode_list(dup.as_bytes()).unwrap();
    assert_eq!(got.items.len(), 2);
    assert!(got.skipped.is_empty());

    // A broken envelope is the page's own error either way.
    assert!(matches!(
        decode_list::<Pod>(br#"{"metadata":{"resourceVersion":"1"},"items":{}}"#),
        Err(KubeError::Decode { .. })
    ));
}
