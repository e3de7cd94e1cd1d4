#!/bin/bash
# hostnet.sh (inside the kernel tier's VM, in the reboot scenario's second boot, after it;
# or alone in a fresh VM booted with --nics): the VM's network manager keeps the VM's
# addresses across a takeover and a give-back, on the kernel datapath, with a NIC that has a
# udev persistent name (lib.sh). What the systemd tier's containers cannot show: they have
# no udev, so there networkd derives every link's IAID from its MAC, the host port's too.
# 1. systemd-networkd, DHCPv4 and DHCPv6 from dnsmasq in the gateway namespace, 2-minute
#    leases. dnsmasq keys a DHCPv4 lease by the client-id and a DHCPv6 one by DUID and
#    IAID. networkd's client-id is RFC 4361's (ff, the IAID, the DUID), and it derives the
#    IAID from the persistent name (ID_NET_NAME_PATH=enp0s16); the host port is an OVS
#    internal port with none, so unless tether pins the NIC's IAID in the host port's
#    .network, networkd asks with another client-id and IAID and gets other addresses.
#    After the takeover the host port's own lease must carry the NIC's client-id and the
#    same addresses; after the give-back the NIC gets them again.
# 2. NetworkManager (the RHEL family's manager) with a static profile bound by
#    interface-name (addresses, gateway, a route, DNS, MTU 1400): the host port is a
#    generic device to NM on this datapath. After the takeover NM runs tether's profile
#    there and leaves enp0s16~ alone; a restart of NetworkManager changes nothing; after
#    the give-back the NIC has its own profile again.
# The old code fails both: before the IAID pin (d47607b) the host port leased 192.0.2.78
# with client-id ff174d0b40… (the MAC's IAID) where the NIC had .77 with ff97b964e0…;
# before NetworkManager support (728c679) NM kept the NIC's profile on enp0s16~ and left
# the host port unmanaged.
# PASS/FAIL lines go to out/hostnet.txt; the exit status is 1 when any check failed.
set -u
. ./tier.env
out=$PWD/out
mkdir -p "$out"
R=$out/hostnet.txt L=$out/hostnet.log
. ./lib.sh
: >"$R"
ip netns list | grep -qw gw || gateway
if ! systemctl is-enabled -q tether 2>/dev/null; then
  # Alone in a fresh VM: Open vSwitch, and tether with no ExternalNode yet.
  systemctl start openvswitch-switch >>"$L" 2>&1
  wait_until 60 ovs-vsctl show
  install_tether
fi
MANIFEST=/etc/tether/manifests/externalnode.yaml
# dnsmasq's grants so far: lines "DHCPACK(...) <ip>" and "DHCPREPLY(...) <ip>".
DLOG=$out/dnsmasq.log
grants() {
  local n
  n=$(grep -cE "$1\(.*\) $2( |$)" "$DLOG" 2>/dev/null)
  echo "${n:-0}"
}
lease_of() { # lease_of LINK KEY: networkd's DHCPv4 lease file's KEY= for LINK
  sed -n "s/^$2=//p" "/run/systemd/netif/leases/$(cat "/sys/class/net/$1/ifindex")" 2>/dev/null
}
addr_of() { # addr_of LINK 4|6: its dynamic global address (no prefix)
  ip -"$2" -o addr show dev "$1" scope global dynamic 2>/dev/null | awk '{ split($4, a, "/"); print a[1]; exit }'
}
no_global() { [[ -z $(ip -o addr show dev "$1" scope global) ]]; }
one_default_via() { [[ $(ip -4 route show default | grep -c .) == 1 ]] && ip -4 route show default | grep -q "dev $1 "; }
equals() { [[ $1 == "$2" ]]; }
attached() { tether_ready && internal && enslaved; }
# After a failed check (lib.sh calls it): what the managers and the links say, in the log
# and on the console.
on_fail() {
  {
    echo "--- after: $(tail -n 1 "$R")"
    ip -br link
    ip -br addr
    ip route show table all | grep -v '^local\|^broadcast\|^multicast'
    nmcli -t -f DEVICE,TYPE,STATE,CONNECTION device 2>&1
    nmcli -t -f NAME,UUID,TYPE,DEVICE connection show 2>&1
    networkctl list --no-pager 2>&1
    journalctl -b --no-pager -o cat -n 25 -u tether -u NetworkManager -u systemd-networkd 2>&1
  } | tee -a "$L"
}

