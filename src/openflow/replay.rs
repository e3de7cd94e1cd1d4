//! Putting the switch back after every (re)connect: a restarted ovs-vswitchd has
//! forgotten tether's flows and the no-flood bits. The `of-replay` thread re-installs every
//! owner's flows in one bundle (the flow-set lock held, so nothing changes meanwhile), then
//! re-applies no-flood (`noflood`), retrying with backoff until both succeed, and tells the
//! daemon each OF1.5 generation it has replayed (`OfFlows::reconnects`).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, select};

use super::OfError;
use super::conn::ConnEvent;
use super::liveness::Backoff;
use super::shared::Shared;

impl Shared {
    pub(super) fn replay_all(&self) -> Result<(), OfError> {
        self.replay_flows()?;
        self.replay_no_flood()
    }

    pub(super) fn replay_flows(&self) -> Result<(), OfError> {
        let mut st = self.lock_idle();
        if st.set.is_empty() {
            // Nothing of ours to put back: only this round's leftovers to delete, which
            // the next bundle does first.
            st.purge_round = true;
            log::info!(
                "openflow replayed flows=0 owners=0 (leftovers of this round go with the next bundle)"
            );
            return Ok(());
        }
        let mods = st.set.replay_mods();
        self.bundle_mods(mods)?;
        log::info!(
            "openflow replayed flows={} owners={}",
            st.set.len(),
            st.set.owners().count()
        );
        Ok(())
    }
}

/// Replays after every (re)connect, and retries with backoff until they succeed: after an
/// ovs-vswitchd restart the management socket answers before every port is back, so a
/// first no-flood attempt can find its port missing (and a flow replay can race a second
/// disconnect).
pub(super) fn replay_loop(sh: &Shared, stop: &Receiver<()>, reconnects: &Sender<u64>) {
    let mut flows_due: Option<u64> = None;
    let mut no_flood_due = false;
    let mut retry_at: Option<Instant> = None;
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
    let mut failures = 0u32;
    loop {
        let wait = retry_at.map_or(Duration::from_secs(3600), |t| {
            t.saturating_duration_since(Instant::now())
        });
        select! {
            recv(stop) -> _ => return,
            recv(sh.of15.events()) -> ev => match ev {
                Ok(ConnEvent::Connected { generation }) => {
                    flows_due = Some(generation);
                    no_flood_due = true;
                    retry_at = Some(Instant::now());
                    backoff.reset();
                }
                Ok(ConnEvent::Disconnected { .. }) => {}
                Err(_) => return,
            },
            recv(sh.of10.events()) -> ev => match ev {
                Ok(ConnEvent::Connected { .. }) => {
                    no_flood_due = true;
                    retry_at = Some(Instant::now());
                    backoff.reset();
                }
                Ok(ConnEvent::Disconnected { .. }) => {}
                Err(_) => return,
            },
            default(wait) => {}
        }
        if retry_at.is_none_or(|t| Instant::now() < t) {
            continue;
        }
        let mut failed = None;
        if let Some(generation) = flows_due {
            match sh.replay_flows() {
                Ok(()) => {
                    flows_due = None;
                    sh.replayed.store(generation, Ordering::SeqCst);
                    let _ = reconnects.try_send(generation);
                }
                Err(e) => failed = Some(format!("flows: {e}")),
            }
        }
        if no_flood_due && flows_due.is_none() {
            match sh.replay_no_flood() {
                Ok(()) => no_flood_due = false,
                Err(e) => failed = Some(format!("no-flood: {e}")),
            }
        }
        match failed {
            None => {
                failures = 0;
                retry_at = None;
            }
            Some(err) => {
                // Retries repeat themselves; say it once per streak, then quietly.
                if failures == 0 {
                    log::warn!("openflow replay failed, retrying err={err}");
                } else {
                    log::debug!("openflow replay retry failed attempt={failures} err={err}");
                }
                failures += 1;
                retry_at = Some(Instant::now() + backoff.next_delay());
            }
        }
    }
}
