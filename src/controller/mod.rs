//! The reconcile core. A watch or switch event becomes work [`Key`]s ([`route`], pure);
//! the workers ([`worker`]) take keys off one queue ([`queue`]) and run the key's
//! controller, whose sync is snapshot → plan (pure data) → apply through the traits
//! ([`traits`]) → record what was applied. Controllers: [`trafficcontrol`], [`externalnode`]
//! and [`l2`]. They reach OVSDB, OpenFlow, the kernel and the network manager only through
//! the traits; [`live`] adapts the real ones.

pub mod deferred;
pub mod externalnode;
pub mod interfaces;
pub mod l2;
pub mod live;
pub mod policy;
pub mod queue;
pub mod route;
pub mod trafficcontrol;
pub mod traits;
pub mod worker;

pub use live::{AbsentBridge, AbsentFlows, LiveBridge, VswitchdDatapath};
pub use traits::{Bridge, Datapath, Flows, HostNetwork, NoHostNetwork};

/// A unit of work: one TrafficControl, the L2 forwarding flows of the Pod ports, this
/// node's ExternalNode, or the bridge itself (created again when OVS lost it).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    Tc(String),
    L2,
    En,
    Bridge,
}

impl Key {
    /// The key's kind, as metrics and logs label it.
    pub fn kind(&self) -> &'static str {
        match self {
            Key::Tc(_) => "tc",
            Key::L2 => "l2",
            Key::En => "en",
            Key::Bridge => "bridge",
        }
    }
}
