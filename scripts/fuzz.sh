#!/usr/bin/env bash
# fuzz.sh: run every fuzz target of fuzz/ for SECONDS each (default 60) and print one line
# per target: `fuzz <target>: execs=<n> crashes=<n> secs=<s> driver=<libfuzzer|mutate>`.
#   ./scripts/fuzz.sh [SECONDS] [--driver libfuzzer|mutate|both] [--execs N] [TARGET...]
# libfuzzer: cargo-fuzz (coverage-guided libFuzzer). It needs nightly compiler flags; on the
#   stable toolchain they are unlocked with RUSTC_BOOTSTRAP=1, and `-s none` (no ASan: the
#   code under test is safe Rust). New corpus entries go to fuzz/corpus/<target> (not
#   committed); the committed seeds are fuzz/seeds/<target>.
# mutate: fuzz/src/bin/mutate.rs, a stable coverage-less mutation loop; `--execs N` runs
#   exactly N executions per target instead of a time budget (mutate only).
# Default driver: libfuzzer when cargo-fuzz is installed, else mutate. Crashing inputs land
# in fuzz/artifacts/<target>/; the exit status is 1 when any target crashed.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=60
driver=""
execs=""
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --driver) driver="$2"; shift 2 ;;
    --execs) execs="$2"; shift 2 ;;
    [0-9]*) secs="$1"; shift ;;
    *) targets+=("$1"); shift ;;
  esac
done
all=(openflow_msg ovsdb_framer ovsdb_datum watch_event manifests step_record
     cp_policy_event cp_address_group_event cp_applied_to_group_event)
[[ ${#targets[@]} -gt 0 ]] || targets=("${all[@]}")
if [[ -z $driver ]]; then
  if cargo fuzz --version >/dev/null 2>&1; then driver=libfuzzer; else driver=mutate; fi
fi

crashed=0

run_mutate() {
  (cd fuzz && cargo build --release --quiet --bin mutate)
  local budget=(--secs "$secs")
  [[ -n $execs ]] && budget=(--execs "$execs")
  for t in "${targets[@]}"; do
    ./fuzz/target/release/mutate "$t" "${budget[@]}" || crashed=1
  done
}

run_libfuzzer() {
  export RUSTC_BOOTSTRAP=1
  local flags=(--fuzz-dir fuzz -s none --features libfuzzer -O)
  for t in "${targets[@]}"; do
    cargo fuzz build "${flags[@]}" "$t" >/dev/null 2>&1 || { echo "fuzz $t: cargo fuzz build failed" >&2; exit 2; }
  done
  for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
    local before after log
    before=$(find "fuzz/artifacts/$t" -type f | wc -l)
    log=$(mktemp)
    local start=$SECONDS
    cargo fuzz run "${flags[@]}" "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -- \
      -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="fuzz/artifacts/$t/" >"$log" 2>&1 || true
    after=$(find "fuzz/artifacts/$t" -type f | wc -l)
    local n
    n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    local c=$((after - before))
    [[ $c -gt 0 ]] && { crashed=1; grep -m3 -E "panicked|ERROR|SUMMARY" "$log" >&2 || true; }
    echo "fuzz $t: execs=${n:-0} crashes=$c secs=$((SECONDS - start)) driver=libfuzzer"
    rm -f "$log"
  done
}

case "$driver" in
  libfuzzer) run_libfuzzer ;;
  mutate) run_mutate ;;
  both) run_libfuzzer; run_mutate ;;
  *) echo "fuzz.sh: unknown driver $driver" >&2; exit 2 ;;
esac
exit "$crashed"
