#!/usr/bin/env bash
# kernel-image.sh: the VM image the kernel-datapath tier boots (scripts/kernel-tier.sh): the
# systemd tier's Debian bookworm tree (scripts/vm-tree.sh: systemd, Open vSwitch 3.1,
# iproute2, ...) plus Debian's own kernel (linux-image-amd64, 6.1, which ships
# openvswitch.ko), a small initramfs, the tools the tests call, and the guest runner
# (tests/kernel_vm/guest/). Everything comes from Debian's packages. Built once and cached
# under /var/cache/tether-test/, keyed by everything that shapes it (the tree's key, this
# script, the guest files); a missing or half-built image is rebuilt. Prints the image's
# directory (vmlinuz, initrd.img, root.img). Needs root and a Debian mirror
# (TETHER_VM_MIRROR, default deb.debian.org).
#   ./scripts/kernel-image.sh          build if missing, print the directory
#   ./scripts/kernel-image.sh --key    print the cache key only
set -euo pipefail
cd "$(dirname "$0")/.."
root_dir=$PWD

MIRROR=${TETHER_VM_MIRROR:-http://deb.debian.org/debian}
CACHE=/var/cache/tether-test
# initramfs-tools before the kernel, so that the kernel's postinst builds the initrd with
# MODULES=list. kmod: modprobe. tcpdump, ethtool: the tests' packet checks.
# iperf3: the NetworkPolicy e2e cases (Antrea's VM e2e runs them with it). dnsmasq-base:
# the DHCP server of tests/kernel_vm/hostnet.sh.
EXTRA_PKGS=(initramfs-tools kmod tcpdump ethtool iperf3 dnsmasq-base)
IMG_SIZE=2G
GUEST=tests/kernel_vm/guest

tree_key=$(./scripts/vm-tree.sh --key)
key=$( (echo "$tree_key ${EXTRA_PKGS[*]} $IMG_SIZE"; cat "$0" "$GUEST"/*) | sha1sum | cut -c1-12)
out=$CACHE/kernel-$key
if [[ ${1:-} == --key ]]; then
  echo "$key"
  exit 0
fi
[[ $(id -u) -eq 0 ]] || { echo "kernel-image: needs root (chroot, apt-get)" >&2; exit 1; }
# stdout carries the result only: mkfs.ext4 -d, apt and friends print on stdout.
exec 3>&1 1>&2
mkdir -p "$CACHE"
exec 9>"$CACHE/.kernel.lock"
flock 9
if [[ -f $out/.complete ]]; then
  echo "$out" >&3
  exit 0
fi
for t in qemu-system-x86_64 mkfs.ext4 unshare; do
  command -v "$t" >/dev/null || { echo "kernel-image: $t missing (./scripts/install-deps.sh)" >&2; exit 1; }
done
tree=$(./scripts/vm-tree.sh)
start=$SECONDS
log() { echo "kernel-image: [$((SECONDS - start)) s] $*"; }
work=$CACHE/.kernel-build-$key
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
root=$work/root
log "copying $tree"
cp -a "$tree" "$root"

# Run a command in the tree, in a private mount namespace: nothing stays mounted after.
in_root() {
  unshare -m --propagation private env DEBIAN_FRONTEND=noninteractive ROOT="$root" bash -c '
    set -e
    mount -t proc proc "$ROOT/proc"
    mount -t sysfs sys "$ROOT/sys"
    mount --rbind /dev "$ROOT/dev"
    chroot "$ROOT" "$@"' in_root "$@"
}
apt_log=$work/apt.log
apt_in_root() {
  in_root "$@" >>"$apt_log" 2>&1 || { tail -20 "$apt_log"; echo "kernel-image: $* failed" >&2; exit 1; }
}
# No service starts inside the chroot (a postinst may try).
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
cp /etc/resolv.conf "$root/etc/resolv.conf"
echo "deb $MIRROR bookworm main" >"$root/etc/apt/sources.list"
log "apt-get install ${EXTRA_PKGS[*]}"
apt_in_root apt-get update -q
apt_in_root apt-get install -y -q --no-install-recommends "${EXTRA_PKGS[@]}"
# Debian's kernel has virtio_blk and ext4 as modules: the initrd needs them, and only them
# (MODULES=most makes it ten times larger and the boot slower).
sed -i 's/^MODULES=.*/MODULES=list/' "$root/etc/initramfs-tools/initramfs.conf"
printf 'virtio_pci\nvirtio_blk\next4\n' >>"$root/etc/initramfs-tools/modules"
log "apt-get install linux-image-amd64"
apt_in_root apt-get install -y -q --no-install-recommends linux-image-amd64
kver=$(basename "$(ls -d "$root"/lib/modules/*/ | head -n 1)")
[[ -f $root/lib/modules/$kver/kernel/net/openvswitch/openvswitch.ko ]] ||
  { echo "kernel-image: kernel $kver has no openvswitch.ko" >&2; exit 1; }
log "kernel $kver"

# Drivers for hardware this VM does not have (it has virtio only): a smaller image to copy.
m=$root/lib/modules/$kver/kernel
rm -rf "$m"/sound "$m"/drivers/{gpu,media,infiniband,iio,usb,hwmon,staging,bluetooth,isdn,mtd,input,scsi} \
  "$m"/drivers/net/{wireless,ethernet} "$m"/net/{wireless,mac80211,bluetooth}
apt_in_root depmod -a "$kver"
apt_in_root apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root"/usr/share/{doc,man,locale}/* "$root/usr/sbin/policy-rc.d"

# The guest side: the runner (tests/kernel_vm/guest/), a console that does not prompt, OVS
# started by the tests (each in its own namespace) and not by the boot. The tier's reboot
# test enables what it needs itself.
install -m 0755 "$GUEST/tier-run" "$root/usr/local/sbin/"
install -m 0644 "$GUEST/tier-run.service" "$root/etc/systemd/system/"
ln -sf /etc/systemd/system/tier-run.service "$root/etc/systemd/system/multi-user.target.wants/tier-run.service"
rm -f "$root"/etc/systemd/system/*.wants/{openvswitch-switch,networking,ovs-vswitchd,ovsdb-server}.service
for u in NetworkManager.service NetworkManager-wait-online.service systemd-networkd-wait-online.service \
  dpkg-db-backup.timer e2scrub_reap.service serial-getty@.service; do
  ln -sf /dev/null "$root/etc/systemd/system/$u"
done
printf '/dev/vda / ext4 rw,noatime 0 1\n' >"$root/etc/fstab"
: >"$root/etc/resolv.conf"
: >"$root/etc/machine-id"

log "mkfs.ext4 -d ($(du -sh "$root" | cut -f1))"
cp "$root/boot/vmlinuz-$kver" "$work/vmlinuz"
cp "$root/boot/initrd.img-$kver" "$work/initrd.img"
mkfs.ext4 -q -F -L root -E lazy_itable_init=0,lazy_journal_init=0 -d "$root" "$work/root.img" "$IMG_SIZE"
rm -rf "$root"
tmp=$CACHE/.kernel-$key
rm -rf "$tmp" "$out"
mkdir -p "$tmp"
mv "$work/vmlinuz" "$work/initrd.img" "$work/root.img" "$tmp/"
echo "$kver" >"$tmp/kernel-version"
touch "$tmp/.complete"
mv "$tmp" "$out"
# Images of other keys are dead weight.
for old in "$CACHE"/kernel-*; do
  [[ $old == "$out" ]] || rm -rf "$old"
done
log "built $out (kernel $kver, $(du -sh "$out/root.img" | cut -f1) used)"
echo "$out" >&3
