//! The answers byte for byte. The input frames are the shapes the e2e tests send (a
//! Linux SYN with its options, iperf3's UDP "connect" datagram with Ethernet padding, the
//! same over IPv6); every checksum of an answer is checked again here by summing the
//! covered bytes (with their pseudo-header) in a second, naive way: a correct one sums
//! to 0xffff. Each expected answer was also read back by `tcpdump -vv -r`, which called
//! every checksum correct.

use super::*;

use crate::testing::hex;

fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

const VM_MAC: &str = "020000000010";
const PEER_MAC: &str = "020000000001";

/// A SYN from 192.0.2.1:40000 to 192.0.2.10:5201 as Linux sends it (MSS, SACK,
/// timestamps, window scale): seq 0x11223344, no ACK.
fn syn4() -> Vec<u8> {
    hex(&format!(
        "{VM_MAC} {PEER_MAC} 0800
         4500 003c 1c46 4000 4006 0000 c0000201 c000020a
         9c40 1451 11223344 00000000 a002 faf0 0000 0000
         020405b4 0402080a 00000001 00000000 01030307"
    ))
}

/// iperf3's 4-byte UDP datagram from 192.0.2.1:45000 to 192.0.2.10:5201, padded to the
/// 60-byte Ethernet minimum.
fn udp4() -> Vec<u8> {
    hex(&format!(
        "{VM_MAC} {PEER_MAC} 0800
         4500 0020 abcd 4000 4011 0000 c0000201 c000020a
         afc8 1451 000c 0000 39383736
         0000 0000 0000 0000 0000 0000 0000 0000 0000"
    ))
}

/// The same datagram over IPv6, 2001:db8:1::1 → 2001:db8:1::10.
fn udp6() -> Vec<u8> {
    hex(&format!(
        "{VM_MAC} {PEER_MAC} 86dd
         6000 0000 000c 11 40
         20010db8000100000000000000000001 20010db8000100000000000000000010
         afc8 1451 000c 0000 39383736"
    ))
}

/// The naive checksum check: 16-bit words summed in 64 bits, folded at the end.
fn sums_to_ffff(parts: &[&[u8]]) -> bool {
    let mut all = Vec::new();
    for p in parts {
        all.extend_from_slice(p);
    }
    if all.len() % 2 == 1 {
        all.push(0);
    }
    let mut s: u64 = all
        .chunks(2)
        .map(|w| u64::from(w[0]) << 8 | u64::from(w[1]))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s == 0xffff
}

/// Every checksum of an untagged answer: the IPv4 header's, and TCP's/ICMP's/ICMPv6's.
fn checksums_hold(frame: &[u8]) {
    let ip = &frame[14..];
    match frame[12..14] {
        [0x08, 0x00] => {
            assert!(sums_to_ffff(&[&ip[..20]]), "IPv4 header checksum");
            let l4 = &ip[20..];
            let len = u16::try_from(l4.len()).unwrap().to_be_bytes();
            let ok = if ip[9] == PROTO_ICMP {
                sums_to_ffff(&[l4])
            } else {
                sums_to_ffff(&[&ip[12..20], &[0, ip[9]], &len, l4])
            };
            assert!(ok, "upper-layer checksum");
        }
        [0x86, 0xdd] => {
            let l4 = &ip[40..];
            let len = u32::try_from(l4.len()).unwrap().to_be_bytes();
            assert!(
                sums_to_ffff(&[&ip[8..40], &len, &[0, 0, 0, ip[6]], l4]),
                "upper-layer checksum"
            );
        }
        _ => panic!("not IP"),
    }
}

fn answer_of(frame: &[u8]) -> Result<(Kind, Vec<u8>), NoAnswer> {
    answer(&parse(frame)?)
}

#[test]
fn a_syn_gets_a_reset_that_acknowledges_it() {
    let (kind, out) = answer_of(&syn4()).unwrap();
    assert_eq!(kind, Kind::TcpReset);
    assert_eq!(
        to_hex(&out),
        to_hex(&hex(&format!(
            "{PEER_MAC} {VM_MAC} 0800
             4500 0028 0000 4000 4006 b6c4 c000020a c0000201
             1451 9c40 00000000 11223345 5014 0000 36cc 0000"
        )))
    );
    checksums_hold(&out);
}