# HOSTNET_PARTS: which parts run (both by default; one alone for a quicker try by hand).
parts=" ${HOSTNET_PARTS:-networkd nm} "

if [[ $parts == *" networkd "* ]]; then
echo "== network managers, 1: systemd-networkd, DHCP identity of a NIC with a persistent name"
rm -f "$MANIFEST"
check "networkd: the NIC given back to be set up for DHCP" wait_until 30 released
gw dnsmasq --conf-file=/dev/null --interface="$GWNIC" --bind-interfaces --port=0 \
  --dhcp-range=192.0.2.50,192.0.2.99,255.255.255.0,2m \
  --dhcp-range=2001:db8:1::100,2001:db8:1::1ff,64,2m --enable-ra --ra-param="$GWNIC",10,600 \
  --dhcp-option=option:router,192.0.2.1 --dhcp-leasefile=/run/hostnet-dnsmasq.leases \
  --pid-file=/run/hostnet-dnsmasq.pid --log-dhcp --log-facility="$DLOG" >>"$L" 2>&1
mkdir -p /etc/systemd/network
cat >/etc/systemd/network/10-nic.network <<EOF
[Match]
Name=$NIC

[Network]
DHCP=yes
IPv6AcceptRA=yes

[Link]
RequiredForOnline=no
EOF
systemctl start systemd-networkd >>"$L" 2>&1
# The reboot scenario's static addresses go: the NIC's addresses are its leases only.
ip addr flush dev "$NIC" scope global
networkctl reload >>"$L" 2>&1
networkctl reconfigure "$NIC" >>"$L" 2>&1
leased() { [[ -n $(addr_of "$NIC" 4) && -n $(addr_of "$NIC" 6) ]] && [[ -n $(lease_of "$NIC" CLIENTID) ]]; }
check "networkd: the NIC leases an IPv4 and an IPv6 address" wait_until 30 leased
A4=$(addr_of "$NIC" 4) A6=$(addr_of "$NIC" 6) ID=$(lease_of "$NIC" CLIENTID)
echo "hostnet: the NIC's leases: $A4 $A6, client-id $ID ($(udevadm info -q property -p "/sys/class/net/$NIC" | grep ID_NET_NAME_PATH))" | tee -a "$L"
acks=$(grants DHCPACK "$A4") replies=$(grants DHCPREPLY "$A6")
externalnode "$A4" "$A6"
check "networkd: the NIC taken over" wait_until 30 attached
host_leased() {
  [[ $(lease_of "$NIC" ADDRESS) == "$A4" ]] && holds "$NIC" "$A6" &&
    (($(grants DHCPACK "$A4") > acks && $(grants DHCPREPLY "$A6") > replies))
}
check "networkd: the host port leases $A4 and $A6 again (dnsmasq ACKs and REPLYs them after the takeover)" \
  wait_until 30 host_leased
echo "hostnet: the host port's lease: $(lease_of "$NIC" ADDRESS), client-id $(lease_of "$NIC" CLIENTID)" | tee -a "$L"
check "networkd: the host port's DHCPv4 client-id is the NIC's ($ID)" equals "$(lease_of "$NIC" CLIENTID)" "$ID"
check "networkd: the host port holds only the NIC's addresses" \
  equals "$(ip -o addr show dev "$NIC" scope global | awk '{ print $4 }' | sort | tr '\n' ' ')" \
  "$(printf '%s\n' "$A4/24" "$A6/128" | sort | tr '\n' ' ')"
check "networkd: $NIC~ has no address" no_global "$NIC~"
check "networkd: one default route, via the host port" one_default_via "$NIC"
check "networkd: the VM answers on $A4" pings "$A4"
check "networkd: and on $A6" pings "$A6"
acks=$(grants DHCPACK "$A4") replies=$(grants DHCPREPLY "$A6")
rm -f "$MANIFEST"
nic_leased() {
  released && [[ $(lease_of "$NIC" ADDRESS) == "$A4" ]] && holds "$NIC" "$A6" &&
    (($(grants DHCPACK "$A4") > acks && $(grants DHCPREPLY "$A6") > replies))
}
check "networkd: given back, the NIC leases $A4 and $A6 again" wait_until 30 nic_leased
check "networkd: given back, one default route via the NIC" one_default_via "$NIC"
kill "$(cat /run/hostnet-dnsmasq.pid)" 2>/dev/null
fi

