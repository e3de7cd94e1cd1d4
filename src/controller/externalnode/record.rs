//! The step record that makes takeover and restore crash-safe (docs/design.md#crash-safety-the-step-record): before each
//! step, the controller writes what it is about to do — together with the NIC's captured
//! MAC, MTU, addresses and routes — as JSON into the Bridge row's external_ids under
//! [`RECORD_KEY`]. After a crash, the next ExternalNode sync (or `tether reset`'s
//! `restore_all`) reads it back first (`finish_recorded` in `controller/recover.rs`) and
//! rolls a takeover back, or finishes a restore. This module is pure: a [`Record`] to a
//! JSON string and back; no I/O.
//!
//! ```text
//! takeover:  rename ─► ports ─► move ─► flows ─► (record removed: done)
//!            any failure or crash ─► undo with the captured config
//! restore:   flows ─► ports ─► rename ─► move ─► (record removed: done)
//!            any failure or crash ─► redo the remaining steps (all idempotent)
//! ```

use std::net::IpAddr;

use serde_json::{Map, Value, json};

use crate::netlink::{
    Addr, AddrFlags, DevSysctl, Lifetime, Nexthop, NicConfig, Prefix, Route, RoutePref,
    RouteProtocol, RouteType, Scope,
};

/// The Bridge external_ids key holding the in-flight operation.
pub const RECORD_KEY: &str = "tether-en-op";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Takeover,
    Restore,
}

/// The step about to run (takeover: rename, ports, move, flows; restore: flows, ports,
/// rename, move).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Rename,
    Ports,
    Move,
    Flows,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Takeover => "takeover",
            Phase::Restore => "restore",
        }
    }

    /// Its steps, in order.
    pub fn steps(self) -> [Step; 4] {
        match self {
            Phase::Takeover => [Step::Rename, Step::Ports, Step::Move, Step::Flows],
            Phase::Restore => [Step::Flows, Step::Ports, Step::Rename, Step::Move],
        }
    }
}

impl Step {
    pub fn name(self) -> &'static str {
        match self {
            Step::Rename => "rename",
            Step::Ports => "ports",
            Step::Move => "move",
            Step::Flows => "flows",
        }
    }
}

/// One in-flight operation on one NIC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub phase: Phase,
    pub step: Step,
    /// The NIC's own name (also the host port's name).
    pub nic: String,
    pub uplink: String,
    /// What the NIC must carry once it is a plain NIC again: its configuration captured
    /// before the takeover, or captured from the host port when the restore began.
    /// `config.ifindex` is the NIC's ifindex (stable across renames).
    pub config: NicConfig,
}

impl Record {
    pub fn to_json(&self) -> String {
        let mut o = config_json(&self.config);
        o.insert("phase".into(), self.phase.name().into());
        o.insert("step".into(), self.step.name().into());
        o.insert("nic".into(), self.nic.as_str().into());
        o.insert("uplink".into(), self.uplink.as_str().into());
        Value::Object(o).to_string()
    }

    pub fn from_json(s: &str) -> Result<Record, String> {
        let v: Value = serde_json::from_str(s).map_err(|e| format!("not JSON: {e}"))?;
        let o = v.as_object().ok_or("not a JSON object")?;
        let phase = match text(o, "phase")?.as_str() {
            "takeover" => Phase::Takeover,
            "restore" => Phase::Restore,
            p => return Err(format!("unknown phase {p:?}")),
        };
        let step = match text(o, "step")?.as_str() {
            "rename" => Step::Rename,
            "ports" => Step::Ports,
            "move" => Step::Move,
            "flows" => Step::Flows,
            s => return Err(format!("unknown step {s:?}")),
        };
        let nic = text(o, "nic")?;
        let config = config_from(o, &nic)?;
        Ok(Record {
            phase,
            step,
            nic,
            uplink: text(o, "uplink")?,
            config,
        })
    }
}

/// The Bridge external_ids key prefix of an attached NIC's held configuration
/// ([`Held`]): `tether-held:<nic>`.
pub const HELD_PREFIX: &str = "tether-held:";

