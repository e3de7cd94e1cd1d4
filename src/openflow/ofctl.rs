//! A flow as `ovs-ofctl -O OpenFlow15 --no-names dump-flows` prints it, from a decoded
//! `ofp_flow_desc`: what `tether flows` shows, so an operator can paste a line into
//! `ovs-ofctl` and compare it with OVS's own dump. Pure.
//!
//! The order and spelling follow OVS (`ofputil_flow_stats_format` in lib/ofp-flow.c,
//! `match_format` in lib/match.c, `ofpacts_format` in lib/ofp-actions.c) for every field
//! and action tether's codec models; `tests/openflow_ofctl.rs` checks them against
//! ovs-ofctl's own output. A field or action the codec keeps raw is printed as
//! `oxm(…)`/`action(…)` with its bytes: OVS would name it, we cannot.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::action::{Action, ControllerProp, Ct, CtZone, Instruction};
use super::consts::{CT_RECIRC_NONE, OxmClass, PacketInReason, ct_flags, ct_state, port};
use super::flowmod::FlowDesc;
use super::oxm::{Mac, Match, MatchField, values};

/// The counters of an OF1.5 flow description (its OXS list, §7.2.6). `None`: absent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowStats {
    /// (seconds, nanoseconds).
    pub duration: Option<(u32, u32)>,
    pub idle_time: Option<(u32, u32)>,
    pub packets: Option<u64>,
    pub bytes: Option<u64>,
}

const OXS_CLASS_BASIC: u16 = 0x8002;
const OXS_DURATION: u8 = 0;
const OXS_IDLE_TIME: u8 = 1;
const OXS_PACKET_COUNT: u8 = 4;
const OXS_BYTE_COUNT: u8 = 5;

impl FlowStats {
    /// Decode the OXS fields of `ofp_stats` (after its 4-byte header). Unknown fields are
    /// skipped; a truncated one ends the list.
    pub fn decode(oxs: &[u8]) -> FlowStats {
        let mut st = FlowStats::default();
        let mut rest = oxs;
        while rest.len() >= 4 {
            let class = u16::from_be_bytes([rest[0], rest[1]]);
            let field = rest[2] >> 1;
            let len = usize::from(rest[3]);
            let Some(v) = rest.get(4..4 + len) else { break };
            rest = &rest[4 + len..];
            if class != OXS_CLASS_BASIC || len != 8 {
                continue;
            }
            let hi = u32::from_be_bytes([v[0], v[1], v[2], v[3]]);
            let lo = u32::from_be_bytes([v[4], v[5], v[6], v[7]]);
            let n = u64::from(hi) << 32 | u64::from(lo);
            let pair = || (hi, lo);
            match field {
                OXS_DURATION => st.duration = Some(pair()),
                OXS_IDLE_TIME => st.idle_time = Some(pair()),
                OXS_PACKET_COUNT => st.packets = Some(n),
                OXS_BYTE_COUNT => st.bytes = Some(n),
                _ => {}
            }
        }
        st
    }
}

/// OVS's default priority: not printed.
const DEFAULT_PRIORITY: u16 = 0x8000;

/// One flow, as `ovs-ofctl dump-flows` prints it (with `stats`), or with `--no-stats`.
/// Without stats there is no leading space, as the test harness trims it.
pub fn format_flow(d: &FlowDesc, stats: bool) -> String {
    let mut s = String::new();
    if stats {
        s.push(' ');
    }
    if stats || d.cookie != 0 {
        let _ = write!(s, "cookie={:#x}, ", d.cookie);
    }
    let st = FlowStats::decode(&d.stats);
    if stats {
        let (sec, nsec) = st.duration.unwrap_or((u32::MAX, u32::MAX));
        let _ = write!(s, "duration={}, ", duration(sec, nsec));
    }
    if stats || d.table_id != 0 {
        let _ = write!(s, "table={}, ", d.table_id);
    }
    if stats {
        let count = |n: Option<u64>| n.map_or("?".to_string(), |n| n.to_string());
        let _ = write!(
            s,
            "n_packets={}, n_bytes={}, ",
            count(st.packets),
            count(st.bytes)
        );
    }
    if d.idle_timeout != 0 {
        let _ = write!(s, "idle_timeout={}, ", d.idle_timeout);
    }
    if d.hard_timeout != 0 {
        let _ = write!(s, "hard_timeout={}, ", d.hard_timeout);
    }
    for (bit, name) in [
        (1u16, "send_flow_rem"),
        (2, "check_overlap"),
        (4, "reset_counts"),
        (8, "no_packet_counts"),
        (16, "no_byte_counts"),
    ] {
        if d.flags & bit != 0 {
            let _ = write!(s, "{name} ");
        }
    }
    if d.importance != 0 {
        let _ = write!(s, "importance={}, ", d.importance);
    }
    if stats {
        if let Some((sec, _)) = st.idle_time {
            let _ = write!(s, "idle_age={sec}, ");
        }
    }
    let m = format_match(d.match_.fields(), d.priority);
    if !m.is_empty() {
        s.push_str(&m);
        s.push(' ');
    }
    s.push_str("actions=");
    s.push_str(&format_instructions(&d.instructions));
    s
}

