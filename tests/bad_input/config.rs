//! Bad configuration: policy bypass rules, `tether run` flags and config files,
//! kubeconfigs.

use super::*;

// ---------------------------------------------------------------------------------------
// Policy bypass rules (agent config `externalNode.policyBypassRules`)

#[test]
fn policy_bypass_rules() {
    let good =
        json!({"direction": "ingress", "protocol": "tcp", "cidr": "192.0.2.0/24", "port": 22});
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "rule-not-a-mapping",
            json!("ingress tcp 22"),
            "externalNode.policyBypassRules[1]: must be a mapping",
        ),
        (
            "rule-direction-both",
            json!({"direction": "both", "protocol": "ip", "cidr": "192.0.2.0/24"}),
            "externalNode.policyBypassRules[1].direction: must be \"ingress\" or \"egress\", got \"both\"",
        ),
        (
            "rule-no-direction",
            json!({"protocol": "ip", "cidr": "192.0.2.0/24"}),
            "externalNode.policyBypassRules[1].direction: required",
        ),
        (
            "rule-protocol-sctp",
            json!({"direction": "egress", "protocol": "sctp", "cidr": "192.0.2.0/24", "port": 9}),
            "externalNode.policyBypassRules[1].protocol: must be one of tcp, udp, icmp, ip, got \"sctp\"",
        ),
        (
            "rule-protocol-number",
            json!({"direction": "egress", "protocol": 6, "cidr": "192.0.2.0/24", "port": 9}),
            "externalNode.policyBypassRules[1].protocol: must be a string, got 6",
        ),
        (
            "rule-cidr-prefix-33",
            json!({"direction": "egress", "protocol": "ip", "cidr": "192.0.2.0/33"}),
            "externalNode.policyBypassRules[1].cidr: \"192.0.2.0/33\" is not a CIDR",
        ),
        (
            "rule-cidr-garbage",
            json!({"direction": "egress", "protocol": "ip", "cidr": "::/::"}),
            "externalNode.policyBypassRules[1].cidr: \"::/::\" is not a CIDR",
        ),
        (
            "rule-port-70000",
            json!({"direction": "ingress", "protocol": "udp", "cidr": "2001:db8::/64", "port": 70000}),
            "externalNode.policyBypassRules[1].port: must be in 0..65535, got 70000",
        ),
        (
            "rule-port-negative",
            json!({"direction": "ingress", "protocol": "udp", "cidr": "2001:db8::/64", "port": -1}),
            "externalNode.policyBypassRules[1].port: must be in 0..65535, got -1",
        ),
        (
            "rule-port-string",
            json!({"direction": "ingress", "protocol": "udp", "cidr": "2001:db8::/64", "port": "53"}),
            "externalNode.policyBypassRules[1].port: must be an integer, got \"53\"",
        ),
        (
            "rule-tcp-no-port",
            json!({"direction": "ingress", "protocol": "tcp", "cidr": "192.0.2.0/24"}),
            "externalNode.policyBypassRules[1].port: required (1..65535) for protocol tcp",
        ),
        (
            "rule-misspelt-key",
            json!({"direction": "ingress", "protocol": "ip", "cidrs": "192.0.2.0/24"}),
            "externalNode.policyBypassRules[1].cidrs: unknown key",
        ),
    ];
    run_table(
        "policy bypass rules",
        &cases,
        |c| c.0.to_string(),
        |(_, bad, want)| {
            let err = parse_bypass_rules(&[good.clone(), bad.clone(), good.clone()]).unwrap_err();
            assert!(
                err.starts_with(want),
                "{err:?} does not start with {want:?}"
            );
            // The good rule alone still parses.
            let ok = PolicyBypassRule::from_json(&good, "r").unwrap();
            assert_eq!(ok.port, 22);
        },
    );
}

// ---------------------------------------------------------------------------------------
// `tether run` flags and config file

fn run_args(args: &[&str], file: &str) -> Result<tether::config::Config, String> {
    let args: Vec<String> = args.iter().map(|s| (*s).to_string()).collect();
    let file = file.to_string();
    parse_run(
        &args,
        &|p| {
            if p == "/etc/tether/config.yaml" {
                Ok(file.clone())
            } else {
                Err("No such file or directory".to_string())
            }
        },
        &|_| None,
        &|| Some("vm1".to_string()),
    )
    .map_err(|e| e.to_string())
}

