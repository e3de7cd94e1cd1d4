//! NetworkPolicy in the daemon: with an Antrea kubeconfig (`antreaKubeconfig`), the three
//! controlplane watches (`controlplane::Source`), the policy controller's thread
//! (`controller::policy`), fed the ExternalNode's ports, and the Reject answers' thread
//! (`controller::policy::packetin`) on its own OpenFlow connection ([`OfPackets`]). The
//! previous run's policy flows are carried into this run's round first, so restarting
//! tether never leaves the VM without its policy (docs/networkpolicy.md#restarts).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Sender, bounded};

use super::{DaemonError, Ovs};
use crate::config::Config;
use crate::controller::Flows;
use crate::controller::externalnode::EnController;
use crate::controller::policy::packetin::{Answerer, BURST, Counts, PacketIo, RATE};
use crate::controller::policy::report::StatusSink;
use crate::controller::policy::{PolicyController, carry_over};
use crate::controlplane::{Kind, Source};
use crate::heartbeat::Heartbeats;
use crate::openflow::conn::{Conn, ConnOptions};
use crate::openflow::consts::Version;
use crate::openflow::flow::{ROUND_MASK, tether_cookie};
use crate::openflow::msg::{Body, SwitchConfig};
use crate::openflow::packet::{NXPIF_NXT_PACKET_IN2, PacketIn2, PacketOut, set_packet_in_format};
use crate::openflow::{Category, Owner};
use crate::pipeline::policy::VmPorts;
use crate::pipeline::table;

/// A sync may take this long before the watchdog calls the thread stuck.
const DEADLINE: Duration = Duration::from_secs(120);
/// One batch of packet-ins answered: a round trip to the switch at most.
const PACKETIN_DEADLINE: Duration = Duration::from_secs(60);
/// The packet-in connection's requests (asking for packet-ins, a batch of packet-outs).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The running policy parts.
pub(crate) struct Policy {
    pub controller: Arc<PolicyController>,
    pub source: Source,
    pub heartbeats: Arc<Heartbeats>,
    /// What became of the Reject packet-ins (logged at the stop; `tether status` does
    /// not show them yet).
    pub rejects: Arc<Mutex<Counts>>,
    thread: JoinHandle<()>,
    stop: Sender<()>,
    packetin: JoinHandle<()>,
    packetin_stop: Sender<()>,
}

impl Policy {
    pub fn stop(self) {
        drop(self.stop);
        drop(self.packetin_stop);
        let _ = self.thread.join();
        let _ = self.packetin.join();
        let c = self.rejects.lock().map(|c| c.clone()).unwrap_or_default();
        log::info!(
            "networkpolicy packet-ins: rejects={} tcp_resets={} icmp={} icmpv6={} rate_limited={} not_answerable={} no_ports={} send_errors={} logged={} log_rate_limited={} log_unknown={}",
            c.rejects,
            c.tcp_resets,
            c.icmp,
            c.icmpv6,
            c.rate_limited,
            c.not_answerable,
            c.no_ports,
            c.send_errors,
            c.logged,
            c.log_rate_limited,
            c.log_unknown
        );
        self.source.stop();
    }
}

/// Start the source and the controller, if NetworkPolicy is configured.
pub(crate) fn start(
    cfg: &Config,
    ovs: &Ovs,
    flows: &Arc<dyn Flows>,
    en: &Arc<EnController>,
) -> Result<Option<Policy>, DaemonError> {
    if cfg.antrea_kubeconfig.is_none() {
        return Ok(None);
    }
    let carried = carry(ovs, flows);
    let (tx, rx) = bounded(64);
    let source = crate::wiring::start_controlplane_source(cfg, tx)
        .map_err(|e| DaemonError::Setup(format!("controlplane: {e}")))?
        .ok_or_else(|| DaemonError::Setup("controlplane: no kubeconfig".into()))?;
    let sink: Option<Arc<dyn StatusSink>> = match crate::wiring::controlplane_client(cfg) {
        Ok(c) => Some(Arc::new(c)),
        Err(e) => {
            log::warn!("networkpolicy: cannot build the status client, not reporting: {e}");
            None
        }
    };
    let en = en.clone();
    let ports = Arc::new(move || {
        let st = en.status();
        match (st.step.as_str(), st.host_ofport, st.uplink_ofport) {
            ("attached", Some(host), Some(uplink)) if st.cut_off.is_none() => {
                Some(VmPorts { host, uplink })
            }
            _ => None,
        }
    });
    let p = ports.clone();
    let controller = Arc::new(PolicyController::new(
        flows.clone(),
        source.state().clone(),
        Box::new(move || p()),
        sink,
        crate::wiring::controlplane_node_key(cfg),
        carried,
    ));
    let heartbeats = Arc::new(Heartbeats::default());
    let pulse = heartbeats.register("np-controller", DEADLINE, Instant::now());
    let (stop_tx, stop_rx) = bounded::<()>(0);
    let c = controller.clone();
    let status = source.status_handle();
    let thread = std::thread::Builder::new()
        .name("np-controller".into())
        .spawn(move || {
            let resyncs = || {
                status
                    .lock()
                    .map(|m| m.get(&Kind::NetworkPolicy).map_or(0, |w| w.reconnects))
                    .unwrap_or(0)
            };
            c.run(&rx, &resyncs, &stop_rx, &pulse);
        })
        .map_err(|e| DaemonError::Setup(format!("thread np-controller: {e}")))?;
    let c = controller.clone();
    let answerer = Answerer::new(
        Box::new(move || ports()),
        Box::new(move |id| c.logged_rule(id)),
        RATE,
        BURST,
        Instant::now(),
    );
    let rejects = answerer.counts();
    let mut io = OfPackets {
        conn: Conn::start(&ovs.mgmt, ConnOptions::new(Version::OF15, "np-packetin-of"))
            .map_err(|e| DaemonError::Setup(format!("openflow for packet-ins: {e}")))?,
        asked: None,
    };
    let pulse = heartbeats.register("np-packetin", PACKETIN_DEADLINE, Instant::now());
    let (packetin_stop, stop_rx) = bounded::<()>(0);
    let packetin = std::thread::Builder::new()
        .name("np-packetin".into())
        .spawn(move || answerer.run(&mut io, &stop_rx, &pulse))
        .map_err(|e| DaemonError::Setup(format!("thread np-packetin: {e}")))?;
    Ok(Some(Policy {
        controller,
        source,
        heartbeats,
        rejects,
        thread,
        stop: stop_tx,
        packetin,
        packetin_stop,
    }))
}

