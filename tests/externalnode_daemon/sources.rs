//! The daemon with the ExternalNode from a manifests directory (`kill -9` at every step of
//! takeover and restore) and from the test API server.

use super::*;

#[test]
fn daemon_from_manifests_with_kill9_at_every_step() {
    if !privileged("daemon_from_manifests_with_kill9_at_every_step") {
        return;
    }
    let (sb, peer) = setup();
    let vm = sb.ns();
    let before = snapshot(vm, "eth1");
    let dir = sb.dir().join("manifests");
    std::fs::create_dir_all(&dir).unwrap();
    write_en(&dir, Some(EN_YAML));
    let args = manifests_args(&dir);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();

    // Takeover from the manifests directory; traffic through OVS.
    let d = Daemon::start(&sb, &args, None);
    wait_attached(&sb, "192.0.2.10,2001:db8:1::10", "takeover from manifests");
    neutralise_uplink(vm, "eth1~", true);
    assert_clean_ping(&peer, "192.0.2.10");
    assert_clean_ping(&peer, "2001:db8:1::10");
    tcp_transfer(vm, &peer, "2001:db8:1::10");
    neutralise_uplink(vm, "eth1~", false);
    // A restart of tether does not interrupt anything and changes nothing.
    d.stop(&sb);
    let d = Daemon::start(&sb, &args, None);
    wait_attached(&sb, "192.0.2.10,2001:db8:1::10", "restart while attached");
    d.stop(&sb);

    for (take, restore) in [
        ("rename", "flows"),
        ("ports", "ports"),
        ("move", "rename"),
        ("flows", "move"),
    ] {
        // From attached: delete the EN, crash in the restore, restart → restored exactly.
        write_en(&dir, None);
        Daemon::start(&sb, &args, Some(&format!("restore-{restore}")))
            .expect_abort(&sb, &format!("restore-{restore}"));
        let d = Daemon::start(&sb, &args, None);
        wait_restored(&sb, &before, &format!("restart after restore-{restore}"));
        assert_clean_ping(&peer, "192.0.2.10");
        d.stop(&sb);

        // From plain: the EN comes back, crash in the takeover, restart → attached.
        write_en(&dir, Some(EN_YAML));
        Daemon::start(&sb, &args, Some(&format!("takeover-{take}")))
            .expect_abort(&sb, &format!("takeover-{take}"));
        let d = Daemon::start(&sb, &args, None);
        wait_attached(
            &sb,
            "192.0.2.10,2001:db8:1::10",
            &format!("restart after takeover-{take}"),
        );
        let out = ping(&peer, "192.0.2.10");
        assert!(out.contains("3 received"), "after takeover-{take}: {out}");
        d.stop(&sb);
    }

    // Finally the delete, by a running daemon.
    let d = Daemon::start(&sb, &args, None);
    write_en(&dir, None);
    wait_restored(&sb, &before, "delete from manifests");
    d.stop(&sb);
}

fn en_json(ips: &[&str]) -> serde_json::Value {
    json!({"apiVersion": "crd.antrea.io/v1alpha1", "kind": "ExternalNode",
           "metadata": {"namespace": "default", "name": "vm1"},
           "spec": {"interfaces": [{"ips": ips}]}})
}

#[test]
fn daemon_from_the_api_server() {
    if !privileged("daemon_from_the_api_server") {
        return;
    }
    let (sb, peer) = setup();
    let vm = sb.ns();
    let before = snapshot(vm, "eth1");
    let srv = apiserver::ApiServer::start(apiserver::Options::default());
    let api = common::relay::ApiInNetns::new(vm, sb.dir(), &srv.url(), None);
    let kubeconfig = &api.kubeconfig;
    let args = [
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--allow-plain-http",
    ];

    let d = Daemon::start(&sb, &args, None);
    srv.create(en_json(&["192.0.2.10", "2001:db8:1::10"]));
    wait_attached(&sb, "192.0.2.10,2001:db8:1::10", "takeover from the API");
    neutralise_uplink(vm, "eth1~", true);
    assert_clean_ping(&peer, "192.0.2.10");
    assert_clean_ping(&peer, "2001:db8:1::10");

    // An IP added on the VM and to the ExternalNode: external_ids follow.
    vm.ip(&["addr", "add", "192.0.2.11/24", "dev", "eth1"]);
    srv.update(en_json(&["192.0.2.10", "2001:db8:1::10", "192.0.2.11"]));
    wait_attached(
        &sb,
        "192.0.2.10,192.0.2.11,2001:db8:1::10",
        "external_ids follow the new IP",
    );
    vm.ip(&["addr", "del", "192.0.2.11/24", "dev", "eth1"]);

    // kill -9 of tether while attached: traffic keeps flowing, the restart converges.
    drop(d);
    assert_clean_ping(&peer, "192.0.2.10");
    srv.update(en_json(&["192.0.2.10", "2001:db8:1::10"]));
    let d = Daemon::start(&sb, &args, None);
    wait_attached(&sb, "192.0.2.10,2001:db8:1::10", "restart after kill -9");

    neutralise_uplink(vm, "eth1~", false);
    srv.delete("externalnodes", "default/vm1");
    wait_restored(&sb, &before, "delete from the API");
    assert_clean_ping(&peer, "192.0.2.10");
    assert_clean_ping(&peer, "2001:db8:1::10");
    d.stop(&sb);
}
