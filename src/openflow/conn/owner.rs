//! The owner thread of one OpenFlow connection ([`super::Conn`]): connecting and the HELLO
//! exchange, encoding each batch with its closing barrier into 128 KiB writes, framing what
//! the switch sends (on a helper thread that only reads) and attributing every reply and
//! error to the message that caused it, echo keepalive, reconnecting with backoff. The
//! state diagram is in the parent's docs.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded, select};

use super::super::consts::{MsgType, MsgType10, Version};
use super::super::liveness::{Backoff, Keepalive, KeepaliveAction};
use super::super::msg::{Body, HEADER_LEN, Hello, Msg};
use super::super::{OfError, WireError};
use super::{Batch, Cmd, ConnEvent, ConnOptions, Reply, Status, lock};

/// Reads whole messages out of a byte stream, keeping partial ones across read timeouts.
struct FrameReader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

enum ReadError {
    Wire(WireError),
    Io(String),
}

/// How long the HELLO read, and a reader blocked on a full channel, wait before looking
/// again (at the deadline, at the stop flag).
const READ_TICK: Duration = Duration::from_millis(200);
/// Writes go out in pieces this big, so replies are drained while a big batch is sent.
const WRITE_CHUNK: usize = 128 * 1024;

impl FrameReader {
    fn new() -> FrameReader {
        FrameReader {
            buf: vec![0; 256 * 1024],
            start: 0,
            end: 0,
        }
    }

    fn take_frame(&mut self) -> Result<Option<Msg>, ReadError> {
        let avail = self.end - self.start;
        if avail < HEADER_LEN {
            return Ok(None);
        }
        let mut head = [0u8; HEADER_LEN];
        head.copy_from_slice(&self.buf[self.start..self.start + HEADER_LEN]);
        let len = Msg::frame_len(&head).map_err(ReadError::Wire)?;
        if avail < len {
            return Ok(None);
        }
        let msg = Msg::decode(&self.buf[self.start..self.start + len]).map_err(ReadError::Wire)?;
        self.start += len;
        Ok(Some(msg))
    }

    /// The next message, or None when a read timed out with no complete message yet.
    fn poll(&mut self, stream: &mut UnixStream) -> Result<Option<Msg>, ReadError> {
        loop {
            if let Some(m) = self.take_frame()? {
                return Ok(Some(m));
            }
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            match stream.read(&mut self.buf[self.end..]) {
                Ok(0) => return Err(ReadError::Io("end of stream".into())),
                Ok(n) => self.end += n,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(None);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ReadError::Io(e.to_string())),
            }
        }
    }
}

enum Incoming {
    Msg(Msg),
    Closed(OfError),
}

/// An open connection as the owner thread holds it.
struct Link {
    stream: UnixStream,
    incoming: Receiver<Incoming>,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<()>>,
    keepalive: Keepalive,
    pending: Vec<Pending>,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

/// A batch waiting for its barrier reply. Its xids are `first..=barrier`, consecutive.
struct Pending {
    first: u32,
    barrier: u32,
    reply: Reply,
    /// A message of the batch could not be encoded; it and the rest were not sent.
    encode_error: Option<WireError>,
    tx: Sender<Result<Reply, OfError>>,
}

impl Pending {
    fn index(&self, xid: u32) -> Option<usize> {
        let i = xid.wrapping_sub(self.first);
        if i <= self.barrier.wrapping_sub(self.first) {
            usize::try_from(i).ok()
        } else {
            None
        }
    }
}

enum Served {
    Stop,
    Lost(OfError),
}

pub(super) struct SocketThread {
    path: PathBuf,
    socket: String,
    opts: ConnOptions,
    cmds: Receiver<Cmd>,
    events: Sender<ConnEvent>,
    unsolicited: Sender<Msg>,
    lost: Arc<std::sync::atomic::AtomicU64>,
    status: Arc<(Mutex<Status>, Condvar)>,
    generation: u64,
    next_xid: u32,
    last_error: Option<OfError>,
    logged_error: String,
    backoff: Backoff,
}

/// What the owner thread shares with its [`super::Conn`] handle.
pub(super) struct Channels {
    pub(super) cmds: Receiver<Cmd>,
    pub(super) events: Sender<ConnEvent>,
    pub(super) unsolicited: Sender<Msg>,
    pub(super) lost: Arc<std::sync::atomic::AtomicU64>,
    pub(super) status: Arc<(Mutex<Status>, Condvar)>,
}

impl SocketThread {
    pub(super) fn new(path: &Path, opts: ConnOptions, ch: Channels) -> SocketThread {
        SocketThread {
            path: path.to_path_buf(),
            socket: path.display().to_string(),
            backoff: Backoff::new(opts.backoff_min, opts.backoff_max),
            opts,
            cmds: ch.cmds,
            events: ch.events,
            unsolicited: ch.unsolicited,
            lost: ch.lost,
            status: ch.status,
            generation: 0,
            next_xid: 1,
            last_error: None,
            logged_error: String::new(),
        }
    }

