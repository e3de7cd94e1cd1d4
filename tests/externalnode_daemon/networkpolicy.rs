//! NetworkPolicy end to end (docs/networkpolicy.md): `tether run` with the test API server
//! as both the Kubernetes API and the antrea-controller's controlplane API, real packets
//! between the VM and its peer, and Antrea's VM e2e cases (`test/e2e/vmagent_test.go`)
//! with their clients and assertion strings: iperf3's `iperf Done` before, a timeout
//! after; `ping -c 5`'s `5 packets transmitted, 0 received`. Each case: works before, the
//! policy's status is POSTed (Realized) within 5 s, blocked within 20 s, works again after
//! the delete. The peer namespace holds two hosts: A-side peer B (`192.0.2.1`,
//! `2001:db8:1::1`) and a second host C (`192.0.2.2`, `2001:db8:1::2`).

use std::process::Command;

use serde_json::{Value, json};

use super::*;
use crate::apiserver::controlplane::{ADDRESS, APPLIED_TO};
use crate::apiserver::cp_fixtures::{ee_member, ip};
use crate::common::Netns;

/// The span key of this VM: the agent config's `externalNodeNamespace` and the EN's name.
pub(super) const NODE: &str = "default/vm1";
pub(super) const ATG: &str = "atg-vm1";
pub(super) const AG_B: &str = "ag-peer-b";

/// Antrea's realization timeout (`policyRealizedTimeout`).
pub(super) const REALIZED: Duration = Duration::from_secs(5);
/// Antrea's connectivity poll: up to 20 s.
pub(super) const BLOCKED: Duration = Duration::from_secs(20);

/// A controlplane NetworkPolicy applied to this VM (ATG), as an Antrea-native policy.
pub(super) fn np(uid: &str, generation: i64, name: &str, tier: i32, rules: Value) -> String {
    json!({
        "kind": "NetworkPolicy", "apiVersion": "controlplane.antrea.io/v1beta2",
        "metadata": {"name": uid, "uid": uid, "generation": generation},
        "rules": rules, "appliedToGroups": [ATG], "priority": 1.0, "tierPriority": tier,
        "sourceRef": {"type": "AntreaNetworkPolicy", "namespace": "vm-ns", "name": name, "uid": uid},
    })
    .to_string()
}

pub(super) fn ip_block(cidr: &str, except: &[&str]) -> Value {
    let net = |c: &str| {
        let (a, p) = c.split_once('/').unwrap();
        json!({"ip": ip(a), "prefixLength": p.parse::<u32>().unwrap()})
    };
    let mut b = json!({"cidr": net(cidr)});
    if !except.is_empty() {
        b["except"] = except.iter().map(|c| net(c)).collect();
    }
    b
}

pub(super) fn rule(
    direction: &str,
    peer: Value,
    services: Value,
    action: &str,
    index: i32,
) -> Value {
    let (from, to) = if direction == "In" {
        (peer, json!({}))
    } else {
        (json!({}), peer)
    };
    json!({"direction": direction, "from": from, "to": to, "services": services,
           "action": action, "priority": index, "enableLogging": false,
           "name": format!("{}-{}-{index}", direction.to_lowercase(), action.to_lowercase())})
}

/// Output and success of a command (never panics on a failed one).
pub(super) fn out(c: &mut Command) -> (bool, String) {
    let o = c.output().unwrap();
    let mut s = String::from_utf8_lossy(&o.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&o.stderr));
    (o.status.success(), s)
}

/// iperf3 from `from` (bound to `bind`) to `to`, as Antrea's case runs it; its output.
pub(super) fn iperf(from: &Netns, bind: &str, to: &str, udp: bool) -> String {
    let mut argv = vec![
        "timeout",
        "10",
        "iperf3",
        "-c",
        to,
        "-t",
        "1",
        "-p",
        "5201",
        "-B",
        bind,
        "--connect-timeout",
        "3000",
    ];
    if udp {
        argv.push("-u");
    }
    out(&mut from.command(&argv)).1
}

pub(super) fn ping5(from: &Netns, bind: &str, to: &str) -> String {
    out(&mut from.command(&["ping", "-c", "5", "-i", "0.2", "-W", "1", "-I", bind, to])).1
}

