use super::*;
use crate::ovsdb::PortKind;

fn br() -> Uuid {
    Uuid::parse("0c4ac2c5-16b1-4e2c-9dd6-8e5a10ad0b1c").unwrap()
}

fn json_of(ops: &[Op]) -> Vec<String> {
    ops.iter().map(|o| o.to_json().to_string()).collect()
}

#[test]
fn vxlan_tunnel_port_exact() {
    // docs/antrea-compat.md#example-transactions: a TC VXLAN target.
    let spec = PortSpec::new(
        "vxlan-d3622b",
        PortKind::Tunnel {
            kind: "vxlan".into(),
            options: BTreeMap::from([
                ("dst_port".into(), "8472".into()),
                ("remote_ip".into(), "198.51.100.2".into()),
            ]),
        },
    )
    .with_external_ids(BTreeMap::from([(
        "antrea-type".into(),
        "traffic-control".into(),
    )]));
    assert_eq!(
        json_of(&create_port_ops(&br(), &spec, 0)),
        vec![
            r#"{"op":"insert","row":{"name":"vxlan-d3622b","options":["map",[["dst_port","8472"],["remote_ip","198.51.100.2"]]],"type":"vxlan"},"table":"Interface","uuid-name":"iface0"}"#,
            r#"{"op":"insert","row":{"external_ids":["map",[["antrea-type","traffic-control"]]],"interfaces":["named-uuid","iface0"],"name":"vxlan-d3622b"},"table":"Port","uuid-name":"port0"}"#,
            r#"{"mutations":[["ports","insert",["named-uuid","port0"]]],"op":"mutate","table":"Bridge","where":[["_uuid","==",["uuid","0c4ac2c5-16b1-4e2c-9dd6-8e5a10ad0b1c"]]]}"#,
        ]
    );
}

#[test]
fn internal_and_system_ports_exact() {
    let mut spec = PortSpec::new(
        "eth1",
        PortKind::Internal {
            mac: Some("02:00:00:00:01:10".into()),
        },
    );
    spec.mtu_request = Some(1450);
    assert_eq!(
        create_port_ops(&br(), &spec, 3)[0].to_json().to_string(),
        r#"{"op":"insert","row":{"mac":"02:00:00:00:01:10","mtu_request":1450,"name":"eth1","type":"internal"},"table":"Interface","uuid-name":"iface3"}"#
    );
    let spec = PortSpec::new("eth1~", PortKind::System);
    assert_eq!(
        create_port_ops(&br(), &spec, 0)[0].to_json().to_string(),
        r#"{"op":"insert","row":{"name":"eth1~"},"table":"Interface","uuid-name":"iface0"}"#
    );
    // No external_ids column at all when there are none (Antrea omits empty values).
    assert_eq!(
        create_port_ops(&br(), &spec, 0)[1].to_json().to_string(),
        r#"{"op":"insert","row":{"interfaces":["named-uuid","iface0"],"name":"eth1~"},"table":"Port","uuid-name":"port0"}"#
    );
}

#[test]
fn delete_ports_exact() {
    let p = Uuid::parse("36bb0c43-4b2e-4fbd-9e27-e3bcbd1a85ac").unwrap();
    assert_eq!(
        delete_ports_op(&br(), &[p]).to_json().to_string(),
        r#"{"mutations":[["ports","delete",["uuid","36bb0c43-4b2e-4fbd-9e27-e3bcbd1a85ac"]]],"op":"mutate","table":"Bridge","where":[["_uuid","==",["uuid","0c4ac2c5-16b1-4e2c-9dd6-8e5a10ad0b1c"]]]}"#
    );
}

#[test]
fn ofport_wait_select_exact() {
    assert_eq!(
        json_of(&ofport_ops("p1", PORT_WAIT)),
        vec![
            r#"{"columns":["ofport"],"op":"wait","rows":[{"ofport":["set",[]]}],"table":"Interface","timeout":5000,"until":"!=","where":[["name","==","p1"]]}"#,
            r#"{"columns":["ofport","error"],"op":"select","table":"Interface","where":[["name","==","p1"]]}"#,
        ]
    );
}

#[test]
fn set_map_key_exact() {
    assert_eq!(
        set_map_key_op("Bridge", &br(), "external_ids", "roundNum", "3")
            .to_json()
            .to_string(),
        r#"{"mutations":[["external_ids","delete","roundNum"],["external_ids","insert",["map",[["roundNum","3"]]]]],"op":"mutate","table":"Bridge","where":[["_uuid","==",["uuid","0c4ac2c5-16b1-4e2c-9dd6-8e5a10ad0b1c"]]]}"#
    );
}

#[test]
fn create_bridge_exact() {
    assert_eq!(
        json_of(&create_bridge_ops(
            "br-int",
            "netdev",
            "0000020000000001",
            STANDALONE
        )),
        vec![
            r#"{"op":"insert","row":{"name":"br-int","type":"internal"},"table":"Interface","uuid-name":"brif"}"#,
            r#"{"op":"insert","row":{"interfaces":["named-uuid","brif"],"name":"br-int"},"table":"Port","uuid-name":"brport"}"#,
            r#"{"op":"insert","row":{"datapath_type":"netdev","external_ids":["map",[["tether-created","true"]]],"fail_mode":"standalone","name":"br-int","other_config":["map",[["datapath-id","0000020000000001"]]],"ports":["named-uuid","brport"],"protocols":["set",["OpenFlow10","OpenFlow15"]]},"table":"Bridge","uuid-name":"br"}"#,
            r#"{"mutations":[["bridges","insert",["named-uuid","br"]]],"op":"mutate","table":"Open_vSwitch","where":[]}"#,
        ]
    );
}

#[test]
fn dpid_is_locally_administered_unicast() {
    for _ in 0..20 {
        let d = random_dpid();
        assert_eq!(d.len(), 16);
        assert!(d.starts_with("0000"));
        let first = u8::from_str_radix(&d[4..6], 16).unwrap();
        assert_eq!(first & 0x03, 0x02, "{d}");
    }
}
