//! The host facts the preflight verdicts take, read from /proc, /sys, /lib/modules and
//! netplan's directories through [`Host`] (a real one, and a map of paths in tests). Owns
//! reading and parsing those files; not OVSDB or netlink (`check` reads those), not the
//! verdicts (`preflight`, `preflight::nic`).
//!
//! /sys shows the links of the network namespace that mounted it, which in a container
//! may be the host's: every per-link fact from /sys is taken only when the link's
//! `ifindex` there is the one netlink reports.

use std::collections::BTreeSet;
use std::path::Path;

use super::Module;
use super::nic::{DhcpClient, NetplanMatch, UPPER_KINDS};
use crate::mac;
use crate::netlink::Link;

/// Read-only access to the host's files.
pub trait Host {
    /// A text file's content; None when it is absent or unreadable.
    fn read(&self, path: &str) -> Option<String>;
    fn exists(&self, path: &str) -> bool;
    /// The names in a directory, sorted; empty when it is absent.
    fn list(&self, dir: &str) -> Vec<String>;
    /// A symlink's target.
    fn read_link(&self, path: &str) -> Option<String>;
}

/// The host tether runs on.
pub struct RealHost;

/// /proc/net/udp of a busy host is about 128 bytes a socket; 16 MiB is 100,000 sockets.
const READ_MAX: u64 = 16 << 20;

impl Host for RealHost {
    fn read(&self, path: &str) -> Option<String> {
        // Regular files only, size-capped: a FIFO or device dropped in /etc/netplan must
        // not block or feed the check forever.
        crate::files::read_text(Path::new(path), READ_MAX).ok()
    }
    fn exists(&self, path: &str) -> bool {
        Path::new(path).exists()
    }
    fn list(&self, dir: &str) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
    fn read_link(&self, path: &str) -> Option<String> {
        std::fs::read_link(path)
            .ok()
            .and_then(|p| p.into_os_string().into_string().ok())
    }
}

/// The running kernel's release (`uname -r`).
pub fn release(host: &dyn Host) -> String {
    host.read("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The modules `modprobe` knows for one kernel release.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Modules {
    builtin: BTreeSet<String>,
    loadable: BTreeSet<String>,
}

/// `kernel/net/ipv4/ip_gre.ko.zst: kernel/net/ipv4/gre.ko.zst` → "ip_gre" (any
/// compression suffix; `-` and `_` are the same to modprobe).
fn module_name(line: &str) -> Option<String> {
    let path = line.split(':').next()?.trim();
    let file = path.rsplit('/').next()?;
    let (stem, _) = file.split_once(".ko")?;
    (!stem.is_empty()).then(|| stem.replace('-', "_"))
}

impl Modules {
    /// From `modules.builtin` and `modules.dep` (the files `modprobe` reads).
    pub fn parse(builtin: &str, dep: &str) -> Modules {
        Modules {
            builtin: builtin.lines().filter_map(module_name).collect(),
            loadable: dep.lines().filter_map(module_name).collect(),
        }
    }

    pub fn read(host: &dyn Host, release: &str) -> Modules {
        let dir = format!("/lib/modules/{release}");
        Modules::parse(
            &host
                .read(&format!("{dir}/modules.builtin"))
                .unwrap_or_default(),
            &host.read(&format!("{dir}/modules.dep")).unwrap_or_default(),
        )
    }

    /// `name`'s state; `/sys/module/<name>` first (loaded, or built in with parameters:
    /// vxlan, geneve, ip_gre and ip6_gre all have some).
    pub fn state(&self, host: &dyn Host, name: &str) -> Module {
        let name = name.replace('-', "_");
        if host.exists(&format!("/sys/module/{name}")) {
            Module::Loaded
        } else if self.builtin.contains(&name) {
            Module::BuiltIn
        } else if self.loadable.contains(&name) {
            Module::Loadable
        } else {
            Module::Missing
        }
    }
}

/// The local ports of `/proc/net/udp` or `/proc/net/udp6` (`sl local_address:port …`,
/// the port in hex).
pub fn parse_udp_ports(text: &str) -> BTreeSet<u16> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let local = l.split_whitespace().nth(1)?;
            let (_, port) = local.rsplit_once(':')?;
            u16::from_str_radix(port, 16).ok()
        })
        .collect()
}

