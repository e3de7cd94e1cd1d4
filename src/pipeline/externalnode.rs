//! ExternalNode flows as pure builders: the uplink pair that forwards between the host's
//! internal port and the NIC attached as uplink, and the policy-bypass rules of the agent
//! config (docs/antrea-compat.md#agent-config-and-policy-bypass-rules,
//! docs/antrea-compat.md#externalnode-flows), with the rules' validation.
//!
//! Where they sit in tether's pipeline (docs/pipeline.md#tables), and why:
//! * uplink pair — `L2ForwardingCalc`, priority [`priority::LOW`] (190): `in_port=<host>`
//!   → `reg1=<uplink>` and `in_port=<uplink>` → `reg1=<host>`, each with the
//!   output-to-port mark, then on to `TrafficControl`. Every protocol (Antrea sends non-IP
//!   through a separate NonIP table; tether has one path for all). Pod MAC flows sit at 200
//!   in the same table, so a Pod on the same bridge still wins over the pair.
//! * bypass — one flow per rule at [`priority::NORMAL`] in the security table of its
//!   direction: ingress matches the peer as `ip_src` in `IngressSecurityClassifier` and
//!   jumps to `ConntrackCommit`; egress matches it as `ip_dst` in `EgressSecurityClassifier`
//!   and jumps to `L2ForwardingCalc`: past the policy rule tables, but not past the commit,
//!   so the replies of a bypassed connection are established and skip the rules too. The
//!   family of the CIDR decides IPv4 or IPv6 (Antrea only ever builds IPv4 ones, so IPv6
//!   bypassed policy altogether; a finding in docs/antrea-compat.md#externalnode-flows).
//!   Antrea also matches `ct_state=+new+trk`; tether does not, so a bypass rule works the
//!   same whether or not NetworkPolicy (and with it conntrack) is on, and established
//!   packets skip the rules anyway.
//!
//! Not here: which ports or rules are current (the ExternalNode controller decides).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{priority, reg, table};
use crate::openflow::oxm::values::{
    ETH_TYPE_IPV4, ETH_TYPE_IPV6, IP_PROTO_ICMP, IP_PROTO_ICMPV6, IP_PROTO_TCP, IP_PROTO_UDP,
};
use crate::openflow::{Action, Flow, MatchField};

/// The two flows forwarding every packet between the host port and the uplink.
pub fn uplink_pair_flows(host_ofport: u32, uplink_ofport: u32) -> Vec<Flow> {
    let pair = |from: u32, to: u32| {
        let (idx, value, mask) = reg::OUTPUT_TO_PORT;
        Flow::new(table::L2_FORWARDING, priority::LOW)
            .matching(MatchField::InPort(from))
            .actions([
                Action::load_reg(reg::OUTPUT_PORT, to, u32::MAX),
                Action::load_reg(idx, value, mask),
            ])
            .goto(table::TRAFFIC_CONTROL)
    };
    vec![
        pair(host_ofport, uplink_ofport),
        pair(uplink_ofport, host_ofport),
    ]
}

/// Antrea's `PolicyBypassRule.Direction`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BypassDirection {
    Ingress,
    Egress,
}

/// Antrea's `PolicyBypassRule.Protocol`: `ip` means any IP protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BypassProtocol {
    Tcp,
    Udp,
    Icmp,
    Ip,
}

/// An IP network, host bits cleared (what Go's `net.ParseCIDR` returns as the IPNet).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cidr {
    pub addr: IpAddr,
    pub len: u8,
}

impl Cidr {
    /// `a.b.c.d/n` or `x::y/n`; a prefix length is required, as for `net.ParseCIDR`.
    pub fn parse(s: &str) -> Option<Cidr> {
        let (a, l) = s.split_once('/')?;
        let addr: IpAddr = a.parse().ok()?;
        // Go accepts decimal digits only (no sign, no spaces).
        if l.is_empty() || !l.bytes().all(|b| b.is_ascii_digit()) || l.len() > 3 {
            return None;
        }
        let len: u8 = l.parse().ok()?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if len > max {
            return None;
        }
        let addr = match addr {
            IpAddr::V4(v) => IpAddr::V4(Ipv4Addr::from(v.to_bits() & v4_mask(len).to_bits())),
            IpAddr::V6(v) => IpAddr::V6(Ipv6Addr::from(v.to_bits() & v6_mask(len).to_bits())),
        };
        Some(Cidr { addr, len })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

fn v4_mask(len: u8) -> Ipv4Addr {
    Ipv4Addr::from(u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0))
}

fn v6_mask(len: u8) -> Ipv6Addr {
    Ipv6Addr::from(u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0))
}

