//! Reject end to end (docs/networkpolicy.md#reject): the rejected packet goes to tether as
//! a packet-in and its answer comes back as a packet-out, seen by real clients.
//! - Antrea's E3 (`testANPOnExternalNodeWithUDP`): ingress Reject UDP 5201 from ipBlock
//!   B/32; `iperf3 -u` from B fails with `No route to host` (ICMP host prohibited), C is
//!   unaffected, B works again after the delete. Over IPv6 the client fails at once too,
//!   with `Permission denied` (ICMPv6 admin prohibited; `pipeline::policy::reject` says
//!   why no ICMPv6 code can give "No route to host").
//! - Ingress Reject TCP 5201 from B (both families): B's connect is refused (a RST|ACK)
//!   within a second; C still connects.
//! - Egress Reject TCP 5201 to B: the VM's own connect is refused.
//! - `enableLogging`: a logged Drop's packets give one audit line per second with their
//!   count, a logged Allow's new connection one line at once (Antrea's np.log fields, at
//!   log target `tether::audit`).

use serde_json::{Value, json};

use super::*;
use crate::apiserver::controlplane::POLICIES;
use crate::common::Netns;
use crate::networkpolicy::*;

/// Connect to `host`:5201 from `bind` with a 3 s timeout: `connected` or the exception,
/// then the seconds it took.
const CONNECT: &str = "
import socket, sys, time
host, bind = sys.argv[1], sys.argv[2]
fam = socket.AF_INET6 if ':' in host else socket.AF_INET
s = socket.socket(fam, socket.SOCK_STREAM)
s.settimeout(3)
s.bind((bind, 0))
t = time.time()
try:
    s.connect((host, 5201))
    print('connected')
except Exception as e:
    print(type(e).__name__, e)
print('%.3f' % (time.time() - t))";

/// The connect's outcome and how long it took.
fn connect(from: &Netns, bind: &str, host: &str) -> (String, f64) {
    let (_, o) = out(&mut from.command(&["python3", "-c", CONNECT, host, bind]));
    let mut lines = o.lines();
    let what = lines.next().unwrap_or_default().to_string();
    let secs = lines
        .next()
        .and_then(|l| l.parse().ok())
        .unwrap_or(f64::MAX);
    (what, secs)
}

/// Refused (a RST came back) within a second, as Antrea's `Connection refused`.
fn refused(from: &Netns, bind: &str, host: &str) -> (bool, String) {
    let (what, secs) = connect(from, bind, host);
    (
        what.starts_with("ConnectionRefusedError") && secs < 1.0,
        format!("{what} after {secs}s"),
    )
}

fn connects(from: &Netns, bind: &str, host: &str) -> (bool, String) {
    let (what, secs) = connect(from, bind, host);
    (what == "connected", format!("{what} after {secs}s"))
}

fn udp_output(from: &Netns, bind: &str, to: &str, needle: &'static str) -> (bool, String) {
    let o = iperf(from, bind, to, true);
    (o.contains(needle), o)
}

fn policy(uid: &str, name: &str, rule: Value) -> String {
    np(uid, 1, name, 250, json!([rule]))
}

fn blocks(cidrs: &[&str]) -> Value {
    json!({"ipBlocks": cidrs.iter().map(|c| ip_block(c, &[])).collect::<Vec<_>>()})
}

/// The daemon asked its packet-in connection for packet-ins (and logged it).
fn packetins_asked(b: &crate::networkpolicy::Bed) -> bool {
    std::fs::read_to_string(b.sb.path("tether.log"))
        .unwrap_or_default()
        .contains("networkpolicy reject: receiving packet-ins")
}

