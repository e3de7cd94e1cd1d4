#!/usr/bin/env bash
# kernel-tier.sh: the packet tests on Open vSwitch's kernel (`system`) datapath, the one
# production VMs use. These machines' own kernels have no openvswitch module, so the tests run
# in a VM: Debian bookworm's own kernel (6.1, with openvswitch.ko) and systemd, booted with
# QEMU (scripts/kernel-vm.sh; hardware KVM where the host has it, else software emulation,
# said in the output; the harness's timeouts scale with it). The test binaries are built on
# the host (`cargo test --no-run`) and run in the guest with TETHER_TEST_DATAPATH=system, the
# repository shared at its own path. Then, in the same VM, the reboot scenario
# (tests/kernel_vm/reboot.sh): tether's unit enabled, the NIC taken over, a real reboot; and
# after it the network managers' scenario (tests/kernel_vm/hostnet.sh: networkd's DHCP
# identity with a udev-named NIC, NetworkManager on this datapath).
#   sudo ./scripts/kernel-tier.sh                  everything below
#   sudo ./scripts/kernel-tier.sh externalnode ... only these test binaries (and no reboot
#                                                  unless KERNEL_TIER_REBOOT=1)
#   KERNEL_TIER_REBOOT=0                           skip the reboot and network managers' scenarios
#   TETHER_VM_CPU=<model>                          another -cpu for qemu (default: max under TCG)
# Where the tier cannot run (no qemu, not root) it says why and FAILS; set
# TETHER_SKIP_KERNEL_TIER=1 to skip it on purpose (it then says so and exits 0).
# Results: target/kernel-tier/ (suite.txt: one line per binary; test-<name>.log; the
# console; reboot.txt, hostnet.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

if [[ ${TETHER_SKIP_KERNEL_TIER:-0} == 1 ]]; then
  echo "kernel tier: SKIPPED (TETHER_SKIP_KERNEL_TIER=1): nothing ran on the kernel datapath" >&2
  exit 0
fi
fail() {
  echo "kernel tier: CANNOT RUN: $*" >&2
  echo "kernel tier: set TETHER_SKIP_KERNEL_TIER=1 to skip it deliberately" >&2
  exit 1
}
[[ $(id -u) -eq 0 ]] || fail "needs root (the VM image, qemu's 9p shares as root)"
for t in qemu-system-x86_64 qemu-img mkfs.ext4; do
  command -v "$t" >/dev/null || fail "$t is missing (sudo ./scripts/install-deps.sh)"
done

