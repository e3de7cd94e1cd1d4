//! The narrow OVSDB view controllers program through (DESIGN §4 `Bridge`), implemented by
//! [`crate::ovsdb::Bridge`] and by recording fakes in unit tests.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::interfaces::Interfaces;
use crate::ovsdb::{self, OvsdbError, PortSpec, Uuid};

pub trait OvsBridge: Send + Sync {
    /// The interface store: every port of the bridge, classified (a shared snapshot).
    fn interfaces(&self) -> Arc<Interfaces>;
    /// Create a port (one transaction); its Port UUID.
    fn create_port(&self, spec: &PortSpec) -> Result<Uuid, OvsdbError>;
    /// The port's ofport, read fresh (waits for OVS to assign one; -1 is an error).
    fn ofport(&self, name: &str) -> Result<u32, OvsdbError>;
    /// Delete ports by Port UUID, one transaction.
    fn delete_ports(&self, ports: &[Uuid]) -> Result<(), OvsdbError>;
    /// Delete ports and wait (up to `within`) until ovs-vswitchd has applied the delete
    /// (`next_cfg`/`cur_cfg`): it has then taken them out of the datapath. `Timeout` when
    /// it has not (the delete is committed all the same). Fakes without a switch to wait
    /// for: the same as `delete_ports`.
    fn delete_ports_applied(&self, ports: &[Uuid], within: Duration) -> Result<(), OvsdbError> {
        let _ = within;
        self.delete_ports(ports)
    }
    /// Replace a Port's external_ids.
    fn set_port_external_ids(
        &self,
        port: &str,
        ids: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError>;
    /// Replace an Interface's options (ovs-vswitchd reconfigures the netdev in place: the
    /// port keeps its ofport).
    fn set_interface_options(
        &self,
        name: &str,
        options: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError>;
    /// One of the Bridge row's external_ids, read fresh (e.g. a recorded takeover step).
    fn bridge_external_id(&self, key: &str) -> Result<Option<String>, OvsdbError>;
    /// Set (`Some`) or remove (`None`) one of the Bridge row's external_ids.
    fn set_bridge_external_id(&self, key: &str, value: Option<&str>) -> Result<(), OvsdbError>;
}

/// The daemon's bridge: [`ovsdb::Bridge`] plus an interface store rebuilt only when the
/// OVSDB replica changed (every TC sync reads it; at 5,000 ports a rebuild per read would
/// dominate a cold start).
pub struct LiveBridge {
    bridge: ovsdb::Bridge,
    cache: Mutex<Option<(u64, Arc<Interfaces>)>>,
}

impl LiveBridge {
    pub fn new(bridge: ovsdb::Bridge) -> LiveBridge {
        LiveBridge {
            bridge,
            cache: Mutex::new(None),
        }
    }

    pub fn bridge(&self) -> &ovsdb::Bridge {
        &self.bridge
    }
}

impl OvsBridge for LiveBridge {
    fn interfaces(&self) -> Arc<Interfaces> {
        // Read the generation first: a change racing the rebuild only causes a rebuild later.
        let generation = self.bridge.client().generation();
        let mut c = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((g, ifs)) = c.as_ref() {
            if *g == generation {
                return ifs.clone();
            }
        }
        let ifs = Arc::new(Interfaces::new(self.bridge.list_ports()));
        *c = Some((generation, ifs.clone()));
        ifs
    }

    fn create_port(&self, spec: &PortSpec) -> Result<Uuid, OvsdbError> {
        self.bridge.create_port(spec)
    }

    fn ofport(&self, name: &str) -> Result<u32, OvsdbError> {
        self.bridge.get_ofport(name)
    }

    fn delete_ports(&self, ports: &[Uuid]) -> Result<(), OvsdbError> {
        self.bridge.delete_ports(ports)
    }

    fn delete_ports_applied(&self, ports: &[Uuid], within: Duration) -> Result<(), OvsdbError> {
        self.bridge.delete_ports_applied(ports, within)
    }

    fn set_port_external_ids(
        &self,
        port: &str,
        ids: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError> {
        self.bridge.set_port_external_ids(port, ids)
    }

    fn set_interface_options(
        &self,
        name: &str,
        options: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError> {
        self.bridge.set_interface_options(name, options)
    }

    fn bridge_external_id(&self, key: &str) -> Result<Option<String>, OvsdbError> {
        self.bridge.external_id(key)
    }

    fn set_bridge_external_id(&self, key: &str, value: Option<&str>) -> Result<(), OvsdbError> {
        self.bridge.set_bridge_external_id(key, value)
    }
}

impl OvsBridge for ovsdb::Bridge {
    fn interfaces(&self) -> Arc<Interfaces> {
        Arc::new(Interfaces::new(self.list_ports()))
    }

    fn create_port(&self, spec: &PortSpec) -> Result<Uuid, OvsdbError> {
        ovsdb::Bridge::create_port(self, spec)
    }

    fn ofport(&self, name: &str) -> Result<u32, OvsdbError> {
        self.get_ofport(name)
    }

    fn delete_ports(&self, ports: &[Uuid]) -> Result<(), OvsdbError> {
        ovsdb::Bridge::delete_ports(self, ports)
    }

    fn delete_ports_applied(&self, ports: &[Uuid], within: Duration) -> Result<(), OvsdbError> {
        ovsdb::Bridge::delete_ports_applied(self, ports, within)
    }

    fn set_port_external_ids(
        &self,
        port: &str,
        ids: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError> {
        ovsdb::Bridge::set_port_external_ids(self, port, ids)
    }

    fn set_interface_options(
        &self,
        name: &str,
        options: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError> {
        ovsdb::Bridge::set_interface_options(self, name, options)
    }

    fn bridge_external_id(&self, key: &str) -> Result<Option<String>, OvsdbError> {
        self.external_id(key)
    }

    fn set_bridge_external_id(&self, key: &str, value: Option<&str>) -> Result<(), OvsdbError> {
        match value {
            Some(v) => self.set_external_id(key, v),
            None => self.remove_external_id(key),
        }
    }
}
