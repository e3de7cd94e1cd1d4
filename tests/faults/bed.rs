//! The campaigns' bed (the ExternalNode VM, two Pods and a collector on `br-int`), the
//! objects they write, and what the final objects imply for OVS (checked against it).

use super::*;

// ---------------------------------------------------------------------------------------
// The bed: the VM (EN) + Pods pa/pb + a collector with coll0/coll1, all on br-int

/// Port rows by name (count), Interface rows by name (count), ports listed on br-int.
type Rows = (BTreeMap<String, usize>, BTreeMap<String, usize>, usize);

pub(crate) struct Bed {
    pub(crate) sb: Sandbox,
    peer: Netns,
    _pods: Vec<Netns>,
    _coll: Netns,
    manifests: PathBuf,
    config: PathBuf,
}

impl Bed {
    pub(crate) fn new() -> Bed {
        let (sb, peer) = setup();
        let mut pods = Vec::new();
        for (name, n) in [("pa", 1u8), ("pb", 2)] {
            let ns = Netns::new(name);
            let port = format!("veth-{name}");
            ns.veth_to("eth0", sb.ns(), &port);
            let mac = format!("02:00:00:00:00:{n:02x}");
            ns.ip(&["link", "set", "eth0", "address", &mac]);
            ns.ip(&["addr", "add", &format!("203.0.113.{n}/24"), "dev", "eth0"]);
            sb.vsctl(&[
                "add-port",
                "br-int",
                &port,
                "--",
                "set",
                "Port",
                &port,
                &format!("external_ids:container-id=cid-{name}"),
                &format!("external_ids:pod-name={name}"),
                "external_ids:pod-namespace=ns1",
                &format!("external_ids:attached-mac=\"{mac}\""),
            ]);
            pods.push(ns);
        }
        let coll = Netns::new("coll");
        coll.veth_to("eth0", sb.ns(), "coll0");
        coll.veth_to("eth1", sb.ns(), "coll1");
        let manifests = sb.dir().join("manifests");
        std::fs::create_dir_all(&manifests).unwrap();
        let config = sb.path("tether.yaml");
        std::fs::write(&config, CONFIG).unwrap();
        Bed {
            sb,
            peer,
            _pods: pods,
            _coll: coll,
            manifests,
            config,
        }
    }

    pub(crate) fn write(&self, file: &str, text: &str) {
        write_atomic(&self.manifests, file, text);
    }

    fn args(&self, source: &[&str]) -> Vec<String> {
        let dir = self.sb.dir().to_str().unwrap().to_string();
        let mut v: Vec<String> = vec!["--config".into(), self.config.to_str().unwrap().into()];
        v.extend(source.iter().map(|s| (*s).to_string()));
        v.extend(
            [
                "--ovs-rundir",
                &dir,
                "--bridge",
                "br-int",
                "--datapath-type",
                common::datapath(),
                "--node-name",
                "vm1",
                "--state-socket",
                &format!("{dir}/tether.sock"),
            ]
            .map(String::from),
        );
        v
    }

    pub(crate) fn start(&self, source: &[&str], log: &str) -> Tether {
        let args = self.args(source);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Tether::start(self.sb.ns(), &args, &self.sb.path(log))
    }

    pub(crate) fn manifests_source(&self) -> Vec<String> {
        vec![
            "--manifests".into(),
            self.manifests.to_str().unwrap().into(),
        ]
    }

    pub(crate) fn try_ofport(&self, name: &str) -> Option<u32> {
        self.sb
            .try_vsctl(&["get", "Interface", name, "ofport"])
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// EN attached: the pair flows on the current ofports of `eth1` and `eth1~`.
    pub(crate) fn en_attached(&self) -> bool {
        match (self.try_ofport("eth1"), self.try_ofport("eth1~")) {
            (Some(h), Some(u)) => en_flows(&self.sb) == expected_en_flows(h, u),
            _ => false,
        }
    }

    /// All flows of br-int, canonical, or None while the switch does not answer.
    pub(crate) fn try_flows(&self) -> Option<Vec<String>> {
        self.sb.try_dump_flows("br-int", None).ok()
    }

    /// Whether `port` has NO_FLOOD in the OpenFlow 1.0 port description.
    pub(crate) fn no_flood(&self, port: &str) -> Option<bool> {
        let show = self
            .sb
            .try_ofctl(&["-O", "OpenFlow10", "show", "br-int"])
            .ok()?;
        let text: String = show
            .lines()
            .skip_while(|l| !l.contains(&format!("({port})")))
            .take(3)
            .collect();
        Some(text.contains("NO_FLOOD"))
    }

    /// Port and Interface rows by name with their counts (a duplicate shows as 2), and the
    /// bridge's port list: rows nobody references would show as a mismatch.
    pub(crate) fn rows(&self) -> Option<Rows> {
        let names = |table: &str| -> Option<BTreeMap<String, usize>> {
            let out = self
                .sb
                .try_vsctl(&["--format=json", "--columns=name", "list", table])
                .ok()?;
            let v: Value = serde_json::from_str(&out).ok()?;
            let mut m = BTreeMap::new();
            for row in v["data"].as_array()? {
                *m.entry(row[0].as_str()?.to_string()).or_insert(0) += 1;
            }
            Some(m)
        };
        let on_bridge = self
            .sb
            .try_vsctl(&["list-ports", "br-int"])
            .ok()?
            .lines()
            .count();
        Some((names("Port")?, names("Interface")?, on_bridge))
    }
}

fn write_atomic(dir: &Path, file: &str, text: &str) {
    let tmp = dir.join(format!(".{file}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(file)).unwrap();
}

/// Namespace ns1 and Pods pa/pb with a `sel` label each (`none` selects nothing).
pub(crate) fn pods_yaml(sel: &[(&str, &str)]) -> String {
    let mut y = String::from("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns1\n");
    for (p, s) in sel {
        y.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {p}\n  namespace: ns1\n  labels:\n    sel: {s}\nspec:\n  nodeName: vm1\n"
        ));
    }
    y
}

/// A mirror TC selecting Pods labelled `sel=<name>`, to a device.
pub(crate) fn tc_yaml(name: &str, direction: &str, target: &str) -> String {
    format!(
        "apiVersion: crd.antrea.io/v1alpha2\nkind: TrafficControl\nmetadata:\n  name: {name}\nspec:\n  appliedTo:\n    podSelector:\n      matchLabels:\n        sel: {name}\n  direction: {direction}\n  action: Mirror\n  targetPort:\n    device: {{name: {target}}}\n"
    )
}

pub(crate) fn tc_json(name: &str, direction: &str, target: &str) -> Value {
    json!({"apiVersion": "crd.antrea.io/v1alpha2", "kind": "TrafficControl",
           "metadata": {"name": name},
           "spec": {"appliedTo": {"podSelector": {"matchLabels": {"sel": name}}},
                    "direction": direction, "action": "Mirror",
                    "targetPort": {"device": {"name": target}}}})
}

pub(crate) fn pod_json(name: &str, sel: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "ns1", "labels": {"sel": sel}},
           "spec": {"nodeName": "vm1"}})
}