/// What the host port of an attached NIC carries, as last seen there: the NIC's MTU,
/// addresses, routes and sysctls, with `config.ifindex` the host port's ifindex then.
/// Written after a takeover and kept current while the NIC is attached, so that a host
/// port the kernel re-created (the openvswitch module reloaded: `ovs-ctl
/// force-reload-kmod`) gets them back, whatever the restart put back itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    pub nic: String,
    pub config: NicConfig,
}

impl Held {
    pub fn key(nic: &str) -> String {
        format!("{HELD_PREFIX}{nic}")
    }

    pub fn to_json(&self) -> String {
        Value::Object(config_json(&self.config)).to_string()
    }

    pub fn from_json(nic: &str, s: &str) -> Result<Held, String> {
        let v: Value = serde_json::from_str(s).map_err(|e| format!("not JSON: {e}"))?;
        let o = v.as_object().ok_or("not a JSON object")?;
        Ok(Held {
            nic: nic.to_string(),
            config: config_from(o, nic)?,
        })
    }
}

/// A captured configuration's fields (the step record's and [`Held`]'s).
fn config_json(c: &NicConfig) -> Map<String, Value> {
    let v = json!({
        "ifindex": c.ifindex,
        "mac": c.mac.as_ref().map(crate::mac::format),
        "mtu": c.mtu,
        "addrs": c.addrs.iter().map(addr_json).collect::<Vec<_>>(),
        "routes": c.routes.iter().map(route_json).collect::<Vec<_>>(),
        "sysctls": c
            .sysctls
            .iter()
            .map(|(k, v)| (k.id(), Value::from(v.as_str())))
            .collect::<Map<String, Value>>(),
    });
    match v {
        Value::Object(o) => o,
        _ => Map::new(),
    }
}

fn config_from(o: &Map<String, Value>, name: &str) -> Result<NicConfig, String> {
    let mac = match o.get("mac") {
        None | Some(Value::Null) => None,
        Some(Value::String(m)) => {
            Some(crate::mac::parse(m).ok_or_else(|| format!("bad mac {m:?}"))?)
        }
        Some(m) => return Err(format!("bad mac {m}")),
    };
    Ok(NicConfig {
        ifindex: uint(o, "ifindex")?,
        name: name.to_string(),
        mac,
        mtu: uint(o, "mtu")?,
        addrs: list(o, "addrs")?
            .iter()
            .map(addr_from)
            .collect::<Result<_, _>>()?,
        routes: list(o, "routes")?
            .iter()
            .map(route_from)
            .collect::<Result<_, _>>()?,
        sysctls: sysctls_from(o)?,
    })
}

/// The NIC's per-device sysctls, in apply order. Absent in records of older versions
/// (nothing to carry); a key this version does not know is skipped.
fn sysctls_from(o: &Map<String, Value>) -> Result<Vec<(DevSysctl, String)>, String> {
    let Some(v) = o.get("sysctls") else {
        return Ok(Vec::new());
    };
    let m = v.as_object().ok_or("sysctls: not an object")?;
    let mut out = Vec::new();
    for key in DevSysctl::ALL {
        match m.get(&key.id()) {
            None => {}
            Some(Value::String(s)) => out.push((key, s.clone())),
            Some(v) => return Err(format!("sysctls.{}: not a string: {v}", key.id())),
        }
    }
    Ok(out)
}

fn text(o: &Map<String, Value>, k: &str) -> Result<String, String> {
    o.get(k)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| format!("{k}: missing or not a string"))
}

fn uint<T: TryFrom<u64>>(o: &Map<String, Value>, k: &str) -> Result<T, String> {
    o.get(k)
        .and_then(Value::as_u64)
        .and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| format!("{k}: missing or out of range"))
}

fn list<'a>(o: &'a Map<String, Value>, k: &str) -> Result<&'a Vec<Value>, String> {
    o.get(k)
        .and_then(Value::as_array)
        .ok_or_else(|| format!("{k}: missing or not a list"))
}

