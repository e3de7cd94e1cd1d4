//! Campaign 3: random API faults during random object changes, checked directly and
//! against a fresh, fault-free start.

use super::*;

// ---------------------------------------------------------------------------------------
// Campaign 3: API faults during random changes

fn random_fault(rng: &mut Rng) -> (&'static str, Fault) {
    let after = rng.below(3);
    let (name, action, on_list) = match rng.below(10) {
        0 => (
            "delay",
            FaultAction::Delay(Duration::from_millis(50 + rng.below(400) as u64)),
            false,
        ),
        1 => ("status-500", FaultAction::Status(500), false),
        2 => ("status-503", FaultAction::Status(503), rng.below(2) == 0),
        3 => ("drop", FaultAction::Drop, rng.below(2) == 0),
        4 => ("http-410", FaultAction::HttpGone, false),
        5 => ("error-410", FaultAction::ErrorGone, false),
        6 => ("cut-mid-chunk", FaultAction::CutMidChunk { after }, false),
        7 => ("garbage-line", FaultAction::Garbage { after }, false),
        8 => (
            "status-line",
            FaultAction::StatusLine {
                after,
                code: *rng.pick(&[410, 500]),
            },
            false,
        ),
        _ => ("end-stream", FaultAction::EndStream { after }, false),
    };
    let f = if on_list {
        Fault::list(action)
    } else if matches!(
        action,
        FaultAction::Delay(_) | FaultAction::Drop | FaultAction::Status(_)
    ) {
        Fault::any(action)
    } else {
        Fault::watch(action)
    };
    (name, f)
}

#[test]
fn api_fault_campaign() {
    if !privileged("api_fault_campaign") {
        return;
    }
    let total = counts().api_faults;
    let mut rng = Rng::new("api-faults");
    let bed = Bed::new();
    let srv = ApiServer::start(Options {
        // A short history, so resumed watches meet 410 on their own too.
        history: 20,
        // Busy streams, so that faults "after N events" fire without waiting a minute.
        bookmark_every: Some(Duration::from_millis(200)),
        ..Options::default()
    });
    let api = common::relay::ApiInNetns::new(bed.sb.ns(), bed.sb.dir(), &srv.url(), None);
    let kubeconfig = &api.kubeconfig;
    let src = [
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--allow-plain-http",
    ];

    srv.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns1"}}));
    let mut pods: BTreeMap<String, String> = BTreeMap::new();
    for p in ["pa", "pb"] {
        srv.create(pod_json(p, "none"));
        pods.insert(p.into(), "none".into());
    }
    let mut tcs: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut t = bed.start(&src, "tether.log");
    t.wait_log("first full sync done", Duration::from_secs(20));

    let names = ["tc0", "tc1", "tc2"];
    let dirs = ["Ingress", "Egress", "Both"];
    let targets = ["coll0", "coll1"];
    let mut injected = 0usize;
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    let mut changes = 0usize;
    let started = Instant::now();
    while injected < total {
        let batch = (total - injected).min(1 + rng.below(6));
        for _ in 0..batch {
            let (k, f) = random_fault(&mut rng);
            *kinds.entry(k).or_insert(0) += 1;
            srv.inject(f);
        }
        injected += batch;
        for _ in 0..1 + rng.below(3) {
            changes += 1;
            match rng.below(3) {
                0 => {
                    let p = *rng.pick(&["pa", "pb"]);
                    let sel = *rng.pick(&["tc0", "tc1", "tc2", "none"]);
                    srv.update(pod_json(p, sel));
                    pods.insert(p.into(), sel.into());
                }
                1 if !tcs.is_empty() && rng.below(3) == 0 => {
                    let name = tcs.keys().nth(rng.below(tcs.len())).unwrap().clone();
                    srv.delete("trafficcontrols", &name);
                    tcs.remove(&name);
                }
                _ => {
                    let name = *rng.pick(&names);
                    let (d, tg) = (*rng.pick(&dirs), *rng.pick(&targets));
                    let obj = tc_json(name, d, tg);
                    if tcs.contains_key(name) {
                        srv.update(obj);
                    } else {
                        srv.create(obj);
                    }
                    tcs.insert(name.into(), (d.into(), tg.into()));
                }
            }
        }
        // Let tether consume the faults (each costs it a request and usually a backoff).
        let mut seen = (srv.pending_faults(), Instant::now());
        while srv.pending_faults() > 4 {
            std::thread::sleep(Duration::from_millis(20));
            let p = srv.pending_faults();
            if p != seen.0 {
                seen = (p, Instant::now());
            } else if seen.1.elapsed() > Duration::from_millis(1500) {
                // Only request-time faults left and every watch idle: an ERROR 410 on an
                // open stream makes that kind relist, which meets list faults too.
                srv.inject(Fault::watch(FaultAction::ErrorGone));
                *kinds.entry("error-410").or_insert(0) += 1;
                injected += 1;
                seen = (p + 1, Instant::now());
            }
        }
        std::thread::sleep(Duration::from_millis(rng.below(60) as u64));
        assert!(t.running(), "tether exited\n{}", t.log());
    }
    // Drain: every injected fault meets a request. Request-time faults wait for a new
    // request, which idle watches do not make: an extra ERROR 410 (counted) forces a relist.
    let mut nudges = 0usize;
    wait_ok(
        Duration::from_secs(180),
        "all faults consumed",
        || match srv.pending_faults() {
            0 => Ok(()),
            n => {
                std::thread::sleep(Duration::from_millis(1500));
                if srv.pending_faults() == n {
                    srv.inject(Fault::watch(FaultAction::ErrorGone));
                    nudges += 1;
                }
                Err(format!("{n} pending; requests: {:?}", last_requests(&srv)))
            }
        },
    );
    injected += nudges;
    let fault_secs = started.elapsed().as_secs();
    let e = expect(&tcs, &pods);
    let t0 = Instant::now();
    let conv = wait_ok(Duration::from_secs(90), "final state", || {
        matches_tc_only(&bed, &e).map(|()| t0.elapsed())
    });
    let faulted = stripped(&bed.try_flows().unwrap());
    let faulted_ports = bed.rows().unwrap();
    // The oracle: a fresh tether from the same objects, without faults.
    t.kill9();
    let t2 = bed.start(&src, "tether-fresh.log");
    t2.wait_log("first full sync done", Duration::from_secs(30));
    wait_for(
        Duration::from_secs(20),
        "fresh start equals the faulted end state",
        || (stripped(&bed.try_flows()?) == faulted && bed.rows()? == faulted_ports).then_some(()),
    );
    let requests = srv.requests().len();
    result(format!(
        "faults api: faults={injected} nudges={nudges} changes={changes} requests={requests} fault_phase={fault_secs}s converge={}ms final_state=equal fresh_start=equal kinds={kinds:?}",
        millis(conv)
    ));
}