/// `ofp_print_duration`: milliseconds when exact, else micro- or nanoseconds.
fn duration(sec: u32, nsec: u32) -> String {
    if nsec >= 1_000_000_000 {
        return format!("{sec}.{nsec}s");
    }
    let mut s = sec.to_string();
    if nsec > 0 {
        let _ = write!(s, ".{:03}", nsec / 1_000_000);
        if !nsec.is_multiple_of(1_000_000) {
            let _ = write!(s, "{:03}", (nsec / 1000) % 1000);
            if !nsec.is_multiple_of(1000) {
                let _ = write!(s, "{:03}", nsec % 1000);
            }
        }
    }
    s.push('s');
    s
}

/// `match_format`: priority, conj_id, ct_state, ct_zone, ct_mark, ct_label, the protocol
/// shorthand, registers, in_port, Ethernet, IPv6, IPv4, the protocol number, then ICMP
/// type and code or L4 ports.
pub fn format_match(fields: &[MatchField], priority: u16) -> String {
    // Long on purpose: one pass per field in `match_format`'s order, a table to read
    // against OVS's source.
    use MatchField::*;
    // Canonical: OVS's OF1.5 replies carry registers as 64-bit `xreg` pairs, which it
    // prints as the two 32-bit registers (`Match::new` splits them the same way).
    let canonical = Match::new(fields.to_vec());
    let fields = canonical.fields();
    let mut parts: Vec<String> = Vec::new();
    if priority != DEFAULT_PRIORITY {
        parts.push(format!("priority={priority}"));
    }
    let eth_type = fields.iter().find_map(|f| match f {
        EthType(t) => Some(*t),
        _ => None,
    });
    let proto = fields.iter().find_map(|f| match f {
        IpProto(p) => Some(*p),
        _ => None,
    });
    for f in fields {
        if let ConjId(id) = f {
            parts.push(format!("conj_id={id}"));
        }
    }
    for f in fields {
        if let CtState { value, mask } = f {
            parts.push(format!(
                "ct_state={}",
                ct_state_flags(*value, mask.unwrap_or(0xff))
            ));
        }
    }
    parts.extend(fields.iter().filter_map(|f| match f {
        CtZone(z) => Some(format!("ct_zone={z}")),
        _ => None,
    }));
    parts.extend(fields.iter().filter_map(|f| match f {
        // `format_uint32_masked`: C's `%#x`, so 0 is `0`.
        CtMark { value, mask } => Some(match mask {
            Some(m) if *m != u32::MAX => format!("ct_mark={}/{}", c_hex(*value), c_hex(*m)),
            _ => format!("ct_mark={}", c_hex(*value)),
        }),
        _ => None,
    }));
    parts.extend(fields.iter().filter_map(|f| match f {
        CtLabel { value, mask } => Some(format!(
            "ct_label={}",
            hex_u128(value.get(), mask.map(super::oxm::Be128::get))
        )),
        _ => None,
    }));
    // The shorthand stands for eth_type (and ip_proto when it names one).
    let (shorthand, skip_proto) = match (eth_type, proto) {
        (Some(values::ETH_TYPE_IPV4), Some(p)) => match p {
            values::IP_PROTO_ICMP => (Some("icmp"), true),
            2 => (Some("igmp"), true),
            values::IP_PROTO_TCP => (Some("tcp"), true),
            values::IP_PROTO_UDP => (Some("udp"), true),
            132 => (Some("sctp"), true),
            _ => (Some("ip"), false),
        },
        (Some(values::ETH_TYPE_IPV4), None) => (Some("ip"), false),
        (Some(values::ETH_TYPE_IPV6), Some(p)) => match p {
            values::IP_PROTO_ICMPV6 => (Some("icmp6"), true),
            values::IP_PROTO_TCP => (Some("tcp6"), true),
            values::IP_PROTO_UDP => (Some("udp6"), true),
            132 => (Some("sctp6"), true),
            _ => (Some("ipv6"), false),
        },
        (Some(values::ETH_TYPE_IPV6), None) => (Some("ipv6"), false),
        (Some(values::ETH_TYPE_ARP), _) => (Some("arp"), false),
        (Some(0x8035), _) => (Some("rarp"), false),
        _ => (None, false),
    };
    parts.extend(shorthand.map(str::to_string));
    let mut regs: Vec<(u8, u32, Option<u32>)> = fields
        .iter()
        .filter_map(|f| match f {
            Reg { idx, value, mask } => Some((*idx, *value, *mask)),
            _ => None,
        })
        .collect();
    regs.sort_unstable();
    for (idx, value, mask) in regs {
        parts.push(format!("reg{idx}={}", hex_masked(value, mask)));
    }
    let push = |parts: &mut Vec<String>, pick: &dyn Fn(&MatchField) -> Option<String>| {
        parts.extend(fields.iter().filter_map(pick));
    };
    push(&mut parts, &|f| match f {
        InPort(p) => Some(format!("in_port={}", port_name(*p))),
        _ => None,
    });
    push(&mut parts, &|f| match f {
        EthSrc(m, mask) => Some(format!("dl_src={}", mac_masked(m, mask.as_ref()))),
        _ => None,
    });
    push(&mut parts, &|f| match f {
        EthDst(m, mask) => Some(format!("dl_dst={}", mac_masked(m, mask.as_ref()))),
        _ => None,
    });
    if shorthand.is_none() {
        if let Some(t) = eth_type {
            parts.push(format!("dl_type={t:#06x}"));
        }
    }
    push(&mut parts, &|f| match f {
        Ipv6Src(a, m) => Some(format!("ipv6_src={}", v6_masked(*a, *m))),
        _ => None,
    });
    push(&mut parts, &|f| match f {
        Ipv6Dst(a, m) => Some(format!("ipv6_dst={}", v6_masked(*a, *m))),
        _ => None,
    });
    push(&mut parts, &|f| match f {
        Ipv4Src(a, m) => Some(format!("nw_src={}", v4_masked(*a, *m))),
        _ => None,
    });
    push(&mut parts, &|f| match f {
        Ipv4Dst(a, m) => Some(format!("nw_dst={}", v4_masked(*a, *m))),
        _ => None,
    });
    if !skip_proto {
        if let Some(p) = proto {
            parts.push(format!("nw_proto={p}"));
        }
    }
    push(&mut parts, &|f| match f {
        Icmpv4Type(t) | Icmpv6Type(t) => Some(format!("icmp_type={t}")),
        _ => None,
    });
    push(&mut parts, &|f| match f {
        Icmpv4Code(c) | Icmpv6Code(c) => Some(format!("icmp_code={c}")),
        _ => None,
    });
    push(&mut parts, &|f| match f {
        TcpSrc(p) | UdpSrc(p) | SctpSrc(p, None) => Some(format!("tp_src={p}")),
        TcpSrcMasked(p, m) | UdpSrcMasked(p, m) | SctpSrc(p, Some(m)) => {
            Some(format!("tp_src={}", be16_masked(*p, *m)))
        }
        _ => None,
    });
    push(&mut parts, &|f| match f {
        TcpDst(p) | UdpDst(p) | SctpDst(p, None) => Some(format!("tp_dst={p}")),
        TcpDstMasked(p, m) | UdpDstMasked(p, m) | SctpDst(p, Some(m)) => {
            Some(format!("tp_dst={}", be16_masked(*p, *m)))
        }
        _ => None,
    });
    push(&mut parts, &|f| match f {
        Other { .. } => Some(raw_oxm(f)),
        _ => None,
    });
    parts.join(",")
}

