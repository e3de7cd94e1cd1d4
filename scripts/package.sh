#!/usr/bin/env bash
# package.sh [--binary PATH] [--version V] [--out DIR] [--formats deb,rpm,tar] [--fast]: the packages
# of the static binary (README "Install"):
#   tether_<v>_amd64.deb        dpkg-deb; Depends: openvswitch-switch
#   tether-<v>-1.x86_64.rpm     rpmbuild (package rpm); Requires: openvswitch
#   tether-<v>-x86_64.tar.gz    the .rpm's tree under one directory, for anything else, with
#                               install.sh (deploy/packaging/tar/) and an INSTALL note
# Each holds /usr/bin/tether, the systemd unit, /etc/tether/tether.yaml (mode 0600, a
# config file kept on upgrade), the RBAC, the example manifests and the README under
# /usr/share/doc/tether, and the man page tether(8) made from `tether --help`.
# Every mode is set here, none comes from the caller's umask: directories 0755 (/etc/tether
# 0700), the binary and install.sh 0755, the config 0600, everything else 0644.
# Maintainer scripts (deploy/packaging/): install does not start tether (it needs its config);
# an upgrade restarts it only if it was running; remove stops it and leaves the network as
# it is, saying how to get the NIC back (`tether reset`). None of them touches a link.
# Defaults: the static build (./scripts/build-static.sh), Cargo.toml's version, dist/.
set -euo pipefail
# What is not given a mode below (a parent made by `install -d`, anything added later) is
# made under this umask, not the caller's.
umask 022
cd "$(dirname "$0")/.."