/// One `externalNode.policyBypassRules[]` entry of the agent config, validated.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PolicyBypassRule {
    pub direction: BypassDirection,
    pub protocol: BypassProtocol,
    /// The peer: source for ingress, destination for egress.
    pub cidr: Cidr,
    /// Destination port; 0 = any. Only used for tcp and udp.
    pub port: u16,
}

impl PolicyBypassRule {
    /// Decode and validate one rule as Antrea's `validatePolicyBypassRulesConfig` does
    /// (`cmd/antrea-agent/options.go`): direction ∈ {ingress, egress}, protocol ∈ {tcp,
    /// udp, icmp, ip}, a parseable CIDR, a port in 0..=65535 that is not 0 for tcp/udp.
    /// `path` names the rule in errors (`externalNode.policyBypassRules[0]`). Unknown keys
    /// are refused too: a misspelt `cidr` would otherwise bypass policy for nothing.
    pub fn from_json(v: &serde_json::Value, path: &str) -> Result<PolicyBypassRule, String> {
        let obj = v.as_object().ok_or_else(|| {
            format!("{path}: must be a mapping with direction, protocol, cidr, port")
        })?;
        for k in obj.keys() {
            if !matches!(k.as_str(), "direction" | "protocol" | "cidr" | "port") {
                return Err(format!(
                    "{path}.{k}: unknown key (expected direction, protocol, cidr, port)"
                ));
            }
        }
        let text = |key: &str| -> Result<&str, String> {
            match obj.get(key) {
                Some(serde_json::Value::String(s)) => Ok(s.as_str()),
                Some(other) => Err(format!("{path}.{key}: must be a string, got {other}")),
                None => Err(format!("{path}.{key}: required")),
            }
        };
        let direction = match text("direction")? {
            "ingress" => BypassDirection::Ingress,
            "egress" => BypassDirection::Egress,
            other => {
                return Err(format!(
                    "{path}.direction: must be \"ingress\" or \"egress\", got {other:?}"
                ));
            }
        };
        let protocol = match text("protocol")? {
            "tcp" => BypassProtocol::Tcp,
            "udp" => BypassProtocol::Udp,
            "icmp" => BypassProtocol::Icmp,
            "ip" => BypassProtocol::Ip,
            other => {
                return Err(format!(
                    "{path}.protocol: must be one of tcp, udp, icmp, ip, got {other:?}"
                ));
            }
        };
        let raw_cidr = text("cidr")?;
        let cidr = Cidr::parse(raw_cidr).ok_or_else(|| {
            format!("{path}.cidr: {raw_cidr:?} is not a CIDR (e.g. 192.0.2.0/24 or 2001:db8::/64)")
        })?;
        let port = match obj.get("port") {
            None | Some(serde_json::Value::Null) => 0,
            Some(p) => {
                let n = p
                    .as_i64()
                    .ok_or_else(|| format!("{path}.port: must be an integer, got {p}"))?;
                u16::try_from(n)
                    .map_err(|_| format!("{path}.port: must be in 0..65535, got {n}"))?
            }
        };
        if port == 0 && matches!(protocol, BypassProtocol::Tcp | BypassProtocol::Udp) {
            return Err(format!(
                "{path}.port: required (1..65535) for protocol {}",
                protocol.name()
            ));
        }
        Ok(PolicyBypassRule {
            direction,
            protocol,
            cidr,
            port,
        })
    }
}

