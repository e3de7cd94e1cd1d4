//! TrafficControl end to end (docs/design.md#tier-3-end-to-end): the `tether` binary, real
//! userspace OVS in a private netns, Pods and a collector as namespaces, real packets
//! counted with tcpdump.

#![allow(clippy::unwrap_used)]

mod apiserver;
mod common;
mod e2e;

use std::time::Duration;

use common::{Tether, privileged};
use e2e::{Bed, Capture};

fn tc_yaml(name: &str, direction: &str, action: &str, target: &str, ret: Option<&str>) -> String {
    let mut y = format!(
        "apiVersion: crd.antrea.io/v1alpha2\nkind: TrafficControl\nmetadata:\n  name: {name}\nspec:\n  appliedTo:\n    podSelector:\n      matchLabels:\n        app: web\n  direction: {direction}\n  action: {action}\n  targetPort:\n    {target}\n"
    );
    if let Some(r) = ret {
        y.push_str(&format!("  returnPort:\n    {r}\n"));
    }
    y
}

#[test]
fn mirror_egress_ingress_both_to_a_device() {
    if !privileged("mirror_egress_ingress_both_to_a_device") {
        return;
    }
    let mut bed = Bed::new();
    bed.add_pod("pa", 1);
    bed.add_pod("pb", 2);
    let coll = bed.add_collector(&["coll0"]);
    bed.write_pods(&[("pa", "web")]);
    let args = bed.tether_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let _t = Tether::start(bed.sb.ns(), &args, &bed.sb.path("tether.log"));
    let pa = bed.ofport("veth-pa");
    assert_eq!(
        bed.ping(0, 1, 3),
        3,
        "Pod to Pod works with the pipeline and no TC"
    );

    for (direction, want_req, want_rep) in [("Egress", 5, 0), ("Ingress", 0, 5), ("Both", 5, 5)] {
        bed.write(
            "tc.yaml",
            &tc_yaml("mirror", direction, "Mirror", "device: {name: coll0}", None),
        );
        let n = match direction {
            "Both" => 2,
            _ => 1,
        };
        let flows = bed.wait_flows(&format!("{direction} mark flows"), |f| {
            f.iter()
                .filter(|l| l.contains("table=3, priority=200"))
                .count()
                == n
                && f.iter().any(|l| {
                    l.contains(&match direction {
                        "Egress" => format!("in_port={pa} "),
                        _ => format!("reg1={pa:#x} "),
                    })
                })
        });
        let req = Capture::start(
            &coll,
            "eth0",
            "icmp[icmptype] == icmp-echo and src 203.0.113.1",
            bed.sb.path("req.txt"),
        );
        let rep = Capture::start(
            &coll,
            "eth0",
            "icmp[icmptype] == icmp-echoreply and dst 203.0.113.1",
            bed.sb.path("rep.txt"),
        );
        assert_eq!(
            bed.ping(0, 1, 5),
            5,
            "{direction}: ping keeps working while mirrored"
        );
        let all = bed.sb.dump_flows("br-int", None);
        assert_eq!(
            (req.count(), rep.count()),
            (want_req, want_rep),
            "{direction} copies; flows: {flows:#?} all: {all:#?}"
        );
    }
    // No-flood on the target port (OF1.0 view).
    assert!(bed.no_flood("coll0"), "{:?}", bed.of10_port_block("coll0"));
}

fn start(bed: &Bed, log: &str) -> Tether {
    let args = bed.tether_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Tether::start(bed.sb.ns(), &args, &bed.sb.path(log))
}

fn bed_with_pods() -> Bed {
    let mut bed = Bed::new();
    bed.add_pod("pa", 1);
    bed.add_pod("pb", 2);
    bed.write_pods(&[("pa", "web")]);
    bed
}

