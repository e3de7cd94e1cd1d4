//! The fakes under the controller. `Sim` plays OVS on top of the recording `FakeBridge`:
//! an internal port gets a netdev in the `FakeLinks` kernel model (as ovs-vswitchd creates
//! its tap) and loses it when the port is deleted — or keeps it (`linger`), as a busy
//! datapath does. It can fail or "crash" (panic) at the n-th record write, before or after
//! the write lands. `FakeDatapath` is `dpctl/del-if` on it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::controller::interfaces::Interfaces;
use crate::controller::{Bridge, Datapath};
use crate::netlink::{FakeLinks, Links};
use crate::ovsdb::{OvsdbError, PortKind, PortSpec, Uuid};
use crate::testing::FakeBridge;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Crash {
    BeforeWrite,
    AfterWrite,
}

#[derive(Default)]
pub(super) struct Sim {
    pub(super) bridge: FakeBridge,
    pub(super) links: Arc<FakeLinks>,
    pub(super) internal: Mutex<BTreeSet<String>>,
    pub(super) linger: AtomicBool,
    /// Internal netdevs that outlived their port (`linger`), until `dpctl/del-if`.
    pub(super) lingering: Mutex<BTreeSet<String>>,
    /// The kernel datapath model: a system port's netdev gets `ovs-system` as its master,
    /// which goes only when the switch has applied the delete (`delete_ports_applied`) —
    /// or, with `stuck`, only through `dpctl/del-if`; with `held`, never.
    pub(super) kernel: Option<u32>,
    pub(super) stuck: AtomicBool,
    pub(super) held: AtomicBool,
    /// udev (MACAddressPolicy=) rewriting a new internal port's MAC.
    pub(super) udev_mac: Option<[u8; 6]>,
    /// udev (AlternativeNamesPolicy=) giving the renamed NIC its old name as an altname
    /// late: after the rename step, before the host port's device is made (once).
    pub(super) udev_late_altname: AtomicBool,
    /// Internal ports refused because a link had their name as an altname.
    pub(super) name_taken: Mutex<BTreeSet<String>>,
    /// Record writes (Some values) seen so far.
    pub(super) writes: AtomicUsize,
    pub(super) fail_write: Mutex<Option<usize>>,
    pub(super) crash_write: Mutex<Option<(usize, Crash)>>,
}

impl Bridge for Sim {
    fn interfaces(&self) -> Arc<Interfaces> {
        self.bridge.interfaces()
    }

    fn create_port(&self, spec: &PortSpec) -> Result<Uuid, OvsdbError> {
        if let PortKind::Internal { .. } = &spec.kind {
            if self.udev_late_altname.swap(false, Ordering::SeqCst) {
                if let Ok(up) = self
                    .links
                    .link_by_name(&crate::netlink::uplink_name(&spec.name))
                {
                    self.links.add_altname(up.index, &spec.name);
                }
            }
            // The kernel refuses a device whose name is another link's altname; OVS says so
            // in the Interface's error (ofport -1).
            let taken = self
                .links
                .links()
                .unwrap()
                .iter()
                .any(|l| l.altnames.contains(&spec.name));
            let mut refuse = self.bridge.refuse.lock().unwrap();
            let mut auto = self.name_taken.lock().unwrap();
            if taken {
                refuse.insert(
                    spec.name.clone(),
                    format!(
                        "could not add network device {} to ofproto (File exists)",
                        spec.name
                    ),
                );
                auto.insert(spec.name.clone());
            } else if auto.remove(&spec.name) {
                refuse.remove(&spec.name);
            }
        }
        let uuid = self.bridge.create_port(spec)?;
        if let (PortKind::System, Some(dp)) = (&spec.kind, self.kernel) {
            if let Ok(l) = self.links.link_by_name(&spec.name) {
                self.links.edit_link(l.index, |l| l.master = Some(dp));
            }
        }
        if let PortKind::Internal { mac } = &spec.kind {
            let refused = self.bridge.refuse.lock().unwrap().contains_key(&spec.name);
            if !refused {
                let mac = mac
                    .as_deref()
                    .and_then(crate::mac::parse)
                    .unwrap_or([2, 0, 0, 0, 0, 0xee]);
                let mac = self.udev_mac.unwrap_or(mac);
                self.links
                    .add_link(&spec.name, mac, spec.mtu_request.unwrap_or(1500), false);
                self.internal.lock().unwrap().insert(spec.name.clone());
            }
        }
        Ok(uuid)
    }

    fn ofport(&self, name: &str) -> Result<u32, OvsdbError> {
        self.bridge.ofport(name)
    }

    fn delete_ports(&self, ports: &[Uuid]) -> Result<(), OvsdbError> {
        let names = self.bridge.names_of(ports);
        self.bridge.delete_ports(ports)?;
        for n in names {
            if self.internal.lock().unwrap().remove(&n) {
                if self.linger.load(Ordering::SeqCst) {
                    self.lingering.lock().unwrap().insert(n);
                } else if let Ok(l) = self.links.link_by_name(&n) {
                    self.links.remove_link(l.index);
                }
            }
        }
        Ok(())
    }

    fn delete_ports_applied(&self, ports: &[Uuid], _: Duration) -> Result<(), OvsdbError> {
        let system: Vec<String> = self
            .bridge
            .ports
            .lock()
            .unwrap()
            .iter()
            .filter(|p| ports.contains(&p.uuid) && p.if_type.is_empty())
            .map(|p| p.name.clone())
            .collect();
        self.delete_ports(ports)?;
        if self.kernel.is_some() && !self.stuck.load(Ordering::SeqCst) {
            for n in system {
                if let Ok(l) = self.links.link_by_name(&n) {
                    self.links.edit_link(l.index, |l| l.master = None);
                }
            }
        }
        Ok(())
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
        self.bridge.bridge_external_id(key)
    }

    fn set_bridge_external_id(&self, key: &str, value: Option<&str>) -> Result<(), OvsdbError> {
        if value.is_some() {
            let n = self.writes.fetch_add(1, Ordering::SeqCst);
            if *self.fail_write.lock().unwrap() == Some(n) {
                return Err(OvsdbError::Disconnected);
            }
            let crash = *self.crash_write.lock().unwrap();
            if crash == Some((n, Crash::BeforeWrite)) {
                panic!("simulated crash before record write {n}");
            }
            self.bridge.set_bridge_external_id(key, value)?;
            if crash == Some((n, Crash::AfterWrite)) {
                panic!("simulated crash after record write {n}");
            }
            return Ok(());
        }
        self.bridge.set_bridge_external_id(key, value)
    }
}

/// `dpctl/del-if` on the `Sim`'s datapath: removes a lingering internal netdev, or
/// releases a system port's netdev from `ovs-system` (unless `held`).
pub(super) struct FakeDatapath {
    pub(super) sim: Arc<Sim>,
    pub(super) calls: Mutex<Vec<String>>,
}

impl Datapath for FakeDatapath {
    fn delete_interface(&self, name: &str) -> Result<bool, crate::unixctl::UnixctlError> {
        self.calls.lock().unwrap().push(name.to_string());
        let links = &self.sim.links;
        if self.sim.lingering.lock().unwrap().remove(name) {
            if let Ok(l) = links.link_by_name(name) {
                links.remove_link(l.index);
                return Ok(true);
            }
        }
        match links.link_by_name(name) {
            Ok(l) if l.master.is_some() && self.sim.kernel.is_some() => {
                if !self.sim.held.load(Ordering::SeqCst) {
                    links.edit_link(l.index, |l| l.master = None);
                }
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}
