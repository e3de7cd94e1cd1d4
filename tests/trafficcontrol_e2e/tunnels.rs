//! Tunnel targets: their exact OVS options, ERSPAN values as the CRD says them, and IPv6
//! remotes getting the ip6 tunnel types.

use super::*;

#[test]
fn tunnel_targets_get_exact_options() {
    if !privileged("tunnel_targets_get_exact_options") {
        return;
    }
    let bed = bed_with_pods();
    let _t = start(&bed, "tether.log");
    let cases = [
        (
            "vx",
            "vxlan: {remoteIP: 198.51.100.2, vni: 5, destinationPort: 4790}",
            "vxlan",
            r#"["map",[["dst_port","4790"],["key","5"],["remote_ip","198.51.100.2"]]]"#,
        ),
        (
            "gn",
            "geneve: {remoteIP: \"2001:db8::2\", vni: 6}",
            "geneve",
            r#"["map",[["key","6"],["remote_ip","2001:db8::2"]]]"#,
        ),
        (
            "gr",
            "gre: {remoteIP: 198.51.100.2, key: 4294967295}",
            "gre",
            r#"["map",[["key","4294967295"],["remote_ip","198.51.100.2"]]]"#,
        ),
        (
            "e1",
            "erspan: {remoteIP: 198.51.100.2, sessionID: 8, version: 1, index: 31}",
            "erspan",
            r#"["map",[["erspan_idx","1f"],["erspan_ver","1"],["key","8"],["remote_ip","198.51.100.2"]]]"#,
        ),
        (
            "e2",
            "erspan: {remoteIP: 198.51.100.2, sessionID: 9, version: 2, dir: 1, hardwareID: 4}",
            "erspan",
            r#"["map",[["erspan_dir","1"],["erspan_hwid","4"],["erspan_ver","2"],["key","9"],["remote_ip","198.51.100.2"]]]"#,
        ),
    ];
    let mut all = String::new();
    for (name, target, _, _) in &cases {
        all.push_str(&tc_yaml(name, "Egress", "Mirror", target, None));
        all.push_str("---\n");
    }
    bed.write("tcs.yaml", &all);
    // All five select the same Pod: only the effective one ("e1", lowest name at equal
    // age) has mark flows, but every target port exists.
    common::wait_for(Duration::from_secs(15), "five tunnel ports", || {
        (port_names(&bed).len() == 7).then_some(())
    });
    let flows = bed.wait_flows("the effective TC's flow", |f| f.len() == 1);
    let e1 = bed.ofport("erspan-c5a8e8");
    assert!(
        flows[0].contains(&format!("set_field:{e1:#x}->reg9")),
        "{flows:#?}"
    );
    for (_, _, kind, options) in &cases {
        let rows = bed.sb.vsctl(&[
            "--format=json",
            "--columns=name,type,options,error,ofport,external_ids",
            "find",
            "Interface",
            &format!("type={kind}"),
        ]);
        let v: serde_json::Value = serde_json::from_str(&rows).unwrap();
        let want: serde_json::Value = serde_json::from_str(options).unwrap();
        let row = v["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r[2] == want)
            .unwrap_or_else(|| panic!("{kind} {options} not in {rows}"));
        assert_eq!(row[3], serde_json::json!(["set", []]), "{kind}: no error");
        assert!(row[4].as_i64().unwrap() > 0, "{kind}: ofport");
        let name = row[0].as_str().unwrap();
        assert_eq!(
            bed.sb
                .vsctl(&["get", "Port", name, "external_ids:antrea-type"])
                .trim(),
            "traffic-control"
        );
    }
}

/// ERSPAN options mean what the CRD says: ovs-vswitchd parses `erspan_idx` and
/// `erspan_hwid` as hex, and `ovs-appctl dpif/show` prints what it parsed. For hardwareID
/// 0, 9, 10, 63 and index 0, 15, 0xFFFFF the switch holds the CRD's value (before, the
/// hardware ID was written in decimal: 10 became 0x10 = 16, 63 was refused).
#[test]
fn erspan_values_reach_ovs_as_the_crd_says() {
    if !privileged("erspan_values_reach_ovs_as_the_crd_says") {
        return;
    }
    let bed = bed_with_pods();
    let _t = start(&bed, "tether.log");
    // One remote IP each: two ERSPAN ports to one remote with one key would clash.
    let cases: Vec<(String, String, &str, u32)> = [
        ("hw0", 2, "hardwareID: 0", "erspan_hwid", 0u32),
        ("hw9", 2, "hardwareID: 9", "erspan_hwid", 9),
        ("hw10", 2, "hardwareID: 10", "erspan_hwid", 10),
        ("hw63", 2, "hardwareID: 63", "erspan_hwid", 63),
        ("ix0", 1, "index: 0", "erspan_idx", 0),
        ("ix15", 1, "index: 15", "erspan_idx", 15),
        ("ixmax", 1, "index: 1048575", "erspan_idx", 0xF_FFFF),
    ]
    .iter()
    .enumerate()
    .map(|(i, (name, ver, field, key, want))| {
        let dir = if *ver == 2 { ", dir: 1" } else { "" };
        (
            name.to_string(),
            format!(
                "erspan: {{remoteIP: 198.51.100.{}, sessionID: 3, version: {ver}{dir}, {field}}}",
                i + 20
            ),
            *key,
            *want,
        )
    })
    .collect();
    let mut all = String::new();
    for (name, target, _, _) in &cases {
        all.push_str(&tc_yaml(name, "Egress", "Mirror", target, None));
        all.push_str("---\n");
    }
    bed.write("tcs.yaml", &all);
    common::wait_for(Duration::from_secs(15), "seven ERSPAN ports", || {
        (port_names(&bed)
            .iter()
            .filter(|p| p.starts_with("erspan-"))
            .count()
            == 7)
            .then_some(())
    });
    let show = common::wait_for(Duration::from_secs(10), "dpif/show with every port", || {
        let s = bed.sb.appctl(&["dpif/show"]);
        (s.matches("erspan").count() >= 7).then_some(s)
    });
    for (i, (name, _, key, want)) in cases.iter().enumerate() {
        let remote = format!("remote_ip=198.51.100.{}", i + 20);
        let line = show
            .lines()
            .find(|l| l.contains(&remote))
            .unwrap_or_else(|| panic!("{name}: no port to {remote} in\n{show}"));
        let value = line
            .split([',', ' ', '(', ')'])
            .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("{name}: no {key} in {line}"));
        let parsed = u32::from_str_radix(value.trim_start_matches("0x"), 16).unwrap();
        assert_eq!(parsed, *want, "{name}: {line}");
    }
}

