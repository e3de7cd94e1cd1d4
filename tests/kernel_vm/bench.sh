#!/bin/bash
# bench.sh (inside the kernel tier's VM, as its payload; scripts/bench.sh starts it): one
# benchmark program on the kernel datapath. ./kernel-bench.env gives REPO (shared at its own
# path) and BENCH (the program). Its lines go to out/bench.txt, with the accelerator (timings
# under software emulation are several times the host's, for tether and baseline alike:
# compare the ratios).
set -u
. ./kernel-bench.env
mkdir -p out
modprobe openvswitch || exit 1
echo "# kernel $(uname -r), accel=$TETHER_VM_ACCEL" >out/bench.txt
cd "$REPO"
TETHER_TEST_DATAPATH=system "$BENCH" | tee -a "$OLDPWD/out/bench.txt"
exit "${PIPESTATUS[0]}"
