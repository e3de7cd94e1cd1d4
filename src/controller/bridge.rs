//! The narrow OVSDB view controllers program through (DESIGN §4 `Bridge`), implemented by
//! [`crate::ovsdb::Bridge`] and by recording fakes in unit tests.

use std::collections::BTreeMap;

use super::interfaces::Interfaces;
use crate::ovsdb::{self, OvsdbError, PortSpec, Uuid};

pub trait OvsBridge: Send + Sync {
    /// The interface store: every port of the bridge, classified.
    fn interfaces(&self) -> Interfaces;
    /// Create a port (one transaction); its Port UUID.
    fn create_port(&self, spec: &PortSpec) -> Result<Uuid, OvsdbError>;
    /// The port's ofport, read fresh (waits for OVS to assign one; -1 is an error).
    fn ofport(&self, name: &str) -> Result<u32, OvsdbError>;
    /// Delete ports by Port UUID, one transaction.
    fn delete_ports(&self, ports: &[Uuid]) -> Result<(), OvsdbError>;
    /// Replace a Port's external_ids.
    fn set_port_external_ids(
        &self,
        port: &str,
        ids: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError>;
}

impl OvsBridge for ovsdb::Bridge {
    fn interfaces(&self) -> Interfaces {
        Interfaces::new(self.list_ports())
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

    fn set_port_external_ids(
        &self,
        port: &str,
        ids: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError> {
        ovsdb::Bridge::set_port_external_ids(self, port, ids)
    }
}
