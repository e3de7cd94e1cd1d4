use std::collections::BTreeMap;

use super::*;
use crate::openflow::flowmod::FlowDesc;
use crate::openflow::{Category, cookie};
use crate::ovsdb::PortData;

fn uuid(n: u8) -> Uuid {
    Uuid::parse(&format!("00000000-0000-0000-0000-0000000000{n:02x}"))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn port(n: u8, name: &str, kind: Option<&str>) -> PortData {
    PortData {
        uuid: uuid(n),
        name: name.into(),
        external_ids: kind
            .map(|k| BTreeMap::from([("antrea-type".to_string(), k.to_string())]))
            .unwrap_or_default(),
        if_uuid: None,
        if_name: name.into(),
        if_type: String::new(),
        ofport: i64::from(n),
        error: None,
        options: BTreeMap::new(),
        mac: None,
        mac_in_use: None,
        mtu: None,
        ifindex: None,
    }
}

fn view(ports: Vec<PortData>, ids: &[(&str, &str)]) -> BridgeView {
    BridgeView {
        uuid: uuid(0xff),
        external_ids: ids
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ports,
    }
}

fn flow(ck: u64) -> FlowDesc {
    FlowDesc {
        cookie: ck,
        ..FlowDesc::default()
    }
}

#[test]
fn plans_exactly_what_is_tethers() {
    let v = view(
        vec![
            port(1, "br-int", None),
            port(2, "tap0", Some("traffic-control")),
            port(3, "vm-port", None),
        ],
        &[
            ("roundNum", "4"),
            ("other", "x"),
            (CREATED_KEY, "true"),
            ("tether-held:eth9", "{}"),
        ],
    );
    let base = cookie(4, Category::DEFAULT, 0);
    let tc = cookie(4, Category::TRAFFIC_CONTROL, 9);
    let flows = [flow(base), flow(base), flow(tc), flow(0), flow(0x99)];
    assert_eq!(
        plan(&v, "br-int", &flows, true),
        Cleanup {
            ports: vec![(uuid(2), "tap0".into())],
            cookies: vec![base, tc],
            flows: 3,
            keys: vec![
                "roundNum".into(),
                CREATED_KEY.into(),
                "tether-held:eth9".into()
            ],
            bridge: BridgeFate::Keep(Some("other ports use it: vm-port".into())),
        }
    );
}

#[test]
fn the_bridge_goes_only_if_tether_made_it_and_nothing_else_uses_it() {
    let ours = view(vec![port(1, "br-int", None)], &[(CREATED_KEY, "true")]);
    let theirs = view(vec![port(1, "br-int", None)], &[]);
    assert_eq!(plan(&ours, "br-int", &[], true).bridge, BridgeFate::Delete);
    assert_eq!(
        plan(&ours, "br-int", &[], true).keys,
        Vec::<String>::new(),
        "a deleted bridge needs no key cleared"
    );
    assert_eq!(
        plan(&ours, "br-int", &[flow(0)], true).bridge,
        BridgeFate::Keep(Some("it holds 1 flows tether did not install".into()))
    );
    assert_eq!(
        plan(&theirs, "br-int", &[], true).bridge,
        BridgeFate::Keep(Some(
            "tether did not create it (no external_ids:tether-created)".into()
        ))
    );
    assert_eq!(
        plan(&ours, "br-int", &[], false).bridge,
        BridgeFate::Keep(None)
    );
}

#[test]
fn a_reset_bridge_has_nothing_to_do() {
    let v = view(vec![port(1, "br-int", None)], &[("other", "x")]);
    assert!(plan(&v, "br-int", &[flow(0)], false).is_empty());
}

#[test]
fn flags() {
    let args: Vec<String> = ["--delete-bridge", "--config", "c"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (o, rest) = parse_flags(&args);
    assert!(o.delete_bridge);
    assert_eq!(rest, vec!["--config".to_string(), "c".to_string()]);
}
