#!/usr/bin/env bash
# kernel-vm.sh [OPTIONS] PAYLOAD [FILE...]: boot the kernel tier's VM (scripts/kernel-image.sh:
# Debian's kernel, systemd as PID 1, Open vSwitch) under QEMU, run the bash script PAYLOAD in
# it as root, and exit with its status. Inside, PAYLOAD is /mnt/share/run.sh (the cwd), next to
# the FILEs given; what it writes to /mnt/share/out/ is copied to --out, with the serial
# console (console.log). The root disk is a copy-on-write overlay of the cached image,
# thrown away at the end: every run starts from the same image, and a reboot the payload asks
# for (exit 194) keeps what it wrote. qemu is killed when this script ends, however it ends.
#   --out DIR          results (default ./kernel-vm-out; emptied first)
#   --timeout SEC      the whole run, boots included (default 1800), then exit 124
#   -v HOST:GUEST      share HOST read-write at GUEST (virtio-9p), e.g. the repository at its
#                      own path so that paths compiled into test binaries resolve
#   --nics             two virtio NICs on one qemu hub (MACs 02:00:00:00:01:10 and
#                      02:00:00:00:01:01): a wire inside the VM with no way out of it
#   --mem MIB --smp N  guest size (default 2048, 2)
#   --console          stream the guest's console to stderr
#   --accel kvm|tcg    force one (default: see below)
# Accelerator: KVM when the host's KVM is hardware-assisted (kvm_intel or kvm_amd loaded),
# else TCG (software emulation, 5-10 times slower), saying why. These machines' /dev/kvm is
# PVM (kvm_pvm), which boots only PVM-aware guest kernels: Debian's kernel hangs on it.
# The choice is printed as "kernel-vm: accel=<a> (<why>) scale=<n>", and the payload finds it
# in its environment: TETHER_VM_ACCEL and TETHER_TEST_TIMEOUT_SCALE (how much slower than
# the host the harness should expect the guest to be: 2 under KVM, 8 under TCG;
# TETHER_VM_TIMEOUT_SCALE overrides it).
# Exit: the payload's status; 124 timeout; 125 the guest ended without one.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/kernel-vm-out timeout=1800 mem=2048 smp=2 console=0 nics=0 accel=""
vols=()
while (($#)); do
  case $1 in
    --out) out=$2; shift ;;
    --timeout) timeout=$2; shift ;;
    -v) vols+=("$2"); shift ;;
    --nics) nics=1 ;;
    --mem) mem=$2; shift ;;
    --smp) smp=$2; shift ;;
    --console) console=1 ;;
    --accel) accel=$2; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d;s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "kernel-vm: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
  shift
done
(($# >= 1)) || { echo "usage: kernel-vm.sh [OPTIONS] PAYLOAD [FILE...]" >&2; exit 2; }
payload=$1
shift
[[ $(id -u) -eq 0 ]] || { echo "kernel-vm: needs root (the image, 9p as root)" >&2; exit 1; }
img=$(./scripts/kernel-image.sh)

why=""
if [[ -z $accel ]]; then
  if [[ -w /dev/kvm ]] && [[ -d /sys/module/kvm_intel || -d /sys/module/kvm_amd ]]; then
    accel=kvm why="hardware-assisted KVM"
  else
    accel=tcg why="no /dev/kvm"
    [[ -e /dev/kvm ]] && why="/dev/kvm is not hardware-assisted (no kvm_intel/kvm_amd)"
    [[ -d /sys/module/kvm_pvm ]] && why="/dev/kvm is PVM (kvm_pvm), which cannot boot Debian's kernel"
    why="software emulation: $why"
  fi
fi
case $accel in
  kvm) cpu=host scale=2 ;;
  tcg) cpu=max scale=8 ;;
  *) echo "kernel-vm: --accel kvm or tcg, not '$accel'" >&2; exit 2 ;;
esac
why=${why:-forced}
scale=${TETHER_VM_TIMEOUT_SCALE:-$scale}
cpu=${TETHER_VM_CPU:-$cpu}
echo "kernel-vm: accel=$accel ($why) scale=$scale" >&2

