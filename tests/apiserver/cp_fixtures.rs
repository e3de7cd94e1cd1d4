//! Controlplane objects as JSON text in Go's field order, after the reference's worked
//! example (`annp1` of Antrea's `docs/external-node.md:550-573`, watched by `vm-ns/vm1`):
//! IPs as base64 of the 16-byte (IPv4-mapped) form, `"to":{}` on an ingress rule,
//! `enableLogging` always present (`pkg/apis/controlplane/v1beta2/types.go`, `fc70f2bb70`).

use std::net::IpAddr;

/// The span key of the VM the tests run as.
pub const VM1: &str = "vm-ns/vm1";
/// Another ExternalNode's span key.
pub const VM2: &str = "vm-ns/vm2";

/// `annp1`'s internal name (the ANNP's UID, invented).
pub const ANNP1: &str = "5c1a6a2e-0000-4000-8000-00000000a001";
/// ATG `eeSelector=role=db And namespace=vm-ns`.
pub const ATG: &str = "9a47b91d-76f1-5b82-a456-3816a3514090";
/// AG `eeSelector=role=front And namespace=vm-ns`.
pub const AG: &str = "cacccce8-595f-5250-b361-a0ca752b2c72";

/// Standard base64 with padding (the controlplane's `IPAddress`, kubeconfig `*-data`).
pub fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(char::from(A[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// An `IPAddress`: base64 of `net.ParseIP`'s 16 bytes.
pub fn ip(s: &str) -> String {
    let bytes = match s.parse::<IpAddr>().unwrap() {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    };
    base64(&bytes)
}

/// An ExternalEntity member; AppliedToGroup members carry no IPs.
pub fn ee_member(ns: &str, name: &str, ips: &[&str]) -> String {
    let mut s = format!(r#"{{"externalEntity":{{"name":"{name}","namespace":"{ns}"}}"#);
    if !ips.is_empty() {
        let ips: Vec<String> = ips.iter().map(|a| format!("\"{}\"", ip(a))).collect();
        s.push_str(&format!(r#","ips":[{}]"#, ips.join(",")));
    }
    s.push('}');
    s
}

/// An ANNP's NetworkPolicy: one ingress rule from `address_group` and `cidr` (`a.b.c.d/n`)
/// to TCP `port` with `action`, applied to `applied_to`.
// A fixture: each argument is one field of the object, named at the call.
#[allow(clippy::too_many_arguments)]
pub fn policy(
    uid: &str,
    generation: i64,
    name: &str,
    address_group: &str,
    cidr: &str,
    port: u16,
    action: &str,
    applied_to: &str,
) -> String {
    let (addr, prefix) = cidr.split_once('/').unwrap();
    format!(
        concat!(
            r#"{{"kind":"NetworkPolicy","apiVersion":"controlplane.antrea.io/v1beta2","#,
            r#""metadata":{{"name":"{uid}","uid":"{uid}","generation":{generation}}},"#,
            r#""rules":[{{"direction":"In","from":{{"addressGroups":["{ag}"],"#,
            r#""ipBlocks":[{{"cidr":{{"ip":"{ip}","prefixLength":{prefix}}}}}]}},"to":{{}},"#,
            r#""services":[{{"protocol":"TCP","port":{port}}}],"action":"{action}","#,
            r#""enableLogging":false,"name":"ingress-{action_lc}-0a1b2c3"}}],"#,
            r#""appliedToGroups":["{atg}"],"priority":9000,"tierPriority":250,"#,
            r#""sourceRef":{{"type":"AntreaNetworkPolicy","namespace":"vm-ns","name":"{name}","uid":"{uid}"}}}}"#
        ),
        uid = uid,
        generation = generation,
        ag = address_group,
        ip = ip(addr),
        prefix = prefix,
        port = port,
        action = action,
        action_lc = action.to_ascii_lowercase(),
        atg = applied_to,
        name = name,
    )
}

/// The worked example's `annp1`.
pub fn annp1() -> String {
    policy(ANNP1, 1, "annp1", AG, "172.16.100.5/32", 22, "Reject", ATG)
}
