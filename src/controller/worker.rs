//! The sync workers: each takes a key off the shared queue, runs the key's controller,
//! turns the result into a [`SyncEnd`] (logging a permanent error once while it stays the
//! same), tells the queue whether to retry, and reports the sync as a [`Done`] to whoever
//! listens (the daemon's start-up and its flow-restore-wait handling).

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crossbeam_channel::Sender;

use super::externalnode::EnController;
use super::l2::L2Controller;
use super::queue::{Outcome, WorkQueue};
use super::trafficcontrol::TcController;
use super::{Bridge, Key};
use crate::heartbeat::Pulse;
use crate::metrics::Metrics;

/// How one sync ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncEnd {
    Synced,
    /// Failed; the queue retries it with backoff.
    Retry,
    /// Failed in a way only a change of the object can fix: not retried.
    Skipped,
}

/// One finished sync.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Done {
    pub key: Key,
    pub ended: SyncEnd,
    pub started: Instant,
}

/// One controller per kind of key (the bridge's key goes to the bridge itself).
pub struct Controllers {
    pub tc: Arc<TcController>,
    pub en: Arc<EnController>,
    pub l2: L2Controller,
    pub bridge: Arc<dyn Bridge>,
}

/// What the sync workers share.
pub struct Workers {
    queue: Arc<WorkQueue<Key>>,
    controllers: Controllers,
    metrics: Arc<Metrics>,
    done: Sender<Done>,
    /// The permanent error last logged per object (`tc=<name>`, `externalnode`), so
    /// re-syncs of an unchanged invalid object (after a reconnect, say) do not log it again.
    reported: Mutex<HashMap<String, String>>,
}

impl Workers {
    pub fn new(
        queue: Arc<WorkQueue<Key>>,
        controllers: Controllers,
        metrics: Arc<Metrics>,
        done: Sender<Done>,
    ) -> Workers {
        Workers {
            queue,
            controllers,
            metrics,
            done,
            reported: Mutex::new(HashMap::new()),
        }
    }

    /// One worker's loop, until the queue shuts down.
    pub fn run(&self, pulse: &Pulse) {
        loop {
            pulse.idle();
            let Some(key) = self.queue.get() else { break };
            pulse.busy();
            let started = Instant::now();
            let ended = self.sync(&key);
            // The ExternalNode may ask to be looked at again by itself: after a put-back of
            // its host port's configuration, what else changes it comes with no event.
            let again = match key {
                Key::En => self.controllers.en.recheck_after(),
                _ => None,
            };
            self.finish(key, ended, started);
            if let Some(d) = again {
                self.queue.add_after(Key::En, d);
            }
        }
    }

    fn sync(&self, key: &Key) -> SyncEnd {
        let c = &self.controllers;
        match key {
            Key::Tc(name) => {
                let r = c.tc.sync(name);
                let permanent = r.as_ref().is_err_and(|e| e.is_permanent());
                self.report(&format!("tc={name}"), r, permanent)
            }
            Key::En => {
                let r = c.en.sync();
                let permanent = r.as_ref().is_err_and(|e| e.is_permanent());
                self.report("externalnode", r, permanent)
            }
            Key::L2 => self.report("l2 forwarding flows", c.l2.sync(), false),
            Key::Bridge => {
                let r = c.bridge.ensure_bridge().map(|made| {
                    if made {
                        self.metrics
                            .bridge_recreations
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        log::warn!(
                            "the bridge was gone (deleted outside tether, or OVS's database came back without it): created it again with tether's settings"
                        );
                    }
                });
                self.report("bridge", r, false)
            }
        }
    }

    fn finish(&self, key: Key, ended: SyncEnd, started: Instant) {
        self.metrics
            .record_sync(key.kind(), ended == SyncEnd::Synced, started.elapsed());
        let outcome = match ended {
            SyncEnd::Retry => Outcome::Failure,
            SyncEnd::Synced | SyncEnd::Skipped => Outcome::Success,
        };
        self.queue.done(key.clone(), outcome);
        // Nobody listening (stopping): nothing to tell.
        let _ = self.done.send(Done {
            key,
            ended,
            started,
        });
    }

    /// Log a sync's result. A permanent error is logged once while it stays the same.
    fn report<E: Display>(&self, who: &str, result: Result<(), E>, permanent: bool) -> SyncEnd {
        let mut reported = self.reported.lock().unwrap_or_else(|e| e.into_inner());
        match result {
            Ok(()) => {
                reported.remove(who);
                SyncEnd::Synced
            }
            Err(e) if permanent => {
                let text = e.to_string();
                if reported.get(who) == Some(&text) {
                    log::debug!("{who} still skipped: {text}");
                } else {
                    log::warn!("{who} skipped until the object changes: {text}");
                    reported.insert(who.to_string(), text);
                }
                SyncEnd::Skipped
            }
            Err(e) => {
                reported.remove(who);
                log::warn!("{who} sync failed (retrying with backoff): {e}");
                SyncEnd::Retry
            }
        }
    }
}
