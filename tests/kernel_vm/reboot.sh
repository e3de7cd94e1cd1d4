#!/bin/bash
# reboot.sh (inside the kernel tier's VM, after the test binaries; scripts/kernel-tier.sh
# boots it with --nics): a VM whose NIC tether has taken over is rebooted, with systemd as
# init and tether's unit enabled. After the boot ovs-vswitchd re-creates the host port from
# OVSDB while the NIC has its own name and addresses again (Antrea #4122); the VM must come
# back reachable with tether READY and the NIC taken over again.
# The VM's NIC (lib.sh) is configured by systemd-networkd.
# tether is installed with the README's manual install steps (the debug build stands for
# the release binary) and reads a manifests directory.
# Phase 1 (boot 1) ends with exit 194: tier-run reboots. Phase 2 checks. PASS/FAIL lines go
# to out/reboot.txt; the exit status is 1 when any check failed.
set -u
. ./tier.env
out=$PWD/out
R=$out/reboot.txt L=$out/reboot.log
. ./lib.sh
no_dup() { ! gw ping -c 3 -i 0.3 -W 2 "$1" | grep -q 'DUP!'; }
host_port() { internal && holds "$NIC" 192.0.2.10 && holds "$NIC" 2001:db8:1::10; }
# What this boot did, for the record: the units' journal, links and addresses, OVS.
state() {
  journalctl -b --no-pager -o short-monotonic -u tether -u ovs-vswitchd -u ovsdb-server \
    -u systemd-networkd -u systemd-udevd >"$1-journal.txt" 2>&1
  { ip -d addr; ip route show table all; ovs-vsctl show; tether status --state-socket /run/tether/tether.sock; } \
    >"$1-state.txt" 2>&1
}
ports_clean() { ! ovs-vsctl --columns=name,ofport,error list Interface | grep -E 'ofport *: -1|error *: "'; }

if [[ ${TIER_BOOT:-1} == 1 ]]; then
  : >"$R"
  echo "== reboot scenario, boot 1: install, take over"
  gateway
  mkdir -p /etc/systemd/network
  cat >/etc/systemd/network/10-nic.network <<EOF
[Match]
Name=$NIC

[Network]
Address=192.0.2.10/24
Gateway=192.0.2.1
Address=2001:db8:1::10/64
IPv6AcceptRA=no

[Link]
RequiredForOnline=no
EOF
  sysctl -qw net.ipv6.conf."$NIC".accept_dad=0
  echo "net.ipv6.conf.default.accept_dad=0" >/etc/sysctl.d/10-no-dad.conf
  systemctl enable --now systemd-networkd >>"$L" 2>&1
  check "networkd configures the NIC" wait_until 30 holds "$NIC" 192.0.2.10
  check "the VM answers before tether" pings 192.0.2.10
  systemctl enable --now openvswitch-switch >>"$L" 2>&1
  check "openvswitch-switch is up" wait_until 60 ovs-vsctl show
  externalnode 192.0.2.10 2001:db8:1::10
  install_tether
  check "boot 1: tether READY with the NIC attached" wait_until 60 tether_ready
  check "boot 1: $NIC~ enslaved to ovs-system" enslaved
  check "boot 1: $NIC is the internal port with the VM's addresses" host_port
  check "boot 1: the VM answers through OVS" pings 192.0.2.10
  check "boot 1: IPv6 too" pings 2001:db8:1::10
  state "$out/reboot-boot1"
  echo "== rebooting"
  exit 194
fi

echo "== reboot scenario, boot 2: what came back"
gateway
check "boot 2: tether READY with the NIC attached again" wait_until 90 tether_ready
check "boot 2: $NIC~ enslaved to ovs-system" enslaved
check "boot 2: $NIC is the internal port with the VM's addresses" host_port
check "boot 2: no OVS port in error" ports_clean
check "boot 2: the VM answers through OVS" pings 192.0.2.10
check "boot 2: IPv6 too" pings 2001:db8:1::10
check "boot 2: no duplicate replies" no_dup 192.0.2.10
check "boot 2: the VM reaches its gateway" ping -c 3 -i 0.3 -W 2 192.0.2.1
state "$out/reboot-boot2"
exit $failed
