//! A TrafficControl test bed: OVS in the sandbox netns with `br-int`, Pods as namespaces
//! with a veth each (CNI-style port external_ids), a collector namespace, a manifests dir,
//! and helpers to count packets with tcpdump. Documentation addresses only (203.0.113.0/24).

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;

use crate::common::{Netns, Sandbox, wait_for};

/// A TC mirroring both directions of the `app: web` Pods to the collector port `coll0`.
pub const MIRROR_WEB_TC: &str = "apiVersion: crd.antrea.io/v1alpha2
kind: TrafficControl
metadata:
  name: mirror-web
spec:
  appliedTo:
    podSelector:
      matchLabels:
        app: web
  direction: Both
  action: Mirror
  targetPort:
    device:
      name: coll0
";

pub struct Pod {
    pub ns: Netns,
    pub name: String,
    pub ip: String,
    pub port: String,
}

pub struct Bed {
    pub sb: Sandbox,
    pub pods: Vec<Pod>,
    pub manifests: PathBuf,
}

impl Bed {
    pub fn new() -> Bed {
        let sb = Sandbox::start();
        sb.add_bridge("br-int");
        let manifests = sb.dir().join("manifests");
        std::fs::create_dir_all(&manifests).unwrap();
        // Modes as an operator sets them, whatever the umask: tether refuses a manifests
        // directory or file that group or others may write.
        chmod(&manifests, 0o755);
        Bed {
            sb,
            pods: Vec::new(),
            manifests,
        }
    }

