//! CIDR `except` subtraction (Antrea's `ip.DiffFromCIDRs`, checked against its own test
//! vectors) and port range → value/mask pairs (Antrea's `portsToBitRanges`, OVS's masked
//! `tp_dst`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::controlplane::IpNet;

/// `cidr` minus every network in `except`: the fewest CIDRs covering exactly the rest,
/// sorted by address. Excepts of the other family or outside `cidr` are ignored; an
/// except covering `cidr` leaves nothing.
pub fn subtract_cidrs(cidr: IpNet, except: &[IpNet]) -> Vec<IpNet> {
    let bits = width(cidr.addr);
    if cidr.prefix > bits {
        return Vec::new(); // not a network (the fields are public; `IpNet::new` refuses it)
    }
    let base = to_bits(cidr.addr);
    let ex: Vec<(u128, u8)> = except
        .iter()
        .filter(|e| width(e.addr) == bits && e.prefix <= bits)
        .map(|e| (to_bits(e.addr), e.prefix))
        .collect();
    let mut out = Vec::new();
    split(base, cidr.prefix, bits, &ex, &mut out);
    out.into_iter()
        .filter_map(|(a, p)| IpNet::new(from_bits(a, bits)?, p))
        .collect()
}

/// Appends the parts of `addr/prefix` not covered by `ex`, lower half first.
fn split(addr: u128, prefix: u8, bits: u8, ex: &[(u128, u8)], out: &mut Vec<(u128, u8)>) {
    let mut overlaps = false;
    for &(e, ep) in ex {
        let p = prefix.min(ep);
        if mask(e, p, bits) != mask(addr, p, bits) {
            continue;
        }
        if ep <= prefix {
            return; // the except covers this whole block
        }
        overlaps = true;
    }
    if !overlaps {
        out.push((addr, prefix));
        return;
    }
    // Some except lies strictly inside: prefix < ep <= bits, so prefix < bits here.
    let half = 1u128 << (bits - prefix - 1);
    split(addr, prefix + 1, bits, ex, out);
    split(addr | half, prefix + 1, bits, ex, out);
}

/// `a` with only its first `p` of `bits` bits kept.
fn mask(a: u128, p: u8, bits: u8) -> u128 {
    let host = u32::from(bits - p);
    let m = u128::MAX.checked_shl(host).unwrap_or(0);
    a & m
}

fn width(a: IpAddr) -> u8 {
    if a.is_ipv4() { 32 } else { 128 }
}

fn to_bits(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(a) => u128::from(a.to_bits()),
        IpAddr::V6(a) => a.to_bits(),
    }
}

/// The address of `bits` width (`None` cannot happen for blocks split from an IPv4 CIDR).
fn from_bits(a: u128, bits: u8) -> Option<IpAddr> {
    if bits == 32 {
        u32::try_from(a).ok().map(|a| IpAddr::V4(Ipv4Addr::from(a)))
    } else {
        Some(IpAddr::V6(Ipv6Addr::from(a)))
    }
}

/// One masked port match: a port `p` matches when `p & mask == value`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortMask {
    pub value: u16,
    pub mask: u16,
}

impl PortMask {
    pub fn matches(&self, port: u16) -> bool {
        port & self.mask == self.value
    }
}

