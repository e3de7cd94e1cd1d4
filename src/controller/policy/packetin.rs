//! The Reject answers (docs/networkpolicy.md#reject): a Reject rule's metric flow sends
//! the denied packet to tether (`controller(userdata=01.<dir>.<id>)`, an
//! `NXT_PACKET_IN2`) and drops it; this thread (`np-packetin`) builds the answer
//! (`pipeline::policy::reject`: a TCP RST|ACK, an ICMP or ICMPv6 unreachable) and sends it
//! back as a `PACKET_OUT` from `in_port=CONTROLLER` straight out of one port of the pair:
//! - an ingress reject (remote → VM was refused) answers the remote: out the uplink;
//! - an egress reject (VM → remote) answers the VM: out the host port.
//!
//! Antrea sends the answer through its pipeline instead (an ingress answer from the host
//! port resubmitted to L2ForwardingCalc, reference Part B §2.4); here the pair is two
//! ports wired back to back, so the answer's port is known and the pipeline, whose
//! policy tables would judge the answer as a new packet, is skipped.
//!
//! Answers are rate-limited in userspace ([`Bucket`]: [`RATE`] a second, bursts of
//! [`BURST`]), before the packet is even parsed, so a flood of rejected packets costs a
//! decode and a counter each. What happened is counted ([`Counts`]).
//!
//! A logged rule's packet-ins (`controller(userdata=02.<dir>.<id>)`, `enableLogging`)
//! come here too and become audit lines ([`audit`]), under a rate limit of their own.
//!
//! Owns the answering and the audit lines. Not the flows (the compiler), not the
//! connection: the switch is behind [`PacketIo`], which the daemon implements on its own
//! OpenFlow connection (asking for packet-ins after every connect).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, TryRecvError};

use super::PortsFn;
use crate::controlplane::Direction;
use crate::heartbeat::Pulse;
use crate::openflow::Action;
use crate::openflow::consts::port;
use crate::openflow::packet::{PacketIn2, PacketOut};
use crate::pipeline::policy::reject::{self, Kind};
use crate::pipeline::policy::{decode_log_userdata, decode_reject_userdata};

pub mod audit;

use audit::{Dedup, LoggedRule};

/// The logged rule behind a conjunction id (the policy controller's view).
pub type RulesFn = Box<dyn Fn(u32) -> Option<LoggedRule> + Send + Sync>;

/// Answers a second, and the burst the bucket holds.
pub const RATE: u32 = 200;
pub const BURST: u32 = 400;
/// How long one wait for a packet-in lasts (so a stop is noticed).
const TICK: Duration = Duration::from_millis(250);
/// Packet-ins answered in one batch of packet-outs.
const BATCH: usize = 64;
/// At most one warning about drops or errors this often.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// The switch as this thread sees it.
pub trait PacketIo: Send {
    /// The next packet-in within `timeout`; `Ok(None)` when none came (or the message
    /// was something else). An error is the connection's: it reconnects by itself.
    fn recv(&mut self, timeout: Duration) -> Result<Option<PacketIn2>, String>;
    /// Send these packet-outs (one round trip).
    fn send(&mut self, outs: Vec<PacketOut>) -> Result<(), String>;
}

/// A token bucket: `rate` tokens a second, at most `burst` saved up. Time is passed in.
#[derive(Clone, Debug)]
pub struct Bucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    /// Full at `now`.
    pub fn new(rate: u32, burst: u32, now: Instant) -> Bucket {
        Bucket {
            rate: f64::from(rate),
            burst: f64::from(burst),
            tokens: f64::from(burst),
            last: now,
        }
    }

    /// Take one token if there is one.
    pub fn take(&mut self, now: Instant) -> bool {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + dt * self.rate).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// What became of the packet-ins.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Reject packet-ins received.
    pub rejects: u64,
    /// Answers handed to the switch, by kind.
    pub tcp_resets: u64,
    pub icmp: u64,
    pub icmpv6: u64,
    /// Not answered: over the rate limit.
    pub rate_limited: u64,
    /// Not answered: the packet must not be answered or did not parse
    /// (`reject::NoAnswer`), or it came without its bytes.
    pub not_answerable: u64,
    /// Not answered: the pair's ports are not known right now.
    pub no_ports: u64,
    /// Answers the switch did not take (the batch's send failed).
    pub send_errors: u64,
    /// Audit lines of logged rules' packets, and those over the rate limit or whose
    /// rule or packet could not be read.
    pub logged: u64,
    pub log_rate_limited: u64,
    pub log_unknown: u64,
    /// Packet-ins that were neither (another userdata).
    pub other: u64,
}

impl Counts {
    fn answered(&self) -> u64 {
        self.tcp_resets + self.icmp + self.icmpv6
    }
}

