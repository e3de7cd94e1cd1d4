#!/usr/bin/env bash
# install-deps.sh: install the Debian packages the tests and the demo need, when missing.
# A policy-rc.d that exits 101 keeps openvswitch-switch's postinst from starting a system
# OVS in the root namespace (the tests start their own, each in a private netns).
set -euo pipefail

# systemd-container and debootstrap: the systemd tier boots a Debian tree with a real systemd
# (scripts/vm-tree.sh); dnsmasq-base (the binary, no service): its DHCP server. rpm:
# scripts/package.sh builds the .rpm with its rpmbuild (dpkg-deb is part of dpkg).
# qemu-system-x86, qemu-utils, e2fsprogs: the kernel tier boots Debian's kernel in a VM (scripts/kernel-image.sh).
# iperf3: the NetworkPolicy end-to-end tests run Antrea's VM e2e cases with it (its output is what they assert).
PKGS=(openvswitch-switch iproute2 iputils-ping tcpdump ethtool procps systemd-container debootstrap
  dnsmasq-base util-linux rpm qemu-system-x86 qemu-utils e2fsprogs iperf3)
TOOLS=(ovsdb-tool ovsdb-server ovs-vswitchd ovs-vsctl ovs-ofctl ovs-appctl ip ping tcpdump ethtool sysctl
  systemd-nspawn debootstrap dnsmasq nsenter flock rpmbuild dpkg-deb qemu-system-x86_64 qemu-img mkfs.ext4 iperf3)

missing=()
for t in "${TOOLS[@]}"; do command -v "$t" >/dev/null 2>&1 || missing+=("$t"); done
[[ -r /usr/share/openvswitch/vswitch.ovsschema ]] || missing+=(vswitch.ovsschema)
if (( ${#missing[@]} == 0 )); then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing ${missing[*]}; run as root (sudo) so they can be installed" >&2
  exit 1
fi
echo "install-deps: missing ${missing[*]}; installing ${PKGS[*]}" >&2
policy=/usr/sbin/policy-rc.d
had_policy=0
[[ -e $policy ]] && had_policy=1
if (( ! had_policy )); then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  trap 'rm -f "$policy"' EXIT
fi
export DEBIAN_FRONTEND=noninteractive
# A machine whose qemu-utils came from bookworm-backports cannot take bookworm's
# qemu-system-x86 beside it (that qemu-utils Breaks qemu-system-common < 8.0): qemu then
# comes from the same backports, through a source list that is here only for this run.
qemu_bpo=0
if [[ $(dpkg-query -W -f='${Version}' qemu-utils 2>/dev/null || true) == *~bpo12* ]]; then
  qemu_bpo=1
  bpo=/etc/apt/sources.list.d/tether-install-deps-backports.list
  echo "deb http://deb.debian.org/debian bookworm-backports main" >"$bpo"
  trap 'rm -f "$bpo"; ((had_policy)) || rm -f "$policy"' EXIT
  PKGS=("${PKGS[@]/qemu-system-x86/}")
fi
apt-get update
apt-get install -y --no-install-recommends ${PKGS[@]}
if ((qemu_bpo)); then
  apt-get install -y --no-install-recommends -t bookworm-backports qemu-system-x86
fi
