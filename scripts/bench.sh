#!/usr/bin/env bash
# bench.sh [GROUP...]: run the benchmarks (docs/design.md#benchmarks). Each group is an
# example program examples/bench_<group>.rs; every measure prints one line
#   bench <name>: tether=<n><unit> baseline=<n><unit> ratio=<tether/baseline>
# with the baseline measured in the same run. Groups: ovsdb openflow kube trafficcontrol
# externalnode daemon networkpolicy (those not built yet are reported and skipped). Run as
# root: the benchmarks start real OVS daemons in private network namespaces.
# The `externalnode` group runs twice: here on the userspace datapath, then in the kernel
# tier's VM (scripts/kernel-vm.sh) on the kernel datapath, its lines ending in `_system`
# (TETHER_SKIP_KERNEL_TIER=1: not there).
# tether is built in release mode. The benchmark programs are built with the `bench`
# profile (release settings; its panics abort: Cargo ignores `panic` for it), so a failing
# benchmark does not run its guards: the EXIT trap's cleanup-stale.sh stops the OVS
# daemons it started and removes its namespaces. Their waits
# (not their measures) allow TETHER_TEST_TIMEOUT_SCALE (default 4) times the usual, for a
# busy machine.
set -euo pipefail
cd "$(dirname "$0")/.."

all=(ovsdb openflow kube trafficcontrol externalnode daemon networkpolicy)
groups=("$@")
(( ${#groups[@]} )) || groups=("${all[@]}")
export TETHER_TEST_TIMEOUT_SCALE=${TETHER_TEST_TIMEOUT_SCALE:-4}

./scripts/install-deps.sh
./scripts/cleanup-stale.sh
# Whatever a benchmark killed by a signal left behind goes too.
trap './scripts/cleanup-stale.sh' EXIT
cargo build --release --locked --bins >&2
# The bench profile writes to target/release as well: the programs find tether next to them.
cargo build --profile bench --locked --examples >&2
# The shipped static binary, for the measures that compare it (skipped if it cannot be built).
./scripts/build-static.sh >&2 || echo "bench: no static binary; its measures are skipped" >&2

rc=0
for g in "${groups[@]}"; do
  bin=target/release/examples/bench_$g
  if [[ ! -x $bin ]]; then
    echo "bench group $g: not built yet (no examples/bench_$g.rs)" >&2
    continue
  fi
  echo "== bench group $g" >&2
  "$bin" || { echo "bench group $g FAILED" >&2; rc=1; }
  if [[ $g == externalnode && ${TETHER_SKIP_KERNEL_TIER:-0} != 1 ]]; then
    echo "== bench group $g on the kernel datapath (the kernel tier's VM)" >&2
    out=target/kernel-bench
    printf 'REPO=%q\nBENCH=%q\n' "$PWD" "$PWD/$bin" >target/kernel-bench.env
    if ./scripts/kernel-vm.sh -v "$PWD:$PWD" --out "$out" tests/kernel_vm/bench.sh \
      target/kernel-bench.env >&2; then
      grep '^bench ' "$out/bench.txt" || true
    else
      echo "bench group $g on the kernel datapath FAILED (log: $out/guest.log)" >&2
      rc=1
    fi
  fi
done
exit $rc
