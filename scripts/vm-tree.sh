#!/usr/bin/env bash
# vm-tree.sh: the Debian bookworm tree the systemd tier boots with systemd-nspawn (a VM with
# a real systemd as PID 1, Open vSwitch, systemd-networkd, ifupdown/dhclient and
# NetworkManager). Built once with debootstrap and cached under /var/cache/tether-test/,
# keyed by everything below that shapes it (suite, packages, the preparation steps); a
# missing or half-built tree is rebuilt. Prints the tree's path. Needs root and a Debian
# mirror (TETHER_VM_MIRROR, default deb.debian.org).
#   ./scripts/vm-tree.sh           build if missing, print the path
#   ./scripts/vm-tree.sh --key     print the cache key only
set -euo pipefail

SUITE=bookworm
MIRROR=${TETHER_VM_MIRROR:-http://deb.debian.org/debian}
PKGS=systemd,systemd-sysv,dbus,libpam-systemd,iproute2,procps,openvswitch-switch,iputils-ping,ifupdown,isc-dhcp-client,network-manager,util-linux
# Bump when prepare() changes: the key must change with the tree.
PREP_VERSION=1
CACHE=/var/cache/tether-test

prepare() {
  local root=$1
  echo vm >"$root/etc/hostname"
  printf '127.0.0.1 localhost\n127.0.1.1 vm\n' >"$root/etc/hosts"
  # The NIC is the tests' to configure: no network manager runs unless a test enables one.
  # (Debian enables NetworkManager when installed; networkd and ifupdown manage nothing yet.)
  chroot "$root" systemctl disable NetworkManager.service NetworkManager-wait-online.service \
    NetworkManager-dispatcher.service >/dev/null 2>&1 || true
  chroot "$root" systemctl mask systemd-timesyncd.service apt-daily.timer \
    apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer >/dev/null 2>&1 || true
  # No login prompts on the (piped) console.
  chroot "$root" systemctl mask console-getty.service getty@.service >/dev/null 2>&1 || true
  rm -rf "$root/var/cache/apt/archives/"*.deb "$root/var/lib/apt/lists/"*
}

key=$(printf '%s|%s|%s|%s\n' "$SUITE" minbase "$PKGS" "$PREP_VERSION" | sha1sum | cut -c1-12)
tree=$CACHE/$SUITE-$key
if [[ ${1:-} == --key ]]; then
  echo "$key"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "vm-tree: needs root (debootstrap)" >&2
  exit 1
fi
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9
if [[ -f $tree/.complete ]]; then
  echo "$tree"
  exit 0
fi
for t in debootstrap systemd-nspawn; do
  command -v "$t" >/dev/null || { echo "vm-tree: $t missing (./scripts/install-deps.sh)" >&2; exit 1; }
done
tmp=$CACHE/.build-$SUITE-$key
rm -rf "$tmp" "$tree"
start=$SECONDS
echo "vm-tree: building $tree (debootstrap $SUITE: $PKGS)" >&2
if ! debootstrap --variant=minbase --include="$PKGS" "$SUITE" "$tmp" "$MIRROR" >"$CACHE/.build.log" 2>&1; then
  tail -20 "$CACHE/.build.log" >&2
  echo "vm-tree: debootstrap failed (log: $CACHE/.build.log)" >&2
  exit 1
fi
prepare "$tmp"
touch "$tmp/.complete"
mv "$tmp" "$tree"
# Older trees (another key) are dead weight.
for old in "$CACHE/$SUITE"-*; do
  [[ $old == "$tree" ]] || rm -rf "$old"
done
rm -rf "$CACHE/try"
echo "vm-tree: built in $((SECONDS - start)) s ($(du -sh "$tree" | cut -f1))" >&2
echo "$tree"
