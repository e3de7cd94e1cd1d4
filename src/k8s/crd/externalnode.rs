//! The `ExternalNode` CRD (`crd.antrea.io/v1alpha1`, docs/antrea-compat.md#externalnode):
//! its wire form, its validated form, and which addresses it may name.

use super::*;

/// `ExternalNode` (namespaced). `spec` is `Err` when the object fails validation.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternalNode {
    pub metadata: ObjectMeta,
    pub spec: Result<ExternalNodeSpec, ValidationError>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalNodeSpec {
    /// Exactly one entry (CRD minItems = maxItems = 1).
    pub interfaces: Vec<NetworkInterface>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkInterface {
    /// Only feeds the ExternalEntity name; the NIC is found by IP
    /// (docs/antrea-compat.md#externalnode).
    pub name: String,
    /// At least one; the agent fails without IPs, so we refuse here.
    pub ips: Vec<IpAddr>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct EnSpecWire {
    interfaces: Option<Vec<InterfaceWire>>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct InterfaceWire {
    #[serde(default)]
    name: String,
    #[serde(default)]
    ips: Option<Vec<String>>,
}

impl Resource for ExternalNode {
    const KIND: Kind = Kind::ExternalNode;
    type Wire = CrdWire;

    fn from_wire(w: CrdWire) -> ExternalNode {
        let spec = spec_wire::<EnSpecWire>(w.spec).and_then(|s| validate_en_spec(&s));
        ExternalNode {
            metadata: w.metadata,
            spec,
        }
    }
    metadata_field!();
}

/// Why `ip` cannot be an ExternalNode's address, if it cannot: the link holding it would
/// be loopback (`127.0.0.1` made tether take `lo` down), nobody's (unspecified,
/// multicast, broadcast) or one that every link makes for itself (link-local).
pub fn unusable_ip(ip: IpAddr) -> Option<&'static str> {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_unspecified() {
        Some("the unspecified address")
    } else if ip.is_multicast() {
        Some("a multicast address")
    } else if matches!(ip, IpAddr::V4(v4) if v4.is_broadcast()) {
        Some("the broadcast address")
    } else if crate::netlink::is_link_local(ip) {
        Some("a link-local address")
    } else {
        None
    }
}

pub(super) fn validate_en_spec(w: &EnSpecWire) -> Result<ExternalNodeSpec, ValidationError> {
    let mut e = Errors::default();
    let mut interfaces = Vec::new();
    match e.required("spec.interfaces", &w.interfaces) {
        Some(list) if list.len() != 1 => e.add(
            "spec.interfaces",
            format!("must have exactly 1 item, has {}", list.len()),
        ),
        Some(list) => {
            for (i, itf) in list.iter().enumerate() {
                let p = format!("spec.interfaces[{i}].ips");
                let mut ips = Vec::new();
                match itf.ips.as_deref() {
                    None | Some([]) => e.add(&p, "must have at least 1 item"),
                    Some(raw) => {
                        for (j, s) in raw.iter().enumerate() {
                            let at = format!("{p}[{j}]");
                            if let Some(ip) = e.ip(&at, s) {
                                match unusable_ip(ip) {
                                    Some(why) => e.add(&at, format!(
                                        "{ip} is {why}: an ExternalNode names the VM's own unicast addresses"
                                    )),
                                    None => ips.push(ip),
                                }
                            }
                        }
                    }
                }
                interfaces.push(NetworkInterface {
                    name: itf.name.clone(),
                    ips,
                });
            }
        }
        None => {}
    }
    e.into_result(ExternalNodeSpec { interfaces })
}
