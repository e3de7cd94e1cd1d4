#!/usr/bin/env bash
# cleanup-stale.sh: remove what a SIGKILLed test run left behind: network namespaces named
# tt-<pid>-* and dirs /tmp/tt-<pid>-* whose owning test process <pid> is gone (a systemd-tier
# VM's overlay mounted there is unmounted first). Only those names are touched; the processes
# killed are only those inside such a namespace (a VM's container dies with its PID 1).
set -uo pipefail

alive() { [[ -d /proc/$1 ]]; }

for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^tt-[0-9]+-' || true); do
  pid=${ns#tt-}; pid=${pid%%-*}
  alive "$pid" && continue
  ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns del "$ns" 2>/dev/null && echo "cleanup-stale: removed netns $ns" >&2
done
for d in /tmp/tt-[0-9]*-*; do
  [[ -d $d ]] || continue
  pid=${d#/tmp/tt-}; pid=${pid%%-*}
  alive "$pid" && continue
  if mountpoint -q "$d/root"; then
    # Its systemd-nspawn exits once the container's processes (killed above) are gone.
    for _ in 1 2 3 4 5 6 7 8 9 10; do umount "$d/root" 2>/dev/null && break; sleep 1; done
    mountpoint -q "$d/root" && umount -l "$d/root"
  fi
  mountpoint -q "$d/root" && { echo "cleanup-stale: $d/root still mounted; left" >&2; continue; }
  rm -rf "$d" && echo "cleanup-stale: removed $d" >&2
done
exit 0