/// What the final objects imply: per Pod selected by an existing TC, its mark flows
/// (Ingress → `reg1=<ofport>`, Egress → `in_port=<ofport>`, Both → both), each sending to
/// that TC's target port; and exactly the target ports of existing TCs on the bridge.
pub(crate) struct Expect {
    /// (pod port, direction, target port) of every selected Pod.
    pub(crate) marks: Vec<(String, String, String)>,
    pub(crate) targets: Vec<String>,
}

pub(crate) fn expect(
    tcs: &BTreeMap<String, (String, String)>,
    pods: &BTreeMap<String, String>,
) -> Expect {
    let mut marks = Vec::new();
    for (pod, sel) in pods {
        if let Some((dir, target)) = tcs.get(sel) {
            marks.push((format!("veth-{pod}"), dir.clone(), target.clone()));
        }
    }
    let mut targets: Vec<String> = tcs.values().map(|(_, t)| t.clone()).collect();
    targets.sort();
    targets.dedup();
    Expect { marks, targets }
}

/// The bridge matches `e` (plus the EN's two ports and the Pods' ports).
pub(crate) fn matches(bed: &Bed, e: &Expect) -> Result<(), String> {
    let flows = bed.try_flows().ok_or("no flows")?;
    let marks: Vec<&String> = flows
        .iter()
        .filter(|l| l.contains("table=80, priority=200"))
        .collect();
    let mut want = 0;
    for (pod, dir, target) in &e.marks {
        let p = bed.try_ofport(pod).ok_or("pod ofport")?;
        let t = bed.try_ofport(target).ok_or(format!("no port {target}"))?;
        let keys: &[String] = match dir.as_str() {
            "Ingress" => &[format!("reg1={p:#x} ")],
            "Egress" => &[format!("in_port={p} ")],
            _ => &[format!("reg1={p:#x} "), format!("in_port={p} ")],
        };
        for k in keys {
            want += 1;
            let hit = marks
                .iter()
                .any(|l| l.contains(k.as_str()) && l.contains(&format!("set_field:{t:#x}->reg9,")));
            if !hit {
                return Err(format!(
                    "no mark flow {k}→{target} (ofport {t}): {marks:#?}; ofports {}",
                    bed.sb
                        .try_vsctl(&["--columns=name,ofport", "list", "Interface"])
                        .unwrap_or_default()
                        .replace('\n', " ")
                ));
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
    let mut want_ports: Vec<String> = ["br-int", "eth1", "eth1~", "veth-pa", "veth-pb"]
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
        return Err(format!(
            "{on_bridge} ports on br-int, want {}",
            want_ports.len()
        ));
    }
    for t in &e.targets {
        if bed.no_flood(t) != Some(true) {
            return Err(format!("{t} lacks NO_FLOOD"));
        }
    }
    Ok(())
}

/// Take over `eth1` (EN from the manifests dir) and make the VM pingable from its peer.
pub(crate) fn attach(bed: &Bed) {
    wait_for(Duration::from_secs(20), "EN attached", || {
        bed.en_attached().then_some(())
    });
    neutralise_uplink(bed.sb.ns(), "eth1~", true);
    reachable(bed);
}

/// The VM answers its peer (three clean pings, v4 and v6) — after the first answer, since
/// the peer's neighbour entry may need a moment after a restart.
pub(crate) fn reachable(bed: &Bed) {
    for ip in ["192.0.2.10", "2001:db8:1::10"] {
        wait_for(Duration::from_secs(10), &format!("{ip} answers"), || {
            bed.peer
                .try_exec(&["ping", "-c", "1", "-W", "1", ip])
                .ok()
                .map(|_| ())
        });
        assert_clean_ping(&bed.peer, ip);
    }
}
