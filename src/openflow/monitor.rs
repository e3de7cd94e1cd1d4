//! Open vSwitch's flow monitor as Nicira defines it (`NXST_FLOW_MONITOR`,
//! include/openflow/nicira-ext.h), spoken on the OpenFlow 1.0 connection: the one form
//! every OVS tether supports answers (2.15 has no OpenFlow 1.4+ monitor at OF1.5; 3.x
//! declares the Nicira one for OF1.0–1.2 only). Pure encode/decode: the request, the
//! updates (the first reply carries the request's xid, later ones come unasked with xid 0),
//! and the pause/resume notices of OVS's flow control.
//!
//! ```text
//! request  ofp_header(type 16) | 0xffff flags | NX vendor 0x2320 | subtype 2 | pad 4
//!          | id(4) flags(2) out_port(2) match_len(2)=0 table_id(1) zeros(5)
//! reply    ofp_header(type 17) | the same 16 bytes | updates, each a multiple of 8 bytes:
//!          full:   length(2) event(2) reason(2) priority(2) idle(2) hard(2)
//!                  match_len(2) table_id(1) pad(1) cookie(8) | nx_match, padded to 8 | actions
//!          abbrev: length(2)=8 event(2)=3 xid(4)
//! notices  ofp_header(type 4) | NX vendor 0x2320 | subtype 22 (paused) or 23 (resumed)
//! ```

use super::WireError;
use super::msg::Body;

const NX_VENDOR_ID: u32 = 0x0000_2320;
const NXST_FLOW_MONITOR: u32 = 2;
const NXT_FLOW_MONITOR_PAUSED: u32 = 22;
const NXT_FLOW_MONITOR_RESUMED: u32 = 23;
/// OpenFlow 1.0 message types used here.
const OFPT10_VENDOR: u8 = 4;
const OFPT10_STATS_REQUEST: u8 = 16;
const OFPT10_STATS_REPLY: u8 = 17;
const OFPST_VENDOR: u16 = 0xffff;
/// OpenFlow 1.0's "no port": the monitor is not limited to flows that output anywhere.
const OFPP10_NONE: u16 = 0xffff;
const ALL_TABLES: u8 = 0xff;
/// The stats header after `ofp_header`: type, flags, vendor, subtype, pad.
const STATS_HEAD: usize = 16;
const FULL_LEN: usize = 24;

/// `nx_flow_monitor_request.flags`.
pub mod flags {
    pub const INITIAL: u16 = 1 << 0;
    pub const ADD: u16 = 1 << 1;
    pub const DELETE: u16 = 1 << 2;
    pub const MODIFY: u16 = 1 << 3;
    pub const ACTIONS: u16 = 1 << 4;
    pub const OWN: u16 = 1 << 5;
}

/// A monitor of every flow of every table (no match, any output port).
pub fn request(id: u32, flags: u16) -> Body {
    let mut b = Vec::with_capacity(STATS_HEAD + 16);
    b.extend_from_slice(&OFPST_VENDOR.to_be_bytes());
    b.extend_from_slice(&0u16.to_be_bytes());
    b.extend_from_slice(&NX_VENDOR_ID.to_be_bytes());
    b.extend_from_slice(&NXST_FLOW_MONITOR.to_be_bytes());
    b.extend_from_slice(&[0; 4]);
    b.extend_from_slice(&id.to_be_bytes());
    b.extend_from_slice(&flags.to_be_bytes());
    b.extend_from_slice(&OFPP10_NONE.to_be_bytes());
    b.extend_from_slice(&0u16.to_be_bytes());
    b.push(ALL_TABLES);
    b.extend_from_slice(&[0; 5]);
    Body::Other {
        type_: OFPT10_STATS_REQUEST,
        body: b,
    }
}

/// What happened to a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    Added,
    Deleted,
    Modified,
}

/// One update of the monitor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Update {
    Flow {
        event: Event,
        /// `OFPRR_*` for a deletion (`ovs-ofctl del-flows` is 2, delete), else 0.
        reason: u16,
        table_id: u8,
        priority: u16,
        cookie: u64,
    },
    /// A change this connection made itself (never, here: tether changes flows on the
    /// OpenFlow 1.5 connection).
    Abbrev { xid: u32 },
}

/// What the monitor's messages say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    Updates(Vec<Update>),
    /// OVS's buffer for this connection's updates is full: until `Resumed`, additions and
    /// modifications are not reported (deletions are).
    Paused,
    /// Caught up again (what changed while paused has been reported).
    Resumed,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The monitor's part of an OpenFlow 1.0 message body: `None` for anything else (another
/// stats reply, another vendor message); an error for a monitor reply that does not
/// parse.
pub fn decode(body: &Body) -> Result<Option<Notice>, WireError> {
    let Body::Other { type_, body } = body else {
        return Ok(None);
    };
    match *type_ {
        OFPT10_VENDOR if body.len() >= 8 && be32(body, 0) == NX_VENDOR_ID => {
            Ok(match be32(body, 4) {
                NXT_FLOW_MONITOR_PAUSED => Some(Notice::Paused),
                NXT_FLOW_MONITOR_RESUMED => Some(Notice::Resumed),
                _ => None,
            })
        }
        OFPT10_STATS_REPLY
            if body.len() >= STATS_HEAD
                && be16(body, 0) == OFPST_VENDOR
                && be32(body, 4) == NX_VENDOR_ID
                && be32(body, 8) == NXST_FLOW_MONITOR =>
        {
            updates(&body[STATS_HEAD..]).map(|u| Some(Notice::Updates(u)))
        }
        _ => Ok(None),
    }
}