#[test]
fn antreas_e3_udp_reject_answers_no_route_to_host() {
    if !privileged("antreas_e3_udp_reject_answers_no_route_to_host") {
        return;
    }
    let b = bed();
    let (peer, srv) = (&b.peer, &b.srv);
    let udp = json!([{"protocol": "UDP", "port": 5201}]);
    eventually("E3 before", BLOCKED, || {
        udp_output(peer, "192.0.2.1", VM4, "iperf Done")
    });
    let e3 = "np-e3";
    srv.cp_add_policy(
        &policy(
            e3,
            "anp-vmagent-ingress-udp-entity",
            rule("In", blocks(&["192.0.2.1/32"]), udp.clone(), "Reject", 0),
        ),
        &[NODE],
    );
    wait_realized(srv, e3, 1);
    eventually("E3 rejected", BLOCKED, || {
        udp_output(peer, "192.0.2.1", VM4, "No route to host")
    });
    eventually("E3 C still works", BLOCKED, || {
        udp_output(peer, "192.0.2.2", VM4, "iperf Done")
    });
    // B over IPv6 is not in the block.
    eventually("E3 B over IPv6 still works", BLOCKED, || {
        udp_output(peer, "2001:db8:1::1", VM6, "iperf Done")
    });
    srv.cp_delete(POLICIES, e3);
    eventually("E3 after delete", BLOCKED, || {
        udp_output(peer, "192.0.2.1", VM4, "iperf Done")
    });

    // The same over IPv6: the client fails at once, with EACCES.
    let e3v6 = "np-e3-v6";
    srv.cp_add_policy(
        &policy(
            e3v6,
            "anp-vmagent-ingress-udp-entity-v6",
            rule("In", blocks(&["2001:db8:1::1/128"]), udp, "Reject", 0),
        ),
        &[NODE],
    );
    wait_realized(srv, e3v6, 1);
    eventually("E3 over IPv6 rejected", BLOCKED, || {
        udp_output(peer, "2001:db8:1::1", VM6, "Permission denied")
    });
    eventually("E3 over IPv6 C still works", BLOCKED, || {
        udp_output(peer, "2001:db8:1::2", VM6, "iperf Done")
    });
    srv.cp_delete(POLICIES, e3v6);
    eventually("E3 over IPv6 after delete", BLOCKED, || {
        udp_output(peer, "2001:db8:1::1", VM6, "iperf Done")
    });
    assert!(packetins_asked(&b));
}

#[test]
fn tcp_reject_refuses_the_connection_both_ways() {
    if !privileged("tcp_reject_refuses_the_connection_both_ways") {
        return;
    }
    let b = bed();
    let (vm, peer, srv) = (b.sb.ns(), &b.peer, &b.srv);
    let tcp = json!([{"protocol": "TCP", "port": 5201}]);

    // Ingress: B → VM refused over both families, C unaffected.
    eventually("ingress before", BLOCKED, || {
        connects(peer, "192.0.2.1", VM4)
    });
    let ing = "np-reject-tcp-in";
    srv.cp_add_policy(
        &policy(
            ing,
            "reject-tcp-in",
            rule(
                "In",
                blocks(&["192.0.2.1/32", "2001:db8:1::1/128"]),
                tcp.clone(),
                "Reject",
                0,
            ),
        ),
        &[NODE],
    );
    wait_realized(srv, ing, 1);
    eventually("ingress refused", BLOCKED, || {
        refused(peer, "192.0.2.1", VM4)
    });
    eventually("ingress refused over IPv6", BLOCKED, || {
        refused(peer, "2001:db8:1::1", VM6)
    });
    eventually("ingress C still connects", BLOCKED, || {
        iperf_works(peer, "192.0.2.2", VM4)
    });
    srv.cp_delete(POLICIES, ing);
    eventually("ingress after delete", BLOCKED, || {
        iperf_works(peer, "192.0.2.1", VM4)
    });

    // Egress: the VM's own connect to B is refused; to C it works.
    eventually("egress before", BLOCKED, || connects(vm, VM4, "192.0.2.1"));
    let eg = "np-reject-tcp-out";
    srv.cp_add_policy(
        &policy(
            eg,
            "reject-tcp-out",
            rule(
                "Out",
                blocks(&["192.0.2.1/32", "2001:db8:1::1/128"]),
                tcp,
                "Reject",
                0,
            ),
        ),
        &[NODE],
    );
    wait_realized(srv, eg, 1);
    eventually("egress refused", BLOCKED, || refused(vm, VM4, "192.0.2.1"));
    eventually("egress refused over IPv6", BLOCKED, || {
        refused(vm, VM6, "2001:db8:1::1")
    });
    eventually("egress C still works", BLOCKED, || {
        iperf_works(vm, VM4, "192.0.2.2")
    });
    srv.cp_delete(POLICIES, eg);
    eventually("egress after delete", BLOCKED, || {
        iperf_works(vm, VM4, "192.0.2.1")
    });
}