#[test]
fn reset_sequence_numbers_follow_the_segment() {
    // An ACK with 10 bytes of data and FIN: seq from its ack, ack = seq + 10 + 1.
    let mut seg = hex(&format!(
        "{VM_MAC} {PEER_MAC} 0800
         4500 0032 0001 4000 4006 0000 c0000201 c000020a
         9c40 1451 fffffffa 0a0b0c0d 5011 0200 0000 0000
         00010203040506070809"
    ));
    let (_, out) = answer_of(&seg).unwrap();
    let tcp = &out[34..];
    assert_eq!(to_hex(&tcp[4..8]), "0a0b0c0d");
    // 0xfffffffa + 11 wraps.
    assert_eq!(to_hex(&tcp[8..12]), "00000005");
    assert_eq!(tcp[13], 0x14);
    checksums_hold(&out);
    // A RST is never answered.
    seg[14 + 20 + 13] = 0x14;
    assert_eq!(answer_of(&seg), Err(NoAnswer::Reset));
}

#[test]
fn udp_over_ipv4_gets_host_prohibited_quoting_the_datagram() {
    let (kind, out) = answer_of(&udp4()).unwrap();
    assert_eq!(kind, Kind::Icmp);
    // The quote is the 32-byte datagram, not the Ethernet padding after it.
    assert_eq!(
        to_hex(&out),
        to_hex(&hex(&format!(
            "{PEER_MAC} {VM_MAC} 0800
             4500 003c 0000 0000 4001 f6b5 c000020a c0000201
             030a d355 00000000
             4500 0020 abcd 4000 4011 0000 c0000201 c000020a
             afc8 1451 000c 0000 39383736"
        )))
    );
    checksums_hold(&out);
}

#[test]
fn udp_over_ipv6_gets_admin_prohibited_quoting_the_packet() {
    let (kind, out) = answer_of(&udp6()).unwrap();
    assert_eq!(kind, Kind::Icmpv6);
    assert_eq!(
        to_hex(&out),
        to_hex(&hex(&format!(
            "{PEER_MAC} {VM_MAC} 86dd
             6000 0000 003c 3a 40
             20010db8000100000000000000000010 20010db8000100000000000000000001
             0101 a19d 00000000
             6000 0000 000c 11 40
             20010db8000100000000000000000001 20010db8000100000000000000000010
             afc8 1451 000c 0000 39383736"
        )))
    );
    checksums_hold(&out);
}

#[test]
fn a_syn_over_ipv6_gets_a_reset() {
    let syn6 = hex(&format!(
        "{VM_MAC} {PEER_MAC} 86dd
         6000 0000 0014 06 40
         20010db8000100000000000000000001 20010db8000100000000000000000010
         9c40 1451 11223344 00000000 5002 faf0 0000 0000"
    ));
    let (kind, out) = answer_of(&syn6).unwrap();
    assert_eq!(kind, Kind::TcpReset);
    assert_eq!(out.len(), 14 + 40 + 20);
    assert_eq!(to_hex(&out[14..22]), "6000000000140640");
    assert_eq!(to_hex(&out[54..66]), "14519c400000000011223345");
    checksums_hold(&out);
}

#[test]
fn quotes_are_capped_at_the_rfc_sizes() {
    // A 1500-byte UDP datagram each way: the IPv4 error is 576 bytes of IP, the IPv6 one
    // 1280 (the quote cut short, the lengths and checksums over what is sent).
    let big4 = {
        let mut f = hex(&format!(
            "{VM_MAC} {PEER_MAC} 0800
             4500 05dc 0000 4000 4011 0000 c0000201 c000020a
             afc8 1451 05c8 0000"
        ));
        f.resize(14 + 1500, 0x5a);
        f
    };
    let (_, out) = answer_of(&big4).unwrap();
    assert_eq!(out.len(), 14 + 576);
    assert_eq!(to_hex(&out[16..18]), "0240");
    checksums_hold(&out);
    let big6 = {
        let mut f = hex(&format!(
            "{VM_MAC} {PEER_MAC} 86dd
             6000 0000 05b4 11 40
             20010db8000100000000000000000001 20010db8000100000000000000000010
             afc8 1451 05b4 0000"
        ));
        f.resize(14 + 1500, 0x5a);
        f
    };
    let (_, out) = answer_of(&big6).unwrap();
    assert_eq!(out.len(), 14 + 1280);
    assert_eq!(to_hex(&out[18..20]), "04d8");
    checksums_hold(&out);
}

#[test]
fn a_vlan_tag_is_kept() {
    let mut f = udp4();
    f.splice(12..12, hex("8100 0064"));
    let (_, out) = answer_of(&f).unwrap();
    assert_eq!(to_hex(&out[12..18]), "810000640800");
    let mut untagged = out.clone();
    untagged.drain(12..16);
    checksums_hold(&untagged);
    // Two tags: not parsed.
    f.splice(12..12, hex("88a8 0001"));
    assert_eq!(answer_of(&f), Err(NoAnswer::NotIp));
}

