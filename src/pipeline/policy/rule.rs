//! One rule's match clauses as data (reference Part B §2.2): its peer addresses by IP
//! family, its services as protocol plus port value/mask pairs or ICMP type/code, and how
//! many conjunction dimensions it has. Not the flows: a later stage turns these into
//! `conjunction(id, k/n)` match flows.

use std::net::IpAddr;

use super::ranges::{PortMask, port_range_masks, subtract_cidrs};
use crate::controlplane::{IpBlock, IpNet, Port, Protocol, Rule, Service};

/// Peer addresses, deduplicated and sorted, split by family; a single IP is a /32 or
/// /128 (so `IP` and `IP/32` are one match, as in Antrea's `generateGlobalMapKey`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerMatch {
    pub v4: Vec<IpNet>,
    pub v6: Vec<IpNet>,
}

/// AddressGroup member IPs plus `ip_blocks` with their `except` parts subtracted.
/// `member_ips` may repeat and come in any order.
pub fn peer_match(member_ips: &[IpAddr], ip_blocks: &[IpBlock]) -> PeerMatch {
    let mut all: Vec<IpNet> = Vec::with_capacity(member_ips.len() + ip_blocks.len());
    for &ip in member_ips {
        let full = if ip.is_ipv4() { 32 } else { 128 };
        all.extend(IpNet::new(ip, full));
    }
    for b in ip_blocks {
        all.extend(subtract_cidrs(b.cidr, &b.except));
    }
    // One sort instead of a tree: the same order, several times faster at 10,000.
    all.sort_unstable();
    all.dedup();
    let (v4, v6) = all.into_iter().partition(|n| n.addr.is_ipv4());
    PeerMatch { v4, v6 }
}

/// An L4 protocol matched by port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum L4 {
    Tcp,
    Udp,
    Sctp,
}

/// One service as a match.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServiceMatch {
    /// `dst` empty: any port of the protocol.
    Ports { protocol: L4, dst: Vec<PortMask> },
    /// `None`: any type (code).
    Icmp {
        icmp_type: Option<u8>,
        icmp_code: Option<u8>,
    },
}

/// A rule's services clause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Services {
    /// No services: any traffic, and no services dimension.
    Any,
    /// These matches (empty: every service was dropped, e.g. a named port, which a VM
    /// cannot resolve, so the rule matches nothing, as Antrea's `filterUnresolvablePort`
    /// leaves it).
    Matches(Vec<ServiceMatch>),
}

/// The services clause of `services`. Named ports are dropped (an ExternalEntity has
/// none), and so are services with a source port, which are not translated yet (without
/// it the service would match more than it names); [`skipped_services`] says which.
/// Errors name the service: an unsupported protocol (IGMP, unknown) or a port range whose
/// end is below its start.
pub fn services(services: &[Service]) -> Result<Services, String> {
    if services.is_empty() {
        return Ok(Services::Any);
    }
    let mut out = Vec::new();
    for (i, s) in services.iter().enumerate() {
        let protocol = match &s.protocol {
            Protocol::Tcp => L4::Tcp,
            Protocol::Udp => L4::Udp,
            Protocol::Sctp => L4::Sctp,
            Protocol::Icmp => {
                out.push(ServiceMatch::Icmp {
                    icmp_type: s.icmp_type,
                    icmp_code: s.icmp_code,
                });
                continue;
            }
            p => {
                return Err(format!(
                    "service {i}: protocol {} is not supported",
                    p.as_str()
                ));
            }
        };
        if skipped(s).is_some() {
            continue;
        }
        let dst = match (&s.port, s.end_port) {
            (Some(Port::Named(_)), _) => continue,
            (None | Some(Port::Number(0)), _) => Vec::new(),
            (Some(Port::Number(p)), None) => vec![PortMask {
                value: *p,
                mask: u16::MAX,
            }],
            (Some(Port::Number(p)), Some(end)) => {
                port_range_masks(*p, end).map_err(|e| format!("service {i}: {e}"))?
            }
        };
        out.push(ServiceMatch::Ports { protocol, dst });
    }
    Ok(Services::Matches(out))
}

/// Why each service [`services`] drops is dropped, naming it (`service <i>: …`).
pub fn skipped_services(services: &[Service]) -> Vec<String> {
    services
        .iter()
        .enumerate()
        .filter_map(|(i, s)| skipped(s).map(|why| format!("service {i}: {why}")))
        .collect()
}

