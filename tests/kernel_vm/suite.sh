#!/bin/bash
# suite.sh (inside the kernel tier's VM, as its payload): tether's privileged test binaries on
# the kernel datapath. scripts/kernel-tier.sh built them on the host and shares the
# repository ($REPO, from ./tier.env) at the path it was built at, so that the paths compiled
# into the binaries (CARGO_BIN_EXE_tether, CARGO_MANIFEST_DIR) resolve; cargo runs tests from
# there too. ./tests.list names them, one per line:
#   <name> <path to the test binary> <test-threads> [VAR=VALUE ...]
# (TIER_NOCAPTURE=1 among the variables: the binary's own output is kept, --nocapture;
# TIER_SKIP=<test>: --skip <test>; TIER_NO_TETHER=1: runs before the tier's tether is built)
# For each: out/test-<name>.log, and a line in out/suite.txt:
#   <name> rc=<n> <seconds>s <cargo's result line>
# Then the reboot scenario (./reboot.sh) when it is next to this script, across a real reboot,
# and after it the network managers' scenario (./hostnet.sh).
set -u
. ./tier.env
out=$PWD/out
mkdir -p "$out"
# TETHER_BIN: the tether the tests run (kernel-tier.sh builds it optimised).
export TETHER_TEST_DATAPATH=system RUST_BACKTRACE=1 TETHER_TEST_BIN=$TETHER_BIN
if [[ ${TIER_BOOT:-1} == 1 ]]; then
  modprobe openvswitch || { echo "suite: modprobe openvswitch failed"; exit 1; }
  echo "suite: kernel $(uname -r), openvswitch $(modinfo -F version openvswitch 2>/dev/null || echo in-tree)," \
    "$(ovs-vswitchd --version | head -n 1), accel=$TETHER_VM_ACCEL scale=$TETHER_TEST_TIMEOUT_SCALE"
  rc_all=0
  # The host builds the tier's tether while this boots: it writes "ok" to $TETHER_READY
  # when the binary is there (or why not). Binaries marked TIER_NO_TETHER=1 run before.
  tether_ready() {
    local i
    for ((i = 0; i < 900; i++)); do
      [[ -s $TETHER_READY ]] && break
      sleep 1
    done
    [[ $(cat "$TETHER_READY" 2>/dev/null) == ok ]]
  }
  : >"$out/suite.txt"
  while read -r name bin threads envs; do
    [[ -z $name || $name == \#* ]] && continue
    read -ra vars <<<"$envs"
    extra=()
    [[ " $envs " == *" TIER_NOCAPTURE=1 "* ]] && extra=(--nocapture)
    for v in "${vars[@]}"; do [[ $v == TIER_SKIP=* ]] && extra+=(--skip "${v#TIER_SKIP=}"); done
    if [[ " $envs " != *" TIER_NO_TETHER=1 "* ]] && ! tether_ready; then
      printf '%-22s rc=1 not run: %s\n' "$name" "$(cat "$TETHER_READY" 2>/dev/null || echo "no tether after 15 min")" |
        tee -a "$out/suite.txt"
      rc_all=1
      continue
    fi
    s=$(date +%s.%N)
    # The tests create their namespaces and OVS sandboxes under /tmp and remove them.
    (cd "$REPO" && env "${vars[@]}" "$bin" --test-threads="${threads:-2}" "${extra[@]}") \
      >"$out/test-$name.log" 2>&1
    rc=$?
    d=$(awk -v a="$(date +%s.%N)" -v b="$s" 'BEGIN { printf "%.1f", a - b }')
    res=$(grep -E '^test result' "$out/test-$name.log" | tail -n 1)
    printf '%-22s rc=%d %7ss  %s\n' "$name" "$rc" "$d" "${res:-no result line}" | tee -a "$out/suite.txt"
    grep -E '^test .* FAILED$' "$out/test-$name.log" | sed 's/^/    /'
    ((rc)) && rc_all=1
  done <tests.list
  echo "$rc_all" >"$out/suite.rc"
  if [[ -f reboot.sh ]]; then
    bash ./reboot.sh
    exit $?
  fi
  exit $rc_all
fi
# After the reboot the scenario checks what came back; then, in the same boot, the network
# managers' scenario (./hostnet.sh) when it is there. The suite's verdict counts too.
bash ./reboot.sh
rc=$?
if [[ -f hostnet.sh ]]; then
  bash ./hostnet.sh || rc=1
fi
((rc == 0)) && rc=$(cat "$out/suite.rc")
exit "$rc"