/// Poll `check` every second until it holds, within `limit`; the last output on failure.
pub(super) fn eventually(what: &str, limit: Duration, check: impl Fn() -> (bool, String)) {
    let end = Instant::now() + common::patience(limit);
    loop {
        let (ok, last) = check();
        if ok {
            return;
        }
        if Instant::now() > end {
            panic!("{what}: not within {limit:?}; last: {last}");
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

pub(super) fn iperf_works(from: &Netns, bind: &str, to: &str) -> (bool, String) {
    let o = iperf(from, bind, to, false);
    (o.contains("iperf Done"), o)
}

pub(super) fn iperf_blocked(from: &Netns, bind: &str, to: &str) -> (bool, String) {
    let o = iperf(from, bind, to, false);
    (!o.contains("iperf Done"), o)
}

pub(super) fn ping_works(from: &Netns, bind: &str, to: &str) -> (bool, String) {
    let o = ping5(from, bind, to);
    (o.contains("5 packets transmitted, 5 received"), o)
}

pub(super) fn ping_blocked(from: &Netns, bind: &str, to: &str) -> (bool, String) {
    let o = ping5(from, bind, to);
    (o.contains("5 packets transmitted, 0 received"), o)
}

/// The policy's status was POSTed with `generation` within Antrea's 5 s.
pub(super) fn wait_realized(srv: &apiserver::ApiServer, uid: &str, generation: i64) {
    wait_for(
        common::patience(REALIZED),
        &format!("status of {uid} gen {generation}"),
        || {
            srv.cp_statuses()
                .iter()
                .any(|(n, b)| {
                    n == uid
                        && b["nodes"][0]["nodeName"] == NODE
                        && b["nodes"][0]["generation"] == generation
                        && b["kind"] == "NetworkPolicyStatus"
                })
                .then_some(())
        },
    );
}

pub(super) struct Bed {
    pub(super) sb: Sandbox,
    pub(super) peer: Netns,
    pub(super) srv: apiserver::ApiServer,
    _api: common::relay::ApiInNetns,
    pub(super) d: Option<Daemon>,
    pub(super) servers: Vec<Child>,
    /// `tether run`'s source arguments, for restarts.
    pub(super) args: Vec<String>,
}

impl Bed {
    fn args(&self) -> Vec<&str> {
        self.args.iter().map(String::as_str).collect()
    }
}

/// The VM attached by a daemon that watches the controlplane; iperf3 servers on the VM
/// and the peer; the VM in the ATG; B's addresses in AG_B.
pub(super) fn bed() -> Bed {
    let (sb, peer) = setup();
    peer.sh("ip addr add 192.0.2.2/24 dev eth0
             ip -6 addr add 2001:db8:1::2/64 dev eth0");
    let srv = apiserver::ApiServer::start(apiserver::Options::default());
    let api = common::relay::ApiInNetns::new(sb.ns(), sb.dir(), &srv.url(), None);
    let k = api.kubeconfig.to_str().unwrap().to_string();
    let args = [
        "--kubeconfig",
        k.as_str(),
        "--antrea-kubeconfig",
        k.as_str(),
        "--allow-plain-http",
    ];
    let d = Daemon::start(&sb, &args, None);
    srv.create(
        json!({"apiVersion": "crd.antrea.io/v1alpha1", "kind": "ExternalNode",
        "metadata": {"namespace": "default", "name": "vm1"},
        "spec": {"interfaces": [{"ips": ["192.0.2.10", "2001:db8:1::10"]}]}}),
    );
    wait_attached(&sb, "192.0.2.10,2001:db8:1::10", "takeover");
    srv.cp_add_group(
        APPLIED_TO,
        ATG,
        &[ee_member("default", "vm1", &[])],
        &[NODE],
    );
    srv.cp_add_group(
        ADDRESS,
        AG_B,
        &[ee_member(
            "vm-ns",
            "peer-b",
            &["192.0.2.1", "2001:db8:1::1"],
        )],
        &[NODE],
    );
    let servers = [sb.ns(), &peer]
        .map(|ns| {
            ns.command(&["iperf3", "-s", "-p", "5201"])
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .into();
    std::thread::sleep(Duration::from_millis(300));
    Bed {
        sb,
        peer,
        srv,
        _api: api,
        d: Some(d),
        servers,
        args: args.iter().map(|a| a.to_string()).collect(),
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "tether log:\n{}",
                std::fs::read_to_string(self.sb.path("tether.log")).unwrap_or_default()
            );
            if let Ok(flows) = self.sb.try_dump_flows("br-int", None) {
                eprintln!("flows:\n{}", flows.join("\n"));
            }
        }
        if let Some(d) = self.d.take() {
            drop(d);
        }
        for c in &mut self.servers {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub(super) const VM4: &str = "192.0.2.10";
pub(super) const VM6: &str = "2001:db8:1::10";

#[test]
fn antreas_vm_e2e_cases_on_real_packets() {
    if !privileged("antreas_vm_e2e_cases_on_real_packets") {
        return;
    }
    let b = bed();
    let (vm, peer, srv) = (b.sb.ns(), &b.peer, &b.srv);
    let tcp = json!([{"protocol": "TCP", "port": 5201}]);

    // E2a: ingress Drop TCP 5201 from the ExternalEntities of B (an AddressGroup).
    eventually("E2a before", BLOCKED, || {
        iperf_works(peer, "192.0.2.1", VM4)
    });
    let e2a = "np-e2a";
    srv.cp_add_policy(
        &np(
            e2a,
            1,
            "anp-vmagent-ingress-tcp-entity",
            250,
            json!([rule(
                "In",
                json!({"addressGroups": [AG_B]}),
                tcp.clone(),
                "Drop",
                0
            )]),
        ),
        &[NODE],
    );
    wait_realized(srv, e2a, 1);
    eventually("E2a blocked", BLOCKED, || {
        iperf_blocked(peer, "192.0.2.1", VM4)
    });
    eventually("E2a blocked over IPv6", BLOCKED, || {
        iperf_blocked(peer, "2001:db8:1::1", VM6)
    });
    // C is not in the group.
    eventually("E2a C still works", BLOCKED, || {
        iperf_works(peer, "192.0.2.2", VM4)
    });
    // B's member IP changes to C's: the block moves with it (a patch removes and adds).
    srv.cp_patch_group(
        ADDRESS,
        AG_B,
        &[ee_member("vm-ns", "peer-b", &["192.0.2.2"])],
        &[ee_member(
            "vm-ns",
            "peer-b",
            &["192.0.2.1", "2001:db8:1::1"],
        )],
    );
    eventually("E2a follows the member's IP", BLOCKED, || {
        iperf_blocked(peer, "192.0.2.2", VM4)
    });
    eventually("E2a B works after the IP change", BLOCKED, || {
        iperf_works(peer, "192.0.2.1", VM4)
    });
    srv.cp_delete(crate::apiserver::controlplane::POLICIES, e2a);
    eventually("E2a after delete", BLOCKED, || {
        iperf_works(peer, "192.0.2.2", VM4)
    });

    // E2b: egress Drop TCP 5201 to ipBlock B/32.
    eventually("E2b before", BLOCKED, || iperf_works(vm, VM4, "192.0.2.1"));
    let e2b = "np-e2b";
    srv.cp_add_policy(
        &np(
            e2b,
            1,
            "anp-vmagent-egress-tcp-ip",
            250,
            json!([rule(
                "Out",
                json!({"ipBlocks": [ip_block("192.0.2.1/32", &[])]}),
                tcp.clone(),
                "Drop",
                0
            )]),
        ),
        &[NODE],
    );
    wait_realized(srv, e2b, 1);
    eventually("E2b blocked", BLOCKED, || {
        iperf_blocked(vm, VM4, "192.0.2.1")
    });
    eventually("E2b C still works", BLOCKED, || {
        iperf_works(vm, VM4, "192.0.2.2")
    });
    srv.cp_delete(crate::apiserver::controlplane::POLICIES, e2b);
    eventually("E2b after delete", BLOCKED, || {
        iperf_works(vm, VM4, "192.0.2.1")
    });

    // E4: ingress Drop ICMP type 8 code 0 from B/32; C still pings.
    eventually("E4 before", BLOCKED, || ping_works(peer, "192.0.2.1", VM4));
    let e4 = "np-e4";
    srv.cp_add_policy(
        &np(
            e4,
            1,
            "anp-vmagent-ingress-icmp-ip",
            250,
            json!([rule(
                "In",
                json!({"ipBlocks": [ip_block("192.0.2.1/32", &[])]}),
                json!([{"protocol": "ICMP", "icmpType": 8, "icmpCode": 0}]),
                "Drop",
                0
            )]),
        ),
        &[NODE],
    );
    wait_realized(srv, e4, 1);
    eventually("E4 blocked", BLOCKED, || {
        ping_blocked(peer, "192.0.2.1", VM4)
    });
    eventually("E4 C still pings", BLOCKED, || {
        ping_works(peer, "192.0.2.2", VM4)
    });
    // The rule's counters in `tether status`: every blocked echo request, from its metric
    // flow (each a session: a denied packet counts as one).
    let (rc, out, err) = super::cli::tether_cmd(&b.sb, "status", "br-int", &["--json"]);
    assert_eq!(rc, 0, "{err}");
    let st: Value = serde_json::from_str(&out).unwrap();
    let e4_rule = st["network_policy"]["policies"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == e4)
        .map(|p| p["rules"][0].clone())
        .unwrap_or_default();
    let packets = e4_rule["counters"]["packets"].as_u64().unwrap_or(0);
    assert!(
        packets >= 5 && e4_rule["counters"]["sessions"].as_u64() == Some(packets),
        "E4's rule counters: {e4_rule}"
    );
    // A new generation of the same policy is reported again (Antrea #3075).
    srv.cp_modify_policy(&np(
        e4,
        2,
        "anp-vmagent-ingress-icmp-ip",
        250,
        json!([rule(
            "In",
            json!({"ipBlocks": [ip_block("192.0.2.1/32", &[])]}),
            json!([{"protocol": "ICMP", "icmpType": 8, "icmpCode": 0}]),
            "Drop",
            0
        )]),
    ));
    wait_realized(srv, e4, 2);
    // A resync of the watches (antrea-controller restarted, say) reports every policy
    // again: the controller may have forgotten (Antrea #5097).
    let posts = |srv: &apiserver::ApiServer| {
        srv.cp_statuses()
            .iter()
            .filter(|(n, b)| n == e4 && b["nodes"][0]["generation"] == 2)
            .count()
    };
    let before = posts(srv);
    srv.cp_close_watches(None);
    wait_for(
        common::patience(REALIZED),
        "status again after a resync",
        || (posts(srv) > before).then_some(()),
    );
    srv.cp_delete(crate::apiserver::controlplane::POLICIES, e4);
    eventually("E4 after delete", BLOCKED, || {
        ping_works(peer, "192.0.2.1", VM4)
    });
}

#[test]
fn except_baseline_and_pass_on_real_packets() {
    if !privileged("except_baseline_and_pass_on_real_packets") {
        return;
    }
    let b = bed();
    let (peer, srv) = (&b.peer, &b.srv);
    let icmp = json!([{"protocol": "ICMP"}]);

    // ipBlock with except: the /24 is dropped but for C.
    eventually("before", BLOCKED, || ping_works(peer, "192.0.2.1", VM4));
    srv.cp_add_policy(
        &np(
            "np-except",
            1,
            "except",
            250,
            json!([rule(
                "In",
                json!({"ipBlocks": [ip_block("192.0.2.0/24", &["192.0.2.2/32"])]}),
                icmp.clone(),
                "Drop",
                0
            )]),
        ),
        &[NODE],
    );
    wait_realized(srv, "np-except", 1);
    eventually("except: B blocked", BLOCKED, || {
        ping_blocked(peer, "192.0.2.1", VM4)
    });
    eventually("except: C pings", BLOCKED, || {
        ping_works(peer, "192.0.2.2", VM4)
    });
    srv.cp_delete(crate::apiserver::controlplane::POLICIES, "np-except");

    // IPv6: a Drop from B's IPv6 address; IPv4 from B still works.
    srv.cp_add_policy(
        &np(
            "np-v6",
            1,
            "v6",
            250,
            json!([rule(
                "In",
                json!({"ipBlocks": [ip_block("2001:db8:1::1/128", &[])]}),
                json!([]),
                "Drop",
                0
            )]),
        ),
        &[NODE],
    );
    wait_realized(srv, "np-v6", 1);
    eventually("IPv6 blocked", BLOCKED, || {
        ping_blocked(peer, "2001:db8:1::1", VM6)
    });
    eventually("IPv6: C pings", BLOCKED, || {
        ping_works(peer, "2001:db8:1::2", VM6)
    });
    eventually("IPv6 rule leaves IPv4", BLOCKED, || {
        ping_works(peer, "192.0.2.1", VM4)
    });
    srv.cp_delete(crate::apiserver::controlplane::POLICIES, "np-v6");

    // Pass in the application tier hands B to the baseline tier, whose Drop applies; an
    // Allow above the Pass for C wins over both.
    srv.cp_add_policy(
        &np(
            "np-baseline",
            1,
            "baseline",
            253,
            json!([rule("In", json!({}), icmp.clone(), "Drop", 0)]),
        ),
        &[NODE],
    );
    srv.cp_add_policy(
        &np(
            "np-pass",
            1,
            "pass",
            250,
            json!([
                rule(
                    "In",
                    json!({"ipBlocks": [ip_block("192.0.2.2/32", &[])]}),
                    icmp.clone(),
                    "Allow",
                    0
                ),
                rule("In", json!({}), icmp.clone(), "Pass", 1),
            ]),
        ),
        &[NODE],
    );
    wait_realized(srv, "np-baseline", 1);
    wait_realized(srv, "np-pass", 1);
    eventually("Pass → baseline Drop", BLOCKED, || {
        ping_blocked(peer, "192.0.2.1", VM4)
    });
    eventually("Allow above Pass", BLOCKED, || {
        ping_works(peer, "192.0.2.2", VM4)
    });
    srv.cp_delete(crate::apiserver::controlplane::POLICIES, "np-baseline");
    eventually("Pass alone lets through", BLOCKED, || {
        ping_works(peer, "192.0.2.1", VM4)
    });

    // `tether plan`: converged, nothing pending; with tether stopped and a policy added,
    // that policy's flows pending, labelled by policy and rule.
    let args: Vec<String> = b.args.clone();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, text, err) = crate::cli::tether_cmd(&b.sb, "plan", "br-int", &args);
    assert_eq!(code, 0, "converged: {text}{err}");
    let mut b = b;
    b.d.take().unwrap().stop(&b.sb);
    b.srv.cp_add_policy(
        &np(
            "np-later",
            1,
            "later",
            250,
            json!([rule(
                "In",
                json!({"ipBlocks": [ip_block("192.0.2.3/32", &[])]}),
                json!([]),
                "Drop",
                0
            )]),
        ),
        &[NODE],
    );
    let (code, text, err) = crate::cli::tether_cmd(&b.sb, "plan", "br-int", &args);
    assert_eq!(code, 3, "{text}{err}");
    assert!(
        text.contains("networkpolicy rule np-later In in-drop-0")
            && text.contains("nw_src=192.0.2.3"),
        "{text}"
    );

    // `tether check` tries the three watches for real and says what NetworkPolicy does.
    let (_, text, err) = crate::cli::tether_cmd(&b.sb, "check", "br-int", &args);
    for kind in ["networkpolicies", "appliedtogroups", "addressgroups"] {
        assert!(
            text.lines()
                .any(|l| l.contains(&format!("rbac controlplane {kind}"))
                    && l.contains("watch answers")),
            "{kind}: {text}{err}"
        );
    }
    assert!(text.contains("fail_mode=secure"), "{text}");
    b.srv.cp_hold("addressgroups", true);
    let (code, text, _) = crate::cli::tether_cmd(&b.sb, "check", "br-int", &args);
    assert_ne!(code, 0, "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("rbac controlplane addressgroups") && l.contains("503")),
        "{text}"
    );
}

/// A TCP connection attempt to `host:5201` every 100 ms for `secs` seconds (each attempt
/// given 100 ms), from the peer; prints `attempts connected` at the end.
const CONNECT_LOOP: &str = "import socket,sys,time
host,bind,secs=sys.argv[1],sys.argv[2],float(sys.argv[3])
fam=socket.AF_INET6 if ':' in host else socket.AF_INET
end=time.time()+secs; n=0; ok=0
while time.time()<end:
    n+=1
    s=socket.socket(fam); s.settimeout(0.1); s.bind((bind,0))
    try:
        s.connect((host,5201)); ok+=1
    except OSError:
        pass
    s.close(); time.sleep(0.1)
print(n, ok)";

/// Lines of the daemons' shared log containing `needle`.
pub(super) fn log_count(sb: &Sandbox, needle: &str) -> usize {
    std::fs::read_to_string(sb.path("tether.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(needle))
        .count()
}

/// Start the loop for `secs`; `finish` waits and returns (attempts, connected).
pub(super) fn connect_loop(peer: &Netns, bind: &str, host: &str, secs: u32) -> Child {
    peer.command(&["python3", "-c", CONNECT_LOOP, host, bind, &secs.to_string()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

pub(super) fn finish(c: Child) -> (u64, u64) {
    let o = c.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut it = text.split_whitespace().map(|w| w.parse::<u64>().unwrap());
    (it.next().unwrap(), it.next().unwrap())
}

/// A Drop policy and a connection attempt every 100 ms while tether is killed (-9) and
/// restarted, twice (once with the controlplane refusing every watch: the previous run's
/// policy flows are carried over and stay), and while ovs-vswitchd is killed and started
/// again: not one attempt connects. The first attempts after each disruption prove the
/// loop ran throughout.
#[test]
fn no_moment_without_policy_across_restarts() {
    if !privileged("no_moment_without_policy_across_restarts") {
        return;
    }
    let mut b = bed();
    let tcp = json!([{"protocol": "TCP", "port": 5201}]);
    eventually("before", BLOCKED, || iperf_works(&b.peer, "192.0.2.1", VM4));
    b.srv.cp_add_policy(
        &np(
            "np-drop",
            1,
            "drop-all-5201",
            250,
            json!([rule("In", json!({}), tcp, "Drop", 0)]),
        ),
        &[NODE],
    );
    wait_realized(&b.srv, "np-drop", 1);
    eventually("blocked", BLOCKED, || {
        iperf_blocked(&b.peer, "192.0.2.1", VM4)
    });

    // kill -9 and restart tether.
    let l = connect_loop(&b.peer, "192.0.2.1", VM4, 12);
    let reported = log_count(&b.sb, "np-drop: realized generation 1, reported");
    drop(b.d.take());
    std::thread::sleep(Duration::from_secs(1));
    b.d = Some(Daemon::start(&b.sb, &b.args(), None));
    wait_for(
        common::patience(Duration::from_secs(20)),
        "restart: reported",
        || (log_count(&b.sb, "np-drop: realized generation 1, reported") > reported).then_some(()),
    );
    let (n, ok) = finish(l);
    assert!(n >= 20, "the loop ran: {n} attempts");
    assert_eq!(
        ok, 0,
        "{ok} of {n} attempts connected across a kill -9 and restart"
    );

    // The same with the controlplane unreachable at start: the carried flows hold.
    for r in ["networkpolicies", "appliedtogroups", "addressgroups"] {
        b.srv.cp_hold(r, true);
    }
    let l = connect_loop(&b.peer, "192.0.2.1", VM4, 12);
    let kept = log_count(&b.sb, "until the controlplane has synced");
    let synced = log_count(&b.sb, "first full sync done");
    drop(b.d.take());
    b.d = Some(Daemon::start(&b.sb, &b.args(), None));
    wait_for(
        common::patience(Duration::from_secs(20)),
        "restart without controlplane: flows carried over, first full sync done",
        || {
            (log_count(&b.sb, "until the controlplane has synced") > kept
                && log_count(&b.sb, "first full sync done") > synced)
                .then_some(())
        },
    );
    let (n, ok) = finish(l);
    assert!(n >= 20, "the loop ran: {n} attempts");
    assert_eq!(
        ok, 0,
        "{ok} of {n} attempts connected with the controlplane unreachable"
    );
    for r in ["networkpolicies", "appliedtogroups", "addressgroups"] {
        b.srv.cp_hold(r, false);
    }
    eventually(
        "still blocked once the controlplane is back",
        BLOCKED,
        || iperf_blocked(&b.peer, "192.0.2.1", VM4),
    );

    // ovs-vswitchd killed and started again.
    let l = connect_loop(&b.peer, "192.0.2.1", VM4, 12);
    std::thread::sleep(Duration::from_secs(1));
    b.sb.kill9("ovs-vswitchd");
    b.sb.start_vswitchd();
    let (n, ok) = finish(l);
    assert!(n >= 20, "the loop ran: {n} attempts");
    assert_eq!(
        ok, 0,
        "{ok} of {n} attempts connected across an ovs-vswitchd restart"
    );
    eventually(
        "after the OVS restart: pings pass, TCP 5201 blocked",
        BLOCKED,
        || {
            let (pings, p) = ping_works(&b.peer, "192.0.2.1", VM4);
            let (blocked, i) = iperf_blocked(&b.peer, "192.0.2.1", VM4);
            (pings && blocked, format!("{p}\n{i}"))
        },
    );
}
