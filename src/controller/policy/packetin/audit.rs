//! The audit log of rules with `enableLogging` (Antrea's `np.log`,
//! `pkg/agent/controller/networkpolicy/audit_logging.go`; reference Part B §2.4): one
//! line per logged packet with Antrea's fields, space-separated,
//! `table npRef rule direction disposition ofPriority appliedTo srcIP srcPort dstIP
//! dstPort proto len logLabel`, `<nil>` for what is empty (`appliedTo` always: Antrea
//! fills it only for Pods). Written through `log` at target [`TARGET`] (journald keeps
//! it; the logger adds the time), not to a file of our own.
//!
//! Lines of a rule that does not allow are de-duplicated as Antrea does: the first one
//! opens a one-second window, equal lines within it are counted, and at its end the line
//! is written once, with ` [<n> packets in <duration>]` when there was more than one.
//! Allow lines are written at once. Time is passed in ([`Dedup`]).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use crate::controlplane::Direction;
use crate::pipeline::TABLES;
use crate::pipeline::policy::reject::{
    L4, PROTO_ICMP, PROTO_ICMPV6, PROTO_SCTP, PROTO_TCP, PROTO_UDP, Packet,
};

/// The `log` target of audit lines.
pub const TARGET: &str = "tether::audit";
/// Antrea's de-duplication window (`bufferLength`).
pub const WINDOW: Duration = Duration::from_secs(1);
const NIL: &str = "<nil>";

/// A logged rule as the audit line names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedRule {
    /// `<policy type>:<namespace>/<name>` (`<type>:<name>` for a cluster policy).
    pub np_ref: String,
    pub rule: String,
    /// `Allow`, `Drop`, `Reject` or `Pass`.
    pub disposition: String,
    /// The rule's table and OpenFlow priority.
    pub table: u8,
    pub priority: u16,
    pub log_label: String,
}

fn or_nil(s: &str) -> &str {
    if s.is_empty() { NIL } else { s }
}

/// Antrea's names (`pkg/util/ip` `IPProtocolNumberToString`).
fn proto_name(proto: u8) -> &'static str {
    match proto {
        PROTO_ICMP => "ICMP",
        2 => "IGMP",
        PROTO_TCP => "TCP",
        PROTO_UDP => "UDP",
        PROTO_ICMPV6 => "IPv6-ICMP",
        PROTO_SCTP => "SCTP",
        _ => "UnknownProtocol",
    }
}

/// The audit line of packet `p` taken by `rule` in `direction`.
pub fn line(rule: &LoggedRule, direction: Direction, p: &Packet<'_>) -> String {
    let table = TABLES
        .iter()
        .find(|t| t.id == rule.table)
        .map_or(NIL, |t| t.name);
    let direction = match direction {
        Direction::In => "Ingress",
        Direction::Out => "Egress",
    };
    // Ports for TCP and UDP only, as Antrea.
    let (sport, dport) = match (p.proto, p.l4) {
        (PROTO_TCP, L4::Tcp { src, dst, .. }) | (PROTO_UDP, L4::Ports { src, dst }) => {
            (src.to_string(), dst.to_string())
        }
        _ => (NIL.to_string(), NIL.to_string()),
    };
    let ip = |a: IpAddr| a.to_string();
    [
        table,
        or_nil(&rule.np_ref),
        or_nil(&rule.rule),
        direction,
        or_nil(&rule.disposition),
        &rule.priority.to_string(),
        NIL,
        &ip(p.src),
        &sport,
        &ip(p.dst),
        &dport,
        proto_name(p.proto),
        &p.ip_len.to_string(),
        or_nil(&rule.log_label),
    ]
    .join(" ")
}

/// The open de-duplication windows: line → (count, opened at).
#[derive(Debug, Default)]
pub struct Dedup {
    open: BTreeMap<String, (u64, Instant)>,
}