/// Tunnel targets with an IPv6 `remoteIP`: GRE and ERSPAN become OVS's `ip6gre` and
/// `ip6erspan` (plain `gre`/`erspan` vports carry IPv4 only on the kernel datapath,
/// Antrea #3150), VXLAN and Geneve keep their type; each port keeps Antrea's name, gets
/// an ofport and no error. (Before: `gre` and `erspan` for either family.)
#[test]
fn ipv6_tunnel_remotes_get_the_ip6_types() {
    if !privileged("ipv6_tunnel_remotes_get_the_ip6_types") {
        return;
    }
    let bed = bed_with_pods();
    let _t = start(&bed, "tether.log");
    let cases = [
        (
            "v6gre",
            "gre: {remoteIP: \"2001:db8:5::2\", key: 7}",
            "gre-",
            "ip6gre",
        ),
        (
            "v6erspan1",
            "erspan: {remoteIP: \"2001:db8:5::3\", sessionID: 3, version: 1, index: 15}",
            "erspan-",
            "ip6erspan",
        ),
        (
            "v6erspan2",
            "erspan: {remoteIP: \"2001:db8:5::4\", sessionID: 4, version: 2, dir: 1, hardwareID: 9}",
            "erspan-",
            "ip6erspan",
        ),
        (
            "v6vxlan",
            "vxlan: {remoteIP: \"2001:db8:5::5\"}",
            "vxlan-",
            "vxlan",
        ),
        (
            "v6geneve",
            "geneve: {remoteIP: \"2001:db8:5::6\"}",
            "geneve-",
            "geneve",
        ),
    ];
    let mut all = String::new();
    for (name, target, _, _) in &cases {
        all.push_str(&tc_yaml(name, "Egress", "Mirror", target, None));
        all.push_str("---\n");
    }
    bed.write("tcs.yaml", &all);
    for (i, (name, _, prefix, want)) in cases.iter().enumerate() {
        let remote = format!("2001:db8:5::{}", i + 2);
        let row = common::wait_for(
            Duration::from_secs(15),
            &format!("{name}: a port to {remote} with an ofport"),
            || {
                let v = bed
                    .sb
                    .vsctl_json("Interface", None, "name,type,options,ofport,error");
                v["data"].as_array()?.iter().find_map(|r| {
                    let opts = r[2].to_string();
                    (opts.contains(&format!("\"{remote}\"")) && r[3].as_i64().unwrap_or(0) > 0)
                        .then(|| r.clone())
                })
            },
        );
        let port = row[0].as_str().unwrap();
        assert!(port.starts_with(prefix), "{name}: port name {port}");
        assert_eq!(row[1], serde_json::json!(want), "{name}: {row}");
        assert_eq!(
            row[4],
            serde_json::json!(["set", []]),
            "{name}: error {row}"
        );
    }
}