/// Every UDP port bound in this network namespace, IPv4 and IPv6.
pub fn udp_ports(host: &dyn Host) -> BTreeSet<u16> {
    let mut all = BTreeSet::new();
    for f in ["/proc/net/udp", "/proc/net/udp6"] {
        all.extend(parse_udp_ports(&host.read(f).unwrap_or_default()));
    }
    all
}

/// `/sys/class/net/<name>` describes this namespace's link `index`.
fn sysfs_is(host: &dyn Host, name: &str, index: u32) -> bool {
    host.read(&format!("/sys/class/net/{name}/ifindex"))
        .and_then(|s| s.trim().parse::<u32>().ok())
        == Some(index)
}

/// A Wi-Fi link (`wireless/` or `phy80211` in its /sys directory).
pub fn wireless(host: &dyn Host, nic: &Link) -> bool {
    sysfs_is(host, &nic.name, nic.index)
        && ["wireless", "phy80211"]
            .iter()
            .any(|d| host.exists(&format!("/sys/class/net/{}/{d}", nic.name)))
}

/// Links of [`UPPER_KINDS`] whose lower device (`iflink`: `IFLA_LINK`, which
/// `netlink::Link` does not carry) is `nic`; name and kind.
pub fn uppers(host: &dyn Host, links: &[Link], nic: &Link) -> Vec<(String, String)> {
    links
        .iter()
        .filter_map(|l| {
            let kind = l.kind.as_deref().filter(|k| UPPER_KINDS.contains(k))?;
            if l.index == nic.index || !sysfs_is(host, &l.name, l.index) {
                return None;
            }
            let lower = host.read(&format!("/sys/class/net/{}/iflink", l.name))?;
            (lower.trim().parse::<u32>().ok()? == nic.index)
                .then(|| (l.name.clone(), kind.to_string()))
        })
        .collect()
}

/// The NIC's driver (`/sys/class/net/<nic>/device/driver`'s target, last component).
pub fn driver(host: &dyn Host, nic: &Link) -> Option<String> {
    if !sysfs_is(host, &nic.name, nic.index) {
        return None;
    }
    let target = host.read_link(&format!("/sys/class/net/{}/device/driver", nic.name))?;
    target.rsplit('/').next().map(str::to_string)
}

/// DHCP clients whose command line names `nic`: the program from `/proc/<pid>/comm`,
/// the arguments from `cmdline`, NUL-separated, or space-separated where the program
/// rewrote its title (dhcpcd 9: "dhcpcd: eth1 [ip4]").
pub fn dhcp_clients(host: &dyn Host, nic: &str) -> Vec<DhcpClient> {
    let mut out: Vec<DhcpClient> = host
        .list("/proc")
        .iter()
        .filter_map(|pid| {
            let pid: u32 = pid.parse().ok()?;
            let program = host.read(&format!("/proc/{pid}/comm"))?.trim().to_string();
            if !matches!(program.as_str(), "dhclient" | "dhcpcd") {
                return None;
            }
            let cmdline = host.read(&format!("/proc/{pid}/cmdline"))?;
            let args: Vec<&str> = cmdline.split('\0').filter(|a| !a.is_empty()).collect();
            let named = match args.as_slice() {
                [title] => title.split_whitespace().skip(1).any(|a| a == nic),
                args => args.iter().skip(1).any(|a| *a == nic),
            };
            named.then_some(DhcpClient { pid, program })
        })
        .collect();
    out.sort_by_key(|c| c.pid);
    out
}

