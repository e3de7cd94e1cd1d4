use std::collections::BTreeMap;

use super::*;
use crate::netlink::LinkFlags;

/// Files by path; a path ending in `/` is a directory (for `exists`), a `->` entry a
/// symlink.
#[derive(Default)]
struct FakeHost {
    files: BTreeMap<String, String>,
    links: BTreeMap<String, String>,
}

impl FakeHost {
    fn file(mut self, path: &str, text: &str) -> FakeHost {
        self.files.insert(path.into(), text.into());
        self
    }
    fn symlink(mut self, path: &str, target: &str) -> FakeHost {
        self.links.insert(path.into(), target.into());
        self
    }
}

impl Host for FakeHost {
    fn read(&self, path: &str) -> Option<String> {
        self.files.get(path).cloned()
    }
    fn exists(&self, path: &str) -> bool {
        let dir = format!("{path}/");
        self.links.contains_key(path) || self.files.keys().any(|k| k == path || k.starts_with(&dir))
    }
    fn list(&self, dir: &str) -> Vec<String> {
        let prefix = format!("{dir}/");
        let mut v: Vec<String> = self
            .files
            .keys()
            .filter_map(|k| {
                k.strip_prefix(&prefix)?
                    .split('/')
                    .next()
                    .map(str::to_string)
            })
            .collect();
        v.dedup();
        v
    }
    fn read_link(&self, path: &str) -> Option<String> {
        self.links.get(path).cloned()
    }
}

fn link(index: u32, name: &str, kind: Option<&str>) -> Link {
    Link {
        index,
        name: name.into(),
        mac: Some([2, 0xfc, 0, 0, 0, 1]),
        mtu: 1500,
        flags: LinkFlags(LinkFlags::UP.0),
        kind: kind.map(str::to_string),
        altnames: Vec::new(),
        master: None,
    }
}

#[test]
fn modules_from_sys_module_builtin_and_dep() {
    let h = FakeHost::default()
        .file("/sys/module/vxlan/parameters/log_ecn_error", "Y\n")
        .file(
            "/lib/modules/6.1.0-18-amd64/modules.builtin",
            "kernel/net/ipv4/gre.ko\nkernel/net/openvswitch/openvswitch.ko\n",
        )
        .file(
            "/lib/modules/6.1.0-18-amd64/modules.dep",
            "kernel/net/ipv4/ip_gre.ko.xz: kernel/net/ipv4/gre.ko.xz kernel/net/ipv4/ip_tunnel.ko.xz\n\
             kernel/net/ipv6/ip6_gre.ko.zst:\n\
             kernel/drivers/net/geneve.ko: kernel/net/ipv4/udp_tunnel.ko\n",
        );
    let m = Modules::read(&h, "6.1.0-18-amd64");
    assert_eq!(m.state(&h, "vxlan"), Module::Loaded);
    assert_eq!(m.state(&h, "openvswitch"), Module::BuiltIn);
    assert_eq!(m.state(&h, "ip_gre"), Module::Loadable);
    assert_eq!(m.state(&h, "ip6_gre"), Module::Loadable);
    assert_eq!(m.state(&h, "ip6-gre"), Module::Loadable);
    assert_eq!(m.state(&h, "geneve"), Module::Loadable);
    assert_eq!(m.state(&h, "erspan"), Module::Missing);
    // No /lib/modules at all (a kernel without modules, as on the test VMs).
    let bare = FakeHost::default();
    assert_eq!(
        Modules::read(&bare, "6.18.44-fc-v669").state(&bare, "openvswitch"),
        Module::Missing
    );
}

#[test]
fn release_is_trimmed() {
    let h = FakeHost::default().file("/proc/sys/kernel/osrelease", "6.18.44-fc-v669\n");
    assert_eq!(release(&h), "6.18.44-fc-v669");
}

