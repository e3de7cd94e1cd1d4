//! A DHCP-managed NIC (the common cloud VM): the NIC gets 192.0.2.10 from dnsmasq on the
//! gateway (2-minute leases), and systemd-networkd manages it through a `.network` file
//! matching it by name, by MAC, or by driver and MAC (Azure's netplan), or ifupdown's
//! dhclient does. tether takes it
//! over; past the lease's expiry the address must still be on the host port, renewed, the
//! uplink `eth1~` must carry none, a restart of networkd must change nothing, and the VM
//! must stay reachable. Deleting the
//! ExternalNode gives the NIC back, and networkd gets it its lease on its own name.

use std::time::{Duration, Instant};

use super::*;
use common::vm::Dnsmasq;

/// The IPv4 addresses on `dev` with their valid lifetime (`None`: forever).
pub(super) fn v4(vm: &Vm, dev: &str) -> Vec<(String, Option<u64>)> {
    addresses(vm, &format!("-4 addr show dev '{dev}'"))
}

/// The global IPv6 addresses on `dev` with their valid lifetime (`None`: forever).
pub(super) fn v6(vm: &Vm, dev: &str) -> Vec<(String, Option<u64>)> {
    addresses(vm, &format!("-6 addr show dev '{dev}' scope global"))
}

/// What `ip -j <args>` lists: each address with its valid lifetime.
fn addresses(vm: &Vm, args: &str) -> Vec<(String, Option<u64>)> {
    let out = vm.try_sh(&format!("ip -j {args}")).unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    v.as_array()
        .into_iter()
        .flatten()
        .flat_map(|l| l["addr_info"].as_array().cloned().unwrap_or_default())
        .filter(|a| a["local"].is_string())
        .map(|a| {
            (
                format!("{}/{}", a["local"].as_str().unwrap_or(""), a["prefixlen"]),
                a["valid_life_time"]
                    .as_u64()
                    .filter(|&t| t != u32::MAX as u64),
            )
        })
        .collect()
}

fn network_file(vm: &Vm, dev: &str) -> String {
    vm.try_sh(&format!("networkctl status '{dev}' --no-pager"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Network File:")
                .map(|f| f.trim().to_string())
        })
        .unwrap_or_default()
}

pub(super) fn ifindex(vm: &Vm, dev: &str) -> Option<u32> {
    // (Not /sys/class/net: the container's sysfs shows the host's links.)
    let out = vm.try_sh(&format!("ip -j link show dev '{dev}'")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&out).ok()?;
    v[0]["ifindex"].as_u64().and_then(|i| u32::try_from(i).ok())
}

