use serde_json::json;

use super::*;
use crate::commands::check::preflight::tests::f;
use crate::k8s::Resource;

fn tc(name: &str, target: serde_json::Value, ret: Option<serde_json::Value>) -> TrafficControl {
    let mut spec = json!({"appliedTo": {"podSelector": {}}, "direction": "Both",
                          "action": "Mirror", "targetPort": target});
    if let Some(r) = ret {
        spec["returnPort"] = r;
    }
    TrafficControl::decode(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

fn t(tc: &str, kind: TunnelKind, ipv6: bool, udp_port: Option<u16>, gre_key: bool) -> Tunnel {
    Tunnel {
        tc: tc.into(),
        kind,
        ipv6,
        udp_port,
        gre_key,
    }
}

#[test]
fn tunnels_of_the_traffic_controls() {
    let tcs = vec![
        tc(
            "mirror",
            json!({"vxlan": {"remoteIP": "192.0.2.9"}}),
            Some(json!({"gre": {"remoteIP": "2001:db8::9", "key": 7}})),
        ),
        tc(
            "span",
            json!({"erspan": {"remoteIP": "::ffff:192.0.2.8", "version": 2, "dir": 1}}),
            None,
        ),
        tc(
            "gnv",
            json!({"geneve": {"remoteIP": "192.0.2.7", "destinationPort": 6090}}),
            None,
        ),
        tc("dev", json!({"device": {"name": "eth9"}}), None),
        // Invalid (no remote IP): not a tunnel tether would create.
        tc("bad", json!({"vxlan": {}}), None),
    ];
    assert_eq!(
        tunnels_of(&tcs),
        vec![
            t("mirror", TunnelKind::Vxlan, false, Some(4789), false),
            t("gnv", TunnelKind::Geneve, false, Some(6090), false),
            t("mirror", TunnelKind::Gre, true, None, true),
            // An IPv4-mapped remote is IPv4 on the wire.
            t("span", TunnelKind::ErspanV2, false, None, false),
        ]
    );
}

/// The headers each tunnel adds to a packet of the inner link's MTU.
#[test]
fn overheads() {
    for (kind, key, v4, v6) in [
        (TunnelKind::Vxlan, false, 50, 70),
        (TunnelKind::Geneve, false, 50, 70),
        (TunnelKind::Gre, false, 38, 58),
        (TunnelKind::Gre, true, 42, 62),
        (TunnelKind::ErspanV1, false, 50, 70),
        (TunnelKind::ErspanV2, false, 54, 74),
    ] {
        assert_eq!(t("x", kind, false, None, key).overhead(), v4, "{kind} v4");
        assert_eq!(t("x", kind, true, None, key).overhead(), v6, "{kind} v6");
    }
}

#[test]
fn versions() {
    assert_eq!(major_minor("6.18.44-fc-v669"), Some((6, 18)));
    assert_eq!(major_minor("4.18.0-553.el8_10.x86_64"), Some((4, 18)));
    assert_eq!(major_minor("2.17.9"), Some((2, 17)));
    assert_eq!(major_minor("3.1"), Some((3, 1)));
    assert_eq!(major_minor("6"), None);
    assert_eq!(major_minor(""), None);
}

fn mods(m: &[(&str, Module)]) -> BTreeMap<String, Module> {
    m.iter().map(|(n, s)| (n.to_string(), *s)).collect()
}

#[test]
fn tunnels_against_kernel_modules_and_ovs() {
    let ts = vec![
        t("mirror", TunnelKind::Vxlan, false, Some(4789), false),
        t("span", TunnelKind::ErspanV2, false, None, false),
        t("span2", TunnelKind::ErspanV1, false, None, false),
    ];
    assert_eq!(tunnels(&[], "6.1.0", None, &mods(&[])), vec![]);
    assert_eq!(
        tunnels(
            &ts,
            "6.1.0-18-amd64",
            Some("3.1.0"),
            &mods(&[("vxlan", Module::Loaded), ("ip_gre", Module::Loadable)])
        ),
        vec![f(
            Level::Ok,
            "tunnels",
            "VXLAN (tc mirror), ERSPAN (tc span, span2): Linux 6.1.0-18-amd64, Open vSwitch \
             3.1.0, module ip_gre loadable, vxlan loaded",
            None
        )]
    );
    assert_eq!(
        tunnels(
            &ts,
            "4.15.0-213-generic",
            Some("2.9.8"),
            &mods(&[("vxlan", Module::Loaded), ("ip_gre", Module::Missing)])
        ),
        vec![
            f(
                Level::Fail,
                "tunnels",
                "ERSPAN (tc span, span2) needs the ip_gre kernel module: not loaded, not built \
                 in, not in /lib/modules/4.15.0-213-generic/modules.dep",
                Some(
                    "install the modules of kernel 4.15.0-213-generic (modprobe ip_gre must \
                     work), or use another tunnel type"
                ),
            ),
            f(
                Level::Warn,
                "tunnels",
                "ERSPAN (tc span, span2) needs Linux 4.18 or later in OVS's kernel datapath; \
                 this is 4.15.0-213-generic",
                Some(
                    "upgrade the kernel, unless your distribution backported it \
                     (ovs-vswitchd's log says when creating the port fails)"
                ),
            ),
            f(
                Level::Fail,
                "tunnels",
                "ERSPAN (tc span, span2) needs Open vSwitch 2.10 or later; this is 2.9.8",
                Some("upgrade Open vSwitch, or use another tunnel type"),
            ),
        ]
    );
    // GRE over IPv6 needs ip6_gre, and no OVS version known is not a failure.
    assert_eq!(
        tunnels(
            &[t("g", TunnelKind::Gre, true, None, false)],
            "6.1.0",
            None,
            &mods(&[("ip6_gre", Module::BuiltIn)])
        ),
        vec![f(
            Level::Ok,
            "tunnels",
            "GRE over IPv6 (tc g): Linux 6.1.0, Open vSwitch version unknown, module ip6_gre \
             built in",
            None
        )]
    );
}

#[test]
fn udp_ports_of_the_tunnels() {
    let vx = t("mirror", TunnelKind::Vxlan, false, Some(4789), false);
    let gnv = t("gnv", TunnelKind::Geneve, false, Some(6081), false);
    let bound = |p: &[u16]| p.iter().copied().collect::<BTreeSet<u16>>();
    let none: Vec<String> = Vec::new();
    assert_eq!(
        udp_ports(
            &[t("g", TunnelKind::Gre, false, None, false)],
            &bound(&[4789]),
            &none
        ),
        None
    );
    assert_eq!(
        udp_ports(&[vx.clone(), gnv.clone()], &bound(&[53]), &none),
        Some(f(Level::Ok, "udp ports", "UDP 4789 free, 6081 free", None))
    );
    assert_eq!(
        udp_ports(
            std::slice::from_ref(&vx),
            &bound(&[4789]),
            &["vxlan_sys_4789".to_string()]
        ),
        Some(f(
            Level::Ok,
            "udp ports",
            "UDP 4789 bound by OVS's own vxlan_sys_4789",
            None
        ))
    );
    // A vxlan link someone else made (or any process) on 4789; OVS's geneve device is ours.
    assert_eq!(
        udp_ports(
            &[vx, gnv],
            &bound(&[4789, 6081]),
            &["vxlan0".to_string(), "genev_sys_6081".to_string()]
        ),
        Some(f(
            Level::Warn,
            "udp ports",
            "UDP 4789 (vxlan, tc mirror) already bound on this host, and not by OVS's own \
             tunnel device (vxlan_sys_<port>, genev_sys_<port>): the kernel datapath cannot \
             create the tunnel's device on it",
            Some(
                "find the owner (ss -ulpn, ip -d link show type vxlan) and stop it or move it, \
                 or give the TrafficControl another destinationPort"
            ),
        ))
    );
}

#[test]
fn mtu_against_tunnel_headers() {
    assert_eq!(mtu("eth1", 1500, &[]), None);
    assert_eq!(
        mtu(
            "eth1",
            1500,
            &[t("mirror", TunnelKind::Vxlan, false, Some(4789), false)]
        ),
        Some(f(
            Level::Warn,
            "mtu",
            "eth1 has mtu 1500; tunnel headers add vxlan over IPv4 50 bytes: mirrored or \
             redirected packets over 1450 bytes do not fit in one tunnel packet through eth1",
            Some(
                "raise eth1's mtu to 1550 if the path to the tunnel's far end carries it, or \
                 accept that larger packets are fragmented or dropped"
            ),
        ))
    );
    assert_eq!(
        mtu(
            "ens5",
            9001,
            &[
                t("a", TunnelKind::Gre, false, None, true),
                t("b", TunnelKind::ErspanV2, true, None, false),
                t("c", TunnelKind::Gre, false, None, true),
            ]
        ),
        Some(f(
            Level::Warn,
            "mtu",
            "ens5 has mtu 9001; tunnel headers add gre over IPv4 42, erspan v2 over IPv6 74 \
             bytes: mirrored or redirected packets over 8927 bytes do not fit in one tunnel \
             packet through ens5",
            Some(
                "raise ens5's mtu to 9075 if the path to the tunnel's far end carries it, or \
                 accept that larger packets are fragmented or dropped"
            ),
        ))
    );
}
