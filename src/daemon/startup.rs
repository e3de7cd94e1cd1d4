//! Start-up as a state machine: when `tether run` may report READY.
//!
//! ```text
//!   Listing { missing } ──(the last kind's first list is in: queue every key)──►
//!   Syncing { since, left } ──(every key's first sync since then has ended)──► Ready
//! ```
//!
//! `Listing`: the source is filling the stores; events are routed as always, but READY
//! must not come before every kind is in (the ExternalNode controller itself refuses to
//! read "not listed yet" as "deleted"). `Syncing`: every key was queued once; each key leaves `left` when a sync of it
//! that started after `since` ends, however it ended (a failing key is retried with
//! backoff, but it must not hold READY back forever). `Ready`: the daemon flushes the
//! deferred flows, sweeps orphaned ports, clears flow-restore-wait and notifies systemd —
//! once; events no longer change the state.

use std::collections::BTreeSet;
use std::time::Instant;

use crate::controller::Key;
use crate::controller::worker::Done;
use crate::k8s::Kind;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Startup {
    Listing { missing: BTreeSet<Kind> },
    Syncing { since: Instant, left: BTreeSet<Key> },
    Ready,
}

/// What the daemon must do after a transition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    Nothing,
    /// Every kind is listed: queue these keys (every key there is).
    QueueAll(BTreeSet<Key>),
    /// Every first sync ended: finish start-up.
    BecomeReady,
}

impl Startup {
    pub fn new(kinds: &[Kind]) -> Startup {
        Startup::Listing {
            missing: kinds.iter().copied().collect(),
        }
    }

    pub fn is_ready(&self) -> bool {
        *self == Startup::Ready
    }

    /// Whether some kind's first list is still missing.
    pub fn listing(&self) -> bool {
        matches!(self, Startup::Listing { .. })
    }

    /// `kind`'s first list is in; `keys` are every key there is once all are.
    pub fn listed(
        &mut self,
        kind: Kind,
        now: Instant,
        keys: impl FnOnce() -> BTreeSet<Key>,
    ) -> Next {
        let Startup::Listing { missing } = self else {
            return Next::Nothing;
        };
        missing.remove(&kind);
        if !missing.is_empty() {
            return Next::Nothing;
        }
        let left = keys();
        *self = Startup::Syncing {
            since: now,
            left: left.clone(),
        };
        Next::QueueAll(left)
    }

    /// A sync ended.
    pub fn synced(&mut self, done: &Done) -> Next {
        let Startup::Syncing { since, left } = self else {
            return Next::Nothing;
        };
        if done.started < *since || !left.remove(&done.key) || !left.is_empty() {
            return Next::Nothing;
        }
        *self = Startup::Ready;
        Next::BecomeReady
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::controller::worker::SyncEnd;

    fn done(key: Key, started: Instant) -> Done {
        Done {
            key,
            ended: SyncEnd::Synced,
            started,
        }
    }

    fn keys() -> BTreeSet<Key> {
        BTreeSet::from([Key::L2, Key::En, Key::Tc("a".into())])
    }

    #[test]
    fn ready_after_every_list_and_every_first_sync() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(1);
        let mut s = Startup::new(&Kind::ALL);
        for k in [Kind::Namespace, Kind::Pod, Kind::TrafficControl] {
            assert_eq!(s.listed(k, t0, keys), Next::Nothing);
            assert!(s.listing());
        }
        assert_eq!(
            s.listed(Kind::ExternalNode, t0, keys),
            Next::QueueAll(keys())
        );
        assert!(!s.listing());
        assert_eq!(s.synced(&done(Key::L2, t1)), Next::Nothing);
        // A retried key counts once its first sync ended, however it ended.
        let failed = Done {
            key: Key::Tc("a".into()),
            ended: SyncEnd::Retry,
            started: t1,
        };
        assert_eq!(s.synced(&failed), Next::Nothing);
        assert!(!s.is_ready());
        assert_eq!(s.synced(&done(Key::En, t1)), Next::BecomeReady);
        assert!(s.is_ready());
        // Ready is final.
        assert_eq!(s.synced(&done(Key::En, t1)), Next::Nothing);
        assert_eq!(s.listed(Kind::Pod, t1, keys), Next::Nothing);
    }

    #[test]
    fn a_sync_started_before_the_lists_does_not_count() {
        let t0 = Instant::now();
        let mut s = Startup::new(&[Kind::Pod]);
        let early = t0;
        let later = t0 + Duration::from_millis(5);
        assert_eq!(
            s.listed(Kind::Pod, later, || BTreeSet::from([Key::L2])),
            Next::QueueAll(BTreeSet::from([Key::L2]))
        );
        assert_eq!(s.synced(&done(Key::L2, early)), Next::Nothing);
        assert_eq!(s.synced(&done(Key::L2, later)), Next::BecomeReady);
    }

    #[test]
    fn a_kind_listed_twice_or_an_unknown_key_changes_nothing() {
        let t0 = Instant::now();
        let mut s = Startup::new(&[Kind::Pod, Kind::Namespace]);
        assert_eq!(s.listed(Kind::Pod, t0, keys), Next::Nothing);
        assert_eq!(s.listed(Kind::Pod, t0, keys), Next::Nothing);
        assert!(s.listing());
        assert_eq!(s.synced(&done(Key::L2, t0)), Next::Nothing);
        assert_eq!(s.listed(Kind::Namespace, t0, keys), Next::QueueAll(keys()));
        assert_eq!(s.synced(&done(Key::Tc("zz".into()), t0)), Next::Nothing);
    }
}
