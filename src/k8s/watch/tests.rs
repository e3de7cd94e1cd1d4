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
        Step::Send(Request::List {
            limit: 2,
            continue_token: None
        })
    );
    let d = w.on_list_page(ListPage {
        items: vec![pod("a", "5"), pod("b", "6")],
        resource_version: "10".into(),
        continue_token: Some("c1".into()),
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
        Step::Send(Request::List {
            limit: 2,
            continue_token: Some("c1".into())
        })
    );
    let d = w.on_list_page(ListPage {
        items: vec![pod("c", "7")],
        resource_version: "10".into(),
        continue_token: None,
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
        Step::Send(Request::Watch {
            resource_version: rv.into(),
            timeout_seconds: 290,
        })
    };
    assert_eq!(w.poll(t0), watch("10"));

    w.on_watch_opened();
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
    w.on_watch_opened();
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
    assert_eq!(w.poll(t0), Step::Wait(t0 + d));
    assert_eq!(w.poll(t0 + d), watch("16"));

    // ERROR 410 in the stream → relist after the (grown) backoff.
    w.on_watch_opened();
    let e = w.on_watch_event(WatchEvent::Error(gone()), t0 + d);
    assert_eq!(e, Err(gone()));
    assert_eq!(w.state(), &State::NeedList);
    assert_eq!(w.last_error(), Some(&gone()));
    let Step::Wait(at) = w.poll(t0 + d) else {
        panic!("expected a backoff")
    };
    let d2 = at - (t0 + d);
    assert!(
        d2 >= Duration::from_millis(1500) && d2 < Duration::from_millis(2500),
        "{d2:?}"
    );
    assert_eq!(
        w.poll(at),
        Step::Send(Request::List {
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
    });
    // Expired continue token: the half-read list is thrown away.
    w.on_list_error(gone(), t0);
    assert_eq!(w.state(), &State::NeedList);
    let later = t0 + Duration::from_secs(60);
    let d = w.on_list_page(ListPage {
        items: vec![pod("b", "4")],
        resource_version: "4".into(),
        continue_token: None,
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

#[test]
fn empty_stream_end_backs_off() {
    let t0 = Instant::now();
    let mut w: Watcher<Pod> = Watcher::new(cfg(), 3);
    w.on_list_page(ListPage {
        items: vec![],
        resource_version: "1".into(),
        continue_token: None,
    });
    w.on_watch_opened();
    w.on_watch_end(t0);
    assert!(matches!(w.poll(t0), Step::Wait(_)));
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
            continue_token: Some("abc".into())
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
            message: "boom".into()
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
