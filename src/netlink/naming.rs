//! The name a NIC gets once it becomes the OVS uplink.
//!
//! Rule (docs/design.md#uplink-name-length; Antrea's `GenerateUplinkInterfaceName` without
//! its length bug):
//!
//! * `<nic>~` when that fits `IFNAMSIZ - 1` = 15 bytes, i.e. for NIC names of up to 14 bytes
//!   (exactly Antrea's name, so a host moved from Antrea keeps working);
//! * otherwise `<head>~<hash>`: `<head>` is the longest prefix of the NIC name that is at most
//!   8 bytes and ends on a character boundary, `<hash>` the first 6 lowercase hex digits of
//!   SHA-1 of the whole NIC name. 8 + 1 + 6 = 15 bytes.
//!
//! Why these cannot collide with a real NIC name: the kernel (`eth%d`), udev's predictable
//! names (`enp0s3`, `ens5`, `eth0`) and cloud images never put `~` in an interface name, and
//! every uplink name contains one. The two forms cannot collide with each other either: the
//! first ends in `~`, the second in a hex digit. Two different long NIC names map to the same
//! short form only if they share their first 8 bytes and 24 bits of SHA-1 (about 1 in 16
//! million per pair); Linux names are at most 15 bytes, so a host has few such pairs.

use sha1::{Digest, Sha1};

/// Longest interface name the kernel accepts (`IFNAMSIZ` 16 including the NUL).
pub const IFNAME_MAX: usize = 15;

/// Appended to the NIC name to form the uplink name (Antrea's `bridgedUplinkSuffix`).
pub const UPLINK_SUFFIX: char = '~';

const HEAD_MAX: usize = 8;
const HASH_HEX: usize = 6;

/// The uplink name for the NIC called `nic` (see the module doc for the rule).
pub fn uplink_name(nic: &str) -> String {
    if nic.len() < IFNAME_MAX {
        return format!("{nic}{UPLINK_SUFFIX}");
    }
    let mut head_end = HEAD_MAX;
    while !nic.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let digest = Sha1::digest(nic.as_bytes());
    let mut hex = String::with_capacity(HASH_HEX);
    for b in digest.iter().take(HASH_HEX / 2) {
        hex.push_str(&format!("{b:02x}"));
    }
    format!("{}{UPLINK_SUFFIX}{hex}", &nic[..head_end])
}

/// Whether `name` is a name the kernel accepts for an interface: 1..=15 bytes, not `.` or
/// `..`, no `/`, `:` or whitespace (`dev_valid_name` in net/core/dev.c).
pub fn valid_ifname(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= IFNAME_MAX
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_get_the_suffix() {
        assert_eq!(uplink_name("eth0"), "eth0~");
        // 14 bytes: the longest name that still takes the plain suffix (15 bytes).
        assert_eq!(uplink_name("abcdefghijklmn"), "abcdefghijklmn~");
        assert_eq!(uplink_name("abcdefghijklmn").len(), 15);
    }

    #[test]
    fn long_names_get_the_hashed_form() {
        // 15 bytes: `<nic>~` would be 16 and the kernel refuses it.
        // sha1("abcdefghijklmno") = 2938dcc2… (`printf abcdefghijklmno | sha1sum`)
        assert_eq!(uplink_name("abcdefghijklmno"), "abcdefgh~2938dc");
        // 16 bytes cannot be a Linux NIC name, but the rule still gives a valid one.
        // sha1("abcdefghijklmnop") = 14f39952…
        assert_eq!(uplink_name("abcdefghijklmnop"), "abcdefgh~14f399");
        for n in ["abcdefghijklmno", "abcdefghijklmnop", "enp0s31f6longer"] {
            let u = uplink_name(n);
            assert_eq!(u.len(), IFNAME_MAX, "{u}");
            assert!(valid_ifname(&u), "{u}");
        }
    }

    #[test]
    fn hashed_form_is_deterministic_and_distinct() {
        assert_eq!(
            uplink_name("enp0s31f6abcdef"),
            uplink_name("enp0s31f6abcdef")
        );
        assert_ne!(
            uplink_name("enp0s31f6abcdef"),
            uplink_name("enp0s31f6abcdeg")
        );
    }

    #[test]
    fn head_is_cut_on_a_character_boundary() {
        // 'é' is 2 bytes at offsets 7..9: the head stops before it (7 bytes).
        let nic = "abcdefgéhijklmn";
        assert_eq!(nic.len(), 16);
        let u = uplink_name(nic);
        assert!(u.starts_with("abcdefg~"), "{u}");
        assert_eq!(u.len(), 14);
    }

    #[test]
    fn valid_names() {
        assert!(valid_ifname("eth0~"));
        assert!(valid_ifname("abcdefghijklmno"));
        assert!(!valid_ifname("abcdefghijklmnop"));
        assert!(!valid_ifname(""));
        assert!(!valid_ifname("a b"));
        assert!(!valid_ifname("a:b"));
        assert!(!valid_ifname("a/b"));
        assert!(!valid_ifname(".."));
    }
}