binary=target/x86_64-unknown-linux-musl/release/tether
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
out=dist
formats=deb,rpm,tar
fast=0
while (($#)); do
  case $1 in
    --binary) binary=$2; shift 2 ;;
    --version) version=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --formats) formats=$2; shift 2 ;;
    # The fastest compression each format has (the tests: their packages hold a debug
    # binary, which xz took minutes of CPU over): the contents are the same.
    --fast) fast=1; shift ;;
    *) echo "package.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [[ ! -x $binary ]]; then
  echo "package.sh: no binary at $binary (./scripts/build-static.sh builds it)" >&2
  exit 1
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The tree every format installs. $1: root; $2: the unit directory.
stage() {
  local root=$1 unitdir=$2
  install -d -m 0755 "$root" "$root/usr/bin"
  install -m 0755 "$binary" "$root/usr/bin/tether"
  # The unit as shipped points at /usr/local/bin (a hand install); a package owns /usr/bin.
  install -d -m 0755 "$root$unitdir"
  sed 's|^ExecStart=/usr/local/bin/tether |ExecStart=/usr/bin/tether |' systemd/tether.service \
    >"$root$unitdir/tether.service"
  chmod 0644 "$root$unitdir/tether.service"
  install -d -m 0700 "$root/etc/tether"
  install -m 0600 deploy/tether.yaml "$root/etc/tether/tether.yaml"
  local doc=$root/usr/share/doc/tether
  install -d -m 0755 "$doc/examples"
  install -m 0644 README.md deploy/rbac.yaml "$doc/"
  install -m 0644 deploy/examples/*.yaml "$doc/examples/"
  printf 'tether %s\nLicense: Apache-2.0 (https://www.apache.org/licenses/LICENSE-2.0)\n' \
    "$version" >"$doc/copyright"
  chmod 0644 "$doc/copyright"
  install -d -m 0755 "$root/usr/share/man/man8"
  man_page | gzip -9n >"$root/usr/share/man/man8/tether.8.gz"
  chmod 0644 "$root/usr/share/man/man8/tether.8.gz"
}

# tether(8): the --help text of every command, verbatim.
man_page() {
  printf '.TH TETHER 8 "" "tether %s" "System Administration"\n' "$version"
  printf '.SH NAME\ntether \\- Antrea ExternalNode and TrafficControl for Open vSwitch on a VM\n'
  printf '.SH SYNOPSIS\n.B tether\n.I command\n[flags]\n.SH DESCRIPTION\n.nf\n'
  { "$binary" --help
    for c in plan flows reset; do echo; "$binary" "$c" --help; done
  } | sed -e 's/\\/\\e/g' -e 's/^\./\\\&./'
  printf '.fi\n.SH FILES\n/etc/tether/tether.yaml, /usr/share/doc/tether/\n'
}

build_deb() {
  local root=$work/deb
  stage "$root" /lib/systemd/system
  install -d -m 0755 "$root/DEBIAN"
  local size
  size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
  cat >"$root/DEBIAN/control" <<EOF
Package: tether
Version: $version
Architecture: amd64
Maintainer: tether maintainers <tether@example.invalid>
Depends: openvswitch-switch
Section: net
Priority: optional
Installed-Size: $size
Homepage: https://example.invalid/tether
Description: Antrea's ExternalNode and TrafficControl controllers for a plain Linux VM
 One static binary that watches the Kubernetes API (or a manifests directory), programs
 Open vSwitch and moves the VM's uplink into OVS. License: Apache-2.0.
EOF
  echo /etc/tether/tether.yaml >"$root/DEBIAN/conffiles"
  chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/conffiles"
  for s in postinst prerm postrm; do
    install -m 0755 "deploy/packaging/deb/$s" "$root/DEBIAN/$s"
  done
  local z=()
  ((fast)) && z=(-Zgzip -z1)
  dpkg-deb --root-owner-group "${z[@]}" --build "$root" "$out/tether_${version}_amd64.deb" >/dev/null
  echo "$out/tether_${version}_amd64.deb"
}

build_rpm() {
  command -v rpmbuild >/dev/null || {
    echo "package.sh: rpmbuild missing (apt-get install rpm)" >&2
    return 1
  }
  local top=$work/rpm root=$work/rpm-root
  stage "$root" /usr/lib/systemd/system
  mkdir -p "$top"/{BUILD,RPMS,SPECS,SRPMS,SOURCES}
  # Scriptlets from deploy/packaging/rpm/, inlined into the spec.
  sed -e "s/@VERSION@/$version/" \
    -e "/@PRE_UN@/{r deploy/packaging/rpm/preun" -e "d}" \
    -e "/@POST@/{r deploy/packaging/rpm/post" -e "d}" \
    -e "/@POST_UN@/{r deploy/packaging/rpm/postun" -e "d}" \
    deploy/packaging/rpm/tether.spec >"$top/SPECS/tether.spec"
  local z=()
  ((fast)) && z=(--define "_binary_payload w1.gzdio")
  rpmbuild --quiet -bb "${z[@]}" --define "_topdir $top" --define "_buildrootdir $work/rpm-buildroot" \
    --define "_tether_root $root" --define "_build_id_links none" \
    --define "__os_install_post %{nil}" --define "debug_package %{nil}" \
    "$top/SPECS/tether.spec"
  cp "$top/RPMS/x86_64/tether-$version-1.x86_64.rpm" "$out/"
  echo "$out/tether-$version-1.x86_64.rpm"
}

build_tar() {
  local name=tether-$version-x86_64
  local root=$work/tar/$name
  # The .rpm's paths: /usr/lib/systemd/system is read on merged- and split-/usr systems, and
  # the tree has no top-level lib/ to be copied over a /lib that is a symlink.
  stage "$root" /usr/lib/systemd/system
  install -m 0755 deploy/packaging/tar/install.sh "$root/install.sh"
  cat >"$root/INSTALL" <<'EOF'
tether: install this tree's files at their paths under / (as root, from this directory):
  ./install.sh
(--root DIR: under DIR instead). It puts each file in place with `install`, so a /lib or
/bin that is a symlink into /usr stays one, and never replaces an existing
/etc/tether/tether.yaml: the new default goes beside it as /etc/tether/tether.yaml.new.
Then configure and start (after an upgrade: systemctl daemon-reload && systemctl
try-restart tether):
  $EDITOR /etc/tether/tether.yaml
  tether check --config /etc/tether/tether.yaml
  systemctl daemon-reload && systemctl enable --now tether
To give the NIC back before removing: systemctl stop tether && tether reset
EOF
  chmod 0644 "$root/INSTALL"
  local gz=gzip
  ((fast)) && gz="gzip -1"
  tar -C "$work/tar" --owner=0 --group=0 -I "$gz" -cf "$out/$name.tar.gz" "$name"
  echo "$out/$name.tar.gz"
}

IFS=, read -ra want <<<"$formats"
for f in "${want[@]}"; do
  case $f in
    deb) build_deb ;;
    rpm) build_rpm ;;
    tar) build_tar ;;
    *) echo "package.sh: unknown format $f" >&2; exit 2 ;;
  esac
done