/// Captured on Linux 6.18 with a Python socket bound to 0.0.0.0:4789 and one to [::]:6081.
#[test]
fn udp_ports_from_proc() {
    let h = FakeHost::default()
        .file(
            "/proc/net/udp",
            "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops            \n\
             10071: 00000000:12B5 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 15693142 2 0000000027c7e1ac 0      \n",
        )
        .file(
            "/proc/net/udp6",
            "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
             11363: 00000000000000000000000000000000:17C1 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 15693143 2 0000000020636bf7 0\n",
        );
    assert_eq!(udp_ports(&h), BTreeSet::from([4789, 6081]));
    assert_eq!(udp_ports(&FakeHost::default()), BTreeSet::new());
}

#[test]
fn wifi_and_upper_devices_only_for_this_namespaces_links() {
    let nic = link(2, "wlan0", None);
    let h = FakeHost::default()
        .file("/sys/class/net/wlan0/ifindex", "2\n")
        .symlink("/sys/class/net/wlan0/phy80211", "../../ieee80211/phy0")
        .file("/sys/class/net/mv0/ifindex", "5\n")
        .file("/sys/class/net/mv0/iflink", "2\n")
        .file("/sys/class/net/mv1/ifindex", "6\n")
        .file("/sys/class/net/mv1/iflink", "3\n")
        .file("/sys/class/net/veth0/ifindex", "7\n")
        .file("/sys/class/net/veth0/iflink", "2\n");
    assert!(wireless(&h, &nic));
    let links = vec![
        nic.clone(),
        link(5, "mv0", Some("macvlan")),
        link(6, "mv1", Some("macvlan")),
        // A veth's iflink is its peer's index, maybe in another namespace: not an upper.
        link(7, "veth0", Some("veth")),
    ];
    assert_eq!(
        uppers(&h, &links, &nic),
        vec![("mv0".to_string(), "macvlan".to_string())]
    );
    // /sys of another namespace (a container's view of the host's): the same names with
    // other indexes say nothing.
    let other = link(9, "wlan0", None);
    assert!(!wireless(&h, &other));
    let links = vec![other.clone(), link(15, "mv0", Some("macvlan"))];
    assert_eq!(uppers(&h, &links, &other), vec![]);
}

#[test]
fn dhcp_clients_naming_the_nic() {
    let h = FakeHost::default()
        // ifupdown's dhclient (ifupdown's inet.defn).
        .file("/proc/412/comm", "dhclient\n")
        .file(
            "/proc/412/cmdline",
            "/sbin/dhclient\0-4\0-v\0-i\0-pf\0/run/dhclient.eth1.pid\0-lf\0/var/lib/dhcp/dhclient.eth1.leases\0-I\0-df\0/var/lib/dhcp/dhclient6.eth1.leases\0eth1\0",
        )
        // dhcpcd 9 rewrites its title, spaces instead of NULs.
        .file("/proc/77/comm", "dhcpcd\n")
        .file("/proc/77/cmdline", "dhcpcd: eth1 [ip4]\0")
        .file("/proc/78/comm", "dhcpcd\n")
        .file("/proc/78/cmdline", "dhcpcd: eth2 [ip4]\0")
        .file("/proc/90/comm", "sshd\n")
        .file("/proc/90/cmdline", "sshd: eth1\0")
        .file("/proc/self/comm", "tether\n");
    assert_eq!(
        dhcp_clients(&h, "eth1"),
        vec![
            DhcpClient {
                pid: 77,
                program: "dhcpcd".into()
            },
            DhcpClient {
                pid: 412,
                program: "dhclient".into()
            },
        ]
    );
    assert_eq!(dhcp_clients(&h, "eth3"), vec![]);
}

/// Ubuntu's cloud-init netplan file on an EC2 instance (its shape, our values).
const CLOUD_INIT: &str = "network:
    ethernets:
        ens5:
            dhcp4: true
            dhcp6: false
            match:
                macaddress: 02:FC:00:00:00:01
            set-name: ens5
    version: 2
";

