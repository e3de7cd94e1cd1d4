//! The controlplane's `IPAddress` and `IPNet` (`pkg/apis/controlplane/v1beta2/types.go`),
//! decoded exactly.
//!
//! `IPAddress` is a Go `[]byte` without a JSON marshaller, so it travels as standard
//! base64 of `net.ParseIP`'s 16 bytes, IPv4 included (`::ffff:a.b.c.d`). An IPv4-mapped
//! address decodes to an [`Ipv4Addr`]; 4 bytes are accepted too. `IPNet{ip, prefixLength}`
//! omits `prefixLength` when it is 0; for an IPv4 address the prefix counts IPv4 bits (as
//! the agent's `pkg/util/ip` does). The controller does not mask a CIDR (`10.0.1.1/16` is
//! sent as written); the agent does, and so does [`IpNet::new`].
//!
//! Owns these two codecs and the [`IpNet`] value. Not CIDR arithmetic (`except`
//! subtraction belongs to whoever builds flows).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde_json::Value;

use super::json::{PathError, as_object, expected, field, int};
use crate::k8s::kubeconfig::decode_base64;

/// Longest base64 text read as an address: 16 bytes are 24 characters; a little slack for
/// the line breaks Go's decoder skips. Longer text is refused before it is decoded.
const MAX_IP_TEXT: usize = 32;

/// An IP network with its host bits cleared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpNet {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl IpNet {
    /// `addr/prefix`, masked; `None` when the prefix is longer than the address.
    pub fn new(addr: IpAddr, prefix: u8) -> Option<IpNet> {
        let addr = match addr {
            IpAddr::V4(a) if prefix <= 32 => {
                let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
                IpAddr::V4(Ipv4Addr::from(a.to_bits() & mask))
            }
            IpAddr::V6(a) if prefix <= 128 => {
                let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(a.to_bits() & mask))
            }
            _ => return None,
        };
        Some(IpNet { addr, prefix })
    }

    /// Whether `ip` is inside (an IPv4 address is never inside an IPv6 network).
    pub fn contains(&self, ip: IpAddr) -> bool {
        IpNet::new(ip, self.prefix).is_some_and(|n| n.addr == self.addr)
    }
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// One `IPAddress`: base64 of 16 bytes (IPv4-mapped → IPv4) or of 4.
pub fn decode_ip(text: &str) -> Result<IpAddr, String> {
    if text.len() > MAX_IP_TEXT {
        return Err(format!(
            "{} characters of base64 is not an IP address",
            text.len()
        ));
    }
    let b = decode_base64(text)?;
    if let Ok(v4) = <[u8; 4]>::try_from(b.as_slice()) {
        return Ok(IpAddr::V4(Ipv4Addr::from(v4)));
    }
    let v6 = <[u8; 16]>::try_from(b.as_slice()).map_err(|_| {
        format!(
            "{} bytes is neither an IPv4 (4) nor an IPv6 (16) address",
            b.len()
        )
    })?;
    let v6 = Ipv6Addr::from(v6);
    Ok(v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4))
}

/// An `IPAddress` in a JSON tree (a string).
pub(super) fn ip_value(v: &Value) -> Result<IpAddr, PathError> {
    match v {
        Value::String(s) => decode_ip(s).map_err(PathError::new),
        v => Err(expected("a base64 string", v)),
    }
}

