#!/usr/bin/env bash
# demo.sh: tether in two minutes, on one machine, without a cluster. Run as root:
#   sudo ./scripts/demo.sh
# It installs what is missing (Open vSwitch, iproute2, tcpdump: scripts/install-deps.sh),
# builds tether, and then, all inside network namespaces of its own (nothing on this
# machine's own interfaces changes; documentation addresses only):
#   VM        namespace tether-demo-vm: a "VM" with NIC eth1 = 192.0.2.10/24, a userspace
#             Open vSwitch (bridge br-int) and tether, reading examples/demo/*.yaml
#   gateway   namespace tether-demo-gw: the VM's network, 192.0.2.1
#   Pods      namespaces tether-demo-web-a/-web-b (203.0.113.1, .2) on br-int
#   collector namespace tether-demo-coll behind OVS port coll0
# and shows: the NIC taken over (ping through OVS), packets between the Pods mirrored to
# the collector, `tether status`. Ctrl-C or the end stops tether and removes everything.
#   TETHER_BIN=path   use this binary instead of building one
#   DEMO_PAUSE=1      wait for Enter before cleaning up (default when run on a terminal)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

if [[ $(id -u) -ne 0 ]]; then
  echo "demo: run as root: sudo $0" >&2
  exit 1
fi

P=tether-demo
VM=$P-vm GW=$P-gw PA=$P-web-a PB=$P-web-b COLL=$P-coll
ALL_NS=("$VM" "$GW" "$PA" "$PB" "$COLL")
dir=""
tether_pid=""

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '\033[2m$ %s\033[0m\n' "$*"; "$@"; }
in_ns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }
ovs() { OVS_RUNDIR=$dir OVS_LOGDIR=$dir OVS_DBDIR=$dir OVS_SYSCONFDIR=$dir "$@"; }
vsctl() { ovs ovs-vsctl --timeout=10 --db="unix:$dir/db.sock" "$@"; }

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  say "cleaning up"
  if [[ -n $tether_pid ]] && kill -0 "$tether_pid" 2>/dev/null; then
    kill -TERM "$tether_pid" 2>/dev/null || true
    local code=0
    wait "$tether_pid" 2>/dev/null || code=$?
    echo "tether stopped: SIGTERM → exit $code (0: a clean stop; flows left in place, as on a real VM)"
  fi
  for ns in "${ALL_NS[@]}"; do
    if ip netns list | awk '{print $1}' | grep -qx "$ns"; then
      ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
      ip netns del "$ns" 2>/dev/null || true
    fi
  done
  [[ -n $dir && -d $dir ]] && rm -rf "$dir"
  echo "removed namespaces ${ALL_NS[*]} and the sandbox dir"
  exit "$rc"
}

# A previous run killed hard may have left namespaces behind.
for ns in "${ALL_NS[@]}"; do
  if ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$ns"; then
    ip netns pids "$ns" | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns"
  fi
done

say "1/9 prerequisites"
./scripts/install-deps.sh
if [[ -n ${TETHER_BIN:-} ]]; then
  bin=$TETHER_BIN
else
  if ! command -v cargo >/dev/null && [[ -n ${SUDO_USER:-} ]]; then
    # sudo resets PATH: use the invoking user's rustup toolchain.
    PATH="$(getent passwd "$SUDO_USER" | cut -d: -f6)/.cargo/bin:$PATH"
  fi
  command -v cargo >/dev/null || {
    echo "demo: cargo not found; install Rust (rustup) or set TETHER_BIN" >&2
    exit 1
  }
  say "2/9 building tether"
  run cargo build --locked --release --bin tether
  bin=$repo/target/release/tether
fi
bin=$(realpath "$bin")
"$bin" version

trap cleanup EXIT INT TERM
dir=$(mktemp -d /tmp/tether-demo.XXXXXX)
mkdir -p "$dir/manifests"

say "3/9 the sandbox: namespaces, veths, a userspace Open vSwitch in the VM"
for ns in "${ALL_NS[@]}"; do ip netns add "$ns"; in_ns "$ns" ip link set lo up; done
for ns in "$VM" "$GW"; do
  in_ns "$ns" sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
done
# The VM's NIC eth1 and its network.
ip link add eth1 netns "$VM" type veth peer name eth0 netns "$GW"
in_ns "$VM" ip link set eth1 address 02:00:00:00:01:10 up
in_ns "$VM" ip addr add 192.0.2.10/24 dev eth1
in_ns "$VM" ip route add default via 192.0.2.1
in_ns "$GW" ip link set eth0 up
in_ns "$GW" ip addr add 192.0.2.1/24 dev eth0
# The userspace datapath does not fix up checksums the veth left to offload.
in_ns "$GW" ethtool -K eth0 tx off >/dev/null
ovs ovsdb-tool create "$dir/conf.db" /usr/share/openvswitch/vswitch.ovsschema
ovs in_ns "$VM" ovsdb-server "$dir/conf.db" --remote="punix:$dir/db.sock" --pidfile \
  --log-file --detach --no-chdir -vconsole:off -vsyslog:off
vsctl --no-wait init
ovs in_ns "$VM" ovs-vswitchd "unix:$dir/db.sock" --pidfile --log-file --detach --no-chdir \
  -vconsole:off -vsyslog:off
