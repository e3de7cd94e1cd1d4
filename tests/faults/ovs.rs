//! Campaigns 1 and 2: ovs-vswitchd `kill -9` and ovsdb-server restarts.

use super::*;

// ---------------------------------------------------------------------------------------
// Campaign 1: ovs-vswitchd kill -9

#[test]
fn vswitchd_kill9_campaign() {
    if !privileged("vswitchd_kill9_campaign") {
        return;
    }
    let n = counts().vswitchd_kills;
    let bed = Bed::new();
    bed.write("pods.yaml", &pods_yaml(&[("pa", "m"), ("pb", "none")]));
    bed.write("tc.yaml", &tc_yaml("m", "Both", "coll0"));
    bed.write("en.yaml", EN_YAML);
    let src = bed.manifests_source();
    let src: Vec<&str> = src.iter().map(String::as_str).collect();
    let t = bed.start(&src, "tether.log");
    attach(&bed);
    let mut tcs = BTreeMap::new();
    tcs.insert("m".to_string(), ("Both".to_string(), "coll0".to_string()));
    let pods: BTreeMap<String, String> = [("pa", "m"), ("pb", "none")]
        .iter()
        .map(|(a, b)| ((*a).to_string(), (*b).to_string()))
        .collect();
    let e = expect(&tcs, &pods);
    wait_ok(Duration::from_secs(15), "TC programmed", || {
        matches(&bed, &e)
    });
    let before = bed.try_flows().unwrap();
    let mut times = Vec::new();
    for i in 0..n {
        bed.sb.kill9("ovs-vswitchd");
        let t0 = Instant::now();
        bed.sb.start_vswitchd();
        let took = wait_for(
            Duration::from_secs(30),
            &format!("kill {i}: flows and no-flood back"),
            || (bed.try_flows()? == before && bed.no_flood("coll0")?).then(|| t0.elapsed()),
        );
        times.push(took);
        assert!(bed.en_attached(), "kill {i}: EN flows");
        reachable(&bed);
        assert!(t.running(), "kill {i}: tether exited\n{}", t.log());
    }
    result(format!(
        "faults vswitchd-kill9: runs={n} converged={n} reachable={n} {}",
        summary(&times, Duration::from_secs(2))
    ));
}

// ---------------------------------------------------------------------------------------
// Campaign 2: ovsdb-server restart

#[test]
fn ovsdb_restart_campaign() {
    if !privileged("ovsdb_restart_campaign") {
        return;
    }
    let n = counts().ovsdb_restarts;
    let bed = Bed::new();
    let pods: BTreeMap<String, String> = [("pa", "m"), ("pb", "m")]
        .iter()
        .map(|(a, b)| ((*a).to_string(), (*b).to_string()))
        .collect();
    bed.write("pods.yaml", &pods_yaml(&[("pa", "m"), ("pb", "m")]));
    bed.write("tc.yaml", &tc_yaml("m", "Ingress", "coll0"));
    bed.write("en.yaml", EN_YAML);
    let src = bed.manifests_source();
    let src: Vec<&str> = src.iter().map(String::as_str).collect();
    let t = bed.start(&src, "tether.log");
    attach(&bed);
    let mut times = Vec::new();
    let mut db_times = Vec::new();
    for i in 0..n {
        bed.sb.kill9("ovsdb-server");
        bed.sb.start_ovsdb();
        // A change that needs OVSDB: the TC moves to the other collector port.
        let (dir, target) = if i % 2 == 0 {
            ("Egress", "coll1")
        } else {
            ("Ingress", "coll0")
        };
        let t0 = Instant::now();
        bed.write("tc.yaml", &tc_yaml("m", dir, target));
        let mut tcs = BTreeMap::new();
        tcs.insert("m".to_string(), (dir.to_string(), target.to_string()));
        let e = expect(&tcs, &pods);
        // tether's part: its transaction is in the restarted database. The rest (ofport,
        // flows) also waits for ovs-vswitchd's own reconnect, whose backoff (1 s doubling
        // to 8 s) grows when restarts come quickly.
        let in_db = wait_for(
            Duration::from_secs(30),
            &format!("restart {i}: Port {target} in the database"),
            || {
                let (ports, _, _) = bed.rows()?;
                ports.contains_key(target).then(|| t0.elapsed())
            },
        );
        db_times.push(in_db);
        let took = wait_ok(
            Duration::from_secs(30),
            &format!("restart {i}: ports and flows for {target}"),
            || matches(&bed, &e).map(|()| t0.elapsed()),
        );
        times.push(took);
        assert!(bed.en_attached(), "restart {i}: EN flows");
        assert!(t.running(), "restart {i}: tether exited\n{}", t.log());
    }
    reachable(&bed);
    result(format!(
        "faults ovsdb-restart: runs={n} converged={n} duplicate_rows=0 lost_rows=0 db_p50={}ms db_max={}ms {}",
        millis(percentile(&db_times, 50)),
        millis(percentile(&db_times, 100)),
        summary(&times, Duration::from_secs(2))
    ));
}
