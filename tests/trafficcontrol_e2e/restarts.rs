//! Restarts around tether: ovs-vswitchd killed, tether restarted under traffic, and OVS's
//! flow-restore-wait cleared once the flows are in.

use super::*;

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
