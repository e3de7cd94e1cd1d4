#!/usr/bin/env bash
# faults.sh: the fault campaigns of tests/faults.rs (docs/reliability.md#fault-campaigns)
# against the tether binary and real userspace OVS in private namespaces (root). One result
# line per campaign:
#   faults vswitchd-kill9: runs=… converged=… reachable=… recover_p50=… recover_max=… over_2000ms=…
#   faults ovsdb-restart: runs=… converged=… duplicate_rows=0 lost_rows=0 db_…(tether) recover_…
#   faults api: faults=… changes=… requests=… final_state=equal fresh_start=equal kinds={…}
#   faults tether-kill9: kills=… converged=1/1 final_state=expected vm_samples=… vm_lost=0
# Tiers:
#   ./scripts/faults.sh --ci     bounded (well under 3 minutes on 2 cores): 6 vswitchd kills,
#                                4 ovsdb restarts, 80 API faults, 8 tether kills
#   ./scripts/faults.sh --full   the full counts (docs/reliability.md#summary): 50, 20,
#                                10,000, 100 (the API campaign alone takes about two
#                                hours: each fault costs tether a reconnect with its
#                                0.8 s+ backoff)
# Counts can be overridden one by one: FAULTS_VSWITCHD_KILLS, FAULTS_OVSDB_RESTARTS,
# FAULTS_API_FAULTS, FAULTS_TETHER_KILLS; FAULTS_SEED replays a run's randomness.
set -euo pipefail
cd "$(dirname "$0")/.."

tier=ci
case "${1:---ci}" in
  --ci) tier=ci ;;
  --full) tier=full ;;
  *) echo "usage: faults.sh [--ci|--full]" >&2; exit 2 ;;
esac

out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$SECONDS
status=0
# The campaigns run one at a time: each starts and kills daemons, and recovery figures
# mean more without three other campaigns competing for the two cores.
TETHER_FAULTS=$tier cargo test --locked --test faults -- --nocapture --test-threads 1 \
  >"$out" 2>&1 || status=$?
grep -E '^faults [a-z0-9-]+: [a-z_]+=' "$out" || true
grep -E 'FAULTS_SEED=' "$out" >&2 || true
if [[ $status -ne 0 ]]; then
  grep -E -A5 'panicked|^failures:' "$out" >&2 || true
  echo "faults.sh: FAILED (tier $tier) after $((SECONDS - start)) s" >&2
  exit "$status"
fi
echo "faults.sh: all campaigns passed (tier $tier) in $((SECONDS - start)) s"
