//! NetworkManager, as tether meets it at a takeover: what `nmcli` says, and the `nmcli`
//! commands that keep the VM's address, as pure functions (no I/O; `nmcli.rs` runs them).
//!
//! Why anything is needed (tried in the systemd tier's container, NetworkManager 1.42): NM
//! follows the NIC's ifindex whatever its profile matches (name, MAC, or neither: "Wired
//! connection 1"). After the rename it keeps renewing the lease on `<nic>~`, which then
//! holds the address and a second default route, and it shows the host port as
//! "connected (externally)" and runs no DHCP there, so the host port's copy of the address
//! expires with the lease.
//!
//! What tether does, through NM's own runtime interfaces (nothing that outlives a reboot):
//! * before the rename: an in-memory profile `tether-<nic>` (`nmcli connection add save
//!   no`: NM keeps it under /run) for the host port, with the NIC's profile's IP settings
//!   and its DHCP identity pinned (client-id, DUID, IAID: the host port is a new device,
//!   and a profile that derives them from its own UUID or name would get another lease);
//!   then the NIC unmanaged (`nmcli device set <nic> managed no`: per ifindex, so it
//!   follows the NIC through the rename, survives an NM restart, and leaves the link up
//!   with its addresses, where an `unmanaged-devices` setting would take it down);
//! * once attached: the host port managed (the kernel datapath's port is a generic device,
//!   unmanaged by default) and the profile up; checked again on every sync;
//! * when the NIC is given back: the profile deleted and the NIC managed again, and its own
//!   profile up again (by the UUID remembered at the takeover; NM activates it by itself on
//!   leased addresses, but takes static ones as an "external" connection), so that NM
//!   renews the same lease or keeps the static configuration as its own.
//!
//! The profile's type follows the host port's device: `tun` (mode tap) on the userspace
//! datapath, `generic` on the kernel one (Debian's NM has no OVS device plugin; with
//! NetworkManager-ovs installed the port would be an `ovs-interface`: not handled yet).

use std::collections::BTreeMap;

/// The name of the in-memory profile for the host port `nic`.
pub fn profile_name(nic: &str) -> String {
    format!("tether-{nic}")
}

/// `nmcli -t` output as `field → value`: each line `FIELD:value`, where the value's `:`
/// and `\` are escaped with `\`. Repeated fields keep the last value.
pub fn parse_terse(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((k, v)) = split_unescaped(line) else {
            continue;
        };
        out.insert(k.to_string(), unescape(v));
    }
    out
}

fn split_unescaped(line: &str) -> Option<(&str, &str)> {
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b':' => return Some((&line[..i], &line[i + 1..])),
            _ => i += 1,
        }
    }
    None
}

fn unescape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

/// What the NIC's device says (`nmcli -t -f GENERAL,DHCP4,DHCP6 device show <nic>`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceInfo {
    /// `GENERAL.CON-UUID`: the active profile (empty: none).
    pub profile_uuid: String,
    /// `GENERAL.STATE`'s number (100 connected, 10 unmanaged, …).
    pub state: u32,
    /// `GENERAL.CONNECTION`: the active profile's name.
    pub connection: String,
    /// DHCPv4 option `dhcp_client_identifier` of the current lease.
    pub client_id: Option<String>,
    /// DHCPv6 options `dhcp6_client_id` (the DUID) and `iaid` (as `0x…`).
    pub duid: Option<String>,
    pub iaid: Option<String>,
}

