//! The connection's two timing state machines, pure so tests drive them with their own
//! clock: [`Backoff`] between reconnect attempts and [`Keepalive`] (echo after silence,
//! give up after an unanswered echo). `conn` owns the socket and asks these what to do.

use std::time::{Duration, Instant};

/// Exponential backoff between connection attempts; pure, time is the caller's.
#[derive(Debug, Clone)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub fn new(min: Duration, max: Duration) -> Backoff {
        Backoff {
            min,
            max,
            next: min,
        }
    }

    /// The delay before the next attempt; doubles up to `max`.
    pub fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(self.max);
        d
    }

    pub fn reset(&mut self) {
        self.next = self.min;
    }
}

/// Echo keepalive; pure, `now` comes from the caller.
#[derive(Debug, Clone)]
pub struct Keepalive {
    interval: Duration,
    last_rx: Instant,
    probe_sent: Option<Instant>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepaliveAction {
    Nothing,
    SendEcho,
    Dead,
}

impl Keepalive {
    pub fn new(interval: Duration, now: Instant) -> Keepalive {
        Keepalive {
            interval,
            last_rx: now,
            probe_sent: None,
        }
    }

    /// Anything received proves the peer alive.
    pub fn received(&mut self, now: Instant) {
        self.last_rx = now;
        self.probe_sent = None;
    }

    /// When [`Keepalive::poll`] next has something to do: the owner sleeps until then
    /// (or until a message arrives) instead of ticking.
    pub fn next_due(&self) -> Instant {
        match self.probe_sent {
            Some(t) => t + self.interval,
            None => self.last_rx + self.interval,
        }
    }

    pub fn poll(&mut self, now: Instant) -> KeepaliveAction {
        match self.probe_sent {
            Some(t) if now.duration_since(t) >= self.interval => KeepaliveAction::Dead,
            Some(_) => KeepaliveAction::Nothing,
            None if now.duration_since(self.last_rx) >= self.interval => {
                self.probe_sent = Some(now);
                KeepaliveAction::SendEcho
            }
            None => KeepaliveAction::Nothing,
        }
    }
}