/// `format_be16_masked`: decimal when exact, else `0x<value>/0x<mask>`.
fn be16_masked(v: u16, m: u16) -> String {
    if m == u16::MAX {
        v.to_string()
    } else {
        format!("{v:#x}/{m:#x}")
    }
}

/// C's `%#x`: `0` for zero, else `0x…`.
fn c_hex(v: u32) -> String {
    if v == 0 {
        "0".into()
    } else {
        format!("{v:#x}")
    }
}

/// `ds_put_hex` of big-endian bytes: leading zero bytes skipped, `0` for all zeros (it is
/// the same text for any width, so one u128 form serves ct_label, ct_mark and ports).
fn put_hex(v: u128) -> String {
    if v == 0 {
        "0".into()
    } else {
        format!("{v:#x}")
    }
}

/// `format_ct_label_masked` (and `mf_format` of a hexadecimal field): value, and
/// `/mask` unless all ones.
fn hex_u128(value: u128, mask: Option<u128>) -> String {
    match mask {
        Some(m) if m != u128::MAX => format!("{}/{}", put_hex(value), put_hex(m)),
        _ => put_hex(value),
    }
}

/// `mf_format` of a decimal field (`mf_format_integer_string`): decimal, and `/<hex mask>`.
fn dec_masked(value: u16, mask: Option<u16>) -> String {
    match mask {
        Some(m) if m != u16::MAX => format!("{value}/{}", put_hex(u128::from(m))),
        _ => value.to_string(),
    }
}

