//! `nmcli -t` output read back, and the profile built from it, as exact argument lists.
//! The device output is NetworkManager 1.42's, as printed in the systemd tier's container.

use super::*;

const DEVICE: &str = "GENERAL.DEVICE:eth1
GENERAL.TYPE:ethernet
GENERAL.HWADDR:02\\:00\\:00\\:00\\:01\\:10
GENERAL.STATE:100 (connected)
GENERAL.CONNECTION:Wired connection 1
GENERAL.CON-UUID:5e0c5f54-8a4a-3b7e-9b2f-0d4a1c8f0a11
DHCP4.OPTION[1]:broadcast_address = 192.0.2.255
DHCP4.OPTION[2]:dhcp_client_identifier = 01\\:02\\:00\\:00\\:00\\:01\\:10
DHCP4.OPTION[7]:ip_address = 192.0.2.10
DHCP6.OPTION[1]:dhcp6_client_id = 00\\:04\\:cf\\:4a\\:fd\\:f9\\:c7\\:ee\\:d4\\:29\\:e2\\:6b\\:2d\\:f7\\:be\\:d9\\:43\\:bb
DHCP6.OPTION[3]:iaid = 2a\\:83\\:5d\\:db
DHCP6.OPTION[4]:ip6_address = 2001\\:db8\\:1\\:\\:1f8
";

const PROFILE: &str = "connection.id:Wired connection 1
connection.uuid:5e0c5f54-8a4a-3b7e-9b2f-0d4a1c8f0a11
connection.type:802-3-ethernet
connection.interface-name:
802-3-ethernet.mac-address:02\\:00\\:00\\:00\\:01\\:10
ipv4.method:auto
ipv4.dns:198.51.100.53
ipv4.dns-search:
ipv4.addresses:
ipv4.gateway:
ipv4.routes:{ ip = 203.0.113.0/24, nh = 192.0.2.1 }
ipv4.route-metric:-1
ipv4.dhcp-client-id:
ipv4.never-default:no
ipv6.method:auto
ipv6.addresses:2001\\:db8\\:1\\:\\:99/64
ipv6.addr-gen-mode:eui64
ipv6.route-metric:-1
ipv6.dhcp-duid:
";

#[test]
fn terse_output_is_unescaped() {
    let p = parse_terse(PROFILE);
    assert_eq!(p["ipv6.addresses"], "2001:db8:1::99/64");
    assert_eq!(p["802-3-ethernet.mac-address"], "02:00:00:00:01:10");
    assert_eq!(p["connection.interface-name"], "");
    assert_eq!(p["ipv4.routes"], "{ ip = 203.0.113.0/24, nh = 192.0.2.1 }");
    let back = parse_terse("a:x\\\\y\\:z\nno colon here\n");
    assert_eq!(
        back.into_iter().collect::<Vec<_>>(),
        [("a".into(), "x\\y:z".into())]
    );
}

#[test]
fn the_device_says_its_profile_state_and_dhcp_identity() {
    assert_eq!(
        device_info(DEVICE),
        DeviceInfo {
            profile_uuid: "5e0c5f54-8a4a-3b7e-9b2f-0d4a1c8f0a11".into(),
            state: 100,
            connection: "Wired connection 1".into(),
            client_id: Some("01:02:00:00:00:01:10".into()),
            duid: Some("00:04:cf:4a:fd:f9:c7:ee:d4:29:e2:6b:2d:f7:be:d9:43:bb".into()),
            iaid: Some("0x2a835ddb".into()),
        }
    );
    let unmanaged = device_info("GENERAL.STATE:10 (unmanaged)\nGENERAL.CONNECTION:\n");
    assert_eq!((unmanaged.state, unmanaged.client_id), (10, None));
}

/// The host port is brought up only when NM is not already on tether's profile there: an
/// NM restart leaves it activating (state 70) for a while, and an `up` would start over.
#[test]
fn the_host_port_is_brought_up_only_when_nm_is_not_on_its_way() {
    let host = |state: u32, connection: &str| DeviceInfo {
        state,
        connection: connection.into(),
        ..DeviceInfo::default()
    };
    let cases = [
        (100, "tether-eth1", false),
        (70, "tether-eth1", false),
        (40, "tether-eth1", false),
        (30, "", true),
        (120, "tether-eth1", true),
        (110, "tether-eth1", true),
        (10, "", true),
        (100, "eth1", true),
        (70, "Wired connection 1", true),
    ];
    for (state, connection, want) in cases {
        assert_eq!(
            needs_up("eth1", &host(state, connection)),
            want,
            "state {state} on {connection:?}"
        );
    }
}