fn port_names(bed: &Bed) -> Vec<String> {
    let mut v: Vec<String> = bed
        .sb
        .vsctl(&["list-ports", "br-int"])
        .lines()
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

#[test]
fn redirect_through_a_middlebox_and_back() {
    if !privileged("redirect_through_a_middlebox_and_back") {
        return;
    }
    let bed = bed_with_pods();
    // The middlebox: a hub (bridge without learning) between the target and return ports.
    let mb = bed.add_collector(&["tgt0", "ret0"]);
    mb.ip(&["link", "add", "hub", "type", "bridge", "ageing_time", "0"]);
    for dev in ["eth0", "eth1", "hub"] {
        if dev != "hub" {
            mb.ip(&["link", "set", dev, "master", "hub"]);
        }
        mb.ip(&["link", "set", dev, "up"]);
    }
    let _t = start(&bed, "tether.log");
    bed.write(
        "tc.yaml",
        &tc_yaml(
            "redir",
            "Both",
            "Redirect",
            "device: {name: tgt0}",
            Some("device: {name: ret0}"),
        ),
    );
    let ret = bed.wait_flows("return-port flow", |f| {
        f.iter().any(|l| l.contains("set_field:0x6/0xf->reg0"))
    });
    let r = bed.ofport("ret0");
    assert!(
        ret.iter().any(|l| l.ends_with(&format!(
            "priority=200,in_port={r} actions=set_field:0x6/0xf->reg0,goto_table:2"
        ))),
        "{ret:#?}"
    );
    let to_target = Capture::start(
        &mb,
        "eth0",
        "icmp and host 203.0.113.1",
        bed.sb.path("t.txt"),
    );
    let back = Capture::start(
        &mb,
        "eth1",
        "icmp and host 203.0.113.1",
        bed.sb.path("r.txt"),
    );
    let to_pb = Capture::start(
        &bed.pods[1].ns,
        "eth0",
        "icmp[icmptype] == icmp-echo",
        bed.sb.path("b.txt"),
    );
    assert_eq!(
        bed.ping(0, 1, 5),
        5,
        "redirected traffic comes back and is delivered"
    );
    let (t, r, b) = (to_target.count(), back.count(), to_pb.count());
    assert_eq!(
        (t, r, b),
        (10, 10, 5),
        "target and return see requests and replies; pb gets each request once"
    );
    // Both TC ports are kept out of flooding.
    for p in ["tgt0", "ret0"] {
        assert!(bed.no_flood(p), "{p}: {:?}", bed.of10_port_block(p));
    }
}

#[test]
fn tunnel_targets_get_exact_options() {
    if !privileged("tunnel_targets_get_exact_options") {
        return;
    }
    let bed = bed_with_pods();
    let _t = start(&bed, "tether.log");
    let cases = [
        (
            "vx",
            "vxlan: {remoteIP: 198.51.100.2, vni: 5, destinationPort: 4790}",
            "vxlan",
            r#"["map",[["dst_port","4790"],["key","5"],["remote_ip","198.51.100.2"]]]"#,
        ),
        (
            "gn",
            "geneve: {remoteIP: \"2001:db8::2\", vni: 6}",
            "geneve",
            r#"["map",[["key","6"],["remote_ip","2001:db8::2"]]]"#,
        ),
        (
            "gr",
            "gre: {remoteIP: 198.51.100.2, key: 4294967295}",
            "gre",
            r#"["map",[["key","4294967295"],["remote_ip","198.51.100.2"]]]"#,
        ),
        (
            "e1",
            "erspan: {remoteIP: 198.51.100.2, sessionID: 8, version: 1, index: 31}",
            "erspan",
            r#"["map",[["erspan_idx","1f"],["erspan_ver","1"],["key","8"],["remote_ip","198.51.100.2"]]]"#,
        ),
        (
            "e2",
            "erspan: {remoteIP: 198.51.100.2, sessionID: 9, version: 2, dir: 1, hardwareID: 4}",
            "erspan",
            r#"["map",[["erspan_dir","1"],["erspan_hwid","4"],["erspan_ver","2"],["key","9"],["remote_ip","198.51.100.2"]]]"#,
        ),
    ];
    let mut all = String::new();
    for (name, target, _, _) in &cases {
        all.push_str(&tc_yaml(name, "Egress", "Mirror", target, None));
        all.push_str("---\n");
    }
    bed.write("tcs.yaml", &all);
    // All five select the same Pod: only the effective one ("e1", lowest name at equal
    // age) has mark flows, but every target port exists.
    common::wait_for(Duration::from_secs(15), "five tunnel ports", || {
        (port_names(&bed).len() == 7).then_some(())
    });
    let flows = bed.wait_flows("the effective TC's flow", |f| f.len() == 1);
    let e1 = bed.ofport("erspan-c5a8e8");
    assert!(
        flows[0].contains(&format!("set_field:{e1:#x}->reg9")),
        "{flows:#?}"
    );
    for (_, _, kind, options) in &cases {
        let rows = bed.sb.vsctl(&[
            "--format=json",
            "--columns=name,type,options,error,ofport,external_ids",
            "find",
            "Interface",
            &format!("type={kind}"),
        ]);
        let v: serde_json::Value = serde_json::from_str(&rows).unwrap();
        let want: serde_json::Value = serde_json::from_str(options).unwrap();
        let row = v["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r[2] == want)
            .unwrap_or_else(|| panic!("{kind} {options} not in {rows}"));
        assert_eq!(row[3], serde_json::json!(["set", []]), "{kind}: no error");
        assert!(row[4].as_i64().unwrap() > 0, "{kind}: ofport");
        let name = row[0].as_str().unwrap();
        assert_eq!(
            bed.sb
                .vsctl(&["get", "Port", name, "external_ids:antrea-type"])
                .trim(),
            "traffic-control"
        );
    }
}

#[test]
fn shared_target_and_return_port_change() {
    if !privileged("shared_target_and_return_port_change") {
        return;
    }
    let bed = bed_with_pods();
    let _c = bed.add_collector(&["shared0", "r1", "r2"]);
    let _t = start(&bed, "tether.log");
    let two = format!(
        "{}---\n{}",
        tc_yaml("one", "Egress", "Mirror", "device: {name: shared0}", None),
        tc_yaml(
            "two",
            "Ingress",
            "Redirect",
            "device: {name: shared0}",
            Some("device: {name: r1}")
        )
    );
    bed.write("tcs.yaml", &two);
    bed.wait_flows("return flow of r1", |f| {
        f.iter().any(|l| l.contains("0x6/0xf"))
    });
    assert_eq!(
        port_names(&bed),
        vec!["r1", "shared0", "veth-pa", "veth-pb"]
    );
    // two's return port moves to r2: r1 (and its Classifier flow) must go.
    bed.write(
        "tcs.yaml",
        &format!(
            "{}---\n{}",
            tc_yaml("one", "Egress", "Mirror", "device: {name: shared0}", None),
            tc_yaml(
                "two",
                "Ingress",
                "Redirect",
                "device: {name: shared0}",
                Some("device: {name: r2}")
            )
        ),
    );
    let f = bed.wait_flows("return flow moved to r2", |f| {
        let r2 = bed
            .sb
            .try_vsctl(&["get", "Interface", "r2", "ofport"])
            .unwrap_or_default();
        let r2 = r2.trim();
        f.iter().filter(|l| l.contains("0x6/0xf")).count() == 1
            && f.iter()
                .any(|l| l.contains(&format!("in_port={r2} actions=set_field:0x6/0xf")))
    });
    common::wait_for(Duration::from_secs(10), "r1 deleted", || {
        (!port_names(&bed).contains(&"r1".to_string())).then_some(())
    });
    // Deleting "one" keeps the shared target: "two" still uses it.
    bed.write(
        "tcs.yaml",
        &tc_yaml(
            "two",
            "Ingress",
            "Redirect",
            "device: {name: shared0}",
            Some("device: {name: r2}"),
        ),
    );
    bed.wait_flows("one's flows gone", |f| {
        f.iter()
            .filter(|l| l.contains("table=3, priority=200"))
            .count()
            == 1
    });
    assert!(port_names(&bed).contains(&"shared0".to_string()), "{f:#?}");
    bed.remove("tcs.yaml");
    common::wait_for(
        Duration::from_secs(10),
        "last user gone → ports deleted",
        || (port_names(&bed) == vec!["veth-pa", "veth-pb"]).then_some(()),
    );
    assert!(bed.tc_flows().is_empty());
}

#[test]
fn vswitchd_kill9_flows_and_no_flood_come_back() {
    if !privileged("vswitchd_kill9_flows_and_no_flood_come_back") {
        return;
    }
    let bed = bed_with_pods();
    let _c = bed.add_collector(&["coll0"]);
    let _t = start(&bed, "tether.log");
    bed.write(
        "tc.yaml",
        &tc_yaml("m", "Both", "Mirror", "device: {name: coll0}", None),
    );
    bed.wait_flows("mark flows", |f| f.len() == 2);
    let before = bed.sb.dump_flows("br-int", None);
    bed.sb.kill9("ovs-vswitchd");
    let t0 = std::time::Instant::now();
    bed.sb.start_vswitchd();
    let took = common::wait_for(Duration::from_secs(20), "flows and no-flood back", || {
        let now = bed.sb.try_dump_flows("br-int", None).ok()?;
        (now == before && bed.no_flood("coll0")).then(|| t0.elapsed())
    });
    eprintln!("flows and no-flood back {took:?} after the vswitchd restart");
    assert_eq!(bed.ping(0, 1, 3), 3);
}

#[test]
fn tether_restart_loses_no_packet_and_duplicates_no_port() {
    if !privileged("tether_restart_loses_no_packet_and_duplicates_no_port") {
        return;
    }
    let bed = bed_with_pods();
    let _c = bed.add_collector(&["coll0"]);
    let mut t = start(&bed, "tether.log");
    bed.write(
        "tc.yaml",
        &tc_yaml("m", "Egress", "Mirror", "device: {name: coll0}", None),
    );
    bed.wait_flows("mark flows", |f| f.len() == 1);
    t.wait_log("first full sync done", Duration::from_secs(10));
    let ports = port_names(&bed);
    // 50 pps for 4 s while tether stops and starts again.
    let ping = bed.pods[0]
        .ns
        .command(&[
            "ping",
            "-c",
            "200",
            "-i",
            "0.02",
            "-W",
            "1",
            "-q",
            &bed.pods[1].ip,
        ])
        .output();
    let restart = std::thread::scope(|s| {
        let h = s.spawn(|| ping);
        std::thread::sleep(Duration::from_millis(1000));
        assert_eq!(t.stop(), Some(0), "SIGTERM is a clean stop (exit 0)");
        std::thread::sleep(Duration::from_millis(500));
        let t2 = start(&bed, "tether2.log");
        t2.wait_log("first full sync done", Duration::from_secs(10));
        (h.join().unwrap(), t2)
    });
    let (out, t2) = restart;
    let text = String::from_utf8_lossy(&out.unwrap().stdout).into_owned();
    assert!(
        text.contains("200 packets transmitted, 200 received"),
        "{text}"
    );
    assert_eq!(port_names(&bed), ports, "no duplicate or lost ports");
    // The new round replaced the old one: every flow carries round 2.
    let all = bed.sb.dump_flows("br-int", None);
    assert!(all.iter().all(|l| l.starts_with("cookie=0x2")), "{all:#?}");
    assert_eq!(
        bed.sb
            .vsctl(&["br-get-external-id", "br-int", "roundNum"])
            .trim(),
        "2"
    );
    drop(t2);
}

/// The same objects through the test API server (bearer token, list + chunked watch), not
/// the manifests dir: a TC created, updated and deleted over the API drives the flows.
#[test]
fn mirror_from_the_api_server() {
    if !privileged("mirror_from_the_api_server") {
        return;
    }
    let mut bed = Bed::new();
    bed.add_pod("pa", 1);
    bed.add_pod("pb", 2);
    let coll = bed.add_collector(&["coll0"]);
    let srv = apiserver::ApiServer::start(apiserver::Options {
        tokens: vec!["s3cret-node-token".into()],
        require_auth: true,
        ..Default::default()
    });
    let api = common::relay::ApiInNetns::new(
        bed.sb.ns(),
        bed.sb.dir(),
        &srv.url(),
        Some("s3cret-node-token"),
    );
    let kubeconfig = &api.kubeconfig;
    srv.create(
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns1"}}),
    );
    for (name, app) in [("pa", "web"), ("pb", "db")] {
        srv.create(serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns1", "labels": {"app": app}},
            "spec": {"nodeName": "vm1"}}));
    }
    let tc = |direction: &str| {
        serde_json::json!({"apiVersion": "crd.antrea.io/v1alpha2", "kind": "TrafficControl",
            "metadata": {"name": "api-mirror"},
            "spec": {"appliedTo": {"podSelector": {"matchLabels": {"app": "web"}}},
                     "direction": direction, "action": "Mirror",
                     "targetPort": {"device": {"name": "coll0"}}}})
    };
    let mut args = bed.tether_args();
    let m = args.iter().position(|a| a == "--manifests").unwrap();
    args[m] = "--kubeconfig".into();
    args[m + 1] = kubeconfig.to_str().unwrap().into();
    args.push("--allow-plain-http".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let t = Tether::start(bed.sb.ns(), &args, &bed.sb.path("tether.log"));
    srv.create(tc("Egress"));
    let pa = bed.ofport("veth-pa");
    bed.wait_flows("egress mark flow from the API", |f| {
        f.len() == 1 && f[0].contains(&format!("in_port={pa} "))
    });
    let req = Capture::start(
        &coll,
        "eth0",
        "icmp[icmptype] == icmp-echo and src 203.0.113.1",
        bed.sb.path("req.txt"),
    );
    assert_eq!(bed.ping(0, 1, 4), 4);
    assert_eq!(req.count(), 4, "mirrored requests");
    srv.update(tc("Both"));
    bed.wait_flows("both directions after the update", |f| f.len() == 2);
    srv.delete("trafficcontrols", "api-mirror");
    bed.wait_flows("flows gone after the delete", |f| f.is_empty());
    common::wait_for(Duration::from_secs(10), "target port released", || {
        (port_names(&bed) == vec!["veth-pa", "veth-pb"]).then_some(())
    });
    assert!(
        !t.log().contains("s3cret-node-token"),
        "the token never reaches the log"
    );
}

/// True once `dev` in the OVS namespace is administratively up.
fn link_up(bed: &Bed, dev: &str) -> bool {
    bed.sb
        .ns()
        .try_ip(&["-o", "link", "show", "dev", dev])
        .is_ok_and(|l| l.contains("<") && l.split('>').next().unwrap_or("").contains(",UP"))
}

/// Antrea's `TestMirrorToLocal`: a Mirror TC, direction Both, selecting one of two Pods,
/// target `ovsInternal`. A capture on that port (tcpdump in the OVS namespace) sees exactly
/// one copy of each packet of the selected Pod (5 pings: 10 copies) while the Pods' ping
/// keeps working — and again after ovs-vswitchd is killed and restarted (it re-creates the
/// port's netdev down). Before this change the port stayed DOWN and tcpdump could not
/// even open it.
#[test]
fn mirror_to_local_ovs_internal_port() {
    if !privileged("mirror_to_local_ovs_internal_port") {
        return;
    }
    let bed = bed_with_pods();
    let t = start(&bed, "tether.log");
    bed.write(
        "tc.yaml",
        &tc_yaml(
            "mirror-to-local",
            "Both",
            "Mirror",
            "ovsInternal: {name: tap0}",
            None,
        ),
    );
    let pa = bed.ofport("veth-pa");
    bed.wait_flows("mark flows", |f| {
        f.iter().any(|l| l.contains(&format!("in_port={pa} ")))
            && f.iter().any(|l| l.contains(&format!("reg1={pa:#x} ")))
    });
    common::wait_for(Duration::from_secs(10), "tap0 up", || {
        link_up(&bed, "tap0").then_some(())
    });
    let count_copies = |file: &str| {
        let cap = Capture::start(
            bed.sb.ns(),
            "tap0",
            "icmp and host 203.0.113.1",
            bed.sb.path(file),
        );
        assert_eq!(bed.ping(0, 1, 5), 5, "the Pods' ping keeps working");
        cap.count()
    };
    assert_eq!(
        count_copies("c1.txt"),
        10,
        "one copy of each request and reply"
    );
    // The switch restarts: it re-creates tap0 down; tether brings it up again.
    bed.sb.kill9("ovs-vswitchd");
    bed.sb.start_vswitchd();
    t.wait_log("openflow reconnected", Duration::from_secs(20));
    common::wait_for(Duration::from_secs(15), "tap0 up after the restart", || {
        link_up(&bed, "tap0").then_some(())
    });
    bed.wait_flows("mark flows after the restart", |f| {
        f.iter().any(|l| l.contains(&format!("in_port={pa} ")))
    });
    assert_eq!(count_copies("c2.txt"), 10, "after the restart");
    assert!(bed.no_flood("tap0"));
}

/// A Redirect TC whose target and return ports are both `ovsInternal`, with a middlebox
/// bridging them as the IDS cookbook's Suricata does (here a Linux bridge between the two
/// netdevs in the OVS namespace): ping works through it, and every packet went through
/// the middlebox.
#[test]
fn redirect_through_ovs_internal_ports_and_a_middlebox() {
    if !privileged("redirect_through_ovs_internal_ports_and_a_middlebox") {
        return;
    }
    let bed = bed_with_pods();
    let _t = start(&bed, "tether.log");
    bed.write(
        "tc.yaml",
        &tc_yaml(
            "redirect-to-local",
            "Both",
            "Redirect",
            "ovsInternal: {name: tap-in}",
            Some("ovsInternal: {name: tap-out}"),
        ),
    );
    bed.wait_flows("return-port flow", |f| {
        f.iter().any(|l| l.contains("set_field:0x6/0xf->reg0"))
    });
    for dev in ["tap-in", "tap-out"] {
        common::wait_for(Duration::from_secs(10), &format!("{dev} up"), || {
            link_up(&bed, dev).then_some(())
        });
    }
    let vm = bed.sb.ns();
    vm.ip(&["link", "add", "mb", "type", "bridge", "ageing_time", "0"]);
    vm.ip(&["link", "set", "tap-in", "master", "mb"]);
    vm.ip(&["link", "set", "tap-out", "master", "mb"]);
    vm.ip(&["link", "set", "mb", "up"]);
    let through = Capture::start(
        vm,
        "tap-in",
        "icmp and host 203.0.113.1",
        bed.sb.path("m.txt"),
    );
    assert_eq!(
        bed.ping(0, 1, 5),
        5,
        "redirected traffic comes back through the middlebox"
    );
    assert_eq!(
        through.count(),
        10,
        "requests and replies went through the middlebox"
    );
}

/// ERSPAN options mean what the CRD says: ovs-vswitchd parses `erspan_idx` and
/// `erspan_hwid` as hex, and `ovs-appctl dpif/show` prints what it parsed. For hardwareID
/// 0, 9, 10, 63 and index 0, 15, 0xFFFFF the switch holds the CRD's value (before, the
/// hardware ID was written in decimal: 10 became 0x10 = 16, 63 was refused).
#[test]
fn erspan_values_reach_ovs_as_the_crd_says() {
    if !privileged("erspan_values_reach_ovs_as_the_crd_says") {
        return;
    }
    let bed = bed_with_pods();
    let _t = start(&bed, "tether.log");
    // One remote IP each: two ERSPAN ports to one remote with one key would clash.
    let cases: Vec<(String, String, &str, u32)> = [
        ("hw0", 2, "hardwareID: 0", "erspan_hwid", 0u32),
        ("hw9", 2, "hardwareID: 9", "erspan_hwid", 9),
        ("hw10", 2, "hardwareID: 10", "erspan_hwid", 10),
        ("hw63", 2, "hardwareID: 63", "erspan_hwid", 63),
        ("ix0", 1, "index: 0", "erspan_idx", 0),
        ("ix15", 1, "index: 15", "erspan_idx", 15),
        ("ixmax", 1, "index: 1048575", "erspan_idx", 0xF_FFFF),
    ]
    .iter()
    .enumerate()
    .map(|(i, (name, ver, field, key, want))| {
        let dir = if *ver == 2 { ", dir: 1" } else { "" };
        (
            name.to_string(),
            format!(
                "erspan: {{remoteIP: 198.51.100.{}, sessionID: 3, version: {ver}{dir}, {field}}}",
                i + 20
            ),
            *key,
            *want,
        )
    })
    .collect();
    let mut all = String::new();
    for (name, target, _, _) in &cases {
        all.push_str(&tc_yaml(name, "Egress", "Mirror", target, None));
        all.push_str("---\n");
    }
    bed.write("tcs.yaml", &all);
    common::wait_for(Duration::from_secs(15), "seven ERSPAN ports", || {
        (port_names(&bed)
            .iter()
            .filter(|p| p.starts_with("erspan-"))
            .count()
            == 7)
            .then_some(())
    });
    let show = common::wait_for(Duration::from_secs(10), "dpif/show with every port", || {
        let s = bed.sb.appctl(&["dpif/show"]);
        (s.matches("erspan").count() >= 7).then_some(s)
    });
    for (i, (name, _, key, want)) in cases.iter().enumerate() {
        let remote = format!("remote_ip=198.51.100.{}", i + 20);
        let line = show
            .lines()
            .find(|l| l.contains(&remote))
            .unwrap_or_else(|| panic!("{name}: no port to {remote} in\n{show}"));
        let value = line
            .split([',', ' ', '(', ')'])
            .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("{name}: no {key} in {line}"));
        let parsed = u32::from_str_radix(value.trim_start_matches("0x"), 16).unwrap();
        assert_eq!(parsed, *want, "{name}: {line}");
    }
}

