//! The agent process that runs the controller inside the VM namespace (its command
//! grammar and main loop), and the parent's handle on it: spawn, commands, crashes.

use super::*;

// ---------------------------------------------------------------------------------------
// The agent (child side).

/// One agent command.
#[derive(Debug, PartialEq)]
pub(crate) enum Cmd {
    Recover,
    En { ifname: String, ips: Vec<String> },
    Absent,
    Sync,
    Replay,
    Gc,
    Status,
}

pub(crate) fn parse_cmd(line: &str) -> Result<Cmd, String> {
    let mut w = line.split_whitespace();
    let c = match w.next() {
        Some("recover") => Cmd::Recover,
        Some("en") => {
            let ifname = w.next().ok_or("en: missing ifname")?;
            let ips = w.next().ok_or("en: missing ips")?;
            Cmd::En {
                ifname: if ifname == "-" {
                    String::new()
                } else {
                    ifname.into()
                },
                ips: ips.split(',').map(str::to_string).collect(),
            }
        }
        Some("absent") => Cmd::Absent,
        Some("sync") => Cmd::Sync,
        Some("replay") => Cmd::Replay,
        Some("gc") => Cmd::Gc,
        Some("status") => Cmd::Status,
        other => return Err(format!("unknown command {other:?}")),
    };
    match w.next() {
        Some(extra) => Err(format!("unexpected {extra:?}")),
        None => Ok(c),
    }
}

fn bypass_rules() -> Vec<PolicyBypassRule> {
    [
        json!({"direction": "ingress", "protocol": "tcp", "cidr": "203.0.113.0/24", "port": 22}),
        json!({"direction": "egress", "protocol": "icmp", "cidr": "2001:db8:2::/48"}),
    ]
    .iter()
    .enumerate()
    .map(|(i, v)| {
        PolicyBypassRule::from_json(v, &format!("externalNode.policyBypassRules[{i}]")).unwrap()
    })
    .collect()
}

fn en_object(ifname: &str, ips: &[String]) -> ExternalNode {
    ExternalNode {
        metadata: ObjectMeta {
            name: "vm1".into(),
            namespace: "default".into(),
            ..ObjectMeta::default()
        },
        spec: Ok(ExternalNodeSpec {
            interfaces: vec![NetworkInterface {
                name: ifname.into(),
                ips: ips.iter().map(|s| s.parse().unwrap()).collect(),
            }],
        }),
    }
}

pub(crate) fn agent_main(dir: &str) {
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .is_test(false)
        .try_init();
    let dir = std::path::PathBuf::from(dir);
    let client = Arc::new(
        Client::connect(
            Remote::Unix(dir.join("db.sock")),
            ClientOptions::default(),
            Duration::from_secs(10),
        )
        .unwrap(),
    );
    let bridge = Arc::new(LiveBridge::new(
        BridgeDb::ensure(client, "br-int", common::datapath()).unwrap(),
    ));
    let prev: u16 = bridge
        .db()
        .external_id("roundNum")
        .unwrap()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    let round = prev.wrapping_add(1).max(1);
    let flows = Arc::new(
        OfFlows::start(OfFlowsConfig::new(dir.join("br-int.mgmt"), "br-int", round)).unwrap(),
    );
    flows.wait_connected(Duration::from_secs(10)).unwrap();
    flows
        .apply(
            Owner::new(Category::DEFAULT, 0),
            tether::pipeline::base_flows(),
        )
        .unwrap();
    let fault = faulty::Fault::from_env();
    let links = Arc::new(faulty::FaultyLinks {
        inner: Rtnl::connect().unwrap(),
        fault: fault.clone(),
    });
    let en_bridge = Arc::new(faulty::FaultyBridge {
        inner: bridge.clone(),
        fault: fault.clone(),
        stop_vswitchd: std::env::var_os(faulty::STOP_ENV).map(|_| dir.join("ovs-vswitchd.pid")),
    });
    let en_flows = Arc::new(faulty::FaultyFlows {
        inner: flows.clone(),
        fault,
    });
    let stores = Stores::default();
    let cfg = EnConfig {
        node_name: "vm1".into(),
        bridge: "br-int".into(),
        namespace: "default".into(),
        bypass_rules: bypass_rules(),
        ovs_rundir: dir.clone(),
        datapath_type: common::datapath().into(),
        state_dir: None,
    };
    let datapath = Arc::new(tether::controller::VswitchdDatapath::new(
        &cfg.ovs_rundir,
        &cfg.datapath_type,
    ));
    let ctl = EnController::new(cfg, stores.clone(), en_bridge, en_flows, links, datapath);
    let mut seen = 0u64;
    println!("AGENT ready round={round}");
    log::debug!("agent ready round={round}");
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        log::debug!("agent command {line:?}");
        let base = seen;
        while let Ok(g) = flows.reconnects().try_recv() {
            seen = seen.max(g);
        }
        let r: Result<String, String> = match parse_cmd(&line) {
            Err(e) => Err(e),
            Ok(Cmd::Recover) => ctl
                .recover()
                .map(|()| String::new())
                .map_err(|e| e.to_string()),
            Ok(Cmd::En { ifname, ips }) => {
                stores
                    .external_nodes
                    .replace(vec![en_object(&ifname, &ips)]);
                Ok(String::new())
            }
            Ok(Cmd::Absent) => {
                stores.external_nodes.replace(Vec::new());
                Ok(String::new())
            }
            Ok(Cmd::Sync) => ctl
                .sync()
                .map(|()| String::new())
                .map_err(|e| e.to_string()),
            Ok(Cmd::Replay) => {
                // As the daemon does: once OfFlows has re-connected (and replayed what it
                // had), re-install with ofports read fresh. A reconnect newer than the
                // last one seen before this command is the one the test caused.
                let deadline = Instant::now() + common::patience(Duration::from_secs(10));
                while seen <= base && Instant::now() < deadline {
                    if let Ok(g) = flows.reconnects().recv_timeout(Duration::from_millis(100)) {
                        seen = seen.max(g);
                    }
                }
                if seen <= base {
                    Err("no OpenFlow reconnect within 10 s".to_string())
                } else {
                    ctl.replay()
                        .map(|()| String::new())
                        .map_err(|e| e.to_string())
                }
            }
            Ok(Cmd::Gc) => {
                let r = if prev == 0 {
                    Ok(())
                } else {
                    flows.delete_round(prev)
                };
                r.and_then(|()| {
                    bridge
                        .db()
                        .set_external_id("roundNum", &round.to_string())
                        .map_err(|e| tether::openflow::OfError::Timeout {
                            what: e.to_string(),
                        })
                })
                .map(|()| String::new())
                .map_err(|e| e.to_string())
            }
            Ok(Cmd::Status) => Ok(format!("{:?}", ctl.status())),
        };
        match r {
            Ok(s) => println!("AGENT ok {s}"),
            Err(e) => println!("AGENT err {}", e.replace('\n', " ")),
        }
        std::io::stdout().flush().unwrap();
    }
}

