#!/usr/bin/env bash
# py-kubernetes.sh: a Python venv with the official Kubernetes client (`kubernetes` from
# PyPI, pinned), for tests/python_client.rs; cached under /var/cache/tether-test/ (rebuilt
# when missing or half-built). Prints the venv's python. A test tool only: nothing of it
# ships (vendor-notes/python-kubernetes.md).
set -euo pipefail
VERSION=37.0.2
if [[ $(id -u) -eq 0 ]]; then def=/var/cache/tether-test; else def=${XDG_CACHE_HOME:-$HOME/.cache}/tether-test; fi
CACHE=${TETHER_TEST_CACHE:-$def}
venv=$CACHE/py-kubernetes-$VERSION
mkdir -p "$CACHE"
exec 9>"$CACHE/.py.lock"
flock 9
if [[ -f $venv/.complete ]]; then
  echo "$venv/bin/python"
  exit 0
fi
py=$(command -v python3 || true)
if [[ -z $py ]] || ! "$py" -m venv --help >/dev/null 2>&1; then
  echo "py-kubernetes: python3 with venv missing; installing python3-venv" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-venv >&2
  py=$(command -v python3)
fi
rm -rf "$venv"
"$py" -m venv "$venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "kubernetes==$VERSION" >&2
touch "$venv/.complete"
echo "$venv/bin/python"
