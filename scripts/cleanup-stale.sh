#!/usr/bin/env bash
# cleanup-stale.sh: remove what a SIGKILLed test run left behind: network namespaces named
# tt-<pid>-* and dirs /tmp/tt-<pid>-* whose owning test process <pid> is gone. Only those
# names are touched; the processes killed are only those inside such a namespace.
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
  rm -rf "$d" && echo "cleanup-stale: removed $d" >&2
done
exit 0
