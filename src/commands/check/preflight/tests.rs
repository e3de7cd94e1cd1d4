use super::*;

pub(super) fn f(level: Level, what: &str, detail: &str, fix: Option<&str>) -> Finding {
    Finding {
        level,
        what: what.into(),
        detail: detail.into(),
        fix: fix.map(str::to_string),
    }
}

fn facts(module: Module, ovs_system_link: bool) -> DatapathFacts {
    DatapathFacts {
        release: "6.18.44-fc-v669".into(),
        module,
        ovs_system_link,
    }
}

#[test]
fn kernel_datapath_where_system_is_configured() {
    assert_eq!(
        kernel_datapath("system", &facts(Module::Missing, false)),
        f(
            Level::Fail,
            "kernel datapath",
            "datapathType is system, but the openvswitch kernel module is not loaded (no \
             /sys/module/openvswitch) and not in /lib/modules/6.18.44-fc-v669: OVS cannot \
             create the bridge's datapath",
            Some(
                "install the kernel's openvswitch module (modprobe openvswitch must work; some \
                 distributions ship it in an extra modules package), then restart Open \
                 vSwitch; or set datapathType: netdev (the userspace datapath)"
            ),
        )
    );
    for (module, link, detail) in [
        (
            Module::Loaded,
            false,
            "the openvswitch module is loaded (Linux 6.18.44-fc-v669)",
        ),
        (
            Module::BuiltIn,
            false,
            "the openvswitch module is built in (Linux 6.18.44-fc-v669)",
        ),
        (
            Module::Loadable,
            false,
            "the openvswitch module is loadable (Linux 6.18.44-fc-v669)",
        ),
        // A built-in module without parameters has no /sys/module entry; the datapath's
        // own link says enough.
        (
            Module::Missing,
            true,
            "the ovs-system datapath exists (Linux 6.18.44-fc-v669)",
        ),
    ] {
        assert_eq!(
            kernel_datapath("system", &facts(module, link)),
            f(Level::Ok, "kernel datapath", detail, None)
        );
    }
}

#[test]
fn kernel_datapath_where_netdev_is_configured() {
    let warn = |evidence: &str| {
        f(
            Level::Warn,
            "kernel datapath",
            &format!(
                "datapathType is netdev although this host has the kernel datapath \
                 ({evidence}): netdev is OVS's userspace datapath, every packet goes through \
                 ovs-vswitchd (slower, more CPU)"
            ),
            Some("set datapathType: system, unless the userspace datapath is what you want"),
        )
    };
    assert_eq!(
        kernel_datapath("netdev", &facts(Module::Loaded, false)),
        warn("the openvswitch module is loaded")
    );
    assert_eq!(
        kernel_datapath("netdev", &facts(Module::Missing, true)),
        warn("the ovs-system datapath exists")
    );
    // The test tiers' hosts: no module at all.
    assert_eq!(
        kernel_datapath("netdev", &facts(Module::Missing, false)),
        f(
            Level::Ok,
            "kernel datapath",
            "none needed: datapathType is netdev (the openvswitch module is missing)",
            None
        )
    );
    assert_eq!(
        kernel_datapath("netdev", &facts(Module::Loadable, false)),
        f(
            Level::Ok,
            "kernel datapath",
            "none needed: datapathType is netdev (the openvswitch module is loadable)",
            None
        )
    );
}

#[test]
fn datapath_type_of_the_existing_bridge() {
    // OVS writes "" for its default, system.
    assert_eq!(datapath("br-int", "", "system"), None);
    assert_eq!(datapath("br-int", "netdev", "netdev"), None);
    assert_eq!(
        datapath("br-int", "", "netdev"),
        Some(f(
            Level::Fail,
            "datapath",
            "bridge br-int has datapath_type=system, configured netdev: tether run refuses to \
             start rather than change it",
            Some(
                "set datapathType: system in the config, or delete the bridge (ovs-vsctl del-br \
                 br-int) to let tether create it"
            ),
        ))
    );
    assert_eq!(
        datapath("br-x", "netdev", "system"),
        Some(f(
            Level::Fail,
            "datapath",
            "bridge br-x has datapath_type=netdev, configured system: tether run refuses to \
             start rather than change it",
            Some(
                "set datapathType: netdev in the config, or delete the bridge (ovs-vsctl del-br \
                 br-x) to let tether create it"
            ),
        ))
    );
}