#[test]
fn ipv6_extension_headers_are_walked() {
    // Hop-by-hop (8 bytes) then UDP; a fragment header with offset ≠ 0 is a later fragment.
    let f = hex(&format!(
        "{VM_MAC} {PEER_MAC} 86dd
         6000 0000 0014 00 40
         20010db8000100000000000000000001 20010db8000100000000000000000010
         11 00 0000 00000000
         afc8 1451 000c 0000 39383736"
    ));
    let p = parse(&f).unwrap();
    assert_eq!((p.proto, p.l4_at, p.l4_len), (PROTO_UDP, 48, 12));
    assert_eq!(
        p.l4,
        L4::Ports {
            src: 45000,
            dst: 5201
        }
    );
    let later = hex(&format!(
        "{VM_MAC} {PEER_MAC} 86dd
         6000 0000 0010 2c 40
         20010db8000100000000000000000001 20010db8000100000000000000000010
         11 00 0008 00000001
         0102030405060708"
    ));
    assert_eq!(answer_of(&later), Err(NoAnswer::Fragment));
}

#[test]
fn never_answered() {
    let with = |f: &mut Vec<u8>, at: usize, b: &[u8]| f[at..at + b.len()].copy_from_slice(b);
    // An ICMP error (port unreachable) is not answered; an echo request is.
    let mut icmp = udp4();
    with(&mut icmp, 14 + 9, &[PROTO_ICMP]);
    with(&mut icmp, 34, &[3, 3]);
    assert_eq!(answer_of(&icmp), Err(NoAnswer::IcmpError));
    with(&mut icmp, 34, &[8, 0]);
    assert_eq!(answer_of(&icmp).unwrap().0, Kind::Icmp);
    let mut icmp6 = udp6();
    with(&mut icmp6, 14 + 6, &[PROTO_ICMPV6]);
    with(&mut icmp6, 54, &[1, 4]);
    assert_eq!(answer_of(&icmp6), Err(NoAnswer::IcmpError));
    with(&mut icmp6, 54, &[128, 0]);
    assert_eq!(answer_of(&icmp6).unwrap().0, Kind::Icmpv6);
    // Group destinations, bad sources.
    for (at, b, why) in [
        (0, &[0xff; 6][..], NoAnswer::ToGroup),
        (0, &[0x01, 0, 0x5e, 0, 0, 1][..], NoAnswer::ToGroup),
        (14 + 16, &[224, 0, 0, 1][..], NoAnswer::ToGroup),
        (14 + 16, &[255, 255, 255, 255][..], NoAnswer::ToGroup),
        (6, &[0x03, 0, 0, 0, 0, 1][..], NoAnswer::BadSource),
        (14 + 12, &[0, 0, 0, 0][..], NoAnswer::BadSource),
        (14 + 12, &[239, 1, 2, 3][..], NoAnswer::BadSource),
    ] {
        let mut f = udp4();
        with(&mut f, at, b);
        assert_eq!(answer_of(&f), Err(why), "{at} {b:?}");
    }
    for (at, b, why) in [
        (14 + 24, &[0xff, 0x02][..], NoAnswer::ToGroup),
        (14 + 8, &[0u8; 16][..], NoAnswer::BadSource),
        (14 + 8, &[0xff, 0x02][..], NoAnswer::BadSource),
    ] {
        let mut f = udp6();
        with(&mut f, at, b);
        assert_eq!(answer_of(&f), Err(why), "v6 {at} {b:?}");
    }
    // A later IPv4 fragment.
    let mut frag = udp4();
    with(&mut frag, 14 + 6, &[0x00, 0x10]);
    assert_eq!(answer_of(&frag), Err(NoAnswer::Fragment));
    // ARP.
    let mut arp = udp4();
    with(&mut arp, 12, &[0x08, 0x06]);
    assert_eq!(answer_of(&arp), Err(NoAnswer::NotIp));
}

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    for f in [syn4(), udp4(), udp6()] {
        for n in 0..f.len() {
            // Cut short: either refused or answered from what is there; never a panic.
            let _ = answer_of(&f[..n]);
        }
    }
    assert_eq!(
        answer_of(&syn4()[..14 + 19]),
        Err(NoAnswer::Malformed("IPv4 header"))
    );
    assert_eq!(
        answer_of(&syn4()[..14 + 20 + 19]),
        Err(NoAnswer::Malformed("TCP header"))
    );
    // A data offset past the segment's end.
    let mut bad = syn4();
    bad[14 + 2..14 + 4].copy_from_slice(&[0, 40]);
    assert_eq!(answer_of(&bad), Err(NoAnswer::Malformed("TCP data offset")));
}
