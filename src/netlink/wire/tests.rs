use super::*;

fn v4(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn nested_round_trip_pads_to_four_bytes() {
    let attrs = vec![str_attr(ifla::ALT_IFNAME, "eth0"), (7, vec![1, 2, 3, 4])];
    let bytes = encode_nested(&attrs).unwrap();
    // "eth0\0" = 5 bytes + 4 header = 9, padded to 12; then 8.
    assert_eq!(
        bytes,
        [
            9, 0, 53, 0, b'e', b't', b'h', b'0', 0, 0, 0, 0, 8, 0, 7, 0, 1, 2, 3, 4
        ]
    );
    assert_eq!(parse_nested(&bytes).unwrap(), attrs);
    assert!(parse_nested(&[9, 0, 53, 0, b'e']).is_err());
}

#[test]
fn link_decodes_kind_and_altnames() {
    let linkinfo = encode_nested(&[str_attr(ifla::INFO_KIND, "veth")]).unwrap();
    let props = encode_nested(&[
        str_attr(ifla::ALT_IFNAME, "eth1"),
        str_attr(ifla::ALT_IFNAME, "enp0s3"),
    ])
    .unwrap();
    let attrs = vec![
        str_attr(ifla::IFNAME, "eth1~"),
        (ifla::MTU, 1450u32.to_ne_bytes().to_vec()),
        (ifla::ADDRESS, vec![2, 0, 0, 0, 1, 0x10]),
        (ifla::LINKINFO | NLA_F_NESTED, linkinfo),
        (ifla::PROP_LIST | NLA_F_NESTED, props),
    ];
    // decode_link is handed types with flag bits already masked (rtnl.rs masks them).
    let attrs: Vec<Attr> = attrs
        .into_iter()
        .map(|(t, p)| (t & !NLA_FLAGS, p))
        .collect();
    let hdr = LinkHdr {
        index: 7,
        flags: 0x1003,
        change: 0,
    };
    let link = decode_link(&hdr, &attrs).unwrap();
    assert_eq!(
        link,
        Link {
            index: 7,
            name: "eth1~".into(),
            mac: Some([2, 0, 0, 0, 1, 0x10]),
            mtu: 1450,
            flags: LinkFlags(0x1003),
            kind: Some("veth".into()),
            altnames: vec!["eth1".into(), "enp0s3".into()],
            master: None,
        }
    );
    assert!(link.is_up());
}

#[test]
fn addr_round_trips_through_newaddr_body() {
    let mut a = Addr::new(3, v4("192.0.2.10"), 24);
    a.broadcast = Some("192.0.2.255".parse().unwrap());
    a.label = Some("eth1:web".into());
    a.lifetime = Lifetime {
        valid: 7200,
        preferred: 3600,
    };
    a.flags = AddrFlags(AddrFlags::NOPREFIXROUTE.0);
    a.metric = 50;
    a.proto = 4;
    let (hdr, attrs) = encode_addr(&a, false);
    assert_eq!(
        hdr,
        AddrHdr {
            family: AF_INET,
            prefix_len: 24,
            flags: 0,
            scope: 0,
            index: 3
        }
    );
    assert_eq!(decode_addr(&hdr, &attrs).unwrap(), a);
    // The delete body is only the key.
    let (dh, dattrs) = encode_addr(&a, true);
    assert_eq!(dh.flags, 0);
    assert_eq!(
        dattrs,
        vec![
            (ifa::LOCAL, vec![192, 0, 2, 10]),
            (ifa::ADDRESS, vec![192, 0, 2, 10])
        ]
    );
}

#[test]
fn addr_flags_the_kernel_computes_are_not_sent() {
    let mut a = Addr::new(3, "2001:db8::10".parse().unwrap(), 64);
    a.flags = AddrFlags(AddrFlags::NODAD.0 | AddrFlags::PERMANENT.0 | AddrFlags::TENTATIVE.0);
    let (hdr, attrs) = encode_addr(&a, false);
    assert_eq!(hdr.flags, 0x02);
    assert_eq!(
        attrs,
        vec![
            (
                ifa::ADDRESS,
                "2001:db8::10"
                    .parse::<Ipv6Addr>()
                    .unwrap()
                    .octets()
                    .to_vec()
            ),
            (ifa::FLAGS, 2u32.to_ne_bytes().to_vec()),
        ]
    );
}

#[test]
fn v6_peer_uses_local_and_address() {
    let mut a = Addr::new(3, "2001:db8::1".parse().unwrap(), 128);
    a.peer = Some("2001:db8::2".parse().unwrap());
    let (hdr, attrs) = encode_addr(&a, false);
    assert_eq!(decode_addr(&hdr, &attrs).unwrap(), a);
}

#[test]
fn route_round_trips_through_newroute_body() {
    let mut r = Route::new(Prefix::new("2001:db8:2::".parse().unwrap(), 48), 9);
    r.gateway = Some("2001:db8:1::1".parse().unwrap());
    r.metric = 1024;
    r.pref = Some(RoutePref::HIGH);
    r.flags = ROUTE_F_ONLINK;
    r.metrics = encode_nested(&[(2, 1400u32.to_ne_bytes().to_vec())]).unwrap();
    let (hdr, attrs) = encode_route(&r).unwrap();
    let attrs: Vec<Attr> = attrs
        .into_iter()
        .map(|(t, p)| (t & !NLA_FLAGS, p))
        .collect();
    assert_eq!(decode_route(&hdr, &attrs).unwrap(), Some(r));
}

#[test]
fn default_route_has_no_dst_and_v4_has_no_pref() {
    let mut r = Route::new(Prefix::default_for(v4("0.0.0.0")), 4);
    r.gateway = Some(v4("192.0.2.1"));
    r.metric = 100;
    r.pref = Some(RoutePref::HIGH);
    let (hdr, attrs) = encode_route(&r).unwrap();
    assert_eq!(hdr.dst_len, 0);
    assert_eq!(hdr.table, 254);
    assert!(attrs.iter().all(|(t, _)| *t != rta::DST && *t != rta::PREF));
    r.pref = None;
    assert_eq!(decode_route(&hdr, &attrs).unwrap(), Some(r));
}

#[test]
fn cached_and_linkless_routes_are_skipped() {
    let r = Route::new(Prefix::new(v4("198.51.100.0"), 24), 4);
    let (mut hdr, attrs) = encode_route(&r).unwrap();
    hdr.flags = RTM_F_CLONED;
    assert_eq!(decode_route(&hdr, &attrs).unwrap(), None);
    // A blackhole route: no output link, no nexthops.
    let (mut hdr, mut attrs) = encode_route(&r).unwrap();
    attrs.retain(|(t, _)| *t != rta::OIF);
    hdr.kind = RouteType::BLACKHOLE.0;
    assert_eq!(decode_route(&hdr, &attrs).unwrap(), None);
}

/// `ip route add 198.51.100.0/24 nexthop via 192.0.2.1 dev <4> weight 1 nexthop via
/// 203.0.113.1 dev <7> weight 3`, as the kernel dumps it: RTA_MULTIPATH, no RTA_OIF.
#[test]
fn multipath_routes_round_trip() {
    let mut r = Route::new(Prefix::new(v4("198.51.100.0"), 24), 0);
    r.table = 100;
    r.multipath = vec![
        Nexthop {
            ifindex: 4,
            gateway: Some(v4("192.0.2.1")),
            hops: 0,
            flags: 0,
        },
        Nexthop {
            ifindex: 7,
            gateway: Some(v4("203.0.113.1")),
            hops: 2,
            flags: 4,
        },
    ];
    let (hdr, attrs) = encode_route(&r).unwrap();
    assert!(attrs.iter().all(|(t, _)| *t != rta::OIF));
    let mp = &attrs.iter().find(|(t, _)| *t == rta::MULTIPATH).unwrap().1;
    // rtnexthop {len 16, flags 0, hops 0, ifindex 4} + RTA_GATEWAY {len 8, type 5, ip}.
    let mut want = vec![16, 0, 0, 0];
    want.extend_from_slice(&4i32.to_ne_bytes());
    want.extend_from_slice(&[8, 0, 5, 0, 192, 0, 2, 1]);
    assert_eq!(&mp[..16], &want[..]);
    assert_eq!(mp.len(), 32);
    let back = decode_route(&hdr, &attrs).unwrap().unwrap();
    assert_eq!(back, r);
    assert!(back.uses(7) && back.uses(4) && !back.uses(0));
    // The kernel's own flags (dead 0x1, linkdown 0x10) are never sent back.
    let mut dead = r.clone();
    dead.multipath[0].flags = 0x11;
    let (_, attrs) = encode_route(&dead).unwrap();
    let mp = &attrs.iter().find(|(t, _)| *t == rta::MULTIPATH).unwrap().1;
    assert_eq!(mp[2], 0);
    // Truncated nexthops are errors, not panics.
    for cut in 1..32 {
        let mut a = attrs.clone();
        for (t, p) in &mut a {
            if *t == rta::MULTIPATH {
                p.truncate(cut);
            }
        }
        let _ = decode_route(&hdr, &a);
    }
}

/// What the module cannot re-create marks the route, naming the attribute, instead of
/// being dropped: a nexthop object, an encapsulation, a source prefix, a realm.
#[test]
fn routes_with_attributes_not_carried_are_unmovable() {
    let r = Route::new(Prefix::new(v4("198.51.100.0"), 24), 4);
    let with = |ty: u16, payload: Vec<u8>| {
        let (hdr, mut attrs) = encode_route(&r).unwrap();
        attrs.push((ty, payload));
        decode_route(&hdr, &attrs).unwrap().unwrap().unmovable
    };
    assert_eq!(
        with(rta::NH_ID, 5u32.to_ne_bytes().to_vec()).as_deref(),
        Some("a nexthop object (RTA_NH_ID)")
    );
    assert_eq!(
        with(rta::ENCAP_TYPE, vec![1, 0]).as_deref(),
        Some("an encapsulation (RTA_ENCAP)")
    );
    assert_eq!(
        with(rta::FLOW, vec![0; 4]).as_deref(),
        Some("a realm (RTA_FLOW)")
    );
    assert_eq!(with(99, vec![]).as_deref(), Some("route attribute 99"));
    // Statistics are not a property of the route.
    assert_eq!(with(rta::CACHEINFO, vec![0; 32]), None);
    let (mut hdr, attrs) = encode_route(&r).unwrap();
    hdr.src_len = 64;
    assert_eq!(
        decode_route(&hdr, &attrs)
            .unwrap()
            .unwrap()
            .unmovable
            .as_deref(),
        Some("a source prefix (RTA_SRC)")
    );
    // A multipath nexthop with an encapsulation.
    let mut mp = vec![16, 0, 0, 0];
    mp.extend_from_slice(&4i32.to_ne_bytes());
    mp.extend_from_slice(&[6, 0, 21, 0, 1, 0, 0, 0]);
    let (hdr, mut attrs) = encode_route(&r).unwrap();
    attrs.retain(|(t, _)| *t != rta::OIF);
    attrs.push((rta::MULTIPATH, mp));
    assert_eq!(
        decode_route(&hdr, &attrs)
            .unwrap()
            .unwrap()
            .unmovable
            .as_deref(),
        Some("a nexthop with an encapsulation (RTA_ENCAP)")
    );
}

/// An IPv6 route learnt from a router advertisement keeps its lifetime: the dump's
/// RTA_CACHEINFO.rta_expires (clock ticks) becomes RTA_EXPIRES (seconds) when re-added.
#[test]
fn ipv6_route_expiry_is_carried() {
    let r = Route::new(Prefix::new("2001:db8:5::".parse().unwrap(), 48), 3);
    let (hdr, mut attrs) = encode_route(&r).unwrap();
    let mut ci = vec![0u8; 32];
    ci[8..12].copy_from_slice(&179_950i32.to_ne_bytes());
    attrs.push((rta::CACHEINFO, ci));
    let back = decode_route(&hdr, &attrs).unwrap().unwrap();
    assert_eq!(back.expires, Some(1800));
    let (_, attrs) = encode_route(&back).unwrap();
    let e = &attrs.iter().find(|(t, _)| *t == rta::EXPIRES).unwrap().1;
    assert_eq!(e, &1800u32.to_ne_bytes().to_vec());
}

#[test]
fn link_master_is_decoded() {
    let hdr = LinkHdr::on(5);
    let attrs = vec![
        str_attr(ifla::IFNAME, "eth0"),
        (IFLA_MASTER, 9u32.to_ne_bytes().to_vec()),
    ];
    assert_eq!(decode_link(&hdr, &attrs).unwrap().master, Some(9));
    let attrs = vec![str_attr(ifla::IFNAME, "eth0")];
    assert_eq!(decode_link(&hdr, &attrs).unwrap().master, None);
}
