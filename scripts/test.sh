#!/usr/bin/env bash
# test.sh: the project's test command (README, .ci/run). Run as root: the privileged tiers
# start real Open vSwitch daemons in network namespaces of their own.
#   sudo ./scripts/test.sh            everything: fmt, clippy, product checks, all test tiers
#                                     (the kernel tier boots a VM: TETHER_SKIP_KERNEL_TIER=1
#                                     skips it, saying so)
#   TETHER_SKIP_PRIVILEGED=1 ./scripts/test.sh   unit tier only (privileged tests say SKIPPED)
# Order: fmt and the test build; then the kernel tier (a VM that keeps two cores busy and is
# the longest stage: scripts/kernel-tier.sh) in the background while the rest runs beside it
# — clippy, the product checks, cargo test, the systemd tier, the fault campaigns, which
# mostly wait — with their waits stretched (TETHER_TEST_TIMEOUT_SCALE,
# default 2) for a machine shared with a VM; the kernel tier's results last. Each stage's header says how
# many seconds into the run it started.
set -euo pipefail
cd "$(dirname "$0")/.."

privileged=1
[[ ${TETHER_SKIP_PRIVILEGED:-0} == 1 ]] && privileged=0
image=""
kernel=""
cleanup() {
  [[ -n $kernel ]] && kill -TERM "$kernel" 2>/dev/null
  [[ -n $image ]] && kill -TERM "$image" 2>/dev/null
  return 0
}
trap cleanup EXIT
mkdir -p target
if ((privileged)); then
  ./scripts/install-deps.sh
  ./scripts/cleanup-stale.sh
  if [[ ${TETHER_SKIP_KERNEL_TIER:-0} != 1 ]]; then
    # The kernel tier's VM image (cached; on a new machine a debootstrap and Debian's
    # kernel: mostly downloads), while the checks below use the CPU.
    ./scripts/kernel-image.sh >target/kernel-image.log 2>&1 &
    image=$!
  fi
fi

stage() { echo "== $* ($((SECONDS)) s)" >&2; }
stage "cargo fmt --check"
cargo fmt --all -- --check
stage "cargo test: build"
cargo test --locked --no-run
if [[ -n $image ]]; then
  # kernel-tier.sh builds it if this failed, and says why if it cannot.
  wait "$image" || echo "test.sh: the VM image did not build here (target/kernel-image.log)" >&2
  image=""
fi
if ((privileged)); then
  # First of the long stages: the VM is the longest, the rest fit beside it.
  stage "kernel tier: started in the background (results at the end)"
  rm -rf target/kernel-tier
  ./scripts/kernel-tier.sh >target/kernel-tier.log 2>&1 &
  kernel=$!
  # Its own cargo step (nothing to build by now) goes first, alone.
  while kill -0 "$kernel" 2>/dev/null && [[ ! -f target/kernel-tier/.built ]]; do sleep 1; done
fi
stage "cargo clippy"
cargo clippy --all-targets --locked -- -D warnings
if ((privileged)); then
  # systemd unit verify + exposure, offline build from the vendored tarball, static binary.
  stage "product checks"
  ./scripts/check-product.sh
  export TETHER_TEST_TIMEOUT_SCALE=${TETHER_TEST_TIMEOUT_SCALE:-2}
fi
stage "cargo test"
# The systemd tier (tests/systemd_vm.rs) runs later, on its own: its tests mostly wait (a
# lease's expiry, a watchdog) and each boots a container, so they all run at once there.
# (Run beside cargo test, it slowed the VM more than it saved: the machine's two cores
# are the limit, not the waits.)
SYSTEMD_TIER=(--skip _under_a_real_systemd --skip dhcp_under_)
cargo test --locked -- "${SYSTEMD_TIER[@]}"
stage "cargo test: systemd tier"
cargo test --locked --test systemd_vm -- --test-threads=8
if ((privileged)); then
  # The fault campaigns' bounded CI tier (docs/reliability.md; --full runs the full counts).
  stage "faults (CI tier)"
  ./scripts/faults.sh --ci
fi
if [[ -n $kernel ]]; then
  stage "kernel tier"
  status=0
  wait "$kernel" || status=$?
  kernel=""
  cat target/kernel-tier.log >&2
  if ((status)); then
    echo "test.sh: the kernel tier FAILED (logs: target/kernel-tier/)" >&2
    exit 1
  fi
fi
