use super::*;

const YAML: &str = r#"
apiVersion: v1
kind: Config
current-context: main
clusters:
- name: c1
  cluster:
    server: https://192.0.2.1:6443/
    certificate-authority-data: LS0tQ0EtLS0K
    tls-server-name: kubernetes.default
- name: c2
  cluster:
    server: https://198.51.100.2:6443
    certificate-authority: ca.pem
    insecure-skip-tls-verify: true
users:
- name: u1
  user:
    token: abc
- name: u2
  user:
    client-certificate: certs/client.pem
    client-key-data: S0VZCg==
    tokenFile: /run/token
contexts:
- name: main
  context: {cluster: c1, user: u1, namespace: prod}
- name: other
  context: {cluster: c2, user: u2}
"#;

#[test]
fn yaml_current_context() {
    let c = parse_kubeconfig(YAML, Path::new("/nonexistent"), None).unwrap();
    assert_eq!(c.server, "https://192.0.2.1:6443");
    assert_eq!(c.ca_pem.as_deref(), Some(&b"---CA---\n"[..]));
    assert_eq!(c.tls_server_name.as_deref(), Some("kubernetes.default"));
    assert_eq!(c.credentials, Credentials::Token("abc".into()));
    assert_eq!(c.namespace.as_deref(), Some("prod"));
    assert!(!c.insecure_skip_tls_verify);
    assert!(!format!("{c:?}").contains("abc"), "token leaked into Debug");
}

