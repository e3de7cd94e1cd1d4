#!/usr/bin/env bash
# vendor.sh [OUT.tar.gz]: a source tarball that builds without a network: the tracked
# sources, vendor/ (every crate of Cargo.lock, from `cargo vendor --locked`) and a
# .cargo/config.toml that replaces crates.io by vendor/ and turns cargo offline.
# Build it on the air-gapped host (vendor-notes/README.md):
#   tar xzf tether-<v>-vendored.tar.gz && cd tether-<v> && ./scripts/build-static.sh --offline
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
name=tether-$version
out=${1:-target/$name-vendored.tar.gz}
[[ $out = /* ]] || out=$PWD/$out
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/$name"

# The tracked files as they are in the work tree (a release is cut from a clean tree).
if git rev-parse --git-dir >/dev/null 2>&1; then
  git ls-files -z --cached --others --exclude-standard | xargs -0 -I{} sh -c '[ -e "{}" ] && printf "%s\0" "{}"' |
    tar --null -T - -cf - | tar -xf - -C "$stage/$name"
else
  tar --exclude=./target --exclude=./vendor -cf - . | tar -xf - -C "$stage/$name"
fi
cargo vendor -q --locked --versioned-dirs "$stage/$name/vendor" >/dev/null
mkdir -p "$stage/$name/.cargo"
# The stanza `cargo vendor` prints, plus offline mode.
cat >"$stage/$name/.cargo/config.toml" <<'TOML'
# Written by scripts/vendor.sh: build from vendor/ only, never the network.
[source.crates-io]
replace-with = "vendored-sources"

[source.vendored-sources]
directory = "vendor"

[net]
offline = true
TOML
mkdir -p "$(dirname "$out")"
tar -C "$stage" -czf "$out" "$name"
echo "vendor: $out $(stat -c %s "$out") bytes, $(ls "$stage/$name/vendor" | wc -l) crates" >&2
echo "$out"
