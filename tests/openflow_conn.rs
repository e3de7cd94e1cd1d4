//! The connection owner thread against a scripted fake switch on a unix socket (no OVS,
//! no privileges): bad input of every kind closes the connection with a specific error
//! and the client reconnects; echo requests are answered; a batch's errors come back
//! attributed to the message that caused them; a silent switch is given up on.

// The fake switch's helpers are test code too (clippy.toml's allowance covers #[test] only).
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tether::openflow::OfError;
use tether::openflow::conn::{Conn, ConnEvent, ConnOptions};
use tether::openflow::consts::{ErrorType, FlowModCommand, Version};
use tether::openflow::flowmod::FlowMod;
use tether::openflow::msg::{Body, ErrorMsg, Hello, Msg};
use tether::openflow::oxm::Match;

struct FakeSwitch {
    dir: PathBuf,
    listener: UnixListener,
}

static N: AtomicUsize = AtomicUsize::new(0);

impl FakeSwitch {
    fn new() -> FakeSwitch {
        let dir = std::env::temp_dir().join(format!(
            "tether-ofconn-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let listener = UnixListener::bind(dir.join("br-int.mgmt")).unwrap();
        listener.set_nonblocking(true).unwrap();
        FakeSwitch { dir, listener }
    }

    fn path(&self) -> PathBuf {
        self.dir.join("br-int.mgmt")
    }

    fn accept(&self) -> UnixStream {
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            match self.listener.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    return s;
                }
                Err(_) if Instant::now() < end => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => panic!("client did not connect: {e}"),
            }
        }
    }

    /// Accept and answer the client's HELLO with an OF1.5 one.
    fn accept_and_hello(&self) -> UnixStream {
        let mut s = self.accept();
        let hello = read_msg(&mut s);
        assert_eq!(
            hello.body,
            Body::Hello(Hello::offering(&[Version::OF15])),
            "client hello"
        );
        send(
            &mut s,
            &Msg::new(
                Version::OF15,
                1,
                Body::Hello(Hello::offering(&[Version::OF15])),
            ),
        );
        s
    }
}

impl Drop for FakeSwitch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn read_msg(s: &mut UnixStream) -> Msg {
    let mut head = [0u8; 8];
    s.read_exact(&mut head).unwrap();
    let len = usize::from(u16::from_be_bytes([head[2], head[3]]));
    let mut buf = head.to_vec();
    buf.resize(len, 0);
    s.read_exact(&mut buf[8..]).unwrap();
    Msg::decode(&buf).unwrap()
}

fn send(s: &mut UnixStream, m: &Msg) {
    s.write_all(&m.to_bytes().unwrap()).unwrap();
}

fn opts() -> ConnOptions {
    let mut o = ConnOptions::new(Version::OF15, "of15-fake");
    o.backoff_min = Duration::from_millis(10);
    o.backoff_max = Duration::from_millis(50);
    o
}

fn next_event(conn: &Conn) -> ConnEvent {
    conn.events()
        .recv_timeout(Duration::from_secs(10))
        .expect("a connection event")
}

#[test]
fn bad_input_closes_with_a_specific_error_and_reconnects() {
    let sw = FakeSwitch::new();
    let conn = Conn::start(&sw.path(), opts()).unwrap();
    let unknown = Msg::new(
        Version::OF15,
        9,
        Body::Other {
            type_: 200,
            body: Vec::new(),
        },
    )
    .to_bytes()
    .unwrap();
    let wrong_version = Msg::new(Version::OF13, 9, Body::EchoReply(Vec::new()))
        .to_bytes()
        .unwrap();
    // A FLOW_MOD whose body stops after the cookie.
    let mut short_flow_mod = vec![6, 14, 0, 16, 0, 0, 0, 9];
    short_flow_mod.extend_from_slice(&[0; 8]);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "garbage",
            b"GARBAGE!garbage!".to_vec(),
            "message header not valid for OpenFlow version 0x47",
        ),
        (
            "short length",
            vec![6, 2, 0, 4, 0, 0, 0, 1],
            "bad length 4 for message header",
        ),
        ("unknown type", unknown, "unknown message type 200"),
        (
            "wrong version",
            wrong_version,
            "message version OF13 on a OF15 connection",
        ),
        (
            "inconsistent body",
            short_flow_mod,
            "truncated cookie_mask: need 8 bytes, have 0",
        ),
    ];
    let socket = sw.path().display().to_string();
    for (generation, (what, bytes, error)) in (1u64..).zip(cases) {
        let mut s = sw.accept_and_hello();
        assert_eq!(
            next_event(&conn),
            ConnEvent::Connected { generation },
            "{what}"
        );
        s.write_all(&bytes).unwrap();
        assert_eq!(
            next_event(&conn),
            ConnEvent::Disconnected {
                generation,
                error: OfError::Protocol {
                    socket: socket.clone(),
                    error: error.to_string()
                }
            },
            "{what}"
        );
    }
    // And it keeps coming back.
    let _s = sw.accept_and_hello();
    assert_eq!(next_event(&conn), ConnEvent::Connected { generation: 6 });
}

