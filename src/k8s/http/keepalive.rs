//! A ureq TCP connector whose sockets have TCP keepalive on: ureq 3.5's own `TcpConnector`
//! sets only `TCP_NODELAY` and its `TcpTransport` is not exported, so this opens the socket
//! itself (`sys::set_tcp_keepalive`) and is the plain-socket transport under rustls. Used
//! for long-lived watches that may be quiet for hours (the controlplane API), where a
//! per-read timeout would force needless resyncs and keepalive notices a dead peer.
//! Behaves as ureq's transport does where a caller could tell: the connect timeout, the
//! per-read and per-write timeouts (as `Error::Timeout`), `Agent::shutdown` interrupting a
//! blocked read, and the pool's liveness probe.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Weak};
use std::time::Duration;

use ureq::Timeout;
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, LazyBuffers, NextTimeout, Transport,
};

/// Keepalive timing: first probe after `idle`, then every `interval`, `count` probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    pub idle: Duration,
    pub interval: Duration,
    pub count: u32,
}

impl Keepalive {
    /// The longest a dead peer can go unnoticed on a quiet connection.
    pub fn detects_within(&self) -> Duration {
        self.idle + self.interval * self.count
    }
}

/// Opens TCP connections with keepalive; chain TLS after it.
#[derive(Debug)]
pub(super) struct KeepaliveConnector(pub(super) Keepalive);

impl Connector<()> for KeepaliveConnector {
    type Out = KeepaliveTransport;

    fn connect(
        &self,
        details: &ConnectionDetails,
        _chained: Option<()>,
    ) -> Result<Option<KeepaliveTransport>, ureq::Error> {
        let timeout = details.timeout.not_zero().map(|t| *t);
        let mut last = None;
        for addr in details.addrs.iter() {
            let tried = match timeout {
                Some(t) => TcpStream::connect_timeout(addr, t),
                None => TcpStream::connect(addr),
            };
            match tried {
                Ok(s) => {
                    let stream = Arc::new(s);
                    if details.config.no_delay() {
                        stream.set_nodelay(true)?;
                    }
                    crate::sys::set_tcp_keepalive(
                        &stream,
                        self.0.idle,
                        self.0.interval,
                        self.0.count,
                    )?;
                    let handle: Weak<dyn ureq::unversioned::transport::ShutdownHandle> =
                        Arc::downgrade(&stream) as Weak<_>;
                    (details.register_shutdown)(handle)?;
                    let buffers = LazyBuffers::new(
                        details.config.input_buffer_size(),
                        details.config.output_buffer_size(),
                    );
                    return Ok(Some(KeepaliveTransport { stream, buffers }));
                }
                Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                    last = Some(ureq::Error::Timeout(Timeout::Connect));
                }
                Err(e) => last = Some(e.into()),
            }
        }
        Err(last.unwrap_or_else(|| {
            ureq::Error::Io(io::Error::new(
                io::ErrorKind::NotFound,
                "no address to connect to",
            ))
        }))
    }
}

/// A connected socket and ureq's buffers for it.
pub(super) struct KeepaliveTransport {
    /// Shared (weakly) with the agent, whose `shutdown` shuts the socket down.
    stream: Arc<TcpStream>,
    buffers: LazyBuffers,
}

impl fmt::Debug for KeepaliveTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeepaliveTransport")
            .field("peer", &self.stream.peer_addr().ok())
            .finish()
    }
}

/// ureq's own check: an expired budget is a timeout before any I/O.
fn budget(t: NextTimeout) -> Result<Option<Duration>, ureq::Error> {
    if t.after.is_zero() {
        return Err(ureq::Error::Timeout(t.reason));
    }
    Ok(t.not_zero().map(|d| *d))
}

fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    )
}

impl Transport for KeepaliveTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        let t = timeout.for_write();
        self.stream.set_write_timeout(budget(t)?)?;
        let output = &self.buffers.output()[..amount];
        match (&*self.stream).write_all(output) {
            Ok(()) => Ok(()),
            Err(e) if timed_out(&e) => Err(ureq::Error::Timeout(t.reason)),
            Err(e) => Err(e.into()),
        }
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        let t = timeout.for_read();
        self.stream.set_read_timeout(budget(t)?)?;
        let input = self.buffers.input_append_buf();
        let n = loop {
            match (&*self.stream).read(input) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if timed_out(&e) => return Err(ureq::Error::Timeout(t.reason)),
                Err(e) => return Err(e.into()),
            }
        };
        self.buffers.input_appended(n);
        Ok(n > 0)
    }

    /// Still usable for a pooled request: nothing unread and not closed (ureq's probe).
    fn is_open(&mut self) -> bool {
        if self.stream.set_nonblocking(true).is_err() {
            return false;
        }
        let mut b = [0u8; 1];
        let open =
            matches!((&*self.stream).read(&mut b), Err(e) if e.kind() == io::ErrorKind::WouldBlock);
        open && self.stream.set_nonblocking(false).is_ok()
    }
}