fn last_requests(srv: &ApiServer) -> Vec<String> {
    let r = srv.requests();
    r[r.len().saturating_sub(8)..].to_vec()
}

/// `matches` without the EN (campaign 3 has no ExternalNode).
fn matches_tc_only(bed: &Bed, e: &Expect) -> Result<(), String> {
    let flows = bed.try_flows().ok_or("no flows")?;
    let marks: Vec<&String> = flows
        .iter()
        .filter(|l| l.contains("table=80, priority=200"))
        .collect();
    let mut want = 0;
    for (pod, dir, target) in &e.marks {
        let p = bed.try_ofport(pod).ok_or("pod ofport")?;
        let t = bed.try_ofport(target).ok_or(format!("no port {target}"))?;
        let keys: Vec<String> = match dir.as_str() {
            "Ingress" => vec![format!("reg1={p:#x} ")],
            "Egress" => vec![format!("in_port={p} ")],
            _ => vec![format!("reg1={p:#x} "), format!("in_port={p} ")],
        };
        for k in keys {
            want += 1;
            if !marks
                .iter()
                .any(|l| l.contains(&k) && l.contains(&format!("set_field:{t:#x}->reg9,")))
            {
                return Err(format!("no mark flow {k}→{target}: {marks:#?}"));
            }
        }
    }
    if marks.len() != want {
        return Err(format!(
            "{} mark flows, want {want}: {marks:#?}",
            marks.len()
        ));
    }
    let (ports, ifaces, on_bridge) = bed.rows().ok_or("no rows")?;
    let mut want_ports: Vec<String> = ["br-int", "veth-pa", "veth-pb"]
        .iter()
        .map(|s| (*s).to_string())
        .chain(e.targets.iter().cloned())
        .collect();
    want_ports.sort();
    let got: Vec<String> = ports.keys().cloned().collect();
    if got != want_ports || ports.values().any(|n| *n != 1) || ifaces != ports {
        return Err(format!(
            "ports {ports:?} interfaces {ifaces:?}, want {want_ports:?}"
        ));
    }
    if on_bridge + 1 != want_ports.len() {
        return Err(format!("{on_bridge} ports on br-int"));
    }
    Ok(())
}

/// Flows without their cookies (the cookie carries tether's round, new on each start).
fn stripped(flows: &[String]) -> Vec<String> {
    let mut v: Vec<String> = flows
        .iter()
        .map(|l| match l.split_once(", ") {
            Some((c, rest)) if c.starts_with("cookie=") => rest.to_string(),
            _ => l.clone(),
        })
        .collect();
    v.sort();
    v
}
