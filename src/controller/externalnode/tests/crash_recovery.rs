//! Crash recovery from the record: a takeover crashed at any write is rolled back, a
//! restore is finished, and a record that does not decode is recovered from the kernel
//! and OVSDB (or kept for an operator when something is half done).

use std::panic::{AssertUnwindSafe, catch_unwind};

use super::sim::Crash;
use super::*;

/// Run `f` until the simulated crash at record write `k` (counted from now).
pub(super) fn crash_during(fx: &Fx, k: usize, how: Crash, f: impl FnOnce()) {
    fx.sim.writes.store(0, Ordering::SeqCst);
    *fx.sim.crash_write.lock().unwrap() = Some((k, how));
    let r = catch_unwind(AssertUnwindSafe(f));
    assert!(r.is_err(), "no crash at write {k} {how:?}");
    *fx.sim.crash_write.lock().unwrap() = None;
}

#[test]
fn recovery_rolls_back_a_takeover_crashed_at_every_step() {
    for k in 0..4 {
        for how in [Crash::BeforeWrite, Crash::AfterWrite] {
            let fx = fixture();
            let before = fx.nic_now();
            fx.want(ETH1_IPS);
            crash_during(&fx, k, how, || {
                let _ = fx.ctl.sync();
            });
            if how == Crash::AfterWrite || k > 0 {
                assert!(record(&fx).is_some(), "write {k} {how:?}");
            }
            // The restarted process.
            let ctl = controller(&fx);
            ctl.recover().unwrap();
            assert_pristine(&fx, &before);
            ctl.sync().unwrap();
            assert_attached(&fx);
        }
    }
}

#[test]
fn recovery_finishes_a_restore_crashed_at_every_step() {
    for k in 0..4 {
        for how in [Crash::BeforeWrite, Crash::AfterWrite] {
            let fx = fixture();
            let before = fx.nic_now();
            fx.take_over(ETH1_IPS);
            set_en(&fx, None);
            crash_during(&fx, k, how, || {
                let _ = fx.ctl.sync();
            });
            let rec = record(&fx).map(|r| Record::from_json(&r).unwrap());
            if how == Crash::AfterWrite || k > 0 {
                assert_eq!(rec.as_ref().map(|r| r.phase), Some(Phase::Restore));
            }
            let ctl = controller(&fx);
            ctl.recover().unwrap();
            if rec.is_some() {
                assert_pristine(&fx, &before);
            }
            ctl.sync().unwrap();
            assert_pristine(&fx, &before);
        }
    }
}

#[test]
fn a_restore_record_carries_the_host_config() {
    let fx = fixture();
    fx.take_over(ETH1_IPS);
    set_en(&fx, None);
    crash_during(&fx, 1, Crash::BeforeWrite, || {
        let _ = fx.ctl.sync();
    });
    let rec = Record::from_json(&record(&fx).unwrap()).unwrap();
    assert_eq!((rec.phase, rec.step), (Phase::Restore, Step::Flows));
    assert_eq!((rec.nic.as_str(), rec.uplink.as_str()), ("eth1", "eth1~"));
    assert_eq!(rec.config.ifindex, fx.eth1);
    assert_eq!((rec.config.mac, rec.config.mtu), (Some(MAC1), 1450));
    let locals: Vec<String> = rec.config.addrs.iter().map(|a| a.to_string()).collect();
    assert_eq!(locals, ["192.0.2.10/24", "2001:db8:1::10/64"]);
    assert_eq!(rec.config.routes.len(), 3);
}