// ---------------------------------------------------------------------------------------
// The parent side.

pub(crate) struct Agent {
    child: Child,
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
}

impl Agent {
    pub(crate) fn spawn(sb: &Sandbox, crash_at: Option<&str>) -> Agent {
        Agent::spawn_env(sb, crash_at, &[])
    }

    /// [`Agent::spawn`] with extra environment (the `faulty` backends' switches).
    pub(crate) fn spawn_env(sb: &Sandbox, crash_at: Option<&str>, env: &[(&str, &str)]) -> Agent {
        let exe = std::env::current_exe().unwrap();
        let mut c = sb.ns().command(&[
            exe.to_str().unwrap(),
            "--exact",
            "agent_process",
            "--nocapture",
            "--test-threads=1",
        ]);
        c.env(AGENT_ENV, sb.dir())
            .env_remove(CRASH_ENV)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(p) = crash_at {
            c.env(CRASH_ENV, p);
        }
        c.env_remove(faulty::FAIL_ENV).env_remove(faulty::STOP_ENV);
        for (k, v) in env {
            c.env(k, v);
        }
        let mut child = c.spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let mut a = Agent { child, stdin, out };
        let ready = a.reply().expect("agent exited before it was ready");
        assert!(ready.starts_with("ready"), "{ready}");
        a
    }

    /// The next `AGENT …` line, without the prefix; None at end of output.
    pub(crate) fn reply(&mut self) -> Option<String> {
        loop {
            let mut line = String::new();
            if self.out.read_line(&mut line).unwrap() == 0 {
                return None;
            }
            // libtest prints `test agent_process ... ` without a newline first.
            if let Some(at) = line.find("AGENT ") {
                return Some(line[at + "AGENT ".len()..].trim_end().to_string());
            }
        }
    }

    pub(crate) fn try_cmd(&mut self, cmd: &str) -> Result<String, String> {
        writeln!(self.stdin, "{cmd}").unwrap();
        self.stdin.flush().unwrap();
        let r = self
            .reply()
            .unwrap_or_else(|| panic!("agent died during {cmd:?}"));
        match r.strip_prefix("ok") {
            Some(rest) => Ok(rest.trim().to_string()),
            None => Err(r.strip_prefix("err ").unwrap_or(&r).to_string()),
        }
    }

    pub(crate) fn cmd(&mut self, cmd: &str) -> String {
        self.try_cmd(cmd)
            .unwrap_or_else(|e| panic!("agent {cmd:?} failed: {e}"))
    }

    /// Send `cmd` and expect the agent to abort at its crash point (SIGABRT, no reply).
    pub(crate) fn crash_on(mut self, cmd: &str) {
        writeln!(self.stdin, "{cmd}").unwrap();
        self.stdin.flush().unwrap();
        assert_eq!(self.reply(), None, "agent survived {cmd:?}");
        let st = self.child.wait().unwrap();
        assert_eq!(st.signal(), Some(6), "agent did not abort: {st}");
    }

    /// A daemon start: recover, sync with the given EN state, drop the previous round.
    pub(crate) fn start_and_sync(sb: &Sandbox, en: Option<&str>) -> Agent {
        let mut a = Agent::spawn(sb, None);
        a.cmd("recover");
        a.cmd(en.unwrap_or("absent"));
        a.cmd("sync");
        a.cmd("gc");
        a
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
