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
            source: Source::InCluster,
            external_node_namespace: "default".into(),
            state_socket: "/run/tether/tether.sock".into(),
            policy_bypass_rules: vec![],
            allow_insecure_tls: false,
            allow_plain_http: false,
            warnings: vec![],
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
    assert_eq!(c.source, Source::Manifests("/m".into()));
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
