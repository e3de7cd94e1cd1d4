//! The interface store: what the bridge's ports mean to tether, rebuilt from OVSDB alone
//! (docs/design.md#the-interface-store, Antrea `initInterfaceStore`). Pure: `PortData` rows in, a typed index out.
//!
//! Ports are classified by `external_ids`: `antrea-type` = `traffic-control`, `uplink` or
//! `host` are tether's own; a Pod port carries `container-id` + `pod-name` +
//! `pod-namespace`, as a CNI writes them. Anything else is someone else's and never touched.

use std::collections::HashMap;

use crate::ovsdb::{PortData, Uuid};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    Pod {
        namespace: String,
        name: String,
    },
    TrafficControl,
    Uplink,
    Host,
    /// Not ours, not a Pod (the bridge's local port, a port someone else made).
    Other,
}

impl Role {
    /// For messages: `Pod ns/name`, `traffic-control`, `uplink`, `host`, `foreign`.
    pub fn describe(&self) -> String {
        match self {
            Role::Pod { namespace, name } => format!("Pod {namespace}/{name}"),
            Role::TrafficControl => "traffic-control".into(),
            Role::Uplink => "uplink".into(),
            Role::Host => "host".into(),
            Role::Other => "foreign".into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    pub port: PortData,
    pub role: Role,
}

impl Interface {
    pub fn uuid(&self) -> &Uuid {
        &self.port.uuid
    }

    /// The ofport when OVS has assigned a usable one.
    pub fn ofport(&self) -> Option<u32> {
        u32::try_from(self.port.ofport).ok().filter(|p| *p > 0)
    }

    /// The Pod's MAC: the CNI's `attached-mac`, else what OVS reports in use.
    pub fn mac(&self) -> Option<&str> {
        self.port
            .external_ids
            .get("attached-mac")
            .map(String::as_str)
            .or(self.port.mac_in_use.as_deref())
    }
}

pub fn classify(p: &PortData) -> Role {
    let ids = &p.external_ids;
    match ids.get("antrea-type").map(String::as_str) {
        Some("traffic-control") => return Role::TrafficControl,
        Some("uplink") => return Role::Uplink,
        Some("host") => return Role::Host,
        _ => {}
    }
    match (
        ids.get("container-id"),
        ids.get("pod-namespace"),
        ids.get("pod-name"),
    ) {
        (Some(_), Some(ns), Some(name)) => Role::Pod {
            namespace: ns.clone(),
            name: name.clone(),
        },
        _ => Role::Other,
    }
}

/// A snapshot of the bridge's ports, indexed by port name and by Pod.
#[derive(Clone, Debug, Default)]
pub struct Interfaces {
    by_name: HashMap<String, Interface>,
    /// `namespace/name` → port name.
    pods: HashMap<String, String>,
}

impl Interfaces {
    pub fn new(ports: Vec<PortData>) -> Interfaces {
        let mut s = Interfaces::default();
        for mut p in ports {
            let role = classify(&p);
            if let Role::Pod { namespace, name } = &role {
                s.pods.insert(format!("{namespace}/{name}"), p.name.clone());
                // A Pod port's CNI keys are read once, here, except its MAC: at 5,000 Pods
                // the other keys (container-id, iface-id, ip-address, …) were a third of
                // every interface store (docs/design.md#the-interface-store).
                p.external_ids.retain(|k, _| k == "attached-mac");
            }
            s.by_name
                .insert(p.name.clone(), Interface { port: p, role });
        }
        s
    }

    pub fn get(&self, name: &str) -> Option<&Interface> {
        self.by_name.get(name)
    }

    /// The port of Pod `namespace/name`.
    pub fn pod(&self, key: &str) -> Option<&Interface> {
        self.pods.get(key).and_then(|n| self.by_name.get(n))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Interface> {
        self.by_name.values()
    }

    pub fn with_role<'a>(&'a self, role: &'a Role) -> impl Iterator<Item = &'a Interface> + 'a {
        self.by_name.values().filter(move |i| &i.role == role)
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn port(name: &str, ids: &[(&str, &str)], ofport: i64) -> PortData {
        PortData {
            uuid: Uuid(format!("00000000-0000-0000-0000-{:012}", name.len())),
            name: name.into(),
            external_ids: ids
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            if_uuid: None,
            if_name: name.into(),
            if_type: String::new(),
            ofport,
            error: None,
            options: BTreeMap::new(),
            mac: None,
            mac_in_use: Some("02:00:00:00:00:99".into()),
            mtu: None,
            ifindex: None,
        }
    }

    #[test]
    fn classification() {
        let pod = port(
            "veth-a",
            &[
                ("container-id", "c1"),
                ("pod-name", "a"),
                ("pod-namespace", "ns1"),
                ("attached-mac", "02:00:00:00:00:0a"),
            ],
            3,
        );
        let half_pod = port("veth-b", &[("pod-name", "b"), ("pod-namespace", "ns1")], 4);
        let s = Interfaces::new(vec![
            pod,
            half_pod,
            port("tap0", &[("antrea-type", "traffic-control")], 5),
            port("eth1~", &[("antrea-type", "uplink")], 6),
            port("eth1", &[("antrea-type", "host")], 7),
            port("br-int", &[], 65534),
            port("dead", &[("antrea-type", "traffic-control")], -1),
        ]);
        let a = s.pod("ns1/a").unwrap();
        assert_eq!(a.port.name, "veth-a");
        // Only the MAC is kept of a Pod port's CNI keys.
        assert_eq!(
            a.port.external_ids,
            BTreeMap::from([("attached-mac".to_string(), "02:00:00:00:00:0a".to_string())])
        );
        // Ports of other roles keep theirs.
        assert_eq!(
            s.get("tap0").unwrap().port.external_ids,
            BTreeMap::from([("antrea-type".to_string(), "traffic-control".to_string())])
        );
        assert_eq!(a.ofport(), Some(3));
        assert_eq!(a.mac(), Some("02:00:00:00:00:0a"));
        // Without container-id it is not a Pod port (Antrea's rule).
        assert_eq!(s.get("veth-b").unwrap().role, Role::Other);
        assert!(s.pod("ns1/b").is_none());
        assert_eq!(s.get("tap0").unwrap().role, Role::TrafficControl);
        assert_eq!(s.get("eth1~").unwrap().role, Role::Uplink);
        assert_eq!(s.get("eth1").unwrap().role, Role::Host);
        assert_eq!(s.get("br-int").unwrap().role, Role::Other);
        assert_eq!(s.get("dead").unwrap().ofport(), None);
        assert_eq!(s.get("tap0").unwrap().mac(), Some("02:00:00:00:00:99"));
        assert_eq!(s.with_role(&Role::TrafficControl).count(), 2);
    }
}
