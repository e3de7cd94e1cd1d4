//! A NIC whose host port OVS lost (`del-port`, `del-br`, an emptied database) is given
//! back from the state directory's held configuration, then taken over again; `restore_all`
//! (`tether reset`) stops after the giving back.

use super::*;
use crate::controller::externalnode::heldfile::HeldFiles;

fn state_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("tether-giveback-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The fixture's controller, keeping held configurations in `dir` as well.
fn with_state(fx: &Fx, dir: &std::path::Path) -> EnController {
    new_controller_in(
        &fx.sim,
        &fx.flows,
        &fx.dp,
        &fx.stores,
        &fx.links,
        Some(dir.to_path_buf()),
    )
}

/// OVS loses the host port: its row and its netdev go (with the VM's addresses and
/// routes); with `bridge_too`, the uplink's row and every Bridge external_id as well (as
/// with `del-br` or an emptied database).
fn lose_host_port(fx: &Fx, bridge_too: bool) {
    let ifs = fx.sim.interfaces();
    let mut gone = vec![ifs.get("eth1").unwrap().uuid().clone()];
    if bridge_too {
        gone.push(ifs.get("eth1~").unwrap().uuid().clone());
        fx.sim.bridge.bridge_ids.lock().unwrap().clear();
    }
    fx.sim.delete_ports(&gone).unwrap();
    assert!(fx.links.link_by_name("eth1").is_err());
}

#[test]
fn the_held_file_follows_the_nic_and_goes_with_the_restore() {
    let fx = fixture();
    let dir = state_dir("file");
    let ctl = with_state(&fx, &dir);
    let files = HeldFiles::new(&dir);
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
    ctl.sync().unwrap();
    assert_attached(&fx);
    assert_eq!(files.nics(), ["eth1"]);
    let held = files.read("eth1").unwrap().unwrap();
    let locals: Vec<String> = held.config.addrs.iter().map(|a| a.to_string()).collect();
    assert_eq!(locals, ["192.0.2.10/24", "2001:db8:1::10/64"]);
    // An address added on the host port is held from the next sync on, in both places.
    let host = fx.links.link_by_name("eth1").unwrap();
    add_addr(&fx.links, host.index, "192.0.2.11", 24, Some("eth1"));
    ctl.sync().unwrap();
    let held = files.read("eth1").unwrap().unwrap();
    assert_eq!(held.config.addrs.len(), 3);
    set_en(&fx, None);
    ctl.sync().unwrap();
    assert_eq!(files.nics(), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_deleted_host_port_gives_the_nic_back_and_takes_it_over_again() {
    for bridge_too in [false, true] {
        let fx = fixture();
        let dir = state_dir(&format!("sync-{bridge_too}"));
        let ctl = with_state(&fx, &dir);
        let before = nic_state(&fx.links, fx.eth1);
        set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
        ctl.sync().unwrap();
        lose_host_port(&fx, bridge_too);
        fx.links.clear_calls();
        ctl.sync().unwrap();
        // Given back first (the NIC's own name, then its addresses and routes), then
        // taken over as on the first day.
        let calls = fx.links.calls();
        assert_eq!(
            &calls[..3],
            &[
                Call::SetDown(fx.eth1),
                Call::SetName(fx.eth1, "eth1".into()),
                Call::SetUp(fx.eth1)
            ],
            "bridge_too={bridge_too}"
        );
        assert_attached(&fx);
        assert_eq!(HeldFiles::new(&dir).nics(), ["eth1"]);
        // And the NIC that comes back in the end is the one from before.
        set_en(&fx, None);
        ctl.sync().unwrap();
        assert_pristine(&fx, &before);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn reset_gives_back_a_nic_whose_bridge_is_gone() {
    let fx = fixture();
    let dir = state_dir("reset");
    let ctl = with_state(&fx, &dir);
    let before = nic_state(&fx.links, fx.eth1);
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
    ctl.sync().unwrap();
    lose_host_port(&fx, true);
    assert_eq!(ctl.restore_all().unwrap(), ["eth1"]);
    assert_pristine(&fx, &before);
    assert_eq!(HeldFiles::new(&dir).nics(), Vec::<String>::new());
    // Nothing left: a second reset has nothing to do.
    assert_eq!(ctl.restore_all().unwrap(), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_give_back_interrupted_after_the_rename_is_finished() {
    let fx = fixture();
    let dir = state_dir("half");
    let ctl = with_state(&fx, &dir);
    let before = nic_state(&fx.links, fx.eth1);
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
    ctl.sync().unwrap();
    lose_host_port(&fx, true);
    // The crash: renamed back, nothing else yet.
    fx.links.rename(fx.eth1, "eth1").unwrap();
    assert_eq!(ctl.restore_all().unwrap(), ["eth1"]);
    assert_pristine(&fx, &before);
    // Counted like any give-back.
    let st = ctl.status();
    assert_eq!(
        (st.repairs, st.last_repair.as_deref()),
        (
            1,
            Some(
                "host port eth1 was lost: eth1 had its own name back: its held configuration is back on it"
            )
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn status_reads_the_ports_as_they_are_now() {
    let fx = fixture();
    set_en(&fx, Some(en("vm1", "", &["192.0.2.10", "2001:db8:1::10"])));
    fx.ctl.sync().unwrap();
    assert_eq!(fx.ctl.status().cut_off, None);
    // No sync since: the last sync's status said "attached", the ports say otherwise.
    lose_host_port(&fx, false);
    let st = fx.ctl.status();
    assert_eq!(st.step, "attached");
    assert_eq!(
        st.cut_off.as_deref(),
        Some("host port eth1 is not on the bridge")
    );
}