/// Every rule of `externalNode.policyBypassRules` (as the config file holds them), each
/// validated with its key path (`externalNode.policyBypassRules[2].port: …`); the first
/// invalid rule is the error, so the daemon can refuse to start naming it.
pub fn parse_bypass_rules(values: &[serde_json::Value]) -> Result<Vec<PolicyBypassRule>, String> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            PolicyBypassRule::from_json(v, &format!("externalNode.policyBypassRules[{i}]"))
        })
        .collect()
}

impl BypassProtocol {
    pub fn name(self) -> &'static str {
        match self {
            BypassProtocol::Tcp => "tcp",
            BypassProtocol::Udp => "udp",
            BypassProtocol::Icmp => "icmp",
            BypassProtocol::Ip => "ip",
        }
    }
}

impl fmt::Display for PolicyBypassRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = match self.direction {
            BypassDirection::Ingress => "ingress",
            BypassDirection::Egress => "egress",
        };
        write!(f, "{d} {} {}", self.protocol.name(), self.cidr)?;
        if self.port != 0 {
            write!(f, " port {}", self.port)?;
        }
        Ok(())
    }
}

/// The flow of one bypass rule (see the module doc for table and target).
pub fn bypass_flow(rule: &PolicyBypassRule) -> Flow {
    let (tbl, next) = match rule.direction {
        BypassDirection::Ingress => (table::INGRESS_SECURITY, table::CONNTRACK_COMMIT),
        BypassDirection::Egress => (table::EGRESS_SECURITY, table::L2_FORWARDING),
    };
    let ingress = rule.direction == BypassDirection::Ingress;
    let mut f = Flow::new(tbl, priority::NORMAL);
    let v6 = match rule.cidr.addr {
        IpAddr::V4(a) => {
            let m = Some(v4_mask(rule.cidr.len));
            f = f
                .matching(MatchField::EthType(ETH_TYPE_IPV4))
                .matching(if ingress {
                    MatchField::Ipv4Src(a, m)
                } else {
                    MatchField::Ipv4Dst(a, m)
                });
            false
        }
        IpAddr::V6(a) => {
            let m = Some(v6_mask(rule.cidr.len));
            f = f
                .matching(MatchField::EthType(ETH_TYPE_IPV6))
                .matching(if ingress {
                    MatchField::Ipv6Src(a, m)
                } else {
                    MatchField::Ipv6Dst(a, m)
                });
            true
        }
    };
    match rule.protocol {
        BypassProtocol::Tcp => {
            f = f.matching(MatchField::IpProto(IP_PROTO_TCP));
            if rule.port != 0 {
                f = f.matching(MatchField::TcpDst(rule.port));
            }
        }
        BypassProtocol::Udp => {
            f = f.matching(MatchField::IpProto(IP_PROTO_UDP));
            if rule.port != 0 {
                f = f.matching(MatchField::UdpDst(rule.port));
            }
        }
        // A port on an icmp/ip rule is accepted (Antrea accepts it) but cannot be matched:
        // ICMP has no ports and OVS refuses tp_dst without tcp/udp/sctp.
        BypassProtocol::Icmp => {
            f = f.matching(MatchField::IpProto(if v6 {
                IP_PROTO_ICMPV6
            } else {
                IP_PROTO_ICMP
            }));
        }
        BypassProtocol::Ip => {}
    }
    f.goto(next)
}