#[test]
fn flow_restore_wait_left_set() {
    assert_eq!(flow_restore_wait(None, false), None);
    assert_eq!(flow_restore_wait(Some("false"), false), None);
    assert_eq!(
        flow_restore_wait(Some("true"), false),
        Some(f(
            Level::Warn,
            "flow-restore-wait",
            "Open_vSwitch other_config:flow-restore-wait=true and no tether is running (a start \
             that did not finish?): ovs-vswitchd forwards no new traffic until it is cleared",
            Some(
                "start tether (it clears it after its first full sync), or clear it by hand: \
                 ovs-vsctl remove Open_vSwitch . other_config flow-restore-wait"
            ),
        ))
    );
    assert_eq!(
        flow_restore_wait(Some("true"), true),
        Some(f(
            Level::Ok,
            "flow-restore-wait",
            "set: the running tether clears it after its first full sync",
            None
        ))
    );
}

/// This machine, read for real: where the openvswitch module is nowhere (no
/// /sys/module/openvswitch, no /lib/modules for this kernel, as on the test VMs), a
/// system datapath fails naming the module.
#[test]
fn kernel_datapath_on_this_host() {
    let h = host::RealHost;
    let release = host::release(&h);
    let module = host::Modules::read(&h, &release).state(&h, "openvswitch");
    if module != Module::Missing
        || std::path::Path::new(&format!("/lib/modules/{release}")).exists()
        || std::path::Path::new("/sys/class/net/ovs-system").exists()
    {
        eprintln!("skipped: this host may have the openvswitch module ({module})");
        return;
    }
    let got = kernel_datapath(
        "system",
        &DatapathFacts {
            release: release.clone(),
            module,
            ovs_system_link: false,
        },
    );
    assert_eq!(got.level, Level::Fail);
    assert!(
        got.detail.starts_with(&format!(
            "datapathType is system, but the openvswitch kernel module is not loaded (no \
             /sys/module/openvswitch) and not in /lib/modules/{release}"
        )),
        "{got:?}"
    );
}

/// The same through `tether check`'s whole run (no OVS, no manifests directory): the
/// finding is there, in full, right after the OVS section.
#[test]
fn check_run_on_this_host_fails_the_kernel_datapath() {
    let h = host::RealHost;
    let release = host::release(&h);
    if host::Modules::read(&h, &release).state(&h, "openvswitch") != Module::Missing
        || std::path::Path::new(&format!("/lib/modules/{release}")).exists()
        || std::path::Path::new("/sys/class/net/ovs-system").exists()
    {
        eprintln!("skipped: this host may have the openvswitch module");
        return;
    }
    let dir = std::env::temp_dir().join(format!("tether-preflight-{}", std::process::id()));
    let cfg = crate::config::Config {
        node_name: "vm1".into(),
        ovs_rundir: dir.join("no-ovs"),
        bridge: "br-int".into(),
        datapath_type: "system".into(),
        source: crate::config::Input::Manifests(dir.join("no-manifests")),
        external_node_namespace: "default".into(),
        state_socket: dir.join("run/tether.sock"),
        state_dir: dir.join("state"),
        policy_bypass_rules: vec![],
        allow_insecure_tls: false,
        allow_plain_http: false,
        antrea_kubeconfig: None,
        warnings: vec![],
        notes: vec![],
    };
    let found = crate::commands::check::run(&cfg);
    let whats: Vec<&str> = found.iter().map(|f| f.what.as_str()).collect();
    assert_eq!(
        whats,
        [
            "privileges",
            "ovsdb",
            "kernel datapath",
            "manifests",
            "state socket"
        ]
    );
    assert_eq!(
        found[2],
        f(
            Level::Fail,
            "kernel datapath",
            &format!(
                "datapathType is system, but the openvswitch kernel module is not loaded (no \
                 /sys/module/openvswitch) and not in /lib/modules/{release}: OVS cannot create \
                 the bridge's datapath"
            ),
            Some(
                "install the kernel's openvswitch module (modprobe openvswitch must work; some \
                 distributions ship it in an extra modules package), then restart Open \
                 vSwitch; or set datapathType: netdev (the userspace datapath)"
            ),
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}