vsctl add-br br-int -- set bridge br-int datapath_type=netdev protocols=OpenFlow10,OpenFlow15
# Pods: a namespace each, wired to br-int the way a CNI does it.
n=0
for pod in web-a web-b; do
  n=$((n + 1))
  ns=$P-$pod mac=02:00:00:00:00:0$n
  ip link add eth0 netns "$ns" type veth peer name "veth-$pod" netns "$VM"
  in_ns "$ns" ip link set eth0 address "$mac" up
  in_ns "$ns" ip addr add "203.0.113.$n/24" dev eth0
  in_ns "$ns" ethtool -K eth0 tx off >/dev/null
  in_ns "$VM" ip link set "veth-$pod" up
  vsctl add-port br-int "veth-$pod" -- set Port "veth-$pod" \
    external_ids:container-id="demo-$pod" external_ids:pod-name="$pod" \
    external_ids:pod-namespace=demo external_ids:attached-mac="\"$mac\""
done
# The collector.
ip link add eth0 netns "$COLL" type veth peer name coll0 netns "$VM"
in_ns "$COLL" ip link set eth0 up
in_ns "$VM" ip link set coll0 up
echo "VM before tether:"
run in_ns "$VM" ip -br addr show dev eth1
run in_ns "$GW" ping -c 2 -i 0.2 -q 192.0.2.10 | tail -2

cp examples/demo/*.yaml "$dir/manifests/"
flags=(--manifests "$dir/manifests" --ovs-rundir "$dir" --bridge br-int --datapath-type netdev
  --node-name vm1 --state-socket "$dir/tether.sock" --state-dir "$dir/state")
say "4/9 tether plan: what tether run would change (it changes nothing; exit 3 = changes pending)"
ls "$dir/manifests"
printf '\033[2m$ tether plan %s\033[0m\n' "${flags[*]}"
rc=0
in_ns "$VM" "$bin" plan "${flags[@]}" || rc=$?
echo "(exit code $rc)"

say "5/9 tether run"
# Backgrounded as a command, not through the in_ns function: `ip netns exec` and `env` exec,
# so $! is tether itself and the SIGTERM at the end reaches it (a function would be a
# subshell, and tether would only die with the namespace's kill -9).
ip netns exec "$VM" env RUST_LOG=info "$bin" run "${flags[@]}" >"$dir/tether.log" 2>&1 &
tether_pid=$!
for _ in $(seq 150); do
  if "$bin" status --json --state-socket "$dir/tether.sock" 2>/dev/null | grep -q '"ready": true'; then
    break
  fi
  kill -0 "$tether_pid" 2>/dev/null || { cat "$dir/tether.log"; echo "demo: tether exited" >&2; exit 1; }
  sleep 0.2
done
echo "tether is READY (log: first lines)"
head -n 12 "$dir/tether.log" | sed 's/^/  /'

say "6/9 the VM's NIC is taken over: eth1 is now an OVS internal port, eth1~ the uplink"
for _ in $(seq 75); do
  in_ns "$VM" ip -br link show dev 'eth1~' >/dev/null 2>&1 && break
  sleep 0.2
done
# Harness only: with the userspace datapath the kernel still sees the uplink's packets
# (on a real VM the kernel datapath takes them); keep its stack quiet so replies are not
# doubled (IPv6 tether turns off on the uplink itself). tether itself never needs this.
in_ns "$VM" sysctl -qw net.ipv4.conf.eth1~.arp_ignore=8 net.ipv4.conf.eth1~.rp_filter=1
run in_ns "$VM" ip -br addr
run vsctl list-ports br-int
run in_ns "$GW" ping -c 3 -i 0.2 192.0.2.10
run in_ns "$VM" ping -c 3 -i 0.2 192.0.2.1

say "7/9 web-a pings web-b; the mirror TrafficControl copies every packet to the collector"
in_ns "$COLL" timeout 10 tcpdump -n -l -i eth0 -c 6 icmp >"$dir/mirror.txt" 2>"$dir/tcpdump.err" &
cap=$!
for _ in $(seq 50); do grep -q "listening on" "$dir/tcpdump.err" && break; sleep 0.1; done
run in_ns "$PA" ping -c 3 -i 0.2 203.0.113.2
wait "$cap" || true
echo "captured on the collector (eth0 behind coll0):"
sed 's/^/  /' "$dir/mirror.txt"
echo "  → $(grep -c ICMP "$dir/mirror.txt" || true) mirrored packets"

say "8/9 tether status"
run "$bin" status --state-socket "$dir/tether.sock"

say "9/9 tether flows: the bridge's flows by owner, with their counters; tether plan again"
run "$bin" flows --ovs-rundir "$dir" --bridge br-int --state-socket "$dir/tether.sock"
rc=0
in_ns "$VM" "$bin" plan "${flags[@]}" || rc=$?
echo "(exit code $rc)"

if [[ ${DEMO_PAUSE:-} == 1 || ( -z ${DEMO_PAUSE:-} && -t 0 ) ]]; then
  echo
  read -r -p "Everything is still running (try: sudo ip netns exec $PA ping 203.0.113.2). Press Enter to clean up. " _ || true
fi