/// Read [`DeviceInfo`] from `nmcli -t` device output.
pub fn device_info(text: &str) -> DeviceInfo {
    let mut d = DeviceInfo::default();
    for line in text.lines() {
        let Some((k, v)) = split_unescaped(line) else {
            continue;
        };
        let v = unescape(v);
        match k {
            "GENERAL.CON-UUID" => d.profile_uuid = v,
            "GENERAL.CONNECTION" => d.connection = v,
            "GENERAL.STATE" => {
                d.state = v
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
            }
            k if k.starts_with("DHCP4.OPTION") || k.starts_with("DHCP6.OPTION") => {
                let Some((name, value)) = v.split_once(" = ") else {
                    continue;
                };
                let value = value.trim().to_string();
                match name.trim() {
                    "dhcp_client_identifier" => d.client_id = Some(value),
                    "dhcp6_client_id" => d.duid = Some(value),
                    "iaid" => d.iaid = Some(format!("0x{}", value.replace(':', ""))),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    d
}

/// The NIC's profile's settings the host port's profile takes over as they are: how it
/// gets its addresses, its static addresses, routes and DNS, and how it treats them.
pub const COPIED: &[&str] = &[
    "ipv4.method",
    "ipv4.addresses",
    "ipv4.gateway",
    "ipv4.routes",
    "ipv4.route-table",
    "ipv4.dns",
    "ipv4.dns-search",
    "ipv4.dns-options",
    "ipv4.dns-priority",
    "ipv4.ignore-auto-routes",
    "ipv4.ignore-auto-dns",
    "ipv4.never-default",
    "ipv4.may-fail",
    "ipv4.dhcp-hostname",
    "ipv4.dhcp-send-hostname",
    "ipv4.dhcp-timeout",
    "ipv6.method",
    "ipv6.addresses",
    "ipv6.gateway",
    "ipv6.routes",
    "ipv6.route-table",
    "ipv6.dns",
    "ipv6.dns-search",
    "ipv6.dns-options",
    "ipv6.dns-priority",
    "ipv6.ignore-auto-routes",
    "ipv6.ignore-auto-dns",
    "ipv6.never-default",
    "ipv6.may-fail",
    "ipv6.addr-gen-mode",
    "ipv6.ip6-privacy",
    "ipv6.token",
    "ipv6.dhcp-hostname",
    "ipv6.dhcp-send-hostname",
];

/// Every profile setting [`add_profile`] reads: [`COPIED`], then the DHCP identity and
/// route metrics it pins.
pub fn profile_fields() -> Vec<&'static str> {
    let mut f = COPIED.to_vec();
    f.extend([
        "ipv4.dhcp-client-id",
        "ipv6.dhcp-duid",
        "ipv6.dhcp-iaid",
        "ipv4.route-metric",
        "ipv6.route-metric",
    ]);
    f
}

/// `nmcli -g <fields> connection show uuid <U>`: one line per field, in order, each value
/// in the form `nmcli connection add` takes back (`\:` and `\\` escaped). None when the
/// lines do not match the fields.
pub fn parse_values(fields: &[&str], text: &str) -> Option<BTreeMap<String, String>> {
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() != fields.len() {
        return None;
    }
    Some(
        fields
            .iter()
            .zip(lines)
            .map(|(f, v)| ((*f).to_string(), unescape(v)))
            .collect(),
    )
}

/// Which device the host port is to NetworkManager.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortKind {
    /// The userspace datapath's internal port: a tap.
    Tap,
    /// The kernel datapath's: an `openvswitch` link, a generic device to NM.
    Generic,
}

/// The `nmcli` arguments that create the host port's in-memory profile: the NIC's profile
/// `profile` (`nmcli -t connection show uuid …`) with its IP settings, the NIC's DHCP
/// identity from `device` pinned, and the NIC's route metric (`metric`: the profile's when
/// set, else the device's effective default) pinned too, since a tap's default metric
/// (450) is not an ethernet's (100) and the restore would leave two default routes.
pub fn add_profile(
    nic: &str,
    kind: PortKind,
    profile: &BTreeMap<String, String>,
    device: &DeviceInfo,
    metric: Option<u32>,
) -> Vec<String> {
    let mut a: Vec<String> = ["connection", "add", "save", "no", "type"]
        .map(String::from)
        .into();
    match kind {
        PortKind::Tap => a.extend(["tun", "tun.mode", "tap"].map(String::from)),
        PortKind::Generic => a.push("generic".into()),
    }
    a.extend([
        "con-name".to_string(),
        profile_name(nic),
        "ifname".into(),
        nic.into(),
        "autoconnect".into(),
        "no".into(),
    ]);
    for key in COPIED {
        if let Some(v) = profile.get(*key).filter(|v| !v.is_empty()) {
            a.push((*key).into());
            a.push(v.clone());
        }
    }
    let pinned = [
        ("ipv4.dhcp-client-id", device.client_id.clone()),
        ("ipv6.dhcp-duid", device.duid.clone()),
        ("ipv6.dhcp-iaid", device.iaid.clone()),
    ];
    for (key, v) in pinned {
        // The lease's own identity first; else whatever the profile sets (it may derive
        // it from the profile: "stable" and such would change with the new profile).
        let v = v.or_else(|| profile.get(key).filter(|v| !v.is_empty()).cloned());
        if let Some(v) = v {
            a.extend([key.to_string(), v]);
        }
    }
    for family in ["ipv4", "ipv6"] {
        let key = format!("{family}.route-metric");
        let own = profile
            .get(&key)
            .and_then(|v| v.parse::<i64>().ok())
            .filter(|m| *m >= 0);
        if let Some(m) = own.or(metric.map(i64::from)) {
            a.extend([key, m.to_string()]);
        }
    }
    a
}

/// NetworkManager's per-device state file (`/run/NetworkManager/devices/<ifindex>`): the
/// route metric it gives the device by default.
pub fn effective_metric(state_file: &str) -> Option<u32> {
    state_file.lines().find_map(|l| {
        l.trim()
            .strip_prefix("route-metric-default-effective=")
            .and_then(|v| v.trim().parse().ok())
    })
}

/// `nmcli device set <dev> managed yes|no`.
pub fn set_managed(dev: &str, on: bool) -> Vec<String> {
    [
        "device",
        "set",
        dev,
        "managed",
        if on { "yes" } else { "no" },
    ]
    .map(String::from)
    .into()
}

/// `nmcli connection up tether-<nic>`.
pub fn up(nic: &str) -> Vec<String> {
    vec!["connection".into(), "up".into(), profile_name(nic)]
}

/// `nmcli connection up uuid <uuid>`: the NIC's own profile, by the UUID it had at the
/// takeover (names need not be unique).
pub fn up_own(uuid: &str) -> Vec<String> {
    ["connection", "up", "uuid", uuid].map(String::from).into()
}

/// The UUID kept in tether's state file for the NIC's own profile (see `nmcli.rs`): one
/// line of hex digits and dashes starting with a digit, or nothing (it goes on nmcli's
/// command line, where it must not read as an option).
pub fn kept_uuid(text: &str) -> Option<String> {
    let uuid = text.trim();
    (uuid.bytes().next().is_some_and(|b| b.is_ascii_hexdigit())
        && uuid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'))
    .then(|| uuid.to_string())
}

/// Whether the NIC, managed again, needs its own profile (`own`, the UUID it had at the
/// takeover) brought up: NM activates it by itself when the NIC's addresses are leases, but
/// on addresses without a lifetime (a static profile) it "assumes" them as an external
/// connection named after the device, which NM then neither owns nor reconfigures. An
/// activation of its own profile already under way is left alone.
pub fn needs_own_profile(own: &str, nic: &DeviceInfo) -> bool {
    !own.is_empty() && nic.profile_uuid != own
}

/// `nmcli connection delete tether-<nic>`.
pub fn delete(nic: &str) -> Vec<String> {
    vec!["connection".into(), "delete".into(), profile_name(nic)]
}

/// NM's device state numbers (`NMDeviceState`).
pub const STATE_UNMANAGED: u32 = 10;
pub const STATE_PREPARE: u32 = 40;
pub const STATE_ACTIVATED: u32 = 100;

/// Whether the host port `nic` needs `nmcli connection up`: not when NM is already on tether's
/// profile there, activated or on its way (prepare … secondaries: after an NM restart it
/// assumes the profile and asks for the lease again, and an `up` then would start over).
pub fn needs_up(nic: &str, host: &DeviceInfo) -> bool {
    host.connection != profile_name(nic) || !(STATE_PREPARE..=STATE_ACTIVATED).contains(&host.state)
}

#[cfg(test)]
mod tests;
