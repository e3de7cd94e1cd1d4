#!/bin/sh
# install.sh [--root DIR]: install the files of this tarball (tether-<v>-x86_64.tar.gz, made
# by scripts/package.sh) at the paths the .rpm uses, under DIR (default /): the binary
# /usr/bin/tether, the unit /usr/lib/systemd/system/tether.service (read by systemd on
# merged- and split-/usr systems alike), tether(8) and the docs under /usr/share.
# File by file with `install`, never a directory copied over the system's: a /lib or /bin
# that is a symlink into /usr (merged /usr) stays one, and no existing directory's mode or
# owner changes. /etc/tether/tether.yaml is the operator's once it exists: it is never
# replaced; this version's default goes beside it as tether.yaml.new (like rpm's .rpmnew).
# Like the packages' first install it starts nothing; it runs no systemctl (it says what
# to run) and touches no link.
set -eu

usage() {
    echo "install.sh: $1 (usage: install.sh [--root DIR])" >&2
    exit 2
}
root=/
while [ $# -gt 0 ]; do
    case $1 in
    --root) [ $# -ge 2 ] || usage "--root needs a directory"; root=$2; shift 2 ;;
    *) usage "unknown argument $1" ;;
    esac
done
[ -d "$root" ] || usage "no directory $root"
# Absolute (the files are read from this script's directory); "/" becomes "".
root=$(cd "$root" && pwd)
root=${root%/}
cd "$(dirname "$0")"
# Directories made here are 0755 whatever the caller's umask; files get explicit modes.
umask 022

# $1: a directory, made only if missing (an existing one, or a symlink to one, is kept as is).
dir() {
    [ -d "$1" ] || install -d -m "${2:-0755}" "$1"
}

find usr -type f | sort | while IFS= read -r f; do
    case $f in
    usr/bin/*) mode=0755 ;;
    *) mode=0644 ;;
    esac
    dir "$root/$(dirname "$f")"
    install -m "$mode" "$f" "$root/$f"
done

dir "$root/etc/tether" 0700
config=$root/etc/tether/tether.yaml
if [ -e "$config" ] || [ -L "$config" ]; then
    install -m 0600 etc/tether/tether.yaml "$config.new"
    echo "tether: kept $config; this version's default is beside it: $config.new"
else
    install -m 0600 etc/tether/tether.yaml "$config"
fi

cat <<'NEXT'
tether: installed, not started. Edit /etc/tether/tether.yaml, check it with
  tether check --config /etc/tether/tether.yaml
then start it: systemctl daemon-reload && systemctl enable --now tether
(an upgrade: systemctl daemon-reload && systemctl try-restart tether)
NEXT