/// Why `s` cannot be matched as it stands, if it cannot. Only TCP, UDP and SCTP have
/// ports; ICMP ignores them and other protocols fail in [`services`].
fn skipped(s: &Service) -> Option<String> {
    if !matches!(s.protocol, Protocol::Tcp | Protocol::Udp | Protocol::Sctp) {
        return None;
    }
    if let Some(Port::Named(name)) = &s.port {
        return Some(format!(
            "named port {name:?}: named ports cannot be resolved on a VM"
        ));
    }
    if s.src_port.is_some() || s.src_end_port.is_some() {
        return Some("source ports are not matched yet".into());
    }
    None
}

/// Conjunction dimensions: the from and to clauses are always there (an empty peer is
/// "any"; on a VM one side is the VM's own port or IPs), the services clause only when
/// the rule names services.
pub fn dimensions(rule: &Rule) -> u8 {
    if rule.services.is_empty() { 2 } else { 3 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controlplane::{Direction, Peer, RuleAction};

    fn net(s: &str) -> IpNet {
        let (a, p) = s.split_once('/').unwrap();
        IpNet::new(a.parse().unwrap(), p.parse().unwrap()).unwrap()
    }

    fn svc(protocol: Protocol, port: Option<u16>) -> Service {
        Service {
            protocol,
            port: port.map(Port::Number),
            ..Service::default()
        }
    }

    fn rule(direction: Direction, peer: Peer, services: Vec<Service>) -> Rule {
        let (from, to) = match direction {
            Direction::In => (peer, Peer::default()),
            Direction::Out => (Peer::default(), peer),
        };
        Rule {
            direction,
            from,
            to,
            services,
            priority: 0,
            action: RuleAction::Drop,
            enable_logging: false,
            applied_to_groups: Vec::new(),
            name: String::new(),
            log_label: String::new(),
            l7: false,
        }
    }

    fn block(cidr: &str) -> IpBlock {
        IpBlock {
            cidr: net(cidr),
            except: Vec::new(),
        }
    }

    const B_IP: &str = "172.16.100.4";

    #[test]
    fn e1_to_e4_from_the_reference() {
        // Reference Part A §1.4; <B-ip> and <cp-node-ip> are example addresses.
        let tcp5201 = Services::Matches(vec![ServiceMatch::Ports {
            protocol: L4::Tcp,
            dst: vec![PortMask {
                value: 5201,
                mask: 0xffff,
            }],
        }]);
        let b32 = PeerMatch {
            v4: vec![net("172.16.100.4/32")],
            v6: vec![],
        };
        // E1 anp-vmagent-ingress-tcp-entity: from B's AddressGroup member, TCP 5201.
        let e1 = rule(
            Direction::In,
            Peer {
                address_groups: vec!["ag-b".into()],
                ..Peer::default()
            },
            vec![svc(Protocol::Tcp, Some(5201))],
        );
        assert_eq!(
            peer_match(&[B_IP.parse().unwrap()], &e1.from.ip_blocks),
            b32
        );
        assert_eq!(services(&e1.services).unwrap(), tcp5201);
        assert_eq!(dimensions(&e1), 3);
        // E2 anp-vmagent-egress-tcp-ip: to ipBlock B/32, TCP 5201.
        let e2 = rule(
            Direction::Out,
            Peer {
                ip_blocks: vec![block("172.16.100.4/32")],
                ..Peer::default()
            },
            vec![svc(Protocol::Tcp, Some(5201))],
        );
        assert_eq!(peer_match(&[], &e2.to.ip_blocks), b32);
        assert_eq!(services(&e2.services).unwrap(), tcp5201);
        assert_eq!(dimensions(&e2), 3);
        // E3 anp-vmagent-ingress-udp-entity: from ipBlock B/32, UDP 5201.
        let e3 = rule(
            Direction::In,
            Peer {
                ip_blocks: vec![block("172.16.100.4/32")],
                ..Peer::default()
            },
            vec![svc(Protocol::Udp, Some(5201))],
        );
        assert_eq!(peer_match(&[], &e3.from.ip_blocks), b32);
        assert_eq!(
            services(&e3.services).unwrap(),
            Services::Matches(vec![ServiceMatch::Ports {
                protocol: L4::Udp,
                dst: vec![PortMask {
                    value: 5201,
                    mask: 0xffff
                }],
            }])
        );
        // E4 anp-vmagent-ingress-icmp-ip: from the cp node /32, ICMP type 8 code 0.
        let e4 = rule(
            Direction::In,
            Peer {
                ip_blocks: vec![block("172.18.0.2/32")],
                ..Peer::default()
            },
            vec![Service {
                protocol: Protocol::Icmp,
                icmp_type: Some(8),
                icmp_code: Some(0),
                ..Service::default()
            }],
        );
        assert_eq!(
            peer_match(&[], &e4.from.ip_blocks).v4,
            [net("172.18.0.2/32")]
        );
        assert_eq!(
            services(&e4.services).unwrap(),
            Services::Matches(vec![ServiceMatch::Icmp {
                icmp_type: Some(8),
                icmp_code: Some(0)
            }])
        );
        assert_eq!(dimensions(&e4), 3);
        // No services: two dimensions and any traffic.
        let any = rule(Direction::In, Peer::default(), vec![]);
        assert_eq!(
            (dimensions(&any), services(&any.services)),
            (2, Ok(Services::Any))
        );
    }

    #[test]
    fn peers_dedupe_split_and_subtract() {
        let ips: Vec<IpAddr> = ["10.0.0.1", "fd00::1", "10.0.0.1", "10.0.0.2"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let blocks = [
            block("10.0.0.1/32"),
            IpBlock {
                cidr: net("192.168.0.0/30"),
                except: vec![net("192.168.0.1/32")],
            },
        ];
        let got = peer_match(&ips, &blocks);
        assert_eq!(
            got.v4,
            [
                net("10.0.0.1/32"),
                net("10.0.0.2/32"),
                net("192.168.0.0/32"),
                net("192.168.0.2/31"),
            ]
        );
        assert_eq!(got.v6, [net("fd00::1/128")]);
    }

    #[test]
    fn services_ports_ranges_named_and_errors() {
        let range = Service {
            end_port: Some(88),
            ..svc(Protocol::Sctp, Some(80))
        };
        let named = Service {
            port: Some(Port::Named("http".into())),
            ..Service::default()
        };
        assert_eq!(
            services(&[
                range,
                svc(Protocol::Udp, Some(0)),
                svc(Protocol::Tcp, None),
                named.clone()
            ])
            .unwrap(),
            Services::Matches(vec![
                ServiceMatch::Ports {
                    protocol: L4::Sctp,
                    dst: vec![
                        PortMask {
                            value: 80,
                            mask: 0xfff8
                        },
                        PortMask {
                            value: 88,
                            mask: 0xffff
                        },
                    ],
                },
                ServiceMatch::Ports {
                    protocol: L4::Udp,
                    dst: vec![]
                },
                ServiceMatch::Ports {
                    protocol: L4::Tcp,
                    dst: vec![]
                },
            ])
        );
        assert_eq!(
            services(std::slice::from_ref(&named)).unwrap(),
            Services::Matches(vec![])
        );
        let src = Service {
            src_port: Some(1024),
            ..svc(Protocol::Udp, Some(53))
        };
        let icmp = Service {
            protocol: Protocol::Icmp,
            port: Some(Port::Named("x".into())),
            ..Service::default()
        };
        let all = [named, svc(Protocol::Tcp, Some(80)), src, icmp];
        assert_eq!(
            services(&all).unwrap(),
            Services::Matches(vec![
                ServiceMatch::Ports {
                    protocol: L4::Tcp,
                    dst: vec![PortMask {
                        value: 80,
                        mask: 0xffff
                    }],
                },
                ServiceMatch::Icmp {
                    icmp_type: None,
                    icmp_code: None
                },
            ])
        );
        assert_eq!(
            skipped_services(&all),
            [
                "service 0: named port \"http\": named ports cannot be resolved on a VM",
                "service 2: source ports are not matched yet",
            ]
        );
        let bad = Service {
            end_port: Some(10),
            ..svc(Protocol::Tcp, Some(20))
        };
        assert_eq!(
            services(&[svc(Protocol::Tcp, Some(1)), bad]).unwrap_err(),
            "service 1: port range 20-10: the start is above the end"
        );
        assert_eq!(
            services(&[svc(Protocol::Igmp, None)]).unwrap_err(),
            "service 0: protocol IGMP is not supported"
        );
    }
}
