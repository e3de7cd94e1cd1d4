//! After a takeover: is the host port really the NIC's stand-in? Cloud fabrics drop frames
//! from any source MAC but the NIC's, udev may rewrite a new device's MAC, ovs-vswitchd may
//! not have applied the requested MTU or may have failed to open a netdev, and on the
//! kernel datapath the uplink must be enslaved to `ovs-system` (else OVS does not see its
//! frames). Pure: the facts in, the mismatches out, each naming its field; the controller
//! reads the facts and rolls the takeover back on any mismatch.

use std::fmt;

use crate::mac;
use crate::ovsdb::PortData;

/// What the check reads (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct Facts<'a> {
    pub mac: [u8; 6],
    pub mtu: u32,
    /// The host port's MAC as the kernel has it.
    pub host_kernel_mac: Option<[u8; 6]>,
    /// The host port's and the uplink's Interface rows.
    pub host: Option<&'a PortData>,
    pub uplink: Option<&'a PortData>,
    /// The kernel datapath (`system`): the uplink's master must be `ovs-system`.
    pub kernel_datapath: bool,
    /// The name of the uplink's master link, if it has one.
    pub uplink_master: Option<String>,
}

/// One field that is not what it must be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub field: &'static str,
    pub want: String,
    pub got: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is {} (want {})", self.field, self.got, self.want)
    }
}

/// The datapath a kernel-datapath uplink is enslaved to (`ovs_netdev_link`).
pub const OVS_SYSTEM: &str = "ovs-system";

fn shown(v: Option<String>) -> String {
    v.unwrap_or_else(|| "not reported".into())
}

/// Every mismatch, in a fixed order; empty when the host port is the NIC's stand-in.
pub fn mismatches(f: &Facts) -> Vec<Mismatch> {
    let mac = mac::format(&f.mac);
    let mut out = Vec::new();
    let check =
        |out: &mut Vec<Mismatch>, field: &'static str, want: String, got: Option<String>| {
            if got.as_deref() != Some(want.as_str()) {
                out.push(Mismatch {
                    field,
                    want,
                    got: shown(got),
                });
            }
        };
    check(
        &mut out,
        "host port MAC (kernel)",
        mac.clone(),
        f.host_kernel_mac.as_ref().map(mac::format),
    );
    check(
        &mut out,
        "host port mac_in_use (OVSDB)",
        mac,
        f.host
            .and_then(|p| p.mac_in_use.as_deref())
            .map(str::to_ascii_lowercase),
    );
    check(
        &mut out,
        "host port mtu (OVSDB)",
        f.mtu.to_string(),
        f.host.and_then(|p| p.mtu).map(|m| m.to_string()),
    );
    for (field, row) in [
        ("host port error (OVSDB)", f.host),
        ("uplink error (OVSDB)", f.uplink),
    ] {
        if let Some(e) = row
            .and_then(|p| p.error.as_deref())
            .filter(|e| !e.is_empty())
        {
            out.push(Mismatch {
                field,
                want: "none".into(),
                got: e.to_string(),
            });
        }
    }
    if f.kernel_datapath {
        check(
            &mut out,
            "uplink master",
            OVS_SYSTEM.into(),
            f.uplink_master.clone(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(mac_in_use: Option<&str>, mtu: Option<i64>, error: Option<&str>) -> PortData {
        PortData {
            uuid: crate::ovsdb::Uuid(String::new()),
            name: String::new(),
            external_ids: Default::default(),
            if_uuid: None,
            if_name: String::new(),
            if_type: String::new(),
            ofport: 1,
            error: error.map(str::to_string),
            options: Default::default(),
            mac: None,
            mac_in_use: mac_in_use.map(str::to_string),
            mtu,
            ifindex: None,
        }
    }

    const MAC: [u8; 6] = [2, 0, 0, 0, 1, 0x10];

    #[test]
    fn a_true_stand_in_has_no_mismatch() {
        let host = row(Some("02:00:00:00:01:10"), Some(1450), None);
        let up = row(None, None, Some(""));
        let f = Facts {
            mac: MAC,
            mtu: 1450,
            host_kernel_mac: Some(MAC),
            host: Some(&host),
            uplink: Some(&up),
            kernel_datapath: true,
            uplink_master: Some("ovs-system".into()),
        };
        assert_eq!(mismatches(&f), vec![]);
        // netdev: no master needed.
        let f = Facts {
            kernel_datapath: false,
            uplink_master: None,
            ..f
        };
        assert_eq!(mismatches(&f), vec![]);
    }

    #[test]
    fn every_field_named() {
        let host = row(
            Some("02:00:00:00:00:EE"),
            Some(1500),
            Some("could not open"),
        );
        let up = row(None, None, Some("No such device"));
        let f = Facts {
            mac: MAC,
            mtu: 1450,
            host_kernel_mac: Some([2, 0, 0, 0, 0, 0x99]),
            host: Some(&host),
            uplink: Some(&up),
            kernel_datapath: true,
            uplink_master: None,
        };
        let got: Vec<String> = mismatches(&f).iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            [
                "host port MAC (kernel) is 02:00:00:00:00:99 (want 02:00:00:00:01:10)",
                "host port mac_in_use (OVSDB) is 02:00:00:00:00:ee (want 02:00:00:00:01:10)",
                "host port mtu (OVSDB) is 1500 (want 1450)",
                "host port error (OVSDB) is could not open (want none)",
                "uplink error (OVSDB) is No such device (want none)",
                "uplink master is not reported (want ovs-system)",
            ]
        );
        let none = Facts {
            mac: MAC,
            mtu: 1450,
            ..Facts::default()
        };
        assert_eq!(
            mismatches(&none)
                .iter()
                .map(|m| m.field)
                .collect::<Vec<_>>(),
            [
                "host port MAC (kernel)",
                "host port mac_in_use (OVSDB)",
                "host port mtu (OVSDB)"
            ]
        );
    }
}