/// Tunnel targets with an IPv6 `remoteIP`: GRE and ERSPAN become OVS's `ip6gre` and
/// `ip6erspan` (plain `gre`/`erspan` vports carry IPv4 only on the kernel datapath,
/// Antrea #3150), VXLAN and Geneve keep their type; each port keeps Antrea's name, gets
/// an ofport and no error. (Before: `gre` and `erspan` for either family.)
#[test]
fn ipv6_tunnel_remotes_get_the_ip6_types() {
    if !privileged("ipv6_tunnel_remotes_get_the_ip6_types") {
        return;
    }
    let bed = bed_with_pods();
    let _t = start(&bed, "tether.log");
    let cases = [
        (
            "v6gre",
            "gre: {remoteIP: \"2001:db8:5::2\", key: 7}",
            "gre-",
            "ip6gre",
        ),
        (
            "v6erspan1",
            "erspan: {remoteIP: \"2001:db8:5::3\", sessionID: 3, version: 1, index: 15}",
            "erspan-",
            "ip6erspan",
        ),
        (
            "v6erspan2",
            "erspan: {remoteIP: \"2001:db8:5::4\", sessionID: 4, version: 2, dir: 1, hardwareID: 9}",
            "erspan-",
            "ip6erspan",
        ),
        (
            "v6vxlan",
            "vxlan: {remoteIP: \"2001:db8:5::5\"}",
            "vxlan-",
            "vxlan",
        ),
        (
            "v6geneve",
            "geneve: {remoteIP: \"2001:db8:5::6\"}",
            "geneve-",
            "geneve",
        ),
    ];
    let mut all = String::new();
    for (name, target, _, _) in &cases {
        all.push_str(&tc_yaml(name, "Egress", "Mirror", target, None));
        all.push_str("---\n");
    }
    bed.write("tcs.yaml", &all);
    for (i, (name, _, prefix, want)) in cases.iter().enumerate() {
        let remote = format!("2001:db8:5::{}", i + 2);
        let row = common::wait_for(
            Duration::from_secs(15),
            &format!("{name}: a port to {remote} with an ofport"),
            || {
                let v = bed
                    .sb
                    .vsctl_json("Interface", None, "name,type,options,ofport,error");
                v["data"].as_array()?.iter().find_map(|r| {
                    let opts = r[2].to_string();
                    (opts.contains(&format!("\"{remote}\"")) && r[3].as_i64().unwrap_or(0) > 0)
                        .then(|| r.clone())
                })
            },
        );
        let port = row[0].as_str().unwrap();
        assert!(port.starts_with(prefix), "{name}: port name {port}");
        assert_eq!(row[1], serde_json::json!(want), "{name}: {row}");
        assert_eq!(
            row[4],
            serde_json::json!(["set", []]),
            "{name}: error {row}"
        );
    }
}