/// The Reject answers' switch: a connection of their own to the bridge's management
/// socket, so a packet-in never waits behind a bundle. OVS sends a service connection no
/// packet-in until it has set a non-zero `miss_send_len` (`ofconn_receives_async_msg`,
/// `ofproto/connmgr.c`), and a new connection starts with the defaults again: so after
/// every (re)connect, `OFPT_SET_CONFIG` (all of the packet) and
/// `NXT_SET_PACKET_IN_FORMAT` (`NXT_PACKET_IN2`, for the userdata).
struct OfPackets {
    conn: Conn,
    /// The connection generation packet-ins were asked for on.
    asked: Option<u64>,
}

impl PacketIo for OfPackets {
    fn recv(&mut self, timeout: Duration) -> Result<Option<PacketIn2>, String> {
        let (up, generation) = self.conn.state();
        if !up {
            // Reconnecting by itself; nothing to read until then.
            let _ = self.conn.wait_connected(timeout);
            return Ok(None);
        }
        if self.asked != Some(generation) {
            let ask = vec![
                set_packet_in_format(NXPIF_NXT_PACKET_IN2),
                Body::SetConfig(SwitchConfig {
                    flags: 0,
                    miss_send_len: u16::MAX,
                }),
            ];
            let r = self
                .conn
                .transact(ask, REQUEST_TIMEOUT)
                .map_err(|e| format!("asking for packet-ins: {e}"))?;
            if let Some((i, e)) = r.errors.first() {
                return Err(format!("asking for packet-ins: message {i}: {}", e.name()));
            }
            log::info!(
                "networkpolicy reject: receiving packet-ins socket={} connection={generation}",
                self.conn.socket()
            );
            self.asked = Some(generation);
        }
        match self.conn.unsolicited().recv_timeout(timeout) {
            Ok(m) => PacketIn2::from_body(&m.body).map_err(|e| format!("bad packet-in: {e}")),
            Err(_) => Ok(None),
        }
    }

    fn send(&mut self, outs: Vec<PacketOut>) -> Result<(), String> {
        let bodies = outs
            .iter()
            .map(PacketOut::to_body)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        let r = self
            .conn
            .transact(bodies, REQUEST_TIMEOUT)
            .map_err(|e| e.to_string())?;
        match r.errors.first() {
            Some((i, e)) => Err(format!(
                "{} of {} refused, first: message {i}: {}",
                r.errors.len(),
                outs.len(),
                e.name()
            )),
            None => Ok(()),
        }
    }
}

/// Put the previous round's policy flows into this run's round (through the deferred
/// flows, so they go out in the bundle that deletes the old round). Only when the previous
/// round is tether's own pipeline (its Output base flow in table 140): Antrea's agent's
/// policy flows live in other tables.
fn carry(ovs: &Ovs, flows: &Arc<dyn Flows>) -> BTreeSet<Owner> {
    let Some(prev) = ovs.replacing() else {
        return BTreeSet::new();
    };
    let descs = match ovs.of.dump(u64::from(prev) << 48, ROUND_MASK) {
        Ok(d) => d,
        Err(e) => {
            log::warn!("networkpolicy: cannot read round {prev}'s flows to keep them: {e}");
            return BTreeSet::new();
        }
    };
    let tethers = descs.iter().any(|d| {
        d.table_id == table::OUTPUT
            && tether_cookie(d.cookie).is_some_and(|(_, c, o)| c == Category::DEFAULT && o == 0)
    });
    if !tethers {
        return BTreeSet::new();
    }
    let carried = carry_over(descs);
    let n: usize = carried.values().map(Vec::len).sum();
    let mut owners = BTreeSet::new();
    for (owner, fl) in carried {
        match flows.apply(owner, fl) {
            Ok(()) => {
                owners.insert(owner);
            }
            Err(e) => log::warn!("networkpolicy: cannot keep {owner}'s flows: {e}"),
        }
    }
    if n > 0 {
        log::info!(
            "networkpolicy: keeping round {prev}'s {n} policy flows ({} owners) until the controlplane has synced",
            owners.len()
        );
    }
    owners
}

/// The bridge's `fail_mode`: with NetworkPolicy on `secure`, so that after an
/// ovs-vswitchd restart its table stays empty (dropping) until tether has put its flows
/// back, where standalone installs a NORMAL flow that forwards everything around the
/// policy until then (measured by the e2e tests). Without NetworkPolicy `standalone`: with
/// tether down and OVS restarted the VM stays reachable. A change of mode makes OVS flush
/// the bridge's flows: it happens once, at the start that turns NetworkPolicy on or off,
/// before this run installs anything (connectivity waits for the first full sync then;
/// policy never has a gap).
pub(crate) fn fail_mode(cfg: &Config) -> &'static str {
    if cfg.antrea_kubeconfig.is_some() {
        crate::ovsdb::bridgedb::SECURE
    } else {
        crate::ovsdb::bridgedb::STANDALONE
    }
}
