use super::*;

fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

fn no_file(_: &str) -> Result<String, String> {
    Err("No such file or directory (os error 2)".into())
}

fn parse(a: &str, file: &'static str) -> Result<Config, ConfigError> {
    parse_run(
        &args(a),
        &|_| Ok(file.to_string()),
        &|k| (k == "NODE_NAME").then(|| "env-node".to_string()),
        &|| Some("host-node".into()),
    )
}

#[test]
fn defaults() {
    let c = parse_run(&[], &no_file, &|_| None, &|| Some("vm1".into())).unwrap();
    assert_eq!(
        c,
        Config {
            node_name: "vm1".into(),
            ovs_rundir: "/var/run/openvswitch".into(),
            bridge: "br-int".into(),
            datapath_type: "system".into(),
            source: Input::InCluster,
            external_node_namespace: "default".into(),
            state_socket: "/run/tether/tether.sock".into(),
            state_dir: "/var/lib/tether".into(),
            policy_bypass_rules: vec![],
            allow_insecure_tls: false,
            allow_plain_http: false,
            antrea_kubeconfig: None,
            warnings: vec![],
            notes: vec![],
        }
    );
    assert_eq!(
        parse("", "").unwrap().node_name,
        "env-node",
        "$NODE_NAME before the hostname"
    );
}

#[test]
fn flags_both_spellings_and_precedence_over_the_file() {
    let file = "nodeName: from-file\nbridge: br-file\ndatapathType: netdev\nexternalNode:\n  externalNodeNamespace: vm-ns\n  policyBypassRules:\n  - direction: ingress\n    protocol: tcp\n    cidr: 192.0.2.0/24\n    port: 22\n";
    let c = parse(
        "--config f.yaml --bridge=br-x --manifests /m --state-socket /tmp/s.sock",
        file,
    )
    .unwrap();
    assert_eq!(c.node_name, "from-file");
    assert_eq!(c.bridge, "br-x");
    assert_eq!(c.datapath_type, "netdev");
    assert_eq!(c.source, Input::Manifests("/m".into()));
    assert_eq!(c.external_node_namespace, "vm-ns");
    assert_eq!(c.state_socket, PathBuf::from("/tmp/s.sock"));
    assert_eq!(
        c.policy_bypass_rules,
        crate::pipeline::externalnode::parse_bypass_rules(&[
            serde_json::json!({"direction": "ingress", "protocol": "tcp", "cidr": "192.0.2.0/24", "port": 22})
        ])
        .unwrap()
    );
    let c = parse(
        "--config f.yaml",
        "node-name: kebab\nexternal-node-namespace: ns2\n",
    )
    .unwrap();
    assert_eq!(c.node_name, "kebab");
    assert_eq!(c.external_node_namespace, "ns2");
}

#[test]
fn unknown_keys_warn() {
    let c = parse(
        "--config f.yaml",
        "bridge: br-int\ncolour: blue\nexternalNode:\n  foo: 1\nnodeType: externalNode\n",
    )
    .unwrap();
    assert_eq!(
        c.warnings,
        vec![
            "config f.yaml: unknown key colour ignored".to_string(),
            "config f.yaml: unknown key externalNode.foo ignored".to_string()
        ]
    );
}

#[test]
fn invalid_values_name_the_key() {
    let cases = [
        (
            "--datapath-type kernel",
            "",
            "datapathType: \"kernel\" is not one of system, netdev",
        ),
        (
            "--bridge br-int-is-far-too-long",
            "",
            "bridge: \"br-int-is-far-too-long\" is not a valid interface name (1-15 bytes, no '/', ':' or space)",
        ),
        (
            "--kubeconfig k --manifests m",
            "",
            "kubeconfig and manifests: give exactly one source, not both",
        ),
        (
            "--bogus",
            "",
            "unknown argument --bogus (see tether run --help)",
        ),
        ("--bridge", "", "--bridge needs a value"),
        (
            "--config f.yaml",
            "bridge: [1, 2]\n",
            "config f.yaml: bridge must be a string, got [1,2]",
        ),
        (
            "--config f.yaml",
            "externalNode: 3\n",
            "config f.yaml: externalNode must be a mapping, got 3",
        ),
        (
            "--config f.yaml",
            "externalNode:\n  policyBypassRules: yes\n",
            "config f.yaml: externalNode.policyBypassRules: unexpected value \"yes\"",
        ),
        (
            "--config f.yaml",
            "- a\n- b\n",
            "config f.yaml: the top level must be a mapping",
        ),
        (
            "--config f.yaml",
            "allowInsecureTLS: maybe\n",
            "config f.yaml: allowInsecureTLS must be true or false, got \"maybe\"",
        ),
    ];
    for (a, file, want) in cases {
        assert_eq!(parse(a, file).unwrap_err().0, want, "{a} / {file}");
    }
    let e = parse_run(&args("--config /nope.yaml"), &no_file, &|_| None, &|| None).unwrap_err();
    assert_eq!(
        e.0,
        "config /nope.yaml: No such file or directory (os error 2)"
    );
    let e = parse("--config f.yaml", "a: [\n").unwrap_err();
    assert!(e.0.starts_with("config f.yaml: "), "{e}");
}

/// Antrea's VM agent config as `install-vm.sh` leaves it (our own text with the keys and
/// layout of `antrea-agent.conf`): its keys map to tether's, the feature keys tether does
/// not have make one note, not a warning each.
const ANTREA_CONF: &str = "# Antrea agent config of a VM
featureGates:
  ExternalNode: true
  AntreaPolicy: true
