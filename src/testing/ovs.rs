//! Recording fakes of the controllers' OVSDB and OpenFlow traits, for tests without root.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use crate::controller::interfaces::Interfaces;
use crate::controller::{Bridge, Flows};
use crate::openflow::{Flow, FlowChange, OfError, Owner};
use crate::ovsdb::{OvsdbError, PortData, PortKind, PortSpec, Uuid};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Default)]
pub struct FakeBridge {
    pub ports: Mutex<Vec<PortData>>,
    next: Mutex<u32>,
    /// Every call, in order: `create <name> <kind>`, `delete <names>`, `ofport <name>`.
    pub log: Mutex<Vec<String>>,
    /// Ports OVS "cannot open": created with ofport -1 and this error.
    pub refuse: Mutex<BTreeMap<String, String>>,
    /// The Bridge row's external_ids.
    pub bridge_ids: Mutex<BTreeMap<String, String>>,
}

impl FakeBridge {
    pub fn new() -> FakeBridge {
        FakeBridge::default()
    }

    fn uuid(n: u32) -> Uuid {
        Uuid(format!("00000000-0000-0000-0000-{n:012}"))
    }

    /// Add a port as someone else (a CNI) would; returns its ofport.
    pub fn add_port(&self, name: &str, ids: &[(&str, &str)], mac: Option<&str>) -> u32 {
        let mut n = lock(&self.next);
        *n += 1;
        lock(&self.ports).push(PortData {
            uuid: Self::uuid(*n),
            name: name.into(),
            external_ids: ids
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            if_uuid: None,
            if_name: name.into(),
            if_type: String::new(),
            ofport: i64::from(*n),
            error: None,
            options: BTreeMap::new(),
            mac: None,
            mac_in_use: mac.map(str::to_string),
            mtu: None,
            ifindex: None,
        });
        *n
    }

    /// A Pod's port with CNI external_ids.
    pub fn add_pod_port(&self, ns: &str, pod: &str) -> u32 {
        let name = format!("{pod}-veth");
        self.add_port(
            &name,
            &[
                ("container-id", pod),
                ("pod-name", pod),
                ("pod-namespace", ns),
            ],
            Some("02:00:00:00:00:01"),
        )
    }

    pub fn names(&self) -> BTreeSet<String> {
        lock(&self.ports).iter().map(|p| p.name.clone()).collect()
    }

    pub fn port(&self, name: &str) -> Option<PortData> {
        lock(&self.ports).iter().find(|p| p.name == name).cloned()
    }

    /// Change a port's Interface type behind the controller's back (an older writer).
    pub fn set_if_type(&self, name: &str, if_type: &str) {
        if let Some(p) = lock(&self.ports).iter_mut().find(|p| p.name == name) {
            p.if_type = if_type.to_string();
        }
    }

    /// The names of the ports with these Port UUIDs.
    pub fn names_of(&self, ports: &[Uuid]) -> Vec<String> {
        lock(&self.ports)
            .iter()
            .filter(|p| ports.contains(&p.uuid))
            .map(|p| p.name.clone())
            .collect()
    }

    pub fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.log))
    }
}

impl Bridge for FakeBridge {
    fn interfaces(&self) -> std::sync::Arc<Interfaces> {
        std::sync::Arc::new(Interfaces::new(lock(&self.ports).clone()))
    }

    fn create_port(&self, spec: &PortSpec) -> Result<Uuid, OvsdbError> {
        if self.port(&spec.name).is_some() {
            return Err(OvsdbError::TxnFailed {
                op: 3,
                error: "constraint violation".into(),
                details: format!("duplicate name {}", spec.name),
            });
        }
        let kind = match &spec.kind {
            PortKind::System => "system".to_string(),
            PortKind::Internal { .. } => "internal".to_string(),
            PortKind::Tunnel { kind, options } => format!("{kind}{options:?}"),
            PortKind::Other(t) => t.clone(),
        };
        lock(&self.log).push(format!("create {} {kind}", spec.name));
        let (if_type, options) = match &spec.kind {
            PortKind::Tunnel { kind, options } => (kind.clone(), options.clone()),
            PortKind::Internal { .. } => ("internal".to_string(), BTreeMap::new()),
            _ => (String::new(), BTreeMap::new()),
        };
        let mut n = lock(&self.next);
        *n += 1;
        let refused = lock(&self.refuse).get(&spec.name).cloned();
        let uuid = Self::uuid(*n);
        lock(&self.ports).push(PortData {
            uuid: uuid.clone(),
            name: spec.name.clone(),
            external_ids: spec.external_ids.clone(),
            if_uuid: None,
            if_name: spec.name.clone(),
            if_type,
            ofport: if refused.is_some() { -1 } else { i64::from(*n) },
            error: refused,
            options,
            mac: None,
            // What ovs-vswitchd reports once it has the netdev: an internal port's MAC
            // and MTU as requested.
            mac_in_use: match &spec.kind {
                PortKind::Internal { mac } => mac.clone(),
                _ => None,
            },
            mtu: spec.mtu_request.map(i64::from),
            ifindex: None,
        });
        Ok(uuid)
    }

    fn ofport(&self, name: &str) -> Result<u32, OvsdbError> {
        let p = self.port(name).ok_or_else(|| OvsdbError::NotFound {
            table: "Interface".into(),
            name: name.into(),
        })?;
        u32::try_from(p.ofport)
            .ok()
            .filter(|o| *o > 0)
            .ok_or_else(|| OvsdbError::PortFailed {
                name: name.into(),
                error: p.error.unwrap_or_default(),
            })
    }