impl Dedup {
    /// A line to log: `Some` to write now (an Allow line), `None` when it is held in a
    /// window (the first of its window, or a repeat).
    pub fn add(&mut self, line: String, allow: bool, now: Instant) -> Option<String> {
        if allow {
            return Some(line);
        }
        self.open
            .entry(line)
            .and_modify(|(n, _)| *n += 1)
            .or_insert((1, now));
        None
    }

    /// The lines whose window has ended by `now`, closed.
    pub fn due(&mut self, now: Instant) -> Vec<String> {
        let ended: Vec<String> = self
            .open
            .iter()
            .filter(|(_, (_, at))| now.saturating_duration_since(*at) >= WINDOW)
            .map(|(l, _)| l.clone())
            .collect();
        ended
            .into_iter()
            .filter_map(|l| {
                let (n, at) = self.open.remove(&l)?;
                Some(if n == 1 {
                    l
                } else {
                    format!(
                        "{l} [{n} packets in {:?}]",
                        now.saturating_duration_since(at)
                    )
                })
            })
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::policy::reject::parse;

    use crate::testing::hex;

    fn rule(disposition: &str, label: &str) -> LoggedRule {
        LoggedRule {
            np_ref: "AntreaNetworkPolicy:vm-ns/anp-log".into(),
            rule: "ingress-drop-0".into(),
            disposition: disposition.into(),
            table: 100,
            priority: 14900,
            log_label: label.into(),
        }
    }

    #[test]
    fn lines_carry_antreas_fields() {
        let udp = hex("020000000010 020000000001 0800
             4500 0020 0001 4000 4011 0000 c0000201 c000020a
             afc8 1451 000c 0000 39383736");
        let p = parse(&udp).unwrap();
        assert_eq!(
            line(&rule("Drop", "audit-me"), Direction::In, &p),
            "AntreaPolicyIngressRule AntreaNetworkPolicy:vm-ns/anp-log ingress-drop-0 Ingress \
             Drop 14900 <nil> 192.0.2.1 45000 192.0.2.10 5201 UDP 32 audit-me"
        );
        // ICMPv6 echo: no ports; the length is the whole IPv6 packet; no label.
        let ping6 = hex("020000000001 020000000010 86dd
             6000 0000 0008 3a 40
             20010db8000100000000000000000010 20010db8000100000000000000000001
             8000 0000 0001 0001");
        let p = parse(&ping6).unwrap();
        let mut r = rule("Allow", "");
        r.table = 40;
        assert_eq!(
            line(&r, Direction::Out, &p),
            "AntreaPolicyEgressRule AntreaNetworkPolicy:vm-ns/anp-log ingress-drop-0 Egress \
             Allow 14900 <nil> 2001:db8:1::10 <nil> 2001:db8:1::1 <nil> IPv6-ICMP 48 <nil>"
        );
    }

    #[test]
    fn non_allow_lines_are_held_for_a_second_and_counted() {
        let t0 = Instant::now();
        let mut d = Dedup::default();
        assert_eq!(d.add("a".into(), true, t0), Some("a".into()));
        assert_eq!(d.add("b".into(), false, t0), None);
        assert_eq!(
            d.add("b".into(), false, t0 + Duration::from_millis(300)),
            None
        );
        assert_eq!(
            d.add("c".into(), false, t0 + Duration::from_millis(500)),
            None
        );
        assert!(d.due(t0 + Duration::from_millis(999)).is_empty());
        assert_eq!(d.due(t0 + WINDOW), ["b [2 packets in 1s]".to_string()]);
        assert_eq!(d.due(t0 + Duration::from_millis(1500)), ["c".to_string()]);
        assert!(d.is_empty());
        // A new window after the old one closed.
        assert_eq!(d.add("b".into(), false, t0 + WINDOW * 2), None);
        assert_eq!(d.due(t0 + WINDOW * 3), ["b".to_string()]);
    }
}