/// netplan's glob (`fnmatch`): `*` and `?`. Greedy with one backtrack point (the last
/// `*`), so time is linear in the pattern times the name whatever the file says: the
/// recursive form was exponential in the number of `*`s.
fn glob(pattern: &str, s: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let s: Vec<char> = s.chars().collect();
    let (mut pi, mut si) = (0, 0);
    // Where the last `*` was, and where in `s` it started matching.
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, si));
                pi += 1;
            }
            Some(&c) if c == '?' || c == s[si] => {
                pi += 1;
                si += 1;
            }
            _ => match star {
                // Let the last `*` take one more character and try again from there.
                Some((sp, ss)) => {
                    pi = sp + 1;
                    si = ss + 1;
                    star = Some((sp, ss + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// The `network.ethernets` entries of one netplan file that apply to `nic`: every key
/// of `match:` holds (name and driver are globs, macaddress compares case-insensitively),
/// or, without `match:`, the id is the NIC's name.
pub fn netplan_matches(
    file: &str,
    text: &str,
    nic: &str,
    mac: Option<&str>,
    driver: Option<&str>,
) -> Vec<NetplanMatch> {
    let Ok(docs) = crate::k8s::yaml::parse_documents(text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for doc in &docs {
        let Some(eths) = doc
            .get("network")
            .and_then(|n| n.get("ethernets"))
            .and_then(|e| e.as_object())
        else {
            continue;
        };
        for (id, def) in eths {
            let by = match def.get("match").and_then(|m| m.as_object()) {
                Some(m) => {
                    let key = |k: &str| m.get(k).and_then(|v| v.as_str());
                    let holds = key("name").is_none_or(|g| glob(g, nic))
                        && key("driver").is_none_or(|g| driver.is_some_and(|d| glob(g, d)))
                        && key("macaddress")
                            .is_none_or(|a| mac.is_some_and(|m| m.eq_ignore_ascii_case(a.trim())));
                    if !holds || m.is_empty() {
                        continue;
                    }
                    ["macaddress", "driver", "name"]
                        .into_iter()
                        .find(|k| m.contains_key(*k))
                        .unwrap_or("name")
                }
                None if id == nic => "name",
                None => continue,
            };
            out.push(NetplanMatch {
                file: file.to_string(),
                id: id.clone(),
                by,
                set_name: def
                    .get("set-name")
                    .and_then(|v| v.as_str())
                    .map(str::to_string),
            });
        }
    }
    out
}

/// netplan's configuration directories, in the order it reads them.
const NETPLAN_DIRS: &[&str] = &["/lib/netplan", "/etc/netplan", "/run/netplan"];

/// Every netplan entry that applies to `nic`.
pub fn netplan(host: &dyn Host, nic: &Link) -> Vec<NetplanMatch> {
    let mac = nic.mac.as_ref().map(mac::format);
    let driver = driver(host, nic);
    let mut out = Vec::new();
    for dir in NETPLAN_DIRS {
        for name in host.list(dir).iter().filter(|n| n.ends_with(".yaml")) {
            let file = format!("{dir}/{name}");
            if let Some(text) = host.read(&file) {
                out.extend(netplan_matches(
                    &file,
                    &text,
                    &nic.name,
                    mac.as_deref(),
                    driver.as_deref(),
                ));
            }
        }
    }
    out
}

/// The OVS version: `Open_vSwitch.ovs_version` (the distributions' start scripts set
/// it), else the last word of `ovs-appctl version` ("ovs-vswitchd (Open vSwitch) 3.1.0";
/// a bare ovs-vswitchd leaves the column empty).
pub fn ovs_version(column: Option<&str>, appctl: Option<&str>) -> Option<String> {
    column
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .or_else(|| {
            appctl?
                .lines()
                .next()?
                .split_whitespace()
                .last()
                .map(str::to_string)
        })
}

#[cfg(test)]
mod tests;