# The test binaries on the kernel datapath: name, test threads (two vCPUs; one where the
# tests time each other, load the module or measure recovery), then environment for it.
# The fault campaigns run with smaller counts than the host's CI tier (each fault costs
# several times as long here; docs/reliability.md has a run with more), and print their
# figures (--nocapture). TIER_NO_TETHER=1: the binary runs no tether, so it goes first,
# while the tier's tether is still being built (the guest waits for it before the others).
ALL=(
  "netlink_kernel 2 TIER_NO_TETHER=1" "datapath 2"
  "externalnode 2" "externalnode_daemon 2" "trafficcontrol_e2e 3" "trafficcontrol_target 1"
  "plan_cmd 1" "flows_cmd 1" "product 1" "kernel_datapath 1 TIER_NOCAPTURE=1"
  "outside_changes 3"
  "faults 1 TETHER_FAULTS=ci FAULTS_VSWITCHD_KILLS=1 FAULTS_OVSDB_RESTARTS=1 FAULTS_TETHER_KILLS=2 TIER_NOCAPTURE=1 TIER_SKIP=api_fault_campaign"
)
# The other privileged binaries run on the host's userspace datapath only, each because no
# packet and no datapath behaviour is in it:
#   bad_input, host_input: bad API objects, configs and files parsed by the daemon (what
#     they check happens before OVS is touched; the datapath type is a config value);
#   package: the .deb/.rpm read back with dpkg-deb and rpm;
#   systemd_vm: its own tier (a systemd container on this host; the reboot scenario below
#     is its kernel-datapath counterpart);
#   openflow_live, trafficcontrol_live: OpenFlow and OVSDB conversations with ovs-vswitchd
#     through the library, no packet (the same code's packets are in the binaries above);
#   harness: the test harness's own checks (namespaces, daemons, dummy ports);
#   ovsdb: the OVSDB client against ovsdb-server (transactions, monitors, the replica);
#     ovs-vswitchd's only part is a port-add error, and the ExternalNode binaries here
#     add and delete every kind of port tether makes on the kernel datapath;
#   openflow_print, k8s_*, kubectl, python_client, cli*: no OVS datapath at all.
# And within faults, the API campaign (faults of the Kubernetes source; TIER_SKIP).
# The tests run a tether built with the `tier` profile (optimised, test hooks in:
# TETHER_TEST_BIN): under software emulation a debug tether's own CPU time was most of what
# the daemon tests waited for (externalnode_daemon 188 s with it, 103 s without).
# Run only when named (none now).
ON_REQUEST=()
reboot=${KERNEL_TIER_REBOOT:-1}
wanted=()
if (($#)); then
  reboot=${KERNEL_TIER_REBOOT:-0}
  for w in "$@"; do
    found=""
    for e in "${ALL[@]}" "${ON_REQUEST[@]}"; do [[ ${e%% *} == "$w" ]] && found=$e; done
    [[ -n $found ]] || { echo "kernel tier: no test binary '$w' in the tier (${ALL[*]%% *} ${ON_REQUEST[*]%% *})" >&2; exit 2; }
    wanted+=("$found")
  done
else
  wanted=("${ALL[@]}")
fi

out=$repo/target/kernel-tier
rm -rf "$out"
mkdir -p "$out"
work=$(mktemp -d /tmp/tether-kernel-tier.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "== kernel tier: building the test binaries" >&2
names=()
for e in "${wanted[@]}"; do names+=(--test "${e%% *}"); done
cargo test --locked --no-run --message-format=json "${names[@]}" >"$work/build.json" 2>"$work/build.err" ||
  { cat "$work/build.err" >&2; exit 1; }
# Built: what runs beside this tier (scripts/test.sh) may use cargo in target/ again. The
# tier's tether is built in a target dir of its own, so that it locks nothing of theirs.
touch "$out/.built"
# The tier's tether builds while the VM boots and runs the binaries that need none: the
# guest waits for $out/.tether (the word "ok", or why not) before the others.
tier_target=$repo/target/kernel-tier-build
tether_bin=$tier_target/tier/tether
(
  if CARGO_TARGET_DIR=$tier_target cargo build --locked --profile tier --features test-hooks \
    --bin tether 2>"$work/build-tether.err"; then
    echo ok >"$out/.tether"
  else
    echo "the tier's tether did not build (target/kernel-tier/build-tether.err)" >"$out/.tether"
    cp "$work/build-tether.err" "$out/build-tether.err"
  fi
) &
builder=$!
: >"$work/tests.list"
for e in "${wanted[@]}"; do
  read -r name threads envs <<<"$e"
  bin=$(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") \
       and m["target"]["name"] == sys.argv[2] and "test" in m["target"]["kind"]:
        print(m["executable"])' "$work/build.json" "$name")
  [[ -x $bin ]] || { echo "kernel tier: no test binary for $name" >&2; exit 1; }
  echo "$name $bin $threads $envs" >>"$work/tests.list"
done
printf 'REPO=%q\nTETHER_BIN=%q\nTETHER_READY=%q\n' "$repo" "$tether_bin" "$out/.tether" >"$work/tier.env"
files=("$work/tests.list" "$work/tier.env")
vm_opts=(-v "$repo:$repo" --out "$out/vm")
if ((reboot)); then
  files+=(tests/kernel_vm/lib.sh tests/kernel_vm/reboot.sh tests/kernel_vm/hostnet.sh)
  vm_opts+=(--nics)
fi

echo "== kernel tier: ${#wanted[@]} test binaries$( ((reboot)) && echo ", then a reboot and the network managers") in a VM" >&2
start=$SECONDS
rc=0
# In the background, so that a TERM to this script reaches the VM's runner (which stops qemu).
./scripts/kernel-vm.sh "${vm_opts[@]}" tests/kernel_vm/suite.sh "${files[@]}" &
vm=$!
trap 'kill -TERM $vm $builder 2>/dev/null' TERM INT
while :; do
  wait "$vm" && break
  rc=$?
  kill -0 "$vm" 2>/dev/null || break
done
wait "$builder" || true
if [[ $(cat "$out/.tether" 2>/dev/null) != ok ]]; then
  cat "$out/build-tether.err" >&2 2>/dev/null
  echo "kernel tier: FAILED: the tier's tether did not build" >&2
  rc=1
fi
for f in suite.txt reboot.txt hostnet.txt; do
  [[ -f $out/vm/$f ]] && cp "$out/vm/$f" "$out/$f"
done
echo "== kernel tier results ($((SECONDS - start)) s, $(cat "$out/vm/timing" 2>/dev/null | sed 's/^kernel-vm: //'))" >&2
if [[ -s $out/suite.txt ]]; then cat "$out/suite.txt" >&2; else echo "(no suite results)" >&2; fi
for f in reboot.txt hostnet.txt; do
  [[ -f $out/$f ]] && cat "$out/$f" >&2
done
for log in "$out"/vm/test-*.log; do
  [[ -f $log ]] || continue
  if grep -qE '^test .* FAILED$|^error: test failed' "$log"; then
    echo "--- $(basename "$log"): failures" >&2
    sed -n '/^failures:$/,/^test result/p' "$log" | head -n 150 >&2
  fi
done
if ((rc)); then
  echo "kernel tier: FAILED (rc=$rc; logs in $out/vm)" >&2
  exit 1
fi
echo "kernel tier: passed" >&2