fn ip(o: &Map<String, Value>, k: &str) -> Result<Option<IpAddr>, String> {
    match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => s
            .parse()
            .map(Some)
            .map_err(|_| format!("{k}: bad IP {s:?}")),
        Some(v) => Err(format!("{k}: bad IP {v}")),
    }
}

fn obj(v: &Value) -> Result<&Map<String, Value>, String> {
    v.as_object().ok_or_else(|| format!("not an object: {v}"))
}

fn addr_json(a: &Addr) -> Value {
    json!({
        "local": a.local.to_string(),
        "prefix_len": a.prefix_len,
        "peer": a.peer.map(|p| p.to_string()),
        "broadcast": a.broadcast.map(|b| b.to_string()),
        "scope": a.scope.0,
        "flags": a.flags.0,
        "label": a.label,
        "valid_lft": a.lifetime.valid,
        "preferred_lft": a.lifetime.preferred,
        "metric": a.metric,
        "proto": a.proto,
    })
}

fn addr_from(v: &Value) -> Result<Addr, String> {
    let o = obj(v)?;
    let local = ip(o, "local")?.ok_or("addr without local")?;
    let broadcast = match ip(o, "broadcast")? {
        Some(IpAddr::V4(b)) => Some(b),
        Some(IpAddr::V6(_)) => return Err("IPv6 broadcast".into()),
        None => None,
    };
    Ok(Addr {
        ifindex: 0,
        local,
        prefix_len: uint(o, "prefix_len")?,
        peer: ip(o, "peer")?,
        broadcast,
        scope: Scope(uint(o, "scope")?),
        flags: AddrFlags(uint(o, "flags")?),
        label: o.get("label").and_then(Value::as_str).map(str::to_string),
        lifetime: Lifetime {
            valid: uint(o, "valid_lft")?,
            preferred: uint(o, "preferred_lft")?,
        },
        metric: uint(o, "metric")?,
        proto: uint(o, "proto")?,
    })
}

fn route_json(r: &Route) -> Value {
    json!({
        "table": r.table,
        "dst": r.dst.to_string(),
        "gateway": r.gateway.map(|g| g.to_string()),
        "prefsrc": r.prefsrc.map(|p| p.to_string()),
        "metric": r.metric,
        "scope": r.scope.0,
        "protocol": r.protocol.0,
        "type": r.kind.0,
        "tos": r.tos,
        "flags": r.flags,
        "pref": r.pref.map(|p| p.0),
        "metrics": r.metrics.iter().map(|b| format!("{b:02x}")).collect::<String>(),
        "multipath": r.multipath.iter().map(|n| json!({
            "ifindex": n.ifindex,
            "gateway": n.gateway.map(|g| g.to_string()),
            "hops": n.hops,
            "flags": n.flags,
        })).collect::<Vec<_>>(),
        "expires": r.expires,
    })
}

fn nexthop_from(v: &Value) -> Result<Nexthop, String> {
    let o = obj(v)?;
    Ok(Nexthop {
        ifindex: uint(o, "ifindex")?,
        gateway: ip(o, "gateway")?,
        hops: uint(o, "hops")?,
        flags: uint(o, "flags")?,
    })
}

fn route_from(v: &Value) -> Result<Route, String> {
    let o = obj(v)?;
    let dst = text(o, "dst")?;
    let (a, l) = dst.split_once('/').ok_or("dst without /len")?;
    let addr: IpAddr = a.parse().map_err(|_| format!("bad dst {dst:?}"))?;
    let len: u8 = l.parse().map_err(|_| format!("bad dst {dst:?}"))?;
    let metrics =
        hex_bytes(&text(o, "metrics")?).ok_or("metrics: not an even number of hex digits")?;
    let pref = match o.get("pref") {
        None | Some(Value::Null) => None,
        Some(_) => Some(RoutePref(uint(o, "pref")?)),
    };
    // Both absent in records written before multipath routes were moved.
    let multipath = match o.get("multipath") {
        None | Some(Value::Null) => Vec::new(),
        Some(_) => list(o, "multipath")?
            .iter()
            .map(nexthop_from)
            .collect::<Result<_, _>>()?,
    };
    let expires = match o.get("expires") {
        None | Some(Value::Null) => None,
        Some(_) => Some(uint(o, "expires")?),
    };
    Ok(Route {
        table: uint(o, "table")?,
        dst: Prefix::new(addr, len),
        gateway: ip(o, "gateway")?,
        prefsrc: ip(o, "prefsrc")?,
        oif: 0,
        metric: uint(o, "metric")?,
        scope: Scope(uint(o, "scope")?),
        protocol: RouteProtocol(uint(o, "protocol")?),
        kind: RouteType(uint(o, "type")?),
        tos: uint(o, "tos")?,
        flags: uint(o, "flags")?,
        pref,
        metrics,
        multipath,
        expires,
        unmovable: None,
    })
}

