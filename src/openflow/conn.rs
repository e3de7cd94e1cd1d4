//! The one place OpenFlow touches a socket: a connection to `<rundir>/<bridge>.mgmt`, owned
//! by one thread (`Conn::start`), plus a helper thread that only reads and frames bytes.
//! Callers hand the owner a batch of message bodies with a reply channel
//! ([`Conn::transact`]); the owner assigns consecutive xids, encodes the batch and a
//! closing barrier into 128 KiB buffers written as they fill (one syscall per chunk, not
//! per message, and the switch starts on the first chunk while we encode the next), and
//! answers when the barrier reply arrives, with every reply and error attributed to the
//! message (by index) that caused it.
//!
//! ```text
//!   Disconnected{retry_at} ──connect, HELLO exchange ok──► Connected{generation}
//!         ▲   │ negotiation/IO error: backoff 50 ms → 1 s          │ EOF, IO error, bad bytes,
//!         │   └─────────────────────────────────────────────────┐   │ no echo reply
//!         └──────────────────────────────────────────────────────┴───┘
//! ```
//! Every (re)connect emits [`ConnEvent::Connected`] with a new generation, so the owner of
//! the flows knows to replay them. The switch's echo requests are answered; after
//! `keepalive` of silence we send our own and give up after another `keepalive`.
//! Bad input (garbage, an impossible length, an unknown message type, a version other
//! than the negotiated one) closes the connection with a logged [`OfError::Protocol`].

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded};

use super::OfError;
use super::consts::Version;
use super::msg::{Body, ErrorMsg, Msg};

/// The keepalive on a bridge's management socket. ovs-vswitchd probes that socket itself
/// after 60 s without a message from us (`bridge_ofproto_controller_for_mgmt`: a fixed
/// `probe_interval` of 60), so ours comes a little later: an idle connection exchanges only
/// the switch's echo, once a minute, instead of ours every 5 s. A switch that hangs (its
/// socket stays open) is noticed after twice this, or when a request times out first.
pub const MGMT_KEEPALIVE: Duration = Duration::from_secs(65);

/// How a connection behaves.
#[derive(Clone, Debug)]
pub struct ConnOptions {
    /// The only version we speak on this connection (OF1.5 for flows, OF1.0 for no-flood).
    pub version: Version,
    /// Silence after which we send an echo request; no answer for as long again = dead.
    pub keepalive: Duration,
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// A write that makes no progress for this long means the switch is stuck.
    pub write_timeout: Duration,
    /// Thread name (the reader thread gets `-rx` appended).
    pub name: String,
}

impl ConnOptions {
    pub fn new(version: Version, name: &str) -> ConnOptions {
        ConnOptions {
            version,
            keepalive: MGMT_KEEPALIVE,
            backoff_min: Duration::from_millis(50),
            backoff_max: Duration::from_secs(1),
            write_timeout: Duration::from_secs(30),
            name: name.to_string(),
        }
    }
}

/// Connection state changes, for whoever owns what must be re-installed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnEvent {
    Connected { generation: u64 },
    Disconnected { generation: u64, error: OfError },
}

/// The answer to one batch: replies and errors with the index of the request they answer
/// (the closing barrier's reply is not included).
#[derive(Clone, Debug, Default)]
pub struct Reply {
    pub replies: Vec<(usize, Msg)>,
    pub errors: Vec<(usize, ErrorMsg)>,
}

/// The bodies of one [`Conn::transact`]: a list, or an iterator the connection's thread
/// encodes as it writes, so a 100,000-flow bundle never exists as 100,000 boxed messages
/// besides the flow mods it is made of (docs/design.md#benchmarks: a fifth of `openflow_peak_rss`).
pub struct Batch {
    len: usize,
    bodies: Box<dyn Iterator<Item = Body> + Send>,
}

