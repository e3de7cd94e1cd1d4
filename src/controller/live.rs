//! The production adapters of the controllers' traits ([`super::traits`]): OVSDB through
//! [`LiveBridge`], OpenFlow through [`OfFlows`], ovs-vswitchd's control socket through
//! [`VswitchdDatapath`], the host's network manager through [`HostNet`]; the protocols live in their
//! own modules. All but `LiveBridge` only delegate. `LiveBridge` keeps the interface store
//! and rebuilds it only when the OVSDB replica changed, and (built with `keeping`, as the
//! daemon does) creates the bridge again when OVS lost it. In the daemon the controllers
//! get `OfFlows` wrapped in `DeferredFlows` (`super::deferred`). Also here, for `tether
//! reset` on a bridge that does not exist: [`AbsentBridge`] and [`AbsentFlows`], which
//! report nothing and refuse to create anything.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::interfaces::Interfaces;
use super::traits::{Bridge, Datapath, Flows, HostNetwork};
use crate::hostnet::{HostNet, HostNetError};
use crate::openflow::{Flow, FlowChange, OfError, OfFlows, Owner};
use crate::ovsdb::{BridgeDb, OvsdbError, PortSpec, Uuid};

/// The daemon's bridge: [`BridgeDb`] plus an interface store rebuilt only when the OVSDB
/// replica changed (every TC sync reads it; at 5,000 ports a rebuild per read would
/// dominate a cold start).
pub struct LiveBridge {
    db: BridgeDb,
    cache: Mutex<Option<(u64, Arc<Interfaces>)>>,
    /// The datapath type to create the bridge again with (`keeping`); `None`: never.
    datapath_type: Option<String>,
}

impl LiveBridge {
    pub fn new(db: BridgeDb) -> LiveBridge {
        LiveBridge {
            db,
            cache: Mutex::new(None),
            datapath_type: None,
        }
    }

    /// The daemon's bridge: created again with `datapath_type` when OVS loses it.
    pub fn keeping(db: BridgeDb, datapath_type: &str) -> LiveBridge {
        LiveBridge {
            datapath_type: Some(datapath_type.to_string()),
            ..LiveBridge::new(db)
        }
    }

    pub fn db(&self) -> &BridgeDb {
        &self.db
    }
}

impl Bridge for LiveBridge {
    fn interfaces(&self) -> Arc<Interfaces> {
        // Read the generation first: a change racing the rebuild only causes a rebuild later.
        let generation = self.db.client().generation();
        let mut c = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((g, ifs)) = c.as_ref() {
            if *g == generation {
                return ifs.clone();
            }
        }
        // Let go of the stale store first: at 5,000 ports two of them at once were a
        // fifth of the cold start's peak heap.
        *c = None;
        let ifs = Arc::new(Interfaces::new(self.db.list_ports()));
        *c = Some((generation, ifs.clone()));
        ifs
    }

    fn create_port(&self, spec: &PortSpec) -> Result<Uuid, OvsdbError> {
        self.db.create_port(spec)
    }

    fn create_ports(&self, specs: &[PortSpec]) -> Result<Vec<Uuid>, OvsdbError> {
        self.db.create_ports(specs, false)
    }

    fn ofport(&self, name: &str) -> Result<u32, OvsdbError> {
        self.db.get_ofport(name)
    }

    fn ofports(&self, names: &[String]) -> Result<Vec<u32>, OvsdbError> {
        self.db.get_ofports(names)
    }

    fn delete_ports(&self, ports: &[Uuid]) -> Result<(), OvsdbError> {
        self.db.delete_ports(ports)
    }

    fn delete_ports_applied(&self, ports: &[Uuid], within: Duration) -> Result<(), OvsdbError> {
        self.db.delete_ports_applied(ports, within)
    }