/// The Reject answerer and audit logger: the handlers, their rate limits, the audit
/// lines' de-duplication and the counts.
pub struct Answerer {
    ports: PortsFn,
    rules: RulesFn,
    bucket: Mutex<Bucket>,
    log_bucket: Mutex<Bucket>,
    dedup: Mutex<Dedup>,
    counts: Arc<Mutex<Counts>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Answerer {
    /// Answers and audit lines are limited to `rate` a second each, in bursts of `burst`.
    pub fn new(ports: PortsFn, rules: RulesFn, rate: u32, burst: u32, now: Instant) -> Answerer {
        Answerer {
            ports,
            rules,
            bucket: Mutex::new(Bucket::new(rate, burst, now)),
            log_bucket: Mutex::new(Bucket::new(rate, burst, now)),
            dedup: Mutex::default(),
            counts: Arc::default(),
        }
    }

    /// The counts, shared (for status and logs).
    pub fn counts(&self) -> Arc<Mutex<Counts>> {
        self.counts.clone()
    }

    /// The answer to one packet-in, if it gets one (a logged rule's packet-in gets an
    /// audit line instead).
    pub fn handle(&self, pin: &PacketIn2, now: Instant) -> Option<PacketOut> {
        let userdata = pin.userdata().unwrap_or_default();
        if let Some((direction, conj_id)) = decode_log_userdata(userdata) {
            self.audit(pin, direction, conj_id, now);
            return None;
        }
        let mut counts = lock(&self.counts);
        let Some((direction, conj_id)) = decode_reject_userdata(userdata) else {
            counts.other += 1;
            return None;
        };
        counts.rejects += 1;
        if !lock(&self.bucket).take(now) {
            counts.rate_limited += 1;
            return None;
        }
        let Some(ports) = (self.ports)() else {
            counts.no_ports += 1;
            return None;
        };
        let answer = pin
            .packet()
            .ok_or(reject::NoAnswer::Malformed("packet-in without a packet"))
            .and_then(|b| reject::answer(&reject::parse(b)?));
        let (kind, frame) = match answer {
            Ok(a) => a,
            Err(why) => {
                counts.not_answerable += 1;
                log::debug!("networkpolicy reject: rule={conj_id} no answer: {why}");
                return None;
            }
        };
        match kind {
            Kind::TcpReset => counts.tcp_resets += 1,
            Kind::Icmp => counts.icmp += 1,
            Kind::Icmpv6 => counts.icmpv6 += 1,
        }
        let out = match direction {
            Direction::In => ports.uplink,
            Direction::Out => ports.host,
        };
        log::debug!(
            "networkpolicy reject: rule={conj_id} direction={direction:?} answer={kind:?} port={out}"
        );
        Some(PacketOut::new(
            port::CONTROLLER,
            vec![Action::output(out)],
            frame,
        ))
    }

    /// Put a logged packet's line in the log (Allow) or in its de-duplication window.
    fn audit(&self, pin: &PacketIn2, direction: Direction, conj_id: u32, now: Instant) {
        if !lock(&self.log_bucket).take(now) {
            lock(&self.counts).log_rate_limited += 1;
            return;
        }
        let rule = (self.rules)(conj_id);
        let packet = pin.packet().map(reject::parse);
        let (Some(rule), Some(Ok(packet))) = (rule, packet) else {
            lock(&self.counts).log_unknown += 1;
            log::debug!("networkpolicy audit: rule={conj_id} unknown rule or unreadable packet");
            return;
        };
        lock(&self.counts).logged += 1;
        let line = audit::line(&rule, direction, &packet);
        let allow = rule.disposition == "Allow";
        if let Some(l) = lock(&self.dedup).add(line, allow, now) {
            log::info!(target: audit::TARGET, "{l}");
        }
    }

    /// Write the audit lines whose window has ended by `now`.
    pub fn flush(&self, now: Instant) {
        for l in lock(&self.dedup).due(now) {
            log::info!(target: audit::TARGET, "{l}");
        }
    }

    /// The thread's loop: packet-ins answered in batches, until `stop` closes.
    pub fn run(&self, io: &mut dyn PacketIo, stop: &Receiver<()>, pulse: &Pulse) {
        let mut warned: Option<Instant> = None;
        let mut seen = Counts::default();
        loop {
            pulse.idle();
            self.flush(Instant::now());
            if !matches!(stop.try_recv(), Err(TryRecvError::Empty)) {
                // What is still held is written now rather than lost.
                self.flush(Instant::now() + audit::WINDOW);
                return;
            }
            let first = match io.recv(TICK) {
                Ok(Some(p)) => p,
                Ok(None) => continue,
                Err(e) => {
                    if warned.is_none_or(|w| w.elapsed() >= WARN_EVERY) {
                        log::warn!("networkpolicy reject: packet-ins: {e}");
                        warned = Some(Instant::now());
                    }
                    continue;
                }
            };
            pulse.busy();
            let mut batch = vec![first];
            while batch.len() < BATCH {
                match io.recv(Duration::ZERO) {
                    Ok(Some(p)) => batch.push(p),
                    _ => break,
                }
            }
            let now = Instant::now();
            let outs: Vec<PacketOut> = batch.iter().filter_map(|p| self.handle(p, now)).collect();
            if !outs.is_empty() {
                let n = outs.len() as u64;
                if let Err(e) = io.send(outs) {
                    lock(&self.counts).send_errors += n;
                    log::debug!("networkpolicy reject: sending {n} answers: {e}");
                }
            }
            let c = lock(&self.counts).clone();
            let dropped = c.rate_limited + c.send_errors;
            if dropped > seen.rate_limited + seen.send_errors
                && warned.is_none_or(|w| w.elapsed() >= WARN_EVERY)
            {
                log::warn!(
                    "networkpolicy reject: answers dropped rate_limited={} send_errors={} answered={} (limit {RATE}/s, burst {BURST})",
                    c.rate_limited,
                    c.send_errors,
                    c.answered()
                );
                warned = Some(Instant::now());
                seen = c;
            }
        }
    }
}

#[cfg(test)]
mod tests;
