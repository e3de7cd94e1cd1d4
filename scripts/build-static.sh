#!/usr/bin/env bash
# build-static.sh [CARGO FLAGS...]: build tether as one static binary for
# x86_64-unknown-linux-musl (release profile: LTO, panic=abort, stripped) and print where
# it is and how big. Installs what is missing when it can: the Rust target (rustup) and
# musl-tools (apt, as root); without musl-tools, ring's C code is built with plain gcc
# (CC_x86_64_unknown_linux_musl=gcc works).
#   ./scripts/build-static.sh                      build
#   ./scripts/build-static.sh --offline            build from vendor/ (see scripts/vendor.sh)
#   TETHER_PREPARE_ONLY=1 ./scripts/build-static.sh   only install the prerequisites
set -euo pipefail
cd "$(dirname "$0")/.."

target=x86_64-unknown-linux-musl
if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
  echo "build-static: adding the Rust target $target (rustup)" >&2
  rustup target add "$target" || {
    echo "build-static: cannot add $target; install it with 'rustup target add $target' on a connected machine" >&2
    exit 1
  }
fi
if ! command -v x86_64-linux-musl-gcc >/dev/null 2>&1 && [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  echo "build-static: installing musl-tools" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends musl-tools >&2 ||
    { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends musl-tools >&2; } ||
    echo "build-static: musl-tools not installed; using gcc for C code" >&2
fi
if command -v x86_64-linux-musl-gcc >/dev/null 2>&1; then
  export CC_x86_64_unknown_linux_musl=x86_64-linux-musl-gcc
else
  export CC_x86_64_unknown_linux_musl=gcc
fi
[[ ${TETHER_PREPARE_ONLY:-0} == 1 ]] && exit 0

cargo build --release --locked --target "$target" --bin tether "$@" >&2
bin=${CARGO_TARGET_DIR:-target}/$target/release/tether
echo "build-static: $bin $(stat -c %s "$bin") bytes" >&2
echo "$bin"