#[test]
fn file_references_resolve_relative_to_the_kubeconfig() {
    let dir = std::env::temp_dir().join(format!("tether-kc-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("certs")).unwrap();
    std::fs::write(dir.join("ca.pem"), "CAFILE").unwrap();
    std::fs::write(dir.join("certs/client.pem"), "CERTFILE").unwrap();
    let c = parse_kubeconfig(YAML, &dir, Some("other")).unwrap();
    assert_eq!(c.ca_pem.as_deref(), Some(&b"CAFILE"[..]));
    assert_eq!(c.client_cert_pem.as_deref(), Some(&b"CERTFILE"[..]));
    assert_eq!(c.client_key_pem.as_deref(), Some(&b"KEY\n"[..]));
    assert_eq!(c.credentials, Credentials::TokenFile("/run/token".into()));
    assert!(c.insecure_skip_tls_verify);
    std::fs::remove_dir_all(&dir).unwrap();
    let e = parse_kubeconfig(YAML, Path::new("/nonexistent"), Some("other")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("certificate-authority /nonexistent/ca.pem"),
        "{e}"
    );
}

#[test]
fn json_form_and_errors() {
    let json = r#"{"current-context":"x","clusters":[{"name":"c","cluster":{"server":"https://[2001:db8::1]:6443"}}],
                  "contexts":[{"name":"x","context":{"cluster":"c"}}]}"#;
    let c = parse_kubeconfig(json, Path::new("."), None).unwrap();
    assert_eq!(c.server, "https://[2001:db8::1]:6443");
    assert_eq!(c.credentials, Credentials::None);
    let e = parse_kubeconfig(json, Path::new("."), Some("nope")).unwrap_err();
    assert_eq!(e.to_string(), "context: \"nope\" not found (have: x)");
    let exec = YAML.replace("    token: abc", "    exec: {command: aws}");
    let e = parse_kubeconfig(&exec, Path::new("."), None).unwrap_err();
    assert!(
        e.to_string()
            .contains("exec and auth-provider plugins are not supported"),
        "{e}"
    );
}

#[test]
fn in_cluster_reads_service_account_files() {
    let dir = std::env::temp_dir().join(format!("tether-sa-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("token"), "t").unwrap();
    std::fs::write(dir.join("ca.crt"), "CA").unwrap();
    std::fs::write(dir.join("namespace"), "kube-system\n").unwrap();
    let c = in_cluster_from("2001:db8::1", "443", &dir).unwrap();
    assert_eq!(c.server, "https://[2001:db8::1]:443");
    assert_eq!(c.credentials, Credentials::TokenFile(dir.join("token")));
    assert_eq!(c.namespace.as_deref(), Some("kube-system"));
    std::fs::remove_dir_all(&dir).unwrap();
}

fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The kubeconfig, a file it names and the token files are refused when someone other
/// than root or tether could change them; the message names the file and the fix.
#[test]
fn files_others_can_change_are_refused() {
    let dir = std::env::temp_dir().join(format!("tether-kc-modes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("kubeconfig");
    let ca = dir.join("ca.pem");
    let token = dir.join("token");
    std::fs::write(&ca, "CAFILE").unwrap();
    std::fs::write(&token, "t").unwrap();
    let text = format!(
        "current-context: x\nclusters: [{{name: c, cluster: {{server: 'https://192.0.2.1', certificate-authority: ca.pem}}}}]\nusers: [{{name: u, user: {{tokenFile: {}}}}}]\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]\n",
        token.display()
    );
    std::fs::write(&kc, text).unwrap();
    for f in [&kc, &ca, &token] {
        chmod(f, 0o600);
    }
    let c = load_kubeconfig(&kc, None).unwrap();
    assert_eq!(c.credentials, Credentials::TokenFile(token.clone()));
    let refused = |f: &Path, mode: u32| {
        chmod(f, mode);
        let e = load_kubeconfig(&kc, None).unwrap_err();
        chmod(f, 0o600);
        assert!(matches!(e, KubeError::Config { .. }), "{e:?}");
        e.to_string()
    };
    let fix = |f: &Path| {
        format!(
            "writable by group or others (mode 666): refusing to read it. fix: chmod go-w {}",
            f.display()
        )
    };
    assert_eq!(
        refused(&kc, 0o666),
        format!("kubeconfig {}: {}", kc.display(), fix(&kc))
    );
    assert_eq!(
        refused(&ca, 0o666),
        format!(
            "kubeconfig {}: certificate-authority {}: {}",
            kc.display(),
            ca.display(),
            fix(&ca)
        )
    );
    assert_eq!(
        refused(&token, 0o666),
        format!(
            "kubeconfig {}: token file {}: {}",
            kc.display(),
            token.display(),
            fix(&token)
        )
    );
    // A token file that is missing at start is left to the read that needs it.
    std::fs::remove_file(&token).unwrap();
    assert!(load_kubeconfig(&kc, None).is_ok());
    // In-cluster: the token and the CA.
    std::fs::write(dir.join("ca.crt"), "CA").unwrap();
    std::fs::write(&token, "t").unwrap();
    chmod(&dir.join("ca.crt"), 0o644);
    chmod(&token, 0o646);
    assert_eq!(
        in_cluster_from("192.0.2.1", "443", &dir)
            .unwrap_err()
            .to_string(),
        format!(
            "in-cluster token {}: writable by group or others (mode 646): refusing to read it. fix: chmod go-w {}",
            token.display(),
            token.display()
        )
    );
    chmod(&token, 0o644);
    chmod(&dir.join("ca.crt"), 0o664);
    assert!(
        in_cluster_from("192.0.2.1", "443", &dir)
            .unwrap_err()
            .to_string()
            .starts_with(&format!(
                "in-cluster CA {}: writable",
                dir.join("ca.crt").display()
            ))
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn base64() {
    assert_eq!(decode_base64("aGVsbG8=").unwrap(), b"hello");
    assert_eq!(decode_base64("aGVs\nbG8").unwrap(), b"hello");
    assert_eq!(decode_base64("").unwrap(), b"");
    assert_eq!(decode_base64("+/8=").unwrap(), [0xfb, 0xff]);
    assert!(decode_base64("a").is_err());
    assert!(decode_base64("aGVsbG8=x").is_err());
    assert!(decode_base64("a*").is_err());
}
