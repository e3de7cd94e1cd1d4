//! Campaign 4: tether `kill -9` at random moments during churn, with a sampler that the VM
//! never loses its addresses or default routes.

use super::*;

// ---------------------------------------------------------------------------------------
// Campaign 4: tether kill -9 during churn

#[test]
fn tether_kill9_campaign() {
    if !privileged("tether_kill9_campaign") {
        return;
    }
    let n = counts().tether_kills;
    let mut rng = Rng::new("tether-kill9");
    let bed = Bed::new();
    let mut pods: BTreeMap<String, String> = [("pa", "m"), ("pb", "none")]
        .iter()
        .map(|(a, b)| ((*a).to_string(), (*b).to_string()))
        .collect();
    let mut tc = ("Both".to_string(), "coll0".to_string());
    let write_all = |pods: &BTreeMap<String, String>, tc: &(String, String)| {
        let p: Vec<(&str, &str)> = pods.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        bed.write("pods.yaml", &pods_yaml(&p));
        bed.write("tc.yaml", &tc_yaml("m", &tc.0, &tc.1));
    };
    write_all(&pods, &tc);
    bed.write("en.yaml", EN_YAML);
    let src = bed.manifests_source();
    let src: Vec<&str> = src.iter().map(String::as_str).collect();
    let t = bed.start(&src, "tether.log");
    attach(&bed);
    drop(t);

    // The sampler: the VM's addresses and routes, every 50 ms, for the whole campaign.
    let stop = Arc::new(AtomicBool::new(false));
    let samples = Arc::new(AtomicU64::new(0));
    let vm_name = bed.sb.ns().name().to_string();
    let sampler = {
        let (stop, samples) = (stop.clone(), samples.clone());
        std::thread::spawn(move || {
            let mut bad = Vec::new();
            let vm = VmProbe(vm_name);
            while !stop.load(Ordering::Relaxed) {
                if let Err(e) = vm.check() {
                    bad.push(e);
                }
                samples.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(common::patience(Duration::from_millis(50)));
            }
            bad
        })
    };
    let mut kill_after = Vec::new();
    for i in 0..n {
        let mut t = bed.start(&src, "tether.log");
        // Churn while it starts: the TC's direction/target and the Pods' labels change.
        let end = Instant::now() + Duration::from_millis(rng.below(1500) as u64);
        while Instant::now() < end {
            match rng.below(2) {
                0 => {
                    tc = (
                        (*rng.pick(&["Ingress", "Egress", "Both"])).to_string(),
                        (*rng.pick(&["coll0", "coll1"])).to_string(),
                    );
                }
                _ => {
                    let p = (*rng.pick(&["pa", "pb"])).to_string();
                    pods.insert(p, (*rng.pick(&["m", "none"])).to_string());
                }
            }
            write_all(&pods, &tc);
            std::thread::sleep(Duration::from_millis(rng.below(300) as u64));
        }
        kill_after.push(end);
        assert!(t.running(), "run {i}: tether exited\n{}", t.log());
        t.kill9();
    }
    // The last start: converges to what the final manifests imply.
    let t = bed.start(&src, "tether.log");
    let mut tcs = BTreeMap::new();
    tcs.insert("m".to_string(), tc.clone());
    let e = expect(&tcs, &pods);
    wait_ok(
        Duration::from_secs(30),
        "converged after the last kill",
        || {
            matches(&bed, &e)?;
            if bed.en_attached() {
                Ok(())
            } else {
                Err("EN not attached".into())
            }
        },
    );
    reachable(&bed);
    stop.store(true, Ordering::Relaxed);
    let bad = sampler.join().unwrap();
    let samples = samples.load(Ordering::Relaxed);
    assert!(
        bad.is_empty(),
        "the VM lost addresses or routes in {} of {samples} samples: {:?}",
        bad.len(),
        &bad[..bad.len().min(5)]
    );
    assert!(t.running());
    result(format!(
        "faults tether-kill9: kills={n} converged=1/1 final_state=expected vm_samples={samples} vm_lost=0"
    ));
}

/// The VM namespace by name, for the sampler thread (a `Netns` guard is not `Send`-shared).
struct VmProbe(String);

impl VmProbe {
    fn ip(&self, args: &[&str]) -> Result<String, String> {
        let out = std::process::Command::new("ip")
            .args(["-n", &self.0])
            .args(args)
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn check(&self) -> Result<(), String> {
        let addrs = self.ip(&["-j", "addr", "show"])?;
        for a in ["\"192.0.2.10\"", "\"2001:db8:1::10\""] {
            if !addrs.contains(a) {
                return Err(format!("address {a} missing"));
            }
        }
        let r4 = self.ip(&["-j", "route", "show", "default"])?;
        let r6 = self.ip(&["-j", "-6", "route", "show", "default"])?;
        if !r4.contains("\"192.0.2.1\"") || !r6.contains("\"2001:db8:1::1\"") {
            return Err(format!("default routes missing: {r4} {r6}"));
        }
        Ok(())
    }
}