/// Bytes from lowercase or uppercase hex digits; None for anything else (decoding bytes,
/// not string slices: a record read back from OVSDB may hold any UTF-8).
fn hex_bytes(hex: &str) -> Option<Vec<u8>> {
    fn digit(b: u8) -> Option<u8> {
        match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            b'A'..=b'F' => Some(b - b'A' + 10),
            _ => None,
        }
    }
    let b = hex.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    b.chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

/// What can still be read from a record that does not decode: the NIC and uplink names,
/// when they are there and valid interface names. Recovery then works from what the
/// kernel and OVSDB show.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hint {
    pub nic: Option<String>,
    pub uplink: Option<String>,
}

impl Hint {
    pub fn from_json(s: &str) -> Hint {
        let v: Value = serde_json::from_str(s).unwrap_or(Value::Null);
        let name = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .filter(|n| crate::netlink::valid_ifname(n))
                .map(str::to_string)
        };
        Hint {
            nic: name("nic"),
            uplink: name("uplink"),
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub fn sample() -> NicConfig {
        let mut a4 = Addr::new(0, "192.0.2.10".parse().unwrap(), 24);
        a4.broadcast = Some("192.0.2.255".parse().unwrap());
        a4.label = Some("eth1".into());
        a4.lifetime = Lifetime {
            valid: 7200,
            preferred: 3600,
        };
        let mut a6 = Addr::new(0, "2001:db8:1::10".parse().unwrap(), 64);
        a6.flags = AddrFlags::NODAD;
        let mut def = Route::new(Prefix::new("0.0.0.0".parse().unwrap(), 0), 0);
        def.gateway = Some("192.0.2.1".parse().unwrap());
        def.metric = 100;
        let mut def6 = Route::new(Prefix::new("::".parse().unwrap(), 0), 0);
        def6.gateway = Some("2001:db8:1::1".parse().unwrap());
        def6.pref = Some(RoutePref::HIGH);
        def6.metrics = vec![8, 0, 2, 0, 0xa0, 5, 0, 0];
        let mut conn = Route::new(Prefix::new("192.0.2.0".parse().unwrap(), 24), 0);
        conn.protocol = RouteProtocol::KERNEL;
        conn.scope = Scope::LINK;
        conn.prefsrc = Some("192.0.2.10".parse().unwrap());
        NicConfig {
            ifindex: 7,
            name: "eth1".into(),
            mac: Some([2, 0, 0, 0, 1, 0x10]),
            mtu: 1450,
            addrs: vec![a4, a6],
            routes: vec![conn, def, def6],
            sysctls: vec![
                (DevSysctl::Ipv6DisableIpv6, "0".into()),
                (DevSysctl::Ipv4RpFilter, "2".into()),
                (DevSysctl::Ipv6Forwarding, "1".into()),
            ],
        }
    }

    /// A record written before sysctls were carried decodes with none; an unknown key
    /// (a newer version's) is skipped, a non-string value is an error naming it.
    #[test]
    fn sysctls_absent_unknown_or_bad() {
        let r = Record {
            phase: Phase::Takeover,
            step: Step::Move,
            nic: "eth1".into(),
            uplink: "eth1~".into(),
            config: sample(),
        };
        let mut v: Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(
            v["sysctls"],
            json!({"ipv4.rp_filter": "2", "ipv6.disable_ipv6": "0", "ipv6.forwarding": "1"})
        );
        v.as_object_mut().unwrap().remove("sysctls");
        let old = Record::from_json(&v.to_string()).unwrap();
        assert!(old.config.sysctls.is_empty());
        v["sysctls"] = json!({"ipv6.mystery": "1", "ipv4.arp_ignore": "1"});
        let newer = Record::from_json(&v.to_string()).unwrap();
        assert_eq!(
            newer.config.sysctls,
            vec![(DevSysctl::Ipv4ArpIgnore, "1".to_string())]
        );
        v["sysctls"] = json!({"ipv4.arp_ignore": 1});
        assert_eq!(
            Record::from_json(&v.to_string()).unwrap_err(),
            "sysctls.ipv4.arp_ignore: not a string: 1"
        );
    }

    #[test]
    fn round_trip_keeps_every_field() {
        let r = Record {
            phase: Phase::Restore,
            step: Step::Rename,
            nic: "eth1".into(),
            uplink: "eth1~".into(),
            config: sample(),
        };
        let s = r.to_json();
        assert_eq!(Record::from_json(&s).unwrap(), r);
        let v: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["phase"], "restore");
        assert_eq!(v["step"], "rename");
        assert_eq!(v["mac"], "02:00:00:00:01:10");
        assert_eq!(v["addrs"][0]["local"], "192.0.2.10");
        assert_eq!(v["routes"][2]["metrics"], "08000200a0050000");
    }

