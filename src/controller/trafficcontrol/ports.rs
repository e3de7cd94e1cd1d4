//! TrafficControl ports: their names, byte-identical to Antrea's (docs/antrea-compat.md#trafficcontrol-port-names),
//! and the OVSDB rows they become (§2.2: the option keys and formats Antrea writes).
//! Pure: a `TcPort` in, a name and a `PortSpec` out.

use std::collections::BTreeMap;
use std::net::IpAddr;

use sha1::{Digest, Sha1};

use crate::k8s::{ErspanTunnel, ErspanVersion, GreTunnel, TcPort, UdpTunnel};
use crate::ovsdb::{PortKind, PortSpec};

/// `external_ids:antrea-type` of every port tether creates for a TrafficControl.
pub const TC_PORT_TYPE: &str = "traffic-control";

pub const VXLAN_DEFAULT_PORT: u16 = 4789;
pub const GENEVE_DEFAULT_PORT: u16 = 6081;

/// Go's `net.ParseIP` form: always 16 bytes, IPv4 as `::ffff:a.b.c.d`.
fn go_ip16(ip: &IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// `binary.Write(h, BigEndian, int32(v))`: the value's low 32 bits, two's complement.
fn be32(v: i64) -> [u8; 4] {
    // Truncation is the point: Go hashes the int32 bits (a GRE key of 2^32-1 as -1).
    let b = v.to_be_bytes();
    [b[4], b[5], b[6], b[7]]
}

fn hashed(prefix: &str, parts: &[&[u8]]) -> String {
    let mut h = Sha1::new();
    for p in parts {
        h.update(p);
    }
    let hex = format!("{:x}", h.finalize());
    format!("{prefix}-{}", &hex[..6])
}

fn udp_name(prefix: &str, t: &UdpTunnel, default_port: u16) -> String {
    hashed(
        prefix,
        &[
            &go_ip16(&t.remote_ip),
            &be32(i64::from(t.destination_port.unwrap_or(default_port))),
            &be32(i64::from(t.vni.unwrap_or(0))),
        ],
    )
}

fn erspan_version(v: ErspanVersion) -> i64 {
    match v {
        ErspanVersion::V1 => 1,
        ErspanVersion::V2 => 2,
    }
}

/// The OVS port name of a TrafficControl port (Antrea `gen*PortName`).
pub fn port_name(p: &TcPort) -> String {
    match p {
        TcPort::OvsInternal { name } | TcPort::Device { name } => name.clone(),
        TcPort::Vxlan(t) => udp_name("vxlan", t, VXLAN_DEFAULT_PORT),
        TcPort::Geneve(t) => udp_name("geneve", t, GENEVE_DEFAULT_PORT),
        TcPort::Gre(GreTunnel { remote_ip, key }) => hashed(
            "gre",
            &[&go_ip16(remote_ip), &be32(i64::from(key.unwrap_or(0)))],
        ),
        TcPort::Erspan(e) => hashed(
            "erspan",
            &[
                &go_ip16(&e.remote_ip),
                &be32(i64::from(e.session_id.unwrap_or(0))),
                &be32(erspan_version(e.version)),
                &be32(i64::from(e.index.unwrap_or(0))),
                &be32(i64::from(e.dir.unwrap_or(0))),
                &be32(i64::from(e.hardware_id.unwrap_or(0))),
            ],
        ),
    }
}

fn udp_options(t: &UdpTunnel) -> BTreeMap<String, String> {
    let mut o = BTreeMap::from([("remote_ip".to_string(), t.remote_ip.to_string())]);
    if let Some(p) = t.destination_port {
        o.insert("dst_port".into(), p.to_string());
    }
    if let Some(v) = t.vni {
        o.insert("key".into(), v.to_string());
    }
    o
}

/// What makes two tunnel ports the same to ovs-vswitchd, which refuses the second with
/// "File exists" (`ofproto/tunnel.c`, `tnl_port_add__`: the datapath port of the type and
/// UDP port, the key, the remote IP): (type, dst_port, key, remote_ip), unset ones as
/// OVS's defaults. None for a port that is not a tunnel.
pub fn tunnel_identity(if_type: &str, options: &BTreeMap<String, String>) -> Option<String> {
    let default_port = match if_type {
        "vxlan" => "4789",
        "geneve" => "6081",
        "gre" | "erspan" | "ip6gre" | "ip6erspan" => "-",
        _ => return None,
    };
    let get = |k: &str, d: &str| options.get(k).cloned().unwrap_or_else(|| d.to_string());
    Some(format!(
        "{if_type} dst_port={} key={} remote_ip={}",
        get("dst_port", default_port),
        get("key", "0"),
        get("remote_ip", "")
    ))
}

fn erspan_options(e: &ErspanTunnel) -> BTreeMap<String, String> {
    let mut o = BTreeMap::from([
        ("remote_ip".to_string(), e.remote_ip.to_string()),
        (
            "erspan_ver".to_string(),
            erspan_version(e.version).to_string(),
        ),
    ]);
    if let Some(s) = e.session_id {
        o.insert("key".into(), s.to_string());
    }
    match e.version {
        // Hex without 0x: Antrea's FormatInt(index, 16), parsed by OVS with strtol(…, 16).
        ErspanVersion::V1 => {
            if let Some(i) = e.index {
                o.insert("erspan_idx".into(), format!("{i:x}"));
            }
        }
        ErspanVersion::V2 => {
            if let Some(d) = e.dir {
                o.insert("erspan_dir".into(), d.to_string());
            }
            // Hex too: OVS parses erspan_hwid with strtol(…, 16) like the index, so
            // Antrea's decimal made hardwareID 10 into 0x10 = 16 (and refused 40).
            if let Some(h) = e.hardware_id {
                o.insert("erspan_hwid".into(), format!("{h:x}"));
            }
        }
    }
    o
}

/// GRE and ERSPAN over IPv6 are their own OVS types (`ip6gre`, `ip6erspan`): the kernel
/// datapath's `gre`/`erspan` vports carry IPv4 only (Antrea #3150; docs/datapath.md).
/// VXLAN and Geneve take either family under one type. The port name stays Antrea's
/// (hashed from `gre`/`erspan`).
fn ip_family_type(v4: &'static str, remote: IpAddr) -> &'static str {
    match (v4, remote.is_ipv6()) {
        ("gre", true) => "ip6gre",
        ("erspan", true) => "ip6erspan",
        _ => v4,
    }
}

/// The OVSDB port to create for a TrafficControl port (one transaction, `antrea-type=
/// traffic-control`). A `device` is attached as a system port; `ovsInternal` is an
/// internal port.
pub fn port_spec(p: &TcPort) -> PortSpec {
    let kind = match p {
        TcPort::OvsInternal { .. } => PortKind::Internal { mac: None },
        TcPort::Device { .. } => PortKind::System,
        TcPort::Vxlan(t) => PortKind::Tunnel {
            kind: "vxlan".into(),
            options: udp_options(t),
        },
        TcPort::Geneve(t) => PortKind::Tunnel {
            kind: "geneve".into(),
            options: udp_options(t),
        },
        TcPort::Gre(g) => {
            let mut options = BTreeMap::from([("remote_ip".to_string(), g.remote_ip.to_string())]);
            if let Some(k) = g.key {
                options.insert("key".into(), k.to_string());
            }
            PortKind::Tunnel {
                kind: ip_family_type("gre", g.remote_ip).into(),
                options,
            }
        }
        TcPort::Erspan(e) => PortKind::Tunnel {
            kind: ip_family_type("erspan", e.remote_ip).into(),
            options: erspan_options(e),
        },
    };
    PortSpec::new(&port_name(p), kind).with_external_ids(BTreeMap::from([(
        "antrea-type".to_string(),
        TC_PORT_TYPE.to_string(),
    )]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn vx(i: &str, port: Option<u16>, vni: Option<u32>) -> TcPort {
        TcPort::Vxlan(UdpTunnel {
            remote_ip: ip(i),
            vni,
            destination_port: port,
        })
    }

    fn gnv(i: &str, port: Option<u16>, vni: Option<u32>) -> TcPort {
        TcPort::Geneve(UdpTunnel {
            remote_ip: ip(i),
            vni,
            destination_port: port,
        })
    }

    fn gre(i: &str, key: Option<u32>) -> TcPort {
        TcPort::Gre(GreTunnel {
            remote_ip: ip(i),
            key,
        })
    }

    fn ers(
        i: &str,
        version: ErspanVersion,
        session_id: Option<u16>,
        index: Option<i32>,
        dir: Option<u8>,
        hardware_id: Option<i32>,
    ) -> TcPort {
        TcPort::Erspan(ErspanTunnel {
            remote_ip: ip(i),
            session_id,
            version,
            index,
            dir,
            hardware_id,
        })
    }

    /// docs/antrea-compat.md#test-vectors (Antrea's `TestGenTunnelPortName` and the table computed
    /// with the reference Python).
    #[test]
    fn names_match_antrea_vectors() {
        use ErspanVersion::{V1, V2};
        let cases = [
            (vx("1.1.1.1", None, None), "vxlan-cb3ab8"),
            (vx("1.1.1.1", Some(4789), Some(0)), "vxlan-cb3ab8"),
            (vx("10.0.10.2", Some(8472), None), "vxlan-d3622b"),
            (vx("10.0.10.2", None, Some(5000)), "vxlan-597ab3"),
            (vx("10.0.10.2", Some(8472), Some(5000)), "vxlan-82a6b7"),
            (vx("::ffff:1.1.1.1", None, None), "vxlan-cb3ab8"),
            (gnv("1.1.1.1", None, None), "geneve-e17764"),
            (gnv("1.1.1.1", Some(6081), Some(0)), "geneve-e17764"),
            (gnv("10.0.10.2", None, Some(1)), "geneve-053e8d"),
            (gnv("fd00:10::2", None, None), "geneve-3fc968"),
            (
                gnv("2001:db8::1", Some(7000), Some(16_777_215)),
                "geneve-51ec48",
            ),
            (gre("1.1.1.1", None), "gre-b2d3bd"),
            (gre("1.1.1.1", Some(0)), "gre-b2d3bd"),
            (gre("10.0.10.2", Some(100)), "gre-f8a809"),
            // u32 key 2^32-1 hashes as Antrea's int32 -1.
            (gre("10.0.10.2", Some(u32::MAX)), "gre-72cddc"),
            (ers("1.1.1.1", V1, None, None, None, None), "erspan-9de667"),
            (
                ers("1.1.1.1", V1, Some(0), Some(0), Some(0), Some(0)),
                "erspan-9de667",
            ),
            (
                ers("10.0.10.2", V1, Some(1), Some(1), None, None),
                "erspan-fde71b",
            ),
            (
                ers("10.0.10.2", V2, Some(1), None, Some(1), Some(4)),
                "erspan-f82ac8",
            ),
            (
                ers("10.0.10.2", V2, Some(1), None, None, None),
                "erspan-179d5d",
            ),
            (
                ers("fd00::5", V2, Some(1023), None, None, None),
                "erspan-389c01",
            ),
            (
                TcPort::Device {
                    name: "target1".into(),
                },
                "target1",
            ),
            (
                TcPort::OvsInternal {
                    name: "tap0".into(),
                },
                "tap0",
            ),
        ];
        for (port, want) in cases {
            assert_eq!(port_name(&port), want, "{port:?}");
        }
    }

    fn opts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn ovsdb_rows_exact() {
        let tc = opts(&[("antrea-type", "traffic-control")]);
        let cases = [
            (
                vx("198.51.100.2", Some(8472), Some(5)),
                PortKind::Tunnel {
                    kind: "vxlan".into(),
                    options: opts(&[
                        ("dst_port", "8472"),
                        ("key", "5"),
                        ("remote_ip", "198.51.100.2"),
                    ]),
                },
            ),
            (
                gnv("2001:db8::2", None, None),
                PortKind::Tunnel {
                    kind: "geneve".into(),
                    options: opts(&[("remote_ip", "2001:db8::2")]),
                },
            ),
            (
                gre("198.51.100.2", Some(u32::MAX)),
                PortKind::Tunnel {
                    kind: "gre".into(),
                    options: opts(&[("key", "4294967295"), ("remote_ip", "198.51.100.2")]),
                },
            ),
            (
                // v1: index in hex, dir/hwid ignored.
                ers(
                    "198.51.100.2",
                    ErspanVersion::V1,
                    Some(8),
                    Some(31),
                    Some(1),
                    Some(4),
                ),
                PortKind::Tunnel {
                    kind: "erspan".into(),
                    options: opts(&[
                        ("erspan_idx", "1f"),
                        ("erspan_ver", "1"),
                        ("key", "8"),
                        ("remote_ip", "198.51.100.2"),
                    ]),
                },
            ),
            (
                // v2: dir and hwid, index ignored.
                ers(
                    "198.51.100.2",
                    ErspanVersion::V2,
                    Some(9),
                    Some(31),
                    Some(1),
                    Some(4),
                ),
                PortKind::Tunnel {
                    kind: "erspan".into(),
                    options: opts(&[
                        ("erspan_dir", "1"),
                        ("erspan_hwid", "4"),
                        ("erspan_ver", "2"),
                        ("key", "9"),
                        ("remote_ip", "198.51.100.2"),
                    ]),
                },
            ),
            (
                // IPv6 remotes: OVS's ip6 types, same options.
                gre("2001:db8::2", Some(7)),
                PortKind::Tunnel {
                    kind: "ip6gre".into(),
                    options: opts(&[("key", "7"), ("remote_ip", "2001:db8::2")]),
                },
            ),
            (
                ers("2001:db8::2", ErspanVersion::V1, None, Some(15), None, None),
                PortKind::Tunnel {
                    kind: "ip6erspan".into(),
                    options: opts(&[
                        ("erspan_idx", "f"),
                        ("erspan_ver", "1"),
                        ("remote_ip", "2001:db8::2"),
                    ]),
                },
            ),
            (
                vx("2001:db8::2", None, None),
                PortKind::Tunnel {
                    kind: "vxlan".into(),
                    options: opts(&[("remote_ip", "2001:db8::2")]),
                },
            ),
            (
                TcPort::Device {
                    name: "target1".into(),
                },
                PortKind::System,
            ),
            (
                TcPort::OvsInternal {
                    name: "tap0".into(),
                },
                PortKind::Internal { mac: None },
            ),
        ];
        for (port, kind) in cases {
            let spec = port_spec(&port);
            assert_eq!(spec.name, port_name(&port));
            assert_eq!(spec.kind, kind, "{port:?}");
            assert_eq!(spec.external_ids, tc);
            assert_eq!(spec.ofport_request, None);
        }
    }
}