if [[ $parts == *" nm "* ]]; then
echo "== network managers, 2: NetworkManager, a static profile, the kernel datapath's generic port"
rm -f "$MANIFEST"
check "NetworkManager: no ExternalNode yet" wait_until 30 released
# networkd lets go of the NIC (its own addresses go too): NetworkManager's turn.
rm -f /etc/systemd/network/10-nic.network
systemctl stop systemd-networkd.socket systemd-networkd >>"$L" 2>&1
ip addr flush dev "$NIC" scope global
mkdir -p /etc/NetworkManager/conf.d /etc/NetworkManager/system-connections
printf '[main]\nno-auto-default=*\n' >/etc/NetworkManager/conf.d/90-tier.conf
cat >/etc/NetworkManager/system-connections/nic.nmconnection <<EOF
[connection]
id=nic
type=ethernet
interface-name=$NIC

[ethernet]
mtu=1400

[ipv4]
method=manual
address1=192.0.2.10/24,192.0.2.1
dns=192.0.2.53;
route1=198.51.100.0/24,192.0.2.254

[ipv6]
method=manual
address1=2001:db8:1::10/64,2001:db8:1::1
EOF
chmod 600 /etc/NetworkManager/system-connections/nic.nmconnection
# The image masks it (nothing manages a NIC unless a test says so).
systemctl unmask NetworkManager.service >>"$L" 2>&1
systemctl start NetworkManager >>"$L" 2>&1
nm_on() { nmcli -t -f DEVICE,STATE,CONNECTION device | grep -qx "$1"; }
nm_static() {
  holds "$1" 192.0.2.10/24 && holds "$1" 2001:db8:1::10/64 && ip link show dev "$1" | grep -q ' mtu 1400 ' &&
    ip -4 route show 198.51.100.0/24 | grep -q "via 192.0.2.254 dev $1 "
}
nm_dns() { [[ $(nmcli -g IP4.DNS device show "$1") == 192.0.2.53 ]]; }
check "NetworkManager: the NIC connected with its profile (addresses, a route, MTU 1400)" \
  wait_until 30 eval "nm_on '$NIC:connected:nic' && nm_static $NIC"
externalnode 192.0.2.10 2001:db8:1::10
check "NetworkManager: the NIC taken over" wait_until 30 attached
nm_attached() {
  nm_on "$NIC:connected:tether-$NIC" && nm_on "$NIC~:unmanaged:" && nm_static "$NIC" && nm_dns "$NIC" &&
    no_global "$NIC~" && one_default_via "$NIC"
}
check "NetworkManager: tether's profile on the host port (addresses, route, DNS, MTU), $NIC~ unmanaged and bare, one default route" \
  wait_until 20 nm_attached
nmcli -t -f DEVICE,TYPE,STATE,CONNECTION device >>"$L" 2>&1
check "NetworkManager: the VM answers through OVS" pings 192.0.2.10
check "NetworkManager: IPv6 too" pings 2001:db8:1::10
systemctl restart NetworkManager >>"$L" 2>&1
check "NetworkManager: restarted, the same" wait_until 20 nm_attached
check "NetworkManager: restarted, the VM answers" pings 192.0.2.10
rm -f "$MANIFEST"
nm_back() {
  released && nm_on "$NIC:connected:nic" && nm_static "$NIC" && one_default_via "$NIC" &&
    ! nmcli -t -f NAME connection show | grep -qx "tether-$NIC"
}
check "NetworkManager: given back, the NIC has its own profile and addresses again, tether's profile gone" \
  wait_until 30 nm_back
check "NetworkManager: given back, the VM answers" pings 192.0.2.10
fi
journalctl -b --no-pager -o short-monotonic -u tether -u NetworkManager -u systemd-networkd \
  >"$out/hostnet-journal.txt" 2>&1
exit $failed
