//! The uplink while the datapath holds it: what the kernel must not do with the frames
//! `<nic>~` receives, the per-device sysctls that stop it ([`held_values`],
//! [`plan_held_values`]), and whether they do, from what the kernel shows
//! ([`UplinkFacts`] → [`side_door`]). Pure, but for [`UplinkFacts::read`] (reads through
//! [`Links`]). Does not own applying the values (the takeover's move step, and every sync
//! of an attached NIC: `controller/door.rs`) nor giving the NIC's own values back: the
//! host port carries the NIC's per-device sysctls while it is attached (the takeover copies
//! them to it before anything else), the restore captures them from it into the step
//! record and writes them to the NIC once it has its name back, before its addresses
//! (`plan_sysctls` in the restore's move step), so every key set here must be one of
//! [`DevSysctl::ALL`]. A crash at any step finds them in the step record (a takeover's
//! is the NIC's own values, captured before the rename) or on the host port.
//!
//! Why. On the kernel datapath (`system`) the uplink is a vport: its rx_handler consumes
//! every frame (`netdev_frame_hook`, net/openvswitch/vport-netdev.c), the kernel stack
//! sees none. On the userspace datapath (`netdev`) OVS reads it through an AF_PACKET
//! socket, which taps and does not steal (docs/datapath.md#12-netdev-an-af_packet-socket-and-nothing-is-stolen):
//! the stack receives every frame too, and Linux is a weak host — it answers ARP for the
//! VM's addresses on the uplink and delivers IPv4 and IPv6 addressed to the VM to local
//! sockets, the replies leaving through the host port. That is a door around OVS, and
//! around every NetworkPolicy tether enforces there (measured before this:
//! `tests/externalnode/sidedoor.rs`, ping and TCP to the VM's IPv4 address through an OVS
//! drop; IPv6 was shut already by the third value below). Hence:
//! * `net.ipv4.conf.<uplink>.rp_filter=1` (`netdev` only): the reverse-path check
//!   (`fib_validate_source`, net/ipv4/fib_frontend.c) runs for every packet the uplink
//!   receives for a local or broadcast address, and for every one to forward; the VM's
//!   sources route through the host port, not the uplink: dropped. The check also refuses
//!   the ARP requests there (`arp_process` routes the request with `ip_route_input_noref`
//!   before it answers; read from net/ipv4/arp.c), so proxy ARP and forwarding through
//!   the uplink go with it.
//! * `net.ipv4.conf.<uplink>.arp_ignore=8` (`netdev` only): never answer ARP on the
//!   uplink (its answers would carry the VM's MAC, as the host port's do, but come from
//!   outside OVS).
//! * `net.ipv6.conf.<uplink>.disable_ipv6=1` (both datapaths): IPv6 input on the device
//!   is dropped whole (`ip6_rcv_core`), and its link-local address and routes go; the
//!   uplink would otherwise keep the kernel's link-local address, the host port's (same
//!   MAC), and send from it (docs/datapath.md#12a-both-the-uplink-keeps-an-ipv6-link-local-address-the-host-ports).
//!
//! Looked at and not needed: `arp_filter` (arp_ignore=8 answers nothing at all);
//! `accept_local` (0, its default, drops a packet with one of the VM's own addresses as
//! source; 1 leaves it to the reverse-path check, which drops it too); `forwarding`
//! (forwarded packets pass the same check); the uplink's MAC (another one would make the
//! stack see the VM's frames as `PACKET_OTHERHOST`, but cloud NICs refuse or filter MAC
//! changes, and Antrea does not change it either).
//!
//! What the kernel combines, and the gap it leaves. The effective `rp_filter` and
//! `arp_ignore` are the larger of the device's and `all`'s (`IN_DEV_MAXCONF`); tether sets
//! the device's and never changes `all`. `arp_ignore=8` is the largest value, so it always
//! holds. `rp_filter` is 1 (strict) or 2 (loose, `net.ipv4.conf.all.rp_filter=2`, what
//! systemd's `50-default.conf` sets): loose accepts a packet whose source is reachable
//! through any device — but not on a device without an IPv4 address
//! (`__fib_validate_source`: `no_addr` → `last_resort` → dropped while rp_filter is not 0;
//! measured both ways by `tests/externalnode/sidedoor.rs`). The uplink holds none once its
//! addresses have moved, so loose mode keeps the door shut; it opens when the uplink holds
//! an IPv4 address again (a DHCP client that kept its lease on `<nic>~`), and with strict
//! mode too for the sources the uplink's own routes then cover. [`side_door`] reports
//! those cases, naming the sysctls, and a value someone turned back.
//!
//! What stays: IPv4 from `0.0.0.0` to a broadcast or link-local multicast address is not
//! source-checked at all (`ip_route_input_slow`'s `brd_input`, `ip_mc_validate_source`),
//! so a local UDP socket bound to 0.0.0.0 sees such a packet twice, once past OVS; it can
//! carry no reply (read from net/ipv4/route.c, not measured).

use crate::netlink::{DevSysctl, Link, LinkError, Links, MovePlan, plan_sysctl_values};

/// Whether the datapath only taps the uplink (the kernel stack still receives its frames):
/// the userspace one. The configured type is the bridge's (`tether run` refuses to start
/// on a bridge of another type).
pub fn tapped(datapath_type: &str) -> bool {
    datapath_type == "netdev"
}

