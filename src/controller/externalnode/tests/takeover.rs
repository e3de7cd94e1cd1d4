//! A takeover as Antrea does it: entity names and attach info, the ports, kernel calls and
//! status of a takeover, the NIC found by the ExternalNode's IPs, updates of its IPs or
//! interface name, a move to another NIC, and a NIC name too long for the uplink suffix.

use super::*;

#[test]
fn external_entity_names_as_antrea() {
    // pkg/controller/externalnode/controller_test.go:92
    assert_eq!(external_entity_name("vm2", "ens192"), "vm2-e8be5");
    assert_eq!(external_entity_name("vm1", ""), "vm1");
    // printf eth1 | sha1sum → 3f1b9b2f…
    let h = external_entity_name("vm1", "eth1");
    assert_eq!(h.len(), "vm1-".len() + 5);
    assert!(h.starts_with("vm1-"));
}

#[test]
fn attach_info_keys() {
    // Antrea GetOVSAttachInfo: six keys, empty values left out.
    let ids = host_external_ids(
        "eth1~",
        &Uuid("u-1".into()),
        "vm1-abcde",
        "default",
        &[ip("192.0.2.10"), ip("2001:db8:1::10")],
    );
    let want: BTreeMap<String, String> = [
        ("antrea-type", "host"),
        ("uplink-name", "eth1~"),
        ("uplink-port", "u-1"),
        ("entity-name", "vm1-abcde"),
        ("entity-namespace", "default"),
        ("ip-address", "192.0.2.10,2001:db8:1::10"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(ids, want);
    let sparse = host_external_ids("eth1~", &Uuid(String::new()), "vm1", "", &[]);
    assert_eq!(
        sparse.keys().cloned().collect::<Vec<_>>(),
        ["antrea-type", "entity-name", "uplink-name"]
    );
}

#[test]
fn nothing_happens_before_the_store_has_listed() {
    let fx = fixture();
    let before = fx.nic_now();
    fx.ctl.sync().unwrap();
    assert_pristine(&fx, &before);
    assert_eq!(fx.ctl.status().step, "waiting");
    // Listed and absent: still nothing to do.
    fx.delete_en();
    assert_pristine(&fx, &before);
}

#[test]
fn create_success() {
    let fx = fixture();
    fx.take_over(ETH1_IPS);
    assert_attached(&fx);
    // The exact ports (Antrea TestCreateOVSPortsAndFlowsSuccess).
    assert_eq!(
        fx.sim.bridge.take_log(),
        ["create eth1~ system", "create eth1 internal"]
    );
    let up = fx.sim.bridge.port("eth1~").unwrap();
    assert_eq!(
        up.external_ids,
        BTreeMap::from([("antrea-type".to_string(), "uplink".to_string())])
    );
    let hp = fx.sim.bridge.port("eth1").unwrap();
    assert_eq!(
        hp.external_ids,
        host_external_ids(
            "eth1~",
            &up.uuid,
            "vm1",
            "default",
            &[ip("192.0.2.10"), ip("2001:db8:1::10")]
        )
    );
    // The kernel calls: rename (down, name, up), then the move.
    let calls = fx.links.calls();
    assert_eq!(
        &calls[..3],
        &[
            Call::SetDown(fx.eth1),
            Call::SetName(fx.eth1, "eth1~".into()),
            Call::SetUp(fx.eth1)
        ]
    );
    // Bypass flows are installed too.
    assert_eq!(fx.flows.of(Owner::new(Category::EXTERNAL_NODE, 0)).len(), 1);
    let st = fx.ctl.status();
    assert_eq!(st.step, "attached");
    assert_eq!(st.nic.as_deref(), Some("eth1"));
    assert_eq!(st.uplink.as_deref(), Some("eth1~"));
    assert_eq!(st.entity_name.as_deref(), Some("vm1"));
    assert_eq!(st.addresses, ["192.0.2.10", "2001:db8:1::10"]);
    assert_eq!(st.host_ofport, Some(u32::try_from(hp.ofport).unwrap()));
    assert_eq!(st.uplink_ofport, Some(u32::try_from(up.ofport).unwrap()));
    assert_eq!(st.last_error, None);
    // A second sync changes nothing (Antrea TestAddInterface "skip").
    fx.ctl.sync().unwrap();
    assert_eq!(fx.sim.bridge.take_log(), Vec::<String>::new());
}

#[test]
fn interface_lookup_by_ip() {
    let fx = fixture();
    // An IP on no link is dropped; the rest decide.
    set_en(
        &fx,
        Some(en("vm1", "eth1", &["192.0.2.10", "203.0.113.99"])),
    );
    fx.ctl.sync().unwrap();
    let hp = fx.sim.bridge.port("eth1").unwrap();
    assert_eq!(hp.external_ids["ip-address"], "192.0.2.10");
    assert_eq!(
        hp.external_ids["entity-name"],
        external_entity_name("vm1", "eth1")
    );

    let fx = fixture();
    fx.want(&["203.0.113.99"]);
    let e = fx.ctl.sync().unwrap_err();
    assert_eq!(
        e,
        EnError::NicNotFound {
            ips: vec![ip("203.0.113.99")]
        }
    );
    assert_eq!(e.to_string(), "cannot find interface via IPs 203.0.113.99");
    assert_eq!(fx.ctl.status().last_error, Some(e.to_string()));

    let fx = fixture();
    let before = fx.nic_now();
    fx.want(&["192.0.2.10", "198.51.100.10"]);
    let e = fx.ctl.sync().unwrap_err();
    assert_eq!(
        e.to_string(),
        "the IPs are on different interfaces: 192.0.2.10 on eth1, 198.51.100.10 on eth2"
    );
    assert_pristine(&fx, &before);
}

#[test]
fn invalid_spec_is_an_error_naming_the_en() {
    let fx = fixture();
    let mut bad = en("vm1", "", &["192.0.2.10"]);
    bad.spec = Err(crate::k8s::ValidationError {
        errors: vec![crate::k8s::FieldError {
            path: "spec.interfaces".into(),
            message: "required".into(),
        }],
    });
    set_en(&fx, Some(bad));
    let e = fx.ctl.sync().unwrap_err();
    assert!(
        matches!(&e, EnError::Invalid { en, .. } if en == "default/vm1"),
        "{e}"
    );
    assert!(e.is_permanent());
    // A NIC not found (yet) may appear later: retried.
    assert!(!EnError::NicNotFound { ips: vec![] }.is_permanent());
}

#[test]
fn update_ports_data_when_ips_or_entity_change() {
    let fx = fixture();
    fx.take_over(&["192.0.2.10"]);
    fx.sim.bridge.take_log();
    // The VM gets another address on its (host) interface and the EN lists it.
    let host = fx.links.link_by_name("eth1").unwrap();
    add_addr(&fx.links, host.index, "192.0.2.11", 24, Some("eth1"));
    fx.take_over(&["192.0.2.10", "192.0.2.11"]);
    assert_eq!(fx.sim.bridge.take_log(), ["set_external_ids eth1"]);
    let hp = fx.sim.bridge.port("eth1").unwrap();
    assert_eq!(hp.external_ids["ip-address"], "192.0.2.10,192.0.2.11");
    // Only the interface name (so the entity name) changes.
    set_en(
        &fx,
        Some(en("vm1", "ens192", &["192.0.2.10", "192.0.2.11"])),
    );
    fx.ctl.sync().unwrap();
    assert_eq!(fx.sim.bridge.take_log(), ["set_external_ids eth1"]);
    let hp = fx.sim.bridge.port("eth1").unwrap();
    assert_eq!(hp.external_ids["entity-name"], "vm1-e8be5");
    assert_eq!(fx.ctl.status().addresses, ["192.0.2.10", "192.0.2.11"]);
    // No change: no write.
    fx.ctl.sync().unwrap();
    assert_eq!(fx.sim.bridge.take_log(), Vec::<String>::new());
}

#[test]
fn different_interface_takes_the_new_one_then_restores_the_old() {
    let fx = fixture();
    let before1 = fx.nic_now();
    fx.take_over(&["192.0.2.10"]);
    fx.sim.bridge.take_log();
    fx.take_over(&["198.51.100.10"]);
    assert_eq!(
        fx.sim.bridge.take_log(),
        [
            "create eth2~ system",
            "create eth2 internal",
            "delete eth1~,eth1"
        ]
    );
    assert_eq!(nic_state(&fx.links, fx.eth1), before1);
    assert_eq!(fx.links.link_by_index(fx.eth2).unwrap().name, "eth2~");
    assert_eq!(
        port_names(&fx),
        vec!["br-int".to_string(), "eth2".into(), "eth2~".into()]
    );
    assert_eq!(pair_flows(&fx).len(), 1);
    assert_eq!(fx.ctl.status().nic.as_deref(), Some("eth2"));
}

#[test]
fn a_15_byte_nic_name_gets_the_short_uplink_name() {
    let fx = fixture_with("abcdefghijklmno");
    let before = fx.nic_now();
    fx.take_over(&["192.0.2.10"]);
    assert_eq!(
        fx.links.link_by_index(fx.eth1).unwrap().name,
        "abcdefgh~2938dc"
    );
    let hp = fx.sim.bridge.port("abcdefghijklmno").unwrap();
    assert_eq!(hp.external_ids["uplink-name"], "abcdefgh~2938dc");
    fx.delete_en();
    assert_eq!(nic_state(&fx.links, fx.eth1), before);
}
