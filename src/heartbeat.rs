//! Heartbeats of the long-lived threads, for systemd's watchdog: the daemon pings
//! `WATCHDOG=1` only while every registered thread has made progress within its own
//! deadline, so a stuck manifests poller, watch thread or worker gets the service
//! restarted instead of going unnoticed while the main loop keeps ticking. Owns only the
//! bookkeeping; who registers and when to ping is the daemon's business.
//!
//! A thread is *busy* while it works on something (a poll, a sync, a watch event) and
//! *idle* while it waits for work or on a socket with its own timeout; only a busy thread
//! can be stuck: one that has been busy, without a beat, for longer than its deadline.
//! Time is passed in (`now`), so the rules are tested without sleeping.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug)]
struct Beat {
    last: Instant,
    busy: bool,
    deadline: Duration,
}

/// The registry: one entry per thread name.
#[derive(Debug, Default)]
pub struct Heartbeats {
    beats: Mutex<BTreeMap<String, Beat>>,
}

/// A registered thread's handle (one per thread; dropping it marks the thread idle).
#[derive(Debug)]
pub struct Pulse {
    hb: Arc<Heartbeats>,
    name: String,
    #[cfg(feature = "test-hooks")]
    started: Instant,
}

impl Heartbeats {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Beat>> {
        self.beats.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Register thread `name` (idle) with its deadline for one busy stretch.
    pub fn register(self: &Arc<Self>, name: &str, deadline: Duration, now: Instant) -> Pulse {
        self.lock().insert(
            name.to_string(),
            Beat {
                last: now,
                busy: false,
                deadline,
            },
        );
        Pulse {
            hb: Arc::clone(self),
            name: name.to_string(),
            #[cfg(feature = "test-hooks")]
            started: now,
        }
    }

    /// Threads busy without a beat for longer than their deadline: (name, how long).
    pub fn stuck(&self, now: Instant) -> Vec<(String, Duration)> {
        self.lock()
            .iter()
            .filter_map(|(n, b)| {
                let age = now.saturating_duration_since(b.last);
                (b.busy && age > b.deadline).then(|| (n.clone(), age))
            })
            .collect()
    }

    fn set(&self, name: &str, busy: bool, now: Instant) {
        if let Some(b) = self.lock().get_mut(name) {
            b.last = now;
            b.busy = busy;
        }
    }

    /// Forget a thread (it ended).
    pub fn remove(&self, name: &str) {
        self.lock().remove(name);
    }
}

/// Test-only: `TETHER_TEST_HANG=<thread name>` makes that thread hang for good at the first
/// busy stretch it starts at least 10 s after it registered (after READY), as a deadlock
/// would: what the watchdog must notice. Compiled into test builds only.
#[cfg(feature = "test-hooks")]
pub const HANG_ENV: &str = "TETHER_TEST_HANG";

impl Pulse {
    /// Starting work: busy from now.
    pub fn busy(&self) {
        self.hb.set(&self.name, true, Instant::now());
        #[cfg(feature = "test-hooks")]
        if std::env::var(HANG_ENV).is_ok_and(|t| t == self.name)
            && self.started.elapsed() >= Duration::from_secs(10)
        {
            log::warn!("thread {} hangs on purpose ({HANG_ENV})", self.name);
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
    }

    /// Progress within a busy stretch.
    pub fn beat(&self) {
        self.hb.set(&self.name, true, Instant::now());
    }

    /// Waiting for work (or on a socket with its own timeout): cannot be stuck.
    pub fn idle(&self) {
        self.hb.set(&self.name, false, Instant::now());
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Pulse {
    fn drop(&mut self) {
        // Its thread ended: gone, not stuck.
        self.hb.set(&self.name, false, Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_busy_threads_past_their_deadline_are_stuck() {
        let hb = Arc::new(Heartbeats::default());
        let t0 = Instant::now();
        let a = hb.register("manifests", Duration::from_secs(60), t0);
        let _b = hb.register("sync-worker-0", Duration::from_secs(120), t0);
        // Idle for an hour: fine.
        assert!(hb.stuck(t0 + Duration::from_secs(3600)).is_empty());
        hb.set("manifests", true, t0);
        assert!(hb.stuck(t0 + Duration::from_secs(60)).is_empty());
        assert_eq!(
            hb.stuck(t0 + Duration::from_secs(61)),
            vec![("manifests".to_string(), Duration::from_secs(61))]
        );
        // A beat moves the deadline; idle clears it.
        hb.set("manifests", true, t0 + Duration::from_secs(50));
        assert!(hb.stuck(t0 + Duration::from_secs(100)).is_empty());
        a.idle();
        assert!(
            hb.stuck(Instant::now() + Duration::from_secs(1000))
                .is_empty()
        );
        hb.set("sync-worker-0", true, t0);
        assert_eq!(hb.stuck(t0 + Duration::from_secs(121)).len(), 1);
        hb.remove("sync-worker-0");
        assert!(hb.stuck(t0 + Duration::from_secs(1000)).is_empty());
    }
}