/// `format_flags_masked` over ct_state's bits, lowest first: `+new-inv+trk`.
fn ct_state_flags(value: u32, mask: u32) -> String {
    let names = [
        (ct_state::NEW, "new"),
        (ct_state::EST, "est"),
        (ct_state::REL, "rel"),
        (ct_state::RPL, "rpl"),
        (ct_state::INV, "inv"),
        (ct_state::TRK, "trk"),
        (0x40, "snat"),
        (0x80, "dnat"),
    ];
    if mask == 0 {
        return "0/0".into();
    }
    let mut s = String::new();
    for bit in (0..32).map(|i| 1u32 << i).filter(|b| mask & b != 0) {
        s.push(if value & bit != 0 { '+' } else { '-' });
        match names.iter().find(|(b, _)| *b == bit) {
            Some((_, n)) => s.push_str(n),
            None => {
                let _ = write!(s, "[{bit:x}]");
            }
        }
    }
    s
}

/// A register value as OVS prints it: hex, but zero as `0` (`reg0=0/0xff`,
/// `set_field:0->reg2`), as `ovs-ofctl` does.
fn hex_masked(value: u32, mask: Option<u32>) -> String {
    let v = if value == 0 {
        "0".to_string()
    } else {
        format!("{value:#x}")
    };
    match mask {
        Some(m) if m != u32::MAX => format!("{v}/{m:#x}"),
        _ => v,
    }
}

fn mac(m: &Mac) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn mac_masked(m: &Mac, mask: Option<&Mac>) -> String {
    match mask {
        Some(k) if *k != [0xff; 6] => format!("{}/{}", mac(m), mac(k)),
        _ => mac(m),
    }
}

fn v4_masked(a: Ipv4Addr, m: Option<Ipv4Addr>) -> String {
    net_masked(a, m, m.map(|m| u128::from(u32::from(m)) << 96), 32)
}

fn v6_masked(a: Ipv6Addr, m: Option<Ipv6Addr>) -> String {
    net_masked(a, m, m.map(u128::from), 128)
}

/// An address and its mask as OVS prints them: bare when exact, `/len` for a prefix, else
/// `/mask`. `bits` is the mask aligned to the left of 128 bits; `width` the address's.
fn net_masked<A: std::fmt::Display>(
    addr: A,
    mask: Option<A>,
    bits: Option<u128>,
    width: u32,
) -> String {
    match (mask, bits) {
        (Some(m), Some(b)) => {
            let ones = b.leading_ones();
            if ones >= width {
                addr.to_string()
            } else if ones + b.trailing_zeros() == 128 {
                format!("{addr}/{ones}")
            } else {
                format!("{addr}/{m}")
            }
        }
        _ => addr.to_string(),
    }
}

/// `ofputil_format_port`: a number, or the name of a reserved port.
fn port_name(p: u32) -> String {
    match p {
        port::IN_PORT => "IN_PORT".into(),
        0xffff_fff9 => "TABLE".into(),
        port::NORMAL => "NORMAL".into(),
        port::FLOOD => "FLOOD".into(),
        port::ALL => "ALL".into(),
        port::CONTROLLER => "CONTROLLER".into(),
        port::LOCAL => "LOCAL".into(),
        port::ANY => "ANY".into(),
        p => p.to_string(),
    }
}