if [[ -d $out && -n $(ls -A "$out") && ! -f $out/console.log ]]; then
  echo "kernel-vm: --out $out holds something else than earlier results; not emptying it" >&2
  exit 2
fi
rm -rf "$out"
mkdir -p "$out"
run_dir=$(mktemp -d /tmp/tether-kernel-vm.XXXXXX)
share=$run_dir/share
mkdir -p "$share"
qpid="" tailpid=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n $qpid ]] && kill -0 "$qpid" 2>/dev/null; then
    kill -TERM "$qpid" 2>/dev/null || true
    for _ in $(seq 20); do kill -0 "$qpid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$qpid" 2>/dev/null || true
  fi
  [[ -n $tailpid ]] && kill "$tailpid" 2>/dev/null
  [[ -d $share/out ]] && cp -a "$share/out/." "$out/" 2>/dev/null
  rm -rf "$run_dir"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cp "$payload" "$share/run.sh"
for f in "$@"; do cp -a "$f" "$share/"; done
printf 'export TETHER_VM_ACCEL=%s TETHER_TEST_TIMEOUT_SCALE=%s\n' "$accel" "$scale" >"$share/vm.env"
qemu-img create -q -f qcow2 -F raw -b "$img/root.img" "$run_dir/root.qcow2"

append="root=/dev/vda rw console=ttyS0 quiet loglevel=4 panic=-1 tier.run=1 systemd.show_status=0"
fs=(-fsdev "local,id=share,path=$share,security_model=none"
  -device "virtio-9p-pci,fsdev=share,mount_tag=share")
mounts=()
n=0
for v in "${vols[@]}"; do
  n=$((n + 1))
  fs+=(-fsdev "local,id=v$n,path=${v%%:*},security_model=none"
    -device "virtio-9p-pci,fsdev=v$n,mount_tag=v$n")
  mounts+=("v$n:${v#*:}")
done
((n)) && append+=" guest.mount=$(IFS=,; echo "${mounts[*]}")"
net=(-nic none)
if ((nics)); then
  net=(-netdev hubport,id=p0,hubid=0 -device virtio-net-pci,netdev=p0,mac=02:00:00:00:01:10,addr=0x10
    -netdev hubport,id=p1,hubid=0 -device virtio-net-pci,netdev=p1,mac=02:00:00:00:01:01,addr=0x11)
fi
con=$out/console.log
: >"$con"
start=$(date +%s.%N)
since() { awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN { printf "%.1f", a - b }'; }
qemu-system-x86_64 -name tether-kernel-tier -machine "q35,accel=$accel" -cpu "$cpu" -m "$mem" -smp "$smp" \
  -nodefaults -no-user-config -display none -monitor none -serial "file:$con" "${net[@]}" \
  -kernel "$img/vmlinuz" -initrd "$img/initrd.img" -append "$append" \
  -drive "file=$run_dir/root.qcow2,if=virtio,format=qcow2,cache=unsafe" \
  -device virtio-rng-pci "${fs[@]}" </dev/null >"$out/qemu.log" 2>&1 &
qpid=$!
((console)) && { tail -n +1 -F --pid="$qpid" "$con" >&2 2>/dev/null & tailpid=$!; }
deadline=$(($(date +%s) + timeout))
ready=""
while kill -0 "$qpid" 2>/dev/null; do
  [[ -z $ready ]] && grep -q TIER-READY "$con" && ready=$(since)
  if (($(date +%s) >= deadline)); then
    echo "kernel-vm: timed out after ${timeout} s; console tail:" >&2
    tail -n 40 "$con" >&2
    exit 124
  fi
  sleep 0.2
done
wait "$qpid" || true
qpid=""
echo "kernel-vm: payload started ${ready:-never} s after qemu, VM gone after $(since) s" | tee "$out/timing" >&2
if [[ ! -f $share/out/rc ]]; then
  echo "kernel-vm: the guest ended without a status; console tail:" >&2
  tail -n 40 "$con" >&2
  grep -v '^$' "$out/qemu.log" >&2 || true
  exit 125
fi
exit "$(cat "$share/out/rc")"
