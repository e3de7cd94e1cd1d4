//! systemd-networkd, as tether meets it at a takeover: pure parsing and rendering, no I/O.
//!
//! Why anything is needed (checked in the systemd tier, `tests/systemd_networkd.rs`): after
//! the takeover the NIC is `<nic>~` and an OVS internal port has its old name and MAC.
//! networkd follows renames and matches `.network` files again, so
//! * a file matching by `Name=` moves to the host port by itself (the right outcome);
//! * a file matching by `MACAddress=` now matches both: networkd runs DHCP on the uplink
//!   too, and the VM's address and default route appear twice, once on an OVS port;
//! * a file matching by `Driver=` (Azure's netplan: driver and MAC) matches only the
//!   uplink: the lease is renewed there and the host port's copy of the address expires.
//!
//! So before the rename tether writes two runtime `.network` files that sort before any
//! other (`00-tether-…`; networkd takes the first file that matches, in file name order
//! across /etc, /run and /usr/lib): `<nic>~` unmanaged, and the host port (matched by name
//! *and* by device kind, so the reload before the rename leaves the NIC alone) configured
//! as networkd configured the NIC: the same file's sections and drop-ins, less `[Match]`.

use std::path::{Path, PathBuf};

/// Where runtime `.network` files go (systemd.network(5)).
pub const CONFIG_DIR: &str = "/run/systemd/network";
/// networkd's per-link state files, named by ifindex. They say "private data"; they are
/// what libsystemd's `sd_network_link_get_network_file()` and `networkctl` read, and
/// their `KEY=value` lines have been stable since networkd's first releases.
pub const STATE_DIR: &str = "/run/systemd/netif/links";

/// The device kinds of an OVS internal port: `openvswitch` (the kernel datapath), `tun`
/// (a tap: the userspace datapath). A NIC is neither.
pub const HOST_PORT_KINDS: &str = "openvswitch tun";

/// What networkd's state file says about one link.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkState {
    /// `ADMIN_STATE`: pending, initialized, configuring, configured, unmanaged, failed,
    /// linger.
    pub admin_state: String,
    /// `NETWORK_FILE`: the `.network` file applied (absent when unmanaged).
    pub network_file: Option<PathBuf>,
    /// `NETWORK_FILE_DROP_INS`: its drop-ins, in the order applied.
    pub drop_ins: Vec<PathBuf>,
    /// `DHCP_LEASE`: the link's DHCPv4 lease file, when it has one.
    pub dhcp_lease: Option<PathBuf>,
}

impl LinkState {
    /// networkd configures this link (or is about to).
    pub fn managed(&self) -> bool {
        self.network_file.is_some() && !matches!(self.admin_state.as_str(), "unmanaged" | "")
    }
}

/// Parse a state file (`KEY=value` lines, `#` comments; a value may be double-quoted).
pub fn parse_link_state(text: &str) -> LinkState {
    let mut st = LinkState::default();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let v = v.trim();
        let v = v
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(v);
        match k.trim() {
            "ADMIN_STATE" => st.admin_state = v.to_string(),
            "NETWORK_FILE" if !v.is_empty() => st.network_file = Some(PathBuf::from(v)),
            "DHCP_LEASE" if !v.is_empty() => st.dhcp_lease = Some(PathBuf::from(v)),
            // Space-separated (colon-separated in some releases); paths have neither.
            "NETWORK_FILE_DROP_INS" => {
                st.drop_ins = v
                    .split([' ', ':'])
                    .filter(|p| !p.is_empty())
                    .map(PathBuf::from)
                    .collect()
            }
            _ => {}
        }
    }
    st
}

/// The IAID in a DHCPv4 lease file's `CLIENTID=` (hex): networkd's default client-id is
/// RFC 4361's, type 255, then the IAID (4 bytes), then the DUID. None for another type
/// (`ClientIdentifier=mac`: type 1 and the MAC, which the host port has too).
pub fn lease_iaid(lease: &str) -> Option<u32> {
    let hex = lease
        .lines()
        .find_map(|l| l.trim().strip_prefix("CLIENTID="))?;
    let hex = hex.trim();
    if hex.len() < 10 || !hex.starts_with("ff") {
        return None;
    }
    u32::from_str_radix(hex.get(2..10)?, 16).ok()
}