fn raw_oxm(f: &MatchField) -> String {
    match f {
        MatchField::Other {
            class,
            field,
            hasmask,
            payload,
        } => format!(
            "oxm(class={:#06x},field={field}{},{})",
            class.0,
            if *hasmask { ",masked" } else { "" },
            hex(payload)
        ),
        _ => String::new(),
    }
}

fn hex(b: &[u8]) -> String {
    let mut s = String::from("0x");
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
    s
}

/// `ofpacts_format`: the apply-actions, then the other instructions; `drop` when empty.
pub fn format_instructions(ins: &[Instruction]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for i in ins {
        match i {
            Instruction::ApplyActions(actions) => parts.extend(actions.iter().map(format_action)),
            Instruction::GotoTable(t) => parts.push(format!("goto_table:{t}")),
            Instruction::Other { type_, body } => {
                parts.push(format!("instruction(type={},{})", type_.0, hex(body)));
            }
        }
    }
    if parts.is_empty() {
        "drop".into()
    } else {
        parts.join(",")
    }
}

fn format_action(a: &Action) -> String {
    match a {
        Action::Output { port: p, max_len } => match *p {
            port::CONTROLLER => format!("CONTROLLER:{max_len}"),
            p if p < port::MAX => format!("output:{p}"),
            p => port_name(p),
        },
        Action::SetField(f @ MatchField::Other { .. }) => {
            // An xreg pair, if it is one, prints as its registers.
            let m = Match::new(vec![f.clone()]);
            m.fields()
                .iter()
                .map(set_field)
                .collect::<Vec<_>>()
                .join(",")
        }
        Action::SetField(f) => set_field(f),
        Action::OutputReg { src, ofs_nbits, .. } => {
            format!("output:{}", subfield(*src, *ofs_nbits))
        }
        Action::Resubmit { in_port, table } => {
            let port = if *in_port == port::IN_PORT_16 {
                String::new()
            } else {
                port_name(u32::from(*in_port))
            };
            if *table == 0xff && !port.is_empty() {
                format!("resubmit:{port}")
            } else if *table == 0xff {
                format!("resubmit({port},)")
            } else {
                format!("resubmit({port},{table})")
            }
        }
        Action::Conjunction {
            id,
            clause,
            n_clauses,
        } => format!("conjunction({id},{}/{n_clauses})", u16::from(*clause) + 1),
        Action::Ct(ct) => format_ct(ct),
        Action::Controller2(props) => format_controller(props),
        Action::Other { type_, body } => format!("action(type={:#x},{})", type_.0, hex(body)),
    }
}

/// `format_CT`: flags, table, zone, `exec(...)`, alg; a leading NAT (kept raw) prints
/// inside `exec` where OVS would print `nat(...)` before it.
fn format_ct(ct: &Ct) -> String {
    let mut s = String::from("ct(");
    if ct.flags & ct_flags::COMMIT != 0 {
        s.push_str("commit,");
    }
    if ct.flags & ct_flags::FORCE != 0 {
        s.push_str("force,");
    }
    if ct.table != CT_RECIRC_NONE {
        let _ = write!(s, "table={},", ct.table);
    }
    match ct.zone {
        CtZone::Field { src, ofs_nbits } => {
            let _ = write!(s, "zone={},", subfield(src, ofs_nbits));
        }
        CtZone::Imm(0) => {}
        CtZone::Imm(z) => {
            let _ = write!(s, "zone={z},");
        }
    }
    if !ct.actions.is_empty() {
        let exec: Vec<String> = ct.actions.iter().map(format_action).collect();
        let _ = write!(s, "exec({}),", exec.join(","));
    }
    match ct.alg {
        0 => {}
        21 => s.push_str("alg=ftp,"),
        69 => s.push_str("alg=tftp,"),
        a => {
            let _ = write!(s, "alg={a},");
        }
    }
    if s.ends_with(',') {
        s.pop();
    }
    s.push(')');
    s
}