/// The uplink's per-device sysctls while the datapath holds it, in the order they are set
/// ([`DevSysctl::ALL`] order); see the module doc for each.
pub fn held_values(datapath_type: &str) -> &'static [(DevSysctl, &'static str)] {
    const BOTH: &[(DevSysctl, &str)] = &[(DevSysctl::Ipv6DisableIpv6, "1")];
    const TAPPED: &[(DevSysctl, &str)] = &[
        (DevSysctl::Ipv6DisableIpv6, "1"),
        (DevSysctl::Ipv4RpFilter, "1"),
        (DevSysctl::Ipv4ArpIgnore, "8"),
    ];
    if tapped(datapath_type) { TAPPED } else { BOTH }
}

/// The steps giving `uplink` (with its `current` sysctls) [`held_values`]: only those that
/// differ, each recording the value it replaces.
pub fn plan_held_values(
    uplink: &Link,
    current: &[(DevSysctl, String)],
    datapath_type: &str,
) -> MovePlan {
    plan_sysctl_values(uplink, held_values(datapath_type), current)
}

/// The NIC's own per-device sysctls, when only the uplink's (`shown`) can be trusted to
/// be read — a step record that does not decode: a key showing the value tether holds it
/// at (either datapath's) takes the value of `own`, a copy of the NIC's (the host port's,
/// or the held configuration's), where that has it.
pub fn own_values(
    shown: &[(DevSysctl, String)],
    own: Option<&[(DevSysctl, String)]>,
) -> Vec<(DevSysctl, String)> {
    // The userspace datapath's list is the other's and more.
    let held = held_values("netdev");
    shown
        .iter()
        .map(|(k, v)| {
            let tethers = held.iter().any(|(hk, hv)| hk == k && hv == v);
            let copy = own
                .filter(|_| tethers)
                .and_then(|o| o.iter().find(|(ok, _)| ok == k));
            (*k, copy.map_or_else(|| v.clone(), |(_, ov)| ov.clone()))
        })
        .collect()
}

/// `net.ipv4.conf.<uplink>.rp_filter=1, …`: the values as a sentence names them.
pub fn describe(uplink: &str, datapath_type: &str) -> String {
    held_values(datapath_type)
        .iter()
        .map(|(k, v)| format!("net.{}.conf.{uplink}.{}={v}", k.family(), k.key()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What the kernel shows of the uplink: what decides whether its stack still takes the
/// VM's traffic.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UplinkFacts {
    /// The uplink's own per-device sysctls (those the kernel has).
    pub sysctls: Vec<(DevSysctl, String)>,
    /// `net.ipv4.conf.all.rp_filter`.
    pub all_rp_filter: Option<String>,
    /// The uplink's IPv4 addresses (`a.b.c.d/len`).
    pub ipv4: Vec<String>,
}

impl UplinkFacts {
    /// Read them for the link called `uplink`.
    pub fn read(links: &dyn Links, uplink: &str) -> Result<UplinkFacts, LinkError> {
        let link = links.link_by_name(uplink)?;
        Ok(UplinkFacts {
            sysctls: crate::netlink::read_sysctls(links, uplink)?,
            all_rp_filter: links.sysctl_all(DevSysctl::Ipv4RpFilter)?,
            ipv4: links
                .addrs(Some(link.index))?
                .iter()
                .filter(|a| !a.is_ipv6())
                .map(ToString::to_string)
                .collect(),
        })
    }

    /// `rp_filter`: the uplink's own and `all`'s (the kernel uses the larger).
    pub fn rp_filter(&self) -> (u8, u8) {
        (
            num(self.get(DevSysctl::Ipv4RpFilter)),
            num(self.all_rp_filter.as_deref()),
        )
    }

    fn get(&self, key: DevSysctl) -> Option<&str> {
        self.sysctls
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }
}

fn num(v: Option<&str>) -> u8 {
    v.and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Why the kernel stack on `uplink` still takes traffic for the VM past the datapath, if
/// it does (each reason naming the sysctls, joined by "; "); None when it does not, and
/// always on a datapath that takes the uplink's frames itself. See the module doc.
pub fn side_door(uplink: &str, datapath_type: &str, f: &UplinkFacts) -> Option<String> {
    if !tapped(datapath_type) {
        return None;
    }
    let mut why = Vec::new();
    let (dev, all) = f.rp_filter();
    let rp = dev.max(all);
    let rp_text =
        format!("net.ipv4.conf.{uplink}.rp_filter={dev} and net.ipv4.conf.all.rp_filter={all}");
    if rp == 0 {
        why.push(format!(
            "{rp_text}: no reverse-path check, the kernel delivers IPv4 that arrives on {uplink} to the VM's sockets past OVS"
        ));
    } else if !f.ipv4.is_empty() {
        let from = if rp == 2 {
            "from any source (loose reverse-path check)"
        } else {
            "from the sources its own routes cover"
        };
        why.push(format!(
            "{uplink} holds IPv4 address {} (a DHCP client that kept its lease on it?) and {rp_text}: the kernel delivers IPv4 that arrives on {uplink} to the VM's sockets past OVS, {from}",
            f.ipv4.join(",")
        ));
    }
    if f.get(DevSysctl::Ipv6DisableIpv6).is_some_and(|v| v != "1") {
        why.push(format!(
            "net.ipv6.conf.{uplink}.disable_ipv6=0: the kernel delivers IPv6 that arrives on {uplink} to the VM's sockets past OVS"
        ));
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// What to do about a [`side_door`], for `tether check` and the log.
pub fn side_door_fix(uplink: &str) -> String {
    format!(
        "remove the IPv4 addresses from {uplink} and stop what adds them (README \"DHCP and network managers\"); \
         tether sets {uplink}'s own values again at every sync but changes no global setting: \
         with an address on {uplink}, net.ipv4.conf.all.rp_filter=2 (loose) lets IPv4 in"
    )
}

#[cfg(test)]
mod tests;