    fn set_port_external_ids(
        &self,
        port: &str,
        ids: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError> {
        self.db.set_port_external_ids(port, ids)
    }

    fn set_interface_options(
        &self,
        name: &str,
        options: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError> {
        self.db.set_interface_options(name, options)
    }

    fn bridge_external_id(&self, key: &str) -> Result<Option<String>, OvsdbError> {
        self.db.external_id(key)
    }

    fn set_bridge_external_id(&self, key: &str, value: Option<&str>) -> Result<(), OvsdbError> {
        self.db.set_bridge_external_id(key, value)
    }

    fn ensure_bridge(&self) -> Result<bool, OvsdbError> {
        match &self.datapath_type {
            Some(t) => self.db.ensure_again(t),
            None => Ok(false),
        }
    }
}

impl Flows for OfFlows {
    fn apply(&self, owner: Owner, flows: Vec<Flow>) -> Result<(), OfError> {
        OfFlows::apply(self, owner, flows)
    }
    fn apply_many(&self, sets: Vec<(Owner, Vec<Flow>)>) -> Vec<(Owner, OfError)> {
        OfFlows::apply_many(self, sets)
    }
    fn change_many(&self, changes: Vec<(Owner, FlowChange)>) -> Vec<(Owner, OfError)> {
        OfFlows::change_many(self, changes)
    }
    fn remove(&self, owner: Owner) -> Result<(), OfError> {
        OfFlows::remove(self, owner)
    }
    fn set_no_flood(&self, ofport: u32, on: bool) -> Result<(), OfError> {
        OfFlows::set_no_flood(self, ofport, on)
    }
    fn set_no_flood_many(&self, ofports: &[u32], on: bool) -> Result<(), OfError> {
        OfFlows::set_no_flood_many(self, ofports, on)
    }
    fn delete_round(&self, round: u16) -> Result<(), OfError> {
        OfFlows::delete_round(self, round)
    }
    fn replace_round(
        &self,
        sets: Vec<(Owner, Vec<Flow>)>,
        round: u16,
    ) -> (Vec<(Owner, OfError)>, Result<(), OfError>) {
        OfFlows::replace_round(self, sets, round)
    }
}

/// [`Datapath`] through ovs-vswitchd's control socket (`dpctl/show`, `dpctl/del-if`).
pub struct VswitchdDatapath {
    pub rundir: PathBuf,
    pub datapath: String,
}

impl VswitchdDatapath {
    /// ovs-vswitchd's datapath under `rundir` for bridges of `datapath_type`.
    pub fn new(rundir: &std::path::Path, datapath_type: &str) -> VswitchdDatapath {
        VswitchdDatapath {
            rundir: rundir.to_path_buf(),
            datapath: crate::unixctl::datapath_name(datapath_type).to_string(),
        }
    }
}

impl Datapath for VswitchdDatapath {
    fn delete_interface(&self, name: &str) -> Result<bool, crate::unixctl::UnixctlError> {
        let ctl = crate::unixctl::Unixctl::for_daemon(&self.rundir, "ovs-vswitchd")?;
        crate::unixctl::delete_dp_interface(&ctl, &self.datapath, name)
    }
}

impl HostNetwork for HostNet {
    fn before_takeover(
        &self,
        nic: &str,
        ifindex: u32,
        uplink: &str,
    ) -> Result<Option<String>, HostNetError> {
        HostNet::before_takeover(self, nic, ifindex, uplink)
    }
    fn attached(&self, nic: &str, uplink: &str) -> Result<(), HostNetError> {
        HostNet::attached(self, nic, uplink)
    }
    fn released(&self, nic: &str) -> Result<(), HostNetError> {
        HostNet::released(self, nic)
    }
}

/// A bridge that does not exist (`tether reset` after `ovs-vsctl del-br`, or with an OVS
/// database that lost it): no ports, no external_ids; creating anything is refused. What
/// can still be done without it — giving a NIC back from the state directory's held
/// configuration — runs against this.
pub struct AbsentBridge {
    pub name: String,
}

impl AbsentBridge {
    fn gone(&self, op: &str) -> OvsdbError {
        OvsdbError::Protocol(format!("{op}: bridge {} does not exist", self.name))
    }
}

impl Bridge for AbsentBridge {
    fn interfaces(&self) -> Arc<Interfaces> {
        Arc::new(Interfaces::new(Vec::new()))
    }
    fn create_port(&self, spec: &PortSpec) -> Result<Uuid, OvsdbError> {
        Err(self.gone(&format!("create port {}", spec.name)))
    }
    fn ofport(&self, name: &str) -> Result<u32, OvsdbError> {
        Err(self.gone(&format!("ofport of {name}")))
    }
    fn delete_ports(&self, ports: &[Uuid]) -> Result<(), OvsdbError> {
        if ports.is_empty() {
            return Ok(());
        }
        Err(self.gone("delete ports"))
    }
    fn set_port_external_ids(
        &self,
        port: &str,
        _: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError> {
        Err(self.gone(&format!("set external_ids of {port}")))
    }
    fn set_interface_options(
        &self,
        name: &str,
        _: &BTreeMap<String, String>,
    ) -> Result<(), OvsdbError> {
        Err(self.gone(&format!("set options of {name}")))
    }
    fn bridge_external_id(&self, _: &str) -> Result<Option<String>, OvsdbError> {
        Ok(None)
    }
    fn set_bridge_external_id(&self, key: &str, value: Option<&str>) -> Result<(), OvsdbError> {
        // Removing a key of a bridge that is gone is done already.
        match value {
            None => Ok(()),
            Some(_) => Err(self.gone(&format!("set external_ids:{key}"))),
        }
    }
}

/// Flows on a bridge that does not exist ([`AbsentBridge`]): there are none to remove;
/// installing any is refused.
pub struct AbsentFlows {
    pub bridge: String,
}

impl Flows for AbsentFlows {
    fn apply(&self, _: Owner, _: Vec<Flow>) -> Result<(), OfError> {
        Err(OfError::Disconnected {
            socket: format!(
                "{}.mgmt (bridge {} does not exist)",
                self.bridge, self.bridge
            ),
        })
    }
    fn remove(&self, _: Owner) -> Result<(), OfError> {
        Ok(())
    }
    fn set_no_flood(&self, _: u32, _: bool) -> Result<(), OfError> {
        Ok(())
    }
    fn delete_round(&self, _: u16) -> Result<(), OfError> {
        Ok(())
    }
}
