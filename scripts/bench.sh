#!/usr/bin/env bash
# bench.sh [GROUP...]: run the benchmarks (docs/design.md#benchmarks). Each group is an
# example program examples/bench_<group>.rs built in release mode; every measure prints
# one line
#   bench <name>: tether=<n><unit> baseline=<n><unit> ratio=<tether/baseline>
# with the baseline measured in the same run. Groups: ovsdb openflow kube trafficcontrol
# externalnode daemon (those not built yet are reported and skipped). Run as root: the
# benchmarks start real OVS daemons in private network namespaces.
set -euo pipefail
cd "$(dirname "$0")/.."

all=(ovsdb openflow kube trafficcontrol externalnode daemon)
groups=("$@")
(( ${#groups[@]} )) || groups=("${all[@]}")

./scripts/install-deps.sh
./scripts/cleanup-stale.sh
cargo build --release --locked --bins --examples >&2
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
done
exit $rc