    fn delete_ports(&self, ports: &[Uuid]) -> Result<(), OvsdbError> {
        let names = self.names_of(ports);
        lock(&self.ports).retain(|p| !ports.contains(&p.uuid));
        lock(&self.log).push(format!("delete {}", names.join(",")));
        Ok(())
    }

    fn set_port_external_ids(
        &self,
        port: &str,
        ids: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError> {
        let mut all = lock(&self.ports);
        let p = all
            .iter_mut()
            .find(|p| p.name == port)
            .ok_or_else(|| OvsdbError::NotFound {
                table: "Port".into(),
                name: port.into(),
            })?;
        p.external_ids = ids.clone();
        lock(&self.log).push(format!("set_external_ids {port}"));
        Ok(())
    }

    fn set_interface_options(
        &self,
        name: &str,
        options: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError> {
        lock(&self.log).push(format!("options {name} {options:?}"));
        let mut ports = lock(&self.ports);
        let p = ports
            .iter_mut()
            .find(|p| p.if_name == name)
            .ok_or_else(|| OvsdbError::NotFound {
                table: "Interface".into(),
                name: name.into(),
            })?;
        p.options = options.clone();
        Ok(())
    }

    fn bridge_external_id(&self, key: &str) -> Result<Option<String>, OvsdbError> {
        Ok(lock(&self.bridge_ids).get(key).cloned())
    }

    fn set_bridge_external_id(&self, key: &str, value: Option<&str>) -> Result<(), OvsdbError> {
        let mut ids = lock(&self.bridge_ids);
        match value {
            Some(v) => ids.insert(key.to_string(), v.to_string()),
            None => ids.remove(key),
        };
        Ok(())
    }
}

/// Picks flow owners.
pub type OwnerFilter = fn(Owner) -> bool;

/// A recording `Flows`: every owner's flows, the no-flood ports, and counts of how it
/// was called; it fails every call (`fail`) or the applies of some owners (`fail_owner`)
/// on request.
#[derive(Default)]
pub struct FakeFlows {
    pub owners: Mutex<BTreeMap<Owner, Vec<Flow>>>,
    pub no_flood: Mutex<BTreeSet<u32>>,
    /// When set, every call fails with this error.
    pub fail: Mutex<Option<OfError>>,
    /// When set, applying the flows of an owner it picks fails (the switch gone).
    pub fail_owner: Mutex<Option<OwnerFilter>>,
    /// Calls of `apply` (not those `apply_many` makes).
    pub applies: Mutex<usize>,
    /// The number of owners in each `apply_many`.
    pub batches: Mutex<Vec<usize>>,
    /// Each `replace_round`: (owners, round).
    pub replaced: Mutex<Vec<(usize, u16)>>,
    /// Each `change_many`: per owner, whether it was a patch.
    pub changes: Mutex<Vec<Vec<(Owner, bool)>>>,
}

impl FakeFlows {
    pub fn new() -> FakeFlows {
        FakeFlows::default()
    }

    pub fn of(&self, owner: Owner) -> Vec<Flow> {
        lock(&self.owners).get(&owner).cloned().unwrap_or_default()
    }

    pub fn total(&self) -> usize {
        lock(&self.owners).values().map(Vec::len).sum()
    }

    fn check(&self) -> Result<(), OfError> {
        match lock(&self.fail).clone() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn put(&self, owner: Owner, mut flows: Vec<Flow>) -> Result<(), OfError> {
        self.check()?;
        if lock(&self.fail_owner).is_some_and(|f| f(owner)) {
            return Err(OfError::Disconnected {
                socket: "br-int.mgmt".into(),
            });
        }
        flows.sort();
        if flows.is_empty() {
            lock(&self.owners).remove(&owner);
        } else {
            lock(&self.owners).insert(owner, flows);
        }
        Ok(())
    }
}

impl Flows for FakeFlows {
    fn apply(&self, owner: Owner, flows: Vec<Flow>) -> Result<(), OfError> {
        *lock(&self.applies) += 1;
        self.put(owner, flows)
    }

    fn apply_many(&self, sets: Vec<(Owner, Vec<Flow>)>) -> Vec<(Owner, OfError)> {
        lock(&self.batches).push(sets.len());
        sets.into_iter()
            .filter_map(|(o, f)| self.put(o, f).err().map(|e| (o, e)))
            .collect()
    }

    fn change_many(&self, changes: Vec<(Owner, FlowChange)>) -> Vec<(Owner, OfError)> {
        lock(&self.changes).push(
            changes
                .iter()
                .map(|(o, c)| (*o, matches!(c, FlowChange::Patch { .. })))
                .collect(),
        );
        changes
            .into_iter()
            .filter_map(|(o, c)| {
                let flows = c.applied_to(self.of(o));
                self.put(o, flows).err().map(|e| (o, e))
            })
            .collect()
    }

    fn replace_round(
        &self,
        sets: Vec<(Owner, Vec<Flow>)>,
        round: u16,
    ) -> (Vec<(Owner, OfError)>, Result<(), OfError>) {
        lock(&self.replaced).push((sets.len(), round));
        let failed = self.apply_many(sets);
        (failed, self.delete_round(round))
    }

    fn remove(&self, owner: Owner) -> Result<(), OfError> {
        self.check()?;
        lock(&self.owners).remove(&owner);
        Ok(())
    }

    fn set_no_flood(&self, ofport: u32, on: bool) -> Result<(), OfError> {
        self.check()?;
        if on {
            lock(&self.no_flood).insert(ofport);
        } else {
            lock(&self.no_flood).remove(&ofport);
        }
        Ok(())
    }

    fn delete_round(&self, _round: u16) -> Result<(), OfError> {
        self.check()
    }
}