/// What runs DHCP on the NIC in the VM.
#[derive(Clone, Copy)]
enum Client {
    /// systemd-networkd with `10-nic.network` whose `[Match]` is these lines.
    Networkd { matching: &'static str },
    /// ifupdown: `iface eth1 inet dhcp` (dhclient).
    Ifupdown,
}

const NIC_FILE: &str = "/etc/systemd/network/10-nic.network";
const HOST_FILE: &str = "/run/systemd/network/00-tether-eth1.network";

/// One run: boot with `client` configuring the NIC by DHCP, take over, wait out the lease,
/// give the NIC back.
fn dhcp_under(test: &'static str, tag: &str, client: Client) {
    if !common::privileged(test) {
        return;
    }
    let mut c = Checks::new(test);
    let mut vm = Vm::new(tag, Addressing::None);
    let dhcp = Dnsmasq::start(&vm.gw, vm.dir());
    let networkd = matches!(client, Client::Networkd { .. });
    match client {
        Client::Networkd { matching } => {
            vm.write(
                NIC_FILE,
                &format!("[Match]\n{matching}\n\n[Network]\nDHCP=ipv4\n"),
            );
            std::os::unix::fs::symlink(
                "/lib/systemd/system/systemd-networkd.service",
                vm.root()
                    .join("etc/systemd/system/multi-user.target.wants/systemd-networkd.service"),
            )
            .expect("enable systemd-networkd");
        }
        // networking.service (enabled in the tree) runs ifup -a at boot.
        Client::Ifupdown => vm.write(
            "/etc/network/interfaces",
            "auto lo\niface lo inet loopback\n\nauto eth1\niface eth1 inet dhcp\n",
        ),
    }
    vm.start();
    let nic_index = ifindex(&vm, NIC).expect("eth1 in the vm");
    let leased = poll(Duration::from_secs(60), || {
        let a = v4(&vm, NIC);
        a.iter()
            .any(|(ip, t)| ip == &format!("{VM_IP}/24") && t.is_some())
            .then_some(a)
    });
    assert!(
        leased.is_some(),
        "networkd never got eth1 its lease: {:?}; dnsmasq: {:?}",
        v4(&vm, NIC),
        dhcp.acks()
    );

    let check = install_by_readme(&vm, &mut c, "");
    let line = check
        .lines()
        .find(|l| l.contains("network") && l.contains("configured by"))
        .unwrap_or("")
        .trim()
        .to_string();
    if networkd {
        c.check(
            "tether check names the network manager and what tether will do",
            "\"… eth1 is configured by systemd-networkd (/etc/systemd/network/10-nic.network); before the takeover tether writes …\"",
            line.clone(),
            line.contains("systemd-networkd (/etc/systemd/network/10-nic.network)")
                && line.contains("00-tether-eth1-uplink.network"),
        );
    } else {
        c.check(
            "tether check names the network manager and what tether will do",
            "\"… eth1 is configured by ifupdown (/etc/network/interfaces); tether changes nothing …\"",
            line.clone(),
            line.contains("configured by ifupdown") && line.contains("tether changes nothing"),
        );
    }
    let (ok, seen) = poll(Duration::from_secs(30), || {
        let t = taken_over(&vm);
        t.0.then_some(t)
    })
    .unwrap_or_else(|| taken_over(&vm));
    c.check(
        "NIC taken over",
        "eth1~ and eth1 on br-int, 192.0.2.10 on eth1",
        seen,
        ok,
    );
    let acks_at_takeover = dhcp.acks().len();
    let taken = Instant::now();

    // Past the lease's expiry (2 min): renewed on the host port, none on the uplink.
    let mut worst_uplink = Vec::new();
    while taken.elapsed() < Duration::from_secs(150) {
        let up = v4(&vm, &format!("{NIC}~"));
        if !up.is_empty() && worst_uplink.is_empty() {
            worst_uplink = up;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    let host = v4(&vm, NIC);
    c.check(
        "150 s after the takeover (lease 120 s): address on the host port, renewed",
        "192.0.2.10/24 on eth1 with a finite lifetime",
        format!("{host:?}"),
        host.iter()
            .any(|(ip, t)| ip == &format!("{VM_IP}/24") && t.is_some_and(|t| t > 0)),
    );
    let acks = dhcp.acks();
    c.check(
        "the lease was renewed after the takeover",
        "≥ 1 DHCPACK after the takeover",
        format!(
            "{} DHCPACKs after the takeover (last: {})",
            acks.len() - acks_at_takeover,
            acks.last().map(String::as_str).unwrap_or("none")
        ),
        acks.len() > acks_at_takeover,
    );
    c.check(
        "the uplink eth1~ never carries an IPv4 address",
        "none, throughout",
        format!(
            "first seen: {worst_uplink:?}; now: {:?}",
            v4(&vm, &format!("{NIC}~"))
        ),
        worst_uplink.is_empty() && v4(&vm, &format!("{NIC}~")).is_empty(),
    );
    let routes = vm.sh("ip -4 route show default");
    c.check(
        "one default route, via the host port",
        "default via 192.0.2.1 dev eth1 …",
        routes.clone(),
        routes.lines().count() == 1 && routes.contains("dev eth1 "),
    );
    if networkd {
        let file = network_file(&vm, NIC);
        c.check(
            "networkd configures the host port",
            HOST_FILE,
            file.clone(),
            file == HOST_FILE,
        );
        // A restart of networkd while attached changes nothing.
        vm.sh("systemctl restart systemd-networkd");
        std::thread::sleep(Duration::from_secs(10));
        let host = v4(&vm, NIC);
        let up = v4(&vm, &format!("{NIC}~"));
        let routes = vm.sh("ip -4 route show default");
        c.check(
            "10 s after systemctl restart systemd-networkd: as before",
            "192.0.2.10/24 on eth1, none on eth1~, one default route via eth1, tether's file",
            format!(
                "{host:?}; eth1~ {up:?}; {}; {}",
                routes.trim(),
                network_file(&vm, NIC)
            ),
            host.iter().any(|(ip, _)| ip == &format!("{VM_IP}/24"))
                && up.is_empty()
                && routes.lines().count() == 1
                && routes.contains("dev eth1 ")
                && network_file(&vm, NIC) == HOST_FILE,
        );
    }
    let reach = ping_gw(&vm)
        && vm
            .gw
            .try_exec(&["ping", "-c", "3", "-i", "0.2", "-W", "1", VM_IP])
            .is_ok();
    c.check(
        "VM reachable both ways",
        "ping ok",
        format!("{reach}"),
        reach,
    );

    // Give it back: the NIC under its own name, its lease from networkd again.
    let acks_before = dhcp.acks().len();
    vm.sh(&format!("rm {MANIFESTS}/externalnode.yaml"));
    let back = poll(Duration::from_secs(60), || {
        (ifindex(&vm, NIC) == Some(nic_index)
            && ifindex(&vm, &format!("{NIC}~")).is_none()
            && dhcp.acks().len() > acks_before)
            .then_some(())
    });
    let files = vm
        .sh("ls /run/systemd/network/ 2>/dev/null || true")
        .trim()
        .to_string();
    let nic_file = network_file(&vm, NIC);
    let addr = v4(&vm, NIC);
    c.check(
        "ExternalNode deleted: the NIC gets its lease back on its own name",
        if networkd {
            "eth1 is the NIC again (same ifindex), a DHCPACK, 192.0.2.10 on it, networkd's own file, tether's files gone"
        } else {
            "eth1 is the NIC again (same ifindex), a DHCPACK, 192.0.2.10 on it"
        },
        format!(
            "back: {}; ifindex {:?} (was {nic_index}); {addr:?}; {nic_file}; /run/systemd/network: [{files}]",
            back.is_some(),
            ifindex(&vm, NIC)
        ),
        back.is_some()
            && addr.iter().any(|(ip, _)| ip == &format!("{VM_IP}/24"))
            && (!networkd || nic_file == NIC_FILE)
            && !files.contains("tether"),
    );
    let reach = poll(Duration::from_secs(20), || ping_gw(&vm).then_some(())).is_some();
    c.check(
        "VM reachable after the restore",
        "ping ok",
        format!("{reach}"),
        reach,
    );
    drop(dhcp);
    drop(vm);
    c.finish();
}

#[test]
fn dhcp_under_networkd_matching_by_name() {
    dhcp_under(
        "dhcp_under_networkd_matching_by_name",
        "ndname",
        Client::Networkd {
            matching: "Name=eth1",
        },
    );
}

#[test]
fn dhcp_under_networkd_matching_by_mac() {
    dhcp_under(
        "dhcp_under_networkd_matching_by_mac",
        "ndmac",
        Client::Networkd {
            matching: "MACAddress=02:00:00:00:01:10",
        },
    );
}

/// Azure's netplan matches by driver and MAC (`hv_netvsc` there; `veth` here).
#[test]
fn dhcp_under_networkd_matching_by_driver_and_mac() {
    dhcp_under(
        "dhcp_under_networkd_matching_by_driver_and_mac",
        "nddrv",
        Client::Networkd {
            matching: "MACAddress=02:00:00:00:01:10\nDriver=veth",
        },
    );
}

/// ifupdown's dhclient: nothing for tether to do, and nothing goes wrong.
#[test]
fn dhcp_under_ifupdown() {
    dhcp_under("dhcp_under_ifupdown", "ifupd", Client::Ifupdown);
}