/// Every address the kernel holds on the NIC, its uplink name or the host port.
fn addresses_anywhere(fx: &Fx) -> Vec<String> {
    let (links, addrs, _) = fx.links.snapshot();
    let ours: Vec<u32> = links
        .iter()
        .filter(|l| l.name == "eth1" || l.name == "eth1~")
        .map(|l| l.index)
        .collect();
    let mut v: Vec<String> = addrs
        .iter()
        .filter(|a| ours.contains(&a.ifindex))
        .map(|a| a.to_string())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// A record that does not decode (here: not JSON at all, and a good one with a multi-byte
/// character where hex digits belong, which used to panic on a string slice) is logged
/// and the NIC is recovered from the kernel and OVSDB, at every crash point of a takeover
/// and of a restore: the NIC has its name back with every address the kernel still had
/// anywhere, no port, flow or record is left, and a sync takes it over again.
#[test]
fn an_unreadable_record_is_recovered_from_the_kernel() {
    for restore in [false, true] {
        for k in 0..4 {
            for corrupt in ["{not json", "metrics"] {
                let fx = fixture();
                let en1 = en("vm1", "", &["192.0.2.10", "2001:db8:1::10"]);
                set_en(&fx, Some(en1.clone()));
                if restore {
                    fx.ctl.sync().unwrap();
                    set_en(&fx, None);
                }
                crash_during(&fx, k, Crash::AfterWrite, || {
                    let _ = fx.ctl.sync();
                });
                let good = record(&fx).expect("a record");
                let bad = if corrupt == "metrics" {
                    let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
                    v["routes"][0]["metrics"] = serde_json::json!("€0");
                    v.to_string()
                } else {
                    corrupt.to_string()
                };
                fx.sim
                    .bridge
                    .set_bridge_external_id(RECORD_KEY, Some(&bad))
                    .unwrap();
                let had = addresses_anywhere(&fx);
                let what = format!("restore={restore} write={k} record={corrupt}");
                let ctl = controller(&fx);
                ctl.recover().unwrap_or_else(|e| panic!("{what}: {e}"));
                let (l, _, _) = nic_state(&fx.links, fx.eth1);
                assert_eq!(l.name, "eth1", "{what}");
                assert!(l.is_up(), "{what}");
                assert_eq!(addresses_anywhere(&fx), had, "{what}");
                assert_eq!(port_names(&fx), vec!["br-int".to_string()], "{what}");
                assert_eq!(record(&fx), None, "{what}");
                assert!(pair_flows(&fx).is_empty(), "{what}");
                if had.is_empty() {
                    // A restore that crashed after deleting the host port (which held the
                    // addresses) with its record destroyed: the kernel has nothing left to
                    // recover from, so the NIC stays plain.
                    assert!(restore && k == 3, "{what}");
                    continue;
                }
                set_en(&fx, Some(en1));
                ctl.sync().unwrap_or_else(|e| panic!("{what}: {e}"));
                // Taken over again with what survived (an IPv6 address that lived only in
                // the broken record is gone: setting the NIC down had removed it).
                assert_eq!(nic_state(&fx.links, fx.eth1).0.name, "eth1~", "{what}");
                let host = fx.links.link_by_name("eth1").unwrap();
                let (_, on_host, _) = nic_state(&fx.links, host.index);
                let mut on_host: Vec<String> = on_host.iter().map(|a| a.to_string()).collect();
                on_host.sort();
                assert_eq!(on_host, had, "{what}");
                if k == 3 || restore {
                    assert_attached(&fx);
                }
            }
        }
    }
}

/// A record no NIC can be recovered from (nothing named, no host port, but a link with
/// an uplink-style name tether cannot map back) is reported and left for an operator;
/// nothing is touched and nothing panics. With no such link there is nothing to undo and
/// the record goes.
#[test]
fn a_record_naming_nothing_is_kept_only_when_something_is_half_done() {
    let fx = fixture();
    let before = fx.nic_now();
    fx.sim
        .bridge
        .set_bridge_external_id(RECORD_KEY, Some("{not json"))
        .unwrap();
    controller(&fx).recover().unwrap();
    assert_eq!(record(&fx), None);
    assert_eq!(nic_state(&fx.links, fx.eth1), before);
    // A long NIC name's uplink (`<head>~<hash>`) cannot be mapped back to its NIC.
    fx.links
        .add_link("eth7verylo~a1b2c3", [2, 0, 0, 0, 7, 7], 1500, true);
    fx.sim
        .bridge
        .set_bridge_external_id(RECORD_KEY, Some("{not json"))
        .unwrap();
    let e = controller(&fx).recover().unwrap_err();
    assert!(
        e.to_string()
            .starts_with("Bridge external_ids:tether-en-op is unreadable (not JSON"),
        "{e}"
    );
    assert_eq!(record(&fx).as_deref(), Some("{not json"));
    assert_eq!(nic_state(&fx.links, fx.eth1), before);
}
