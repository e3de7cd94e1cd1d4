//! Mirror TrafficControls: to a device in each direction, from the test API server, and to
//! a local OVS internal port.

use super::*;

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
                .filter(|l| l.contains("table=80, priority=200"))
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