#[test]
fn the_host_ports_profile_is_the_nics_with_its_identity_and_metric_pinned() {
    let args = add_profile(
        "eth1",
        PortKind::Tap,
        &parse_terse(PROFILE),
        &device_info(DEVICE),
        Some(100),
    );
    assert_eq!(
        args,
        [
            "connection",
            "add",
            "save",
            "no",
            "type",
            "tun",
            "tun.mode",
            "tap",
            "con-name",
            "tether-eth1",
            "ifname",
            "eth1",
            "autoconnect",
            "no",
            "ipv4.method",
            "auto",
            "ipv4.routes",
            "{ ip = 203.0.113.0/24, nh = 192.0.2.1 }",
            "ipv4.dns",
            "198.51.100.53",
            "ipv4.never-default",
            "no",
            "ipv6.method",
            "auto",
            "ipv6.addresses",
            "2001:db8:1::99/64",
            "ipv6.addr-gen-mode",
            "eui64",
            "ipv4.dhcp-client-id",
            "01:02:00:00:00:01:10",
            "ipv6.dhcp-duid",
            "00:04:cf:4a:fd:f9:c7:ee:d4:29:e2:6b:2d:f7:be:d9:43:bb",
            "ipv6.dhcp-iaid",
            "0x2a835ddb",
            "ipv4.route-metric",
            "100",
            "ipv6.route-metric",
            "100",
        ]
    );
}

#[test]
fn a_generic_port_a_static_profile_and_the_profiles_own_metric() {
    let profile = parse_terse(
        "ipv4.method:manual\nipv4.addresses:192.0.2.10/24\nipv4.gateway:192.0.2.1\n\
         ipv4.route-metric:50\nipv4.dhcp-client-id:stable\nipv6.method:disabled\n",
    );
    let args = add_profile(
        "ens3",
        PortKind::Generic,
        &profile,
        &DeviceInfo::default(),
        None,
    );
    assert_eq!(
        args[4..].to_vec(),
        [
            "type",
            "generic",
            "con-name",
            "tether-ens3",
            "ifname",
            "ens3",
            "autoconnect",
            "no",
            "ipv4.method",
            "manual",
            "ipv4.addresses",
            "192.0.2.10/24",
            "ipv4.gateway",
            "192.0.2.1",
            "ipv6.method",
            "disabled",
            // No lease: the profile's own setting.
            "ipv4.dhcp-client-id",
            "stable",
            "ipv4.route-metric",
            "50",
        ]
    );
}

#[test]
fn the_effective_metric_from_the_device_state_file() {
    let state = "[device]\nmanaged=true\nperm-hw-addr-fake=02:00:00:00:01:10\n\
                 connection-uuid=5e0c\nroute-metric-default-aspired=100\n\
                 route-metric-default-effective=101\n";
    assert_eq!(effective_metric(state), Some(101));
    assert_eq!(effective_metric("[device]\nmanaged=true\n"), None);
}

#[test]
fn values_are_read_field_by_field() {
    let fields = ["ipv4.method", "ipv6.addresses", "ipv4.dns"];
    let v = parse_values(&fields, "auto\n2001\\:db8\\:1\\:\\:99/64\n\n").unwrap();
    assert_eq!(v["ipv6.addresses"], "2001:db8:1::99/64");
    assert_eq!(v["ipv4.dns"], "");
    assert_eq!(parse_values(&fields, "auto\n"), None);
    assert_eq!(profile_fields().len(), COPIED.len() + 5);
}

/// Given back, the NIC's own profile is brought up unless NM is on it already (it is, by
/// itself, after a DHCP profile; after a static one NM shows an external connection named
/// after the device: seen in the kernel tier on NetworkManager 1.42).
#[test]
fn given_back_the_nic_gets_its_own_profile_unless_nm_is_on_it() {
    let own = "148ceed3-3d3e-3dc9-930e-80cf6365b952";
    let nic = |uuid: &str| DeviceInfo {
        profile_uuid: uuid.into(),
        ..DeviceInfo::default()
    };
    assert!(!needs_own_profile(own, &nic(own)));
    assert!(needs_own_profile(
        own,
        &nic("1382c7af-60f8-4754-bd03-5c03896cec4a")
    ));
    assert!(needs_own_profile(own, &nic("")));
    assert!(!needs_own_profile("", &nic("")));
    assert_eq!(
        up_own(own),
        ["connection", "up", "uuid", own].map(String::from)
    );
    assert_eq!(kept_uuid(&format!("{own}\n")).as_deref(), Some(own));
    assert_eq!(kept_uuid(" \n"), None);
    assert_eq!(kept_uuid("nic; reboot"), None);
    assert_eq!(kept_uuid("--"), None);
}