#[test]
fn echo_is_answered_and_batch_errors_are_attributed() {
    let sw = FakeSwitch::new();
    let conn = Conn::start(&sw.path(), opts()).unwrap();
    let mut s = sw.accept_and_hello();
    conn.wait_connected(Duration::from_secs(10)).unwrap();

    send(
        &mut s,
        &Msg::new(Version::OF15, 77, Body::EchoRequest(b"ping".to_vec())),
    );
    assert_eq!(
        read_msg(&mut s),
        Msg::new(Version::OF15, 77, Body::EchoReply(b"ping".to_vec()))
    );

    let fm = |p| Body::FlowMod(FlowMod::new(FlowModCommand::ADD, 0, p, Match::default()));
    let client = std::thread::spawn(move || {
        let r = conn.transact(vec![fm(1), fm(2), fm(3)], Duration::from_secs(10));
        (conn, r)
    });
    let sent: Vec<Msg> = (0..4).map(|_| read_msg(&mut s)).collect();
    let first = sent[0].xid;
    for (i, m) in sent.iter().enumerate() {
        assert_eq!(m.xid, first + u32::try_from(i).unwrap(), "consecutive xids");
    }
    assert_eq!(sent[3].body, Body::BarrierRequest);
    let err = ErrorMsg {
        type_: ErrorType::FLOW_MOD_FAILED,
        code: 1, // OFPFMFC_TABLE_FULL
        experimenter: None,
        data: sent[1].to_bytes().unwrap(),
    };
    send(
        &mut s,
        &Msg::new(Version::OF15, sent[1].xid, Body::Error(err.clone())),
    );
    send(
        &mut s,
        &Msg::new(Version::OF15, sent[3].xid, Body::BarrierReply),
    );
    let (_conn, r) = client.join().unwrap();
    let r = r.unwrap();
    assert!(r.replies.is_empty());
    assert_eq!(r.errors, vec![(1, err.clone())]);
    assert_eq!(err.name(), "OFPFMFC_TABLE_FULL");
    assert_eq!(err.failed_xid(), Some(sent[1].xid));
    assert_eq!(err.failed_msg().unwrap(), sent[1]);
}

#[test]
fn a_silent_switch_is_given_up_on_after_an_unanswered_echo() {
    let sw = FakeSwitch::new();
    let mut o = opts();
    o.keepalive = Duration::from_millis(300);
    let conn = Conn::start(&sw.path(), o).unwrap();
    let mut s = sw.accept_and_hello();
    assert_eq!(next_event(&conn), ConnEvent::Connected { generation: 1 });
    // The client probes once, then gives up.
    let probe = read_msg(&mut s);
    assert_eq!(probe.body, Body::EchoRequest(Vec::new()));
    match next_event(&conn) {
        ConnEvent::Disconnected {
            generation: 1,
            error: OfError::Io { error, .. },
        } => assert_eq!(error, "keepalive: no echo reply within 300ms"),
        other => panic!("unexpected {other:?}"),
    }
    let _s = sw.accept_and_hello();
    assert_eq!(next_event(&conn), ConnEvent::Connected { generation: 2 });
}

#[test]
fn requests_while_disconnected_fail_at_once() {
    let dir = std::env::temp_dir().join(format!("tether-ofconn-none-{}", std::process::id()));
    let conn = Conn::start(&dir.join("br-int.mgmt"), opts()).unwrap();
    // A 10 s deadline, yet the answer is "disconnected", not a timeout: it did not wait.
    let err = conn
        .transact(vec![Body::BarrierRequest], Duration::from_secs(10))
        .unwrap_err();
    assert_eq!(
        err,
        OfError::Disconnected {
            socket: dir.join("br-int.mgmt").display().to_string()
        }
    );
    assert_eq!(conn.state(), (false, 0));
}

#[test]
fn an_of13_only_switch_is_refused_with_the_versions_it_offers() {
    let sw = FakeSwitch::new();
    let conn = Conn::start(&sw.path(), opts()).unwrap();
    let mut s = sw.accept();
    let _hello = read_msg(&mut s);
    send(
        &mut s,
        &Msg::new(
            Version::OF13,
            1,
            Body::Hello(Hello::offering(&[Version::OF10, Version::OF13])),
        ),
    );
    let end = Instant::now() + Duration::from_secs(10);
    let err = loop {
        match conn.transact(Vec::new(), Duration::from_secs(5)) {
            Err(e @ OfError::Negotiation { .. }) => break e,
            _ if Instant::now() < end => std::thread::sleep(Duration::from_millis(10)),
            other => panic!("expected a negotiation error, got {other:?}"),
        }
    };
    assert!(
        err.to_string()
            .contains("the bridge does not allow OpenFlow15 (it offers OpenFlow10,OpenFlow13)"),
        "{err}"
    );
}
