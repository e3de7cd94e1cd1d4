# lib.sh: what the kernel tier's guest scenarios (reboot.sh, hostnet.sh) share. Sourced after
# tier.env; the caller sets R (its PASS/FAIL file) and L (its log) first.
# The VM's NIC is a real virtio NIC (enp0s16, 02:00:00:00:01:10, so udev gives it the
# persistent name ID_NET_NAME_PATH=enp0s16); its wire is a qemu hub to a second NIC
# (enp0s17), moved into a "gw" namespace: the gateway outside the VM (192.0.2.1,
# 2001:db8:1::1).
NIC=enp0s16 GWNIC=enp0s17
scale=${TETHER_TEST_TIMEOUT_SCALE:-1}
failed=0
check() { # check NAME COMMAND...: one PASS/FAIL line
  local name=$1
  shift
  if "$@" >>"$L" 2>&1; then
    echo "PASS $name" | tee -a "$R"
  else
    echo "FAIL $name" | tee -a "$R"
    failed=1
    # The caller's own diagnostics, when it has some.
    if declare -F on_fail >/dev/null; then on_fail; fi
  fi
}
# wait_until SECONDS COMMAND...: poll every 0.5 s, the deadline stretched by the scale.
wait_until() {
  local end=$((SECONDS + $1 * scale))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS >= end)) && return 1
    sleep 0.5
  done
}
gw() { ip netns exec gw "$@"; }
# The gateway: the hub's other NIC in a namespace of its own (a fresh one at every boot).
gateway() {
  ip netns add gw
  ip link set "$GWNIC" netns gw
  gw ip link set lo up
  gw sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf."$GWNIC".accept_dad=0
  gw ip link set "$GWNIC" up
  gw ip addr add 192.0.2.1/24 dev "$GWNIC"
  gw ip -6 addr add 2001:db8:1::1/64 dev "$GWNIC"
}
pings() { gw ping -c 3 -i 0.3 -W 2 "$1" | tee -a "$L" | grep -q ' 3 received' ; }
holds() { ip -br addr show dev "$1" | grep -q "$2"; }
enslaved() { ip -d link show dev "$NIC~" | grep -q 'master ovs-system'; }
internal() { ip -d link show dev "$NIC" | grep -q 'openvswitch '; }
tether_ready() {
  systemctl is-active -q tether &&
    systemctl show -p StatusText --value tether | grep -q '^ready' &&
    tether status --json --state-socket /run/tether/tether.sock | grep -q '"step": *"attached"'
}
# Given back: the NIC under its own name again (not OVS's port), nothing left as NIC~.
released() { ! internal && ! ip link show dev "$NIC~" >/dev/null 2>&1; }
# The README's manual install (### Manual install), the tier's build standing in for the
# release binary, reading a manifests directory; then the unit enabled and started without
# waiting for READY (the callers wait for what they need).
install_tether() {
  (
    cd "$REPO"
    install -m 0755 "$TETHER_BIN" /usr/local/bin/tether
    install -m 0644 systemd/tether.service /etc/systemd/system/tether.service
    install -d -m 0700 /etc/tether /etc/tether/manifests
    install -m 0600 deploy/tether.yaml /etc/tether/tether.yaml
  )
  sed -i -e 's|^kubeconfig: .*|manifests: /etc/tether/manifests|' \
    -e 's|^# nodeName: .*|nodeName: vm1|' /etc/tether/tether.yaml
  tether check --config /etc/tether/tether.yaml >>"$L" 2>&1
  systemctl daemon-reload && systemctl enable tether >>"$L" 2>&1
  systemctl start --no-block tether
}
# externalnode IP...: the ExternalNode for this VM, its interface named by its IPs.
externalnode() {
  local ips
  ips=$(printf '"%s", ' "$@")
  # Before install_tether too (the reboot scenario's tether starts with it in place).
  install -d -m 0700 /etc/tether /etc/tether/manifests
  cat >/etc/tether/manifests/externalnode.yaml.tmp <<EOT
apiVersion: crd.antrea.io/v1alpha1
kind: ExternalNode
metadata:
  name: vm1
  namespace: vm-ns
spec:
  interfaces:
    - ips: [${ips%, }]
EOT
  mv /etc/tether/manifests/externalnode.yaml.tmp /etc/tether/manifests/externalnode.yaml
}