/// `format_CONTROLLER`: `CONTROLLER:<max_len>` when only max_len is set, else
/// `controller(reason=…,max_len=…,id=…,userdata=…,pause,meter_id=…)` without defaults.
fn format_controller(props: &[ControllerProp]) -> String {
    let (mut max_len, mut id, mut reason) = (u16::MAX, 0u16, PacketInReason::ACTION);
    let (mut userdata, mut pause, mut meter) = (&[][..], false, 0u32);
    let mut unknown = Vec::new();
    for p in props {
        match p {
            ControllerProp::MaxLen(m) => max_len = *m,
            ControllerProp::ControllerId(i) => id = *i,
            ControllerProp::Reason(r) => reason = *r,
            ControllerProp::Userdata(d) => userdata = d,
            ControllerProp::Pause => pause = true,
            ControllerProp::MeterId(m) => meter = *m,
            ControllerProp::Other { type_, value } => {
                unknown.push(format!("prop(type={},{})", type_.0, hex(value)));
            }
        }
    }
    if reason == PacketInReason::ACTION
        && id == 0
        && userdata.is_empty()
        && !pause
        && meter == 0
        && unknown.is_empty()
    {
        return format!("CONTROLLER:{max_len}");
    }
    let mut parts = Vec::new();
    if reason != PacketInReason::ACTION {
        parts.push(format!(
            "reason={}",
            match reason {
                PacketInReason::NO_MATCH => "no_match".into(),
                PacketInReason::INVALID_TTL => "invalid_ttl".into(),
                PacketInReason::ACTION_SET => "action_set".into(),
                PacketInReason::GROUP => "group".into(),
                PacketInReason::PACKET_OUT => "packet_out".into(),
                PacketInReason::EXPLICIT_MISS | PacketInReason::IMPLICIT_MISS => String::new(),
                r => r.0.to_string(),
            }
        ));
    }
    if max_len != u16::MAX {
        parts.push(format!("max_len={max_len}"));
    }
    if id != 0 {
        parts.push(format!("id={id}"));
    }
    if !userdata.is_empty() {
        let bytes: Vec<String> = userdata.iter().map(|b| format!("{b:02x}")).collect();
        parts.push(format!("userdata={}", bytes.join(".")));
    }
    if pause {
        parts.push("pause".into());
    }
    if meter != 0 {
        parts.push(format!("meter_id={meter}"));
    }
    parts.extend(unknown);
    format!("controller({})", parts.join(","))
}

/// `NXM_NX_REG<n>[]`, `[bit]` or `[start..end]` (`mf_format_subfield`).
fn subfield(header: u32, ofs_nbits: u16) -> String {
    let class = (header >> 16) as u16;
    let field = (header >> 9) & 0x7f;
    let name = if class == OxmClass::NXM_1.0 && field <= 15 {
        format!("NXM_NX_REG{field}")
    } else {
        format!("field({header:#010x})")
    };
    let ofs = ofs_nbits >> 6;
    let nbits = (ofs_nbits & 0x3f) + 1;
    let width = header & 0xff;
    if ofs == 0 && u32::from(nbits) == width * 8 {
        format!("{name}[]")
    } else if nbits == 1 {
        format!("{name}[{ofs}]")
    } else {
        format!("{name}[{ofs}..{}]", ofs + nbits - 1)
    }
}