#[test]
fn netplan_entries_that_apply() {
    let m = |text: &str, nic: &str, driver: Option<&str>| {
        netplan_matches(
            "/etc/netplan/x.yaml",
            text,
            nic,
            Some("02:fc:00:00:00:01"),
            driver,
        )
    };
    assert_eq!(
        m(CLOUD_INIT, "ens5", Some("ena")),
        vec![NetplanMatch {
            file: "/etc/netplan/x.yaml".into(),
            id: "ens5".into(),
            by: "macaddress",
            set_name: Some("ens5".into()),
        }]
    );
    // The MAC decides, whatever the NIC is called now.
    assert_eq!(m(CLOUD_INIT, "eth0", None).len(), 1);
    let driver = "network:\n  ethernets:\n    nics:\n      match:\n        driver: \"virtio*\"\n        name: en*\n      dhcp4: yes\n";
    assert_eq!(
        m(driver, "ens3", Some("virtio_net")),
        vec![NetplanMatch {
            file: "/etc/netplan/x.yaml".into(),
            id: "nics".into(),
            by: "driver",
            set_name: None,
        }]
    );
    assert_eq!(m(driver, "ens3", Some("e1000")), vec![]);
    assert_eq!(m(driver, "eth0", Some("virtio_net")), vec![]);
    let by_id = "network:\n  version: 2\n  ethernets:\n    eth1:\n      addresses: [192.0.2.10/24]\n    eth2: {}\n";
    assert_eq!(
        m(by_id, "eth1", None),
        vec![NetplanMatch {
            file: "/etc/netplan/x.yaml".into(),
            id: "eth1".into(),
            by: "name",
            set_name: None,
        }]
    );
    assert_eq!(m("not: [yaml", "eth1", None), vec![]);
    assert_eq!(m("network:\n  bonds: {}\n", "eth1", None), vec![]);
}

#[test]
fn netplan_files_and_the_nics_driver() {
    let nic = link(2, "ens5", None);
    let h = FakeHost::default()
        .file("/etc/netplan/50-cloud-init.yaml", CLOUD_INIT)
        .file("/etc/netplan/README", "not yaml")
        .file("/sys/class/net/ens5/ifindex", "2\n")
        .symlink(
            "/sys/class/net/ens5/device/driver",
            "../../../../bus/pci/drivers/ena",
        );
    assert_eq!(driver(&h, &nic).as_deref(), Some("ena"));
    assert_eq!(
        netplan(&h, &nic),
        vec![NetplanMatch {
            file: "/etc/netplan/50-cloud-init.yaml".into(),
            id: "ens5".into(),
            by: "macaddress",
            set_name: Some("ens5".into()),
        }]
    );
}

#[test]
fn ovs_version_from_the_column_or_appctl() {
    assert_eq!(ovs_version(Some("3.1.0"), None).as_deref(), Some("3.1.0"));
    // A bare ovs-vswitchd (no start script) leaves the column empty; `ovs-appctl version`
    // as OVS 3.1.0 answers it.
    assert_eq!(
        ovs_version(Some(""), Some("ovs-vswitchd (Open vSwitch) 3.1.0\n")).as_deref(),
        Some("3.1.0")
    );
    assert_eq!(ovs_version(None, None), None);
}

#[test]
fn globs() {
    assert!(glob("en*", "ens5"));
    assert!(glob("eth?", "eth1"));
    assert!(!glob("eth?", "eth10"));
    assert!(glob("*", ""));
    assert!(!glob("en*", "eth0"));
    assert!(glob("e*h*1", "eth1"));
    assert!(glob("*1", "eth11"));
    assert!(!glob("*2", "eth11"));
    assert!(glob("en*s*", "enp0s16"));
    assert!(!glob("", "x"));
    assert!(glob("", ""));
    assert!(glob("**", "a"));
    // Many `*`s against a name they cannot match: the recursive form never finished this
    // (exponential in the `*`s); now it is 40 × 60 steps.
    let pattern = format!("{}b", "*a".repeat(40));
    assert!(!glob(&pattern, &"a".repeat(60)));
}