/// One flow per rule, in rule order; identical rules collapse into one flow.
pub fn bypass_flows(rules: &[PolicyBypassRule]) -> Vec<Flow> {
    let mut flows: Vec<Flow> = Vec::new();
    for r in rules {
        let f = bypass_flow(r);
        if !flows.contains(&f) {
            flows.push(f);
        }
    }
    flows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::Instruction;
    use serde_json::json;

    fn rule(v: serde_json::Value) -> Result<PolicyBypassRule, String> {
        PolicyBypassRule::from_json(&v, "externalNode.policyBypassRules[0]")
    }

    #[test]
    fn pair_flows_forward_both_ways_with_output_mark() {
        let f = uplink_pair_flows(3, 2);
        assert_eq!(f.len(), 2);
        for (flow, (from, to)) in f.iter().zip([(3, 2), (2, 3)]) {
            assert_eq!(flow.key.table, table::L2_FORWARDING);
            assert_eq!(flow.key.priority, 190);
            assert_eq!(flow.key.match_.fields(), &[MatchField::InPort(from)]);
            assert_eq!(
                *flow.value.instructions,
                vec![
                    Instruction::ApplyActions(vec![
                        Action::load_reg(1, to, u32::MAX),
                        Action::load_reg(0, 0x20_0000, 0x60_0000),
                    ]),
                    Instruction::GotoTable(table::TRAFFIC_CONTROL),
                ]
            );
        }
    }

    #[test]
    fn antrea_config_rules_validate() {
        let ok =
            rule(json!({"direction":"ingress","protocol":"tcp","cidr":"1.1.1.1/32","port":22}))
                .unwrap();
        assert_eq!(ok.direction, BypassDirection::Ingress);
        assert_eq!(ok.protocol, BypassProtocol::Tcp);
        assert_eq!(ok.cidr.to_string(), "1.1.1.1/32");
        assert_eq!(ok.port, 22);
        // Host bits are cleared, as net.ParseCIDR's IPNet does.
        let r =
            rule(json!({"direction":"egress","protocol":"icmp","cidr":"192.0.2.77/24"})).unwrap();
        assert_eq!((r.cidr.to_string(), r.port), ("192.0.2.0/24".into(), 0));
        let r =
            rule(json!({"direction":"egress","protocol":"ip","cidr":"2001:db8::1/32"})).unwrap();
        assert_eq!(r.cidr.to_string(), "2001:db8::/32");
        let cases = [
            (
                json!({"direction":"in","protocol":"tcp","cidr":"1.1.1.1/32","port":22}),
                "externalNode.policyBypassRules[0].direction: must be \"ingress\" or \"egress\", got \"in\"",
            ),
            (
                json!({"direction":"ingress","protocol":"TCP","cidr":"1.1.1.1/32","port":22}),
                "externalNode.policyBypassRules[0].protocol: must be one of tcp, udp, icmp, ip, got \"TCP\"",
            ),
            (
                json!({"direction":"ingress","protocol":"igmp","cidr":"1.1.1.1/32"}),
                "externalNode.policyBypassRules[0].protocol: must be one of tcp, udp, icmp, ip, got \"igmp\"",
            ),
            (
                json!({"direction":"ingress","protocol":"tcp","cidr":"1.1.1.1","port":22}),
                "externalNode.policyBypassRules[0].cidr: \"1.1.1.1\" is not a CIDR (e.g. 192.0.2.0/24 or 2001:db8::/64)",
            ),
            (
                json!({"direction":"ingress","protocol":"tcp","cidr":"1.1.1.1/33","port":22}),
                "externalNode.policyBypassRules[0].cidr: \"1.1.1.1/33\" is not a CIDR (e.g. 192.0.2.0/24 or 2001:db8::/64)",
            ),
            (
                json!({"direction":"ingress","protocol":"tcp","cidr":"1.1.1.1/32"}),
                "externalNode.policyBypassRules[0].port: required (1..65535) for protocol tcp",
            ),
            (
                json!({"direction":"ingress","protocol":"udp","cidr":"1.1.1.1/32","port":0}),
                "externalNode.policyBypassRules[0].port: required (1..65535) for protocol udp",
            ),
            (
                json!({"direction":"ingress","protocol":"udp","cidr":"1.1.1.1/32","port":65536}),
                "externalNode.policyBypassRules[0].port: must be in 0..65535, got 65536",
            ),
            (
                json!({"direction":"ingress","protocol":"udp","cidr":"1.1.1.1/32","port":-1}),
                "externalNode.policyBypassRules[0].port: must be in 0..65535, got -1",
            ),
            (
                json!({"direction":"ingress","protocol":"udp","cidr":"1.1.1.1/32","port":"22"}),
                "externalNode.policyBypassRules[0].port: must be an integer, got \"22\"",
            ),
            (
                json!({"protocol":"udp","cidr":"1.1.1.1/32","port":53}),
                "externalNode.policyBypassRules[0].direction: required",
            ),
            (
                json!({"direction":"ingress","protocol":"udp","CIDR":"1.1.1.1/32","port":53}),
                "externalNode.policyBypassRules[0].CIDR: unknown key (expected direction, protocol, cidr, port)",
            ),
            (
                json!("ingress"),
                "externalNode.policyBypassRules[0]: must be a mapping with direction, protocol, cidr, port",
            ),
        ];
        for (v, want) in cases {
            assert_eq!(rule(v.clone()).unwrap_err(), want, "{v}");
        }
    }

    #[test]
    fn rule_lists_name_the_bad_index() {
        let ok = json!({"direction":"egress","protocol":"ip","cidr":"::/0"});
        let bad = json!({"direction":"egress","protocol":"udp","cidr":"::/0"});
        assert_eq!(
            parse_bypass_rules(&[ok.clone(), ok.clone()]).unwrap().len(),
            2
        );
        assert_eq!(
            parse_bypass_rules(&[ok, bad]).unwrap_err(),
            "externalNode.policyBypassRules[1].port: required (1..65535) for protocol udp"
        );
        assert_eq!(parse_bypass_rules(&[]).unwrap(), vec![]);
    }

    #[test]
    fn bypass_flows_per_family_and_direction() {
        let r = |v| rule(v).unwrap();
        let ing = bypass_flow(&r(
            json!({"direction":"ingress","protocol":"tcp","cidr":"198.51.100.0/24","port":22}),
        ));
        assert_eq!(ing.key.table, table::INGRESS_SECURITY);
        assert_eq!(ing.key.priority, 200);
        assert_eq!(
            ing.key.match_.fields(),
            &[
                MatchField::EthType(0x0800),
                MatchField::IpProto(6),
                MatchField::Ipv4Src(
                    "198.51.100.0".parse().unwrap(),
                    Some("255.255.255.0".parse().unwrap())
                ),
                MatchField::TcpDst(22),
            ]
        );
        assert_eq!(
            *ing.value.instructions,
            vec![Instruction::GotoTable(table::CONNTRACK_COMMIT)]
        );

        let eg = bypass_flow(&r(
            json!({"direction":"egress","protocol":"icmp","cidr":"2001:db8:2::/48"}),
        ));
        assert_eq!(eg.key.table, table::EGRESS_SECURITY);
        assert_eq!(
            eg.key.match_.fields(),
            &[
                MatchField::EthType(0x86dd),
                MatchField::IpProto(58),
                MatchField::Ipv6Dst(
                    "2001:db8:2::".parse().unwrap(),
                    Some("ffff:ffff:ffff::".parse().unwrap())
                ),
            ]
        );
        assert_eq!(
            *eg.value.instructions,
            vec![Instruction::GotoTable(table::L2_FORWARDING)]
        );

        // A /32 is an exact match; udp with port; ip matches no protocol.
        let host = bypass_flow(&r(
            json!({"direction":"egress","protocol":"udp","cidr":"203.0.113.5/32","port":53}),
        ));
        assert_eq!(
            host.key.match_.fields(),
            &[
                MatchField::EthType(0x0800),
                MatchField::IpProto(17),
                MatchField::Ipv4Dst("203.0.113.5".parse().unwrap(), None),
                MatchField::UdpDst(53),
            ]
        );
        let any = bypass_flow(&r(
            json!({"direction":"ingress","protocol":"ip","cidr":"0.0.0.0/0","port":7}),
        ));
        assert_eq!(
            any.key.match_.fields(),
            &[
                MatchField::EthType(0x0800),
                MatchField::Ipv4Src("0.0.0.0".parse().unwrap(), Some("0.0.0.0".parse().unwrap()))
            ]
        );
        let rules = [
            r(json!({"direction":"ingress","protocol":"ip","cidr":"0.0.0.0/0"})),
            r(json!({"direction":"ingress","protocol":"ip","cidr":"0.0.0.0/0"})),
            r(json!({"direction":"ingress","protocol":"ip","cidr":"::/0"})),
        ];
        assert_eq!(bypass_flows(&rules).len(), 2);
    }
}