fn flow_restore_wait(bed: &Bed) -> bool {
    bed.sb
        .vsctl(&["get", "Open_vSwitch", ".", "other_config"])
        .contains("flow-restore-wait")
}

/// Antrea's containerised OVS starts with `other_config:flow-restore-wait=true`: the
/// switch does not forward until its controller clears it. tether clears it after its
/// first full sync (not before: with the manifests directory not there yet, it stays set
/// while tether is connected), and again after the replay that follows a restart of the
/// switch made with the key set. Before this change it was never cleared.
#[test]
fn flow_restore_wait_is_cleared_once_the_flows_are_in() {
    if !privileged("flow_restore_wait_is_cleared_once_the_flows_are_in") {
        return;
    }
    let bed = bed_with_pods();
    let restart_waiting = || {
        bed.sb.vsctl(&[
            "set",
            "Open_vSwitch",
            ".",
            "other_config:flow-restore-wait=true",
        ]);
        bed.sb.kill9("ovs-vswitchd");
        bed.sb.start_vswitchd();
    };
    restart_waiting();
    assert_eq!(
        bed.ping(0, 1, 2),
        0,
        "the switch forwards nothing while it waits"
    );
    // The source is not readable yet: connected, but no first full sync.
    let away = bed.manifests.with_extension("later");
    std::fs::rename(&bed.manifests, &away).unwrap();
    let t = start(&bed, "tether.log");
    t.wait_log("cannot list the directory", Duration::from_secs(15));
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        flow_restore_wait(&bed),
        "cleared before the first full sync"
    );
    std::fs::rename(&away, &bed.manifests).unwrap();
    t.wait_log(
        "cleared Open_vSwitch other_config:flow-restore-wait",
        Duration::from_secs(15),
    );
    assert!(!flow_restore_wait(&bed));
    // ovs-vswitchd starts forwarding a moment after it sees the key go (measured ~1 s).
    common::wait_for(Duration::from_secs(10), "forwarding", || {
        (bed.ping(0, 1, 1) == 1).then_some(())
    });
    assert_eq!(bed.ping(0, 1, 3), 3);
    // The switch restarted the way Antrea's container does: cleared again after the replay.
    restart_waiting();
    common::wait_for(
        Duration::from_secs(20),
        "flow-restore-wait cleared again",
        || (!flow_restore_wait(&bed)).then_some(()),
    );
    common::wait_for(Duration::from_secs(10), "forwarding again", || {
        (bed.ping(0, 1, 1) == 1).then_some(())
    });
    assert_eq!(bed.ping(0, 1, 3), 3);
}