    /// A Pod namespace `eth0` (203.0.113.<n>/24, MAC 02:00:00:00:00:<n>) wired to port
    /// `veth-<name>` on br-int with the external_ids a CNI writes.
    pub fn add_pod(&mut self, name: &str, n: u8) {
        let ns = Netns::new(name);
        let port = format!("veth-{name}");
        ns.veth_to("eth0", self.sb.ns(), &port);
        let mac = format!("02:00:00:00:00:{n:02x}");
        let ip = format!("203.0.113.{n}");
        ns.ip(&["link", "set", "eth0", "address", &mac]);
        ns.ip(&["addr", "add", &format!("{ip}/24"), "dev", "eth0"]);
        self.sb.vsctl(&[
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
        self.pods.push(Pod {
            ns,
            name: name.into(),
            ip,
            port,
        });
    }

    /// A collector namespace with `eth<i>` ↔ `port` on br-int for each port name.
    pub fn add_collector(&self, ports: &[&str]) -> Netns {
        let ns = Netns::new("coll");
        for (i, p) in ports.iter().enumerate() {
            ns.veth_to(&format!("eth{i}"), self.sb.ns(), p);
        }
        ns
    }

    pub fn write(&self, file: &str, yaml: &str) {
        let tmp = self.manifests.join(format!(".{file}.tmp"));
        std::fs::write(&tmp, yaml).unwrap();
        chmod(&tmp, 0o644);
        std::fs::rename(&tmp, self.manifests.join(file)).unwrap();
    }

    pub fn remove(&self, file: &str) {
        std::fs::remove_file(self.manifests.join(file)).unwrap();
    }

    /// The Namespace and Pod objects of the Pods added so far.
    pub fn write_pods(&self, labels: &[(&str, &str)]) {
        let mut y = String::from(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns1\n  labels:\n    env: test\n",
        );
        for p in &self.pods {
            let app = labels
                .iter()
                .find(|(n, _)| *n == p.name)
                .map(|(_, a)| *a)
                .unwrap_or("none");
            y.push_str(&format!(
                "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {}\n  namespace: ns1\n  labels:\n    app: {app}\nspec:\n  nodeName: vm1\n",
                p.name
            ));
        }
        self.write("pods.yaml", &y);
    }

    pub fn tether_args(&self) -> Vec<String> {
        let dir = self.sb.dir().to_str().unwrap().to_string();
        vec![
            "--manifests".into(),
            self.manifests.to_str().unwrap().into(),
            "--ovs-rundir".into(),
            dir.clone(),
            "--bridge".into(),
            "br-int".into(),
            "--datapath-type".into(),
            crate::common::datapath().into(),
            "--node-name".into(),
            "vm1".into(),
            "--state-socket".into(),
            format!("{dir}/tether.sock"),
            "--state-dir".into(),
            format!("{dir}/state"),
        ]
    }

    /// The TrafficControl flows (cookie category 1) as canonical text, all rounds: the
    /// TCs' mark flows and the return ports' flows. The target ports' drop flows are
    /// [`Bed::target_flows`].
    pub fn tc_flows(&self) -> Vec<String> {
        self.category_1()
            .into_iter()
            .filter(|f| !is_target_flow(f))
            .collect()
    }

    /// The target ports' Classifier flows: what comes in on a TC's target is dropped.
    pub fn target_flows(&self) -> Vec<String> {
        self.category_1()
            .into_iter()
            .filter(|f| is_target_flow(f))
            .collect()
    }

    fn category_1(&self) -> Vec<String> {
        self.sb
            .dump_flows("br-int", Some("cookie=0x10000000000/0xff0000000000"))
    }

    /// The port's OF1.0 `show` block (`port (name): addr … config: …`), `None` when the
    /// switch does not answer. No-flood exists only in OF1.0, so only OF1.0 shows it.
    pub fn of10_port_block(&self, port: &str) -> Option<String> {
        let show = self
            .sb
            .try_ofctl(&["-O", "OpenFlow10", "show", "br-int"])
            .ok()?;
        Some(
            show.lines()
                .skip_while(|l| !l.contains(&format!("({port})")))
                .take(3)
                .collect::<Vec<_>>()
                .join("\n"),
        )
    }

    pub fn no_flood(&self, port: &str) -> bool {
        self.of10_port_block(port)
            .is_some_and(|b| b.contains("NO_FLOOD"))
    }

    pub fn ofport(&self, port: &str) -> u32 {
        self.sb
            .vsctl(&["get", "Interface", port, "ofport"])
            .trim()
            .parse()
            .unwrap()
    }

    pub fn wait_flows(&self, what: &str, pred: impl Fn(&[String]) -> bool) -> Vec<String> {
        wait_for(Duration::from_secs(15), what, || {
            let f = self.tc_flows();
            pred(&f).then_some(f)
        })
    }

    /// `count` pings from pod `from` to pod `to`, 0.1 s apart; the number answered.
    pub fn ping(&self, from: usize, to: usize, count: u32) -> u32 {
        let out = self.pods[from]
            .ns
            .command(&[
                "ping",
                "-c",
                &count.to_string(),
                "-i",
                "0.1",
                "-W",
                "1",
                "-q",
                &self.pods[to].ip,
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        text.split(',')
            .find_map(|part| {
                part.trim()
                    .strip_suffix(" received")
                    .and_then(|n| n.trim().parse().ok())
            })
            .unwrap_or(0)
    }
}

/// `priority=190,in_port=N actions=drop` in table 0 (`pipeline::tc_target_flow`).
fn is_target_flow(f: &str) -> bool {
    !f.contains("table=") && f.contains("priority=190,in_port=") && f.ends_with("actions=drop")
}

/// tcpdump in a namespace, counting matching packets; stop with `count()`.
pub struct Capture {
    child: Child,
    out: PathBuf,
}

impl Capture {
    pub fn start(ns: &Netns, dev: &str, filter: &str, out: PathBuf) -> Capture {
        let err = std::fs::File::create(&out).unwrap();
        let child = ns
            .command(&[
                "tcpdump",
                "-n",
                "--immediate-mode",
                "-i",
                dev,
                "-w",
                "/dev/null",
                filter,
            ])
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .unwrap();
        let c = Capture { child, out };
        wait_for(Duration::from_secs(5), "tcpdump to listen", || {
            std::fs::read_to_string(&c.out)
                .unwrap_or_default()
                .contains("listening on")
                .then_some(())
        });
        c
    }

    /// Stop tcpdump and return how many packets it captured.
    pub fn count(mut self) -> u32 {
        std::thread::sleep(Duration::from_millis(300));
        let _ = std::process::Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .output();
        let _ = self.child.wait();
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        text.lines()
            .find_map(|l| {
                l.strip_suffix(" packets captured")
                    .and_then(|n| n.trim().parse().ok())
            })
            .unwrap_or_else(|| panic!("no capture summary in: {text}"))
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn chmod(p: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}
