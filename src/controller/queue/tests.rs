use super::*;

fn queue() -> (WorkQueue<String>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::default());
    (WorkQueue::new(QueueConfig::default(), clock.clone()), clock)
}

fn k(s: &str) -> String {
    s.to_string()
}

#[test]
fn dedups_and_keeps_order() {
    let (q, _) = queue();
    q.add(k("a"));
    q.add(k("b"));
    q.add(k("a"));
    assert_eq!(q.len(), 2);
    assert_eq!(q.try_get(), Some(k("a")));
    assert_eq!(q.try_get(), Some(k("b")));
    assert_eq!(q.try_get(), None);
}

#[test]
fn never_two_workers_on_one_key_and_rerun_when_added_in_flight() {
    let (q, _) = queue();
    q.add(k("a"));
    let held = q.try_get().unwrap();
    // Added twice while a worker holds it: not handed to a second worker...
    q.add(k("a"));
    q.add(k("a"));
    q.add(k("b"));
    assert_eq!(q.try_get(), Some(k("b")));
    assert_eq!(q.try_get(), None);
    // ...but handed out exactly once more after the first sync ends.
    q.done(held, Outcome::Success);
    assert_eq!(q.try_get(), Some(k("a")));
    q.done(k("a"), Outcome::Success);
    q.done(k("b"), Outcome::Success);
    assert_eq!(q.try_get(), None);
}

#[test]
fn failure_backoff_grows_to_300s_and_resets_on_success() {
    let (q, clock) = queue();
    let expected = [5u64, 10, 20, 40, 80, 160, 300, 300];
    q.add(k("a"));
    for (i, secs) in expected.iter().enumerate() {
        let key = q
            .try_get()
            .unwrap_or_else(|| panic!("round {i}: key not due"));
        let t0 = clock.now();
        q.done(key, Outcome::Failure);
        assert_eq!(q.failures(&k("a")), u32::try_from(i).unwrap() + 1);
        assert_eq!(q.due_at(&k("a")), Some(t0 + Duration::from_secs(*secs)));
        clock.advance(Duration::from_secs(secs - 1));
        assert_eq!(q.try_get(), None, "round {i}: due too early");
        clock.advance(Duration::from_secs(1));
    }
    let key = q.try_get().unwrap();
    q.done(key, Outcome::Success);
    assert_eq!(q.failures(&k("a")), 0);
    q.add(k("a"));
    let key = q.try_get().unwrap();
    let t0 = clock.now();
    q.done(key, Outcome::Failure);
    assert_eq!(
        q.due_at(&k("a")),
        Some(t0 + Duration::from_secs(5)),
        "backoff not reset"
    );
}

#[test]
fn add_during_failed_sync_runs_again_at_once() {
    let (q, _) = queue();
    q.add(k("a"));
    let key = q.try_get().unwrap();
    q.add(k("a"));
    q.done(key, Outcome::Failure);
    // New information arrived during the sync: run now, not after the backoff.
    assert_eq!(q.try_get(), Some(k("a")));
}

#[test]
fn add_after_keeps_the_earliest_deadline() {
    let (q, clock) = queue();
    q.add_after(k("a"), Duration::from_secs(30));
    q.add_after(k("a"), Duration::from_secs(10));
    q.add_after(k("a"), Duration::from_secs(20));
    assert_eq!(q.len(), 1);
    clock.advance(Duration::from_secs(10));
    assert_eq!(q.try_get(), Some(k("a")));
}

#[test]
fn shutdown_wakes_blocked_workers() {
    let q: Arc<WorkQueue<String>> = Arc::new(WorkQueue::new(
        QueueConfig::default(),
        Arc::new(SystemClock),
    ));
    let workers: Vec<_> = (0..3)
        .map(|i| {
            let q = Arc::clone(&q);
            std::thread::Builder::new()
                .name(format!("test-worker-{i}"))
                .spawn(move || q.get())
                .unwrap()
        })
        .collect();
    q.shutdown();
    for w in workers {
        assert_eq!(w.join().unwrap(), None);
    }
    q.add(k("a"));
    assert_eq!(q.try_get(), None);
    assert!(q.is_shutdown());
}

#[test]
fn blocking_get_hands_out_keys_across_threads_one_at_a_time() {
    let q: Arc<WorkQueue<u32>> = Arc::new(WorkQueue::new(
        QueueConfig::default(),
        Arc::new(SystemClock),
    ));
    let active = Arc::new(Mutex::new(HashSet::new()));
    let synced = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..4)
        .map(|i| {
            let (q, active, synced) = (Arc::clone(&q), Arc::clone(&active), Arc::clone(&synced));
            std::thread::Builder::new()
                .name(format!("test-worker-{i}"))
                .spawn(move || {
                    while let Some(key) = q.get() {
                        assert!(
                            active.lock().unwrap().insert(key),
                            "key {key} synced twice at once"
                        );
                        std::thread::yield_now();
                        active.lock().unwrap().remove(&key);
                        synced.fetch_add(1, Ordering::SeqCst);
                        q.done(key, Outcome::Success);
                    }
                })
                .unwrap()
        })
        .collect();
    for round in 0..200u32 {
        q.add(round % 5);
    }
    // Drain: once empty and nobody holds a key, every add has been served.
    while !(q.is_empty() && active.lock().unwrap().is_empty() && q.lock().processing.is_empty()) {
        std::thread::yield_now();
    }
    q.shutdown();
    for w in workers {
        w.join().unwrap();
    }
    assert!(synced.load(Ordering::SeqCst) >= 5);
}

#[test]
fn retry_now_releases_backed_off_keys_and_keeps_their_failure_counts() {
    let (q, clock) = queue();
    q.add(k("a"));
    q.add(k("b"));
    q.add(k("c"));
    let a = q.try_get().unwrap();
    let b = q.try_get().unwrap();
    q.done(a, Outcome::Failure);
    q.done(b, Outcome::Failure);
    assert_eq!(
        q.due_at(&k("a")),
        Some(clock.now() + Duration::from_secs(5))
    );
    // "c" is still ready, "a" and "b" wait 5 s.
    assert_eq!(q.retry_now(), 2);
    assert_eq!(q.due_at(&k("a")), None);
    let mut got = vec![
        q.try_get().unwrap(),
        q.try_get().unwrap(),
        q.try_get().unwrap(),
    ];
    got.sort();
    assert_eq!(got, vec![k("a"), k("b"), k("c")]);
    assert_eq!(q.try_get(), None);
    // The next failure backs off further (10 s), not from the start.
    q.done(k("a"), Outcome::Failure);
    assert_eq!(q.failures(&k("a")), 2);
    assert_eq!(
        q.due_at(&k("a")),
        Some(clock.now() + Duration::from_secs(10))
    );
    q.done(k("b"), Outcome::Success);
    q.done(k("c"), Outcome::Success);
    assert_eq!(q.retry_now(), 1);
    assert_eq!(q.retry_now(), 0);
}
