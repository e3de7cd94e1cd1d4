#!/usr/bin/env bash
# check-product.sh: the product checks of scripts/test.sh (run as root):
#  1. systemd/tether.service passes `systemd-analyze verify` and its exposure from
#     `systemd-analyze security --offline=true` is at most 2.5;
#  2. offline build: scripts/vendor.sh's tarball, unpacked, builds the static musl binary
#     with an empty CARGO_HOME, --offline --locked, inside `unshare -n` (no network);
#  3. that binary is statically linked, runs `tether version` with an empty environment,
#     holds no test hook (TETHER_CRASH_AT), and its size is printed (goal ≤ 8 MB);
#  4. scripts/demo.sh (with the debug binary) shows what it should, tether exits 0 on its
#     SIGTERM, and everything is cleaned up.
# Installs what a fresh machine lacks (systemd for systemd-analyze, musl-tools, the Rust
# musl target) before the network is cut.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

apt_install() {
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >&2 ||
    { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >&2; }
}

echo "== systemd unit" >&2
command -v systemd-analyze >/dev/null || apt_install systemd
command -v file >/dev/null || apt_install file
unitdir=$(mktemp -d)
trap 'rm -rf "$unitdir"' EXIT
# The test build's tether (with the test hooks; the static binary below is checked for
# their absence): after `cargo test --no-run`, as in scripts/test.sh, nothing to build.
# A plain `cargo build` would build tether a second time, without them.
cargo test --locked --no-run >&2
# verify insists that ExecStart= binaries exist: point them at the one just built.
sed "s#/usr/local/bin/tether#$root/target/debug/tether#g" systemd/tether.service >"$unitdir/tether.service"
systemd-analyze verify "$unitdir/tether.service"
exposure=$(systemd-analyze security --offline=true "$unitdir/tether.service" | sed -n 's/.*Overall exposure level for tether.service: \([0-9.]*\).*/\1/p')
echo "systemd-analyze security: exposure $exposure (limit 2.5)" >&2
[[ -n $exposure ]] && awk -v e="$exposure" 'BEGIN { exit !(e <= 2.5) }' || {
  echo "FAIL: exposure ${exposure:-unknown} > 2.5" >&2
  exit 1
}

echo "== offline static build" >&2
TETHER_PREPARE_ONLY=1 ./scripts/build-static.sh
tarball=$(./scripts/vendor.sh target/offline-check/tether-vendored.tar.gz)
work=target/offline-check/src
rm -rf "$work" && mkdir -p "$work" && tar -xzf "$tarball" -C "$work"
src=$(echo "$work"/tether-*)
empty_home=$(mktemp -d)
# Its own target dir, kept between runs so a second run only rebuilds tether itself.
unshare -n env -i PATH="$PATH" HOME="$HOME" RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}" \
  CARGO_HOME="$empty_home" CARGO_TARGET_DIR="$root/target/offline-check/target" \
  "$src/scripts/build-static.sh" --offline >/dev/null
rm -rf "$empty_home"
bin=target/offline-check/target/x86_64-unknown-linux-musl/release/tether

echo "== static binary" >&2
desc=$(file -b "$bin")
echo "file: $desc" >&2
[[ $desc == *"static-pie linked"* || $desc == *"statically linked"* ]] || {
  echo "FAIL: $bin is not statically linked" >&2
  exit 1
}
out=$(env -i "$bin" version)
[[ $out == "tether $(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)" ]] || {
  echo "FAIL: '$bin version' printed '$out'" >&2
  exit 1
}
# Test hooks (crash points on TETHER_CRASH_AT) are compiled into test builds only.
if grep -qa TETHER_CRASH_AT "$bin"; then
  echo "FAIL: $bin contains the test-only crash hooks (TETHER_CRASH_AT)" >&2
  exit 1
fi
size=$(stat -c %s "$bin")
echo "static binary: $size bytes ($(awk -v s="$size" 'BEGIN { printf "%.2f", s / 1048576 }') MB, goal 8 MB): $out" >&2

echo "== demo (README's first command)" >&2
log=$(mktemp)
if ! TETHER_BIN=target/debug/tether DEMO_PAUSE=0 ./scripts/demo.sh </dev/null >"$log" 2>&1; then
  cat "$log" >&2
  echo "FAIL: scripts/demo.sh" >&2
  exit 1
fi
# The takeover keeps the VM reachable without duplicates; the collector saw all 6 packets.
if grep -q "DUP!" "$log" || ! grep -q "→ 6 mirrored packets" "$log" ||
  [[ $(grep -c " 0% packet loss" "$log") -ne 4 ]] || ! grep -q "^attached  eth1 " "$log" ||
  ! grep -q "^tether stopped: SIGTERM → exit 0 " "$log"; then
  cat "$log" >&2
  echo "FAIL: the demo's output is not what it should show" >&2
  exit 1
fi
rm -f "$log"
echo "demo: takeover ping, 6 mirrored packets, status shown, SIGTERM → exit 0, cleaned up" >&2