auditLogging:
  maxSize: 500
  compress: true
ovsBridge: br-int
#ovsDatapathType: system
nodeType: externalNode
externalNode:
  externalNodeNamespace: vm-ns
  #policyBypassRules: []
clientConnection:
  kubeconfig: /etc/antrea/antrea-agent.kubeconfig
antreaClientConnection:
  kubeconfig: /etc/antrea/antrea-agent.antrea.kubeconfig
";

#[test]
fn antreas_agent_config_is_read_unchanged() {
    let c = parse("--config /etc/antrea/antrea-agent.conf", ANTREA_CONF).unwrap();
    assert_eq!(c.bridge, "br-int");
    assert_eq!(c.datapath_type, "system");
    assert_eq!(
        c.source,
        Input::Kubeconfig("/etc/antrea/antrea-agent.kubeconfig".into())
    );
    assert_eq!(c.external_node_namespace, "vm-ns");
    assert_eq!(
        c.antrea_kubeconfig,
        Some("/etc/antrea/antrea-agent.antrea.kubeconfig".into())
    );
    assert_eq!(c.warnings, Vec::<String>::new());
    assert_eq!(
        c.notes,
        vec![
            "config /etc/antrea/antrea-agent.conf: Antrea agent settings for features tether does not have, ignored: auditLogging, featureGates"
        ]
    );
    let c = parse(
        "--config a.conf",
        "ovsBridge: br-x\novsDatapathType: netdev\novsRunDir: /run/ovs\n",
    )
    .unwrap();
    assert_eq!(
        (c.bridge.as_str(), c.datapath_type.as_str()),
        ("br-x", "netdev")
    );
    assert_eq!(c.ovs_rundir, PathBuf::from("/run/ovs"));
    // The same setting in both spellings is an error naming both.
    assert_eq!(
        parse("--config a.conf", "ovsBridge: br-x\nbridge: br-y\n").unwrap_err(),
        ConfigError(
            "config a.conf: bridge and ovsBridge both set the same setting (bridge); keep one"
                .into()
        )
    );
    assert_eq!(
        parse(
            "--config a.conf",
            "kubeconfig: /k\nclientConnection:\n  kubeconfig: /etc/antrea/k\n"
        )
        .unwrap_err(),
        ConfigError("config a.conf: clientConnection.kubeconfig and kubeconfig both set the same setting (kubeconfig); keep one".into())
    );
    // Another node type is explained.
    let e = parse("--config a.conf", "nodeType: k8sNode\n").unwrap_err();
    assert!(
        e.0.starts_with("config a.conf: nodeType \"k8sNode\": tether runs on an ExternalNode"),
        "{e}"
    );
    // Antrea's clientConnection knobs tether has no use for are noted, not warned.
    let c = parse(
        "--config a.conf",
        "clientConnection:\n  kubeconfig: /k\n  qps: 50\n",
    )
    .unwrap();
    assert_eq!(c.warnings, Vec::<String>::new());
    assert!(
        c.notes[0].ends_with("ignored: clientConnection.qps"),
        "{:?}",
        c.notes
    );
}

#[test]
fn the_default_config_file_is_used_when_none_is_named() {
    let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        with_default_config(&a(&["--bridge", "br0"]), true),
        a(&["--config", "/etc/tether/tether.yaml", "--bridge", "br0"])
    );
    assert_eq!(
        with_default_config(&a(&["--bridge", "br0"]), false),
        a(&["--bridge", "br0"])
    );
    for named in [&["--config", "/x.yaml"][..], &["--config=/x.yaml"][..]] {
        assert_eq!(with_default_config(&a(named), true), a(named));
    }
}

#[test]
fn the_antrea_kubeconfig_is_a_flag_a_key_and_antreas_key() {
    assert_eq!(parse("", "").unwrap().antrea_kubeconfig, None);
    let c = parse("--antrea-kubeconfig /a --config a.conf", "").unwrap();
    assert_eq!(c.antrea_kubeconfig, Some(PathBuf::from("/a")));
    let c = parse("--config a.conf", "antreaKubeconfig: /b\n").unwrap();
    assert_eq!(c.antrea_kubeconfig, Some(PathBuf::from("/b")));
    // The flag wins over Antrea's key in the file.
    let c = parse(
        "--antrea-kubeconfig /a --config a.conf",
        "antreaClientConnection:\n  kubeconfig: /c\n  qps: 5\n",
    )
    .unwrap();
    assert_eq!(c.antrea_kubeconfig, Some(PathBuf::from("/a")));
    assert!(
        c.notes[0].ends_with("ignored: antreaClientConnection.qps"),
        "{:?}",
        c.notes
    );
    assert_eq!(
        parse(
            "--config a.conf",
            "antreaKubeconfig: /b\nantreaClientConnection:\n  kubeconfig: /c\n"
        )
        .unwrap_err(),
        ConfigError("config a.conf: antreaClientConnection.kubeconfig and antreaKubeconfig both set the same setting (antreaKubeconfig); keep one".into())
    );
    assert_eq!(
        parse("--config a.conf", "antreaClientConnection: 3\n").unwrap_err(),
        ConfigError("config a.conf: antreaClientConnection must be a mapping, got 3".into())
    );
}