/// `set_field:<value>[/<mask>]-><field>` with OVS's field names.
fn set_field(f: &MatchField) -> String {
    use MatchField::*;
    let (value, name) = match f {
        Reg { idx, value, mask } => (hex_masked(*value, *mask), format!("reg{idx}")),
        EthDst(m, k) => (mac_masked(m, k.as_ref()), "eth_dst".into()),
        EthSrc(m, k) => (mac_masked(m, k.as_ref()), "eth_src".into()),
        Ipv4Src(a, m) => (v4_masked(*a, *m), "ip_src".into()),
        Ipv4Dst(a, m) => (v4_masked(*a, *m), "ip_dst".into()),
        Ipv6Src(a, m) => (v6_masked(*a, *m), "ipv6_src".into()),
        Ipv6Dst(a, m) => (v6_masked(*a, *m), "ipv6_dst".into()),
        InPort(p) => (port_name(*p), "in_port".into()),
        EthType(t) => (format!("{t:#06x}"), "eth_type".into()),
        IpProto(p) => (p.to_string(), "nw_proto".into()),
        TcpSrc(p) => (p.to_string(), "tcp_src".into()),
        TcpDst(p) => (p.to_string(), "tcp_dst".into()),
        UdpSrc(p) => (p.to_string(), "udp_src".into()),
        UdpDst(p) => (p.to_string(), "udp_dst".into()),
        Icmpv4Type(t) => (t.to_string(), "icmp_type".into()),
        Icmpv6Type(t) => (t.to_string(), "icmpv6_type".into()),
        Icmpv4Code(c) => (c.to_string(), "icmp_code".into()),
        Icmpv6Code(c) => (c.to_string(), "icmpv6_code".into()),
        TcpSrcMasked(p, m) => (dec_masked(*p, Some(*m)), "tcp_src".into()),
        TcpDstMasked(p, m) => (dec_masked(*p, Some(*m)), "tcp_dst".into()),
        UdpSrcMasked(p, m) => (dec_masked(*p, Some(*m)), "udp_src".into()),
        UdpDstMasked(p, m) => (dec_masked(*p, Some(*m)), "udp_dst".into()),
        SctpSrc(p, m) => (dec_masked(*p, *m), "sctp_src".into()),
        SctpDst(p, m) => (dec_masked(*p, *m), "sctp_dst".into()),
        ConjId(id) => (id.to_string(), "conj_id".into()),
        CtZone(z) => (z.to_string(), "ct_zone".into()),
        CtMark { value, mask } => (
            hex_u128(
                u128::from(*value),
                mask.map(u128::from).filter(|m| *m != 0xffff_ffff),
            ),
            "ct_mark".into(),
        ),
        CtLabel { value, mask } => (
            hex_u128(value.get(), mask.map(super::oxm::Be128::get)),
            "ct_label".into(),
        ),
        CtState { value, mask } => (hex_masked(*value, *mask), "ct_state".into()),
        Other { .. } => return format!("set_field:{}", raw_oxm(f)),
    };
    format!("set_field:{value}->{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Zero prints as OVS prints it (`ovs-ofctl parse-flow` of `reg0=0/0xff,reg1=0`).
    #[test]
    fn zero_register_values_print_as_ovs_prints_them() {
        assert_eq!(hex_masked(0, Some(0xff)), "0/0xff");
        assert_eq!(hex_masked(0, None), "0");
        assert_eq!(hex_masked(0x32, None), "0x32");
        assert_eq!(hex_masked(0x200006, Some(0x60000f)), "0x200006/0x60000f");
    }

    #[test]
    fn durations_print_like_ovs() {
        assert_eq!(duration(1, 500_000_000), "1.500s");
        assert_eq!(duration(0, 0), "0s");
        assert_eq!(duration(2, 1_500_000), "2.001500s");
        assert_eq!(duration(2, 1_500_001), "2.001500001s");
        assert_eq!(duration(u32::MAX, u32::MAX), "4294967295.4294967295s");
    }

    #[test]
    fn ct_state_bits_lowest_first() {
        assert_eq!(
            ct_state_flags(ct_state::NEW | ct_state::TRK, 0x31),
            "+new-inv+trk"
        );
        assert_eq!(ct_state_flags(0, 0), "0/0");
    }

    #[test]
    fn masks_print_as_prefixes_when_they_are() {
        let a = Ipv4Addr::new(192, 0, 2, 0);
        assert_eq!(
            v4_masked(a, Some(Ipv4Addr::new(255, 255, 255, 0))),
            "192.0.2.0/24"
        );
        assert_eq!(
            v4_masked(a, Some(Ipv4Addr::new(255, 0, 255, 0))),
            "192.0.2.0/255.0.255.0"
        );
        assert_eq!(subfield(0x0001_0204, 31), "NXM_NX_REG1[]");
        assert_eq!(subfield(0x0001_0204, 15), "NXM_NX_REG1[0..15]");
    }

    #[test]
    fn stats_decode_skips_what_it_does_not_know() {
        let mut oxs = Vec::new();
        oxs.extend([0x80, 0x02, OXS_DURATION << 1, 8]);
        oxs.extend(((3u64 << 32) | 500_000_000).to_be_bytes());
        oxs.extend([0x80, 0x02, 3 << 1, 4, 0, 0, 0, 1]); // flow_count: skipped
        oxs.extend([0x80, 0x02, OXS_PACKET_COUNT << 1, 8]);
        oxs.extend(7u64.to_be_bytes());
        oxs.extend([0x80, 0x02, OXS_BYTE_COUNT << 1, 8, 1]); // truncated: ends the list
        assert_eq!(
            FlowStats::decode(&oxs),
            FlowStats {
                duration: Some((3, 500_000_000)),
                idle_time: None,
                packets: Some(7),
                bytes: None,
            }
        );
    }
}