/// `rule(..)` with `enableLogging` and a `logLabel`.
fn logged(mut r: Value, label: &str) -> Value {
    r["enableLogging"] = json!(true);
    if !label.is_empty() {
        r["logLabel"] = json!(label);
    }
    r
}

#[test]
fn logged_rules_write_antreas_audit_lines() {
    if !privileged("logged_rules_write_antreas_audit_lines") {
        return;
    }
    let b = bed();
    let (peer, srv) = (&b.peer, &b.srv);
    let icmp = json!([{"protocol": "ICMP"}]);
    eventually("before", BLOCKED, || ping_works(peer, "192.0.2.1", VM4));
    let uid = "np-log";
    srv.cp_add_policy(
        &np(
            uid,
            1,
            "anp-log",
            250,
            json!([
                logged(
                    rule("In", blocks(&["192.0.2.1/32"]), icmp.clone(), "Drop", 0),
                    "audit-e2e"
                ),
                logged(rule("In", blocks(&["192.0.2.2/32"]), icmp, "Allow", 1), ""),
            ]),
        ),
        &[NODE],
    );
    wait_realized(srv, uid, 1);
    eventually("B dropped", BLOCKED, || {
        ping_blocked(peer, "192.0.2.1", VM4)
    });
    eventually("C allowed", BLOCKED, || ping_works(peer, "192.0.2.2", VM4));
    let text = || std::fs::read_to_string(b.sb.path("tether.log")).unwrap_or_default();
    // The Drop: five pings 0.2 s apart, counted in windows of a second, each window one
    // line with its count.
    let drop_head = "tether::audit: AntreaPolicyIngressRule AntreaNetworkPolicy:vm-ns/anp-log \
                     in-drop-0 Ingress Drop ";
    let drop_tail = " <nil> 192.0.2.1 <nil> 192.0.2.10 <nil> ICMP 84 audit-e2e";
    eventually("the Drop's audit lines", Duration::from_secs(5), || {
        let t = text();
        let lines: Vec<&str> = t
            .lines()
            .filter(|l| l.contains(drop_head) && l.contains(drop_tail))
            .collect();
        let counted = lines.iter().any(|l| l.contains(" packets in "));
        (
            counted,
            t.lines()
                .filter(|l| l.contains("tether::audit"))
                .collect::<Vec<_>>()
                .join("\n"),
        )
    });
    // The Allow: the first echo request of C's ping is a new connection: one line.
    let allow = " <nil> 192.0.2.2 <nil> 192.0.2.10 <nil> ICMP 84 <nil>";
    let t = text();
    assert!(
        t.lines().any(|l| l.contains(
            "tether::audit: AntreaPolicyIngressRule \
                                       AntreaNetworkPolicy:vm-ns/anp-log in-allow-1 Ingress Allow "
        ) && l.ends_with(allow)),
        "no Allow line:\n{t}"
    );
    srv.cp_delete(POLICIES, uid);
    eventually("after delete", BLOCKED, || {
        ping_works(peer, "192.0.2.1", VM4)
    });
}
