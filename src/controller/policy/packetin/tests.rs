//! The answerer with a recording switch and time passed in: which port an answer leaves
//! by, what is not answered, the rate limit, and the loop's batching.

use std::collections::VecDeque;

use crossbeam_channel::{Sender, bounded};

use super::*;
use crate::heartbeat::Heartbeats;
use crate::openflow::packet::PacketInProp;
use crate::pipeline::policy::{VmPorts, log_userdata, reject_userdata};

const PORTS: VmPorts = VmPorts { host: 3, uplink: 2 };

use crate::testing::hex;

/// A SYN 192.0.2.1:40000 → 192.0.2.10:5201 and a UDP datagram the same way.
fn syn() -> Vec<u8> {
    hex("020000000010 020000000001 0800
         4500 0028 0001 4000 4006 0000 c0000201 c000020a
         9c40 1451 11223344 00000000 5002 faf0 0000 0000")
}

fn udp() -> Vec<u8> {
    hex("020000000010 020000000001 0800
         4500 0020 0001 4000 4011 0000 c0000201 c000020a
         afc8 1451 000c 0000 39383736")
}

fn pin(userdata: &[u8], frame: Vec<u8>) -> PacketIn2 {
    PacketIn2 {
        props: vec![
            PacketInProp::Packet(frame),
            PacketInProp::TableId(120),
            PacketInProp::Userdata(userdata.to_vec()),
        ],
    }
}

fn answerer(ports: Option<VmPorts>, now: Instant) -> Answerer {
    Answerer::new(
        Box::new(move || ports),
        Box::new(|_| None),
        RATE,
        BURST,
        now,
    )
}

fn out_port(po: &PacketOut) -> u32 {
    match po.actions[..] {
        [Action::Output { port, .. }] => port,
        _ => panic!("{po:?}"),
    }
}

#[test]
fn ingress_answers_leave_by_the_uplink_egress_ones_by_the_host_port() {
    let now = Instant::now();
    let a = answerer(Some(PORTS), now);
    let po = a
        .handle(&pin(&reject_userdata(Direction::In, 7), syn()), now)
        .unwrap();
    assert_eq!(out_port(&po), PORTS.uplink);
    assert_eq!(po, {
        let mut want = PacketOut::new(port::CONTROLLER, vec![Action::output(2)], Vec::new());
        want.data = reject::answer(&reject::parse(&syn()).unwrap()).unwrap().1;
        want
    });
    let po = a
        .handle(&pin(&reject_userdata(Direction::Out, 7), udp()), now)
        .unwrap();
    assert_eq!(out_port(&po), PORTS.host);
    let c = lock(&a.counts).clone();
    assert_eq!(
        c,
        Counts {
            rejects: 2,
            tcp_resets: 1,
            icmp: 1,
            ..Counts::default()
        }
    );
}

#[test]
fn what_is_not_answered_is_counted() {
    let now = Instant::now();
    let a = answerer(Some(PORTS), now);
    let rej = reject_userdata(Direction::In, 1);
    // Not tether's Reject userdata.
    assert!(a.handle(&pin(&[0x03, 0, 0, 0, 0, 1], syn()), now).is_none());
    assert!(a.handle(&PacketIn2::default(), now).is_none());
    // A broadcast destination; no packet at all.
    let mut bcast = udp();
    bcast[..6].copy_from_slice(&[0xff; 6]);
    assert!(a.handle(&pin(&rej, bcast), now).is_none());
    let mut no_packet = pin(&rej, Vec::new());
    no_packet.props.remove(0);
    assert!(a.handle(&no_packet, now).is_none());
    // The pair is not known.
    let b = answerer(None, now);
    assert!(b.handle(&pin(&rej, syn()), now).is_none());
    assert_eq!(
        *lock(&a.counts),
        Counts {
            rejects: 2,
            not_answerable: 2,
            other: 2,
            ..Counts::default()
        }
    );
    assert_eq!(lock(&b.counts).no_ports, 1);
}

#[test]
fn the_rate_limit_holds_a_burst_then_the_rate() {
    let t0 = Instant::now();
    let a = answerer(Some(PORTS), t0);
    let p = pin(&reject_userdata(Direction::In, 1), syn());
    let answered = |at: Instant, n: usize| (0..n).filter(|_| a.handle(&p, at).is_some()).count();
    assert_eq!(answered(t0, 1000), BURST as usize);
    // Half a second later: RATE / 2 more.
    assert_eq!(
        answered(t0 + Duration::from_millis(500), 1000),
        RATE as usize / 2
    );
    // A long pause refills to the burst, not beyond.
    assert_eq!(answered(t0 + Duration::from_secs(60), 1000), BURST as usize);
    let c = lock(&a.counts).clone();
    assert_eq!(c.rejects, 3000);
    assert_eq!(c.rate_limited, 3000 - 2 * BURST as u64 - RATE as u64 / 2);
}

/// A switch that hands out queued packet-ins, records packet-outs, and closes `stop` once
/// its queue is empty.
struct Fake {
    queue: VecDeque<Result<Option<PacketIn2>, String>>,
    sent: Vec<Vec<PacketOut>>,
    fail_send: bool,
    stop: Option<Sender<()>>,
}

impl PacketIo for Fake {
    fn recv(&mut self, _timeout: Duration) -> Result<Option<PacketIn2>, String> {
        match self.queue.pop_front() {
            Some(r) => r,
            None => {
                self.stop = None;
                Ok(None)
            }
        }
    }

    fn send(&mut self, outs: Vec<PacketOut>) -> Result<(), String> {
        self.sent.push(outs);
        if self.fail_send {
            Err("switch gone".into())
        } else {
            Ok(())
        }
    }
}

fn run(queue: Vec<Result<Option<PacketIn2>, String>>, fail_send: bool) -> (Fake, Counts) {
    let (tx, rx) = bounded(0);
    let mut fake = Fake {
        queue: queue.into(),
        sent: Vec::new(),
        fail_send,
        stop: Some(tx),
    };
    let a = answerer(Some(PORTS), Instant::now());
    let hb = Arc::new(Heartbeats::default());
    let pulse = hb.register("np-packetin", Duration::from_secs(5), Instant::now());
    a.run(&mut fake, &rx, &pulse);
    let c = lock(&a.counts).clone();
    (fake, c)
}

#[test]
fn the_loop_answers_in_batches_and_survives_errors() {
    let p = || Ok(Some(pin(&reject_userdata(Direction::In, 1), syn())));
    // 70 queued: one batch of 64, then 6; an error and an idle tick in between are fine.
    let mut q: Vec<_> = (0..70).map(|_| p()).collect();
    q.insert(0, Err("reconnecting".into()));
    q.insert(1, Ok(None));
    let (fake, c) = run(q, false);
    assert_eq!(fake.sent.iter().map(Vec::len).collect::<Vec<_>>(), [64, 6]);
    assert_eq!(c.tcp_resets, 70);
    // A batch the switch refuses is counted, and the loop goes on.
    let (fake, c) = run((0..3).map(|_| p()).collect(), true);
    assert_eq!(fake.sent.len(), 1);
    assert_eq!(c.send_errors, 3);
}

#[test]
fn a_logged_rules_packet_in_is_an_audit_line_not_an_answer() {
    let now = Instant::now();
    let rule = audit::LoggedRule {
        np_ref: "AntreaNetworkPolicy:vm-ns/anp".into(),
        rule: "r".into(),
        disposition: "Drop".into(),
        table: 100,
        priority: 14900,
        log_label: String::new(),
    };
    let a = Answerer::new(
        Box::new(|| Some(PORTS)),
        Box::new(move |id| (id == 7).then(|| rule.clone())),
        RATE,
        BURST,
        now,
    );
    let logged = pin(&log_userdata(Direction::In, 7), udp());
    assert!(a.handle(&logged, now).is_none());
    assert!(a.handle(&logged, now).is_none());
    // Held in its window (one line for both), written once it ends.
    assert!(!lock(&a.dedup).is_empty());
    a.flush(now + audit::WINDOW);
    assert!(lock(&a.dedup).is_empty());
    // An unknown conjunction.
    assert!(
        a.handle(&pin(&log_userdata(Direction::In, 8), udp()), now)
            .is_none()
    );
    let c = lock(&a.counts).clone();
    assert_eq!((c.logged, c.log_unknown, c.rejects, c.other), (2, 1, 0, 0));
}
