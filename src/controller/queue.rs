//! The controllers' work queue (docs/design.md#threads; backoff values: docs/antrea-compat.md#timers-and-retries), with client-go workqueue semantics: keys, not
//! events, are queued (level-triggered: `sync(key)` reads current state); a key is queued
//! at most once; a key is never handed to two workers at once; a key added while a worker
//! syncs it is handed out again after that worker calls [`WorkQueue::done`]; a failed key
//! comes back after a per-key exponential backoff (5 s → 300 s, Antrea's
//! `ItemExponentialFailureRateLimiter`), reset by a success. Owns only that bookkeeping;
//! what a sync does is the controller's business.
//!
//! Mutex + Condvar. Time comes from an injected [`Clock`], so tests drive backoff with a
//! [`ManualClock`] and [`WorkQueue::try_get`] and never sleep. Costs: `add`, `get`, `done`
//! are O(1) plus O(d) for promoting d delayed keys (kept in a map keyed by key, so d is at
//! most the number of distinct failing keys).

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A source of monotonic time.
pub trait Clock: Send + Sync {
    fn now(&self) -> Instant;
}

/// The real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that only moves when told to (tests).
#[derive(Debug)]
pub struct ManualClock {
    start: Instant,
    offset_ms: AtomicU64,
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock {
            start: Instant::now(),
            offset_ms: AtomicU64::new(0),
        }
    }
}

impl ManualClock {
    pub fn advance(&self, d: Duration) {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        self.offset_ms.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.start + Duration::from_millis(self.offset_ms.load(Ordering::SeqCst))
    }
}

/// Per-key failure backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueConfig {
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for QueueConfig {
    fn default() -> Self {
        // Antrea's controllers: workqueue.NewItemExponentialFailureRateLimiter(5s, 300s).
        QueueConfig {
            base_delay: Duration::from_secs(5),
            max_delay: Duration::from_secs(300),
        }
    }
}

/// How a sync ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    Failure,
}

struct State<K> {
    /// Keys ready to hand out, in order.
    ready: VecDeque<K>,
    /// Keys that need a sync (queued, or added while in flight).
    dirty: HashSet<K>,
    /// Keys a worker holds.
    processing: HashSet<K>,
    /// Keys waiting out a backoff, with the earliest time they may run.
    delayed: HashMap<K, Instant>,
    /// Consecutive failures per key.
    failures: HashMap<K, u32>,
    shutdown: bool,
}

/// A deduplicating, per-key serialized work queue with backoff.
pub struct WorkQueue<K> {
    state: Mutex<State<K>>,
    cv: Condvar,
    clock: Arc<dyn Clock>,
    cfg: QueueConfig,
}

impl<K: Clone + Eq + Hash + Send> WorkQueue<K> {
    pub fn new(cfg: QueueConfig, clock: Arc<dyn Clock>) -> WorkQueue<K> {
        WorkQueue {
            state: Mutex::new(State {
                ready: VecDeque::new(),
                dirty: HashSet::new(),
                processing: HashSet::new(),
                delayed: HashMap::new(),
                failures: HashMap::new(),
                shutdown: false,
            }),
            cv: Condvar::new(),
            clock,
            cfg,
        }
    }

    // The state stays consistent across a panicking holder (every method restores the
    // invariants before it can panic), so a poisoned lock is still usable.
    fn lock(&self) -> MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn add_locked(st: &mut State<K>, key: K) -> bool {
        if st.shutdown || st.dirty.contains(&key) {
            return false;
        }
        st.dirty.insert(key.clone());
        if st.processing.contains(&key) {
            // Re-queued by `done`.
            return false;
        }
        st.ready.push_back(key);
        true
    }

    /// Ask for `key` to be synced (now).
    pub fn add(&self, key: K) {
        let mut st = self.lock();
        if Self::add_locked(&mut st, key) {
            self.cv.notify_one();
        }
    }

