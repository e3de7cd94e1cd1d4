//! Antrea's CRDs as tether uses them: `TrafficControl` (`crd.antrea.io/v1alpha2`, full spec
//! of docs/antrea-compat.md#trafficcontrol) and `ExternalNode` (`crd.antrea.io/v1alpha1`,
//! docs/antrea-compat.md#externalnode).
//!
//! Each kind has a serde wire form mirroring the Go types (unknown fields ignored) and a
//! validated form with real types (`IpAddr`, `u16` ports, `u32` GRE key, compiled
//! selectors). Validation runs once, at decode time, and applies the CRD schema's rules
//! (there is no webhook for TrafficControl, so the schema is the only validation). An
//! invalid spec does not drop the object: `spec` holds `Err(ValidationError)` with the field
//! path in every message, so the controller can report it for that object and remove what
//! an earlier valid version installed.

mod externalnode;

pub use externalnode::{ExternalNode, ExternalNodeSpec, NetworkInterface, unusable_ip};

use std::net::IpAddr;

use serde::Deserialize;

use super::selector::{LabelSelector, LabelSelectorWire, Labels};
use super::types::{Kind, ObjectMeta, Resource, metadata_field};
use super::validate::{Errors, ValidationError};

/// Wire envelope shared by both CRDs: the spec is kept as a JSON value so that a type
/// error inside it becomes a validation error of this object, not a failed decode.
#[derive(Debug, Deserialize)]
pub struct CrdWire {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Option<serde_json::Value>,
}

/// Decode `spec` into its wire struct, turning a serde type error into a field error that
/// names the field (`spec.targetPort.vxlan.vni: invalid type: string "5000", expected u32`).
fn spec_wire<T: serde::de::DeserializeOwned>(
    spec: Option<serde_json::Value>,
) -> Result<T, ValidationError> {
    let v = spec.ok_or_else(|| ValidationError::one("spec", "required"))?;
    match serde_json::from_value(v.clone()) {
        Ok(t) => Ok(t),
        Err(e) => {
            // serde_json reports positions only when parsing text: print the value one
            // field per line, remember each line's path, and parse it again to find where.
            let (text, paths) = located_text(&v, "spec");
            let path = match serde_json::from_str::<T>(&text) {
                Err(e2) if e2.line() > 0 => paths.get(e2.line() - 1).cloned(),
                _ => None,
            };
            let msg = e.to_string();
            Err(ValidationError::one(
                path.as_deref().unwrap_or("spec"),
                msg.split(" at line ").next().unwrap_or(&msg),
            ))
        }
    }
}