#[test]
fn broken_config() {
    let cfg = ["--config", "/etc/tether/config.yaml"];
    let cases: Vec<(&str, Vec<&str>, &str, &str)> = vec![
        (
            "cfg-unknown-flag",
            vec!["--bridgee", "br-int"],
            "",
            "unknown argument --bridgee",
        ),
        (
            "cfg-flag-without-value",
            vec!["--bridge"],
            "",
            "--bridge needs a value",
        ),
        (
            "cfg-bridge-16-bytes",
            vec!["--bridge", "br-0123456789abc"],
            "",
            "bridge: \"br-0123456789abc\" is not a valid interface name",
        ),
        (
            "cfg-bridge-slash",
            vec!["--bridge=br/int"],
            "",
            "bridge: \"br/int\" is not a valid interface name",
        ),
        (
            "cfg-datapath-dpdk",
            vec!["--datapath-type", "dpdk"],
            "",
            "datapathType: \"dpdk\" is not one of system, netdev",
        ),
        (
            "cfg-empty-node-name",
            vec!["--node-name="],
            "",
            "nodeName: must not be empty",
        ),
        (
            "cfg-two-sources",
            vec!["--kubeconfig", "/k", "--manifests", "/m"],
            "",
            "kubeconfig and manifests: give exactly one source",
        ),
        (
            "cfg-file-missing",
            vec!["--config", "/nope.yaml"],
            "",
            "config /nope.yaml: No such file or directory",
        ),
        (
            "cfg-file-yaml-syntax",
            cfg.to_vec(),
            "nodeName: [vm1\n  bridge: {",
            "config /etc/tether/config.yaml: ",
        ),
        (
            "cfg-file-top-level-list",
            cfg.to_vec(),
            "- nodeName: vm1\n",
            "config /etc/tether/config.yaml: the top level must be a mapping",
        ),
        (
            "cfg-file-bridge-a-list",
            cfg.to_vec(),
            "bridge: [br-int]\n",
            "config /etc/tether/config.yaml: bridge must be a string",
        ),
        (
            "cfg-file-insecure-yes-string",
            cfg.to_vec(),
            "allowInsecureTLS: \"maybe\"\n",
            "config /etc/tether/config.yaml: allowInsecureTLS must be true or false",
        ),
        (
            "cfg-file-external-node-scalar",
            cfg.to_vec(),
            "externalNode: on\n",
            "config /etc/tether/config.yaml: externalNode must be a mapping",
        ),
        (
            "cfg-file-bypass-rules-scalar",
            cfg.to_vec(),
            "externalNode:\n  policyBypassRules: all\n",
            "config /etc/tether/config.yaml: externalNode.policyBypassRules: unexpected value",
        ),
    ];
    run_table(
        "config",
        &cases,
        |c| c.0.to_string(),
        |(_, args, file, want)| {
            let err = run_args(args, file).unwrap_err();
            assert!(
                err.starts_with(want),
                "{err:?} does not start with {want:?}"
            );
        },
    );
    // Unknown keys only warn and the rest of the file still applies.
    let c = run_args(&cfg, "bridgee: br-x\nbridge: br-ok\n").unwrap();
    assert_eq!(c.bridge, "br-ok");
    assert_eq!(
        c.warnings,
        vec!["config /etc/tether/config.yaml: unknown key bridgee ignored".to_string()]
    );
}

// ---------------------------------------------------------------------------------------
// kubeconfig

#[test]
fn broken_kubeconfig() {
    let server = "    server: https://192.0.2.1:6443\n";
    let token = "    token: abc\n";
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "kc-yaml-syntax",
            "clusters: [\n  - {name: k1\n".into(),
            "syntax",
        ),
        ("kc-top-level-string", "just a string".into(), "structure"),
        (
            "kc-clusters-a-string",
            "current-context: c1\nclusters: k1\n".into(),
            "structure",
        ),
        (
            "kc-no-current-context",
            kubeconfig(server, token).replace("current-context: c1\n", ""),
            "current-context: not set and no context given",
        ),
        (
            "kc-context-missing",
            kubeconfig(server, token).replace("current-context: c1", "current-context: c9"),
            "context: \"c9\" not found (have: c1)",
        ),
        (
            "kc-cluster-missing",
            kubeconfig(server, token).replace("cluster: k1", "cluster: k9"),
            "cluster: \"k9\" not found (have: k1)",
        ),
        (
            "kc-user-missing",
            kubeconfig(server, token).replace("user: u1", "user: u9"),
            "user: \"u9\" not found (have: u1)",
        ),
        (
            "kc-no-server",
            kubeconfig("    insecure-skip-tls-verify: false\n", token),
            "cluster \"k1\": no server",
        ),
        (
            "kc-proxy-url",
            kubeconfig(
                &format!("{server}    proxy-url: http://192.0.2.9:3128\n"),
                token,
            ),
            "cluster \"k1\": proxy-url is not supported",
        ),
        (
            "kc-exec-plugin",
            kubeconfig(server, "    exec:\n      command: aws\n"),
            "user \"u1\": exec and auth-provider plugins are not supported",
        ),
        (
            "kc-ca-data-not-base64",
            kubeconfig(
                &format!("{server}    certificate-authority-data: '***'\n"),
                token,
            ),
            "certificate-authority-data: ",
        ),
        (
            "kc-cert-without-key",
            kubeconfig(server, "    client-certificate-data: QUJD\n"),
            "user \"u1\": client-certificate and client-key must be given together",
        ),
        (
            "kc-ca-file-missing",
            kubeconfig(
                &format!("{server}    certificate-authority: /nonexistent/ca.crt\n"),
                token,
            ),
            "/nonexistent/ca.crt",
        ),
    ];
    run_table(
        "kubeconfig",
        &cases,
        |c| c.0.to_string(),
        |(_, text, want)| {
            let err = parse_kubeconfig(text, Path::new("/tmp"), None).unwrap_err();
            assert!(
                matches!(err, KubeError::Config { .. }),
                "not a config error: {err:?}"
            );
            assert!(!err.is_retryable(), "config errors are not retried");
            let s = err.to_string();
            assert!(s.contains(want), "{s:?} lacks {want:?}");
        },
    );
    // The template itself is good (so each case fails for its own reason).
    let ok = parse_kubeconfig(&kubeconfig(server, token), Path::new("/tmp"), None).unwrap();
    assert_eq!(ok.server, "https://192.0.2.1:6443");
}
