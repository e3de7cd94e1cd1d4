//! Ethernet addresses as text: the one place that parses and formats them (OVSDB and the
//! step record hold `aa:bb:cc:dd:ee:ff`; netlink and OpenFlow carry the six bytes).

/// Parse `aa:bb:cc:dd:ee:ff` (as OVSDB's `attached-mac` / `mac_in_use` hold it).
pub fn parse(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut mac {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// `aa:bb:cc:dd:ee:ff`, lowercase, as `ip link` and OVSDB write it.
pub fn format(mac: &[u8; 6]) -> String {
    let [a, b, c, d, e, g] = mac;
    format!("{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trip() {
        let m = [0x02, 0, 0, 0xab, 0x01, 0x0a];
        assert_eq!(super::format(&m), "02:00:00:ab:01:0a");
        assert_eq!(super::parse("02:00:00:ab:01:0a"), Some(m));
        assert_eq!(super::parse("02:00:00:AB:01:0A"), Some(m));
    }
}
