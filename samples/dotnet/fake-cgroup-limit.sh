#!/usr/bin/env bash
# fake-cgroup-limit.sh BYTES CMD... — run CMD as if its memory cgroup had a limit of BYTES, the way
# a container runtime's limit looks from inside: in a private mount namespace, files holding that
# limit are bind-mounted over the cgroup's memory.limit_in_bytes and memory.stat
# (hierarchical_memory_limit), which is what the .NET runtime reads (cgroup v1). The kernel
# enforces nothing and the machine's cgroups are not changed: this machine's sessions run inside a
# cgroup that belongs to the machinery, where a real child cgroup with a limit would have to be
# made. The runtime takes its container default from what it reads (GC: heap_hard_limit =
# max(20 MiB, 75 % of the limit) when no GCHeapHardLimit is set), which is what a test needs.
set -euo pipefail
limit=$1; shift
cg=$(awk -F: '$2 == "memory" {print $3}' /proc/self/cgroup)
dir=/sys/fs/cgroup/memory$cg
[[ -f "$dir/memory.limit_in_bytes" ]] || { echo "fake-cgroup-limit: no cgroup v1 memory controller at $dir" >&2; exit 1; }
tmp=$(mktemp -d)
echo "$limit" >"$tmp/limit"
sed "s/^hierarchical_memory_limit .*/hierarchical_memory_limit $limit/" "$dir/memory.stat" >"$tmp/stat"
exec unshare -m sh -c 'mount --bind "$1/limit" "$2/memory.limit_in_bytes" && mount --bind "$1/stat" "$2/memory.stat" && shift 2 && exec "$@"' \
  sh "$tmp" "$dir" "$@"