    pub(super) fn run(mut self) {
        let mut retry_at = Instant::now();
        loop {
            let now = Instant::now();
            if now >= retry_at {
                match self.connect() {
                    Ok(link) => {
                        self.backoff.reset();
                        self.last_error = None;
                        self.logged_error.clear();
                        self.generation += 1;
                        log::info!(
                            "openflow connected socket={} version={} generation={}",
                            self.socket,
                            self.opts.version,
                            self.generation
                        );
                        self.set_status(true);
                        self.emit(ConnEvent::Connected {
                            generation: self.generation,
                        });
                        match self.serve(link) {
                            Served::Stop => return,
                            Served::Lost(e) => {
                                log::warn!(
                                    "openflow connection lost socket={} err={e}",
                                    self.socket
                                );
                                self.set_status(false);
                                self.emit(ConnEvent::Disconnected {
                                    generation: self.generation,
                                    error: e.clone(),
                                });
                                self.last_error = Some(e);
                            }
                        }
                    }
                    Err(e) => {
                        // Retries repeat the same failure; log it once until it changes.
                        let text = e.to_string();
                        if text != self.logged_error {
                            log::warn!("openflow connect failed socket={} err={text}", self.socket);
                            self.logged_error = text;
                        }
                        self.last_error = Some(e);
                    }
                }
                retry_at = Instant::now() + self.backoff.next_delay();
                continue;
            }
            match self.cmds.recv_timeout(retry_at - now) {
                Ok(Cmd::Transact { reply, .. }) => {
                    let _ = reply.send(Err(self.down_error()));
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    /// What a caller hears while we are disconnected: a negotiation failure is worth
    /// naming (it needs the admin), anything else is "not connected, retrying".
    fn down_error(&self) -> OfError {
        match &self.last_error {
            Some(e @ OfError::Negotiation { .. }) => e.clone(),
            _ => OfError::Disconnected {
                socket: self.socket.clone(),
            },
        }
    }

    fn set_status(&self, connected: bool) {
        let (m, cv) = &*self.status;
        let mut s = lock(m);
        s.connected = connected;
        s.generation = self.generation;
        cv.notify_all();
    }

    fn emit(&self, ev: ConnEvent) {
        if self.events.try_send(ev).is_err() {
            log::debug!(
                "openflow event dropped socket={} (nobody reading)",
                self.socket
            );
        }
    }

    fn xid(&mut self) -> u32 {
        let x = self.next_xid;
        // xid 0 is legal but easy to confuse with "unset" in captures; skip it.
        self.next_xid = self.next_xid.wrapping_add(1).max(1);
        x
    }

    fn io_err(&self, what: &str, e: impl std::fmt::Display) -> OfError {
        OfError::Io {
            socket: self.socket.clone(),
            error: format!("{what}: {e}"),
        }
    }

    fn protocol_err(&self, e: impl std::fmt::Display) -> OfError {
        OfError::Protocol {
            socket: self.socket.clone(),
            error: e.to_string(),
        }
    }

    /// Connect and exchange HELLOs; the switch must allow our version.
    fn connect(&mut self) -> Result<Link, OfError> {
        // Long on purpose: The connection handshake in protocol order (connect, HELLO both
        // ways, version check, FEATURES), each step's error naming the socket.
        let mut stream = UnixStream::connect(&self.path).map_err(|e| self.io_err("connect", e))?;
        stream
            .set_read_timeout(Some(READ_TICK))
            .and_then(|()| stream.set_write_timeout(Some(self.opts.write_timeout)))
            .map_err(|e| self.io_err("socket options", e))?;
        let ours = self.opts.version;
        // OF1.0 has no hello elements; from 1.1 on we offer exactly our version.
        let hello = if ours == Version::OF10 {
            Hello::default()
        } else {
            Hello::offering(&[ours])
        };
        let bytes = Msg::new(ours, self.xid(), Body::Hello(hello)).to_bytes()?;
        stream
            .write_all(&bytes)
            .map_err(|e| self.io_err("send hello", e))?;
        let mut fr = FrameReader::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        let theirs = loop {
            match fr.poll(&mut stream) {
                Ok(Some(m)) => break m,
                Ok(None) if Instant::now() < deadline => {}
                Ok(None) => {
                    return Err(OfError::Timeout {
                        what: format!("HELLO from {}", self.socket),
                    });
                }
                Err(ReadError::Wire(e)) => return Err(self.protocol_err(e)),
                Err(ReadError::Io(e)) => return Err(self.io_err("waiting for hello", e)),
            }
        };
        match &theirs.body {
            Body::Hello(h) if theirs.version >= ours && h.supports(theirs.version, ours) => {}
            Body::Hello(h) => {
                let offered: Vec<String> = (1..=Version::OF15.0)
                    .map(Version)
                    .filter(|v| *v <= theirs.version && h.supports(theirs.version, *v))
                    .map(version_name)
                    .collect();
                return Err(OfError::Negotiation {
                    socket: self.socket.clone(),
                    message: format!(
                        "the bridge does not allow {} (it offers {}); add it to the bridge's \
                         protocols, e.g. `ovs-vsctl set bridge <bridge> \
                         protocols=OpenFlow10,OpenFlow15`",
                        version_name(ours),
                        if offered.is_empty() {
                            "nothing".to_string()
                        } else {
                            offered.join(",")
                        }
                    ),
                });
            }
            Body::Error(e) => {
                return Err(OfError::Negotiation {
                    socket: self.socket.clone(),
                    message: format!("switch answered HELLO with {}", e.name()),
                });
            }
            other => {
                return Err(self.protocol_err(format!(
                    "expected HELLO, got {:?}",
                    other.type_code(theirs.version)
                )));
            }
        }
        // From here on reads block without a timeout (an idle daemon should not wake up to
        // poll); dropping the Link shuts the socket down, which ends a blocked read.
        stream
            .set_read_timeout(None)
            .map_err(|e| self.io_err("socket options", e))?;
        let rstream = stream
            .try_clone()
            .map_err(|e| self.io_err("clone socket", e))?;
        // Bounded and preallocated by crossbeam: 1,024 messages (a few hundred KB) is
        // plenty of slack; a full channel only makes the reader wait for the owner.
        let (tx, rx) = bounded(1024);
        let stop = Arc::new(AtomicBool::new(false));
        let reader = spawn_reader(
            format!("{}-rx", self.opts.name),
            rstream,
            fr,
            tx,
            stop.clone(),
            self.socket.clone(),
        )
        .map_err(|e| self.io_err("spawn reader", e))?;
        Ok(Link {
            stream,
            incoming: rx,
            stop,
            reader: Some(reader),
            keepalive: Keepalive::new(self.opts.keepalive, Instant::now()),
            pending: Vec::new(),
        })
    }

    fn serve(&mut self, mut link: Link) -> Served {
        let result = loop {
            // Sleep until the keepalive is due, not on a tick: an idle daemon stays asleep.
            let wait = link
                .keepalive
                .next_due()
                .saturating_duration_since(Instant::now());
            let step = select! {
                recv(self.cmds) -> cmd => match cmd {
                    Ok(Cmd::Transact { bodies, reply }) => self.send_batch(&mut link, bodies, reply),
                    Err(_) => break Served::Stop,
                },
                recv(link.incoming) -> m => match m {
                    Ok(Incoming::Msg(m)) => self.handle(&mut link, m),
                    Ok(Incoming::Closed(e)) => Err(e),
                    Err(_) => Err(self.io_err("reader", "stopped")),
                },
                default(wait) => Ok(()),
            };
            if let Err(e) = step {
                break Served::Lost(e);
            }
            match link.keepalive.poll(Instant::now()) {
                KeepaliveAction::Nothing => {}
                KeepaliveAction::SendEcho => {
                    let xid = self.xid();
                    if let Err(e) = self.write_msgs(
                        &mut link,
                        &[Msg::new(
                            self.opts.version,
                            xid,
                            Body::EchoRequest(Vec::new()),
                        )],
                    ) {
                        break Served::Lost(e);
                    }
                }
                KeepaliveAction::Dead => {
                    break Served::Lost(self.io_err(
                        "keepalive",
                        format!("no echo reply within {:?}", self.opts.keepalive),
                    ));
                }
            }
        };
        for p in link.pending.drain(..) {
            let _ = p.tx.send(Err(OfError::Disconnected {
                socket: self.socket.clone(),
            }));
        }
        result
    }

    fn write_msgs(&self, link: &mut Link, msgs: &[Msg]) -> Result<(), OfError> {
        let mut buf = Vec::new();
        for m in msgs {
            m.encode(&mut buf)?;
        }
        link.stream
            .write_all(&buf)
            .map_err(|e| self.io_err("write", e))
    }

    fn send_batch(
        &mut self,
        link: &mut Link,
        bodies: Batch,
        tx: Sender<Result<Reply, OfError>>,
    ) -> Result<(), OfError> {
        let version = self.opts.version;
        let n =
            u32::try_from(bodies.len()).map_err(|_| WireError::TooLong { len: bodies.len() })?;
        let Batch { len, bodies } = bodies;
        // The batch's xids are consecutive, the barrier's last; never wrap inside a batch.
        if self.next_xid.checked_add(n.saturating_add(1)).is_none() {
            self.next_xid = 1;
        }
        let first = self.next_xid;
        let barrier = first + n;
        self.next_xid = barrier.wrapping_add(1).max(1);
        link.pending.push(Pending {
            first,
            barrier,
            reply: Reply::default(),
            encode_error: None,
            tx,
        });
        // Encode and write in chunks, so the switch starts on the first messages while we
        // encode the rest, and drain what it sends in between, so a large batch whose
        // messages fail one by one cannot fill both socket buffers and deadlock.
        let mut buf = Vec::with_capacity(WRITE_CHUNK + 64 * 1024);
        for (xid, mut body) in (first..).zip(bodies.take(len)) {
            // OVS requires a bundled message's xid to equal the BUNDLE_ADD's.
            if let Body::BundleAdd(b) = &mut body {
                b.msg.xid = xid;
            }
            if let Err(e) = Msg::new(version, xid, body).encode(&mut buf) {
                // Stop here; the barrier still goes out so the batch completes, as an error.
                if let Some(p) = link.pending.iter_mut().find(|p| p.first == first) {
                    p.encode_error = Some(e);
                }
                break;
            }
            if buf.len() >= WRITE_CHUNK {
                self.write_and_drain(link, &buf)?;
                buf.clear();
            }
        }
        Msg::new(version, barrier, Body::BarrierRequest).encode(&mut buf)?;
        self.write_and_drain(link, &buf)
    }

    fn write_and_drain(&mut self, link: &mut Link, buf: &[u8]) -> Result<(), OfError> {
        link.stream
            .write_all(buf)
            .map_err(|e| self.io_err("write", e))?;
        while let Ok(inc) = link.incoming.try_recv() {
            match inc {
                Incoming::Msg(m) => self.handle(link, m)?,
                Incoming::Closed(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn handle(&mut self, link: &mut Link, m: Msg) -> Result<(), OfError> {
        link.keepalive.received(Instant::now());
        let version = self.opts.version;
        if m.version != version {
            return Err(self.protocol_err(format!(
                "message version {} on a {} connection",
                m.version, version
            )));
        }
        if let Body::Other { type_, .. } = &m.body {
            let known = if version == Version::OF10 {
                MsgType10(*type_).name().is_some()
            } else {
                MsgType(*type_).name().is_some()
            };
            if !known {
                return Err(self.protocol_err(format!("unknown message type {type_}")));
            }
        }
        let slot = link.pending.iter().position(|p| p.index(m.xid).is_some());
        match (m.body, slot) {
            (Body::EchoRequest(data), _) => {
                let reply = Msg::new(version, m.xid, Body::EchoReply(data));
                self.write_msgs(link, &[reply])?;
            }
            (Body::EchoReply(_), _) => {}
            (Body::Error(e), Some(i)) => {
                let p = &mut link.pending[i];
                if let Some(idx) = p.index(m.xid) {
                    p.reply.errors.push((idx, e));
                }
            }
            (Body::Error(e), None) => {
                log::warn!(
                    "openflow unsolicited error socket={} xid={:#x} err={}",
                    self.socket,
                    m.xid,
                    e.name()
                );
            }
            (Body::BarrierReply, Some(i)) if link.pending[i].barrier == m.xid => {
                let p = link.pending.remove(i);
                let _ = p.tx.send(match p.encode_error {
                    Some(e) => Err(OfError::Encode(e)),
                    None => Ok(p.reply),
                });
            }
            (body, Some(i)) => {
                let p = &mut link.pending[i];
                if let Some(idx) = p.index(m.xid) {
                    p.reply.replies.push((
                        idx,
                        Msg {
                            version: m.version,
                            xid: m.xid,
                            body,
                        },
                    ));
                }
            }
            (body, None) => {
                let type_ = body.type_code(version);
                let m = Msg {
                    version: m.version,
                    xid: m.xid,
                    body,
                };
                if self.unsolicited.try_send(m).is_err() {
                    self.lost.fetch_add(1, Ordering::Relaxed);
                    log::debug!(
                        "openflow unsolicited message dropped socket={} type={type_:?}",
                        self.socket
                    );
                }
            }
        }
        Ok(())
    }
}

fn version_name(v: Version) -> String {
    match v {
        Version::OF10 => "OpenFlow10".into(),
        Version::OF11 => "OpenFlow11".into(),
        Version::OF12 => "OpenFlow12".into(),
        Version::OF13 => "OpenFlow13".into(),
        Version::OF14 => "OpenFlow14".into(),
        Version::OF15 => "OpenFlow15".into(),
        other => format!("version {:#x}", other.0),
    }
}

fn spawn_reader(
    name: String,
    mut stream: UnixStream,
    mut fr: FrameReader,
    tx: Sender<Incoming>,
    stop: Arc<AtomicBool>,
    socket: String,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(name).spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match fr.poll(&mut stream) {
                Ok(Some(m)) => {
                    // A full channel must not block shutdown: retry while not stopped.
                    let mut item = Incoming::Msg(m);
                    loop {
                        match tx.send_timeout(item, READ_TICK) {
                            Ok(()) => break,
                            Err(crossbeam_channel::SendTimeoutError::Timeout(back)) => {
                                if stop.load(Ordering::Relaxed) {
                                    return;
                                }
                                item = back;
                            }
                            Err(crossbeam_channel::SendTimeoutError::Disconnected(_)) => return,
                        }
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    let err = match e {
                        ReadError::Wire(w) => OfError::Protocol {
                            socket,
                            error: w.to_string(),
                        },
                        ReadError::Io(s) => OfError::Io { socket, error: s },
                    };
                    let _ = tx.send_timeout(Incoming::Closed(err), READ_TICK);
                    return;
                }
            }
        }
    })
}