    /// Ask for `key` to be synced after `delay` (the earliest request wins).
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            return self.add(key);
        }
        let at = self.clock.now() + delay;
        let mut st = self.lock();
        if st.shutdown {
            return;
        }
        let e = st.delayed.entry(key).or_insert(at);
        if at < *e {
            *e = at;
        }
        // A waiting worker must recompute its deadline.
        self.cv.notify_all();
    }

    /// Move due delayed keys to `ready`; returns the next deadline, if any.
    fn promote(&self, st: &mut State<K>) -> Option<Instant> {
        let now = self.clock.now();
        let due: Vec<K> = st
            .delayed
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for k in due {
            st.delayed.remove(&k);
            Self::add_locked(st, k);
        }
        st.delayed.values().min().copied()
    }

    fn take(st: &mut State<K>) -> Option<K> {
        let key = st.ready.pop_front()?;
        st.dirty.remove(&key);
        st.processing.insert(key.clone());
        Some(key)
    }

    /// The next key without blocking; `None` when nothing is due (or at shutdown).
    pub fn try_get(&self) -> Option<K> {
        let mut st = self.lock();
        if st.shutdown {
            return None;
        }
        self.promote(&mut st);
        Self::take(&mut st)
    }

    /// Block until a key is due; `None` once the queue is shut down. The caller must call
    /// [`WorkQueue::done`] with the key when its sync ends.
    pub fn get(&self) -> Option<K> {
        let mut st = self.lock();
        loop {
            if st.shutdown {
                return None;
            }
            let next = self.promote(&mut st);
            if let Some(k) = Self::take(&mut st) {
                return Some(k);
            }
            st = match next {
                Some(at) => {
                    let wait = at.saturating_duration_since(self.clock.now());
                    self.cv
                        .wait_timeout(st, wait)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
                None => self.cv.wait(st).unwrap_or_else(|e| e.into_inner()),
            };
        }
    }

    /// The sync of `key` ended. Success forgets its failures; failure re-queues it after
    /// its backoff. Either way a key added during the sync is handed out again now.
    pub fn done(&self, key: K, outcome: Outcome) {
        let mut st = self.lock();
        st.processing.remove(&key);
        let mut delay = None;
        match outcome {
            Outcome::Success => {
                st.failures.remove(&key);
            }
            Outcome::Failure => {
                let n = st.failures.entry(key.clone()).or_insert(0);
                delay = Some(self.backoff(*n));
                *n = n.saturating_add(1);
            }
        }
        if st.dirty.contains(&key) && !st.shutdown {
            st.ready.push_back(key.clone());
            self.cv.notify_one();
        }
        drop(st);
        if let Some(d) = delay {
            self.add_after(key, d);
        }
    }

    /// Hand out every key waiting out a backoff now, e.g. when the connection whose loss
    /// made them fail is back. Failure counts are kept, so a key that fails again backs off
    /// further. Returns how many keys were released.
    pub fn retry_now(&self) -> usize {
        let mut st = self.lock();
        if st.shutdown {
            return 0;
        }
        let keys: Vec<K> = st.delayed.drain().map(|(k, _)| k).collect();
        let n = keys.len();
        for k in keys {
            Self::add_locked(&mut st, k);
        }
        if n > 0 {
            self.cv.notify_all();
        }
        n
    }

    /// `base · 2ⁿ` capped at `max` for the (n+1)-th consecutive failure.
    fn backoff(&self, failures: u32) -> Duration {
        self.cfg
            .base_delay
            .saturating_mul(1u32 << failures.min(30))
            .min(self.cfg.max_delay)
    }

    /// Consecutive failures of `key` so far.
    pub fn failures(&self, key: &K) -> u32 {
        self.lock().failures.get(key).copied().unwrap_or(0)
    }

    /// When `key` is next due after a backoff, if it is waiting for one.
    pub fn due_at(&self, key: &K) -> Option<Instant> {
        self.lock().delayed.get(key).copied()
    }

    /// Keys queued or waiting (not counting those being synced).
    pub fn len(&self) -> usize {
        let st = self.lock();
        st.ready.len() + st.delayed.keys().filter(|k| !st.dirty.contains(*k)).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stop: every blocked and future `get` returns `None`; adds are ignored.
    pub fn shutdown(&self) {
        let mut st = self.lock();
        st.shutdown = true;
        st.ready.clear();
        st.delayed.clear();
        self.cv.notify_all();
    }

    pub fn is_shutdown(&self) -> bool {
        self.lock().shutdown
    }
}

#[cfg(test)]
mod tests;