/// File names of the two runtime files for `nic`.
pub fn host_file_name(nic: &str) -> String {
    format!("00-tether-{nic}.network")
}

pub fn uplink_file_name(nic: &str) -> String {
    format!("00-tether-{nic}-uplink.network")
}

/// The first line of every file tether writes, so that it knows its own files.
pub const HEADER: &str =
    "# Written by tether (ExternalNode takeover); removed when the NIC is given back.";

/// `<uplink>`: networkd leaves it alone (its addresses live on the host port).
pub fn render_uplink(nic: &str, uplink: &str) -> String {
    format!(
        "{HEADER}\n# {uplink} is the NIC {nic}, attached to the OVS bridge as its uplink.\n\
         [Match]\nName={uplink}\n\n[Link]\nUnmanaged=yes\n"
    )
}

/// The host port `nic` gets what networkd gave the NIC: every section of `source` and of
/// its drop-ins (in order) except `[Match]`, under a `[Match]` for the host port only; and,
/// when the NIC's lease names its IAID (`iaid`), that IAID for DHCPv4 and DHCPv6. networkd
/// derives a link's IAID from its udev persistent name (`ID_NET_NAME_PATH`, …), else from
/// its MAC; the host port has no persistent name, so on a VM whose NIC has one it would
/// send another client-id and DHCPv6 IAID, and a server keying its leases by them would
/// hand out other addresses. Set last, so it is the value networkd keeps.
pub fn render_host(
    nic: &str,
    source: &Path,
    text: &str,
    drop_ins: &[(PathBuf, String)],
    iaid: Option<u32>,
) -> String {
    let mut out = format!(
        "{HEADER}\n# The host port {nic} (an OVS internal port with the NIC's name and MAC) gets\n\
         # the configuration networkd gave the NIC, from {}{}.\n\
         [Match]\nName={nic}\nKind={HOST_PORT_KINDS}\n",
        source.display(),
        if drop_ins.is_empty() {
            String::new()
        } else {
            format!(
                " and {}",
                drop_ins
                    .iter()
                    .map(|(p, _)| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    for t in std::iter::once(text).chain(drop_ins.iter().map(|(_, t)| t.as_str())) {
        let rest = without_match(t);
        if !rest.trim().is_empty() {
            out.push('\n');
            out.push_str(rest.trim_end());
            out.push('\n');
        }
    }
    if let Some(iaid) = iaid {
        out.push_str(&format!(
            "\n# The NIC's own DHCP identity (its IAID, from its lease).\n\
             [DHCPv4]\nIAID=0x{iaid:08x}\n\n[DHCPv6]\nIAID=0x{iaid:08x}\n"
        ));
    }
    out
}

/// `text` less its `[Match]` sections (section names are case-sensitive in systemd).
fn without_match(text: &str) -> String {
    let mut out = String::new();
    let mut skipping = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') && t.ends_with(']') {
            skipping = t == "[Match]";
        }
        if !skipping {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATE: &str = "# This is private data. Do not parse.\nADMIN_STATE=configured\n\
        OPER_STATE=routable\nNETWORK_FILE=/etc/systemd/network/10-nic.network\n\
        NETWORK_FILE_DROP_INS=\"/etc/systemd/network/10-nic.network.d/mtu.conf /run/systemd/network/10-nic.network.d/x.conf\"\n\
        DHCP_LEASE=/run/systemd/netif/leases/2\n";

    #[test]
    fn state_file_names_the_network_file_and_drop_ins() {
        let st = parse_link_state(STATE);
        assert_eq!(
            st,
            LinkState {
                admin_state: "configured".into(),
                network_file: Some("/etc/systemd/network/10-nic.network".into()),
                drop_ins: vec![
                    "/etc/systemd/network/10-nic.network.d/mtu.conf".into(),
                    "/run/systemd/network/10-nic.network.d/x.conf".into()
                ],
                dhcp_lease: Some("/run/systemd/netif/leases/2".into()),
            }
        );
        assert!(st.managed());
    }

    #[test]
    fn unmanaged_links_and_garbage_are_not_managed() {
        let st = parse_link_state("ADMIN_STATE=unmanaged\nOPER_STATE=carrier\n");
        assert!(!st.managed());
        assert_eq!(st.network_file, None);
        let st = parse_link_state("\u{0}\u{1}garbage\n=\nNETWORK_FILE=\n");
        assert!(!st.managed());
        assert_eq!(parse_link_state(""), LinkState::default());
    }

    #[test]
    fn uplink_file_is_exact() {
        assert_eq!(
            render_uplink("eth1", "eth1~"),
            format!(
                "{HEADER}\n# eth1~ is the NIC eth1, attached to the OVS bridge as its uplink.\n\
                 [Match]\nName=eth1~\n\n[Link]\nUnmanaged=yes\n"
            )
        );
        assert_eq!(uplink_file_name("eth1"), "00-tether-eth1-uplink.network");
        assert_eq!(host_file_name("eth1"), "00-tether-eth1.network");
    }

    #[test]
    fn host_file_keeps_everything_but_match() {
        let src = "# cloud image\n[Match]\nMACAddress=02:00:00:00:01:10\nDriver=hv_netvsc\n\n\
                   [Network]\nDHCP=ipv4\n\n[DHCPv4]\nUseDomains=true\n";
        let dropin = "[Match]\nName=eth1\n[Link]\nMTUBytes=1400\n";
        let got = render_host(
            "eth1",
            Path::new("/etc/systemd/network/10-netplan-eth0.network"),
            src,
            &[("/etc/x.d/mtu.conf".into(), dropin.into())],
            None,
        );
        let want = format!(
            "{HEADER}\n# The host port eth1 (an OVS internal port with the NIC's name and MAC) gets\n\
             # the configuration networkd gave the NIC, from /etc/systemd/network/10-netplan-eth0.network and /etc/x.d/mtu.conf.\n\
             [Match]\nName=eth1\nKind=openvswitch tun\n\
             \n# cloud image\n\
             [Network]\nDHCP=ipv4\n\n[DHCPv4]\nUseDomains=true\n\
             \n[Link]\nMTUBytes=1400\n"
        );
        assert_eq!(got, want);
        // With the NIC's IAID: pinned for both families, after everything copied.
        let pinned = render_host(
            "eth1",
            Path::new("/etc/systemd/network/10-netplan-eth0.network"),
            src,
            &[("/etc/x.d/mtu.conf".into(), dropin.into())],
            Some(0x97b9_64e0),
        );
        assert_eq!(
            pinned,
            format!(
                "{want}\n# The NIC's own DHCP identity (its IAID, from its lease).\n\
                 [DHCPv4]\nIAID=0x97b964e0\n\n[DHCPv6]\nIAID=0x97b964e0\n"
            )
        );
    }

    #[test]
    fn the_iaid_from_a_lease_files_client_id() {
        // networkd 252 in the systemd tier's container (IAID from the MAC: 0x174d0b40).
        let lease = "# This is private data. Do not parse.\nADDRESS=192.0.2.10\n\
                     CLIENTID=ff174d0b4000020000ab11345ae2da698c0221\nLIFETIME=120\n";
        assert_eq!(lease_iaid(lease), Some(0x174d_0b40));
        // ClientIdentifier=mac: type 1 and the MAC, nothing to pin.
        assert_eq!(lease_iaid("CLIENTID=01020000000110\n"), None);
        assert_eq!(lease_iaid("ADDRESS=192.0.2.10\n"), None);
        assert_eq!(lease_iaid("CLIENTID=ff17\n"), None);
        assert_eq!(lease_iaid("CLIENTID=ffzz4d0b40aa\n"), None);
    }
}