    #[test]
    fn held_configuration_round_trips() {
        let h = Held {
            nic: "eth1".into(),
            config: sample(),
        };
        assert_eq!(Held::key("eth1"), "tether-held:eth1");
        let s = h.to_json();
        assert_eq!(Held::from_json("eth1", &s).unwrap(), h);
        let v: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["ifindex"], 7);
        assert_eq!(v.get("phase"), None);
        assert_eq!(
            Held::from_json("eth1", r#"{"ifindex":7}"#).unwrap_err(),
            "mtu: missing or out of range"
        );
    }

    #[test]
    fn bad_records_are_errors_not_panics() {
        assert!(Record::from_json("").is_err());
        assert!(Record::from_json("[]").is_err());
        let good = Record {
            phase: Phase::Takeover,
            step: Step::Ports,
            nic: "eth1".into(),
            uplink: "eth1~".into(),
            config: sample(),
        }
        .to_json();
        let mut v: Value = serde_json::from_str(&good).unwrap();
        v["step"] = json!("fly");
        assert_eq!(
            Record::from_json(&v.to_string()).unwrap_err(),
            "unknown step \"fly\""
        );
        let mut v: Value = serde_json::from_str(&good).unwrap();
        v["ifindex"] = json!(-1);
        assert_eq!(
            Record::from_json(&v.to_string()).unwrap_err(),
            "ifindex: missing or out of range"
        );
        let mut v: Value = serde_json::from_str(&good).unwrap();
        v["routes"][0]["metrics"] = json!("abc");
        assert!(Record::from_json(&v.to_string()).is_err());
        // Multi-byte characters where hex digits belong: an error, not a panic on a
        // string slice (this one used to abort the daemon at every start).
        for bad in ["€0", "0€", "é", "+f", "0x"] {
            let mut v: Value = serde_json::from_str(&good).unwrap();
            v["routes"][0]["metrics"] = json!(bad);
            assert_eq!(
                Record::from_json(&v.to_string()).unwrap_err(),
                "metrics: not an even number of hex digits",
                "{bad}"
            );
        }
    }

    #[test]
    fn hints_from_broken_records() {
        assert_eq!(
            Hint::from_json(r#"{"nic":"eth1","uplink":"eth1~","routes":7}"#),
            Hint {
                nic: Some("eth1".into()),
                uplink: Some("eth1~".into())
            }
        );
        assert_eq!(Hint::from_json("{not json"), Hint::default());
        assert_eq!(
            Hint::from_json(r#"{"nic":"a/b","uplink":"0123456789abcdef"}"#),
            Hint::default()
        );
    }
}
