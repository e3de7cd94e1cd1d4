#!/usr/bin/env bash
# test.sh: the project's test command (README, .ci/run). Run as root: the privileged tiers
# start real Open vSwitch daemons in network namespaces of their own.
#   sudo ./scripts/test.sh            everything: fmt, clippy, product checks, all test tiers
#                                     (the kernel tier boots a VM: TETHER_SKIP_KERNEL_TIER=1
#                                     skips it, saying so)
#   TETHER_SKIP_PRIVILEGED=1 ./scripts/test.sh   unit tier only (privileged tests say SKIPPED)
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ ${TETHER_SKIP_PRIVILEGED:-0} != 1 ]]; then
  ./scripts/install-deps.sh
  ./scripts/cleanup-stale.sh
fi

echo "== cargo fmt --check" >&2
cargo fmt --all -- --check
echo "== cargo clippy" >&2
cargo clippy --all-targets --locked -- -D warnings
if [[ ${TETHER_SKIP_PRIVILEGED:-0} != 1 ]]; then
  # systemd unit verify + exposure, offline build from the vendored tarball, static binary.
  ./scripts/check-product.sh
fi
echo "== cargo test" >&2
# The systemd tier (tests/systemd_vm.rs) runs later, on its own: its tests mostly wait (a
# lease's expiry, a watchdog) and each boots a container, so they all run at once there.
SYSTEMD_TIER=(--skip _under_a_real_systemd --skip dhcp_under_)
cargo test --locked -- "${SYSTEMD_TIER[@]}"
kernel=""
if [[ ${TETHER_SKIP_PRIVILEGED:-0} != 1 ]]; then
  # The kernel tier (a VM on the kernel datapath: scripts/kernel-tier.sh) runs in the
  # background beside the systemd tier and the fault campaigns, which mostly wait; its
  # results come last. Its own cargo steps go first, alone.
  echo "== kernel tier: started in the background (results at the end)" >&2
  mkdir -p target
  rm -rf target/kernel-tier
  ./scripts/kernel-tier.sh >target/kernel-tier.log 2>&1 &
  kernel=$!
  trap '[[ -n $kernel ]] && kill -TERM "$kernel" 2>/dev/null' EXIT
  while kill -0 "$kernel" 2>/dev/null && [[ ! -f target/kernel-tier/.built ]]; do sleep 1; done
fi
echo "== cargo test: systemd tier" >&2
cargo test --locked --test systemd_vm -- --test-threads=8
if [[ ${TETHER_SKIP_PRIVILEGED:-0} != 1 ]]; then
  # The fault campaigns' bounded CI tier (docs/reliability.md; --full runs the full counts).
  echo "== faults (CI tier)" >&2
  ./scripts/faults.sh --ci
fi
if [[ -n $kernel ]]; then
  echo "== kernel tier" >&2
  status=0
  wait "$kernel" || status=$?
  kernel=""
  cat target/kernel-tier.log >&2
  if ((status)); then
    echo "test.sh: the kernel tier FAILED (logs: target/kernel-tier/)" >&2
    exit 1
  fi
fi