/// `[start, end]` as the fewest aligned power-of-two blocks, ascending: each block is a
/// (value, mask) pair. `0..=65535` is one pair with mask 0. Errors when `start > end`.
pub fn port_range_masks(start: u16, end: u16) -> Result<Vec<PortMask>, String> {
    if start > end {
        return Err(format!(
            "port range {start}-{end}: the start is above the end"
        ));
    }
    let (mut lo, end) = (u32::from(start), u32::from(end));
    let mut out = Vec::new();
    while lo <= end {
        // The largest block aligned at `lo` (lowest set bit; 0 is aligned to everything)
        // that does not run past `end`.
        let mut size: u32 = if lo == 0 {
            1 << 16
        } else {
            lo & lo.wrapping_neg()
        };
        while lo + size - 1 > end {
            size >>= 1;
        }
        let mask = !(size - 1) & 0xffff;
        out.push(PortMask {
            value: (lo & 0xffff) as u16,
            mask: mask as u16,
        });
        lo += size;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        let (a, p) = s.split_once('/').unwrap();
        IpNet::new(a.parse().unwrap(), p.parse().unwrap()).unwrap()
    }

    fn nets(v: &[&str]) -> Vec<IpNet> {
        v.iter().map(|s| net(s)).collect()
    }

    fn texts(v: &[IpNet]) -> Vec<String> {
        v.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn reference_example_gives_eight_cidrs() {
        // Reference Part B §2.2: `10.0.0.0/8 except 10.1.0.0/16` gives 8 CIDRs.
        let got = subtract_cidrs(net("10.0.0.0/8"), &nets(&["10.1.0.0/16"]));
        assert_eq!(
            texts(&got),
            [
                "10.0.0.0/16",
                "10.2.0.0/15",
                "10.4.0.0/14",
                "10.8.0.0/13",
                "10.16.0.0/12",
                "10.32.0.0/11",
                "10.64.0.0/10",
                "10.128.0.0/9",
            ]
        );
    }

    #[test]
    fn antrea_test_diff_cidrs_vectors() {
        // Antrea's `TestDiffCIDRs` (`pkg/util/ip/ip_test.go`, antrea-io/antrea at
        // 087489b088): it compares as sets (`ElementsMatch`); here sorted by address.
        let got = subtract_cidrs(net("10.20.0.0/16"), &nets(&["10.20.1.0/24"]));
        assert_eq!(
            texts(&got),
            [
                "10.20.0.0/24",
                "10.20.2.0/23",
                "10.20.4.0/22",
                "10.20.8.0/21",
                "10.20.16.0/20",
                "10.20.32.0/19",
                "10.20.64.0/18",
                "10.20.128.0/17",
            ]
        );
        let got = subtract_cidrs(
            net("10.20.0.0/16"),
            &nets(&["10.20.1.0/24", "10.20.2.0/28"]),
        );
        assert_eq!(
            texts(&got),
            [
                "10.20.0.0/24",
                "10.20.2.16/28",
                "10.20.2.32/27",
                "10.20.2.64/26",
                "10.20.2.128/25",
                "10.20.3.0/24",
                "10.20.4.0/22",
                "10.20.8.0/21",
                "10.20.16.0/20",
                "10.20.32.0/19",
                "10.20.64.0/18",
                "10.20.128.0/17",
            ]
        );
    }

    #[test]
    fn except_edge_cases() {
        // No except, an outside except and another family's: the CIDR itself.
        let c = net("192.168.0.0/24");
        assert_eq!(subtract_cidrs(c, &[]), [c]);
        assert_eq!(subtract_cidrs(c, &nets(&["10.0.0.0/8", "fd00::/8"])), [c]);
        // Covering excepts (equal or larger): nothing.
        assert_eq!(subtract_cidrs(c, &nets(&["192.168.0.0/24"])), []);
        assert_eq!(subtract_cidrs(c, &nets(&["192.0.0.0/8"])), []);
        // Two excepts, overlapping each other.
        let got = subtract_cidrs(
            c,
            &nets(&["192.168.0.0/26", "192.168.0.0/25", "192.168.0.200/32"]),
        );
        assert_eq!(
            texts(&got),
            [
                "192.168.0.128/26",
                "192.168.0.192/29",
                "192.168.0.201/32",
                "192.168.0.202/31",
                "192.168.0.204/30",
                "192.168.0.208/28",
                "192.168.0.224/27",
            ]
        );
        // A host excepted from the whole space.
        let got = subtract_cidrs(net("0.0.0.0/0"), &nets(&["128.0.0.0/1", "0.0.0.0/2"]));
        assert_eq!(texts(&got), ["64.0.0.0/2"]);
        // Malformed values (prefix longer than the address) never panic.
        let bad = IpNet {
            addr: "1.2.3.0".parse().unwrap(),
            prefix: 40,
        };
        assert_eq!(subtract_cidrs(bad, &[]), []);
        assert_eq!(subtract_cidrs(c, &[bad]), [c]);
        // A /32 minus itself, and a /31 minus one half.
        assert_eq!(
            subtract_cidrs(net("1.2.3.4/32"), &nets(&["1.2.3.4/32"])),
            []
        );
        assert_eq!(
            texts(&subtract_cidrs(net("1.2.3.4/31"), &nets(&["1.2.3.5/32"]))),
            ["1.2.3.4/32"]
        );
    }

    #[test]
    fn except_ipv6() {
        let got = subtract_cidrs(net("fd00::/126"), &nets(&["fd00::1/128", "10.0.0.0/8"]));
        assert_eq!(texts(&got), ["fd00::/128", "fd00::2/127"]);
        let got = subtract_cidrs(net("::/0"), &nets(&["8000::/1"]));
        assert_eq!(texts(&got), ["::/1"]);
        let got = subtract_cidrs(net("2001:db8::/32"), &nets(&["2001:db8:8000::/33"]));
        assert_eq!(texts(&got), ["2001:db8::/33"]);
    }

    #[test]
    fn except_brute_force_on_a_small_block() {
        // Every address of a /24 is in the result exactly when it is in no except; the
        // result's blocks are disjoint and no two siblings remain unmerged (minimality).
        let c = net("10.9.8.0/24");
        let cases: &[&[&str]] = &[
            &["10.9.8.7/32"],
            &["10.9.8.0/25", "10.9.8.250/31"],
            &[
                "10.9.8.16/28",
                "10.9.8.17/32",
                "10.9.8.64/27",
                "10.9.8.255/32",
            ],
        ];
        for ex in cases {
            let ex = nets(ex);
            let got = subtract_cidrs(c, &ex);
            for last in 0..=255u8 {
                let ip = IpAddr::V4(Ipv4Addr::new(10, 9, 8, last));
                let want = !ex.iter().any(|e| e.contains(ip));
                let hits = got.iter().filter(|n| n.contains(ip)).count();
                assert_eq!(hits, usize::from(want), "{ip} with {ex:?}: {got:?}");
            }
            for w in got.windows(2) {
                assert!(w[0] < w[1], "sorted: {got:?}");
                let merged = IpNet::new(w[0].addr, w[0].prefix - 1).unwrap();
                assert!(
                    !(w[0].prefix == w[1].prefix && merged.contains(w[1].addr)),
                    "siblings left unmerged: {got:?}"
                );
            }
        }
    }

    fn pm(value: u16, mask: u16) -> PortMask {
        PortMask { value, mask }
    }

    #[test]
    fn port_ranges_exact() {
        assert_eq!(port_range_masks(80, 80).unwrap(), [pm(80, 0xffff)]);
        assert_eq!(port_range_masks(0, 65535).unwrap(), [pm(0, 0)]);
        assert_eq!(port_range_masks(65535, 65535).unwrap(), [pm(65535, 0xffff)]);
        assert_eq!(
            port_range_masks(0x1000, 0x1fff).unwrap(),
            [pm(0x1000, 0xf000)]
        );
        assert_eq!(
            port_range_masks(80, 88).unwrap(),
            [pm(80, 0xfff8), pm(88, 0xffff)]
        );
        assert_eq!(
            port_range_masks(1000, 1999).unwrap(),
            [
                pm(1000, 0xfff8),
                pm(1008, 0xfff0),
                pm(1024, 0xfe00),
                pm(1536, 0xff00),
                pm(1792, 0xff80),
                pm(1920, 0xffc0),
                pm(1984, 0xfff0),
            ]
        );
        // Antrea's `TestInstallPolicyRuleFlows` (`pkg/agent/openflow/network_policy_test.go`,
        // antrea-io/antrea at 002fcebdf9): TCP 1000..1007 plus 8080, two addresses and one
        // CIDR count 5 match flows, so 1000-1007 is one bit range.
        assert_eq!(port_range_masks(1000, 1007).unwrap(), [pm(1000, 0xfff8)]);
        assert_eq!(port_range_masks(1, 65535).unwrap().len(), 16);
        assert_eq!(port_range_masks(0, 65534).unwrap().len(), 16);
        assert_eq!(
            port_range_masks(9, 8).unwrap_err(),
            "port range 9-8: the start is above the end"
        );
    }

    #[test]
    fn port_ranges_brute_force() {
        let ranges = [
            (0, 0),
            (0, 1),
            (1, 1),
            (1, 2),
            (3, 12),
            (80, 88),
            (1000, 1999),
            (1024, 65535),
            (1, 65535),
            (0, 65534),
            (12345, 54321),
            (32767, 32768),
            (65534, 65535),
        ];
        for (s, e) in ranges {
            let got = port_range_masks(s, e).unwrap();
            // At most 2 blocks per bit position: the minimal cover's bound.
            assert!(got.len() <= 30, "{s}-{e}: {} pairs", got.len());
            for p in 0..=u16::MAX {
                let hits = got.iter().filter(|m| m.matches(p)).count();
                let want = usize::from((s..=e).contains(&p));
                assert_eq!(hits, want, "{s}-{e} port {p}: {got:?}");
            }
            for m in &got {
                assert_eq!(
                    m.value & !m.mask,
                    0,
                    "{s}-{e}: value has bits outside {m:?}"
                );
            }
        }
    }
}