/// `v` as JSON text with every field on its own line, and the JSON path of each line.
fn located_text(v: &serde_json::Value, base: &str) -> (String, Vec<String>) {
    fn emit(
        v: &serde_json::Value,
        path: &str,
        prefix: &str,
        out: &mut String,
        paths: &mut Vec<String>,
    ) {
        use serde_json::Value;
        match v {
            Value::Object(m) => {
                out.push_str(prefix);
                out.push_str("{\n");
                paths.push(path.to_string());
                let n = m.len();
                for (i, (k, child)) in m.iter().enumerate() {
                    let key = serde_json::to_string(k).unwrap_or_default();
                    emit(
                        child,
                        &format!("{path}.{k}"),
                        &format!("{key}: "),
                        out,
                        paths,
                    );
                    if i + 1 < n {
                        out.push(',');
                    }
                    out.push('\n');
                    paths.push(format!("{path}.{k}"));
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push_str(prefix);
                out.push_str("[\n");
                paths.push(path.to_string());
                let n = a.len();
                for (i, child) in a.iter().enumerate() {
                    emit(child, &format!("{path}[{i}]"), "", out, paths);
                    if i + 1 < n {
                        out.push(',');
                    }
                    out.push('\n');
                    paths.push(format!("{path}[{i}]"));
                }
                out.push(']');
            }
            scalar => {
                out.push_str(prefix);
                out.push_str(&scalar.to_string());
            }
        }
    }
    let mut out = String::new();
    let mut paths = Vec::new();
    emit(v, base, "", &mut out, &mut paths);
    out.push('\n');
    paths.push(base.to_string());
    (out, paths)
}

// ---------------------------------------------------------------------------------------
// TrafficControl

/// `TrafficControl` (cluster-scoped). `spec` is `Err` when the object fails validation.
#[derive(Debug, Clone, PartialEq)]
pub struct TrafficControl {
    pub metadata: ObjectMeta,
    pub spec: Result<TrafficControlSpec, ValidationError>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TrafficControlSpec {
    pub applied_to: AppliedTo,
    pub direction: TcDirection,
    pub action: TcAction,
    pub target_port: TcPort,
    pub return_port: Option<TcPort>,
}

/// `spec.appliedTo`: `None` is a nil selector, `Some(empty)` matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppliedTo {
    pub pod_selector: Option<LabelSelector>,
    pub namespace_selector: Option<LabelSelector>,
}

impl AppliedTo {
    /// Antrea's TrafficControl rule (docs/traffic-control.md): both nil → nothing; only a
    /// namespace selector → every Pod of the matching Namespaces; only a Pod selector → the
    /// matching Pods of every Namespace; both → the intersection. hostNetwork Pods are the
    /// controller's business.
    pub fn selects(&self, pod_labels: &Labels, namespace_labels: &Labels) -> bool {
        match (&self.pod_selector, &self.namespace_selector) {
            (None, None) => false,
            (Some(p), None) => p.matches(pod_labels),
            (None, Some(n)) => n.matches(namespace_labels),
            (Some(p), Some(n)) => p.matches(pod_labels) && n.matches(namespace_labels),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcDirection {
    Ingress,
    Egress,
    Both,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcAction {
    Mirror,
    Redirect,
}

/// `TrafficControlPort`: exactly one variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TcPort {
    OvsInternal { name: String },
    Device { name: String },
    Geneve(UdpTunnel),
    Vxlan(UdpTunnel),
    Gre(GreTunnel),
    Erspan(ErspanTunnel),
}

/// GENEVE/VXLAN; `None` means the default (VNI unset, port 6081/4789 applied by the caller).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpTunnel {
    pub remote_ip: IpAddr,
    pub vni: Option<u32>,
    pub destination_port: Option<u16>,
}

/// GRE; the key is u32 as the CRD allows (Antrea's Go type is int32,
/// docs/design.md#gre-key-and-ipv6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GreTunnel {
    pub remote_ip: IpAddr,
    pub key: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErspanVersion {
    V1,
    V2,
}

/// ERSPAN; `index` is used by version 1, `dir` and `hardware_id` by version 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErspanTunnel {
    pub remote_ip: IpAddr,
    pub session_id: Option<u16>,
    pub version: ErspanVersion,
    pub index: Option<i32>,
    pub dir: Option<u8>,
    pub hardware_id: Option<i32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TcSpecWire {
    applied_to: Option<AppliedToWire>,
    direction: Option<String>,
    action: Option<String>,
    target_port: Option<TcPortWire>,
    return_port: Option<TcPortWire>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AppliedToWire {
    pod_selector: Option<LabelSelectorWire>,
    namespace_selector: Option<LabelSelectorWire>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TcPortWire {
    ovs_internal: Option<NameWire>,
    device: Option<NameWire>,
    geneve: Option<UdpTunnelWire>,
    vxlan: Option<UdpTunnelWire>,
    gre: Option<GreWire>,
    erspan: Option<ErspanWire>,
}

#[derive(Debug, Default, Deserialize)]
struct NameWire {
    name: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct UdpTunnelWire {
    #[serde(rename = "remoteIP")]
    remote_ip: Option<String>,
    vni: Option<i64>,
    destination_port: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
struct GreWire {
    #[serde(rename = "remoteIP")]
    remote_ip: Option<String>,
    key: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ErspanWire {
    #[serde(rename = "remoteIP")]
    remote_ip: Option<String>,
    #[serde(rename = "sessionID")]
    session_id: Option<i64>,
    version: Option<i64>,
    index: Option<i64>,
    dir: Option<i64>,
    #[serde(rename = "hardwareID")]
    hardware_id: Option<i64>,
}

impl Resource for TrafficControl {
    const KIND: Kind = Kind::TrafficControl;
    type Wire = CrdWire;

    fn from_wire(w: CrdWire) -> TrafficControl {
        let spec = spec_wire::<TcSpecWire>(w.spec).and_then(|s| validate_tc_spec(&s));
        TrafficControl {
            metadata: w.metadata,
            spec,
        }
    }
    metadata_field!();
}

fn validate_tc_spec(w: &TcSpecWire) -> Result<TrafficControlSpec, ValidationError> {
    let mut e = Errors::default();
    let applied_to = e
        .required("spec.appliedTo", &w.applied_to)
        .map(|a| validate_applied_to(a, &mut e));
    let direction = e.required("spec.direction", &w.direction).and_then(|d| {
        e.one_of(
            "spec.direction",
            d,
            &[
                ("Ingress", TcDirection::Ingress),
                ("Egress", TcDirection::Egress),
                ("Both", TcDirection::Both),
            ],
        )
    });
    let action = e.required("spec.action", &w.action).and_then(|a| {
        e.one_of(
            "spec.action",
            a,
            &[
                ("Mirror", TcAction::Mirror),
                ("Redirect", TcAction::Redirect),
            ],
        )
    });
    let target_port = e
        .required("spec.targetPort", &w.target_port)
        .and_then(|p| validate_port(p, "spec.targetPort", true, &mut e));
    let return_port = w
        .return_port
        .as_ref()
        .and_then(|p| validate_port(p, "spec.returnPort", false, &mut e));
    let errs = std::mem::take(&mut e.0);
    match (applied_to, direction, action, target_port) {
        (Some(applied_to), Some(direction), Some(action), Some(target_port)) if errs.is_empty() => {
            Ok(TrafficControlSpec {
                applied_to,
                direction,
                action,
                target_port,
                return_port,
            })
        }
        _ => Err(ValidationError { errors: errs }),
    }
}

fn validate_applied_to(w: &AppliedToWire, e: &mut Errors) -> AppliedTo {
    let mut sel = |s: &Option<LabelSelectorWire>, path: &str| {
        s.as_ref()
            .and_then(|s| match LabelSelector::from_wire(s, path) {
                Ok(s) => Some(s),
                Err(v) => {
                    e.0.extend(v.errors);
                    None
                }
            })
    };
    AppliedTo {
        pod_selector: sel(&w.pod_selector, "spec.appliedTo.podSelector"),
        namespace_selector: sel(&w.namespace_selector, "spec.appliedTo.namespaceSelector"),
    }
}

fn validate_port(w: &TcPortWire, path: &str, allow_erspan: bool, e: &mut Errors) -> Option<TcPort> {
    // Long on purpose: One arm per port type of the CRD, each validating its fields with
    // their exact paths: a table.
    let set: Vec<&str> = [
        ("ovsInternal", w.ovs_internal.is_some()),
        ("device", w.device.is_some()),
        ("geneve", w.geneve.is_some()),
        ("vxlan", w.vxlan.is_some()),
        ("gre", w.gre.is_some()),
        ("erspan", w.erspan.is_some()),
    ]
    .into_iter()
    .filter_map(|(n, present)| present.then_some(n))
    .collect();
    if set.len() != 1 {
        let variants = if allow_erspan {
            "ovsInternal, device, geneve, vxlan, gre, erspan"
        } else {
            "ovsInternal, device, geneve, vxlan, gre"
        };
        e.add(
            path,
            format!(
                "exactly one of {variants} must be set (found {}{}{})",
                set.len(),
                if set.is_empty() { "" } else { ": " },
                set.join(", ")
            ),
        );
        return None;
    }
    let name = |n: &NameWire, p: &str, e: &mut Errors| match n.name.as_deref() {
        None | Some("") => {
            e.add(&format!("{p}.name"), "required");
            None
        }
        Some(s) => Some(s.to_string()),
    };
    let remote = |r: &Option<String>, p: &str, e: &mut Errors| {
        let p = format!("{p}.remoteIP");
        e.required(&p, r).and_then(|s| e.ip(&p, s))
    };
    let int =
        |v: Option<i64>, p: String, lo: i64, hi: i64, e: &mut Errors| -> Result<Option<i64>, ()> {
            match v {
                None => Ok(None),
                Some(v) => e.range(&p, v, lo, hi).map(Some).ok_or(()),
            }
        };
    if let Some(n) = &w.ovs_internal {
        return name(n, &format!("{path}.ovsInternal"), e).map(|name| TcPort::OvsInternal { name });
    }
    if let Some(n) = &w.device {
        return name(n, &format!("{path}.device"), e).map(|name| TcPort::Device { name });
    }
    let udp = |t: &UdpTunnelWire, p: String, e: &mut Errors| {
        let ip = remote(&t.remote_ip, &p, e);
        let vni = int(t.vni, format!("{p}.vni"), 0, 16_777_215, e);
        let port = int(
            t.destination_port,
            format!("{p}.destinationPort"),
            1,
            65_535,
            e,
        );
        Some(UdpTunnel {
            remote_ip: ip?,
            vni: vni.ok()?.and_then(|v| u32::try_from(v).ok()),
            destination_port: port.ok()?.and_then(|v| u16::try_from(v).ok()),
        })
    };
    if let Some(t) = &w.geneve {
        return udp(t, format!("{path}.geneve"), e).map(TcPort::Geneve);
    }
    if let Some(t) = &w.vxlan {
        return udp(t, format!("{path}.vxlan"), e).map(TcPort::Vxlan);
    }
    if let Some(t) = &w.gre {
        let p = format!("{path}.gre");
        let ip = remote(&t.remote_ip, &p, e);
        let key = int(t.key, format!("{p}.key"), 0, i64::from(u32::MAX), e);
        return Some(TcPort::Gre(GreTunnel {
            remote_ip: ip?,
            key: key.ok()?.and_then(|v| u32::try_from(v).ok()),
        }));
    }
    if let Some(t) = &w.erspan {
        let p = format!("{path}.erspan");
        if !allow_erspan {
            e.add(&p, "not allowed in a return port");
            return None;
        }
        let ip = remote(&t.remote_ip, &p, e);
        let session = int(t.session_id, format!("{p}.sessionID"), 0, 1023, e);
        let version = match e.required(&format!("{p}.version"), &t.version) {
            Some(1) => Some(ErspanVersion::V1),
            Some(2) => Some(ErspanVersion::V2),
            Some(v) => {
                e.add(&format!("{p}.version"), format!("{v} is not one of 1, 2"));
                None
            }
            None => None,
        };
        let dir = match t.dir {
            None | Some(0 | 1) => t.dir,
            Some(v) => {
                e.add(&format!("{p}.dir"), format!("{v} is not one of 0, 1"));
                return None;
            }
        };
        // The ranges OVS accepts (the CRD bounds neither): the ERSPAN v1 index is 20 bits,
        // the v2 hardware ID 6 bits (RFC draft-foschiano-erspan-03 §4.1/§4.2, OVS's
        // `netdev_vport` parses both as hex and refuses wider values).
        let index = int(t.index, format!("{p}.index"), 0, 0xF_FFFF, e);
        let hwid = int(t.hardware_id, format!("{p}.hardwareID"), 0, 0x3F, e);
        return Some(TcPort::Erspan(ErspanTunnel {
            remote_ip: ip?,
            session_id: session.ok()?.and_then(|v| u16::try_from(v).ok()),
            version: version?,
            index: index.ok()?.and_then(|v| i32::try_from(v).ok()),
            dir: dir.and_then(|v| u8::try_from(v).ok()),
            hardware_id: hwid.ok()?.and_then(|v| i32::try_from(v).ok()),
        }));
    }
    None
}

// ---------------------------------------------------------------------------------------
// ExternalNode

#[cfg(test)]
mod tests;