/// An `IPNet` object: `ip` required, `prefixLength` 0 when absent.
pub(super) fn ipnet_value(v: &Value) -> Result<IpNet, PathError> {
    let m = as_object(v)?;
    let addr = match field(m, "ip") {
        Some(ip) => ip_value(ip).map_err(|e| e.key("ip"))?,
        None => return Err(PathError::new("required").key("ip")),
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = int(m, "prefixLength", 0, max)?.unwrap_or(0);
    let prefix = u8::try_from(prefix).map_err(|e| PathError::new(e.to_string()))?;
    IpNet::new(addr, prefix).ok_or_else(|| PathError::new("prefix longer than the address"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v4(s: &str) -> IpAddr {
        IpAddr::V4(s.parse().unwrap())
    }

    #[test]
    fn addresses_from_the_reference() {
        // `net.ParseIP` (16 bytes) in base64, as the controller sends them; the first two
        // are the worked example's vm1 and vm2 (`fixtures`).
        assert_eq!(
            decode_ip("AAAAAAAAAAAAAP//rBBkAw==").unwrap(),
            v4("172.16.100.3")
        );
        assert_eq!(
            decode_ip("AAAAAAAAAAAAAP//rBBkBA==").unwrap(),
            v4("172.16.100.4")
        );
        assert_eq!(
            decode_ip("AAAAAAAAAAAAAP//CgAABQ==").unwrap(),
            v4("10.0.0.5")
        );
        assert_eq!(
            decode_ip("AAAAAAAAAAAAAP//AAAAAA==").unwrap(),
            v4("0.0.0.0")
        );
        assert_eq!(
            decode_ip("AAAAAAAAAAAAAAAAAAAAAA==").unwrap(),
            IpAddr::V6(Ipv6Addr::UNSPECIFIED)
        );
        // 2001:db8::1, and 4 bytes (192.0.2.1).
        assert_eq!(
            decode_ip("IAENuAAAAAAAAAAAAAAAAQ==").unwrap(),
            "2001:db8::1".parse::<IpAddr>().unwrap()
        );
        assert_eq!(decode_ip("wAACAQ==").unwrap(), v4("192.0.2.1"));
    }

    #[test]
    fn bad_addresses_say_why() {
        assert_eq!(
            decode_ip("AAAAAAA=").unwrap_err(),
            "5 bytes is neither an IPv4 (4) nor an IPv6 (16) address"
        );
        assert_eq!(
            decode_ip("").unwrap_err(),
            "0 bytes is neither an IPv4 (4) nor an IPv6 (16) address"
        );
        assert_eq!(
            decode_ip("rBBkAw*=").unwrap_err(),
            "invalid base64 character at offset 6"
        );
        assert_eq!(
            decode_ip(&"A".repeat(40)).unwrap_err(),
            "40 characters of base64 is not an IP address"
        );
        assert_eq!(
            ip_value(&json!(5)).unwrap_err().to_string(),
            "expected a base64 string, found a number"
        );
    }

    #[test]
    fn cidrs_are_masked_and_bounded() {
        let net = |v: Value| ipnet_value(&v).map(|n| n.to_string());
        // 10.0.1.1/16 as the controller sends it (unmasked): the agent's 10.0.0.0/16.
        assert_eq!(
            net(json!({"ip": "AAAAAAAAAAAAAP//CgABAQ==", "prefixLength": 16})).unwrap(),
            "10.0.0.0/16"
        );
        // prefixLength omitted (Go omitempty of 0): /0, the v4 half of "any".
        assert_eq!(
            net(json!({"ip": "AAAAAAAAAAAAAP//AAAAAA=="})).unwrap(),
            "0.0.0.0/0"
        );
        assert_eq!(
            net(json!({"ip": "AAAAAAAAAAAAAAAAAAAAAA=="})).unwrap(),
            "::/0"
        );
        assert_eq!(
            net(json!({"ip": "AAAAAAAAAAAAAP//rBBkBQ==", "prefixLength": 32})).unwrap(),
            "172.16.100.5/32"
        );
        // The prefix of a v4-mapped address counts IPv4 bits: 33 is too long, not ::ffff:…/33.
        assert_eq!(
            net(json!({"ip": "AAAAAAAAAAAAAP//rBBkBQ==", "prefixLength": 33})).unwrap_err(),
            PathError::new("33 out of range 0..=32").key("prefixLength")
        );
        assert_eq!(
            net(json!({"ip": "IAENuAAAAAAAAAAAAAAAAQ==", "prefixLength": 129}))
                .unwrap_err()
                .to_string(),
            "prefixLength: 129 out of range 0..=128"
        );
        assert_eq!(
            net(json!({"ip": "IAENuAAAAAAAAAAAAAAAAQ==", "prefixLength": 32})).unwrap(),
            "2001:db8::/32"
        );
        assert_eq!(
            net(json!({"prefixLength": 8})).unwrap_err().to_string(),
            "ip: required"
        );
        assert_eq!(
            net(json!({"ip": "AAAAAAAAAAAAAP//CgABAQ==", "prefixLength": -1}))
                .unwrap_err()
                .to_string(),
            "prefixLength: -1 out of range 0..=32"
        );
    }

    #[test]
    fn contains() {
        let n = IpNet::new(v4("10.1.2.3"), 16).unwrap();
        assert_eq!(n.addr, v4("10.1.0.0"));
        assert!(n.contains(v4("10.1.255.255")));
        assert!(!n.contains(v4("10.2.0.0")));
        assert!(!n.contains("::1".parse().unwrap()));
        assert!(
            IpNet::new(v4("0.0.0.0"), 0)
                .unwrap()
                .contains(v4("1.2.3.4"))
        );
        assert_eq!(IpNet::new(v4("1.2.3.4"), 33), None);
    }
}