impl Batch {
    /// `len` must be the number of bodies `bodies` yields: the batch's xids are assigned
    /// up front. If it yields fewer, the rest are not sent; more are not taken.
    pub fn streamed(len: usize, bodies: impl Iterator<Item = Body> + Send + 'static) -> Batch {
        Batch {
            len,
            bodies: Box::new(bodies),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl From<Vec<Body>> for Batch {
    fn from(v: Vec<Body>) -> Batch {
        Batch::streamed(v.len(), v.into_iter())
    }
}

enum Cmd {
    Transact {
        bodies: Batch,
        reply: Sender<Result<Reply, OfError>>,
    },
}

#[derive(Default)]
struct Status {
    connected: bool,
    generation: u64,
}

/// How many messages the switch sent unasked (a flow monitor's updates) may wait to be
/// read; past that they are dropped and counted ([`Conn::unsolicited_lost`]).
const UNSOLICITED_QUEUE: usize = 4096;

/// Handle to a connection's owner thread. Dropping it stops and joins the thread.
pub struct Conn {
    cmds: Option<Sender<Cmd>>,
    events: Receiver<ConnEvent>,
    unsolicited: Receiver<Msg>,
    lost: Arc<std::sync::atomic::AtomicU64>,
    status: Arc<(Mutex<Status>, Condvar)>,
    thread: Option<JoinHandle<()>>,
    socket: String,
}

impl Conn {
    /// Start the owner thread; it connects in the background and keeps reconnecting.
    pub fn start(path: &Path, opts: ConnOptions) -> Result<Conn, OfError> {
        let (cmd_tx, cmd_rx) = bounded(64);
        let (ev_tx, ev_rx) = bounded(64);
        let (un_tx, un_rx) = bounded(UNSOLICITED_QUEUE);
        let lost = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let status = Arc::new((Mutex::new(Status::default()), Condvar::new()));
        let socket = path.display().to_string();
        let owner = SocketThread::new(
            path,
            opts.clone(),
            Channels {
                cmds: cmd_rx,
                events: ev_tx,
                unsolicited: un_tx,
                lost: lost.clone(),
                status: status.clone(),
            },
        );
        let thread = std::thread::Builder::new()
            .name(opts.name.clone())
            .spawn(move || owner.run())
            .map_err(|e| OfError::Io {
                socket: socket.clone(),
                error: format!("cannot spawn thread: {e}"),
            })?;
        Ok(Conn {
            cmds: Some(cmd_tx),
            events: ev_rx,
            unsolicited: un_rx,
            lost,
            status,
            thread: Some(thread),
            socket,
        })
    }

    pub fn socket(&self) -> &str {
        &self.socket
    }

    /// Connection events (connected with a new generation, disconnected with the reason).
    pub fn events(&self) -> &Receiver<ConnEvent> {
        &self.events
    }

    /// Messages the switch sent that answer no request of ours (a flow monitor's updates;
    /// echo requests and errors are handled here).
    pub fn unsolicited(&self) -> &Receiver<Msg> {
        &self.unsolicited
    }

    /// Unasked messages dropped because nobody read them in time: whoever reads
    /// [`Conn::unsolicited`] has missed something when this grows.
    pub fn unsolicited_lost(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }

    /// Whether the connection is up, and its generation (bumped by every reconnect).
    pub fn state(&self) -> (bool, u64) {
        let s = lock(&self.status.0);
        (s.connected, s.generation)
    }

    /// Wait until connected (or `timeout`); returns the generation.
    pub fn wait_connected(&self, timeout: Duration) -> Result<u64, OfError> {
        let end = Instant::now() + timeout;
        let (m, cv) = &*self.status;
        let mut s = lock(m);
        while !s.connected {
            let now = Instant::now();
            if now >= end {
                return Err(OfError::Timeout {
                    what: format!("connection to {}", self.socket),
                });
            }
            s = match cv.wait_timeout(s, end - now) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        Ok(s.generation)
    }

    /// Send `bodies` (then a barrier) in one write and wait for the barrier reply.
    pub fn transact(&self, bodies: impl Into<Batch>, timeout: Duration) -> Result<Reply, OfError> {
        let bodies = bodies.into();
        let (tx, rx) = bounded(1);
        let cmds = self.cmds.as_ref().ok_or(OfError::Closed)?;
        cmds.send_timeout(Cmd::Transact { bodies, reply: tx }, timeout)
            .map_err(|_| OfError::Closed)?;
        match rx.recv_timeout(timeout) {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) => Err(OfError::Timeout {
                what: format!("barrier reply from {}", self.socket),
            }),
            Err(RecvTimeoutError::Disconnected) => Err(OfError::Closed),
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // Closing the command channel is the stop signal.
        self.cmds = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

mod owner;

use owner::{Channels, SocketThread};