fn updates(mut b: &[u8]) -> Result<Vec<Update>, WireError> {
    let mut out = Vec::new();
    while !b.is_empty() {
        if b.len() < 4 {
            return Err(WireError::Truncated {
                what: "nx_flow_update_header",
                need: 4,
                have: b.len(),
            });
        }
        let len = usize::from(be16(b, 0));
        if len < 8 || len % 8 != 0 || len > b.len() {
            return Err(WireError::BadLength {
                what: "nx_flow_update",
                len,
            });
        }
        let (e, rest) = b.split_at(len);
        b = rest;
        let event = match be16(e, 2) {
            0 => Event::Added,
            1 => Event::Deleted,
            2 => Event::Modified,
            3 => {
                out.push(Update::Abbrev { xid: be32(e, 4) });
                continue;
            }
            // An event this version does not know: skipped, the rest still counts.
            _ => continue,
        };
        if e.len() < FULL_LEN {
            return Err(WireError::Truncated {
                what: "nx_flow_update_full",
                need: FULL_LEN,
                have: e.len(),
            });
        }
        let match_len = usize::from(be16(e, 12));
        if FULL_LEN + match_len > e.len() {
            return Err(WireError::BadLength {
                what: "nx_flow_update_full match_len",
                len: match_len,
            });
        }
        out.push(Update::Flow {
            event,
            reason: be16(e, 4),
            priority: be16(e, 6),
            table_id: e[14],
            cookie: u64::from_be_bytes([e[16], e[17], e[18], e[19], e[20], e[21], e[22], e[23]]),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testing::hex;

    #[test]
    fn request_bytes() {
        let Body::Other { type_, body } = request(7, flags::ADD | flags::DELETE | flags::MODIFY)
        else {
            panic!()
        };
        assert_eq!(type_, 16);
        assert_eq!(
            body,
            hex("ffff 0000 00002320 00000002 00000000
                 00000007 000e ffff 0000 ff 0000000000")
        );
    }

    #[test]
    fn updates_as_ovs_sends_them() {
        // A deletion (reason 2: delete) in table 0 at priority 0x8000, cookie
        // 0x0001_0100_0000_0005, with a 12-byte match (in_port=1, NXM_OF_IN_PORT) padded
        // to 16; an addition in table 20 with no match; an abbreviated update.
        let body = hex("ffff 0000 00002320 00000002 00000000
             0028 0001 0002 8000 0000 0000 000c 00 00 0001010000000005
             00000002 0001 0000 00000000 00000000
             0018 0000 0000 0064 0000 0000 0000 14 00 0001020000000009
             0008 0003 000186a0");
        let n = decode(&Body::Other {
            type_: 17,
            body: body.clone(),
        })
        .unwrap();
        assert_eq!(
            n,
            Some(Notice::Updates(vec![
                Update::Flow {
                    event: Event::Deleted,
                    reason: 2,
                    table_id: 0,
                    priority: 0x8000,
                    cookie: 0x0001_0100_0000_0005,
                },
                Update::Flow {
                    event: Event::Added,
                    reason: 0,
                    table_id: 20,
                    priority: 100,
                    cookie: 0x0001_0200_0000_0009,
                },
                Update::Abbrev { xid: 100_000 },
            ]))
        );
    }

    #[test]
    fn notices_and_other_messages() {
        let vendor = |sub: &str| Body::Other {
            type_: 4,
            body: hex(&format!("00002320 {sub}")),
        };
        assert_eq!(decode(&vendor("00000016")).unwrap(), Some(Notice::Paused));
        assert_eq!(decode(&vendor("00000017")).unwrap(), Some(Notice::Resumed));
        assert_eq!(decode(&vendor("00000015")).unwrap(), None);
        // Another stats reply (flow stats) and another message are not the monitor's.
        let flow_stats = Body::Other {
            type_: 17,
            body: hex("0001 0000"),
        };
        assert_eq!(decode(&flow_stats).unwrap(), None);
        assert_eq!(decode(&Body::BarrierReply).unwrap(), None);
    }

    #[test]
    fn bad_updates_are_errors_not_panics() {
        let head = "ffff 0000 00002320 00000002 00000000";
        for (bad, what) in [
            ("00", "nx_flow_update_header"),
            ("0006 0000 0000", "nx_flow_update"),
            (
                "0010 0000 0000 0000 0000 0000 0000 0000",
                "nx_flow_update_full",
            ),
            (
                "0018 0000 0000 0000 0000 0000 0040 00 00 0000000000000000",
                "nx_flow_update_full match_len",
            ),
        ] {
            let body = hex(&format!("{head} {bad}"));
            let e = decode(&Body::Other { type_: 17, body }).unwrap_err();
            let named = match e {
                WireError::Truncated { what, .. } | WireError::BadLength { what, .. } => what,
                other => panic!("{other:?}"),
            };
            assert_eq!(named, what, "{bad}");
        }
        // An unknown event is skipped, what follows still counts.
        let body = hex(&format!("{head} 0008 0009 00000000 0008 0003 00000001"));
        assert_eq!(
            decode(&Body::Other { type_: 17, body }).unwrap(),
            Some(Notice::Updates(vec![Update::Abbrev { xid: 1 }]))
        );
    }
}
