//! No-flood (`OFPPC_NO_FLOOD`) on the ports that want it: a port bit only OpenFlow 1.0
//! has (docs/antrea-compat.md#no-flood-on-tc-ports), set with OF1.0 PORT_MODs that carry
//! the port's current hardware address (read over OF1.5). The set of ports that want it
//! has its own lock, held across the PORT_MODs: they never wait for a flow bundle, nor a
//! flow bundle for them. After a reconnect `replay` puts the whole set back; a connection
//! generation on which every port was already set is not repeated.

use std::collections::BTreeSet;
use std::sync::MutexGuard;
use std::sync::atomic::Ordering;

use super::OfError;
use super::consts::OFPPC10_NO_FLOOD;
use super::flowmod::{MultipartReplyBody, MultipartRequest, MultipartRequestBody};
use super::msg::{Body, PortMod10};
use super::shared::{Shared, first_error};

impl Shared {
    fn lock_no_flood(&self) -> MutexGuard<'_, BTreeSet<u32>> {
        self.no_flood.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn set_no_flood(&self, ofport: u32, on: bool) -> Result<(), OfError> {
        let mut no_flood = self.lock_no_flood();
        // Already set on this connection (a replay re-applies the whole set after a
        // reconnect): every PORT_MOD makes vswitchd re-examine the port, which at 5,000
        // ports costs it far more than the flows do. Clearing is always sent.
        if on && no_flood.contains(&ofport) {
            return Ok(());
        }
        let generation = self.of10.state().1;
        match self.port_mod_no_flood(ofport, on) {
            Ok(()) => {}
            // Clearing the bit of a port that is gone: nothing left to clear or replay.
            Err(OfError::PortNotFound { .. }) if !on => {}
            Err(e) => return Err(e),
        }
        if on {
            self.applied_no_flood(&no_flood, generation);
            no_flood.insert(ofport);
        } else {
            no_flood.remove(&ofport);
        }
        Ok(())
    }

    /// `set_no_flood(p, true)` for every port of `ofports` not yet set, in one batch
    /// (`Shared::port_mods_no_flood`); clearing goes port by port (a port already gone is
    /// no error then).
    pub(super) fn set_no_flood_many(&self, ofports: &[u32], on: bool) -> Result<(), OfError> {
        if !on {
            return ofports
                .iter()
                .try_for_each(|p| self.set_no_flood(*p, false));
        }
        let mut no_flood = self.lock_no_flood();
        let todo: Vec<u32> = ofports
            .iter()
            .copied()
            .filter(|p| !no_flood.contains(p))
            .collect::<BTreeSet<u32>>()
            .into_iter()
            .collect();
        let generation = self.of10.state().1;
        self.port_mods_no_flood(&todo, true)?;
        if !todo.is_empty() {
            self.applied_no_flood(&no_flood, generation);
        }
        no_flood.extend(todo);
        Ok(())
    }

    fn port_mod_no_flood(&self, ofport: u32, on: bool) -> Result<(), OfError> {
        self.port_mods_no_flood(&[ofport], on)
    }

    /// No-flood on every port of `ofports` in two round trips whatever their number: one
    /// OF1.5 request holding a port description per port, one OF1.0 batch of PORT_MODs.
    fn port_mods_no_flood(&self, ofports: &[u32], on: bool) -> Result<(), OfError> {
        let mut port_nos = Vec::with_capacity(ofports.len());
        for &ofport in ofports {
            let p = u16::try_from(ofport)
                .ok()
                .filter(|p| *p < 0xff00)
                .ok_or(OfError::PortNotFound { ofport })?;
            port_nos.push(p);
        }
        if ofports.is_empty() {
            return Ok(());
        }
        // OVS rejects a PORT_MOD whose hw_addr is not the port's (OFPPMFC_BAD_HW_ADDR),
        // and the address may have changed since the last look: ask each time. Ask over
        // OF1.5 for these ports only: an OF1.0 FEATURES_REPLY is capped at 64 KiB, so it
        // lists only the first ~1,360 ports of a big bridge.
        let reqs: Vec<Body> = ofports
            .iter()
            .map(|&port_no| {
                Body::MultipartRequest(MultipartRequest {
                    flags: 0,
                    body: MultipartRequestBody::PortDesc { port_no },
                })
            })
            .collect();
        let r = self.transact15(reqs, "port description")?;
        let mut hw = std::collections::BTreeMap::new();
        for (_, m) in r.replies {
            if let Body::MultipartReply(mp) = m.body {
                if let MultipartReplyBody::PortDesc(v) = mp.body {
                    hw.extend(v.into_iter().map(|p| (p.port_no, p.hw_addr)));
                }
            }
        }
        let mut mods = Vec::with_capacity(ofports.len());
        for (&ofport, port_no) in ofports.iter().zip(port_nos) {
            let hw_addr = *hw.get(&ofport).ok_or(OfError::PortNotFound { ofport })?;
            mods.push(Body::PortMod10(PortMod10 {
                port_no,
                hw_addr,
                config: if on { OFPPC10_NO_FLOOD } else { 0 },
                mask: OFPPC10_NO_FLOOD,
                advertise: 0,
            }));
        }
        self.counts.round_trips.fetch_add(1, Ordering::Relaxed);
        let r = self.of10.transact(mods, self.timeout)?;
        first_error(&r, |i| {
            format!(
                "OF1.0 port_mod no-flood={on} port={}",
                ofports.get(i).copied().unwrap_or_default()
            )
        })
    }

    /// Ports were just set on OF1.0 connection `generation` (read before the PORT_MODs
    /// went out, so never newer than the connection that carried them): if everything
    /// already in `set` was set on that connection too (or it is empty), the whole set now
    /// is.
    pub(super) fn applied_no_flood(&self, set: &BTreeSet<u32>, generation: u64) {
        if set.is_empty() || self.no_flood_gen.load(Ordering::SeqCst) == generation {
            self.no_flood_gen.store(generation, Ordering::SeqCst);
        }
    }

    /// Re-apply no-flood to every port that wants it: all in one batch, or (when the
    /// batch fails, say for a port gone meanwhile) one by one, returning the first error.
    pub(super) fn replay_no_flood(&self) -> Result<(), OfError> {
        let no_flood = self.lock_no_flood();
        let generation = self.of10.state().1;
        // Every port was set on this very connection (a connection event handled after
        // the controllers already used it): repeating the PORT_MODs would change nothing.
        if self.no_flood_gen.load(Ordering::SeqCst) == generation {
            return Ok(());
        }
        let all: Vec<u32> = no_flood.iter().copied().collect();
        let mut first = None;
        if self.port_mods_no_flood(&all, true).is_err() {
            for &p in &all {
                if let Err(e) = self.port_mod_no_flood(p, true) {
                    first.get_or_insert(e);
                }
            }
        }
        match first {
            None => {
                self.no_flood_gen.store(generation, Ordering::SeqCst);
                Ok(())
            }
            Some(e) => Err(e),
        }
    }
}
